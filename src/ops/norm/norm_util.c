/* Helpers of the normalization ops (see norm/norm_util.h). */
#include <stdlib.h>
#include <string.h>

#include "norm_util.h"

pd_tensor *pd_norm_keep(pd_norm_tmps *s, pd_tensor *t) {
  if (!t) return NULL;
  if (s->n < PD_NORM_TMPS) {
    s->t[s->n++] = t;
    return t;
  }
  if (s->nmore == s->capmore) {
    int cap = s->capmore ? 2 * s->capmore : 32;
    pd_tensor **m = realloc(s->more, sizeof *m * (size_t)cap);
    if (!m) { /* cannot keep it: release, and the formula fails as on any NULL */
      pd_tensor_release(t);
      pd_set_error(PD_ERR_MEMORY, "norm backward: out of memory for temporaries");
      return NULL;
    }
    s->more = m;
    s->capmore = cap;
  }
  s->more[s->nmore++] = t;
  return t;
}

void pd_norm_tmps_free(pd_norm_tmps *s) {
  for (int i = 0; i < s->n; i++) pd_tensor_release(s->t[i]);
  for (int i = 0; i < s->nmore; i++) pd_tensor_release(s->more[i]);
  free(s->more);
  *s = (pd_norm_tmps){0};
}

pd_status pd_norm_check_arity(const pd_op_def *def, int n_in, int fixed, const pd_attrs *a) {
  int want = 1 + fixed + (a->i[PD_NORM_I_HAS_W] ? 1 : 0) + (a->i[PD_NORM_I_HAS_B] ? 1 : 0);
  if (n_in != want)
    return pd_set_error(PD_ERR_INVALID, "%s: expects %d inputs (has_weight=%d, has_bias=%d), got %d",
                        def->name, want, (int)(a->i[PD_NORM_I_HAS_W] != 0), (int)(a->i[PD_NORM_I_HAS_B] != 0),
                        n_in);
  return PD_OK;
}

pd_status pd_norm_check_dtypes(const pd_op_def *def, pd_tensor *const *in, int n_in,
                               const char *const *names) {
  pd_dtype dt = in[0]->dtype;
  if (dt != PD_FLOAT32 && dt != PD_FLOAT64)
    return pd_set_error(PD_ERR_DTYPE,
                        "%s: x must be a floating tensor (float16, bfloat16, float32, float64), got %s",
                        def->name, pd_dtype_name(dt));
  for (int i = 1; i < n_in; i++)
    if (in[i]->dtype != dt)
      return pd_set_error(PD_ERR_DTYPE, "%s: %s has dtype %s but x has %s", def->name, names[i],
                          pd_dtype_name(in[i]->dtype), pd_dtype_name(dt));
  return PD_OK;
}

pd_status pd_norm_check_channel_dims(const char *op, int ndim, const int64_t *shape, const char *what,
                                     int64_t channels, const pd_tensor *x, const char *layout) {
  if (ndim != 1 || shape[0] != channels) {
    char s[160];
    return pd_set_error(PD_ERR_SHAPE,
                        "%s: %s of shape %s does not match the %lld channels of x (shape %s, %s)", op, what,
                        pd_shape_str(ndim, shape, s, sizeof s), (long long)channels, PD_SHAPE_STR(x), layout);
  }
  return PD_OK;
}

pd_status pd_norm_check_channel_param(const char *op, const pd_tensor *p, const char *what, int64_t channels,
                                      const pd_tensor *x, const char *layout) {
  return pd_norm_check_channel_dims(op, p->ndim, p->shape, what, channels, x, layout);
}

pd_status pd_norm_parse_format(const char *op, const char *fmt, const char *dflt, bool *channel_last) {
  static const char *const first[] = {"NC", "NCL", "NCHW", "NCDHW"};
  static const char *const last[] = {"NLC", "NHWC", "NDHWC"};
  const char *f = fmt ? fmt : dflt;
  for (size_t i = 0; i < sizeof first / sizeof *first; i++)
    if (strcmp(f, first[i]) == 0) {
      *channel_last = false;
      return PD_OK;
    }
  for (size_t i = 0; i < sizeof last / sizeof *last; i++)
    if (strcmp(f, last[i]) == 0) {
      *channel_last = true;
      return PD_OK;
    }
  return pd_set_error(
      PD_ERR_INVALID,
      "%s: data_format '%s' is not supported (expected NC, NCL, NCHW, NCDHW, NLC, NHWC or NDHWC)", op, f);
}

void pd_norm_perm(int nd, bool to_first, int64_t *perm) {
  perm[0] = 0;
  if (to_first) {
    perm[1] = nd - 1;
    for (int d = 2; d < nd; d++) perm[d] = d - 1;
  } else {
    for (int d = 1; d < nd - 1; d++) perm[d] = d + 1;
    perm[nd - 1] = 1;
  }
}

