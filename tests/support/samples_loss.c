/* Gradcheck samples for the loss ops. Inputs stay away from the kinks:
 * |input - label| > 0 for l1, |label - input| != delta for smooth_l1, the
 * hinge of margin_ranking_loss, probabilities inside (0, 1). */
#include "op_samples.h"
#include "paddlec/loss.h"

#define S(...) ((const int64_t[]){__VA_ARGS__})
#define F64(nd, shape, ...) pd_tensor_from_f64((const double[]){__VA_ARGS__}, PD_FLOAT64, (nd), (shape))
#define I64(nd, shape, ...) pd_tensor_from_f64((const double[]){__VA_ARGS__}, PD_INT64, (nd), (shape))

/* ---- elementwise losses ------------------------------------------------- */
static int s_mse_bcast_mean(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, S(2, 3), -1, 1);
  in[1] = sample_uniform(1, S(3), -1, 1);
  a->i[0] = PD_REDUCTION_MEAN;
  return 2;
}
static int s_mse_none(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, S(2, 3), -1, 1);
  in[1] = sample_uniform(2, S(2, 3), -1, 1);
  a->i[0] = PD_REDUCTION_NONE;
  return 2;
}
static int s_l1_sum(pd_tensor **in, pd_attrs *a) {
  in[0] = F64(2, S(2, 3), 0.5, -0.7, 1.2, 0.1, -1.5, 0.9);
  in[1] = F64(1, S(3), -0.2, 0.3, 0.4);
  a->i[0] = PD_REDUCTION_SUM;
  return 2;
}
static int s_l1_none(pd_tensor **in, pd_attrs *a) {
  in[0] = F64(2, S(2, 2), 0.5, -0.7, 1.2, 0.1);
  in[1] = F64(2, S(2, 2), -0.5, 0.3, 0.4, 0.6);
  a->i[0] = PD_REDUCTION_NONE;
  return 2;
}
/* residuals label - input of 0.3, -0.6, 1.7, -2.2, 0.05, 1.4 around delta 1 */
static int s_smooth_l1_mean(pd_tensor **in, pd_attrs *a) {
  in[0] = F64(2, S(2, 3), 0.1, 0.8, -1.0, 1.2, 0.0, -0.4);
  in[1] = F64(2, S(2, 3), 0.4, 0.2, 0.7, -1.0, 0.05, 1.0);
  a->i[0] = PD_REDUCTION_MEAN;
  a->f[0] = 1.0;
  return 2;
}
static int s_smooth_l1_none_delta(pd_tensor **in, pd_attrs *a) {
  in[0] = F64(1, S(4), 0.1, 0.8, -1.0, 1.2);
  in[1] = F64(1, S(4), 0.4, 0.2, 0.7, -1.0);
  a->i[0] = PD_REDUCTION_NONE;
  a->f[0] = 0.5;
  return 2;
}
static int s_bce_mean(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, S(2, 3), 0.1, 0.9);
  in[1] = sample_uniform(2, S(2, 3), 0, 1);
  a->i[0] = PD_REDUCTION_MEAN;
  return 2;
}
static int s_bce_none(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(1, S(4), 0.1, 0.9);
  in[1] = sample_uniform(1, S(4), 0, 1);
  a->i[0] = PD_REDUCTION_NONE;
  return 2;
}
static int s_bce_logits_sum(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, S(2, 3), -3, 3);
  in[1] = sample_uniform(2, S(2, 3), 0, 1);
  a->i[0] = PD_REDUCTION_SUM;
  return 2;
}
/* a label of -100.5 (integer part -100) is ignored */
static int s_bce_logits_ignore(pd_tensor **in, pd_attrs *a) {
  in[0] = F64(1, S(4), -1.5, 0.3, 2.0, -0.2);
  in[1] = F64(1, S(4), 0.2, -100.5, 1.0, 0.6);
  a->i[0] = PD_REDUCTION_NONE;
  return 2;
}
static int s_kl_batchmean(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, S(3, 4), -2, 0);
  in[1] = sample_uniform(2, S(3, 4), 0.1, 1);
  a->i[0] = PD_REDUCTION_BATCHMEAN;
  return 2;
}
static int s_kl_none_nonpositive(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(1, S(4), -2, 0);
  in[1] = F64(1, S(4), 0.3, -0.2, 0.7, -0.5);
  a->i[0] = PD_REDUCTION_NONE;
  return 2;
}
static int s_kl_log_target(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, S(2, 3), -2, 0);
  in[1] = sample_uniform(2, S(2, 3), -2, 0);
  a->i[0] = PD_REDUCTION_MEAN;
  a->i[1] = 1;
  return 2;
}
/* label (other - input) + margin: 0.3, -0.45, 0.9, -0.2, 0.55, 0.15 */
static int s_margin(pd_tensor **in, pd_attrs *a) {
  in[0] = F64(2, S(2, 3), 0.2, 0.5, -0.4, 0.3, -0.2, 1.0);
  in[1] = F64(2, S(2, 3), 0.4, 0.0, 0.4, 0.0, 0.25, 0.95);
  in[2] = F64(2, S(2, 3), 1, 1, 1, 1, 1, -1);
  a->i[0] = PD_REDUCTION_MEAN;
  a->f[0] = 0.1;
  return 3;
}
static int s_margin_bcast_none(pd_tensor **in, pd_attrs *a) {
  in[0] = F64(2, S(2, 2), 0.2, 0.5, -0.4, 0.3);
  in[1] = F64(1, S(2), 0.4, 0.1);
  in[2] = F64(2, S(2, 1), 1, -1);
  a->i[0] = PD_REDUCTION_NONE;
  a->f[0] = 0.05;
  return 3;
}

