/* paddle.finfo / paddle.iinfo (Paddle's values for every dtype, errors for
 * the wrong kind) and paddle.set_default_dtype / get_default_dtype: the
 * creation ops, layers and create_parameter follow the default. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "test_util.h"

static int reset_default(void **state) {
  (void)state;
  pd_set_default_dtype(PD_FLOAT32);
  pd_clear_error();
  return 0;
}

static void test_finfo_values(void **state) {
  (void)state;
  pd_dtype_finfo f;
  assert_int_equal(pd_finfo(PD_FLOAT16, &f), PD_OK);
  assert_int_equal(f.bits, 16);
  assert_true(f.max == 65504.0 && f.min == -65504.0);
  assert_true(f.eps == 0.0009765625 && f.tiny == 6.103515625e-05 && f.smallest_normal == f.tiny);
  assert_true(f.resolution == 1e-3);
  assert_string_equal(f.dtype, "float16");
  /* the half limits are the values the conversions produce */
  assert_true(pd_f16_to_f32(0x7bff) == (float)f.max);
  assert_true(pd_f16_to_f32(0x0400) == (float)f.tiny);
  assert_true(pd_f16_to_f32(0x3c01) - 1.0f == (float)f.eps);

  assert_int_equal(pd_finfo(PD_BFLOAT16, &f), PD_OK);
  assert_int_equal(f.bits, 16);
  assert_true(f.max == 3.3895313892515355e38 && f.min == -f.max);
  assert_true(f.eps == 0.0078125 && f.tiny == 1.1754943508222875e-38 && f.resolution == 1e-2);
  assert_string_equal(f.dtype, "bfloat16");
  assert_true(pd_bf16_to_f32(0x7f7f) == (float)f.max);
  assert_true(pd_bf16_to_f32(0x3f81) - 1.0f == (float)f.eps);

  assert_int_equal(pd_finfo(PD_FLOAT32, &f), PD_OK);
  assert_int_equal(f.bits, 32);
  assert_true(f.max == 3.4028234663852886e38 && f.min == -3.4028234663852886e38);
  assert_true(f.eps == 1.1920928955078125e-07 && f.tiny == 1.1754943508222875e-38);
  assert_true(f.smallest_normal == f.tiny && f.resolution == 1e-6);
  assert_string_equal(f.dtype, "float32");

  assert_int_equal(pd_finfo(PD_FLOAT64, &f), PD_OK);
  assert_int_equal(f.bits, 64);
  assert_true(f.max == 1.7976931348623157e308 && f.min == -f.max);
  assert_true(f.eps == 2.220446049250313e-16 && f.tiny == 2.2250738585072014e-308);
  assert_true(f.resolution == 1e-15);
  assert_string_equal(f.dtype, "float64");
}

static void test_finfo_min_masks(void **state) {
  (void)state;
  /* the seed's use: fill a mask with paddle.finfo(dtype).min */
  pd_dtype_finfo f;
  assert_int_equal(pd_finfo(PD_FLOAT32, &f), PD_OK);
  pd_tensor *m = pd_full(1, SHAPE(2), f.min, PD_FLOAT32);
  EXPECT_VALUES(m, 0, -FLT_MAX, -FLT_MAX);
  assert_false(isinf(pd_tensor_item_at(m, 0)));
  pd_tensor_release(m);
  expect_no_live_tensors();
}

static void test_iinfo_values(void **state) {
  (void)state;
  static const struct {
    pd_dtype dt;
    int bits;
    int64_t min, max;
    const char *name;
  } want[] = {{PD_UINT8, 8, 0, 255, "uint8"},
              {PD_INT8, 8, -128, 127, "int8"},
              {PD_INT16, 16, -32768, 32767, "int16"},
              {PD_INT32, 32, -2147483648LL, 2147483647LL, "int32"},
              {PD_INT64, 64, INT64_MIN, INT64_MAX, "int64"}};
  for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
    pd_dtype_iinfo ii;
    assert_int_equal(pd_iinfo(want[i].dt, &ii), PD_OK);
    assert_int_equal(ii.bits, want[i].bits);
    assert_true(ii.min == want[i].min && ii.max == want[i].max);
    assert_string_equal(ii.dtype, want[i].name);
  }
}

