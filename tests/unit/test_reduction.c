/* Reductions, scans and sorting: values against hand-derived numbers or
 * naive loops written here, shapes (keepdim, negative axes), strided
 * inputs, integer/bool dtypes, gradients (ties, zeros, scatter) and bad
 * inputs. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

#define A(...) ((const int64_t[]){__VA_ARGS__})
#define NA(...) (int)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t))
/* axis list helper: AX(0, -1) expands to pointer, count */
#define AX(...) A(__VA_ARGS__), NA(__VA_ARGS__)

/* x = [[1, 2, 3], [4, 5, 6]] */
static pd_tensor *x23(pd_dtype dt) { return T(dt, 2, SHAPE(2, 3), 1, 2, 3, 4, 5, 6); }

/* 0, 1, ..., n-1 reshaped */
static pd_tensor *iota(pd_dtype dt, int nd, const int64_t *shape) {
  int64_t n = 1;
  for (int d = 0; d < nd; d++) n *= shape[d];
  double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
  for (int64_t i = 0; i < n; i++) v[i] = (double)i;
  pd_tensor *t = pd_tensor_from_f64(v, dt, nd, shape);
  free(v);
  return t;
}

static void test_sum_mean_basic(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = x23(PD_FLOAT32);
  pd_tensor *s = pd_sum(x, NULL, 0, false);
  expect_shape(s, 0, NULL);
  EXPECT_VALUES(s, 0, 21);
  EXPECT_VALUES(pd_sum(x, AX(0), false), 0, 5, 7, 9);
  EXPECT_VALUES(pd_sum(x, AX(-1), false), 0, 6, 15);
  pd_tensor *k = pd_sum(x, AX(1), true);
  expect_shape(k, 2, SHAPE(2, 1));
  EXPECT_VALUES(k, 0, 6, 15);
  expect_shape(pd_sum(x, NULL, 0, true), 2, SHAPE(1, 1));
  EXPECT_VALUES(pd_mean(x, NULL, 0, false), 1e-7, 3.5);
  EXPECT_VALUES(pd_mean(x, AX(0), false), 1e-7, 2.5, 3.5, 4.5);
  pd_tensor *m = pd_mean(x, AX(-1, -2), true);
  expect_shape(m, 2, SHAPE(1, 1));
  EXPECT_VALUES(m, 1e-7, 3.5);
  assert_int_equal(pd_tensor_dtype(m), PD_FLOAT32);
  /* [2, 3, 4] of 0..23 over axes (0, 2): sum over i, k of 12 i + 4 j + k */
  pd_tensor *y = iota(PD_FLOAT64, 3, SHAPE(2, 3, 4));
  EXPECT_VALUES(pd_sum(y, AX(0, 2), false), 0, 60, 92, 124);
  EXPECT_VALUES(pd_sum(y, AX(2, 0), false), 0, 60, 92, 124);
  EXPECT_VALUES(pd_mean(y, AX(-3, -1), false), 1e-12, 7.5, 11.5, 15.5);
  expect_shape(pd_sum(y, AX(1), true), 3, SHAPE(2, 1, 4));
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_max_min_prod(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = T(PD_FLOAT64, 2, SHAPE(2, 3), 3, -1, 2, -5, 4, 0.5);
  EXPECT_VALUES(pd_max(x, NULL, 0, false), 0, 4);
  EXPECT_VALUES(pd_min(x, NULL, 0, false), 0, -5);
  EXPECT_VALUES(pd_max(x, AX(1), false), 0, 3, 4);
  EXPECT_VALUES(pd_min(x, AX(0), false), 0, -5, -1, 0.5);
  expect_shape(pd_max(x, AX(-1), true), 2, SHAPE(2, 1));
  EXPECT_VALUES(pd_prod(x, AX(1), false), 1e-12, -6, -10);
  EXPECT_VALUES(pd_prod(x, NULL, 0, false), 1e-12, 60);
  /* NaN propagates through max/min */
  pd_tensor *n = T(PD_FLOAT32, 2, SHAPE(2, 3), 1, NAN, 3, 4, 5, 6);
  pd_tensor *mx = pd_max(n, AX(1), false);
  assert_true(isnan(pd_tensor_item_at(mx, 0)));
  assert_true(pd_tensor_item_at(mx, 1) == 6);
  assert_true(isnan(pd_tensor_item_at(pd_min(n, NULL, 0, false), 0)));
  assert_true(isnan(pd_tensor_item_at(pd_max(n, AX(0), false), 1)));
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_int_dtypes(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *xi = x23(PD_INT32);
  pd_tensor *s = pd_sum(xi, AX(0), false);
  assert_int_equal(pd_tensor_dtype(s), PD_INT64);
  EXPECT_VALUES(s, 0, 5, 7, 9);
  pd_tensor *p = pd_prod(xi, AX(1), false);
  assert_int_equal(pd_tensor_dtype(p), PD_INT32);
  EXPECT_VALUES(p, 0, 6, 120);
  pd_tensor *x64 = T(PD_INT64, 1, SHAPE(3), 4000000000.0, -7, 4000000001.0);
  pd_tensor *mx = pd_max(x64, NULL, 0, false);
  assert_int_equal(pd_tensor_dtype(mx), PD_INT64);
  assert_true(((const int64_t *)pd_tensor_data(mx))[0] == 4000000001LL);
  EXPECT_VALUES(pd_min(x64, NULL, 0, false), 0, -7);
  pd_tensor *x8 = T(PD_INT8, 1, SHAPE(4), -100, 100, 27, -3);
  pd_tensor *m8 = pd_min(x8, NULL, 0, false);
  assert_int_equal(pd_tensor_dtype(m8), PD_INT8);
  EXPECT_VALUES(m8, 0, -100);
  EXPECT_VALUES(pd_max(x8, NULL, 0, false), 0, 100);
  EXPECT_VALUES(pd_sum(x8, NULL, 0, false), 0, 24);
  /* int mean keeps the dtype and truncates, as Paddle's kernel */
  pd_tensor *mi = pd_mean(T(PD_INT32, 1, SHAPE(2), 1, 2), NULL, 0, false);
  assert_int_equal(pd_tensor_dtype(mi), PD_INT32);
  EXPECT_VALUES(mi, 0, 1);
  /* bool sums count */
  pd_tensor *b = T(PD_BOOL, 1, SHAPE(4), 1, 0, 1, 1);
  EXPECT_VALUES(pd_sum(b, NULL, 0, false), 0, 3);
  /* int64 sums are exact beyond 2^53 */
  pd_tensor *big = T(PD_INT64, 1, SHAPE(2), 9007199254740993.0, 0);
  ((int64_t *)pd_tensor_data(big))[0] = 9007199254740993LL;
  ((int64_t *)pd_tensor_data(big))[1] = 2;
  assert_true(((const int64_t *)pd_tensor_data(pd_sum(big, NULL, 0, false)))[0] == 9007199254740995LL);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_all_any(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *b = T(PD_BOOL, 2, SHAPE(2, 3), 1, 0, 1, 1, 1, 1);
  pd_tensor *al = pd_all(b, AX(1), false);
  assert_int_equal(pd_tensor_dtype(al), PD_BOOL);
  EXPECT_VALUES(al, 0, 0, 1);
  EXPECT_VALUES(pd_any(b, AX(0), false), 0, 1, 1, 1);
  EXPECT_VALUES(pd_all(b, NULL, 0, false), 0, 0);
  pd_tensor *f = T(PD_FLOAT32, 2, SHAPE(2, 2), 0, 0, 0.5, NAN);
  EXPECT_VALUES(pd_any(f, AX(1), true), 0, 0, 1);
  EXPECT_VALUES(pd_all(f, AX(1), false), 0, 0, 1); /* NaN is true */
  pd_tensor *i = T(PD_INT64, 1, SHAPE(3), 0, -2, 0);
  assert_int_equal(pd_tensor_dtype(pd_any(i, NULL, 0, false)), PD_BOOL);
  EXPECT_VALUES(pd_any(i, NULL, 0, false), 0, 1);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_empty(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *e = pd_zeros(2, SHAPE(0, 3), PD_FLOAT32);
  EXPECT_VALUES(pd_sum(e, AX(0), false), 0, 0, 0, 0);
  EXPECT_VALUES(pd_prod(e, AX(0), false), 0, 1, 1, 1);
  pd_tensor *m = pd_mean(e, AX(0), false);
  assert_true(isnan(pd_tensor_item_at(m, 2)));
  EXPECT_VALUES(pd_all(e, AX(0), false), 0, 1, 1, 1);
  EXPECT_VALUES(pd_any(e, AX(0), false), 0, 0, 0, 0);
  expect_shape(pd_sum(e, AX(1), false), 1, SHAPE(0));
  expect_shape(pd_max(e, AX(1), false), 1, SHAPE(0));
  expect_error(pd_max(e, AX(0), false), "max", "[0, 3]");
  expect_error(pd_min(e, NULL, 0, false), "min", "empty");
  pd_scope_end();
  expect_no_live_tensors();
}

/* a transposed (non-contiguous) view: values of the logical layout */
static void test_transposed(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *t = pd_transpose(x23(PD_FLOAT32), 2, A(1, 0)); /* [[1,4],[2,5],[3,6]] */
  assert_false(pd_tensor_is_contiguous(t));
  EXPECT_VALUES(pd_sum(t, AX(0), false), 0, 6, 15);
  EXPECT_VALUES(pd_sum(t, AX(1), false), 0, 5, 7, 9);
  EXPECT_VALUES(pd_max(t, AX(1), false), 0, 4, 5, 6);
  EXPECT_VALUES(pd_prod(t, AX(0), false), 0, 6, 120);
  EXPECT_VALUES(pd_argmax(t, PD_AXIS_NONE, false, PD_INT64), 0, 5);
  EXPECT_VALUES(pd_argmin(t, 1, false, PD_INT64), 0, 0, 0, 0);
  EXPECT_VALUES(pd_cumsum(t, 0, PD_NUM_DTYPES), 0, 1, 4, 3, 9, 6, 15);
  EXPECT_VALUES(pd_cumsum(t, PD_AXIS_NONE, PD_NUM_DTYPES), 0, 1, 5, 7, 12, 15, 21);
  EXPECT_VALUES(pd_sort(t, 0, true, false), 0, 3, 6, 2, 5, 1, 4);
  EXPECT_VALUES(pd_var(t, AX(1), true, false), 1e-6, 4.5, 4.5, 4.5);
  EXPECT_VALUES(pd_norm(t, 1, AX(0), false), 1e-6, 6, 15);
  pd_scope_end();
  expect_no_live_tensors();
}

/* naive reduction of x over mask, row-major outputs */
static void naive(const pd_tensor *x, const bool *mask, int kind, double *out, int64_t n_out) {
  int nd = pd_tensor_ndim(x);
  const int64_t *sh = pd_tensor_shape(x);
  for (int64_t o = 0; o < n_out; o++) out[o] = kind == 0 ? 0 : kind == 1 ? 1 : -INFINITY;
  for (int64_t i = 0; i < pd_tensor_numel(x); i++) {
    int64_t rem = i, o = 0, mul = 1;
    for (int d = nd - 1; d >= 0; d--) {
      int64_t id = rem % sh[d];
      rem /= sh[d];
      if (!mask[d]) {
        o += id * mul;
        mul *= sh[d];
      }
    }
    double v = pd_tensor_item_at(x, i);
    if (kind == 0)
      out[o] += v;
    else if (kind == 1)
      out[o] *= v;
    else if (v > out[o])
      out[o] = v;
  }
}

/* every axis subset of a [3, 4, 5] tensor, contiguous and permuted, against
 * the naive loops (covers the inner, rows and strided loop shapes) */
static void test_against_naive(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *base = iota(PD_FLOAT64, 3, SHAPE(3, 4, 5));
  double *p = pd_tensor_data(base);
  for (int i = 0; i < 60; i++) p[i] = sin(1.0 + i * 0.7) * 1.3 + 0.1; /* no ties, non-zero */
  const int64_t perms[3][3] = {{0, 1, 2}, {2, 0, 1}, {1, 2, 0}};
  for (int pi = 0; pi < 3; pi++) {
    pd_tensor *x = pd_transpose(base, 3, perms[pi]);
    for (int m = 1; m < 8; m++) {
      int64_t axes[3];
      int na = 0;
      bool mask[3];
      for (int d = 0; d < 3; d++) {
        mask[d] = (m >> d) & 1;
        if (mask[d]) axes[na++] = d;
      }
      int64_t n_out = 1;
      for (int d = 0; d < 3; d++)
        if (!mask[d]) n_out *= pd_tensor_shape(x)[d];
      double want[60];
      pd_tensor *(*fns[3])(pd_tensor *, const int64_t *, int, bool) = {pd_sum, pd_prod, pd_max};
      for (int kind = 0; kind < 3; kind++) {
        naive(x, mask, kind, want, n_out);
        pd_tensor *got = fns[kind](x, axes, na, false);
        expect_values(got, want, n_out, 1e-12);
      }
    }
  }
  pd_scope_end();
  expect_no_live_tensors();
}

/* large reductions: float32 sums of ones are exact; all loop shapes and the
 * split-over-threads paths agree with the closed forms */
static void test_large_exact(void **state) {
  (void)state;
  pd_set_num_threads(2);
  pd_scope_begin();
  pd_tensor *ones = pd_ones(1, SHAPE(10000000), PD_FLOAT32);
  assert_true(pd_tensor_item_at(pd_sum(ones, NULL, 0, false), 0) == 1e7);
  assert_true(pd_tensor_item_at(pd_mean(ones, NULL, 0, false), 0) == 1.0f);
  pd_tensor *o2 = pd_reshape(ones, 2, SHAPE(2, 5000000));
  EXPECT_VALUES(pd_sum(o2, AX(1), false), 0, 5e6, 5e6); /* few long rows: split */
  pd_tensor *o3 = pd_reshape(ones, 2, SHAPE(5000000, 2));
  EXPECT_VALUES(pd_sum(o3, AX(0), false), 0, 5e6, 5e6); /* outer reduction, 2 columns */
  pd_tensor *o4 = pd_reshape(ones, 2, SHAPE(1000, 10000));
  pd_tensor *c = pd_sum(o4, AX(0), false); /* rows mode */
  assert_true(pd_tensor_item_at(c, 0) == 1000 && pd_tensor_item_at(c, 9999) == 1000);
  pd_tensor *r = pd_sum(o4, AX(1), false);
  assert_true(pd_tensor_item_at(r, 0) == 10000 && pd_tensor_item_at(r, 999) == 10000);
  /* 0..n-1: the max is n-1 at index n-1, in one long line and split */
  pd_tensor *ramp = iota(PD_FLOAT32, 1, SHAPE(1 << 20));
  EXPECT_VALUES(pd_max(ramp, NULL, 0, false), 0, (1 << 20) - 1);
  EXPECT_VALUES(pd_argmax(ramp, PD_AXIS_NONE, false, PD_INT64), 0, (1 << 20) - 1);
  EXPECT_VALUES(pd_argmin(ramp, 0, false, PD_INT32), 0, 0);
  pd_tensor *cs = pd_cumsum(ones, 0, PD_NUM_DTYPES);
  assert_true(pd_tensor_item_at(cs, 9999999) == 1e7 && pd_tensor_item_at(cs, 4999999) == 5e6);
  pd_tensor *cs2 = pd_cumsum(o3, 0, PD_NUM_DTYPES);
  assert_true(pd_tensor_item_at(cs2, 9999999) == 5e6);
  pd_tensor *tk = NULL, *ti = NULL;
  assert_int_equal(pd_topk(ramp, 3, -1, true, true, &tk, &ti), PD_OK);
  EXPECT_VALUES(tk, 0, (1 << 20) - 1, (1 << 20) - 2, (1 << 20) - 3);
  EXPECT_VALUES(ti, 0, (1 << 20) - 1, (1 << 20) - 2, (1 << 20) - 3);
  pd_scope_end();
  expect_no_live_tensors();
}

/* the specialised loop shapes against naive loops: dense short rows, rows
 * with a small constant stride, split argmax rows, long cumsum lines in both
 * directions, batched strided sorts */
static void test_loop_shapes(void **state) {
  (void)state;
  pd_set_num_threads(2);
  pd_scope_begin();
  enum { R = 1000, K = 3 };
  double v[R * K];
  for (int i = 0; i < R * K; i++) v[i] = 1.0 + 0.001 * sin(i * 0.37) + (i % 7 == 3 ? -2.0 : 0.0);
  pd_tensor *x = pd_tensor_from_f64(v, PD_FLOAT64, 2, SHAPE(R, K));
  double s[K] = {0}, p[K] = {1, 1, 1}, mx[K], mn[K], mu[K] = {0}, var[K] = {0}, lse[K] = {0};
  for (int k = 0; k < K; k++) mx[k] = -INFINITY, mn[k] = INFINITY;
  for (int r = 0; r < R; r++)
    for (int k = 0; k < K; k++) {
      double e = v[r * K + k];
      s[k] += e;
      p[k] *= e;
      mx[k] = e > mx[k] ? e : mx[k];
      mn[k] = e < mn[k] ? e : mn[k];
    }
  for (int k = 0; k < K; k++) mu[k] = s[k] / R;
  for (int r = 0; r < R; r++)
    for (int k = 0; k < K; k++) {
      var[k] += (v[r * K + k] - mu[k]) * (v[r * K + k] - mu[k]) / (R - 1);
      lse[k] += exp(v[r * K + k] - mx[k]);
    }
  for (int k = 0; k < K; k++) lse[k] = log(lse[k]) + mx[k];
  expect_values(pd_sum(x, AX(0), false), s, K, 1e-12);
  expect_values(pd_prod(x, AX(0), false), p, K, 1e-9);
  expect_values(pd_max(x, AX(0), false), mx, K, 0);
  expect_values(pd_min(x, AX(0), false), mn, K, 0);
  expect_values(pd_var(x, AX(0), true, false), var, K, 1e-9);
  expect_values(pd_logsumexp(x, AX(0), false), lse, K, 1e-12);
  EXPECT_VALUES(pd_all(x, AX(0), false), 0, 1, 1, 1);
  /* rows of 2 and 4 contiguous elements reduced (stride-2 / stride-4 loads) */
  for (int w = 2; w <= 4; w += 2) {
    pd_tensor *y = pd_reshape(x, 2, A(R * K / w, w));
    pd_tensor *ys = pd_sum(y, AX(1), false), *ym = pd_max(y, AX(1), false);
    for (int r = 0; r < R * K / w; r++) {
      double a = 0, m = -INFINITY;
      for (int j = 0; j < w; j++) {
        a += v[r * w + j];
        m = v[r * w + j] > m ? v[r * w + j] : m;
      }
      assert_true(fabs(pd_tensor_item_at(ys, r) - a) <= 1e-12 && pd_tensor_item_at(ym, r) == m);
    }
  }
  /* argmax over a long axis 0 with few columns: rows split over threads */
  enum { L = 20000 };
  double *c = malloc(sizeof(double) * L * 3);
  for (int r = 0; r < L; r++) {
    c[r * 3] = r;
    c[r * 3 + 1] = -r;
    c[r * 3 + 2] = r == 12345 || r == 17000 ? 5 : 1;
  }
  pd_tensor *cm = pd_tensor_from_f64(c, PD_FLOAT32, 2, SHAPE(L, 3));
  EXPECT_VALUES(pd_argmax(cm, 0, false, PD_INT64), 0, L - 1, 0, 12345);
  EXPECT_VALUES(pd_argmin(cm, 0, false, PD_INT64), 0, 0, L - 1, 0);
  /* long cumsum lines, forward and (through the gradient) reversed */
  for (int i = 0; i < L; i++) c[i] = (i % 13) - 6 + 0.25;
  pd_tensor *line = pd_tensor_from_f64(c, PD_FLOAT64, 1, SHAPE(L));
  pd_tensor_set_stop_gradient(line, false);
  pd_tensor *cs = pd_cumsum(line, 0, PD_NUM_DTYPES);
  double acc = 0;
  for (int i = 0; i < L; i++) {
    acc += c[i];
    if (pd_tensor_item_at(cs, i) != acc)
      fail_msg("cumsum element %d: %g vs %g", i, pd_tensor_item_at(cs, i), acc);
  }
  pd_tensor *wts = pd_tensor_from_f64(c, PD_FLOAT64, 1, SHAPE(L));
  assert_int_equal(pd_backward(pd_sum(pd_multiply(cs, wts), NULL, 0, false), NULL, false), PD_OK);
  acc = 0;
  for (int i = L - 1; i >= 0; i--) {
    acc += c[i];
    if (pd_tensor_item_at(pd_tensor_grad(line), i) != acc) fail_msg("cumsum grad element %d", i);
  }
  free(c);
  /* sorts along a strided axis, lines in batches */
  enum { N = 300, M = 40 };
  double q[N * M];
  for (int i = 0; i < N * M; i++) q[i] = (double)((i * 7919) % 23);
  pd_tensor *z = pd_tensor_from_f64(q, PD_INT32, 2, SHAPE(N, M));
  pd_tensor *zi = pd_argsort(z, 0, true, true);
  pd_tensor *tv = NULL, *ti = NULL;
  assert_int_equal(pd_topk(z, 3, 0, false, true, &tv, &ti), PD_OK);
  for (int m = 0; m < M; m++) {
    for (int r = 1; r < N; r++) {
      int64_t a = (int64_t)pd_tensor_item_at(zi, (r - 1) * M + m),
              b = (int64_t)pd_tensor_item_at(zi, r * M + m);
      double va = q[a * M + m], vb = q[b * M + m];
      assert_true(va > vb || (va == vb && a < b));
    }
    /* the 3 smallest of the column, earliest first among equals */
    int64_t best[3] = {-1, -1, -1};
    for (int j = 0; j < 3; j++)
      for (int r = 0; r < N; r++) {
        bool used = false;
        for (int u = 0; u < j; u++) used |= best[u] == r;
        if (!used && (best[j] < 0 || q[r * M + m] < q[best[j] * M + m])) best[j] = r;
      }
    for (int j = 0; j < 3; j++) {
      assert_true((int64_t)pd_tensor_item_at(ti, j * M + m) == best[j]);
      assert_true(pd_tensor_item_at(tv, j * M + m) == q[best[j] * M + m]);
    }
  }
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_argmax_argmin(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = T(PD_FLOAT32, 2, SHAPE(2, 4), 1, 7, 7, 2, 5, 0, 5, 0);
  pd_tensor *a = pd_argmax(x, 1, false, PD_INT64);
  assert_int_equal(pd_tensor_dtype(a), PD_INT64);
  EXPECT_VALUES(a, 0, 1, 0); /* ties: first index */
  EXPECT_VALUES(pd_argmin(x, -1, false, PD_INT64), 0, 0, 1);
  EXPECT_VALUES(pd_argmax(x, 0, false, PD_INT64), 0, 1, 0, 0, 0);
  pd_tensor *k = pd_argmax(x, 0, true, PD_INT64);
  expect_shape(k, 2, SHAPE(1, 4));
  pd_tensor *f = pd_argmax(x, PD_AXIS_NONE, false, PD_INT64);
  expect_shape(f, 0, NULL);
  EXPECT_VALUES(f, 0, 1);
  pd_tensor *fk = pd_argmin(x, PD_AXIS_NONE, true, PD_INT32);
  expect_shape(fk, 2, SHAPE(1, 1));
  assert_int_equal(pd_tensor_dtype(fk), PD_INT32);
  EXPECT_VALUES(fk, 0, 5);
  pd_tensor *n = T(PD_FLOAT64, 1, SHAPE(4), 1, NAN, 9, NAN);
  EXPECT_VALUES(pd_argmax(n, 0, false, PD_INT64), 0, 1);
  EXPECT_VALUES(pd_argmin(n, 0, false, PD_INT64), 0, 1);
  pd_tensor *xi = T(PD_INT16, 2, SHAPE(2, 3), 3, 9, 9, -4, -4, 2);
  EXPECT_VALUES(pd_argmax(xi, 1, false, PD_INT64), 0, 1, 2);
  EXPECT_VALUES(pd_argmin(xi, 1, false, PD_INT64), 0, 0, 0);
  expect_error(pd_argmax(x, 2, false, PD_INT64), "argmax", "axis 2");
  expect_error(pd_argmax(x, 0, false, PD_FLOAT32), "argmax", "float32");
  expect_error(pd_argmin(pd_zeros(1, SHAPE(0), PD_FLOAT32), PD_AXIS_NONE, false, PD_INT64), "argmin",
               "empty");
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_logsumexp(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = T(PD_FLOAT64, 2, SHAPE(2, 2), 1000, 1000, -1000, 0);
  EXPECT_VALUES(pd_logsumexp(x, AX(1), false), 1e-12, 1000 + log(2.0), log1p(exp(-1000.0)));
  EXPECT_VALUES(pd_logsumexp(T(PD_FLOAT32, 1, SHAPE(3), 1, 2, 3), NULL, 0, false), 1e-6,
                log(exp(1.0) + exp(2.0) + exp(3.0)));
  pd_tensor *ninf = T(PD_FLOAT32, 1, SHAPE(2), -INFINITY, -INFINITY);
  assert_true(isinf(pd_tensor_item_at(pd_logsumexp(ninf, NULL, 0, false), 0)) &&
              pd_tensor_item_at(pd_logsumexp(ninf, NULL, 0, false), 0) < 0);
  pd_tensor *pinf = T(PD_FLOAT32, 1, SHAPE(2), INFINITY, 1);
  assert_true(pd_tensor_item_at(pd_logsumexp(pinf, NULL, 0, false), 0) == INFINITY);
  pd_tensor *li = pd_logsumexp(T(PD_INT32, 1, SHAPE(2), 0, 0), NULL, 0, true);
  assert_int_equal(pd_tensor_dtype(li), PD_FLOAT32);
  expect_shape(li, 1, SHAPE(1));
  EXPECT_VALUES(li, 1e-6, log(2.0));
  pd_scope_end();
  expect_no_live_tensors();
}

/* var/std against the two-pass formula computed here */
static void test_var_std(void **state) {
  (void)state;
  pd_scope_begin();
  double v[12];
  for (int i = 0; i < 12; i++) v[i] = cos(i * 1.1) * 3 + i * 0.25;
  pd_tensor *x = pd_tensor_from_f64(v, PD_FLOAT64, 2, SHAPE(3, 4));
  double want_u[4], want_b[4];
  for (int j = 0; j < 4; j++) {
    double mu = 0, ss = 0;
    for (int i = 0; i < 3; i++) mu += v[i * 4 + j] / 3;
    for (int i = 0; i < 3; i++) ss += (v[i * 4 + j] - mu) * (v[i * 4 + j] - mu);
    want_u[j] = ss / 2;
    want_b[j] = ss / 3;
  }
  expect_values(pd_var(x, AX(0), true, false), want_u, 4, 1e-12);
  expect_values(pd_var(x, AX(-2), false, false), want_b, 4, 1e-12);
  for (int j = 0; j < 4; j++) want_u[j] = sqrt(want_u[j]);
  pd_tensor *s = pd_std(x, AX(0), true, true);
  expect_shape(s, 2, SHAPE(1, 4));
  expect_values(s, want_u, 4, 1e-12);
  /* Paddle's example */
  pd_tensor *p = T(PD_FLOAT32, 2, SHAPE(2, 3), 1, 2, 3, 1, 4, 5);
  EXPECT_VALUES(pd_var(p, NULL, 0, true, false), 1e-6, 2.6666667);
  EXPECT_VALUES(pd_var(p, AX(1), true, false), 1e-6, 1, 4.3333335);
  EXPECT_VALUES(pd_std(p, NULL, 0, true, false), 1e-6, 1.6329932);
  EXPECT_VALUES(pd_std(p, NULL, 0, false, false), 1e-6, 1.490712);
  /* a single element: unbiased divides by 1 */
  EXPECT_VALUES(pd_var(T(PD_FLOAT32, 1, SHAPE(1), 5), NULL, 0, true, false), 0, 0);
  assert_int_equal(pd_tensor_dtype(pd_std(x23(PD_INT64), NULL, 0, true, false)), PD_FLOAT32);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_norm(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = T(PD_FLOAT32, 2, SHAPE(2, 2), 3, -4, 0, 12);
  EXPECT_VALUES(pd_norm(x, 2, NULL, 0, false), 1e-6, 13);
  EXPECT_VALUES(pd_norm(x, 2, AX(1), false), 1e-6, 5, 12);
  EXPECT_VALUES(pd_norm(x, 1, AX(0), false), 1e-6, 3, 16);
  EXPECT_VALUES(pd_norm(x, INFINITY, AX(1), false), 0, 4, 12);
  EXPECT_VALUES(pd_norm(x, -INFINITY, NULL, 0, false), 0, 0);
  EXPECT_VALUES(pd_norm(x, 0, AX(1), false), 0, 2, 1);
  EXPECT_VALUES(pd_norm(x, 3, AX(-1), true), 1e-6, cbrt(27 + 64), 12);
  EXPECT_VALUES(pd_norm(x, 0.5, AX(0), false), 1e-6, 3, pow(2 + sqrt(12.0), 2));
  expect_shape(pd_norm(x, 2, AX(0, 1), true), 2, SHAPE(1, 1));
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_cumsum(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = x23(PD_FLOAT32);
  EXPECT_VALUES(pd_cumsum(x, 1, PD_NUM_DTYPES), 0, 1, 3, 6, 4, 9, 15);
  EXPECT_VALUES(pd_cumsum(x, -2, PD_NUM_DTYPES), 0, 1, 2, 3, 5, 7, 9);
  pd_tensor *f = pd_cumsum(x, PD_AXIS_NONE, PD_NUM_DTYPES);
  expect_shape(f, 1, SHAPE(6));
  EXPECT_VALUES(f, 0, 1, 3, 6, 10, 15, 21);
  pd_tensor *ci = pd_cumsum(x23(PD_INT32), 0, PD_NUM_DTYPES);
  assert_int_equal(pd_tensor_dtype(ci), PD_INT32);
  EXPECT_VALUES(ci, 0, 1, 2, 3, 5, 7, 9);
  pd_tensor *cd = pd_cumsum(x23(PD_INT32), 1, PD_FLOAT64);
  assert_int_equal(pd_tensor_dtype(cd), PD_FLOAT64);
  EXPECT_VALUES(cd, 0, 1, 3, 6, 4, 9, 15);
  expect_error(pd_cumsum(x, 2, PD_NUM_DTYPES), "cumsum", "axis 2");
  expect_error(pd_cumsum(T(PD_BOOL, 1, SHAPE(2), 1, 0), 0, PD_NUM_DTYPES), "cumsum", "bool");
  /* gradient: a reverse cumsum of the output gradient */
  pd_tensor *v = T(PD_FLOAT64, 2, SHAPE(2, 3), 1, 2, 3, 4, 5, 6);
  pd_tensor_set_stop_gradient(v, false);
  pd_tensor *w = T(PD_FLOAT64, 2, SHAPE(2, 3), 1, 10, 100, 2, 20, 200);
  pd_tensor *l = pd_sum(pd_multiply(pd_cumsum(v, 1, PD_NUM_DTYPES), w), NULL, 0, false);
  assert_int_equal(pd_backward(l, NULL, false), PD_OK);
  EXPECT_VALUES(pd_tensor_grad(v), 0, 111, 110, 100, 222, 220, 200);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_topk(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = T(PD_FLOAT32, 2, SHAPE(2, 5), 1, 5, 3, 5, 2, 0, -1, 0, 7, 0);
  pd_tensor *v = NULL, *i = NULL;
  assert_int_equal(pd_topk(x, 3, -1, true, true, &v, &i), PD_OK);
  expect_shape(v, 2, SHAPE(2, 3));
  assert_int_equal(pd_tensor_dtype(i), PD_INT64);
  EXPECT_VALUES(v, 0, 5, 5, 3, 7, 0, 0);
  EXPECT_VALUES(i, 0, 1, 3, 2, 3, 0, 2); /* equal values in index order */
  assert_int_equal(pd_topk(x, 2, 1, false, true, &v, &i), PD_OK);
  EXPECT_VALUES(v, 0, 1, 2, -1, 0);
  EXPECT_VALUES(i, 0, 0, 4, 1, 0);
  assert_int_equal(pd_topk(x, 1, 0, true, true, &v, NULL), PD_OK);
  expect_shape(v, 2, SHAPE(1, 5));
  EXPECT_VALUES(v, 0, 1, 5, 3, 7, 2);
  pd_tensor *n = T(PD_FLOAT64, 1, SHAPE(4), 2, NAN, 8, 1);
  assert_int_equal(pd_topk(n, 2, -1, true, true, &v, &i), PD_OK);
  assert_true(isnan(pd_tensor_item_at(v, 0)) && pd_tensor_item_at(v, 1) == 8);
  EXPECT_VALUES(i, 0, 1, 2);
  /* a long row takes the partial-selection path: same order rules */
  double row[100];
  for (int j = 0; j < 100; j++) row[j] = (j * 37) % 10;
  pd_tensor *r = pd_tensor_from_f64(row, PD_INT32, 1, SHAPE(100));
  assert_int_equal(pd_topk(r, 3, 0, true, true, &v, &i), PD_OK);
  EXPECT_VALUES(v, 0, 9, 9, 9);
  EXPECT_VALUES(i, 0, 7, 17, 27);
  assert_int_equal(pd_topk(r, 2, 0, false, true, &v, &i), PD_OK);
  EXPECT_VALUES(v, 0, 0, 0);
  EXPECT_VALUES(i, 0, 0, 10);
  /* errors */
  assert_true(pd_topk(x, 6, -1, true, true, &v, &i) < 0);
  assert_null(v);
  expect_error(NULL, "topk", "k = 6");
  assert_true(pd_topk(x, 6, -1, true, true, &v, &i) < 0);
  expect_error(NULL, "size 5", NULL);
  assert_true(pd_topk(x, 0, -1, true, true, &v, &i) < 0);
  expect_error(NULL, "topk", "k must be >= 1");
  assert_true(pd_topk(x, 1, 2, true, true, &v, &i) < 0);
  expect_error(NULL, "topk", "rank 2");
  /* gradient: scattered back to the chosen positions */
  pd_tensor *g = T(PD_FLOAT64, 1, SHAPE(4), 0.5, 3, 1, 2);
  pd_tensor_set_stop_gradient(g, false);
  assert_int_equal(pd_topk(g, 2, 0, true, true, &v, NULL), PD_OK);
  pd_tensor *l = pd_sum(pd_multiply(v, T(PD_FLOAT64, 1, SHAPE(2), 10, 100)), NULL, 0, false);
  assert_int_equal(pd_backward(l, NULL, false), PD_OK);
  EXPECT_VALUES(pd_tensor_grad(g), 0, 0, 10, 0, 100);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_sort(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = T(PD_FLOAT32, 2, SHAPE(2, 4), 3, 1, 3, 2, 0, 0, -1, 0);
  EXPECT_VALUES(pd_sort(x, -1, false, false), 0, 1, 2, 3, 3, -1, 0, 0, 0);
  EXPECT_VALUES(pd_argsort(x, -1, false, true), 0, 1, 3, 0, 2, 2, 0, 1, 3);
  EXPECT_VALUES(pd_argsort(x, 1, true, false), 0, 0, 2, 3, 1, 0, 1, 3, 2); /* ties keep index order */
  EXPECT_VALUES(pd_sort(x, 0, true, false), 0, 3, 1, 3, 2, 0, 0, -1, 0);
  EXPECT_VALUES(pd_argsort(x, 0, false, false), 0, 1, 1, 1, 1, 0, 0, 0, 0);
  pd_tensor *n = T(PD_FLOAT64, 1, SHAPE(4), 2, NAN, -3, 1);
  pd_tensor *sn = pd_sort(n, 0, false, false);
  EXPECT_VALUES(sn, 0, -3, 1, 2, NAN);
  EXPECT_VALUES(pd_argsort(n, 0, true, false), 0, 1, 0, 3, 2);
  pd_tensor *ai = pd_argsort(T(PD_INT64, 1, SHAPE(5), 5, -2, 5, 0, -2), 0, false, true);
  assert_int_equal(pd_tensor_dtype(ai), PD_INT64);
  EXPECT_VALUES(ai, 0, 1, 4, 3, 0, 2);
  /* a longer row exercises the merge passes */
  double row[70];
  for (int j = 0; j < 70; j++) row[j] = (j * 29) % 7;
  pd_tensor *r = pd_tensor_from_f64(row, PD_FLOAT32, 1, SHAPE(70));
  pd_tensor *ri = pd_argsort(r, 0, false, false);
  for (int j = 1; j < 70; j++) {
    int64_t a = (int64_t)pd_tensor_item_at(ri, j - 1), b = (int64_t)pd_tensor_item_at(ri, j);
    assert_true(row[a] < row[b] || (row[a] == row[b] && a < b));
  }
  expect_error(pd_sort(x, -3, false, false), "argsort", "axis -3");
  /* gradient through the permutation */
  pd_tensor *g = T(PD_FLOAT64, 1, SHAPE(3), 2, 3, 1);
  pd_tensor_set_stop_gradient(g, false);
  pd_tensor *l = pd_sum(pd_multiply(pd_sort(g, 0, false, false), T(PD_FLOAT64, 1, SHAPE(3), 1, 10, 100)),
                        NULL, 0, false);
  assert_int_equal(pd_backward(l, NULL, false), PD_OK);
  EXPECT_VALUES(pd_tensor_grad(g), 0, 10, 100, 1);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_max_grad_ties(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = T(PD_FLOAT64, 2, SHAPE(2, 3), 1, 3, 3, 5, 5, 5);
  pd_tensor_set_stop_gradient(x, false);
  pd_tensor *l =
      pd_sum(pd_multiply(pd_max(x, AX(1), false), T(PD_FLOAT64, 1, SHAPE(2), 1, 6)), NULL, 0, false);
  assert_int_equal(pd_backward(l, NULL, false), PD_OK);
  EXPECT_VALUES(pd_tensor_grad(x), 1e-12, 0, 0.5, 0.5, 2, 2, 2);
  pd_tensor *y = T(PD_FLOAT32, 1, SHAPE(4), -1, 2, -1, 0);
  pd_tensor_set_stop_gradient(y, false);
  assert_int_equal(pd_backward(pd_min(y, NULL, 0, false), NULL, false), PD_OK);
  EXPECT_VALUES(pd_tensor_grad(y), 1e-7, 0.5, 0, 0.5, 0);
  pd_scope_end();
  expect_no_live_tensors();
}

/* prod gradients with zeros, first and second order */
static void test_prod_grad_zeros(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = T(PD_FLOAT64, 2, SHAPE(3, 3), 2, 0, 3, 0, 4, 0, 1, 2, 5);
  pd_tensor_set_stop_gradient(x, false);
  pd_tensor *p = pd_prod(x, AX(1), false);
  EXPECT_VALUES(p, 0, 0, 0, 10);
  pd_tensor *g = NULL;
  pd_tensor *l = pd_sum(p, NULL, 0, false);
  assert_int_equal(pd_grad(&l, 1, &x, 1, NULL, &(pd_grad_opts){.create_graph = true}, &g), PD_OK);
  EXPECT_VALUES(g, 0, 0, 6, 0, 0, 0, 0, 10, 5, 2);
  /* d/dx of sum(g * w): row 0 has one zero at 1 -> Hessian entries x_k for the pairs with it */
  pd_tensor *w = T(PD_FLOAT64, 2, SHAPE(3, 3), 1, 10, 100, 1, 10, 100, 1, 10, 100);
  pd_tensor *l2 = pd_sum(pd_multiply(g, w), NULL, 0, false);
  pd_tensor *h = NULL;
  assert_int_equal(pd_grad(&l2, 1, &x, 1, NULL, NULL, &h), PD_OK);
  /* row (a, b, c): d/da = 10 c + 100 b, d/db = a + 100 c... with H_ab = c etc. */
  EXPECT_VALUES(h, 1e-12, 10 * 3 + 100 * 0, 1 * 3 + 100 * 2, 1 * 0 + 10 * 2, /* row 0: (2, 0, 3) */
                10 * 0 + 100 * 4, 1 * 0 + 100 * 0, 1 * 4 + 10 * 0,           /* row 1: (0, 4, 0) */
                10 * 5 + 100 * 2, 1 * 5 + 100 * 1, 1 * 2 + 10 * 1);          /* row 2: (1, 2, 5) */
  pd_scope_end();
  expect_no_live_tensors();
}

/* double backward through logsumexp and var (their gradients use ops) */
static void test_double_backward(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = T(PD_FLOAT64, 1, SHAPE(2), 0.3, -0.4);
  pd_tensor_set_stop_gradient(x, false);
  pd_tensor *l = pd_logsumexp(x, NULL, 0, false);
  pd_tensor *g = NULL, *h = NULL;
  assert_int_equal(pd_grad(&l, 1, &x, 1, NULL, &(pd_grad_opts){.create_graph = true}, &g), PD_OK);
  double s0 = exp(0.3) / (exp(0.3) + exp(-0.4)), s1 = 1 - s0;
  EXPECT_VALUES(g, 1e-12, s0, s1);
  pd_tensor *g0 = pd_sum(pd_multiply(g, T(PD_FLOAT64, 1, SHAPE(2), 1, 0)), NULL, 0, false);
  assert_int_equal(pd_grad(&g0, 1, &x, 1, NULL, NULL, &h), PD_OK);
  EXPECT_VALUES(h, 1e-12, s0 * (1 - s0), -s0 * s1); /* softmax Jacobian row */
  /* var (biased) of (a, b): (a - b)^2 / 4; d2/da2 = 1/2 */
  pd_tensor *v = pd_var(x, NULL, 0, false, false);
  pd_tensor *gv = NULL, *hv = NULL;
  assert_int_equal(pd_grad(&v, 1, &x, 1, NULL, &(pd_grad_opts){.create_graph = true}, &gv), PD_OK);
  EXPECT_VALUES(gv, 1e-12, 0.35, -0.35);
  pd_tensor *ga = pd_sum(pd_multiply(gv, T(PD_FLOAT64, 1, SHAPE(2), 1, 0)), NULL, 0, false);
  assert_int_equal(pd_grad(&ga, 1, &x, 1, NULL, NULL, &hv), PD_OK);
  EXPECT_VALUES(hv, 1e-12, 0.5, -0.5);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_bad_inputs(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = x23(PD_FLOAT32);
  expect_error(pd_sum(x, AX(2), false), "sum", "axis 2");
  expect_error(pd_mean(x, AX(-3), false), "mean", "rank 2");
  expect_error(pd_max(x, AX(0, 0), false), "max", "axis 0 appears twice");
  expect_error(pd_min(x, AX(1, -1), false), "min", "appears twice");
  expect_error(pd_prod(x, AX(5), true), "prod", "axis 5");
  expect_error(pd_all(x, AX(-4), false), "all", "rank 2");
  expect_error(pd_logsumexp(x, AX(3), false), "logsumexp", "axis 3");
  expect_error(pd_var(x, AX(2), true, false), "var", "rank 2");
  expect_error(pd_norm(x, NAN, NULL, 0, false), "norm", "NaN");
  expect_error(pd_norm(x, 2, AX(0, 2), false), "norm", "axis 2");
  expect_error(pd_sum(x, NULL, 3, false), "sum", "axis list");
  expect_error(pd_mean(NULL, NULL, 0, false), "mean", "NULL");
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_half(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *h = T(PD_FLOAT16, 2, SHAPE(2, 2), 1, 2, 3, 4);
  pd_tensor *m = pd_max(h, AX(1), false);
  assert_int_equal(pd_tensor_dtype(m), PD_FLOAT16);
  EXPECT_VALUES(m, 0, 2, 4);
  assert_int_equal(pd_tensor_dtype(pd_mean(h, NULL, 0, false)), PD_FLOAT16);
  EXPECT_VALUES(pd_mean(h, NULL, 0, false), 0, 2.5);
  assert_int_equal(pd_tensor_dtype(pd_any(h, NULL, 0, false)), PD_BOOL);
  pd_tensor *v = NULL, *i = NULL;
  assert_int_equal(pd_topk(h, 1, -1, true, true, &v, &i), PD_OK);
  assert_int_equal(pd_tensor_dtype(v), PD_FLOAT16);
  EXPECT_VALUES(i, 0, 1, 1);
  pd_scope_end();
  expect_no_live_tensors();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sum_mean_basic),
      cmocka_unit_test(test_max_min_prod),
      cmocka_unit_test(test_int_dtypes),
      cmocka_unit_test(test_all_any),
      cmocka_unit_test(test_empty),
      cmocka_unit_test(test_transposed),
      cmocka_unit_test(test_against_naive),
      cmocka_unit_test(test_large_exact),
      cmocka_unit_test(test_loop_shapes),
      cmocka_unit_test(test_argmax_argmin),
      cmocka_unit_test(test_logsumexp),
      cmocka_unit_test(test_var_std),
      cmocka_unit_test(test_norm),
      cmocka_unit_test(test_cumsum),
      cmocka_unit_test(test_topk),
      cmocka_unit_test(test_sort),
      cmocka_unit_test(test_max_grad_ties),
      cmocka_unit_test(test_prod_grad_zeros),
      cmocka_unit_test(test_double_backward),
      cmocka_unit_test(test_bad_inputs),
      cmocka_unit_test(test_half),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
