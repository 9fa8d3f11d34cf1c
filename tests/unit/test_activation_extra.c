/* celu, hardtanh, hardshrink, softshrink, tanhshrink, mish,
 * thresholded_relu, maxout, rrelu, glu and their layers (with Softmax2D):
 * values against formulas evaluated here in double and against Paddle's
 * documented outputs, non-contiguous / empty / integer inputs, the
 * threaded paths, gradients, rrelu's draws, printing and bad inputs. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

static double P0, P1; /* parameters of the reference being checked */

static double ref_celu(double x) { return fmax(0, x) + fmin(0, P0 * expm1(x / P0)); }
static double ref_hardtanh(double x) { return x < P0 ? P0 : x > P1 ? P1 : x; }
static double ref_hardshrink(double x) { return fabs(x) > P0 ? x : 0; }
static double ref_softshrink(double x) { return x > P0 ? x - P0 : x < -P0 ? x + P0 : 0; }
static double ref_tanhshrink(double x) { return (double)((long double)x - tanhl((long double)x)); }
static double ref_mish(double x) { return x > 20 ? x * tanh(x) : x * tanh(log1p(exp(x))); }
static double ref_thresholded(double x) { return x > P0 ? x : P1; }

static pd_tensor *celu(pd_tensor *x) { return pd_celu(x, P0); }
static pd_tensor *hardtanh(pd_tensor *x) { return pd_hardtanh(x, P0, P1); }
static pd_tensor *hardshrink(pd_tensor *x) { return pd_hardshrink(x, P0); }
static pd_tensor *softshrink(pd_tensor *x) { return pd_softshrink(x, P0); }
static pd_tensor *thresholded(pd_tensor *x) { return pd_thresholded_relu(x, P0, P1); }

typedef struct pointwise {
  const char *name;
  pd_tensor *(*f)(pd_tensor *);
  double (*ref)(double);
  double p0, p1;
  double rtol32; /* float32 relative tolerance */
} pointwise;

static const pointwise k_ops[] = {
    {"celu", celu, ref_celu, 1.0, 0, 6e-7},
    {"celu", celu, ref_celu, 0.2, 0, 6e-7},
    {"celu", celu, ref_celu, -0.7, 0, 5e-6},           /* e^(x / alpha) grows fast here */
    {"hardtanh", hardtanh, ref_hardtanh, -1, 1, 6e-8}, /* float32 bounds */
    {"hardtanh", hardtanh, ref_hardtanh, -0.3, 2.5, 6e-8},
    {"hardshrink", hardshrink, ref_hardshrink, 0.5, 0, 0},
    {"hardshrink", hardshrink, ref_hardshrink, 0, 0, 0},
    {"softshrink", softshrink, ref_softshrink, 0.5, 0, 2e-7},
    {"softshrink", softshrink, ref_softshrink, 2.5, 0, 2e-7},
    {"tanhshrink", pd_tanhshrink, ref_tanhshrink, 0, 0, 4e-6},
    {"mish", pd_mish, ref_mish, 0, 0, 1e-6},
    {"thresholded_relu", thresholded, ref_thresholded, 1.0, 0, 0},
    {"thresholded_relu", thresholded, ref_thresholded, -0.5, 0.25, 0},
};
#define N_OPS ((int)(sizeof k_ops / sizeof *k_ops))

static const double k_xs[] = {-45,  -7,  -3,  -2.5, -1, -0.5, -0.3, -0.07, -1e-3, 0,  2e-4,
                              0.01, 0.4, 0.5, 0.62, 1,  2.5,  2.9,  5,     8,     21, 30};
#define N_XS ((int)(sizeof k_xs / sizeof *k_xs))

/* Every element of y against op.ref of the same element of x (both any layout). */
static void expect_pointwise(const pointwise *op, pd_tensor *x, pd_tensor *y, double rtol, double atol) {
  if (!y) fail_msg("%s: %s", op->name, pd_last_error());
  assert_int_equal(pd_tensor_numel(y), pd_tensor_numel(x));
  for (int64_t i = 0; i < pd_tensor_numel(x); i++) {
    double xv = pd_tensor_item_at(x, i), want = op->ref(xv), got = pd_tensor_item_at(y, i);
    if (!(fabs(got - want) <= atol + rtol * fabs(want)))
      fail_msg("%s(%s, p %g %g) at %.9g: got %.17g, want %.17g", op->name, pd_dtype_name(pd_tensor_dtype(y)),
               op->p0, op->p1, xv, got, want);
  }
}

