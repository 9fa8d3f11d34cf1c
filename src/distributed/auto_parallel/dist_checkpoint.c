/* Distributed checkpoints: save_state_dict writes each rank's slices of the
 * global values and a metadata file indexing them (the commit);
 * load_state_dict reads the slices overlapping each local shard. Layout
 * and crash safety: paddlec/dist_checkpoint.h. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../core/core_internal.h"
#include "../../core/strbuf.h"
#include "ap_internal.h"
#include "paddlec/autograd.h"
#include "paddlec/checkpoint.h"
#include "paddlec/creation.h"
#include "paddlec/dist_checkpoint.h"
#include "paddlec/math.h"

#define CKPT_FORMAT "paddle.c.distcp"
#define CKPT_META "metadata"

static bool world_is_dist(void) { return pd_dist_is_initialized() && pd_dist_get_world_size(NULL) > 1; }

static char *join(const char *dir, const char *name) {
  char *p = NULL;
  if (asprintf(&p, "%s/%s", dir, name) < 0) {
    pd_set_error(PD_ERR_MEMORY, "distributed checkpoint: out of memory");
    return NULL;
  }
  return p;
}

/* ---- the index ------------------------------------------------------------
 * One line per slice: key, file ("-" for a slice of no elements), dtype,
 * rank, then the global shape, the offsets and the lengths, comma-separated,
 * fields separated by tabs. */
typedef struct slice {
  char *key, *file;
  pd_dtype dtype;
  int ndim;
  int64_t shape[PD_MAX_DIMS], off[PD_MAX_DIMS], len[PD_MAX_DIMS];
} slice;

typedef struct index {
  int n, cap;
  slice *s;
  int64_t generation;
} index_t;

static void index_free(index_t *x) {
  for (int i = 0; i < x->n; i++) {
    free(x->s[i].key);
    free(x->s[i].file);
  }
  free(x->s);
  memset(x, 0, sizeof *x);
}

static void put_dims(pd_strbuf *b, int n, const int64_t *v) {
  pd_sb_puts(b, "\t");
  for (int d = 0; d < n; d++) pd_sb_printf(b, "%s%lld", d ? "," : "", (long long)v[d]);
}

static void put_slice(pd_strbuf *b, const char *key, const char *file, const pd_tensor *t, int ndim,
                      const int64_t *shape, const int64_t *off, const int64_t *len) {
  pd_sb_printf(b, "%s\t%s\t%s\t%d", key, file, pd_dtype_name(t->dtype), ndim);
  put_dims(b, ndim, shape);
  put_dims(b, ndim, off);
  put_dims(b, ndim, len);
  pd_sb_puts(b, "\n");
}

/* n comma-separated integers >= 0 from s (advanced past them). */
static bool read_dims(char **s, int n, int64_t *v) {
  char *p = *s;
  for (int d = 0; d < n; d++) {
    if (d && *p++ != ',') return false;
    char *end;
    errno = 0;
    long long x = strtoll(p, &end, 10);
    if (end == p || errno || x < 0) return false;
    v[d] = x;
    p = end;
  }
  *s = p;
  return true;
}

