/* Elementwise losses with their reduction: mse_loss, l1_loss,
 * smooth_l1_loss (Huber), binary_cross_entropy, the loss part of
 * binary_cross_entropy_with_logits, kl_div and margin_ranking_loss.
 *
 * One registry row each; attr i0 is the reduction (pd_loss_reduction). The
 * kernel evaluates the per-element loss with the strided elementwise driver
 * (vectorised on unit strides) and, for mean/sum, sums it in double. The
 * backward is written with public ops: the derivative of the per-element
 * loss times the output gradient (a 0-D one broadcasts), divided by the
 * element count for mean, summed back over broadcast dims. */
#include <math.h>
#include <string.h>

#include "../../kernels/cpu/loss.h"
#include "../../kernels/cpu/reduce.h"
#include "../elementwise/elementwise_util.h"
#include "loss_util.h"

/* ---- shared infer_meta / kernel ----------------------------------------- */

/* Output meta: the broadcast (or common, when same_shape) shape of the
 * inputs, or 0-D when reduced. */
static pd_status ew_loss_meta_impl(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                                   pd_meta *out, int *n_out, bool same_shape, bool batchmean_ok) {
  pd_status st = pd_loss_check_reduction(def->name, a->i[0], batchmean_ok);
  if (st != PD_OK) return st;
  for (int i = 0; i < n_in; i++)
    if (!pd_dtype_is_floating(in[i]->dtype))
      return pd_set_error(PD_ERR_DTYPE, "%s: input %d has dtype %s; expected a floating dtype", def->name, i,
                          pd_dtype_name(in[i]->dtype));
  if (same_shape) {
    if (in[0]->ndim != in[1]->ndim || !pd_shapes_agree(in[0]->ndim, in[0]->shape, in[1]->shape))
      return pd_set_error(PD_ERR_SHAPE,
                          "%s: input of shape %s and label of shape %s must have the same shape", def->name,
                          PD_SHAPE_STR(in[0]), PD_SHAPE_STR(in[1]));
    pd_meta_of(in[0], out);
  } else {
    st = pd_meta_broadcast(def, in, n_in, a, out, n_out);
    if (st != PD_OK) return st;
  }
  out->dtype = in[0]->dtype;
  if (a->i[0] != PD_REDUCTION_NONE) out->ndim = 0;
  *n_out = 1;
  return PD_OK;
}

static pd_status broadcast_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                                pd_meta *out, int *n_out) {
  return ew_loss_meta_impl(def, in, n_in, a, out, n_out, false, false);
}
static pd_status same_shape_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                                 pd_meta *out, int *n_out) {
  return ew_loss_meta_impl(def, in, n_in, a, out, n_out, true, false);
}
static pd_status kl_div_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                             pd_meta *out, int *n_out) {
  return ew_loss_meta_impl(def, in, n_in, a, out, n_out, true, true);
}

/* Runs the per-element loss fns over the inputs into out (reduction none)
 * or into a temporary that is then summed. */
static pd_status ew_loss_run(const pd_op_def *def, const pd_ew_fn *fns, pd_tensor *const *in, int n_in,
                             const pd_attrs *a, pd_tensor *out) {
  pd_loss_reduction r = (pd_loss_reduction)a->i[0];
  if (r == PD_REDUCTION_NONE) return pd_ew_apply(def->name, fns, out->dtype, out, in, n_in, a->f);
  pd_meta m;
  int nm = 1;
  pd_attrs none = *a;
  none.i[0] = PD_REDUCTION_NONE;
  pd_status st = def->infer_meta(def, in, n_in, &none, &m, &nm);
  if (st != PD_OK) return st;
  pd_tensor *tmp = pd_tensor_new(out->dtype, m.ndim, m.shape);
  if (!tmp) return pd_last_status();
  st = pd_ew_apply(def->name, fns, out->dtype, tmp, in, n_in, a->f);
  if (st == PD_OK) {
    double s = pd_loss_sum_all(tmp);
    if (r == PD_REDUCTION_MEAN)
      s /= (double)tmp->numel;
    else if (r == PD_REDUCTION_BATCHMEAN && in[0]->ndim > 0)
      s /= (double)in[0]->shape[0];
    pd_store_from_f64(pd_data_ptr(out), out->dtype, s);
  }
  pd_tensor_release(tmp);
  return st;
}

