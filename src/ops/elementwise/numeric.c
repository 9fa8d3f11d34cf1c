/* Unary ops over every numeric dtype: abs, sign, neg, square, and the
 * rounding ops floor, ceil, round (identity on integers) with floor_, ceil_.
 * Signed integer overflow wraps (computed in unsigned arithmetic). */
#include "elementwise_util.h"

/* abs */
PD_EW_UNARY(abs_f32, float, float, fabsf(x))
PD_EW_UNARY(abs_f64, double, double, fabs(x))
PD_EW_UNARY(abs_u8, uint8_t, uint8_t, x)
#define G(sfx, T, UT) PD_EW_UNARY(abs_##sfx, T, T, x < 0 ? (T)(0u - (UT)x) : x)
PD_FOR_SIGNED_TYPES(G)
#undef G
static const pd_ew_fn k_abs[PD_NUM_DTYPES] = PD_EW_TABLE_NUMERIC(abs);

/* sign: -1, 0, 1 (NaN gives 0) */
#define G(sfx, T) PD_EW_UNARY(sign_##sfx, T, T, (T)((x > 0) - (x < 0)))
PD_FOR_FLOAT_TYPES(G)
G(i8, int8_t)
G(i16, int16_t)
G(i32, int32_t)
G(i64, int64_t)
#undef G
PD_EW_UNARY(sign_u8, uint8_t, uint8_t, x != 0)
static const pd_ew_fn k_sign[PD_NUM_DTYPES] = PD_EW_TABLE_NUMERIC(sign);

/* neg */
PD_EW_UNARY(neg_f32, float, float, -x)
PD_EW_UNARY(neg_f64, double, double, -x)
PD_EW_UNARY(neg_u8, uint8_t, uint8_t, 0u - (uint32_t)x)
#define G(sfx, T, UT) PD_EW_UNARY(neg_##sfx, T, T, (T)(0u - (UT)x))
PD_FOR_SIGNED_TYPES(G)
#undef G
static const pd_ew_fn k_neg[PD_NUM_DTYPES] = PD_EW_TABLE_NUMERIC(neg);

/* square */
PD_EW_UNARY(square_f32, float, float, x *x)
PD_EW_UNARY(square_f64, double, double, x *x)
PD_EW_UNARY(square_u8, uint8_t, uint8_t, (uint32_t)x *(uint32_t)x)
#define G(sfx, T, UT) PD_EW_UNARY(square_##sfx, T, T, (T)((UT)x * (UT)x))
PD_FOR_SIGNED_TYPES(G)
#undef G
static const pd_ew_fn k_square[PD_NUM_DTYPES] = PD_EW_TABLE_NUMERIC(square);

/* floor, ceil; integers pass through */
#define G(sfx, T) PD_EW_UNARY(ident_##sfx, T, T, x)
PD_FOR_INT_TYPES(G)
#undef G
PD_EW_UNARY(floor_f32, float, float, floorf(x))
PD_EW_UNARY(floor_f64, double, double, floor(x))
PD_EW_UNARY(ceil_f32, float, float, ceilf(x))
PD_EW_UNARY(ceil_f64, double, double, ceil(x))
#define INT_IDENT                                                                              \
  [PD_UINT8] = ident_u8, [PD_INT8] = ident_i8, [PD_INT16] = ident_i16, [PD_INT32] = ident_i32, \
  [PD_INT64] = ident_i64
static const pd_ew_fn k_floor[PD_NUM_DTYPES] = {
    [PD_FLOAT32] = floor_f32, [PD_FLOAT64] = floor_f64, INT_IDENT};
static const pd_ew_fn k_ceil[PD_NUM_DTYPES] = {[PD_FLOAT32] = ceil_f32, [PD_FLOAT64] = ceil_f64, INT_IDENT};

/* round half away from zero; with decimals d: round(x * 10^d) / 10^d for
 * d > 0, round(x / 10^-d) * 10^-d for d < 0 (P[0] = the power of ten) */
static inline float round_half_away_f(float x) {
  float t = truncf(x);
  return t + pd_self(fabsf(x - t) >= 0.5f, copysignf(1.0f, x), 0.0f);
}
PD_EW_UNARY(round_f32, float, float, round_half_away_f(x))
PD_EW_UNARY(round_f64, double, double, round(x))
PD_EW_UNARY(roundm_f32, float, float, round_half_away_f(x *(float)P[0]) / (float)P[0])
PD_EW_UNARY(roundm_f64, double, double, round(x *P[0]) / P[0])
PD_EW_UNARY(roundd_f32, float, float, round_half_away_f(x / (float)P[0]) * (float)P[0])
PD_EW_UNARY(roundd_f64, double, double, round(x / P[0]) * P[0])
static const pd_ew_fn k_round[PD_NUM_DTYPES] = {
    [PD_FLOAT32] = round_f32, [PD_FLOAT64] = round_f64, INT_IDENT};
static const pd_ew_fn k_roundm[PD_NUM_DTYPES] = {
    [PD_FLOAT32] = roundm_f32, [PD_FLOAT64] = roundm_f64, INT_IDENT};