static pd_status parse_index(const char *text, const char *meta_path, index_t *x) {
  char *copy = strdup(text);
  if (!copy) return pd_set_error(PD_ERR_MEMORY, "load_state_dict: out of memory");
  pd_status st = PD_OK;
  int line_no = 0;
  for (char *save = NULL, *line = strtok_r(copy, "\n", &save); line && st == PD_OK;
       line = strtok_r(NULL, "\n", &save)) {
    line_no++;
    char *f[4] = {0}; /* key, file, dtype, rank; p: the dims */
    char *p = line;
    int k = 0;
    for (; k < 4 && p; k++) {
      f[k] = p;
      p = strchr(p, '\t');
      if (p) *p++ = '\0';
    }
    slice s = {0};
    char *end = NULL;
    long nd = k == 4 && p ? strtol(f[3], &end, 10) : -1;
    int dt = k == 4 ? pd_dtype_from_name(f[2]) : -1;
    bool ok = nd >= 0 && nd <= PD_MAX_DIMS && end && *end == '\0' && dt >= 0;
    if (ok) {
      s.ndim = (int)nd;
      s.dtype = (pd_dtype)dt;
      char *q = p;
      ok = read_dims(&q, s.ndim, s.shape) && *q++ == '\t' && read_dims(&q, s.ndim, s.off) && *q++ == '\t' &&
           read_dims(&q, s.ndim, s.len) && *q == '\0';
      for (int d = 0; ok && d < s.ndim; d++) ok = s.off[d] + s.len[d] <= s.shape[d];
    }
    if (!ok) {
      st = pd_set_error(PD_ERR_INVALID, "load_state_dict: '%s' is corrupt: index line %d is malformed",
                        meta_path, line_no);
      break;
    }
    if (x->n == x->cap) {
      int cap = x->cap ? 2 * x->cap : 16;
      slice *ns = realloc(x->s, (size_t)cap * sizeof *ns);
      if (!ns) {
        st = pd_set_error(PD_ERR_MEMORY, "load_state_dict: out of memory");
        break;
      }
      x->s = ns;
      x->cap = cap;
    }
    s.key = strdup(f[0]);
    s.file = strdup(f[1]);
    x->s[x->n++] = s;
    if (!s.key || !s.file) st = pd_set_error(PD_ERR_MEMORY, "load_state_dict: out of memory");
  }
  free(copy);
  return st;
}

/* The checkpoint's metadata file: its generation and index. A missing or
 * corrupt file is an error naming it. */
static pd_status read_meta(const char *dir, index_t *x) {
  char *mp = join(dir, CKPT_META);
  if (!mp) return pd_last_status();
  pd_named_tensors none = {0};
  pd_string_map meta = {0};
  pd_status st = PD_OK;
  if (access(mp, F_OK) != 0) {
    st = pd_set_error(PD_ERR_IO, "load_state_dict: '%s' is missing: '%s' holds no distributed checkpoint", mp,
                      dir);
  } else if ((st = pd_load_with_metadata(mp, &none, &meta)) != PD_OK) {
    pd_error_prefix("load_state_dict");
  } else {
    const char *fmt = pd_string_map_get(&meta, "format"), *gen = pd_string_map_get(&meta, "generation");
    const char *idx = pd_string_map_get(&meta, "index");
    if (!fmt || strcmp(fmt, CKPT_FORMAT) != 0 || !gen || !idx)
      st = pd_set_error(PD_ERR_INVALID,
                        "load_state_dict: '%s' is not the metadata of a distributed checkpoint", mp);
    else
      x->generation = strtoll(gen, NULL, 10);
    if (st == PD_OK) st = parse_index(idx, mp, x);
  }
  pd_state_free(&none);
  pd_string_map_free(&meta);
  free(mp);
  if (st != PD_OK) index_free(x);
  return st;
}

/* ---- save ----------------------------------------------------------------- */
/* Collective: the generation after the one in the directory (rank 0's
 * view), the same on every rank. */
static pd_status next_generation(const char *dir, int64_t *gen) {
  index_t old = {0};
  int64_t g = 0;
  if (pd_ap_my_rank() == 0) {
    char *mp = join(dir, CKPT_META);
    if (!mp) return pd_last_status();
    bool exists = access(mp, F_OK) == 0;
    free(mp);
    if (exists && read_meta(dir, &old) == PD_OK) g = old.generation;
    index_free(&old);
    pd_clear_error();
  }
  g++;
  if (world_is_dist()) {
    pd_tensor *t = pd_full(1, (int64_t[]){1}, (double)g, PD_INT64);
    pd_status st = t ? pd_dist_broadcast(t, 0, NULL) : pd_last_status();
    if (st == PD_OK) g = *(int64_t *)pd_data_ptr(t);
    pd_tensor_release(t);
    if (st != PD_OK) return st;
  }
  *gen = g;
  return PD_OK;
}

static pd_status check_key(const char *key) {
  if (!key) return pd_set_error(PD_ERR_INVALID, "save_state_dict: a key is NULL");
  if (strpbrk(key, "\t\n"))
    return pd_set_error(PD_ERR_INVALID, "save_state_dict: key '%s' holds a tab or a newline", key);
  return PD_OK;
}

