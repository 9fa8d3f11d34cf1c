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

#ifdef __cplusplus
}
#endif
#endif
