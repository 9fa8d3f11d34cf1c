/* Softmax cross entropy: the fused op cross_entropy_with_softmax, its fused
 * gradient op, and the functional wrappers cross_entropy and
 * softmax_with_cross_entropy.
 *
 * cross_entropy_with_softmax(x, label) -> (loss, lse), attrs i0 soft_label,
 * i1 use_softmax, i2 ignore_index, i3 axis. loss and lse have x's shape with
 * the axis dim 1; lse is the log-sum-exp of each sample's logits (0 without
 * softmax), kept so that the backward is a single pass:
 *   dx = g (exp(x - lse) sum(y) - y)      (y one-hot for hard labels)
 * computed by cross_entropy_with_softmax_grad(x, label, lse, g), itself
 * differentiable (its backward uses public ops), so double backward works.
 * A gradient reaching lse adds g_lse softmax(x). */
#include <math.h>
#include <string.h>

#include "../elementwise/elementwise_util.h"
#include "loss_util.h"
#include "paddlec/ops.h"

#define K PD_K
#define S PD_S

/* ---- checks shared by the op and its grad op --------------------------- */

static pd_status ce_check(const pd_op_def *def, pd_tensor *x, pd_tensor *label, const pd_attrs *a,
                          int *axis) {
  pd_status st = pd_loss_check_logits(def, x, a->i[3], axis);
  if (st != PD_OK) return st;
  if (a->i[0]) { /* soft labels */
    if (label->dtype != x->dtype)
      return pd_set_error(PD_ERR_DTYPE, "%s: soft label dtype %s differs from input dtype %s", def->name,
                          pd_dtype_name(label->dtype), pd_dtype_name(x->dtype));
    if (label->ndim != x->ndim || !pd_shapes_agree(x->ndim, label->shape, x->shape))
      return pd_set_error(PD_ERR_SHAPE, "%s: soft label of shape %s does not match input of shape %s",
                          def->name, PD_SHAPE_STR(label), PD_SHAPE_STR(x));
    return PD_OK;
  }
  if (label->dtype == PD_BOOL)
    return pd_set_error(PD_ERR_DTYPE,
                        "%s: label dtype %s is not supported for hard labels (expected int64 or int32)",
                        def->name, pd_dtype_name(label->dtype));
  bool ok = label->ndim == x->ndim;
  for (int d = 0; ok && d < x->ndim; d++) ok = label->shape[d] == (d == *axis ? 1 : x->shape[d]);
  if (!ok) {
    int64_t want[PD_MAX_DIMS];
    memcpy(want, x->shape, sizeof(int64_t) * (size_t)x->ndim);
    want[*axis] = 1;
    char b[160];
    return pd_set_error(PD_ERR_SHAPE, "%s: label of shape %s does not match input of shape %s (expected %s)",
                        def->name, PD_SHAPE_STR(label), PD_SHAPE_STR(x),
                        pd_shape_str(x->ndim, want, b, sizeof b));
  }
  return PD_OK;
}

static void loss_meta(pd_tensor *x, int axis, pd_meta *m) {
  pd_meta_of(x, m);
  m->shape[axis] = 1;
}

static pd_status ce_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                         pd_meta *out, int *n_out) {
  (void)n_in;
  int axis;
  pd_status st = ce_check(def, in[0], in[1], a, &axis);
  if (st != PD_OK) return st;
  loss_meta(in[0], axis, &out[0]);
  out[1] = out[0];
  *n_out = 2;
  return PD_OK;
}

/* Contiguous operands for the kernels (new references or NULL on error). */
typedef struct ce_operands {
  pd_tensor *x, *y, *lab_holder, *lse, *g;
  const int64_t *lab;
  pd_ce_geom geom;
} ce_operands;

static void ce_operands_free(ce_operands *o) {
  pd_tensor_release(o->x);
  pd_tensor_release(o->y);
  pd_tensor_release(o->lab_holder);
  pd_tensor_release(o->lse);
  pd_tensor_release(o->g);
}

static pd_tensor *contig(pd_tensor *t) { return t->is_contiguous ? pd_tensor_retain(t) : pd_contiguous(t); }

