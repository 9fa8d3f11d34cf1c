/* Layer buffers in static mode: batch norm's running mean and variance are
 * persistable Variables the startup program initialises, the training
 * Program's batch_norm updates in place and its clone(for_test) reads, so
 * a Program trained for some steps and its inference clone compute what
 * the eager layer computes after the same steps. */
#include <string.h>

#include "paddlec/static.h"
#include "temp_dir.h"
#include "test_util.h"

enum { BATCH = 6, IN = 4, STEPS = 3 };

static pd_tensor *batch(int step) {
  double v[BATCH * IN];
  for (int i = 0; i < BATCH * IN; i++) v[i] = 0.3 * ((i * 7 + step * 5) % 11) - 1.1 + 0.05 * step * (i % 3);
  return pd_tensor_from_f64(v, PD_FLOAT64, 2, SHAPE(BATCH, IN));
}

static pd_tensor *target(void) {
  double v[BATCH];
  for (int i = 0; i < BATCH; i++) v[i] = 0.5 * i - 1.0;
  return pd_tensor_from_f64(v, PD_FLOAT64, 2, SHAPE(BATCH, 1));
}

/* Linear(IN, 3) -> BatchNorm1D(3) -> Linear(3, 1), float64. */
typedef struct model {
  pd_layer *fc1, *bn, *fc2;
} model;

static model make_model(void) {
  pd_set_default_dtype(PD_FLOAT64);
  model m = {pd_nn_linear(IN, 3, NULL), pd_nn_batch_norm1d(3, NULL), pd_nn_linear(3, 1, NULL)};
  pd_set_default_dtype(PD_FLOAT32);
  assert_non_null(m.fc1);
  assert_non_null(m.bn);
  assert_non_null(m.fc2);
  return m;
}

static pd_tensor *forward(const model *m, pd_tensor *x) {
  pd_tensor *h = pd_layer_call1(m->fc1, x);
  pd_tensor *b = h ? pd_layer_call1(m->bn, h) : NULL;
  pd_tensor *y = b ? pd_layer_call1(m->fc2, b) : NULL;
  pd_tensor_release(h);
  pd_tensor_release(b);
  return y;
}

static void release_model(model *m) {
  pd_layer_release(m->fc1);
  pd_layer_release(m->bn);
  pd_layer_release(m->fc2);
}

static pd_optimizer *sgd_for(const model *m) {
  pd_layer *ls[3] = {m->fc1, m->bn, m->fc2};
  pd_tensor *ps[16];
  int n = 0;
  for (int k = 0; k < 3; k++) {
    pd_named_tensors nt;
    assert_int_equal(pd_layer_parameters(ls[k], &nt), PD_OK);
    for (int i = 0; i < nt.n; i++) {
      const pd_param_info *info = pd_tensor_param_info(nt.tensors[i]);
      if (!info || info->trainable) ps[n++] = pd_tensor_retain(nt.tensors[i]);
    }
    pd_named_tensors_free(&nt);
  }
  pd_optimizer *o = pd_optimizer_sgd(0.1, ps, n, NULL);
  for (int i = 0; i < n; i++) pd_tensor_release(ps[i]);
  return o;
}

typedef struct static_net {
  model m;
  pd_program *main, *startup, *test;
  pd_tensor *x, *y, *out, *loss;
} static_net;

/* The same model built under program_guard after pd_seed(seed): its
 * parameters and running statistics are initialised by the startup
 * program, and minimize appends SGD. */
static void build_static(static_net *s, uint64_t seed) {
  s->main = pd_static_program();
  s->startup = pd_static_program();
  pd_seed(seed);
  assert_int_equal(pd_static_program_guard_begin(s->main, s->startup), PD_OK);
  s->m = make_model();
  s->x = pd_static_data("x", 2, SHAPE(-1, IN), PD_FLOAT64);
  s->y = pd_static_data("y", 2, SHAPE(-1, 1), PD_FLOAT64);
  s->out = forward(&s->m, s->x);
  assert_non_null(s->out);
  s->loss = pd_mse_loss(s->out, s->y, PD_REDUCTION_MEAN);
  assert_non_null(s->loss);
  s->test = pd_program_clone(s->main, true);
  assert_non_null(s->test);
  pd_optimizer *o = pd_optimizer_sgd(0.1, NULL, 0, NULL);
  assert_int_equal(pd_optimizer_minimize(o, s->loss), PD_OK);
  pd_optimizer_release(o);
  assert_int_equal(pd_static_program_guard_end(), PD_OK);
}

