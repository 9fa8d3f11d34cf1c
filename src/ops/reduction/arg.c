/* argmax / argmin along one axis, or over the flattened tensor. Ties give
 * the first index; a NaN counts as the extreme (its first index). */
#include <string.h>

#include "paddlec/ops.h"
#include "reduction_util.h"

/* attrs: i0 keepdim, i1 axis, i2 flatten (axis=None), i3 int32 output */
static pd_status arg_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                          pd_meta *out, int *n_out) {
  (void)n_in;
  const pd_tensor *x = in[0];
  *n_out = 1;
  out->dtype = a->i[3] ? PD_INT32 : PD_INT64;
  out->ndim = 0;
  if (a->i[2]) {
    if (x->numel == 0)
      return pd_set_error(PD_ERR_SHAPE, "%s: x of shape %s is empty", def->name, PD_SHAPE_STR(x));
    if (a->i[0]) {
      out->ndim = x->ndim;
      for (int d = 0; d < x->ndim; d++) out->shape[d] = 1;
    }
    return PD_OK;
  }
  int ax;
  pd_status st = pd_norm_axis(def->name, a->i[1], x->ndim, &ax);
  if (st != PD_OK) return st;
  if (x->ndim > 0 && x->shape[ax] == 0)
    return pd_set_error(PD_ERR_SHAPE, "%s: axis %lld of x (shape %s) is empty", def->name, (long long)a->i[1],
                        PD_SHAPE_STR(x));
  for (int d = 0; d < x->ndim; d++) {
    if (d != ax)
      out->shape[out->ndim++] = x->shape[d];
    else if (a->i[0])
      out->shape[out->ndim++] = 1;
  }
  if (x->ndim == 0 && a->i[0]) out->shape[out->ndim++] = 1;
  return PD_OK;
}

static pd_status arg_run(const pd_op_def *def, pd_tensor *x, const pd_attrs *a, pd_tensor *out, bool is_max) {
  int64_t outer = 1, len = x->numel, inner = 1;
  if (!a->i[2]) {
    int ax;
    pd_status st = pd_norm_axis(def->name, a->i[1], x->ndim, &ax);
    if (st != PD_OK) return st;
    pd_axis_split(x->ndim, x->shape, ax, &outer, &len, &inner);
  }
  pd_tensor *xc = pd_kernel_contiguous(x);
  if (!xc) return pd_last_status();
  int r = pdk_reduce_arg(pd_tensor_data(xc), xc->dtype, outer, len, inner, is_max, pd_tensor_data(out),
                         out->dtype);
  pd_tensor_release(xc);
  if (r == 2) return pd_set_error(PD_ERR_MEMORY, "%s: out of memory", def->name);
  if (r)
    return pd_set_error(PD_ERR_DTYPE, "%s: dtype %s is not supported", def->name, pd_dtype_name(x->dtype));
  return PD_OK;
}

static pd_status argmax_kernel(const pd_kernel_ctx *ctx) {
  return arg_run(ctx->def, ctx->in[0], ctx->attrs, ctx->out[0], true);
}

static pd_status argmin_kernel(const pd_kernel_ctx *ctx) {
  return arg_run(ctx->def, ctx->in[0], ctx->attrs, ctx->out[0], false);
}

PD_OPDEF(argmax, .n_in = 1, .n_out = 1, .flags = PD_OPF_HALF_VIA_F32,
         .attr_names = "i0:keepdim,i1:axis,i2:flatten,i3:int32", .infer_meta = arg_meta,
         .kernel = {[PD_PLACE_CPU] = argmax_kernel}, .flops = pd_flops_reduce);
PD_OPDEF(argmin, .n_in = 1, .n_out = 1, .flags = PD_OPF_HALF_VIA_F32,
         .attr_names = "i0:keepdim,i1:axis,i2:flatten,i3:int32", .infer_meta = arg_meta,
         .kernel = {[PD_PLACE_CPU] = argmin_kernel}, .flops = pd_flops_reduce);

static pd_tensor *arg_call(pd_op_id id, const char *name, pd_tensor *x, int64_t axis, bool keepdim,
                           pd_dtype dtype) {
  if (dtype != PD_INT64 && dtype != PD_INT32) {
    pd_set_error(PD_ERR_DTYPE, "%s: dtype must be int32 or int64, got %s", name, pd_dtype_name(dtype));
    return NULL;
  }
  pd_attrs a = {.i = {keepdim, axis == PD_AXIS_NONE ? 0 : axis, axis == PD_AXIS_NONE, dtype == PD_INT32}};
  return pd_dispatch1(id, &x, 1, &a);
}

pd_tensor *pd_argmax(pd_tensor *x, int64_t axis, bool keepdim, pd_dtype dtype) {
  return arg_call(PD_OP_argmax, "argmax", x, axis, keepdim, dtype);
}
pd_tensor *pd_argmin(pd_tensor *x, int64_t axis, bool keepdim, pd_dtype dtype) {
  return arg_call(PD_OP_argmin, "argmin", x, axis, keepdim, dtype);
}
