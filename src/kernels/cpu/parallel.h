/* Parallel loops over the one OpenMP pool. Small work never enters an
 * OpenMP region: in libgomp even `parallel if(0)` costs about a thousand
 * instructions, more than a small kernel. */
#ifndef PADDLEC_KERNELS_PARALLEL_H
#define PADDLEC_KERNELS_PARALLEL_H

#include <omp.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* Set by the thread governor (src/core/thread_governor.c) while other
 * processes compete for the cores: the loops below then run on one thread.
 * A team of two waits at every region's end for a member that has lost its
 * core, and these loops are short; oneDNN's GEMMs keep the team. */
extern atomic_bool pd_g_cores_contended;
/* How many float32 products ran as panels while the cores were contended
 * (gemm.c; one relaxed add a product): a test's way to see that path ran. */
extern atomic_llong pd_g_gemm_panel_products;
/* Cores the other processes leave free (the governor's estimate from the
 * machine's runnable tasks less this process's, averaged over ~0.5 s). */
extern atomic_int pd_g_cores_free;
/* The governor has spread the team one thread per CPU while one core is
 * free (core/core_claim.h): large products then share their panels with a
 * helper and never wait for it (gemm.c). */
extern atomic_bool pd_g_cores_spread;
/* The thread that ran the last large product while the cores were
 * contended (gemm.c; 0: none yet): the compute thread a spread keeps on a
 * CPU of its own. */
extern atomic_int pd_g_compute_tid;

static inline bool pd_parallel_loops_on(void) {
  return omp_get_max_threads() > 1 && !atomic_load_explicit(&pd_g_cores_contended, memory_order_relaxed);
}

/* For work cut into tasks of a GEMM's size that the team takes one at a time
 * (gemm.c's contended panels, attention's blocks): the team, busy or quiet,
 * except while the other processes leave exactly one core free, when one
 * thread has that core to itself (docs/threads.md). */
static inline bool pd_team_for_large_tasks(void) {
  return omp_get_max_threads() > 1 && (!atomic_load_explicit(&pd_g_cores_contended, memory_order_relaxed) ||
                                       atomic_load_explicit(&pd_g_cores_free, memory_order_relaxed) != 1);
}

/* How many threads a kernel that sizes its own team may use: one while the
 * cores are contended. Every kernel that computes a thread count gets the
 * same bits on any count (docs/determinism.md), so this changes only speed. */
static inline int pd_loop_threads(void) { return pd_parallel_loops_on() ? omp_get_max_threads() : 1; }

/* For a function called from the body of one of the loops below whose
 * floating-point result must not depend on the thread count: those loops
 * compile their body twice (the parallel and the serial copy), and inlined
 * into both, a reduction inside may be vectorised differently in each (other
 * lane counts, other partial sums). Kept out of line, one compiled instance
 * computes every element, whichever copy runs. */
#define PD_NOINLINE __attribute__((noinline))

/* Default grain: below this many elements of simple work, one thread. */
#define PD_GRAIN 32768

/* for (int64_t i = 0; i < n; i++) body — split over threads when n >= grain. */
#define PD_PARALLEL_FOR(i, n, grain, ...)                                                              \
  do {                                                                                                 \
    int64_t pd_n_ = (n);                                                                               \
    if (pd_n_ >= (int64_t)(grain) && pd_parallel_loops_on()) {                                         \
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
    if ((cond) && pd_parallel_loops_on()) {                                                            \
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
    if ((cond) && pd_parallel_loops_on()) {                               \
      _Pragma("omp parallel for schedule(static)") header { __VA_ARGS__ } \
    } else {                                                              \
      header { __VA_ARGS__ }                                              \
    }                                                                     \
  } while (0)
#define PD_OMP_PARALLEL_IF(cond, ...)         \
  do {                                        \
    if ((cond) && pd_parallel_loops_on()) {   \
      _Pragma("omp parallel") { __VA_ARGS__ } \
    } else {                                  \
      __VA_ARGS__                             \
    }                                         \
  } while (0)

/* total += part(k) for k = 0 .. nblk-1 in that order, part(k) an expression
 * of type T in k (a block's partial sum). With par, the partials of up to
 * PD_SUM_GROUP blocks at a time are computed over the threads first, then
 * added one after the other: the same additions in the same order as the
 * serial loop, so the sum has the same bits on any number of threads. */
#define PD_SUM_GROUP 256
#define PD_ORDERED_SUM(T, total, nblk, par, k, ...)                                                    \
  do {                                                                                                 \
    int64_t pd_nb_ = (nblk);                                                                           \
    if ((par) && pd_parallel_loops_on()) {                                                             \
      T pd_part_[PD_SUM_GROUP];                                                                        \
      for (int64_t pd_k0_ = 0; pd_k0_ < pd_nb_; pd_k0_ += PD_SUM_GROUP) {                              \
        int64_t pd_m_ = pd_nb_ - pd_k0_ < PD_SUM_GROUP ? pd_nb_ - pd_k0_ : PD_SUM_GROUP;               \
        _Pragma("omp parallel for schedule(static)") for (int64_t pd_j_ = 0; pd_j_ < pd_m_; pd_j_++) { \
          int64_t k = pd_k0_ + pd_j_;                                                                  \
          pd_part_[pd_j_] = (__VA_ARGS__);                                                             \
        }                                                                                              \
        for (int64_t pd_j_ = 0; pd_j_ < pd_m_; pd_j_++) (total) += pd_part_[pd_j_];                    \
      }                                                                                                \
    } else {                                                                                           \
      for (int64_t k = 0; k < pd_nb_; k++) (total) += (__VA_ARGS__);                                   \
    }                                                                                                  \
  } while (0)

#endif
