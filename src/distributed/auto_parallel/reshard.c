/* reshard: moves a DTensor's global value to other placements (and meshes).
 * Each step acts on one mesh axis (the 1-d transitions of Paddle's table):
 * S->R all_gather, R->S local slice, P->R all_reduce, P->S reduce_scatter,
 * R->P local fill, S(i)->S(j) alltoall; an n-d reshard is a sequence of
 * them (Paddle's SameNdMesh order), and a move to another mesh of the same
 * shape sends each shard from process i of one mesh to process i of the
 * other. Uneven shards are padded with zeros to the ceil size around the
 * collective and trimmed after. The steps work on dense local tensors and
 * record no gradient; pd_ap_reshard wraps them as a differentiable op. */
#include <stdlib.h>
#include <string.h>

#include "../../core/core_internal.h"
#include "../comm/group_internal.h"
#include "ap_internal.h"
#include "paddlec/autograd.h"
#include "paddlec/creation.h"
#include "paddlec/manipulation.h"

/* ---- dense helpers (local tensors, no dist attr) ------------------------ */
/* x[..., s:s+l, ...] along dim d: a view. */
static pd_tensor *narrow(pd_tensor *x, int d, int64_t s, int64_t l) {
  int64_t shape[PD_MAX_DIMS];
  memcpy(shape, x->shape, sizeof(int64_t) * (size_t)x->ndim);
  shape[d] = l;
  return pd_tensor_new_view(x, x->ndim, shape, x->strides, x->offset + s * x->strides[d]);
}

/* A contiguous copy (or x itself when contiguous). Takes x. */
static pd_tensor *dense(pd_tensor *x) {
  if (!x || x->is_contiguous) return x;
  pd_tensor *c = pd_contiguous(x);
  pd_tensor_release(x);
  return c;
}

/* x padded with zeros along d to `to` elements. New reference. */
static pd_tensor *pad_dim(pd_tensor *x, int d, int64_t to) {
  if (x->shape[d] >= to) return pd_tensor_retain(x);
  int64_t shape[PD_MAX_DIMS];
  memcpy(shape, x->shape, sizeof(int64_t) * (size_t)x->ndim);
  shape[d] = to - x->shape[d];
  pd_tensor *z = pd_zeros(x->ndim, shape, x->dtype);
  if (!z) return NULL;
  pd_tensor *parts[2] = {x, z};
  pd_tensor *r = pd_concat(parts, 2, d);
  pd_tensor_release(z);
  return r;
}

/* An uninitialised tensor of x's shape with dim d of `len` elements (a
 * buffer a collective fills). */
static pd_tensor *buffer_like(const pd_tensor *x, int d, int64_t len) {
  int64_t shape[PD_MAX_DIMS];
  memcpy(shape, x->shape, sizeof(int64_t) * (size_t)x->ndim);
  shape[d] = len;
  return pd_empty(x->ndim, shape, x->dtype);
}

/* ---- one mesh axis ------------------------------------------------------- */
typedef struct axis_ctx {
  pd_dist_process_mesh *mesh;
  int axis;
  int64_t n, c;       /* axis size, this rank's coordinate */
  pd_dist_group *g;   /* the axis group (n > 1) */
  int grank[1 << 10]; /* group rank of each coordinate */
  bool in_order;      /* grank[k] == k: the group's order is the mesh's */
} axis_ctx;

/* comm: the step communicates, so it needs the axis group; the local steps
 * (R->S, R->P) must not make it, as only the mesh's ranks run them and a
 * group is made by every rank of the world. */
static pd_status axis_init(axis_ctx *x, pd_dist_process_mesh *m, int axis, bool comm) {
  int64_t co[PD_DIST_MAX_MESH_DIMS];
  pd_ap_mesh_coords(m, pd_ap_my_rank(), co);
  x->mesh = m;
  x->axis = axis;
  x->n = m->shape[axis];
  x->c = co[axis];
  x->g = NULL;
  if (x->n == 1 || !comm) return PD_OK;
  if (!(x->g = pd_ap_axis_group(m, axis))) return pd_last_status();
  int64_t st = 1;
  for (int d = m->ndim - 1; d > axis; d--) st *= m->shape[d];
  int64_t base = pd_ap_mesh_index_of(m, pd_ap_my_rank()) - x->c * st;
  x->in_order = true;
  for (int64_t k = 0; k < x->n; k++) {
    x->grank[k] = pd_dist_group_get_group_rank(x->g, m->ids[base + k * st]);
    x->in_order &= x->grank[k] == k;
  }
  return PD_OK;
}

