/* The local steps of SPMD rules whose ops, on a rank's shards, compute
 * something else than the plain op: a vocab-sharded embedding and its
 * grad (the shard's rows, zeros elsewhere), the class-sharded softmax cross
 * entropy and its grad (row statistics allreduced over the class shards,
 * as Paddle's ParallelCrossEntropy). They run with the DTensor hook off: the ops they call act
 * on the local data. */
#include <math.h>
#include <stdlib.h>

#include "../../core/core_internal.h"
#include "ap_internal.h"
#include "paddlec/creation.h"
#include "paddlec/distributed.h"
#include "paddlec/math.h"
#include "paddlec/ops.h"

int64_t pd_ap_local_start(const pd_spmd_local *c, int axis, int64_t global) {
  if (axis < 0) return 0;
  int64_t s, l;
  pd_ap_shard_range(global, c->mesh->shape[axis], c->coords[axis], &s, &l);
  return s;
}

pd_status pd_ap_record_node(const pd_spmd_local *c, pd_tensor **out, int n_out) {
  const pd_op_def *def = pd_op_table[c->id];
  pd_autograd_record_fn rec = pd_dispatch_get_autograd();
  if (!rec || !pd_grad_mode_enabled() || !(def->flags & PD_OPF_DIFF)) return PD_OK;
  bool needs = false;
  for (int i = 0; i < c->n_in; i++) needs |= !c->in[i]->stop_gradient;
  return needs ? rec(c->id, c->in, c->n_in, c->attrs, out, n_out) : PD_OK;
}

pd_status pd_ap_local_computed(const pd_spmd_local *c, pd_status (*fn)(const pd_spmd_local *, pd_tensor **),
                               pd_tensor **out, int *n_out) {
  bool prev = pd_grad_mode_set(false);
  pd_status st = fn(c, out);
  pd_grad_mode_set(prev);
  if (st != PD_OK) return st;
  st = pd_ap_record_node(c, out, c->n_out);
  if (st != PD_OK) {
    for (int k = 0; k < c->n_out; k++) pd_tensor_release(out[k]);
    return st;
  }
  *n_out = c->n_out;
  return PD_OK;
}

/* ---- embedding ---------------------------------------------------------- */

/* The op with its vocab-shard attrs: the shard's first row and the whole
 * table's rows (embedding i2, i3; embedding_grad i3, i4 and i0 the shard's
 * rows). It records its own grad node. */
pd_status pd_ap_local_embedding(const pd_spmd_local *c, pd_tensor **out, int *n_out) {
  bool grad = c->id == PD_OP_embedding_grad;
  int wi = grad ? 2 : 1;
  int64_t rows = c->in_meta[wi].shape[0];
  int64_t start = pd_ap_local_start(c, c->in_dist[wi].dims_mapping[0], rows);
  pd_attrs a = *c->attrs;
  if (grad) {
    a.i[0] = c->in[2]->shape[0];
    a.i[3] = start;
    a.i[4] = rows;
  } else {
    a.i[2] = start;
    a.i[3] = rows;
  }
  return pd_dispatch(c->id, c->in, c->n_in, &a, out, n_out);
}

/* ---- softmax cross entropy over class shards ---------------------------- */

/* A tensor's local data as contiguous float64 (new reference). */
static pd_tensor *f64(pd_tensor *t) {
  pd_tensor *d = pd_cast(t, PD_FLOAT64);
  pd_tensor *r = d ? pd_contiguous(d) : NULL;
  pd_tensor_release(d);
  return r;
}

/* The sample geometry along the class axis of x's local data. */
typedef struct ce_geom {
  int64_t outer, n, inner, start, classes;
  int axis;
  pd_dist_group *group; /* the class shards' group */
} ce_geom;

static pd_status ce_geom_of(const pd_spmd_local *c, ce_geom *g) {
  const pd_tensor *x = c->in[0];
  int nd = x->ndim;
  g->axis = (int)(c->attrs->i[3] < 0 ? c->attrs->i[3] + nd : c->attrs->i[3]);
  g->outer = g->inner = 1;
  for (int d = 0; d < g->axis; d++) g->outer *= x->shape[d];
  for (int d = g->axis + 1; d < nd; d++) g->inner *= x->shape[d];
  g->n = x->shape[g->axis];
  int m = c->in_dist[0].dims_mapping[g->axis];
  g->classes = c->in_meta[0].shape[g->axis];
  g->start = pd_ap_local_start(c, m, g->classes);
  g->group = pd_ap_axis_group(c->mesh, m);
  return g->group ? PD_OK : pd_last_status();
}

