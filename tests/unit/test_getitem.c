/* Python indexing with an index spec: x[..., :n], x[idx] with an integer
 * tensor of any shape, x[None, :, None, :], negative steps, bool masks,
 * x[...] = v in place and as a differentiable copy; gradients against
 * central finite differences; the errors. */
#include <math.h>
#include <string.h>

#include "test_util.h"

/* x = arange(24) as [2, 3, 4] float64 */
static pd_tensor *x234(void) {
  pd_tensor *a = pd_arange(0, 24, 1, PD_FLOAT64);
  pd_tensor *x = pd_reshape(a, 3, SHAPE(2, 3, 4));
  pd_tensor_release(a);
  return x;
}

static void expect_get(pd_tensor *x, const pd_index *idx, int n, int nd, const int64_t *shape,
                       const double *want) {
  pd_tensor *y = pd_getitem(x, idx, n);
  assert_non_null(y);
  expect_shape(y, nd, shape);
  expect_values(y, want, pd_tensor_numel(y), 0);
  pd_tensor_release(y);
}

static void test_basic_forms(void **state) {
  (void)state;
  pd_tensor *x = x234();
  /* x[..., :2] */
  expect_get(x, (pd_index[]){PD_IX_ELLIPSIS, PD_IX_SLICE(PD_IX_END, 2, 1)}, 2, 3, SHAPE(2, 3, 2),
             (double[]){0, 1, 4, 5, 8, 9, 12, 13, 16, 17, 20, 21});
  /* x[1, -1] and x[-1, 0, -2] */
  expect_get(x, (pd_index[]){PD_IX(1), PD_IX(-1)}, 2, 1, SHAPE(4), (double[]){20, 21, 22, 23});
  expect_get(x, (pd_index[]){PD_IX(-1), PD_IX(0), PD_IX(-2)}, 3, 0, NULL, (double[]){14});
  /* x[:, ::-1, 1] and x[0, 2:0:-1] and x[0, ::2, 3:0:-2] */
  expect_get(x, (pd_index[]){PD_IX_ALL, PD_IX_SLICE(PD_IX_END, PD_IX_END, -1), PD_IX(1)}, 3, 2, SHAPE(2, 3),
             (double[]){9, 5, 1, 21, 17, 13});
  expect_get(x, (pd_index[]){PD_IX(0), PD_IX_SLICE(2, 0, -1)}, 2, 2, SHAPE(2, 4),
             (double[]){8, 9, 10, 11, 4, 5, 6, 7});
  expect_get(x, (pd_index[]){PD_IX(0), PD_IX_SLICE(PD_IX_END, PD_IX_END, 2), PD_IX_SLICE(3, 0, -2)}, 3, 2,
             SHAPE(2, 2), (double[]){3, 1, 11, 9});
  /* out-of-range slice bounds clamp; an empty slice */
  expect_get(x, (pd_index[]){PD_IX(0), PD_IX(0), PD_IX_SLICE(-100, 100, 3)}, 3, 1, SHAPE(2),
             (double[]){0, 3});
  pd_tensor *e = pd_getitem(x, (pd_index[]){PD_IX_SLICE(1, 1, 1)}, 1);
  expect_shape(e, 3, SHAPE(0, 3, 4));
  pd_tensor_release(e);
  /* x[None, :, None, :] on a 2-D tensor */
  pd_tensor *m = T(PD_FLOAT32, 2, SHAPE(2, 2), 1, 2, 3, 4);
  expect_get(m, (pd_index[]){PD_IX_NEWAXIS, PD_IX_ALL, PD_IX_NEWAXIS, PD_IX_ALL}, 4, 4, SHAPE(1, 2, 1, 2),
             (double[]){1, 2, 3, 4});
  /* x[...] is a copy, not a view */
  pd_tensor *c = pd_getitem(m, (pd_index[]){PD_IX_ELLIPSIS}, 1);
  assert_true(pd_tensor_data(c) != pd_tensor_data(m));
  pd_tensor_release(c);
  pd_tensor_release(m);
  pd_tensor_release(x);
  expect_no_live_tensors();
}

