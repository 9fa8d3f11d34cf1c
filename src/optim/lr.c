/* Learning-rate schedulers (paddle.optimizer.lr): the value at
 * construction is epoch 0; step() advances last_epoch and recomputes
 * last_lr with Paddle's formula for that epoch. */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/core_internal.h"
#include "optim_internal.h"

typedef enum lr_kind {
  LR_STEP,
  LR_MULTI_STEP,
  LR_EXPONENTIAL,
  LR_NATURAL_EXP,
  LR_INVERSE_TIME,
  LR_COSINE,
  LR_WARMUP,
  LR_NOAM,
  LR_POLYNOMIAL,
  LR_PIECEWISE,
  LR_LAMBDA,
  LR_MULTIPLICATIVE,
  LR_LINEAR,
  LR_ONE_CYCLE,
  LR_PLATEAU,
} lr_kind;

static const char *const k_names[] = {
    "StepDecay",        "MultiStepDecay",       "ExponentialDecay", "NaturalExpDecay",
    "InverseTimeDecay", "CosineAnnealingDecay", "LinearWarmup",     "NoamDecay",
    "PolynomialDecay",  "PiecewiseDecay",       "LambdaDecay",      "MultiplicativeDecay",
    "LinearLR",         "OneCycleLR",           "ReduceOnPlateau",
};

struct pd_lr_scheduler {
  atomic_int refcount;
  lr_kind kind;
  double base_lr, last_lr;
  int64_t last_epoch;
  double gamma;
  int64_t steps; /* step_size, T_max, warmup_steps, decay_steps, total_steps */
  double a, b;   /* eta_min | d_model | end_lr, power | start_lr, end_lr | start/end factor */
  bool cycle;
  int64_t *ints; /* milestones / boundaries */
  double *vals;  /* piecewise values */
  int nints, nvals;
  pd_lr_scheduler *inner; /* LinearWarmup's scheduler */
  double (*fn)(int64_t, void *);
  void *user;
  /* OneCycleLR */
  double step_cfg[5], step_size[4], lr_cfg[4];
  int nphase;
  bool linear;
  /* ReduceOnPlateau */
  bool mode_max, thr_abs, has_best;
  double factor, threshold, min_lr, epsilon, best;
  int64_t patience, cooldown, cooldown_counter, num_bad_epochs;
};

/* Python's floor modulo. */
static int64_t pymod(int64_t a, int64_t b) {
  int64_t r = a % b;
  return r != 0 && ((r < 0) != (b < 0)) ? r + b : r;
}

