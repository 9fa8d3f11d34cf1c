/* all / any over axes: bool outputs, any input dtype (non-zero is true). */
#include "paddlec/ops.h"
#include "reduction_util.h"

static pd_status logic_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                            pd_meta *out, int *n_out) {
  pd_status st = pd_reduce_infer_meta(def, in, n_in, a, out, n_out);
  out->dtype = PD_BOOL;
  return st;
}

static pd_status all_kernel(const pd_kernel_ctx *ctx) {
  return pd_reduce_kernel_run(ctx, &(pd_reduce_spec){.kind = PD_RK_ALL});
}

static pd_status any_kernel(const pd_kernel_ctx *ctx) {
  return pd_reduce_kernel_run(ctx, &(pd_reduce_spec){.kind = PD_RK_ANY});
}

PD_OPDEF(all, .n_in = 1, .n_out = 1, .flags = PD_OPF_HALF_VIA_F32, .attr_names = "v0:axis,i0:keepdim",
         .infer_meta = logic_meta, .kernel = {[PD_PLACE_CPU] = all_kernel}, .flops = pd_flops_reduce);
PD_OPDEF(any, .n_in = 1, .n_out = 1, .flags = PD_OPF_HALF_VIA_F32, .attr_names = "v0:axis,i0:keepdim",
         .infer_meta = logic_meta, .kernel = {[PD_PLACE_CPU] = any_kernel}, .flops = pd_flops_reduce);

pd_tensor *pd_all(pd_tensor *x, const int64_t *axis, int naxis, bool keepdim) {
  return pd_reduce_call(PD_OP_all, "all", x, axis, naxis, keepdim, NULL);
}
pd_tensor *pd_any(pd_tensor *x, const int64_t *axis, int naxis, bool keepdim) {
  return pd_reduce_call(PD_OP_any, "any", x, axis, naxis, keepdim, NULL);
}
