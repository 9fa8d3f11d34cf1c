/* paddle.nn.GroupNorm and paddle.nn.InstanceNorm1D / 2D / 3D. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "paddlec/norm.h"
#include "layer_dtype.h"
#include "norm_util.h"

/* ---- GroupNorm ------------------------------------------------------------------------------------ */

typedef struct group_norm_layer {
  pd_layer base;
  int64_t num_groups, num_channels;
  double epsilon;
  char data_format[8];
  pd_tensor *weight, *bias; /* borrowed */
} group_norm_layer;

static int group_norm_forward(pd_layer *self, pd_tensor *const *in, int n_in, pd_tensor **out, int max_out) {
  (void)max_out;
  group_norm_layer *l = (group_norm_layer *)self;
  if (n_in != 1) return pd_set_error(PD_ERR_INVALID, "GroupNorm: expects 1 input, got %d", n_in);
  out[0] = pd_group_norm(in[0], l->num_groups, l->epsilon, l->weight, l->bias, l->data_format);
  return out[0] ? 1 : pd_last_status();
}

static char *group_norm_repr(const pd_layer *self) {
  const group_norm_layer *l = (const group_norm_layer *)self;
  char *s = malloc(128);
  if (s)
    snprintf(s, 128, "num_groups=%lld, num_channels=%lld, epsilon=%g", (long long)l->num_groups,
             (long long)l->num_channels, l->epsilon);
  return s;
}

static const pd_layer_type group_norm_type = {"GroupNorm", group_norm_forward, NULL, group_norm_repr};

static bool known_format(const char *fmt, const char *const *list, int n) {
  for (int i = 0; i < n; i++)
    if (strcmp(fmt, list[i]) == 0) return true;
  return false;
}

pd_layer *pd_nn_group_norm(int64_t num_groups, int64_t num_channels, const pd_nn_group_norm_opts *opts) {
  static const pd_nn_group_norm_opts defaults;
  static const char *const formats[] = {"NCL", "NCHW", "NCDHW", "NLC", "NHWC", "NDHWC"};
  if (!opts) opts = &defaults;
  if (num_groups <= 0 || num_channels <= 0 || num_channels % num_groups != 0) {
    pd_set_error(PD_ERR_INVALID,
                 "GroupNorm: num_channels %lld must be a positive multiple of num_groups %lld",
                 (long long)num_channels, (long long)num_groups);
    return NULL;
  }
  const char *fmt = opts->data_format ? opts->data_format : "NCHW";
  if (!known_format(fmt, formats, 6)) {
    pd_set_error(PD_ERR_INVALID,
                 "GroupNorm: unsupported data layout '%s' (expected NCL, NCHW, NCDHW, NLC, NHWC or NDHWC)",
                 fmt);
    return NULL;
  }
  pd_dtype dt = pd_nn_layer_dtype(opts->dtype);
  group_norm_layer *l = pd_layer_new(sizeof *l, &group_norm_type);
  if (!l) return NULL;
  l->num_groups = num_groups;
  l->num_channels = num_channels;
  l->epsilon = opts->epsilon != 0 ? opts->epsilon : 1e-5;
  snprintf(l->data_format, sizeof l->data_format, "%s", fmt);
  const int64_t shape[1] = {num_channels};
  pd_initializer one = pd_nn_initializer_constant(1.0), zero = pd_nn_initializer_constant(0.0);
  /* weight_attr / bias_attr False: fixed ones / zeros without gradient, as Paddle */
  pd_param_attr fixed_one = {.initializer = &one, .not_trainable = true};
  pd_param_attr fixed_zero = {.initializer = &zero, .not_trainable = true};
  l->weight = pd_layer_create_parameter(&l->base, "weight", 1, shape, dt,
                                        opts->no_weight ? &fixed_one : opts->weight_attr, &one, false);
  if (l->weight)
    l->bias = pd_layer_create_parameter(&l->base, "bias", 1, shape, dt,
                                        opts->no_bias ? &fixed_zero : opts->bias_attr, NULL, true);
  if (!l->weight || !l->bias) {
    pd_layer_release(&l->base);
    return NULL;
  }
  return &l->base;
}

/* ---- InstanceNorm1D / 2D / 3D ----------------------------------------------------------------------- */

