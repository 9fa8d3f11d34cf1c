/* Activations: values against formulas evaluated here in double, extreme
 * inputs (no NaN, no overflow), softmax / log_softmax along every axis
 * (non-contiguous, 0-d, empty, large rows, bad axis), swiglu in both
 * forms, relu_, gradients and bad inputs. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

static double P0, P1; /* parameters of the reference being checked */

static double ref_relu(double x) { return x > 0 ? x : 0; }
static double ref_relu6(double x) { return x < 0 ? 0 : x > 6 ? 6 : x; }
static double ref_leaky(double x) { return x > 0 ? x : P0 * x; }
static double ref_elu(double x) { return x > 0 ? x : P0 * expm1(x); }
static double ref_selu(double x) { return P0 * (x > 0 ? x : P1 * expm1(x)); }
static double ref_gelu(double x) { return 0.5 * x * (1 + erf(x / sqrt(2.0))); }
static double ref_gelu_tanh(double x) {
  return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}
static double ref_sigmoid(double x) { return 1 / (1 + exp(-x)); }
static double ref_silu(double x) { return x / (1 + exp(-x)); }
static double ref_softplus(double x) { return P0 * x > P1 ? x : log1p(exp(P0 * x)) / P0; }
static double ref_softsign(double x) { return x / (1 + fabs(x)); }
static double ref_hardswish(double x) { return x * fmin(fmax(x + 3, 0), 6) / 6; }
static double ref_hardsigmoid(double x) { return fmax(0, fmin(1, P0 * x + P1)); }
static double ref_log_sigmoid(double x) { return x < 0 ? x - log1p(exp(x)) : -log1p(exp(-x)); }

static pd_tensor *leaky(pd_tensor *x) { return pd_leaky_relu(x, P0); }
static pd_tensor *elu(pd_tensor *x) { return pd_elu(x, P0); }
static pd_tensor *selu(pd_tensor *x) { return pd_selu(x, P0, P1); }
static pd_tensor *gelu(pd_tensor *x) { return pd_gelu(x, false); }
static pd_tensor *gelu_tanh(pd_tensor *x) { return pd_gelu(x, true); }
static pd_tensor *softplus(pd_tensor *x) { return pd_softplus(x, P0, P1); }
static pd_tensor *hardsigmoid(pd_tensor *x) { return pd_hardsigmoid(x, P0, P1); }

static void check(const char *name, pd_tensor *(*f)(pd_tensor *), double (*ref)(double), pd_dtype dt,
                  double rtol, double atol) {
  static const double xs[] = {-7, -3, -2.5, -1, -0.3, -1e-3, 0, 2e-4, 0.4, 1, 2.9, 3, 5, 8};
  int n = (int)(sizeof xs / sizeof *xs);
  pd_tensor *x = pd_tensor_from_f64(xs, dt, 1, (int64_t[]){n});
  pd_tensor *y = f(x);
  if (!y) fail_msg("%s: %s", name, pd_last_error());
  assert_int_equal(pd_tensor_dtype(y), dt);
  for (int i = 0; i < n; i++) {
    double want = ref(pd_tensor_item_at(x, i)), got = pd_tensor_item_at(y, i);
    if (!(fabs(got - want) <= atol + rtol * fabs(want)))
      fail_msg("%s(%s) at %g: got %.17g, want %.17g", name, pd_dtype_name(dt), xs[i], got, want);
  }
}

