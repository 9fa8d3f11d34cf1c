/* Tensor structs, storages, views, reference counting and accessors. */
#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core_internal.h"
#include "shape_check.h"
#include "tensor_impl.h"

static void (*g_node_release)(pd_node *);
void pd_core_set_node_release(void (*fn)(pd_node *)) { g_node_release = fn; }

void pd_hook_list_free(pd_hook *h) {
  while (h) {
    pd_hook *n = h->next;
    free(h);
    h = n;
  }
}

int64_t pd_shape_numel(int ndim, const int64_t *shape) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= shape[i];
  return n;
}

void pd_compute_contiguous_strides(int ndim, const int64_t *shape, int64_t *strides) {
  int64_t s = 1;
  for (int i = ndim - 1; i >= 0; i--) {
    strides[i] = s;
    s *= shape[i] > 1 ? shape[i] : 1;
  }
}

bool pd_strides_are_contiguous(int ndim, const int64_t *shape, const int64_t *strides) {
  int64_t s = 1;
  for (int i = ndim - 1; i >= 0; i--) {
    if (shape[i] == 1) continue;
    if (strides[i] != s) return false;
    s *= shape[i];
  }
  return true;
}

char *pd_shape_str(int ndim, const int64_t *shape, char *buf, size_t cap) {
  size_t k = 0;
  k += (size_t)snprintf(buf + k, cap - k, "[");
  for (int i = 0; i < ndim && k < cap; i++)
    k += (size_t)snprintf(buf + k, cap - k, i ? ", %lld" : "%lld", (long long)shape[i]);
  if (k < cap) snprintf(buf + k, cap - k, "]");
  return buf;
}

/* Thread-local free lists of tensor structs and storages: creating and
 * dropping a small tensor then costs no malloc. Objects freed on another
 * thread join that thread's list. The sanitizer build bypasses them. */
typedef struct pool {
  void *head;
  int n;
} pool;
#define POOL_CAP 4096
static _Thread_local pool g_tensor_pool, g_storage_pool, g_block_pool;

/* A cached object links to the next through its second word: the first
 * holds the reference count of tensors and storages, which stays poisoned
 * (PD_REFCOUNT_FREED) while the object waits in the cache. */
static inline void **pool_link(void *x) { return (void **)x + 1; }

#ifndef PADDLEC_NO_CACHING
/* A thread's pools are given back when it exits (worker threads come and go). */
static pthread_key_t g_pool_key;
static pthread_once_t g_pool_once = PTHREAD_ONCE_INIT;
static _Thread_local bool g_pool_registered;

static void pool_drain(pool *p) {
  while (p->head) {
    void *x = p->head;
    p->head = *pool_link(x);
    free(x);
  }
  p->n = 0;
}

static void pools_at_thread_exit(void *unused) {
  (void)unused;
  pool_drain(&g_tensor_pool);
  pool_drain(&g_storage_pool);
  pool_drain(&g_block_pool);
}

static void pool_key_init(void) { pthread_key_create(&g_pool_key, pools_at_thread_exit); }
#endif

static void *pool_get(pool *p, size_t size) {
#ifndef PADDLEC_NO_CACHING
  if (p->head) {
    void *x = p->head;
    p->head = *pool_link(x);
    p->n--;
    return x;
  }
#else
  (void)p;
#endif
  void *x = NULL;
  return posix_memalign(&x, 64, size) == 0 ? x : NULL;
}

static void pool_put(pool *p, void *x) {
#ifndef PADDLEC_NO_CACHING
  if (!g_pool_registered) {
    g_pool_registered = true;
    pthread_once(&g_pool_once, pool_key_init);
    pthread_setspecific(g_pool_key, (void *)1); /* non-NULL: the destructor runs at exit */
  }
  if (p->n < POOL_CAP) {
    *pool_link(x) = p->head;
    p->head = x;
    p->n++;
    return;
  }
#else
  (void)p;
#endif
  free(x);
}

