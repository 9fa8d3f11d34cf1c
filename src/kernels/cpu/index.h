/* Copy, gather and scatter loops on raw buffers (no tensors), shared by the
 * shape and indexing ops. Index arrays are int64 and already validated and
 * normalised (0 <= idx < n) by the caller. Element types are named by their
 * size in bytes where only copying happens, by pd_dtype where arithmetic
 * happens. */
#ifndef PADDLEC_KERNELS_INDEX_H
#define PADDLEC_KERNELS_INDEX_H

#include <stdbool.h>
#include <stdint.h>

#include "paddlec/core.h"

/* Below this many elements the loops stay on one thread. */
#define PD_INDEX_GRAIN 32768

/* dst[i...] = src[i...] over an n-d box; strides in elements (src strides may
 * be negative or zero). Unit-stride runs are memcpy'd; large boxes are split
 * over threads. */
void pdk_copy(int ndim, const int64_t *shape, void *dst, const int64_t *dst_strides, const void *src,
              const int64_t *src_strides, int64_t elsize);

/* x viewed as [outer, n, inner], out as [outer, nidx, inner]:
 * out[o, j, :] = x[o, idx[j], :]. */
void pdk_gather_axis(const void *x, void *out, const int64_t *idx, int64_t outer, int64_t n, int64_t nidx,
                     int64_t inner, int64_t elsize);

/* out viewed as [outer, n, inner], v as [outer, nidx, inner]:
 * out[o, idx[j], :] += v[o, j, :] for every j with idx[j] != skip (skip < 0:
 * none). Duplicates accumulate in index order (deterministic). Bool adds as
 * logical or. Returns 0, or -1 for an unsupported dtype. */
int pdk_index_add(pd_dtype dt, void *out, const void *v, const int64_t *idx, int64_t outer, int64_t n,
                  int64_t nidx, int64_t inner, int64_t skip);

/* out[idx[j], :] = v[j, :] (rows of `inner` elements), in index order, so
 * the last of duplicate indices wins. */
void pdk_scatter_rows(void *out, const void *v, const int64_t *idx, int64_t nidx, int64_t inner,
                      int64_t elsize);
/* out[idx[j], :] = 0. */
void pdk_zero_rows(void *out, const int64_t *idx, int64_t nidx, int64_t inner, int64_t elsize);

/* x [b, n], idx [b, k] -> out [b, k]: out[i, j] = x[i, idx[i, j]]. */
void pdk_index_sample(const void *x, void *out, const int64_t *idx, int64_t b, int64_t n, int64_t k,
                      int64_t elsize);

/* Contiguous x of shape xshape (ndim dims, already padded to the output
 * rank) tiled reps[d] times along each dim into contiguous out. */
void pdk_tile(const void *x, int ndim, const int64_t *xshape, const int64_t *reps, void *out, int64_t elsize);

/* In place on contiguous [batch, rows, cols]: zeros the part above diagonal
 * `diag` (lower = true, tril) or below it (lower = false, triu). */
void pdk_tri_zero(void *out, int64_t batch, int64_t rows, int64_t cols, int64_t diag, bool lower,
                  int64_t elsize);

/* Number of nonzero elements of contiguous x (NaN counts, -0.0 does not). */
int64_t pdk_count_nonzero(const void *x, pd_dtype dt, int64_t n);
/* Writes the flat positions of the nonzero elements (ascending). */
void pdk_nonzero_positions(const void *x, pd_dtype dt, int64_t n, int64_t *pos);

/* out <- the elements of contiguous x where mask (bool bytes) is set. */
void pdk_masked_select(const void *x, const uint8_t *mask, int64_t n, void *out, int64_t elsize);

/* out [n, depth] float32 zero-filled by the caller: out[i, idx[i]] = 1. */
void pdk_one_hot(const int64_t *idx, int64_t n, int64_t depth, float *out);

#endif
