/* Strategy.sharding stages 1 and 2 as a rewrite of the completed train
 * Program (between complete and partition, dist_program.h), the static
 * form of shard_optimizer's ShardingStage1/2 (shard_optimizer.c) with the
 * same split: each parameter P replicated on the sharding axis is updated
 * as its sharded placement S (pd_ap_sharded_placements: Shard(d) on that
 * axis), so every rank of the axis keeps and updates 1/n of it:
 *
 *   assign(P) -> P@SHARD            wanted as S: partition slices P first;
 *   <update>_(P@SHARD, G, ..., M..) G and the accumulators M wanted as S:
 *                                   M are held as S (1/n of the states),
 *                                   G reduced to its shard (stage 1:
 *                                   c_allreduce then a slice, as Paddle's
 *                                   stage 1 all-reduces; stage 2: one
 *                                   c_reduce_scatter);
 *   copy_(P, P@SHARD)               P@SHARD wanted as P is: partition
 *                                   all-gathers the updated shards into P.
 *
 * Paddle's static pass assigns whole parameters to owner ranks and
 * broadcasts them back; splitting each parameter instead keeps one
 * ownership rule for eager and static and balances the states exactly. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist_program.h"

/* The rewrite's new op list and completion, filled in order. */
typedef struct rewrite {
  pd_operator **ops;
  pd_spmd_dist *want;
  int *off;
  bool *local;
  int n_ops, n_want;
} rewrite;

/* Appends op (already in the block) with its inputs' wanted placements
 * and whether partition writes its rule's local step. */
static void emit(rewrite *r, pd_operator *op, const pd_spmd_dist *want, bool local) {
  r->ops[r->n_ops] = op;
  r->local[r->n_ops] = local;
  r->off[r->n_ops++] = r->n_want;
  for (int i = 0; i < op->n_in; i++) r->want[r->n_want++] = want[i];
}

/* Whether v has the parameter's global shape. */
static bool param_shaped(const pd_variable *v, const pd_variable *pv) {
  return v && v->ndim == pv->ndim && pd_shape_eq(v->ndim, v->shape, pv->shape);
}

/* Sets v's dist attr to placements p (v's global shape). */
static pd_status place_var(pd_variable *v, pd_dist_process_mesh *mesh, const pd_dist_placement *p) {
  pd_dist_attr *a = pd_ap_attr_new(mesh, p, v->ndim, v->shape);
  if (!a) return pd_last_status();
  pd_ap_var_set_attr(v, a);
  return PD_OK;
}

/* Rewrites update op `op` (its wanted input placements `want`) into
 * assign, the update on the shard, copy_; false in *done when its parameter
 * stays whole. */
