/* paddle.Model: prepare, fit / evaluate / predict, the batch functions,
 * save / load, parameters and summary. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../core/tensor_impl.h"
#include "hapi_internal.h"

#define MAX_SPECS 16

struct pd_model_state {
  int n_inputs, n_labels; /* n_labels -1: every field after the inputs */
  pd_input_spec inputs[MAX_SPECS];
  char input_names[MAX_SPECS][64];
  bool prepared, has_specs;
  pd_metric **metrics;
  int n_metrics;
  int n_names;
  const char *names[PD_MODEL_MAX_VALUES];
  double values[PD_MODEL_MAX_VALUES];
};

/* ---- construction -------------------------------------------------------- */
pd_model *pd_model_new(pd_layer *network, const pd_input_spec *inputs, int n_inputs,
                       const pd_input_spec *labels, int n_labels) {
  if (!network) {
    pd_set_error(PD_ERR_INVALID, "pd_model_new: network is NULL");
    return NULL;
  }
  if ((inputs && (n_inputs < 1 || n_inputs > MAX_SPECS)) ||
      (labels && (n_labels < 0 || n_labels > MAX_SPECS))) {
    pd_set_error(PD_ERR_INVALID, "pd_model_new: %d input specs / %d label specs, expected 1 to %d", n_inputs,
                 n_labels, MAX_SPECS);
    return NULL;
  }
  pd_model *m = calloc(1, sizeof *m);
  pd_model_state *st = calloc(1, sizeof *st);
  if (!m || !st) {
    free(m);
    free(st);
    pd_set_error(PD_ERR_MEMORY, "pd_model_new: out of memory");
    return NULL;
  }
  m->st = st;
  m->network = pd_layer_retain(network);
  st->n_inputs = inputs ? n_inputs : 1;
  st->n_labels = labels ? n_labels : -1;
  st->has_specs = inputs != NULL;
  if (inputs)
    for (int i = 0; i < n_inputs; i++) {
      st->inputs[i] = inputs[i];
      snprintf(st->input_names[i], sizeof st->input_names[i], "%s", inputs[i].name ? inputs[i].name : "");
      st->inputs[i].name = st->input_names[i];
    }
  return m;
}

void pd_model_release(pd_model *m) {
  if (!m) return;
  pd_layer_release(m->network);
  pd_layer_release(m->loss);
  for (int i = 0; i < m->st->n_metrics; i++) pd_metric_release(m->st->metrics[i]);
  free(m->st->metrics);
  free(m->st);
  free(m);
}

pd_status pd_model_prepare(pd_model *m, pd_optimizer *optimizer, pd_layer *loss, pd_metric *const *metrics,
                           int n_metrics) {
  if (!m) return pd_set_error(PD_ERR_INVALID, "pd_model_prepare: model is NULL");
  if (n_metrics < 0 || (n_metrics > 0 && !metrics))
    return pd_set_error(PD_ERR_INVALID, "pd_model_prepare: %d metrics but no array", n_metrics);
  int n_names = loss ? 1 : 0;
  for (int i = 0; i < n_metrics; i++) {
    if (!metrics[i]) return pd_set_error(PD_ERR_INVALID, "pd_model_prepare: metrics[%d] is NULL", i);
    n_names += metrics[i]->n_names;
  }
  if (n_names > PD_MODEL_MAX_VALUES)
    return pd_set_error(PD_ERR_INVALID, "pd_model_prepare: %d logged values, at most %d", n_names,
                        PD_MODEL_MAX_VALUES);
  pd_metric **mv = n_metrics ? malloc((size_t)n_metrics * sizeof *mv) : NULL;
  if (n_metrics && !mv) return pd_set_error(PD_ERR_MEMORY, "pd_model_prepare: out of memory");
  for (int i = 0; i < n_metrics; i++) mv[i] = pd_metric_retain(metrics[i]);
  pd_model_state *st = m->st;
  for (int i = 0; i < st->n_metrics; i++) pd_metric_release(st->metrics[i]);
  free(st->metrics);
  st->metrics = mv;
  st->n_metrics = n_metrics;
  if (loss) pd_layer_retain(loss);
  pd_layer_release(m->loss);
  m->loss = loss;
  m->optimizer = optimizer;
  st->n_names = 0;
  if (loss) st->names[st->n_names++] = "loss";
  for (int i = 0; i < n_metrics; i++)
    for (int k = 0; k < mv[i]->n_names; k++) st->names[st->n_names++] = mv[i]->names[k];
  st->prepared = true;
  return PD_OK;
}

int pd_model_metrics_names(const pd_model *m, const char **names, int max) {
  if (!m) return pd_set_error(PD_ERR_INVALID, "pd_model_metrics_names: model is NULL");
  for (int i = 0; i < m->st->n_names && i < max; i++) names[i] = m->st->names[i];
  return m->st->n_names;
}

/* ---- one batch ------------------------------------------------------------ */
enum { MODE_TRAIN, MODE_EVAL, MODE_PREDICT };

/* Runs inside the caller's scope; writes the loss and the metrics' per-batch
 * values to res. */
