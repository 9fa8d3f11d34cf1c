/* Values Paddle refuses and that used to be accepted: label_smoothing NaN
 * or outside [0, 1], pooling padding wider than half the kernel (whole
 * windows in the padding printed -3.4e38), a fill value the dtype cannot
 * hold (it saturated), a negative std. Each error names the value; the
 * layer forms go through the same check. */
#include <math.h>
#include <string.h>

#include "test_util.h"

static void expect_status_error(pd_status st, const char *f1, const char *f2) {
  assert_true(st < 0);
  expect_error(NULL, f1, f2);
}

static void test_label_smoothing(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = T(PD_FLOAT32, 2, SHAPE(2, 3), 1, 2, 3, 3, 2, 1);
  pd_tensor *y = T(PD_INT64, 1, SHAPE(2), 0, 2);
  expect_error(pd_cross_entropy(x, y, NULL, -100, PD_REDUCTION_MEAN, false, -1, true, NAN), "cross_entropy",
               "label_smoothing must be in [0, 1], got nan");
  expect_error(pd_cross_entropy(x, y, NULL, -100, PD_REDUCTION_MEAN, false, -1, true, 1.5), "cross_entropy",
               "got 1.5");
  expect_error(pd_cross_entropy(x, y, NULL, -100, PD_REDUCTION_MEAN, false, -1, true, -0.1), "cross_entropy",
               "got -0.1");
  /* the edges are values */
  assert_non_null(pd_cross_entropy(x, y, NULL, -100, PD_REDUCTION_MEAN, false, -1, true, 1.0));
  assert_non_null(pd_cross_entropy(x, y, NULL, -100, PD_REDUCTION_MEAN, false, -1, true, 0.0));
  /* nn.CrossEntropyLoss */
  pd_layer *l = pd_nn_cross_entropy_loss(&(pd_nn_cross_entropy_loss_opts){.label_smoothing = 2.0});
  pd_tensor *in[2] = {x, y}, *out[1];
  assert_true(pd_layer_call(l, in, 2, out, 1) < 0);
  expect_error(NULL, "label_smoothing", "got 2");
  pd_layer_release(l);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_pool_padding(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = pd_ones(4, SHAPE(1, 1, 4, 4), PD_FLOAT32);
  pd_pool_opts wide = {.n_padding = 1, .padding = {2}};
  expect_error(pd_max_pool2d(x, 1, SHAPE(2), &wide), "max_pool2d", "padding 2 on spatial dim 0");
  expect_error(pd_avg_pool2d(x, 1, SHAPE(3), &wide), "avg_pool2d", "half the kernel size 3");
  expect_error(pd_max_pool1d(pd_ones(3, SHAPE(1, 1, 4), PD_FLOAT32), 1, SHAPE(1),
                             &(pd_pool_opts){.n_padding = 1, .padding = {1}}),
               "max_pool1d", "padding 1");
  /* half the kernel is allowed and every window holds an input element */
  pd_pool_opts half = {.n_padding = 1, .padding = {1}};
  pd_tensor *m = pd_max_pool2d(x, 1, SHAPE(2), &half);
  expect_shape(m, 4, SHAPE(1, 1, 3, 3));
  EXPECT_VALUES(m, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1);
  /* the layers */
  pd_layer *mp = pd_nn_max_pool2d(1, SHAPE(2), &wide), *ap = pd_nn_avg_pool2d(1, SHAPE(2), &wide);
  expect_error(pd_layer_call1(mp, x), "max_pool2d", "padding 2");
  expect_error(pd_layer_call1(ap, x), "avg_pool2d", "padding 2");
  pd_layer_release(mp);
  pd_layer_release(ap);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_fill_value_out_of_range(void **state) {
  (void)state;
  pd_scope_begin();
  expect_error(pd_full(1, SHAPE(2), 1e300, PD_INT32), "full: the fill value 1e+300", "int32");
  expect_error(pd_full(1, SHAPE(2), 2147483648.0, PD_INT32), "2.14748e+09", "int32");
  expect_error(pd_full(1, SHAPE(2), -129, PD_INT8), "-129", "int8");
  expect_error(pd_full(1, SHAPE(2), 256, PD_UINT8), "256", "uint8");
  expect_error(pd_full(1, SHAPE(2), NAN, PD_INT64), "nan", "int64");
  expect_error(pd_full(1, SHAPE(2), 9223372036854775808.0, PD_INT64), "9.22337e+18", "int64");
  expect_error(pd_full(1, SHAPE(2), 1e300, PD_FLOAT32), "1e+300", "float32");
  expect_error(pd_full(1, SHAPE(2), 70000, PD_FLOAT16), "70000", "float16");
  expect_error(pd_full_like(pd_zeros(1, SHAPE(2), PD_INT16), 40000, PD_INT16), "40000", "int16");
  /* the limits themselves, infinities and NaN in floating dtypes, and any bool */
  EXPECT_VALUES(pd_full(1, SHAPE(1), 2147483647.0, PD_INT32), 0, 2147483647.0);
  EXPECT_VALUES(pd_full(1, SHAPE(1), -2147483648.0, PD_INT32), 0, -2147483648.0);
  EXPECT_VALUES(pd_full(1, SHAPE(1), 65504, PD_FLOAT16), 0, 65504);
  EXPECT_VALUES(pd_full(1, SHAPE(1), -INFINITY, PD_FLOAT32), 0, -INFINITY);
  assert_true(isnan(pd_tensor_item(pd_full(1, SHAPE(1), NAN, PD_FLOAT32))));
  EXPECT_VALUES(pd_full(1, SHAPE(1), 1e300, PD_FLOAT64), 0, 1e300);
  EXPECT_VALUES(pd_full(1, SHAPE(1), 7, PD_BOOL), 0, 1);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_normal_std(void **state) {
  (void)state;
  pd_scope_begin();
  expect_error(pd_normal(0, -1, 1, SHAPE(3)), "normal", "std -1");
  expect_error(pd_normal(0, NAN, 1, SHAPE(3)), "normal", "std nan");
  expect_error(pd_normal(NAN, 1, 1, SHAPE(3)), "normal", "mean nan");
  /* std 0 is a point mass */
  EXPECT_VALUES(pd_normal(2, 0, 1, SHAPE(2)), 0, 2, 2);
  /* the initializer draws through the same op */
  pd_tensor *w = pd_zeros(1, SHAPE(3), PD_FLOAT32);
  pd_initializer init = pd_nn_initializer_normal(0, -2);
  expect_status_error(pd_initializer_apply(&init, w), "std", "-2");
  pd_scope_end();
  expect_no_live_tensors();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_label_smoothing),
      cmocka_unit_test(test_pool_padding),
      cmocka_unit_test(test_fill_value_out_of_range),
      cmocka_unit_test(test_normal_std),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
