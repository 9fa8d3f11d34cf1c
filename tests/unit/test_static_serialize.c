/* Program files: serialize_program / deserialize_program round trips a
 * training Program (forward, grad ops, SGD updates, constants) that trains
 * exactly as the original; persistables, static.save / static.load; bad,
 * truncated and newer files are errors naming what is wrong. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "paddlec/checkpoint.h"
#include "paddlec/static.h"
#include "test_util.h"

typedef struct trainer {
  pd_program *main, *startup;
  pd_tensor *loss;
} trainer;

/* Seed 004's program on 8 samples of 3 features, with a constant (2.0 * x). */
static void build(trainer *t) {
  t->main = pd_static_program();
  t->startup = pd_static_program();
  pd_tensor *two = pd_tensor_from_f64((double[]){2.0}, PD_FLOAT64, 1, SHAPE(1));
  assert_int_equal(pd_static_program_guard_begin(t->main, t->startup), PD_OK);
  pd_tensor *x = pd_static_data("x", 2, SHAPE(-1, 3), PD_FLOAT64);
  pd_tensor *y = pd_static_data("y", 2, SHAPE(-1, 1), PD_FLOAT64);
  pd_tensor *x2 = pd_multiply(x, two);
  pd_tensor *pred = pd_static_nn_fc(x2, 1, 1, "tanh");
  pd_tensor *cost = pd_square_error_cost(pred, y);
  t->loss = pd_mean(cost, NULL, 0, false);
  pd_optimizer *sgd = pd_optimizer_sgd(0.1, NULL, 0, NULL);
  assert_int_equal(pd_optimizer_minimize(sgd, t->loss), PD_OK);
  assert_int_equal(pd_static_program_guard_end(), PD_OK);
  pd_optimizer_release(sgd);
  pd_tensor_release(two);
  pd_tensor_release(x);
  pd_tensor_release(y);
  pd_tensor_release(x2);
  pd_tensor_release(pred);
  pd_tensor_release(cost);
}

static void release_trainer(trainer *t) {
  pd_tensor_release(t->loss);
  pd_program_release(t->main);
  pd_program_release(t->startup);
}

static pd_tensor *feed_x(void) {
  double v[24];
  for (int i = 0; i < 24; i++) v[i] = 0.1 * ((i * 7) % 11) - 0.5;
  return pd_tensor_from_f64(v, PD_FLOAT64, 2, SHAPE(8, 3));
}

static pd_tensor *feed_y(void) {
  double v[8];
  for (int i = 0; i < 8; i++) v[i] = 0.2 * (i % 3) - 0.1;
  return pd_tensor_from_f64(v, PD_FLOAT64, 2, SHAPE(8, 1));
}

/* Runs `steps` training steps of p in scope, writing the losses. */
static void train(pd_program *p, const char *loss_name, pd_var_scope *scope, int steps, double *losses) {
  pd_executor *exe = pd_static_executor(PD_CPU);
  pd_tensor *xv = feed_x(), *yv = feed_y();
  pd_static_feed feed[2] = {{"x", xv}, {"y", yv}};
  pd_tensor *fetch = pd_static_block_var(pd_program_global_block(p), loss_name);
  assert_non_null(fetch);
  for (int s = 0; s < steps; s++) {
    pd_tensor *out = NULL;
    assert_int_equal(pd_executor_run(exe, p, feed, 2, &fetch, 1, &out, scope), PD_OK);
    losses[s] = pd_tensor_item(out);
    pd_tensor_release(out);
  }
  pd_tensor_release(xv);
  pd_tensor_release(yv);
  pd_executor_release(exe);
}

