/* paddle.metric: the metric base and Accuracy, Precision, Recall, Auc. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "paddlec.h"

/* ---- base ---------------------------------------------------------------- */
void *pd_metric_new(size_t size, const pd_metric_fns *fns, int n_names, const char *const *names) {
  if (!fns || !fns->update || !fns->accumulate || !fns->reset || size < sizeof(pd_metric)) {
    pd_set_error(PD_ERR_INVALID, "pd_metric_new: fns with update/accumulate/reset and size >= %zu required",
                 sizeof(pd_metric));
    return NULL;
  }
  if (n_names < 1 || n_names > PD_METRIC_MAX_NAMES || !names) {
    pd_set_error(PD_ERR_INVALID, "pd_metric_new: n_names %d outside [1, %d]", n_names, PD_METRIC_MAX_NAMES);
    return NULL;
  }
  pd_metric *m = calloc(1, size);
  if (!m) {
    pd_set_error(PD_ERR_MEMORY, "pd_metric_new: out of memory");
    return NULL;
  }
  m->fns = fns;
  m->n_names = n_names;
  m->refcount = 1;
  for (int i = 0; i < n_names; i++) snprintf(m->names[i], sizeof m->names[i], "%s", names[i] ? names[i] : "");
  fns->reset(m);
  return m;
}

pd_metric *pd_metric_retain(pd_metric *m) {
  if (m) m->refcount++;
  return m;
}

void pd_metric_release(pd_metric *m) {
  if (!m || --m->refcount > 0) return;
  if (m->fns->destroy) m->fns->destroy(m);
  free(m);
}

const char *pd_metric_name(const pd_metric *m, int i) {
  if (!m || i < 0 || i >= m->n_names) return NULL;
  return m->names[i];
}

int pd_metric_compute(pd_metric *m, pd_tensor *const *args, int n_args, pd_tensor **out, int max_out) {
  if (!m || (n_args > 0 && !args) || !out)
    return pd_set_error(PD_ERR_INVALID, "Metric.compute: NULL %s", !m ? "metric" : "argument");
  if (!m->fns->compute) {
    if (n_args > max_out)
      return pd_set_error(PD_ERR_INVALID, "%s.compute: %d arguments but room for %d", m->fns->type_name,
                          n_args, max_out);
    for (int i = 0; i < n_args; i++) out[i] = args[i];
    return n_args;
  }
  pd_scope_begin();
  int n = m->fns->compute(m, args, n_args, out, max_out);
  for (int i = 0; i < n; i++) pd_keep(out[i]);
  pd_scope_end();
  return n;
}

pd_status pd_metric_update(pd_metric *m, pd_tensor *const *args, int n_args, double *batch_values) {
  if (!m) return pd_set_error(PD_ERR_INVALID, "Metric.update: NULL metric");
  double tmp[PD_METRIC_MAX_NAMES];
  for (int i = 0; i < n_args; i++)
    if (!args[i]) return pd_set_error(PD_ERR_INVALID, "%s.update: argument %d is NULL", m->fns->type_name, i);
  return m->fns->update(m, args, n_args, batch_values ? batch_values : tmp);
}

int pd_metric_accumulate(pd_metric *m, double *values) {
  if (!m || !values)
    return pd_set_error(PD_ERR_INVALID, "Metric.accumulate: NULL %s", m ? "values" : "metric");
  m->fns->accumulate(m, values);
  return m->n_names;
}

void pd_metric_reset(pd_metric *m) {
  if (m) m->fns->reset(m);
}

/* Elements of t as doubles into a growing scratch buffer. */
static double *scratch_values(const pd_tensor *t, double **buf, int64_t *cap) {
  int64_t n = pd_tensor_numel(t);
  if (n > *cap) {
    double *nb = realloc(*buf, (size_t)(n > 0 ? n : 1) * sizeof(double));
    if (!nb) {
      pd_set_error(PD_ERR_MEMORY, "metric: out of memory");
      return NULL;
    }
    *buf = nb;
    *cap = n;
  }
  if (pd_tensor_copy_to(t, *buf, n, PD_FLOAT64) < 0) return NULL;
  return *buf;
}

/* ---- Accuracy ------------------------------------------------------------ */
typedef struct accuracy {
  pd_metric base;
  int n_topk, maxk;
  int topk[PD_METRIC_MAX_NAMES];
  double total[PD_METRIC_MAX_NAMES];
  int64_t count[PD_METRIC_MAX_NAMES];
  double *buf;
  int64_t cap;
} accuracy;

