/* Row softmax kernels (see softmax.h). */
#include "parallel.h"
#include "softmax.h"

#include <math.h>

#include "vmath.h"

/* Columns of a block when inner > 1: the running max and sum of one block
 * live on the stack. */
#define BLOCK 256

#define DEFINE_SOFTMAX(sfx, T, EXP, LOG)                                                                     \
  static PD_NOINLINE void row_##sfx(const T *x, T *y, int64_t n, bool lg) {                                  \
    T m = -INFINITY;                                                                                         \
    PD_SIMD_REDUCE(max : m)                                                                                  \
    for (int64_t j = 0; j < n; j++) m = x[j] > m ? x[j] : m;                                                 \
    T s = 0;                                                                                                 \
    if (lg) {                                                                                                \
      PD_SIMD_REDUCE(+ : s)                                                                                  \
      for (int64_t j = 0; j < n; j++) s += EXP(x[j] - m);                                                    \
      T c = m + LOG(s);                                                                                      \
      PD_SIMD for (int64_t j = 0; j < n; j++) y[j] = x[j] - c;                                               \
    } else {                                                                                                 \
      PD_SIMD_REDUCE(+ : s)                                                                                  \
      for (int64_t j = 0; j < n; j++) {                                                                      \
        T e = EXP(x[j] - m);                                                                                 \
        y[j] = e;                                                                                            \
        s += e;                                                                                              \
      }                                                                                                      \
      T r = (T)1 / s;                                                                                        \
      PD_SIMD for (int64_t j = 0; j < n; j++) y[j] *= r;                                                     \
    }                                                                                                        \
  }                                                                                                          \
  /* columns [k0, k0 + w) of one [n, inner] slab */                                                          \
  static void block_##sfx(const T *x, T *y, int64_t n, int64_t inner, int64_t w, bool lg) {                  \
    T m[BLOCK], s[BLOCK];                                                                                    \
    for (int64_t k = 0; k < w; k++) m[k] = -INFINITY, s[k] = 0;                                              \
    for (int64_t j = 0; j < n; j++) {                                                                        \
      const T *xr = x + j * inner;                                                                           \
      PD_SIMD for (int64_t k = 0; k < w; k++) m[k] = xr[k] > m[k] ? xr[k] : m[k];                            \
    }                                                                                                        \
    for (int64_t j = 0; j < n; j++) {                                                                        \
      const T *xr = x + j * inner;                                                                           \
      T *yr = y + j * inner;                                                                                 \
      if (lg) {                                                                                              \
        PD_SIMD for (int64_t k = 0; k < w; k++) s[k] += EXP(xr[k] - m[k]);                                   \
      } else {                                                                                               \
        PD_SIMD for (int64_t k = 0; k < w; k++) {                                                            \
          T e = EXP(xr[k] - m[k]);                                                                           \
          yr[k] = e;                                                                                         \
          s[k] += e;                                                                                         \
        }                                                                                                    \
      }                                                                                                      \
    }                                                                                                        \
    for (int64_t k = 0; k < w; k++) s[k] = lg ? m[k] + LOG(s[k]) : (T)1 / s[k];                              \
    for (int64_t j = 0; j < n; j++) {                                                                        \
      const T *xr = x + j * inner;                                                                           \
      T *yr = y + j * inner;                                                                                 \
      if (lg) {                                                                                              \
        PD_SIMD for (int64_t k = 0; k < w; k++) yr[k] = xr[k] - s[k];                                        \
      } else {                                                                                               \
        PD_SIMD for (int64_t k = 0; k < w; k++) yr[k] *= s[k];                                               \
      }                                                                                                      \
    }                                                                                                        \
  }                                                                                                          \
  void pdk_softmax_##sfx(const T *x, T *y, int64_t outer, int64_t n, int64_t inner, bool lg) {               \
    if (outer == 0 || n == 0 || inner == 0) return;                                                          \
    int64_t total = outer * n * inner;                                                                       \
    if (inner == 1) {                                                                                        \
      PD_OMP_FOR_IF(total > PD_EW_GRAIN && outer > 1, for (int64_t r = 0; r < outer; r++),                   \
                    row_##sfx(x + r * n, y + r * n, n, lg););                                                \
      return;                                                                                                \
    }                                                                                                        \
    int64_t nb = (inner + BLOCK - 1) / BLOCK, tasks = outer * nb;                                            \
    PD_OMP_FOR_IF(total > PD_EW_GRAIN && tasks > 1, for (int64_t t = 0; t < tasks; t++), int64_t o = t / nb, \
                  k0 = (t % nb) * BLOCK;                                                                     \
                  int64_t w = inner - k0 < BLOCK ? inner - k0 : BLOCK;                                       \
                  block_##sfx(x + o * n * inner + k0, y + o * n * inner + k0, n, inner, w, lg););            \
  }

#define PD_SIMD_REDUCE(clause) _Pragma(PD_STR(omp simd reduction(clause)))
#define PD_STR(s) #s

DEFINE_SOFTMAX(f32, float, pd_vexpf, logf)
DEFINE_SOFTMAX(f64, double, exp, log)
