/* rrelu(x, lower, upper, training) (paddle.nn.functional.rrelu). The op
 * returns (out, noise): noise is the slope each element was multiplied by
 * (1 for x >= 0), and the backward is g * noise.
 *   training: a negative x[i] gets the slope lower + (upper - lower) u,
 *             u the float32 uniform of word i%4 of Philox counter
 *             first + i/4 (i row-major over x), as dropout draws its mask;
 *             the generator advances by ceil(numel / 4) counters whatever
 *             the signs, so a seed gives the same slopes on any number of
 *             threads. A nonzero seed attribute uses a private stream.
 *   eval:     the slope is (lower + upper) / 2 and nothing is drawn. */
#include "../../kernels/cpu/parallel.h"
#include "../elementwise/elementwise_util.h"
#include "../creation/creation_util.h"

/* Counter blocks below this many run on one thread. */
#define RRELU_GRAIN 4096

/* Paddle's checks: 0 <= lower <= upper <= 1. */
static pd_status check_bounds(const char *op, double lower, double upper) {
  if (!(lower >= 0.0 && lower <= 1.0))
    return pd_set_error(PD_ERR_INVALID, "%s: lower (%g) must be in [0, 1]", op, lower);
  if (!(upper >= lower))
    return pd_set_error(PD_ERR_INVALID, "%s: upper (%g) must not be less than lower (%g)", op, upper, lower);
  if (!(upper <= 1.0)) return pd_set_error(PD_ERR_INVALID, "%s: upper (%g) must not exceed 1", op, upper);
  return PD_OK;
}

/* Attrs: f0 lower, f1 upper, i0 is_test, i1 seed. */
static pd_status rrelu_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                            pd_meta *out, int *n_out) {
  (void)n_in;
  pd_status st = check_bounds(def->name, a->f[0], a->f[1]);
  if (st != PD_OK) return st;
  pd_meta_of(in[0], &out[0]);
  pd_meta_of(in[0], &out[1]);
  *n_out = 2;
  return PD_OK;
}

#define RRELU_TRAIN(T, xp, yp, np, n, first, key, lo, span)                          \
  PD_FOR_PHILOX_BLOCKS(((n) + 3) / 4, first, key, RRELU_GRAIN, {                     \
    int64_t i0 = 4 * b, c = (n)-i0 < 4 ? (n)-i0 : 4;                                 \
    for (int k = 0; k < c; k++) {                                                    \
      T v = (xp)[i0 + k];                                                            \
      T s = v < (T)0 ? (T)((lo) + (span) * (double)pd_u32_to_unit_f32(w[k])) : (T)1; \
      (np)[i0 + k] = s;                                                              \
      (yp)[i0 + k] = v * s;                                                          \
    }                                                                                \
  })

#define RRELU_EVAL(T, xp, yp, np, n, mid)       \
  PD_PARALLEL_FOR_IF((n) >= PD_GRAIN, i, (n), { \
    T v = (xp)[i], s = v < (T)0 ? (mid) : (T)1; \
    (np)[i] = s;                                \
    (yp)[i] = v * s;                            \
  })

static pd_status rrelu_kernel(const pd_kernel_ctx *ctx) {
  pd_dtype dt = ctx->in[0]->dtype;
  if (dt != PD_FLOAT32 && dt != PD_FLOAT64)
    return pd_set_error(PD_ERR_DTYPE, "%s: dtype %s is not supported", ctx->def->name, pd_dtype_name(dt));
  int64_t n = ctx->in[0]->numel;
  if (n == 0) return PD_OK;
  double lo = ctx->attrs->f[0], span = ctx->attrs->f[1] - ctx->attrs->f[0],
         mid = (ctx->attrs->f[0] + ctx->attrs->f[1]) / 2.0;
  bool is_test = ctx->attrs->i[0] != 0;
  uint64_t key = 0, first = 0;
  if (!is_test) {
    uint64_t nblocks = (uint64_t)((n + 3) / 4);
    if (ctx->attrs->i[1] != 0)
      key = (uint64_t)ctx->attrs->i[1];
    else
      first = pd_rng_reserve(nblocks, &key);
  }
  pd_tensor *x = pd_kernel_contiguous(ctx->in[0]);
  if (!x) return pd_last_status();
  if (dt == PD_FLOAT32) {
    const float *xp = pd_tensor_data(x);
    float *yp = pd_tensor_data(ctx->out[0]), *np = pd_tensor_data(ctx->out[1]), m32 = (float)mid;
    if (is_test)
      RRELU_EVAL(float, xp, yp, np, n, m32);
    else
      RRELU_TRAIN(float, xp, yp, np, n, first, key, lo, span);
  } else {
    const double *xp = pd_tensor_data(x);
    double *yp = pd_tensor_data(ctx->out[0]), *np = pd_tensor_data(ctx->out[1]);
    if (is_test)
      RRELU_EVAL(double, xp, yp, np, n, mid);
    else
      RRELU_TRAIN(double, xp, yp, np, n, first, key, lo, span);
  }
  pd_tensor_release(x);
  return PD_OK;
}

/* d out / d x = noise (the saved second output, a constant). */
static pd_status rrelu_backward(const pd_backward_ctx *c) {
  if (!c->needs_grad[0]) return PD_OK;
  c->grad_in[0] = pd_multiply(c->grad_out[0], c->outputs[1]);
  return c->grad_in[0] ? PD_OK : pd_last_status();
}

PD_OPDEF(rrelu, .n_in = 1, .n_out = 2,
         .flags = PD_OPF_DIFF | PD_OPF_RANDOM | PD_OPF_FLOAT_ONLY | PD_OPF_HALF_VIA_F32 | PD_OPF_SAVE_OUT,
         .nondiff_out = 1u << 1, .attr_names = "f0:lower,f1:upper,i0:is_test,i1:seed",
         .infer_meta = rrelu_meta, .kernel = {[PD_PLACE_CPU] = rrelu_kernel}, .backward = rrelu_backward,
         .flops = pd_flops_per_elem);

pd_tensor *pd_rrelu(pd_tensor *x, double lower, double upper, bool training) {
  if (check_bounds("rrelu", lower, upper) != PD_OK) return NULL;
  pd_attrs a = {.f = {lower, upper}, .i = {!training}};
  return pd_dispatch1(PD_OP_rrelu, &x, 1, &a); /* out; the noise stays internal */
}
