/* paddle.Model: fit / evaluate / predict, callbacks, save / load, and the
 * ProgBarLogger's output to files and to a pseudo-terminal. */
#define _GNU_SOURCE /* posix_openpt, cfmakeraw */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include "test_util.h"

/* ---- helpers ---------------------------------------------------------------- */
static pd_io_dataset *regression_data(int n) {
  double *x = malloc(sizeof(double) * (size_t)n), *y = malloc(sizeof(double) * (size_t)n);
  for (int i = 0; i < n; i++) {
    x[i] = -1.0 + 2.0 * i / (n - 1);
    y[i] = 3.0 * x[i] + 2.0;
  }
  pd_tensor *t[2] = {pd_tensor_from_f64(x, PD_FLOAT32, 2, SHAPE(n, 1)),
                     pd_tensor_from_f64(y, PD_FLOAT32, 2, SHAPE(n, 1))};
  pd_io_dataset *ds = pd_io_tensor_dataset(t, 2);
  pd_tensor_release(t[0]);
  pd_tensor_release(t[1]);
  free(x);
  free(y);
  return ds;
}

static pd_tensor *first_param(pd_layer *l) {
  pd_named_tensors ps = {0};
  assert_int_equal(pd_layer_parameters(l, &ps), PD_OK);
  pd_tensor *t = ps.tensors[0];
  pd_named_tensors_free(&ps);
  return t;
}

/* Records the hook names and pd_memory_reserved at each epoch end. */
typedef struct recorder {
  pd_callback base;
  char seq[4096];
  size_t reserved[16];
  int epochs_seen;
  double *clock; /* advanced by 0.012 per batch when set */
} recorder;

static void rec_add(pd_callback *cb, const char *name, int64_t i) {
  recorder *r = (recorder *)cb;
  char item[64];
  snprintf(item, sizeof item, i >= 0 ? "%s:%lld " : "%s ", name, (long long)i);
  strncat(r->seq, item, sizeof r->seq - strlen(r->seq) - 1);
}
#define REC(name)                                                                \
  static pd_status rec_##name(pd_callback *cb, int64_t i, const pd_logs *logs) { \
    (void)logs;                                                                  \
    rec_add(cb, #name, i);                                                       \
    return PD_OK;                                                                \
  }
REC(on_train_begin)
REC(on_train_end)
REC(on_epoch_begin)
REC(on_train_batch_end)
REC(on_eval_begin)
REC(on_eval_end)
REC(on_eval_batch_begin)
REC(on_eval_batch_end)
static pd_status rec_on_train_batch_begin(pd_callback *cb, int64_t i, const pd_logs *logs) {
  (void)logs;
  rec_add(cb, "on_train_batch_begin", i);
  recorder *r = (recorder *)cb;
  if (r->clock) *r->clock += 0.012;
  return PD_OK;
}
static pd_status rec_on_epoch_end(pd_callback *cb, int64_t i, const pd_logs *logs) {
  recorder *r = (recorder *)cb;
  rec_add(cb, "on_epoch_end", i);
  assert_true(pd_logs_get(logs, "loss", &(double){0}));
  if (r->epochs_seen < 16) r->reserved[r->epochs_seen] = pd_memory_reserved();
  r->epochs_seen++;
  return PD_OK;
}
static pd_status rec_eval_clock(pd_callback *cb, int64_t i, const pd_logs *logs) {
  recorder *r = (recorder *)cb;
  rec_on_eval_batch_begin(cb, i, logs);
  if (r->clock) *r->clock += 0.012;
  return PD_OK;
}
static const pd_callback_fns recorder_fns = {
    .type_name = "Recorder",
    .on_train_begin = rec_on_train_begin,
    .on_train_end = rec_on_train_end,
    .on_epoch_begin = rec_on_epoch_begin,
    .on_epoch_end = rec_on_epoch_end,
    .on_train_batch_begin = rec_on_train_batch_begin,
    .on_train_batch_end = rec_on_train_batch_end,
    .on_eval_begin = rec_on_eval_begin,
    .on_eval_end = rec_on_eval_end,
    .on_eval_batch_begin = rec_eval_clock,
    .on_eval_batch_end = rec_on_eval_batch_end,
};

/* A loss whose value the test controls: train calls give train_value, eval
 * calls (grad disabled) give script[k] for the k-th evaluation epoch. */
typedef struct fake_loss {
  pd_layer base;
  double train_value;
  const double *script;
  int eval_calls, batches_per_eval;
} fake_loss;
static int fake_loss_forward(pd_layer *self, pd_tensor *const *in, int n_in, pd_tensor **out, int max_out) {
  (void)n_in, (void)max_out;
  fake_loss *f = (fake_loss *)self;
  double v = f->train_value;
  if (!pd_is_grad_enabled()) v = f->script ? f->script[f->eval_calls++ / f->batches_per_eval] : 0.25;
  out[0] = pd_scale(pd_mean(in[0], NULL, 0, false), 0.0, v, true);
  return out[0] ? 1 : pd_last_status();
}
static const pd_layer_type fake_loss_type = {.name = "FakeLoss", .forward = fake_loss_forward};

