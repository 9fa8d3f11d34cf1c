/* DTensors: construction (shard_tensor, dtensor_from_local,
 * dtensor_from_fn), unshard_dtensor, reshard and the accessors. */
#include <stdio.h>
#include <string.h>

#include "../../core/core_internal.h"
#include "ap_internal.h"
#include "paddlec/creation.h"

pd_tensor *pd_ap_local_alias(const pd_tensor *t) {
  pd_tensor *v = pd_tensor_new_view(t, t->ndim, t->shape, t->strides, t->offset);
  if (v) v->stop_gradient = true;
  return v;
}

pd_tensor *pd_ap_wrap(pd_tensor *local, pd_dist_attr *a) {
  /* a fresh struct, so a tensor held elsewhere never gains the attr */
  pd_tensor *t = pd_ap_local_alias(local);
  pd_tensor_release(local);
  if (!t) {
    pd_ap_attr_free(a);
    return NULL;
  }
  pd_ap_attr_set(t, a);
  pd_ap_install_hook();
  return t;
}

/* An attr for t's global shape on mesh, after checking the placements. */
static pd_dist_attr *attr_for(const char *op, pd_dist_process_mesh *mesh, const pd_dist_placement *p, int n,
                              int ndim, const int64_t *shape) {
  if (pd_ap_check_placements(op, mesh, p, n, ndim) != PD_OK) return NULL;
  return pd_ap_attr_new(mesh, p, ndim, shape);
}

static pd_tensor *finish(pd_tensor *r) {
  pd_internal_leave();
  return r ? pd_scope_track(r) : NULL;
}

pd_tensor *pd_dist_shard_tensor(pd_tensor *data, pd_dist_process_mesh *mesh,
                                const pd_dist_placement *placements, int n_placements) {
  if (!data) {
    if (pd_last_status() == PD_OK) pd_set_error(PD_ERR_INVALID, "shard_tensor: data is NULL");
    return NULL;
  }
  if (data->dist_attr) return pd_dist_reshard(data, mesh, placements, n_placements);
  pd_internal_enter();
  pd_dist_attr *dst = attr_for("shard_tensor", mesh, placements, n_placements, data->ndim, data->shape);
  if (!dst) return finish(NULL);
  pd_dist_attr *src = pd_ap_attr_replicated(mesh, data->ndim, data->shape);
  pd_tensor *local = src ? pd_ap_reshard_local(data, src, dst) : NULL;
  pd_ap_attr_free(src);
  if (!local) {
    pd_ap_attr_free(dst);
    return finish(NULL);
  }
  if (data->param_info && !data->grad_fn) { /* a parameter stays itself */
    pd_tensor *own = local == data ? pd_clone(data, data->dtype) : pd_tensor_retain(local);
    pd_tensor_release(local);
    if (!own) {
      pd_ap_attr_free(dst);
      return finish(NULL);
    }
    pd_tensor_take_data(data, own);
    pd_tensor_release(own);
    pd_ap_attr_set(data, dst);
    pd_ap_install_hook();
    return finish(pd_tensor_retain(data));
  }
  if (local == data) { /* replicated: a copy, so the DTensor never aliases data */
    pd_tensor *c = pd_clone(data, data->dtype);
    pd_tensor_release(local);
    if (!(local = c)) {
      pd_ap_attr_free(dst);
      return finish(NULL);
    }
  }
  bool stop = data->stop_gradient;
  pd_tensor *r = pd_ap_wrap(local, dst);
  if (r) r->stop_gradient = stop;
  return finish(r);
}

pd_tensor *pd_dist_dtensor_from_local(pd_tensor *local, pd_dist_process_mesh *mesh,
                                      const pd_dist_placement *placements, int n_placements) {
  if (!local) {
    if (pd_last_status() == PD_OK) pd_set_error(PD_ERR_INVALID, "dtensor_from_local: local is NULL");
    return NULL;
  }
  if (local->dist_attr) {
    pd_set_error(PD_ERR_INVALID, "dtensor_from_local: local is already a DTensor (use its local_value)");
    return NULL;
  }
  if (pd_ap_check_placements("dtensor_from_local", mesh, placements, n_placements, local->ndim) != PD_OK)
    return NULL;
  int64_t shape[PD_MAX_DIMS];
  memcpy(shape, local->shape, sizeof(int64_t) * (size_t)local->ndim);
  for (int m = 0; m < n_placements; m++)
    if (placements[m].kind == PD_DIST_SHARD) {
      int d = placements[m].dim < 0 ? placements[m].dim + local->ndim : placements[m].dim;
      shape[d] *= mesh->shape[m];
    }
  pd_internal_enter();
  pd_dist_attr *a = pd_ap_attr_new(mesh, placements, local->ndim, shape);
  pd_tensor *r = a ? pd_ap_wrap(pd_tensor_retain(local), a) : NULL;
  if (r) r->stop_gradient = local->stop_gradient;
  return finish(r);
}

