/* nll_loss(x, label[, weight]) with its reduction (attrs i0 ignore_index,
 * i1 reduction), and its gradient op nll_loss_grad(label, g[, weight])
 * (attr v0 the shape of x). The loss is linear in x, so each op's backward
 * is the other: d x = nll_loss_grad(g) and d g = nll_loss(G). The weight
 * gets no gradient, as in Paddle.
 *
 * c_nll_loss and c_nll_loss_grad are the two with reduction mean where the
 * samples are split among ranks (a partitioned distributed Program's and a
 * DTensor's local step): the mean divides the sum of the picked losses by
 * the total weight of the labels not ignored, both over the whole batch,
 * so each rank's sums are summed over the process groups of attrs v1
 * (ring ids) of v2 (sizes), one per mesh axis that splits the samples.
 * Every rank's loss is then the whole batch's mean and its gradient that
 * mean's on its samples. A rank whose labels are invalid still takes part
 * in the sums (with a failure mark), and every rank fails. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../comm/comm_util.h"
#include "../elementwise/elementwise_util.h"
#include "loss_util.h"
#include "paddlec/distributed.h"
#include "paddlec/ops.h"

static pd_status check_weight(const pd_op_def *def, pd_tensor *w, int64_t C) {
  if (!pd_dtype_is_floating(w->dtype))
    return pd_set_error(PD_ERR_DTYPE, "%s: weight dtype %s is not supported (expected a floating dtype)",
                        def->name, pd_dtype_name(w->dtype));
  if (w->ndim != 1 || !pd_dims_agree(w->shape[0], C))
    return pd_set_error(PD_ERR_SHAPE, "%s: weight of shape %s does not match the %lld classes of input",
                        def->name, PD_SHAPE_STR(w), (long long)C);
  return PD_OK;
}

/* Checks x [N, C, d...] against label [N, d...]. */
static pd_status check_label(const pd_op_def *def, int xnd, const int64_t *xs, pd_tensor *label) {
  pd_dtype dt = label->dtype;
  if (!(dt == PD_INT64 || dt == PD_INT32 || dt == PD_INT16 || dt == PD_INT8 || dt == PD_UINT8))
    return pd_set_error(PD_ERR_DTYPE, "%s: label dtype %s is not supported (expected int64)", def->name,
                        pd_dtype_name(dt));
  bool ok = label->ndim == xnd - 1 && pd_dims_agree(label->shape[0], xs[0]);
  for (int d = 1; ok && d < label->ndim; d++) ok = pd_dims_agree(label->shape[d], xs[d + 1]);
  if (!ok) {
    int64_t want[PD_MAX_DIMS];
    int k = 0;
    for (int d = 0; d < xnd; d++)
      if (d != 1) want[k++] = xs[d];
    char a[160], b[160];
    return pd_set_error(PD_ERR_SHAPE, "%s: label of shape %s does not match input of shape %s (expected %s)",
                        def->name, PD_SHAPE_STR(label), pd_shape_str(xnd, xs, a, sizeof a),
                        pd_shape_str(k, want, b, sizeof b));
  }
  return PD_OK;
}

static pd_status nll_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                          pd_meta *out, int *n_out) {
  if (n_in != 2 && n_in != 3)
    return pd_set_error(PD_ERR_INVALID, "%s: expects 2 or 3 inputs (input, label[, weight]), got %d",
                        def->name, n_in);
  pd_tensor *x = in[0];
  if (x->ndim < 2)
    return pd_set_error(PD_ERR_SHAPE, "%s: input of shape %s must have 2 or more dimensions (got %d)",
                        def->name, PD_SHAPE_STR(x), x->ndim);
  if (!pd_dtype_is_floating(x->dtype))
    return pd_set_error(PD_ERR_DTYPE, "%s: input dtype %s is not supported (expected a floating dtype)",
                        def->name, pd_dtype_name(x->dtype));
  pd_status st = pd_loss_check_reduction(def->name, a->i[1], false);
  if (st == PD_OK) st = check_label(def, x->ndim, x->shape, in[1]);
  if (st == PD_OK && n_in == 3) st = check_weight(def, in[2], x->shape[1]);
  if (st != PD_OK) return st;
  pd_meta_of(in[1], out);
  out->dtype = x->dtype;
  if (a->i[1] != PD_REDUCTION_NONE) out->ndim = 0;
  *n_out = 1;
  return PD_OK;
}

