/* The high-level API: paddle.Model (prepare, fit, evaluate, predict, save,
 * load), paddle.metric and paddle.callbacks. */
#ifndef PADDLEC_MODEL_H
#define PADDLEC_MODEL_H

#include "paddlec/core.h"
#include "paddlec/export.h"
#include "paddlec/io.h"
#include "paddlec/nn.h"
#include "paddlec/optim.h"
#include "paddlec/summary.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ==== paddle.Model, paddle.metric, paddle.callbacks ========================
 *
 * A Model wraps a network with an optimizer, a loss and metrics (prepare), and
 * runs Paddle's training loop (fit), evaluation and prediction over datasets
 * or DataLoaders, calling callbacks at Paddle's points:
 *
 *   on_train_begin
 *   for each epoch: on_epoch_begin, per batch on_train_batch_begin/end, on_epoch_end,
 *     then (when eval data is given and epoch % eval_freq == 0) on_eval_begin,
 *     per batch on_eval_batch_begin/end, on_eval_end; stop when stop_training
 *   on_train_end
 *
 * A batch's first n_inputs fields are the network's inputs, the rest its
 * labels (n_inputs is the number of input specs given to pd_model_new, 1 when
 * none). Every step runs in a scope of its own: a steady-state epoch creates
 * no tensor memory beyond the first one's. Metrics are reset at the end of
 * every pass over the data. */

#define PD_MODEL_MAX_VALUES 32 /* loss plus metric values */
#define PD_MODEL_MAX_OUTPUTS 16

/* paddle.static.InputSpec: shape (-1 for an unknown dim), dtype (0 = float32), name. */
typedef struct pd_input_spec {
  int ndim;
  int64_t shape[PD_MAX_DIMS];
  pd_dtype dtype;
  const char *name;
} pd_input_spec;

/* The `logs` Paddle hands callbacks: "loss" (when a loss is set) then the
 * metric values, by name; step (-1 outside batch hooks), batch_size, and the
 * number of steps of the run (-1 when unknown). */
typedef struct pd_logs {
  int n;
  const char *const *names;
  const double *values;
  int64_t step, batch_size, steps;
} pd_logs;
/* logs[name] into *value; false when absent. */
PD_API bool pd_logs_get(const pd_logs *logs, const char *name, double *value);

/* ---- metrics (paddle.metric) ---------------------------------------------
 * A metric is a struct whose first member is a pd_metric (like layers). The
 * model calls, per batch: compute(network outputs..., labels...) inside the
 * step's scope, then update(what compute returned); accumulate() gives the
 * running values, one per name; reset() at the end of every pass. */
typedef struct pd_metric pd_metric;
typedef struct pd_metric_fns {
  const char *type_name; /* "Accuracy" */
  /* Tensors to pass to update (ops' outputs, owned like any op result);
   * returns their count or a negative status. NULL: identity. */
  int (*compute)(pd_metric *m, pd_tensor *const *args, int n_args, pd_tensor **out, int max_out);
  /* Accumulates a batch; writes the batch's own values (n_names of them) to
   * batch_values. */
  pd_status (*update)(pd_metric *m, pd_tensor *const *args, int n_args, double *batch_values);
  /* The running values (n_names of them). */
  void (*accumulate)(pd_metric *m, double *values);
  void (*reset)(pd_metric *m);
  void (*destroy)(pd_metric *m); /* optional: frees what the subtype added */
} pd_metric_fns;
#define PD_METRIC_MAX_NAMES 16
struct pd_metric {
  const pd_metric_fns *fns;
  int n_names;
  char names[PD_METRIC_MAX_NAMES][64];
  int refcount;
};
/* A zeroed metric of `size` bytes (>= sizeof(pd_metric)) with the given
 * names (1 to PD_METRIC_MAX_NAMES), reset; refcount 1. */
