/* Elementwise math with broadcasting, comparisons, logic and activations
 * (paddle.* and paddle.nn.functional.*). Binary ops promote their inputs to
 * one dtype (Paddle's rules, pd_promote_types). */
#ifndef PADDLEC_MATH_H
#define PADDLEC_MATH_H

#include "paddlec/core.h"

#ifdef __cplusplus
extern "C" {
#endif

pd_tensor *pd_add(pd_tensor *x, pd_tensor *y);
pd_tensor *pd_subtract(pd_tensor *x, pd_tensor *y);
pd_tensor *pd_multiply(pd_tensor *x, pd_tensor *y);
pd_tensor *pd_divide(pd_tensor *x, pd_tensor *y);
/* Inplace x += y (y broadcast to x's shape); returns x with one more reference. */
pd_tensor *pd_add_(pd_tensor *x, pd_tensor *y);
/* scale * x + bias (bias_after_scale) or scale * (x + bias). */
pd_tensor *pd_scale(pd_tensor *x, double scale, double bias, bool bias_after_scale);
/* Changes the dtype (differentiable between float dtypes). */
pd_tensor *pd_cast(pd_tensor *x, pd_dtype dt);

#ifdef __cplusplus
}
#endif
#endif
