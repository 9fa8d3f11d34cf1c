/* Convolutions: conv1d/2d/3d, their transposes, and conv_grad_filter.
 *
 * The three ops are the three products of one convolution geometry (see
 * src/kernels/cpu/conv.h), and each one's gradients are the other two:
 *   y  = conv(x, w)           dx = conv_transpose(dy, w)   dw = conv_grad_filter(x, dy)
 *   y  = conv_transpose(u, w) du = conv(dy, w)             dw = conv_grad_filter(dy, u)
 *   dw = conv_grad_filter(x, g)   d/dx = conv_transpose(g, dw_bar)   d/dg = conv(x, dw_bar)
 * so gradients of any order come from the same three kernels.
 *
 * Attributes (all three): v0 strides, v1 dilations, v2 paddings as
 * [before_0, after_0, ...], i0 groups, i1 channel_last; v3 is the output
 * spatial size of conv_transpose and the kernel size of conv_grad_filter.
 * Only the "before" paddings place the windows; conv's "after" paddings set
 * its output size (internally they may be negative, cropping the tail). */
#include <ctype.h>
#include <string.h>

#include "../../core/shape_check.h"
#include "../../kernels/cpu/conv.h"
#include "../manipulation/manipulation_util.h"
#include "conv_util.h"
#include "../op_registry.h"
#include "paddlec/conv.h"
#include "paddlec/reduction.h"

static const pd_op_id k_conv_ids[3] = {PD_OP_conv1d, PD_OP_conv2d, PD_OP_conv3d};
static const pd_op_id k_convt_ids[3] = {PD_OP_conv1d_transpose, PD_OP_conv2d_transpose,
                                        PD_OP_conv3d_transpose};

static const char *layout_name(int nsp, bool cl) {
  static const char *first[3] = {"NCL", "NCHW", "NCDHW"}, *last[3] = {"NLC", "NHWC", "NDHWC"};
  return cl ? last[nsp - 1] : first[nsp - 1];
}

/* Spatial rank of an op from its name ("conv2d_transpose" -> 2), or from
 * x for the rank-generic conv_grad_filter. */
static int rank_of(const pd_op_def *def, const pd_tensor *x) {
  for (const char *p = def->name; *p; p++)
    if (*p >= '1' && *p <= '3') return *p - '0';
  return x->ndim - 2;
}

static pd_status check_attrs(const char *op, int nsp, const pd_attrs *a, bool need_v3) {
  if (a->nv[0] != nsp || a->nv[1] != nsp || a->nv[2] != 2 * nsp || (need_v3 && a->nv[3] != nsp))
    return pd_set_error(PD_ERR_INVALID,
                        "%s: expects %d strides, %d dilations and %d paddings%s, got %d, %d and %d", op, nsp,
                        nsp, 2 * nsp, need_v3 ? " and sizes" : "", a->nv[0], a->nv[1], a->nv[2]);
  for (int d = 0; d < nsp; d++) {
    if (a->v[0][d] < 1)
      return pd_set_error(PD_ERR_INVALID, "%s: stride %lld on spatial dim %d must be positive", op,
                          (long long)a->v[0][d], d);
    if (a->v[1][d] < 1)
      return pd_set_error(PD_ERR_INVALID, "%s: dilation %lld on spatial dim %d must be positive", op,
                          (long long)a->v[1][d], d);
    if (a->v[2][2 * d] < 0)
      return pd_set_error(PD_ERR_INVALID, "%s: padding %lld on spatial dim %d must be non-negative", op,
                          (long long)a->v[2][2 * d], d);
    if (need_v3 && a->v[3][d] < 1)
      return pd_set_error(PD_ERR_INVALID, "%s: size %lld on spatial dim %d must be positive", op,
                          (long long)a->v[3][d], d);
  }
  if (a->i[0] < 1)
    return pd_set_error(PD_ERR_INVALID, "%s: groups (%lld) must be positive", op, (long long)a->i[0]);
  return PD_OK;
}

static pd_status check_rank_dtype(const char *op, int nsp, bool cl, const pd_tensor *x, const char *xname,
                                  const pd_tensor *w, const char *wname, bool dtypes) {
  if (x->ndim != nsp + 2)
    return pd_set_error(PD_ERR_SHAPE, "%s: %s must be a %d-D tensor (%s), got shape %s", op, xname, nsp + 2,
                        layout_name(nsp, cl), PD_SHAPE_STR(x));
  if (w->ndim != nsp + 2)
    return pd_set_error(PD_ERR_SHAPE, "%s: %s must be a %d-D tensor, got shape %s", op, wname, nsp + 2,
                        PD_SHAPE_STR(w));
  if (!dtypes) return PD_OK;
  if (x->dtype != PD_FLOAT32 && x->dtype != PD_FLOAT64)
    return pd_set_error(
        PD_ERR_DTYPE, "%s: dtype %s of %s is not supported (expected float16, bfloat16, float32 or float64)",
        op, pd_dtype_name(x->dtype), xname);
  if (w->dtype != x->dtype)
    return pd_set_error(PD_ERR_DTYPE, "%s: %s (%s) and %s (%s) must have the same dtype", op, xname,
                        pd_dtype_name(x->dtype), wname, pd_dtype_name(w->dtype));
  return PD_OK;
}