static void test_round_trip_trains_identically(void **state) {
  (void)state;
  trainer t;
  build(&t);
  const char *loss_name = pd_tensor_name(t.loss);
  pd_executor *exe = pd_static_executor(PD_CPU);
  pd_var_scope *scope = pd_static_scope();
  assert_int_equal(pd_executor_run(exe, t.startup, NULL, 0, NULL, 0, NULL, scope), PD_OK);
  pd_executor_release(exe);

  size_t n, np;
  char *text = pd_static_serialize_program(t.main, &n);
  assert_non_null(text);
  assert_int_equal(strlen(text), n);
  assert_non_null(strstr(text, "\"magic\":\"paddle.c program\""));
  assert_non_null(strstr(text, "\"grad_of\":\"matmul\""));
  void *params = pd_static_serialize_persistables(t.main, scope, &np);
  assert_non_null(params);

  pd_program *copy = pd_static_deserialize_program(text, n);
  assert_non_null(copy);
  /* the copy writes the same file */
  size_t n2;
  char *text2 = pd_static_serialize_program(copy, &n2);
  assert_non_null(text2);
  assert_string_equal(text, text2);
  free(text2);
  char *s1 = pd_program_to_string(t.main), *s2 = pd_program_to_string(copy);
  assert_string_equal(s1, s2);
  free(s1);
  free(s2);
  pd_static_var_info info;
  assert_int_equal(pd_program_var_info(copy, "x", &info), PD_OK);
  assert_true(info.is_data);
  assert_int_equal(info.shape[0], -1);

  pd_var_scope *scope2 = pd_static_scope();
  assert_int_equal(pd_static_deserialize_persistables(copy, params, np, scope2), PD_OK);
  double a[5], b[5];
  train(t.main, loss_name, scope, 5, a);
  train(copy, loss_name, scope2, 5, b);
  for (int s = 0; s < 5; s++) assert_memory_equal(&a[s], &b[s], sizeof(double)); /* bit-identical */
  assert_true(a[4] < a[0]);

  free(text);
  free(params);
  pd_program_release(copy);
  pd_var_scope_release(scope);
  pd_var_scope_release(scope2);
  release_trainer(&t);
}

static void test_static_save_and_load(void **state) {
  (void)state;
  trainer t;
  build(&t);
  pd_executor *exe = pd_static_executor(PD_CPU);
  pd_var_scope *scope = pd_static_scope();
  assert_int_equal(pd_executor_run(exe, t.startup, NULL, 0, NULL, 0, NULL, scope), PD_OK);
  char prefix[64];
  snprintf(prefix, sizeof prefix, "static_save_%d", (int)getpid());
  assert_int_equal(pd_static_save(t.main, prefix, scope), PD_OK);

  char path[96];
  snprintf(path, sizeof path, "%s.pdmodel", prefix);
  pd_program *p = pd_static_load_program_file(path);
  assert_non_null(p);
  /* load_from_file / save_to_file move the same bytes */
  size_t n;
  char *bytes = pd_static_load_from_file(path, &n);
  assert_non_null(bytes);
  char copy_path[96];
  snprintf(copy_path, sizeof copy_path, "%s.copy", prefix);
  assert_int_equal(pd_static_save_to_file(copy_path, bytes, n), PD_OK);
  pd_program *p2 = pd_static_load_program_file(copy_path);
  assert_non_null(p2);
  char *t1 = pd_static_serialize_program(p, NULL), *t2 = pd_static_serialize_program(p2, NULL);
  assert_string_equal(t1, bytes);
  assert_string_equal(t1, t2);
  free(t1);
  free(t2);
  free(bytes);
  pd_program_release(p2);
  unlink(copy_path);
  assert_null(pd_static_load_program_file(copy_path));
  assert_non_null(strstr(pd_last_error(), copy_path));
  pd_named_tensors st = {0};
  assert_int_equal(pd_static_load_program_state(prefix, &st), PD_OK);
  assert_true(st.n >= 3); /* weight, bias, learning rate */
  pd_var_scope *scope2 = pd_static_scope();
  assert_int_equal(pd_static_set_program_state(p, &st, scope2), PD_OK);
  pd_state_free(&st);
  pd_var_scope *scope3 = pd_static_scope();
  assert_int_equal(pd_static_load(p, prefix, scope3), PD_OK);
  double a[3], b[3], c[3];
  train(t.main, pd_tensor_name(t.loss), scope, 3, a);
  train(p, pd_tensor_name(t.loss), scope2, 3, b);
  train(p, pd_tensor_name(t.loss), scope3, 3, c);
  assert_memory_equal(a, b, sizeof a);
  assert_memory_equal(a, c, sizeof a);

  /* a file with another Program's values: nothing is set, the error names the variable */
  pd_program *other = pd_static_program();
  assert_int_equal(pd_static_program_guard_begin(other, NULL), PD_OK);
  pd_tensor *w = pd_static_create_parameter(1, SHAPE(2), PD_FLOAT64, "not_there", NULL, true);
  assert_int_equal(pd_static_program_guard_end(), PD_OK);
  pd_var_scope *scope4 = pd_static_scope();
  assert_true(pd_static_load(other, prefix, scope4) < 0);
  assert_non_null(strstr(pd_last_error(), "'not_there'"));
  assert_null(pd_var_scope_find_var(scope4, "not_there"));
  pd_tensor_release(w);
  pd_program_release(other);

  unlink(path);
  snprintf(path, sizeof path, "%s.pdparams", prefix);
  unlink(path);
  pd_var_scope_release(scope4);
  pd_var_scope_release(scope);
  pd_var_scope_release(scope2);
  pd_var_scope_release(scope3);
  pd_executor_release(exe);
  pd_program_release(p);
  release_trainer(&t);
}

