/* Reductions, scans, sorting. axis == NULL (or naxis == 0) reduces all dims. */
#ifndef PADDLEC_REDUCTION_H
#define PADDLEC_REDUCTION_H

#include "paddlec/core.h"

#ifdef __cplusplus
extern "C" {
#endif

pd_tensor *pd_sum(pd_tensor *x, const int64_t *axis, int naxis, bool keepdim);

#ifdef __cplusplus
}
#endif
#endif
