/* Copy, gather and scatter loops on raw buffers. */
#include "parallel.h"
#include "index.h"

#include <string.h>

#include "elementwise.h"

/* ---- strided copy --------------------------------------------------------- */

#define STRIDED_COPY(T)                                          \
  do {                                                           \
    T *o = (T *)p[0];                                            \
    const T *a = (const T *)p[1];                                \
    if (s[1] == 1)                                               \
      for (int64_t i = 0; i < n; i++) o[i * s[0]] = a[i];        \
    else if (s[0] == 1)                                          \
      for (int64_t i = 0; i < n; i++) o[i] = a[i * s[1]];        \
    else                                                         \
      for (int64_t i = 0; i < n; i++) o[i * s[0]] = a[i * s[1]]; \
  } while (0)

static void copy_run(int64_t n, char *const *p, const int64_t *s, const void *pp) {
  int64_t es = *(const int64_t *)pp;
  if (s[0] == 1 && s[1] == 1) {
    memcpy(p[0], p[1], (size_t)(n * es));
    return;
  }
  switch (es) {
    case 1:
      STRIDED_COPY(uint8_t);
      break;
    case 2:
      STRIDED_COPY(uint16_t);
      break;
    case 4:
      STRIDED_COPY(uint32_t);
      break;
    case 8:
      STRIDED_COPY(uint64_t);
      break;
    default:
      for (int64_t i = 0; i < n; i++) memcpy(p[0] + i * s[0] * es, p[1] + i * s[1] * es, (size_t)es);
  }
}

void pdk_copy(int ndim, const int64_t *shape, void *dst, const int64_t *dst_strides, const void *src,
              const int64_t *src_strides, int64_t elsize) {
  pd_ew_geom g;
  g.ndim = ndim;
  g.nops = 2;
  for (int d = 0; d < ndim; d++) {
    if (shape[d] == 0) return;
    g.shape[d] = shape[d];
    g.stride[0][d] = dst_strides[d];
    g.stride[1][d] = src_strides[d];
  }
  g.base[0] = (char *)dst;
  g.base[1] = (char *)src;
  g.elsize[0] = g.elsize[1] = elsize;
  pdk_ew_coalesce(&g);
  pdk_ew_run(&g, copy_run, &elsize);
}

/* ---- gather --------------------------------------------------------------- */

/* Copies `n` elements of size es (small n stays out of memcpy calls). */
static inline void copy_elems(char *dst, const char *src, int64_t n, int64_t es) {
  if (n == 1) {
    switch (es) {
      case 1:
        *(uint8_t *)dst = *(const uint8_t *)src;
        return;
      case 2:
        memcpy(dst, src, 2);
        return;
      case 4:
        memcpy(dst, src, 4);
        return;
      case 8:
        memcpy(dst, src, 8);
        return;
      default:
        break;
    }
  }
  memcpy(dst, src, (size_t)(n * es));
}

void pdk_gather_axis(const void *x, void *out, const int64_t *idx, int64_t outer, int64_t n, int64_t nidx,
                     int64_t inner, int64_t elsize) {
  const char *xp = x;
  char *op = out;
  int64_t rows = outer * nidx;
  if (inner == 1 && elsize == 4) {
    PD_PARALLEL_FOR_IF(rows > PD_INDEX_GRAIN, r, rows,
                       ((uint32_t *)op)[r] = ((const uint32_t *)xp)[(r / nidx) * n + idx[r % nidx]];);
    return;
  }
  if (inner == 1 && elsize == 8) {
    PD_PARALLEL_FOR_IF(rows > PD_INDEX_GRAIN, r, rows,
                       ((uint64_t *)op)[r] = ((const uint64_t *)xp)[(r / nidx) * n + idx[r % nidx]];);
    return;
  }
  PD_PARALLEL_FOR_IF(rows * inner > PD_INDEX_GRAIN, r, rows, int64_t o = r / nidx, j = r % nidx; copy_elems(
                         op + r * inner * elsize, xp + (o * n + idx[j]) * inner * elsize, inner, elsize););
}

void pdk_index_sample(const void *x, void *out, const int64_t *idx, int64_t b, int64_t n, int64_t k,
                      int64_t elsize) {
  const char *xp = x;
  char *op = out;
  PD_PARALLEL_FOR_IF(b * k > PD_INDEX_GRAIN, i, b,
                     for (int64_t j = 0; j < k; j++) copy_elems(
                         op + (i * k + j) * elsize, xp + (i * n + idx[i * k + j]) * elsize, 1, elsize););
}