/* The rate of epoch last_epoch (get_lr); may use last_lr (recursive forms). */
static pd_status get_lr(pd_lr_scheduler *s, double *out) {
  int64_t e = s->last_epoch;
  switch (s->kind) {
    case LR_STEP:
      *out = s->base_lr * pow(s->gamma, (double)(e / s->steps - (e % s->steps < 0)));
      return PD_OK;
    case LR_MULTI_STEP: {
      int i = 0;
      while (i < s->nints && e >= s->ints[i]) i++;
      *out = s->base_lr * pow(s->gamma, i);
      return PD_OK;
    }
    case LR_EXPONENTIAL:
      *out = s->base_lr * pow(s->gamma, (double)e);
      return PD_OK;
    case LR_NATURAL_EXP:
      *out = s->base_lr * exp(-s->gamma * (double)e);
      return PD_OK;
    case LR_INVERSE_TIME:
      *out = s->base_lr / (1 + s->gamma * (double)e);
      return PD_OK;
    case LR_COSINE: {
      double T = (double)s->steps, eta = s->a;
      if (e == 0)
        *out = s->base_lr;
      else if (pymod(e - 1 - s->steps, 2 * s->steps) == 0)
        *out = s->last_lr + (s->base_lr - eta) * (1 - cos(M_PI / T)) / 2;
      else
        *out = (1 + cos(M_PI * (double)e / T)) / (1 + cos(M_PI * (double)(e - 1) / T)) * (s->last_lr - eta) +
               eta;
      return PD_OK;
    }
    case LR_WARMUP:
      if (e < s->steps) {
        *out = (s->b - s->a) * (double)e / (double)s->steps + s->a;
        return PD_OK;
      }
      if (s->inner) {
        pd_status st = pd_lr_step_epoch(s->inner, e - s->steps);
        if (st != PD_OK) return st;
        *out = s->inner->last_lr;
      } else {
        *out = s->gamma; /* the float learning_rate after warm-up */
      }
      return PD_OK;
    case LR_NOAM: {
      double x = e == 0 ? 1.0 : pow((double)e, -0.5);
      double y = pow((double)s->steps, -1.5) * (double)e;
      *out = s->base_lr * pow(s->a, -0.5) * (x < y ? x : y);
      return PD_OK;
    }
    case LR_POLYNOMIAL: {
      double epoch = (double)e, decay = (double)s->steps;
      if (s->cycle) {
        double div = ceil(epoch / decay);
        if (e == 0) div = 1;
        decay *= div;
      } else if (epoch > decay) {
        epoch = decay;
      }
      *out = (s->base_lr - s->a) * pow(1 - epoch / decay, s->b) + s->a;
      return PD_OK;
    }
    case LR_PIECEWISE:
      for (int i = 0; i < s->nints; i++)
        if (e < s->ints[i]) {
          *out = s->vals[i];
          return PD_OK;
        }
      *out = s->vals[s->nvals - 1];
      return PD_OK;
    case LR_LAMBDA:
      *out = s->base_lr * s->fn(e, s->user);
      return PD_OK;
    case LR_MULTIPLICATIVE:
      *out = e > 0 ? s->last_lr * s->fn(e, s->user) : s->base_lr;
      return PD_OK;
    case LR_LINEAR:
      if (e == 0) {
        *out = s->base_lr * s->a;
      } else if (e > s->steps) {
        *out = s->last_lr;
      } else {
        double base = (double)s->steps * s->a, cur = s->b - s->a;
        *out = s->last_lr * (1.0 + cur / (base + (double)(e - 1) * cur));
      }
      return PD_OK;
    case LR_ONE_CYCLE: {
      if (e > s->steps)
        return pd_set_error(PD_ERR_INVALID, "OneCycleLR: tried to step %lld times but total_steps is %lld",
                            (long long)e, (long long)s->steps);
      for (int i = 0; i < s->nphase; i++) {
        if ((double)e <= s->step_cfg[i + 1] || i == s->nphase - 1) {
          double pct = ((double)e - s->step_cfg[i]) / s->step_size[i];
          double lo = s->lr_cfg[i], hi = s->lr_cfg[i + 1];
          *out = s->linear ? (hi - lo) * pct + lo : hi + (lo - hi) / 2.0 * (cos(M_PI * pct) + 1);
          return PD_OK;
        }
      }
      *out = s->last_lr;
      return PD_OK;
    }
    case LR_PLATEAU:
      *out = s->last_lr;
      return PD_OK;
  }
  return PD_OK;
}

/* ---- lifetime ---------------------------------------------------------------- */
static pd_lr_scheduler *lr_new(lr_kind kind, double learning_rate) {
  if (!isfinite(learning_rate) || learning_rate < 0) {
    pd_set_error(PD_ERR_INVALID, "%s: learning_rate must be a finite value >= 0, got %g", k_names[kind],
                 learning_rate);
    return NULL;
  }
  pd_lr_scheduler *s = calloc(1, sizeof *s);
  if (!s) {
    pd_set_error(PD_ERR_MEMORY, "%s: out of memory", k_names[kind]);
    return NULL;
  }
  atomic_init(&s->refcount, 1);
  s->kind = kind;
  s->base_lr = s->last_lr = learning_rate;
  s->last_epoch = -1;
  return s;
}

/* The base constructor's step(): epoch 0. */
static pd_lr_scheduler *lr_start(pd_lr_scheduler *s) {
  if (s && pd_lr_step(s) != PD_OK) {
    pd_lr_release(s);
    return NULL;
  }
  return s;
}

pd_lr_scheduler *pd_lr_retain(pd_lr_scheduler *s) {
  if (s) atomic_fetch_add(&s->refcount, 1);
  return s;
}

