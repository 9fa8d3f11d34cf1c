/* Shape and indexing ops: forward values against hand-derived arrays,
 * views, negative axes, non-contiguous inputs, int64/bool data, empty
 * results, gradients (incl. double backward) and the errors of bad inputs. */
#include <math.h>
#include <string.h>

#include "test_util.h"

#define I64(nd, shape, ...) T(PD_INT64, nd, shape, __VA_ARGS__)
#define LIST(...) ((pd_tensor *[]){__VA_ARGS__})

/* 0, 1, 2, ... in the given shape and dtype */
static pd_tensor *arange(pd_dtype dt, int nd, const int64_t *shape) {
  double buf[256];
  int64_t n = 1;
  for (int d = 0; d < nd; d++) n *= shape[d];
  for (int64_t i = 0; i < n; i++) buf[i] = (double)i;
  return pd_tensor_from_f64(buf, dt, nd, shape);
}

static pd_tensor *leaf(pd_tensor *t) {
  pd_tensor_set_stop_gradient(t, false);
  return t;
}

/* sum(y * w) */
static pd_tensor *wsum(pd_tensor *y, pd_tensor *w) { return pd_sum(pd_multiply(y, w), NULL, 0, false); }

static void expect_status_error(int rc, const char *f1, const char *f2) {
  if (rc >= 0) fail_msg("expected an error (%s), got %d", f1, rc);
  expect_error(NULL, f1, f2);
}

/* ---- reshape_, flatten, squeeze, unsqueeze --------------------------------------- */

