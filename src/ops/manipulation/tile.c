/* tile: repeats x along each dim (a copy). */
#include <string.h>

#include "../../core/shape_check.h"
#include "manipulation_util.h"
#include "paddlec/ops.h"

/* x's shape and the repeats, both padded with leading 1s to the output rank. */
static pd_status tile_geom(const char *op, const pd_tensor *x, const pd_attrs *a, int *nd, int64_t *xs,
                           int64_t *reps) {
  int n = a->nv[0];
  *nd = n > x->ndim ? n : x->ndim;
  for (int k = 0; k < n; k++)
    if (a->v[0][k] <= 0)
      return pd_set_error(PD_ERR_INVALID, "%s: repeat_times[%d] = %lld must be greater than 0", op, k,
                          (long long)a->v[0][k]);
  for (int d = 0; d < *nd; d++) {
    int xd = d - (*nd - x->ndim), rd = d - (*nd - n);
    xs[d] = xd < 0 ? 1 : x->shape[xd];
    reps[d] = rd < 0 ? 1 : a->v[0][rd];
  }
  return PD_OK;
}

static pd_status tile_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                           pd_meta *out, int *n_out) {
  (void)n_in;
  int64_t xs[PD_MAX_DIMS], reps[PD_MAX_DIMS];
  pd_status st = tile_geom(def->name, in[0], a, &out->ndim, xs, reps);
  if (st != PD_OK) return st;
  for (int d = 0; d < out->ndim; d++)
    if (pd_mul_overflow(xs[d], reps[d], &out->shape[d])) {
      char b[160];
      return pd_set_error(PD_ERR_SHAPE,
                          "%s: repeat_times %s on x of shape %s give more than INT64_MAX elements", def->name,
                          pd_shape_str(a->nv[0], a->v[0], b, sizeof b), PD_SHAPE_STR(in[0]));
    }
  out->dtype = in[0]->dtype;
  *n_out = 1;
  return PD_OK;
}

static pd_status tile_kernel(const pd_kernel_ctx *ctx) {
  int nd;
  int64_t xs[PD_MAX_DIMS], reps[PD_MAX_DIMS];
  pd_status st = tile_geom(ctx->def->name, ctx->in[0], ctx->attrs, &nd, xs, reps);
  if (st != PD_OK) return st;
  if (ctx->out[0]->numel == 0) return PD_OK;
  pd_tensor *x = pd_kernel_contiguous(ctx->in[0]);
  if (!x) return pd_last_status();
  pdk_tile(pd_tensor_data(x), nd, xs, reps, pd_tensor_data(ctx->out[0]), (int64_t)pd_dtype_size(x->dtype));
  pd_tensor_release(x);
  return PD_OK;
}

/* The grad sums the repeats away one dim at a time: viewed as
 * [prefix, reps[d], xs[d], suffix], sum over the reps axis. */
static pd_status tile_backward(const pd_backward_ctx *c) {
  if (!c->needs_grad[0]) return PD_OK;
  const pd_meta *xm = &c->in_meta[0];
  pd_tensor *g = c->grad_out[0];
  int nd;
  const int64_t *gs = pd_global_shape(g, &nd); /* a DTensor gradient: the ops below take global shapes */
  int64_t cur[PD_MAX_DIMS], reps[PD_MAX_DIMS];
  memcpy(cur, gs, sizeof(int64_t) * (size_t)nd);
  for (int d = 0; d < nd; d++) {
    int rd = d - (nd - c->attrs->nv[0]);
    reps[d] = rd < 0 ? 1 : c->attrs->v[0][rd];
  }
  pd_tensor *acc = pd_tensor_retain(g);
  for (int d = 0; d < nd && acc; d++) {
    if (reps[d] == 1) continue;
    int64_t pre = 1, post = 1;
    for (int k = 0; k < d; k++) pre *= cur[k];
    for (int k = d + 1; k < nd; k++) post *= cur[k];
    int64_t v4[4] = {pre, reps[d], cur[d] / reps[d], post}, ax = 1;
    pd_tensor *r = pd_reshape(acc, 4, v4);
    pd_tensor_release(acc);
    acc = r ? pd_sum(r, &ax, 1, false) : NULL;
    pd_tensor_release(r);
    cur[d] /= reps[d];
  }
  if (!acc) return pd_last_status();
  c->grad_in[0] = pd_reshape(acc, xm->ndim, xm->shape);
  pd_tensor_release(acc);
  return c->grad_in[0] ? PD_OK : pd_last_status();
}

PD_OPDEF(tile, .n_in = 1, .n_out = 1, .flags = PD_OPF_DIFF, .attr_names = "v0:repeat_times",
         .infer_meta = tile_meta, .kernel = {[PD_PLACE_CPU] = tile_kernel}, .backward = tile_backward);

pd_tensor *pd_tile(pd_tensor *x, int n, const int64_t *repeat_times) {
  pd_attrs a = {0};
  if (pd_mu_set_list("tile", "repeat_times", &a, 0, n, repeat_times) != PD_OK) return NULL;
  return pd_dispatch1(PD_OP_tile, &x, 1, &a);
}