void pd_lr_release(pd_lr_scheduler *s) {
  if (!s || atomic_fetch_sub(&s->refcount, 1) != 1) return;
  pd_lr_release(s->inner);
  free(s->ints);
  free(s->vals);
  free(s);
}

/* ---- stepping ---------------------------------------------------------------- */
double pd_lr_get(const pd_lr_scheduler *s) {
  if (!s) {
    pd_set_error(PD_ERR_INVALID, "lr scheduler: scheduler is NULL");
    return NAN;
  }
  return s->last_lr;
}

int64_t pd_lr_last_epoch(const pd_lr_scheduler *s) {
  if (!s) {
    pd_set_error(PD_ERR_INVALID, "lr scheduler: scheduler is NULL");
    return -1;
  }
  return s->last_epoch;
}

const char *pd_lr_name(const pd_lr_scheduler *s) { return s ? k_names[s->kind] : NULL; }

static pd_status set_epoch(pd_lr_scheduler *s, int64_t epoch, bool closed_form) {
  int64_t prev = s->last_epoch;
  s->last_epoch = epoch;
  double v;
  pd_status st;
  if (closed_form && s->kind == LR_COSINE) {
    v = s->a + (s->base_lr - s->a) * (1 + cos(M_PI * (double)epoch / (double)s->steps)) / 2;
    st = PD_OK;
  } else {
    st = get_lr(s, &v);
  }
  if (st != PD_OK) {
    s->last_epoch = prev;
    return st;
  }
  s->last_lr = v;
  return PD_OK;
}

pd_status pd_lr_step(pd_lr_scheduler *s) {
  if (!s) return pd_set_error(PD_ERR_INVALID, "lr scheduler step: scheduler is NULL");
  if (s->kind == LR_PLATEAU)
    return pd_set_error(PD_ERR_INVALID, "ReduceOnPlateau: step needs a metric (use pd_lr_step_metric)");
  return set_epoch(s, s->last_epoch + 1, false);
}

pd_status pd_lr_step_epoch(pd_lr_scheduler *s, int64_t epoch) {
  if (!s) return pd_set_error(PD_ERR_INVALID, "lr scheduler step: scheduler is NULL");
  if (s->kind == LR_PLATEAU)
    return pd_set_error(PD_ERR_INVALID, "ReduceOnPlateau: step needs a metric (use pd_lr_step_metric)");
  if (epoch < 0)
    return pd_set_error(PD_ERR_INVALID, "%s: epoch %lld must be >= 0", k_names[s->kind], (long long)epoch);
  return set_epoch(s, epoch, true);
}

static bool plateau_better(const pd_lr_scheduler *s, double cur, double best) {
  if (!s->mode_max) return s->thr_abs ? cur < best - s->threshold : cur < best - best * s->threshold;
  return s->thr_abs ? cur > best + s->threshold : cur > best + best * s->threshold;
}

pd_status pd_lr_step_metric(pd_lr_scheduler *s, double metric) {
  if (!s) return pd_set_error(PD_ERR_INVALID, "lr scheduler step: scheduler is NULL");
  if (s->kind != LR_PLATEAU)
    return pd_set_error(PD_ERR_INVALID, "%s: step takes no metric (only ReduceOnPlateau does)",
                        k_names[s->kind]);
  s->last_epoch++;
  if (s->cooldown_counter > 0) {
    s->cooldown_counter--;
    return PD_OK;
  }
  if (!s->has_best || plateau_better(s, metric, s->best)) {
    s->best = metric;
    s->has_best = true;
    s->num_bad_epochs = 0;
  } else {
    s->num_bad_epochs++;
  }
  if (s->num_bad_epochs > s->patience) {
    s->cooldown_counter = s->cooldown;
    s->num_bad_epochs = 0;
    double nl = s->last_lr * s->factor;
    if (nl < s->min_lr) nl = s->min_lr;
    if (s->last_lr - nl > s->epsilon) s->last_lr = nl;
  }
  return PD_OK;
}

/* ---- constructors ---------------------------------------------------------------- */
#define CHECK(cond, ...)                         \
  do {                                           \
    if (!(cond)) {                               \
      pd_set_error(PD_ERR_INVALID, __VA_ARGS__); \
      return NULL;                               \
    }                                            \
  } while (0)

