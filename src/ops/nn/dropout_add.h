/* dropout followed by an add of its result, as one pass (the static
 * Executor's dropout_add fusion, src/static/pass_fuse_dropout_add.c). */
#ifndef PADDLEC_OPS_NN_DROPOUT_ADD_H
#define PADDLEC_OPS_NN_DROPOUT_ADD_H

#include "../op_registry.h"

/* y = add(dropout(x), r) (or add(r, dropout(x)) with r_first) and the
 * dropout's mask, for a dropout op of attrs da (no axes) on contiguous
 * float32 or float64 x, r, y and mask of one shape. The draws, the mask and
 * y are those of the dropout kernel followed by the add's 1-D function
 * add (params add_p): the same bits and the same generator state after. */
pd_status pd_dropout_add_run(const pd_attrs *da, const pd_tensor *x, const pd_tensor *r, bool r_first,
                             pd_ew_fn add, const double *add_p, pd_tensor *y, pd_tensor *mask);

#endif
