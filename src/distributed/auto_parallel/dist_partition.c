/* dist.to_static, stage 3 (partition): this rank's Program. Every Variable
 * gets its local shape on this rank; each op input whose placements differ
 * from those the op's rule wants (completion) is resharded first by ops,
 * one mesh axis at a time in Paddle's SameNdMesh order: Partial ->
 * Replicate as c_allreduce over the axis group, Shard -> Replicate as
 * c_allgather, Replicate -> Partial as a scale (1 on coordinate 0, else 0),
 * Replicate -> Shard as a slice of this rank's chunk (a strided_slice
 * copy where a slice view would not be contiguous). An op whose rule asks
 * for a local step becomes the op that computes it on the shards, as
 * Paddle's partitioner does: c_embedding(_grad) for a vocab-sharded
 * table, c_softmax_with_cross_entropy(_grad) for class-sharded logits,
 * dropout with the whole shape and the shard's offset. Ops whose attributes
 * hold an output shape (reshape, expand, broadcast_to) get the local one.
 * With the completion's reduce_scatter (Strategy.sharding stage 2) a
 * Partial axis whose target is Shard(d) is one c_reduce_scatter instead
 * of c_allreduce then a slice.
 * The fetches are made replicated at the end, so every rank fetches the
 * global loss and outputs. Gradients of replicated parameters arrive at
 * their update op Partial or sharded, and that op's rule wants them as
 * the parameter is: the all_reduce (or all_gather) appears there. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist_program.h"
#include "paddlec/distributed.h"

typedef struct cached {
  char from[PD_AP_NAME_LEN], to[PD_AP_NAME_LEN];
  pd_dist_placement p[PD_DIST_MAX_MESH_DIMS];
} cached;

typedef struct part {
  const pd_static_block *src;
  pd_static_block *dst;
  pd_dist_process_mesh *mesh;
  int64_t coord[PD_DIST_MAX_MESH_DIMS];
  int next;
  bool reduce_scatter; /* Partial -> Shard as one c_reduce_scatter */
  cached *cache;       /* resharded values, until their source is written again */
  int n_cache, cap_cache;
} part;

/* The placements of src Variable v (replicated when it has no attr). */
static void placements_of(const part *w, const pd_variable *v, pd_dist_placement *p) {
  const pd_dist_attr *a = pd_ap_var_attr(v);
  for (int m = 0; m < w->mesh->ndim; m++) p[m] = a ? a->p[m] : pd_dist_replicate();
}

/* Adds dst Variable `name` shaped as attr a's local part, flags as v's. */
static pd_variable *add_local(part *w, const char *name, const pd_variable *v, pd_dist_attr *a) {
  int64_t shape[PD_MAX_DIMS];
  int ndim = v->ndim;
  memcpy(shape, v->shape, sizeof(int64_t) * (size_t)v->ndim);
  if (a) ndim = pd_ap_local_shape(a, shape);
  pd_variable *d = pd_ir_add_var(w->dst, name, v->dtype, ndim, shape, NULL);
  if (!d) {
    pd_ap_attr_free(a);
    return NULL;
  }
  d->persistable = v->persistable;
  d->is_parameter = v->is_parameter;
  d->is_data = v->is_data;
  d->stop_gradient = v->stop_gradient;
  pd_ap_var_set_attr(d, a);
  return d;
}

/* The dst Variable of src Variable `name` (made on first use). */
static pd_variable *dst_var(part *w, const char *name) {
  pd_variable *d = pd_ir_find_var(w->dst, name);
  if (d) return d;
  const pd_variable *v = pd_ir_find_var(w->src, name);
  if (!v) {
    pd_set_error(PD_ERR_STATE, "dist.to_static: partition: no Variable '%s'", name);
    return NULL;
  }
  const pd_dist_attr *a = pd_ap_var_attr(v);
  pd_dist_attr *c = a ? pd_ap_attr_copy(a) : NULL;
  if (a && !c) return NULL;
  return add_local(w, name, v, c);
}

/* The process group along mesh axis m, checked to list its ranks in
 * coordinate order (the gather's concatenation order). */
