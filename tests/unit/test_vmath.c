/* The vectorisable math of kernels/cpu/vmath.h against libm: pd_vexpf over
 * its whole range and pd_vexpf_nonpos (softmax's e^x for x <= 0) with its
 * limits (0 below the normal floats and at -inf, NaN kept). */
#include <math.h>

#include "kernels/cpu/vmath.h"
#include "test_util.h"

/* |got - want| in units of float's spacing at want. */
static double ulps(float got, double want) {
  double spacing = ldexp(1.0, ilogb(want) - 23);
  return fabs((double)got - want) / spacing;
}

static void test_vexpf_nonpos(void **state) {
  (void)state;
  double worst = 0;
  for (int k = 0; k <= 873000; k++) { /* x = 0 down to -87.3 in steps of 1e-4 */
    float x = (float)(-1e-4 * k);
    float got = pd_vexpf_nonpos(x);
    double u = ulps(got, exp((double)x));
    worst = u > worst ? u : worst;
    assert_true(ulps(pd_vexpf(x), exp((double)x)) <= 2.0); /* the full exp, as a check of the check */
  }
  assert_true(worst <= 2.0);
  assert_true(pd_vexpf_nonpos(0.0f) == 1.0f);
  assert_true(pd_vexpf_nonpos(-87.4f) == 0.0f && pd_vexpf_nonpos(-1000.0f) == 0.0f);
  assert_true(pd_vexpf_nonpos(-INFINITY) == 0.0f);
  assert_true(isnan(pd_vexpf_nonpos(NAN)));
  /* just above the cut: a normal float, close to e^x */
  assert_true(pd_vexpf_nonpos(-87.2f) >= 1.17549435e-38f &&
              ulps(pd_vexpf_nonpos(-87.2f), exp((double)-87.2f)) <= 2.0);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_vexpf_nonpos)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
