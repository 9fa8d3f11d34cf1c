/* Samples for the creation and random ops: sizes from attributes (full,
 * arange, linspace, eye, uniform, gaussian, truncated_gaussian_random,
 * randint, randperm) or from an input of probabilities (bernoulli,
 * multinomial). */
#include "op_samples.h"

#define S(...) ((const int64_t[]){__VA_ARGS__})

static int s_full(pd_tensor **in, pd_attrs *a) {
  (void)in;
  sample_set_list(a, 0, 2, S(2, 3));
  a->dtype = PD_FLOAT32;
  return 0;
}
static int s_arange(pd_tensor **in, pd_attrs *a) {
  (void)in;
  a->f[1] = 5;
  a->f[2] = 1;
  a->dtype = PD_FLOAT32;
  return 0;
}
static int s_linspace(pd_tensor **in, pd_attrs *a) {
  (void)in;
  a->f[1] = 1;
  a->i[0] = 5;
  a->dtype = PD_FLOAT32;
  return 0;
}
static int s_eye(pd_tensor **in, pd_attrs *a) {
  (void)in;
  a->i[0] = 2;
  a->i[1] = 3;
  a->dtype = PD_FLOAT32;
  return 0;
}
static int s_uniform(pd_tensor **in, pd_attrs *a) {
  (void)in;
  sample_set_list(a, 0, 2, S(2, 3));
  a->f[1] = 1;
  a->dtype = PD_FLOAT32;
  return 0;
}
static int s_truncated(pd_tensor **in, pd_attrs *a) {
  (void)in;
  sample_set_list(a, 0, 2, S(2, 3));
  a->f[1] = 1;
  a->f[2] = -2;
  a->f[3] = 2;
  a->dtype = PD_FLOAT32;
  return 0;
}
static int s_randint(pd_tensor **in, pd_attrs *a) {
  (void)in;
  sample_set_list(a, 0, 2, S(2, 3));
  a->i[1] = 10;
  a->dtype = PD_INT64;
  return 0;
}
static int s_randperm(pd_tensor **in, pd_attrs *a) {
  (void)in;
  a->i[0] = 5;
  a->dtype = PD_INT64;
  return 0;
}
static int s_bernoulli(pd_tensor **in, pd_attrs *a) {
  (void)a;
  in[0] = sample_uniform(2, S(3, 4), 0, 1);
  return 1;
}
static int s_multinomial(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, S(2, 3), 0.1, 1);
  a->i[0] = 2;
  a->i[1] = 1;
  return 1;
}

const pd_op_sample pd_samples_creation[] = {
    {"full", s_full, 0},
    {"arange", s_arange, 0},
    {"linspace", s_linspace, 0},
    {"eye", s_eye, 0},
    {"uniform", s_uniform, 0},
    {"gaussian", s_uniform, 0},
    {"truncated_gaussian_random", s_truncated, 0},
    {"randint", s_randint, 0},
    {"randperm", s_randperm, 0},
    {"bernoulli", s_bernoulli, 0},
    {"multinomial", s_multinomial, 0},
    {NULL, NULL, 0},
};
