/* dist.to_static, stage 2 (complete): every Variable of the Program gets a
 * dist attr and every op input the placements its op's SPMD rule wants.
 *
 * The serial Program is first lowered on its global shapes (the Executor's
 * lowering, pd_static_lower): each grad op becomes the registry ops of its
 * backward rule, which are the ops the eager DTensor path runs backward, so
 * one set of rules (the forward rules, spmd_rules.c, on global metas)
 * places forward and backward alike. Then the ops are walked in order: the
 * inputs' placements (data and parameters from record, the rest from the
 * ops that wrote them; constants replicated) go through the op's rule,
 * whose wanted input placements are kept for partition and whose output
 * placements become the outputs' dist attrs. An op without a rule gets
 * replicated inputs and outputs, as in eager. An op whose rule asks for a
 * local step (the plain op on the shards would be wrong) is marked for
 * partition, which emits the op of that step, where the step is one op;
 * otherwise it runs replicated. */
#include <stdlib.h>
#include <string.h>

#include "dist_program.h"

void pd_ap_completion_free(pd_ap_completion *c) {
  if (!c) return;
  free(c->want);
  free(c->want_off);
  free(c->local);
  memset(c, 0, sizeof *c);
}

/* serial lowered on its global shapes into *low (registry ops only). */
static pd_status lower_global(const pd_ap_program *serial, pd_program **low, pd_ap_program *out) {
  const pd_static_block *gb = serial->main->blocks[0];
  pd_var_scope *sc = pd_static_scope();
  bool *live = calloc((size_t)gb->n_ops + 1, sizeof *live);
  int fetch[PD_AP_MAX_FETCH];
  const char *fetch_names[PD_AP_MAX_FETCH];
  pd_static_feed feeds[2];
  pd_status st = sc && live ? PD_OK : pd_set_error(PD_ERR_MEMORY, "dist.to_static: out of memory");
  for (int k = 0; live && k < gb->n_ops; k++) live[k] = true;
  for (int s = 0; s < gb->n_vars && st == PD_OK; s++)
    if (gb->vars[s]->persistable) st = pd_var_scope_set_var(sc, gb->vars[s]->name, gb->vars[s]->tensor);
  for (int i = 0; i < serial->n_feed && st == PD_OK; i++) {
    pd_variable *v = pd_ir_find_var(gb, serial->feed[i]);
    feeds[i] = (pd_static_feed){v ? v->name : serial->feed[i], v ? v->tensor : NULL};
    if (!v) st = pd_set_error(PD_ERR_STATE, "dist.to_static: no feed Variable '%s'", serial->feed[i]);
  }
  for (int i = 0; i < serial->n_fetch && st == PD_OK; i++) {
    fetch[i] = -1;
    for (int s = 0; s < gb->n_vars; s++)
      if (strcmp(gb->vars[s]->name, serial->fetch[i]) == 0) fetch[i] = s;
    if (fetch[i] < 0)
      st = pd_set_error(PD_ERR_STATE, "dist.to_static: no fetch Variable '%s'", serial->fetch[i]);
  }
  if (st == PD_OK)
    st = pd_static_lower(serial->main, live, feeds, serial->n_feed, fetch, serial->n_fetch, sc, low,
                         fetch_names);
  for (int i = 0; i < serial->n_fetch && st == PD_OK; i++)
    snprintf(out->fetch[i], PD_AP_NAME_LEN, "%s", fetch_names[i]);
  out->n_fetch = serial->n_fetch;
  free(live);
  pd_var_scope_release(sc);
  return st;
}

static void var_meta(const pd_variable *v, pd_meta *m) {
  m->dtype = v->dtype;
  m->ndim = v->ndim;
  memcpy(m->shape, v->shape, sizeof(int64_t) * (size_t)v->ndim);
}

