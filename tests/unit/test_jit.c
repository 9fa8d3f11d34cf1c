/* paddle.jit: to_static trains seed 002's LinearNet from a Program with
 * the eager losses, and with the optimizer's update in the Program too
 * (to_static_train, SGD and Adam); jit.save /
 * jit.load (in a child process too) give the original's outputs;
 * save_inference_model prunes to the fetches; bad files are errors. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "linear_net.h"
#include "paddlec/jit.h"
#include "temp_dir.h"
#include "test_util.h"

static const pd_input_spec k_spec = {2, {-1, 10}, PD_FLOAT32, "x"};

static pd_tensor *batch(int64_t n, double shift) {
  double v[64 * 10];
  for (int64_t i = 0; i < n * 10; i++) v[i] = 0.05 * (double)((i * 13) % 17) - 0.4 + shift;
  return pd_tensor_from_f64(v, PD_FLOAT32, 2, SHAPE(n, 10));
}

/* |x - y| <= 1e-6 max(1, |x|, |y|): float32 values that may differ by a few
 * units in the last place, which grow with the values. The Program's
 * updates differ from eager's there: the fuse_gemm_epilogue pass turns a
 * weight gradient's matmul and its SGD update into one GEMM into the
 * parameter (alpha = -lr, beta = 1), rounding lr times the sum once where
 * eager rounds the sum, then the product (docs/static.md, "Compile
 * passes"); a step's weights then differ by about one unit in the last
 * place, and later losses by as much relative to their size (at lr 0.1,
 * a few 1e-8 on losses near 0.2). With the pass off the step is eager's bit
 * for bit (test_static_passes). */
static bool near(double x, double y) {
  double scale = fabs(x) > fabs(y) ? fabs(x) : fabs(y);
  return fabs(x - y) <= 1e-6 * (scale > 1 ? scale : 1);
}

static void expect_same(pd_tensor *a, pd_tensor *b) {
  assert_int_equal(pd_tensor_numel(a), pd_tensor_numel(b));
  for (int64_t i = 0; i < pd_tensor_numel(a); i++) {
    double x = pd_tensor_item_at(a, i), y = pd_tensor_item_at(b, i);
    if (!near(x, y)) fail_msg("element %lld: %.9g vs %.9g", (long long)i, x, y);
  }
}

/* One SGD step of net on (x, y) with the mean squared error; the loss. */
static double sgd_step(pd_layer *net, pd_optimizer *opt, pd_tensor *x, pd_tensor *y) {
  pd_tensor *out = pd_layer_call1(net, x);
  assert_non_null(out);
  pd_tensor *loss = pd_mse_loss(out, y, PD_REDUCTION_MEAN);
  assert_non_null(loss);
  assert_int_equal(pd_backward(loss, NULL, false), PD_OK);
  assert_int_equal(pd_optimizer_step(opt), PD_OK);
  pd_optimizer_clear_grad(opt, false);
  double v = pd_tensor_item(loss);
  pd_tensor_release(loss);
  pd_tensor_release(out);
  return v;
}

/* Seed 002's LinearNet trained through to_static (forward and gradients
 * from the Program, SGD on the parameters) and eagerly, from the same
 * initial weights: the same losses, batch sizes 3 to 8 through one Program. */
