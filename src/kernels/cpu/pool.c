/* Pooling loops. Planes (N * C) run in parallel. Inside a plane, for a
 * fixed row of windows (output d, h) the kernel offsets kw are the outer
 * loop and the output positions ow the inner, unit-trip loop, so the
 * compiler vectorises over the innermost output dim; the visiting order per
 * output is still the input's (d, h, w) order, so max ties go to the first
 * element as in Paddle. Max pooling takes the maxima first (a pure max),
 * then sweeps the windows again in reverse order recording where each
 * element equals its window's maximum, so the first one wins the mask; both
 * sweeps are branch-free and vectorise. Adaptive windows vary in size and
 * use plain loops. */
#include "pool.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "parallel.h"

/* b > 0; no a + b - 1, which overflows for a huge stride */
static inline int64_t ceil_div(int64_t a, int64_t b) { return a >= 0 ? a / b + (a % b != 0) : -((-a) / b); }
static inline int64_t floor_div(int64_t a, int64_t b) {
  return a >= 0 ? a / b : -((-a) / b + ((-a) % b != 0));
}

/* Per-dim window tables, padded to 3 dims. */
typedef struct wins {
  int64_t I[3], O[3], K[3], S[3], P[3], isz, osz;
  int64_t *start[3], *end[3]; /* clipped to [0, I) */
  double *inv[3];             /* 1 / this dim's share of the divisor */
  bool adaptive[3];
  void *mem;
} wins;

static int wins_init(const pd_pool_geom *g, wins *w) {
  w->isz = w->osz = 1;
  int64_t total = 0;
  /* the spatial dims fill the last slots, so the innermost is always slot 2 */
  for (int d = 0; d < 3; d++) {
    int sd = d - (3 - g->nsp);
    bool u = sd >= 0;
    w->I[d] = u ? g->in[sd] : 1;
    w->O[d] = u ? g->out[sd] : 1;
    w->K[d] = u ? g->k[sd] : 1;
    w->S[d] = u ? g->stride[sd] : 1;
    w->P[d] = u ? g->pad[sd] : 0;
    w->adaptive[d] = g->adaptive && u;
    if (g->adaptive) w->K[d] = 1;
    w->isz *= w->I[d];
    w->osz *= w->O[d];
    total += w->O[d];
  }
  w->mem = malloc((size_t)total * (2 * sizeof(int64_t) + sizeof(double)) + 1);
  if (!w->mem) return -1;
  int64_t *ip = w->mem;
  double *dp = (double *)(ip + 2 * total);
  for (int d = 0; d < 3; d++) {
    w->start[d] = ip;
    w->end[d] = ip + w->O[d];
    ip += 2 * w->O[d];
    w->inv[d] = dp;
    dp += w->O[d];
    for (int64_t o = 0; o < w->O[d]; o++) {
      int64_t s, e, cnt;
      if (w->adaptive[d]) {
        s = floor_div(o * w->I[d], w->O[d]);
        e = ceil_div((o + 1) * w->I[d], w->O[d]);
        cnt = e - s;
      } else {
        s = o * w->S[d] - w->P[d];
        e = s + w->K[d] < w->I[d] + w->P[d] ? s + w->K[d] : w->I[d] + w->P[d];
        cnt = e - s;
        if (s < 0) s = 0;
        if (e > w->I[d]) e = w->I[d];
        if (g->exclusive) cnt = e - s;
      }
      if (e < s) e = s;
      w->start[d][o] = s;
      w->end[d][o] = e;
      w->inv[d][o] = 1.0 / (double)cnt;
    }
  }
  return 0;
}

/* Output positions o in [lo, hi) whose window reads input o * s + off inside [0, n). */
static inline void valid_range(int64_t nout, int64_t nin, int64_t s, int64_t off, int64_t *lo, int64_t *hi) {
  int64_t l = ceil_div(-off, s), h = ceil_div(nin - off, s);
  if (l < 0) l = 0;
  if (l > nout) l = nout;
  if (h > nout) h = nout;
  if (h < l) h = l;
  *lo = l;
  *hi = h;
}

#define POOL_GRAIN(w) (PD_GRAIN / ((w).osz * (g->adaptive ? 1 : (w).K[0] * (w).K[1] * (w).K[2]) + 1) + 1)

