/* paddle.save / paddle.load in the safetensors format: an 8-byte
 * little-endian header length, a JSON header, the tensors' bytes. Saving is
 * atomic (a temporary file of its own in the same directory, created with
 * O_EXCL, fsync, rename, directory fsync), also when threads save to one
 * path at once: the file is then whole and one of theirs. Loading validates
 * the whole header against the file size before allocating anything. */
#include <cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../core/core_internal.h"
#include "checkpoint_internal.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define PD_ST_BIG_ENDIAN 1
#else
#define PD_ST_BIG_ENDIAN 0
#endif

/* JSON integers above 2^53 cannot be told apart as doubles: no real shape
 * or offset comes near it. */
#define MAX_JSON_INT 9007199254740992.0

static const char *const k_st_names[PD_NUM_DTYPES] = {
    [PD_BOOL] = "BOOL",   [PD_UINT8] = "U8",    [PD_INT8] = "I8",     [PD_INT16] = "I16",
    [PD_INT32] = "I32",   [PD_INT64] = "I64",   [PD_FLOAT16] = "F16", [PD_BFLOAT16] = "BF16",
    [PD_FLOAT32] = "F32", [PD_FLOAT64] = "F64",
};

/* Other dtypes of the format, named in the error when a file uses them. */
static const char *const k_st_unsupported[] = {"U16", "U32",     "U64",     "F8_E4M3", "F8_E5M2", "F8_E8M0",
                                               "F4",  "F6_E2M3", "F6_E3M2", "C64",     NULL};

static int st_dtype_from_name(const char *s) {
  for (int d = 0; d < PD_NUM_DTYPES; d++)
    if (strcmp(s, k_st_names[d]) == 0) return d;
  return -1;
}

/* ---- string maps --------------------------------------------------------------- */
pd_status pd_string_map_set(pd_string_map *m, const char *key, const char *value) {
  if (!m || !key || !value) return pd_set_error(PD_ERR_INVALID, "string_map_set: NULL map, key or value");
  for (int i = 0; i < m->n; i++) {
    if (strcmp(m->keys[i], key) == 0) {
      char *v = strdup(value);
      if (!v) return pd_set_error(PD_ERR_MEMORY, "string_map_set: out of memory");
      free(m->values[i]);
      m->values[i] = v;
      return PD_OK;
    }
  }
  char **k = realloc(m->keys, (size_t)(m->n + 1) * sizeof *k);
  if (k) m->keys = k;
  char **v = realloc(m->values, (size_t)(m->n + 1) * sizeof *v);
  if (v) m->values = v;
  char *ks = k && v ? strdup(key) : NULL, *vs = ks ? strdup(value) : NULL;
  if (!vs) {
    free(ks);
    return pd_set_error(PD_ERR_MEMORY, "string_map_set: out of memory");
  }
  m->keys[m->n] = ks;
  m->values[m->n++] = vs;
  return PD_OK;
}

const char *pd_string_map_get(const pd_string_map *m, const char *key) {
  if (!m || !key) return NULL;
  for (int i = 0; i < m->n; i++)
    if (strcmp(m->keys[i], key) == 0) return m->values[i];
  return NULL;
}

void pd_string_map_free(pd_string_map *m) {
  if (!m) return;
  for (int i = 0; i < m->n; i++) {
    free(m->keys[i]);
    free(m->values[i]);
  }
  free(m->keys);
  free(m->values);
  *m = (pd_string_map){0};
}

void pd_state_free(pd_named_tensors *state) {
  if (!state) return;
  for (int i = 0; i < state->n; i++) pd_tensor_release(state->tensors[i]);
  pd_named_tensors_free(state);
}

/* ---- failure injection (tests) ---------------------------------------------------- */
static pd_st_inject_mode g_inject_mode;
static int64_t g_inject_after = -1;

void pd_safetensors_inject(pd_st_inject_mode mode, int64_t after_bytes) {
  g_inject_mode = mode;
  g_inject_after = mode == PD_ST_INJECT_NONE ? -1 : after_bytes;
}

/* ---- saving ---------------------------------------------------------------------- */
typedef struct writer {
  int fd;
  const char *path; /* the target, for messages */
  uint64_t written;
  char buf[1 << 16];
  size_t len;
} writer;

