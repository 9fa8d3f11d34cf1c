/* Stable sort and top-k along one axis of [outer, len, inner] contiguous
 * buffers. Lines are sorted as (value, index) pairs with a typed merge sort;
 * NaN orders above every number. */
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "reduce.h"

#define GRAIN 32768
#define RUN 16

/* a strictly before b: ascending / descending, NaN as the largest value */
#define LT_ASC(a, b) ((a) < (b) || ((b) != (b) && (a) == (a)))
#define LT_DESC(a, b) ((a) > (b) || ((a) != (a) && (b) == (b)))

#define GEN_SORT(sfx, T)                                                                                     \
  typedef struct pair_##sfx {                                                                                \
    T v;                                                                                                     \
    int64_t i;                                                                                               \
  } pair_##sfx;                                                                                              \
  /* stable merge sort of a[0..n) (tmp has n slots): insertion-sorted runs, then merges */                   \
  static pair_##sfx *msort_##sfx(pair_##sfx *a, pair_##sfx *tmp, int64_t n, bool desc) {                     \
    for (int64_t r0 = 0; r0 < n; r0 += RUN) {                                                                \
      int64_t r1 = r0 + RUN < n ? r0 + RUN : n;                                                              \
      for (int64_t j = r0 + 1; j < r1; j++) {                                                                \
        pair_##sfx e = a[j];                                                                                 \
        int64_t k = j;                                                                                       \
        while (k > r0 && (desc ? LT_DESC(e.v, a[k - 1].v) : LT_ASC(e.v, a[k - 1].v))) {                      \
          a[k] = a[k - 1];                                                                                   \
          k--;                                                                                               \
        }                                                                                                    \
        a[k] = e;                                                                                            \
      }                                                                                                      \
    }                                                                                                        \
    pair_##sfx *src = a, *dst = tmp;                                                                         \
    for (int64_t w = RUN; w < n; w *= 2) {                                                                   \
      for (int64_t l = 0; l < n; l += 2 * w) {                                                               \
        int64_t m = l + w < n ? l + w : n, r = l + 2 * w < n ? l + 2 * w : n;                                \
        int64_t i = l, j = m, k = l;                                                                         \
        if (desc) {                                                                                          \
          while (i < m && j < r) dst[k++] = LT_DESC(src[j].v, src[i].v) ? src[j++] : src[i++];               \
        } else {                                                                                             \
          while (i < m && j < r) dst[k++] = LT_ASC(src[j].v, src[i].v) ? src[j++] : src[i++];                \
        }                                                                                                    \
        while (i < m) dst[k++] = src[i++];                                                                   \
        while (j < r) dst[k++] = src[j++];                                                                   \
      }                                                                                                      \
      pair_##sfx *t = src;                                                                                   \
      src = dst;                                                                                             \
      dst = t;                                                                                               \
    }                                                                                                        \
    return src;                                                                                              \
  }                                                                                                          \
  /* best k of a line into a[0..k): kept sorted, a candidate enters only when                                \
   * strictly better than the worst kept (an equal later index is worse) */                                  \
  static void select_##sfx(const T *x, int64_t len, int64_t inner, int64_t k, bool desc, pair_##sfx *a) {    \
    int64_t n = 0;                                                                                           \
    for (int64_t j = 0; j < len; j++) {                                                                      \
      T v = x[j * inner];                                                                                    \
      if (n == k && !(desc ? LT_DESC(v, a[k - 1].v) : LT_ASC(v, a[k - 1].v))) continue;                      \
      int64_t p = n < k ? n++ : k - 1;                                                                       \
      while (p > 0 && (desc ? LT_DESC(v, a[p - 1].v) : LT_ASC(v, a[p - 1].v))) {                             \
        a[p] = a[p - 1];                                                                                     \
        p--;                                                                                                 \
      }                                                                                                      \
      a[p].v = v;                                                                                            \
      a[p].i = j;                                                                                            \
    }                                                                                                        \
  }                                                                                                          \
  static int run_##sfx(const T *x, int64_t outer, int64_t len, int64_t inner, int64_t k, bool desc, T *vals, \
                       int64_t *idx) {                                                                       \
    int64_t lines = outer * inner;                                                                           \
    int nt = lines * len < GRAIN ? 1 : omp_get_max_threads();                                                \
    bool partial = k < len && k <= 64 && k * 8 <= len;                                                       \
    size_t per = partial ? (size_t)k : 2 * (size_t)len;                                                      \
    pair_##sfx *bufs = malloc(sizeof(pair_##sfx) * per * (size_t)nt);                                        \
    if (!bufs) return 2;                                                                                     \
    _Pragma("omp parallel num_threads(nt) if (nt > 1)") {                                                    \
      pair_##sfx *buf = bufs + per * (size_t)omp_get_thread_num();                                           \
      _Pragma("omp for schedule(static)") for (int64_t ln = 0; ln < lines; ln++) {                           \
        int64_t o = ln / inner, in = ln % inner;                                                             \
        const T *xl = x + o * len * inner + in;                                                              \
        pair_##sfx *s = buf;                                                                                 \
        if (partial) {                                                                                       \
          select_##sfx(xl, len, inner, k, desc, buf);                                                        \
        } else {                                                                                             \
          for (int64_t j = 0; j < len; j++) {                                                                \
            buf[j].v = xl[j * inner];                                                                        \
            buf[j].i = j;                                                                                    \
          }                                                                                                  \
          s = msort_##sfx(buf, buf + len, len, desc);                                                        \
        }                                                                                                    \
        int64_t ob = o * k * inner + in;                                                                     \
        if (vals)                                                                                            \
          for (int64_t j = 0; j < k; j++) vals[ob + j * inner] = s[j].v;                                     \
        if (idx)                                                                                             \
          for (int64_t j = 0; j < k; j++) idx[ob + j * inner] = s[j].i;                                      \
      }                                                                                                      \
    }                                                                                                        \
    free(bufs);                                                                                              \
    return 0;                                                                                                \
  }

