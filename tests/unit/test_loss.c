/* Losses: every loss against a naive computation in double written here,
 * every reduction, ignore_index (all-ignored batches included), class
 * weights, soft labels, label smoothing, 3-D inputs with the class axis in
 * the middle, non-contiguous inputs, gradients (analytic formulas and
 * finite differences, double backward through cross entropy), the layers,
 * and bad inputs whose errors name the values. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

#define MEAN PD_REDUCTION_MEAN
#define SUM PD_REDUCTION_SUM
#define NONE PD_REDUCTION_NONE

/* ---- helpers ------------------------------------------------------------- */

static uint64_t g_seed = 12345;
static double urand(double lo, double hi) {
  g_seed = g_seed * 6364136223846793005ULL + 1442695040888963407ULL;
  return lo + (hi - lo) * (double)(g_seed >> 11) * (1.0 / 9007199254740992.0);
}
static void fill(double *v, int64_t n, double lo, double hi) {
  for (int64_t i = 0; i < n; i++) v[i] = urand(lo, hi);
}
static pd_tensor *tensor(const double *v, pd_dtype dt, int nd, const int64_t *shape) {
  return pd_tensor_from_f64(v, dt, nd, shape);
}
static double reduce(const double *v, int64_t n, pd_loss_reduction r) {
  double s = 0;
  for (int64_t i = 0; i < n; i++) s += v[i];
  return r == MEAN ? s / (double)n : s;
}
/* checks out against the per-element losses want[n] under reduction r */
static void expect_reduced(pd_tensor *out, const double *want, int64_t n, pd_loss_reduction r, double tol) {
  if (!out) fail_msg("loss is NULL: %s", pd_last_error());
  if (r == NONE) {
    expect_values(out, want, n, tol);
  } else {
    assert_int_equal(pd_tensor_ndim(out), 0);
    double w = reduce(want, n, r);
    EXPECT_VALUES(out, tol, w);
  }
}
static const pd_loss_reduction k_reds[3] = {MEAN, SUM, NONE};

/* log-sum-exp of n values with stride s */
static double lse_ref(const double *x, int64_t n, int64_t s) {
  double m = -INFINITY, acc = 0;
  for (int64_t j = 0; j < n; j++) m = fmax(m, x[j * s]);
  for (int64_t j = 0; j < n; j++) acc += exp(x[j * s] - m);
  return m + log(acc);
}

/* ---- elementwise losses --------------------------------------------------- */