static void test_wrong_kind_is_an_error(void **state) {
  (void)state;
  pd_dtype_finfo f = {.bits = 7};
  pd_dtype_iinfo ii = {.bits = 7};
  assert_int_equal(pd_finfo(PD_INT32, &f), PD_ERR_DTYPE);
  assert_non_null(strstr(pd_last_error(), "finfo"));
  assert_non_null(strstr(pd_last_error(), "int32"));
  assert_int_equal(f.bits, 7); /* untouched */
  assert_int_equal(pd_finfo(PD_BOOL, &f), PD_ERR_DTYPE);
  assert_int_equal(pd_finfo((pd_dtype)99, &f), PD_ERR_DTYPE);
  assert_non_null(strstr(pd_last_error(), "99"));
  assert_int_equal(pd_finfo(PD_FLOAT32, NULL), PD_ERR_INVALID);
  assert_int_equal(pd_iinfo(PD_FLOAT32, &ii), PD_ERR_DTYPE);
  assert_non_null(strstr(pd_last_error(), "iinfo"));
  assert_non_null(strstr(pd_last_error(), "float32"));
  assert_int_equal(pd_iinfo(PD_BOOL, &ii), PD_ERR_DTYPE);
  assert_int_equal(pd_iinfo((pd_dtype)-1, &ii), PD_ERR_DTYPE);
  assert_int_equal(pd_iinfo(PD_INT8, NULL), PD_ERR_INVALID);
  assert_int_equal(ii.bits, 7);
  pd_clear_error();
}

static void test_default_dtype_setting(void **state) {
  (void)state;
  assert_int_equal(pd_get_default_dtype(), PD_FLOAT32);
  assert_int_equal(pd_set_default_dtype(PD_FLOAT64), PD_OK);
  assert_int_equal(pd_get_default_dtype(), PD_FLOAT64);
  assert_int_equal(pd_set_default_dtype(PD_FLOAT16), PD_OK);
  assert_int_equal(pd_set_default_dtype(PD_BFLOAT16), PD_OK);
  assert_int_equal(pd_get_default_dtype(), PD_BFLOAT16);
  /* anything else is refused and changes nothing, as Paddle raises */
  assert_int_equal(pd_set_default_dtype(PD_INT64), PD_ERR_DTYPE);
  assert_non_null(strstr(pd_last_error(), "set_default_dtype"));
  assert_non_null(strstr(pd_last_error(), "int64"));
  assert_int_equal(pd_set_default_dtype(PD_BOOL), PD_ERR_DTYPE);
  assert_int_equal(pd_set_default_dtype(PD_NUM_DTYPES), PD_ERR_DTYPE);
  assert_int_equal(pd_get_default_dtype(), PD_BFLOAT16);
  assert_int_equal(pd_set_default_dtype(PD_FLOAT32), PD_OK);
}

static void expect_dtype_and_release(pd_tensor *t, pd_dtype dt) {
  assert_non_null(t);
  assert_int_equal(pd_tensor_dtype(t), dt);
  pd_tensor_release(t);
}

