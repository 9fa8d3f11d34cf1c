/* Pooling: max/avg/adaptive pooling over 1-3 spatial dims against loops
 * written here in double from Paddle's window formulas (ceil_mode,
 * asymmetric padding, exclusive and inclusive averages, adaptive
 * start/end indices), masks, gradients against finite differences of those
 * loops, double backward, layers and bad inputs. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/op_registry.h"
#include "test_util.h"

typedef struct pcase {
  int nsp;
  int64_t N, C, I[3], K[3], S[3], PB[3], PA[3];
  bool ceil_mode, inclusive;
  bool adaptive;
  int64_t O[3]; /* adaptive output size */
} pcase;

static uint64_t g_rng = 0x2545F4914F6CDD1Dull;
static double urand(void) {
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 7;
  g_rng ^= g_rng << 17;
  return (double)(g_rng >> 11) / 9007199254740992.0 * 2 - 1;
}

static void out_size(const pcase *c, int64_t *O) {
  for (int d = 0; d < c->nsp; d++) {
    if (c->adaptive) {
      O[d] = c->O[d];
      continue;
    }
    int64_t num = c->I[d] - c->K[d] + c->PB[d] + c->PA[d] + (c->ceil_mode ? c->S[d] - 1 : 0);
    O[d] = num / c->S[d] + 1;
  }
}

/* Window of output o along dim d: [*s, *e) inside the input, *cnt the divisor share. */
static void window(const pcase *c, int d, int64_t o, int64_t *s, int64_t *e, int64_t *cnt) {
  if (c->adaptive) {
    *s = (int64_t)floor((double)(o * c->I[d]) / (double)c->O[d]);
    *e = (int64_t)ceil((double)((o + 1) * c->I[d]) / (double)c->O[d]);
    *cnt = *e - *s;
    return;
  }
  int64_t start = o * c->S[d] - c->PB[d];
  int64_t end = start + c->K[d] < c->I[d] + c->PB[d] ? start + c->K[d] : c->I[d] + c->PB[d];
  int64_t inc = end - start;
  *s = start < 0 ? 0 : start;
  *e = end > c->I[d] ? c->I[d] : end;
  *cnt = c->inclusive ? inc : *e - *s;
}

/* Reference pooling: y (and the mask of the first maximum) for max, y for avg. */
static void ref_pool(const pcase *c, bool is_max, const double *x, double *y, int64_t *mask) {
  int64_t O[3] = {1, 1, 1}, I3[3] = {1, 1, 1};
  out_size(c, O);
  for (int d = 0; d < c->nsp; d++) I3[d] = c->I[d];
  int64_t isz = I3[0] * I3[1] * I3[2], osz = O[0] * O[1] * O[2];
  for (int64_t p = 0; p < c->N * c->C; p++)
    for (int64_t o0 = 0; o0 < O[0]; o0++)
      for (int64_t o1 = 0; o1 < O[1]; o1++)
        for (int64_t o2 = 0; o2 < O[2]; o2++) {
          int64_t s[3] = {0, 0, 0}, e[3] = {1, 1, 1}, cnt[3] = {1, 1, 1}, oi[3] = {o0, o1, o2};
          for (int d = 0; d < c->nsp; d++) window(c, d, oi[d], &s[d], &e[d], &cnt[d]);
          double acc = is_max ? -FLT_MAX : 0;
          int64_t arg = -1;
          for (int64_t i0 = s[0]; i0 < e[0]; i0++)
            for (int64_t i1 = s[1]; i1 < e[1]; i1++)
              for (int64_t i2 = s[2]; i2 < e[2]; i2++) {
                int64_t idx = (i0 * I3[1] + i1) * I3[2] + i2;
                double v = x[p * isz + idx];
                if (is_max) {
                  if (v > acc) acc = v, arg = idx;
                } else {
                  acc += v;
                }
              }
          int64_t out = p * osz + (o0 * O[1] + o1) * O[2] + o2;
          y[out] = is_max ? acc : acc / (double)(cnt[0] * cnt[1] * cnt[2]);
          if (mask) mask[out] = arg;
        }
}