pd_tensor *pd_tensor_alloc_struct(void) {
  pd_tensor *t = pool_get(&g_tensor_pool, sizeof *t);
  if (!t) {
    pd_set_error(PD_ERR_MEMORY, "tensor: out of memory");
    return NULL;
  }
  /* every field but shape/strides (written by whoever fills the geometry),
   * in declaration order so the stores merge */
  atomic_init(&t->refcount, 1);
  t->dtype = PD_FLOAT32;
  t->ndim = 0;
  t->place = PD_CPU;
  t->numel = 1;
  t->offset = 0;
  t->storage = NULL;
  t->stop_gradient = true;
  t->is_contiguous = true;
  t->grad_fn_weak = false;
  t->is_meta = false;
  t->is_buffer = false;
  t->out_index = 0;
  t->bw_slot = 0;
  t->bw_stamp = 0;
  t->grad = NULL;
  t->grad_fn = NULL;
  t->hooks = t->post_hooks = NULL;
  t->dist_attr = NULL;
  t->dist_attr_free = NULL;
  t->param_info = NULL;
  t->name = NULL;
  return t;
}

static void tensor_free_struct(pd_tensor *t) {
  atomic_store_explicit(&t->refcount, PD_REFCOUNT_FREED, memory_order_relaxed);
  pool_put(&g_tensor_pool, t);
}

bool pd_tensor_check_live(const pd_tensor *t, const char *op) {
  int rc = atomic_load_explicit(&t->refcount, memory_order_relaxed);
  if (rc > 0) return true;
  pd_set_error(PD_ERR_STATE,
               "%s: the tensor at %p was already released (its reference count is %s): it was released "
               "once too often, or used after its last release",
               op, (const void *)t, rc == PD_REFCOUNT_FREED ? "poisoned" : "0");
  return false;
}

void *pd_block_get(void) { return pool_get(&g_block_pool, PD_POOL_BLOCK); }
void pd_block_put(void *p) {
  if (p) pool_put(&g_block_pool, p);
}

/* Drops one reference; true when it was the last. A count of 1 seen by the
 * holder of that reference cannot change under it (nobody else holds one),
 * so the common case of a tensor owned by one thread costs no locked
 * instruction. */
static inline bool drop_ref(atomic_int *rc) {
  return atomic_load_explicit(rc, memory_order_acquire) == 1 ||
         atomic_fetch_sub_explicit(rc, 1, memory_order_acq_rel) == 1;
}

static pd_storage *storage_new(size_t nbytes) {
  pd_storage *s = pool_get(&g_storage_pool, sizeof *s);
  if (!s) return NULL;
  if (nbytes <= PD_INLINE_BYTES) {
    s->data = s->inline_data;
    pd_alloc_account(PD_INLINE_BYTES, true);
  } else {
    s->data = pd_alloc(nbytes);
    if (!s->data) {
      pool_put(&g_storage_pool, s);
      return NULL;
    }
  }
  atomic_init(&s->refcount, 1);
  s->nbytes = nbytes;
  s->version = 0;
  s->free_fn = NULL;
  s->free_ctx = NULL;
  return s;
}

static void storage_release(pd_storage *s) {
  if (!s || !drop_ref(&s->refcount)) return;
  if (s->free_fn)
    s->free_fn(s->data, s->free_ctx);
  else if (s->data == s->inline_data)
    pd_alloc_account(PD_INLINE_BYTES, false);
  else
    pd_free(s->data, s->nbytes);
  pool_put(&g_storage_pool, s);
}

void pd_storage_retain_ref(void *storage) {
  atomic_fetch_add_explicit(&((pd_storage *)storage)->refcount, 1, memory_order_relaxed);
}

void pd_storage_release_ref(void *storage) { storage_release(storage); }

/* The geometry of a view or a wrapped buffer. A view with zero strides (an
 * expand) can claim far more elements than its storage holds, so its
 * logical count is checked here too. */