/* ---- cross entropy ------------------------------------------------------- */
static void ce_attrs(pd_attrs *a, bool soft, bool sm, int64_t ig, int64_t axis) {
  a->i[0] = soft;
  a->i[1] = sm;
  a->i[2] = ig;
  a->i[3] = axis;
}
static int s_ce_hard(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, S(4, 5), -2, 2);
  in[1] = sample_indices(2, S(4, 1), 5);
  ce_attrs(a, false, true, -100, -1);
  return 2;
}
static int s_ce_hard_ignore(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, S(4, 3), -2, 2);
  in[1] = I64(2, S(4, 1), 2, 1, 0, 1);
  ce_attrs(a, false, true, 1, -1);
  return 2;
}
static int s_ce_soft(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, S(3, 4), -2, 2);
  in[1] = sample_uniform(2, S(3, 4), 0.05, 0.5);
  ce_attrs(a, true, true, -100, 1);
  return 2;
}
static int s_ce_axis1_3d(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(3, S(2, 3, 4), -2, 2);
  in[1] = sample_indices(3, S(2, 1, 4), 3);
  ce_attrs(a, false, true, -100, 1);
  return 2;
}
static int s_ce_soft_axis0(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, S(3, 2), -2, 2);
  in[1] = sample_uniform(2, S(3, 2), 0.05, 0.5);
  ce_attrs(a, true, true, -100, 0);
  return 2;
}
static int s_ce_probs_hard(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, S(3, 4), 0.2, 1);
  in[1] = I64(2, S(3, 1), 3, 0, 2);
  ce_attrs(a, false, false, 0, -1);
  return 2;
}
static int s_ce_probs_soft(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(3, S(2, 3, 2), 0.2, 1);
  in[1] = sample_uniform(3, S(2, 3, 2), 0.05, 0.5);
  ce_attrs(a, true, false, -100, 1);
  return 2;
}
/* grad op (x, label, lse, g): lse perturbed independently of x */
static int s_ceg_hard(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, S(3, 4), -2, 2);
  in[1] = I64(2, S(3, 1), 1, 3, 0);
  in[2] = sample_uniform(2, S(3, 1), 1, 2);
  in[3] = sample_uniform(2, S(3, 1), -1, 1);
  ce_attrs(a, false, true, 3, -1);
  return 4;
}
static int s_ceg_soft_3d(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(3, S(2, 3, 2), -2, 2);
  in[1] = sample_uniform(3, S(2, 3, 2), 0.05, 0.5);
  in[2] = sample_uniform(3, S(2, 1, 2), 1, 2);
  in[3] = sample_uniform(3, S(2, 1, 2), -1, 1);
  ce_attrs(a, true, true, -100, 1);
  return 4;
}
static int s_ceg_probs_hard(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, S(3, 4), 0.2, 1);
  in[1] = I64(2, S(3, 1), 2, 0, 3);
  in[2] = sample_uniform(2, S(3, 1), -1, 1);
  in[3] = sample_uniform(2, S(3, 1), -1, 1);
  ce_attrs(a, false, false, -100, 1);
  return 4;
}
static int s_ceg_probs_soft(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, S(3, 4), 0.2, 1);
  in[1] = sample_uniform(2, S(3, 4), 0.05, 0.5);
  in[2] = sample_uniform(2, S(3, 1), -1, 1);
  in[3] = sample_uniform(2, S(3, 1), -1, 1);
  ce_attrs(a, true, false, -100, -1);
  return 4;
}

/* ---- nll ------------------------------------------------------------------ */
/* the weight is float32: it gets no gradient (as Paddle), so gradcheck must
 * not perturb it */
