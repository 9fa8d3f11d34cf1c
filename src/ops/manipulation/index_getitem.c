/* Python indexing (Tensor.__getitem__ / __setitem__) composed of public ops:
 * each subscript is applied in turn to the tensor built so far, tracking
 * the axis it reaches, so the one tensor index lands where NumPy puts it. */
#include <stdio.h>
#include <string.h>

#include "../elementwise/elementwise_util.h"
#include "paddlec/autograd.h"
#include "paddlec/ops.h"

/* Replaces *cur by next (a new reference or NULL), releasing the old one. */
static bool step(pd_tensor **cur, pd_tensor *next) {
  pd_tensor_release(*cur);
  *cur = next;
  return next != NULL;
}

/* Python's slice.indices(dim): start and the element count for step. */
static int64_t slice_count(int64_t dim, int64_t *start, int64_t stop, int64_t stp) {
  int64_t lo = stp > 0 ? 0 : -1, hi = stp > 0 ? dim : dim - 1;
  int64_t b = *start, e = stop;
  if (b == PD_IX_END)
    b = stp > 0 ? lo : hi;
  else if (b < 0)
    b = b + dim < lo ? lo : b + dim;
  else if (b > hi)
    b = hi;
  if (e == PD_IX_END)
    e = stp > 0 ? hi : lo;
  else if (e < 0)
    e = e + dim < lo ? lo : e + dim;
  else if (e > hi)
    e = hi;
  *start = b;
  if (stp > 0) return e > b ? (e - b + stp - 1) / stp : 0;
  return b > e ? (b - e + (-stp) - 1) / (-stp) : 0;
}

static pd_tensor *apply_slice(pd_tensor *cur, int64_t ax, const pd_index *it) {
  int64_t dim = cur->shape[ax], b = it->start;
  int64_t cnt = slice_count(dim, &b, it->stop, it->step);
  if (cnt == 0 || (it->step == 1 && cnt == dim)) /* empty, or the whole axis */
    return cnt ? pd_assign(cur) : pd_slice(cur, 1, &ax, (int64_t[]){0}, (int64_t[]){0});
  /* end one step past the last element; for a negative step that may be
   * -1, which strided_slice reads as "through element 0" */
  int64_t last = b + (cnt - 1) * it->step, end = last + (it->step > 0 ? 1 : -1);
  return pd_strided_slice(cur, 1, &ax, &b, &end, &it->step);
}

/* x[t] along ax for an integer tensor t of any shape. */
static pd_tensor *apply_int_tensor(pd_tensor *cur, int64_t ax, pd_tensor *t, int k) {
  int64_t dim = cur->shape[ax];
  pd_tmps T = {0};
  /* index_select counts negative indices from the end, as getitem does */
  pd_tensor *flat = PD_K(pd_reshape(t, 1, (int64_t[]){-1}));
  pd_tensor *g = flat ? pd_index_select(cur, flat, ax) : NULL;
  if (!g && t && pd_last_status() == PD_ERR_INDEX) {
    char msg[512];
    snprintf(msg, sizeof msg, "%s", pd_last_error());
    pd_set_error(PD_ERR_INDEX, "getitem: subscript %d (a tensor) indexes a dim of size %lld: %s", k,
                 (long long)dim, msg);
  }
  int64_t shape[PD_MAX_DIMS];
  int nd = 0;
  bool fits = g && cur->ndim - 1 + t->ndim <= PD_MAX_DIMS;
  if (g && !fits)
    pd_set_error(PD_ERR_SHAPE, "getitem: the result would have %d dims (at most %d)", cur->ndim - 1 + t->ndim,
                 PD_MAX_DIMS);
  if (fits) {
    for (int64_t d = 0; d < ax; d++) shape[nd++] = cur->shape[d];
    for (int d = 0; d < t->ndim; d++) shape[nd++] = t->shape[d];
    for (int64_t d = ax + 1; d < cur->ndim; d++) shape[nd++] = cur->shape[d];
  }
  pd_tensor *out = fits ? pd_reshape(g, nd, shape) : NULL;
  pd_tensor_release(g);
  pd_tmps_free(&T);
  return out;
}

/* x[mask] over dims [ax, ax + mask.ndim): they become one axis. */
static pd_tensor *apply_mask(pd_tensor *cur, int64_t ax, pd_tensor *m, int k) {
  for (int d = 0; d < m->ndim; d++)
    if (m->shape[d] != cur->shape[ax + d]) {
      pd_set_error(PD_ERR_SHAPE,
                   "getitem: subscript %d: the bool mask has shape %s, but the dims it indexes are %s "
                   "from axis %lld",
                   k, PD_SHAPE_STR(m), PD_SHAPE_STR(cur), (long long)ax);
      return NULL;
    }
  pd_tmps T = {0};
  pd_tensor *joined = m->ndim == 0 ? PD_K(pd_unsqueeze(cur, 1, &ax))
                                   : PD_K(pd_flatten(cur, ax, ax + (m->ndim > 0 ? m->ndim - 1 : 0)));
  pd_tensor *pos =
      PD_K(pd_reshape(PD_K(pd_nonzero(PD_K(pd_reshape(m, 1, (int64_t[]){-1})))), 1, (int64_t[]){-1}));
  pd_tensor *out = pos ? pd_index_select(joined, pos, ax) : NULL;
  pd_tmps_free(&T);
  return out;
}

