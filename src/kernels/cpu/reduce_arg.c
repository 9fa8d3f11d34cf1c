/* argmax / argmin over [outer, len, inner] contiguous buffers. */
#include "parallel.h"
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>

#include "reduce.h"

#define GRAIN 32768
#define TILE 2048
#define PD_PRAGMA(x) _Pragma(#x)

/* better(v, b): v replaces the current best b (NaN beats numbers; ties keep
 * the earlier index because the test is strict). */
#define BETTER_MAX(v, b) ((v) > (b) || ((v) != (v) && (b) == (b)))
#define BETTER_MIN(v, b) ((v) < (b) || ((v) != (v) && (b) == (b)))

#define GEN_ARG(sfx, T, BETTER, OPR, CMP)                                                                    \
  /* best of p[0..n): two passes, the first a simd max/min with a NaN flag */                                \
  static void line_##sfx(const T *p, int64_t n, T *bv, int64_t *bi) {                                        \
    T m = p[0];                                                                                              \
    int nan = 0;                                                                                             \
    PD_PRAGMA(omp simd reduction(OPR : m) reduction(| : nan))                                                \
    for (int64_t i = 0; i < n; i++) {                                                                        \
      T v = p[i];                                                                                            \
      m = v CMP m ? v : m;                                                                                   \
      nan |= v != v;                                                                                         \
    }                                                                                                        \
    int64_t k = 0;                                                                                           \
    if (nan) {                                                                                               \
      while (p[k] == p[k]) k++;                                                                              \
    } else {                                                                                                 \
      while (p[k] != m) k++;                                                                                 \
    }                                                                                                        \
    *bv = p[k];                                                                                              \
    *bi = k;                                                                                                 \
  }                                                                                                          \
  /* rows [l0, l1) of a [len, inner] block, columns [k0, k0 + tk): best value                                \
   * and index per column (rows in order, so ties keep the earlier row) */                                   \
  static void rows_##sfx(const T *x, int64_t l0, int64_t l1, int64_t inner, int64_t k0, int64_t tk, T *best, \
                         int64_t *idx) {                                                                     \
    for (int64_t k = 0; k < tk; k++) {                                                                       \
      best[k] = x[l0 * inner + k0 + k];                                                                      \
      idx[k] = l0;                                                                                           \
    }                                                                                                        \
    for (int64_t l = l0 + 1; l < l1; l++) {                                                                  \
      const T *r = x + l * inner + k0;                                                                       \
      _Pragma("omp simd") for (int64_t k = 0; k < tk; k++) {                                                 \
        T v = r[k];                                                                                          \
        int take = BETTER(v, best[k]);                                                                       \
        best[k] = take ? v : best[k];                                                                        \
        idx[k] = take ? l : idx[k];                                                                          \
      }                                                                                                      \
    }                                                                                                        \
  }                                                                                                          \
  static void run_##sfx(const T *x, int64_t outer, int64_t len, int64_t inner, int64_t *res) {               \
    int nt = outer * len * inner < GRAIN ? 1 : pd_loop_threads();                                            \
    if (inner == 1 && outer < 4 * nt && nt > 1) { /* few long lines: split each */                           \
      T pv[64];                                                                                              \
      int64_t pix[64];                                                                                       \
      if (nt > 64) nt = 64;                                                                                  \
      for (int64_t o = 0; o < outer; o++) {                                                                  \
        const T *p = x + o * len;                                                                            \
        int parts = (int)(len < nt ? len : nt);                                                              \
        _Pragma("omp parallel for num_threads(parts) schedule(static)") for (int t = 0; t < parts; t++) {    \
          int64_t j0 = len * t / parts, j1 = len * (t + 1) / parts;                                          \
          line_##sfx(p + j0, j1 - j0, &pv[t], &pix[t]);                                                      \
          pix[t] += j0;                                                                                      \
        }                                                                                                    \
        T b = pv[0];                                                                                         \
        int64_t bi = pix[0];                                                                                 \
        for (int t = 1; t < parts; t++)                                                                      \
          if (BETTER(pv[t], b)) {                                                                            \
            b = pv[t];                                                                                       \
            bi = pix[t];                                                                                     \
          }                                                                                                  \
        res[o] = bi;                                                                                         \
      }                                                                                                      \
      return;                                                                                                \
    }                                                                                                        \
    if (inner == 1) {                                                                                        \
      PD_OMP_FOR_IF(nt > 1, for (int64_t o = 0; o < outer; o++), T b;                                        \
                    line_##sfx(x + o * len, len, &b, &res[o]););                                             \
      return;                                                                                                \
    }                                                                                                        \
    int64_t ntile = (inner + TILE - 1) / TILE, tasks = outer * ntile;                                        \
    if (nt > 1 && tasks < 2 * nt && len >= 8 * nt) {                                                         \
      /* few column tiles: their rows split over the threads, partials combined in row order */              \
      T *pb = malloc(sizeof(T) * TILE * (size_t)nt);                                                         \
      int64_t *pi = malloc(sizeof(int64_t) * TILE * (size_t)nt);                                             \
      if (pb && pi) {                                                                                        \
        for (int64_t t = 0; t < tasks; t++) {                                                                \
          int64_t o = t / ntile, k0 = (t % ntile) * TILE, tk = inner - k0 < TILE ? inner - k0 : TILE;        \
          const T *xo = x + o * len * inner;                                                                 \
          _Pragma("omp parallel for num_threads(nt) schedule(static)") for (int p = 0; p < nt; p++)          \
              rows_##sfx(xo, len *p / nt, len * (p + 1) / nt, inner, k0, tk, pb + p * TILE, pi + p * TILE);  \
          for (int p = 1; p < nt; p++)                                                                       \
            for (int64_t k = 0; k < tk; k++)                                                                 \
              if (BETTER(pb[p * TILE + k], pb[k])) {                                                         \
                pb[k] = pb[p * TILE + k];                                                                    \
                pi[k] = pi[p * TILE + k];                                                                    \
              }                                                                                              \
          for (int64_t k = 0; k < tk; k++) res[o * inner + k0 + k] = pi[k];                                  \
        }                                                                                                    \
        free(pb);                                                                                            \
        free(pi);                                                                                            \
        return;                                                                                              \
      }                                                                                                      \
      free(pb);                                                                                              \
      free(pi);                                                                                              \
    }                                                                                                        \
    PD_OMP_FOR_IF(nt > 1, for (int64_t t = 0; t < tasks; t++), int64_t o = t / ntile,                        \
                  k0 = (t % ntile) * TILE;                                                                   \
                  int64_t tk = inner - k0 < TILE ? inner - k0 : TILE; T best[TILE];                          \
                  rows_##sfx(x + o * len * inner, 0, len, inner, k0, tk, best, res + o * inner + k0););      \
  }

#define GEN_BOTH(sfx, T)                    \
  GEN_ARG(max_##sfx, T, BETTER_MAX, max, >) \
  GEN_ARG(min_##sfx, T, BETTER_MIN, min, <)
GEN_BOTH(f32, float)
GEN_BOTH(f64, double)
GEN_BOTH(u8, uint8_t)
GEN_BOTH(i8, int8_t)
GEN_BOTH(i16, int16_t)
GEN_BOTH(i32, int32_t)
GEN_BOTH(i64, int64_t)

int pdk_reduce_arg(const void *x, pd_dtype xdt, int64_t outer, int64_t len, int64_t inner, bool is_max,
                   void *out, pd_dtype odt) {
  if (odt != PD_INT64 && odt != PD_INT32) return 1;
  int64_t n_out = outer * inner;
  if (n_out == 0) return 0;
  if (len <= 0) return 1;
  /* int32 outputs go through an int64 buffer */
  int64_t *r = odt == PD_INT64 ? (int64_t *)out : (int64_t *)malloc(sizeof(int64_t) * (size_t)n_out);
  if (!r) return 2;
  int bad = 0;
#define CASE(dt, sfx, T)                                 \
  case dt:                                               \
    if (is_max)                                          \
      run_max_##sfx((const T *)x, outer, len, inner, r); \
    else                                                 \
      run_min_##sfx((const T *)x, outer, len, inner, r); \
    break;
  switch (xdt) {
    CASE(PD_FLOAT32, f32, float)
    CASE(PD_FLOAT64, f64, double)
    CASE(PD_BOOL, u8, uint8_t)
    CASE(PD_UINT8, u8, uint8_t)
    CASE(PD_INT8, i8, int8_t)
    CASE(PD_INT16, i16, int16_t)
    CASE(PD_INT32, i32, int32_t)
    CASE(PD_INT64, i64, int64_t)
    default:
      bad = 1;
      break;
  }
#undef CASE
  if (odt == PD_INT32) {
    int32_t *o32 = out;
    for (int64_t i = 0; i < n_out && !bad; i++) o32[i] = (int32_t)r[i];
    free(r);
  }
  return bad;
}
