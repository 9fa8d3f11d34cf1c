/* Maxout kernels (see maxout.h). Each (o, c) row is independent; rows are
 * split over threads when the input holds PD_GRAIN elements or more. With
 * inner > 1 the loops run along j (unit stride, vectorised); with
 * inner == 1 (channels last) each output reduces groups contiguous inputs. */
#include "maxout.h"

#include "parallel.h"
#include "vmath.h"

#define MAXOUT_IMPL(sfx, T)                                                                         \
  void pdk_maxout_##sfx(const pd_maxout_geom *g, const T *x, T *y) {                                \
    const int64_t rows = g->outer * g->cout, G = g->groups, in = g->inner;                          \
    const int par = rows > 1 && rows * G * in >= PD_GRAIN;                                          \
    if (in == 1) {                                                                                  \
      PD_PARALLEL_FOR_IF(par, r, rows, {                                                            \
        const T *xr = x + r * G;                                                                    \
        T m = xr[0];                                                                                \
        for (int64_t k = 1; k < G; k++) m = m > xr[k] ? m : xr[k];                                  \
        y[r] = m;                                                                                   \
      });                                                                                           \
      return;                                                                                       \
    }                                                                                               \
    PD_PARALLEL_FOR_IF(par, r, rows, {                                                              \
      const T *xr = x + r * G * in;                                                                 \
      T *yr = y + r * in;                                                                           \
      PD_SIMD for (int64_t j = 0; j < in; j++) yr[j] = xr[j];                                       \
      for (int64_t k = 1; k < G; k++) {                                                             \
        const T *xk = xr + k * in;                                                                  \
        PD_SIMD for (int64_t j = 0; j < in; j++) yr[j] = yr[j] > xk[j] ? yr[j] : xk[j];             \
      }                                                                                             \
    });                                                                                             \
  }                                                                                                 \
  void pdk_maxout_grad_##sfx(const pd_maxout_geom *g, const T *x, const T *y, const T *dy, T *dx) { \
    const int64_t rows = g->outer * g->cout, G = g->groups, in = g->inner;                          \
    const int par = rows > 1 && rows * G * in >= PD_GRAIN;                                          \
    PD_PARALLEL_FOR_IF(par, r, rows, {                                                              \
      const T *xr = x + r * G * in, *yr = y + r * in, *gr = dy + r * in;                            \
      T *dr = dx + r * G * in;                                                                      \
      for (int64_t j = 0; j < in; j++) {                                                            \
        int64_t hit = G;                                                                            \
        for (int64_t k = 0; k < G; k++)                                                             \
          if (xr[k * in + j] == yr[j]) {                                                            \
            hit = k;                                                                                \
            break;                                                                                  \
          }                                                                                         \
        for (int64_t k = 0; k < G; k++) dr[k * in + j] = k == hit ? gr[j] : (T)0;                   \
      }                                                                                             \
    });                                                                                             \
  }

MAXOUT_IMPL(f32, float)
MAXOUT_IMPL(f64, double)
