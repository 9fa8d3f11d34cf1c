/* The scalar forms of the binary ops (x + s, x / s, s - x, mask > s, ...):
 * values, Paddle's dtype rules for a Python int or float against float,
 * integer and bool tensors, gradients, and NULL propagation. */
#include <math.h>
#include <string.h>

#include "test_util.h"

static void expect_t(pd_tensor *t, pd_dtype dt, const double *want, int n) {
  assert_non_null(t);
  assert_int_equal(pd_tensor_dtype(t), dt);
  expect_values(t, want, n, 0);
  pd_tensor_release(t);
}
#define EXPECT_T(t, dt, ...)                         \
  expect_t((t), (dt), (const double[]){__VA_ARGS__}, \
           (int)(sizeof((const double[]){__VA_ARGS__}) / sizeof(double)))

static void test_float_tensor_keeps_dtype(void **state) {
  (void)state;
  pd_tensor *x = T(PD_FLOAT32, 1, SHAPE(3), 1, 2, 3);
  EXPECT_T(pd_add_scalar(x, 2), PD_FLOAT32, 3, 4, 5);
  EXPECT_T(pd_add_scalar(x, 0.5), PD_FLOAT32, 1.5, 2.5, 3.5);
  EXPECT_T(pd_subtract_scalar(x, 1), PD_FLOAT32, 0, 1, 2);
  EXPECT_T(pd_scalar_subtract(1, x), PD_FLOAT32, 0, -1, -2);
  EXPECT_T(pd_multiply_scalar(x, -2), PD_FLOAT32, -2, -4, -6);
  EXPECT_T(pd_divide_scalar(x, 2), PD_FLOAT32, 0.5, 1, 1.5);
  EXPECT_T(pd_scalar_divide(6, x), PD_FLOAT32, 6, 3, 2);
  EXPECT_T(pd_floor_divide_scalar(x, 2), PD_FLOAT32, 0, 1, 1);
  EXPECT_T(pd_remainder_scalar(x, 2), PD_FLOAT32, 1, 0, 1);
  EXPECT_T(pd_greater_than_scalar(x, 2), PD_BOOL, 0, 0, 1);
  EXPECT_T(pd_greater_equal_scalar(x, 2), PD_BOOL, 0, 1, 1);
  EXPECT_T(pd_less_than_scalar(x, 2), PD_BOOL, 1, 0, 0);
  EXPECT_T(pd_less_equal_scalar(x, 2), PD_BOOL, 1, 1, 0);
  EXPECT_T(pd_equal_scalar(x, 2), PD_BOOL, 0, 1, 0);
  EXPECT_T(pd_not_equal_scalar(x, 2), PD_BOOL, 1, 0, 1);
  EXPECT_T(pd_divide_scalar(x, 0), PD_FLOAT32, INFINITY, INFINITY, INFINITY);
  pd_tensor_release(x);
  /* float64 and float16 stay as they are */
  x = T(PD_FLOAT64, 1, SHAPE(2), 0.1, 0.2);
  EXPECT_T(pd_multiply_scalar(x, 3), PD_FLOAT64, 0.1 * 3, 0.2 * 3);
  pd_tensor_release(x);
  x = T(PD_FLOAT16, 1, SHAPE(2), 1, 2);
  EXPECT_T(pd_multiply_scalar(x, 3.5), PD_FLOAT16, 3.5, 7);
  pd_tensor_release(x);
  expect_no_live_tensors();
}

