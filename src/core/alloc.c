/* Caching allocator: size classes, 64-byte alignment, no system call in the
 * steady state of a training loop. Blocks of 2 MiB and more are backed by
 * huge pages where the kernel allows (first touch of fresh 4 KiB pages is
 * slow on virtual machines). Built with PADDLEC_NO_CACHING (the sanitizer
 * build) every block goes straight to the system so leaks are visible. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "tensor_impl.h"

#define ALIGN 64
#define HUGE_BLOCK (2u << 20)
#define NUM_CLASSES 256

typedef struct free_block {
  struct free_block *next;
} free_block;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static free_block *g_free[NUM_CLASSES];
static size_t g_reserved;
/* live and peak bytes are atomics so small inline payloads can be counted
 * without taking the lock */
static atomic_size_t g_allocated, g_peak;

void pd_alloc_account(size_t bytes, bool add) {
  if (!add) {
    atomic_fetch_sub(&g_allocated, bytes);
    return;
  }
  size_t now = atomic_fetch_add(&g_allocated, bytes) + bytes;
  size_t peak = atomic_load(&g_peak);
  while (now > peak && !atomic_compare_exchange_weak(&g_peak, &peak, now)) {
  }
}

/* Size classes: multiples of 64 B up to 1 KiB, then four classes per power
 * of two (at most 25% waste). Returns the class index and its byte size. */
static int size_class(size_t n, size_t *cls_bytes) {
  if (n == 0) n = 1;
  if (n <= 1024) {
    size_t c = (n + ALIGN - 1) / ALIGN;
    *cls_bytes = c * ALIGN;
    return (int)c - 1; /* 0..15 */
  }
  int p = 63 - __builtin_clzll((unsigned long long)(n - 1)); /* 2^p < n <= 2^(p+1) */
  size_t base = (size_t)1 << p, step = base / 4;
  size_t q = (n - base + step - 1) / step; /* 1..4 */
  *cls_bytes = base + q * step;
  int idx = 16 + (p - 10) * 4 + (int)(q - 1);
  return idx < NUM_CLASSES ? idx : -1;
}

static void *system_alloc(size_t bytes) {
  void *p = NULL;
  size_t align = bytes >= HUGE_BLOCK ? HUGE_BLOCK : ALIGN;
  if (posix_memalign(&p, align, bytes) != 0) return NULL;
#ifdef MADV_HUGEPAGE
  if (bytes >= HUGE_BLOCK) madvise(p, bytes, MADV_HUGEPAGE);
#endif
  return p;
}

void *pd_alloc(size_t nbytes) {
  size_t bytes;
  int c = size_class(nbytes, &bytes);
  (void)c;
  void *p = NULL;
  pthread_mutex_lock(&g_lock);
#ifndef PADDLEC_NO_CACHING
  if (c >= 0 && g_free[c]) {
    p = g_free[c];
    g_free[c] = g_free[c]->next;
  }
#endif
  if (!p) {
    pthread_mutex_unlock(&g_lock);
    p = system_alloc(bytes);
    if (!p) {
      pd_set_error(PD_ERR_MEMORY, "alloc: out of memory allocating %zu bytes", nbytes);
      return NULL;
    }
    pthread_mutex_lock(&g_lock);
    g_reserved += bytes;
  }
  pthread_mutex_unlock(&g_lock);
  pd_alloc_account(bytes, true);
  return p;
}

void pd_free(void *p, size_t nbytes) {
  if (!p) return;
  size_t bytes;
  int c = size_class(nbytes, &bytes);
  pd_alloc_account(bytes, false);
  pthread_mutex_lock(&g_lock);
#ifndef PADDLEC_NO_CACHING
  if (c >= 0) {
    free_block *b = p;
    b->next = g_free[c];
    g_free[c] = b;
    pthread_mutex_unlock(&g_lock);
    return;
  }
#endif
  g_reserved -= bytes;
  pthread_mutex_unlock(&g_lock);
  (void)c;
  free(p);
}

size_t pd_memory_allocated(void) { return atomic_load(&g_allocated); }

size_t pd_memory_peak(void) { return atomic_load(&g_peak); }

size_t pd_memory_reserved(void) {
  pthread_mutex_lock(&g_lock);
  size_t v = g_reserved;
  pthread_mutex_unlock(&g_lock);
  return v;
}

void pd_memory_reset_peak(void) { atomic_store(&g_peak, atomic_load(&g_allocated)); }

void pd_memory_empty_cache(void) {
  pthread_mutex_lock(&g_lock);
  for (int c = 0; c < NUM_CLASSES; c++) {
    while (g_free[c]) {
      free_block *b = g_free[c];
      g_free[c] = b->next;
      size_t bytes;
      /* recover the class size: classes are fixed per index */
      if (c < 16)
        bytes = (size_t)(c + 1) * ALIGN;
      else {
        int p = (c - 16) / 4 + 10, q = (c - 16) % 4 + 1;
        bytes = ((size_t)1 << p) + (size_t)q * (((size_t)1 << p) / 4);
      }
      g_reserved -= bytes;
      free(b);
    }
  }
  pthread_mutex_unlock(&g_lock);
}