static pd_status write_all(writer *w, const void *p, size_t n) {
  const char *c = p;
  if (g_inject_after >= 0 && w->written + n > (uint64_t)g_inject_after) {
    size_t keep = (size_t)((uint64_t)g_inject_after - w->written);
    while (keep > 0) {
      ssize_t k = write(w->fd, c, keep);
      if (k <= 0) break;
      c += k;
      keep -= (size_t)k;
    }
    if (g_inject_mode == PD_ST_INJECT_KILL) raise(SIGKILL);
    return pd_set_error(PD_ERR_IO, "save: '%s': write failed after %lld bytes (injected failure)", w->path,
                        (long long)g_inject_after);
  }
  while (n > 0) {
    ssize_t k = write(w->fd, c, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0)
      return pd_set_error(PD_ERR_IO, "save: '%s': write failed after %llu bytes: %s", w->path,
                          (unsigned long long)w->written, k < 0 ? strerror(errno) : "no progress");
    c += k;
    n -= (size_t)k;
    w->written += (uint64_t)k;
  }
  return PD_OK;
}

static pd_status w_flush(writer *w) {
  pd_status st = w->len ? write_all(w, w->buf, w->len) : PD_OK;
  w->len = 0;
  return st;
}

static pd_status w_put(writer *w, const void *p, size_t n) {
  if (n >= sizeof w->buf) {
    pd_status st = w_flush(w);
    return st == PD_OK ? write_all(w, p, n) : st;
  }
  if (w->len + n > sizeof w->buf) {
    pd_status st = w_flush(w);
    if (st != PD_OK) return st;
  }
  memcpy(w->buf + w->len, p, n);
  w->len += n;
  return PD_OK;
}

#if PD_ST_BIG_ENDIAN
static void swap_elems(void *p, size_t nbytes, size_t es) {
  unsigned char *b = p;
  for (size_t i = 0; i + es <= nbytes; i += es)
    for (size_t k = 0; k < es / 2; k++) {
      unsigned char t = b[i + k];
      b[i + k] = b[i + es - 1 - k];
      b[i + es - 1 - k] = t;
    }
}
#endif

/* The bytes of t, row-major, little-endian. */
static pd_status write_tensor(writer *w, const pd_tensor *t) {
  size_t es = pd_dtype_size_fast(t->dtype), nbytes = (size_t)t->numel * es;
  if (nbytes == 0) return PD_OK;
  if (t->is_contiguous && !PD_ST_BIG_ENDIAN) return w_put(w, pd_tensor_data(t), nbytes);
  void *tmp = malloc(nbytes);
  if (!tmp) return pd_set_error(PD_ERR_MEMORY, "save: '%s': out of memory (%zu bytes)", w->path, nbytes);
  int64_t n = pd_tensor_copy_to(t, tmp, t->numel, t->dtype);
#if PD_ST_BIG_ENDIAN
  swap_elems(tmp, nbytes, es);
#endif
  pd_status st = n < 0 ? (pd_status)n : w_put(w, tmp, nbytes);
  free(tmp);
  return st;
}

static void json_string(pd_strbuf *b, const char *s) {
  pd_sb_puts(b, "\"");
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    switch (*p) {
      case '"':
        pd_sb_puts(b, "\\\"");
        break;
      case '\\':
        pd_sb_puts(b, "\\\\");
        break;
      case '\n':
        pd_sb_puts(b, "\\n");
        break;
      case '\r':
        pd_sb_puts(b, "\\r");
        break;
      case '\t':
        pd_sb_puts(b, "\\t");
        break;
      case '\b':
        pd_sb_puts(b, "\\b");
        break;
      case '\f':
        pd_sb_puts(b, "\\f");
        break;
      default:
        if (*p < 0x20)
          pd_sb_printf(b, "\\u%04x", *p);
        else
          pd_sb_append(b, (const char *)p, 1);
    }
  }
  pd_sb_puts(b, "\"");
}

