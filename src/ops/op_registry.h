/* The op registry: one entry per op, generated from the X-macro list in
 * ops.def. Every op is run by the one dispatcher (dispatch.c). */
#ifndef PADDLEC_OP_REGISTRY_H
#define PADDLEC_OP_REGISTRY_H

#include "../core/core_internal.h"
#include "../core/tensor_impl.h"
#include "../kernels/cpu/elementwise.h"
#include "meta_util.h"
#include "paddlec/core.h"

/* Attributes of one op call: a plain, copyable value (so a grad node or a
 * Program op can keep it). Slot meaning is per op and named in its
 * registry row (attr_names), which is what serialization uses. */
#define PD_ATTR_INTS 6
#define PD_ATTR_FLOATS 4
#define PD_ATTR_LISTS 4
typedef struct pd_attrs {
  int64_t i[PD_ATTR_INTS];
  double f[PD_ATTR_FLOATS];
  int64_t v[PD_ATTR_LISTS][PD_MAX_DIMS];
  int nv[PD_ATTR_LISTS];
  pd_dtype dtype;
  char s[64];
} pd_attrs;

/* Shape and dtype of an output, computed before anything runs. */
typedef struct pd_meta {
  pd_dtype dtype;
  int ndim;
  int64_t shape[PD_MAX_DIMS];
} pd_meta;

/* Maximum outputs of one op (split/unbind/chunk up to this many). */
#define PD_MAX_OUTPUTS 64

typedef struct pd_backward_ctx {
  const pd_attrs *attrs;
  int n_in, n_out;
  pd_tensor *const *inputs;   /* saved inputs (NULL entries unless PD_OPF_SAVE_IN) */
  pd_tensor *const *outputs;  /* saved outputs (NULL entries unless PD_OPF_SAVE_OUT) */
  const pd_meta *in_meta;     /* shapes/dtypes of the inputs, always present */
  pd_tensor *const *grad_out; /* one grad per output, zeros where none flowed */
  const bool *needs_grad;     /* per input */
  pd_tensor **grad_in;        /* filled by backward: new references or NULL */
} pd_backward_ctx;

typedef struct pd_op_def pd_op_def;
/* def->name is the op's name, for error messages. */
typedef pd_status (*pd_infer_meta_fn)(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                                      pd_meta *out, int *n_out);
/* What a kernel is given: everything the dispatcher decided before it runs.
 * For compute ops the outputs arrive allocated from the metas; for view ops
 * (PD_OPF_VIEW) out[] is NULL and the kernel creates views of its inputs.
 * meta holds the n_out output metas infer_meta computed (read them rather
 * than inferring again); it is NULL only on pd_dispatch_inplace_trusted's
 * path, which skips infer_meta (output 0 is input 0 there). */
typedef struct pd_kernel_ctx {
  const pd_op_def *def; /* def->name names the op in errors */
  pd_tensor *const *in;
  int n_in;
  const pd_attrs *attrs;
  const pd_meta *meta;
  pd_tensor **out;
  int n_out;
} pd_kernel_ctx;
typedef pd_status (*pd_kernel_fn)(const pd_kernel_ctx *ctx);
/* Writes ctx->grad_in with other ops, so double backward comes for free. */
typedef pd_status (*pd_backward_fn)(const pd_backward_ctx *ctx);
typedef double (*pd_flops_fn)(pd_tensor *const *in, int n_in, const pd_attrs *a, const pd_meta *out,
                              int n_out);
/* SPMD rules (auto_parallel, DESIGN 7.3). A tensor's distribution over an
 * n-d process mesh in Paddle's internal form: dims_mapping[d] is the mesh
 * axis that shards tensor dim d (-1: not sharded), partial[m] the reduce
 * op (a pd_reduce_op value) pending on mesh axis m, -1 where none. */
#define PD_SPMD_MAX_MESH_DIMS 4
typedef struct pd_spmd_dist {
  int8_t dims_mapping[PD_MAX_DIMS];
  int8_t partial[PD_SPMD_MAX_MESH_DIMS];
} pd_spmd_dist;
/* What a rule reads (global metas and the inputs' current distributions;
 * a dense input arrives replicated) and writes: the distribution each input
 * must be resharded to (in_want, preset to `in`) and each output's (out,
 * preset to replicated), Partial included. */
struct pd_spmd_local;
/* A rule's local step (optional): runs the op on this rank's shards where
 * the plain op on them would be wrong (a vocab-sharded embedding reads
 * its shard's rows, a class-sharded cross entropy allreduces its row
 * statistics, dropout draws its shard's part of the global mask). It
 * writes the local outputs and records the op's grad node as the op
 * would (ap_internal.h defines the context). */
