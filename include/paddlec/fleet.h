/* paddle.distributed.fleet for collective (data-parallel) training.
 *
 *   pd_fleet_distributed_strategy s = pd_fleet_distributed_strategy_default();
 *   pd_fleet_init(true, &s);                         // fleet.init(is_collective=True)
 *   pd_layer *net = ...;
 *   pd_optimizer *opt = pd_optimizer_adam(...);
 *   opt = pd_fleet_distributed_optimizer(opt, &s);   // owns the inner optimizer now
 *   pd_layer *dp = pd_fleet_distributed_model(net);  // DataParallel with s's settings
 *   loss = ...pd_layer_call1(dp, x)...;
 *   pd_backward(loss, NULL, false);
 *   pd_optimizer_step(opt);
 *   pd_optimizer_clear_grad(opt, true);
 *
 * DistributedStrategy: every field of Paddle's (fleet/base/distributed_strategy.py
 * and its proto), grouped as there. The options rule of optim.h: NULL means
 * Paddle's defaults, and a struct given must start from
 * pd_fleet_distributed_strategy_default(), which fills every default and
 * sets `explicit_zero`; every field is then taken as written, so
 * `s.fuse_all_reduce_ops = false` or `s.gradient_merge_configs.avg = false`
 * means false. A struct that did not (a literal, whose fields left out would
 * read 0 rather than Paddle's defaults) is refused with PD_ERR_INVALID naming
 * the function. A NULL string or list is its default. The default of each
 * field is given in its comment.
 *
 * What paddle.c acts on (collective mode, data parallelism):
 *   hybrid_configs.dp_degree   -1 (the world size) or the world size
 *   hybrid_configs.{mp,pp,sharding,sep}_degree   1
 *   fuse_all_reduce_ops        false: one bucket per gradient
 *   fuse_grad_size_in_MB       DataParallel comm_buffer_size
 *   last_comm_group_size_MB    DataParallel last_comm_buffer_size
 *   find_unused_parameters     DataParallel find_unused_parameters
 *   gradient_merge(_configs)   the distributed optimizer merges k_steps steps
 * Ignored as Paddle's dygraph collective mode ignores them: a_sync and
 * a_sync_configs (parameter server only), build_strategy,
 * execution_strategy, without_graph_optimization (static graph only), the
 * cudnn_* and conv_workspace_size_limit fields (GPU kernels). Any other
 * field set to a value other than its default (amp, recompute, sharding,
 * pipeline, tensor_parallel, lamb, lars, dgc, localsgd, ...) makes
 * pd_fleet_init, pd_fleet_distributed_model and
 * pd_fleet_distributed_optimizer fail with PD_ERR_UNIMPLEMENTED naming it:
 * "DistributedStrategy.recompute is not supported yet by paddle.c". A
 * feature's *_configs are only looked at when the feature is on.
 *
 * Strings and string lists are read during the calls that take the
 * strategy; pd_fleet_init keeps a copy of the numeric fields only. */
#ifndef PADDLEC_FLEET_H
#define PADDLEC_FLEET_H

#include "paddlec/distributed.h"
#include "paddlec/nn.h"
#include "paddlec/optim.h"
#include "paddlec/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A list of strings (Paddle's repeated string fields). */
typedef struct pd_fleet_str_list {
  const char *const *items;
  int n;
} pd_fleet_str_list;

typedef struct pd_fleet_amp_configs {
  double init_loss_scaling;      /* 32768 */
  int incr_every_n_steps;        /* 1000 */
  int decr_every_n_nan_or_inf;   /* 2 */
  double incr_ratio;             /* 2.0 */
  double decr_ratio;             /* 0.8 */
  bool use_dynamic_loss_scaling; /* true */
  pd_fleet_str_list custom_white_list;
  pd_fleet_str_list custom_black_list;
  pd_fleet_str_list custom_black_varnames;
  bool use_pure_fp16;      /* false */
  bool use_fp16_guard;     /* true */
  bool use_optimizer_fp16; /* false */
} pd_fleet_amp_configs;

