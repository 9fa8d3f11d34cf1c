/* Optimizers (paddle.optimizer.*), LR schedulers (paddle.optimizer.lr.*),
 * regularizers (paddle.regularizer.*) and gradient clipping
 * (paddle.nn.ClipGradBy*).
 *
 *   pd_layer *net = ...;
 *   pd_named_tensors ps;
 *   pd_layer_parameters(net, &ps);
 *   pd_optimizer *opt = pd_optimizer_adam(1e-3, ps.tensors, ps.n, NULL);
 *   pd_named_tensors_free(&ps);
 *   for (...) {
 *     pd_scope_begin();
 *     pd_backward(loss(net, batch), NULL, false);
 *     pd_optimizer_step(opt);
 *     pd_optimizer_clear_grad(opt, true);
 *     pd_scope_end();
 *   }
 *   pd_optimizer_release(opt);
 *
 * Options structs (docs/architecture.md, "Options structs"): NULL means
 * Paddle's defaults, and every field of a struct given is taken as written.
 * A struct whose Paddle defaults are not all zero has a pd_*_defaults()
 * function and must start from it:
 *   pd_optimizer_adam_opts o = pd_optimizer_adam_defaults();
 *   o.beta1 = 0; // means 0
 * A struct that did not (a literal such as {.beta1 = 0}, which would leave
 * beta2 and epsilon at 0) is refused with an error naming the function:
 * `explicit_zero`, which pd_*_defaults() sets, marks a struct whose fields
 * are all deliberate. SGD's defaults are all zero: any struct is fine. */
#ifndef PADDLEC_OPTIM_H
#define PADDLEC_OPTIM_H

#include "paddlec/core.h"
#include "paddlec/nn.h"
#include "paddlec/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- regularizers (paddle.regularizer) ---------------------------------- */
typedef enum pd_regularizer_kind {
  PD_REGULARIZER_NONE = 0,
  PD_REGULARIZER_L1, /* grad += coeff * sign(param) */
  PD_REGULARIZER_L2, /* grad += coeff * param */
} pd_regularizer_kind;

/* A weight_decay option: none (all-zero), L1Decay or L2Decay. A float
 * weight_decay in Paddle is L2Decay(float). */
typedef struct pd_regularizer {
  pd_regularizer_kind kind;
  double coeff;
} pd_regularizer;

/* paddle.regularizer.L1Decay(coeff) / L2Decay(coeff). */
PD_API pd_regularizer pd_regularizer_l1_decay(double coeff);
PD_API pd_regularizer pd_regularizer_l2_decay(double coeff);

/* ---- gradient clipping (paddle.nn.ClipGradBy*) ----------------------------- */
typedef enum pd_grad_clip_kind {
  PD_GRAD_CLIP_NONE = 0,
  PD_GRAD_CLIP_BY_VALUE,
  PD_GRAD_CLIP_BY_NORM,
  PD_GRAD_CLIP_BY_GLOBAL_NORM,
} pd_grad_clip_kind;

/* A clipping strategy, passed to optimizers as `grad_clip` (copied). Only
 * parameters whose ParamAttr has need_clip (the default) are clipped. */
typedef struct pd_grad_clip {
  pd_grad_clip_kind kind;
  double max, min;     /* by value: grads clipped into [min, max] */
  double clip_norm;    /* by norm (each tensor) / by global norm (all of them together) */
  bool auto_skip_clip; /* by global norm: leave grads alone unless the norm exceeds clip_norm */
} pd_grad_clip;

/* ClipGradByValue(max, min): min > max is an error when used. Paddle's
 * default min is -max. */
PD_API pd_grad_clip pd_nn_clip_grad_by_value(double max, double min);
/* ClipGradByNorm(clip_norm): g * clip_norm / |g| for each g with |g| > clip_norm. */
PD_API pd_grad_clip pd_nn_clip_grad_by_norm(double clip_norm);
/* ClipGradByGlobalNorm(clip_norm): every g * clip_norm / max(global_norm, clip_norm),
 * global_norm = sqrt(sum over the grads of |g|^2). */