static pd_pool_opts opts_of(const pcase *c) {
  pd_pool_opts o = {
      .n_stride = c->nsp, .n_padding = 2 * c->nsp, .ceil_mode = c->ceil_mode, .inclusive = c->inclusive};
  for (int d = 0; d < c->nsp; d++) {
    o.stride[d] = c->S[d];
    o.padding[2 * d] = c->PB[d];
    o.padding[2 * d + 1] = c->PA[d];
  }
  return o;
}

static pd_tensor *call_pool(const pcase *c, bool is_max, pd_tensor *x, pd_tensor **mask) {
  pd_pool_opts o = opts_of(c);
  int n = c->nsp;
  if (c->adaptive) {
    if (is_max)
      return n == 1   ? pd_adaptive_max_pool1d(x, 1, c->O, mask)
             : n == 2 ? pd_adaptive_max_pool2d(x, 2, c->O, mask)
                      : pd_adaptive_max_pool3d(x, 3, c->O, mask);
    return n == 1   ? pd_adaptive_avg_pool1d(x, 1, c->O)
           : n == 2 ? pd_adaptive_avg_pool2d(x, 2, c->O, NULL)
                    : pd_adaptive_avg_pool3d(x, 3, c->O, NULL);
  }
  if (is_max)
    return n == 1   ? pd_max_pool1d_with_mask(x, 1, c->K, &o, mask)
           : n == 2 ? pd_max_pool2d_with_mask(x, 2, c->K, &o, mask)
                    : pd_max_pool3d_with_mask(x, 3, c->K, &o, mask);
  return n == 1   ? pd_avg_pool1d(x, 1, c->K, &o)
         : n == 2 ? pd_avg_pool2d(x, 2, c->K, &o)
                  : pd_avg_pool3d(x, 3, c->K, &o);
}

static int64_t numel_x(const pcase *c, int64_t *shape) {
  shape[0] = c->N, shape[1] = c->C;
  int64_t n = c->N * c->C;
  for (int d = 0; d < c->nsp; d++) n *= shape[2 + d] = c->I[d];
  return n;
}
static int64_t numel_y(const pcase *c, int64_t *shape) {
  int64_t O[3];
  out_size(c, O);
  shape[0] = c->N, shape[1] = c->C;
  int64_t n = c->N * c->C;
  for (int d = 0; d < c->nsp; d++) n *= shape[2 + d] = O[d];
  return n;
}

static void check_values(const pcase *c, bool is_max, pd_dtype dt) {
  int64_t xs[5], ys[5], nx = numel_x(c, xs), ny = numel_y(c, ys);
  double *x = malloc(sizeof(double) * (size_t)nx), *y = malloc(sizeof(double) * (size_t)ny);
  double *got = malloc(sizeof(double) * (size_t)ny);
  int64_t *mask = malloc(sizeof(int64_t) * (size_t)ny);
  for (int64_t i = 0; i < nx; i++) x[i] = dt == PD_FLOAT32 ? (double)(float)urand() : urand();
  ref_pool(c, is_max, x, y, mask);
  pd_scope_begin();
  pd_tensor *tm = NULL,
            *ty = call_pool(c, is_max, pd_tensor_from_f64(x, dt, c->nsp + 2, xs), is_max ? &tm : NULL);
  if (!ty) fail_msg("%s", pd_last_error());
  expect_shape(ty, c->nsp + 2, ys);
  assert_int_equal(pd_tensor_dtype(ty), dt);
  assert_int_equal(pd_tensor_copy_to(ty, got, ny, PD_FLOAT64), ny);
  for (int64_t i = 0; i < ny; i++)
    if (!(fabs(got[i] - y[i]) <= (dt == PD_FLOAT32 ? 1e-6 : 1e-13) * (1 + fabs(y[i]))))
      fail_msg("%s %dd element %lld: got %.9g, want %.9g", is_max ? "max" : "avg", c->nsp, (long long)i,
               got[i], y[i]);
  if (is_max) {
    expect_shape(tm, c->nsp + 2, ys);
    assert_int_equal(pd_tensor_dtype(tm), PD_INT32);
    for (int64_t i = 0; i < ny; i++) assert_int_equal((int64_t)pd_tensor_item_at(tm, i), mask[i]);
  }
  pd_scope_end();
  free(x), free(y), free(got), free(mask);
}

