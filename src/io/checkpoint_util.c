/* The UTF-8 validator of the checkpoint reader and writer. */
#include <stddef.h>

#include "checkpoint_internal.h"

int pd_utf8_valid(const unsigned char *s, size_t n, size_t *bad) {
  size_t i = 0;
  while (i < n) {
    unsigned c = s[i];
    if (c < 0x80) {
      i++;
      continue;
    }
    size_t len;
    unsigned cp, min;
    if ((c & 0xE0) == 0xC0) {
      len = 2, cp = c & 0x1F, min = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3, cp = c & 0x0F, min = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4, cp = c & 0x07, min = 0x10000;
    } else {
      break;
    }
    if (n - i < len) break;
    size_t k = 1;
    for (; k < len && (s[i + k] & 0xC0) == 0x80; k++) cp = (cp << 6) | (s[i + k] & 0x3F);
    if (k < len || cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) break;
    i += len;
  }
  if (i < n && bad) *bad = i;
  return i == n;
}
