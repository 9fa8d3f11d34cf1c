/* GEMM: float32 through oneDNN, float64 with a blocked kernel of our own. */
#include "gemm.h"

#include <omp.h>
#ifdef __AVX2__
#include <immintrin.h>
#endif
#include <oneapi/dnnl/dnnl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "gemm_backup.h"
#include "gemm_dnnl_matmul.h"
#include "paddlec/core.h"
#include "parallel.h"

/* C = beta * C on an M x N block (beta == 0 writes zeros, ignoring NaN). */
#define SCALE_C(T, M, N, beta, C, ldc)                         \
  do {                                                         \
    if ((beta) == 1) break;                                    \
    for (int64_t i_ = 0; i_ < (M); i_++) {                     \
      T *c_ = (C) + i_ * (ldc);                                \
      if ((beta) == 0) {                                       \
        memset(c_, 0, sizeof(T) * (size_t)(N));                \
      } else {                                                 \
        for (int64_t j_ = 0; j_ < (N); j_++) c_[j_] *= (beta); \
      }                                                        \
    }                                                          \
  } while (0)

/* Below this many multiply-adds a plain loop beats dnnl_sgemm, whose fixed
 * cost per call (dispatch and a call_once, ~10k instructions) would dominate
 * the small products of small layers. */
#define SMALL_GEMM 32768
/* From this many multiply-adds a product with B transposed goes to oneDNN's
 * matmul primitive (a cached primitive's call costs a few microseconds). */
#define MATMUL_MIN_FMAS (1 << 22)

static void small_sgemm_loop(bool transa, bool transb, int64_t M, int64_t N, int64_t K, float alpha,
                             const float *restrict A, int64_t lda, const float *restrict B, int64_t ldb,
                             float beta, float *restrict C, int64_t ldc) {
  for (int64_t i = 0; i < M; i++) {
    float *restrict c = C + i * ldc;
    if (N == 1) { /* a matrix-vector product: one dot per row */
      float s = 0.0f;
      for (int64_t p = 0; p < K; p++)
        s += (transa ? A[p * lda + i] : A[i * lda + p]) * (transb ? B[p] : B[p * ldb]);
      c[0] = alpha * s + (beta == 0.0f ? 0.0f : beta * c[0]);
      continue;
    }
    if (beta == 0.0f)
      for (int64_t j = 0; j < N; j++) c[j] = 0.0f;
    else if (beta != 1.0f)
      for (int64_t j = 0; j < N; j++) c[j] *= beta;
    for (int64_t p = 0; p < K; p++) {
      float a = alpha * (transa ? A[p * lda + i] : A[i * lda + p]);
      if (transb)
        for (int64_t j = 0; j < N; j++) c[j] += a * B[j * ldb + p];
      else
        for (int64_t j = 0; j < N; j++) c[j] += a * B[p * ldb + j];
    }
  }
}

#ifdef __AVX2__
/* Small products on 8-wide vectors: each row of C is summed in one or two
 * vector accumulators per 16 columns over K and written once (no zeroing
 * pass, no per-element read-modify-write of C); the last partial block of
 * columns is loaded and stored under a mask. op(B) is read in place, or
 * packed into a zero-padded K x NP panel when transposed. */
#define SMALL_PANEL 4096 /* floats of packed B kept on the stack */

static inline __m256 fma8(__m256 a, __m256 b, __m256 c) {
#ifdef __FMA__
  return _mm256_fmadd_ps(a, b, c);
#else
  return _mm256_add_ps(_mm256_mul_ps(a, b), c);
#endif
}

