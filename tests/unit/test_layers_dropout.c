/* Dropout family: statistics of the mask, scaling, eval behaviour, the
 * element-to-counter contract (checked against pd_rand drawn from the same
 * seed), seeds and thread counts, channel-wise forms, alpha dropout,
 * gradients and bad inputs. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

#define N_BIG 200003 /* odd, several counter blocks per thread, a partial last block */

static double frac_zero(const pd_tensor *y) {
  int64_t n = pd_tensor_numel(y), z = 0;
  for (int64_t i = 0; i < n; i++) z += pd_tensor_item_at(y, i) == 0;
  return (double)z / (double)n;
}

static void test_dropout_statistics_and_scaling(void **state) {
  (void)state;
  pd_scope_begin();
  pd_seed(11);
  const double ps[] = {0.1, 0.5, 0.8};
  pd_tensor *x = pd_ones(1, SHAPE(N_BIG), PD_FLOAT32);
  for (int k = 0; k < 3; k++) {
    double p = ps[k];
    pd_tensor *y = pd_dropout(x, p, 0, NULL, true, NULL);
    expect_shape(y, 1, SHAPE(N_BIG));
    double f = frac_zero(y), sigma = sqrt(p * (1 - p) / N_BIG);
    if (fabs(f - p) > 5 * sigma)
      fail_msg("p %g: fraction zeroed %g is more than 5 sigma (%g) away", p, f, sigma);
    for (int64_t i = 0; i < N_BIG; i++) {
      double v = pd_tensor_item_at(y, i);
      if (v != 0 && fabs(v - 1 / (1 - p)) > 1e-6 / (1 - p)) fail_msg("p %g: kept value %g", p, v);
    }
    /* downscale_in_infer keeps without scaling in training */
    pd_tensor *d = pd_dropout(x, p, 0, NULL, true, "downscale_in_infer");
    for (int64_t i = 0; i < N_BIG; i += 97) {
      double v = pd_tensor_item_at(d, i);
      assert_true(v == 0 || v == 1);
    }
  }
  /* p = 1 drops everything, p = 0 returns x itself */
  pd_tensor *y1 = pd_dropout(x, 1.0, 0, NULL, true, NULL);
  assert_true(frac_zero(y1) == 1.0);
  pd_tensor *y0 = pd_dropout(x, 0.0, 0, NULL, true, NULL);
  assert_ptr_equal(y0, x);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_dropout_eval(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = T(PD_FLOAT64, 2, SHAPE(2, 2), 1, -2, 3, 4);
  pd_tensor *y = pd_dropout(x, 0.3, 0, NULL, false, NULL);
  assert_ptr_equal(y, x); /* upscale_in_train: eval returns x */
  EXPECT_VALUES(pd_dropout(x, 0.25, 0, NULL, false, "downscale_in_infer"), 1e-15, 0.75, -1.5, 2.25, 3);
  assert_ptr_equal(pd_alpha_dropout(x, 0.3, false), x);
  assert_ptr_equal(pd_dropout2d(pd_ones(4, SHAPE(1, 2, 1, 1), PD_FLOAT32), 0.5, false, NULL) != NULL, true);
  pd_scope_end();
  expect_no_live_tensors();
}

/* Element i of the mask is kept iff the float32 uniform drawn for element i
 * of a same-sized pd_rand with the same seed is >= p. */
static void test_dropout_counter_contract(void **state) {
  (void)state;
  pd_scope_begin();
  const double p = 0.37;
  pd_seed(123);
  pd_tensor *u = pd_rand(1, SHAPE(N_BIG), PD_FLOAT32);
  pd_seed(123);
  pd_tensor *y = pd_dropout(pd_ones(1, SHAPE(N_BIG), PD_FLOAT64), p, 0, NULL, true, NULL);
  for (int64_t i = 0; i < N_BIG; i++) {
    bool keep = (float)pd_tensor_item_at(u, i) >= (float)p;
    if (keep != (pd_tensor_item_at(y, i) != 0))
      fail_msg("element %lld disagrees with the counter contract", (long long)i);
  }
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_dropout_seed_and_threads(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = pd_ones(2, SHAPE(513, 401), PD_FLOAT32);
  int threads = pd_get_num_threads();
  pd_set_num_threads(1);
  pd_seed(77);
  pd_tensor *a = pd_dropout(x, 0.5, 0, NULL, true, NULL);
  pd_tensor *a2 = pd_dropout(x, 0.5, 0, NULL, true, NULL); /* the generator moved on */
  pd_set_num_threads(4);
  pd_seed(77);
  pd_tensor *b = pd_dropout(x, 0.5, 0, NULL, true, NULL);
  pd_set_num_threads(threads);
  expect_close(b, a, 0, 0);
  int64_t same = 0;
  for (int64_t i = 0; i < pd_tensor_numel(a); i++)
    same += pd_tensor_item_at(a, i) == pd_tensor_item_at(a2, i);
  assert_true(same < pd_tensor_numel(a) * 0.6); /* two draws agree on about half the elements */
  /* the shared-mask form and alpha dropout too */
  pd_tensor *x3 = pd_ones(3, SHAPE(64, 32, 50), PD_FLOAT32);
  pd_set_num_threads(1);
  pd_seed(5);
  pd_tensor *c1 = pd_dropout(x3, 0.4, 2, SHAPE(0, 2), true, NULL);
  pd_tensor *d1 = pd_alpha_dropout(x3, 0.4, true);
  pd_set_num_threads(3);
  pd_seed(5);
  pd_tensor *c2 = pd_dropout(x3, 0.4, 2, SHAPE(0, 2), true, NULL);
  pd_tensor *d2 = pd_alpha_dropout(x3, 0.4, true);
  pd_set_num_threads(threads);
  expect_close(c2, c1, 0, 0);
  expect_close(d2, d1, 0, 0);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_dropout_backward_is_mask(void **state) {
  (void)state;
  pd_scope_begin();
  pd_seed(9);
  const double p = 0.4;
  pd_tensor *x = pd_randn(2, SHAPE(30, 20), PD_FLOAT64);
  pd_tensor *w = pd_randn(2, SHAPE(30, 20), PD_FLOAT64);
  pd_tensor_set_stop_gradient(x, false);
  pd_tensor *y = pd_dropout(x, p, 0, NULL, true, NULL);
  assert_int_equal(pd_backward(pd_sum(pd_multiply(y, w), NULL, 0, false), NULL, false), PD_OK);
  pd_tensor *g = pd_tensor_grad(x);
  for (int64_t i = 0; i < 600; i++) {
    double yi = pd_tensor_item_at(y, i), xi = pd_tensor_item_at(x, i);
    double want = yi != 0 ? pd_tensor_item_at(w, i) / (1 - p) : 0;
    assert_true(fabs(yi) == 0 || fabs(yi - xi / (1 - p)) < 1e-12);
    assert_true(fabs(pd_tensor_item_at(g, i) - want) < 1e-12);
  }
  /* second order: d/dx sum(d sum(y^2)/dx) = 2 mask^2 */
  y = pd_dropout(x, p, 0, NULL, true, NULL);
  pd_tensor *L = pd_sum(pd_multiply(y, y), NULL, 0, false), *gx = NULL, *gg = NULL;
  assert_int_equal(pd_grad(&L, 1, &x, 1, NULL, &(pd_grad_opts){.create_graph = true}, &gx), PD_OK);
  pd_tensor *gs = pd_sum(gx, NULL, 0, false);
  assert_int_equal(pd_grad(&gs, 1, &x, 1, NULL, NULL, &gg), PD_OK);
  for (int64_t i = 0; i < 600; i++) {
    double m = pd_tensor_item_at(y, i) != 0 ? 1 / (1 - p) : 0;
    assert_true(fabs(pd_tensor_item_at(gg, i) - 2 * m * m) < 1e-12);
  }
  /* downscale eval: the gradient is the factor 1-p */
  pd_tensor *x2 = T(PD_FLOAT64, 1, SHAPE(3), 1, 2, 3);
  pd_tensor_set_stop_gradient(x2, false);
  assert_int_equal(
      pd_backward(pd_sum(pd_dropout(x2, p, 0, NULL, false, "downscale_in_infer"), NULL, 0, false), NULL,
                  false),
      PD_OK);
  EXPECT_VALUES(pd_tensor_grad(x2), 1e-15, 0.6, 0.6, 0.6);
  pd_scope_end();
  expect_no_live_tensors();
}

/* With axes, one draw covers every element that differs only along the
 * other dims. */
static void expect_shared(const pd_tensor *y, int64_t d0, int64_t d1, int64_t d2, bool share0, bool share1,
                          bool share2, double keep_val) {
  for (int64_t i = 0; i < d0; i++)
    for (int64_t j = 0; j < d1; j++)
      for (int64_t k = 0; k < d2; k++) {
        double v = pd_tensor_item_at(y, (i * d1 + j) * d2 + k);
        double ref = pd_tensor_item_at(y, ((share0 ? 0 : i) * d1 + (share1 ? 0 : j)) * d2 + (share2 ? 0 : k));
        assert_true(v == ref);
        assert_true(v == 0 || fabs(v - keep_val) < 1e-6);
      }
}

static void test_dropout_axis_and_channel_forms(void **state) {
  (void)state;
  pd_scope_begin();
  pd_seed(21);
  pd_tensor *x = pd_ones(3, SHAPE(6, 7, 8), PD_FLOAT32);
  pd_tensor *y = pd_dropout(x, 0.5, 2, SHAPE(0, 1), true, NULL);
  expect_shared(y, 6, 7, 8, false, false, true, 2.0);
  double f = frac_zero(y);
  assert_true(f > 0.2 && f < 0.8);
  y = pd_dropout(x, 0.5, 1, SHAPE(2), true, "downscale_in_infer");
  expect_shared(y, 6, 7, 8, true, true, false, 1.0);
  /* dropout2d: [N, C, H, W] whole channels; NHWC: the last dim */
  pd_tensor *x4 = pd_ones(4, SHAPE(4, 16, 3, 5), PD_FLOAT32);
  pd_tensor *y4 = pd_dropout2d(x4, 0.5, true, NULL);
  expect_shared(y4, 64, 15, 1, false, true, true, 2.0);
  pd_tensor *y4l = pd_dropout2d(pd_ones(4, SHAPE(4, 3, 5, 16), PD_FLOAT32), 0.5, true, "NHWC");
  expect_shared(y4l, 4, 15, 16, false, true, false, 2.0);
  pd_tensor *y5 = pd_dropout3d(pd_ones(5, SHAPE(2, 8, 2, 3, 4), PD_FLOAT64), 0.25, true, NULL);
  expect_shared(y5, 16, 24, 1, false, true, true, 1 / 0.75);
  pd_tensor *y5l = pd_dropout3d(pd_ones(5, SHAPE(2, 2, 3, 4, 8), PD_FLOAT64), 0.25, true, "NDHWC");
  expect_shared(y5l, 2, 24, 8, false, true, false, 1 / 0.75);
  /* a transposed (non-contiguous) x: every output is 0 or x / (1 - p) */
  pd_tensor *base = pd_arange(1, 61, 1, PD_FLOAT32);
  pd_tensor *xt = pd_transpose(pd_reshape(base, 2, SHAPE(6, 10)), 2, SHAPE(1, 0));
  pd_tensor *yt = pd_dropout(xt, 0.5, 0, NULL, true, NULL);
  expect_shape(yt, 2, SHAPE(10, 6));
  for (int64_t i = 0; i < 60; i++) {
    double v = pd_tensor_item_at(yt, i), xv = pd_tensor_item_at(xt, i);
    assert_true(v == 0 || fabs(v - 2 * xv) < 1e-5);
  }
  /* float16 stays float16 */
  pd_tensor *h = pd_dropout(pd_ones(1, SHAPE(64), PD_FLOAT16), 0.5, 0, NULL, true, NULL);
  assert_int_equal(pd_tensor_dtype(h), PD_FLOAT16);
  for (int64_t i = 0; i < 64; i++) assert_true(pd_tensor_item_at(h, i) == 0 || pd_tensor_item_at(h, i) == 2);
  /* empty x */
  expect_shape(pd_dropout(pd_ones(2, SHAPE(0, 3), PD_FLOAT32), 0.5, 0, NULL, true, NULL), 2, SHAPE(0, 3));
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_alpha_dropout(void **state) {
  (void)state;
  pd_scope_begin();
  pd_seed(31);
  const double p = 0.2, alpha_p = -1.6732632423543772848170429916717 * 1.0507009873554804934193349852946;
  const double a = pow((1 - p) * (1 + p * alpha_p * alpha_p), -0.5), b = -a * alpha_p * p;
  pd_tensor *x = pd_randn(1, SHAPE(N_BIG), PD_FLOAT64);
  pd_tensor_set_stop_gradient(x, false);
  pd_tensor *y = pd_alpha_dropout(x, p, true);
  double mean = 0, sq = 0;
  int64_t dropped = 0;
  for (int64_t i = 0; i < N_BIG; i++) {
    double v = pd_tensor_item_at(y, i), xv = pd_tensor_item_at(x, i);
    bool drop = fabs(v - (a * alpha_p + b)) < 1e-12;
    if (!drop && fabs(v - (a * xv + b)) > 1e-12)
      fail_msg("element %lld: %g is neither kept nor dropped", (long long)i, v);
    dropped += drop;
    mean += v;
    sq += v * v;
  }
  mean /= N_BIG;
  double var = sq / N_BIG - mean * mean, f = (double)dropped / N_BIG;
  assert_true(fabs(f - p) < 5 * sqrt(p * (1 - p) / N_BIG));
  /* the correction keeps a standard normal's mean 0 and variance 1 */
  assert_true(fabs(mean) < 0.02);
  assert_true(fabs(var - 1) < 0.03);
  /* backward: a where kept, 0 where dropped */
  assert_int_equal(pd_backward(pd_sum(y, NULL, 0, false), NULL, false), PD_OK);
  pd_tensor *g = pd_tensor_grad(x);
  for (int64_t i = 0; i < N_BIG; i += 101) {
    bool drop = fabs(pd_tensor_item_at(y, i) - (a * alpha_p + b)) < 1e-12;
    assert_true(fabs(pd_tensor_item_at(g, i) - (drop ? 0 : a)) < 1e-12);
  }
  /* p = 1: zeros */
  EXPECT_VALUES(pd_alpha_dropout(T(PD_FLOAT32, 1, SHAPE(2), 1, 2), 1.0, true), 0, 0, 0);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_dropout_layers(void **state) {
  (void)state;
  pd_layer *d = pd_nn_dropout(0.5, NULL);
  pd_layer *d2 = pd_nn_dropout2d(0.3, &(pd_nn_dropout2d_opts){.data_format = "NHWC"});
  pd_layer *d3 = pd_nn_dropout3d(0.3, NULL);
  pd_layer *ad = pd_nn_alpha_dropout(0.1);
  pd_layer *dd =
      pd_nn_dropout(0.25, &(pd_nn_dropout_opts){.naxis = 1, .axis = {1}, .mode = "downscale_in_infer"});
  char *s = pd_layer_to_string(d);
  assert_string_equal(s, "Dropout(p=0.5, axis=None, mode=upscale_in_train)");
  free(s);
  s = pd_layer_to_string(dd);
  assert_string_equal(s, "Dropout(p=0.25, axis=[1], mode=downscale_in_infer)");
  free(s);
  s = pd_layer_to_string(d2);
  assert_string_equal(s, "Dropout2D(p=0.3, data_format=NHWC)");
  free(s);
  s = pd_layer_to_string(ad);
  assert_string_equal(s, "AlphaDropout(p=0.1)");
  free(s);
  pd_scope_begin();
  pd_seed(1);
  pd_tensor *x = pd_ones(2, SHAPE(50, 40), PD_FLOAT32);
  pd_tensor *y = pd_layer_call1(d, x);
  double f = frac_zero(y);
  assert_true(f > 0.4 && f < 0.6);
  pd_layer_eval(d);
  assert_ptr_equal(pd_layer_call1(d, x), x);
  pd_layer_eval(dd);
  EXPECT_VALUES(pd_layer_call1(dd, T(PD_FLOAT32, 2, SHAPE(1, 2), 4, 8)), 1e-7, 3, 6);
  pd_layer_train(dd);
  expect_shared(pd_layer_call1(dd, pd_ones(3, SHAPE(3, 10, 4), PD_FLOAT32)), 3, 10, 4, true, false, true,
                1.0);
  expect_shape(pd_layer_call1(d2, pd_ones(4, SHAPE(2, 3, 3, 4), PD_FLOAT32)), 4, SHAPE(2, 3, 3, 4));
  expect_shape(pd_layer_call1(d3, pd_ones(5, SHAPE(1, 2, 3, 3, 4), PD_FLOAT32)), 5, SHAPE(1, 2, 3, 3, 4));
  expect_shape(pd_layer_call1(ad, x), 2, SHAPE(50, 40));
  expect_error(pd_layer_call1(d2, pd_ones(3, SHAPE(2, 3, 4), PD_FLOAT32)), "dropout2d", "[2, 3, 4]");
  pd_scope_end();
  pd_layer_release(d);
  pd_layer_release(d2);
  pd_layer_release(d3);
  pd_layer_release(ad);
  pd_layer_release(dd);
  assert_null(pd_nn_dropout(1.5, NULL));
  expect_error(NULL, "Dropout", "1.5");
  assert_null(pd_nn_dropout(0.5, &(pd_nn_dropout_opts){.mode = "scale"}));
  expect_error(NULL, "Dropout", "'scale'");
  assert_null(pd_nn_dropout2d(0.5, &(pd_nn_dropout2d_opts){.data_format = "NCL"}));
  expect_error(NULL, "Dropout2D", "'NCL'");
  assert_null(pd_nn_alpha_dropout(-0.5));
  expect_error(NULL, "AlphaDropout", "-0.5");
  expect_no_live_tensors();
}

static void test_dropout_bad_inputs(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = pd_ones(2, SHAPE(2, 3), PD_FLOAT32);
  expect_error(pd_dropout(x, 1.5, 0, NULL, true, NULL), "dropout", "p 1.5 is out of range");
  expect_error(pd_dropout(x, -0.1, 0, NULL, false, NULL), "dropout", "-0.1");
  expect_error(pd_dropout(x, NAN, 0, NULL, true, NULL), "dropout", "nan");
  expect_error(pd_dropout(x, 0.5, 0, NULL, true, "upscale"), "dropout", "mode 'upscale'");
  expect_error(pd_dropout(x, 0.5, 1, SHAPE(2), true, NULL), "dropout", "axis 2 is out of range");
  expect_error(pd_dropout(x, 0.5, 1, SHAPE(-1), true, NULL), "dropout", "axis -1");
  expect_error(pd_dropout(x, 0.5, 3, SHAPE(0, 1, 1), true, NULL), "dropout", "3 axes");
  expect_error(pd_dropout(pd_ones(1, SHAPE(3), PD_INT64), 0.5, 0, NULL, true, NULL), "dropout", "int64");
  expect_error(pd_dropout(NULL, 0.5, 0, NULL, true, NULL), "dropout", "NULL");
  expect_error(pd_dropout2d(x, 0.5, true, NULL), "dropout2d", "4-D");
  expect_error(pd_dropout2d(pd_ones(4, SHAPE(1, 1, 1, 1), PD_FLOAT32), 0.5, true, "NCHW5"), "dropout2d",
               "NCHW5");
  expect_error(pd_dropout3d(x, 0.5, true, NULL), "dropout3d", "[2, 3]");
  expect_error(pd_alpha_dropout(x, 2, true), "alpha_dropout", "2");
  expect_error(pd_alpha_dropout(pd_ones(1, SHAPE(3), PD_INT32), 0.5, true), "alpha_dropout", "int32");
  pd_scope_end();
  expect_no_live_tensors();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_dropout_statistics_and_scaling),
      cmocka_unit_test(test_dropout_eval),
      cmocka_unit_test(test_dropout_counter_contract),
      cmocka_unit_test(test_dropout_seed_and_threads),
      cmocka_unit_test(test_dropout_backward_is_mask),
      cmocka_unit_test(test_dropout_axis_and_channel_forms),
      cmocka_unit_test(test_alpha_dropout),
      cmocka_unit_test(test_dropout_layers),
      cmocka_unit_test(test_dropout_bad_inputs),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