PD_API pd_grad_clip pd_nn_clip_grad_by_global_norm(double clip_norm);
/* clip(params_grads): writes to out[i] the clipped grads[i] (new references, owned
 * by the open scope like op outputs;
 * grads[i] itself retained for parameters not clipped, NULL for NULL). params
 * give need_clip (NULL entries or a NULL array: clip every grad). */
PD_API pd_status pd_nn_clip_grad_apply(const pd_grad_clip *clip, pd_tensor *const *params,
                                       pd_tensor *const *grads, int n, pd_tensor **out);

/* ---- learning-rate schedulers (paddle.optimizer.lr) ------------------------ */
/* A scheduler: reference counted (new ones hold one reference; optimizers
 * and LinearWarmup retain what they are given). Its value at construction
 * is epoch 0 (last_epoch = 0); pd_lr_step advances one epoch. */
typedef struct pd_lr_scheduler pd_lr_scheduler;

PD_API pd_lr_scheduler *pd_lr_retain(pd_lr_scheduler *s);
PD_API void pd_lr_release(pd_lr_scheduler *s); /* NULL is a no-op */
/* scheduler(): the current learning rate (last_lr); NAN with an error for NULL. */
PD_API double pd_lr_get(const pd_lr_scheduler *s);
/* scheduler.step(): last_epoch += 1 and the rate of that epoch. ReduceOnPlateau
 * needs pd_lr_step_metric. */
PD_API pd_status pd_lr_step(pd_lr_scheduler *s);
/* scheduler.step(epoch): jumps to `epoch` (closed form where Paddle has one). */
PD_API pd_status pd_lr_step_epoch(pd_lr_scheduler *s, int64_t epoch);
/* ReduceOnPlateau.step(metrics). */
PD_API pd_status pd_lr_step_metric(pd_lr_scheduler *s, double metric);
/* last_epoch; -1 with an error for NULL. */
PD_API int64_t pd_lr_last_epoch(const pd_lr_scheduler *s);
/* The class name ("StepDecay", ...). */
PD_API const char *pd_lr_name(const pd_lr_scheduler *s);

/* StepDecay: lr * gamma^(epoch / step_size) (gamma < 1, step_size > 0). */
PD_API pd_lr_scheduler *pd_optimizer_lr_step_decay(double learning_rate, int64_t step_size, double gamma);
/* MultiStepDecay: lr * gamma^(number of milestones <= epoch); milestones increasing. */
PD_API pd_lr_scheduler *pd_optimizer_lr_multi_step_decay(double learning_rate, const int64_t *milestones,
                                                         int n, double gamma);
/* ExponentialDecay: lr * gamma^epoch, 0 < gamma < 1. */
PD_API pd_lr_scheduler *pd_optimizer_lr_exponential_decay(double learning_rate, double gamma);
/* NaturalExpDecay: lr * exp(-gamma epoch). */
PD_API pd_lr_scheduler *pd_optimizer_lr_natural_exp_decay(double learning_rate, double gamma);
/* InverseTimeDecay: lr / (1 + gamma epoch). */
PD_API pd_lr_scheduler *pd_optimizer_lr_inverse_time_decay(double learning_rate, double gamma);
/* CosineAnnealingDecay(learning_rate, T_max, eta_min): Paddle's recursive form
 * (closed form for pd_lr_step_epoch). */
PD_API pd_lr_scheduler *pd_optimizer_lr_cosine_annealing_decay(double learning_rate, int64_t T_max,
                                                               double eta_min);
/* LinearWarmup: start_lr -> end_lr linearly over warmup_steps, then `after`
 * stepped to epoch - warmup_steps (retained), or the float learning_rate
 * when `after` is NULL. end_lr must exceed start_lr. */
PD_API pd_lr_scheduler *pd_optimizer_lr_linear_warmup(pd_lr_scheduler *after, double learning_rate,
                                                      int64_t warmup_steps, double start_lr, double end_lr);
/* NoamDecay(d_model, warmup_steps, learning_rate):
 * lr * d_model^-0.5 * min(epoch^-0.5, epoch * warmup_steps^-1.5) (epoch 0 uses 1 for the first). */
