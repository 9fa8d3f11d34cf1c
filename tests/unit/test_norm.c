/* Normalization ops and layers: values against naive two-pass loops in
 * double written here, gradients against the same formulas composed from
 * primitive ops, running statistics against hand computation, bad inputs. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

/* ---- helpers ------------------------------------------------------------------------------------- */

static unsigned g_rng = 12345u;
static double rnd(void) {
  g_rng = g_rng * 1103515245u + 12345u;
  return (double)((g_rng >> 8) & 0xffffu) / 65536.0;
}

/* A tensor of values uniform in [lo, hi) (deterministic). */
static pd_tensor *rand_t(pd_dtype dt, int nd, const int64_t *shape, double lo, double hi) {
  int64_t n = 1;
  for (int d = 0; d < nd; d++) n *= shape[d];
  double *v = malloc(sizeof(double) * (size_t)(n + 1));
  for (int64_t i = 0; i < n; i++) v[i] = lo + (hi - lo) * rnd();
  pd_tensor *t = pd_tensor_from_f64(v, dt, nd, shape);
  free(v);
  return t;
}

/* Elements of t (logical order) as a malloc'ed double array. */
static double *vals(const pd_tensor *t) {
  int64_t n = pd_tensor_numel(t);
  double *v = malloc(sizeof(double) * (size_t)(n + 1));
  for (int64_t i = 0; i < n; i++) v[i] = pd_tensor_item_at(t, i);
  return v;
}

/* Compares t with the n values of want, as a tensor of t's shape. */
static void expect_array(const pd_tensor *t, const double *want, double rtol, double atol) {
  assert_non_null(t);
  pd_tensor *w = pd_tensor_from_f64(want, PD_FLOAT64, pd_tensor_ndim(t), pd_tensor_shape(t));
  expect_close(t, w, rtol, atol); /* w belongs to the caller's scope */
}

/* Naive statistics of the values x[idx(k)], k < n, in two passes. */
static void stats(const double *x, int64_t n, int64_t (*idx)(int64_t, const int64_t *), const int64_t *ctx,
                  bool centered, double *mean, double *var) {
  double m = 0, v = 0;
  if (centered) {
    for (int64_t k = 0; k < n; k++) m += x[idx(k, ctx)];
    m /= (double)n;
  }
  for (int64_t k = 0; k < n; k++) v += (x[idx(k, ctx)] - m) * (x[idx(k, ctx)] - m);
  *mean = m;
  *var = v / (double)n;
}

/* row r of [rows, n]: ctx = {n, r} */
static int64_t row_idx(int64_t k, const int64_t *c) { return c[1] * c[0] + k; }

/* layer / rms norm of [rows, n] */
static double *ref_rows(const double *x, int64_t rows, int64_t n, const double *w, const double *b,
                        double eps, bool centered) {
  double *y = malloc(sizeof(double) * (size_t)(rows * n + 1));
  for (int64_t r = 0; r < rows; r++) {
    double m, v;
    stats(x, n, row_idx, (int64_t[]){n, r}, centered, &m, &v);
    for (int64_t j = 0; j < n; j++)
      y[r * n + j] = (x[r * n + j] - m) / sqrt(v + eps) * (w ? w[j] : 1) + (b ? b[j] : 0);
  }
  return y;
}

/* channel c of [B, C, S] over (B, S): ctx = {B, C, S, c} */
static int64_t chan_idx(int64_t k, const int64_t *c) {
  int64_t b = k / c[2], s = k % c[2];
  return (b * c[1] + c[3]) * c[2] + s;
}

/* batch norm of [B, C, S] with batch statistics; mean / var out per channel */
static double *ref_batch(const double *x, int64_t B, int64_t C, int64_t S, const double *w, const double *b,
                         double eps, double *mean, double *var) {
  double *y = malloc(sizeof(double) * (size_t)(B * C * S + 1));
  for (int64_t c = 0; c < C; c++) {
    int64_t ctx[4] = {B, C, S, c};
    stats(x, B * S, chan_idx, ctx, true, &mean[c], &var[c]);
    for (int64_t k = 0; k < B * S; k++) {
      int64_t i = chan_idx(k, ctx);
      y[i] = (x[i] - mean[c]) / sqrt(var[c] + eps) * (w ? w[c] : 1) + (b ? b[c] : 0);
    }
  }
  return y;
}

/* group g of sample b in [B, C, S]: ctx = {C, S, cg, b, g} */
static int64_t group_idx(int64_t k, const int64_t *c) { return (c[3] * c[0] + c[4] * c[2]) * c[1] + k; }

static double *ref_group(const double *x, int64_t B, int64_t C, int64_t S, int64_t G, const double *w,
                         const double *b, double eps) {
  double *y = malloc(sizeof(double) * (size_t)(B * C * S + 1));
  int64_t cg = C / G;
  for (int64_t n = 0; n < B; n++)
    for (int64_t g = 0; g < G; g++) {
      int64_t ctx[5] = {C, S, cg, n, g};
      double m, v;
      stats(x, cg * S, group_idx, ctx, true, &m, &v);
      for (int64_t k = 0; k < cg * S; k++) {
        int64_t i = group_idx(k, ctx), c = g * cg + k / S;
        y[i] = (x[i] - m) / sqrt(v + eps) * (w ? w[c] : 1) + (b ? b[c] : 0);
      }
    }
  return y;
}

/* The forward composed from primitive ops over axis -1 (layer norm when
 * centered, rms norm otherwise), for gradient comparisons. */
static pd_tensor *composite_row_norm(pd_tensor *x, pd_tensor *w, pd_tensor *b, double eps, bool centered) {
  int64_t ax = -1, n = pd_tensor_shape(x)[pd_tensor_ndim(x) - 1];
  pd_tensor *xc = x;
  if (centered) xc = pd_subtract(x, pd_scale(pd_sum(x, &ax, 1, true), 1.0 / (double)n, 0, true));
  pd_tensor *var = pd_scale(pd_sum(pd_multiply(xc, xc), &ax, 1, true), 1.0 / (double)n, 0, true);
  pd_tensor *y = pd_multiply(xc, pd_rsqrt(pd_scale(var, 1.0, eps, true)));
  if (w) y = pd_multiply(y, w);
  if (b) y = pd_add(y, b);
  return y;
}

