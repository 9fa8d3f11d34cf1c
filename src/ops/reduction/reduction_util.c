/* Shared glue of the reduction family (see reduction/reduction_util.h). */
#include <math.h>
#include <string.h>

#include "../ew_util.h"
#include "paddlec/ops.h"
#include "reduction_util.h"

pd_status pd_reduce_meta(const pd_op_def *def, const pd_tensor *x, const pd_attrs *a, pd_meta *out,
                         bool *mask) {
  int nd = x->ndim;
  if (a->nv[0] < 0 || a->nv[0] > PD_MAX_DIMS)
    return pd_set_error(PD_ERR_INVALID, "%s: %d axes given (at most %d)", def->name, a->nv[0], PD_MAX_DIMS);
  for (int d = 0; d < PD_MAX_DIMS; d++) mask[d] = a->nv[0] == 0;
  bool seen[PD_MAX_DIMS] = {0};
  for (int k = 0; k < a->nv[0]; k++) {
    int ax;
    pd_status st = pd_norm_axis(def->name, a->v[0][k], nd, &ax);
    if (st != PD_OK) return st;
    if (seen[ax])
      return pd_set_error(PD_ERR_INVALID, "%s: axis %lld appears twice in the axis list (rank %d)", def->name,
                          (long long)a->v[0][k], nd);
    seen[ax] = true;
    mask[ax] = true;
  }
  out->ndim = 0;
  for (int d = 0; d < nd; d++) {
    if (!mask[d])
      out->shape[out->ndim++] = x->shape[d];
    else if (a->i[0])
      out->shape[out->ndim++] = 1;
  }
  out->dtype = x->dtype;
  return PD_OK;
}

pd_status pd_reduce_infer_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                               pd_meta *out, int *n_out) {
  (void)n_in;
  bool mask[PD_MAX_DIMS];
  *n_out = 1;
  return pd_reduce_meta(def, in[0], a, out, mask);
}

void pd_reduce_mask(int nd, const pd_attrs *a, bool *mask) {
  for (int d = 0; d < PD_MAX_DIMS; d++) mask[d] = a->nv[0] == 0;
  for (int k = 0; k < a->nv[0]; k++) {
    int64_t ax = a->v[0][k];
    if (nd > 0) mask[ax < 0 ? ax + nd : ax] = true;
  }
}

pd_status pd_reduce_kernel_run(const pd_kernel_ctx *ctx, const pd_reduce_spec *s) {
  bool mask[PD_MAX_DIMS];
  pd_reduce_mask(ctx->in[0]->ndim, ctx->attrs, mask);
  return pd_reduce_exec(ctx->def, ctx->in[0], mask, s, ctx->out[0]);
}

int64_t pd_reduce_count(int nd, const int64_t *shape, const bool *mask) {
  int64_t n = 1;
  for (int d = 0; d < nd; d++)
    if (mask[d]) n *= shape[d];
  return n;
}

pd_status pd_reduce_exec(const pd_op_def *def, const pd_tensor *x, const bool *mask, const pd_reduce_spec *s,
                         pd_tensor *out) {
  pd_reduce_geom g;
  pdk_reduce_geom_init(&g, x->ndim, x->shape, x->strides, mask);
  int r = pdk_reduce_run(&g, s, pd_tensor_data(x), x->dtype, pd_tensor_data(out), out->dtype);
  if (r == 2) return pd_set_error(PD_ERR_MEMORY, "%s: out of memory", def->name);
  if (r)
    return pd_set_error(PD_ERR_DTYPE, "%s: dtype %s is not supported", def->name, pd_dtype_name(x->dtype));
  return PD_OK;
}

pd_status pd_reduce_check_nonempty(const pd_op_def *def, const pd_tensor *x, const bool *mask) {
  int64_t n_out = 1;
  for (int d = 0; d < x->ndim; d++)
    if (!mask[d]) n_out *= x->shape[d];
  if (n_out > 0 && pd_reduce_count(x->ndim, x->shape, mask) == 0)
    return pd_set_error(PD_ERR_SHAPE, "%s: cannot reduce over an empty dimension (x shape %s)", def->name,
                        PD_SHAPE_STR(x));
  return PD_OK;
}

double pd_flops_reduce(pd_tensor *const *in, int n_in, const pd_attrs *a, const pd_meta *out, int n_out) {
  (void)n_in;
  (void)a;
  (void)out;
  (void)n_out;
  return (double)in[0]->numel;
}

void pd_reduce_keep_shape(const pd_meta *xm, const bool *mask, int64_t *kshape) {
  for (int d = 0; d < xm->ndim; d++) kshape[d] = mask[d] ? 1 : xm->shape[d];
}

