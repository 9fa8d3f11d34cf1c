/* Row normalizations (layer norm, rms norm) and group / instance norm: the
 * statistics of one row live in cache, so forward reads x once from memory
 * and backward reads x and dy once. Parallel over rows. See norm.h. */
#include <stdlib.h>
#include <string.h>

#include "norm.h"
#include "norm_reduce.h"

/* Rows accumulated into the float partials of dw / db before they are added
 * to the double totals. */
#define FLUSH_ROWS 64
/* Backward: dw / db are summed over the rows in at most this many chunks of
 * rows, fixed by the shape (never by the thread count), whose totals are
 * added in chunk order: the same bits on any number of threads. */
#define MAX_BWD_CHUNKS 16

/* Threads worth using for `work` elements of `tasks` independent tasks. */
static int64_t task_split(int64_t work, int64_t tasks) {
  if (work < PD_GRAIN || tasks < 2) return 1;
  int64_t t = pd_loop_threads();
  return t < tasks ? t : tasks;
}

/* Chunks of rows of the backward: one for small work, else one per
 * FLUSH_ROWS rows up to MAX_BWD_CHUNKS. */
static int64_t bwd_chunks(int64_t rows, int64_t n) {
  if (rows * n < PD_GRAIN) return 1;
  int64_t c = (rows + FLUSH_ROWS - 1) / FLUSH_ROWS;
  return c < MAX_BWD_CHUNKS ? c : MAX_BWD_CHUNKS;
}

