/* paddle.nn layers. Each constructor returns a new pd_layer (release with
 * pd_layer_release) or NULL with pd_last_error() set. Options structs are
 * optional (NULL = Paddle's defaults); a zero dtype means paddle.get_default_dtype()
 * (float32 unless pd_set_default_dtype changed it). */
#ifndef PADDLEC_LAYERS_H
#define PADDLEC_LAYERS_H

#include "paddlec/nn.h"
#include "paddlec/export.h"

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
PD_API pd_layer *pd_nn_linear(int64_t in_features, int64_t out_features, const pd_nn_linear_opts *opts);

/* ---- containers ---------------------------------------------------------- */
/* paddle.nn.Sequential(*layers): sublayers named "0", "1", ... Takes over the
 * caller's references (also on error). forward feeds the outputs of each
 * layer to the next as its inputs; an empty Sequential returns its inputs. */
PD_API pd_layer *pd_nn_sequential(pd_layer *const *layers, int n);
/* Sequential(('name', layer), ...): the sublayers under the given names. */
PD_API pd_layer *pd_nn_sequential_named(const char *const *names, pd_layer *const *layers, int n);
/* seq[index] (negative counts from the end): borrowed, NULL when out of range. */
PD_API pd_layer *pd_nn_sequential_get(const pd_layer *seq, int64_t index);
/* len(seq), or a negative status when seq is not a Sequential. */
PD_API int64_t pd_nn_sequential_len(const pd_layer *seq);

/* paddle.nn.LayerList(sublayers): sublayers "0", "1", ...; no forward.
 * Every function taking a pd_layer * to add takes over that reference
 * (released on error). */
PD_API pd_layer *pd_nn_layer_list(pd_layer *const *layers, int n);
PD_API pd_status pd_nn_layer_list_append(pd_layer *list, pd_layer *sublayer);
/* insert(index, sublayer): -len <= index < len, as Paddle; later items shift up. */
PD_API pd_status pd_nn_layer_list_insert(pd_layer *list, int64_t index, pd_layer *sublayer);
PD_API pd_status pd_nn_layer_list_extend(pd_layer *list, pd_layer *const *layers, int n);
/* list[index] (negative counts from the end): borrowed, NULL when out of range. */
PD_API pd_layer *pd_nn_layer_list_get(const pd_layer *list, int64_t index);
/* list[index] = sublayer (replaces and releases the old one). */
PD_API pd_status pd_nn_layer_list_set(pd_layer *list, int64_t index, pd_layer *sublayer);
/* del list[index]: later items shift down and are renamed. */
PD_API pd_status pd_nn_layer_list_delete(pd_layer *list, int64_t index);
PD_API int64_t pd_nn_layer_list_len(const pd_layer *list);

/* paddle.nn.ParameterList(parameters): parameters "0", "1", ... The list
 * retains each tensor (the caller keeps its reference); a tensor becomes a
 * trainable parameter as with pd_layer_add_parameter. */
PD_API pd_layer *pd_nn_parameter_list(pd_tensor *const *params, int n);
PD_API pd_status pd_nn_parameter_list_append(pd_layer *list, pd_tensor *param);
/* list[index] (negative counts from the end): borrowed. */
PD_API pd_tensor *pd_nn_parameter_list_get(const pd_layer *list, int64_t index);
PD_API int64_t pd_nn_parameter_list_len(const pd_layer *list);

/* paddle.nn.LayerDict(sublayers): sublayers by name, in insertion order;
 * no forward. Takes over the references of the layers given. */
PD_API pd_layer *pd_nn_layer_dict(const char *const *names, pd_layer *const *layers, int n);
/* dict[name] = sublayer: replaces in place an existing key, else appends. */
PD_API pd_status pd_nn_layer_dict_set(pd_layer *dict, const char *name, pd_layer *sublayer);
/* dict[name]: borrowed; NULL with an error naming the key when absent. */
PD_API pd_layer *pd_nn_layer_dict_get(const pd_layer *dict, const char *name);
/* pop(name): removes the key and hands its reference to the caller. */
PD_API pd_layer *pd_nn_layer_dict_pop(pd_layer *dict, const char *name);
PD_API bool pd_nn_layer_dict_contains(const pd_layer *dict, const char *name);
PD_API int64_t pd_nn_layer_dict_len(const pd_layer *dict);
/* keys()[index] (borrowed string; NULL when out of range). */
PD_API const char *pd_nn_layer_dict_key(const pd_layer *dict, int64_t index);
PD_API pd_status pd_nn_layer_dict_clear(pd_layer *dict);

