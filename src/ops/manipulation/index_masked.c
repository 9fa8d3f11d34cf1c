/* masked_select (x and mask broadcast together; a 1-D result) and nonzero
 * (int64 coordinates [n, ndim]). Output sizes depend on the data. */
#include <stdlib.h>
#include <string.h>

#include "manipulation_util.h"
#include "paddlec/ops.h"

/* t broadcast to shape as a contiguous tensor (t itself when it already is). */
static pd_tensor *bcast_contig(pd_tensor *t, int nd, const int64_t *shape) {
  int64_t st[PD_MAX_DIMS];
  int lead = nd - t->ndim;
  for (int d = 0; d < nd; d++)
    st[d] = d < lead || (t->shape[d - lead] == 1 && shape[d] != 1) ? 0 : t->strides[d - lead];
  pd_tensor *v = pd_tensor_new_view(t, nd, shape, st, t->offset);
  if (!v) return NULL;
  pd_tensor *c = pd_kernel_contiguous(v);
  pd_tensor_release(v);
  return c;
}

/* ---- masked_select --------------------------------------------------------------- */

static pd_status masked_geom(const char *op, const pd_tensor *x, const pd_tensor *mask, int *nd,
                             int64_t *shape) {
  if (mask->dtype != PD_BOOL)
    return pd_set_error(PD_ERR_DTYPE, "%s: mask must be a bool tensor, got %s", op,
                        pd_dtype_name(mask->dtype));
  return pd_broadcast_shapes(op, x->ndim, x->shape, mask->ndim, mask->shape, nd, shape);
}

static pd_status masked_select_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                                    pd_meta *out, int *n_out) {
  (void)n_in;
  (void)a;
  int nd;
  int64_t shape[PD_MAX_DIMS];
  pd_status st = masked_geom(def->name, in[0], in[1], &nd, shape);
  if (st != PD_OK) return st;
  out->dtype = in[0]->dtype;
  out->ndim = 1;
  *n_out = 1;
  if (in[0]->is_meta || in[1]->is_meta) { /* the count depends on the mask's values */
    out->shape[0] = PD_DIM_UNKNOWN;
    return PD_OK;
  }
  pd_tensor *m = bcast_contig(in[1], nd, shape);
  if (!m) return pd_last_status();
  out->shape[0] = pdk_count_nonzero(pd_tensor_data(m), PD_BOOL, m->numel);
  pd_tensor_release(m);
  return PD_OK;
}

static pd_status masked_select_kernel(const pd_kernel_ctx *ctx) {
  int nd;
  int64_t shape[PD_MAX_DIMS];
  pd_status st = masked_geom(ctx->def->name, ctx->in[0], ctx->in[1], &nd, shape);
  if (st != PD_OK) return st;
  pd_tensor *x = bcast_contig(ctx->in[0], nd, shape);
  pd_tensor *m = x ? bcast_contig(ctx->in[1], nd, shape) : NULL;
  if (m)
    pdk_masked_select(pd_tensor_data(x), pd_tensor_data(m), m->numel, pd_tensor_data(ctx->out[0]),
                      (int64_t)pd_dtype_size(x->dtype));
  pd_tensor_release(x);
  pd_tensor_release(m);
  return m ? PD_OK : pd_last_status();
}

/* grad of x: the grad placed at the selected positions of zeros, then summed
 * back to x's shape (undoing the broadcast). */
static pd_status masked_select_backward(const pd_backward_ctx *c) {
  if (!c->needs_grad[0]) return PD_OK;
  const pd_meta *xm = &c->in_meta[0];
  pd_tensor *mask = c->inputs[1];
  int nd;
  int64_t shape[PD_MAX_DIMS];
  pd_status st =
      pd_broadcast_shapes("masked_select", xm->ndim, xm->shape, mask->ndim, mask->shape, &nd, shape);
  if (st != PD_OK) return st;
  pd_tensor *m = bcast_contig(mask, nd, shape);
  if (!m) return pd_last_status();
  int64_t n = m->numel, cnt = pdk_count_nonzero(pd_tensor_data(m), PD_BOOL, n);
  int64_t *pos = malloc(sizeof(int64_t) * (size_t)(cnt ? cnt : 1));
  if (!pos) {
    pd_tensor_release(m);
    return pd_set_error(PD_ERR_MEMORY, "masked_select: out of memory");
  }
  pdk_nonzero_positions(pd_tensor_data(m), PD_BOOL, n, pos);
  pd_tensor_release(m);
  pd_tensor *pt = pd_to_tensor(pos, PD_INT64, 1, &cnt);
  free(pos);
  pd_tensor *z = pd_zeros(1, &n, c->grad_out[0]->dtype);
  pd_tensor *r = pt && z ? pd_index_add(z, pt, 0, c->grad_out[0]) : NULL;
  pd_tensor *rs = r ? pd_reshape(r, nd, shape) : NULL;
  c->grad_in[0] = rs ? pd_grad_reduce_to(rs, xm->ndim, xm->shape) : NULL;
  pd_tensor_release(pt);
  pd_tensor_release(z);
  pd_tensor_release(r);
  pd_tensor_release(rs);
  return c->grad_in[0] ? PD_OK : pd_last_status();
}

