/* Strided, broadcasting elementwise driver over raw buffers (no tensors).
 * An op supplies a 1-D function for a run of n elements with per-operand
 * strides (in elements); the driver walks the outer dims, coalesces
 * contiguous dims, and splits large work across the OpenMP pool. */
#ifndef PADDLEC_KERNELS_ELEMENTWISE_H
#define PADDLEC_KERNELS_ELEMENTWISE_H

#include <stdint.h>

#include "kvariant.h"

#define PD_EW_MAX_OPERANDS 4
#define PD_EW_MAX_DIMS 9
/* Below this many elements everything runs on one thread. */
#define PD_EW_GRAIN 32768

typedef void (*pd_ew_fn)(int64_t n, char *const *ptr, const int64_t *stride, const void *params);

typedef struct pd_ew_geom {
  int ndim;
  int nops; /* operand 0 is the output */
  int64_t shape[PD_EW_MAX_DIMS];
  int64_t stride[PD_EW_MAX_OPERANDS][PD_EW_MAX_DIMS]; /* in elements; 0 = broadcast */
  char *base[PD_EW_MAX_OPERANDS];
  int64_t elsize[PD_EW_MAX_OPERANDS];
} pd_ew_geom;

/* Merges adjacent dims that are contiguous for every operand; drops 1s. */
void pdk_ew_coalesce(pd_ew_geom *g);
void pdk_ew_run(const pd_ew_geom *g, pd_ew_fn fn, const void *params);
/* n contiguous elements per operand (all unit strides); element sizes are
 * needed only to split work across threads, so they are passed per operand. */
void pdk_ew_run_flat_sized(int64_t n, int nops, char *const *ptr, const int64_t *elsize, pd_ew_fn fn,
                           const void *params);

/* A loop the compiler must vectorise (GCC's -O2 cost model does not
 * vectorise plain loops of unknown trip count). */
#define PD_SIMD _Pragma("omp simd")
/* Forced inlining: a call left in a loop body keeps it scalar. */
#define PD_VINLINE static inline __attribute__((always_inline))

/* Generators for 1-D functions. EXPR sees x (and y, z) of type T and P, the
 * params as const double *. Unit-stride runs get their own PD_SIMD loop;
 * each function comes in the CPU variants of kvariant.h (PD_KCLONES). */
#define PD_EW_UNARY(fname, T, OT, EXPR)                                                         \
  PD_VINLINE void fname##_body(int64_t n, char *const *p_, const int64_t *s_, const void *pp) { \
    OT *o = (OT *)p_[0];                                                                        \
    const T *a = (const T *)p_[1];                                                              \
    const double *P = (const double *)pp;                                                       \
    (void)P;                                                                                    \
    if (s_[0] == 1 && s_[1] == 1) {                                                             \
      PD_SIMD for (int64_t i = 0; i < n; i++) {                                                 \
        T x = a[i];                                                                             \
        o[i] = (OT)(EXPR);                                                                      \
      }                                                                                         \
    } else {                                                                                    \
      for (int64_t i = 0; i < n; i++) {                                                         \
        T x = a[i * s_[1]];                                                                     \
        o[i * s_[0]] = (OT)(EXPR);                                                              \
      }                                                                                         \
    }                                                                                           \
  }                                                                                             \
  PD_KCLONES(fname, (int64_t n, char *const *p_, const int64_t *s_, const void *pp), (n, p_, s_, pp))

#define PD_EW_BINARY(fname, T, OT, EXPR)                                                        \
  PD_VINLINE void fname##_body(int64_t n, char *const *p_, const int64_t *s_, const void *pp) { \
    OT *o = (OT *)p_[0];                                                                        \
    const T *a = (const T *)p_[1];                                                              \
    const T *b = (const T *)p_[2];                                                              \
    const double *P = (const double *)pp;                                                       \
    (void)P;                                                                                    \
    if (s_[0] == 1 && s_[1] == 1 && s_[2] == 1) {                                               \
      PD_SIMD for (int64_t i = 0; i < n; i++) {                                                 \
        T x = a[i], y = b[i];                                                                   \
        o[i] = (OT)(EXPR);                                                                      \
      }                                                                                         \
    } else if (s_[0] == 1 && s_[1] == 1 && s_[2] == 0) {                                        \
      const T y = b[0];                                                                         \
      PD_SIMD for (int64_t i = 0; i < n; i++) {                                                 \
        T x = a[i];                                                                             \
        o[i] = (OT)(EXPR);                                                                      \
      }                                                                                         \
    } else if (s_[0] == 1 && s_[1] == 0 && s_[2] == 1) {                                        \
      const T x = a[0];                                                                         \
      PD_SIMD for (int64_t i = 0; i < n; i++) {                                                 \
        T y = b[i];                                                                             \
        o[i] = (OT)(EXPR);                                                                      \
      }                                                                                         \
    } else {                                                                                    \
      for (int64_t i = 0; i < n; i++) {                                                         \
        T x = a[i * s_[1]], y = b[i * s_[2]];                                                   \
        o[i * s_[0]] = (OT)(EXPR);                                                              \
      }                                                                                         \
    }                                                                                           \
  }                                                                                             \
  PD_KCLONES(fname, (int64_t n, char *const *p_, const int64_t *s_, const void *pp), (n, p_, s_, pp))

#define PD_EW_TERNARY(fname, T, OT, EXPR)                                                       \
  PD_VINLINE void fname##_body(int64_t n, char *const *p_, const int64_t *s_, const void *pp) { \
    OT *o = (OT *)p_[0];                                                                        \
    const T *a = (const T *)p_[1];                                                              \
    const T *b = (const T *)p_[2];                                                              \
    const T *c = (const T *)p_[3];                                                              \
    const double *P = (const double *)pp;                                                       \
    (void)P;                                                                                    \
    for (int64_t i = 0; i < n; i++) {                                                           \
      T x = a[i * s_[1]], y = b[i * s_[2]], z = c[i * s_[3]];                                   \
      o[i * s_[0]] = (OT)(EXPR);                                                                \
    }                                                                                           \
  }                                                                                             \
  PD_KCLONES(fname, (int64_t n, char *const *p_, const int64_t *s_, const void *pp), (n, p_, s_, pp))

#endif
