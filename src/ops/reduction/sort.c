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
  *n_out = 2;
  pd_status st = pd_norm_axis(def->name, a->i[0], in[0]->ndim, &ax);
  pd_meta_of(in[0], &out[0]);
  out[1] = out[0];
  out[1].dtype = PD_INT64;
  return st;
}

static pd_status argsort_kernel(const pd_kernel_ctx *ctx) {
  int ax;
  pd_status st = pd_norm_axis(ctx->def->name, ctx->attrs->i[0], ctx->in[0]->ndim, &ax);
  if (st != PD_OK) return st;
  int64_t outer, len, inner;
  pd_axis_split(ctx->in[0]->ndim, ctx->in[0]->shape, ax, &outer, &len, &inner);
  pd_tensor *xc = pd_kernel_contiguous(ctx->in[0]);
  if (!xc) return pd_last_status();
  int r = pdk_sort_run(pd_tensor_data(xc), xc->dtype, outer, len, inner, ctx->attrs->i[1],
                       pd_tensor_data(ctx->out[0]), pd_tensor_data(ctx->out[1]));
  pd_tensor_release(xc);
  if (r == 2) return pd_set_error(PD_ERR_MEMORY, "%s: out of memory", ctx->def->name);
  if (r)
    return pd_set_error(PD_ERR_DTYPE, "%s: dtype %s is not supported", ctx->def->name,
                        pd_dtype_name(ctx->in[0]->dtype));
  return PD_OK;
}

static pd_status argsort_backward(const pd_backward_ctx *c) {
  if (!c->needs_grad[0]) return PD_OK;
  c->grad_in[0] = pd_scatter_along(c->grad_out[0], c->outputs[1], c->attrs->i[0], c->in_meta[0].ndim,
                                   c->in_meta[0].shape);
  return c->grad_in[0] ? PD_OK : pd_last_status();
}

const pd_op_def pd_opdef_argsort = {.name = "argsort",
                                    .n_in = 1,
                                    .n_out = 2,
                                    .flags = PD_OPF_DIFF | PD_OPF_HALF_VIA_F32 | PD_OPF_SAVE_OUT,
                                    .nondiff_out = 1u << 1,
                                    .attr_names = "i0:axis,i1:descending,i2:stable",
                                    .infer_meta = argsort_meta,
                                    .kernel = {[PD_PLACE_CPU] = argsort_kernel},
                                    .backward = argsort_backward};

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
