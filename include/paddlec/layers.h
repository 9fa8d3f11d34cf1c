/* paddle.nn layers. Each constructor returns a new pd_layer (release with
 * pd_layer_release) or NULL with pd_last_error() set. Options structs are
 * optional (NULL = Paddle's defaults); a zero dtype means float32. */
#ifndef PADDLEC_LAYERS_H
#define PADDLEC_LAYERS_H

#include "paddlec/nn.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pd_nn_linear_opts {
  const pd_param_attr *weight_attr; /* default initializer: XavierUniform */
  const pd_param_attr *bias_attr;   /* default initializer: zeros */
  bool no_bias;                     /* bias_attr=False */
  pd_dtype dtype;
} pd_nn_linear_opts;

/* paddle.nn.Linear(in_features, out_features): weight [in, out], bias [out]. */
pd_layer *pd_nn_linear(int64_t in_features, int64_t out_features, const pd_nn_linear_opts *opts);

#ifdef __cplusplus
}
#endif
#endif
