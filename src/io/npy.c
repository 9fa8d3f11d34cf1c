/* NumPy .npy files: a strict reader of the format's header (a Python dict
 * literal with descr, fortran_order and shape) and a writer. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../ops/op_registry.h"
#include "io_internal.h"
#include "paddlec/creation.h"

static const char k_magic[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};

typedef struct npy_info {
  pd_dtype dtype;
  bool swap; /* big-endian data */
  bool fortran;
  int ndim;
  int64_t shape[PD_MAX_DIMS];
} npy_info;

/* ---- the header: {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } ---- */
typedef struct parser {
  const char *p, *end;
  char *why;
  size_t whycap;
} parser;

static bool fail(parser *ps, const char *what) {
  snprintf(ps->why, ps->whycap, "%s", what);
  return false;
}

static void skip_ws(parser *ps) {
  while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r')) ps->p++;
}

static bool expect_char(parser *ps, char c, const char *what) {
  skip_ws(ps);
  if (ps->p >= ps->end || *ps->p != c) return fail(ps, what);
  ps->p++;
  return true;
}

/* a quoted Python string without escapes */
static bool parse_string(parser *ps, char *out, size_t cap, const char *what) {
  skip_ws(ps);
  if (ps->p >= ps->end || (*ps->p != '\'' && *ps->p != '"')) return fail(ps, what);
  char q = *ps->p++;
  size_t n = 0;
  while (ps->p < ps->end && *ps->p != q) {
    if (*ps->p == '\\' || n + 1 >= cap) return fail(ps, what);
    out[n++] = *ps->p++;
  }
  if (ps->p >= ps->end) return fail(ps, what);
  ps->p++;
  out[n] = '\0';
  return true;
}

static bool starts(parser *ps, const char *word) {
  size_t n = strlen(word);
  if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n) != 0) return false;
  ps->p += n;
  return true;
}

static bool parse_descr(parser *ps, npy_info *info) {
  skip_ws(ps);
  if (ps->p < ps->end && *ps->p == '[') return fail(ps, "structured dtypes (a list descr) are not supported");
  char d[16];
  if (!parse_string(ps, d, sizeof d, "'descr' is not a dtype string")) return false;
  char order = d[0];
  if (order != '<' && order != '>' && order != '|' && order != '=') {
    snprintf(ps->why, ps->whycap, "descr '%s' has no byte order ('<', '>', '|' or '=')", d);
    return false;
  }
  static const struct {
    const char *code;
    pd_dtype dt;
  } k[] = {{"b1", PD_BOOL},  {"u1", PD_UINT8},   {"i1", PD_INT8},    {"i2", PD_INT16},   {"i4", PD_INT32},
           {"i8", PD_INT64}, {"f2", PD_FLOAT16}, {"f4", PD_FLOAT32}, {"f8", PD_FLOAT64}, {"V2", PD_BFLOAT16}};
  for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
    if (strcmp(d + 1, k[i].code) != 0) continue;
    size_t sz = pd_dtype_size(k[i].dt);
    if (order == '|' && sz > 1 && k[i].dt != PD_BFLOAT16) {
      snprintf(ps->why, ps->whycap, "descr '%s': a %zu-byte number needs a byte order, not '|'", d, sz);
      return false;
    }
    info->dtype = k[i].dt;
    info->swap = order == '>' && sz > 1 && k[i].dt != PD_BFLOAT16;
    return true;
  }
  snprintf(ps->why, ps->whycap,
           "unsupported dtype '%s' (supported: b1 u1 i1 i2 i4 i8 f2 f4 f8, V2 as bfloat16)", d);
  return false;
}

static bool parse_shape(parser *ps, npy_info *info) {
  if (!expect_char(ps, '(', "'shape' is not a tuple")) return false;
  info->ndim = 0;
  for (;;) {
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == ')') {
      ps->p++;
      return true;
    }
    if (ps->p >= ps->end || *ps->p < '0' || *ps->p > '9')
      return fail(ps, "'shape' holds something not a size");
    int64_t v = 0;
    while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') {
      if (v > (INT64_MAX - 9) / 10) return fail(ps, "a size in 'shape' overflows int64");
      v = v * 10 + (*ps->p++ - '0');
    }
    if (ps->p < ps->end && *ps->p == 'L') ps->p++; /* Python 2 longs */
    if (info->ndim == PD_MAX_DIMS) {
      snprintf(ps->why, ps->whycap, "'shape' has more than %d dims", PD_MAX_DIMS);
      return false;
    }
    info->shape[info->ndim++] = v;
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == ',') {
      ps->p++;
    } else if (ps->p < ps->end && *ps->p == ')') {
      if (info->ndim == 1) return fail(ps, "'shape' (n) is not a tuple; a 1-D shape is written (n,)");
    } else {
      return fail(ps, "'shape' is not a tuple of sizes");
    }
  }
}