static pd_status axis_group(part *w, int m, int64_t *ring_id) {
  pd_dist_group *g = pd_ap_axis_group(w->mesh, m);
  if (!g) return pd_last_status();
  const int *ranks = pd_dist_group_ranks(g);
  int n = pd_dist_group_nranks(g);
  for (int k = 0; k < n; k++) {
    int64_t c[PD_DIST_MAX_MESH_DIMS];
    if (!pd_ap_mesh_coords(w->mesh, ranks[k], c) || c[m] != k)
      return pd_set_error(PD_ERR_UNIMPLEMENTED,
                          "dist.to_static: the processes along mesh axis %d are not in ascending order", m);
  }
  *ring_id = pd_dist_group_id(g);
  return PD_OK;
}

/* Appends one reshard step: op `type` on x into a new Variable placed as p. */
static pd_status step(part *w, const pd_variable *v, char *x, const pd_dist_placement *p, const char *type,
                      const pd_attrs *attrs) {
  char name[PD_AP_NAME_LEN];
  snprintf(name, sizeof name, "%.80s@reshard_%d", v->name, w->next++);
  pd_dist_attr *a = pd_ap_attr_new(w->mesh, p, v->ndim, v->shape);
  pd_variable *d = a ? add_local(w, name, v, a) : NULL;
  if (!d) return pd_last_status();
  d->persistable = d->is_parameter = d->is_data = false; /* a temporary */
  const char *ins[1] = {x}, *outs[1] = {name};
  pd_operator *op = pd_ir_append_op(w->dst, type, ins, 1, outs, 1, attrs);
  if (!op) return pd_last_status();
  op->role = PD_OP_ROLE_FORWARD;
  snprintf(x, PD_AP_NAME_LEN, "%s", name);
  return PD_OK;
}

/* Whether v's Partial on mesh axis m can be reduce-scattered straight to
 * Shard(d): d splits evenly and no other axis shards it now. */
static bool scatterable(const part *w, const pd_variable *v, const pd_dist_placement *cp, int m, int d) {
  if (w->mesh->shape[m] < 2 || v->shape[d] % w->mesh->shape[m] != 0) return false;
  for (int q = 0; q < w->mesh->ndim; q++)
    if (q != m && cp[q].kind == PD_DIST_SHARD && cp[q].dim == d) return false;
  return true;
}

/* Partial on axis m -> `to` (Shard(d)) as one c_reduce_scatter. */
static pd_status reduce_scatter_step(part *w, const pd_variable *v, char *x, pd_dist_placement *cp, int m,
                                     pd_dist_placement to) {
  int64_t ring = 0;
  pd_attrs a = {.i = {0, w->mesh->shape[m], cp[m].reduce_type, to.dim}};
  pd_status st = axis_group(w, m, &ring);
  if (st != PD_OK) return st;
  a.i[0] = ring;
  cp[m] = to;
  return step(w, v, x, cp, "c_reduce_scatter", &a);
}

/* Reshards src Variable v (its dst value named x, placements cur) to
 * placements to; x gets the result's name. */