static pd_status check_text(const char *path, const char *what, const char *s) {
  if (!s) return pd_set_error(PD_ERR_INVALID, "save: '%s': a %s is NULL", path, what);
  size_t bad;
  if (!pd_utf8_valid((const unsigned char *)s, strlen(s), &bad))
    return pd_set_error(PD_ERR_INVALID, "save: '%s': %s '%s' is not valid UTF-8 (byte %zu)", path, what, s,
                        bad);
  return PD_OK;
}

static int cmp_str_ptr(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Names must be distinct: sort a copy of the pointers and compare neighbours. */
static pd_status check_distinct(const char *path, const char *what, char **names, int n) {
  if (n < 2) return PD_OK;
  char **sorted = malloc((size_t)n * sizeof *sorted);
  if (!sorted) return pd_set_error(PD_ERR_MEMORY, "save: '%s': out of memory", path);
  memcpy(sorted, names, (size_t)n * sizeof *sorted);
  qsort(sorted, (size_t)n, sizeof *sorted, cmp_str_ptr);
  pd_status st = PD_OK;
  for (int i = 1; i < n && st == PD_OK; i++)
    if (strcmp(sorted[i - 1], sorted[i]) == 0)
      st = pd_set_error(PD_ERR_INVALID, "save: '%s': duplicate %s '%s'", path, what, sorted[i]);
  free(sorted);
  return st;
}

/* The JSON header, padded with spaces to a multiple of 8 bytes. */
static pd_status build_header(const pd_named_tensors *state, const char *path, const pd_string_map *meta,
                              pd_strbuf *b) {
  pd_sb_puts(b, "{\"__metadata__\":{\"format\":");
  const char *fmt = pd_string_map_get(meta, "format");
  json_string(b, fmt ? fmt : "paddle.c");
  for (int i = 0; meta && i < meta->n; i++) {
    if (strcmp(meta->keys[i], "format") == 0) continue;
    pd_sb_puts(b, ",");
    json_string(b, meta->keys[i]);
    pd_sb_puts(b, ":");
    json_string(b, meta->values[i]);
  }
  pd_sb_puts(b, "}");
  uint64_t off = 0;
  for (int i = 0; i < state->n; i++) {
    const pd_tensor *t = state->tensors[i];
    uint64_t nbytes = (uint64_t)t->numel * pd_dtype_size_fast(t->dtype);
    pd_sb_puts(b, ",");
    json_string(b, state->names[i]);
    pd_sb_printf(b, ":{\"dtype\":\"%s\",\"shape\":[", k_st_names[t->dtype]);
    for (int d = 0; d < t->ndim; d++) pd_sb_printf(b, "%s%lld", d ? "," : "", (long long)t->shape[d]);
    pd_sb_printf(b, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off,
                 (unsigned long long)(off + nbytes));
    off += nbytes;
  }
  pd_sb_puts(b, "}");
  if (b->len % 8) pd_sb_repeat(b, ' ', 8 - b->len % 8);
  if (b->failed) return pd_set_error(PD_ERR_MEMORY, "save: '%s': out of memory building the header", path);
  if (b->len > PD_SAFETENSORS_MAX_HEADER)
    return pd_set_error(PD_ERR_INVALID, "save: '%s': the header would be %zu bytes, over the limit of %llu",
                        path, b->len, (unsigned long long)PD_SAFETENSORS_MAX_HEADER);
  return PD_OK;
}

static pd_status validate_state(const pd_named_tensors *state, const char *path, const pd_string_map *meta) {
  if (state->n < 0 || (state->n > 0 && (!state->names || !state->tensors)))
    return pd_set_error(PD_ERR_INVALID, "save: '%s': malformed tensor list (n = %d)", path, state->n);
  pd_status st = PD_OK;
  for (int i = 0; i < state->n && st == PD_OK; i++) {
    if ((st = check_text(path, "tensor name", state->names[i])) != PD_OK) break;
    if (strcmp(state->names[i], "__metadata__") == 0)
      return pd_set_error(PD_ERR_INVALID, "save: '%s': '__metadata__' is reserved and cannot name a tensor",
                          path);
    const pd_tensor *t = state->tensors[i];
    if (!t) return pd_set_error(PD_ERR_INVALID, "save: '%s': tensor '%s' is NULL", path, state->names[i]);
    if ((unsigned)t->dtype >= PD_NUM_DTYPES)
      return pd_set_error(PD_ERR_DTYPE, "save: '%s': tensor '%s' has an invalid dtype %d", path,
                          state->names[i], (int)t->dtype);
    if (t->is_meta) return pd_tensor_meta_error("save", t);
  }
  if (st == PD_OK) st = check_distinct(path, "tensor name", state->names, state->n);
  if (st == PD_OK && meta) {
    if (meta->n < 0 || (meta->n > 0 && (!meta->keys || !meta->values)))
      return pd_set_error(PD_ERR_INVALID, "save: '%s': malformed metadata map (n = %d)", path, meta->n);
    for (int i = 0; i < meta->n && st == PD_OK; i++) {
      st = check_text(path, "metadata key", meta->keys[i]);
      if (st == PD_OK) st = check_text(path, "metadata value", meta->values[i]);
    }
    if (st == PD_OK) st = check_distinct(path, "metadata key", meta->keys, meta->n);
  }
  return st;
}

/* fsync of the directory holding path, so the rename itself is durable. */
static pd_status sync_dir(const char *path) {
  const char *slash = strrchr(path, '/');
  char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
  if (!dir) return pd_set_error(PD_ERR_MEMORY, "save: '%s': out of memory", path);
  pd_status st = PD_OK;
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    if (fsync(fd) != 0 && errno != EINVAL && errno != ENOTSUP && errno != EROFS)
      st = pd_set_error(PD_ERR_IO, "save: '%s': fsync of directory '%s' failed: %s", path, dir,
                        strerror(errno));
    close(fd);
  }
  free(dir);
  return st;
}

