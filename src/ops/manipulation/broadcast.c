/* broadcast_to and expand_as: views with zero strides (as expand). */
#include <string.h>

#include "manipulation_util.h"
#include "paddlec/ops.h"

/* Target shape: at least x's rank; -1 keeps x's dim (not in new leading
 * dims) in an attribute, and is an unknown dim in y's shape (`of_y`); x's
 * dims must be 1 or equal to the target. */
static pd_status bcast_shape(const char *op, const pd_tensor *x, int n, const int64_t *want, bool of_y,
                             int64_t *shape) {
  char b[160];
  if (n < x->ndim || n > PD_MAX_DIMS)
    return pd_set_error(PD_ERR_SHAPE, "%s: target shape %s has fewer dims than x's shape %s", op,
                        pd_shape_str(n, want, b, sizeof b), PD_SHAPE_STR(x));
  int lead = n - x->ndim;
  for (int d = 0; d < n; d++) {
    int64_t w = want[d], have = d < lead ? 1 : x->shape[d - lead];
    if (w == -1 && !of_y) {
      if (d < lead)
        return pd_set_error(PD_ERR_SHAPE, "%s: target shape %s has -1 in new leading dim %d", op,
                            pd_shape_str(n, want, b, sizeof b), d);
      w = have;
    }
    if (w < -1)
      return pd_set_error(PD_ERR_SHAPE, "%s: target shape %s has a negative dim %d", op,
                          pd_shape_str(n, want, b, sizeof b), d);
    if (have != 1 && !pd_dims_agree(have, w))
      return pd_set_error(PD_ERR_SHAPE, "%s: cannot broadcast x of shape %s to %s (dim %d: %lld vs %lld)", op,
                          PD_SHAPE_STR(x), pd_shape_str(n, want, b, sizeof b), d, (long long)have,
                          (long long)w);
    shape[d] = w >= 0 || have == 1 ? w : have; /* an unknown y dim: x's size unless that is 1 */
  }
  return PD_OK;
}

/* expand_as reads the target from y's shape, broadcast_to from attrs. */
static void target(pd_tensor *const *in, int n_in, const pd_attrs *a, int *n, const int64_t **want) {
  if (n_in == 2) {
    *n = in[1]->ndim;
    *want = in[1]->shape;
  } else {
    *n = a->nv[0];
    *want = a->v[0];
  }
}

static pd_status bcast_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                            pd_meta *out, int *n_out) {
  int n;
  const int64_t *want;
  target(in, n_in, a, &n, &want);
  out->dtype = in[0]->dtype;
  out->ndim = n;
  *n_out = 1;
  return bcast_shape(def->name, in[0], n, want, n_in == 2, out->shape);
}

static pd_status bcast_kernel(const pd_kernel_ctx *ctx) {
  pd_tensor *x = ctx->in[0];
  int n;
  const int64_t *want;
  target(ctx->in, ctx->n_in, ctx->attrs, &n, &want);
  int64_t shape[PD_MAX_DIMS], strides[PD_MAX_DIMS];
  pd_status st = bcast_shape(ctx->def->name, x, n, want, ctx->n_in == 2, shape);
  if (st != PD_OK) return st;
  int lead = n - x->ndim;
  for (int d = 0; d < n; d++)
    strides[d] = d < lead || (x->shape[d - lead] == 1 && shape[d] != 1) ? 0 : x->strides[d - lead];
  ctx->out[0] = pd_tensor_new_view(x, n, shape, strides, x->offset);
  return ctx->out[0] ? PD_OK : pd_last_status();
}

static pd_status bcast_backward(const pd_backward_ctx *c) {
  if (!c->needs_grad[0]) return PD_OK;
  c->grad_in[0] = pd_grad_reduce_to(c->grad_out[0], c->in_meta[0].ndim, c->in_meta[0].shape);
  return c->grad_in[0] ? PD_OK : pd_last_status();
}

PD_OPDEF(broadcast_to, .n_in = 1, .n_out = 1, .flags = PD_OPF_DIFF | PD_OPF_VIEW, .attr_names = "v0:shape",
         .infer_meta = bcast_meta, .kernel = {[PD_PLACE_CPU] = bcast_kernel}, .backward = bcast_backward);

PD_OPDEF(expand_as, .attr_names = "", .n_in = 2, .n_out = 1, .flags = PD_OPF_DIFF | PD_OPF_VIEW,
         .infer_meta = bcast_meta, .kernel = {[PD_PLACE_CPU] = bcast_kernel}, .backward = bcast_backward);

pd_tensor *pd_broadcast_to(pd_tensor *x, int ndim, const int64_t *shape) {
  pd_attrs a = {0};
  if (pd_mu_set_list("broadcast_to", "shape", &a, 0, ndim, shape) != PD_OK) return NULL;
  return pd_dispatch1(PD_OP_broadcast_to, &x, 1, &a);
}

pd_tensor *pd_expand_as(pd_tensor *x, pd_tensor *y) {
  pd_tensor *in[2] = {x, y};
  return pd_dispatch1(PD_OP_expand_as, in, 2, NULL);
}
