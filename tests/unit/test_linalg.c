/* Linear algebra: matmul (flags, vectors, broadcasting, views), mm, bmm, mv,
 * dot, addmm, t, einsum. Expected values come from a naive triple loop in
 * double written here, independent of the GEMM code under test. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/op_registry.h"
#include "test_util.h"

/* ---- reference --------------------------------------------------------------- */

/* Deterministic values in [-1, 1) of dtype dt. */
static pd_tensor *rnd(pd_dtype dt, int nd, const int64_t *shape, unsigned seed) {
  int64_t n = 1;
  for (int d = 0; d < nd; d++) n *= shape[d];
  double *v = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
  uint32_t s = seed * 2654435761u + 12345u;
  for (int64_t i = 0; i < n; i++) {
    s = s * 1664525u + 1013904223u;
    v[i] = (double)(s >> 8) / 8388608.0 - 1.0;
  }
  pd_tensor *t = pd_tensor_from_f64(v, dt, nd, shape);
  free(v);
  return t;
}

/* out = op(x) @ op(y) with Paddle's rules, by index arithmetic in double;
 * returns the output tensor (float64). */
static pd_tensor *ref_matmul(const pd_tensor *x, const pd_tensor *y, bool tx, bool ty) {
  int xn = pd_tensor_ndim(x), yn = pd_tensor_ndim(y);
  const int64_t *xs = pd_tensor_shape(x), *ys = pd_tensor_shape(y);
  int64_t xr, xc, yr, yc;
  if (xn == 1)
    xr = 1, xc = xs[0], tx = false;
  else
    xr = xs[xn - 2], xc = xs[xn - 1];
  if (yn == 1)
    yr = ys[0], yc = 1, ty = false;
  else
    yr = ys[yn - 2], yc = ys[yn - 1];
  int64_t M = tx ? xc : xr, K = tx ? xr : xc, N = ty ? yr : yc;
  assert_int_equal(K, ty ? yc : yr);
  int bx = xn > 2 ? xn - 2 : 0, by = yn > 2 ? yn - 2 : 0, nb = bx > by ? bx : by;
  int64_t bshape[PD_MAX_DIMS], batch = 1;
  for (int d = 0; d < nb; d++) {
    int64_t a = d - (nb - bx) >= 0 ? xs[d - (nb - bx)] : 1, b = d - (nb - by) >= 0 ? ys[d - (nb - by)] : 1;
    bshape[d] = a > b ? a : b;
    batch *= bshape[d];
  }
  int64_t oshape[PD_MAX_DIMS];
  int on = 0;
  for (int d = 0; d < nb; d++) oshape[on++] = bshape[d];
  if (xn > 1) oshape[on++] = M;
  if (yn > 1) oshape[on++] = N;
  double *o = calloc((size_t)(batch * M * N > 0 ? batch * M * N : 1), sizeof(double));
  for (int64_t b = 0; b < batch; b++) {
    int64_t idx[PD_MAX_DIMS], r = b;
    for (int d = nb - 1; d >= 0; d--) {
      idx[d] = r % bshape[d];
      r /= bshape[d];
    }
    int64_t xo = 0, yo = 0; /* logical row-major offsets of the batch's matrix */
    for (int d = 0; d < bx; d++) xo = xo * xs[d] + (xs[d] == 1 ? 0 : idx[d + nb - bx]);
    for (int d = 0; d < by; d++) yo = yo * ys[d] + (ys[d] == 1 ? 0 : idx[d + nb - by]);
    xo *= xr * xc;
    yo *= yr * yc;
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < N; j++) {
        double s = 0;
        for (int64_t k = 0; k < K; k++) {
          double a = pd_tensor_item_at(x, xo + (tx ? k * xc + i : i * xc + k));
          double c = pd_tensor_item_at(y, yo + (ty ? j * yc + k : k * yc + j));
          s += a * c;
        }
        o[(b * M + i) * N + j] = s;
      }
  }
  pd_tensor *t = pd_tensor_from_f64(o, PD_FLOAT64, on, oshape);
  free(o);
  return t;
}

static void check_matmul(pd_tensor *x, pd_tensor *y, bool tx, bool ty, double tol) {
  pd_tensor *got = pd_matmul(x, y, tx, ty);
  pd_tensor *want = ref_matmul(x, y, tx, ty);
  if (!got) fail_msg("matmul failed: %s", pd_last_error());
  assert_int_equal(pd_tensor_dtype(got), pd_tensor_dtype(x));
  expect_close(got, want, tol, tol);
}

/* ---- matmul ------------------------------------------------------------------ */