static pd_status set_geometry(const char *op, pd_tensor *t, int ndim, const int64_t *shape,
                              const int64_t *strides) {
  pd_status st = pd_shape_check(op, t->dtype, ndim, shape, false);
  if (st != PD_OK) return st;
  t->ndim = ndim;
  for (int i = 0; i < ndim; i++) t->shape[i] = shape[i];
  if (strides)
    for (int i = 0; i < ndim; i++) t->strides[i] = strides[i];
  else
    pd_compute_contiguous_strides(ndim, shape, t->strides);
  t->numel = pd_shape_numel(ndim, shape);
  t->is_contiguous = pd_strides_are_contiguous(ndim, shape, t->strides);
  return PD_OK;
}

pd_tensor *pd_tensor_new_untracked(pd_dtype dt, int ndim, const int64_t *shape) {
  pd_tensor *t = pd_tensor_alloc_struct();
  if (!t) return NULL;
  t->dtype = dt;
  /* fresh storage: contiguous by construction */
  t->ndim = ndim;
  if (pd_shape_check("tensor", dt, ndim, shape, false) != PD_OK) {
    tensor_free_struct(t);
    return NULL;
  }
  int64_t stride = 1, numel = 1;
  for (int i = ndim - 1; i >= 0; i--) {
    t->shape[i] = shape[i];
    t->strides[i] = stride;
    stride *= shape[i] > 1 ? shape[i] : 1;
    numel *= shape[i];
  }
  t->numel = numel;
  t->is_contiguous = true;
  t->storage = storage_new((size_t)t->numel * pd_dtype_size_fast(dt));
  if (!t->storage) {
    tensor_free_struct(t);
    return NULL;
  }
  return t;
}

pd_tensor *pd_tensor_new_meta(pd_dtype dt, int ndim, const int64_t *shape) {
  if ((unsigned)dt >= PD_NUM_DTYPES) {
    pd_set_error(PD_ERR_DTYPE, "tensor_new_meta: invalid dtype %d", (int)dt);
    return NULL;
  }
  if (ndim < 0 || ndim > PD_MAX_DIMS || (ndim > 0 && !shape)) {
    pd_set_error(PD_ERR_INVALID, "tensor_new_meta: rank %d%s (expected 0..%d dims)", ndim,
                 ndim > 0 && !shape ? " with a NULL shape" : "", PD_MAX_DIMS);
    return NULL;
  }
  if (pd_shape_check_full("tensor_new_meta", dt, ndim, shape, true) != PD_OK) return NULL;
  pd_tensor *t = pd_tensor_alloc_struct();
  if (!t) return NULL;
  t->dtype = dt;
  t->ndim = ndim;
  t->is_meta = true;
  int64_t numel = 1;
  for (int i = 0; i < ndim; i++) {
    t->shape[i] = shape[i];
    numel = shape[i] < 0 || numel < 0 ? -1 : numel * shape[i];
  }
  t->numel = numel;
  pd_compute_contiguous_strides(ndim, t->shape, t->strides); /* unknown dims count as 1 */
  return pd_scope_track(t);
}

bool pd_tensor_is_meta(const pd_tensor *t) { return t && t->is_meta; }

pd_status pd_tensor_meta_error(const char *fn, const pd_tensor *t) {
  return pd_set_error(PD_ERR_STATE,
                      "%s: tensor %s%s%s is a static Variable (shape %s, %s) with no data: its values exist "
                      "only when an Executor runs its Program",
                      fn, t->name ? "'" : "", t->name ? t->name : "(unnamed)", t->name ? "'" : "",
                      PD_SHAPE_STR(t), pd_dtype_name(t->dtype));
}

pd_tensor *pd_tensor_new(pd_dtype dt, int ndim, const int64_t *shape) {
  return pd_scope_track(pd_tensor_new_untracked(dt, ndim, shape));
}

