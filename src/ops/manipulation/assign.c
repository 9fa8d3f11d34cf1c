/* assign: a differentiable copy into a new contiguous tensor. */
#include "manipulation_util.h"
#include "paddlec/ops.h"

static pd_status assign_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                             pd_meta *out, int *n_out) {
  (void)def;
  (void)n_in;
  (void)a;
  pd_meta_of(in[0], out);
  *n_out = 1;
  return PD_OK;
}

static pd_status assign_kernel(const pd_kernel_ctx *ctx) {
  pd_mu_copy_into(ctx->out[0], ctx->in[0]);
  return PD_OK;
}

static pd_status assign_backward(const pd_backward_ctx *c) {
  if (c->needs_grad[0]) c->grad_in[0] = pd_tensor_retain(c->grad_out[0]);
  return PD_OK;
}

const pd_op_def pd_opdef_assign = {.name = "assign",
                                   .attr_names = "",
                                   .n_in = 1,
                                   .n_out = 1,
                                   .flags = PD_OPF_DIFF,
                                   .infer_meta = assign_meta,
                                   .kernel = {[PD_PLACE_CPU] = assign_kernel},
                                   .backward = assign_backward};

pd_tensor *pd_assign(pd_tensor *x) { return pd_dispatch1(PD_OP_assign, &x, 1, NULL); }