static pd_status allreduce(pd_tensor *t, pd_reduce_op op, pd_dist_group *g) {
  pd_dist_opts o = {.group = g};
  return pd_dist_all_reduce(t, op, &o);
}

/* A float64 tensor shaped like the loss (x's local shape, the axis 1). */
static pd_tensor *rows_tensor(const pd_tensor *x, int axis, double v) {
  int64_t shape[PD_MAX_DIMS];
  memcpy(shape, x->shape, sizeof(int64_t) * (size_t)x->ndim);
  shape[axis] = 1;
  return pd_full(x->ndim, shape, v, PD_FLOAT64);
}

/* The hard labels as int64 (new reference), checked against the classes. */
static pd_tensor *labels(const pd_spmd_local *c, const ce_geom *g) {
  pd_tensor *l = pd_cast(c->in[1], PD_INT64), *lc = l ? pd_contiguous(l) : NULL;
  pd_tensor_release(l);
  if (!lc) return NULL;
  const int64_t *lp = pd_tensor_data(lc), ig = c->attrs->i[2];
  for (int64_t r = 0; r < lc->numel; r++)
    if (lp[r] != ig && (lp[r] < 0 || lp[r] >= g->classes)) {
      pd_set_error(PD_ERR_INDEX, "%s: label %lld is out of range [0, %lld) (ignore_index %lld)",
                   pd_op_table[c->id]->name, (long long)lp[r], (long long)g->classes, (long long)ig);
      pd_tensor_release(lc);
      return NULL;
    }
  return lc;
}

#define AT(p, o, j, k) (p)[((o)*g.n + (j)) * g.inner + (k)]

/* loss = lse - x[label] (hard) or sum(y) lse - sum(y x) (soft), with
 * lse = M + log(sum exp(x - M)) and M the row max, each sum and the max
 * allreduced over the class shards; the outputs are the dense op's. */
static pd_status ce_forward(const pd_spmd_local *c, pd_tensor **out) {
  ce_geom g;
  pd_status st = ce_geom_of(c, &g);
  if (st != PD_OK) return st;
  bool soft = c->attrs->i[0] != 0;
  pd_tensor *x = f64(c->in[0]), *y = soft ? f64(c->in[1]) : NULL, *lab = soft ? NULL : labels(c, &g);
  pd_tensor *mx = rows_tensor(c->in[0], g.axis, -INFINITY), *se = rows_tensor(c->in[0], g.axis, 0);
  pd_tensor *tl = rows_tensor(c->in[0], g.axis, 0), *sy = rows_tensor(c->in[0], g.axis, 0);
  pd_tensor *loss = NULL, *lse = NULL;
  if (!x || (soft ? !y : !lab) || !mx || !se || !tl || !sy) goto done;
  const double *xp = pd_tensor_data(x), *yp = y ? pd_tensor_data(y) : NULL;
  const int64_t *lp = lab ? pd_tensor_data(lab) : NULL;
  double *m = pd_tensor_data(mx), *s = pd_tensor_data(se), *t = pd_tensor_data(tl), *w = pd_tensor_data(sy);
  for (int64_t o = 0; o < g.outer; o++)
    for (int64_t j = 0; j < g.n; j++)
      for (int64_t k = 0; k < g.inner; k++) {
        double v = AT(xp, o, j, k);
        if (v > m[o * g.inner + k]) m[o * g.inner + k] = v;
      }
  if ((st = allreduce(mx, PD_REDUCE_MAX, g.group)) != PD_OK) goto done;
  for (int64_t o = 0; o < g.outer; o++)
    for (int64_t k = 0; k < g.inner; k++) {
      int64_t r = o * g.inner + k;
      for (int64_t j = 0; j < g.n; j++) {
        double d = AT(xp, o, j, k) - m[r];
        s[r] += exp(d);
        if (yp) {
          w[r] += AT(yp, o, j, k);
          t[r] += AT(yp, o, j, k) * d;
        }
      }
      if (lp && lp[r] >= g.start && lp[r] < g.start + g.n) t[r] = AT(xp, o, lp[r] - g.start, k) - m[r];
    }
  if ((st = allreduce(se, PD_REDUCE_SUM, g.group)) != PD_OK || (st = allreduce(tl, PD_REDUCE_SUM, g.group)) ||
      (soft && (st = allreduce(sy, PD_REDUCE_SUM, g.group)) != PD_OK))
    goto done;
  /* se becomes log(sum), tl the loss, mx the lse */
  for (int64_t r = 0; r < se->numel; r++) {
    double ls = log(s[r]);
    if (lp)
      t[r] = lp[r] == c->attrs->i[2] ? 0 : ls - t[r];
    else
      t[r] = w[r] * ls - t[r];
    m[r] += ls;
  }
  pd_dtype dt = c->in[0]->dtype;
  loss = pd_cast(tl, dt);
  lse = loss ? pd_cast(mx, dt) : NULL;
done:
  pd_tensor_release(x);
  pd_tensor_release(y);
  pd_tensor_release(lab);
  pd_tensor_release(mx);
  pd_tensor_release(se);
  pd_tensor_release(tl);
  pd_tensor_release(sy);
  if (!loss || !lse) {
    pd_tensor_release(loss);
    pd_tensor_release(lse);
    return st != PD_OK ? st : pd_last_status();
  }
  out[0] = loss;
  out[1] = lse;
  return PD_OK;
}