pd_status pd_save_with_metadata(const pd_named_tensors *state, const char *path,
                                const pd_string_map *metadata) {
  if (!state || !path || !path[0])
    return pd_set_error(PD_ERR_INVALID, "save: %s", !state ? "state is NULL" : "path is NULL or empty");
  pd_status st = validate_state(state, path, metadata);
  if (st != PD_OK) return st;
  pd_strbuf hdr = {0};
  st = build_header(state, path, metadata, &hdr);
  if (st != PD_OK) {
    free(hdr.s);
    return st;
  }
  size_t plen = strlen(path) + 64;
  char *tmp = malloc(plen);
  writer *w = malloc(sizeof *w);
  if (!tmp || !w) {
    free(tmp);
    free(w);
    free(hdr.s);
    return pd_set_error(PD_ERR_MEMORY, "save: '%s': out of memory", path);
  }
  pd_ckpt_remove_dead_temps(path); /* left by saves that were killed */
  w->fd = pd_ckpt_open_temp(path, tmp, plen);
  w->path = path;
  w->written = 0;
  w->len = 0;
  if (w->fd < 0) {
    st = pd_set_error(PD_ERR_IO, "save: '%s': cannot create '%s': %s", path, tmp, strerror(errno));
    free(tmp);
    free(w);
    free(hdr.s);
    return st;
  }
  unsigned char len8[8];
  for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)hdr.len >> (8 * i));
  st = w_put(w, len8, 8);
  if (st == PD_OK) st = w_put(w, hdr.s, hdr.len);
  for (int i = 0; i < state->n && st == PD_OK; i++) st = write_tensor(w, state->tensors[i]);
  if (st == PD_OK) st = w_flush(w);
  if (st == PD_OK && fsync(w->fd) != 0)
    st = pd_set_error(PD_ERR_IO, "save: '%s': fsync failed: %s", path, strerror(errno));
  if (close(w->fd) != 0 && st == PD_OK)
    st = pd_set_error(PD_ERR_IO, "save: '%s': close failed: %s", path, strerror(errno));
  if (st == PD_OK && rename(tmp, path) != 0)
    st = pd_set_error(PD_ERR_IO, "save: '%s': cannot rename '%s' over it: %s", path, tmp, strerror(errno));
  if (st != PD_OK)
    unlink(tmp);
  else
    st = sync_dir(path);
  free(tmp);
  free(w);
  free(hdr.s);
  return st;
}

pd_status pd_save(const pd_named_tensors *state, const char *path) {
  return pd_save_with_metadata(state, path, NULL);
}

