/* Philox 4x32-10 on several consecutive counters at once, for the random
 * ops: the same words as pd_philox (src/core/rng.c), laid out so the
 * compiler vectorises the rounds across counters. */
#ifndef PADDLEC_OPS_RANDOM_PHILOX_H
#define PADDLEC_OPS_RANDOM_PHILOX_H

#include "../../kernels/cpu/parallel.h"
#include <stdint.h>

#define PD_PHILOX_LANES 8

/* out[l] = pd_philox(ctr + l, key) for l < PD_PHILOX_LANES. */
static inline void pd_philox_lanes(uint64_t ctr, uint64_t key, uint32_t out[PD_PHILOX_LANES][4]) {
  uint32_t c0[PD_PHILOX_LANES], c1[PD_PHILOX_LANES], c2[PD_PHILOX_LANES], c3[PD_PHILOX_LANES];
  for (int l = 0; l < PD_PHILOX_LANES; l++) {
    uint64_t c = ctr + (uint64_t)l;
    c0[l] = (uint32_t)c;
    c1[l] = (uint32_t)(c >> 32);
    c2[l] = 0;
    c3[l] = 0;
  }
  uint32_t k0 = (uint32_t)key, k1 = (uint32_t)(key >> 32);
  for (int r = 0; r < 10; r++) {
#pragma omp simd
    for (int l = 0; l < PD_PHILOX_LANES; l++) {
      uint64_t p0 = (uint64_t)0xD2511F53u * c0[l];
      uint64_t p1 = (uint64_t)0xCD9E8D57u * c2[l];
      uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1[l] ^ k0;
      uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3[l] ^ k1;
      c1[l] = (uint32_t)p1;
      c3[l] = (uint32_t)p0;
      c0[l] = n0;
      c2[l] = n2;
    }
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  for (int l = 0; l < PD_PHILOX_LANES; l++) {
    out[l][0] = c0[l];
    out[l][1] = c1[l];
    out[l][2] = c2[l];
    out[l][3] = c3[l];
  }
}

/* Runs the body (the last argument) for every counter block b in [0, nb) with `const int64_t b` and
 * its four words `const uint32_t *w` (pd_philox(first + b, key)) in scope,
 * PD_PHILOX_LANES blocks at a time, split over threads when nb > grain.
 * Each block's words depend only on b, never on the thread running it. */
#define PD_FOR_PHILOX_BLOCKS(nb, first, key, grain, ...)                                         \
  do {                                                                                           \
    const int64_t nb_ = (nb);                                                                    \
    const int64_t ng_ = (nb_ + PD_PHILOX_LANES - 1) / PD_PHILOX_LANES;                           \
    const uint64_t first_ = (first), key_ = (key);                                               \
    const int64_t grain_ = (grain);                                                              \
    PD_OMP_FOR_IF(                                                                               \
        nb_ > grain_, for (int64_t g_ = 0; g_ < ng_; g_++), uint32_t lanes_[PD_PHILOX_LANES][4]; \
        pd_philox_lanes(first_ + (uint64_t)g_ * PD_PHILOX_LANES, key_, lanes_);                  \
        for (int l_ = 0; l_ < PD_PHILOX_LANES && g_ * PD_PHILOX_LANES + l_ < nb_; l_++) {        \
          const int64_t b = g_ * PD_PHILOX_LANES + l_;                                           \
          const uint32_t *w = lanes_[l_];                                                        \
          __VA_ARGS__                                                                            \
        });                                                                                      \
  } while (0)

#endif