static bool parse_header(const char *h, size_t n, npy_info *info, char *why, size_t whycap) {
  parser ps = {h, h + n, why, whycap};
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)h[i] >= 0x7f ||
        ((unsigned char)h[i] < 0x20 && h[i] != '\n' && h[i] != '\r' && h[i] != '\t'))
      return fail(&ps, "the header holds a byte that is not printable ASCII");
  if (!expect_char(&ps, '{', "the header is not a dict")) return false;
  bool seen[3] = {false, false, false};
  for (;;) {
    skip_ws(&ps);
    if (ps.p < ps.end && *ps.p == '}') {
      ps.p++;
      break;
    }
    char key[32];
    if (!parse_string(&ps, key, sizeof key, "the header dict has a key that is not a short string"))
      return false;
    if (!expect_char(&ps, ':', "the header dict lacks a ':' after a key")) return false;
    skip_ws(&ps);
    int which = !strcmp(key, "descr")           ? 0
                : !strcmp(key, "fortran_order") ? 1
                : !strcmp(key, "shape")         ? 2
                                                : -1;
    if (which < 0) {
      snprintf(why, whycap, "unexpected key '%s' in the header (keys: descr, fortran_order, shape)", key);
      return false;
    }
    if (seen[which]) {
      snprintf(why, whycap, "key '%s' appears twice in the header", key);
      return false;
    }
    seen[which] = true;
    if (which == 0) {
      if (!parse_descr(&ps, info)) return false;
    } else if (which == 1) {
      if (starts(&ps, "True"))
        info->fortran = true;
      else if (starts(&ps, "False"))
        info->fortran = false;
      else
        return fail(&ps, "'fortran_order' is neither True nor False");
    } else if (!parse_shape(&ps, info)) {
      return false;
    }
    skip_ws(&ps);
    if (ps.p < ps.end && *ps.p == ',') {
      ps.p++;
      continue;
    }
    if (ps.p < ps.end && *ps.p == '}') continue;
    return fail(&ps, "the header dict lacks a ',' between items");
  }
  skip_ws(&ps);
  if (ps.p != ps.end) return fail(&ps, "the header has text after its dict");
  static const char *names[3] = {"descr", "fortran_order", "shape"};
  for (int i = 0; i < 3; i++)
    if (!seen[i]) {
      snprintf(why, whycap, "the header lacks key '%s'", names[i]);
      return false;
    }
  return true;
}

static uint32_t rd_le(const unsigned char *p, int n) {
  uint32_t v = 0;
  for (int i = n - 1; i >= 0; i--) v = (v << 8) | p[i];
  return v;
}

static void byteswap(unsigned char *p, int64_t n, size_t sz) {
  for (int64_t i = 0; i < n; i++, p += sz)
    for (size_t a = 0, b = sz - 1; a < b; a++, b--) {
      unsigned char t = p[a];
      p[a] = p[b];
      p[b] = t;
    }
}

/* Fortran order: element (i0, ..., ik) sits at offset sum_j i_j * prod_{m<j} shape_m */
static void from_fortran(unsigned char *dst, const unsigned char *src, const npy_info *info, size_t sz,
                         int64_t numel) {
  int64_t fstride[PD_MAX_DIMS], idx[PD_MAX_DIMS] = {0}, s = 1;
  for (int j = 0; j < info->ndim; j++) {
    fstride[j] = s;
    s *= info->shape[j];
  }
  int64_t off = 0;
  for (int64_t e = 0; e < numel; e++) {
    memcpy(dst + (size_t)e * sz, src + (size_t)off * sz, sz);
    for (int j = info->ndim - 1; j >= 0; j--) { /* next C-order index */
      idx[j]++;
      off += fstride[j];
      if (idx[j] < info->shape[j]) break;
      off -= idx[j] * fstride[j];
      idx[j] = 0;
    }
  }
}

