/* Internals of auto_parallel: the mesh and dist attr layouts, shard
 * geometry, the axis groups, the reshard steps and the SPMD rule lookup. */
#ifndef PADDLEC_AP_INTERNAL_H
#define PADDLEC_AP_INTERNAL_H

#include <stdatomic.h>
#include <stddef.h>
#include <string.h>

#include "../../ops/op_registry.h"
#include "paddlec/auto_parallel.h"
#include "paddlec/optim.h"

#define PD_DIST_NAME_LEN 32

struct pd_dist_process_mesh {
  atomic_int refcount;
  int ndim;
  int64_t shape[PD_DIST_MAX_MESH_DIMS];
  int64_t size;
  int *ids; /* row-major */
  char names[PD_DIST_MAX_MESH_DIMS][PD_DIST_NAME_LEN];
  /* the communication groups along each axis, made on first use in the
   * world groups_world (pd_dist_world_generation; 0: not made) */
  unsigned long groups_world;
  pd_dist_group **axis_groups[PD_DIST_MAX_MESH_DIMS]; /* per axis, per sub-mesh */
};

/* What tensor->dist_attr points to (owned; freed by pd_dist_attr_free). */
typedef struct pd_dist_attr {
  /* the global rank and shape: first, as pd_dist_geometry (tensor_impl.h) */
  int ndim;
  int64_t shape[PD_MAX_DIMS];
  pd_dist_process_mesh *mesh; /* a reference */
  int n;                      /* == mesh->ndim */
  pd_dist_placement p[PD_DIST_MAX_MESH_DIMS];
} pd_dist_attr;
_Static_assert(offsetof(pd_dist_attr, ndim) == offsetof(pd_dist_geometry, ndim) &&
                   offsetof(pd_dist_attr, shape) == offsetof(pd_dist_geometry, shape),
               "a dist attr starts with its geometry");

/* ---- mesh (process_mesh.c) ---- */
/* This process's global rank (0 in a one-process world). */
int pd_ap_my_rank(void);
/* Index of pid in the mesh's ids, -1 when absent. */
int64_t pd_ap_mesh_index_of(const pd_dist_process_mesh *m, int pid);
/* This rank's coordinates in the mesh; false when not a member. */
bool pd_ap_mesh_coords(const pd_dist_process_mesh *m, int pid, int64_t *coords);
/* The group of this rank's sub-mesh along `axis` (made on first use on every
 * rank of the world, members or not); NULL with the error set on failure,
 * or when this rank is not in the mesh. */
pd_dist_group *pd_ap_axis_group(pd_dist_process_mesh *m, int axis);
/* Makes the mesh's groups now (every rank calls it on every reshard). */
pd_status pd_ap_mesh_prepare(pd_dist_process_mesh *m);
const char *pd_ap_mesh_str(const pd_dist_process_mesh *m, char *buf, size_t cap);

/* ---- placements and attrs (dist_attr.c) ---- */
/* Checks placements against a mesh and a tensor rank; the error names op
 * and the offending values. */
pd_status pd_ap_check_placements(const char *op, const pd_dist_process_mesh *m, const pd_dist_placement *p,
                                 int n, int ndim);
pd_dist_attr *pd_ap_attr_new(pd_dist_process_mesh *m, const pd_dist_placement *p, int ndim,
                             const int64_t *shape);
/* Every mesh axis Replicate (pd_dist_replicate()), as placements and as
 * the attr of a tensor of the given global shape on mesh m. */
extern const pd_dist_placement pd_ap_replicated[PD_DIST_MAX_MESH_DIMS];
pd_dist_attr *pd_ap_attr_replicated(pd_dist_process_mesh *m, int ndim, const int64_t *shape);
pd_dist_attr *pd_ap_attr_copy(const pd_dist_attr *a);
void pd_ap_attr_free(void *attr);
/* Sets t's dist attr (t takes `a`), replacing any. */
void pd_ap_attr_set(pd_tensor *t, pd_dist_attr *a);
static inline pd_dist_attr *pd_ap_attr(const pd_tensor *t) { return (pd_dist_attr *)t->dist_attr; }
const char *pd_ap_attr_str(const pd_dist_attr *a, char *buf, size_t cap);
bool pd_ap_placements_equal(const pd_dist_placement *a, const pd_dist_placement *b, int n);
/* Paddle's split of a dim of `global` elements in n shards: shard c starts
 * at c * ceil(global / n) and holds what is left of that, maybe nothing. */
void pd_ap_shard_range(int64_t global, int64_t n, int64_t c, int64_t *start, int64_t *len);
/* The local shape of attr a on this rank (coords in its mesh); non-members
 * get the 1-d shape [0]. Returns the local rank. */
