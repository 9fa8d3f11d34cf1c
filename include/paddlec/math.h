/* Elementwise math with broadcasting, comparisons, logic and activations
 * (paddle.* and paddle.nn.functional.*). Binary ops promote their inputs to
 * one dtype (Paddle's rules, pd_promote_types). */
#ifndef PADDLEC_MATH_H
#define PADDLEC_MATH_H

#include "paddlec/core.h"
#include "paddlec/export.h"

#ifdef __cplusplus
extern "C" {
#endif

PD_API pd_tensor *pd_add(pd_tensor *x, pd_tensor *y);
/* paddle.add_n(inputs) (fluid.layers.sums, fluid.layers.sum): the sum of
 * n >= 1 tensors of one dtype and shape (no broadcasting), a new tensor;
 * recorded and differentiated as a chain of adds. */
PD_API pd_tensor *pd_add_n(pd_tensor *const *inputs, int n);
/* paddle.numel(x) (fluid.layers.size): x's element count, an int64 0-D
 * tensor; under program_guard an op, so a -1 batch is counted when the
 * Program runs. */
PD_API pd_tensor *pd_numel(pd_tensor *x);
PD_API pd_tensor *pd_subtract(pd_tensor *x, pd_tensor *y);
PD_API pd_tensor *pd_multiply(pd_tensor *x, pd_tensor *y);
PD_API pd_tensor *pd_divide(pd_tensor *x, pd_tensor *y);
/* Inplace x += y (y broadcast to x's shape); returns x with one more reference. */
PD_API pd_tensor *pd_add_(pd_tensor *x, pd_tensor *y);
/* scale * x + bias (bias_after_scale) or scale * (x + bias). */
PD_API pd_tensor *pd_scale(pd_tensor *x, double scale, double bias, bool bias_after_scale);
/* Changes the dtype (differentiable between float dtypes). */
PD_API pd_tensor *pd_cast(pd_tensor *x, pd_dtype dt);

/* ---- unary math --------------------------------------------------------
 * Float math: integer and bool inputs are computed in float32; float16 and
 * bfloat16 in float32 and rounded back. */
PD_API pd_tensor *pd_exp(pd_tensor *x);
PD_API pd_tensor *pd_log(pd_tensor *x);
PD_API pd_tensor *pd_log2(pd_tensor *x);
PD_API pd_tensor *pd_log10(pd_tensor *x);
/* log(1 + x), accurate near 0. */
PD_API pd_tensor *pd_log1p(pd_tensor *x);
PD_API pd_tensor *pd_sqrt(pd_tensor *x);
/* 1 / sqrt(x). */
PD_API pd_tensor *pd_rsqrt(pd_tensor *x);
/* 1 / x. */
PD_API pd_tensor *pd_reciprocal(pd_tensor *x);
PD_API pd_tensor *pd_sin(pd_tensor *x);
PD_API pd_tensor *pd_cos(pd_tensor *x);
PD_API pd_tensor *pd_tan(pd_tensor *x);
PD_API pd_tensor *pd_asin(pd_tensor *x);
PD_API pd_tensor *pd_acos(pd_tensor *x);
PD_API pd_tensor *pd_atan(pd_tensor *x);
PD_API pd_tensor *pd_sinh(pd_tensor *x);
PD_API pd_tensor *pd_cosh(pd_tensor *x);
PD_API pd_tensor *pd_tanh(pd_tensor *x);
PD_API pd_tensor *pd_erf(pd_tensor *x);
/* Every numeric dtype, output dtype = input dtype. abs' gradient is sign(x). */
PD_API pd_tensor *pd_abs(pd_tensor *x);
/* -1, 0 or 1 (gradient zero). */
PD_API pd_tensor *pd_sign(pd_tensor *x);
/* -x (paddle.neg). */
PD_API pd_tensor *pd_neg(pd_tensor *x);
PD_API pd_tensor *pd_square(pd_tensor *x);
/* floor / ceil / round: integer inputs come back unchanged; gradient zero. */
PD_API pd_tensor *pd_floor(pd_tensor *x);
PD_API pd_tensor *pd_ceil(pd_tensor *x);
/* paddle.round(x, decimals): halves round away from zero (2.5 -> 3,
 * -0.5 -> -1); decimals < 0 rounds to tens, hundreds... */
PD_API pd_tensor *pd_round(pd_tensor *x, int decimals);
/* paddle.clip(x, min, max): float and integer dtypes. An infinite (or NAN)
 * bound leaves that side unbounded (Paddle's min=None / max=None). The
 * gradient flows where min < x < max. min > max is an error. */
PD_API pd_tensor *pd_clip(pd_tensor *x, double min, double max);

/* Inplace variants: x is overwritten and returned (one more reference). x
 * keeps its dtype (a float dtype for the float math). */
PD_API pd_tensor *pd_exp_(pd_tensor *x);
PD_API pd_tensor *pd_sqrt_(pd_tensor *x);
PD_API pd_tensor *pd_rsqrt_(pd_tensor *x);
PD_API pd_tensor *pd_reciprocal_(pd_tensor *x);
PD_API pd_tensor *pd_tanh_(pd_tensor *x);
PD_API pd_tensor *pd_floor_(pd_tensor *x);
PD_API pd_tensor *pd_ceil_(pd_tensor *x);
PD_API pd_tensor *pd_clip_(pd_tensor *x, double min, double max);

/* ---- binary, broadcasting ---------------------------------------------- */
/* floor(x / y) (Python's //). Integer division by zero is an error. Not
 * differentiable (as Paddle). */
PD_API pd_tensor *pd_floor_divide(pd_tensor *x, pd_tensor *y);
/* x mod y with the sign of y (Python's %): remainder(-7, 3) = 2,
 * remainder(7, -3) = -2. Integer division by zero is an error. */
PD_API pd_tensor *pd_remainder(pd_tensor *x, pd_tensor *y);
/* paddle.mod: the same as pd_remainder. */
PD_API pd_tensor *pd_mod(pd_tensor *x, pd_tensor *y);
/* x ** y elementwise (paddle.pow with a tensor exponent). */
PD_API pd_tensor *pd_pow(pd_tensor *x, pd_tensor *y);
/* x ** y for a scalar y (paddle.pow(x, 2.0)); output dtype = x's dtype
 * (integer x: y is truncated to an integer). */
PD_API pd_tensor *pd_pow_scalar(pd_tensor *x, double y);
/* Elementwise max / min (x > y ? x : y). At ties the gradient goes to y,
 * as Paddle's. */
PD_API pd_tensor *pd_maximum(pd_tensor *x, pd_tensor *y);
PD_API pd_tensor *pd_minimum(pd_tensor *x, pd_tensor *y);
/* where(cond, x, y): x where cond, else y; cond must be bool; the three
 * broadcast together and x, y are promoted to one dtype. */
PD_API pd_tensor *pd_where(pd_tensor *cond, pd_tensor *x, pd_tensor *y);

/* ---- comparisons and logic: bool outputs, broadcasting ------------------ */
PD_API pd_tensor *pd_equal(pd_tensor *x, pd_tensor *y);
PD_API pd_tensor *pd_not_equal(pd_tensor *x, pd_tensor *y);
PD_API pd_tensor *pd_less_than(pd_tensor *x, pd_tensor *y);
PD_API pd_tensor *pd_less_equal(pd_tensor *x, pd_tensor *y);
PD_API pd_tensor *pd_greater_than(pd_tensor *x, pd_tensor *y);
PD_API pd_tensor *pd_greater_equal(pd_tensor *x, pd_tensor *y);
/* ---- a tensor with a Python scalar (x + 1, x / 2, mask > 0, 1 - x) -------
 * Paddle's Tensor operators with a Python number, without building a 0-D
 * tensor of the matching dtype. These exist (op: the expression):
 *   pd_add_scalar(x, s)            x + s      pd_subtract_scalar(x, s)   x - s
 *   pd_multiply_scalar(x, s)       x * s      pd_divide_scalar(x, s)     x / s
 *   pd_scalar_subtract(s, x)       s - x      pd_scalar_divide(s, x)     s / x
 *   pd_floor_divide_scalar(x, s)   x // s     pd_remainder_scalar(x, s)  x % s
 *   pd_equal_scalar(x, s)          x == s     pd_not_equal_scalar(x, s)  x != s
 *   pd_less_than_scalar(x, s)      x < s      pd_less_equal_scalar(x, s) x <= s
 *   pd_greater_than_scalar(x, s)   x > s      pd_greater_equal_scalar    x >= s
 * and pd_pow_scalar above (x ** s). Dtypes follow Paddle's rules for a
 * Python int or float: s counts as an int when it is a whole number and as a
 * float otherwise (so 2.0 acts as 2: cast x first to get Paddle's float
 * result for x + 2.0 on an integer x).
 *   - float tensor: keeps its dtype, whatever s (x_f16 * 3.5 stays float16);
 *   - integer or bool tensor with a float s: computed in float32 (Paddle
 *     casts to float32 here, not to the default dtype);
 *   - integer tensor with an int s: keeps its dtype (int arithmetic wraps as
 *     pd_add's does); bool tensor with an int s: int64;
 *   - divide and scalar_divide: an integer or bool tensor becomes float32.
 * +, -, * and / lower to pd_scale (x / s is x * (1/s), as Paddle computes
 * it, so it may differ from pd_divide in the last bit); the others compare
 * or combine with a 0-D tensor of s. Gradients flow to x where the tensor
 * op has one. A NULL x returns NULL and keeps the first error. */
PD_API pd_tensor *pd_add_scalar(pd_tensor *x, double s);
PD_API pd_tensor *pd_subtract_scalar(pd_tensor *x, double s);
PD_API pd_tensor *pd_scalar_subtract(double s, pd_tensor *x);
PD_API pd_tensor *pd_multiply_scalar(pd_tensor *x, double s);
PD_API pd_tensor *pd_divide_scalar(pd_tensor *x, double s);
PD_API pd_tensor *pd_scalar_divide(double s, pd_tensor *x);
PD_API pd_tensor *pd_floor_divide_scalar(pd_tensor *x, double s);
PD_API pd_tensor *pd_remainder_scalar(pd_tensor *x, double s);
PD_API pd_tensor *pd_equal_scalar(pd_tensor *x, double s);
PD_API pd_tensor *pd_not_equal_scalar(pd_tensor *x, double s);
PD_API pd_tensor *pd_less_than_scalar(pd_tensor *x, double s);
PD_API pd_tensor *pd_less_equal_scalar(pd_tensor *x, double s);
PD_API pd_tensor *pd_greater_than_scalar(pd_tensor *x, double s);
PD_API pd_tensor *pd_greater_equal_scalar(pd_tensor *x, double s);

/* Any dtype in (non-zero is true), bool out. */
PD_API pd_tensor *pd_logical_and(pd_tensor *x, pd_tensor *y);
PD_API pd_tensor *pd_logical_or(pd_tensor *x, pd_tensor *y);
PD_API pd_tensor *pd_logical_xor(pd_tensor *x, pd_tensor *y);
PD_API pd_tensor *pd_logical_not(pd_tensor *x);
/* Bool masks; integer inputs are finite. */
PD_API pd_tensor *pd_isnan(pd_tensor *x);
PD_API pd_tensor *pd_isinf(pd_tensor *x);
PD_API pd_tensor *pd_isfinite(pd_tensor *x);
/* 0-d bool: all(|x - y| <= atol + rtol * |y|) for x and y of one shape;
 * NaNs compare equal only with equal_nan. Paddle's defaults: rtol 1e-5,
 * atol 1e-8, equal_nan false. */
PD_API pd_tensor *pd_allclose(pd_tensor *x, pd_tensor *y, double rtol, double atol, bool equal_nan);
/* 0-d bool: same shape and every element equal (different shapes: false). */
PD_API pd_tensor *pd_equal_all(pd_tensor *x, pd_tensor *y);

/* ---- activations (paddle.nn.functional) -------------------------------- */
PD_API pd_tensor *pd_relu(pd_tensor *x);
PD_API pd_tensor *pd_relu_(pd_tensor *x);
/* min(max(x, 0), 6). */
PD_API pd_tensor *pd_relu6(pd_tensor *x);
/* x > 0 ? x : negative_slope * x (Paddle's default slope 0.01). */
PD_API pd_tensor *pd_leaky_relu(pd_tensor *x, double negative_slope);
/* x > 0 ? x : alpha * (e^x - 1) (default alpha 1). */
PD_API pd_tensor *pd_elu(pd_tensor *x, double alpha);
/* scale * (x > 0 ? x : alpha * (e^x - 1)); Paddle's defaults below. */
#define PD_SELU_SCALE 1.0507009873554804934193349852946
#define PD_SELU_ALPHA 1.6732632423543772848170429916717
PD_API pd_tensor *pd_selu(pd_tensor *x, double scale, double alpha);
/* x * Phi(x) with the erf form, or the tanh approximation when approximate. */
PD_API pd_tensor *pd_gelu(pd_tensor *x, bool approximate);
/* x * sigmoid(x). */
PD_API pd_tensor *pd_silu(pd_tensor *x);
/* paddle.nn.functional.swish: x * sigmoid(x). */
PD_API pd_tensor *pd_swish(pd_tensor *x);
PD_API pd_tensor *pd_sigmoid(pd_tensor *x);
/* log(1 + e^(beta x)) / beta, x where beta * x > threshold (defaults 1, 20). */
PD_API pd_tensor *pd_softplus(pd_tensor *x, double beta, double threshold);
/* x / (1 + |x|). */
PD_API pd_tensor *pd_softsign(pd_tensor *x);
/* x * min(max(x + 3, 0), 6) / 6. */
PD_API pd_tensor *pd_hardswish(pd_tensor *x);
/* max(0, min(1, slope * x + offset)); Paddle's defaults slope 0.1666667,
 * offset 0.5. */
PD_API pd_tensor *pd_hardsigmoid(pd_tensor *x, double slope, double offset);
/* log(sigmoid(x)) = -softplus(-x), stable for large |x|. */
PD_API pd_tensor *pd_log_sigmoid(pd_tensor *x);
/* exp(x) / sum(exp(x)) along axis (Paddle's default -1), max-shifted. */
PD_API pd_tensor *pd_softmax(pd_tensor *x, int axis);
/* x - log(sum(exp(x))) along axis, max-shifted. */
PD_API pd_tensor *pd_log_softmax(pd_tensor *x, int axis);
/* paddle.nn.functional.swiglu (Paddle 3) and its older name
 * paddle.incubate.nn.functional.swiglu, one op: silu(x) * y; with y NULL,
 * x's last dim is split in two halves a, b and the result is silu(a) * b.
 * Gradients are first order only (as Paddle's fused op). */
PD_API pd_tensor *pd_swiglu(pd_tensor *x, pd_tensor *y);
/* max(0, x) + min(0, alpha * (e^(x / alpha) - 1)) (default alpha 1; 0 is refused). */
PD_API pd_tensor *pd_celu(pd_tensor *x, double alpha);
/* min(max(x, min), max) (Paddle's defaults -1, 1). */
PD_API pd_tensor *pd_hardtanh(pd_tensor *x, double min, double max);
/* x where x > threshold or x < -threshold, else 0 (default threshold 0.5). */
PD_API pd_tensor *pd_hardshrink(pd_tensor *x, double threshold);
/* x - threshold above threshold, x + threshold below -threshold, else 0
 * (default 0.5; a negative threshold is refused). */
PD_API pd_tensor *pd_softshrink(pd_tensor *x, double threshold);
/* x - tanh(x). */
PD_API pd_tensor *pd_tanhshrink(pd_tensor *x);
/* x * tanh(softplus(x)), softplus taken as x above 20 (Paddle's threshold). */
PD_API pd_tensor *pd_mish(pd_tensor *x);
/* x > threshold ? x : value (Paddle's defaults 1, 0). */
PD_API pd_tensor *pd_thresholded_relu(pd_tensor *x, double threshold, double value);
/* 4-D x, channels on axis 1 (NCHW) or 3 / -1 (NHWC): output channel c is
 * the maximum of input channels c * groups .. c * groups + groups - 1
 * (groups > 1 and a divisor of the channels; Paddle's default axis 1).
 * Gradients are first order only. */
PD_API pd_tensor *pd_maxout(pd_tensor *x, int groups, int axis);
/* Randomized leaky relu: x >= 0 ? x : a * x. Training draws a per element
 * uniformly from [lower, upper) with the global generator (reproducible
 * under pd_seed, whatever the threads); eval uses a = (lower + upper) / 2.
 * Requires 0 <= lower <= upper <= 1; Paddle's defaults below. */
#define PD_RRELU_LOWER (1.0 / 8.0)
#define PD_RRELU_UPPER (1.0 / 3.0)
PD_API pd_tensor *pd_rrelu(pd_tensor *x, double lower, double upper, bool training);
/* Gated linear unit: a * sigmoid(b), a and b the halves of x along axis
 * (whose size must be even; Paddle's default axis -1). */
PD_API pd_tensor *pd_glu(pd_tensor *x, int axis);

#ifdef __cplusplus
}
#endif
#endif
