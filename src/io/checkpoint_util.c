/* Small helpers of src/io's checkpoint, summary and flops code: a string
 * builder and a UTF-8 validator. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint_internal.h"

static int sb_reserve(pd_strbuf *b, size_t extra) {
  if (b->failed) return 0;
  if (b->len + extra + 1 <= b->cap) return 1;
  size_t cap = b->cap ? b->cap : 256;
  while (cap < b->len + extra + 1) cap *= 2;
  char *s = realloc(b->s, cap);
  if (!s) {
    b->failed = 1;
    return 0;
  }
  b->s = s;
  b->cap = cap;
  return 1;
}

void pd_sb_append(pd_strbuf *b, const char *s, size_t n) {
  if (!sb_reserve(b, n)) return;
  memcpy(b->s + b->len, s, n);
  b->len += n;
  b->s[b->len] = 0;
}

void pd_sb_puts(pd_strbuf *b, const char *s) { pd_sb_append(b, s, strlen(s)); }

void pd_sb_printf(pd_strbuf *b, const char *fmt, ...) {
  char small[256];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(small, sizeof small, fmt, ap);
  va_end(ap);
  if (n < 0) {
    b->failed = 1;
    return;
  }
  if ((size_t)n < sizeof small) {
    pd_sb_append(b, small, (size_t)n);
    return;
  }
  if (!sb_reserve(b, (size_t)n)) return;
  va_start(ap, fmt);
  vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
}

void pd_sb_repeat(pd_strbuf *b, char c, size_t n) {
  if (!sb_reserve(b, n)) return;
  memset(b->s + b->len, c, n);
  b->len += n;
  b->s[b->len] = 0;
}

void pd_sb_shape(pd_strbuf *b, int ndim, const int64_t *shape) {
  pd_sb_puts(b, "[");
  for (int i = 0; i < ndim; i++) pd_sb_printf(b, "%s%lld", i ? ", " : "", (long long)shape[i]);
  pd_sb_puts(b, "]");
}

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
