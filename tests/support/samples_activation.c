/* Gradcheck samples for the activation ops (inputs away from the kinks of
 * relu-like functions and from softplus' threshold). */
#include "op_samples.h"

#define S(...) ((const int64_t[]){__VA_ARGS__})

static int s_sym(pd_tensor **in, pd_attrs *a) {
  (void)a;
  in[0] = sample_uniform(2, S(3, 4), -2, 2);
  return 1;
}
static int s_relu6(pd_tensor **in, pd_attrs *a) {
  (void)a;
  in[0] = sample_uniform(2, S(3, 4), -2, 8);
  return 1;
}
static int s_hardswish(pd_tensor **in, pd_attrs *a) { /* every piece of hardswish */
  (void)a;
  in[0] = sample_uniform(2, S(3, 4), -4.5, 4.5);
  return 1;
}
static int s_hard(pd_tensor **in, pd_attrs *a) { /* every piece of hardsigmoid */
  s_hardswish(in, a);
  a->f[0] = 0.1666667;
  a->f[1] = 0.5;
  return 1;
}
static int s_leaky(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, S(3, 4), -2, 2);
  a->f[0] = 0.1;
  return 1;
}
static int s_elu(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, S(3, 4), -2, 2);
  a->f[0] = 1.5;
  return 1;
}
static int s_selu(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, S(3, 4), -2, 2);
  a->f[0] = 1.0507009873554804934193349852946;
  a->f[1] = 1.6732632423543772848170429916717;
  return 1;
}
static int s_gelu_tanh(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, S(3, 4), -3, 3);
  a->i[0] = 1;
  return 1;
}
static int s_softplus(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, S(3, 4), -3, 3);
  a->f[0] = 2.0;
  a->f[1] = 20.0;
  return 1;
}
static int s_softplus_threshold(pd_tensor **in, pd_attrs *a) { /* both branches */
  in[0] = sample_uniform(2, S(3, 4), -3, 3);
  a->f[0] = 1.0;
  a->f[1] = 1.0;
  return 1;
}
static int s_softmax_last(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(3, S(2, 3, 4), -2, 2);
  a->i[0] = -1;
  return 1;
}
static int s_softmax_mid(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(3, S(2, 3, 4), -2, 2);
  a->i[0] = 1;
  return 1;
}
static int s_swiglu2(pd_tensor **in, pd_attrs *a) {
  (void)a;
  in[0] = sample_uniform(2, S(2, 3), -2, 2);
  in[1] = sample_uniform(2, S(2, 3), -2, 2);
  return 2;
}
static int s_swiglu1(pd_tensor **in, pd_attrs *a) {
  (void)a;
  in[0] = sample_uniform(2, S(2, 6), -2, 2);
  return 1;
}

static int s_celu(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, S(3, 4), -2, 2);
  a->f[0] = 1.5;
  return 1;
}
static int s_celu_neg_alpha(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, S(3, 4), -2, 2);
  a->f[0] = -0.7;
  return 1;
}
static int s_hardtanh(pd_tensor **in, pd_attrs *a) { /* every piece */
  in[0] = sample_uniform(2, S(3, 4), -2, 2);
  a->f[0] = -1.0;
  a->f[1] = 0.8;
  return 1;
}
static int s_shrink(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, S(3, 4), -2, 2);
  a->f[0] = 0.5;
  return 1;
}
static int s_mish(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, S(3, 4), -4, 4);
  a->f[0] = 20.0;
  return 1;
}
static int s_thresholded_relu(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, S(3, 4), -2, 2);
  a->f[0] = 0.5;
  a->f[1] = 0.3;
  return 1;
}
static int s_maxout_nchw(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(4, S(2, 6, 2, 3), -2, 2);
  a->i[0] = 3;
  a->i[1] = 1;
  return 1;
}
static int s_maxout_nhwc(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(4, S(2, 2, 3, 4), -2, 2);
  a->i[0] = 2;
  a->i[1] = -1;
  return 1;
}
static int s_rrelu_train(pd_tensor **in, pd_attrs *a) { /* fixed seed: every forward draws the same slopes */
  in[0] = sample_uniform(2, S(4, 5), -2, 2);
  a->f[0] = 0.1;
  a->f[1] = 0.3;
  a->i[1] = 77;
  return 1;
}
static int s_rrelu_eval(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, S(3, 4), -2, 2);
  a->f[0] = 0.125;
  a->f[1] = 1.0 / 3.0;
  a->i[0] = 1;
  return 1;
}
static int s_glu_last(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, S(3, 4), -2, 2);
  a->i[0] = -1;
  return 1;
}
static int s_glu_first(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(3, S(4, 2, 3), -2, 2);
  a->i[0] = 0;
  return 1;
}

/* The grad ops: the forward's inputs, its outputs where the grad reads
 * them, and an output gradient. */
static int s_swiglu2_grad(pd_tensor **in, pd_attrs *a) {
  int n = s_swiglu2(in, a);
  in[n] = sample_uniform(2, S(2, 3), -1, 1);
  return n + 1;
}
static int s_swiglu1_grad(pd_tensor **in, pd_attrs *a) {
  int n = s_swiglu1(in, a);
  in[n] = sample_uniform(2, S(2, 3), -1, 1);
  return n + 1;
}
static int s_maxout_grad(pd_tensor **in, pd_attrs *a) {
  s_maxout_nchw(in, a);
  in[1] = pd_dispatch1(PD_OP_maxout, in, 1, a);
  in[2] = sample_uniform(4, S(2, 2, 2, 3), -1, 1);
  return in[1] ? 3 : pd_last_status();
}

const pd_op_sample pd_samples_activation[] = {
    {"relu", s_sym, 0},
    {"relu6", s_relu6, 0},
    {"leaky_relu", s_leaky, 0},
    {"elu", s_elu, 0},
    {"selu", s_selu, 0},
    {"gelu", s_sym, 0},
    {"gelu", s_gelu_tanh, 0},
    {"sigmoid", s_sym, 0},
    {"silu", s_sym, 0},
    {"swish", s_sym, 0},
    {"softplus", s_softplus, 0},
    {"softplus", s_softplus_threshold, 0},
    {"softsign", s_sym, 0},
    {"hardswish", s_hardswish, 0},
    {"hardsigmoid", s_hard, 0},
    {"logsigmoid", s_sym, 0},
    {"softmax", s_softmax_last, 0},
    {"softmax", s_softmax_mid, 0},
    {"log_softmax", s_softmax_last, 0},
    {"log_softmax", s_softmax_mid, 0},
    {"swiglu", s_swiglu2, 0},
    {"swiglu", s_swiglu1, 0},
    {"celu", s_celu, 0},
    {"celu", s_celu_neg_alpha, 0},
    {"hardtanh", s_hardtanh, 0},
    {"hardshrink", s_shrink, 0},
    {"softshrink", s_shrink, 0},
    {"tanh_shrink", s_sym, 0},
    {"mish", s_mish, 0},
    {"thresholded_relu", s_thresholded_relu, 0},
    {"maxout", s_maxout_nchw, 0},
    {"maxout", s_maxout_nhwc, 0},
    {"swiglu_grad", s_swiglu2_grad, 0},
    {"swiglu_grad", s_swiglu1_grad, 0},
    {"maxout_grad", s_maxout_grad, 0},
    {"rrelu", s_rrelu_train, 0},
    {"rrelu", s_rrelu_eval, 0},
    {"glu", s_glu_last, 0},
    {"glu", s_glu_first, 0},
    {NULL, NULL, 0},
};