/* ---- common layers -------------------------------------------------------- */
/* paddle.nn.Identity: returns its input. */
PD_API pd_layer *pd_nn_identity(void);
/* paddle.nn.Flatten(start_axis=1, stop_axis=-1), via pd_flatten. */
PD_API pd_layer *pd_nn_flatten(int64_t start_axis, int64_t stop_axis);

/* F.bilinear: out[b, o] = sum_ij x1[b, i] weight[o, i, j] x2[b, j] + bias[0, o];
 * x1 [batch, in1], x2 [batch, in2], weight [out, in1, in2], bias [1, out]
 * or NULL (none). */
PD_API pd_tensor *pd_bilinear(pd_tensor *x1, pd_tensor *x2, pd_tensor *weight, pd_tensor *bias);
typedef struct pd_nn_bilinear_opts {
  const pd_param_attr *weight_attr; /* default initializer: XavierUniform over [out, in1, in2] */
  const pd_param_attr *bias_attr;   /* default initializer: zeros */
  bool no_bias;                     /* bias_attr=False */
  pd_dtype dtype;
} pd_nn_bilinear_opts;
/* paddle.nn.Bilinear(in1_features, in2_features, out_features): weight
 * [out, in1, in2], bias [1, out]; forward(x1, x2) takes two inputs. */
PD_API pd_layer *pd_nn_bilinear(int64_t in1_features, int64_t in2_features, int64_t out_features,
                                const pd_nn_bilinear_opts *opts);

typedef struct pd_nn_embedding_opts {
  bool has_padding_idx;             /* padding_idx=None unless set */
  int64_t padding_idx;              /* negative counts from the end */
  bool sparse;                      /* accepted; gradients are always dense */
  const pd_param_attr *weight_attr; /* default initializer: XavierUniform (Paddle's create_parameter) */
  pd_dtype dtype;
} pd_nn_embedding_opts;
/* paddle.nn.Embedding(num_embeddings, embedding_dim): weight [num, dim]
 * whose padding_idx row starts at zero; forward is pd_embedding. */
PD_API pd_layer *pd_nn_embedding(int64_t num_embeddings, int64_t embedding_dim,
                                 const pd_nn_embedding_opts *opts);

/* ---- dropout ---------------------------------------------------------------- */
/* F.dropout(x, p, axis, training, mode). mode NULL or "upscale_in_train":
 * training keeps an element with probability 1-p and scales it by 1/(1-p),
 * eval returns x; "downscale_in_infer": training keeps without scaling, eval
 * returns x * (1-p). With axes (naxis > 0, each in [0, rank)) one draw is
 * shared along the other dims. p == 0 returns x. Each element of the mask i
 * (row-major over its shape) draws the float32 uniform of word i%4 of Philox
 * counter first + i/4 of the global generator (see pd_rand), and is kept when
 * that uniform is >= p, so a seed gives the same mask whatever the threads. */
PD_API pd_tensor *pd_dropout(pd_tensor *x, double p, int naxis, const int64_t *axis, bool training,
                             const char *mode);
/* F.dropout2d: whole channels of a 4-D x; data_format NULL/"NCHW" or "NHWC". */
PD_API pd_tensor *pd_dropout2d(pd_tensor *x, double p, bool training, const char *data_format);
/* F.dropout3d: whole channels of a 5-D x; data_format NULL/"NCDHW" or "NDHWC". */
PD_API pd_tensor *pd_dropout3d(pd_tensor *x, double p, bool training, const char *data_format);
/* F.alpha_dropout: dropped elements take the SELU saturation value and the
 * result is affinely corrected to keep mean and variance; eval returns x. */
PD_API pd_tensor *pd_alpha_dropout(pd_tensor *x, double p, bool training);

typedef struct pd_nn_dropout_opts {
  int naxis; /* 0: axis=None */
  int64_t axis[PD_MAX_DIMS];
  const char *mode; /* NULL: "upscale_in_train" */
} pd_nn_dropout_opts;
/* paddle.nn.Dropout(p): pd_dropout with the layer's training flag. */
PD_API pd_layer *pd_nn_dropout(double p, const pd_nn_dropout_opts *opts);
typedef struct pd_nn_dropout2d_opts {
  const char *data_format; /* NULL: "NCHW" (Dropout3D: "NCDHW") */
} pd_nn_dropout2d_opts;
typedef pd_nn_dropout2d_opts pd_nn_dropout3d_opts;
PD_API pd_layer *pd_nn_dropout2d(double p, const pd_nn_dropout2d_opts *opts);
PD_API pd_layer *pd_nn_dropout3d(double p, const pd_nn_dropout3d_opts *opts);
PD_API pd_layer *pd_nn_alpha_dropout(double p);