static pd_status run_batch(pd_model *m, int mode, pd_tensor *const *inputs, int n_in,
                           pd_tensor *const *labels, int n_lab, bool update, pd_model_batch_result *res,
                           const char *fn) {
  pd_model_state *st = m->st;
  if (n_in < 0 || n_lab < 0 || n_in > PD_MODEL_MAX_OUTPUTS || n_lab > PD_MODEL_MAX_OUTPUTS)
    return pd_set_error(PD_ERR_INVALID, "%s: %d inputs and %d labels, at most %d each", fn, n_in, n_lab,
                        PD_MODEL_MAX_OUTPUTS);
  if (mode == MODE_TRAIN && (!st->prepared || !m->optimizer))
    return pd_set_error(PD_ERR_STATE,
                        "%s: model not ready, please call pd_model_prepare() with an optimizer first", fn);
  if (mode == MODE_TRAIN && !m->loss)
    return pd_set_error(PD_ERR_STATE, "%s: no loss to train with, pass one to pd_model_prepare()", fn);
  if (st->n_labels >= 0 && n_lab != st->n_labels)
    return pd_set_error(PD_ERR_INVALID, "%s: %d labels given but the model has %d label specs", fn, n_lab,
                        st->n_labels);
  if (mode == MODE_TRAIN)
    pd_layer_train(m->network);
  else
    pd_layer_eval(m->network);
  pd_tensor *outs[PD_MODEL_MAX_OUTPUTS];
  int n_out = pd_layer_call(m->network, inputs, n_in, outs, PD_MODEL_MAX_OUTPUTS);
  if (n_out < 0) return (pd_status)n_out;
  pd_tensor *args[2 * PD_MODEL_MAX_OUTPUTS];
  for (int i = 0; i < n_out; i++) args[i] = outs[i];
  for (int i = 0; i < n_lab; i++) args[n_out + i] = labels[i];
  res->loss = NAN;
  res->n_values = 0;
  if (m->loss) {
    pd_tensor *lo[PD_MODEL_MAX_OUTPUTS];
    int nl = pd_layer_call(m->loss, args, n_out + n_lab, lo, PD_MODEL_MAX_OUTPUTS);
    if (nl < 0) return (pd_status)nl;
    if (nl == 0) return pd_set_error(PD_ERR_INVALID, "%s: the loss layer returned no output", fn);
    pd_tensor *final = lo[0];
    for (int i = 1; i < nl; i++) final = pd_add(final, lo[i]);
    if (!final) return pd_last_status();
    res->loss = pd_tensor_item_at(final, 0);
    if (mode == MODE_TRAIN) {
      pd_tensor *root = pd_tensor_numel(final) == 1 ? final : pd_sum(final, NULL, 0, false);
      if (!root) return pd_last_status();
      pd_status s = pd_backward(root, NULL, false);
      if (s != PD_OK) return s;
      if (update) {
        s = pd_optimizer_step(m->optimizer);
        if (s != PD_OK) return s;
        pd_layer_clear_gradients(m->network, true);
      }
    }
  }
  for (int i = 0; i < st->n_metrics; i++) {
    pd_metric *mt = st->metrics[i];
    pd_tensor *c[PD_MODEL_MAX_OUTPUTS * 2];
    int nc = pd_metric_compute(mt, args, n_out + n_lab, c, PD_MODEL_MAX_OUTPUTS * 2);
    if (nc < 0) return (pd_status)nc;
    pd_status s = pd_metric_update(mt, c, nc, res->values + res->n_values);
    if (s != PD_OK) return s;
    res->n_values += mt->n_names;
  }
  return PD_OK;
}

static pd_status batch_entry(pd_model *m, int mode, pd_tensor *const *inputs, int n_in,
                             pd_tensor *const *labels, int n_lab, bool update, pd_model_batch_result *res,
                             const char *fn) {
  if (!m) return pd_set_error(PD_ERR_INVALID, "%s: model is NULL", fn);
  pd_model_batch_result tmp;
  if (!res) res = &tmp;
  bool grad = mode == MODE_TRAIN;
  if (!grad) pd_no_grad_begin();
  pd_scope_begin();
  pd_status s = run_batch(m, mode, inputs, n_in, labels, n_lab, update, res, fn);
  pd_scope_end();
  if (!grad) pd_no_grad_end();
  return s;
}

pd_status pd_model_train_batch(pd_model *m, pd_tensor *const *inputs, int n_inputs, pd_tensor *const *labels,
                               int n_labels, bool update, pd_model_batch_result *res) {
  return batch_entry(m, MODE_TRAIN, inputs, n_inputs, labels, n_labels, update, res, "pd_model_train_batch");
}

pd_status pd_model_eval_batch(pd_model *m, pd_tensor *const *inputs, int n_inputs, pd_tensor *const *labels,
                              int n_labels, pd_model_batch_result *res) {
  return batch_entry(m, MODE_EVAL, inputs, n_inputs, labels, n_labels, false, res, "pd_model_eval_batch");
}

int pd_model_predict_batch(pd_model *m, pd_tensor *const *inputs, int n_inputs, pd_tensor **out,
                           int max_out) {
  if (!m || !out)
    return pd_set_error(PD_ERR_INVALID, "pd_model_predict_batch: %s is NULL", m ? "out" : "model");
  pd_layer_eval(m->network);
  pd_no_grad_begin();
  pd_scope_begin();
  int n = pd_layer_call(m->network, inputs, n_inputs, out, max_out);
  for (int i = 0; i < n; i++) pd_keep(out[i]);
  pd_scope_end();
  pd_no_grad_end();
  return n;
}

