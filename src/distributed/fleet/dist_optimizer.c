/* fleet.distributed_optimizer: a wrapper optimizer over the user's. For
 * data parallelism the gradients are already averaged by DataParallel, so
 * step and clear_grad delegate; with gradient_merge the wrapper lets
 * k_steps backwards accumulate into the gradients and applies one update
 * with their sum (avg: their mean). */
#include <stdlib.h>

#include "../../ops/op_registry.h"
#include "../../optim/optim_internal.h"
#include "paddlec/fleet.h"

typedef struct merge_ctx {
  int k_steps; /* 1: no merging */
  bool avg;
  int count; /* steps taken since the last update */
} merge_ctx;

/* g /= k in place, so a gradient that aliases a communication bucket stays
 * where it is. */
static pd_status average_grad(pd_tensor *p, int k) {
  pd_tensor *g = pd_tensor_grad(p);
  if (!g) return PD_OK;
  const char *name = pd_tensor_name(p) ? pd_tensor_name(p) : "(unnamed)";
  if (!pd_tensor_is_contiguous(g))
    return pd_set_error(PD_ERR_UNIMPLEMENTED, "gradient merge: the gradient of %s is not contiguous", name);
  pd_dtype dt = pd_tensor_dtype(g);
  if (dt != PD_FLOAT32 && dt != PD_FLOAT64)
    return pd_set_error(PD_ERR_DTYPE,
                        "gradient merge (avg): the gradient of %s is %s; float32 and float64 only", name,
                        pd_dtype_name(dt));
  /* x *= 1/k as the scale_ op: the factor rounded to the dtype first, so a
   * float32 gradient gets the float32 product it had before */
  return pd_write_scale(g, dt == PD_FLOAT32 ? (double)(1.0f / (float)k) : 1.0 / (double)k);
}

static pd_status merge_step(void *ctx, pd_optimizer *inner) {
  merge_ctx *m = ctx;
  if (++m->count < m->k_steps) return PD_OK; /* keep accumulating */
  m->count = 0;
  if (m->avg && m->k_steps > 1)
    for (int i = 0; i < pd_optim_n_params(inner); i++) {
      pd_tensor *p = pd_optim_param(inner, i);
      if (pd_tensor_stop_gradient(p)) continue;
      pd_status st = average_grad(p, m->k_steps);
      if (st != PD_OK) return st;
    }
  return pd_optimizer_step(inner);
}

/* Between updates the gradients are the merge buffers: leave them. */
static void merge_clear_grad(void *ctx, pd_optimizer *inner, bool set_to_zero) {
  merge_ctx *m = ctx;
  if (m->count == 0) pd_optimizer_clear_grad(inner, set_to_zero);
}

static const pd_optim_wrapper_ops k_fleet_ops = {merge_step, merge_clear_grad, free};

pd_optimizer *pd_fleet_distributed_optimizer(pd_optimizer *optimizer,
                                             const pd_fleet_distributed_strategy *s) {
  if (!optimizer) {
    pd_set_error(PD_ERR_INVALID, "fleet.distributed_optimizer: optimizer is NULL");
    return NULL;
  }
  if (!s) s = pd_fleet_strategy();
  pd_fleet_distributed_strategy r;
  pd_fleet_distributed_strategy_resolve(s, &r);
  if (pd_fleet_distributed_strategy_check(&r, pd_fleet_worker_num()) != PD_OK) return NULL;
  merge_ctx *m = calloc(1, sizeof *m);
  if (!m) {
    pd_set_error(PD_ERR_MEMORY, "fleet.distributed_optimizer: out of memory");
    return NULL;
  }
  m->k_steps = r.gradient_merge ? r.gradient_merge_configs.k_steps : 1;
  m->avg = r.gradient_merge_configs.avg;
  pd_optimizer *w = pd_optim_wrap(optimizer, &k_fleet_ops, m);
  if (!w) free(m);
  return w;
}

pd_optimizer *pd_fleet_inner_optimizer(pd_optimizer *opt) {
  return pd_optim_wrapper_ctx(opt, &k_fleet_ops) ? pd_optim_wrapper_inner(opt) : NULL;
}