static void test_pointwise_values(void **state) {
  (void)state;
  pd_scope_begin();
  for (int k = 0; k < N_OPS; k++) {
    const pointwise *op = &k_ops[k];
    P0 = op->p0;
    P1 = op->p1;
    pd_tensor *x64 = pd_tensor_from_f64(k_xs, PD_FLOAT64, 1, SHAPE(N_XS));
    pd_tensor *y64 = op->f(x64);
    assert_non_null(y64);
    assert_int_equal(pd_tensor_dtype(y64), PD_FLOAT64);
    expect_pointwise(op, x64, y64, 1e-13, 1e-15);
    pd_tensor *x32 = pd_tensor_from_f64(k_xs, PD_FLOAT32, 1, SHAPE(N_XS));
    pd_tensor *y32 = op->f(x32);
    assert_non_null(y32);
    assert_int_equal(pd_tensor_dtype(y32), PD_FLOAT32);
    expect_pointwise(op, x32, y32, op->rtol32, 1e-9);
    /* a transposed (non-contiguous) view: [2, 11] -> [11, 2] */
    pd_tensor *xt = pd_transpose(pd_reshape(x32, 2, SHAPE(2, N_XS / 2)), 2, SHAPE(1, 0));
    expect_pointwise(op, xt, op->f(xt), op->rtol32, 1e-9);
    /* integers compute in float32; empty tensors stay empty */
    pd_tensor *yi = op->f(T(PD_INT32, 1, SHAPE(3), -2, 0, 3));
    assert_non_null(yi);
    assert_int_equal(pd_tensor_dtype(yi), PD_FLOAT32);
    expect_pointwise(op, T(PD_FLOAT64, 1, SHAPE(3), -2, 0, 3), yi, op->rtol32, 1e-9);
    expect_shape(op->f(pd_zeros(2, SHAPE(0, 3), PD_FLOAT32)), 2, SHAPE(0, 3));
  }
  pd_scope_end();
  expect_no_live_tensors();
}

/* Paddle's documented outputs (paddle.nn.functional examples). */
static void test_paddle_examples(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = T(PD_FLOAT32, 2, SHAPE(2, 2), -1, 6, 1, 15.6);
  EXPECT_VALUES(pd_celu(x, 0.2), 1e-7, -0.19865242, 6, 1, 15.60000038);
  EXPECT_VALUES(pd_hardshrink(T(PD_FLOAT32, 1, SHAPE(3), -1, 0.3, 2.5), 0.5), 0, -1, 0, 2.5);
  EXPECT_VALUES(pd_hardtanh(T(PD_FLOAT32, 1, SHAPE(3), -1.5, 0.3, 2.5), -1, 1), 0, -1, (float)0.3, 1);
  EXPECT_VALUES(pd_softshrink(T(PD_FLOAT32, 1, SHAPE(4), -0.9, -0.2, 0.1, 0.8), 0.5), 1e-7, -0.39999998, 0, 0,
                0.30000001);
  /* Paddle prints x - tanh(x) with the rounding of its float32 tanh (4e-8 here) */
  EXPECT_VALUES(pd_tanhshrink(T(PD_FLOAT32, 1, SHAPE(4), -0.4, -0.2, 0.1, 0.3)), 5e-8, -0.02005100,
                -0.00262472, 0.00033201, 0.00868741);
  EXPECT_VALUES(pd_mish(T(PD_FLOAT32, 1, SHAPE(3), -5, 0, 5)), 1e-7, -0.03357624, 0, 4.99955177);
  EXPECT_VALUES(pd_thresholded_relu(T(PD_FLOAT32, 1, SHAPE(3), 2, 0, 1), 1, 0), 0, 2, 0, 0);
  pd_tensor *g = T(PD_FLOAT32, 2, SHAPE(2, 4), -0.22014759, -1.76358426, 0.80566144, 0.04241343, -1.94900405,
                   -1.89956081, 0.17134808, -1.11280477);
  pd_tensor *gy = pd_glu(g, -1);
  expect_shape(gy, 2, SHAPE(2, 2));
  EXPECT_VALUES(gy, 1e-7, -0.15216254, -0.90048921, -1.05778778, -0.46985325);
  pd_tensor *m = T(PD_FLOAT32, 4, SHAPE(1, 2, 3, 4), 0.86583614, 0.52014720, 0.25960937, 0.90525323,
                   0.42400089, 0.40641287, 0.97020894, 0.74437362, 0.51785129, 0.73292869, 0.97786582,
                   0.04315904, 0.42639419, 0.71958369, 0.20811461, 0.19731510, 0.38424349, 0.14603184,
                   0.22713774, 0.44607511, 0.21657862, 0.67685395, 0.46460176, 0.92382854);
  pd_tensor *my = pd_maxout(m, 2, 1);
  expect_shape(my, 4, SHAPE(1, 1, 3, 4));
  EXPECT_VALUES(my, 0, (float)0.86583614, (float)0.71958369, (float)0.25960937, (float)0.90525323,
                (float)0.42400089, (float)0.40641287, (float)0.97020894, (float)0.74437362, (float)0.51785129,
                (float)0.73292869, (float)0.97786582, (float)0.92382854);
  pd_scope_end();
  expect_no_live_tensors();
}

