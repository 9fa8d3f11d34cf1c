/* Losses: functional ops (paddle.nn.functional.*_loss, cross_entropy, ...)
 * and their layers (paddle.nn.*Loss).
 *
 * Reductions follow Paddle: 'mean' (the default, the zero value) and 'sum'
 * return 0-D tensors, 'none' the per-element (per-sample) losses. Losses are
 * computed in the input's floating dtype (float16/bfloat16 via float32;
 * integer inputs of the elementwise losses become float32). Errors name the
 * function and the offending values (shapes, dtypes, label values). */
#ifndef PADDLEC_LOSS_H
#define PADDLEC_LOSS_H

#include "paddlec/core.h"
#include "paddlec/nn.h"
#include "paddlec/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* reduction='mean' | 'sum' | 'none' | 'batchmean' (kl_div only). */
typedef enum pd_loss_reduction {
  PD_REDUCTION_MEAN = 0,
  PD_REDUCTION_SUM,
  PD_REDUCTION_NONE,
  PD_REDUCTION_BATCHMEAN,
} pd_loss_reduction;

/* "mean", "sum", "none", "batchmean" (NULL for an unknown value). */
PD_API const char *pd_loss_reduction_name(pd_loss_reduction r);

/* ---- functional (paddle.nn.functional) --------------------------------- */

/* F.mse_loss: (input - label)^2 reduced; input and label broadcast. */
PD_API pd_tensor *pd_mse_loss(pd_tensor *input, pd_tensor *label, pd_loss_reduction reduction);
/* F.square_error_cost: (input - label)^2 elementwise (mse_loss with 'none'). */
PD_API pd_tensor *pd_square_error_cost(pd_tensor *input, pd_tensor *label);
/* F.l1_loss: |input - label| reduced; input and label broadcast. */
PD_API pd_tensor *pd_l1_loss(pd_tensor *input, pd_tensor *label, pd_loss_reduction reduction);
/* F.smooth_l1_loss (Paddle's is the Huber loss): with r = label - input,
 * 0.5 r^2 where |r| <= delta, else delta (|r| - 0.5 delta); input and label
 * of one shape. Paddle's default delta is 1.0. */
PD_API pd_tensor *pd_smooth_l1_loss(pd_tensor *input, pd_tensor *label, pd_loss_reduction reduction,
                                    double delta);

/* F.cross_entropy(input, label, weight, ignore_index, reduction, soft_label,
 * axis, use_softmax, label_smoothing); Paddle's defaults are NULL, -100,
 * mean, false, -1, true, 0.0.
 *  - input: logits (use_softmax) or probabilities, classes along axis.
 *  - hard labels (soft_label false): integer class ids (float dtypes holding
 *    whole numbers are accepted, as Paddle) of input's shape without the
 *    class axis, or with it as 1. A label equal to ignore_index contributes
 *    0; any other must lie in [0, C).
 *  - soft labels: a distribution over the classes, input's shape (cast to
 *    input's dtype). ignore_index must then be <= 0.
 *  - weight [C]: each sample's loss is scaled by weight[label] (soft labels:
 *    by sum_c label_c weight_c); weight gets a gradient.
 *  - label_smoothing > 0: labels become (1 - eps) one_hot + eps / C and are
 *    used as soft labels (so ignore_index no longer drops samples, as Paddle).
 *  - reduction mean: with a weight, sum(loss) / sum of the weights of the
 *    non-ignored samples; without one, sum(loss) / count of the labels !=
 *    ignore_index when ignore_index >= 0, else the mean over all samples
 *    (ignored ones count as 0, as Paddle). A batch in which every sample is
 *    ignored gives 0.
 *  - reduction none: shape of the hard label as given (input's shape without
 *    the class axis, or with it as 1); [.., 1, ..] for soft labels.
 * The softmax and the loss are one fused pass per sample (log-sum-exp
 * shifted by the row max); the backward is one fused pass too. Unlike
 * Paddle's CPU kernel, which takes log(softmax) and clamps log(0) to -1e20,
 * the logits path is exact for any logit range. */