/* Channels and spatial sizes of an activation. */
static int64_t act_channels(const pd_tensor *t, bool cl) { return t->shape[cl ? t->ndim - 1 : 1]; }
static int64_t act_spatial(const pd_tensor *t, bool cl, int d) { return t->shape[(cl ? 1 : 2) + d]; }

static void act_meta(pd_meta *m, pd_dtype dt, int nsp, bool cl, int64_t n, int64_t c, const int64_t *sp) {
  m->dtype = dt;
  m->ndim = nsp + 2;
  m->shape[0] = n;
  m->shape[cl ? nsp + 1 : 1] = c;
  for (int d = 0; d < nsp; d++) m->shape[(cl ? 1 : 2) + d] = sp[d];
}

static pd_status check_bias(const char *op, const pd_tensor *b, const pd_tensor *x, int64_t c) {
  if (b->ndim != 1 || b->shape[0] != c)
    return pd_set_error(PD_ERR_SHAPE, "%s: bias must have shape [%lld] (the output channels), got %s", op,
                        (long long)c, PD_SHAPE_STR(b));
  if (b->dtype != x->dtype)
    return pd_set_error(PD_ERR_DTYPE, "%s: bias (%s) must have the dtype of x (%s)", op,
                        pd_dtype_name(b->dtype), pd_dtype_name(x->dtype));
  return PD_OK;
}

/* A window geometry whose index arithmetic overflows int64. */
static pd_status window_overflow(const char *op, int d, const pd_conv_geom *g, const pd_attrs *a) {
  return pd_set_error(
      PD_ERR_SHAPE,
      "%s: spatial dim %d: input %lld, output %lld, kernel %lld, stride %lld, dilation %lld and "
      "paddings %lld and %lld are too large (their index arithmetic overflows int64)",
      op, d, (long long)g->in[d], (long long)g->out[d], (long long)g->k[d], (long long)g->stride[d],
      (long long)g->dil[d], (long long)a->v[2][2 * d], (long long)a->v[2][2 * d + 1]);
}