/* Saturation, tiny inputs and the float32 accuracy of the cancelling forms. */
static void test_extremes(void **state) {
  (void)state;
  pd_scope_begin();
  static const pd_dtype dts[] = {PD_FLOAT32, PD_FLOAT64};
  for (int k = 0; k < 2; k++) {
    pd_tensor *x = T(dts[k], 1, SHAPE(5), -100, 100, 45, -INFINITY, INFINITY);
    pd_tensor *mi = pd_mish(x);
    EXPECT_VALUES(mi, 1e-30, 0, 100, 45, NAN, INFINITY); /* -inf * 0 as Paddle */
    assert_true(pd_tensor_item_at(mi, 0) <= 0 && pd_tensor_item_at(mi, 0) > -1e-30);
    EXPECT_VALUES(pd_celu(x, 2), 1e-30, -2, 100, 45, -2, INFINITY);
    EXPECT_VALUES(pd_tanhshrink(x), 1e-30, -99, 99, 44, -INFINITY, INFINITY);
    EXPECT_VALUES(pd_hardtanh(x, -1, 1), 0, -1, 1, 1, -1, 1);
    EXPECT_VALUES(pd_softshrink(x, 0.5), 0, -99.5, 99.5, 44.5, -INFINITY, INFINITY);
  }
  /* relative accuracy where x - tanh(x) and e^x - 1 cancel */
  static const double small[] = {1e-3, -0.01, 0.1, -0.3, 0.6, 0.624, 0.7, -0.9};
  int ns = (int)(sizeof small / sizeof *small);
  pd_tensor *xs = pd_tensor_from_f64(small, PD_FLOAT32, 1, SHAPE(ns));
  pd_tensor *ts = pd_tanhshrink(xs), *cs = pd_celu(pd_scale(xs, -1, 0, true), 1.0);
  for (int i = 0; i < ns; i++) {
    double v = pd_tensor_item_at(xs, i);
    double want_t = ref_tanhshrink(v), want_c = -v > 0 ? -v : expm1(-v);
    double got_t = pd_tensor_item_at(ts, i), got_c = pd_tensor_item_at(cs, i);
    if (fabs(got_t - want_t) > 4e-6 * fabs(want_t))
      fail_msg("tanhshrink(%g): %.9g vs %.9g", v, got_t, want_t);
    if (fabs(got_c - want_c) > 6e-7 * fabs(want_c)) fail_msg("celu(%g): %.9g vs %.9g", -v, got_c, want_c);
  }
  pd_scope_end();
  expect_no_live_tensors();
}

/* Large float32 tensors take the threaded flat path: same values. */
static void test_large(void **state) {
  (void)state;
  pd_scope_begin();
  int64_t n = 100003;
  pd_tensor *x = pd_uniform(1, SHAPE(n), PD_FLOAT32, -6, 6, 11);
  for (int k = 0; k < N_OPS; k++) {
    P0 = k_ops[k].p0;
    P1 = k_ops[k].p1;
    expect_pointwise(&k_ops[k], x, k_ops[k].f(x), k_ops[k].rtol32, 1e-9);
  }
  pd_scope_end();
  expect_no_live_tensors();
}

/* d/dx sum(w * f(x)) against derivatives written here. */
static double d_celu(double x) { return x > 0 ? 1 : exp(x / P0); }
static double d_hardtanh(double x) { return x > P0 && x < P1 ? 1 : 0; }
static double d_shrink(double x) { return fabs(x) > P0 ? 1 : 0; }
static double d_tanhshrink(double x) { return tanh(x) * tanh(x); }
static double d_mish(double x) {
  double sp = log1p(exp(x)), t = tanh(sp);
  return t + x * (1 - t * t) / (1 + exp(-x));
}
static double d_thresholded(double x) { return x > P0 ? 1 : 0; }

