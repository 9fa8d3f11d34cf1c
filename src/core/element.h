/* One element of any dtype, loaded or stored through a double: the generic
 * (slow) paths' conversion, usable without the tensor struct. Internal. */
#ifndef PADDLEC_ELEMENT_H
#define PADDLEC_ELEMENT_H

#include <stdbool.h>
#include <stdint.h>

#include "paddlec/core.h"

/* The element at p as a double (NAN for an invalid dtype). */
double pd_load_as_f64(const void *p, pd_dtype dt);
/* Stores v at p: integers saturate (NaN gives 0), float16/bfloat16 round
 * once, correctly. */
void pd_store_from_f64(void *p, pd_dtype dt, double v);
/* The values dtype dt holds: [lo, hi], or [lo, hi) when *hi_open (int64:
 * 2^63 is the first double past its largest value); bool and float64
 * take any double. Exact in double. */
void pd_dtype_range(pd_dtype dt, double *lo, double *hi, bool *hi_open);

/* The tables behind pd_iinfo (indexed by dtype; bits 0 for the dtypes that
 * are not integers) and pd_finfo (indexed by dtype - PD_FLOAT16), which
 * pd_dtype_range reads too (dtype_info.c). */
extern const pd_dtype_iinfo pd_k_iinfo[PD_NUM_DTYPES];
extern const pd_dtype_finfo pd_k_finfo[PD_FLOAT64 - PD_FLOAT16 + 1];

/* An integer or bool element as int64, exactly. */
static inline int64_t pd_load_as_i64(const void *p, pd_dtype dt) {
  switch (dt) {
    case PD_BOOL:
      return *(const uint8_t *)p != 0;
    case PD_UINT8:
      return *(const uint8_t *)p;
    case PD_INT8:
      return *(const int8_t *)p;
    case PD_INT16:
      return *(const int16_t *)p;
    case PD_INT32:
      return *(const int32_t *)p;
    default:
      return *(const int64_t *)p;
  }
}
/* Stores v into an integer or bool element: bool is v != 0, a narrower
 * integer keeps the low bits (wraps). */
static inline void pd_store_from_i64(void *p, pd_dtype dt, int64_t v) {
  switch (dt) {
    case PD_BOOL:
      *(uint8_t *)p = v != 0;
      break;
    case PD_UINT8:
      *(uint8_t *)p = (uint8_t)v;
      break;
    case PD_INT8:
      *(int8_t *)p = (int8_t)v;
      break;
    case PD_INT16:
      *(int16_t *)p = (int16_t)v;
      break;
    case PD_INT32:
      *(int32_t *)p = (int32_t)v;
      break;
    default:
      *(int64_t *)p = v;
      break;
  }
}

#endif
