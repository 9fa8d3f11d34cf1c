/* Internals shared by the optimizer sources: the per-kind table, resolved
 * hyperparameters, scheduler state access and the clipping scales. */
#ifndef PADDLEC_OPTIM_INTERNAL_H
#define PADDLEC_OPTIM_INTERNAL_H

#include "../ops/op_registry.h"
#include "paddlec/optim.h"

typedef enum pd_optim_kind {
  PD_OPTIM_SGD,
  PD_OPTIM_MOMENTUM,
  PD_OPTIM_ADAM,
  PD_OPTIM_ADAMW,
  PD_OPTIM_ADAMAX,
  PD_OPTIM_ADAGRAD,
  PD_OPTIM_ADADELTA,
  PD_OPTIM_RMSPROP,
  PD_OPTIM_LAMB,
} pd_optim_kind;

/* The hyperparameters of one parameter group, defaults filled in. */
typedef struct pd_optim_hyper {
  double beta1, beta2, epsilon, momentum, rho, coeff, initial_accumulator, rescale_grad;
  bool nesterov, centered, always_adapt;
  pd_regularizer weight_decay;
  pd_grad_clip clip;
  double (*lr_ratio)(const pd_tensor *param, void *user);
  bool (*apply_decay)(const char *name, void *user);
  bool (*exclude_decay)(const pd_tensor *param, void *user);
  void *user;
} pd_optim_hyper;

/* What a constructor tells the shared base about its options struct: the
 * struct pd_optimizer_<name>_defaults() returns (what NULL options mean),
 * that function's name when it exists (a struct must then start from it:
 * its explicit_zero set; NULL for SGD, whose defaults are all zero), and how the struct's own fields are read
 * into the hyperparameters, validated. Every options struct starts with PD_OPTIMIZER_COMMON_FIELDS, read
 * through pd_optimizer_common_opts. */
typedef struct pd_optim_spec {
  pd_optim_kind kind;
  const void *defaults;
  const char *defaults_fn;
  pd_status (*read)(const void *opts, pd_optim_hyper *h);
} pd_optim_spec;

pd_optimizer *pd_optim_create(const pd_optim_spec *spec, double learning_rate, pd_tensor *const *params,
                              int n_params, const void *opts);

/* An optimizer that wraps another (fleet.distributed_optimizer): step and
 * clear_grad go to ops with ctx, learning rate, name and state dicts to
 * `inner`. On success the wrapper owns inner and ctx (ops->release(ctx),
 * may be NULL, then inner is released). */
typedef struct pd_optim_wrapper_ops {
  pd_status (*step)(void *ctx, pd_optimizer *inner);
  void (*clear_grad)(void *ctx, pd_optimizer *inner, bool set_to_zero);
  void (*release)(void *ctx);
} pd_optim_wrapper_ops;
pd_optimizer *pd_optim_wrap(pd_optimizer *inner, const pd_optim_wrapper_ops *ops, void *ctx);
/* ctx of a wrapper built with ops; NULL for any other optimizer. */
void *pd_optim_wrapper_ctx(const pd_optimizer *o, const pd_optim_wrapper_ops *ops);
/* The wrapped optimizer; NULL when o is not a wrapper. */
pd_optimizer *pd_optim_wrapper_inner(const pd_optimizer *o);
/* The parameters an optimizer updates (a wrapper's are its inner one's):
 * their count, and parameter i (borrowed; NULL out of range). */
int pd_optim_n_params(const pd_optimizer *o);
pd_tensor *pd_optim_param(const pd_optimizer *o, int i);

/* ---- static mode -----------------------------------------------------------
 * minimize(loss) on a static Variable appends to its Program: the static
 * graph installs the function that does it (it lives in a layer above). */
typedef pd_status (*pd_optim_static_minimize_fn)(pd_optimizer *o, pd_tensor *loss);
void pd_optim_set_static_minimize(pd_optim_static_minimize_fn fn);
/* How o updates parameter p (named pname) in a static Program, the same
 * update its eager step makes: the update op and its attributes (gradient
 * transform included), p's learning rate at this moment, and the
 * accumulators (names as Paddle's, initial values), and the norm clipping
 * the caller records as a grad_scale input. rescale_grad and
 * multi_precision are not available there yet (errors). */
#define PD_OPTIM_MAX_STATE 6 /* accumulators and beta powers of one update op */
typedef struct pd_optim_update_desc {
  pd_op_id op;
  pd_attrs attrs;
  double lr;
  /* with a scheduler, lr is its current value times lr_mult (borrowed) */
  pd_lr_scheduler *lr_scheduler;
  double lr_mult;
  int n_acc, n_pow; /* accumulators shaped like p, then one-element beta powers */
  const char *acc_names[PD_OPTIM_MAX_STATE];
  double acc_fill[PD_OPTIM_MAX_STATE];
  const char *opt_name; /* the optimizer's name option, or NULL */
  /* norm clipping of this gradient (kind NONE: none); by global norm, the
   * norm is over the gradients of the same group that are clipped */
  pd_grad_clip norm_clip;
  int group;
} pd_optim_update_desc;
pd_status pd_optim_describe_update(const pd_optimizer *o, const pd_tensor *p, const char *pname,
                                   pd_optim_update_desc *u);
/* Accumulator k (in pd_optim_update_desc order) of o's parameter p, created
 * as the first eager step would when p has none yet: the tensor the eager
 * step updates in place, so a static Program that updates it instead keeps
 * state_dict and later eager steps current. Borrowed; NULL with an error
 * when p is not o's or k is out of range. */
pd_tensor *pd_optim_accumulator(pd_optimizer *o, const pd_tensor *p, int k);

/* Checks a clipping strategy (op names the caller). */
pd_status pd_grad_clip_check(const char *op, const pd_grad_clip *clip);
/* The multiplier norm clipping gives a gradient of squared norm sq (by norm)
 * or a group of total squared norm sq (by global norm); 1 when none. */
double pd_grad_clip_scale(const pd_grad_clip *clip, double sq);
/* Squared L2 norm of g through the squared_l2_norm op; negative on error. */
double pd_grad_squared_norm(pd_tensor *g);

/* Scheduler state for state dicts: keys (prefixed) and values. */
#define PD_LR_MAX_STATE 16
typedef struct pd_lr_state_entry {
  char key[96];
  double value;
  bool is_int;
} pd_lr_state_entry;
/* Lists s's state under `prefix` ("LR_Scheduler"); returns the count. */
int pd_lr_state_list(const pd_lr_scheduler *s, const char *prefix, pd_lr_state_entry *out, int cap);
/* Sets one entry (key without the prefix, e.g. "last_epoch" or
 * "LinearWarmup_LR.last_lr"). */
pd_status pd_lr_state_set(pd_lr_scheduler *s, const char *key, double value);

#endif