static int accuracy_compute(pd_metric *mm, pd_tensor *const *args, int n_args, pd_tensor **out, int max_out) {
  accuracy *m = (accuracy *)mm;
  if (n_args < 2)
    return pd_set_error(PD_ERR_INVALID, "Accuracy.compute: needs (pred, label), got %d arguments", n_args);
  if (max_out < 1) return pd_set_error(PD_ERR_INVALID, "Accuracy.compute: no room for the output");
  pd_tensor *pred = args[0], *label = args[1];
  int nd = pd_tensor_ndim(pred);
  if (nd < 1)
    return pd_set_error(PD_ERR_SHAPE, "Accuracy.compute: pred must have a class dim, got a 0-D tensor");
  int64_t c = pd_tensor_shape(pred)[nd - 1];
  if (m->maxk > c)
    return pd_set_error(PD_ERR_SHAPE, "Accuracy.compute: topk %d exceeds the %lld classes of pred", m->maxk,
                        (long long)c);
  pd_tensor *idx = pd_argsort(pred, -1, true, true);
  pd_tensor *top =
      pd_slice(idx, 1, (const int64_t[]){nd - 1}, (const int64_t[]){0}, (const int64_t[]){m->maxk});
  int lnd = pd_tensor_ndim(label);
  const int64_t *ls = pd_tensor_shape(label);
  pd_tensor *lab;
  if (lnd == 1 || (lnd == 2 && ls[1] == 1))
    lab = pd_reshape(label, 2, (const int64_t[]){-1, 1});
  else if (lnd >= 1 && ls[lnd - 1] != 1)
    lab = pd_argmax(label, -1, true, PD_INT64); /* one-hot */
  else
    lab = label;
  if (!top || !lab) return pd_last_status();
  pd_tensor *eq = pd_equal(top, pd_cast(lab, PD_INT64));
  out[0] = pd_cast(eq, PD_FLOAT32);
  return out[0] ? 1 : pd_last_status();
}

static pd_status accuracy_update(pd_metric *mm, pd_tensor *const *args, int n_args, double *batch) {
  accuracy *m = (accuracy *)mm;
  if (n_args < 1) return pd_set_error(PD_ERR_INVALID, "Accuracy.update: needs the correct tensor");
  pd_tensor *correct = args[0];
  int nd = pd_tensor_ndim(correct);
  if (nd < 1) return pd_set_error(PD_ERR_SHAPE, "Accuracy.update: correct must be at least 1-D");
  int64_t k_all = pd_tensor_shape(correct)[nd - 1];
  if (k_all < m->maxk)
    return pd_set_error(PD_ERR_SHAPE, "Accuracy.update: correct has %lld columns, topk needs %d",
                        (long long)k_all, m->maxk);
  double *v = scratch_values(correct, &m->buf, &m->cap);
  if (!v) return pd_last_status();
  int64_t rows = k_all ? pd_tensor_numel(correct) / k_all : 0;
  for (int i = 0; i < m->n_topk; i++) {
    double hits = 0;
    for (int64_t r = 0; r < rows; r++)
      for (int k = 0; k < m->topk[i]; k++) hits += v[r * k_all + k];
    batch[i] = rows ? hits / (double)rows : 0.0;
    m->total[i] += hits;
    m->count[i] += rows;
  }
  return PD_OK;
}

static void accuracy_accumulate(pd_metric *mm, double *values) {
  accuracy *m = (accuracy *)mm;
  for (int i = 0; i < m->n_topk; i++) values[i] = m->count[i] > 0 ? m->total[i] / (double)m->count[i] : 0.0;
}

static void accuracy_reset(pd_metric *mm) {
  accuracy *m = (accuracy *)mm;
  for (int i = 0; i < PD_METRIC_MAX_NAMES; i++) m->total[i] = 0, m->count[i] = 0;
}

static void accuracy_destroy(pd_metric *mm) { free(((accuracy *)mm)->buf); }

static const pd_metric_fns accuracy_fns = {"Accuracy",          accuracy_compute, accuracy_update,
                                           accuracy_accumulate, accuracy_reset,   accuracy_destroy};

