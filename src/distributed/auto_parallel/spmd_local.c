/* The local steps of SPMD rules whose ops, on a rank's shards, compute
 * something else than the plain op, where the step is one registry op, as
 * Paddle's partitioner emits it: a vocab-sharded embedding and its grad
 * are c_embedding and c_embedding_grad (the shard's rows, zeros
 * elsewhere); the class-sharded softmax cross entropy and its grad are
 * c_softmax_with_cross_entropy(_grad) (row statistics allreduced over the
 * class shards, ParallelCrossEntropy); dropout of a shard is dropout with
 * the whole tensor's shape and the shard's offset (the global mask's
 * slice); multinomial of a row shard is multinomial told its first row
 * and the whole row count, scatter (scatter_) into a shard of x's rows
 * is scatter told the shard's first row and the whole row count,
 * squeeze (squeeze_) of a shard is reshape (reshape_) to its output's
 * shard (squeeze would also drop a kept dim whose shard is of size 1),
 * and nll_loss's mean over a split batch and its grad are c_nll_loss(_grad)
 * (the sums allreduced over the groups that split the samples).
 * pd_ap_local_op names that op and its attrs; the eager DTensor step runs
 * it (pd_ap_local_step) and a partitioned Program holds it
 * (dist_partition.c). */
#include <string.h>

#include "../../core/core_internal.h"
#include "ap_internal.h"
#include "paddlec/creation.h"
#include "paddlec/distributed.h"

int64_t pd_ap_local_start(const pd_spmd_local *c, int axis, int64_t global) {
  if (axis < 0) return 0;
  int64_t s, l;
  pd_ap_shard_range(global, c->mesh->shape[axis], c->coords[axis], &s, &l);
  return s;
}

pd_status pd_ap_record_node(const pd_spmd_local *c, pd_tensor **out, int n_out) {
  const pd_op_def *def = pd_op_table[c->id];
  pd_autograd_record_fn rec = pd_dispatch_get_autograd();
  if (!rec || !pd_grad_mode_enabled() || !(def->flags & PD_OPF_DIFF)) return PD_OK;
  bool needs = false;
  for (int i = 0; i < c->n_in; i++) needs |= !c->in[i]->stop_gradient;
  return needs ? rec(c->id, c->in, c->n_in, c->attrs, out, n_out) : PD_OK;
}

/* Whether mesh axis m shards a dim of input i of c. */
static bool axis_shards_input(const pd_spmd_local *c, int i, int m) {
  for (int d = 0; d < c->in_meta[i].ndim; d++)
    if (c->in_dist[i].dims_mapping[d] == m) return true;
  return false;
}

pd_status pd_ap_sum_over_shards(const pd_spmd_local *c, int i, double *v, int n) {
  pd_tensor *t = pd_tensor_from_f64(v, PD_FLOAT64, 1, (const int64_t[]){n});
  if (!t) return pd_last_status();
  pd_status st = PD_OK;
  for (int m = 0; m < c->mesh->ndim && st == PD_OK; m++) {
    if (!axis_shards_input(c, i, m)) continue;
    pd_dist_group *g = pd_ap_axis_group(c->mesh, m);
    st = g ? pd_dist_all_reduce(t, PD_REDUCE_SUM, &(pd_dist_opts){.group = g}) : pd_last_status();
  }
  if (st == PD_OK) memcpy(v, pd_tensor_data(t), sizeof *v * (size_t)n);
  pd_tensor_release(t);
  return st;
}

pd_status pd_ap_local_computed(const pd_spmd_local *c, pd_status (*fn)(const pd_spmd_local *, pd_tensor **),
                               pd_tensor **out, int *n_out) {
  bool prev = pd_grad_mode_set(false);
  pd_status st = fn(c, out);
  pd_grad_mode_set(prev);
  if (st != PD_OK) return st;
  st = pd_ap_record_node(c, out, c->n_out);
  if (st != PD_OK) {
    for (int k = 0; k < c->n_out; k++) pd_tensor_release(out[k]);
    return st;
  }
  *n_out = c->n_out;
  return PD_OK;
}

