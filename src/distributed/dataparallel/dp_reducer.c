/* The gradient reducer of DataParallel (Paddle's EagerReducer).
 *
 * Gradients live in the buckets: each parameter has a slot, a view of its
 * bucket shaped like the parameter, and after its first synchronised
 * backward the parameter's .grad IS that view. The engine accumulates a
 * leaf's gradient in place into an existing .grad (pd_add_) and only
 * creates a new tensor when .grad is NULL (first backward, or after
 * clear_grad(set_to_zero=false)); so the post-accumulate hook finds the
 * slot already holding the gradient, or copies the new tensor into the slot
 * and points .grad back at it. Buckets are views of one shared allocation
 * per dtype (pd_dist_alloc_shared), so the shm all_reduce on them is zero
 * copy.
 *
 * A pass: the wrapper's forward calls prepare (arms the hooks, finds the
 * unused parameters); the first hook of the backward queues the
 * end-of-backward callback and marks the unused parameters ready; each hook
 * marks its parameter ready; a bucket whose parameters are all ready is
 * launched (async AVG all_reduce: sum, then divide by nranks) when it is the next
 * in reducer order, followed by any later ready buckets; the callback
 * launches what is left, waits for every task and disarms. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../autograd/graph_walk.h"
#include "../../core/core_internal.h"
#include "../../ops/op_registry.h"
#include "dp_internal.h"
#include "paddlec/autograd.h"
#include "paddlec/manipulation.h"

#define MiB (1024.0 * 1024.0)
#define ALIGN_BYTES 64

typedef struct dp_param {
  pd_dp_reducer *r;
  int idx;
  pd_tensor *t; /* retained */
  char *name;
  int bucket;      /* reducer (launch) order */
  pd_tensor *slot; /* view of the bucket, shaped like t */
  int hook_id;
} dp_param;

typedef struct dp_bucket {
  pd_dtype dtype;
  int n;
  int *members; /* into dp_param, ascending */
  int64_t numel;
  pd_tensor *buf;
  int pending;
  bool launched;
  pd_dist_task *task;
} dp_bucket;

typedef struct lookup_entry {
  const pd_tensor *t;
  int idx;
} lookup_entry;

struct pd_dp_reducer {
  pd_dist_group *group;
  int nranks;
  int n;
  dp_param *p;
  int nb;
  dp_bucket *b;
  int *starts, *members;
  pd_tensor *arena[PD_NUM_DTYPES];
  lookup_entry *lookup; /* sorted by tensor pointer */
  bool find_unused, defer;
  /* one pass */
  bool armed, fired, searched_once;
  bool comm_broken; /* a collective failed: launch nothing more */
  int next;
  unsigned char *ready, *used, *unused;
  pd_status err;
  char errmsg[1024];
};

/* Keeps the first error of a pass (the hook cannot return one). */
__attribute__((format(printf, 3, 4))) static void fail(pd_dp_reducer *r, pd_status code, const char *fmt,
                                                       ...) {
  if (r->err != PD_OK) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->errmsg, sizeof r->errmsg, fmt, ap);
  va_end(ap);
  r->err = code;
}

static void fail_last(pd_dp_reducer *r) {
  pd_status code = pd_last_status() != PD_OK ? pd_last_status() : PD_ERR_STATE;
  fail(r, code, "%s", pd_last_error());
}

/* ---- construction -------------------------------------------------------- */
static int cmp_lookup(const void *a, const void *b) {
  const pd_tensor *x = ((const lookup_entry *)a)->t, *y = ((const lookup_entry *)b)->t;
  return x < y ? -1 : x > y;
}

static void on_grad_ready(pd_tensor *leaf, void *user);

/* Sizes above this many MB would not fit a size_t in bytes on every host
 * and are never meant (1 TiB). */
#define MAX_BUFFER_MB 1048576.0