pd_metric *pd_metric_accuracy(const int *topk, int n_topk, const char *name) {
  static const int one = 1;
  if (!topk) topk = &one, n_topk = 1;
  if (n_topk < 1 || n_topk > PD_METRIC_MAX_NAMES) {
    pd_set_error(PD_ERR_INVALID, "Accuracy: %d topk values, expected 1 to %d", n_topk, PD_METRIC_MAX_NAMES);
    return NULL;
  }
  int maxk = 0;
  for (int i = 0; i < n_topk; i++) {
    if (topk[i] < 1) {
      pd_set_error(PD_ERR_INVALID, "Accuracy: topk[%d] = %d must be >= 1", i, topk[i]);
      return NULL;
    }
    if (topk[i] > maxk) maxk = topk[i];
  }
  const char *base = name ? name : "acc";
  char names[PD_METRIC_MAX_NAMES][64];
  const char *np[PD_METRIC_MAX_NAMES];
  int nn = maxk != 1 ? n_topk : 1;
  for (int i = 0; i < nn; i++) {
    if (maxk != 1)
      snprintf(names[i], sizeof names[i], "%s_top%d", base, topk[i]);
    else
      snprintf(names[i], sizeof names[i], "%s", base);
    np[i] = names[i];
  }
  accuracy *m = pd_metric_new(sizeof *m, &accuracy_fns, nn, np);
  if (!m) return NULL;
  m->n_topk = n_topk;
  m->maxk = maxk;
  memcpy(m->topk, topk, (size_t)n_topk * sizeof(int));
  return &m->base;
}

/* ---- Precision / Recall -------------------------------------------------- */
typedef struct binary_pr {
  pd_metric base;
  bool recall;
  int64_t tp, other; /* other: fp for precision, fn for recall */
  double *pbuf, *lbuf;
  int64_t pcap, lcap;
} binary_pr;

static pd_status pr_update(pd_metric *mm, pd_tensor *const *args, int n_args, double *batch) {
  binary_pr *m = (binary_pr *)mm;
  const char *cls = mm->fns->type_name;
  if (n_args < 2)
    return pd_set_error(PD_ERR_INVALID, "%s.update: needs (preds, labels), got %d", cls, n_args);
  int64_t n = pd_tensor_numel(args[0]);
  if (pd_tensor_numel(args[1]) != n)
    return pd_set_error(PD_ERR_SHAPE, "%s.update: preds have %lld elements but labels %lld", cls,
                        (long long)n, (long long)pd_tensor_numel(args[1]));
  double *p = scratch_values(args[0], &m->pbuf, &m->pcap);
  double *l = p ? scratch_values(args[1], &m->lbuf, &m->lcap) : NULL;
  if (!l) return pd_last_status();
  int64_t tp = 0, other = 0;
  for (int64_t i = 0; i < n; i++) {
    int pred = (int)floor(p[i] + 0.5), lab = (int)l[i];
    if (!m->recall && pred == 1) {
      if (pred == lab)
        tp++;
      else
        other++;
    } else if (m->recall && lab == 1) {
      if (pred == lab)
        tp++;
      else
        other++;
    }
  }
  m->tp += tp;
  m->other += other;
  batch[0] = tp + other ? (double)tp / (double)(tp + other) : 0.0;
  return PD_OK;
}

static void pr_accumulate(pd_metric *mm, double *values) {
  binary_pr *m = (binary_pr *)mm;
  int64_t d = m->tp + m->other;
  values[0] = d ? (double)m->tp / (double)d : 0.0;
}

static void pr_reset(pd_metric *mm) {
  binary_pr *m = (binary_pr *)mm;
  m->tp = m->other = 0;
}

static void pr_destroy(pd_metric *mm) {
  binary_pr *m = (binary_pr *)mm;
  free(m->pbuf);
  free(m->lbuf);
}

static const pd_metric_fns precision_fns = {"Precision",   NULL,     pr_update,
                                            pr_accumulate, pr_reset, pr_destroy};
static const pd_metric_fns recall_fns = {"Recall", NULL, pr_update, pr_accumulate, pr_reset, pr_destroy};

pd_metric *pd_metric_precision(const char *name) {
  const char *nm = name ? name : "precision";
  binary_pr *m = pd_metric_new(sizeof *m, &precision_fns, 1, &nm);
  return m ? &m->base : NULL;
}

pd_metric *pd_metric_recall(const char *name) {
  const char *nm = name ? name : "recall";
  binary_pr *m = pd_metric_new(sizeof *m, &recall_fns, 1, &nm);
  if (!m) return NULL;
  m->recall = true;
  return &m->base;
}

/* ---- Auc ----------------------------------------------------------------- */
typedef struct auc_metric {
  pd_metric base;
  int num_thresholds;
  double *stat_pos, *stat_neg;
  double *pbuf, *lbuf;
  int64_t pcap, lcap;
} auc_metric;