static void test_pointwise_values(void **state) {
  (void)state;
  static const struct {
    const char *name;
    pd_tensor *(*f)(pd_tensor *);
    double (*ref)(double);
    double p0, p1;
  } acts[] = {
      {"relu", pd_relu, ref_relu, 0, 0},
      {"relu6", pd_relu6, ref_relu6, 0, 0},
      {"leaky_relu", leaky, ref_leaky, 0.01, 0},
      {"leaky_relu", leaky, ref_leaky, 0.2, 0},
      {"elu", elu, ref_elu, 1.0, 0},
      {"elu", elu, ref_elu, 0.5, 0},
      {"selu", selu, ref_selu, PD_SELU_SCALE, PD_SELU_ALPHA},
      {"gelu", gelu, ref_gelu, 0, 0},
      {"gelu_tanh", gelu_tanh, ref_gelu_tanh, 0, 0},
      {"sigmoid", pd_sigmoid, ref_sigmoid, 0, 0},
      {"silu", pd_silu, ref_silu, 0, 0},
      {"swish", pd_swish, ref_silu, 0, 0},
      {"softplus", softplus, ref_softplus, 1, 20},
      {"softplus", softplus, ref_softplus, 2, 5},
      {"softsign", pd_softsign, ref_softsign, 0, 0},
      {"hardswish", pd_hardswish, ref_hardswish, 0, 0},
      {"hardsigmoid", hardsigmoid, ref_hardsigmoid, 0.1666667, 0.5},
      {"hardsigmoid", hardsigmoid, ref_hardsigmoid, 0.2, 0.25},
      {"log_sigmoid", pd_log_sigmoid, ref_log_sigmoid, 0, 0},
  };
  pd_scope_begin();
  for (size_t k = 0; k < sizeof acts / sizeof *acts; k++) {
    P0 = acts[k].p0;
    P1 = acts[k].p1;
    check(acts[k].name, acts[k].f, acts[k].ref, PD_FLOAT64, 1e-13, 1e-15);
    check(acts[k].name, acts[k].f, acts[k].ref, PD_FLOAT32, 6e-7, 1e-9);
  }
  /* Paddle's hardsigmoid / hardswish pieces */
  EXPECT_VALUES(pd_hardswish(T(PD_FLOAT32, 1, SHAPE(4), -3, -1.5, 3, 4)), 1e-7, 0, -0.375, 3, 4);
  EXPECT_VALUES(pd_hardsigmoid(T(PD_FLOAT64, 1, SHAPE(3), -3.1, 0, 3.1), 0.1666667, 0.5), 1e-12, 0, 0.5, 1);
  EXPECT_VALUES(pd_relu6(T(PD_FLOAT32, 1, SHAPE(3), -1, 6, 7.5)), 0, 0, 6, 6);
  /* integers compute in float32 */
  pd_tensor *ri = pd_relu(T(PD_INT64, 1, SHAPE(2), -2, 3));
  assert_int_equal(pd_tensor_dtype(ri), PD_FLOAT32);
  EXPECT_VALUES(ri, 0, 0, 3);
  pd_scope_end();
  expect_no_live_tensors();
}

/* Saturating inputs give exact limits, never NaN or overflow. */
static void test_extremes(void **state) {
  (void)state;
  pd_scope_begin();
  static const pd_dtype dts[] = {PD_FLOAT32, PD_FLOAT64};
  for (int k = 0; k < 2; k++) {
    double big = dts[k] == PD_FLOAT32 ? 100 : 800;
    pd_tensor *x = T(dts[k], 1, SHAPE(4), -big, big, -INFINITY, INFINITY);
    EXPECT_VALUES(pd_sigmoid(x), 1e-30, 0, 1, 0, 1);
    EXPECT_VALUES(pd_log_sigmoid(x), 1e-30, -big, 0, -INFINITY, 0);
    EXPECT_VALUES(pd_softplus(x, 1, 20), 1e-30, 0, big, 0, INFINITY);
    EXPECT_VALUES(pd_silu(x), 1e-30, 0, big, NAN, INFINITY); /* -inf * 0 */
    EXPECT_VALUES(pd_gelu(x, false), 1e-30, 0, big, NAN, INFINITY);
    EXPECT_VALUES(pd_gelu(x, true), 1e-30, 0, big, NAN, INFINITY);
    EXPECT_VALUES(pd_elu(x, 1), 1e-30, -1, big, -1, INFINITY);
    EXPECT_VALUES(pd_softsign(x), 1e-7, -big / (1 + big), big / (1 + big), NAN, NAN);
    EXPECT_VALUES(pd_tanh(x), 0, -1, 1, -1, 1);
  }
  /* NaN propagates */
  pd_tensor *nan = T(PD_FLOAT32, 1, SHAPE(2), NAN, 1);
  EXPECT_VALUES(pd_gelu(nan, false), 1e-6, NAN, 0.8413447460685429);
  EXPECT_VALUES(pd_gelu(nan, true), 1e-6, NAN, 0.8411919906082768);
  EXPECT_VALUES(pd_sigmoid(nan), 1e-6, NAN, 1 / (1 + exp(-1.0)));
  EXPECT_VALUES(pd_softmax(nan, 0), 0, NAN, NAN);
  /* log_sigmoid keeps the tiny tail that 1 - sigmoid would lose */
  EXPECT_VALUES(pd_log_sigmoid(T(PD_FLOAT64, 1, SHAPE(1), 40)), 1e-12, -exp(-40.0));
  EXPECT_VALUES(pd_softplus(T(PD_FLOAT64, 1, SHAPE(1), -40), 1, 20), 1e-12, exp(-40.0));
  pd_scope_end();
  expect_no_live_tensors();
}

