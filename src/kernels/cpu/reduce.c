/* The reduction driver (see reduce.h for the loop shapes). */
#include "reduce.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/tensor_impl.h"

/* Below this many input elements a reduction runs on one thread. */
#define GRAIN 32768
/* Outputs folded per finalize call / kept elements per row tile. */
#define CHUNK 256
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

void pd_reduce_geom_init(pd_reduce_geom *g, int ndim, const int64_t *shape, const int64_t *strides,
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

int64_t pd_reduce_keep_offset(const pd_reduce_geom *g, int64_t i) {
  return offset_of(g->nkeep, g->keep_shape, g->keep_stride, i);
}
int64_t pd_reduce_red_offset(const pd_reduce_geom *g, int64_t j) {
  return offset_of(g->nred, g->red_shape, g->red_stride, j);
}

/* ---- per-kind loop bodies -------------------------------------------------
 * acc is double for float inputs, int64 for integers/bool. Integer sums and
 * products wrap (computed unsigned), as Paddle's int kernels do. */
typedef void (*run_fn)(void *acc, const void *p, int64_t n, int64_t st, double c, double P);
typedef void (*rows_fn)(void *acc, const void *p, int64_t K, int64_t nrows, int64_t rst, const double *c,
                        double P);

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
#define STEP_SUMEXP_DEV(a, v, c) (a) += exp((v) - (c))
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

/* rows: acc[k] op= x[r * rst + k] for every row r, vectorised over k. */
#define GEN_ROWS(name, T, ACC, STEP)                                                                   \
  static void name(void *accv, const void *pv, int64_t K, int64_t nrows, int64_t rst, const double *c, \
                   double P) {                                                                         \
    ACC *acc = (ACC *)accv;                                                                            \
    const T *p = (const T *)pv;                                                                        \
    (void)c;                                                                                           \
    (void)P;                                                                                           \
    for (int64_t r = 0; r < nrows; r++) {                                                              \
      const T *q = p + r * rst;                                                                        \
      _Pragma("omp simd") for (int64_t k = 0; k < K; k++) {                                            \
        ACC v = (ACC)q[k];                                                                             \
        STEP(acc[k], v, c[k]);                                                                         \
      }                                                                                                \
    }                                                                                                  \
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

/* float types: every kind */
#define GEN_FLOAT(sfx, T)                                              \
  GEN_ROWS(rows_sum_##sfx, T, double, STEP_SUM)                        \
  GEN_ROWS(rows_prod_##sfx, T, double, STEP_PROD)                      \
  GEN_ROWS(rows_max_##sfx, T, double, STEP_MAX)                        \
  GEN_ROWS(rows_min_##sfx, T, double, STEP_MIN)                        \
  GEN_ROWS(rows_all_##sfx, T, double, STEP_ALL)                        \
  GEN_ROWS(rows_any_##sfx, T, double, STEP_ANY)                        \
  GEN_ROWS(rows_cnz_##sfx, T, double, STEP_COUNT_NZ)                   \
  GEN_ROWS(rows_sq_##sfx, T, double, STEP_SUMSQ)                       \
  GEN_ROWS(rows_sqd_##sfx, T, double, STEP_SUMSQ_DEV)                  \
  GEN_ROWS(rows_exd_##sfx, T, double, STEP_SUMEXP_DEV)                 \
  GEN_ROWS(rows_abs_##sfx, T, double, STEP_ABS_SUM)                    \
  GEN_ROWS(rows_apw_##sfx, T, double, STEP_ABS_POW)                    \
  GEN_ROWS(rows_amx_##sfx, T, double, STEP_ABS_MAX)                    \
  GEN_ROWS(rows_amn_##sfx, T, double, STEP_ABS_MIN)                    \
  GEN_RUN_ADD(run_cnz_##sfx, T, double, STEP_COUNT_NZ)                 \
  GEN_RUN_ADD(run_sq_##sfx, T, double, STEP_SUMSQ)                     \
  GEN_RUN_ADD(run_sqd_##sfx, T, double, STEP_SUMSQ_DEV)                \
  GEN_RUN_ADD(run_exd_##sfx, T, double, STEP_SUMEXP_DEV)               \
  GEN_RUN_ADD(run_abs_##sfx, T, double, STEP_ABS_SUM)                  \
  GEN_RUN_ADD(run_apw_##sfx, T, double, STEP_ABS_POW)                  \
  GEN_RUN_PROD(run_prod_##sfx, T, double, double)                      \
  GEN_RUN_EXT(run_max_##sfx, T, double, max, >, -INFINITY, IDENT, NAN) \
  GEN_RUN_EXT(run_min_##sfx, T, double, min, <, INFINITY, IDENT, NAN)  \
  GEN_RUN_EXT(run_amx_##sfx, T, double, max, >, -INFINITY, fabs, NAN)  \
  GEN_RUN_EXT(run_amn_##sfx, T, double, min, <, INFINITY, fabs, NAN)   \
  GEN_RUN_LOGIC(run_all_##sfx, T, double, v == 0, 0.0)                 \
  GEN_RUN_LOGIC(run_any_##sfx, T, double, v != 0, 1.0)

/* integer types (and bool as uint8): the integer kinds */
#define GEN_INT(sfx, T)                                               \
  GEN_ROWS(rows_sum_##sfx, T, int64_t, STEP_ISUM)                     \
  GEN_ROWS(rows_prod_##sfx, T, int64_t, STEP_IPROD)                   \
  GEN_ROWS(rows_max_##sfx, T, int64_t, STEP_MAX)                      \
  GEN_ROWS(rows_min_##sfx, T, int64_t, STEP_MIN)                      \
  GEN_ROWS(rows_all_##sfx, T, int64_t, STEP_ALL)                      \
  GEN_ROWS(rows_any_##sfx, T, int64_t, STEP_ANY)                      \
  GEN_ROWS(rows_cnz_##sfx, T, int64_t, STEP_COUNT_NZ)                 \
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
  bool fl;   /* double accumulators */
  size_t es; /* input element size */
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
      w->k.rows(acc, p, K, n, st, crow, w->s->p);
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

static inline double center_at(const walk *w, int64_t i) { return w->s->center ? w->s->center[i] : 0.0; }

/* One output per call, outputs [i0, i1), each over the whole reduced range. */
static void per_output_chunk(const walk *w, const char *x, int64_t i0, int64_t i1) {
  double accd[CHUNK];
  int64_t acci[CHUNK];
  for (int64_t b = i0; b < i1; b += CHUNK) {
    int64_t m = i1 - b < CHUNK ? i1 - b : CHUNK;
    for (int64_t t = 0; t < m; t++) {
      int64_t i = b + t;
      const char *base = x + pd_reduce_keep_offset(w->g, i) * (int64_t)w->es;
      void *a = w->fl ? (void *)&accd[t] : (void *)&acci[t];
      if (w->fl)
        accd[t] = init_d(w->s->kind);
      else
        acci[t] = init_i(w->s->kind);
      fold_range(w, a, base, 0, NULL, center_at(w, i), 0, w->g->n_red);
    }
    if (w->fl)
      finalize_d(w->s, accd, b, m, w->out, w->odt);
    else
      finalize_i(w->s, acci, b, m, w->out, w->odt);
  }
}

/* One output, its reduced range split over nt threads. */
static void per_output_split(const walk *w, const char *x, int64_t i, int nt) {
  double pd[64];
  int64_t pi[64];
  if (nt > 64) nt = 64;
  const char *base = x + pd_reduce_keep_offset(w->g, i) * (int64_t)w->es;
  int64_t n = w->g->n_red;
  double c = center_at(w, i);
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int t = 0; t < nt; t++) {
    int64_t j0 = n * t / nt, j1 = n * (t + 1) / nt;
    pd[t] = init_d(w->s->kind);
    pi[t] = init_i(w->s->kind);
    fold_range(w, w->fl ? (void *)&pd[t] : (void *)&pi[t], base, 0, NULL, c, j0, j1);
  }
  if (w->fl) {
    double a = pd[0];
    for (int t = 1; t < nt; t++) a = combine_d(w->s->kind, a, pd[t]);
    finalize_d(w->s, &a, i, 1, w->out, w->odt);
  } else {
    int64_t a = pi[0];
    for (int t = 1; t < nt; t++) a = combine_i(w->s->kind, a, pi[t]);
    finalize_i(w->s, &a, i, 1, w->out, w->odt);
  }
}

/* Rows mode: task = (outer kept index o, tile of the innermost kept dim). */
static void rows_task(const walk *w, const char *x, int64_t o, int64_t k0, int64_t tk, int64_t kin) {
  const pd_reduce_geom *g = w->g;
  double accd[CHUNK];
  int64_t acci[CHUNK];
  int64_t i0 = o * kin + k0;
  const char *base = x + (offset_of(g->nkeep - 1, g->keep_shape, g->keep_stride, o) + k0) * (int64_t)w->es;
  const double *crow = w->s->center ? w->s->center + i0 : NULL;
  if (w->fl)
    for (int64_t k = 0; k < tk; k++) accd[k] = init_d(w->s->kind);
  else
    for (int64_t k = 0; k < tk; k++) acci[k] = init_i(w->s->kind);
  fold_range(w, w->fl ? (void *)accd : (void *)acci, base, tk, crow, 0, 0, g->n_red);
  if (w->fl)
    finalize_d(w->s, accd, i0, tk, w->out, w->odt);
  else
    finalize_i(w->s, acci, i0, tk, w->out, w->odt);
}

/* Rows mode with few tasks: the reduced rows of one task split over threads,
 * partials in buf (nt * CHUNK accumulators). */
static void rows_task_split(const walk *w, const char *x, int64_t o, int64_t k0, int64_t tk, int64_t kin,
                            int nt, void *buf) {
  const pd_reduce_geom *g = w->g;
  double(*pd)[CHUNK] = buf;
  int64_t(*pi)[CHUNK] = buf;
  int64_t i0 = o * kin + k0, n = g->n_red;
  const char *base = x + (offset_of(g->nkeep - 1, g->keep_shape, g->keep_stride, o) + k0) * (int64_t)w->es;
  const double *crow = w->s->center ? w->s->center + i0 : NULL;
#pragma omp parallel for num_threads(nt) schedule(static)
  for (int t = 0; t < nt; t++) {
    int64_t j0 = n * t / nt, j1 = n * (t + 1) / nt;
    for (int64_t k = 0; k < tk; k++) {
      if (w->fl)
        pd[t][k] = init_d(w->s->kind);
      else
        pi[t][k] = init_i(w->s->kind);
    }
    fold_range(w, w->fl ? (void *)pd[t] : (void *)pi[t], base, tk, crow, 0, j0, j1);
  }
  for (int t = 1; t < nt; t++)
    for (int64_t k = 0; k < tk; k++) {
      if (w->fl)
        pd[0][k] = combine_d(w->s->kind, pd[0][k], pd[t][k]);
      else
        pi[0][k] = combine_i(w->s->kind, pi[0][k], pi[t][k]);
    }
  if (w->fl)
    finalize_d(w->s, pd[0], i0, tk, w->out, w->odt);
  else
    finalize_i(w->s, pi[0], i0, tk, w->out, w->odt);
}

int pd_reduce_run(const pd_reduce_geom *g, const pd_reduce_spec *s, const void *x, pd_dtype xdt, void *out,
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
  int64_t total = g->n_out * g->n_red;
  int nt = total < GRAIN ? 1 : omp_get_max_threads();
  bool inner = g->nred > 0 && g->red_stride[g->nred - 1] == 1;
  bool rows = !inner && g->nkeep > 0 && g->keep_stride[g->nkeep - 1] == 1;
  if (rows) {
    int64_t kin = g->keep_shape[g->nkeep - 1], n_outer = g->n_out / kin;
    int64_t ntile = (kin + CHUNK - 1) / CHUNK, tasks = n_outer * ntile;
    if (nt == 1 || tasks >= 4 * nt || g->n_red < 4 * CHUNK) {
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
      for (int64_t t = 0; t < tasks; t++) {
        int64_t o = t / ntile, k0 = (t % ntile) * CHUNK;
        rows_task(&w, xb, o, k0, kin - k0 < CHUNK ? kin - k0 : CHUNK, kin);
      }
    } else {
      void *buf = malloc(sizeof(double) * CHUNK * (size_t)nt);
      if (!buf) return 2;
      for (int64_t t = 0; t < tasks; t++) {
        int64_t o = t / ntile, k0 = (t % ntile) * CHUNK;
        rows_task_split(&w, xb, o, k0, kin - k0 < CHUNK ? kin - k0 : CHUNK, kin, nt, buf);
      }
      free(buf);
    }
    return 0;
  }
  if (nt == 1 || g->n_out >= 4 * nt || g->n_red < 4 * CHUNK) {
    int64_t per = (g->n_out + nt - 1) / nt;
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
    for (int t = 0; t < nt; t++) {
      int64_t i0 = t * per, i1 = i0 + per < g->n_out ? i0 + per : g->n_out;
      if (i0 < i1) per_output_chunk(&w, xb, i0, i1);
    }
  } else {
    for (int64_t i = 0; i < g->n_out; i++) per_output_split(&w, xb, i, nt);
  }
  return 0;
}

int pd_reduce_sum(const pd_reduce_geom *g, const void *x, pd_dtype xdt, void *out, pd_dtype odt) {
  pd_reduce_spec s = {.kind = PD_RK_SUM};
  return pd_reduce_run(g, &s, x, xdt, out, odt);
}
