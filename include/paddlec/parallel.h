/* paddle.DataParallel: data-parallel training over a process group.
 *
 *   pd_dist_init_parallel_env(NULL);
 *   pd_layer *dp = pd_data_parallel(net, NULL);      // broadcasts rank 0's parameters
 *   loss = ...pd_layer_call1(dp, x)...;
 *   pd_backward(loss, NULL, false);                  // gradients averaged over the ranks
 *   pd_optimizer_step(opt);
 *
 * Gradients are grouped into single-dtype buckets walking the parameters in
 * forward (registration) order: the bucket holding the first parameters —
 * whose gradients arrive last in backward — is capped at
 * last_comm_buffer_size, the others at comm_buffer_size (a bucket closes
 * once it reaches its cap). Buckets live in the group's shared memory and
 * hold the gradients themselves; each is all-reduced asynchronously as soon
 * as it is full, strictly in reverse bucket order on every rank, overlapping
 * the rest of backward; the end of backward waits for them. Gradients are
 * averaged: each bucket is all-reduced with PD_REDUCE_AVG, which sums the
 * ranks' gradients and then divides the sum by nranks. Paddle scales each
 * bucket by 1/nranks first and then sums; the two agree exactly when nranks
 * is a power of two and otherwise may differ in the last bit of a float,
 * and summing first can overflow where Paddle's pre-scaled sum would not
 * (gradients near the dtype's max). */
#ifndef PADDLEC_PARALLEL_H
#define PADDLEC_PARALLEL_H

#include "paddlec/distributed.h"
#include "paddlec/nn.h"
#include "paddlec/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pd_data_parallel_opts {
  /* Bucket sizes in MB, each in (0, 1048576]; checked with any number of
   * ranks, so a bad size fails on one rank as it would on several. */
  double comm_buffer_size;      /* 0: 25 */
  double last_comm_buffer_size; /* 0: 1 */
  /* Parameters the graph did not reach are marked ready (their gradient
   * counts as zero here). Without it a parameter that gets no gradient is
   * an error naming it, never a hang. */
  bool find_unused_parameters;
  pd_dist_group *group; /* NULL: the world */
  /* For measurement: launch every bucket after backward instead of
   * overlapping the all_reduces with it. */
  bool defer_all_reduce;
} pd_data_parallel_opts;

/* paddle.DataParallel(layers, ...): a layer that runs `layers` and
 * synchronises its gradients. Retains `layers`. Broadcasts the parameters
 * and buffers of the group's first rank to every rank. Its parameters,
 * named_parameters, state_dict and set_state_dict use the inner layer's
 * names (no prefix), so a checkpoint loads into the single-process model.
 * With one rank it is a pass-through. NULL on error (environment not
 * initialised, no trainable parameter, bad sizes). */
PD_API pd_layer *pd_data_parallel(pd_layer *layers, const pd_data_parallel_opts *opts);
/* The wrapped layer (DataParallel._layers), borrowed. */
PD_API pd_layer *pd_data_parallel_layers(pd_layer *dp);
/* no_sync(): between begin and end, forwards record no synchronisation, so
 * gradients accumulate locally; the first backward after end synchronises
 * (averages) everything accumulated. */
PD_API pd_status pd_data_parallel_no_sync_begin(pd_layer *dp);
PD_API pd_status pd_data_parallel_no_sync_end(pd_layer *dp);

/* fleet.utils.fused_allreduce_gradients(params, hcg=None) (Paddle's
 * paddle.distributed.fleet.utils.hybrid_parallel_util): averages the
 * gradients of the given parameters over `group` (NULL: the world) in
 * coalesced buckets, synchronously. Parameters without a gradient are
 * skipped. Named by DESIGN's rule for paddle.distributed.fleet.utils
 * (pd_fleet_utils_), declared here because it serves DataParallel without
 * fleet.init. */
PD_API pd_status pd_fleet_utils_fused_allreduce_gradients(pd_tensor *const *params, int n,
                                                          pd_dist_group *group);

/* Deprecated names, kept for one release (docs/architecture.md, "Names"). */
#define pd_dist_fused_allreduce_gradients pd_fleet_utils_fused_allreduce_gradients

#ifdef __cplusplus
}
#endif

#endif
