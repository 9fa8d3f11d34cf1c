/* Tensor creation (paddle.to_tensor, zeros, ones, full, arange, random...). */
#ifndef PADDLEC_CREATION_H
#define PADDLEC_CREATION_H

#include "paddlec/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* paddle.to_tensor: copies n = prod(shape) elements of `dt` from data. */
pd_tensor *pd_to_tensor(const void *data, pd_dtype dt, int ndim, const int64_t *shape);
/* A tensor of the given shape filled from a double array (converted to dt). */
pd_tensor *pd_tensor_from_f64(const double *data, pd_dtype dt, int ndim, const int64_t *shape);
pd_tensor *pd_full(int ndim, const int64_t *shape, double value, pd_dtype dt);
pd_tensor *pd_zeros(int ndim, const int64_t *shape, pd_dtype dt);
pd_tensor *pd_ones(int ndim, const int64_t *shape, pd_dtype dt);
/* Uninitialised memory. */
pd_tensor *pd_empty(int ndim, const int64_t *shape, pd_dtype dt);
/* _like variants: dt = PD_NUM_DTYPES keeps x's dtype. */
pd_tensor *pd_full_like(pd_tensor *x, double value, pd_dtype dt);
pd_tensor *pd_zeros_like(pd_tensor *x, pd_dtype dt);
pd_tensor *pd_ones_like(pd_tensor *x, pd_dtype dt);
pd_tensor *pd_empty_like(pd_tensor *x, pd_dtype dt);
/* A contiguous copy of x in dtype dt (PD_NUM_DTYPES keeps x's), cut from
 * the graph. */
pd_tensor *pd_clone(pd_tensor *x, pd_dtype dt);

#ifdef __cplusplus
}
#endif
#endif