static void test_pointwise_grads(void **state) {
  (void)state;
  static const struct {
    int op; /* index into k_ops */
    double (*d)(double);
  } cases[] = {{0, d_celu},   {2, d_celu},       {3, d_hardtanh}, {5, d_shrink},
               {7, d_shrink}, {9, d_tanhshrink}, {10, d_mish},    {12, d_thresholded}};
  static const double xv[] = {-1.7, -0.6, -0.2, 0.3, 0.9, 2.2, 23};
  static const double wv[] = {1, -2, 0.5, 3, -1, 2, 0.25};
  pd_scope_begin();
  pd_tensor *w = pd_tensor_from_f64(wv, PD_FLOAT64, 1, SHAPE(7));
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
    const pointwise *op = &k_ops[cases[c].op];
    P0 = op->p0;
    P1 = op->p1;
    pd_tensor *x = pd_tensor_from_f64(xv, PD_FLOAT64, 1, SHAPE(7));
    pd_tensor_set_stop_gradient(x, false);
    assert_int_equal(pd_backward(pd_sum(pd_multiply(op->f(x), w), NULL, 0, false), NULL, false), PD_OK);
    pd_tensor *g = pd_tensor_grad(x);
    for (int i = 0; i < 7; i++) {
      double want = wv[i] * cases[c].d(xv[i]), got = pd_tensor_item_at(g, i);
      if (fabs(got - want) > 1e-13 * (1 + fabs(want)))
        fail_msg("d %s at %g: got %.17g, want %.17g", op->name, xv[i], got, want);
    }
  }
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_maxout(void **state) {
  (void)state;
  pd_scope_begin();
  /* NCHW [1, 4, 1, 3], groups 2: out channel c = max(in 2c, in 2c + 1) */
  pd_tensor *x = T(PD_FLOAT64, 4, SHAPE(1, 4, 1, 3), 1, 5, -2, /* c0 */ 3, 4, -1, /* c1 */ 0, -7, 9, /* c2 */
                   -3, -6, 8 /* c3 */);
  pd_tensor *y = pd_maxout(x, 2, 1);
  expect_shape(y, 4, SHAPE(1, 2, 1, 3));
  EXPECT_VALUES(y, 0, 3, 5, -1, 0, -6, 9);
  /* groups 4 covers all channels */
  EXPECT_VALUES(pd_maxout(x, 4, 1), 0, 3, 5, 9);
  /* NHWC: the same data with channels last, axis 3 and -1 */
  pd_tensor *xh = pd_transpose(x, 4, SHAPE(0, 2, 3, 1)); /* a non-contiguous [1, 1, 3, 4] view */
  for (int ax = 0; ax < 2; ax++) {
    pd_tensor *yh = pd_maxout(xh, 2, ax ? -1 : 3);
    expect_shape(yh, 4, SHAPE(1, 1, 3, 2));
    EXPECT_VALUES(yh, 0, 3, 0, 5, -6, -1, 9);
  }
  pd_tensor *xc = pd_contiguous(xh);
  EXPECT_VALUES(pd_maxout(xc, 2, 3), 0, 3, 0, 5, -6, -1, 9);
  /* float32, integer and empty inputs */
  EXPECT_VALUES(pd_maxout(pd_cast(x, PD_FLOAT32), 2, 1), 0, 3, 5, -1, 0, -6, 9);
  pd_tensor *yi = pd_maxout(pd_cast(x, PD_INT64), 2, 1);
  assert_int_equal(pd_tensor_dtype(yi), PD_FLOAT32);
  EXPECT_VALUES(yi, 0, 3, 5, -1, 0, -6, 9);
  expect_shape(pd_maxout(pd_zeros(4, SHAPE(0, 4, 2, 2), PD_FLOAT32), 2, 1), 4, SHAPE(0, 2, 2, 2));
  /* gradient: to the first maximum of each group (ties included) */
  pd_tensor *xg = T(PD_FLOAT64, 4, SHAPE(1, 4, 1, 2), 1, 2, 1, 2, 5, -1, 4, -1);
  pd_tensor_set_stop_gradient(xg, false);
  pd_tensor *w = T(PD_FLOAT64, 4, SHAPE(1, 2, 1, 2), 10, 20, 30, 40);
  assert_int_equal(pd_backward(pd_sum(pd_multiply(pd_maxout(xg, 2, 1), w), NULL, 0, false), NULL, false),
                   PD_OK);
  EXPECT_VALUES(pd_tensor_grad(xg), 0, 10, 20, 0, 0, 30, 40, 0, 0);
  /* channels last: the tie at (h, w) = (0, 0) goes to channel 0 */
  pd_tensor *xn = T(PD_FLOAT64, 4, SHAPE(1, 1, 2, 4), 7, 7, 1, 3, -2, -5, 6, 6);
  pd_tensor_set_stop_gradient(xn, false);
  assert_int_equal(pd_backward(pd_sum(pd_maxout(xn, 2, -1), NULL, 0, false), NULL, false), PD_OK);
  EXPECT_VALUES(pd_tensor_grad(xn), 0, 1, 0, 0, 1, 1, 0, 1, 0);
  /* a large input (threaded rows), both layouts, against a loop here */
  pd_tensor *big = pd_uniform(4, SHAPE(4, 12, 40, 41), PD_FLOAT32, -1, 1, 3);
  pd_tensor *yb = pd_maxout(big, 3, 1);
  const float *bp = pd_tensor_data(big);
  for (int64_t n = 0, i = 0; n < 4; n++)
    for (int64_t c = 0; c < 4; c++)
      for (int64_t s = 0; s < 40 * 41; s++, i++) {
        float m = bp[(n * 12 + 3 * c) * 1640 + s];
        for (int k = 1; k < 3; k++) m = fmaxf(m, bp[(n * 12 + 3 * c + k) * 1640 + s]);
        if (pd_tensor_item_at(yb, i) != m) fail_msg("maxout large at %lld", (long long)i);
      }
  pd_tensor *ybl = pd_maxout(pd_contiguous(pd_transpose(big, 4, SHAPE(0, 2, 3, 1))), 3, 3);
  expect_close(ybl, pd_transpose(yb, 4, SHAPE(0, 2, 3, 1)), 0, 0);
  /* bad inputs */
  expect_error(pd_maxout(x, 1, 1), "maxout", "groups (1)");
  expect_error(pd_maxout(x, 2, 2), "maxout", "axis 2");
  expect_error(pd_maxout(x, 2, -3), "maxout", "axis -3");
  expect_error(pd_maxout(T(PD_FLOAT32, 3, SHAPE(2, 2, 1), 1, 2, 3, 4), 2, 1), "maxout", "[2, 2, 1]");
  expect_error(pd_maxout(x, 3, 1), "maxout", "4 channels");
  expect_error(pd_maxout(x, 3, 1), "maxout", "groups 3");
  expect_error(pd_maxout(xh, 3, -1), "maxout", "[1, 1, 3, 4]");
  expect_error(pd_maxout(NULL, 2, 1), "maxout", "NULL");
  pd_scope_end();
  expect_no_live_tensors();
}