PD_API pd_tensor *pd_cross_entropy(pd_tensor *input, pd_tensor *label, pd_tensor *weight,
                                   int64_t ignore_index, pd_loss_reduction reduction, bool soft_label,
                                   int axis, bool use_softmax, double label_smoothing);
/* F.softmax_with_cross_entropy(logits, label, soft_label, ignore_index,
 * numeric_stable_mode, return_softmax, axis): the unreduced loss, of
 * logits' shape with the axis dim 1 (a hard label may omit that dim). When
 * softmax is not NULL (return_softmax=True) *softmax receives the softmax of
 * the logits along axis. numeric_stable_mode is always on (as on Paddle's
 * CPU). Paddle's defaults: false, -100, -1. */
PD_API pd_tensor *pd_softmax_with_cross_entropy(pd_tensor *logits, pd_tensor *label, bool soft_label,
                                                int64_t ignore_index, int axis, pd_tensor **softmax);

/* F.nll_loss(input, label, weight, ignore_index, reduction): input
 * log-probabilities [N, C] or [N, C, d1, ...], label int64/int32 [N] or
 * [N, d1, ...], weight [C] or NULL. Loss -weight[label] input[label]; mean
 * divides by the total weight of the non-ignored samples (0 when every
 * sample is ignored). weight gets no gradient (as Paddle). Paddle's
 * defaults: NULL, -100, mean. */
PD_API pd_tensor *pd_nll_loss(pd_tensor *input, pd_tensor *label, pd_tensor *weight, int64_t ignore_index,
                              pd_loss_reduction reduction);

/* F.binary_cross_entropy: -(label log(input) + (1 - label) log(1 - input)),
 * logs clamped at -100; input in [0, 1] (checked), label of its shape;
 * weight (NULL or broadcastable to the loss) multiplies the loss. */
PD_API pd_tensor *pd_binary_cross_entropy(pd_tensor *input, pd_tensor *label, pd_tensor *weight,
                                          pd_loss_reduction reduction);
/* F.binary_cross_entropy_with_logits: the stable
 * max(x, 0) - x label + log(1 + exp(-|x|)) of logits x; pos_weight (per
 * class, broadcast) scales the loss by 1 + (pos_weight - 1) label and
 * weight multiplies it, as Paddle. */
PD_API pd_tensor *pd_binary_cross_entropy_with_logits(pd_tensor *logit, pd_tensor *label, pd_tensor *weight,
                                                      pd_loss_reduction reduction, pd_tensor *pos_weight);
/* F.kl_div(input, label, reduction, log_target): input is log-probabilities;
 * loss label (log(label) - input) where label > 0, else 0; with log_target,
 * exp(label) (label - input). reduction may be batchmean: sum / input.shape[0].
 * A float32/float64 pair computes in float64 (as Paddle). */
PD_API pd_tensor *pd_kl_div(pd_tensor *input, pd_tensor *label, pd_loss_reduction reduction, bool log_target);
/* F.margin_ranking_loss: max(0, -label (input - other) + margin); the three
 * broadcast together. Paddle's default margin is 0. */
PD_API pd_tensor *pd_margin_ranking_loss(pd_tensor *input, pd_tensor *other, pd_tensor *label, double margin,
                                         pd_loss_reduction reduction);
/* F.cosine_similarity(x1, x2, axis, eps): sum(x1 x2) / sqrt(max(|x1|^2 |x2|^2,
 * eps^2)) along axis (x1, x2 broadcast). Paddle's defaults: axis 1, eps 1e-8. */
PD_API pd_tensor *pd_cosine_similarity(pd_tensor *x1, pd_tensor *x2, int axis, double eps);

/* ---- layers (paddle.nn): forward(input, label) ------------------------- */
/* Options structs: NULL or all-zero means Paddle's defaults. Tensors given
 * in options (weights) are retained by the layer. */

typedef struct pd_nn_mse_loss_opts {
  pd_loss_reduction reduction;
} pd_nn_mse_loss_opts;
/* paddle.nn.MSELoss(reduction). */
PD_API pd_layer *pd_nn_mse_loss(const pd_nn_mse_loss_opts *opts);

