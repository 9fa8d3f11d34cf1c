/* Float unary math: exp, log*, sqrt, rsqrt, reciprocal, trigonometric and
 * hyperbolic functions, erf, and the inplace exp_, sqrt_, rsqrt_,
 * reciprocal_, tanh_. Backward formulas use public ops, so they are
 * differentiable again. */
#include "elementwise_util.h"

#define GEN(name, EXPR_F, EXPR_D)                                          \
  PD_EW_UNARY(name##_f32, float, float, EXPR_F)                            \
  PD_EW_UNARY(name##_f64, double, double, EXPR_D)                          \
  static const pd_ew_fn k_##name[PD_NUM_DTYPES] = PD_EW_TABLE_FLOAT(name); \
  PD_EW_KERNEL(name, k_##name)

GEN(exp, pd_vexpf(x), exp(x))
GEN(log, logf(x), log(x))
GEN(log2, log2f(x), log2(x))
GEN(log10, log10f(x), log10(x))
GEN(log1p, log1pf(x), log1p(x))
GEN(sqrt, sqrtf(x), sqrt(x))
GEN(rsqrt, 1.0f / sqrtf(x), 1.0 / sqrt(x))
GEN(reciprocal, 1.0f / x, 1.0 / x)
GEN(sin, sinf(x), sin(x))
GEN(cos, cosf(x), cos(x))
GEN(tan, tanf(x), tan(x))
GEN(asin, asinf(x), asin(x))
GEN(acos, acosf(x), acos(x))
GEN(atan, atanf(x), atan(x))
GEN(sinh, sinhf(x), sinh(x))
GEN(cosh, coshf(x), cosh(x))
GEN(tanh, pd_vtanhf(x), tanh(x))
GEN(erf, erff(x), erf(x))
#undef GEN

/* ---- backward: dx = g * f'(x), written with ops ------------------------ */
#define BWD(name, DX)                                          \
  static pd_status name##_backward(const pd_backward_ctx *c) { \
    PD_UNARY_BWD_PROLOGUE;                                     \
    return pd_unary_bwd_finish(c, &T, (DX));                   \
  }
#define K PD_K

BWD(exp, pd_multiply(g, out))                               /* g out */
BWD(log, pd_divide(g, x))                                   /* g / x */
BWD(log2, pd_divide(g, K(pd_scale(x, M_LN2, 0.0, true))))   /* g / (x ln 2) */
BWD(log10, pd_divide(g, K(pd_scale(x, M_LN10, 0.0, true)))) /* g / (x ln 10) */
BWD(log1p, pd_divide(g, K(pd_scale(x, 1.0, 1.0, true))))    /* g / (x + 1) */
BWD(sqrt, pd_scale(K(pd_divide(g, out)), 0.5, 0.0, true))   /* 0.5 g / out */
/* -0.5 g out^3 */
BWD(rsqrt, pd_multiply(K(pd_scale(g, -0.5, 0.0, true)), K(pd_multiply(out, K(pd_square(out))))))
/* -g out^2 */
BWD(reciprocal, pd_multiply(K(pd_scale(g, -1.0, 0.0, true)), K(pd_square(out))))
BWD(sin, pd_multiply(g, K(pd_cos(x))))                               /* g cos x */
BWD(cos, pd_multiply(K(pd_scale(g, -1.0, 0.0, true)), K(pd_sin(x)))) /* -g sin x */
BWD(tan, pd_divide(g, K(pd_square(K(pd_cos(x))))))                   /* g / cos^2 x */
/* +-g / sqrt(1 - x^2) */
BWD(asin, pd_divide(g, K(pd_sqrt(K(pd_scale(K(pd_square(x)), -1.0, 1.0, true))))))
BWD(acos,
    pd_divide(K(pd_scale(g, -1.0, 0.0, true)), K(pd_sqrt(K(pd_scale(K(pd_square(x)), -1.0, 1.0, true))))))
BWD(atan, pd_divide(g, K(pd_scale(K(pd_square(x)), 1.0, 1.0, true))))      /* g / (1 + x^2) */
BWD(sinh, pd_multiply(g, K(pd_cosh(x))))                                   /* g cosh x */
BWD(cosh, pd_multiply(g, K(pd_sinh(x))))                                   /* g sinh x */
BWD(tanh, pd_multiply(g, K(pd_scale(K(pd_square(out)), -1.0, 1.0, true)))) /* g (1 - out^2) */
/* g 2/sqrt(pi) exp(-x^2) */
BWD(erf, pd_multiply(K(pd_scale(g, M_2_SQRTPI, 0.0, true)),
                     K(pd_exp(K(pd_scale(K(pd_square(x)), -1.0, 0.0, true))))))
#undef BWD
#undef K

/* ---- registry rows and wrappers ----------------------------------------- */
#define FLOAT_FLAGS (PD_OPF_DIFF | PD_OPF_FLOAT_ONLY | PD_OPF_HALF_VIA_F32)
#define UNARY(opname, save)                                                                  \
  PD_OPDEF(opname, .attr_names = "", .n_in = 1, .n_out = 1, .flags = FLOAT_FLAGS | (save),   \
           .infer_meta = pd_meta_unary, .kernel = {[PD_PLACE_CPU] = opname##_kernel},        \
           .backward = opname##_backward, .flops = pd_flops_per_elem, .ew_fn = opname##_ew); \
  pd_tensor *pd_##opname(pd_tensor *x) { return pd_dispatch1(PD_OP_##opname, &x, 1, NULL); }
/* Inplace twin: same kernel; backward reads the output only. */
#define INPLACE(opname)                                                                          \
  PD_OPDEF(opname##_, .attr_names = "", .n_in = 1, .n_out = 1,                                   \
           .flags = FLOAT_FLAGS | PD_OPF_INPLACE | PD_OPF_SAVE_OUT, .infer_meta = pd_meta_unary, \
           .kernel = {[PD_PLACE_CPU] = opname##_kernel}, .backward = opname##_backward,          \
           .flops = pd_flops_per_elem);                                                          \
  pd_tensor *pd_##opname##_(pd_tensor *x) { return pd_dispatch1(PD_OP_##opname##_, &x, 1, NULL); }

UNARY(exp, PD_OPF_SAVE_OUT)
UNARY(log, PD_OPF_SAVE_IN)
UNARY(log2, PD_OPF_SAVE_IN)
UNARY(log10, PD_OPF_SAVE_IN)
UNARY(log1p, PD_OPF_SAVE_IN)
UNARY(sqrt, PD_OPF_SAVE_OUT)
UNARY(rsqrt, PD_OPF_SAVE_OUT)
UNARY(reciprocal, PD_OPF_SAVE_OUT)
UNARY(sin, PD_OPF_SAVE_IN)
UNARY(cos, PD_OPF_SAVE_IN)
UNARY(tan, PD_OPF_SAVE_IN)
UNARY(asin, PD_OPF_SAVE_IN)
UNARY(acos, PD_OPF_SAVE_IN)
UNARY(atan, PD_OPF_SAVE_IN)
UNARY(sinh, PD_OPF_SAVE_IN)
UNARY(cosh, PD_OPF_SAVE_IN)
UNARY(tanh, PD_OPF_SAVE_OUT)
UNARY(erf, PD_OPF_SAVE_IN)
INPLACE(exp)
INPLACE(sqrt)
INPLACE(rsqrt)
INPLACE(reciprocal)
INPLACE(tanh)