/* Counts the dims the spec consumes; checks kinds and the single ellipsis
 * and tensor. Returns the ellipsis position (-1: none) or -2 on error. */
static int scan(const pd_tensor *x, const pd_index *idx, int n, int *consumed) {
  int ell = -1, ntensor = 0;
  *consumed = 0;
  for (int k = 0; k < n; k++) {
    switch (idx[k].kind) {
      case PD_IX_KIND_INT:
      case PD_IX_KIND_SLICE:
        if (idx[k].kind == PD_IX_KIND_SLICE && idx[k].step == 0) {
          pd_set_error(PD_ERR_INVALID, "getitem: subscript %d: slice step cannot be zero", k);
          return -2;
        }
        ++*consumed;
        break;
      case PD_IX_KIND_NEWAXIS:
        break;
      case PD_IX_KIND_ELLIPSIS:
        if (ell >= 0) {
          pd_set_error(PD_ERR_INVALID,
                       "getitem: an index can only have a single ellipsis (subscripts %d and %d)", ell, k);
          return -2;
        }
        ell = k;
        break;
      case PD_IX_KIND_TENSOR: {
        const pd_tensor *t = idx[k].tensor;
        if (!t) {
          if (pd_last_status() == PD_OK)
            pd_set_error(PD_ERR_INVALID, "getitem: subscript %d: tensor is NULL", k);
          return -2;
        }
        if (t->dtype != PD_BOOL && t->dtype != PD_INT32 && t->dtype != PD_INT64) {
          pd_set_error(PD_ERR_DTYPE,
                       "getitem: subscript %d: an index tensor must be bool, int32 or int64, got %s", k,
                       pd_dtype_name(t->dtype));
          return -2;
        }
        if (++ntensor > 1) {
          pd_set_error(PD_ERR_UNIMPLEMENTED,
                       "getitem: subscript %d: only one tensor subscript per index is supported", k);
          return -2;
        }
        *consumed += t->dtype == PD_BOOL ? t->ndim : 1;
        break;
      }
      default:
        pd_set_error(PD_ERR_INVALID, "getitem: subscript %d has an unknown kind %d", k, (int)idx[k].kind);
        return -2;
    }
  }
  if (*consumed > x->ndim) {
    pd_set_error(PD_ERR_INDEX, "getitem: too many indices: %d for a tensor of %d dims (shape %s)", *consumed,
                 x->ndim, PD_SHAPE_STR(x));
    return -2;
  }
  return ell;
}

static pd_tensor *getitem_impl(pd_tensor *x, const pd_index *idx, int n) {
  if (!x) {
    if (pd_last_status() == PD_OK) pd_set_error(PD_ERR_INVALID, "getitem: x is NULL");
    return NULL;
  }
  if (n < 0 || (n > 0 && !idx)) {
    pd_set_error(PD_ERR_INVALID, "getitem: %d subscripts at %p", n, (const void *)idx);
    return NULL;
  }
  int consumed;
  int ell = scan(x, idx, n, &consumed);
  if (ell == -2) return NULL;
  pd_tensor *cur = pd_tensor_retain(x);
  int64_t ax = 0;
  for (int k = 0; k < n && cur; k++) {
    const pd_index *it = &idx[k];
    if (cur->ndim >= PD_MAX_DIMS && it->kind == PD_IX_KIND_NEWAXIS) {
      pd_set_error(PD_ERR_SHAPE, "getitem: subscript %d: None would give more than %d dims", k, PD_MAX_DIMS);
      step(&cur, NULL);
      break;
    }
    switch (it->kind) {
      case PD_IX_KIND_ELLIPSIS:
        ax += x->ndim - consumed; /* the full slices it stands for */
        break;
      case PD_IX_KIND_NEWAXIS:
        step(&cur, pd_unsqueeze(cur, 1, &ax));
        ax++;
        break;
      case PD_IX_KIND_SLICE:
        step(&cur, apply_slice(cur, ax, it));
        ax++;
        break;
      case PD_IX_KIND_INT: {
        int64_t dim = cur->shape[ax], i = it->i < 0 ? it->i + dim : it->i;
        if (i < 0 || i >= dim) {
          pd_set_error(PD_ERR_INDEX,
                       "getitem: subscript %d: index %lld is out of range for a dim of size %lld", k,
                       (long long)it->i, (long long)dim);
          step(&cur, NULL);
          break;
        }
        if (step(&cur, pd_slice(cur, 1, &ax, &i, (int64_t[]){i + 1}))) step(&cur, pd_squeeze(cur, 1, &ax));
        break;
      }
      case PD_IX_KIND_TENSOR:
        if (it->tensor->dtype == PD_BOOL) {
          step(&cur, apply_mask(cur, ax, it->tensor, k));
          ax++;
        } else {
          step(&cur, apply_int_tensor(cur, ax, it->tensor, k));
          ax += it->tensor->ndim;
        }
        break;
    }
  }
  return cur;
}

