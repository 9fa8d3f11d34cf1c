/* sum over axes (all when none given). */
#include <string.h>

#include "paddlec/ops.h"
#include "../reduction/reduction_util.h"

static pd_status sum_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                          pd_meta *out, int *n_out) {
  pd_status st = pd_reduce_infer_meta(def, in, n_in, a, out, n_out);
  if (a->i[1])
    out->dtype = a->dtype;
  else if (in[0]->dtype == PD_BOOL || in[0]->dtype == PD_INT32 || in[0]->dtype == PD_UINT8 ||
           in[0]->dtype == PD_INT8 || in[0]->dtype == PD_INT16)
    out->dtype = PD_INT64; /* Paddle sums bool and small ints into int64 */
  return st;
}

static pd_status sum_kernel(const pd_kernel_ctx *ctx) {
  return pd_reduce_kernel_run(ctx, &(pd_reduce_spec){.kind = PD_RK_SUM});
}

static pd_status sum_backward(const pd_backward_ctx *c) {
  if (!c->needs_grad[0]) return PD_OK;
  const pd_meta *xm = &c->in_meta[0];
  pd_tensor *g = c->grad_out[0];
  bool mask[PD_MAX_DIMS];
  pd_reduce_mask(xm->ndim, c->attrs, mask);
  pd_tensor *e = pd_reduce_expand_to(g, xm, mask);
  if (e && e->dtype != xm->dtype) {
    pd_tensor *cst = pd_cast(e, xm->dtype);
    pd_tensor_release(e);
    e = cst;
  }
  c->grad_in[0] = e;
  return e ? PD_OK : pd_last_status();
}

PD_OPDEF(sum, .n_in = 1, .n_out = 1, .flags = PD_OPF_DIFF | PD_OPF_HALF_VIA_F32,
         .attr_names = "v0:axis,i0:keepdim,i1:has_dtype,dtype", .infer_meta = sum_meta,
         .kernel = {[PD_PLACE_CPU] = sum_kernel}, .backward = sum_backward, .flops = pd_flops_reduce);

pd_tensor *pd_sum(pd_tensor *x, const int64_t *axis, int naxis, bool keepdim) {
  return pd_reduce_call(PD_OP_sum, "sum", x, axis, naxis, keepdim, NULL);
}
