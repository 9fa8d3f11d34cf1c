/* Batch norm (kernels/cpu/norm_batch.c):
 *   batch_norm        x, [weight], [bias] -> y, batch mean, batch variance
 *                     (the statistics carry no gradient); fused backward op
 *                     batch_norm_grad (x, [weight], dy) -> dx, [dw], [db],
 *                     differentiable through norm/norm_util.c;
 *   batch_norm_infer  x, mean, variance, [weight], [bias] -> y with given
 *                     statistics; backward with public ops.
 * pd_batch_norm picks one and updates the running statistics in place.
 * Attrs: i0 channel_last, i1 has_weight, i2 has_bias, f0 epsilon. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/tensor_impl.h"
#include "../../kernels/cpu/norm.h"
#include "norm_util.h"
#include "paddlec/norm.h"

/* Kernel geometry: a 2-D x is [N, C] (channel last) whatever the format. */
static pd_bn_geom geom_of(const pd_tensor *x, bool channel_last) {
  pd_bn_geom g = {.channel_last = channel_last || x->ndim == 2};
  if (g.channel_last) {
    g.channels = x->shape[x->ndim - 1];
    g.batch = 1;
    for (int d = 0; d < x->ndim - 1; d++) g.batch *= x->shape[d];
    g.spatial = 1;
  } else {
    g.batch = x->shape[0];
    g.channels = x->shape[1];
    g.spatial = 1;
    for (int d = 2; d < x->ndim; d++) g.spatial *= x->shape[d];
  }
  return g;
}

static const char *layout_name(const pd_tensor *x, bool channel_last) {
  return channel_last || x->ndim == 2 ? "channels last" : "channels at dim 1";
}

static int64_t channels_of(const pd_tensor *x, bool channel_last) {
  return channel_last ? x->shape[x->ndim - 1] : x->shape[1];
}

static pd_status check_x(const char *op, const pd_tensor *x) {
  if (x->ndim < 2)
    return pd_set_error(PD_ERR_SHAPE, "%s: x must have at least 2 dims (N, C, ...), got shape %s", op,
                        PD_SHAPE_STR(x));
  return PD_OK;
}

/* Checks inputs x, `fixed` per-channel statistics, then [weight], [bias]. */
static pd_status check_inputs(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                              int fixed, const char *const *stat_names) {
  pd_status st = pd_norm_check_arity(def, n_in, fixed, a);
  if (st != PD_OK) return st;
  const char *names[5] = {"x"};
  int k = 1;
  for (int i = 0; i < fixed; i++) names[k++] = stat_names[i];
  if (a->i[PD_NORM_I_HAS_W]) names[k++] = "weight";
  if (a->i[PD_NORM_I_HAS_B]) names[k++] = "bias";
  if ((st = pd_norm_check_dtypes(def, in, n_in, names)) != PD_OK) return st;
  if ((st = check_x(def->name, in[0])) != PD_OK) return st;
  bool cl = a->i[PD_NORM_I_AXIS];
  int64_t c = channels_of(in[0], cl);
  for (int i = 1; i < n_in; i++)
    if ((st = pd_norm_check_channel_param(def->name, in[i], names[i], c, in[0], layout_name(in[0], cl))) !=
        PD_OK)
      return st;
  return PD_OK;
}

/* ---- batch_norm (batch statistics) -------------------------------------------------------------- */

static pd_status bn_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                         pd_meta *out, int *n_out) {
  pd_status st = check_inputs(def, in, n_in, a, 0, NULL);
  if (st != PD_OK) return st;
  int64_t c = channels_of(in[0], a->i[PD_NORM_I_AXIS]);
  pd_meta_of(in[0], &out[0]);
  out[1] = out[2] = (pd_meta){.dtype = in[0]->dtype, .ndim = 1, .shape = {c}};
  *n_out = 3;
  return PD_OK;
}

