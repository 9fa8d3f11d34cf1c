/* Helpers shared by the shape and indexing ops. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "manipulation_util.h"
#include "paddlec/ops.h"

pd_status pd_mu_check_index_dtype(const char *op, const char *what, const pd_tensor *idx) {
  if (idx->dtype != PD_INT32 && idx->dtype != PD_INT64)
    return pd_set_error(PD_ERR_DTYPE, "%s: %s must be an int32 or int64 tensor, got %s", op, what,
                        pd_dtype_name(idx->dtype));
  return PD_OK;
}

char *pd_mu_pos_str(int ndim, const int64_t *shape, int64_t flat, char *buf, size_t cap) {
  int64_t c[PD_MAX_DIMS];
  for (int d = ndim - 1; d >= 0; d--) {
    c[d] = shape[d] ? flat % shape[d] : 0;
    flat = shape[d] ? flat / shape[d] : 0;
  }
  if (ndim == 0) {
    snprintf(buf, cap, "[0]");
    return buf;
  }
  return pd_shape_str(ndim, c, buf, cap);
}

pd_status pd_mu_index_error(const char *op, const char *what, int ndim, const int64_t *shape, int64_t flat,
                            int64_t value, int axis, int64_t size, bool allow_neg) {
  char pos[160];
  return pd_set_error(PD_ERR_INDEX,
                      "%s: %s%s = %lld is out of range for axis %d of size %lld (valid range [%lld, %lld))",
                      op, what, pd_mu_pos_str(ndim, shape, flat, pos, sizeof pos), (long long)value, axis,
                      (long long)size, (long long)(allow_neg ? -size : 0), (long long)size);
}

pd_status pd_mu_read_raw(const char *op, const char *what, const pd_tensor *idx, int64_t **out) {
  pd_status st = pd_mu_check_index_dtype(op, what, idx);
  if (st != PD_OK) return st;
  int64_t n = idx->numel;
  int64_t *v = malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
  if (!v) return pd_set_error(PD_ERR_MEMORY, "%s: out of memory", op);
  if (idx->is_contiguous) {
    const void *p = pd_tensor_data(idx);
    if (idx->dtype == PD_INT64)
      memcpy(v, p, sizeof(int64_t) * (size_t)n);
    else
      for (int64_t i = 0; i < n; i++) v[i] = ((const int32_t *)p)[i];
  } else if (n > 0 && pd_tensor_copy_to(idx, v, n, PD_INT64) < 0) {
    free(v);
    return pd_last_status();
  }
  *out = v;
  return PD_OK;
}

pd_status pd_mu_read_indices(const char *op, const char *what, const pd_tensor *idx, int axis, int64_t size,
                             bool allow_neg, int64_t **out) {
  int64_t *v = NULL, n = idx->numel;
  pd_status st = pd_mu_read_raw(op, what, idx, &v);
  if (st != PD_OK) return st;
  int64_t lo = allow_neg ? -size : 0;
  for (int64_t i = 0; i < n; i++) {
    if (v[i] < lo || v[i] >= size) {
      int64_t bad = v[i];
      free(v);
      return pd_mu_index_error(op, what, idx->ndim, idx->shape, i, bad, axis, size, allow_neg);
    }
    if (v[i] < 0) v[i] += size;
  }
  *out = v;
  return PD_OK;
}

pd_status pd_mu_axes(const char *op, int n, const int64_t *axes, int ndim, int *ax, bool *mask) {
  for (int d = 0; d < PD_MAX_DIMS; d++) mask[d] = false;
  for (int k = 0; k < n; k++) {
    pd_status st = pd_norm_axis(op, axes[k], ndim, &ax[k]);
    if (st != PD_OK) return st;
    if (mask[ax[k]])
      return pd_set_error(PD_ERR_INVALID, "%s: axis %lld appears twice", op, (long long)axes[k]);
    mask[ax[k]] = true;
  }
  return PD_OK;
}

pd_status pd_mu_set_list(const char *op, const char *what, pd_attrs *a, int slot, int n, const int64_t *v) {
  if (n < 0 || n > PD_MAX_DIMS || (n > 0 && !v))
    return pd_set_error(PD_ERR_INVALID, "%s: %s has %d entries (expected 0 to %d)", op, what, n, PD_MAX_DIMS);
  a->nv[slot] = n;
  if (n) memcpy(a->v[slot], v, sizeof(int64_t) * (size_t)n);
  return PD_OK;
}

void pd_mu_become(pd_tensor *x, pd_tensor *r, bool take_layout) {
  if (take_layout) {
    x->ndim = r->ndim;
    memcpy(x->shape, r->shape, sizeof x->shape);
    memcpy(x->strides, r->strides, sizeof x->strides);
    x->numel = r->numel;
    x->is_contiguous = r->is_contiguous;
    pd_storage *s = x->storage;
    int64_t off = x->offset;
    x->storage = r->storage;
    x->offset = r->offset;
    r->storage = s;
    r->offset = off;
    if (r->dist_attr) { /* a DTensor's shape means nothing without the attr that goes with it */
      void *da = x->dist_attr;
      void (*da_free)(void *) = x->dist_attr_free;
      x->dist_attr = r->dist_attr;
      x->dist_attr_free = r->dist_attr_free;
      r->dist_attr = da;
      r->dist_attr_free = da_free;
    }
  }
  if (r->grad_fn) { /* the autograd identity moves to x; r drops x's old one */
    pd_node *fn = x->grad_fn;
    bool weak = x->grad_fn_weak;
    int idx = x->out_index;
    x->grad_fn = r->grad_fn;
    x->grad_fn_weak = r->grad_fn_weak;
    x->out_index = r->out_index;
    x->stop_gradient = r->stop_gradient;
    r->grad_fn = fn;
    r->grad_fn_weak = weak;
    r->out_index = idx;
  }
  x->storage->version++;
  pd_tensor_release(r);
}

