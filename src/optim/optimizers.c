/* The optimizer constructors: Paddle's defaults and argument checks, then
 * the shared base (optimizer.c). */
#include <math.h>
#include <string.h>

#include "optim_internal.h"

/* A zero field takes its default unless the struct asks for explicit zeros. */
#define DEFAULT(field, value) \
  if (!o->explicit_zero && h->field == 0) h->field = (value)

static pd_status check_common(const char *cls, const pd_optim_hyper *h) {
  const pd_regularizer *r = &h->weight_decay;
  if ((unsigned)r->kind > PD_REGULARIZER_L2 || !isfinite(r->coeff))
    return pd_set_error(PD_ERR_INVALID, "%s: weight_decay regularizer (kind %d, coeff %g) is invalid", cls,
                        (int)r->kind, r->coeff);
  return pd_grad_clip_check(cls, &h->clip);
}

static pd_status check_beta(const char *cls, const char *what, double v) {
  if (!(v >= 0 && v < 1))
    return pd_set_error(PD_ERR_INVALID, "%s: %s must be in [0, 1), got %g", cls, what, v);
  return PD_OK;
}

static pd_status check_nonneg(const char *cls, const char *what, double v) {
  if (!(v >= 0) || !isfinite(v))
    return pd_set_error(PD_ERR_INVALID, "%s: %s must be >= 0, got %g", cls, what, v);
  return PD_OK;
}

static void take_clip(pd_optim_hyper *h, const pd_grad_clip *c) {
  if (c) h->clip = *c;
}

#define COMMON(opts)                                                                                \
  pd_optim_common c = {0};                                                                          \
  if (opts) c = (pd_optim_common) {                                                                 \
      (opts)->lr_scheduler, (opts)->multi_precision, (opts)->groups, (opts)->n_groups, (opts)->name \
    }

/* ---- SGD --------------------------------------------------------------------------- */
static pd_status sgd_convert(const void *opts, pd_optim_hyper *h) {
  static const pd_optimizer_sgd_opts dflt;
  const pd_optimizer_sgd_opts *o = opts ? opts : &dflt;
  h->weight_decay = o->weight_decay;
  take_clip(h, o->grad_clip);
  return check_common("SGD", h);
}

pd_optimizer *pd_optimizer_sgd(double learning_rate, pd_tensor *const *params, int n_params,
                               const pd_optimizer_sgd_opts *opts) {
  COMMON(opts);
  return pd_optim_create(PD_OPTIM_SGD, learning_rate, params, n_params, &c, opts, sgd_convert);
}

/* ---- Momentum ---------------------------------------------------------------------- */
pd_optimizer_momentum_opts pd_optimizer_momentum_defaults(void) {
  return (pd_optimizer_momentum_opts){.momentum = 0.9, .rescale_grad = 1.0, .explicit_zero = true};
}

static pd_status momentum_convert(const void *opts, pd_optim_hyper *h) {
  static const pd_optimizer_momentum_opts dflt;
  const pd_optimizer_momentum_opts *o = opts ? opts : &dflt;
  h->momentum = o->momentum;
  h->rescale_grad = o->rescale_grad;
  h->nesterov = o->use_nesterov;
  h->weight_decay = o->weight_decay;
  take_clip(h, o->grad_clip);
  DEFAULT(momentum, 0.9);
  DEFAULT(rescale_grad, 1.0);
  pd_status st = check_nonneg("Momentum", "momentum", h->momentum);
  if (st == PD_OK && !isfinite(h->rescale_grad))
    st = pd_set_error(PD_ERR_INVALID, "Momentum: rescale_grad must be finite, got %g", h->rescale_grad);
  return st != PD_OK ? st : check_common("Momentum", h);
}

pd_optimizer *pd_optimizer_momentum(double learning_rate, pd_tensor *const *params, int n_params,
                                    const pd_optimizer_momentum_opts *opts) {
  COMMON(opts);
  return pd_optim_create(PD_OPTIM_MOMENTUM, learning_rate, params, n_params, &c, opts, momentum_convert);
}

/* ---- Adam / AdamW / Adamax ------------------------------------------------------------- */
static pd_status check_adam(const char *cls, const pd_optim_hyper *h) {
  pd_status st = check_beta(cls, "beta1", h->beta1);
  if (st == PD_OK) st = check_beta(cls, "beta2", h->beta2);
  if (st == PD_OK) st = check_nonneg(cls, "epsilon", h->epsilon);
  return st != PD_OK ? st : check_common(cls, h);
}

pd_optimizer_adam_opts pd_optimizer_adam_defaults(void) {
  return (pd_optimizer_adam_opts){.beta1 = 0.9, .beta2 = 0.999, .epsilon = 1e-8, .explicit_zero = true};
}