pd_lr_scheduler *pd_optimizer_lr_step_decay(double learning_rate, int64_t step_size, double gamma) {
  CHECK(step_size > 0, "StepDecay: step_size must be a positive integer, got %lld", (long long)step_size);
  CHECK(gamma < 1.0, "StepDecay: gamma should be < 1.0, got %g", gamma);
  pd_lr_scheduler *s = lr_new(LR_STEP, learning_rate);
  if (!s) return NULL;
  s->steps = step_size;
  s->gamma = gamma;
  return lr_start(s);
}

pd_lr_scheduler *pd_optimizer_lr_multi_step_decay(double learning_rate, const int64_t *milestones, int n,
                                                  double gamma) {
  CHECK(n >= 0 && (milestones || n == 0), "MultiStepDecay: milestones is NULL with %d entries", n);
  for (int i = 1; i < n; i++)
    CHECK(milestones[i] > milestones[i - 1],
          "MultiStepDecay: milestones must be increasing, got %lld after %lld at index %d",
          (long long)milestones[i], (long long)milestones[i - 1], i);
  CHECK(gamma < 1.0, "MultiStepDecay: gamma should be < 1.0, got %g", gamma);
  pd_lr_scheduler *s = lr_new(LR_MULTI_STEP, learning_rate);
  if (!s) return NULL;
  s->ints = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
  if (!s->ints) {
    pd_lr_release(s);
    pd_set_error(PD_ERR_MEMORY, "MultiStepDecay: out of memory");
    return NULL;
  }
  if (n) memcpy(s->ints, milestones, sizeof(int64_t) * (size_t)n);
  s->nints = n;
  s->gamma = gamma;
  return lr_start(s);
}

pd_lr_scheduler *pd_optimizer_lr_exponential_decay(double learning_rate, double gamma) {
  CHECK(gamma > 0.0 && gamma < 1.0, "ExponentialDecay: gamma must be in (0.0, 1.0), got %g", gamma);
  pd_lr_scheduler *s = lr_new(LR_EXPONENTIAL, learning_rate);
  if (!s) return NULL;
  s->gamma = gamma;
  return lr_start(s);
}

pd_lr_scheduler *pd_optimizer_lr_natural_exp_decay(double learning_rate, double gamma) {
  CHECK(gamma > 0.0, "NaturalExpDecay: gamma must be > 0.0, got %g", gamma);
  pd_lr_scheduler *s = lr_new(LR_NATURAL_EXP, learning_rate);
  if (!s) return NULL;
  s->gamma = gamma;
  return lr_start(s);
}

pd_lr_scheduler *pd_optimizer_lr_inverse_time_decay(double learning_rate, double gamma) {
  CHECK(gamma >= 0.0, "InverseTimeDecay: gamma must be >= 0, got %g", gamma);
  pd_lr_scheduler *s = lr_new(LR_INVERSE_TIME, learning_rate);
  if (!s) return NULL;
  s->gamma = gamma;
  return lr_start(s);
}

pd_lr_scheduler *pd_optimizer_lr_cosine_annealing_decay(double learning_rate, int64_t T_max, double eta_min) {
  CHECK(T_max > 0, "CosineAnnealingDecay: T_max must be a positive integer, got %lld", (long long)T_max);
  pd_lr_scheduler *s = lr_new(LR_COSINE, learning_rate);
  if (!s) return NULL;
  s->steps = T_max;
  s->a = eta_min;
  return lr_start(s);
}

pd_lr_scheduler *pd_optimizer_lr_linear_warmup(pd_lr_scheduler *after, double learning_rate,
                                               int64_t warmup_steps, double start_lr, double end_lr) {
  CHECK(warmup_steps > 0, "LinearWarmup: warmup_steps must be a positive integer, got %lld",
        (long long)warmup_steps);
  CHECK(end_lr > start_lr, "LinearWarmup: end_lr %g must be greater than start_lr %g", end_lr, start_lr);
  CHECK(after || (isfinite(learning_rate) && learning_rate >= 0),
        "LinearWarmup: learning_rate must be a finite value >= 0, got %g", learning_rate);
  pd_lr_scheduler *s = lr_new(LR_WARMUP, start_lr);
  if (!s) return NULL;
  s->steps = warmup_steps;
  s->a = start_lr;
  s->b = end_lr;
  s->gamma = learning_rate;
  s->inner = pd_lr_retain(after);
  return lr_start(s);
}

