/* The optimizer constructors: for each optimizer its Paddle defaults, how its
 * own options are read and checked, and one call to the shared base
 * (optimizer.c), which reads the common options, enforces the options rule
 * (optim.h: a struct with a pd_*_defaults() starts from it) and builds it. */
#include <math.h>
#include <string.h>

#include "optim_internal.h"

/* The public functions of an optimizer, all one path: pd_optimizer_<name>()
 * hands its options to the shared base with <name>_spec (defaults, rule,
 * reading), and pd_optimizer_<name>_defaults() returns <name>_defaults. */
#define PD_OPTIMIZER_CONSTRUCTOR(name)                                                            \
  pd_optimizer *pd_optimizer_##name(double learning_rate, pd_tensor *const *params, int n_params, \
                                    const pd_optimizer_##name##_opts *opts) {                     \
    return pd_optim_create(&name##_spec, learning_rate, params, n_params, opts);                  \
  }
#define PD_OPTIMIZER_WITH_DEFAULTS(name)                                                      \
  pd_optimizer_##name##_opts pd_optimizer_##name##_defaults(void) { return name##_defaults; } \
  PD_OPTIMIZER_CONSTRUCTOR(name)

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

static pd_status check_adam(const char *cls, const pd_optim_hyper *h) {
  pd_status st = check_beta(cls, "beta1", h->beta1);
  if (st == PD_OK) st = check_beta(cls, "beta2", h->beta2);
  if (st == PD_OK) st = check_nonneg(cls, "epsilon", h->epsilon);
  return st != PD_OK ? st : check_common(cls, h);
}

/* ---- SGD ------------------------------------------------------------------------------ */
static const pd_optimizer_sgd_opts sgd_defaults = {0};

static pd_status sgd_read(const void *opts, pd_optim_hyper *h) {
  const pd_optimizer_sgd_opts *o = opts;
  h->weight_decay = o->weight_decay;
  return check_common("SGD", h);
}

static const pd_optim_spec sgd_spec = {PD_OPTIM_SGD, &sgd_defaults, NULL, sgd_read};

PD_OPTIMIZER_CONSTRUCTOR(sgd)

/* ---- Momentum ------------------------------------------------------------------------- */
static const pd_optimizer_momentum_opts momentum_defaults = {
    .explicit_zero = true, .momentum = 0.9, .rescale_grad = 1.0};

static pd_status momentum_read(const void *opts, pd_optim_hyper *h) {
  const pd_optimizer_momentum_opts *o = opts;
  h->momentum = o->momentum;
  h->rescale_grad = o->rescale_grad;
  h->nesterov = o->use_nesterov;
  h->weight_decay = o->weight_decay;
  pd_status st = check_nonneg("Momentum", "momentum", h->momentum);
  if (st == PD_OK && !isfinite(h->rescale_grad))
    st = pd_set_error(PD_ERR_INVALID, "Momentum: rescale_grad must be finite, got %g", h->rescale_grad);
  return st != PD_OK ? st : check_common("Momentum", h);
}

static const pd_optim_spec momentum_spec = {PD_OPTIM_MOMENTUM, &momentum_defaults,
                                            "pd_optimizer_momentum_defaults()", momentum_read};

PD_OPTIMIZER_WITH_DEFAULTS(momentum)

/* ---- Adam / AdamW / Adamax ------------------------------------------------------------- */
static const pd_optimizer_adam_opts adam_defaults = {
    .explicit_zero = true, .beta1 = 0.9, .beta2 = 0.999, .epsilon = 1e-8};

static pd_status adam_read(const void *opts, pd_optim_hyper *h) {
  const pd_optimizer_adam_opts *o = opts;
  h->beta1 = o->beta1;
  h->beta2 = o->beta2;
  h->epsilon = o->epsilon;
  h->weight_decay = o->weight_decay;
  return check_adam("Adam", h);
}

static const pd_optim_spec adam_spec = {PD_OPTIM_ADAM, &adam_defaults, "pd_optimizer_adam_defaults()",
                                        adam_read};

PD_OPTIMIZER_WITH_DEFAULTS(adam)

static const pd_optimizer_adam_w_opts adam_w_defaults = {
    .explicit_zero = true, .beta1 = 0.9, .beta2 = 0.999, .epsilon = 1e-8, .weight_decay = 0.01};

static pd_status adam_w_read(const void *opts, pd_optim_hyper *h) {
  const pd_optimizer_adam_w_opts *o = opts;
  h->beta1 = o->beta1;
  h->beta2 = o->beta2;
  h->epsilon = o->epsilon;
  h->coeff = o->weight_decay;
  h->lr_ratio = o->lr_ratio;
  h->apply_decay = o->apply_decay_param_fun;
  h->user = o->user;
  pd_status st = check_nonneg("AdamW", "weight_decay", h->coeff);
  return st != PD_OK ? st : check_adam("AdamW", h);
}

static const pd_optim_spec adam_w_spec = {PD_OPTIM_ADAMW, &adam_w_defaults, "pd_optimizer_adam_w_defaults()",
                                          adam_w_read};

