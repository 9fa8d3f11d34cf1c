/* The DistModel's state, shared by its sources: dist_model.c (to_static,
 * modes, building and running the Programs) and dist_model_state.c
 * (state_dict / set_state_dict). */
#ifndef PADDLEC_AP_DIST_MODEL_INTERNAL_H
#define PADDLEC_AP_DIST_MODEL_INTERNAL_H

#include "dist_program.h"

/* A mode's Programs and the feeds they were built for. */
typedef struct mode_programs {
  bool built;
  int n_feed;
  pd_dist_attr *feed_attr[2];
  pd_dtype feed_dtype[2];
  pd_ap_program serial, dist;
  pd_ap_program acc; /* gradient_merge: the rank's Program of the calls that only accumulate */
  /* the fetch Variables' tensors of dist and acc, found once at build */
  pd_tensor *dist_fetch[PD_AP_MAX_FETCH], *acc_fetch[PD_AP_MAX_FETCH];
} mode_programs;

struct pd_dist_model {
  pd_layer *layer, *loss;
  pd_optimizer *opt;
  pd_dist_model_mode mode;
  pd_dist_process_mesh *mesh; /* the parameters' (NULL until known) */
  mode_programs progs[4];
  pd_var_scope *scope;
  pd_executor *exe;
  pd_executor *exe_acc;     /* gradient_merge: runs the accumulate Program (each keeps its plan) */
  pd_optimizer *record_opt; /* what record minimizes: opt, or the optimizer shard_optimizer wraps */
  int sharding_stage;       /* Strategy.sharding (0: off; 1, 2) */
  int sharding_degree;
  int sharding_axis; /* the sharding mesh axis (-1: the one sharding the batch, known at the first call) */
  int gm_k;          /* Strategy.gradient_merge.k_steps (1: no merge) */
  bool gm_avg;       /* ... avg */
  bool recompute;    /* Strategy.recompute.enable */
  int *rc_skip;      /* ... no_recompute_segments (a copy) */
  int n_rc_skip;
  pd_dist_strategy_dp_optimization dp; /* Strategy.dp_optimization (enable false: none) */
  long gm_calls;                       /* train calls so far: the k-th of each k runs the update */
  /* the parallel environment (pd_dist_world_generation) the Programs were
   * partitioned in: their ring ids name its groups (0: none built yet) */
  unsigned long world;
  pd_tensor **held; /* state_dict("opt")'s DTensors of the scope's accumulators */
  int n_held;
};

/* This rank's part, a copy, of the state the eager optimizer holds under
 * the name of persistable v (loaded by set_state_dict, or created by
 * state_dict), placed as v: *out NULL when it holds none. A Program's
 * persistable starts from it rather than the startup program's value. */
pd_status pd_ap_model_eager_value(pd_dist_model *m, const pd_variable *v, pd_tensor **out);

#endif