/* The geometry of an op call, checking every shape; fills the output meta. */
static pd_status conv_geom(const pd_op_def *def, pd_conv_kind kind, pd_tensor *const *in, int n_in,
                           const pd_attrs *a, pd_conv_geom *g, pd_meta *out) {
  const char *op = def->name;
  bool cl = a->i[1] != 0;
  pd_tensor *x = in[0], *w = in[1];
  int nsp = rank_of(def, x);
  if (nsp < 1 || nsp > 3)
    return pd_set_error(PD_ERR_SHAPE, "%s: x must be a 3-D, 4-D or 5-D tensor, got shape %s", op,
                        PD_SHAPE_STR(x));
  if ((kind == PD_CONV_BWD_WEIGHTS && n_in != 2) || (kind != PD_CONV_BWD_WEIGHTS && n_in != 2 && n_in != 3))
    return pd_set_error(PD_ERR_INVALID, "%s: expects %s inputs, got %d", op,
                        kind == PD_CONV_BWD_WEIGHTS ? "2" : "2 or 3", n_in);
  pd_status st =
      check_rank_dtype(op, nsp, cl, x, "x", w, kind == PD_CONV_BWD_WEIGHTS ? "grad_out" : "weight", true);
  if (st == PD_OK) st = check_attrs(op, nsp, a, kind != PD_CONV_FWD);
  if (st != PD_OK) return st;
  memset(g, 0, sizeof *g);
  g->nsp = nsp;
  g->G = a->i[0];
  g->channel_last = cl;
  g->N = x->shape[0];
  for (int d = 0; d < nsp; d++) {
    g->stride[d] = a->v[0][d];
    g->dil[d] = a->v[1][d];
    g->pad[d] = a->v[2][2 * d];
  }
  int64_t G = g->G;
  if (kind == PD_CONV_FWD) {
    g->Ci = act_channels(x, cl);
    g->Co = w->shape[0];
    if (pd_dim_known(g->Ci) && g->Ci % G != 0)
      return pd_set_error(PD_ERR_SHAPE,
                          "%s: the input channels (%lld, x shape %s, %s) are not divisible by groups (%lld)",
                          op, (long long)g->Ci, PD_SHAPE_STR(x), layout_name(nsp, cl), (long long)G);
    if (pd_dim_known(g->Co) && g->Co % G != 0)
      return pd_set_error(
          PD_ERR_SHAPE, "%s: the output channels (weight.shape[0] = %lld) are not divisible by groups (%lld)",
          op, (long long)g->Co, (long long)G);
    int64_t wci;
    if (pd_dim_known(w->shape[1]) && (pd_mul_overflow(w->shape[1], G, &wci) || !pd_dims_agree(wci, g->Ci)))
      return pd_set_error(
          PD_ERR_SHAPE,
          "%s: the input has %lld channels (x shape %s, %s) but weight.shape[1] (%lld) * groups "
          "(%lld) = %lld (weight shape %s)",
          op, (long long)g->Ci, PD_SHAPE_STR(x), layout_name(nsp, cl), (long long)w->shape[1], (long long)G,
          (long long)(w->shape[1] * G), PD_SHAPE_STR(w));
    for (int d = 0; d < nsp; d++) {
      g->in[d] = act_spatial(x, cl, d);
      g->k[d] = w->shape[2 + d];
      if (!pd_dim_known(g->in[d]) || !pd_dim_known(g->k[d])) { /* a Variable's unknown size */
        g->out[d] = PD_DIM_UNKNOWN;
        continue;
      }
      int64_t ext, padded;
      if (pd_mul_overflow(g->dil[d], g->k[d] - 1, &ext) || pd_add_overflow(ext, 1, &ext) ||
          pd_add_overflow(g->in[d], g->pad[d], &padded) ||
          pd_add_overflow(padded, a->v[2][2 * d + 1], &padded))
        return window_overflow(op, d, g, a);
      if (padded < ext)
        return pd_set_error(
            PD_ERR_SHAPE,
            "%s: the kernel (size %lld, dilation %lld: extent %lld) on spatial dim %d is larger "
            "than the padded input (%lld + %lld + %lld = %lld; x shape %s, weight shape %s)",
            op, (long long)g->k[d], (long long)g->dil[d], (long long)ext, d, (long long)g->in[d],
            (long long)g->pad[d], (long long)a->v[2][2 * d + 1], (long long)padded, PD_SHAPE_STR(x),
            PD_SHAPE_STR(w));
      g->out[d] = (padded - ext) / g->stride[d] + 1;
    }
    if (n_in == 3 && (st = check_bias(op, in[2], x, g->Co)) != PD_OK) return st;
    act_meta(out, x->dtype, nsp, cl, g->N, g->Co, g->out);
  } else if (kind == PD_CONV_BWD_DATA) {
    g->Co = act_channels(x, cl);
    if (!pd_dims_agree(g->Co, w->shape[0]))
      return pd_set_error(
          PD_ERR_SHAPE,
          "%s: the input has %lld channels (x shape %s, %s) but weight.shape[0] is %lld (weight "
          "shape %s)",
          op, (long long)g->Co, PD_SHAPE_STR(x), layout_name(nsp, cl), (long long)w->shape[0],
          PD_SHAPE_STR(w));
    g->Co = pd_dim_merge(g->Co, w->shape[0]);
    if (pd_dim_known(g->Co) && g->Co % G != 0)
      return pd_set_error(PD_ERR_SHAPE, "%s: the input channels (%lld) are not divisible by groups (%lld)",
                          op, (long long)g->Co, (long long)G);
    if (!pd_dim_known(w->shape[1]))
      g->Ci = PD_DIM_UNKNOWN;
    else if (pd_mul_overflow(w->shape[1], G, &g->Ci))
      return pd_set_error(PD_ERR_SHAPE, "%s: weight.shape[1] (%lld) * groups (%lld) overflows int64", op,
                          (long long)w->shape[1], (long long)G);
    for (int d = 0; d < nsp; d++) {
      g->out[d] = act_spatial(x, cl, d);
      g->k[d] = w->shape[2 + d];
      g->in[d] = a->v[3][d];
    }
    if (n_in == 3 && (st = check_bias(op, in[2], x, g->Ci)) != PD_OK) return st;
    act_meta(out, x->dtype, nsp, cl, g->N, g->Ci, g->in);
  } else {
    pd_tensor *dy = w;
    g->Ci = act_channels(x, cl);
    g->Co = act_channels(dy, cl);
    if (!pd_dims_agree(dy->shape[0], g->N))
      return pd_set_error(PD_ERR_SHAPE, "%s: x (shape %s) and grad_out (shape %s) have different batch sizes",
                          op, PD_SHAPE_STR(x), PD_SHAPE_STR(dy));
    if ((pd_dim_known(g->Ci) && g->Ci % G != 0) || (pd_dim_known(g->Co) && g->Co % G != 0))
      return pd_set_error(
          PD_ERR_SHAPE, "%s: the channels of x (%lld) and grad_out (%lld) must be divisible by groups (%lld)",
          op, (long long)g->Ci, (long long)g->Co, (long long)G);
    out->dtype = x->dtype;
    out->ndim = nsp + 2;
    out->shape[0] = g->Co;
    out->shape[1] = pd_dim_div(g->Ci, G);
    for (int d = 0; d < nsp; d++) {
      g->in[d] = act_spatial(x, cl, d);
      g->out[d] = act_spatial(dy, cl, d);
      g->k[d] = a->v[3][d];
      out->shape[2 + d] = g->k[d];
    }
  }
  /* the kernels index the input at o * stride - pad + j * dilation: the
   * span of the windows and the padded input must fit int64 (the sizes of
   * the backward kinds come from attributes) */
  for (int d = 0; d < nsp; d++) {
    int64_t span, t, padded;
    if (pd_mul_overflow(g->out[d] > 0 ? g->out[d] - 1 : 0, g->stride[d], &span) ||
        pd_mul_overflow(g->k[d] > 0 ? g->k[d] - 1 : 0, g->dil[d], &t) || pd_add_overflow(span, t, &span) ||
        pd_add_overflow(span, 1, &span) || pd_add_overflow(g->in[d], g->pad[d], &padded) ||
        pd_add_overflow(padded, a->v[2][2 * d + 1], &padded))
      return window_overflow(op, d, g, a);
  }
  return PD_OK;
}

