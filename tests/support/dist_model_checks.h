/* The training loop and the comparison with eager training that the
 * DistModel tests on forked ranks share. */
#ifndef PADDLEC_TEST_DIST_MODEL_CHECKS_H
#define PADDLEC_TEST_DIST_MODEL_CHECKS_H

#include "paddlec.h"

/* Trains net eagerly on rows [s rows, (s + 1) rows) of x and label at
 * step s (loss_fn(net(x), label), backward, an opt step), loss[s] the s-th
 * loss. 0, or 2 (the forward or the loss failed) or 3 (backward or the
 * step failed), printed with the rank. */
int dist_model_eager_steps(int rank, pd_layer *net, pd_layer *loss_fn, pd_optimizer *opt, pd_tensor *x,
                           pd_tensor *label, int rows, int steps, double *loss);

/* Calls dm (input and label from dl, one loss out) `steps` times, loss[s]
 * the s-th loss. 0, or 13 (dl gave no batch) or 14 (the call failed; its
 * error printed with the rank and step). */
int dist_model_run_steps(int rank, pd_dist_model *dm, pd_dist_data_loader *dl, int steps, double *loss);

/* A distributed run (losses loss, n trained values w) against the eager
 * one: 0, or 21 (a loss) or 22 (a value) further than 1e-6 (printed), or
 * 23 when the losses did not move (nothing was trained). */
int dist_model_compare_runs(int rank, const double *loss, const double *eager_loss, int steps, const float *w,
                            const float *eager_w, int n);

#endif
