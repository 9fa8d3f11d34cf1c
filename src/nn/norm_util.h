/* Shared by the normalization layers (norm_batch.c, norm_group.c). */
#ifndef PADDLEC_NN_NORM_UTIL_H
#define PADDLEC_NN_NORM_UTIL_H

#include "paddlec/nn.h"

/* The one input x of a BatchNorm/InstanceNorm `kind`D layer called `name`:
 * kind 1 takes 2-D or 3-D x, kinds 2 and 3 take 4-D and 5-D. An error
 * names the layer and, for a wrong rank, x's shape. */
pd_status pd_nn_norm_input(const char *name, int kind, pd_tensor *const *in, int n_in, pd_tensor **x);

#endif
