/* Comparisons (equal ... greater_equal), logical_and/or/xor/not and
 * isnan/isinf/isfinite. Bool outputs; inputs of any dtype (binary ones are
 * promoted to one dtype and broadcast). Not differentiable. */
#include <float.h>

#include "elementwise_util.h"

#define FOR_ALL_TYPES(X) PD_FOR_NUMERIC_TYPES(X) X(b, uint8_t)
#define TABLE_ALL(prefix)                                                               \
  {                                                                                     \
    [PD_FLOAT32] = prefix##_f32, [PD_FLOAT64] = prefix##_f64, [PD_UINT8] = prefix##_u8, \
    [PD_INT8] = prefix##_i8, [PD_INT16] = prefix##_i16, [PD_INT32] = prefix##_i32,      \
    [PD_INT64] = prefix##_i64, [PD_BOOL] = prefix##_b                                   \
  }

#define BIN(name)                                                  \
  FOR_ALL_TYPES(BIN_##name)                                        \
  static const pd_ew_fn k_##name[PD_NUM_DTYPES] = TABLE_ALL(name); \
  PD_EW_KERNEL(name, k_##name)
#define BIN_equal(sfx, T) PD_EW_BINARY(equal_##sfx, T, uint8_t, x == y)
#define BIN_not_equal(sfx, T) PD_EW_BINARY(not_equal_##sfx, T, uint8_t, x != y)
#define BIN_less_than(sfx, T) PD_EW_BINARY(less_than_##sfx, T, uint8_t, x < y)
#define BIN_less_equal(sfx, T) PD_EW_BINARY(less_equal_##sfx, T, uint8_t, x <= y)
#define BIN_greater_than(sfx, T) PD_EW_BINARY(greater_than_##sfx, T, uint8_t, x > y)
#define BIN_greater_equal(sfx, T) PD_EW_BINARY(greater_equal_##sfx, T, uint8_t, x >= y)
#define BIN_logical_and(sfx, T) PD_EW_BINARY(logical_and_##sfx, T, uint8_t, (x != 0) & (y != 0))
#define BIN_logical_or(sfx, T) PD_EW_BINARY(logical_or_##sfx, T, uint8_t, (x != 0) | (y != 0))
#define BIN_logical_xor(sfx, T) PD_EW_BINARY(logical_xor_##sfx, T, uint8_t, (x != 0) ^ (y != 0))
BIN(equal)
BIN(not_equal)
BIN(less_than)
BIN(less_equal)
BIN(greater_than)
BIN(greater_equal)
BIN(logical_and)
BIN(logical_or)
BIN(logical_xor)

#define G(sfx, T) PD_EW_UNARY(logical_not_##sfx, T, uint8_t, x == 0)
FOR_ALL_TYPES(G)
#undef G
static const pd_ew_fn k_logical_not[PD_NUM_DTYPES] = TABLE_ALL(logical_not);
PD_EW_KERNEL(logical_not, k_logical_not)

/* isnan / isinf / isfinite: constant for integers and bool */
#define G(sfx, T)                                    \
  PD_EW_UNARY(isnan_##sfx, T, uint8_t, ((void)x, 0)) \
  PD_EW_UNARY(isinf_##sfx, T, uint8_t, ((void)x, 0)) \
  PD_EW_UNARY(isfinite_##sfx, T, uint8_t, ((void)x, 1))
PD_FOR_INT_TYPES(G)
G(b, uint8_t)
#undef G
PD_EW_UNARY(isnan_f32, float, uint8_t, x != x)
PD_EW_UNARY(isnan_f64, double, uint8_t, x != x)
PD_EW_UNARY(isinf_f32, float, uint8_t, fabsf(x) == INFINITY)
PD_EW_UNARY(isinf_f64, double, uint8_t, fabs(x) == INFINITY)
PD_EW_UNARY(isfinite_f32, float, uint8_t, fabsf(x) <= FLT_MAX)
PD_EW_UNARY(isfinite_f64, double, uint8_t, fabs(x) <= DBL_MAX)
static const pd_ew_fn k_isnan[PD_NUM_DTYPES] = TABLE_ALL(isnan);
static const pd_ew_fn k_isinf[PD_NUM_DTYPES] = TABLE_ALL(isinf);
static const pd_ew_fn k_isfinite[PD_NUM_DTYPES] = TABLE_ALL(isfinite);
PD_EW_KERNEL(isnan, k_isnan)
PD_EW_KERNEL(isinf, k_isinf)
PD_EW_KERNEL(isfinite, k_isfinite)

static pd_status meta_unary_bool(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                                 pd_meta *out, int *n_out) {
  pd_status st = pd_meta_unary(def, in, n_in, a, out, n_out);
  out->dtype = PD_BOOL;
  return st;
}

#define BIN_DEF(opname)                                                                                    \
  PD_OPDEF(opname, .attr_names = "", .n_in = 2, .n_out = 1, .flags = PD_OPF_PROMOTE | PD_OPF_HALF_VIA_F32, \
           .infer_meta = pd_meta_broadcast_bool, .kernel = {[PD_PLACE_CPU] = opname##_kernel},             \
           .flops = pd_flops_per_elem, .ew_fn = opname##_ew);                                              \
  pd_tensor *pd_##opname(pd_tensor *x, pd_tensor *y) {                                                     \
    pd_tensor *in[2] = {x, y};                                                                             \
    return pd_dispatch1(PD_OP_##opname, in, 2, NULL);                                                      \
  }
#define UN_DEF(opname)                                                                    \
  PD_OPDEF(opname, .attr_names = "", .n_in = 1, .n_out = 1, .flags = PD_OPF_HALF_VIA_F32, \
           .infer_meta = meta_unary_bool, .kernel = {[PD_PLACE_CPU] = opname##_kernel},   \
           .flops = pd_flops_per_elem, .ew_fn = opname##_ew);                             \
  pd_tensor *pd_##opname(pd_tensor *x) { return pd_dispatch1(PD_OP_##opname, &x, 1, NULL); }

BIN_DEF(equal)
BIN_DEF(not_equal)
BIN_DEF(less_than)
BIN_DEF(less_equal)
BIN_DEF(greater_than)
BIN_DEF(greater_equal)
BIN_DEF(logical_and)
BIN_DEF(logical_or)
BIN_DEF(logical_xor)
UN_DEF(logical_not)
UN_DEF(isnan)
UN_DEF(isinf)
UN_DEF(isfinite)