static pd_status meta_fwd(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                          pd_meta *out, int *n_out) {
  pd_conv_geom g;
  *n_out = 1;
  return conv_geom(def, PD_CONV_FWD, in, n_in, a, &g, out);
}
static pd_status meta_bwd_data(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                               pd_meta *out, int *n_out) {
  pd_conv_geom g;
  *n_out = 1;
  return conv_geom(def, PD_CONV_BWD_DATA, in, n_in, a, &g, out);
}
static pd_status meta_bwd_weights(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                                  pd_meta *out, int *n_out) {
  pd_conv_geom g;
  *n_out = 1;
  return conv_geom(def, PD_CONV_BWD_WEIGHTS, in, n_in, a, &g, out);
}

/* ---- kernels ------------------------------------------------------------ */

static pd_status run(const pd_op_def *def, pd_conv_kind kind, pd_tensor *const *in, int n_in,
                     const pd_attrs *a, pd_tensor *out) {
  pd_conv_geom g;
  pd_meta m;
  pd_status st = conv_geom(def, kind, in, n_in, a, &g, &m);
  if (st != PD_OK) return st;
  if (out->numel == 0) return PD_OK;
  pd_tensor *ta = pd_kernel_contiguous(in[0]), *tb = ta ? pd_kernel_contiguous(in[1]) : NULL;
  pd_tensor *tbias = tb && n_in == 3 ? pd_kernel_contiguous(in[2]) : NULL;
  if (!ta || !tb || (n_in == 3 && !tbias)) {
    st = pd_last_status();
    goto done;
  }
  bool f32 = out->dtype == PD_FLOAT32;
  size_t es = pd_dtype_size(out->dtype);
  void *A = pd_tensor_data(ta), *B = pd_tensor_data(tb), *O = pd_tensor_data(out);
  void *bias = tbias ? pd_tensor_data(tbias) : NULL;
  int rc = 0;
  if (ta->numel == 0 || tb->numel == 0) { /* an empty reduction: zeros (plus bias) */
    memset(O, 0, (size_t)out->numel * es);
    if (bias && kind == PD_CONV_FWD) {
      if (f32)
        pdk_conv_add_bias_f32(&g, true, bias, O);
      else
        pdk_conv_add_bias_f64(&g, true, bias, O);
    }
  } else if (f32) {
    /* deterministic mode: im2col and GEMMs cut by shape, not oneDNN's threading */
    rc = pd_get_deterministic() ? 1 : pdk_conv_dnnl_f32(kind, &g, A, B, kind == PD_CONV_FWD ? bias : NULL, O);
    if (rc == 1) rc = pdk_conv_ref_f32(kind, &g, A, B, kind == PD_CONV_FWD ? bias : NULL, O);
  } else {
    rc = pdk_conv_ref_f64(kind, &g, A, B, kind == PD_CONV_FWD ? bias : NULL, O);
  }
  if (rc == 0 && bias && kind == PD_CONV_BWD_DATA) {
    if (f32)
      pdk_conv_add_bias_f32(&g, false, bias, O);
    else
      pdk_conv_add_bias_f64(&g, false, bias, O);
  }
  if (rc != 0)
    st = pd_set_error(rc == -1 ? PD_ERR_MEMORY : PD_ERR_INVALID,
                      "%s: the convolution kernel failed (status %d) for x shape %s", def->name, rc,
                      PD_SHAPE_STR(in[0]));
done:
  pd_tensor_release(ta);
  pd_tensor_release(tb);
  pd_tensor_release(tbias);
  return st;
}