static pd_status shard_update(pd_ap_program *p, int axis, pd_operator *op, const pd_spmd_dist *want,
                              rewrite *r, bool *done) {
  *done = false;
  pd_static_block *b = p->main->blocks[0];
  pd_dist_process_mesh *mesh = p->mesh;
  pd_variable *pv = op->n_in >= 2 && op->n_out >= 1 ? pd_ir_find_var(b, op->inputs[0]) : NULL;
  if (!pv || strcmp(op->outputs[0], op->inputs[0]) != 0) return PD_OK;
  pd_dist_placement a[PD_DIST_MAX_MESH_DIMS], s[PD_DIST_MAX_MESH_DIMS];
  const pd_dist_attr *pa = pd_ap_var_attr(pv);
  for (int m = 0; m < mesh->ndim; m++) a[m] = pa ? pa->p[m] : pd_dist_replicate();
  pd_dist_attr whole = {.mesh = mesh, .n = mesh->ndim, .ndim = pv->ndim};
  memcpy(whole.p, a, sizeof a);
  memcpy(whole.shape, pv->shape, sizeof(int64_t) * (size_t)pv->ndim);
  if (!pd_ap_sharded_placements(axis, &whole, s) || pv->shape[s[axis].dim] % mesh->shape[axis] != 0)
    return PD_OK;
  char name[PD_AP_NAME_LEN];
  if (snprintf(name, sizeof name, "%s@SHARD", pv->name) >= (int)sizeof name)
    return PD_OK; /* a name too long to derive: the parameter stays whole */
  pd_variable *sv = pd_ir_add_var(b, name, pv->dtype, pv->ndim, pv->shape, NULL);
  if (!sv) return pd_last_status();
  sv->stop_gradient = true;
  pd_status st = place_var(sv, mesh, s);
  pd_spmd_dist ws, wa, w[PD_MAX_OUTPUTS];
  pd_ap_to_spmd(s, mesh->ndim, pv->ndim, &ws);
  pd_ap_to_spmd(a, mesh->ndim, pv->ndim, &wa);
  /* assign(P) -> P@SHARD */
  const char *ins[2] = {pv->name, name}, *outs[1] = {name};
  pd_operator *take = st == PD_OK ? pd_ir_append_op(b, "assign", ins, 1, outs, 1, NULL) : NULL;
  if (!take) return pd_last_status();
  take->role = op->role;
  emit(r, take, &ws, false);
  /* the update on the shard: its states held as S (not the gradient, input
   * 1, even when persistable: gradient_merge's buffer keeps its placement
   * and is sliced for the update) */
  for (int i = 0; i < op->n_in && st == PD_OK; i++) {
    pd_variable *v = i == 0 ? sv : pd_ir_find_var(b, op->inputs[i]);
    w[i] = want[i];
    if (!param_shaped(v, pv)) continue;
    w[i] = ws;
    if (i > 1 && v->persistable) st = place_var(v, mesh, s);
  }
  for (int k = 1; k < op->n_out && st == PD_OK; k++) {
    pd_variable *v = pd_ir_find_var(b, op->outputs[k]);
    if (param_shaped(v, pv)) st = place_var(v, mesh, s);
  }
  if (st == PD_OK) st = pd_ir_set_slot(&op->inputs[0], name);
  if (st == PD_OK) st = pd_ir_set_slot(&op->outputs[0], name);
  if (st != PD_OK) return st;
  emit(r, op, w, false);
  /* copy_(P, P@SHARD): the shards gathered back */
  const char *gather_outs[1] = {pv->name};
  pd_operator *back = pd_ir_append_op(b, "copy_", ins, 2, gather_outs, 1, NULL);
  if (!back) return pd_last_status();
  back->role = op->role;
  emit(r, back, (const pd_spmd_dist[]){wa, wa}, false);
  *done = true;
  return PD_OK;
}

pd_status pd_ap_sharding(pd_ap_program *p, pd_ap_completion *c, int stage, int axis) {
  pd_static_block *b = p->main->blocks[0];
  int n_old = b->n_ops, total = 0;
  for (int k = 0; k < n_old; k++) total += b->ops[k]->n_in;
  rewrite r = {0};
  pd_operator **old = malloc(sizeof *old * ((size_t)n_old + 1));
  r.ops = malloc(sizeof *r.ops * (3 * (size_t)n_old + 1));
  r.off = malloc(sizeof *r.off * (3 * (size_t)n_old + 1));
  r.local = malloc(sizeof *r.local * (3 * (size_t)n_old + 1));
  r.want = malloc(sizeof *r.want * ((size_t)total + 3 * (size_t)n_old + 1));
  pd_status st = old && r.ops && r.off && r.local && r.want
                     ? PD_OK
                     : pd_set_error(PD_ERR_MEMORY, "Strategy.sharding: out of memory");
  if (st == PD_OK) memcpy(old, b->ops, sizeof *old * (size_t)n_old);
  for (int k = 0; k < n_old && st == PD_OK; k++) {
    pd_operator *op = old[k];
    bool done = false;
    if (op->op_id >= 0 && pd_ap_is_update_op((pd_op_id)op->op_id))
      st = shard_update(p, axis, op, c->want + c->want_off[k], &r, &done);
    if (st == PD_OK && !done) emit(&r, op, c->want + c->want_off[k], c->local[k]);
  }
  if (st == PD_OK) {
    /* the block holds the old ops then the new ones; put them in order */
    memcpy(b->ops, r.ops, sizeof *r.ops * (size_t)r.n_ops);
    free(c->want);
    free(c->want_off);
    free(c->local);
    c->want = r.want;
    c->want_off = r.off;
    c->local = r.local;
    c->n_ops = r.n_ops;
    c->reduce_scatter = stage == 2;
    r.want = NULL;
    r.off = NULL;
    r.local = NULL;
    pd_ir_touch(p->main);
  }
  free(old);
  free(r.ops);
  free(r.off);
  free(r.local);
  free(r.want);
  return st;
}
