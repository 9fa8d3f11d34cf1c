/* clip(x, min, max) and clip_. P[0], P[1] are the bounds (already inside the
 * dtype's range for integers, infinite when a side is open). */
#include <float.h>

#include "elementwise_util.h"

static inline float clampf(float x, float lo, float hi) {
  float r = pd_self(x < lo, lo, x);
  return pd_self(x > hi, hi, r);
}
static inline double clampd(double x, double lo, double hi) {
  double r = pd_seld(x < lo, lo, x);
  return pd_seld(x > hi, hi, r);
}
PD_EW_UNARY(clip_f32, float, float, clampf(x, (float)P[0], (float)P[1]))
PD_EW_UNARY(clip_f64, double, double, clampd(x, P[0], P[1]))
#define G(sfx, T) PD_EW_UNARY(clip_##sfx, T, T, x < (T)P[0] ? (T)P[0] : (x > (T)P[1] ? (T)P[1] : x))
PD_FOR_INT_TYPES(G)
#undef G
static const pd_ew_fn k_clip[PD_NUM_DTYPES] = PD_EW_TABLE_NUMERIC(clip);

/* The bounds as seen by dtype dt: open sides become the dtype's extremes. */
static void clip_bounds(pd_dtype dt, const pd_attrs *a, double *lo, double *hi) {
  double tmin, tmax;
  switch (dt) {
    case PD_UINT8:
      tmin = 0, tmax = UINT8_MAX;
      break;
    case PD_INT8:
      tmin = INT8_MIN, tmax = INT8_MAX;
      break;
    case PD_INT16:
      tmin = INT16_MIN, tmax = INT16_MAX;
      break;
    case PD_INT32:
      tmin = INT32_MIN, tmax = INT32_MAX;
      break;
    /* the largest doubles that convert to int64 without overflow */
    case PD_INT64:
      tmin = -9223372036854775808.0, tmax = 9223372036854774784.0;
      break;
    default:
      tmin = -INFINITY, tmax = INFINITY;
      break;
  }
  double mn = a->f[0], mx = a->f[1];
  *lo = isnan(mn) || mn < tmin ? tmin : mn;
  *hi = isnan(mx) || mx > tmax ? tmax : mx;
  if (pd_dtype_is_integer(dt)) { /* Paddle casts the bounds to x's dtype */
    *lo = *lo > tmax ? tmax : trunc(*lo);
    *hi = *hi < tmin ? tmin : trunc(*hi);
  }
}

static pd_status clip_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                           pd_meta *out, int *n_out) {
  if (a->f[0] > a->f[1])
    return pd_set_error(PD_ERR_INVALID, "%s: min (%g) must be less than or equal to max (%g)", def->name,
                        a->f[0], a->f[1]);
  return pd_meta_unary(def, in, n_in, a, out, n_out);
}

static pd_status clip_kernel(const pd_kernel_ctx *ctx) {
  double p[2];
  clip_bounds(ctx->in[0]->dtype, ctx->attrs, &p[0], &p[1]);
  return pd_ew_apply(ctx->def->name, k_clip, ctx->in[0]->dtype, ctx->out[0], ctx->in, ctx->n_in, p);
}

/* g where min < x < max. Read from the output (so clip_ can share it):
 * out lies strictly inside exactly where x does. */
static pd_status clip_backward(const pd_backward_ctx *c) {
  if (!c->needs_grad[0]) return PD_OK;
  pd_tensor *out = c->outputs[0];
  double lo, hi;
  clip_bounds(out->dtype, c->attrs, &lo, &hi);
  pd_tmps T = {0};
  pd_tensor *mask =
      pd_tk(&T, pd_logical_and(pd_tk(&T, pd_greater_than(out, pd_tk(&T, pd_ew_scalar(lo, out)))),
                               pd_tk(&T, pd_less_than(out, pd_tk(&T, pd_ew_scalar(hi, out))))));
  pd_status st = pd_ew_set_grad(c, 0, pd_ew_masked(mask, c->grad_out[0]));
  pd_tmps_free(&T);
  return st;
}

PD_OPDEF(clip, .n_in = 1, .n_out = 1, .flags = PD_OPF_DIFF | PD_OPF_HALF_VIA_F32 | PD_OPF_SAVE_OUT,
         .attr_names = "f0:min,f1:max", .infer_meta = clip_meta, .kernel = {[PD_PLACE_CPU] = clip_kernel},
         .backward = clip_backward, .flops = pd_flops_per_elem);
PD_OPDEF(clip_, .n_in = 1, .n_out = 1,
         .flags = PD_OPF_DIFF | PD_OPF_HALF_VIA_F32 | PD_OPF_SAVE_OUT | PD_OPF_INPLACE,
         .attr_names = "f0:min,f1:max", .infer_meta = clip_meta, .kernel = {[PD_PLACE_CPU] = clip_kernel},
         .backward = clip_backward, .flops = pd_flops_per_elem);

static pd_tensor *clip_call(pd_op_id id, pd_tensor *x, double min, double max) {
  pd_attrs a = {.f = {isnan(min) ? -INFINITY : min, isnan(max) ? INFINITY : max}};
  return pd_dispatch1(id, &x, 1, &a);
}
pd_tensor *pd_clip(pd_tensor *x, double min, double max) { return clip_call(PD_OP_clip, x, min, max); }
pd_tensor *pd_clip_(pd_tensor *x, double min, double max) { return clip_call(PD_OP_clip_, x, min, max); }