static pd_status reshard(part *w, const pd_variable *v, char *x, const pd_dist_placement *from,
                         const pd_dist_placement *to) {
  int n = w->mesh->ndim;
  pd_dist_placement cp[PD_DIST_MAX_MESH_DIMS];
  memcpy(cp, from, sizeof(pd_dist_placement) * (size_t)n);
  char b1[256];
  for (int m = 0; m < n; m++)
    for (int q = m + 1; q < n; q++)
      if ((cp[m].kind == PD_DIST_SHARD && pd_dist_placement_equal(cp[m], cp[q])) ||
          (to[m].kind == PD_DIST_SHARD && pd_dist_placement_equal(to[m], to[q])))
        return pd_set_error(PD_ERR_UNIMPLEMENTED,
                            "dist.to_static: '%s' has a dim sharded by two mesh axes (%s); not supported",
                            v->name, pd_ap_mesh_str(w->mesh, b1, sizeof b1));
  pd_status st = PD_OK;
  /* 1. Partial -> Replicate (or -> Shard) */
  for (int m = 0; m < n && st == PD_OK; m++) {
    if (cp[m].kind != PD_DIST_PARTIAL || pd_dist_placement_equal(cp[m], to[m])) continue;
    if (to[m].kind == PD_DIST_PARTIAL)
      return pd_set_error(PD_ERR_UNIMPLEMENTED, "dist.to_static: '%s': Partial of one reduce type to another",
                          v->name);
    if (w->reduce_scatter && to[m].kind == PD_DIST_SHARD && scatterable(w, v, cp, m, to[m].dim)) {
      st = reduce_scatter_step(w, v, x, cp, m, to[m]);
      continue;
    }
    int64_t ring = 0;
    pd_attrs a = {.i = {0, w->mesh->shape[m], cp[m].reduce_type}};
    cp[m] = pd_dist_replicate();
    if (w->mesh->shape[m] > 1 && (st = axis_group(w, m, &ring)) == PD_OK) {
      a.i[0] = ring;
      st = step(w, v, x, cp, "c_allreduce", &a);
    }
  }
  /* 2. Shard -> Replicate */
  for (int m = 0; m < n && st == PD_OK; m++) {
    if (cp[m].kind != PD_DIST_SHARD || pd_dist_placement_equal(cp[m], to[m])) continue;
    int d = cp[m].dim;
    if (v->shape[d] % w->mesh->shape[m] != 0)
      return pd_set_error(PD_ERR_UNIMPLEMENTED,
                          "dist.to_static: '%s' dim %d (%lld) does not split evenly over mesh axis %d (%lld)",
                          v->name, d, (long long)v->shape[d], m, (long long)w->mesh->shape[m]);
    int64_t ring = 0;
    pd_attrs a = {.i = {0, w->mesh->shape[m], d}};
    cp[m] = pd_dist_replicate();
    if (w->mesh->shape[m] > 1 && (st = axis_group(w, m, &ring)) == PD_OK) {
      a.i[0] = ring;
      st = step(w, v, x, cp, "c_allgather", &a);
    }
  }
  /* 3. Replicate -> Partial: coordinate 0 keeps the value (avg: all do) */
  for (int m = 0; m < n && st == PD_OK; m++) {
    if (to[m].kind != PD_DIST_PARTIAL || cp[m].kind != PD_DIST_REPLICATE) continue;
    cp[m] = to[m];
    if (to[m].reduce_type == PD_REDUCE_AVG || w->mesh->shape[m] == 1) continue;
    pd_attrs a = {.f = {w->coord[m] == 0 ? 1.0 : 0.0, 0.0}, .i = {1}};
    st = step(w, v, x, cp, "scale", &a);
  }
  /* 4. Replicate -> Shard: this coordinate's chunk */
  for (int m = 0; m < n && st == PD_OK; m++) {
    if (to[m].kind != PD_DIST_SHARD || cp[m].kind != PD_DIST_REPLICATE) continue;
    int d = to[m].dim;
    int64_t s, l;
    pd_ap_shard_range(v->shape[d], w->mesh->shape[m], w->coord[m], &s, &l);
    cp[m] = to[m];
    if (w->mesh->shape[m] == 1) continue;
    /* slice is a view, contiguous only where the dims before d have size
     * 1; elsewhere a strided_slice of step 1 copies the chunk, since the
     * collectives and the optimizer updates read contiguous memory */
    bool view = true;
    for (int e = 0; e < d; e++) view = view && v->shape[e] == 1;
    pd_attrs a = {.nv = {1, 1, 1, view ? 0 : 1}};
    a.v[0][0] = d;
    a.v[1][0] = s;
    a.v[2][0] = s + l;
    a.v[3][0] = 1;
    st = step(w, v, x, cp, view ? "slice" : "strided_slice", &a);
  }
  return st;
}

/* The dst name of src Variable `name` placed as `to` (resharded once per
 * value and placements). */
