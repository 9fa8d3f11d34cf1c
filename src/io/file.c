/* Whole-file reads for the readers of src/io/. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "io_internal.h"

char *pd_io_read_file(const char *path, size_t *size, const char *what) {
  if (!path) {
    pd_set_error(PD_ERR_INVALID, "%s: path is NULL", what);
    return NULL;
  }
  FILE *f = fopen(path, "rb");
  if (!f) {
    pd_set_error(PD_ERR_IO, "%s: cannot open '%s': %s", what, path, strerror(errno));
    return NULL;
  }
  size_t cap = 1 << 16, n = 0;
  char *buf = malloc(cap + 1);
  while (buf) {
    if (n == cap) {
      char *b = cap > (SIZE_MAX - 1) / 2 ? NULL : realloc(buf, cap * 2 + 1);
      if (!b) {
        free(buf);
        buf = NULL;
        break;
      }
      buf = b;
      cap *= 2;
    }
    size_t got = fread(buf + n, 1, cap - n, f);
    n += got;
    if (got == 0) break;
  }
  if (!buf) {
    fclose(f);
    pd_set_error(PD_ERR_MEMORY, "%s: out of memory reading '%s'", what, path);
    return NULL;
  }
  if (ferror(f)) {
    int e = errno;
    fclose(f);
    free(buf);
    pd_set_error(PD_ERR_IO, "%s: cannot read '%s': %s", what, path, strerror(e));
    return NULL;
  }
  fclose(f);
  buf[n] = '\0';
  *size = n;
  return buf;
}
