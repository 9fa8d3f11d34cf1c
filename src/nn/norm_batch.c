/* paddle.nn.BatchNorm1D / BatchNorm2D / BatchNorm3D. As in Paddle, the
 * running statistics "_mean" and "_variance" are parameters that are not
 * trainable (no gradient, skipped by optimizers) and live in the state
 * dict; training forwards update them in place. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "paddlec/norm.h"
#include "layer_dtype.h"
#include "norm_util.h"

typedef struct batch_norm_layer {
  pd_layer base;
  int64_t num_features;
  int kind; /* 1, 2, 3 */
  double momentum, epsilon;
  bool channel_last;
  char data_format[8]; /* as given (or the default), for printing */
  pd_global_stats use_global_stats;
  pd_tensor *weight, *bias, *mean, *variance; /* borrowed */
} batch_norm_layer;

static const char *type_name(int kind) {
  return kind == 1 ? "BatchNorm1D" : kind == 2 ? "BatchNorm2D" : "BatchNorm3D";
}

static int batch_norm_forward(pd_layer *self, pd_tensor *const *in, int n_in, pd_tensor **out, int max_out) {
  (void)max_out;
  batch_norm_layer *l = (batch_norm_layer *)self;
  const char *name = type_name(l->kind);
  pd_tensor *x;
  pd_status st = pd_nn_norm_input(name, l->kind, in, n_in, &x);
  if (st != PD_OK) return st;
  out[0] = pd_batch_norm(x, l->mean, l->variance, l->weight, l->bias, self->training, l->momentum, l->epsilon,
                         l->channel_last ? "NHWC" : "NCHW", l->use_global_stats);
  return out[0] ? 1 : pd_last_status();
}

static char *batch_norm_repr(const pd_layer *self) {
  const batch_norm_layer *l = (const batch_norm_layer *)self;
  char *s = malloc(160);
  if (!s) return NULL;
  int k = snprintf(s, 160, "num_features=%lld, momentum=%g, epsilon=%g", (long long)l->num_features,
                   l->momentum, l->epsilon);
  if (strcmp(l->data_format, "NCHW") != 0)
    snprintf(s + k, 160 - (size_t)k, ", data_format=%s", l->data_format);
  return s;
}

static const pd_layer_type bn_types[3] = {
    {"BatchNorm1D", batch_norm_forward, NULL, batch_norm_repr},
    {"BatchNorm2D", batch_norm_forward, NULL, batch_norm_repr},
    {"BatchNorm3D", batch_norm_forward, NULL, batch_norm_repr},
};

/* The formats each layer accepts (Paddle's _check_data_format). */
static pd_status parse_format(int kind, const char *fmt, bool *channel_last) {
  static const char *const first[3][3] = {{"NC", "NCL", "NCHW"}, {"NCHW"}, {"NCDHW", "NCHW"}};
  static const char *const last[3][2] = {{"NLC", "NHWC"}, {"NHWC"}, {"NDHWC", "NHWC"}};
  for (int i = 0; i < 3; i++)
    if (first[kind - 1][i] && strcmp(fmt, first[kind - 1][i]) == 0) {
      *channel_last = false;
      return PD_OK;
    }
  for (int i = 0; i < 2; i++)
    if (last[kind - 1][i] && strcmp(fmt, last[kind - 1][i]) == 0) {
      *channel_last = true;
      return PD_OK;
    }
  static const char *const expect[3] = {"NC, NCL or NLC", "NCHW or NHWC", "NCDHW or NDHWC"};
  return pd_set_error(PD_ERR_INVALID, "%s: data_format '%s' is not supported (expected %s)", type_name(kind),
                      fmt, expect[kind - 1]);
}

static pd_layer *batch_norm_new(int kind, int64_t num_features, const pd_nn_batch_norm_opts *opts) {
  static const pd_nn_batch_norm_opts defaults;
  static const char *const default_format[3] = {"NCL", "NCHW", "NCDHW"};
  if (!opts) opts = &defaults;
  const char *name = type_name(kind);
  if (num_features <= 0) {
    pd_set_error(PD_ERR_INVALID, "%s: num_features must be positive, got %lld", name,
                 (long long)num_features);
    return NULL;
  }
  const char *fmt = opts->data_format ? opts->data_format : default_format[kind - 1];
  bool cl;
  if (parse_format(kind, fmt, &cl) != PD_OK) return NULL;
  if ((unsigned)opts->use_global_stats > PD_GLOBAL_STATS_TRUE) {
    pd_set_error(PD_ERR_INVALID, "%s: use_global_stats %d is not a pd_global_stats value", name,
                 (int)opts->use_global_stats);
    return NULL;
  }
  pd_dtype dt = pd_nn_layer_dtype(opts->dtype);
  if (dt == PD_FLOAT16 || dt == PD_BFLOAT16) dt = PD_FLOAT32; /* Paddle keeps half models' norms in float32 */
  batch_norm_layer *l = pd_layer_new(sizeof *l, &bn_types[kind - 1]);
  if (!l) return NULL;
  l->num_features = num_features;
  l->kind = kind;
  l->momentum = opts->has_momentum || opts->momentum != 0 ? opts->momentum : 0.9;
  l->epsilon = opts->epsilon != 0 ? opts->epsilon : 1e-5;
  l->channel_last = cl;
  snprintf(l->data_format, sizeof l->data_format, "%s", fmt);
  l->use_global_stats = opts->use_global_stats;
  const int64_t shape[1] = {num_features};
  pd_initializer one = pd_nn_initializer_constant(1.0), zero = pd_nn_initializer_constant(0.0);
  pd_param_attr stat_zero = {.initializer = &zero, .not_trainable = true};
  pd_param_attr stat_one = {.initializer = &one, .not_trainable = true};
  bool ok = true;
  if (!opts->no_weight)
    ok = (l->weight = pd_layer_create_parameter(&l->base, "weight", 1, shape, dt, opts->weight_attr, &one,
                                                false)) != NULL;
  if (ok && !opts->no_bias)
    ok = (l->bias = pd_layer_create_parameter(&l->base, "bias", 1, shape, dt, opts->bias_attr, NULL, true)) !=
         NULL;
  if (ok)
    ok = (l->mean = pd_layer_create_parameter(&l->base, "_mean", 1, shape, dt, &stat_zero, NULL, false)) !=
         NULL;
  if (ok)
    ok = (l->variance =
              pd_layer_create_parameter(&l->base, "_variance", 1, shape, dt, &stat_one, NULL, false)) != NULL;
  if (!ok) {
    pd_layer_release(&l->base);
    return NULL;
  }
  return &l->base;
}

pd_layer *pd_nn_batch_norm1d(int64_t num_features, const pd_nn_batch_norm_opts *opts) {
  return batch_norm_new(1, num_features, opts);
}
pd_layer *pd_nn_batch_norm2d(int64_t num_features, const pd_nn_batch_norm_opts *opts) {
  return batch_norm_new(2, num_features, opts);
}
pd_layer *pd_nn_batch_norm3d(int64_t num_features, const pd_nn_batch_norm_opts *opts) {
  return batch_norm_new(3, num_features, opts);
}
