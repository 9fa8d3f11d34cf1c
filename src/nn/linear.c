/* paddle.nn.Linear: y = x W + b, W of shape [in_features, out_features]. */
#include <stdio.h>
#include <stdlib.h>

#include "paddlec/layers.h"
#include "paddlec/linalg.h"
#include "paddlec/math.h"
#include "layer_dtype.h"

typedef struct linear {
  pd_layer base;
  int64_t in_features, out_features;
  pd_tensor *weight, *bias; /* borrowed from the base's parameter list */
} linear;

static int linear_forward(pd_layer *self, pd_tensor *const *in, int n_in, pd_tensor **out, int max_out) {
  (void)max_out;
  linear *l = (linear *)self;
  if (n_in != 1) return pd_set_error(PD_ERR_INVALID, "Linear: expects 1 input, got %d", n_in);
  pd_tensor *y = pd_matmul(in[0], l->weight, false, false);
  out[0] = l->bias ? pd_add(y, l->bias) : y;
  return out[0] ? 1 : pd_last_status();
}

static char *linear_repr(const pd_layer *self) {
  const linear *l = (const linear *)self;
  char *s = malloc(96);
  if (s)
    snprintf(s, 96, "in_features=%lld, out_features=%lld, dtype=%s", (long long)l->in_features,
             (long long)l->out_features, pd_dtype_name(pd_tensor_dtype(l->weight)));
  return s;
}

static const pd_layer_type linear_type = {"Linear", linear_forward, NULL, linear_repr};

pd_layer *pd_nn_linear(int64_t in_features, int64_t out_features, const pd_nn_linear_opts *opts) {
  static const pd_nn_linear_opts defaults;
  if (!opts) opts = &defaults;
  if (in_features <= 0 || out_features <= 0) {
    pd_set_error(PD_ERR_INVALID, "Linear: in_features (%lld) and out_features (%lld) must be positive",
                 (long long)in_features, (long long)out_features);
    return NULL;
  }
  pd_dtype dt = pd_nn_layer_dtype(opts->dtype);
  linear *l = pd_layer_new(sizeof *l, &linear_type);
  if (!l) return NULL;
  l->in_features = in_features;
  l->out_features = out_features;
  l->weight = pd_layer_create_parameter(&l->base, "weight", 2, (int64_t[]){in_features, out_features}, dt,
                                        opts->weight_attr, NULL, false);
  if (l->weight && !opts->no_bias)
    l->bias = pd_layer_create_parameter(&l->base, "bias", 1, (int64_t[]){out_features}, dt, opts->bias_attr,
                                        NULL, true);
  if (!l->weight || (!opts->no_bias && !l->bias)) {
    pd_layer_release(&l->base);
    return NULL;
  }
  return &l->base;
}