/* ---- loading ------------------------------------------------------------------------ */
typedef struct source {
  const char *what; /* the file name, for messages */
  int fd;           /* >= 0: a file */
  const unsigned char *mem;
  uint64_t size;
} source;

static pd_status src_read(const source *s, uint64_t off, void *dst, size_t n) {
  if (off > s->size || n > s->size - off)
    return pd_set_error(PD_ERR_IO, "load: '%s': read of %zu bytes at %llu is past the end (%llu bytes)",
                        s->what, n, (unsigned long long)off, (unsigned long long)s->size);
  if (s->fd < 0) {
    if (n) memcpy(dst, s->mem + off, n);
    return PD_OK;
  }
  char *p = dst;
  while (n > 0) {
    ssize_t k = pread(s->fd, p, n, (off_t)off);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0)
      return pd_set_error(PD_ERR_IO, "load: '%s': read failed at byte %llu: %s", s->what,
                          (unsigned long long)off, k < 0 ? strerror(errno) : "unexpected end of file");
    p += k;
    n -= (size_t)k;
    off += (uint64_t)k;
  }
  return PD_OK;
}

typedef struct entry {
  const char *name; /* inside the parsed JSON */
  pd_dtype dt;
  int ndim;
  int64_t shape[PD_MAX_DIMS];
  uint64_t begin, end;
  int index; /* position in the header, to order empty tensors stably */
} entry;

#define BAD(...) pd_set_error(PD_ERR_INVALID, __VA_ARGS__)

/* A JSON number that is a non-negative integer within 2^53. */
static int json_uint(const cJSON *j, uint64_t *v) {
  if (!cJSON_IsNumber(j)) return 0;
  double d = j->valuedouble;
  if (!(d >= 0 && d <= MAX_JSON_INT) || d != (double)(uint64_t)d) return 0;
  *v = (uint64_t)d;
  return 1;
}

static pd_status parse_entry(const source *s, const cJSON *item, entry *e) {
  const char *name = item->string;
  e->name = name;
  if (!cJSON_IsObject(item)) return BAD("load: '%s': entry '%s' is not a JSON object", s->what, name);
  const cJSON *dt = cJSON_GetObjectItemCaseSensitive(item, "dtype");
  const cJSON *shape = cJSON_GetObjectItemCaseSensitive(item, "shape");
  const cJSON *offs = cJSON_GetObjectItemCaseSensitive(item, "data_offsets");
  if (!dt || !shape || !offs)
    return BAD("load: '%s': tensor '%s' lacks \"%s\"", s->what, name,
               !dt      ? "dtype"
               : !shape ? "shape"
                        : "data_offsets");
  if (!cJSON_IsString(dt)) return BAD("load: '%s': tensor '%s': dtype is not a string", s->what, name);
  int d = st_dtype_from_name(dt->valuestring);
  if (d < 0) {
    for (int i = 0; k_st_unsupported[i]; i++)
      if (strcmp(dt->valuestring, k_st_unsupported[i]) == 0)
        return pd_set_error(PD_ERR_DTYPE,
                            "load: '%s': tensor '%s' has dtype %s, which paddle.c does not support", s->what,
                            name, dt->valuestring);
    return BAD("load: '%s': tensor '%s' has unknown dtype \"%.40s\"", s->what, name, dt->valuestring);
  }
  e->dt = (pd_dtype)d;
  if (!cJSON_IsArray(shape)) return BAD("load: '%s': tensor '%s': shape is not an array", s->what, name);
  int nd = cJSON_GetArraySize(shape);
  if (nd > PD_MAX_DIMS)
    return BAD("load: '%s': tensor '%s' has %d dims, more than the %d supported", s->what, name, nd,
               PD_MAX_DIMS);
  e->ndim = nd;
  /* The product of the dims (zeros counted as 1, so that the strides of an
   * empty tensor fit too) and the byte count must fit in int64. */
  uint64_t prod = 1;
  int overflow = 0, zero = 0, k = 0;
  for (const cJSON *c = shape->child; c; c = c->next, k++) {
    uint64_t v;
    if (!json_uint(c, &v))
      return BAD("load: '%s': tensor '%s': shape[%d] is not a non-negative integer below 2^53", s->what, name,
                 k);
    e->shape[k] = (int64_t)v;
    zero |= v == 0;
    if (!overflow && __builtin_mul_overflow(prod, v ? v : 1, &prod)) overflow = 1;
  }
  uint64_t nbytes = 0;
  if (overflow || prod > (uint64_t)INT64_MAX ||
      __builtin_mul_overflow(prod, (uint64_t)pd_dtype_size_fast(e->dt), &nbytes) ||
      nbytes > (uint64_t)INT64_MAX) {
    char sh[200];
    return BAD("load: '%s': tensor '%s': the size of shape %s (dtype %s) overflows int64", s->what, name,
               pd_shape_str(nd, e->shape, sh, sizeof sh), k_st_names[e->dt]);
  }
  if (zero) nbytes = 0;
  if (!cJSON_IsArray(offs) || cJSON_GetArraySize(offs) != 2 || !json_uint(offs->child, &e->begin) ||
      !json_uint(offs->child->next, &e->end))
    return BAD("load: '%s': tensor '%s': data_offsets is not a pair of non-negative integers", s->what, name);
  if (e->end < e->begin)
    return BAD("load: '%s': tensor '%s': data_offsets [%llu, %llu] end before they begin", s->what, name,
               (unsigned long long)e->begin, (unsigned long long)e->end);
  if (e->end - e->begin != nbytes) {
    char sh[200];
    return BAD(
        "load: '%s': tensor '%s' of shape %s and dtype %s needs %llu bytes but data_offsets [%llu, %llu] "
        "span %llu",
        s->what, name, pd_shape_str(nd, e->shape, sh, sizeof sh), k_st_names[e->dt],
        (unsigned long long)nbytes, (unsigned long long)e->begin, (unsigned long long)e->end,
        (unsigned long long)(e->end - e->begin));
  }
  return PD_OK;
}