/* embedding (ids, weight): the weight's vocab shard. embedding_grad (ids,
 * dout, weight): the same, i0 the shard's rows. */
static void embedding_op(const pd_spmd_local *c, pd_op_id *id, pd_attrs *a) {
  bool grad = c->id == PD_OP_embedding_grad;
  int wi = grad ? 2 : 1, axis = c->in_dist[wi].dims_mapping[0];
  int64_t rows = c->in_meta[wi].shape[0], start, len;
  pd_ap_shard_range(rows, c->mesh->shape[axis], c->coords[axis], &start, &len);
  if (grad) {
    *id = PD_OP_c_embedding_grad;
    a->i[0] = len;
    a->i[3] = start;
    a->i[4] = rows;
  } else {
    *id = PD_OP_c_embedding;
    a->i[2] = start;
    a->i[3] = rows;
  }
}

/* cross_entropy_with_softmax(_grad) over x's class shards: the group along
 * the mesh axis that shards the class axis, this shard's first class. */
static pd_status cross_entropy_op(const pd_spmd_local *c, pd_op_id *id, pd_attrs *a) {
  int nd = c->in_meta[0].ndim, axis = (int)(c->attrs->i[3] < 0 ? c->attrs->i[3] + nd : c->attrs->i[3]);
  int m = c->in_dist[0].dims_mapping[axis];
  pd_dist_group *g = pd_ap_axis_group(c->mesh, m);
  if (!g) return pd_last_status();
  *id = c->id == PD_OP_cross_entropy_with_softmax_grad ? PD_OP_c_softmax_with_cross_entropy_grad
                                                       : PD_OP_c_softmax_with_cross_entropy;
  int64_t classes = c->in_meta[0].shape[axis];
  *a = (pd_attrs){.i = {c->attrs->i[0], pd_dist_group_id(g), c->attrs->i[2], axis, c->mesh->shape[m],
                        pd_ap_local_start(c, m, classes)},
                  .nv = {1},
                  .v = {{classes}}};
  return PD_OK;
}

/* dropout of x's shard: the whole shape and the shard's offset (x may be
 * a shard of a larger tensor already: the offsets add up). */
static void dropout_op(const pd_spmd_local *c, pd_op_id *id, pd_attrs *a) {
  const pd_meta *gm = &c->in_meta[0];
  bool nested = c->attrs->nv[1] == gm->ndim;
  *id = PD_OP_dropout;
  a->nv[1] = a->nv[2] = gm->ndim;
  for (int d = 0; d < gm->ndim; d++) {
    a->v[1][d] = nested ? c->attrs->v[1][d] : gm->shape[d];
    a->v[2][d] =
        (nested ? c->attrs->v[2][d] : 0) + pd_ap_local_start(c, c->in_dist[0].dims_mapping[d], gm->shape[d]);
  }
}

/* multinomial of x's row shard: its first global row (i2) and the whole
 * row count (i3); each row draws at its global index. */
static void multinomial_op(const pd_spmd_local *c, pd_op_id *id, pd_attrs *a) {
  int64_t rows = c->in_meta[0].shape[0];
  *id = PD_OP_multinomial;
  a->i[2] = pd_ap_local_start(c, c->in_dist[0].dims_mapping[0], rows);
  a->i[3] = rows;
}

/* scatter (scatter_) into x's row shard: its first global row (i1) and the
 * whole row count (i2); index entries outside the shard are skipped. */
static void scatter_op(const pd_spmd_local *c, pd_op_id *id, pd_attrs *a) {
  int64_t rows = c->in_meta[0].shape[0];
  *id = c->id;
  a->i[1] = pd_ap_local_start(c, c->in_dist[0].dims_mapping[0], rows);
  a->i[2] = rows;
}

