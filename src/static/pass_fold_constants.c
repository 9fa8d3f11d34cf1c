/* Constant folding: an op whose inputs are all constants (assign_value
 * results, or none at all: full) runs once, here, and becomes an
 * assign_value of its result. Backward rules produce many such chains
 * (mean_grad's full, reshape, expand, scale(1/n); the zeros and scalar
 * fills of relu's and where's gradients), which a plan would otherwise
 * compute on every run.
 *
 * Persistable variables are not folded even when no op of the plan writes
 * them: a scope's values change between runs behind the plan's back (an
 * LRScheduler sets its rate before every run, set_program_state and
 * pd_var_scope_set_var replace values), and the plan is cached across runs.
 *
 * Random ops (a different draw every run) and inplace ops stay. An op with
 * several outputs stays (none of the chains above has one).
 *
 * Afterwards every constant that no op modifies in place, no fetch returns
 * and no scope stores (a persistable variable's) is marked shared: the run uses the folded tensor itself
 * instead of a copy, so a constant costs nothing per step. */
#include <stdlib.h>

#include "passes.h"

static bool foldable(const pd_operator *op) {
  if (op->op_id < 0 || op->fused || op->n_out != 1 || op->n_in > PD_MAX_OUTPUTS) return false;
  return (pd_op_table[op->op_id]->flags & (PD_OPF_INPLACE | PD_OPF_RANDOM)) == 0;
}

/* Replaces op k of b (its one output named out) by assign_value of v. */
static pd_status replace_by_constant(pd_static_block *b, int k, pd_tensor *v) {
  const char *outs[1] = {b->ops[k]->outputs[0]};
  int role = b->ops[k]->role;
  pd_operator *a = pd_ir_append_op(b, PD_STATIC_ASSIGN_VALUE, NULL, 0, outs, 1, NULL);
  if (!a) return pd_last_status();
  a->value = pd_tensor_retain(v);
  a->role = role;
  pd_pass_replace_op(b, k);
  return PD_OK;
}

/* Marks the constants no op writes and no fetch returns as shared. */
static void mark_shared(pd_pass_ctx *c) {
  pd_static_block *b = c->b;
  int *root = malloc(sizeof(int) * ((size_t)b->n_vars + 1));
  bool *unsafe = calloc((size_t)b->n_vars + 1, sizeof(bool));
  if (!root || !unsafe) {
    free(root), free(unsafe);
    pd_clear_error();
    return; /* nothing shared: correct, one copy per run */
  }
  for (int s = 0; s < b->n_vars; s++) root[s] = s;
  for (int k = 0; k < b->n_ops; k++) {
    const pd_operator *op = b->ops[k];
    if (op->op_id < 0 || op->n_in < 1) continue;
    unsigned fl = pd_op_table[op->op_id]->flags;
    int in0 = pd_pass_slot(c, op->inputs[0]);
    if (in0 < 0) continue;
    if (fl & PD_OPF_VIEW)
      for (int j = 0; j < op->n_out; j++) {
        int s = pd_pass_slot(c, op->outputs[j]);
        if (s >= 0) root[s] = root[in0];
      }
    if (fl & PD_OPF_INPLACE) unsafe[root[in0]] = true;
  }
  for (int i = 0; i < c->n_fetch; i++) {
    int s = c->fetch[i] ? pd_pass_slot(c, c->fetch[i]) : -1;
    if (s >= 0) unsafe[root[s]] = true;
  }
  for (int k = 0; k < b->n_ops; k++) {
    pd_operator *op = b->ops[k];
    if (op->op_id >= 0 || op->grad_of >= 0 || op->fused || !op->value || op->n_out != 1) continue;
    int s = pd_pass_slot(c, op->outputs[0]);
    /* a persistable variable's value goes to the scope, where updates
     * modify it: it must be a copy of its own */
    op->shared_value = s >= 0 && !unsafe[s] && !b->vars[s]->persistable;
  }
  free(root), free(unsafe);
}

pd_status pd_pass_fold_constants(pd_pass_ctx *c) {
  pd_static_block *b = c->b;
  /* per slot: its constant value (borrowed from the assign_value op), or NULL */
  pd_tensor **constant = calloc((size_t)b->n_vars + 1, sizeof *constant);
  if (!constant) return pd_set_error(PD_ERR_MEMORY, "Executor: out of memory folding constants");
  pd_status st = PD_OK;
  for (int k = 0; k < b->n_ops && st == PD_OK; k++) {
    const pd_operator *op = b->ops[k];
    int out = op->n_out == 1 ? pd_pass_slot(c, op->outputs[0]) : -1;
    if (op->op_id < 0 && op->grad_of < 0 && !op->fused && op->value) {
      if (out >= 0) constant[out] = op->value;
      continue;
    }
    /* what any other op writes is no constant from here on: an inplace op
     * (add_ on a full's result) writes a new value under the same name */
    for (int j = 0; j < op->n_out; j++) {
      int s = pd_pass_slot(c, op->outputs[j]);
      if (s >= 0) constant[s] = NULL;
    }
    if (out < 0 || b->vars[out]->persistable || !foldable(op)) continue;
    pd_tensor *in[PD_MAX_OUTPUTS];
    bool all = true;
    for (int i = 0; i < op->n_in && all; i++) {
      int s = pd_pass_slot(c, op->inputs[i]);
      all = s >= 0 && constant[s];
      if (all) in[i] = constant[s];
    }
    if (!all) continue;
    pd_tensor *res[PD_MAX_OUTPUTS];
    int n = 0;
    if (pd_dispatch((pd_op_id)op->op_id, in, op->n_in, &op->attrs, res, &n) != PD_OK) {
      pd_clear_error(); /* it fails again when it runs, where the error belongs */
      continue;
    }
    if (n == 1) st = replace_by_constant(b, k, res[0]);
    if (n == 1 && st == PD_OK) {
      constant[out] = b->ops[k]->value;
      c->stats->folded++;
    }
    for (int j = 0; j < n; j++) pd_tensor_release(res[j]);
  }
  free(constant);
  if (st == PD_OK) mark_shared(c);
  return st;
}