PD_API pd_lr_scheduler *pd_optimizer_lr_noam_decay(double d_model, int64_t warmup_steps,
                                                   double learning_rate);
/* PolynomialDecay (Paddle's defaults: end_lr 1e-4, power 1.0, cycle false). */
PD_API pd_lr_scheduler *pd_optimizer_lr_polynomial_decay(double learning_rate, int64_t decay_steps,
                                                         double end_lr, double power, bool cycle);
/* PiecewiseDecay(boundaries, values): values[i] before boundaries[i], the last
 * after; n_values must be n_boundaries + 1. */
PD_API pd_lr_scheduler *pd_optimizer_lr_piecewise_decay(const int64_t *boundaries, int n_boundaries,
                                                        const double *values, int n_values);
/* LambdaDecay: lr * lr_lambda(epoch). */
PD_API pd_lr_scheduler *pd_optimizer_lr_lambda_decay(double learning_rate,
                                                     double (*lr_lambda)(int64_t epoch, void *user),
                                                     void *user);
/* MultiplicativeDecay: last_lr * lr_lambda(epoch) for epoch > 0. */
PD_API pd_lr_scheduler *pd_optimizer_lr_multiplicative_decay(double learning_rate,
                                                             double (*lr_lambda)(int64_t epoch, void *user),
                                                             void *user);
/* LinearLR(learning_rate, total_steps, start_factor, end_factor): Paddle's
 * defaults are 1/3 and 1.0 (here too when both are 0). */
PD_API pd_lr_scheduler *pd_optimizer_lr_linear_lr(double learning_rate, int64_t total_steps,
                                                  double start_factor, double end_factor);

typedef struct pd_optimizer_lr_one_cycle_lr_opts {
  double divide_factor;     /* 25: initial lr = max_learning_rate / divide_factor */
  double end_learning_rate; /* 1e-4 */
  double phase_pct;         /* 0.3: share of steps spent increasing */
  bool linear;              /* anneal_strategy='linear' (default 'cos') */
  bool three_phase;
  bool explicit_zero;
} pd_optimizer_lr_one_cycle_lr_opts;
PD_API pd_optimizer_lr_one_cycle_lr_opts pd_optimizer_lr_one_cycle_lr_defaults(void);
/* OneCycleLR(max_learning_rate, total_steps, ...). Stepping past total_steps is an error. */
PD_API pd_lr_scheduler *pd_optimizer_lr_one_cycle_lr(double max_learning_rate, int64_t total_steps,
                                                     const pd_optimizer_lr_one_cycle_lr_opts *opts);

typedef struct pd_optimizer_lr_reduce_on_plateau_opts {
  bool mode_max;           /* mode='max' (default 'min') */
  double factor;           /* 0.1, < 1 */
  int64_t patience;        /* 10 */
  double threshold;        /* 1e-4 */
  bool threshold_mode_abs; /* threshold_mode='abs' (default 'rel') */
  int64_t cooldown;        /* 0 */
  double min_lr;           /* 0 */
  double epsilon;          /* 1e-8 */
  bool explicit_zero;
} pd_optimizer_lr_reduce_on_plateau_opts;
PD_API pd_optimizer_lr_reduce_on_plateau_opts pd_optimizer_lr_reduce_on_plateau_defaults(void);
/* ReduceOnPlateau(learning_rate, ...): stepped with pd_lr_step_metric. */
PD_API pd_lr_scheduler *pd_optimizer_lr_reduce_on_plateau(double learning_rate,
                                                          const pd_optimizer_lr_reduce_on_plateau_opts *opts);

/* ---- optimizers (paddle.optimizer) --------------------------------------- */
typedef struct pd_optimizer pd_optimizer;