static void expect_bad(const char *text, const char *needle) {
  pd_clear_error();
  pd_program *p = pd_static_deserialize_program(text, strlen(text));
  assert_null(p);
  if (!strstr(pd_last_error(), needle)) fail_msg("error '%s' lacks '%s'", pd_last_error(), needle);
}

static void test_bad_files_are_clear_errors(void **state) {
  (void)state;
  trainer t;
  build(&t);
  size_t n;
  char *text = pd_static_serialize_program(t.main, &n);
  assert_non_null(text);
  /* every truncation fails cleanly */
  for (size_t k = 0; k < n; k += 1 + k / 16) {
    pd_clear_error();
    assert_null(pd_static_deserialize_program(text, k));
    assert_true(pd_last_error()[0] != 0);
  }
  expect_bad("{\"magic\":\"other\",\"version\":1}", "not a Program file");
  expect_bad("[1,2]", "not a Program file");
  expect_bad("{\"magic\":\"paddle.c program\",\"version\":4,\"is_test\":false,\"blocks\":[]}",
             "version 4, newer than this build reads (3)");
  expect_bad("{\"magic\":\"paddle.c program\",\"version\":1,\"is_test\":false,\"blocks\":[]}", "'blocks'");
  const char *head =
      "{\"magic\":\"paddle.c program\",\"version\":1,\"is_test\":false,\"blocks\":[{\"idx\":0,"
      "\"parent_idx\":-1,\"vars\":[{\"name\":\"a\",\"dtype\":\"float32\",\"shape\":[-1,2],"
      "\"persistable\":false,\"stop_gradient\":true,\"is_parameter\":false,\"is_data\":true}],"
      "\"ops\":[";
  char buf[1024];
  snprintf(buf, sizeof buf,
           "%s{\"type\":\"no_such_op\",\"inputs\":[\"a\"],\"outputs\":[\"a\"],\"role\":0,"
           "\"name_scope\":\"\",\"attrs\":{}}]}]}",
           head);
  expect_bad(buf, "block 0, op 0 (no_such_op): 'no_such_op' is no registry op");
  snprintf(buf, sizeof buf,
           "%s{\"type\":\"relu\",\"inputs\":[\"b\"],\"outputs\":[\"a\"],\"role\":0,"
           "\"name_scope\":\"\",\"attrs\":{}}]}]}",
           head);
  expect_bad(buf, "'inputs' names 'b', no variable of the block");
  snprintf(buf, sizeof buf,
           "%s{\"type\":\"relu\",\"inputs\":[\"a\",\"a\"],\"outputs\":[\"a\"],\"role\":0,"
           "\"name_scope\":\"\",\"attrs\":{}}]}]}",
           head);
  expect_bad(buf, "input or output count");
  snprintf(buf, sizeof buf,
           "%s{\"type\":\"scale\",\"inputs\":[\"a\"],\"outputs\":[\"a\"],\"role\":0,"
           "\"name_scope\":\"\",\"attrs\":{\"nope\":1}}]}]}",
           head);
  expect_bad(buf, "nope");
  snprintf(buf, sizeof buf,
           "%s{\"type\":\"assign_value\",\"inputs\":[],\"outputs\":[\"a\"],\"role\":0,"
           "\"name_scope\":\"\",\"value\":{\"dtype\":\"float32\",\"shape\":[2],"
           "\"data\":\"0000\"}}]}]}",
           head);
  expect_bad(buf, "'value' data does not hold");
  /* control flow: a loop whose body is its own block would never return */
  snprintf(buf, sizeof buf,
           "%s{\"type\":\"while\",\"inputs\":[\"a\"],\"outputs\":[\"a\"],\"role\":0,"
           "\"name_scope\":\"\",\"control_attrs\":{\"i\":[0,1,0],\"s\":\"w\",\"dtype\":\"float32\"}}]}]}",
           head);
  expect_bad(buf, "block 0, op 0 (while): names a sub-block that is not a block nested in this one");
  snprintf(buf, sizeof buf,
           "%s{\"type\":\"while\",\"inputs\":[\"a\"],\"outputs\":[\"a\"],\"role\":0,"
           "\"name_scope\":\"\"}]}]}",
           head);
  expect_bad(buf, "'control_attrs' is missing");
  snprintf(buf, sizeof buf,
           "%s{\"type\":\"conditional_block\",\"inputs\":[\"a\"],\"outputs\":[\"a\"],\"role\":0,"
           "\"name_scope\":\"\",\"control_attrs\":{\"i\":[1,1,2],\"s\":\"c\",\"dtype\":\"float32\"}}]}]}",
           head);
  expect_bad(buf, "output count differs from its attributes");
  free(text);
  release_trainer(&t);
}