static pd_model *linear_model(int in, int out, pd_optimizer **opt, bool adam) {
  pd_layer *net = pd_nn_linear(in, out, NULL);
  pd_model *m = pd_model_new(net, NULL, 0, NULL, 0);
  pd_layer_release(net);
  pd_named_tensors ps = {0};
  pd_model_parameters(m, &ps);
  *opt =
      adam ? pd_optimizer_adam(0.05, ps.tensors, ps.n, NULL) : pd_optimizer_sgd(0.1, ps.tensors, ps.n, NULL);
  pd_named_tensors_free(&ps);
  return m;
}

/* ---- tests ---------------------------------------------------------------------- */
static void test_fit_regression(void **state) {
  (void)state;
  pd_seed(1);
  pd_io_dataset *ds = regression_data(64);
  pd_optimizer *opt;
  pd_model *m = linear_model(1, 1, &opt, false);
  pd_layer *mse = pd_nn_mse_loss(NULL);
  assert_int_equal(pd_model_prepare(m, opt, mse, NULL, 0), PD_OK);
  recorder *rec = pd_callback_new(sizeof *rec, &recorder_fns);
  pd_callback *cbs[1] = {&rec->base};
  pd_model_fit_opts fo = {.batch_size = 8, .epochs = 40, .quiet = true, .callbacks = cbs, .n_callbacks = 1};
  assert_int_equal(pd_model_fit(m, pd_model_dataset(ds), (pd_model_data){0}, &fo), PD_OK);
  /* steady state: no new memory after the first epochs */
  assert_int_equal(rec->epochs_seen, 40);
  for (int e = 2; e < 16; e++) assert_int_equal(rec->reserved[e], rec->reserved[1]);
  pd_model_eval_result r;
  pd_model_eval_opts eo = {.batch_size = 16, .quiet = true};
  assert_int_equal(pd_model_evaluate(m, pd_model_dataset(ds), &eo, &r), PD_OK);
  assert_int_equal(r.n, 1);
  assert_string_equal(r.names[0], "loss");
  assert_true(pd_model_eval_result_get(&r, "loss") < 1e-3);
  pd_model_eval_result_free(&r);
  pd_tensor *w = first_param(m->network);
  assert_true(fabs(pd_tensor_item(w) - 3.0) < 0.05);
  /* predict: stacked and per batch */
  pd_model_predict_result pr;
  pd_model_predict_opts po = {.batch_size = 10, .quiet = true, .stack_outputs = true};
  assert_int_equal(pd_model_predict(m, pd_model_dataset(ds), &po, &pr), PD_OK);
  assert_int_equal(pr.n_outputs, 1);
  expect_shape(pr.tensors[0], 2, SHAPE(64, 1));
  assert_true(fabs(pd_tensor_item_at(pr.tensors[0], 63) - 5.0) < 0.05);
  pd_model_predict_result_free(&pr);
  po.stack_outputs = false;
  assert_int_equal(pd_model_predict(m, pd_model_dataset(ds), &po, &pr), PD_OK);
  assert_int_equal(pr.n_batches, 7);
  expect_shape(pr.tensors[6], 2, SHAPE(4, 1));
  pd_model_predict_result_free(&pr);
  pd_callback_release(&rec->base);
  pd_layer_release(mse);
  pd_model_release(m);
  pd_optimizer_release(opt);
  pd_io_dataset_release(ds);
  expect_no_live_tensors();
}

