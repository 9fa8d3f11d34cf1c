/* The reduction driver (see reduce.h for the loop shapes). */
/* Floating-point exceptions are never inspected: without this GCC keeps the
 * selects of exp_vec as branches and the loops around it scalar. */
#pragma GCC optimize("no-trapping-math")
#include "reduce.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/element.h"
#include "../../core/shape.h"
#include "parallel.h"

/* Below this many input elements a reduction runs on one thread. */
#define GRAIN 32768
/* Outputs folded per finalize call. */
#define CHUNK 256
/* Rows mode: outputs (kept elements) per tile; their accumulators stay in L1. */
#define RTILE 2048
/* Unit-stride reduced runs at least this long fold per output. */
#define MIN_RUN 64
/* float32 sums: float partials over blocks of this many, then double. */
#define FBLOCK 1024

/* ---- geometry ------------------------------------------------------------ */
static int coalesce(int n, int64_t *shape, int64_t *stride) {
  int k = 0;
  for (int d = 0; d < n; d++) {
    if (shape[d] == 1) continue;
    if (k > 0 && stride[k - 1] == stride[d] * shape[d]) {
      shape[k - 1] *= shape[d];
      stride[k - 1] = stride[d];
      continue;
    }
    shape[k] = shape[d];
    stride[k] = stride[d];
    k++;
  }
  return k;
}

void pdk_reduce_geom_init(pd_reduce_geom *g, int ndim, const int64_t *shape, const int64_t *strides,
                          const bool *mask) {
  g->nkeep = g->nred = 0;
  for (int d = 0; d < ndim; d++) {
    if (mask[d]) {
      g->red_shape[g->nred] = shape[d];
      g->red_stride[g->nred++] = strides[d];
    } else {
      g->keep_shape[g->nkeep] = shape[d];
      g->keep_stride[g->nkeep++] = strides[d];
    }
  }
  g->n_out = pd_shape_numel(g->nkeep, g->keep_shape);
  g->n_red = pd_shape_numel(g->nred, g->red_shape);
  if (g->n_out == 0 || g->n_red == 0) { /* nothing is read: keep the counts only */
    g->nkeep = g->nred = 0;
    return;
  }
  g->nkeep = coalesce(g->nkeep, g->keep_shape, g->keep_stride);
  g->nred = coalesce(g->nred, g->red_shape, g->red_stride);
}

static inline int64_t offset_of(int n, const int64_t *shape, const int64_t *stride, int64_t i) {
  int64_t off = 0;
  for (int d = n - 1; d >= 0; d--) {
    off += (i % shape[d]) * stride[d];
    i /= shape[d];
  }
  return off;
}

int64_t pdk_reduce_keep_offset(const pd_reduce_geom *g, int64_t i) {
  return offset_of(g->nkeep, g->keep_shape, g->keep_stride, i);
}
int64_t pdk_reduce_red_offset(const pd_reduce_geom *g, int64_t j) {
  return offset_of(g->nred, g->red_shape, g->red_stride, j);
}

/* exp(x) written so that loops over it vectorise (libm's exp does not):
 * Cody-Waite reduction x = k ln2 + r, |r| <= ln2/2, a degree-13 Taylor
 * polynomial (error below 1e-17 relative), then scaling by 2^k through the
 * exponent bits. Results below 2^-1021 flush to 0 (they only ever add to
 * sums of at least 1 here); above 709 give +inf; NaN propagates. */
static inline double exp_vec(double x) {
  const double log2e = 1.4426950408889634, ln2_hi = 6.93147180369123816490e-01,
               ln2_lo = 1.90821492927058770002e-10, shifter = 6755399441055744.0; /* 1.5 * 2^52 */
  double xc = x < -708.0 ? -708.0 : (x > 709.0 ? 709.0 : x);
  double t = xc * log2e + shifter;
  double kf = t - shifter;
  double r = (xc - kf * ln2_hi) - kf * ln2_lo;
  double p = 1.0 / 6227020800.0;
  p = p * r + 1.0 / 479001600.0;
  p = p * r + 1.0 / 39916800.0;
  p = p * r + 1.0 / 3628800.0;
  p = p * r + 1.0 / 362880.0;
  p = p * r + 1.0 / 40320.0;
  p = p * r + 1.0 / 5040.0;
  p = p * r + 1.0 / 720.0;
  p = p * r + 1.0 / 120.0;
  p = p * r + 1.0 / 24.0;
  p = p * r + 1.0 / 6.0;
  p = p * r + 0.5;
  p = p * r + 1.0;
  p = p * r + 1.0;
  int64_t tb, sb;
  memcpy(&tb, &t, 8);
  memcpy(&sb, &shifter, 8);
  int64_t eb = (tb - sb + 1023) << 52;
  double scale;
  memcpy(&scale, &eb, 8);
  double res = p * scale;
  res = x < -708.0 ? 0.0 : res;
  res = x > 709.0 ? INFINITY : res;
  return x != x ? x : res;
}

/* ---- per-kind loop bodies -------------------------------------------------
 * acc is double for float inputs, int64 for integers/bool. Integer sums and
 * products wrap (computed unsigned), as Paddle's int kernels do. */
typedef void (*run_fn)(void *acc, const void *p, int64_t n, int64_t st, double c, double P);
typedef void (*rows_fn)(void *acc, const void *p, int64_t K, int64_t kst, int64_t nrows, int64_t rst,
                        const double *c, double P);