static pd_status ce_operands_get(const pd_op_def *def, pd_tensor *x, pd_tensor *label, const pd_attrs *a,
                                 int axis, ce_operands *o) {
  memset(o, 0, sizeof *o);
  o->geom = pd_loss_class_geom(x->ndim, x->shape, axis);
  o->x = contig(x);
  if (!o->x) return pd_last_status();
  if (a->i[0]) {
    o->y = contig(label);
    if (!o->y) return pd_last_status();
    return PD_OK;
  }
  return pd_loss_labels_i64(def->name, label, o->geom.n, a->i[2], &o->lab, &o->lab_holder);
}

static pd_status ce_kernel(const pd_kernel_ctx *ctx) {
  int axis;
  pd_status st = ce_check(ctx->def, ctx->in[0], ctx->in[1], ctx->attrs, &axis);
  if (st != PD_OK) return st;
  ce_operands o;
  st = ce_operands_get(ctx->def, ctx->in[0], ctx->in[1], ctx->attrs, axis, &o);
  if (st == PD_OK) {
    bool sm = ctx->attrs->i[1] != 0;
    if (ctx->in[0]->dtype == PD_FLOAT32)
      pdk_ce_forward_f32(&o.geom, pd_data_ptr(o.x), o.lab, o.y ? pd_data_ptr(o.y) : NULL, ctx->attrs->i[2],
                         sm, pd_data_ptr(ctx->out[0]), pd_data_ptr(ctx->out[1]));
    else
      pdk_ce_forward_f64(&o.geom, pd_data_ptr(o.x), o.lab, o.y ? pd_data_ptr(o.y) : NULL, ctx->attrs->i[2],
                         sm, pd_data_ptr(ctx->out[0]), pd_data_ptr(ctx->out[1]));
  }
  ce_operands_free(&o);
  return st;
}

static pd_tensor *ce_grad_op(pd_tensor *x, pd_tensor *label, pd_tensor *lse, pd_tensor *g,
                             const pd_attrs *a) {
  pd_tensor *in[4] = {x, label, lse, g};
  return pd_dispatch1(PD_OP_cross_entropy_with_softmax_grad, in, 4, a);
}

static pd_status ce_backward(const pd_backward_ctx *c) {
  pd_tensor *x = c->inputs[0], *label = c->inputs[1], *lse = c->outputs[1];
  pd_tensor *g = c->grad_out[0], *glse = c->grad_out[1];
  bool soft = c->attrs->i[0] != 0, sm = c->attrs->i[1] != 0;
  pd_tmps T = {0};
  pd_status st = PD_OK;
  if (c->needs_grad[0]) {
    pd_tensor *dx = ce_grad_op(x, label, lse, g, c->attrs);
    if (dx && sm && pd_loss_any_nonzero(glse)) {
      pd_tensor *sx = K(pd_exp(K(pd_subtract(x, lse))));
      pd_tensor *t = pd_add(dx, K(pd_multiply(glse, sx)));
      pd_tensor_release(dx);
      dx = t;
    }
    st = pd_ew_set_grad(c, 0, dx);
  }
  if (st == PD_OK && soft && c->needs_grad[1]) {
    /* d loss / d y = lse - x (softmax) or -log(x), clamped as the forward */
    pd_tensor *d = sm ? K(pd_subtract(lse, x)) : K(pd_neg(K(pd_clip(K(pd_log(x)), -1e20, 1e20))));
    st = pd_ew_set_grad(c, 1, pd_multiply(d, g));
  }
  pd_tmps_free(&T);
  return st;
}

PD_OPDEF(cross_entropy_with_softmax, .n_in = 2, .n_out = 2,
         .flags = PD_OPF_DIFF | PD_OPF_HALF_VIA_F32 | PD_OPF_SAVE_IN | PD_OPF_SAVE_OUT,
         .attr_names = "i0:soft_label,i1:use_softmax,i2:ignore_index,i3:axis", .infer_meta = ce_meta,
         .kernel = {[PD_PLACE_CPU] = ce_kernel}, .backward = ce_backward, .flops = pd_loss_flops);

/* ---- the gradient op -------------------------------------------------------- */

