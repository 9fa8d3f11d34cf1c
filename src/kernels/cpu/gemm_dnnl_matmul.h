/* float32 products with a transposed right operand through oneDNN's matmul
 * primitive. dnnl_sgemm divides C = A * B^T with a short A (a batch of 128
 * rows against a 1024 x 1024 weight: a linear layer's input gradient) so
 * that its second thread gains nothing (2.5 ms on one thread or two, 2
 * vCPUs), where the matmul primitive (brgemm) takes 1.3 ms; on other
 * transposes the two are within a few percent (bench/README.md, "Matmul"). */
#ifndef PADDLEC_KERNELS_GEMM_DNNL_MATMUL_H
#define PADDLEC_KERNELS_GEMM_DNNL_MATMUL_H

#include <stdbool.h>
#include <stdint.h>

/* C = alpha * A * B^T + beta * C, row-major, as pdk_gemm_f32 with transa
 * false and transb true. Returns 0 when done, -1 when the primitive cannot
 * take the product (pdk_gemm_f32 then runs it as before: nothing was
 * written), or a positive oneDNN status on a failure after writing began. */
int pdk_gemm_f32_matmul_nt(int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
                           const float *B, int64_t ldb, float beta, float *C, int64_t ldc);

/* How many products ran through the primitive (tests). */
long pdk_gemm_matmul_products(void);

#endif