static const pd_ew_fn k_roundd[PD_NUM_DTYPES] = {
    [PD_FLOAT32] = roundd_f32, [PD_FLOAT64] = roundd_f64, INT_IDENT};

PD_EW_KERNEL(abs, k_abs)
PD_EW_KERNEL(sign, k_sign)
PD_EW_KERNEL(neg, k_neg)
PD_EW_KERNEL(square, k_square)
PD_EW_KERNEL(floor, k_floor)
PD_EW_KERNEL(ceil, k_ceil)

static pd_status round_kernel(const pd_kernel_ctx *ctx) {
  int64_t d = ctx->attrs->i[0];
  double ten = pow(10.0, fabs((double)d)); /* not -d: INT64_MIN has no negation */
  const pd_ew_fn *table = d == 0 ? k_round : d > 0 ? k_roundm : k_roundd;
  return pd_ew_apply(ctx->def->name, table, ctx->in[0]->dtype, ctx->out[0], ctx->in, ctx->n_in, &ten);
}

/* The row's ew_fn (chain fusion): the kernel's table and params. */
static pd_ew_fn round_ew(const pd_attrs *a, const pd_dtype *dt, double *p) {
  int64_t d = a->i[0];
  p[0] = pow(10.0, fabs((double)d));
  const pd_ew_fn *table = d == 0 ? k_round : d > 0 ? k_roundm : k_roundd;
  return (unsigned)dt[0] < PD_NUM_DTYPES ? table[dt[0]] : NULL;
}

/* ---- backward ----------------------------------------------------------- */
static pd_status abs_backward(const pd_backward_ctx *c) { /* g * sign(x) */
  if (!c->needs_grad[0]) return PD_OK;
  pd_tensor *s = pd_sign(c->inputs[0]);
  pd_status st = pd_ew_set_grad(c, 0, pd_multiply(c->grad_out[0], s));
  pd_tensor_release(s);
  return st;
}

static pd_status zero_backward(const pd_backward_ctx *c) { /* piecewise constant */
  if (!c->needs_grad[0]) return PD_OK;
  /* A DTensor gradient goes through an op, which keeps its placements
   * (zeros of its local shape would read as a replicated tensor of that
   * shape); Paddle's sign_grad is this scale too. */
  if (c->grad_out[0]->dist_attr) return pd_ew_set_grad(c, 0, pd_scale(c->grad_out[0], 0.0, 0.0, true));
  return pd_ew_set_grad(c, 0, pd_zeros_like(c->grad_out[0], PD_NUM_DTYPES));
}

static pd_status neg_backward(const pd_backward_ctx *c) {
  if (!c->needs_grad[0]) return PD_OK;
  return pd_ew_set_grad(c, 0, pd_scale(c->grad_out[0], -1.0, 0.0, true));
}

static pd_status square_backward(const pd_backward_ctx *c) { /* 2 x g */
  if (!c->needs_grad[0]) return PD_OK;
  pd_tensor *t = pd_scale(c->inputs[0], 2.0, 0.0, true);
  pd_status st = pd_ew_set_grad(c, 0, pd_multiply(c->grad_out[0], t));
  pd_tensor_release(t);
  return st;
}

/* ---- registry rows and wrappers ----------------------------------------- */
#define NUM_FLAGS (PD_OPF_DIFF | PD_OPF_HALF_VIA_F32)
#define UNARY(opname, kname, save, bwd, attrs)                                                        \
  PD_OPDEF(opname, .n_in = 1, .n_out = 1, .flags = NUM_FLAGS | (save), .attr_names = attrs,           \
           .infer_meta = pd_meta_unary, .kernel = {[PD_PLACE_CPU] = kname##_kernel}, .backward = bwd, \
           .flops = pd_flops_per_elem, .ew_fn = kname##_ew);
UNARY(abs, abs, PD_OPF_SAVE_IN, abs_backward, "")
UNARY(sign, sign, 0, zero_backward, "")
UNARY(neg, neg, 0, neg_backward, "")
UNARY(square, square, PD_OPF_SAVE_IN, square_backward, "")
UNARY(floor, floor, 0, zero_backward, "")
UNARY(ceil, ceil, 0, zero_backward, "")
UNARY(round, round, 0, zero_backward, "i0:decimals")
UNARY(floor_, floor, PD_OPF_INPLACE, zero_backward, "")
UNARY(ceil_, ceil, PD_OPF_INPLACE, zero_backward, "")

#define WRAP(opname) \
  pd_tensor *pd_##opname(pd_tensor *x) { return pd_dispatch1(PD_OP_##opname, &x, 1, NULL); }
WRAP(abs)
WRAP(sign)
WRAP(neg)
WRAP(square)
WRAP(floor)
WRAP(ceil)
WRAP(floor_)
WRAP(ceil_)

pd_tensor *pd_round(pd_tensor *x, int decimals) {
  pd_attrs a = {.i = {decimals}};
  return pd_dispatch1(PD_OP_round, &x, 1, &a);
}