static pd_tensor *weight_f32(int64_t c) {
  double w[8] = {0.5, 1.5, 1.0, 2.0, 0.25, 0.75, 1.25, 3.0};
  return pd_tensor_from_f64(w, PD_FLOAT32, 1, &c);
}
static int s_nll_mean_weight(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, S(4, 5), -3, 0);
  in[1] = I64(1, S(4), 4, 0, 2, 0);
  in[2] = weight_f32(5);
  a->i[0] = -100;
  a->i[1] = PD_REDUCTION_MEAN;
  return 3;
}
static int s_nll_none_ignore_3d(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(3, S(2, 3, 4), -3, 0);
  in[1] = I64(2, S(2, 4), 0, 1, 2, 1, 2, 2, 0, 1);
  a->i[0] = 2;
  a->i[1] = PD_REDUCTION_NONE;
  return 2;
}
static int s_nll_sum(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, S(3, 4), -3, 0);
  in[1] = sample_indices(1, S(3), 4);
  a->i[0] = -100;
  a->i[1] = PD_REDUCTION_SUM;
  return 2;
}
static int s_nllg_mean(pd_tensor **in, pd_attrs *a) {
  in[0] = I64(1, S(4), 4, 0, 2, 1);
  in[1] = sample_uniform(0, NULL, 0.5, 1.5);
  in[2] = weight_f32(5);
  a->i[0] = 1;
  a->i[1] = PD_REDUCTION_MEAN;
  sample_set_list(a, 0, 2, S(4, 5));
  return 3;
}
static int s_nllg_none(pd_tensor **in, pd_attrs *a) {
  in[0] = I64(2, S(2, 2), 0, 2, 1, 0);
  in[1] = sample_uniform(2, S(2, 2), -1, 1);
  a->i[0] = -100;
  a->i[1] = PD_REDUCTION_NONE;
  sample_set_list(a, 0, 3, S(2, 3, 2));
  return 2;
}
/* c_nll_loss(_grad) in a group of one (ring 0, 1 rank): the mean op's */
static int s_c_nll(pd_tensor **in, pd_attrs *a) {
  int n = s_nll_mean_weight(in, a);
  sample_set_list(a, 1, 1, S(0));
  sample_set_list(a, 2, 1, S(1));
  return n;
}
static int s_c_nllg(pd_tensor **in, pd_attrs *a) {
  int n = s_nllg_mean(in, a);
  sample_set_list(a, 1, 1, S(0));
  sample_set_list(a, 2, 1, S(1));
  return n;
}

const pd_op_sample pd_samples_loss[] = {
    {"mse_loss", s_mse_bcast_mean, 0},
    {"mse_loss", s_mse_none, 0},
    {"l1_loss", s_l1_sum, 0},
    {"l1_loss", s_l1_none, 0},
    {"smooth_l1_loss", s_smooth_l1_mean, 0},
    {"smooth_l1_loss", s_smooth_l1_none_delta, 0},
    {"binary_cross_entropy", s_bce_mean, 0},
    {"binary_cross_entropy", s_bce_none, 0},
    {"binary_cross_entropy_with_logits", s_bce_logits_sum, 0},
    {"binary_cross_entropy_with_logits", s_bce_logits_ignore, 0},
    {"kl_div", s_kl_batchmean, 0},
    {"kl_div", s_kl_none_nonpositive, 0},
    {"kl_div", s_kl_log_target, 0},
    {"margin_ranking_loss", s_margin, 0},
    {"margin_ranking_loss", s_margin_bcast_none, 0},
    {"cross_entropy_with_softmax", s_ce_hard, 0},
    {"cross_entropy_with_softmax", s_ce_hard_ignore, 0},
    {"cross_entropy_with_softmax", s_ce_soft, 0},
    {"cross_entropy_with_softmax", s_ce_axis1_3d, 0},
    {"cross_entropy_with_softmax", s_ce_soft_axis0, 0},
    {"cross_entropy_with_softmax", s_ce_probs_hard, 0},
    {"cross_entropy_with_softmax", s_ce_probs_soft, 0},
    {"cross_entropy_with_softmax_grad", s_ceg_hard, 0},
    {"cross_entropy_with_softmax_grad", s_ceg_soft_3d, 0},
    {"cross_entropy_with_softmax_grad", s_ceg_probs_hard, 0},
    {"cross_entropy_with_softmax_grad", s_ceg_probs_soft, 0},
    {"nll_loss", s_nll_mean_weight, 0},
    {"nll_loss", s_nll_none_ignore_3d, 0},
    {"nll_loss", s_nll_sum, 0},
    {"nll_loss_grad", s_nllg_mean, 0},
    {"nll_loss_grad", s_nllg_none, 0},
    {"c_nll_loss", s_c_nll, 0},
    {"c_nll_loss_grad", s_c_nllg, 0},
    {NULL, NULL, 0},
};