static pd_status kernel_fwd(const pd_kernel_ctx *ctx) {
  return run(ctx->def, PD_CONV_FWD, ctx->in, ctx->n_in, ctx->attrs, ctx->out[0]);
}
static pd_status kernel_bwd_data(const pd_kernel_ctx *ctx) {
  return run(ctx->def, PD_CONV_BWD_DATA, ctx->in, ctx->n_in, ctx->attrs, ctx->out[0]);
}
static pd_status kernel_bwd_weights(const pd_kernel_ctx *ctx) {
  return run(ctx->def, PD_CONV_BWD_WEIGHTS, ctx->in, ctx->n_in, ctx->attrs, ctx->out[0]);
}

/* ---- the ops in terms of each other (backward) -------------------------- */

/* Attrs for conv(x_space -> o_space): the "after" paddings that give exactly
 * the output size o (may be negative). sizes: x spatial, o spatial, kernel. */
static void fwd_attrs(const pd_attrs *src, int nsp, const int64_t *I, const int64_t *O, const int64_t *K,
                      pd_attrs *a) {
  *a = *src;
  a->nv[3] = 0;
  for (int d = 0; d < nsp; d++) {
    int64_t ext = src->v[1][d] * (K[d] - 1) + 1;
    a->v[2][2 * d + 1] = (O[d] - 1) * src->v[0][d] + ext - I[d] - src->v[2][2 * d];
  }
}
static void sized_attrs(const pd_attrs *src, int nsp, const int64_t *sz, pd_attrs *a) {
  *a = *src;
  a->nv[3] = nsp;
  for (int d = 0; d < nsp; d++) a->v[3][d] = sz[d];
}

static void spatial_of(const pd_meta *m, bool cl, int nsp, int64_t *sp) {
  for (int d = 0; d < nsp; d++) sp[d] = m->shape[(cl ? 1 : 2) + d];
}

static pd_tensor *call2(pd_op_id id, pd_tensor *a, pd_tensor *b, const pd_attrs *at) {
  pd_tensor *in[2] = {a, b};
  return pd_dispatch1(id, in, 2, at);
}

/* db = sum of g over every dim but the channels. */
static pd_tensor *bias_grad(pd_tensor *g, int nsp, bool cl) {
  int64_t axes[4];
  int n = 0;
  axes[n++] = 0;
  for (int d = 0; d < nsp; d++) axes[n++] = (cl ? 1 : 2) + d;
  return pd_sum(g, axes, n, false);
}

static pd_status conv_backward(const pd_backward_ctx *c) {
  const pd_attrs *a = c->attrs;
  bool cl = a->i[1] != 0;
  int nsp = c->in_meta[0].ndim - 2;
  pd_tensor *g = c->grad_out[0];
  int64_t I[3], K[3];
  spatial_of(&c->in_meta[0], cl, nsp, I);
  for (int d = 0; d < nsp; d++) K[d] = c->in_meta[1].shape[2 + d];
  pd_attrs t;
  if (c->needs_grad[0]) {
    sized_attrs(a, nsp, I, &t);
    if (!(c->grad_in[0] = call2(k_convt_ids[nsp - 1], g, c->inputs[1], &t))) return pd_last_status();
  }
  if (c->needs_grad[1]) {
    sized_attrs(a, nsp, K, &t);
    if (!(c->grad_in[1] = call2(PD_OP_conv_grad_filter, c->inputs[0], g, &t))) return pd_last_status();
  }
  if (c->n_in == 3 && c->needs_grad[2] && !(c->grad_in[2] = bias_grad(g, nsp, cl))) return pd_last_status();
  return PD_OK;
}

static pd_status conv_transpose_backward(const pd_backward_ctx *c) {
  const pd_attrs *a = c->attrs;
  bool cl = a->i[1] != 0;
  int nsp = c->in_meta[0].ndim - 2;
  pd_tensor *g = c->grad_out[0];
  int64_t O[3], K[3];
  spatial_of(&c->in_meta[0], cl, nsp, O);
  for (int d = 0; d < nsp; d++) K[d] = c->in_meta[1].shape[2 + d];
  pd_attrs t;
  if (c->needs_grad[0]) {
    fwd_attrs(a, nsp, a->v[3], O, K, &t);
    if (!(c->grad_in[0] = call2(k_conv_ids[nsp - 1], g, c->inputs[1], &t))) return pd_last_status();
  }
  if (c->needs_grad[1]) {
    sized_attrs(a, nsp, K, &t);
    if (!(c->grad_in[1] = call2(PD_OP_conv_grad_filter, g, c->inputs[0], &t))) return pd_last_status();
  }
  if (c->n_in == 3 && c->needs_grad[2] && !(c->grad_in[2] = bias_grad(g, nsp, cl))) return pd_last_status();
  return PD_OK;
}