/* ---- activation layers (forward: the functional op of paddlec/math.h) ------ */
PD_API pd_layer *pd_nn_relu(void);
PD_API pd_layer *pd_nn_relu6(void);
/* Paddle's default negative_slope: 0.01. */
PD_API pd_layer *pd_nn_leaky_relu(double negative_slope);
/* Paddle's default alpha: 1.0. */
PD_API pd_layer *pd_nn_elu(double alpha);
/* Paddle's defaults: PD_SELU_SCALE, PD_SELU_ALPHA. */
PD_API pd_layer *pd_nn_selu(double scale, double alpha);
PD_API pd_layer *pd_nn_gelu(bool approximate);
/* paddle.nn.Silu. */
PD_API pd_layer *pd_nn_silu(void);
PD_API pd_layer *pd_nn_swish(void);
PD_API pd_layer *pd_nn_sigmoid(void);
/* Paddle's defaults: beta 1, threshold 20. */
PD_API pd_layer *pd_nn_softplus(double beta, double threshold);
PD_API pd_layer *pd_nn_softsign(void);
PD_API pd_layer *pd_nn_hardswish(void);
/* slope 0.1666667, offset 0.5 as paddle.nn.Hardsigmoid. */
PD_API pd_layer *pd_nn_hardsigmoid(void);
PD_API pd_layer *pd_nn_log_sigmoid(void);
/* Paddle's default axis: -1. */
PD_API pd_layer *pd_nn_softmax(int axis);
PD_API pd_layer *pd_nn_log_softmax(int axis);
PD_API pd_layer *pd_nn_tanh(void);
/* Paddle's default alpha: 1.0 (0 is refused). */
PD_API pd_layer *pd_nn_celu(double alpha);
/* Paddle's defaults: min -1, max 1. */
PD_API pd_layer *pd_nn_hardtanh(double min, double max);
/* Paddle's default threshold: 0.5. */
PD_API pd_layer *pd_nn_hardshrink(double threshold);
/* Paddle's default threshold: 0.5 (a negative one is refused). */
PD_API pd_layer *pd_nn_softshrink(double threshold);
PD_API pd_layer *pd_nn_tanhshrink(void);
PD_API pd_layer *pd_nn_mish(void);
/* paddle.nn.Maxout(groups, axis): groups > 1, axis 1, 3 or -1 (Paddle's default 1). */
PD_API pd_layer *pd_nn_maxout(int groups, int axis);
/* Paddle's defaults: threshold 1, value 0. */
PD_API pd_layer *pd_nn_thresholded_relu(double threshold, double value);
/* paddle.nn.RReLU(lower, upper): random slopes while training, their mean
 * in eval mode. Paddle's defaults: PD_RRELU_LOWER, PD_RRELU_UPPER. */
PD_API pd_layer *pd_nn_rrelu(double lower, double upper);
/* Paddle's default axis: -1. */
PD_API pd_layer *pd_nn_glu(int axis);
/* paddle.nn.Softmax2D: softmax over axis -3 of a 3-D or 4-D input. */
PD_API pd_layer *pd_nn_softmax2d(void);

/* F.prelu: x > 0 ? x : w * x. weight of shape [1] (one slope) or [C], C the
 * channel dim of data_format (NULL: "NCHW"; "NC", "NCL", "NCDHW" take dim 1,
 * "NLC", "NHWC", "NDHWC" the last). */
PD_API pd_tensor *pd_prelu(pd_tensor *x, pd_tensor *weight, const char *data_format);
typedef struct pd_nn_prelu_opts {
  const pd_param_attr *weight_attr; /* default initializer: Constant(init) */
  const char *data_format;          /* NULL: "NCHW" */
  pd_dtype dtype;
} pd_nn_prelu_opts;
/* paddle.nn.PReLU(num_parameters=1, init=0.25): weight [num_parameters]. */
PD_API pd_layer *pd_nn_prelu(int64_t num_parameters, double init, const pd_nn_prelu_opts *opts);

