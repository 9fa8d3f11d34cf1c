/* sgd_ and momentum_: inplace updates of param (and velocity). */
#include "optim_util.h"

static void sgd_prep(const pd_attrs *at, double lr, const double *pows, pd_optim_args *a) {
  (void)at;
  (void)lr;
  (void)pows;
  (void)a;
}
static const pd_optim_op_desc k_sgd = {0,        0,    "param, grad, learning_rate",
                                       sgd_prep, NULL, &pd_optim_sgd_rule};

/* momentum_: f0 mu, i2 use_nesterov. */
static void momentum_prep(const pd_attrs *at, double lr, const double *pows, pd_optim_args *a) {
  (void)lr;
  (void)pows;
  a->s[0] = at->f[0];
  a->flag = at->i[2] != 0;
}
static const pd_optim_op_desc k_momentum = {
    1, 0, "param, grad, learning_rate, velocity", momentum_prep, NULL, &pd_optim_momentum_rule};

PD_OPTIM_OP(sgd, k_sgd, "i0:multi_precision,i1:has_grad_scale,s:grad_transform")
PD_OPTIM_OP(momentum, k_momentum,
            "i0:multi_precision,i1:has_grad_scale,i2:use_nesterov,f0:mu,s:grad_transform")