static void test_tensor_indices(void **state) {
  (void)state;
  pd_tensor *x = x234();
  /* x[idx] with idx [2, 2] (any shape), negatives from the end */
  pd_tensor *idx = T(PD_INT64, 2, SHAPE(2, 2), 0, -1, 1, 0);
  expect_get(x, (pd_index[]){PD_IX(1), PD_IX_TENSOR(idx), PD_IX(3)}, 3, 2, SHAPE(2, 2),
             (double[]){15, 23, 19, 15});
  /* the tensor's dims stay where the subscript was: x[:, idx] is [2, 2, 2, 4] */
  pd_tensor *y = pd_getitem(x, (pd_index[]){PD_IX_ALL, PD_IX_TENSOR(idx)}, 2);
  expect_shape(y, 4, SHAPE(2, 2, 2, 4));
  assert_true(pd_tensor_item_at(y, 4) == 8); /* y[0, 0, 1, 0] = x[0, 2, 0] */
  pd_tensor_release(y);
  /* int32 and 0-D index tensors */
  pd_tensor *i0 = T(PD_INT32, 0, NULL, 2);
  expect_get(x, (pd_index[]){PD_IX(0), PD_IX_TENSOR(i0)}, 2, 1, SHAPE(4), (double[]){8, 9, 10, 11});
  /* a bool mask over the last two dims */
  pd_tensor *mask = T(PD_BOOL, 2, SHAPE(3, 4), 1, 0, 0, 0, 0, 0, 0, 1, 0, 0, 1, 0);
  expect_get(x, (pd_index[]){PD_IX_ALL, PD_IX_TENSOR(mask)}, 2, 2, SHAPE(2, 3),
             (double[]){0, 7, 10, 12, 19, 22});
  /* errors: out of range index value, a mask of the wrong shape, two tensors */
  pd_tensor *big = T(PD_INT64, 1, SHAPE(1), 3);
  pd_clear_error();
  assert_null(pd_getitem(x, (pd_index[]){PD_IX(0), PD_IX_TENSOR(big)}, 2));
  assert_int_equal(pd_last_status(), PD_ERR_INDEX);
  assert_non_null(strstr(pd_last_error(), "subscript 1"));
  pd_clear_error();
  assert_null(pd_getitem(x, (pd_index[]){PD_IX_TENSOR(mask)}, 1));
  assert_non_null(strstr(pd_last_error(), "bool mask has shape [3, 4]"));
  pd_clear_error();
  assert_null(pd_getitem(x, (pd_index[]){PD_IX_TENSOR(idx), PD_IX_TENSOR(idx)}, 2));
  assert_int_equal(pd_last_status(), PD_ERR_UNIMPLEMENTED);
  pd_clear_error();
  pd_tensor_release(big);
  pd_tensor_release(mask);
  pd_tensor_release(i0);
  pd_tensor_release(idx);
  pd_tensor_release(x);
  expect_no_live_tensors();
}

static void test_errors(void **state) {
  (void)state;
  pd_tensor *x = x234();
  pd_clear_error();
  assert_null(pd_getitem(x, (pd_index[]){PD_IX(0), PD_IX(3)}, 2));
  assert_non_null(strstr(pd_last_error(), "index 3 is out of range for a dim of size 3"));
  pd_clear_error();
  assert_null(pd_getitem(x, (pd_index[]){PD_IX(0), PD_IX(0), PD_IX(0), PD_IX(0)}, 4));
  assert_non_null(strstr(pd_last_error(), "too many indices"));
  pd_clear_error();
  assert_null(pd_getitem(x, (pd_index[]){PD_IX_ELLIPSIS, PD_IX_ELLIPSIS}, 2));
  assert_non_null(strstr(pd_last_error(), "single ellipsis"));
  pd_clear_error();
  assert_null(pd_getitem(x, (pd_index[]){PD_IX_SLICE(0, 1, 0)}, 1));
  assert_non_null(strstr(pd_last_error(), "step cannot be zero"));
  pd_clear_error();
  pd_tensor *f = T(PD_FLOAT32, 1, SHAPE(1), 0);
  assert_null(pd_getitem(x, (pd_index[]){PD_IX_TENSOR(f)}, 1));
  assert_int_equal(pd_last_status(), PD_ERR_DTYPE);
  pd_clear_error();
  assert_null(pd_getitem(NULL, (pd_index[]){PD_IX(0)}, 1));
  assert_non_null(strstr(pd_last_error(), "getitem"));
  pd_clear_error();
  pd_tensor_release(f);
  pd_tensor_release(x);
  expect_no_live_tensors();
}

static void test_setitem(void **state) {
  (void)state;
  pd_tensor *x = x234();
  /* x[..., 0] = -1 (a 0-D value broadcast) */
  pd_tensor *m1 = T(PD_FLOAT32, 0, NULL, -1);
  assert_int_equal(pd_setitem(x, (pd_index[]){PD_IX_ELLIPSIS, PD_IX(0)}, 2, m1), PD_OK);
  for (int i = 0; i < 24; i++) assert_true(pd_tensor_item_at(x, i) == (i % 4 == 0 ? -1 : i));
  /* x[1, idx] = rows */
  pd_tensor *idx = T(PD_INT64, 1, SHAPE(2), 2, 0);
  pd_tensor *rows = T(PD_FLOAT64, 2, SHAPE(2, 4), 100, 101, 102, 103, 200, 201, 202, 203);
  assert_int_equal(pd_setitem(x, (pd_index[]){PD_IX(1), PD_IX_TENSOR(idx)}, 2, rows), PD_OK);
  assert_true(pd_tensor_item_at(x, 12) == 200 && pd_tensor_item_at(x, 20) == 100 &&
              pd_tensor_item_at(x, 23) == 103);
  assert_true(pd_tensor_item_at(x, 16) == -1); /* row 1 untouched */
  /* x[...] = v with a shape that does not broadcast */
  pd_tensor *bad = pd_zeros(1, SHAPE(3), PD_FLOAT64);
  pd_clear_error();
  assert_true(pd_setitem(x, (pd_index[]){PD_IX_ELLIPSIS}, 1, bad) < 0);
  pd_clear_error();
  /* a tensor that needs a gradient is refused in place */
  pd_tensor *w = pd_ones(1, SHAPE(3), PD_FLOAT64);
  pd_tensor_set_stop_gradient(w, false);
  assert_int_equal(pd_setitem(w, (pd_index[]){PD_IX(0)}, 1, m1), PD_ERR_INVALID);
  assert_non_null(strstr(pd_last_error(), "pd_setitem_out"));
  pd_clear_error();
  pd_tensor_release(w);
  pd_tensor_release(bad);
  pd_tensor_release(rows);
  pd_tensor_release(idx);
  pd_tensor_release(m1);
  pd_tensor_release(x);
  expect_no_live_tensors();
}