static void release_static(static_net *s) {
  pd_tensor *ts[] = {s->x, s->y, s->out, s->loss};
  for (size_t i = 0; i < sizeof ts / sizeof *ts; i++) pd_tensor_release(ts[i]);
  release_model(&s->m);
  pd_program_release(s->main);
  pd_program_release(s->startup);
  pd_program_release(s->test);
}

/* Eager: STEPS SGD steps in train mode after pd_seed(seed), then the eval
 * output on the probe. */
static pd_tensor *eager_after_training(uint64_t seed, pd_tensor *probe, pd_tensor *yv) {
  pd_seed(seed);
  model m = make_model();
  pd_optimizer *o = sgd_for(&m);
  for (int s = 0; s < STEPS; s++) {
    pd_tensor *xv = batch(s), *out = forward(&m, xv);
    pd_tensor *loss = pd_mse_loss(out, yv, PD_REDUCTION_MEAN);
    assert_int_equal(pd_backward(loss, NULL, false), PD_OK);
    assert_int_equal(pd_optimizer_step(o), PD_OK);
    pd_optimizer_clear_grad(o, true);
    pd_tensor_release(xv), pd_tensor_release(out), pd_tensor_release(loss);
  }
  pd_layer_eval(m.bn);
  pd_tensor *want = forward(&m, probe);
  pd_optimizer_release(o);
  release_model(&m);
  return want;
}

static void train_static(static_net *s, pd_executor *exe, pd_var_scope *scope, pd_tensor *yv) {
  for (int k = 0; k < STEPS; k++) {
    pd_tensor *xv = batch(k), *lv;
    pd_static_feed feed[2] = {{"x", xv}, {"y", yv}};
    assert_int_equal(pd_executor_run(exe, s->main, feed, 2, &s->loss, 1, &lv, scope), PD_OK);
    pd_tensor_release(lv), pd_tensor_release(xv);
  }
}

/* The running statistics are persistable Variables of the main Program,
 * written by the startup program (not constants), so the clone reads what
 * training left in the scope. */
static void test_running_stats_are_persistable_scope_vars(void **state) {
  (void)state;
  static_net s;
  build_static(&s, 5);
  pd_named_tensors nt;
  assert_int_equal(pd_layer_state_dict(s.m.bn, &nt), PD_OK);
  pd_executor *exe = pd_static_executor(PD_CPU);
  pd_var_scope *scope = pd_static_scope();
  pd_seed(5);
  assert_int_equal(pd_executor_run(exe, s.startup, NULL, 0, NULL, 0, NULL, scope), PD_OK);
  int n_stats = 0;
  for (int i = 0; i < nt.n; i++) {
    if (!strstr(nt.names[i], "mean") && !strstr(nt.names[i], "variance")) continue;
    n_stats++;
    const char *vn = pd_tensor_name(nt.tensors[i]);
    pd_static_var_info info;
    assert_int_equal(pd_program_var_info(s.main, vn, &info), PD_OK);
    assert_true(info.persistable);
    assert_int_equal(pd_program_var_info(s.test, vn, &info), PD_OK);
    assert_true(info.persistable);
    assert_non_null(pd_var_scope_find_var(scope, vn));
  }
  assert_int_equal(n_stats, 2);
  pd_named_tensors_free(&nt);
  pd_var_scope_release(scope);
  pd_executor_release(exe);
  release_static(&s);
}

/* Trained STEPS steps by the Executor, the clone's inference output equals
 * the eager model's eval() output after the same steps; the trained Program
 * saved as an inference model and loaded gives it too. */
static void test_clone_after_training_equals_eager_eval(void **state) {
  (void)state;
  pd_tensor *yv = target(), *probe = batch(7);
  pd_tensor *want = eager_after_training(5, probe, yv);
  assert_non_null(want);

  static_net s;
  build_static(&s, 5);
  pd_executor *exe = pd_static_executor(PD_CPU);
  pd_var_scope *scope = pd_static_scope();
  pd_seed(5);
  assert_int_equal(pd_executor_run(exe, s.startup, NULL, 0, NULL, 0, NULL, scope), PD_OK);
  train_static(&s, exe, scope, yv);

  pd_static_feed feed = {"x", probe};
  pd_tensor *got;
  assert_int_equal(pd_executor_run(exe, s.test, &feed, 1, &s.out, 1, &got, scope), PD_OK);
  expect_close(got, want, 1e-12, 1e-12);
  pd_tensor_release(got);

  const char *prefix = temp_path("bn_trained");
  assert_int_equal(pd_static_save_inference_model(prefix, &s.x, 1, &s.out, 1, s.main, scope), PD_OK);
  pd_var_scope *s2 = pd_static_scope();
  pd_inference_model im;
  assert_int_equal(pd_static_load_inference_model(prefix, s2, &im), PD_OK);
  pd_static_feed f2 = {im.feed_names[0], probe};
  pd_tensor *fv = pd_static_block_var(pd_program_global_block(im.program), im.fetch_names[0]);
  assert_int_equal(pd_executor_run(exe, im.program, &f2, 1, &fv, 1, &got, s2), PD_OK);
  expect_close(got, want, 1e-12, 1e-12);
  pd_tensor_release(got);
  pd_inference_model_free(&im);
  pd_var_scope_release(s2);

  pd_var_scope_release(scope);
  pd_executor_release(exe);
  release_static(&s);
  pd_tensor_release(want), pd_tensor_release(probe), pd_tensor_release(yv);
}