/* A narrowed to its first `l0` elements along d0 and `l1` along d1 (a
 * dense copy only when that cuts anything). Takes a. */
static pd_tensor *trim2(pd_tensor *a, int d0, int64_t l0, int d1, int64_t l1) {
  if (a && a->shape[d0] != l0) {
    pd_tensor *v = narrow(a, d0, 0, l0);
    pd_tensor_release(a);
    a = v;
  }
  if (a && a->shape[d1] != l1) {
    pd_tensor *v = narrow(a, d1, 0, l1);
    pd_tensor_release(a);
    a = v;
  }
  return dense(a);
}

/* Shard(d) -> Replicate: all_gather of the padded shards, trimmed. With
 * the group in mesh order every shard lands straight in its place in the
 * result along any d (the collective writes the rows of each block);
 * otherwise the gathered shards are concatenated along d in mesh order. */
static pd_tensor *s_to_r(const axis_ctx *ax, pd_tensor *x, int d, int64_t global) {
  if (ax->n == 1) return pd_tensor_retain(x);
  int64_t chunk = (global + ax->n - 1) / ax->n;
  pd_tensor *f = dense(pad_dim(x, d, chunk));
  if (!f) return NULL;
  pd_dist_opts o = {.group = ax->g};
  pd_tensor *r = NULL;
  if (ax->in_order) {
    pd_tensor *all = buffer_like(f, d, chunk * ax->n);
    if (all && pd_dist_all_gather_dim(all, f, d, &o) == PD_OK)
      r = trim2(pd_tensor_retain(all), d, global, d, global);
    pd_tensor_release(all);
    pd_tensor_release(f);
    return r;
  }
  pd_tensor *list[1 << 10] = {0};
  if (pd_dist_all_gather(list, f, &o) == PD_OK) {
    pd_tensor *ordered[1 << 10];
    for (int64_t k = 0; k < ax->n; k++) ordered[k] = list[ax->grank[k]];
    pd_tensor *cat = pd_concat(ordered, (int)ax->n, d);
    if (cat) r = trim2(cat, d, global, d, global);
  }
  for (int64_t k = 0; k < ax->n; k++) pd_tensor_release(list[k]);
  pd_tensor_release(f);
  return r;
}

/* Replicate -> Shard(d): this coordinate's slice. */
static pd_tensor *r_to_s(const axis_ctx *ax, pd_tensor *x, int d) {
  int64_t s, l;
  pd_ap_shard_range(x->shape[d], ax->n, ax->c, &s, &l);
  return dense(narrow(x, d, s, l));
}

/* Partial(op) -> Replicate: all_reduce into a new buffer (the input is
 * kept as it is without a copy of it first). */
static pd_tensor *p_to_r(const axis_ctx *ax, pd_tensor *x, pd_reduce_op op) {
  if (ax->n == 1) return pd_clone(x, x->dtype);
  pd_tensor *src = dense(pd_tensor_retain(x));
  pd_tensor *y = src ? pd_empty(x->ndim, x->shape, x->dtype) : NULL;
  pd_dist_opts o = {.group = ax->g};
  if (y && pd_dist_all_reduce_into(y, src, op, &o) != PD_OK) {
    pd_tensor_release(y);
    y = NULL;
  }
  pd_tensor_release(src);
  return y;
}

/* Replicate -> Partial(op): coordinate 0 keeps the value, the others the
 * identity of op (sum: 0, prod: 1; avg, max and min keep the value). */
static pd_tensor *r_to_p(const axis_ctx *ax, pd_tensor *x, pd_reduce_op op) {
  if (ax->c == 0 || op == PD_REDUCE_AVG || op == PD_REDUCE_MAX || op == PD_REDUCE_MIN)
    return pd_clone(x, x->dtype);
  return pd_full_like(x, op == PD_REDUCE_PROD ? 1.0 : 0.0, x->dtype);
}

/* Partial(op) -> Shard(d): reduce_scatter of the padded value's blocks
 * along d, trimmed. With the group in mesh order the collective reads each
 * block's rows in place; otherwise the blocks are copied out in group
 * order first. */
