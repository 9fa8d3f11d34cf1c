/* Loss kernels over raw buffers: fused softmax cross entropy (forward and
 * backward), negative log likelihood, and the 1-D elementwise loss
 * functions the elementwise driver runs (tables indexed by dtype). */
#ifndef PADDLEC_KERNELS_LOSS_H
#define PADDLEC_KERNELS_LOSS_H

#include <stdbool.h>
#include <stdint.h>

#include "elementwise.h"
#include "paddlec/core.h"

/* A contiguous buffer seen as [outer, n, inner]: n classes along the middle
 * axis, one sample per (outer, inner) pair; per-sample buffers (labels,
 * losses, gradients of losses) are [outer, inner]. */
typedef struct pd_ce_geom {
  int64_t outer, n, inner;
} pd_ce_geom;

/* Cross entropy of logits (use_softmax) or probabilities x against hard
 * labels (label != NULL: int64 per sample, already checked to lie in
 * [0, n) unless equal to ignore_index) or soft labels y ([outer, n, inner]).
 * With use_softmax, one pass per sample computes the max-shifted log-sum-exp
 * and the loss: hard  loss = lse - x[label], soft  loss = sum(y) lse - sum(y x),
 * written relative to the max so nothing overflows; lse[] receives the
 * log-sum-exp. Without softmax: hard  loss = -log(x[label]), soft
 * loss = -sum(y log x), with log(0) taken as -1e20 (Paddle's clamp); lse[]
 * receives 0. Ignored samples get loss 0. Parallel over samples. */
void pdk_ce_forward_f32(const pd_ce_geom *g, const float *x, const int64_t *label, const float *y,
                        int64_t ignore_index, bool use_softmax, float *loss, float *lse);
void pdk_ce_forward_f64(const pd_ce_geom *g, const double *x, const int64_t *label, const double *y,
                        int64_t ignore_index, bool use_softmax, double *loss, double *lse);

/* Gradient of the loss w.r.t. x given the per-sample loss gradient gl:
 * with softmax  dx = gl (exp(x - lse) sum(y) - y) (y one-hot for hard
 * labels), without  dx = -gl y / x. Ignored samples get 0. */
void pdk_ce_backward_f32(const pd_ce_geom *g, const float *x, const int64_t *label, const float *y,
                         const float *lse, const float *gl, int64_t ignore_index, bool use_softmax,
                         float *dx);
void pdk_ce_backward_f64(const pd_ce_geom *g, const double *x, const int64_t *label, const double *y,
                         const double *lse, const double *gl, int64_t ignore_index, bool use_softmax,
                         double *dx);

/* Negative log likelihood of log-probabilities x against hard labels
 * (checked), per-class weights w (NULL: all 1). With out != NULL writes the
 * per-sample loss -w[l] x[l] (0 when ignored); always returns the sum of the
 * losses in *sum and the total weight of the non-ignored samples in *total. */
void pdk_nll_forward_f32(const pd_ce_geom *g, const float *x, const int64_t *label, const double *w,
                         int64_t ignore_index, float *out, double *sum, double *total);
void pdk_nll_forward_f64(const pd_ce_geom *g, const double *x, const int64_t *label, const double *w,
                         int64_t ignore_index, double *out, double *sum, double *total);
/* dx (zero-filled here) gets -w[l] * gl * scale at each sample's label;
 * gl is per sample (per_sample) or one value for all. */
void pdk_nll_backward_f32(const pd_ce_geom *g, const int64_t *label, const double *w, int64_t ignore_index,
                          const float *gl, bool per_sample, double scale, float *dx);
void pdk_nll_backward_f64(const pd_ce_geom *g, const int64_t *label, const double *w, int64_t ignore_index,
                          const double *gl, bool per_sample, double scale, double *dx);

/* Elementwise losses for the driver (float32 / float64 entries; params as
 * noted). Operands: out, then the inputs in the order given. */
extern const pd_ew_fn pdk_mse_loss[PD_NUM_DTYPES];   /* (x, y): (x - y)^2 */
extern const pd_ew_fn pdk_l1_loss[PD_NUM_DTYPES];    /* (x, y): |x - y| */
extern const pd_ew_fn pdk_huber_loss[PD_NUM_DTYPES]; /* (x, y), P[0] = delta: Huber of r = y - x */
extern const pd_ew_fn pdk_bce_loss[PD_NUM_DTYPES];   /* (x, y): -(y log x + (1-y) log(1-x)), logs >= -100 */
/* (x, y): max(x, 0) - x y + log(1 + exp(-|x|)); 0 where (int)y == -100 */
extern const pd_ew_fn pdk_sigmoid_ce_loss[PD_NUM_DTYPES];
extern const pd_ew_fn pdk_kldiv_loss[PD_NUM_DTYPES];     /* (x, t): t > 0 ? t (log t - x) : 0 */
extern const pd_ew_fn pdk_kldiv_log_loss[PD_NUM_DTYPES]; /* (x, t): exp(t) (t - x) */
/* (input, other, label), P[0] = margin: max(0, label (other - input) + margin) */
extern const pd_ew_fn pdk_margin_ranking_loss[PD_NUM_DTYPES];

#endif