#define DEFINE_POOL(SFX, T)                                                                                \
  int pdk_max_pool_##SFX(const pd_pool_geom *g, const T *x, T *y, int32_t *mask) {                         \
    wins w;                                                                                                \
    if (wins_init(g, &w) != 0) return -1;                                                                  \
    PD_PARALLEL_FOR(p, g->planes, POOL_GRAIN(w), {                                                         \
      const T *xp = x + p * w.isz;                                                                         \
      T *yp = y + p * w.osz;                                                                               \
      int32_t *mp = mask + p * w.osz;                                                                      \
      for (int64_t od = 0; od < w.O[0]; od++)                                                              \
        for (int64_t oh = 0; oh < w.O[1]; oh++) {                                                          \
          T *yr = yp + (od * w.O[1] + oh) * w.O[2];                                                        \
          int32_t *mr = mp + (od * w.O[1] + oh) * w.O[2];                                                  \
          for (int64_t ow = 0; ow < w.O[2]; ow++) {                                                        \
            yr[ow] = (T)-FLT_MAX;                                                                          \
            mr[ow] = -1;                                                                                   \
          }                                                                                                \
          for (int64_t id = w.start[0][od]; w.isz > 0 && id < w.end[0][od]; id++)                          \
            for (int64_t ih = w.start[1][oh]; ih < w.end[1][oh]; ih++) {                                   \
              const T *xr = xp + (id * w.I[1] + ih) * w.I[2];                                              \
              int32_t base = (int32_t)((id * w.I[1] + ih) * w.I[2]);                                       \
              if (g->adaptive) {                                                                           \
                for (int64_t ow = 0; ow < w.O[2]; ow++)                                                    \
                  for (int64_t iw = w.start[2][ow]; iw < w.end[2][ow]; iw++)                               \
                    if (xr[iw] > yr[ow]) {                                                                 \
                      yr[ow] = xr[iw];                                                                     \
                      mr[ow] = base + (int32_t)iw;                                                         \
                    }                                                                                      \
                continue;                                                                                  \
              }                                                                                            \
              int64_t s = w.S[2];                                                                          \
              for (int64_t kw = 0; kw < w.K[2]; kw++) {                                                    \
                int64_t off = kw - w.P[2], lo, hi;                                                         \
                valid_range(w.O[2], w.I[2], s, off, &lo, &hi);                                             \
                for (int64_t ow = lo; ow < hi; ow++) {                                                     \
                  T v = xr[ow * s + off];                                                                  \
                  yr[ow] = v > yr[ow] ? v : yr[ow];                                                        \
                }                                                                                          \
              }                                                                                            \
            }                                                                                              \
          if (g->adaptive) continue;                                                                       \
          /* the mask: the first element of each window equal to its maximum; a                            \
           * second vectorised sweep in reverse order, so the earliest match wins */                       \
          for (int64_t id = w.end[0][od] - 1; w.isz > 0 && id >= w.start[0][od]; id--)                     \
            for (int64_t ih = w.end[1][oh] - 1; ih >= w.start[1][oh]; ih--) {                              \
              const T *xr = xp + (id * w.I[1] + ih) * w.I[2];                                              \
              int32_t base = (int32_t)((id * w.I[1] + ih) * w.I[2]);                                       \
              int64_t s = w.S[2];                                                                          \
              for (int64_t kw = w.K[2] - 1; kw >= 0; kw--) {                                               \
                int64_t off = kw - w.P[2], lo, hi;                                                         \
                valid_range(w.O[2], w.I[2], s, off, &lo, &hi);                                             \
                for (int64_t ow = lo; ow < hi; ow++) {                                                     \
                  int32_t pos = base + (int32_t)(ow * s + off);                                            \
                  mr[ow] = xr[ow * s + off] == yr[ow] ? pos : mr[ow];                                      \
                }                                                                                          \
              }                                                                                            \
            }                                                                                              \
          for (int64_t ow = 0; ow < w.O[2]; ow++) mr[ow] = yr[ow] > (T)-FLT_MAX ? mr[ow] : -1;             \
        }                                                                                                  \
    });                                                                                                    \
    free(w.mem);                                                                                           \
    return 0;                                                                                              \
  }                                                                                                        \
  int pdk_avg_pool_##SFX(const pd_pool_geom *g, const T *x, T *y) {                                        \
    wins w;                                                                                                \
    if (wins_init(g, &w) != 0) return -1;                                                                  \
    PD_PARALLEL_FOR(p, g->planes, POOL_GRAIN(w), {                                                         \
      const T *xp = x + p * w.isz;                                                                         \
      T *yp = y + p * w.osz;                                                                               \
      for (int64_t od = 0; od < w.O[0]; od++)                                                              \
        for (int64_t oh = 0; oh < w.O[1]; oh++) {                                                          \
          T *yr = yp + (od * w.O[1] + oh) * w.O[2];                                                        \
          memset(yr, 0, sizeof(T) * (size_t)w.O[2]);                                                       \
          for (int64_t id = w.start[0][od]; w.isz > 0 && id < w.end[0][od]; id++)                          \
            for (int64_t ih = w.start[1][oh]; ih < w.end[1][oh]; ih++) {                                   \
              const T *xr = xp + (id * w.I[1] + ih) * w.I[2];                                              \
              if (g->adaptive) {                                                                           \
                for (int64_t ow = 0; ow < w.O[2]; ow++) {                                                  \
                  T acc = 0;                                                                               \
                  for (int64_t iw = w.start[2][ow]; iw < w.end[2][ow]; iw++) acc += xr[iw];                \
                  yr[ow] += acc;                                                                           \
                }                                                                                          \
                continue;                                                                                  \
              }                                                                                            \
              int64_t s = w.S[2];                                                                          \
              for (int64_t kw = 0; kw < w.K[2]; kw++) {                                                    \
                int64_t off = kw - w.P[2], lo, hi;                                                         \
                valid_range(w.O[2], w.I[2], s, off, &lo, &hi);                                             \
                for (int64_t ow = lo; ow < hi; ow++) yr[ow] += xr[ow * s + off];                           \
              }                                                                                            \
            }                                                                                              \
          T f = (T)(w.inv[0][od] * w.inv[1][oh]);                                                          \
          const double *iw_ = w.inv[2];                                                                    \
          for (int64_t ow = 0; ow < w.O[2]; ow++) yr[ow] *= f * (T)iw_[ow];                                \
        }                                                                                                  \
    });                                                                                                    \
    free(w.mem);                                                                                           \
    return 0;                                                                                              \
  }                                                                                                        \
  int pdk_avg_pool_grad_##SFX(const pd_pool_geom *g, const T *dy, T *dx) {                                 \
    wins w;                                                                                                \
    if (wins_init(g, &w) != 0) return -1;                                                                  \
    PD_PARALLEL_FOR(p, g->planes, POOL_GRAIN(w), {                                                         \
      T *xp = dx + p * w.isz;                                                                              \
      const T *yp = dy + p * w.osz;                                                                        \
      memset(xp, 0, sizeof(T) * (size_t)w.isz);                                                            \
      for (int64_t od = 0; od < w.O[0]; od++)                                                              \
        for (int64_t oh = 0; oh < w.O[1]; oh++) {                                                          \
          const T *yr = yp + (od * w.O[1] + oh) * w.O[2];                                                  \
          T f = (T)(w.inv[0][od] * w.inv[1][oh]);                                                          \
          const double *iv = w.inv[2];                                                                     \
          for (int64_t id = w.start[0][od]; w.isz > 0 && id < w.end[0][od]; id++)                          \
            for (int64_t ih = w.start[1][oh]; ih < w.end[1][oh]; ih++) {                                   \
              T *xr = xp + (id * w.I[1] + ih) * w.I[2];                                                    \
              if (g->adaptive) {                                                                           \
                for (int64_t ow = 0; ow < w.O[2]; ow++) {                                                  \
                  T v = yr[ow] * f * (T)iv[ow];                                                            \
                  for (int64_t iw = w.start[2][ow]; iw < w.end[2][ow]; iw++) xr[iw] += v;                  \
                }                                                                                          \
                continue;                                                                                  \
              }                                                                                            \
              int64_t s = w.S[2];                                                                          \
              for (int64_t kw = 0; kw < w.K[2]; kw++) {                                                    \
                int64_t off = kw - w.P[2], lo, hi;                                                         \
                valid_range(w.O[2], w.I[2], s, off, &lo, &hi);                                             \
                for (int64_t ow = lo; ow < hi; ow++) xr[ow * s + off] += yr[ow] * f * (T)iv[ow];           \
              }                                                                                            \
            }                                                                                              \
        }                                                                                                  \
    });                                                                                                    \
    free(w.mem);                                                                                           \
    return 0;                                                                                              \
  }                                                                                                        \
  void pdk_max_pool_scatter_##SFX(const pd_pool_geom *g, const void *mask, bool mask64, const T *dy,       \
                                  T *dx) {                                                                 \
    int64_t isz = 1, osz = 1;                                                                              \
    for (int d = 0; d < g->nsp; d++) isz *= g->in[d], osz *= g->out[d];                                    \
    PD_PARALLEL_FOR(p, g->planes, PD_GRAIN / (isz + osz + 1) + 1, {                                        \
      T *xp = dx + p * isz;                                                                                \
      const T *yp = dy + p * osz;                                                                          \
      memset(xp, 0, sizeof(T) * (size_t)isz);                                                              \
      for (int64_t o = 0; o < osz; o++) {                                                                  \
        int64_t m = mask64 ? ((const int64_t *)mask)[p * osz + o] : ((const int32_t *)mask)[p * osz + o];  \
        if (m >= 0 && m < isz) xp[m] += yp[o];                                                             \
      }                                                                                                    \
    });                                                                                                    \
  }                                                                                                        \
  void pdk_max_pool_gather_##SFX(const pd_pool_geom *g, const void *mask, bool mask64, const T *x, T *y) { \
    int64_t isz = 1, osz = 1;                                                                              \
    for (int d = 0; d < g->nsp; d++) isz *= g->in[d], osz *= g->out[d];                                    \
    PD_PARALLEL_FOR(p, g->planes, PD_GRAIN / (osz + 1) + 1, {                                              \
      const T *xp = x + p * isz;                                                                           \
      T *yp = y + p * osz;                                                                                 \
      for (int64_t o = 0; o < osz; o++) {                                                                  \
        int64_t m = mask64 ? ((const int64_t *)mask)[p * osz + o] : ((const int32_t *)mask)[p * osz + o];  \
        yp[o] = m >= 0 && m < isz ? xp[m] : (T)0;                                                          \
      }                                                                                                    \
    });                                                                                                    \
  }

DEFINE_POOL(f32, float)
DEFINE_POOL(f64, double)
