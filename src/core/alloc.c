/* Caching allocator: size classes, 64-byte alignment, no system call in the
 * steady state of a training loop. Blocks up to 64 KiB are also
 * cached per thread, so the small tensors of a step take no lock. Blocks of 2 MiB and more are backed by
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

#ifndef PADDLEC_NO_CACHING
/* The thread cache: a few blocks per small class. It goes back to the
 * shared lists when the thread exits, when it would grow past its caps, and
 * on the thread's next allocation after pd_memory_empty_cache (which bumps
 * g_epoch). */
#define TL_CLASSES 40 /* classes 0..39: blocks up to 64 KiB */
#define TL_PER_CLASS 16
typedef struct thread_cache {
  free_block *head[TL_CLASSES];
  int n[TL_CLASSES];
  unsigned epoch;
  bool registered;
} thread_cache;
static _Thread_local thread_cache t_cache;
static atomic_uint g_epoch;
static pthread_key_t g_cache_key;
static pthread_once_t g_cache_once = PTHREAD_ONCE_INIT;

/* Moves every block of the calling thread's cache to the shared lists. */
static void cache_flush(thread_cache *tc) {
  pthread_mutex_lock(&g_lock);
  for (int c = 0; c < TL_CLASSES; c++) {
    while (tc->head[c]) {
      free_block *b = tc->head[c];
      tc->head[c] = b->next;
      b->next = g_free[c];
      g_free[c] = b;
    }
    tc->n[c] = 0;
  }
  pthread_mutex_unlock(&g_lock);
}

static void cache_at_thread_exit(void *unused) {
  (void)unused;
  cache_flush(&t_cache);
}

static void cache_key_init(void) { pthread_key_create(&g_cache_key, cache_at_thread_exit); }

/* Class c's block from the thread cache, or NULL. */
static inline void *cache_get(int c) {
  thread_cache *tc = &t_cache;
  if (c < 0 || c >= TL_CLASSES) return NULL;
  unsigned e = atomic_load_explicit(&g_epoch, memory_order_relaxed);
  if (tc->epoch != e) { /* pd_memory_empty_cache ran: give everything back */
    tc->epoch = e;
    cache_flush(tc);
    return NULL;
  }
  free_block *b = tc->head[c];
  if (!b) return NULL;
  tc->head[c] = b->next;
  tc->n[c]--;
  return b;
}

/* Keeps p in the thread cache when there is room; false otherwise. */
static inline bool cache_put(int c, void *p) {
  thread_cache *tc = &t_cache;
  if (c < 0 || c >= TL_CLASSES || tc->n[c] >= TL_PER_CLASS) return false;
  if (!tc->registered) { /* the destructor flushes the cache when the thread exits */
    tc->registered = true;
    tc->epoch = atomic_load(&g_epoch);
    pthread_once(&g_cache_once, cache_key_init);
    pthread_setspecific(g_cache_key, (void *)1);
  }
  free_block *b = p;
  b->next = tc->head[c];
  tc->head[c] = b;
  tc->n[c]++;
  return true;
}
#endif
/* live and peak bytes are atomics so small inline payloads can be counted
 * without taking the lock */
atomic_size_t pd_g_allocated, pd_g_peak, pd_g_alloc_calls;
atomic_bool pd_g_alloc_counting;

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
#ifndef PADDLEC_NO_CACHING
  if ((p = cache_get(c)) != NULL) {
    pd_alloc_account(bytes, true);
    return p;
  }
#endif
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
#ifndef PADDLEC_NO_CACHING
  if (cache_put(c, p)) return;
#endif
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

size_t pd_memory_allocated(void) { return atomic_load(&pd_g_allocated); }

size_t pd_memory_peak(void) { return atomic_load(&pd_g_peak); }

size_t pd_memory_reserved(void) {
  pthread_mutex_lock(&g_lock);
  size_t v = g_reserved;
  pthread_mutex_unlock(&g_lock);
  return v;
}

void pd_memory_reset_peak(void) { atomic_store(&pd_g_peak, atomic_load(&pd_g_allocated)); }

void pd_memory_empty_cache(void) {
#ifndef PADDLEC_NO_CACHING
  /* this thread's cache now; the others' at their next allocation */
  atomic_fetch_add(&g_epoch, 1);
  t_cache.epoch = atomic_load(&g_epoch);
  cache_flush(&t_cache);
#endif
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
