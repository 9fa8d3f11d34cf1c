#include "comm_reduce.h"

#include <stdint.h>

#define PD_RED_SUM(a, b) ((a) + (b))
#define PD_RED_PROD(a, b) ((a) * (b))
#define PD_RED_MAX(a, b) ((b) > (a) ? (b) : (a))
#define PD_RED_MIN(a, b) ((b) < (a) ? (b) : (a))

/* Sources are combined in order 0..nsrc-1 for each element; the two-source
 * case (the common world size) gets its own loop so it vectorises. */
#define PD_DEFINE_REDUCE(NAME, T, OP)                                      \
  static void NAME(T *dst_, const void *const *srcs, int nsrc, size_t n) { \
    T *dst = dst_;                                                         \
    const T *s0 = srcs[0];                                                 \
    if (nsrc == 2) {                                                       \
      const T *s1 = srcs[1];                                               \
      for (size_t i = 0; i < n; i++) dst[i] = OP(s0[i], s1[i]);            \
      return;                                                              \
    }                                                                      \
    for (size_t b = 0; b < n; b += 2048) {                                 \
      size_t e = n - b < 2048 ? n : b + 2048;                              \
      T acc[2048];                                                         \
      for (size_t i = b; i < e; i++) acc[i - b] = s0[i];                   \
      for (int k = 1; k < nsrc; k++) {                                     \
        const T *s = srcs[k];                                              \
        for (size_t i = b; i < e; i++) acc[i - b] = OP(acc[i - b], s[i]);  \
      }                                                                    \
      for (size_t i = b; i < e; i++) dst[i] = acc[i - b];                  \
    }                                                                      \
  }

/* Integer sums and products wrap around (as NCCL and MPI do in practice):
 * they are computed in the unsigned type of the same width, since signed
 * overflow is undefined in C. */
#define PD_WRAP_SUM32(a, b) ((int32_t)((uint32_t)(a) + (uint32_t)(b)))
#define PD_WRAP_SUM64(a, b) ((int64_t)((uint64_t)(a) + (uint64_t)(b)))
#define PD_WRAP_PROD32(a, b) ((int32_t)((uint32_t)(a) * (uint32_t)(b)))
#define PD_WRAP_PROD64(a, b) ((int64_t)((uint64_t)(a) * (uint64_t)(b)))