/* A parameter group (Paddle's list of dicts): its parameters, a multiplier
 * of the optimizer's learning rate (Paddle's group 'learning_rate'; 0 means
 * 1.0, and it replaces the ParamAttr multiplier as in Paddle), and its own
 * options: a pointer to the same options struct type the constructor takes
 * (NULL: the optimizer's), which replace the optimizer's options for the
 * group as a whole. As in Paddle, the group's weight_decay (the optimizer's
 * when the group has no options) replaces ParamAttr regularizers of its
 * parameters; AdamW, whose weight_decay is its decoupled coefficient, keeps
 * them. */
typedef struct pd_optimizer_group {
  pd_tensor *const *params;
  int n_params;
  double learning_rate;
  const void *opts;
} pd_optimizer_group;

/* Every optimizer constructor is
 *   pd_optimizer_<name>(learning_rate, params, n_params, opts)
 * with params from e.g. pd_layer_parameters (retained), or NULL/0 and
 * opts->groups. Per parameter, pd_tensor_param_info gives the learning-rate
 * multiplier, trainable (stop_gradient params are skipped), need_clip and a
 * regularizer (l2_decay, else l1_decay) that overrides the optimizer's
 * weight_decay. Parameters without a grad are skipped. */

/* The options every optimizer has. Each pd_optimizer_<name>_opts begins with
 * these fields (so they are set as `.lr_scheduler = s`):
 *   lr_scheduler     learning_rate=LRScheduler: replaces the float (retained)
 *   grad_clip        clipping applied before the update (copied; NULL: none)
 *   multi_precision  float16/bfloat16 params keep float32 master weights
 *   groups/n_groups  parameter groups instead of params
 *   name             prefix of the accumulator names in the state dict
 *   explicit_zero    set by pd_*_defaults(): required where the struct has one */
#define PD_OPTIMIZER_COMMON_FIELDS  \
  pd_lr_scheduler *lr_scheduler;    \
  const pd_grad_clip *grad_clip;    \
  bool multi_precision;             \
  const pd_optimizer_group *groups; \
  int n_groups;                     \
  const char *name;                 \
  bool explicit_zero
/* The common fields alone: the start of every optimizer's options struct. */
typedef struct pd_optimizer_common_opts {
  PD_OPTIMIZER_COMMON_FIELDS;
} pd_optimizer_common_opts;

typedef struct pd_optimizer_sgd_opts {
  PD_OPTIMIZER_COMMON_FIELDS;
  pd_regularizer weight_decay;
} pd_optimizer_sgd_opts;
/* SGD: p -= lr g. */
PD_API pd_optimizer *pd_optimizer_sgd(double learning_rate, pd_tensor *const *params, int n_params,
                                      const pd_optimizer_sgd_opts *opts);

typedef struct pd_optimizer_momentum_opts {
  PD_OPTIMIZER_COMMON_FIELDS;
  double momentum; /* 0.9 */
  bool use_nesterov;
  double rescale_grad; /* 1.0: grads are multiplied by it first */
  pd_regularizer weight_decay;
} pd_optimizer_momentum_opts;
PD_API pd_optimizer_momentum_opts pd_optimizer_momentum_defaults(void);
/* Momentum: v = momentum v + g; p -= lr v (Nesterov: p -= lr (g + momentum v)). */
PD_API pd_optimizer *pd_optimizer_momentum(double learning_rate, pd_tensor *const *params, int n_params,
                                           const pd_optimizer_momentum_opts *opts);

typedef struct pd_optimizer_adam_opts {
  PD_OPTIMIZER_COMMON_FIELDS;
  double beta1, beta2; /* 0.9, 0.999; in [0, 1) */
  double epsilon;      /* 1e-8 */
  bool lazy_mode;      /* accepted; dense grads make it a no-op */
  pd_regularizer weight_decay;
} pd_optimizer_adam_opts;
PD_API pd_optimizer_adam_opts pd_optimizer_adam_defaults(void);
/* Adam: m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
 * p -= lr sqrt(1-b2^t)/(1-b1^t) m / (sqrt(v) + eps sqrt(1-b2^t)). */
PD_API pd_optimizer *pd_optimizer_adam(double learning_rate, pd_tensor *const *params, int n_params,
                                       const pd_optimizer_adam_opts *opts);

