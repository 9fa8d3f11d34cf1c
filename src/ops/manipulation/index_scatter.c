/* scatter and scatter_: rows of x replaced (overwrite) or, with
 * overwrite=False, zeroed and then accumulated from updates (Paddle's rule).
 * With overwrite and duplicate indices the rows are written in index order,
 * so the last duplicate wins (Paddle's CPU behaviour); the gradient of every
 * updates row is the output gradient at its index (as Paddle's
 * scatter_grad, which gathers it), duplicates included.
 *
 * A shard of x's rows (auto_parallel's local step): i2 (shard_rows) is the
 * whole tensor's row count and i1 (shard_row) the first of the rows x
 * holds; the index addresses the whole tensor's rows and the entries
 * outside the shard are skipped, so each row of the shard is written as it
 * would be unsharded. i2 = 0: x is the whole tensor. */
#include <stdlib.h>
#include <string.h>

#include "manipulation_util.h"
#include "paddlec/ops.h"

static pd_status scatter_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                              pd_meta *out, int *n_out) {
  (void)n_in;
  const pd_tensor *x = in[0], *idx = in[1], *u = in[2];
  pd_status st = pd_mu_check_index_dtype(def->name, "index", idx);
  if (st != PD_OK) return st;
  if (x->ndim == 0)
    return pd_set_error(PD_ERR_SHAPE, "%s: x must have at least 1 dim, got a 0-D tensor", def->name);
  int64_t row0 = a ? a->i[1] : 0, all_rows = a ? a->i[2] : 0;
  if (row0 < 0 || all_rows < 0 || (all_rows == 0 ? row0 != 0 : row0 > all_rows - x->shape[0]))
    return pd_set_error(PD_ERR_INVALID,
                        "%s: shard_row %lld and shard_rows %lld do not describe a shard of %lld rows of x "
                        "(shape %s)",
                        def->name, (long long)row0, (long long)all_rows, (long long)x->shape[0],
                        PD_SHAPE_STR(x));
  if (!(idx->ndim <= 1 || (idx->ndim == 2 && idx->shape[1] == 1)))
    return pd_set_error(PD_ERR_SHAPE, "%s: index must be 0-D, 1-D or of shape [n, 1], got shape %s",
                        def->name, PD_SHAPE_STR(idx));
  if (u->dtype != x->dtype)
    return pd_set_error(PD_ERR_DTYPE, "%s: updates has dtype %s but x has dtype %s", def->name,
                        pd_dtype_name(u->dtype), pd_dtype_name(x->dtype));
  int64_t want[PD_MAX_DIMS];
  int nd = 0;
  if (idx->ndim > 0) want[nd++] = idx->numel;
  for (int d = 1; d < x->ndim; d++) want[nd++] = x->shape[d];
  if (u->ndim != nd || !pd_shapes_agree(nd, u->shape, want)) {
    char b[160];
    return pd_set_error(
        PD_ERR_SHAPE, "%s: updates has shape %s but index of shape %s into x of shape %s needs %s", def->name,
        PD_SHAPE_STR(u), PD_SHAPE_STR(idx), PD_SHAPE_STR(x), pd_shape_str(nd, want, b, sizeof b));
  }
  pd_meta_of(x, out);
  *n_out = 1;
  return PD_OK;
}

/* Keeps the index entries inside the shard [row0, row0 + rows) (in order,
 * made local) and packs their updates rows into *packed (inner elements
 * each); *n becomes their number. */
static pd_status shard_entries(const char *op, int64_t *idx, int64_t *n, const unsigned char *u,
                               int64_t inner, int64_t es, int64_t row0, int64_t rows,
                               unsigned char **packed) {
  size_t row_bytes = (size_t)(inner * es);
  *packed = malloc(row_bytes * (size_t)(*n) + 1);
  if (!*packed)
    return pd_set_error(PD_ERR_MEMORY, "%s: out of memory for %lld updates rows", op, (long long)*n);
  int64_t m = 0;
  for (int64_t j = 0; j < *n; j++) {
    if (idx[j] < row0 || idx[j] >= row0 + rows) continue;
    idx[m] = idx[j] - row0;
    memcpy(*packed + (size_t)m * row_bytes, u + (size_t)j * row_bytes, row_bytes);
    m++;
  }
  *n = m;
  return PD_OK;
}

