/* Internal layout of tensors and storages, shared by the layers of src/. */
#ifndef PADDLEC_TENSOR_IMPL_H
#define PADDLEC_TENSOR_IMPL_H

#include <stdatomic.h>

#include "alloc.h"
#include "element.h"
#include "paddlec/core.h"
#include "shape.h"

typedef struct pd_node pd_node;
typedef struct pd_hook pd_hook;

/* Memory shared by a tensor and its views. The version counter lives here
 * so that an inplace op on any view invalidates tensors saved from others. */
#define PD_INLINE_BYTES 64

typedef struct pd_storage {
  atomic_int refcount;
  void *data;
  size_t nbytes;
  uint32_t version;
  /* Who frees `data`: NULL = the caching allocator; otherwise called with
   * free_ctx (memory owned elsewhere, e.g. a shared segment). */
  void (*free_fn)(void *data, void *free_ctx);
  void *free_ctx;
  /* payloads up to PD_INLINE_BYTES live here: a tiny tensor costs no
   * allocation beyond its pooled struct and storage */
  _Alignas(64) char inline_data[PD_INLINE_BYTES];
} pd_storage;

struct pd_tensor {
  atomic_int refcount;
  pd_dtype dtype;
  int ndim;
  pd_place place;
  int64_t numel;
  int64_t offset; /* in elements */
  pd_storage *storage;

  /* autograd */
  bool stop_gradient;
  bool is_contiguous;
  bool grad_fn_weak; /* saved output alias: grad_fn is not owned */
  bool is_meta;      /* a static-graph Variable: shape and dtype, no storage */
  bool is_buffer;    /* nn: a layer's persistable buffer (a persistable Variable in a Program) */
  int out_index;     /* which output of grad_fn this tensor is */
  int bw_slot;       /* backward engine scratch: this leaf's slot in the run */
  uint64_t bw_stamp; /* and which run saw it */

  /* Owned extras, all NULL for most tensors (released together). */
  pd_tensor *grad;
  pd_node *grad_fn;    /* owning reference, NULL for leaves */
  pd_hook *hooks;      /* grad hooks (leaves; non-leaves keep them on the node) */
  pd_hook *post_hooks; /* post-accumulate hooks (leaves) */
  /* extension points */
  void *dist_attr; /* auto_parallel: starts with a pd_dist_geometry (then mesh, placements) */
  void (*dist_attr_free)(void *);
  void *param_info; /* nn: a pd_param_info (plain memory, freed with the tensor) */
  char *name;

  /* geometry last: a new struct initialises everything before it at once */
  int64_t shape[PD_MAX_DIMS];
  int64_t strides[PD_MAX_DIMS];
};

/* A DTensor's shape is its local shard's; its dist_attr starts with the
 * global shape, which code below auto_parallel reads through this (the
 * gradient of a broadcast is reduced on global shapes, the same on every
 * rank, even where a shard happens to have size 1). */
typedef struct pd_dist_geometry {
  int ndim;
  int64_t shape[PD_MAX_DIMS];
} pd_dist_geometry;
static inline const int64_t *pd_global_shape(const pd_tensor *t, int *ndim) {
  const pd_dist_geometry *g = (const pd_dist_geometry *)t->dist_attr;
  *ndim = g ? g->ndim : t->ndim;
  return g ? g->shape : t->shape;
}

/* Short copy loops on the hot paths stay loops: the compiler would make
 * them library calls, whose fixed cost exceeds the copy at these sizes. */
#if defined(__GNUC__) && !defined(__clang__)
#define PD_NO_LIBCALLS __attribute__((optimize("no-tree-loop-distribute-patterns")))
#else
#define PD_NO_LIBCALLS
#endif

/* Inline versions of hot accessors for the layers of src/. */
static inline bool pd_shape_eq(int ndim, const int64_t *a, const int64_t *b) {
  for (int d = 0; d < ndim; d++)
    if (a[d] != b[d]) return false;
  return true;
}
static inline size_t pd_dtype_size_fast(pd_dtype dt) {
  static const unsigned char k[PD_NUM_DTYPES] = {1, 1, 1, 2, 4, 8, 2, 2, 4, 8};
  return k[dt];
}
static inline void *pd_data_ptr(const pd_tensor *t) {
  return (char *)t->storage->data + (size_t)t->offset * pd_dtype_size_fast(t->dtype);
}

