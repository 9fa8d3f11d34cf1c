/* Normalization: functional ops (layer_norm, rms_norm, batch_norm, group_norm,
 * instance_norm) and their layers. */
#ifndef PADDLEC_NORM_H
#define PADDLEC_NORM_H

#include "paddlec/core.h"
#include "paddlec/nn.h"
#include "paddlec/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- functional ops (paddle.nn.functional) ------------------------------
 * Weight and bias arguments may be NULL (Paddle's None: scale 1, shift 0).
 * x is float16, bfloat16, float32 or float64; the other tensors have x's
 * dtype (float32 with a half x). Gradients flow to x, weight and bias, and
 * to any order (the fused backward ops are differentiable). */

/* layer_norm: normalizes over the last nshape dims of x, which must equal
 * normalized_shape: y = (x - mean) / sqrt(var + epsilon) * weight + bias,
 * biased variance. weight / bias have prod(normalized_shape) elements (shape
 * [prod] or normalized_shape). Paddle's default epsilon is 1e-5. */
PD_API pd_tensor *pd_layer_norm(pd_tensor *x, int nshape, const int64_t *normalized_shape, pd_tensor *weight,
                                pd_tensor *bias, double epsilon);

/* rms_norm: y = x / sqrt(mean(x^2) + epsilon) * weight over the last nshape
 * dims (paddle.nn.functional.rms_norm; default epsilon 1e-5). No bias. */
PD_API pd_tensor *pd_rms_norm(pd_tensor *x, int nshape, const int64_t *normalized_shape, pd_tensor *weight,
                              double epsilon);

/* use_global_stats of batch_norm: None (the default) uses batch statistics
 * when training and the running ones otherwise. */
typedef enum pd_global_stats {
  PD_GLOBAL_STATS_NONE = 0,
  PD_GLOBAL_STATS_FALSE, /* always batch statistics (running ones still updated) */
  PD_GLOBAL_STATS_TRUE,  /* always the running statistics, never updated */
} pd_global_stats;

/* batch_norm: per-channel normalization. With batch statistics, y uses the
 * batch mean and biased variance, and running_mean / running_var (shape
 * [C]) are updated in place as running = momentum * running + (1 - momentum)
 * * batch (Paddle's convention, biased variance as Paddle's kernel); with
 * global statistics y = (x - running_mean) / sqrt(running_var + epsilon) *
 * weight + bias. data_format: NULL (= "NCHW"), "NC", "NCL", "NCHW", "NCDHW"
 * (channel dim 1) or "NLC", "NHWC", "NDHWC" (channel last); a 2-D x is
 * [N, C] either way. Paddle's defaults: training false, momentum 0.9,
 * epsilon 1e-5. */
PD_API pd_tensor *pd_batch_norm(pd_tensor *x, pd_tensor *running_mean, pd_tensor *running_var,
                                pd_tensor *weight, pd_tensor *bias, bool training, double momentum,
                                double epsilon, const char *data_format, pd_global_stats use_global_stats);

/* group_norm: channels split into num_groups groups; statistics per sample
 * and group; weight / bias of shape [C]. data_format as batch_norm (NULL =
 * "NCHW"); Paddle's default epsilon 1e-5. */
PD_API pd_tensor *pd_group_norm(pd_tensor *x, int64_t num_groups, double epsilon, pd_tensor *weight,
                                pd_tensor *bias, const char *data_format);

/* instance_norm: statistics per sample and channel over the spatial dims
 * (use_input_stats true, Paddle's default). With use_input_stats false,
 * running_mean / running_var (shape [C]) normalize instead. weight / bias of
 * shape [C]. momentum is accepted for Paddle's signature (running statistics
 * are not updated, as in Paddle's eager mode). data_format NULL = "NCHW";
 * Paddle's default eps 1e-5. */
PD_API pd_tensor *pd_instance_norm(pd_tensor *x, pd_tensor *running_mean, pd_tensor *running_var,
                                   pd_tensor *weight, pd_tensor *bias, bool use_input_stats, double momentum,
                                   double eps, const char *data_format);

/* ---- layers (paddle.nn) --------------------------------------------------
 * Options structs are optional: NULL or all-zero means Paddle's defaults; an
 * epsilon of 0 means the default value, a zero dtype float32. A momentum of 0
 * means the default 0.9 unless has_momentum is set, which takes momentum as
 * written (Paddle's momentum=0: the running statistics become the batch's). */

typedef struct pd_nn_layer_norm_opts {
  double epsilon;                   /* 0: 1e-5 */
  const pd_param_attr *weight_attr; /* default initializer: ones */
  const pd_param_attr *bias_attr;   /* default initializer: zeros */
  bool no_weight;                   /* weight_attr=False: no weight */
  bool no_bias;                     /* bias_attr=False: no bias */
  pd_dtype dtype;
} pd_nn_layer_norm_opts;

/* paddle.nn.LayerNorm(normalized_shape): parameters "weight" and "bias" of
 * shape [prod(normalized_shape)]. */
PD_API pd_layer *pd_nn_layer_norm(int nshape, const int64_t *normalized_shape,
                                  const pd_nn_layer_norm_opts *opts);

typedef struct pd_nn_rms_norm_opts {
  double epsilon;                   /* 0: 1e-5 */
  const pd_param_attr *weight_attr; /* default initializer: ones */
  bool no_weight;                   /* elementwise_affine=False: no weight */
  pd_dtype dtype;
} pd_nn_rms_norm_opts;

/* paddle.nn.RMSNorm(normalized_shape): parameter "weight" of shape
 * normalized_shape. */
PD_API pd_layer *pd_nn_rms_norm(int nshape, const int64_t *normalized_shape, const pd_nn_rms_norm_opts *opts);

typedef struct pd_nn_batch_norm_opts {
  bool has_momentum;                /* momentum is taken as written, 0 included */
  double momentum;                  /* without has_momentum, 0: 0.9 */
  double epsilon;                   /* 0: 1e-5 */
  const pd_param_attr *weight_attr; /* default initializer: ones */
  const pd_param_attr *bias_attr;   /* default initializer: zeros */
  bool no_weight;                   /* weight_attr=False: no weight */
  bool no_bias;                     /* bias_attr=False: no bias */
  const char *data_format;          /* NULL: the layer's default (NCL, NCHW, NCDHW) */
  pd_global_stats use_global_stats;
  pd_dtype dtype;
} pd_nn_batch_norm_opts;

/* paddle.nn.BatchNorm1D/2D/3D(num_features): parameters "weight", "bias"
 * (trainable) and "_mean" (zeros), "_variance" (ones): not trainable, no
 * gradient, saved in the state dict, updated by training forwards. 1D takes
 * 2-D or 3-D input ("NC"/"NCL" or "NLC"), 2D 4-D ("NCHW"/"NHWC"), 3D 5-D
 * ("NCDHW"/"NDHWC"). */
PD_API pd_layer *pd_nn_batch_norm1d(int64_t num_features, const pd_nn_batch_norm_opts *opts);
PD_API pd_layer *pd_nn_batch_norm2d(int64_t num_features, const pd_nn_batch_norm_opts *opts);
PD_API pd_layer *pd_nn_batch_norm3d(int64_t num_features, const pd_nn_batch_norm_opts *opts);

typedef struct pd_nn_group_norm_opts {
  double epsilon;                   /* 0: 1e-5 */
  const pd_param_attr *weight_attr; /* default initializer: ones */
  const pd_param_attr *bias_attr;   /* default initializer: zeros */
  bool no_weight;                   /* weight_attr=False: ones, not trainable (as Paddle) */
  bool no_bias;                     /* bias_attr=False: zeros, not trainable (as Paddle) */
  const char *data_format;          /* NULL: "NCHW" */
  pd_dtype dtype;
} pd_nn_group_norm_opts;

/* paddle.nn.GroupNorm(num_groups, num_channels): parameters "weight" and
 * "bias" of shape [num_channels]; num_groups must divide num_channels. */
PD_API pd_layer *pd_nn_group_norm(int64_t num_groups, int64_t num_channels,
                                  const pd_nn_group_norm_opts *opts);

typedef struct pd_nn_instance_norm_opts {
  double epsilon;                   /* 0: 1e-5 */
  bool has_momentum;                /* momentum is taken as written, 0 included */
  double momentum;                  /* without has_momentum, 0: 0.9 (kept for Paddle's signature) */
  const pd_param_attr *weight_attr; /* default initializer: ones */
  const pd_param_attr *bias_attr;   /* default initializer: zeros */
  bool no_affine;                   /* weight_attr=bias_attr=False: no parameters */
  const char *data_format;          /* NULL: the layer's default (NCL, NCHW, NCDHW) */
  pd_dtype dtype;
} pd_nn_instance_norm_opts;

/* paddle.nn.InstanceNorm1D/2D/3D(num_features): parameters "scale" and
 * "bias" of shape [num_features] (Paddle's names); no running statistics.
 * 1D takes 2-D or 3-D input, 2D 4-D, 3D 5-D. */
PD_API pd_layer *pd_nn_instance_norm1d(int64_t num_features, const pd_nn_instance_norm_opts *opts);
PD_API pd_layer *pd_nn_instance_norm2d(int64_t num_features, const pd_nn_instance_norm_opts *opts);
PD_API pd_layer *pd_nn_instance_norm3d(int64_t num_features, const pd_nn_instance_norm_opts *opts);

#ifdef __cplusplus
}
#endif
#endif
