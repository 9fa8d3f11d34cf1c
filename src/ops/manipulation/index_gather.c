/* gather, index_select (pick slices along one axis) and index_add (their
 * scatter-add backward, also public). Negative indices count from the end. */
#include <stdlib.h>
#include <string.h>

#include "manipulation_util.h"
#include "paddlec/ops.h"

/* gather takes a 0-D, 1-D or [n, 1] index; index_select and index_add a
 * 1-D or [n, 1] one. */
static pd_status index_shape(const char *op, const pd_tensor *idx, bool allow_0d) {
  pd_status st = pd_mu_check_index_dtype(op, "index", idx);
  if (st != PD_OK) return st;
  if (idx->ndim == 1 || (idx->ndim == 0 && allow_0d) || (idx->ndim == 2 && idx->shape[1] == 1)) return PD_OK;
  return pd_set_error(PD_ERR_SHAPE, "%s: index must be %s or of shape [n, 1], got shape %s", op,
                      allow_0d ? "0-D, 1-D" : "1-D", PD_SHAPE_STR(idx));
}

static pd_status axis_of(const char *op, const pd_tensor *x, const pd_attrs *a, int *ax) {
  if (x->ndim == 0) return pd_set_error(PD_ERR_SHAPE, "%s: x must have at least 1 dim, got a 0-D tensor", op);
  return pd_norm_axis(op, a->i[0], x->ndim, ax);
}

static void outer_inner(const pd_tensor *x, int ax, int64_t *outer, int64_t *inner) {
  *outer = *inner = 1;
  for (int d = 0; d < ax; d++) *outer *= x->shape[d];
  for (int d = ax + 1; d < x->ndim; d++) *inner *= x->shape[d];
}

/* The axis (attr i0) of input 0 and the indices of input 1 along it
 * (negative ones made non-negative; malloc'ed, the caller frees). */
static pd_status axis_indices(const pd_kernel_ctx *ctx, int *ax, int64_t **idx) {
  pd_status st = axis_of(ctx->def->name, ctx->in[0], ctx->attrs, ax);
  if (st != PD_OK) return st;
  return pd_mu_read_indices(ctx->def->name, "index", ctx->in[1], *ax, ctx->in[0]->shape[*ax], true, idx);
}

/* ---- gather / index_select -------------------------------------------------- */

static pd_status gather_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                             pd_meta *out, int *n_out) {
  (void)n_in;
  const pd_tensor *x = in[0], *idx = in[1];
  bool is_gather = strcmp(def->name, "gather") == 0;
  int ax;
  pd_status st = index_shape(def->name, idx, is_gather);
  if (st == PD_OK) st = axis_of(def->name, x, a, &ax);
  if (st != PD_OK) return st;
  out->dtype = x->dtype;
  out->ndim = 0;
  for (int d = 0; d < x->ndim; d++) {
    if (d != ax)
      out->shape[out->ndim++] = x->shape[d];
    else if (idx->ndim > 0)
      out->shape[out->ndim++] = idx->numel;
  }
  *n_out = 1;
  return PD_OK;
}

static pd_status gather_kernel(const pd_kernel_ctx *ctx) {
  int ax;
  int64_t *idx = NULL, outer, inner;
  pd_status st = axis_indices(ctx, &ax, &idx);
  if (st != PD_OK) return st;
  int64_t n = ctx->in[0]->shape[ax];
  if (ctx->out[0]->numel > 0) {
    pd_tensor *x = pd_kernel_contiguous(ctx->in[0]);
    if (!x) {
      free(idx);
      return pd_last_status();
    }
    outer_inner(x, ax, &outer, &inner);
    pdk_gather_axis(pd_tensor_data(x), pd_tensor_data(ctx->out[0]), idx, outer, n, ctx->in[1]->numel, inner,
                    (int64_t)pd_dtype_size(x->dtype));
    pd_tensor_release(x);
  }
  free(idx);
  return PD_OK;
}

/* grad of x: index_add of the grad (with the axis restored) into zeros */
static pd_status gather_backward(const pd_backward_ctx *c) {
  if (!c->needs_grad[0]) return PD_OK;
  const pd_meta *xm = &c->in_meta[0];
  int64_t ax = c->attrs->i[0] < 0 ? c->attrs->i[0] + xm->ndim : c->attrs->i[0];
  pd_tensor *index = c->inputs[1];
  int64_t flat = -1, gshape[PD_MAX_DIMS];
  memcpy(gshape, xm->shape, sizeof(int64_t) * (size_t)xm->ndim);
  gshape[ax] = index->numel;
  pd_tensor *idx1 = pd_reshape(index, 1, &flat);
  pd_tensor *g = pd_reshape(c->grad_out[0], xm->ndim, gshape);
  pd_tensor *z = pd_zeros(xm->ndim, xm->shape, c->grad_out[0]->dtype);
  c->grad_in[0] = pd_index_add(z, idx1, ax, g);
  pd_tensor_release(idx1);
  pd_tensor_release(g);
  pd_tensor_release(z);
  return c->grad_in[0] ? PD_OK : pd_last_status();
}

