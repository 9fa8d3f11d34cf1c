/* Helpers shared by the unit tests (cmocka). */
#ifndef PADDLEC_TEST_UTIL_H
#define PADDLEC_TEST_UTIL_H

#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka needs the includes above first */
#include <cmocka.h>

#include "paddlec.h"

/* A tensor from a double literal list: T(PD_FLOAT64, 2, ((int64_t[]){2,3}), 1,2,3,4,5,6) */
#define T(dt, nd, shape, ...) pd_tensor_from_f64((const double[]){__VA_ARGS__}, (dt), (nd), (shape))
#define SHAPE(...) ((const int64_t[]){__VA_ARGS__})

/* Fails the test (with both tensors printed) unless |a-b| <= atol + rtol|b|
 * elementwise and the shapes match. */
void expect_close(const pd_tensor *a, const pd_tensor *b, double rtol, double atol);
/* Same against a literal array of n values. */
void expect_values(const pd_tensor *a, const double *want, int64_t n, double tol);
#define EXPECT_VALUES(t, tol, ...)                  \
  expect_values((t), (const double[]){__VA_ARGS__}, \
                (int64_t)(sizeof((const double[]){__VA_ARGS__}) / sizeof(double)), (tol))
/* Fails unless t is NULL and the last error contains every given fragment. */
void expect_error(const pd_tensor *t, const char *frag1, const char *frag2);
void expect_shape(const pd_tensor *t, int ndim, const int64_t *shape);
/* Whether a and b have the same dtype, element count and element bits. */
bool same_bits(const pd_tensor *a, const pd_tensor *b);
/* A rows x cols float64 tensor of deterministic values in [-0.5, 0.5),
 * irregular enough that its columns are linearly independent (the
 * fractional part of a scaled sine); phase picks another set. */
pd_tensor *test_wave(int64_t rows, int64_t cols, double phase);
/* Asserts no tensor memory is live (call at the end of a test). */
void expect_no_live_tensors(void);
/* How many times `what` occurs in text (non-overlapping). */
int test_count_of(const char *text, const char *what);

#endif