typedef struct pd_optimizer_adam_w_opts {
  PD_OPTIMIZER_COMMON_FIELDS;
  double beta1, beta2; /* 0.9, 0.999 */
  double epsilon;      /* 1e-8 */
  double weight_decay; /* 0.01: the decoupled decay coefficient */
  /* lr_ratio(param): multiplier of this parameter's rate (NULL: 1) */
  double (*lr_ratio)(const pd_tensor *param, void *user);
  /* apply_decay_param_fun(name): decay only parameters it accepts (NULL: all) */
  bool (*apply_decay_param_fun)(const char *name, void *user);
  void *user;
  bool lazy_mode;
} pd_optimizer_adam_w_opts;
PD_API pd_optimizer_adam_w_opts pd_optimizer_adam_w_defaults(void);
/* AdamW: p *= 1 - lr coeff (decoupled), then Adam; lr includes lr_ratio(p). */
PD_API pd_optimizer *pd_optimizer_adam_w(double learning_rate, pd_tensor *const *params, int n_params,
                                         const pd_optimizer_adam_w_opts *opts);

typedef struct pd_optimizer_adamax_opts {
  PD_OPTIMIZER_COMMON_FIELDS;
  double beta1, beta2; /* 0.9, 0.999 */
  double epsilon;      /* 1e-8 */
  pd_regularizer weight_decay;
} pd_optimizer_adamax_opts;
PD_API pd_optimizer_adamax_opts pd_optimizer_adamax_defaults(void);
/* Adamax: m = b1 m + (1-b1) g; u = max(b2 u + eps, |g|); p -= lr/(1-b1^t) m/u. */
PD_API pd_optimizer *pd_optimizer_adamax(double learning_rate, pd_tensor *const *params, int n_params,
                                         const pd_optimizer_adamax_opts *opts);

typedef struct pd_optimizer_adagrad_opts {
  PD_OPTIMIZER_COMMON_FIELDS;
  double epsilon;                   /* 1e-6 */
  double initial_accumulator_value; /* 0 */
  pd_regularizer weight_decay;
} pd_optimizer_adagrad_opts;
PD_API pd_optimizer_adagrad_opts pd_optimizer_adagrad_defaults(void);
/* Adagrad: s += g^2; p -= lr g / (sqrt(s) + eps). */
PD_API pd_optimizer *pd_optimizer_adagrad(double learning_rate, pd_tensor *const *params, int n_params,
                                          const pd_optimizer_adagrad_opts *opts);

typedef struct pd_optimizer_adadelta_opts {
  PD_OPTIMIZER_COMMON_FIELDS;
  double epsilon; /* 1e-6 */
  double rho;     /* 0.95 */
  pd_regularizer weight_decay;
} pd_optimizer_adadelta_opts;
PD_API pd_optimizer_adadelta_opts pd_optimizer_adadelta_defaults(void);
/* Adadelta: E[g^2] = rho E[g^2] + (1-rho) g^2; u = -sqrt(E[u^2]+eps)/sqrt(E[g^2]+eps) g;
 * E[u^2] = rho E[u^2] + (1-rho) u^2; p += lr u. */
PD_API pd_optimizer *pd_optimizer_adadelta(double learning_rate, pd_tensor *const *params, int n_params,
                                           const pd_optimizer_adadelta_opts *opts);

typedef struct pd_optimizer_rms_prop_opts {
  PD_OPTIMIZER_COMMON_FIELDS;
  double rho;      /* 0.95 */
  double epsilon;  /* 1e-6 */
  double momentum; /* 0 */
  bool centered;
  pd_regularizer weight_decay;
} pd_optimizer_rms_prop_opts;
PD_API pd_optimizer_rms_prop_opts pd_optimizer_rms_prop_defaults(void);
/* RMSProp: ms = rho ms + (1-rho) g^2; (centered: mg = rho mg + (1-rho) g)
 * mom = momentum mom + lr g / sqrt(ms - mg^2 + eps); p -= mom. */
PD_API pd_optimizer *pd_optimizer_rms_prop(double learning_rate, pd_tensor *const *params, int n_params,
                                           const pd_optimizer_rms_prop_opts *opts);

