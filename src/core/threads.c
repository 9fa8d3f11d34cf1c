/* The one OpenMP pool, shared with oneDNN (both use libgomp). */
#include <omp.h>
#include <stdatomic.h>

#include "paddlec/core.h"
#include "thread_governor.h"

void pd_set_num_threads(int n) {
  /* a forked child of a process that had a team: more than one thread
   * would start a region on the parent's pool, which the child lacks */
  if (n > 1 && pd_thread_governor_forked()) n = 1;
  if (n > 0) {
    omp_set_num_threads(n);
    pd_thread_governor_threads_changed(n);
  }
}

int pd_get_num_threads(void) { return omp_get_max_threads(); }

static atomic_bool g_deterministic;

void pd_set_deterministic(bool on) { atomic_store_explicit(&g_deterministic, on, memory_order_relaxed); }

bool pd_get_deterministic(void) { return atomic_load_explicit(&g_deterministic, memory_order_relaxed); }
