/* adam_, adamw_, adamax_ and lamb_: inplace updates of param, moments and
 * beta powers (the powers hold beta^t for the step being taken). */
#include <math.h>

#include "optim_util.h"

/* adam_ / adamw_: f0 beta1, f1 beta2, f2 epsilon (adamw_: f3 coeff, i2 with_decay). */
static void adam_fill(const pd_attrs *at, double lr, const double *pows, pd_optim_args *a, double decay) {
  double b1p = pows[0], b2p = pows[1];
  a->s[0] = at->f[0];
  a->s[1] = at->f[1];
  a->s[2] = lr * sqrt(1.0 - b2p) / (1.0 - b1p);
  a->s[3] = at->f[2] * sqrt(1.0 - b2p);
  a->s[4] = decay;
}
static void adam_prep(const pd_attrs *at, double lr, const double *pows, pd_optim_args *a) {
  adam_fill(at, lr, pows, a, 1.0);
}
static void adamw_prep(const pd_attrs *at, double lr, const double *pows, pd_optim_args *a) {
  adam_fill(at, lr, pows, a, at->i[2] ? 1.0 - lr * at->f[3] : 1.0);
}
static void two_pows_post(const pd_attrs *at, double *pows, bool f32) {
  pows[0] = pd_optim_pow_step(at->f[0], pows[0], f32);
  pows[1] = pd_optim_pow_step(at->f[1], pows[1], f32);
}

#define ADAM_INPUTS "param, grad, learning_rate, moment1, moment2, beta1_pow, beta2_pow"
static const pd_optim_op_desc k_adam = {2, 2, ADAM_INPUTS, adam_prep, two_pows_post, &pd_optim_adam_rule};
static const pd_optim_op_desc k_adamw = {2, 2, ADAM_INPUTS, adamw_prep, two_pows_post, &pd_optim_adam_rule};

/* adamax_: f0 beta1, f1 beta2, f2 epsilon. */
static void adamax_prep(const pd_attrs *at, double lr, const double *pows, pd_optim_args *a) {
  a->s[0] = at->f[0];
  a->s[1] = at->f[1];
  a->s[2] = at->f[2];
  a->s[3] = lr / (1.0 - pows[0]);
}
static void adamax_post(const pd_attrs *at, double *pows, bool f32) {
  pows[0] = pd_optim_pow_step(at->f[0], pows[0], f32);
}
static const pd_optim_op_desc k_adamax = {
    2,           1,           "param, grad, learning_rate, moment, inf_norm, beta1_pow",
    adamax_prep, adamax_post, &pd_optim_adamax_rule};

/* lamb_: f0 beta1, f1 beta2, f2 epsilon, f3 weight_decay, i2 always_adapt. */
static void lamb_prep(const pd_attrs *at, double lr, const double *pows, pd_optim_args *a) {
  (void)lr;
  a->s[0] = at->f[0];
  a->s[1] = at->f[1];
  a->s[2] = at->f[2];
  a->s[3] = at->f[3];
  a->s[4] = 1.0 - pows[0];
  a->s[5] = 1.0 - pows[1];
  a->flag = at->i[2] != 0;
}
static const pd_optim_op_desc k_lamb = {2, 2, ADAM_INPUTS, lamb_prep, two_pows_post, NULL};

pd_status pd_optim_lamb_kernel_reduced(const pd_kernel_ctx *ctx, pdk_lamb_sums_fn reduce, void *user) {
  return pd_optim_kernel_reduced(&k_lamb, ctx, reduce, user);
}

PD_OPTIM_OP(adam, k_adam,
            "i0:multi_precision,i1:has_grad_scale,f0:beta1,f1:beta2,f2:epsilon,s:grad_transform")
PD_OPTIM_OP(adamw, k_adamw,
            "i0:multi_precision,i1:has_grad_scale,i2:with_decay,f0:beta1,f1:beta2,f2:epsilon,f3:coeff,"
            "s:grad_transform")
PD_OPTIM_OP(adamax, k_adamax,
            "i0:multi_precision,i1:has_grad_scale,f0:beta1,f1:beta2,f2:epsilon,s:grad_transform")
PD_OPTIM_OP(
    lamb, k_lamb,
    "i0:multi_precision,i1:has_grad_scale,i2:always_adapt,f0:beta1,f1:beta2,f2:epsilon,f3:weight_decay,"
    "s:grad_transform")
