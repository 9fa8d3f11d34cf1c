/* assign: a differentiable copy into a new contiguous tensor. */
#include "manipulation_util.h"
#include "paddlec/ops.h"

static pd_status assign_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                             pd_meta *out, int *n_out) {
  (void)def;
  (void)n_in;
  (void)a;
  pd_meta_of(in[0], out);
  *n_out = 1;
  return PD_OK;
}

static pd_status assign_kernel(const pd_kernel_ctx *ctx) {
  pd_mu_copy_into(ctx->out[0], ctx->in[0]);
  return PD_OK;
}

static pd_status assign_backward(const pd_backward_ctx *c) {
  if (c->needs_grad[0]) c->grad_in[0] = pd_tensor_retain(c->grad_out[0]);
  return PD_OK;
}

PD_OPDEF(assign, .attr_names = "", .n_in = 1, .n_out = 1, .flags = PD_OPF_DIFF, .infer_meta = assign_meta,
         .kernel = {[PD_PLACE_CPU] = assign_kernel}, .backward = assign_backward);

pd_tensor *pd_assign(pd_tensor *x) { return pd_dispatch1(PD_OP_assign, &x, 1, NULL); }

/* copy_(x, src): src's values written into x (Tensor.copy_, set_value):
 * src broadcast to x's shape and converted to x's dtype; x keeps its
 * storage and layout. Loading a state dict, an initializer's values and an
 * optimizer's restored accumulators reach their tensors through it. */
static pd_status copy__meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                            pd_meta *out, int *n_out) {
  (void)n_in;
  (void)a;
  const pd_tensor *x = in[0], *src = in[1];
  int nb;
  int64_t shape[PD_MAX_DIMS];
  pd_status st = pd_broadcast_shapes(def->name, x->ndim, x->shape, src->ndim, src->shape, &nb, shape);
  if (st == PD_OK && (nb != x->ndim || !pd_shapes_agree(nb, shape, x->shape)))
    st = pd_set_error(PD_ERR_SHAPE, "%s: src of shape %s does not broadcast to x's shape %s", def->name,
                      PD_SHAPE_STR(src), PD_SHAPE_STR(x));
  if (st != PD_OK) return st;
  pd_meta_of(x, out);
  *n_out = 1;
  return PD_OK;
}

static pd_status copy__kernel(const pd_kernel_ctx *c) {
  pd_tensor *x = c->in[0], *src = c->in[1];
  if (x->numel == 0) return PD_OK;
  /* a src that shares x's memory is read whole before x is written */
  pd_tensor *s =
      src->dtype != x->dtype || src->storage == x->storage ? pd_clone(src, x->dtype) : pd_tensor_retain(src);
  if (s && (s->ndim != x->ndim || !pd_shape_eq(x->ndim, s->shape, x->shape))) {
    pd_tensor *e = pd_expand(s, x->ndim, x->shape);
    pd_tensor_release(s);
    s = e;
  }
  if (!s) return pd_last_status();
  pdk_copy(x->ndim, x->shape, pd_data_ptr(x), x->strides, pd_data_ptr(s), s->strides,
           (int64_t)pd_dtype_size(x->dtype));
  pd_tensor_release(s);
  return PD_OK;
}

PD_OPDEF(copy_, .n_in = 2, .n_out = 1, .flags = PD_OPF_INPLACE, .attr_names = "", .infer_meta = copy__meta,
         .kernel = {[PD_PLACE_CPU] = copy__kernel});
