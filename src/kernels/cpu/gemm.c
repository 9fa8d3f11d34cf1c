/* GEMM: float32 through oneDNN, float64 with a blocked kernel of our own. */
#include "gemm.h"

#include <omp.h>
#include <oneapi/dnnl/dnnl.h>
#include <stdlib.h>
#include <string.h>

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

int pd_gemm_f32(bool transa, bool transb, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
  if (M <= 0 || N <= 0) return 0;
  if (K <= 0 || alpha == 0.0f) {
    SCALE_C(float, M, N, beta, C, ldc);
    return 0;
  }
  dnnl_status_t st =
      dnnl_sgemm(transa ? 'T' : 'N', transb ? 'T' : 'N', M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
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

static void pack_a(bool transa, const double *A, int64_t lda, int64_t i0, int64_t p0, int64_t mb, int64_t kb,
                   double alpha, double *Ap) {
  for (int64_t i = 0; i < mb; i++) {
    double *dst = Ap + i * kb;
    if (!transa) {
      const double *src = A + (i0 + i) * lda + p0;
      for (int64_t p = 0; p < kb; p++) dst[p] = alpha * src[p];
    } else {
      const double *src = A + p0 * lda + (i0 + i);
      for (int64_t p = 0; p < kb; p++) dst[p] = alpha * src[p * lda];
    }
  }
}

static void pack_b(bool transb, const double *B, int64_t ldb, int64_t p0, int64_t j0, int64_t kb, int64_t nb,
                   double *Bp) {
  for (int64_t p = 0; p < kb; p++) {
    double *dst = Bp + p * nb;
    if (!transb) {
      memcpy(dst, B + (p0 + p) * ldb + j0, sizeof(double) * (size_t)nb);
    } else {
      const double *src = B + j0 * ldb + (p0 + p);
      for (int64_t j = 0; j < nb; j++) dst[j] = src[j * ldb];
    }
  }
}

static void tile_update(int64_t mb, int64_t nb, int64_t kb, const double *Ap, const double *Bp, double *C,
                        int64_t ldc) {
  int64_t i = 0;
  for (; i + 4 <= mb; i += 4) {
    double *restrict c0 = C + i * ldc, *restrict c1 = c0 + ldc, *restrict c2 = c1 + ldc,
                     *restrict c3 = c2 + ldc;
    const double *a0 = Ap + i * kb, *a1 = a0 + kb, *a2 = a1 + kb, *a3 = a2 + kb;
    for (int64_t p = 0; p < kb; p++) {
      const double *restrict b = Bp + p * nb;
      double x0 = a0[p], x1 = a1[p], x2 = a2[p], x3 = a3[p];
      for (int64_t j = 0; j < nb; j++) {
        double bj = b[j];
        c0[j] += x0 * bj;
        c1[j] += x1 * bj;
        c2[j] += x2 * bj;
        c3[j] += x3 * bj;
      }
    }
  }
  for (; i < mb; i++) {
    double *restrict c = C + i * ldc;
    const double *a = Ap + i * kb;
    for (int64_t p = 0; p < kb; p++) {
      const double *restrict b = Bp + p * nb;
      double x = a[p];
      for (int64_t j = 0; j < nb; j++) c[j] += x * b[j];
    }
  }
}

int pd_gemm_f64(bool transa, bool transb, int64_t M, int64_t N, int64_t K, double alpha, const double *A,
                int64_t lda, const double *B, int64_t ldb, double beta, double *C, int64_t ldc) {
  if (M <= 0 || N <= 0) return 0;
  int64_t nmb = (M + MB - 1) / MB, nnb = (N + NB - 1) / NB, tiles = nmb * nnb;
  bool par = (double)M * (double)N * (double)K > 65536.0 && tiles > 1 && !omp_in_parallel();
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

int pd_gemm_batched_f32(bool transa, bool transb, int64_t M, int64_t N, int64_t K, float alpha,
                        const float *A, int64_t lda, int64_t strideA, const float *B, int64_t ldb,
                        int64_t strideB, float beta, float *C, int64_t ldc, int64_t strideC, int64_t batch) {
  if (batch <= 0 || M <= 0 || N <= 0) return 0;
  int failed = 0;
  if (batch_in_parallel(M, N, K, batch)) {
#pragma omp parallel for schedule(static) reduction(| : failed)
    for (int64_t b = 0; b < batch; b++)
      failed |= pd_gemm_f32(transa, transb, M, N, K, alpha, A + b * strideA, lda, B + b * strideB, ldb, beta,
                            C + b * strideC, ldc);
  } else {
    for (int64_t b = 0; b < batch && !failed; b++)
      failed = pd_gemm_f32(transa, transb, M, N, K, alpha, A + b * strideA, lda, B + b * strideB, ldb, beta,
                           C + b * strideC, ldc);
  }
  return failed;
}

int pd_gemm_batched_f64(bool transa, bool transb, int64_t M, int64_t N, int64_t K, double alpha,
                        const double *A, int64_t lda, int64_t strideA, const double *B, int64_t ldb,
                        int64_t strideB, double beta, double *C, int64_t ldc, int64_t strideC,
                        int64_t batch) {
  if (batch <= 0 || M <= 0 || N <= 0) return 0;
  int failed = 0;
  if (batch_in_parallel(M, N, K, batch)) {
#pragma omp parallel for schedule(static) reduction(| : failed)
    for (int64_t b = 0; b < batch; b++)
      failed |= pd_gemm_f64(transa, transb, M, N, K, alpha, A + b * strideA, lda, B + b * strideB, ldb, beta,
                            C + b * strideC, ldc);
  } else {
    for (int64_t b = 0; b < batch && !failed; b++)
      failed = pd_gemm_f64(transa, transb, M, N, K, alpha, A + b * strideA, lda, B + b * strideB, ldb, beta,
                           C + b * strideC, ldc);
  }
  return failed;
}
