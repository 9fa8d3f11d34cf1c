/* Reductions of raw buffers for the collectives (every dtype). Serial: in a
 * collective each rank reduces its own slice, so the ranks are the
 * parallelism. */
#ifndef PADDLEC_KERNELS_COMM_REDUCE_H
#define PADDLEC_KERNELS_COMM_REDUCE_H

#include <stddef.h>

#include "paddlec/core.h"

/* The reductions the kernel knows. The distributed layer maps its
 * pd_reduce_op onto these (pd_comm_kernel_op in src/distributed/comm/backend.h);
 * the compute layer does not see the distributed API. */
typedef enum pdk_reduce_op {
  PDK_REDUCE_SUM,
  PDK_REDUCE_MAX,
  PDK_REDUCE_MIN,
  PDK_REDUCE_PROD,
  PDK_REDUCE_AVG,
} pdk_reduce_op;

/* dst[i] = op(srcs[0][i], srcs[1][i], ..., srcs[nsrc-1][i]) for i < n, in
 * source order (so every rank computes bit-identical sums). dst may alias
 * any source. op is SUM, MAX, MIN, PROD or AVG (the sum divided by nsrc
 * block by block, while it is still in cache). float16/bfloat16 accumulate in float32 and round
 * once; bool: SUM/MAX are logical or, PROD/MIN logical and. */
void pdk_comm_reduce(void *dst, const void *const *srcs, int nsrc, size_t n, pd_dtype dt, pdk_reduce_op op);
/* buf[i] /= divisor (integer division for integer dtypes). */
void pdk_comm_divide(void *buf, size_t n, pd_dtype dt, int divisor);

#endif