/* What this rank writes of one entry: *write (NULL when nothing), its
 * offsets and lengths in the global value. Partial values are reduced
 * (collective). */
static pd_status slice_of(pd_tensor *t, pd_tensor **write, int *ndim, int64_t *shape, int64_t *off,
                          int64_t *len) {
  *write = NULL;
  const pd_dist_attr *a = pd_ap_attr(t);
  if (!a) {
    *ndim = t->ndim;
    for (int d = 0; d < t->ndim; d++) {
      shape[d] = len[d] = t->shape[d];
      off[d] = 0;
    }
    if (pd_ap_my_rank() == 0) *write = pd_tensor_retain(t);
    return PD_OK;
  }
  *ndim = a->ndim;
  for (int d = 0; d < a->ndim; d++) {
    shape[d] = len[d] = a->shape[d];
    off[d] = 0;
  }
  pd_tensor *local = pd_ap_local_alias(t);
  if (!local) return pd_last_status();
  bool partial = false;
  for (int m = 0; m < a->n; m++) partial |= a->p[m].kind == PD_DIST_PARTIAL;
  if (partial) {
    pd_dist_placement p[PD_DIST_MAX_MESH_DIMS];
    for (int m = 0; m < a->n; m++) p[m] = a->p[m].kind == PD_DIST_PARTIAL ? pd_dist_replicate() : a->p[m];
    pd_dist_attr *dst = pd_ap_attr_new(a->mesh, p, a->ndim, a->shape);
    pd_tensor *r = dst ? pd_ap_reshard_local(local, a, dst) : NULL;
    pd_ap_attr_free(dst);
    pd_tensor_release(local);
    if (!(local = r)) return pd_last_status();
  }
  int64_t c[PD_DIST_MAX_MESH_DIMS];
  bool writer = pd_ap_mesh_coords(a->mesh, pd_ap_my_rank(), c);
  for (int m = 0; writer && m < a->n; m++) {
    if (a->p[m].kind != PD_DIST_SHARD) {
      writer = c[m] == 0;
      continue;
    }
    int d = a->p[m].dim;
    pd_ap_shard_range(a->shape[d], a->mesh->shape[m], c[m], &off[d], &len[d]);
  }
  if (writer)
    *write = local;
  else
    pd_tensor_release(local);
  return PD_OK;
}

/* Removes the data files of other generations than gen (rank 0, after the
 * commit). */
static void remove_stale(const char *dir, int64_t gen) {
  DIR *d = opendir(dir);
  for (struct dirent *e; d && (e = readdir(d)) != NULL;) {
    int rank;
    long long g;
    int used = 0;
    if (sscanf(e->d_name, "%d_%lld.distcp%n", &rank, &g, &used) != 2 || e->d_name[used] != '\0' || g == gen)
      continue;
    char *p = join(dir, e->d_name);
    if (p) unlink(p);
    free(p);
  }
  if (d) closedir(d);
  pd_clear_error();
}

