/* NumPy's legacy RandomState (MT19937 seeded with init_genrand) and its
 * shuffle, so DistributedBatchSampler orders indices exactly as Paddle's
 * np.random.RandomState(epoch).shuffle(indices) does. */
#include "io_internal.h"

#define MT_N 624
#define MT_M 397

void pd_mt19937_seed(pd_mt19937 *s, uint32_t seed) {
  for (int i = 0; i < MT_N; i++) {
    s->key[i] = seed;
    seed = 1812433253u * (seed ^ (seed >> 30)) + (uint32_t)i + 1u;
  }
  s->pos = MT_N;
}

static void mt_generate(pd_mt19937 *s) {
  for (int i = 0; i < MT_N; i++) {
    uint32_t y = (s->key[i] & 0x80000000u) | (s->key[(i + 1) % MT_N] & 0x7fffffffu);
    s->key[i] = s->key[(i + MT_M) % MT_N] ^ (y >> 1) ^ ((y & 1u) ? 0x9908b0dfu : 0u);
  }
  s->pos = 0;
}

uint32_t pd_mt19937_next32(pd_mt19937 *s) {
  if (s->pos >= MT_N) mt_generate(s);
  uint32_t y = s->key[s->pos++];
  y ^= y >> 11;
  y ^= (y << 7) & 0x9d2c5680u;
  y ^= (y << 15) & 0xefc60000u;
  y ^= y >> 18;
  return y;
}

/* numpy's random_interval: uniform on [0, max] by masked rejection */
static uint64_t random_interval(pd_mt19937 *s, uint64_t max) {
  if (max == 0) return 0;
  uint64_t mask = max;
  mask |= mask >> 1;
  mask |= mask >> 2;
  mask |= mask >> 4;
  mask |= mask >> 8;
  mask |= mask >> 16;
  mask |= mask >> 32;
  uint64_t v;
  if (max <= 0xffffffffu) {
    while ((v = (pd_mt19937_next32(s) & mask)) > max) {
    }
  } else {
    do {
      uint64_t hi = pd_mt19937_next32(s);
      v = ((hi << 32) | pd_mt19937_next32(s)) & mask;
    } while (v > max);
  }
  return v;
}

void pd_numpy_shuffle_i64(pd_mt19937 *s, int64_t *x, int64_t n) {
  for (int64_t i = n - 1; i >= 1; i--) {
    int64_t j = (int64_t)random_interval(s, (uint64_t)i);
    int64_t t = x[i];
    x[i] = x[j];
    x[j] = t;
  }
}
