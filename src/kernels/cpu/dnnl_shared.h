/* What the oneDNN primitives of the library share: one CPU engine, a pool of
 * streams (a stream runs one primitive at a time, so threads that run
 * primitives at once each take their own) and running a primitive with a
 * user-managed scratchpad (so one primitive may run on several threads at
 * once). */
#ifndef PADDLEC_KERNELS_DNNL_SHARED_H
#define PADDLEC_KERNELS_DNNL_SHARED_H

#include <oneapi/dnnl/dnnl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The engine, created on first use; NULL when oneDNN could not make one. */
dnnl_engine_t pdk_dnnl_engine(void);
/* A stream of the engine from the pool (a new one when the pool is empty),
 * NULL when none can be made; give it back with pdk_dnnl_stream_release. */
dnnl_stream_t pdk_dnnl_stream_acquire(void);
void pdk_dnnl_stream_release(dnnl_stream_t s);
/* The size of the scratchpad primitive descriptor pd asks for (0: none),
 * its memory descriptor in *md when not 0. */
size_t pdk_dnnl_scratch_of(const_dnnl_primitive_desc_t pd, dnnl_memory_desc_t *md);
/* Runs p on s with args[0..n) and, when scratch_sz is not 0, the scratchpad
 * at scratch (described by scratch_md); waits for it. args must have room
 * for one more argument. */
dnnl_status_t pdk_dnnl_exec(dnnl_primitive_t p, dnnl_stream_t s, int n, dnnl_exec_arg_t *args,
                            const dnnl_memory_desc_t *scratch_md, size_t scratch_sz, void *scratch);

/* A cache of primitives by key (a few int64 words): entries are immutable
 * once published, so running one needs no lock; only finding and publishing
 * take the cache's mutex. An entry type starts with a pdk_dnnl_cached. */
#define PDK_DNNL_KEY_MAX 32
#define PDK_DNNL_BUCKETS 256

typedef struct pdk_dnnl_cached {
  int64_t key[PDK_DNNL_KEY_MAX];
  struct pdk_dnnl_cached *next;
} pdk_dnnl_cached;

typedef struct pdk_dnnl_cache {
  pthread_mutex_t mu;
  int keylen;      /* words of a key, at most PDK_DNNL_KEY_MAX */
  int max_entries; /* past this many, entries serve one call each */
  void (*free_entry)(pdk_dnnl_cached *e);
  int n;
  pdk_dnnl_cached *buckets[PDK_DNNL_BUCKETS];
} pdk_dnnl_cache;

#define PDK_DNNL_CACHE_INIT(keylen_, max_, free_)                   \
  {                                                                 \
    PTHREAD_MUTEX_INITIALIZER, (keylen_), (max_), (free_), 0, { 0 } \
  }

/* The published entry of key, or NULL. */
pdk_dnnl_cached *pdk_dnnl_cache_find(pdk_dnnl_cache *c, const int64_t *key);
/* Publishes e (made for e->key after a miss) and returns it; when another
 * thread published the key meanwhile, frees e and returns that entry; when
 * the cache is full, returns e unpublished with *owned set (the caller
 * frees it after its call). */
pdk_dnnl_cached *pdk_dnnl_cache_publish(pdk_dnnl_cache *c, pdk_dnnl_cached *e, bool *owned);
/* How many entries are published. */
int pdk_dnnl_cache_size(pdk_dnnl_cache *c);

#endif
