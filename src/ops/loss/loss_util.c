/* Helpers shared by the loss ops. */
#include "loss_util.h"

#include <math.h>
#include <stdlib.h>

#include "../../kernels/cpu/reduce.h"
#include "paddlec/ops.h"

const char *pd_loss_reduction_name(pd_loss_reduction r) {
  switch (r) {
    case PD_REDUCTION_MEAN:
      return "mean";
    case PD_REDUCTION_SUM:
      return "sum";
    case PD_REDUCTION_NONE:
      return "none";
    case PD_REDUCTION_BATCHMEAN:
      return "batchmean";
  }
  return NULL;
}

pd_status pd_loss_check_reduction(const char *op, int64_t r, bool batchmean_ok) {
  if (r < PD_REDUCTION_MEAN || r > PD_REDUCTION_BATCHMEAN)
    return pd_set_error(PD_ERR_INVALID, "%s: reduction %lld is not one of 'mean', 'sum', 'none'%s", op,
                        (long long)r, batchmean_ok ? ", 'batchmean'" : "");
  if (r == PD_REDUCTION_BATCHMEAN && !batchmean_ok)
    return pd_set_error(PD_ERR_INVALID,
                        "%s: reduction 'batchmean' is not supported (expected 'mean', 'sum' or 'none'; "
                        "'batchmean' is for kl_div)",
                        op);
  return PD_OK;
}

double pd_loss_sum_all(const pd_tensor *t) {
  if (t->numel == 0) return 0.0;
  bool mask[PD_MAX_DIMS];
  for (int d = 0; d < PD_MAX_DIMS; d++) mask[d] = true;
  pd_reduce_geom g;
  pdk_reduce_geom_init(&g, t->ndim, t->shape, t->strides, mask);
  double s = 0;
  pdk_reduce_sum(&g, pd_data_ptr(t), t->dtype, &s, PD_FLOAT64);
  return s;
}

/* The first element (row-major) inside (lo, hi] or, with !inside, outside [lo, hi]. */
static pd_status find_first(pd_tensor *t, double lo, double hi, bool inside, int64_t *idx, double *v) {
  *idx = -1;
  if (t->is_meta)
    return pd_set_error(PD_ERR_STATE, "loss: a static Variable (shape %s) has no values to check",
                        PD_SHAPE_STR(t));
  if (t->numel == 0) return PD_OK;
  pd_tensor *c = t->is_contiguous ? pd_tensor_retain(t) : pd_contiguous(t);
  if (!c) return pd_last_status();
  const char *p = pd_data_ptr(c);
  size_t es = pd_dtype_size_fast(c->dtype);
  for (int64_t i = 0; i < c->numel; i++) {
    double x = c->dtype == PD_FLOAT32   ? (double)((const float *)p)[i]
               : c->dtype == PD_FLOAT64 ? ((const double *)p)[i]
                                        : pd_load_as_f64(p + (size_t)i * es, c->dtype);
    bool hit = inside ? (x > lo && x <= hi) : !(x >= lo && x <= hi);
    if (hit) {
      *idx = i;
      *v = x;
      break;
    }
  }
  pd_tensor_release(c);
  return PD_OK;
}

pd_status pd_loss_find_outside(pd_tensor *t, double lo, double hi, int64_t *idx, double *v) {
  return find_first(t, lo, hi, false, idx, v);
}
pd_status pd_loss_find_inside(pd_tensor *t, double lo, double hi, int64_t *idx, double *v) {
  return find_first(t, lo, hi, true, idx, v);
}

bool pd_loss_any_nonzero(pd_tensor *t) {
  int64_t idx;
  double v;
  /* a static Variable's values are not known while a Program is traced:
   * whatever depends on them must be kept */
  if (t->is_meta) return true;
  /* "outside [0, 0]" is non-zero (or NaN) */
  if (find_first(t, 0.0, 0.0, false, &idx, &v) != PD_OK) return true;
  return idx >= 0;
}

pd_tensor *pd_loss_reduce(pd_tensor *loss, pd_loss_reduction r) {
  if (r == PD_REDUCTION_NONE) return pd_tensor_retain(loss);
  /* A static Variable with an unknown dim (the batch) has no count to
   * divide by yet: the mean is an op that counts when the Program runs. */
  bool unknown = loss->numel < 0 || (r == PD_REDUCTION_BATCHMEAN && loss->ndim > 0 && loss->shape[0] < 0);
  if (unknown && r == PD_REDUCTION_MEAN) return pd_mean(loss, NULL, 0, false);
  if (unknown && r == PD_REDUCTION_BATCHMEAN) { /* the mean over dim 0 of the sums over the others */
    int64_t rest[PD_MAX_DIMS];
    for (int d = 1; d < loss->ndim; d++) rest[d - 1] = d;
    pd_tensor *per = loss->ndim > 1 ? pd_sum(loss, rest, loss->ndim - 1, false) : pd_tensor_retain(loss);
    pd_tensor *m = per ? pd_mean(per, NULL, 0, false) : NULL;
    pd_tensor_release(per);
    return m;
  }
  pd_tensor *s = pd_sum(loss, NULL, 0, false);
  if (!s || r == PD_REDUCTION_SUM) return s;
  double n = r == PD_REDUCTION_MEAN ? (double)loss->numel : loss->ndim > 0 ? (double)loss->shape[0] : 1.0;
  pd_tensor *m = pd_scale(s, 1.0 / n, 0.0, true);
  pd_tensor_release(s);
  return m;
}

