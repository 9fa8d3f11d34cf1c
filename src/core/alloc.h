/* The caching allocator: what the kernels may use for scratch memory
 * without the tensor struct. Internal. */
#ifndef PADDLEC_ALLOC_H
#define PADDLEC_ALLOC_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

/* Caching allocator (64-byte aligned). */
void *pd_alloc(size_t nbytes);
void pd_free(void *p, size_t nbytes);
/* Bytes allocated now and at most (pd_memory_allocated, pd_memory_peak):
 * atomics, so that accounting takes no lock. */
extern atomic_size_t pd_g_allocated, pd_g_peak;
/* How many allocations (pd_alloc calls and inline payloads) were counted
 * while pd_g_alloc_counting was on (a test sets it around a run): a test's
 * way to see that a run allocated nothing. Off, an allocation only reads
 * the flag (a line no thread writes) instead of adding to a shared counter. */
extern atomic_bool pd_g_alloc_counting;
extern atomic_size_t pd_g_alloc_calls;
/* Counts bytes held outside pd_alloc (inline payloads) as allocated. Inline:
 * tensor creation and release run it for every small tensor. */
static inline void pd_alloc_account(size_t bytes, bool add) {
  if (!add) {
    atomic_fetch_sub(&pd_g_allocated, bytes);
    return;
  }
  if (atomic_load_explicit(&pd_g_alloc_counting, memory_order_relaxed))
    atomic_fetch_add_explicit(&pd_g_alloc_calls, 1, memory_order_relaxed);
  size_t now = atomic_fetch_add(&pd_g_allocated, bytes) + bytes;
  size_t peak = atomic_load(&pd_g_peak);
  while (now > peak && !atomic_compare_exchange_weak(&pd_g_peak, &peak, now)) {
  }
}

#endif
