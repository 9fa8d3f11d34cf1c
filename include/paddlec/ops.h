/* All tensor ops. */
#ifndef PADDLEC_OPS_H
#define PADDLEC_OPS_H

#include "paddlec/creation.h"
#include "paddlec/linalg.h"
#include "paddlec/manipulation.h"
#include "paddlec/math.h"
#include "paddlec/reduction.h"

#endif