static void test_to_static_trains_like_eager(void **state) {
  (void)state;
  pd_seed(2);
  linear_net *eager = linear_net_new();
  pd_seed(2);
  linear_net *net = linear_net_new();
  pd_layer *st = pd_jit_to_static(&net->base, &k_spec, 1);
  assert_non_null(st);
  pd_named_tensors pe = {0}, ps = {0};
  assert_int_equal(pd_layer_parameters(&eager->base, &pe), PD_OK);
  assert_int_equal(pd_layer_parameters(st, &ps), PD_OK);
  assert_int_equal(ps.n, 4); /* the traced layer's weights and biases */
  pd_optimizer *oe = pd_optimizer_sgd(0.1, pe.tensors, pe.n, NULL);
  pd_optimizer *os = pd_optimizer_sgd(0.1, ps.tensors, ps.n, NULL);
  double first = 0, last = 0;
  for (int step = 0; step < 6; step++) {
    pd_tensor *x = batch(step + 3, 0.1 * step);
    pd_tensor *y = pd_sum(x, (int64_t[]){1}, 1, true);
    /* the forward alone equals eager */
    pd_tensor *e = pd_layer_call1(&eager->base, x), *s = pd_layer_call1(st, x);
    expect_same(s, e);
    pd_tensor_release(e);
    pd_tensor_release(s);
    double le = sgd_step(&eager->base, oe, x, y), ls = sgd_step(st, os, x, y);
    if (!near(le, ls)) fail_msg("step %d: eager loss %.9g, to_static %.9g", step, le, ls);
    if (step == 0) first = ls;
    last = ls;
    pd_tensor_release(x);
    pd_tensor_release(y);
  }
  assert_true(last != first); /* the parameters moved */
  for (int i = 0; i < 4; i++) expect_same(ps.tensors[i], pe.tensors[i]);
  pd_tensor *x = batch(2, 0);
  assert_true(pd_layer_call(st, (pd_tensor *[]){x, x}, 2, (pd_tensor *[2]){0}, 2) < 0);
  assert_non_null(strstr(pd_last_error(), "takes 1"));
  pd_tensor_release(x);
  pd_optimizer_release(oe);
  pd_optimizer_release(os);
  pd_named_tensors_free(&pe);
  pd_named_tensors_free(&ps);
  pd_layer_release(st);
  pd_layer_release(&net->base);
  pd_layer_release(&eager->base);
}

/* Gradients through to_static reach the inputs, as eager: an input with
 * stop_gradient False gets its grad from the gradient Program, one with
 * stop_gradient True none; the parameters' grads are set (Paddle's
 * run_program node). Seed 002's LinearNet and a layer of two inputs
 * without parameters (a * b + exp(a)). */
static int two_in_forward(pd_layer *self, pd_tensor *const *in, int n_in, pd_tensor **out, int max_out) {
  (void)self;
  (void)n_in;
  (void)max_out;
  out[0] = pd_add(pd_multiply(in[0], in[1]), pd_exp(in[0])); /* temporaries: the call's scope */
  return out[0] ? 1 : pd_last_status();
}
static const pd_layer_type two_in_type = {"TwoIn", two_in_forward, NULL, NULL};

static void test_to_static_input_gradients(void **state) {
  (void)state;
  pd_seed(3);
  linear_net *eager = linear_net_new();
  pd_seed(3);
  linear_net *net = linear_net_new();
  pd_layer *st = pd_jit_to_static(&net->base, &k_spec, 1);
  assert_non_null(st);
  pd_tensor *xe = batch(4, 0.2), *xs = batch(4, 0.2);
  pd_tensor_set_stop_gradient(xe, false);
  pd_tensor_set_stop_gradient(xs, false);
  pd_tensor *oe = pd_layer_call1(&eager->base, xe), *os = pd_layer_call1(st, xs);
  pd_tensor *qe = pd_multiply(oe, oe), *qs = pd_multiply(os, os);
  pd_tensor *le = pd_sum(qe, NULL, 0, false), *ls = pd_sum(qs, NULL, 0, false);
  assert_int_equal(pd_backward(le, NULL, false), PD_OK);
  assert_int_equal(pd_backward(ls, NULL, false), PD_OK);
  assert_non_null(pd_tensor_grad(xs));
  expect_same(pd_tensor_grad(xs), pd_tensor_grad(xe));
  pd_named_tensors pe = {0}, ps = {0};
  assert_int_equal(pd_layer_parameters(&eager->base, &pe), PD_OK);
  assert_int_equal(pd_layer_parameters(st, &ps), PD_OK);
  for (int i = 0; i < 4; i++) {
    assert_non_null(pd_tensor_grad(ps.tensors[i]));
    expect_same(pd_tensor_grad(ps.tensors[i]), pd_tensor_grad(pe.tensors[i]));
  }
  /* an input that needs no gradient gets none */
  pd_tensor *xn = batch(4, 0.2), *on = pd_layer_call1(st, xn);
  pd_tensor *ln = pd_sum(on, NULL, 0, false);
  assert_int_equal(pd_backward(ln, NULL, false), PD_OK);
  assert_null(pd_tensor_grad(xn));
  pd_named_tensors_free(&pe);
  pd_named_tensors_free(&ps);
  pd_tensor *ts[] = {xe, xs, oe, os, qe, qs, le, ls, xn, on, ln};
  for (size_t i = 0; i < sizeof ts / sizeof *ts; i++) pd_tensor_release(ts[i]);
  pd_layer_release(st);
  pd_layer_release(&net->base);
  pd_layer_release(&eager->base);

  /* two inputs, only the first needing a gradient: d/da = b + exp(a) */
  pd_layer *two = pd_layer_new(sizeof(pd_layer), &two_in_type);
  const pd_input_spec specs[2] = {{1, {-1}, PD_FLOAT64, "a"}, {1, {-1}, PD_FLOAT64, "b"}};
  pd_layer *st2 = pd_jit_to_static(two, specs, 2);
  assert_non_null(st2);
  pd_tensor *a = T(PD_FLOAT64, 1, SHAPE(3), 0.5, -1.0, 2.0), *b = T(PD_FLOAT64, 1, SHAPE(3), 3.0, 0.25, -2.0);
  pd_tensor_set_stop_gradient(a, false);
  pd_tensor *out = NULL;
  assert_int_equal(pd_layer_call(st2, (pd_tensor *[]){a, b}, 2, &out, 1), 1);
  pd_tensor *l2 = pd_sum(out, NULL, 0, false);
  assert_int_equal(pd_backward(l2, NULL, false), PD_OK);
  EXPECT_VALUES(pd_tensor_grad(a), 1e-15, 3.0 + exp(0.5), 0.25 + exp(-1.0), -2.0 + exp(2.0));
  assert_null(pd_tensor_grad(b));
  pd_tensor *ts2[] = {a, b, out, l2};
  for (size_t i = 0; i < sizeof ts2 / sizeof *ts2; i++) pd_tensor_release(ts2[i]);
  pd_layer_release(st2);
  pd_layer_release(two);
}

