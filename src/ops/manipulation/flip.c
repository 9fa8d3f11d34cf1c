/* flip: reverses the order of elements along axes (a strided copy with
 * negative source strides). */
#include "manipulation_util.h"
#include "paddlec/ops.h"

static pd_status flip_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                           pd_meta *out, int *n_out) {
  (void)n_in;
  int ax[PD_MAX_DIMS];
  bool mask[PD_MAX_DIMS];
  pd_meta_of(in[0], out);
  *n_out = 1;
  return pd_mu_axes(def->name, a->nv[0], a->v[0], in[0]->ndim, ax, mask);
}

static pd_status flip_kernel(const pd_kernel_ctx *ctx) {
  pd_tensor *x = ctx->in[0], *o = ctx->out[0];
  int ax[PD_MAX_DIMS];
  bool mask[PD_MAX_DIMS];
  pd_status st = pd_mu_axes(ctx->def->name, ctx->attrs->nv[0], ctx->attrs->v[0], x->ndim, ax, mask);
  if (st != PD_OK) return st;
  if (o->numel == 0) return PD_OK;
  int64_t es = (int64_t)pd_dtype_size(x->dtype), off = 0, src[PD_MAX_DIMS];
  for (int d = 0; d < x->ndim; d++) {
    src[d] = mask[d] ? -x->strides[d] : x->strides[d];
    if (mask[d]) off += (x->shape[d] - 1) * x->strides[d];
  }
  pdk_copy(x->ndim, x->shape, pd_tensor_data(o), o->strides, (char *)pd_tensor_data(x) + off * es, src, es);
  return PD_OK;
}

static pd_status flip_backward(const pd_backward_ctx *c) {
  if (!c->needs_grad[0]) return PD_OK;
  c->grad_in[0] = pd_flip(c->grad_out[0], c->attrs->nv[0], c->attrs->v[0]);
  return c->grad_in[0] ? PD_OK : pd_last_status();
}

PD_OPDEF(flip, .n_in = 1, .n_out = 1, .flags = PD_OPF_DIFF, .attr_names = "v0:axis", .infer_meta = flip_meta,
         .kernel = {[PD_PLACE_CPU] = flip_kernel}, .backward = flip_backward);

pd_tensor *pd_flip(pd_tensor *x, int naxes, const int64_t *axes) {
  pd_attrs a = {0};
  if (pd_mu_set_list("flip", "axis", &a, 0, naxes, axes) != PD_OK) return NULL;
  return pd_dispatch1(PD_OP_flip, &x, 1, &a);
}