/* {nsp, N, C, I, K, S, PB, PA, ceil_mode, inclusive, adaptive, O} */
static const pcase k_cases[] = {
    {2, 2, 3, {6, 7}, {2, 2}, {2, 2}, {0, 0}, {0, 0}, false, false, false, {0}},
    {2, 1, 2, {7, 8}, {3, 2}, {2, 3}, {1, 0}, {1, 1}, false, false, false, {0}},
    {2, 1, 2, {7, 8}, {3, 2}, {2, 3}, {1, 0}, {1, 1}, false, true, false, {0}},
    {2, 2, 2, {7, 6}, {3, 3}, {2, 2}, {1, 1}, {0, 0}, true, false, false, {0}}, /* ceil_mode */
    {2, 2, 2, {7, 6}, {3, 3}, {2, 2}, {1, 1}, {0, 0}, true, true, false, {0}},
    {2, 1, 3, {5, 5}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, false, true, false, {0}}, /* stride 1 */
    {1, 2, 3, {11}, {3}, {2}, {1}, {1}, true, false, false, {0}},
    {1, 2, 3, {11}, {4}, {3}, {2}, {0}, false, true, false, {0}},
    {3, 1, 2, {4, 5, 6}, {2, 3, 2}, {2, 1, 2}, {1, 1, 0}, {0, 1, 1}, false, false, false, {0}},
    {3, 1, 2, {4, 5, 6}, {2, 3, 2}, {2, 1, 2}, {1, 1, 0}, {0, 1, 0}, true, true, false, {0}},
    {2, 4, 16, {33, 40}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, false, false, false, {0}}, /* parallel planes */
    /* adaptive: uneven windows, output larger than the input, identity */
    {1, 2, 3, {10}, {0}, {0}, {0}, {0}, false, false, true, {4}},
    {2, 2, 3, {7, 5}, {0}, {0}, {0}, {0}, false, false, true, {3, 7}},
    {2, 1, 2, {4, 4}, {0}, {0}, {0}, {0}, false, false, true, {4, 4}},
    {3, 1, 2, {5, 4, 6}, {0}, {0}, {0}, {0}, false, false, true, {2, 3, 4}},
};

static void test_pool_values_against_reference(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof k_cases / sizeof *k_cases; i++)
    for (int m = 0; m < 2; m++) {
      check_values(&k_cases[i], m == 0, PD_FLOAT32);
      check_values(&k_cases[i], m == 0, PD_FLOAT64);
    }
  expect_no_live_tensors();
}