/* The training step to_static_train records: mse(layer(x), y). */
static pd_tensor *mse_of_step(pd_layer *layer, pd_tensor *const *in, int n_in, void *user) {
  (void)user;
  assert_int_equal(n_in, 2);
  pd_tensor *out = pd_layer_call1(layer, in[0]);
  pd_tensor *loss = out ? pd_mse_loss(out, in[1], PD_REDUCTION_MEAN) : NULL;
  pd_tensor_release(out);
  return loss;
}

static pd_optimizer *new_optimizer(bool adam, pd_named_tensors *p) {
  return adam ? pd_optimizer_adam(0.1, p->tensors, p->n, NULL)
              : pd_optimizer_sgd(0.1, p->tensors, p->n, NULL);
}

/* Seed 002's LinearNet trained 10 steps with the whole step (forward,
 * backward, update) run from the Program and eagerly: the same losses and
 * parameters; the Program holds the update ops, and an eager step after
 * continues from the accumulators the Program updated. */
static void train_step_like_eager(bool adam) {
  pd_seed(2);
  linear_net *eager = linear_net_new();
  pd_seed(2);
  linear_net *net = linear_net_new();
  pd_named_tensors pe = {0}, pn = {0};
  assert_int_equal(pd_layer_parameters(&eager->base, &pe), PD_OK);
  assert_int_equal(pd_layer_parameters(&net->base, &pn), PD_OK);
  pd_optimizer *oe = new_optimizer(adam, &pe), *on = new_optimizer(adam, &pn);
  const pd_input_spec specs[2] = {k_spec, {2, {-1, 1}, PD_FLOAT32, "y"}};
  pd_layer *step = pd_jit_to_static_train(&net->base, mse_of_step, NULL, on, specs, 2);
  assert_non_null(step);
  char *text = pd_program_to_string(pd_jit_main_program(step));
  assert_non_null(text);
  assert_non_null(strstr(text, adam ? "adam_" : "sgd_"));
  free(text);
  double first = 0, last = 0;
  for (int i = 0; i < 11; i++) {
    pd_tensor *x = batch(i % 6 + 3, 0.02 * i);
    pd_tensor *y = pd_sum(x, (int64_t[]){1}, 1, true);
    double le = sgd_step(&eager->base, oe, x, y), ls;
    if (i < 10) { /* through the Program */
      pd_tensor *loss = NULL;
      assert_int_equal(pd_layer_call(step, (pd_tensor *[]){x, y}, 2, &loss, 1), 1);
      ls = pd_tensor_item(loss);
      pd_tensor_release(loss);
    } else { /* eagerly, with the optimizer whose state the Program kept */
      ls = sgd_step(&net->base, on, x, y);
    }
    if (!near(le, ls)) fail_msg("step %d: eager loss %.9g, static %.9g", i, le, ls);
    if (i == 0) first = ls;
    last = ls;
    for (int k = 0; k < 4; k++) expect_same(pn.tensors[k], pe.tensors[k]);
    pd_tensor_release(x);
    pd_tensor_release(y);
  }
  assert_true(last != first);
  pd_named_tensors se = {0}, sn = {0}; /* the accumulators too */
  assert_int_equal(pd_optimizer_state_dict(oe, &se), PD_OK);
  assert_int_equal(pd_optimizer_state_dict(on, &sn), PD_OK);
  assert_int_equal(sn.n, se.n);
  assert_int_equal(se.n, adam ? 16 : 0);
  for (int k = 0; k < se.n; k++) expect_same(sn.tensors[k], se.tensors[k]);
  pd_named_tensors_free(&se);
  pd_named_tensors_free(&sn);
  pd_optimizer_release(oe);
  pd_optimizer_release(on);
  pd_named_tensors_free(&pe);
  pd_named_tensors_free(&pn);
  pd_layer_release(step);
  pd_layer_release(&net->base);
  pd_layer_release(&eager->base);
}