/* ---- callbacks list ---------------------------------------------------------- */
typedef struct cblist {
  int n;
  pd_callback *v[64];
} cblist;

static void cbs_free(cblist *c) {
  for (int i = 0; i < c->n; i++) pd_callback_release(c->v[i]);
  c->n = 0;
}

static bool cbs_has(const cblist *c, const pd_callback_fns *fns) {
  for (int i = 0; i < c->n; i++)
    if (c->v[i]->fns == fns) return true;
  return false;
}

/* config_callbacks: takes over the references of the created callbacks. */
static pd_status cbs_config(cblist *c, pd_model *m, pd_callback *const *user, int n_user, int epochs,
                            int64_t steps, int log_freq, int save_freq, const char *save_dir, int verbose,
                            bool quiet, FILE *log, bool training) {
  c->n = 0;
  if (n_user < 0 || n_user > 60 || (n_user > 0 && !user))
    return pd_set_error(PD_ERR_INVALID, "callbacks: %d callbacks given (at most 60)", n_user);
  for (int i = 0; i < n_user; i++)
    if (!user[i]) return pd_set_error(PD_ERR_INVALID, "callbacks: callbacks[%d] is NULL", i);
  bool has_pbl = false;
  for (int i = 0; i < n_user; i++) has_pbl |= user[i]->fns == &pd_callback_prog_bar_logger_fns;
  if (!has_pbl && !quiet) {
    pd_callbacks_prog_bar_logger_opts o = {.log_freq = log_freq, .verbose = verbose, .out = log};
    pd_callback *p = pd_callbacks_prog_bar_logger(&o);
    if (!p) return pd_last_status();
    c->v[c->n++] = p;
  }
  for (int i = 0; i < n_user; i++) c->v[c->n++] = pd_callback_retain(user[i]);
  if (training && !cbs_has(c, &pd_callback_model_checkpoint_fns)) {
    pd_callback *p = pd_callbacks_model_checkpoint(save_freq, save_dir);
    if (!p) return pd_last_status();
    c->v[c->n++] = p;
  }
  for (int i = 0; i < c->n; i++)
    if (c->v[i]->fns == &pd_callback_early_stopping_fns) {
      pd_status s = pd_callback_set_save_dir(c->v[i], save_dir);
      if (s != PD_OK) return s;
    }
  if (training && !cbs_has(c, &pd_callback_lr_scheduler_fns)) {
    pd_callback *p = pd_callbacks_lr_scheduler(true, false);
    if (!p) return pd_last_status();
    c->v[c->n++] = p;
  }
  for (int i = 0; i < c->n; i++) {
    pd_callback *cb = c->v[i];
    cb->model = m;
    cb->params = (pd_callback_params){.epochs = epochs,
                                      .steps = steps,
                                      .verbose = quiet ? 0 : verbose,
                                      .n_metrics = m->st->n_names,
                                      .metrics = m->st->names,
                                      .save_dir = save_dir};
  }
  return PD_OK;
}

static pd_status cbs_call(cblist *c, size_t off, int64_t index, const pd_logs *logs) {
  for (int i = 0; i < c->n; i++) {
    pd_callback_hook h = *(const pd_callback_hook *)((const char *)c->v[i]->fns + off);
    if (!h) continue;
    pd_status s = h(c->v[i], index, logs);
    if (s < 0) return s;
  }
  return PD_OK;
}
#define HOOK(name) offsetof(pd_callback_fns, name)

/* ---- one pass over the data -------------------------------------------------- */
typedef struct collected {
  int n_outputs;
  int64_t n_batches, cap;
  pd_tensor **t; /* batch-major while collecting */
} collected;

static void collected_free(collected *c) {
  for (int64_t i = 0; i < c->n_batches * c->n_outputs; i++) pd_tensor_release(c->t[i]);
  free(c->t);
  memset(c, 0, sizeof *c);
}