int pd_ap_local_shape(const pd_dist_attr *a, int64_t *shape);
/* Whether op id's attrs hold its (one) output's shape: reshape(_), expand,
 * broadcast_to, slice_grad (x_shape), scatter_along and nll_loss_grad.
 * On a rank, such an op on shards needs its shard's shape there, both in
 * eager (dtensor_dispatch.c) and in a partitioned Program. */
bool pd_ap_op_attrs_hold_out_shape(pd_op_id id);
/* For such an op: its shape attr (v0, the slot each of them reads) set to
 * this rank's shard of `out`, the output's dist attr. */
void pd_ap_localize_out_shape(const pd_dist_attr *out, pd_attrs *a);
/* placements <-> the rules' dims_mapping form. */
void pd_ap_to_spmd(const pd_dist_placement *p, int n, int ndim, pd_spmd_dist *d);
void pd_ap_from_spmd(const pd_spmd_dist *d, int n, int ndim, pd_dist_placement *p);

/* ---- tensors (dtensor.c) ---- */
/* A dense alias of t's local data (no dist attr, not in the graph). */
pd_tensor *pd_ap_local_alias(const pd_tensor *t);
/* A DTensor with local data `local` (taken) and attr `a` (taken). */
pd_tensor *pd_ap_wrap(pd_tensor *local, pd_dist_attr *a);
/* Installs the dispatcher hook on the calling thread (idempotent). */
void pd_ap_install_hook(void);

/* ---- reshard (reshard.c) ---- */
/* The local data of the global value `local` under `src` placed under
 * `dst` (same global shape). New reference; records no gradient. */
pd_tensor *pd_ap_reshard_local(pd_tensor *local, const pd_dist_attr *src, const pd_dist_attr *dst);
/* The same-mesh steps (Paddle's SameNdMesh order) from src's placements
 * to dst's on mesh m. x is taken. */
pd_tensor *pd_ap_reshard_same_mesh(pd_tensor *x, pd_dist_process_mesh *m, const pd_dist_attr *src,
                                   const pd_dist_attr *dst);
/* The axis a of `big` such that sub is big's sub-mesh at some coordinate
 * *index of a (get_mesh_with_dim), or -1. */
int pd_ap_submesh_axis(const pd_dist_process_mesh *big, const pd_dist_process_mesh *sub, int64_t *index);
/* Global mesh <-> sub-mesh (pipeline stages, reshard_submesh.c). */
pd_tensor *pd_ap_reshard_submesh(pd_tensor *local, const pd_dist_attr *src, const pd_dist_attr *dst);
/* Differentiable reshard of a DTensor (or a dense tensor, taken as
 * replicated on dst's mesh) to dst. New reference. */
pd_tensor *pd_ap_reshard(pd_tensor *t, const pd_dist_attr *dst);

/* ---- pipeline schedules (pipeline_schedule.c) ---- */
typedef enum pd_ap_pipe_mode { PD_AP_PIPE_FTHENB, PD_AP_PIPE_1F1B } pd_ap_pipe_mode;
typedef struct pd_ap_pipe_action {
  int stage, micro_batch;
  bool backward;
} pd_ap_pipe_action;
/* Every stage's forward and backward of every micro-batch (2 * S * A
 * actions into out) in one order all ranks follow: the stages' own orders
 * of `mode` merged round by round (each stage takes its next action when
 * what it needs is done), so each stage's actions keep their order. */
pd_status pd_ap_pipe_order(pd_ap_pipe_mode mode, int n_stages, int n_micro, pd_ap_pipe_action *out);

/* ---- SPMD rules (spmd_rules.c, spmd_rules_nn.c; local steps in spmd_local.c) ---- */
/* A distribution with nothing sharded and nothing pending. */
static inline void pd_spmd_clear(pd_spmd_dist *d) {
  memset(d->dims_mapping, -1, sizeof d->dims_mapping);
  memset(d->partial, -1, sizeof d->partial);
}
static inline void pd_spmd_drop_partial(pd_spmd_dist *d) { memset(d->partial, -1, sizeof d->partial); }
/* Unmaps every later dim that reuses a mesh axis (the first dim keeps it). */
static inline void pd_spmd_dedupe(int nd, int8_t *map) {
  for (int d = 0; d < nd; d++)
    for (int e = 0; e < d; e++)
      if (map[d] >= 0 && map[d] == map[e]) map[d] = -1;
}
/* What a rule's local step (pd_spmd_local_fn) gets: the op, its global
 * attrs and metas, the inputs as the rule placed them (their data is this
 * rank's shard), the placements the rule chose and this rank's place in
 * the mesh. It runs with the DTensor hook off, so ops it calls act on the
 * local shards. */