typedef struct pd_fleet_recompute_configs {
  pd_fleet_str_list checkpoints;
  bool enable_offload; /* false */
  const int *checkpoint_shape;
  int n_checkpoint_shape;
} pd_fleet_recompute_configs;

typedef struct pd_fleet_sharding_configs {
  const char *sharding_segment_strategy; /* "segment_broadcast_MB" */
  double segment_broadcast_MB;           /* 32 */
  pd_fleet_str_list segment_anchors;
  int sharding_degree;           /* 8 */
  int mp_degree;                 /* 1 */
  int dp_degree;                 /* 1 */
  bool hybrid_dp;                /* false */
  int gradient_merge_acc_step;   /* 1 */
  bool optimize_offload;         /* false */
  bool pp_allreduce_in_optimize; /* false */
  int pp_degree;                 /* 1 */
  bool optimize_cast;            /* false */
  bool dp_as_optimizer_sharding; /* false (Paddle's _dp_as_optimizer_sharding) */
  int stage;                     /* 1 */
} pd_fleet_sharding_configs;

typedef struct pd_fleet_pipeline_configs {
  int micro_batch_size;      /* 1 */
  int accumulate_steps;      /* 1 */
  const char *schedule_mode; /* "1F1B" */
  bool p2p_cache_shape;      /* true */
} pd_fleet_pipeline_configs;

typedef struct pd_fleet_tensor_parallel_configs {
  int tensor_parallel_degree; /* 1 */
  int tensor_init_seed;       /* -1 */
} pd_fleet_tensor_parallel_configs;

typedef struct pd_fleet_gradient_merge_configs {
  int k_steps; /* 1: gradients of k_steps steps make one update */
  bool avg;    /* true: the merged gradient is their mean (else their sum) */
} pd_fleet_gradient_merge_configs;

typedef struct pd_fleet_localsgd_configs {
  int k_steps;    /* 1 */
  int begin_step; /* 1 */
} pd_fleet_localsgd_configs;

typedef struct pd_fleet_adaptive_localsgd_configs {
  int init_k_steps; /* 1 */
  int begin_step;   /* 1 */
} pd_fleet_adaptive_localsgd_configs;

typedef struct pd_fleet_dgc_configs {
  int rampup_begin_step;  /* 0 */
  int rampup_step;        /* 1 */
  const double *sparsity; /* NULL: [0.999] */
  int n_sparsity;
} pd_fleet_dgc_configs;

typedef struct pd_fleet_lars_configs {
  double lars_coeff;        /* 0.001 */
  double lars_weight_decay; /* 0.0005 */
  double epsilon;           /* 0 */
  pd_fleet_str_list exclude_from_weight_decay;
} pd_fleet_lars_configs;

typedef struct pd_fleet_lamb_configs {
  double lamb_weight_decay; /* 0.01 */
  pd_fleet_str_list exclude_from_weight_decay;
} pd_fleet_lamb_configs;

typedef struct pd_fleet_a_sync_configs {
  int k_steps;                           /* -1 */
  int max_merge_var_num;                 /* 1 */
  int send_queue_size;                   /* 16 */
  bool independent_recv_thread;          /* false */
  int min_send_grad_num_before_recv;     /* 1 */
  int thread_pool_size;                  /* 1 */
  int send_wait_times;                   /* 1 */
  bool runtime_split_send_recv;          /* false */
  bool launch_barrier;                   /* true */
  const char *heter_worker_device_guard; /* "cpu" */
  int lr_decay_steps;                    /* 10 */
  int use_ps_gpu;                        /* 0 */
} pd_fleet_a_sync_configs;

/* The five axes of the hybrid topology, outer to inner by `order`. */
typedef struct pd_fleet_hybrid_configs {
  int dp_degree;       /* -1: world size / the product of the others */
  int mp_degree;       /* 1 */
  int pp_degree;       /* 1 */
  int sharding_degree; /* 1 */
  int sep_degree;      /* 1 */
  /* axis names "dp", "pp", "sharding", "sep", "mp"; all NULL: that order */
  const char *order[5];
} pd_fleet_hybrid_configs;

