/* Float unary math: exp, log*, sqrt, rsqrt, reciprocal, trigonometric and
 * hyperbolic functions, erf, and the inplace exp_, sqrt_, rsqrt_,
 * reciprocal_, tanh_. Backward formulas use public ops, so they are
 * differentiable again. */
#include "op_elementwise_util.h"

#define GEN(name, EXPR_F, EXPR_D)                                           \
  PD_EWV_UNARY(name##_f32, float, float, EXPR_F)                            \
  PD_EWV_UNARY(name##_f64, double, double, EXPR_D)                          \
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
#define BWD_BEGIN(name)                                       \
  static pd_status name##_backward(const pd_backward_ctx *c) { \
    if (!c->needs_grad[0]) return PD_OK;                       \
    pd_tensor *g = c->grad_out[0], *x = c->inputs[0], *out = c->outputs[0]; \
    (void)x;                                                   \
    (void)out;                                                 \
    pd_tmps T = {0};                                           \
    pd_tensor *dx =
#define BWD_END                                  \
    ;                                            \
    pd_status st = pd_ew_set_grad(c, 0, dx);     \
    pd_tmps_free(&T);                            \
    return st;                                   \
  }

/* exp: g * out */
BWD_BEGIN(exp) pd_multiply(g, out) BWD_END
/* log: g / x */
BWD_BEGIN(log) pd_divide(g, x) BWD_END
/* log2: g / (x ln 2) */
BWD_BEGIN(log2) pd_divide(g, pd_tk(&T, pd_scale(x, M_LN2, 0.0, true))) BWD_END
/* log10: g / (x ln 10) */
BWD_BEGIN(log10) pd_divide(g, pd_tk(&T, pd_scale(x, M_LN10, 0.0, true))) BWD_END
/* log1p: g / (x + 1) */
BWD_BEGIN(log1p) pd_divide(g, pd_tk(&T, pd_scale(x, 1.0, 1.0, true))) BWD_END
/* sqrt: 0.5 g / out */
BWD_BEGIN(sqrt) pd_scale(pd_tk(&T, pd_divide(g, out)), 0.5, 0.0, true) BWD_END
/* rsqrt: -0.5 g out^3 */
BWD_BEGIN(rsqrt)
    pd_multiply(pd_tk(&T, pd_scale(g, -0.5, 0.0, true)),
                pd_tk(&T, pd_multiply(out, pd_tk(&T, pd_multiply(out, out)))))
BWD_END
/* reciprocal: -g out^2 */
BWD_BEGIN(reciprocal)
    pd_multiply(pd_tk(&T, pd_scale(g, -1.0, 0.0, true)), pd_tk(&T, pd_multiply(out, out)))
BWD_END
/* sin: g cos x */
BWD_BEGIN(sin) pd_multiply(g, pd_tk(&T, pd_cos(x))) BWD_END
/* cos: -g sin x */
BWD_BEGIN(cos) pd_multiply(pd_tk(&T, pd_scale(g, -1.0, 0.0, true)), pd_tk(&T, pd_sin(x))) BWD_END
/* tan: g / cos^2 x */
BWD_BEGIN(tan) pd_divide(g, pd_tk(&T, pd_square(pd_tk(&T, pd_cos(x))))) BWD_END
/* asin: g / sqrt(1 - x^2) */
BWD_BEGIN(asin)
    pd_divide(g, pd_tk(&T, pd_sqrt(pd_tk(&T, pd_scale(pd_tk(&T, pd_square(x)), -1.0, 1.0, true)))))
BWD_END
/* acos: -g / sqrt(1 - x^2) */
BWD_BEGIN(acos)
    pd_divide(pd_tk(&T, pd_scale(g, -1.0, 0.0, true)),
              pd_tk(&T, pd_sqrt(pd_tk(&T, pd_scale(pd_tk(&T, pd_square(x)), -1.0, 1.0, true)))))
BWD_END
/* atan: g / (1 + x^2) */
BWD_BEGIN(atan) pd_divide(g, pd_tk(&T, pd_scale(pd_tk(&T, pd_square(x)), 1.0, 1.0, true))) BWD_END
/* sinh: g cosh x; cosh: g sinh x */
BWD_BEGIN(sinh) pd_multiply(g, pd_tk(&T, pd_cosh(x))) BWD_END
BWD_BEGIN(cosh) pd_multiply(g, pd_tk(&T, pd_sinh(x))) BWD_END
/* tanh: g (1 - out^2) */
BWD_BEGIN(tanh) pd_multiply(g, pd_tk(&T, pd_scale(pd_tk(&T, pd_square(out)), -1.0, 1.0, true))) BWD_END
/* erf: g 2/sqrt(pi) exp(-x^2) */
BWD_BEGIN(erf)
    pd_multiply(pd_tk(&T, pd_scale(g, M_2_SQRTPI, 0.0, true)),
                pd_tk(&T, pd_exp(pd_tk(&T, pd_scale(pd_tk(&T, pd_square(x)), -1.0, 0.0, true)))))
BWD_END
#undef BWD_BEGIN
#undef BWD_END

/* ---- registry rows and wrappers ----------------------------------------- */
#define FLOAT_FLAGS (PD_OPF_DIFF | PD_OPF_FLOAT_ONLY | PD_OPF_HALF_VIA_F32)
#define UNARY(opname, save)                                                                   \
  const pd_op_def pd_opdef_##opname = {.name = #opname, .n_in = 1, .n_out = 1,                \
                                       .flags = FLOAT_FLAGS | (save),                         \
                                       .infer_meta = pd_meta_unary,                           \
                                       .kernel = {[PD_PLACE_CPU] = opname##_kernel},          \
                                       .backward = opname##_backward,                         \
                                       .flops = pd_flops_per_elem};                           \
  pd_tensor *pd_##opname(pd_tensor *x) { return pd_dispatch1(PD_OP_##opname, &x, 1, NULL); }
/* Inplace twin: same kernel; backward reads the output only. */
#define INPLACE(opname)                                                                       \
  const pd_op_def pd_opdef_##opname##_ = {.name = #opname "_", .n_in = 1, .n_out = 1,         \
                                          .flags = FLOAT_FLAGS | PD_OPF_INPLACE | PD_OPF_SAVE_OUT, \
                                          .infer_meta = pd_meta_unary,                        \
                                          .kernel = {[PD_PLACE_CPU] = opname##_kernel},       \
                                          .backward = opname##_backward,                      \
                                          .flops = pd_flops_per_elem};                        \
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
