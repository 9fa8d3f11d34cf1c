/* Shared by the linalg op sources: the matmul shape rule and GEMM driver. */
#ifndef PADDLEC_OPS_LINALG_INTERNAL_H
#define PADDLEC_OPS_LINALG_INTERNAL_H

#include "../op_registry.h"

/* Output meta of op(x) @ op(y) with Paddle's matmul rules (vectors promoted
 * and their dim dropped, batch dims broadcast); errors name `op`. */
pd_status pd_matmul_meta_of(const char *op, const pd_tensor *x, const pd_tensor *y, bool tx, bool ty,
                            pd_meta *out);
/* out = alpha * op(x) @ op(y) + beta * out, out contiguous and of the shape
 * pd_matmul_meta_of gives (float32 or float64). */
pd_status pd_matmul_into(const char *op, pd_tensor *x, pd_tensor *y, bool tx, bool ty, double alpha,
                         double beta, pd_tensor *out);

#endif
