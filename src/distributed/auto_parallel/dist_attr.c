/* Placements (Shard, Replicate, Partial) and a DTensor's dist attr: the
 * checks, the shard geometry and the rules' dims_mapping form. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/shape_check.h"
#include "ap_internal.h"

pd_dist_placement pd_dist_shard(int dim) { return (pd_dist_placement){PD_DIST_SHARD, dim, PD_REDUCE_SUM}; }
pd_dist_placement pd_dist_replicate(void) { return (pd_dist_placement){PD_DIST_REPLICATE, 0, PD_REDUCE_SUM}; }
pd_dist_placement pd_dist_partial(pd_reduce_op reduce_type) {
  return (pd_dist_placement){PD_DIST_PARTIAL, 0, reduce_type};
}

bool pd_dist_placement_equal(pd_dist_placement a, pd_dist_placement b) {
  if (a.kind != b.kind) return false;
  if (a.kind == PD_DIST_SHARD) return a.dim == b.dim;
  if (a.kind == PD_DIST_PARTIAL) return a.reduce_type == b.reduce_type;
  return true;
}

/* All zero is Replicate on every axis. */
_Static_assert(PD_DIST_REPLICATE == 0 && PD_REDUCE_SUM == 0, "pd_ap_replicated is zero-initialized");
const pd_dist_placement pd_ap_replicated[PD_DIST_MAX_MESH_DIMS];

bool pd_ap_placements_equal(const pd_dist_placement *a, const pd_dist_placement *b, int n) {
  for (int i = 0; i < n; i++)
    if (!pd_dist_placement_equal(a[i], b[i])) return false;
  return true;
}

static const char *placement_str(pd_dist_placement p, char *buf, size_t cap) {
  if (p.kind == PD_DIST_SHARD)
    snprintf(buf, cap, "Shard(dim=%d)", p.dim);
  else if (p.kind == PD_DIST_PARTIAL)
    snprintf(buf, cap, "Partial(reduce_type=%s)", pd_reduce_op_name(p.reduce_type));
  else if (p.kind == PD_DIST_REPLICATE)
    snprintf(buf, cap, "Replicate()");
  else
    snprintf(buf, cap, "invalid placement kind %d", (int)p.kind);
  return buf;
}

pd_status pd_ap_check_placements(const char *op, const pd_dist_process_mesh *m, const pd_dist_placement *p,
                                 int n, int ndim) {
  if (!m) return pd_set_error(PD_ERR_INVALID, "%s: mesh is NULL", op);
  if (!p && n > 0) return pd_set_error(PD_ERR_INVALID, "%s: placements is NULL", op);
  char buf[256];
  if (n != m->ndim)
    return pd_set_error(PD_ERR_INVALID,
                        "%s: %d placements for mesh %s of %d dims (one placement per mesh dim is required)",
                        op, n, pd_ap_mesh_str(m, buf, sizeof buf), m->ndim);
  for (int i = 0; i < n; i++) {
    char pb[64];
    switch (p[i].kind) {
      case PD_DIST_REPLICATE:
        break;
      case PD_DIST_SHARD:
        if (p[i].dim < -ndim || p[i].dim >= (ndim > 0 ? ndim : 0))
          return pd_set_error(PD_ERR_INDEX,
                              "%s: placement %d is Shard(dim=%d), out of range for a tensor of rank %d", op,
                              i, p[i].dim, ndim);
        for (int j = 0; j < i; j++) {
          int dj = p[j].dim < 0 ? p[j].dim + ndim : p[j].dim, di = p[i].dim < 0 ? p[i].dim + ndim : p[i].dim;
          if (p[j].kind == PD_DIST_SHARD && dj == di)
            return pd_set_error(PD_ERR_UNIMPLEMENTED,
                                "%s: placements %d and %d both shard tensor dim %d; sharding one dim over "
                                "several mesh dims is not supported yet",
                                op, j, i, di);
        }
        break;
      case PD_DIST_PARTIAL:
        if ((unsigned)p[i].reduce_type >= PD_NUM_REDUCE_OPS)
          return pd_set_error(PD_ERR_INVALID,
                              "%s: placement %d is Partial with reduce_type %d (not a reduce op)", op, i,
                              (int)p[i].reduce_type);
        break;
      default:
        return pd_set_error(PD_ERR_INVALID, "%s: placement %d: %s", op, i,
                            placement_str(p[i], pb, sizeof pb));
    }
  }
  return PD_OK;
}

pd_dist_attr *pd_ap_attr_new(pd_dist_process_mesh *m, const pd_dist_placement *p, int ndim,
                             const int64_t *shape) {
  pd_dist_attr *a = calloc(1, sizeof *a);
  if (!a) {
    pd_set_error(PD_ERR_MEMORY, "auto_parallel: out of memory");
    return NULL;
  }
  a->mesh = pd_dist_process_mesh_retain(m);
  a->n = m->ndim;
  for (int i = 0; i < a->n; i++) {
    a->p[i] = p[i];
    if (p[i].kind == PD_DIST_SHARD && p[i].dim < 0) a->p[i].dim += ndim;
    if (p[i].kind != PD_DIST_SHARD) a->p[i].dim = 0;
    if (p[i].kind != PD_DIST_PARTIAL) a->p[i].reduce_type = PD_REDUCE_SUM;
  }
  a->ndim = ndim;
  for (int d = 0; d < ndim; d++) a->shape[d] = shape[d];
  return a;
}