static void test_fit_classifier_accuracy(void **state) {
  (void)state;
  pd_seed(7);
  int n = 200;
  pd_tensor *x = pd_randn(2, SHAPE(n, 2), PD_FLOAT32);
  int64_t *lab = malloc(sizeof(int64_t) * (size_t)n);
  for (int i = 0; i < n; i++) lab[i] = pd_tensor_item_at(x, 2 * i) + pd_tensor_item_at(x, 2 * i + 1) > 0;
  pd_tensor *y = pd_to_tensor(lab, PD_INT64, 2, SHAPE(n, 1));
  free(lab);
  pd_tensor *f[2] = {x, y};
  pd_io_dataset *ds = pd_io_tensor_dataset(f, 2);
  pd_optimizer *opt;
  pd_model *m = linear_model(2, 2, &opt, true);
  pd_layer *ce = pd_nn_cross_entropy_loss(NULL);
  pd_metric *acc = pd_metric_accuracy(NULL, 0, NULL);
  assert_string_equal(pd_metric_name(acc, 0), "acc");
  assert_int_equal(pd_model_prepare(m, opt, ce, &acc, 1), PD_OK);
  const char *names[4];
  assert_int_equal(pd_model_metrics_names(m, names, 4), 2);
  assert_string_equal(names[1], "acc");
  pd_model_fit_opts fo = {.batch_size = 20, .epochs = 15, .quiet = true};
  assert_int_equal(pd_model_fit(m, pd_model_dataset(ds), (pd_model_data){0}, &fo), PD_OK);
  pd_io_data_loader_opts lo = {.batch_size = 50};
  pd_io_loader *l = pd_io_data_loader(ds, &lo);
  pd_model_eval_result r;
  pd_model_eval_opts eo = {.quiet = true};
  assert_int_equal(pd_model_evaluate(m, pd_model_loader(l), &eo, &r), PD_OK);
  assert_true(pd_model_eval_result_get(&r, "acc") >= 0.95);
  assert_true(pd_model_eval_result_get(&r, "loss") < 0.5);
  pd_model_eval_result_free(&r);
  /* the batch functions */
  pd_model_batch_result br;
  pd_scope_begin();
  pd_tensor *xb = pd_slice(x, 1, SHAPE(0), SHAPE(0), SHAPE(10)),
            *yb = pd_slice(y, 1, SHAPE(0), SHAPE(0), SHAPE(10));
  assert_int_equal(pd_model_eval_batch(m, &xb, 1, &yb, 1, &br), PD_OK);
  assert_int_equal(br.n_values, 1);
  assert_true(br.values[0] >= 0.8);
  pd_tensor *out[2];
  assert_int_equal(pd_model_predict_batch(m, &xb, 1, out, 2), 1);
  expect_shape(out[0], 2, SHAPE(10, 2));
  assert_int_equal(pd_model_train_batch(m, &xb, 1, &yb, 1, true, &br), PD_OK);
  assert_true(isfinite(br.loss));
  pd_scope_end();
  pd_io_loader_release(l);
  pd_metric_release(acc);
  pd_layer_release(ce);
  pd_model_release(m);
  pd_optimizer_release(opt);
  pd_io_dataset_release(ds);
  pd_tensor_release(x);
  pd_tensor_release(y);
  expect_no_live_tensors();
}

static void test_callback_order(void **state) {
  (void)state;
  pd_io_dataset *train = regression_data(6), *eval = regression_data(4);
  pd_optimizer *opt;
  pd_model *m = linear_model(1, 1, &opt, false);
  pd_layer *mse = pd_nn_mse_loss(NULL);
  assert_int_equal(pd_model_prepare(m, opt, mse, NULL, 0), PD_OK);
  recorder *rec = pd_callback_new(sizeof *rec, &recorder_fns);
  pd_callback *cbs[1] = {&rec->base};
  pd_model_fit_opts fo = {.batch_size = 2, .epochs = 2, .quiet = true, .callbacks = cbs, .n_callbacks = 1};
  assert_int_equal(pd_model_fit(m, pd_model_dataset(train), pd_model_dataset(eval), &fo), PD_OK);
  const char *epoch =
      "on_train_batch_begin:0 on_train_batch_end:0 on_train_batch_begin:1 on_train_batch_end:1 "
      "on_train_batch_begin:2 on_train_batch_end:2 ";
  const char *ev =
      "on_eval_begin on_eval_batch_begin:0 on_eval_batch_end:0 on_eval_batch_begin:1 on_eval_batch_end:1 "
      "on_eval_end ";
  char want[4096];
  snprintf(
      want, sizeof want,
      "on_train_begin on_epoch_begin:0 %son_epoch_end:0 %son_epoch_begin:1 %son_epoch_end:1 %son_train_end ",
      epoch, ev, epoch, ev);
  assert_string_equal(rec->seq, want);
  pd_callback_release(&rec->base);
  /* the LRScheduler callback steps the optimizer's scheduler per batch */
  pd_lr_scheduler *s = pd_optimizer_lr_step_decay(0.1, 1, 0.5);
  pd_optimizer_set_lr_scheduler(opt, s);
  fo = (pd_model_fit_opts){.batch_size = 2, .quiet = true};
  assert_int_equal(pd_model_fit(m, pd_model_dataset(train), (pd_model_data){0}, &fo), PD_OK);
  assert_int_equal(pd_lr_last_epoch(s), 3);
  pd_callback *by_epoch = pd_callbacks_lr_scheduler(false, true);
  fo.callbacks = &by_epoch;
  fo.n_callbacks = 1;
  fo.epochs = 2;
  assert_int_equal(pd_model_fit(m, pd_model_dataset(train), (pd_model_data){0}, &fo), PD_OK);
  assert_int_equal(pd_lr_last_epoch(s), 5);
  assert_null(pd_callbacks_lr_scheduler(true, true));
  assert_non_null(strstr(pd_last_error(), "mutually exclusive"));
  pd_clear_error();
  pd_callback_release(by_epoch);
  pd_lr_release(s);
  pd_layer_release(mse);
  pd_model_release(m);
  pd_optimizer_release(opt);
  pd_io_dataset_release(train);
  pd_io_dataset_release(eval);
  expect_no_live_tensors();
}