#define EW_LOSS_KERNEL(kname, table)                                                  \
  static pd_status kname##_kernel(const pd_kernel_ctx *ctx) {                         \
    return ew_loss_run(ctx->def, table, ctx->in, ctx->n_in, ctx->attrs, ctx->out[0]); \
  }
EW_LOSS_KERNEL(mse, pdk_mse_loss)
EW_LOSS_KERNEL(l1, pdk_l1_loss)
EW_LOSS_KERNEL(huber, pdk_huber_loss)
EW_LOSS_KERNEL(sce, pdk_sigmoid_ce_loss)
EW_LOSS_KERNEL(margin, pdk_margin_ranking_loss)

static pd_status kl_kernel(const pd_kernel_ctx *ctx) {
  return ew_loss_run(ctx->def, ctx->attrs->i[1] ? pdk_kldiv_log_loss : pdk_kldiv_loss, ctx->in, ctx->n_in,
                     ctx->attrs, ctx->out[0]);
}

/* binary_cross_entropy checks 0 <= input <= 1 first, naming the first bad value. */
static pd_status bce_kernel(const pd_kernel_ctx *ctx) {
  int64_t bad = -1;
  double v = 0;
  if (pd_loss_find_outside(ctx->in[0], 0.0, 1.0, &bad, &v) != PD_OK) return pd_last_status();
  if (bad >= 0)
    return pd_set_error(PD_ERR_INVALID, "%s: input value %g at index %lld is outside [0, 1]", ctx->def->name,
                        v, (long long)bad);
  return ew_loss_run(ctx->def, pdk_bce_loss, ctx->in, ctx->n_in, ctx->attrs, ctx->out[0]);
}

/* ---- backward ------------------------------------------------------------ */

#define K PD_K
#define S PD_S

/* The output gradient, divided by the number of elements for mean (or by
 * the batch size for batchmean). */
static pd_tensor *loss_grad_scaled(const pd_backward_ctx *c, pd_tmps *T_) {
  pd_tensor *g = c->grad_out[0];
  pd_loss_reduction r = (pd_loss_reduction)c->attrs->i[0];
  if (r == PD_REDUCTION_MEAN || r == PD_REDUCTION_BATCHMEAN) {
    int nd = 0;
    int64_t shape[PD_MAX_DIMS];
    double n = 1;
    if (r == PD_REDUCTION_BATCHMEAN) {
      n = c->in_meta[0].ndim > 0 ? (double)c->in_meta[0].shape[0] : 1.0;
    } else {
      int64_t cur[PD_MAX_DIMS];
      int ncur = c->in_meta[0].ndim;
      memcpy(cur, c->in_meta[0].shape, sizeof(int64_t) * (size_t)ncur);
      for (int i = 1; i < c->n_in; i++) {
        if (pd_broadcast_shapes("loss", ncur, cur, c->in_meta[i].ndim, c->in_meta[i].shape, &nd, shape) !=
            PD_OK)
          return NULL;
        ncur = nd;
        memcpy(cur, shape, sizeof(int64_t) * (size_t)nd);
      }
      n = (double)pd_shape_numel(ncur, cur);
    }
    return pd_tk(T_, pd_scale(g, 1.0 / n, 0.0, true));
  }
  return g;
}

static pd_status mse_backward(const pd_backward_ctx *c) {
  pd_tmps T = {0};
  pd_tensor *g = loss_grad_scaled(c, &T), *x = c->inputs[0], *y = c->inputs[1];
  pd_tensor *d2 = K(pd_scale(K(pd_subtract(x, y)), 2.0, 0.0, true));
  pd_status st = PD_OK;
  if (c->needs_grad[0]) st = pd_ew_set_grad(c, 0, pd_multiply(d2, g));
  if (st == PD_OK && c->needs_grad[1])
    st = pd_ew_set_grad(c, 1, pd_scale(K(pd_multiply(d2, g)), -1, 0, true));
  pd_tmps_free(&T);
  return st;
}

