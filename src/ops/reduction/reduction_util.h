/* Glue shared by the reduction family: axis lists, running the reduction
 * driver on tensors, reshaping gradients back, and constant (graph-free)
 * helper tensors used inside backward functions. */
#ifndef PADDLEC_OPS_REDUCE_HELPERS_H
#define PADDLEC_OPS_REDUCE_HELPERS_H

#include "../../kernels/cpu/reduce.h"
#include "../op_registry.h"

/* Attr slots of the axis-list reductions: v0 = axes (none: all dims),
 * i0 = keepdim. Normalises the axes into mask (errors name the op, axis
 * and rank, or a repeated axis) and fills the output meta (x's dtype). */
pd_status pd_reduce_meta(const pd_op_def *def, const pd_tensor *x, const pd_attrs *a, pd_meta *out,
                         bool *mask);
/* pd_reduce_meta as an op's infer_meta: one output. */
pd_status pd_reduce_infer_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                               pd_meta *out, int *n_out);
/* The mask of already validated attrs (kernels, backward), for a tensor of
 * rank nd. */
void pd_reduce_mask(int nd, const pd_attrs *a, bool *mask);
/* A one-pass reduction kernel: out[0] = s over in[0] across the attrs'
 * axes (validated by infer_meta). */
pd_status pd_reduce_kernel_run(const pd_kernel_ctx *ctx, const pd_reduce_spec *s);
/* Number of elements each output reduces. */
int64_t pd_reduce_count(int nd, const int64_t *shape, const bool *mask);
/* Runs the driver: out (contiguous, allocated) = reduce(x) over mask. */
pd_status pd_reduce_exec(const pd_op_def *def, const pd_tensor *x, const bool *mask, const pd_reduce_spec *s,
                         pd_tensor *out);
/* Error naming the op when an empty dimension is reduced by an op without
 * an identity (max, min, argmax...). */
pd_status pd_reduce_check_nonempty(const pd_op_def *def, const pd_tensor *x, const bool *mask);

/* The shape of x with the reduced dims set to 1. */
void pd_reduce_keep_shape(const pd_meta *xm, const bool *mask, int64_t *kshape);
/* t (a reduced result, keepdim or not) reshaped to the keepdim shape so it
 * broadcasts against x. Differentiable. New reference. */
pd_tensor *pd_reduce_unsqueeze(pd_tensor *t, const pd_meta *xm, const bool *mask);
/* Same, then expanded to x's shape. */
pd_tensor *pd_reduce_expand_to(pd_tensor *t, const pd_meta *xm, const bool *mask);

/* FLOPs of a reduction: one per input element. */
double pd_flops_reduce(pd_tensor *const *in, int n_in, const pd_attrs *a, const pd_meta *out, int n_out);

/* Public wrappers of the axis-list reductions. */
pd_tensor *pd_reduce_call(pd_op_id id, const char *name, pd_tensor *x, const int64_t *axis, int naxis,
                          bool keepdim, const pd_attrs *extra);

/* Runs a two-output op on x, handing the caller the outputs it asks for
 * (o0/o1 may be NULL; set to NULL on error). */
pd_status pd_dispatch_pick2(pd_op_id id, pd_tensor *x, const pd_attrs *a, pd_tensor **o0, pd_tensor **o1);

/* ---- constants for backward (not recorded in the graph) ------------------ */
/* Ties of max/min: (x == out) / count of ties per output, x's shape/dtype. */
pd_tensor *pd_reduce_tie_weights(const char *op, const pd_tensor *x, const pd_tensor *out, const bool *mask);
/* sign(x) in x's dtype. */
pd_tensor *pd_reduce_sign(const pd_tensor *x);
/* sign(x) where |x| == norm (broadcast), else 0 (the inf-norm gradient). */
pd_tensor *pd_reduce_absmax_sign(const pd_tensor *x, const pd_tensor *norm, const bool *mask);

/* ---- internal ops of the family ------------------------------------------
 * exp(x - c), c broadcast to x. */
pd_tensor *pd_exp_shifted(pd_tensor *x, pd_tensor *c);
/* |x|^e. */
pd_tensor *pd_abs_pow(pd_tensor *x, double e);
/* For every element, the product of the other elements of its reduction
 * group (axes as in prod). */
pd_tensor *pd_prod_exclusive(pd_tensor *x, const pd_attrs *axes);
/* out = x gathered along axis at idx (idx has x's rank, int64). */
pd_tensor *pd_take_along(pd_tensor *x, pd_tensor *idx, int64_t axis);
/* out = zeros(shape) with src added at idx along axis. */
pd_tensor *pd_scatter_along(pd_tensor *src, pd_tensor *idx, int64_t axis, int ndim, const int64_t *shape);

/* x viewed as [outer, len, inner] around axis (normalised). */
void pd_axis_split(int ndim, const int64_t *shape, int axis, int64_t *outer, int64_t *len, int64_t *inner);

/* ---- ops giving values and their int64 indices along an axis (argsort,
 * topk) --------------------------------------------------------------------
 * The metas: both x's shape (the caller may then change the axis's size),
 * values in x's dtype, indices int64. */
void pd_values_indices_meta(const pd_tensor *x, pd_meta *out, int *n_out);
/* Runs the layer-2 kernel on contiguous x viewed as [outer, len, inner]
 * around `axis` (validated by infer_meta), writing out[0] and out[1]; it
 * returns 0, 2 when out of memory, else an unsupported dtype. */
typedef int (*pd_values_indices_run_fn)(const pd_kernel_ctx *ctx, const void *x, pd_dtype dt, int64_t outer,
                                        int64_t len, int64_t inner);
pd_status pd_values_indices_kernel(const pd_kernel_ctx *ctx, int64_t axis, pd_values_indices_run_fn run);
/* dx: dy scattered back through the indices (output 1) along axis. */
pd_status pd_values_indices_backward(const pd_backward_ctx *c, int64_t axis);

#endif