static pd_status bn_kernel(const pd_kernel_ctx *ctx) {
  pd_tensor *c[PD_NORM_MAX_IN];
  pd_status st = pd_norm_contiguous_inputs(ctx, c);
  if (st == PD_OK) {
    void *w, *b;
    pd_norm_affine_data(ctx->attrs, c, 1, &w, &b);
    pd_bn_geom g = geom_of(ctx->in[0], ctx->attrs->i[PD_NORM_I_AXIS]);
    double eps = ctx->attrs->f[PD_NORM_F_EPS];
    int bad = ctx->in[0]->dtype == PD_FLOAT32
                  ? pdk_batch_norm_fwd_f32(pd_tensor_data(c[0]), w, b, pd_tensor_data(ctx->out[0]),
                                           pd_tensor_data(ctx->out[1]), pd_tensor_data(ctx->out[2]), &g, eps)
                  : pdk_batch_norm_fwd_f64(pd_tensor_data(c[0]), w, b, pd_tensor_data(ctx->out[0]),
                                           pd_tensor_data(ctx->out[1]), pd_tensor_data(ctx->out[2]), &g, eps);
    if (bad)
      st = pd_set_error(PD_ERR_MEMORY, "%s: out of memory for the statistics of x %s", ctx->def->name,
                        PD_SHAPE_STR(ctx->in[0]));
  }
  pd_norm_release_inputs(c);
  return st;
}

static pd_status bn_backward(const pd_backward_ctx *c) {
  return pd_norm_backward_via(c, PD_OP_batch_norm_grad, c->attrs);
}

/* ---- batch_norm_grad ----------------------------------------------------------------------------- */

static pd_status bn_grad_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                              pd_meta *out, int *n_out) {
  bool has_w = a->i[PD_NORM_I_HAS_W];
  pd_status st = pd_norm_grad_check_inputs(def, in, n_in, a);
  if (st != PD_OK) return st;
  pd_tensor *x = in[0];
  if ((st = check_x(def->name, x)) != PD_OK) return st;
  bool cl = a->i[PD_NORM_I_AXIS];
  int64_t ch = channels_of(x, cl);
  if (has_w &&
      (st = pd_norm_check_channel_param(def->name, in[1], "weight", ch, x, layout_name(x, cl))) != PD_OK)
    return st;
  return pd_norm_grad_metas(def, in, n_in, a, ch, out, n_out);
}

static pd_status bn_grad_kernel(const pd_kernel_ctx *ctx) {
  pd_tensor *c[PD_NORM_MAX_IN];
  pd_status st = pd_norm_contiguous_inputs(ctx, c);
  if (st == PD_OK) {
    pd_bn_geom g = geom_of(ctx->in[0], ctx->attrs->i[PD_NORM_I_AXIS]);
    void *w, *dw, *db, *dy = pd_tensor_data(c[ctx->n_in - 1]);
    pd_norm_affine_data(ctx->attrs, c, 1, &w, NULL);
    pd_norm_affine_data(ctx->attrs, ctx->out, 1, &dw, &db);
    double eps = ctx->attrs->f[PD_NORM_F_EPS];
    int bad = ctx->in[0]->dtype == PD_FLOAT32
                  ? pdk_batch_norm_bwd_f32(pd_tensor_data(c[0]), w, dy, pd_tensor_data(ctx->out[0]), dw, db,
                                           &g, eps)
                  : pdk_batch_norm_bwd_f64(pd_tensor_data(c[0]), w, dy, pd_tensor_data(ctx->out[0]), dw, db,
                                           &g, eps);
    if (bad)
      st = pd_set_error(PD_ERR_MEMORY, "%s: out of memory for the statistics of x %s", ctx->def->name,
                        PD_SHAPE_STR(ctx->in[0]));
  }
  pd_norm_release_inputs(c);
  return st;
}

/* The statistics as reductions of a view: [B, C, S] over (0, 2), or [M, C]
 * over 0 (channel last and 2-D x). */
static void bn_view(const pd_meta *x, bool channel_last, int64_t *vshape, int *vnd, int64_t *pshape) {
  int nd = x->ndim;
  if (channel_last || nd == 2) {
    int64_t c = x->shape[nd - 1], m = 1;
    for (int d = 0; d < nd - 1; d++) m *= x->shape[d];
    *vnd = 2;
    vshape[0] = m, vshape[1] = c;
    pshape[0] = 1, pshape[1] = c;
  } else {
    int64_t s = 1;
    for (int d = 2; d < nd; d++) s *= x->shape[d];
    *vnd = 3;
    vshape[0] = x->shape[0], vshape[1] = x->shape[1], vshape[2] = s;
    pshape[0] = 1, pshape[1] = x->shape[1], pshape[2] = 1;
  }
}

