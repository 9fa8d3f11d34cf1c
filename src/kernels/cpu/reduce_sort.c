/* Stable sort and top-k along one axis of [outer, len, inner] contiguous
 * buffers.
 *
 * Values are mapped to unsigned keys whose order is the sort order (NaN
 * above every number, -0 equal to +0; descending flips the bits), then
 * sorted by an LSD radix sort, which is stable, so equal values keep their
 * index order. Keys of up to 32 bits travel with their index in one uint64
 * (key << 32 | index); 64-bit keys as (key, index) pairs. Lines along a
 * strided axis are processed in batches of adjacent lines so that every row
 * read is contiguous. Small k top-k keeps a sorted buffer of the k best
 * instead of sorting. */
#include "parallel.h"
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "reduce.h"

#define GRAIN 32768
#define SMALL 48              /* lines up to this long use insertion sort */
#define BATCH 256             /* adjacent strided lines sorted together... */
#define BATCH_ELEMS (1 << 20) /* ...holding at most this many elements */
#define SEL_BATCH 1024        /* adjacent strided lines of a small-k top-k */

typedef struct wpair {
  uint64_t k;
  int64_t i;
} wpair;

/* ---- keys ------------------------------------------------------------------ */
static inline uint64_t enc_f32(float v) {
  if (v != v) return 0xFFFFFFFFu;
  if (v == 0) v = 0; /* -0 sorts with +0 */
  uint32_t u;
  memcpy(&u, &v, 4);
  return (u & 0x80000000u) ? (uint32_t)~u : (u | 0x80000000u);
}
static inline uint64_t enc_f64(double v) {
  if (v != v) return UINT64_MAX;
  if (v == 0) v = 0;
  uint64_t u;
  memcpy(&u, &v, 8);
  return (u >> 63) ? ~u : (u | (1ull << 63));
}
static inline uint64_t enc_u8(uint8_t v) { return v; }
static inline uint64_t enc_i8(int8_t v) { return (uint8_t)((int)v + 128); }
static inline uint64_t enc_i16(int16_t v) { return (uint16_t)((int)v + 32768); }
static inline uint64_t enc_i32(int32_t v) { return (uint32_t)v ^ 0x80000000u; }
static inline uint64_t enc_i64(int64_t v) { return (uint64_t)v ^ (1ull << 63); }

/* ---- radix sorts --------------------------------------------------------------
 * LSD radix on 8-bit digits. The input is cut into 4 quarters scattered
 * with separate offsets (quarter q of a bucket follows quarters < q), which
 * keeps the sort stable and gives 4 independent chains of counter updates
 * (one chain stalls when a digit takes few values, e.g. exponent bytes). */
#define GEN_RADIX(name, E, KEY, NPASS_MAX)                                                          \
  static E *name(E *a, E *t, int64_t n, int npass, int shift0) {                                    \
    uint32_t tot[NPASS_MAX][256], cnt[4][256], off[4][256];                                         \
    int64_t q0[5], Q = (n + 3) / 4;                                                                 \
    for (int q = 0; q <= 4; q++) q0[q] = q * Q < n ? q * Q : n;                                     \
    memset(tot, 0, sizeof tot); /* all NPASS_MAX rows: cheap, and bounds-obvious */                 \
    for (int64_t j = 0; j < n; j++) {                                                               \
      uint64_t e = KEY(a[j]) >> shift0;                                                             \
      for (int p = 0; p < npass; p++) tot[p][(e >> (8 * p)) & 255]++;                               \
    }                                                                                               \
    for (int p = 0; p < npass; p++) {                                                               \
      int sh = shift0 + 8 * p;                                                                      \
      if (tot[p][(KEY(a[0]) >> sh) & 255] == (uint32_t)n) continue; /* one bucket: nothing moves */ \
      memset(cnt, 0, sizeof cnt);                                                                   \
      for (int q = 0; q < 4; q++)                                                                   \
        for (int64_t j = q0[q]; j < q0[q + 1]; j++) cnt[q][(KEY(a[j]) >> sh) & 255]++;              \
      uint32_t pos = 0;                                                                             \
      for (int b = 0; b < 256; b++)                                                                 \
        for (int q = 0; q < 4; q++) {                                                               \
          off[q][b] = pos;                                                                          \
          pos += cnt[q][b];                                                                         \
        }                                                                                           \
      int64_t n3 = q0[4] - q0[3], j = 0;                                                            \
      for (; j < n3; j++)                                                                           \
        for (int q = 0; q < 4; q++) {                                                               \
          E e = a[q0[q] + j];                                                                       \
          t[off[q][(KEY(e) >> sh) & 255]++] = e;                                                    \
        }                                                                                           \
      for (; j < Q; j++)                                                                            \
        for (int q = 0; q < 3; q++) {                                                               \
          if (q0[q] + j >= q0[q + 1]) continue;                                                     \
          E e = a[q0[q] + j];                                                                       \
          t[off[q][(KEY(e) >> sh) & 255]++] = e;                                                    \
        }                                                                                           \
      E *sw = a;                                                                                    \
      a = t;                                                                                        \
      t = sw;                                                                                       \
    }                                                                                               \
    return a;                                                                                       \
  }