static double sig(double v) { return 1 / (1 + exp(-v)); }

static void test_glu(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = T(PD_FLOAT64, 2, SHAPE(2, 4), 1, -2, 0.5, 3, -1, 4, 2, -0.5);
  EXPECT_VALUES(pd_glu(x, -1), 1e-15, 1 * sig(0.5), -2 * sig(3), -1 * sig(2), 4 * sig(-0.5));
  EXPECT_VALUES(pd_glu(x, 1), 1e-15, 1 * sig(0.5), -2 * sig(3), -1 * sig(2), 4 * sig(-0.5));
  pd_tensor *y0 = pd_glu(x, 0); /* halves are the rows */
  expect_shape(y0, 2, SHAPE(1, 4));
  EXPECT_VALUES(y0, 1e-15, 1 * sig(-1), -2 * sig(4), 0.5 * sig(2), 3 * sig(-0.5));
  EXPECT_VALUES(pd_glu(x, -2), 1e-15, 1 * sig(-1), -2 * sig(4), 0.5 * sig(2), 3 * sig(-0.5));
  /* transposed view, float32, integer and empty inputs */
  pd_tensor *xt = pd_transpose(x, 2, SHAPE(1, 0)); /* [4, 2] */
  EXPECT_VALUES(pd_glu(xt, 0), 1e-15, 1 * sig(0.5), -1 * sig(2), -2 * sig(3), 4 * sig(-0.5));
  EXPECT_VALUES(pd_glu(pd_cast(x, PD_FLOAT32), -1), 1e-7, 1 * sig(0.5), -2 * sig(3), -1 * sig(2),
                4 * sig(-0.5));
  pd_tensor *yi = pd_glu(T(PD_INT32, 1, SHAPE(2), 3, 0), 0);
  assert_int_equal(pd_tensor_dtype(yi), PD_FLOAT32);
  EXPECT_VALUES(yi, 1e-7, 1.5);
  expect_shape(pd_glu(pd_zeros(2, SHAPE(0, 6), PD_FLOAT32), -1), 2, SHAPE(0, 3));
  /* gradient: da = w s(b), db = w a s(b) (1 - s(b)) */
  pd_tensor *xg = T(PD_FLOAT64, 2, SHAPE(1, 4), 1, -2, 0.5, 3);
  pd_tensor_set_stop_gradient(xg, false);
  pd_tensor *w = T(PD_FLOAT64, 2, SHAPE(1, 2), 2, -1);
  assert_int_equal(pd_backward(pd_sum(pd_multiply(pd_glu(xg, 1), w), NULL, 0, false), NULL, false), PD_OK);
  double s0 = sig(0.5), s1 = sig(3);
  EXPECT_VALUES(pd_tensor_grad(xg), 1e-15, 2 * s0, -s1, 2 * 1 * s0 * (1 - s0), -1 * -2 * s1 * (1 - s1));
  /* large: the threaded path */
  pd_tensor *big = pd_uniform(2, SHAPE(300, 400), PD_FLOAT32, -3, 3, 5);
  pd_tensor *yb = pd_glu(big, 1);
  const float *bp = pd_tensor_data(big);
  for (int64_t r = 0; r < 300; r++)
    for (int64_t c = 0; c < 200; c++) {
      double want = bp[r * 400 + c] * sig(bp[r * 400 + 200 + c]), got = pd_tensor_item_at(yb, r * 200 + c);
      if (fabs(got - want) > 1e-6 * (fabs(want) + 1e-3))
        fail_msg("glu large at %lld, %lld", (long long)r, (long long)c);
    }
  /* bad inputs */
  expect_error(pd_glu(T(PD_FLOAT32, 2, SHAPE(2, 3), 1, 2, 3, 4, 5, 6), -1), "glu", "size 3");
  expect_error(pd_glu(x, 2), "glu", "axis 2");
  expect_error(pd_glu(x, -3), "glu", "[-2, 2)");
  expect_error(pd_glu(T(PD_FLOAT32, 0, NULL, 1), -1), "glu", "axis -1");
  expect_error(pd_glu(NULL, -1), "glu", "NULL");
  pd_scope_end();
  expect_no_live_tensors();
}