static void test_integer_and_bool_tensors(void **state) {
  (void)state;
  pd_tensor *x = T(PD_INT32, 1, SHAPE(3), 1, 2, 3);
  /* an int scalar keeps the integer dtype */
  EXPECT_T(pd_add_scalar(x, 2), PD_INT32, 3, 4, 5);
  EXPECT_T(pd_multiply_scalar(x, 3), PD_INT32, 3, 6, 9);
  EXPECT_T(pd_scalar_subtract(10, x), PD_INT32, 9, 8, 7);
  EXPECT_T(pd_floor_divide_scalar(x, 2), PD_INT32, 0, 1, 1);
  EXPECT_T(pd_greater_than_scalar(x, 1), PD_BOOL, 0, 1, 1);
  /* a float scalar makes it float32 (Paddle's cast), also in comparisons */
  EXPECT_T(pd_add_scalar(x, 0.5), PD_FLOAT32, 1.5, 2.5, 3.5);
  EXPECT_T(pd_greater_than_scalar(x, 1.5), PD_BOOL, 0, 1, 1);
  EXPECT_T(pd_equal_scalar(x, 2.5), PD_BOOL, 0, 0, 0);
  /* true division always gives float32 */
  EXPECT_T(pd_divide_scalar(x, 2), PD_FLOAT32, 0.5, 1, 1.5);
  EXPECT_T(pd_scalar_divide(3, x), PD_FLOAT32, 3, 1.5, 1);
  pd_tensor_release(x);
  /* Python's % and // on negative integers */
  x = T(PD_INT64, 1, SHAPE(2), -7, 7);
  EXPECT_T(pd_remainder_scalar(x, 3), PD_INT64, 2, 1);
  EXPECT_T(pd_remainder_scalar(x, -3), PD_INT64, -1, -2);
  EXPECT_T(pd_floor_divide_scalar(x, 2), PD_INT64, -4, 3);
  pd_tensor_release(x);
  /* mask > 0 on an integer mask */
  pd_tensor *mask = T(PD_INT64, 2, SHAPE(2, 2), 0, 3, -1, 1);
  EXPECT_T(pd_greater_than_scalar(mask, 0), PD_BOOL, 0, 1, 0, 1);
  pd_tensor_release(mask);
  /* bool with an int scalar: int64; with a float one: float32 */
  pd_tensor *b = T(PD_BOOL, 1, SHAPE(2), 0, 1);
  EXPECT_T(pd_add_scalar(b, 1), PD_INT64, 1, 2);
  EXPECT_T(pd_scalar_subtract(1, b), PD_INT64, 1, 0);
  EXPECT_T(pd_multiply_scalar(b, 0.5), PD_FLOAT32, 0, 0.5);
  EXPECT_T(pd_equal_scalar(b, 1), PD_BOOL, 0, 1);
  pd_tensor_release(b);
  expect_no_live_tensors();
}

static void test_gradients(void **state) {
  (void)state;
  pd_tensor *x = T(PD_FLOAT64, 1, SHAPE(3), 1, 2, 4);
  pd_tensor_set_stop_gradient(x, false);
  /* loss = sum(x / 2 + (1 - x) * 3 + 8 / x) */
  pd_scope_begin();
  pd_tensor *a = pd_divide_scalar(x, 2);
  pd_tensor *b = pd_multiply_scalar(pd_scalar_subtract(1, x), 3);
  pd_tensor *c = pd_scalar_divide(8, x);
  pd_tensor *loss = pd_sum(pd_add(pd_add(a, b), c), NULL, 0, false);
  assert_int_equal(pd_backward(loss, NULL, false), PD_OK);
  pd_scope_end();
  /* d/dx = 1/2 - 3 - 8/x^2 */
  EXPECT_VALUES(pd_tensor_grad(x), 1e-12, 0.5 - 3 - 8, 0.5 - 3 - 2, 0.5 - 3 - 0.5);
  pd_tensor_release(x);
  expect_no_live_tensors();
}

static void test_null_and_scope(void **state) {
  (void)state;
  pd_clear_error();
  assert_null(pd_add_scalar(NULL, 1));
  assert_non_null(strstr(pd_last_error(), "add_scalar"));
  assert_null(pd_greater_than_scalar(NULL, 0));
  /* the first error is kept */
  assert_non_null(strstr(pd_last_error(), "add_scalar"));
  pd_clear_error();
  assert_null(pd_scalar_divide(1, NULL));
  assert_non_null(strstr(pd_last_error(), "scalar_divide"));
  pd_clear_error();
  /* inside a scope the temporaries and results are released at its end */
  pd_tensor *x = T(PD_INT32, 1, SHAPE(2), 1, 2);
  pd_scope_begin();
  for (int i = 0; i < 3; i++) {
    assert_non_null(pd_divide_scalar(x, 3));
    assert_non_null(pd_less_than_scalar(x, 1.5));
  }
  pd_scope_end();
  pd_tensor_release(x);
  expect_no_live_tensors();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_float_tensor_keeps_dtype),
      cmocka_unit_test(test_integer_and_bool_tensors),
      cmocka_unit_test(test_gradients),
      cmocka_unit_test(test_null_and_scope),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
