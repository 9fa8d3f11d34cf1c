/* Helpers shared by the loss ops (src/ops/op_loss_*.c). */
#ifndef PADDLEC_OPS_LOSS_UTIL_H
#define PADDLEC_OPS_LOSS_UTIL_H

#include "../../kernels/cpu/loss.h"
#include "../op_registry.h"
#include "paddlec/loss.h"

/* Checks a reduction value (batchmean only where allowed); the error names
 * the op and the value. */
pd_status pd_loss_check_reduction(const char *op, int64_t r, bool batchmean_ok);

/* Sum of every element of t (float dtypes), accumulated in double. */
double pd_loss_sum_all(const pd_tensor *t);

/* First element of t (row-major) that is not in [lo, hi] (NaN included) /
 * that is in (lo, hi]; *idx = -1 when none. */
pd_status pd_loss_find_outside(pd_tensor *t, double lo, double hi, int64_t *idx, double *v);
pd_status pd_loss_find_inside(pd_tensor *t, double lo, double hi, int64_t *idx, double *v);

/* Whether any element of t is non-zero. */
bool pd_loss_any_nonzero(pd_tensor *t);

/* Reduction of a per-element loss with public ops: sum, mean (sum / numel),
 * batchmean (sum / shape[0]) or a new reference for none. Depth > 0. */
pd_tensor *pd_loss_reduce(pd_tensor *loss, pd_loss_reduction r);

/* Hard labels as a contiguous int64 array of t's numel: integer dtypes, or
 * float dtypes holding whole numbers. Each label must be ignore_index or lie
 * in [0, n); the error names the op, the value, its index and the range.
 * *holder receives a tensor to release afterwards (may be NULL); *out points
 * into it or into label's own data. */
pd_status pd_loss_labels_i64(const char *op, pd_tensor *label, int64_t n, int64_t ignore_index,
                             const int64_t **out, pd_tensor **holder);

/* The class axis of x (named `what` in errors: "input", "logits") and a
 * label of x's rank or one less: x must have a dimension, axis must be in
 * range (normalised into *ax) and the label's rank must fit. */
pd_status pd_loss_check_class_axis(const char *op, const char *what, const pd_tensor *x,
                                   const pd_tensor *label, int64_t axis, int *ax);

/* The logits of a softmax cross entropy: x has a dimension and a float32
 * or float64 dtype, axis is in range (normalised into *ax). */
pd_status pd_loss_check_logits(const pd_op_def *def, const pd_tensor *x, int64_t axis, int *ax);

/* [outer, n, inner] around axis of a shape. */
pd_ce_geom pd_loss_class_geom(int ndim, const int64_t *shape, int axis);

/* FLOPs: a few per element of the first input. */
double pd_loss_flops(pd_tensor *const *in, int n_in, const pd_attrs *a, const pd_meta *out, int n_out);

#endif