pd_status pd_dp_buffer_sizes(const pd_data_parallel_opts *opts, double *comm_mb, double *last_mb) {
  *comm_mb = opts && opts->comm_buffer_size != 0 ? opts->comm_buffer_size : 25;
  *last_mb = opts && opts->last_comm_buffer_size != 0 ? opts->last_comm_buffer_size : 1;
  if (!(*comm_mb > 0 && *comm_mb <= MAX_BUFFER_MB) || !(*last_mb > 0 && *last_mb <= MAX_BUFFER_MB))
    return pd_set_error(PD_ERR_INVALID,
                        "DataParallel: comm_buffer_size (%g MB) and last_comm_buffer_size (%g MB) must be in "
                        "(0, %g] MB",
                        *comm_mb, *last_mb, MAX_BUFFER_MB);
  return PD_OK;
}

pd_dp_reducer *pd_dp_reducer_new(pd_tensor *const *params, char *const *names, int n, pd_dist_group *group,
                                 const pd_data_parallel_opts *opts) {
  double comm_mb, last_mb;
  if (pd_dp_buffer_sizes(opts, &comm_mb, &last_mb) != PD_OK) return NULL;
  pd_dp_reducer *r = calloc(1, sizeof *r);
  if (!r) {
    pd_set_error(PD_ERR_MEMORY, "DataParallel: out of memory");
    return NULL;
  }
  r->group = group;
  r->nranks = pd_dist_get_world_size(group);
  r->n = n;
  r->find_unused = opts && opts->find_unused_parameters;
  r->defer = opts && opts->defer_all_reduce;
  r->p = calloc((size_t)n, sizeof *r->p);
  r->ready = calloc((size_t)n, 1);
  r->used = calloc((size_t)n, 1);
  r->unused = calloc((size_t)n, 1);
  r->lookup = malloc((size_t)n * sizeof *r->lookup);
  pd_dtype *dts = malloc((size_t)n * sizeof *dts);
  size_t *bytes = malloc((size_t)n * sizeof *bytes);
  if (!r->p || !r->ready || !r->used || !r->unused || !r->lookup || !dts || !bytes) {
    free(dts), free(bytes);
    pd_dp_reducer_free(r);
    pd_set_error(PD_ERR_MEMORY, "DataParallel: out of memory");
    return NULL;
  }
  for (int i = 0; i < n; i++) {
    dp_param *p = &r->p[i];
    p->r = r;
    p->idx = i;
    p->t = pd_tensor_retain(params[i]);
    p->name = strdup(names[i]);
    p->hook_id = -1;
    dts[i] = params[i]->dtype;
    bytes[i] = (size_t)params[i]->numel * pd_dtype_size(params[i]->dtype);
    r->lookup[i] = (lookup_entry){params[i], i};
  }
  qsort(r->lookup, (size_t)n, sizeof *r->lookup, cmp_lookup);
  /* Paddle: int(v * 1024 * 1024) bytes; limits = [last, comm] */
  size_t limits[2] = {(size_t)(last_mb * MiB), (size_t)(comm_mb * MiB)};
  int *starts = NULL, *members = NULL;
  int ng = pd_dp_assign_buckets(n, dts, bytes, limits, 2, &starts, &members);
  free(dts);
  free(bytes);
  if (ng < 0) {
    pd_dp_reducer_free(r);
    return NULL;
  }
  r->starts = starts;
  r->members = members;
  r->nb = ng;
  r->b = calloc((size_t)ng, sizeof *r->b);
  if (!r->b) {
    pd_dp_reducer_free(r);
    pd_set_error(PD_ERR_MEMORY, "DataParallel: out of memory");
    return NULL;
  }
  /* reducer order is the reverse of the assignment: bucket 0 holds the
   * last parameters, whose gradients arrive first in backward */
  int64_t arena_numel[PD_NUM_DTYPES] = {0};
  int64_t *bucket_off = calloc((size_t)ng, sizeof *bucket_off);
  if (!bucket_off) {
    pd_dp_reducer_free(r);
    pd_set_error(PD_ERR_MEMORY, "DataParallel: out of memory");
    return NULL;
  }
  pd_dtype order[PD_NUM_DTYPES];
  int ndt = 0;
  for (int k = 0; k < ng; k++) {
    int g = ng - 1 - k;
    dp_bucket *b = &r->b[k];
    b->members = &members[starts[g]];
    b->n = starts[g + 1] - starts[g];
    b->dtype = r->p[b->members[0]].t->dtype;
    for (int j = 0; j < b->n; j++) {
      r->p[b->members[j]].bucket = k;
      b->numel += r->p[b->members[j]].t->numel;
    }
    int d = (int)b->dtype;
    bool seen = false;
    for (int q = 0; q < ndt; q++) seen = seen || order[q] == b->dtype;
    if (!seen) order[ndt++] = b->dtype;
    int64_t align = ALIGN_BYTES / (int64_t)pd_dtype_size(b->dtype);
    bucket_off[k] = arena_numel[d];
    arena_numel[d] += (b->numel + align - 1) / align * align;
  }
  /* one shared allocation per dtype, in the same order on every rank */
  pd_status st = PD_OK;
  for (int q = 0; q < ndt && st == PD_OK; q++) {
    int d = (int)order[q];
    r->arena[d] = pd_dist_alloc_shared(group, order[q], 1, (int64_t[]){arena_numel[d]});
    if (!r->arena[d]) st = pd_last_status() != PD_OK ? pd_last_status() : PD_ERR_COMM;
  }
  for (int k = 0; k < ng && st == PD_OK; k++) {
    dp_bucket *b = &r->b[k];
    pd_tensor *a = r->arena[b->dtype];
    b->buf = pd_tensor_new_view(a, 1, (int64_t[]){b->numel}, (int64_t[]){1}, bucket_off[k]);
    if (!b->buf) st = pd_last_status();
    int64_t off = bucket_off[k];
    for (int j = 0; j < b->n && st == PD_OK; j++) {
      dp_param *p = &r->p[b->members[j]];
      int64_t strides[PD_MAX_DIMS];
      pd_compute_contiguous_strides(p->t->ndim, p->t->shape, strides);
      p->slot = pd_tensor_new_view(a, p->t->ndim, p->t->shape, strides, off);
      if (!p->slot) st = pd_last_status();
      off += p->t->numel;
    }
  }
  free(bucket_off);
  for (int i = 0; i < n && st == PD_OK; i++) {
    int id = pd_tensor_register_post_accumulate_hook(r->p[i].t, on_grad_ready, &r->p[i]);
    if (id < 0)
      st = id;
    else
      r->p[i].hook_id = id;
  }
  if (st != PD_OK) {
    pd_dp_reducer_free(r);
    return NULL;
  }
  return r;
}