/* Applies the scatter to contiguous t (x's values already there). */
static pd_status scatter_apply(const pd_op_def *def, pd_tensor *t, pd_tensor *index, pd_tensor *updates,
                               const pd_attrs *a) {
  bool overwrite = a->i[0] != 0;
  int64_t row0 = a->i[1], rows = t->shape[0], all_rows = a->i[2] ? a->i[2] : rows;
  int64_t *idx = NULL, inner = rows ? t->numel / rows : 0;
  pd_status st = pd_mu_read_indices(def->name, "index", index, 0, all_rows, false, &idx);
  if (st != PD_OK) return st;
  pd_tensor *u = pd_kernel_contiguous(updates);
  if (!u) {
    free(idx);
    return pd_last_status();
  }
  int64_t es = (int64_t)pd_dtype_size(t->dtype), n = index->numel;
  unsigned char *packed = NULL;
  const void *src = pd_tensor_data(u);
  if (a->i[2]) {
    st = shard_entries(def->name, idx, &n, src, inner, es, row0, rows, &packed);
    src = packed;
  }
  int rc = 0;
  if (st == PD_OK && overwrite) {
    pdk_scatter_rows(pd_tensor_data(t), src, idx, n, inner, es);
  } else if (st == PD_OK) {
    pdk_zero_rows(pd_tensor_data(t), idx, n, inner, es);
    rc = pdk_index_add(t->dtype, pd_tensor_data(t), src, idx, 1, rows, n, inner, -1);
  }
  free(packed);
  pd_tensor_release(u);
  free(idx);
  if (st != PD_OK) return st;
  if (rc != 0)
    return pd_set_error(PD_ERR_DTYPE, "%s: dtype %s is not supported with overwrite=False", def->name,
                        pd_dtype_name(t->dtype));
  return PD_OK;
}

static pd_status scatter_kernel(const pd_kernel_ctx *ctx) {
  pd_mu_copy_into(ctx->out[0], ctx->in[0]);
  return scatter_apply(ctx->def, ctx->out[0], ctx->in[1], ctx->in[2], ctx->attrs);
}

static pd_status scatter__kernel(const pd_kernel_ctx *ctx) {
  pd_tensor *x = ctx->in[0], *t = pd_kernel_contiguous(x);
  if (!t) return pd_last_status();
  pd_status st = scatter_apply(ctx->def, t, ctx->in[1], ctx->in[2], ctx->attrs);
  if (st == PD_OK && t != x) pd_mu_copy_into(x, t);
  pd_tensor_release(t);
  return st;
}

static pd_status scatter_backward(const pd_backward_ctx *c) {
  pd_tensor *g = c->grad_out[0], *index = c->inputs[1];
  if (c->needs_grad[0]) {
    const pd_meta *um = &c->in_meta[2];
    pd_tensor *z = pd_zeros(um->ndim, um->shape, g->dtype);
    c->grad_in[0] = z ? pd_scatter(g, index, z, true) : NULL;
    pd_tensor_release(z);
    if (!c->grad_in[0]) return pd_last_status();
  }
  if (c->needs_grad[2]) {
    c->grad_in[2] = pd_gather(g, index, 0);
    if (!c->grad_in[2]) return pd_last_status();
  }
  return PD_OK;
}

PD_OPDEF(scatter, .n_in = 3, .n_out = 1, .flags = PD_OPF_DIFF | PD_OPF_SAVE_IN | PD_OPF_HALF_VIA_F32,
         .attr_names = "i0:overwrite,i1:shard_row,i2:shard_rows", .infer_meta = scatter_meta,
         .kernel = {[PD_PLACE_CPU] = scatter_kernel}, .backward = scatter_backward);

PD_OPDEF(scatter_, .n_in = 3, .n_out = 1, .flags = PD_OPF_INPLACE,
         .attr_names = "i0:overwrite,i1:shard_row,i2:shard_rows", .infer_meta = scatter_meta,
         .kernel = {[PD_PLACE_CPU] = scatter__kernel});

pd_tensor *pd_scatter(pd_tensor *x, pd_tensor *index, pd_tensor *updates, bool overwrite) {
  pd_tensor *in[3] = {x, index, updates};
  pd_attrs a = {.i = {overwrite}};
  return pd_dispatch1(PD_OP_scatter, in, 3, &a);
}

/* Without recording the inplace row writes x directly. When autograd
 * records, scatter runs on a copy of x and the result (placed as x, for a
 * DTensor) is written back into x (pd_mu_inplace_on_copy). */
pd_tensor *pd_scatter_(pd_tensor *x, pd_tensor *index, pd_tensor *updates, bool overwrite) {
  pd_tensor *in[3] = {x, index, updates};
  pd_attrs a = {.i = {overwrite}};
  if (!x || !index || !updates || !pd_mu_would_record(in, 3)) return pd_dispatch1(PD_OP_scatter_, in, 3, &a);
  return pd_mu_inplace_on_copy(PD_OP_scatter_, PD_OP_scatter, in, 3, &a);
}