static pd_tensor *p_to_s(const axis_ctx *ax, pd_tensor *x, pd_reduce_op op, int d) {
  if (ax->n == 1) return pd_clone(x, x->dtype);
  int64_t global = x->shape[d], chunk = (global + ax->n - 1) / ax->n, s, l;
  pd_tensor *f = dense(pad_dim(x, d, chunk * ax->n));
  if (!f) return NULL;
  pd_tensor *list[1 << 10] = {0};
  pd_tensor *out = buffer_like(f, d, chunk), *r = NULL;
  pd_dist_opts o = {.group = ax->g};
  bool ok = out != NULL;
  if (ok && ax->in_order) {
    ok = pd_dist_reduce_scatter_dim(out, f, d, op, &o) == PD_OK;
  } else {
    for (int64_t k = 0; k < ax->n && ok; k++)
      ok = (list[ax->grank[k]] = dense(narrow(f, d, k * chunk, chunk))) != NULL;
    ok = ok && pd_dist_reduce_scatter(out, list, op, &o) == PD_OK;
  }
  if (ok) {
    pd_ap_shard_range(global, ax->n, ax->c, &s, &l);
    r = trim2(pd_tensor_retain(out), d, l, d, l);
  }
  for (int64_t k = 0; k < ax->n; k++) pd_tensor_release(list[k]);
  pd_tensor_release(out);
  pd_tensor_release(f);
  return r;
}

/* Shard(i) -> Shard(j): alltoall of padded blocks; block k of this rank is
 * its i-shard restricted to coordinate k's j-shard. With the group in mesh
 * order it is one alltoall along dims (j out, i in) on the padded shard,
 * the blocks read and written in place; otherwise blocks are copied out,
 * exchanged as a list and concatenated. Shards start at k * chunk, so the
 * valid part of the result is a prefix along both dims. */
static pd_tensor *s_to_s(const axis_ctx *ax, pd_tensor *x, int i, int j, int64_t gi, int64_t gj) {
  int64_t ci = (gi + ax->n - 1) / ax->n, cj = (gj + ax->n - 1) / ax->n, s, l, sj, lj;
  pd_tensor *in[1 << 10] = {0}, *out[1 << 10] = {0}, *pieces[1 << 10] = {0};
  pd_tensor *r = NULL;
  pd_dist_opts o = {.group = ax->g};
  pd_ap_shard_range(gj, ax->n, ax->c, &sj, &lj);
  bool ok = true;
  if (ax->in_order) {
    pd_tensor *bj = pad_dim(x, j, cj * ax->n);
    pd_tensor *f = bj ? dense(pad_dim(bj, i, ci)) : NULL;
    pd_tensor_release(bj);
    pd_tensor *res = NULL;
    if (f) {
      int64_t shape[PD_MAX_DIMS];
      memcpy(shape, f->shape, sizeof(int64_t) * (size_t)f->ndim);
      shape[i] = ci * ax->n;
      shape[j] = cj;
      res = pd_empty(f->ndim, shape, f->dtype);
    }
    if (res && pd_dist_alltoall_dim(res, f, j, i, &o) == PD_OK)
      r = trim2(pd_tensor_retain(res), i, gi, j, lj);
    pd_tensor_release(res);
    pd_tensor_release(f);
    return r;
  }
  for (int64_t k = 0; k < ax->n && ok; k++) {
    pd_ap_shard_range(gj, ax->n, k, &s, &l);
    pd_tensor *b = narrow(x, j, s, l);
    pd_tensor *bj = b ? pad_dim(b, j, cj) : NULL;
    pd_tensor *bij = bj ? pad_dim(bj, i, ci) : NULL;
    pd_tensor_release(b);
    pd_tensor_release(bj);
    ok = (in[ax->grank[k]] = dense(bij)) != NULL;
  }
  if (ok && pd_dist_alltoall(out, in, &o) == PD_OK) {
    for (int64_t k = 0; k < ax->n && ok; k++) {
      pd_ap_shard_range(gi, ax->n, k, &s, &l);
      pd_tensor *b = narrow(out[ax->grank[k]], i, 0, l);
      pieces[k] = b ? narrow(b, j, 0, lj) : NULL;
      pd_tensor_release(b);
      ok = pieces[k] != NULL;
    }
    if (ok) r = pd_concat(pieces, (int)ax->n, i);
  }
  for (int64_t k = 0; k < ax->n; k++) {
    pd_tensor_release(in[k]);
    pd_tensor_release(out[k]);
    pd_tensor_release(pieces[k]);
  }
  return dense(r);
}

