/* Elementwise ops: unary math against <math.h>, integer dtypes, rounding,
 * clip, floor_divide / remainder signs, pow, maximum / minimum, where,
 * comparisons, logic, isnan & co, allclose / equal_all, broadcasting,
 * non-contiguous and empty inputs, inplace variants, gradients (double
 * backward of tanh) and bad inputs. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

typedef pd_tensor *(*unary_fn)(pd_tensor *);

/* f(x) elementwise against ref computed here in double from the values x
 * actually holds (after rounding to dt). */
static void check_unary(const char *name, unary_fn f, double (*ref)(double), const double *xs, int n,
                        pd_dtype dt, double rtol) {
  pd_tensor *x = pd_tensor_from_f64(xs, dt, 1, (int64_t[]){n});
  pd_tensor *y = f(x);
  if (!y) fail_msg("%s: %s", name, pd_last_error());
  assert_int_equal(pd_tensor_dtype(y), dt);
  for (int i = 0; i < n; i++) {
    double want = ref(pd_tensor_item_at(x, i)), got = pd_tensor_item_at(y, i);
    if (isnan(want) && isnan(got)) continue;
    if (!(fabs(got - want) <= rtol * fabs(want) + 1e-300))
      fail_msg("%s(%s)[%d] of %.17g: got %.17g, want %.17g", name, pd_dtype_name(dt), i,
               pd_tensor_item_at(x, i), got, want);
  }
}

static double rsqrt_ref(double x) { return 1.0 / sqrt(x); }
static double reciprocal_ref(double x) { return 1.0 / x; }

static void test_unary_float_math(void **state) {
  (void)state;
  static const struct {
    const char *name;
    unary_fn f;
    double (*ref)(double);
    int domain; /* 0: any, 1: positive, 2: [-1, 1] */
  } ops[] = {
      {"exp", pd_exp, exp, 0},           {"log", pd_log, log, 1},
      {"log2", pd_log2, log2, 1},        {"log10", pd_log10, log10, 1},
      {"log1p", pd_log1p, log1p, 1},     {"sqrt", pd_sqrt, sqrt, 1},
      {"rsqrt", pd_rsqrt, rsqrt_ref, 1}, {"reciprocal", pd_reciprocal, reciprocal_ref, 0},
      {"sin", pd_sin, sin, 0},           {"cos", pd_cos, cos, 0},
      {"tan", pd_tan, tan, 0},           {"asin", pd_asin, asin, 2},
      {"acos", pd_acos, acos, 2},        {"atan", pd_atan, atan, 0},
      {"sinh", pd_sinh, sinh, 0},        {"cosh", pd_cosh, cosh, 0},
      {"tanh", pd_tanh, tanh, 0},        {"erf", pd_erf, erf, 0},
  };
  static const double any[] = {-3.5, -1.25, -0.3, -1e-4, 1e-5, 0.2, 0.75, 1.5, 2.9};
  static const double pos[] = {1e-6, 0.01, 0.3, 1.0, 2.5, 10.0, 1234.5};
  static const double unit[] = {-0.99, -0.5, -1e-3, 0.0, 0.25, 0.7, 0.999};
  pd_scope_begin();
  for (size_t k = 0; k < sizeof ops / sizeof *ops; k++) {
    const double *xs = ops[k].domain == 0 ? any : ops[k].domain == 1 ? pos : unit;
    int n = ops[k].domain == 0 ? 9 : 7;
    check_unary(ops[k].name, ops[k].f, ops[k].ref, xs, n, PD_FLOAT64, 1e-14);
    check_unary(ops[k].name, ops[k].f, ops[k].ref, xs, n, PD_FLOAT32, 4e-7);
  }
  /* special values */
  pd_tensor *s = T(PD_FLOAT32, 1, SHAPE(4), -1, 0, INFINITY, NAN);
  EXPECT_VALUES(pd_sqrt(s), 0, NAN, 0, INFINITY, NAN);
  EXPECT_VALUES(pd_log(s), 0, NAN, -INFINITY, INFINITY, NAN);
  EXPECT_VALUES(pd_exp(s), 1e-7, exp(-1.0), 1, INFINITY, NAN);
  EXPECT_VALUES(pd_tanh(s), 1e-7, tanh(-1.0), 0, 1, NAN);
  pd_scope_end();
  expect_no_live_tensors();
}

/* The vectorised float32 exp and tanh over their whole range, on a tensor
 * large enough to take the threaded path. */
static void test_exp_tanh_float32_range(void **state) {
  (void)state;
  enum { N = 200001 };
  double *xs = malloc(sizeof(double) * N);
  for (int i = 0; i < N; i++) xs[i] = -105.0 + 200.0 * i / (N - 1);
  pd_scope_begin();
  pd_tensor *x = pd_tensor_from_f64(xs, PD_FLOAT32, 1, (int64_t[]){N});
  pd_tensor *e = pd_exp(x), *t = pd_tanh(x);
  float *xv = pd_tensor_data(x), *ev = pd_tensor_data(e), *tv = pd_tensor_data(t);
  for (int i = 0; i < N; i++) {
    double want = exp((double)xv[i]);
    if (want > FLT_MAX) {
      if (!isinf(ev[i])) fail_msg("exp(%g) = %g, want inf", xv[i], ev[i]);
      continue;
    }
    /* 2 ulp, and denormal results within one denormal step */
    if (!(fabs(ev[i] - want) <= 2.5e-7 * want + 1.5e-45))
      fail_msg("exp(%.9g) = %.9g, want %.9g", xv[i], ev[i], want);
    double tw = tanh((double)xv[i]);
    if (!(fabs(tv[i] - tw) <= 3.6e-7 * fabs(tw))) fail_msg("tanh(%.9g) = %.9g, want %.9g", xv[i], tv[i], tw);
  }
  /* small arguments keep their relative accuracy */
  EXPECT_VALUES(pd_tanh(T(PD_FLOAT32, 1, SHAPE(3), 1e-4, -3e-6, 0.6)), 3e-7, tanh(1e-4), tanh(-3e-6),
                tanh((double)0.6f));
  pd_scope_end();
  free(xs);
  expect_no_live_tensors();
}

