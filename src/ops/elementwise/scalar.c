/* Python scalars against tensors (x / 2, mask > 0, 1 - x), lowered as
 * Paddle's Tensor operators lower them (eager_math_op_patch.cc):
 *   - the dtype: a float scalar (a value that is not a whole number) makes an
 *     integer or bool tensor float32; an integer scalar (a whole number)
 *     makes a bool tensor int64 and leaves every other dtype; division
 *     always makes an integer or bool tensor float32;
 *   - add, subtract, multiply, divide become scale (x * s + b, with
 *     divide's factor 1/s), one op and one pass;
 *   - the others compare or combine with a 0-D tensor of the value in the
 *     (converted) tensor's dtype, broadcast by the binary op. */
#include <math.h>

#include "elementwise_util.h"
#include "paddlec/ops.h"

static bool is_whole(double v) { return isfinite(v) && floor(v) == v; }

/* x converted as Paddle converts a tensor meeting a Python scalar; a new
 * reference (x retained when it keeps its dtype) or NULL. */
static pd_tensor *convert_for_scalar(pd_tensor *x, double v, bool true_division) {
  bool int_like = x->dtype == PD_BOOL || pd_dtype_is_integer(x->dtype);
  if (int_like && (true_division || !is_whole(v))) return pd_cast(x, PD_FLOAT32);
  if (x->dtype == PD_BOOL) return pd_cast(x, PD_INT64);
  return pd_tensor_retain(x);
}

static bool check_x(const char *op, const pd_tensor *x) {
  if (x) return true;
  if (pd_last_status() == PD_OK) pd_set_error(PD_ERR_INVALID, "%s: x is NULL", op);
  return false;
}

/* scale(x', s, b): the arithmetic forms. */
static pd_tensor *scaled(const char *op, pd_tensor *x, double v, bool true_division, double s, double b) {
  if (!check_x(op, x)) return NULL;
  pd_internal_enter();
  pd_tensor *xc = convert_for_scalar(x, v, true_division);
  pd_tensor *out = xc ? pd_scale(xc, s, b, true) : NULL;
  pd_tensor_release(xc);
  pd_internal_leave();
  return pd_scope_track(out);
}

pd_tensor *pd_add_scalar(pd_tensor *x, double y) { return scaled("add_scalar", x, y, false, 1.0, y); }
pd_tensor *pd_subtract_scalar(pd_tensor *x, double y) {
  return scaled("subtract_scalar", x, y, false, 1.0, -y);
}
pd_tensor *pd_scalar_subtract(double x, pd_tensor *y) {
  return scaled("scalar_subtract", y, x, false, -1.0, x);
}
pd_tensor *pd_multiply_scalar(pd_tensor *x, double y) {
  return scaled("multiply_scalar", x, y, false, y, 0.0);
}
pd_tensor *pd_divide_scalar(pd_tensor *x, double y) {
  return scaled("divide_scalar", x, y, true, 1.0 / y, 0.0);
}

/* op(x', full([], v)) or op(full([], v), x') when scalar_first. */
static pd_tensor *with_full(const char *op, pd_tensor *x, double v, bool true_division, bool scalar_first,
                            pd_tensor *(*fn)(pd_tensor *, pd_tensor *)) {
  if (!check_x(op, x)) return NULL;
  pd_internal_enter();
  pd_tensor *xc = convert_for_scalar(x, v, true_division);
  pd_tensor *s = xc ? pd_full(0, NULL, v, xc->dtype) : NULL;
  pd_tensor *out = s ? (scalar_first ? fn(s, xc) : fn(xc, s)) : NULL;
  pd_tensor_release(s);
  pd_tensor_release(xc);
  pd_internal_leave();
  return pd_scope_track(out);
}

pd_tensor *pd_scalar_divide(double x, pd_tensor *y) {
  return with_full("scalar_divide", y, x, true, true, pd_divide);
}
pd_tensor *pd_floor_divide_scalar(pd_tensor *x, double y) {
  return with_full("floor_divide_scalar", x, y, false, false, pd_floor_divide);
}
pd_tensor *pd_remainder_scalar(pd_tensor *x, double y) {
  return with_full("remainder_scalar", x, y, false, false, pd_remainder);
}
pd_tensor *pd_equal_scalar(pd_tensor *x, double y) {
  return with_full("equal_scalar", x, y, false, false, pd_equal);
}
pd_tensor *pd_not_equal_scalar(pd_tensor *x, double y) {
  return with_full("not_equal_scalar", x, y, false, false, pd_not_equal);
}
pd_tensor *pd_less_than_scalar(pd_tensor *x, double y) {
  return with_full("less_than_scalar", x, y, false, false, pd_less_than);
}
pd_tensor *pd_less_equal_scalar(pd_tensor *x, double y) {
  return with_full("less_equal_scalar", x, y, false, false, pd_less_equal);
}
pd_tensor *pd_greater_than_scalar(pd_tensor *x, double y) {
  return with_full("greater_than_scalar", x, y, false, false, pd_greater_than);
}
pd_tensor *pd_greater_equal_scalar(pd_tensor *x, double y) {
  return with_full("greater_equal_scalar", x, y, false, false, pd_greater_equal);
}
