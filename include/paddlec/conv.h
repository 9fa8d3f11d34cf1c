/* Convolution and pooling: functional ops (conv1d/2d/3d and transposes,
 * max/avg/adaptive pooling) and their layers.
 *
 * Paddle passes stride, padding, dilation, ... as an int or a list; here
 * each is a count and an array: a count of 0 means Paddle's default, 1 means
 * the same value for every spatial dim, otherwise one value per spatial dim
 * (padding also takes 2 * dims values, [before_0, after_0, before_1, ...]).
 * All-zero options are Paddle's defaults, e.g.
 *   pd_conv2d(x, w, b, &(pd_conv_opts){.n_stride = 1, .stride = {2}, .n_padding = 1, .padding = {1}});
 * Layouts: channels first ("NCL", "NCHW", "NCDHW", the default) or channels
 * last ("NLC", "NHWC", "NDHWC"). */
#ifndef PADDLEC_CONV_H
#define PADDLEC_CONV_H

#include "paddlec/core.h"
#include "paddlec/nn.h"
#include "paddlec/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- convolutions (paddle.nn.functional.conv*) ------------------------- */

typedef struct pd_conv_opts {
  int n_stride;
  int64_t stride[3]; /* default 1 */
  int n_padding;
  int64_t padding[6]; /* default 0 */
  /* NULL or "EXPLICIT": use padding; "SAME" (output = ceil(input / stride),
   * dilation becomes 1, as Paddle) or "VALID" (no padding); any case */
  const char *padding_algorithm;
  int n_dilation;
  int64_t dilation[3];     /* default 1 */
  int64_t groups;          /* 0 means 1 */
  const char *data_format; /* NULL: channels first */
  /* transposed convolutions only */
  int n_output_padding;
  int64_t output_padding[3]; /* default 0; each < max(stride, dilation) */
  int n_output_size;
  int64_t output_size[3]; /* 0 entries: inferred; else in [inferred, inferred + stride) */
} pd_conv_opts;

/* conv1d/2d/3d(x, weight, bias): x [N, C_in, spatial...] (or channels
 * last), weight [C_out, C_in / groups, k...], bias [C_out] or NULL. float32
 * runs on oneDNN, float64 on an im2col + GEMM path; float16/bfloat16 compute
 * in float32. */
PD_API pd_tensor *pd_conv1d(pd_tensor *x, pd_tensor *weight, pd_tensor *bias, const pd_conv_opts *opts);
PD_API pd_tensor *pd_conv2d(pd_tensor *x, pd_tensor *weight, pd_tensor *bias, const pd_conv_opts *opts);
PD_API pd_tensor *pd_conv3d(pd_tensor *x, pd_tensor *weight, pd_tensor *bias, const pd_conv_opts *opts);

/* conv1d/2d/3d_transpose(x, weight, bias): x [N, C_in, spatial...], weight
 * [C_in, C_out / groups, k...], bias [C_out] or NULL. Output size per dim:
 * (in - 1) * stride - pad_before - pad_after + dilation * (k - 1) + 1 +
 * output_padding, or output_size when given. */
PD_API pd_tensor *pd_conv1d_transpose(pd_tensor *x, pd_tensor *weight, pd_tensor *bias,
                                      const pd_conv_opts *opts);
PD_API pd_tensor *pd_conv2d_transpose(pd_tensor *x, pd_tensor *weight, pd_tensor *bias,
                                      const pd_conv_opts *opts);
PD_API pd_tensor *pd_conv3d_transpose(pd_tensor *x, pd_tensor *weight, pd_tensor *bias,
                                      const pd_conv_opts *opts);

/* ---- pooling (paddle.nn.functional.*_pool*) ---------------------------- */

