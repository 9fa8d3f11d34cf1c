/* c_softmax_with_cross_entropy and its grad op: softmax cross entropy of
 * logits sharded along the class axis over a process group (Paddle's op of
 * that name, behind ParallelCrossEntropy). Each rank holds classes
 * [start_index, start_index + n) of num_classes; the row max, the sum of
 * exponentials, the target logit (hard labels) or the label sums (soft)
 * are allreduced over the group, so every rank's loss and lse are the
 * unsharded op's, and its dx is the unsharded dx's slice.
 *
 * Inputs and outputs as cross_entropy_with_softmax and its grad op:
 * (x, label) -> (loss, lse), (x, label, lse, dloss) -> dx; a hard label has
 * x's shape with the axis 1, a soft one x's (sharded) shape. Attrs: i0
 * soft_label, i1 ring_id, i2 ignore_index, i3 axis, i4 nranks, i5
 * start_index, v0 [num_classes]. Computed in float64. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../loss/loss_util.h"
#include "comm_util.h"
#include "paddlec/distributed.h"

/* The shard's geometry and operands as float64 (x, y: [outer, n, inner];
 * rows: [outer, inner]). */
typedef struct shard_ce {
  pd_ce_geom g;
  int64_t start, classes, rows;
  double *x, *y, *lse, *gl;
  const int64_t *lab;
  pd_tensor *lab_holder;
} shard_ce;

static pd_status check(const pd_op_def *def, pd_tensor *const *in, const pd_attrs *a, int *axis) {
  pd_tensor *x = in[0], *label = in[1];
  pd_status st = pd_loss_check_logits(def, x, a->i[3], axis);
  if (st != PD_OK) return st;
  int64_t n = x->shape[*axis], classes = a->nv[0] == 1 ? a->v[0][0] : -1;
  if (a->i[4] < 1 || classes < 1 || a->i[5] < 0 || a->i[5] > classes - n)
    return pd_set_error(
        PD_ERR_INVALID,
        "%s: nranks %lld, num_classes %lld: a shard of %lld classes from start_index %lld does "
        "not fit",
        def->name, (long long)a->i[4], (long long)classes, (long long)n, (long long)a->i[5]);
  bool soft = a->i[0] != 0;
  bool ok = label->ndim == x->ndim && (!soft || label->dtype == x->dtype) && label->dtype != PD_BOOL;
  for (int d = 0; ok && d < x->ndim; d++) ok = label->shape[d] == (d == *axis && !soft ? 1 : x->shape[d]);
  if (!ok)
    return pd_set_error(PD_ERR_SHAPE,
                        "%s: %s label of shape %s and dtype %s does not match input of shape %s (%s)",
                        def->name, soft ? "soft" : "hard", PD_SHAPE_STR(label), pd_dtype_name(label->dtype),
                        PD_SHAPE_STR(x), pd_dtype_name(x->dtype));
  return PD_OK;
}

static pd_status rows_meta(const pd_op_def *def, pd_tensor *const *in, const pd_attrs *a, pd_meta *m) {
  int axis;
  pd_status st = check(def, in, a, &axis);
  if (st != PD_OK) return st;
  pd_meta_of(in[0], m);
  m->shape[axis] = 1;
  return PD_OK;
}

static void shard_ce_free(shard_ce *s) {
  free(s->x);
  free(s->y);
  free(s->lse);
  free(s->gl);
  pd_tensor_release(s->lab_holder);
}

/* t's elements as a new float64 array (NULL with the error set). */
static double *f64(const pd_tensor *t) {
  double *p = malloc((size_t)(t->numel > 0 ? t->numel : 1) * sizeof *p);
  if (!p) {
    pd_set_error(PD_ERR_MEMORY, "c_softmax_with_cross_entropy: out of memory");
    return NULL;
  }
  if (pd_tensor_copy_to(t, p, t->numel, PD_FLOAT64) < 0) {
    free(p);
    return NULL;
  }
  return p;
}

