/* Parallel loops over the one OpenMP pool. Small work never enters an
 * OpenMP region: in libgomp even `parallel if(0)` costs about a thousand
 * instructions, more than a small kernel. */
#ifndef PADDLEC_KERNELS_PARALLEL_H
#define PADDLEC_KERNELS_PARALLEL_H

#include <omp.h>
#include <stdint.h>

/* Default grain: below this many elements of simple work, one thread. */
#define PD_GRAIN 32768

/* for (int64_t i = 0; i < n; i++) body — split over threads when n >= grain. */
#define PD_PARALLEL_FOR(i, n, grain, ...)                                                              \
  do {                                                                                                 \
    int64_t pd_n_ = (n);                                                                               \
    if (pd_n_ >= (int64_t)(grain) && omp_get_max_threads() > 1) {                                      \
      _Pragma("omp parallel for schedule(static)") for (int64_t i = 0; i < pd_n_; i++) { __VA_ARGS__ } \
    } else {                                                                                           \
      for (int64_t i = 0; i < pd_n_; i++) {                                                            \
        __VA_ARGS__                                                                                    \
      }                                                                                                \
    }                                                                                                  \
  } while (0)

/* The same with an explicit condition for going parallel. */
#define PD_PARALLEL_FOR_IF(cond, i, n, ...)                                                            \
  do {                                                                                                 \
    int64_t pd_n_ = (n);                                                                               \
    if ((cond) && omp_get_max_threads() > 1) {                                                         \
      _Pragma("omp parallel for schedule(static)") for (int64_t i = 0; i < pd_n_; i++) { __VA_ARGS__ } \
    } else {                                                                                           \
      for (int64_t i = 0; i < pd_n_; i++) {                                                            \
        __VA_ARGS__                                                                                    \
      }                                                                                                \
    }                                                                                                  \
  } while (0)

/* `header { body }` (header: a `for (...)` statement head), in parallel
 * only when cond holds. In the serial branch omp_get_thread_num() is 0 and
 * omp_get_num_threads() 1, so region bodies written for a team still work. */
#define PD_OMP_FOR_IF(cond, header, ...)                                  \
  do {                                                                    \
    if (cond) {                                                           \
      _Pragma("omp parallel for schedule(static)") header { __VA_ARGS__ } \
    } else {                                                              \
      header { __VA_ARGS__ }                                              \
    }                                                                     \
  } while (0)
#define PD_OMP_PARALLEL_IF(cond, ...)         \
  do {                                        \
    if (cond) {                               \
      _Pragma("omp parallel") { __VA_ARGS__ } \
    } else {                                  \
      __VA_ARGS__                             \
    }                                         \
  } while (0)

#endif
