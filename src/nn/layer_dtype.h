/* The dtype a layer builds its parameters in: an options struct's dtype 0
 * (PD_BOOL, never a parameter dtype) means paddle.get_default_dtype(). */
#ifndef PADDLEC_NN_LAYER_DTYPE_H
#define PADDLEC_NN_LAYER_DTYPE_H

#include "paddlec/core.h"

static inline pd_dtype pd_nn_layer_dtype(pd_dtype dt) { return dt == PD_BOOL ? pd_get_default_dtype() : dt; }

#endif
