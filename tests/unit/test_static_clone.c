/* Program.clone(for_test=True): dropout and batch norm in the clone behave
 * as in inference, the original keeps training; save_inference_model
 * writes the clone's form. */
#include <string.h>

#include "paddlec/static.h"
#include "temp_dir.h"
#include "test_util.h"

static bool has_op(pd_program *p, const char *type) {
  pd_static_block *b = pd_program_global_block(p);
  for (int i = 0; i < pd_static_block_num_ops(b); i++)
    if (strcmp(pd_static_block_op_type(b, i), type) == 0) return true;
  return false;
}

static pd_tensor *input(void) {
  double p[18];
  for (int i = 0; i < 18; i++) p[i] = 0.25 * (i % 7) - 0.4 * (i % 3) + 0.1 * i;
  return pd_tensor_from_f64(p, PD_FLOAT64, 2, SHAPE(6, 3));
}

typedef struct net {
  pd_layer *bn, *drop;
  pd_program *main, *startup;
  pd_tensor *x, *bn_out, *drop_out, *down_out;
} net;

/* x -> BatchNorm1D (training) and x -> Dropout(0.5) and the functional
 * dropout in downscale_in_infer mode, recorded in training mode. The batch
 * norm ran one eager training step first, so its running statistics are
 * not the initial 0 and 1. */
static void build(net *n, pd_tensor *xv) {
  pd_set_default_dtype(PD_FLOAT64);
  n->bn = pd_nn_batch_norm1d(3, NULL);
  n->drop = pd_nn_dropout(0.5, NULL);
  pd_set_default_dtype(PD_FLOAT32);
  pd_tensor *warm = pd_layer_call1(n->bn, xv);
  assert_non_null(warm);
  pd_tensor_release(warm);
  n->main = pd_static_program();
  n->startup = pd_static_program();
  assert_int_equal(pd_static_program_guard_begin(n->main, n->startup), PD_OK);
  n->x = pd_static_data("x", 2, SHAPE(-1, 3), PD_FLOAT64);
  n->bn_out = pd_layer_call1(n->bn, n->x);
  n->drop_out = pd_layer_call1(n->drop, n->x);
  n->down_out = pd_dropout(n->x, 0.25, 0, NULL, true, "downscale_in_infer");
  assert_non_null(n->bn_out);
  assert_non_null(n->drop_out);
  assert_non_null(n->down_out);
  assert_int_equal(pd_static_program_guard_end(), PD_OK);
}

static void release_net(net *n) {
  pd_tensor *ts[] = {n->x, n->bn_out, n->drop_out, n->down_out};
  for (size_t i = 0; i < sizeof ts / sizeof *ts; i++) pd_tensor_release(ts[i]);
  pd_layer_release(n->bn);
  pd_layer_release(n->drop);
  pd_program_release(n->main);
  pd_program_release(n->startup);
}

static void test_clone_for_test_switches_dropout_and_batch_norm(void **state) {
  (void)state;
  pd_tensor *xv = input();
  net n;
  build(&n, xv);
  /* the eager inference answers, with the running statistics of now */
  pd_layer_eval(n.bn);
  pd_tensor *want_bn = pd_layer_call1(n.bn, xv);
  pd_tensor *want_down = pd_scale(xv, 0.75, 0.0, true);
  pd_layer_train(n.bn);

  pd_program *test = pd_program_clone(n.main, true);
  assert_non_null(test);
  assert_true(has_op(n.main, "dropout"));
  assert_true(has_op(n.main, "batch_norm"));
  assert_false(has_op(test, "dropout"));
  assert_false(has_op(test, "batch_norm"));
  assert_true(has_op(test, "batch_norm_infer"));
  assert_false(has_op(test, "add_")); /* the running-statistics update is gone */

  pd_executor *exe = pd_static_executor(PD_CPU);
  pd_var_scope *scope = pd_static_scope();
  assert_int_equal(pd_executor_run(exe, n.startup, NULL, 0, NULL, 0, NULL, scope), PD_OK);
  pd_static_feed feed = {"x", xv};
  pd_tensor *fetch[3] = {n.bn_out, n.drop_out, n.down_out}, *train[3], *infer[3];
  /* the clone first: a run of the original updates the running statistics */
  assert_int_equal(pd_executor_run(exe, test, &feed, 1, fetch, 3, infer, scope), PD_OK);
  assert_int_equal(pd_executor_run(exe, n.main, &feed, 1, fetch, 3, train, scope), PD_OK);

  /* the clone: batch norm on the running statistics, dropout the identity
   * and downscale_in_infer a scale by 1 - p */
  expect_close(infer[0], want_bn, 0, 1e-12);
  assert_true(same_bits(infer[1], xv));
  expect_close(infer[2], want_down, 0, 1e-15);
  /* the original: batch statistics (each column has mean 0) and a mask
   * (some zeros, the rest doubled) */
  pd_tensor *colmean = pd_mean(train[0], SHAPE(0), 1, false);
  EXPECT_VALUES(colmean, 1e-12, 0, 0, 0);
  const double *d = pd_tensor_data(train[1]), *x = pd_tensor_data(xv);
  int zeros = 0;
  for (int i = 0; i < 18; i++) {
    if (d[i] == 0 && x[i] != 0)
      zeros++;
    else
      assert_true(d[i] == 2 * x[i]);
  }
  assert_true(zeros > 0 && zeros < 18);
  pd_tensor_release(colmean);
  for (int i = 0; i < 3; i++) pd_tensor_release(train[i]), pd_tensor_release(infer[i]);
  pd_tensor_release(want_bn);
  pd_tensor_release(want_down);
  pd_tensor_release(xv);
  pd_var_scope_release(scope);
  pd_executor_release(exe);
  pd_program_release(test);
  release_net(&n);
}

