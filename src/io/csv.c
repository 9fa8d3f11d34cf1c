/* CSV files of numbers into a 2-D tensor. */
#define _GNU_SOURCE /* strtod_l */
#include <locale.h>
#include <stdlib.h>
#include <string.h>

#include "io_internal.h"
#include "paddlec/creation.h"

static bool is_blank(char c, char delim) { return (c == ' ' || c == '\t') && c != delim; }

pd_tensor *pd_io_load_csv(const char *path, const pd_io_csv_opts *opts) {
  static const pd_io_csv_opts defaults = {0};
  const pd_io_csv_opts *o = opts ? opts : &defaults;
  char delim = o->delimiter ? o->delimiter : ',';
  pd_dtype dt = o->dtype == 0 ? PD_FLOAT32 : o->dtype;
  if (dt != PD_FLOAT32 && dt != PD_FLOAT64) {
    pd_set_error(PD_ERR_DTYPE, "load_csv: dtype %s (float32 or float64 only)", pd_dtype_name(dt));
    return NULL;
  }
  if (delim == '\n' || delim == '\r' || delim == '.' || delim == '-' || delim == '+' ||
      (delim >= '0' && delim <= '9') || delim == 'e' || delim == 'E') {
    pd_set_error(PD_ERR_INVALID, "load_csv: delimiter '%c' cannot separate numbers", delim);
    return NULL;
  }
  size_t size;
  char *text = pd_io_read_file(path, &size, "load_csv");
  if (!text) return NULL;
  /* strtod in the C locale whatever the program's locale */
  locale_t c_locale = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
  double *vals = NULL;
  size_t nvals = 0, cap = 0;
  int64_t rows = 0, cols = -1;
  bool skip_header = o->header;
  pd_tensor *t = NULL;
  char cell[64];
  if (!c_locale) {
    pd_set_error(PD_ERR_MEMORY, "load_csv: cannot make the C locale");
    goto done;
  }
  size_t text_len = strlen(text);
  if (text_len != size) { /* a NUL byte */
    int64_t nul_line = 1;
    for (size_t i = 0; i < text_len; i++) nul_line += text[i] == '\n';
    pd_set_error(PD_ERR_IO, "load_csv: '%s': line %lld holds a NUL byte (not a text file?)", path,
                 (long long)nul_line);
    goto done;
  }
  const char *p = text, *end = text + size;
  int64_t line = 0;
  while (p < end) {
    line++;
    const char *eol = memchr(p, '\n', (size_t)(end - p));
    if (!eol) eol = end;
    const char *next = eol < end ? eol + 1 : end;
    const char *le = eol;
    if (le > p && le[-1] == '\r') le--;
    const char *q = p;
    while (q < le && (*q == ' ' || *q == '\t')) q++;
    if (q == le) { /* blank line */
      p = next;
      continue;
    }
    if (skip_header) {
      skip_header = false;
      p = next;
      continue;
    }
    int64_t col = 0;
    const char *c = p;
    for (;;) {
      col++;
      const char *ce = c;
      while (ce < le && *ce != delim) ce++;
      const char *s = c, *e = ce;
      while (s < e && is_blank(*s, delim)) s++;
      while (e > s && is_blank(e[-1], delim)) e--;
      size_t len = (size_t)(e - s);
      snprintf(cell, sizeof cell, "%.*s%s", (int)(len > 40 ? 40 : len), s, len > 40 ? "..." : "");
      if (len == 0) {
        pd_set_error(PD_ERR_IO, "load_csv: '%s': line %lld, column %lld: empty cell", path, (long long)line,
                     (long long)col);
        goto done;
      }
      char num[128];
      if (len >= sizeof num) {
        pd_set_error(PD_ERR_IO, "load_csv: '%s': line %lld, column %lld: '%s' is not a number", path,
                     (long long)line, (long long)col, cell);
        goto done;
      }
      memcpy(num, s, len);
      num[len] = '\0';
      char *stop;
      double v = strtod_l(num, &stop, c_locale);
      if (stop != num + len || stop == num) {
        pd_set_error(PD_ERR_IO, "load_csv: '%s': line %lld, column %lld: '%s' is not a number", path,
                     (long long)line, (long long)col, cell);
        goto done;
      }
      if (nvals == cap) {
        size_t ncap = cap ? cap * 2 : 1024;
        double *nv = realloc(vals, ncap * sizeof *nv);
        if (!nv) {
          pd_set_error(PD_ERR_MEMORY, "load_csv: '%s': out of memory", path);
          goto done;
        }
        vals = nv;
        cap = ncap;
      }
      vals[nvals++] = v;
      if (ce >= le) break;
      c = ce + 1;
    }
    if (cols < 0) cols = col;
    if (col != cols) {
      pd_set_error(PD_ERR_IO, "load_csv: '%s': line %lld has %lld columns, earlier rows have %lld", path,
                   (long long)line, (long long)col, (long long)cols);
      goto done;
    }
    rows++;
    p = next;
  }
  if (cols < 0) cols = 0;
  pd_internal_enter();
  t = pd_tensor_from_f64(vals ? vals : (const double[]){0}, dt, 2, (const int64_t[]){rows, cols});
  pd_internal_leave();
  t = pd_scope_track(t);
done:
  if (c_locale) freelocale(c_locale);
  free(vals);
  free(text);
  return t;
}
