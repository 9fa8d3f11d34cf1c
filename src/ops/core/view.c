/* View ops over one storage: reshape, expand. */
#include <string.h>

#include "../../core/shape_check.h"
#include "../op_registry.h"
#include "paddlec/ops.h"

/* Resolves -1 and 0 entries of a target shape against x. When x has
 * unknown dims (a static Variable), a 0 entry copies one (unknown); if every
 * unknown dim of x is copied so, the rest is known and checked as usual
 * ([-1, 13] to [0, -1] gives [-1, 13]), else the -1 entry is unknown too
 * and the element count cannot be checked. */
pd_status pd_resolve_shape(const char *op, const pd_tensor *x, int n, const int64_t *want, int64_t *shape) {
  int infer = -1;
  int64_t known = 1;
  if (n < 0 || n > PD_MAX_DIMS)
    return pd_set_error(PD_ERR_INVALID, "%s: rank %d is out of range [0, %d]", op, n, PD_MAX_DIMS);
  int64_t x_numel = x->numel; /* of x's dims not copied by a 0 entry when some are unknown */
  if (x_numel < 0) {
    x_numel = 1;
    for (int d = 0; d < x->ndim; d++) {
      bool copied = d < n && want[d] == 0;
      if (!pd_dim_known(x->shape[d]) && !copied) {
        x_numel = PD_DIM_UNKNOWN;
        break;
      }
      if (!copied) x_numel *= x->shape[d];
    }
  }
  for (int d = 0; d < n; d++) {
    int64_t s = want[d];
    if (s == -1) {
      if (infer >= 0)
        return pd_set_error(PD_ERR_SHAPE, "%s: only one dim may be -1, got dims %d and %d", op, infer, d);
      infer = d;
      continue;
    }
    if (s == 0) {
      if (d >= x->ndim)
        return pd_set_error(PD_ERR_SHAPE, "%s: shape[%d] is 0 (copy x's dim) but x has rank %d", op, d,
                            x->ndim);
      s = x->shape[d];
      if (x->numel < 0) { /* copied dims cancel out of both counts */
        shape[d] = s;
        continue;
      }
    }
    if (s < 0) return pd_set_error(PD_ERR_SHAPE, "%s: shape[%d] is %lld", op, d, (long long)s);
    shape[d] = s;
    if (pd_mul_overflow(known, s, &known)) return pd_shape_overflow_error(op, n, want);
  }
  if (x_numel < 0) { /* unknown elements: nothing to infer or check against */
    if (infer >= 0) shape[infer] = PD_DIM_UNKNOWN;
    return PD_OK;
  }
  if (infer >= 0) {
    if (known == 0 || x_numel % known != 0) {
      char b[160];
      return pd_set_error(PD_ERR_SHAPE, "%s: cannot reshape x of shape %s (%lld elements) into %s", op,
                          PD_SHAPE_STR(x), (long long)x_numel, pd_shape_str(n, want, b, sizeof b));
    }
    shape[infer] = x_numel / known;
    known *= shape[infer];
  }
  if (known != x_numel) {
    char b[160];
    return pd_set_error(
        PD_ERR_SHAPE, "%s: cannot reshape x of shape %s (%lld elements) into %s (%lld elements)", op,
        PD_SHAPE_STR(x), (long long)x_numel, pd_shape_str(n, want, b, sizeof b), (long long)known);
  }
  return PD_OK;
}

static pd_status reshape_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                              pd_meta *out, int *n_out) {
  (void)n_in;
  out->dtype = in[0]->dtype;
  out->ndim = a->nv[0];
  *n_out = 1;
  return pd_resolve_shape(def->name, in[0], a->nv[0], a->v[0], out->shape);
}

static pd_status reshape_kernel(const pd_kernel_ctx *ctx) {
  int64_t shape[PD_MAX_DIMS];
  pd_status st = pd_resolve_shape(ctx->def->name, ctx->in[0], ctx->attrs->nv[0], ctx->attrs->v[0], shape);
  if (st != PD_OK) return st;
  if (ctx->in[0]->is_contiguous) {
    ctx->out[0] = pd_tensor_new_view(ctx->in[0], ctx->attrs->nv[0], shape, NULL, ctx->in[0]->offset);
  } else {
    pd_tensor *c = pd_clone(ctx->in[0], ctx->in[0]->dtype);
    if (!c) return pd_last_status();
    ctx->out[0] = pd_tensor_new_view(c, ctx->attrs->nv[0], shape, NULL, c->offset);
    pd_tensor_release(c);
  }
  return ctx->out[0] ? PD_OK : pd_last_status();
}

