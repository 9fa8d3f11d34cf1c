/* Linear algebra: matmul and friends, through one GEMM entry point. */
#ifndef PADDLEC_LINALG_H
#define PADDLEC_LINALG_H

#include "paddlec/core.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __cplusplus
}
#endif
#endif