/* Adam and Adamax read the same options: moments, epsilon, regularizer, clip. */
typedef struct adam_like_opts {
  double beta1, beta2, epsilon;
  pd_regularizer weight_decay;
  const pd_grad_clip *grad_clip;
  bool explicit_zero;
} adam_like_opts;

static pd_status adam_family(const char *name, const adam_like_opts *o, pd_optim_hyper *h) {
  h->beta1 = o->beta1;
  h->beta2 = o->beta2;
  h->epsilon = o->epsilon;
  h->weight_decay = o->weight_decay;
  take_clip(h, o->grad_clip);
  DEFAULT(beta1, 0.9);
  DEFAULT(beta2, 0.999);
  DEFAULT(epsilon, 1e-8);
  return check_adam(name, h);
}

static pd_status adam_convert(const void *opts, pd_optim_hyper *h) {
  static const pd_optimizer_adam_opts dflt;
  const pd_optimizer_adam_opts *o = opts ? opts : &dflt;
  return adam_family(
      "Adam",
      &(adam_like_opts){o->beta1, o->beta2, o->epsilon, o->weight_decay, o->grad_clip, o->explicit_zero}, h);
}

pd_optimizer *pd_optimizer_adam(double learning_rate, pd_tensor *const *params, int n_params,
                                const pd_optimizer_adam_opts *opts) {
  COMMON(opts);
  return pd_optim_create(PD_OPTIM_ADAM, learning_rate, params, n_params, &c, opts, adam_convert);
}

pd_optimizer_adam_w_opts pd_optimizer_adam_w_defaults(void) {
  return (pd_optimizer_adam_w_opts){
      .beta1 = 0.9, .beta2 = 0.999, .epsilon = 1e-8, .weight_decay = 0.01, .explicit_zero = true};
}

static pd_status adamw_convert(const void *opts, pd_optim_hyper *h) {
  static const pd_optimizer_adam_w_opts dflt;
  const pd_optimizer_adam_w_opts *o = opts ? opts : &dflt;
  h->beta1 = o->beta1;
  h->beta2 = o->beta2;
  h->epsilon = o->epsilon;
  h->coeff = o->weight_decay;
  h->lr_ratio = o->lr_ratio;
  h->apply_decay = o->apply_decay_param_fun;
  h->user = o->user;
  take_clip(h, o->grad_clip);
  DEFAULT(beta1, 0.9);
  DEFAULT(beta2, 0.999);
  DEFAULT(epsilon, 1e-8);
  DEFAULT(coeff, 0.01);
  pd_status st = check_nonneg("AdamW", "weight_decay", h->coeff);
  return st != PD_OK ? st : check_adam("AdamW", h);
}

pd_optimizer *pd_optimizer_adam_w(double learning_rate, pd_tensor *const *params, int n_params,
                                  const pd_optimizer_adam_w_opts *opts) {
  COMMON(opts);
  return pd_optim_create(PD_OPTIM_ADAMW, learning_rate, params, n_params, &c, opts, adamw_convert);
}

pd_optimizer_adamax_opts pd_optimizer_adamax_defaults(void) {
  return (pd_optimizer_adamax_opts){.beta1 = 0.9, .beta2 = 0.999, .epsilon = 1e-8, .explicit_zero = true};
}

static pd_status adamax_convert(const void *opts, pd_optim_hyper *h) {
  static const pd_optimizer_adamax_opts dflt;
  const pd_optimizer_adamax_opts *o = opts ? opts : &dflt;
  return adam_family(
      "Adamax",
      &(adam_like_opts){o->beta1, o->beta2, o->epsilon, o->weight_decay, o->grad_clip, o->explicit_zero}, h);
}

pd_optimizer *pd_optimizer_adamax(double learning_rate, pd_tensor *const *params, int n_params,
                                  const pd_optimizer_adamax_opts *opts) {
  COMMON(opts);
  return pd_optim_create(PD_OPTIM_ADAMAX, learning_rate, params, n_params, &c, opts, adamax_convert);
}

/* ---- Adagrad / Adadelta / RMSProp ---------------------------------------------------------- */
pd_optimizer_adagrad_opts pd_optimizer_adagrad_defaults(void) {
  return (pd_optimizer_adagrad_opts){.epsilon = 1e-6, .explicit_zero = true};
}

static pd_status adagrad_convert(const void *opts, pd_optim_hyper *h) {
  static const pd_optimizer_adagrad_opts dflt;
  const pd_optimizer_adagrad_opts *o = opts ? opts : &dflt;
  h->epsilon = o->epsilon;
  h->initial_accumulator = o->initial_accumulator_value;
  h->weight_decay = o->weight_decay;
  take_clip(h, o->grad_clip);
  DEFAULT(epsilon, 1e-6);
  pd_status st = check_nonneg("Adagrad", "epsilon", h->epsilon);
  if (st == PD_OK) st = check_nonneg("Adagrad", "initial_accumulator_value", h->initial_accumulator);
  return st != PD_OK ? st : check_common("Adagrad", h);
}