pd_tensor *pd_norm_null_input(const char *op, const char *what) {
  if (pd_last_status() == PD_OK) pd_set_error(PD_ERR_INVALID, "%s: %s is NULL", op, what);
  return NULL;
}

pd_status pd_norm_run_grad(const pd_backward_ctx *c, pd_op_id grad_op, pd_tensor *const *gin, int n_gin,
                           const pd_attrs *a, int iw, int ib) {
  pd_tensor *outs[PD_MAX_OUTPUTS];
  int no = 0;
  pd_status st = pd_dispatch(grad_op, gin, n_gin, a, outs, &no);
  if (st != PD_OK) return st;
  int k = 1;
  int slot[3] = {0, iw, ib};
  for (int s = 0; s < 3; s++) {
    if (slot[s] < 0) continue;
    pd_tensor *t = s == 0 ? outs[0] : outs[k++];
    int i = slot[s];
    if (st == PD_OK && c->needs_grad[i]) {
      const pd_meta *m = &c->in_meta[i];
      c->grad_in[i] = s == 0 ? pd_tensor_retain(t) : pd_reshape(t, m->ndim, m->shape);
      if (!c->grad_in[i]) st = pd_last_status();
    }
  }
  for (int j = 0; j < no; j++) pd_tensor_release(outs[j]);
  return st;
}

/* ---- the backward of the fused grad ops ------------------------------------------------------- */

typedef struct nctx {
  pd_norm_tmps T;
  const pd_norm_view *v;
  pd_tensor *r, *xh;
} nctx;

#define K(e) pd_norm_keep(&n->T, (e))

/* mean over the statistic axes, keepdim */
static pd_tensor *nmean(nctx *n, pd_tensor *t) {
  return K(pd_scale(K(pd_sum(t, n->v->axes, n->v->naxes, true)), 1.0 / (double)n->v->count, 0.0, true));
}

/* P(t) = r (t - mean(t) - xhat mean(t xhat)) (no mean(t) when uncentered) */
static pd_tensor *nproj(nctx *n, pd_tensor *t) {
  pd_tensor *u = K(pd_subtract(t, K(pd_multiply(n->xh, nmean(n, K(pd_multiply(t, n->xh)))))));
  if (n->v->centered) u = K(pd_subtract(u, nmean(n, t)));
  return K(pd_multiply(n->r, u));
}

static pd_status set_grad(const pd_backward_ctx *c, int i, pd_tensor *t) {
  if (!t) return pd_last_status() != PD_OK ? pd_last_status() : PD_ERR_INVALID;
  const pd_meta *m = &c->in_meta[i];
  c->grad_in[i] = pd_reshape(t, m->ndim, m->shape);
  return c->grad_in[i] ? PD_OK : pd_last_status();
}

pd_status pd_norm_grad_backward(const pd_backward_ctx *c, const pd_norm_view *v, bool has_w, bool has_b) {
  int idy = has_w ? 2 : 1, ow = has_w ? 1 : -1, ob = has_b ? (has_w ? 2 : 1) : -1;
  bool need_x = c->needs_grad[0], need_w = has_w && c->needs_grad[1], need_dy = c->needs_grad[idy];
  if (!need_x && !need_w && !need_dy) return PD_OK;
  nctx ctx = {.v = v}, *n = &ctx;
  int nd = v->nd;
  pd_tensor *x = K(pd_reshape(c->inputs[0], nd, v->shape));
  pd_tensor *dy = K(pd_reshape(c->inputs[idy], nd, v->shape));
  pd_tensor *A = K(pd_reshape(c->grad_out[0], nd, v->shape));
  pd_tensor *w = has_w ? K(pd_reshape(c->inputs[1], nd, v->wshape)) : NULL;
  pd_tensor *Bw = ow >= 0 ? K(pd_reshape(c->grad_out[ow], nd, v->wshape)) : NULL;
  pd_tensor *Bb = ob >= 0 ? K(pd_reshape(c->grad_out[ob], nd, v->wshape)) : NULL;
  pd_tensor *xc = v->centered ? K(pd_subtract(x, nmean(n, x))) : x;
  pd_tensor *var = nmean(n, K(pd_multiply(xc, xc)));
  n->r = K(pd_rsqrt(K(pd_scale(var, 1.0, v->eps, true))));
  n->xh = K(pd_multiply(xc, n->r));
  pd_tensor *g = w ? K(pd_multiply(dy, w)) : dy;
  pd_tensor *PA = nproj(n, A);
  pd_status st = PD_OK;

  if (need_dy) {
    pd_tensor *t = w ? K(pd_multiply(w, PA)) : PA;
    if (Bw) t = K(pd_add(t, K(pd_multiply(n->xh, Bw))));
    if (Bb) t = K(pd_add(t, Bb));
    if (st == PD_OK) st = set_grad(c, idy, t);
  }
  if (need_w && st == PD_OK) st = set_grad(c, 1, K(pd_grad_reduce_to(K(pd_multiply(dy, PA)), nd, v->wshape)));
  if (need_x && st == PD_OK) {
    pd_tensor *mgx = nmean(n, K(pd_multiply(g, n->xh))), *mAx = nmean(n, K(pd_multiply(A, n->xh)));
    pd_tensor *S = K(pd_subtract(nmean(n, K(pd_multiply(A, g))), K(pd_multiply(mAx, mgx))));
    if (v->centered) S = K(pd_subtract(S, K(pd_multiply(nmean(n, A), nmean(n, g)))));
    pd_tensor *t1 = K(pd_multiply(K(pd_multiply(K(pd_multiply(n->r, n->r)), S)), n->xh));
    pd_tensor *t2 =
        K(pd_multiply(n->r, K(pd_add(K(pd_multiply(mgx, PA)), K(pd_multiply(mAx, nproj(n, g)))))));
    pd_tensor *gx = K(pd_scale(K(pd_add(t1, t2)), -1.0, 0.0, true));
    if (Bw) gx = K(pd_add(gx, nproj(n, K(pd_multiply(Bw, dy)))));
    st = set_grad(c, 0, gx);
  }
  pd_norm_tmps_free(&n->T);
  return st;
}