static pd_status bn_grad_backward(const pd_backward_ctx *c) {
  const pd_attrs *a = c->attrs;
  pd_norm_view v = {.centered = true, .eps = a->f[PD_NORM_F_EPS]};
  bn_view(&c->in_meta[0], a->i[PD_NORM_I_AXIS], v.shape, &v.nd, v.wshape);
  v.count = 1;
  for (int d = 0; d < v.nd; d++)
    if (v.wshape[d] == 1) {
      v.axes[v.naxes++] = d;
      v.count *= v.shape[d];
    }
  return pd_norm_grad_backward(c, &v, a->i[PD_NORM_I_HAS_W], a->i[PD_NORM_I_HAS_B]);
}

/* ---- batch_norm_infer ---------------------------------------------------------------------------- */

static const char *const k_stat_names[2] = {"mean", "variance"};

static pd_status infer_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                            pd_meta *out, int *n_out) {
  pd_status st = check_inputs(def, in, n_in, a, 2, k_stat_names);
  if (st != PD_OK) return st;
  pd_meta_of(in[0], out);
  *n_out = 1;
  return PD_OK;
}

#define AFFINE_FROM_STATS(sfx, T)                                                                           \
  static int infer_##sfx(pd_tensor **c, bool has_w, bool has_b, T *y, const pd_bn_geom *g, double eps) {    \
    int64_t C = g->channels;                                                                                \
    T *tmp = malloc(sizeof(T) * (size_t)(2 * C + 1));                                                       \
    if (!tmp) return 1;                                                                                     \
    const T *mean = pd_tensor_data(c[1]), *var = pd_tensor_data(c[2]);                                      \
    const T *w = has_w ? pd_tensor_data(c[3]) : NULL, *b = has_b ? pd_tensor_data(c[has_w ? 4 : 3]) : NULL; \
    for (int64_t k = 0; k < C; k++) {                                                                       \
      double r = 1.0 / sqrt((double)var[k] + eps);                                                          \
      tmp[k] = (T)(w ? r * (double)w[k] : r);                                                               \
      tmp[C + k] = b ? b[k] : (T)0;                                                                         \
    }                                                                                                       \
    pdk_channel_affine_##sfx(pd_tensor_data(c[0]), mean, tmp, tmp + C, y, g);                               \
    free(tmp);                                                                                              \
    return 0;                                                                                               \
  }
AFFINE_FROM_STATS(f32, float)
AFFINE_FROM_STATS(f64, double)

static pd_status infer_kernel(const pd_kernel_ctx *ctx) {
  pd_tensor *c[PD_NORM_MAX_IN];
  pd_status st = pd_norm_contiguous_inputs(ctx, c);
  if (st == PD_OK) {
    bool has_w = ctx->attrs->i[PD_NORM_I_HAS_W], has_b = ctx->attrs->i[PD_NORM_I_HAS_B];
    pd_bn_geom g = geom_of(ctx->in[0], ctx->attrs->i[PD_NORM_I_AXIS]);
    double eps = ctx->attrs->f[PD_NORM_F_EPS];
    int bad = ctx->in[0]->dtype == PD_FLOAT32
                  ? infer_f32(c, has_w, has_b, pd_tensor_data(ctx->out[0]), &g, eps)
                  : infer_f64(c, has_w, has_b, pd_tensor_data(ctx->out[0]), &g, eps);
    if (bad) st = pd_set_error(PD_ERR_MEMORY, "%s: out of memory", ctx->def->name);
  }
  pd_norm_release_inputs(c);
  return st;
}

/* y = (x - m) r w + b, r = 1/sqrt(v + eps), in the [.., C, ..] view:
 *   dx = dy r w, dm = -sum(dy) r w, dv = -sum(dy (x - m)) w r^3 / 2,
 *   dw = sum(dy (x - m) r), db = sum(dy). */