/* Slopes y/x of the negative entries of x (float64 [n]); returns their count. */
static int64_t slopes(pd_tensor *x, pd_tensor *y, double lo, double hi, double *mean) {
  int64_t cnt = 0;
  double s = 0;
  for (int64_t i = 0; i < pd_tensor_numel(x); i++) {
    double xv = pd_tensor_item_at(x, i), yv = pd_tensor_item_at(y, i);
    if (xv >= 0) {
      if (yv != xv) fail_msg("rrelu: x %g >= 0 changed to %g", xv, yv);
      continue;
    }
    double a = yv / xv;
    if (!(a >= lo * (1 - 1e-6) && a <= hi * (1 + 1e-6)))
      fail_msg("rrelu: slope %.9g outside [%g, %g]", a, lo, hi);
    s += a;
    cnt++;
  }
  *mean = cnt ? s / (double)cnt : 0;
  return cnt;
}

static void test_rrelu(void **state) {
  (void)state;
  pd_scope_begin();
  /* eval: the mean slope, exactly as T(mid) * x */
  pd_tensor *x = T(PD_FLOAT32, 1, SHAPE(5), -2, -0.5, 0, 1.5, -3.3);
  float mid = (float)((0.1 + 0.3) / 2);
  EXPECT_VALUES(pd_rrelu(x, 0.1, 0.3, false), 0, mid * -2.0f, mid * -0.5f, 0, 1.5, mid * (float)-3.3);
  pd_tensor *x64 = T(PD_FLOAT64, 1, SHAPE(3), -2, 0, 4);
  EXPECT_VALUES(pd_rrelu(x64, PD_RRELU_LOWER, PD_RRELU_UPPER, false), 0, -2 * ((1.0 / 8 + 1.0 / 3) / 2), 0,
                4);
  /* training: slopes within [lower, upper], reproducible under pd_seed */
  pd_tensor *xr = pd_uniform(1, SHAPE(4001), PD_FLOAT64, -2, 2, 9);
  pd_seed(42);
  pd_tensor *y1 = pd_rrelu(xr, 0.1, 0.3, true);
  double mean;
  int64_t neg = slopes(xr, y1, 0.1, 0.3, &mean);
  assert_true(neg > 1500);
  assert_true(fabs(mean - 0.2) < 0.01);
  pd_tensor *y1b = pd_rrelu(xr, 0.1, 0.3, true); /* the generator moved on */
  assert_false(pd_tensor_item(pd_equal_all(y1, y1b)));
  pd_seed(42);
  expect_close(pd_rrelu(xr, 0.1, 0.3, true), y1, 0, 0);
  /* float32, and lower == upper gives that slope */
  pd_tensor *xr32 = pd_cast(xr, PD_FLOAT32);
  slopes(xr32, pd_rrelu(xr32, 0.05, 0.9, true), 0.05, 0.9, &mean);
  EXPECT_VALUES(pd_rrelu(T(PD_FLOAT64, 1, SHAPE(2), -2, 2), 0.25, 0.25, true), 0, -0.5, 2);
  /* the same draws on one thread as on several (above the threading grain) */
  pd_tensor *xl = pd_uniform(2, SHAPE(300, 401), PD_FLOAT32, -1, 1, 4);
  int nt = pd_get_num_threads();
  pd_seed(7);
  pd_tensor *yl = pd_rrelu(xl, 0.1, 0.5, true);
  pd_set_num_threads(1);
  pd_seed(7);
  pd_tensor *yl1 = pd_rrelu(xl, 0.1, 0.5, true);
  pd_set_num_threads(nt);
  expect_close(yl1, yl, 0, 0);
  slopes(pd_reshape(pd_cast(xl, PD_FLOAT64), 1, SHAPE(300 * 401)), pd_reshape(yl, 1, SHAPE(300 * 401)), 0.1,
         0.5, &mean);
  /* a transposed input keeps the element-to-element match */
  pd_tensor *xtr = pd_transpose(pd_reshape(xr, 2, SHAPE(1, 4001)), 2, SHAPE(1, 0));
  slopes(pd_reshape(xtr, 1, SHAPE(4001)), pd_reshape(pd_rrelu(xtr, 0.1, 0.3, true), 1, SHAPE(4001)), 0.1, 0.3,
         &mean);
  /* the gradient is the slope drawn (1 where x >= 0) */
  pd_tensor *xg = T(PD_FLOAT64, 1, SHAPE(6), -1.5, 2, -0.25, 0, -3, 0.5);
  pd_tensor_set_stop_gradient(xg, false);
  pd_tensor *yg = pd_rrelu(xg, 0.1, 0.3, true);
  assert_int_equal(pd_backward(pd_sum(yg, NULL, 0, false), NULL, false), PD_OK);
  pd_tensor *gg = pd_tensor_grad(xg);
  for (int i = 0; i < 6; i++) {
    double xv = pd_tensor_item_at(xg, i), want = xv < 0 ? pd_tensor_item_at(yg, i) / xv : 1;
    assert_true(fabs(pd_tensor_item_at(gg, i) - want) <= 1e-15);
  }
  pd_tensor_clear_grad(xg, false);
  assert_int_equal(pd_backward(pd_sum(pd_rrelu(xg, 0.1, 0.3, false), NULL, 0, false), NULL, false), PD_OK);
  EXPECT_VALUES(pd_tensor_grad(xg), 1e-16, 0.2, 1, 0.2, 1, 0.2, 1);
  /* integers compute in float32; empty stays empty */
  pd_tensor *yi = pd_rrelu(T(PD_INT32, 1, SHAPE(2), -2, 3), 0.5, 0.5, true);
  assert_int_equal(pd_tensor_dtype(yi), PD_FLOAT32);
  EXPECT_VALUES(yi, 0, -1, 3);
  expect_shape(pd_rrelu(pd_zeros(1, SHAPE(0), PD_FLOAT32), 0.1, 0.3, true), 1, SHAPE(0));
  /* bad bounds */
  expect_error(pd_rrelu(x, -0.1, 0.3, true), "rrelu", "lower (-0.1)");
  expect_error(pd_rrelu(x, 1.5, 1.5, false), "rrelu", "lower (1.5)");
  expect_error(pd_rrelu(x, 0.3, 0.05, true), "rrelu", "upper (0.05)");
  expect_error(pd_rrelu(x, 0.3, 1.2, true), "rrelu", "upper (1.2)");
  expect_error(pd_rrelu(NULL, 0.1, 0.3, true), "rrelu", "NULL");
  pd_scope_end();
  expect_no_live_tensors();
}

