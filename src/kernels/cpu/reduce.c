/* Generic strided reductions. Parallel over output elements; a reduction to
 * few outputs is split over the reduced range with per-thread partials. */
#include "reduce.h"

#include <omp.h>
#include <stdlib.h>

#include "../../core/tensor_impl.h"

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

/* Sum of reduced elements [j0, j1) starting at base (typed). */
#define SUM_RANGE(T, ACC)                                                                    \
  static ACC sum_range_##T(const pd_reduce_geom *g, const T *base, int64_t j0, int64_t j1) { \
    ACC s = 0;                                                                               \
    int last = g->nred - 1;                                                                  \
    int64_t inner = last >= 0 ? g->red_shape[last] : 1;                                      \
    int64_t st = last >= 0 ? g->red_stride[last] : 1;                                        \
    int64_t j = j0;                                                                          \
    while (j < j1) {                                                                         \
      int64_t in_pos = j % inner, run = inner - in_pos;                                      \
      if (run > j1 - j) run = j1 - j;                                                        \
      const T *p = base + pd_reduce_red_offset(g, j);                                        \
      if (st == 1)                                                                           \
        for (int64_t r = 0; r < run; r++) s += (ACC)p[r];                                    \
      else                                                                                   \
        for (int64_t r = 0; r < run; r++) s += (ACC)p[r * st];                               \
      j += run;                                                                              \
    }                                                                                        \
    return s;                                                                                \
  }
typedef uint8_t u8;
typedef int8_t i8;
typedef int16_t i16;
typedef int32_t i32;
typedef int64_t i64;
SUM_RANGE(float, double)
SUM_RANGE(double, double)
SUM_RANGE(u8, int64_t)
SUM_RANGE(i8, int64_t)
SUM_RANGE(i16, int64_t)
SUM_RANGE(i32, int64_t)
SUM_RANGE(i64, int64_t)

#define GRAIN 32768

static double sum_one_f(const pd_reduce_geom *g, const void *x, pd_dtype dt, int64_t i, int64_t j0,
                        int64_t j1) {
  int64_t off = pd_reduce_keep_offset(g, i);
  if (dt == PD_FLOAT32) return sum_range_float(g, (const float *)x + off, j0, j1);
  return sum_range_double(g, (const double *)x + off, j0, j1);
}

static int64_t sum_one_i(const pd_reduce_geom *g, const void *x, pd_dtype dt, int64_t i, int64_t j0,
                         int64_t j1) {
  int64_t off = pd_reduce_keep_offset(g, i);
  switch (dt) {
    case PD_BOOL:
    case PD_UINT8:
      return sum_range_u8(g, (const u8 *)x + off, j0, j1);
    case PD_INT8:
      return sum_range_i8(g, (const i8 *)x + off, j0, j1);
    case PD_INT16:
      return sum_range_i16(g, (const i16 *)x + off, j0, j1);
    case PD_INT32:
      return sum_range_i32(g, (const i32 *)x + off, j0, j1);
    default:
      return sum_range_i64(g, (const i64 *)x + off, j0, j1);
  }
}

int pd_reduce_sum(const pd_reduce_geom *g, const void *x, pd_dtype xdt, void *out, pd_dtype odt) {
  if (xdt == PD_FLOAT16 || xdt == PD_BFLOAT16 || (unsigned)xdt >= PD_NUM_DTYPES) return 1;
  bool fl = pd_dtype_is_floating(xdt);
  int64_t total = g->n_out * g->n_red;
  int nt = total < GRAIN ? 1 : omp_get_max_threads();
  size_t osz = pd_dtype_size(odt);
  if (g->n_out >= nt || g->n_red < GRAIN) {
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
    for (int64_t i = 0; i < g->n_out; i++) {
      char *o = (char *)out + (size_t)i * osz;
      if (fl)
        pd_store_from_f64(o, odt, sum_one_f(g, x, xdt, i, 0, g->n_red));
      else if (odt == PD_INT64)
        *(int64_t *)o = sum_one_i(g, x, xdt, i, 0, g->n_red);
      else
        pd_store_from_f64(o, odt, (double)sum_one_i(g, x, xdt, i, 0, g->n_red));
    }
    return 0;
  }
  /* few outputs, long reductions: split the reduced range */
  for (int64_t i = 0; i < g->n_out; i++) {
    double sf = 0;
    int64_t si = 0;
#pragma omp parallel for num_threads(nt) reduction(+ : sf, si) schedule(static)
    for (int t = 0; t < nt; t++) {
      int64_t chunk = (g->n_red + nt - 1) / nt, j0 = t * chunk,
              j1 = j0 + chunk < g->n_red ? j0 + chunk : g->n_red;
      if (j0 < j1) {
        if (fl)
          sf += sum_one_f(g, x, xdt, i, j0, j1);
        else
          si += sum_one_i(g, x, xdt, i, j0, j1);
      }
    }
    char *o = (char *)out + (size_t)i * osz;
    if (fl)
      pd_store_from_f64(o, odt, sf);
    else if (odt == PD_INT64)
      *(int64_t *)o = si;
    else
      pd_store_from_f64(o, odt, (double)si);
  }
  return 0;
}