/* The weights as doubles (malloc'ed; NULL without a weight). */
static pd_status weights_f64(pd_tensor *w, double **out) {
  *out = NULL;
  if (!w) return PD_OK;
  pd_tensor *c = w->is_contiguous ? pd_tensor_retain(w) : pd_contiguous(w);
  if (!c) return pd_last_status();
  double *d = malloc(sizeof(double) * (size_t)(c->numel ? c->numel : 1));
  if (!d) {
    pd_tensor_release(c);
    return pd_set_error(PD_ERR_MEMORY, "nll_loss: out of memory");
  }
  size_t es = pd_dtype_size_fast(c->dtype);
  for (int64_t i = 0; i < c->numel; i++)
    d[i] = pd_load_as_f64((const char *)pd_data_ptr(c) + (size_t)i * es, c->dtype);
  pd_tensor_release(c);
  *out = d;
  return PD_OK;
}

/* c_nll_loss(_grad): v[0..n-1] (n <= 2) summed over the op's groups, with
 * `local` (this rank's status so far) travelling as a failure mark. */
static pd_status sum_over_groups(const pd_kernel_ctx *ctx, double *v, int n, pd_status local) {
  char why[512] = ""; /* this rank's error, which the collectives may clear */
  if (local != PD_OK) snprintf(why, sizeof why, "%s", pd_last_error());
  double buf[3];
  for (int k = 0; k < n; k++) buf[k] = local == PD_OK ? v[k] : 0;
  buf[n] = local == PD_OK ? 0 : 1;
  pd_status st = PD_OK;
  for (int k = 0; k < ctx->attrs->nv[1] && st == PD_OK; k++)
    st = pd_comm_allreduce_f64(ctx->def, ctx->attrs->v[1][k], ctx->attrs->v[2][k], PD_REDUCE_SUM, buf, n + 1);
  if (local != PD_OK) return pd_set_error(local, "%s", why);
  if (st != PD_OK) return st;
  if (buf[n] > 0)
    return pd_set_error(PD_ERR_INDEX, "%s: the labels of another shard are invalid (its rank reports which)",
                        ctx->def->name);
  memcpy(v, buf, (size_t)n * sizeof *v);
  return PD_OK;
}

/* nll_loss, or c_nll_loss (across: the sums over the op's groups). */
static pd_status nll_run(const pd_kernel_ctx *ctx, bool across) {
  pd_tensor *x = ctx->in[0];
  pd_ce_geom g = pd_loss_class_geom(x->ndim, x->shape, 1);
  const int64_t *lab;
  pd_tensor *holder = NULL, *xc = NULL;
  double *w = NULL;
  pd_status st = pd_loss_labels_i64(ctx->def->name, ctx->in[1], g.n, ctx->attrs->i[0], &lab, &holder);
  if (st == PD_OK) st = weights_f64(ctx->n_in == 3 ? ctx->in[2] : NULL, &w);
  if (st == PD_OK) {
    xc = x->is_contiguous ? pd_tensor_retain(x) : pd_contiguous(x);
    if (!xc) st = pd_last_status();
  }
  bool none = ctx->attrs->i[1] == PD_REDUCTION_NONE;
  double sums[2] = {0, 0}; /* the picked losses', the weights' */
  if (st == PD_OK) {
    void *o = none ? pd_data_ptr(ctx->out[0]) : NULL;
    if (x->dtype == PD_FLOAT32)
      pdk_nll_forward_f32(&g, pd_data_ptr(xc), lab, w, ctx->attrs->i[0], o, &sums[0], &sums[1]);
    else
      pdk_nll_forward_f64(&g, pd_data_ptr(xc), lab, w, ctx->attrs->i[0], o, &sums[0], &sums[1]);
  }
  if (across) st = sum_over_groups(ctx, sums, 2, st);
  if (st == PD_OK && !none) {
    double s = sums[0];
    if (ctx->attrs->i[1] == PD_REDUCTION_MEAN && sums[1] != 0) s /= sums[1];
    pd_store_from_f64(pd_data_ptr(ctx->out[0]), ctx->out[0]->dtype, s);
  }
  free(w);
  pd_tensor_release(xc);
  pd_tensor_release(holder);
  return st;
}

static pd_status nll_kernel(const pd_kernel_ctx *ctx) { return nll_run(ctx, false); }