static pd_status ceg_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                          pd_meta *out, int *n_out) {
  (void)n_in;
  int axis;
  pd_status st = ce_check(def, in[0], in[1], a, &axis);
  if (st != PD_OK) return st;
  pd_meta lm;
  loss_meta(in[0], axis, &lm);
  for (int k = 2; k < 4; k++) {
    if (in[k]->dtype != in[0]->dtype || in[k]->ndim != lm.ndim ||
        !pd_shapes_agree(lm.ndim, in[k]->shape, lm.shape)) {
      char b[160];
      return pd_set_error(PD_ERR_SHAPE, "%s: %s of shape %s and dtype %s does not match the loss (%s, %s)",
                          def->name, k == 2 ? "lse" : "loss gradient", PD_SHAPE_STR(in[k]),
                          pd_dtype_name(in[k]->dtype), pd_shape_str(lm.ndim, lm.shape, b, sizeof b),
                          pd_dtype_name(in[0]->dtype));
    }
  }
  pd_meta_of(in[0], out);
  *n_out = 1;
  return PD_OK;
}

static pd_status ceg_kernel(const pd_kernel_ctx *ctx) {
  int axis;
  pd_status st = ce_check(ctx->def, ctx->in[0], ctx->in[1], ctx->attrs, &axis);
  if (st != PD_OK) return st;
  ce_operands o;
  st = ce_operands_get(ctx->def, ctx->in[0], ctx->in[1], ctx->attrs, axis, &o);
  if (st == PD_OK) {
    o.lse = contig(ctx->in[2]);
    o.g = contig(ctx->in[3]);
    if (!o.lse || !o.g) st = pd_last_status();
  }
  if (st == PD_OK) {
    bool sm = ctx->attrs->i[1] != 0;
    const void *y = o.y ? pd_data_ptr(o.y) : NULL;
    if (ctx->in[0]->dtype == PD_FLOAT32)
      pdk_ce_backward_f32(&o.geom, pd_data_ptr(o.x), o.lab, y, pd_data_ptr(o.lse), pd_data_ptr(o.g),
                          ctx->attrs->i[2], sm, pd_data_ptr(ctx->out[0]));
    else
      pdk_ce_backward_f64(&o.geom, pd_data_ptr(o.x), o.lab, y, pd_data_ptr(o.lse), pd_data_ptr(o.g),
                          ctx->attrs->i[2], sm, pd_data_ptr(ctx->out[0]));
  }
  ce_operands_free(&o);
  return st;
}

/* Dense one-hot of hard labels (label's shape with the axis dim 1) along
 * axis with n classes, zero for ignored samples, in dtype dt; *valid gets
 * the non-ignored mask in dt (label's shape). */
static pd_tensor *dense_one_hot(pd_tensor *label, int axis, int ndim, int64_t n, int64_t ig, pd_dtype dt,
                                pd_tensor **valid) {
  pd_tmps T = {0};
  pd_tensor *li = label->dtype == PD_INT64 ? label : K(pd_cast(label, PD_INT64));
  pd_tensor *vb = K(pd_not_equal(li, K(pd_full(0, NULL, (double)ig, PD_INT64))));
  pd_tensor *vl = K(pd_where(vb, li, K(pd_full(0, NULL, 0.0, PD_INT64))));
  int64_t ax = axis;
  pd_tensor *oh = K(pd_one_hot(K(pd_squeeze(vl, 1, &ax)), n));
  if (oh && axis != ndim - 1) {
    int64_t perm[PD_MAX_DIMS];
    for (int d = 0, k = 0; d < ndim; d++) perm[d] = d == axis ? ndim - 1 : k++;
    oh = K(pd_transpose(oh, ndim, perm));
  }
  pd_tensor *vm = pd_cast(vb, dt);
  pd_tensor *r = pd_multiply(K(pd_cast(oh, dt)), vm);
  *valid = vm;
  pd_tmps_free(&T);
  return r;
}

/* Backward of dx = g (e Sy - y) (softmax, e = exp(x - lse) with lse taken
 * as an input) or dx = -g y / x (probabilities), contracted with G:
 *   softmax:  d x = g Sy G e, d lse = -sum_axis(d x), d g = Sy sum(G e) - sum(G y),
 *             d y = g (sum(G e) - G)
 *   probs:    d x = g G y / x^2, d g = -sum(G y / x), d y = -g G / x */