static void test_mse_l1(void **state) {
  (void)state;
  assert_string_equal(pd_loss_reduction_name(MEAN), "mean");
  assert_string_equal(pd_loss_reduction_name(PD_REDUCTION_BATCHMEAN), "batchmean");
  assert_null(pd_loss_reduction_name((pd_loss_reduction)9));
  pd_scope_begin();
  double x[6], y[3];
  fill(x, 6, -2, 2);
  fill(y, 3, -2, 2);
  for (int dt = 0; dt < 2; dt++) {
    pd_dtype d = dt ? PD_FLOAT64 : PD_FLOAT32;
    double tol = dt ? 1e-12 : 1e-5;
    pd_tensor *X = tensor(x, d, 2, SHAPE(2, 3)), *Y = tensor(y, d, 1, SHAPE(3)); /* label broadcasts */
    double sq[6], ab[6];
    for (int i = 0; i < 6; i++) sq[i] = (x[i] - y[i % 3]) * (x[i] - y[i % 3]), ab[i] = fabs(x[i] - y[i % 3]);
    for (int r = 0; r < 3; r++) {
      pd_tensor *m = pd_mse_loss(X, Y, k_reds[r]), *l = pd_l1_loss(X, Y, k_reds[r]);
      expect_reduced(m, sq, 6, k_reds[r], tol);
      expect_reduced(l, ab, 6, k_reds[r], tol);
      assert_int_equal(pd_tensor_dtype(m), d);
    }
    expect_shape(pd_mse_loss(X, Y, NONE), 2, SHAPE(2, 3));
    expect_values(pd_square_error_cost(X, Y), sq, 6, tol);
  }
  /* a transposed (non-contiguous) input */
  pd_tensor *X = tensor(x, PD_FLOAT64, 2, SHAPE(2, 3));
  pd_tensor *Xt = pd_transpose(X, 2, SHAPE(1, 0)); /* [3, 2] */
  pd_tensor *Z = pd_zeros(2, SHAPE(3, 2), PD_FLOAT64);
  double want[6];
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 2; j++) want[i * 2 + j] = fabs(x[j * 3 + i]);
  expect_values(pd_l1_loss(Xt, Z, NONE), want, 6, 1e-12);
  /* integer inputs compute in float32 */
  pd_tensor *I = tensor((double[]){1, 5, -2}, PD_INT64, 1, SHAPE(3));
  pd_tensor *J = tensor((double[]){2, 2, 2}, PD_INT64, 1, SHAPE(3));
  pd_tensor *li = pd_l1_loss(I, J, SUM);
  assert_int_equal(pd_tensor_dtype(li), PD_FLOAT32);
  EXPECT_VALUES(li, 1e-6, 8);
  /* empty input: sum 0, mean NaN (0 / 0) as Paddle's mean of an empty tensor */
  pd_tensor *E = pd_zeros(2, SHAPE(0, 3), PD_FLOAT32);
  EXPECT_VALUES(pd_mse_loss(E, E, SUM), 0, 0);
  assert_true(isnan(pd_tensor_item(pd_mse_loss(E, E, MEAN))));
  expect_shape(pd_mse_loss(E, E, NONE), 2, SHAPE(0, 3));
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_smooth_l1(void **state) {
  (void)state;
  pd_scope_begin();
  /* residuals label - input across both sides of delta */
  double x[8] = {0.1, 0.8, -1.0, 1.2, 0.0, -0.4, 2.0, -3.0};
  double y[8] = {0.4, 0.2, 0.7, -1.0, 0.05, 1.0, 2.0, 0.5};
  double deltas[3] = {1.0, 0.5, 2.0};
  for (int k = 0; k < 3; k++) {
    double dl = deltas[k], want[8];
    for (int i = 0; i < 8; i++) {
      double r = y[i] - x[i];
      want[i] = fabs(r) <= dl ? 0.5 * r * r : dl * (fabs(r) - 0.5 * dl);
    }
    pd_tensor *X = tensor(x, PD_FLOAT32, 2, SHAPE(2, 4)), *Y = tensor(y, PD_FLOAT32, 2, SHAPE(2, 4));
    for (int r = 0; r < 3; r++)
      expect_reduced(pd_smooth_l1_loss(X, Y, k_reds[r], dl), want, 8, k_reds[r], 1e-6);
  }
  /* gradient in both regions: -clip(r, -delta, delta) for the input */
  pd_tensor *X = tensor(x, PD_FLOAT64, 1, SHAPE(8)), *Y = tensor(y, PD_FLOAT64, 1, SHAPE(8));
  pd_tensor_set_stop_gradient(X, false);
  assert_int_equal(pd_backward(pd_smooth_l1_loss(X, Y, SUM, 1.0), NULL, false), PD_OK);
  double g[8];
  for (int i = 0; i < 8; i++) g[i] = -fmax(-1.0, fmin(1.0, y[i] - x[i]));
  expect_values(pd_tensor_grad(X), g, 8, 1e-12);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_bce(void **state) {
  (void)state;
  pd_scope_begin();
  double x[6] = {0.5, 0.6, 0.7, 0.0, 1.0, 0.2}, y[6] = {1, 0, 1, 0.3, 0.6, 0.25}, w[3] = {0.5, 2.0, 1.5};
  double want[6], wantw[6];
  for (int i = 0; i < 6; i++) {
    want[i] = -(y[i] * fmax(log(x[i]), -100) + (1 - y[i]) * fmax(log(1 - x[i]), -100));
    wantw[i] = want[i] * w[i % 3];
  }
  pd_tensor *X = tensor(x, PD_FLOAT64, 2, SHAPE(2, 3)), *Y = tensor(y, PD_FLOAT64, 2, SHAPE(2, 3));
  pd_tensor *W = tensor(w, PD_FLOAT64, 1, SHAPE(3));
  for (int r = 0; r < 3; r++) {
    expect_reduced(pd_binary_cross_entropy(X, Y, NULL, k_reds[r]), want, 6, k_reds[r], 1e-12);
    expect_reduced(pd_binary_cross_entropy(X, Y, W, k_reds[r]), wantw, 6, k_reds[r], 1e-12);
  }
  /* Paddle's example: [0.5, 0.6, 0.7] vs [1, 0, 1] -> 0.65537095 */
  pd_tensor *P = tensor(x, PD_FLOAT32, 1, SHAPE(3)), *L = tensor(y, PD_FLOAT32, 1, SHAPE(3));
  EXPECT_VALUES(pd_binary_cross_entropy(P, L, NULL, MEAN), 1e-6, 0.65537095);
  /* gradient: (x - y) / (x (1 - x)) scaled by the weight */
  pd_tensor *X2 = tensor((double[]){0.3, 0.8, 0.5}, PD_FLOAT64, 1, SHAPE(3));
  pd_tensor *Y2 = tensor((double[]){1, 0, 0.4}, PD_FLOAT64, 1, SHAPE(3));
  pd_tensor_set_stop_gradient(X2, false);
  assert_int_equal(pd_backward(pd_binary_cross_entropy(X2, Y2, W, SUM), NULL, false), PD_OK);
  EXPECT_VALUES(pd_tensor_grad(X2), 1e-12, 0.5 * (0.3 - 1) / (0.3 * 0.7), 2.0 * 0.8 / (0.8 * 0.2),
                1.5 * 0.1 / 0.25);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_bce_with_logits(void **state) {
  (void)state;
  pd_scope_begin();
  double x[6] = {5.0, 1.0, 3.0, -100.0, 100.0, -0.7}, y[6] = {1, 0, 1, 1, 0, 0.3};
  double pw[3] = {2.0, 0.5, 3.0}, w[3] = {1.0, 0.25, 2.0};
  double plain[6], weighted[6];
  for (int i = 0; i < 6; i++) {
    /* -[y log s(x) + (1 - y) log(1 - s(x))] in a stable form */
    double sp_neg = x[i] > 0 ? log1p(exp(-x[i])) : -x[i] + log1p(exp(x[i])); /* -log s(x) */
    double sp_pos = sp_neg + x[i];                                           /* -log(1 - s(x)) */
    plain[i] = y[i] * sp_neg + (1 - y[i]) * sp_pos;
    weighted[i] = plain[i] * (1 + (pw[i % 3] - 1) * y[i]) * w[i % 3];
  }
  pd_tensor *X = tensor(x, PD_FLOAT64, 2, SHAPE(2, 3)), *Y = tensor(y, PD_FLOAT64, 2, SHAPE(2, 3));
  pd_tensor *PW = tensor(pw, PD_FLOAT64, 1, SHAPE(3)), *W = tensor(w, PD_FLOAT64, 1, SHAPE(3));
  for (int r = 0; r < 3; r++) {
    expect_reduced(pd_binary_cross_entropy_with_logits(X, Y, NULL, k_reds[r], NULL), plain, 6, k_reds[r],
                   1e-12);
    expect_reduced(pd_binary_cross_entropy_with_logits(X, Y, W, k_reds[r], PW), weighted, 6, k_reds[r],
                   1e-12);
  }
  /* float32 with extreme logits stays finite; Paddle's example gives 0.45618808 */
  pd_tensor *Xf = tensor(x, PD_FLOAT32, 1, SHAPE(6)), *Yf = tensor(y, PD_FLOAT32, 1, SHAPE(6));
  expect_values(pd_binary_cross_entropy_with_logits(Xf, Yf, NULL, NONE, NULL), plain, 6, 1e-6);
  pd_tensor *Xe = tensor(x, PD_FLOAT32, 1, SHAPE(3)), *Ye = tensor(y, PD_FLOAT32, 1, SHAPE(3));
  EXPECT_VALUES(pd_binary_cross_entropy_with_logits(Xe, Ye, NULL, MEAN, NULL), 1e-6, 0.45618808);
  /* gradient (sigmoid(x) - y) / n */
  pd_tensor_set_stop_gradient(X, false);
  assert_int_equal(pd_backward(pd_binary_cross_entropy_with_logits(X, Y, NULL, MEAN, NULL), NULL, false),
                   PD_OK);
  double g[6];
  for (int i = 0; i < 6; i++) g[i] = (1 / (1 + exp(-x[i])) - y[i]) / 6;
  expect_values(pd_tensor_grad(X), g, 6, 1e-12);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_kl_div(void **state) {
  (void)state;
  pd_scope_begin();
  double x[6], t[6] = {0.2, 0.0, 0.5, -0.3, 0.9, 0.1}, lt[6];
  fill(x, 6, -3, 0);
  fill(lt, 6, -3, 0);
  double want[6], want_log[6];
  for (int i = 0; i < 6; i++) {
    want[i] = t[i] > 0 ? t[i] * (log(t[i]) - x[i]) : 0;
    want_log[i] = exp(lt[i]) * (lt[i] - x[i]);
  }
  pd_tensor *X = tensor(x, PD_FLOAT64, 2, SHAPE(2, 3)), *T = tensor(t, PD_FLOAT64, 2, SHAPE(2, 3));
  pd_tensor *LT = tensor(lt, PD_FLOAT64, 2, SHAPE(2, 3));
  for (int r = 0; r < 3; r++) {
    expect_reduced(pd_kl_div(X, T, k_reds[r], false), want, 6, k_reds[r], 1e-12);
    expect_reduced(pd_kl_div(X, LT, k_reds[r], true), want_log, 6, k_reds[r], 1e-12);
  }
  /* batchmean: sum / batch size */
  EXPECT_VALUES(pd_kl_div(X, T, PD_REDUCTION_BATCHMEAN, false), 1e-12, reduce(want, 6, SUM) / 2);
  /* float32 input with a float64 label computes in float64 (as Paddle) */
  pd_tensor *Xf = tensor(x, PD_FLOAT32, 2, SHAPE(2, 3));
  assert_int_equal(pd_tensor_dtype(pd_kl_div(Xf, T, MEAN, false)), PD_FLOAT64);
  /* gradient: -t where t > 0 */
  pd_tensor_set_stop_gradient(X, false);
  assert_int_equal(pd_backward(pd_kl_div(X, T, SUM, false), NULL, false), PD_OK);
  EXPECT_VALUES(pd_tensor_grad(X), 0, -0.2, 0, -0.5, 0, -0.9, -0.1);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_margin_ranking(void **state) {
  (void)state;
  pd_scope_begin();
  /* Paddle's example: 0.75 */
  pd_tensor *in = tensor((double[]){1, 2, 3, 4}, PD_FLOAT32, 2, SHAPE(2, 2));
  pd_tensor *ot = tensor((double[]){2, 1, 2, 4}, PD_FLOAT32, 2, SHAPE(2, 2));
  pd_tensor *lb = tensor((double[]){1, -1, -1, -1}, PD_FLOAT32, 2, SHAPE(2, 2));
  EXPECT_VALUES(pd_margin_ranking_loss(in, ot, lb, 0.0, MEAN), 1e-6, 0.75);
  double x[6], o[6], l[2] = {1, -1}, want[6];
  fill(x, 6, -1, 1);
  fill(o, 6, -1, 1);
  for (int i = 0; i < 6; i++) want[i] = fmax(0, -l[i / 3] * (x[i] - o[i]) + 0.2);
  pd_tensor *X = tensor(x, PD_FLOAT64, 2, SHAPE(2, 3)), *O = tensor(o, PD_FLOAT64, 2, SHAPE(2, 3));
  pd_tensor *L = tensor(l, PD_FLOAT64, 2, SHAPE(2, 1)); /* broadcast over columns */
  for (int r = 0; r < 3; r++)
    expect_reduced(pd_margin_ranking_loss(X, O, L, 0.2, k_reds[r]), want, 6, k_reds[r], 1e-12);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_cosine_similarity(void **state) {
  (void)state;
  pd_scope_begin();
  double a[24], b[24];
  fill(a, 24, -1, 1);
  fill(b, 24, -1, 1);
  for (int c = 0; c < 3; c++) a[c * 4] = 0; /* x1[0, :, 0] is zero: eps keeps it finite */
  pd_tensor *A = tensor(a, PD_FLOAT64, 3, SHAPE(2, 3, 4)), *B = tensor(b, PD_FLOAT64, 3, SHAPE(2, 3, 4));
  /* axis 1 (the default) */
  double want[8];
  for (int n = 0; n < 2; n++)
    for (int k = 0; k < 4; k++) {
      double s12 = 0, s1 = 0, s2 = 0;
      for (int c = 0; c < 3; c++) {
        double u = a[n * 12 + c * 4 + k], v = b[n * 12 + c * 4 + k];
        s12 += u * v, s1 += u * u, s2 += v * v;
      }
      want[n * 4 + k] = s12 / sqrt(fmax(s1 * s2, 1e-16));
    }
  pd_tensor *cs = pd_cosine_similarity(A, B, 1, 1e-8);
  expect_shape(cs, 2, SHAPE(2, 4));
  expect_values(cs, want, 8, 1e-12);
  /* axis -1 with a broadcast x2 row */
  pd_tensor *B1 = tensor(b, PD_FLOAT64, 1, SHAPE(4));
  pd_tensor *cl = pd_cosine_similarity(A, B1, -1, 1e-8);
  expect_shape(cl, 2, SHAPE(2, 3));
  for (int r = 0; r < 6; r++) {
    double s12 = 0, s1 = 0, s2 = 0;
    for (int k = 0; k < 4; k++)
      s12 += a[r * 4 + k] * b[k], s1 += a[r * 4 + k] * a[r * 4 + k], s2 += b[k] * b[k];
    assert_true(fabs(pd_tensor_item_at(cl, r) - s12 / sqrt(fmax(s1 * s2, 1e-16))) < 1e-12);
  }
  /* the layer, and its gradient against finite differences */
  pd_layer *layer = pd_nn_cosine_similarity(NULL);
  char *s = pd_layer_to_string(layer);
  assert_string_equal(s, "CosineSimilarity(axis=1, eps=1e-08)");
  free(s);
  pd_tensor *in2[2] = {A, B}, *out[1];
  assert_int_equal(pd_layer_call(layer, in2, 2, out, 1), 1);
  expect_close(out[0], cs, 0, 1e-15);
  pd_layer_release(layer);
  pd_scope_end();
  expect_no_live_tensors();
}

/* ---- cross entropy ---------------------------------------------------------- */

/* naive per-sample hard-label loss over [N, C] rows */
static void ce_rows(const double *x, const int64_t *l, int64_t n, int64_t c, int64_t ig, double *out) {
  for (int64_t i = 0; i < n; i++) out[i] = l[i] == ig ? 0 : lse_ref(x + i * c, c, 1) - x[i * c + l[i]];
}

static pd_tensor *labels_i64(const int64_t *l, int nd, const int64_t *shape) {
  return pd_to_tensor(l, PD_INT64, nd, shape);
}

static void test_cross_entropy_hard(void **state) {
  (void)state;
  pd_scope_begin();
  enum { N = 6, C = 5 };
  double x[N * C], loss[N];
  int64_t l[N] = {0, 4, 2, 2, 1, 3};
  fill(x, N * C, -3, 3);
  ce_rows(x, l, N, C, -100, loss);
  pd_tensor *L = labels_i64(l, 1, SHAPE(N)), *L1 = labels_i64(l, 2, SHAPE(N, 1));
  for (int dt = 0; dt < 2; dt++) {
    pd_dtype d = dt ? PD_FLOAT64 : PD_FLOAT32;
    double tol = dt ? 1e-12 : 2e-6;
    pd_tensor *X = tensor(x, d, 2, SHAPE(N, C));
    for (int r = 0; r < 3; r++) {
      pd_tensor *o = pd_cross_entropy(X, L, NULL, -100, k_reds[r], false, -1, true, 0.0);
      expect_reduced(o, loss, N, k_reds[r], tol);
      assert_int_equal(pd_tensor_dtype(o), d);
    }
    /* reduction none keeps the label's shape: [N] or [N, 1] */
    expect_shape(pd_cross_entropy(X, L, NULL, -100, NONE, false, -1, true, 0), 1, SHAPE(N));
    expect_shape(pd_cross_entropy(X, L1, NULL, -100, NONE, false, -1, true, 0), 2, SHAPE(N, 1));
    /* int32 labels */
    pd_tensor *L32 = pd_cast(L, PD_INT32);
    expect_reduced(pd_cross_entropy(X, L32, NULL, -100, MEAN, false, -1, true, 0), loss, N, MEAN, tol);
  }
  /* float16 logits compute in float32 and come back as float16 */
  pd_tensor *Xh = tensor(x, PD_FLOAT16, 2, SHAPE(N, C));
  pd_tensor *oh = pd_cross_entropy(Xh, L, NULL, -100, MEAN, false, -1, true, 0);
  assert_int_equal(pd_tensor_dtype(oh), PD_FLOAT16);
  assert_true(fabs(pd_tensor_item(oh) - reduce(loss, N, MEAN)) < 2e-2);
  /* huge logits: the shifted log-sum-exp stays exact (no overflow, no 1e20 clamp) */
  double big[3] = {1e4, -1e4, 3e4};
  pd_tensor *B = tensor(big, PD_FLOAT32, 2, SHAPE(1, 3));
  pd_tensor *lb = labels_i64((int64_t[]){0}, 1, SHAPE(1));
  EXPECT_VALUES(pd_cross_entropy(B, lb, NULL, -100, SUM, false, -1, true, 0), 1e-6, 2e4);
  /* an empty batch: sum 0, none [0] */
  pd_tensor *E = pd_zeros(2, SHAPE(0, C), PD_FLOAT32), *El = pd_zeros(1, SHAPE(0), PD_INT64);
  EXPECT_VALUES(pd_cross_entropy(E, El, NULL, -100, SUM, false, -1, true, 0), 0, 0);
  expect_shape(pd_cross_entropy(E, El, NULL, -100, NONE, false, -1, true, 0), 1, SHAPE(0));
  pd_scope_end();
  expect_no_live_tensors();
}

/* A large batch (parallel rows) against the naive loss and gradient. */
static void test_cross_entropy_large(void **state) {
  (void)state;
  pd_scope_begin();
  enum { N = 300, C = 257 };
  double *x = malloc(sizeof(double) * N * C), loss[N];
  int64_t l[N];
  fill(x, N * C, -4, 4);
  for (int i = 0; i < N; i++) l[i] = (int64_t)urand(0, C);
  ce_rows(x, l, N, C, -100, loss);
  pd_tensor *X = tensor(x, PD_FLOAT32, 2, SHAPE(N, C));
  pd_tensor_set_stop_gradient(X, false);
  pd_tensor *o = pd_cross_entropy(X, labels_i64(l, 1, SHAPE(N)), NULL, -100, MEAN, false, -1, true, 0);
  EXPECT_VALUES(o, 1e-5, reduce(loss, N, MEAN));
  assert_int_equal(pd_backward(o, NULL, false), PD_OK);
  pd_tensor *g = pd_tensor_grad(X);
  double worst = 0;
  for (int i = 0; i < N; i++) {
    double ls = lse_ref(x + i * C, C, 1);
    for (int j = 0; j < C; j++) {
      double want = (exp(x[i * C + j] - ls) - (j == l[i])) / N;
      worst = fmax(worst, fabs(pd_tensor_item_at(g, i * C + j) - want));
    }
  }
  assert_true(worst < 1e-8);
  free(x);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_cross_entropy_ignore_index(void **state) {
  (void)state;
  pd_scope_begin();
  enum { N = 5, C = 4 };
  double x[N * C], w[C] = {0.5, 2.0, 1.0, 3.0};
  fill(x, N * C, -2, 2);
  pd_tensor *X = tensor(x, PD_FLOAT64, 2, SHAPE(N, C)), *W = tensor(w, PD_FLOAT64, 1, SHAPE(C));
  /* default ignore_index -100: ignored samples add 0 and mean divides by N (as Paddle) */
  int64_t l[N] = {1, -100, 3, 0, -100};
  double loss[N];
  ce_rows(x, l, N, C, -100, loss);
  pd_tensor *L = labels_i64(l, 1, SHAPE(N));
  expect_values(pd_cross_entropy(X, L, NULL, -100, NONE, false, -1, true, 0), loss, N, 1e-12);
  EXPECT_VALUES(pd_cross_entropy(X, L, NULL, -100, MEAN, false, -1, true, 0), 1e-12,
                reduce(loss, N, SUM) / N);
  EXPECT_VALUES(pd_cross_entropy(X, L, NULL, -100, SUM, false, -1, true, 0), 1e-12, reduce(loss, N, SUM));
  /* with a weight, mean divides by the weights of the non-ignored samples */
  double ws = w[1] + w[3] + w[0], wsum = w[1] * loss[0] + w[3] * loss[2] + w[0] * loss[3];
  EXPECT_VALUES(pd_cross_entropy(X, L, W, -100, MEAN, false, -1, true, 0), 1e-12, wsum / ws);
  EXPECT_VALUES(pd_cross_entropy(X, L, W, -100, SUM, false, -1, true, 0), 1e-12, wsum);
  /* ignore_index >= 0: mean divides by the count of non-ignored labels */
  int64_t l2[N] = {1, 2, 3, 0, 2};
  double loss2[N];
  ce_rows(x, l2, N, C, 2, loss2);
  pd_tensor *L2 = labels_i64(l2, 1, SHAPE(N));
  EXPECT_VALUES(pd_cross_entropy(X, L2, NULL, 2, MEAN, false, -1, true, 0), 1e-12, reduce(loss2, N, SUM) / 3);
  double ws2 = w[1] + w[3] + w[0], wsum2 = w[1] * loss2[0] + w[3] * loss2[2] + w[0] * loss2[3];
  EXPECT_VALUES(pd_cross_entropy(X, L2, W, 2, MEAN, false, -1, true, 0), 1e-12, wsum2 / ws2);
  /* an all-ignored batch gives 0 (never NaN), with and without weight */
  int64_t none_l[N] = {-100, -100, -100, -100, -100}, none2[N] = {2, 2, 2, 2, 2};
  pd_tensor *La = labels_i64(none_l, 1, SHAPE(N)), *Lb = labels_i64(none2, 1, SHAPE(N));
  EXPECT_VALUES(pd_cross_entropy(X, La, NULL, -100, MEAN, false, -1, true, 0), 0, 0);
  EXPECT_VALUES(pd_cross_entropy(X, La, W, -100, MEAN, false, -1, true, 0), 0, 0);
  EXPECT_VALUES(pd_cross_entropy(X, Lb, NULL, 2, MEAN, false, -1, true, 0), 0, 0);
  EXPECT_VALUES(pd_cross_entropy(X, Lb, W, 2, MEAN, false, -1, true, 0), 0, 0);
  /* ... and a zero gradient */
  pd_tensor_set_stop_gradient(X, false);
  assert_int_equal(pd_backward(pd_cross_entropy(X, Lb, W, 2, MEAN, false, -1, true, 0), NULL, false), PD_OK);
  for (int i = 0; i < N * C; i++) assert_true(pd_tensor_item_at(pd_tensor_grad(X), i) == 0);
  pd_scope_end();
  expect_no_live_tensors();
}

/* loss weights and their gradient: analytic for x, finite differences for the weight */
static void test_cross_entropy_weight_grad(void **state) {
  (void)state;
  pd_scope_begin();
  enum { N = 4, C = 3 };
  double x[N * C], w[C] = {0.7, 1.3, 2.1};
  int64_t l[N] = {2, 0, 1, 2};
  fill(x, N * C, -2, 2);
  pd_tensor *X = tensor(x, PD_FLOAT64, 2, SHAPE(N, C)), *W = tensor(w, PD_FLOAT64, 1, SHAPE(C));
  pd_tensor *L = labels_i64(l, 1, SHAPE(N));
  pd_tensor_set_stop_gradient(X, false);
  pd_tensor_set_stop_gradient(W, false);
  assert_int_equal(pd_backward(pd_cross_entropy(X, L, W, -100, MEAN, false, -1, true, 0), NULL, false),
                   PD_OK);
  double loss[N], wt = 0;
  ce_rows(x, l, N, C, -100, loss);
  for (int i = 0; i < N; i++) wt += w[l[i]];
  for (int i = 0; i < N; i++) {
    double ls = lse_ref(x + i * C, C, 1);
    for (int j = 0; j < C; j++) {
      double want = w[l[i]] * (exp(x[i * C + j] - ls) - (j == l[i])) / wt;
      assert_true(fabs(pd_tensor_item_at(pd_tensor_grad(X), i * C + j) - want) < 1e-12);
    }
  }
  for (int c = 0; c < C; c++) {
    double f[2];
    for (int s = 0; s < 2; s++) {
      double w2[C];
      memcpy(w2, w, sizeof w2);
      w2[c] += s ? -1e-6 : 1e-6;
      double num = 0, den = 0;
      for (int i = 0; i < N; i++) num += w2[l[i]] * loss[i], den += w2[l[i]];
      f[s] = num / den;
    }
    assert_true(fabs(pd_tensor_item_at(pd_tensor_grad(W), c) - (f[0] - f[1]) / 2e-6) < 1e-7);
  }
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_cross_entropy_soft_and_smoothing(void **state) {
  (void)state;
  pd_scope_begin();
  enum { N = 4, C = 5 };
  double x[N * C], y[N * C], w[C] = {1.0, 0.5, 2.0, 1.5, 0.25};
  fill(x, N * C, -2, 2);
  fill(y, N * C, 0, 1);
  for (int i = 0; i < N; i++) { /* rows sum to 1 */
    double s = 0;
    for (int j = 0; j < C; j++) s += y[i * C + j];
    for (int j = 0; j < C; j++) y[i * C + j] /= s;
  }
  double loss[N], wl[N], wg[N];
  for (int i = 0; i < N; i++) {
    double ls = lse_ref(x + i * C, C, 1);
    loss[i] = 0, wg[i] = 0;
    for (int j = 0; j < C; j++) loss[i] -= y[i * C + j] * (x[i * C + j] - ls), wg[i] += y[i * C + j] * w[j];
    wl[i] = loss[i] * wg[i];
  }
  pd_tensor *X = tensor(x, PD_FLOAT32, 2, SHAPE(N, C)), *Y = tensor(y, PD_FLOAT32, 2, SHAPE(N, C));
  pd_tensor *W = tensor(w, PD_FLOAT32, 1, SHAPE(C));
  pd_tensor *o = pd_cross_entropy(X, Y, NULL, -100, NONE, true, -1, true, 0);
  expect_shape(o, 2, SHAPE(N, 1)); /* soft labels keep the class axis as 1 */
  expect_values(o, loss, N, 2e-6);
  expect_reduced(pd_cross_entropy(X, Y, NULL, -100, MEAN, true, -1, true, 0), loss, N, MEAN, 2e-6);
  /* weighted: mean divides by sum_i sum_c y_ic w_c */
  EXPECT_VALUES(pd_cross_entropy(X, Y, W, -100, MEAN, true, -1, true, 0), 2e-6,
                reduce(wl, N, SUM) / reduce(wg, N, SUM));
  /* float64 soft labels are cast to the input's dtype */
  pd_tensor *Y64 = tensor(y, PD_FLOAT64, 2, SHAPE(N, C));
  expect_reduced(pd_cross_entropy(X, Y64, NULL, -100, SUM, true, -1, true, 0), loss, N, SUM, 2e-6);
  /* label smoothing: hard labels become (1 - eps) one_hot + eps / C soft labels */
  int64_t l[N] = {3, 0, 4, 1};
  double eps = 0.1, sm[N];
  for (int i = 0; i < N; i++) {
    double ls = lse_ref(x + i * C, C, 1);
    sm[i] = 0;
    for (int j = 0; j < C; j++) sm[i] -= ((j == l[i]) * (1 - eps) + eps / C) * (x[i * C + j] - ls);
  }
  pd_tensor *L = labels_i64(l, 1, SHAPE(N));
  expect_reduced(pd_cross_entropy(X, L, NULL, -100, MEAN, false, -1, true, eps), sm, N, MEAN, 2e-6);
  pd_tensor *os = pd_cross_entropy(X, L, NULL, -100, NONE, false, -1, true, eps);
  expect_shape(os, 2, SHAPE(N, 1));
  expect_values(os, sm, N, 2e-6);
  /* the layer with label smoothing and its gradient (softmax - smoothed) / N */
  pd_layer *ce = pd_nn_cross_entropy_loss(&(pd_nn_cross_entropy_loss_opts){.label_smoothing = eps});
  pd_tensor *X64 = tensor(x, PD_FLOAT64, 2, SHAPE(N, C));
  pd_tensor_set_stop_gradient(X64, false);
  pd_tensor *in[2] = {X64, L}, *out[1];
  assert_int_equal(pd_layer_call(ce, in, 2, out, 1), 1);
  EXPECT_VALUES(out[0], 1e-12, reduce(sm, N, MEAN));
  assert_int_equal(pd_backward(out[0], NULL, false), PD_OK);
  for (int i = 0; i < N; i++) {
    double ls = lse_ref(x + i * C, C, 1);
    for (int j = 0; j < C; j++) {
      double want = (exp(x[i * C + j] - ls) - ((j == l[i]) * (1 - eps) + eps / C)) / N;
      assert_true(fabs(pd_tensor_item_at(pd_tensor_grad(X64), i * C + j) - want) < 1e-12);
    }
  }
  pd_layer_release(ce);
  pd_scope_end();
  expect_no_live_tensors();
}

/* [N, C, L] with the class axis 1 (and a transposed, non-contiguous input). */
static void test_cross_entropy_axis1_3d(void **state) {
  (void)state;
  pd_scope_begin();
  enum { N = 2, C = 3, Lq = 4 };
  double x[N * C * Lq], loss[N * Lq];
  int64_t l[N * Lq] = {0, 2, 1, 1, 2, 0, -100, 2};
  fill(x, N * C * Lq, -2, 2);
  for (int n = 0; n < N; n++)
    for (int k = 0; k < Lq; k++) {
      const double *base = x + n * C * Lq + k;
      int64_t lab = l[n * Lq + k];
      loss[n * Lq + k] = lab == -100 ? 0 : lse_ref(base, C, Lq) - base[lab * Lq];
    }
  pd_tensor *X = tensor(x, PD_FLOAT32, 3, SHAPE(N, C, Lq)), *L = labels_i64(l, 2, SHAPE(N, Lq));
  pd_tensor *o = pd_cross_entropy(X, L, NULL, -100, NONE, false, 1, true, 0);
  expect_shape(o, 2, SHAPE(N, Lq));
  expect_values(o, loss, N * Lq, 2e-6);
  expect_reduced(pd_cross_entropy(X, L, NULL, -100, MEAN, false, 1, true, 0), loss, N * Lq, MEAN, 2e-6);
  /* label [N, 1, L] keeps its shape under none */
  pd_tensor *L3 = labels_i64(l, 3, SHAPE(N, 1, Lq));
  expect_shape(pd_cross_entropy(X, L3, NULL, -100, NONE, false, 1, true, 0), 3, SHAPE(N, 1, Lq));
  /* the same logits stored as [N, L, C] and viewed through a transpose */
  double xt[N * Lq * C];
  for (int n = 0; n < N; n++)
    for (int c = 0; c < C; c++)
      for (int k = 0; k < Lq; k++) xt[n * Lq * C + k * C + c] = x[n * C * Lq + c * Lq + k];
  pd_tensor *XT = pd_transpose(tensor(xt, PD_FLOAT32, 3, SHAPE(N, Lq, C)), 3, SHAPE(0, 2, 1));
  expect_values(pd_cross_entropy(XT, L, NULL, -100, NONE, false, 1, true, 0), loss, N * Lq, 2e-6);
  /* ... and axis -1 on the [N, L, C] layout gives the same losses */
  expect_values(
      pd_cross_entropy(tensor(xt, PD_FLOAT32, 3, SHAPE(N, Lq, C)), L, NULL, -100, NONE, false, -1, true, 0),
      loss, N * Lq, 2e-6);
  /* gradient along axis 1: (softmax - one_hot) / count, 0 for the ignored sample */
  pd_tensor *X64 = tensor(x, PD_FLOAT64, 3, SHAPE(N, C, Lq));
  pd_tensor_set_stop_gradient(X64, false);
  assert_int_equal(pd_backward(pd_cross_entropy(X64, L, NULL, -100, SUM, false, 1, true, 0), NULL, false),
                   PD_OK);
  for (int n = 0; n < N; n++)
    for (int k = 0; k < Lq; k++) {
      const double *base = x + n * C * Lq + k;
      int64_t lab = l[n * Lq + k];
      double ls = lse_ref(base, C, Lq);
      for (int c = 0; c < C; c++) {
        double want = lab == -100 ? 0 : exp(base[c * Lq] - ls) - (c == lab);
        assert_true(fabs(pd_tensor_item_at(pd_tensor_grad(X64), n * C * Lq + c * Lq + k) - want) < 1e-12);
      }
    }
  /* soft labels along axis 1 */
  double y[N * C * Lq], sl[N * Lq];
  fill(y, N * C * Lq, 0, 1);
  for (int n = 0; n < N; n++)
    for (int k = 0; k < Lq; k++) {
      const double *base = x + n * C * Lq + k;
      double ls = lse_ref(base, C, Lq);
      sl[n * Lq + k] = 0;
      for (int c = 0; c < C; c++) sl[n * Lq + k] -= y[n * C * Lq + c * Lq + k] * (base[c * Lq] - ls);
    }
  pd_tensor *Y = tensor(y, PD_FLOAT32, 3, SHAPE(N, C, Lq));
  pd_tensor *os = pd_cross_entropy(X, Y, NULL, -100, NONE, true, 1, true, 0);
  expect_shape(os, 3, SHAPE(N, 1, Lq));
  expect_values(os, sl, N * Lq, 2e-6);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_cross_entropy_probabilities(void **state) {
  (void)state;
  pd_scope_begin();
  enum { N = 3, C = 4 };
  double p[N * C], y[N * C];
  fill(p, N * C, 0.05, 1);
  fill(y, N * C, 0, 1);
  p[1 * C + 2] = 0; /* log(0) is clamped to -1e20 */
  int64_t l[N] = {1, 2, 3};
  double hard[N] = {-log(p[1]), 1e20, -log(p[2 * C + 3])}, soft[N];
  for (int i = 0; i < N; i++) {
    soft[i] = 0;
    for (int j = 0; j < C; j++) soft[i] -= y[i * C + j] * (p[i * C + j] > 0 ? log(p[i * C + j]) : -1e20);
  }
  pd_tensor *P = tensor(p, PD_FLOAT64, 2, SHAPE(N, C)), *L = labels_i64(l, 1, SHAPE(N));
  pd_tensor *Y = tensor(y, PD_FLOAT64, 2, SHAPE(N, C));
  expect_values(pd_cross_entropy(P, L, NULL, -100, NONE, false, -1, false, 0), hard, N, 1e-12);
  expect_values(pd_cross_entropy(P, Y, NULL, -100, NONE, true, -1, false, 0), soft, N, 1e-12);
  /* gradient -1 / p at the label */
  pd_tensor *P2 = tensor((double[]){0.2, 0.5, 0.3, 0.6, 0.1, 0.3}, PD_FLOAT64, 2, SHAPE(2, 3));
  pd_tensor_set_stop_gradient(P2, false);
  pd_tensor *L2 = labels_i64((int64_t[]){1, 0}, 1, SHAPE(2));
  assert_int_equal(pd_backward(pd_cross_entropy(P2, L2, NULL, -100, SUM, false, -1, false, 0), NULL, false),
                   PD_OK);
  EXPECT_VALUES(pd_tensor_grad(P2), 1e-12, 0, -2, 0, -1 / 0.6, 0, 0);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_softmax_with_cross_entropy(void **state) {
  (void)state;
  pd_scope_begin();
  /* Paddle's example: logits [0.4, 0.6, 0.9], label [1] -> 1.15328646 */
  pd_tensor *X = tensor((double[]){0.4, 0.6, 0.9}, PD_FLOAT32, 1, SHAPE(3));
  pd_tensor *L = labels_i64((int64_t[]){1}, 1, SHAPE(1));
  pd_tensor *sm = NULL;
  pd_tensor *o = pd_softmax_with_cross_entropy(X, L, false, -100, -1, &sm);
  expect_shape(o, 1, SHAPE(1));
  EXPECT_VALUES(o, 1e-6, 1.15328646);
  double z = exp(0.4) + exp(0.6) + exp(0.9);
  EXPECT_VALUES(sm, 1e-6, exp(0.4) / z, exp(0.6) / z, exp(0.9) / z);
  /* [N, C] with a rank-1 label: loss [N, 1] */
  double x[8];
  fill(x, 8, -1, 1);
  pd_tensor *X2 = tensor(x, PD_FLOAT64, 2, SHAPE(2, 4));
  pd_tensor *o2 =
      pd_softmax_with_cross_entropy(X2, labels_i64((int64_t[]){3, 0}, 1, SHAPE(2)), false, -100, -1, NULL);
  expect_shape(o2, 2, SHAPE(2, 1));
  double want[2];
  ce_rows(x, (int64_t[]){3, 0}, 2, 4, -100, want);
  expect_values(o2, want, 2, 1e-12);
  pd_scope_end();
  expect_no_live_tensors();
}

/* d/dx of sum(v * dL/dx) (double backward) against finite differences of
 * the analytic first gradient. */
static void test_cross_entropy_double_backward(void **state) {
  (void)state;
  pd_scope_begin();
  enum { N = 3, C = 4 };
  double x[N * C], v[N * C];
  int64_t l[N] = {2, 0, 3};
  fill(x, N * C, -1, 1);
  fill(v, N * C, -1, 1);
  pd_tensor *X = tensor(x, PD_FLOAT64, 2, SHAPE(N, C)), *V = tensor(v, PD_FLOAT64, 2, SHAPE(N, C));
  pd_tensor *L = labels_i64(l, 1, SHAPE(N));
  pd_tensor_set_stop_gradient(X, false);
  pd_tensor *loss = pd_cross_entropy(X, L, NULL, -100, MEAN, false, -1, true, 0);
  pd_tensor *g = NULL;
  assert_int_equal(pd_grad(&loss, 1, &X, 1, NULL, &(pd_grad_opts){.create_graph = true}, &g), PD_OK);
  pd_tensor *s = pd_sum(pd_multiply(g, V), NULL, 0, false);
  pd_tensor *gg = NULL;
  assert_int_equal(pd_grad(&s, 1, &X, 1, NULL, NULL, &gg), PD_OK);
  /* S(x) = sum_ij v_ij (softmax_ij - onehot_ij) / N */
  for (int e = 0; e < N * C; e++) {
    double f[2];
    for (int k = 0; k < 2; k++) {
      double xp[N * C];
      memcpy(xp, x, sizeof xp);
      xp[e] += k ? -1e-6 : 1e-6;
      double acc = 0;
      for (int i = 0; i < N; i++) {
        double ls = lse_ref(xp + i * C, C, 1);
        for (int j = 0; j < C; j++) acc += v[i * C + j] * (exp(xp[i * C + j] - ls) - (j == l[i])) / N;
      }
      f[k] = acc;
    }
    assert_true(fabs(pd_tensor_item_at(gg, e) - (f[0] - f[1]) / 2e-6) < 1e-7);
  }
  pd_scope_end();
  expect_no_live_tensors();
}

/* ---- nll ------------------------------------------------------------------- */

static void test_nll_loss(void **state) {
  (void)state;
  pd_scope_begin();
  enum { N = 5, C = 4 };
  double x[N * C], w[C] = {0.5, 1.5, 2.0, 1.0};
  fill(x, N * C, -3, 0);
  int64_t l[N] = {3, 0, -100, 2, 0};
  double plain[N], weighted[N], tw = 0;
  for (int i = 0; i < N; i++) {
    plain[i] = l[i] == -100 ? 0 : -x[i * C + l[i]];
    weighted[i] = l[i] == -100 ? 0 : -x[i * C + l[i]] * w[l[i]];
    tw += l[i] == -100 ? 0 : w[l[i]];
  }
  pd_tensor *X = tensor(x, PD_FLOAT32, 2, SHAPE(N, C)), *L = labels_i64(l, 1, SHAPE(N));
  pd_tensor *W = tensor(w, PD_FLOAT32, 1, SHAPE(C));
  expect_values(pd_nll_loss(X, L, NULL, -100, NONE), plain, N, 1e-6);
  EXPECT_VALUES(pd_nll_loss(X, L, NULL, -100, MEAN), 1e-6, reduce(plain, N, SUM) / 4);
  EXPECT_VALUES(pd_nll_loss(X, L, NULL, -100, SUM), 1e-6, reduce(plain, N, SUM));
  expect_values(pd_nll_loss(X, L, W, -100, NONE), weighted, N, 1e-6);
  EXPECT_VALUES(pd_nll_loss(X, L, W, -100, MEAN), 1e-6, reduce(weighted, N, SUM) / tw);
  /* Paddle's example: nll_loss(log_softmax(input), label) = 1.07202101 */
  double ex[15] = {0.88103855, 0.9908683,  0.6226845,  0.53331435, 0.07999352,
                   0.8549948,  0.25879037, 0.39530203, 0.698465,   0.73427284,
                   0.63575995, 0.18827209, 0.05689114, 0.0862954,  0.6325046};
  pd_tensor *LS = pd_log_softmax(tensor(ex, PD_FLOAT32, 2, SHAPE(5, 3)), 1);
  EXPECT_VALUES(pd_nll_loss(LS, labels_i64((int64_t[]){0, 2, 1, 1, 0}, 1, SHAPE(5)), NULL, -100, MEAN), 1e-6,
                1.07202101);
  /* all ignored: 0 */
  pd_tensor *La = labels_i64((int64_t[]){1, 1, 1, 1, 1}, 1, SHAPE(N));
  EXPECT_VALUES(pd_nll_loss(X, La, W, 1, MEAN), 0, 0);
  /* [N, C, d1, d2, d3] (5-D) */
  double x5[2 * 3 * 2 * 1 * 2];
  fill(x5, 24, -2, 0);
  int64_t l5[8] = {0, 1, 2, 1, 2, 0, 0, 1}, shp[5] = {2, 3, 2, 1, 2};
  double want5[8];
  for (int n = 0; n < 2; n++)
    for (int k = 0; k < 4; k++) want5[n * 4 + k] = -x5[n * 12 + l5[n * 4 + k] * 4 + k];
  pd_tensor *o5 =
      pd_nll_loss(tensor(x5, PD_FLOAT64, 5, shp), labels_i64(l5, 4, SHAPE(2, 2, 1, 2)), NULL, -100, NONE);
  expect_shape(o5, 4, SHAPE(2, 2, 1, 2));
  expect_values(o5, want5, 8, 1e-12);
  /* gradient: -w[l] / total weight at the labels */
  pd_tensor *X64 = tensor(x, PD_FLOAT64, 2, SHAPE(N, C));
  pd_tensor_set_stop_gradient(X64, false);
  assert_int_equal(pd_backward(pd_nll_loss(X64, L, W, -100, MEAN), NULL, false), PD_OK);
  for (int i = 0; i < N; i++)
    for (int j = 0; j < C; j++) {
      double want = l[i] == j ? -w[j] / tw : 0;
      assert_true(fabs(pd_tensor_item_at(pd_tensor_grad(X64), i * C + j) - want) < 1e-12);
    }
  /* the layer */
  pd_layer *nll = pd_nn_nll_loss(&(pd_nn_nll_loss_opts){.weight = W, .reduction = SUM});
  pd_tensor *in[2] = {X, L}, *out[1];
  assert_int_equal(pd_layer_call(nll, in, 2, out, 1), 1);
  EXPECT_VALUES(out[0], 1e-6, reduce(weighted, N, SUM));
  pd_layer_release(nll);
  pd_scope_end();
  expect_no_live_tensors();
}

/* ---- layers ------------------------------------------------------------------ */

static pd_tensor *call2(pd_layer *l, pd_tensor *a, pd_tensor *b) {
  pd_tensor *in[2] = {a, b}, *out[1];
  return pd_layer_call(l, in, 2, out, 1) == 1 ? out[0] : NULL;
}

static void test_layers(void **state) {
  (void)state;
  pd_scope_begin();
  double x[6], y[6];
  fill(x, 6, 0.1, 0.9);
  fill(y, 6, 0, 1);
  pd_tensor *X = tensor(x, PD_FLOAT32, 2, SHAPE(2, 3)), *Y = tensor(y, PD_FLOAT32, 2, SHAPE(2, 3));
  struct {
    pd_layer *layer;
    pd_tensor *want;
    const char *repr;
  } cases[] = {
      {pd_nn_mse_loss(NULL), pd_mse_loss(X, Y, MEAN), "MSELoss()"},
      {pd_nn_l1_loss(&(pd_nn_l1_loss_opts){.reduction = SUM}), pd_l1_loss(X, Y, SUM), "L1Loss()"},
      {pd_nn_smooth_l1_loss(NULL), pd_smooth_l1_loss(X, Y, MEAN, 1.0), "SmoothL1Loss()"},
      {pd_nn_bce_loss(NULL), pd_binary_cross_entropy(X, Y, NULL, MEAN), "BCELoss()"},
      {pd_nn_bce_with_logits_loss(&(pd_nn_bce_with_logits_loss_opts){.reduction = NONE}),
       pd_binary_cross_entropy_with_logits(X, Y, NULL, NONE, NULL), "BCEWithLogitsLoss()"},
      {pd_nn_kl_div_loss(&(pd_nn_kl_div_loss_opts){.reduction = PD_REDUCTION_BATCHMEAN}),
       pd_kl_div(X, Y, PD_REDUCTION_BATCHMEAN, false), "KLDivLoss()"},
  };
  for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
    assert_non_null(cases[k].layer);
    expect_close(call2(cases[k].layer, X, Y), cases[k].want, 0, 0);
    char *s = pd_layer_to_string(cases[k].layer);
    assert_string_equal(s, cases[k].repr);
    free(s);
    pd_layer_release(cases[k].layer);
  }
  /* MarginRankingLoss takes three inputs */
  pd_layer *mr = pd_nn_margin_ranking_loss(&(pd_nn_margin_ranking_loss_opts){.margin = 0.1});
  pd_tensor *in3[3] = {X, Y, pd_ones(2, SHAPE(2, 3), PD_FLOAT32)}, *out[1];
  assert_int_equal(pd_layer_call(mr, in3, 3, out, 1), 1);
  expect_close(out[0], pd_margin_ranking_loss(X, Y, in3[2], 0.1, MEAN), 0, 0);
  expect_error(call2(mr, X, Y), "MarginRankingLoss", "3 inputs");
  pd_layer_release(mr);
  /* CrossEntropyLoss with options; the weight is retained by the layer */
  double lg[12];
  fill(lg, 12, -1, 1);
  int64_t axis = 1, ig = 0;
  pd_tensor *W = tensor((double[]){1, 2, 3}, PD_FLOAT32, 1, SHAPE(3));
  pd_tensor *LG = tensor(lg, PD_FLOAT32, 3, SHAPE(2, 3, 2));
  pd_tensor *LB = labels_i64((int64_t[]){0, 2, 1, 0}, 2, SHAPE(2, 2));
  pd_layer *ce = pd_nn_cross_entropy_loss(
      &(pd_nn_cross_entropy_loss_opts){.weight = W, .ignore_index = &ig, .axis = &(int){(int)axis}});
  pd_scope_end(); /* W and the inputs die with the scope... */
  pd_scope_begin();
  W = tensor((double[]){1, 2, 3}, PD_FLOAT32, 1, SHAPE(3));
  LG = tensor(lg, PD_FLOAT32, 3, SHAPE(2, 3, 2));
  LB = labels_i64((int64_t[]){0, 2, 1, 0}, 2, SHAPE(2, 2));
  pd_tensor *got = call2(ce, LG, LB); /* ...the layer's reference keeps its weight alive */
  expect_close(got, pd_cross_entropy(LG, LB, W, 0, MEAN, false, 1, true, 0), 0, 1e-7);
  assert_true(pd_layer_call(ce, &LG, 1, out, 1) < 0);
  expect_error(NULL, "CrossEntropyLoss", "2 inputs");
  pd_layer_release(ce);
  /* a training step through Linear + CrossEntropyLoss */
  pd_seed(3);
  pd_layer *lin = pd_nn_linear(4, 3, NULL), *lossl = pd_nn_cross_entropy_loss(NULL);
  pd_tensor *feat = pd_randn(2, SHAPE(5, 4), PD_FLOAT32);
  pd_tensor *lab = labels_i64((int64_t[]){0, 1, 2, 1, 0}, 1, SHAPE(5));
  pd_tensor *loss = call2(lossl, pd_layer_call1(lin, feat), lab);
  assert_int_equal(pd_backward(loss, NULL, false), PD_OK);
  assert_non_null(pd_tensor_grad(pd_layer_parameter(lin, "weight")));
  assert_non_null(pd_tensor_grad(pd_layer_parameter(lin, "bias")));
  /* the bias gradient is sum over rows of (softmax - one_hot) / N: its entries sum to 0 */
  pd_tensor *gb = pd_tensor_grad(pd_layer_parameter(lin, "bias"));
  assert_true(fabs(pd_tensor_item_at(gb, 0) + pd_tensor_item_at(gb, 1) + pd_tensor_item_at(gb, 2)) < 1e-6);
  pd_layer_release(lin);
  pd_layer_release(lossl);
  /* bad options */
  assert_null(pd_nn_mse_loss(&(pd_nn_mse_loss_opts){.reduction = (pd_loss_reduction)9}));
  expect_error(NULL, "MSELoss", "9");
  assert_null(pd_nn_l1_loss(&(pd_nn_l1_loss_opts){.reduction = PD_REDUCTION_BATCHMEAN}));
  expect_error(NULL, "L1Loss", "reduction");
  pd_scope_end();
  expect_no_live_tensors();
}

/* ---- bad inputs ------------------------------------------------------------ */

static void test_bad_inputs(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *X = pd_zeros(2, SHAPE(4, 5), PD_FLOAT32);
  pd_tensor *L = labels_i64((int64_t[]){0, 7, 1, 2}, 1, SHAPE(4));
  /* a label out of range names the value and the class count */
  expect_error(pd_cross_entropy(X, L, NULL, -100, MEAN, false, -1, true, 0), "label value 7", "5 classes");
  pd_tensor *Ln = labels_i64((int64_t[]){0, -3, 1, 2}, 1, SHAPE(4));
  expect_error(pd_cross_entropy(X, Ln, NULL, -100, MEAN, false, -1, true, 0), "label value -3",
               "ignore_index -100");
  expect_error(pd_nll_loss(X, L, NULL, -100, MEAN), "nll_loss", "label value 7");
  /* shape mismatches name both shapes */
  pd_tensor *L3 = labels_i64((int64_t[]){0, 1, 2}, 1, SHAPE(3));
  expect_error(pd_cross_entropy(X, L3, NULL, -100, MEAN, false, -1, true, 0), "[3, 1]", "[4, 5]");
  pd_tensor *Lr = labels_i64((int64_t[]){0, 1, 2, 0, 1, 2, 0, 1}, 3, SHAPE(2, 2, 2));
  expect_error(pd_cross_entropy(X, Lr, NULL, -100, MEAN, false, -1, true, 0), "[2, 2, 2]", "[4, 5]");
  pd_tensor *Ys = pd_zeros(2, SHAPE(4, 3), PD_FLOAT32);
  expect_error(pd_cross_entropy(X, Ys, NULL, -100, MEAN, true, -1, true, 0), "[4, 3]", "[4, 5]");
  expect_error(pd_nll_loss(X, L3, NULL, -100, MEAN), "[3]", "[4, 5]");
  expect_error(pd_mse_loss(X, Ys, MEAN), "[4, 5]", "[4, 3]");
  expect_error(pd_smooth_l1_loss(X, pd_zeros(1, SHAPE(5), PD_FLOAT32), MEAN, 1.0), "smooth_l1_loss", "[5]");
  expect_error(pd_binary_cross_entropy(X, Ys, NULL, MEAN), "binary_cross_entropy", "[4, 3]");
  expect_error(pd_kl_div(X, Ys, MEAN, false), "kl_div", "[4, 3]");
  /* a weight of the wrong length */
  pd_tensor *W3 = pd_ones(1, SHAPE(3), PD_FLOAT32);
  pd_tensor *L0 = labels_i64((int64_t[]){0, 1, 2, 3}, 1, SHAPE(4));
  expect_error(pd_cross_entropy(X, L0, W3, -100, MEAN, false, -1, true, 0), "weight of shape [3]",
               "5 classes");
  expect_error(pd_nll_loss(X, L0, W3, -100, MEAN), "weight of shape [3]", "5 classes");
  /* wrong label dtypes */
  pd_tensor *Lb = pd_cast(L0, PD_BOOL);
  expect_error(pd_cross_entropy(X, Lb, NULL, -100, MEAN, false, -1, true, 0), "label dtype bool", NULL);
  pd_tensor *Lf = tensor((double[]){0, 1.5, 2, 3}, PD_FLOAT32, 1, SHAPE(4));
  expect_error(pd_cross_entropy(X, Lf, NULL, -100, MEAN, false, -1, true, 0), "label value 1.5",
               "whole number");
  expect_error(pd_nll_loss(X, Lf, NULL, -100, MEAN), "nll_loss", "label dtype float32");
  expect_error(pd_cross_entropy(X, L0, NULL, -100, MEAN, true, -1, true, 0), "soft labels", "int64");
  /* whole-number float labels are accepted as hard labels (as Paddle) */
  pd_tensor *Lw = tensor((double[]){0, 1, 2, 3}, PD_FLOAT32, 1, SHAPE(4));
  assert_non_null(pd_cross_entropy(X, Lw, NULL, -100, MEAN, false, -1, true, 0));
  /* bad axis, bad reduction, bad ignore_index with soft labels, 0-D input */
  expect_error(pd_cross_entropy(X, L0, NULL, -100, MEAN, false, 2, true, 0), "axis 2", "rank 2");
  expect_error(pd_cross_entropy(X, L0, NULL, -100, (pd_loss_reduction)7, false, -1, true, 0), "reduction 7",
               NULL);
  expect_error(pd_mse_loss(X, X, PD_REDUCTION_BATCHMEAN), "mse_loss", "batchmean");
  expect_error(pd_cross_entropy(X, X, NULL, 3, MEAN, true, -1, true, 0), "ignore_index 3", "soft_label");
  pd_tensor *S0 = pd_full(0, NULL, 1.0, PD_FLOAT32);
  expect_error(pd_cross_entropy(S0, L0, NULL, -100, MEAN, false, -1, true, 0), "cross_entropy", "0-D");
  expect_error(pd_nll_loss(pd_zeros(1, SHAPE(5), PD_FLOAT32), L0, NULL, -100, MEAN), "nll_loss", "2 or more");
  /* binary_cross_entropy needs probabilities */
  pd_tensor *P = tensor((double[]){0.5, 1.5}, PD_FLOAT32, 1, SHAPE(2));
  expect_error(pd_binary_cross_entropy(P, P, NULL, MEAN), "input value 1.5", "[0, 1]");
  /* cosine_similarity axis */
  expect_error(pd_cosine_similarity(X, X, 3, 1e-8), "cosine_similarity", "axis 3");
  /* NULL inputs propagate */
  expect_error(pd_cross_entropy(NULL, L0, NULL, -100, MEAN, false, -1, true, 0), "cross_entropy", "NULL");
  expect_error(pd_mse_loss(X, NULL, MEAN), "mse_loss", "NULL");
  pd_scope_end();
  expect_no_live_tensors();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_mse_l1),
      cmocka_unit_test(test_smooth_l1),
      cmocka_unit_test(test_bce),
      cmocka_unit_test(test_bce_with_logits),
      cmocka_unit_test(test_kl_div),
      cmocka_unit_test(test_margin_ranking),
      cmocka_unit_test(test_cosine_similarity),
      cmocka_unit_test(test_cross_entropy_hard),
      cmocka_unit_test(test_cross_entropy_large),
      cmocka_unit_test(test_cross_entropy_ignore_index),
      cmocka_unit_test(test_cross_entropy_weight_grad),
      cmocka_unit_test(test_cross_entropy_soft_and_smoothing),
      cmocka_unit_test(test_cross_entropy_axis1_3d),
      cmocka_unit_test(test_cross_entropy_probabilities),
      cmocka_unit_test(test_softmax_with_cross_entropy),
      cmocka_unit_test(test_cross_entropy_double_backward),
      cmocka_unit_test(test_nll_loss),
      cmocka_unit_test(test_layers),
      cmocka_unit_test(test_bad_inputs),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