static pd_status conv_grad_filter_backward(const pd_backward_ctx *c) {
  const pd_attrs *a = c->attrs;
  bool cl = a->i[1] != 0;
  int nsp = c->in_meta[0].ndim - 2;
  pd_tensor *gw = c->grad_out[0];
  int64_t I[3], O[3];
  spatial_of(&c->in_meta[0], cl, nsp, I);
  spatial_of(&c->in_meta[1], cl, nsp, O);
  pd_attrs t;
  if (c->needs_grad[0]) {
    sized_attrs(a, nsp, I, &t);
    if (!(c->grad_in[0] = call2(k_convt_ids[nsp - 1], c->inputs[1], gw, &t))) return pd_last_status();
  }
  if (c->needs_grad[1]) {
    fwd_attrs(a, nsp, I, O, a->v[3], &t);
    if (!(c->grad_in[1] = call2(k_conv_ids[nsp - 1], c->inputs[0], gw, &t))) return pd_last_status();
  }
  return PD_OK;
}

/* ---- FLOPs: 2 multiply-adds per (output element, reduction element) ----- */

static double numel_of(int nd, const int64_t *s) {
  double n = 1;
  for (int i = 0; i < nd; i++) n *= (double)s[i];
  return n;
}
static double flops_fwd(pd_tensor *const *in, int n_in, const pd_attrs *a, const pd_meta *out, int n_out) {
  (void)n_in, (void)a, (void)n_out;
  const pd_tensor *w = in[1];
  return w->shape[0] ? 2.0 * numel_of(out->ndim, out->shape) * ((double)w->numel / (double)w->shape[0]) : 0;
}
static double flops_bwd_data(pd_tensor *const *in, int n_in, const pd_attrs *a, const pd_meta *out,
                             int n_out) {
  (void)n_in, (void)a, (void)out, (void)n_out;
  const pd_tensor *w = in[1];
  return w->shape[0] ? 2.0 * (double)in[0]->numel * ((double)w->numel / (double)w->shape[0]) : 0;
}
static double flops_bwd_weights(pd_tensor *const *in, int n_in, const pd_attrs *a, const pd_meta *out,
                                int n_out) {
  (void)n_in, (void)a, (void)n_out;
  double co = (double)out->shape[0];
  return co ? 2.0 * (double)in[1]->numel * (numel_of(out->ndim, out->shape) / co) : 0;
}

#define CONV_FLAGS (PD_OPF_DIFF | PD_OPF_SAVE_IN | PD_OPF_HALF_VIA_F32)
#define CONV_ATTRS "v0:strides,v1:dilations,v2:paddings,i0:groups,i1:channel_last"

#define DEF_CONV(NAME)                                                                                 \
  PD_OPDEF(NAME, .n_in = -1, .n_out = 1, .flags = CONV_FLAGS, .attr_names = CONV_ATTRS,                \
           .infer_meta = meta_fwd, .kernel = {[PD_PLACE_CPU] = kernel_fwd}, .backward = conv_backward, \
           .flops = flops_fwd);
#define DEF_CONVT(NAME)                                                                                   \
  PD_OPDEF(NAME, .n_in = -1, .n_out = 1, .flags = CONV_FLAGS, .attr_names = CONV_ATTRS ",v3:output_size", \
           .infer_meta = meta_bwd_data, .kernel = {[PD_PLACE_CPU] = kernel_bwd_data},                     \
           .backward = conv_transpose_backward, .flops = flops_bwd_data);
DEF_CONV(conv1d)
DEF_CONV(conv2d)
DEF_CONV(conv3d)
DEF_CONVT(conv1d_transpose)
DEF_CONVT(conv2d_transpose)
DEF_CONVT(conv3d_transpose)
PD_OPDEF(conv_grad_filter, .n_in = 2, .n_out = 1, .flags = CONV_FLAGS,
         .attr_names = CONV_ATTRS ",v3:kernel_size", .infer_meta = meta_bwd_weights,
         .kernel = {[PD_PLACE_CPU] = kernel_bwd_weights}, .backward = conv_grad_filter_backward,
         .flops = flops_bwd_weights);

/* ---- public wrappers ---------------------------------------------------- */

/* An int-or-list option into nsp values. */
static pd_status expand_list(const char *op, const char *what, int n, const int64_t *v, int nsp, int64_t dflt,
                             int64_t *out) {
  if (n == 0) {
    for (int d = 0; d < nsp; d++) out[d] = dflt;
  } else if (n == 1 || n == nsp) {
    for (int d = 0; d < nsp; d++) out[d] = v[n == 1 ? 0 : d];
  } else {
    return pd_set_error(PD_ERR_INVALID, "%s: %s must have 1 or %d values, got %d", op, what, nsp, n);
  }
  return PD_OK;
}

bool pd_conv_str_ieq(const char *a, const char *b) {
  for (; *a && *b; a++, b++)
    if (tolower((unsigned char)*a) != tolower((unsigned char)*b)) return false;
  return *a == *b;
}

