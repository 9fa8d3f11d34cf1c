/* Padding kernels. The forward walks output rows (all dims but the last) in
 * parallel; the in-range middle of a row is one copy (memcpy when unit
 * stride), the edges read through a per-dim source table. */
#include "pad.h"

#include <stdlib.h>
#include <string.h>

#include "parallel.h"

#define SENTINEL INT64_MIN

#define ROW_FN(T)                                                                                   \
  static void row_##T(T *o, const char *xrow, const int64_t *tw, int64_t w, int64_t lo, int64_t hi, \
                      int64_t bw, int64_t sw, T val) {                                              \
    const T *xr = (const T *)xrow;                                                                  \
    for (int64_t j = 0; j < lo; j++) o[j] = tw[j] == SENTINEL ? val : xr[tw[j]];                    \
    if (sw == 1) {                                                                                  \
      if (hi > lo) memcpy(o + lo, xr + (lo - bw), (size_t)(hi - lo) * sizeof(T));                   \
    } else {                                                                                        \
      for (int64_t j = lo; j < hi; j++) o[j] = xr[(j - bw) * sw];                                   \
    }                                                                                               \
    for (int64_t j = hi > lo ? hi : lo; j < w; j++) o[j] = tw[j] == SENTINEL ? val : xr[tw[j]];     \
  }                                                                                                 \
  static void fill_##T(T *o, int64_t w, T val) {                                                    \
    for (int64_t j = 0; j < w; j++) o[j] = val;                                                     \
  }
ROW_FN(uint8_t)
ROW_FN(uint16_t)
ROW_FN(uint32_t)
ROW_FN(uint64_t)

int pdk_pad(int ndim, const int64_t *xshape, const int64_t *xstrides, const void *x, const int64_t *before,
            const int64_t *oshape, int mode, const void *value, void *out, int64_t elsize) {
  if (ndim == 0) {
    memcpy(out, x, (size_t)elsize);
    return 0;
  }
  int64_t total = 1, ntab = 0;
  for (int d = 0; d < ndim; d++) {
    total *= oshape[d];
    ntab += oshape[d];
  }
  if (total == 0) return 0;
  int64_t *tab = malloc((size_t)ntab * sizeof *tab);
  if (!tab) return -1;
  const int64_t *tbl[PD_MAX_DIMS];
  int64_t *t = tab;
  for (int d = 0; d < ndim; d++) {
    tbl[d] = t;
    for (int64_t o = 0; o < oshape[d]; o++) {
      int64_t s = pd_pad_src(o, before[d], xshape[d], mode);
      *t++ = s < 0 ? SENTINEL : s * xstrides[d];
    }
  }
  const int last = ndim - 1;
  const int64_t w = oshape[last], rows = total / w, bw = before[last], sw = xstrides[last];
  int64_t lo = bw < w ? bw : w, hi = bw + xshape[last] < w ? bw + xshape[last] : w;
  if (hi < lo) hi = lo;
  const int64_t *tw = tbl[last];
  int64_t grain = PD_GRAIN / w > 0 ? PD_GRAIN / w : 1;
  PD_PARALLEL_FOR(r, rows, grain, {
    int64_t rem = r, off = 0;
    bool pad_row = false;
    for (int d = last - 1; d >= 0; d--) {
      int64_t i = rem % oshape[d], e = tbl[d][i];
      rem /= oshape[d];
      if (e == SENTINEL)
        pad_row = true;
      else
        off += e;
    }
    char *orow = (char *)out + r * w * elsize;
    const char *xrow = (const char *)x + off * elsize;
    switch (elsize) {
      case 1:
        if (pad_row)
          fill_uint8_t((uint8_t *)orow, w, *(const uint8_t *)value);
        else
          row_uint8_t((uint8_t *)orow, xrow, tw, w, lo, hi, bw, sw, *(const uint8_t *)value);
        break;
      case 2:
        if (pad_row)
          fill_uint16_t((uint16_t *)orow, w, *(const uint16_t *)value);
        else
          row_uint16_t((uint16_t *)orow, xrow, tw, w, lo, hi, bw, sw, *(const uint16_t *)value);
        break;
      case 4:
        if (pad_row)
          fill_uint32_t((uint32_t *)orow, w, *(const uint32_t *)value);
        else
          row_uint32_t((uint32_t *)orow, xrow, tw, w, lo, hi, bw, sw, *(const uint32_t *)value);
        break;
      default:
        if (pad_row)
          fill_uint64_t((uint64_t *)orow, w, *(const uint64_t *)value);
        else
          row_uint64_t((uint64_t *)orow, xrow, tw, w, lo, hi, bw, sw, *(const uint64_t *)value);
        break;
    }
  });
  free(tab);
  return 0;
}