/* squeeze (squeeze_) of a shard: reshape (reshape_) to the shard of the
 * output, whose sharded dims keep their local sizes (1 included). */
static void squeeze_op(const pd_spmd_local *c, pd_op_id *id, pd_attrs *a) {
  const pd_meta *om = &c->out_meta[0];
  *id = c->id == PD_OP_squeeze_ ? PD_OP_reshape_ : PD_OP_reshape;
  a->nv[0] = om->ndim;
  for (int d = 0; d < om->ndim; d++) {
    int m = c->out_dist[0].dims_mapping[d];
    int64_t start, len = om->shape[d];
    if (m >= 0) pd_ap_shard_range(om->shape[d], c->mesh->shape[m], c->coords[m], &start, &len);
    a->v[0][d] = len;
  }
}

/* nll_loss(x, label[, weight]) and nll_loss_grad(label, g[, weight]) with
 * reduction mean over the label's shards: the group and size of each mesh
 * axis that shards a label dim. */
static pd_status nll_op(const pd_spmd_local *c, pd_op_id *id, pd_attrs *a) {
  int li = c->id == PD_OP_nll_loss_grad ? 0 : 1;
  *id = li == 0 ? PD_OP_c_nll_loss_grad : PD_OP_c_nll_loss;
  a->nv[1] = a->nv[2] = 0;
  for (int m = 0; m < c->mesh->ndim; m++) {
    if (!axis_shards_input(c, li, m) || c->mesh->shape[m] == 1) continue;
    pd_dist_group *g = pd_ap_axis_group(c->mesh, m);
    if (!g) return pd_last_status();
    a->v[1][a->nv[1]++] = pd_dist_group_id(g);
    a->v[2][a->nv[2]++] = c->mesh->shape[m];
  }
  return PD_OK;
}

pd_status pd_ap_local_op(const pd_spmd_local *c, pd_op_id *id, pd_attrs *a) {
  *a = *c->attrs;
  switch (c->id) {
    case PD_OP_embedding:
    case PD_OP_embedding_grad:
      embedding_op(c, id, a);
      return PD_OK;
    case PD_OP_cross_entropy_with_softmax:
    case PD_OP_cross_entropy_with_softmax_grad:
      return cross_entropy_op(c, id, a);
    case PD_OP_dropout:
      dropout_op(c, id, a);
      return PD_OK;
    case PD_OP_multinomial:
      multinomial_op(c, id, a);
      return PD_OK;
    case PD_OP_scatter:
    case PD_OP_scatter_:
      scatter_op(c, id, a);
      return PD_OK;
    case PD_OP_squeeze:
    case PD_OP_squeeze_:
      squeeze_op(c, id, a);
      return PD_OK;
    case PD_OP_nll_loss:
    case PD_OP_nll_loss_grad:
      return nll_op(c, id, a);
    default: /* a step computed by several ops (lamb_, alpha_dropout, rrelu, bernoulli) */
      return pd_set_error(PD_ERR_UNIMPLEMENTED,
                          "dist.to_static: %s on these placements needs its rule's local step (as eager runs "
                          "it), which has no op a static Program can hold yet",
                          pd_op_table[c->id]->name);
  }
}

/* pd_ap_local_op's op on c->in. */
static pd_status run_local_op(const pd_spmd_local *c, pd_tensor **out) {
  pd_op_id id;
  pd_attrs a;
  pd_status st = pd_ap_local_op(c, &id, &a);
  if (st != PD_OK) return st;
  pd_ap_install_comm_ops(); /* the collectives c_softmax_with_cross_entropy and c_nll_loss call */
  int n_out = 0;
  return pd_dispatch(id, c->in, c->n_in, &a, out, &n_out);
}

pd_status pd_ap_local_step(const pd_spmd_local *c, pd_tensor **out, int *n_out) {
  return pd_ap_local_computed(c, run_local_op, out, n_out);
}