typedef pd_status (*pd_spmd_local_fn)(const struct pd_spmd_local *c, pd_tensor **out, int *n_out);
typedef struct pd_spmd_args {
  const pd_op_def *def;
  const pd_attrs *attrs;
  int n_in, n_out;
  int mesh_ndim;
  const int64_t *mesh_shape;
  const pd_meta *in_meta;  /* global */
  const pd_meta *out_meta; /* global, from infer_meta on the global metas */
  const pd_spmd_dist *in;
  pd_spmd_dist *in_want;
  pd_spmd_dist *out;
  pd_spmd_local_fn local; /* set by the rule where the op needs one; NULL: the op itself */
} pd_spmd_args;
typedef pd_status (*pd_spmd_fn)(pd_spmd_args *s);
/* An elementwise op's kernel as a 1-D function (the static graph's chain
 * fusion runs several over one block of memory): the function the kernel
 * runs for inputs of these dtypes, its params written to params[0..3];
 * NULL where the kernel has none for them. */
typedef pd_ew_fn (*pd_ew_fn_of)(const pd_attrs *a, const pd_dtype *in_dtypes, double *params);
/* For an op that is not elementwise but whose kernel reads each element of
 * one input before it writes the same element of output 0, and nothing of
 * that input afterwards: that input's index for these attributes, or -1. The
 * static graph's arena then lets output 0 take the input's bytes when the
 * input dies at the op (src/static/pass_inplace.c; elementwise ops need none). */
typedef int (*pd_writes_over_fn)(const pd_attrs *a);

enum {
  PD_OPF_DIFF = 1u << 0,         /* has a backward */
  PD_OPF_VIEW = 1u << 1,         /* outputs are views of input 0 */
  PD_OPF_INPLACE = 1u << 2,      /* output 0 is input 0, modified */
  PD_OPF_SAVE_IN = 1u << 3,      /* backward reads the inputs */
  PD_OPF_SAVE_OUT = 1u << 4,     /* backward reads the outputs */
  PD_OPF_PROMOTE = 1u << 5,      /* tensor inputs are promoted to one dtype */
  PD_OPF_RANDOM = 1u << 6,       /* draws from the generator */
  PD_OPF_HALF_VIA_F32 = 1u << 7, /* float16/bfloat16 inputs computed in float32 */
  PD_OPF_FLOAT_ONLY = 1u << 8,   /* integer/bool inputs are cast to float32 first */
  PD_OPF_GEOMETRY = 1u << 9,     /* with INPLACE: changes x's shape only (reshape_), writes no data */
  /* the backward computes on values (indices, masks, ties, signs), which a
   * static Variable has not: the lowering keeps its grad op rather than
   * tracing the rule (src/static/lower.c) */
  PD_OPF_BACKWARD_READS_VALUES = 1u << 10,
  /* memory-bound, not elementwise (elementwise ops are so by their ew_fn):
   * a static plan may run it again where a late reader needs its output
   * rather than keep that output (src/static/pass_recompute.c) */
  PD_OPF_RECOMPUTE = 1u << 11,
};

struct pd_op_def {
  const char *name;
  int n_in;  /* -1: variadic */
  int n_out; /* -1: decided by infer_meta */
  unsigned flags;
  unsigned nondiff_out;   /* bit k: output k never carries a gradient (indices) */
  const char *attr_names; /* "i0:axis,i1:keepdim,f0:alpha,v0:shape,s:equation,dtype" */
  pd_infer_meta_fn infer_meta;
  pd_kernel_fn kernel[PD_NUM_PLACES];
  pd_backward_fn backward;
  pd_spmd_fn spmd;
  pd_flops_fn flops;
  pd_ew_fn_of ew_fn;             /* elementwise ops only; NULL otherwise */
  pd_writes_over_fn writes_over; /* NULL: none (see the type) */
};

/* The op ids: PD_OP_add, PD_OP_matmul, ... */
typedef enum pd_op_id {
#define PD_OP(name) PD_OP_##name,
#include "ops.def"
#undef PD_OP
  PD_NUM_OPS
} pd_op_id;

/* Each op file defines `const pd_op_def pd_opdef_<name>`. */
#define PD_OP(name) extern const pd_op_def pd_opdef_##name;
#include "ops.def"
#undef PD_OP