static void test_creation_ops_follow_default(void **state) {
  (void)state;
  const pd_dtype dts[] = {PD_FLOAT32, PD_FLOAT64};
  for (int k = 0; k < 2; k++) {
    assert_int_equal(pd_set_default_dtype(dts[k]), PD_OK);
    pd_dtype dt = dts[k];
    expect_dtype_and_release(pd_full(1, SHAPE(3), 0.1, PD_NUM_DTYPES), dt);
    expect_dtype_and_release(pd_zeros(1, SHAPE(3), PD_NUM_DTYPES), dt);
    expect_dtype_and_release(pd_ones(2, SHAPE(2, 2), PD_NUM_DTYPES), dt);
    expect_dtype_and_release(pd_empty(1, SHAPE(3), PD_NUM_DTYPES), dt);
    expect_dtype_and_release(pd_rand(1, SHAPE(3), PD_NUM_DTYPES), dt);
    expect_dtype_and_release(pd_randn(1, SHAPE(3), PD_NUM_DTYPES), dt);
    expect_dtype_and_release(pd_uniform(1, SHAPE(3), PD_NUM_DTYPES, -1, 1, 0), dt);
    expect_dtype_and_release(pd_normal(0, 1, 1, SHAPE(3)), dt);
    expect_dtype_and_release(pd_linspace(0, 1, 5, PD_NUM_DTYPES), dt);
    expect_dtype_and_release(pd_eye(2, -1, PD_NUM_DTYPES), dt);
    expect_dtype_and_release(pd_arange(0, 1, 0.25, PD_NUM_DTYPES), dt);
    /* integral bounds stay int64, explicit dtypes stay as given */
    expect_dtype_and_release(pd_arange(0, 4, 1, PD_NUM_DTYPES), PD_INT64);
    expect_dtype_and_release(pd_randint(0, 4, 1, SHAPE(3), PD_NUM_DTYPES), PD_INT64);
    expect_dtype_and_release(pd_zeros(1, SHAPE(3), PD_FLOAT32), PD_FLOAT32);
  }
  /* the values are computed in the new dtype: 0.1 is not rounded to float */
  pd_tensor *t = pd_full(1, SHAPE(1), 0.1, PD_NUM_DTYPES);
  assert_true(pd_tensor_item(t) == 0.1);
  pd_tensor_release(t);
  t = pd_linspace(0, 1, 3, PD_NUM_DTYPES);
  EXPECT_VALUES(t, 0, 0.0, 0.5, 1.0);
  pd_tensor_release(t);
  pd_set_default_dtype(PD_FLOAT32);
  expect_no_live_tensors();
}

static void expect_params_dtype(pd_layer *l, pd_dtype dt, int min_params) {
  assert_non_null(l);
  pd_named_tensors sd = {0};
  assert_int_equal(pd_layer_state_dict(l, &sd), PD_OK);
  assert_true(sd.n >= min_params);
  for (int i = 0; i < sd.n; i++)
    if (pd_dtype_is_floating(pd_tensor_dtype(sd.tensors[i])))
      assert_int_equal(pd_tensor_dtype(sd.tensors[i]), dt);
  pd_named_tensors_free(&sd);
  pd_layer_release(l);
}

static void test_layers_follow_default(void **state) {
  (void)state;
  assert_int_equal(pd_set_default_dtype(PD_FLOAT64), PD_OK);
  expect_params_dtype(pd_nn_linear(3, 2, NULL), PD_FLOAT64, 2);
  expect_params_dtype(pd_nn_embedding(5, 4, NULL), PD_FLOAT64, 1);
  expect_params_dtype(pd_nn_layer_norm(1, SHAPE(4), NULL), PD_FLOAT64, 2);
  expect_params_dtype(pd_nn_conv2d(1, 2, 1, SHAPE(3, 3), NULL), PD_FLOAT64, 2);
  expect_params_dtype(pd_nn_lstm(4, 3, NULL), PD_FLOAT64, 4);
  expect_params_dtype(pd_nn_multi_head_attention(8, 2, NULL), PD_FLOAT64, 8);
  /* a float64 linear runs on float64 input without a cast */
  pd_layer *lin = pd_nn_linear(3, 2, NULL);
  pd_tensor *x = pd_ones(2, SHAPE(1, 3), PD_NUM_DTYPES);
  pd_tensor *y = pd_layer_call1(lin, x);
  assert_non_null(y);
  assert_int_equal(pd_tensor_dtype(y), PD_FLOAT64);
  pd_tensor_release(x);
  pd_tensor_release(y);
  pd_layer_release(lin);
  /* create_parameter with PD_NUM_DTYPES */
  pd_layer *l = pd_nn_identity();
  pd_tensor *w = pd_layer_create_parameter(l, "w", 1, SHAPE(3), PD_NUM_DTYPES, NULL, NULL, false);
  assert_non_null(w);
  assert_int_equal(pd_tensor_dtype(w), PD_FLOAT64);
  pd_layer_release(l);
  pd_tensor *mask = pd_nn_transformer_generate_square_subsequent_mask(3);
  assert_non_null(mask);
  assert_int_equal(pd_tensor_dtype(mask), PD_FLOAT64);
  pd_tensor_release(mask);
  /* an explicit dtype wins */
  expect_params_dtype(pd_nn_linear(3, 2, &(pd_nn_linear_opts){.dtype = PD_FLOAT32}), PD_FLOAT32, 2);
  /* back to float32: new layers are float32 again */
  assert_int_equal(pd_set_default_dtype(PD_FLOAT32), PD_OK);
  expect_params_dtype(pd_nn_linear(3, 2, NULL), PD_FLOAT32, 2);
  expect_no_live_tensors();
}

