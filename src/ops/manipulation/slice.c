/* slice (a view), strided_slice (a strided copy, negative strides allowed)
 * and slice_grad, their shared backward (the grad placed into zeros). */
#include <string.h>

#include "../../core/shape_check.h"
#include "manipulation_util.h"
#include "paddlec/ops.h"

/* Per-dim start, step and count of the selected elements. Clamping follows
 * Paddle: negative starts/ends count from the end; out-of-range values are
 * clamped to the axis; with a negative step the start is clamped to size-1
 * and an end of -1 means "through element 0". An empty or inverted range
 * selects nothing. */
static pd_status slice_norm(const char *op, int ndim, const int64_t *shape, const pd_attrs *a, bool strided,
                            int64_t *st, int64_t *sp, int64_t *cnt) {
  int n = a->nv[0];
  if (a->nv[1] != n || a->nv[2] != n || (strided && a->nv[3] != n)) {
    if (strided)
      return pd_set_error(PD_ERR_INVALID,
                          "%s: axes, starts, ends and strides must have the same length, got %d, "
                          "%d, %d and %d",
                          op, n, a->nv[1], a->nv[2], a->nv[3]);
    return pd_set_error(PD_ERR_INVALID,
                        "%s: axes, starts and ends must have the same length, got %d, %d and %d", op, n,
                        a->nv[1], a->nv[2]);
  }
  for (int d = 0; d < ndim; d++) {
    st[d] = 0;
    sp[d] = 1;
    cnt[d] = shape[d];
  }
  bool seen[PD_MAX_DIMS] = {0};
  for (int k = 0; k < n; k++) {
    int ax;
    if (ndim == 0)
      return pd_set_error(PD_ERR_INDEX, "%s: axes[%d] = %lld but x is 0-D", op, k, (long long)a->v[0][k]);
    pd_status e = pd_norm_axis(op, a->v[0][k], ndim, &ax);
    if (e != PD_OK) return e;
    if (seen[ax]) return pd_set_error(PD_ERR_INVALID, "%s: axis %d appears twice in axes", op, ax);
    seen[ax] = true;
    int64_t size = shape[ax], step = strided ? a->v[3][k] : 1, s = a->v[1][k], t = a->v[2][k];
    if (step == 0) return pd_set_error(PD_ERR_INVALID, "%s: strides[%d] is 0", op, k);
    sp[ax] = step;
    if (size == 0 || !pd_dim_known(size)) { /* of an unknown axis, the count is unknown */
      st[ax] = 0;
      cnt[ax] = size;
      continue;
    }
    if (s < 0) s += size;
    if (s < 0) s = 0;
    if (step > 0) {
      if (s > size) s = size;
      if (t < 0) t += size;
      if (t < 0) t = 0;
      if (t > size) t = size;
      cnt[ax] = t > s ? 1 + (t - s - 1) / step : 0; /* no t - s + step: a huge step would overflow */
    } else {
      if (s > size - 1) s = size - 1;
      if (t < -1) {
        t += size;
        if (t < 0) t = 0;
      }
      cnt[ax] = s > t ? 1 - (s - t - 1) / step : 0; /* -step overflows for INT64_MIN */
    }
    st[ax] = s;
  }
  return PD_OK;
}

static pd_status slice_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                            pd_meta *out, int *n_out) {
  (void)n_in;
  int64_t st[PD_MAX_DIMS], sp[PD_MAX_DIMS];
  bool strided = strcmp(def->name, "strided_slice") == 0;
  pd_status e = slice_norm(def->name, in[0]->ndim, in[0]->shape, a, strided, st, sp, out->shape);
  out->dtype = in[0]->dtype;
  out->ndim = in[0]->ndim;
  *n_out = 1;
  return e;
}

static pd_status slice_kernel(const pd_kernel_ctx *ctx) {
  pd_tensor *x = ctx->in[0];
  int64_t st[PD_MAX_DIMS], sp[PD_MAX_DIMS], cnt[PD_MAX_DIMS], off = x->offset;
  pd_status e = slice_norm(ctx->def->name, x->ndim, x->shape, ctx->attrs, false, st, sp, cnt);
  if (e != PD_OK) return e;
  if (pd_shape_numel(x->ndim, cnt) > 0)
    for (int d = 0; d < x->ndim; d++) off += st[d] * x->strides[d];
  ctx->out[0] = pd_tensor_new_view(x, x->ndim, cnt, x->strides, off);
  return ctx->out[0] ? PD_OK : pd_last_status();
}