/* Columns of `inner` handled by one task of the adjoint. */
#define GRAD_BLOCK 1024

/* The in-range middle maps output before + i to input i: it is copied; the
 * edges (outputs [0, before) and [before + nin, nout)) are added on top. */
#define GRAD_FN(T)                                                                                      \
  static void grad_##T(const T *g, T *dx, const int64_t *map, int64_t outer, int64_t nout, int64_t nin, \
                       int64_t inner, int64_t before) {                                                 \
    const int64_t after0 = before + nin;                                                                \
    if (inner == 1) {                                                                                   \
      PD_PARALLEL_FOR(r, outer, PD_GRAIN / (nout > 0 ? nout : 1) + 1, {                                 \
        T *d = dx + r * nin;                                                                            \
        const T *s = g + r * nout;                                                                      \
        memcpy(d, s + before, (size_t)nin * sizeof(T));                                                 \
        for (int64_t o = 0; o < nout; o++) {                                                            \
          if (o == before) o = after0;                                                                  \
          if (o >= nout) break;                                                                         \
          if (map[o] >= 0) d[map[o]] += s[o];                                                           \
        }                                                                                               \
      });                                                                                               \
      return;                                                                                           \
    }                                                                                                   \
    int64_t nblk = (inner + GRAD_BLOCK - 1) / GRAD_BLOCK;                                               \
    PD_PARALLEL_FOR_IF(outer *nout *inner >= PD_GRAIN && outer * nblk > 1, t, outer * nblk, {           \
      int64_t ob = t / nblk, j0 = (t % nblk) * GRAD_BLOCK;                                              \
      int64_t j1 = j0 + GRAD_BLOCK < inner ? j0 + GRAD_BLOCK : inner;                                   \
      T *d = dx + ob * nin * inner;                                                                     \
      const T *s = g + ob * nout * inner;                                                               \
      for (int64_t i = 0; i < nin; i++)                                                                 \
        memcpy(d + i * inner + j0, s + (before + i) * inner + j0, (size_t)(j1 - j0) * sizeof(T));       \
      for (int64_t o = 0; o < nout; o++) {                                                              \
        if (o == before) o = after0;                                                                    \
        if (o >= nout) break;                                                                           \
        int64_t src = map[o];                                                                           \
        if (src < 0) continue;                                                                          \
        T *dd = d + src * inner;                                                                        \
        const T *ss = s + o * inner;                                                                    \
        _Pragma("omp simd") for (int64_t j = j0; j < j1; j++) dd[j] += ss[j];                           \
      }                                                                                                 \
    });                                                                                                 \
  }
GRAD_FN(float)
GRAD_FN(double)

int pdk_pad_grad_dim(pd_dtype dt, const void *g, void *dx, int64_t outer, int64_t nout, int64_t nin,
                     int64_t inner, int64_t before, int mode) {
  if (dt != PD_FLOAT32 && dt != PD_FLOAT64) return -1;
  if (outer * nin * inner == 0) return 0;
  int64_t *map = malloc((size_t)(nout > 0 ? nout : 1) * sizeof *map);
  if (!map) return -1;
  for (int64_t o = 0; o < nout; o++) map[o] = pd_pad_src(o, before, nin, mode);
  if (dt == PD_FLOAT32)
    grad_float(g, dx, map, outer, nout, nin, inner, before);
  else
    grad_double(g, dx, map, outer, nout, nin, inner, before);
  free(map);
  return 0;
}