static pd_status input_as(part *w, const char *name, const pd_dist_placement *to, char *out) {
  snprintf(out, PD_AP_NAME_LEN, "%s", name);
  const pd_variable *v = pd_ir_find_var(w->src, name);
  if (!v || !dst_var(w, name)) return pd_last_status();
  pd_dist_placement cur[PD_DIST_MAX_MESH_DIMS];
  placements_of(w, v, cur);
  if (pd_ap_placements_equal(cur, to, w->mesh->ndim)) return PD_OK;
  for (int i = 0; i < w->n_cache; i++)
    if (strcmp(w->cache[i].from, name) == 0 && pd_ap_placements_equal(w->cache[i].p, to, w->mesh->ndim)) {
      snprintf(out, PD_AP_NAME_LEN, "%s", w->cache[i].to);
      return PD_OK;
    }
  pd_status st = reshard(w, v, out, cur, to);
  if (st != PD_OK) return st;
  if (w->n_cache == w->cap_cache) {
    int nc = w->cap_cache ? 2 * w->cap_cache : 16;
    cached *c = realloc(w->cache, (size_t)nc * sizeof *c);
    if (!c) return pd_set_error(PD_ERR_MEMORY, "dist.to_static: out of memory");
    w->cache = c;
    w->cap_cache = nc;
  }
  cached *e = &w->cache[w->n_cache++];
  snprintf(e->from, sizeof e->from, "%s", name);
  snprintf(e->to, sizeof e->to, "%s", out);
  memcpy(e->p, to, sizeof(pd_dist_placement) * (size_t)w->mesh->ndim);
  return PD_OK;
}

static void forget(part *w, const char *name) {
  for (int i = 0; i < w->n_cache; i++)
    if (strcmp(w->cache[i].from, name) == 0) w->cache[i--] = w->cache[--w->n_cache];
}

/* The op a rule's local step runs on this rank's shards in place of op
 * (its type into *type, its attrs into *attrs), from the global metas and
 * the placements the rule wants. */
static pd_status local_op(part *w, const pd_operator *op, const pd_spmd_dist *want, const char **type,
                          pd_attrs *attrs) {
  pd_meta im[PD_MAX_OUTPUTS], om[PD_MAX_OUTPUTS];
  pd_spmd_dist out_dist[PD_MAX_OUTPUTS];
  for (int i = 0; i < op->n_in; i++) {
    const pd_variable *v = pd_ir_find_var(w->src, op->inputs[i]);
    im[i] = (pd_meta){.dtype = v->dtype, .ndim = v->ndim};
    memcpy(im[i].shape, v->shape, sizeof(int64_t) * (size_t)v->ndim);
  }
  for (int k = 0; k < op->n_out; k++) {
    const pd_variable *v = pd_ir_find_var(w->src, op->outputs[k]);
    om[k] = (pd_meta){.dtype = v->dtype, .ndim = v->ndim};
    memcpy(om[k].shape, v->shape, sizeof(int64_t) * (size_t)v->ndim);
    const pd_dist_attr *a = pd_ap_var_attr(v);
    pd_ap_to_spmd(a ? a->p : NULL, a ? a->n : 0, v->ndim, &out_dist[k]);
  }
  pd_spmd_local lc = {.id = (pd_op_id)op->op_id,
                      .attrs = &op->attrs,
                      .n_in = op->n_in,
                      .n_out = op->n_out,
                      .in_meta = im,
                      .out_meta = om,
                      .in_dist = want,
                      .out_dist = out_dist,
                      .mesh = w->mesh,
                      .coords = w->coord};
  pd_op_id id;
  pd_status st = pd_ap_local_op(&lc, &id, attrs);
  if (st == PD_OK) *type = pd_op_table[id]->name;
  return st;
}

