/* fleet.DistributedStrategy: Paddle's defaults and the check of what
 * paddle.c acts on. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../../core/core_internal.h"
#include "paddlec/fleet.h"

static const char *const k_default_order[5] = {"dp", "pp", "sharding", "sep", "mp"};
static const double k_default_sparsity[1] = {0.999};

/* fleet.DistributedStrategy(): Paddle's default of every field. */
pd_fleet_distributed_strategy pd_fleet_distributed_strategy_default(void) {
  pd_fleet_distributed_strategy s;
  memset(&s, 0, sizeof s);
  s.amp_configs.init_loss_scaling = 32768.0;
  s.amp_configs.incr_every_n_steps = 1000;
  s.amp_configs.decr_every_n_nan_or_inf = 2;
  s.amp_configs.incr_ratio = 2.0;
  s.amp_configs.decr_ratio = 0.8;
  s.amp_configs.use_dynamic_loss_scaling = true;
  s.amp_configs.use_fp16_guard = true;

  s.sharding_configs.sharding_segment_strategy = "segment_broadcast_MB";
  s.sharding_configs.segment_broadcast_MB = 32.0;
  s.sharding_configs.sharding_degree = 8;
  s.sharding_configs.mp_degree = 1;
  s.sharding_configs.dp_degree = 1;
  s.sharding_configs.gradient_merge_acc_step = 1;
  s.sharding_configs.pp_degree = 1;
  s.sharding_configs.stage = 1;

  s.pipeline_configs.micro_batch_size = 1;
  s.pipeline_configs.accumulate_steps = 1;
  s.pipeline_configs.schedule_mode = "1F1B";
  s.pipeline_configs.p2p_cache_shape = true;

  s.tensor_parallel_configs.tensor_parallel_degree = 1;
  s.tensor_parallel_configs.tensor_init_seed = -1;

  s.hybrid_configs.dp_degree = -1;
  s.hybrid_configs.mp_degree = 1;
  s.hybrid_configs.pp_degree = 1;
  s.hybrid_configs.sharding_degree = 1;
  s.hybrid_configs.sep_degree = 1;

  s.gradient_merge_configs.k_steps = 1;
  s.gradient_merge_configs.avg = true;
  s.localsgd_configs.k_steps = 1;
  s.localsgd_configs.begin_step = 1;
  s.adaptive_localsgd_configs.init_k_steps = 1;
  s.adaptive_localsgd_configs.begin_step = 1;
  s.dgc_configs.rampup_step = 1;
  s.lars_configs.lars_coeff = 0.001;
  s.lars_configs.lars_weight_decay = 0.0005;
  s.lamb_configs.lamb_weight_decay = 0.01;

  s.a_sync = true;
  s.a_sync_configs.k_steps = -1;
  s.a_sync_configs.max_merge_var_num = 1;
  s.a_sync_configs.send_queue_size = 16;
  s.a_sync_configs.min_send_grad_num_before_recv = 1;
  s.a_sync_configs.thread_pool_size = 1;
  s.a_sync_configs.send_wait_times = 1;
  s.a_sync_configs.launch_barrier = true;
  s.a_sync_configs.heter_worker_device_guard = "cpu";
  s.a_sync_configs.lr_decay_steps = 10;

  s.gradient_scale_configs.scale_strategy = "avg";
  s.build_strategy.enable_backward_optimizer_op_deps = true;
  s.build_strategy.fuse_bn_add_act_ops = true;
  s.execution_strategy.num_threads = 1;
  s.execution_strategy.num_iteration_per_drop_scope = 10;
  s.execution_strategy.num_iteration_per_run = 1;

  s.sync_nccl_allreduce = true;
  s.nccl_comm_num = 1;
  s.hierarchical_allreduce_inter_nranks = 1;
  s.fuse_all_reduce_ops = true;
  s.fuse_grad_size_in_MB = 32.0;
  s.fuse_grad_size_in_TFLOPS = 50.0;
  s.fuse_grad_size_in_num = 8;
  s.last_comm_group_size_MB = 1.0;
  s.adam_d2sum = true;
  s.conv_workspace_size_limit = 512;
  memcpy(s.hybrid_configs.order, k_default_order, sizeof s.hybrid_configs.order);
  s.dgc_configs.sparsity = k_default_sparsity;
  s.dgc_configs.n_sparsity = 1;
  s.explicit_zero = true;
  return s;
}

