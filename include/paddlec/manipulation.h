/* Shape and indexing ops. Views share storage where Paddle's do. */
#ifndef PADDLEC_MANIPULATION_H
#define PADDLEC_MANIPULATION_H

#include "paddlec/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One dim may be -1 (inferred), 0 copies the input dim. A view when the
 * strides allow, a copy otherwise. */
pd_tensor *pd_reshape(pd_tensor *x, int ndim, const int64_t *shape);
/* Broadcasts x to shape (-1 keeps x's dim): a view with zero strides. */
pd_tensor *pd_expand(pd_tensor *x, int ndim, const int64_t *shape);
/* Permutes dims (a view): out.shape[i] = x.shape[perm[i]]. */
pd_tensor *pd_transpose(pd_tensor *x, int nperm, const int64_t *perm);
/* x itself when contiguous, else a contiguous copy (differentiable). */
pd_tensor *pd_contiguous(pd_tensor *x);

#ifdef __cplusplus
}
#endif
#endif