typedef struct pd_fleet_gradient_scale_configs {
  const char *scale_strategy; /* "avg" ("sum", "customized") */
  bool scale_gradient;        /* false */
} pd_fleet_gradient_scale_configs;

/* paddle.static.BuildStrategy (static graph only; ignored here). */
typedef struct pd_fleet_build_strategy {
  bool enable_sequential_execution;       /* false */
  bool fuse_elewise_add_act_ops;          /* false */
  bool fuse_bn_act_ops;                   /* false */
  bool fuse_relu_depthwise_conv;          /* false */
  bool fuse_broadcast_ops;                /* false */
  bool fuse_all_optimizer_ops;            /* false */
  bool enable_inplace;                    /* false */
  bool enable_backward_optimizer_op_deps; /* true */
  bool cache_runtime_context;             /* false */
  bool fuse_bn_add_act_ops;               /* true */
  bool enable_auto_fusion;                /* false */
  bool enable_addto;                      /* false */
  bool fix_op_run_order;                  /* false */
  bool allow_cuda_graph_capture;          /* false */
  int reduce_strategy;                    /* 0 */
} pd_fleet_build_strategy;

/* paddle.static.ExecutionStrategy (static graph only; ignored here). */
typedef struct pd_fleet_execution_strategy {
  int num_threads;                  /* 1 */
  int num_iteration_per_drop_scope; /* 10 */
  int num_iteration_per_run;        /* 1 */
  bool use_thread_barrier;          /* false */
} pd_fleet_execution_strategy;

/* fleet.DistributedStrategy. */
typedef struct pd_fleet_distributed_strategy {
  bool amp; /* false */
  pd_fleet_amp_configs amp_configs;
  bool recompute; /* false */
  pd_fleet_recompute_configs recompute_configs;
  bool sharding; /* false */
  pd_fleet_sharding_configs sharding_configs;
  bool pipeline; /* false */
  pd_fleet_pipeline_configs pipeline_configs;
  bool tensor_parallel; /* false */
  pd_fleet_tensor_parallel_configs tensor_parallel_configs;
  pd_fleet_hybrid_configs hybrid_configs;
  bool gradient_merge; /* false */
  pd_fleet_gradient_merge_configs gradient_merge_configs;
  bool localsgd; /* false */
  pd_fleet_localsgd_configs localsgd_configs;
  bool adaptive_localsgd; /* false */
  pd_fleet_adaptive_localsgd_configs adaptive_localsgd_configs;
  bool dgc; /* false */
  pd_fleet_dgc_configs dgc_configs;
  bool lars; /* false */
  pd_fleet_lars_configs lars_configs;
  bool lamb; /* false */
  pd_fleet_lamb_configs lamb_configs;
  bool a_sync; /* true (parameter server only) */
  pd_fleet_a_sync_configs a_sync_configs;
  pd_fleet_gradient_scale_configs gradient_scale_configs;
  pd_fleet_build_strategy build_strategy;
  pd_fleet_execution_strategy execution_strategy;

  bool elastic;                            /* false */
  bool auto_;                              /* false (Paddle's `auto`) */
  bool semi_auto;                          /* false */
  bool auto_search;                        /* false */
  bool heter_ccl_mode;                     /* false */
  bool sync_nccl_allreduce;                /* true */
  int nccl_comm_num;                       /* 1 */
  bool use_hierarchical_allreduce;         /* false */
  int hierarchical_allreduce_inter_nranks; /* 1 */
  bool sync_batch_norm;                    /* false */
  bool fuse_all_reduce_ops;                /* true */
  double fuse_grad_size_in_MB;             /* 32 */
  double fuse_grad_size_in_TFLOPS;         /* 50 */
  int fuse_grad_size_in_num;               /* 8 */
  bool fuse_grad_merge;                    /* false */
  double last_comm_group_size_MB;          /* 1 */
  bool find_unused_parameters;             /* false */
  bool without_graph_optimization;         /* false */
  bool calc_comm_same_stream;              /* false */
  bool fp16_allreduce;                     /* false */
  bool asp;                                /* false */
  bool adam_d2sum;                         /* true */
  bool cudnn_exhaustive_search;            /* false */
  int conv_workspace_size_limit;           /* 512 */
  bool cudnn_batchnorm_spatial_persistent; /* false */

  bool explicit_zero; /* every field as written (set by ..._default()) */
} pd_fleet_distributed_strategy;

