/* Building blocks of the normalization kernels: sums over a unit-stride
 * span in vectorised blocks (float lanes for float data) whose partial sums
 * are added in double, so that long rows keep double-like accuracy while the
 * inner loops run at full SIMD width. Internal to kernels/cpu/norm*.c. */
#ifndef PADDLEC_KERNELS_NORM_REDUCE_H
#define PADDLEC_KERNELS_NORM_REDUCE_H

#include <math.h>
#include <stdint.h>

#include "parallel.h"

#define PD_NORM_STR_(s) #s
#define PD_NORM_SIMD_SUM(...) _Pragma(PD_NORM_STR_(omp simd reduction(+ : __VA_ARGS__)))
#define PD_NORM_SIMD _Pragma("omp simd")
/* Elements per vectorised block before its sum is moved into double. */
#define PD_NORM_BLOCK 1024

/* Generates, for element type T (suffix sfx):
 *   pd_nsum_sfx(x, n)              sum x
 *   pd_nsq_sfx(x, n, c, &s1)       sum (x - c)^2, and s1 = sum (x - c)
 *   pd_ndot2_sfx(x, w, dy, n, c, &sg, &sgx)
 *        sg = sum g, sgx = sum g (x - c) with g = dy * w (w NULL: g = dy)
 *   pd_nsum2_sfx(x, dy, n, c, &sdy, &sq, &sxy, &s1)
 *        sdy = sum dy, sq = sum (x - c)^2, sxy = sum dy (x - c), s1 = sum (x - c)
 * Centering on a first estimate c of the mean and correcting with s1 (the
 * corrected two-pass algorithm) keeps the variance exact to rounding even
 * when |mean| >> std and the first estimate came from float block sums. */
#define PD_NORM_REDUCERS(sfx, T)                                                                      \
  static inline double pd_nsum_##sfx(const T *x, int64_t n) {                                         \
    double t = 0;                                                                                     \
    for (int64_t i0 = 0; i0 < n; i0 += PD_NORM_BLOCK) {                                               \
      int64_t m = n - i0 < PD_NORM_BLOCK ? n - i0 : PD_NORM_BLOCK;                                    \
      const T *p = x + i0;                                                                            \
      T s = 0;                                                                                        \
      PD_NORM_SIMD_SUM(s) for (int64_t i = 0; i < m; i++) s += p[i];                                  \
      t += (double)s;                                                                                 \
    }                                                                                                 \
    return t;                                                                                         \
  }                                                                                                   \
  static inline double pd_nsq_##sfx(const T *x, int64_t n, T c, double *s1) {                         \
    double t = 0, t1 = 0;                                                                             \
    for (int64_t i0 = 0; i0 < n; i0 += PD_NORM_BLOCK) {                                               \
      int64_t m = n - i0 < PD_NORM_BLOCK ? n - i0 : PD_NORM_BLOCK;                                    \
      const T *p = x + i0;                                                                            \
      T s = 0, u = 0;                                                                                 \
      PD_NORM_SIMD_SUM(s, u) for (int64_t i = 0; i < m; i++) {                                        \
        T d = p[i] - c;                                                                               \
        u += d;                                                                                       \
        s += d * d;                                                                                   \
      }                                                                                               \
      t += (double)s;                                                                                 \
      t1 += (double)u;                                                                                \
    }                                                                                                 \
    *s1 = t1;                                                                                         \
    return t;                                                                                         \
  }                                                                                                   \
  static inline void pd_ndot2_##sfx(const T *x, const T *w, const T *dy, int64_t n, T c, double *sg,  \
                                    double *sgx) {                                                    \
    double tg = 0, tgx = 0;                                                                           \
    for (int64_t i0 = 0; i0 < n; i0 += PD_NORM_BLOCK) {                                               \
      int64_t m = n - i0 < PD_NORM_BLOCK ? n - i0 : PD_NORM_BLOCK;                                    \
      const T *p = x + i0, *q = dy + i0;                                                              \
      T a = 0, b = 0;                                                                                 \
      if (w) {                                                                                        \
        const T *ww = w + i0;                                                                         \
        PD_NORM_SIMD_SUM(a, b) for (int64_t i = 0; i < m; i++) {                                      \
          T g = q[i] * ww[i];                                                                         \
          a += g;                                                                                     \
          b += g * (p[i] - c);                                                                        \
        }                                                                                             \
      } else {                                                                                        \
        PD_NORM_SIMD_SUM(a, b) for (int64_t i = 0; i < m; i++) {                                      \
          a += q[i];                                                                                  \
          b += q[i] * (p[i] - c);                                                                     \
        }                                                                                             \
      }                                                                                               \
      tg += (double)a;                                                                                \
      tgx += (double)b;                                                                               \
    }                                                                                                 \
    *sg = tg;                                                                                         \
    *sgx = tgx;                                                                                       \
  }                                                                                                   \
  static inline void pd_nsum2_##sfx(const T *x, const T *dy, int64_t n, T c, double *sdy, double *sq, \
                                    double *sxy, double *s1) {                                        \
    double t0 = 0, t1 = 0, t2 = 0, t3 = 0;                                                            \
    for (int64_t i0 = 0; i0 < n; i0 += PD_NORM_BLOCK) {                                               \
      int64_t m = n - i0 < PD_NORM_BLOCK ? n - i0 : PD_NORM_BLOCK;                                    \
      const T *p = x + i0, *q = dy + i0;                                                              \
      T a = 0, b = 0, e = 0, u = 0;                                                                   \
      PD_NORM_SIMD_SUM(a, b, e, u) for (int64_t i = 0; i < m; i++) {                                  \
        T d = p[i] - c;                                                                               \
        a += q[i];                                                                                    \
        b += d * d;                                                                                   \
        e += q[i] * d;                                                                                \
        u += d;                                                                                       \
      }                                                                                               \
      t0 += (double)a;                                                                                \
      t1 += (double)b;                                                                                \
      t2 += (double)e;                                                                                \
      t3 += (double)u;                                                                                \
    }                                                                                                 \
    *sdy = t0;                                                                                        \
    *sq = t1;                                                                                         \
    *sxy = t2;                                                                                        \
    *s1 = t3;                                                                                         \
  }

PD_NORM_REDUCERS(f32, float)
PD_NORM_REDUCERS(f64, double)

#endif