pd_lr_scheduler *pd_optimizer_lr_noam_decay(double d_model, int64_t warmup_steps, double learning_rate) {
  CHECK(d_model > 0, "NoamDecay: d_model should be greater than 0, got %g", d_model);
  CHECK(warmup_steps > 0, "NoamDecay: warmup_steps must be a positive integer, got %lld",
        (long long)warmup_steps);
  pd_lr_scheduler *s = lr_new(LR_NOAM, learning_rate);
  if (!s) return NULL;
  s->a = d_model;
  s->steps = warmup_steps;
  return lr_start(s);
}

pd_lr_scheduler *pd_optimizer_lr_polynomial_decay(double learning_rate, int64_t decay_steps, double end_lr,
                                                  double power, bool cycle) {
  CHECK(decay_steps > 0, "PolynomialDecay: decay_steps must be a positive integer, got %lld",
        (long long)decay_steps);
  CHECK(power > 0.0, "PolynomialDecay: power must be greater than 0.0, got %g", power);
  pd_lr_scheduler *s = lr_new(LR_POLYNOMIAL, learning_rate);
  if (!s) return NULL;
  s->steps = decay_steps;
  s->a = end_lr;
  s->b = power;
  s->cycle = cycle;
  return lr_start(s);
}

pd_lr_scheduler *pd_optimizer_lr_piecewise_decay(const int64_t *boundaries, int n_boundaries,
                                                 const double *values, int n_values) {
  CHECK(n_boundaries >= 0 && (boundaries || n_boundaries == 0), "PiecewiseDecay: boundaries is NULL");
  CHECK(values && n_values == n_boundaries + 1,
        "PiecewiseDecay: needs len(values) = len(boundaries) + 1, got %d values for %d boundaries", n_values,
        n_boundaries);
  pd_lr_scheduler *s = lr_new(LR_PIECEWISE, 0.1);
  if (!s) return NULL;
  s->ints = malloc(sizeof(int64_t) * (size_t)(n_boundaries ? n_boundaries : 1));
  s->vals = malloc(sizeof(double) * (size_t)n_values);
  if (!s->ints || !s->vals) {
    pd_lr_release(s);
    pd_set_error(PD_ERR_MEMORY, "PiecewiseDecay: out of memory");
    return NULL;
  }
  if (n_boundaries) memcpy(s->ints, boundaries, sizeof(int64_t) * (size_t)n_boundaries);
  memcpy(s->vals, values, sizeof(double) * (size_t)n_values);
  s->nints = n_boundaries;
  s->nvals = n_values;
  return lr_start(s);
}

pd_lr_scheduler *pd_optimizer_lr_lambda_decay(double learning_rate, double (*lr_lambda)(int64_t, void *),
                                              void *user) {
  CHECK(lr_lambda, "LambdaDecay: lr_lambda is NULL");
  pd_lr_scheduler *s = lr_new(LR_LAMBDA, learning_rate);
  if (!s) return NULL;
  s->fn = lr_lambda;
  s->user = user;
  return lr_start(s);
}

pd_lr_scheduler *pd_optimizer_lr_multiplicative_decay(double learning_rate,
                                                      double (*lr_lambda)(int64_t, void *), void *user) {
  CHECK(lr_lambda, "MultiplicativeDecay: lr_lambda is NULL");
  pd_lr_scheduler *s = lr_new(LR_MULTIPLICATIVE, learning_rate);
  if (!s) return NULL;
  s->fn = lr_lambda;
  s->user = user;
  return lr_start(s);
}