static void wait_all(pd_dp_reducer *r) {
  for (int k = 0; k < r->nb; k++) {
    dp_bucket *b = &r->b[k];
    if (!b->task) continue;
    if (pd_dist_task_wait(b->task) != PD_OK) {
      r->comm_broken = true;
      fail_last(r);
    }
    pd_dist_task_release(b->task);
    b->task = NULL;
  }
}

void pd_dp_reducer_free(pd_dp_reducer *r) {
  if (!r) return;
  pd_internal_enter();
  if (r->b) wait_all(r);
  for (int i = 0; r->p && i < r->n; i++) {
    dp_param *p = &r->p[i];
    if (p->hook_id > 0) pd_tensor_remove_hook(p->t, p->hook_id);
    /* a grad that is a bucket view gets a private copy, so the shared
     * memory goes with the reducer and the grad stays usable */
    if (p->t && p->slot && p->t->grad == p->slot) {
      pd_tensor *c = pd_assign(p->slot);
      if (c) {
        pd_tensor_set_grad(p->t, c);
        pd_tensor_release(c);
      } else {
        pd_tensor_set_grad(p->t, NULL);
      }
    }
    pd_tensor_release(p->slot);
    pd_tensor_release(p->t);
    free(p->name);
  }
  for (int k = 0; r->b && k < r->nb; k++) pd_tensor_release(r->b[k].buf);
  for (int d = 0; d < PD_NUM_DTYPES; d++) pd_tensor_release(r->arena[d]);
  pd_internal_leave();
  free(r->p), free(r->b), free(r->starts), free(r->members), free(r->lookup);
  free(r->ready), free(r->used), free(r->unused);
  free(r);
}