static pd_status run_epoch(pd_model *m, pd_io_loader *l, cblist *cbs, int mode, pd_logs *logs, collected *col,
                           const char *fn) {
  static const size_t begin_off[3] = {HOOK(on_train_batch_begin), HOOK(on_eval_batch_begin),
                                      HOOK(on_predict_batch_begin)};
  static const size_t end_off[3] = {HOOK(on_train_batch_end), HOOK(on_eval_batch_end),
                                    HOOK(on_predict_batch_end)};
  pd_model_state *st = m->st;
  pd_status s = pd_io_loader_reset(l);
  if (s != PD_OK) return s;
  for (int64_t step = 0;; step++) {
    pd_scope_begin();
    pd_tensor *batch[PD_IO_MAX_FIELDS];
    int nf = pd_io_loader_next(l, batch, PD_IO_MAX_FIELDS);
    if (nf <= 0) {
      pd_scope_end();
      if (nf < 0) return (pd_status)nf;
      break;
    }
    int64_t bs = pd_tensor_ndim(batch[0]) > 0 ? pd_tensor_shape(batch[0])[0] : 1;
    s = cbs_call(cbs, begin_off[mode], step, logs);
    int n_in = st->n_inputs;
    if (s == PD_OK && nf < n_in)
      s = pd_set_error(PD_ERR_INVALID, "%s: a batch has %d fields but the model has %d inputs", fn, nf, n_in);
    if (s == PD_OK && mode != MODE_PREDICT && st->n_labels >= 0 && nf != n_in + st->n_labels)
      s = pd_set_error(PD_ERR_INVALID,
                       "%s: a batch has %d fields but the model expects %d inputs + %d labels", fn, nf, n_in,
                       st->n_labels);
    if (s == PD_OK && mode != MODE_PREDICT) {
      pd_model_batch_result r;
      if (mode == MODE_EVAL) pd_no_grad_begin();
      s = run_batch(m, mode, batch, n_in, batch + n_in, nf - n_in, true, &r, fn);
      if (mode == MODE_EVAL) pd_no_grad_end();
      if (s == PD_OK) {
        int k = 0;
        if (m->loss) st->values[k++] = r.loss;
        for (int i = 0; i < st->n_metrics; i++) k += pd_metric_accumulate(st->metrics[i], st->values + k);
      }
    } else if (s == PD_OK) {
      pd_tensor *outs[PD_MODEL_MAX_OUTPUTS];
      pd_layer_eval(m->network);
      pd_no_grad_begin();
      int no = pd_layer_call(m->network, batch, n_in, outs, PD_MODEL_MAX_OUTPUTS);
      pd_no_grad_end();
      if (no < 0)
        s = (pd_status)no;
      else if (col->n_batches > 0 && no != col->n_outputs)
        s = pd_set_error(PD_ERR_INVALID, "%s: batch %lld gave %d outputs, the first gave %d", fn,
                         (long long)step, no, col->n_outputs);
      else {
        col->n_outputs = no;
        if ((col->n_batches + 1) * no > col->cap) {
          int64_t cap = col->cap ? col->cap * 2 : 16;
          while (cap < (col->n_batches + 1) * no) cap *= 2;
          pd_tensor **nt = realloc(col->t, (size_t)cap * sizeof *nt);
          if (!nt)
            s = pd_set_error(PD_ERR_MEMORY, "%s: out of memory", fn);
          else
            col->t = nt, col->cap = cap;
        }
        if (s == PD_OK) {
          for (int i = 0; i < no; i++) col->t[col->n_batches * no + i] = pd_tensor_retain(outs[i]);
          col->n_batches++;
        }
      }
    }
    pd_scope_end();
    if (s != PD_OK) {
      pd_io_loader_reset(l);
      return s;
    }
    logs->step = step;
    logs->batch_size = bs;
    s = cbs_call(cbs, end_off[mode], step, logs);
    if (s != PD_OK) return s;
  }
  for (int i = 0; i < st->n_metrics; i++) pd_metric_reset(st->metrics[i]);
  return PD_OK;
}

/* The loader for data (built from a dataset, or the given one). */
static pd_io_loader *data_loader(pd_model_data d, int64_t batch_size, bool shuffle, bool drop_last,
                                 int workers, bool *owned, const char *fn, const char *what) {
  *owned = false;
  if (d.loader && d.dataset) {
    pd_set_error(PD_ERR_INVALID, "%s: %s gives both a dataset and a loader", fn, what);
    return NULL;
  }
  if (d.loader) return d.loader;
  if (!d.dataset) {
    pd_set_error(PD_ERR_INVALID, "%s: %s is empty (no dataset or loader)", fn, what);
    return NULL;
  }
  if (batch_size < 0) {
    pd_set_error(PD_ERR_INVALID, "%s: batch_size %lld must be >= 1", fn, (long long)batch_size);
    return NULL;
  }
  pd_io_data_loader_opts o = {.batch_size = batch_size ? batch_size : 1,
                              .shuffle = shuffle && !pd_io_dataset_is_iterable(d.dataset),
                              .drop_last = drop_last,
                              .num_workers = workers};
  pd_io_loader *l = pd_io_data_loader(d.dataset, &o);
  *owned = l != NULL;
  return l;
}

static int64_t loader_steps(pd_io_loader *l) {
  int64_t n = pd_io_loader_len(l);
  if (n < 0) {
    pd_clear_error();
    return -1;
  }
  return n;
}

static void reset_values(pd_model *m) {
  for (int i = 0; i < PD_MODEL_MAX_VALUES; i++) m->st->values[i] = NAN;
}