/* device_guard's op_device goes into the file (format version 3) and comes
 * back on the same ops; a Program without one is still written as version
 * 1, and version-1 files load. op_device in a file older than version 3, or
 * naming a device this build lacks, is an error naming the op. */
static void test_op_device_round_trip(void **state) {
  (void)state;
  pd_program *main = pd_static_program(), *startup = pd_static_program();
  assert_int_equal(pd_static_program_guard_begin(main, startup), PD_OK);
  pd_tensor *x = pd_static_data("x", 2, SHAPE(-1, 3), PD_FLOAT32);
  pd_tensor *y = pd_relu(x);
  assert_int_equal(pd_static_device_guard_begin("cpu"), PD_OK);
  pd_tensor *z = pd_exp(y);
  assert_int_equal(pd_static_device_guard_end(), PD_OK);
  pd_tensor *w = pd_tanh(z);
  assert_int_equal(pd_static_program_guard_end(), PD_OK);
  size_t n;
  char *text = pd_static_serialize_program(main, &n);
  assert_non_null(text);
  assert_non_null(strstr(text, "\"version\":3"));
  assert_non_null(strstr(text, "\"op_device\":\"cpu\""));
  pd_program *copy = pd_static_deserialize_program(text, n);
  assert_non_null(copy);
  char *a = pd_program_to_string(main), *b = pd_program_to_string(copy);
  assert_string_equal(a, b); /* exp keeps op_device = 'cpu', relu and tanh have none */
  assert_non_null(strstr(b, "op_device = 'cpu'"));
  char *again = pd_static_serialize_program(copy, NULL);
  assert_string_equal(again, text);
  free(a), free(b), free(again), free(text);
  pd_program_release(copy);

  /* without a device_guard the file stays version 1 */
  text = pd_static_serialize_program(startup, NULL);
  assert_non_null(strstr(text, "\"version\":1"));
  free(text);

  const char *head =
      "{\"magic\":\"paddle.c program\",\"version\":%d,\"is_test\":false,\"blocks\":[{\"idx\":0,"
      "\"parent_idx\":-1,\"vars\":[{\"name\":\"a\",\"dtype\":\"float32\",\"shape\":[-1,2],"
      "\"persistable\":false,\"stop_gradient\":true,\"is_parameter\":false,\"is_data\":true}],"
      "\"ops\":[{\"type\":\"relu\",\"inputs\":[\"a\"],\"outputs\":[\"a\"],\"role\":0,"
      "\"name_scope\":\"\",\"attrs\":{}%s}]}]}";
  char buf[1024];
  snprintf(buf, sizeof buf, head, 1, ""); /* a version-1 file, as older builds wrote */
  pd_program *old = pd_static_deserialize_program(buf, strlen(buf));
  assert_non_null(old);
  a = pd_program_to_string(old);
  assert_null(strstr(a, "op_device"));
  free(a);
  pd_program_release(old);
  snprintf(buf, sizeof buf, head, 2, ",\"op_device\":\"cpu\"");
  expect_bad(buf, "block 0, op 0 (relu): has 'op_device', which format version 3 added");
  snprintf(buf, sizeof buf, head, 3, ",\"op_device\":\"gpu:0\"");
  expect_bad(buf, "block 0, op 0 (relu): op_device: device 'gpu:0' is not available");
  snprintf(buf, sizeof buf, head, 3, ",\"op_device\":7");
  expect_bad(buf, "'op_device' is not a string");
  snprintf(buf, sizeof buf, head, 3, ",\"op_device\":\"cpu\"");
  pd_program *ok3 = pd_static_deserialize_program(buf, strlen(buf));
  assert_non_null(ok3);
  pd_program_release(ok3);

  pd_tensor *ts[] = {x, y, z, w};
  for (int i = 0; i < 4; i++) pd_tensor_release(ts[i]);
  pd_program_release(main);
  pd_program_release(startup);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_round_trip_trains_identically),
      cmocka_unit_test(test_static_save_and_load),
      cmocka_unit_test(test_bad_files_are_clear_errors),
      cmocka_unit_test(test_op_device_round_trip),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