/* Hand-computed numbers: a 4x4 ramp. */
static void test_pool_hand_values(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = T(PD_FLOAT32, 4, SHAPE(1, 1, 4, 4), 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16);
  EXPECT_VALUES(pd_max_pool2d(x, 1, SHAPE(2), NULL), 0, 6, 8, 14, 16);
  EXPECT_VALUES(pd_avg_pool2d(x, 1, SHAPE(2), NULL), 1e-6, 3.5, 5.5, 11.5, 13.5);
  /* padding 1, exclusive: the corner window holds only x[0] */
  pd_pool_opts p1 = {.n_padding = 1, .padding = {1}, .n_stride = 1, .stride = {2}};
  pd_tensor *a = pd_avg_pool2d(x, 1, SHAPE(2), &p1);
  expect_shape(a, 4, SHAPE(1, 1, 3, 3));
  EXPECT_VALUES(a, 1e-6, 1, 2.5, 4, 7, 8.5, 10, 13, 14.5, 16);
  /* inclusive: divided by 4 everywhere */
  p1.inclusive = true;
  EXPECT_VALUES(pd_avg_pool2d(x, 1, SHAPE(2), &p1), 1e-6, 0.25, 1.25, 1, 3.5, 8.5, 5, 3.25, 7.25, 4);
  /* divisor_override: (sum / count) * 4 / 3 */
  pd_pool_opts d3 = {.divisor_override = 3};
  EXPECT_VALUES(pd_avg_pool2d(x, 1, SHAPE(2), &d3), 1e-5, 14.0 / 3, 22.0 / 3, 46.0 / 3, 54.0 / 3);
  /* adaptive 4 -> 3: windows [0,2), [1,3), [2,4) */
  EXPECT_VALUES(pd_adaptive_avg_pool2d(x, 1, SHAPE(3), NULL), 1e-6, 3.5, 4.5, 5.5, 7.5, 8.5, 9.5, 11.5, 12.5,
                13.5);
  pd_tensor *mask = NULL;
  EXPECT_VALUES(pd_adaptive_max_pool2d(x, 2, SHAPE(1, 2), &mask), 0, 14, 16);
  EXPECT_VALUES(mask, 0, 13, 15);
  /* an output_size entry <= 0 keeps the input size (None) */
  expect_shape(pd_adaptive_avg_pool2d(x, 2, SHAPE(0, 2), NULL), 4, SHAPE(1, 1, 4, 2));
  /* SAME: out = ceil(4 / 3) = 2, pad_sum = (2 - 1) * 3 + 2 - 4 = 1 -> (0, 1) */
  pd_tensor *s = pd_max_pool2d(x, 1, SHAPE(2),
                               &(pd_pool_opts){.n_stride = 1, .stride = {3}, .padding_algorithm = "SAME"});
  EXPECT_VALUES(s, 0, 6, 8, 14, 16);
  expect_shape(pd_avg_pool2d(x, 1, SHAPE(3),
                             &(pd_pool_opts){.padding_algorithm = "VALID", .n_stride = 1, .stride = {1}}),
               4, SHAPE(1, 1, 2, 2));
  /* 1-D */
  pd_tensor *x1 = T(PD_FLOAT64, 3, SHAPE(1, 1, 5), 3, 1, 4, 1, 5);
  EXPECT_VALUES(pd_max_pool1d(x1, 1, SHAPE(2), &(pd_pool_opts){.ceil_mode = true}), 0, 3, 4, 5);
  EXPECT_VALUES(pd_avg_pool1d(x1, 1, SHAPE(2), &(pd_pool_opts){.ceil_mode = true}), 1e-12, 2, 2.5, 5);
  EXPECT_VALUES(pd_adaptive_avg_pool1d(x1, 1, SHAPE(2)), 1e-12, 8.0 / 3, 10.0 / 3);
  pd_scope_end();
  expect_no_live_tensors();
}