static void test_int_and_half_inputs(void **state) {
  (void)state;
  pd_scope_begin();
  /* float math on integers computes in float32 */
  pd_tensor *i = T(PD_INT64, 1, SHAPE(3), 1, 4, 9);
  pd_tensor *r = pd_sqrt(i);
  assert_int_equal(pd_tensor_dtype(r), PD_FLOAT32);
  EXPECT_VALUES(r, 0, 1, 2, 3);
  assert_int_equal(pd_tensor_dtype(pd_exp(T(PD_BOOL, 1, SHAPE(2), 0, 1))), PD_FLOAT32);
  /* float16 in, float16 out */
  pd_tensor *h = T(PD_FLOAT16, 1, SHAPE(3), -1, 0, 0.5);
  pd_tensor *eh = pd_exp(h);
  assert_int_equal(pd_tensor_dtype(eh), PD_FLOAT16);
  EXPECT_VALUES(eh, 1e-3, exp(-1.0), 1, exp(0.5));
  assert_int_equal(pd_tensor_dtype(pd_relu(T(PD_BFLOAT16, 1, SHAPE(1), -2))), PD_BFLOAT16);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_abs_sign_neg_square(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *f = T(PD_FLOAT32, 1, SHAPE(5), -2.5, -0.0, 0, 3, NAN);
  EXPECT_VALUES(pd_abs(f), 0, 2.5, 0, 0, 3, NAN);
  EXPECT_VALUES(pd_sign(f), 0, -1, 0, 0, 1, 0);
  EXPECT_VALUES(pd_neg(f), 0, 2.5, 0, 0, -3, NAN);
  EXPECT_VALUES(pd_square(f), 0, 6.25, 0, 0, 9, NAN);
  static const pd_dtype ints[] = {PD_INT8, PD_INT16, PD_INT32, PD_INT64};
  for (size_t k = 0; k < 4; k++) {
    pd_tensor *x = T(ints[k], 1, SHAPE(4), -7, 0, 5, -1);
    pd_tensor *a = pd_abs(x);
    assert_int_equal(pd_tensor_dtype(a), ints[k]);
    EXPECT_VALUES(a, 0, 7, 0, 5, 1);
    EXPECT_VALUES(pd_sign(x), 0, -1, 0, 1, -1);
    EXPECT_VALUES(pd_neg(x), 0, 7, 0, -5, 1);
    EXPECT_VALUES(pd_square(x), 0, 49, 0, 25, 1);
  }
  pd_tensor *u = T(PD_UINT8, 1, SHAPE(3), 0, 3, 200);
  EXPECT_VALUES(pd_abs(u), 0, 0, 3, 200);
  EXPECT_VALUES(pd_sign(u), 0, 0, 1, 1);
  /* wrapping, never undefined: abs(INT32_MIN) stays INT32_MIN */
  pd_tensor *m = T(PD_INT32, 1, SHAPE(2), -2147483648.0, 65536);
  EXPECT_VALUES(pd_abs(m), 0, -2147483648.0, 65536);
  EXPECT_VALUES(pd_square(m), 0, 0, 0);
  expect_error(pd_abs(T(PD_BOOL, 1, SHAPE(1), 1)), "abs", "bool");
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_rounding(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = T(PD_FLOAT32, 1, SHAPE(8), 2.5, -2.5, 0.5, -0.5, 1.4999, -1.7, 3.0, NAN);
  EXPECT_VALUES(pd_round(x, 0), 0, 3, -3, 1, -1, 1, -2, 3, NAN);
  EXPECT_VALUES(pd_floor(x), 0, 2, -3, 0, -1, 1, -2, 3, NAN);
  EXPECT_VALUES(pd_ceil(x), 0, 3, -2, 1, -0.0, 2, -1, 3, NAN);
  pd_tensor *d = T(PD_FLOAT64, 1, SHAPE(3), 1.2345, -2.125, 1250.0);
  EXPECT_VALUES(pd_round(d, 2), 1e-12, 1.23, -2.13, 1250);
  EXPECT_VALUES(pd_round(d, -2), 1e-12, 0, -0.0, 1300); /* 12.5 rounds away from zero */
  /* large floats are already integers */
  EXPECT_VALUES(pd_round(T(PD_FLOAT32, 1, SHAPE(2), 16777216.0, -8388609.0), 0), 0, 16777216.0, -8388609.0);
  /* integers pass through with their dtype */
  pd_tensor *i = T(PD_INT64, 1, SHAPE(2), -3, 7);
  pd_tensor *fi = pd_floor(i);
  assert_int_equal(pd_tensor_dtype(fi), PD_INT64);
  EXPECT_VALUES(fi, 0, -3, 7);
  EXPECT_VALUES(pd_round(i, 0), 0, -3, 7);
  /* zero gradient */
  pd_tensor *g = T(PD_FLOAT64, 1, SHAPE(2), 0.3, 1.7);
  pd_tensor_set_stop_gradient(g, false);
  pd_tensor *r = pd_add(pd_add(pd_floor(g), pd_ceil(g)), pd_add(pd_round(g, 0), pd_sign(g)));
  assert_false(pd_tensor_stop_gradient(r));
  assert_int_equal(pd_backward(pd_sum(r, NULL, 0, false), NULL, false), PD_OK);
  EXPECT_VALUES(pd_tensor_grad(g), 0, 0, 0);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_clip(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = T(PD_FLOAT64, 1, SHAPE(6), -3, -1, 0, 0.5, 1, 4);
  pd_tensor_set_stop_gradient(x, false);
  pd_tensor *c = pd_clip(x, -1, 1);
  EXPECT_VALUES(c, 0, -1, -1, 0, 0.5, 1, 1);
  assert_int_equal(pd_backward(pd_sum(c, NULL, 0, false), NULL, false), PD_OK);
  EXPECT_VALUES(pd_tensor_grad(x), 0, 0, 0, 1, 1, 0, 0); /* strictly inside only */
  /* open sides */
  EXPECT_VALUES(pd_clip(x, -INFINITY, 0.5), 0, -3, -1, 0, 0.5, 0.5, 0.5);
  EXPECT_VALUES(pd_clip(x, 0, NAN), 0, 0, 0, 0, 0.5, 1, 4);
  /* integers: bounds cast to the dtype (truncated) */
  pd_tensor *i = T(PD_INT32, 1, SHAPE(4), -10, 2, 3, 100);
  pd_tensor *ci = pd_clip(i, -2.5, 2.7);
  assert_int_equal(pd_tensor_dtype(ci), PD_INT32);
  EXPECT_VALUES(ci, 0, -2, 2, 2, 2);
  EXPECT_VALUES(pd_clip(T(PD_UINT8, 1, SHAPE(2), 0, 255), -5, 1e9), 0, 0, 255);
  EXPECT_VALUES(pd_clip(T(PD_INT64, 1, SHAPE(2), -9e18, 9e18), -1e30, 1e30), 0, -9e18, 9e18);
  /* min > max */
  expect_error(pd_clip(x, 2, 1), "clip", "min (2)");
  /* inplace */
  pd_tensor *y = T(PD_FLOAT32, 1, SHAPE(3), -5, 0.25, 5);
  uint32_t v = pd_tensor_version(y);
  pd_tensor *y2 = pd_clip_(y, 0, 1);
  assert_ptr_equal(y2, y);
  assert_int_equal(pd_tensor_version(y), v + 1);
  EXPECT_VALUES(y, 0, 0, 0.25, 1);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_floor_divide_remainder(void **state) {
  (void)state;
  pd_scope_begin();
  static const pd_dtype dts[] = {PD_INT8, PD_INT16, PD_INT32, PD_INT64, PD_FLOAT32, PD_FLOAT64};
  for (size_t k = 0; k < 6; k++) {
    pd_tensor *x = T(dts[k], 1, SHAPE(5), -7, 7, -7, 7, 6);
    pd_tensor *y = T(dts[k], 1, SHAPE(5), 2, -2, -2, 2, 3);
    pd_tensor *q = pd_floor_divide(x, y);
    assert_int_equal(pd_tensor_dtype(q), dts[k]);
    EXPECT_VALUES(q, 0, -4, -4, 3, 3, 2);
    EXPECT_VALUES(pd_remainder(x, y), 0, 1, -1, -1, 1, 0);
    /* remainder follows the divisor's sign, like Python's % */
    EXPECT_VALUES(pd_mod(T(dts[k], 1, SHAPE(4), -7, 7, -7, 7), T(dts[k], 1, SHAPE(4), 3, -3, -3, 3)), 0, 2,
                  -2, -1, 1);
  }
  EXPECT_VALUES(pd_floor_divide(T(PD_UINT8, 1, SHAPE(2), 250, 7), T(PD_UINT8, 1, SHAPE(2), 7, 250)), 0, 35,
                0);
  /* floats: fractional operands, exactness, division by zero */
  pd_tensor *a = T(PD_FLOAT64, 1, SHAPE(4), -7.5, 1.0, 1.0, -1.0);
  pd_tensor *b = T(PD_FLOAT64, 1, SHAPE(4), 2.0, 0.1, 0.0, 0.0);
  EXPECT_VALUES(pd_remainder(a, b), 1e-15, 0.5, fmod(1.0, 0.1), NAN, NAN);
  EXPECT_VALUES(pd_floor_divide(a, b), 0, -4, 9, INFINITY,
                -INFINITY); /* 1.0 // 0.1 == 9.0 (1.0 / 0.1 == 10) */
  /* broadcasting; mixed integer dtypes are refused (Paddle promotes only floats) */
  pd_tensor *q2 = pd_floor_divide(T(PD_INT64, 2, SHAPE(2, 2), 5, -5, 9, -9), T(PD_INT64, 1, SHAPE(2), 2, 4));
  assert_int_equal(pd_tensor_dtype(q2), PD_INT64);
  EXPECT_VALUES(q2, 0, 2, -2, 4, -3);
  expect_error(pd_floor_divide(T(PD_INT32, 1, SHAPE(1), 5), T(PD_INT64, 1, SHAPE(1), 2)), "int32", "int64");
  /* INT_MIN // -1 wraps instead of trapping */
  pd_tensor *mn = T(PD_INT32, 1, SHAPE(1), -2147483648.0);
  EXPECT_VALUES(pd_floor_divide(mn, T(PD_INT32, 1, SHAPE(1), -1)), 0, -2147483648.0);
  EXPECT_VALUES(pd_remainder(mn, T(PD_INT32, 1, SHAPE(1), -1)), 0, 0);
  /* integer division by zero is an error */
  expect_error(pd_floor_divide(T(PD_INT64, 1, SHAPE(3), 1, 2, 3), T(PD_INT64, 1, SHAPE(3), 1, 0, 2)),
               "floor_divide", "division by zero");
  expect_error(pd_remainder(T(PD_INT32, 1, SHAPE(1), 1), T(PD_INT32, 0, NULL, 0)), "remainder", "zero");
  /* remainder gradients: dx = g, dy = -floor(x / y) */
  pd_tensor *gx = T(PD_FLOAT64, 1, SHAPE(2), 7.5, -7.5);
  pd_tensor *gy = T(PD_FLOAT64, 1, SHAPE(2), 2, 2);
  pd_tensor_set_stop_gradient(gx, false);
  pd_tensor_set_stop_gradient(gy, false);
  assert_int_equal(pd_backward(pd_sum(pd_remainder(gx, gy), NULL, 0, false), NULL, false), PD_OK);
  EXPECT_VALUES(pd_tensor_grad(gx), 0, 1, 1);
  EXPECT_VALUES(pd_tensor_grad(gy), 0, -3, 4);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_pow(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = T(PD_FLOAT64, 1, SHAPE(3), 2, 0.5, 9);
  EXPECT_VALUES(pd_pow(x, T(PD_FLOAT64, 1, SHAPE(3), 3, -1, 0.5)), 1e-15, 8, 2, 3);
  EXPECT_VALUES(pd_pow_scalar(x, 2.0), 0, 4, 0.25, 81);
  EXPECT_VALUES(pd_pow_scalar(x, 3.0), 0, 8, 0.125, 729);
  EXPECT_VALUES(pd_pow_scalar(x, 0.5), 1e-15, sqrt(2.0), sqrt(0.5), 3);
  EXPECT_VALUES(pd_pow_scalar(x, -1.0), 1e-15, 0.5, 2, 1.0 / 9);
  EXPECT_VALUES(pd_pow_scalar(x, 2.5), 1e-15, pow(2, 2.5), pow(0.5, 2.5), 243);
  EXPECT_VALUES(pd_pow_scalar(T(PD_FLOAT32, 1, SHAPE(1), -2), 2.0), 0, 4);
  /* integers: exact, wrapping, negative exponents truncate */
  pd_tensor *i = T(PD_INT64, 1, SHAPE(5), 2, 3, -1, 1, -2);
  pd_tensor *pi = pd_pow(i, T(PD_INT64, 1, SHAPE(5), 62, -1, -3, -5, 3));
  assert_int_equal(pd_tensor_dtype(pi), PD_INT64);
  EXPECT_VALUES(pi, 0, 4611686018427387904.0, 0, -1, 1, -8);
  pd_tensor *ps = pd_pow_scalar(T(PD_INT32, 1, SHAPE(2), 3, -4), 2.0);
  assert_int_equal(pd_tensor_dtype(ps), PD_INT32);
  EXPECT_VALUES(ps, 0, 9, 16);
  /* broadcasting; int ** float is refused, float ** float broadcasts */
  expect_error(pd_pow(T(PD_INT32, 1, SHAPE(1), 2), T(PD_FLOAT32, 1, SHAPE(1), 2)), "int32", "float32");
  pd_tensor *pb = pd_pow(T(PD_FLOAT32, 2, SHAPE(2, 1), 2, 3), T(PD_FLOAT32, 1, SHAPE(2), 2, 0.5));
  assert_int_equal(pd_tensor_dtype(pb), PD_FLOAT32);
  EXPECT_VALUES(pb, 1e-7, 4, sqrt(2.0), 9, sqrt(3.0));
  /* gradients */
  pd_tensor *gx = T(PD_FLOAT64, 1, SHAPE(2), 2, 3);
  pd_tensor *gy = T(PD_FLOAT64, 1, SHAPE(2), 3, 2);
  pd_tensor_set_stop_gradient(gx, false);
  pd_tensor_set_stop_gradient(gy, false);
  assert_int_equal(pd_backward(pd_sum(pd_pow(gx, gy), NULL, 0, false), NULL, false), PD_OK);
  EXPECT_VALUES(pd_tensor_grad(gx), 1e-14, 12, 6);                      /* y x^(y-1) */
  EXPECT_VALUES(pd_tensor_grad(gy), 1e-14, 8 * log(2.0), 9 * log(3.0)); /* x^y ln x */
  pd_tensor_clear_grad(gx, false);
  assert_int_equal(pd_backward(pd_sum(pd_pow_scalar(gx, 3.0), NULL, 0, false), NULL, false), PD_OK);
  EXPECT_VALUES(pd_tensor_grad(gx), 1e-14, 12, 27);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_maximum_minimum(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = T(PD_FLOAT32, 2, SHAPE(2, 3), 1, 5, -2, 0, 7, 3);
  pd_tensor *y = T(PD_FLOAT32, 1, SHAPE(3), 2, 4, -3);
  pd_tensor *mx = pd_maximum(x, y), *mn = pd_minimum(x, y);
  expect_shape(mx, 2, SHAPE(2, 3));
  EXPECT_VALUES(mx, 0, 2, 5, -2, 2, 7, 3);
  EXPECT_VALUES(mn, 0, 1, 4, -3, 0, 4, -3);
  pd_tensor *ix = T(PD_INT16, 1, SHAPE(3), -5, 10, 0);
  pd_tensor *iy = T(PD_INT16, 1, SHAPE(3), -6, 11, 0);
  assert_int_equal(pd_tensor_dtype(pd_maximum(ix, iy)), PD_INT16);
  EXPECT_VALUES(pd_maximum(ix, iy), 0, -5, 11, 0);
  EXPECT_VALUES(pd_minimum(ix, iy), 0, -6, 10, 0);
  EXPECT_VALUES(pd_maximum(T(PD_UINT8, 1, SHAPE(2), 3, 250), T(PD_UINT8, 1, SHAPE(2), 4, 1)), 0, 4, 250);
  /* NaN in y propagates (x > NaN is false), as Paddle */
  EXPECT_VALUES(pd_maximum(T(PD_FLOAT64, 1, SHAPE(2), 1, 2), T(PD_FLOAT64, 1, SHAPE(2), NAN, 0)), 0, NAN, 2);
  /* ties send the gradient to y */
  pd_tensor *a = T(PD_FLOAT64, 1, SHAPE(3), 1, 2, 5);
  pd_tensor *b = T(PD_FLOAT64, 1, SHAPE(3), 1, 3, 4);
  pd_tensor_set_stop_gradient(a, false);
  pd_tensor_set_stop_gradient(b, false);
  assert_int_equal(pd_backward(pd_sum(pd_maximum(a, b), NULL, 0, false), NULL, false), PD_OK);
  EXPECT_VALUES(pd_tensor_grad(a), 0, 0, 0, 1);
  EXPECT_VALUES(pd_tensor_grad(b), 0, 1, 1, 0);
  pd_tensor_clear_grad(a, false);
  pd_tensor_clear_grad(b, false);
  assert_int_equal(pd_backward(pd_sum(pd_minimum(a, b), NULL, 0, false), NULL, false), PD_OK);
  EXPECT_VALUES(pd_tensor_grad(a), 0, 0, 1, 0);
  EXPECT_VALUES(pd_tensor_grad(b), 0, 1, 0, 1);
  /* broadcast gradient sums down */
  pd_tensor *c = T(PD_FLOAT64, 1, SHAPE(1), 0);
  pd_tensor_set_stop_gradient(c, false);
  assert_int_equal(
      pd_backward(pd_sum(pd_maximum(T(PD_FLOAT64, 1, SHAPE(3), -1, 2, -3), c), NULL, 0, false), NULL, false),
      PD_OK);
  EXPECT_VALUES(pd_tensor_grad(c), 0, 2);
  expect_error(pd_maximum(x, T(PD_FLOAT32, 1, SHAPE(4), 1, 2, 3, 4)), "maximum", "[2, 3]");
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_where(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *c = T(PD_BOOL, 2, SHAPE(2, 1), 1, 0);
  pd_tensor *x = T(PD_FLOAT32, 1, SHAPE(3), 1, 2, 3);
  pd_tensor *y = T(PD_FLOAT32, 2, SHAPE(2, 3), -1, -2, -3, -4, -5, -6);
  pd_tensor *w = pd_where(c, x, y);
  expect_shape(w, 2, SHAPE(2, 3));
  EXPECT_VALUES(w, 0, 1, 2, 3, -4, -5, -6);
  /* promotion of x and y (not of cond): floats promote, int with float is refused */
  pd_tensor *wp =
      pd_where(T(PD_BOOL, 1, SHAPE(2), 0, 1), T(PD_FLOAT32, 1, SHAPE(2), 7, 8), T(PD_FLOAT64, 0, NULL, 0.5));
  assert_int_equal(pd_tensor_dtype(wp), PD_FLOAT64);
  EXPECT_VALUES(wp, 0, 0.5, 8);
  expect_error(
      pd_where(T(PD_BOOL, 1, SHAPE(2), 0, 1), T(PD_INT32, 1, SHAPE(2), 7, 8), T(PD_FLOAT64, 0, NULL, 0.5)),
      "where", "int32");
  /* any element size: int8, float16, int64 */
  EXPECT_VALUES(
      pd_where(T(PD_BOOL, 1, SHAPE(2), 1, 0), T(PD_INT8, 1, SHAPE(2), -1, -2), T(PD_INT8, 1, SHAPE(2), 3, 4)),
      0, -1, 4);
  pd_tensor *wh = pd_where(T(PD_BOOL, 1, SHAPE(2), 0, 1), T(PD_FLOAT16, 1, SHAPE(2), 1.5, 2.5),
                           T(PD_FLOAT16, 1, SHAPE(2), -1, -2));
  assert_int_equal(pd_tensor_dtype(wh), PD_FLOAT16);
  EXPECT_VALUES(wh, 0, -1, 2.5);
  /* non-contiguous cond (a transposed view) */
  pd_tensor *ct = pd_transpose(T(PD_BOOL, 2, SHAPE(2, 2), 1, 1, 0, 0), 2, SHAPE(1, 0)); /* [[1,0],[1,0]] */
  EXPECT_VALUES(pd_where(ct, T(PD_INT64, 1, SHAPE(2), 1, 2), T(PD_INT64, 0, NULL, 0)), 0, 1, 0, 1, 0);
  /* long rows (vector loops and their tails), a random mask, NaN and -0
   * among the values: every element's bits come from the side its mask
   * picks, for each element size, with y full or one element */
  enum { LONG = 1003 };
  const pd_dtype dts[] = {PD_FLOAT32, PD_FLOAT64, PD_INT16, PD_UINT8};
  for (int d = 0; d < 4; d++)
    for (int scalar_y = 0; scalar_y < 2; scalar_y++) {
      pd_tensor *mc = pd_empty(1, SHAPE(LONG), PD_BOOL), *mx = pd_empty(1, SHAPE(LONG), dts[d]);
      pd_tensor *my = scalar_y ? pd_empty(0, NULL, dts[d]) : pd_empty(1, SHAPE(LONG), dts[d]);
      size_t es = pd_dtype_size(dts[d]);
      unsigned char *cb = pd_tensor_data(mc), *xb = pd_tensor_data(mx), *yb = pd_tensor_data(my);
      unsigned r = 12345u + (unsigned)d;
      for (int i = 0; i < LONG; i++) {
        r = r * 1103515245u + 12345u;
        cb[i] = (unsigned char)((r >> 16) & 1);
      }
      for (size_t i = 0; i < LONG * es; i++) xb[i] = (unsigned char)(i * 7 + 1);
      for (size_t i = 0; i < (scalar_y ? 1 : LONG) * es; i++) yb[i] = (unsigned char)(i * 13 + 5);
      if (dts[d] == PD_FLOAT32) ((float *)xb)[3] = NAN, ((float *)xb)[4] = -0.0f;
      if (dts[d] == PD_FLOAT64) ((double *)xb)[3] = NAN, ((double *)xb)[4] = -0.0;
      cb[3] = cb[4] = 1;
      pd_tensor *mw = pd_where(mc, mx, my);
      assert_non_null(mw);
      const unsigned char *wb = pd_tensor_data(mw);
      for (int i = 0; i < LONG; i++)
        assert_memory_equal(wb + i * es, cb[i] ? xb + i * es : yb + (scalar_y ? 0 : i * es), es);
    }
  /* gradients reduce to the broadcast inputs */
  pd_tensor *gx = T(PD_FLOAT64, 1, SHAPE(3), 1, 2, 3);
  pd_tensor *gy = T(PD_FLOAT64, 0, NULL, 9);
  pd_tensor_set_stop_gradient(gx, false);
  pd_tensor_set_stop_gradient(gy, false);
  pd_tensor *cc = T(PD_BOOL, 2, SHAPE(2, 3), 1, 0, 1, 1, 1, 0);
  assert_int_equal(pd_backward(pd_sum(pd_where(cc, gx, gy), NULL, 0, false), NULL, false), PD_OK);
  EXPECT_VALUES(pd_tensor_grad(gx), 0, 2, 1, 1);
  EXPECT_VALUES(pd_tensor_grad(gy), 0, 2);
  expect_shape(pd_tensor_grad(gy), 0, NULL);
  /* bad inputs */
  expect_error(pd_where(T(PD_FLOAT32, 1, SHAPE(3), 1, 0, 1), x, x), "where", "float32");
  expect_error(pd_where(T(PD_BOOL, 1, SHAPE(2), 1, 0), x, x), "where", "[2]");
  expect_error(pd_where(NULL, x, x), "where", "NULL");
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_comparisons(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = T(PD_FLOAT32, 2, SHAPE(2, 3), 1, 2, 3, 4, NAN, 6);
  pd_tensor *y = T(PD_FLOAT32, 1, SHAPE(3), 2, 2, 2);
  pd_tensor *eq = pd_equal(x, y);
  assert_int_equal(pd_tensor_dtype(eq), PD_BOOL);
  expect_shape(eq, 2, SHAPE(2, 3));
  EXPECT_VALUES(eq, 0, 0, 1, 0, 0, 0, 0);
  EXPECT_VALUES(pd_not_equal(x, y), 0, 1, 0, 1, 1, 1, 1); /* NaN != anything */
  EXPECT_VALUES(pd_less_than(x, y), 0, 1, 0, 0, 0, 0, 0);
  EXPECT_VALUES(pd_less_equal(x, y), 0, 1, 1, 0, 0, 0, 0);
  EXPECT_VALUES(pd_greater_than(x, y), 0, 0, 0, 1, 1, 0, 1);
  EXPECT_VALUES(pd_greater_equal(x, y), 0, 0, 1, 1, 1, 0, 1);
  /* integers, mixed dtypes (promoted), bool */
  pd_tensor *i = T(PD_INT64, 1, SHAPE(3), -1, 0, 5);
  EXPECT_VALUES(pd_less_than(i, T(PD_INT64, 1, SHAPE(3), 0, 0, 4)), 0, 1, 0, 0);
  EXPECT_VALUES(pd_equal(T(PD_FLOAT64, 1, SHAPE(2), 1, 2), T(PD_FLOAT32, 1, SHAPE(2), 1.0, 2.5)), 0, 1, 0);
  expect_error(pd_equal(T(PD_INT32, 1, SHAPE(2), 1, 2), T(PD_FLOAT32, 1, SHAPE(2), 1.0, 2.5)), "equal",
               "int32");
  EXPECT_VALUES(pd_equal(T(PD_BOOL, 1, SHAPE(2), 1, 0), T(PD_BOOL, 1, SHAPE(2), 1, 1)), 0, 1, 0);
  EXPECT_VALUES(pd_greater_than(T(PD_UINT8, 1, SHAPE(2), 200, 3), T(PD_UINT8, 0, NULL, 100)), 0, 1, 0);
  EXPECT_VALUES(pd_less_equal(T(PD_FLOAT16, 1, SHAPE(2), 0.5, 1.5), T(PD_FLOAT16, 0, NULL, 1)), 0, 1, 0);
  /* a transposed (non-contiguous) input */
  pd_tensor *m = T(PD_FLOAT64, 2, SHAPE(2, 3), 1, 2, 3, 4, 5, 6);
  pd_tensor *mt = pd_transpose(m, 2, SHAPE(1, 0)); /* [[1,4],[2,5],[3,6]] */
  EXPECT_VALUES(pd_greater_than(mt, T(PD_FLOAT64, 1, SHAPE(2), 1.5, 4.5)), 0, 0, 0, 1, 1, 1, 1);
  /* empty */
  expect_shape(pd_equal(T(PD_FLOAT32, 2, SHAPE(0, 3), 0), y), 2, SHAPE(0, 3));
  expect_error(pd_less_than(x, T(PD_FLOAT32, 1, SHAPE(2), 1, 2)), "less_than", "[2, 3]");
  /* comparisons do not carry gradients */
  pd_tensor *g = T(PD_FLOAT64, 1, SHAPE(1), 1);
  pd_tensor_set_stop_gradient(g, false);
  assert_true(pd_tensor_stop_gradient(pd_greater_than(g, g)));
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_logic_and_special_values(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *a = T(PD_FLOAT32, 1, SHAPE(4), 0, 0, 2.5, NAN);
  pd_tensor *b = T(PD_FLOAT32, 1, SHAPE(4), 0, 3, 0, -1);
  expect_error(pd_logical_and(a, T(PD_INT32, 1, SHAPE(4), 0, 3, 0, -1)), "logical_and", "int32");
  EXPECT_VALUES(pd_logical_and(a, b), 0, 0, 0, 0, 1);
  EXPECT_VALUES(pd_logical_or(a, b), 0, 0, 1, 1, 1);
  EXPECT_VALUES(pd_logical_xor(a, b), 0, 0, 1, 1, 0);
  pd_tensor *n = pd_logical_not(a);
  assert_int_equal(pd_tensor_dtype(n), PD_BOOL);
  EXPECT_VALUES(n, 0, 1, 1, 0, 0);
  EXPECT_VALUES(pd_logical_not(T(PD_BOOL, 1, SHAPE(2), 1, 0)), 0, 0, 1);
  EXPECT_VALUES(pd_logical_and(T(PD_BOOL, 2, SHAPE(2, 1), 1, 0), T(PD_BOOL, 1, SHAPE(2), 1, 0)), 0, 1, 0, 0,
                0);
  pd_tensor *s = T(PD_FLOAT64, 1, SHAPE(5), 1, NAN, INFINITY, -INFINITY, -0.0);
  EXPECT_VALUES(pd_isnan(s), 0, 0, 1, 0, 0, 0);
  EXPECT_VALUES(pd_isinf(s), 0, 0, 0, 1, 1, 0);
  EXPECT_VALUES(pd_isfinite(s), 0, 1, 0, 0, 0, 1);
  pd_tensor *sf = T(PD_FLOAT16, 1, SHAPE(3), NAN, INFINITY, 65504);
  EXPECT_VALUES(pd_isnan(sf), 0, 1, 0, 0);
  EXPECT_VALUES(pd_isfinite(sf), 0, 0, 0, 1);
  pd_tensor *i = T(PD_INT64, 1, SHAPE(2), 1, -5);
  EXPECT_VALUES(pd_isnan(i), 0, 0, 0);
  EXPECT_VALUES(pd_isinf(i), 0, 0, 0);
  EXPECT_VALUES(pd_isfinite(i), 0, 1, 1);
  assert_int_equal(pd_tensor_dtype(pd_isfinite(i)), PD_BOOL);
  expect_error(pd_logical_or(a, T(PD_FLOAT32, 1, SHAPE(3), 1, 1, 1)), "logical_or", "[4]");
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_allclose_equal_all(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = T(PD_FLOAT64, 1, SHAPE(3), 1.0, 100.0, NAN);
  pd_tensor *y = T(PD_FLOAT64, 1, SHAPE(3), 1.0 + 1e-9, 100.0 + 5e-4, NAN);
  pd_tensor *r = pd_allclose(x, y, 1e-5, 1e-8, false);
  assert_int_equal(pd_tensor_dtype(r), PD_BOOL);
  expect_shape(r, 0, NULL);
  EXPECT_VALUES(r, 0, 0); /* NaN without equal_nan */
  EXPECT_VALUES(pd_allclose(x, y, 1e-5, 1e-8, true), 0, 1);
  EXPECT_VALUES(pd_allclose(x, y, 1e-7, 1e-8, true), 0, 0); /* 5e-4 > 1e-8 + 1e-7 * 100 */
  EXPECT_VALUES(pd_allclose(T(PD_FLOAT32, 1, SHAPE(2), 1, INFINITY), T(PD_FLOAT32, 1, SHAPE(2), 1, INFINITY),
                            1e-5, 1e-8, false),
                0, 1);
  EXPECT_VALUES(pd_allclose(T(PD_INT64, 1, SHAPE(2), 1, 2), T(PD_INT64, 1, SHAPE(2), 1, 3), 0, 0.5, false), 0,
                0);
  /* a transposed input */
  pd_tensor *m = T(PD_FLOAT32, 2, SHAPE(2, 2), 1, 2, 3, 4);
  EXPECT_VALUES(
      pd_allclose(pd_transpose(m, 2, SHAPE(1, 0)), T(PD_FLOAT32, 2, SHAPE(2, 2), 1, 3, 2, 4), 0, 0, false), 0,
      1);
  expect_error(pd_allclose(x, T(PD_FLOAT64, 1, SHAPE(1), 1), 1e-5, 1e-8, false), "allclose", "[3]");
  expect_error(pd_allclose(x, y, -1, 1e-8, false), "allclose", "rtol");
  /* equal_all: shapes must match, else false */
  pd_tensor *e = pd_equal_all(T(PD_INT32, 1, SHAPE(3), 1, 2, 3), T(PD_INT32, 1, SHAPE(3), 1, 2, 3));
  expect_shape(e, 0, NULL);
  EXPECT_VALUES(e, 0, 1);
  EXPECT_VALUES(pd_equal_all(T(PD_INT32, 1, SHAPE(3), 1, 2, 3), T(PD_INT32, 1, SHAPE(3), 1, 2, 4)), 0, 0);
  EXPECT_VALUES(pd_equal_all(T(PD_INT32, 1, SHAPE(3), 1, 1, 1), T(PD_INT32, 1, SHAPE(1), 1)), 0, 0);
  EXPECT_VALUES(pd_equal_all(T(PD_FLOAT32, 1, SHAPE(1), NAN), T(PD_FLOAT32, 1, SHAPE(1), NAN)), 0, 0);
  EXPECT_VALUES(pd_equal_all(T(PD_FLOAT32, 1, SHAPE(0), 0), T(PD_FLOAT32, 1, SHAPE(0), 0)), 0, 1);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_noncontiguous_and_empty(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = T(PD_FLOAT64, 2, SHAPE(2, 3), -1, 2, -3, 4, -5, 6);
  pd_tensor *xt = pd_transpose(x, 2, SHAPE(1, 0));
  assert_false(pd_tensor_is_contiguous(xt));
  pd_tensor *a = pd_abs(xt);
  expect_shape(a, 2, SHAPE(3, 2));
  EXPECT_VALUES(a, 0, 1, 4, 2, 5, 3, 6);
  EXPECT_VALUES(pd_exp(xt), 1e-15, exp(-1), exp(4), exp(2), exp(-5), exp(-3), exp(6));
  EXPECT_VALUES(pd_clip(xt, -2, 3), 0, -1, 3, 2, -2, -2, 3);
  EXPECT_VALUES(pd_maximum(xt, T(PD_FLOAT64, 2, SHAPE(3, 1), 0, 0, 0)), 0, 0, 4, 2, 0, 0, 6);
  /* an expanded (stride 0) view */
  pd_tensor *ex = pd_expand(T(PD_FLOAT32, 2, SHAPE(1, 2), -1, 2), 2, SHAPE(3, 2));
  EXPECT_VALUES(pd_square(ex), 0, 1, 4, 1, 4, 1, 4);
  /* empty tensors */
  pd_tensor *e = pd_zeros(2, SHAPE(0, 3), PD_FLOAT32);
  expect_shape(pd_exp(e), 2, SHAPE(0, 3));
  expect_shape(pd_maximum(e, T(PD_FLOAT32, 1, SHAPE(3), 1, 2, 3)), 2, SHAPE(0, 3));
  expect_shape(pd_where(pd_zeros(1, SHAPE(0), PD_BOOL), pd_zeros(1, SHAPE(0), PD_FLOAT32),
                        pd_zeros(0, NULL, PD_FLOAT32)),
               1, SHAPE(0));
  expect_shape(pd_floor_divide(pd_zeros(1, SHAPE(0), PD_INT32), pd_zeros(1, SHAPE(0), PD_INT32)), 1,
               SHAPE(0));
  /* 0-d */
  pd_tensor *s = pd_sqrt(T(PD_FLOAT32, 0, NULL, 16));
  expect_shape(s, 0, NULL);
  EXPECT_VALUES(s, 0, 4);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_inplace(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = T(PD_FLOAT32, 1, SHAPE(3), 0, 1, 4);
  pd_tensor *r = pd_sqrt_(x);
  assert_ptr_equal(r, x);
  EXPECT_VALUES(x, 0, 0, 1, 2);
  pd_exp_(x);
  EXPECT_VALUES(x, 1e-7, 1, exp(1.0), exp(2.0));
  pd_tensor *y = T(PD_FLOAT64, 1, SHAPE(3), 2, 0.5, -4);
  pd_reciprocal_(y);
  EXPECT_VALUES(y, 0, 0.5, 2, -0.25);
  pd_tensor *z = T(PD_FLOAT64, 1, SHAPE(2), 4, 0.25);
  pd_rsqrt_(z);
  EXPECT_VALUES(z, 1e-15, 0.5, 2);
  pd_tensor *t = T(PD_FLOAT64, 1, SHAPE(2), 0.5, -1);
  pd_tanh_(t);
  EXPECT_VALUES(t, 1e-15, tanh(0.5), tanh(-1.0));
  pd_tensor *f = T(PD_FLOAT64, 1, SHAPE(2), 1.5, -1.5);
  pd_floor_(f);
  EXPECT_VALUES(f, 0, 1, -2);
  pd_ceil_(f);
  EXPECT_VALUES(f, 0, 1, -2);
  pd_tensor *i = T(PD_INT64, 1, SHAPE(2), 3, -3);
  pd_floor_(i);
  EXPECT_VALUES(i, 0, 3, -3);
  /* inplace cannot change the dtype, nor write a broadcast view */
  expect_error(pd_exp_(T(PD_INT64, 1, SHAPE(1), 1)), "exp_", "int64");
  expect_error(pd_sqrt_(pd_expand(T(PD_FLOAT32, 1, SHAPE(1), 4), 1, SHAPE(3))), "sqrt_", "broadcast");
  /* inplace on a non-leaf: the gradient flows through the saved output */
  pd_tensor *l = T(PD_FLOAT64, 1, SHAPE(2), 0.5, 1.0);
  pd_tensor_set_stop_gradient(l, false);
  pd_tensor *h = pd_scale(l, 2.0, 0.0, true);
  pd_exp_(h);
  assert_int_equal(pd_backward(pd_sum(h, NULL, 0, false), NULL, false), PD_OK);
  EXPECT_VALUES(pd_tensor_grad(l), 1e-14, 2 * exp(1.0), 2 * exp(2.0));
  pd_scope_end();
  expect_no_live_tensors();
}

/* first and second derivatives through composite backward formulas */
static void test_gradients(void **state) {
  (void)state;
  pd_scope_begin();
  const double v[4] = {-1.5, -0.2, 0.3, 2.0};
  pd_tensor *x = pd_tensor_from_f64(v, PD_FLOAT64, 1, SHAPE(4));
  pd_tensor_set_stop_gradient(x, false);
  /* d/dx sum(tanh x) = 1 - tanh^2, d2/dx2 = -2 tanh (1 - tanh^2) */
  pd_tensor *f = pd_sum(pd_tanh(x), NULL, 0, false);
  pd_tensor *g = NULL, *gg = NULL;
  assert_int_equal(pd_grad(&f, 1, &x, 1, NULL, &(pd_grad_opts){.create_graph = true}, &g), PD_OK);
  assert_false(pd_tensor_stop_gradient(g));
  pd_tensor *gs = pd_sum(g, NULL, 0, false);
  assert_int_equal(pd_grad(&gs, 1, &x, 1, NULL, NULL, &gg), PD_OK);
  for (int i = 0; i < 4; i++) {
    double t = tanh(v[i]);
    assert_true(fabs(pd_tensor_item_at(g, i) - (1 - t * t)) < 1e-14);
    assert_true(fabs(pd_tensor_item_at(gg, i) - (-2 * t * (1 - t * t))) < 1e-14);
  }
  /* d2/dx2 of exp, log and square */
  static const struct {
    unary_fn f;
    double (*d2)(double);
  } cases[] = {{pd_exp, exp}, {pd_square, NULL}};
  for (size_t k = 0; k < 2; k++) {
    pd_tensor *fk = pd_sum(cases[k].f(x), NULL, 0, false);
    pd_tensor *g1 = NULL, *g2 = NULL;
    assert_int_equal(pd_grad(&fk, 1, &x, 1, NULL, &(pd_grad_opts){.create_graph = true}, &g1), PD_OK);
    pd_tensor *s1 = pd_sum(g1, NULL, 0, false);
    assert_int_equal(pd_grad(&s1, 1, &x, 1, NULL, NULL, &g2), PD_OK);
    for (int i = 0; i < 4; i++) {
      double want = cases[k].d2 ? cases[k].d2(v[i]) : 2.0;
      assert_true(fabs(pd_tensor_item_at(g2, i) - want) < 1e-12 * (1 + fabs(want)));
    }
  }
  pd_tensor *p = pd_tensor_from_f64((const double[]){0.5, 2.0}, PD_FLOAT64, 1, SHAPE(2));
  pd_tensor_set_stop_gradient(p, false);
  pd_tensor *fl = pd_sum(pd_log(p), NULL, 0, false);
  pd_tensor *l1 = NULL, *l2 = NULL;
  assert_int_equal(pd_grad(&fl, 1, &p, 1, NULL, &(pd_grad_opts){.create_graph = true}, &l1), PD_OK);
  pd_tensor *ls = pd_sum(l1, NULL, 0, false);
  assert_int_equal(pd_grad(&ls, 1, &p, 1, NULL, NULL, &l2), PD_OK);
  EXPECT_VALUES(l1, 1e-14, 2, 0.5);
  EXPECT_VALUES(l2, 1e-14, -4, -0.25);
  /* abs' gradient is sign(x), 0 at 0 */
  pd_tensor *q = T(PD_FLOAT64, 1, SHAPE(3), -2, 0, 3);
  pd_tensor_set_stop_gradient(q, false);
  assert_int_equal(pd_backward(pd_sum(pd_abs(q), NULL, 0, false), NULL, false), PD_OK);
  EXPECT_VALUES(pd_tensor_grad(q), 0, -1, 0, 1);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_bad_inputs(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = T(PD_FLOAT32, 2, SHAPE(2, 3), 1, 2, 3, 4, 5, 6);
  pd_tensor *y = T(PD_FLOAT32, 2, SHAPE(3, 2), 1, 2, 3, 4, 5, 6);
  expect_error(pd_pow(x, y), "elementwise_pow", "[3, 2]");
  expect_error(pd_floor_divide(x, y), "floor_divide", "[2, 3]");
  expect_error(pd_remainder(x, y), "remainder", "[3, 2]");
  expect_error(pd_minimum(x, y), "minimum", "[2, 3]");
  expect_error(pd_equal(x, y), "equal", "[3, 2]");
  expect_error(pd_exp(NULL), "exp", "NULL");
  expect_error(pd_pow_scalar(NULL, 2), "pow", "NULL");
  expect_error(pd_floor(T(PD_BOOL, 1, SHAPE(1), 1)), "floor", "bool");
  expect_error(pd_maximum(T(PD_BOOL, 1, SHAPE(1), 1), T(PD_BOOL, 1, SHAPE(1), 0)), "maximum", "bool");
  pd_scope_end();
  expect_no_live_tensors();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_unary_float_math),
      cmocka_unit_test(test_exp_tanh_float32_range),
      cmocka_unit_test(test_int_and_half_inputs),
      cmocka_unit_test(test_abs_sign_neg_square),
      cmocka_unit_test(test_rounding),
      cmocka_unit_test(test_clip),
      cmocka_unit_test(test_floor_divide_remainder),
      cmocka_unit_test(test_pow),
      cmocka_unit_test(test_maximum_minimum),
      cmocka_unit_test(test_where),
      cmocka_unit_test(test_comparisons),
      cmocka_unit_test(test_logic_and_special_values),
      cmocka_unit_test(test_allclose_equal_all),
      cmocka_unit_test(test_noncontiguous_and_empty),
      cmocka_unit_test(test_inplace),
      cmocka_unit_test(test_gradients),
      cmocka_unit_test(test_bad_inputs),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
