/* group_norm and instance_norm (instance norm is group norm with one group
 * per channel) over channel-first x [N, C, *]; channel-last formats are
 * handled by the public functions with transposes. Fused kernels in
 * kernels/cpu/norm_row.c; the fused backward op group_norm_grad
 * (x, [weight], dy) -> dx, [dw], [db] is differentiable through
 * norm/norm_util.c.
 * Attrs: i0 groups (instance_norm: ignored, one per channel), i1 has_weight,
 * i2 has_bias, f0 epsilon. */
#include <string.h>

#include "../../kernels/cpu/norm.h"
#include "norm_util.h"
#include "paddlec/norm.h"

static int64_t groups_of(const pd_op_def *def, const pd_tensor *x, const pd_attrs *a) {
  if (def == &pd_opdef_instance_norm) return x->ndim >= 2 && x->shape[1] > 0 ? x->shape[1] : 1;
  return a->i[PD_NORM_I_AXIS];
}

static pd_status check_groups(const char *op, const pd_tensor *x, int64_t groups) {
  if (x->ndim < 2)
    return pd_set_error(PD_ERR_SHAPE, "%s: x must have at least 2 dims (N, C, ...), got shape %s", op,
                        PD_SHAPE_STR(x));
  int64_t c = x->shape[1];
  if (groups <= 0 || c % groups != 0)
    return pd_set_error(PD_ERR_SHAPE, "%s: num_groups %lld does not divide the %lld channels of x (shape %s)",
                        op, (long long)groups, (long long)c, PD_SHAPE_STR(x));
  return PD_OK;
}

static void geom(const pd_tensor *x, int64_t *b, int64_t *c, int64_t *s) {
  *b = x->shape[0];
  *c = x->shape[1];
  *s = 1;
  for (int d = 2; d < x->ndim; d++) *s *= x->shape[d];
}

static pd_status gn_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                         pd_meta *out, int *n_out) {
  pd_status st = pd_norm_check_arity(def, n_in, 0, a);
  if (st != PD_OK) return st;
  const char *names[3] = {"x", a->i[PD_NORM_I_HAS_W] ? "weight" : "bias", "bias"};
  if ((st = pd_norm_check_dtypes(def, in, n_in, names)) != PD_OK) return st;
  if ((st = check_groups(def->name, in[0], groups_of(def, in[0], a))) != PD_OK) return st;
  for (int i = 1; i < n_in; i++)
    if ((st = pd_norm_check_channel_param(def->name, in[i], names[i], in[0]->shape[1], in[0],
                                          "channels at dim 1")) != PD_OK)
      return st;
  pd_meta_of(in[0], out);
  *n_out = 1;
  return PD_OK;
}

static pd_status gn_kernel(const pd_kernel_ctx *ctx) {
  pd_tensor *c[PD_NORM_MAX_IN];
  pd_status st = pd_norm_contiguous_inputs(ctx, c);
  int64_t B, C, S, G = groups_of(ctx->def, ctx->in[0], ctx->attrs);
  geom(ctx->in[0], &B, &C, &S);
  if (st == PD_OK && C > 0) {
    void *w, *b;
    pd_norm_affine_data(ctx->attrs, c, 1, &w, &b);
    double eps = ctx->attrs->f[PD_NORM_F_EPS];
    if (ctx->in[0]->dtype == PD_FLOAT32)
      pdk_group_norm_fwd_f32(pd_tensor_data(c[0]), w, b, pd_tensor_data(ctx->out[0]), B, C, S, G, eps);
    else
      pdk_group_norm_fwd_f64(pd_tensor_data(c[0]), w, b, pd_tensor_data(ctx->out[0]), B, C, S, G, eps);
  }
  pd_norm_release_inputs(c);
  return st;
}

static pd_status gn_backward(const pd_backward_ctx *c) {
  pd_attrs a = *c->attrs;
  const pd_meta *x = &c->in_meta[0];
  if (a.i[PD_NORM_I_AXIS] <= 0) a.i[PD_NORM_I_AXIS] = x->shape[1] > 0 ? x->shape[1] : 1; /* instance_norm */
  return pd_norm_backward_via(c, PD_OP_group_norm_grad, &a);
}

/* ---- group_norm_grad ---------------------------------------------------------------------------- */