static pd_status var_dist(const pd_variable *v, const pd_dist_process_mesh *mesh, pd_spmd_dist *d) {
  const pd_dist_attr *a = pd_ap_var_attr(v);
  if (a && !pd_dist_process_mesh_equal(a->mesh, mesh)) {
    char b1[256], b2[256];
    return pd_set_error(PD_ERR_UNIMPLEMENTED, "dist.to_static: '%s' is on mesh %s, the model on %s", v->name,
                        pd_ap_mesh_str(a->mesh, b1, sizeof b1), pd_ap_mesh_str(mesh, b2, sizeof b2));
  }
  pd_ap_to_spmd(a ? a->p : NULL, a ? a->n : 0, v->ndim, d);
  return PD_OK;
}

/* An update op's accumulators (persistable, shaped like the parameter, not
 * placed yet) are the parameter's shards: they take its attr, as eager's
 * shard_optimizer gives them. */
static void adopt_accumulators(pd_variable *const *vin, int n_in) {
  const pd_dist_attr *pa = pd_ap_var_attr(vin[0]);
  for (int i = 2; pa && i < n_in; i++) {
    pd_variable *v = vin[i];
    if (v->dist_attr || !v->persistable || v->ndim != pa->ndim || !pd_shape_eq(v->ndim, v->shape, pa->shape))
      continue;
    pd_dist_attr *c = pd_ap_attr_copy(pa);
    if (c) pd_ap_var_set_attr(v, c);
  }
}

static pd_status complete_op(const pd_static_block *b, const pd_operator *op, pd_dist_process_mesh *mesh,
                             pd_spmd_dist *want, bool *local) {
  if (op->op_id < 0) {
    if (op->value) return PD_OK; /* a constant: replicated */
    return pd_set_error(PD_ERR_UNIMPLEMENTED,
                        "dist.to_static: cannot place op %s (a grad op whose rule reads values, or control "
                        "flow)",
                        op->type);
  }
  pd_op_id id = (pd_op_id)op->op_id;
  const pd_op_def *def = pd_op_table[id];
  if (op->n_in > PD_MAX_OUTPUTS || op->n_out > PD_MAX_OUTPUTS)
    return pd_set_error(PD_ERR_INVALID, "dist.to_static: %s has too many inputs or outputs", op->type);
  pd_variable *vin[PD_MAX_OUTPUTS], *vout[PD_MAX_OUTPUTS];
  pd_meta im[PD_MAX_OUTPUTS], om[PD_MAX_OUTPUTS];
  pd_spmd_dist din[PD_MAX_OUTPUTS], dout[PD_MAX_OUTPUTS];
  for (int i = 0; i < op->n_in; i++)
    if (!(vin[i] = pd_ir_find_var(b, op->inputs[i])))
      return pd_set_error(PD_ERR_STATE, "dist.to_static: %s reads unknown '%s'", op->type, op->inputs[i]);
  for (int k = 0; k < op->n_out; k++)
    if (!(vout[k] = pd_ir_find_var(b, op->outputs[k])))
      return pd_set_error(PD_ERR_STATE, "dist.to_static: %s writes unknown '%s'", op->type, op->outputs[k]);
  if (pd_ap_is_update_op(id)) adopt_accumulators(vin, op->n_in);
  pd_status st = PD_OK;
  for (int i = 0; i < op->n_in && st == PD_OK; i++) {
    var_meta(vin[i], &im[i]);
    st = var_dist(vin[i], mesh, &din[i]);
    want[i] = din[i];
  }
  for (int k = 0; k < op->n_out; k++) {
    var_meta(vout[k], &om[k]);
    pd_ap_to_spmd(NULL, 0, om[k].ndim, &dout[k]);
  }
  if (st != PD_OK) return st;
  pd_spmd_args args = {.def = def,
                       .attrs = &op->attrs,
                       .n_in = op->n_in,
                       .n_out = op->n_out,
                       .mesh_ndim = mesh->ndim,
                       .mesh_shape = mesh->shape,
                       .in_meta = im,
                       .out_meta = om,
                       .in = din,
                       .in_want = want,
                       .out = dout};
  pd_spmd_fn rule = pd_ap_rule_of(id);
  if ((st = (rule ? rule : pd_ap_rule_replicated)(&args)) != PD_OK) return st;
  /* The plain op on these shards would be wrong. Where the rule's local
   * step is one op, partition writes that op (pd_ap_local_op); elsewhere
   * a Program has no op for the step, and the op runs replicated, as one
   * without a rule (an inplace op cannot: it writes its input where it is). */
  bool one_op = args.local == pd_ap_local_step;
  if (args.local && !one_op && !(def->flags & PD_OPF_INPLACE)) {
    args.local = NULL;
    if ((st = pd_ap_rule_replicated(&args)) != PD_OK) return st;
  }
  if (args.local && !one_op)
    return pd_set_error(PD_ERR_UNIMPLEMENTED,
                        "dist.to_static: %s on these placements needs its rule's local step (as eager runs "
                        "it), which a static Program cannot hold yet",
                        op->type);
  *local = args.local != NULL;
  for (int k = 0; k < op->n_out; k++) {
    if (k == 0 && (def->flags & PD_OPF_INPLACE)) continue; /* x keeps its attr */
    pd_dist_placement p[PD_DIST_MAX_MESH_DIMS];
    pd_ap_from_spmd(&dout[k], mesh->ndim, om[k].ndim, p);
    pd_dist_attr *a = pd_ap_attr_new(mesh, p, om[k].ndim, om[k].shape);
    if (!a) return pd_last_status();
    pd_ap_var_set_attr(vout[k], a);
  }
  return PD_OK;
}

