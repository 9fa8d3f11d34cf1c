/* Shape arithmetic on plain (ndim, shape) arrays: what the kernels may use
 * without the tensor struct. Internal. */
#ifndef PADDLEC_SHAPE_H
#define PADDLEC_SHAPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

void pd_compute_contiguous_strides(int ndim, const int64_t *shape, int64_t *strides);
bool pd_strides_are_contiguous(int ndim, const int64_t *shape, const int64_t *strides);
int64_t pd_shape_numel(int ndim, const int64_t *shape);
/* "[2, 3]" into buf; returns buf. */
char *pd_shape_str(int ndim, const int64_t *shape, char *buf, size_t cap);

#endif