static void test_to_static_train_sgd_like_eager(void **state) {
  (void)state;
  train_step_like_eager(false);
}

static void test_to_static_train_adam_like_eager(void **state) {
  (void)state;
  train_step_like_eager(true);
}

static void test_to_static_train_bad_input(void **state) {
  (void)state;
  pd_seed(2);
  linear_net *net = linear_net_new();
  pd_named_tensors p = {0};
  assert_int_equal(pd_layer_parameters(&net->base, &p), PD_OK);
  pd_optimizer *o = new_optimizer(false, &p);
  assert_null(pd_jit_to_static_train(&net->base, NULL, NULL, o, &k_spec, 1));
  assert_non_null(strstr(pd_last_error(), "loss_fn is NULL"));
  assert_null(pd_jit_to_static_train(&net->base, mse_of_step, NULL, NULL, &k_spec, 1));
  assert_non_null(strstr(pd_last_error(), "optimizer is NULL"));
  assert_null(pd_jit_main_program(&net->base));
  assert_non_null(strstr(pd_last_error(), "main_program"));
  pd_optimizer_release(o);
  pd_named_tensors_free(&p);
  pd_layer_release(&net->base);
}

static void test_save_load_in_another_process(void **state) {
  (void)state;
  pd_seed(7);
  linear_net *net = linear_net_new();
  pd_layer_train(&net->base);
  const char *path = temp_path("linear_net");
  assert_int_equal(pd_jit_save(&net->base, path, &k_spec, 1), PD_OK);
  assert_true(net->base.training); /* the mode is restored */
  pd_tensor *x = batch(5, 0.3);
  pd_tensor *e = pd_layer_call1(&net->base, x);
  pd_layer_release(&net->base);

  pd_layer *loaded = pd_jit_load(path);
  assert_non_null(loaded);
  pd_tensor *l = pd_layer_call1(loaded, x);
  assert_non_null(l);
  assert_int_equal(pd_tensor_ndim(l), 2);
  assert_int_equal(pd_tensor_shape(l)[0], 5);
  expect_same(l, e);
  pd_tensor_release(l);
  pd_layer_release(loaded);

  /* a child process loads the files and compares with what it is sent */
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    pd_layer *m = pd_jit_load(path);
    pd_tensor *y = m ? pd_layer_call1(m, x) : NULL;
    int ok = y && pd_tensor_numel(y) == pd_tensor_numel(e);
    for (int64_t i = 0; ok && i < pd_tensor_numel(y); i++)
      ok = pd_tensor_item_at(y, i) == pd_tensor_item_at(e, i);
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
  pd_tensor_release(x);
  pd_tensor_release(e);
}