/* ---- the n-d driver ------------------------------------------------------ */
static pd_status no_rule(const pd_dist_attr *src, const pd_dist_attr *dst, const char *why) {
  char a[600], b[600];
  return pd_set_error(PD_ERR_UNIMPLEMENTED,
                      "reshard: can not reshard from in_dist_attr=%s to out_dist_attr=%s (%s)",
                      pd_ap_attr_str(src, a, sizeof a), pd_ap_attr_str(dst, b, sizeof b), why);
}

static bool is_p(pd_dist_placement p) { return p.kind == PD_DIST_PARTIAL; }
static bool is_s(pd_dist_placement p, int d) { return p.kind == PD_DIST_SHARD && p.dim == d; }

/* Replaces *x by step's result (taking the old one); false on error. */
static bool step(pd_tensor **x, pd_tensor *r) {
  pd_tensor_release(*x);
  *x = r;
  return r != NULL;
}

pd_tensor *pd_ap_reshard_same_mesh(pd_tensor *x, pd_dist_process_mesh *m, const pd_dist_attr *src,
                                   const pd_dist_attr *dst) {
  pd_dist_placement cur[PD_DIST_MAX_MESH_DIMS];
  const pd_dist_placement *tgt = dst->p;
  int n = m->ndim, nd = dst->ndim;
  const int64_t *gs = dst->shape;
  memcpy(cur, src->p, sizeof cur);
  axis_ctx ax;
  /* 1-d S(i) -> S(j): one alltoall */
  if (n == 1 && cur[0].kind == PD_DIST_SHARD && tgt[0].kind == PD_DIST_SHARD && cur[0].dim != tgt[0].dim) {
    if (axis_init(&ax, m, 0, true) != PD_OK) goto fail;
    if (ax.n == 1) return x;
    step(&x, s_to_s(&ax, x, cur[0].dim, tgt[0].dim, gs[cur[0].dim], gs[tgt[0].dim]));
    return x;
  }
  /* 1. Partial axes the target neither keeps nor shards: all_reduce */
  for (int a = 0; a < n; a++)
    if (is_p(cur[a]) && !(is_p(tgt[a]) && tgt[a].reduce_type == cur[a].reduce_type) &&
        tgt[a].kind != PD_DIST_SHARD) {
      if (axis_init(&ax, m, a, true) != PD_OK || !step(&x, p_to_r(&ax, x, cur[a].reduce_type))) goto fail;
      cur[a] = pd_dist_replicate();
    }
  /* 2. dims sharded where the target does not shard them: all_gather */
  for (int d = nd - 1; d >= 0; d--)
    for (int a = 0; a < n; a++)
      if (is_s(cur[a], d) && !is_s(tgt[a], d)) {
        if (axis_init(&ax, m, a, true) != PD_OK || !step(&x, s_to_r(&ax, x, d, gs[d]))) goto fail;
        cur[a] = pd_dist_replicate();
      }
  /* 3. new Partial axes */
  for (int a = 0; a < n; a++)
    if (is_p(tgt[a]) && !is_p(cur[a])) {
      if (axis_init(&ax, m, a, false) != PD_OK || !step(&x, r_to_p(&ax, x, tgt[a].reduce_type))) goto fail;
      cur[a] = tgt[a];
    }
  /* 4. new shards: reduce_scatter from Partial, else a local slice */
  for (int d = nd - 1; d >= 0; d--)
    for (int a = 0; a < n; a++)
      if (is_s(tgt[a], d) && !is_s(cur[a], d)) {
        if (axis_init(&ax, m, a, is_p(cur[a])) != PD_OK) goto fail;
        if (!step(&x, is_p(cur[a]) ? p_to_s(&ax, x, cur[a].reduce_type, d) : r_to_s(&ax, x, d))) goto fail;
        cur[a] = tgt[a];
      }
  if (!pd_ap_placements_equal(cur, tgt, n)) {
    no_rule(src, dst, "no sequence of steps reaches the target");
    goto fail;
  }
  return x;
fail:
  pd_tensor_release(x);
  return NULL;
}

/* Same placements onto another mesh of the same shape: process i of src's
 * mesh sends its shard to process i of dst's. x is taken. */
