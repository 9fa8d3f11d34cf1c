/* squared_l2_norm: sum(x^2) as a 0-D tensor, accumulated in double (what
 * the gradient clippings reduce). float16/bfloat16/float32 give float32,
 * float64 gives float64. Not differentiable here: clipping runs without
 * recording. */
#include "optim_util.h"
#include "paddlec/manipulation.h"

static pd_status sqnorm_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                             pd_meta *out, int *n_out) {
  (void)n_in;
  (void)a;
  if (!pd_dtype_is_floating(in[0]->dtype))
    return pd_set_error(PD_ERR_DTYPE, "%s: x must be a floating dtype, got %s", def->name,
                        pd_dtype_name(in[0]->dtype));
  out[0].dtype = in[0]->dtype == PD_FLOAT64 ? PD_FLOAT64 : PD_FLOAT32;
  out[0].ndim = 0;
  *n_out = 1;
  return PD_OK;
}

static pd_status sqnorm_kernel(const pd_kernel_ctx *ctx) {
  pd_tensor *x = ctx->in[0];
  pd_tensor *c = x->is_contiguous ? pd_tensor_retain(x) : pd_contiguous(x);
  if (!c) return pd_last_status();
  double s = pdk_optim_sum_squares(pd_data_ptr(c), c->dtype, c->numel);
  pd_tensor_release(c);
  pd_store_from_f64(pd_data_ptr(ctx->out[0]), ctx->out[0]->dtype, s);
  return PD_OK;
}

PD_OPDEF(squared_l2_norm, .n_in = 1, .n_out = 1, .flags = 0, .attr_names = "", .infer_meta = sqnorm_meta,
         .kernel = {[PD_PLACE_CPU] = sqnorm_kernel}, .flops = NULL);