static pd_status save_impl(const pd_named_tensors *state, const char *dir, pd_strbuf *idx,
                           pd_named_tensors *mine, int64_t *gen) {
  pd_status st = next_generation(dir, gen);
  if (st != PD_OK) return st;
  if (mkdir(dir, 0777) != 0 && errno != EEXIST)
    return pd_set_error(PD_ERR_IO, "save_state_dict: cannot create directory '%s': %s", dir, strerror(errno));
  int rank = pd_ap_my_rank();
  char file[64];
  snprintf(file, sizeof file, "%d_%lld.distcp", rank, (long long)*gen);
  mine->names = calloc((size_t)state->n + 1, sizeof *mine->names);
  mine->tensors = calloc((size_t)state->n + 1, sizeof *mine->tensors);
  if (!mine->names || !mine->tensors) return pd_set_error(PD_ERR_MEMORY, "save_state_dict: out of memory");
  for (int i = 0; i < state->n && st == PD_OK; i++) {
    const char *key = state->names[i];
    pd_tensor *t = state->tensors[i];
    if ((st = check_key(key)) != PD_OK) break;
    if (!t) {
      st = pd_set_error(PD_ERR_INVALID, "save_state_dict: tensor '%s' is NULL", key);
      break;
    }
    pd_tensor *w;
    int nd;
    int64_t shape[PD_MAX_DIMS], off[PD_MAX_DIMS], len[PD_MAX_DIMS];
    if ((st = slice_of(t, &w, &nd, shape, off, &len[0])) != PD_OK) break;
    if (!w) continue;
    bool empty = w->numel == 0;
    put_slice(idx, key, empty ? "-" : file, w, nd, shape, off, len);
    if (empty) {
      pd_tensor_release(w);
      continue;
    }
    mine->names[mine->n] = strdup(key);
    mine->tensors[mine->n++] = w;
    if (!mine->names[mine->n - 1]) st = pd_set_error(PD_ERR_MEMORY, "save_state_dict: out of memory");
  }
  if (st != PD_OK) return st;
  char *fp = join(dir, file);
  if (!fp) return pd_last_status();
  pd_string_map meta = {0};
  char gbuf[32];
  snprintf(gbuf, sizeof gbuf, "%lld", (long long)*gen);
  st = pd_string_map_set(&meta, "format", CKPT_FORMAT);
  if (st == PD_OK) st = pd_string_map_set(&meta, "generation", gbuf);
  if (st == PD_OK) st = pd_save_with_metadata(mine, fp, &meta);
  if (st != PD_OK) pd_error_prefix("save_state_dict");
  pd_string_map_free(&meta);
  free(fp);
  return st;
}

/* A rank whose part failed sends this instead of its index lines (no
 * line of an index starts with a tab). */
#define FAILED_MARK "\tfailed\n"

/* Every rank's index lines to every rank; rank 0 then writes the metadata
 * (the commit), unless some rank failed: then every rank returns an error
 * naming it and the previous checkpoint stays. */
static pd_status commit(const char *dir, int64_t gen, const pd_strbuf *idx, bool ok) {
  pd_strbuf all = {0};
  pd_status st = PD_OK;
  int failed_rank = ok ? -1 : pd_ap_my_rank();
  const char *mine = ok ? (idx->s ? idx->s : "") : FAILED_MARK;
  size_t mine_len = ok ? idx->len : strlen(FAILED_MARK);
  if (world_is_dist()) {
    int n = pd_dist_get_world_size(NULL);
    void **objs = calloc((size_t)n, sizeof *objs);
    size_t *lens = calloc((size_t)n, sizeof *lens);
    if (!objs || !lens)
      st = pd_set_error(PD_ERR_MEMORY, "save_state_dict: out of memory");
    else
      st = pd_dist_all_gather_object(objs, lens, mine, mine_len, NULL);
    for (int r = 0; r < n && st == PD_OK; r++) {
      if (lens[r] == strlen(FAILED_MARK) && memcmp(objs[r], FAILED_MARK, lens[r]) == 0) {
        if (failed_rank < 0) failed_rank = r;
        continue;
      }
      pd_sb_append(&all, objs[r], lens[r]);
    }
    for (int r = 0; objs && r < n; r++) free(objs[r]);
    free(objs);
    free(lens);
  } else {
    pd_sb_append(&all, mine, mine_len);
  }
  if (st == PD_OK && all.failed) st = pd_set_error(PD_ERR_MEMORY, "save_state_dict: out of memory");
  if (st == PD_OK && failed_rank >= 0 && ok)
    st = pd_set_error(PD_ERR_IO,
                      "save_state_dict: rank %d failed to write its part of '%s'; nothing was "
                      "committed",
                      failed_rank, dir);
  if (st == PD_OK && ok && pd_ap_my_rank() == 0) {
    char *mp = join(dir, CKPT_META);
    pd_string_map meta = {0};
    char gbuf[32], nbuf[32];
    snprintf(gbuf, sizeof gbuf, "%lld", (long long)gen);
    snprintf(nbuf, sizeof nbuf, "%d", world_is_dist() ? pd_dist_get_world_size(NULL) : 1);
    pd_named_tensors none = {0};
    st = mp ? pd_string_map_set(&meta, "format", CKPT_FORMAT) : pd_last_status();
    if (st == PD_OK) st = pd_string_map_set(&meta, "generation", gbuf);
    if (st == PD_OK) st = pd_string_map_set(&meta, "world_size", nbuf);
    if (st == PD_OK) st = pd_string_map_set(&meta, "index", all.s ? all.s : "");
    if (st == PD_OK) st = pd_save_with_metadata(&none, mp, &meta);
    if (st != PD_OK) pd_error_prefix("save_state_dict");
    if (st == PD_OK) remove_stale(dir, gen);
    pd_string_map_free(&meta);
    free(mp);
  }
  free(all.s);
  return st;
}