#define PD_DEFINE_REDUCE_ALL(SUFFIX, T, SUM, PROD) \
  PD_DEFINE_REDUCE(sum_##SUFFIX, T, SUM)           \
  PD_DEFINE_REDUCE(prod_##SUFFIX, T, PROD)         \
  PD_DEFINE_REDUCE(max_##SUFFIX, T, PD_RED_MAX)    \
  PD_DEFINE_REDUCE(min_##SUFFIX, T, PD_RED_MIN)

/* 8- and 16-bit values are promoted to int, whose range holds any sum or
 * product of two of them; the store back truncates. */
PD_DEFINE_REDUCE_ALL(u8, uint8_t, PD_RED_SUM, PD_RED_PROD)
PD_DEFINE_REDUCE_ALL(i8, int8_t, PD_RED_SUM, PD_RED_PROD)
PD_DEFINE_REDUCE_ALL(i16, int16_t, PD_RED_SUM, PD_RED_PROD)
PD_DEFINE_REDUCE_ALL(i32, int32_t, PD_WRAP_SUM32, PD_WRAP_PROD32)
PD_DEFINE_REDUCE_ALL(i64, int64_t, PD_WRAP_SUM64, PD_WRAP_PROD64)
PD_DEFINE_REDUCE_ALL(f32, float, PD_RED_SUM, PD_RED_PROD)
PD_DEFINE_REDUCE_ALL(f64, double, PD_RED_SUM, PD_RED_PROD)

typedef void (*pd_reduce_fn)(void *, const void *const *, int, size_t);

static pd_reduce_fn pick(pd_reduce_fn sum, pd_reduce_fn prod, pd_reduce_fn max, pd_reduce_fn min,
                         pdk_reduce_op op) {
  switch (op) {
    case PDK_REDUCE_PROD:
      return prod;
    case PDK_REDUCE_MAX:
      return max;
    case PDK_REDUCE_MIN:
      return min;
    default:
      return sum;
  }
}
#define PD_PICK(SUFFIX, op)                                                                 \
  pick((pd_reduce_fn)sum_##SUFFIX, (pd_reduce_fn)prod_##SUFFIX, (pd_reduce_fn)max_##SUFFIX, \
       (pd_reduce_fn)min_##SUFFIX, op)

/* float16 / bfloat16: widen a block, reduce in float32, round once. */
static void reduce_half(uint16_t *dst, const void *const *srcs, int nsrc, size_t n, pdk_reduce_op op,
                        int bf16) {
  float acc[1024], v[1024];
  pd_reduce_fn fn = PD_PICK(f32, op);
  for (size_t b = 0; b < n; b += 1024) {
    size_t m = n - b < 1024 ? n - b : 1024;
    const uint16_t *s0 = (const uint16_t *)srcs[0] + b;
    for (size_t i = 0; i < m; i++) acc[i] = bf16 ? pd_bf16_to_f32(s0[i]) : pd_f16_to_f32(s0[i]);
    for (int k = 1; k < nsrc; k++) {
      const uint16_t *s = (const uint16_t *)srcs[k] + b;
      for (size_t i = 0; i < m; i++) v[i] = bf16 ? pd_bf16_to_f32(s[i]) : pd_f16_to_f32(s[i]);
      const void *pair[2] = {acc, v};
      fn(acc, pair, 2, m);
    }
    for (size_t i = 0; i < m; i++) dst[b + i] = bf16 ? pd_f32_to_bf16(acc[i]) : pd_f32_to_f16(acc[i]);
  }
}

static void reduce_bool(uint8_t *dst, const void *const *srcs, int nsrc, size_t n, pdk_reduce_op op) {
  int and_op = op == PDK_REDUCE_PROD || op == PDK_REDUCE_MIN;
  for (size_t i = 0; i < n; i++) {
    uint8_t r = ((const uint8_t *)srcs[0])[i] != 0;
    for (int k = 1; k < nsrc; k++) {
      uint8_t x = ((const uint8_t *)srcs[k])[i] != 0;
      r = and_op ? (r & x) : (r | x);
    }
    dst[i] = r;
  }
}

static void reduce_plain(void *dst, const void *const *srcs, int nsrc, size_t n, pd_dtype dt,
                         pdk_reduce_op op);

void pdk_comm_reduce(void *dst, const void *const *srcs, int nsrc, size_t n, pd_dtype dt, pdk_reduce_op op) {
  if (n == 0 || nsrc <= 0) return;
  if (op != PDK_REDUCE_AVG || nsrc > 64) {
    reduce_plain(dst, srcs, nsrc, n, dt, op == PDK_REDUCE_AVG ? PDK_REDUCE_SUM : op);
    if (op == PDK_REDUCE_AVG) pdk_comm_divide(dst, n, dt, nsrc);
    return;
  }
  /* in blocks, so the division reads what the sum just wrote from cache */
  size_t es = pd_dtype_size(dt), blk = 8192;
  const void *part[64];
  for (size_t b = 0; b < n; b += blk) {
    size_t m = n - b < blk ? n - b : blk;
    for (int k = 0; k < nsrc; k++) part[k] = (const char *)srcs[k] + b * es;
    reduce_plain((char *)dst + b * es, part, nsrc, m, dt, PDK_REDUCE_SUM);
    pdk_comm_divide((char *)dst + b * es, m, dt, nsrc);
  }
}

static void reduce_plain(void *dst, const void *const *srcs, int nsrc, size_t n, pd_dtype dt,
                         pdk_reduce_op op) {
  switch (dt) {
    case PD_BOOL:
      reduce_bool(dst, srcs, nsrc, n, op);
      return;
    case PD_FLOAT16:
    case PD_BFLOAT16:
      reduce_half(dst, srcs, nsrc, n, op, dt == PD_BFLOAT16);
      return;
    case PD_UINT8:
      PD_PICK(u8, op)(dst, srcs, nsrc, n);
      return;
    case PD_INT8:
      PD_PICK(i8, op)(dst, srcs, nsrc, n);
      return;
    case PD_INT16:
      PD_PICK(i16, op)(dst, srcs, nsrc, n);
      return;
    case PD_INT32:
      PD_PICK(i32, op)(dst, srcs, nsrc, n);
      return;
    case PD_INT64:
      PD_PICK(i64, op)(dst, srcs, nsrc, n);
      return;
    case PD_FLOAT32:
      PD_PICK(f32, op)(dst, srcs, nsrc, n);
      return;
    case PD_FLOAT64:
      PD_PICK(f64, op)(dst, srcs, nsrc, n);
      return;
    default:
      return;
  }
}

#define PD_DIVIDE_LOOP(T) \
  for (size_t i = 0; i < n; i++) ((T *)buf)[i] = (T)(((T *)buf)[i] / (T)divisor)

void pdk_comm_divide(void *buf, size_t n, pd_dtype dt, int divisor) {
  if (divisor == 1 || n == 0) return;
  switch (dt) {
    case PD_UINT8:
      PD_DIVIDE_LOOP(uint8_t);
      break;
    case PD_INT8:
      PD_DIVIDE_LOOP(int8_t);
      break;
    case PD_INT16:
      PD_DIVIDE_LOOP(int16_t);
      break;
    case PD_INT32:
      PD_DIVIDE_LOOP(int32_t);
      break;
    case PD_INT64:
      PD_DIVIDE_LOOP(int64_t);
      break;
    case PD_FLOAT32: {
      float inv = 1.0f / (float)divisor; /* Paddle scales by 1/n */
      for (size_t i = 0; i < n; i++) ((float *)buf)[i] *= inv;
      break;
    }
    case PD_FLOAT64: {
      double inv = 1.0 / (double)divisor;
      for (size_t i = 0; i < n; i++) ((double *)buf)[i] *= inv;
      break;
    }
    case PD_FLOAT16:
    case PD_BFLOAT16: {
      uint16_t *h = buf;
      float inv = 1.0f / (float)divisor;
      for (size_t i = 0; i < n; i++)
        h[i] = dt == PD_BFLOAT16 ? pd_f32_to_bf16(pd_bf16_to_f32(h[i]) * inv)
                                 : pd_f32_to_f16(pd_f16_to_f32(h[i]) * inv);
      break;
    }
    default: /* bool: AVG is rejected before */
      break;
  }
}