/* ---- scatter -------------------------------------------------------------- */

/* Columns are split in blocks so that threads own disjoint output columns;
 * within a block the indices run in order, which keeps duplicates
 * deterministic (accumulation order, last writer). */
#define COL_BLOCK 4096

#define ADD_BLOCK(T, OPX)                                                                                  \
  do {                                                                                                     \
    T *ob = (T *)out;                                                                                      \
    const T *vb = (const T *)v;                                                                            \
    PD_OMP_FOR_IF(                                                                                         \
        work > PD_INDEX_GRAIN, for (int64_t t = 0; t < tasks; t++), int64_t o = t / nblk,                  \
        c0 = (t % nblk) * COL_BLOCK;                                                                       \
        int64_t cl = inner - c0 < COL_BLOCK ? inner - c0 : COL_BLOCK; for (int64_t j = 0; j < nidx; j++) { \
          if (idx[j] == skip) continue;                                                                    \
          T *d = ob + (o * n + idx[j]) * inner + c0;                                                       \
          const T *s = vb + (o * nidx + j) * inner + c0;                                                   \
          for (int64_t c = 0; c < cl; c++) d[c] = OPX;                                                     \
        });                                                                                                \
  } while (0)

int pdk_index_add(pd_dtype dt, void *out, const void *v, const int64_t *idx, int64_t outer, int64_t n,
                  int64_t nidx, int64_t inner, int64_t skip) {
  if (outer == 0 || nidx == 0 || inner == 0) return 0;
  int64_t nblk = (inner + COL_BLOCK - 1) / COL_BLOCK, tasks = outer * nblk, work = outer * nidx * inner;
  switch (dt) {
    case PD_FLOAT32:
      ADD_BLOCK(float, d[c] + s[c]);
      break;
    case PD_FLOAT64:
      ADD_BLOCK(double, d[c] + s[c]);
      break;
    case PD_INT64:
      ADD_BLOCK(int64_t, d[c] + s[c]);
      break;
    case PD_INT32:
      ADD_BLOCK(int32_t, d[c] + s[c]);
      break;
    case PD_INT16:
      ADD_BLOCK(int16_t, (int16_t)(d[c] + s[c]));
      break;
    case PD_INT8:
      ADD_BLOCK(int8_t, (int8_t)(d[c] + s[c]));
      break;
    case PD_UINT8:
      ADD_BLOCK(uint8_t, (uint8_t)(d[c] + s[c]));
      break;
    case PD_BOOL:
      ADD_BLOCK(uint8_t, (uint8_t)((d[c] | s[c]) != 0));
      break;
    default:
      return -1;
  }
  return 0;
}

void pdk_scatter_rows(void *out, const void *v, const int64_t *idx, int64_t nidx, int64_t inner,
                      int64_t elsize) {
  char *op = out;
  const char *vp = v;
  if (inner == 0) return;
  int64_t nblk = (inner + COL_BLOCK - 1) / COL_BLOCK;
  PD_PARALLEL_FOR_IF(nidx * inner > PD_INDEX_GRAIN && nblk > 1, b, nblk, int64_t c0 = b * COL_BLOCK,
                     cl = inner - c0 < COL_BLOCK ? inner - c0 : COL_BLOCK;
                     for (int64_t j = 0; j < nidx; j++) copy_elems(
                         op + (idx[j] * inner + c0) * elsize, vp + (j * inner + c0) * elsize, cl, elsize););
}

void pdk_zero_rows(void *out, const int64_t *idx, int64_t nidx, int64_t inner, int64_t elsize) {
  char *op = out;
  for (int64_t j = 0; j < nidx; j++) memset(op + idx[j] * inner * elsize, 0, (size_t)(inner * elsize));
}

/* ---- tile, tril/triu -------------------------------------------------------- */

