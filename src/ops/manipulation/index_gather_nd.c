/* gather_nd and scatter_nd_add: index [..., K] addresses the first K dims of
 * x; each index row selects (or adds into) a slice of x.shape[K:]. */
#include <stdlib.h>
#include <string.h>

#include "manipulation_util.h"
#include "paddlec/ops.h"

static pd_status nd_check(const char *op, const pd_tensor *x, const pd_tensor *idx, int *k) {
  pd_status st = pd_mu_check_index_dtype(op, "index", idx);
  if (st != PD_OK) return st;
  if (idx->ndim < 1)
    return pd_set_error(PD_ERR_SHAPE, "%s: index must have at least 1 dim, got a 0-D tensor", op);
  *k = (int)idx->shape[idx->ndim - 1];
  if (*k > x->ndim)
    return pd_set_error(PD_ERR_SHAPE,
                        "%s: the last dim of index (shape %s) is %d, more than the rank %d of x "
                        "(shape %s)",
                        op, PD_SHAPE_STR(idx), *k, x->ndim, PD_SHAPE_STR(x));
  if (idx->ndim - 1 + x->ndim - *k > PD_MAX_DIMS)
    return pd_set_error(PD_ERR_SHAPE, "%s: the output rank %d exceeds the maximum %d", op,
                        idx->ndim - 1 + x->ndim - *k, PD_MAX_DIMS);
  return PD_OK;
}

/* index.shape[:-1] + x.shape[K:] */
static void nd_out_shape(const pd_tensor *x, const pd_tensor *idx, int k, int *nd, int64_t *shape) {
  *nd = 0;
  for (int d = 0; d < idx->ndim - 1; d++) shape[(*nd)++] = idx->shape[d];
  for (int d = k; d < x->ndim; d++) shape[(*nd)++] = x->shape[d];
}

/* Row numbers into x viewed as [P, S]: rows[m] = sum_j index[m, j] * stride_j.
 * Every component is checked against its dim (negatives allowed or not). */
static pd_status nd_rows(const char *op, const pd_tensor *x, const pd_tensor *idx, int k, bool allow_neg,
                         int64_t **rows, int64_t *m, int64_t *p, int64_t *s) {
  int64_t *v = NULL;
  pd_status st = pd_mu_read_raw(op, "index", idx, &v);
  if (st != PD_OK) return st;
  *m = 1;
  for (int d = 0; d < idx->ndim - 1; d++) *m *= idx->shape[d];
  *p = *s = 1;
  for (int d = 0; d < k; d++) *p *= x->shape[d];
  for (int d = k; d < x->ndim; d++) *s *= x->shape[d];
  int64_t *r = malloc(sizeof(int64_t) * (size_t)(*m ? *m : 1));
  if (!r) {
    free(v);
    return pd_set_error(PD_ERR_MEMORY, "%s: out of memory", op);
  }
  for (int64_t i = 0; i < *m; i++) {
    int64_t row = 0;
    for (int j = 0; j < k; j++) {
      int64_t val = v[i * k + j], size = x->shape[j];
      if (val >= size || val < (allow_neg ? -size : 0)) {
        free(r);
        free(v);
        return pd_mu_index_error(op, "index", idx->ndim, idx->shape, i * k + j, val, j, size, allow_neg);
      }
      row = row * size + (val < 0 ? val + size : val);
    }
    r[i] = row;
  }
  free(v);
  *rows = r;
  return PD_OK;
}

/* ---- gather_nd ------------------------------------------------------------------ */

static pd_status gather_nd_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                                pd_meta *out, int *n_out) {
  (void)n_in;
  (void)a;
  int k;
  pd_status st = nd_check(def->name, in[0], in[1], &k);
  if (st != PD_OK) return st;
  out->dtype = in[0]->dtype;
  nd_out_shape(in[0], in[1], k, &out->ndim, out->shape);
  *n_out = 1;
  return PD_OK;
}

static pd_status gather_nd_kernel(const pd_kernel_ctx *ctx) {
  int k = (int)ctx->in[1]->shape[ctx->in[1]->ndim - 1];
  int64_t *rows = NULL, m, p, s;
  pd_status st = nd_rows(ctx->def->name, ctx->in[0], ctx->in[1], k, true, &rows, &m, &p, &s);
  if (st != PD_OK) return st;
  if (ctx->out[0]->numel > 0) {
    pd_tensor *x = pd_kernel_contiguous(ctx->in[0]);
    if (!x) {
      free(rows);
      return pd_last_status();
    }
    pdk_gather_axis(pd_tensor_data(x), pd_tensor_data(ctx->out[0]), rows, 1, p, m, s,
                    (int64_t)pd_dtype_size(x->dtype));
    pd_tensor_release(x);
  }
  free(rows);
  return PD_OK;
}

/* index as int64 with negative components made non-negative, computed by
 * ops (index + (index < 0) * x.shape[:K]) so that a DTensor index keeps its
 * placement. */