static void test_save_inference_model_prunes(void **state) {
  (void)state;
  pd_program *main = pd_static_program(), *startup = pd_static_program();
  assert_int_equal(pd_static_program_guard_begin(main, startup), PD_OK);
  pd_tensor *x = pd_static_data("x", 2, SHAPE(-1, 3), PD_FLOAT64);
  pd_tensor *y = pd_static_data("y", 2, SHAPE(-1, 1), PD_FLOAT64);
  pd_tensor *pred = pd_static_nn_fc(x, 1, 1, NULL);
  pd_tensor *unused = pd_exp(x); /* no fetch needs it */
  pd_tensor *cost = pd_square_error_cost(pred, y);
  pd_tensor *loss = pd_mean(cost, NULL, 0, false);
  pd_optimizer *sgd = pd_optimizer_sgd(0.5, NULL, 0, NULL);
  assert_int_equal(pd_optimizer_minimize(sgd, loss), PD_OK);
  assert_int_equal(pd_static_program_guard_end(), PD_OK);
  pd_executor *exe = pd_static_executor(PD_CPU);
  pd_var_scope *scope = pd_static_scope();
  assert_int_equal(pd_executor_run(exe, startup, NULL, 0, NULL, 0, NULL, scope), PD_OK);
  pd_tensor *xv = pd_tensor_from_f64((double[]){1, 2, 3, -1, 0, 1}, PD_FLOAT64, 2, SHAPE(2, 3));
  pd_tensor *yv = pd_tensor_from_f64((double[]){1, -1}, PD_FLOAT64, 2, SHAPE(2, 1));
  pd_static_feed feed[2] = {{"x", xv}, {"y", yv}};
  for (int s = 0; s < 3; s++)
    assert_int_equal(pd_executor_run(exe, main, feed, 2, NULL, 0, NULL, scope), PD_OK);
  pd_tensor *want = NULL;
  pd_program *test_prog = pd_program_clone(main, true);
  pd_status rs = pd_executor_run(exe, test_prog, feed, 1, &pred, 1, &want, scope);
  pd_program_release(test_prog);
  if (rs != PD_OK) fail_msg("%s", pd_last_error());

  const char *path = temp_path("fc");
  assert_int_equal(pd_static_save_inference_model(path, &x, 1, &pred, 1, main, scope), PD_OK);
  pd_var_scope *scope2 = pd_static_scope();
  pd_inference_model m;
  assert_int_equal(pd_static_load_inference_model(path, scope2, &m), PD_OK);
  assert_int_equal(m.n_feed, 1);
  assert_string_equal(m.feed_names[0], "x");
  assert_int_equal(m.n_fetch, 1);
  assert_string_equal(m.fetch_names[0], pd_tensor_name(pred));
  /* pruned: matmul and add only (no exp, loss, backward or updates) */
  pd_static_block *gb = pd_program_global_block(m.program);
  assert_int_equal(pd_static_block_num_ops(gb), 2);
  assert_string_equal(pd_static_block_op_type(gb, 0), "matmul");
  assert_string_equal(pd_static_block_op_type(gb, 1), "add");
  pd_tensor *fetch = pd_static_block_var(gb, m.fetch_names[0]), *got = NULL;
  assert_int_equal(pd_executor_run(exe, m.program, feed, 1, &fetch, 1, &got, scope2), PD_OK);
  expect_same(got, want);
  pd_tensor_release(got);
  pd_inference_model_free(&m);

  /* a fetch that is no Variable of the program */
  assert_true(pd_static_save_inference_model(path, &x, 1, &xv, 1, main, scope) < 0);
  /* a truncated model file names the file */
  char model[512];
  snprintf(model, sizeof model, "%s.pdmodel", path);
  size_t n;
  char *bytes = pd_static_load_from_file(model, &n);
  assert_non_null(bytes);
  assert_int_equal(pd_static_save_to_file(model, bytes, n / 2), PD_OK);
  free(bytes);
  assert_null(pd_jit_load(path));
  assert_non_null(strstr(pd_last_error(), model));

  pd_tensor *ts[] = {x, y, pred, unused, cost, loss, xv, yv, want};
  for (size_t i = 0; i < sizeof ts / sizeof *ts; i++) pd_tensor_release(ts[i]);
  pd_optimizer_release(sgd);
  pd_var_scope_release(scope);
  pd_var_scope_release(scope2);
  pd_executor_release(exe);
  pd_program_release(main);
  pd_program_release(startup);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_to_static_trains_like_eager),
      cmocka_unit_test(test_to_static_input_gradients),
      cmocka_unit_test(test_to_static_train_sgd_like_eager),
      cmocka_unit_test(test_to_static_train_adam_like_eager),
      cmocka_unit_test(test_to_static_train_bad_input),
      cmocka_unit_test(test_save_load_in_another_process),
      cmocka_unit_test(test_save_inference_model_prunes),
  };
  return cmocka_run_group_tests(tests, temp_dir_setup, temp_dir_teardown);
}
