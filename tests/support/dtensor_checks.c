#include "dtensor_checks.h"

#include <math.h>
#include <string.h>

bool dtensor_close(pd_tensor *a, pd_tensor *b, double tol) {
  if (!a || !b || pd_tensor_ndim(a) != pd_tensor_ndim(b) ||
      memcmp(pd_tensor_shape(a), pd_tensor_shape(b), sizeof(int64_t) * (size_t)pd_tensor_ndim(a)) != 0)
    return false;
  pd_tensor *ca = pd_contiguous(pd_cast(a, PD_FLOAT64)), *cb = pd_contiguous(pd_cast(b, PD_FLOAT64));
  if (!ca || !cb) return false;
  const double *x = pd_tensor_data(ca), *y = pd_tensor_data(cb);
  for (int64_t i = 0; i < pd_tensor_numel(ca); i++)
    if (!(fabs(x[i] - y[i]) <= tol * (1 + fabs(y[i])))) return false;
  return true;
}

bool dtensor_placed(const pd_tensor *t, const pd_dist_placement *want, int n) {
  pd_dist_placement p[PD_DIST_MAX_MESH_DIMS];
  if (!t || pd_dist_placements(t, p, PD_DIST_MAX_MESH_DIMS) != n) return false;
  for (int m = 0; m < n; m++)
    if (!pd_dist_placement_equal(p[m], want[m])) return false;
  return true;
}

pd_tensor *dtensor_weighted_sum(pd_tensor *y) {
  int64_t shape[PD_MAX_DIMS], n = 1;
  int nd = pd_dist_is_dist(y) ? pd_dist_global_shape(y, shape) : pd_tensor_ndim(y);
  if (!pd_dist_is_dist(y)) memcpy(shape, pd_tensor_shape(y), sizeof(int64_t) * (size_t)nd);
  for (int d = 0; d < nd; d++) n *= shape[d];
  pd_tensor *w = pd_arange(1, 1 + (double)n, 1, PD_FLOAT64);
  return pd_sum(pd_multiply(y, pd_reshape(w, nd, shape)), NULL, 0, false);
}
