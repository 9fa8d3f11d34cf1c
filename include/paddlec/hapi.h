/* Checkpoints (paddle.save / paddle.load in safetensors), summary, flops,
 * and the high-level Model (paddle.Model) with callbacks and metrics. */
#ifndef PADDLEC_HAPI_H
#define PADDLEC_HAPI_H

#include "paddlec/core.h"
#include "paddlec/nn.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __cplusplus
}
#endif
#endif
