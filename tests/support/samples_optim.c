/* Samples for the optimizer update ops: param, grad, learning_rate, the
 * accumulators shaped like param and the one-element beta powers, in the
 * order optim_util.h gives. */
#include "op_samples.h"

#define S(...) ((const int64_t[]){__VA_ARGS__})

static int update(pd_tensor **in, int n_acc, int n_pow) {
  int n = 0;
  in[n++] = sample_uniform(2, S(3, 2), -1, 1);
  in[n++] = sample_uniform(2, S(3, 2), -1, 1);
  in[n++] = pd_full(1, S(1), 0.1, PD_FLOAT64);
  for (int k = 0; k < n_acc; k++) in[n++] = sample_uniform(2, S(3, 2), 0.1, 1);
  for (int k = 0; k < n_pow; k++) in[n++] = pd_full(1, S(1), 0.9, PD_FLOAT64);
  return n;
}
static void adam_attrs(pd_attrs *a) {
  a->f[0] = 0.9;
  a->f[1] = 0.999;
  a->f[2] = 1e-8;
}
static int s_sgd(pd_tensor **in, pd_attrs *a) {
  (void)a;
  return update(in, 0, 0);
}
static int s_momentum(pd_tensor **in, pd_attrs *a) {
  a->f[0] = 0.9;
  return update(in, 1, 0);
}
static int s_adam(pd_tensor **in, pd_attrs *a) {
  adam_attrs(a);
  return update(in, 2, 2);
}
static int s_adamw(pd_tensor **in, pd_attrs *a) {
  adam_attrs(a);
  a->i[2] = 1;
  a->f[3] = 0.01;
  return update(in, 2, 2);
}
static int s_adamax(pd_tensor **in, pd_attrs *a) {
  adam_attrs(a);
  return update(in, 2, 1);
}
static int s_adagrad(pd_tensor **in, pd_attrs *a) {
  a->f[0] = 1e-6;
  return update(in, 1, 0);
}
static int s_adadelta(pd_tensor **in, pd_attrs *a) {
  a->f[0] = 0.95;
  a->f[1] = 1e-6;
  return update(in, 2, 0);
}
static int s_rmsprop(pd_tensor **in, pd_attrs *a) {
  a->f[0] = 0.95;
  a->f[1] = 1e-6;
  return update(in, 3, 0);
}
static int s_lamb(pd_tensor **in, pd_attrs *a) {
  adam_attrs(a);
  a->f[3] = 0.01;
  return update(in, 2, 2);
}
static int s_squared_l2_norm(pd_tensor **in, pd_attrs *a) {
  (void)a;
  in[0] = sample_uniform(2, S(3, 2), -1, 1);
  return 1;
}

const pd_op_sample pd_samples_optim[] = {
    {"sgd_", s_sgd, 0},
    {"momentum_", s_momentum, 0},
    {"adam_", s_adam, 0},
    {"adamw_", s_adamw, 0},
    {"adamax_", s_adamax, 0},
    {"adagrad_", s_adagrad, 0},
    {"adadelta_", s_adadelta, 0},
    {"rmsprop_", s_rmsprop, 0},
    {"lamb_", s_lamb, 0},
    {"squared_l2_norm", s_squared_l2_norm, 0},
    {NULL, NULL, 0},
};
