/* Paddle 1.x fluid names with static meaning, through the C functions they
 * map to (docs/api-coverage.tsv): fluid.data, fluid.layers.fc,
 * fill_constant, sums / sum (add_n), size (numel), increment. */
#include <string.h>

#include "paddlec/static.h"
#include "paddlec/static_control.h"
#include "test_util.h"

/* x = fluid.data("x", [-1, 4]); y = fc(x, 2); s = sums([y, y, c]) with
 * c = fill_constant([2], 0.5); n = size(x); k = increment(fill_constant([1], 2)).
 * The batch is -1 when recorded: size counts it when the Program runs. */
static void test_fluid_program(void **state) {
  (void)state;
  pd_program *main = pd_static_program(), *startup = pd_static_program();
  assert_int_equal(pd_static_program_guard_begin(main, startup), PD_OK);
  pd_tensor *x = pd_static_data("x", 2, SHAPE(-1, 4), PD_FLOAT32);
  pd_tensor *y = pd_static_nn_fc(x, 2, 1, NULL);
  pd_tensor *c0 = pd_full(1, SHAPE(2), 0.5, PD_FLOAT32), *c = pd_expand_as(c0, y);
  pd_tensor *parts[3] = {y, y, c};
  pd_tensor *s = pd_add_n(parts, 3), *n = pd_numel(x);
  pd_tensor *two = pd_full(1, SHAPE(1), 2, PD_FLOAT32), *k = pd_increment(two, 1.0);
  assert_non_null(s);
  assert_non_null(n);
  assert_non_null(k);
  assert_int_equal(pd_tensor_ndim(n), 0);
  assert_int_equal(pd_tensor_dtype(n), PD_INT64);
  assert_int_equal(pd_static_program_guard_end(), PD_OK);

  pd_executor *exe = pd_static_executor(PD_CPU);
  pd_var_scope *scope = pd_static_scope();
  assert_int_equal(pd_executor_run(exe, startup, NULL, 0, NULL, 0, NULL, scope), PD_OK);
  pd_tensor *xv =
      T(PD_FLOAT32, 2, SHAPE(5, 4), 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20);
  pd_static_feed feed = {"x", xv};
  pd_tensor *fetch[4] = {y, s, n, k}, *got[4];
  assert_int_equal(pd_executor_run(exe, main, &feed, 1, fetch, 4, got, scope), PD_OK);
  assert_int_equal(*(const int64_t *)pd_tensor_data(got[2]), 20);
  pd_tensor *twice = pd_scale(got[0], 2.0, 0.5, true);
  expect_close(got[1], twice, 1e-6, 1e-5);
  EXPECT_VALUES(got[3], 0, 3);
  pd_tensor_release(twice);
  for (int i = 0; i < 4; i++) pd_tensor_release(got[i]);
  pd_tensor *ts[] = {x, y, c0, c, s, n, two, k, xv};
  for (size_t i = 0; i < sizeof ts / sizeof *ts; i++) pd_tensor_release(ts[i]);
  pd_var_scope_release(scope);
  pd_executor_release(exe);
  pd_program_release(main);
  pd_program_release(startup);
}

/* Eager add_n: values, each input's gradient 1, and mismatched inputs. */
static void test_add_n_eager(void **state) {
  (void)state;
  pd_tensor *a = T(PD_FLOAT64, 1, SHAPE(3), 1, 2, 3), *b = T(PD_FLOAT64, 1, SHAPE(3), 10, 20, 30);
  pd_tensor_set_stop_gradient(a, false);
  pd_tensor_set_stop_gradient(b, false);
  pd_tensor *in[3] = {a, b, a};
  pd_tensor *s = pd_add_n(in, 3);
  EXPECT_VALUES(s, 0, 12, 24, 36);
  pd_tensor *l = pd_sum(s, NULL, 0, false);
  assert_int_equal(pd_backward(l, NULL, false), PD_OK);
  EXPECT_VALUES(pd_tensor_grad(a), 0, 2, 2, 2);
  EXPECT_VALUES(pd_tensor_grad(b), 0, 1, 1, 1);
  pd_tensor *one = pd_add_n(in, 1);
  assert_true(same_bits(one, a));
  pd_tensor *c = T(PD_FLOAT64, 1, SHAPE(2), 1, 2);
  pd_tensor *bad[2] = {a, c};
  expect_error(pd_add_n(bad, 2), "add_n: input 1", "[2]");
  expect_error(pd_add_n(in, 0), "add_n", "at least one");
  pd_tensor *n = pd_numel(c);
  assert_int_equal(*(const int64_t *)pd_tensor_data(n), 2);
  pd_tensor *ts[] = {a, b, s, l, one, c, n};
  for (size_t i = 0; i < sizeof ts / sizeof *ts; i++) pd_tensor_release(ts[i]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fluid_program),
      cmocka_unit_test(test_add_n_eager),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