#define DEFINE_ROW_NORM(sfx, T)                                                                              \
  /* mean (0 when !centered) and 1/sqrt(var + eps) of one row */                                             \
  static inline void row_stats_##sfx(const T *x, int64_t n, double eps, bool centered, T *mean, T *rstd) {   \
    double s1, var;                                                                                          \
    if (centered) { /* corrected two-pass: center on a first estimate, correct with sum (x - c) */           \
      T c = (T)(pd_nsum_##sfx(x, n) / (double)n);                                                            \
      double q = pd_nsq_##sfx(x, n, c, &s1), d = s1 / (double)n;                                             \
      *mean = (T)((double)c + d);                                                                            \
      var = q / (double)n - d * d;                                                                           \
    } else {                                                                                                 \
      var = pd_nsq_##sfx(x, n, (T)0, &s1) / (double)n;                                                       \
      *mean = 0;                                                                                             \
    }                                                                                                        \
    *rstd = (T)(1.0 / sqrt((var > 0 ? var : 0.0) + eps));                                                    \
  }                                                                                                          \
                                                                                                             \
  static PD_NOINLINE void row_fwd_##sfx(const T *x, const T *w, const T *b, T *y, int64_t n, double eps,     \
                                        bool centered) {                                                     \
    T m, r;                                                                                                  \
    row_stats_##sfx(x, n, eps, centered, &m, &r);                                                            \
    if (w && b) {                                                                                            \
      PD_NORM_SIMD for (int64_t j = 0; j < n; j++) y[j] = (x[j] - m) * r * w[j] + b[j];                      \
    } else if (w) {                                                                                          \
      PD_NORM_SIMD for (int64_t j = 0; j < n; j++) y[j] = (x[j] - m) * r * w[j];                             \
    } else if (b) {                                                                                          \
      PD_NORM_SIMD for (int64_t j = 0; j < n; j++) y[j] = (x[j] - m) * r + b[j];                             \
    } else {                                                                                                 \
      PD_NORM_SIMD for (int64_t j = 0; j < n; j++) y[j] = (x[j] - m) * r;                                    \
    }                                                                                                        \
  }                                                                                                          \
                                                                                                             \
  void pdk_row_norm_fwd_##sfx(const T *x, const T *w, const T *b, T *y, int64_t rows, int64_t n, double eps, \
                              bool centered) {                                                               \
    if (rows <= 0 || n <= 0) return;                                                                         \
    if (!centered) b = NULL;                                                                                 \
    PD_PARALLEL_FOR_IF(task_split(rows *n, rows) > 1, r, rows,                                               \
                       { row_fwd_##sfx(x + r * n, w, b, y + r * n, n, eps, centered); });                    \
  }                                                                                                          \
                                                                                                             \
  /* dx of one row; adds dy * xhat to pw and dy to pb when given.                                            \
   *   dx = r g - r mean(g) - (x - m) r^3 mean(g (x - m)),  g = dy w                                         \
   * (without the mean(g) term when !centered). */                                                           \
  static PD_NOINLINE void row_bwd_##sfx(const T *x, const T *w, const T *dy, T *dx, T *pw, T *pb, int64_t n, \
                                        double eps, bool centered) {                                         \
    T m, r;                                                                                                  \
    row_stats_##sfx(x, n, eps, centered, &m, &r);                                                            \
    double sg, sgx;                                                                                          \
    pd_ndot2_##sfx(x, w, dy, n, m, &sg, &sgx);                                                               \
    double rd = (double)r;                                                                                   \
    T cb = centered ? (T)(-rd * sg / (double)n) : (T)0;                                                      \
    T cc = (T)(-rd * rd * rd * sgx / (double)n);                                                             \
    if (w && pw && pb) { /* the usual case: one sweep writes dx and accumulates dw, db */                    \
      PD_NORM_SIMD for (int64_t j = 0; j < n; j++) {                                                         \
        T d = x[j] - m, g = dy[j];                                                                           \
        dx[j] = r * g * w[j] + cc * d + cb;                                                                  \
        pw[j] += g * d * r;                                                                                  \
        pb[j] += g;                                                                                          \
      }                                                                                                      \
      return;                                                                                                \
    }                                                                                                        \
    if (w) {                                                                                                 \
      PD_NORM_SIMD for (int64_t j = 0; j < n; j++) dx[j] = r * dy[j] * w[j] + cc * (x[j] - m) + cb;          \
    } else {                                                                                                 \
      PD_NORM_SIMD for (int64_t j = 0; j < n; j++) dx[j] = r * dy[j] + cc * (x[j] - m) + cb;                 \
    }                                                                                                        \
    if (pw) {                                                                                                \
      PD_NORM_SIMD for (int64_t j = 0; j < n; j++) pw[j] += dy[j] * (x[j] - m) * r;                          \
    }                                                                                                        \
    if (pb) {                                                                                                \
      PD_NORM_SIMD for (int64_t j = 0; j < n; j++) pb[j] += dy[j];                                           \
    }                                                                                                        \
  }                                                                                                          \
                                                                                                             \
  static void flush_##sfx(T *p, double *t, int64_t n) {                                                      \
    PD_NORM_SIMD for (int64_t j = 0; j < n; j++) {                                                           \
      t[j] += (double)p[j];                                                                                  \
      p[j] = 0;                                                                                              \
    }                                                                                                        \
  }                                                                                                          \
                                                                                                             \
  int pdk_row_norm_bwd_##sfx(const T *x, const T *w, const T *dy, T *dx, T *dw, T *db, int64_t rows,         \
                             int64_t n, double eps, bool centered) {                                         \
    if (!centered) db = NULL;                                                                                \
    if (n <= 0) return 0;                                                                                    \
    if (rows <= 0) {                                                                                         \
      if (dw) memset(dw, 0, sizeof(T) * (size_t)n);                                                          \
      if (db) memset(db, 0, sizeof(T) * (size_t)n);                                                          \
      return 0;                                                                                              \
    }                                                                                                        \
    int64_t nchunk = bwd_chunks(rows, n);                                                                    \
    int64_t nacc = (dw ? 1 : 0) + (db ? 1 : 0);                                                              \
    T *acc = NULL;                                                                                           \
    double *tot = NULL;                                                                                      \
    if (nacc) {                                                                                              \
      acc = calloc((size_t)(nchunk * nacc * n), sizeof(T));                                                  \
      tot = calloc((size_t)(nchunk * nacc * n), sizeof(double));                                             \
      if (!acc || !tot) {                                                                                    \
        free(acc);                                                                                           \
        free(tot);                                                                                           \
        return 1;                                                                                            \
      }                                                                                                      \
    }                                                                                                        \
    PD_PARALLEL_FOR_IF(task_split(rows *n, nchunk) > 1, k, nchunk, {                                         \
      int64_t r0 = k * rows / nchunk, r1 = (k + 1) * rows / nchunk;                                          \
      T *aw = dw ? acc + k * nacc * n : NULL;                                                                \
      T *ab = db ? acc + k * nacc * n + (dw ? n : 0) : NULL;                                                 \
      double *tw = dw ? tot + k * nacc * n : NULL;                                                           \
      double *tb = db ? tot + k * nacc * n + (dw ? n : 0) : NULL;                                            \
      for (int64_t r = r0; r < r1; r++) {                                                                    \
        row_bwd_##sfx(x + r * n, w, dy + r * n, dx + r * n, aw, ab, n, eps, centered);                       \
        if ((r - r0 + 1) % FLUSH_ROWS == 0 || r == r1 - 1) {                                                 \
          if (aw) flush_##sfx(aw, tw, n);                                                                    \
          if (ab) flush_##sfx(ab, tb, n);                                                                    \
        }                                                                                                    \
      }                                                                                                      \
    });                                                                                                      \
    for (int64_t a = 0; a < nacc; a++) {                                                                     \
      T *dst = a == 0 && dw ? dw : db;                                                                       \
      for (int64_t j = 0; j < n; j++) {                                                                      \
        double s = 0;                                                                                        \
        for (int64_t k = 0; k < nchunk; k++) s += tot[(k * nacc + a) * n + j];                               \
        dst[j] = (T)s;                                                                                       \
      }                                                                                                      \
    }                                                                                                        \
    free(acc);                                                                                               \
    free(tot);                                                                                               \
    return 0;                                                                                                \
  }