pd_tensor *pd_io_load_npy_buffer(const void *data, size_t size, const char *name) {
  const unsigned char *b = data;
  if (!name) name = "<buffer>";
  char why[256];
  if (!data && size) {
    pd_set_error(PD_ERR_INVALID, "load_npy: '%s': data is NULL", name);
    return NULL;
  }
  if (size < 10) {
    pd_set_error(PD_ERR_IO, "load_npy: '%s': %zu bytes, too short for a .npy file (10-byte preamble)", name,
                 size);
    return NULL;
  }
  if (memcmp(b, k_magic, 6) != 0) {
    pd_set_error(PD_ERR_IO, "load_npy: '%s': not a .npy file (no \\x93NUMPY magic string)", name);
    return NULL;
  }
  int major = b[6], minor = b[7];
  if (major < 1 || major > 3 || minor != 0) {
    pd_set_error(PD_ERR_IO, "load_npy: '%s': unsupported .npy format version %d.%d (1.0, 2.0, 3.0 known)",
                 name, major, minor);
    return NULL;
  }
  size_t hstart = major == 1 ? 10 : 12;
  if (size < hstart) {
    pd_set_error(PD_ERR_IO, "load_npy: '%s': %zu bytes, too short for a version %d.0 preamble (%zu bytes)",
                 name, size, major, hstart);
    return NULL;
  }
  size_t hlen = major == 1 ? rd_le(b + 8, 2) : rd_le(b + 8, 4);
  if (hlen > size - hstart) {
    pd_set_error(PD_ERR_IO,
                 "load_npy: '%s': the header (%zu bytes) runs past the end of the file (%zu bytes)", name,
                 hlen, size);
    return NULL;
  }
  npy_info info = {0};
  if (!parse_header((const char *)b + hstart, hlen, &info, why, sizeof why)) {
    pd_set_error(PD_ERR_IO, "load_npy: '%s': bad header: %s", name, why);
    return NULL;
  }
  size_t sz = pd_dtype_size(info.dtype);
  /* The product of the dims must fit, and so must the product with zeros
   * counted as 1: an empty array's strides are made of its other dims. */
  int64_t numel = 1, span = 1;
  for (int i = 0; i < info.ndim; i++) {
    int64_t d = info.shape[i] ? info.shape[i] : 1;
    if (span > INT64_MAX / 16 / d) {
      pd_set_error(PD_ERR_IO, "load_npy: '%s': shape %s is too large", name,
                   pd_shape_str(info.ndim, info.shape, (char[160]){0}, 160));
      return NULL;
    }
    span *= d;
    numel *= info.shape[i];
  }
  size_t have = size - hstart - hlen, want = (size_t)numel * sz;
  if (have != want) {
    pd_set_error(PD_ERR_IO, "load_npy: '%s': %zu bytes of data, but shape %s of %s needs %zu%s", name, have,
                 pd_shape_str(info.ndim, info.shape, (char[160]){0}, 160), pd_dtype_name(info.dtype), want,
                 have < want ? " (truncated file)" : " (trailing bytes)");
    return NULL;
  }
  const unsigned char *src = b + hstart + hlen;
  pd_internal_enter();
  pd_tensor *t = pd_empty_eager(info.ndim, info.shape, info.dtype);
  pd_internal_leave();
  if (!t) return NULL;
  unsigned char *dst = pd_tensor_data(t);
  if (numel) {
    if (info.fortran && info.ndim > 1)
      from_fortran(dst, src, &info, sz, numel);
    else
      memcpy(dst, src, want);
    if (info.swap) byteswap(dst, numel, sz);
  }
  if (info.dtype == PD_BOOL)
    for (int64_t i = 0; i < numel; i++)
      if (dst[i] > 1) {
        int v = dst[i];
        pd_tensor_release(t);
        pd_set_error(PD_ERR_IO, "load_npy: '%s': bool element %lld holds %d (not 0 or 1)", name, (long long)i,
                     v);
        return NULL;
      }
  return pd_scope_track(t);
}

