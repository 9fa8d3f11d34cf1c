/* paddle.callbacks: the callback base, ProgBarLogger, ModelCheckpoint,
 * EarlyStopping and LRScheduler. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "hapi_internal.h"

void *pd_callback_new(size_t size, const pd_callback_fns *fns) {
  if (!fns || size < sizeof(pd_callback)) {
    pd_set_error(PD_ERR_INVALID, "pd_callback_new: fns required and size >= %zu", sizeof(pd_callback));
    return NULL;
  }
  pd_callback *cb = calloc(1, size);
  if (!cb) {
    pd_set_error(PD_ERR_MEMORY, "pd_callback_new: out of memory");
    return NULL;
  }
  cb->fns = fns;
  cb->refcount = 1;
  return cb;
}

pd_callback *pd_callback_retain(pd_callback *cb) {
  if (cb) cb->refcount++;
  return cb;
}

void pd_callback_release(pd_callback *cb) {
  if (!cb || --cb->refcount > 0) return;
  if (cb->fns->destroy) cb->fns->destroy(cb);
  free(cb);
}

bool pd_logs_get(const pd_logs *logs, const char *name, double *value) {
  if (!logs || !name || !logs->values) return false;
  for (int i = 0; i < logs->n; i++)
    if (logs->names[i] && strcmp(logs->names[i], name) == 0) {
      if (value) *value = logs->values[i];
      return true;
    }
  return false;
}

/* ---- ProgBarLogger ------------------------------------------------------- */
typedef struct progbar {
  int64_t num; /* -1: unknown */
  double start;
  int width;       /* of the bar between [ and ] */
  int total_width; /* of the last line drawn */
  bool open;       /* the cursor is at the end of a drawn line */
} progbar;

typedef struct prog_bar_logger {
  pd_callback base;
  int log_freq, verbose;
  FILE *out;
  double (*clock)(void *);
  void *clock_user;
  bool dynamic;
  /* per mode: 0 train, 1 eval, 2 predict */
  progbar bar[3];
  int64_t step[3], samples[3];
  int n_metrics[3];
  const char *const *metrics[3];
} prog_bar_logger;

