/* Reductions, scans and sorting (paddle.sum, mean, max, ..., topk, sort).
 *
 * Axis lists: (axis, naxis); axis == NULL or naxis == 0 reduces every dim.
 * Negative axes count from the end; an axis out of range or given twice is
 * an error naming the op, the axis and the rank. keepdim keeps reduced dims
 * as size 1. Ops taking one optional axis accept PD_AXIS_NONE (Paddle's
 * axis=None: the tensor is flattened first). */
#ifndef PADDLEC_REDUCTION_H
#define PADDLEC_REDUCTION_H

#include "paddlec/core.h"
#include "paddlec/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* axis=None for argmax, argmin and cumsum. */
#define PD_AXIS_NONE INT64_MIN

/* Sum; bool and integers narrower than int64 sum into int64. */
PD_API pd_tensor *pd_sum(pd_tensor *x, const int64_t *axis, int naxis, bool keepdim);
/* Mean in x's dtype (integer means are truncated, as Paddle); an empty
 * reduction gives NaN (floats) or 0 (integers). */
PD_API pd_tensor *pd_mean(pd_tensor *x, const int64_t *axis, int naxis, bool keepdim);
/* Maximum / minimum, NaN if the group holds a NaN. The gradient is split
 * evenly among the elements equal to the result. */
PD_API pd_tensor *pd_max(pd_tensor *x, const int64_t *axis, int naxis, bool keepdim);
PD_API pd_tensor *pd_min(pd_tensor *x, const int64_t *axis, int naxis, bool keepdim);
/* Product in x's dtype (integers wrap); its gradient is exact with zeros. */
PD_API pd_tensor *pd_prod(pd_tensor *x, const int64_t *axis, int naxis, bool keepdim);
/* Logical all / any of x != 0 (any dtype); bool output. */
PD_API pd_tensor *pd_all(pd_tensor *x, const int64_t *axis, int naxis, bool keepdim);
PD_API pd_tensor *pd_any(pd_tensor *x, const int64_t *axis, int naxis, bool keepdim);
/* Index of the first maximum / minimum (the first NaN if any) along axis,
 * or in the flattened tensor for PD_AXIS_NONE (then keepdim gives all-1
 * dims). dtype: PD_INT64 (Paddle's default) or PD_INT32. */
PD_API pd_tensor *pd_argmax(pd_tensor *x, int64_t axis, bool keepdim, pd_dtype dtype);
PD_API pd_tensor *pd_argmin(pd_tensor *x, int64_t axis, bool keepdim, pd_dtype dtype);
/* log(sum(exp(x))), computed stably (shifted by the group max). Integer
 * inputs give float32. */
PD_API pd_tensor *pd_logsumexp(pd_tensor *x, const int64_t *axis, int naxis, bool keepdim);
/* Variance / standard deviation. unbiased (Paddle's default true) divides
 * by N - 1 (by 1 when N == 1), else by N. Integer inputs give float32. */
PD_API pd_tensor *pd_var(pd_tensor *x, const int64_t *axis, int naxis, bool unbiased, bool keepdim);
PD_API pd_tensor *pd_std(pd_tensor *x, const int64_t *axis, int naxis, bool unbiased, bool keepdim);
/* paddle.linalg.norm: the p-norm of the elements over the axes taken as
 * one vector: p = 2 (also Paddle's 'fro'), 1, INFINITY (max |x|),
 * -INFINITY (min |x|), 0 (count of non-zeros) or any other p
 * ((sum |x|^p)^(1/p)). Integer inputs give float32. */
PD_API pd_tensor *pd_norm(pd_tensor *x, double p, const int64_t *axis, int naxis, bool keepdim);
/* Cumulative sum along axis (PD_AXIS_NONE: over the flattened tensor, a
 * 1-D result). dtype casts x first; PD_NUM_DTYPES keeps x's dtype. */
PD_API pd_tensor *pd_cumsum(pd_tensor *x, int64_t axis, pd_dtype dtype);
/* The k largest (largest) or smallest elements along axis (Paddle's default
 * -1) and their int64 indices, best first; equal values come in index
 * order and NaN counts as the largest. values / indices may be NULL when
 * not wanted. Returns a status; on error both are set to NULL. */
PD_API pd_status pd_topk(pd_tensor *x, int64_t k, int64_t axis, bool largest, bool sorted, pd_tensor **values,
                         pd_tensor **indices);
/* Sorted values / the int64 indices that sort x along axis (Paddle's
 * default -1), ascending unless descending. The sort is always stable (so
 * `stable` is accepted for compatibility); NaN sorts last ascending. */
PD_API pd_tensor *pd_sort(pd_tensor *x, int64_t axis, bool descending, bool stable);
PD_API pd_tensor *pd_argsort(pd_tensor *x, int64_t axis, bool descending, bool stable);

#ifdef __cplusplus
}
#endif
#endif