static pd_status ceg_backward(const pd_backward_ctx *c) {
  pd_tensor *x = c->inputs[0], *label = c->inputs[1], *lse = c->inputs[2], *g = c->inputs[3];
  pd_tensor *G = c->grad_out[0];
  bool soft = c->attrs->i[0] != 0, sm = c->attrs->i[1] != 0;
  int axis = (int)(c->attrs->i[3] < 0 ? c->attrs->i[3] + x->ndim : c->attrs->i[3]);
  int64_t ax = axis;
  pd_tmps T = {0};
  pd_tensor *Y, *Sy;
  if (soft) {
    Y = label;
    Sy = K(pd_sum(label, &ax, 1, true));
  } else {
    pd_tensor *valid = NULL;
    /* the classes from the op's meta: a DTensor's own shape is its shard's */
    Y = K(dense_one_hot(label, axis, x->ndim, c->in_meta[0].shape[axis], c->attrs->i[2], x->dtype, &valid));
    Sy = K(valid);
  }
  pd_status st = PD_OK;
  if (sm) {
    pd_tensor *GE = K(pd_multiply(G, K(pd_exp(K(pd_subtract(x, lse))))));
    pd_tensor *sGE = K(pd_sum(GE, &ax, 1, true));
    pd_tensor *gS = K(pd_multiply(g, Sy));
    pd_tensor *dxx = c->needs_grad[0] || c->needs_grad[2] ? K(pd_multiply(gS, GE)) : NULL;
    if (c->needs_grad[0]) st = pd_ew_set_grad(c, 0, pd_tensor_retain(dxx));
    if (st == PD_OK && c->needs_grad[2]) st = pd_ew_set_grad(c, 2, pd_neg(K(pd_sum(dxx, &ax, 1, true))));
    if (st == PD_OK && c->needs_grad[3])
      st = pd_ew_set_grad(
          c, 3, pd_subtract(K(pd_multiply(Sy, sGE)), K(pd_sum(K(pd_multiply(G, Y)), &ax, 1, true))));
    if (st == PD_OK && soft && c->needs_grad[1])
      st = pd_ew_set_grad(c, 1, pd_multiply(g, K(pd_subtract(sGE, G))));
  } else {
    pd_tensor *Gx = K(pd_divide(G, x));
    if (c->needs_grad[0])
      st = pd_ew_set_grad(c, 0, pd_multiply(K(pd_multiply(g, K(pd_multiply(Gx, Y)))), K(pd_reciprocal(x))));
    if (st == PD_OK && c->needs_grad[3])
      st = pd_ew_set_grad(c, 3, pd_neg(K(pd_sum(K(pd_multiply(Gx, Y)), &ax, 1, true))));
    if (st == PD_OK && soft && c->needs_grad[1]) st = pd_ew_set_grad(c, 1, pd_neg(K(pd_multiply(g, Gx))));
  }
  pd_tmps_free(&T);
  return st;
}

/* With the log-sum-exp an input of its own, the softmax form computes d x[i]
 * from x[i] alone, then subtracts at the label's element from d x itself
 * (kernels/cpu/loss_ce.c): d x may take x's bytes. The probabilities form
 * reads x after writing d x. */
static int ceg_writes_over(const pd_attrs *a) { return a->i[1] != 0 ? 0 : -1; }

PD_OPDEF(cross_entropy_with_softmax_grad, .n_in = 4, .n_out = 1,
         .flags = PD_OPF_DIFF | PD_OPF_HALF_VIA_F32 | PD_OPF_SAVE_IN,
         .attr_names = "i0:soft_label,i1:use_softmax,i2:ignore_index,i3:axis", .infer_meta = ceg_meta,
         .kernel = {[PD_PLACE_CPU] = ceg_kernel}, .backward = ceg_backward, .flops = pd_loss_flops,
         .writes_over = ceg_writes_over);

/* ---- functional wrappers ------------------------------------------------ */

static pd_status null_input(const char *op, const pd_tensor *a, const pd_tensor *b) {
  if (a && b) return PD_OK;
  if (pd_last_status() != PD_OK) return pd_last_status();
  return pd_set_error(PD_ERR_INVALID, "%s: %s is NULL", op, a ? "label" : "input");
}