static void test_early_stopping(void **state) {
  (void)state;
  pd_io_dataset *train = regression_data(4), *eval = regression_data(2);
  pd_optimizer *opt;
  pd_model *m = linear_model(1, 1, &opt, false);
  /* eval losses per epoch: best 5, 4, then 4.5 (wait 1), 4.2 (wait 2 > patience 1): stop after epoch 3 */
  static const double script[] = {5.0, 4.0, 4.5, 4.2, 4.1, 1.0, 1.0, 1.0, 1.0, 1.0};
  fake_loss *fl = pd_layer_new(sizeof *fl, &fake_loss_type);
  fl->train_value = 1.0;
  fl->script = script;
  fl->batches_per_eval = 1;
  assert_int_equal(pd_model_prepare(m, opt, &fl->base, NULL, 0), PD_OK);
  pd_callbacks_early_stopping_opts eso = {.patience = 1, .verbose = -1};
  pd_callback *es = pd_callbacks_early_stopping(&eso);
  recorder *rec = pd_callback_new(sizeof *rec, &recorder_fns);
  pd_callback *cbs[2] = {es, &rec->base};
  pd_model_fit_opts fo = {.batch_size = 2, .epochs = 10, .quiet = true, .callbacks = cbs, .n_callbacks = 2};
  assert_int_equal(pd_model_fit(m, pd_model_dataset(train), pd_model_dataset(eval), &fo), PD_OK);
  assert_int_equal(rec->epochs_seen, 4);
  assert_int_equal(pd_callbacks_early_stopping_stopped_epoch(es), 4);
  assert_true(m->stop_training);
  pd_callback_release(es);
  /* mode max with a baseline: nothing beats 10, so the first evaluation stops (patience 0) */
  fl->eval_calls = 0;
  rec->epochs_seen = 0;
  eso =
      (pd_callbacks_early_stopping_opts){.mode = "max", .has_baseline = true, .baseline = 10, .verbose = -1};
  es = pd_callbacks_early_stopping(&eso);
  cbs[0] = es;
  assert_int_equal(pd_model_fit(m, pd_model_dataset(train), pd_model_dataset(eval), &fo), PD_OK);
  assert_int_equal(rec->epochs_seen, 1);
  pd_callback_release(es);
  eso.mode = "median";
  assert_null(pd_callbacks_early_stopping(&eso));
  expect_error(NULL, "EarlyStopping", "median");
  pd_callback_release(&rec->base);
  pd_layer_release(&fl->base);
  pd_model_release(m);
  pd_optimizer_release(opt);
  pd_io_dataset_release(train);
  pd_io_dataset_release(eval);
  expect_no_live_tensors();
}

static bool file_exists(const char *dir, const char *leaf) {
  char p[1024];
  snprintf(p, sizeof p, "%s/%s", dir, leaf);
  return access(p, F_OK) == 0;
}

static bool same_params(pd_layer *a, pd_layer *b) {
  pd_named_tensors pa = {0}, pb = {0};
  pd_layer_parameters(a, &pa);
  pd_layer_parameters(b, &pb);
  bool same = pa.n == pb.n;
  for (int i = 0; same && i < pa.n; i++)
    same = pd_tensor_numel(pa.tensors[i]) == pd_tensor_numel(pb.tensors[i]) &&
           memcmp(pd_tensor_data(pa.tensors[i]), pd_tensor_data(pb.tensors[i]),
                  (size_t)pd_tensor_numel(pa.tensors[i]) * 4) == 0;
  pd_named_tensors_free(&pa);
  pd_named_tensors_free(&pb);
  return same;
}