/* loss(x, v) = sum(c * getitem(setitem_out(x, spec_set, v), spec_get)),
 * with c a fixed weighting, so every element's gradient differs. */
static double loss_of(pd_tensor *x, pd_tensor *v, pd_tensor *wgt, pd_tensor **lt) {
  pd_tensor *s = pd_setitem_out(x, (pd_index[]){PD_IX_ALL, PD_IX(1)}, 2, v);
  pd_tensor *g = pd_getitem(s, (pd_index[]){PD_IX_ELLIPSIS, PD_IX_SLICE(PD_IX_END, PD_IX_END, -1)}, 2);
  pd_tensor *p = pd_multiply(g, wgt);
  pd_tensor *l = pd_sum(p, NULL, 0, false);
  double r = pd_tensor_item(l);
  pd_tensor_release(s);
  pd_tensor_release(g);
  pd_tensor_release(p);
  if (lt)
    *lt = l;
  else
    pd_tensor_release(l);
  return r;
}

static void check_grad(pd_tensor *t, pd_tensor *x, pd_tensor *v, pd_tensor *wgt) {
  pd_tensor *g = pd_tensor_grad(t);
  assert_non_null(g);
  double *d = pd_tensor_data(t);
  for (int64_t i = 0; i < pd_tensor_numel(t); i++) {
    double keep = d[i], h = 1e-6;
    d[i] = keep + h;
    double up = loss_of(x, v, wgt, NULL);
    d[i] = keep - h;
    double down = loss_of(x, v, wgt, NULL);
    d[i] = keep;
    assert_true(fabs((up - down) / (2 * h) - pd_tensor_item_at(g, i)) < 1e-6);
  }
}

static void test_gradients(void **state) {
  (void)state;
  pd_tensor *x = pd_randn(2, SHAPE(2, 3), PD_FLOAT64), *v = pd_randn(1, SHAPE(1), PD_FLOAT64);
  pd_tensor *wgt = T(PD_FLOAT64, 2, SHAPE(2, 3), 1, 2, 3, 4, 5, 6);
  pd_tensor_set_stop_gradient(x, false);
  pd_tensor_set_stop_gradient(v, false);
  pd_tensor *l;
  loss_of(x, v, wgt, &l);
  assert_int_equal(pd_backward(l, NULL, false), PD_OK);
  pd_tensor_release(l);
  /* column 1 was overwritten: its gradient is 0; v gets the sum there */
  assert_true(pd_tensor_item_at(pd_tensor_grad(x), 1) == 0 && pd_tensor_item_at(pd_tensor_grad(x), 4) == 0);
  assert_true(pd_tensor_item_at(pd_tensor_grad(v), 0) == 2 + 5);
  check_grad(x, x, v, wgt);
  check_grad(v, x, v, wgt);
  /* a tensor index and a mask: gradients accumulate at repeated indices */
  pd_tensor *y = pd_randn(1, SHAPE(4), PD_FLOAT64);
  pd_tensor_set_stop_gradient(y, false);
  pd_tensor *idx = T(PD_INT64, 2, SHAPE(2, 2), 0, 3, 3, -4);
  pd_tensor *g = pd_getitem(y, (pd_index[]){PD_IX_TENSOR(idx)}, 1);
  pd_tensor *sg = pd_sum(g, NULL, 0, false);
  assert_int_equal(pd_backward(sg, NULL, false), PD_OK);
  EXPECT_VALUES(pd_tensor_grad(y), 0, 2, 0, 0, 2);
  pd_tensor_release(sg);
  pd_tensor_release(g);
  pd_tensor_release(idx);
  pd_tensor_release(y);
  pd_tensor_release(wgt);
  pd_tensor_release(v);
  pd_tensor_release(x);
  expect_no_live_tensors();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_basic_forms), cmocka_unit_test(test_tensor_indices),
      cmocka_unit_test(test_errors),      cmocka_unit_test(test_setitem),
      cmocka_unit_test(test_gradients),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