#define STEP_SUM(a, v, c) (a) += (v)
#define STEP_PROD(a, v, c) (a) *= (v)
#define STEP_MAX(a, v, c) (a) = ((v) > (a) || (v) != (v)) ? (v) : (a)
#define STEP_MIN(a, v, c) (a) = ((v) < (a) || (v) != (v)) ? (v) : (a)
#define STEP_ALL(a, v, c) (a) = ((v) != 0) ? (a) : 0
#define STEP_ANY(a, v, c) (a) = ((v) != 0) ? 1 : (a)
#define STEP_COUNT_NZ(a, v, c) (a) += ((v) != 0)
#define STEP_SUMSQ(a, v, c) (a) += (v) * (v)
#define STEP_SUMSQ_DEV(a, v, c) \
  {                             \
    double d_ = (v) - (c);      \
    (a) += d_ * d_;             \
  }
#define STEP_SUMEXP_DEV(a, v, c) (a) += exp_vec((v) - (c))
#define STEP_ABS_SUM(a, v, c) (a) += fabs(v)
#define STEP_ABS_POW(a, v, c) (a) += pow(fabs(v), P)
#define STEP_ABS_MAX(a, v, c)                \
  {                                          \
    double u_ = fabs(v);                     \
    (a) = (u_ > (a) || u_ != u_) ? u_ : (a); \
  }
#define STEP_ABS_MIN(a, v, c)                \
  {                                          \
    double u_ = fabs(v);                     \
    (a) = (u_ < (a) || u_ != u_) ? u_ : (a); \
  }
/* integer sums/products wrap instead of overflowing */
#define STEP_ISUM(a, v, c) (a) = (int64_t)((uint64_t)(a) + (uint64_t)(v))
#define STEP_IPROD(a, v, c) (a) = (int64_t)((uint64_t)(a) * (uint64_t)(v))
#define COMB_ADD(a, b, c) (a) += (b)

/* rows: acc[k] op= x[r * rst + k * kst] for every row r, vectorised over k
 * (unit kst: contiguous rows of kept elements). A dense block of short rows
 * (rst == K < 16) is folded as one flat run into W >= 32 interleaved
 * accumulators (W a multiple of K), then combined per k. */
#define SHORT_K 16
#define GEN_ROWS(name, T, ACC, STEP, COMB, INIT)                                                   \
  static void name(void *accv, const void *pv, int64_t K, int64_t kst, int64_t nrows, int64_t rst, \
                   const double *c, double P) {                                                    \
    ACC *acc = (ACC *)accv;                                                                        \
    const T *p = (const T *)pv;                                                                    \
    (void)c;                                                                                       \
    (void)P;                                                                                       \
    if (kst == 1 && rst == K && K < SHORT_K && nrows * K >= 8 * SHORT_K) {                         \
      int64_t W = K * ((2 * SHORT_K + K - 1) / K), n = nrows * K, full = n / W * W;                \
      ACC a2[3 * SHORT_K];                                                                         \
      double c2[3 * SHORT_K];                                                                      \
      (void)c2;                                                                                    \
      for (int64_t w = 0; w < W; w++) {                                                            \
        a2[w] = INIT;                                                                              \
        c2[w] = c ? c[w % K] : 0.0;                                                                \
      }                                                                                            \
      for (int64_t i0 = 0; i0 < full; i0 += W) {                                                   \
        const T *q = p + i0;                                                                       \
        _Pragma("omp simd") for (int64_t w = 0; w < W; w++) {                                      \
          ACC v = (ACC)q[w];                                                                       \
          STEP(a2[w], v, c2[w]);                                                                   \
        }                                                                                          \
      }                                                                                            \
      for (int64_t i = full; i < n; i++) {                                                         \
        ACC v = (ACC)p[i];                                                                         \
        STEP(a2[i - full], v, c2[i - full]);                                                       \
      }                                                                                            \
      for (int64_t w = 0; w < W; w++) COMB(acc[w % K], a2[w], 0);                                  \
      return;                                                                                      \
    }                                                                                              \
    for (int64_t r = 0; r < nrows; r++) {                                                          \
      const T *q = p + r * rst;                                                                    \
      if (kst == 1) {                                                                              \
        _Pragma("omp simd") for (int64_t k = 0; k < K; k++) {                                      \
          ACC v = (ACC)q[k];                                                                       \
          STEP(acc[k], v, c[k]);                                                                   \
        }                                                                                          \
      } else if (kst == 2) { /* constant strides vectorise with interleaved loads */               \
        _Pragma("omp simd") for (int64_t k = 0; k < K; k++) {                                      \
          ACC v = (ACC)q[2 * k];                                                                   \
          STEP(acc[k], v, c[k]);                                                                   \
        }                                                                                          \
      } else if (kst == 4) {                                                                       \
        _Pragma("omp simd") for (int64_t k = 0; k < K; k++) {                                      \
          ACC v = (ACC)q[4 * k];                                                                   \
          STEP(acc[k], v, c[k]);                                                                   \
        }                                                                                          \
      } else {                                                                                     \
        for (int64_t k = 0; k < K; k++) {                                                          \
          ACC v = (ACC)q[k * kst];                                                                 \
          STEP(acc[k], v, c[k]);                                                                   \
        }                                                                                          \
      }                                                                                            \
    }                                                                                              \
  }

/* additive kinds: a += sum of terms, vectorised with a simd reduction */
#define GEN_RUN_ADD(name, T, ACC, STEP)                                                     \
  static void name(void *accv, const void *pv, int64_t n, int64_t st, double c, double P) { \
    const T *p = (const T *)pv;                                                             \
    ACC s = 0;                                                                              \
    (void)c;                                                                                \
    (void)P;                                                                                \
    if (st == 1) {                                                                          \
      _Pragma("omp simd reduction(+ : s)") for (int64_t i = 0; i < n; i++) {                \
        ACC v = (ACC)p[i];                                                                  \
        STEP(s, v, c);                                                                      \
      }                                                                                     \
    } else {                                                                                \
      for (int64_t i = 0; i < n; i++) {                                                     \
        ACC v = (ACC)p[i * st];                                                             \
        STEP(s, v, c);                                                                      \
      }                                                                                     \
    }                                                                                       \
    *(ACC *)accv += s;                                                                      \
  }

