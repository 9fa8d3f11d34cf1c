/* index_sample: per-row gather, out[i, j] = x[i, index[i, j]]. */
#include <stdlib.h>

#include "manipulation_util.h"
#include "paddlec/ops.h"

static pd_status index_sample_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                                   pd_meta *out, int *n_out) {
  (void)n_in;
  (void)a;
  const pd_tensor *x = in[0], *idx = in[1];
  pd_status st = pd_mu_check_index_dtype(def->name, "index", idx);
  if (st != PD_OK) return st;
  if (x->ndim != 2 || idx->ndim != 2 || x->shape[0] != idx->shape[0])
    return pd_set_error(PD_ERR_SHAPE,
                        "%s: x (shape %s) and index (shape %s) must both be 2-D with the same first "
                        "dim",
                        def->name, PD_SHAPE_STR(x), PD_SHAPE_STR(idx));
  out->dtype = x->dtype;
  out->ndim = 2;
  out->shape[0] = idx->shape[0];
  out->shape[1] = idx->shape[1];
  *n_out = 1;
  return PD_OK;
}

static pd_status index_sample_kernel(const pd_kernel_ctx *ctx) {
  int64_t *idx = NULL;
  pd_status st =
      pd_mu_read_indices(ctx->def->name, "index", ctx->in[1], 1, ctx->in[0]->shape[1], false, &idx);
  if (st != PD_OK) return st;
  if (ctx->out[0]->numel > 0) {
    pd_tensor *x = pd_kernel_contiguous(ctx->in[0]);
    if (!x) {
      free(idx);
      return pd_last_status();
    }
    pdk_index_sample(pd_tensor_data(x), pd_tensor_data(ctx->out[0]), idx, x->shape[0], x->shape[1],
                     ctx->in[1]->shape[1], (int64_t)pd_dtype_size(x->dtype));
    pd_tensor_release(x);
  }
  free(idx);
  return PD_OK;
}

/* grad of x: the grad added at flat positions i * n + index[i, j] of zeros */
static pd_status index_sample_backward(const pd_backward_ctx *c) {
  if (!c->needs_grad[0]) return PD_OK;
  const pd_meta *xm = &c->in_meta[0];
  pd_tensor *index = c->inputs[1];
  int64_t b = xm->shape[0], n = xm->shape[1], k = index->shape[1], *v = NULL;
  pd_status st = pd_mu_read_indices("index_sample", "index", index, 1, n, false, &v);
  if (st != PD_OK) return st;
  for (int64_t i = 0; i < b; i++)
    for (int64_t j = 0; j < k; j++) v[i * k + j] += i * n;
  int64_t bk = b * k, bn = b * n;
  pd_tensor *fi = pd_to_tensor(v, PD_INT64, 1, &bk);
  free(v);
  pd_tensor *g = pd_reshape(c->grad_out[0], 1, &bk);
  pd_tensor *z = pd_zeros(1, &bn, c->grad_out[0]->dtype);
  pd_tensor *r = fi && g && z ? pd_index_add(z, fi, 0, g) : NULL;
  c->grad_in[0] = r ? pd_reshape(r, 2, xm->shape) : NULL;
  pd_tensor_release(fi);
  pd_tensor_release(g);
  pd_tensor_release(z);
  pd_tensor_release(r);
  return c->grad_in[0] ? PD_OK : pd_last_status();
}

PD_OPDEF(index_sample, .attr_names = "", .n_in = 2, .n_out = 1,
         .flags = PD_OPF_DIFF | PD_OPF_SAVE_IN | PD_OPF_BACKWARD_READS_VALUES,
         .infer_meta = index_sample_meta, .kernel = {[PD_PLACE_CPU] = index_sample_kernel},
         .backward = index_sample_backward);

pd_tensor *pd_index_sample(pd_tensor *x, pd_tensor *index) {
  pd_tensor *in[2] = {x, index};
  return pd_dispatch1(PD_OP_index_sample, in, 2, NULL);
}