typedef struct pd_optimizer_lamb_opts {
  PD_OPTIMIZER_COMMON_FIELDS;
  double lamb_weight_decay; /* 0.01 */
  double beta1, beta2;      /* 0.9, 0.999 */
  double epsilon;           /* 1e-6 */
  /* exclude_from_weight_decay_fn(param): true = no weight decay for it */
  bool (*exclude_from_weight_decay_fn)(const pd_tensor *param, void *user);
  void *user;
  bool always_adapt; /* trust ratio also for parameters without weight decay */
} pd_optimizer_lamb_opts;
PD_API pd_optimizer_lamb_opts pd_optimizer_lamb_defaults(void);
/* Lamb: r = m^/(sqrt(v^) + eps) + wd p (bias-corrected moments);
 * p -= lr |p|/|r| r. */
PD_API pd_optimizer *pd_optimizer_lamb(double learning_rate, pd_tensor *const *params, int n_params,
                                       const pd_optimizer_lamb_opts *opts);

/* step(): one update of every parameter that has a grad. */
PD_API pd_status pd_optimizer_step(pd_optimizer *opt);
/* clear_grad(set_to_zero): zero (true, Paddle's default) or drop the grads. */
PD_API void pd_optimizer_clear_grad(pd_optimizer *opt, bool set_to_zero);
/* minimize(loss): backward from loss, then step. When loss is a static
 * Variable it appends the backward and the updates to loss's Program
 * instead (paddlec/static.h). */
PD_API pd_status pd_optimizer_minimize(pd_optimizer *opt, pd_tensor *loss);
/* get_lr(): the scheduler's current value or the float rate. NAN for NULL. */
PD_API double pd_optimizer_get_lr(const pd_optimizer *opt);
/* set_lr(value): an error when the rate comes from a scheduler. */
PD_API pd_status pd_optimizer_set_lr(pd_optimizer *opt, double value);
/* set_lr_scheduler(s): the rate follows s from now on (retained). */
PD_API pd_status pd_optimizer_set_lr_scheduler(pd_optimizer *opt, pd_lr_scheduler *s);
/* The scheduler in use (borrowed; NULL for a float rate). */
PD_API pd_lr_scheduler *pd_optimizer_lr_scheduler(const pd_optimizer *opt);
/* The class name ("Adam", ...). */
PD_API const char *pd_optimizer_name(const pd_optimizer *opt);

/* state_dict(): the accumulators by Paddle's names ("linear_0.w_0_moment1_0",
 * "..._beta1_pow_acc_0"), master weights as "master_weights.<param name>",
 * and, with a scheduler, its state as 0-D tensors "LR_Scheduler.last_epoch",
 * "LR_Scheduler.last_lr", ... Entries exist for parameters that have been
 * updated (or loaded). The tensors are borrowed: they stay valid until the
 * optimizer is released or state_dict is called again; free the list with
 * pd_named_tensors_free. */
PD_API pd_status pd_optimizer_state_dict(pd_optimizer *opt, pd_named_tensors *out);
/* set_state_dict(sd): copies matching entries in (shapes must match; dtypes
 * are converted), creating the accumulators of parameters sd covers. An
 * accumulator that exists but is missing from sd is an error naming it, as
 * is a missing LR_Scheduler entry when a scheduler is in use. */
PD_API pd_status pd_optimizer_set_state_dict(pd_optimizer *opt, const pd_named_tensors *sd);
/* Adds a reference (an optimizer starts with one, its creator's); returns
 * opt. Objects that keep an optimizer (a DistModel) hold one, so the
 * caller may release its own at any time. NULL is a no-op. */
PD_API pd_optimizer *pd_optimizer_retain(pd_optimizer *opt);
/* Drops one reference; the last one frees the optimizer, its state, and
 * its references (a wrapper's: the optimizer it wraps). NULL is a no-op. */
PD_API void pd_optimizer_release(pd_optimizer *opt);

#ifdef __cplusplus
}
#endif
#endif