typedef struct pd_nn_l1_loss_opts {
  pd_loss_reduction reduction;
} pd_nn_l1_loss_opts;
/* paddle.nn.L1Loss(reduction). */
PD_API pd_layer *pd_nn_l1_loss(const pd_nn_l1_loss_opts *opts);

typedef struct pd_nn_smooth_l1_loss_opts {
  pd_loss_reduction reduction;
  double delta; /* 0: 1.0 */
} pd_nn_smooth_l1_loss_opts;
/* paddle.nn.SmoothL1Loss(reduction, delta). */
PD_API pd_layer *pd_nn_smooth_l1_loss(const pd_nn_smooth_l1_loss_opts *opts);

typedef struct pd_nn_cross_entropy_loss_opts {
  pd_tensor *weight;           /* per-class weight [C]; NULL: none */
  const int64_t *ignore_index; /* NULL: -100 */
  pd_loss_reduction reduction;
  bool soft_label;
  const int *axis;        /* NULL: -1 */
  bool no_softmax;        /* use_softmax=False: input holds probabilities */
  double label_smoothing; /* 0: none */
} pd_nn_cross_entropy_loss_opts;
/* paddle.nn.CrossEntropyLoss: forward(input, label) is pd_cross_entropy. */
PD_API pd_layer *pd_nn_cross_entropy_loss(const pd_nn_cross_entropy_loss_opts *opts);

typedef struct pd_nn_nll_loss_opts {
  pd_tensor *weight;           /* per-class weight [C]; NULL: none */
  const int64_t *ignore_index; /* NULL: -100 */
  pd_loss_reduction reduction;
} pd_nn_nll_loss_opts;
/* paddle.nn.NLLLoss: forward(input, label) is pd_nll_loss. */
PD_API pd_layer *pd_nn_nll_loss(const pd_nn_nll_loss_opts *opts);

typedef struct pd_nn_bce_loss_opts {
  pd_tensor *weight; /* NULL: none */
  pd_loss_reduction reduction;
} pd_nn_bce_loss_opts;
/* paddle.nn.BCELoss(weight, reduction). */
PD_API pd_layer *pd_nn_bce_loss(const pd_nn_bce_loss_opts *opts);

typedef struct pd_nn_bce_with_logits_loss_opts {
  pd_tensor *weight; /* NULL: none */
  pd_loss_reduction reduction;
  pd_tensor *pos_weight; /* NULL: none */
} pd_nn_bce_with_logits_loss_opts;
/* paddle.nn.BCEWithLogitsLoss(weight, reduction, pos_weight): forward(logit, label). */
PD_API pd_layer *pd_nn_bce_with_logits_loss(const pd_nn_bce_with_logits_loss_opts *opts);

typedef struct pd_nn_kl_div_loss_opts {
  pd_loss_reduction reduction; /* mean, batchmean, sum, none */
  bool log_target;
} pd_nn_kl_div_loss_opts;
/* paddle.nn.KLDivLoss(reduction, log_target). */
PD_API pd_layer *pd_nn_kl_div_loss(const pd_nn_kl_div_loss_opts *opts);

typedef struct pd_nn_margin_ranking_loss_opts {
  double margin;
  pd_loss_reduction reduction;
} pd_nn_margin_ranking_loss_opts;
/* paddle.nn.MarginRankingLoss(margin, reduction): forward(input, other, label). */
PD_API pd_layer *pd_nn_margin_ranking_loss(const pd_nn_margin_ranking_loss_opts *opts);

typedef struct pd_nn_cosine_similarity_opts {
  const int *axis; /* NULL: 1 */
  double eps;      /* 0: 1e-8 */
} pd_nn_cosine_similarity_opts;
/* paddle.nn.CosineSimilarity(axis, eps): forward(x1, x2). */
PD_API pd_layer *pd_nn_cosine_similarity(const pd_nn_cosine_similarity_opts *opts);

#ifdef __cplusplus
}
#endif
#endif