PD_API void *pd_metric_new(size_t size, const pd_metric_fns *fns, int n_names, const char *const *names);
PD_API pd_metric *pd_metric_retain(pd_metric *m);
PD_API void pd_metric_release(pd_metric *m); /* NULL is a no-op */
/* metric.name(): name i (0 <= i < n_names). */
PD_API const char *pd_metric_name(const pd_metric *m, int i);
PD_API int pd_metric_compute(pd_metric *m, pd_tensor *const *args, int n_args, pd_tensor **out, int max_out);
PD_API pd_status pd_metric_update(pd_metric *m, pd_tensor *const *args, int n_args, double *batch_values);
/* Writes n_names values; returns n_names. */
PD_API int pd_metric_accumulate(pd_metric *m, double *values);
PD_API void pd_metric_reset(pd_metric *m);

/* paddle.metric.Accuracy(topk, name): topk NULL = {1}. compute(pred [.., C],
 * label [.., 1] or [N] or one-hot [.., C]) gives a float32 [.., maxk] tensor
 * of hits of the maxk best classes (equal scores rank by lower class index);
 * update/accumulate give the top-k accuracy for each k. Names: name (NULL:
 * "acc") when maxk is 1, else "<name>_top<k>" per k. */
PD_API pd_metric *pd_metric_accuracy(const int *topk, int n_topk, const char *name);
/* paddle.metric.Precision / Recall (binary): update(preds [N] or [N, 1]
 * probabilities, labels [N] or [N, 1] of 0/1); a prediction is 1 when
 * floor(p + 0.5) == 1. Names: name (NULL: "precision" / "recall"). The
 * value is 0 when nothing is predicted (labelled) positive. */
PD_API pd_metric *pd_metric_precision(const char *name);
PD_API pd_metric *pd_metric_recall(const char *name);
/* paddle.metric.Auc(curve="ROC", num_thresholds): update(preds [N, 2]
 * probabilities (column 1 is the positive class), labels [N] or [N, 1]);
 * predictions go into num_thresholds + 1 buckets (int(p * num_thresholds))
 * and the ROC area is the trapezoid sum over buckets from the top, as Paddle
 * computes it. num_thresholds 0 = 4095; curve NULL = "ROC" (the only one).
 * Name: name (NULL: "auc"). */
PD_API pd_metric *pd_metric_auc(const char *curve, int num_thresholds, const char *name);

/* ---- the model ----------------------------------------------------------- */
typedef struct pd_model_state pd_model_state;
/* paddle.Model. The public fields may be read; stop_training may be set
 * (by callbacks) to end fit after the current epoch's evaluation. */
typedef struct pd_model {
  pd_layer *network;       /* retained */
  pd_optimizer *optimizer; /* borrowed: keep it alive while the model uses it */
  pd_layer *loss;          /* retained; NULL when none */
  bool stop_training;
  pd_model_state *st;
} pd_model;

/* Data for fit / evaluate / predict: a dataset (a DataLoader is built with
 * the call's batch_size, shuffle, drop_last, num_workers) or a ready loader.
 * All-zero: none. */
typedef struct pd_model_data {
  pd_io_dataset *dataset;
  pd_io_loader *loader;
} pd_model_data;
static inline pd_model_data pd_model_dataset(pd_io_dataset *ds) { return (pd_model_data){ds, NULL}; }
static inline pd_model_data pd_model_loader(pd_io_loader *l) { return (pd_model_data){NULL, l}; }

/* ---- callbacks (paddle.callbacks) ----------------------------------------
 * A callback is a struct whose first member is a pd_callback. Every hook is
 * optional; `index` is the epoch (epoch hooks), the step (batch hooks) or -1.
 * A hook returning a negative status ends the run with that status. */