GEN_SORT(f32, float)
GEN_SORT(f64, double)
GEN_SORT(u8, uint8_t)
GEN_SORT(i8, int8_t)
GEN_SORT(i16, int16_t)
GEN_SORT(i32, int32_t)
GEN_SORT(i64, int64_t)

static int dispatch(const void *x, pd_dtype dt, int64_t outer, int64_t len, int64_t inner, int64_t k,
                    bool desc, void *vals, int64_t *idx) {
  if (outer * inner == 0 || k == 0) return 0;
  switch (dt) {
    case PD_FLOAT32:
      return run_f32(x, outer, len, inner, k, desc, vals, idx);
    case PD_FLOAT64:
      return run_f64(x, outer, len, inner, k, desc, vals, idx);
    case PD_BOOL:
    case PD_UINT8:
      return run_u8(x, outer, len, inner, k, desc, vals, idx);
    case PD_INT8:
      return run_i8(x, outer, len, inner, k, desc, vals, idx);
    case PD_INT16:
      return run_i16(x, outer, len, inner, k, desc, vals, idx);
    case PD_INT32:
      return run_i32(x, outer, len, inner, k, desc, vals, idx);
    case PD_INT64:
      return run_i64(x, outer, len, inner, k, desc, vals, idx);
    default:
      return 1;
  }
}

int pd_sort_run(const void *x, pd_dtype dt, int64_t outer, int64_t len, int64_t inner, bool descending,
                void *vals, int64_t *idx) {
  return dispatch(x, dt, outer, len, inner, len, descending, vals, idx);
}

int pd_topk_run(const void *x, pd_dtype dt, int64_t outer, int64_t len, int64_t inner, int64_t k,
                bool largest, void *vals, int64_t *idx) {
  if (k > len) return 1;
  return dispatch(x, dt, outer, len, inner, k, largest, vals, idx);
}
