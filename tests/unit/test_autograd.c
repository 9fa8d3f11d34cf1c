/* Autograd engine: backward, accumulation, retain_graph, pd_grad,
 * create_graph, hooks, no_grad, inplace-version errors, PyLayer. */
#include <math.h>
#include <string.h>

#include "test_util.h"

static void test_backward_broadcast_mul(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = T(PD_FLOAT64, 2, SHAPE(2, 3), 1, 2, 3, 4, 5, 6);
  pd_tensor *y = T(PD_FLOAT64, 1, SHAPE(3), 10, 20, 30);
  pd_tensor_set_stop_gradient(x, false);
  pd_tensor_set_stop_gradient(y, false);
  pd_tensor *z = pd_sum(pd_multiply(x, y), NULL, 0, false);
  assert_int_equal(pd_backward(z, NULL, false), PD_OK);
  EXPECT_VALUES(pd_tensor_grad(x), 0, 10, 20, 30, 10, 20, 30);
  EXPECT_VALUES(pd_tensor_grad(y), 0, 5, 7, 9);
  /* a second backward through a freed graph is an error naming the op */
  assert_true(pd_backward(z, NULL, false) < 0);
  assert_non_null(strstr(pd_last_error(), "already freed"));
  pd_clear_error();
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_accumulate_and_retain(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = T(PD_FLOAT32, 1, SHAPE(2), 1, 2);
  pd_tensor_set_stop_gradient(x, false);
  pd_tensor *z = pd_sum(pd_multiply(x, x), NULL, 0, false);
  assert_int_equal(pd_backward(z, NULL, true), PD_OK);
  assert_int_equal(pd_backward(z, NULL, false), PD_OK);
  EXPECT_VALUES(pd_tensor_grad(x), 0, 4, 8); /* 2 * 2x */
  pd_tensor_clear_grad(x, true);
  EXPECT_VALUES(pd_tensor_grad(x), 0, 0, 0);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_subtract_divide_grad(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = T(PD_FLOAT64, 1, SHAPE(2), 3, 4);
  pd_tensor *y = T(PD_FLOAT64, 1, SHAPE(2), 2, 8);
  pd_tensor_set_stop_gradient(x, false);
  pd_tensor_set_stop_gradient(y, false);
  pd_tensor *z = pd_sum(pd_subtract(pd_divide(x, y), y), NULL, 0, false);
  assert_int_equal(pd_backward(z, NULL, false), PD_OK);
  EXPECT_VALUES(pd_tensor_grad(x), 1e-12, 0.5, 0.125);
  EXPECT_VALUES(pd_tensor_grad(y), 1e-12, -3.0 / 4 - 1, -4.0 / 64 - 1);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_grad_create_graph(void **state) {
  (void)state;
  pd_scope_begin();
  /* f = sum(x^3): df = 3x^2, d2f = 6x */
  pd_tensor *x = T(PD_FLOAT64, 1, SHAPE(2), 2, -1);
  pd_tensor_set_stop_gradient(x, false);
  pd_tensor *f = pd_sum(pd_multiply(pd_multiply(x, x), x), NULL, 0, false);
  pd_tensor *g = NULL;
  assert_int_equal(pd_grad(&f, 1, &x, 1, NULL, &(pd_grad_opts){.create_graph = true}, &g), PD_OK);
  EXPECT_VALUES(g, 1e-12, 12, 3);
  assert_null(pd_tensor_grad(x)); /* paddle.grad leaves .grad alone */
  pd_tensor *gs = pd_sum(g, NULL, 0, false);
  pd_tensor *gg = NULL;
  assert_int_equal(pd_grad(&gs, 1, &x, 1, NULL, NULL, &gg), PD_OK);
  EXPECT_VALUES(gg, 1e-12, 12, -6);
  pd_scope_end();
  expect_no_live_tensors();
}

static pd_tensor *double_it(pd_tensor *g, void *user) {
  (*(int *)user)++;
  return pd_scale(g, 2.0, 0.0, true);
}

static void test_hooks_and_no_grad(void **state) {
  (void)state;
  int calls = 0;
  pd_scope_begin();
  pd_tensor *x = T(PD_FLOAT32, 1, SHAPE(3), 1, 2, 3);
  pd_tensor_set_stop_gradient(x, false);
  pd_tensor *y = pd_scale(x, 3.0, 0.0, true);
  assert_true(pd_tensor_register_hook(y, double_it, &calls) > 0);
  assert_true(pd_tensor_register_hook(x, double_it, &calls) > 0);
  assert_int_equal(pd_backward(pd_sum(y, NULL, 0, false), NULL, false), PD_OK);
  EXPECT_VALUES(pd_tensor_grad(x), 0, 12, 12, 12);
  assert_int_equal(calls, 2);
  pd_no_grad_begin();
  pd_tensor *w = pd_scale(x, 2.0, 0.0, true);
  pd_no_grad_end();
  assert_true(pd_tensor_stop_gradient(w));
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_inplace_version_error(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = T(PD_FLOAT64, 1, SHAPE(2), 1, 2);
  pd_tensor_set_stop_gradient(x, false);
  pd_tensor *a = pd_scale(x, 1.0, 1.0, true); /* non-leaf */
  pd_tensor *b = pd_multiply(a, a);           /* saves a */
  pd_tensor *one = T(PD_FLOAT64, 1, SHAPE(2), 1, 1);
  assert_non_null(pd_add_(a, one));
  assert_true(pd_backward(pd_sum(b, NULL, 0, false), NULL, false) < 0);
  assert_non_null(strstr(pd_last_error(), "modified by an inplace operation"));
  assert_non_null(strstr(pd_last_error(), "multiply"));
  pd_clear_error();
  /* inplace on a leaf that needs grad is refused */
  expect_error(pd_add_(x, one), "add_", "leaf");
  pd_scope_end();
  expect_no_live_tensors();
}

/* The seed's cus_tanh PyLayer: forward y = tanh(x), backward dy * (1 - y^2). */
static pd_status cus_tanh_forward(pd_pylayer_ctx *ctx, pd_tensor *const *in, int n_in, pd_tensor **out,
                                  int n_out) {
  (void)n_in;
  (void)n_out;
  int64_t n = pd_tensor_numel(in[0]);
  out[0] = pd_clone(in[0], PD_NUM_DTYPES);
  double *p = pd_tensor_data(out[0]);
  for (int64_t i = 0; i < n; i++) p[i] = tanh(p[i]);
  return pd_pylayer_save_for_backward(ctx, out, 1);
}

static pd_status cus_tanh_backward(pd_pylayer_ctx *ctx, pd_tensor *const *g, int n_out, pd_tensor **gin,
                                   int n_in) {
  (void)n_out;
  (void)n_in;
  pd_tensor *y = pd_pylayer_saved_tensor(ctx, 0);
  pd_tensor *yy = pd_multiply(y, y);
  pd_tensor *one_minus = pd_scale(yy, -1.0, 1.0, true);
  gin[0] = pd_multiply(g[0], one_minus);
  pd_tensor_release(yy);
  pd_tensor_release(one_minus);
  return gin[0] ? PD_OK : pd_last_status();
}

static void test_pylayer_cus_tanh(void **state) {
  (void)state;
  static const pd_pylayer cus_tanh = {"cus_tanh", cus_tanh_forward, cus_tanh_backward};
  pd_scope_begin();
  pd_tensor *x = T(PD_FLOAT64, 1, SHAPE(3), -0.5, 0.1, 2.0);
  pd_tensor_set_stop_gradient(x, false);
  pd_tensor *y = NULL;
  assert_int_equal(pd_pylayer_apply(&cus_tanh, &x, 1, &y, 1), PD_OK);
  assert_false(pd_tensor_stop_gradient(y));
  assert_int_equal(pd_backward(pd_sum(y, NULL, 0, false), NULL, false), PD_OK);
  double want[3];
  for (int i = 0; i < 3; i++) {
    double t = tanh((double[]){-0.5, 0.1, 2.0}[i]);
    want[i] = 1 - t * t;
  }
  expect_values(pd_tensor_grad(x), want, 3, 1e-12);
  pd_scope_end();
  expect_no_live_tensors();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_backward_broadcast_mul), cmocka_unit_test(test_accumulate_and_retain),
      cmocka_unit_test(test_subtract_divide_grad),   cmocka_unit_test(test_grad_create_graph),
      cmocka_unit_test(test_hooks_and_no_grad),      cmocka_unit_test(test_inplace_version_error),
      cmocka_unit_test(test_pylayer_cus_tanh),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