static void test_reshape_inplace(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = arange(PD_FLOAT32, 2, SHAPE(2, 3));
  uint32_t v0 = pd_tensor_version(x);
  pd_tensor *r = pd_reshape_(x, 2, SHAPE(3, -1));
  assert_ptr_equal(r, x);
  expect_shape(x, 2, SHAPE(3, 2));
  EXPECT_VALUES(x, 0, 0, 1, 2, 3, 4, 5);
  assert_true(pd_tensor_version(x) > v0);
  /* a transposed view cannot be reshaped in place: x takes a copy */
  pd_tensor *t = pd_transpose(arange(PD_FLOAT32, 2, SHAPE(2, 3)), 2, SHAPE(1, 0));
  assert_non_null(pd_reshape_(t, 1, SHAPE(6)));
  assert_true(pd_tensor_is_contiguous(t));
  EXPECT_VALUES(t, 0, 0, 3, 1, 4, 2, 5);
  expect_error(pd_reshape_(x, 1, SHAPE(4)), "reshape_", "6 elements");
  /* a leaf that needs a grad refuses, a non-leaf records the reshape */
  pd_tensor *p = leaf(arange(PD_FLOAT64, 1, SHAPE(4)));
  expect_error(pd_reshape_(p, 2, SHAPE(2, 2)), "reshape_", "leaf");
  pd_tensor *y = pd_scale(p, 2.0, 0.0, true);
  assert_non_null(pd_reshape_(y, 2, SHAPE(2, 2)));
  expect_shape(y, 2, SHAPE(2, 2));
  assert_int_equal(pd_backward(wsum(y, T(PD_FLOAT64, 2, SHAPE(2, 2), 1, 2, 3, 4)), NULL, false), PD_OK);
  EXPECT_VALUES(pd_tensor_grad(p), 0, 2, 4, 6, 8);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_flatten(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = arange(PD_FLOAT32, 3, SHAPE(2, 3, 4));
  pd_tensor *f = pd_flatten(x, 1, -1);
  expect_shape(f, 2, SHAPE(2, 12));
  assert_true(pd_tensor_shares_storage(f, x));
  expect_shape(pd_flatten(x, 0, -1), 1, SHAPE(24));
  /* t[i, j, k] = x[j, k, i]: dims 1..2 of t merge (a view), dims 0..1 do not */
  pd_tensor *t = pd_transpose(x, 3, SHAPE(2, 0, 1));
  pd_tensor *ft = pd_flatten(t, 1, 2);
  expect_shape(ft, 2, SHAPE(4, 6));
  assert_true(pd_tensor_shares_storage(ft, x));
  EXPECT_VALUES(pd_slice(ft, 1, SHAPE(0), SHAPE(0), SHAPE(2)), 0, 0, 4, 8, 12, 16, 20, 1, 5, 9, 13, 17, 21);
  pd_tensor *fc = pd_flatten(t, 0, 1);
  expect_shape(fc, 2, SHAPE(8, 3));
  assert_false(pd_tensor_shares_storage(fc, x));
  EXPECT_VALUES(pd_slice(fc, 1, SHAPE(0), SHAPE(0), SHAPE(3)), 0, 0, 4, 8, 12, 16, 20, 1, 5, 9);
  pd_tensor *s = pd_flatten(T(PD_INT64, 0, NULL, 7), 0, -1);
  expect_shape(s, 1, SHAPE(1));
  EXPECT_VALUES(s, 0, 7);
  expect_error(pd_flatten(x, 2, 1), "flatten", "start_axis 2");
  expect_error(pd_flatten(x, 0, 3), "flatten", "axis 3");
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_squeeze_unsqueeze(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = arange(PD_FLOAT64, 4, SHAPE(1, 3, 1, 2));
  pd_tensor *s = pd_squeeze(x, 0, NULL);
  expect_shape(s, 2, SHAPE(3, 2));
  assert_true(pd_tensor_shares_storage(s, x));
  EXPECT_VALUES(s, 0, 0, 1, 2, 3, 4, 5);
  expect_shape(pd_squeeze(x, 2, SHAPE(0, -2)), 2, SHAPE(3, 2));
  expect_shape(pd_squeeze(x, 1, SHAPE(1)), 4, SHAPE(1, 3, 1, 2)); /* size 3: left alone */
  expect_shape(pd_squeeze(T(PD_FLOAT32, 0, NULL, 1), 1, SHAPE(0)), 0, NULL);
  expect_error(pd_squeeze(x, 1, SHAPE(4)), "squeeze", "axis 4");

  pd_tensor *u = arange(PD_INT64, 2, SHAPE(3, 2));
  expect_shape(pd_unsqueeze(u, 2, SHAPE(0, -1)), 4, SHAPE(1, 3, 2, 1));
  expect_shape(pd_unsqueeze(u, 2, SHAPE(1, 1)), 4, SHAPE(3, 1, 1, 2));
  expect_shape(pd_unsqueeze(u, 1, SHAPE(-1)), 3, SHAPE(3, 2, 1));
  expect_error(pd_unsqueeze(u, 1, SHAPE(3)), "unsqueeze", "axis 3");
  expect_error(pd_unsqueeze(u, 1, SHAPE(-4)), "unsqueeze", "axis -4");
  pd_tensor *tr = pd_transpose(u, 2, SHAPE(1, 0));
  pd_tensor *ut = pd_unsqueeze(tr, 1, SHAPE(1));
  expect_shape(ut, 3, SHAPE(2, 1, 3));
  assert_true(pd_tensor_shares_storage(ut, u));
  EXPECT_VALUES(ut, 0, 0, 2, 4, 1, 3, 5);

  /* inplace forms */
  pd_tensor *q = arange(PD_FLOAT32, 2, SHAPE(1, 3));
  assert_ptr_equal(pd_squeeze_(q, 0, NULL), q);
  expect_shape(q, 1, SHAPE(3));
  assert_ptr_equal(pd_unsqueeze_(q, 1, SHAPE(0)), q);
  expect_shape(q, 2, SHAPE(1, 3));
  EXPECT_VALUES(q, 0, 0, 1, 2);
  pd_tensor *p = leaf(T(PD_FLOAT64, 1, SHAPE(3), 1, 2, 3));
  expect_error(pd_squeeze_(p, 0, NULL), "squeeze_", "leaf");
  pd_tensor *y = pd_scale(p, 3.0, 0.0, true);
  assert_non_null(pd_unsqueeze_(y, 1, SHAPE(0)));
  expect_shape(y, 2, SHAPE(1, 3));
  assert_int_equal(pd_backward(wsum(y, T(PD_FLOAT64, 2, SHAPE(1, 3), 1, 2, 3)), NULL, false), PD_OK);
  EXPECT_VALUES(pd_tensor_grad(p), 0, 3, 6, 9);
  pd_scope_end();
  expect_no_live_tensors();
}

/* ---- broadcast_to, expand_as, tile ----------------------------------------------- */

static void test_broadcast_expand_as(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = T(PD_FLOAT32, 2, SHAPE(3, 1), 1, 2, 3);
  pd_tensor *b = pd_broadcast_to(x, 3, SHAPE(2, -1, 2));
  expect_shape(b, 3, SHAPE(2, 3, 2));
  assert_true(pd_tensor_shares_storage(b, x));
  EXPECT_VALUES(b, 0, 1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3);
  expect_error(pd_broadcast_to(x, 2, SHAPE(2, 2)), "broadcast_to", "[3, 1]");
  expect_error(pd_broadcast_to(x, 3, SHAPE(-1, 3, 1)), "broadcast_to", "-1");
  pd_tensor *e = pd_expand_as(x, pd_zeros(3, SHAPE(2, 3, 2), PD_INT64));
  expect_shape(e, 3, SHAPE(2, 3, 2));
  EXPECT_VALUES(e, 0, 1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3);
  expect_error(pd_expand_as(x, pd_zeros(2, SHAPE(2, 2), PD_FLOAT32)), "expand_as", "[3, 1]");
  pd_tensor *xg = leaf(T(PD_FLOAT64, 2, SHAPE(3, 1), 1, 2, 3));
  assert_int_equal(pd_backward(pd_sum(pd_broadcast_to(xg, 3, SHAPE(2, 3, 2)), NULL, 0, false), NULL, false),
                   PD_OK);
  EXPECT_VALUES(pd_tensor_grad(xg), 0, 4, 4, 4);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_tile(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = T(PD_FLOAT32, 2, SHAPE(2, 3), 1, 2, 3, 4, 5, 6);
  pd_tensor *t = pd_tile(x, 2, SHAPE(2, 2));
  expect_shape(t, 2, SHAPE(4, 6));
  EXPECT_VALUES(t, 0, 1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6, 1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6);
  pd_tensor *t2 = pd_tile(x, 1, SHAPE(2)); /* repeats padded with leading 1s */
  expect_shape(t2, 2, SHAPE(2, 6));
  EXPECT_VALUES(t2, 0, 1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6);
  pd_tensor *t3 = pd_tile(x, 3, SHAPE(2, 1, 1)); /* x padded with a leading 1 */
  expect_shape(t3, 3, SHAPE(2, 2, 3));
  EXPECT_VALUES(t3, 0, 1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6);
  EXPECT_VALUES(pd_tile(T(PD_BOOL, 1, SHAPE(2), 1, 0), 1, SHAPE(3)), 0, 1, 0, 1, 0, 1, 0);
  pd_tensor *tr = pd_tile(pd_transpose(x, 2, SHAPE(1, 0)), 2, SHAPE(1, 2));
  EXPECT_VALUES(tr, 0, 1, 4, 1, 4, 2, 5, 2, 5, 3, 6, 3, 6);
  expect_error(pd_tile(x, 2, SHAPE(2, 0)), "tile", "repeat_times[1] = 0");
  pd_tensor *xg = leaf(T(PD_FLOAT64, 1, SHAPE(2), 1, 2));
  assert_int_equal(
      pd_backward(wsum(pd_tile(xg, 2, SHAPE(2, 3)), arange(PD_FLOAT64, 2, SHAPE(2, 6))), NULL, false), PD_OK);
  EXPECT_VALUES(pd_tensor_grad(xg), 0, 30, 36);
  pd_scope_end();
  expect_no_live_tensors();
}

/* ---- concat, stack ---------------------------------------------------------------- */

static void test_concat(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *a = T(PD_FLOAT32, 2, SHAPE(2, 2), 1, 2, 3, 4), *b = T(PD_FLOAT32, 2, SHAPE(2, 1), 5, 6);
  EXPECT_VALUES(pd_concat(LIST(a, b), 2, -1), 0, 1, 2, 5, 3, 4, 6);
  pd_tensor *c0 = pd_concat(LIST(a, a), 2, 0);
  expect_shape(c0, 2, SHAPE(4, 2));
  EXPECT_VALUES(c0, 0, 1, 2, 3, 4, 1, 2, 3, 4);
  pd_tensor *at = pd_transpose(a, 2, SHAPE(1, 0));
  EXPECT_VALUES(pd_concat(LIST(at, b), 2, 1), 0, 1, 3, 5, 2, 4, 6);
  EXPECT_VALUES(pd_concat(LIST(I64(1, SHAPE(2), 7, 8), I64(1, SHAPE(1), 9)), 2, 0), 0, 7, 8, 9);
  pd_tensor *ce = pd_concat(LIST(a, pd_zeros(2, SHAPE(0, 2), PD_FLOAT32)), 2, 0);
  expect_shape(ce, 2, SHAPE(2, 2));
  EXPECT_VALUES(ce, 0, 1, 2, 3, 4);
  expect_error(pd_concat(LIST(a, b), 2, 0), "concat",
               "input 1 has shape [2, 1] but input 0 has shape [2, 2]");
  expect_error(pd_concat(LIST(a, I64(2, SHAPE(2, 2), 1, 2, 3, 4)), 2, 0), "concat",
               "input 1 has dtype int64");
  pd_tensor *s0 = T(PD_FLOAT32, 0, NULL, 1);
  expect_error(pd_concat(LIST(s0, s0), 2, 0), "concat", "0-D");
  expect_error(pd_concat(LIST(a, a), 2, 2), "concat", "axis 2");
  expect_error(pd_concat(LIST(a), 0, 0), "concat", "at least one");
  pd_tensor *xa = leaf(arange(PD_FLOAT64, 2, SHAPE(2, 2))), *xb = leaf(arange(PD_FLOAT64, 2, SHAPE(2, 1)));
  pd_tensor *w = T(PD_FLOAT64, 2, SHAPE(2, 3), 1, 2, 3, 4, 5, 6);
  assert_int_equal(pd_backward(wsum(pd_concat(LIST(xa, xb), 2, 1), w), NULL, false), PD_OK);
  EXPECT_VALUES(pd_tensor_grad(xa), 0, 1, 2, 4, 5);
  EXPECT_VALUES(pd_tensor_grad(xb), 0, 3, 6);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_stack(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *a = T(PD_FLOAT32, 2, SHAPE(2, 2), 1, 2, 3, 4), *a2 = T(PD_FLOAT32, 2, SHAPE(2, 2), 5, 6, 7, 8);
  pd_tensor *s = pd_stack(LIST(a, a2), 2, 0);
  expect_shape(s, 3, SHAPE(2, 2, 2));
  EXPECT_VALUES(s, 0, 1, 2, 3, 4, 5, 6, 7, 8);
  EXPECT_VALUES(pd_stack(LIST(a, a2), 2, 1), 0, 1, 2, 5, 6, 3, 4, 7, 8);
  EXPECT_VALUES(pd_stack(LIST(a, a2), 2, -1), 0, 1, 5, 2, 6, 3, 7, 4, 8);
  EXPECT_VALUES(pd_stack(LIST(pd_transpose(a, 2, SHAPE(1, 0)), a2), 2, 0), 0, 1, 3, 2, 4, 5, 6, 7, 8);
  pd_tensor *bs = pd_stack(LIST(T(PD_BOOL, 1, SHAPE(2), 1, 0), T(PD_BOOL, 1, SHAPE(2), 0, 1)), 2, 1);
  expect_shape(bs, 2, SHAPE(2, 2));
  EXPECT_VALUES(bs, 0, 1, 0, 0, 1);
  expect_error(pd_stack(LIST(a, a2, T(PD_FLOAT32, 2, SHAPE(2, 1), 5, 6)), 3, 0), "stack",
               "input 2 has shape [2, 1] but input 0 has shape [2, 2]");
  expect_error(pd_stack(LIST(a, a2), 2, 3), "stack", "axis 3");
  pd_tensor *xa = leaf(arange(PD_FLOAT64, 2, SHAPE(2, 2))), *xb = leaf(arange(PD_FLOAT64, 2, SHAPE(2, 2)));
  pd_tensor *w = T(PD_FLOAT64, 3, SHAPE(2, 2, 2), 1, 2, 3, 4, 5, 6, 7, 8);
  assert_int_equal(pd_backward(wsum(pd_stack(LIST(xa, xb), 2, 1), w), NULL, false), PD_OK);
  EXPECT_VALUES(pd_tensor_grad(xa), 0, 1, 2, 5, 6);
  EXPECT_VALUES(pd_tensor_grad(xb), 0, 3, 4, 7, 8);
  pd_scope_end();
  expect_no_live_tensors();
}

/* ---- split, chunk, unbind --------------------------------------------------------- */

static void test_split(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *o[64];
  pd_tensor *x = arange(PD_FLOAT32, 2, SHAPE(2, 6));
  assert_int_equal(pd_split(x, 3, NULL, 1, o, 64), 3);
  expect_shape(o[1], 2, SHAPE(2, 2));
  assert_true(pd_tensor_shares_storage(o[1], x));
  EXPECT_VALUES(o[0], 0, 0, 1, 6, 7);
  EXPECT_VALUES(o[1], 0, 2, 3, 8, 9);
  EXPECT_VALUES(o[2], 0, 4, 5, 10, 11);
  assert_int_equal(pd_split(x, 3, SHAPE(1, -1, 2), -1, o, 64), 3);
  EXPECT_VALUES(o[0], 0, 0, 6);
  EXPECT_VALUES(o[1], 0, 1, 2, 3, 7, 8, 9);
  EXPECT_VALUES(o[2], 0, 4, 5, 10, 11);
  assert_int_equal(pd_split(x, 2, SHAPE(0, 6), 1, o, 64), 2);
  expect_shape(o[0], 2, SHAPE(2, 0));
  expect_shape(o[1], 2, SHAPE(2, 6));
  assert_int_equal(pd_split(arange(PD_INT64, 1, SHAPE(4)), 2, NULL, 0, o, 64), 2);
  EXPECT_VALUES(o[1], 0, 2, 3);
  /* more sections than one op holds: 40 and 64 parts */
  int64_t secs[64];
  for (int k = 0; k < 64; k++) secs[k] = 1;
  secs[0] = -1;
  pd_tensor *z = arange(PD_FLOAT32, 1, SHAPE(40));
  assert_int_equal(pd_split(z, 40, secs, 0, o, 64), 40);
  for (int k = 0; k < 40; k++) assert_true(pd_tensor_item(o[k]) == k);
  secs[0] = 1;
  secs[39] = -1;
  assert_int_equal(pd_split(z, 40, secs, 0, o, 64), 40);
  assert_true(pd_tensor_item(o[39]) == 39);
  secs[39] = 1;
  assert_int_equal(pd_split(arange(PD_FLOAT32, 1, SHAPE(64)), 64, secs, 0, o, 64), 64);
  assert_true(pd_tensor_item(o[63]) == 63);
  assert_int_equal(pd_split(arange(PD_FLOAT32, 1, SHAPE(64)), 64, NULL, 0, o, 64), 64);
  /* errors */
  expect_status_error(pd_split(x, 4, NULL, 1, o, 64), "split", "not divisible");
  expect_status_error(pd_split(x, 2, SHAPE(-1, -1), 1, o, 64), "split", "at most one");
  expect_status_error(pd_split(x, 2, SHAPE(2, 3), 1, o, 64), "split", "sum to 5");
  expect_status_error(pd_split(x, 2, NULL, 2, o, 64), "split", "axis 2");
  expect_status_error(pd_split(pd_zeros(1, SHAPE(100), PD_FLOAT32), 100, NULL, 0, o, 64), "split", "64");
  expect_status_error(pd_split(pd_zeros(1, SHAPE(65), PD_FLOAT32), 65, secs, 0, o, 64), "split", "64");
  expect_status_error(pd_split(x, 3, NULL, 1, o, 2), "split", "holds only 2");
  /* grads: unused parts get zeros; through the two-op split of 40 parts */
  pd_tensor *xg = leaf(arange(PD_FLOAT64, 1, SHAPE(4)));
  assert_int_equal(pd_split(xg, 2, NULL, 0, o, 64), 2);
  assert_int_equal(pd_backward(wsum(o[1], T(PD_FLOAT64, 1, SHAPE(2), 1, 2)), NULL, false), PD_OK);
  EXPECT_VALUES(pd_tensor_grad(xg), 0, 0, 0, 1, 2);
  pd_tensor *zg = leaf(arange(PD_FLOAT64, 1, SHAPE(40)));
  assert_int_equal(pd_split(zg, 40, secs, 0, o, 64), 40);
  assert_int_equal(pd_backward(pd_add(pd_scale(o[39], 2, 0, true), o[3]), NULL, false), PD_OK);
  assert_true(pd_tensor_item_at(pd_tensor_grad(zg), 39) == 2);
  assert_true(pd_tensor_item_at(pd_tensor_grad(zg), 3) == 1);
  assert_true(pd_tensor_item(pd_sum(pd_tensor_grad(zg), NULL, 0, false)) == 3);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_chunk_unbind(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *o[64];
  pd_tensor *x = arange(PD_FLOAT32, 2, SHAPE(2, 6));
  assert_int_equal(pd_chunk(x, 2, -1, o, 64), 2);
  EXPECT_VALUES(o[0], 0, 0, 1, 2, 6, 7, 8);
  EXPECT_VALUES(o[1], 0, 3, 4, 5, 9, 10, 11);
  expect_status_error(pd_chunk(x, 4, 1, o, 64), "chunk", "not divisible");
  expect_status_error(pd_chunk(x, 0, 1, o, 64), "chunk", "positive");
  assert_int_equal(pd_unbind(x, 0, o, 64), 2);
  expect_shape(o[1], 1, SHAPE(6));
  assert_true(pd_tensor_shares_storage(o[1], x));
  EXPECT_VALUES(o[1], 0, 6, 7, 8, 9, 10, 11);
  assert_int_equal(pd_unbind(pd_transpose(x, 2, SHAPE(1, 0)), -1, o, 64), 2);
  EXPECT_VALUES(o[0], 0, 0, 1, 2, 3, 4, 5);
  assert_int_equal(pd_unbind(x, -1, o, 64), 6);
  EXPECT_VALUES(o[4], 0, 4, 10);
  assert_int_equal(pd_unbind(pd_zeros(2, SHAPE(0, 3), PD_FLOAT32), 0, o, 64), 0);
  pd_tensor *eg = leaf(pd_zeros(2, SHAPE(0, 3), PD_FLOAT64)); /* no outputs, still recorded cleanly */
  assert_int_equal(pd_unbind(eg, 0, o, 64), 0);
  expect_status_error(pd_unbind(pd_zeros(1, SHAPE(65), PD_FLOAT32), 0, o, 64), "unbind", "65");
  expect_status_error(pd_unbind(T(PD_FLOAT32, 0, NULL, 1), 0, o, 64), "unbind", "0-D");
  pd_tensor *xg = leaf(arange(PD_FLOAT64, 2, SHAPE(2, 3)));
  assert_int_equal(pd_unbind(xg, 0, o, 64), 2);
  assert_int_equal(pd_backward(pd_sum(pd_scale(o[1], 3, 0, true), NULL, 0, false), NULL, false), PD_OK);
  EXPECT_VALUES(pd_tensor_grad(xg), 0, 0, 0, 0, 3, 3, 3);
  pd_scope_end();
  expect_no_live_tensors();
}

/* ---- slice, strided_slice --------------------------------------------------------- */

static void test_slice(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = arange(PD_FLOAT32, 2, SHAPE(3, 4));
  pd_tensor *s = pd_slice(x, 1, SHAPE(1), SHAPE(1), SHAPE(3));
  expect_shape(s, 2, SHAPE(3, 2));
  assert_true(pd_tensor_shares_storage(s, x));
  EXPECT_VALUES(s, 0, 1, 2, 5, 6, 9, 10);
  EXPECT_VALUES(pd_slice(x, 2, SHAPE(0, -1), SHAPE(-2, -3), SHAPE(100, -1)), 0, 5, 6, 9, 10);
  EXPECT_VALUES(pd_slice(x, 1, SHAPE(0), SHAPE(-100), SHAPE(1)), 0, 0, 1, 2, 3);
  expect_shape(pd_slice(x, 1, SHAPE(1), SHAPE(5), SHAPE(10)), 2, SHAPE(3, 0));
  expect_shape(pd_slice(x, 1, SHAPE(0), SHAPE(2), SHAPE(1)), 2, SHAPE(0, 4));
  pd_tensor *t = pd_transpose(x, 2, SHAPE(1, 0));
  EXPECT_VALUES(pd_slice(t, 1, SHAPE(0), SHAPE(1), SHAPE(3)), 0, 1, 5, 9, 2, 6, 10);
  EXPECT_VALUES(pd_slice(arange(PD_INT64, 1, SHAPE(5)), 1, SHAPE(0), SHAPE(-2), SHAPE(5)), 0, 3, 4);
  expect_error(pd_slice(x, 1, SHAPE(2), SHAPE(0), SHAPE(1)), "slice", "axis 2");
  expect_error(pd_slice(x, 2, SHAPE(0, -2), SHAPE(0, 0), SHAPE(1, 1)), "slice", "twice");
  expect_error(pd_slice(x, 10, SHAPE(0), SHAPE(0), SHAPE(1)), "slice", "10 entries");
  /* grad: ones where selected */
  pd_tensor *xg = leaf(arange(PD_FLOAT64, 2, SHAPE(3, 4)));
  pd_tensor *y = pd_slice(xg, 1, SHAPE(1), SHAPE(1), SHAPE(3));
  assert_int_equal(pd_backward(pd_sum(pd_scale(y, 2, 0, true), NULL, 0, false), NULL, false), PD_OK);
  EXPECT_VALUES(pd_tensor_grad(xg), 0, 0, 2, 2, 0, 0, 2, 2, 0, 0, 2, 2, 0);
  /* double backward: L = sum(s^2), dL/dx = 2 s placed; d(sum(g * v))/dx = 2 v placed */
  pd_tensor *x2 = leaf(T(PD_FLOAT64, 1, SHAPE(4), 1, 2, 3, 4));
  pd_tensor *s2 = pd_slice(x2, 1, SHAPE(0), SHAPE(1), SHAPE(3));
  pd_tensor *L = pd_sum(pd_multiply(s2, s2), NULL, 0, false), *g = NULL, *gg = NULL;
  assert_int_equal(pd_grad(&L, 1, &x2, 1, NULL, &(pd_grad_opts){.create_graph = true}, &g), PD_OK);
  EXPECT_VALUES(g, 1e-12, 0, 4, 6, 0);
  pd_tensor *L2 = wsum(g, T(PD_FLOAT64, 1, SHAPE(4), 1, 10, 100, 1000));
  assert_int_equal(pd_grad(&L2, 1, &x2, 1, NULL, NULL, &gg), PD_OK);
  EXPECT_VALUES(gg, 1e-12, 0, 20, 200, 0);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_strided_slice(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *v = arange(PD_FLOAT32, 1, SHAPE(10));
#define SS(x, st, en, sp) pd_strided_slice((x), 1, SHAPE(0), SHAPE(st), SHAPE(en), SHAPE(sp))
  EXPECT_VALUES(SS(v, 1, 8, 2), 0, 1, 3, 5, 7);
  EXPECT_VALUES(SS(v, 8, 1, -3), 0, 8, 5, 2);
  EXPECT_VALUES(SS(v, -1, -1, -1), 0, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0); /* end -1: through element 0 */
  EXPECT_VALUES(SS(v, 100, -100, -2), 0, 9, 7, 5, 3, 1);
  EXPECT_VALUES(SS(v, -3, 100, 1), 0, 7, 8, 9);
  expect_shape(SS(v, 2, 8, -1), 1, SHAPE(0));
  expect_shape(SS(v, 8, 2, 1), 1, SHAPE(0));
  EXPECT_VALUES(SS(arange(PD_INT64, 1, SHAPE(5)), 4, -1, -2), 0, 4, 2, 0);
  pd_tensor *m = arange(PD_FLOAT32, 2, SHAPE(3, 4));
  EXPECT_VALUES(pd_strided_slice(m, 2, SHAPE(0, 1), SHAPE(2, 3), SHAPE(-1, 0), SHAPE(-2, -2)), 0, 11, 9, 3,
                1);
  pd_tensor *t = pd_transpose(m, 2, SHAPE(1, 0));
  EXPECT_VALUES(pd_strided_slice(t, 1, SHAPE(1), SHAPE(2), SHAPE(-1), SHAPE(-1)), 0, 8, 4, 0, 9, 5, 1, 10, 6,
                2, 11, 7, 3);
  expect_error(SS(v, 0, 5, 0), "strided_slice", "strides[0] is 0");
  expect_error(pd_strided_slice(v, 1, SHAPE(1), SHAPE(0), SHAPE(1), SHAPE(1)), "strided_slice", "axis 1");
  pd_tensor *vg = leaf(arange(PD_FLOAT64, 1, SHAPE(5)));
  assert_int_equal(pd_backward(wsum(SS(vg, 4, -1, -2), T(PD_FLOAT64, 1, SHAPE(3), 1, 2, 3)), NULL, false),
                   PD_OK);
  EXPECT_VALUES(pd_tensor_grad(vg), 0, 3, 0, 2, 0, 1);
#undef SS
  pd_scope_end();
  expect_no_live_tensors();
}

/* ---- roll, flip, tril, triu, assign ------------------------------------------------ */

static void test_roll(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *v = arange(PD_FLOAT32, 1, SHAPE(5));
  EXPECT_VALUES(pd_roll(v, 1, SHAPE(2), 0, NULL), 0, 3, 4, 0, 1, 2);
  EXPECT_VALUES(pd_roll(v, 1, SHAPE(-1), 1, SHAPE(0)), 0, 1, 2, 3, 4, 0);
  EXPECT_VALUES(pd_roll(v, 1, SHAPE(7), 1, SHAPE(-1)), 0, 3, 4, 0, 1, 2);
  EXPECT_VALUES(pd_roll(v, 2, SHAPE(1, 1), 2, SHAPE(0, 0)), 0, 3, 4, 0, 1, 2);
  pd_tensor *m = arange(PD_INT64, 2, SHAPE(3, 4));
  EXPECT_VALUES(pd_roll(m, 2, SHAPE(1, -1), 2, SHAPE(0, 1)), 0, 9, 10, 11, 8, 1, 2, 3, 0, 5, 6, 7, 4);
  pd_tensor *rf = pd_roll(m, 1, SHAPE(1), 0, NULL);
  expect_shape(rf, 2, SHAPE(3, 4));
  EXPECT_VALUES(rf, 0, 11, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10);
  pd_tensor *t = pd_transpose(m, 2, SHAPE(1, 0));
  EXPECT_VALUES(pd_roll(t, 1, SHAPE(1), 1, SHAPE(0)), 0, 3, 7, 11, 0, 4, 8, 1, 5, 9, 2, 6, 10);
  expect_error(pd_roll(v, 2, SHAPE(1, 2), 0, NULL), "roll", "exactly 1");
  expect_error(pd_roll(m, 1, SHAPE(1), 2, SHAPE(0, 1)), "roll", "shifts has 1");
  expect_error(pd_roll(m, 1, SHAPE(1), 1, SHAPE(2)), "roll", "axis 2");
  pd_tensor *vg = leaf(arange(PD_FLOAT64, 1, SHAPE(4)));
  assert_int_equal(
      pd_backward(wsum(pd_roll(vg, 1, SHAPE(1), 0, NULL), T(PD_FLOAT64, 1, SHAPE(4), 1, 2, 3, 4)), NULL,
                  false),
      PD_OK);
  EXPECT_VALUES(pd_tensor_grad(vg), 0, 2, 3, 4, 1);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_flip(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *m = arange(PD_FLOAT32, 2, SHAPE(3, 4));
  EXPECT_VALUES(pd_flip(m, 1, SHAPE(0)), 0, 8, 9, 10, 11, 4, 5, 6, 7, 0, 1, 2, 3);
  EXPECT_VALUES(pd_flip(m, 1, SHAPE(-1)), 0, 3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8);
  EXPECT_VALUES(pd_flip(m, 2, SHAPE(0, 1)), 0, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  EXPECT_VALUES(pd_flip(pd_transpose(m, 2, SHAPE(1, 0)), 1, SHAPE(1)), 0, 8, 4, 0, 9, 5, 1, 10, 6, 2, 11, 7,
                3);
  EXPECT_VALUES(pd_flip(T(PD_BOOL, 1, SHAPE(3), 1, 1, 0), 1, SHAPE(0)), 0, 0, 1, 1);
  expect_error(pd_flip(m, 2, SHAPE(1, -1)), "flip", "twice");
  expect_error(pd_flip(m, 1, SHAPE(-3)), "flip", "axis -3");
  pd_tensor *vg = leaf(arange(PD_FLOAT64, 1, SHAPE(4)));
  assert_int_equal(
      pd_backward(wsum(pd_flip(vg, 1, SHAPE(0)), T(PD_FLOAT64, 1, SHAPE(4), 1, 2, 3, 4)), NULL, false),
      PD_OK);
  EXPECT_VALUES(pd_tensor_grad(vg), 0, 4, 3, 2, 1);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_tril_triu(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *m = arange(PD_FLOAT32, 2, SHAPE(3, 4));
  EXPECT_VALUES(pd_tril(m, 0), 0, 0, 0, 0, 0, 4, 5, 0, 0, 8, 9, 10, 0);
  EXPECT_VALUES(pd_tril(m, -1), 0, 0, 0, 0, 0, 4, 0, 0, 0, 8, 9, 0, 0);
  EXPECT_VALUES(pd_tril(m, 1), 0, 0, 1, 0, 0, 4, 5, 6, 0, 8, 9, 10, 11);
  EXPECT_VALUES(pd_triu(m, 0), 0, 0, 1, 2, 3, 0, 5, 6, 7, 0, 0, 10, 11);
  EXPECT_VALUES(pd_triu(m, 1), 0, 0, 1, 2, 3, 0, 0, 6, 7, 0, 0, 0, 11);
  EXPECT_VALUES(pd_triu(m, -1), 0, 0, 1, 2, 3, 4, 5, 6, 7, 0, 9, 10, 11);
  EXPECT_VALUES(pd_tril(arange(PD_INT64, 3, SHAPE(2, 2, 2)), 0), 0, 0, 0, 2, 3, 4, 0, 6, 7);
  EXPECT_VALUES(pd_tril(pd_transpose(m, 2, SHAPE(1, 0)), 0), 0, 0, 0, 0, 1, 5, 0, 2, 6, 10, 3, 7, 11);
  expect_error(pd_tril(arange(PD_FLOAT32, 1, SHAPE(3)), 0), "tril", "at least 2 dims");
  pd_tensor *xg = leaf(arange(PD_FLOAT64, 2, SHAPE(2, 2)));
  assert_int_equal(pd_backward(wsum(pd_triu(xg, 0), T(PD_FLOAT64, 2, SHAPE(2, 2), 1, 2, 3, 4)), NULL, false),
                   PD_OK);
  EXPECT_VALUES(pd_tensor_grad(xg), 0, 1, 2, 0, 4);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_assign(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = arange(PD_FLOAT32, 2, SHAPE(2, 3));
  pd_tensor *a = pd_assign(x);
  assert_false(pd_tensor_shares_storage(a, x));
  EXPECT_VALUES(a, 0, 0, 1, 2, 3, 4, 5);
  pd_tensor *at = pd_assign(pd_transpose(x, 2, SHAPE(1, 0)));
  assert_true(pd_tensor_is_contiguous(at));
  EXPECT_VALUES(at, 0, 0, 3, 1, 4, 2, 5);
  EXPECT_VALUES(pd_assign(T(PD_BOOL, 1, SHAPE(2), 1, 0)), 0, 1, 0);
  pd_tensor *xg = leaf(arange(PD_FLOAT64, 1, SHAPE(3)));
  assert_int_equal(pd_backward(wsum(pd_assign(xg), T(PD_FLOAT64, 1, SHAPE(3), 4, 5, 6)), NULL, false), PD_OK);
  EXPECT_VALUES(pd_tensor_grad(xg), 0, 4, 5, 6);
  pd_scope_end();
  expect_no_live_tensors();
}

/* ---- gather, index_select, index_add ------------------------------------------------ */

static void test_gather_index_select(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = arange(PD_FLOAT32, 2, SHAPE(5, 2));
  pd_tensor *g = pd_gather(x, I64(1, SHAPE(3), 4, 0, 4), 0);
  expect_shape(g, 2, SHAPE(3, 2));
  EXPECT_VALUES(g, 0, 8, 9, 0, 1, 8, 9);
  EXPECT_VALUES(pd_gather(x, I64(1, SHAPE(2), -1, -5), 0), 0, 8, 9, 0, 1);
  EXPECT_VALUES(pd_gather(x, T(PD_INT32, 1, SHAPE(1), 2), 0), 0, 4, 5);
  pd_tensor *g1 = pd_gather(x, I64(1, SHAPE(3), 1, 1, 0), -1);
  expect_shape(g1, 2, SHAPE(5, 3));
  EXPECT_VALUES(pd_slice(g1, 1, SHAPE(0), SHAPE(0), SHAPE(2)), 0, 1, 1, 0, 3, 3, 2);
  pd_tensor *g0 = pd_gather(x, I64(0, NULL, 2), 0); /* 0-D index drops the axis */
  expect_shape(g0, 1, SHAPE(2));
  EXPECT_VALUES(g0, 0, 4, 5);
  EXPECT_VALUES(pd_gather(x, I64(2, SHAPE(2, 1), 3, 1), 0), 0, 6, 7, 2, 3);
  EXPECT_VALUES(pd_gather(pd_transpose(x, 2, SHAPE(1, 0)), I64(1, SHAPE(2), 4, 0), 1), 0, 8, 0, 9, 1);
  EXPECT_VALUES(pd_gather(T(PD_BOOL, 1, SHAPE(3), 1, 0, 1), I64(1, SHAPE(2), 1, 2), 0), 0, 0, 1);
  expect_shape(pd_gather(x, pd_zeros(1, SHAPE(0), PD_INT64), 0), 2, SHAPE(0, 2));
  expect_error(pd_gather(x, I64(1, SHAPE(4), 0, 1, 2, 7), 0),
               "gather: index[3] = 7 is out of range for axis 0 of size 5", "valid range [-5, 5)");
  expect_error(pd_gather(x, T(PD_FLOAT32, 1, SHAPE(1), 0), 0), "gather",
               "int32 or int64 tensor, got float32");
  expect_error(pd_gather(x, I64(2, SHAPE(2, 2), 0, 1, 0, 1), 0), "gather", "[2, 2]");
  expect_error(pd_gather(x, I64(1, SHAPE(1), 0), 2), "gather", "axis 2");
  EXPECT_VALUES(pd_index_select(x, I64(1, SHAPE(3), 4, 0, 4), 0), 0, 8, 9, 0, 1, 8, 9);
  EXPECT_VALUES(pd_index_select(arange(PD_INT64, 2, SHAPE(2, 3)), I64(1, SHAPE(2), -1, 0), 1), 0, 2, 0, 5, 3);
  expect_error(pd_index_select(x, I64(0, NULL, 1), 0), "index_select", "1-D");
  expect_error(pd_index_select(x, I64(1, SHAPE(1), -6), 0), "index_select: index[0] = -6 is out of range",
               "size 5");
  /* grads accumulate over duplicates; double backward */
  pd_tensor *xg = leaf(T(PD_FLOAT64, 1, SHAPE(3), 1, 2, 3));
  pd_tensor *idx = I64(1, SHAPE(3), 2, 0, 2);
  assert_int_equal(pd_backward(wsum(pd_gather(xg, idx, 0), T(PD_FLOAT64, 1, SHAPE(3), 1, 2, 3)), NULL, false),
                   PD_OK);
  EXPECT_VALUES(pd_tensor_grad(xg), 0, 2, 0, 4);
  pd_tensor *y = pd_index_select(xg, idx, 0);
  pd_tensor *L = pd_sum(pd_multiply(y, y), NULL, 0, false), *d1 = NULL, *d2 = NULL;
  assert_int_equal(pd_grad(&L, 1, &xg, 1, NULL, &(pd_grad_opts){.create_graph = true}, &d1), PD_OK);
  EXPECT_VALUES(d1, 1e-12, 2, 0, 12); /* 2 x0, 0, 4 x2 */
  pd_tensor *L2 = pd_sum(d1, NULL, 0, false);
  assert_int_equal(pd_grad(&L2, 1, &xg, 1, NULL, NULL, &d2), PD_OK);
  EXPECT_VALUES(d2, 1e-12, 2, 0, 4);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_index_add_sample(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *ones = pd_ones(2, SHAPE(3, 2), PD_FLOAT32);
  pd_tensor *v = T(PD_FLOAT32, 2, SHAPE(3, 2), 1, 2, 3, 4, 5, 6);
  EXPECT_VALUES(pd_index_add(ones, I64(1, SHAPE(3), 2, 0, 2), 0, v), 0, 4, 5, 1, 1, 7, 9);
  pd_tensor *o23 = pd_ones(2, SHAPE(2, 3), PD_INT64);
  EXPECT_VALUES(pd_index_add(o23, I64(1, SHAPE(2), -1, 0), 1, I64(2, SHAPE(2, 2), 1, 2, 3, 4)), 0, 3, 1, 2, 5,
                1, 4);
  pd_tensor *vt = pd_transpose(T(PD_FLOAT32, 2, SHAPE(2, 3), 1, 3, 5, 2, 4, 6), 2, SHAPE(1, 0)); /* == v */
  EXPECT_VALUES(pd_index_add(ones, I64(1, SHAPE(3), 2, 0, 2), 0, vt), 0, 4, 5, 1, 1, 7, 9);
  expect_error(pd_index_add(ones, I64(1, SHAPE(2), 0, 1), 0, v), "index_add", "value has shape [3, 2]");
  expect_error(pd_index_add(ones, I64(1, SHAPE(3), 0, 3, 1), 0, v), "index_add: index[1] = 3 is out of range",
               "axis 0 of size 3");
  /* index_sample */
  pd_tensor *x = arange(PD_FLOAT32, 2, SHAPE(2, 4));
  pd_tensor *s = pd_index_sample(x, I64(2, SHAPE(2, 3), 0, 3, 3, 2, 1, 0));
  expect_shape(s, 2, SHAPE(2, 3));
  EXPECT_VALUES(s, 0, 0, 3, 3, 6, 5, 4);
  pd_tensor *xt = pd_transpose(arange(PD_FLOAT32, 2, SHAPE(4, 2)), 2, SHAPE(1, 0));
  EXPECT_VALUES(pd_index_sample(xt, T(PD_INT32, 2, SHAPE(2, 1), 3, 0)), 0, 6, 1);
  expect_error(pd_index_sample(x, I64(2, SHAPE(2, 1), 1, 4)),
               "index_sample: index[1, 0] = 4 is out of range for axis 1 of size 4", "valid range [0, 4)");
  expect_error(pd_index_sample(x, I64(2, SHAPE(3, 1), 1, 1, 1)), "index_sample", "same first dim");
  pd_tensor *xg = leaf(arange(PD_FLOAT64, 2, SHAPE(2, 3)));
  pd_tensor *y = pd_index_sample(xg, I64(2, SHAPE(2, 2), 1, 1, 0, 2));
  assert_int_equal(pd_backward(wsum(y, T(PD_FLOAT64, 2, SHAPE(2, 2), 1, 2, 3, 4)), NULL, false), PD_OK);
  EXPECT_VALUES(pd_tensor_grad(xg), 0, 0, 3, 0, 3, 0, 4);
  pd_scope_end();
  expect_no_live_tensors();
}

/* ---- gather_nd, scatter_nd_add ------------------------------------------------------ */

static void test_gather_nd_scatter_nd_add(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = arange(PD_FLOAT32, 2, SHAPE(2, 3));
  EXPECT_VALUES(pd_gather_nd(x, I64(2, SHAPE(2, 2), 0, 1, 1, 2)), 0, 1, 5);
  pd_tensor *r = pd_gather_nd(x, I64(2, SHAPE(1, 1), 1));
  expect_shape(r, 2, SHAPE(1, 3));
  EXPECT_VALUES(r, 0, 3, 4, 5);
  EXPECT_VALUES(pd_gather_nd(x, I64(2, SHAPE(1, 2), -1, -3)), 0, 3);
  pd_tensor *k0 = pd_gather_nd(x, pd_zeros(2, SHAPE(2, 0), PD_INT64));
  expect_shape(k0, 3, SHAPE(2, 2, 3));
  EXPECT_VALUES(k0, 0, 0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5);
  EXPECT_VALUES(pd_gather_nd(arange(PD_INT64, 3, SHAPE(2, 2, 2)), I64(2, SHAPE(1, 2), 1, 0)), 0, 4, 5);
  EXPECT_VALUES(pd_gather_nd(pd_transpose(x, 2, SHAPE(1, 0)), I64(2, SHAPE(1, 2), 2, 1)), 0, 5);
  expect_error(pd_gather_nd(x, I64(2, SHAPE(1, 2), 1, 3)),
               "gather_nd: index[0, 1] = 3 is out of range for axis 1 of size 3", "valid range [-3, 3)");
  expect_error(pd_gather_nd(x, I64(2, SHAPE(1, 3), 0, 0, 0)), "gather_nd", "more than the rank 2");
  /* scatter_nd_add */
  pd_tensor *b = pd_ones(2, SHAPE(3, 2), PD_FLOAT32);
  pd_tensor *u = T(PD_FLOAT32, 2, SHAPE(3, 2), 1, 2, 3, 4, 5, 6);
  EXPECT_VALUES(pd_scatter_nd_add(b, I64(2, SHAPE(3, 1), 2, 0, 2), u), 0, 4, 5, 1, 1, 7, 9);
  EXPECT_VALUES(pd_scatter_nd_add(b, I64(2, SHAPE(2, 2), 0, 1, 2, 0), T(PD_FLOAT32, 1, SHAPE(2), 10, 20)), 0,
                1, 11, 1, 1, 21, 1);
  expect_error(pd_scatter_nd_add(b, I64(2, SHAPE(1, 1), -1), T(PD_FLOAT32, 2, SHAPE(1, 2), 1, 1)),
               "scatter_nd_add: index[0, 0] = -1 is out of range for axis 0 of size 3", "valid range [0, 3)");
  expect_error(pd_scatter_nd_add(b, I64(2, SHAPE(1, 1), 0), T(PD_FLOAT32, 1, SHAPE(2), 1, 1)),
               "scatter_nd_add", "updates has shape [2]");
  /* grads */
  pd_tensor *xg = leaf(arange(PD_FLOAT64, 2, SHAPE(2, 2)));
  pd_tensor *y = pd_gather_nd(xg, I64(2, SHAPE(3, 2), 0, 1, 0, 1, -1, 0));
  assert_int_equal(pd_backward(wsum(y, T(PD_FLOAT64, 1, SHAPE(3), 1, 2, 3)), NULL, false), PD_OK);
  EXPECT_VALUES(pd_tensor_grad(xg), 0, 0, 3, 3, 0);
  pd_tensor *bg = leaf(pd_zeros(2, SHAPE(2, 2), PD_FLOAT64)), *ug = leaf(pd_ones(2, SHAPE(2, 2), PD_FLOAT64));
  pd_tensor *w = T(PD_FLOAT64, 2, SHAPE(2, 2), 1, 2, 3, 4);
  assert_int_equal(pd_backward(wsum(pd_scatter_nd_add(bg, I64(2, SHAPE(2, 1), 1, 1), ug), w), NULL, false),
                   PD_OK);
  EXPECT_VALUES(pd_tensor_grad(bg), 0, 1, 2, 3, 4);
  EXPECT_VALUES(pd_tensor_grad(ug), 0, 3, 4, 3, 4);
  pd_scope_end();
  expect_no_live_tensors();
}

/* ---- scatter, scatter_ ------------------------------------------------------------- */

static void test_scatter(void **state) {
  (void)state;
  pd_scope_begin();
  /* Paddle's documented example */
  pd_tensor *x = T(PD_FLOAT32, 2, SHAPE(3, 2), 1, 1, 2, 2, 3, 3);
  pd_tensor *idx = I64(1, SHAPE(4), 2, 1, 0, 1);
  pd_tensor *upd = T(PD_FLOAT32, 2, SHAPE(4, 2), 1, 1, 2, 2, 3, 3, 4, 4);
  EXPECT_VALUES(pd_scatter(x, idx, upd, true), 0, 3, 3, 4, 4, 1, 1); /* last duplicate wins */
  EXPECT_VALUES(pd_scatter(x, idx, upd, false), 0, 3, 3, 6, 6, 1, 1);
  EXPECT_VALUES(pd_scatter(x, I64(0, NULL, 1), T(PD_FLOAT32, 1, SHAPE(2), 9, 8), true), 0, 1, 1, 9, 8, 3, 3);
  EXPECT_VALUES(pd_scatter(x, T(PD_INT32, 2, SHAPE(1, 1), 0), T(PD_FLOAT32, 2, SHAPE(1, 2), 7, 7), true), 0,
                7, 7, 2, 2, 3, 3);
  EXPECT_VALUES(
      pd_scatter(arange(PD_INT64, 1, SHAPE(3)), I64(1, SHAPE(2), 0, 0), I64(1, SHAPE(2), 5, 6), false), 0, 11,
      1, 2);
  expect_error(pd_scatter(x, I64(1, SHAPE(2), 0, -1), T(PD_FLOAT32, 2, SHAPE(2, 2), 1, 1, 1, 1), true),
               "scatter: index[1] = -1 is out of range for axis 0 of size 3", "valid range [0, 3)");
  expect_error(pd_scatter(x, I64(1, SHAPE(2), 0, 1), pd_zeros(2, SHAPE(2, 3), PD_FLOAT32), true), "scatter",
               "updates has shape [2, 3]");
  expect_error(pd_scatter(x, T(PD_FLOAT32, 1, SHAPE(1), 0), pd_zeros(2, SHAPE(1, 2), PD_FLOAT32), true),
               "scatter", "int32 or int64");
  /* inplace */
  pd_tensor *xi = pd_clone(x, PD_NUM_DTYPES);
  uint32_t v0 = pd_tensor_version(xi);
  assert_ptr_equal(pd_scatter_(xi, idx, upd, true), xi);
  EXPECT_VALUES(xi, 0, 3, 3, 4, 4, 1, 1);
  assert_true(pd_tensor_version(xi) > v0);
  pd_tensor *base = arange(PD_FLOAT32, 2, SHAPE(2, 3));
  pd_tensor *tv = pd_transpose(base, 2, SHAPE(1, 0)); /* non-contiguous: writes through to base */
  assert_non_null(pd_scatter_(tv, I64(1, SHAPE(1), 1), T(PD_FLOAT32, 2, SHAPE(1, 2), 9, 9), true));
  EXPECT_VALUES(base, 0, 0, 9, 2, 3, 9, 5);
  /* grads: scattered rows of x get none; updates get the grad at their index */
  pd_tensor *p = leaf(arange(PD_FLOAT64, 2, SHAPE(3, 2))), *u = leaf(pd_ones(2, SHAPE(2, 2), PD_FLOAT64));
  pd_tensor *w = T(PD_FLOAT64, 2, SHAPE(3, 2), 1, 2, 3, 4, 5, 6);
  expect_error(pd_scatter_(p, I64(1, SHAPE(2), 2, 0), u, true), "scatter_", "leaf");
  pd_tensor *y = pd_scale(p, 2.0, 0.0, true);
  assert_ptr_equal(pd_scatter_(y, I64(1, SHAPE(2), 2, 0), u, true), y);
  EXPECT_VALUES(y, 0, 1, 1, 4, 6, 1, 1);
  assert_int_equal(pd_backward(wsum(y, w), NULL, false), PD_OK);
  EXPECT_VALUES(pd_tensor_grad(p), 0, 0, 0, 6, 8, 0, 0);
  EXPECT_VALUES(pd_tensor_grad(u), 0, 5, 6, 1, 2);
  /* x that needs no grad takes the node when updates does */
  pd_tensor *xs = pd_zeros(2, SHAPE(2, 1), PD_FLOAT64), *us = leaf(T(PD_FLOAT64, 2, SHAPE(1, 1), 5));
  assert_ptr_equal(pd_scatter_(xs, I64(1, SHAPE(1), 1), us, false), xs);
  assert_false(pd_tensor_stop_gradient(xs));
  EXPECT_VALUES(xs, 0, 0, 5);
  assert_int_equal(pd_backward(wsum(xs, T(PD_FLOAT64, 2, SHAPE(2, 1), 3, 4)), NULL, false), PD_OK);
  EXPECT_VALUES(pd_tensor_grad(us), 0, 4);
  /* overwrite with duplicates: every duplicate receives the grad (Paddle's rule) */
  pd_tensor *x3 = leaf(pd_zeros(2, SHAPE(3, 1), PD_FLOAT64)), *u3 = leaf(pd_ones(2, SHAPE(2, 1), PD_FLOAT64));
  pd_tensor *o3 = pd_scatter(x3, I64(1, SHAPE(2), 1, 1), u3, true);
  assert_int_equal(pd_backward(wsum(o3, T(PD_FLOAT64, 2, SHAPE(3, 1), 1, 2, 3)), NULL, false), PD_OK);
  EXPECT_VALUES(pd_tensor_grad(x3), 0, 1, 0, 3);
  EXPECT_VALUES(pd_tensor_grad(u3), 0, 2, 2);
  pd_scope_end();
  expect_no_live_tensors();
}

/* ---- masked_select, nonzero, one_hot ------------------------------------------------- */

static void test_masked_select(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = arange(PD_FLOAT32, 2, SHAPE(2, 3));
  pd_tensor *m = pd_masked_select(x, T(PD_BOOL, 2, SHAPE(2, 3), 1, 0, 1, 0, 0, 1));
  expect_shape(m, 1, SHAPE(3));
  EXPECT_VALUES(m, 0, 0, 2, 5);
  EXPECT_VALUES(pd_masked_select(x, T(PD_BOOL, 1, SHAPE(3), 0, 1, 1)), 0, 1, 2, 4, 5);
  EXPECT_VALUES(
      pd_masked_select(T(PD_FLOAT32, 1, SHAPE(3), 1, 2, 3), T(PD_BOOL, 2, SHAPE(2, 3), 1, 0, 1, 0, 1, 0)), 0,
      1, 3, 2);
  expect_shape(pd_masked_select(x, pd_zeros(2, SHAPE(2, 3), PD_BOOL)), 1, SHAPE(0));
  EXPECT_VALUES(
      pd_masked_select(pd_transpose(x, 2, SHAPE(1, 0)), T(PD_BOOL, 2, SHAPE(3, 2), 1, 1, 0, 0, 0, 1)), 0, 0,
      3, 5);
  EXPECT_VALUES(pd_masked_select(arange(PD_INT64, 1, SHAPE(3)), T(PD_BOOL, 1, SHAPE(3), 0, 0, 1)), 0, 2);
  expect_error(pd_masked_select(x, I64(1, SHAPE(3), 1, 0, 1)), "masked_select", "bool");
  expect_error(pd_masked_select(x, T(PD_BOOL, 1, SHAPE(2), 1, 0)), "masked_select", "cannot be broadcast");
  pd_tensor *xg = leaf(arange(PD_FLOAT64, 2, SHAPE(2, 3)));
  pd_tensor *y = pd_masked_select(xg, T(PD_BOOL, 1, SHAPE(3), 1, 0, 1));
  assert_int_equal(pd_backward(wsum(y, T(PD_FLOAT64, 1, SHAPE(4), 1, 2, 3, 4)), NULL, false), PD_OK);
  EXPECT_VALUES(pd_tensor_grad(xg), 0, 1, 0, 2, 3, 0, 4);
  pd_tensor *xb = leaf(arange(PD_FLOAT64, 1, SHAPE(3)));
  pd_tensor *yb = pd_masked_select(xb, pd_ones(2, SHAPE(2, 3), PD_BOOL));
  assert_int_equal(pd_backward(pd_sum(yb, NULL, 0, false), NULL, false), PD_OK);
  EXPECT_VALUES(pd_tensor_grad(xb), 0, 2, 2, 2);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_nonzero(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = T(PD_FLOAT32, 2, SHAPE(2, 3), 0, 1, 0, 2, 0, -0.0);
  pd_tensor *nz = pd_nonzero(x);
  expect_shape(nz, 2, SHAPE(2, 2));
  assert_int_equal(pd_tensor_dtype(nz), PD_INT64);
  EXPECT_VALUES(nz, 0, 0, 1, 1, 0);
  EXPECT_VALUES(pd_nonzero(T(PD_FLOAT64, 1, SHAPE(3), NAN, 0, 1)), 0, 0, 2);
  EXPECT_VALUES(pd_nonzero(T(PD_BOOL, 1, SHAPE(3), 0, 1, 1)), 0, 1, 2);
  EXPECT_VALUES(pd_nonzero(pd_transpose(I64(2, SHAPE(2, 2), 0, 5, 0, 0), 2, SHAPE(1, 0))), 0, 1, 0);
  expect_shape(pd_nonzero(pd_zeros(2, SHAPE(2, 3), PD_FLOAT32)), 2, SHAPE(0, 2));
  expect_shape(pd_nonzero(T(PD_INT32, 0, NULL, 5)), 2, SHAPE(1, 0));
  pd_tensor *o[4];
  assert_int_equal(pd_nonzero_tuple(x, o, 4), 2);
  expect_shape(o[0], 2, SHAPE(2, 1));
  EXPECT_VALUES(o[0], 0, 0, 1);
  EXPECT_VALUES(o[1], 0, 1, 0);
  expect_status_error(pd_nonzero_tuple(x, o, 1), "nonzero", "holds only 1");
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_one_hot(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *o = pd_one_hot(I64(1, SHAPE(3), 0, 2, 1), 3);
  expect_shape(o, 2, SHAPE(3, 3));
  assert_int_equal(pd_tensor_dtype(o), PD_FLOAT32);
  EXPECT_VALUES(o, 0, 1, 0, 0, 0, 0, 1, 0, 1, 0);
  pd_tensor *o2 = pd_one_hot(T(PD_INT32, 2, SHAPE(2, 1), 3, 0), 4);
  expect_shape(o2, 3, SHAPE(2, 1, 4));
  EXPECT_VALUES(o2, 0, 0, 0, 0, 1, 1, 0, 0, 0);
  expect_error(pd_one_hot(I64(1, SHAPE(2), 1, 5), 4), "one_hot: x[1] = 5 is out of range for num_classes 4",
               "valid range [0, 4)");
  expect_error(pd_one_hot(I64(1, SHAPE(1), -1), 4), "one_hot", "x[0] = -1");
  expect_error(pd_one_hot(T(PD_FLOAT32, 1, SHAPE(1), 1), 4), "one_hot", "int32 or int64");
  expect_error(pd_one_hot(I64(1, SHAPE(1), 0), 0), "one_hot", "positive");
  pd_scope_end();
  expect_no_live_tensors();
}

/* ---- embedding ------------------------------------------------------------------ */

static void test_embedding(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *w = T(PD_FLOAT32, 2, SHAPE(4, 2), 0, 1, 10, 11, 20, 21, 30, 31);
  pd_tensor *ids = I64(2, SHAPE(2, 2), 3, 0, 0, 2);
  pd_tensor *e = pd_embedding(ids, w, PD_NO_PADDING);
  expect_shape(e, 3, SHAPE(2, 2, 2));
  EXPECT_VALUES(e, 0, 30, 31, 0, 1, 0, 1, 20, 21);
  EXPECT_VALUES(pd_embedding(ids, w, 0), 0, 30, 31, 0, 0, 0, 0, 20, 21);
  EXPECT_VALUES(pd_embedding(T(PD_INT32, 1, SHAPE(2), 3, 1), w, -1), 0, 0, 0, 10, 11);
  EXPECT_VALUES(
      pd_embedding(ids, pd_transpose(T(PD_FLOAT32, 2, SHAPE(2, 4), 0, 1, 2, 3, 4, 5, 6, 7), 2, SHAPE(1, 0)),
                   PD_NO_PADDING),
      0, 3, 7, 0, 4, 0, 4, 2, 6);
  expect_error(pd_embedding(I64(2, SHAPE(1, 2), 1, 7), w, PD_NO_PADDING),
               "embedding: x[0, 1] = 7 is out of range for axis 0 of size 4", "valid range [0, 4)");
  expect_error(pd_embedding(ids, w, 4), "embedding", "padding_idx 4");
  expect_error(pd_embedding(ids, T(PD_FLOAT32, 1, SHAPE(2), 1, 2), PD_NO_PADDING), "embedding", "2-D");
  expect_error(pd_embedding(T(PD_FLOAT32, 1, SHAPE(1), 0), w, PD_NO_PADDING), "embedding", "int32 or int64");
  /* duplicates accumulate, the padding row gets nothing */
  pd_tensor *wg = leaf(arange(PD_FLOAT64, 2, SHAPE(4, 2)));
  pd_tensor *y = pd_embedding(I64(1, SHAPE(4), 1, 3, 1, 2), wg, 3);
  EXPECT_VALUES(y, 0, 2, 3, 0, 0, 2, 3, 4, 5);
  assert_int_equal(pd_backward(wsum(y, T(PD_FLOAT64, 2, SHAPE(4, 2), 1, 2, 3, 4, 5, 6, 7, 8)), NULL, false),
                   PD_OK);
  EXPECT_VALUES(pd_tensor_grad(wg), 0, 0, 0, 6, 8, 7, 8, 0, 0);
  /* double backward: L = sum(emb^2) with ids [0, 1, 0] -> dL/dW = [4 W0, 2 W1, 0, 0] */
  pd_tensor *w2 = leaf(arange(PD_FLOAT64, 2, SHAPE(4, 2)));
  pd_tensor *e2 = pd_embedding(I64(1, SHAPE(3), 0, 1, 0), w2, PD_NO_PADDING);
  pd_tensor *L = pd_sum(pd_multiply(e2, e2), NULL, 0, false), *g = NULL, *gg = NULL;
  assert_int_equal(pd_grad(&L, 1, &w2, 1, NULL, &(pd_grad_opts){.create_graph = true}, &g), PD_OK);
  EXPECT_VALUES(g, 1e-12, 0, 4, 4, 6, 0, 0, 0, 0);
  pd_tensor *L2 = pd_sum(g, NULL, 0, false);
  assert_int_equal(pd_grad(&L2, 1, &w2, 1, NULL, NULL, &gg), PD_OK);
  EXPECT_VALUES(gg, 1e-12, 4, 4, 2, 2, 0, 0, 0, 0);
  pd_scope_end();
  expect_no_live_tensors();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_reshape_inplace),
      cmocka_unit_test(test_flatten),
      cmocka_unit_test(test_squeeze_unsqueeze),
      cmocka_unit_test(test_broadcast_expand_as),
      cmocka_unit_test(test_tile),
      cmocka_unit_test(test_concat),
      cmocka_unit_test(test_stack),
      cmocka_unit_test(test_split),
      cmocka_unit_test(test_chunk_unbind),
      cmocka_unit_test(test_slice),
      cmocka_unit_test(test_strided_slice),
      cmocka_unit_test(test_roll),
      cmocka_unit_test(test_flip),
      cmocka_unit_test(test_tril_triu),
      cmocka_unit_test(test_assign),
      cmocka_unit_test(test_gather_index_select),
      cmocka_unit_test(test_index_add_sample),
      cmocka_unit_test(test_gather_nd_scatter_nd_add),
      cmocka_unit_test(test_scatter),
      cmocka_unit_test(test_masked_select),
      cmocka_unit_test(test_nonzero),
      cmocka_unit_test(test_one_hot),
      cmocka_unit_test(test_embedding),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