static void expect_repr(pd_layer *l, const char *want) {
  char *s = pd_layer_to_string(l);
  if (!s || strcmp(s, want) != 0) fail_msg("repr '%s', want '%s'", s ? s : "(null)", want);
  free(s);
}

static void test_layers(void **state) {
  (void)state;
  static const double xv[8] = {-2, -0.7, -0.2, 0, 0.3, 0.6, 1.4, 3};
  struct {
    pd_layer *l;
    int op; /* index into k_ops */
    const char *repr;
  } cases[] = {
      {pd_nn_celu(0.2), 1, "CELU(alpha=0.2)"},
      {pd_nn_hardtanh(-1, 1), 3, "Hardtanh(min=-1.0, max=1.0)"},
      {pd_nn_hardshrink(0.5), 5, "Hardshrink(threshold=0.5)"},
      {pd_nn_softshrink(2.5), 8, "Softshrink(threshold=2.5)"},
      {pd_nn_tanhshrink(), 9, "Tanhshrink()"},
      {pd_nn_mish(), 10, "Mish()"},
      {pd_nn_thresholded_relu(-0.5, 0.25), 12, "ThresholdedReLU(threshold=-0.5, value=0.25)"},
  };
  pd_scope_begin();
  pd_tensor *x = pd_tensor_from_f64(xv, PD_FLOAT64, 2, SHAPE(2, 4));
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
    assert_non_null(cases[c].l);
    P0 = k_ops[cases[c].op].p0;
    P1 = k_ops[cases[c].op].p1;
    expect_pointwise(&k_ops[cases[c].op], x, pd_layer_call1(cases[c].l, x), 1e-13, 1e-15);
    expect_repr(cases[c].l, cases[c].repr);
    pd_layer_release(cases[c].l);
  }
  /* Maxout and GLU forward to the functional ops */
  pd_layer *mo = pd_nn_maxout(2, 1), *glu = pd_nn_glu(-1), *glu0 = pd_nn_glu(0);
  expect_repr(mo, "Maxout(groups=2, axis=1)");
  expect_repr(glu, "GLU(axis=-1)");
  pd_tensor *x4 = pd_reshape(x, 4, SHAPE(1, 4, 1, 2));
  expect_close(pd_layer_call1(mo, x4), pd_maxout(x4, 2, 1), 0, 0);
  expect_close(pd_layer_call1(glu, x), pd_glu(x, -1), 0, 0);
  expect_close(pd_layer_call1(glu0, x), pd_glu(x, 0), 0, 0);
  expect_error(pd_layer_call1(glu, pd_reshape(x, 2, SHAPE(8, 1))), "glu", "size 1");
  pd_layer_release(mo);
  pd_layer_release(glu);
  pd_layer_release(glu0);
  /* RReLU follows the layer's training flag */
  pd_layer *rr = pd_nn_rrelu(PD_RRELU_LOWER, PD_RRELU_UPPER);
  expect_repr(rr, "RReLU(lower=0.125, upper=0.3333333333333333, training=True, dtype=float32)");
  double mean;
  slopes(x, pd_layer_call1(rr, x), PD_RRELU_LOWER, PD_RRELU_UPPER, &mean);
  pd_layer_eval(rr);
  expect_repr(rr, "RReLU(lower=0.125, upper=0.3333333333333333, training=False, dtype=float32)");
  double m = (PD_RRELU_LOWER + PD_RRELU_UPPER) / 2;
  EXPECT_VALUES(pd_layer_call1(rr, x), 0, -2 * m, -0.7 * m, -0.2 * m, 0, 0.3, 0.6, 1.4, 3);
  pd_layer_release(rr);
  /* Softmax2D: softmax over the channel axis (-3) of 3-D and 4-D inputs */
  pd_layer *sm = pd_nn_softmax2d();
  expect_repr(sm, "Softmax2D()");
  pd_tensor *x3 = T(PD_FLOAT64, 3, SHAPE(2, 1, 2), 0, 1, 2, 1);
  double e2 = exp(2.0);
  EXPECT_VALUES(pd_layer_call1(sm, x3), 1e-15, 1 / (1 + e2), 0.5, e2 / (1 + e2), 0.5);
  pd_tensor *xb = pd_uniform(4, SHAPE(2, 3, 4, 5), PD_FLOAT64, -2, 2, 8);
  pd_tensor *yb = pd_layer_call1(sm, xb);
  expect_close(yb, pd_softmax(xb, 1), 0, 0);
  expect_close(pd_sum(yb, SHAPE(1), 1, false), pd_ones(3, SHAPE(2, 4, 5), PD_FLOAT64), 1e-15, 1e-15);
  expect_error(pd_layer_call1(sm, x), "Softmax2D", "2-D");
  expect_error(pd_layer_call1(sm, pd_reshape(xb, 5, SHAPE(1, 2, 3, 4, 5))), "Softmax2D", "[1, 2, 3, 4, 5]");
  pd_layer_release(sm);
  pd_scope_end();
  /* constructor checks */
  assert_null(pd_nn_celu(0));
  expect_error(NULL, "CELU", "alpha");
  assert_null(pd_nn_softshrink(-1));
  expect_error(NULL, "Softshrink", "-1");
  assert_null(pd_nn_maxout(1, 1));
  expect_error(NULL, "Maxout", "groups (1)");
  assert_null(pd_nn_maxout(2, 0));
  expect_error(NULL, "Maxout", "axis 0");
  assert_null(pd_nn_rrelu(-0.5, 0.3));
  expect_error(NULL, "RReLU", "lower (-0.5)");
  assert_null(pd_nn_rrelu(0.4, 0.3));
  expect_error(NULL, "RReLU", "upper (0.3)");
  assert_null(pd_nn_rrelu(0.1, 1.5));
  expect_error(NULL, "RReLU", "upper (1.5)");
  expect_no_live_tensors();
}