static pd_status shard_ce_get(const pd_kernel_ctx *ctx, shard_ce *s) {
  memset(s, 0, sizeof *s);
  int axis;
  pd_status st = check(ctx->def, ctx->in, ctx->attrs, &axis);
  if (st != PD_OK) return st;
  const pd_tensor *x = ctx->in[0];
  s->g = pd_loss_class_geom(x->ndim, x->shape, axis);
  s->rows = s->g.outer * s->g.inner;
  s->start = ctx->attrs->i[5];
  s->classes = ctx->attrs->v[0][0];
  if (!(s->x = f64(x))) return pd_last_status();
  if (ctx->attrs->i[0]) return (s->y = f64(ctx->in[1])) ? PD_OK : pd_last_status();
  return pd_loss_labels_i64(ctx->def->name, ctx->in[1], s->classes, ctx->attrs->i[2], &s->lab,
                            &s->lab_holder);
}

static pd_status allreduce(const pd_kernel_ctx *ctx, pd_reduce_op op, double *buf, int64_t n) {
  return pd_comm_allreduce_f64(ctx->def, ctx->attrs->i[1], ctx->attrs->i[4], op, buf, n);
}

static void store(pd_tensor *t, const double *v) {
  char *p = pd_tensor_data(t);
  size_t es = pd_dtype_size(t->dtype);
  for (int64_t i = 0; i < t->numel; i++) pd_store_from_f64(p + (size_t)i * es, t->dtype, v[i]);
}

#define AT(p, o, j, k) (p)[((o)*s.g.n + (j)) * s.g.inner + (k)]

/* ---- forward -------------------------------------------------------------- */

/* loss = lse - x[label] (hard) or sum(y) lse - sum(y x) (soft), with
 * lse = M + log(sum exp(x - M)) and M the row max, the max and each sum
 * allreduced over the class shards. */
static pd_status forward_kernel(const pd_kernel_ctx *ctx) {
  shard_ce s;
  pd_status st = shard_ce_get(ctx, &s);
  /* per row: the max, the sum of exponentials, the target (shifted logit
   * or sum(y (x - M))), the sum of y */
  double *buf = st == PD_OK ? malloc((size_t)(4 * s.rows + 1) * sizeof *buf) : NULL;
  if (st == PD_OK && !buf) st = pd_set_error(PD_ERR_MEMORY, "%s: out of memory", ctx->def->name);
  if (st != PD_OK) {
    shard_ce_free(&s);
    return st;
  }
  double *m = buf, *se = buf + s.rows, *t = buf + 2 * s.rows, *w = buf + 3 * s.rows;
  int64_t ig = ctx->attrs->i[2];
  for (int64_t r = 0; r < s.rows; r++) m[r] = -INFINITY;
  memset(se, 0, (size_t)(3 * s.rows) * sizeof *buf);
  for (int64_t o = 0; o < s.g.outer; o++)
    for (int64_t j = 0; j < s.g.n; j++)
      for (int64_t k = 0; k < s.g.inner; k++)
        m[o * s.g.inner + k] = fmax(m[o * s.g.inner + k], AT(s.x, o, j, k));
  st = allreduce(ctx, PD_REDUCE_MAX, m, s.rows);
  for (int64_t o = 0; st == PD_OK && o < s.g.outer; o++)
    for (int64_t k = 0; k < s.g.inner; k++) {
      int64_t r = o * s.g.inner + k;
      for (int64_t j = 0; j < s.g.n; j++) {
        double d = AT(s.x, o, j, k) - m[r];
        se[r] += exp(d);
        if (s.y) {
          w[r] += AT(s.y, o, j, k);
          t[r] += AT(s.y, o, j, k) * d;
        }
      }
      if (s.lab && s.lab[r] >= s.start && s.lab[r] < s.start + s.g.n)
        t[r] = AT(s.x, o, s.lab[r] - s.start, k) - m[r];
    }
  /* se, t and w are summed in one allreduce */
  if (st == PD_OK) st = allreduce(ctx, PD_REDUCE_SUM, se, 3 * s.rows);
  if (st == PD_OK) {
    for (int64_t r = 0; r < s.rows; r++) {
      double ls = log(se[r]);
      if (s.lab)
        t[r] = s.lab[r] == ig ? 0 : ls - t[r];
      else
        t[r] = w[r] * ls - t[r];
      m[r] += ls;
    }
    store(ctx->out[0], t);
    store(ctx->out[1], m);
  }
  free(buf);
  shard_ce_free(&s);
  return st;
}

static pd_status forward_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                              pd_meta *out, int *n_out) {
  (void)n_in;
  pd_status st = rows_meta(def, in, a, &out[0]);
  if (st != PD_OK) return st;
  out[1] = out[0];
  *n_out = 2;
  return PD_OK;
}