static pd_status strided_slice_kernel(const pd_kernel_ctx *ctx) {
  pd_tensor *x = ctx->in[0], *o = ctx->out[0];
  int64_t st[PD_MAX_DIMS], sp[PD_MAX_DIMS], cnt[PD_MAX_DIMS], src[PD_MAX_DIMS], off = 0;
  pd_status e = slice_norm(ctx->def->name, x->ndim, x->shape, ctx->attrs, true, st, sp, cnt);
  if (e != PD_OK) return e;
  if (o->numel == 0) return PD_OK;
  int64_t es = (int64_t)pd_dtype_size(x->dtype);
  for (int d = 0; d < x->ndim; d++) {
    off += st[d] * x->strides[d];
    /* a step past the axis takes one element, whose stride is never used
     * (and stride * step could overflow) */
    src[d] = cnt[d] > 1 ? x->strides[d] * sp[d] : 0;
  }
  pdk_copy(x->ndim, cnt, pd_tensor_data(o), o->strides, (char *)pd_tensor_data(x) + off * es, src, es);
  return PD_OK;
}

/* grad of x: zeros with the output grad at the selected positions */
static pd_status slice_backward(const pd_backward_ctx *c) {
  if (!c->needs_grad[0]) return PD_OK;
  const pd_meta *xm = &c->in_meta[0];
  bool strided = c->attrs->nv[3] > 0; /* slice keeps v3 empty */
  int64_t st[PD_MAX_DIMS], sp[PD_MAX_DIMS], cnt[PD_MAX_DIMS];
  pd_status e = slice_norm("slice", xm->ndim, xm->shape, c->attrs, strided, st, sp, cnt);
  if (e != PD_OK) return e;
  pd_attrs g = {0};
  g.nv[0] = g.nv[1] = g.nv[2] = xm->ndim;
  memcpy(g.v[0], xm->shape, sizeof(int64_t) * (size_t)xm->ndim);
  memcpy(g.v[1], st, sizeof(int64_t) * (size_t)xm->ndim);
  memcpy(g.v[2], sp, sizeof(int64_t) * (size_t)xm->ndim);
  pd_tensor *go = c->grad_out[0];
  c->grad_in[0] = pd_dispatch1(PD_OP_slice_grad, &go, 1, &g);
  return c->grad_in[0] ? PD_OK : pd_last_status();
}

PD_OPDEF(slice, .n_in = 1, .n_out = 1, .flags = PD_OPF_DIFF | PD_OPF_VIEW,
         .attr_names = "v0:axes,v1:starts,v2:ends", .infer_meta = slice_meta,
         .kernel = {[PD_PLACE_CPU] = slice_kernel}, .backward = slice_backward);

PD_OPDEF(strided_slice, .n_in = 1, .n_out = 1, .flags = PD_OPF_DIFF,
         .attr_names = "v0:axes,v1:starts,v2:ends,v3:strides", .infer_meta = slice_meta,
         .kernel = {[PD_PLACE_CPU] = strided_slice_kernel}, .backward = slice_backward);

/* ---- slice_grad: out = zeros(x_shape); out[start + k * step] = g ------------------ */

static pd_status slice_grad_check(const pd_op_def *def, const pd_tensor *g, const pd_attrs *a) {
  int nd = a->nv[0];
  if (g->ndim != nd || a->nv[1] != nd || a->nv[2] != nd)
    return pd_set_error(PD_ERR_INVALID,
                        "%s: grad of rank %d does not match x_shape, starts and steps of lengths "
                        "%d, %d and %d",
                        def->name, g->ndim, nd, a->nv[1], a->nv[2]);
  for (int d = 0; d < nd; d++) {
    int64_t size = a->v[0][d], s = a->v[1][d], step = a->v[2][d], n = g->shape[d];
    if (n == 0) continue;
    int64_t last = s;
    /* with n or the size unknown, only what is known can be checked */
    bool over = n > 0 && (pd_mul_overflow(n - 1, step, &last) || pd_add_overflow(s, last, &last));
    if (over || step == 0 || s < 0 || last < 0 || (size >= 0 && (s >= size || last >= size)))
      return pd_set_error(PD_ERR_SHAPE,
                          "%s: dim %d: %lld elements from %lld with step %lld do not fit in size %lld",
                          def->name, d, (long long)n, (long long)s, (long long)step, (long long)size);
  }
  return PD_OK;
}