static pd_status l1_backward(const pd_backward_ctx *c) {
  pd_tmps T = {0};
  pd_tensor *g = loss_grad_scaled(c, &T), *x = c->inputs[0], *y = c->inputs[1];
  pd_tensor *s = K(pd_sign(K(pd_subtract(x, y))));
  pd_status st = PD_OK;
  if (c->needs_grad[0]) st = pd_ew_set_grad(c, 0, pd_multiply(s, g));
  if (st == PD_OK && c->needs_grad[1]) st = pd_ew_set_grad(c, 1, pd_scale(K(pd_multiply(s, g)), -1, 0, true));
  pd_tmps_free(&T);
  return st;
}

/* d/dr of the Huber function: clip(r, -delta, delta) (delta sign(r) for delta <= 0). */
static pd_status huber_backward(const pd_backward_ctx *c) {
  pd_tmps T = {0};
  pd_tensor *g = loss_grad_scaled(c, &T), *x = c->inputs[0], *y = c->inputs[1];
  double delta = c->attrs->f[0];
  pd_tensor *r = K(pd_subtract(y, x));
  pd_tensor *h = delta > 0 ? K(pd_clip(r, -delta, delta)) : K(pd_scale(K(pd_sign(r)), delta, 0, true));
  pd_tensor *hg = K(pd_multiply(h, g));
  pd_status st = PD_OK;
  if (c->needs_grad[0]) st = pd_ew_set_grad(c, 0, pd_scale(hg, -1, 0, true));
  if (st == PD_OK && c->needs_grad[1]) st = pd_ew_set_grad(c, 1, pd_tensor_retain(hg));
  pd_tmps_free(&T);
  return st;
}

/* Paddle's gradient: g (x - y) / max(x (1 - x), 1e-12); label: the clamped
 * log(1 - x) - log(x). */
static pd_status bce_backward(const pd_backward_ctx *c) {
  pd_tmps T = {0};
  pd_tensor *g = loss_grad_scaled(c, &T), *x = c->inputs[0], *y = c->inputs[1];
  pd_tensor *one_minus = K(pd_scale(x, -1.0, 1.0, true));
  pd_status st = PD_OK;
  if (c->needs_grad[0]) {
    pd_tensor *den = K(pd_clip(K(pd_multiply(x, one_minus)), 1e-12, INFINITY));
    st = pd_ew_set_grad(c, 0, pd_divide(K(pd_multiply(K(pd_subtract(x, y)), g)), den));
  }
  if (st == PD_OK && c->needs_grad[1]) {
    pd_tensor *l1 = K(pd_clip(K(pd_log(one_minus)), -100.0, INFINITY));
    pd_tensor *l0 = K(pd_clip(K(pd_log(x)), -100.0, INFINITY));
    st = pd_ew_set_grad(c, 1, pd_multiply(K(pd_subtract(l1, l0)), g));
  }
  pd_tmps_free(&T);
  return st;
}

/* (sigmoid(x) - y) g for the logits, -x g for the label; zero where the
 * label is the ignore value -100. */
static pd_status sce_backward(const pd_backward_ctx *c) {
  pd_tmps T = {0};
  pd_tensor *g = loss_grad_scaled(c, &T), *x = c->inputs[0], *y = c->inputs[1];
  int64_t bad = -1;
  double v;
  /* labels whose integer part is -100 are ignored (a static Variable's
   * labels are unknown while a Program is traced: the mask is recorded) */
  if (y->is_meta)
    bad = 0;
  else if (pd_loss_find_inside(y, -101.0, -100.0, &bad, &v) != PD_OK) {
    pd_tmps_free(&T);
    return pd_last_status();
  }
  if (bad >= 0) {
    pd_tensor *keep =
        K(pd_logical_or(K(pd_less_equal(y, S(-101.0, y))), K(pd_greater_than(y, S(-100.0, y)))));
    g = K(pd_ew_masked(keep, g));
  }
  pd_status st = PD_OK;
  if (c->needs_grad[0]) st = pd_ew_set_grad(c, 0, pd_multiply(K(pd_subtract(K(pd_sigmoid(x)), y)), g));
  if (st == PD_OK && c->needs_grad[1]) st = pd_ew_set_grad(c, 1, pd_multiply(K(pd_neg(x)), g));
  pd_tmps_free(&T);
  return st;
}

/* label > 0: dx = -t g, dt = (log t + 1 - x) g; log_target: e = exp(t),
 * dx = -e g, dt = e (t - x + 1) g. */