/* ---- padding, pixel shuffle, resizing --------------------------------------- */
/* F.pad(x, pad, mode, value, data_format). mode NULL/"constant", "reflect",
 * "replicate" or "circular". With mode "constant" and npad == 2 * rank, pad
 * is [before0, after0, before1, after1, ...] over every dim. Otherwise x is
 * 3-D, 4-D or 5-D and pad is [left, right] (NCL/NLC), [left, right, top,
 * bottom] (NCHW/NHWC) or [left, right, top, bottom, front, back]
 * (NCDHW/NDHWC) over the spatial dims; data_format NULL means the NC... one
 * of x's rank. Pads are >= 0; reflect needs each pad < its dim. */
PD_API pd_tensor *pd_pad(pd_tensor *x, int npad, const int64_t *pad, const char *mode, double value,
                         const char *data_format);
typedef struct pd_nn_pad1d_opts {
  const char *mode;        /* NULL: "constant" */
  double value;            /* constant mode */
  const char *data_format; /* NULL: "NCL" / "NCHW" / "NCDHW" */
} pd_nn_pad1d_opts;
typedef pd_nn_pad1d_opts pd_nn_pad2d_opts;
typedef pd_nn_pad1d_opts pd_nn_pad3d_opts;
/* paddle.nn.Pad1D(padding): npad 1 (the same on both sides) or 2 ([left, right]). */
PD_API pd_layer *pd_nn_pad1d(int npad, const int64_t *padding, const pd_nn_pad1d_opts *opts);
/* paddle.nn.Pad2D(padding): npad 1 or 4 ([left, right, top, bottom]). */
PD_API pd_layer *pd_nn_pad2d(int npad, const int64_t *padding, const pd_nn_pad2d_opts *opts);
/* paddle.nn.Pad3D(padding): npad 1 or 6 ([left, right, top, bottom, front, back]). */
PD_API pd_layer *pd_nn_pad3d(int npad, const int64_t *padding, const pd_nn_pad3d_opts *opts);

/* F.pixel_shuffle: [N, C r^2, H, W] -> [N, C, H r, W r] (data_format NULL /
 * "NCHW"; "NHWC": [N, H, W, C r^2] -> [N, H r, W r, C]). */
PD_API pd_tensor *pd_pixel_shuffle(pd_tensor *x, int64_t upscale_factor, const char *data_format);
typedef struct pd_nn_pixel_shuffle_opts {
  const char *data_format; /* NULL: "NCHW" */
} pd_nn_pixel_shuffle_opts;
PD_API pd_layer *pd_nn_pixel_shuffle(int64_t upscale_factor, const pd_nn_pixel_shuffle_opts *opts);

/* F.interpolate options. Exactly one of size and scale_factor is given. */
typedef struct pd_interpolate_opts {
  int nsize;               /* 0, or rank - 2 output sizes */
  int64_t size[3];         /* [out_w], [out_h, out_w] or [out_d, out_h, out_w] */
  int nscale;              /* 0, 1 (every spatial dim) or rank - 2 */
  double scale_factor[3];  /* output size = floor(in * scale) */
  const char *mode;        /* NULL/"nearest" (4-D and 5-D x) or "bilinear" (4-D x) */
  bool align_corners;      /* bilinear only */
  int align_mode;          /* 0 (default): src = (dst + 0.5) * ratio - 0.5; 1: src = dst * ratio */
  const char *data_format; /* NULL: NCW / NCHW / NCDHW by rank; NHWC / NDHWC accepted */
} pd_interpolate_opts;
/* F.interpolate with Paddle's index rules (ratio = 1/scale when a scale is
 * given, in/out otherwise, (in-1)/(out-1) with align_corners). */
PD_API pd_tensor *pd_interpolate(pd_tensor *x, const pd_interpolate_opts *opts);
/* F.upsample: the same as pd_interpolate. */
PD_API pd_tensor *pd_upsample(pd_tensor *x, const pd_interpolate_opts *opts);
typedef pd_interpolate_opts pd_nn_upsample_opts;
/* paddle.nn.Upsample: pd_interpolate with the options given. */
PD_API pd_layer *pd_nn_upsample(const pd_nn_upsample_opts *opts);
/* paddle.nn.UpsamplingNearest2D / UpsamplingBilinear2D (align_corners=True):
 * size, scale_factor and data_format of opts are used, the rest is fixed. */
PD_API pd_layer *pd_nn_upsampling_nearest2d(const pd_nn_upsample_opts *opts);
PD_API pd_layer *pd_nn_upsampling_bilinear2d(const pd_nn_upsample_opts *opts);

#ifdef __cplusplus
}
#endif
#endif