pd_tensor *pd_tensor_new_view(const pd_tensor *src, int ndim, const int64_t *shape, const int64_t *strides,
                              int64_t offset) {
  if (src->is_meta) { /* a static Variable has no storage to view */
    pd_set_error(PD_ERR_UNIMPLEMENTED, "view: a static Variable (shape %s) has no data to view",
                 PD_SHAPE_STR(src));
    return NULL;
  }
  pd_tensor *t = pd_tensor_alloc_struct();
  if (!t) return NULL;
  t->dtype = src->dtype;
  t->place = src->place;
  if (set_geometry("view", t, ndim, shape, strides) != PD_OK) {
    tensor_free_struct(t);
    return NULL;
  }
  t->offset = offset;
  t->storage = src->storage;
  atomic_fetch_add(&t->storage->refcount, 1);
  return pd_scope_track(t);
}

static void keep_foreign(void *data, void *ctx) {
  (void)data;
  (void)ctx;
}

pd_tensor *pd_tensor_from_blob(void *data, pd_dtype dt, int ndim, const int64_t *shape,
                               void (*free_fn)(void *, void *), void *free_ctx) {
  pd_tensor *t = pd_tensor_alloc_struct();
  pd_storage *s = pool_get(&g_storage_pool, sizeof *s);
  if (!t || !s) {
    if (t) tensor_free_struct(t);
    if (s) pool_put(&g_storage_pool, s);
    pd_set_error(PD_ERR_MEMORY, "from_blob: out of memory");
    return NULL;
  }
  t->dtype = dt;
  if (set_geometry("from_blob", t, ndim, shape, NULL) != PD_OK) {
    tensor_free_struct(t);
    pool_put(&g_storage_pool, s);
    return NULL;
  }
  atomic_init(&s->refcount, 1);
  s->data = data;
  s->nbytes = (size_t)t->numel * pd_dtype_size(dt);
  s->version = 0;
  s->free_fn = free_fn ? free_fn : keep_foreign; /* NULL: the caller keeps the memory */
  s->free_ctx = free_ctx;
  t->storage = s;
  return pd_scope_track(t);
}

pd_tensor *pd_tensor_retain_released(pd_tensor *t) { /* a released tensor: undo, report */
  atomic_fetch_sub(&t->refcount, 1);
  pd_tensor_check_live(t, "tensor_retain");
  return NULL;
}

pd_tensor *(pd_tensor_retain)(pd_tensor *t) { return pd_tensor_retain(t); }

static void release_extras(pd_tensor *t) {
  if (t->grad) pd_tensor_release(t->grad);
  if (t->grad_fn && !t->grad_fn_weak && g_node_release) g_node_release(t->grad_fn);
  if (t->hooks) pd_hook_list_free(t->hooks);
  if (t->post_hooks) pd_hook_list_free(t->post_hooks);
  if (t->dist_attr && t->dist_attr_free) t->dist_attr_free(t->dist_attr);
  if (t->name) free(t->name);
  if (t->param_info) free(t->param_info);
}

/* The last reference is gone: everything the tensor owns goes. Out of
 * line, so that dropping a reference that is not the last costs no frame. */
static __attribute__((noinline)) void tensor_destroy(pd_tensor *t) {
  if (((uintptr_t)t->grad | (uintptr_t)t->grad_fn | (uintptr_t)t->hooks | (uintptr_t)t->post_hooks |
       (uintptr_t)t->dist_attr | (uintptr_t)t->param_info | (uintptr_t)t->name) != 0)
    release_extras(t);
  storage_release(t->storage);
  tensor_free_struct(t);
}

void pd_tensor_release(pd_tensor *t) {
  if (!t) return;
  int rc = atomic_load_explicit(&t->refcount, memory_order_acquire);
  if (rc == 1) {
    tensor_destroy(t);
  } else if (rc > 0) {
    if (atomic_fetch_sub_explicit(&t->refcount, 1, memory_order_acq_rel) == 1) tensor_destroy(t);
  } else { /* released before: leave the cached struct alone */
    pd_tensor_check_live(t, "tensor_release");
  }
}

/* ---- accessors --------------------------------------------------------- */
/* A NULL tensor given to an accessor: its sentinel result (-1, NULL, NAN,
 * ...) comes with an error, unless an earlier one already explains the NULL
 * (the op that returned it), which is kept as ops keep it. */
