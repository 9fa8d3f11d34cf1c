/* Fused optimizer updates on raw buffers: one pass over param, grad and the
 * accumulators per call (Lamb needs two: its trust ratio is a ratio of
 * norms). Every update first transforms the gradient as the optimizer's
 * clipping and regularization ask,
 *     g' = clip(g * gscale, lo, hi) + l1 * sign(p) + l2 * p,
 * then applies the rule. float16/bfloat16 parameters are updated through
 * float32 (from float32 master weights when given); float32 params use float
 * accumulators, float64 params double ones. */
#ifndef PADDLEC_KERNELS_OPTIM_H
#define PADDLEC_KERNELS_OPTIM_H

#include <stdbool.h>
#include <stdint.h>

#include "paddlec/core.h"

#define PD_OPTIM_MAX_ACC 4

/* Per-call scalars. s[] holds each rule's constants (see optim.c). */
typedef struct pd_optim_args {
  double gscale, lo, hi, l1, l2; /* gradient transform */
  double lr;
  double s[8];
  int flag; /* nesterov (momentum), centered (rmsprop), always_adapt (lamb) */
} pd_optim_args;

/* The buffers of one update, all contiguous with n elements. */
typedef struct pd_optim_bufs {
  int64_t n;
  void *param;
  pd_dtype pdt;
  const void *grad;
  pd_dtype gdt;
  float *master; /* float32 master weights of a float16/bfloat16 param, or NULL */
  void *acc[PD_OPTIM_MAX_ACC];
  int nacc;
} pd_optim_bufs;

/* Update rules on float32 / float64 compute buffers (p and acc updated in place). */
typedef void (*pd_optim_core32)(const pd_optim_args *a, int64_t n, float *p, const float *g,
                                float *const *acc);
typedef void (*pd_optim_core64)(const pd_optim_args *a, int64_t n, double *p, const double *g,
                                double *const *acc);

/* Each rule with the full gradient transform and with the identity one. */
typedef struct pd_optim_rule {
  pd_optim_core32 f32;
  pd_optim_core64 f64;
  pd_optim_core32 f32_plain;
  pd_optim_core64 f64_plain;
} pd_optim_rule;

/* The rules. acc order and s[] meaning:
 *  sgd:      -
 *  momentum: velocity;                          s0 mu; flag nesterov
 *  adam:     moment1, moment2;                  s0 beta1, s1 beta2, s2 lr*sqrt(1-b2^t)/(1-b1^t),
 *                                               s3 eps*sqrt(1-b2^t), s4 decoupled decay factor 1-lr*coeff
 *  adamax:   moment, inf_norm;                  s0 beta1, s1 beta2, s2 eps, s3 lr/(1-b1^t)
 *  adagrad:  moment;                            s0 eps
 *  adadelta: avg_squared_grad, avg_squared_update; s0 rho, s1 eps
 *  rmsprop:  momentum, mean_square, mean_grad;  s0 rho, s1 eps, s2 momentum; flag centered */
extern const pd_optim_rule pd_optim_sgd_rule, pd_optim_momentum_rule, pd_optim_adam_rule,
    pd_optim_adamax_rule, pd_optim_adagrad_rule, pd_optim_adadelta_rule, pd_optim_rmsprop_rule;

/* Runs a rule over the buffers: blocks, split over threads when large;
 * float16/bfloat16 params (grad of the param's dtype or float32) through
 * float32 blocks. Returns non-zero for an unsupported dtype combination. */
int pdk_optim_run(const pd_optim_bufs *b, const pd_optim_args *a, const pd_optim_rule *rule);

/* Lamb: acc moment1, moment2; s0 beta1, s1 beta2, s2 eps, s3 weight_decay,
 * s4 1-b1^t, s5 1-b2^t; flag always_adapt. Pass 1 updates the moments and
 * the norms of p and of r = m^/(sqrt(v^)+eps) + wd p; pass 2 applies
 * p -= lr * (|p|/|r|) * r. Returns non-zero for an unsupported dtype. */
int pdk_optim_lamb(const pd_optim_bufs *b, const pd_optim_args *a);
/* Lamb over a shard of the parameter: between the passes `sums` (the
 * shard's sums of p^2 and r^2) are handed to reduce, which makes them the
 * whole parameter's (a sum over the shards), so the trust ratio is the
 * unsharded one. Returns 1 for an unsupported dtype, 2 when reduce
 * returned non-zero (its error stands). */
typedef int (*pdk_lamb_sums_fn)(double sums[2], void *user);
int pdk_optim_lamb_reduced(const pd_optim_bufs *b, const pd_optim_args *a, pdk_lamb_sums_fn reduce,
                           void *user);

/* Sum of squares of n contiguous elements of a floating dtype, in double. */
double pdk_optim_sum_squares(const void *x, pd_dtype dt, int64_t n);

#endif
