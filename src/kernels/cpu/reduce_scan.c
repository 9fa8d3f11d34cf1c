/* cumsum over [outer, len, inner] contiguous buffers. */
#include "parallel.h"
#include <omp.h>
#include <stdint.h>

#include "reduce.h"

#define GRAIN 32768
#define TILE 2048
/* A line longer than SCAN_CHUNK is scanned in chunks fixed by its length
 * (at least SCAN_CHUNK long, at most SCAN_MAX_CHUNKS of them): the chunk
 * totals, added in order, give each chunk's start. The chunks may run on
 * any number of threads with the same bits. */
#define SCAN_CHUNK 32768
#define SCAN_MAX_CHUNKS 64

static int64_t scan_chunk_len(int64_t len) {
  int64_t c = (len + SCAN_MAX_CHUNKS - 1) / SCAN_MAX_CHUNKS;
  return c > SCAN_CHUNK ? c : SCAN_CHUNK;
}

/* Integer sums wrap (computed unsigned). */
#define ADD_F(a, v) ((a) + (double)(v))
#define ADD_I(a, v) ((int64_t)((uint64_t)(a) + (uint64_t)(int64_t)(v)))

#define GEN_SCAN(sfx, T, ACC, UACC, ADD)                                                                     \
  /* n elements from x/o in steps of d, starting from acc; returns the total */                              \
  static ACC seq_##sfx(const T *x, T *o, int64_t n, int64_t d, bool excl, ACC acc) {                         \
    for (int64_t j = 0; j < n; j++) {                                                                        \
      ACC nx = ADD(acc, x[j * d]);                                                                           \
      o[j * d] = (T)(excl ? acc : nx);                                                                       \
      acc = nx;                                                                                              \
    }                                                                                                        \
    return acc;                                                                                              \
  }                                                                                                          \
  static PD_NOINLINE ACC total_##sfx(const T *x, int64_t n) {                                                \
    UACC u = 0;                                                                                              \
    _Pragma("omp simd reduction(+ : u)") for (int64_t j = 0; j < n; j++) u += (UACC)x[j];                    \
    return (ACC)u;                                                                                           \
  }                                                                                                          \
  /* one contiguous line: four quarters scanned as four independent chains                                   \
   * (each from the total of the quarters before it), so the additions                                       \
   * overlap instead of waiting on one another */                                                            \
  static ACC line_##sfx(const T *x, T *o, int64_t n, bool excl, bool rev, ACC acc) {                         \
    int64_t d = rev ? -1 : 1;                                                                                \
    const T *xs = rev ? x + n - 1 : x;                                                                       \
    T *os = rev ? o + n - 1 : o;                                                                             \
    if (n < 1024) return seq_##sfx(xs, os, n, d, excl, acc);                                                 \
    int64_t m = n / 4;                                                                                       \
    ACC c[4];                                                                                                \
    c[0] = acc;                                                                                              \
    for (int p = 0; p < 3; p++)                                                                              \
      c[p + 1] = ADD(c[p], total_##sfx(rev ? xs - (p + 1) * m + 1 : xs + p * m, m));                         \
    ACC c0 = c[0], c1 = c[1], c2 = c[2], c3 = c[3];                                                          \
    const T *x0 = xs, *x1 = xs + m * d, *x2 = xs + 2 * m * d, *x3 = xs + 3 * m * d;                          \
    T *o0 = os, *o1 = os + m * d, *o2 = os + 2 * m * d, *o3 = os + 3 * m * d;                                \
    for (int64_t j = 0; j < m; j++) {                                                                        \
      int64_t q = j * d;                                                                                     \
      ACC n0 = ADD(c0, x0[q]), n1 = ADD(c1, x1[q]), n2 = ADD(c2, x2[q]), n3 = ADD(c3, x3[q]);                \
      o0[q] = (T)(excl ? c0 : n0);                                                                           \
      o1[q] = (T)(excl ? c1 : n1);                                                                           \
      o2[q] = (T)(excl ? c2 : n2);                                                                           \
      o3[q] = (T)(excl ? c3 : n3);                                                                           \
      c0 = n0;                                                                                               \
      c1 = n1;                                                                                               \
      c2 = n2;                                                                                               \
      c3 = n3;                                                                                               \
    }                                                                                                        \
    c[3] = c3;                                                                                               \
    return seq_##sfx(xs + 4 * m * d, os + 4 * m * d, n - 4 * m, d, excl, c[3]);                              \
  }                                                                                                          \
  /* lines of `inner` interleaved elements: vectorised across them */                                        \
  static void rows_##sfx(const T *x, T *o, int64_t len, int64_t inner, int64_t tk, bool excl, bool rev) {    \
    ACC acc[TILE];                                                                                           \
    for (int64_t k = 0; k < tk; k++) acc[k] = 0;                                                             \
    for (int64_t s = 0; s < len; s++) {                                                                      \
      int64_t l = rev ? len - 1 - s : s;                                                                     \
      const T *r = x + l * inner;                                                                            \
      T *w = o + l * inner;                                                                                  \
      if (excl) {                                                                                            \
        _Pragma("omp simd") for (int64_t k = 0; k < tk; k++) {                                               \
          w[k] = (T)acc[k];                                                                                  \
          acc[k] = ADD(acc[k], r[k]);                                                                        \
        }                                                                                                    \
      } else {                                                                                               \
        _Pragma("omp simd") for (int64_t k = 0; k < tk; k++) {                                               \
          acc[k] = ADD(acc[k], r[k]);                                                                        \
          w[k] = (T)acc[k];                                                                                  \
        }                                                                                                    \
      }                                                                                                      \
    }                                                                                                        \
  }                                                                                                          \
  /* one line longer than SCAN_CHUNK, its chunks over nt threads */                                          \
  static void chunked_##sfx(const T *x, T *o, int64_t len, bool excl, bool rev, int nt) {                    \
    int64_t cl = scan_chunk_len(len), nc = (len + cl - 1) / cl;                                              \
    ACC part[SCAN_MAX_CHUNKS], start[SCAN_MAX_CHUNKS];                                                       \
    PD_OMP_FOR_IF(nt > 1, for (int64_t t = 0; t < nc; t++),                                                  \
                  part[t] = total_##sfx(x + t * cl, len - t * cl < cl ? len - t * cl : cl););                \
    if (rev) {                                                                                               \
      start[nc - 1] = 0;                                                                                     \
      for (int64_t t = nc - 2; t >= 0; t--) start[t] = ADD(start[t + 1], part[t + 1]);                       \
    } else {                                                                                                 \
      start[0] = 0;                                                                                          \
      for (int64_t t = 1; t < nc; t++) start[t] = ADD(start[t - 1], part[t - 1]);                            \
    }                                                                                                        \
    PD_OMP_FOR_IF(                                                                                           \
        nt > 1, for (int64_t t = 0; t < nc; t++),                                                            \
        line_##sfx(x + t * cl, o + t * cl, len - t * cl < cl ? len - t * cl : cl, excl, rev, start[t]););    \
  }                                                                                                          \
  static void scan_##sfx(const T *x, T *o, int64_t outer, int64_t len, int64_t inner, bool excl, bool rev) { \
    int nt = outer * len * inner < GRAIN ? 1 : pd_loop_threads();                                            \
    if (inner == 1 && len > SCAN_CHUNK) {                                                                    \
      if (outer < nt) { /* few long lines: each one's chunks over the threads */                             \
        for (int64_t b = 0; b < outer; b++) chunked_##sfx(x + b * len, o + b * len, len, excl, rev, nt);     \
      } else {                                                                                               \
        PD_OMP_FOR_IF(nt > 1, for (int64_t b = 0; b < outer; b++),                                           \
                      chunked_##sfx(x + b * len, o + b * len, len, excl, rev, 1););                          \
      }                                                                                                      \
      return;                                                                                                \
    }                                                                                                        \
    if (inner == 1) {                                                                                        \
      PD_OMP_FOR_IF(nt > 1, for (int64_t b = 0; b < outer; b++),                                             \
                    line_##sfx(x + b * len, o + b * len, len, excl, rev, 0););                               \
      return;                                                                                                \
    }                                                                                                        \
    int64_t ntile = (inner + TILE - 1) / TILE, tasks = outer * ntile;                                        \
    PD_OMP_FOR_IF(                                                                                           \
        nt > 1, for (int64_t t = 0; t < tasks; t++), int64_t b = t / ntile, k0 = (t % ntile) * TILE;         \
        int64_t tk = inner - k0 < TILE ? inner - k0 : TILE;                                                  \
        rows_##sfx(x + b * len * inner + k0, o + b * len * inner + k0, len, inner, tk, excl, rev););         \
  }

GEN_SCAN(f32, float, double, double, ADD_F)
GEN_SCAN(f64, double, double, double, ADD_F)
GEN_SCAN(u8, uint8_t, int64_t, uint64_t, ADD_I)
GEN_SCAN(i8, int8_t, int64_t, uint64_t, ADD_I)
GEN_SCAN(i16, int16_t, int64_t, uint64_t, ADD_I)
GEN_SCAN(i32, int32_t, int64_t, uint64_t, ADD_I)
GEN_SCAN(i64, int64_t, int64_t, uint64_t, ADD_I)

int pdk_cumsum_run(const void *x, void *out, pd_dtype dt, int64_t outer, int64_t len, int64_t inner,
                   bool exclusive, bool reverse) {
  if (outer * len * inner == 0) return 0;
  switch (dt) {
    case PD_FLOAT32:
      scan_f32(x, out, outer, len, inner, exclusive, reverse);
      return 0;
    case PD_FLOAT64:
      scan_f64(x, out, outer, len, inner, exclusive, reverse);
      return 0;
    case PD_UINT8:
      scan_u8(x, out, outer, len, inner, exclusive, reverse);
      return 0;
    case PD_INT8:
      scan_i8(x, out, outer, len, inner, exclusive, reverse);
      return 0;
    case PD_INT16:
      scan_i16(x, out, outer, len, inner, exclusive, reverse);
      return 0;
    case PD_INT32:
      scan_i32(x, out, outer, len, inner, exclusive, reverse);
      return 0;
    case PD_INT64:
      scan_i64(x, out, outer, len, inner, exclusive, reverse);
      return 0;
    default:
      return 1;
  }
}
