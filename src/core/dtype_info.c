/* Numeric limits of the dtypes (paddle.finfo, paddle.iinfo) and the default
 * floating dtype (paddle.set_default_dtype / get_default_dtype). */
#include <float.h>
#include <stdatomic.h>
#include <stdint.h>

#include "paddlec/core.h"

/* Paddle's values (numpy's for float32/float64; the half formats by their
 * bit layouts). resolution is 10^-digits10 of the format. */
static const pd_dtype_finfo kFinfo[] = {
    {16, -65504.0, 65504.0, 0.0009765625, 6.103515625e-05, 6.103515625e-05, 1e-3, "float16"},
    {16, -3.3895313892515355e38, 3.3895313892515355e38, 0.0078125, 1.1754943508222875e-38,
     1.1754943508222875e-38, 1e-2, "bfloat16"},
    {32, -FLT_MAX, FLT_MAX, FLT_EPSILON, FLT_MIN, FLT_MIN, 1e-6, "float32"},
    {64, -DBL_MAX, DBL_MAX, DBL_EPSILON, DBL_MIN, DBL_MIN, 1e-15, "float64"},
};

pd_status pd_finfo(pd_dtype dt, pd_dtype_finfo *out) {
  if (!out) return pd_set_error(PD_ERR_INVALID, "finfo: out is NULL");
  if (!pd_dtype_is_floating(dt))
    return pd_set_error(PD_ERR_DTYPE,
                        "finfo: dtype must be float16, bfloat16, float32 or float64, got %s (%d); use "
                        "pd_iinfo for integer dtypes",
                        pd_dtype_name(dt), (int)dt);
  *out = kFinfo[dt - PD_FLOAT16];
  return PD_OK;
}

pd_status pd_iinfo(pd_dtype dt, pd_dtype_iinfo *out) {
  if (!out) return pd_set_error(PD_ERR_INVALID, "iinfo: out is NULL");
  switch (dt) {
    case PD_UINT8:
      *out = (pd_dtype_iinfo){8, 0, UINT8_MAX, "uint8"};
      return PD_OK;
    case PD_INT8:
      *out = (pd_dtype_iinfo){8, INT8_MIN, INT8_MAX, "int8"};
      return PD_OK;
    case PD_INT16:
      *out = (pd_dtype_iinfo){16, INT16_MIN, INT16_MAX, "int16"};
      return PD_OK;
    case PD_INT32:
      *out = (pd_dtype_iinfo){32, INT32_MIN, INT32_MAX, "int32"};
      return PD_OK;
    case PD_INT64:
      *out = (pd_dtype_iinfo){64, INT64_MIN, INT64_MAX, "int64"};
      return PD_OK;
    default:
      return pd_set_error(PD_ERR_DTYPE,
                          "iinfo: dtype must be uint8, int8, int16, int32 or int64, got %s (%d); use "
                          "pd_finfo for floating dtypes",
                          pd_dtype_name(dt), (int)dt);
  }
}

/* Process-wide, as in Paddle; relaxed because it is a plain setting. */
static _Atomic int g_default_dtype = PD_FLOAT32;

pd_status pd_set_default_dtype(pd_dtype dt) {
  if (!pd_dtype_is_floating(dt))
    return pd_set_error(PD_ERR_DTYPE,
                        "set_default_dtype: only float16, bfloat16, float32 and float64 are supported, "
                        "got %s (%d)",
                        pd_dtype_name(dt), (int)dt);
  atomic_store_explicit(&g_default_dtype, (int)dt, memory_order_relaxed);
  return PD_OK;
}

pd_dtype pd_get_default_dtype(void) {
  return (pd_dtype)atomic_load_explicit(&g_default_dtype, memory_order_relaxed);
}