PD_OPDEF(masked_select, .attr_names = "", .n_in = 2, .n_out = 1,
         .flags = PD_OPF_DIFF | PD_OPF_SAVE_IN | PD_OPF_BACKWARD_READS_VALUES,
         .infer_meta = masked_select_meta, .kernel = {[PD_PLACE_CPU] = masked_select_kernel},
         .backward = masked_select_backward);

pd_tensor *pd_masked_select(pd_tensor *x, pd_tensor *mask) {
  pd_tensor *in[2] = {x, mask};
  return pd_dispatch1(PD_OP_masked_select, in, 2, NULL);
}

/* ---- nonzero ------------------------------------------------------------------ */

static pd_status nonzero_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                              pd_meta *out, int *n_out) {
  (void)def;
  (void)n_in;
  (void)a;
  out->dtype = PD_INT64;
  out->ndim = 2;
  *n_out = 1;
  if (in[0]->is_meta) { /* the count depends on x's values */
    out->shape[0] = PD_DIM_UNKNOWN;
    out->shape[1] = in[0]->ndim;
    return PD_OK;
  }
  pd_tensor *x = pd_kernel_contiguous(in[0]);
  if (!x) return pd_last_status();
  out->shape[0] = pdk_count_nonzero(pd_tensor_data(x), x->dtype, x->numel);
  out->shape[1] = x->ndim;
  pd_tensor_release(x);
  return PD_OK;
}

static pd_status nonzero_kernel(const pd_kernel_ctx *ctx) {
  int64_t cnt = ctx->out[0]->shape[0];
  if (cnt == 0) return PD_OK;
  pd_tensor *x = pd_kernel_contiguous(ctx->in[0]);
  if (!x) return pd_last_status();
  int64_t *pos = malloc(sizeof(int64_t) * (size_t)cnt);
  if (!pos) {
    pd_tensor_release(x);
    return pd_set_error(PD_ERR_MEMORY, "%s: out of memory", ctx->def->name);
  }
  pdk_nonzero_positions(pd_tensor_data(x), x->dtype, x->numel, pos);
  int64_t *o = pd_tensor_data(ctx->out[0]);
  int nd = x->ndim;
  for (int64_t i = 0; i < cnt; i++) {
    int64_t p = pos[i];
    for (int d = nd - 1; d >= 0; d--) {
      o[i * nd + d] = p % x->shape[d];
      p /= x->shape[d];
    }
  }
  free(pos);
  pd_tensor_release(x);
  return PD_OK;
}

PD_OPDEF(nonzero, .attr_names = "", .n_in = 1, .n_out = 1, .infer_meta = nonzero_meta,
         .kernel = {[PD_PLACE_CPU] = nonzero_kernel});

pd_tensor *pd_nonzero(pd_tensor *x) { return pd_dispatch1(PD_OP_nonzero, &x, 1, NULL); }

int pd_nonzero_tuple(pd_tensor *x, pd_tensor **out, int cap) {
  if (!out) return pd_set_error(PD_ERR_INVALID, "nonzero: the output array is NULL");
  if (x && x->ndim > cap)
    return pd_set_error(PD_ERR_INVALID, "nonzero: %d outputs but the output array holds only %d", x->ndim,
                        cap);
  pd_internal_enter();
  pd_tensor *r = pd_nonzero(x);
  int n = 0;
  for (int64_t d = 0; r && d < x->ndim; d++, n++) {
    int64_t ax = 1, e = d + 1;
    out[d] = pd_slice(r, 1, &ax, &d, &e);
    if (!out[d]) break;
  }
  pd_internal_leave();
  pd_tensor_release(r);
  if (!r || n < x->ndim) {
    for (int k = 0; k < n; k++) pd_tensor_release(out[k]);
    return pd_last_status();
  }
  for (int k = 0; k < n; k++) pd_scope_track(out[k]);
  return n;
}