static void test_matmul_hand_values(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = T(PD_FLOAT32, 2, SHAPE(2, 3), 1, 2, 3, 4, 5, 6);
  pd_tensor *y = T(PD_FLOAT32, 2, SHAPE(3, 2), 7, 8, 9, 10, 11, 12);
  pd_tensor *z = pd_matmul(x, y, false, false);
  expect_shape(z, 2, SHAPE(2, 2));
  EXPECT_VALUES(z, 0, 58, 64, 139, 154);
  /* x^T y^T: [3,2] x [2,3] */
  pd_tensor *w = pd_matmul(x, y, true, true);
  expect_shape(w, 2, SHAPE(3, 3));
  EXPECT_VALUES(w, 0, 39, 49, 59, 54, 68, 82, 69, 87, 105);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_matmul_against_reference(void **state) {
  (void)state;
  pd_scope_begin();
  for (int dt = 0; dt < 2; dt++) {
    pd_dtype d = dt ? PD_FLOAT64 : PD_FLOAT32;
    double tol = dt ? 1e-12 : 1e-5;
    check_matmul(rnd(d, 2, SHAPE(5, 7), 1), rnd(d, 2, SHAPE(7, 3), 2), false, false, tol);
    /* every transpose flag */
    check_matmul(rnd(d, 2, SHAPE(7, 5), 3), rnd(d, 2, SHAPE(7, 3), 4), true, false, tol);
    check_matmul(rnd(d, 2, SHAPE(5, 7), 5), rnd(d, 2, SHAPE(3, 7), 6), false, true, tol);
    check_matmul(rnd(d, 2, SHAPE(7, 5), 7), rnd(d, 2, SHAPE(3, 7), 8), true, true, tol);
    /* batched, flags on batches */
    check_matmul(rnd(d, 3, SHAPE(3, 6, 5), 9), rnd(d, 3, SHAPE(3, 4, 6), 10), true, true, tol);
    /* sizes across the blocking of the float64 kernel and oneDNN's threads */
    check_matmul(rnd(d, 2, SHAPE(70, 300), 11), rnd(d, 2, SHAPE(300, 260), 12), false, false,
                 dt ? 1e-11 : 1e-4);
    check_matmul(rnd(d, 2, SHAPE(300, 70), 13), rnd(d, 2, SHAPE(260, 300), 14), true, true,
                 dt ? 1e-11 : 1e-4);
    check_matmul(rnd(d, 2, SHAPE(67, 261), 23), rnd(d, 2, SHAPE(131, 261), 24), false, true,
                 dt ? 1e-11 : 1e-4);
    check_matmul(rnd(d, 2, SHAPE(261, 67), 25), rnd(d, 2, SHAPE(261, 131), 26), true, false,
                 dt ? 1e-11 : 1e-4);
    /* a weight shared by a batch (folded into one GEMM), with and without ty */
    check_matmul(rnd(d, 3, SHAPE(4, 33, 20), 15), rnd(d, 2, SHAPE(20, 9), 16), false, false, tol);
    check_matmul(rnd(d, 3, SHAPE(4, 33, 20), 17), rnd(d, 2, SHAPE(9, 20), 18), false, true, tol);
    check_matmul(rnd(d, 3, SHAPE(4, 20, 33), 19), rnd(d, 2, SHAPE(20, 9), 20), true, false, tol);
    /* a shared left operand */
    check_matmul(rnd(d, 2, SHAPE(6, 5), 21), rnd(d, 3, SHAPE(3, 5, 4), 22), false, false, tol);
  }
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_matmul_vectors(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *u = T(PD_FLOAT64, 1, SHAPE(3), 1, 2, 3), *v = T(PD_FLOAT64, 1, SHAPE(3), 4, 5, 6);
  pd_tensor *s = pd_matmul(u, v, false, false);
  expect_shape(s, 0, NULL);
  EXPECT_VALUES(s, 0, 32);
  /* flags do nothing to vectors */
  EXPECT_VALUES(pd_matmul(u, v, true, true), 0, 32);
  pd_tensor *m = T(PD_FLOAT64, 2, SHAPE(3, 2), 1, 2, 3, 4, 5, 6);
  pd_tensor *vm = pd_matmul(u, m, false, false); /* [3] x [3,2] -> [2] */
  expect_shape(vm, 1, SHAPE(2));
  EXPECT_VALUES(vm, 0, 22, 28);
  pd_tensor *mv = pd_matmul(m, u, true, false); /* [2,3] x [3] -> [2] */
  expect_shape(mv, 1, SHAPE(2));
  EXPECT_VALUES(mv, 0, 22, 28);
  /* batched matrix times a vector, and a vector times a batch */
  pd_tensor *b = rnd(PD_FLOAT32, 3, SHAPE(4, 5, 3), 30);
  pd_tensor *u32 = rnd(PD_FLOAT32, 1, SHAPE(3), 31), *w32 = rnd(PD_FLOAT32, 1, SHAPE(5), 32);
  pd_tensor *bu = pd_matmul(b, u32, false, false);
  expect_shape(bu, 2, SHAPE(4, 5));
  expect_close(bu, ref_matmul(b, u32, false, false), 1e-5, 1e-5);
  pd_tensor *wb = pd_matmul(w32, b, false, false);
  expect_shape(wb, 2, SHAPE(4, 3));
  expect_close(wb, ref_matmul(w32, b, false, false), 1e-5, 1e-5);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_matmul_broadcast_batch(void **state) {
  (void)state;
  pd_scope_begin();
  for (int dt = 0; dt < 2; dt++) {
    pd_dtype d = dt ? PD_FLOAT64 : PD_FLOAT32;
    pd_tensor *x = rnd(d, 4, SHAPE(2, 1, 3, 4), 40), *y = rnd(d, 3, SHAPE(5, 4, 2), 41);
    pd_tensor *z = pd_matmul(x, y, false, false);
    expect_shape(z, 4, SHAPE(2, 5, 3, 2));
    expect_close(z, ref_matmul(x, y, false, false), 1e-5, 1e-5);
    /* broadcast with transpose flags and a size-1 batch on the other side */
    pd_tensor *a = rnd(d, 4, SHAPE(1, 3, 4, 2), 42);
    pd_tensor *c = rnd(d, 4, SHAPE(2, 1, 5, 4), 44);
    pd_tensor *r = pd_matmul(a, c, true, true);
    expect_shape(r, 4, SHAPE(2, 3, 2, 5));
    expect_close(r, ref_matmul(a, c, true, true), 1e-5, 1e-5);
  }
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_matmul_noncontiguous(void **state) {
  (void)state;
  pd_scope_begin();
  for (int dt = 0; dt < 2; dt++) {
    pd_dtype d = dt ? PD_FLOAT64 : PD_FLOAT32;
    /* a transposed view: its columns are unit-stride */
    pd_tensor *xt = pd_transpose(rnd(d, 2, SHAPE(6, 4), 50), 2, SHAPE(1, 0)); /* [4, 6] */
    assert_false(pd_tensor_is_contiguous(xt));
    pd_tensor *y = rnd(d, 2, SHAPE(6, 3), 51);
    expect_close(pd_matmul(xt, y, false, false), ref_matmul(xt, y, false, false), 1e-5, 1e-5);
    expect_close(pd_matmul(y, xt, true, true), ref_matmul(y, xt, true, true), 1e-5, 1e-5);
    /* a batched transposed view on the right */
    pd_tensor *bt = pd_transpose(rnd(d, 3, SHAPE(2, 5, 6), 52), 3, SHAPE(0, 2, 1)); /* [2, 6, 5] */
    pd_tensor *lhs = rnd(d, 3, SHAPE(2, 3, 6), 53);
    expect_close(pd_matmul(lhs, bt, false, false), ref_matmul(lhs, bt, false, false), 1e-5, 1e-5);
    expect_close(pd_matmul(bt, lhs, true, true), ref_matmul(bt, lhs, true, true), 1e-5, 1e-5);
    /* a permuted batch (batch dim not outermost in memory) */
    pd_tensor *pb = pd_transpose(rnd(d, 3, SHAPE(3, 2, 4), 54), 3, SHAPE(1, 0, 2)); /* [2, 3, 4] */
    pd_tensor *r4 = rnd(d, 3, SHAPE(2, 4, 5), 55);
    expect_close(pd_matmul(pb, r4, false, false), ref_matmul(pb, r4, false, false), 1e-5, 1e-5);
    /* a broadcast (zero-stride rows) view is copied first */
    pd_tensor *ex = pd_expand(rnd(d, 2, SHAPE(1, 6), 56), 2, SHAPE(4, 6));
    expect_close(pd_matmul(ex, y, false, false), ref_matmul(ex, y, false, false), 1e-5, 1e-5);
    /* a strided vector (every other element of a buffer) on either side */
    pd_tensor *buf = rnd(d, 1, SHAPE(12), 58);
    pd_tensor *sv = pd_tensor_new_view(buf, 1, SHAPE(6), SHAPE(2), 1);
    pd_tensor *m6 = pd_transpose(rnd(d, 2, SHAPE(6, 6), 59), 2, SHAPE(1, 0));
    expect_close(pd_matmul(m6, sv, false, false), ref_matmul(m6, sv, false, false), 1e-5, 1e-5);
    expect_close(pd_matmul(sv, m6, false, false), ref_matmul(sv, m6, false, false), 1e-5, 1e-5);
    expect_close(pd_matmul(sv, sv, false, false), ref_matmul(sv, sv, false, false), 1e-5, 1e-5);
    expect_close(pd_dot(sv, sv), ref_matmul(sv, sv, false, false), 1e-5, 1e-5);
  }
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_matmul_view_not_copied(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *base = rnd(PD_FLOAT32, 2, SHAPE(256, 128), 60);
  pd_tensor *xt = pd_transpose(base, 2, SHAPE(1, 0)); /* [128, 256] */
  pd_tensor *y = rnd(PD_FLOAT32, 2, SHAPE(256, 8), 61);
  pd_memory_reset_peak();
  size_t before = pd_memory_allocated();
  pd_tensor *z = pd_matmul(xt, y, false, false);
  /* the peak grew by the output only (a copy of x would add 128 KiB) */
  assert_true(pd_memory_peak() - before < 128 * 256 * sizeof(float));
  expect_close(z, ref_matmul(xt, y, false, false), 1e-4, 1e-4);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_matmul_empty_and_half(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *z =
      pd_matmul(pd_zeros(2, SHAPE(0, 3), PD_FLOAT32), pd_ones(2, SHAPE(3, 4), PD_FLOAT32), false, false);
  expect_shape(z, 2, SHAPE(0, 4));
  /* K = 0: a sum over nothing */
  pd_tensor *k0 =
      pd_matmul(pd_ones(2, SHAPE(2, 0), PD_FLOAT64), pd_ones(2, SHAPE(0, 3), PD_FLOAT64), false, false);
  expect_shape(k0, 2, SHAPE(2, 3));
  EXPECT_VALUES(k0, 0, 0, 0, 0, 0, 0, 0);
  /* float16 and bfloat16 compute in float32 and come back in their dtype */
  pd_tensor *x = T(PD_FLOAT16, 2, SHAPE(2, 2), 1, 2, 3, 4),
            *y = T(PD_FLOAT16, 2, SHAPE(2, 2), 0.5, 1, 1.5, 2);
  pd_tensor *h = pd_matmul(x, y, false, false);
  assert_int_equal(pd_tensor_dtype(h), PD_FLOAT16);
  EXPECT_VALUES(h, 0, 3.5, 5, 7.5, 11);
  pd_tensor *bx = pd_cast(x, PD_BFLOAT16), *by = pd_cast(y, PD_BFLOAT16);
  pd_tensor *hb = pd_matmul(bx, by, false, true);
  assert_int_equal(pd_tensor_dtype(hb), PD_BFLOAT16);
  EXPECT_VALUES(hb, 0, 2.5, 5.5, 5.5, 12.5);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_matmul_errors(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *a = pd_ones(2, SHAPE(3, 10), PD_FLOAT32), *b = pd_ones(2, SHAPE(5, 4), PD_FLOAT32);
  expect_error(pd_matmul(a, b, false, false), "matmul: x.shape[1] (10) != y.shape[0] (5)", "[3, 10]");
  expect_error(pd_matmul(a, b, false, false), "matmul", "[5, 4]");
  /* with flags, the contracted dims are the ones named */
  expect_error(pd_matmul(a, b, true, true), "x.shape[0] (3) != y.shape[1] (4)", "transpose_x=true");
  /* batch dims that do not broadcast */
  expect_error(
      pd_matmul(pd_ones(3, SHAPE(2, 3, 4), PD_FLOAT32), pd_ones(3, SHAPE(3, 4, 5), PD_FLOAT32), false, false),
      "matmul: batch dims", "x.shape[0] (2) vs y.shape[0] (3)");
  /* vectors */
  expect_error(pd_matmul(pd_ones(1, SHAPE(3), PD_FLOAT32), pd_ones(1, SHAPE(4), PD_FLOAT32), false, false),
               "matmul: x.shape[0] (3) != y.shape[0] (4)", NULL);
  /* 0-D, integer and mixed dtypes */
  expect_error(pd_matmul(pd_ones(0, NULL, PD_FLOAT32), b, false, false), "matmul", "at least 1 dim");
  expect_error(pd_matmul(pd_ones(2, SHAPE(2, 2), PD_INT32), pd_ones(2, SHAPE(2, 2), PD_INT32), false, false),
               "matmul", "int32");
  expect_error(
      pd_matmul(pd_ones(2, SHAPE(2, 2), PD_FLOAT32), pd_ones(2, SHAPE(2, 2), PD_FLOAT64), false, false),
      "matmul", "float64");
  expect_error(pd_matmul(NULL, b, false, false), "matmul", "NULL");
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_matmul_flops(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = pd_ones(3, SHAPE(4, 5, 6), PD_FLOAT32), *y = pd_ones(2, SHAPE(6, 7), PD_FLOAT32);
  pd_tensor *in[2] = {x, y};
  pd_attrs a = {0};
  pd_meta m;
  int n = 1;
  const pd_op_def *def = pd_op_table[PD_OP_matmul];
  assert_int_equal(def->infer_meta(def, in, 2, &a, &m, &n), PD_OK);
  assert_true(fabs(def->flops(in, 2, &a, &m, 1) - 2.0 * 5 * 7 * 6 * 4) < 1e-9);
  a.i[0] = 1; /* x^T: M = 6, K = 5 */
  pd_tensor *y2 = pd_ones(2, SHAPE(5, 7), PD_FLOAT32);
  in[1] = y2;
  assert_int_equal(def->infer_meta(def, in, 2, &a, &m, &n), PD_OK);
  assert_true(fabs(def->flops(in, 2, &a, &m, 1) - 2.0 * 6 * 7 * 5 * 4) < 1e-9);
  pd_scope_end();
  expect_no_live_tensors();
}

/* ---- mm, bmm, mv, dot, addmm, t ---------------------------------------------- */

static void test_mm_bmm_mv(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = rnd(PD_FLOAT32, 2, SHAPE(4, 6), 70), *y = rnd(PD_FLOAT32, 2, SHAPE(6, 3), 71);
  expect_close(pd_mm(x, y), ref_matmul(x, y, false, false), 1e-5, 1e-5);
  pd_tensor *bx = rnd(PD_FLOAT64, 3, SHAPE(3, 4, 6), 72), *by = rnd(PD_FLOAT64, 3, SHAPE(3, 6, 2), 73);
  pd_tensor *b = pd_bmm(bx, by);
  expect_shape(b, 3, SHAPE(3, 4, 2));
  expect_close(b, ref_matmul(bx, by, false, false), 1e-12, 1e-12);
  pd_tensor *v = rnd(PD_FLOAT32, 1, SHAPE(6), 74);
  pd_tensor *mv = pd_mv(x, v);
  expect_shape(mv, 1, SHAPE(4));
  expect_close(mv, ref_matmul(x, v, false, false), 1e-5, 1e-5);
  /* errors name the op and the shapes */
  expect_error(pd_bmm(x, y), "bmm: x and y must be 3-D", "[4, 6]");
  expect_error(pd_bmm(bx, rnd(PD_FLOAT64, 3, SHAPE(2, 6, 2), 75)), "bmm: x.shape[0] (3) != y.shape[0] (2)",
               NULL);
  expect_error(pd_bmm(bx, rnd(PD_FLOAT64, 3, SHAPE(3, 5, 2), 76)), "bmm: x.shape[2] (6) != y.shape[1] (5)",
               NULL);
  expect_error(pd_mv(x, rnd(PD_FLOAT32, 1, SHAPE(5), 77)), "mv: x.shape[1] (6) != vec.shape[0] (5)", NULL);
  expect_error(pd_mv(x, y), "mv: x must be 2-D and vec 1-D", "[6, 3]");
  expect_error(pd_mm(x, x), "mm: x.shape[1] (6) != y.shape[0] (4)", NULL);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_dot(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *u = T(PD_FLOAT32, 1, SHAPE(3), 1, 2, 3), *v = T(PD_FLOAT32, 1, SHAPE(3), 4, -5, 6);
  pd_tensor *d = pd_dot(u, v);
  expect_shape(d, 0, NULL);
  EXPECT_VALUES(d, 0, 12);
  pd_tensor *x = T(PD_FLOAT64, 2, SHAPE(2, 3), 1, 2, 3, 4, 5, 6),
            *y = T(PD_FLOAT64, 2, SHAPE(2, 3), 1, 0, -1, 2, 2, 2);
  pd_tensor *r = pd_dot(x, y);
  expect_shape(r, 1, SHAPE(2));
  EXPECT_VALUES(r, 0, -2, 30);
  /* transposed views row-wise, and a long vector over the parallel path */
  pd_tensor *xt = pd_transpose(T(PD_FLOAT64, 2, SHAPE(3, 2), 1, 4, 2, 5, 3, 6), 2, SHAPE(1, 0));
  EXPECT_VALUES(pd_dot(xt, y), 0, -2, 30);
  pd_tensor *big = pd_ones(1, SHAPE(100000), PD_FLOAT64);
  EXPECT_VALUES(pd_dot(big, big), 0, 100000);
  expect_error(pd_dot(pd_cast(u, PD_FLOAT64), x), "dot: x and y must both be 1-D or both 2-D", "[2, 3]");
  expect_error(pd_dot(u, x), "dot: x and y must have the same dtype", "float64");
  expect_error(pd_dot(u, T(PD_FLOAT32, 1, SHAPE(2), 1, 2)), "dot: x.shape[0] (3) != y.shape[0] (2)", NULL);
  expect_error(pd_dot(pd_ones(1, SHAPE(2), PD_INT64), pd_ones(1, SHAPE(2), PD_INT64)), "dot", "int64");
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_addmm(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = rnd(PD_FLOAT32, 2, SHAPE(3, 4), 80), *y = rnd(PD_FLOAT32, 2, SHAPE(4, 5), 81);
  pd_tensor *inp = rnd(PD_FLOAT32, 1, SHAPE(5), 82);
  pd_tensor *r = pd_addmm(inp, x, y, 0.5, 2.0);
  expect_shape(r, 2, SHAPE(3, 5));
  pd_tensor *xy = ref_matmul(x, y, false, false);
  for (int64_t i = 0; i < 15; i++) {
    double want = 0.5 * pd_tensor_item_at(inp, i % 5) + 2.0 * pd_tensor_item_at(xy, i);
    assert_true(fabs(pd_tensor_item_at(r, i) - want) < 1e-5);
  }
  /* a column input [3, 1], default beta = alpha = 1 */
  pd_tensor *colin = T(PD_FLOAT64, 2, SHAPE(2, 1), 10, 20);
  pd_tensor *a = T(PD_FLOAT64, 2, SHAPE(2, 2), 1, 2, 3, 4), *b = T(PD_FLOAT64, 2, SHAPE(2, 2), 1, 0, 0, 1);
  EXPECT_VALUES(pd_addmm(colin, a, b, 1, 1), 0, 11, 12, 23, 24);
  /* beta = 0 ignores the input */
  EXPECT_VALUES(pd_addmm(colin, a, b, 0, 3), 0, 3, 6, 9, 12);
  expect_error(pd_addmm(T(PD_FLOAT64, 1, SHAPE(3), 1, 2, 3), a, b, 1, 1), "addmm: input of shape [3]",
               "[2, 2]");
  expect_error(pd_addmm(colin, a, T(PD_FLOAT64, 2, SHAPE(3, 1), 1, 2, 3), 1, 1),
               "addmm: x.shape[1] (2) != y.shape[0] (3)", NULL);
  expect_error(pd_addmm(colin, pd_ones(3, SHAPE(1, 2, 2), PD_FLOAT64), b, 1, 1), "addmm: x and y must be 2-D",
               "[1, 2, 2]");
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_t(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = T(PD_FLOAT32, 2, SHAPE(2, 3), 1, 2, 3, 4, 5, 6);
  pd_tensor *xt = pd_t(x);
  expect_shape(xt, 2, SHAPE(3, 2));
  EXPECT_VALUES(xt, 0, 1, 4, 2, 5, 3, 6);
  assert_true(pd_tensor_shares_storage(x, xt));
  pd_tensor *v = pd_t(T(PD_FLOAT32, 1, SHAPE(3), 1, 2, 3));
  expect_shape(v, 1, SHAPE(3));
  EXPECT_VALUES(v, 0, 1, 2, 3);
  expect_shape(pd_t(pd_ones(0, NULL, PD_INT64)), 0, NULL);
  expect_error(pd_t(pd_ones(3, SHAPE(2, 3, 4), PD_FLOAT32)), "t: input must have rank <= 2", "[2, 3, 4]");
  pd_scope_end();
  expect_no_live_tensors();
}

/* ---- autograd ---------------------------------------------------------------- */

static void test_matmul_grad_values_and_double_backward(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = rnd(PD_FLOAT64, 2, SHAPE(3, 4), 90), *y = rnd(PD_FLOAT64, 2, SHAPE(4, 2), 91);
  pd_tensor_set_stop_gradient(x, false);
  pd_tensor_set_stop_gradient(y, false);
  /* f = sum(x @ y): df/dx[i,k] = sum_j y[k,j] */
  pd_tensor *f = pd_sum(pd_matmul(x, y, false, false), NULL, 0, false);
  pd_tensor *gx = NULL;
  assert_int_equal(pd_grad(&f, 1, &x, 1, NULL, &(pd_grad_opts){.create_graph = true}, &gx), PD_OK);
  for (int i = 0; i < 3; i++)
    for (int k = 0; k < 4; k++) {
      double s = pd_tensor_item_at(y, k * 2) + pd_tensor_item_at(y, k * 2 + 1);
      assert_true(fabs(pd_tensor_item_at(gx, i * 4 + k) - s) < 1e-12);
    }
  /* h = sum(gx * x) = sum_{i,k} x[i,k] sum_j y[k,j]: dh/dy[k,j] = sum_i x[i,k] */
  pd_tensor *h = pd_sum(pd_multiply(gx, x), NULL, 0, false);
  pd_tensor *gy = NULL;
  assert_int_equal(pd_grad(&h, 1, &y, 1, NULL, NULL, &gy), PD_OK);
  for (int k = 0; k < 4; k++)
    for (int j = 0; j < 2; j++) {
      double s = 0;
      for (int i = 0; i < 3; i++) s += pd_tensor_item_at(x, i * 4 + k);
      assert_true(fabs(pd_tensor_item_at(gy, k * 2 + j) - s) < 1e-12);
    }
  /* float32 backward through a broadcast batch reduces to the input shapes */
  pd_tensor *a = rnd(PD_FLOAT32, 4, SHAPE(2, 1, 3, 4), 92), *b = rnd(PD_FLOAT32, 3, SHAPE(5, 4, 2), 93);
  pd_tensor_set_stop_gradient(a, false);
  pd_tensor_set_stop_gradient(b, false);
  assert_int_equal(pd_backward(pd_sum(pd_matmul(a, b, false, false), NULL, 0, false), NULL, false), PD_OK);
  expect_shape(pd_tensor_grad(a), 4, SHAPE(2, 1, 3, 4));
  expect_shape(pd_tensor_grad(b), 3, SHAPE(5, 4, 2));
  /* d/da = sum over the 5 batches and 2 columns of b */
  for (int k = 0; k < 4; k++) {
    double s = 0;
    for (int bb = 0; bb < 5; bb++)
      for (int j = 0; j < 2; j++) s += pd_tensor_item_at(b, bb * 8 + k * 2 + j);
    assert_true(fabs(pd_tensor_item_at(pd_tensor_grad(a), k) - s) < 1e-4);
  }
  pd_scope_end();
  expect_no_live_tensors();
}

/* ---- einsum ------------------------------------------------------------------ */

static pd_tensor *ein2(const char *eq, pd_tensor *a, pd_tensor *b) {
  pd_tensor *ops[2] = {a, b};
  return pd_einsum(eq, b ? 2 : 1, ops);
}

static void test_einsum_forms(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *a = rnd(PD_FLOAT64, 2, SHAPE(3, 4), 100), *b = rnd(PD_FLOAT64, 2, SHAPE(4, 5), 101);
  expect_close(ein2("ij,jk->ik", a, b), ref_matmul(a, b, false, false), 1e-12, 1e-12);
  expect_close(ein2("ij,jk", a, b), ref_matmul(a, b, false, false), 1e-12, 1e-12); /* implicit */
  expect_close(ein2(" ij , jk -> ki ", a, b), pd_transpose(ref_matmul(a, b, false, false), 2, SHAPE(1, 0)),
               1e-12, 1e-12);
  expect_close(ein2("ij->ji", a, NULL), pd_transpose(a, 2, SHAPE(1, 0)), 0, 0);
  expect_close(ein2("ij->i", a, NULL), pd_sum(a, SHAPE(1), 1, false), 1e-12, 1e-12);
  expect_close(ein2("ij->", a, NULL), pd_sum(a, NULL, 0, false), 1e-12, 1e-12);
  expect_close(ein2("ji", a, NULL), pd_transpose(a, 2, SHAPE(1, 0)), 0, 0); /* implicit: sorted labels */
  pd_tensor *u = rnd(PD_FLOAT64, 1, SHAPE(6), 102), *v = rnd(PD_FLOAT64, 1, SHAPE(6), 103);
  pd_tensor *uv = ein2("i,i->", u, v);
  expect_shape(uv, 0, NULL);
  expect_close(uv, ref_matmul(u, v, false, false), 1e-12, 1e-12);
  /* outer product */
  pd_tensor *outer = ein2("i,j->ij", u, v);
  expect_shape(outer, 2, SHAPE(6, 6));
  EXPECT_VALUES(pd_reshape(pd_sum(outer, NULL, 0, false), 0, NULL), 1e-12,
                pd_tensor_item(pd_sum(u, NULL, 0, false)) * pd_tensor_item(pd_sum(v, NULL, 0, false)));
  /* batched */
  pd_tensor *x = rnd(PD_FLOAT32, 3, SHAPE(2, 3, 4), 104), *y = rnd(PD_FLOAT32, 3, SHAPE(2, 4, 5), 105);
  expect_close(ein2("bij,bjk->bik", x, y), ref_matmul(x, y, false, false), 1e-5, 1e-5);
  /* attention: q k^T and p v */
  pd_tensor *q = rnd(PD_FLOAT32, 4, SHAPE(2, 3, 5, 4), 106), *k = rnd(PD_FLOAT32, 4, SHAPE(2, 3, 7, 4), 107);
  pd_tensor *s = ein2("bhqd,bhkd->bhqk", q, k);
  expect_shape(s, 4, SHAPE(2, 3, 5, 7));
  expect_close(s, ref_matmul(q, k, false, true), 1e-5, 1e-5);
  pd_tensor *vv = rnd(PD_FLOAT32, 4, SHAPE(2, 3, 7, 4), 108);
  pd_tensor *o = ein2("bhqk,bhkd->bhqd", s, vv);
  expect_close(o, ref_matmul(s, vv, false, false), 1e-5, 1e-5);
  /* ellipsis with broadcasting batch dims */
  pd_tensor *e1 = rnd(PD_FLOAT64, 4, SHAPE(2, 1, 3, 4), 109), *e2 = rnd(PD_FLOAT64, 3, SHAPE(5, 4, 2), 110);
  pd_tensor *ee = ein2("...ij,...jk->...ik", e1, e2);
  expect_shape(ee, 4, SHAPE(2, 5, 3, 2));
  expect_close(ee, ref_matmul(e1, e2, false, false), 1e-12, 1e-12);
  expect_close(ein2("...ij,...jk", e1, e2), ref_matmul(e1, e2, false, false), 1e-12, 1e-12);
  /* ellipsis on one operand only, and ellipsis at the end of a term */
  pd_tensor *w4 = rnd(PD_FLOAT64, 4, SHAPE(2, 3, 4, 5), 113), *w2 = rnd(PD_FLOAT64, 2, SHAPE(5, 6), 114);
  pd_tensor *ew = ein2("...ij,jk->...ik", w4, w2);
  expect_shape(ew, 4, SHAPE(2, 3, 4, 6));
  expect_close(ew, ref_matmul(w4, w2, false, false), 1e-12, 1e-12);
  expect_close(ein2("i...->...i", w4, NULL), pd_transpose(w4, 4, SHAPE(1, 2, 3, 0)), 0, 0);
  /* broadcast dims summed away when the output leaves out '...' */
  expect_close(ein2("...ij,...jk->ik", e1, e2),
               pd_sum(ref_matmul(e1, e2, false, false), SHAPE(0, 1), 2, false), 1e-12, 1e-12);
  /* a label summed on one side only, then contracted: sum_j,k a[i,j] c[j,k] */
  pd_tensor *sk = ein2("ij,jk->i", a, b);
  expect_close(sk, pd_sum(ref_matmul(a, b, false, false), SHAPE(1), 1, false), 1e-12, 1e-12);
  /* transposed operand arrangement: x^T y via "ji,jk->ik" */
  pd_tensor *at = rnd(PD_FLOAT64, 2, SHAPE(4, 3), 111);
  expect_close(ein2("ji,jk->ik", at, b), ref_matmul(at, b, true, false), 1e-12, 1e-12);
  /* three operands */
  pd_tensor *c3 = rnd(PD_FLOAT64, 2, SHAPE(5, 2), 112);
  pd_tensor *ops3[3] = {a, b, c3};
  expect_close(pd_einsum("ij,jk,kl->il", 3, ops3),
               ref_matmul(ref_matmul(a, b, false, false), c3, false, false), 1e-12, 1e-12);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_einsum_grad(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *q = rnd(PD_FLOAT64, 3, SHAPE(2, 3, 4), 120), *k = rnd(PD_FLOAT64, 3, SHAPE(2, 5, 4), 121);
  pd_tensor_set_stop_gradient(q, false);
  pd_tensor_set_stop_gradient(k, false);
  pd_tensor *w = rnd(PD_FLOAT64, 3, SHAPE(2, 3, 5), 122);
  pd_tensor *l1 = pd_sum(pd_multiply(ein2("bqd,bkd->bqk", q, k), w), NULL, 0, false);
  pd_tensor *l2 = pd_sum(pd_multiply(pd_matmul(q, k, false, true), w), NULL, 0, false);
  pd_tensor *ins[2] = {q, k}, *g1[2] = {NULL, NULL}, *g2[2] = {NULL, NULL};
  assert_int_equal(pd_grad(&l1, 1, ins, 2, NULL, NULL, g1), PD_OK);
  assert_int_equal(pd_grad(&l2, 1, ins, 2, NULL, NULL, g2), PD_OK);
  expect_close(g1[0], g2[0], 1e-12, 1e-12);
  expect_close(g1[1], g2[1], 1e-12, 1e-12);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_einsum_errors(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *a = pd_ones(2, SHAPE(3, 4), PD_FLOAT32), *b = pd_ones(2, SHAPE(5, 6), PD_FLOAT32);
  expect_error(ein2("ij,jk->ik", a, b), "einsum: label 'j' of equation 'ij,jk->ik'", "[5, 6]");
  expect_error(ein2("ijk,jk->i", a, b), "einsum: term 'ijk' of equation 'ijk,jk->i'",
               "operand 0 has shape [3, 4]");
  expect_error(ein2("ii->i", pd_ones(2, SHAPE(3, 3), PD_FLOAT32), NULL), "einsum: label 'i' repeats",
               "'ii->i'");
  expect_error(ein2("ij,jk->iz", a, pd_ones(2, SHAPE(4, 2), PD_FLOAT32)), "output label 'z'", "'ij,jk->iz'");
  expect_error(ein2("ij->", a, b), "einsum: equation 'ij->' has 1 input term(s) but 2 operand(s)", NULL);
  expect_error(ein2("i1->i", a, NULL), "einsum: invalid character '1'", "'i1->i'");
  expect_error(ein2("ij->ii", a, NULL), "einsum: label 'i' repeats in output", NULL);
  expect_error(ein2("...i..->i", a, NULL), "einsum", "'...i..->i'");
  pd_tensor *o5 = pd_ones(5, SHAPE(1, 2, 1, 2, 1), PD_FLOAT32);
  expect_error(ein2("abcde,fghij", o5, o5), "einsum: output of equation 'abcde,fghij'", "more than 9 dims");
  expect_error(pd_einsum(NULL, 1, &a), "einsum: equation is NULL", NULL);
  expect_error(ein2("ij->ij", NULL, NULL), "einsum", "NULL");
  pd_scope_end();
  expect_no_live_tensors();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_matmul_hand_values),
      cmocka_unit_test(test_matmul_against_reference),
      cmocka_unit_test(test_matmul_vectors),
      cmocka_unit_test(test_matmul_broadcast_batch),
      cmocka_unit_test(test_matmul_noncontiguous),
      cmocka_unit_test(test_matmul_view_not_copied),
      cmocka_unit_test(test_matmul_empty_and_half),
      cmocka_unit_test(test_matmul_errors),
      cmocka_unit_test(test_matmul_flops),
      cmocka_unit_test(test_mm_bmm_mv),
      cmocka_unit_test(test_dot),
      cmocka_unit_test(test_addmm),
      cmocka_unit_test(test_t),
      cmocka_unit_test(test_matmul_grad_values_and_double_backward),
      cmocka_unit_test(test_einsum_forms),
      cmocka_unit_test(test_einsum_grad),
      cmocka_unit_test(test_einsum_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
