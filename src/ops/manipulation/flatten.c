/* flatten (a view when the merged dims allow it) and the inplace reshape_. */
#include <string.h>

#include "manipulation_util.h"
#include "paddlec/ops.h"

/* ---- flatten ----------------------------------------------------------------- */

static pd_status flatten_range(const char *op, const pd_tensor *x, const pd_attrs *a, int *s, int *e) {
  pd_status st = pd_norm_axis(op, a->i[0], x->ndim, s);
  if (st == PD_OK) st = pd_norm_axis(op, a->i[1], x->ndim, e);
  if (st != PD_OK) return st;
  if (*s > *e)
    return pd_set_error(PD_ERR_INVALID, "%s: start_axis %lld must not come after stop_axis %lld (rank %d)",
                        op, (long long)a->i[0], (long long)a->i[1], x->ndim);
  return PD_OK;
}

static pd_status flatten_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                              pd_meta *out, int *n_out) {
  (void)n_in;
  const pd_tensor *x = in[0];
  int s, e;
  pd_status st = flatten_range(def->name, x, a, &s, &e);
  if (st != PD_OK) return st;
  out->dtype = x->dtype;
  *n_out = 1;
  if (x->ndim == 0) {
    out->ndim = 1;
    out->shape[0] = 1;
    return PD_OK;
  }
  out->ndim = 0;
  for (int d = 0; d < s; d++) out->shape[out->ndim++] = x->shape[d];
  int64_t m = 1;
  for (int d = s; d <= e; d++) m = pd_dim_mul(m, x->shape[d]);
  out->shape[out->ndim++] = m;
  for (int d = e + 1; d < x->ndim; d++) out->shape[out->ndim++] = x->shape[d];
  return PD_OK;
}

/* Whether dims s..e merge into one strided dim; writes its stride. */
static bool mergeable(const pd_tensor *x, int s, int e, int64_t *stride) {
  int last = -1;
  *stride = 1;
  for (int d = e; d >= s; d--) {
    if (x->shape[d] == 1) continue;
    if (last >= 0 && x->strides[d] != x->strides[last] * x->shape[last]) return false;
    if (last < 0) *stride = x->strides[d];
    last = d;
  }
  return true;
}

static pd_status flatten_kernel(const pd_kernel_ctx *ctx) {
  const pd_meta *m = &ctx->meta[0];
  int s = 0, e = 0;
  pd_tensor *x = ctx->in[0];
  int64_t strides[PD_MAX_DIMS], ms;
  if (x->ndim > 0) flatten_range(ctx->def->name, x, ctx->attrs, &s, &e);
  if (x->ndim == 0 || x->is_contiguous || x->numel == 0 || !mergeable(x, s, e, &ms)) {
    pd_tensor *c = pd_kernel_contiguous(x);
    if (!c) return pd_last_status();
    ctx->out[0] = pd_tensor_new_view(c, m->ndim, m->shape, NULL, c->offset);
    pd_tensor_release(c);
  } else {
    int k = 0;
    for (int d = 0; d < s; d++) strides[k++] = x->strides[d];
    strides[k++] = ms;
    for (int d = e + 1; d < x->ndim; d++) strides[k++] = x->strides[d];
    ctx->out[0] = pd_tensor_new_view(x, m->ndim, m->shape, strides, x->offset);
  }
  return ctx->out[0] ? PD_OK : pd_last_status();
}

static pd_status flatten_backward(const pd_backward_ctx *c) {
  if (!c->needs_grad[0]) return PD_OK;
  c->grad_in[0] = pd_reshape(c->grad_out[0], c->in_meta[0].ndim, c->in_meta[0].shape);
  return c->grad_in[0] ? PD_OK : pd_last_status();
}

PD_OPDEF(flatten, .n_in = 1, .n_out = 1, .flags = PD_OPF_DIFF | PD_OPF_VIEW,
         .attr_names = "i0:start_axis,i1:stop_axis", .infer_meta = flatten_meta,
         .kernel = {[PD_PLACE_CPU] = flatten_kernel}, .backward = flatten_backward);

pd_tensor *pd_flatten(pd_tensor *x, int64_t start_axis, int64_t stop_axis) {
  pd_attrs a = {.i = {start_axis, stop_axis}};
  return pd_dispatch1(PD_OP_flatten, &x, 1, &a);
}

/* ---- reshape_ ---------------------------------------------------------------- */

static pd_status reshape__meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                               pd_meta *out, int *n_out) {
  (void)n_in;
  out->dtype = in[0]->dtype;
  out->ndim = a->nv[0];
  *n_out = 1;
  return pd_resolve_shape(def->name, in[0], a->nv[0], a->v[0], out->shape);
}

static pd_status reshape__kernel(const pd_kernel_ctx *ctx) {
  pd_tensor *x = ctx->in[0];
  int64_t shape[PD_MAX_DIMS];
  pd_status st = pd_resolve_shape(ctx->def->name, x, ctx->attrs->nv[0], ctx->attrs->v[0], shape);
  if (st != PD_OK) return st;
  pd_tensor *c = pd_kernel_contiguous(x);
  if (!c) return pd_last_status();
  pd_tensor *v = pd_tensor_new_view(c, ctx->attrs->nv[0], shape, NULL, c->offset);
  pd_tensor_release(c);
  if (!v) return pd_last_status();
  pd_mu_become(x, v, true);
  return PD_OK;
}

PD_OPDEF(reshape_, .n_in = 1, .n_out = 1, .flags = PD_OPF_INPLACE | PD_OPF_GEOMETRY, .attr_names = "v0:shape",
         .infer_meta = reshape__meta, .kernel = {[PD_PLACE_CPU] = reshape__kernel});

pd_tensor *pd_reshape_(pd_tensor *x, int ndim, const int64_t *shape) {
  pd_attrs a = {0};
  if (pd_mu_set_list("reshape_", "shape", &a, 0, ndim, shape) != PD_OK) return NULL;
  return pd_mu_inplace_view(PD_OP_reshape, PD_OP_reshape_, x, &a);
}