static double monotonic_clock(void *user) {
  (void)user;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double pbl_now(prog_bar_logger *p) { return p->clock(p->clock_user); }

/* ProgressBar._get_max_width: 30 columns, less on a terminal narrower than
 * 80 (at most 60% of it and 50 short of it). The width is $COLUMNS, else
 * the terminal's, else 80 (shutil.get_terminal_size). */
static int bar_width(FILE *out) {
  int cols = 0;
  const char *env = getenv("COLUMNS");
  if (env && *env) {
    char *end;
    long v = strtol(env, &end, 10);
    if (*end == 0 && v > 0 && v < 100000) cols = (int)v;
  }
  struct winsize ws;
  int fd = fileno(out);
  if (cols == 0 && fd >= 0 && ioctl(fd, TIOCGWINSZ, &ws) == 0) cols = ws.ws_col;
  if (cols <= 0) cols = 80;
  int max_width = (int)(cols * 0.6) < cols - 50 ? (int)(cols * 0.6) : cols - 50;
  int width = max_width < 30 ? max_width : 30;
  return width > 0 ? width : 0; /* Python's bar is "[]" for any width <= 0 */
}

static void progbar_start(prog_bar_logger *p, int mode, int64_t num) {
  p->bar[mode].num = num;
  p->bar[mode].start = pbl_now(p);
  p->bar[mode].width = p->dynamic ? bar_width(p->out) : 30;
  p->bar[mode].total_width = 0;
  p->bar[mode].open = false;
}

static int append(char *buf, size_t cap, int len, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int append(char *buf, size_t cap, int len, const char *fmt, ...) {
  if (len < 0 || (size_t)len >= cap) return len;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf + len, cap - (size_t)len, fmt, ap);
  va_end(ap);
  return n < 0 ? len : (size_t)(len + n) >= cap ? (int)cap - 1 : len + n;
}

static int num_digits(int64_t n) {
  int d = 1;
  while (n >= 10) n /= 10, d++;
  return d;
}

/* ProgressBar.update(current, values). */
static void progbar_update(prog_bar_logger *p, int mode, int64_t current, const pd_logs *logs) {
  progbar *b = &p->bar[mode];
  double now = pbl_now(p);
  double tpu = current ? (now - b->start) / (double)current : 0.0;
  char fps[64];
  if (tpu >= 1 || tpu == 0)
    snprintf(fps, sizeof fps, " - %.0fs/step", tpu);
  else if (tpu >= 1e-3)
    snprintf(fps, sizeof fps, " - %.0fms/step", tpu * 1e3);
  else
    snprintf(fps, sizeof fps, " - %.0fus/step", tpu * 1e6);
  char info[2048];
  int len = 0;
  for (int i = 0; i < p->n_metrics[mode]; i++) {
    double v;
    if (!pd_logs_get(logs, p->metrics[mode][i], &v)) continue;
    len = append(info, sizeof info, len, " - %s:", p->metrics[mode][i]);
    len = fabs(v) > 1e-3 ? append(info, sizeof info, len, " %.4f", v)
                         : append(info, sizeof info, len, " %.4e", v);
  }
  info[len] = 0;
  char line[4096];
  int n = 0;
  bool bar = p->verbose == 1 && p->dynamic;
  if (b->num >= 0 && b->num > 0)
    n = append(line, sizeof line, n, "step %*lld/%lld", num_digits(b->num), (long long)current,
               (long long)b->num);
  else
    n = append(line, sizeof line, n, "step %3lld", (long long)current);
  if (bar && b->num > 0) {
    const int width = b->width;
    int prog_width = (int)(width * ((double)current / (double)b->num));
    if (prog_width > width) prog_width = width;
    n = append(line, sizeof line, n, " [");
    for (int i = 0; i < prog_width - 1; i++) n = append(line, sizeof line, n, "=");
    if (prog_width > 0) n = append(line, sizeof line, n, current < b->num ? ">" : "=");
    for (int i = prog_width; i < width; i++) n = append(line, sizeof line, n, ".");
    n = append(line, sizeof line, n, "]");
  }
  n = append(line, sizeof line, n, "%s", info);
  if (bar && b->num > 0 && current < b->num) {
    double eta = tpu * (double)(b->num - current);
    long e = (long)eta;
    if (eta > 3600)
      n = append(line, sizeof line, n, " - ETA: %ld:%02ld:%02ld", e / 3600, (e % 3600) / 60, e % 60);
    else if (eta > 60)
      n = append(line, sizeof line, n, " - ETA: %ld:%02ld", e / 60, e % 60);
    else
      n = append(line, sizeof line, n, " - ETA: %lds", e);
  }
  n = append(line, sizeof line, n, "%s", fps);
  if (bar) {
    /* as Paddle draws it: back over the last line, to its start, the new
     * line padded to the old one's width; a newline once the bar is full,
     * and after every line when the number of steps is unknown */
    for (int i = 0; i < b->total_width; i++) fputc('\b', p->out);
    int pad = b->total_width > n ? b->total_width - n : 0;
    fprintf(p->out, "\r%s%*s", line, pad, "");
    b->total_width = n;
    b->open = true;
    if (b->num <= 0 || current >= b->num) {
      fputc('\n', p->out);
      b->open = false;
    }
  } else {
    fprintf(p->out, "%s\n", line);
  }
  fflush(p->out);
}

static bool pbl_print(const prog_bar_logger *p) { return p->verbose > 0; }

static void pbl_newline_if_open(prog_bar_logger *p, int mode) {
  if (p->bar[mode].open) {
    fputc('\n', p->out);
    p->bar[mode].open = false;
  }
}

static pd_status pbl_train_begin(pd_callback *cb, int64_t index, const pd_logs *logs) {
  (void)index, (void)logs;
  prog_bar_logger *p = (prog_bar_logger *)cb;
  p->n_metrics[0] = cb->params.n_metrics;
  p->metrics[0] = cb->params.metrics;
  if (pbl_print(p))
    fprintf(p->out,
            "The loss value printed in the log is the current step, and the metric is the average value of "
            "previous steps.\n");
  return PD_OK;
}

static pd_status pbl_epoch_begin(pd_callback *cb, int64_t epoch, const pd_logs *logs) {
  (void)logs;
  prog_bar_logger *p = (prog_bar_logger *)cb;
  p->step[0] = 0;
  if (cb->params.epochs && pbl_print(p))
    fprintf(p->out, "Epoch %lld/%d\n", (long long)epoch + 1, cb->params.epochs);
  progbar_start(p, 0, cb->params.steps);
  return PD_OK;
}

static void pbl_batch_end(prog_bar_logger *p, int mode, const pd_logs *logs) {
  p->step[mode]++;
  p->samples[mode] += logs ? logs->batch_size : 1;
  if (pbl_print(p) && p->step[mode] % p->log_freq == 0 &&
      (p->bar[mode].num < 0 || p->step[mode] < p->bar[mode].num))
    progbar_update(p, mode, p->step[mode], logs);
}

static pd_status pbl_train_batch_end(pd_callback *cb, int64_t step, const pd_logs *logs) {
  (void)step;
  pbl_batch_end((prog_bar_logger *)cb, 0, logs);
  return PD_OK;
}

static pd_status pbl_epoch_end(pd_callback *cb, int64_t epoch, const pd_logs *logs) {
  (void)epoch;
  prog_bar_logger *p = (prog_bar_logger *)cb;
  if (pbl_print(p) && p->bar[0].num >= 0) progbar_update(p, 0, p->step[0], logs);
  pbl_newline_if_open(p, 0);
  return PD_OK;
}

static void pbl_run_begin(prog_bar_logger *p, int mode, const pd_logs *logs, const char *msg) {
  p->n_metrics[mode] = logs ? logs->n : 0;
  p->metrics[mode] = logs ? logs->names : NULL;
  p->step[mode] = 0;
  p->samples[mode] = 0;
  progbar_start(p, mode, logs ? logs->steps : -1);
  if (pbl_print(p)) fprintf(p->out, "%s\n", msg);
}

static void pbl_run_end(prog_bar_logger *p, int mode, const pd_logs *logs, const char *what) {
  if (pbl_print(p) && p->bar[mode].num >= 0) {
    progbar_update(p, mode, p->step[mode], logs);
    pbl_newline_if_open(p, mode);
    fprintf(p->out, "%s samples: %lld\n", what, (long long)p->samples[mode]);
    fflush(p->out);
  }
}

static pd_status pbl_eval_begin(pd_callback *cb, int64_t i, const pd_logs *logs) {
  (void)i;
  pbl_run_begin((prog_bar_logger *)cb, 1, logs, "Eval begin...");
  return PD_OK;
}
static pd_status pbl_eval_batch_end(pd_callback *cb, int64_t step, const pd_logs *logs) {
  (void)step;
  pbl_batch_end((prog_bar_logger *)cb, 1, logs);
  return PD_OK;
}
static pd_status pbl_eval_end(pd_callback *cb, int64_t i, const pd_logs *logs) {
  (void)i;
  pbl_run_end((prog_bar_logger *)cb, 1, logs, "Eval");
  return PD_OK;
}
static pd_status pbl_predict_begin(pd_callback *cb, int64_t i, const pd_logs *logs) {
  (void)i;
  pbl_run_begin((prog_bar_logger *)cb, 2, logs, "Predict begin...");
  return PD_OK;
}
static pd_status pbl_predict_batch_end(pd_callback *cb, int64_t step, const pd_logs *logs) {
  (void)step;
  pbl_batch_end((prog_bar_logger *)cb, 2, logs);
  return PD_OK;
}
static pd_status pbl_predict_end(pd_callback *cb, int64_t i, const pd_logs *logs) {
  (void)i;
  pbl_run_end((prog_bar_logger *)cb, 2, logs, "Predict");
  return PD_OK;
}

const pd_callback_fns pd_callback_prog_bar_logger_fns = {
    .type_name = "ProgBarLogger",
    .on_train_begin = pbl_train_begin,
    .on_epoch_begin = pbl_epoch_begin,
    .on_epoch_end = pbl_epoch_end,
    .on_train_batch_end = pbl_train_batch_end,
    .on_eval_begin = pbl_eval_begin,
    .on_eval_end = pbl_eval_end,
    .on_eval_batch_end = pbl_eval_batch_end,
    .on_predict_begin = pbl_predict_begin,
    .on_predict_end = pbl_predict_end,
    .on_predict_batch_end = pbl_predict_batch_end,
};

pd_callback *pd_callbacks_prog_bar_logger(const pd_callbacks_prog_bar_logger_opts *opts) {
  pd_callbacks_prog_bar_logger_opts o = opts ? *opts : (pd_callbacks_prog_bar_logger_opts){0};
  if (o.log_freq < 0 || o.verbose < 0 || o.verbose > 3) {
    pd_set_error(PD_ERR_INVALID, "ProgBarLogger: log_freq %d must be >= 1 and verbose %d in 1..3", o.log_freq,
                 o.verbose);
    return NULL;
  }
  prog_bar_logger *p = pd_callback_new(sizeof *p, &pd_callback_prog_bar_logger_fns);
  if (!p) return NULL;
  p->log_freq = o.log_freq ? o.log_freq : 1;
  p->verbose = o.verbose ? o.verbose : 2;
  p->out = o.out ? o.out : stdout;
  p->clock = o.clock ? o.clock : monotonic_clock;
  p->clock_user = o.clock_user;
  int fd = fileno(p->out);
  p->dynamic = fd >= 0 && isatty(fd);
  return &p->base;
}

/* ---- ModelCheckpoint ------------------------------------------------------ */
typedef struct model_checkpoint {
  pd_callback base;
  int save_freq;
  int64_t epoch;
  char *save_dir;
} model_checkpoint;

static void print_abs(const char *path) {
  char cwd[4096];
  if (path[0] != '/' && getcwd(cwd, sizeof cwd))
    printf("save checkpoint at %s/%s\n", cwd, path);
  else
    printf("save checkpoint at %s\n", path);
  fflush(stdout);
}

static pd_status ckpt_save(model_checkpoint *c, const char *leaf) {
  if (!c->save_dir || !c->base.model) return PD_OK;
  size_t n = strlen(c->save_dir) + strlen(leaf) + 2;
  char *path = malloc(n);
  if (!path) return pd_set_error(PD_ERR_MEMORY, "ModelCheckpoint: out of memory");
  snprintf(path, n, "%s/%s", c->save_dir, leaf);
  print_abs(path);
  pd_status st = pd_model_save(c->base.model, path, true);
  free(path);
  return st;
}

static pd_status ckpt_epoch_begin(pd_callback *cb, int64_t epoch, const pd_logs *logs) {
  (void)logs;
  ((model_checkpoint *)cb)->epoch = epoch;
  return PD_OK;
}

static pd_status ckpt_epoch_end(pd_callback *cb, int64_t epoch, const pd_logs *logs) {
  (void)logs;
  model_checkpoint *c = (model_checkpoint *)cb;
  if (c->epoch % c->save_freq != 0) return PD_OK;
  char leaf[32];
  snprintf(leaf, sizeof leaf, "%lld", (long long)epoch);
  return ckpt_save(c, leaf);
}

static pd_status ckpt_train_end(pd_callback *cb, int64_t i, const pd_logs *logs) {
  (void)i, (void)logs;
  return ckpt_save((model_checkpoint *)cb, "final");
}

static void ckpt_destroy(pd_callback *cb) { free(((model_checkpoint *)cb)->save_dir); }

const pd_callback_fns pd_callback_model_checkpoint_fns = {
    .type_name = "ModelCheckpoint",
    .on_epoch_begin = ckpt_epoch_begin,
    .on_epoch_end = ckpt_epoch_end,
    .on_train_end = ckpt_train_end,
    .destroy = ckpt_destroy,
};

pd_callback *pd_callbacks_model_checkpoint(int save_freq, const char *save_dir) {
  if (save_freq < 0) {
    pd_set_error(PD_ERR_INVALID, "ModelCheckpoint: save_freq %d must be >= 1", save_freq);
    return NULL;
  }
  model_checkpoint *c = pd_callback_new(sizeof *c, &pd_callback_model_checkpoint_fns);
  if (!c) return NULL;
  c->save_freq = save_freq ? save_freq : 1;
  if (pd_callback_set_save_dir(&c->base, save_dir) != PD_OK) {
    pd_callback_release(&c->base);
    return NULL;
  }
  return &c->base;
}

/* ---- EarlyStopping -------------------------------------------------------- */
typedef struct early_stopping {
  pd_callback base;
  char monitor[64];
  bool greater;
  int patience, verbose;
  double min_delta, best_value;
  bool has_baseline;
  double baseline;
  bool save_best_model;
  int wait_epoch, stopped_epoch;
  char *save_dir;
} early_stopping;

static pd_status es_train_begin(pd_callback *cb, int64_t i, const pd_logs *logs) {
  (void)i, (void)logs;
  early_stopping *e = (early_stopping *)cb;
  e->wait_epoch = 0;
  e->best_value = e->has_baseline ? e->baseline : e->greater ? -INFINITY : INFINITY;
  return PD_OK;
}

static pd_status es_eval_end(pd_callback *cb, int64_t i, const pd_logs *logs) {
  (void)i;
  early_stopping *e = (early_stopping *)cb;
  double cur;
  if (!pd_logs_get(logs, e->monitor, &cur)) {
    fprintf(stderr, "Warning: Monitor of EarlyStopping should be loss or metric name.\n");
    return PD_OK;
  }
  bool better = e->greater ? cur - e->min_delta > e->best_value : cur - e->min_delta < e->best_value;
  if (better) {
    e->best_value = cur;
    e->wait_epoch = 0;
    if (e->save_best_model && e->save_dir && cb->model) {
      size_t n = strlen(e->save_dir) + 16;
      char *path = malloc(n);
      if (!path) return pd_set_error(PD_ERR_MEMORY, "EarlyStopping: out of memory");
      snprintf(path, n, "%s/best_model", e->save_dir);
      pd_status st = pd_model_save(cb->model, path, true);
      free(path);
      if (st != PD_OK) return st;
    }
  } else {
    e->wait_epoch++;
  }
  if (e->wait_epoch > e->patience) {
    if (cb->model) cb->model->stop_training = true;
    if (e->verbose > 0) {
      printf("Epoch %d: Early stopping.\n", e->stopped_epoch + 1);
      if (e->save_best_model && e->save_dir)
        printf("Best checkpoint has been saved at %s/best_model\n", e->save_dir);
      fflush(stdout);
    }
  }
  e->stopped_epoch++;
  return PD_OK;
}

static void es_destroy(pd_callback *cb) { free(((early_stopping *)cb)->save_dir); }

const pd_callback_fns pd_callback_early_stopping_fns = {
    .type_name = "EarlyStopping",
    .on_train_begin = es_train_begin,
    .on_eval_end = es_eval_end,
    .destroy = es_destroy,
};

pd_callback *pd_callbacks_early_stopping(const pd_callbacks_early_stopping_opts *opts) {
  pd_callbacks_early_stopping_opts o = opts ? *opts : (pd_callbacks_early_stopping_opts){0};
  const char *monitor = o.monitor ? o.monitor : "loss";
  const char *mode = o.mode ? o.mode : "auto";
  if (strcmp(mode, "auto") && strcmp(mode, "min") && strcmp(mode, "max")) {
    pd_set_error(PD_ERR_INVALID, "EarlyStopping: mode \"%s\" is not one of \"auto\", \"min\", \"max\"", mode);
    return NULL;
  }
  if (o.patience < 0 || strlen(monitor) >= 64) {
    pd_set_error(PD_ERR_INVALID, "EarlyStopping: patience %d must be >= 0 and monitor shorter than 64",
                 o.patience);
    return NULL;
  }
  early_stopping *e = pd_callback_new(sizeof *e, &pd_callback_early_stopping_fns);
  if (!e) return NULL;
  snprintf(e->monitor, sizeof e->monitor, "%s", monitor);
  e->greater = strcmp(mode, "max") == 0 || (strcmp(mode, "auto") == 0 && strstr(monitor, "acc"));
  e->patience = o.patience;
  e->verbose = o.verbose ? o.verbose : 1;
  e->min_delta = e->greater ? fabs(o.min_delta) : -fabs(o.min_delta);
  e->has_baseline = o.has_baseline;
  e->baseline = o.baseline;
  e->save_best_model = !o.no_save_best_model;
  return &e->base;
}

int pd_callbacks_early_stopping_stopped_epoch(const pd_callback *cb) {
  if (!cb || cb->fns != &pd_callback_early_stopping_fns) return -1;
  return ((const early_stopping *)cb)->stopped_epoch;
}

pd_status pd_callback_set_save_dir(pd_callback *cb, const char *save_dir) {
  char **slot = cb->fns == &pd_callback_model_checkpoint_fns ? &((model_checkpoint *)cb)->save_dir
                : cb->fns == &pd_callback_early_stopping_fns ? &((early_stopping *)cb)->save_dir
                                                             : NULL;
  if (!slot) return PD_OK;
  char *d = NULL;
  if (save_dir && !(d = strdup(save_dir))) return pd_set_error(PD_ERR_MEMORY, "callback: out of memory");
  free(*slot);
  *slot = d;
  return PD_OK;
}

/* ---- LRScheduler ---------------------------------------------------------- */
typedef struct lr_callback {
  pd_callback base;
  bool by_step, by_epoch;
} lr_callback;

static pd_status lr_step(pd_callback *cb) {
  pd_lr_scheduler *s =
      cb->model && cb->model->optimizer ? pd_optimizer_lr_scheduler(cb->model->optimizer) : NULL;
  if (!s || strcmp(pd_lr_name(s), "ReduceOnPlateau") == 0) return PD_OK;
  return pd_lr_step(s);
}

static pd_status lr_batch_end(pd_callback *cb, int64_t i, const pd_logs *logs) {
  (void)i, (void)logs;
  return ((lr_callback *)cb)->by_step ? lr_step(cb) : PD_OK;
}

static pd_status lr_epoch_end(pd_callback *cb, int64_t i, const pd_logs *logs) {
  (void)i, (void)logs;
  return ((lr_callback *)cb)->by_epoch ? lr_step(cb) : PD_OK;
}

const pd_callback_fns pd_callback_lr_scheduler_fns = {
    .type_name = "LRScheduler",
    .on_epoch_end = lr_epoch_end,
    .on_train_batch_end = lr_batch_end,
};

pd_callback *pd_callbacks_lr_scheduler(bool by_step, bool by_epoch) {
  if (by_step && by_epoch) {
    pd_set_error(PD_ERR_INVALID, "LRScheduler: by_step option is mutually exclusive with by_epoch");
    return NULL;
  }
  lr_callback *c = pd_callback_new(sizeof *c, &pd_callback_lr_scheduler_fns);
  if (!c) return NULL;
  c->by_step = by_step;
  c->by_epoch = by_epoch;
  return &c->base;
}