#define KEY_N(e) (e)
#define KEY_W(e) ((e).k)
GEN_RADIX(radix_narrow, uint64_t, KEY_N, 4)
GEN_RADIX(radix_wide, wpair, KEY_W, 8)

/* narrow: uint64 = key << 32 | index, key of kbytes bytes; returns the
 * buffer (a or t) holding the result. */
static uint64_t *rsort_narrow(uint64_t *a, uint64_t *t, int64_t n, int kbytes) {
  if (n > SMALL) return radix_narrow(a, t, n, kbytes, 32);
  for (int64_t j = 1; j < n; j++) {
    uint64_t e = a[j];
    int64_t q = j;
    while (q > 0 && a[q - 1] > e) {
      a[q] = a[q - 1];
      q--;
    }
    a[q] = e;
  }
  return a;
}

static wpair *rsort_wide(wpair *a, wpair *t, int64_t n) {
  if (n > SMALL) return radix_wide(a, t, n, 8, 0);
  for (int64_t j = 1; j < n; j++) {
    wpair e = a[j];
    int64_t q = j;
    while (q > 0 && (a[q - 1].k > e.k || (a[q - 1].k == e.k && a[q - 1].i > e.i))) {
      a[q] = a[q - 1];
      q--;
    }
    a[q] = e;
  }
  return a;
}

/* best k (smallest keys; equal keys: earlier index) kept sorted in sel */
static inline void select_push(wpair *sel, int64_t *n, int64_t k, uint64_t key, int64_t j) {
  if (*n == k && key >= sel[k - 1].k) return;
  int64_t q = *n < k ? (*n)++ : k - 1;
  while (q > 0 && sel[q - 1].k > key) {
    sel[q] = sel[q - 1];
    q--;
  }
  sel[q].k = key;
  sel[q].i = j;
}

/* ---- per dtype drivers ------------------------------------------------------
 * A task is a batch of bb adjacent lines (o, in0 .. in0 + bb): rows are read
 * and results written bb contiguous elements at a time. */