/* r placed as x and checked to fit x's data; r is taken. */
static pd_tensor *placed_as(const char *op, pd_tensor *x, pd_tensor *r) {
  pd_dist_place_as_fn place_as = pd_dispatch_get_dist_place_as();
  if (place_as && (x->dist_attr || r->dist_attr) && !(r = place_as(op, x, r))) return NULL;
  if (r->dtype != x->dtype || r->ndim != x->ndim || !pd_shape_eq(x->ndim, x->shape, r->shape)) {
    char b[160];
    pd_set_error(PD_ERR_SHAPE, "%s: the result (%s, shape %s) cannot be written back into x (%s, shape %s)",
                 op, pd_dtype_name(r->dtype), PD_SHAPE_STR(r), pd_dtype_name(x->dtype),
                 pd_shape_str(x->ndim, x->shape, b, sizeof b));
    pd_tensor_release(r);
    return NULL;
  }
  return r;
}

pd_tensor *pd_mu_inplace_on_copy(pd_op_id inplace_id, pd_op_id id, pd_tensor *const *in, int n_in,
                                 const pd_attrs *a) {
  const char *name = pd_op_table[inplace_id]->name;
  pd_tensor *x = in[0], *use[PD_MAX_OUTPUTS];
  if (n_in > PD_MAX_OUTPUTS) {
    pd_set_error(PD_ERR_INVALID, "%s: too many inputs (%d)", name, n_in);
    return NULL;
  }
  if (!x->grad_fn && !x->stop_gradient) {
    pd_mu_leaf_inplace_error(name);
    return NULL;
  }
  if (pd_check_inplace_target(name, x) != PD_OK) return NULL; /* written without the dispatcher */
  pd_internal_enter();
  pd_tensor *xc = pd_assign(x);
  for (int i = 1; i < n_in; i++) use[i] = in[i];
  use[0] = xc;
  pd_tensor *r = xc ? pd_dispatch1(id, use, n_in, a) : NULL;
  if (r) r = placed_as(name, x, r);
  pd_tensor_release(xc);
  if (r) pd_mu_copy_into(x, r);
  pd_internal_leave();
  if (!r) return NULL;
  pd_mu_become(x, r, false);
  return pd_scope_track(pd_tensor_retain(x));
}

bool pd_mu_would_record(pd_tensor *const *in, int n) {
  if (!pd_grad_mode_enabled() || !pd_dispatch_get_autograd()) return false;
  for (int i = 0; i < n; i++)
    if (in[i] && !in[i]->stop_gradient) return true;
  return false;
}

pd_status pd_mu_leaf_inplace_error(const char *op) {
  return pd_set_error(PD_ERR_STATE,
                      "%s: a leaf tensor that needs a gradient (stop_gradient=False) cannot be modified "
                      "inplace",
                      op);
}

void pd_mu_copy_into(pd_tensor *dst, const pd_tensor *src) {
  pdk_copy(src->ndim, src->shape, pd_tensor_data(dst), dst->strides, pd_tensor_data(src), src->strides,
           (int64_t)pd_dtype_size(src->dtype));
}