/* integer sums / non-zero counts: wrapping unsigned accumulators */
#define GEN_RUN_IADD(name, T, EXPR)                                                         \
  static void name(void *accv, const void *pv, int64_t n, int64_t st, double c, double P) { \
    const T *p = (const T *)pv;                                                             \
    uint64_t s = 0;                                                                         \
    (void)c;                                                                                \
    (void)P;                                                                                \
    if (st == 1) {                                                                          \
      _Pragma("omp simd reduction(+ : s)") for (int64_t i = 0; i < n; i++) {                \
        T v = p[i];                                                                         \
        s += (uint64_t)(EXPR);                                                              \
      }                                                                                     \
    } else {                                                                                \
      for (int64_t i = 0; i < n; i++) {                                                     \
        T v = p[i * st];                                                                    \
        s += (uint64_t)(EXPR);                                                              \
      }                                                                                     \
    }                                                                                       \
    int64_t *a = (int64_t *)accv;                                                           \
    *a = (int64_t)((uint64_t)*a + s);                                                       \
  }

#define GEN_RUN_PROD(name, T, ACC, UACC)                                                    \
  static void name(void *accv, const void *pv, int64_t n, int64_t st, double c, double P) { \
    const T *p = (const T *)pv;                                                             \
    UACC s = 1;                                                                             \
    (void)c;                                                                                \
    (void)P;                                                                                \
    if (st == 1) {                                                                          \
      _Pragma("omp simd reduction(* : s)") for (int64_t i = 0; i < n; i++) s *= (UACC)p[i]; \
    } else {                                                                                \
      for (int64_t i = 0; i < n; i++) s *= (UACC)p[i * st];                                 \
    }                                                                                       \
    ACC *a = (ACC *)accv;                                                                   \
    *a = (ACC)((UACC)*a * s);                                                               \
  }

/* max/min (of v or |v|): a simd max plus a NaN flag; NaN is sticky. */
#define PD_PRAGMA(x) _Pragma(#x)
#define GEN_RUN_EXT(name, T, ACC, OPR, CMP, INIT, MAP, NANV)                                      \
  static void name(void *accv, const void *pv, int64_t n, int64_t st, double c, double P) {       \
    const T *p = (const T *)pv;                                                                   \
    ACC m = INIT;                                                                                 \
    int nan = 0;                                                                                  \
    (void)c;                                                                                      \
    (void)P;                                                                                      \
    if (st == 1) {                                                                                \
      PD_PRAGMA(omp simd reduction(OPR : m) reduction(| : nan)) for (int64_t i = 0; i < n; i++) { \
        ACC v = MAP((ACC)p[i]);                                                                   \
        m = v CMP m ? v : m;                                                                      \
        nan |= v != v;                                                                            \
      }                                                                                           \
    } else {                                                                                      \
      for (int64_t i = 0; i < n; i++) {                                                           \
        ACC v = MAP((ACC)p[i * st]);                                                              \
        m = v CMP m ? v : m;                                                                      \
        nan |= v != v;                                                                            \
      }                                                                                           \
    }                                                                                             \
    ACC *a = (ACC *)accv;                                                                         \
    if (nan)                                                                                      \
      *a = NANV;                                                                                  \
    else if (m CMP * a)                                                                           \
      *a = m;                                                                                     \
  }

/* all / any: a simd or-reduction of a flag */
#define GEN_RUN_LOGIC(name, T, ACC, FLAG_EXPR, ON_FLAG)                                     \
  static void name(void *accv, const void *pv, int64_t n, int64_t st, double c, double P) { \
    const T *p = (const T *)pv;                                                             \
    int f = 0;                                                                              \
    (void)c;                                                                                \
    (void)P;                                                                                \
    if (st == 1) {                                                                          \
      _Pragma("omp simd reduction(| : f)") for (int64_t i = 0; i < n; i++) {                \
        T v = p[i];                                                                         \
        f |= (FLAG_EXPR);                                                                   \
      }                                                                                     \
    } else {                                                                                \
      for (int64_t i = 0; i < n; i++) {                                                     \
        T v = p[i * st];                                                                    \
        f |= (FLAG_EXPR);                                                                   \
      }                                                                                     \
    }                                                                                       \
    if (f) *(ACC *)accv = (ON_FLAG);                                                        \
  }

#define IDENT(v) (v)

/* float32 sums: float partials over blocks, combined in double */
static void run_sum_f32(void *accv, const void *pv, int64_t n, int64_t st, double c, double P) {
  const float *p = pv;
  double a = *(double *)accv;
  (void)c;
  (void)P;
  if (st == 1) {
    for (int64_t i0 = 0; i0 < n; i0 += FBLOCK) {
      int64_t m = n - i0 < FBLOCK ? n - i0 : FBLOCK;
      const float *q = p + i0;
      float s = 0;
#pragma omp simd reduction(+ : s)
      for (int64_t i = 0; i < m; i++) s += q[i];
      a += s;
    }
  } else {
    for (int64_t i = 0; i < n; i++) a += p[i * st];
  }
  *(double *)accv = a;
}

/* float32 row sums: float partials over blocks of rows, added into the
 * double accumulators (twice the vector width of double adds) */
#define RBLOCK 64
static void rows_sumd_f32(void *accv, const void *pv, int64_t K, int64_t kst, int64_t nrows, int64_t rst,
                          const double *c, double P);
