/* Reductions over raw strided buffers. The geometry splits dims into kept
 * (one output element each) and reduced ones, both coalesced. */
#ifndef PADDLEC_KERNELS_REDUCE_H
#define PADDLEC_KERNELS_REDUCE_H

#include <stdbool.h>
#include <stdint.h>

#include "paddlec/core.h"

typedef struct pd_reduce_geom {
  int nkeep, nred;
  int64_t keep_shape[PD_MAX_DIMS], keep_stride[PD_MAX_DIMS]; /* input strides of kept dims */
  int64_t red_shape[PD_MAX_DIMS], red_stride[PD_MAX_DIMS];
  int64_t n_out, n_red;
} pd_reduce_geom;

void pd_reduce_geom_init(pd_reduce_geom *g, int ndim, const int64_t *shape, const int64_t *strides,
                         const bool *reduce_mask);
/* out[i] = sum of the reduced elements of kept index i (out contiguous).
 * Accumulates in double for float inputs, int64 for integers.
 * Returns non-zero when a dtype is unsupported. */
int pd_reduce_sum(const pd_reduce_geom *g, const void *x, pd_dtype xdt, void *out, pd_dtype odt);
/* Offset (in elements) of kept index i / reduced index j. */
int64_t pd_reduce_keep_offset(const pd_reduce_geom *g, int64_t i);
int64_t pd_reduce_red_offset(const pd_reduce_geom *g, int64_t j);

#endif