pd_dist_attr *pd_ap_attr_replicated(pd_dist_process_mesh *m, int ndim, const int64_t *shape) {
  return pd_ap_attr_new(m, pd_ap_replicated, ndim, shape);
}

pd_dist_attr *pd_ap_attr_copy(const pd_dist_attr *a) {
  return pd_ap_attr_new(a->mesh, a->p, a->ndim, a->shape);
}

void pd_ap_attr_free(void *attr) {
  pd_dist_attr *a = attr;
  if (!a) return;
  pd_dist_process_mesh_release(a->mesh);
  free(a);
}

void pd_ap_attr_set(pd_tensor *t, pd_dist_attr *a) {
  if (t->dist_attr && t->dist_attr_free) t->dist_attr_free(t->dist_attr);
  t->dist_attr = a;
  t->dist_attr_free = a ? pd_ap_attr_free : NULL;
}

const char *pd_ap_attr_str(const pd_dist_attr *a, char *buf, size_t cap) {
  if (!a) {
    snprintf(buf, cap, "(dense)");
    return buf;
  }
  char mb[200], sh[160];
  size_t n =
      (size_t)snprintf(buf, cap, "{process_mesh: %s, placements: [", pd_ap_mesh_str(a->mesh, mb, sizeof mb));
  for (int i = 0; i < a->n && n < cap; i++) {
    char pb[64];
    n += (size_t)snprintf(buf + n, cap - n, "%s%s", i ? ", " : "", placement_str(a->p[i], pb, sizeof pb));
  }
  if (n < cap) snprintf(buf + n, cap - n, "], shape: %s}", pd_shape_str(a->ndim, a->shape, sh, sizeof sh));
  return buf;
}

void pd_ap_shard_range(int64_t global, int64_t n, int64_t c, int64_t *start, int64_t *len) {
  int64_t chunk = (global + n - 1) / n;
  int64_t s = c * chunk;
  if (s > global) s = global;
  int64_t l = global - s < chunk ? global - s : chunk;
  *start = s;
  *len = l;
}

int pd_ap_local_shape(const pd_dist_attr *a, int64_t *shape) {
  int64_t c[PD_DIST_MAX_MESH_DIMS];
  if (!pd_ap_mesh_coords(a->mesh, pd_ap_my_rank(), c)) {
    shape[0] = 0;
    return 1;
  }
  for (int d = 0; d < a->ndim; d++) shape[d] = a->shape[d];
  for (int m = 0; m < a->n; m++)
    if (a->p[m].kind == PD_DIST_SHARD) {
      int64_t s, l;
      pd_ap_shard_range(a->shape[a->p[m].dim], a->mesh->shape[m], c[m], &s, &l);
      shape[a->p[m].dim] = l;
    }
  return a->ndim;
}

bool pd_ap_op_attrs_hold_out_shape(pd_op_id id) {
  return id == PD_OP_reshape || id == PD_OP_reshape_ || id == PD_OP_expand || id == PD_OP_broadcast_to ||
         id == PD_OP_slice_grad || id == PD_OP_scatter_along || id == PD_OP_nll_loss_grad;
}

void pd_ap_localize_out_shape(const pd_dist_attr *out, pd_attrs *a) {
  a->nv[0] = pd_ap_local_shape(out, a->v[0]);
}

void pd_ap_to_spmd(const pd_dist_placement *p, int n, int ndim, pd_spmd_dist *d) {
  for (int k = 0; k < PD_MAX_DIMS; k++) d->dims_mapping[k] = -1;
  for (int m = 0; m < PD_SPMD_MAX_MESH_DIMS; m++) d->partial[m] = -1;
  for (int m = 0; m < n && m < PD_SPMD_MAX_MESH_DIMS; m++) {
    if (p[m].kind == PD_DIST_SHARD && p[m].dim < ndim) d->dims_mapping[p[m].dim] = (int8_t)m;
    if (p[m].kind == PD_DIST_PARTIAL) d->partial[m] = (int8_t)p[m].reduce_type;
  }
}

void pd_ap_from_spmd(const pd_spmd_dist *d, int n, int ndim, pd_dist_placement *p) {
  for (int m = 0; m < n && m < PD_SPMD_MAX_MESH_DIMS; m++) {
    p[m] = pd_dist_replicate();
    if (d->partial[m] >= 0) p[m] = pd_dist_partial((pd_reduce_op)d->partial[m]);
    for (int k = 0; k < ndim; k++)
      if (d->dims_mapping[k] == m) p[m] = pd_dist_shard(k);
  }
}