typedef struct pd_callback pd_callback;
typedef pd_status (*pd_callback_hook)(pd_callback *cb, int64_t index, const pd_logs *logs);
typedef struct pd_callback_fns {
  const char *type_name;
  pd_callback_hook on_train_begin, on_train_end, on_epoch_begin, on_epoch_end;
  pd_callback_hook on_train_batch_begin, on_train_batch_end;
  pd_callback_hook on_eval_begin, on_eval_end, on_eval_batch_begin, on_eval_batch_end;
  pd_callback_hook on_predict_begin, on_predict_end, on_predict_batch_begin, on_predict_batch_end;
  void (*destroy)(pd_callback *cb); /* optional */
} pd_callback_fns;
/* What set_params gives callbacks (valid during the run). */
typedef struct pd_callback_params {
  int epochs;    /* fit's epochs; 0 outside fit */
  int64_t steps; /* train steps per epoch (-1 unknown) */
  int verbose;
  int n_metrics; /* "loss" and the metric names */
  const char *const *metrics;
  const char *save_dir;
} pd_callback_params;
struct pd_callback {
  const pd_callback_fns *fns;
  pd_model *model; /* set by the run (set_model) */
  pd_callback_params params;
  int refcount;
};
/* A zeroed callback of `size` bytes (>= sizeof(pd_callback)); refcount 1. */
PD_API void *pd_callback_new(size_t size, const pd_callback_fns *fns);
PD_API pd_callback *pd_callback_retain(pd_callback *cb);
PD_API void pd_callback_release(pd_callback *cb); /* NULL is a no-op */

/* paddle.callbacks.ProgBarLogger(log_freq, verbose). verbose 1: when `out`
 * is a terminal (isatty of its descriptor), a live bar redrawn in place
 *   step  10/100 [==>...........................] - loss: 0.1234 - acc: 0.9000 - ETA: 3s - 12ms/step
 * drawn as Paddle's ProgressBar draws it: backspaces over the last line, a
 * carriage return, the new line padded with spaces to the old one's width,
 * and a newline once the bar is full (after every line when the number of
 * steps is unknown, which drops the bar: "step   3 - loss: ..."). The bar is
 * 30 columns, fewer on a terminal narrower than 80 ($COLUMNS, else the
 * terminal's width: min(60%, width - 50)). Elsewhere verbose 1 prints one
 * plain line every log_freq steps; verbose 2 (or 3): the line
 *   step  10/100 - loss: 0.1234 - acc: 0.9000 - 12ms/step
 * every log_freq steps and at the end of each epoch / evaluation. Values
 * above 1e-3 print as %.4f, others as %.4e; the speed is the time since the
 * epoch began per step, in s, ms or us. Also prints "Epoch 1/2",
 * "Eval begin...", "Eval samples: N", "Predict begin...", "Predict samples: N". */
typedef struct pd_callbacks_prog_bar_logger_opts {
  int log_freq; /* 0 = 1 */
  int verbose;  /* 0 = 2 */
  FILE *out;    /* where it prints (any stream: a file, a pipe, a terminal); NULL: stdout */
  /* seconds from any fixed origin (NULL: a monotonic clock) */
  double (*clock)(void *user);
  void *clock_user;
} pd_callbacks_prog_bar_logger_opts;
PD_API pd_callback *pd_callbacks_prog_bar_logger(const pd_callbacks_prog_bar_logger_opts *opts);
/* paddle.callbacks.ModelCheckpoint(save_freq, save_dir): saves
 * "<save_dir>/<epoch>" at the end of every epoch with epoch % save_freq == 0
 * and "<save_dir>/final" at the end of training (pd_model_save). save_freq
 * 0 = 1; save_dir NULL: nothing is saved (fit sets it from its save_dir). */
PD_API pd_callback *pd_callbacks_model_checkpoint(int save_freq, const char *save_dir);
/* paddle.callbacks.EarlyStopping: at the end of each evaluation, compares
 * logs[monitor] - min_delta (+ for max) with the best value; no improvement
 * for more than `patience` evaluations sets model->stop_training. With
 * save_best_model and fit's save_dir, improvements are saved to
 * "<save_dir>/best_model". */