DEFINE_ROW_NORM(f32, float)
DEFINE_ROW_NORM(f64, double)

/* ---- group norm ---------------------------------------------------------------------------------- */

#define DEFINE_GROUP_NORM(sfx, T)                                                                           \
  /* one row (sample, group) of the forward */                                                              \
  static PD_NOINLINE void gn_row_fwd_##sfx(const T *x, const T *w, const T *b, T *y, int64_t r, int64_t cg, \
                                           int64_t spatial, int64_t groups, double eps) {                   \
    int64_t len = cg * spatial;                                                                             \
    const T *xr = x + r * len;                                                                              \
    T *yr = y + r * len;                                                                                    \
    T m, rs;                                                                                                \
    row_stats_##sfx(xr, len, eps, true, &m, &rs);                                                           \
    int64_t c0 = (r % groups) * cg;                                                                         \
    for (int64_t k = 0; k < cg; k++) {                                                                      \
      T a = w ? rs * w[c0 + k] : rs, sh = b ? b[c0 + k] : (T)0;                                             \
      const T *xs = xr + k * spatial;                                                                       \
      T *ys = yr + k * spatial;                                                                             \
      PD_NORM_SIMD for (int64_t s = 0; s < spatial; s++) ys[s] = (xs[s] - m) * a + sh;                      \
    }                                                                                                       \
  }                                                                                                         \
  /* one row of the backward: its dx, and its per-channel sums into sdx, sdy */                             \
  static PD_NOINLINE void gn_row_bwd_##sfx(const T *x, const T *w, const T *dy, T *dx, double *sdx,         \
                                           double *sdy, int64_t r, int64_t cg, int64_t channels,            \
                                           int64_t spatial, int64_t groups, double eps) {                   \
    int64_t len = cg * spatial;                                                                             \
    const T *xr = x + r * len, *gr = dy + r * len;                                                          \
    T *dr = dx + r * len;                                                                                   \
    T m, rs;                                                                                                \
    row_stats_##sfx(xr, len, eps, true, &m, &rs);                                                           \
    int64_t c0 = (r % groups) * cg, bc0 = (r / groups) * channels + c0;                                     \
    double sg = 0, sgx = 0, rd = (double)rs;                                                                \
    for (int64_t k = 0; k < cg; k++) {                                                                      \
      double s_dy, s_q, s_xy, s_1;                                                                          \
      pd_nsum2_##sfx(xr + k * spatial, gr + k * spatial, spatial, m, &s_dy, &s_q, &s_xy, &s_1);             \
      double wc = w ? (double)w[c0 + k] : 1.0;                                                              \
      sg += wc * s_dy;                                                                                      \
      sgx += wc * s_xy;                                                                                     \
      sdy[bc0 + k] = s_dy;                                                                                  \
      sdx[bc0 + k] = rd * s_xy;                                                                             \
    }                                                                                                       \
    T cb = (T)(-rd * sg / (double)len), cc = (T)(-rd * rd * rd * sgx / (double)len);                        \
    for (int64_t k = 0; k < cg; k++) {                                                                      \
      T a = w ? rs * w[c0 + k] : rs;                                                                        \
      const T *xs = xr + k * spatial, *gs = gr + k * spatial;                                               \
      T *ds = dr + k * spatial;                                                                             \
      PD_NORM_SIMD for (int64_t s = 0; s < spatial; s++) ds[s] = a * gs[s] + cc * (xs[s] - m) + cb;         \
    }                                                                                                       \
  }                                                                                                         \
  void pdk_group_norm_fwd_##sfx(const T *x, const T *w, const T *b, T *y, int64_t batch, int64_t channels,  \
                                int64_t spatial, int64_t groups, double eps) {                              \
    int64_t cg = channels / groups, len = cg * spatial, rows = batch * groups;                              \
    if (rows <= 0 || len <= 0) return;                                                                      \
    PD_PARALLEL_FOR_IF(task_split(rows *len, rows) > 1, r, rows,                                            \
                       { gn_row_fwd_##sfx(x, w, b, y, r, cg, spatial, groups, eps); });                     \
  }                                                                                                         \
                                                                                                            \
  int pdk_group_norm_bwd_##sfx(const T *x, const T *w, const T *dy, T *dx, T *dw, T *db, int64_t batch,     \
                               int64_t channels, int64_t spatial, int64_t groups, double eps) {             \
    int64_t cg = channels / groups, len = cg * spatial, rows = batch * groups;                              \
    if (channels <= 0) return 0;                                                                            \
    double *sdx = calloc((size_t)(batch * channels) + 1, sizeof(double));                                   \
    double *sdy = calloc((size_t)(batch * channels) + 1, sizeof(double));                                   \
    if (!sdx || !sdy) {                                                                                     \
      free(sdx);                                                                                            \
      free(sdy);                                                                                            \
      return 1;                                                                                             \
    }                                                                                                       \
    if (len > 0) {                                                                                          \
      PD_PARALLEL_FOR_IF(task_split(rows *len, rows) > 1, r, rows, {                                        \
        gn_row_bwd_##sfx(x, w, dy, dx, sdx, sdy, r, cg, channels, spatial, groups, eps);                    \
      });                                                                                                   \
    }                                                                                                       \
    for (int64_t c = 0; c < channels; c++) {                                                                \
      double tw = 0, tb = 0;                                                                                \
      for (int64_t n = 0; n < batch; n++) {                                                                 \
        tw += sdx[n * channels + c];                                                                        \
        tb += sdy[n * channels + c];                                                                        \
      }                                                                                                     \
      if (dw) dw[c] = (T)tw;                                                                                \
      if (db) db[c] = (T)tb;                                                                                \
    }                                                                                                       \
    free(sdx);                                                                                              \
    free(sdy);                                                                                              \
    return 0;                                                                                               \
  }

DEFINE_GROUP_NORM(f32, float)
DEFINE_GROUP_NORM(f64, double)
