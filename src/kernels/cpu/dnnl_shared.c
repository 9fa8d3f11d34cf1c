/* oneDNN's engine, stream pool and primitive execution, shared by the
 * convolutions (conv_dnnl.c) and the matmul primitives (gemm_dnnl_matmul.c). */
#include "dnnl_shared.h"

#include <pthread.h>
#include <string.h>

#define MAX_STREAMS 64

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static dnnl_engine_t g_eng;
static dnnl_stream_t g_streams[MAX_STREAMS];
static int g_nstreams;

static void init_engine(void) {
  if (dnnl_engine_create(&g_eng, dnnl_cpu, 0) != dnnl_success) g_eng = NULL;
}

dnnl_engine_t pdk_dnnl_engine(void) {
  pthread_once(&g_once, init_engine);
  return g_eng;
}

dnnl_stream_t pdk_dnnl_stream_acquire(void) {
  dnnl_engine_t eng = pdk_dnnl_engine();
  if (!eng) return NULL;
  dnnl_stream_t s = NULL;
  pthread_mutex_lock(&g_mu);
  if (g_nstreams > 0) s = g_streams[--g_nstreams];
  pthread_mutex_unlock(&g_mu);
  if (!s && dnnl_stream_create(&s, eng, dnnl_stream_default_flags) != dnnl_success) s = NULL;
  return s;
}

void pdk_dnnl_stream_release(dnnl_stream_t s) {
  if (!s) return;
  pthread_mutex_lock(&g_mu);
  if (g_nstreams < MAX_STREAMS) {
    g_streams[g_nstreams++] = s;
    s = NULL;
  }
  pthread_mutex_unlock(&g_mu);
  if (s) dnnl_stream_destroy(s);
}

size_t pdk_dnnl_scratch_of(const_dnnl_primitive_desc_t pd, dnnl_memory_desc_t *md) {
  const dnnl_memory_desc_t *q = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
  size_t n = q ? dnnl_memory_desc_get_size(q) : 0;
  if (n) *md = *q;
  return n;
}

dnnl_status_t pdk_dnnl_exec(dnnl_primitive_t p, dnnl_stream_t s, int n, dnnl_exec_arg_t *args,
                            const dnnl_memory_desc_t *scratch_md, size_t scratch_sz, void *scratch) {
  dnnl_memory_t sm = NULL;
  dnnl_status_t st = dnnl_success;
  if (scratch_sz) {
    st = dnnl_memory_create(&sm, scratch_md, pdk_dnnl_engine(), scratch);
    args[n++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, sm};
  }
  if (st == dnnl_success) st = dnnl_primitive_execute(p, s, n, args);
  if (st == dnnl_success) st = dnnl_stream_wait(s);
  if (sm) dnnl_memory_destroy(sm);
  return st;
}

static unsigned bucket_of(const pdk_dnnl_cache *c, const int64_t *k) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a over the words */
  for (int i = 0; i < c->keylen; i++) h = (h ^ (uint64_t)k[i]) * 1099511628211ull;
  return (unsigned)(h ^ (h >> 32)) % PDK_DNNL_BUCKETS;
}

static pdk_dnnl_cached *find_locked(pdk_dnnl_cache *c, const int64_t *key) {
  for (pdk_dnnl_cached *e = c->buckets[bucket_of(c, key)]; e; e = e->next)
    if (memcmp(e->key, key, sizeof(int64_t) * (size_t)c->keylen) == 0) return e;
  return NULL;
}

pdk_dnnl_cached *pdk_dnnl_cache_find(pdk_dnnl_cache *c, const int64_t *key) {
  pthread_mutex_lock(&c->mu);
  pdk_dnnl_cached *e = find_locked(c, key);
  pthread_mutex_unlock(&c->mu);
  return e;
}

pdk_dnnl_cached *pdk_dnnl_cache_publish(pdk_dnnl_cache *c, pdk_dnnl_cached *e, bool *owned) {
  *owned = false;
  pthread_mutex_lock(&c->mu);
  pdk_dnnl_cached *o = find_locked(c, e->key);
  if (!o && c->n < c->max_entries) {
    unsigned h = bucket_of(c, e->key);
    e->next = c->buckets[h];
    c->buckets[h] = e;
    c->n++;
  } else if (!o) {
    *owned = true;
  }
  pthread_mutex_unlock(&c->mu);
  if (!o) return e;
  c->free_entry(e);
  return o;
}

int pdk_dnnl_cache_size(pdk_dnnl_cache *c) {
  pthread_mutex_lock(&c->mu);
  int n = c->n;
  pthread_mutex_unlock(&c->mu);
  return n;
}