static pd_status infer_backward(const pd_backward_ctx *c) {
  const pd_attrs *a = c->attrs;
  bool has_w = a->i[PD_NORM_I_HAS_W], has_b = a->i[PD_NORM_I_HAS_B];
  int iw = has_w ? 3 : -1, ib = has_b ? (has_w ? 4 : 3) : -1;
  int64_t vs[3], ps[3];
  int nd;
  bn_view(&c->in_meta[0], a->i[PD_NORM_I_AXIS], vs, &nd, ps);
  pd_norm_tmps T = {0};
#define K(e) pd_norm_keep(&T, (e))
  pd_tensor *x = K(pd_reshape(c->inputs[0], nd, vs)), *dy = K(pd_reshape(c->grad_out[0], nd, vs));
  pd_tensor *m = K(pd_reshape(c->inputs[1], nd, ps)), *v = K(pd_reshape(c->inputs[2], nd, ps));
  pd_tensor *r = K(pd_rsqrt(K(pd_scale(v, 1.0, a->f[PD_NORM_F_EPS], true))));
  pd_tensor *rw = has_w ? K(pd_multiply(r, K(pd_reshape(c->inputs[iw], nd, ps)))) : r;
  pd_tensor *xc = K(pd_subtract(x, m));
  pd_tensor *g[5] = {NULL};
  if (c->needs_grad[0]) g[0] = K(pd_multiply(dy, rw));
  if (c->needs_grad[1] || (ib >= 0 && c->needs_grad[ib])) {
    pd_tensor *sdy = K(pd_grad_reduce_to(dy, nd, ps));
    if (c->needs_grad[1]) g[1] = K(pd_scale(K(pd_multiply(sdy, rw)), -1.0, 0.0, true));
    if (ib >= 0) g[ib] = sdy;
  }
  if (c->needs_grad[2] || (iw >= 0 && c->needs_grad[iw])) {
    pd_tensor *sxy = K(pd_grad_reduce_to(K(pd_multiply(dy, xc)), nd, ps));
    if (c->needs_grad[2])
      g[2] = K(pd_scale(K(pd_multiply(K(pd_multiply(sxy, rw)), K(pd_multiply(r, r)))), -0.5, 0.0, true));
    if (iw >= 0) g[iw] = K(pd_multiply(sxy, r));
  }
#undef K
  pd_status st = PD_OK;
  for (int i = 0; i < c->n_in && st == PD_OK; i++) {
    if (!c->needs_grad[i]) continue;
    if (!g[i]) {
      st = pd_last_status() != PD_OK ? pd_last_status() : PD_ERR_INVALID;
      break;
    }
    c->grad_in[i] = pd_reshape(g[i], c->in_meta[i].ndim, c->in_meta[i].shape);
    if (!c->grad_in[i]) st = pd_last_status();
  }
  pd_norm_tmps_free(&T);
  return st;
}

static double bn_flops(pd_tensor *const *in, int n_in, const pd_attrs *a, const pd_meta *out, int n_out) {
  (void)n_in;
  (void)a;
  (void)out;
  (void)n_out;
  return 6.0 * (double)in[0]->numel;
}

PD_OPDEF(batch_norm, .n_in = -1, .n_out = 3, .flags = PD_OPF_DIFF | PD_OPF_HALF_VIA_F32 | PD_OPF_SAVE_IN,
         .nondiff_out = 0x6, .attr_names = "i0:channel_last,i1:has_weight,i2:has_bias,f0:epsilon",
         .infer_meta = bn_meta, .kernel = {[PD_PLACE_CPU] = bn_kernel}, .backward = bn_backward,
         .flops = bn_flops);
PD_OPDEF(batch_norm_grad, .n_in = -1, .n_out = -1,
         .flags = PD_OPF_DIFF | PD_OPF_HALF_VIA_F32 | PD_OPF_SAVE_IN,
         .attr_names = "i0:channel_last,i1:has_weight,i2:has_bias,f0:epsilon", .infer_meta = bn_grad_meta,
         .kernel = {[PD_PLACE_CPU] = bn_grad_kernel}, .backward = bn_grad_backward, .flops = bn_flops);