typedef struct pd_pool_opts {
  int n_stride;
  int64_t stride[3]; /* default: kernel_size (Paddle's stride=None) */
  int n_padding;
  int64_t padding[6];            /* default 0 */
  const char *padding_algorithm; /* NULL/"EXPLICIT", "SAME" or "VALID" */
  bool ceil_mode;
  bool inclusive;           /* avg: exclusive=False (the padding counts in the divisor) */
  int64_t divisor_override; /* avg_pool2d/3d: 0 = none */
  const char *data_format;  /* NULL: channels first */
  bool return_mask;         /* MaxPool layers: also output the mask */
} pd_pool_opts;

/* max_pool1d/2d/3d(x, kernel_size): the window maximum. The _with_mask
 * forms are return_mask=True: *mask (int32, channels first) receives the
 * flat index of each maximum within its input plane. */
PD_API pd_tensor *pd_max_pool1d(pd_tensor *x, int nk, const int64_t *kernel_size, const pd_pool_opts *opts);
PD_API pd_tensor *pd_max_pool2d(pd_tensor *x, int nk, const int64_t *kernel_size, const pd_pool_opts *opts);
PD_API pd_tensor *pd_max_pool3d(pd_tensor *x, int nk, const int64_t *kernel_size, const pd_pool_opts *opts);
PD_API pd_tensor *pd_max_pool1d_with_mask(pd_tensor *x, int nk, const int64_t *kernel_size,
                                          const pd_pool_opts *opts, pd_tensor **mask);
PD_API pd_tensor *pd_max_pool2d_with_mask(pd_tensor *x, int nk, const int64_t *kernel_size,
                                          const pd_pool_opts *opts, pd_tensor **mask);
PD_API pd_tensor *pd_max_pool3d_with_mask(pd_tensor *x, int nk, const int64_t *kernel_size,
                                          const pd_pool_opts *opts, pd_tensor **mask);

/* avg_pool1d/2d/3d(x, kernel_size): the window mean; exclusive (the
 * default) divides by the in-bounds count. */
PD_API pd_tensor *pd_avg_pool1d(pd_tensor *x, int nk, const int64_t *kernel_size, const pd_pool_opts *opts);
PD_API pd_tensor *pd_avg_pool2d(pd_tensor *x, int nk, const int64_t *kernel_size, const pd_pool_opts *opts);
PD_API pd_tensor *pd_avg_pool3d(pd_tensor *x, int nk, const int64_t *kernel_size, const pd_pool_opts *opts);

/* adaptive_avg_pool1d/2d/3d(x, output_size): window o along a dim covers
 * [floor(o * in / out), ceil((o + 1) * in / out)). n is 1 (every dim) or
 * the number of spatial dims; an entry <= 0 keeps that input size (None). */
PD_API pd_tensor *pd_adaptive_avg_pool1d(pd_tensor *x, int n, const int64_t *output_size);
PD_API pd_tensor *pd_adaptive_avg_pool2d(pd_tensor *x, int n, const int64_t *output_size,
                                         const char *data_format);
PD_API pd_tensor *pd_adaptive_avg_pool3d(pd_tensor *x, int n, const int64_t *output_size,
                                         const char *data_format);
/* adaptive_max_pool1d/2d/3d(x, output_size); mask as for max pooling
 * (return_mask=True when mask is not NULL). Channels first. */
PD_API pd_tensor *pd_adaptive_max_pool1d(pd_tensor *x, int n, const int64_t *output_size, pd_tensor **mask);
PD_API pd_tensor *pd_adaptive_max_pool2d(pd_tensor *x, int n, const int64_t *output_size, pd_tensor **mask);
PD_API pd_tensor *pd_adaptive_max_pool3d(pd_tensor *x, int n, const int64_t *output_size, pd_tensor **mask);

/* ---- layers (paddle.nn.Conv*, paddle.nn.*Pool*) ------------------------- */

typedef struct pd_nn_conv_opts {
  /* stride, padding, padding_algorithm, dilation, groups, data_format and
   * (transposed layers) output_padding; output_size is ignored here */
  pd_conv_opts conv;
  const char *padding_mode; /* NULL or "zeros" (the only mode supported) */
  /* weight default: Normal(0, (2 / (in_channels * prod(k)))^0.5) for
   * convolutions, XavierUniform for transposed ones */
  const pd_param_attr *weight_attr;
  const pd_param_attr *bias_attr; /* default initializer: zeros */
  bool no_bias;                   /* bias_attr=False */
  pd_dtype dtype;
} pd_nn_conv_opts;