pd_tensor *pd_io_load_npy(const char *path) {
  size_t size;
  char *buf = pd_io_read_file(path, &size, "load_npy");
  if (!buf) return NULL;
  pd_tensor *t = pd_io_load_npy_buffer(buf, size, path);
  free(buf);
  return t;
}

/* ---- writing -------------------------------------------------------------------- */
static const char *descr_of(pd_dtype dt) {
  static const char *k[PD_NUM_DTYPES] = {"|b1", "|u1", "|i1", "<i2", "<i4",
                                         "<i8", "<f2", "|V2", "<f4", "<f8"};
  return (unsigned)dt < PD_NUM_DTYPES ? k[dt] : NULL;
}

pd_status pd_io_npy_encode(const pd_tensor *t, unsigned char **out, size_t *size, const char *what) {
  *out = NULL;
  *size = 0;
  if (!t)
    return pd_last_status() != PD_OK ? pd_last_status()
                                     : pd_set_error(PD_ERR_INVALID, "%s: tensor is NULL", what);
  if (t->is_meta) return pd_tensor_meta_error(what, t);
  const char *descr = descr_of(t->dtype);
  if (!descr) return pd_set_error(PD_ERR_DTYPE, "%s: unsupported dtype %d", what, (int)t->dtype);
  char hdr[64 + PD_MAX_DIMS * 24];
  int n = snprintf(hdr, sizeof hdr, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
  for (int i = 0; i < t->ndim; i++)
    n += snprintf(hdr + n, sizeof hdr - (size_t)n, "%lld, ", (long long)t->shape[i]);
  if (t->ndim == 1)
    n -= 1; /* "(3,)" */
  else if (t->ndim > 1)
    n -= 2;
  n += snprintf(hdr + n, sizeof hdr - (size_t)n, "), }");
  /* pad with spaces and a newline so the data starts at a multiple of 64 */
  size_t pre = 10, total = pre + (size_t)n + 1;
  total = (total + 63) / 64 * 64;
  size_t hlen = total - pre;
  size_t sz = pd_dtype_size(t->dtype), nbytes = (size_t)t->numel * sz;
  unsigned char *buf = malloc(total + nbytes);
  if (!buf) return pd_set_error(PD_ERR_MEMORY, "%s: out of memory for %zu bytes", what, total + nbytes);
  memcpy(buf, k_magic, 6);
  buf[6] = 1;
  buf[7] = 0;
  buf[8] = (unsigned char)(hlen & 0xff);
  buf[9] = (unsigned char)(hlen >> 8);
  memcpy(buf + pre, hdr, (size_t)n);
  memset(buf + pre + n, ' ', hlen - (size_t)n - 1);
  buf[total - 1] = '\n';
  if (nbytes) {
    if (t->is_contiguous) {
      memcpy(buf + total, pd_data_ptr(t), nbytes);
    } else { /* a view: gather it in row-major order */
      pd_internal_enter();
      pd_tensor *c = pd_clone((pd_tensor *)t, PD_NUM_DTYPES);
      pd_internal_leave();
      if (!c) {
        free(buf);
        return pd_last_status();
      }
      memcpy(buf + total, pd_data_ptr(c), nbytes);
      pd_tensor_release(c);
    }
  }
  *out = buf;
  *size = total + nbytes;
  return PD_OK;
}

pd_status pd_io_write_file(const char *path, const void *data, size_t size, const char *what) {
  if (!path) return pd_set_error(PD_ERR_INVALID, "%s: path is NULL", what);
  FILE *f = fopen(path, "wb");
  if (!f) return pd_set_error(PD_ERR_IO, "%s: cannot create '%s': %s", what, path, strerror(errno));
  size_t put = size ? fwrite(data, 1, size, f) : 0;
  int e = errno;
  if (fclose(f) != 0 || put != size) {
    if (put == size) e = errno;
    return pd_set_error(PD_ERR_IO, "%s: cannot write '%s': %s", what, path, strerror(e));
  }
  return PD_OK;
}

pd_status pd_io_save_npy(const char *path, const pd_tensor *t) {
  unsigned char *buf;
  size_t size;
  pd_status st = pd_io_npy_encode(t, &buf, &size, "save_npy");
  if (st < 0) return st;
  st = pd_io_write_file(path, buf, size, "save_npy");
  free(buf);
  return st;
}