static void test_checkpoint_and_resume(void **state) {
  (void)state;
  char dir[] = "/tmp/pd_model_XXXXXX";
  assert_non_null(mkdtemp(dir));
  char ckdir[600];
  snprintf(ckdir, sizeof ckdir, "%s/ck/sub", dir);
  pd_io_dataset *ds = regression_data(12);
  pd_seed(3);
  pd_optimizer *opt_a, *opt_b;
  pd_model *a = linear_model(1, 1, &opt_a, true);
  pd_model *b = linear_model(1, 1, &opt_b, true);
  pd_layer *mse = pd_nn_mse_loss(NULL);
  pd_model_prepare(a, opt_a, mse, NULL, 0);
  pd_model_prepare(b, opt_b, mse, NULL, 0);
  pd_model_fit_opts fo = {.batch_size = 4, .epochs = 2, .quiet = true, .no_shuffle = true, .save_dir = ckdir};
  assert_int_equal(pd_model_fit(a, pd_model_dataset(ds), (pd_model_data){0}, &fo), PD_OK);
  assert_true(file_exists(ckdir, "0.pdparams") && file_exists(ckdir, "0.pdopt"));
  assert_true(file_exists(ckdir, "1.pdparams") && file_exists(ckdir, "final.pdparams"));
  assert_true(file_exists(ckdir, "final.pdopt"));
  assert_false(same_params(a->network, b->network));
  char path[700];
  snprintf(path, sizeof path, "%s/final.pdparams", ckdir);
  assert_int_equal(pd_model_load(b, path, false, false), PD_OK);
  assert_true(same_params(a->network, b->network));
  /* both continue: bit-identical (parameters and Adam state restored) */
  fo.save_dir = NULL;
  fo.epochs = 1;
  assert_int_equal(pd_model_fit(a, pd_model_dataset(ds), (pd_model_data){0}, &fo), PD_OK);
  assert_int_equal(pd_model_fit(b, pd_model_dataset(ds), (pd_model_data){0}, &fo), PD_OK);
  assert_true(same_params(a->network, b->network));
  /* an explicit save / load round trip, and a reset optimizer diverges */
  snprintf(path, sizeof path, "%s/explicit/m", dir);
  assert_int_equal(pd_model_save(a, path, true), PD_OK);
  assert_int_equal(pd_model_load(b, path, false, true), PD_OK);
  assert_true(same_params(a->network, b->network));
  /* a mismatched network: error naming the entry, or skipped */
  pd_layer *wide = pd_nn_linear(2, 1, NULL);
  pd_model *c = pd_model_new(wide, NULL, 0, NULL, 0);
  assert_true(pd_model_load(c, path, false, false) < 0);
  expect_error(NULL, "weight", "[1, 1]");
  assert_int_equal(pd_model_load(c, path, true, false), PD_OK);
  snprintf(path, sizeof path, "%s/missing", dir);
  assert_true(pd_model_load(c, path, false, false) < 0);
  expect_error(NULL, "pd_model_load", "missing.pdparams");
  pd_model_release(c);
  pd_layer_release(wide);
  /* shared weights: a file naming each of an LSTM's tensors once (here by
   * its cell's names) loads; one without a tensor names it */
  pd_layer *lstm_a = pd_nn_lstm(2, 3, NULL), *lstm_b = pd_nn_lstm(2, 3, NULL);
  pd_named_tensors sd;
  assert_int_equal(pd_layer_state_dict(lstm_a, &sd), PD_OK);
  assert_int_equal(sd.n, 8);
  snprintf(path, sizeof path, "%s/lstm.pdparams", dir);
  pd_named_tensors cells = {4, sd.names + 4, sd.tensors + 4};
  assert_int_equal(pd_save(&cells, path), PD_OK);
  pd_model *d = pd_model_new(lstm_b, NULL, 0, NULL, 0);
  assert_false(same_params(lstm_a, lstm_b));
  assert_int_equal(pd_model_load(d, path, false, false), PD_OK);
  assert_true(same_params(lstm_a, lstm_b));
  cells.n = 3;
  assert_int_equal(pd_save(&cells, path), PD_OK);
  assert_true(pd_model_load(d, path, false, false) < 0);
  expect_error(NULL, "bias_hh_l0 is not found", NULL);
  pd_named_tensors_free(&sd);
  pd_model_release(d);
  pd_layer_release(lstm_a);
  pd_layer_release(lstm_b);
  pd_layer_release(mse);
  pd_model_release(a);
  pd_model_release(b);
  pd_optimizer_release(opt_a);
  pd_optimizer_release(opt_b);
  pd_io_dataset_release(ds);
  char cmd[700];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  assert_int_equal(system(cmd), 0);
  expect_no_live_tensors();
}

/* A user metric with identity compute: a constant tiny value. */
static pd_status tiny_update(pd_metric *m, pd_tensor *const *args, int n, double *batch) {
  (void)m, (void)args;
  assert_int_equal(n, 2); /* outputs + labels */
  batch[0] = 1e-4;
  return PD_OK;
}
static void tiny_accumulate(pd_metric *m, double *v) {
  (void)m;
  v[0] = 1e-4;
}
static void tiny_reset(pd_metric *m) { (void)m; }
static const pd_metric_fns tiny_fns = {
    .type_name = "Tiny", .update = tiny_update, .accumulate = tiny_accumulate, .reset = tiny_reset};

static double test_clock(void *user) { return *(double *)user; }

static const char k_banner[] =
    "The loss value printed in the log is the current step, and the metric is the average value of previous "
    "steps.\n";

/* One epoch of fit (batch size 1, each batch 12 ms by the test clock, train
 * loss 0.5, eval loss 0.25, the metric "tiny" 1e-4) logged to out every
 * log_freq steps. */
static void fit_logged(FILE *out, int verbose, int log_freq, pd_io_dataset *train, pd_io_dataset *eval) {
  pd_optimizer *opt;
  pd_model *m = linear_model(1, 1, &opt, false);
  fake_loss *fl = pd_layer_new(sizeof *fl, &fake_loss_type);
  fl->train_value = 0.5;
  const char *tn = "tiny";
  pd_metric *tiny = pd_metric_new(sizeof(pd_metric), &tiny_fns, 1, &tn);
  assert_int_equal(pd_model_prepare(m, opt, &fl->base, &tiny, 1), PD_OK);
  double now = 100.0;
  pd_callbacks_prog_bar_logger_opts po = {
      .log_freq = log_freq, .verbose = verbose, .out = out, .clock = test_clock, .clock_user = &now};
  pd_callback *pbl = pd_callbacks_prog_bar_logger(&po);
  assert_non_null(pbl);
  recorder *rec = pd_callback_new(sizeof *rec, &recorder_fns);
  rec->clock = &now;
  pd_callback *cbs[2] = {pbl, &rec->base};
  pd_model_fit_opts fo = {.batch_size = 1, .epochs = 1, .callbacks = cbs, .n_callbacks = 2};
  assert_int_equal(
      pd_model_fit(m, pd_model_dataset(train), eval ? pd_model_dataset(eval) : (pd_model_data){0}, &fo),
      PD_OK);
  pd_callback_release(pbl);
  pd_callback_release(&rec->base);
  pd_metric_release(tiny);
  pd_layer_release(&fl->base);
  pd_model_release(m);
  pd_optimizer_release(opt);
}