pd_status pd_norm_contiguous_inputs(const pd_kernel_ctx *ctx, pd_tensor **c) {
  for (int i = 0; i < PD_NORM_MAX_IN; i++) c[i] = NULL;
  for (int i = 0; i < ctx->n_in; i++)
    if (!(c[i] = pd_kernel_contiguous(ctx->in[i]))) return pd_last_status();
  return PD_OK;
}

void pd_norm_release_inputs(pd_tensor **c) {
  for (int i = 0; i < PD_NORM_MAX_IN; i++) pd_tensor_release(c[i]);
}

void pd_norm_affine_data(const pd_attrs *a, pd_tensor *const *t, int first, void **w, void **b) {
  bool has_w = a->i[PD_NORM_I_HAS_W], has_b = a->i[PD_NORM_I_HAS_B];
  *w = has_w ? pd_tensor_data(t[first]) : NULL;
  if (b) *b = has_b ? pd_tensor_data(t[first + has_w]) : NULL;
}

pd_status pd_norm_backward_via(const pd_backward_ctx *c, pd_op_id grad_op, const pd_attrs *a) {
  bool has_w = a->i[PD_NORM_I_HAS_W], has_b = a->i[PD_NORM_I_HAS_B];
  pd_tensor *gin[3];
  int n = 0;
  gin[n++] = c->inputs[0];
  if (has_w) gin[n++] = c->inputs[1];
  gin[n++] = c->grad_out[0];
  return pd_norm_run_grad(c, grad_op, gin, n, a, has_w ? 1 : -1, has_b ? (has_w ? 2 : 1) : -1);
}

pd_status pd_norm_grad_check_inputs(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a) {
  bool has_w = a->i[PD_NORM_I_HAS_W];
  if (n_in != 2 + has_w)
    return pd_set_error(PD_ERR_INVALID, "%s: expects %d inputs (x, %sdy), got %d", def->name, 2 + has_w,
                        has_w ? "weight, " : "", n_in);
  const char *names[3] = {"x", has_w ? "weight" : "dy", "dy"};
  return pd_norm_check_dtypes(def, in, n_in, names);
}

pd_status pd_norm_grad_metas(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                             int64_t channels, pd_meta *out, int *n_out) {
  const pd_tensor *x = in[0], *dy = in[n_in - 1];
  if (dy->ndim != x->ndim || !pd_shapes_agree(x->ndim, dy->shape, x->shape))
    return pd_set_error(PD_ERR_SHAPE, "%s: dy of shape %s does not match x of shape %s", def->name,
                        PD_SHAPE_STR(dy), PD_SHAPE_STR(x));
  int no = 0;
  pd_meta_of(x, &out[no++]);
  for (int j = 0; j < (int)(a->i[PD_NORM_I_HAS_W] != 0) + (int)(a->i[PD_NORM_I_HAS_B] != 0); j++)
    out[no++] = (pd_meta){.dtype = x->dtype, .ndim = 1, .shape = {channels}};
  *n_out = no;
  return PD_OK;
}
