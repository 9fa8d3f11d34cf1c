/* fleet.utils.fused_allreduce_gradients: average the given parameters'
 * gradients over a group, coalesced into same-dtype groups of 128 MiB,
 * synchronously. */
#include <stdlib.h>

#include "../../core/core_internal.h"
#include "dp_internal.h"

#define FUSE_GROUP_BYTES ((size_t)128 * 1024 * 1024)

pd_status pd_fleet_utils_fused_allreduce_gradients(pd_tensor *const *params, int n, pd_dist_group *group) {
  if (n < 0 || (n > 0 && !params))
    return pd_set_error(PD_ERR_INVALID, "fused_allreduce_gradients: bad parameter list (%d)", n);
  if (!pd_dist_is_initialized())
    return pd_set_error(PD_ERR_STATE,
                        "fused_allreduce_gradients: the parallel environment is not initialised "
                        "(call pd_dist_init_parallel_env)");
  if (group && !pd_dist_group_is_member(group)) return PD_OK;
  int nranks = pd_dist_get_world_size(group);
  pd_tensor **grads = malloc(((size_t)n + 1) * sizeof *grads);
  if (!grads) return pd_set_error(PD_ERR_MEMORY, "fused_allreduce_gradients: out of memory");
  int ng = 0;
  for (int i = 0; i < n; i++) {
    if (!params[i]) {
      free(grads);
      return pd_set_error(PD_ERR_INVALID, "fused_allreduce_gradients: parameter %d is NULL", i);
    }
    const pd_param_info *pi = pd_tensor_param_info(params[i]);
    if (params[i]->stop_gradient || (pi && !pi->trainable) || !params[i]->grad) continue;
    grads[ng++] = params[i]->grad;
  }
  pd_status st = PD_OK;
  int *starts = NULL;
  int ngroups = ng && nranks > 1 ? pd_dp_build_groups(grads, ng, FUSE_GROUP_BYTES, &starts) : 0;
  if (ngroups < 0) st = ngroups;
  pd_internal_enter();
  for (int g = 0; g < ngroups && st == PD_OK; g++) {
    int m = starts[g + 1] - starts[g];
    pd_tensor *flat = pd_dp_flatten(grads + starts[g], m);
    if (!flat) {
      st = pd_last_status();
      break;
    }
    st = pd_dist_all_reduce(flat, PD_REDUCE_AVG, &(pd_dist_opts){.group = group});
    if (st == PD_OK) st = pd_dp_unflatten(flat, grads + starts[g], m);
    pd_tensor_release(flat);
  }
  pd_internal_leave();
  free(starts);
  free(grads);
  return st;
}
