/* Optimizers (paddle.optimizer.*), LR schedulers (paddle.optimizer.lr.*),
 * regularizers and gradient clipping. */
#ifndef PADDLEC_OPTIM_H
#define PADDLEC_OPTIM_H

#include "paddlec/core.h"
#include "paddlec/nn.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __cplusplus
}
#endif
#endif