static pd_tensor *move_mesh(pd_tensor *x, const pd_dist_attr *src, const pd_dist_attr *dst) {
  int me = pd_ap_my_rank();
  int64_t i_src = pd_ap_mesh_index_of(src->mesh, me), i_dst = pd_ap_mesh_index_of(dst->mesh, me);
  pd_dist_task *task = NULL;
  pd_tensor *sent = NULL, *r = NULL;
  pd_status st = PD_OK;
  if (i_src >= 0 && dst->mesh->ids[i_src] != me) {
    sent = dense(pd_tensor_retain(x));
    st = sent ? pd_dist_isend(sent, dst->mesh->ids[i_src], NULL, &task) : pd_last_status();
  }
  if (st == PD_OK && i_dst >= 0) {
    if (src->mesh->ids[i_dst] == me) {
      r = pd_tensor_retain(x);
    } else {
      pd_dist_attr *moved = pd_ap_attr_new(dst->mesh, src->p, src->ndim, src->shape);
      int64_t shape[PD_MAX_DIMS];
      int nd = moved ? pd_ap_local_shape(moved, shape) : 0;
      pd_ap_attr_free(moved);
      r = moved ? pd_empty(nd, shape, x->dtype) : NULL; /* the receive fills it */
      pd_dist_opts o = {0};
      if (!r || pd_dist_recv(r, src->mesh->ids[i_dst], &o) != PD_OK) {
        pd_tensor_release(r);
        r = NULL;
        st = pd_last_status();
      }
    }
  } else if (st == PD_OK) {
    r = pd_zeros(1, (const int64_t[]){0}, x->dtype);
  }
  if (task) {
    pd_status ts = pd_dist_task_wait(task);
    pd_dist_task_free(task);
    if (st == PD_OK && ts != PD_OK) {
      pd_tensor_release(r);
      r = NULL;
    }
  }
  pd_tensor_release(sent);
  pd_tensor_release(x);
  return r;
}

static bool needs_comm(const pd_dist_attr *src, const pd_dist_attr *dst) {
  if (!pd_dist_process_mesh_equal(src->mesh, dst->mesh)) return true;
  for (int a = 0; a < src->n; a++) {
    if (src->mesh->shape[a] == 1) continue;
    if (src->p[a].kind == PD_DIST_SHARD && !pd_dist_placement_equal(src->p[a], dst->p[a])) return true;
    if (is_p(src->p[a]) && !pd_dist_placement_equal(src->p[a], dst->p[a])) return true;
  }
  return false;
}

pd_tensor *pd_ap_reshard_local(pd_tensor *local, const pd_dist_attr *src, const pd_dist_attr *dst) {
  if (src->ndim != dst->ndim || !pd_shape_eq(src->ndim, src->shape, dst->shape)) {
    no_rule(src, dst, "the global shapes differ");
    return NULL;
  }
  bool same = pd_dist_process_mesh_equal(src->mesh, dst->mesh);
  if (!same && (src->mesh->ndim != dst->mesh->ndim ||
                !pd_shape_eq(src->mesh->ndim, src->mesh->shape, dst->mesh->shape))) {
    int64_t index;
    if (pd_ap_submesh_axis(src->mesh, dst->mesh, &index) >= 0 ||
        pd_ap_submesh_axis(dst->mesh, src->mesh, &index) >= 0)
      return pd_ap_reshard_submesh(local, src, dst);
    no_rule(src, dst, "meshes of different shapes, neither a sub-mesh of the other");
    return NULL;
  }
  if (needs_comm(src, dst)) { /* every rank makes the groups, members or not */
    if (pd_ap_mesh_prepare(src->mesh) != PD_OK || pd_ap_mesh_prepare(dst->mesh) != PD_OK) return NULL;
    if (!same && !pd_dist_is_initialized()) {
      pd_set_error(PD_ERR_STATE, "reshard: moving to another mesh needs the parallel environment");
      return NULL;
    }
  }
  pd_tensor *x = pd_tensor_retain(local);
  if (!same) {
    x = move_mesh(x, src, dst);
    if (!x) return NULL;
  }
  if (!pd_dist_process_mesh_contains(dst->mesh, pd_ap_my_rank())) {
    pd_tensor_release(x);
    return pd_zeros(1, (const int64_t[]){0}, local->dtype);
  }
  x = pd_ap_reshard_same_mesh(x, dst->mesh, src, dst);
  return dense(x);
}

/* ---- the differentiable op ---------------------------------------------- */
typedef struct reshard_ctx {
  pd_dist_attr *src; /* the input's attr (replicated on dst's mesh for a dense input) */
  pd_dist_attr *dst;
  bool src_dense;
} reshard_ctx;

static void reshard_ctx_free(void *p) {
  reshard_ctx *c = p;
  pd_ap_attr_free(c->src);
  pd_ap_attr_free(c->dst);
  free(c);
}

