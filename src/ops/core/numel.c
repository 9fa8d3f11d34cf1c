/* numel (paddle.numel, fluid.layers.size): the element count of x as an
 * int64 0-D tensor. An op, not a read of x->numel, so a Program whose batch
 * is unknown (-1) computes it when it runs. */
#include "../op_registry.h"
#include "paddlec/math.h"

static pd_status numel_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                            pd_meta *out, int *n_out) {
  (void)def, (void)in, (void)n_in, (void)a;
  out[0].dtype = PD_INT64;
  out[0].ndim = 0;
  *n_out = 1;
  return PD_OK;
}

static pd_status numel_kernel(const pd_kernel_ctx *ctx) {
  *(int64_t *)pd_tensor_data(ctx->out[0]) = ctx->in[0]->numel;
  return PD_OK;
}

const pd_op_def pd_opdef_numel = {.name = "numel",
                                  .n_in = 1,
                                  .n_out = 1,
                                  .attr_names = "",
                                  .infer_meta = numel_meta,
                                  .kernel = {[PD_PLACE_CPU] = numel_kernel}};

pd_tensor *pd_numel(pd_tensor *x) {
  if (!x) {
    if (pd_last_status() == PD_OK) pd_set_error(PD_ERR_INVALID, "numel: x is NULL");
    return NULL;
  }
  return pd_dispatch1(PD_OP_numel, &x, 1, NULL);
}