/* What was written to a temporary file, as a string; closes the file. */
static void read_and_close(FILE *f, char *buf, size_t cap) {
  rewind(f);
  size_t n = fread(buf, 1, cap - 1, f);
  buf[n] = 0;
  fclose(f);
}

static void test_prog_bar_logger_format(void **state) {
  (void)state;
  pd_io_dataset *train = regression_data(4), *eval = regression_data(2);
  FILE *f = tmpfile();
  fit_logged(f, 2, 2, train, eval);
  char got[2048];
  read_and_close(f, got, sizeof got);
  char want[1024];
  snprintf(want, sizeof want,
           "%sEpoch 1/1\n"
           "step 2/4 - loss: 0.5000 - tiny: 1.0000e-04 - 12ms/step\n"
           "step 4/4 - loss: 0.5000 - tiny: 1.0000e-04 - 12ms/step\n"
           "Eval begin...\n"
           "step 2/2 - loss: 0.2500 - tiny: 1.0000e-04 - 12ms/step\n"
           "Eval samples: 2\n",
           k_banner);
  assert_string_equal(got, want);
  pd_io_dataset_release(train);
  pd_io_dataset_release(eval);
  expect_no_live_tensors();
}

/* ---- ProgBarLogger verbose 1: the live bar on a terminal ---------------------------- */

/* The far side of a pseudo-terminal, read by a thread until the terminal
 * side is closed (read then fails with EIO). */
typedef struct pty_capture {
  int master;
  pthread_t reader;
  size_t n;
  bool overflow;
  char buf[32768];
} pty_capture;

static void *pty_drain(void *arg) {
  pty_capture *c = arg;
  char spill[4096];
  for (;;) { /* past a full buffer it keeps reading, so that the writer never blocks */
    bool full = c->n == sizeof c->buf - 1;
    ssize_t k = full ? read(c->master, spill, sizeof spill)
                     : read(c->master, c->buf + c->n, sizeof c->buf - 1 - c->n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) break;
    if (full)
      c->overflow = true;
    else
      c->n += (size_t)k;
  }
  c->buf[c->n] = 0;
  return NULL;
}

/* A terminal of `cols` columns in raw mode (bytes pass unchanged: no "\n" to
 * "\r\n"), as a stream for the logger. */
static FILE *pty_open(pty_capture *c, int cols) {
  c->n = 0;
  c->overflow = false;
  c->master = posix_openpt(O_RDWR | O_NOCTTY);
  assert_true(c->master >= 0);
  assert_int_equal(grantpt(c->master), 0);
  assert_int_equal(unlockpt(c->master), 0);
  int term = open(ptsname(c->master), O_RDWR | O_NOCTTY);
  assert_true(term >= 0);
  struct termios tio;
  assert_int_equal(tcgetattr(term, &tio), 0);
  cfmakeraw(&tio);
  assert_int_equal(tcsetattr(term, TCSANOW, &tio), 0);
  struct winsize ws = {.ws_row = 24, .ws_col = (unsigned short)cols};
  assert_int_equal(ioctl(c->master, TIOCSWINSZ, &ws), 0);
  assert_int_equal(pthread_create(&c->reader, NULL, pty_drain, c), 0);
  FILE *f = fdopen(term, "w");
  assert_non_null(f);
  return f;
}

/* Closes the terminal side; everything written to it. */
static const char *pty_close(pty_capture *c, FILE *f) {
  fclose(f);
  assert_int_equal(pthread_join(c->reader, NULL), 0);
  close(c->master);
  assert_false(c->overflow);
  return c->buf;
}

/* An iterable dataset of n regression samples: fit then knows no step count. */
static int stream_next(void *user, pd_tensor **out, int max_out) {
  int *left = user;
  assert_true(max_out >= 2);
  if (*left == 0) return 0;
  double x = (*left)--;
  out[0] = pd_tensor_from_f64(&x, PD_FLOAT32, 1, SHAPE(1));
  out[1] = pd_tensor_from_f64(&x, PD_FLOAT32, 1, SHAPE(1));
  return 2;
}
static pd_status stream_reset(void *user) {
  *(int *)user = 3;
  return PD_OK;
}