/* Pooled blocks of PD_POOL_BLOCK bytes (64-byte aligned, uninitialised) for
 * small short-lived structs such as grad nodes; like tensor structs they
 * come from a per-thread free list and cost no malloc once warm. */
#define PD_POOL_BLOCK 2048
void *pd_block_get(void);
void pd_block_put(void *p);

/* The reference count of a released tensor struct while it waits in the
 * struct cache: a second release (or a retain, or an op given the tensor)
 * finds it and reports the use after free instead of corrupting the cache.
 * Where the struct has been reused by a new tensor, or given back to malloc
 * (the sanitizer build, which reports the use itself), nothing can tell. */
#define PD_REFCOUNT_FREED (-0x0DEAD)
/* Whether t is live; otherwise sets an error naming op and returns false. */
bool pd_tensor_check_live(const pd_tensor *t, const char *op);

/* A static-graph Variable (what paddle.static.data returns): dtype and
 * shape only, no storage. Dims may be -1 (unknown until the Program runs,
 * e.g. the batch); numel is -1 when any is. Accessors of geometry, name and
 * flags work on it; whatever reads data refuses it with an error, and the
 * dispatcher never hands one to a kernel (with a tracer installed the tracer
 * records the op, without one the op fails). NULL with an error when dt,
 * ndim or a dim (< -1) is invalid. Registered with the current scope. */
pd_tensor *pd_tensor_new_meta(pd_dtype dt, int ndim, const int64_t *shape);
bool pd_tensor_is_meta(const pd_tensor *t);
/* The error for reading the data of meta tensor t in `fn`: names fn, the
 * Variable and its shape. Returns PD_ERR_STATE. */
pd_status pd_tensor_meta_error(const char *fn, const pd_tensor *t);

/* Creation of tensor structs (internal). */
pd_tensor *pd_tensor_alloc_struct(void);
/* A new contiguous tensor with fresh storage (uninitialised data). The
 * tensor is registered with the current scope when `scoped`. */
pd_tensor *pd_tensor_new(pd_dtype dt, int ndim, const int64_t *shape);
/* The same, never registered with a scope (the dispatcher's outputs). */
pd_tensor *pd_tensor_new_untracked(pd_dtype dt, int ndim, const int64_t *shape);
/* Another reference to a storage, and its release (the storage is freed
 * with its last reference), for code that holds a storage beyond the life
 * of the tensors over it: the GEMM helpers of gemm_backup.c. */
void pd_storage_retain_ref(void *storage);
void pd_storage_release_ref(void *storage);

/* A view over t's storage with the given geometry (retains the storage). */
pd_tensor *pd_tensor_new_view(const pd_tensor *t, int ndim, const int64_t *shape, const int64_t *strides,
                              int64_t offset);
/* Wraps foreign memory; free_fn(data, ctx) runs when the storage dies. */
pd_tensor *pd_tensor_from_blob(void *data, pd_dtype dt, int ndim, const int64_t *shape,
                               void (*free_fn)(void *, void *), void *free_ctx);
/* Registers a freshly created tensor with the innermost scope (if any):
 * only at depth 0 (not inside the library) and while a scope is open. */
pd_tensor *pd_scope_track(pd_tensor *t);
pd_tensor *pd_scope_track_slow(pd_tensor *t);
extern _Thread_local int pd_g_nscopes, pd_g_internal_depth;
static inline pd_tensor *pd_scope_track_inline(pd_tensor *t) {
  return t && pd_g_nscopes > 0 && pd_g_internal_depth == 0 ? pd_scope_track_slow(t) : t;
}
#define pd_scope_track(t) pd_scope_track_inline(t)

/* pd_tensor_retain inline for the library's own calls (a few per op): a
 * released tensor (refcount <= 0) goes to the out-of-line report. */
pd_tensor *pd_tensor_retain_released(pd_tensor *t);
static inline pd_tensor *pd_tensor_retain_inline(pd_tensor *t) {
  if (t && __builtin_expect(atomic_fetch_add_explicit(&t->refcount, 1, memory_order_relaxed) <= 0, 0))
    return pd_tensor_retain_released(t);
  return t;
}
#define pd_tensor_retain(t) pd_tensor_retain_inline(t)

#define PD_SHAPE_STR(t) pd_shape_str((t)->ndim, (t)->shape, (char[160]){0}, 160)

#endif