pd_status pd_loss_labels_i64(const char *op, pd_tensor *label, int64_t n, int64_t ig, const int64_t **out,
                             pd_tensor **holder) {
  *holder = NULL;
  *out = NULL;
  pd_dtype dt = label->dtype;
  if (dt == PD_BOOL || !(pd_dtype_is_floating(dt) || dt == PD_UINT8 || dt == PD_INT8 || dt == PD_INT16 ||
                         dt == PD_INT32 || dt == PD_INT64))
    return pd_set_error(PD_ERR_DTYPE,
                        "%s: label dtype %s is not supported for hard labels (expected int64 or int32)", op,
                        pd_dtype_name(dt));
  pd_tensor *h;
  if (dt == PD_INT64 && label->is_contiguous) {
    h = pd_tensor_retain(label);
  } else {
    h = pd_tensor_new(PD_INT64, label->ndim, label->shape);
    if (!h) return pd_last_status();
    pd_tensor *c = label->is_contiguous ? pd_tensor_retain(label) : pd_contiguous(label);
    if (!c) {
      pd_tensor_release(h);
      return pd_last_status();
    }
    const char *p = pd_data_ptr(c);
    size_t es = pd_dtype_size_fast(dt);
    int64_t *o = pd_data_ptr(h);
    for (int64_t i = 0; i < c->numel; i++) {
      double v = pd_load_as_f64(p + (size_t)i * es, dt);
      if (v != floor(v) || !(fabs(v) < 9.2e18)) {
        pd_tensor_release(c);
        pd_tensor_release(h);
        return pd_set_error(PD_ERR_INVALID,
                            "%s: label value %g at index %lld is not a whole number (hard labels)", op, v,
                            (long long)i);
      }
      o[i] = (int64_t)v;
    }
    pd_tensor_release(c);
  }
  const int64_t *l = pd_data_ptr(h);
  for (int64_t i = 0; i < h->numel; i++) {
    if (l[i] != ig && (l[i] < 0 || l[i] >= n)) {
      pd_status st =
          pd_set_error(PD_ERR_INDEX,
                       "%s: label value %lld at index %lld is out of range for %lld classes "
                       "(expected 0 <= label < %lld, or ignore_index %lld)",
                       op, (long long)l[i], (long long)i, (long long)n, (long long)n, (long long)ig);
      pd_tensor_release(h);
      return st;
    }
  }
  *holder = h;
  *out = l;
  return PD_OK;
}

pd_status pd_loss_check_logits(const pd_op_def *def, const pd_tensor *x, int64_t axis, int *ax) {
  if (x->ndim == 0)
    return pd_set_error(PD_ERR_SHAPE, "%s: input must have at least 1 dimension (got a 0-D tensor)",
                        def->name);
  pd_status st = pd_norm_axis(def->name, axis, x->ndim, ax);
  if (st != PD_OK) return st;
  if (x->dtype != PD_FLOAT32 && x->dtype != PD_FLOAT64)
    return pd_set_error(PD_ERR_DTYPE, "%s: input dtype %s is not supported (expected a floating dtype)",
                        def->name, pd_dtype_name(x->dtype));
  return PD_OK;
}

pd_ce_geom pd_loss_class_geom(int ndim, const int64_t *shape, int axis) {
  pd_ce_geom g = {1, ndim ? shape[axis] : 1, 1};
  for (int d = 0; d < axis; d++) g.outer *= shape[d];
  for (int d = axis + 1; d < ndim; d++) g.inner *= shape[d];
  return g;
}

double pd_loss_flops(pd_tensor *const *in, int n_in, const pd_attrs *a, const pd_meta *out, int n_out) {
  (void)n_in;
  (void)a;
  (void)out;
  (void)n_out;
  return 4.0 * (double)in[0]->numel;
}

pd_status pd_loss_check_class_axis(const char *op, const char *what, const pd_tensor *x,
                                   const pd_tensor *label, int64_t axis, int *ax) {
  int nd = x->ndim;
  if (nd == 0)
    return pd_set_error(PD_ERR_SHAPE, "%s: %s must have at least 1 dimension (got a 0-D tensor)", op, what);
  pd_status st = pd_norm_axis(op, axis, nd, ax);
  if (st != PD_OK) return st;
  if (label->ndim != nd && label->ndim != nd - 1)
    return pd_set_error(PD_ERR_SHAPE,
                        "%s: label of shape %s does not fit %s of shape %s (expected rank %d or %d)", op,
                        PD_SHAPE_STR(label), what, PD_SHAPE_STR(x), nd - 1, nd);
  return PD_OK;
}