/* ---- one pass ------------------------------------------------------------------ */
static void mark_reached(pd_tensor *leaf, void *user) {
  pd_dp_reducer *r = user;
  lookup_entry key = {leaf, 0};
  lookup_entry *e = bsearch(&key, r->lookup, (size_t)r->n, sizeof key, cmp_lookup);
  if (e) r->unused[e->idx] = 0;
}

pd_status pd_dp_reducer_prepare(pd_dp_reducer *r, pd_tensor *const *outs, int n_outs) {
  if (r->fired)
    return pd_set_error(PD_ERR_STATE,
                        "DataParallel: the previous backward did not finish synchronising its gradients");
  r->next = 0;
  r->err = PD_OK;
  r->errmsg[0] = 0;
  memset(r->ready, 0, (size_t)r->n);
  memset(r->used, 0, (size_t)r->n);
  for (int k = 0; k < r->nb; k++) {
    r->b[k].pending = r->b[k].n;
    r->b[k].launched = false;
  }
  /* the first pass always searches; later ones only with the flag (else
   * the set found at the first pass is kept, as Paddle) */
  if (r->find_unused || !r->searched_once) {
    memset(r->unused, 1, (size_t)r->n);
    pd_status st = pd_autograd_visit_leaves(outs, n_outs, mark_reached, r);
    if (st != PD_OK) return st;
    r->searched_once = true;
  }
  r->armed = true;
  return PD_OK;
}

/* Puts parameter i's gradient into its slot. A NULL grad leaves zeros in
 * the slot and, unless `bind_null`, the grad NULL. */
static void fill_slot(pd_dp_reducer *r, int i, bool bind_null) {
  dp_param *p = &r->p[i];
  pd_tensor *g = p->t->grad;
  if (g == p->slot) return;
  if (g) {
    if (g->numel != p->slot->numel) {
      fail(r, PD_ERR_SHAPE, "DataParallel: the gradient of '%s' has %lld elements, the parameter %lld",
           p->name, (long long)g->numel, (long long)p->slot->numel);
      return;
    }
    /* copy_ into the slot (a gradient of another shape with as many
     * elements is viewed with the slot's) */
    bool same = g->ndim == p->slot->ndim && pd_shape_eq(g->ndim, g->shape, p->slot->shape);
    pd_tensor *src = same ? pd_tensor_retain(g) : pd_reshape(g, p->slot->ndim, p->slot->shape);
    pd_status st = src ? pd_write_copy(p->slot, src) : pd_last_status();
    pd_tensor_release(src);
    if (st != PD_OK) {
      fail_last(r);
      return;
    }
  } else if (pd_write_fill(p->slot, 0.0) != PD_OK) {
    fail_last(r);
    return;
  }
  if (g || bind_null) pd_tensor_set_grad(p->t, p->slot);
}

static void launch(pd_dp_reducer *r, int k) {
  dp_bucket *b = &r->b[k];
  b->launched = true;
  if (r->comm_broken) return;
  /* AVG sums, then divides by nranks (Paddle scales by 1/nranks before a
   * SUM; see parallel.h for how the results differ). The shm backend
   * divides each slice as it reduces it, saving a pass over the bucket. */
  if (pd_dist_all_reduce(b->buf, PD_REDUCE_AVG, &(pd_dist_opts){.group = r->group, .task = &b->task}) !=
      PD_OK) {
    r->comm_broken = true;
    fail_last(r);
  }
}

/* Launches the buckets that are ready, strictly in reducer order. */
static void launch_ready(pd_dp_reducer *r) {
  while (r->next < r->nb && r->b[r->next].pending == 0) launch(r, r->next++);
}

static void mark_ready(pd_dp_reducer *r, int i) {
  if (r->ready[i]) {
    fail(r, PD_ERR_STATE,
         "DataParallel: parameter '%s' got its gradient after it was already marked ready in this "
         "backward; set find_unused_parameters=true to search the graph at every step (other causes: "
         "a parameter reused across several backward passes of one forward, or used outside forward)",
         r->p[i].name);
    return;
  }
  r->ready[i] = 1;
  dp_bucket *b = &r->b[r->p[i].bucket];
  if (--b->pending == 0 && !r->defer) launch_ready(r);
}