/* Conv1D/2D/3D(in_channels, out_channels, kernel_size): weight
 * [out, in / groups, k...], bias [out]. kernel_size: nk = 1 or one per dim. */
PD_API pd_layer *pd_nn_conv1d(int64_t in_channels, int64_t out_channels, int nk, const int64_t *kernel_size,
                              const pd_nn_conv_opts *opts);
PD_API pd_layer *pd_nn_conv2d(int64_t in_channels, int64_t out_channels, int nk, const int64_t *kernel_size,
                              const pd_nn_conv_opts *opts);
PD_API pd_layer *pd_nn_conv3d(int64_t in_channels, int64_t out_channels, int nk, const int64_t *kernel_size,
                              const pd_nn_conv_opts *opts);
/* Conv1DTranspose/2D/3D: weight [in, out / groups, k...], bias [out]. */
PD_API pd_layer *pd_nn_conv1d_transpose(int64_t in_channels, int64_t out_channels, int nk,
                                        const int64_t *kernel_size, const pd_nn_conv_opts *opts);
PD_API pd_layer *pd_nn_conv2d_transpose(int64_t in_channels, int64_t out_channels, int nk,
                                        const int64_t *kernel_size, const pd_nn_conv_opts *opts);
PD_API pd_layer *pd_nn_conv3d_transpose(int64_t in_channels, int64_t out_channels, int nk,
                                        const int64_t *kernel_size, const pd_nn_conv_opts *opts);
/* A transposed-convolution layer's forward(x, output_size): n values (1 or
 * one per spatial dim). Runs the layer's hooks like pd_layer_call. */
PD_API pd_tensor *pd_nn_conv_transpose_forward(pd_layer *layer, pd_tensor *x, int n,
                                               const int64_t *output_size);

/* MaxPool1D/2D/3D(kernel_size, ...) and AvgPool1D/2D/3D; opts as the
 * functional forms (return_mask: MaxPool outputs [out, mask]). */
PD_API pd_layer *pd_nn_max_pool1d(int nk, const int64_t *kernel_size, const pd_pool_opts *opts);
PD_API pd_layer *pd_nn_max_pool2d(int nk, const int64_t *kernel_size, const pd_pool_opts *opts);
PD_API pd_layer *pd_nn_max_pool3d(int nk, const int64_t *kernel_size, const pd_pool_opts *opts);
PD_API pd_layer *pd_nn_avg_pool1d(int nk, const int64_t *kernel_size, const pd_pool_opts *opts);
PD_API pd_layer *pd_nn_avg_pool2d(int nk, const int64_t *kernel_size, const pd_pool_opts *opts);
PD_API pd_layer *pd_nn_avg_pool3d(int nk, const int64_t *kernel_size, const pd_pool_opts *opts);
/* AdaptiveAvgPool1D/2D/3D(output_size, data_format) and
 * AdaptiveMaxPool1D/2D/3D(output_size, return_mask). */
PD_API pd_layer *pd_nn_adaptive_avg_pool1d(int n, const int64_t *output_size);
PD_API pd_layer *pd_nn_adaptive_avg_pool2d(int n, const int64_t *output_size, const char *data_format);
PD_API pd_layer *pd_nn_adaptive_avg_pool3d(int n, const int64_t *output_size, const char *data_format);
PD_API pd_layer *pd_nn_adaptive_max_pool1d(int n, const int64_t *output_size, bool return_mask);
PD_API pd_layer *pd_nn_adaptive_max_pool2d(int n, const int64_t *output_size, bool return_mask);
PD_API pd_layer *pd_nn_adaptive_max_pool3d(int n, const int64_t *output_size, bool return_mask);

#ifdef __cplusplus
}
#endif
#endif
