/* Gradcheck samples for the elementwise ops (inputs away from kinks and
 * jumps: floor/round steps, clip bounds, max/min ties). */
#include <math.h>

#include "op_samples.h"

#define S(...) ((const int64_t[]){__VA_ARGS__})

#define UNIFORM(name, lo, hi)                       \
  static int name(pd_tensor **in, pd_attrs *a) {    \
    (void)a;                                        \
    in[0] = sample_uniform(2, S(2, 3), (lo), (hi)); \
    return 1;                                       \
  }
UNIFORM(s_sym, -1.0, 1.0)
UNIFORM(s_pos, 0.5, 2.0)
UNIFORM(s_unit, -0.8, 0.8)
UNIFORM(s_wide, -2.4, 2.4)
#undef UNIFORM

static int s_round_decimals(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, S(2, 3), -2, 2);
  a->i[0] = 1;
  return 1;
}
static int s_clip(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, S(3, 4), -1, 1);
  a->f[0] = -0.5;
  a->f[1] = 0.4;
  return 1;
}
static int s_clip_open(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, S(2, 3), -1, 1);
  a->f[0] = -0.2;
  a->f[1] = 1.0 / 0.0;
  return 1;
}
static int s_div_like(pd_tensor **in, pd_attrs *a) {
  (void)a;
  in[0] = sample_uniform(2, S(2, 3), 0.5, 3);
  in[1] = sample_uniform(1, S(3), 0.3, 0.9);
  return 2;
}
static int s_pow_tt(pd_tensor **in, pd_attrs *a) {
  (void)a;
  in[0] = sample_uniform(2, S(2, 3), 0.5, 2);
  in[1] = sample_uniform(2, S(2, 3), -1.5, 2.5);
  return 2;
}
static int s_pow_bcast(pd_tensor **in, pd_attrs *a) {
  (void)a;
  in[0] = sample_uniform(2, S(3, 1), 0.5, 2);
  in[1] = sample_uniform(1, S(4), 0.5, 2);
  return 2;
}
static int s_pow_scalar(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, S(2, 3), 0.5, 2);
  a->f[0] = 2.5;
  return 1;
}
static int s_pow_square(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, S(2, 3), -2, 2);
  a->f[0] = 2.0;
  return 1;
}
static int s_pow_sqrt(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, S(2, 3), 0.5, 2);
  a->f[0] = 0.5;
  return 1;
}
static int s_minmax(pd_tensor **in, pd_attrs *a) {
  (void)a;
  in[0] = sample_uniform(2, S(2, 3), -1, 1);
  in[1] = sample_uniform(2, S(2, 3), -1, 1);
  return 2;
}
static int s_minmax_bcast(pd_tensor **in, pd_attrs *a) {
  (void)a;
  in[0] = sample_uniform(2, S(3, 4), -1, 1);
  in[1] = sample_uniform(1, S(4), -1, 1);
  return 2;
}
static int s_where(pd_tensor **in, pd_attrs *a) {
  (void)a;
  in[0] = pd_tensor_from_f64((const double[]){1, 0, 0, 1, 1, 0}, PD_BOOL, 2, S(2, 3));
  in[1] = sample_uniform(2, S(2, 3), -1, 1);
  in[2] = sample_uniform(1, S(3), -1, 1);
  return 3;
}
static int s_where_bcast_cond(pd_tensor **in, pd_attrs *a) {
  (void)a;
  in[0] = pd_tensor_from_f64((const double[]){1, 0, 1}, PD_BOOL, 2, S(3, 1));
  in[1] = sample_uniform(1, S(4), -1, 1);
  in[2] = sample_uniform(2, S(3, 4), -1, 1);
  return 3;
}

