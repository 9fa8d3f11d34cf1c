/* Numeric limits of the dtypes (paddle.finfo, paddle.iinfo) and the default
 * floating dtype (paddle.set_default_dtype / get_default_dtype). */
#include <float.h>
#include <stdatomic.h>
#include <stdint.h>

#include "element.h"
#include "paddlec/core.h"

/* Paddle's values (numpy's for float32/float64; the half formats by their
 * bit layouts), indexed by dtype - PD_FLOAT16. resolution is 10^-digits10
 * of the format. */
const pd_dtype_finfo pd_k_finfo[PD_FLOAT64 - PD_FLOAT16 + 1] = {
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
  *out = pd_k_finfo[dt - PD_FLOAT16];
  return PD_OK;
}

/* Indexed by dtype; bits 0 for the dtypes that are not integers. */
const pd_dtype_iinfo pd_k_iinfo[PD_NUM_DTYPES] = {
    [PD_UINT8] = {8, 0, UINT8_MAX, "uint8"},          [PD_INT8] = {8, INT8_MIN, INT8_MAX, "int8"},
    [PD_INT16] = {16, INT16_MIN, INT16_MAX, "int16"}, [PD_INT32] = {32, INT32_MIN, INT32_MAX, "int32"},
    [PD_INT64] = {64, INT64_MIN, INT64_MAX, "int64"},
};

pd_status pd_iinfo(pd_dtype dt, pd_dtype_iinfo *out) {
  if (!out) return pd_set_error(PD_ERR_INVALID, "iinfo: out is NULL");
  if (!pd_dtype_is_integer(dt))
    return pd_set_error(PD_ERR_DTYPE,
                        "iinfo: dtype must be uint8, int8, int16, int32 or int64, got %s (%d); use "
                        "pd_finfo for floating dtypes",
                        pd_dtype_name(dt), (int)dt);
  *out = pd_k_iinfo[dt];
  return PD_OK;
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