static pd_status reshape_backward(const pd_backward_ctx *c) {
  if (!c->needs_grad[0]) return PD_OK;
  c->grad_in[0] = pd_reshape(c->grad_out[0], c->in_meta[0].ndim, c->in_meta[0].shape);
  return c->grad_in[0] ? PD_OK : pd_last_status();
}

PD_OPDEF(reshape, .n_in = 1, .n_out = 1, .flags = PD_OPF_DIFF | PD_OPF_VIEW, .attr_names = "v0:shape",
         .infer_meta = reshape_meta, .kernel = {[PD_PLACE_CPU] = reshape_kernel},
         .backward = reshape_backward);

pd_tensor *pd_reshape(pd_tensor *x, int ndim, const int64_t *shape) {
  if (ndim < 0 || ndim > PD_MAX_DIMS || (ndim > 0 && !shape)) {
    pd_set_error(PD_ERR_INVALID, "reshape: invalid shape (rank %d)", ndim);
    return NULL;
  }
  pd_attrs a = {.nv = {ndim}};
  if (ndim) memcpy(a.v[0], shape, sizeof(int64_t) * (size_t)ndim);
  return pd_dispatch1(PD_OP_reshape, &x, 1, &a);
}

/* expand: broadcast x to shape (-1 keeps a dim); a view with zero strides. */
static pd_status expand_shape(const char *op, const pd_tensor *x, const pd_attrs *a, int64_t *shape) {
  int n = a->nv[0];
  if (n < x->ndim || n > PD_MAX_DIMS) {
    char b[160];
    return pd_set_error(PD_ERR_SHAPE, "%s: target shape %s has fewer dims than x's shape %s", op,
                        pd_shape_str(n, a->v[0], b, sizeof b), PD_SHAPE_STR(x));
  }
  int lead = n - x->ndim;
  for (int d = 0; d < n; d++) {
    int64_t w = a->v[0][d];
    int64_t have = d < lead ? 1 : x->shape[d - lead];
    if (w == -1) {
      if (d < lead)
        return pd_set_error(PD_ERR_SHAPE, "%s: -1 is not allowed in a new leading dim (%d)", op, d);
      w = have; /* unknown when x's dim is */
    }
    if (have != 1 && !pd_dims_agree(have, w)) {
      char b[160];
      return pd_set_error(PD_ERR_SHAPE, "%s: cannot expand x of shape %s to %s (dim %d: %lld vs %lld)", op,
                          PD_SHAPE_STR(x), pd_shape_str(n, a->v[0], b, sizeof b), d, (long long)have,
                          (long long)w);
    }
    if (w < -1) return pd_set_error(PD_ERR_SHAPE, "%s: target dim %d is %lld", op, d, (long long)w);
    shape[d] = w;
  }
  return PD_OK;
}

static pd_status expand_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                             pd_meta *out, int *n_out) {
  (void)n_in;
  out->dtype = in[0]->dtype;
  out->ndim = a->nv[0];
  *n_out = 1;
  return expand_shape(def->name, in[0], a, out->shape);
}

static pd_status expand_kernel(const pd_kernel_ctx *ctx) {
  pd_tensor *x = ctx->in[0];
  int64_t shape[PD_MAX_DIMS], strides[PD_MAX_DIMS];
  pd_status st = expand_shape(ctx->def->name, x, ctx->attrs, shape);
  if (st != PD_OK) return st;
  int n = ctx->attrs->nv[0], lead = n - x->ndim;
  for (int d = 0; d < n; d++)
    strides[d] = d < lead || (x->shape[d - lead] == 1 && shape[d] != 1) ? 0 : x->strides[d - lead];
  ctx->out[0] = pd_tensor_new_view(x, n, shape, strides, x->offset);
  return ctx->out[0] ? PD_OK : pd_last_status();
}

static pd_status expand_backward(const pd_backward_ctx *c) {
  if (!c->needs_grad[0]) return PD_OK;
  c->grad_in[0] = pd_grad_reduce_to(c->grad_out[0], c->in_meta[0].ndim, c->in_meta[0].shape);
  return c->grad_in[0] ? PD_OK : pd_last_status();
}

PD_OPDEF(expand, .n_in = 1, .n_out = 1, .flags = PD_OPF_DIFF | PD_OPF_VIEW, .attr_names = "v0:shape",
         .infer_meta = expand_meta, .kernel = {[PD_PLACE_CPU] = expand_kernel}, .backward = expand_backward);

pd_tensor *pd_expand(pd_tensor *x, int ndim, const int64_t *shape) {
  if (ndim < 0 || ndim > PD_MAX_DIMS || (ndim > 0 && !shape)) {
    pd_set_error(PD_ERR_INVALID, "expand: invalid shape (rank %d)", ndim);
    return NULL;
  }
  pd_attrs a = {.nv = {ndim}};
  if (ndim) memcpy(a.v[0], shape, sizeof(int64_t) * (size_t)ndim);
  return pd_dispatch1(PD_OP_expand, &x, 1, &a);
}