/* softmax / log_softmax of x (double, contiguous [outer, n, inner]) into y. */
static void ref_softmax(const double *x, double *y, int64_t outer, int64_t n, int64_t inner, bool lg) {
  for (int64_t o = 0; o < outer; o++)
    for (int64_t k = 0; k < inner; k++) {
      const double *xp = x + o * n * inner + k;
      double *yp = y + o * n * inner + k;
      double m = -INFINITY, s = 0;
      for (int64_t j = 0; j < n; j++) m = fmax(m, xp[j * inner]);
      for (int64_t j = 0; j < n; j++) s += exp(xp[j * inner] - m);
      for (int64_t j = 0; j < n; j++)
        yp[j * inner] = lg ? xp[j * inner] - m - log(s) : exp(xp[j * inner] - m) / s;
    }
}

static void check_softmax_large(int64_t outer, int64_t n, int64_t inner, int axis, pd_dtype dt, double tol) {
  int64_t total = outer * n * inner;
  double *x = malloc(sizeof(double) * (size_t)total), *want = malloc(sizeof(double) * (size_t)total);
  uint64_t s = 12345;
  for (int64_t i = 0; i < total; i++) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    x[i] = ((double)(s >> 11) / 9007199254740992.0 - 0.5) * 20;
  }
  pd_tensor *xt = pd_tensor_from_f64(x, dt, 3, (int64_t[]){outer, n, inner});
  for (int64_t i = 0; i < total; i++) x[i] = pd_tensor_item_at(xt, i); /* as rounded to dt */
  for (int lg = 0; lg < 2; lg++) {
    ref_softmax(x, want, outer, n, inner, lg);
    pd_tensor *y = lg ? pd_log_softmax(xt, axis) : pd_softmax(xt, axis);
    if (!y) fail_msg("%s", pd_last_error());
    for (int64_t i = 0; i < total; i++) {
      double got = pd_tensor_item_at(y, i);
      if (!(fabs(got - want[i]) <= tol * (fabs(want[i]) + (lg ? 1 : 1e-3))))
        fail_msg("%s [%lld,%lld,%lld] axis %d element %lld: got %.9g, want %.9g",
                 lg ? "log_softmax" : "softmax", (long long)outer, (long long)n, (long long)inner, axis,
                 (long long)i, got, want[i]);
    }
  }
  free(x);
  free(want);
}