static void null_tensor(const char *fn) {
  if (pd_last_status() == PD_OK) pd_set_error(PD_ERR_INVALID, "%s: tensor is NULL", fn);
}
#define NULL_CHECK(fn, t, result) \
  do {                            \
    if (!(t)) {                   \
      null_tensor(fn);            \
      return result;              \
    }                             \
  } while (0)

int pd_tensor_ndim(const pd_tensor *t) {
  NULL_CHECK("tensor_ndim", t, -1);
  return t->ndim;
}
const int64_t *pd_tensor_shape(const pd_tensor *t) {
  NULL_CHECK("tensor_shape", t, NULL);
  return t->shape;
}
const int64_t *pd_tensor_strides(const pd_tensor *t) {
  NULL_CHECK("tensor_strides", t, NULL);
  return t->strides;
}
int64_t pd_tensor_numel(const pd_tensor *t) {
  NULL_CHECK("tensor_numel", t, -1);
  return t->numel;
}
pd_dtype pd_tensor_dtype(const pd_tensor *t) {
  NULL_CHECK("tensor_dtype", t, PD_NUM_DTYPES);
  return t->dtype;
}
pd_place pd_tensor_place(const pd_tensor *t) {
  NULL_CHECK("tensor_place", t, PD_CPU);
  return t->place;
}
bool pd_tensor_is_contiguous(const pd_tensor *t) {
  NULL_CHECK("tensor_is_contiguous", t, false);
  return t->is_contiguous;
}
bool pd_tensor_stop_gradient(const pd_tensor *t) {
  NULL_CHECK("tensor_stop_gradient", t, true);
  return t->stop_gradient;
}
bool pd_tensor_is_leaf(const pd_tensor *t) {
  NULL_CHECK("tensor_is_leaf", t, false);
  return !t->grad_fn;
}
pd_tensor *pd_tensor_grad(const pd_tensor *t) {
  NULL_CHECK("tensor_grad", t, NULL);
  return t->grad;
}
uint32_t pd_tensor_version(const pd_tensor *t) {
  NULL_CHECK("tensor_version", t, 0);
  return t->storage ? t->storage->version : 0; /* a meta tensor has no data to change */
}
const char *pd_tensor_name(const pd_tensor *t) {
  NULL_CHECK("tensor_name", t, NULL);
  return t->name;
}

void *pd_tensor_data(const pd_tensor *t) {
  NULL_CHECK("tensor_data", t, NULL);
  if (t->is_meta) {
    pd_tensor_meta_error("tensor_data", t);
    return NULL;
  }
  return (char *)t->storage->data + (size_t)t->offset * pd_dtype_size(t->dtype);
}

bool pd_tensor_shares_storage(const pd_tensor *a, const pd_tensor *b) {
  NULL_CHECK("tensor_shares_storage", a, false);
  NULL_CHECK("tensor_shares_storage", b, false);
  return a->storage && a->storage == b->storage;
}

void pd_tensor_set_stop_gradient(pd_tensor *t, bool stop) {
  NULL_CHECK("tensor_set_stop_gradient", t, );
  t->stop_gradient = stop;
}

pd_status pd_tensor_set_grad(pd_tensor *t, pd_tensor *g) {
  if (!t) return pd_set_error(PD_ERR_INVALID, "set_grad: tensor is NULL");
  /* a mismatch would surface only later, inside backward's accumulation or
   * the optimizer's update, far from its cause */
  if (g && (g->dtype != t->dtype || g->ndim != t->ndim || !pd_shape_eq(t->ndim, t->shape, g->shape))) {
    char a[160];
    return pd_set_error(g->dtype != t->dtype ? PD_ERR_DTYPE : PD_ERR_SHAPE,
                        "set_grad: the gradient is %s of shape %s but the tensor is %s of shape %s",
                        pd_dtype_name(g->dtype), PD_SHAPE_STR(g), pd_dtype_name(t->dtype),
                        pd_shape_str(t->ndim, t->shape, a, sizeof a));
  }
  if (g == t) return pd_set_error(PD_ERR_INVALID, "set_grad: a tensor cannot be its own gradient");
  pd_tensor_retain(g);
  pd_tensor_release(t->grad);
  t->grad = g;
  return PD_OK;
}