PD_OPDEF(gather, .n_in = 2, .n_out = 1, .flags = PD_OPF_DIFF | PD_OPF_SAVE_IN, .attr_names = "i0:axis",
         .infer_meta = gather_meta, .kernel = {[PD_PLACE_CPU] = gather_kernel}, .backward = gather_backward);
PD_OPDEF(index_select, .n_in = 2, .n_out = 1, .flags = PD_OPF_DIFF | PD_OPF_SAVE_IN, .attr_names = "i0:axis",
         .infer_meta = gather_meta, .kernel = {[PD_PLACE_CPU] = gather_kernel}, .backward = gather_backward);

pd_tensor *pd_gather(pd_tensor *x, pd_tensor *index, int64_t axis) {
  pd_tensor *in[2] = {x, index};
  pd_attrs a = {.i = {axis}};
  return pd_dispatch1(PD_OP_gather, in, 2, &a);
}

pd_tensor *pd_index_select(pd_tensor *x, pd_tensor *index, int64_t axis) {
  pd_tensor *in[2] = {x, index};
  pd_attrs a = {.i = {axis}};
  return pd_dispatch1(PD_OP_index_select, in, 2, &a);
}

/* ---- index_add: out = x; out[..., index[j], ...] += value[..., j, ...] ------------ */

static pd_status index_add_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                                pd_meta *out, int *n_out) {
  (void)n_in;
  const pd_tensor *x = in[0], *idx = in[1], *v = in[2];
  int ax;
  pd_status st = index_shape(def->name, idx, false);
  if (st == PD_OK) st = axis_of(def->name, x, a, &ax);
  if (st != PD_OK) return st;
  if (v->dtype != x->dtype)
    return pd_set_error(PD_ERR_DTYPE, "%s: value has dtype %s but x has dtype %s", def->name,
                        pd_dtype_name(v->dtype), pd_dtype_name(x->dtype));
  int64_t want[PD_MAX_DIMS];
  memcpy(want, x->shape, sizeof(int64_t) * (size_t)x->ndim);
  want[ax] = idx->numel;
  if (v->ndim != x->ndim || !pd_shapes_agree(x->ndim, v->shape, want)) {
    char b[160];
    return pd_set_error(PD_ERR_SHAPE,
                        "%s: value has shape %s but x of shape %s with %lld indices along axis %d "
                        "needs %s",
                        def->name, PD_SHAPE_STR(v), PD_SHAPE_STR(x), (long long)idx->numel, ax,
                        pd_shape_str(x->ndim, want, b, sizeof b));
  }
  pd_meta_of(x, out);
  *n_out = 1;
  return PD_OK;
}

static pd_status index_add_kernel(const pd_kernel_ctx *ctx) {
  int ax;
  int64_t *idx = NULL, outer, inner;
  pd_status st = axis_indices(ctx, &ax, &idx);
  if (st != PD_OK) return st;
  int64_t n = ctx->in[0]->shape[ax];
  pd_mu_copy_into(ctx->out[0], ctx->in[0]);
  pd_tensor *v = pd_kernel_contiguous(ctx->in[2]);
  if (!v) {
    free(idx);
    return pd_last_status();
  }
  outer_inner(ctx->in[0], ax, &outer, &inner);
  int rc = pdk_index_add(ctx->out[0]->dtype, pd_tensor_data(ctx->out[0]), pd_tensor_data(v), idx, outer, n,
                         ctx->in[1]->numel, inner, -1);
  pd_tensor_release(v);
  free(idx);
  if (rc != 0)
    return pd_set_error(PD_ERR_DTYPE, "%s: dtype %s is not supported", ctx->def->name,
                        pd_dtype_name(ctx->out[0]->dtype));
  return PD_OK;
}

static pd_status index_add_backward(const pd_backward_ctx *c) {
  if (c->needs_grad[0]) c->grad_in[0] = pd_tensor_retain(c->grad_out[0]);
  if (c->needs_grad[2]) {
    c->grad_in[2] = pd_index_select(c->grad_out[0], c->inputs[1], c->attrs->i[0]);
    if (!c->grad_in[2]) return pd_last_status();
  }
  return PD_OK;
}

PD_OPDEF(index_add, .n_in = 3, .n_out = 1, .flags = PD_OPF_DIFF | PD_OPF_SAVE_IN | PD_OPF_HALF_VIA_F32,
         .attr_names = "i0:axis", .infer_meta = index_add_meta, .kernel = {[PD_PLACE_CPU] = index_add_kernel},
         .backward = index_add_backward);

pd_tensor *pd_index_add(pd_tensor *x, pd_tensor *index, int64_t axis, pd_tensor *value) {
  pd_tensor *in[3] = {x, index, value};
  pd_attrs a = {.i = {axis}};
  return pd_dispatch1(PD_OP_index_add, in, 3, &a);
}