/* ---- fit / evaluate / predict ------------------------------------------------ */
pd_status pd_model_fit(pd_model *m, pd_model_data train_data, pd_model_data eval_data,
                       const pd_model_fit_opts *opts) {
  const char *fn = "pd_model_fit";
  if (!m) return pd_set_error(PD_ERR_INVALID, "%s: model is NULL", fn);
  if (!m->st->prepared || !m->optimizer)
    return pd_set_error(PD_ERR_STATE,
                        "%s: model not ready, please call pd_model_prepare() with an optimizer first", fn);
  if (!m->loss)
    return pd_set_error(PD_ERR_STATE, "%s: no loss to train with, pass one to pd_model_prepare()", fn);
  pd_model_fit_opts o = opts ? *opts : (pd_model_fit_opts){0};
  if (o.epochs < 0 || o.eval_freq < 0 || o.log_freq < 0 || o.save_freq < 0 || o.verbose < 0 ||
      o.verbose > 3 || o.num_workers < 0)
    return pd_set_error(
        PD_ERR_INVALID,
        "%s: epochs %d, eval_freq %d, log_freq %d, save_freq %d, num_workers %d must be >= 0 and "
        "verbose %d in 0..3",
        fn, o.epochs, o.eval_freq, o.log_freq, o.save_freq, o.num_workers, o.verbose);
  int epochs = o.epochs ? o.epochs : 1, eval_freq = o.eval_freq ? o.eval_freq : 1;
  int log_freq = o.log_freq ? o.log_freq : 10, verbose = o.verbose ? o.verbose : 2;
  bool own_train = false, own_eval = false;
  pd_io_loader *tl = data_loader(train_data, o.batch_size, !o.no_shuffle, o.drop_last, o.num_workers,
                                 &own_train, fn, "train_data");
  if (!tl) return pd_last_status();
  pd_io_loader *el = NULL;
  if (eval_data.dataset || eval_data.loader) {
    el = data_loader(eval_data, o.batch_size, false, false, o.num_workers, &own_eval, fn, "eval_data");
    if (!el) {
      if (own_train) pd_io_loader_release(tl);
      return pd_last_status();
    }
  }
  int64_t steps = loader_steps(tl);
  cblist cbs;
  pd_status s = cbs_config(&cbs, m, o.callbacks, o.n_callbacks, epochs, steps, log_freq, o.save_freq,
                           o.save_dir, verbose, o.quiet, o.log_file, true);
  pd_model_state *st = m->st;
  pd_logs none = {.n = 0, .names = st->names, .values = NULL, .step = -1, .batch_size = 0, .steps = steps};
  pd_logs logs = {.n = st->n_names, .names = st->names, .values = st->values, .step = -1, .steps = steps};
  m->stop_training = false;
  reset_values(m);
  if (s == PD_OK) s = cbs_call(&cbs, HOOK(on_train_begin), -1, &none);
  for (int epoch = 0; s == PD_OK && epoch < epochs; epoch++) {
    s = cbs_call(&cbs, HOOK(on_epoch_begin), epoch, &none);
    if (s == PD_OK) s = run_epoch(m, tl, &cbs, MODE_TRAIN, &logs, NULL, fn);
    logs.step = -1;
    if (s == PD_OK) s = cbs_call(&cbs, HOOK(on_epoch_end), epoch, &logs);
    if (s == PD_OK && el && epoch % eval_freq == 0) {
      double saved[PD_MODEL_MAX_VALUES];
      memcpy(saved, st->values, sizeof saved);
      int64_t es = loader_steps(el);
      pd_logs eb = {.n = st->n_names, .names = st->names, .values = NULL, .step = -1, .steps = es};
      pd_logs elogs = {.n = st->n_names, .names = st->names, .values = st->values, .step = -1, .steps = es};
      reset_values(m);
      s = cbs_call(&cbs, HOOK(on_eval_begin), -1, &eb);
      if (s == PD_OK) s = run_epoch(m, el, &cbs, MODE_EVAL, &elogs, NULL, fn);
      elogs.step = -1;
      if (s == PD_OK) s = cbs_call(&cbs, HOOK(on_eval_end), -1, &elogs);
      memcpy(st->values, saved, sizeof saved);
    }
    if (m->stop_training) break;
  }
  if (s == PD_OK) s = cbs_call(&cbs, HOOK(on_train_end), -1, &logs);
  cbs_free(&cbs);
  if (own_train) pd_io_loader_release(tl);
  if (own_eval) pd_io_loader_release(el);
  return s;
}

double pd_model_eval_result_get(const pd_model_eval_result *r, const char *name) {
  if (!r || !name) return NAN;
  for (int i = 0; i < r->n; i++)
    if (strcmp(r->names[i], name) == 0) return r->values[i];
  return NAN;
}

void pd_model_eval_result_free(pd_model_eval_result *r) {
  if (!r) return;
  for (int i = 0; i < r->n; i++) free(r->names[i]);
  free(r->names);
  free(r->values);
  memset(r, 0, sizeof *r);
}