static int cmp_entry_offsets(const void *a, const void *b) {
  const entry *x = a, *y = b;
  if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
  if (x->end != y->end) return x->end < y->end ? -1 : 1;
  return x->index - y->index;
}

static int cmp_entry_names(const void *a, const void *b) {
  return strcmp((*(const entry *const *)a)->name, (*(const entry *const *)b)->name);
}

static pd_status parse_metadata(const source *s, const cJSON *item, pd_string_map *meta) {
  if (!cJSON_IsObject(item)) return BAD("load: '%s': __metadata__ is not a JSON object", s->what);
  for (const cJSON *c = item->child; c; c = c->next) {
    if (!cJSON_IsString(c))
      return BAD("load: '%s': __metadata__ value of '%s' is not a string", s->what, c->string);
    for (const cJSON *p = item->child; p != c; p = p->next)
      if (strcmp(p->string, c->string) == 0)
        return BAD("load: '%s': duplicate __metadata__ key '%s'", s->what, c->string);
    if (meta) {
      pd_status st = pd_string_map_set(meta, c->string, c->valuestring);
      if (st != PD_OK) return st;
    }
  }
  return PD_OK;
}

/* Header checks that need no JSON parser: bounds, first byte, control
 * characters, UTF-8. */
static pd_status check_raw_header(const source *s, const unsigned char *h, size_t n) {
  if (n < 2 || h[0] != '{')
    return BAD("load: '%s': the header does not start with '{' (not a safetensors file?)", s->what);
  for (size_t i = 0; i < n; i++)
    if (h[i] < 0x20 && h[i] != '\t' && h[i] != '\n' && h[i] != '\r')
      return BAD("load: '%s': the header has a control byte 0x%02x at byte %zu", s->what, h[i], i + 8);
  size_t bad = 0;
  if (!pd_utf8_valid(h, n, &bad))
    return BAD("load: '%s': the header is not valid UTF-8 (byte %zu)", s->what, bad + 8);
  return PD_OK;
}