pd_status pd_conv_parse_format(const char *op, const char *fmt, int nsp, bool *cl) {
  *cl = false;
  if (!fmt) return PD_OK;
  if (strcmp(fmt, layout_name(nsp, false)) == 0) return PD_OK;
  if (strcmp(fmt, layout_name(nsp, true)) == 0) {
    *cl = true;
    return PD_OK;
  }
  return pd_set_error(PD_ERR_INVALID, "%s: data_format must be \"%s\" or \"%s\", got \"%s\"", op,
                      layout_name(nsp, false), layout_name(nsp, true), fmt);
}

/* Paddings [before_0, after_0, ...] from an explicit list or an algorithm.
 * SAME uses in[] (the op's input spatial sizes), k[] and stride[] and
 * resets the dilations to 1. */
pd_status pd_conv_parse_padding(const char *op, const char *algo, int n, const int64_t *v, int nsp,
                                const int64_t *in, const int64_t *k, const int64_t *stride, int64_t *dil,
                                int64_t *pads) {
  if (algo && !pd_conv_str_ieq(algo, "EXPLICIT")) {
    if (pd_conv_str_ieq(algo, "VALID")) {
      for (int i = 0; i < 2 * nsp; i++) pads[i] = 0;
      return PD_OK;
    }
    if (!pd_conv_str_ieq(algo, "SAME"))
      return pd_set_error(PD_ERR_INVALID,
                          "%s: padding_algorithm must be \"EXPLICIT\", \"SAME\" or \"VALID\", got \"%s\"", op,
                          algo);
    for (int d = 0; d < nsp; d++) {
      int64_t o = in[d] / stride[d] + (in[d] % stride[d] != 0); /* ceil, without in + stride - 1 */
      int64_t sum = (o - 1) * stride[d] + k[d] - in[d];
      if (sum < 0) sum = 0;
      pads[2 * d] = sum / 2;
      pads[2 * d + 1] = sum - sum / 2;
      if (dil) dil[d] = 1;
    }
    return PD_OK;
  }
  if (n == 0) {
    for (int i = 0; i < 2 * nsp; i++) pads[i] = 0;
  } else if (n == 1 || n == nsp) {
    for (int d = 0; d < nsp; d++) pads[2 * d] = pads[2 * d + 1] = v[n == 1 ? 0 : d];
  } else if (n == 2 * nsp) {
    for (int i = 0; i < 2 * nsp; i++) pads[i] = v[i];
  } else {
    return pd_set_error(PD_ERR_INVALID, "%s: padding must have 1, %d or %d values, got %d", op, nsp, 2 * nsp,
                        n);
  }
  for (int i = 0; i < 2 * nsp; i++)
    if (pads[i] < 0)
      return pd_set_error(PD_ERR_INVALID, "%s: padding %lld (entry %d) must be non-negative", op,
                          (long long)pads[i], i);
  return PD_OK;
}

