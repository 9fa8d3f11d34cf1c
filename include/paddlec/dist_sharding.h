/* Sharded optimizers of semi-automatic parallelism
 * (paddle.distributed.shard_optimizer with ShardingStage1/2/3) and
 * dist.Strategy.
 *
 *   pd_dist_sharding_stage s = pd_dist_sharding_stage1("dp", mesh);
 *   pd_optimizer *opt = pd_dist_shard_optimizer(pd_optimizer_adam_w(...), &s);
 *   ... pd_optimizer_step(opt) as with any optimizer ...
 *
 * The sharding axis is a mesh axis over which the parameters are
 * replicated (data parallelism). Each parameter is given a "sharded"
 * placement: its own placements with Shard(d) on the sharding axis, d the
 * first tensor dim no other mesh axis shards (a parameter of rank 0 stays
 * as it is). Then:
 *   stage 1  the optimizer states (moments, ...) hold that shard only: each
 *            step reduces the gradient (all_reduce), keeps this rank's
 *            slice, updates the parameter's slice and all-gathers it back;
 *   stage 2  the same, the gradient reduced straight to its slice
 *            (reduce_scatter);
 *   stage 3  the parameters themselves stay sharded: ops gather them when
 *            used (the SPMD rules reshard their inputs), gradients come back
 *            sharded and each rank updates its slice.
 * So with a sharding degree n each rank holds 1/n of the states. The
 * parameters' gradients are left as backward made them. */
#ifndef PADDLEC_DIST_SHARDING_H
#define PADDLEC_DIST_SHARDING_H

#include "paddlec/auto_parallel.h"
#include "paddlec/export.h"
#include "paddlec/optim.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ShardingStage1/2/3(sharding_mesh_dim, mesh). */
typedef struct pd_dist_sharding_stage {
  int stage;                     /* 1, 2 or 3 */
  const char *sharding_mesh_dim; /* the axis by name; NULL: axis 0 of a 1-d mesh, else the first axis on
                                    which a parameter sharded elsewhere is replicated */
  pd_dist_process_mesh *mesh;    /* the parameters' mesh (dense parameters become Replicate DTensors on it);
                                    NULL: the mesh of the parameters, which must be DTensors */
} pd_dist_sharding_stage;
PD_API pd_dist_sharding_stage pd_dist_sharding_stage1(const char *sharding_mesh_dim,
                                                      pd_dist_process_mesh *mesh);
PD_API pd_dist_sharding_stage pd_dist_sharding_stage2(const char *sharding_mesh_dim,
                                                      pd_dist_process_mesh *mesh);
PD_API pd_dist_sharding_stage pd_dist_sharding_stage3(const char *sharding_mesh_dim,
                                                      pd_dist_process_mesh *mesh);

/* shard_optimizer(optimizer, shard_fn): an optimizer that delegates to
 * `opt` (taken over on success: releasing the result releases it; on
 * failure the caller keeps it). shard_fn NULL: the states take the
 * parameters' placements (what opt already does). Stage 3 shards the
 * parameters now, in place. The state dict, learning rate and name are
 * opt's (the states as this rank's shards). Errors name the parameter or
 * value: a stage other than 1-3, an unknown mesh dim, a parameter on
 * another mesh. The mesh is retained. */
PD_API pd_optimizer *pd_dist_shard_optimizer(pd_optimizer *opt, const pd_dist_sharding_stage *shard_fn);

/* ---- dist.Strategy ----------------------------------------------------------
 * paddle.distributed.Strategy: Paddle's fields and defaults (in comments).
 * Start from pd_dist_strategy_default() and set what differs (a struct
 * that did not is refused by pd_dist_strategy_check, as the options structs
 * of optim.h are). What paddle.c has today is sharding, which
 * pd_dist_shard_optimizer implements, and what pd_dist_to_static applies:
 * sharding stages 1 and 2 (degree: the size of the mesh axis that shards
 * the batch), gradient_merge (k_steps >= 1), recompute (the segments
 * marked by pd_dist_recompute, dist_model.h), fused_passes and
 * dp_optimization (fuse_grad_size_in_MB > 0); sharding
 * stage 3, pipeline and amp, when enabled, are refused by name (never
 * ignored). */
typedef struct pd_dist_strategy_sharding {
  bool enable; /* false */
  int stage;   /* 1: 1 = optimizer states, 2 = + gradients, 3 = + parameters */
  int degree;  /* 8 */
} pd_dist_strategy_sharding;