pd_status pd_dist_save_state_dict(const pd_named_tensors *state, const char *path) {
  if (!state || !path)
    return pd_set_error(PD_ERR_INVALID, "save_state_dict: %s is NULL", state ? "path" : "state_dict");
  if (state->n < 0 || (state->n > 0 && (!state->names || !state->tensors)))
    return pd_set_error(PD_ERR_INVALID, "save_state_dict: malformed state_dict (n = %d)", state->n);
  pd_internal_enter();
  bool prev = pd_set_grad_enabled(false);
  pd_strbuf idx = {0};
  pd_named_tensors mine = {0};
  int64_t gen = 0;
  pd_status st = save_impl(state, path, &idx, &mine, &gen);
  if (st == PD_OK && idx.failed) st = pd_set_error(PD_ERR_MEMORY, "save_state_dict: out of memory");
  /* every rank reaches the exchange, so one rank's failure is no hang */
  char err[1024];
  snprintf(err, sizeof err, "%s", pd_last_error());
  pd_status mine_st = st;
  st = commit(path, gen, &idx, mine_st == PD_OK);
  if (world_is_dist()) {
    pd_status bs = pd_dist_barrier(NULL);
    if (st == PD_OK) st = bs;
  }
  free(idx.s);
  pd_state_free(&mine);
  pd_set_grad_enabled(prev);
  pd_internal_leave();
  if (mine_st != PD_OK) return pd_set_error(mine_st, "%s", err);
  return st;
}

/* ---- load ----------------------------------------------------------------- */
/* One tensor to fill: its local box in the global value and the buffer the
 * overlapping slices are copied into. */
typedef struct target {
  const char *key;
  pd_tensor *t;
  bool member;
  int ndim;
  int64_t off[PD_MAX_DIMS], len[PD_MAX_DIMS];
  pd_tensor *buf; /* contiguous, t's dtype, shape len */
  int64_t covered;
} target;

static pd_status target_init(target *g, const char *key, pd_tensor *t, const index_t *x, const char *dir) {
  g->key = key;
  g->t = t;
  const pd_dist_attr *a = pd_ap_attr(t);
  const int64_t *shape = a ? a->shape : t->shape;
  g->ndim = a ? a->ndim : t->ndim;
  for (int d = 0; d < g->ndim; d++) {
    g->off[d] = 0;
    g->len[d] = shape[d];
  }
  const slice *found = NULL;
  for (int i = 0; i < x->n && !found; i++)
    if (strcmp(x->s[i].key, key) == 0) found = &x->s[i];
  if (!found)
    return pd_set_error(PD_ERR_INVALID, "load_state_dict: '%s' is not in the checkpoint at '%s'", key, dir);
  if (found->ndim != g->ndim || !pd_shape_eq(g->ndim, found->shape, shape)) {
    pd_strbuf b = {0};
    pd_sb_shape(&b, found->ndim, found->shape);
    pd_sb_puts(&b, " but the tensor's is ");
    pd_sb_shape(&b, g->ndim, shape);
    pd_status st = pd_set_error(PD_ERR_SHAPE, "load_state_dict: '%s' has the global shape %s in '%s'", key,
                                b.s ? b.s : "", dir);
    free(b.s);
    return st;
  }
  g->member = true;
  if (a) {
    int64_t c[PD_DIST_MAX_MESH_DIMS];
    g->member = pd_ap_mesh_coords(a->mesh, pd_ap_my_rank(), c);
    for (int m = 0; g->member && m < a->n; m++) {
      if (a->p[m].kind == PD_DIST_PARTIAL) {
        char buf[600];
        return pd_set_error(
            PD_ERR_UNIMPLEMENTED,
            "load_state_dict: '%s' is %s, Partial on mesh axis %d; reshard it to Replicate or "
            "Shard before loading",
            key, pd_ap_attr_str(a, buf, sizeof buf), m);
      }
      if (a->p[m].kind == PD_DIST_SHARD) {
        int d = a->p[m].dim;
        pd_ap_shard_range(a->shape[d], a->mesh->shape[m], c[m], &g->off[d], &g->len[d]);
      }
    }
  }
  if (!g->member) return PD_OK;
  g->buf = pd_zeros(g->ndim, g->len, t->dtype);
  return g->buf ? PD_OK : pd_last_status();
}

