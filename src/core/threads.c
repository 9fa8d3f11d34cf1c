/* The one OpenMP pool, shared with oneDNN (both use libgomp). */
#include <omp.h>

#include "paddlec/core.h"
#include "thread_governor.h"

void pd_set_num_threads(int n) {
  if (n > 0) {
    omp_set_num_threads(n);
    pd_thread_governor_threads_changed(n);
  }
}

int pd_get_num_threads(void) { return omp_get_max_threads(); }
