/* paddle.nn.initializer: the statistics of every random initializer against
 * Paddle's formulas (fans of Linear [in, out] and Conv [out, in, kh, kw]
 * weights, gains, overrides) on large tensors, Uniform and TruncatedNormal
 * bounds held exactly, the truncated normal's moments and CDF against the
 * closed form, Assign, reproducibility under pd_seed, bad inputs. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

/* The values of t as doubles (malloc'ed, logical order). */
static double *values_of(const pd_tensor *t) {
  int64_t n = pd_tensor_numel(t);
  double *v = malloc(sizeof(double) * (size_t)(n + 1));
  assert_int_equal(pd_tensor_copy_to(t, v, n, PD_FLOAT64), n);
  return v;
}

typedef struct moments {
  double mean, std, min, max;
  int64_t n;
} moments;

static moments moments_of(const pd_tensor *t) {
  double *v = values_of(t);
  moments m = {0, 0, INFINITY, -INFINITY, pd_tensor_numel(t)};
  for (int64_t i = 0; i < m.n; i++) {
    m.mean += v[i];
    if (v[i] < m.min) m.min = v[i];
    if (v[i] > m.max) m.max = v[i];
  }
  m.mean /= (double)m.n;
  for (int64_t i = 0; i < m.n; i++) m.std += (v[i] - m.mean) * (v[i] - m.mean);
  m.std = sqrt(m.std / (double)m.n);
  free(v);
  return m;
}

/* Mean within 5 standard errors of `mean`, std within 2% of `std`. */
static void expect_normal_moments(const pd_tensor *t, double mean, double std, const char *what) {
  moments m = moments_of(t);
  double se = std / sqrt((double)m.n);
  if (fabs(m.mean - mean) > 5 * se || fabs(m.std - std) > 0.02 * std)
    fail_msg("%s: mean %.6g std %.6g over %lld values, want mean %.6g (+-%.2g) std %.6g (+-2%%)", what,
             m.mean, m.std, (long long)m.n, mean, 5 * se, std);
}

/* Every value in [-lim, lim] (as the tensor's dtype stores the bounds), the
 * extremes within 0.2% of the range from the bounds, mean 0 and std
 * lim / sqrt(3). */
static void expect_symmetric_uniform(const pd_tensor *t, double lim, const char *what) {
  moments m = moments_of(t);
  double lo = -lim, hi = lim;
  if (pd_tensor_dtype(t) == PD_FLOAT32) lo = (float)lo, hi = (float)hi;
  if (m.min < lo || m.max > hi)
    fail_msg("%s: values in [%.9g, %.9g], want [%.9g, %.9g]", what, m.min, m.max, lo, hi);
  if (m.min > lo + 0.002 * lim || m.max < hi - 0.002 * lim)
    fail_msg("%s: extremes %.6g, %.6g do not reach +-%.6g", what, m.min, m.max, lim);
  expect_normal_moments(t, 0.0, lim / sqrt(3.0), what);
}

static pd_tensor *param_of(pd_layer *l, const char *name) {
  pd_tensor *p = pd_layer_parameter(l, name);
  assert_non_null(p);
  return p;
}

/* ---- Xavier / Kaiming on Linear and Conv weights --------------------------------------------------- */