/* The overlap of slice s and target g in each dim; false when empty. */
static bool overlap(const slice *s, const target *g, int64_t *lo, int64_t *n) {
  for (int d = 0; d < g->ndim; d++) {
    int64_t a = s->off[d] > g->off[d] ? s->off[d] : g->off[d];
    int64_t b = s->off[d] + s->len[d] < g->off[d] + g->len[d] ? s->off[d] + s->len[d] : g->off[d] + g->len[d];
    if (b <= a) return false;
    lo[d] = a;
    n[d] = b - a;
  }
  return true;
}

/* Copies the box [lo, lo + n) (global coordinates) from src (contiguous,
 * holding the box at src_off of extent src_len) into dst (at dst_off). */
static void copy_box(int ndim, const int64_t *lo, const int64_t *n, const char *src, const int64_t *src_off,
                     const int64_t *src_len, char *dst, const int64_t *dst_off, const int64_t *dst_len,
                     size_t es) {
  if (ndim == 0) {
    memcpy(dst, src, es);
    return;
  }
  int64_t sst[PD_MAX_DIMS], dst_st[PD_MAX_DIMS];
  sst[ndim - 1] = dst_st[ndim - 1] = 1;
  for (int d = ndim - 2; d >= 0; d--) {
    sst[d] = sst[d + 1] * src_len[d + 1];
    dst_st[d] = dst_st[d + 1] * dst_len[d + 1];
  }
  int64_t rows = 1;
  for (int d = 0; d < ndim - 1; d++) rows *= n[d];
  int64_t idx[PD_MAX_DIMS] = {0};
  for (int64_t r = 0; r < rows; r++) {
    int64_t so = 0, doff = 0;
    for (int d = 0; d < ndim; d++) {
      int64_t gcoord = lo[d] + (d < ndim - 1 ? idx[d] : 0);
      so += (gcoord - src_off[d]) * sst[d];
      doff += (gcoord - dst_off[d]) * dst_st[d];
    }
    memcpy(dst + (size_t)doff * es, src + (size_t)so * es, (size_t)n[ndim - 1] * es);
    for (int d = ndim - 2; d >= 0; d--) { /* next row */
      if (++idx[d] < n[d]) break;
      idx[d] = 0;
    }
  }
}

/* Copies every slice of file `file` that overlaps a target. */
static pd_status load_file(const char *dir, const char *file, const index_t *x, target *gs, int ng) {
  char *fp = join(dir, file);
  if (!fp) return pd_last_status();
  pd_named_tensors got = {0};
  pd_status st = PD_OK;
  if (access(fp, F_OK) != 0)
    st = pd_set_error(PD_ERR_IO, "load_state_dict: '%s' is missing (the checkpoint's metadata lists it)", fp);
  else if ((st = pd_load(fp, &got)) != PD_OK)
    pd_error_prefix("load_state_dict");
  for (int i = 0; i < x->n && st == PD_OK; i++) {
    const slice *s = &x->s[i];
    if (strcmp(s->file, file) != 0) continue;
    for (int k = 0; k < ng && st == PD_OK; k++) {
      target *g = &gs[k];
      int64_t lo[PD_MAX_DIMS], n[PD_MAX_DIMS];
      if (!g->member || strcmp(g->key, s->key) != 0 || !overlap(s, g, lo, n)) continue;
      pd_tensor *src = NULL;
      for (int j = 0; j < got.n && !src; j++)
        if (strcmp(got.names[j], s->key) == 0) src = got.tensors[j];
      if (!src || src->ndim != s->ndim || !pd_shape_eq(s->ndim, src->shape, s->len)) {
        st = pd_set_error(
            PD_ERR_INVALID,
            "load_state_dict: '%s' does not hold the slice of '%s' its checkpoint's metadata lists", fp,
            s->key);
        break;
      }
      pd_tensor *c = src->dtype == g->t->dtype ? pd_tensor_retain(src) : pd_cast(src, g->t->dtype);
      if (!c) {
        st = pd_last_status();
        break;
      }
      copy_box(g->ndim, lo, n, pd_data_ptr(c), s->off, s->len, pd_data_ptr(g->buf), g->off, g->len,
               pd_dtype_size(g->t->dtype));
      pd_tensor_release(c);
      int64_t cnt = 1;
      for (int d = 0; d < g->ndim; d++) cnt *= n[d];
      g->covered += cnt;
    }
  }
  pd_state_free(&got);
  free(fp);
  return st;
}

