/* Checked shape arithmetic. Every size computed from user-controlled values
 * (target shapes, repeat counts, factors, paddings, offsets) goes through
 * these, so an overflow is an error naming the op and the values instead of
 * a wrapped size. */
#ifndef PADDLEC_SHAPE_CHECK_H
#define PADDLEC_SHAPE_CHECK_H

#include <stdbool.h>
#include <stdint.h>

#include "paddlec/core.h"

/* *r = a * b (a + b, a - b); true when the exact result does not fit int64. */
static inline bool pd_mul_overflow(int64_t a, int64_t b, int64_t *r) {
  return __builtin_mul_overflow(a, b, r);
}
static inline bool pd_add_overflow(int64_t a, int64_t b, int64_t *r) {
  return __builtin_add_overflow(a, b, r);
}
static inline bool pd_sub_overflow(int64_t a, int64_t b, int64_t *r) {
  return __builtin_sub_overflow(a, b, r);
}

/* The element count of shape into *numel (may be NULL); when it overflows,
 * PD_ERR_SHAPE with "op: shape [..] has more than INT64_MAX elements". */
pd_status pd_shape_numel_checked(const char *op, int ndim, const int64_t *shape, int64_t *numel);
/* Sets and returns that error, for callers that multiply as they go. */
pd_status pd_shape_overflow_error(const char *op, int ndim, const int64_t *shape);
/* Whether a tensor of this shape and dtype can exist: no negative dim, and
 * its element count, its contiguous strides (empty dims count as 1) and its
 * byte size fit int64. With unknown_ok, dims of -1 (unknown while a Program
 * is built) are allowed and count as 1. The dispatcher runs it on every
 * output of every op's infer_meta, tensor creation and views on every new
 * shape. */
pd_status pd_shape_check_full(const char *op, pd_dtype dt, int ndim, const int64_t *shape, bool unknown_ok);
/* The same, with a fast path for the shapes of every day: when each dim
 * has at most b bits and b * ndim <= 56, the element count is below 2^56
 * and its bytes (at most 8 per element) below 2^59, so nothing can
 * overflow; a negative dim has all 64 bits and takes the full check. */
static inline pd_status pd_shape_check(const char *op, pd_dtype dt, int ndim, const int64_t *shape,
                                       bool unknown_ok) {
  uint64_t any = 1;
  for (int i = 0; i < ndim; i++) any |= (uint64_t)shape[i];
  if ((64 - __builtin_clzll(any)) * ndim <= 56) return PD_OK;
  return pd_shape_check_full(op, dt, ndim, shape, unknown_ok);
}

#endif
