/* mean over axes (all when none given). The output keeps x's dtype: integer
 * means are computed in floating point and truncated, as Paddle's kernel. */
#include <math.h>
#include <string.h>

#include "paddlec/ops.h"
#include "reduction_util.h"

static pd_status mean_kernel(const pd_kernel_ctx *ctx) {
  bool mask[PD_MAX_DIMS];
  pd_reduce_mask(ctx->in[0]->ndim, ctx->attrs, mask);
  int64_t n = pd_reduce_count(ctx->in[0]->ndim, ctx->in[0]->shape, mask);
  if (n == 0) { /* NaN for floats, 0 for integers (Paddle) */
    pd_tensor *o = ctx->out[0];
    double v = pd_dtype_is_floating(o->dtype) ? NAN : 0.0;
    size_t es = pd_dtype_size(o->dtype);
    for (int64_t i = 0; i < o->numel; i++)
      pd_store_from_f64((char *)pd_tensor_data(o) + (size_t)i * es, o->dtype, v);
    return PD_OK;
  }
  pd_reduce_spec s = {.kind = PD_RK_SUM, .post = PD_RP_DIV, .d = (double)n};
  return pd_reduce_exec(ctx->def, ctx->in[0], mask, &s, ctx->out[0]);
}

static pd_status mean_backward(const pd_backward_ctx *c) {
  if (!c->needs_grad[0]) return PD_OK;
  const pd_meta *xm = &c->in_meta[0];
  bool mask[PD_MAX_DIMS];
  pd_reduce_mask(xm->ndim, c->attrs, mask);
  int64_t n = pd_reduce_count(xm->ndim, xm->shape, mask);
  pd_tensor *e = pd_reduce_expand_to(c->grad_out[0], xm, mask);
  c->grad_in[0] = pd_scale(e, n > 0 ? 1.0 / (double)n : NAN, 0.0, true);
  pd_tensor_release(e);
  return c->grad_in[0] ? PD_OK : pd_last_status();
}

PD_OPDEF(mean, .n_in = 1, .n_out = 1, .flags = PD_OPF_DIFF | PD_OPF_HALF_VIA_F32,
         .attr_names = "v0:axis,i0:keepdim", .infer_meta = pd_reduce_infer_meta,
         .kernel = {[PD_PLACE_CPU] = mean_kernel}, .backward = mean_backward, .flops = pd_flops_reduce);

pd_tensor *pd_mean(pd_tensor *x, const int64_t *axis, int naxis, bool keepdim) {
  return pd_reduce_call(PD_OP_mean, "mean", x, axis, naxis, keepdim, NULL);
}