pd_lr_scheduler *pd_optimizer_lr_linear_lr(double learning_rate, int64_t total_steps, double start_factor,
                                           double end_factor) {
  if (start_factor == 0 && end_factor == 0) end_factor = 1.0;
  if (start_factor == 0) start_factor = 1.0 / 3;
  CHECK(start_factor > 0 && start_factor <= 1.0,
        "LinearLR: start_factor must be greater than 0 and at most 1, got %g", start_factor);
  CHECK(end_factor >= 0 && end_factor <= 1.0, "LinearLR: end_factor must be in [0, 1], got %g", end_factor);
  CHECK(total_steps > 0, "LinearLR: total_steps must be greater than 0, got %lld", (long long)total_steps);
  pd_lr_scheduler *s = lr_new(LR_LINEAR, learning_rate);
  if (!s) return NULL;
  s->steps = total_steps;
  s->a = start_factor;
  s->b = end_factor;
  return lr_start(s);
}

pd_optimizer_lr_one_cycle_lr_opts pd_optimizer_lr_one_cycle_lr_defaults(void) {
  return (pd_optimizer_lr_one_cycle_lr_opts){
      .divide_factor = 25.0, .end_learning_rate = 1e-4, .phase_pct = 0.3, .explicit_zero = true};
}

pd_lr_scheduler *pd_optimizer_lr_one_cycle_lr(double max_learning_rate, int64_t total_steps,
                                              const pd_optimizer_lr_one_cycle_lr_opts *opts) {
  pd_optimizer_lr_one_cycle_lr_opts o = opts ? *opts : pd_optimizer_lr_one_cycle_lr_defaults();
  if (!o.explicit_zero) {
    pd_opts_not_from_defaults("OneCycleLR", "pd_optimizer_lr_one_cycle_lr_defaults()");
    return NULL;
  }
  CHECK(isfinite(max_learning_rate) && max_learning_rate >= 0,
        "OneCycleLR: max_learning_rate must be >= 0, got %g", max_learning_rate);
  CHECK(total_steps > 0, "OneCycleLR: total_steps must be a positive integer, got %lld",
        (long long)total_steps);
  CHECK(o.end_learning_rate >= 0, "OneCycleLR: end_learning_rate must be >= 0, got %g", o.end_learning_rate);
  CHECK(o.phase_pct >= 0 && o.phase_pct <= 1, "OneCycleLR: phase_pct must be between 0 and 1, got %g",
        o.phase_pct);
  CHECK(o.divide_factor != 0, "OneCycleLR: divide_factor must not be 0");
  CHECK(!o.three_phase || o.phase_pct < 0.5,
        "OneCycleLR: when three_phase is set, phase_pct must be < 0.5, got %g", o.phase_pct);
  double initial = max_learning_rate / o.divide_factor, T = (double)total_steps;
  pd_lr_scheduler *s = lr_new(LR_ONE_CYCLE, initial);
  if (!s) return NULL;
  s->steps = total_steps;
  s->linear = o.linear;
  if (o.three_phase) {
    double cfg[5] = {0, o.phase_pct * T - 1, 2 * o.phase_pct * T - 2, T - 1, T - 1};
    memcpy(s->step_cfg, cfg, sizeof cfg);
    s->step_size[0] = cfg[1] - cfg[0];
    s->step_size[1] = cfg[2] - cfg[1];
    s->step_size[2] = cfg[3] - cfg[2];
    s->step_size[3] = cfg[3] - cfg[2];
    double lrs[4] = {initial, max_learning_rate, initial, o.end_learning_rate};
    memcpy(s->lr_cfg, lrs, sizeof lrs);
    s->nphase = 3;
  } else {
    double cfg[4] = {0, o.phase_pct * T - 1, T - 1, T - 1};
    memcpy(s->step_cfg, cfg, sizeof cfg);
    s->step_size[0] = cfg[1] - cfg[0];
    s->step_size[1] = cfg[2] - cfg[1];
    s->step_size[2] = cfg[2] - cfg[1];
    s->lr_cfg[0] = initial;
    s->lr_cfg[1] = max_learning_rate;
    s->lr_cfg[2] = o.end_learning_rate;
    s->nphase = 2;
  }
  return lr_start(s);
}

pd_optimizer_lr_reduce_on_plateau_opts pd_optimizer_lr_reduce_on_plateau_defaults(void) {
  return (pd_optimizer_lr_reduce_on_plateau_opts){
      .factor = 0.1, .patience = 10, .threshold = 1e-4, .epsilon = 1e-8, .explicit_zero = true};
}