/* Gradients of sum(f(x, w, b) * R) for inputs in[0..n) (stop_gradient off). */
static void grads_of(pd_tensor *y, pd_tensor *R, pd_tensor **in, int n, pd_tensor **g, bool create_graph) {
  pd_tensor *L = pd_sum(pd_multiply(y, R), NULL, 0, false);
  pd_grad_opts o = {.create_graph = create_graph, .allow_unused = true};
  assert_int_equal(pd_grad(&L, 1, in, n, NULL, &o, g), PD_OK);
}

/* ---- layer_norm ------------------------------------------------------------------------------------- */

static void check_layer_norm(pd_dtype dt, int nd, const int64_t *xs, int nshape, bool with_w, bool with_b,
                             double tol) {
  int64_t rows = 1, n = 1;
  for (int d = 0; d < nd; d++) *(d < nd - nshape ? &rows : &n) *= xs[d];
  pd_tensor *x = rand_t(dt, nd, xs, -2, 3);
  pd_tensor *w = with_w ? rand_t(dt, 1, &n, 0.5, 1.5) : NULL, *b = with_b ? rand_t(dt, 1, &n, -1, 1) : NULL;
  pd_tensor *y = pd_layer_norm(x, nshape, xs + nd - nshape, w, b, 1e-5);
  double *xv = vals(x), *wv = w ? vals(w) : NULL, *bv = b ? vals(b) : NULL;
  double *want = ref_rows(xv, rows, n, wv, bv, 1e-5, true);
  assert_int_equal(pd_tensor_dtype(y), dt);
  expect_array(y, want, tol, tol);
  free(xv);
  free(wv);
  free(bv);
  free(want);
}