static pd_status gn_grad_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                              pd_meta *out, int *n_out) {
  bool has_w = a->i[PD_NORM_I_HAS_W];
  pd_status st = pd_norm_grad_check_inputs(def, in, n_in, a);
  if (st != PD_OK) return st;
  pd_tensor *x = in[0];
  if ((st = check_groups(def->name, x, a->i[PD_NORM_I_AXIS])) != PD_OK) return st;
  if (has_w && (st = pd_norm_check_channel_param(def->name, in[1], "weight", x->shape[1], x,
                                                 "channels at dim 1")) != PD_OK)
    return st;
  return pd_norm_grad_metas(def, in, n_in, a, x->shape[1], out, n_out);
}

static pd_status gn_grad_kernel(const pd_kernel_ctx *ctx) {
  pd_tensor *c[PD_NORM_MAX_IN];
  pd_status st = pd_norm_contiguous_inputs(ctx, c);
  if (st == PD_OK) {
    int64_t B, C, S;
    geom(ctx->in[0], &B, &C, &S);
    void *w, *dw, *db, *dy = pd_tensor_data(c[ctx->n_in - 1]);
    pd_norm_affine_data(ctx->attrs, c, 1, &w, NULL);
    pd_norm_affine_data(ctx->attrs, ctx->out, 1, &dw, &db);
    double eps = ctx->attrs->f[PD_NORM_F_EPS];
    int bad = ctx->in[0]->dtype == PD_FLOAT32
                  ? pdk_group_norm_bwd_f32(pd_tensor_data(c[0]), w, dy, pd_tensor_data(ctx->out[0]), dw, db,
                                           B, C, S, ctx->attrs->i[PD_NORM_I_AXIS], eps)
                  : pdk_group_norm_bwd_f64(pd_tensor_data(c[0]), w, dy, pd_tensor_data(ctx->out[0]), dw, db,
                                           B, C, S, ctx->attrs->i[PD_NORM_I_AXIS], eps);
    if (bad)
      st = pd_set_error(PD_ERR_MEMORY, "%s: out of memory for the statistics of x %s", ctx->def->name,
                        PD_SHAPE_STR(ctx->in[0]));
  }
  pd_norm_release_inputs(c);
  return st;
}

/* x [B, C, S...] seen as [B, G, C/G, S], statistics over (2, 3). */
static pd_status gn_grad_backward(const pd_backward_ctx *c) {
  const pd_attrs *a = c->attrs;
  const pd_meta *x = &c->in_meta[0];
  int64_t g = a->i[PD_NORM_I_AXIS], ch = x->shape[1], s = 1;
  for (int d = 2; d < x->ndim; d++) s *= x->shape[d];
  pd_norm_view v = {.nd = 4,
                    .shape = {x->shape[0], g, ch / g, s},
                    .naxes = 2,
                    .axes = {2, 3},
                    .wshape = {1, g, ch / g, 1},
                    .count = ch / g * s,
                    .centered = true,
                    .eps = a->f[PD_NORM_F_EPS]};
  return pd_norm_grad_backward(c, &v, a->i[PD_NORM_I_HAS_W], a->i[PD_NORM_I_HAS_B]);
}

static double gn_flops(pd_tensor *const *in, int n_in, const pd_attrs *a, const pd_meta *out, int n_out) {
  (void)n_in;
  (void)a;
  (void)out;
  (void)n_out;
  return 8.0 * (double)in[0]->numel;
}

#define GN_DEF(opname)                                                                                  \
  PD_OPDEF(opname, .n_in = -1, .n_out = 1, .flags = PD_OPF_DIFF | PD_OPF_HALF_VIA_F32 | PD_OPF_SAVE_IN, \
           .attr_names = "i0:groups,i1:has_weight,i2:has_bias,f0:epsilon", .infer_meta = gn_meta,       \
           .kernel = {[PD_PLACE_CPU] = gn_kernel}, .backward = gn_backward, .flops = gn_flops);
GN_DEF(group_norm)
GN_DEF(instance_norm)
PD_OPDEF(group_norm_grad, .n_in = -1, .n_out = -1,
         .flags = PD_OPF_DIFF | PD_OPF_HALF_VIA_F32 | PD_OPF_SAVE_IN,
         .attr_names = "i0:groups,i1:has_weight,i2:has_bias,f0:epsilon", .infer_meta = gn_grad_meta,
         .kernel = {[PD_PLACE_CPU] = gn_grad_kernel}, .backward = gn_grad_backward, .flops = gn_flops);

/* ---- public functions ----------------------------------------------------------------------------- */

