/* Small helpers of the SPMD rule files: an input dim's mapping, the first
 * of two mappings, and in_want / out written from a mapping of dims. */
#ifndef PADDLEC_AP_SPMD_UTIL_H
#define PADDLEC_AP_SPMD_UTIL_H

#include "ap_internal.h"

/* The mesh axis sharding dim d of input i, -1 when none or when the dim
 * has size 1 (never sharded) or does not exist. */
static inline int8_t mapped(const pd_spmd_args *s, int i, int d) {
  if (i >= s->n_in || d < 0 || d >= s->in_meta[i].ndim || s->in_meta[i].shape[d] <= 1) return -1;
  return s->in[i].dims_mapping[d];
}
static inline int8_t pick(int8_t a, int8_t b) { return a >= 0 ? a : b; }

/* in_want[i] and out[k] from a mapping of their dims. */
static inline void want(pd_spmd_args *s, int i, const int8_t *map, int nd) {
  pd_spmd_clear(&s->in_want[i]);
  for (int d = 0; d < nd && d < s->in_meta[i].ndim && d < PD_MAX_DIMS; d++)
    if (s->in_meta[i].shape[d] > 1) s->in_want[i].dims_mapping[d] = map[d];
}
static inline void place_out(pd_spmd_args *s, int k, const int8_t *map, int nd) {
  pd_spmd_clear(&s->out[k]);
  for (int d = 0; d < nd && d < s->out_meta[k].ndim && d < PD_MAX_DIMS; d++)
    s->out[k].dims_mapping[d] = map[d];
}

static inline int norm_axis(int64_t ax, int nd) { return (int)(ax < 0 ? ax + nd : ax); }

#endif
