/* pd_status_name and pd_status_string: every status code of core.h has its
 * own constant's spelling as its name and a distinct one-line description;
 * a value that is no status gives the documented fallback strings. */
#include <limits.h>
#include <string.h>

#include "test_util.h"

/* Every enumerator of pd_status, spelled by the preprocessor, so the
 * expected names come from core.h rather than from the library's table. */
#define STATUS(c) \
  { c, #c }
static const struct {
  pd_status code;
  const char *spelling;
} all_status[] = {
    STATUS(PD_OK),        STATUS(PD_ERR_INVALID), STATUS(PD_ERR_SHAPE),
    STATUS(PD_ERR_DTYPE), STATUS(PD_ERR_INDEX),   STATUS(PD_ERR_MEMORY),
    STATUS(PD_ERR_STATE), STATUS(PD_ERR_IO),      STATUS(PD_ERR_UNIMPLEMENTED),
    STATUS(PD_ERR_COMM),
};
#define N_STATUS ((int)(sizeof all_status / sizeof all_status[0]))

static void test_every_code_named_and_described(void **state) {
  (void)state;
  for (int i = 0; i < N_STATUS; i++) {
    const char *name = pd_status_name(all_status[i].code);
    const char *desc = pd_status_string(all_status[i].code);
    assert_non_null(name);
    assert_non_null(desc);
    assert_string_equal(name, all_status[i].spelling);
    assert_true(strlen(desc) > 0);
    assert_null(strchr(desc, '\n'));
    assert_string_not_equal(desc, pd_status_string((pd_status)INT_MIN));
    for (int j = 0; j < i; j++) {
      assert_string_not_equal(name, pd_status_name(all_status[j].code));
      assert_string_not_equal(desc, pd_status_string(all_status[j].code));
    }
  }
}

static void test_specific_codes(void **state) {
  (void)state;
  assert_string_equal(pd_status_name((pd_status)0), "PD_OK");
  assert_string_equal(pd_status_name((pd_status)-2), "PD_ERR_SHAPE");
  assert_string_equal(pd_status_string(PD_ERR_SHAPE), "incompatible shapes");
  assert_string_equal(pd_status_name((pd_status)-5), "PD_ERR_MEMORY");
  assert_string_equal(pd_status_string(PD_ERR_MEMORY), "out of memory");
  assert_string_equal(pd_status_string(PD_ERR_COMM), "collective communication failure");
}

static void test_unknown_codes(void **state) {
  (void)state;
  /* one past either end of the enum, and the extremes */
  const int unknown[] = {1, -10, 42, -1000, INT_MAX, INT_MIN};
  for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
    assert_string_equal(pd_status_name((pd_status)unknown[i]), "PD_ERR_UNKNOWN");
    assert_string_equal(pd_status_string((pd_status)unknown[i]), "unknown status code");
  }
}

/* The name of the status pd_last_status() reports, as a caller prints it. */
static void test_names_last_error(void **state) {
  (void)state;
  pd_clear_error();
  assert_string_equal(pd_status_name(pd_last_status()), "PD_OK");
  pd_tensor *x = pd_zeros(2, SHAPE(2, 3), PD_FLOAT32);
  pd_tensor *y = pd_zeros(2, SHAPE(4, 5), PD_FLOAT32);
  assert_null(pd_add(x, y));
  assert_string_equal(pd_status_name(pd_last_status()), "PD_ERR_SHAPE");
  pd_tensor_release(x);
  pd_tensor_release(y);
  pd_clear_error();
  expect_no_live_tensors();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_code_named_and_described),
      cmocka_unit_test(test_specific_codes),
      cmocka_unit_test(test_unknown_codes),
      cmocka_unit_test(test_names_last_error),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