/* channels last gives the channels-first numbers transposed; non-contiguous inputs; float16 */
static void test_pool_layouts_and_dtypes(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = pd_randn(4, SHAPE(2, 3, 7, 6), PD_FLOAT32);
  pd_tensor *xl = pd_contiguous(pd_transpose(x, 4, SHAPE(0, 2, 3, 1)));
  pd_pool_opts o = {.n_padding = 1, .padding = {1}, .n_stride = 1, .stride = {2}};
  pd_pool_opts ol = o;
  ol.data_format = "NHWC";
  pd_tensor *perm_back = NULL;
  perm_back = pd_transpose(pd_max_pool2d(xl, 1, SHAPE(3), &ol), 4, SHAPE(0, 3, 1, 2));
  expect_close(perm_back, pd_max_pool2d(x, 1, SHAPE(3), &o), 0, 0);
  expect_close(pd_transpose(pd_avg_pool2d(xl, 1, SHAPE(3), &ol), 4, SHAPE(0, 3, 1, 2)),
               pd_avg_pool2d(x, 1, SHAPE(3), &o), 1e-6, 1e-6);
  expect_close(pd_transpose(pd_adaptive_avg_pool2d(xl, 1, SHAPE(3), "NHWC"), 4, SHAPE(0, 3, 1, 2)),
               pd_adaptive_avg_pool2d(x, 1, SHAPE(3), NULL), 1e-6, 1e-6);
  pd_tensor *x1 = pd_randn(3, SHAPE(2, 9, 4), PD_FLOAT64); /* NLC */
  expect_close(
      pd_transpose(pd_avg_pool1d(x1, 1, SHAPE(2), &(pd_pool_opts){.data_format = "NLC"}), 3, SHAPE(0, 2, 1)),
      pd_avg_pool1d(pd_transpose(x1, 3, SHAPE(0, 2, 1)), 1, SHAPE(2), NULL), 1e-12, 1e-12);
  /* a non-contiguous view */
  pd_tensor *v = pd_transpose(xl, 4, SHAPE(0, 3, 1, 2));
  expect_close(pd_max_pool3d(pd_unsqueeze(v, 1, SHAPE(2)), 3, SHAPE(1, 2, 2), NULL),
               pd_unsqueeze(pd_max_pool2d(x, 1, SHAPE(2), NULL), 1, SHAPE(2)), 0, 0);
  /* float16 in, float16 out */
  pd_tensor *h = pd_avg_pool2d(pd_cast(x, PD_FLOAT16), 1, SHAPE(2), NULL);
  assert_int_equal(pd_tensor_dtype(h), PD_FLOAT16);
  expect_close(pd_cast(h, PD_FLOAT32),
               pd_avg_pool2d(pd_cast(pd_cast(x, PD_FLOAT16), PD_FLOAT32), 1, SHAPE(2), NULL), 1e-2, 1e-2);
  /* empty batch */
  expect_shape(pd_max_pool2d(pd_zeros(4, SHAPE(0, 3, 4, 4), PD_FLOAT32), 1, SHAPE(2), NULL), 4,
               SHAPE(0, 3, 2, 2));
  pd_scope_end();
  expect_no_live_tensors();
}

/* ---- gradients --------------------------------------------------------------- */

/* L = sum(pool(x) * r): autograd in dt against central differences of the reference. */
static void check_grads(const pcase *c, bool is_max, pd_dtype dt, double tol) {
  int64_t xs[5], ys[5], nx = numel_x(c, xs), ny = numel_y(c, ys);
  double *x = malloc(sizeof(double) * (size_t)nx), *r = malloc(sizeof(double) * (size_t)ny);
  double *y = malloc(sizeof(double) * (size_t)ny);
  /* distinct values, well apart, so no window has a near tie */
  for (int64_t i = 0; i < nx; i++)
    x[i] = (double)((i * 7919) % nx) / (double)nx + 0.01 * urand() / (double)nx;
  for (int64_t i = 0; i < ny; i++) r[i] = urand();
  pd_scope_begin();
  pd_tensor *tx = pd_tensor_from_f64(x, dt, c->nsp + 2, xs);
  pd_tensor_set_stop_gradient(tx, false);
  pd_tensor *L = pd_sum(
      pd_multiply(call_pool(c, is_max, tx, NULL), pd_tensor_from_f64(r, dt, c->nsp + 2, ys)), NULL, 0, false);
  assert_int_equal(pd_backward(L, NULL, false), PD_OK);
  pd_tensor *g = pd_tensor_grad(tx);
  assert_non_null(g);
  const double eps = 1e-7;
  for (int64_t e = 0; e < nx; e++) {
    double orig = x[e], lp = 0, lm = 0;
    x[e] = orig + eps;
    ref_pool(c, is_max, x, y, NULL);
    for (int64_t k = 0; k < ny; k++) lp += y[k] * r[k];
    x[e] = orig - eps;
    ref_pool(c, is_max, x, y, NULL);
    for (int64_t k = 0; k < ny; k++) lm += y[k] * r[k];
    x[e] = orig;
    double num = (lp - lm) / (2 * eps), ana = pd_tensor_item_at(g, e);
    if (!(fabs(num - ana) <= tol * (1 + fabs(num))))
      fail_msg("%s %dd %s element %lld: analytic %.8g, numeric %.8g", is_max ? "max" : "avg", c->nsp,
               pd_dtype_name(dt), (long long)e, ana, num);
  }
  pd_scope_end();
  free(x), free(r), free(y);
}