/* Defines op nm's row, `const pd_op_def pd_opdef_<nm>` named "nm" (the id
 * and the name cannot disagree); the other fields follow as designated
 * initializers:
 *   PD_OPDEF(scale, .n_in = 1, .n_out = 1, .flags = PD_OPF_DIFF, .attr_names = "f0:scale",
 *            .infer_meta = pd_meta_unary, .kernel = {[PD_PLACE_CPU] = scale_kernel},
 *            .backward = scale_backward); */
#define PD_OPDEF(nm, ...) const pd_op_def pd_opdef_##nm = {.name = #nm, __VA_ARGS__}

extern const pd_op_def *const pd_op_table[PD_NUM_OPS];
/* Lookup by name; -1 when unknown. */
int pd_op_find(const char *name);

/* ---- the dispatcher ---------------------------------------------------- */
/* Runs op `id` on inputs with attrs; writes up to PD_MAX_OUTPUTS outputs
 * (new references) and their count. Returns a status. */
pd_status pd_dispatch(pd_op_id id, pd_tensor *const *in, int n_in, const pd_attrs *a, pd_tensor **out,
                      int *n_out);
/* Single-output convenience: returns the output or NULL. */
pd_tensor *pd_dispatch1(pd_op_id id, pd_tensor *const *in, int n_in, const pd_attrs *a);

/* Extension points, installed by the layers above (the dispatcher never
 * names them):
 *  - autograd records a grad node for a differentiable op (process-wide);
 *  - the static-graph tracer records an op into the Program being built
 *    (returning 1 when it produced the outputs itself, i.e. recording only,
 *    or when it failed, with out[0] NULL and the error set; phase 0 is
 *    before the kernel, phase 1 after it, when it ran);
 *  - auto_parallel handles ops whose inputs are DTensors (returning 1 when
 *    it produced the outputs, with *st its status). It runs first, before
 *    infer_meta: a DTensor's shape is its local shard's, so the handler
 *    checks the op on the global metas, reshards and runs it on the shards.
 * The tracer and the DTensor handler are per thread, each with a context
 * pointer passed back on every call: installing one affects only the
 * calling thread, and a thread starts with neither. Pass fn NULL to remove. */
typedef pd_status (*pd_autograd_record_fn)(pd_op_id id, pd_tensor *const *in, int n_in, const pd_attrs *a,
                                           pd_tensor **out, int n_out);
typedef int (*pd_tracer_fn)(void *ctx, pd_op_id id, pd_tensor *const *in, int n_in, const pd_attrs *a,
                            const pd_meta *meta, pd_tensor **out, int n_out, int phase);
typedef int (*pd_dist_fn)(void *ctx, pd_op_id id, pd_tensor *const *in, int n_in, const pd_attrs *a,
                          pd_tensor **out, int *n_out, pd_status *st);
void pd_dispatch_set_autograd(pd_autograd_record_fn fn);
pd_autograd_record_fn pd_dispatch_get_autograd(void);
void pd_dispatch_set_tracer(pd_tracer_fn fn, void *ctx);
/* This thread's tracer (NULL: none) and, when ctx is given, its context. */
pd_tracer_fn pd_dispatch_get_tracer(void **ctx);
void pd_dispatch_set_dist(pd_dist_fn fn, void *ctx);
pd_dist_fn pd_dispatch_get_dist(void **ctx);
/* The DTensor handler, while it runs an op on the local shards, turns itself
 * off for the thread (returning what resume restores): the tensors it passes
 * on still carry their dist attrs, and the dispatcher must not take them for
 * DTensors that reached a thread without a handler (below). */
pd_dist_fn pd_dispatch_suspend_dist(void **ctx);
void pd_dispatch_resume_dist(pd_dist_fn fn, void *ctx);
/* Set once any DTensor has been made (auto_parallel): from then on an op
 * whose input is a DTensor on a thread without the handler fails, naming the
 * op, instead of computing on the local shard as if it were the whole tensor
 * (the handler is per thread so that no thread but the DTensor's own issues
 * its collectives, which the other ranks pair in order). */
extern atomic_bool pd_g_dtensors_made;
/* auto_parallel's part of writing back an inplace op computed out of place
 * (pd_mu_inplace_on_copy): r, the op's result on a copy of x, placed as x
 * (its placements), so that r's local data is x's shard. r is taken;
 * returns what to write into x, or NULL with the error set (named for op).
 * Installed on a thread with the DTensor handler; none: r as it is. */
