/* Normalization: functional ops (layer_norm, rms_norm, batch_norm, group_norm,
 * instance_norm) and their layers. */
#ifndef PADDLEC_NORM_H
#define PADDLEC_NORM_H

#include "paddlec/core.h"
#include "paddlec/nn.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __cplusplus
}
#endif
#endif