static pd_tensor *normalised_index(const pd_meta *xm, pd_tensor *index) {
  int64_t k = index->ndim ? index->shape[index->ndim - 1] : 0;
  pd_tensor *i64 = pd_cast(index, PD_INT64);
  pd_tensor *dims = pd_to_tensor(xm->shape, PD_INT64, 1, &k);
  pd_tensor *neg = i64 ? pd_less_than_scalar(i64, 0) : NULL;
  pd_tensor *negi = neg ? pd_cast(neg, PD_INT64) : NULL;
  pd_tensor *shift = negi && dims ? pd_multiply(negi, dims) : NULL;
  pd_tensor *t = shift ? pd_add(i64, shift) : NULL;
  pd_tensor_release(shift);
  pd_tensor_release(negi);
  pd_tensor_release(neg);
  pd_tensor_release(dims);
  pd_tensor_release(i64);
  return t;
}

static pd_status gather_nd_backward(const pd_backward_ctx *c) {
  if (!c->needs_grad[0]) return PD_OK;
  const pd_meta *xm = &c->in_meta[0];
  pd_tensor *idx = normalised_index(xm, c->inputs[1]);
  pd_tensor *z = idx ? pd_zeros(xm->ndim, xm->shape, c->grad_out[0]->dtype) : NULL;
  c->grad_in[0] = z ? pd_scatter_nd_add(z, idx, c->grad_out[0]) : NULL;
  pd_tensor_release(idx);
  pd_tensor_release(z);
  return c->grad_in[0] ? PD_OK : pd_last_status();
}

PD_OPDEF(gather_nd, .attr_names = "", .n_in = 2, .n_out = 1,
         .flags = PD_OPF_DIFF | PD_OPF_SAVE_IN | PD_OPF_BACKWARD_READS_VALUES, .infer_meta = gather_nd_meta,
         .kernel = {[PD_PLACE_CPU] = gather_nd_kernel}, .backward = gather_nd_backward);

pd_tensor *pd_gather_nd(pd_tensor *x, pd_tensor *index) {
  pd_tensor *in[2] = {x, index};
  return pd_dispatch1(PD_OP_gather_nd, in, 2, NULL);
}

/* ---- scatter_nd_add --------------------------------------------------------------- */

static pd_status scatter_nd_add_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                                     pd_meta *out, int *n_out) {
  (void)n_in;
  (void)a;
  const pd_tensor *x = in[0], *idx = in[1], *u = in[2];
  int k, nd;
  pd_status st = nd_check(def->name, x, idx, &k);
  if (st != PD_OK) return st;
  if (u->dtype != x->dtype)
    return pd_set_error(PD_ERR_DTYPE, "%s: updates has dtype %s but x has dtype %s", def->name,
                        pd_dtype_name(u->dtype), pd_dtype_name(x->dtype));
  int64_t want[PD_MAX_DIMS];
  nd_out_shape(x, idx, k, &nd, want);
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

static pd_status scatter_nd_add_kernel(const pd_kernel_ctx *ctx) {
  int k = (int)ctx->in[1]->shape[ctx->in[1]->ndim - 1];
  int64_t *rows = NULL, m, p, s;
  pd_status st = nd_rows(ctx->def->name, ctx->in[0], ctx->in[1], k, false, &rows, &m, &p, &s);
  if (st != PD_OK) return st;
  pd_mu_copy_into(ctx->out[0], ctx->in[0]);
  pd_tensor *u = pd_kernel_contiguous(ctx->in[2]);
  int rc = u ? pdk_index_add(ctx->out[0]->dtype, pd_tensor_data(ctx->out[0]), pd_tensor_data(u), rows, 1, p,
                             m, s, -1)
             : 0;
  pd_tensor_release(u);
  free(rows);
  if (!u) return pd_last_status();
  if (rc != 0)
    return pd_set_error(PD_ERR_DTYPE, "%s: dtype %s is not supported", ctx->def->name,
                        pd_dtype_name(ctx->out[0]->dtype));
  return PD_OK;
}

static pd_status scatter_nd_add_backward(const pd_backward_ctx *c) {
  if (c->needs_grad[0]) c->grad_in[0] = pd_tensor_retain(c->grad_out[0]);
  if (c->needs_grad[2]) {
    c->grad_in[2] = pd_gather_nd(c->grad_out[0], c->inputs[1]);
    if (!c->grad_in[2]) return pd_last_status();
  }
  return PD_OK;
}

PD_OPDEF(scatter_nd_add, .attr_names = "", .n_in = 3, .n_out = 1,
         .flags = PD_OPF_DIFF | PD_OPF_SAVE_IN | PD_OPF_HALF_VIA_F32, .infer_meta = scatter_nd_add_meta,
         .kernel = {[PD_PLACE_CPU] = scatter_nd_add_kernel}, .backward = scatter_nd_add_backward);

pd_tensor *pd_scatter_nd_add(pd_tensor *x, pd_tensor *index, pd_tensor *updates) {
  pd_tensor *in[3] = {x, index, updates};
  return pd_dispatch1(PD_OP_scatter_nd_add, in, 3, NULL);
}
