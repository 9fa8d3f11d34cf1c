/* Fused softmax cross entropy and negative log likelihood kernels (see
 * loss.h). A sample is a row of n classes (inner == 1) or a column of a
 * [n, inner] slab; columns are processed in blocks of BLOCK so that the
 * running max and sums stay on the stack and the inner loops run over unit
 * strides. */
#include <math.h>
#include <string.h>

#include "loss.h"
#include "parallel.h"
#include "vmath.h"

#define BLOCK 256
#define PD_STR_(s) #s
#define SIMD_REDUCE(...) _Pragma(PD_STR_(omp simd reduction(__VA_ARGS__)))

/* log that maps +-inf to +-1e20, as Paddle's TolerableValue */
static inline double tol_log(double p) {
  double v = log(p);
  if (v == -INFINITY) return -1e20;
  if (v == INFINITY) return 1e20;
  return v;
}

#define DEFINE_CE(sfx, T, EXP, LOG)                                                                          \
  /* one row of n contiguous classes, with softmax */                                                        \
  static PD_NOINLINE void ce_row_fwd_##sfx(const T *x, int64_t n, const int64_t *lp, const T *y, int64_t ig, \
                                           T *loss, T *lse) {                                                \
    T m = -INFINITY;                                                                                         \
    SIMD_REDUCE(max : m)                                                                                     \
    for (int64_t j = 0; j < n; j++) m = x[j] > m ? x[j] : m;                                                 \
    T s = 0;                                                                                                 \
    if (lp) {                                                                                                \
      SIMD_REDUCE(+ : s)                                                                                     \
      for (int64_t j = 0; j < n; j++) s += EXP(x[j] - m);                                                    \
      T ls = LOG(s);                                                                                         \
      *lse = m + ls;                                                                                         \
      *loss = *lp == ig ? (T)0 : ls - (x[*lp] - m);                                                          \
    } else {                                                                                                 \
      T sy = 0, syx = 0;                                                                                     \
      SIMD_REDUCE(+ : s, sy, syx)                                                                            \
      for (int64_t j = 0; j < n; j++) {                                                                      \
        T d = x[j] - m;                                                                                      \
        s += EXP(d);                                                                                         \
        sy += y[j];                                                                                          \
        syx += y[j] * d;                                                                                     \
      }                                                                                                      \
      T ls = LOG(s);                                                                                         \
      *lse = m + ls;                                                                                         \
      *loss = sy * ls - syx;                                                                                 \
    }                                                                                                        \
  }                                                                                                          \
  /* columns [k0, k0 + w) of the slab at x (sample index base + k) */                                        \
  static void ce_block_fwd_##sfx(const T *x, int64_t n, int64_t inner, int64_t w, const int64_t *lab,        \
                                 const T *y, int64_t ig, T *loss, T *lse) {                                  \
    T m[BLOCK], s[BLOCK], sy[BLOCK], syx[BLOCK];                                                             \
    for (int64_t k = 0; k < w; k++) m[k] = -INFINITY, s[k] = 0, sy[k] = 0, syx[k] = 0;                       \
    for (int64_t c = 0; c < n; c++) {                                                                        \
      const T *xr = x + c * inner;                                                                           \
      PD_SIMD for (int64_t k = 0; k < w; k++) m[k] = xr[k] > m[k] ? xr[k] : m[k];                            \
    }                                                                                                        \
    for (int64_t c = 0; c < n; c++) {                                                                        \
      const T *xr = x + c * inner;                                                                           \
      if (lab) {                                                                                             \
        PD_SIMD for (int64_t k = 0; k < w; k++) s[k] += EXP(xr[k] - m[k]);                                   \
      } else {                                                                                               \
        const T *yr = y + c * inner;                                                                         \
        PD_SIMD for (int64_t k = 0; k < w; k++) {                                                            \
          T d = xr[k] - m[k];                                                                                \
          s[k] += EXP(d);                                                                                    \
          sy[k] += yr[k];                                                                                    \
          syx[k] += yr[k] * d;                                                                               \
        }                                                                                                    \
      }                                                                                                      \
    }                                                                                                        \
    for (int64_t k = 0; k < w; k++) {                                                                        \
      T ls = LOG(s[k]);                                                                                      \
      lse[k] = m[k] + ls;                                                                                    \
      if (lab)                                                                                               \
        loss[k] = lab[k] == ig ? (T)0 : ls - (x[lab[k] * inner + k] - m[k]);                                 \
      else                                                                                                   \
        loss[k] = sy[k] * ls - syx[k];                                                                       \
    }                                                                                                        \
  }                                                                                                          \
  /* without softmax: generic strided loop over one sample */                                                \
  static void ce_prob_fwd_##sfx(const T *x, int64_t n, int64_t inner, const int64_t *lp, const T *y,         \
                                int64_t ig, T *loss, T *lse) {                                               \
    *lse = 0;                                                                                                \
    if (lp) {                                                                                                \
      *loss = *lp == ig ? (T)0 : (T)-tol_log((double)x[*lp * inner]);                                        \
      return;                                                                                                \
    }                                                                                                        \
    double acc = 0;                                                                                          \
    for (int64_t c = 0; c < n; c++) acc -= (double)y[c * inner] * tol_log((double)x[c * inner]);             \
    *loss = (T)acc;                                                                                          \
  }                                                                                                          \
  void pdk_ce_forward_##sfx(const pd_ce_geom *g, const T *x, const int64_t *label, const T *y, int64_t ig,   \
                            bool use_softmax, T *loss, T *lse) {                                             \
    int64_t outer = g->outer, n = g->n, inner = g->inner, total = outer * n * inner;                         \
    if (outer == 0 || inner == 0) return;                                                                    \
    if (n == 0) {                                                                                            \
      for (int64_t i = 0; i < outer * inner; i++) loss[i] = 0, lse[i] = use_softmax ? -INFINITY : 0;         \
      return;                                                                                                \
    }                                                                                                        \
    if (!use_softmax) {                                                                                      \
      int64_t ns = outer * inner;                                                                            \
      PD_PARALLEL_FOR_IF(total >= PD_GRAIN && ns > 1, i, ns, int64_t o = i / inner, k = i % inner;           \
                         const T *xs = x + o * n * inner + k;                                                \
                         ce_prob_fwd_##sfx(xs, n, inner, label ? label + i : NULL,                           \
                                           y ? y + o * n * inner + k : NULL, ig, loss + i, lse + i););       \
      return;                                                                                                \
    }                                                                                                        \
    if (inner == 1) {                                                                                        \
      PD_PARALLEL_FOR_IF(total >= PD_GRAIN && outer > 1, r, outer,                                           \
                         ce_row_fwd_##sfx(x + r * n, n, label ? label + r : NULL, y ? y + r * n : NULL, ig,  \
                                          loss + r, lse + r););                                              \
      return;                                                                                                \
    }                                                                                                        \
    int64_t nb = (inner + BLOCK - 1) / BLOCK, tasks = outer * nb;                                            \
    PD_PARALLEL_FOR_IF(total >= PD_GRAIN && tasks > 1, t, tasks, int64_t o = t / nb, k0 = (t % nb) * BLOCK;  \
                       int64_t w = inner - k0 < BLOCK ? inner - k0 : BLOCK; int64_t base = o * inner + k0;   \
                       int64_t xo = o * n * inner + k0;                                                      \
                       ce_block_fwd_##sfx(x + xo, n, inner, w, label ? label + base : NULL,                  \
                                          y ? y + xo : NULL, ig, loss + base, lse + base););                 \
  }                                                                                                          \
                                                                                                             \
  static PD_NOINLINE void ce_row_bwd_##sfx(const T *x, int64_t n, const int64_t *lp, const T *y, T lse,      \
                                           T gl, int64_t ig, T *dx) {                                        \
    if (lp) {                                                                                                \
      T c = *lp == ig ? (T)0 : gl;                                                                           \
      PD_SIMD for (int64_t j = 0; j < n; j++) dx[j] = c * EXP(x[j] - lse);                                   \
      if (*lp != ig) dx[*lp] -= c;                                                                           \
    } else {                                                                                                 \
      T sy = 0;                                                                                              \
      SIMD_REDUCE(+ : sy)                                                                                    \
      for (int64_t j = 0; j < n; j++) sy += y[j];                                                            \
      T c = gl * sy;                                                                                         \
      PD_SIMD for (int64_t j = 0; j < n; j++) dx[j] = c * EXP(x[j] - lse) - gl * y[j];                       \
    }                                                                                                        \
  }                                                                                                          \
  static void ce_block_bwd_##sfx(const T *x, int64_t n, int64_t inner, int64_t w, const int64_t *lab,        \
                                 const T *y, const T *lse, const T *gl, int64_t ig, T *dx) {                 \
    T c[BLOCK], gg[BLOCK];                                                                                   \
    for (int64_t k = 0; k < w; k++) gg[k] = lab && lab[k] == ig ? (T)0 : gl[k], c[k] = 0;                    \
    if (!lab) {                                                                                              \
      for (int64_t j = 0; j < n; j++) {                                                                      \
        const T *yr = y + j * inner;                                                                         \
        PD_SIMD for (int64_t k = 0; k < w; k++) c[k] += yr[k];                                               \
      }                                                                                                      \
      for (int64_t k = 0; k < w; k++) c[k] *= gg[k];                                                         \
    } else {                                                                                                 \
      for (int64_t k = 0; k < w; k++) c[k] = gg[k];                                                          \
    }                                                                                                        \
    for (int64_t j = 0; j < n; j++) {                                                                        \
      const T *xr = x + j * inner;                                                                           \
      T *dr = dx + j * inner;                                                                                \
      if (lab) {                                                                                             \
        PD_SIMD for (int64_t k = 0; k < w; k++) dr[k] = c[k] * EXP(xr[k] - lse[k]);                          \
      } else {                                                                                               \
        const T *yr = y + j * inner;                                                                         \
        PD_SIMD for (int64_t k = 0; k < w; k++) dr[k] = c[k] * EXP(xr[k] - lse[k]) - gg[k] * yr[k];          \
      }                                                                                                      \
    }                                                                                                        \
    if (lab)                                                                                                 \
      for (int64_t k = 0; k < w; k++)                                                                        \
        if (lab[k] != ig) dx[lab[k] * inner + k] -= gg[k];                                                   \
  }                                                                                                          \
  static void ce_prob_bwd_##sfx(const T *x, int64_t n, int64_t inner, const int64_t *lp, const T *y, T gl,   \
                                int64_t ig, T *dx) {                                                         \
    if (lp) {                                                                                                \
      for (int64_t c = 0; c < n; c++) dx[c * inner] = 0;                                                     \
      if (*lp != ig) dx[*lp * inner] = -gl / x[*lp * inner];                                                 \
      return;                                                                                                \
    }                                                                                                        \
    for (int64_t c = 0; c < n; c++) dx[c * inner] = -gl * y[c * inner] / x[c * inner];                       \
  }                                                                                                          \
  void pdk_ce_backward_##sfx(const pd_ce_geom *g, const T *x, const int64_t *label, const T *y,              \
                             const T *lse, const T *gl, int64_t ig, bool use_softmax, T *dx) {               \
    int64_t outer = g->outer, n = g->n, inner = g->inner, total = outer * n * inner;                         \
    if (total == 0) return;                                                                                  \
    if (!use_softmax) {                                                                                      \
      int64_t ns = outer * inner;                                                                            \
      PD_PARALLEL_FOR_IF(total >= PD_GRAIN && ns > 1, i, ns, int64_t o = i / inner, k = i % inner;           \
                         int64_t xo = o * n * inner + k;                                                     \
                         ce_prob_bwd_##sfx(x + xo, n, inner, label ? label + i : NULL, y ? y + xo : NULL,    \
                                           gl[i], ig, dx + xo););                                            \
      return;                                                                                                \
    }                                                                                                        \
    if (inner == 1) {                                                                                        \
      PD_PARALLEL_FOR_IF(total >= PD_GRAIN && outer > 1, r, outer,                                           \
                         ce_row_bwd_##sfx(x + r * n, n, label ? label + r : NULL, y ? y + r * n : NULL,      \
                                          lse[r], gl[r], ig, dx + r * n););                                  \
      return;                                                                                                \
    }                                                                                                        \
    int64_t nb = (inner + BLOCK - 1) / BLOCK, tasks = outer * nb;                                            \
    PD_PARALLEL_FOR_IF(total >= PD_GRAIN && tasks > 1, t, tasks, int64_t o = t / nb, k0 = (t % nb) * BLOCK;  \
                       int64_t w = inner - k0 < BLOCK ? inner - k0 : BLOCK; int64_t base = o * inner + k0;   \
                       int64_t xo = o * n * inner + k0;                                                      \
                       ce_block_bwd_##sfx(x + xo, n, inner, w, label ? label + base : NULL,                  \
                                          y ? y + xo : NULL, lse + base, gl + base, ig, dx + xo););          \
  }                                                                                                          \
                                                                                                             \
  void pdk_nll_forward_##sfx(const pd_ce_geom *g, const T *x, const int64_t *label, const double *w,         \
                             int64_t ig, T *out, double *sum, double *total) {                               \
    int64_t n = g->n, inner = g->inner, ns = g->outer * inner;                                               \
    double acc = 0, tw = 0;                                                                                  \
    for (int64_t i = 0; i < ns; i++) {                                                                       \
      int64_t l = label[i];                                                                                  \
      if (l == ig) {                                                                                         \
        if (out) out[i] = 0;                                                                                 \
        continue;                                                                                            \
      }                                                                                                      \
      int64_t o = i / inner, k = i % inner;                                                                  \
      double wl = w ? w[l] : 1.0;                                                                            \
      double v = -(double)x[(o * n + l) * inner + k] * wl;                                                   \
      if (out) out[i] = (T)v;                                                                                \
      acc += v;                                                                                              \
      tw += wl;                                                                                              \
    }                                                                                                        \
    *sum = acc;                                                                                              \
    *total = tw;                                                                                             \
  }                                                                                                          \
  void pdk_nll_backward_##sfx(const pd_ce_geom *g, const int64_t *label, const double *w, int64_t ig,        \
                              const T *gl, bool per_sample, double scale, T *dx) {                           \
    int64_t n = g->n, inner = g->inner, ns = g->outer * inner;                                               \
    memset(dx, 0, sizeof(T) * (size_t)(ns * n));                                                             \
    for (int64_t i = 0; i < ns; i++) {                                                                       \
      int64_t l = label[i];                                                                                  \
      if (l == ig) continue;                                                                                 \
      int64_t o = i / inner, k = i % inner;                                                                  \
      double wl = w ? w[l] : 1.0;                                                                            \
      dx[(o * n + l) * inner + k] = (T)(-wl * (double)gl[per_sample ? i : 0] * scale);                       \
    }                                                                                                        \
  }

DEFINE_CE(f32, float, pd_vexpf, logf)
DEFINE_CE(f64, double, exp, log)