static void test_pool_grads_against_finite_differences(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof k_cases / sizeof *k_cases; i++) {
    if (k_cases[i].C > 8) continue;
    for (int m = 0; m < 2; m++) {
      check_grads(&k_cases[i], m == 0, PD_FLOAT64, 1e-6);
      check_grads(&k_cases[i], m == 0, PD_FLOAT32, 1e-6);
    }
  }
  expect_no_live_tensors();
}

/* y = max_pool(x) with disjoint windows, L = sum(y^2): dL/dx = 2x at each
 * window's maximum; M = sum(dL/dx * s) gives dM/dx = 2s at the maxima. */
static void test_pool_double_backward(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = T(PD_FLOAT64, 4, SHAPE(1, 1, 2, 4), 1, 5, 2, 0, 3, 4, 8, 7);
  pd_tensor *s = T(PD_FLOAT64, 4, SHAPE(1, 1, 2, 4), 1, 2, 3, 4, 5, 6, 7, 8);
  pd_tensor_set_stop_gradient(x, false);
  pd_tensor *L = pd_sum(pd_square(pd_max_pool2d(x, 1, SHAPE(2), NULL)), NULL, 0, false);
  pd_tensor *g = NULL, *gg = NULL;
  assert_int_equal(pd_grad(&L, 1, &x, 1, NULL, &(pd_grad_opts){.create_graph = true}, &g), PD_OK);
  EXPECT_VALUES(g, 1e-12, 0, 10, 0, 0, 0, 0, 16, 0);
  pd_tensor *M = pd_sum(pd_multiply(g, s), NULL, 0, false);
  assert_int_equal(pd_grad(&M, 1, &x, 1, NULL, NULL, &gg), PD_OK);
  EXPECT_VALUES(gg, 1e-12, 0, 4, 0, 0, 0, 0, 14, 0);
  /* avg: L = sum(avg(x)^2), dL/dx = 2 avg / 4 per window, dM/dx = (sum of s in the window) / 8 */
  pd_tensor *La = pd_sum(pd_square(pd_avg_pool2d(x, 1, SHAPE(2), NULL)), NULL, 0, false);
  pd_tensor *ga = NULL, *gga = NULL;
  assert_int_equal(pd_grad(&La, 1, &x, 1, NULL, &(pd_grad_opts){.create_graph = true}, &ga), PD_OK);
  EXPECT_VALUES(ga, 1e-12, 1.625, 1.625, 2.125, 2.125, 1.625, 1.625, 2.125, 2.125);
  pd_tensor *Ma = pd_sum(pd_multiply(ga, s), NULL, 0, false);
  assert_int_equal(pd_grad(&Ma, 1, &x, 1, NULL, NULL, &gga), PD_OK);
  EXPECT_VALUES(gga, 1e-12, 1.75, 1.75, 2.75, 2.75, 1.75, 1.75, 2.75, 2.75);
  pd_scope_end();
  expect_no_live_tensors();
}

/* ---- layers -------------------------------------------------------------------- */

