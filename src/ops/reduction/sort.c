/* argsort (Paddle's op behind paddle.sort and paddle.argsort): sorted values
 * and their int64 indices along an axis. The sort is always stable; NaN
 * sorts above every number. The gradient scatters dy back through the
 * indices. */
#include "paddlec/ops.h"
#include "reduction_util.h"

/* attrs: i0 axis, i1 descending, i2 stable */
static pd_status argsort_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                              pd_meta *out, int *n_out) {
  (void)n_in;
  int ax;
  pd_values_indices_meta(in[0], out, n_out);
  return pd_norm_axis(def->name, a->i[0], in[0]->ndim, &ax);
}

static int argsort_run(const pd_kernel_ctx *ctx, const void *x, pd_dtype dt, int64_t outer, int64_t len,
                       int64_t inner) {
  return pdk_sort_run(x, dt, outer, len, inner, ctx->attrs->i[1], pd_tensor_data(ctx->out[0]),
                      pd_tensor_data(ctx->out[1]));
}

static pd_status argsort_kernel(const pd_kernel_ctx *ctx) {
  return pd_values_indices_kernel(ctx, ctx->attrs->i[0], argsort_run);
}

static pd_status argsort_backward(const pd_backward_ctx *c) {
  return pd_values_indices_backward(c, c->attrs->i[0]);
}

PD_OPDEF(argsort, .n_in = 1, .n_out = 2, .flags = PD_OPF_DIFF | PD_OPF_HALF_VIA_F32 | PD_OPF_SAVE_OUT,
         .nondiff_out = 1u << 1, .attr_names = "i0:axis,i1:descending,i2:stable", .infer_meta = argsort_meta,
         .kernel = {[PD_PLACE_CPU] = argsort_kernel}, .backward = argsort_backward);

pd_tensor *pd_sort(pd_tensor *x, int64_t axis, bool descending, bool stable) {
  pd_tensor *v = NULL;
  pd_attrs a = {.i = {axis, descending, stable}};
  pd_dispatch_pick2(PD_OP_argsort, x, &a, &v, NULL);
  return v;
}

pd_tensor *pd_argsort(pd_tensor *x, int64_t axis, bool descending, bool stable) {
  pd_tensor *ix = NULL;
  pd_attrs a = {.i = {axis, descending, stable}};
  pd_dispatch_pick2(PD_OP_argsort, x, &a, NULL, &ix);
  return ix;
}
