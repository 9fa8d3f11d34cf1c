/* Keyword arguments of a layer call: the checks pd_layer_call_kw makes
 * before forward runs. */
#ifndef PADDLEC_NN_LAYER_KWARGS_H
#define PADDLEC_NN_LAYER_KWARGS_H

#include "paddlec/nn.h"

/* Every keyword has a name, a known kind and, for a tensor, a non-NULL
 * tensor (NULL: the error of the op that failed is returned); no name
 * twice; and each is one of the layer's declared names[0..n) (n = -1: any). */
pd_status pd_kwargs_check_call(const pd_kwargs *kw, const char *layer, const char *const *names, int n);

#endif
