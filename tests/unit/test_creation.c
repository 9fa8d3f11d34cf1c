/* Creation ops: arange (Paddle's dtype inference), linspace, eye, and the
 * full family (full, zeros, ones, empty, _like, to_tensor). Expected values
 * are written out by hand from Paddle's definitions. */
#include <math.h>
#include <string.h>

#include "ops/op_registry.h"
#include "test_util.h"

static void test_arange_infers_dtype(void **state) {
  (void)state;
  pd_scope_begin();
  /* paddle.arange(5): integers give int64 */
  pd_tensor *a = pd_arange(0, 5, 1, PD_NUM_DTYPES);
  assert_int_equal(pd_tensor_dtype(a), PD_INT64);
  expect_shape(a, 1, SHAPE(5));
  EXPECT_VALUES(a, 0, 0, 1, 2, 3, 4);
  /* any non-integral argument gives float32 */
  pd_tensor *b = pd_arange(0, 1, 0.25, PD_NUM_DTYPES);
  assert_int_equal(pd_tensor_dtype(b), PD_FLOAT32);
  EXPECT_VALUES(b, 0, 0, 0.25, 0.5, 0.75);
  pd_tensor *c = pd_arange(0.5, 3, 1, PD_NUM_DTYPES);
  assert_int_equal(pd_tensor_dtype(c), PD_FLOAT32);
  EXPECT_VALUES(c, 0, 0.5, 1.5, 2.5);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_arange_sizes_and_dtypes(void **state) {
  (void)state;
  pd_scope_begin();
  /* negative step counts down; the end stays excluded */
  EXPECT_VALUES(pd_arange(5, 0, -2, PD_NUM_DTYPES), 0, 5, 3, 1);
  EXPECT_VALUES(pd_arange(-3, 3, 2, PD_INT32), 0, -3, -1, 1);
  assert_int_equal(pd_tensor_dtype(pd_arange(-3, 3, 2, PD_INT32)), PD_INT32);
  /* ceil((10 - 0) / 3) = 4 */
  pd_tensor *d = pd_arange(0, 10, 3, PD_FLOAT64);
  assert_int_equal(pd_tensor_dtype(d), PD_FLOAT64);
  EXPECT_VALUES(d, 0, 0, 3, 6, 9);
  /* step pointing away from end, or start == end: no elements */
  expect_shape(pd_arange(0, 5, -1, PD_NUM_DTYPES), 1, SHAPE(0));
  expect_shape(pd_arange(3, 3, 1, PD_NUM_DTYPES), 1, SHAPE(0));
  /* float32 counts in float32: 0.1f steps to 1 give 10 elements */
  pd_tensor *e = pd_arange(0, 1, 0.1, PD_FLOAT32);
  expect_shape(e, 1, SHAPE(10));
  assert_float_equal(pd_tensor_item_at(e, 9), (double)(float)(9 * (double)0.1f), 1e-7);
  /* half dtypes */
  pd_tensor *h = pd_arange(0, 2, 0.5, PD_FLOAT16);
  assert_int_equal(pd_tensor_dtype(h), PD_FLOAT16);
  EXPECT_VALUES(h, 0, 0, 0.5, 1, 1.5);
  EXPECT_VALUES(pd_arange(1, 4, 1, PD_BFLOAT16), 0, 1, 2, 3);
  /* integer dtype truncates the arguments as Paddle's cast does */
  EXPECT_VALUES(pd_arange(0.7, 3.9, 1.2, PD_INT64), 0, 0, 1, 2);
  /* a long range runs on several threads: spot-check values */
  pd_tensor *big = pd_arange(0, 300000, 1, PD_INT64);
  expect_shape(big, 1, SHAPE(300000));
  assert_int_equal((int64_t)pd_tensor_item_at(big, 299999), 299999);
  assert_int_equal((int64_t)pd_tensor_item_at(big, 123457), 123457);
  pd_tensor *bigf = pd_arange(-1, 1, 1.0 / 65536, PD_FLOAT64);
  expect_shape(bigf, 1, SHAPE(131072));
  assert_true(pd_tensor_item_at(bigf, 70000) == -1.0 + 70000.0 / 65536);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_arange_errors(void **state) {
  (void)state;
  pd_scope_begin();
  expect_error(pd_arange(0, 5, 0, PD_NUM_DTYPES), "arange", "step must not be 0");
  /* 0.5 truncates to a 0 step for int64 */
  expect_error(pd_arange(0, 5, 0.5, PD_INT64), "arange", "step 0.5");
  expect_error(pd_arange(0, 5, 1, PD_BOOL), "arange", "bool");
  expect_error(pd_arange(0, 5, 1, PD_UINT8), "arange", "uint8");
  expect_error(pd_arange(0, NAN, 1, PD_FLOAT32), "arange", "finite");
  expect_error(pd_arange(0, INFINITY, 1, PD_FLOAT32), "arange", "end inf");
  expect_error(pd_arange(0, 3e9, 1, PD_INT32), "arange", "int32");
  expect_error(pd_arange(0, 1e18, 1e-9, PD_FLOAT64), "arange", "too many");
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_linspace(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *a = pd_linspace(0, 1, 5, PD_NUM_DTYPES);
  assert_int_equal(pd_tensor_dtype(a), PD_FLOAT32);
  EXPECT_VALUES(a, 0, 0, 0.25, 0.5, 0.75, 1);
  pd_tensor *b = pd_linspace(-1, 1, 3, PD_FLOAT64);
  EXPECT_VALUES(b, 0, -1, 0, 1);
  /* both ends are exact even when the step is not: 0.1 * 9 would not be 0.9 */
  pd_tensor *c = pd_linspace(0, 0.9, 10, PD_FLOAT64);
  assert_true(pd_tensor_item_at(c, 9) == 0.9);
  assert_true(pd_tensor_item_at(c, 0) == 0.0);
  /* decreasing */
  EXPECT_VALUES(pd_linspace(10, 0, 3, PD_FLOAT32), 0, 10, 5, 0);
  /* num == 1 gives start; num == 0 an empty tensor */
  EXPECT_VALUES(pd_linspace(7, 9, 1, PD_FLOAT32), 0, 7);
  expect_shape(pd_linspace(0, 1, 0, PD_FLOAT32), 1, SHAPE(0));
  /* integer dtypes truncate: step 10/3, 0, 3.33 -> 3, 10 - 3.33 -> 6, 10 */
  pd_tensor *d = pd_linspace(0, 10, 4, PD_INT64);
  assert_int_equal(pd_tensor_dtype(d), PD_INT64);
  EXPECT_VALUES(d, 0, 0, 3, 6, 10);
  EXPECT_VALUES(pd_linspace(0, 6, 4, PD_INT32), 0, 0, 2, 4, 6);
  /* many elements: monotone, exact ends */
  pd_tensor *e = pd_linspace(-2, 2, 200001, PD_FLOAT64);
  assert_true(pd_tensor_item_at(e, 200000) == 2.0);
  assert_float_equal(pd_tensor_item_at(e, 100000), 0.0, 1e-15);
  assert_float_equal(pd_tensor_item_at(e, 150000), 1.0, 1e-15);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_linspace_errors(void **state) {
  (void)state;
  pd_scope_begin();
  expect_error(pd_linspace(0, 1, -1, PD_FLOAT32), "linspace", "num -1");
  expect_error(pd_linspace(0, 1, 3, PD_BOOL), "linspace", "bool");
  expect_error(pd_linspace(0, INFINITY, 3, PD_FLOAT32), "linspace", "stop inf");
  expect_error(pd_linspace(0, 1e10, 3, PD_INT32), "linspace", "int32");
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_eye(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *a = pd_eye(3, -1, PD_NUM_DTYPES);
  assert_int_equal(pd_tensor_dtype(a), PD_FLOAT32);
  expect_shape(a, 2, SHAPE(3, 3));
  EXPECT_VALUES(a, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1);
  pd_tensor *b = pd_eye(2, 3, PD_INT64);
  assert_int_equal(pd_tensor_dtype(b), PD_INT64);
  EXPECT_VALUES(b, 0, 1, 0, 0, 0, 1, 0);
  pd_tensor *c = pd_eye(3, 2, PD_BOOL);
  EXPECT_VALUES(c, 0, 1, 0, 0, 1, 0, 0);
  EXPECT_VALUES(pd_eye(2, -1, PD_FLOAT16), 0, 1, 0, 0, 1);
  EXPECT_VALUES(pd_eye(2, 2, PD_BFLOAT16), 0, 1, 0, 0, 1);
  expect_shape(pd_eye(0, -1, PD_FLOAT32), 2, SHAPE(0, 0));
  expect_shape(pd_eye(4, 0, PD_FLOAT32), 2, SHAPE(4, 0));
  expect_error(pd_eye(-1, -1, PD_FLOAT32), "eye", "num_rows -1");
  expect_error(pd_eye(2, -3, PD_FLOAT32), "eye", "num_columns -3");
  expect_error(pd_eye(2, 2, (pd_dtype)42), "eye", "dtype 42");
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_full_family(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *f = pd_full(2, SHAPE(2, 2), 2.5, PD_FLOAT64);
  EXPECT_VALUES(f, 0, 2.5, 2.5, 2.5, 2.5);
  /* an integer dtype truncates the value, as Paddle's full */
  EXPECT_VALUES(pd_full(1, SHAPE(3), 3.7, PD_INT32), 0, 3, 3, 3);
  EXPECT_VALUES(pd_full(1, SHAPE(2), -0.0, PD_FLOAT32), 0, 0, 0);
  assert_true(signbit(pd_tensor_item_at(pd_full(1, SHAPE(2), -0.0, PD_FLOAT32), 1)));
  EXPECT_VALUES(pd_full(1, SHAPE(2), 1, PD_BOOL), 0, 1, 1);
  EXPECT_VALUES(pd_full(1, SHAPE(2), 1.5, PD_FLOAT16), 0, 1.5, 1.5);
  EXPECT_VALUES(pd_zeros(1, SHAPE(3), PD_INT8), 0, 0, 0, 0);
  EXPECT_VALUES(pd_ones(1, SHAPE(3), PD_UINT8), 0, 1, 1, 1);
  /* a large fill runs on several threads */
  pd_tensor *big = pd_full(1, SHAPE(200000), -4, PD_INT16);
  assert_int_equal((int)pd_tensor_item_at(big, 199999), -4);
  expect_shape(pd_empty(2, SHAPE(3, 0), PD_FLOAT32), 2, SHAPE(3, 0));
  /* 0-d */
  pd_tensor *s = pd_full(0, NULL, 9, PD_INT64);
  assert_int_equal(pd_tensor_ndim(s), 0);
  assert_int_equal((int64_t)pd_tensor_item(s), 9);
  /* _like keeps shape, and dtype unless one is given */
  pd_tensor *x = T(PD_FLOAT64, 2, SHAPE(2, 3), 1, 2, 3, 4, 5, 6);
  pd_tensor *zl = pd_zeros_like(x, PD_NUM_DTYPES);
  assert_int_equal(pd_tensor_dtype(zl), PD_FLOAT64);
  expect_shape(zl, 2, SHAPE(2, 3));
  pd_tensor *ol = pd_ones_like(x, PD_INT32);
  assert_int_equal(pd_tensor_dtype(ol), PD_INT32);
  EXPECT_VALUES(ol, 0, 1, 1, 1, 1, 1, 1);
  EXPECT_VALUES(pd_full_like(x, 7, PD_NUM_DTYPES), 0, 7, 7, 7, 7, 7, 7);
  expect_shape(pd_empty_like(x, PD_BOOL), 2, SHAPE(2, 3));
  /* _like of a transposed view takes the view's shape */
  pd_tensor *xt = pd_transpose(x, 2, SHAPE(1, 0));
  expect_shape(pd_ones_like(xt, PD_NUM_DTYPES), 2, SHAPE(3, 2));
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_full_errors(void **state) {
  (void)state;
  pd_scope_begin();
  expect_error(pd_full(2, SHAPE(2, -2), 1, PD_FLOAT32), "full", "shape[1] is -2");
  expect_error(pd_full(10, SHAPE(1, 1, 1, 1, 1, 1, 1, 1, 1, 1), 1, PD_FLOAT32), "full", "rank 10");
  expect_error(pd_full(-1, NULL, 1, PD_FLOAT32), "full", "rank -1");
  expect_error(pd_full(2, NULL, 1, PD_FLOAT32), "full", "NULL");
  expect_error(pd_zeros(1, SHAPE(2), (pd_dtype)99), "full", "dtype 99");
  expect_error(pd_zeros_like(NULL, PD_NUM_DTYPES), "full_like", "NULL");
  /* a NULL input after an error keeps the first message */
  expect_error(pd_full(1, SHAPE(-5), 1, PD_FLOAT32), "shape[0] is -5", NULL);
  pd_tensor *bad = pd_full(1, SHAPE(-5), 1, PD_FLOAT32);
  expect_error(pd_ones_like(bad, PD_NUM_DTYPES), "full", "shape[0] is -5");
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_to_tensor(void **state) {
  (void)state;
  pd_scope_begin();
  float v[6] = {1, 2, 3, 4, 5, 6};
  pd_tensor *t = pd_to_tensor(v, PD_FLOAT32, 2, SHAPE(3, 2));
  expect_shape(t, 2, SHAPE(3, 2));
  EXPECT_VALUES(t, 0, 1, 2, 3, 4, 5, 6);
  v[0] = 100; /* a copy: later writes to the source do not show */
  assert_true(pd_tensor_item_at(t, 0) == 1.0);
  int64_t iv[1] = {-9};
  pd_tensor *s = pd_to_tensor(iv, PD_INT64, 0, NULL);
  assert_int_equal(pd_tensor_ndim(s), 0);
  assert_int_equal((int64_t)pd_tensor_item(s), -9);
  expect_shape(pd_to_tensor(v, PD_FLOAT32, 2, SHAPE(0, 4)), 2, SHAPE(0, 4));
  expect_error(pd_to_tensor(NULL, PD_FLOAT32, 1, SHAPE(2)), "to_tensor", "data is NULL");
  expect_error(pd_to_tensor(v, PD_FLOAT32, 1, SHAPE(-3)), "to_tensor", "shape[0] is -3");
  expect_error(pd_to_tensor(v, PD_FLOAT32, 10, SHAPE(1, 1, 1, 1, 1, 1, 1, 1, 1, 1)), "to_tensor", "rank 10");
  expect_error(pd_to_tensor(v, PD_FLOAT32, 2, NULL), "to_tensor", "shape is NULL");
  expect_error(pd_to_tensor(v, (pd_dtype)-1, 1, SHAPE(2)), "to_tensor", "dtype -1");
  expect_error(pd_tensor_from_f64(NULL, PD_FLOAT32, 1, SHAPE(2)), "tensor_from_f64", "NULL");
  expect_error(pd_tensor_from_f64((const double[]){1}, PD_FLOAT32, 1, SHAPE(-1)), "tensor_from_f64", "-1");
  pd_scope_end();
  expect_no_live_tensors();
}

/* The creation ops sit in the registry with no inputs; the random ones are
 * flagged as drawing from the generator, and none is differentiable. */
static void test_registry_rows(void **state) {
  (void)state;
  const char *plain[] = {"arange", "linspace", "eye", "full"};
  const char *random[] = {"uniform",     "gaussian", "truncated_gaussian_random", "randint", "bernoulli",
                          "multinomial", "randperm"};
  for (size_t i = 0; i < sizeof plain / sizeof *plain; i++) {
    int id = pd_op_find(plain[i]);
    assert_true(id >= 0);
    assert_int_equal(pd_op_table[id]->n_in, 0);
    assert_false(pd_op_table[id]->flags & (PD_OPF_RANDOM | PD_OPF_DIFF));
  }
  for (size_t i = 0; i < sizeof random / sizeof *random; i++) {
    int id = pd_op_find(random[i]);
    assert_true(id >= 0);
    bool with_input = strcmp(random[i], "bernoulli") == 0 || strcmp(random[i], "multinomial") == 0;
    assert_int_equal(pd_op_table[id]->n_in, with_input ? 1 : 0);
    assert_true(pd_op_table[id]->flags & PD_OPF_RANDOM);
    assert_false(pd_op_table[id]->flags & PD_OPF_DIFF);
  }
}

/* Created tensors are leaves with stop_gradient=True, as Paddle's. */
static void test_created_tensors_are_leaves(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *ts[] = {pd_arange(0, 3, 1, PD_NUM_DTYPES), pd_linspace(0, 1, 3, PD_NUM_DTYPES),
                     pd_eye(2, -1, PD_NUM_DTYPES), pd_zeros(1, SHAPE(2), PD_FLOAT32)};
  for (size_t i = 0; i < sizeof ts / sizeof *ts; i++) {
    assert_non_null(ts[i]);
    assert_true(pd_tensor_stop_gradient(ts[i]));
    assert_true(pd_tensor_is_leaf(ts[i]));
    assert_true(pd_tensor_is_contiguous(ts[i]));
  }
  pd_scope_end();
  expect_no_live_tensors();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_arange_infers_dtype),
      cmocka_unit_test(test_arange_sizes_and_dtypes),
      cmocka_unit_test(test_arange_errors),
      cmocka_unit_test(test_linspace),
      cmocka_unit_test(test_linspace_errors),
      cmocka_unit_test(test_eye),
      cmocka_unit_test(test_full_family),
      cmocka_unit_test(test_full_errors),
      cmocka_unit_test(test_to_tensor),
      cmocka_unit_test(test_registry_rows),
      cmocka_unit_test(test_created_tensors_are_leaves),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
