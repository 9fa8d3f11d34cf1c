/* embedding (F.embedding): rows of weight picked by integer ids; the row
 * padding_idx reads as zeros and gets no gradient. embedding_grad is the
 * dense scatter-add backward (duplicate ids accumulate). */
#include <stdlib.h>
#include <string.h>

#include "manipulation_util.h"
#include "paddlec/ops.h"

/* Attrs of embedding: i0 padding_idx, i1 has_padding. c_embedding (Paddle's
 * op for a vocab-sharded table, which auto_parallel runs on a shard) adds
 * i2 start_index, the first row this shard holds, and i3 vocab_size, the
 * whole table's rows: ids outside the shard's rows read zeros. Of
 * embedding_grad: i0 num_embeddings (the shard's rows), i1 padding_idx
 * (normalised), i2 has_padding; c_embedding_grad adds i3 start_index and
 * i4 vocab_size (ids outside the shard add nothing); the optional third
 * input is the weight, read for its placement only. */

/* A shard's row range [start, start + rows) must lie in the vocabulary. */
static pd_status check_shard(const pd_op_def *def, int64_t start, int64_t rows, int64_t vocab) {
  if (vocab < 1 || rows < 0 || start < 0 || start > vocab - rows)
    return pd_set_error(PD_ERR_INVALID,
                        "%s: a shard of %lld rows from start_index %lld does not fit a vocab_size of %lld",
                        def->name, (long long)rows, (long long)start, (long long)vocab);
  return PD_OK;
}
static pd_status norm_padding(const char *op, int64_t pad, int64_t n, int64_t *out) {
  if (pad < -n || pad >= n)
    return pd_set_error(PD_ERR_INDEX,
                        "%s: padding_idx %lld is out of range for num_embeddings %lld (valid range "
                        "[%lld, %lld))",
                        op, (long long)pad, (long long)n, (long long)-n, (long long)n);
  *out = pad < 0 ? pad + n : pad;
  return PD_OK;
}

static pd_status embedding_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                                pd_meta *out, int *n_out) {
  (void)n_in;
  const pd_tensor *ids = in[0], *w = in[1];
  pd_status st = pd_mu_check_index_dtype(def->name, "x", ids);
  if (st != PD_OK) return st;
  if (w->ndim != 2)
    return pd_set_error(PD_ERR_SHAPE, "%s: weight must be 2-D [num_embeddings, embedding_dim], got shape %s",
                        def->name, PD_SHAPE_STR(w));
  if (ids->ndim + 1 > PD_MAX_DIMS)
    return pd_set_error(PD_ERR_SHAPE, "%s: the output rank %d exceeds the maximum %d", def->name,
                        ids->ndim + 1, PD_MAX_DIMS);
  bool sharded = def == &pd_opdef_c_embedding;
  if (sharded && (st = check_shard(def, a->i[2], w->shape[0], a->i[3])) != PD_OK) return st;
  int64_t pad, rows = sharded ? a->i[3] : w->shape[0];
  if (a->i[1] && (st = norm_padding(def->name, a->i[0], rows, &pad)) != PD_OK) return st;
  out->dtype = w->dtype;
  out->ndim = ids->ndim + 1;
  memcpy(out->shape, ids->shape, sizeof(int64_t) * (size_t)ids->ndim);
  out->shape[ids->ndim] = w->shape[1];
  *n_out = 1;
  return PD_OK;
}

/* A vocab shard's ids: id - start where the shard holds the row and it is
 * not the padding row, else -1. */
static void shard_ids(int64_t *idx, int64_t m, int64_t start, int64_t rows, int64_t pad) {
  for (int64_t i = 0; i < m; i++)
    idx[i] = idx[i] != pad && idx[i] >= start && idx[i] < start + rows ? idx[i] - start : -1;
}

/* Rows of w (n x d) picked by idx; -1 picks a zero row. */
static void gather_rows(char *o, const char *w, const int64_t *idx, int64_t m, int64_t d, int64_t es) {
  for (int64_t i = 0; i < m; i++) {
    if (idx[i] < 0)
      memset(o + i * d * es, 0, (size_t)(d * es));
    else
      memcpy(o + i * d * es, w + idx[i] * d * es, (size_t)(d * es));
  }
}