pd_tensor *pd_getitem(pd_tensor *x, const pd_index *idx, int n) {
  pd_internal_enter();
  pd_tensor *r = getitem_impl(x, idx, n);
  /* never a view of x: x[0:2] is a new tensor, as Paddle's getitem */
  pd_tensor *out = r && x && r->storage == x->storage ? pd_assign(r) : pd_tensor_retain(r);
  pd_tensor_release(r);
  pd_internal_leave();
  return pd_scope_track(out);
}

/* The flat positions of x[idx] (int64, x[idx]'s shape) and v converted and
 * broadcast to that shape, both flattened. */
static pd_status positions(pd_tensor *x, const pd_index *idx, int n, pd_tensor *v, pd_tensor **pos,
                           pd_tensor **upd) {
  *pos = *upd = NULL;
  if (!v)
    return pd_last_status() != PD_OK ? pd_last_status() : pd_set_error(PD_ERR_INVALID, "setitem: v is NULL");
  if (x->numel < 0) /* the positions are numbered from x's size */
    return pd_set_error(PD_ERR_UNIMPLEMENTED, "setitem: x is a static Variable of unknown shape %s",
                        PD_SHAPE_STR(x));
  pd_tmps T = {0};
  pd_tensor *all = PD_K(pd_reshape(PD_K(pd_arange(0, (double)x->numel, 1, PD_INT64)), x->ndim, x->shape));
  pd_tensor *sel = all ? PD_K(getitem_impl(all, idx, n)) : NULL;
  pd_tensor *vc = sel ? PD_K(v->dtype == x->dtype ? pd_tensor_retain(v) : pd_cast(v, x->dtype)) : NULL;
  pd_tensor *vb = vc ? PD_K(pd_broadcast_to(vc, sel->ndim, sel->shape)) : NULL;
  if (vb) {
    *pos = pd_reshape(sel, 1, (int64_t[]){-1});
    *upd = pd_reshape(vb, 1, (int64_t[]){-1});
  }
  pd_tmps_free(&T);
  if (*pos && *upd) return PD_OK;
  pd_tensor_release(*pos);
  pd_tensor_release(*upd);
  *pos = *upd = NULL;
  return pd_last_status() != PD_OK ? pd_last_status() : PD_ERR_INVALID;
}

pd_status pd_setitem(pd_tensor *x, const pd_index *idx, int n, pd_tensor *v) {
  if (!x)
    return pd_last_status() != PD_OK ? pd_last_status() : pd_set_error(PD_ERR_INVALID, "setitem: x is NULL");
  if (!x->is_contiguous)
    return pd_set_error(PD_ERR_INVALID,
                        "setitem: x (shape %s) is not contiguous; write into a contiguous copy",
                        PD_SHAPE_STR(x));
  if (!x->stop_gradient && pd_is_grad_enabled())
    return pd_set_error(PD_ERR_INVALID,
                        "setitem: x requires a gradient; use pd_setitem_out (a copy, differentiable) or "
                        "write under pd_no_grad_begin");
  pd_internal_enter();
  pd_tensor *pos, *upd;
  pd_status st = positions(x, idx, n, v, &pos, &upd);
  pd_tensor *flat = st == PD_OK ? pd_reshape(x, 1, (int64_t[]){-1}) : NULL;
  pd_tensor *r = flat ? pd_scatter_(flat, pos, upd, true) : NULL;
  if (st == PD_OK && !r) st = pd_last_status();
  pd_tensor_release(r);
  pd_tensor_release(flat);
  pd_tensor_release(pos);
  pd_tensor_release(upd);
  pd_internal_leave();
  return st;
}

pd_tensor *pd_setitem_out(pd_tensor *x, const pd_index *idx, int n, pd_tensor *v) {
  if (!x) {
    if (pd_last_status() == PD_OK) pd_set_error(PD_ERR_INVALID, "setitem: x is NULL");
    return NULL;
  }
  pd_internal_enter();
  pd_tensor *pos, *upd, *out = NULL;
  if (positions(x, idx, n, v, &pos, &upd) == PD_OK) {
    pd_tmps T = {0};
    pd_tensor *flat = PD_K(pd_reshape(x, 1, (int64_t[]){-1}));
    pd_tensor *w = PD_K(pd_scatter(flat, pos, upd, true));
    out = w ? pd_reshape(w, x->ndim, x->shape) : NULL;
    pd_tmps_free(&T);
    pd_tensor_release(pos);
    pd_tensor_release(upd);
  }
  pd_internal_leave();
  return pd_scope_track(out);
}
