/* adagrad_, adadelta_ and rmsprop_: inplace updates of param and accumulators. */
#include "optim_util.h"

/* adagrad_: f0 epsilon. */
static void adagrad_prep(const pd_attrs *at, double lr, const double *pows, pd_optim_args *a) {
  (void)lr;
  (void)pows;
  a->s[0] = at->f[0];
}
static const pd_optim_op_desc k_adagrad = {
    1, 0, "param, grad, learning_rate, moment", adagrad_prep, NULL, &pd_optim_adagrad_rule};

/* adadelta_: f0 rho, f1 epsilon. */
static void adadelta_prep(const pd_attrs *at, double lr, const double *pows, pd_optim_args *a) {
  (void)lr;
  (void)pows;
  a->s[0] = at->f[0];
  a->s[1] = at->f[1];
}
static const pd_optim_op_desc k_adadelta = {
    2,
    0,
    "param, grad, learning_rate, avg_squared_grad, avg_squared_update",
    adadelta_prep,
    NULL,
    &pd_optim_adadelta_rule};

/* rmsprop_: f0 rho, f1 epsilon, f2 momentum, i2 centered. */
static void rmsprop_prep(const pd_attrs *at, double lr, const double *pows, pd_optim_args *a) {
  (void)lr;
  (void)pows;
  a->s[0] = at->f[0];
  a->s[1] = at->f[1];
  a->s[2] = at->f[2];
  a->flag = at->i[2] != 0;
}
static const pd_optim_op_desc k_rmsprop = {3,
                                           0,
                                           "param, grad, learning_rate, moment, mean_square, mean_grad",
                                           rmsprop_prep,
                                           NULL,
                                           &pd_optim_rmsprop_rule};

PD_OPTIM_OP(adagrad, k_adagrad, "i0:multi_precision,i1:has_grad_scale,f0:epsilon,s:grad_transform")
PD_OPTIM_OP(adadelta, k_adadelta, "i0:multi_precision,i1:has_grad_scale,f0:rho,f1:epsilon,s:grad_transform")
PD_OPTIM_OP(rmsprop, k_rmsprop,
            "i0:multi_precision,i1:has_grad_scale,i2:centered,f0:rho,f1:epsilon,f2:momentum,s:grad_transform")