static pd_tensor *nll_grad_op(pd_tensor *label, pd_tensor *g, pd_tensor *w, const pd_attrs *a0,
                              const pd_meta *xm) {
  pd_attrs a = *a0;
  a.nv[0] = xm->ndim;
  memcpy(a.v[0], xm->shape, sizeof(int64_t) * (size_t)xm->ndim);
  pd_tensor *in[3] = {label, g, w};
  return pd_dispatch1(PD_OP_nll_loss_grad, in, w ? 3 : 2, &a);
}

static pd_status nll_backward(const pd_backward_ctx *c) {
  if (!c->needs_grad[0]) return PD_OK;
  pd_tensor *w = c->n_in == 3 ? c->inputs[2] : NULL;
  return pd_ew_set_grad(c, 0, nll_grad_op(c->inputs[1], c->grad_out[0], w, c->attrs, &c->in_meta[0]));
}

PD_OPDEF(nll_loss, .n_in = -1, .n_out = 1, .flags = PD_OPF_DIFF | PD_OPF_HALF_VIA_F32 | PD_OPF_SAVE_IN,
         .attr_names = "i0:ignore_index,i1:reduction", .infer_meta = nll_meta,
         .kernel = {[PD_PLACE_CPU] = nll_kernel}, .backward = nll_backward, .flops = pd_loss_flops);

/* ---- nll_loss_grad(label, g[, weight]) -> d x ------------------------------ */

static pd_status nllg_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                           pd_meta *out, int *n_out) {
  if (n_in != 2 && n_in != 3)
    return pd_set_error(PD_ERR_INVALID, "%s: expects 2 or 3 inputs (label, grad[, weight]), got %d",
                        def->name, n_in);
  int xnd = a->nv[0];
  const int64_t *xs = a->v[0];
  if (xnd < 2)
    return pd_set_error(PD_ERR_SHAPE, "%s: input shape must have 2 or more dimensions (got %d)", def->name,
                        xnd);
  pd_status st = pd_loss_check_reduction(def->name, a->i[1], false);
  if (st == PD_OK) st = check_label(def, xnd, xs, in[0]);
  if (st == PD_OK && n_in == 3) st = check_weight(def, in[2], xs[1]);
  if (st != PD_OK) return st;
  pd_tensor *g = in[1];
  bool none = a->i[1] == PD_REDUCTION_NONE;
  if (!pd_dtype_is_floating(g->dtype) ||
      (none ? g->ndim != in[0]->ndim || !pd_shapes_agree(g->ndim, g->shape, in[0]->shape) : g->numel != 1))
    return pd_set_error(PD_ERR_SHAPE, "%s: loss gradient of shape %s and dtype %s does not match the loss",
                        def->name, PD_SHAPE_STR(g), pd_dtype_name(g->dtype));
  out->dtype = g->dtype;
  out->ndim = xnd;
  memcpy(out->shape, xs, sizeof(int64_t) * (size_t)xnd);
  *n_out = 1;
  return PD_OK;
}

/* nll_loss_grad, or c_nll_loss_grad (across: the total weight over the
 * op's groups). */
static pd_status nllg_run(const pd_kernel_ctx *ctx, bool across) {
  pd_ce_geom geom = pd_loss_class_geom(ctx->attrs->nv[0], ctx->attrs->v[0], 1);
  const int64_t *lab;
  pd_tensor *holder = NULL, *gc = NULL;
  double *w = NULL;
  pd_status st = pd_loss_labels_i64(ctx->def->name, ctx->in[0], geom.n, ctx->attrs->i[0], &lab, &holder);
  if (st == PD_OK) st = weights_f64(ctx->n_in == 3 ? ctx->in[2] : NULL, &w);
  if (st == PD_OK) {
    gc = ctx->in[1]->is_contiguous ? pd_tensor_retain(ctx->in[1]) : pd_contiguous(ctx->in[1]);
    if (!gc) st = pd_last_status();
  }
  double scale = 1.0;
  if (ctx->attrs->i[1] == PD_REDUCTION_MEAN) {
    double tw = 0;
    for (int64_t i = 0; st == PD_OK && i < holder->numel; i++)
      if (lab[i] != ctx->attrs->i[0]) tw += w ? w[lab[i]] : 1.0;
    if (across) st = sum_over_groups(ctx, &tw, 1, st);
    if (tw != 0) scale = 1.0 / tw;
  }
  if (st == PD_OK) {
    bool none = ctx->attrs->i[1] == PD_REDUCTION_NONE;
    if (ctx->out[0]->dtype == PD_FLOAT32)
      pdk_nll_backward_f32(&geom, lab, w, ctx->attrs->i[0], pd_data_ptr(gc), none, scale,
                           pd_data_ptr(ctx->out[0]));
    else
      pdk_nll_backward_f64(&geom, lab, w, ctx->attrs->i[0], pd_data_ptr(gc), none, scale,
                           pd_data_ptr(ctx->out[0]));
  }
  free(w);
  pd_tensor_release(gc);
  pd_tensor_release(holder);
  return st;
}

