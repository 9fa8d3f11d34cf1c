/* paddle.nn loss layers: each keeps its options and forwards to the
 * functional loss (forward(input, label); MarginRankingLoss takes input,
 * other, label). Weights given in the options are retained by the layer
 * (plain attributes as in Paddle: not parameters, not in the state dict). */
#include <stdio.h>
#include <stdlib.h>

#include "paddlec/loss.h"

typedef struct loss_layer {
  pd_layer base;
  pd_loss_reduction reduction;
  pd_tensor *weight, *pos_weight;
  int64_t ignore_index;
  int axis;
  bool soft_label, use_softmax, log_target;
  double delta, margin, label_smoothing, eps;
} loss_layer;

static void loss_destroy(pd_layer *self) {
  loss_layer *l = (loss_layer *)self;
  pd_tensor_release(l->weight);
  pd_tensor_release(l->pos_weight);
}

static int check_inputs(pd_layer *self, int n_in, int want) {
  if (n_in == want) return 0;
  return pd_set_error(PD_ERR_INVALID, "%s: forward expects %d inputs (%s), got %d", self->type->name, want,
                      want == 3 ? "input, other, label" : "input, label", n_in);
}

static int finish(pd_tensor **out, pd_tensor *r) {
  out[0] = r;
  return r ? 1 : pd_last_status();
}

#define FORWARD(fname, nin, call)                                                                  \
  static int fname(pd_layer *self, pd_tensor *const *in, int n_in, pd_tensor **out, int max_out) { \
    (void)max_out;                                                                                 \
    loss_layer *l = (loss_layer *)self;                                                            \
    (void)l;                                                                                       \
    int st = check_inputs(self, n_in, nin);                                                        \
    if (st < 0) return st;                                                                         \
    return finish(out, call);                                                                      \
  }
FORWARD(mse_forward, 2, pd_mse_loss(in[0], in[1], l->reduction))
FORWARD(l1_forward, 2, pd_l1_loss(in[0], in[1], l->reduction))
FORWARD(smooth_l1_forward, 2, pd_smooth_l1_loss(in[0], in[1], l->reduction, l->delta))
FORWARD(ce_forward, 2,
        pd_cross_entropy(in[0], in[1], l->weight, l->ignore_index, l->reduction, l->soft_label, l->axis,
                         l->use_softmax, l->label_smoothing))
FORWARD(nll_forward, 2, pd_nll_loss(in[0], in[1], l->weight, l->ignore_index, l->reduction))
FORWARD(bce_forward, 2, pd_binary_cross_entropy(in[0], in[1], l->weight, l->reduction))
FORWARD(bce_logits_forward, 2,
        pd_binary_cross_entropy_with_logits(in[0], in[1], l->weight, l->reduction, l->pos_weight))
FORWARD(kl_forward, 2, pd_kl_div(in[0], in[1], l->reduction, l->log_target))
FORWARD(margin_forward, 3, pd_margin_ranking_loss(in[0], in[1], in[2], l->margin, l->reduction))
FORWARD(cos_forward, 2, pd_cosine_similarity(in[0], in[1], l->axis, l->eps))

static char *cos_repr(const pd_layer *self) {
  const loss_layer *l = (const loss_layer *)self;
  char *s = malloc(64);
  if (s) snprintf(s, 64, "axis=%d, eps=%g", l->axis, l->eps);
  return s;
}

static const pd_layer_type mse_type = {"MSELoss", mse_forward, loss_destroy, NULL};
static const pd_layer_type l1_type = {"L1Loss", l1_forward, loss_destroy, NULL};
static const pd_layer_type smooth_l1_type = {"SmoothL1Loss", smooth_l1_forward, loss_destroy, NULL};
static const pd_layer_type ce_type = {"CrossEntropyLoss", ce_forward, loss_destroy, NULL};
static const pd_layer_type nll_type = {"NLLLoss", nll_forward, loss_destroy, NULL};
static const pd_layer_type bce_type = {"BCELoss", bce_forward, loss_destroy, NULL};
static const pd_layer_type bce_logits_type = {"BCEWithLogitsLoss", bce_logits_forward, loss_destroy, NULL};
static const pd_layer_type kl_type = {"KLDivLoss", kl_forward, loss_destroy, NULL};
static const pd_layer_type margin_type = {"MarginRankingLoss", margin_forward, loss_destroy, NULL};
static const pd_layer_type cos_type = {"CosineSimilarity", cos_forward, loss_destroy, cos_repr};