/* The attr of t as an input: its own, or replicated on mesh for a dense t. */
static pd_dist_attr *attr_of(const pd_tensor *t, pd_dist_process_mesh *mesh, bool partial_to_r) {
  pd_dist_attr *a =
      t->dist_attr ? pd_ap_attr_copy(pd_ap_attr(t)) : pd_ap_attr_replicated(mesh, t->ndim, t->shape);
  if (a && partial_to_r)
    for (int m = 0; m < a->n; m++)
      if (is_p(a->p[m])) a->p[m] = pd_dist_replicate();
  return a;
}

/* The context pd_ap_reshard hands to the forward (which gives it to the
 * node). */
static _Thread_local reshard_ctx *t_pending;

static pd_status reshard_forward(pd_pylayer_ctx *ctx, pd_tensor *const *in, int n_in, pd_tensor **out,
                                 int n_out) {
  (void)n_in, (void)n_out;
  reshard_ctx *c = t_pending;
  t_pending = NULL;
  pd_pylayer_set_data(ctx, c, reshard_ctx_free);
  pd_tensor *local = c->src_dense ? pd_tensor_retain(in[0]) : pd_ap_local_alias(in[0]);
  pd_tensor *y = local ? pd_ap_reshard_local(local, c->src, c->dst) : NULL;
  pd_tensor_release(local);
  pd_dist_attr *a = y ? pd_ap_attr_copy(c->dst) : NULL;
  out[0] = a ? pd_ap_wrap(y, a) : NULL;
  if (!a) pd_tensor_release(y);
  return out[0] ? PD_OK : pd_last_status();
}

/* The gradient of a reshard is the output's gradient placed as the input
 * was (Partial becomes Replicate: every partial term has the same
 * gradient); a dense input gets a dense gradient. */
static pd_status reshard_backward(pd_pylayer_ctx *ctx, pd_tensor *const *g, int n_out, pd_tensor **gin,
                                  int n_in) {
  (void)n_out, (void)n_in;
  reshard_ctx *c = pd_pylayer_data(ctx);
  pd_dist_attr *gattr =
      g[0]->dist_attr ? pd_ap_attr_copy(pd_ap_attr(g[0])) : attr_of(g[0], c->dst->mesh, false);
  if (gattr && !g[0]->dist_attr) { /* a dense gradient has the output's layout, Partial read as Replicate */
    for (int m = 0; m < gattr->n; m++) gattr->p[m] = is_p(c->dst->p[m]) ? pd_dist_replicate() : c->dst->p[m];
    gattr->ndim = c->dst->ndim;
    memcpy(gattr->shape, c->dst->shape, sizeof gattr->shape);
  }
  pd_dist_attr *want = pd_ap_attr_copy(c->src);
  if (want)
    for (int m = 0; m < want->n; m++)
      if (is_p(want->p[m])) want->p[m] = pd_dist_replicate();
  pd_tensor *local =
      gattr && want ? (g[0]->dist_attr ? pd_ap_local_alias(g[0]) : pd_tensor_retain(g[0])) : NULL;
  pd_tensor *r = local ? pd_ap_reshard_local(local, gattr, want) : NULL;
  pd_tensor_release(local);
  pd_ap_attr_free(gattr);
  if (r && !c->src_dense) {
    gin[0] = pd_ap_wrap(r, want);
    want = NULL;
  } else {
    gin[0] = r;
  }
  pd_ap_attr_free(want);
  return gin[0] ? PD_OK : pd_last_status();
}

static const pd_pylayer k_reshard = {"reshard", reshard_forward, reshard_backward};

pd_tensor *pd_ap_reshard(pd_tensor *t, const pd_dist_attr *dst) {
  reshard_ctx *c = calloc(1, sizeof *c);
  if (!c) {
    pd_set_error(PD_ERR_MEMORY, "reshard: out of memory");
    return NULL;
  }
  c->src_dense = t->dist_attr == NULL;
  c->src = attr_of(t, dst->mesh, false);
  c->dst = pd_ap_attr_copy(dst);
  if (!c->src || !c->dst) {
    reshard_ctx_free(c);
    return NULL;
  }
  pd_tensor *out = NULL;
  t_pending = c;
  pd_status st = pd_pylayer_apply(&k_reshard, &t, 1, &out, 1);
  if (t_pending) { /* the forward never ran */
    reshard_ctx_free(t_pending);
    t_pending = NULL;
  }
  return st == PD_OK ? out : NULL;
}
