/* Direct convolution: im2col + GEMM (float64, and float32 where oneDNN
 * cannot express a geometry). Per sample, the input is unfolded into a
 * column matrix col[Ci * K, out] (rows grouped by channel, so group g's rows
 * are one block), then
 *   forward        y_g  = W_g  col_g
 *   backward data  col_g = W_g^T dy_g, folded back into dx (col2im)
 *   backward wts   dW_g += dy_g col_g^T
 * Channels-last activations use the same col matrix with transposed GEMM
 * operands. */
#include "conv.h"

#include <stdlib.h>
#include <string.h>

#include "gemm.h"
#include "parallel.h"

/* b > 0; no a + b - 1, which overflows for a huge stride */
static inline int64_t ceil_div(int64_t a, int64_t b) { return a >= 0 ? a / b + (a % b != 0) : -((-a) / b); }

/* Output positions o in [lo, hi) read input positions o * s + off inside [0, n). */
static inline void valid_range(int64_t nout, int64_t nin, int64_t s, int64_t off, int64_t *lo, int64_t *hi) {
  int64_t l = ceil_div(-off, s), h = ceil_div(nin - off, s);
  if (l < 0) l = 0;
  if (l > nout) l = nout; /* a padding past the input: no position reads it */
  if (h > nout) h = nout;
  if (h < l) h = l;
  *lo = l;
  *hi = h;
}

int64_t pdk_conv_pad_after(const pd_conv_geom *g, int d) {
  int64_t ext = g->dil[d] * (g->k[d] - 1) + 1;
  return (g->out[d] - 1) * g->stride[d] + ext - g->in[d] - g->pad[d];
}

/* The spatial sizes of a geometry padded to 3 dims (leading dims of size 1). */
typedef struct dims3 {
  int64_t I[3], O[3], K[3], S[3], D[3], P[3];
  int64_t isz, osz, ksz;
} dims3;

static void dims3_of(const pd_conv_geom *g, dims3 *t) {
  t->isz = t->osz = t->ksz = 1;
  /* the spatial dims fill the last slots, so the innermost is always slot 2 */
  for (int d = 0; d < 3; d++) {
    int sd = d - (3 - g->nsp);
    bool used = sd >= 0;
    t->I[d] = used ? g->in[sd] : 1;
    t->O[d] = used ? g->out[sd] : 1;
    t->K[d] = used ? g->k[sd] : 1;
    t->S[d] = used ? g->stride[sd] : 1;
    t->D[d] = used ? g->dil[sd] : 1;
    t->P[d] = used ? g->pad[sd] : 0;
    t->isz *= t->I[d];
    t->osz *= t->O[d];
    t->ksz *= t->K[d];
  }
}

/* A 1x1 kernel, stride 1, no padding: col is the input itself. */
static bool is_pointwise(const dims3 *t) {
  for (int d = 0; d < 3; d++)
    if (t->K[d] != 1 || t->S[d] != 1 || t->P[d] != 0 || t->I[d] != t->O[d]) return false;
  return true;
}