pd_tensor *pd_reduce_unsqueeze(pd_tensor *t, const pd_meta *xm, const bool *mask) {
  int64_t k[PD_MAX_DIMS];
  pd_reduce_keep_shape(xm, mask, k);
  return pd_reshape(t, xm->ndim, k);
}

pd_tensor *pd_reduce_expand_to(pd_tensor *t, const pd_meta *xm, const bool *mask) {
  pd_tensor *r = pd_reduce_unsqueeze(t, xm, mask);
  pd_tensor *e = pd_expand(r, xm->ndim, xm->shape);
  pd_tensor_release(r);
  return e;
}

pd_tensor *pd_reduce_call(pd_op_id id, const char *name, pd_tensor *x, const int64_t *axis, int naxis,
                          bool keepdim, const pd_attrs *extra) {
  if (naxis < 0 || naxis > PD_MAX_DIMS || (naxis > 0 && !axis)) {
    pd_set_error(PD_ERR_INVALID, "%s: invalid axis list (naxis %d, axis %s)", name, naxis,
                 axis ? "given" : "NULL");
    return NULL;
  }
  pd_attrs a = {0};
  if (extra) a = *extra;
  a.i[0] = keepdim;
  a.nv[0] = naxis;
  if (naxis) memcpy(a.v[0], axis, sizeof(int64_t) * (size_t)naxis);
  return pd_dispatch1(id, &x, 1, &a);
}

pd_status pd_dispatch_pick2(pd_op_id id, pd_tensor *x, const pd_attrs *a, pd_tensor **o0, pd_tensor **o1) {
  pd_tensor *out[PD_MAX_OUTPUTS];
  int n = 0;
  if (o0) *o0 = NULL;
  if (o1) *o1 = NULL;
  /* outputs stay out of the user's scope until picked */
  pd_internal_enter();
  pd_status st = pd_dispatch(id, &x, 1, a, out, &n);
  pd_internal_leave();
  if (st != PD_OK) return st;
  for (int k = 0; k < n; k++) {
    pd_tensor **dst = k == 0 ? o0 : k == 1 ? o1 : NULL;
    if (dst)
      *dst = pd_scope_track(out[k]);
    else
      pd_tensor_release(out[k]);
  }
  return PD_OK;
}

void pd_axis_split(int ndim, const int64_t *shape, int axis, int64_t *outer, int64_t *len, int64_t *inner) {
  *outer = *inner = 1;
  *len = ndim > 0 ? shape[axis] : 1;
  for (int d = 0; d < ndim; d++) {
    if (d < axis)
      *outer *= shape[d];
    else if (d > axis)
      *inner *= shape[d];
  }
}

/* ---- constants for backward ---------------------------------------------- */
PD_EW_BINARY(eq_f32, float, float, x == y ? 1.0f : 0.0f)
PD_EW_BINARY(eq_f64, double, double, x == y ? 1.0 : 0.0)
PD_EW_BINARY(div_f32, float, float, x / y)
PD_EW_BINARY(div_f64, double, double, x / y)
PD_EW_UNARY(sign_f32, float, float, (x > 0) - (x < 0))
PD_EW_UNARY(sign_f64, double, double, (x > 0) - (x < 0))
PD_EW_BINARY(absmax_sign_f32, float, float, fabsf(x) == y ? (float)((x > 0) - (x < 0)) : 0.0f)
PD_EW_BINARY(absmax_sign_f64, double, double, fabs(x) == y ? (double)((x > 0) - (x < 0)) : 0.0)
static const pd_ew_fn k_eq[PD_NUM_DTYPES] = PD_EW_TABLE_FLOAT(eq);
static const pd_ew_fn k_div[PD_NUM_DTYPES] = PD_EW_TABLE_FLOAT(div);
static const pd_ew_fn k_sign[PD_NUM_DTYPES] = PD_EW_TABLE_FLOAT(sign);
static const pd_ew_fn k_absmax_sign[PD_NUM_DTYPES] = PD_EW_TABLE_FLOAT(absmax_sign);

/* A view of a reduced result with the keepdim shape (contiguous data). */
static pd_tensor *keepdim_view(const pd_tensor *r, int nd, const int64_t *xshape, const bool *mask) {
  int64_t k[PD_MAX_DIMS];
  for (int d = 0; d < nd; d++) k[d] = mask[d] ? 1 : xshape[d];
  pd_tensor *c = pd_kernel_contiguous(r);
  if (!c) return NULL;
  pd_tensor *v = pd_tensor_new_view(c, nd, k, NULL, c->offset);
  pd_tensor_release(c);
  return v;
}