pd_status pd_model_evaluate(pd_model *m, pd_model_data eval_data, const pd_model_eval_opts *opts,
                            pd_model_eval_result *result) {
  const char *fn = "pd_model_evaluate";
  if (result) memset(result, 0, sizeof *result);
  if (!m) return pd_set_error(PD_ERR_INVALID, "%s: model is NULL", fn);
  if (!m->st->prepared)
    return pd_set_error(PD_ERR_STATE, "%s: model not ready, please call pd_model_prepare() first", fn);
  pd_model_eval_opts o = opts ? *opts : (pd_model_eval_opts){0};
  if (o.log_freq < 0 || o.verbose < 0 || o.verbose > 3 || o.num_workers < 0)
    return pd_set_error(PD_ERR_INVALID, "%s: log_freq %d and num_workers %d must be >= 0, verbose %d in 0..3",
                        fn, o.log_freq, o.num_workers, o.verbose);
  bool own = false;
  pd_io_loader *el = data_loader(eval_data, o.batch_size, false, false, o.num_workers, &own, fn, "eval_data");
  if (!el) return pd_last_status();
  int64_t es = loader_steps(el);
  cblist cbs;
  pd_status s = cbs_config(&cbs, m, o.callbacks, o.n_callbacks, 0, es, o.log_freq ? o.log_freq : 10, 1, NULL,
                           o.verbose ? o.verbose : 2, o.quiet, o.log_file, false);
  pd_model_state *st = m->st;
  pd_logs eb = {.n = st->n_names, .names = st->names, .values = NULL, .step = -1, .steps = es};
  pd_logs logs = {.n = st->n_names, .names = st->names, .values = st->values, .step = -1, .steps = es};
  reset_values(m);
  if (s == PD_OK) s = cbs_call(&cbs, HOOK(on_eval_begin), -1, &eb);
  if (s == PD_OK) s = run_epoch(m, el, &cbs, MODE_EVAL, &logs, NULL, fn);
  logs.step = -1;
  if (s == PD_OK) s = cbs_call(&cbs, HOOK(on_eval_end), -1, &logs);
  cbs_free(&cbs);
  if (own) pd_io_loader_release(el);
  if (s == PD_OK && result) {
    result->names = calloc((size_t)st->n_names + 1, sizeof(char *));
    result->values = calloc((size_t)st->n_names + 1, sizeof(double));
    if (!result->names || !result->values) {
      pd_model_eval_result_free(result);
      return pd_set_error(PD_ERR_MEMORY, "%s: out of memory", fn);
    }
    for (int i = 0; i < st->n_names; i++) {
      result->names[i] = strdup(st->names[i]);
      result->values[i] = st->values[i];
      result->n = i + 1;
      if (!result->names[i]) {
        pd_model_eval_result_free(result);
        return pd_set_error(PD_ERR_MEMORY, "%s: out of memory", fn);
      }
    }
  }
  return s;
}

void pd_model_predict_result_free(pd_model_predict_result *r) {
  if (!r) return;
  for (int64_t i = 0; i < (int64_t)r->n_outputs * r->n_batches; i++) pd_tensor_release(r->tensors[i]);
  free(r->tensors);
  memset(r, 0, sizeof *r);
}

pd_status pd_model_predict(pd_model *m, pd_model_data test_data, const pd_model_predict_opts *opts,
                           pd_model_predict_result *result) {
  const char *fn = "pd_model_predict";
  if (result) memset(result, 0, sizeof *result);
  if (!m || !result) return pd_set_error(PD_ERR_INVALID, "%s: %s is NULL", fn, m ? "result" : "model");
  pd_model_predict_opts o = opts ? *opts : (pd_model_predict_opts){0};
  if (o.verbose < 0 || o.verbose > 3 || o.num_workers < 0)
    return pd_set_error(PD_ERR_INVALID, "%s: verbose %d must be in 0..3, num_workers %d >= 0", fn, o.verbose,
                        o.num_workers);
  bool own = false;
  pd_io_loader *l = data_loader(test_data, o.batch_size, false, false, o.num_workers, &own, fn, "test_data");
  if (!l) return pd_last_status();
  int64_t steps = loader_steps(l);
  cblist cbs;
  pd_status s = cbs_config(&cbs, m, o.callbacks, o.n_callbacks, 0, steps, 1, 1, NULL,
                           o.verbose ? o.verbose : 1, o.quiet, o.log_file, false);
  pd_logs logs = {.n = 0, .names = m->st->names, .values = NULL, .step = -1, .steps = steps};
  collected col = {0};
  if (s == PD_OK) s = cbs_call(&cbs, HOOK(on_predict_begin), -1, &logs);
  if (s == PD_OK) s = run_epoch(m, l, &cbs, MODE_PREDICT, &logs, &col, fn);
  if (own) pd_io_loader_release(l);
  if (s == PD_OK) {
    int no = col.n_outputs;
    int64_t nb = col.n_batches;
    int64_t n_res = o.stack_outputs ? no : no * nb;
    result->tensors = calloc((size_t)(n_res ? n_res : 1), sizeof(pd_tensor *));
    if (!result->tensors)
      s = pd_set_error(PD_ERR_MEMORY, "%s: out of memory", fn);
    else if (!o.stack_outputs) {
      result->n_outputs = no;
      result->n_batches = nb;
      for (int oi = 0; oi < no; oi++)
        for (int64_t b = 0; b < nb; b++) {
          result->tensors[oi * nb + b] = col.t[b * no + oi];
          col.t[b * no + oi] = NULL;
        }
    } else {
      result->n_outputs = no;
      result->n_batches = nb ? 1 : 0;
      pd_tensor **list = malloc((size_t)(nb ? nb : 1) * sizeof *list);
      if (!list) s = pd_set_error(PD_ERR_MEMORY, "%s: out of memory", fn);
      for (int oi = 0; s == PD_OK && oi < no && nb > 0; oi++) {
        for (int64_t b = 0; b < nb; b++) list[b] = col.t[b * no + oi];
        pd_scope_begin();
        pd_tensor *t =
            pd_tensor_ndim(list[0]) == 0 ? pd_stack(list, (int)nb, 0) : pd_concat(list, (int)nb, 0);
        if (t) result->tensors[oi] = pd_tensor_retain(t);
        pd_scope_end();
        if (!t) s = pd_last_status();
      }
      free(list);
    }
  }
  if (s == PD_OK) s = cbs_call(&cbs, HOOK(on_predict_end), -1, &logs);
  cbs_free(&cbs);
  collected_free(&col);
  if (s != PD_OK) pd_model_predict_result_free(result);
  return s;
}