void pdk_tile(const void *x, int ndim, const int64_t *xshape, const int64_t *reps, void *out,
              int64_t elsize) {
  const char *xp = x;
  char *op = out;
  if (ndim == 0) {
    memcpy(op, xp, (size_t)elsize);
    return;
  }
  int64_t oshape[PD_MAX_DIMS], xstr[PD_MAX_DIMS], rows = 1;
  for (int d = 0; d < ndim; d++) {
    oshape[d] = xshape[d] * reps[d];
    if (oshape[d] == 0) return;
  }
  xstr[ndim - 1] = 1;
  for (int d = ndim - 2; d >= 0; d--) xstr[d] = xstr[d + 1] * xshape[d + 1];
  for (int d = 0; d < ndim - 1; d++) rows *= oshape[d];
  int64_t xlast = xshape[ndim - 1], olast = oshape[ndim - 1], rb = xlast * elsize;
  PD_PARALLEL_FOR_IF(
      rows * olast > PD_INDEX_GRAIN, r, rows, int64_t rem = r, src = 0; for (int d = ndim - 2; d >= 0; d--) {
        int64_t i = rem % oshape[d];
        rem /= oshape[d];
        src += (i % xshape[d]) * xstr[d];
      } char *dst = op + r * olast * elsize;
      for (int64_t k = 0; k < reps[ndim - 1]; k++) memcpy(dst + k * rb, xp + src * elsize, (size_t)rb););
}

void pdk_tri_zero(void *out, int64_t batch, int64_t rows, int64_t cols, int64_t diag, bool lower,
                  int64_t elsize) {
  char *op = out;
  int64_t total = batch * rows;
  /* a diagonal past the matrix acts as the matrix's edge; clamping it keeps
   * r + diag from overflowing for diagonals near INT64_MIN or INT64_MAX */
  if (diag < -rows - 1) diag = -rows - 1;
  if (diag > cols + 1) diag = cols + 1;
  PD_PARALLEL_FOR_IF(
      total * cols > PD_INDEX_GRAIN, t, total, int64_t r = t % rows, c0, c1;
      if (lower) { /* keep c <= r + diag */
                   c0 = r + diag + 1;
                   c1 = cols;
      } else { /* keep c >= r + diag */
               c0 = 0;
               c1 = r + diag;
      } if (c0 < 0) c0 = 0;
      if (c1 > cols) c1 = cols;
      if (c1 > c0) memset(op + (t * cols + c0) * elsize, 0, (size_t)((c1 - c0) * elsize)););
}

/* ---- nonzero, masked_select, one_hot ---------------------------------------- */

static inline bool is_nonzero(const char *p, pd_dtype dt) {
  switch (dt) {
    case PD_BOOL:
    case PD_UINT8:
    case PD_INT8:
      return *(const uint8_t *)p != 0;
    case PD_INT16:
      return *(const int16_t *)p != 0;
    case PD_FLOAT16:
    case PD_BFLOAT16:
      return (*(const uint16_t *)p & 0x7fff) != 0;
    case PD_INT32:
      return *(const int32_t *)p != 0;
    case PD_FLOAT32:
      return *(const float *)p != 0.0f;
    case PD_INT64:
      return *(const int64_t *)p != 0;
    case PD_FLOAT64:
      return *(const double *)p != 0.0;
    default:
      return false;
  }
}

int64_t pdk_count_nonzero(const void *x, pd_dtype dt, int64_t n) {
  const char *p = x;
  int64_t es = (int64_t)pd_dtype_size(dt), c = 0;
  if (dt == PD_BOOL) {
    for (int64_t i = 0; i < n; i++) c += p[i] != 0;
    return c;
  }
#pragma omp parallel for reduction(+ : c) if (n > PD_INDEX_GRAIN && pd_parallel_loops_on())
  for (int64_t i = 0; i < n; i++) c += is_nonzero(p + i * es, dt);
  return c;
}

void pdk_nonzero_positions(const void *x, pd_dtype dt, int64_t n, int64_t *pos) {
  const char *p = x;
  int64_t es = (int64_t)pd_dtype_size(dt), k = 0;
  for (int64_t i = 0; i < n; i++)
    if (is_nonzero(p + i * es, dt)) pos[k++] = i;
}

void pdk_masked_select(const void *x, const uint8_t *mask, int64_t n, void *out, int64_t elsize) {
  const char *xp = x;
  char *op = out;
  int64_t k = 0;
  for (int64_t i = 0; i < n; i++)
    if (mask[i]) copy_elems(op + (k++) * elsize, xp + i * elsize, 1, elsize);
}

void pdk_one_hot(const int64_t *idx, int64_t n, int64_t depth, float *out) {
  for (int64_t i = 0; i < n; i++) out[i * depth + idx[i]] = 1.0f;
}
