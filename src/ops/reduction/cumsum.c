/* cumsum along an axis, or over the flattened tensor (axis None). The op
 * also carries Paddle's exclusive/reverse attributes; the gradient is the
 * cumsum of the output gradient in the other direction. */
#include <string.h>

#include "paddlec/ops.h"
#include "reduction_util.h"

/* attrs: i0 axis, i1 flatten, i2 exclusive, i3 reverse */
static pd_status cumsum_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                             pd_meta *out, int *n_out) {
  (void)n_in;
  const pd_tensor *x = in[0];
  *n_out = 1;
  if (x->dtype == PD_BOOL)
    return pd_set_error(PD_ERR_DTYPE, "%s: dtype bool is not supported (cast x to an integer dtype)",
                        def->name);
  pd_meta_of(x, out);
  if (a->i[1]) {
    out->ndim = 1;
    out->shape[0] = x->numel;
    return PD_OK;
  }
  int ax;
  return pd_norm_axis(def->name, a->i[0], x->ndim, &ax);
}

static pd_status cumsum_kernel(const pd_kernel_ctx *ctx) {
  pd_tensor *x = ctx->in[0];
  int64_t outer = 1, len = x->numel, inner = 1;
  if (!ctx->attrs->i[1]) {
    int ax;
    pd_status st = pd_norm_axis(ctx->def->name, ctx->attrs->i[0], x->ndim, &ax);
    if (st != PD_OK) return st;
    pd_axis_split(x->ndim, x->shape, ax, &outer, &len, &inner);
  }
  pd_tensor *xc = pd_kernel_contiguous(x);
  if (!xc) return pd_last_status();
  int r = pdk_cumsum_run(pd_tensor_data(xc), pd_tensor_data(ctx->out[0]), x->dtype, outer, len, inner,
                         ctx->attrs->i[2], ctx->attrs->i[3]);
  pd_tensor_release(xc);
  if (r)
    return pd_set_error(PD_ERR_DTYPE, "%s: dtype %s is not supported", ctx->def->name,
                        pd_dtype_name(x->dtype));
  return PD_OK;
}

static pd_status cumsum_backward(const pd_backward_ctx *c) {
  if (!c->needs_grad[0]) return PD_OK;
  pd_attrs a = *c->attrs;
  a.i[3] = !a.i[3];
  a.i[1] = 0;
  if (c->attrs->i[1]) a.i[0] = 0; /* the gradient of a flattened cumsum is 1-D */
  pd_tensor *g = c->grad_out[0];
  pd_tensor *r = pd_dispatch1(PD_OP_cumsum, &g, 1, &a);
  if (r && c->attrs->i[1]) {
    pd_tensor *s = pd_reshape(r, c->in_meta[0].ndim, c->in_meta[0].shape);
    pd_tensor_release(r);
    r = s;
  }
  c->grad_in[0] = r;
  return r ? PD_OK : pd_last_status();
}

PD_OPDEF(cumsum, .n_in = 1, .n_out = 1, .flags = PD_OPF_DIFF | PD_OPF_HALF_VIA_F32,
         .attr_names = "i0:axis,i1:flatten,i2:exclusive,i3:reverse", .infer_meta = cumsum_meta,
         .kernel = {[PD_PLACE_CPU] = cumsum_kernel}, .backward = cumsum_backward, .flops = pd_flops_reduce);

pd_tensor *pd_cumsum(pd_tensor *x, int64_t axis, pd_dtype dtype) {
  pd_attrs a = {.i = {axis == PD_AXIS_NONE ? 0 : axis, axis == PD_AXIS_NONE}};
  if (!x || dtype == PD_NUM_DTYPES || dtype == x->dtype) return pd_dispatch1(PD_OP_cumsum, &x, 1, &a);
  if ((unsigned)dtype >= PD_NUM_DTYPES) {
    pd_set_error(PD_ERR_DTYPE, "cumsum: invalid dtype %d", (int)dtype);
    return NULL;
  }
  pd_internal_enter();
  pd_tensor *xc = pd_cast(x, dtype);
  pd_internal_leave();
  pd_tensor *r = pd_dispatch1(PD_OP_cumsum, &xc, 1, &a);
  pd_tensor_release(xc);
  return r;
}
