/* roll: circular shift along axes (or over the flattened tensor). */
#include <string.h>

#include "manipulation_util.h"
#include "paddlec/ops.h"

/* Attrs: v0 shifts, v1 axes (empty: roll the flattened tensor). */
static pd_status roll_check(const char *op, const pd_tensor *x, const pd_attrs *a) {
  if (a->nv[1] == 0) {
    if (a->nv[0] != 1)
      return pd_set_error(PD_ERR_INVALID,
                          "%s: shifts has %d entries but no axis is given (expected exactly 1)", op,
                          a->nv[0]);
    return PD_OK;
  }
  if (a->nv[0] != a->nv[1])
    return pd_set_error(PD_ERR_INVALID, "%s: shifts has %d entries but axis has %d; they must match", op,
                        a->nv[0], a->nv[1]);
  for (int k = 0; k < a->nv[1]; k++) {
    int ax;
    pd_status st = pd_norm_axis(op, a->v[1][k], x->ndim, &ax);
    if (st != PD_OK) return st;
  }
  return PD_OK;
}

static pd_status roll_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                           pd_meta *out, int *n_out) {
  (void)n_in;
  pd_meta_of(in[0], out);
  *n_out = 1;
  return roll_check(def->name, in[0], a);
}

static int64_t mod_pos(int64_t v, int64_t n) { return n ? ((v % n) + n) % n : 0; }

static pd_status roll_kernel(const pd_kernel_ctx *ctx) {
  pd_status st = roll_check(ctx->def->name, ctx->in[0], ctx->attrs);
  if (st != PD_OK) return st;
  pd_tensor *o = ctx->out[0];
  if (o->numel == 0) return PD_OK;
  pd_tensor *x = ctx->in[0], *xc = NULL;
  int nd = x->ndim;
  int64_t shape[PD_MAX_DIMS], xs[PD_MAX_DIMS], os[PD_MAX_DIMS], k[PD_MAX_DIMS] = {0};
  if (ctx->attrs->nv[1] == 0) { /* flattened: one dim of numel elements */
    xc = pd_kernel_contiguous(x);
    if (!xc) return pd_last_status();
    x = xc;
    nd = 1;
    shape[0] = x->numel;
    xs[0] = os[0] = 1;
    k[0] = mod_pos(ctx->attrs->v[0][0], shape[0]);
  } else {
    for (int d = 0; d < nd; d++) {
      shape[d] = x->shape[d];
      xs[d] = x->strides[d];
      os[d] = o->strides[d];
    }
    for (int j = 0; j < ctx->attrs->nv[1]; j++) {
      int ax;
      pd_norm_axis(ctx->def->name, ctx->attrs->v[1][j], nd, &ax);
      if (nd > 0) k[ax] += ctx->attrs->v[0][j];
    }
    for (int d = 0; d < nd; d++) k[d] = mod_pos(k[d], shape[d]);
  }
  /* out[(i + k) mod n] = x[i]: along each shifted dim two blocks; copy every
   * combination of blocks as one strided box. */
  int sh[PD_MAX_DIMS], m = 0;
  for (int d = 0; d < nd; d++)
    if (k[d]) sh[m++] = d;
  int64_t es = (int64_t)pd_dtype_size(x->dtype);
  char *ob = pd_tensor_data(o);
  const char *xb = pd_tensor_data(x);
  for (int combo = 0; combo < (1 << m); combo++) {
    int64_t box[PD_MAX_DIMS], xoff = 0, ooff = 0;
    memcpy(box, shape, sizeof(int64_t) * (size_t)nd);
    for (int j = 0; j < m; j++) {
      int d = sh[j];
      if (combo >> j & 1) { /* x[n-k, n) -> out[0, k) */
        box[d] = k[d];
        xoff += (shape[d] - k[d]) * xs[d];
      } else { /* x[0, n-k) -> out[k, n) */
        box[d] = shape[d] - k[d];
        ooff += k[d] * os[d];
      }
    }
    pdk_copy(nd, box, ob + ooff * es, os, xb + xoff * es, xs, es);
  }
  pd_tensor_release(xc);
  return PD_OK;
}

static pd_status roll_backward(const pd_backward_ctx *c) {
  if (!c->needs_grad[0]) return PD_OK;
  int64_t neg[PD_MAX_DIMS];
  for (int j = 0; j < c->attrs->nv[0]; j++) neg[j] = -c->attrs->v[0][j];
  c->grad_in[0] = pd_roll(c->grad_out[0], c->attrs->nv[0], neg, c->attrs->nv[1], c->attrs->v[1]);
  return c->grad_in[0] ? PD_OK : pd_last_status();
}

PD_OPDEF(roll, .n_in = 1, .n_out = 1, .flags = PD_OPF_DIFF, .attr_names = "v0:shifts,v1:axis",
         .infer_meta = roll_meta, .kernel = {[PD_PLACE_CPU] = roll_kernel}, .backward = roll_backward);

pd_tensor *pd_roll(pd_tensor *x, int nshifts, const int64_t *shifts, int naxes, const int64_t *axes) {
  pd_attrs a = {0};
  if (pd_mu_set_list("roll", "shifts", &a, 0, nshifts, shifts) != PD_OK ||
      pd_mu_set_list("roll", "axis", &a, 1, naxes, axes) != PD_OK)
    return NULL;
  return pd_dispatch1(PD_OP_roll, &x, 1, &a);
}