typedef struct instance_norm_layer {
  pd_layer base;
  int64_t num_features;
  int kind;
  double epsilon, momentum;
  char data_format[8];
  pd_tensor *scale, *bias; /* borrowed; NULL without affine parameters */
} instance_norm_layer;

static const char *in_name(int kind) {
  return kind == 1 ? "InstanceNorm1D" : kind == 2 ? "InstanceNorm2D" : "InstanceNorm3D";
}

static int instance_norm_forward(pd_layer *self, pd_tensor *const *in, int n_in, pd_tensor **out,
                                 int max_out) {
  (void)max_out;
  instance_norm_layer *l = (instance_norm_layer *)self;
  const char *name = in_name(l->kind);
  pd_tensor *x;
  pd_status st = pd_nn_norm_input(name, l->kind, in, n_in, &x);
  if (st != PD_OK) return st;
  out[0] = pd_instance_norm(x, NULL, NULL, l->scale, l->bias, true, l->momentum, l->epsilon, l->data_format);
  return out[0] ? 1 : pd_last_status();
}

static char *instance_norm_repr(const pd_layer *self) {
  const instance_norm_layer *l = (const instance_norm_layer *)self;
  char *s = malloc(96);
  if (s) snprintf(s, 96, "num_features=%lld, epsilon=%g", (long long)l->num_features, l->epsilon);
  return s;
}

static const pd_layer_type in_types[3] = {
    {"InstanceNorm1D", instance_norm_forward, NULL, instance_norm_repr},
    {"InstanceNorm2D", instance_norm_forward, NULL, instance_norm_repr},
    {"InstanceNorm3D", instance_norm_forward, NULL, instance_norm_repr},
};

static pd_layer *instance_norm_new(int kind, int64_t num_features, const pd_nn_instance_norm_opts *opts) {
  static const pd_nn_instance_norm_opts defaults;
  static const char *const default_format[3] = {"NCL", "NCHW", "NCDHW"};
  static const char *const formats[] = {"NC", "NCL", "NCHW", "NCDHW", "NLC", "NHWC", "NDHWC"};
  if (!opts) opts = &defaults;
  const char *name = in_name(kind);
  if (num_features <= 0) {
    pd_set_error(PD_ERR_INVALID, "%s: num_features must be positive, got %lld", name,
                 (long long)num_features);
    return NULL;
  }
  const char *fmt = opts->data_format ? opts->data_format : default_format[kind - 1];
  if (!known_format(fmt, formats, 7)) {
    pd_set_error(PD_ERR_INVALID,
                 "%s: data_format '%s' is not supported (expected NC, NCL, NCHW, NCDHW, NLC, NHWC or NDHWC)",
                 name, fmt);
    return NULL;
  }
  pd_dtype dt = pd_nn_layer_dtype(opts->dtype);
  instance_norm_layer *l = pd_layer_new(sizeof *l, &in_types[kind - 1]);
  if (!l) return NULL;
  l->num_features = num_features;
  l->kind = kind;
  l->epsilon = opts->epsilon != 0 ? opts->epsilon : 1e-5;
  l->momentum = opts->has_momentum || opts->momentum != 0 ? opts->momentum : 0.9;
  snprintf(l->data_format, sizeof l->data_format, "%s", fmt);
  if (!opts->no_affine) {
    const int64_t shape[1] = {num_features};
    pd_initializer one = pd_nn_initializer_constant(1.0), zero = pd_nn_initializer_constant(0.0);
    l->scale = pd_layer_create_parameter(&l->base, "scale", 1, shape, dt, opts->weight_attr, &one, false);
    if (l->scale)
      l->bias = pd_layer_create_parameter(&l->base, "bias", 1, shape, dt, opts->bias_attr, &zero, true);
    if (!l->scale || !l->bias) {
      pd_layer_release(&l->base);
      return NULL;
    }
  }
  return &l->base;
}

pd_layer *pd_nn_instance_norm1d(int64_t num_features, const pd_nn_instance_norm_opts *opts) {
  return instance_norm_new(1, num_features, opts);
}
pd_layer *pd_nn_instance_norm2d(int64_t num_features, const pd_nn_instance_norm_opts *opts) {
  return instance_norm_new(2, num_features, opts);
}
pd_layer *pd_nn_instance_norm3d(int64_t num_features, const pd_nn_instance_norm_opts *opts) {
  return instance_norm_new(3, num_features, opts);
}