static pd_status finalize(pd_status backward_status, void *user);

static void on_grad_ready(pd_tensor *leaf, void *user) {
  (void)leaf;
  dp_param *p = user;
  pd_dp_reducer *r = p->r;
  if (!r->armed) return; /* no_sync, or a backward not prepared by the wrapper's forward */
  if (!r->fired) {
    r->fired = true;
    if (pd_autograd_queue_callback(finalize, r) != PD_OK) fail_last(r);
    for (int i = 0; i < r->n; i++)
      if (r->unused[i]) {
        fill_slot(r, i, false);
        mark_ready(r, i);
      }
  }
  r->used[p->idx] = 1;
  if (r->unused[p->idx] || r->ready[p->idx]) {
    mark_ready(r, p->idx); /* reports the double marking */
    return;
  }
  fill_slot(r, p->idx, true);
  mark_ready(r, p->idx);
}

/* Parameters used elsewhere but not here get the averaged gradient. */
static void share_used(pd_dp_reducer *r) {
  pd_tensor *u = pd_tensor_new(PD_INT32, 1, (int64_t[]){r->n});
  if (!u) {
    fail_last(r);
    return;
  }
  int32_t *v = pd_data_ptr(u);
  for (int i = 0; i < r->n; i++) v[i] = r->used[i];
  if (pd_dist_all_reduce(u, PD_REDUCE_SUM, &(pd_dist_opts){.group = r->group}) != PD_OK) {
    r->comm_broken = true;
    fail_last(r);
  } else {
    for (int i = 0; i < r->n; i++)
      if (!r->used[i] && v[i] > 0 && r->p[i].t->grad != r->p[i].slot)
        pd_tensor_set_grad(r->p[i].t, r->p[i].slot);
  }
  pd_tensor_release(u);
}

static pd_status finalize(pd_status backward_status, void *user) {
  pd_dp_reducer *r = user;
  pd_internal_enter();
  if (backward_status == PD_OK && r->err == PD_OK) {
    char names[512] = "";
    int missing = 0;
    for (int i = 0; i < r->n; i++) {
      if (r->ready[i]) continue;
      if (r->find_unused) { /* reached by the graph but no gradient arrived */
        fill_slot(r, i, false);
        mark_ready(r, i);
        continue;
      }
      if (missing++ < 4) {
        size_t l = strlen(names);
        snprintf(names + l, sizeof names - l, "%s'%s'", l ? ", " : "", r->p[i].name);
      }
    }
    if (missing)
      fail(r, PD_ERR_STATE,
           "DataParallel: parameter%s %s%s received no gradient in this backward (%d of %d parameters), "
           "so its bucket could never be reduced; if the forward does not use every parameter at every "
           "step, construct DataParallel with find_unused_parameters=true",
           missing > 1 ? "s" : "", names, missing > 4 ? " and more" : "", missing, r->n);
  }
  /* launch what is left, in order, even after an error here, so that the
   * other ranks' all_reduces complete instead of waiting for this one */
  while (r->next < r->nb) launch(r, r->next++);
  wait_all(r);
  if (r->find_unused && r->err == PD_OK && backward_status == PD_OK) share_used(r);
  r->armed = false;
  r->fired = false;
  pd_internal_leave();
  if (r->err != PD_OK) return pd_set_error(r->err, "%s", r->errmsg);
  return PD_OK;
}

/* ---- debug view -------------------------------------------------------------- */
int pd_dp_reducer_num_buckets(const pd_dp_reducer *r) { return r ? r->nb : 0; }

pd_dp_bucket_info pd_dp_reducer_bucket(const pd_dp_reducer *r, int i) {
  pd_dp_bucket_info info = {0};
  if (!r || i < 0 || i >= r->nb) return info;
  info.dtype = r->b[i].dtype;
  info.n_params = r->b[i].n;
  info.params = r->b[i].members;
  info.numel = r->b[i].numel;
  return info;
}