typedef struct pd_callbacks_early_stopping_opts {
  const char *monitor; /* NULL: "loss" */
  const char *mode;    /* "auto" (NULL), "min" or "max"; auto means max for names containing "acc" */
  int patience;
  int verbose; /* 0 = 1; -1: silent */
  double min_delta;
  bool has_baseline;
  double baseline;
  bool no_save_best_model; /* save_best_model=False */
} pd_callbacks_early_stopping_opts;
PD_API pd_callback *pd_callbacks_early_stopping(const pd_callbacks_early_stopping_opts *opts);
/* Epochs evaluated so far by an EarlyStopping callback (its stopped_epoch), -1 for other callbacks. */
PD_API int pd_callbacks_early_stopping_stopped_epoch(const pd_callback *cb);
/* paddle.callbacks.LRScheduler(by_step, by_epoch): steps the optimizer's
 * scheduler after every train batch (by_step) or epoch (by_epoch); both is
 * an error. Nothing happens when the optimizer has no scheduler. */
PD_API pd_callback *pd_callbacks_lr_scheduler(bool by_step, bool by_epoch);

/* ---- the model API ---------------------------------------------------- */
/* paddle.Model(network, inputs, labels): inputs/labels may be NULL (1 input;
 * every other field a label). With labels given, a batch must have exactly
 * n_inputs + n_labels fields. The network is retained. */
PD_API pd_model *pd_model_new(pd_layer *network, const pd_input_spec *inputs, int n_inputs,
                              const pd_input_spec *labels, int n_labels);
/* Releases the model's references and frees it. NULL is a no-op. */
PD_API void pd_model_release(pd_model *m);
/* prepare(optimizer, loss, metrics): all may be NULL (no training / no loss).
 * The loss layer is called as loss(outputs..., labels...); its outputs are
 * summed into the loss that is minimised. Metrics are retained. */
PD_API pd_status pd_model_prepare(pd_model *m, pd_optimizer *optimizer, pd_layer *loss,
                                  pd_metric *const *metrics, int n_metrics);
/* The names of the logged values: "loss" (with a loss) then the metrics'. */
PD_API int pd_model_metrics_names(const pd_model *m, const char **names, int max);

typedef struct pd_model_fit_opts {
  int64_t batch_size; /* 0 = 1 */
  int epochs;         /* 0 = 1 */
  int eval_freq;      /* 0 = 1 */
  int log_freq;       /* 0 = 10 */
  const char *save_dir;
  int save_freq; /* 0 = 1 */
  int verbose;   /* 0 = 2 (Paddle's default); 1 = progress bar */
  bool quiet;    /* Paddle's verbose=0: no ProgBarLogger */
  bool drop_last;
  bool no_shuffle; /* shuffle=False */
  int num_workers;
  pd_callback *const *callbacks;
  int n_callbacks;
  FILE *log_file; /* the default ProgBarLogger's output (NULL: stdout) */
} pd_model_fit_opts;
/* model.fit(train_data, eval_data, ...): eval_data may be all-zero. Default
 * callbacks as Paddle's config_callbacks: a ProgBarLogger first unless one
 * is given or quiet, a ModelCheckpoint(save_freq, save_dir) and an
 * LRScheduler() unless given; EarlyStopping callbacks get save_dir. */
PD_API pd_status pd_model_fit(pd_model *m, pd_model_data train_data, pd_model_data eval_data,
                              const pd_model_fit_opts *opts);

typedef struct pd_model_eval_opts {
  int64_t batch_size; /* 0 = 1 */
  int log_freq;       /* 0 = 10 */
  int verbose;        /* 0 = 2 */
  bool quiet;
  int num_workers;
  pd_callback *const *callbacks;
  int n_callbacks;
  FILE *log_file;
} pd_model_eval_opts;
/* evaluate()'s dict: "loss" and the metric values by name. */
typedef struct pd_model_eval_result {
  int n;
  char **names;
  double *values;
} pd_model_eval_result;
/* result[name]; NAN when absent. */
PD_API double pd_model_eval_result_get(const pd_model_eval_result *r, const char *name);
PD_API void pd_model_eval_result_free(pd_model_eval_result *r);
/* model.evaluate(eval_data, ...): *result gets the last logs' values. */
PD_API pd_status pd_model_evaluate(pd_model *m, pd_model_data eval_data, const pd_model_eval_opts *opts,
                                   pd_model_eval_result *result);