static void test_bad_inputs(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = T(PD_FLOAT32, 1, SHAPE(2), 1, 2);
  expect_error(pd_celu(x, 0), "celu", "alpha");
  expect_error(pd_softshrink(x, -0.5), "softshrink", "-0.5");
  expect_error(pd_celu(NULL, 1), "celu", "NULL");
  expect_error(pd_hardtanh(NULL, -1, 1), "hardtanh", "NULL");
  expect_error(pd_hardshrink(NULL, 0.5), "hardshrink", "NULL");
  expect_error(pd_tanhshrink(NULL), "tanh_shrink", "NULL");
  expect_error(pd_mish(NULL), "mish", "NULL");
  expect_error(pd_thresholded_relu(NULL, 1, 0), "thresholded_relu", "NULL");
  /* bool computes in float32 */
  pd_tensor *b = pd_hardtanh(T(PD_BOOL, 1, SHAPE(2), 1, 0), -0.5, 0.5);
  assert_int_equal(pd_tensor_dtype(b), PD_FLOAT32);
  EXPECT_VALUES(b, 0, 0.5, 0);
  /* float16 computes in float32 and rounds back */
  pd_tensor *h = pd_mish(T(PD_FLOAT16, 1, SHAPE(2), 0, 1));
  assert_int_equal(pd_tensor_dtype(h), PD_FLOAT16);
  EXPECT_VALUES(h, 1e-3, 0, 0.8650983882673103);
  pd_scope_end();
  expect_no_live_tensors();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pointwise_values),
      cmocka_unit_test(test_paddle_examples),
      cmocka_unit_test(test_extremes),
      cmocka_unit_test(test_large),
      cmocka_unit_test(test_pointwise_grads),
      cmocka_unit_test(test_maxout),
      cmocka_unit_test(test_glu),
      cmocka_unit_test(test_rrelu),
      cmocka_unit_test(test_layers),
      cmocka_unit_test(test_bad_inputs),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
