/* A growing NUL-terminated string, for the text the library builds (the
 * checkpoint header, summary and flops tables). Internal. */
#ifndef PADDLEC_STRBUF_H
#define PADDLEC_STRBUF_H

#include <stddef.h>
#include <stdint.h>

/* A growing NUL-terminated string. On allocation failure `failed` is set and
 * later appends do nothing. */
typedef struct pd_strbuf {
  char *s;
  size_t len, cap;
  int failed;
} pd_strbuf;
void pd_sb_append(pd_strbuf *b, const char *s, size_t n);
void pd_sb_puts(pd_strbuf *b, const char *s);
void pd_sb_printf(pd_strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void pd_sb_repeat(pd_strbuf *b, char c, size_t n);
/* "[1, 10]" */
void pd_sb_shape(pd_strbuf *b, int ndim, const int64_t *shape);

#endif
