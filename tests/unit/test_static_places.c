/* device_guard, cpu_places and cuda_places in a CPU-only build. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "paddlec/static.h"
#include "test_util.h"

static void expect_status_error(pd_status st, pd_status want, const char *frag) {
  assert_int_equal(st, want);
  assert_non_null(strstr(pd_last_error(), frag));
}

static void test_device_guard_marks_ops(void **state) {
  (void)state;
  pd_program *main = pd_static_program(), *startup = pd_static_program();
  assert_int_equal(pd_static_program_guard_begin(main, startup), PD_OK);
  pd_tensor *x = pd_static_data("x", 1, SHAPE(-1), PD_FLOAT32);
  assert_int_equal(pd_static_device_guard_begin("cpu"), PD_OK);
  pd_tensor *y = pd_relu(x);
  assert_int_equal(pd_static_device_guard_begin(NULL), PD_OK); /* no device inside */
  pd_tensor *z = pd_exp(y);
  assert_int_equal(pd_static_device_guard_end(), PD_OK);
  pd_tensor *w = pd_tanh(z);
  assert_int_equal(pd_static_device_guard_end(), PD_OK);
  pd_tensor *v = pd_sigmoid(w);
  assert_int_equal(pd_static_program_guard_end(), PD_OK);
  char *text = pd_program_to_string(main);
  assert_non_null(text);
  /* relu and tanh under "cpu"; exp under the inner empty guard, sigmoid outside */
  const char *ops[] = {"relu", "exp", "tanh", "sigmoid"};
  bool marked[] = {true, false, true, false};
  for (int i = 0; i < 4; i++) {
    char key[32]; /* the op's line: "{Out=[...]} = relu(inputs=..." */
    snprintf(key, sizeof key, "= %s(", ops[i]);
    const char *line = strstr(text, key);
    assert_non_null(line);
    const char *eol = strchr(line, '\n');
    const char *dev = strstr(line, "op_device = 'cpu'");
    assert_true(marked[i] == (dev && dev < eol));
  }
  free(text);
  /* a clone keeps the device */
  pd_program *c = pd_program_clone(main, true);
  char *ct = pd_program_to_string(c);
  assert_non_null(strstr(ct, "op_device = 'cpu'"));
  free(ct);
  pd_tensor *ts[] = {x, y, z, w, v};
  for (int i = 0; i < 5; i++) pd_tensor_release(ts[i]);
  pd_program_release(c);
  pd_program_release(main);
  pd_program_release(startup);
}

static void test_device_guard_errors(void **state) {
  (void)state;
  expect_status_error(pd_static_device_guard_begin("gpu"), PD_ERR_UNIMPLEMENTED, "'gpu' is not available");
  expect_status_error(pd_static_device_guard_begin("gpu:1"), PD_ERR_UNIMPLEMENTED, "'gpu:1'");
  expect_status_error(pd_static_device_guard_begin("cpu:0"), PD_ERR_INVALID, "device id for cpu");
  expect_status_error(pd_static_device_guard_begin("tpu"), PD_ERR_INVALID, "received 'tpu'");
  expect_status_error(pd_static_device_guard_end(), PD_ERR_STATE, "without a matching");
}

static void test_places(void **state) {
  (void)state;
  pd_place p[4];
  unsetenv("CPU_NUM");
  assert_int_equal(pd_static_cpu_places(0, p, 4), 1);
  assert_int_equal(p[0].kind, PD_PLACE_CPU);
  assert_int_equal(pd_static_cpu_places(3, p, 4), 3);
  assert_int_equal(pd_static_cpu_places(6, p, 4), 6); /* the count, with cap places written */
  setenv("CPU_NUM", "2", 1);
  assert_int_equal(pd_static_cpu_places(0, p, 4), 2);
  setenv("CPU_NUM", "two", 1);
  assert_int_equal(pd_static_cpu_places(0, p, 4), -1);
  assert_non_null(strstr(pd_last_error(), "CPU_NUM='two'"));
  unsetenv("CPU_NUM");
  assert_int_equal(pd_static_cpu_places(-1, p, 4), -1);
  assert_int_equal(pd_static_cuda_places(NULL, 0, p, 4), -1);
  assert_non_null(strstr(pd_last_error(), "not compiled with CUDA"));
  assert_int_equal(pd_static_cuda_places((const int[]){0}, 1, p, 4), -1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_device_guard_marks_ops),
      cmocka_unit_test(test_device_guard_errors),
      cmocka_unit_test(test_places),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
