/* dropout + add fusion (Paddle's fused_dropout_add pass): a dropout whose
 * result is read by one add only, y = add(dropout(x), r) with r of the
 * same shape, becomes one fused op fused_dropout_add(x, r) -> (y, mask)
 * that draws the mask, scales x and adds r in one pass over memory; the
 * dropout's result is never stored. The mask stays an output (the
 * backward multiplies by it).
 *
 * The fused op runs at the add's place with the dropout kernel's draws
 * (pd_dropout_add_run): it takes the same counters from the generator as
 * the dropout would, so no other op drawing random numbers may lie between
 * the two (it would take its counters first), nor an op that may modify a
 * value in place (x could change before the moved dropout reads it), nor a
 * reader of the mask. Then the results, the mask and the generator's state
 * after the step are the same bits as unfused. Only the plain form is
 * fused: no axes, float32 or float64, known equal shapes. */
#include <stdlib.h>
#include <string.h>

#include "../ops/nn/dropout_add.h"
#include "paddlec/manipulation.h"
#include "passes.h"

typedef struct dropout_add {
  pd_fused_op base;
  pd_attrs attrs; /* the dropout's */
  pd_ew_fn add;
  double add_p[PD_ATTR_FLOATS];
  bool r_first; /* add(r, dropout(x)) */
} dropout_add;

static void dropout_add_release(pd_fused_op *f) { free(f); }

/* in: x, r; out: y, mask. */
static pd_status dropout_add_exec(const pd_fused_op *f, pd_tensor *const *in, int n_in, pd_tensor *const *out,
                                  int n_out) {
  const dropout_add *d = (const dropout_add *)f;
  (void)n_in, (void)n_out;
  pd_tensor *x = in[0], *r = in[1], *xc = NULL, *rc = NULL;
  if (!x->is_contiguous && !(x = xc = pd_contiguous(x))) return pd_last_status();
  if (!r->is_contiguous && !(r = rc = pd_contiguous(r))) {
    pd_tensor_release(xc);
    return pd_last_status();
  }
  pd_status st = pd_dropout_add_run(&d->attrs, x, r, d->r_first, d->add, d->add_p, out[0], out[1]);
  pd_tensor_release(xc);
  pd_tensor_release(rc);
  return st;
}

/* Whether an op between from and to (exclusive) draws random numbers or
 * reads name. */
static bool blocked(const pd_static_block *b, int from, int to, const char *name) {
  for (int k = from + 1; k < to; k++) {
    const pd_operator *op = b->ops[k];
    if (op->op_id >= 0 && (pd_op_table[op->op_id]->flags & PD_OPF_RANDOM)) return true;
    if (op->fused && op->fused->release == dropout_add_release) return true;
    for (int i = 0; i < op->n_in; i++)
      if (strcmp(op->inputs[i], name) == 0) return true;
  }
  return false;
}

/* The add reading dropout op k's result, or -1 when the pair cannot fuse. */
static int fusable_add(pd_pass_ctx *c, const int *readers, int k, int *r_slot, bool *r_first) {
  pd_static_block *b = c->b;
  const pd_operator *d = b->ops[k];
  /* shared-mask axes, or a shard of a larger tensor (its draws follow the
   * global indices), keep the plain dropout */
  if (d->n_in != 1 || d->n_out != 2 || d->attrs.nv[0] != 0 || d->attrs.nv[1] != 0) return -1;
  int xs = pd_pass_slot(c, d->inputs[0]), ys = pd_pass_slot(c, d->outputs[0]),
      ms = pd_pass_slot(c, d->outputs[1]);
  if (xs < 0 || ys < 0 || ms < 0 || readers[ys] != 1 || pd_pass_is_fetched(c, d->outputs[0])) return -1;
  const pd_variable *x = b->vars[xs], *y = b->vars[ys], *m = b->vars[ms];
  if ((x->dtype != PD_FLOAT32 && x->dtype != PD_FLOAT64) || y->persistable || !pd_pass_same_shape(x, y) ||
      !pd_pass_same_shape(x, m))
    return -1;
  int a = k + 1;
  while (a < b->n_ops) {
    const pd_operator *op = b->ops[a];
    bool found = false;
    for (int i = 0; i < op->n_in; i++) found = found || strcmp(op->inputs[i], d->outputs[0]) == 0;
    if (found) break;
    a++;
  }
  if (a == b->n_ops) return -1;
  const pd_operator *add = b->ops[a];
  if (add->op_id != PD_OP_add || add->fused || add->n_in != 2 || add->n_out != 1 ||
      strcmp(add->inputs[0], add->inputs[1]) == 0)
    return -1;
  *r_first = strcmp(add->inputs[1], d->outputs[0]) == 0;
  int rs = pd_pass_slot(c, add->inputs[*r_first ? 0 : 1]), os = pd_pass_slot(c, add->outputs[0]);
  if (rs < 0 || os < 0 || b->vars[rs]->dtype != x->dtype || b->vars[os]->dtype != x->dtype ||
      !pd_pass_same_shape(b->vars[rs], x) || !pd_pass_same_shape(b->vars[os], x))
    return -1;
  if (pd_pass_inplace_between(b, k, a) || blocked(b, k, a, d->outputs[1])) return -1;
  *r_slot = rs;
  return a;
}

pd_status pd_pass_fuse_dropout_add(pd_pass_ctx *c) {
  pd_static_block *b = c->b;
  int no = b->n_ops;
  bool *drop = calloc((size_t)no + 1, sizeof *drop);
  int *readers = pd_pass_count_readers(c);
  pd_status st = drop && readers ? PD_OK : pd_set_error(PD_ERR_MEMORY, "Executor: out of memory fusing ops");
  for (int k = 0; k < no && st == PD_OK; k++) {
    const pd_operator *d = b->ops[k];
    if (d->op_id != PD_OP_dropout || d->fused || drop[k]) continue;
    int rs;
    bool r_first;
    int a = fusable_add(c, readers, k, &rs, &r_first);
    if (a < 0) continue;
    const pd_operator *add = b->ops[a];
    pd_dtype dt[2] = {b->vars[rs]->dtype, b->vars[rs]->dtype};
    dropout_add *f = calloc(1, sizeof *f);
    if (!f) {
      st = pd_set_error(PD_ERR_MEMORY, "Executor: out of memory fusing ops");
      break;
    }
    f->base.run = dropout_add_exec;
    f->base.release = dropout_add_release;
    f->base.n_ops = 2;
    f->attrs = d->attrs;
    f->r_first = r_first;
    f->add = pd_op_table[PD_OP_add]->ew_fn(&add->attrs, dt, f->add_p);
    if (!f->add) {
      free(f);
      continue;
    }
    const char *ins[2] = {d->inputs[0], b->vars[rs]->name}, *outs[2] = {add->outputs[0], d->outputs[1]};
    pd_operator *op = pd_ir_append_fused_op(b, "fused_dropout_add", ins, 2, outs, 2, &f->base);
    if (!op) {
      st = pd_last_status();
      break;
    }
    op->role = add->role;
    pd_pass_replace_op(b, a); /* the fused op takes the add's place; the dropout is dropped */
    drop[k] = true;
    c->stats->dropout_adds++;
  }
  if (st == PD_OK) pd_pass_drop_ops(b, drop);
  free(drop);
  free(readers);
  return st;
}