/* What Paddle's ProgressBar.update writes on a terminal to show `line`:
 * backspaces over the previous line, a carriage return, the line padded to
 * the previous width, and a newline when `end`. */
static void redraw(char *out, size_t cap, size_t *prev, const char *line, bool end) {
  size_t n = strlen(out), len = strlen(line);
  for (size_t i = 0; i < *prev && n + 1 < cap; i++) out[n++] = '\b';
  out[n] = 0;
  int pad = *prev > len ? (int)(*prev - len) : 0;
  snprintf(out + n, cap - n, "\r%s%*s%s", line, pad, "", end ? "\n" : "");
  *prev = len;
}

static void test_prog_bar_logger_terminal(void **state) {
  (void)state;
  char *columns = getenv("COLUMNS") ? strdup(getenv("COLUMNS")) : NULL;
  unsetenv("COLUMNS");
  pd_io_dataset *train = regression_data(4), *eval = regression_data(2);
  static pty_capture c;
  /* an 80-column terminal: the 30-column bar, redrawn at every step */
  FILE *f = pty_open(&c, 80);
  fit_logged(f, 1, 1, train, eval);
  const char *got = pty_close(&c, f);
  char want[8192];
  size_t prev = 0;
  snprintf(want, sizeof want, "%sEpoch 1/1\n", k_banner);
  redraw(want, sizeof want, &prev,
         "step 1/4 [======>.......................] - loss: 0.5000 - tiny: 1.0000e-04 - ETA: 0s - 12ms/step",
         false);
  redraw(want, sizeof want, &prev,
         "step 2/4 [==============>...............] - loss: 0.5000 - tiny: 1.0000e-04 - ETA: 0s - 12ms/step",
         false);
  redraw(want, sizeof want, &prev,
         "step 3/4 [=====================>........] - loss: 0.5000 - tiny: 1.0000e-04 - ETA: 0s - 12ms/step",
         false);
  redraw(want, sizeof want, &prev,
         "step 4/4 [==============================] - loss: 0.5000 - tiny: 1.0000e-04 - 12ms/step", true);
  prev = 0;
  strcat(want, "Eval begin...\n");
  redraw(want, sizeof want, &prev,
         "step 1/2 [==============>...............] - loss: 0.2500 - tiny: 1.0000e-04 - ETA: 0s - 12ms/step",
         false);
  redraw(want, sizeof want, &prev,
         "step 2/2 [==============================] - loss: 0.2500 - tiny: 1.0000e-04 - 12ms/step", true);
  strcat(want, "Eval samples: 2\n");
  assert_string_equal(got, want);
  /* the last train line: 10 blanks where " - ETA: 0s" was, then the newline */
  assert_non_null(strstr(got,
                         "4/4 [==============================] - loss: 0.5000 - tiny: 1.0000e-04 - "
                         "12ms/step          \nEval begin"));

  /* a 60-column terminal: a 10-column bar (min(60% of 60, 60 - 50)) */
  f = pty_open(&c, 60);
  fit_logged(f, 1, 1, train, NULL);
  got = pty_close(&c, f);
  assert_non_null(strstr(got, "\rstep 1/4 [=>........] - loss: 0.5000"));
  assert_non_null(strstr(got, "\rstep 4/4 [==========] - loss: 0.5000"));
  /* $COLUMNS wins over the terminal's width, as in shutil.get_terminal_size */
  setenv("COLUMNS", "70", 1);
  f = pty_open(&c, 60);
  fit_logged(f, 1, 1, train, NULL);
  got = pty_close(&c, f);
  assert_non_null(strstr(got, "\rstep 1/4 [====>...............] - loss"));
  /* under 51 columns the bar is empty, as Paddle's is */
  setenv("COLUMNS", "40", 1);
  f = pty_open(&c, 80);
  fit_logged(f, 1, 1, train, NULL);
  got = pty_close(&c, f);
  assert_non_null(strstr(got, "\rstep 1/4 [] - loss: 0.5000"));
  unsetenv("COLUMNS");

  /* an unknown number of steps (an iterable dataset): no bar, no ETA, a
   * newline after each line; nothing at the end of the epoch */
  int left = 3;
  pd_io_dataset *stream =
      pd_io_dataset_new(&(pd_io_dataset_fns){.next = stream_next, .reset = stream_reset}, &left);
  f = pty_open(&c, 80);
  fit_logged(f, 1, 1, stream, NULL);
  got = pty_close(&c, f);
  prev = 0;
  snprintf(want, sizeof want, "%sEpoch 1/1\n", k_banner);
  redraw(want, sizeof want, &prev, "step   1 - loss: 0.5000 - tiny: 1.0000e-04 - 12ms/step", true);
  redraw(want, sizeof want, &prev, "step   2 - loss: 0.5000 - tiny: 1.0000e-04 - 12ms/step", true);
  redraw(want, sizeof want, &prev, "step   3 - loss: 0.5000 - tiny: 1.0000e-04 - 12ms/step", true);
  assert_string_equal(got, want);
  pd_io_dataset_release(stream);

  /* verbose 1 on a file (not a terminal): plain lines, no bar, no ETA */
  FILE *plain = tmpfile();
  fit_logged(plain, 1, 1, train, eval);
  char text[4096];
  read_and_close(plain, text, sizeof text);
  snprintf(want, sizeof want,
           "%sEpoch 1/1\n"
           "step 1/4 - loss: 0.5000 - tiny: 1.0000e-04 - 12ms/step\n"
           "step 2/4 - loss: 0.5000 - tiny: 1.0000e-04 - 12ms/step\n"
           "step 3/4 - loss: 0.5000 - tiny: 1.0000e-04 - 12ms/step\n"
           "step 4/4 - loss: 0.5000 - tiny: 1.0000e-04 - 12ms/step\n"
           "Eval begin...\n"
           "step 1/2 - loss: 0.2500 - tiny: 1.0000e-04 - 12ms/step\n"
           "step 2/2 - loss: 0.2500 - tiny: 1.0000e-04 - 12ms/step\n"
           "Eval samples: 2\n",
           k_banner);
  assert_string_equal(text, want);

  if (columns) setenv("COLUMNS", columns, 1);
  free(columns);
  pd_io_dataset_release(train);
  pd_io_dataset_release(eval);
  expect_no_live_tensors();
}

