/* Batch norm kernels (see norm.h). A channel's values are spread over the
 * whole tensor, so its statistics are gathered from chunks that fit in
 * cache: each chunk is reduced mean-first (sum, then squared deviations from
 * the chunk mean, read again from cache) and the chunks are merged with the
 * pairwise update M2 = sum M2_k + sum n_k (m_k - m)^2. Backward gathers
 * sum dy and sum dy (x - m) the same way, so forward and backward each read
 * x (and dy) from memory twice: once for the statistics, once to write. */
#include <stdlib.h>
#include <string.h>

#include "norm.h"
#include "norm_reduce.h"

/* Channel-last chunks: rows per chunk aim at this many elements. */
#define CHUNK_ELEMS 32768
/* and there are at most this many chunks. */
#define MAX_CHUNKS 256

/* Per-chunk statistics of one channel, exact about the chunk mean m. */
typedef struct chunk_stats {
  double n, m, q;  /* count, mean, sum of squared deviations from m */
  double sdy, sxy; /* sum dy, sum dy (x - m) */
} chunk_stats;

/* Merges chunks into the channel's mean, M2, sum dy and sum dy (x - mean). */
static void merge(const chunk_stats *cs, int64_t nc, int64_t stride, chunk_stats *out) {
  double n = 0, s = 0;
  for (int64_t k = 0; k < nc; k++) {
    n += cs[k * stride].n;
    s += cs[k * stride].n * cs[k * stride].m;
  }
  double m = n > 0 ? s / n : NAN, q = 0, sdy = 0, sxy = 0;
  for (int64_t k = 0; k < nc; k++) {
    const chunk_stats *c = &cs[k * stride];
    double d = c->m - m;
    q += c->q + c->n * d * d;
    sdy += c->sdy;
    sxy += c->sxy + d * c->sdy;
  }
  *out = (chunk_stats){n, m, q, sdy, sxy};
}

static int64_t threads_for(int64_t work, int64_t tasks) {
  if (work < PD_GRAIN || tasks < 2) return 1;
  int64_t t = pd_loop_threads();
  return t < tasks ? t : tasks;
}

/* Channel-last chunking of `rows` rows of `c` channels. */
static int64_t rows_per_chunk(int64_t rows, int64_t c) {
  int64_t rpc = c > 0 ? (CHUNK_ELEMS + c - 1) / c : rows;
  int64_t min_rpc = (rows + MAX_CHUNKS - 1) / MAX_CHUNKS;
  if (rpc < min_rpc) rpc = min_rpc;
  return rpc < 1 ? 1 : rpc;
}

