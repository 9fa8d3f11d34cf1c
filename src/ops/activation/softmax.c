/* softmax and log_softmax along one axis (fused row kernels in
 * kernels/cpu/softmax.c). Backward with public ops:
 *   softmax:     y (g - sum(g y, axis, keepdim))
 *   log_softmax: g - exp(y) sum(g, axis, keepdim) */
#include "../../kernels/cpu/softmax.h"
#include "../elementwise/elementwise_util.h"

static pd_status softmax_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                              pd_meta *out, int *n_out) {
  int ax;
  pd_status st = pd_norm_axis(def->name, a->i[0], in[0]->ndim, &ax);
  if (st != PD_OK) return st;
  return pd_meta_unary(def, in, n_in, a, out, n_out);
}

static pd_status softmax_kernel(const pd_kernel_ctx *ctx) {
  pd_tensor *x = ctx->in[0];
  int ax;
  pd_status st = pd_norm_axis(ctx->def->name, ctx->attrs->i[0], x->ndim, &ax);
  if (st != PD_OK) return st;
  if (x->dtype != PD_FLOAT32 && x->dtype != PD_FLOAT64)
    return pd_set_error(PD_ERR_DTYPE, "%s: dtype %s is not supported", ctx->def->name,
                        pd_dtype_name(x->dtype));
  if (x->numel == 0) return PD_OK;
  pd_tensor *xc = pd_kernel_contiguous(x);
  if (!xc) return pd_last_status();
  int64_t outer = 1, n = x->ndim ? x->shape[ax] : 1, inner = 1;
  for (int d = 0; d < ax; d++) outer *= x->shape[d];
  for (int d = ax + 1; d < x->ndim; d++) inner *= x->shape[d];
  bool lg = ctx->def == &pd_opdef_log_softmax;
  if (x->dtype == PD_FLOAT32)
    pdk_softmax_f32(pd_tensor_data(xc), pd_tensor_data(ctx->out[0]), outer, n, inner, lg);
  else
    pdk_softmax_f64(pd_tensor_data(xc), pd_tensor_data(ctx->out[0]), outer, n, inner, lg);
  pd_tensor_release(xc);
  return PD_OK;
}

#define K PD_K

static pd_status softmax_backward(const pd_backward_ctx *c) {
  if (!c->needs_grad[0]) return PD_OK;
  pd_tensor *g = c->grad_out[0], *y = c->outputs[0];
  int64_t axis = c->attrs->i[0];
  pd_tmps T = {0};
  pd_tensor *s = K(pd_sum(K(pd_multiply(g, y)), &axis, 1, true));
  pd_status st = pd_ew_set_grad(c, 0, pd_multiply(y, K(pd_subtract(g, s))));
  pd_tmps_free(&T);
  return st;
}

static pd_status log_softmax_backward(const pd_backward_ctx *c) {
  if (!c->needs_grad[0]) return PD_OK;
  pd_tensor *g = c->grad_out[0], *y = c->outputs[0];
  int64_t axis = c->attrs->i[0];
  pd_tmps T = {0};
  pd_tensor *s = K(pd_sum(g, &axis, 1, true));
  pd_status st = pd_ew_set_grad(c, 0, pd_subtract(g, K(pd_multiply(K(pd_exp(y)), s))));
  pd_tmps_free(&T);
  return st;
}

#define SOFTMAX_DEF(opname)                                                                                  \
  PD_OPDEF(opname, .n_in = 1, .n_out = 1,                                                                    \
           .flags = PD_OPF_DIFF | PD_OPF_FLOAT_ONLY | PD_OPF_HALF_VIA_F32 | PD_OPF_SAVE_OUT,                 \
           .attr_names = "i0:axis", .infer_meta = softmax_meta, .kernel = {[PD_PLACE_CPU] = softmax_kernel}, \
           .backward = opname##_backward, .flops = pd_flops_per_elem);
SOFTMAX_DEF(softmax)
SOFTMAX_DEF(log_softmax)

pd_tensor *pd_softmax(pd_tensor *x, int axis) {
  pd_attrs a = {.i = {axis}};
  return pd_dispatch1(PD_OP_softmax, &x, 1, &a);
}
pd_tensor *pd_log_softmax(pd_tensor *x, int axis) {
  pd_attrs a = {.i = {axis}};
  return pd_dispatch1(PD_OP_log_softmax, &x, 1, &a);
}
