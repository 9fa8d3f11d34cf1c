/* DataParallel internals: the bucket plan, the reducer and the coalescing
 * helper shared by the initial broadcast and fused_allreduce_gradients. */
#ifndef PADDLEC_DP_INTERNAL_H
#define PADDLEC_DP_INTERNAL_H

#include "paddlec/parallel.h"

/* ---- bucket assignment (Paddle's assign_group_by_size) ------------------ */

/* Groups n parameters (in forward/registration order, given by dtype and
 * byte size) into single-dtype buckets: per dtype an open bucket takes
 * parameters until its bytes reach limits[k] (>=), then closes and that
 * dtype moves to the next limit (the last one repeats); remaining open
 * buckets close at the end; buckets are sorted by their first parameter.
 * Returns the number of buckets; *starts (n_buckets + 1 offsets into
 * *members) and *members (n parameter indices, ascending within a bucket)
 * are malloc'ed. Negative status on error. */
int pd_dp_assign_buckets(int n, const pd_dtype *dtypes, const size_t *bytes, const size_t *limits,
                         int n_limits, int **starts, int **members);

/* build_groups(vars, limit) for coalesced communication: consecutive
 * same-dtype runs whose byte count is still below `limit` when the next one
 * joins. Writes n_groups + 1 start offsets (malloc'ed); returns n_groups. */
int pd_dp_build_groups(pd_tensor *const *ts, int n, size_t limit, int **starts);

/* Copies the tensors of one group into a new flat tensor (dtype of ts[0]),
 * and back. */
pd_tensor *pd_dp_flatten(pd_tensor *const *ts, int n);
pd_status pd_dp_unflatten(const pd_tensor *flat, pd_tensor *const *ts, int n);

/* An error on every rank unless all ranks' entries (parameters and
 * buffers, in order) have the same names, dtypes and shapes as rank src's;
 * collective over group (dp_same_model.c). */
pd_status pd_dp_check_same_model(pd_tensor *const *ts, char *const *names, int n, int src,
                                 pd_dist_group *group);

/* ---- the reducer ------------------------------------------------------ */
typedef struct pd_dp_reducer pd_dp_reducer;

/* The bucket sizes of opts in MB (0 takes Paddle's defaults, 25 and 1);
 * an error naming both unless each is in (0, 1 TiB]. */
pd_status pd_dp_buffer_sizes(const pd_data_parallel_opts *opts, double *comm_mb, double *last_mb);
/* Builds the buckets of the given parameters (already in bucket order:
 * forward order, deduplicated, trainable) in the group's shared memory and
 * registers a post-accumulate hook on each. */
pd_dp_reducer *pd_dp_reducer_new(pd_tensor *const *params, char *const *names, int n, pd_dist_group *group,
                                 const pd_data_parallel_opts *opts);
void pd_dp_reducer_free(pd_dp_reducer *r);
/* prepare_for_backward(outputs): arms the hooks for the coming backward. */
pd_status pd_dp_reducer_prepare(pd_dp_reducer *r, pd_tensor *const *outs, int n_outs);

/* Debug view for tests: the buckets in launch (reducer) order. */
typedef struct pd_dp_bucket_info {
  pd_dtype dtype;
  int n_params;
  const int *params; /* indices into the reducer's parameter list, ascending */
  int64_t numel;
} pd_dp_bucket_info;
int pd_dp_reducer_num_buckets(const pd_dp_reducer *r);
pd_dp_bucket_info pd_dp_reducer_bucket(const pd_dp_reducer *r, int i);
/* The reducer of a DataParallel layer (NULL with one rank or for another layer). */
pd_dp_reducer *pd_data_parallel_reducer(pd_layer *dp);

#endif
