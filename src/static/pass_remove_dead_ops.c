/* Dead code removal for the fetch list: an op of the lowered plan stays
 * when a fetched value depends on it, when it writes a persistable variable
 * (an optimizer update) or when it has effects beyond its outputs (an
 * inplace op, a random op: dropping it would shift the generator's stream
 * from eager's). The source program was pruned the same way before it was
 * lowered (executor.c, mark_live); what this pass finds are the ops a
 * backward rule traced whose results nothing reads, and the producers of
 * constants the folding pass replaced. */
#include <stdlib.h>

#include "passes.h"

static bool has_effects(const pd_operator *op) {
  if (op->n_out == 0) return true;
  if (op->op_id < 0) return false; /* assign_value, a fused op, a grad op: their outputs only */
  return (pd_op_table[op->op_id]->flags & (PD_OPF_INPLACE | PD_OPF_RANDOM)) != 0;
}

pd_status pd_pass_remove_dead_ops(pd_pass_ctx *c) {
  pd_static_block *b = c->b;
  bool *needed = calloc((size_t)b->n_vars + 1, sizeof *needed);
  bool *drop = calloc((size_t)b->n_ops + 1, sizeof *drop);
  if (!needed || !drop) {
    free(needed), free(drop);
    return pd_set_error(PD_ERR_MEMORY, "Executor: out of memory removing dead ops");
  }
  for (int i = 0; i < c->n_fetch; i++) {
    int s = c->fetch[i] ? pd_pass_slot(c, c->fetch[i]) : -1;
    if (s >= 0) needed[s] = true;
  }
  int removed = 0;
  for (int k = b->n_ops - 1; k >= 0; k--) {
    const pd_operator *op = b->ops[k];
    bool live = has_effects(op);
    for (int j = 0; j < op->n_out && !live; j++) {
      int s = pd_pass_slot(c, op->outputs[j]);
      live = s >= 0 && (needed[s] || b->vars[s]->persistable);
    }
    drop[k] = !live;
    removed += !live;
    for (int i = 0; i < op->n_in && live; i++) {
      int s = pd_pass_slot(c, op->inputs[i]);
      if (s >= 0) needed[s] = true;
    }
  }
  if (removed) pd_pass_drop_ops(b, drop);
  c->stats->removed += removed;
  free(needed), free(drop);
  return PD_OK;
}