void pd_tensor_clear_grad(pd_tensor *t, bool set_to_zero) {
  NULL_CHECK("tensor_clear_grad", t, );
  if (!t->grad) return;
  if (set_to_zero && t->grad->is_contiguous && !t->grad->is_meta) {
    memset(pd_tensor_data(t->grad), 0, (size_t)t->grad->numel * pd_dtype_size(t->grad->dtype));
    t->grad->storage->version++;
    return;
  }
  pd_tensor_release(t->grad);
  t->grad = NULL;
}

void pd_tensor_set_name(pd_tensor *t, const char *name) {
  NULL_CHECK("tensor_set_name", t, );
  free(t->name);
  t->name = name ? strdup(name) : NULL;
}

/* Byte offset of logical row-major element i. */
static int64_t elem_offset(const pd_tensor *t, int64_t i) {
  int64_t off = t->offset;
  for (int d = t->ndim - 1; d >= 0; d--) {
    int64_t idx = i % t->shape[d];
    i /= t->shape[d];
    off += idx * t->strides[d];
  }
  return off;
}

double pd_tensor_item_at(const pd_tensor *t, int64_t i) {
  NULL_CHECK("item", t, NAN);
  if (t->is_meta) {
    pd_tensor_meta_error("item", t);
    return NAN;
  }
  if (i < 0 || i >= t->numel) {
    pd_set_error(PD_ERR_INDEX, "item: index %lld out of range for a tensor of %lld elements", (long long)i,
                 (long long)t->numel);
    return NAN;
  }
  size_t es = pd_dtype_size(t->dtype);
  return pd_load_as_f64((const char *)t->storage->data + (size_t)elem_offset(t, i) * es, t->dtype);
}

double pd_tensor_item(const pd_tensor *t) {
  NULL_CHECK("item", t, NAN);
  if (t->is_meta) {
    pd_tensor_meta_error("item", t);
    return NAN;
  }
  if (t->numel != 1) {
    pd_set_error(PD_ERR_SHAPE, "item: only a tensor of one element converts to a scalar, got shape %s",
                 PD_SHAPE_STR(t));
    return NAN;
  }
  return pd_tensor_item_at(t, 0);
}

int64_t pd_tensor_copy_to(const pd_tensor *t, void *buf, int64_t n, pd_dtype dt) {
  if (!t)
    return pd_last_status() != PD_OK ? pd_last_status()
                                     : pd_set_error(PD_ERR_INVALID, "copy_to: tensor is NULL");
  if (t->is_meta) return pd_tensor_meta_error("copy_to", t);
  if (!buf) return pd_set_error(PD_ERR_INVALID, "copy_to: buffer is NULL");
  if (pd_dtype_size(dt) == 0) return pd_set_error(PD_ERR_DTYPE, "copy_to: invalid dtype %d", (int)dt);
  if (n < t->numel)
    return pd_set_error(PD_ERR_SHAPE, "copy_to: buffer holds %lld elements, tensor has %lld", (long long)n,
                        (long long)t->numel);
  size_t es = pd_dtype_size(t->dtype), os = pd_dtype_size(dt);
  if (dt == t->dtype && t->is_contiguous) {
    memcpy(buf, pd_tensor_data(t), (size_t)t->numel * es);
    return t->numel;
  }
  const char *base = t->storage->data;
  for (int64_t i = 0; i < t->numel; i++) {
    const char *src = base + (size_t)elem_offset(t, i) * es;
    char *dst = (char *)buf + (size_t)i * os;
    if (dt == t->dtype)
      memcpy(dst, src, es);
    else if (dt == PD_INT64 && pd_dtype_is_integer(t->dtype) && t->dtype != PD_INT64)
      *(int64_t *)dst = (int64_t)pd_load_as_f64(src, t->dtype);
    else
      pd_store_from_f64(dst, dt, pd_load_as_f64(src, t->dtype));
  }
  return t->numel;
}