typedef struct pd_spmd_local {
  pd_op_id id;
  const pd_attrs *attrs;
  pd_tensor *const *in;
  int n_in, n_out;
  const pd_meta *in_meta, *out_meta; /* global */
  const pd_spmd_dist *in_dist, *out_dist;
  pd_dist_process_mesh *mesh;
  const int64_t *coords; /* this rank's coordinates in mesh */
} pd_spmd_local;
/* The first global index of this rank's shard of a dim of `global`
 * elements sharded by mesh axis `axis` (0 when axis < 0). */
int64_t pd_ap_local_start(const pd_spmd_local *c, int axis, int64_t global);
/* Records op c->id's grad node over c->in and out (the local step computed
 * out with other ops, grad off), when grad mode and an input ask for one. */
pd_status pd_ap_record_node(const pd_spmd_local *c, pd_tensor **out, int n_out);
/* Sums v[0..n-1] in place over each mesh axis that shards input i of c
 * (shards' Partial(sum) statistics: lamb_'s norms); v is
 * unchanged on failure. Every rank of those axes calls it. */
pd_status pd_ap_sum_over_shards(const pd_spmd_local *c, int i, double *v, int n);
/* Runs fn (the op's outputs from other ops, grad off), then records op
 * c->id's own grad node over them; *n_out = c->n_out. */
pd_status pd_ap_local_computed(const pd_spmd_local *c, pd_status (*fn)(const pd_spmd_local *, pd_tensor **),
                               pd_tensor **out, int *n_out);
/* The nn family's rules (embedding, cross entropy, dropout, attention,
 * swiglu_grad, slice_grad, index_add, the elementwise losses); NULL for
 * other ops. */
pd_spmd_fn pd_ap_rule_nn(pd_op_id id);
/* addmm, dot and the indexed ops (gather_nd, scatter_nd_add, scatter,
 * scatter_; spmd_rules_index.c); NULL for other ops. */
pd_spmd_fn pd_ap_rule_index(pd_op_id id);
/* The op (and its attrs) that runs op c->id on this rank's shards where a
 * rule asks for a local step that is one op: c_embedding(_grad),
 * c_softmax_with_cross_entropy(_grad), dropout of a shard, multinomial of
 * a row shard, scatter(_) into a row shard, squeeze(_) as reshape(_) to
 * the output's shard, c_nll_loss(_grad) (spmd_local.c; c->in is not
 * read). PD_ERR_UNIMPLEMENTED for the other local steps. */
pd_status pd_ap_local_op(const pd_spmd_local *c, pd_op_id *id, pd_attrs *a);
/* The local step of embedding, cross entropy, dropout, multinomial,
 * scatter(_), squeeze(_) and nll_loss's mean in eager: pd_ap_local_op's op
 * on c->in, then c->id's grad node (pd_ap_local_computed). A rule's local step is one op (one a Program
 * can hold) exactly when it is this function. */
pd_status pd_ap_local_step(const pd_spmd_local *c, pd_tensor **out, int *n_out);
/* Installs the kernels of the communication ops (comm_op_kernels.c). */
void pd_ap_install_comm_ops(void);
/* The other random ops drawn at their elements' global indices
 * (spmd_local_random.c). */
pd_status pd_ap_local_alpha_dropout(const pd_spmd_local *c, pd_tensor **out, int *n_out);
pd_status pd_ap_local_rrelu(const pd_spmd_local *c, pd_tensor **out, int *n_out);
pd_status pd_ap_local_bernoulli(const pd_spmd_local *c, pd_tensor **out, int *n_out);
/* lamb_ on a sharded parameter (spmd_local_optim.c). */
pd_status pd_ap_local_lamb(const pd_spmd_local *c, pd_tensor **out, int *n_out);
/* The op's rule: its row's, else its family's; NULL when it has none. */
pd_spmd_fn pd_ap_rule_of(pd_op_id id);
/* The sharding stages' placement of a parameter placed as a (shard_optimizer
 * and Strategy.sharding alike): a's placements with Shard(d) on mesh axis
 * `axis`, d the first tensor dim no other axis shards. False (out = a's)
 * when a is not Replicate on that axis or every dim is taken. */
bool pd_ap_sharded_placements(int axis, const pd_dist_attr *a, pd_dist_placement *out);
/* The stage (1-3) of an optimizer from shard_optimizer with a shard_fn,
 * its sharding mesh axis and that axis' size; 0 (*axis, *degree
 * untouched) for any other optimizer. */
int pd_ap_shard_optimizer_stage(const pd_optimizer *opt, int *axis, int *degree);

/* Whether op id is an optimizer update (sgd_, adam_, ...). */
bool pd_ap_is_update_op(pd_op_id id);
/* The fallback: every input and output replicated. */
pd_status pd_ap_rule_replicated(pd_spmd_args *s);

#endif
