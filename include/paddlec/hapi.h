/* Deprecated: kept for one release so that code including it still builds.
 * Include what you use instead:
 *   paddlec/checkpoint.h  pd_save / pd_load, pd_layer_save / pd_layer_load, pd_string_map
 *   paddlec/summary.h     pd_summary, pd_flops
 *   paddlec/model.h       pd_model (paddle.Model), metrics, callbacks
 * (paddlec.h includes all three.) */
#ifndef PADDLEC_HAPI_H
#define PADDLEC_HAPI_H

#include "paddlec/checkpoint.h"
#include "paddlec/model.h"
#include "paddlec/summary.h"

#endif