/* save_inference_model writes the for_test form: loaded and run, dropout
 * is off and batch norm uses the running statistics. */
static void test_inference_model_is_the_test_form(void **state) {
  (void)state;
  pd_tensor *xv = input();
  net n;
  build(&n, xv);
  pd_layer_eval(n.bn);
  pd_tensor *want_bn = pd_layer_call1(n.bn, xv);
  pd_executor *exe = pd_static_executor(PD_CPU);
  pd_var_scope *scope = pd_static_scope();
  assert_int_equal(pd_executor_run(exe, n.startup, NULL, 0, NULL, 0, NULL, scope), PD_OK);
  pd_tensor *fetch[2] = {n.bn_out, n.drop_out};
  const char *prefix = temp_path("clone_model");
  assert_int_equal(pd_static_save_inference_model(prefix, &n.x, 1, fetch, 2, n.main, scope), PD_OK);
  pd_var_scope *s2 = pd_static_scope();
  pd_inference_model m;
  assert_int_equal(pd_static_load_inference_model(prefix, s2, &m), PD_OK);
  assert_false(has_op(m.program, "dropout"));
  pd_static_feed feed = {m.feed_names[0], xv};
  pd_tensor *got[2];
  pd_tensor *fv[2] = {pd_static_block_var(pd_program_global_block(m.program), m.fetch_names[0]),
                      pd_static_block_var(pd_program_global_block(m.program), m.fetch_names[1])};
  assert_int_equal(pd_executor_run(exe, m.program, &feed, 1, fv, 2, got, s2), PD_OK);
  expect_close(got[0], want_bn, 0, 1e-12);
  assert_true(same_bits(got[1], xv));
  pd_tensor_release(got[0]), pd_tensor_release(got[1]);
  pd_inference_model_free(&m);
  pd_tensor_release(want_bn);
  pd_tensor_release(xv);
  pd_var_scope_release(scope), pd_var_scope_release(s2);
  pd_executor_release(exe);
  release_net(&n);
}

/* An op with an output no fetch needs (max_pool2d's indices) keeps it in
 * the saved model: the file names every output of the ops it holds. */
static void test_inference_model_keeps_unfetched_outputs(void **state) {
  (void)state;
  double v[16];
  for (int i = 0; i < 16; i++) v[i] = (i * 7) % 11 - 5.0;
  pd_tensor *xv = pd_tensor_from_f64(v, PD_FLOAT64, 4, SHAPE(1, 1, 4, 4));
  pd_program *main = pd_static_program(), *startup = pd_static_program();
  assert_int_equal(pd_static_program_guard_begin(main, startup), PD_OK);
  pd_tensor *x = pd_static_data("x", 4, SHAPE(-1, 1, 4, 4), PD_FLOAT64);
  pd_tensor *y = pd_max_pool2d(x, 1, SHAPE(2), NULL);
  assert_non_null(y);
  assert_int_equal(pd_static_program_guard_end(), PD_OK);
  const char *prefix = temp_path("pool_model");
  assert_int_equal(pd_static_save_inference_model(prefix, &x, 1, &y, 1, main, NULL), PD_OK);
  pd_var_scope *scope = pd_static_scope();
  pd_inference_model m;
  assert_int_equal(pd_static_load_inference_model(prefix, scope, &m), PD_OK);
  pd_executor *exe = pd_static_executor(PD_CPU);
  pd_static_feed feed = {"x", xv};
  pd_tensor *fv = pd_static_block_var(pd_program_global_block(m.program), m.fetch_names[0]), *got;
  assert_int_equal(pd_executor_run(exe, m.program, &feed, 1, &fv, 1, &got, scope), PD_OK);
  pd_tensor *want = pd_max_pool2d(xv, 1, SHAPE(2), NULL);
  assert_true(same_bits(got, want));
  pd_tensor *ts[] = {xv, x, y, got, want};
  for (int i = 0; i < 5; i++) pd_tensor_release(ts[i]);
  pd_inference_model_free(&m);
  pd_executor_release(exe);
  pd_var_scope_release(scope);
  pd_program_release(main);
  pd_program_release(startup);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_clone_for_test_switches_dropout_and_batch_norm),
      cmocka_unit_test(test_inference_model_is_the_test_form),
      cmocka_unit_test(test_inference_model_keeps_unfetched_outputs),
  };
  return cmocka_run_group_tests(tests, temp_dir_setup, temp_dir_teardown);
}
