/* Linear algebra: matmul and friends, through one GEMM entry point.
 * float32 and float64 (float16/bfloat16 compute in float32); operands of a
 * product must share one dtype. Integer dtypes are refused. */
#ifndef PADDLEC_LINALG_H
#define PADDLEC_LINALG_H

#include "paddlec/core.h"
#include "paddlec/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* paddle.matmul: op(x) @ op(y), op transposing the last two dims when its
 * flag is set. A 1-D x is taken as [1, K] and a 1-D y as [K, 1], the added
 * dim dropped from the result (two vectors give a 0-D tensor; flags have no
 * effect on vectors). Batch dims (all but the last two) broadcast. */
PD_API pd_tensor *pd_matmul(pd_tensor *x, pd_tensor *y, bool transpose_x, bool transpose_y);
/* paddle.mm: matmul(input, mat2) without transpose flags. */
PD_API pd_tensor *pd_mm(pd_tensor *input, pd_tensor *mat2);
/* paddle.bmm: [B, M, K] x [B, K, N] -> [B, M, N]; no broadcasting. */
PD_API pd_tensor *pd_bmm(pd_tensor *x, pd_tensor *y);
/* paddle.mv: [M, N] matrix times [N] vector -> [M]. */
PD_API pd_tensor *pd_mv(pd_tensor *x, pd_tensor *vec);
/* paddle.dot: 1-D x 1-D -> 0-D; 2-D [B, N] x [B, N] -> [B] (row-wise). */
PD_API pd_tensor *pd_dot(pd_tensor *x, pd_tensor *y);
/* paddle.addmm: beta * input + alpha * (x @ y); x, y 2-D, input 1-D or 2-D
 * and broadcast to the product's shape (Paddle's defaults: beta = alpha = 1). */
PD_API pd_tensor *pd_addmm(pd_tensor *input, pd_tensor *x, pd_tensor *y, double beta, double alpha);
/* paddle.t: the transpose of a tensor of rank <= 2 (a view; rank 0 and 1
 * are returned as they are). */
PD_API pd_tensor *pd_t(pd_tensor *input);
/* paddle.einsum(equation, *operands): letters label dims, "..." stands for
 * broadcast dims, "->" names the output (implicit: broadcast dims, then the
 * labels seen once, alphabetically). Labels missing from the output are
 * summed. Differentiable (built from sum, transpose, reshape and matmul).
 * A label repeated within one term (diagonals, traces) is not supported. */
PD_API pd_tensor *pd_einsum(const char *equation, int n_operands, pd_tensor *const *operands);

#ifdef __cplusplus
}
#endif
#endif
