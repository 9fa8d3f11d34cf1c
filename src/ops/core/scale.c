/* scale: scale * x + bias, or scale * (x + bias). */
#include <math.h>

#include "../ew_util.h"
#include "paddlec/ops.h"

#define GEN(sfx, T) PD_EW_UNARY(scale_##sfx, T, T, P[2] != 0.0 ? x * P[0] + P[1] : (x + P[1]) * P[0])
PD_FOR_FLOAT_TYPES(GEN)
#undef GEN
static const pd_ew_fn k_scale[PD_NUM_DTYPES] = PD_EW_TABLE_FLOAT(scale);

/* Integers. An integral scale and bias (the usual -1, 2, +1) give the exact
 * integer formula, wrapping around as Paddle's kernel (which casts scale and
 * bias to the dtype, then computes in it). Other values are computed in
 * double and saturated to the dtype's range (NaN gives 0), so no conversion
 * is out of range. */
static inline int64_t saturate(double r, int64_t lo, int64_t hi) {
  if (r != r) return 0;
  if (r <= (double)lo) return lo;
  if (r >= (double)hi) return hi; /* (double)INT64_MAX rounds up to 2^63 */
  return (int64_t)r;
}
#define WRAP_AFFINE(UT, x, sc, bi) \
  (P[2] != 0.0 ? (UT)(x) * (UT)(sc) + (UT)(bi) : ((UT)(x) + (UT)(bi)) * (UT)(sc))
#define REAL_AFFINE(x) (P[2] != 0.0 ? (double)(x)*P[0] + P[1] : ((double)(x) + P[1]) * P[0])
#define GEN(sfx, T, UT, LO, HI)                                                             \
  PD_EW_UNARY(scale_exact_##sfx, T, T, (T)WRAP_AFFINE(UT, x, (int64_t)P[0], (int64_t)P[1])) \
  PD_EW_UNARY(scale_real_##sfx, T, T, (T)saturate(REAL_AFFINE(x), LO, HI))
GEN(u8, uint8_t, uint32_t, 0, UINT8_MAX)
GEN(i8, int8_t, uint32_t, INT8_MIN, INT8_MAX)
GEN(i16, int16_t, uint32_t, INT16_MIN, INT16_MAX)
GEN(i32, int32_t, uint32_t, INT32_MIN, INT32_MAX)
GEN(i64, int64_t, uint64_t, INT64_MIN, INT64_MAX)
#undef GEN
static const pd_ew_fn k_scale_exact[PD_NUM_DTYPES] = PD_EW_TABLE_INT_ONLY(scale_exact);
static const pd_ew_fn k_scale_real[PD_NUM_DTYPES] = PD_EW_TABLE_INT_ONLY(scale_real);

/* Whether v is a whole number that int64 holds exactly. */
static bool whole_i64(double v) {
  return v == trunc(v) && v >= -9223372036854775808.0 && v < 9223372036854775808.0;
}

static pd_status scale_kernel(const pd_kernel_ctx *ctx) {
  pd_dtype dt = ctx->out[0]->dtype;
  double p[3] = {ctx->attrs->f[0], ctx->attrs->f[1], ctx->attrs->i[0] ? 1.0 : 0.0};
  const pd_ew_fn *table = k_scale;
  if (pd_dtype_is_integer(dt)) table = whole_i64(p[0]) && whole_i64(p[1]) ? k_scale_exact : k_scale_real;
  return pd_ew_apply(ctx->def->name, table, dt, ctx->out[0], ctx->in, ctx->n_in, p);
}

/* The row's ew_fn (chain fusion): floats only, params as the kernel's. */
static pd_ew_fn scale_ew(const pd_attrs *a, const pd_dtype *dt, double *p) {
  p[0] = a->f[0], p[1] = a->f[1], p[2] = a->i[0] ? 1.0 : 0.0;
  return dt[0] == PD_FLOAT32 || dt[0] == PD_FLOAT64 ? k_scale[dt[0]] : NULL;
}

static pd_status scale_backward(const pd_backward_ctx *c) {
  if (c->needs_grad[0]) {
    c->grad_in[0] = pd_scale(c->grad_out[0], c->attrs->f[0], 0.0, true);
    if (!c->grad_in[0]) return pd_last_status();
  }
  return PD_OK;
}

PD_OPDEF(scale, .n_in = 1, .n_out = 1, .flags = PD_OPF_DIFF | PD_OPF_HALF_VIA_F32,
         .attr_names = "f0:scale,f1:bias,i0:bias_after_scale", .infer_meta = pd_meta_unary,
         .kernel = {[PD_PLACE_CPU] = scale_kernel}, .backward = scale_backward, .flops = pd_flops_per_elem,
         .ew_fn = scale_ew);

/* scale_: x itself scaled (Tensor.scale_): what the library writes into a
 * tensor it owns, such as a merged gradient divided by the steps, goes
 * through the dispatcher as this op. */
PD_OPDEF(scale_, .n_in = 1, .n_out = 1, .flags = PD_OPF_DIFF | PD_OPF_INPLACE,
         .attr_names = "f0:scale,f1:bias,i0:bias_after_scale", .infer_meta = pd_meta_unary,
         .kernel = {[PD_PLACE_CPU] = scale_kernel}, .backward = scale_backward, .flops = pd_flops_per_elem);

pd_tensor *pd_scale(pd_tensor *x, double scale, double bias, bool bias_after_scale) {
  pd_attrs a = {.f = {scale, bias}, .i = {bias_after_scale}};
  return pd_dispatch1(PD_OP_scale, &x, 1, &a);
}