static void test_xavier_on_linear_and_conv(void **state) {
  (void)state;
  pd_seed(2024);
  /* Linear(512, 256): weight [512, 256], fan_in 512, fan_out 256 */
  pd_initializer xn = pd_nn_initializer_xavier_normal(0, 0, 0),
                 xu = pd_nn_initializer_xavier_uniform(0, 0, 0);
  pd_param_attr a_xn = {.initializer = &xn}, a_xu = {.initializer = &xu};
  pd_layer *l = pd_nn_linear(512, 256, &(pd_nn_linear_opts){.weight_attr = &a_xn});
  expect_shape(param_of(l, "weight"), 2, SHAPE(512, 256));
  expect_normal_moments(param_of(l, "weight"), 0.0, sqrt(2.0 / (512 + 256)), "XavierNormal Linear");
  pd_layer_release(l);
  l = pd_nn_linear(512, 256, &(pd_nn_linear_opts){.weight_attr = &a_xu, .dtype = PD_FLOAT64});
  expect_symmetric_uniform(param_of(l, "weight"), sqrt(6.0 / (512 + 256)), "XavierUniform Linear");
  pd_layer_release(l);
  /* the default weight initializer of Linear is XavierUniform too (Paddle's create_parameter) */
  l = pd_nn_linear(300, 700, NULL);
  expect_symmetric_uniform(param_of(l, "weight"), sqrt(6.0 / 1000), "Linear default");
  pd_layer_release(l);

  /* Conv2D(64, 128, 3x3): weight [128, 64, 3, 3], fan_in 64*9, fan_out 128*9 */
  pd_nn_conv_opts co = {.weight_attr = &a_xn};
  l = pd_nn_conv2d(64, 128, 1, SHAPE(3), &co);
  expect_shape(param_of(l, "weight"), 4, SHAPE(128, 64, 3, 3));
  expect_normal_moments(param_of(l, "weight"), 0.0, sqrt(2.0 / (576 + 1152)), "XavierNormal Conv2D");
  pd_layer_release(l);
  co.weight_attr = &a_xu;
  l = pd_nn_conv2d(64, 128, 1, SHAPE(3), &co);
  expect_symmetric_uniform(param_of(l, "weight"), sqrt(6.0 / (576 + 1152)), "XavierUniform Conv2D");
  pd_layer_release(l);
  /* Conv2D's default: Normal(0, sqrt(2 / (in_channels * kh * kw))) */
  l = pd_nn_conv2d(64, 128, 1, SHAPE(3), NULL);
  expect_normal_moments(param_of(l, "weight"), 0.0, sqrt(2.0 / 576), "Conv2D default");
  pd_layer_release(l);

  /* explicit fans and gain on a raw tensor */
  pd_scope_begin();
  pd_tensor *t = pd_zeros(2, SHAPE(512, 512), PD_FLOAT32);
  pd_initializer g = pd_nn_initializer_xavier_normal(100, 300, 2.5);
  assert_int_equal(pd_initializer_apply(&g, t), PD_OK);
  expect_normal_moments(t, 0.0, 2.5 * sqrt(2.0 / 400), "XavierNormal(100, 300, gain 2.5)");
  g = pd_nn_initializer_xavier_uniform(0, 1536, 0.5); /* fan_in from the shape, fan_out given */
  assert_int_equal(pd_initializer_apply(&g, t), PD_OK);
  expect_symmetric_uniform(t, 0.5 * sqrt(6.0 / 2048), "XavierUniform(None, 1536, gain 0.5)");
  /* a 1-D tensor [n] has fan_in = fan_out = n */
  pd_tensor *v = pd_zeros(1, SHAPE(200000), PD_FLOAT64);
  g = pd_nn_initializer_xavier_normal(0, 0, 0);
  assert_int_equal(pd_initializer_apply(&g, v), PD_OK);
  expect_normal_moments(v, 0.0, sqrt(2.0 / 400000), "XavierNormal 1-D");
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_kaiming_on_linear_and_conv(void **state) {
  (void)state;
  pd_seed(77);
  /* Paddle's defaults: fan_in from the shape, negative_slope 0, nonlinearity relu (gain sqrt 2) */
  pd_initializer kn = pd_nn_initializer_kaiming_normal(0, 0, NULL);
  pd_initializer ku = pd_nn_initializer_kaiming_uniform(0, 0, NULL);
  pd_param_attr a_kn = {.initializer = &kn}, a_ku = {.initializer = &ku};
  pd_layer *l = pd_nn_linear(512, 512, &(pd_nn_linear_opts){.weight_attr = &a_ku});
  expect_symmetric_uniform(param_of(l, "weight"), sqrt(2.0) * sqrt(3.0 / 512), "KaimingUniform Linear");
  pd_layer_release(l);
  l = pd_nn_linear(256, 1024, &(pd_nn_linear_opts){.weight_attr = &a_kn}); /* fan_in is the first dim */
  expect_normal_moments(param_of(l, "weight"), 0.0, sqrt(2.0) / sqrt(256.0), "KaimingNormal Linear");
  pd_layer_release(l);
  pd_nn_conv_opts co = {.weight_attr = &a_ku};
  l = pd_nn_conv2d(64, 128, 2, SHAPE(3, 5), &co); /* [128, 64, 3, 5]: fan_in 64 * 15 */
  expect_shape(param_of(l, "weight"), 4, SHAPE(128, 64, 3, 5));
  expect_symmetric_uniform(param_of(l, "weight"), sqrt(2.0) * sqrt(3.0 / 960), "KaimingUniform Conv2D");
  pd_layer_release(l);
  co.weight_attr = &a_kn;
  l = pd_nn_conv2d(64, 128, 2, SHAPE(3, 5), &co);
  expect_normal_moments(param_of(l, "weight"), 0.0, sqrt(2.0) / sqrt(960.0), "KaimingNormal Conv2D");
  pd_layer_release(l);

  /* gains of the other nonlinearities, and a fan_in override */
  pd_scope_begin();
  pd_tensor *t = pd_zeros(2, SHAPE(512, 512), PD_FLOAT64);
  struct {
    const char *nl;
    double slope, gain;
  } gains[] = {{"relu", 0, sqrt(2.0)},
               {"leaky_relu", 0, sqrt(2.0)},
               {"leaky_relu", 0.2, sqrt(2.0 / 1.04)},
               {"tanh", 0, 5.0 / 3},
               {"selu", 0, 0.75},
               {"sigmoid", 0, 1.0},
               {"linear", 0, 1.0},
               {"conv2d_transpose", 0, 1.0}};
  for (size_t i = 0; i < sizeof gains / sizeof *gains; i++) {
    pd_initializer k = pd_nn_initializer_kaiming_normal(0, gains[i].slope, gains[i].nl);
    assert_int_equal(pd_initializer_apply(&k, t), PD_OK);
    expect_normal_moments(t, 0.0, gains[i].gain / sqrt(512.0), gains[i].nl);
    k = pd_nn_initializer_kaiming_uniform(2000, gains[i].slope, gains[i].nl);
    assert_int_equal(pd_initializer_apply(&k, t), PD_OK);
    expect_symmetric_uniform(t, gains[i].gain * sqrt(3.0 / 2000), gains[i].nl);
  }
  /* a name calculate_gain rejects */
  pd_initializer bad = pd_nn_initializer_kaiming_uniform(0, 0, "swish");
  assert_true(pd_initializer_apply(&bad, t) < 0);
  assert_non_null(strstr(pd_last_error(), "'swish'"));
  pd_clear_error();
  pd_scope_end();
  expect_no_live_tensors();
}

/* ---- Normal, Uniform, Constant ----------------------------------------------------------------------- */

static void test_normal_uniform_constant(void **state) {
  (void)state;
  pd_seed(5);
  pd_scope_begin();
  pd_tensor *f = pd_zeros(2, SHAPE(512, 512), PD_FLOAT32), *d = pd_zeros(2, SHAPE(512, 512), PD_FLOAT64);
  pd_initializer n = pd_nn_initializer_normal(1.5, 0.3);
  assert_int_equal(pd_initializer_apply(&n, f), PD_OK);
  expect_normal_moments(f, 1.5, 0.3, "Normal(1.5, 0.3) float32");
  n = pd_nn_initializer_normal(-2.0, 4.0);
  assert_int_equal(pd_initializer_apply(&n, d), PD_OK);
  expect_normal_moments(d, -2.0, 4.0, "Normal(-2, 4) float64");

  /* Uniform(-0.3, 0.7): every value in [low, high), the range covered */
  pd_initializer u = pd_nn_initializer_uniform(-0.3, 0.7);
  for (int k = 0; k < 2; k++) {
    pd_tensor *t = k ? d : f;
    assert_int_equal(pd_initializer_apply(&u, t), PD_OK);
    double *v = values_of(t), lo = k ? -0.3 : (float)-0.3, hi = k ? 0.7 : (float)0.7, mn = 1, mx = -1;
    for (int64_t i = 0; i < 512 * 512; i++) {
      if (v[i] < lo || v[i] > hi || (k && v[i] == hi))
        fail_msg("Uniform value %.9g outside [-0.3, 0.7)", v[i]);
      mn = fmin(mn, v[i]);
      mx = fmax(mx, v[i]);
    }
    assert_true(mn < -0.3 + 1e-4 && mx > 0.7 - 1e-4);
    free(v);
    expect_normal_moments(t, 0.2, 1.0 / sqrt(12.0), "Uniform(-0.3, 0.7)");
  }
  /* low == high is a constant; low > high an error naming both */
  u = pd_nn_initializer_uniform(0.25, 0.25);
  assert_int_equal(pd_initializer_apply(&u, f), PD_OK);
  moments m = moments_of(f);
  assert_true(m.min == 0.25 && m.max == 0.25);
  u = pd_nn_initializer_uniform(1.0, -1.0);
  assert_true(pd_initializer_apply(&u, f) < 0);
  assert_non_null(strstr(pd_last_error(), "low 1 > high -1"));
  pd_clear_error();

  /* Constant, also on an integer tensor */
  pd_tensor *i = pd_zeros(1, SHAPE(3), PD_INT64);
  pd_initializer c = pd_nn_initializer_constant(7);
  assert_int_equal(pd_initializer_apply(&c, i), PD_OK);
  EXPECT_VALUES(i, 0, 7, 7, 7);
  pd_scope_end();
  expect_no_live_tensors();
}

/* ---- TruncatedNormal --------------------------------------------------------------------------------- */

static double phi(double x) { return exp(-0.5 * x * x) / sqrt(2 * M_PI); }
static double cdf(double x) { return 0.5 * erfc(-x / sqrt(2.0)); }

/* Mean, std and CDF of N(mu, sigma^2) truncated to [a, b], from the closed form. */
typedef struct tn_ref {
  double mu, sigma, a, b, alpha, beta, z;
} tn_ref;

static tn_ref tn_make(double mu, double sigma, double a, double b) {
  tn_ref r = {mu, sigma, a, b, (a - mu) / sigma, (b - mu) / sigma, 0};
  r.z = cdf(r.beta) - cdf(r.alpha);
  return r;
}
static double tn_mean(const tn_ref *r) { return r->mu + r->sigma * (phi(r->alpha) - phi(r->beta)) / r->z; }
static double tn_std(const tn_ref *r) {
  double d = (phi(r->alpha) - phi(r->beta)) / r->z;
  double var = 1 + (r->alpha * phi(r->alpha) - r->beta * phi(r->beta)) / r->z - d * d;
  return r->sigma * sqrt(var);
}
static double tn_cdf(const tn_ref *r, double x) {
  return (cdf((x - r->mu) / r->sigma) - cdf(r->alpha)) / r->z;
}

static void check_truncated(pd_tensor *t, double mu, double sigma, double a, double b) {
  pd_initializer init = pd_nn_initializer_truncated_normal(mu, sigma, a, b);
  assert_int_equal(pd_initializer_apply(&init, t), PD_OK);
  tn_ref r = tn_make(mu, sigma, a, b);
  int64_t n = pd_tensor_numel(t);
  double *v = values_of(t);
  /* every value within [a, b]: the bounds bound the value itself */
  for (int64_t i = 0; i < n; i++)
    if (!(v[i] >= a && v[i] <= b))
      fail_msg("TruncatedNormal(%g, %g, %g, %g): value %.9g outside [a, b]", mu, sigma, a, b, v[i]);
  /* moments of the truncated distribution */
  moments m = moments_of(t);
  double want_mean = tn_mean(&r), want_std = tn_std(&r);
  if (fabs(m.mean - want_mean) > 5 * want_std / sqrt((double)n) || fabs(m.std - want_std) > 0.01 * want_std)
    fail_msg("TruncatedNormal(%g, %g, %g, %g): mean %.6g std %.6g, want %.6g %.6g", mu, sigma, a, b, m.mean,
             m.std, want_mean, want_std);
  /* the empirical CDF at nine points of [a, b] (Kolmogorov-Smirnov scale 1/sqrt(n) ~ 0.002) */
  for (int q = 1; q < 10; q++) {
    double x = a + (b - a) * q / 10.0;
    int64_t below = 0;
    for (int64_t i = 0; i < n; i++) below += v[i] <= x;
    double emp = (double)below / (double)n, want = tn_cdf(&r, x);
    if (fabs(emp - want) > 0.006)
      fail_msg("TruncatedNormal(%g, %g, %g, %g): P(X <= %g) = %.5f, want %.5f", mu, sigma, a, b, x, emp,
               want);
  }
  free(v);
}

static void test_truncated_normal(void **state) {
  (void)state;
  pd_seed(11);
  pd_scope_begin();
  pd_tensor *d = pd_zeros(2, SHAPE(512, 512), PD_FLOAT64), *f = pd_zeros(2, SHAPE(512, 512), PD_FLOAT32);
  check_truncated(d, 0.0, 1.0, -2.0, 2.0); /* Paddle's defaults */
  check_truncated(f, 0.0, 1.0, -2.0, 2.0); /* float32: the bounds are exact floats, so they hold too */
  check_truncated(d, 1.0, 0.5, -2.0, 2.0); /* absolute bounds: cut 2 std above the mean, 6 below */
  check_truncated(d, 0.5, 2.0, -1.0, 3.0); /* asymmetric, narrower than the std */
  check_truncated(f, 0.02, 0.02, -0.04, 0.04);
  check_truncated(d, 3.0, 1.0, 4.0, 6.0);    /* both bounds above the mean (one tail) */
  check_truncated(d, -3.0, 1.0, -9.0, -5.5); /* both below, far in the tail */
  /* the old "mean +- 2 std" reading would keep these in [0, 2]: with a = -2, b = 2 they are not */
  pd_initializer shifted = pd_nn_initializer_truncated_normal(1.0, 0.5, -2.0, 2.0);
  assert_int_equal(pd_initializer_apply(&shifted, d), PD_OK);
  moments m = moments_of(d);
  assert_true(m.min < 0.0 && m.max <= 2.0 && m.max > 1.99);
  /* a == b gives that value; std 0 gives the mean (clamped) */
  pd_initializer point = pd_nn_initializer_truncated_normal(0.0, 1.0, 0.5, 0.5);
  assert_int_equal(pd_initializer_apply(&point, f), PD_OK);
  m = moments_of(f);
  assert_true(m.min == 0.5 && m.max == 0.5);
  point = pd_nn_initializer_truncated_normal(3.0, 0.0, -2.0, 2.0);
  assert_int_equal(pd_initializer_apply(&point, f), PD_OK);
  m = moments_of(f);
  assert_true(m.min == 2.0 && m.max == 2.0);
  /* bad bounds / std */
  pd_initializer bad = pd_nn_initializer_truncated_normal(0.0, 1.0, 2.0, -2.0);
  assert_true(pd_initializer_apply(&bad, f) < 0);
  assert_non_null(strstr(pd_last_error(), "a 2, b -2"));
  bad = pd_nn_initializer_truncated_normal(0.0, -1.0, -2.0, 2.0);
  assert_true(pd_initializer_apply(&bad, f) < 0);
  assert_non_null(strstr(pd_last_error(), "std -1"));
  pd_clear_error();
  pd_scope_end();
  expect_no_live_tensors();
}

/* ---- Assign ------------------------------------------------------------------------------------------- */

static void test_assign(void **state) {
  (void)state;
  pd_scope_begin();
  /* values copied and converted to the parameter's dtype */
  pd_tensor *val = T(PD_FLOAT64, 2, SHAPE(2, 3), 0.1, -2.5, 3.0, 1e-3, 7.25, -0.5);
  pd_initializer as = pd_nn_initializer_assign(val);
  pd_param_attr wa = {.initializer = &as};
  pd_layer *l = pd_nn_linear(2, 3, &(pd_nn_linear_opts){.weight_attr = &wa});
  pd_tensor *w = param_of(l, "weight");
  assert_int_equal(pd_tensor_dtype(w), PD_FLOAT32);
  float want[6] = {0.1f, -2.5f, 3.0f, 1e-3f, 7.25f, -0.5f};
  for (int i = 0; i < 6; i++) assert_true(((float *)pd_tensor_data(w))[i] == want[i]);
  pd_layer_release(l);
  /* an integer value into a float64 tensor */
  pd_tensor *t = pd_zeros(2, SHAPE(2, 3), PD_FLOAT64);
  pd_initializer ai = pd_nn_initializer_assign(T(PD_INT64, 2, SHAPE(2, 3), 1, 2, 3, -4, 5, 6));
  assert_int_equal(pd_initializer_apply(&ai, t), PD_OK);
  EXPECT_VALUES(t, 0, 1, 2, 3, -4, 5, 6);
  /* a non-contiguous value (a transposed view) is copied in logical order */
  pd_tensor *tv = pd_transpose(T(PD_FLOAT64, 2, SHAPE(3, 2), 1, 4, 2, 5, 3, 6), 2, SHAPE(1, 0));
  pd_initializer at = pd_nn_initializer_assign(tv);
  assert_int_equal(pd_initializer_apply(&at, t), PD_OK);
  EXPECT_VALUES(t, 0, 1, 2, 3, 4, 5, 6);
  /* a shape mismatch is rejected, naming both shapes, even with the same element count */
  pd_initializer bad = pd_nn_initializer_assign(T(PD_FLOAT64, 2, SHAPE(3, 2), 1, 2, 3, 4, 5, 6));
  assert_true(pd_initializer_apply(&bad, t) < 0);
  assert_non_null(strstr(pd_last_error(), "[3, 2]"));
  assert_non_null(strstr(pd_last_error(), "[2, 3]"));
  EXPECT_VALUES(t, 0, 1, 2, 3, 4, 5, 6); /* unchanged */
  bad = pd_nn_initializer_assign(T(PD_FLOAT64, 1, SHAPE(6), 1, 2, 3, 4, 5, 6));
  assert_true(pd_initializer_apply(&bad, t) < 0);
  assert_non_null(strstr(pd_last_error(), "[6]"));
  bad = pd_nn_initializer_assign(NULL);
  assert_true(pd_initializer_apply(&bad, t) < 0);
  assert_non_null(strstr(pd_last_error(), "Assign"));
  pd_clear_error();
  pd_scope_end();
  expect_no_live_tensors();
}

/* ---- reproducibility, bad inputs ------------------------------------------------------------------------
 */

static double *draw(const pd_initializer *init, pd_tensor *t) {
  assert_int_equal(pd_initializer_apply(init, t), PD_OK);
  return values_of(t);
}

static void test_seed_reproducibility(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *t = pd_zeros(3, SHAPE(16, 8, 3), PD_FLOAT32);
  pd_initializer inits[] = {pd_nn_initializer_normal(0, 1),
                            pd_nn_initializer_truncated_normal(0, 1, -2, 2),
                            pd_nn_initializer_uniform(-1, 1),
                            pd_nn_initializer_xavier_normal(0, 0, 0),
                            pd_nn_initializer_xavier_uniform(0, 0, 0),
                            pd_nn_initializer_kaiming_normal(0, 0, NULL),
                            pd_nn_initializer_kaiming_uniform(0, 0, NULL)};
  size_t n = 16 * 8 * 3;
  for (size_t k = 0; k < sizeof inits / sizeof *inits; k++) {
    pd_seed(123);
    double *a = draw(&inits[k], t), *a2 = draw(&inits[k], t);
    pd_seed(123);
    double *b = draw(&inits[k], t);
    pd_seed(124);
    double *c = draw(&inits[k], t);
    assert_memory_equal(a, b, n * sizeof *a);      /* the same seed, the same values */
    assert_memory_not_equal(a, a2, n * sizeof *a); /* the generator moves on */
    assert_memory_not_equal(a, c, n * sizeof *a);  /* another seed, other values */
    free(a);
    free(a2);
    free(b);
    free(c);
  }
  /* layers built after the same seed get the same parameters */
  pd_seed(9);
  pd_layer *l1 = pd_nn_linear(20, 30, NULL);
  pd_seed(9);
  pd_layer *l2 = pd_nn_linear(20, 30, NULL);
  expect_close(param_of(l1, "weight"), param_of(l2, "weight"), 0, 0);
  pd_layer_release(l1);
  pd_layer_release(l2);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_initializer_bad_inputs(void **state) {
  (void)state;
  pd_scope_begin();
  pd_initializer n = pd_nn_initializer_normal(0, 1);
  pd_tensor *i = pd_zeros(1, SHAPE(4), PD_INT32);
  assert_true(pd_initializer_apply(&n, i) < 0);
  assert_non_null(strstr(pd_last_error(), "int32"));
  pd_tensor *nc = pd_transpose(pd_zeros(2, SHAPE(3, 4), PD_FLOAT32), 2, SHAPE(1, 0));
  assert_true(pd_initializer_apply(&n, nc) < 0);
  assert_non_null(strstr(pd_last_error(), "contiguous"));
  assert_true(pd_initializer_apply(NULL, i) < 0);
  assert_true(pd_initializer_apply(&n, NULL) < 0);
  pd_initializer unknown = {.kind = (pd_init_kind)99};
  assert_true(pd_initializer_apply(&unknown, pd_zeros(1, SHAPE(2), PD_FLOAT32)) < 0);
  assert_non_null(strstr(pd_last_error(), "99"));
  pd_clear_error();
  /* an empty tensor: nothing to draw, no error (fan_in 0 included) */
  pd_initializer k = pd_nn_initializer_kaiming_uniform(0, 0, NULL);
  assert_int_equal(pd_initializer_apply(&k, pd_zeros(2, SHAPE(0, 5), PD_FLOAT32)), PD_OK);
  pd_initializer x = pd_nn_initializer_xavier_normal(0, 0, 0);
  assert_int_equal(pd_initializer_apply(&x, pd_zeros(2, SHAPE(0, 5), PD_FLOAT32)), PD_OK);
  pd_scope_end();
  expect_no_live_tensors();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_xavier_on_linear_and_conv),
      cmocka_unit_test(test_kaiming_on_linear_and_conv),
      cmocka_unit_test(test_normal_uniform_constant),
      cmocka_unit_test(test_truncated_normal),
      cmocka_unit_test(test_assign),
      cmocka_unit_test(test_seed_reproducibility),
      cmocka_unit_test(test_initializer_bad_inputs),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