static void test_pool_layers(void **state) {
  (void)state;
  pd_layer *mp = pd_nn_max_pool2d(1, SHAPE(2), &(pd_pool_opts){.return_mask = true});
  pd_layer *ap = pd_nn_avg_pool2d(
      1, SHAPE(3), &(pd_pool_opts){.n_stride = 1, .stride = {1}, .n_padding = 1, .padding = {1}});
  pd_layer *aap = pd_nn_adaptive_avg_pool2d(2, SHAPE(1, 1), NULL);
  pd_layer *amp = pd_nn_adaptive_max_pool1d(1, SHAPE(2), true);
  pd_layer *m3 = pd_nn_max_pool3d(1, SHAPE(2), NULL), *a1 = pd_nn_avg_pool1d(1, SHAPE(2), NULL);
  pd_layer *a3 = pd_nn_avg_pool3d(1, SHAPE(2), NULL), *m1 = pd_nn_max_pool1d(1, SHAPE(2), NULL);
  pd_layer *aa1 = pd_nn_adaptive_avg_pool1d(1, SHAPE(1)), *aa3 = pd_nn_adaptive_avg_pool3d(1, SHAPE(1), NULL);
  pd_layer *am2 = pd_nn_adaptive_max_pool2d(1, SHAPE(1), false),
           *am3 = pd_nn_adaptive_max_pool3d(1, SHAPE(1), false);
  char *r = pd_layer_to_string(ap);
  assert_string_equal(r, "AvgPool2D(kernel_size=3, stride=1, padding=1)");
  free(r);
  r = pd_layer_to_string(aap);
  assert_string_equal(r, "AdaptiveAvgPool2D(output_size=[1, 1])");
  free(r);
  pd_scope_begin();
  pd_tensor *x = T(PD_FLOAT32, 4, SHAPE(1, 1, 2, 4), 1, 5, 2, 0, 3, 4, 8, 7);
  pd_tensor *out[2];
  assert_int_equal(pd_layer_call(mp, &x, 1, out, 2), 2);
  EXPECT_VALUES(out[0], 0, 5, 8);
  EXPECT_VALUES(out[1], 0, 1, 6);
  expect_shape(pd_layer_call1(ap, x), 4, SHAPE(1, 1, 2, 4));
  EXPECT_VALUES(pd_layer_call1(aap, x), 1e-6, 3.75);
  pd_tensor *x1 = T(PD_FLOAT32, 3, SHAPE(1, 1, 4), 1, 5, 2, 0);
  assert_int_equal(pd_layer_call(amp, &x1, 1, out, 2), 2);
  EXPECT_VALUES(out[0], 0, 5, 2);
  EXPECT_VALUES(out[1], 0, 1, 2);
  EXPECT_VALUES(pd_layer_call1(m1, x1), 0, 5, 2);
  EXPECT_VALUES(pd_layer_call1(a1, x1), 1e-6, 3, 1);
  EXPECT_VALUES(pd_layer_call1(aa1, x1), 1e-6, 2);
  EXPECT_VALUES(pd_layer_call1(am2, x), 0, 8);
  pd_tensor *x3 = pd_ones(5, SHAPE(1, 2, 2, 2, 2), PD_FLOAT32);
  EXPECT_VALUES(pd_layer_call1(m3, x3), 0, 1, 1);
  EXPECT_VALUES(pd_layer_call1(a3, x3), 0, 1, 1);
  EXPECT_VALUES(pd_layer_call1(aa3, x3), 0, 1, 1);
  EXPECT_VALUES(pd_layer_call1(am3, x3), 0, 1, 1);
  pd_scope_end();
  pd_layer *layers[] = {mp, ap, aap, amp, m3, a1, a3, m1, aa1, aa3, am2, am3};
  for (size_t i = 0; i < sizeof layers / sizeof *layers; i++) pd_layer_release(layers[i]);
  assert_null(pd_nn_max_pool2d(3, SHAPE(1, 2, 3), NULL));
  assert_non_null(strstr(pd_last_error(), "MaxPool2D: kernel_size must have 1 or 2 values, got 3"));
  pd_clear_error();
  expect_no_live_tensors();
}

/* ---- bad inputs ---------------------------------------------------------------- */

