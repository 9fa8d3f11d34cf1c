/* Errors name where they happened: a layer whose forward fails puts its
 * type and name before the inner op's message (nested layers outermost
 * first), and an output the allocator cannot provide names the op, the
 * dtype and the shape, not only a byte count. */
#include <string.h>

#include "test_util.h"

/* The allocation below must fail with an error, not abort the sanitizer
 * build's allocator. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "allocator_may_return_null=1"; }

static void expect_prefix(const char *prefix, const char *rest) {
  const char *m = pd_last_error();
  if (strncmp(m, prefix, strlen(prefix)) != 0 || !strstr(m, rest))
    fail_msg("error '%s' should start with '%s' and hold '%s'", m, prefix, rest);
  pd_clear_error();
}

static void test_layer_names_itself(void **state) {
  (void)state;
  pd_scope_begin();
  pd_layer *lin = pd_nn_linear(4, 3, NULL);
  char want[96];
  snprintf(want, sizeof want, "Linear '%s': matmul: ", pd_layer_full_name(lin));
  assert_null(pd_layer_call1(lin, pd_ones(2, SHAPE(2, 5), PD_FLOAT32)));
  expect_prefix(want, "[2, 5]");
  /* nested: the path from the outermost layer */
  pd_layer *inner = pd_nn_linear(4, 3, NULL);
  pd_layer *seq = pd_nn_sequential(&inner, 1);
  char want2[160];
  snprintf(want2, sizeof want2, "Sequential '%s': Linear '%s': matmul: ", pd_layer_full_name(seq),
           pd_layer_full_name(inner));
  assert_null(pd_layer_call1(seq, pd_ones(2, SHAPE(2, 5), PD_FLOAT32)));
  expect_prefix(want2, "[2, 5]");
  /* a NULL input is the caller's error: no layer prefix added to it */
  assert_null(pd_layer_call1(lin, NULL));
  assert_non_null(strstr(pd_last_error(), "input 0 is NULL"));
  pd_clear_error();
  /* success leaves no error */
  expect_shape(pd_layer_call1(lin, pd_ones(2, SHAPE(2, 4), PD_FLOAT32)), 2, SHAPE(2, 3));
  assert_int_equal(pd_last_status(), PD_OK);
  pd_layer_release(lin);
  pd_layer_release(seq);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_allocation_failure_names_op_and_shape(void **state) {
  (void)state;
  pd_scope_begin();
  /* 2^60 float32 elements: the size fits int64 bytes, the memory does not exist */
  int64_t big = (int64_t)1 << 30;
  pd_tensor *a = pd_expand(pd_ones(2, SHAPE(1, 1), PD_FLOAT32), 2, SHAPE(big, big));
  assert_non_null(a);
  assert_null(pd_add(a, a));
  expect_prefix("add: output 0 (float32 of shape [1073741824, 1073741824]): ", "4611686018427387904 bytes");
  assert_int_equal(pd_memory_allocated(), 64); /* only the ones */
  pd_scope_end();
  expect_no_live_tensors();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_layer_names_itself),
      cmocka_unit_test(test_allocation_failure_names_op_and_shape),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
