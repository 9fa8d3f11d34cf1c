/* Pointwise activations (paddle.nn.functional): relu, relu_, relu6,
 * leaky_relu, elu, selu, sigmoid, silu, swish, softplus, softsign,
 * hardswish, hardsigmoid, log_sigmoid. float32 kernels vectorise (exp and
 * tanh from vmath.h); backward formulas are written with public ops. */
#include "../elementwise/elementwise_util.h"

#define GEN(name, EXPR_F, EXPR_D)                                          \
  PD_EW_UNARY(name##_f32, float, float, EXPR_F)                            \
  PD_EW_UNARY(name##_f64, double, double, EXPR_D)                          \
  static const pd_ew_fn k_##name[PD_NUM_DTYPES] = PD_EW_TABLE_FLOAT(name); \
  PD_EW_KERNEL(name, k_##name)

/* P[] are the attrs' float slots */
static inline float softplus_f(float x, float b, float t) {
  float bx = b * x;
  float sp = (fmaxf(bx, 0.0f) + log1pf(pd_vexpf(-fabsf(bx)))) / b;
  return pd_self(bx > t, x, sp);
}
static inline double softplus_d(double x, double b, double t) {
  double bx = b * x;
  return bx > t ? x : (fmax(bx, 0.0) + log1p(exp(-fabs(bx)))) / b;
}
static inline float hardswish_f(float x) {
  float r = pd_self(x + 3.0f > 0.0f, x + 3.0f, 0.0f);
  r = pd_self(r < 6.0f, r, 6.0f);
  return x * r / 6.0f;
}
static inline double hardswish_d(double x) { return x * fmin(fmax(x + 3.0, 0.0), 6.0) / 6.0; }
static inline float hardsigmoid_f(float x, float s, float o) {
  float r = s * x + o;
  r = pd_self(r > 0.0f, r, 0.0f);
  return pd_self(r < 1.0f, r, 1.0f);
}

GEN(relu, pd_self(x > 0.0f, x, 0.0f), pd_seld(x > 0.0, x, 0.0))
GEN(relu6, pd_self(x < 6.0f, pd_self(x > 0.0f, x, 0.0f), 6.0f), fmin(fmax(x, 0.0), 6.0))
GEN(leaky_relu, pd_self(x > 0.0f, x, x *(float)P[0]), x > 0.0 ? x : x * P[0])
GEN(elu, pd_self(x > 0.0f, x, (float)P[0] * expm1f(x)), x > 0.0 ? x : P[0] * expm1(x))
GEN(selu, (float)P[0] * pd_self(x > 0.0f, x, (float)P[1] * expm1f(x)), P[0] * (x > 0.0 ? x : P[1] * expm1(x)))
GEN(sigmoid, pd_vsigmoidf(x), pd_sigmoidd(x))
GEN(silu, x / (1.0f + pd_vexpf(-x)), x / (1.0 + exp(-x)))
GEN(softplus, softplus_f(x, (float)P[0], (float)P[1]), softplus_d(x, P[0], P[1]))
GEN(softsign, x / (1.0f + fabsf(x)), x / (1.0 + fabs(x)))
GEN(hardswish, hardswish_f(x), hardswish_d(x))
GEN(hardsigmoid, hardsigmoid_f(x, (float)P[0], (float)P[1]), fmin(fmax(P[0] * x + P[1], 0.0), 1.0))
/* log(sigmoid(x)) = min(x, 0) - log1p(e^-|x|) */
GEN(logsigmoid, fminf(x, 0.0f) - log1pf(pd_vexpf(-fabsf(x))), fmin(x, 0.0) - log1p(exp(-fabs(x))))
#undef GEN

/* ---- backward ----------------------------------------------------------- */
#define K PD_K
#define S PD_S

/* relu: g where out > 0 */
static pd_status relu_backward(const pd_backward_ctx *c) {
  PD_UNARY_BWD_PROLOGUE;
  return pd_unary_bwd_finish(c, &T, pd_ew_masked(K(pd_greater_than(out, S(0.0, out))), g));
}

/* relu6: g where 0 < out < 6 */
static pd_status relu6_backward(const pd_backward_ctx *c) {
  PD_UNARY_BWD_PROLOGUE;
  pd_tensor *m = K(pd_logical_and(K(pd_greater_than(out, S(0.0, out))), K(pd_less_than(out, S(6.0, out)))));
  return pd_unary_bwd_finish(c, &T, pd_ew_masked(m, g));
}

/* leaky_relu: x > 0 ? g : slope g */
static pd_status leaky_relu_backward(const pd_backward_ctx *c) {
  PD_UNARY_BWD_PROLOGUE;
  return pd_unary_bwd_finish(c, &T,
                             pd_where(K(pd_greater_than(x, S(0.0, x))), g, K(pd_scale(g, P[0], 0.0, true))));
}

/* elu: x > 0 ? g : g (out + alpha) */
static pd_status elu_backward(const pd_backward_ctx *c) {
  PD_UNARY_BWD_PROLOGUE;
  pd_tensor *neg = K(pd_multiply(g, K(pd_scale(out, 1.0, P[0], true))));
  return pd_unary_bwd_finish(c, &T, pd_where(K(pd_greater_than(x, S(0.0, x))), g, neg));
}

/* selu: x > 0 ? scale g : g (out + scale alpha) */
static pd_status selu_backward(const pd_backward_ctx *c) {
  PD_UNARY_BWD_PROLOGUE;
  pd_tensor *neg = K(pd_multiply(g, K(pd_scale(out, 1.0, P[0] * P[1], true))));
  return pd_unary_bwd_finish(
      c, &T, pd_where(K(pd_greater_than(x, S(0.0, x))), K(pd_scale(g, P[0], 0.0, true)), neg));
}

/* sigmoid: g out (1 - out) */
static pd_status sigmoid_backward(const pd_backward_ctx *c) {
  PD_UNARY_BWD_PROLOGUE;
  return pd_unary_bwd_finish(c, &T, pd_multiply(g, K(pd_multiply(out, K(pd_scale(out, -1.0, 1.0, true))))));
}

/* silu: g s (1 + x (1 - s)), s = sigmoid(x) */
static pd_status silu_backward(const pd_backward_ctx *c) {
  PD_UNARY_BWD_PROLOGUE;
  pd_tensor *s = K(pd_sigmoid(x));
  pd_tensor *v = K(pd_scale(K(pd_multiply(x, K(pd_scale(s, -1.0, 1.0, true)))), 1.0, 1.0, true));
  return pd_unary_bwd_finish(c, &T, pd_multiply(g, K(pd_multiply(s, v))));
}

/* softplus: beta x > threshold ? g : g sigmoid(beta x) */
static pd_status softplus_backward(const pd_backward_ctx *c) {
  PD_UNARY_BWD_PROLOGUE;
  pd_tensor *bx = K(pd_scale(x, P[0], 0.0, true));
  pd_tensor *gs = K(pd_multiply(g, K(pd_sigmoid(bx))));
  return pd_unary_bwd_finish(c, &T, pd_where(K(pd_greater_than(bx, S(P[1], bx))), g, gs));
}

/* softsign: g / (1 + |x|)^2 */
static pd_status softsign_backward(const pd_backward_ctx *c) {
  PD_UNARY_BWD_PROLOGUE;
  return pd_unary_bwd_finish(c, &T, pd_divide(g, K(pd_square(K(pd_scale(K(pd_abs(x)), 1.0, 1.0, true))))));
}

/* hardswish: 0 for x + 3 <= 0, g (2x + 3) / 6 for 0 < x + 3 < 6, g above */
static pd_status hardswish_backward(const pd_backward_ctx *c) {
  PD_UNARY_BWD_PROLOGUE;
  pd_tensor *xp3 = K(pd_scale(x, 1.0, 3.0, true));
  pd_tensor *lin = K(pd_multiply(g, K(pd_scale(x, 2.0 / 6.0, 3.0 / 6.0, true))));
  pd_tensor *inner = K(pd_where(K(pd_less_than(xp3, S(6.0, x))), lin, g));
  return pd_unary_bwd_finish(c, &T, pd_ew_masked(K(pd_greater_than(xp3, S(0.0, x))), inner));
}

/* hardsigmoid: slope g where 0 < out < 1 */
static pd_status hardsigmoid_backward(const pd_backward_ctx *c) {
  PD_UNARY_BWD_PROLOGUE;
  pd_tensor *m = K(pd_logical_and(K(pd_greater_than(out, S(0.0, out))), K(pd_less_than(out, S(1.0, out)))));
  return pd_unary_bwd_finish(c, &T, pd_ew_masked(m, K(pd_scale(g, P[0], 0.0, true))));
}

/* log_sigmoid: g sigmoid(-x) */
static pd_status logsigmoid_backward(const pd_backward_ctx *c) {
  PD_UNARY_BWD_PROLOGUE;
  return pd_unary_bwd_finish(c, &T, pd_multiply(g, K(pd_sigmoid(K(pd_scale(x, -1.0, 0.0, true))))));
}
#undef K
#undef S

/* ---- registry rows and wrappers ----------------------------------------- */
#define ACT_FLAGS (PD_OPF_DIFF | PD_OPF_FLOAT_ONLY | PD_OPF_HALF_VIA_F32)
#define ACT(opname, kname, save, attrs)                                                     \
  PD_OPDEF(opname, .n_in = 1, .n_out = 1, .flags = ACT_FLAGS | (save), .attr_names = attrs, \
           .infer_meta = pd_meta_unary, .kernel = {[PD_PLACE_CPU] = kname##_kernel},        \
           .backward = kname##_backward, .flops = pd_flops_per_elem, .ew_fn = kname##_ew);
ACT(relu, relu, PD_OPF_SAVE_OUT, "")
ACT(relu_, relu, PD_OPF_SAVE_OUT | PD_OPF_INPLACE, "")
ACT(relu6, relu6, PD_OPF_SAVE_OUT, "")
ACT(leaky_relu, leaky_relu, PD_OPF_SAVE_IN, "f0:negative_slope")
ACT(elu, elu, PD_OPF_SAVE_IN | PD_OPF_SAVE_OUT, "f0:alpha")
ACT(selu, selu, PD_OPF_SAVE_IN | PD_OPF_SAVE_OUT, "f0:scale,f1:alpha")
ACT(sigmoid, sigmoid, PD_OPF_SAVE_OUT, "")
ACT(silu, silu, PD_OPF_SAVE_IN, "")
ACT(swish, silu, PD_OPF_SAVE_IN, "")
ACT(softplus, softplus, PD_OPF_SAVE_IN, "f0:beta,f1:threshold")
ACT(softsign, softsign, PD_OPF_SAVE_IN, "")
ACT(hardswish, hardswish, PD_OPF_SAVE_IN, "")
ACT(hardsigmoid, hardsigmoid, PD_OPF_SAVE_OUT, "f0:slope,f1:offset")
ACT(logsigmoid, logsigmoid, PD_OPF_SAVE_IN, "")

static pd_tensor *act(pd_op_id id, pd_tensor *x, double p0, double p1) {
  pd_attrs a = {.f = {p0, p1}};
  return pd_dispatch1(id, &x, 1, &a);
}
pd_tensor *pd_relu(pd_tensor *x) { return act(PD_OP_relu, x, 0, 0); }
pd_tensor *pd_relu_(pd_tensor *x) { return act(PD_OP_relu_, x, 0, 0); }
pd_tensor *pd_relu6(pd_tensor *x) { return act(PD_OP_relu6, x, 0, 0); }
pd_tensor *pd_leaky_relu(pd_tensor *x, double negative_slope) {
  return act(PD_OP_leaky_relu, x, negative_slope, 0);
}
pd_tensor *pd_elu(pd_tensor *x, double alpha) { return act(PD_OP_elu, x, alpha, 0); }
pd_tensor *pd_selu(pd_tensor *x, double scale, double alpha) {
  if (!(scale > 1.0) || !(alpha >= 0.0)) { /* Paddle's checks */
    pd_set_error(PD_ERR_INVALID, "selu: scale (%g) must be greater than 1.0 and alpha (%g) non-negative",
                 scale, alpha);
    return NULL;
  }
  return act(PD_OP_selu, x, scale, alpha);
}
pd_tensor *pd_sigmoid(pd_tensor *x) { return act(PD_OP_sigmoid, x, 0, 0); }
pd_tensor *pd_silu(pd_tensor *x) { return act(PD_OP_silu, x, 0, 0); }
pd_tensor *pd_swish(pd_tensor *x) { return act(PD_OP_swish, x, 0, 0); }
pd_tensor *pd_softplus(pd_tensor *x, double beta, double threshold) {
  if (beta == 0.0) {
    pd_set_error(PD_ERR_INVALID, "softplus: beta must not be 0");
    return NULL;
  }
  return act(PD_OP_softplus, x, beta, threshold);
}
pd_tensor *pd_softsign(pd_tensor *x) { return act(PD_OP_softsign, x, 0, 0); }
pd_tensor *pd_hardswish(pd_tensor *x) { return act(PD_OP_hardswish, x, 0, 0); }
pd_tensor *pd_hardsigmoid(pd_tensor *x, double slope, double offset) {
  return act(PD_OP_hardsigmoid, x, slope, offset);
}
pd_tensor *pd_log_sigmoid(pd_tensor *x) { return act(PD_OP_logsigmoid, x, 0, 0); }