/* full's range check takes its bounds from iinfo / finfo: the limits fit,
 * one past them is refused naming the value and the dtype. */
static void test_full_range_is_the_info_range(void **state) {
  (void)state;
  const pd_dtype ints[] = {PD_UINT8, PD_INT8, PD_INT16, PD_INT32};
  for (int k = 0; k < 4; k++) {
    pd_dtype_iinfo ii;
    assert_int_equal(pd_iinfo(ints[k], &ii), PD_OK);
    pd_tensor *hi = pd_full(1, SHAPE(1), (double)ii.max, ints[k]),
              *lo = pd_full(1, SHAPE(1), (double)ii.min, ints[k]);
    assert_true(pd_tensor_item_at(hi, 0) == (double)ii.max && pd_tensor_item_at(lo, 0) == (double)ii.min);
    pd_tensor_release(hi);
    pd_tensor_release(lo);
    expect_error(pd_full(1, SHAPE(1), (double)ii.max + 1, ints[k]), "out of the range of", ii.dtype);
    expect_error(pd_full(1, SHAPE(1), (double)ii.min - 1, ints[k]), "out of the range of", ii.dtype);
  }
  expect_error(pd_full(1, SHAPE(1), 9223372036854775808.0, PD_INT64), "out of the range of", "int64");
  /* bfloat16's largest value is finfo's 3.3895e38, not float32's: 3.4e38 would store inf */
  expect_error(pd_full(1, SHAPE(1), 3.4e38, PD_BFLOAT16), "out of the range of", "bfloat16");
  const pd_dtype floats[] = {PD_FLOAT16, PD_BFLOAT16, PD_FLOAT32};
  for (int k = 0; k < 3; k++) {
    pd_dtype_finfo fi;
    assert_int_equal(pd_finfo(floats[k], &fi), PD_OK);
    pd_tensor *t = pd_full(1, SHAPE(1), fi.max, floats[k]);
    assert_true(pd_tensor_item_at(t, 0) == fi.max);
    pd_tensor_release(t);
    expect_error(pd_full(1, SHAPE(1), 2 * fi.max, floats[k]), "out of the range of", fi.dtype);
  }
  expect_no_live_tensors();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_finfo_values),
      cmocka_unit_test(test_finfo_min_masks),
      cmocka_unit_test(test_iinfo_values),
      cmocka_unit_test(test_wrong_kind_is_an_error),
      cmocka_unit_test(test_full_range_is_the_info_range),
      cmocka_unit_test_teardown(test_default_dtype_setting, reset_default),
      cmocka_unit_test_teardown(test_creation_ops_follow_default, reset_default),
      cmocka_unit_test_teardown(test_layers_follow_default, reset_default),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
