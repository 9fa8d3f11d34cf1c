/* The local steps of nll_loss and nll_loss_grad with reduction mean over
 * sharded samples: the mean divides the sum of the picked losses by the
 * total weight of the labels that are not ignored, both sums over the
 * whole batch. Each shard's are Partial(sum) over the mesh axes that shard
 * the labels: the forward all-reduces its sum and the total weight there
 * and divides; the gradient is the sum reduction's with the incoming
 * gradient divided by the all-reduced total weight. */
#include "ap_internal.h"
#include "paddlec/creation.h"
#include "paddlec/distributed.h"
#include "paddlec/loss.h"
#include "paddlec/manipulation.h"
#include "paddlec/math.h"

/* Sums v[0..n-1] over each mesh axis that shards input i
 * (pd_ap_sum_over_shards). `local` is this rank's status so far: it
 * travels with the sums (a rank whose labels failed still takes part), and
 * every rank fails when one did. */
static pd_status sum_over_shards(const pd_spmd_local *c, int i, double *v, int n, pd_status local) {
  double buf[4] = {0};
  for (int k = 0; k < n; k++) buf[k] = local == PD_OK ? v[k] : 0;
  buf[n] = local == PD_OK ? 0 : 1;
  pd_status st = pd_ap_sum_over_shards(c, i, buf, n + 1);
  for (int k = 0; k < n && st == PD_OK; k++) v[k] = buf[k];
  bool other_failed = st == PD_OK && buf[n] > 0;
  if (local != PD_OK) return local;
  if (other_failed)
    return pd_set_error(PD_ERR_INDEX, "%s: the labels of another shard are invalid (its rank reports which)",
                        pd_op_table[c->id]->name);
  return st;
}

/* The local total weight of the labels (input li) that are not
 * ignore_index: their weights (input wi, or 1 each without one). The op
 * has checked the labels against the classes. */
static pd_status local_total_weight(const pd_spmd_local *c, int li, int wi, double *tw) {
  pd_tensor *l = pd_cast(c->in[li], PD_INT64), *lc = l ? pd_contiguous(l) : NULL;
  pd_tensor *w = wi < c->n_in ? pd_cast(c->in[wi], PD_FLOAT64) : NULL, *wc = w ? pd_contiguous(w) : NULL;
  pd_tensor_release(l);
  pd_tensor_release(w);
  pd_status st = !lc || (wi < c->n_in && !wc) ? pd_last_status() : PD_OK;
  *tw = 0;
  if (st == PD_OK) {
    const int64_t *lp = pd_tensor_data(lc), ig = c->attrs->i[0];
    const double *wp = wc ? pd_tensor_data(wc) : NULL;
    for (int64_t r = 0; r < lc->numel; r++) {
      if (lp[r] == ig) continue;
      if (wp && (lp[r] < 0 || lp[r] >= wc->numel)) {
        st = pd_set_error(PD_ERR_INDEX, "%s: label %lld is out of range [0, %lld)", pd_op_table[c->id]->name,
                          (long long)lp[r], (long long)wc->numel);
        break;
      }
      *tw += wp ? wp[lp[r]] : 1.0;
    }
  }
  pd_tensor_release(lc);
  pd_tensor_release(wc);
  return st;
}

/* A float64 scalar tensor of v. */
static pd_tensor *scalar(double v) { return pd_tensor_from_f64(&v, PD_FLOAT64, 0, NULL); }

/* nll_loss(x, label[, weight]), mean: sum(picked) / tw over the batch
 * (the dense op keeps the sum where tw is 0). */
static pd_status nll_mean(const pd_spmd_local *c, pd_tensor **out) {
  pd_attrs a = *c->attrs;
  a.i[1] = PD_REDUCTION_SUM;
  double v[2] = {0, 0};
  pd_tensor *s = pd_dispatch1(c->id, c->in, c->n_in, &a); /* checks the labels */
  pd_tensor *s64 = s ? pd_cast(s, PD_FLOAT64) : NULL;
  pd_status st = s64 ? local_total_weight(c, 1, 2, &v[1]) : pd_last_status();
  if (st == PD_OK) v[0] = *(const double *)pd_tensor_data(s64);
  st = sum_over_shards(c, 1, v, 2, st);
  pd_tensor *m = st == PD_OK ? scalar(v[1] != 0 ? v[0] / v[1] : v[0]) : NULL;
  pd_tensor *res = m ? pd_cast(m, s->dtype) : NULL;
  if (!res && st == PD_OK) st = pd_last_status();
  pd_tensor_release(s);
  pd_tensor_release(s64);
  pd_tensor_release(m);
  if (!res) return st;
  out[0] = res;
  return PD_OK;
}

/* nll_loss_grad(label, g[, weight]), mean: the sum's gradient of g / tw. */
static pd_status nll_grad_mean(const pd_spmd_local *c, pd_tensor **out) {
  double tw = 0;
  pd_status st = sum_over_shards(c, 0, &tw, 1, local_total_weight(c, 0, 2, &tw));
  if (st != PD_OK) return st;
  pd_tensor *inv = scalar(tw != 0 ? 1.0 / tw : 1.0), *g64 = inv ? pd_cast(c->in[1], PD_FLOAT64) : NULL;
  pd_tensor *gs = g64 ? pd_multiply(g64, inv) : NULL, *g = gs ? pd_cast(gs, c->in[1]->dtype) : NULL;
  pd_tensor *res = NULL;
  if (g) {
    pd_attrs a = *c->attrs;
    a.i[1] = PD_REDUCTION_SUM;
    pd_tensor *in[3] = {c->in[0], g, c->n_in > 2 ? c->in[2] : NULL};
    res = pd_dispatch1(c->id, in, c->n_in, &a);
  }
  st = res ? PD_OK : pd_last_status();
  pd_tensor_release(inv);
  pd_tensor_release(g64);
  pd_tensor_release(gs);
  pd_tensor_release(g);
  if (!res) return st;
  out[0] = res;
  return PD_OK;
}

pd_status pd_ap_local_nll(const pd_spmd_local *c, pd_tensor **out, int *n_out) {
  return pd_ap_local_computed(c, nll_mean, out, n_out);
}
pd_status pd_ap_local_nll_grad(const pd_spmd_local *c, pd_tensor **out, int *n_out) {
  return pd_ap_local_computed(c, nll_grad_mean, out, n_out);
}
