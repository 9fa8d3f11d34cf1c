/* fleet.init, the worker queries and fleet.distributed_model for
 * collective training: a strategy checked against what paddle.c supports,
 * then the parallel environment and DataParallel. */
#include <string.h>

#include "paddlec/fleet.h"
#include "paddlec/parallel.h"

static struct {
  bool initialized;
  pd_fleet_distributed_strategy strategy; /* resolved; pointers only to static defaults */
} g_fleet;

/* A resolved copy of s that keeps none of the caller's pointers (strings and
 * lists are read during the call only). */
static void keep_numeric(const pd_fleet_distributed_strategy *s, pd_fleet_distributed_strategy *out) {
  pd_fleet_distributed_strategy d = pd_fleet_distributed_strategy_default();
  pd_fleet_distributed_strategy_resolve(s, out);
  out->amp_configs.custom_white_list = d.amp_configs.custom_white_list;
  out->amp_configs.custom_black_list = d.amp_configs.custom_black_list;
  out->amp_configs.custom_black_varnames = d.amp_configs.custom_black_varnames;
  out->recompute_configs = d.recompute_configs;
  out->sharding_configs.sharding_segment_strategy = d.sharding_configs.sharding_segment_strategy;
  out->sharding_configs.segment_anchors = d.sharding_configs.segment_anchors;
  out->pipeline_configs.schedule_mode = d.pipeline_configs.schedule_mode;
  memcpy(out->hybrid_configs.order, d.hybrid_configs.order, sizeof d.hybrid_configs.order);
  out->dgc_configs.sparsity = d.dgc_configs.sparsity;
  out->dgc_configs.n_sparsity = d.dgc_configs.n_sparsity;
  out->lars_configs.exclude_from_weight_decay = d.lars_configs.exclude_from_weight_decay;
  out->lamb_configs.exclude_from_weight_decay = d.lamb_configs.exclude_from_weight_decay;
  out->a_sync_configs.heter_worker_device_guard = d.a_sync_configs.heter_worker_device_guard;
  out->gradient_scale_configs.scale_strategy = d.gradient_scale_configs.scale_strategy;
}

pd_status pd_fleet_init(bool is_collective, const pd_fleet_distributed_strategy *s) {
  if (!is_collective)
    return pd_set_error(
        PD_ERR_UNIMPLEMENTED,
        "fleet.init(is_collective=False): the parameter-server mode is not supported by paddle.c");
  pd_status st = pd_fleet_distributed_strategy_check(s, pd_dist_get_world_size(NULL));
  if (st != PD_OK) return st;
  if (!pd_dist_init_parallel_env(NULL)) return pd_last_status() != PD_OK ? pd_last_status() : PD_ERR_COMM;
  /* the world size the environment announced is the one we joined */
  st = pd_fleet_distributed_strategy_check(s, pd_dist_get_world_size(NULL));
  if (st != PD_OK) return st;
  keep_numeric(s, &g_fleet.strategy);
  g_fleet.initialized = true;
  return PD_OK;
}

bool pd_fleet_is_initialized(void) { return g_fleet.initialized; }

const pd_fleet_distributed_strategy *pd_fleet_strategy(void) {
  return g_fleet.initialized ? &g_fleet.strategy : NULL;
}

void pd_fleet_shutdown(void) { memset(&g_fleet, 0, sizeof g_fleet); }

int pd_fleet_worker_index(void) {
  int r = pd_dist_get_rank(NULL);
  return r < 0 ? 0 : r;
}

int pd_fleet_worker_num(void) {
  int n = pd_dist_get_world_size(NULL);
  return n < 1 ? 1 : n;
}

bool pd_fleet_is_first_worker(void) { return pd_fleet_worker_index() == 0; }

pd_status pd_fleet_barrier_worker(void) {
  if (!g_fleet.initialized)
    return pd_set_error(PD_ERR_STATE, "fleet.barrier_worker: call fleet.init (pd_fleet_init) first");
  return pd_dist_barrier(NULL);
}

/* One byte: every gradient closes its bucket (fuse_all_reduce_ops off). */
#define PD_FLEET_UNFUSED_MB (1.0 / (1024.0 * 1024.0))

pd_layer *pd_fleet_distributed_model(pd_layer *model) {
  if (!g_fleet.initialized) {
    pd_set_error(PD_ERR_STATE, "fleet.distributed_model: call fleet.init (pd_fleet_init) first");
    return NULL;
  }
  if (!model) {
    pd_set_error(PD_ERR_INVALID, "fleet.distributed_model: model is NULL");
    return NULL;
  }
  const pd_fleet_distributed_strategy *s = &g_fleet.strategy;
  if (pd_fleet_distributed_strategy_check(s, pd_fleet_worker_num()) != PD_OK) return NULL;
  pd_data_parallel_opts o = {
      .comm_buffer_size = s->fuse_all_reduce_ops ? s->fuse_grad_size_in_MB : PD_FLEET_UNFUSED_MB,
      .last_comm_buffer_size = s->fuse_all_reduce_ops ? s->last_comm_group_size_MB : PD_FLEET_UNFUSED_MB,
      .find_unused_parameters = s->find_unused_parameters,
  };
  return pd_data_parallel(model, &o);
}
