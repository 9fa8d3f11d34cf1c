/* Checked shape arithmetic: element counts, strides and byte sizes of
 * shapes that come from user values, refused with an error naming the op
 * and the shape when they do not fit int64 (instead of a wrapped size). */
#include "core_internal.h"
#include "shape_check.h"
#include "tensor_impl.h"

pd_status pd_shape_overflow_error(const char *op, int ndim, const int64_t *shape) {
  char b[256];
  return pd_set_error(PD_ERR_SHAPE, "%s: shape %s has more than INT64_MAX elements", op,
                      pd_shape_str(ndim, shape, b, sizeof b));
}

pd_status pd_shape_numel_checked(const char *op, int ndim, const int64_t *shape, int64_t *numel) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++)
    if (pd_mul_overflow(n, shape[i], &n)) return pd_shape_overflow_error(op, ndim, shape);
  if (numel) *numel = n;
  return PD_OK;
}

pd_status pd_shape_check_full(const char *op, pd_dtype dt, int ndim, const int64_t *shape, bool unknown_ok) {
  /* strides count empty dims as 1, so they can overflow with no elements;
   * unknown dims (-1, while a Program is built) count as 1 too */
  int64_t numel = 1, span = 1, nbytes;
  bool numel_over = false, span_over = false;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] < 0 && !(unknown_ok && shape[i] == -1)) {
      char b[256];
      return pd_set_error(PD_ERR_SHAPE, "%s: shape %s has a negative dim (%lld)", op,
                          pd_shape_str(ndim, shape, b, sizeof b), (long long)shape[i]);
    }
    int64_t d = shape[i] < 0 ? 1 : shape[i];
    numel_over |= pd_mul_overflow(numel, d, &numel);
    span_over |= pd_mul_overflow(span, d > 1 ? d : 1, &span);
  }
  if (!numel_over && !span_over && !pd_mul_overflow(numel, (int64_t)pd_dtype_size_fast(dt), &nbytes))
    return PD_OK;
  if (numel_over) return pd_shape_overflow_error(op, ndim, shape);
  char b[256];
  pd_shape_str(ndim, shape, b, sizeof b);
  if (span_over)
    return pd_set_error(PD_ERR_SHAPE,
                        "%s: shape %s is too large: its strides overflow int64 although it has no elements",
                        op, b);
  return pd_set_error(PD_ERR_SHAPE, "%s: shape %s of %s is too large: more than INT64_MAX bytes", op, b,
                      pd_dtype_name(dt));
}