typedef struct pd_model_predict_opts {
  int64_t batch_size; /* 0 = 1 */
  int num_workers;
  bool stack_outputs;
  int verbose; /* 0 = 1 (Paddle's default for predict) */
  bool quiet;
  pd_callback *const *callbacks;
  int n_callbacks;
  FILE *log_file;
} pd_model_predict_opts;
/* predict()'s outputs: n_outputs lists of n_batches tensors; tensors[o *
 * n_batches + b] is output o of batch b. With stack_outputs each list is one
 * tensor (n_batches 1), the batches concatenated along dim 0. The result
 * owns one reference to each tensor (not tracked by scopes). */
typedef struct pd_model_predict_result {
  int n_outputs;
  int64_t n_batches;
  pd_tensor **tensors;
} pd_model_predict_result;
PD_API void pd_model_predict_result_free(pd_model_predict_result *r);
/* model.predict(test_data, ...): every field of a batch up to n_inputs is an input. */
PD_API pd_status pd_model_predict(pd_model *m, pd_model_data test_data, const pd_model_predict_opts *opts,
                                  pd_model_predict_result *result);

/* What train_batch / eval_batch return: the loss (NAN without one) and each
 * metric's per-batch values (from update), in pd_model_metrics_names order
 * after "loss". */
typedef struct pd_model_batch_result {
  double loss;
  int n_values;
  double values[PD_MODEL_MAX_VALUES];
} pd_model_batch_result;
/* train_batch(inputs, labels, update): forward, loss, backward; with update
 * an optimizer step and cleared gradients. res may be NULL. */
PD_API pd_status pd_model_train_batch(pd_model *m, pd_tensor *const *inputs, int n_inputs,
                                      pd_tensor *const *labels, int n_labels, bool update,
                                      pd_model_batch_result *res);
/* eval_batch(inputs, labels): eval mode, no grad. */
PD_API pd_status pd_model_eval_batch(pd_model *m, pd_tensor *const *inputs, int n_inputs,
                                     pd_tensor *const *labels, int n_labels, pd_model_batch_result *res);
/* predict_batch(inputs): the network's outputs (owned like op results);
 * returns their count or a negative status. */
PD_API int pd_model_predict_batch(pd_model *m, pd_tensor *const *inputs, int n_inputs, pd_tensor **out,
                                  int max_out);

/* model.save(path, training): "<path>.pdparams" (the network's state_dict)
 * and, with training and an optimizer, "<path>.pdopt" (its state_dict), both
 * safetensors; the directory of path is created when missing. */
PD_API pd_status pd_model_save(pd_model *m, const char *path, bool training);
/* model.load(path, skip_mismatch, reset_optimizer): path may end in
 * ".pdparams". Every state_dict entry must be in the file with its shape;
 * with skip_mismatch the others are skipped with a warning on stderr. The
 * optimizer state is loaded from "<path>.pdopt" when it exists, the
 * optimizer is set and not reset_optimizer. */
PD_API pd_status pd_model_load(pd_model *m, const char *path, bool skip_mismatch, bool reset_optimizer);
/* model.parameters(): the network's parameters (borrowed). */
PD_API pd_status pd_model_parameters(const pd_model *m, pd_named_tensors *out);
/* model.summary(input_size, dtype): input_size NULL uses the input specs
 * (-1 dims become 1). Returns the table string (malloc'ed; also printed to
 * stdout) or NULL. */
PD_API char *pd_model_summary(pd_model *m, int n_inputs, const int *ndims, const int64_t *const *shapes,
                              const pd_dtype *dtypes, pd_summary_info *info);

/* Deprecated names, kept for one release (docs/architecture.md, "Names"). */
#define pd_model_free pd_model_release

#ifdef __cplusplus
}
#endif
#endif
