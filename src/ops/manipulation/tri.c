/* tril / triu: keep the lower / upper triangle of the last two dims. */
#include "manipulation_util.h"
#include "paddlec/ops.h"

static pd_status tri_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                          pd_meta *out, int *n_out) {
  (void)n_in;
  (void)a;
  if (in[0]->ndim < 2)
    return pd_set_error(PD_ERR_SHAPE, "%s: x must have at least 2 dims, got shape %s", def->name,
                        PD_SHAPE_STR(in[0]));
  pd_meta_of(in[0], out);
  *n_out = 1;
  return PD_OK;
}

static pd_status tri_kernel(const pd_kernel_ctx *ctx) {
  pd_tensor *o = ctx->out[0];
  if (o->numel == 0) return PD_OK;
  pd_mu_copy_into(o, ctx->in[0]);
  int64_t rows = o->shape[o->ndim - 2], cols = o->shape[o->ndim - 1];
  pdk_tri_zero(pd_tensor_data(o), o->numel / (rows * cols), rows, cols, ctx->attrs->i[0],
               ctx->def->name[3] == 'l', (int64_t)pd_dtype_size(o->dtype));
  return PD_OK;
}

static pd_status tril_backward(const pd_backward_ctx *c) {
  if (!c->needs_grad[0]) return PD_OK;
  c->grad_in[0] = pd_tril(c->grad_out[0], c->attrs->i[0]);
  return c->grad_in[0] ? PD_OK : pd_last_status();
}

static pd_status triu_backward(const pd_backward_ctx *c) {
  if (!c->needs_grad[0]) return PD_OK;
  c->grad_in[0] = pd_triu(c->grad_out[0], c->attrs->i[0]);
  return c->grad_in[0] ? PD_OK : pd_last_status();
}

PD_OPDEF(tril, .n_in = 1, .n_out = 1, .flags = PD_OPF_DIFF, .attr_names = "i0:diagonal",
         .infer_meta = tri_meta, .kernel = {[PD_PLACE_CPU] = tri_kernel}, .backward = tril_backward);
PD_OPDEF(triu, .n_in = 1, .n_out = 1, .flags = PD_OPF_DIFF, .attr_names = "i0:diagonal",
         .infer_meta = tri_meta, .kernel = {[PD_PLACE_CPU] = tri_kernel}, .backward = triu_backward);

pd_tensor *pd_tril(pd_tensor *x, int64_t diagonal) {
  pd_attrs a = {.i = {diagonal}};
  return pd_dispatch1(PD_OP_tril, &x, 1, &a);
}

pd_tensor *pd_triu(pd_tensor *x, int64_t diagonal) {
  pd_attrs a = {.i = {diagonal}};
  return pd_dispatch1(PD_OP_triu, &x, 1, &a);
}