/* The ops without gradients: comparisons, logic, classification. */
static int s_int_divide(pd_tensor **in, pd_attrs *a) {
  (void)a;
  in[0] = pd_tensor_from_f64((const double[]){7, -7, 9, 0, 5, -3}, PD_INT64, 2, S(2, 3));
  in[1] = pd_tensor_from_f64((const double[]){2, 3, -4}, PD_INT64, 1, S(3));
  return 2;
}
static int s_compare(pd_tensor **in, pd_attrs *a) {
  (void)a;
  in[0] = sample_uniform(2, S(2, 3), -1, 1);
  in[1] = sample_uniform(2, S(1, 3), -1, 1);
  return 2;
}
static int s_logic2(pd_tensor **in, pd_attrs *a) {
  (void)a;
  in[0] = pd_tensor_from_f64((const double[]){1, 0, 1, 0, 1, 1}, PD_BOOL, 2, S(2, 3));
  in[1] = pd_tensor_from_f64((const double[]){1, 1, 0}, PD_BOOL, 1, S(3));
  return 2;
}
static int s_logic1(pd_tensor **in, pd_attrs *a) {
  (void)a;
  in[0] = pd_tensor_from_f64((const double[]){1, 0, 1, 0, 1, 1}, PD_BOOL, 2, S(2, 3));
  return 1;
}
static int s_classify(pd_tensor **in, pd_attrs *a) {
  (void)a;
  in[0] = pd_tensor_from_f64((const double[]){1, NAN, INFINITY, -INFINITY, 0, -2}, PD_FLOAT64, 2, S(3, 2));
  return 1;
}
static int s_compare_same(pd_tensor **in, pd_attrs *a) {
  (void)a;
  in[0] = sample_uniform(2, S(2, 3), -1, 1);
  in[1] = sample_uniform(2, S(2, 3), -1, 1);
  return 2;
}
static int s_allclose(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, S(2, 3), -1, 1);
  in[1] = sample_uniform(2, S(2, 3), -1, 1);
  a->f[0] = 1e-5;
  a->f[1] = 1e-8;
  return 2;
}

const pd_op_sample pd_samples_elementwise[] = {
    {"exp", s_sym, 0},
    {"log", s_pos, 0},
    {"log2", s_pos, 0},
    {"log10", s_pos, 0},
    {"log1p", s_pos, 0},
    {"sqrt", s_pos, 0},
    {"rsqrt", s_pos, 0},
    {"reciprocal", s_pos, 0},
    {"sin", s_wide, 0},
    {"cos", s_wide, 0},
    {"tan", s_sym, 0},
    {"asin", s_unit, 0},
    {"acos", s_unit, 0},
    {"atan", s_wide, 0},
    {"sinh", s_sym, 0},
    {"cosh", s_sym, 0},
    {"tanh", s_wide, 0},
    {"erf", s_sym, 0},
    {"abs", s_sym, 0},
    {"sign", s_sym, 0},
    {"neg", s_sym, 0},
    {"square", s_wide, 0},
    {"floor", s_wide, 0},
    {"ceil", s_wide, 0},
    {"round", s_wide, 0},
    {"round", s_round_decimals, 0},
    {"clip", s_clip, 0},
    {"clip", s_clip_open, 0},
    {"remainder", s_div_like, 0},
    {"elementwise_pow", s_pow_tt, 0},
    {"elementwise_pow", s_pow_bcast, 0},
    {"pow", s_pow_scalar, 0},
    {"pow", s_pow_square, 0},
    {"pow", s_pow_sqrt, 0},
    {"maximum", s_minmax, 0},
    {"maximum", s_minmax_bcast, 0},
    {"minimum", s_minmax, 0},
    {"minimum", s_minmax_bcast, 0},
    {"where", s_where, 0},
    {"where", s_where_bcast_cond, 0},
    {"floor_divide", s_int_divide, 0},
    {"equal", s_compare, 0},
    {"not_equal", s_compare, 0},
    {"less_than", s_compare, 0},
    {"less_equal", s_compare, 0},
    {"greater_than", s_compare, 0},
    {"greater_equal", s_compare, 0},
    {"logical_and", s_logic2, 0},
    {"logical_or", s_logic2, 0},
    {"logical_xor", s_logic2, 0},
    {"logical_not", s_logic1, 0},
    {"isnan", s_classify, 0},
    {"isinf", s_classify, 0},
    {"isfinite", s_classify, 0},
    {"allclose", s_allclose, 0},
    {"equal_all", s_compare_same, 0},
    {NULL, NULL, 0},
};
