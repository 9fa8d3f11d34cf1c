/* paddle.c — PaddlePaddle's training system in C. The umbrella header. */
#ifndef PADDLEC_H
#define PADDLEC_H

#define PADDLEC_VERSION_MAJOR 0
#define PADDLEC_VERSION_MINOR 1
#define PADDLEC_VERSION_PATCH 0

#include "paddlec/auto_parallel.h"
#include "paddlec/dist_model.h"
#include "paddlec/autograd.h"
#include "paddlec/checkpoint.h"
#include "paddlec/conv.h"
#include "paddlec/core.h"
#include "paddlec/distributed.h"
#include "paddlec/fleet.h"
#include "paddlec/io.h"
#include "paddlec/layers.h"
#include "paddlec/loss.h"
#include "paddlec/model.h"
#include "paddlec/nn.h"
#include "paddlec/norm.h"
#include "paddlec/ops.h"
#include "paddlec/optim.h"
#include "paddlec/parallel.h"
#include "paddlec/rnn.h"
#include "paddlec/jit.h"
#include "paddlec/static.h"
#include "paddlec/static_control.h"
#include "paddlec/tensor_array.h"
#include "paddlec/summary.h"
#include "paddlec/transformer.h"

#endif