PD_OPTIMIZER_WITH_DEFAULTS(adam_w)

static const pd_optimizer_adamax_opts adamax_defaults = {
    .explicit_zero = true, .beta1 = 0.9, .beta2 = 0.999, .epsilon = 1e-8};

static pd_status adamax_read(const void *opts, pd_optim_hyper *h) {
  const pd_optimizer_adamax_opts *o = opts;
  h->beta1 = o->beta1;
  h->beta2 = o->beta2;
  h->epsilon = o->epsilon;
  h->weight_decay = o->weight_decay;
  return check_adam("Adamax", h);
}

static const pd_optim_spec adamax_spec = {PD_OPTIM_ADAMAX, &adamax_defaults, "pd_optimizer_adamax_defaults()",
                                          adamax_read};

PD_OPTIMIZER_WITH_DEFAULTS(adamax)

/* ---- Adagrad / Adadelta / RMSProp ------------------------------------------------------ */
static const pd_optimizer_adagrad_opts adagrad_defaults = {.explicit_zero = true, .epsilon = 1e-6};

static pd_status adagrad_read(const void *opts, pd_optim_hyper *h) {
  const pd_optimizer_adagrad_opts *o = opts;
  h->epsilon = o->epsilon;
  h->initial_accumulator = o->initial_accumulator_value;
  h->weight_decay = o->weight_decay;
  pd_status st = check_nonneg("Adagrad", "epsilon", h->epsilon);
  if (st == PD_OK) st = check_nonneg("Adagrad", "initial_accumulator_value", h->initial_accumulator);
  return st != PD_OK ? st : check_common("Adagrad", h);
}

static const pd_optim_spec adagrad_spec = {PD_OPTIM_ADAGRAD, &adagrad_defaults,
                                           "pd_optimizer_adagrad_defaults()", adagrad_read};

PD_OPTIMIZER_WITH_DEFAULTS(adagrad)

static const pd_optimizer_adadelta_opts adadelta_defaults = {
    .explicit_zero = true, .epsilon = 1e-6, .rho = 0.95};

static pd_status adadelta_read(const void *opts, pd_optim_hyper *h) {
  const pd_optimizer_adadelta_opts *o = opts;
  h->epsilon = o->epsilon;
  h->rho = o->rho;
  h->weight_decay = o->weight_decay;
  pd_status st = check_nonneg("Adadelta", "epsilon", h->epsilon);
  if (st == PD_OK) st = check_nonneg("Adadelta", "rho", h->rho);
  return st != PD_OK ? st : check_common("Adadelta", h);
}

static const pd_optim_spec adadelta_spec = {PD_OPTIM_ADADELTA, &adadelta_defaults,
                                            "pd_optimizer_adadelta_defaults()", adadelta_read};

PD_OPTIMIZER_WITH_DEFAULTS(adadelta)

static const pd_optimizer_rms_prop_opts rms_prop_defaults = {
    .explicit_zero = true, .rho = 0.95, .epsilon = 1e-6};

static pd_status rms_prop_read(const void *opts, pd_optim_hyper *h) {
  const pd_optimizer_rms_prop_opts *o = opts;
  h->rho = o->rho;
  h->epsilon = o->epsilon;
  h->momentum = o->momentum;
  h->centered = o->centered;
  h->weight_decay = o->weight_decay;
  pd_status st = check_nonneg("RMSProp", "rho", h->rho);
  if (st == PD_OK) st = check_nonneg("RMSProp", "epsilon", h->epsilon);
  if (st == PD_OK) st = check_nonneg("RMSProp", "momentum", h->momentum);
  return st != PD_OK ? st : check_common("RMSProp", h);
}

static const pd_optim_spec rms_prop_spec = {PD_OPTIM_RMSPROP, &rms_prop_defaults,
                                            "pd_optimizer_rms_prop_defaults()", rms_prop_read};

PD_OPTIMIZER_WITH_DEFAULTS(rms_prop)

/* ---- Lamb ----------------------------------------------------------------------------- */
static const pd_optimizer_lamb_opts lamb_defaults = {
    .explicit_zero = true, .lamb_weight_decay = 0.01, .beta1 = 0.9, .beta2 = 0.999, .epsilon = 1e-6};

static pd_status lamb_read(const void *opts, pd_optim_hyper *h) {
  const pd_optimizer_lamb_opts *o = opts;
  h->coeff = o->lamb_weight_decay;
  h->beta1 = o->beta1;
  h->beta2 = o->beta2;
  h->epsilon = o->epsilon;
  h->exclude_decay = o->exclude_from_weight_decay_fn;
  h->user = o->user;
  h->always_adapt = o->always_adapt;
  pd_status st = check_nonneg("Lamb", "lamb_weight_decay", h->coeff);
  return st != PD_OK ? st : check_adam("Lamb", h);
}

static const pd_optim_spec lamb_spec = {PD_OPTIM_LAMB, &lamb_defaults, "pd_optimizer_lamb_defaults()",
                                        lamb_read};

PD_OPTIMIZER_WITH_DEFAULTS(lamb)