typedef struct pd_dist_strategy_gradient_merge {
  bool enable; /* false */
  int k_steps; /* 1 */
  bool avg;    /* true */
} pd_dist_strategy_gradient_merge;

typedef struct pd_dist_strategy_pipeline {
  bool enable;               /* false */
  const char *schedule_mode; /* "1F1B" */
  int micro_batch_size;      /* 1 */
  int accumulate_steps;      /* 1 */
} pd_dist_strategy_pipeline;

typedef struct pd_dist_strategy_amp {
  bool enable;                   /* false */
  const char *dtype;             /* "float16" */
  const char *level;             /* "O1" */
  double init_loss_scaling;      /* 32768 */
  int incr_every_n_steps;        /* 1000 */
  int decr_every_n_nan_or_inf;   /* 2 */
  double incr_ratio;             /* 2.0 */
  double decr_ratio;             /* 0.8 (the value Paddle's AMP config uses; its docstring says 2.0) */
  bool use_dynamic_loss_scaling; /* false */
  const char *const *custom_white_list;
  int n_custom_white_list; /* [] */
  const char *const *custom_black_list;
  int n_custom_black_list; /* [] */
  const char *const *custom_black_varnames;
  int n_custom_black_varnames; /* [] */
  bool use_fp16_guard;         /* false */
  bool use_bf16_guard;         /* false */
  bool use_master_grad;        /* false */
} pd_dist_strategy_amp;

/* The fused passes of the Executor's compile passes (docs/static.md) that
 * DistModel's Programs get: with enable, each listed one (Paddle's
 * fused_passes_list) is on; without, none is. The Executor's other passes
 * (constant folding, dead ops, elementwise chains, in place) always run. */
typedef struct pd_dist_strategy_fused_passes {
  bool enable;        /* false */
  bool gemm_epilogue; /* false: matmul + bias add [+ activation] of Linear as one GEMM with its epilogue,
                         and a weight gradient into its plain SGD update (about 1 ulp apart) */
  bool dropout_add;   /* false: dropout followed by an add of its result as one pass (the same bits and
                         random draws) */
} pd_dist_strategy_fused_passes;

/* Recompute of the train Program's segments marked by pd_dist_recompute. */
typedef struct pd_dist_strategy_recompute {
  bool enable; /* false */
  /* []: the segments (numbered from 0 in forward order) not recomputed;
   * copied by pd_dist_to_static */
  const int *no_recompute_segments;
  int n_no_recompute_segments;
} pd_dist_strategy_recompute;

/* Strategy._dp_optimization (Paddle's DPOptimizationConfig): with enable,
 * dist.to_static's train Program all-reduces the gradients of the
 * data-parallel axes in buckets (one collective per bucket over one flat
 * buffer the gradients are planned in) of about fuse_grad_size_in_MB each,
 * in the order backward produces them; with overlap_comm_cacl each bucket's
 * all_reduce starts as soon as its last gradient exists and is waited for
 * only before the first update that reads it, so it runs beside the rest of
 * backward. fuse_all_reduce_ops false: a bucket per gradient. */
typedef struct pd_dist_strategy_dp_optimization {
  bool enable;                         /* false */
  bool fuse_all_reduce_ops;            /* true */
  double fuse_grad_size_in_MB;         /* 32 */
  bool overlap_comm_cacl;              /* true */
  bool gradient_sync_after_accumulate; /* false (true is refused: not supported yet) */
} pd_dist_strategy_dp_optimization;

typedef struct pd_dist_strategy {
  pd_dist_strategy_sharding sharding;
  pd_dist_strategy_gradient_merge gradient_merge;
  pd_dist_strategy_pipeline pipeline;
  pd_dist_strategy_amp amp;
  pd_dist_strategy_fused_passes fused_passes;
  pd_dist_strategy_recompute recompute;
  pd_dist_strategy_dp_optimization dp_optimization;
  bool explicit_zero; /* set by pd_dist_strategy_default(): every field as written */
} pd_dist_strategy;

/* dist.Strategy(): every field at Paddle's default. */
PD_API pd_dist_strategy pd_dist_strategy_default(void);
/* Checks s (NULL: the defaults): PD_OK, or an error naming the first field
 * that is out of range (PD_ERR_INVALID: sharding.stage 4) or that enables
 * a feature paddle.c does not have yet (PD_ERR_UNIMPLEMENTED:
 * "Strategy.amp.enable: automatic mixed precision is not supported yet"). */
PD_API pd_status pd_dist_strategy_check(const pd_dist_strategy *s);

#ifdef __cplusplus
}
#endif
#endif
