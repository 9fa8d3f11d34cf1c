/* Convolution and pooling: functional ops (conv1d/2d/3d and transposes,
 * max/avg/adaptive pooling) and their layers. */
#ifndef PADDLEC_CONV_H
#define PADDLEC_CONV_H

#include "paddlec/core.h"
#include "paddlec/nn.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __cplusplus
}
#endif
#endif