static pd_status embedding_kernel(const pd_kernel_ctx *ctx) {
  int64_t n = ctx->in[1]->shape[0], d = ctx->in[1]->shape[1], m = ctx->in[0]->numel, pad = -1, *idx = NULL;
  bool sharded = ctx->def == &pd_opdef_c_embedding;
  int64_t rows = sharded ? ctx->attrs->i[3] : n;
  if (ctx->attrs->i[1]) norm_padding(ctx->def->name, ctx->attrs->i[0], rows, &pad);
  pd_status st = pd_mu_read_indices(ctx->def->name, "x", ctx->in[0], 0, rows, false, &idx);
  if (st != PD_OK) return st;
  if (sharded) {
    shard_ids(idx, m, ctx->attrs->i[2], n, pad);
    pad = -1;
  }
  pd_tensor *w = pd_kernel_contiguous(ctx->in[1]);
  if (!w) {
    free(idx);
    return pd_last_status();
  }
  int64_t es = (int64_t)pd_dtype_size(w->dtype);
  char *o = pd_tensor_data(ctx->out[0]);
  if (sharded)
    gather_rows(o, pd_tensor_data(w), idx, m, d, es);
  else
    pdk_gather_axis(pd_tensor_data(w), o, idx, 1, n, m, d, es);
  if (pad >= 0)
    for (int64_t i = 0; i < m; i++)
      if (idx[i] == pad) memset(o + i * d * es, 0, (size_t)(d * es));
  pd_tensor_release(w);
  free(idx);
  return PD_OK;
}

static pd_status embedding_backward(const pd_backward_ctx *c) {
  if (!c->needs_grad[1]) return PD_OK;
  int64_t n = c->in_meta[1].shape[0], pad = 0;
  if (c->attrs->i[1]) norm_padding("embedding", c->attrs->i[0], n, &pad);
  pd_attrs g = {.i = {n, pad, c->attrs->i[1]}};
  pd_tensor *in[3] = {c->inputs[0], c->grad_out[0], c->inputs[1]};
  c->grad_in[1] = pd_dispatch1(PD_OP_embedding_grad, in, 3, &g);
  return c->grad_in[1] ? PD_OK : pd_last_status();
}

PD_OPDEF(embedding, .n_in = 2, .n_out = 1, .flags = PD_OPF_DIFF | PD_OPF_SAVE_IN | PD_OPF_RECOMPUTE,
         .attr_names = "i0:padding_idx,i1:has_padding", .infer_meta = embedding_meta,
         .kernel = {[PD_PLACE_CPU] = embedding_kernel}, .backward = embedding_backward);

/* Not differentiable: a partitioned Program holds its backward as
 * c_embedding_grad already. */
PD_OPDEF(c_embedding, .n_in = 2, .n_out = 1,
         .attr_names = "i0:padding_idx,i1:has_padding,i2:start_index,i3:vocab_size",
         .infer_meta = embedding_meta, .kernel = {[PD_PLACE_CPU] = embedding_kernel});

pd_tensor *pd_embedding(pd_tensor *ids, pd_tensor *weight, int64_t padding_idx) {
  pd_tensor *in[2] = {ids, weight};
  pd_attrs a = {.i = {padding_idx == PD_NO_PADDING ? 0 : padding_idx, padding_idx != PD_NO_PADDING}};
  return pd_dispatch1(PD_OP_embedding, in, 2, &a);
}

/* ---- embedding_grad: dense [num_embeddings, dim] scatter-add of the grad ------------ */

