/* topk along an axis: values and int64 indices of the k largest (or
 * smallest) elements, best first. NaN counts as the largest value; equal
 * values come in index order. The gradient scatters dy back through the
 * indices. */
#include "paddlec/ops.h"
#include "reduction_util.h"

/* attrs: i0 k, i1 axis, i2 largest, i3 sorted (results are always sorted) */
static pd_status topk_check(const pd_op_def *def, const pd_tensor *x, const pd_attrs *a, int *ax) {
  pd_status st = pd_norm_axis(def->name, a->i[1], x->ndim, ax);
  if (st != PD_OK) return st;
  int64_t n = x->ndim > 0 ? x->shape[*ax] : 1;
  if (a->i[0] < 1)
    return pd_set_error(PD_ERR_INVALID, "%s: k must be >= 1, got k = %lld", def->name, (long long)a->i[0]);
  if (a->i[0] > n && pd_dim_known(n))
    return pd_set_error(PD_ERR_INVALID, "%s: k = %lld is larger than the size %lld of axis %lld (x shape %s)",
                        def->name, (long long)a->i[0], (long long)n, (long long)a->i[1], PD_SHAPE_STR(x));
  return PD_OK;
}

static pd_status topk_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                           pd_meta *out, int *n_out) {
  (void)n_in;
  int ax;
  pd_status st = topk_check(def, in[0], a, &ax);
  if (st != PD_OK) return st;
  pd_values_indices_meta(in[0], out, n_out);
  if (in[0]->ndim > 0) out[0].shape[ax] = out[1].shape[ax] = a->i[0];
  return PD_OK;
}

static int topk_run(const pd_kernel_ctx *ctx, const void *x, pd_dtype dt, int64_t outer, int64_t len,
                    int64_t inner) {
  return pdk_topk_run(x, dt, outer, len, inner, ctx->attrs->i[0], ctx->attrs->i[2],
                      pd_tensor_data(ctx->out[0]), pd_tensor_data(ctx->out[1]));
}

static pd_status topk_kernel(const pd_kernel_ctx *ctx) {
  return pd_values_indices_kernel(ctx, ctx->attrs->i[1], topk_run);
}

static pd_status topk_backward(const pd_backward_ctx *c) {
  return pd_values_indices_backward(c, c->attrs->i[1]);
}

PD_OPDEF(topk, .n_in = 1, .n_out = 2, .flags = PD_OPF_DIFF | PD_OPF_HALF_VIA_F32 | PD_OPF_SAVE_OUT,
         .nondiff_out = 1u << 1, .attr_names = "i0:k,i1:axis,i2:largest,i3:sorted", .infer_meta = topk_meta,
         .kernel = {[PD_PLACE_CPU] = topk_kernel}, .backward = topk_backward);

pd_status pd_topk(pd_tensor *x, int64_t k, int64_t axis, bool largest, bool sorted, pd_tensor **values,
                  pd_tensor **indices) {
  pd_attrs a = {.i = {k, axis, largest, sorted}};
  return pd_dispatch_pick2(PD_OP_topk, x, &a, values, indices);
}
