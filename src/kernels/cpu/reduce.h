/* Reductions, scans and sorts over raw strided buffers.
 *
 * The reduction geometry splits the dims of x into kept ones (one output
 * element each, outputs contiguous in row-major order) and reduced ones,
 * both coalesced. The driver picks one of two loop shapes:
 *   - per output: the innermost reduced dim is unit-stride with long runs:
 *     each output folds contiguous runs (vectorised simd reductions);
 *   - rows: every other case. Tiles of outputs along the innermost kept dim
 *     accumulate whole rows of the reduced range (vectorised across the
 *     kept dim when it is unit-stride; short dense rows fold as one flat
 *     run; small constant strides use interleaved loads).
 * A long reduced range is cut into blocks fixed by the geometry alone, each
 * folded from the identity, and the block partials are combined in block
 * order, so the result has the same bits on any number of threads. Work is
 * split over outputs (or output tiles), or, when there are few outputs and
 * long reductions, over the blocks of one output. float32 sums add float partials of bounded blocks in
 * double (integer-valued sums stay exact while a block partial is below
 * 2^24, e.g. 1e7 ones); everything else accumulates in double (floats) or
 * wrapping int64 (integers and bool). */
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

void pdk_reduce_geom_init(pd_reduce_geom *g, int ndim, const int64_t *shape, const int64_t *strides,
                          const bool *reduce_mask);
/* Offset (in elements) of kept index i / reduced index j (row-major). */
int64_t pdk_reduce_keep_offset(const pd_reduce_geom *g, int64_t i);
int64_t pdk_reduce_red_offset(const pd_reduce_geom *g, int64_t j);

/* What is folded over the reduced elements v of one output (c = center[i]). */
typedef enum pd_reduce_kind {
  PD_RK_SUM,        /* sum v */
  PD_RK_PROD,       /* prod v */
  PD_RK_MAX,        /* max v, NaN if any NaN */
  PD_RK_MIN,        /* min v, NaN if any NaN */
  PD_RK_ALL,        /* all v != 0 */
  PD_RK_ANY,        /* any v != 0 */
  PD_RK_COUNT_NZ,   /* number of v != 0 */
  PD_RK_SUMSQ,      /* sum v^2 (floats) */
  PD_RK_SUMSQ_DEV,  /* sum (v - c)^2 (floats) */
  PD_RK_SUMEXP_DEV, /* sum exp(v - c) (floats) */
  PD_RK_ABS_SUM,    /* sum |v| (floats) */
  PD_RK_ABS_POW,    /* sum |v|^p (floats) */
  PD_RK_ABS_MAX,    /* max |v| (floats) */
  PD_RK_ABS_MIN,    /* min |v| (floats) */
  PD_RK_NUM
} pd_reduce_kind;

/* Applied to each folded value a before it is stored. */
typedef enum pd_reduce_post {
  PD_RP_NONE,
  PD_RP_DIV,       /* a / d */
  PD_RP_LOG_ADD_C, /* log(a) + c (c = -inf or NaN passes through) */
  PD_RP_SQRT_DIV,  /* sqrt(a / d) */
  PD_RP_ROOT,      /* a^(1/p) */
} pd_reduce_post;

typedef struct pd_reduce_spec {
  pd_reduce_kind kind;
  pd_reduce_post post;
  double p;             /* exponent of ABS_POW and ROOT */
  double d;             /* divisor of DIV and SQRT_DIV */
  const double *center; /* n_out values (row-major outputs) for *_DEV and LOG_ADD_C */
} pd_reduce_spec;

/* out[i] = post(fold of the reduced elements of kept index i), out
 * contiguous of dtype odt. x may be any dtype but float16/bfloat16; the
 * *_DEV/ABS kinds need float x. An empty reduction stores the identity
 * (0, 1, -inf for MAX, +inf for MIN, true for ALL). Returns 1 when the
 * dtype/kind pair is unsupported, 2 when out of memory. */
int pdk_reduce_run(const pd_reduce_geom *g, const pd_reduce_spec *s, const void *x, pd_dtype xdt, void *out,
                   pd_dtype odt);
/* Sum, kept for callers of the first driver: pdk_reduce_run with PD_RK_SUM. */
int pdk_reduce_sum(const pd_reduce_geom *g, const void *x, pd_dtype xdt, void *out, pd_dtype odt);

/* argmax (is_max) / argmin over x contiguous viewed as [outer, len,
 * inner] (len > 0): out[o, i] = index along len of the first extreme
 * element, or of the first NaN. out is int64 or int32. */
int pdk_reduce_arg(const void *x, pd_dtype xdt, int64_t outer, int64_t len, int64_t inner, bool is_max,
                   void *out, pd_dtype odt);

/* Exclusive products: for every element, the product of the other elements
 * of its reduction group. x described by gx, out (contiguous, x's shape) by
 * go, built with the same mask. float32/float64. */
int pdk_reduce_prod_exclusive(const pd_reduce_geom *gx, const void *x, const pd_reduce_geom *go, void *out,
                              pd_dtype dt);
/* Gradient of the exclusive products: gin[k] = sum_{i != k} g[i] * prod_{j
 * not in {i, k}} x[j] within each group. g and gin are contiguous with x's
 * shape (described by go); x by gx. */
int pdk_reduce_prod_exclusive_grad(const pd_reduce_geom *gx, const void *x, const pd_reduce_geom *go,
                                   const void *g, void *gin, pd_dtype dt);

/* ---- scans ---------------------------------------------------------------
 * x and out contiguous, viewed as [outer, len, inner]; out[o, l, i] = sum of
 * x[o, m, i] for m <= l (m < l when exclusive; m >= l / m > l when reverse).
 * Accumulates in double (floats) or wrapping int64. Returns 1 for an
 * unsupported dtype (bool, half). */
int pdk_cumsum_run(const void *x, void *out, pd_dtype dt, int64_t outer, int64_t len, int64_t inner,
                   bool exclusive, bool reverse);

/* ---- sorting --------------------------------------------------------------
 * x contiguous viewed as [outer, len, inner]. Total order: NaN above every
 * number, -0 equal to +0; equal values keep their index order (stable).
 * Values written to vals ([outer, k, inner], x's dtype) and indices to idx
 * (int64), both optional. sort: k = len, ascending unless descending. topk:
 * the k largest (largest) or smallest, best first. Return 1 for an
 * unsupported dtype (or k > len), 2 when out of memory. */
int pdk_sort_run(const void *x, pd_dtype dt, int64_t outer, int64_t len, int64_t inner, bool descending,
                 void *vals, int64_t *idx);
int pdk_topk_run(const void *x, pd_dtype dt, int64_t outer, int64_t len, int64_t inner, int64_t k,
                 bool largest, void *vals, int64_t *idx);

#endif
