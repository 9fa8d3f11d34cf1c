/* The global counter-based generator (Philox 4x32-10). */
#include <pthread.h>

#include "core_internal.h"

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t g_seed = 0x5eed5eedULL, g_offset;

void pd_seed(uint64_t seed) {
  pthread_mutex_lock(&g_lock);
  g_seed = seed;
  g_offset = 0;
  pthread_mutex_unlock(&g_lock);
}

uint64_t pd_get_seed(void) { return g_seed; }

uint64_t pd_rng_reserve(uint64_t n, uint64_t *key) {
  pthread_mutex_lock(&g_lock);
  uint64_t first = g_offset;
  g_offset += n;
  *key = g_seed;
  pthread_mutex_unlock(&g_lock);
  return first;
}

static inline uint32_t mulhilo(uint32_t a, uint32_t b, uint32_t *hi) {
  uint64_t p = (uint64_t)a * b;
  *hi = (uint32_t)(p >> 32);
  return (uint32_t)p;
}

void pd_philox(uint64_t counter, uint64_t key, uint32_t out[4]) {
  uint32_t c0 = (uint32_t)counter, c1 = (uint32_t)(counter >> 32), c2 = 0, c3 = 0;
  uint32_t k0 = (uint32_t)key, k1 = (uint32_t)(key >> 32);
  for (int r = 0; r < 10; r++) {
    uint32_t hi0, hi1;
    uint32_t lo0 = mulhilo(0xD2511F53u, c0, &hi0);
    uint32_t lo1 = mulhilo(0xCD9E8D57u, c2, &hi1);
    uint32_t n0 = hi1 ^ c1 ^ k0, n1 = lo1, n2 = hi0 ^ c3 ^ k1, n3 = lo0;
    c0 = n0;
    c1 = n1;
    c2 = n2;
    c3 = n3;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  out[0] = c0;
  out[1] = c1;
  out[2] = c2;
  out[3] = c3;
}