/* Writes buf into t's local data in place. */
static pd_status store(target *g) {
  pd_tensor *t = g->t;
  if (t->is_contiguous && t->numel == g->buf->numel) {
    memcpy(pd_data_ptr(t), pd_data_ptr(g->buf), (size_t)t->numel * pd_dtype_size(t->dtype));
    t->storage->version++;
    return PD_OK;
  }
  return pd_set_error(PD_ERR_INVALID,
                      "load_state_dict: '%s' is not contiguous; load into a contiguous tensor", g->key);
}

pd_status pd_dist_load_state_dict(const pd_named_tensors *state, const char *path) {
  if (!state || !path)
    return pd_set_error(PD_ERR_INVALID, "load_state_dict: %s is NULL", state ? "path" : "state_dict");
  if (state->n < 0 || (state->n > 0 && (!state->names || !state->tensors)))
    return pd_set_error(PD_ERR_INVALID, "load_state_dict: malformed state_dict (n = %d)", state->n);
  index_t x = {0};
  pd_status st = read_meta(path, &x);
  if (st != PD_OK) return st;
  pd_internal_enter();
  bool prev = pd_set_grad_enabled(false);
  target *gs = calloc((size_t)state->n + 1, sizeof *gs);
  if (!gs) st = pd_set_error(PD_ERR_MEMORY, "load_state_dict: out of memory");
  for (int i = 0; i < state->n && st == PD_OK; i++) {
    if (!state->names[i] || !state->tensors[i])
      st = pd_set_error(PD_ERR_INVALID, "load_state_dict: entry %d has a NULL %s", i,
                        state->names[i] ? "tensor" : "key");
    else
      st = target_init(&gs[i], state->names[i], state->tensors[i], &x, path);
  }
  /* each file holding a slice some target overlaps, once */
  for (int i = 0; i < x.n && st == PD_OK; i++) {
    const slice *s = &x.s[i];
    bool needed = strcmp(s->file, "-") != 0, seen = false;
    for (int j = 0; j < i && needed && !seen; j++) seen = strcmp(x.s[j].file, s->file) == 0;
    if (!needed || seen) continue;
    bool any = false;
    for (int j = i; j < x.n && !any; j++) {
      if (strcmp(x.s[j].file, s->file) != 0) continue;
      for (int k = 0; k < state->n && !any; k++) {
        int64_t lo[PD_MAX_DIMS], n[PD_MAX_DIMS];
        any = gs[k].member && strcmp(gs[k].key, x.s[j].key) == 0 && overlap(&x.s[j], &gs[k], lo, n);
      }
    }
    if (any) st = load_file(path, s->file, &x, gs, state->n);
  }
  for (int k = 0; k < state->n && st == PD_OK; k++)
    if (gs[k].member && gs[k].covered != gs[k].buf->numel)
      st = pd_set_error(
          PD_ERR_INVALID,
          "load_state_dict: the checkpoint at '%s' covers %lld of the %lld elements of this rank's "
          "shard of '%s'",
          path, (long long)gs[k].covered, (long long)gs[k].buf->numel, gs[k].key);
  for (int k = 0; k < state->n && st == PD_OK; k++)
    if (gs[k].member) st = store(&gs[k]);
  for (int k = 0; gs && k < state->n; k++) pd_tensor_release(gs[k].buf);
  free(gs);
  index_free(&x);
  pd_set_grad_enabled(prev);
  pd_internal_leave();
  return st;
}
