/* Sample inputs per op, for the registry-driven tests (gradcheck, NULL
 * inputs, traced-vs-eager later). Each family keeps its table in
 * tests/support/samples_<family>.c; an op may have several rows. */
#ifndef PADDLEC_TEST_OP_SAMPLES_H
#define PADDLEC_TEST_OP_SAMPLES_H

#include "ops/op_registry.h"
#include "paddlec.h"

/* Fills inputs (new references, float64 for differentiable ones) and attrs;
 * returns the number of inputs, or a negative status. */
typedef int (*pd_sample_fn)(pd_tensor **in, pd_attrs *a);

typedef struct pd_op_sample {
  const char *op; /* registry name */
  pd_sample_fn make;
  /* finite differences need inputs away from kinks (abs at 0, max ties):
   * samples pick such values; tolerance override when > 0 */
  double tol;
} pd_op_sample;

/* NULL-terminated tables, one per family. */
extern const pd_op_sample pd_samples_core[];
extern const pd_op_sample pd_samples_creation[];
extern const pd_op_sample pd_samples_elementwise[];
extern const pd_op_sample pd_samples_activation[];
extern const pd_op_sample pd_samples_reduction[];
extern const pd_op_sample pd_samples_linalg[];
extern const pd_op_sample pd_samples_manipulation[];
extern const pd_op_sample pd_samples_nn[];
extern const pd_op_sample pd_samples_norm[];
extern const pd_op_sample pd_samples_conv[];
extern const pd_op_sample pd_samples_loss[];
extern const pd_op_sample pd_samples_attention[];
extern const pd_op_sample pd_samples_optim[];
extern const pd_op_sample pd_samples_comm[];
/* Every family's table above, NULL-terminated: loops over all samples. */
extern const pd_op_sample *const pd_sample_tables[];

/* Restarts the generator behind sample_uniform and sample_indices, so a
 * sample made twice has the same values. */
void sample_reseed(uint64_t seed);
/* Deterministic float64 tensor with values uniform in [lo, hi). */
pd_tensor *sample_uniform(int ndim, const int64_t *shape, double lo, double hi);
/* The n numbers sample_uniform would put in a tensor, into out. */
void sample_draw(double *out, int64_t n, double lo, double hi);
/* int64 tensor with values in [0, hi). */
pd_tensor *sample_indices(int ndim, const int64_t *shape, int64_t hi);
/* Attr helpers */
void sample_set_list(pd_attrs *a, int slot, int n, const int64_t *v);

#endif