/* The loss op on (x, label); returns the loss (lse dropped). */
static pd_tensor *ce_op(pd_tensor *x, pd_tensor *label, bool soft, bool sm, int64_t ig, int axis) {
  pd_attrs a = {.i = {soft, sm, ig, axis}};
  pd_tensor *in[2] = {x, label};
  return pd_dispatch1(PD_OP_cross_entropy_with_softmax, in, 2, &a);
}

/* num / (den + (den == 0)): 0 when nothing counted, as Paddle. */
static pd_tensor *safe_div(pd_tensor *num, pd_tensor *den) {
  pd_tmps T = {0};
  pd_tensor *z = K(pd_cast(K(pd_equal(den, S(0.0, den))), den ? den->dtype : PD_FLOAT32));
  pd_tensor *r = pd_divide(num, K(pd_add(den, z)));
  pd_tmps_free(&T);
  return r;
}

pd_tensor *pd_cross_entropy(pd_tensor *input, pd_tensor *label, pd_tensor *weight, int64_t ignore_index,
                            pd_loss_reduction reduction, bool soft_label, int axis, bool use_softmax,
                            double label_smoothing) {
  static const char *op = "cross_entropy";
  if (null_input(op, input, label) != PD_OK) return NULL;
  if (pd_loss_check_reduction(op, reduction, false) != PD_OK) return NULL;
  if (!(label_smoothing >= 0 && label_smoothing <= 1)) { /* NaN too */
    pd_set_error(PD_ERR_INVALID, "%s: label_smoothing must be in [0, 1], got %g", op, label_smoothing);
    return NULL;
  }
  if (ignore_index > 0 && soft_label) {
    pd_set_error(PD_ERR_INVALID, "%s: ignore_index %lld is not allowed with soft_label=true (use -100)", op,
                 (long long)ignore_index);
    return NULL;
  }
  int nd = input->ndim, ax;
  if (pd_loss_check_class_axis(op, "input", input, label, axis, &ax) != PD_OK) return NULL;
  if (!pd_dtype_is_floating(input->dtype)) {
    pd_set_error(PD_ERR_DTYPE, "%s: input dtype %s is not supported (expected a floating dtype)", op,
                 pd_dtype_name(input->dtype));
    return NULL;
  }
  int64_t C = input->shape[ax];
  if (weight && (weight->ndim != 1 || weight->shape[0] != C)) {
    pd_set_error(PD_ERR_SHAPE,
                 "%s: weight of shape %s does not match the %lld classes of input (shape %s, axis %d)", op,
                 PD_SHAPE_STR(weight), (long long)C, PD_SHAPE_STR(input), axis);
    return NULL;
  }
  pd_internal_enter();
  pd_tmps T = {0};
  int64_t ax64 = ax;
  bool squeeze_out = label->ndim == nd - 1, soft = soft_label;
  pd_tensor *lab = squeeze_out ? K(pd_unsqueeze(label, 1, &ax64)) : label;
  if (label_smoothing > 0) {
    if (!soft) { /* hard labels to one-hot along the class axis */
      pd_tensor *li = K(pd_cast(lab, PD_INT64));
      pd_tensor *oh = K(pd_one_hot(K(pd_squeeze(li, 1, &ax64)), C));
      if (oh && ax != nd - 1) {
        int64_t perm[PD_MAX_DIMS];
        for (int d = 0, k = 0; d < nd; d++) perm[d] = d == ax ? nd - 1 : k++;
        oh = K(pd_transpose(oh, nd, perm));
      }
      lab = oh;
    }
    if (lab && lab->dtype != input->dtype && pd_dtype_is_floating(lab->dtype))
      lab = K(pd_cast(lab, input->dtype));
    lab = K(pd_scale(lab, 1.0 - label_smoothing, label_smoothing / (double)C, true));
    soft = true;
    squeeze_out = false;
  }
  if (soft && lab && lab->dtype != input->dtype) {
    if (!pd_dtype_is_floating(lab->dtype)) {
      pd_set_error(PD_ERR_DTYPE, "%s: soft labels must have a floating dtype, got %s", op,
                   pd_dtype_name(lab->dtype));
      lab = NULL;
    } else {
      lab = K(pd_cast(lab, input->dtype));
    }
  }
  pd_tensor *out = lab ? K(ce_op(input, lab, soft, use_softmax, ignore_index, ax)) : NULL;
  pd_tensor *wg = NULL, *li = NULL;
  if (out && !soft && (weight || (reduction == PD_REDUCTION_MEAN && ignore_index >= 0)))
    li = lab->dtype == PD_INT64 ? lab : K(pd_cast(lab, PD_INT64));
  if (out && weight) {
    if (soft) { /* per-sample weight sum_c label_c weight_c */
      int64_t ws[PD_MAX_DIMS];
      for (int d = 0; d < nd; d++) ws[d] = d == ax ? C : 1;
      wg = K(pd_sum(K(pd_multiply(lab, K(pd_reshape(weight, nd, ws)))), &ax64, 1, true));
    } else { /* weight[label], 0 for ignored samples */
      pd_tensor *vb = K(pd_not_equal(li, K(pd_full(0, NULL, (double)ignore_index, PD_INT64))));
      pd_tensor *vl = K(pd_where(vb, li, K(pd_full(0, NULL, 0.0, PD_INT64))));
      int64_t flat = lab->numel;
      pd_tensor *gw = K(pd_gather(weight, K(pd_reshape(vl, 1, &flat)), 0));
      wg = K(pd_multiply(K(pd_reshape(gw, lab->ndim, lab->shape)), K(pd_cast(vb, weight->dtype))));
    }
    if (wg && out->dtype != wg->dtype) out = K(pd_cast(out, wg->dtype));
    out = K(pd_multiply(out, wg));
  }
  pd_tensor *res = NULL;
  if (out) {
    if (reduction == PD_REDUCTION_SUM) {
      res = pd_sum(out, NULL, 0, false);
    } else if (reduction == PD_REDUCTION_MEAN) {
      if (ignore_index >= 0) {
        pd_tensor *osum = K(pd_sum(out, NULL, 0, false));
        pd_tensor *cmp = soft ? lab : li;
        pd_tensor *mask =
            K(pd_not_equal(cmp, K(pd_full(0, NULL, (double)ignore_index, cmp ? cmp->dtype : PD_INT64))));
        pd_tensor *den =
            weight
                ? K(pd_sum(K(pd_multiply(K(pd_cast(mask, wg ? wg->dtype : PD_FLOAT32)), wg)), NULL, 0, false))
                : K(pd_sum(K(pd_cast(mask, osum ? osum->dtype : PD_FLOAT32)), NULL, 0, false));
        res = safe_div(osum, den);
      } else if (weight) {
        res = safe_div(K(pd_sum(out, NULL, 0, false)), K(pd_sum(wg, NULL, 0, false)));
      } else {
        res = pd_loss_reduce(out, PD_REDUCTION_MEAN);
      }
    } else {
      res = squeeze_out ? pd_squeeze(out, 1, &ax64) : pd_tensor_retain(out);
    }
  }
  pd_tmps_free(&T);
  pd_internal_leave();
  return pd_scope_track(res);
}

pd_tensor *pd_softmax_with_cross_entropy(pd_tensor *logits, pd_tensor *label, bool soft_label,
                                         int64_t ignore_index, int axis, pd_tensor **softmax) {
  static const char *op = "softmax_with_cross_entropy";
  if (softmax) *softmax = NULL;
  if (null_input(op, logits, label) != PD_OK) return NULL;
  int nd = logits->ndim, ax;
  if (pd_loss_check_class_axis(op, "logits", logits, label, axis, &ax) != PD_OK) return NULL;
  pd_internal_enter();
  int64_t ax64 = ax;
  pd_tensor *lab = label->ndim == nd - 1 ? pd_unsqueeze(label, 1, &ax64) : pd_tensor_retain(label);
  pd_tensor *loss = lab ? ce_op(logits, lab, soft_label, true, ignore_index, ax) : NULL;
  pd_tensor *sm = loss && softmax ? pd_softmax(logits, ax) : NULL;
  if (softmax && !sm) {
    pd_tensor_release(loss);
    loss = NULL;
  }
  pd_tensor_release(lab);
  pd_internal_leave();
  if (softmax) *softmax = pd_scope_track(sm);
  return pd_scope_track(loss);
}