/* fleet.DistributedStrategy(): every field at Paddle's default, explicit_zero set. */
PD_API pd_fleet_distributed_strategy pd_fleet_distributed_strategy_default(void);
/* *out = s as written, its NULL strings and lists given their defaults
 * (NULL s: the defaults). The strings and lists of out point at s's or at
 * static defaults. */
PD_API void pd_fleet_distributed_strategy_resolve(const pd_fleet_distributed_strategy *s,
                                                  pd_fleet_distributed_strategy *out);
/* Checks s against what paddle.c supports with `world_size` ranks in
 * collective mode: PD_OK, or PD_ERR_UNIMPLEMENTED / PD_ERR_INVALID naming the
 * first offending field and its value. */
PD_API pd_status pd_fleet_distributed_strategy_check(const pd_fleet_distributed_strategy *s, int world_size);

/* fleet.init(is_collective=..., strategy=s): checks s, initialises the
 * parallel environment (pd_dist_init_parallel_env) and keeps s (numeric
 * fields) for pd_fleet_distributed_model. is_collective=false (the
 * parameter-server mode) is PD_ERR_UNIMPLEMENTED. Calling it again replaces
 * the strategy. */
PD_API pd_status pd_fleet_init(bool is_collective, const pd_fleet_distributed_strategy *s);
PD_API bool pd_fleet_is_initialized(void);
/* The strategy given to pd_fleet_init, resolved (NULL before init). */
PD_API const pd_fleet_distributed_strategy *pd_fleet_strategy(void);

/* fleet.distributed_model(model): paddle.DataParallel over the world with
 * comm_buffer_size = fuse_grad_size_in_MB, last_comm_buffer_size =
 * last_comm_group_size_MB and find_unused_parameters from the strategy
 * (with fuse_all_reduce_ops false every gradient is its own bucket).
 * A new reference (see pd_data_parallel); NULL on error, including before
 * pd_fleet_init. */
PD_API pd_layer *pd_fleet_distributed_model(pd_layer *model);

/* fleet.distributed_optimizer(optimizer, strategy): a pd_optimizer that
 * delegates to `optimizer` (taken over on success: releasing the wrapper
 * releases it; on failure the caller keeps it). s NULL: the strategy of
 * pd_fleet_init. With gradient_merge on, step() only counts for k_steps - 1
 * calls (gradients keep accumulating: clear_grad does nothing in between)
 * and on the k-th applies one update with the merged gradients, divided by
 * k_steps when avg, then the next clear_grad clears them. state_dict,
 * learning rate and name are the inner optimizer's. */
PD_API pd_optimizer *pd_fleet_distributed_optimizer(pd_optimizer *optimizer,
                                                    const pd_fleet_distributed_strategy *s);
/* The wrapped optimizer (borrowed), NULL when opt is not a fleet optimizer. */
PD_API pd_optimizer *pd_fleet_inner_optimizer(pd_optimizer *opt);

/* fleet.worker_index() / worker_num() / is_first_worker() / worker_endpoints():
 * from the environment (the world when initialised). */
PD_API int pd_fleet_worker_index(void);
PD_API int pd_fleet_worker_num(void);
PD_API bool pd_fleet_is_first_worker(void);
/* fleet.barrier_worker(): a barrier over the world; needs pd_fleet_init. */
PD_API pd_status pd_fleet_barrier_worker(void);
/* Leaves fleet (the strategy is dropped; the parallel environment stays). */
PD_API void pd_fleet_shutdown(void);

#ifdef __cplusplus
}
#endif

#endif