static pd_status kl_backward(const pd_backward_ctx *c) {
  pd_tmps T = {0};
  pd_tensor *g = loss_grad_scaled(c, &T), *x = c->inputs[0], *t = c->inputs[1];
  pd_tensor *wx, *wt;
  if (c->attrs->i[1]) {
    pd_tensor *e = K(pd_exp(t));
    wx = K(pd_neg(e));
    wt = K(pd_multiply(e, K(pd_add(K(pd_subtract(t, x)), S(1.0, x)))));
  } else {
    pd_tensor *zero = S(0.0, t);
    pd_tensor *pos = K(pd_greater_than(t, zero));
    pd_tensor *ts = K(pd_where(pos, t, S(1.0, t))); /* log of a safe value where t <= 0 */
    wx = K(pd_neg(K(pd_where(pos, t, zero))));
    wt = K(pd_where(pos, K(pd_subtract(K(pd_add(K(pd_log(ts)), S(1.0, t))), x)), zero));
  }
  pd_status st = PD_OK;
  if (c->needs_grad[0]) st = pd_ew_set_grad(c, 0, pd_multiply(wx, g));
  if (st == PD_OK && c->needs_grad[1]) st = pd_ew_set_grad(c, 1, pd_multiply(wt, g));
  pd_tmps_free(&T);
  return st;
}

/* z = label (other - input) + margin; where z > 0: d input = -label g,
 * d other = label g, d label = (other - input) g. */
static pd_status margin_backward(const pd_backward_ctx *c) {
  pd_tmps T = {0};
  pd_tensor *g = loss_grad_scaled(c, &T), *x = c->inputs[0], *o = c->inputs[1], *l = c->inputs[2];
  pd_tensor *d = K(pd_subtract(o, x));
  pd_tensor *z = K(pd_scale(K(pd_multiply(l, d)), 1.0, c->attrs->f[0], true));
  pd_tensor *mg = K(pd_ew_masked(K(pd_greater_than(z, S(0.0, z))), g));
  pd_tensor *lg = K(pd_multiply(l, mg));
  pd_status st = PD_OK;
  if (c->needs_grad[0]) st = pd_ew_set_grad(c, 0, pd_scale(lg, -1, 0, true));
  if (st == PD_OK && c->needs_grad[1]) st = pd_ew_set_grad(c, 1, pd_tensor_retain(lg));
  if (st == PD_OK && c->needs_grad[2]) st = pd_ew_set_grad(c, 2, pd_multiply(d, mg));
  pd_tmps_free(&T);
  return st;
}

/* ---- registry rows --------------------------------------------------------- */