/* dx = g (exp(x - lse) sum(y) - y), y the one-hot of the label where this
 * shard holds its class (hard) or the label's shard (soft, sum(y)
 * allreduced). */
static pd_status ce_backward(const pd_spmd_local *c, pd_tensor **out) {
  ce_geom g;
  pd_status st = ce_geom_of(c, &g);
  if (st != PD_OK) return st;
  bool soft = c->attrs->i[0] != 0;
  int64_t ig = c->attrs->i[2];
  pd_tensor *x = f64(c->in[0]), *y = soft ? f64(c->in[1]) : NULL, *lab = soft ? NULL : labels(c, &g);
  pd_tensor *lse = f64(c->in[2]), *gl = f64(c->in[3]), *sy = rows_tensor(c->in[0], g.axis, 0);
  pd_tensor *dx = x ? pd_zeros(x->ndim, x->shape, PD_FLOAT64) : NULL, *res = NULL;
  if (!x || (soft ? !y : !lab) || !lse || !gl || !sy || !dx) goto done;
  const double *xp = pd_tensor_data(x), *yp = y ? pd_tensor_data(y) : NULL, *lp = pd_tensor_data(lse);
  const double *gp = pd_tensor_data(gl);
  const int64_t *li = lab ? pd_tensor_data(lab) : NULL;
  double *w = pd_tensor_data(sy), *dp = pd_tensor_data(dx);
  if (soft) {
    for (int64_t o = 0; o < g.outer; o++)
      for (int64_t j = 0; j < g.n; j++)
        for (int64_t k = 0; k < g.inner; k++) w[o * g.inner + k] += AT(yp, o, j, k);
    if ((st = allreduce(sy, PD_REDUCE_SUM, g.group)) != PD_OK) goto done;
  }
  for (int64_t o = 0; o < g.outer; o++)
    for (int64_t k = 0; k < g.inner; k++) {
      int64_t r = o * g.inner + k;
      double cf = soft ? gp[r] * w[r] : (li[r] == ig ? 0 : gp[r]);
      for (int64_t j = 0; j < g.n; j++) {
        double v = cf * exp(AT(xp, o, j, k) - lp[r]);
        if (soft) v -= gp[r] * AT(yp, o, j, k);
        AT(dp, o, j, k) = v;
      }
      if (!soft && li[r] != ig && li[r] >= g.start && li[r] < g.start + g.n)
        AT(dp, o, li[r] - g.start, k) -= cf;
    }
  res = pd_cast(dx, c->in[0]->dtype);
done:
  pd_tensor_release(x);
  pd_tensor_release(y);
  pd_tensor_release(lab);
  pd_tensor_release(lse);
  pd_tensor_release(gl);
  pd_tensor_release(sy);
  pd_tensor_release(dx);
  if (!res) return st != PD_OK ? st : pd_last_status();
  out[0] = res;
  return PD_OK;
}
#undef AT

pd_status pd_ap_local_cross_entropy(const pd_spmd_local *c, pd_tensor **out, int *n_out) {
  return pd_ap_local_computed(c, ce_forward, out, n_out);
}
pd_status pd_ap_local_cross_entropy_grad(const pd_spmd_local *c, pd_tensor **out, int *n_out) {
  return pd_ap_local_computed(c, ce_backward, out, n_out);
}