/* A new loss layer after checking the reduction (NULL on error). */
static loss_layer *new_loss(const pd_layer_type *type, pd_loss_reduction r, bool batchmean_ok) {
  if ((int)r < PD_REDUCTION_MEAN || r > PD_REDUCTION_BATCHMEAN ||
      (r == PD_REDUCTION_BATCHMEAN && !batchmean_ok)) {
    pd_set_error(PD_ERR_INVALID, "%s: reduction %d is not one of 'mean', 'sum', 'none'%s", type->name, (int)r,
                 batchmean_ok ? ", 'batchmean'" : "");
    return NULL;
  }
  loss_layer *l = pd_layer_new(sizeof *l, type);
  if (!l) return NULL;
  l->reduction = r;
  return l;
}

pd_layer *pd_nn_mse_loss(const pd_nn_mse_loss_opts *opts) {
  static const pd_nn_mse_loss_opts d;
  loss_layer *l = new_loss(&mse_type, (opts ? opts : &d)->reduction, false);
  return l ? &l->base : NULL;
}

pd_layer *pd_nn_l1_loss(const pd_nn_l1_loss_opts *opts) {
  static const pd_nn_l1_loss_opts d;
  loss_layer *l = new_loss(&l1_type, (opts ? opts : &d)->reduction, false);
  return l ? &l->base : NULL;
}

pd_layer *pd_nn_smooth_l1_loss(const pd_nn_smooth_l1_loss_opts *opts) {
  static const pd_nn_smooth_l1_loss_opts d;
  if (!opts) opts = &d;
  loss_layer *l = new_loss(&smooth_l1_type, opts->reduction, false);
  if (l) l->delta = opts->delta != 0 ? opts->delta : 1.0;
  return l ? &l->base : NULL;
}

pd_layer *pd_nn_cross_entropy_loss(const pd_nn_cross_entropy_loss_opts *opts) {
  static const pd_nn_cross_entropy_loss_opts d;
  if (!opts) opts = &d;
  loss_layer *l = new_loss(&ce_type, opts->reduction, false);
  if (!l) return NULL;
  l->weight = pd_tensor_retain(opts->weight);
  l->ignore_index = opts->ignore_index ? *opts->ignore_index : -100;
  l->soft_label = opts->soft_label;
  l->axis = opts->axis ? *opts->axis : -1;
  l->use_softmax = !opts->no_softmax;
  l->label_smoothing = opts->label_smoothing;
  return &l->base;
}

pd_layer *pd_nn_nll_loss(const pd_nn_nll_loss_opts *opts) {
  static const pd_nn_nll_loss_opts d;
  if (!opts) opts = &d;
  loss_layer *l = new_loss(&nll_type, opts->reduction, false);
  if (!l) return NULL;
  l->weight = pd_tensor_retain(opts->weight);
  l->ignore_index = opts->ignore_index ? *opts->ignore_index : -100;
  return &l->base;
}

pd_layer *pd_nn_bce_loss(const pd_nn_bce_loss_opts *opts) {
  static const pd_nn_bce_loss_opts d;
  if (!opts) opts = &d;
  loss_layer *l = new_loss(&bce_type, opts->reduction, false);
  if (!l) return NULL;
  l->weight = pd_tensor_retain(opts->weight);
  return &l->base;
}

pd_layer *pd_nn_bce_with_logits_loss(const pd_nn_bce_with_logits_loss_opts *opts) {
  static const pd_nn_bce_with_logits_loss_opts d;
  if (!opts) opts = &d;
  loss_layer *l = new_loss(&bce_logits_type, opts->reduction, false);
  if (!l) return NULL;
  l->weight = pd_tensor_retain(opts->weight);
  l->pos_weight = pd_tensor_retain(opts->pos_weight);
  return &l->base;
}

pd_layer *pd_nn_kl_div_loss(const pd_nn_kl_div_loss_opts *opts) {
  static const pd_nn_kl_div_loss_opts d;
  if (!opts) opts = &d;
  loss_layer *l = new_loss(&kl_type, opts->reduction, true);
  if (l) l->log_target = opts->log_target;
  return l ? &l->base : NULL;
}

pd_layer *pd_nn_margin_ranking_loss(const pd_nn_margin_ranking_loss_opts *opts) {
  static const pd_nn_margin_ranking_loss_opts d;
  if (!opts) opts = &d;
  loss_layer *l = new_loss(&margin_type, opts->reduction, false);
  if (l) l->margin = opts->margin;
  return l ? &l->base : NULL;
}

pd_layer *pd_nn_cosine_similarity(const pd_nn_cosine_similarity_opts *opts) {
  static const pd_nn_cosine_similarity_opts d;
  if (!opts) opts = &d;
  loss_layer *l = new_loss(&cos_type, PD_REDUCTION_MEAN, false);
  if (!l) return NULL;
  l->axis = opts->axis ? *opts->axis : 1;
  l->eps = opts->eps != 0 ? opts->eps : 1e-8;
  return &l->base;
}