static pd_status nllg_kernel(const pd_kernel_ctx *ctx) { return nllg_run(ctx, false); }

static pd_status nllg_backward(const pd_backward_ctx *c) {
  if (!c->needs_grad[1]) return PD_OK;
  pd_attrs a = *c->attrs;
  a.nv[0] = 0;
  pd_tensor *in[3] = {c->grad_out[0], c->inputs[0], c->n_in == 3 ? c->inputs[2] : NULL};
  return pd_ew_set_grad(c, 1, pd_dispatch1(PD_OP_nll_loss, in, c->n_in == 3 ? 3 : 2, &a));
}

PD_OPDEF(nll_loss_grad, .n_in = -1, .n_out = 1, .flags = PD_OPF_DIFF | PD_OPF_HALF_VIA_F32 | PD_OPF_SAVE_IN,
         .attr_names = "i0:ignore_index,i1:reduction,v0:input_shape", .infer_meta = nllg_meta,
         .kernel = {[PD_PLACE_CPU] = nllg_kernel}, .backward = nllg_backward, .flops = pd_loss_flops);

/* ---- c_nll_loss, c_nll_loss_grad ------------------------------------------ */

static pd_status check_groups(const pd_op_def *def, const pd_attrs *a) {
  if (a->i[1] != PD_REDUCTION_MEAN)
    return pd_set_error(PD_ERR_INVALID, "%s: reduction %lld (only mean, 0, is split among ranks)", def->name,
                        (long long)a->i[1]);
  if (a->nv[1] != a->nv[2])
    return pd_set_error(PD_ERR_INVALID, "%s: %d ring_ids but %d nranks", def->name, a->nv[1], a->nv[2]);
  for (int k = 0; k < a->nv[2]; k++)
    if (a->v[2][k] < 1)
      return pd_set_error(PD_ERR_INVALID, "%s: nranks[%d] is %lld (at least 1)", def->name, k,
                          (long long)a->v[2][k]);
  return PD_OK;
}

static pd_status c_nll_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                            pd_meta *out, int *n_out) {
  pd_status st = check_groups(def, a);
  return st == PD_OK ? nll_meta(def, in, n_in, a, out, n_out) : st;
}
static pd_status c_nll_kernel(const pd_kernel_ctx *ctx) { return nll_run(ctx, true); }

PD_OPDEF(c_nll_loss, .n_in = -1, .n_out = 1, .flags = PD_OPF_HALF_VIA_F32,
         .attr_names = "i0:ignore_index,i1:reduction,v1:ring_ids,v2:nranks", .infer_meta = c_nll_meta,
         .kernel = {[PD_PLACE_CPU] = c_nll_kernel}, .flops = pd_loss_flops);

static pd_status c_nllg_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                             pd_meta *out, int *n_out) {
  pd_status st = check_groups(def, a);
  return st == PD_OK ? nllg_meta(def, in, n_in, a, out, n_out) : st;
}
static pd_status c_nllg_kernel(const pd_kernel_ctx *ctx) { return nllg_run(ctx, true); }

PD_OPDEF(c_nll_loss_grad, .n_in = -1, .n_out = 1, .flags = PD_OPF_HALF_VIA_F32,
         .attr_names = "i0:ignore_index,i1:reduction,v0:input_shape,v1:ring_ids,v2:nranks",
         .infer_meta = c_nllg_meta, .kernel = {[PD_PLACE_CPU] = c_nllg_kernel}, .flops = pd_loss_flops);

pd_tensor *pd_nll_loss(pd_tensor *input, pd_tensor *label, pd_tensor *weight, int64_t ignore_index,
                       pd_loss_reduction reduction) {
  pd_attrs a = {.i = {ignore_index, (int64_t)reduction}};
  pd_tensor *in[3] = {input, label, weight};
  return pd_dispatch1(PD_OP_nll_loss, in, weight ? 3 : 2, &a);
}