/* Not differentiable: a partitioned Program holds its backward as the grad
 * op already. */
PD_OPDEF(
    c_softmax_with_cross_entropy, .n_in = 2, .n_out = 2, .flags = PD_OPF_HALF_VIA_F32,
    .attr_names = "i0:soft_label,i1:ring_id,i2:ignore_index,i3:axis,i4:nranks,i5:start_index,v0:num_classes",
    .infer_meta = forward_meta, .kernel = {[PD_PLACE_CPU] = forward_kernel});

/* ---- backward ------------------------------------------------------------- */

/* dx = g (exp(x - lse) sum(y) - y), y the one-hot of the label where this
 * shard holds its class (hard) or the label's shard (soft, sum(y)
 * allreduced). */
static pd_status backward_kernel(const pd_kernel_ctx *ctx) {
  shard_ce s;
  pd_status st = shard_ce_get(ctx, &s);
  if (st == PD_OK && (!(s.lse = f64(ctx->in[2])) || !(s.gl = f64(ctx->in[3])))) st = pd_last_status();
  double *w = st == PD_OK ? calloc((size_t)s.rows + 1, sizeof *w) : NULL;
  double *dx = st == PD_OK ? malloc((size_t)(s.rows * s.g.n + 1) * sizeof *dx) : NULL;
  if (st == PD_OK && (!w || !dx)) st = pd_set_error(PD_ERR_MEMORY, "%s: out of memory", ctx->def->name);
  bool soft = s.y != NULL;
  int64_t ig = ctx->attrs->i[2];
  if (st == PD_OK && soft) {
    for (int64_t o = 0; o < s.g.outer; o++)
      for (int64_t j = 0; j < s.g.n; j++)
        for (int64_t k = 0; k < s.g.inner; k++) w[o * s.g.inner + k] += AT(s.y, o, j, k);
    st = allreduce(ctx, PD_REDUCE_SUM, w, s.rows);
  }
  for (int64_t o = 0; st == PD_OK && o < s.g.outer; o++)
    for (int64_t k = 0; k < s.g.inner; k++) {
      int64_t r = o * s.g.inner + k;
      double cf = soft ? s.gl[r] * w[r] : (s.lab[r] == ig ? 0 : s.gl[r]);
      for (int64_t j = 0; j < s.g.n; j++) {
        double v = cf * exp(AT(s.x, o, j, k) - s.lse[r]);
        if (soft) v -= s.gl[r] * AT(s.y, o, j, k);
        AT(dx, o, j, k) = v;
      }
      if (!soft && s.lab[r] != ig && s.lab[r] >= s.start && s.lab[r] < s.start + s.g.n)
        AT(dx, o, s.lab[r] - s.start, k) -= cf;
    }
  if (st == PD_OK) store(ctx->out[0], dx);
  free(w);
  free(dx);
  shard_ce_free(&s);
  return st;
}
#undef AT

static pd_status backward_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                               pd_meta *out, int *n_out) {
  (void)n_in;
  pd_meta rm;
  pd_status st = rows_meta(def, in, a, &rm);
  if (st != PD_OK) return st;
  for (int k = 2; k < 4; k++)
    if (in[k]->dtype != in[0]->dtype || in[k]->ndim != rm.ndim ||
        !pd_shapes_agree(rm.ndim, in[k]->shape, rm.shape))
      return pd_set_error(PD_ERR_SHAPE,
                          "%s: %s of shape %s and dtype %s does not match the loss's rows of x %s", def->name,
                          k == 2 ? "lse" : "loss gradient", PD_SHAPE_STR(in[k]), pd_dtype_name(in[k]->dtype),
                          PD_SHAPE_STR(in[0]));
  pd_meta_of(in[0], out);
  *n_out = 1;
  return PD_OK;
}

PD_OPDEF(
    c_softmax_with_cross_entropy_grad, .n_in = 4, .n_out = 1, .flags = PD_OPF_HALF_VIA_F32,
    .attr_names = "i0:soft_label,i1:ring_id,i2:ignore_index,i3:axis,i4:nranks,i5:start_index,v0:num_classes",
    .infer_meta = backward_meta, .kernel = {[PD_PLACE_CPU] = backward_kernel});
