/* A growing NUL-terminated string (strbuf.h). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strbuf.h"

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