/* A layer with a persistable buffer it updates in place on every call
 * (total += column means of x; out = x + total) and a non-persistable
 * table it only reads (out * scale). */
typedef struct accum {
  pd_layer base;
} accum;

static int accum_forward(pd_layer *self, pd_tensor *const *in, int n_in, pd_tensor **out, int max_out) {
  (void)n_in;
  (void)max_out;
  pd_tensor *total = pd_layer_buffer(self, "total"), *scale = pd_layer_buffer(self, "scale");
  pd_tensor *m = pd_mean(in[0], SHAPE(0), 1, false);
  pd_tensor *t = m ? pd_add_(total, m) : NULL;
  pd_tensor *s = t ? pd_add(in[0], t) : NULL;
  out[0] = s ? pd_multiply(s, scale) : NULL; /* the temporaries belong to the call's scope */
  return out[0] ? 1 : pd_last_status();
}
static const pd_layer_type accum_type = {"Accum", accum_forward, NULL, NULL};

static pd_layer *accum_new(void) {
  accum *a = pd_layer_new(sizeof *a, &accum_type);
  assert_non_null(a);
  pd_tensor *total = pd_zeros(1, SHAPE(IN), PD_FLOAT64);
  pd_tensor *scale = T(PD_FLOAT64, 1, SHAPE(IN), 1.0, 0.5, 2.0, -1.0);
  assert_int_equal(pd_layer_register_buffer(&a->base, "total", total, true), PD_OK);
  assert_int_equal(pd_layer_register_buffer(&a->base, "scale", scale, false), PD_OK);
  pd_tensor_release(total), pd_tensor_release(scale);
  return &a->base;
}

static bool has_op(pd_program *p, const char *type) {
  pd_static_block *b = pd_program_global_block(p);
  for (int i = 0; i < pd_static_block_num_ops(b); i++)
    if (strcmp(pd_static_block_op_type(b, i), type) == 0) return true;
  return false;
}

/* A registered persistable buffer is a persistable Variable (not a
 * parameter) the startup program initialises; the recorded add_ updates
 * the scope's value run after run as eager calls update the buffer; the
 * trained value is saved with the persistables and loaded back. A
 * non-persistable buffer only read stays a constant of the main program. */
static void test_registered_buffer_is_persistable_state(void **state) {
  (void)state;
  pd_layer *eager = accum_new(), *layer = accum_new();
  pd_program *main = pd_static_program(), *startup = pd_static_program();
  assert_int_equal(pd_static_program_guard_begin(main, startup), PD_OK);
  pd_tensor *x = pd_static_data("x", 2, SHAPE(-1, IN), PD_FLOAT64);
  pd_tensor *out = pd_layer_call1(layer, x);
  assert_non_null(out);
  assert_int_equal(pd_static_program_guard_end(), PD_OK);

  const char *total_name = pd_tensor_name(pd_layer_buffer(layer, "total"));
  assert_non_null(total_name);
  pd_static_var_info info;
  assert_int_equal(pd_program_var_info(main, total_name, &info), PD_OK);
  assert_true(info.persistable);
  assert_false(info.is_parameter);
  assert_true(has_op(startup, "assign_value")); /* the buffer's initial value */
  assert_true(has_op(main, "assign_value"));    /* the read-only table: a constant */

  pd_executor *exe = pd_static_executor(PD_CPU);
  pd_var_scope *scope = pd_static_scope();
  assert_int_equal(pd_executor_run(exe, startup, NULL, 0, NULL, 0, NULL, scope), PD_OK);
  for (int k = 0; k < STEPS; k++) {
    pd_tensor *xv = batch(k), *got, *want = pd_layer_call1(eager, xv);
    pd_static_feed feed = {"x", xv};
    assert_int_equal(pd_executor_run(exe, main, &feed, 1, &out, 1, &got, scope), PD_OK);
    expect_close(got, want, 0, 1e-15);
    pd_tensor_release(got), pd_tensor_release(want), pd_tensor_release(xv);
  }
  pd_tensor *eager_total = pd_layer_buffer(eager, "total");
  expect_close(pd_var_scope_find_var(scope, total_name), eager_total, 0, 1e-15);
  /* the layer's own tensor is the initial value: the Program's state is the scope's */
  EXPECT_VALUES(pd_layer_buffer(layer, "total"), 0, 0, 0, 0, 0);

  const char *prefix = temp_path("accum");
  assert_int_equal(pd_static_save(main, prefix, scope), PD_OK);
  pd_var_scope *s2 = pd_static_scope();
  assert_int_equal(pd_static_load(main, prefix, s2), PD_OK);
  expect_close(pd_var_scope_find_var(s2, total_name), eager_total, 0, 1e-15);
  pd_var_scope_release(s2);

  pd_tensor_release(x), pd_tensor_release(out);
  pd_var_scope_release(scope);
  pd_executor_release(exe);
  pd_program_release(main), pd_program_release(startup);
  pd_layer_release(eager), pd_layer_release(layer);
}

