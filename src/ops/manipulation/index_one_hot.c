/* one_hot: integer labels to float32 vectors of length num_classes. */
#include <stdlib.h>
#include <string.h>

#include "manipulation_util.h"
#include "paddlec/ops.h"

static pd_status one_hot_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                              pd_meta *out, int *n_out) {
  (void)n_in;
  const pd_tensor *x = in[0];
  pd_status st = pd_mu_check_index_dtype(def->name, "x", x);
  if (st != PD_OK) return st;
  if (a->i[0] <= 0)
    return pd_set_error(PD_ERR_INVALID, "%s: num_classes must be positive, got %lld", def->name,
                        (long long)a->i[0]);
  if (x->ndim + 1 > PD_MAX_DIMS)
    return pd_set_error(PD_ERR_SHAPE, "%s: the output rank %d exceeds the maximum %d", def->name, x->ndim + 1,
                        PD_MAX_DIMS);
  out->dtype = PD_FLOAT32;
  out->ndim = x->ndim + 1;
  memcpy(out->shape, x->shape, sizeof(int64_t) * (size_t)x->ndim);
  out->shape[x->ndim] = a->i[0];
  *n_out = 1;
  return PD_OK;
}

static pd_status one_hot_kernel(const pd_kernel_ctx *ctx) {
  const pd_tensor *x = ctx->in[0];
  int64_t *v = NULL, depth = ctx->attrs->i[0];
  pd_status st = pd_mu_read_raw(ctx->def->name, "x", x, &v);
  if (st != PD_OK) return st;
  for (int64_t i = 0; i < x->numel; i++) {
    if (v[i] < 0 || v[i] >= depth) {
      char pos[160];
      st = pd_set_error(PD_ERR_INDEX,
                        "%s: x%s = %lld is out of range for num_classes %lld (valid range [0, %lld))",
                        ctx->def->name, pd_mu_pos_str(x->ndim, x->shape, i, pos, sizeof pos), (long long)v[i],
                        (long long)depth, (long long)depth);
      free(v);
      return st;
    }
  }
  memset(pd_tensor_data(ctx->out[0]), 0, sizeof(float) * (size_t)ctx->out[0]->numel);
  pdk_one_hot(v, x->numel, depth, pd_tensor_data(ctx->out[0]));
  free(v);
  return PD_OK;
}

PD_OPDEF(one_hot, .n_in = 1, .n_out = 1, .attr_names = "i0:num_classes", .infer_meta = one_hot_meta,
         .kernel = {[PD_PLACE_CPU] = one_hot_kernel});

pd_tensor *pd_one_hot(pd_tensor *x, int64_t num_classes) {
  pd_attrs a = {.i = {num_classes}};
  return pd_dispatch1(PD_OP_one_hot, &x, 1, &a);
}
