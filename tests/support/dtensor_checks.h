/* Checks shared by the DTensor tests on forked ranks. */
#ifndef PADDLEC_TEST_DTENSOR_CHECKS_H
#define PADDLEC_TEST_DTENSOR_CHECKS_H

#include <stdbool.h>

#include "paddlec.h"

/* Whether a and b have the same shape and, read as float64, values equal to
 * tol relative (|a - b| <= tol (1 + |b|)); false for a NULL one. */
bool dtensor_close(pd_tensor *a, pd_tensor *b, double tol);

/* Whether t is a DTensor whose n placements are want's. */
bool dtensor_placed(const pd_tensor *t, const pd_dist_placement *want, int n);

/* sum(y * w) with fixed weights w = 1, 2, ... over y's global elements, so
 * every element's gradient differs; y dense or a DTensor. */
pd_tensor *dtensor_weighted_sum(pd_tensor *y);

#endif
