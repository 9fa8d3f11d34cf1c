/* Program.clone(for_test=True): the ops of an inference Program. Paddle
 * sets is_test on the ops it clones; here the ops that behave differently
 * in training are replaced by their inference form while the block is
 * copied:
 *   dropout (upscale_in_train)   -> scale 1 (identity)
 *   dropout (downscale_in_infer) -> scale (1 - p)
 *   alpha_dropout                -> scale 1
 *   batch_norm (batch statistics) -> batch_norm_infer on the running mean
 *                                    and variance the training form updates
 * Backward and optimizer ops are dropped, and so is every op that reads a
 * value only the training form made (the dropout mask, the batch mean and
 * variance: batch norm's running-statistics update). */
#include <stdlib.h>
#include <string.h>

#include "static_internal.h"

static bool is_dead(const pd_test_dead *d, const char *name) {
  for (int i = 0; i < d->n; i++)
    if (strcmp(d->names[i], name) == 0) return true;
  return false;
}

static pd_status mark_dead(pd_test_dead *d, const char *name) {
  if (is_dead(d, name)) return PD_OK;
  if (d->n == d->cap) {
    int nc = d->cap ? 2 * d->cap : 16;
    const char **p = realloc(d->names, (size_t)nc * sizeof *p);
    if (!p) return pd_set_error(PD_ERR_MEMORY, "clone(for_test): out of memory");
    d->names = p;
    d->cap = nc;
  }
  d->names[d->n++] = name;
  return PD_OK;
}

void pd_test_dead_free(pd_test_dead *d) {
  free(d->names);
  *d = (pd_test_dead){0};
}

/* The running statistic the training batch_norm's output `batch` updates:
 * the second input of the subtract(batch, running) that pd_batch_norm
 * records for it (NULL: none recorded). */
static const char *running_of(const pd_static_block *b, const char *batch) {
  for (int k = 0; k < b->n_ops; k++) {
    const pd_operator *op = b->ops[k];
    if (op->n_in == 2 && strcmp(op->type, "subtract") == 0 && strcmp(op->inputs[0], batch) == 0)
      return op->inputs[1];
  }
  return NULL;
}

static pd_operator *append_like(pd_static_block *dst, const pd_operator *so, const char *type,
                                const char *const *ins, int n_in, const pd_attrs *a) {
  pd_operator *op = pd_ir_append_op(dst, type, ins, n_in, (const char *const *)so->outputs, 1, a);
  if (!op) return NULL;
  op->role = so->role;
  memcpy(op->name_scope, so->name_scope, sizeof op->name_scope);
  memcpy(op->op_device, so->op_device, sizeof op->op_device);
  return op;
}

int pd_ir_copy_op_for_test(pd_static_block *dst, const pd_static_block *src, int k, pd_test_dead *dead) {
  const pd_operator *so = src->ops[k];
  if (so->role & (PD_OP_ROLE_BACKWARD | PD_OP_ROLE_OPTIMIZE)) return 1;
  bool reads_dead = false;
  for (int i = 0; i < so->n_in && !reads_dead; i++) reads_dead = is_dead(dead, so->inputs[i]);
  if (reads_dead) {
    /* an inplace op's first output is its first input: that value lives on */
    bool inplace = so->op_id >= 0 && (pd_op_table[so->op_id]->flags & PD_OPF_INPLACE);
    for (int j = inplace ? 1 : 0; j < so->n_out; j++)
      if (mark_dead(dead, so->outputs[j]) != PD_OK) return -1;
    return 1;
  }
  if (so->grad_of >= 0 || so->n_out < 1) return 0;
  bool dropout = strcmp(so->type, "dropout") == 0, alpha = strcmp(so->type, "alpha_dropout") == 0;
  if (dropout || alpha) {
    /* attrs: f0 p, i0 mode (1: downscale_in_infer) */
    double keep = dropout && so->attrs.i[0] == 1 ? 1.0 - so->attrs.f[0] : 1.0;
    pd_attrs a = {.f = {keep, 0.0}, .i = {1}};
    if (!append_like(dst, so, "scale", (const char *const *)so->inputs, 1, &a)) return -1;
    for (int j = 1; j < so->n_out; j++)
      if (mark_dead(dead, so->outputs[j]) != PD_OK) return -1;
    return 1;
  }
  if (strcmp(so->type, "batch_norm") == 0 && so->n_out == 3) {
    const char *mean = running_of(src, so->outputs[1]), *var = running_of(src, so->outputs[2]);
    if (!mean || !var) return 0; /* no running statistics recorded: stays as it is */
    const char *ins[5] = {so->inputs[0], mean, var};
    int n = 3;
    for (int i = 1; i < so->n_in && n < 5; i++) ins[n++] = so->inputs[i];
    if (!append_like(dst, so, "batch_norm_infer", ins, n, &so->attrs)) return -1;
    if (mark_dead(dead, so->outputs[1]) != PD_OK || mark_dead(dead, so->outputs[2]) != PD_OK) return -1;
    return 1;
  }
  return 0;
}
