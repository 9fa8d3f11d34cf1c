/* Shared with the auto_parallel local step that draws a shard's part of an
 * alpha_dropout (src/distributed/auto_parallel/spmd_local_random.c). */
#ifndef PADDLEC_OPS_NN_DROPOUT_H
#define PADDLEC_OPS_NN_DROPOUT_H

/* alpha_dropout's affine map for drop probability p: a kept x becomes
 * a x + b, a dropped one d. */
void pd_alpha_dropout_coeffs(double p, double *a, double *b, double *d);

#endif