static pd_status partition_op(part *w, const pd_operator *op, const pd_spmd_dist *want, bool local) {
  pd_attrs attrs = op->attrs;
  const char *type = op->type;
  char in_names[3 * PD_MAX_OUTPUTS][PD_AP_NAME_LEN];
  const char *ins[3 * PD_MAX_OUTPUTS], *outs[PD_MAX_OUTPUTS];
  pd_status st = PD_OK;
  const pd_op_def *def = op->op_id >= 0 ? pd_op_table[op->op_id] : NULL;
  for (int i = 0; i < op->n_in && st == PD_OK; i++) {
    const pd_variable *v = pd_ir_find_var(w->src, op->inputs[i]);
    if (!v) return pd_set_error(PD_ERR_STATE, "dist.to_static: no Variable '%s'", op->inputs[i]);
    pd_dist_placement to[PD_DIST_MAX_MESH_DIMS];
    pd_ap_from_spmd(&want[i], w->mesh->ndim, v->ndim, to);
    st = input_as(w, op->inputs[i], to, in_names[i]);
    if (st == PD_OK && i == 0 && def && (def->flags & PD_OPF_INPLACE) && strcmp(in_names[0], op->inputs[0]))
      st = pd_set_error(PD_ERR_UNIMPLEMENTED,
                        "dist.to_static: %s: the inplace op's rule wants '%s' placed otherwise", op->type,
                        op->inputs[0]);
    ins[i] = in_names[i];
  }
  for (int k = 0; k < op->n_out && st == PD_OK; k++) {
    outs[k] = op->outputs[k];
    if (!dst_var(w, op->outputs[k])) st = pd_last_status();
  }
  if (st == PD_OK && local) st = local_op(w, op, want, &type, &attrs);
  if (st != PD_OK) return st;
  /* ops whose attrs hold the output's shape get its local shape */
  if (def && op->n_out == 1 && pd_ap_op_attrs_hold_out_shape((pd_op_id)op->op_id)) {
    const pd_dist_attr *oa = pd_ap_var_attr(pd_ir_find_var(w->src, op->outputs[0]));
    if (oa) pd_ap_localize_out_shape(oa, &attrs);
  }
  pd_operator *d = pd_ir_append_op(w->dst, type, ins, op->n_in, outs, op->n_out, &attrs);
  if (!d) return pd_last_status();
  d->role = op->role;
  memcpy(d->name_scope, op->name_scope, sizeof d->name_scope);
  if (op->value) d->value = pd_tensor_retain(op->value);
  for (int k = 0; k < op->n_out; k++) forget(w, op->outputs[k]);
  return PD_OK;
}

pd_status pd_ap_partition(const pd_ap_program *completed, const pd_ap_completion *c, pd_ap_program *out) {
  memset(out, 0, sizeof *out);
  pd_dist_process_mesh *mesh = completed->mesh;
  part w = {.src = completed->main->blocks[0], .mesh = mesh, .reduce_scatter = c->reduce_scatter};
  if (!pd_ap_mesh_coords(mesh, pd_ap_my_rank(), w.coord)) {
    char b1[256];
    return pd_set_error(PD_ERR_UNIMPLEMENTED, "dist.to_static: process %d is not in the model's mesh %s",
                        pd_ap_my_rank(), pd_ap_mesh_str(mesh, b1, sizeof b1));
  }
  pd_ap_install_comm_ops();
  pd_status st = pd_ap_mesh_prepare(mesh);
  out->main = st == PD_OK ? pd_static_program() : NULL;
  if (st == PD_OK && !out->main) st = pd_last_status();
  if (st != PD_OK) return st;
  out->mesh = pd_dist_process_mesh_retain(mesh);
  out->n_feed = completed->n_feed;
  memcpy(out->feed, completed->feed, sizeof out->feed);
  w.dst = out->main->blocks[0];
  for (int i = 0; i < out->n_feed && st == PD_OK; i++)
    if (!dst_var(&w, out->feed[i])) st = pd_last_status();
  for (int k = 0; k < w.src->n_ops && st == PD_OK; k++) {
    st = partition_op(&w, w.src->ops[k], c->want + c->want_off[k], c->local[k]);
    if (st != PD_OK) pd_error_prefix("dist.to_static: partitioning op %d (%s)", k, w.src->ops[k]->type);
  }
  /* the fetches, replicated */
  for (int i = 0; i < completed->n_fetch && st == PD_OK; i++)
    st = input_as(&w, completed->fetch[i], pd_ap_replicated, out->fetch[i]);
  out->n_fetch = completed->n_fetch;
  free(w.cache);
  if (st != PD_OK) pd_ap_program_free(out);
  return st;
}