/* Lanes below n (n in 1..8) set. */
static inline __m256i lanes(int64_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* c[0:n] = alpha * acc + beta * c (beta == 0: c is not read), n in 1..8.
 * A partial block goes through a stack copy: masked stores are slow on
 * some x86 cores (tens of cycles on AMD Zen). */
static inline void store8(float *c, __m256 acc, int64_t n, float alpha, float beta) {
  acc = _mm256_mul_ps(acc, _mm256_set1_ps(alpha));
  if (n == 8) {
    if (beta != 0.0f) acc = fma8(_mm256_set1_ps(beta), _mm256_loadu_ps(c), acc);
    _mm256_storeu_ps(c, acc);
    return;
  }
  _Alignas(32) float t[8];
  _mm256_store_ps(t, acc);
  if (beta == 0.0f) {
    for (int64_t k = 0; k < n; k++) c[k] = t[k];
  } else {
#ifdef __FMA__
    for (int64_t k = 0; k < n; k++) c[k] = fmaf(beta, c[k], t[k]);
#else
    for (int64_t k = 0; k < n; k++) c[k] = beta * c[k] + t[k];
#endif
  }
}

static inline float hsum8(__m256 v) {
  __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  x = _mm_add_ps(x, _mm_movehl_ps(x, x));
  x = _mm_add_ss(x, _mm_movehdup_ps(x));
  return _mm_cvtss_f32(x);
}

/* c = alpha * op(A) b + beta * c, b and c unit-stride vectors. Tails that
 * do not fill a vector are summed in scalars (no masked loads, see store8). */
static bool small_sgemv(bool transa, int64_t M, int64_t K, float alpha, const float *restrict A, int64_t lda,
                        const float *restrict b, float beta, float *restrict c) {
  if (!transa) { /* one dot product per row of A */
    int64_t full = K & ~(int64_t)7;
    for (int64_t i = 0; i < M; i++) {
      const float *a = A + i * lda;
      __m256 acc = _mm256_setzero_ps();
      for (int64_t p = 0; p < full; p += 8) acc = fma8(_mm256_loadu_ps(a + p), _mm256_loadu_ps(b + p), acc);
      float t = 0.0f;
      for (int64_t p = full; p < K; p++) t += a[p] * b[p];
      float s = alpha * (hsum8(acc) + t);
      c[i] = beta == 0.0f ? s : s + beta * c[i];
    }
    return true;
  }
  /* A is stored K x M: c accumulates b[p] times row p of A, 8 entries at a time */
  int64_t fullm = M & ~(int64_t)7;
  for (int64_t i = 0; i < fullm; i += 8) {
    __m256 acc = _mm256_setzero_ps();
    for (int64_t p = 0; p < K; p++) acc = fma8(_mm256_set1_ps(b[p]), _mm256_loadu_ps(A + p * lda + i), acc);
    store8(c + i, acc, 8, alpha, beta);
  }
  if (fullm < M) {
    float t[8] = {0};
    for (int64_t p = 0; p < K; p++)
      for (int64_t i = fullm; i < M; i++) t[i - fullm] += b[p] * A[p * lda + i];
    for (int64_t i = fullm; i < M; i++) {
      float s = alpha * t[i - fullm];
      c[i] = beta == 0.0f ? s : s + beta * c[i];
    }
  }
  return true;
}

static bool small_sgemm(bool transa, bool transb, int64_t M, int64_t N, int64_t K, float alpha,
                        const float *restrict A, int64_t lda, const float *restrict B, int64_t ldb,
                        float beta, float *restrict C, int64_t ldc) {
  int64_t bstride = transb ? 1 : ldb; /* op(B)[p][0] = B[p * bstride] when N == 1 */
  if (N == 1 && bstride == 1 && ldc == 1 && K >= 4)
    return small_sgemv(transa, M, K, alpha, A, lda, B, beta, C);
  int64_t np = (N + 7) & ~(int64_t)7;
  if (N < 4 || (transb && K * np > SMALL_PANEL)) return false;
  _Alignas(32) float bp[SMALL_PANEL];
  const float *panel = B;
  int64_t ldp = ldb;
  int64_t full = N & ~(int64_t)7, rest = N - full; /* columns in whole 8-blocks, and the tail */
  if (transb) {                                    /* bp[p][j] = B[j][p], zero padded to np columns */
    for (int64_t k = 0; k < K * np; k += 8) _mm256_store_ps(bp + k, _mm256_setzero_ps());
    for (int64_t j = 0; j < N; j++)
      for (int64_t p = 0; p < K; p++) bp[p * np + j] = B[j * ldb + p];
    panel = bp;
    ldp = np;
  } else if (rest && K * np <= SMALL_PANEL) { /* padded copy: the tail loads whole vectors */
    for (int64_t p = 0; p < K; p++) {
      _mm256_store_ps(bp + p * np + full, _mm256_setzero_ps());
      memcpy(bp + p * np, B + p * ldb, sizeof(float) * (size_t)N);
    }
    panel = bp;
    ldp = np;
  }
  /* the tail of a padded panel loads whole vectors (zeros past N), else under a mask */
  __m256i tail = lanes(rest ? rest : 8);
  bool padded = panel == bp;
  int64_t sa = transa ? lda : 1, ra = transa ? 1 : lda; /* A[i][p] = A[i * ra + p * sa] */
  for (int64_t i = 0; i < M; i++) {
    const float *a = A + i * ra;
    float *c = C + i * ldc;
    int64_t j = 0;
    for (; j + 16 <= full; j += 16) {
      __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
      for (int64_t p = 0; p < K; p++) {
        __m256 x = _mm256_set1_ps(a[p * sa]);
        acc0 = fma8(x, _mm256_loadu_ps(panel + p * ldp + j), acc0);
        acc1 = fma8(x, _mm256_loadu_ps(panel + p * ldp + j + 8), acc1);
      }
      store8(c + j, acc0, 8, alpha, beta);
      store8(c + j + 8, acc1, 8, alpha, beta);
    }
    if (j + 8 <= full && rest) { /* one whole block and the tail */
      __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
      for (int64_t p = 0; p < K; p++) {
        __m256 x = _mm256_set1_ps(a[p * sa]);
        acc0 = fma8(x, _mm256_loadu_ps(panel + p * ldp + j), acc0);
        const float *q = panel + p * ldp + j + 8;
        acc1 = fma8(x, padded ? _mm256_loadu_ps(q) : _mm256_maskload_ps(q, tail), acc1);
      }
      store8(c + j, acc0, 8, alpha, beta);
      store8(c + j + 8, acc1, rest, alpha, beta);
      continue;
    }
    if (j < full) {
      __m256 acc = _mm256_setzero_ps();
      for (int64_t p = 0; p < K; p++)
        acc = fma8(_mm256_set1_ps(a[p * sa]), _mm256_loadu_ps(panel + p * ldp + j), acc);
      store8(c + j, acc, 8, alpha, beta);
      j += 8;
    }
    if (rest) {
      __m256 acc = _mm256_setzero_ps();
      for (int64_t p = 0; p < K; p++) {
        const float *q = panel + p * ldp + j;
        acc = fma8(_mm256_set1_ps(a[p * sa]), padded ? _mm256_loadu_ps(q) : _mm256_maskload_ps(q, tail), acc);
      }
      store8(c + j, acc, rest, alpha, beta);
    }
  }
  return true;
}
#else
static bool small_sgemm(bool transa, bool transb, int64_t M, int64_t N, int64_t K, float alpha,
                        const float *restrict A, int64_t lda, const float *restrict B, int64_t ldb,
                        float beta, float *restrict C, int64_t ldc) {
  (void)transa, (void)transb, (void)M, (void)N, (void)K, (void)alpha, (void)A, (void)lda, (void)B, (void)ldb;
  (void)beta, (void)C, (void)ldc;
  return false;
}
#endif

/* ---- float32 through oneDNN; deterministic mode ----------------------------
 * oneDNN's sgemm divides its work by its thread count, for some shapes
 * along K (8 x 512 x 4608 on 8 threads) and for others along M or N in ways
 * that change the bits too (1000 x 256 x 1024, B transposed, on 2 threads),
 * and even on one thread its bits depend on the shape it is given. In
 * deterministic mode (pd_set_deterministic) a product is therefore cut into
 * parts that depend on M, N and K alone: a grid of C tiles of at least
 * MIN_TILE_M x MIN_TILE_N and, when the tiles are too few for the work,
 * blocks of K whose products are added into C in block order. Each part is
 * one single-threaded sgemm (oneDNN runs single-threaded inside a parallel
 * region, and outside one with one thread set); the parts run over the
 * threads. The result has the same bits on any number of threads, at a cost
 * (docs/determinism.md), so the default stays oneDNN's own threading. */
#define PART_FMAS (1 << 22) /* multiply-adds per part, at least */
#define MAX_PARTS 8
#define MIN_TILE_M 128
#define MIN_TILE_N 256
#define MIN_KBLOCK 2048

typedef struct gemm_parts {
  int64_t nm, nn, nk; /* C cut into nm x nn tiles, K into nk blocks */
} gemm_parts;

static gemm_parts parts_of(int64_t M, int64_t N, int64_t K) {
  double w = (double)M * (double)N * (double)K / PART_FMAS;
  int64_t want = w >= MAX_PARTS ? MAX_PARTS : (int64_t)w;
  gemm_parts p = {1, 1, 1};
  while (p.nm * p.nn * 2 <= want) { /* halve the longer side of the tiles while they stay large */
    int64_t tm = M / p.nm, tn = N / p.nn;
    if (tn >= 2 * MIN_TILE_N && (tn >= tm || tm < 2 * MIN_TILE_M))
      p.nn *= 2;
    else if (tm >= 2 * MIN_TILE_M)
      p.nm *= 2;
    else
      break;
  }
  while (p.nm * p.nn * p.nk * 2 <= want && K / (p.nk * 2) >= MIN_KBLOCK) p.nk *= 2;
  return p;
}

/* Part t of a product: tile (i, j), K block kb; block 0 goes to C with
 * alpha and beta, the others to their own buffer with alpha. */
static int run_part(const gemm_parts *p, int64_t t, bool transa, bool transb, int64_t M, int64_t N, int64_t K,
                    float alpha, const float *A, int64_t lda, const float *B, int64_t ldb, float beta,
                    float *C, int64_t ldc, float *buf) {
  int64_t kb = t % p->nk, ij = t / p->nk, i = ij / p->nn, j = ij % p->nn;
  int64_t m0 = M * i / p->nm, m1 = M * (i + 1) / p->nm, n0 = N * j / p->nn, n1 = N * (j + 1) / p->nn;
  int64_t k0 = K * kb / p->nk, k1 = K * (kb + 1) / p->nk;
  const float *a = transa ? A + k0 * lda + m0 : A + m0 * lda + k0;
  const float *b = transb ? B + n0 * ldb + k0 : B + k0 * ldb + n0;
  float *c = kb == 0 ? C + m0 * ldc + n0 : buf + (kb - 1) * M * N + m0 * N + n0;
  dnnl_status_t st = dnnl_sgemm(transa ? 'T' : 'N', transb ? 'T' : 'N', m1 - m0, n1 - n0, k1 - k0, alpha, a,
                                lda, b, ldb, kb == 0 ? beta : 0.0f, c, kb == 0 ? ldc : N);
  return st == dnnl_success ? 0 : (int)st;
}

/* While the thread governor sees other processes competing for the cores
 * (pd_g_cores_contended), a large product is cut into panels of C's columns
 * (or rows, when C is taller than wide) that the team takes one at a time.
 * oneDNN divides a product statically: when one of its threads loses its
 * core, the other finishes its half and waits for the whole rest of the
 * first one's. Here it waits at most for the panel the slow thread is on,
 * and takes the panels the slow one has not started. Each panel is a part
 * of the deterministic mode's kind (run_part) with K whole: one
 * single-threaded sgemm (oneDNN runs single-threaded inside a parallel
 * region). The bits of a float32 product already depend
 * on oneDNN's division of the work (docs/determinism.md); deterministic
 * mode, whose parts are fixed by the shape, does not come here. When the
 * other processes leave exactly one core free (pd_g_cores_free) the product
 * runs on one thread, or as panels backed up by the caller while the team
 * is spread (below). Returns -1 when the product runs as usual instead, else
 * 0 or oneDNN's status. */
#define PANEL_MIN_FMAS (1 << 21) /* smaller products: one region's cost is not worth it */
#define PANELS_PER_THREAD 4
#define BACKUP_PANELS_PER_THREAD 4 /* smaller: a panel backed up costs the caller one */
#define PANEL_MIN_COLS 64
#define PANEL_MIN_ROWS 32

static int contended_panels(bool transa, bool transb, int64_t M, int64_t N, int64_t K, float alpha,
                            const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
                            int64_t ldc) {
  if (!atomic_load_explicit(&pd_g_cores_contended, memory_order_relaxed) || omp_in_parallel()) return -1;
  int nt = omp_get_max_threads();
  if (nt < 2 || (double)M * (double)N * (double)K < PANEL_MIN_FMAS) return -1;
  static _Thread_local int tid;
  if (!tid) tid = (int)syscall(SYS_gettid);
  atomic_store_explicit(&pd_g_compute_tid, tid, memory_order_relaxed);
  bool by_cols = N >= M;
  int64_t len = by_cols ? N : M, min = by_cols ? PANEL_MIN_COLS : PANEL_MIN_ROWS;
  if (!pd_team_for_large_tasks()) {
    /* The others leave one core. With the team spread one thread per CPU
     * (the governor's spread, core_claim.h), the helper beside the
     * competitor gets half a core: it takes panels too, and the caller
     * backs up any it is late with, so nobody waits for it (gemm_backup.c;
     * only where the caller holds the inputs for a late helper). Otherwise
     * a team of one has the free core to itself, where a team of two would
     * share two cores with the competitor and wait at the product's end
     * (measured: docs/threads.md). */
    const pdk_gemm_keep *keep = pdk_gemm_kept_inputs();
    int64_t nb = len / min < (int64_t)nt * BACKUP_PANELS_PER_THREAD ? len / min
                                                                    : (int64_t)nt * BACKUP_PANELS_PER_THREAD;
    if (keep && nb >= 2 && atomic_load_explicit(&pd_g_cores_spread, memory_order_relaxed)) {
      int st = pdk_gemm_backup_f32(transa, transb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, by_cols,
                                   (int)nb, nt - 1, keep);
      if (st >= 0) return st;
    }
    return pdk_gemm_f32_serial(transa, transb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  }
  int64_t np = len / min < (int64_t)nt * PANELS_PER_THREAD ? len / min : (int64_t)nt * PANELS_PER_THREAD;
  if (np < 2) return -1;
  gemm_parts parts = by_cols ? (gemm_parts){1, np, 1} : (gemm_parts){np, 1, 1}; /* K whole: no buffer */
  int failed = 0;
  atomic_fetch_add_explicit(&pd_g_gemm_panel_products, 1, memory_order_relaxed);
#pragma omp parallel for schedule(dynamic) reduction(| : failed)
  for (int64_t t = 0; t < np; t++)
    failed |= run_part(&parts, t, transa, transb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, NULL);
  return failed;
}

int pdk_gemm_f32(bool transa, bool transb, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                 int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
  if (M <= 0 || N <= 0) return 0;
  if (K <= 0 || alpha == 0.0f) {
    SCALE_C(float, M, N, beta, C, ldc);
    return 0;
  }
  if (M * N * K <= SMALL_GEMM) {
    if (!small_sgemm(transa, transb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc))
      small_sgemm_loop(transa, transb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    return 0;
  }
  if (!pd_get_deterministic()) {
    int st = contended_panels(transa, transb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    if (st >= 0) return st;
    /* A * B^T: oneDNN's matmul primitive divides it better (gemm_dnnl_matmul.h) */
    if (transb && !transa && (double)M * (double)N * (double)K >= MATMUL_MIN_FMAS && !omp_in_parallel()) {
      st = pdk_gemm_f32_matmul_nt(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
      if (st >= 0) return st;
    }
    dnnl_status_t ds =
        dnnl_sgemm(transa ? 'T' : 'N', transb ? 'T' : 'N', M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    return ds == dnnl_success ? 0 : (int)ds;
  }
  gemm_parts p = parts_of(M, N, K);
  int64_t nparts = p.nm * p.nn * p.nk;
  float *buf = NULL;
  if (p.nk > 1 && !(buf = malloc(sizeof(float) * (size_t)((p.nk - 1) * M * N)))) return 1;
  int failed = 0, nt = omp_get_max_threads();
  if (nparts > 1 && nt > 1 && !omp_in_parallel()) {
#pragma omp parallel for schedule(dynamic) reduction(| : failed)
    for (int64_t t = 0; t < nparts; t++)
      failed |= run_part(&p, t, transa, transb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, buf);
  } else {
    bool one = nt > 1 && !omp_in_parallel(); /* keep oneDNN on this thread */
    if (one) omp_set_num_threads(1);
    for (int64_t t = 0; t < nparts && !failed; t++)
      failed = run_part(&p, t, transa, transb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, buf);
    if (one) omp_set_num_threads(nt);
  }
  if (buf && !failed) { /* the K blocks' products, added in block order */
    PD_PARALLEL_FOR_IF(M * N >= PD_GRAIN && !omp_in_parallel(), i, M, {
      float *c = C + i * ldc;
      for (int64_t kb = 1; kb < p.nk; kb++) {
        const float *q = buf + (kb - 1) * M * N + i * N;
        for (int64_t j = 0; j < N; j++) c[j] += q[j];
      }
    });
  }
  free(buf);
  return failed;
}

/* The product on this thread alone (gemm.h): the small-product kernels as
 * in pdk_gemm_f32, else one dnnl_sgemm on a team of one. */
int pdk_gemm_f32_serial(bool transa, bool transb, int64_t M, int64_t N, int64_t K, float alpha,
                        const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
                        int64_t ldc) {
  if (M <= 0 || N <= 0) return 0;
  if (K <= 0 || alpha == 0.0f || M * N * K <= SMALL_GEMM)
    return pdk_gemm_f32(transa, transb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  int nt = omp_get_max_threads();
  bool one = nt > 1 && !omp_in_parallel();
  if (one) omp_set_num_threads(1);
  dnnl_status_t st =
      dnnl_sgemm(transa ? 'T' : 'N', transb ? 'T' : 'N', M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  if (one) omp_set_num_threads(nt);
  return st == dnnl_success ? 0 : (int)st;
}

/* ---- float64 ------------------------------------------------------------
 * C is cut into MB x NB tiles, one thread per tile (no two threads write the
 * same C element). For each KB slice of K, the tile's A and B panels are
 * packed into unit-stride buffers (alpha folded into A, the transposes
 * resolved), then four rows of C are updated at a time with an inner loop
 * over N that the compiler vectorises. */
#define MB 64
#define NB 256
#define KB 256

/* Ap[i][p] = alpha * op(A)[i0 + i][p0 + p], row-major mb x kb; the source
 * is read along its unit-stride dim. */
static void pack_a(bool transa, const double *A, int64_t lda, int64_t i0, int64_t p0, int64_t mb, int64_t kb,
                   double alpha, double *Ap) {
  if (!transa) {
    for (int64_t i = 0; i < mb; i++) {
      const double *src = A + (i0 + i) * lda + p0;
      double *dst = Ap + i * kb;
      for (int64_t p = 0; p < kb; p++) dst[p] = alpha * src[p];
    }
  } else { /* A is stored K x M: 8 source rows at a time, so reads and writes both stay in cache lines */
    for (int64_t pp = 0; pp < kb; pp += 8) {
      int64_t pe = pp + 8 < kb ? pp + 8 : kb;
      const double *src = A + (p0 + pp) * lda + i0;
      for (int64_t i = 0; i < mb; i++)
        for (int64_t p = pp; p < pe; p++) Ap[i * kb + p] = alpha * src[(p - pp) * lda + i];
    }
  }
}

/* Bp[p][j] = op(B)[p0 + p][j0 + j], row-major kb x nb. */
static void pack_b(bool transb, const double *B, int64_t ldb, int64_t p0, int64_t j0, int64_t kb, int64_t nb,
                   double *Bp) {
  if (!transb) {
    for (int64_t p = 0; p < kb; p++)
      memcpy(Bp + p * nb, B + (p0 + p) * ldb + j0, sizeof(double) * (size_t)nb);
  } else { /* B is stored N x K: 8 source rows at a time */
    for (int64_t jj = 0; jj < nb; jj += 8) {
      int64_t je = jj + 8 < nb ? jj + 8 : nb;
      const double *src = B + (j0 + jj) * ldb + p0;
      for (int64_t p = 0; p < kb; p++)
        for (int64_t j = jj; j < je; j++) Bp[p * nb + j] = src[(j - jj) * ldb + p];
    }
  }
}

/* C[4 x 8] += A[4 x kb] B[kb x 8], the 4 x 8 accumulators held in vector
 * registers (GCC/Clang vector extension; unaligned loads). */
typedef double pd_v4d __attribute__((vector_size(32), aligned(8), may_alias));

static inline void micro_4x8(int64_t kb, const double *restrict a, const double *restrict b, int64_t nb,
                             double *restrict c, int64_t ldc) {
  pd_v4d c00 = {0}, c01 = {0}, c10 = {0}, c11 = {0}, c20 = {0}, c21 = {0}, c30 = {0}, c31 = {0};
  const double *a0 = a, *a1 = a + kb, *a2 = a + 2 * kb, *a3 = a + 3 * kb;
  for (int64_t p = 0; p < kb; p++) {
    pd_v4d b0 = *(const pd_v4d *)(b + p * nb), b1 = *(const pd_v4d *)(b + p * nb + 4);
    c00 += a0[p] * b0;
    c01 += a0[p] * b1;
    c10 += a1[p] * b0;
    c11 += a1[p] * b1;
    c20 += a2[p] * b0;
    c21 += a2[p] * b1;
    c30 += a3[p] * b0;
    c31 += a3[p] * b1;
  }
  pd_v4d *r0 = (pd_v4d *)c, *r1 = (pd_v4d *)(c + ldc), *r2 = (pd_v4d *)(c + 2 * ldc),
         *r3 = (pd_v4d *)(c + 3 * ldc);
  r0[0] += c00, r0[1] += c01, r1[0] += c10, r1[1] += c11;
  r2[0] += c20, r2[1] += c21, r3[0] += c30, r3[1] += c31;
}

/* Edges: C[mb x nb] += A B one row at a time, the inner loop over N. */
static void edge_update(int64_t mb, int64_t nb, int64_t kb, const double *Ap, const double *Bp, int64_t ldbp,
                        double *C, int64_t ldc) {
  for (int64_t i = 0; i < mb; i++) {
    double *restrict c = C + i * ldc;
    const double *a = Ap + i * kb;
    for (int64_t p = 0; p < kb; p++) {
      const double *restrict b = Bp + p * ldbp;
      double x = a[p];
#pragma omp simd
      for (int64_t j = 0; j < nb; j++) c[j] += x * b[j];
    }
  }
}

static void tile_update(int64_t mb, int64_t nb, int64_t kb, const double *Ap, const double *Bp, double *C,
                        int64_t ldc) {
  int64_t m4 = mb / 4 * 4, n8 = nb / 8 * 8;
  for (int64_t i = 0; i < m4; i += 4)
    for (int64_t j = 0; j < n8; j += 8) micro_4x8(kb, Ap + i * kb, Bp + j, nb, C + i * ldc + j, ldc);
  if (n8 < nb) edge_update(m4, nb - n8, kb, Ap, Bp + n8, nb, C + n8, ldc);
  if (m4 < mb) edge_update(mb - m4, nb, kb, Ap + m4 * kb, Bp, nb, C + m4 * ldc, ldc);
}

int pdk_gemm_f64(bool transa, bool transb, int64_t M, int64_t N, int64_t K, double alpha, const double *A,
                 int64_t lda, const double *B, int64_t ldb, double beta, double *C, int64_t ldc) {
  if (M <= 0 || N <= 0) return 0;
  int64_t nmb = (M + MB - 1) / MB, nnb = (N + NB - 1) / NB, tiles = nmb * nnb;
  bool par = (double)M * (double)N * (double)K > 65536.0 && tiles > 1 && !omp_in_parallel() &&
             pd_parallel_loops_on();
  int failed = 0;
#pragma omp parallel if (par)
  {
    double *Ap = NULL, *Bp = NULL;
    if (K > 0 && alpha != 0) {
      Ap = malloc(sizeof(double) * MB * KB);
      Bp = malloc(sizeof(double) * KB * NB);
      if (!Ap || !Bp) {
#pragma omp atomic write
        failed = 1;
      }
    }
#pragma omp for schedule(static)
    for (int64_t t = 0; t < tiles; t++) {
      int64_t i0 = (t / nnb) * MB, j0 = (t % nnb) * NB;
      int64_t mb = M - i0 < MB ? M - i0 : MB, nb = N - j0 < NB ? N - j0 : NB;
      double *Ct = C + i0 * ldc + j0;
      SCALE_C(double, mb, nb, beta, Ct, ldc);
      if (!Ap || !Bp) continue;
      for (int64_t p0 = 0; p0 < K; p0 += KB) {
        int64_t kb = K - p0 < KB ? K - p0 : KB;
        pack_a(transa, A, lda, i0, p0, mb, kb, alpha, Ap);
        pack_b(transb, B, ldb, p0, j0, kb, nb, Bp);
        tile_update(mb, nb, kb, Ap, Bp, Ct, ldc);
      }
    }
    free(Ap);
    free(Bp);
  }
  return failed;
}

/* ---- batches ------------------------------------------------------------
 * Large matrices: one after the other, each using every thread. Small ones:
 * the batch is split over the threads, each product running on one thread
 * (oneDNN runs single-threaded inside a parallel region). */
#define BATCH_PARALLEL_MAX_FLOPS (1 << 22) /* M*N*K under which batches go in parallel */

static bool batch_in_parallel(int64_t M, int64_t N, int64_t K, int64_t batch) {
  double work = (double)M * (double)N * (double)(K > 0 ? K : 1);
  return batch > 1 && work < BATCH_PARALLEL_MAX_FLOPS && omp_get_max_threads() > 1 && !omp_in_parallel();
}

int pdk_gemm_batched_f32(bool transa, bool transb, int64_t M, int64_t N, int64_t K, float alpha,
                         const float *A, int64_t lda, int64_t strideA, const float *B, int64_t ldb,
                         int64_t strideB, float beta, float *C, int64_t ldc, int64_t strideC, int64_t batch) {
  if (batch <= 0 || M <= 0 || N <= 0) return 0;
  int failed = 0;
  if (batch_in_parallel(M, N, K, batch)) {
#pragma omp parallel for schedule(dynamic) reduction(| : failed)
    for (int64_t b = 0; b < batch; b++)
      failed |= pdk_gemm_f32(transa, transb, M, N, K, alpha, A + b * strideA, lda, B + b * strideB, ldb, beta,
                             C + b * strideC, ldc);
  } else {
    for (int64_t b = 0; b < batch && !failed; b++)
      failed = pdk_gemm_f32(transa, transb, M, N, K, alpha, A + b * strideA, lda, B + b * strideB, ldb, beta,
                            C + b * strideC, ldc);
  }
  return failed;
}

int pdk_gemm_batched_f64(bool transa, bool transb, int64_t M, int64_t N, int64_t K, double alpha,
                         const double *A, int64_t lda, int64_t strideA, const double *B, int64_t ldb,
                         int64_t strideB, double beta, double *C, int64_t ldc, int64_t strideC,
                         int64_t batch) {
  if (batch <= 0 || M <= 0 || N <= 0) return 0;
  int failed = 0;
  if (batch_in_parallel(M, N, K, batch)) {
#pragma omp parallel for schedule(dynamic) reduction(| : failed)
    for (int64_t b = 0; b < batch; b++)
      failed |= pdk_gemm_f64(transa, transb, M, N, K, alpha, A + b * strideA, lda, B + b * strideB, ldb, beta,
                             C + b * strideC, ldc);
  } else {
    for (int64_t b = 0; b < batch && !failed; b++)
      failed = pdk_gemm_f64(transa, transb, M, N, K, alpha, A + b * strideA, lda, B + b * strideB, ldb, beta,
                            C + b * strideC, ldc);
  }
  return failed;
}
