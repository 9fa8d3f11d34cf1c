/* logsumexp over axes: log(sum(exp(x - m))) + m with m the group max, so
 * large values do not overflow. Integer inputs compute in float32. */
#include <math.h>
#include <stdlib.h>

#include "paddlec/ops.h"
#include "reduction_util.h"

static pd_status lse_kernel(const pd_kernel_ctx *ctx) {
  bool mask[PD_MAX_DIMS];
  pd_reduce_mask(ctx->in[0]->ndim, ctx->attrs, mask);
  int64_t n_out_el = ctx->out[0]->numel;
  double *c = malloc(sizeof(double) * (size_t)(n_out_el > 0 ? n_out_el : 1));
  if (!c) return pd_set_error(PD_ERR_MEMORY, "%s: out of memory", ctx->def->name);
  /* pass 1: the max of each group (into c, as float64) */
  pd_reduce_geom g;
  pdk_reduce_geom_init(&g, ctx->in[0]->ndim, ctx->in[0]->shape, ctx->in[0]->strides, mask);
  pd_reduce_spec s1 = {.kind = PD_RK_MAX};
  int r = pdk_reduce_run(&g, &s1, pd_tensor_data(ctx->in[0]), ctx->in[0]->dtype, c, PD_FLOAT64);
  if (!r) {
    /* an infinite max (or an empty group) shifts by 0: +inf stays +inf, -inf gives -inf */
    for (int64_t i = 0; i < n_out_el; i++)
      if (!isfinite(c[i]) && !isnan(c[i])) c[i] = 0.0;
    pd_reduce_spec s2 = {.kind = PD_RK_SUMEXP_DEV, .post = PD_RP_LOG_ADD_C, .center = c};
    r = pdk_reduce_run(&g, &s2, pd_tensor_data(ctx->in[0]), ctx->in[0]->dtype, pd_tensor_data(ctx->out[0]),
                       ctx->out[0]->dtype);
  }
  free(c);
  if (r == 2) return pd_set_error(PD_ERR_MEMORY, "%s: out of memory", ctx->def->name);
  if (r)
    return pd_set_error(PD_ERR_DTYPE, "%s: dtype %s is not supported", ctx->def->name,
                        pd_dtype_name(ctx->in[0]->dtype));
  return PD_OK;
}

/* dx = dy * exp(x - out) */
static pd_status lse_backward(const pd_backward_ctx *c) {
  if (!c->needs_grad[0]) return PD_OK;
  const pd_meta *xm = &c->in_meta[0];
  bool mask[PD_MAX_DIMS];
  pd_reduce_mask(xm->ndim, c->attrs, mask);
  pd_tensor *ok = pd_reduce_unsqueeze(c->outputs[0], xm, mask);
  pd_tensor *w = ok ? pd_exp_shifted(c->inputs[0], ok) : NULL;
  pd_tensor *g = w ? pd_reduce_unsqueeze(c->grad_out[0], xm, mask) : NULL;
  c->grad_in[0] = g ? pd_multiply(g, w) : NULL;
  pd_tensor_release(ok);
  pd_tensor_release(w);
  pd_tensor_release(g);
  return c->grad_in[0] ? PD_OK : pd_last_status();
}

PD_OPDEF(logsumexp, .n_in = 1, .n_out = 1,
         .flags = PD_OPF_DIFF | PD_OPF_FLOAT_ONLY | PD_OPF_HALF_VIA_F32 | PD_OPF_SAVE_IN | PD_OPF_SAVE_OUT,
         .attr_names = "v0:axis,i0:keepdim", .infer_meta = pd_reduce_infer_meta,
         .kernel = {[PD_PLACE_CPU] = lse_kernel}, .backward = lse_backward, .flops = pd_flops_reduce);

pd_tensor *pd_logsumexp(pd_tensor *x, const int64_t *axis, int naxis, bool keepdim) {
  return pd_reduce_call(PD_OP_logsumexp, "logsumexp", x, axis, naxis, keepdim, NULL);
}
