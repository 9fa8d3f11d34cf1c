/* prod over axes (all when none given); the output keeps x's dtype. The
 * gradient is dy times the product of the other elements of the group,
 * exact when x holds zeros. */
#include "paddlec/ops.h"
#include "reduction_util.h"

static pd_status prod_kernel(const pd_kernel_ctx *ctx) {
  return pd_reduce_kernel_run(ctx, &(pd_reduce_spec){.kind = PD_RK_PROD});
}

static pd_status prod_backward(const pd_backward_ctx *c) {
  if (!c->needs_grad[0]) return PD_OK;
  const pd_meta *xm = &c->in_meta[0];
  bool mask[PD_MAX_DIMS];
  pd_reduce_mask(xm->ndim, c->attrs, mask);
  pd_tensor *others = pd_prod_exclusive(c->inputs[0], c->attrs);
  pd_tensor *g = others ? pd_reduce_unsqueeze(c->grad_out[0], xm, mask) : NULL;
  c->grad_in[0] = g ? pd_multiply(g, others) : NULL;
  pd_tensor_release(g);
  pd_tensor_release(others);
  return c->grad_in[0] ? PD_OK : pd_last_status();
}

PD_OPDEF(prod, .n_in = 1, .n_out = 1, .flags = PD_OPF_DIFF | PD_OPF_HALF_VIA_F32 | PD_OPF_SAVE_IN,
         .attr_names = "v0:axis,i0:keepdim", .infer_meta = pd_reduce_infer_meta,
         .kernel = {[PD_PLACE_CPU] = prod_kernel}, .backward = prod_backward, .flops = pd_flops_reduce);

pd_tensor *pd_prod(pd_tensor *x, const int64_t *axis, int naxis, bool keepdim) {
  return pd_reduce_call(PD_OP_prod, "prod", x, axis, naxis, keepdim, NULL);
}
