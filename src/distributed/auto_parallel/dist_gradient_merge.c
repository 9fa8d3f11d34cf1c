/* Strategy.gradient_merge as a rewrite of the recorded train Program
 * (between record and complete, dist_program.h): the gradients of k_steps
 * calls are summed into persistable buffers and the optimizer runs on
 * every k-th call only (Paddle's auto_parallel_gradient_merge pass). Two
 * Programs come out of the serial one:
 *
 *   accumulate (calls 1..k-1): forward, loss, backward, then for each
 *              updated parameter p with gradient g: add_(p@GRAD@MERGED, g);
 *   update     (call k):       the same, then with avg scale_(merged, 1/k),
 *              the optimizer's ops reading the merged gradients instead of
 *              g (its clipping included), then fill_(merged, 0).
 *
 * A merged buffer takes its parameter's placements (add_ writes it where it
 * is; g is resharded into them as the update would have), and its zero
 * initial value comes from the startup program. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist_program.h"
#include "paddlec/creation.h"

enum { GM_MAX = 256 };

typedef struct merged {
  char grad[PD_AP_NAME_LEN], buf[PD_AP_NAME_LEN + 16];
} merged;

/* The persistable zero buffer of parameter pv's gradient gv, in main (with
 * pv's dist attr) and, with its initial value, in startup. */
static pd_status add_buffer(pd_ap_program *p, const pd_variable *pv, const pd_variable *gv,
                            const char *name) {
  pd_variable *v = pd_ir_add_var(p->main->blocks[0], name, gv->dtype, pv->ndim, pv->shape, NULL);
  pd_variable *sv =
      v ? pd_ir_add_var(p->startup->blocks[0], name, gv->dtype, pv->ndim, pv->shape, NULL) : NULL;
  if (!sv) return pd_last_status();
  v->persistable = sv->persistable = true;
  v->stop_gradient = sv->stop_gradient = true;
  const pd_dist_attr *pa = pd_ap_var_attr(pv);
  if (pa) {
    pd_dist_attr *a = pd_ap_attr_copy(pa);
    if (!a) return pd_last_status();
    pd_ap_var_set_attr(v, a);
  }
  pd_tensor *zero = pd_full(pv->ndim, pv->shape, 0.0, gv->dtype);
  const char *outs[1] = {name};
  pd_operator *op = zero ? pd_ir_append_op(p->startup->blocks[0], PD_STATIC_ASSIGN_VALUE, NULL, 0, outs, 1,
                                           &(pd_attrs){.dtype = gv->dtype})
                         : NULL;
  if (!op) {
    pd_tensor_release(zero);
    return pd_last_status();
  }
  op->value = zero;
  return PD_OK;
}

/* Appends the in-place op `type`(buf[, grad]) for every merged gradient. */
static pd_status append_each(pd_static_block *b, const char *type, const merged *m, int n, bool with_grad,
                             const pd_attrs *attrs) {
  for (int i = 0; i < n; i++) {
    const char *ins[2] = {m[i].buf, m[i].grad}, *outs[1] = {m[i].buf};
    pd_operator *op = pd_ir_append_op(b, type, ins, with_grad ? 2 : 1, outs, 1, attrs);
    if (!op) return pd_last_status();
    op->role = PD_OP_ROLE_OPTIMIZE;
  }
  return PD_OK;
}

/* Copies src's ops from `from` on into b, their reads of a gradient turned
 * into reads of its merged buffer. */
static pd_status copy_updates(pd_static_block *b, const pd_static_block *src, int from, const merged *m,
                              int n) {
  for (int k = from; k < src->n_ops; k++) {
    pd_operator *op = pd_ir_copy_op(b, src->ops[k]);
    if (!op) return pd_last_status();
    for (int i = 0; i < op->n_in; i++)
      for (int j = 0; j < n; j++) {
        if (strcmp(op->inputs[i], m[j].grad) != 0) continue;
        if (pd_ir_set_slot(&op->inputs[i], m[j].buf) != PD_OK) return pd_last_status();
        break;
      }
  }
  return PD_OK;
}