static void test_pool_bad_inputs(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = pd_randn(4, SHAPE(1, 2, 3, 3), PD_FLOAT32);
  expect_error(pd_max_pool2d(x, 1, SHAPE(5), NULL), "max_pool2d",
               "kernel (5) on spatial dim 0 is larger than the padded input (3 + 0 + 0 = 3");
  expect_error(pd_avg_pool2d(x, 1, SHAPE(4), &(pd_pool_opts){.n_padding = 2, .padding = {0, 1}}),
               "avg_pool2d", "(3 + 0 + 0 = 3");
  expect_error(pd_max_pool2d(pd_randn(3, SHAPE(2, 3, 3), PD_FLOAT32), 1, SHAPE(2), NULL), "max_pool2d",
               "x must be a 4-D tensor (NCHW), got shape [2, 3, 3]");
  expect_error(pd_max_pool3d(x, 1, SHAPE(2), NULL), "max_pool3d", "5-D");
  expect_error(pd_max_pool2d(x, 3, SHAPE(2, 2, 2), NULL), "max_pool2d",
               "kernel_size must have 1 or 2 values, got 3");
  expect_error(pd_max_pool2d(x, 1, SHAPE(0), NULL), "max_pool2d", "kernel_size (0)");
  expect_error(pd_avg_pool2d(x, 1, SHAPE(2), &(pd_pool_opts){.n_stride = 1, .stride = {-1}}), "avg_pool2d",
               "stride (-1)");
  expect_error(pd_avg_pool2d(x, 1, SHAPE(2), &(pd_pool_opts){.n_padding = 3, .padding = {1, 1, 1}}),
               "avg_pool2d", "padding must have 1, 2 or 4 values, got 3");
  expect_error(
      pd_avg_pool2d(x, 1, SHAPE(2), &(pd_pool_opts){.padding_algorithm = "VALID", .ceil_mode = true}),
      "avg_pool2d", "ceil_mode must be false");
  pd_tensor *m = NULL;
  expect_error(pd_max_pool2d_with_mask(x, 1, SHAPE(2), &(pd_pool_opts){.data_format = "NHWC"}, &m),
               "max_pool2d", "return_mask needs data_format \"NCHW\"");
  assert_null(m);
  expect_error(pd_max_pool2d(x, 1, SHAPE(2), &(pd_pool_opts){.data_format = "NWHC"}), "max_pool2d",
               "\"NWHC\"");
  expect_error(pd_max_pool2d(pd_ones(4, SHAPE(1, 1, 4, 4), PD_INT64), 1, SHAPE(2), NULL), "max_pool2d",
               "int64");
  expect_error(pd_avg_pool2d(x, 1, SHAPE(2), &(pd_pool_opts){.divisor_override = -2}), "avg_pool2d",
               "divisor_override (-2)");
  expect_error(pd_adaptive_avg_pool2d(x, 3, SHAPE(1, 1, 1), NULL), "adaptive_avg_pool2d",
               "output_size must have 1 or 2 values, got 3");
  expect_error(pd_adaptive_max_pool1d(x, 1, SHAPE(2), NULL), "adaptive_max_pool1d", "3-D");
  expect_error(pd_max_pool2d(NULL, 1, SHAPE(2), NULL), "max_pool2d", "NULL");
  expect_error(pd_max_pool2d(x, 1, SHAPE(1), &(pd_pool_opts){.n_padding = 1, .padding = {-1}}), "max_pool2d",
               "padding -1");
  /* the grad ops check their inputs too */
  pd_tensor *mask = pd_zeros(4, SHAPE(1, 2, 2, 2), PD_INT64), *dy = pd_ones(4, SHAPE(1, 2, 1, 1), PD_FLOAT32);
  pd_attrs a = {.nv = {0, 0, 0, 2}, .v = {{0}, {0}, {0}, {3, 3}}};
  expect_error(pd_dispatch1(PD_OP_max_pool_grad, (pd_tensor *[]){mask, dy}, 2, &a), "max_pool_grad",
               "mask of shape [1, 2, 2, 2] does not match grad_out of shape [1, 2, 1, 1]");
  expect_error(pd_dispatch1(PD_OP_max_pool_gather, (pd_tensor *[]){dy, dy}, 2, NULL), "max_pool_gather",
               "mask must be an int32 or int64 tensor");
  expect_error(pd_dispatch1(PD_OP_avg_pool_grad, &dy, 1, &a), "avg_pool_grad", "expects 2 kernel sizes");
  pd_scope_end();
  pd_clear_error();
  expect_no_live_tensors();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pool_values_against_reference),
      cmocka_unit_test(test_pool_hand_values),
      cmocka_unit_test(test_pool_layouts_and_dtypes),
      cmocka_unit_test(test_pool_grads_against_finite_differences),
      cmocka_unit_test(test_pool_double_backward),
      cmocka_unit_test(test_pool_layers),
      cmocka_unit_test(test_pool_bad_inputs),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