static void rows_sum_f32(void *accv, const void *pv, int64_t K, int64_t kst, int64_t nrows, int64_t rst,
                         const double *c, double P) {
  if (kst != 1 || K > RTILE || (rst == K && K < SHORT_K)) {
    rows_sumd_f32(accv, pv, K, kst, nrows, rst, c, P);
    return;
  }
  double *acc = accv;
  const float *p = pv;
  float tmp[RTILE];
  for (int64_t r0 = 0; r0 < nrows; r0 += RBLOCK) {
    int64_t r1 = r0 + RBLOCK < nrows ? r0 + RBLOCK : nrows;
    const float *q0 = p + r0 * rst;
#pragma omp simd
    for (int64_t k = 0; k < K; k++) tmp[k] = q0[k];
    for (int64_t r = r0 + 1; r < r1; r++) {
      const float *q = p + r * rst;
#pragma omp simd
      for (int64_t k = 0; k < K; k++) tmp[k] += q[k];
    }
#pragma omp simd
    for (int64_t k = 0; k < K; k++) acc[k] += tmp[k];
  }
}

/* float types: every kind */
#define GEN_FLOAT(sfx, T)                                                \
  GEN_ROWS(rows_sumd_##sfx, T, double, STEP_SUM, COMB_ADD, 0.0)          \
  GEN_ROWS(rows_prod_##sfx, T, double, STEP_PROD, STEP_PROD, 1.0)        \
  GEN_ROWS(rows_max_##sfx, T, double, STEP_MAX, STEP_MAX, -INFINITY)     \
  GEN_ROWS(rows_min_##sfx, T, double, STEP_MIN, STEP_MIN, INFINITY)      \
  GEN_ROWS(rows_all_##sfx, T, double, STEP_ALL, STEP_ALL, 1.0)           \
  GEN_ROWS(rows_any_##sfx, T, double, STEP_ANY, STEP_ANY, 0.0)           \
  GEN_ROWS(rows_cnz_##sfx, T, double, STEP_COUNT_NZ, COMB_ADD, 0.0)      \
  GEN_ROWS(rows_sq_##sfx, T, double, STEP_SUMSQ, COMB_ADD, 0.0)          \
  GEN_ROWS(rows_sqd_##sfx, T, double, STEP_SUMSQ_DEV, COMB_ADD, 0.0)     \
  GEN_ROWS(rows_exd_##sfx, T, double, STEP_SUMEXP_DEV, COMB_ADD, 0.0)    \
  GEN_ROWS(rows_abs_##sfx, T, double, STEP_ABS_SUM, COMB_ADD, 0.0)       \
  GEN_ROWS(rows_apw_##sfx, T, double, STEP_ABS_POW, COMB_ADD, 0.0)       \
  GEN_ROWS(rows_amx_##sfx, T, double, STEP_ABS_MAX, STEP_MAX, -INFINITY) \
  GEN_ROWS(rows_amn_##sfx, T, double, STEP_ABS_MIN, STEP_MIN, INFINITY)  \
  GEN_RUN_ADD(run_cnz_##sfx, T, double, STEP_COUNT_NZ)                   \
  GEN_RUN_ADD(run_sq_##sfx, T, double, STEP_SUMSQ)                       \
  GEN_RUN_ADD(run_sqd_##sfx, T, double, STEP_SUMSQ_DEV)                  \
  GEN_RUN_ADD(run_exd_##sfx, T, double, STEP_SUMEXP_DEV)                 \
  GEN_RUN_ADD(run_abs_##sfx, T, double, STEP_ABS_SUM)                    \
  GEN_RUN_ADD(run_apw_##sfx, T, double, STEP_ABS_POW)                    \
  GEN_RUN_PROD(run_prod_##sfx, T, double, double)                        \
  GEN_RUN_EXT(run_max_##sfx, T, double, max, >, -INFINITY, IDENT, NAN)   \
  GEN_RUN_EXT(run_min_##sfx, T, double, min, <, INFINITY, IDENT, NAN)    \
  GEN_RUN_EXT(run_amx_##sfx, T, double, max, >, -INFINITY, fabs, NAN)    \
  GEN_RUN_EXT(run_amn_##sfx, T, double, min, <, INFINITY, fabs, NAN)     \
  GEN_RUN_LOGIC(run_all_##sfx, T, double, v == 0, 0.0)                   \
  GEN_RUN_LOGIC(run_any_##sfx, T, double, v != 0, 1.0)

/* integer types (and bool as uint8): the integer kinds */
#define GEN_INT(sfx, T)                                               \
  GEN_ROWS(rows_sum_##sfx, T, int64_t, STEP_ISUM, STEP_ISUM, 0)       \
  GEN_ROWS(rows_prod_##sfx, T, int64_t, STEP_IPROD, STEP_IPROD, 1)    \
  GEN_ROWS(rows_max_##sfx, T, int64_t, STEP_MAX, STEP_MAX, INT64_MIN) \
  GEN_ROWS(rows_min_##sfx, T, int64_t, STEP_MIN, STEP_MIN, INT64_MAX) \
  GEN_ROWS(rows_all_##sfx, T, int64_t, STEP_ALL, STEP_ALL, 1)         \
  GEN_ROWS(rows_any_##sfx, T, int64_t, STEP_ANY, STEP_ANY, 0)         \
  GEN_ROWS(rows_cnz_##sfx, T, int64_t, STEP_COUNT_NZ, STEP_ISUM, 0)   \
  GEN_RUN_IADD(run_sum_##sfx, T, v)                                   \
  GEN_RUN_IADD(run_cnz_##sfx, T, v != 0)                              \
  GEN_RUN_PROD(run_prod_##sfx, T, int64_t, uint64_t)                  \
  GEN_RUN_EXT(run_max_##sfx, T, int64_t, max, >, INT64_MIN, IDENT, 0) \
  GEN_RUN_EXT(run_min_##sfx, T, int64_t, min, <, INT64_MAX, IDENT, 0) \
  GEN_RUN_LOGIC(run_all_##sfx, T, int64_t, v == 0, 0)                 \
  GEN_RUN_LOGIC(run_any_##sfx, T, int64_t, v != 0, 1)

GEN_FLOAT(f32, float)
GEN_FLOAT(f64, double)
GEN_RUN_ADD(run_sumd_f64, double, double, STEP_SUM)
#define rows_sum_f64 rows_sumd_f64
GEN_INT(u8, uint8_t)
GEN_INT(i8, int8_t)
GEN_INT(i16, int16_t)
GEN_INT(i32, int32_t)
GEN_INT(i64, int64_t)

typedef struct kernel_pair {
  run_fn run;
  rows_fn rows;
} kernel_pair;

#define FLOAT_ROW(sfx, sumrun)                                                                               \
  {                                                                                                          \
    [PD_RK_SUM] = {sumrun, rows_sum_##sfx}, [PD_RK_PROD] = {run_prod_##sfx, rows_prod_##sfx},                \
    [PD_RK_MAX] = {run_max_##sfx, rows_max_##sfx}, [PD_RK_MIN] = {run_min_##sfx, rows_min_##sfx},            \
    [PD_RK_ALL] = {run_all_##sfx, rows_all_##sfx}, [PD_RK_ANY] = {run_any_##sfx, rows_any_##sfx},            \
    [PD_RK_COUNT_NZ] = {run_cnz_##sfx, rows_cnz_##sfx}, [PD_RK_SUMSQ_DEV] = {run_sqd_##sfx, rows_sqd_##sfx}, \
    [PD_RK_SUMSQ] = {run_sq_##sfx, rows_sq_##sfx}, [PD_RK_SUMEXP_DEV] = {run_exd_##sfx, rows_exd_##sfx},     \
    [PD_RK_ABS_SUM] = {run_abs_##sfx, rows_abs_##sfx}, [PD_RK_ABS_POW] = {run_apw_##sfx, rows_apw_##sfx},    \
    [PD_RK_ABS_MAX] = {run_amx_##sfx, rows_amx_##sfx}, [PD_RK_ABS_MIN] = {                                   \
      run_amn_##sfx,                                                                                         \
      rows_amn_##sfx                                                                                         \
    }                                                                                                        \
  }
#define INT_ROW(sfx)                                                                                 \
  {                                                                                                  \
    [PD_RK_SUM] = {run_sum_##sfx, rows_sum_##sfx}, [PD_RK_PROD] = {run_prod_##sfx, rows_prod_##sfx}, \
    [PD_RK_MAX] = {run_max_##sfx, rows_max_##sfx}, [PD_RK_MIN] = {run_min_##sfx, rows_min_##sfx},    \
    [PD_RK_ALL] = {run_all_##sfx, rows_all_##sfx}, [PD_RK_ANY] = {run_any_##sfx, rows_any_##sfx},    \
    [PD_RK_COUNT_NZ] = {                                                                             \
      run_cnz_##sfx,                                                                                 \
      rows_cnz_##sfx                                                                                 \
    }                                                                                                \
  }

static const kernel_pair k_table[PD_NUM_DTYPES][PD_RK_NUM] = {
    [PD_FLOAT32] = FLOAT_ROW(f32, run_sum_f32),
    [PD_FLOAT64] = FLOAT_ROW(f64, run_sumd_f64),
    [PD_BOOL] = INT_ROW(u8),
    [PD_UINT8] = INT_ROW(u8),
    [PD_INT8] = INT_ROW(i8),
    [PD_INT16] = INT_ROW(i16),
    [PD_INT32] = INT_ROW(i32),
    [PD_INT64] = INT_ROW(i64),
};

/* ---- identities, combining partials, finalizing --------------------------- */
static double init_d(pd_reduce_kind k) {
  switch (k) {
    case PD_RK_PROD:
    case PD_RK_ALL:
      return 1.0;
    case PD_RK_MAX:
    case PD_RK_ABS_MAX:
      return -INFINITY;
    case PD_RK_MIN:
    case PD_RK_ABS_MIN:
      return INFINITY;
    default:
      return 0.0;
  }
}
static int64_t init_i(pd_reduce_kind k) {
  switch (k) {
    case PD_RK_PROD:
    case PD_RK_ALL:
      return 1;
    case PD_RK_MAX:
      return INT64_MIN;
    case PD_RK_MIN:
      return INT64_MAX;
    default:
      return 0;
  }
}

static double combine_d(pd_reduce_kind k, double a, double b) {
  switch (k) {
    case PD_RK_PROD:
      return a * b;
    case PD_RK_MAX:
    case PD_RK_ABS_MAX:
      return (b > a || b != b) && a == a ? b : a;
    case PD_RK_MIN:
    case PD_RK_ABS_MIN:
      return (b < a || b != b) && a == a ? b : a;
    case PD_RK_ALL:
      return (a != 0 && b != 0) ? 1.0 : 0.0;
    case PD_RK_ANY:
      return (a != 0 || b != 0) ? 1.0 : 0.0;
    default:
      return a + b;
  }
}
static int64_t combine_i(pd_reduce_kind k, int64_t a, int64_t b) {
  switch (k) {
    case PD_RK_PROD:
      return (int64_t)((uint64_t)a * (uint64_t)b);
    case PD_RK_MAX:
      return b > a ? b : a;
    case PD_RK_MIN:
      return b < a ? b : a;
    case PD_RK_ALL:
      return a != 0 && b != 0;
    case PD_RK_ANY:
      return a != 0 || b != 0;
    default:
      return (int64_t)((uint64_t)a + (uint64_t)b);
  }
}

/* Stores n folded values (outputs i0..i0+n) after the post op. */
static void finalize_d(const pd_reduce_spec *s, double *acc, int64_t i0, int64_t n, void *out, pd_dtype odt) {
  switch (s->post) {
    case PD_RP_DIV:
      for (int64_t i = 0; i < n; i++) acc[i] /= s->d;
      break;
    case PD_RP_LOG_ADD_C:
      for (int64_t i = 0; i < n; i++) acc[i] = log(acc[i]) + s->center[i0 + i];
      break;
    case PD_RP_SQRT_DIV:
      for (int64_t i = 0; i < n; i++) acc[i] = sqrt(acc[i] / s->d);
      break;
    case PD_RP_ROOT:
      for (int64_t i = 0; i < n; i++) acc[i] = pow(acc[i], 1.0 / s->p);
      break;
    default:
      break;
  }
  switch (odt) {
    case PD_FLOAT32: {
      float *o = (float *)out + i0;
      for (int64_t i = 0; i < n; i++) o[i] = (float)acc[i];
      break;
    }
    case PD_FLOAT64:
      memcpy((double *)out + i0, acc, sizeof(double) * (size_t)n);
      break;
    default: {
      size_t es = pd_dtype_size(odt);
      for (int64_t i = 0; i < n; i++) pd_store_from_f64((char *)out + (size_t)(i0 + i) * es, odt, acc[i]);
    }
  }
}

static void finalize_i(const pd_reduce_spec *s, int64_t *acc, int64_t i0, int64_t n, void *out,
                       pd_dtype odt) {
  if (s->post != PD_RP_NONE || pd_dtype_is_floating(odt)) {
    double tmp[CHUNK];
    for (int64_t b = 0; b < n; b += CHUNK) {
      int64_t m = n - b < CHUNK ? n - b : CHUNK;
      for (int64_t i = 0; i < m; i++) tmp[i] = (double)acc[b + i];
      finalize_d(s, tmp, i0 + b, m, out, odt);
    }
    return;
  }
  switch (odt) {
    case PD_INT64:
      memcpy((int64_t *)out + i0, acc, sizeof(int64_t) * (size_t)n);
      break;
    case PD_INT32:
      for (int64_t i = 0; i < n; i++) ((int32_t *)out)[i0 + i] = (int32_t)acc[i];
      break;
    case PD_INT16:
      for (int64_t i = 0; i < n; i++) ((int16_t *)out)[i0 + i] = (int16_t)acc[i];
      break;
    case PD_INT8:
      for (int64_t i = 0; i < n; i++) ((int8_t *)out)[i0 + i] = (int8_t)acc[i];
      break;
    case PD_UINT8:
      for (int64_t i = 0; i < n; i++) ((uint8_t *)out)[i0 + i] = (uint8_t)acc[i];
      break;
    case PD_BOOL:
      for (int64_t i = 0; i < n; i++) ((uint8_t *)out)[i0 + i] = acc[i] != 0;
      break;
    default:
      break;
  }
}

/* ---- walking the reduced range -------------------------------------------- */
typedef struct walk {
  const pd_reduce_geom *g;
  const pd_reduce_spec *s;
  kernel_pair k;
  bool fl;     /* double accumulators */
  size_t es;   /* input element size */
  int64_t kst; /* rows mode: stride of the innermost kept dim */
  pd_dtype odt;
  void *out;
} walk;

/* Folds reduced elements [j0, j1) starting at base into acc: runs along the
 * innermost reduced dim; rows mode (K > 0) folds whole rows of K elements. */
static void fold_range(const walk *w, void *acc, const char *base, int64_t K, const double *crow, double c,
                       int64_t j0, int64_t j1) {
  const pd_reduce_geom *g = w->g;
  int last = g->nred - 1;
  int64_t L = last >= 0 ? g->red_shape[last] : 1, st = last >= 0 ? g->red_stride[last] : 0;
  int64_t idx[PD_MAX_DIMS], off = 0, q = j0 / L, pos = j0 % L;
  for (int d = last - 1; d >= 0; d--) {
    idx[d] = q % g->red_shape[d];
    q /= g->red_shape[d];
    off += idx[d] * g->red_stride[d];
  }
  int64_t es = (int64_t)w->es;
  for (int64_t j = j0; j < j1;) {
    int64_t n = L - pos < j1 - j ? L - pos : j1 - j;
    const char *p = base + (off + pos * st) * es;
    if (K > 0)
      w->k.rows(acc, p, K, w->kst, n, st, crow, w->s->p);
    else
      w->k.run(acc, p, n, st, c, w->s->p);
    j += n;
    pos = 0;
    for (int d = last - 1; d >= 0; d--) {
      off += g->red_stride[d];
      if (++idx[d] < g->red_shape[d]) break;
      off -= g->red_shape[d] * g->red_stride[d];
      idx[d] = 0;
    }
  }
}

/* ---- fixed blocks of the reduced range ------------------------------------
 * A long reduced range is folded in blocks whose bounds depend only on the
 * geometry, each from the identity, and the block partials are combined in
 * block order. One thread folding every block and several threads folding
 * them in parallel therefore give the same bits, for any thread count. */

/* Reduced elements per block of one output (per-output mode), at least. */
#define RED_BLOCK 16384
/* Elements (rows x tile width) per block of a rows tile, at least. */
#define ROWS_BLOCK_ELEMS 65536
/* Blocks per output at most (per-output mode; rows mode: MAX_ROW_BLOCKS). */
#define MAX_BLOCKS 256
#define MAX_ROW_BLOCKS 64

/* The length of the blocks a range of n is cut into: at least `min_len`, and
 * few enough that there are at most max_blocks of them. */
static int64_t block_len(int64_t n, int64_t min_len, int64_t max_blocks) {
  int64_t b = (n + max_blocks - 1) / max_blocks;
  return b > min_len ? b : min_len;
}
static inline int64_t out_block_len(const pd_reduce_geom *g) {
  return block_len(g->n_red, RED_BLOCK, MAX_BLOCKS);
}
/* Rows mode: reduced rows per block for tiles of tk outputs (whole groups of
 * RBLOCK rows, the float partials of rows_sum_f32). */
static inline int64_t rows_block_len(const pd_reduce_geom *g, int64_t tk) {
  int64_t min_rows = (ROWS_BLOCK_ELEMS + tk - 1) / tk;
  min_rows = (min_rows + RBLOCK - 1) / RBLOCK * RBLOCK;
  return block_len(g->n_red, min_rows, MAX_ROW_BLOCKS);
}

static void init_acc(const walk *w, void *acc, int64_t n) {
  if (w->fl)
    for (int64_t k = 0; k < n; k++) ((double *)acc)[k] = init_d(w->s->kind);
  else
    for (int64_t k = 0; k < n; k++) ((int64_t *)acc)[k] = init_i(w->s->kind);
}
/* acc[k] = combine(acc[k], part[k]) for k < n */
static void combine_acc(const walk *w, void *acc, const void *part, int64_t n) {
  if (w->fl)
    for (int64_t k = 0; k < n; k++)
      ((double *)acc)[k] = combine_d(w->s->kind, ((double *)acc)[k], ((const double *)part)[k]);
  else
    for (int64_t k = 0; k < n; k++)
      ((int64_t *)acc)[k] = combine_i(w->s->kind, ((int64_t *)acc)[k], ((const int64_t *)part)[k]);
}

static inline double center_at(const walk *w, int64_t i) { return w->s->center ? w->s->center[i] : 0.0; }

/* The fold of output i over its whole reduced range into *acc, block by block. */
static void fold_output(const walk *w, void *acc, const char *base, double c) {
  int64_t n = w->g->n_red, bl = out_block_len(w->g);
  init_acc(w, acc, 1);
  fold_range(w, acc, base, 0, NULL, c, 0, n < bl ? n : bl);
  for (int64_t j0 = bl; j0 < n; j0 += bl) {
    union {
      double d;
      int64_t i;
    } part;
    init_acc(w, &part, 1);
    fold_range(w, &part, base, 0, NULL, c, j0, n - j0 < bl ? n : j0 + bl);
    combine_acc(w, acc, &part, 1);
  }
}

/* One output per call, outputs [i0, i1), each over the whole reduced range. */
static void per_output_chunk(const walk *w, const char *x, int64_t i0, int64_t i1) {
  double accd[CHUNK];
  int64_t acci[CHUNK];
  for (int64_t b = i0; b < i1; b += CHUNK) {
    int64_t m = i1 - b < CHUNK ? i1 - b : CHUNK;
    for (int64_t t = 0; t < m; t++) {
      int64_t i = b + t;
      const char *base = x + pdk_reduce_keep_offset(w->g, i) * (int64_t)w->es;
      fold_output(w, w->fl ? (void *)&accd[t] : (void *)&acci[t], base, center_at(w, i));
    }
    if (w->fl)
      finalize_d(w->s, accd, b, m, w->out, w->odt);
    else
      finalize_i(w->s, acci, b, m, w->out, w->odt);
  }
}

/* One output, its blocks folded on nt threads, then combined in order: the
 * same bits as fold_output. */
static void per_output_split(const walk *w, const char *x, int64_t i, int nt) {
  double pd[MAX_BLOCKS];
  int64_t pi[MAX_BLOCKS];
  const char *base = x + pdk_reduce_keep_offset(w->g, i) * (int64_t)w->es;
  int64_t n = w->g->n_red, bl = out_block_len(w->g), nb = (n + bl - 1) / bl;
  double c = center_at(w, i);
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int64_t b = 0; b < nb; b++) {
    void *a = w->fl ? (void *)&pd[b] : (void *)&pi[b];
    init_acc(w, a, 1);
    fold_range(w, a, base, 0, NULL, c, b * bl, n - b * bl < bl ? n : (b + 1) * bl);
  }
  void *acc = w->fl ? (void *)pd : (void *)pi;
  for (int64_t b = 1; b < nb; b++) combine_acc(w, acc, w->fl ? (void *)&pd[b] : (void *)&pi[b], 1);
  if (w->fl)
    finalize_d(w->s, pd, i, 1, w->out, w->odt);
  else
    finalize_i(w->s, pi, i, 1, w->out, w->odt);
}

/* Rows mode: task = (outer kept index o, tile [k0, k0 + tk) of the innermost
 * kept dim), folded over the reduced range [j0, j1) into acc. */
static void rows_fold(const walk *w, const char *x, void *acc, int64_t o, int64_t k0, int64_t tk, int64_t kin,
                      int64_t j0, int64_t j1) {
  const pd_reduce_geom *g = w->g;
  int64_t i0 = o * kin + k0;
  const char *base =
      x + (offset_of(g->nkeep - 1, g->keep_shape, g->keep_stride, o) + k0 * w->kst) * (int64_t)w->es;
  const double *crow = w->s->center ? w->s->center + i0 : NULL;
  init_acc(w, acc, tk);
  fold_range(w, acc, base, tk, crow, 0, j0, j1);
}

typedef union rows_acc {
  double d[RTILE];
  int64_t i[RTILE];
} rows_acc;

static void rows_task(const walk *w, const char *x, int64_t o, int64_t k0, int64_t tk, int64_t kin) {
  rows_acc acc, part;
  int64_t n = w->g->n_red, bl = rows_block_len(w->g, tk);
  rows_fold(w, x, &acc, o, k0, tk, kin, 0, n < bl ? n : bl);
  for (int64_t j0 = bl; j0 < n; j0 += bl) {
    rows_fold(w, x, &part, o, k0, tk, kin, j0, n - j0 < bl ? n : j0 + bl);
    combine_acc(w, &acc, &part, tk);
  }
  if (w->fl)
    finalize_d(w->s, acc.d, o * kin + k0, tk, w->out, w->odt);
  else
    finalize_i(w->s, acc.i, o * kin + k0, tk, w->out, w->odt);
}

/* Rows mode with few tasks: the row blocks of one task folded on nt threads
 * into buf (MAX_ROW_BLOCKS tiles), combined in order: the same bits as
 * rows_task. */
static void rows_task_split(const walk *w, const char *x, int64_t o, int64_t k0, int64_t tk, int64_t kin,
                            int nt, rows_acc *buf) {
  int64_t n = w->g->n_red, bl = rows_block_len(w->g, tk), nb = (n + bl - 1) / bl;
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int64_t b = 0; b < nb; b++)
    rows_fold(w, x, &buf[b], o, k0, tk, kin, b * bl, n - b * bl < bl ? n : (b + 1) * bl);
  for (int64_t b = 1; b < nb; b++) combine_acc(w, &buf[0], &buf[b], tk);
  if (w->fl)
    finalize_d(w->s, buf[0].d, o * kin + k0, tk, w->out, w->odt);
  else
    finalize_i(w->s, buf[0].i, o * kin + k0, tk, w->out, w->odt);
}

static int run_rows(const walk *w, const char *x, int nt) {
  const pd_reduce_geom *g = w->g;
  int64_t kin = g->keep_shape[g->nkeep - 1], n_outer = g->n_out / kin;
  int64_t ntile = (kin + RTILE - 1) / RTILE, tasks = n_outer * ntile;
  int64_t tk0 = kin < RTILE ? kin : RTILE;
  if (nt == 1 || tasks >= 4 * nt || g->n_red <= rows_block_len(g, tk0)) {
    if (nt > 1) {
#pragma omp parallel for num_threads(nt) schedule(static)
      for (int64_t t = 0; t < tasks; t++) {
        int64_t o = t / ntile, k0 = (t % ntile) * RTILE;
        rows_task(w, x, o, k0, kin - k0 < RTILE ? kin - k0 : RTILE, kin);
      }
    } else {
      for (int64_t t = 0; t < tasks; t++) {
        int64_t o = t / ntile, k0 = (t % ntile) * RTILE;
        rows_task(w, x, o, k0, kin - k0 < RTILE ? kin - k0 : RTILE, kin);
      }
    }
    return 0;
  }
  int64_t nb = (g->n_red + rows_block_len(g, tk0) - 1) / rows_block_len(g, tk0);
  rows_acc *buf = malloc(sizeof *buf * (size_t)nb);
  if (!buf) return 2;
  for (int64_t t = 0; t < tasks; t++) {
    int64_t o = t / ntile, k0 = (t % ntile) * RTILE;
    rows_task_split(w, x, o, k0, kin - k0 < RTILE ? kin - k0 : RTILE, kin, nt, buf);
  }
  free(buf);
  return 0;
}

int pdk_reduce_run(const pd_reduce_geom *g, const pd_reduce_spec *s, const void *x, pd_dtype xdt, void *out,
                   pd_dtype odt) {
  if ((unsigned)xdt >= PD_NUM_DTYPES || (unsigned)s->kind >= PD_RK_NUM) return 1;
  walk w = {.g = g,
            .s = s,
            .k = k_table[xdt][s->kind],
            .fl = pd_dtype_is_floating(xdt),
            .es = pd_dtype_size(xdt),
            .odt = odt,
            .out = out};
  if (!w.k.run || !w.k.rows) return 1;
  if (g->n_out == 0) return 0;
  if (g->n_red == 0) { /* identities */
    double accd[CHUNK];
    int64_t acci[CHUNK];
    for (int64_t b = 0; b < g->n_out; b += CHUNK) {
      int64_t m = g->n_out - b < CHUNK ? g->n_out - b : CHUNK;
      for (int64_t t = 0; t < m; t++) {
        accd[t] = init_d(s->kind);
        acci[t] = init_i(s->kind);
      }
      if (w.fl)
        finalize_d(s, accd, b, m, out, odt);
      else
        finalize_i(s, acci, b, m, out, odt);
    }
    return 0;
  }
  const char *xb = x;
  int nt = g->n_out * g->n_red < GRAIN ? 1 : pd_loop_threads();
  /* loop shape: long unit-stride reduced runs fold per output; otherwise
   * blocks of outputs along the innermost kept dim fold whole rows */
  bool inner_unit = g->nred > 0 && g->red_stride[g->nred - 1] == 1;
  bool keep_unit = g->nkeep > 0 && g->keep_stride[g->nkeep - 1] == 1;
  bool long_runs = inner_unit && g->red_shape[g->nred - 1] >= MIN_RUN;
  if (g->nkeep > 0 && (keep_unit || !long_runs)) {
    w.kst = g->keep_stride[g->nkeep - 1];
    return run_rows(&w, xb, nt);
  }
  if (nt == 1 || g->n_out >= 4 * nt || g->n_red <= out_block_len(g)) {
    int64_t per = (g->n_out + nt - 1) / nt;
    if (nt > 1) {
#pragma omp parallel for num_threads(nt) schedule(static)
      for (int t = 0; t < nt; t++) {
        int64_t i0 = t * per, i1 = i0 + per < g->n_out ? i0 + per : g->n_out;
        if (i0 < i1) per_output_chunk(&w, xb, i0, i1);
      }
    } else {
      for (int t = 0; t < nt; t++) {
        int64_t i0 = t * per, i1 = i0 + per < g->n_out ? i0 + per : g->n_out;
        if (i0 < i1) per_output_chunk(&w, xb, i0, i1);
      }
    }
  } else {
    for (int64_t i = 0; i < g->n_out; i++) per_output_split(&w, xb, i, nt);
  }
  return 0;
}

int pdk_reduce_sum(const pd_reduce_geom *g, const void *x, pd_dtype xdt, void *out, pd_dtype odt) {
  pd_reduce_spec s = {.kind = PD_RK_SUM};
  return pdk_reduce_run(g, &s, x, xdt, out, odt);
}
