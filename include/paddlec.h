/* paddle.c — PaddlePaddle's training system in C. The umbrella header. */
#ifndef PADDLEC_H
#define PADDLEC_H

#define PADDLEC_VERSION_MAJOR 0
#define PADDLEC_VERSION_MINOR 1
#define PADDLEC_VERSION_PATCH 0

#include "paddlec/autograd.h"
#include "paddlec/core.h"
#include "paddlec/layers.h"
#include "paddlec/nn.h"
#include "paddlec/ops.h"

#endif