static void test_bad_inputs(void **state) {
  (void)state;
  pd_io_dataset *ds = regression_data(4);
  pd_optimizer *opt;
  pd_model *m = linear_model(1, 1, &opt, false);
  pd_model_fit_opts fo = {.quiet = true};
  assert_true(pd_model_fit(m, pd_model_dataset(ds), (pd_model_data){0}, &fo) < 0);
  expect_error(NULL, "pd_model_fit", "pd_model_prepare");
  assert_true(pd_model_fit(NULL, pd_model_dataset(ds), (pd_model_data){0}, &fo) < 0);
  expect_error(NULL, "pd_model_fit", "NULL");
  pd_layer *mse = pd_nn_mse_loss(NULL);
  pd_model_prepare(m, opt, mse, NULL, 0);
  assert_true(pd_model_fit(m, (pd_model_data){0}, (pd_model_data){0}, &fo) < 0);
  expect_error(NULL, "pd_model_fit", "train_data");
  /* a model with one label spec given a dataset of three fields */
  pd_input_spec in = {.ndim = 2, .shape = {-1, 1}, .name = "x"},
                lab = {.ndim = 2, .shape = {-1, 1}, .name = "y"};
  pd_model *m2 = pd_model_new(m->network, &in, 1, &lab, 1);
  pd_model_prepare(m2, opt, mse, NULL, 0);
  pd_tensor *t = pd_ones(2, SHAPE(4, 1), PD_FLOAT32);
  pd_tensor *f3[3] = {t, t, t};
  pd_io_dataset *ds3 = pd_io_tensor_dataset(f3, 3);
  assert_true(pd_model_fit(m2, pd_model_dataset(ds3), (pd_model_data){0}, &fo) < 0);
  expect_error(NULL, "3 fields", "1 inputs + 1 labels");
  assert_true(pd_model_train_batch(m2, &t, 1, f3, 2, true, NULL) < 0);
  expect_error(NULL, "pd_model_train_batch", "2 labels");
  /* summary from the input specs */
  pd_summary_info info;
  char *s = pd_model_summary(m2, 0, NULL, NULL, NULL, &info);
  assert_non_null(s);
  assert_int_equal(info.total_params, 2);
  free(s);
  assert_null(pd_model_summary(m, 0, NULL, NULL, NULL, NULL));
  expect_error(NULL, "pd_model_summary", "input");
  /* eval without a prepared model */
  pd_model *m3 = pd_model_new(m->network, NULL, 0, NULL, 0);
  assert_true(pd_model_evaluate(m3, pd_model_dataset(ds), NULL, NULL) < 0);
  expect_error(NULL, "pd_model_evaluate", "pd_model_prepare");
  assert_true(pd_model_train_batch(m3, &t, 1, &t, 1, true, NULL) < 0);
  expect_error(NULL, "pd_model_train_batch", "pd_model_prepare");
  assert_null(pd_model_new(NULL, NULL, 0, NULL, 0));
  expect_error(NULL, "pd_model_new", "network");
  pd_model_release(m3);
  pd_tensor_release(t);
  pd_io_dataset_release(ds3);
  pd_model_release(m2);
  pd_layer_release(mse);
  pd_model_release(m);
  pd_optimizer_release(opt);
  pd_io_dataset_release(ds);
  expect_no_live_tensors();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fit_regression),           cmocka_unit_test(test_fit_classifier_accuracy),
      cmocka_unit_test(test_callback_order),           cmocka_unit_test(test_early_stopping),
      cmocka_unit_test(test_checkpoint_and_resume),    cmocka_unit_test(test_prog_bar_logger_format),
      cmocka_unit_test(test_prog_bar_logger_terminal), cmocka_unit_test(test_bad_inputs),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
