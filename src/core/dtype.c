/* dtype names, sizes, promotion and half-precision conversions. */
#include <math.h>
#include <string.h>

#include "tensor_impl.h"

static const char *const kNames[PD_NUM_DTYPES] = {"bool",  "uint8",   "int8",     "int16",   "int32",
                                                  "int64", "float16", "bfloat16", "float32", "float64"};
static const size_t kSizes[PD_NUM_DTYPES] = {1, 1, 1, 2, 4, 8, 2, 2, 4, 8};

const char *pd_dtype_name(pd_dtype dt) { return (unsigned)dt < PD_NUM_DTYPES ? kNames[dt] : "invalid"; }

size_t pd_dtype_size(pd_dtype dt) { return (unsigned)dt < PD_NUM_DTYPES ? kSizes[dt] : 0; }

bool pd_dtype_is_floating(pd_dtype dt) { return dt >= PD_FLOAT16 && dt <= PD_FLOAT64; }

bool pd_dtype_is_integer(pd_dtype dt) { return dt >= PD_UINT8 && dt <= PD_INT64; }

int pd_dtype_from_name(const char *name) {
  if (!name) return -1;
  for (int i = 0; i < PD_NUM_DTYPES; i++)
    if (strcmp(name, kNames[i]) == 0) return i;
  return -1;
}

/* Paddle's tensor-to-tensor rule (guides/advanced/auto_type_promotion):
 * only floating dtypes promote, to the wider one, with float16 + bfloat16
 * giving float32. Any other mix of different dtypes has no common type. */
pd_dtype pd_promote_types(pd_dtype a, pd_dtype b) {
  if (a == b) return a;
  if (!pd_dtype_is_floating(a) || !pd_dtype_is_floating(b)) return PD_NUM_DTYPES;
  if ((a == PD_FLOAT16 && b == PD_BFLOAT16) || (a == PD_BFLOAT16 && b == PD_FLOAT16)) return PD_FLOAT32;
  return a > b ? a : b;
}

/* ---- half precision ---------------------------------------------------- */
static inline uint32_t f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
static inline float bits_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

uint16_t pd_f32_to_bf16(float f) {
  uint32_t u = f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
  uint32_t lsb = (u >> 16) & 1u;
  u += 0x7fffu + lsb; /* round to nearest even */
  return (uint16_t)(u >> 16);
}

float pd_bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

uint16_t pd_f32_to_f16(float f) {
  uint32_t u = f32_bits(f);
  uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);  /* NaN */
  if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* rounds to inf */
  if (a < 0x38800000u) {
    /* subnormal or zero in half: value = a * 2^24 rounded to integer */
    if (a < 0x33000000u) return (uint16_t)sign; /* below half of the smallest subnormal */
    uint32_t exp = a >> 23;
    uint32_t mant = (a & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126 - exp; /* value / 2^-24 = mant * 2^(exp - 126) */
    uint32_t r = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1u);
    uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (r & 1u))) r++;
    return (uint16_t)(sign | r);
  }
  /* normal: rebias exponent 127 -> 15, keep 10 mantissa bits, round even */
  uint32_t r = a - 0x38000000u; /* (127-15) << 23 */
  uint32_t lsb = (r >> 13) & 1u;
  r += 0xfffu + lsb;
  return (uint16_t)(sign | (r >> 13));
}

float pd_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return bits_f32(sign | 0x7f800000u | (mant << 13));
  if (exp == 0) {
    if (mant == 0) return bits_f32(sign);
    float v = ldexpf((float)mant, -24);
    return sign ? -v : v;
  }
  return bits_f32(sign | ((exp + 112u) << 23) | (mant << 13));
}

/* ---- generic element access ------------------------------------------- */
double pd_load_as_f64(const void *p, pd_dtype dt) {
  switch (dt) {
    case PD_FLOAT16:
      return pd_f16_to_f32(*(const uint16_t *)p);
    case PD_BFLOAT16:
      return pd_bf16_to_f32(*(const uint16_t *)p);
    case PD_FLOAT32:
      return *(const float *)p;
    case PD_FLOAT64:
      return *(const double *)p;
    default: /* bool and the integers */
      return (unsigned)dt < PD_NUM_DTYPES ? (double)pd_load_as_i64(p, dt) : NAN;
  }
}

/* double -> float rounded to odd: a later rounding to half precision is
 * then correctly rounded (no double rounding), since float keeps 13 more
 * bits than float16 and 16 more than bfloat16. */
static float f64_to_f32_odd(double v) {
  float f = (float)v;
  if ((double)f == v || isnan(v) || isinf(f)) return f;
  if (fabs((double)f) > fabs(v)) f = nextafterf(f, 0.0f); /* truncate toward zero */
  uint32_t u = f32_bits(f) | 1u;
  return bits_f32(u);
}

void pd_dtype_range(pd_dtype dt, double *lo, double *hi, bool *hi_open) {
  *hi_open = false;
  *lo = -INFINITY, *hi = INFINITY; /* bool (any value is true or false), float64 */
  if (pd_dtype_is_integer(dt)) {
    *lo = (double)pd_k_iinfo[dt].min, *hi = (double)pd_k_iinfo[dt].max;
    *hi_open = dt == PD_INT64; /* 2^63 - 1 is no double: it rounds up to 2^63, the first past it */
  } else if (pd_dtype_is_floating(dt) && dt != PD_FLOAT64) {
    *lo = pd_k_finfo[dt - PD_FLOAT16].min, *hi = pd_k_finfo[dt - PD_FLOAT16].max;
  }
}

/* double -> integer dtype dt, saturating (NaN gives 0): a plain C cast of
 * an out-of-range value is undefined. */
static int64_t f64_to_int_sat(double v, pd_dtype dt) {
  double lo, hi;
  bool hi_open;
  pd_dtype_range(dt, &lo, &hi, &hi_open);
  if (isnan(v)) return 0;
  if (v <= lo) return (int64_t)lo;
  if (v >= hi) return hi_open ? INT64_MAX : (int64_t)hi;
  return (int64_t)v;
}

void pd_store_from_f64(void *p, pd_dtype dt, double v) {
  switch (dt) {
    case PD_BOOL:
      *(uint8_t *)p = v != 0.0;
      break;
    case PD_UINT8:
    case PD_INT8:
    case PD_INT16:
    case PD_INT32:
    case PD_INT64:
      pd_store_from_i64(p, dt, f64_to_int_sat(v, dt));
      break;
    case PD_FLOAT16:
      *(uint16_t *)p = pd_f32_to_f16(f64_to_f32_odd(v));
      break;
    case PD_BFLOAT16:
      *(uint16_t *)p = pd_f32_to_bf16(f64_to_f32_odd(v));
      break;
    case PD_FLOAT32:
      *(float *)p = (float)v;
      break;
    case PD_FLOAT64:
      *(double *)p = v;
      break;
    default:
      break;
  }
}