/* transpose: permutes dims (a view). */
static pd_status perm_check(const char *op, const pd_tensor *x, const pd_attrs *a, int *perm) {
  if (a->nv[0] != x->ndim) {
    char b[160];
    return pd_set_error(PD_ERR_INVALID, "%s: perm %s has %d entries but x has rank %d (shape %s)", op,
                        pd_shape_str(a->nv[0], a->v[0], b, sizeof b), a->nv[0], x->ndim, PD_SHAPE_STR(x));
  }
  bool seen[PD_MAX_DIMS] = {0};
  for (int d = 0; d < x->ndim; d++) {
    int ax;
    pd_status st = pd_norm_axis(op, a->v[0][d], x->ndim, &ax);
    if (st != PD_OK) return st;
    if (seen[ax]) return pd_set_error(PD_ERR_INVALID, "%s: perm repeats axis %d", op, ax);
    seen[ax] = true;
    perm[d] = ax;
  }
  return PD_OK;
}

static pd_status transpose_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                                pd_meta *out, int *n_out) {
  (void)n_in;
  int perm[PD_MAX_DIMS];
  pd_status st = perm_check(def->name, in[0], a, perm);
  if (st != PD_OK) return st;
  out->dtype = in[0]->dtype;
  out->ndim = in[0]->ndim;
  for (int d = 0; d < out->ndim; d++) out->shape[d] = in[0]->shape[perm[d]];
  *n_out = 1;
  return PD_OK;
}

static pd_status transpose_kernel(const pd_kernel_ctx *ctx) {
  int perm[PD_MAX_DIMS];
  pd_status st = perm_check(ctx->def->name, ctx->in[0], ctx->attrs, perm);
  if (st != PD_OK) return st;
  int64_t shape[PD_MAX_DIMS], strides[PD_MAX_DIMS];
  for (int d = 0; d < ctx->in[0]->ndim; d++) {
    shape[d] = ctx->in[0]->shape[perm[d]];
    strides[d] = ctx->in[0]->strides[perm[d]];
  }
  ctx->out[0] = pd_tensor_new_view(ctx->in[0], ctx->in[0]->ndim, shape, strides, ctx->in[0]->offset);
  return ctx->out[0] ? PD_OK : pd_last_status();
}

static pd_status transpose_backward(const pd_backward_ctx *c) {
  if (!c->needs_grad[0]) return PD_OK;
  int n = c->attrs->nv[0];
  int64_t inv[PD_MAX_DIMS];
  for (int d = 0; d < n; d++) {
    int64_t ax = c->attrs->v[0][d];
    inv[ax < 0 ? ax + n : ax] = d;
  }
  c->grad_in[0] = pd_transpose(c->grad_out[0], n, inv);
  return c->grad_in[0] ? PD_OK : pd_last_status();
}

PD_OPDEF(transpose, .n_in = 1, .n_out = 1, .flags = PD_OPF_DIFF | PD_OPF_VIEW, .attr_names = "v0:perm",
         .infer_meta = transpose_meta, .kernel = {[PD_PLACE_CPU] = transpose_kernel},
         .backward = transpose_backward);

pd_tensor *pd_transpose(pd_tensor *x, int nperm, const int64_t *perm) {
  if (nperm < 0 || nperm > PD_MAX_DIMS || (nperm > 0 && !perm)) {
    pd_set_error(PD_ERR_INVALID, "transpose: invalid perm (%d entries)", nperm);
    return NULL;
  }
  pd_attrs a = {.nv = {nperm}};
  if (nperm) memcpy(a.v[0], perm, sizeof(int64_t) * (size_t)nperm);
  return pd_dispatch1(PD_OP_transpose, &x, 1, &a);
}

pd_tensor *pd_contiguous(pd_tensor *x) {
  if (!x) {
    if (pd_last_status() == PD_OK) pd_set_error(PD_ERR_INVALID, "contiguous: x is NULL");
    return NULL;
  }
  if (x->is_contiguous) return pd_scope_track(pd_tensor_retain(x));
  /* a differentiable copy: cast to the same dtype always writes a new buffer */
  pd_attrs a = {.dtype = x->dtype};
  return pd_dispatch1(PD_OP_cast, &x, 1, &a);
}

pd_tensor *pd_kernel_contiguous(const pd_tensor *x) {
  if (x->is_contiguous) return pd_tensor_retain((pd_tensor *)x);
  return pd_clone((pd_tensor *)x, x->dtype);
}