/* Functional batch_norm given plain tensors as running statistics: the
 * recorded running update makes them persistable Variables (their
 * assign_value moves to the startup program), so the statistics accumulate
 * over runs as eager calls accumulate them, and the clone reads them. */
static void test_functional_batch_norm_running_stats_accumulate(void **state) {
  (void)state;
  pd_tensor *em = pd_zeros(1, SHAPE(IN), PD_FLOAT64), *ev = pd_ones(1, SHAPE(IN), PD_FLOAT64);
  pd_tensor *sm = pd_zeros(1, SHAPE(IN), PD_FLOAT64), *sv = pd_ones(1, SHAPE(IN), PD_FLOAT64);
  pd_program *main = pd_static_program(), *startup = pd_static_program();
  assert_int_equal(pd_static_program_guard_begin(main, startup), PD_OK);
  pd_tensor *x = pd_static_data("x", 2, SHAPE(-1, IN), PD_FLOAT64);
  pd_tensor *y = pd_batch_norm(x, sm, sv, NULL, NULL, true, 0.9, 1e-5, NULL, PD_GLOBAL_STATS_NONE);
  assert_non_null(y);
  assert_int_equal(pd_static_program_guard_end(), PD_OK);
  pd_program *test = pd_program_clone(main, true);
  assert_non_null(test);
  assert_false(has_op(main, "assign_value"));
  assert_true(has_op(startup, "assign_value"));

  pd_executor *exe = pd_static_executor(PD_CPU);
  pd_var_scope *scope = pd_static_scope();
  assert_int_equal(pd_executor_run(exe, startup, NULL, 0, NULL, 0, NULL, scope), PD_OK);
  for (int k = 0; k < STEPS; k++) {
    pd_tensor *xv = batch(k), *got;
    pd_tensor *want = pd_batch_norm(xv, em, ev, NULL, NULL, true, 0.9, 1e-5, NULL, PD_GLOBAL_STATS_NONE);
    pd_static_feed feed = {"x", xv};
    assert_int_equal(pd_executor_run(exe, main, &feed, 1, &y, 1, &got, scope), PD_OK);
    expect_close(got, want, 0, 1e-14);
    pd_tensor_release(got), pd_tensor_release(want), pd_tensor_release(xv);
  }
  pd_tensor *probe = batch(9), *got;
  pd_tensor *want = pd_batch_norm(probe, em, ev, NULL, NULL, false, 0.9, 1e-5, NULL, PD_GLOBAL_STATS_NONE);
  pd_static_feed feed = {"x", probe};
  assert_int_equal(pd_executor_run(exe, test, &feed, 1, &y, 1, &got, scope), PD_OK);
  expect_close(got, want, 0, 1e-13);
  EXPECT_VALUES(sm, 0, 0, 0, 0, 0); /* the eager tensors the Program started from are untouched */
  pd_tensor *ts[] = {em, ev, sm, sv, x, y, probe, got, want};
  for (size_t i = 0; i < sizeof ts / sizeof *ts; i++) pd_tensor_release(ts[i]);
  pd_var_scope_release(scope);
  pd_executor_release(exe);
  pd_program_release(main), pd_program_release(startup), pd_program_release(test);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_running_stats_are_persistable_scope_vars),
      cmocka_unit_test(test_clone_after_training_equals_eager_eval),
      cmocka_unit_test(test_registered_buffer_is_persistable_state),
      cmocka_unit_test(test_functional_batch_norm_running_stats_accumulate),
  };
  return cmocka_run_group_tests(tests, temp_dir_setup, temp_dir_teardown);
}