static pd_status load_source(const source *s, pd_named_tensors *out, pd_string_map *meta) {
  if (s->size < 8)
    return BAD("load: '%s': the file is %llu bytes, too short for the 8-byte header length", s->what,
               (unsigned long long)s->size);
  unsigned char len8[8];
  pd_status st = src_read(s, 0, len8, 8);
  if (st != PD_OK) return st;
  uint64_t hlen = 0;
  for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | len8[i];
  if (hlen > PD_SAFETENSORS_MAX_HEADER)
    return BAD("load: '%s': header length %llu is over the limit of %llu bytes", s->what,
               (unsigned long long)hlen, (unsigned long long)PD_SAFETENSORS_MAX_HEADER);
  if (hlen > s->size - 8)
    return BAD("load: '%s': header length %llu is past the end of the file (%llu bytes)", s->what,
               (unsigned long long)hlen, (unsigned long long)s->size);
  uint64_t data_start = 8 + hlen, data_size = s->size - data_start;
  unsigned char *h = malloc((size_t)hlen + 1);
  if (!h)
    return pd_set_error(PD_ERR_MEMORY, "load: '%s': out of memory for a %llu-byte header", s->what,
                        (unsigned long long)hlen);
  st = src_read(s, 8, h, (size_t)hlen);
  h[hlen] = 0;
  if (st == PD_OK) st = check_raw_header(s, h, (size_t)hlen);
  cJSON *root = NULL;
  if (st == PD_OK) {
    const char *end = NULL;
    root = cJSON_ParseWithLengthOpts((const char *)h, (size_t)hlen, &end, 0);
    size_t pos = end ? (size_t)(end - (const char *)h) : 0;
    if (!root)
      st = BAD("load: '%s': the header is not valid JSON (error near byte %zu)", s->what, pos + 8);
    else {
      for (size_t i = pos; i < hlen && st == PD_OK; i++)
        if (h[i] != ' ' && h[i] != '\t' && h[i] != '\n' && h[i] != '\r')
          st = BAD("load: '%s': the header has bytes after its JSON object (byte %zu)", s->what, i + 8);
      if (st == PD_OK && !cJSON_IsObject(root))
        st = BAD("load: '%s': the header is not a JSON object", s->what);
    }
  }
  int n = 0;
  if (st == PD_OK)
    for (const cJSON *c = root->child; c; c = c->next) n += strcmp(c->string, "__metadata__") != 0;
  entry *es = st == PD_OK ? calloc((size_t)n + 1, sizeof *es) : NULL;
  entry **by_name = st == PD_OK ? calloc((size_t)n + 1, sizeof *by_name) : NULL;
  if (st == PD_OK && (!es || !by_name))
    st = pd_set_error(PD_ERR_MEMORY, "load: '%s': out of memory", s->what);
  int k = 0, seen_meta = 0;
  for (const cJSON *c = st == PD_OK ? root->child : NULL; c && st == PD_OK; c = c->next) {
    if (strcmp(c->string, "__metadata__") == 0) {
      if (seen_meta++)
        st = BAD("load: '%s': duplicate __metadata__", s->what);
      else
        st = parse_metadata(s, c, meta);
      continue;
    }
    es[k].index = k;
    st = parse_entry(s, c, &es[k]);
    by_name[k] = &es[k];
    k++;
  }
  if (st == PD_OK && n > 1) {
    qsort(by_name, (size_t)n, sizeof *by_name, cmp_entry_names);
    for (int i = 1; i < n && st == PD_OK; i++)
      if (strcmp(by_name[i - 1]->name, by_name[i]->name) == 0)
        st = BAD("load: '%s': duplicate tensor name '%s'", s->what, by_name[i]->name);
  }
  if (st == PD_OK) {
    qsort(es, (size_t)n, sizeof *es, cmp_entry_offsets);
    uint64_t expect = 0;
    for (int i = 0; i < n && st == PD_OK; i++) {
      if (es[i].end > data_size)
        st =
            BAD("load: '%s': tensor '%s' data_offsets [%llu, %llu] are past the end of the data (%llu bytes)",
                s->what, es[i].name, (unsigned long long)es[i].begin, (unsigned long long)es[i].end,
                (unsigned long long)data_size);
      else if (es[i].begin < expect)
        st = BAD("load: '%s': tensor '%s' data_offsets [%llu, %llu] overlap tensor '%s' [%llu, %llu]",
                 s->what, es[i].name, (unsigned long long)es[i].begin, (unsigned long long)es[i].end,
                 es[i - 1].name, (unsigned long long)es[i - 1].begin, (unsigned long long)es[i - 1].end);
      else if (es[i].begin > expect)
        st = BAD("load: '%s': bytes [%llu, %llu) of the data belong to no tensor (before '%s')", s->what,
                 (unsigned long long)expect, (unsigned long long)es[i].begin, es[i].name);
      expect = es[i].end;
    }
    if (st == PD_OK && expect != data_size)
      st = BAD("load: '%s': the tensors cover %llu bytes of data but the file has %llu after the header",
               s->what, (unsigned long long)expect, (unsigned long long)data_size);
  }
  /* everything checked: allocate and read */
  if (st == PD_OK && n > 0) {
    out->names = calloc((size_t)n, sizeof *out->names);
    out->tensors = calloc((size_t)n, sizeof *out->tensors);
    if (!out->names || !out->tensors) st = pd_set_error(PD_ERR_MEMORY, "load: '%s': out of memory", s->what);
  }
  pd_internal_enter();
  for (int i = 0; i < n && st == PD_OK; i++) {
    const entry *e = &es[i];
    pd_tensor *t = pd_tensor_new(e->dt, e->ndim, e->shape);
    char *name = strdup(e->name);
    if (!t || !name) {
      pd_tensor_release(t);
      free(name);
      st = pd_set_error(PD_ERR_MEMORY, "load: '%s': out of memory for tensor '%s' (%llu bytes)", s->what,
                        e->name, (unsigned long long)(e->end - e->begin));
      break;
    }
    out->names[i] = name;
    out->tensors[i] = t;
    out->n = i + 1;
    size_t nbytes = (size_t)(e->end - e->begin);
    st = src_read(s, data_start + e->begin, pd_tensor_data(t), nbytes);
    if (st == PD_OK && e->dt == PD_BOOL) {
      unsigned char *b = pd_tensor_data(t);
      for (size_t j = 0; j < nbytes; j++) b[j] = b[j] != 0;
    }
#if PD_ST_BIG_ENDIAN
    if (st == PD_OK) swap_elems(pd_tensor_data(t), nbytes, pd_dtype_size_fast(e->dt));
#endif
  }
  pd_internal_leave();
  cJSON_Delete(root);
  free(h);
  free(es);
  free(by_name);
  return st;
}