#define DEFINE_CONV_REF(SFX, T, GEMM)                                                                        \
  /* col[c * ksz + k][o] = x[c, pos(o, k)] for channels [0, C) of one sample (x: channel stride sc,          \
   * spatial stride sp). */                                                                                  \
  static void im2col_##SFX(const dims3 *t, int64_t C, const T *x, int64_t sc, int64_t sp, T *col) {          \
    int64_t ksz = t->ksz, osz = t->osz;                                                                      \
    PD_PARALLEL_FOR(c, C, (PD_GRAIN / (ksz * osz + 1)) + 1, {                                                \
      for (int64_t kd = 0; kd < t->K[0]; kd++)                                                               \
        for (int64_t kh = 0; kh < t->K[1]; kh++)                                                             \
          for (int64_t kw = 0; kw < t->K[2]; kw++) {                                                         \
            T *row = col + (c * ksz + (kd * t->K[1] + kh) * t->K[2] + kw) * osz;                             \
            int64_t offw = kw * t->D[2] - t->P[2], lo, hi;                                                   \
            valid_range(t->O[2], t->I[2], t->S[2], offw, &lo, &hi);                                          \
            for (int64_t od = 0; od < t->O[0]; od++) {                                                       \
              int64_t id = od * t->S[0] - t->P[0] + kd * t->D[0];                                            \
              for (int64_t oh = 0; oh < t->O[1]; oh++) {                                                     \
                int64_t ih = oh * t->S[1] - t->P[1] + kh * t->D[1];                                          \
                T *r = row + (od * t->O[1] + oh) * t->O[2];                                                  \
                if (id < 0 || id >= t->I[0] || ih < 0 || ih >= t->I[1]) {                                    \
                  memset(r, 0, sizeof(T) * (size_t)t->O[2]);                                                 \
                  continue;                                                                                  \
                }                                                                                            \
                for (int64_t ow = 0; ow < lo; ow++) r[ow] = 0;                                               \
                if (hi > lo) { /* based at the first valid position: offw may lie far before x */            \
                  int64_t step = hi - lo > 1 ? t->S[2] * sp : 0; /* one position: any */                     \
                  const T *src = x + c * sc + ((id * t->I[1] + ih) * t->I[2] + offw + lo * t->S[2]) * sp;    \
                  for (int64_t ow = lo; ow < hi; ow++) r[ow] = src[(ow - lo) * step];                        \
                }                                                                                            \
                for (int64_t ow = hi; ow < t->O[2]; ow++) r[ow] = 0;                                         \
              }                                                                                              \
            }                                                                                                \
          }                                                                                                  \
    });                                                                                                      \
  }                                                                                                          \
  /* x[c, pos(o, k)] += col[c * ksz + k][o] (the adjoint of im2col). */                                      \
  static void col2im_##SFX(const dims3 *t, int64_t C, const T *col, T *x, int64_t sc, int64_t sp) {          \
    int64_t ksz = t->ksz, osz = t->osz;                                                                      \
    PD_PARALLEL_FOR(c, C, (PD_GRAIN / (ksz * osz + 1)) + 1, {                                                \
      for (int64_t kd = 0; kd < t->K[0]; kd++)                                                               \
        for (int64_t kh = 0; kh < t->K[1]; kh++)                                                             \
          for (int64_t kw = 0; kw < t->K[2]; kw++) {                                                         \
            const T *row = col + (c * ksz + (kd * t->K[1] + kh) * t->K[2] + kw) * osz;                       \
            int64_t offw = kw * t->D[2] - t->P[2], lo, hi;                                                   \
            valid_range(t->O[2], t->I[2], t->S[2], offw, &lo, &hi);                                          \
            for (int64_t od = 0; od < t->O[0]; od++) {                                                       \
              int64_t id = od * t->S[0] - t->P[0] + kd * t->D[0];                                            \
              if (id < 0 || id >= t->I[0]) continue;                                                         \
              for (int64_t oh = 0; oh < t->O[1]; oh++) {                                                     \
                int64_t ih = oh * t->S[1] - t->P[1] + kh * t->D[1];                                          \
                if (ih < 0 || ih >= t->I[1]) continue;                                                       \
                const T *r = row + (od * t->O[1] + oh) * t->O[2];                                            \
                if (hi == lo) continue;                                                                      \
                int64_t step = hi - lo > 1 ? t->S[2] * sp : 0; /* one position: any */                       \
                T *dst = x + c * sc + ((id * t->I[1] + ih) * t->I[2] + offw + lo * t->S[2]) * sp;            \
                for (int64_t ow = lo; ow < hi; ow++) dst[(ow - lo) * step] += r[ow];                         \
              }                                                                                              \
            }                                                                                                \
          }                                                                                                  \
    });                                                                                                      \
  }                                                                                                          \
  int pdk_conv_ref_##SFX(pd_conv_kind kind, const pd_conv_geom *g, const T *a, const T *b, const T *bias,    \
                         T *out) {                                                                           \
    dims3 t;                                                                                                 \
    dims3_of(g, &t);                                                                                         \
    int64_t G = g->G, Cg = g->Ci / G, Cog = g->Co / G, CgK = Cg * t.ksz;                                     \
    bool cl = g->channel_last;                                                                               \
    /* element strides of the two activations: channel, spatial, sample */                                   \
    int64_t xsc = cl ? 1 : t.isz, xsp = cl ? g->Ci : 1, xsn = g->Ci * t.isz;                                 \
    int64_t ysn = g->Co * t.osz;                                                                             \
    bool pw = is_pointwise(&t) && !cl;                                                                       \
    T *col = NULL;                                                                                           \
    if (!pw) {                                                                                               \
      col = malloc(sizeof(T) * (size_t)(g->Ci * t.ksz * t.osz > 0 ? g->Ci * t.ksz * t.osz : 1));             \
      if (!col) return -1;                                                                                   \
    }                                                                                                        \
    int rc = 0;                                                                                              \
    if (kind == PD_CONV_BWD_DATA) memset(out, 0, sizeof(T) * (size_t)(g->N * xsn));                          \
    if (kind == PD_CONV_BWD_WEIGHTS) memset(out, 0, sizeof(T) * (size_t)(g->Co * CgK));                      \
    for (int64_t n = 0; n < g->N && rc == 0; n++) {                                                          \
      if (kind == PD_CONV_FWD) {                                                                             \
        const T *x = a + n * xsn;                                                                            \
        T *y = out + n * ysn;                                                                                \
        const T *c = pw ? x : col;                                                                           \
        if (!pw) im2col_##SFX(&t, g->Ci, x, xsc, xsp, col);                                                  \
        for (int64_t gi = 0; gi < G && rc == 0; gi++) {                                                      \
          const T *W = b + gi * Cog * CgK, *cg = c + gi * CgK * t.osz;                                       \
          if (!cl)                                                                                           \
            rc = GEMM(false, false, Cog, t.osz, CgK, 1, W, CgK, cg, t.osz, 0, y + gi * Cog * t.osz, t.osz);  \
          else                                                                                               \
            rc = GEMM(true, true, t.osz, Cog, CgK, 1, cg, t.osz, W, CgK, 0, y + gi * Cog, g->Co);            \
        }                                                                                                    \
      } else if (kind == PD_CONV_BWD_DATA) {                                                                 \
        const T *dy = a + n * ysn;                                                                           \
        T *dx = out + n * xsn;                                                                               \
        T *c = pw ? dx : col;                                                                                \
        for (int64_t gi = 0; gi < G && rc == 0; gi++) {                                                      \
          const T *W = b + gi * Cog * CgK;                                                                   \
          T *cg = c + gi * CgK * t.osz;                                                                      \
          if (!cl)                                                                                           \
            rc = GEMM(true, false, CgK, t.osz, Cog, 1, W, CgK, dy + gi * Cog * t.osz, t.osz, 0, cg, t.osz);  \
          else                                                                                               \
            rc = GEMM(true, true, CgK, t.osz, Cog, 1, W, CgK, dy + gi * Cog, g->Co, 0, cg, t.osz);           \
        }                                                                                                    \
        if (!pw && rc == 0) col2im_##SFX(&t, g->Ci, col, dx, xsc, xsp);                                      \
      } else {                                                                                               \
        const T *x = a + n * xsn, *dy = b + n * ysn;                                                         \
        const T *c = pw ? x : col;                                                                           \
        if (!pw) im2col_##SFX(&t, g->Ci, x, xsc, xsp, col);                                                  \
        for (int64_t gi = 0; gi < G && rc == 0; gi++) {                                                      \
          const T *cg = c + gi * CgK * t.osz;                                                                \
          T *dW = out + gi * Cog * CgK;                                                                      \
          if (!cl)                                                                                           \
            rc = GEMM(false, true, Cog, CgK, t.osz, 1, dy + gi * Cog * t.osz, t.osz, cg, t.osz, 1, dW, CgK); \
          else                                                                                               \
            rc = GEMM(true, true, Cog, CgK, t.osz, 1, dy + gi * Cog, g->Co, cg, t.osz, 1, dW, CgK);          \
        }                                                                                                    \
      }                                                                                                      \
    }                                                                                                        \
    free(col);                                                                                               \
    if (rc == 0 && kind == PD_CONV_FWD && bias) pdk_conv_add_bias_##SFX(g, true, bias, out);                 \
    return rc;                                                                                               \
  }                                                                                                          \
  void pdk_conv_add_bias_##SFX(const pd_conv_geom *g, bool out_space, const T *bias, T *y) {                 \
    int64_t C = out_space ? g->Co : g->Ci, sz = 1;                                                           \
    for (int d = 0; d < g->nsp; d++) sz *= out_space ? g->out[d] : g->in[d];                                 \
    int64_t rows = g->N * (g->channel_last ? sz : C), inner = g->channel_last ? C : sz;                      \
    bool cl = g->channel_last;                                                                               \
    PD_PARALLEL_FOR(r, rows, PD_GRAIN / (inner + 1) + 1, {                                                   \
      T *p = y + r * inner;                                                                                  \
      if (cl) {                                                                                              \
        for (int64_t i = 0; i < inner; i++) p[i] += bias[i];                                                 \
      } else {                                                                                               \
        T v = bias[r % C];                                                                                   \
        for (int64_t i = 0; i < inner; i++) p[i] += v;                                                       \
      }                                                                                                      \
    });                                                                                                      \
  }

/* GEMM adapters with the float-typed alpha/beta of each entry point. */
static inline int gemm32(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha, const float *A,
                         int64_t lda, const float *B, int64_t ldb, double beta, float *C, int64_t ldc) {
  return pdk_gemm_f32(ta, tb, M, N, K, (float)alpha, A, lda, B, ldb, (float)beta, C, ldc);
}
static inline int gemm64(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha, const double *A,
                         int64_t lda, const double *B, int64_t ldb, double beta, double *C, int64_t ldc) {
  return pdk_gemm_f64(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

DEFINE_CONV_REF(f32, float, gemm32)
DEFINE_CONV_REF(f64, double, gemm64)