#define DEFINE_BATCH_NORM(sfx, T)                                                                         \
  /* the statistics of plane t (one sample, one channel) of S values */                                   \
  static PD_NOINLINE chunk_stats plane_stats_##sfx(const T *x, const T *dy, int64_t S, int64_t t) {       \
    const T *xs = x + t * S;                                                                              \
    T c = (T)(S > 0 ? pd_nsum_##sfx(xs, S) / (double)S : 0.0); /* first estimate of the mean */           \
    double s1, q, sdy = 0, sxy = 0;                                                                       \
    if (dy)                                                                                               \
      pd_nsum2_##sfx(xs, dy + t * S, S, c, &sdy, &q, &sxy, &s1);                                          \
    else                                                                                                  \
      q = pd_nsq_##sfx(xs, S, c, &s1);                                                                    \
    double dc = S > 0 ? s1 / (double)S : 0.0, m = (double)c + dc; /* corrected mean */                    \
    q -= (double)S * dc * dc;                                                                             \
    sxy -= dc * sdy;                                                                                      \
    return (chunk_stats){(double)S, m, q > 0 ? q : 0, sdy, sxy};                                          \
  }                                                                                                       \
  /* Chunk statistics. Channel-first: chunk (n, c) is the `spatial` values of                             \
   * sample n, channel c, at cs[n * C + c]. Channel-last: chunk k holds rows                              \
   * [k rpc, (k+1) rpc), its channel c at cs[k * C + c]. With dy, also                                    \
   * sum dy and sum dy (x - m). Returns the number of chunks per channel, or                              \
   * -1 when out of memory. */                                                                            \
  static int64_t gather_##sfx(const T *x, const T *dy, const pd_bn_geom *g, chunk_stats **out) {          \
    int64_t C = g->channels;                                                                              \
    if (!g->channel_last) {                                                                               \
      /* no spatial values: no chunk (B * C could pass any size for an empty x) */                        \
      int64_t S = g->spatial, B = S > 0 ? g->batch : 0, nt = B * C;                                       \
      chunk_stats *cs = malloc(sizeof *cs * (size_t)(nt > 0 ? nt : 1));                                   \
      if (!cs) return -1;                                                                                 \
      PD_PARALLEL_FOR_IF(threads_for(nt *S, nt) > 1, t, nt, { cs[t] = plane_stats_##sfx(x, dy, S, t); }); \
      *out = cs;                                                                                          \
      return B;                                                                                           \
    }                                                                                                     \
    int64_t R = g->batch, rpc = rows_per_chunk(R, C), nk = (R + rpc - 1) / rpc;                           \
    chunk_stats *cs = malloc(sizeof *cs * (size_t)(nk * C > 0 ? nk * C : 1));                             \
    double *acc = malloc(sizeof(double) * (size_t)(4 * nk * C > 0 ? 4 * nk * C : 1));                     \
    T *ctr = malloc(sizeof(T) * (size_t)(nk * C > 0 ? nk * C : 1));                                       \
    if (!cs || !acc || !ctr) {                                                                            \
      free(cs);                                                                                           \
      free(acc);                                                                                          \
      free(ctr);                                                                                          \
      return -1;                                                                                          \
    }                                                                                                     \
    PD_PARALLEL_FOR_IF(threads_for(R *C, nk) > 1, k, nk, {                                                \
      int64_t r0 = k * rpc, r1 = r0 + rpc < R ? r0 + rpc : R;                                             \
      double *s = acc + 4 * k * C, *q = s + C, *sd = q + C, *sx = sd + C;                                 \
      T *c = ctr + k * C;                                                                                 \
      double cnt = (double)(r1 - r0);                                                                     \
      for (int64_t j = 0; j < 4 * C; j++) s[j] = 0;                                                       \
      for (int64_t r = r0; r < r1; r++) {                                                                 \
        const T *xr = x + r * C;                                                                          \
        PD_NORM_SIMD for (int64_t j = 0; j < C; j++) s[j] += (double)xr[j];                               \
      }                                                                                                   \
      for (int64_t j = 0; j < C; j++) c[j] = (T)(s[j] / cnt);                                             \
      for (int64_t r = r0; r < r1; r++) {                                                                 \
        const T *xr = x + r * C;                                                                          \
        if (dy) {                                                                                         \
          const T *gr = dy + r * C;                                                                       \
          PD_NORM_SIMD for (int64_t j = 0; j < C; j++) {                                                  \
            double d = (double)(xr[j] - c[j]);                                                            \
            q[j] += d * d;                                                                                \
            sd[j] += (double)gr[j];                                                                       \
            sx[j] += (double)gr[j] * d;                                                                   \
          }                                                                                               \
        } else {                                                                                          \
          PD_NORM_SIMD for (int64_t j = 0; j < C; j++) {                                                  \
            double d = (double)(xr[j] - c[j]);                                                            \
            q[j] += d * d;                                                                                \
          }                                                                                               \
        }                                                                                                 \
      }                                                                                                   \
      for (int64_t j = 0; j < C; j++) {                                                                   \
        double m = s[j] / cnt, dc = m - (double)c[j], qq = q[j] - cnt * dc * dc;                          \
        cs[k * C + j] = (chunk_stats){cnt, m, qq > 0 ? qq : 0, sd[j], sx[j] - dc * sd[j]};                \
      }                                                                                                   \
    });                                                                                                   \
    free(acc);                                                                                            \
    free(ctr);                                                                                            \
    *out = cs;                                                                                            \
    return nk;                                                                                            \
  }                                                                                                       \
                                                                                                          \
  void pdk_channel_affine_##sfx(const T *x, const T *mean, const T *scale, const T *shift, T *y,          \
                                const pd_bn_geom *g) {                                                    \
    int64_t C = g->channels;                                                                              \
    if (!g->channel_last) {                                                                               \
      int64_t S = g->spatial, nt = g->batch * C;                                                          \
      PD_PARALLEL_FOR_IF(threads_for(nt *S, nt) > 1, t, nt, {                                             \
        int64_t c = t % C;                                                                                \
        T m = mean[c], a = scale[c], b = shift[c];                                                        \
        const T *xs = x + t * S;                                                                          \
        T *ys = y + t * S;                                                                                \
        PD_NORM_SIMD for (int64_t s = 0; s < S; s++) ys[s] = (xs[s] - m) * a + b;                         \
      });                                                                                                 \
      return;                                                                                             \
    }                                                                                                     \
    int64_t R = g->batch;                                                                                 \
    PD_PARALLEL_FOR_IF(threads_for(R *C, R) > 1, r, R, {                                                  \
      const T *xr = x + r * C;                                                                            \
      T *yr = y + r * C;                                                                                  \
      PD_NORM_SIMD for (int64_t j = 0; j < C; j++) yr[j] = (xr[j] - mean[j]) * scale[j] + shift[j];       \
    });                                                                                                   \
  }                                                                                                       \
                                                                                                          \
  int pdk_batch_norm_fwd_##sfx(const T *x, const T *w, const T *b, T *y, T *mean_out, T *var_out,         \
                               const pd_bn_geom *g, double eps) {                                         \
    int64_t C = g->channels;                                                                              \
    if (C <= 0) return 0;                                                                                 \
    chunk_stats *cs;                                                                                      \
    int64_t nk = gather_##sfx(x, NULL, g, &cs);                                                           \
    T *tmp = malloc(sizeof(T) * (size_t)(3 * C));                                                         \
    if (nk < 0 || !tmp) {                                                                                 \
      if (nk >= 0) free(cs);                                                                              \
      free(tmp);                                                                                          \
      return 1;                                                                                           \
    }                                                                                                     \
    T *mean = tmp, *scale = tmp + C, *shift = tmp + 2 * C;                                                \
    for (int64_t c = 0; c < C; c++) {                                                                     \
      chunk_stats st;                                                                                     \
      merge(cs + c, nk, C, &st);                                                                          \
      double var = st.n > 0 ? st.q / st.n : NAN, r = 1.0 / sqrt(var + eps);                               \
      mean[c] = (T)st.m;                                                                                  \
      scale[c] = (T)(w ? r * (double)w[c] : r);                                                           \
      shift[c] = b ? b[c] : (T)0;                                                                         \
      if (mean_out) mean_out[c] = (T)st.m;                                                                \
      if (var_out) var_out[c] = (T)var;                                                                   \
    }                                                                                                     \
    pdk_channel_affine_##sfx(x, mean, scale, shift, y, g);                                                \
    free(cs);                                                                                             \
    free(tmp);                                                                                            \
    return 0;                                                                                             \
  }                                                                                                       \
                                                                                                          \
  /* dx = r w (dy - sum(dy)/M - (x - m) r^2 sum(dy (x - m))/M),                                           \
   * dw = r sum(dy (x - m)), db = sum(dy). */                                                             \
  int pdk_batch_norm_bwd_##sfx(const T *x, const T *w, const T *dy, T *dx, T *dw, T *db,                  \
                               const pd_bn_geom *g, double eps) {                                         \
    int64_t C = g->channels;                                                                              \
    if (C <= 0) return 0;                                                                                 \
    chunk_stats *cs;                                                                                      \
    int64_t nk = gather_##sfx(x, dy, g, &cs);                                                             \
    T *tmp = malloc(sizeof(T) * (size_t)(4 * C));                                                         \
    if (nk < 0 || !tmp) {                                                                                 \
      if (nk >= 0) free(cs);                                                                              \
      free(tmp);                                                                                          \
      return 1;                                                                                           \
    }                                                                                                     \
    T *mean = tmp, *ca = tmp + C, *cc = tmp + 2 * C, *cb = tmp + 3 * C;                                   \
    for (int64_t c = 0; c < C; c++) {                                                                     \
      chunk_stats st;                                                                                     \
      merge(cs + c, nk, C, &st);                                                                          \
      double r = 1.0 / sqrt((st.n > 0 ? st.q / st.n : NAN) + eps), wc = w ? (double)w[c] : 1.0;           \
      double inv = st.n > 0 ? 1.0 / st.n : 0.0;                                                           \
      mean[c] = (T)st.m;                                                                                  \
      ca[c] = (T)(r * wc);                                                                                \
      cc[c] = (T)(-r * r * r * wc * st.sxy * inv);                                                        \
      cb[c] = (T)(-r * wc * st.sdy * inv);                                                                \
      if (dw) dw[c] = st.n > 0 ? (T)(r * st.sxy) : (T)0;                                                  \
      if (db) db[c] = (T)st.sdy;                                                                          \
    }                                                                                                     \
    free(cs);                                                                                             \
    if (!g->channel_last) {                                                                               \
      int64_t S = g->spatial, nt = g->batch * C;                                                          \
      PD_PARALLEL_FOR_IF(threads_for(nt *S, nt) > 1, t, nt, {                                             \
        int64_t c = t % C;                                                                                \
        T m = mean[c], a = ca[c], e = cc[c], f = cb[c];                                                   \
        const T *xs = x + t * S, *gs = dy + t * S;                                                        \
        T *ds = dx + t * S;                                                                               \
        PD_NORM_SIMD for (int64_t s = 0; s < S; s++) ds[s] = a * gs[s] + e * (xs[s] - m) + f;             \
      });                                                                                                 \
    } else {                                                                                              \
      int64_t R = g->batch;                                                                               \
      PD_PARALLEL_FOR_IF(threads_for(R *C, R) > 1, r, R, {                                                \
        const T *xr = x + r * C, *gr = dy + r * C;                                                        \
        T *dr = dx + r * C;                                                                               \
        PD_NORM_SIMD for (int64_t j = 0; j < C; j++) dr[j] =                                              \
            ca[j] * gr[j] + cc[j] * (xr[j] - mean[j]) + cb[j];                                            \
      });                                                                                                 \
    }                                                                                                     \
    free(tmp);                                                                                            \
    return 0;                                                                                             \
  }

DEFINE_BATCH_NORM(f32, float)
DEFINE_BATCH_NORM(f64, double)
