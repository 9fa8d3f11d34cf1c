/* dist.Strategy: Paddle's defaults and the check that refuses, by name,
 * every enabled feature paddle.c does not have yet (pipeline, amp). */
#include <string.h>

#include "../../core/core_internal.h"
#include "paddlec/dist_sharding.h"

pd_dist_strategy pd_dist_strategy_default(void) {
  pd_dist_strategy s;
  memset(&s, 0, sizeof s);
  s.sharding = (pd_dist_strategy_sharding){false, 1, 8};
  s.gradient_merge = (pd_dist_strategy_gradient_merge){false, 1, true};
  s.pipeline = (pd_dist_strategy_pipeline){false, "1F1B", 1, 1};
  s.amp.dtype = "float16";
  s.amp.level = "O1";
  s.amp.init_loss_scaling = 32768;
  s.amp.incr_every_n_steps = 1000;
  s.amp.decr_every_n_nan_or_inf = 2;
  s.amp.incr_ratio = 2.0;
  s.amp.decr_ratio = 0.8;
  s.dp_optimization = (pd_dist_strategy_dp_optimization){false, true, 32, true, false};
  s.explicit_zero = true;
  return s;
}

static pd_status missing(const char *field, const char *what) {
  return pd_set_error(PD_ERR_UNIMPLEMENTED, "Strategy.%s: %s is not supported yet by paddle.c", field, what);
}

pd_status pd_dist_strategy_check(const pd_dist_strategy *s) {
  if (!s) return PD_OK;
  if (!s->explicit_zero) return pd_opts_not_from_defaults("Strategy", "pd_dist_strategy_default()");
  if (s->sharding.enable) {
    if (s->sharding.stage < 1 || s->sharding.stage > 3)
      return pd_set_error(PD_ERR_INVALID, "Strategy.sharding.stage: %d (1, 2 or 3)", s->sharding.stage);
    if (s->sharding.degree < 1)
      return pd_set_error(PD_ERR_INVALID, "Strategy.sharding.degree: %d (must be >= 1)", s->sharding.degree);
  }
  if (s->gradient_merge.enable && s->gradient_merge.k_steps < 1)
    return pd_set_error(PD_ERR_INVALID, "Strategy.gradient_merge.k_steps: %d (must be >= 1)",
                        s->gradient_merge.k_steps);
  const pd_dist_strategy_recompute *rc = &s->recompute;
  if (rc->n_no_recompute_segments < 0 || (rc->n_no_recompute_segments > 0 && !rc->no_recompute_segments))
    return pd_set_error(PD_ERR_INVALID, "Strategy.recompute.no_recompute_segments: %d entries at %p",
                        rc->n_no_recompute_segments, (const void *)rc->no_recompute_segments);
  for (int i = 0; i < rc->n_no_recompute_segments; i++)
    if (rc->no_recompute_segments[i] < 0)
      return pd_set_error(PD_ERR_INVALID, "Strategy.recompute.no_recompute_segments[%d]: %d (must be >= 0)",
                          i, rc->no_recompute_segments[i]);
  if (s->dp_optimization.enable) {
    double mb = s->dp_optimization.fuse_grad_size_in_MB;
    if (!(mb > 0 && mb <= 1048576.0))
      return pd_set_error(PD_ERR_INVALID,
                          "Strategy.dp_optimization.fuse_grad_size_in_MB: %g (must be in (0, 1048576])", mb);
    if (s->dp_optimization.gradient_sync_after_accumulate)
      return missing("dp_optimization.gradient_sync_after_accumulate",
                     "syncing gradients after gradient merge");
  }
  if (s->pipeline.enable) return missing("pipeline.enable", "the pipeline schedule of auto_parallel");
  if (s->amp.enable) return missing("amp.enable", "automatic mixed precision in auto_parallel");
  return PD_OK;
}