typedef pd_tensor *(*pd_dist_place_as_fn)(const char *op, pd_tensor *x, pd_tensor *r);
void pd_dispatch_set_dist_place_as(pd_dist_place_as_fn fn);
pd_dist_place_as_fn pd_dispatch_get_dist_place_as(void);
/* Runs op `id` writing into outputs its caller allocated (the buffers a
 * compiled Program planned in its arena): infer_meta, a check that each
 * out[k] is contiguous with the computed dtype and shape (an error names
 * both), then the kernel. No dtype conversion (a recorded Program holds its
 * casts as ops), no grad node, no tracer or DTensor step. Only for ops that
 * compute fresh outputs; views and inplace ops go through pd_dispatch. */
pd_status pd_dispatch_into(pd_op_id id, pd_tensor *const *in, int n_in, const pd_attrs *a,
                           pd_tensor *const *out, int n_out);
/* Runs inplace op `id` on inputs its caller built and checked itself (the
 * optimizer's update ops: accumulators it created, a gradient it compared
 * with the parameter): the kernel and the version bump without infer_meta or
 * output bookkeeping, which cost more than the update of a small parameter.
 * With grad recording on, a tracer or a DTensor handler installed, or a
 * non-CPU place, it is pd_dispatch. */
pd_status pd_dispatch_inplace_trusted(pd_op_id id, pd_tensor *const *in, int n_in, const pd_attrs *a);
/* The writes the library makes into tensors it owns (an initializer's
 * values, a loaded state dict, an optimizer's rate slot, an averaged
 * gradient) are the inplace registry ops copy_ (src converted to dst's dtype
 * and broadcast to its shape), fill_ and scale_ (dst * scale), so a tracer
 * records them and nothing changes a tensor behind the dispatcher. fill_
 * takes the trusted path (pd_dispatch_inplace_trusted): the optimizer fills
 * its rate slot on every step. */
pd_status pd_write_copy(pd_tensor *dst, pd_tensor *src);
pd_status pd_write_fill(pd_tensor *dst, double value);
pd_status pd_write_scale(pd_tensor *dst, double scale);
/* Whether gradients are being recorded (paddle.no_grad turns it off). */
bool pd_grad_mode_enabled(void);
/* Sets grad mode, returning the previous value. */
bool pd_grad_mode_set(bool on);

/* ---- helpers for op implementations ------------------------------------- */
pd_status pd_broadcast_shapes(const char *op, int na, const int64_t *a, int nb, const int64_t *b, int *nout,
                              int64_t *out);
/* Normalises a possibly negative axis; error names op and values. */
pd_status pd_norm_axis(const char *op, int64_t axis, int ndim, int *out);
void pd_meta_of(const pd_tensor *t, pd_meta *m);
/* A shape given as an argument or attribute (creation ops): rank in
 * [0, PD_MAX_DIMS], shape non-NULL for rank > 0, dims >= 0; the error
 * names op, the dim and its value. Inline: full runs it on every call. */
static inline pd_status pd_check_shape_arg(const char *op, int ndim, const int64_t *shape) {
  if (ndim < 0 || ndim > PD_MAX_DIMS)
    return pd_set_error(PD_ERR_INVALID, "%s: rank %d is out of range [0, %d]", op, ndim, PD_MAX_DIMS);
  if (ndim > 0 && !shape) return pd_set_error(PD_ERR_INVALID, "%s: shape is NULL for rank %d", op, ndim);
  for (int d = 0; d < ndim; d++)
    if (shape[d] < 0)
      return pd_set_error(PD_ERR_SHAPE, "%s: shape[%d] is %lld; dims must be >= 0", op, d,
                          (long long)shape[d]);
  return PD_OK;
}
/* An inplace op writes each element of x once. A view with a zero stride
 * (expand, broadcast_to) maps several of its elements to one memory cell:
 * writing it would update that cell several times and change the tensor it
 * views. The dispatcher refuses such an x for every inplace row that writes
 * data; the error names op, shape and strides. */
pd_status pd_check_inplace_target(const char *op, const pd_tensor *x);
/* x itself (retained) when contiguous, else a contiguous copy: input for a
 * kernel that wants dense data. Records no gradient. */
pd_tensor *pd_kernel_contiguous(const pd_tensor *x);
/* pd_empty made eagerly even while a Program is being built on this thread:
 * for code that writes the values itself (to_tensor, file loaders), whose
 * result is then a constant, not an op a Program could record. */
pd_tensor *pd_empty_eager(int ndim, const int64_t *shape, pd_dtype dt);
/* Sum a gradient down to `shape` (undoing broadcasting). New reference. */
pd_tensor *pd_grad_reduce_to(pd_tensor *g, int ndim, const int64_t *shape);

#endif