static pd_status slice_grad_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                                 pd_meta *out, int *n_out) {
  (void)n_in;
  pd_status e = slice_grad_check(def, in[0], a);
  if (e != PD_OK) return e;
  out->dtype = in[0]->dtype;
  out->ndim = a->nv[0];
  memcpy(out->shape, a->v[0], sizeof(int64_t) * (size_t)a->nv[0]);
  *n_out = 1;
  return PD_OK;
}

static pd_status slice_grad_kernel(const pd_kernel_ctx *ctx) {
  pd_tensor *g = ctx->in[0], *o = ctx->out[0];
  int64_t es = (int64_t)pd_dtype_size(o->dtype), off = 0, dst[PD_MAX_DIMS];
  memset(pd_tensor_data(o), 0, (size_t)(o->numel * es));
  if (g->numel == 0) return PD_OK;
  for (int d = 0; d < o->ndim; d++) {
    off += ctx->attrs->v[1][d] * o->strides[d];
    dst[d] = g->shape[d] > 1 ? o->strides[d] * ctx->attrs->v[2][d] : 0; /* one element: any step */
  }
  pdk_copy(g->ndim, g->shape, (char *)pd_tensor_data(o) + off * es, dst, pd_tensor_data(g), g->strides, es);
  return PD_OK;
}

static pd_status slice_grad_backward(const pd_backward_ctx *c) {
  if (!c->needs_grad[0]) return PD_OK;
  const pd_attrs *a = c->attrs;
  int nd = a->nv[0];
  int64_t axes[PD_MAX_DIMS], ends[PD_MAX_DIMS];
  for (int d = 0; d < nd; d++) {
    int64_t s = a->v[1][d], step = a->v[2][d], n = c->in_meta[0].shape[d];
    axes[d] = d;
    ends[d] = n == 0 ? s : s + (n - 1) * step + (step > 0 ? 1 : -1);
  }
  c->grad_in[0] = pd_strided_slice(c->grad_out[0], nd, axes, a->v[1], ends, a->v[2]);
  return c->grad_in[0] ? PD_OK : pd_last_status();
}

PD_OPDEF(slice_grad, .n_in = 1, .n_out = 1, .flags = PD_OPF_DIFF,
         .attr_names = "v0:x_shape,v1:starts,v2:steps", .infer_meta = slice_grad_meta,
         .kernel = {[PD_PLACE_CPU] = slice_grad_kernel}, .backward = slice_grad_backward);

/* ---- public wrappers ------------------------------------------------------------- */

static pd_tensor *slice_call(pd_op_id id, const char *op, pd_tensor *x, int n, const int64_t *axes,
                             const int64_t *starts, const int64_t *ends, const int64_t *strides) {
  pd_attrs a = {0};
  if (pd_mu_set_list(op, "axes", &a, 0, n, axes) != PD_OK ||
      pd_mu_set_list(op, "starts", &a, 1, n, starts) != PD_OK ||
      pd_mu_set_list(op, "ends", &a, 2, n, ends) != PD_OK ||
      (id == PD_OP_strided_slice && pd_mu_set_list(op, "strides", &a, 3, n, strides) != PD_OK))
    return NULL;
  return pd_dispatch1(id, &x, 1, &a);
}

pd_tensor *pd_slice(pd_tensor *x, int naxes, const int64_t *axes, const int64_t *starts,
                    const int64_t *ends) {
  return slice_call(PD_OP_slice, "slice", x, naxes, axes, starts, ends, NULL);
}

pd_tensor *pd_strided_slice(pd_tensor *x, int naxes, const int64_t *axes, const int64_t *starts,
                            const int64_t *ends, const int64_t *strides) {
  return slice_call(PD_OP_strided_slice, "strided_slice", x, naxes, axes, starts, ends, strides);
}
