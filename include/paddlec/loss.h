/* Losses: functional ops (paddle.nn.functional.*_loss, cross_entropy, ...)
 * and their layers (paddle.nn.*Loss). */
#ifndef PADDLEC_LOSS_H
#define PADDLEC_LOSS_H

#include "paddlec/core.h"
#include "paddlec/nn.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __cplusplus
}
#endif
#endif