pd_status pd_ap_complete(const pd_ap_program *serial, pd_ap_program *out, pd_ap_completion *c) {
  memset(out, 0, sizeof *out);
  memset(c, 0, sizeof *c);
  pd_program *low = NULL;
  pd_status st = lower_global(serial, &low, out);
  if (st != PD_OK) {
    pd_error_prefix("dist.to_static: lowering the serial program");
    return st;
  }
  out->main = low;
  out->mesh = pd_dist_process_mesh_retain(serial->mesh);
  out->n_feed = serial->n_feed;
  memcpy(out->feed, serial->feed, sizeof out->feed);
  pd_static_block *b = low->blocks[0];
  const pd_static_block *sb = serial->main->blocks[0];
  /* the placements record gave */
  for (int s = 0; s < b->n_vars && st == PD_OK; s++) {
    const pd_variable *sv = pd_ir_find_var(sb, b->vars[s]->name);
    const pd_dist_attr *sa = sv ? pd_ap_var_attr(sv) : NULL;
    pd_dist_attr *a = sa ? pd_ap_attr_copy(sa) : NULL;
    if (sa && !a) st = pd_last_status();
    if (a) pd_ap_var_set_attr(b->vars[s], a);
  }
  int total = 0;
  for (int k = 0; k < b->n_ops; k++) total += b->ops[k]->n_in;
  c->n_ops = b->n_ops;
  c->want = calloc((size_t)total + 1, sizeof *c->want);
  c->want_off = calloc((size_t)b->n_ops + 1, sizeof *c->want_off);
  c->local = calloc((size_t)b->n_ops + 1, sizeof *c->local);
  if (st == PD_OK && (!c->want || !c->want_off || !c->local))
    st = pd_set_error(PD_ERR_MEMORY, "dist.to_static: out of memory");
  for (int k = 0, off = 0; k < b->n_ops && st == PD_OK; k++) {
    c->want_off[k] = off;
    st = complete_op(b, b->ops[k], out->mesh, c->want + off, &c->local[k]);
    off += b->ops[k]->n_in;
  }
  if (st != PD_OK) {
    pd_ap_program_free(out);
    pd_ap_completion_free(c);
  }
  return st;
}
