/* Tensor creation (paddle.to_tensor, zeros, ones, full, arange, random...). */
#ifndef PADDLEC_CREATION_H
#define PADDLEC_CREATION_H

#include "paddlec/core.h"
#include "paddlec/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* paddle.to_tensor: copies n = prod(shape) elements of `dt` from data. */
PD_API pd_tensor *pd_to_tensor(const void *data, pd_dtype dt, int ndim, const int64_t *shape);
/* A tensor of the given shape filled from a double array (converted to dt). */
PD_API pd_tensor *pd_tensor_from_f64(const double *data, pd_dtype dt, int ndim, const int64_t *shape);
/* dt = PD_NUM_DTYPES gives the default dtype (pd_get_default_dtype, float32
 * unless changed) for full, zeros, ones and empty. */
PD_API pd_tensor *pd_full(int ndim, const int64_t *shape, double value, pd_dtype dt);
PD_API pd_tensor *pd_zeros(int ndim, const int64_t *shape, pd_dtype dt);
PD_API pd_tensor *pd_ones(int ndim, const int64_t *shape, pd_dtype dt);
/* Uninitialised memory. */
PD_API pd_tensor *pd_empty(int ndim, const int64_t *shape, pd_dtype dt);
/* _like variants: dt = PD_NUM_DTYPES keeps x's dtype. */
PD_API pd_tensor *pd_full_like(pd_tensor *x, double value, pd_dtype dt);
PD_API pd_tensor *pd_zeros_like(pd_tensor *x, pd_dtype dt);
PD_API pd_tensor *pd_ones_like(pd_tensor *x, pd_dtype dt);
PD_API pd_tensor *pd_empty_like(pd_tensor *x, pd_dtype dt);
/* A contiguous copy of x in dtype dt (PD_NUM_DTYPES keeps x's), cut from
 * the graph. */
PD_API pd_tensor *pd_clone(pd_tensor *x, pd_dtype dt);

/* ---- ranges ------------------------------------------------------------- */
/* paddle.arange: 1-D [start, start + step, ...) up to end (exclusive),
 * ceil((end - start) / step) elements computed in dt's arithmetic (none
 * when step points away from end; step 0 is an error). Element i is
 * start + i * step. dt = PD_NUM_DTYPES infers like Paddle: int64 when start,
 * end and step are all integral, the default dtype otherwise. Supports int32, int64,
 * float16, bfloat16, float32, float64. paddle.arange(n) is
 * pd_arange(0, n, 1, PD_NUM_DTYPES). */
PD_API pd_tensor *pd_arange(double start, double end, double step, pd_dtype dt);
/* paddle.linspace: num (>= 0) evenly spaced values from start to stop, both
 * included. dt = PD_NUM_DTYPES gives the default dtype; integer dtypes
 * truncate. */
PD_API pd_tensor *pd_linspace(double start, double stop, int64_t num, pd_dtype dt);
/* paddle.eye: a [num_rows, num_columns] matrix with ones on the diagonal.
 * num_columns = -1 gives num_columns = num_rows; dt = PD_NUM_DTYPES gives
 * the default dtype. */
PD_API pd_tensor *pd_eye(int64_t num_rows, int64_t num_columns, pd_dtype dt);

/* ---- random ------------------------------------------------------------- */
/* All draw from the global generator (pd_seed); results do not depend on the
 * number of threads. Float dtypes: float16, bfloat16, float32, float64;
 * dt = PD_NUM_DTYPES gives Paddle's default (pd_get_default_dtype() for
 * floats, int64 for integers). */
/* paddle.rand: uniform on [0, 1). */
PD_API pd_tensor *pd_rand(int ndim, const int64_t *shape, pd_dtype dt);
/* paddle.randn: standard normal. */
PD_API pd_tensor *pd_randn(int ndim, const int64_t *shape, pd_dtype dt);
/* paddle.randint: integers uniform on [low, high) (low < high), int32 or
 * int64. paddle.randint(n, shape=...) is pd_randint(0, n, ...). */
PD_API pd_tensor *pd_randint(int64_t low, int64_t high, int ndim, const int64_t *shape, pd_dtype dt);
/* paddle.uniform: uniform on [min, max) (Paddle's defaults: -1, 1). seed 0
 * draws from the global generator; another seed gives a fixed stream. */
PD_API pd_tensor *pd_uniform(int ndim, const int64_t *shape, pd_dtype dt, double min, double max,
                             uint64_t seed);
/* paddle.normal with scalar mean and std: samples of N(mean, std^2) in the
 * default dtype. */
PD_API pd_tensor *pd_normal(double mean, double std, int ndim, const int64_t *shape);
/* paddle.bernoulli: 1 with probability x[i], else 0; x's shape and dtype
 * (floating; every x[i] must lie in [0, 1]). */
PD_API pd_tensor *pd_bernoulli(pd_tensor *x);
/* paddle.multinomial: num_samples category indices (int64) per row of the
 * 1-D or 2-D non-negative weights x (rows need not sum to 1). Without
 * replacement no index repeats within a row, and num_samples may not exceed
 * the number of categories with non-zero weight. */
PD_API pd_tensor *pd_multinomial(pd_tensor *x, int64_t num_samples, bool replacement);
/* paddle.randperm: a random permutation of 0 .. n-1 (int32, int64, float32,
 * float64; PD_NUM_DTYPES gives int64). */
PD_API pd_tensor *pd_randperm(int64_t n, pd_dtype dt);

#ifdef __cplusplus
}
#endif
#endif