static pd_status auc_update(pd_metric *mm, pd_tensor *const *args, int n_args, double *batch) {
  auc_metric *m = (auc_metric *)mm;
  if (n_args < 2) return pd_set_error(PD_ERR_INVALID, "Auc.update: needs (preds, labels), got %d", n_args);
  pd_tensor *pred = args[0];
  if (pd_tensor_ndim(pred) != 2 || pd_tensor_shape(pred)[1] < 2)
    return pd_set_error(PD_ERR_SHAPE, "Auc.update: preds must be [N, 2] probabilities, got %d-D",
                        pd_tensor_ndim(pred));
  int64_t n = pd_tensor_shape(pred)[0], c = pd_tensor_shape(pred)[1];
  if (pd_tensor_numel(args[1]) != n)
    return pd_set_error(PD_ERR_SHAPE, "Auc.update: %lld predictions but %lld labels", (long long)n,
                        (long long)pd_tensor_numel(args[1]));
  double *p = scratch_values(pred, &m->pbuf, &m->pcap);
  double *l = p ? scratch_values(args[1], &m->lbuf, &m->lcap) : NULL;
  if (!l) return pd_last_status();
  for (int64_t i = 0; i < n; i++) {
    double v = p[i * c + 1];
    if (!(v >= 0.0 && v <= 1.0))
      return pd_set_error(PD_ERR_INVALID, "Auc.update: prediction %lld is %g, outside [0, 1]", (long long)i,
                          v);
  }
  for (int64_t i = 0; i < n; i++) {
    int64_t bin = (int64_t)(p[i * c + 1] * m->num_thresholds);
    if (l[i] != 0.0)
      m->stat_pos[bin] += 1.0;
    else
      m->stat_neg[bin] += 1.0;
  }
  mm->fns->accumulate(mm, batch);
  return PD_OK;
}

static void auc_accumulate(pd_metric *mm, double *values) {
  auc_metric *m = (auc_metric *)mm;
  double tot_pos = 0, tot_neg = 0, auc = 0;
  for (int idx = m->num_thresholds; idx >= 0; idx--) {
    double pp = tot_pos, pn = tot_neg;
    tot_pos += m->stat_pos[idx];
    tot_neg += m->stat_neg[idx];
    auc += fabs(tot_neg - pn) * (tot_pos + pp) / 2.0;
  }
  values[0] = tot_pos > 0 && tot_neg > 0 ? auc / tot_pos / tot_neg : 0.0;
}

static void auc_reset(pd_metric *mm) {
  auc_metric *m = (auc_metric *)mm;
  if (!m->stat_pos) return;
  memset(m->stat_pos, 0, (size_t)(m->num_thresholds + 1) * sizeof(double));
  memset(m->stat_neg, 0, (size_t)(m->num_thresholds + 1) * sizeof(double));
}

static void auc_destroy(pd_metric *mm) {
  auc_metric *m = (auc_metric *)mm;
  free(m->stat_pos);
  free(m->stat_neg);
  free(m->pbuf);
  free(m->lbuf);
}

static const pd_metric_fns auc_fns = {"Auc", NULL, auc_update, auc_accumulate, auc_reset, auc_destroy};

pd_metric *pd_metric_auc(const char *curve, int num_thresholds, const char *name) {
  if (curve && strcmp(curve, "ROC") != 0) {
    pd_set_error(PD_ERR_UNIMPLEMENTED, "Auc: curve \"%s\" is not supported (only \"ROC\")", curve);
    return NULL;
  }
  if (num_thresholds < 0) {
    pd_set_error(PD_ERR_INVALID, "Auc: num_thresholds %d must be positive", num_thresholds);
    return NULL;
  }
  if (num_thresholds == 0) num_thresholds = 4095;
  const char *nm = name ? name : "auc";
  auc_metric *m = pd_metric_new(sizeof *m, &auc_fns, 1, &nm);
  if (!m) return NULL;
  m->num_thresholds = num_thresholds;
  m->stat_pos = calloc((size_t)num_thresholds + 1, sizeof(double));
  m->stat_neg = calloc((size_t)num_thresholds + 1, sizeof(double));
  if (!m->stat_pos || !m->stat_neg) {
    pd_metric_release(&m->base);
    pd_set_error(PD_ERR_MEMORY, "Auc: out of memory");
    return NULL;
  }
  return &m->base;
}