/* Runs op on x (channel-first, transposing a channel-last x there and back). */
static pd_tensor *run_channel_first(pd_op_id id, pd_tensor *x, pd_tensor *weight, pd_tensor *bias,
                                    bool channel_last, const pd_attrs *a) {
  pd_internal_enter();
  pd_tensor *xt = x, *y = NULL;
  int64_t perm[PD_MAX_DIMS];
  bool move = channel_last && x->ndim > 2;
  if (move) {
    pd_norm_perm(x->ndim, true, perm);
    xt = pd_transpose(x, x->ndim, perm);
  }
  pd_tensor *in[3];
  int n = 0;
  in[n++] = xt;
  if (weight) in[n++] = weight;
  if (bias) in[n++] = bias;
  pd_tensor *yt = pd_dispatch1(id, in, n, a);
  if (move) {
    pd_norm_perm(x->ndim, false, perm);
    pd_tensor *v = pd_transpose(yt, x->ndim, perm);
    y = pd_contiguous(v);
    pd_tensor_release(v);
    pd_tensor_release(yt);
    pd_tensor_release(xt);
  } else {
    y = yt;
  }
  pd_internal_leave();
  return pd_scope_track(y);
}

/* Checks x's channels (dim 1 or last) against num_groups before any transpose. */
static pd_status check_channel_last(const char *op, const pd_tensor *x, bool channel_last, int64_t groups) {
  if (x->ndim < 2)
    return pd_set_error(PD_ERR_SHAPE, "%s: x must have at least 2 dims (N, C, ...), got shape %s", op,
                        PD_SHAPE_STR(x));
  if (!channel_last || groups < 0) return PD_OK;
  int64_t c = x->shape[x->ndim - 1];
  if (groups == 0 || (c > 0 && c % groups != 0))
    return pd_set_error(
        PD_ERR_SHAPE, "%s: num_groups %lld does not divide the %lld channels of x (shape %s, channels last)",
        op, (long long)groups, (long long)c, PD_SHAPE_STR(x));
  return PD_OK;
}

pd_tensor *pd_group_norm(pd_tensor *x, int64_t num_groups, double epsilon, pd_tensor *weight, pd_tensor *bias,
                         const char *data_format) {
  const char *op = "group_norm";
  if (!x) return pd_norm_null_input(op, "x");
  bool cl;
  if (pd_norm_parse_format(op, data_format, "NCHW", &cl) != PD_OK) return NULL;
  if (check_channel_last(op, x, cl, num_groups) != PD_OK) return NULL;
  if (cl && x->ndim > 2) {
    int64_t c = x->shape[x->ndim - 1];
    for (int i = 0; i < 2; i++) {
      pd_tensor *p = i ? bias : weight;
      if (p && pd_norm_check_channel_param(op, p, i ? "bias" : "weight", c, x, "channels last") != PD_OK)
        return NULL;
    }
  }
  pd_attrs a = {.i = {num_groups, weight != NULL, bias != NULL}, .f = {epsilon}};
  return run_channel_first(PD_OP_group_norm, x, weight, bias, cl, &a);
}

pd_tensor *pd_instance_norm(pd_tensor *x, pd_tensor *running_mean, pd_tensor *running_var, pd_tensor *weight,
                            pd_tensor *bias, bool use_input_stats, double momentum, double eps,
                            const char *data_format) {
  (void)momentum;
  const char *op = "instance_norm";
  if (!x) return pd_norm_null_input(op, "x");
  bool cl;
  if (pd_norm_parse_format(op, data_format, "NCHW", &cl) != PD_OK) return NULL;
  if (check_channel_last(op, x, cl, -1) != PD_OK) return NULL;
  if (!use_input_stats) {
    if (!running_mean) return pd_norm_null_input(op, "running_mean (use_input_stats is false)");
    if (!running_var) return pd_norm_null_input(op, "running_var (use_input_stats is false)");
    return pd_batch_norm(x, running_mean, running_var, weight, bias, false, momentum, eps, data_format,
                         PD_GLOBAL_STATS_TRUE);
  }
  if (cl && x->ndim > 2) {
    int64_t c = x->shape[x->ndim - 1];
    for (int i = 0; i < 2; i++) {
      pd_tensor *p = i ? bias : weight;
      if (p && pd_norm_check_channel_param(op, p, i ? "bias" : "weight", c, x, "channels last") != PD_OK)
        return NULL;
    }
  }
  pd_attrs a = {.i = {0, weight != NULL, bias != NULL}, .f = {eps}};
  return run_channel_first(PD_OP_instance_norm, x, weight, bias, cl, &a);
}