/* ---- save / load ------------------------------------------------------------- */
static pd_status make_parent_dirs(const char *path, const char *fn) {
  char *p = strdup(path);
  if (!p) return pd_set_error(PD_ERR_MEMORY, "%s: out of memory", fn);
  char *slash = strrchr(p, '/');
  if (slash && slash != p) {
    *slash = 0;
    for (char *q = p + 1; *q; q++)
      if (*q == '/') {
        *q = 0;
        if (mkdir(p, 0777) != 0 && errno != EEXIST) break;
        *q = '/';
      }
    if (mkdir(p, 0777) != 0 && errno != EEXIST) {
      pd_status s = pd_set_error(PD_ERR_IO, "%s: cannot create directory %s: %s", fn, p, strerror(errno));
      free(p);
      return s;
    }
  }
  free(p);
  return PD_OK;
}

static char *concat2(const char *a, const char *b) {
  size_t n = strlen(a) + strlen(b) + 1;
  char *s = malloc(n);
  if (s) snprintf(s, n, "%s%s", a, b);
  return s;
}

pd_status pd_model_save(pd_model *m, const char *path, bool training) {
  const char *fn = "pd_model_save";
  if (!m || !path) return pd_set_error(PD_ERR_INVALID, "%s: %s is NULL", fn, m ? "path" : "model");
  const char *base = strrchr(path, '/');
  if (!*(base ? base + 1 : path))
    return pd_set_error(PD_ERR_INVALID, "%s: path \"%s\" should be of 'dirname/filename' format", fn, path);
  pd_status s = make_parent_dirs(path, fn);
  if (s != PD_OK) return s;
  char *pp = concat2(path, ".pdparams");
  if (!pp) return pd_set_error(PD_ERR_MEMORY, "%s: out of memory", fn);
  s = pd_layer_save(m->network, pp);
  free(pp);
  if (s != PD_OK || !training || !m->optimizer) return s;
  pd_named_tensors sd = {0}, params = {0};
  pd_string_map meta = {0};
  s = pd_optimizer_state_dict(m->optimizer, &sd);
  if (s == PD_OK) s = pd_layer_named_parameters(m->network, &params);
  /* which tensor name each parameter had, so the state can be matched to
   * another instance of the network on load */
  for (int i = 0; s == PD_OK && i < params.n; i++) {
    const char *tn = pd_tensor_name(params.tensors[i]);
    if (!tn) continue;
    char *key = concat2("param:", params.names[i]);
    if (!key)
      s = pd_set_error(PD_ERR_MEMORY, "%s: out of memory", fn);
    else
      s = pd_string_map_set(&meta, key, tn);
    free(key);
  }
  char *op = s == PD_OK ? concat2(path, ".pdopt") : NULL;
  if (s == PD_OK && !op) s = pd_set_error(PD_ERR_MEMORY, "%s: out of memory", fn);
  if (s == PD_OK) s = pd_save_with_metadata(&sd, op, &meta);
  free(op);
  pd_string_map_free(&meta);
  pd_named_tensors_free(&params);
  pd_named_tensors_free(&sd);
  return s;
}

static int find_name(const pd_named_tensors *l, const char *name) {
  for (int i = 0; i < l->n; i++)
    if (strcmp(l->names[i], name) == 0) return i;
  return -1;
}

/* Renames the optimizer entries saved for another instance of the network
 * (accumulators are keyed by parameter tensor names) to this one's. */
static pd_status remap_optimizer_names(pd_model *m, pd_named_tensors *opt, const pd_string_map *meta) {
  pd_named_tensors params = {0};
  pd_status s = pd_layer_named_parameters(m->network, &params);
  for (int i = 0; s == PD_OK && i < opt->n; i++) {
    const char *key = opt->names[i];
    size_t best = 0;
    const char *repl = NULL;
    for (int k = 0; k < meta->n; k++) {
      if (strncmp(meta->keys[k], "param:", 6) != 0) continue;
      const char *old = meta->values[k];
      size_t ol = strlen(old);
      if (ol <= best || strncmp(key, old, ol) != 0 || key[ol] != '_') continue;
      int j = find_name(&params, meta->keys[k] + 6);
      const char *cur = j >= 0 ? pd_tensor_name(params.tensors[j]) : NULL;
      if (!cur) continue;
      best = ol;
      repl = cur;
    }
    if (!repl) {
      /* "master_weights.<name>" */
      continue;
    }
    char *nk = concat2(repl, key + best);
    if (!nk) {
      s = pd_set_error(PD_ERR_MEMORY, "pd_model_load: out of memory");
      break;
    }
    free(opt->names[i]);
    opt->names[i] = nk;
  }
  pd_named_tensors_free(&params);
  return s;
}

static char *shape_text(const pd_tensor *t, char *buf, size_t cap) {
  return pd_shape_str(pd_tensor_ndim(t), pd_tensor_shape(t), buf, cap);
}

