/* idx files (the MNIST format), read through zlib's gzread so gzipped and
 * plain files both work. */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "../ops/op_registry.h"
#include "io_internal.h"
#include "paddlec/creation.h"

/* gzread into buf until n bytes or the end; returns the count or -1 (why set) */
static int64_t read_all(gzFile f, unsigned char *buf, int64_t n, char *why, size_t whycap) {
  int64_t got = 0;
  while (got < n) {
    int64_t want = n - got > (1 << 30) ? (1 << 30) : n - got;
    int k = gzread(f, buf + got, (unsigned)want);
    if (k < 0) {
      int err;
      const char *m = gzerror(f, &err);
      snprintf(why, whycap, "%s", err == Z_ERRNO ? strerror(errno) : m);
      return -1;
    }
    if (k == 0) break;
    got += k;
  }
  /* a truncated gzip stream reports itself only through gzerror */
  int err;
  const char *m = gzerror(f, &err);
  if (err != Z_OK && err != Z_STREAM_END) {
    snprintf(why, whycap, "%s", err == Z_ERRNO ? strerror(errno) : m);
    return -1;
  }
  return got;
}

pd_tensor *pd_io_load_idx(const char *path) {
  if (!path) {
    pd_set_error(PD_ERR_INVALID, "load_idx: path is NULL");
    return NULL;
  }
  gzFile f = gzopen(path, "rb");
  if (!f) {
    pd_set_error(PD_ERR_IO, "load_idx: cannot open '%s': %s", path,
                 errno ? strerror(errno) : "out of memory");
    return NULL;
  }
  char why[256];
  unsigned char hdr[4 + 4 * 255];
  unsigned char *data = NULL;
  pd_tensor *t = NULL;
  int64_t got = read_all(f, hdr, 4, why, sizeof why);
  if (got < 0) goto io_fail;
  if (got < 4) {
    snprintf(why, sizeof why, "%lld bytes, too short for an idx header", (long long)got);
    goto fail;
  }
  uint32_t magic = (uint32_t)hdr[0] << 24 | (uint32_t)hdr[1] << 16 | (uint32_t)hdr[2] << 8 | hdr[3];
  pd_dtype dt;
  switch (hdr[2]) {
    case 0x08:
      dt = PD_UINT8;
      break;
    case 0x09:
      dt = PD_INT8;
      break;
    case 0x0B:
      dt = PD_INT16;
      break;
    case 0x0C:
      dt = PD_INT32;
      break;
    case 0x0D:
      dt = PD_FLOAT32;
      break;
    case 0x0E:
      dt = PD_FLOAT64;
      break;
    default:
      dt = PD_NUM_DTYPES;
  }
  int ndim = hdr[3];
  if (hdr[0] != 0 || hdr[1] != 0 || dt == PD_NUM_DTYPES || ndim < 1 || ndim > PD_MAX_DIMS) {
    snprintf(why, sizeof why,
             "bad magic number 0x%08x (want 0x0000TTNN: type TT 08, 09, 0B, 0C, 0D or 0E, 1 to %d dims NN)",
             magic, PD_MAX_DIMS);
    goto fail;
  }
  got = read_all(f, hdr + 4, 4 * ndim, why, sizeof why);
  if (got < 0) goto io_fail;
  if (got < 4 * ndim) {
    snprintf(why, sizeof why, "the header of %d sizes is truncated", ndim);
    goto fail;
  }
  int64_t shape[PD_MAX_DIMS], numel = 1, span = 1;
  size_t sz = pd_dtype_size(dt);
  for (int i = 0; i < ndim; i++) {
    const unsigned char *p = hdr + 4 + 4 * i;
    shape[i] = (int64_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]);
  }
  /* the product of the sizes must fit, also with zeros counted as 1 (the
   * strides of an empty tensor are made of its other sizes) */
  for (int i = 0; i < ndim; i++) {
    int64_t d = shape[i] ? shape[i] : 1;
    if (span > (INT64_MAX / 16) / d) {
      snprintf(why, sizeof why, "sizes %s are too large", pd_shape_str(ndim, shape, (char[160]){0}, 160));
      goto fail;
    }
    span *= d;
    numel *= shape[i];
  }
  int64_t nbytes = numel * (int64_t)sz;
  /* grow the buffer as data arrives (from 64 KiB, doubling): a header that
   * lies about the sizes costs no big allocation */
  int64_t cap = nbytes < (1 << 16) ? nbytes : (1 << 16), have = 0;
  data = malloc((size_t)(cap > 0 ? cap : 1));
  while (data) {
    int64_t k = read_all(f, data + have, cap - have, why, sizeof why);
    if (k < 0) goto io_fail;
    have += k;
    if (have < cap || cap == nbytes) break;
    int64_t ncap = cap * 2 < nbytes ? cap * 2 : nbytes;
    unsigned char *q = realloc(data, (size_t)ncap);
    if (!q) {
      free(data);
      data = NULL;
      break;
    }
    data = q;
    cap = ncap;
  }
  if (!data) {
    gzclose(f);
    pd_set_error(PD_ERR_MEMORY, "load_idx: '%s': out of memory for %lld bytes", path, (long long)nbytes);
    return NULL;
  }
  if (have < nbytes) {
    snprintf(why, sizeof why, "%lld bytes of data, but sizes %s of %s need %lld (truncated file)",
             (long long)have, pd_shape_str(ndim, shape, (char[160]){0}, 160), pd_dtype_name(dt),
             (long long)nbytes);
    goto fail;
  }
  unsigned char extra;
  got = read_all(f, &extra, 1, why, sizeof why);
  if (got < 0) goto io_fail;
  if (got) {
    snprintf(why, sizeof why, "data continues past the %lld bytes that sizes %s of %s take",
             (long long)nbytes, pd_shape_str(ndim, shape, (char[160]){0}, 160), pd_dtype_name(dt));
    goto fail;
  }
  gzclose(f);
  pd_internal_enter();
  t = pd_empty_eager(ndim, shape, dt);
  pd_internal_leave();
  if (!t) {
    free(data);
    return NULL;
  }
  unsigned char *dst = pd_tensor_data(t);
  if (nbytes) memcpy(dst, data, (size_t)nbytes);
  free(data);
  if (sz > 1) /* big-endian on disk */
    for (int64_t i = 0; i < numel; i++)
      for (size_t a = 0, b = sz - 1; a < b; a++, b--) {
        unsigned char c = dst[i * (int64_t)sz + (int64_t)a];
        dst[i * (int64_t)sz + (int64_t)a] = dst[i * (int64_t)sz + (int64_t)b];
        dst[i * (int64_t)sz + (int64_t)b] = c;
      }
  return pd_scope_track(t);
io_fail:
  free(data);
  gzclose(f);
  pd_set_error(PD_ERR_IO, "load_idx: '%s': read error: %s", path, why);
  return NULL;
fail:
  free(data);
  gzclose(f);
  pd_set_error(PD_ERR_IO, "load_idx: '%s': %s", path, why);
  return NULL;
}