pd_optimizer *pd_optimizer_adagrad(double learning_rate, pd_tensor *const *params, int n_params,
                                   const pd_optimizer_adagrad_opts *opts) {
  COMMON(opts);
  return pd_optim_create(PD_OPTIM_ADAGRAD, learning_rate, params, n_params, &c, opts, adagrad_convert);
}

pd_optimizer_adadelta_opts pd_optimizer_adadelta_defaults(void) {
  return (pd_optimizer_adadelta_opts){.epsilon = 1e-6, .rho = 0.95, .explicit_zero = true};
}

static pd_status adadelta_convert(const void *opts, pd_optim_hyper *h) {
  static const pd_optimizer_adadelta_opts dflt;
  const pd_optimizer_adadelta_opts *o = opts ? opts : &dflt;
  h->epsilon = o->epsilon;
  h->rho = o->rho;
  h->weight_decay = o->weight_decay;
  take_clip(h, o->grad_clip);
  DEFAULT(epsilon, 1e-6);
  DEFAULT(rho, 0.95);
  pd_status st = check_nonneg("Adadelta", "epsilon", h->epsilon);
  if (st == PD_OK) st = check_nonneg("Adadelta", "rho", h->rho);
  return st != PD_OK ? st : check_common("Adadelta", h);
}

pd_optimizer *pd_optimizer_adadelta(double learning_rate, pd_tensor *const *params, int n_params,
                                    const pd_optimizer_adadelta_opts *opts) {
  COMMON(opts);
  return pd_optim_create(PD_OPTIM_ADADELTA, learning_rate, params, n_params, &c, opts, adadelta_convert);
}

pd_optimizer_rms_prop_opts pd_optimizer_rms_prop_defaults(void) {
  return (pd_optimizer_rms_prop_opts){.rho = 0.95, .epsilon = 1e-6, .explicit_zero = true};
}

static pd_status rmsprop_convert(const void *opts, pd_optim_hyper *h) {
  static const pd_optimizer_rms_prop_opts dflt;
  const pd_optimizer_rms_prop_opts *o = opts ? opts : &dflt;
  h->rho = o->rho;
  h->epsilon = o->epsilon;
  h->momentum = o->momentum;
  h->centered = o->centered;
  h->weight_decay = o->weight_decay;
  take_clip(h, o->grad_clip);
  DEFAULT(rho, 0.95);
  DEFAULT(epsilon, 1e-6);
  pd_status st = check_nonneg("RMSProp", "rho", h->rho);
  if (st == PD_OK) st = check_nonneg("RMSProp", "epsilon", h->epsilon);
  if (st == PD_OK) st = check_nonneg("RMSProp", "momentum", h->momentum);
  return st != PD_OK ? st : check_common("RMSProp", h);
}

pd_optimizer *pd_optimizer_rms_prop(double learning_rate, pd_tensor *const *params, int n_params,
                                    const pd_optimizer_rms_prop_opts *opts) {
  COMMON(opts);
  return pd_optim_create(PD_OPTIM_RMSPROP, learning_rate, params, n_params, &c, opts, rmsprop_convert);
}

/* ---- Lamb ------------------------------------------------------------------------------- */
pd_optimizer_lamb_opts pd_optimizer_lamb_defaults(void) {
  return (pd_optimizer_lamb_opts){
      .lamb_weight_decay = 0.01, .beta1 = 0.9, .beta2 = 0.999, .epsilon = 1e-6, .explicit_zero = true};
}

static pd_status lamb_convert(const void *opts, pd_optim_hyper *h) {
  static const pd_optimizer_lamb_opts dflt;
  const pd_optimizer_lamb_opts *o = opts ? opts : &dflt;
  h->coeff = o->lamb_weight_decay;
  h->beta1 = o->beta1;
  h->beta2 = o->beta2;
  h->epsilon = o->epsilon;
  h->exclude_decay = o->exclude_from_weight_decay_fn;
  h->user = o->user;
  h->always_adapt = o->always_adapt;
  take_clip(h, o->grad_clip);
  DEFAULT(coeff, 0.01);
  DEFAULT(beta1, 0.9);
  DEFAULT(beta2, 0.999);
  DEFAULT(epsilon, 1e-6);
  pd_status st = check_nonneg("Lamb", "lamb_weight_decay", h->coeff);
  return st != PD_OK ? st : check_adam("Lamb", h);
}

pd_optimizer *pd_optimizer_lamb(double learning_rate, pd_tensor *const *params, int n_params,
                                const pd_optimizer_lamb_opts *opts) {
  COMMON(opts);
  return pd_optim_create(PD_OPTIM_LAMB, learning_rate, params, n_params, &c, opts, lamb_convert);
}