pd_status pd_model_load(pd_model *m, const char *path, bool skip_mismatch, bool reset_optimizer) {
  const char *fn = "pd_model_load";
  if (!m || !path) return pd_set_error(PD_ERR_INVALID, "%s: %s is NULL", fn, m ? "path" : "model");
  char *base = strdup(path);
  if (!base) return pd_set_error(PD_ERR_MEMORY, "%s: out of memory", fn);
  size_t bl = strlen(base);
  if (bl > 9 && strcmp(base + bl - 9, ".pdparams") == 0) base[bl - 9] = 0;
  char *pp = concat2(base, ".pdparams"), *op = concat2(base, ".pdopt");
  free(base);
  pd_named_tensors file = {0}, sd = {0}, matched = {0}, missing = {0};
  pd_status s = pp && op ? PD_OK : pd_set_error(PD_ERR_MEMORY, "%s: out of memory", fn);
  if (s == PD_OK && pd_load(pp, &file) != PD_OK)
    s = pd_set_error(pd_last_status(), "%s: failed to load parameters from %s: %s", fn, pp, pd_last_error());
  if (s == PD_OK) s = pd_layer_state_dict(m->network, &sd);
  /* a name the file lacks is loaded under another of its names unless missing */
  if (s == PD_OK) s = pd_layer_match_state_dict(m->network, &file, &missing, NULL);
  if (s == PD_OK) {
    matched.names = calloc((size_t)sd.n + 1, sizeof(char *));
    matched.tensors = calloc((size_t)sd.n + 1, sizeof(pd_tensor *));
    if (!matched.names || !matched.tensors) s = pd_set_error(PD_ERR_MEMORY, "%s: out of memory", fn);
  }
  for (int i = 0; s == PD_OK && i < sd.n; i++) {
    int j = find_name(&file, sd.names[i]);
    char msg[512];
    if (j < 0 && find_name(&missing, sd.names[i]) < 0) continue;
    if (j < 0) {
      snprintf(msg, sizeof msg, "%s is not found in the providing file %s", sd.names[i], pp);
    } else if (pd_tensor_ndim(file.tensors[j]) != pd_tensor_ndim(sd.tensors[i]) ||
               memcmp(pd_tensor_shape(file.tensors[j]), pd_tensor_shape(sd.tensors[i]),
                      (size_t)pd_tensor_ndim(sd.tensors[i]) * sizeof(int64_t)) != 0) {
      char a[160], b[160];
      snprintf(msg, sizeof msg, "%s receives a shape %s, but the expected shape is %s", sd.names[i],
               shape_text(file.tensors[j], a, sizeof a), shape_text(sd.tensors[i], b, sizeof b));
    } else {
      matched.names[matched.n] = sd.names[i];
      matched.tensors[matched.n++] = file.tensors[j];
      continue;
    }
    if (skip_mismatch)
      fprintf(stderr, "Warning: Skip loading for %s. %s\n", sd.names[i], msg);
    else
      s = pd_set_error(PD_ERR_INVALID, "%s: %s", fn, msg);
  }
  if (s == PD_OK) s = pd_layer_set_state_dict(m->network, &matched, NULL, NULL);
  free(matched.names);
  free(matched.tensors);
  if (s == PD_OK && m->optimizer && !reset_optimizer && access(op, F_OK) == 0) {
    pd_named_tensors ost = {0};
    pd_string_map meta = {0};
    s = pd_load_with_metadata(op, &ost, &meta);
    if (s == PD_OK) s = remap_optimizer_names(m, &ost, &meta);
    if (s == PD_OK) s = pd_optimizer_set_state_dict(m->optimizer, &ost);
    pd_state_free(&ost);
    pd_string_map_free(&meta);
  }
  pd_named_tensors_free(&sd);
  pd_named_tensors_free(&missing);
  pd_state_free(&file);
  free(pp);
  free(op);
  return s;
}

pd_status pd_model_parameters(const pd_model *m, pd_named_tensors *out) {
  if (!m || !out) return pd_set_error(PD_ERR_INVALID, "pd_model_parameters: %s is NULL", m ? "out" : "model");
  return pd_layer_parameters(m->network, out);
}

char *pd_model_summary(pd_model *m, int n_inputs, const int *ndims, const int64_t *const *shapes,
                       const pd_dtype *dtypes, pd_summary_info *info) {
  if (!m) {
    pd_set_error(PD_ERR_INVALID, "pd_model_summary: model is NULL");
    return NULL;
  }
  int nd[MAX_SPECS];
  const int64_t *sh[MAX_SPECS];
  pd_dtype dt[MAX_SPECS];
  if (!shapes) {
    pd_model_state *st = m->st;
    if (!st->has_specs) {
      pd_set_error(PD_ERR_INVALID, "pd_model_summary: 'input_size' or the model's input specs must be set");
      return NULL;
    }
    n_inputs = st->n_inputs;
    for (int i = 0; i < n_inputs; i++) {
      nd[i] = st->inputs[i].ndim;
      sh[i] = st->inputs[i].shape;
      dt[i] = st->inputs[i].dtype ? st->inputs[i].dtype : PD_FLOAT32;
    }
    ndims = nd;
    shapes = sh;
    dtypes = dt;
  }
  char *text = pd_summary_string(m->network, n_inputs, ndims, shapes, dtypes, info);
  if (text) {
    fputs(text, stdout);
    fflush(stdout);
  }
  return text;
}
