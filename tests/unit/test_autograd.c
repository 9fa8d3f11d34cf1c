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

/* A leaf's gradient that nothing else holds becomes its .grad as it is (a
 * weight's gradient from a GEMM, not copied); one shared by two leaves (add
 * passes the same gradient to both) is copied for each, so the .grads never
 * alias: adding into one in place leaves the other, and a second backward adds
 * into each on its own. */
static pd_tensor *note_grad_data(pd_tensor *g, void *user) {
  *(const void **)user = pd_tensor_data(g);
  return NULL; /* no replacement */
}

static void test_leaf_grads_taken_not_shared(void **state) {
  (void)state;
  pd_scope_begin();
  const void *seen = NULL; /* the data of the gradient that reached w */
  pd_tensor *x = T(PD_FLOAT32, 2, SHAPE(2, 3), 1, 2, 3, 4, 5, 6);
  pd_tensor *w = T(PD_FLOAT32, 2, SHAPE(3, 2), 1, 0, 0, 1, 1, 1);
  pd_tensor_set_stop_gradient(w, false);
  assert_true(pd_tensor_register_hook(w, note_grad_data, &seen) >= 0);
  pd_tensor *a = T(PD_FLOAT32, 1, SHAPE(2), 1, 2), *b = T(PD_FLOAT32, 1, SHAPE(2), 3, 4);
  pd_tensor_set_stop_gradient(a, false);
  pd_tensor_set_stop_gradient(b, false);
  pd_tensor *loss =
      pd_add(pd_sum(pd_matmul(x, w, false, false), NULL, 0, false), pd_sum(pd_add(a, b), NULL, 0, false));
  assert_int_equal(pd_backward(loss, NULL, true), PD_OK);
  EXPECT_VALUES(pd_tensor_grad(w), 0, 5, 5, 7, 7, 9, 9);     /* x^T ones: column sums of x */
  assert_ptr_equal(pd_tensor_data(pd_tensor_grad(w)), seen); /* taken, not copied */
  pd_tensor *ga = pd_tensor_grad(a), *gb = pd_tensor_grad(b);
  assert_ptr_not_equal(pd_tensor_data(ga), pd_tensor_data(gb));
  assert_non_null(pd_add_(ga, T(PD_FLOAT32, 1, SHAPE(2), 9, 9)));
  EXPECT_VALUES(pd_tensor_grad(a), 0, 10, 10);
  EXPECT_VALUES(pd_tensor_grad(b), 0, 1, 1);
  assert_int_equal(pd_backward(loss, NULL, false), PD_OK);
  EXPECT_VALUES(pd_tensor_grad(a), 0, 11, 11);
  EXPECT_VALUES(pd_tensor_grad(b), 0, 2, 2);
  EXPECT_VALUES(pd_tensor_grad(w), 0, 10, 10, 14, 14, 18, 18);
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

static void count_post(pd_tensor *leaf, void *user) {
  (void)leaf;
  (*(int *)user)++;
}

static void test_post_accumulate_hook_and_removal(void **state) {
  (void)state;
  int posts = 0, calls = 0;
  pd_scope_begin();
  pd_tensor *x = T(PD_FLOAT32, 1, SHAPE(2), 1, 2);
  pd_tensor_set_stop_gradient(x, false);
  assert_true(pd_tensor_register_post_accumulate_hook(x, count_post, &posts) > 0);
  int id = pd_tensor_register_hook(x, double_it, &calls);
  assert_true(id > 0);
  assert_int_equal(pd_tensor_remove_hook(x, id), PD_OK);
  assert_true(pd_tensor_remove_hook(x, id) < 0); /* already gone */
  pd_clear_error();
  assert_int_equal(pd_backward(pd_sum(pd_multiply(x, x), NULL, 0, false), NULL, false), PD_OK);
  EXPECT_VALUES(pd_tensor_grad(x), 0, 2, 4);
  assert_int_equal(posts, 1);
  assert_int_equal(calls, 0);
  /* a non-leaf has no post-accumulate hook */
  pd_tensor *y = pd_scale(x, 2, 0, true);
  assert_true(pd_tensor_register_post_accumulate_hook(y, count_post, &posts) < 0);
  pd_clear_error();
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_grad_unused_nonleaf_and_detach(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = T(PD_FLOAT64, 1, SHAPE(2), 1, 2);
  pd_tensor *u = T(PD_FLOAT64, 1, SHAPE(2), 5, 5);
  pd_tensor_set_stop_gradient(x, false);
  pd_tensor_set_stop_gradient(u, false);
  pd_tensor *h = pd_scale(x, 3, 0, true); /* non-leaf */
  pd_tensor *f = pd_sum(pd_multiply(h, h), NULL, 0, false);
  pd_tensor *in[2] = {h, u}, *g[2];
  assert_true(pd_grad(&f, 1, in, 2, NULL, &(pd_grad_opts){.retain_graph = true}, g) < 0);
  assert_non_null(strstr(pd_last_error(), "allow_unused"));
  pd_clear_error();
  assert_int_equal(
      pd_grad(&f, 1, in, 2, NULL, &(pd_grad_opts){.allow_unused = true, .retain_graph = true}, g), PD_OK);
  EXPECT_VALUES(g[0], 1e-12, 6, 12); /* d(h^2)/dh = 2h */
  assert_null(g[1]);
  /* detach shares data but cuts the graph */
  pd_tensor *d = pd_detach(h);
  assert_true(pd_tensor_stop_gradient(d));
  assert_true(pd_tensor_shares_storage(d, h));
  pd_scope_end();
  expect_no_live_tensors();
}

/* Inputs the outputs do not reach at all: no node of the graph leads to
 * them, so every node runs without a gradient buffer. */
static void test_grad_no_input_reachable(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = T(PD_FLOAT64, 1, SHAPE(3), 1, 2, 3);
  pd_tensor *z = T(PD_FLOAT64, 1, SHAPE(2), 4, 5);
  pd_tensor_set_stop_gradient(x, false);
  pd_tensor_set_stop_gradient(z, false);
  pd_tensor *y = pd_sum(pd_multiply(x, x), NULL, 0, false);
  pd_tensor *g = x; /* overwritten with the result */
  assert_true(pd_grad(&y, 1, &z, 1, NULL, &(pd_grad_opts){.retain_graph = true}, &g) < 0);
  assert_null(g);
  assert_non_null(strstr(pd_last_error(), "inputs[0] is not used"));
  pd_clear_error();
  assert_int_equal(
      pd_grad(&y, 1, &z, 1, NULL, &(pd_grad_opts){.allow_unused = true, .retain_graph = true}, &g), PD_OK);
  assert_null(g);
  /* an unreachable input beside a reachable one: it alone gets NULL */
  pd_tensor *in[2] = {z, x}, *gs[2];
  assert_int_equal(pd_grad(&y, 1, in, 2, NULL, &(pd_grad_opts){.allow_unused = true}, gs), PD_OK);
  assert_null(gs[0]);
  EXPECT_VALUES(gs[1], 1e-12, 2, 4, 6);
  pd_scope_end();
  expect_no_live_tensors();
}

/* Double backward of an MSE loss: L = sum((w x - y)^2) / n.
 * dL/dw = 2/n sum(x (w x - y)), d2L/dw2 = 2/n sum(x^2). */
static void test_double_backward_mse(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = T(PD_FLOAT64, 1, SHAPE(4), 1, 2, 3, 4);
  pd_tensor *y = T(PD_FLOAT64, 1, SHAPE(4), 2, 3, 7, 9);
  pd_tensor *w = T(PD_FLOAT64, 1, SHAPE(1), 0.5);
  pd_tensor_set_stop_gradient(w, false);
  pd_tensor *e = pd_subtract(pd_multiply(w, x), y);
  pd_tensor *L = pd_scale(pd_sum(pd_multiply(e, e), NULL, 0, false), 0.25, 0, true);
  pd_tensor *g = NULL, *gg = NULL;
  assert_int_equal(pd_grad(&L, 1, &w, 1, NULL, &(pd_grad_opts){.create_graph = true}, &g), PD_OK);
  double want_g = 0;
  for (int i = 0; i < 4; i++) {
    double xi = i + 1, yi = (double[]){2, 3, 7, 9}[i];
    want_g += 2.0 / 4 * xi * (0.5 * xi - yi);
  }
  EXPECT_VALUES(g, 1e-12, want_g);
  assert_false(pd_tensor_stop_gradient(g));
  assert_int_equal(pd_grad(&g, 1, &w, 1, NULL, NULL, &gg), PD_OK);
  EXPECT_VALUES(gg, 1e-12, 2.0 / 4 * (1 + 4 + 9 + 16));
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_backward_errors(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = T(PD_FLOAT32, 1, SHAPE(3), 1, 2, 3);
  assert_true(pd_backward(x, NULL, false) < 0); /* stop_gradient */
  assert_non_null(strstr(pd_last_error(), "stop_gradient"));
  pd_clear_error();
  pd_tensor_set_stop_gradient(x, false);
  pd_tensor *y = pd_scale(x, 2, 0, true);
  assert_true(pd_backward(y, NULL, false) < 0); /* not a scalar, no grad given */
  assert_non_null(strstr(pd_last_error(), "[3]"));
  pd_clear_error();
  pd_tensor *bad = T(PD_FLOAT32, 1, SHAPE(2), 1, 1);
  assert_true(pd_backward(y, bad, false) < 0);
  assert_non_null(strstr(pd_last_error(), "[2]"));
  pd_clear_error();
  pd_tensor *gy = T(PD_FLOAT32, 1, SHAPE(3), 1, 0, -1);
  assert_int_equal(pd_backward(y, gy, false), PD_OK);
  EXPECT_VALUES(pd_tensor_grad(x), 0, 2, 0, -2);
  assert_true(pd_backward(NULL, NULL, false) < 0);
  pd_clear_error();
  pd_scope_end();
  expect_no_live_tensors();
}

/* Paddle promotes tensor-tensor arithmetic only between floating dtypes,
 * and gradients flow back through the promotion cast. */
static void test_promotion(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *h = pd_cast(T(PD_FLOAT32, 1, SHAPE(2), 1.5, 2), PD_FLOAT16);
  pd_tensor *b = pd_cast(T(PD_FLOAT32, 1, SHAPE(2), 1, 1), PD_BFLOAT16);
  pd_tensor *d = T(PD_FLOAT64, 1, SHAPE(2), 0.25, 0.5);
  pd_tensor *s = pd_add(h, b);
  assert_int_equal(pd_tensor_dtype(s), PD_FLOAT32);
  EXPECT_VALUES(s, 0, 2.5, 3);
  pd_tensor_set_stop_gradient(h, false);
  pd_tensor *m = pd_multiply(h, d);
  assert_int_equal(pd_tensor_dtype(m), PD_FLOAT64);
  assert_int_equal(pd_backward(pd_sum(m, NULL, 0, false), NULL, false), PD_OK);
  assert_int_equal(pd_tensor_dtype(pd_tensor_grad(h)), PD_FLOAT16);
  EXPECT_VALUES(pd_tensor_grad(h), 0, 0.25, 0.5);
  pd_tensor *i = T(PD_INT32, 1, SHAPE(2), 1, 2);
  expect_error(pd_add(d, i), "add", "float64");
  expect_error(pd_multiply(i, T(PD_INT64, 1, SHAPE(2), 1, 2)), "int32", "int64");
  pd_tensor *ii = pd_add(i, i); /* same integer dtype: fine */
  assert_int_equal(pd_tensor_dtype(ii), PD_INT32);
  EXPECT_VALUES(ii, 0, 2, 4);
  pd_scope_end();
  expect_no_live_tensors();
}

/* The implicit seed of backward is a one of the loss's dtype and shape, for
 * a loss of one element of any rank. */
static void test_backward_seed(void **state) {
  (void)state;
  const pd_dtype dts[] = {PD_FLOAT32, PD_FLOAT64, PD_FLOAT16};
  for (int k = 0; k < 3; k++) {
    pd_tensor *x = T(dts[k], 2, SHAPE(1, 1), 2);
    pd_tensor_set_stop_gradient(x, false);
    pd_tensor *y = pd_scale(x, 3.0, 0.0, true);
    assert_int_equal(pd_backward(y, NULL, false), PD_OK);
    pd_tensor *g = pd_tensor_grad(x);
    assert_non_null(g);
    assert_int_equal(pd_tensor_dtype(g), dts[k]);
    assert_int_equal(pd_tensor_ndim(g), 2);
    assert_true(pd_tensor_item(g) == 3.0);
    pd_tensor_release(y);
    pd_tensor_release(x);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_backward_broadcast_mul),
      cmocka_unit_test(test_accumulate_and_retain),
      cmocka_unit_test(test_leaf_grads_taken_not_shared),
      cmocka_unit_test(test_subtract_divide_grad),
      cmocka_unit_test(test_grad_create_graph),
      cmocka_unit_test(test_hooks_and_no_grad),
      cmocka_unit_test(test_inplace_version_error),
      cmocka_unit_test(test_pylayer_cus_tanh),
      cmocka_unit_test(test_post_accumulate_hook_and_removal),
      cmocka_unit_test(test_grad_unused_nonleaf_and_detach),
      cmocka_unit_test(test_grad_no_input_reachable),
      cmocka_unit_test(test_double_backward_mse),
      cmocka_unit_test(test_backward_errors),
      cmocka_unit_test(test_promotion),
      cmocka_unit_test(test_backward_seed),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
