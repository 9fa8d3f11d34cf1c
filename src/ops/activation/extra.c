/* More pointwise activations (paddle.nn.functional): celu, hardtanh,
 * hardshrink, softshrink, tanhshrink, mish, thresholded_relu. float32
 * kernels vectorise (exp and tanh from vmath.h, selects as bit masks);
 * backward formulas are written with public ops. */
#include "../elementwise/elementwise_util.h"

#define GEN(name, EXPR_F, EXPR_D)                                          \
  PD_EW_UNARY(name##_f32, float, float, EXPR_F)                            \
  PD_EW_UNARY(name##_f64, double, double, EXPR_D)                          \
  static const pd_ew_fn k_##name[PD_NUM_DTYPES] = PD_EW_TABLE_FLOAT(name); \
  PD_EW_KERNEL(name, k_##name)

/* e^x - 1: below |x| = ln2 / 2 pd_vexpf reduces to 1 + r + r^2 p(r) with
 * r = x, so dropping the 1 gives the result without cancellation. */
static inline float expm1_f(float x) {
  return pd_self(fabsf(x) < 0.34657359f, pd_vexpf_poly(x) * x * x + x, pd_vexpf(x) - 1.0f);
}

/* celu: x > 0 ? x : alpha (e^(x / alpha) - 1), which equals Paddle's
 * max(0, x) + min(0, alpha (e^(x / alpha) - 1)) for either sign of alpha. */
static inline float celu_f(float x, float a) { return pd_self(x > 0.0f, x, a * expm1_f(x / a)); }
static inline double celu_d(double x, double a) { return x > 0.0 ? x : a * expm1(x / a); }

/* hardtanh: max(x, lo) then min(., hi), as Paddle's brelu. */
static inline float hardtanh_f(float x, float lo, float hi) {
  float r = pd_self(x > lo, x, lo);
  return pd_self(r < hi, r, hi);
}
static inline double hardtanh_d(double x, double lo, double hi) {
  double r = x > lo ? x : lo;
  return r < hi ? r : hi;
}

/* hardshrink: x (x < -t or x > t), a product as Paddle's (so -0.3 gives -0). */
static inline float hardshrink_f(float x, float t) { return x * pd_self((x < -t) | (x > t), 1.0f, 0.0f); }

/* softshrink: x - t above t, x + t below -t, 0 between. */
static inline float softshrink_f(float x, float t) {
  return pd_self(x > t, x - t, pd_self(x < -t, x + t, 0.0f));
}
static inline double softshrink_d(double x, double t) { return x > t ? x - t : x < -t ? x + t : 0.0; }

/* tanhshrink: x - tanh(x). Below |x| = 0.625 tanh is x + x^3 p(x^2) (the
 * polynomial of pd_vtanhf), so the difference is -x^3 p(x^2) without the
 * cancellation of subtracting two nearly equal numbers. */
static inline float tanhshrink_f(float x) {
  float z = x * x;
  float p =
      ((((-5.70498872745e-3f * z + 2.06390887954e-2f) * z - 5.37397155531e-2f) * z + 1.33314422036e-1f) * z -
       3.33332819422e-1f) *
      z * x;
  return pd_self(fabsf(x) < 0.625f, -p, x - pd_vtanhf(x));
}

/* mish: x tanh(softplus(x)), softplus(x) = x above the threshold (Paddle
 * passes 20). tanh(log(1 + e^x)) = n / (n + 2) with n = e^x (e^x + 2), which
 * needs one exp and keeps its relative accuracy for negative x; the exp
 * argument is capped where the threshold branch is taken anyway. */
static inline float mish_f(float x, float t) {
  float e = pd_vexpf(pd_self(x < 40.0f, x, 40.0f));
  float n = e * (e + 2.0f);
  return pd_self(x > t, x * pd_vtanhf(x), x * (n / (n + 2.0f)));
}
static inline double mish_d(double x, double t) {
  if (x > t) return x * tanh(x);
  double e = exp(x < 300.0 ? x : 300.0), n = e * (e + 2.0);
  return x * (n / (n + 2.0));
}

GEN(celu, celu_f(x, (float)P[0]), celu_d(x, P[0]))
GEN(hardtanh, hardtanh_f(x, (float)P[0], (float)P[1]), hardtanh_d(x, P[0], P[1]))
GEN(hardshrink, hardshrink_f(x, (float)P[0]), x *((x < -P[0]) || (x > P[0]) ? 1.0 : 0.0))
GEN(softshrink, softshrink_f(x, (float)P[0]), softshrink_d(x, P[0]))
GEN(tanh_shrink, tanhshrink_f(x), x - tanh(x))
GEN(mish, mish_f(x, (float)P[0]), mish_d(x, P[0]))
GEN(thresholded_relu, pd_self(x > (float)P[0], x, (float)P[1]), x > P[0] ? x : P[1])
#undef GEN

/* ---- backward ----------------------------------------------------------- */
#define K PD_K
#define S PD_S

/* celu: x > 0 ? g : g e^(x / alpha) */
static pd_status celu_backward(const pd_backward_ctx *c) {
  PD_UNARY_BWD_PROLOGUE;
  pd_tensor *neg = K(pd_multiply(g, K(pd_exp(K(pd_scale(x, 1.0 / P[0], 0.0, true))))));
  return pd_unary_bwd_finish(c, &T, pd_where(K(pd_greater_than(x, S(0.0, x))), g, neg));
}

/* hardtanh: g where min < x < max */
static pd_status hardtanh_backward(const pd_backward_ctx *c) {
  PD_UNARY_BWD_PROLOGUE;
  pd_tensor *m = K(pd_logical_and(K(pd_greater_than(x, S(P[0], x))), K(pd_less_than(x, S(P[1], x)))));
  return pd_unary_bwd_finish(c, &T, pd_ew_masked(m, g));
}

/* hardshrink, softshrink: g where |x| > threshold */
static pd_status shrink_backward(const pd_backward_ctx *c) {
  PD_UNARY_BWD_PROLOGUE;
  return pd_unary_bwd_finish(c, &T, pd_ew_masked(K(pd_greater_than(K(pd_abs(x)), S(P[0], x))), g));
}

/* tanhshrink: g tanh(x)^2 */
static pd_status tanh_shrink_backward(const pd_backward_ctx *c) {
  PD_UNARY_BWD_PROLOGUE;
  return pd_unary_bwd_finish(c, &T, pd_multiply(g, K(pd_square(K(pd_tanh(x))))));
}

/* mish: g (t + x (1 - t^2) sigmoid(x)), t = tanh(softplus(x)); the
 * derivative of softplus is sigmoid(x) below the threshold, and above it
 * 1 - t^2 vanishes. */
static pd_status mish_backward(const pd_backward_ctx *c) {
  PD_UNARY_BWD_PROLOGUE;
  pd_tensor *t = K(pd_tanh(K(pd_softplus(x, 1.0, P[0]))));
  pd_tensor *sech2 = K(pd_scale(K(pd_square(t)), -1.0, 1.0, true));
  pd_tensor *d = K(pd_add(t, K(pd_multiply(K(pd_multiply(x, sech2)), K(pd_sigmoid(x))))));
  return pd_unary_bwd_finish(c, &T, pd_multiply(g, d));
}

/* thresholded_relu: g where x > threshold */
static pd_status thresholded_relu_backward(const pd_backward_ctx *c) {
  PD_UNARY_BWD_PROLOGUE;
  return pd_unary_bwd_finish(c, &T, pd_ew_masked(K(pd_greater_than(x, S(P[0], x))), g));
}
#undef K
#undef S

/* ---- registry rows and wrappers ----------------------------------------- */
#define ACT_FLAGS (PD_OPF_DIFF | PD_OPF_FLOAT_ONLY | PD_OPF_HALF_VIA_F32 | PD_OPF_SAVE_IN)
#define ACT(opname, bwd, attrs)                                                       \
  PD_OPDEF(opname, .n_in = 1, .n_out = 1, .flags = ACT_FLAGS, .attr_names = attrs,    \
           .infer_meta = pd_meta_unary, .kernel = {[PD_PLACE_CPU] = opname##_kernel}, \
           .backward = bwd##_backward, .flops = pd_flops_per_elem);
ACT(celu, celu, "f0:alpha")
ACT(hardtanh, hardtanh, "f0:t_min,f1:t_max")
ACT(hardshrink, shrink, "f0:threshold")
ACT(softshrink, shrink, "f0:lambda")
ACT(tanh_shrink, tanh_shrink, "")
ACT(mish, mish, "f0:threshold")
ACT(thresholded_relu, thresholded_relu, "f0:threshold,f1:value")

static pd_tensor *act(pd_op_id id, pd_tensor *x, double p0, double p1) {
  pd_attrs a = {.f = {p0, p1}};
  return pd_dispatch1(id, &x, 1, &a);
}
pd_tensor *pd_celu(pd_tensor *x, double alpha) {
  if (alpha == 0.0) { /* Paddle's check */
    pd_set_error(PD_ERR_INVALID, "celu: alpha cannot be 0 (got %g)", alpha);
    return NULL;
  }
  return act(PD_OP_celu, x, alpha, 0);
}
pd_tensor *pd_hardtanh(pd_tensor *x, double min, double max) { return act(PD_OP_hardtanh, x, min, max); }
pd_tensor *pd_hardshrink(pd_tensor *x, double threshold) { return act(PD_OP_hardshrink, x, threshold, 0); }
pd_tensor *pd_softshrink(pd_tensor *x, double threshold) {
  if (!(threshold >= 0.0)) {
    pd_set_error(PD_ERR_INVALID, "softshrink: threshold (%g) must be no less than zero", threshold);
    return NULL;
  }
  return act(PD_OP_softshrink, x, threshold, 0);
}
pd_tensor *pd_tanhshrink(pd_tensor *x) { return act(PD_OP_tanh_shrink, x, 0, 0); }
pd_tensor *pd_mish(pd_tensor *x) { return act(PD_OP_mish, x, 20.0, 0); }
pd_tensor *pd_thresholded_relu(pd_tensor *x, double threshold, double value) {
  return act(PD_OP_thresholded_relu, x, threshold, value);
}
