/* The GEMM entry points: every matrix product in the library goes through
 * these, so the backing library can be swapped in one place.
 *
 * All matrices are row-major. C = alpha * op(A) * op(B) + beta * C with
 * op(X) = X or X^T; op(A) is M x K, op(B) is K x N, C is M x N. Leading
 * dimensions are in elements: lda >= (transa ? M : K), ldb >= (transb ? K : N),
 * ldc >= N (each at least 1). beta == 0 ignores C's old contents (NaN too).
 * A K of 0 gives C = beta * C. Return 0 on success, non-zero on a failure of
 * the backing library. */
#ifndef PADDLEC_KERNELS_GEMM_H
#define PADDLEC_KERNELS_GEMM_H

#include <stdbool.h>
#include <stdint.h>

/* float32, through oneDNN's dnnl_sgemm (threads from the shared OpenMP pool);
 * in deterministic mode (pd_set_deterministic) in parts fixed by the shape,
 * for the same bits on any number of threads. */
int pdk_gemm_f32(bool transa, bool transb, int64_t M, int64_t N, int64_t K, float alpha, const float *A,
                 int64_t lda, const float *B, int64_t ldb, float beta, float *C, int64_t ldc);

/* float32 on the calling thread alone, for kernels that run many small
 * products inside their own parallel loop (attention's blocks): the bits
 * depend on the shape alone (M, N, K, the transposes and leading
 * dimensions), never on the thread count, the deterministic mode or the
 * thread governor. Inside a parallel region oneDNN runs single-threaded;
 * outside one the call sets this thread's team size to 1 around it. */
int pdk_gemm_f32_serial(bool transa, bool transb, int64_t M, int64_t N, int64_t K, float alpha,
                        const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
                        int64_t ldc);

/* float64: a cache-blocked, OpenMP-parallel kernel (used for float64 math
 * and gradient checks; correct rather than fast). */
int pdk_gemm_f64(bool transa, bool transb, int64_t M, int64_t N, int64_t K, double alpha, const double *A,
                 int64_t lda, const double *B, int64_t ldb, double beta, double *C, int64_t ldc);

/* Strided batches: matrix b of A starts at A + b * strideA (likewise B and
 * C). A stride of 0 reuses one matrix for every batch (broadcasting);
 * strideC must keep the C matrices apart. */
int pdk_gemm_batched_f32(bool transa, bool transb, int64_t M, int64_t N, int64_t K, float alpha,
                         const float *A, int64_t lda, int64_t strideA, const float *B, int64_t ldb,
                         int64_t strideB, float beta, float *C, int64_t ldc, int64_t strideC, int64_t batch);
int pdk_gemm_batched_f64(bool transa, bool transb, int64_t M, int64_t N, int64_t K, double alpha,
                         const double *A, int64_t lda, int64_t strideA, const double *B, int64_t ldb,
                         int64_t strideB, double beta, double *C, int64_t ldc, int64_t strideC,
                         int64_t batch);

#endif
