/* Bad input to the core ops fails with a message naming the op and the
 * offending values, returns NULL, and leaks nothing. */
#include <string.h>

#include "test_util.h"

static void test_reshape_expand_transpose(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = pd_zeros(2, SHAPE(2, 3), PD_FLOAT32);
  expect_error(pd_reshape(x, 2, SHAPE(4, 2)), "reshape", "[2, 3]");
  expect_error(pd_reshape(x, 2, SHAPE(-1, -1)), "reshape", "-1");
  expect_error(pd_reshape(x, 1, SHAPE(-2)), "reshape", "-2");
  expect_error(pd_reshape(x, 10, SHAPE(1, 1, 1, 1, 1, 1, 1, 1, 1, 6)), "reshape", "10");
  expect_error(pd_expand(x, 2, SHAPE(4, 3)), "expand", "2 vs 4");
  expect_error(pd_expand(x, 1, SHAPE(3)), "expand", "[2, 3]");
  expect_error(pd_transpose(x, 2, SHAPE(0, 0)), "transpose", "repeats");
  expect_error(pd_transpose(x, 3, SHAPE(0, 1, 2)), "transpose", "rank 2");
  expect_error(pd_transpose(x, 2, SHAPE(0, 5)), "transpose", "axis 5");
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_sum_and_arith(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = pd_ones(2, SHAPE(2, 3), PD_FLOAT32);
  expect_error(pd_sum(x, SHAPE(2), 1, false), "sum", "axis 2");
  expect_error(pd_sum(x, SHAPE(-3), 1, false), "sum", "axis -3");
  expect_error(pd_sum(x, SHAPE(1, -1), 2, false), "sum", "twice");
  expect_error(pd_add(x, pd_ones(1, SHAPE(4), PD_FLOAT32)), "add", "[4]");
  expect_error(pd_multiply(x, pd_ones(2, SHAPE(3, 3), PD_FLOAT32)), "multiply", "[3, 3]");
  expect_error(pd_add_(pd_ones(1, SHAPE(3), PD_FLOAT32), x), "add_", "[2, 3]");
  expect_error(pd_cast(x, (pd_dtype)42), "cast", "42");
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_creation(void **state) {
  (void)state;
  pd_scope_begin();
  expect_error(pd_full(2, SHAPE(2, -3), 1.0, PD_FLOAT32), "full", "-3");
  expect_error(pd_zeros(1, SHAPE(2), (pd_dtype)-1), "full", "dtype");
  expect_error(pd_to_tensor(NULL, PD_FLOAT32, 1, SHAPE(2)), "to_tensor", "NULL");
  expect_error(pd_zeros(-1, NULL, PD_FLOAT32), "full", "rank");
  pd_scope_end();
  expect_no_live_tensors();
}

/* The first error survives a chain of ops given NULL. */
static void test_null_propagation(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = pd_ones(1, SHAPE(3), PD_FLOAT32);
  pd_tensor *bad = pd_reshape(x, 1, SHAPE(4));
  pd_tensor *y = pd_sum(pd_multiply(pd_add(bad, x), x), NULL, 0, false);
  assert_null(y);
  assert_non_null(strstr(pd_last_error(), "reshape"));
  assert_int_equal(pd_last_status(), PD_ERR_SHAPE);
  assert_true(pd_backward(y, NULL, false) < 0);
  assert_non_null(strstr(pd_last_error(), "reshape")); /* still the first error */
  pd_clear_error();
  assert_int_equal(pd_last_status(), PD_OK);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_accessors_with_null(void **state) {
  (void)state;
  assert_int_equal(pd_tensor_ndim(NULL), -1);
  assert_null(pd_tensor_shape(NULL));
  assert_int_equal(pd_tensor_numel(NULL), -1);
  assert_null(pd_tensor_data(NULL));
  assert_null(pd_tensor_grad(NULL));
  pd_tensor_release(NULL);
  pd_tensor_set_stop_gradient(NULL, false);
  assert_true(pd_tensor_copy_to(NULL, NULL, 0, PD_FLOAT32) < 0);
  pd_clear_error();
  pd_tensor *x = pd_ones(1, SHAPE(3), PD_FLOAT32);
  float buf[2];
  assert_true(pd_tensor_copy_to(x, buf, 2, PD_FLOAT32) < 0);
  assert_non_null(strstr(pd_last_error(), "3"));
  pd_clear_error();
  pd_tensor_release(x);
  expect_no_live_tensors();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_reshape_expand_transpose),
      cmocka_unit_test(test_sum_and_arith),
      cmocka_unit_test(test_creation),
      cmocka_unit_test(test_null_propagation),
      cmocka_unit_test(test_accessors_with_null),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