/* out = fns(x, r viewed keepdim), a new tensor of x's shape and dtype. */
static pd_tensor *binary_with_reduced(const char *op, const pd_ew_fn *fns, const pd_tensor *x,
                                      const pd_tensor *r, const bool *mask) {
  pd_tensor *v = keepdim_view(r, x->ndim, x->shape, mask);
  pd_tensor *o = v ? pd_tensor_new(x->dtype, x->ndim, x->shape) : NULL;
  if (!o) {
    pd_tensor_release(v);
    return NULL;
  }
  pd_tensor *in[2] = {(pd_tensor *)x, v};
  pd_status st = pd_ew_apply(op, fns, x->dtype, o, in, 2, NULL);
  pd_tensor_release(v);
  if (st != PD_OK) {
    pd_tensor_release(o);
    return NULL;
  }
  return o;
}

pd_tensor *pd_reduce_tie_weights(const char *op, const pd_tensor *x, const pd_tensor *out, const bool *mask) {
  pd_tensor *e = binary_with_reduced(op, k_eq, x, out, mask);
  if (!e) return NULL;
  int64_t k[PD_MAX_DIMS];
  for (int d = 0; d < x->ndim; d++) k[d] = mask[d] ? 1 : x->shape[d];
  pd_tensor *cnt = pd_tensor_new(x->dtype, x->ndim, k);
  pd_reduce_spec s = {.kind = PD_RK_SUM};
  pd_reduce_geom g;
  pdk_reduce_geom_init(&g, e->ndim, e->shape, e->strides, mask);
  if (!cnt || pdk_reduce_run(&g, &s, pd_tensor_data(e), e->dtype, pd_tensor_data(cnt), cnt->dtype)) {
    pd_tensor_release(cnt);
    pd_tensor_release(e);
    if (pd_last_status() == PD_OK) pd_set_error(PD_ERR_MEMORY, "%s: out of memory", op);
    return NULL;
  }
  pd_tensor *in[2] = {e, cnt};
  pd_status st = pd_ew_apply(op, k_div, e->dtype, e, in, 2, NULL);
  pd_tensor_release(cnt);
  if (st != PD_OK) {
    pd_tensor_release(e);
    return NULL;
  }
  return e;
}

pd_tensor *pd_reduce_sign(const pd_tensor *x) {
  /* a DTensor's sign through the op keeps its placements (a dense tensor
   * of the shard's shape would read as a replicated one of that shape) */
  if (x->dist_attr) return pd_sign((pd_tensor *)x);
  pd_tensor *o = pd_tensor_new(x->dtype, x->ndim, x->shape);
  if (!o) return NULL;
  pd_tensor *in[1] = {(pd_tensor *)x};
  if (pd_ew_apply("sign", k_sign, x->dtype, o, in, 1, NULL) != PD_OK) {
    pd_tensor_release(o);
    return NULL;
  }
  return o;
}

pd_tensor *pd_reduce_absmax_sign(const pd_tensor *x, const pd_tensor *norm, const bool *mask) {
  return binary_with_reduced("norm", k_absmax_sign, x, norm, mask);
}

void pd_values_indices_meta(const pd_tensor *x, pd_meta *out, int *n_out) {
  *n_out = 2;
  pd_meta_of(x, &out[0]);
  out[1] = out[0];
  out[1].dtype = PD_INT64;
}

pd_status pd_values_indices_kernel(const pd_kernel_ctx *ctx, int64_t axis, pd_values_indices_run_fn run) {
  const pd_tensor *x = ctx->in[0];
  int ax;
  pd_status st = pd_norm_axis(ctx->def->name, axis, x->ndim, &ax);
  if (st != PD_OK) return st;
  int64_t outer, len, inner;
  pd_axis_split(x->ndim, x->shape, ax, &outer, &len, &inner);
  pd_tensor *xc = pd_kernel_contiguous(x);
  if (!xc) return pd_last_status();
  int r = run(ctx, pd_tensor_data(xc), xc->dtype, outer, len, inner);
  pd_tensor_release(xc);
  if (r == 2) return pd_set_error(PD_ERR_MEMORY, "%s: out of memory", ctx->def->name);
  if (r)
    return pd_set_error(PD_ERR_DTYPE, "%s: dtype %s is not supported", ctx->def->name,
                        pd_dtype_name(x->dtype));
  return PD_OK;
}

pd_status pd_values_indices_backward(const pd_backward_ctx *c, int64_t axis) {
  if (!c->needs_grad[0]) return PD_OK;
  c->grad_in[0] =
      pd_scatter_along(c->grad_out[0], c->outputs[1], axis, c->in_meta[0].ndim, c->in_meta[0].shape);
  return c->grad_in[0] ? PD_OK : pd_last_status();
}