void pd_fleet_distributed_strategy_resolve(const pd_fleet_distributed_strategy *s,
                                           pd_fleet_distributed_strategy *out) {
  if (!out) return;
  pd_fleet_distributed_strategy d = pd_fleet_distributed_strategy_default();
  if (!s) {
    *out = d;
    return;
  }
  *out = *s;
  /* A NULL string or list has no meaning of its own: it is the default. */
  bool no_order = true;
  for (int i = 0; i < 5; i++) no_order = no_order && !out->hybrid_configs.order[i];
  if (no_order) memcpy(out->hybrid_configs.order, d.hybrid_configs.order, sizeof d.hybrid_configs.order);
  if (!out->dgc_configs.sparsity && out->dgc_configs.n_sparsity == 0) {
    out->dgc_configs.sparsity = d.dgc_configs.sparsity;
    out->dgc_configs.n_sparsity = d.dgc_configs.n_sparsity;
  }
  if (!out->gradient_scale_configs.scale_strategy)
    out->gradient_scale_configs.scale_strategy = d.gradient_scale_configs.scale_strategy;
  if (!out->pipeline_configs.schedule_mode)
    out->pipeline_configs.schedule_mode = d.pipeline_configs.schedule_mode;
  if (!out->sharding_configs.sharding_segment_strategy)
    out->sharding_configs.sharding_segment_strategy = d.sharding_configs.sharding_segment_strategy;
  if (!out->a_sync_configs.heter_worker_device_guard)
    out->a_sync_configs.heter_worker_device_guard = d.a_sync_configs.heter_worker_device_guard;
}

static pd_status unsupported(const char *field, const char *value) {
  return pd_set_error(PD_ERR_UNIMPLEMENTED,
                      "DistributedStrategy.%s is not supported yet by paddle.c (set to %s)", field, value);
}

