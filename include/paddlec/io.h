/* Data: datasets, samplers, DataLoader (paddle.io.*), readers for .npy/.npz,
 * MNIST idx and CSV files, paddle.vision.datasets. */
#ifndef PADDLEC_IO_H
#define PADDLEC_IO_H

#include "paddlec/core.h"
#include "paddlec/nn.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __cplusplus
}
#endif
#endif