static void test_softmax(void **state) {
  (void)state;
  pd_scope_begin();
  double e1 = exp(1.0), e2 = exp(2.0), z = 1 + e1 + e2;
  pd_tensor *x = T(PD_FLOAT64, 2, SHAPE(2, 3), 0, 1, 2, 1000, 1001, 1002);
  pd_tensor *y = pd_softmax(x, -1);
  expect_shape(y, 2, SHAPE(2, 3));
  EXPECT_VALUES(y, 1e-15, 1 / z, e1 / z, e2 / z, 1 / z, e1 / z, e2 / z); /* shift invariant, no overflow */
  EXPECT_VALUES(pd_log_softmax(x, 1), 1e-13, -log(z), 1 - log(z), 2 - log(z), -log(z), 1 - log(z),
                2 - log(z));
  /* along axis 0: each column of [[0,1,2],[1000,1001,1002]] */
  EXPECT_VALUES(pd_softmax(x, 0), 1e-15, 0, 0, 0, 1, 1, 1);
  EXPECT_VALUES(pd_log_softmax(x, -2), 1e-12, -1000, -1000, -1000, 0, 0, 0);
  /* -inf entries get probability 0 */
  EXPECT_VALUES(pd_softmax(T(PD_FLOAT32, 1, SHAPE(3), -INFINITY, 0, 0), 0), 1e-7, 0, 0.5, 0.5);
  /* a transposed input */
  pd_tensor *xt = pd_transpose(T(PD_FLOAT32, 2, SHAPE(3, 2), 0, 5, 1, 5, 2, 5), 2, SHAPE(1, 0));
  EXPECT_VALUES(pd_softmax(xt, 1), 1e-6, 1 / z, e1 / z, e2 / z, 1.0 / 3, 1.0 / 3, 1.0 / 3);
  /* 0-d, empty, integer and float16 inputs */
  pd_tensor *s0 = pd_softmax(T(PD_FLOAT32, 0, NULL, 3), -1);
  expect_shape(s0, 0, NULL);
  EXPECT_VALUES(s0, 0, 1);
  EXPECT_VALUES(pd_log_softmax(T(PD_FLOAT32, 0, NULL, 3), 0), 0, 0);
  expect_shape(pd_softmax(pd_zeros(2, SHAPE(0, 5), PD_FLOAT32), 1), 2, SHAPE(0, 5));
  pd_tensor *si = pd_softmax(T(PD_INT32, 1, SHAPE(2), 0, 0), 0);
  assert_int_equal(pd_tensor_dtype(si), PD_FLOAT32);
  EXPECT_VALUES(si, 0, 0.5, 0.5);
  pd_tensor *sh = pd_softmax(T(PD_FLOAT16, 1, SHAPE(2), 0, 0), -1);
  assert_int_equal(pd_tensor_dtype(sh), PD_FLOAT16);
  EXPECT_VALUES(sh, 0, 0.5, 0.5);
  /* rows large enough for the threaded path; columns blocks when inner > 1 */
  check_softmax_large(96, 1000, 1, -2, PD_FLOAT32, 2e-6); /* rows: inner == 1 */
  check_softmax_large(3, 300, 37, 1, PD_FLOAT32, 2e-6);
  check_softmax_large(2, 5, 700, 1, PD_FLOAT64, 1e-14);
  check_softmax_large(1, 40, 600, -2, PD_FLOAT64, 1e-14);
  /* bad axis */
  expect_error(pd_softmax(x, 2), "softmax", "axis 2");
  expect_error(pd_log_softmax(x, -3), "log_softmax", "axis -3");
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_softmax_grad(void **state) {
  (void)state;
  pd_scope_begin();
  const double xv[3] = {0.5, -1, 2}, w[3] = {1, 2, -1};
  pd_tensor *x = pd_tensor_from_f64(xv, PD_FLOAT64, 1, SHAPE(3));
  pd_tensor *wt = pd_tensor_from_f64(w, PD_FLOAT64, 1, SHAPE(3));
  pd_tensor_set_stop_gradient(x, false);
  /* d/dx sum(w * softmax(x)) = y (w - sum(w y)) */
  assert_int_equal(pd_backward(pd_sum(pd_multiply(pd_softmax(x, -1), wt), NULL, 0, false), NULL, false),
                   PD_OK);
  double y[3], s = 0, dot = 0;
  for (int i = 0; i < 3; i++) s += exp(xv[i]);
  for (int i = 0; i < 3; i++) y[i] = exp(xv[i]) / s, dot += w[i] * y[i];
  EXPECT_VALUES(pd_tensor_grad(x), 1e-14, y[0] * (w[0] - dot), y[1] * (w[1] - dot), y[2] * (w[2] - dot));
  /* d/dx sum(w * log_softmax(x)) = w - y sum(w) */
  pd_tensor_clear_grad(x, false);
  assert_int_equal(pd_backward(pd_sum(pd_multiply(pd_log_softmax(x, 0), wt), NULL, 0, false), NULL, false),
                   PD_OK);
  EXPECT_VALUES(pd_tensor_grad(x), 1e-14, w[0] - 2 * y[0], w[1] - 2 * y[1], w[2] - 2 * y[2]);
  pd_scope_end();
  expect_no_live_tensors();
}

static double silu(double v) { return v / (1 + exp(-v)); }

static void test_swiglu(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = T(PD_FLOAT64, 2, SHAPE(2, 2), -1, 0.5, 2, 3);
  pd_tensor *y = T(PD_FLOAT64, 2, SHAPE(2, 2), 2, -1, 0.5, 4);
  EXPECT_VALUES(pd_swiglu(x, y), 1e-15, silu(-1) * 2, -silu(0.5), silu(2) * 0.5, silu(3) * 4);
  /* one input: [a | b] on the last dim */
  pd_tensor *xy = T(PD_FLOAT32, 2, SHAPE(2, 4), -1, 0.5, 2, -1, 2, 3, 0.5, 4);
  pd_tensor *o = pd_swiglu(xy, NULL);
  expect_shape(o, 2, SHAPE(2, 2));
  EXPECT_VALUES(o, 1e-6, silu(-1) * 2, -silu(0.5), silu(2) * 0.5, silu(3) * 4);
  /* a transposed one-input tensor: x^T is [3, 2], halves [3, 1] */
  pd_tensor *tt = pd_transpose(T(PD_FLOAT64, 2, SHAPE(2, 3), 1, 2, 3, 4, 5, 6), 2, SHAPE(1, 0));
  EXPECT_VALUES(pd_swiglu(tt, NULL), 1e-15, silu(1) * 4, silu(2) * 5, silu(3) * 6);
  /* gradients: the one-input form matches the two-input one */
  pd_tensor *g1 = T(PD_FLOAT64, 2, SHAPE(2, 4), -1, 0.5, 2, -1, 2, 3, 0.5, 4);
  pd_tensor_set_stop_gradient(g1, false);
  pd_tensor_set_stop_gradient(x, false);
  pd_tensor_set_stop_gradient(y, false);
  pd_tensor *w = T(PD_FLOAT64, 2, SHAPE(2, 2), 1, -2, 3, 0.5);
  assert_int_equal(pd_backward(pd_sum(pd_multiply(pd_swiglu(g1, NULL), w), NULL, 0, false), NULL, false),
                   PD_OK);
  assert_int_equal(pd_backward(pd_sum(pd_multiply(pd_swiglu(x, y), w), NULL, 0, false), NULL, false), PD_OK);
  pd_tensor *gx = pd_tensor_grad(x), *gy = pd_tensor_grad(y), *gg = pd_tensor_grad(g1);
  for (int r = 0; r < 2; r++)
    for (int c = 0; c < 2; c++) {
      assert_true(fabs(pd_tensor_item_at(gg, r * 4 + c) - pd_tensor_item_at(gx, r * 2 + c)) < 1e-14);
      assert_true(fabs(pd_tensor_item_at(gg, r * 4 + 2 + c) - pd_tensor_item_at(gy, r * 2 + c)) < 1e-14);
    }
  /* dy = w silu(x) */
  EXPECT_VALUES(gy, 1e-14, silu(-1), -2 * silu(0.5), 3 * silu(2), 0.5 * silu(3));
  /* bad inputs */
  expect_error(pd_swiglu(T(PD_FLOAT32, 2, SHAPE(2, 3), 1, 2, 3, 4, 5, 6), NULL), "swiglu", "[2, 3]");
  expect_error(pd_swiglu(x, T(PD_FLOAT64, 1, SHAPE(2), 1, 2)), "swiglu", "[2]");
  expect_error(pd_swiglu(T(PD_FLOAT32, 0, NULL, 1), NULL), "swiglu", "even");
  expect_error(pd_swiglu(NULL, x), "swiglu", "NULL");
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_relu_inplace_and_grads(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = T(PD_FLOAT32, 1, SHAPE(4), -1, 0, 2, -0.5);
  pd_tensor *r = pd_relu_(x);
  assert_ptr_equal(r, x);
  EXPECT_VALUES(x, 0, 0, 0, 2, 0);
  expect_error(pd_relu_(T(PD_INT32, 1, SHAPE(1), 1)), "relu_", "int32");
  pd_tensor *leaf = T(PD_FLOAT64, 1, SHAPE(4), -1, 0.5, 2, -3);
  pd_tensor_set_stop_gradient(leaf, false);
  expect_error(pd_relu_(leaf), "relu_", "leaf");
  /* through relu_ on a non-leaf */
  pd_tensor *h = pd_scale(leaf, 3.0, 0.0, true);
  pd_relu_(h);
  assert_int_equal(pd_backward(pd_sum(h, NULL, 0, false), NULL, false), PD_OK);
  EXPECT_VALUES(pd_tensor_grad(leaf), 0, 0, 3, 3, 0);
  /* relu gradient is 0 at 0, leaky_relu's is the slope there (Paddle) */
  pd_tensor *z = T(PD_FLOAT64, 1, SHAPE(3), -1, 0, 1);
  pd_tensor_set_stop_gradient(z, false);
  assert_int_equal(pd_backward(pd_sum(pd_relu(z), NULL, 0, false), NULL, false), PD_OK);
  EXPECT_VALUES(pd_tensor_grad(z), 0, 0, 0, 1);
  pd_tensor_clear_grad(z, false);
  assert_int_equal(pd_backward(pd_sum(pd_leaky_relu(z, 0.1), NULL, 0, false), NULL, false), PD_OK);
  EXPECT_VALUES(pd_tensor_grad(z), 1e-15, 0.1, 0.1, 1);
  /* second derivative of sigmoid: s (1 - s) (1 - 2 s) */
  pd_tensor *q = T(PD_FLOAT64, 1, SHAPE(2), -0.7, 1.3);
  pd_tensor_set_stop_gradient(q, false);
  pd_tensor *f = pd_sum(pd_sigmoid(q), NULL, 0, false), *g = NULL, *gg = NULL;
  assert_int_equal(pd_grad(&f, 1, &q, 1, NULL, &(pd_grad_opts){.create_graph = true}, &g), PD_OK);
  pd_tensor *gs = pd_sum(g, NULL, 0, false);
  assert_int_equal(pd_grad(&gs, 1, &q, 1, NULL, NULL, &gg), PD_OK);
  double s0 = 1 / (1 + exp(0.7)), s1 = 1 / (1 + exp(-1.3));
  EXPECT_VALUES(gg, 1e-14, s0 * (1 - s0) * (1 - 2 * s0), s1 * (1 - s1) * (1 - 2 * s1));
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_bad_inputs(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = T(PD_FLOAT32, 1, SHAPE(2), 1, 2);
  expect_error(pd_relu(NULL), "relu", "NULL");
  expect_error(pd_gelu(NULL, true), "gelu", "NULL");
  expect_error(pd_selu(x, 0.5, 1), "selu", "0.5");
  expect_error(pd_softplus(x, 0, 20), "softplus", "beta");
  pd_tensor *sb = pd_sigmoid(T(PD_BOOL, 1, SHAPE(2), 1, 0)); /* bool computes in float32 */
  assert_int_equal(pd_tensor_dtype(sb), PD_FLOAT32);
  EXPECT_VALUES(sb, 1e-7, 1 / (1 + exp(-1.0)), 0.5);
  pd_scope_end();
  expect_no_live_tensors();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pointwise_values), cmocka_unit_test(test_extremes),
      cmocka_unit_test(test_softmax),          cmocka_unit_test(test_softmax_grad),
      cmocka_unit_test(test_swiglu),           cmocka_unit_test(test_relu_inplace_and_grads),
      cmocka_unit_test(test_bad_inputs),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