/* A field whose only supported value is its default. */
#define ONLY_BOOL(field, def)                                                     \
  do {                                                                            \
    if (r.field != (def)) return unsupported(#field, r.field ? "True" : "False"); \
  } while (0)
#define ONLY_NUM(field, def)                          \
  do {                                                \
    if ((double)r.field != (double)(def)) {           \
      char v_[32];                                    \
      snprintf(v_, sizeof v_, "%g", (double)r.field); \
      return unsupported(#field, v_);                 \
    }                                                 \
  } while (0)

static pd_status check_order(const pd_fleet_hybrid_configs *h) {
  bool seen[5] = {false};
  for (int i = 0; i < 5; i++) {
    int k = -1;
    for (int j = 0; j < 5 && h->order[i]; j++)
      if (strcmp(h->order[i], k_default_order[j]) == 0) k = j;
    if (k < 0)
      return pd_set_error(PD_ERR_INVALID,
                          "DistributedStrategy.hybrid_configs.order[%d] = '%s': expected each of "
                          "'dp', 'pp', 'sharding', 'sep', 'mp' once",
                          i, h->order[i] ? h->order[i] : "(null)");
    if (seen[k])
      return pd_set_error(PD_ERR_INVALID, "DistributedStrategy.hybrid_configs.order names '%s' twice",
                          k_default_order[k]);
    seen[k] = true;
  }
  return PD_OK;
}

pd_status pd_fleet_distributed_strategy_check(const pd_fleet_distributed_strategy *s, int world_size) {
  if (s && !s->explicit_zero)
    return pd_opts_not_from_defaults("DistributedStrategy", "pd_fleet_distributed_strategy_default()");
  pd_fleet_distributed_strategy r;
  pd_fleet_distributed_strategy_resolve(s, &r);
  if (world_size < 1)
    return pd_set_error(PD_ERR_INVALID, "DistributedStrategy check: world size must be >= 1, got %d",
                        world_size);

  /* Features paddle.c does not implement yet; their *_configs only matter
   * when they are on, as in Paddle. */
  ONLY_BOOL(amp, false);
  ONLY_BOOL(recompute, false);
  ONLY_BOOL(sharding, false);
  ONLY_BOOL(pipeline, false);
  ONLY_BOOL(tensor_parallel, false);
  ONLY_BOOL(localsgd, false);
  ONLY_BOOL(adaptive_localsgd, false);
  ONLY_BOOL(dgc, false);
  ONLY_BOOL(lars, false);
  ONLY_BOOL(lamb, false);
  ONLY_BOOL(elastic, false);
  ONLY_BOOL(auto_, false);
  ONLY_BOOL(semi_auto, false);
  ONLY_BOOL(auto_search, false);
  ONLY_BOOL(heter_ccl_mode, false);
  ONLY_BOOL(sync_nccl_allreduce, true);
  ONLY_NUM(nccl_comm_num, 1);
  ONLY_BOOL(use_hierarchical_allreduce, false);
  ONLY_NUM(hierarchical_allreduce_inter_nranks, 1);
  ONLY_BOOL(sync_batch_norm, false);
  ONLY_NUM(fuse_grad_size_in_TFLOPS, 50);
  ONLY_NUM(fuse_grad_size_in_num, 8);
  ONLY_BOOL(fuse_grad_merge, false);
  ONLY_BOOL(calc_comm_same_stream, false);
  ONLY_BOOL(fp16_allreduce, false);
  ONLY_BOOL(asp, false);
  ONLY_BOOL(adam_d2sum, true);
  ONLY_BOOL(gradient_scale_configs.scale_gradient, false);
  if (strcmp(r.gradient_scale_configs.scale_strategy, "avg") != 0)
    return unsupported("gradient_scale_configs.scale_strategy", r.gradient_scale_configs.scale_strategy);

  /* The hybrid topology: data parallelism only. */
  const pd_fleet_hybrid_configs *h = &r.hybrid_configs;
  ONLY_NUM(hybrid_configs.mp_degree, 1);
  ONLY_NUM(hybrid_configs.pp_degree, 1);
  ONLY_NUM(hybrid_configs.sharding_degree, 1);
  ONLY_NUM(hybrid_configs.sep_degree, 1);
  if (h->dp_degree != -1 && h->dp_degree != world_size)
    return pd_set_error(PD_ERR_INVALID,
                        "DistributedStrategy.hybrid_configs.dp_degree = %d but the world has %d ranks "
                        "(dp * mp * pp * sharding * sep must equal the world size; -1: all of it)",
                        h->dp_degree, world_size);
  pd_status st = check_order(h);
  if (st != PD_OK) return st;

  /* What the data-parallel path acts on. */
  if (!(r.fuse_grad_size_in_MB > 0) || !isfinite(r.fuse_grad_size_in_MB))
    return pd_set_error(PD_ERR_INVALID, "DistributedStrategy.fuse_grad_size_in_MB must be > 0, got %g",
                        r.fuse_grad_size_in_MB);
  if (!(r.last_comm_group_size_MB > 0) || !isfinite(r.last_comm_group_size_MB))
    return pd_set_error(PD_ERR_INVALID, "DistributedStrategy.last_comm_group_size_MB must be > 0, got %g",
                        r.last_comm_group_size_MB);
  if (r.gradient_merge && r.gradient_merge_configs.k_steps < 1)
    return pd_set_error(PD_ERR_INVALID,
                        "DistributedStrategy.gradient_merge_configs.k_steps must be >= 1, got %d",
                        r.gradient_merge_configs.k_steps);
  return PD_OK;
}