#define LOSS_FLAGS (PD_OPF_DIFF | PD_OPF_PROMOTE | PD_OPF_FLOAT_ONLY | PD_OPF_HALF_VIA_F32 | PD_OPF_SAVE_IN)
#define LOSS_DEF(opname, nin, meta, kname, attrs)                                                         \
  PD_OPDEF(opname, .n_in = nin, .n_out = 1, .flags = LOSS_FLAGS, .attr_names = attrs, .infer_meta = meta, \
           .kernel = {[PD_PLACE_CPU] = kname##_kernel}, .backward = kname##_backward,                     \
           .flops = pd_loss_flops);
LOSS_DEF(mse_loss, 2, broadcast_meta, mse, "i0:reduction")
LOSS_DEF(l1_loss, 2, broadcast_meta, l1, "i0:reduction")
LOSS_DEF(smooth_l1_loss, 2, same_shape_meta, huber, "i0:reduction,f0:delta")
LOSS_DEF(binary_cross_entropy, 2, same_shape_meta, bce, "i0:reduction")
LOSS_DEF(binary_cross_entropy_with_logits, 2, same_shape_meta, sce, "i0:reduction")
LOSS_DEF(kl_div, 2, kl_div_meta, kl, "i0:reduction,i1:log_target")
LOSS_DEF(margin_ranking_loss, 3, broadcast_meta, margin, "i0:reduction,f0:margin")

/* ---- public functions ---------------------------------------------------- */

static pd_tensor *run2(pd_op_id id, pd_tensor *x, pd_tensor *y, pd_loss_reduction r, double f0, int64_t i1) {
  pd_attrs a = {.i = {(int64_t)r, i1}, .f = {f0}};
  pd_tensor *in[2] = {x, y};
  return pd_dispatch1(id, in, 2, &a);
}

pd_tensor *pd_mse_loss(pd_tensor *input, pd_tensor *label, pd_loss_reduction reduction) {
  return run2(PD_OP_mse_loss, input, label, reduction, 0, 0);
}
pd_tensor *pd_square_error_cost(pd_tensor *input, pd_tensor *label) {
  return run2(PD_OP_mse_loss, input, label, PD_REDUCTION_NONE, 0, 0);
}
pd_tensor *pd_l1_loss(pd_tensor *input, pd_tensor *label, pd_loss_reduction reduction) {
  return run2(PD_OP_l1_loss, input, label, reduction, 0, 0);
}
pd_tensor *pd_smooth_l1_loss(pd_tensor *input, pd_tensor *label, pd_loss_reduction reduction, double delta) {
  return run2(PD_OP_smooth_l1_loss, input, label, reduction, delta, 0);
}
pd_tensor *pd_kl_div(pd_tensor *input, pd_tensor *label, pd_loss_reduction reduction, bool log_target) {
  return run2(PD_OP_kl_div, input, label, reduction, 0, log_target);
}
pd_tensor *pd_margin_ranking_loss(pd_tensor *input, pd_tensor *other, pd_tensor *label, double margin,
                                  pd_loss_reduction reduction) {
  pd_attrs a = {.i = {(int64_t)reduction}, .f = {margin}};
  pd_tensor *in[3] = {input, other, label};
  return pd_dispatch1(PD_OP_margin_ranking_loss, in, 3, &a);
}

/* loss (a new reference, reduction none) times the weights, then reduced;
 * releases loss. Depth > 0. */
static pd_tensor *weigh_and_reduce(pd_tensor *loss, pd_tensor *w1, pd_tensor *w2, pd_loss_reduction r) {
  pd_tensor *cur = loss;
  pd_tensor *ws[2] = {w1, w2};
  for (int k = 0; k < 2 && cur; k++) {
    if (!ws[k]) continue;
    pd_tensor *n = pd_multiply(cur, ws[k]);
    pd_tensor_release(cur);
    cur = n;
  }
  if (!cur) return NULL;
  pd_tensor *out = pd_loss_reduce(cur, r);
  pd_tensor_release(cur);
  return out;
}

pd_tensor *pd_binary_cross_entropy(pd_tensor *input, pd_tensor *label, pd_tensor *weight,
                                   pd_loss_reduction reduction) {
  if (!weight) return run2(PD_OP_binary_cross_entropy, input, label, reduction, 0, 0);
  if (pd_loss_check_reduction("binary_cross_entropy", reduction, false) != PD_OK) return NULL;
  pd_internal_enter();
  pd_tensor *l = run2(PD_OP_binary_cross_entropy, input, label, PD_REDUCTION_NONE, 0, 0);
  pd_tensor *out = l ? weigh_and_reduce(l, weight, NULL, reduction) : NULL;
  pd_internal_leave();
  return pd_scope_track(out);
}

pd_tensor *pd_binary_cross_entropy_with_logits(pd_tensor *logit, pd_tensor *label, pd_tensor *weight,
                                               pd_loss_reduction reduction, pd_tensor *pos_weight) {
  if (!weight && !pos_weight)
    return run2(PD_OP_binary_cross_entropy_with_logits, logit, label, reduction, 0, 0);
  if (pd_loss_check_reduction("binary_cross_entropy_with_logits", reduction, false) != PD_OK) return NULL;
  pd_internal_enter();
  pd_tensor *l = run2(PD_OP_binary_cross_entropy_with_logits, logit, label, PD_REDUCTION_NONE, 0, 0);
  pd_tensor *lw = NULL;
  if (l && pos_weight) { /* 1 + label (pos_weight - 1) */
    pd_tensor *pm = pd_scale(pos_weight, 1.0, -1.0, true);
    pd_tensor *t = pd_multiply(label, pm);
    lw = pd_scale(t, 1.0, 1.0, true);
    pd_tensor_release(pm);
    pd_tensor_release(t);
    if (!lw) {
      pd_tensor_release(l);
      l = NULL;
    }
  }
  pd_tensor *out = l ? weigh_and_reduce(l, lw, weight, reduction) : NULL;
  pd_tensor_release(lw);
  pd_internal_leave();
  return pd_scope_track(out);
}
