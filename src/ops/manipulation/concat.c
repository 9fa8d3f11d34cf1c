/* concat and stack: variadic inputs copied into one output by the strided
 * copy kernel (any input layout). */
#include <string.h>

#include "../../core/shape_check.h"
#include "manipulation_util.h"
#include "paddlec/ops.h"

static pd_status same_dtype(const pd_op_def *def, pd_tensor *const *in, int n_in) {
  if (n_in < 1)
    return pd_set_error(PD_ERR_INVALID, "%s: needs at least one input tensor, got %d", def->name, n_in);
  for (int i = 1; i < n_in; i++)
    if (in[i]->dtype != in[0]->dtype)
      return pd_set_error(PD_ERR_DTYPE, "%s: input %d has dtype %s but input 0 has dtype %s", def->name, i,
                          pd_dtype_name(in[i]->dtype), pd_dtype_name(in[0]->dtype));
  return PD_OK;
}

/* ---- concat ------------------------------------------------------------------ */

static pd_status concat_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                             pd_meta *out, int *n_out) {
  pd_status st = same_dtype(def, in, n_in);
  if (st != PD_OK) return st;
  const pd_tensor *x0 = in[0];
  if (x0->ndim == 0)
    return pd_set_error(PD_ERR_SHAPE, "%s: input 0 is 0-D; 0-D tensors cannot be concatenated", def->name);
  int ax;
  if ((st = pd_norm_axis(def->name, a->i[0], x0->ndim, &ax)) != PD_OK) return st;
  pd_meta_of(x0, out);
  for (int i = 1; i < n_in; i++) {
    const pd_tensor *t = in[i];
    bool ok = t->ndim == x0->ndim;
    for (int d = 0; ok && d < t->ndim; d++) ok = d == ax || pd_dims_agree(t->shape[d], out->shape[d]);
    if (!ok)
      return pd_set_error(PD_ERR_SHAPE,
                          "%s: input %d has shape %s but input 0 has shape %s; they must match "
                          "except along axis %d",
                          def->name, i, PD_SHAPE_STR(t), PD_SHAPE_STR(x0), ax);
    for (int d = 0; d < t->ndim; d++)
      if (d != ax) out->shape[d] = pd_dim_merge(out->shape[d], t->shape[d]);
    if (!pd_dim_known(out->shape[ax]) || !pd_dim_known(t->shape[ax]))
      out->shape[ax] = PD_DIM_UNKNOWN;
    else if (pd_add_overflow(out->shape[ax], t->shape[ax], &out->shape[ax]))
      return pd_set_error(PD_ERR_SHAPE,
                          "%s: the sizes along axis %d add up to more than INT64_MAX (input %d: %s)",
                          def->name, ax, i, PD_SHAPE_STR(t));
  }
  *n_out = 1;
  return PD_OK;
}

static pd_status concat_kernel(const pd_kernel_ctx *ctx) {
  int ax;
  pd_status st = pd_norm_axis(ctx->def->name, ctx->attrs->i[0], ctx->in[0]->ndim, &ax);
  if (st != PD_OK) return st;
  pd_tensor *o = ctx->out[0];
  int64_t es = (int64_t)pd_dtype_size(o->dtype), off = 0;
  char *base = pd_tensor_data(o);
  for (int i = 0; i < ctx->n_in; i++) {
    pdk_copy(ctx->in[i]->ndim, ctx->in[i]->shape, base + off * o->strides[ax] * es, o->strides,
             pd_tensor_data(ctx->in[i]), ctx->in[i]->strides, es);
    off += ctx->in[i]->shape[ax];
  }
  return PD_OK;
}

static pd_status concat_backward(const pd_backward_ctx *c) {
  const pd_meta *m0 = &c->in_meta[0];
  int64_t ax = c->attrs->i[0] < 0 ? c->attrs->i[0] + m0->ndim : c->attrs->i[0], off = 0;
  for (int i = 0; i < c->n_in; i++) {
    int64_t len = c->in_meta[i].shape[ax];
    if (c->needs_grad[i]) {
      int64_t e = off + len;
      c->grad_in[i] = pd_slice(c->grad_out[0], 1, &ax, &off, &e);
      if (!c->grad_in[i]) return pd_last_status();
    }
    off += len;
  }
  return PD_OK;
}

PD_OPDEF(concat, .n_in = -1, .n_out = 1, .flags = PD_OPF_DIFF, .attr_names = "i0:axis",
         .infer_meta = concat_meta, .kernel = {[PD_PLACE_CPU] = concat_kernel}, .backward = concat_backward);