pd_status pd_ap_gradient_merge(pd_ap_program *serial, int k_steps, bool avg, pd_ap_program *acc) {
  memset(acc, 0, sizeof *acc);
  pd_static_block *b = serial->main->blocks[0];
  int first = b->n_ops;
  for (int k = 0; k < b->n_ops && first == b->n_ops; k++)
    if (b->ops[k]->role & PD_OP_ROLE_OPTIMIZE) first = k;
  for (int k = first; k < b->n_ops; k++)
    if (!(b->ops[k]->role & PD_OP_ROLE_OPTIMIZE))
      return pd_set_error(
          PD_ERR_UNIMPLEMENTED,
          "Strategy.gradient_merge: op %d (%s) follows the optimizer's ops; the train Program "
          "must end with them",
          k, b->ops[k]->type);
  merged *m = calloc(GM_MAX, sizeof *m);
  if (!m) return pd_set_error(PD_ERR_MEMORY, "gradient_merge: out of memory");
  int n = 0;
  pd_status st = PD_OK;
  for (int k = first; k < b->n_ops && st == PD_OK; k++) {
    const pd_operator *op = b->ops[k];
    if (op->op_id < 0 || !pd_ap_is_update_op((pd_op_id)op->op_id) || op->n_in < 2) continue;
    const pd_variable *pv = pd_ir_find_var(b, op->inputs[0]), *gv = pd_ir_find_var(b, op->inputs[1]);
    if (!pv || !gv || n == GM_MAX || strlen(gv->name) >= PD_AP_NAME_LEN) {
      st = pd_set_error(PD_ERR_UNIMPLEMENTED,
                        "Strategy.gradient_merge: cannot merge the gradient of %s's op %d", op->type, k);
      break;
    }
    snprintf(m[n].grad, sizeof m[n].grad, "%s", gv->name);
    snprintf(m[n].buf, sizeof m[n].buf, "%s@GRAD@MERGED", pv->name);
    st = add_buffer(serial, pv, gv, m[n].buf);
    n++;
  }
  if (st == PD_OK && n == 0)
    st = pd_set_error(PD_ERR_STATE, "Strategy.gradient_merge: the train Program updates no parameter");
  /* accumulate: everything before the optimizer, then the sums */
  if (st == PD_OK) {
    acc->main = pd_ir_clone(serial->main, false);
    acc->mesh = pd_dist_process_mesh_retain(serial->mesh);
    acc->n_feed = serial->n_feed;
    acc->n_fetch = serial->n_fetch;
    memcpy(acc->feed, serial->feed, sizeof acc->feed);
    memcpy(acc->fetch, serial->fetch, sizeof acc->fetch);
    if (!acc->main) st = pd_last_status();
  }
  /* update: the sums, the average, the optimizer on the sums, the reset;
   * the optimizer's ops are copied back from the clone */
  pd_attrs scale = {.f = {1.0 / k_steps, 0.0}, .i = {1}}, zero = {.f = {0.0}};
  if (st == PD_OK) {
    pd_ir_truncate_ops(b, first);
    st = append_each(b, "add_", m, n, true, NULL);
  }
  if (st == PD_OK && avg) st = append_each(b, "scale_", m, n, false, &scale);
  if (st == PD_OK) st = copy_updates(b, acc->main->blocks[0], first, m, n);
  if (st == PD_OK) st = append_each(b, "fill_", m, n, false, &zero);
  if (st == PD_OK) {
    pd_ir_truncate_ops(acc->main->blocks[0], first);
    st = append_each(acc->main->blocks[0], "add_", m, n, true, NULL);
  }
  pd_ir_touch(serial->main);
  free(m);
  if (st != PD_OK) pd_ap_program_free(acc);
  return st;
}