#define GEN_SORT(sfx, T, KBYTES)                                                                             \
  static void select_##sfx(const T *base, int64_t len, int64_t inner, int64_t bb, int64_t k, uint64_t flip,  \
                           wpair *sel, int64_t *cnt) {                                                       \
    for (int64_t b = 0; b < bb; b++) cnt[b] = 0;                                                             \
    for (int64_t j = 0; j < len; j++) {                                                                      \
      const T *row = base + j * inner;                                                                       \
      for (int64_t b = 0; b < bb; b++) {                                                                     \
        uint64_t key = enc_##sfx(row[b]) ^ flip;                                                             \
        wpair *sb = sel + b * k;                                                                             \
        if (cnt[b] == k && key >= sb[k - 1].k) continue;                                                     \
        select_push(sb, &cnt[b], k, key, j);                                                                 \
      }                                                                                                      \
    }                                                                                                        \
  }                                                                                                          \
  static int run_##sfx(const T *x, int64_t outer, int64_t len, int64_t inner, int64_t k, bool desc, T *vals, \
                       int64_t *idx) {                                                                       \
    uint64_t flip = !desc ? 0 : (KBYTES) == 8 ? UINT64_MAX : ((1ull << (8 * (KBYTES))) - 1);                 \
    bool wide = (KBYTES) == 8 || len > (int64_t)UINT32_MAX;                                                  \
    bool partial = k < len && k <= 64 && k * 8 <= len;                                                       \
    int64_t B = inner < (partial ? SEL_BATCH : BATCH) ? inner : (partial ? SEL_BATCH : BATCH);               \
    if (!partial && B * len > BATCH_ELEMS) B = len >= BATCH_ELEMS ? 1 : BATCH_ELEMS / len;                   \
    int64_t nb = (inner + B - 1) / B, tasks = outer * nb;                                                    \
    int nt = outer * len * inner < GRAIN ? 1 : pd_loop_threads();                                            \
    if (nt > tasks) nt = (int)tasks;                                                                         \
    size_t es = wide ? sizeof(wpair) : sizeof(uint64_t);                                                     \
    size_t per = partial ? (sizeof(wpair) * (size_t)k + sizeof(int64_t)) * (size_t)B                         \
                         : es * (size_t)(B * len + len) + sizeof(T) * (size_t)(B * len);                     \
    per = (per + 63) & ~(size_t)63;                                                                          \
    char *bufs = malloc(per * (size_t)nt);                                                                   \
    if (!bufs) return 2;                                                                                     \
    /* exactly nt threads: there is one buffer per thread */                                                 \
    _Pragma("omp parallel num_threads(nt) if (nt > 1)") {                                                    \
      char *buf = bufs + per * (size_t)omp_get_thread_num();                                                 \
      _Pragma("omp for schedule(dynamic, 1)") for (int64_t t = 0; t < tasks; t++) {                          \
        int64_t o = t / nb, in0 = (t % nb) * B, bb = inner - in0 < B ? inner - in0 : B;                      \
        const T *base = x + o * len * inner + in0;                                                           \
        int64_t ob0 = o * k * inner + in0;                                                                   \
        if (partial) {                                                                                       \
          wpair *sel = (wpair *)buf;                                                                         \
          select_##sfx(base, len, inner, bb, k, flip, sel, (int64_t *)(sel + B * k));                        \
          for (int64_t j = 0; j < k; j++)                                                                    \
            for (int64_t b = 0; b < bb; b++) {                                                               \
              int64_t id = sel[b * k + j].i;                                                                 \
              if (vals) vals[ob0 + j * inner + b] = base[id * inner + b];                                    \
              if (idx) idx[ob0 + j * inner + b] = id;                                                        \
            }                                                                                                \
          continue;                                                                                          \
        }                                                                                                    \
        T *vb = (T *)(buf + es * (size_t)(B * len + len));                                                   \
        if (wide) {                                                                                          \
          wpair *kb = (wpair *)buf, *tmp = kb + B * len;                                                     \
          for (int64_t j = 0; j < len; j++) {                                                                \
            const T *row = base + j * inner;                                                                 \
            for (int64_t b = 0; b < bb; b++) {                                                               \
              kb[b * len + j].k = enc_##sfx(row[b]) ^ flip;                                                  \
              kb[b * len + j].i = j;                                                                         \
              vb[b * len + j] = row[b];                                                                      \
            }                                                                                                \
          }                                                                                                  \
          for (int64_t b = 0; b < bb; b++) {                                                                 \
            wpair *kl = kb + b * len, *s = rsort_wide(kl, tmp, len);                                         \
            /* sorted values into the free buffer, indices over the keys */                                  \
            T *sv = (T *)(s == kl ? (void *)tmp : (void *)kl), *vl = vb + b * len;                           \
            int64_t *si = (int64_t *)s;                                                                      \
            for (int64_t j = 0; j < k; j++) {                                                                \
              int64_t id = s[j].i;                                                                           \
              sv[j] = vl[id];                                                                                \
              si[j] = id;                                                                                    \
            }                                                                                                \
            memcpy(vl, sv, sizeof(T) * (size_t)k);                                                           \
            if ((void *)s != (void *)kl) memcpy(kl, s, sizeof(int64_t) * (size_t)k);                         \
          }                                                                                                  \
          const int64_t *ids = (const int64_t *)kb;                                                          \
          for (int64_t j = 0; j < k; j++)                                                                    \
            for (int64_t b = 0; b < bb; b++) {                                                               \
              if (vals) vals[ob0 + j * inner + b] = vb[b * len + j];                                         \
              if (idx) idx[ob0 + j * inner + b] = ids[2 * b * len + j];                                      \
            }                                                                                                \
        } else {                                                                                             \
          uint64_t *kb = (uint64_t *)buf, *tmp = kb + B * len;                                               \
          for (int64_t j = 0; j < len; j++) {                                                                \
            const T *row = base + j * inner;                                                                 \
            for (int64_t b = 0; b < bb; b++) {                                                               \
              kb[b * len + j] = ((enc_##sfx(row[b]) ^ flip) << 32) | (uint64_t)j;                            \
              vb[b * len + j] = row[b];                                                                      \
            }                                                                                                \
          }                                                                                                  \
          for (int64_t b = 0; b < bb; b++) {                                                                 \
            uint64_t *kl = kb + b * len, *s = rsort_narrow(kl, tmp, len, (KBYTES));                          \
            /* sorted values into the free buffer, indices over the keys */                                  \
            T *sv = (T *)(s == kl ? (void *)tmp : (void *)kl), *vl = vb + b * len;                           \
            int64_t *si = (int64_t *)s;                                                                      \
            for (int64_t j = 0; j < k; j++) {                                                                \
              int64_t id = (int64_t)(s[j] & 0xFFFFFFFFu);                                                    \
              sv[j] = vl[id];                                                                                \
              si[j] = id;                                                                                    \
            }                                                                                                \
            memcpy(vl, sv, sizeof(T) * (size_t)k);                                                           \
            if ((void *)s != (void *)kl) memcpy(kl, s, sizeof(int64_t) * (size_t)k);                         \
          }                                                                                                  \
          const int64_t *ids = (const int64_t *)kb;                                                          \
          for (int64_t j = 0; j < k; j++)                                                                    \
            for (int64_t b = 0; b < bb; b++) {                                                               \
              if (vals) vals[ob0 + j * inner + b] = vb[b * len + j];                                         \
              if (idx) idx[ob0 + j * inner + b] = ids[b * len + j];                                          \
            }                                                                                                \
        }                                                                                                    \
      }                                                                                                      \
    }                                                                                                        \
    free(bufs);                                                                                              \
    return 0;                                                                                                \
  }

GEN_SORT(f32, float, 4)
GEN_SORT(f64, double, 8)
GEN_SORT(u8, uint8_t, 1)
GEN_SORT(i8, int8_t, 1)
GEN_SORT(i16, int16_t, 2)
GEN_SORT(i32, int32_t, 4)
GEN_SORT(i64, int64_t, 8)

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

int pdk_sort_run(const void *x, pd_dtype dt, int64_t outer, int64_t len, int64_t inner, bool descending,
                 void *vals, int64_t *idx) {
  return dispatch(x, dt, outer, len, inner, len, descending, vals, idx);
}

int pdk_topk_run(const void *x, pd_dtype dt, int64_t outer, int64_t len, int64_t inner, int64_t k,
                 bool largest, void *vals, int64_t *idx) {
  if (k > len) return 1;
  return dispatch(x, dt, outer, len, inner, k, largest, vals, idx);
}