PD_OPDEF(batch_norm_infer, .n_in = -1, .n_out = 1,
         .flags = PD_OPF_DIFF | PD_OPF_HALF_VIA_F32 | PD_OPF_SAVE_IN,
         .attr_names = "i0:channel_last,i1:has_weight,i2:has_bias,f0:epsilon", .infer_meta = infer_meta,
         .kernel = {[PD_PLACE_CPU] = infer_kernel}, .backward = infer_backward, .flops = bn_flops);

/* ---- pd_batch_norm --------------------------------------------------------------------------------- */

/* running = momentum running + (1 - momentum) batch, in place, no gradient. */
static pd_status update_running(pd_tensor *running, pd_tensor *batch, double momentum) {
  pd_tensor *d = pd_subtract(batch, running);
  pd_tensor *s = pd_scale(d, 1.0 - momentum, 0.0, true);
  pd_tensor *r = pd_add_(running, s);
  pd_status st = r ? PD_OK : pd_last_status();
  pd_tensor_release(d);
  pd_tensor_release(s);
  pd_tensor_release(r);
  return st;
}

pd_tensor *pd_batch_norm(pd_tensor *x, pd_tensor *running_mean, pd_tensor *running_var, pd_tensor *weight,
                         pd_tensor *bias, bool training, double momentum, double epsilon,
                         const char *data_format, pd_global_stats use_global_stats) {
  const char *op = "batch_norm";
  if (!x) return pd_norm_null_input(op, "x");
  if (!running_mean) return pd_norm_null_input(op, "running_mean");
  if (!running_var) return pd_norm_null_input(op, "running_var");
  bool cl;
  if (pd_norm_parse_format(op, data_format, "NCHW", &cl) != PD_OK || check_x(op, x) != PD_OK) return NULL;
  /* the global channels of a DTensor x (its shard may hold some) against
   * the statistics' global size; the op's own checks see the shards */
  int gnd, snd;
  const int64_t *gs = pd_global_shape(x, &gnd);
  int64_t ch = cl || gnd == 2 ? gs[gnd - 1] : gs[1];
  pd_tensor *stats[2] = {running_mean, running_var};
  for (int k = 0; k < 2; k++) {
    const int64_t *ss = pd_global_shape(stats[k], &snd);
    if (pd_norm_check_channel_dims(op, snd, ss, k ? "running_var" : "running_mean", ch, x,
                                   layout_name(x, cl)) != PD_OK)
      return NULL;
  }
  bool batch_stats =
      use_global_stats == PD_GLOBAL_STATS_NONE ? training : use_global_stats == PD_GLOBAL_STATS_FALSE;
  pd_attrs a = {.i = {cl || x->ndim == 2, weight != NULL, bias != NULL}, .f = {epsilon}};
  pd_tensor *in[5];
  int n = 0;
  in[n++] = x;
  if (!batch_stats) {
    in[n++] = running_mean;
    in[n++] = running_var;
  }
  if (weight) in[n++] = weight;
  if (bias) in[n++] = bias;
  if (!batch_stats) return pd_dispatch1(PD_OP_batch_norm_infer, in, n, &a);

  pd_internal_enter();
  pd_tensor *out[PD_MAX_OUTPUTS];
  int no = 0;
  pd_status st = pd_dispatch(PD_OP_batch_norm, in, n, &a, out, &no);
  /* numel -1: a Variable whose batch is unknown; the update is recorded */
  if (st == PD_OK && x->numel != 0) {
    bool prev = pd_grad_mode_set(false);
    st = update_running(running_mean, out[1], momentum);
    if (st == PD_OK) st = update_running(running_var, out[2], momentum);
    pd_grad_mode_set(prev);
  }
  for (int k = 1; k < no; k++) pd_tensor_release(out[k]);
  pd_tensor *y = st == PD_OK ? out[0] : NULL;
  if (st != PD_OK && no > 0) pd_tensor_release(out[0]);
  pd_internal_leave();
  return pd_scope_track(y);
}