pd_lr_scheduler *pd_optimizer_lr_reduce_on_plateau(double learning_rate,
                                                   const pd_optimizer_lr_reduce_on_plateau_opts *opts) {
  pd_optimizer_lr_reduce_on_plateau_opts o = opts ? *opts : pd_optimizer_lr_reduce_on_plateau_defaults();
  if (!o.explicit_zero) {
    pd_opts_not_from_defaults("ReduceOnPlateau", "pd_optimizer_lr_reduce_on_plateau_defaults()");
    return NULL;
  }
  CHECK(o.factor < 1.0, "ReduceOnPlateau: new_lr = origin_lr * factor and factor should be < 1.0, got %g",
        o.factor);
  CHECK(o.patience >= 0 && o.cooldown >= 0,
        "ReduceOnPlateau: patience (%lld) and cooldown (%lld) must be >= 0", (long long)o.patience,
        (long long)o.cooldown);
  pd_lr_scheduler *s = lr_new(LR_PLATEAU, learning_rate);
  if (!s) return NULL;
  s->mode_max = o.mode_max;
  s->thr_abs = o.threshold_mode_abs;
  s->factor = o.factor;
  s->patience = o.patience;
  s->threshold = o.threshold;
  s->cooldown = o.cooldown;
  s->min_lr = o.min_lr;
  s->epsilon = o.epsilon;
  s->last_epoch = 0; /* ReduceOnPlateau does not step at construction */
  return s;
}

/* ---- state -------------------------------------------------------------------------- */
static int put(pd_lr_state_entry *out, int n, int cap, const char *prefix, const char *key, double v,
               bool is_int) {
  if (n >= cap) return n;
  snprintf(out[n].key, sizeof out[n].key, "%s.%s", prefix, key);
  out[n].value = v;
  out[n].is_int = is_int;
  return n + 1;
}

int pd_lr_state_list(const pd_lr_scheduler *s, const char *prefix, pd_lr_state_entry *out, int cap) {
  int n = 0;
  if (!s) return 0;
  if (s->kind == LR_PLATEAU) {
    n = put(out, n, cap, prefix, "cooldown_counter", (double)s->cooldown_counter, true);
    n = put(out, n, cap, prefix, "best", s->has_best ? s->best : NAN, false);
    n = put(out, n, cap, prefix, "num_bad_epochs", (double)s->num_bad_epochs, true);
  }
  n = put(out, n, cap, prefix, "last_epoch", (double)s->last_epoch, true);
  n = put(out, n, cap, prefix, "last_lr", s->last_lr, false);
  if (s->kind == LR_WARMUP && s->inner) {
    char sub[96];
    snprintf(sub, sizeof sub, "%s.LinearWarmup_LR", prefix);
    n += pd_lr_state_list(s->inner, sub, out + n, cap - n);
  }
  return n;
}

pd_status pd_lr_state_set(pd_lr_scheduler *s, const char *key, double value) {
  if (!s || !key) return pd_set_error(PD_ERR_INVALID, "lr scheduler set_state_dict: NULL argument");
  if (strncmp(key, "LinearWarmup_LR.", 16) == 0 && s->kind == LR_WARMUP && s->inner)
    return pd_lr_state_set(s->inner, key + 16, value);
  if (strcmp(key, "last_epoch") == 0) {
    s->last_epoch = (int64_t)value;
  } else if (strcmp(key, "last_lr") == 0) {
    s->last_lr = value;
  } else if (s->kind == LR_PLATEAU && strcmp(key, "cooldown_counter") == 0) {
    s->cooldown_counter = (int64_t)value;
  } else if (s->kind == LR_PLATEAU && strcmp(key, "best") == 0) {
    s->has_best = !isnan(value);
    s->best = value;
  } else if (s->kind == LR_PLATEAU && strcmp(key, "num_bad_epochs") == 0) {
    s->num_bad_epochs = (int64_t)value;
  } else {
    return pd_set_error(PD_ERR_INVALID, "%s: unknown state entry '%s'", k_names[s->kind], key);
  }
  return PD_OK;
}