static pd_status load_common(const source *s, pd_named_tensors *out, pd_string_map *meta) {
  pd_status st = load_source(s, out, meta);
  if (st != PD_OK) {
    pd_state_free(out);
    pd_string_map_free(meta);
  }
  return st;
}

pd_status pd_load_with_metadata(const char *path, pd_named_tensors *out, pd_string_map *metadata) {
  if (out) *out = (pd_named_tensors){0};
  if (metadata) *metadata = (pd_string_map){0};
  if (!path || !out) return pd_set_error(PD_ERR_INVALID, "load: %s is NULL", path ? "output list" : "path");
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return pd_set_error(PD_ERR_IO, "load: '%s': cannot open: %s", path, strerror(errno));
  struct stat sb;
  pd_status st = PD_OK;
  if (fstat(fd, &sb) != 0)
    st = pd_set_error(PD_ERR_IO, "load: '%s': cannot stat: %s", path, strerror(errno));
  else if (!S_ISREG(sb.st_mode))
    st = pd_set_error(PD_ERR_IO, "load: '%s': not a regular file", path);
  if (st == PD_OK) {
    source s = {path, fd, NULL, (uint64_t)sb.st_size};
    st = load_common(&s, out, metadata);
  }
  close(fd);
  return st;
}

pd_status pd_load(const char *path, pd_named_tensors *out) { return pd_load_with_metadata(path, out, NULL); }

pd_status pd_load_buffer(const void *data, size_t size, const char *what, pd_named_tensors *out,
                         pd_string_map *metadata) {
  if (out) *out = (pd_named_tensors){0};
  if (metadata) *metadata = (pd_string_map){0};
  if (!out || (!data && size))
    return pd_set_error(PD_ERR_INVALID, "load_buffer: %s is NULL", out ? "data" : "output list");
  source s = {what ? what : "buffer", -1, data, size};
  return load_common(&s, out, metadata);
}