static pd_tensor *conv_public(int nsp, bool transpose, pd_tensor *x, pd_tensor *w, pd_tensor *b,
                              const pd_conv_opts *o) {
  static const pd_conv_opts defaults;
  if (!o) o = &defaults;
  pd_op_id id = transpose ? k_convt_ids[nsp - 1] : k_conv_ids[nsp - 1];
  const char *op = pd_op_table[id]->name;
  pd_tensor *in[3] = {x, w, b};
  int n_in = b ? 3 : 2;
  if (!x || !w) return pd_dispatch1(id, in, n_in, NULL); /* reports the NULL input */
  bool cl;
  if (pd_conv_parse_format(op, o->data_format, nsp, &cl) != PD_OK) return NULL;
  if (check_rank_dtype(op, nsp, cl, x, "x", w, "weight", false) != PD_OK) return NULL;
  pd_attrs a = {.nv = {nsp, nsp, 2 * nsp}};
  int64_t I[3], K[3];
  for (int d = 0; d < nsp; d++) I[d] = act_spatial(x, cl, d), K[d] = w->shape[2 + d];
  if (expand_list(op, "stride", o->n_stride, o->stride, nsp, 1, a.v[0]) != PD_OK ||
      expand_list(op, "dilation", o->n_dilation, o->dilation, nsp, 1, a.v[1]) != PD_OK)
    return NULL;
  for (int d = 0; d < nsp; d++) {
    if (a.v[0][d] < 1) {
      pd_set_error(PD_ERR_INVALID, "%s: stride %lld on spatial dim %d must be positive", op,
                   (long long)a.v[0][d], d);
      return NULL;
    }
    if (a.v[1][d] < 1) {
      pd_set_error(PD_ERR_INVALID, "%s: dilation %lld on spatial dim %d must be positive", op,
                   (long long)a.v[1][d], d);
      return NULL;
    }
  }
  if (pd_conv_parse_padding(op, o->padding_algorithm, o->n_padding, o->padding, nsp, I, K, a.v[0], a.v[1],
                            a.v[2]) != PD_OK)
    return NULL;
  if (o->groups < 0) {
    pd_set_error(PD_ERR_INVALID, "%s: groups (%lld) must be positive", op, (long long)o->groups);
    return NULL;
  }
  a.i[0] = o->groups ? o->groups : 1;
  a.i[1] = cl;
  if (transpose) {
    int64_t opad[3] = {0}, osize[3] = {0};
    if (expand_list(op, "output_padding", o->n_output_padding, o->output_padding, nsp, 0, opad) != PD_OK ||
        expand_list(op, "output_size", o->n_output_size, o->output_size, nsp, 0, osize) != PD_OK)
      return NULL;
    a.nv[3] = nsp;
    for (int d = 0; d < nsp; d++) {
      int64_t s = a.v[0][d], dl = a.v[1][d];
      int64_t inferred, span, hi;
      if (pd_mul_overflow(I[d] - 1, s, &inferred) || pd_sub_overflow(inferred, a.v[2][2 * d], &inferred) ||
          pd_sub_overflow(inferred, a.v[2][2 * d + 1], &inferred) || pd_mul_overflow(dl, K[d] - 1, &span) ||
          pd_add_overflow(inferred, span, &inferred) || pd_add_overflow(inferred, 1, &inferred) ||
          pd_add_overflow(inferred, s, &hi)) {
        pd_set_error(
            PD_ERR_SHAPE,
            "%s: the output size on spatial dim %d overflows int64 (input %lld, stride %lld, paddings "
            "%lld and %lld, kernel %lld, dilation %lld)",
            op, d, (long long)I[d], (long long)s, (long long)a.v[2][2 * d], (long long)a.v[2][2 * d + 1],
            (long long)K[d], (long long)dl);
        return NULL;
      }
      if (o->n_output_size > 0 && opad[d] != 0) {
        pd_set_error(PD_ERR_INVALID,
                     "%s: output_padding (%lld) is mutually exclusive with output_size (%lld)", op,
                     (long long)opad[d], (long long)osize[d]);
        return NULL;
      }
      if (opad[d] < 0 || opad[d] >= (s > dl ? s : dl)) {
        pd_set_error(
            PD_ERR_INVALID,
            "%s: output_padding %lld on spatial dim %d must be in [0, max(stride %lld, dilation %lld))", op,
            (long long)opad[d], d, (long long)s, (long long)dl);
        return NULL;
      }
      int64_t size = inferred + opad[d];
      if (o->n_output_size > 0 && osize[d] > 0) {
        if (osize[d] < inferred || osize[d] >= hi) {
          pd_set_error(PD_ERR_INVALID, "%s: output_size %lld on spatial dim %d must be in [%lld, %lld)", op,
                       (long long)osize[d], d, (long long)inferred, (long long)hi);
          return NULL;
        }
        size = osize[d];
      }
      if (size < 1) {
        pd_set_error(
            PD_ERR_SHAPE,
            "%s: the output size on spatial dim %d is %lld (input %lld, stride %lld, paddings %lld and "
            "%lld, kernel %lld, dilation %lld); it must be positive",
            op, d, (long long)size, (long long)I[d], (long long)s, (long long)a.v[2][2 * d],
            (long long)a.v[2][2 * d + 1], (long long)K[d], (long long)dl);
        return NULL;
      }
      a.v[3][d] = size;
    }
  }
  return pd_dispatch1(id, in, n_in, &a);
}

pd_tensor *pd_conv1d(pd_tensor *x, pd_tensor *weight, pd_tensor *bias, const pd_conv_opts *opts) {
  return conv_public(1, false, x, weight, bias, opts);
}
pd_tensor *pd_conv2d(pd_tensor *x, pd_tensor *weight, pd_tensor *bias, const pd_conv_opts *opts) {
  return conv_public(2, false, x, weight, bias, opts);
}
pd_tensor *pd_conv3d(pd_tensor *x, pd_tensor *weight, pd_tensor *bias, const pd_conv_opts *opts) {
  return conv_public(3, false, x, weight, bias, opts);
}
pd_tensor *pd_conv1d_transpose(pd_tensor *x, pd_tensor *weight, pd_tensor *bias, const pd_conv_opts *opts) {
  return conv_public(1, true, x, weight, bias, opts);
}
pd_tensor *pd_conv2d_transpose(pd_tensor *x, pd_tensor *weight, pd_tensor *bias, const pd_conv_opts *opts) {
  return conv_public(2, true, x, weight, bias, opts);
}
pd_tensor *pd_conv3d_transpose(pd_tensor *x, pd_tensor *weight, pd_tensor *bias, const pd_conv_opts *opts) {
  return conv_public(3, true, x, weight, bias, opts);
}
