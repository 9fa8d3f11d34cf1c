/* Softmax and log-softmax along the middle axis of a contiguous buffer seen
 * as [outer, n, inner]: max-shifted, one sweep for the max, one for the
 * exponentials and their sum, one to normalise, with each row (or block of
 * inner columns) in cache. Parallel over rows / column blocks. */
#ifndef PADDLEC_KERNELS_SOFTMAX_H
#define PADDLEC_KERNELS_SOFTMAX_H

#include <stdbool.h>
#include <stdint.h>

void pdk_softmax_f32(const float *x, float *y, int64_t outer, int64_t n, int64_t inner, bool log);
void pdk_softmax_f64(const double *x, double *y, int64_t outer, int64_t n, int64_t inner, bool log);

#endif