pd_tensor *pd_dist_dtensor_from_fn(pd_tensor *(*fn)(void *arg), void *arg, pd_dist_process_mesh *mesh,
                                   const pd_dist_placement *placements, int n_placements) {
  if (!fn) {
    pd_set_error(PD_ERR_INVALID, "dtensor_from_fn: fn is NULL");
    return NULL;
  }
  pd_internal_enter();
  pd_tensor *t = fn(arg);
  pd_internal_leave();
  if (!t) {
    if (pd_last_status() == PD_OK) pd_set_error(PD_ERR_INVALID, "dtensor_from_fn: fn returned NULL");
    return NULL;
  }
  pd_tensor *r = pd_dist_shard_tensor(t, mesh, placements, n_placements);
  pd_tensor_release(t);
  return r;
}

pd_tensor *pd_dist_reshard(pd_tensor *t, pd_dist_process_mesh *mesh, const pd_dist_placement *placements,
                           int n_placements) {
  if (!t) {
    if (pd_last_status() == PD_OK) pd_set_error(PD_ERR_INVALID, "reshard: tensor is NULL");
    return NULL;
  }
  pd_internal_enter();
  int ndim = t->dist_attr ? pd_ap_attr(t)->ndim : t->ndim;
  const int64_t *shape = t->dist_attr ? pd_ap_attr(t)->shape : t->shape;
  pd_dist_attr *dst = attr_for("reshard", mesh, placements, n_placements, ndim, shape);
  pd_tensor *r = dst ? pd_ap_reshard(t, dst) : NULL;
  pd_ap_attr_free(dst);
  return finish(r);
}

pd_tensor *pd_dist_unshard_dtensor(pd_tensor *t) {
  if (!t) {
    if (pd_last_status() == PD_OK) pd_set_error(PD_ERR_INVALID, "unshard_dtensor: tensor is NULL");
    return NULL;
  }
  if (!t->dist_attr) return pd_scope_track(pd_tensor_retain(t));
  pd_internal_enter();
  const pd_dist_attr *a = pd_ap_attr(t);
  pd_dist_attr *dst = pd_ap_attr_replicated(a->mesh, a->ndim, a->shape);
  pd_tensor *local = dst ? pd_ap_local_alias(t) : NULL;
  pd_tensor *r = local ? pd_ap_reshard_local(local, a, dst) : NULL;
  pd_tensor_release(local);
  pd_ap_attr_free(dst);
  return finish(r);
}

bool pd_dist_is_dist(const pd_tensor *t) { return t && t->dist_attr; }

pd_tensor *pd_dist_local_value(pd_tensor *t) {
  if (!t) {
    pd_set_error(PD_ERR_INVALID, "local_value: tensor is NULL");
    return NULL;
  }
  pd_internal_enter();
  return finish(t->dist_attr ? pd_ap_local_alias(t) : pd_tensor_retain(t));
}

int pd_dist_placements(const pd_tensor *t, pd_dist_placement *out, int cap) {
  if (!t || !t->dist_attr) return -1;
  const pd_dist_attr *a = pd_ap_attr(t);
  for (int m = 0; m < a->n && m < cap && out; m++) out[m] = a->p[m];
  return a->n;
}

pd_dist_process_mesh *pd_dist_process_mesh_of(const pd_tensor *t) {
  return t && t->dist_attr ? pd_ap_attr(t)->mesh : NULL;
}

int pd_dist_global_shape(const pd_tensor *t, int64_t *shape) {
  if (!t || !t->dist_attr) return -1;
  const pd_dist_attr *a = pd_ap_attr(t);
  if (shape) memcpy(shape, a->shape, sizeof(int64_t) * (size_t)a->ndim);
  return a->ndim;
}

const char *pd_dist_attr_str(const pd_tensor *t, char *buf, size_t cap) {
  if (!buf || cap == 0) return "";
  return pd_ap_attr_str(t ? pd_ap_attr(t) : NULL, buf, cap);
}