pd_tensor *pd_concat(pd_tensor *const *xs, int n, int64_t axis) {
  if (n < 1 || !xs) {
    pd_set_error(PD_ERR_INVALID, "concat: needs at least one input tensor, got %d", xs ? n : 0);
    return NULL;
  }
  pd_attrs a = {.i = {axis}};
  return pd_dispatch1(PD_OP_concat, xs, n, &a);
}

/* ---- stack ------------------------------------------------------------------- */

static pd_status stack_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                            pd_meta *out, int *n_out) {
  pd_status st = same_dtype(def, in, n_in);
  if (st != PD_OK) return st;
  const pd_tensor *x0 = in[0];
  for (int i = 1; i < n_in; i++) {
    const pd_tensor *t = in[i];
    if (t->ndim != x0->ndim || !pd_shapes_agree(t->ndim, t->shape, x0->shape))
      return pd_set_error(PD_ERR_SHAPE,
                          "%s: input %d has shape %s but input 0 has shape %s; all inputs must "
                          "have the same shape",
                          def->name, i, PD_SHAPE_STR(t), PD_SHAPE_STR(x0));
  }
  if (x0->ndim + 1 > PD_MAX_DIMS)
    return pd_set_error(PD_ERR_INVALID, "%s: the output rank %d exceeds the maximum %d", def->name,
                        x0->ndim + 1, PD_MAX_DIMS);
  int ax;
  if ((st = pd_norm_axis(def->name, a->i[0], x0->ndim + 1, &ax)) != PD_OK) return st;
  out->dtype = x0->dtype;
  out->ndim = x0->ndim + 1;
  for (int d = 0, k = 0; d < out->ndim; d++) {
    if (d == ax) {
      out->shape[d] = n_in;
      continue;
    }
    out->shape[d] = x0->shape[k];
    for (int i = 1; i < n_in; i++) /* an unknown dim of input 0 may be known in another */
      out->shape[d] = pd_dim_merge(out->shape[d], in[i]->shape[k]);
    k++;
  }
  *n_out = 1;
  return PD_OK;
}

static pd_status stack_kernel(const pd_kernel_ctx *ctx) {
  int ax;
  pd_status st = pd_norm_axis(ctx->def->name, ctx->attrs->i[0], ctx->in[0]->ndim + 1, &ax);
  if (st != PD_OK) return st;
  pd_tensor *o = ctx->out[0];
  int64_t es = (int64_t)pd_dtype_size(o->dtype), dst[PD_MAX_DIMS];
  for (int d = 0, k = 0; d < o->ndim; d++)
    if (d != ax) dst[k++] = o->strides[d];
  char *base = pd_tensor_data(o);
  for (int i = 0; i < ctx->n_in; i++)
    pdk_copy(ctx->in[i]->ndim, ctx->in[i]->shape, base + i * o->strides[ax] * es, dst,
             pd_tensor_data(ctx->in[i]), ctx->in[i]->strides, es);
  return PD_OK;
}

static pd_status stack_backward(const pd_backward_ctx *c) {
  const pd_meta *m0 = &c->in_meta[0];
  int64_t ax = c->attrs->i[0] < 0 ? c->attrs->i[0] + m0->ndim + 1 : c->attrs->i[0];
  for (int64_t i = 0; i < c->n_in; i++) {
    if (!c->needs_grad[i]) continue;
    int64_t e = i + 1;
    pd_tensor *s = pd_slice(c->grad_out[0], 1, &ax, &i, &e);
    c->grad_in[i] = s ? pd_reshape(s, m0->ndim, m0->shape) : NULL;
    pd_tensor_release(s);
    if (!c->grad_in[i]) return pd_last_status();
  }
  return PD_OK;
}

PD_OPDEF(stack, .n_in = -1, .n_out = 1, .flags = PD_OPF_DIFF, .attr_names = "i0:axis",
         .infer_meta = stack_meta, .kernel = {[PD_PLACE_CPU] = stack_kernel}, .backward = stack_backward);

pd_tensor *pd_stack(pd_tensor *const *xs, int n, int64_t axis) {
  if (n < 1 || !xs) {
    pd_set_error(PD_ERR_INVALID, "stack: needs at least one input tensor, got %d", xs ? n : 0);
    return NULL;
  }
  pd_attrs a = {.i = {axis}};
  return pd_dispatch1(PD_OP_stack, xs, n, &a);
}