static void test_layer_norm_values(void **state) {
  (void)state;
  pd_scope_begin();
  check_layer_norm(PD_FLOAT32, 2, SHAPE(5, 7), 1, true, true, 2e-5);
  check_layer_norm(PD_FLOAT64, 2, SHAPE(5, 7), 1, true, true, 1e-12);
  check_layer_norm(PD_FLOAT32, 3, SHAPE(2, 3, 4), 1, true, false, 2e-5); /* 3-D over the last dim */
  check_layer_norm(PD_FLOAT32, 3, SHAPE(2, 3, 4), 2, false, true, 2e-5); /* 3-D over the last 2 dims */
  check_layer_norm(PD_FLOAT64, 3, SHAPE(2, 3, 4), 2, false, false, 1e-12);
  check_layer_norm(PD_FLOAT32, 2, SHAPE(64, 3000), 1, true, true, 5e-5); /* long rows, several blocks */
  check_layer_norm(PD_FLOAT32, 2, SHAPE(2000, 40), 1, true, true, 2e-5); /* many rows (threads) */
  /* weight shaped as normalized_shape */
  pd_tensor *x = rand_t(PD_FLOAT64, 3, SHAPE(2, 3, 4), -1, 1),
            *w = rand_t(PD_FLOAT64, 2, SHAPE(3, 4), 0.5, 1.5);
  pd_tensor *w1 = pd_reshape(w, 1, SHAPE(12));
  expect_close(pd_layer_norm(x, 2, SHAPE(3, 4), w, NULL, 1e-5),
               pd_layer_norm(x, 2, SHAPE(3, 4), w1, NULL, 1e-5), 1e-15, 1e-15);
  /* a constant row normalizes to 0 (var 0, eps keeps it finite) */
  EXPECT_VALUES(pd_layer_norm(pd_full(2, SHAPE(1, 3), 4.0, PD_FLOAT32), 1, SHAPE(3), NULL, NULL, 1e-5), 0, 0,
                0, 0);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_layer_norm_noncontiguous_and_offset(void **state) {
  (void)state;
  pd_scope_begin();
  /* a transposed view: rows of the [4, 6] view are columns of the [6, 4] base */
  pd_tensor *base = rand_t(PD_FLOAT32, 2, SHAPE(6, 4), -1, 1);
  pd_tensor *xt = pd_transpose(base, 2, SHAPE(1, 0));
  assert_false(pd_tensor_is_contiguous(xt));
  pd_tensor *w = rand_t(PD_FLOAT32, 1, SHAPE(6), 0.5, 1.5);
  double *xv = vals(xt), *wv = vals(w);
  double *want = ref_rows(xv, 4, 6, wv, NULL, 1e-5, true);
  expect_array(pd_layer_norm(xt, 1, SHAPE(6), w, NULL, 1e-5), want, 2e-5, 2e-5);
  free(xv);
  free(wv);
  free(want);
  /* rows with mean 1e4 and unit spread: the variance must not cancel */
  pd_tensor *big = rand_t(PD_FLOAT32, 2, SHAPE(8, 2500), 1e4 - 2, 1e4 + 2);
  xv = vals(big);
  want = ref_rows(xv, 8, 2500, NULL, NULL, 1e-5, true);
  expect_array(pd_layer_norm(big, 1, SHAPE(2500), NULL, NULL, 1e-5), want, 1e-3, 1e-3);
  free(want);
  want = ref_rows(xv, 8, 2500, NULL, NULL, 1e-5, false);
  expect_array(pd_rms_norm(big, 1, SHAPE(2500), NULL, 1e-5), want, 1e-5, 1e-5);
  free(xv);
  free(want);
  /* empty batch */
  pd_tensor *e = pd_layer_norm(pd_zeros(2, SHAPE(0, 4), PD_FLOAT32), 1, SHAPE(4), NULL, NULL, 1e-5);
  expect_shape(e, 2, SHAPE(0, 4));
  /* float16 x with float32 weight: computed in float32, returned as float16 */
  pd_tensor *h = pd_cast(rand_t(PD_FLOAT32, 2, SHAPE(3, 8), -1, 1), PD_FLOAT16);
  pd_tensor *wh = rand_t(PD_FLOAT32, 1, SHAPE(8), 0.5, 1.5);
  pd_tensor *yh = pd_layer_norm(h, 1, SHAPE(8), wh, NULL, 1e-5);
  assert_int_equal(pd_tensor_dtype(yh), PD_FLOAT16);
  expect_close(pd_cast(yh, PD_FLOAT32), pd_layer_norm(pd_cast(h, PD_FLOAT32), 1, SHAPE(8), wh, NULL, 1e-5),
               2e-3, 2e-3);
  pd_scope_end();
  expect_no_live_tensors();
}

/* fused first and second order gradients against the composed formula */
static void check_row_grads(pd_dtype dt, bool centered, double tol) {
  int64_t xs[3] = {3, 2, 6};
  pd_tensor *x = rand_t(dt, 3, xs, -1, 2), *w = rand_t(dt, 1, SHAPE(6), 0.5, 1.5);
  pd_tensor *b = centered ? rand_t(dt, 1, SHAPE(6), -1, 1) : NULL, *R = rand_t(dt, 3, xs, -1, 1);
  pd_tensor *in[3] = {x, w, b};
  int n = centered ? 3 : 2;
  for (int i = 0; i < n; i++) pd_tensor_set_stop_gradient(in[i], false);
  pd_tensor *yf = centered ? pd_layer_norm(x, 1, SHAPE(6), w, b, 1e-5) : pd_rms_norm(x, 1, SHAPE(6), w, 1e-5);
  pd_tensor *yc = composite_row_norm(x, w, b, 1e-5, centered);
  expect_close(yf, yc, tol, tol);
  pd_tensor *gf[3] = {0}, *gc[3] = {0};
  grads_of(yf, R, in, n, gf, true);
  grads_of(yc, R, in, n, gc, true);
  for (int i = 0; i < n; i++) expect_close(gf[i], gc[i], tol, tol);
  /* second order: d/d(x, w) of sum(dx^2) */
  pd_tensor *hf[2] = {0}, *hc[2] = {0};
  pd_tensor *Lf = pd_sum(pd_multiply(gf[0], gf[0]), NULL, 0, false),
            *Lc = pd_sum(pd_multiply(gc[0], gc[0]), NULL, 0, false);
  pd_grad_opts o = {.allow_unused = true};
  assert_int_equal(pd_grad(&Lf, 1, in, 2, NULL, &o, hf), PD_OK);
  assert_int_equal(pd_grad(&Lc, 1, in, 2, NULL, &o, hc), PD_OK);
  for (int i = 0; i < 2; i++) expect_close(hf[i], hc[i], tol * 10, tol * 10);
}

static void test_row_norm_gradients(void **state) {
  (void)state;
  pd_scope_begin();
  check_row_grads(PD_FLOAT64, true, 1e-10);
  check_row_grads(PD_FLOAT64, false, 1e-10);
  check_row_grads(PD_FLOAT32, true, 2e-4);
  check_row_grads(PD_FLOAT32, false, 2e-4);
  /* no weight / bias: x alone */
  pd_tensor *x = rand_t(PD_FLOAT64, 2, SHAPE(4, 5), -1, 1), *R = rand_t(PD_FLOAT64, 2, SHAPE(4, 5), -1, 1);
  pd_tensor_set_stop_gradient(x, false);
  pd_tensor *gf = NULL, *gc = NULL;
  grads_of(pd_layer_norm(x, 1, SHAPE(5), NULL, NULL, 1e-3), R, &x, 1, &gf, false);
  grads_of(composite_row_norm(x, NULL, NULL, 1e-3, true), R, &x, 1, &gc, false);
  expect_close(gf, gc, 1e-10, 1e-10);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_rms_norm_values(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = rand_t(PD_FLOAT32, 3, SHAPE(2, 3, 8), -2, 2), *w = rand_t(PD_FLOAT32, 1, SHAPE(8), 0.5, 1.5);
  double *xv = vals(x), *wv = vals(w);
  double *want = ref_rows(xv, 6, 8, wv, NULL, 1e-6, false);
  expect_array(pd_rms_norm(x, 1, SHAPE(8), w, 1e-6), want, 2e-5, 2e-5);
  free(want);
  want = ref_rows(xv, 2, 24, NULL, NULL, 1e-6, false); /* over the last 2 dims */
  expect_array(pd_rms_norm(x, 2, SHAPE(3, 8), NULL, 1e-6), want, 2e-5, 2e-5);
  free(want);
  free(xv);
  free(wv);
  /* hand-derived: [3, 4] -> rms = sqrt(12.5) */
  double r = 1 / sqrt(12.5 + 1e-5);
  EXPECT_VALUES(pd_rms_norm(T(PD_FLOAT64, 1, SHAPE(2), 3, 4), 1, SHAPE(2), NULL, 1e-5), 1e-12, 3 * r, 4 * r);
  pd_scope_end();
  expect_no_live_tensors();
}

/* ---- batch_norm ---------------------------------------------------------------------------------- */

static void test_batch_norm_running_stats(void **state) {
  (void)state;
  pd_scope_begin();
  const int64_t B = 4, C = 3, S = 5;
  pd_tensor *rm = pd_zeros(1, SHAPE(C), PD_FLOAT32), *rv = pd_ones(1, SHAPE(C), PD_FLOAT32);
  pd_tensor *w = rand_t(PD_FLOAT32, 1, SHAPE(C), 0.5, 1.5), *b = rand_t(PD_FLOAT32, 1, SHAPE(C), -1, 1);
  double *wv = vals(w), *bv = vals(b), hm[3] = {0, 0, 0}, hv[3] = {1, 1, 1};
  for (int step = 0; step < 2; step++) {
    pd_tensor *x = rand_t(PD_FLOAT32, 3, SHAPE(B, C, S), -1 + step, 2 + 2 * step);
    pd_tensor *y = pd_batch_norm(x, rm, rv, w, b, true, 0.9, 1e-5, "NCL", PD_GLOBAL_STATS_NONE);
    double *xv = vals(x), m[3], v[3];
    double *want = ref_batch(xv, B, C, S, wv, bv, 1e-5, m, v);
    expect_array(y, want, 2e-5, 2e-5);
    for (int c = 0; c < C; c++) { /* Paddle: running = 0.9 running + 0.1 batch, biased variance */
      hm[c] = 0.9 * hm[c] + 0.1 * m[c];
      hv[c] = 0.9 * hv[c] + 0.1 * v[c];
    }
    expect_array(rm, hm, 1e-5, 1e-6);
    expect_array(rv, hv, 1e-5, 1e-6);
    free(xv);
    free(want);
  }
  /* eval (training false): the running statistics normalize, and stay put */
  pd_tensor *x = rand_t(PD_FLOAT32, 3, SHAPE(2, C, 4), -1, 1);
  double *xv = vals(x), want[24];
  for (int i = 0; i < 24; i++) {
    int c = (i / 4) % 3;
    want[i] = (xv[i] - hm[c]) / sqrt(hv[c] + 1e-5) * wv[c] + bv[c];
  }
  expect_array(pd_batch_norm(x, rm, rv, w, b, false, 0.9, 1e-5, NULL, PD_GLOBAL_STATS_NONE), want, 2e-5,
               2e-5);
  /* use_global_stats true in training: running statistics, no update */
  expect_array(pd_batch_norm(x, rm, rv, w, b, true, 0.9, 1e-5, NULL, PD_GLOBAL_STATS_TRUE), want, 2e-5, 2e-5);
  expect_array(rm, hm, 1e-5, 1e-6);
  /* use_global_stats false in eval: batch statistics, running ones updated */
  double m[3], v[3], *wb = ref_batch(xv, 2, C, 4, wv, bv, 1e-5, m, v);
  expect_array(pd_batch_norm(x, rm, rv, w, b, false, 0.5, 1e-5, NULL, PD_GLOBAL_STATS_FALSE), wb, 2e-5, 2e-5);
  for (int c = 0; c < C; c++) hm[c] = 0.5 * hm[c] + 0.5 * m[c];
  expect_array(rm, hm, 1e-5, 1e-6);
  free(wb);
  free(xv);
  free(wv);
  free(bv);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_batch_norm_layouts(void **state) {
  (void)state;
  pd_scope_begin();
  /* NCHW, NHWC (the same values transposed) and a [N, C] input, larger than a grain */
  pd_tensor *x = rand_t(PD_FLOAT32, 4, SHAPE(6, 5, 40, 30), -3, 5);
  pd_tensor *w = rand_t(PD_FLOAT32, 1, SHAPE(5), 0.5, 1.5), *b = rand_t(PD_FLOAT32, 1, SHAPE(5), -1, 1);
  pd_tensor *rm = pd_zeros(1, SHAPE(5), PD_FLOAT32), *rv = pd_ones(1, SHAPE(5), PD_FLOAT32);
  double *xv = vals(x), *wv = vals(w), *bv = vals(b), m[5], v[5];
  double *want = ref_batch(xv, 6, 5, 1200, wv, bv, 1e-5, m, v);
  pd_tensor *y = pd_batch_norm(x, rm, rv, w, b, true, 0.9, 1e-5, "NCHW", PD_GLOBAL_STATS_NONE);
  expect_array(y, want, 5e-5, 5e-5);
  pd_tensor *xh = pd_contiguous(pd_transpose(x, 4, SHAPE(0, 2, 3, 1)));
  pd_tensor *yh = pd_batch_norm(xh, rm, rv, w, b, true, 0.9, 1e-5, "NHWC", PD_GLOBAL_STATS_NONE);
  expect_close(yh, pd_transpose(y, 4, SHAPE(0, 2, 3, 1)), 5e-5, 5e-5);
  /* a non-contiguous NHWC view of the NCHW data */
  pd_tensor *yv = pd_batch_norm(pd_transpose(x, 4, SHAPE(0, 2, 3, 1)), rm, rv, w, b, true, 0.9, 1e-5, "NHWC",
                                PD_GLOBAL_STATS_NONE);
  expect_close(yv, yh, 1e-6, 1e-6);
  free(want);
  free(xv);
  /* [N, C]: statistics over N */
  pd_tensor *x2 = rand_t(PD_FLOAT64, 2, SHAPE(7, 5), -1, 1);
  xv = vals(x2);
  want = ref_batch(xv, 7, 5, 1, NULL, NULL, 1e-5, m, v);
  pd_tensor *rm2 = pd_zeros(1, SHAPE(5), PD_FLOAT64), *rv2 = pd_ones(1, SHAPE(5), PD_FLOAT64);
  expect_array(pd_batch_norm(x2, rm2, rv2, NULL, NULL, true, 0.9, 1e-5, "NC", PD_GLOBAL_STATS_NONE), want,
               1e-12, 1e-12);
  for (int c = 0; c < 5; c++) m[c] *= 0.1;
  expect_array(rm2, m, 1e-12, 1e-14);
  free(want);
  free(xv);
  free(wv);
  free(bv);
  pd_scope_end();
  expect_no_live_tensors();
}

/* batch_norm's fused gradients against the formula composed from primitive ops */
static void test_batch_norm_gradients(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = rand_t(PD_FLOAT64, 3, SHAPE(4, 3, 5), -1, 2), *w = rand_t(PD_FLOAT64, 1, SHAPE(3), 0.5, 1.5);
  pd_tensor *b = rand_t(PD_FLOAT64, 1, SHAPE(3), -1, 1), *R = rand_t(PD_FLOAT64, 3, SHAPE(4, 3, 5), -1, 1);
  pd_tensor *rm = pd_zeros(1, SHAPE(3), PD_FLOAT64), *rv = pd_ones(1, SHAPE(3), PD_FLOAT64);
  pd_tensor *in[3] = {x, w, b};
  for (int i = 0; i < 3; i++) pd_tensor_set_stop_gradient(in[i], false);
  pd_tensor *yf = pd_batch_norm(x, rm, rv, w, b, true, 0.9, 1e-5, NULL, PD_GLOBAL_STATS_NONE);
  const int64_t ax[2] = {0, 2};
  pd_tensor *xc = pd_subtract(x, pd_scale(pd_sum(x, ax, 2, true), 1.0 / 20, 0, true));
  pd_tensor *var = pd_scale(pd_sum(pd_multiply(xc, xc), ax, 2, true), 1.0 / 20, 0, true);
  pd_tensor *yc = pd_add(
      pd_multiply(pd_multiply(xc, pd_rsqrt(pd_scale(var, 1, 1e-5, true))), pd_reshape(w, 3, SHAPE(1, 3, 1))),
      pd_reshape(b, 3, SHAPE(1, 3, 1)));
  expect_close(yf, yc, 1e-12, 1e-12);
  pd_tensor *gf[3] = {0}, *gc[3] = {0};
  grads_of(yf, R, in, 3, gf, false);
  grads_of(yc, R, in, 3, gc, false);
  for (int i = 0; i < 3; i++) expect_close(gf[i], gc[i], 1e-10, 1e-10);
  /* eval: y is affine in x, dx = dy w / sqrt(running_var + eps) */
  pd_tensor *ye = pd_batch_norm(x, rm, rv, w, b, false, 0.9, 1e-5, NULL, PD_GLOBAL_STATS_NONE);
  pd_tensor *gx = NULL;
  grads_of(ye, R, &x, 1, &gx, false);
  pd_tensor *scale = pd_reshape(pd_multiply(w, pd_rsqrt(pd_scale(rv, 1, 1e-5, true))), 3, SHAPE(1, 3, 1));
  expect_close(gx, pd_multiply(R, scale), 1e-12, 1e-12);
  pd_scope_end();
  expect_no_live_tensors();
}

/* ---- group / instance norm --------------------------------------------------------------------------- */

static void test_group_instance_norm_values(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = rand_t(PD_FLOAT32, 4, SHAPE(2, 6, 3, 2), -1, 3);
  pd_tensor *w = rand_t(PD_FLOAT32, 1, SHAPE(6), 0.5, 1.5), *b = rand_t(PD_FLOAT32, 1, SHAPE(6), -1, 1);
  double *xv = vals(x), *wv = vals(w), *bv = vals(b);
  double *want = ref_group(xv, 2, 6, 6, 3, wv, bv, 1e-5);
  pd_tensor *y = pd_group_norm(x, 3, 1e-5, w, b, NULL);
  expect_array(y, want, 2e-5, 2e-5);
  /* NHWC: the same values, channels last */
  pd_tensor *xh = pd_transpose(x, 4, SHAPE(0, 2, 3, 1));
  pd_tensor *yh = pd_group_norm(xh, 3, 1e-5, w, b, "NHWC");
  assert_true(pd_tensor_is_contiguous(yh));
  expect_close(yh, pd_transpose(y, 4, SHAPE(0, 2, 3, 1)), 1e-6, 1e-6);
  free(want);
  /* instance norm = one group per channel */
  want = ref_group(xv, 2, 6, 6, 6, wv, bv, 1e-5);
  expect_array(pd_instance_norm(x, NULL, NULL, w, b, true, 0.9, 1e-5, NULL), want, 2e-5, 2e-5);
  free(want);
  want = ref_group(xv, 2, 6, 6, 6, NULL, NULL, 1e-5);
  expect_array(pd_group_norm(x, 6, 1e-5, NULL, NULL, NULL), want, 2e-5, 2e-5);
  free(want);
  /* instance norm with given statistics (use_input_stats false) */
  pd_tensor *rm = rand_t(PD_FLOAT32, 1, SHAPE(6), -1, 1), *rv = rand_t(PD_FLOAT32, 1, SHAPE(6), 0.5, 2);
  double *mv = vals(rm), *vv = vals(rv), want2[72];
  for (int i = 0; i < 72; i++) {
    int c = (i / 6) % 6;
    want2[i] = (xv[i] - mv[c]) / sqrt(vv[c] + 1e-5) * wv[c] + bv[c];
  }
  expect_array(pd_instance_norm(x, rm, rv, w, b, false, 0.9, 1e-5, NULL), want2, 2e-5, 2e-5);
  free(mv);
  free(vv);
  free(xv);
  free(wv);
  free(bv);
  /* hand-derived: Paddle's GroupNorm example, arange(48) as [2, 6, 2, 2], 6 groups */
  pd_tensor *a = pd_reshape(pd_arange(0, 48, 1, PD_FLOAT32), 4, SHAPE(2, 6, 2, 2));
  pd_tensor *ya = pd_group_norm(a, 6, 1e-5, NULL, NULL, NULL);
  double paddle_out[48]; /* the documented output: each channel's 0..3 offsets */
  for (int i = 0; i < 48; i++)
    paddle_out[i] = (double[]){-1.34163547, -0.44721183, 0.44721183, 1.34163547}[i % 4];
  expect_array(ya, paddle_out, 1e-6, 1e-6);
  /* gradients against the composed formula (group norm over a [2, 3, 2, 3] view) */
  pd_tensor *xg = rand_t(PD_FLOAT64, 3, SHAPE(2, 6, 3), -1, 1),
            *wg = rand_t(PD_FLOAT64, 1, SHAPE(6), 0.5, 1.5);
  pd_tensor *R = rand_t(PD_FLOAT64, 3, SHAPE(2, 6, 3), -1, 1);
  pd_tensor *in[2] = {xg, wg};
  for (int i = 0; i < 2; i++) pd_tensor_set_stop_gradient(in[i], false);
  pd_tensor *yf = pd_group_norm(xg, 3, 1e-5, wg, NULL, "NCL");
  pd_tensor *x4 = pd_reshape(xg, 2, SHAPE(6, 6));
  pd_tensor *yc = pd_multiply(pd_reshape(composite_row_norm(x4, NULL, NULL, 1e-5, true), 3, SHAPE(2, 6, 3)),
                              pd_reshape(wg, 3, SHAPE(1, 6, 1)));
  expect_close(yf, yc, 1e-12, 1e-12);
  pd_tensor *gf[2] = {0}, *gc[2] = {0};
  grads_of(yf, R, in, 2, gf, false);
  grads_of(yc, R, in, 2, gc, false);
  for (int i = 0; i < 2; i++) expect_close(gf[i], gc[i], 1e-10, 1e-10);
  pd_scope_end();
  expect_no_live_tensors();
}

/* ---- layers -------------------------------------------------------------------------------------- */

static void expect_param(pd_layer *l, const char *name, int nd, const int64_t *shape, double value,
                         bool stop) {
  pd_tensor *p = pd_layer_parameter(l, name);
  if (!p) fail_msg("parameter %s missing", name);
  expect_shape(p, nd, shape);
  for (int64_t i = 0; i < pd_tensor_numel(p); i++) assert_true(pd_tensor_item_at(p, i) == value);
  assert_true(pd_tensor_stop_gradient(p) == stop);
}

static void expect_repr(pd_layer *l, const char *want) {
  char *s = pd_layer_to_string(l);
  if (!s || strcmp(s, want) != 0) fail_msg("repr '%s', want '%s'", s ? s : "(null)", want);
  free(s);
}

static void test_norm_layers(void **state) {
  (void)state;
  pd_layer *ln = pd_nn_layer_norm(2, SHAPE(3, 4), NULL);
  expect_param(ln, "weight", 1, SHAPE(12), 1.0, false);
  expect_param(ln, "bias", 1, SHAPE(12), 0.0, false);
  expect_repr(ln, "LayerNorm(normalized_shape=[3, 4], epsilon=1e-05)");
  pd_layer *ln2 = pd_nn_layer_norm(
      1, SHAPE(4), &(pd_nn_layer_norm_opts){.no_weight = true, .no_bias = true, .epsilon = 1e-3});
  assert_null(pd_layer_parameter(ln2, "weight"));
  assert_null(pd_layer_parameter(ln2, "bias"));
  pd_layer *rms = pd_nn_rms_norm(1, SHAPE(4), NULL);
  expect_param(rms, "weight", 1, SHAPE(4), 1.0, false);
  assert_null(pd_layer_parameter(rms, "bias"));
  expect_repr(rms, "RMSNorm(normalized_shape=[4], epsilon=1e-05)");

  pd_layer *bn = pd_nn_batch_norm2d(3, NULL);
  pd_named_tensors ps;
  assert_int_equal(pd_layer_named_parameters(bn, &ps), PD_OK);
  assert_int_equal(ps.n, 4);
  const char *names[4] = {"weight", "bias", "_mean", "_variance"};
  for (int i = 0; i < 4; i++) assert_string_equal(ps.names[i], names[i]);
  pd_named_tensors_free(&ps);
  expect_param(bn, "_mean", 1, SHAPE(3), 0.0, true);
  expect_param(bn, "_variance", 1, SHAPE(3), 1.0, true);
  assert_false(pd_tensor_param_info(pd_layer_parameter(bn, "_mean"))->trainable);
  pd_named_tensors sd;
  assert_int_equal(pd_layer_state_dict(bn, &sd), PD_OK);
  assert_int_equal(sd.n, 4);
  assert_string_equal(sd.names[3], "_variance");
  pd_named_tensors_free(&sd);
  expect_repr(bn, "BatchNorm2D(num_features=3, momentum=0.9, epsilon=1e-05)");
  pd_layer *bn1 = pd_nn_batch_norm1d(3, &(pd_nn_batch_norm_opts){.no_weight = true, .momentum = 0.5});
  assert_null(pd_layer_parameter(bn1, "weight"));
  expect_repr(bn1, "BatchNorm1D(num_features=3, momentum=0.5, epsilon=1e-05, data_format=NCL)");

  pd_layer *gn = pd_nn_group_norm(2, 4, &(pd_nn_group_norm_opts){.no_bias = true});
  expect_param(gn, "weight", 1, SHAPE(4), 1.0, false);
  expect_param(gn, "bias", 1, SHAPE(4), 0.0, true); /* bias_attr False: fixed zeros, as Paddle */
  expect_repr(gn, "GroupNorm(num_groups=2, num_channels=4, epsilon=1e-05)");
  pd_layer *in2 = pd_nn_instance_norm2d(3, NULL);
  expect_param(in2, "scale", 1, SHAPE(3), 1.0, false);
  expect_param(in2, "bias", 1, SHAPE(3), 0.0, false);
  expect_repr(in2, "InstanceNorm2D(num_features=3, epsilon=1e-05)");
  pd_layer *in1 = pd_nn_instance_norm1d(3, &(pd_nn_instance_norm_opts){.no_affine = true});
  assert_null(pd_layer_parameter(in1, "scale"));

  pd_scope_begin();
  /* forwards agree with the functional ops */
  pd_tensor *x = rand_t(PD_FLOAT32, 4, SHAPE(2, 3, 4, 4), -1, 2);
  expect_close(pd_layer_call1(ln, pd_reshape(x, 3, SHAPE(8, 3, 4))),
               pd_layer_norm(pd_reshape(x, 3, SHAPE(8, 3, 4)), 2, SHAPE(3, 4), NULL, NULL, 1e-5), 1e-6, 1e-6);
  expect_close(pd_layer_call1(in2, x), pd_instance_norm(x, NULL, NULL, NULL, NULL, true, 0.9, 1e-5, NULL),
               1e-6, 1e-6);
  /* BatchNorm2D: two training steps move _mean, then eval uses it */
  pd_tensor *rm = pd_zeros(1, SHAPE(3), PD_FLOAT32), *rv = pd_ones(1, SHAPE(3), PD_FLOAT32);
  for (int step = 0; step < 2; step++) {
    pd_tensor *xs = pd_scale(x, 1.0 + step, step, true);
    expect_close(pd_layer_call1(bn, xs), pd_batch_norm(xs, rm, rv, NULL, NULL, true, 0.9, 1e-5, NULL, 0),
                 1e-6, 1e-6);
  }
  expect_close(pd_layer_parameter(bn, "_mean"), rm, 1e-6, 1e-7);
  expect_close(pd_layer_parameter(bn, "_variance"), rv, 1e-6, 1e-7);
  pd_layer_eval(bn);
  expect_close(pd_layer_call1(bn, x), pd_batch_norm(x, rm, rv, NULL, NULL, false, 0.9, 1e-5, NULL, 0), 1e-6,
               1e-6);
  expect_close(pd_layer_parameter(bn, "_mean"), rm, 1e-6, 1e-7); /* eval does not update */
  /* a training step gives the weight a gradient and the statistics none */
  pd_layer_train(bn);
  pd_tensor *loss = pd_sum(pd_multiply(pd_layer_call1(bn, x), x), NULL, 0, false);
  assert_int_equal(pd_backward(loss, NULL, false), PD_OK);
  assert_non_null(pd_tensor_grad(pd_layer_parameter(bn, "weight")));
  assert_null(pd_tensor_grad(pd_layer_parameter(bn, "_mean")));
  /* two forwards before one backward (a GAN's real and fake batches) */
  pd_tensor *l2 = pd_add(pd_sum(pd_layer_call1(bn, x), NULL, 0, false),
                         pd_sum(pd_multiply(pd_layer_call1(bn, pd_scale(x, 2, 0, true)), x), NULL, 0, false));
  assert_int_equal(pd_backward(l2, NULL, false), PD_OK);
  pd_layer_clear_gradients(bn, false);
  /* 3-D layers on 5-D input, channels first and last */
  pd_layer *bn3 = pd_nn_batch_norm3d(3, NULL),
           *bn3l = pd_nn_batch_norm3d(3, &(pd_nn_batch_norm_opts){.data_format = "NDHWC"});
  pd_layer *in3 = pd_nn_instance_norm3d(3, NULL);
  pd_tensor *x5 = pd_reshape(x, 5, SHAPE(2, 3, 2, 2, 4)), *x5l = pd_transpose(x5, 5, SHAPE(0, 2, 3, 4, 1));
  pd_tensor *y5 = pd_layer_call1(bn3, x5);
  pd_tensor *rm5 = pd_zeros(1, SHAPE(3), PD_FLOAT32), *rv5 = pd_ones(1, SHAPE(3), PD_FLOAT32);
  expect_close(y5, pd_batch_norm(x5, rm5, rv5, NULL, NULL, true, 0.9, 1e-5, "NCDHW", 0), 1e-6, 1e-6);
  expect_close(pd_layer_call1(bn3l, x5l), pd_transpose(y5, 5, SHAPE(0, 2, 3, 4, 1)), 1e-5, 1e-5);
  expect_close(pd_layer_parameter(bn3l, "_variance"), pd_layer_parameter(bn3, "_variance"), 1e-6, 1e-7);
  expect_close(pd_layer_call1(in3, x5),
               pd_instance_norm(x5, NULL, NULL, NULL, NULL, true, 0.9, 1e-5, "NCDHW"), 1e-6, 1e-6);
  expect_error(pd_layer_call1(in3, x), "InstanceNorm3D", "5-D");
  pd_layer_release(bn3);
  pd_layer_release(bn3l);
  pd_layer_release(in3);
  /* input rank checks */
  expect_error(pd_layer_call1(bn, pd_reshape(x, 3, SHAPE(2, 3, 16))), "BatchNorm2D", "4-D");
  expect_error(pd_layer_call1(in1, x), "InstanceNorm1D", "[2, 3, 4, 4]");
  pd_scope_end();
  pd_layer *layers[] = {ln, ln2, rms, bn, bn1, gn, in2, in1};
  for (size_t i = 0; i < sizeof layers / sizeof *layers; i++) pd_layer_release(layers[i]);
  /* constructor errors */
  expect_error((pd_tensor *)pd_nn_group_norm(4, 6, NULL), "GroupNorm", "num_groups 4");
  expect_error((pd_tensor *)pd_nn_batch_norm2d(3, &(pd_nn_batch_norm_opts){.data_format = "NCL"}),
               "BatchNorm2D", "'NCL'");
  expect_error((pd_tensor *)pd_nn_layer_norm(0, SHAPE(1), NULL), "LayerNorm", "normalized_shape");
  expect_no_live_tensors();
}

/* momentum: all-zero options keep Paddle's 0.9; has_momentum takes 0 as written, so the
 * running statistics become the batch's (running = 0 * running + 1 * batch). */
static void test_norm_layer_momentum(void **state) {
  (void)state;
  const int64_t B = 4, C = 3, S = 5;
  pd_layer *bn_default = pd_nn_batch_norm1d(C, &(pd_nn_batch_norm_opts){.dtype = PD_FLOAT64});
  pd_layer *bn_zero = pd_nn_batch_norm1d(
      C, &(pd_nn_batch_norm_opts){.has_momentum = true, .momentum = 0, .dtype = PD_FLOAT64});
  pd_layer *bn_half = pd_nn_batch_norm1d(C, &(pd_nn_batch_norm_opts){.has_momentum = true, .momentum = 0.5});
  expect_repr(bn_default, "BatchNorm1D(num_features=3, momentum=0.9, epsilon=1e-05, data_format=NCL)");
  expect_repr(bn_zero, "BatchNorm1D(num_features=3, momentum=0, epsilon=1e-05, data_format=NCL)");
  expect_repr(bn_half, "BatchNorm1D(num_features=3, momentum=0.5, epsilon=1e-05, data_format=NCL)");
  pd_layer *null_opts = pd_nn_batch_norm2d(C, NULL);
  expect_repr(null_opts, "BatchNorm2D(num_features=3, momentum=0.9, epsilon=1e-05)");
  pd_layer_release(null_opts);
  pd_scope_begin();
  double hm[3] = {0, 0, 0}, hv[3] = {1, 1, 1}, m[3], v[3];
  pd_tensor *x = NULL;
  for (int step = 0; step < 2; step++) {
    x = rand_t(PD_FLOAT64, 3, SHAPE(B, C, S), -1 - step, 2 + 3 * step);
    double *xv = vals(x), *want = ref_batch(xv, B, C, S, NULL, NULL, 1e-5, m, v);
    expect_array(pd_layer_call1(bn_zero, x), want, 1e-12, 1e-12);
    expect_array(pd_layer_call1(bn_default, x), want, 1e-12, 1e-12);
    /* momentum 0: exactly this batch's mean and biased variance */
    expect_array(pd_layer_parameter(bn_zero, "_mean"), m, 1e-12, 1e-14);
    expect_array(pd_layer_parameter(bn_zero, "_variance"), v, 1e-12, 1e-14);
    /* the default 0.9: running = 0.9 running + 0.1 batch */
    for (int c = 0; c < C; c++) {
      hm[c] = 0.9 * hm[c] + 0.1 * m[c];
      hv[c] = 0.9 * hv[c] + 0.1 * v[c];
    }
    expect_array(pd_layer_parameter(bn_default, "_mean"), hm, 1e-12, 1e-14);
    expect_array(pd_layer_parameter(bn_default, "_variance"), hv, 1e-12, 1e-14);
    free(xv);
    free(want);
  }
  /* in eval the momentum-0 layer normalizes with the last batch's statistics: the training output */
  pd_layer_eval(bn_zero);
  double *xv = vals(x), *want = ref_batch(xv, B, C, S, NULL, NULL, 1e-5, m, v);
  expect_array(pd_layer_call1(bn_zero, x), want, 1e-12, 1e-12);
  free(xv);
  free(want);
  /* 0.5 as written, with or without has_momentum */
  pd_tensor *x32 = pd_cast(x, PD_FLOAT32);
  pd_layer_call1(bn_half, x32);
  for (int c = 0; c < C; c++) hm[c] = 0.5 * m[c];
  expect_array(pd_layer_parameter(bn_half, "_mean"), hm, 1e-5, 1e-6);
  /* InstanceNorm accepts momentum 0 too (no running statistics, as in Paddle's eager mode) */
  pd_layer *in0 = pd_nn_instance_norm1d(C, &(pd_nn_instance_norm_opts){.has_momentum = true});
  assert_non_null(in0);
  expect_close(pd_layer_call1(in0, x32),
               pd_instance_norm(x32, NULL, NULL, NULL, NULL, true, 0.0, 1e-5, "NCL"), 1e-6, 1e-6);
  pd_layer_release(in0);
  pd_scope_end();
  pd_layer_release(bn_default);
  pd_layer_release(bn_zero);
  pd_layer_release(bn_half);
  expect_no_live_tensors();
}

/* ---- bad inputs ---------------------------------------------------------------------------------- */

static void test_norm_bad_inputs(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = rand_t(PD_FLOAT32, 3, SHAPE(2, 4, 5), -1, 1);
  expect_error(pd_layer_norm(x, 1, SHAPE(4), NULL, NULL, 1e-5), "layer_norm", "normalized_shape [4]");
  expect_error(pd_layer_norm(x, 2, SHAPE(5, 4), NULL, NULL, 1e-5), "layer_norm", "[2, 4, 5]");
  expect_error(pd_layer_norm(x, 4, SHAPE(1, 2, 4, 5), NULL, NULL, 1e-5), "layer_norm", "4 dims");
  expect_error(pd_layer_norm(x, 1, SHAPE(5), pd_ones(1, SHAPE(4), PD_FLOAT32), NULL, 1e-5), "layer_norm",
               "weight of shape [4]");
  expect_error(pd_layer_norm(x, 1, SHAPE(5), NULL, pd_ones(1, SHAPE(5), PD_FLOAT64), 1e-5), "layer_norm",
               "bias has dtype float64");
  expect_error(pd_layer_norm(pd_ones(2, SHAPE(2, 5), PD_INT64), 1, SHAPE(5), NULL, NULL, 1e-5), "layer_norm",
               "int64");
  expect_error(pd_rms_norm(x, 1, SHAPE(3), NULL, 1e-5), "rms_norm", "normalized_shape [3]");
  expect_error(pd_layer_norm(NULL, 1, SHAPE(5), NULL, NULL, 1e-5), "layer_norm", "x is NULL");

  pd_tensor *rm3 = pd_zeros(1, SHAPE(3), PD_FLOAT32), *rv4 = pd_ones(1, SHAPE(4), PD_FLOAT32);
  pd_tensor *r = pd_batch_norm(x, rm3, rv4, NULL, NULL, true, 0.9, 1e-5, NULL, 0);
  assert_null(r);
  assert_non_null(strstr(pd_last_error(), "running_mean of shape [3]"));
  expect_error(r, "batch_norm", "4 channels of x (shape [2, 4, 5]");
  expect_error(pd_batch_norm(x, rv4, rv4, pd_ones(1, SHAPE(5), PD_FLOAT32), NULL, true, 0.9, 1e-5, NULL, 0),
               "batch_norm", "weight of shape [5]");
  expect_error(pd_batch_norm(x, rv4, rv4, NULL, NULL, true, 0.9, 1e-5, "NXYZ", 0), "batch_norm", "'NXYZ'");
  expect_error(pd_batch_norm(x, rv4, rv4, NULL, NULL, true, 0.9, 1e-5, "NLC", 0), "batch_norm", "5 channels");
  expect_error(
      pd_batch_norm(pd_ones(1, SHAPE(4), PD_FLOAT32), rv4, rv4, NULL, NULL, true, 0.9, 1e-5, NULL, 0),
      "batch_norm", "at least 2 dims");
  expect_error(pd_batch_norm(x, NULL, rv4, NULL, NULL, true, 0.9, 1e-5, NULL, 0), "batch_norm",
               "running_mean");

  pd_tensor *x6 = rand_t(PD_FLOAT32, 3, SHAPE(2, 6, 3), -1, 1);
  expect_error(pd_group_norm(x6, 4, 1e-5, NULL, NULL, NULL), "group_norm",
               "num_groups 4 does not divide the 6 channels");
  expect_error(pd_group_norm(x6, 0, 1e-5, NULL, NULL, NULL), "group_norm", "num_groups 0");
  expect_error(pd_group_norm(x6, 4, 1e-5, NULL, NULL, "NLC"), "group_norm", "the 3 channels");
  expect_error(pd_group_norm(x6, 3, 1e-5, pd_ones(1, SHAPE(3), PD_FLOAT32), NULL, NULL), "group_norm",
               "weight of shape [3] does not match the 6 channels");
  expect_error(
      pd_instance_norm(x6, NULL, NULL, NULL, pd_ones(1, SHAPE(2), PD_FLOAT32), true, 0.9, 1e-5, NULL),
      "instance_norm", "bias of shape [2]");
  expect_error(pd_instance_norm(x6, NULL, NULL, NULL, NULL, false, 0.9, 1e-5, NULL), "instance_norm",
               "running_mean");
  pd_scope_end();
  expect_no_live_tensors();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_layer_norm_values),
      cmocka_unit_test(test_layer_norm_noncontiguous_and_offset),
      cmocka_unit_test(test_row_norm_gradients),
      cmocka_unit_test(test_rms_norm_values),
      cmocka_unit_test(test_batch_norm_running_stats),
      cmocka_unit_test(test_batch_norm_layouts),
      cmocka_unit_test(test_batch_norm_gradients),
      cmocka_unit_test(test_group_instance_norm_values),
      cmocka_unit_test(test_norm_layers),
      cmocka_unit_test(test_norm_layer_momentum),
      cmocka_unit_test(test_norm_bad_inputs),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