static pd_status embedding_grad_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                                     pd_meta *out, int *n_out) {
  if (n_in != 2 && n_in != 3)
    return pd_set_error(PD_ERR_INVALID, "%s: expects 2 or 3 inputs (ids, grad, [weight]), got %d", def->name,
                        n_in);
  const pd_tensor *ids = in[0], *g = in[1];
  pd_status st = pd_mu_check_index_dtype(def->name, "x", ids);
  if (st != PD_OK) return st;
  bool ok = g->ndim == ids->ndim + 1 && pd_shapes_agree(ids->ndim, g->shape, ids->shape);
  if (!ok)
    return pd_set_error(PD_ERR_SHAPE, "%s: grad of shape %s does not match ids of shape %s plus one dim",
                        def->name, PD_SHAPE_STR(g), PD_SHAPE_STR(ids));
  if (n_in == 3 &&
      (in[2]->ndim != 2 || in[2]->shape[0] != a->i[0] || in[2]->shape[1] != g->shape[g->ndim - 1]))
    return pd_set_error(PD_ERR_SHAPE, "%s: weight of shape %s does not match num_embeddings %lld and grad %s",
                        def->name, PD_SHAPE_STR(in[2]), (long long)a->i[0], PD_SHAPE_STR(g));
  bool sharded = def == &pd_opdef_c_embedding_grad;
  if (sharded && (st = check_shard(def, a->i[3], a->i[0], a->i[4])) != PD_OK) return st;
  int64_t rows = sharded ? a->i[4] : a->i[0];
  if (a->i[0] < 0 || (a->i[2] && (a->i[1] < 0 || a->i[1] >= rows)))
    return pd_set_error(PD_ERR_INVALID, "%s: num_embeddings %lld with padding_idx %lld is invalid", def->name,
                        (long long)a->i[0], (long long)a->i[1]);
  out->dtype = g->dtype;
  out->ndim = 2;
  out->shape[0] = a->i[0];
  out->shape[1] = g->shape[g->ndim - 1];
  *n_out = 1;
  return PD_OK;
}

static pd_status embedding_grad_kernel(const pd_kernel_ctx *ctx) {
  pd_tensor *o = ctx->out[0];
  int64_t n = ctx->attrs->i[0], d = o->shape[1], *idx = NULL, skip = ctx->attrs->i[2] ? ctx->attrs->i[1] : -1;
  bool sharded = ctx->def == &pd_opdef_c_embedding_grad;
  pd_status st =
      pd_mu_read_indices(ctx->def->name, "x", ctx->in[0], 0, sharded ? ctx->attrs->i[4] : n, false, &idx);
  if (st != PD_OK) return st;
  if (sharded) {
    shard_ids(idx, ctx->in[0]->numel, ctx->attrs->i[3], n, skip);
    skip = -1;
  }
  memset(pd_tensor_data(o), 0, (size_t)o->numel * pd_dtype_size(o->dtype));
  pd_tensor *g = pd_kernel_contiguous(ctx->in[1]);
  int rc =
      g ? pdk_index_add(o->dtype, pd_tensor_data(o), pd_tensor_data(g), idx, 1, n, ctx->in[0]->numel, d, skip)
        : 0;
  pd_tensor_release(g);
  free(idx);
  if (!g) return pd_last_status();
  if (rc != 0)
    return pd_set_error(PD_ERR_DTYPE, "%s: dtype %s is not supported", ctx->def->name,
                        pd_dtype_name(o->dtype));
  return PD_OK;
}

static pd_status embedding_grad_backward(const pd_backward_ctx *c) {
  if (!c->needs_grad[1]) return PD_OK;
  pd_attrs e = {.i = {c->attrs->i[1], c->attrs->i[2]}};
  pd_tensor *in[2] = {c->inputs[0], c->grad_out[0]};
  c->grad_in[1] = pd_dispatch1(PD_OP_embedding, in, 2, &e);
  return c->grad_in[1] ? PD_OK : pd_last_status();
}

PD_OPDEF(embedding_grad, .n_in = -1, .n_out = 1, .flags = PD_OPF_DIFF | PD_OPF_SAVE_IN | PD_OPF_HALF_VIA_F32,
         .attr_names = "i0:num_embeddings,i1:padding_idx,i2:has_padding", .infer_meta = embedding_grad_meta,
         .kernel = {[PD_PLACE_CPU] = embedding_grad_kernel}, .backward = embedding_grad_backward);

PD_OPDEF(c_embedding_grad, .n_in = -1, .n_out = 1, .flags = PD_OPF_HALF_VIA_F32,
         .attr_names = "i0:num_embeddings,i1:padding_idx,i2:has_padding,i3:start_index,i4:vocab_size",
         .infer_meta = embedding_grad_meta, .kernel = {[PD_PLACE_CPU] = embedding_grad_kernel});
