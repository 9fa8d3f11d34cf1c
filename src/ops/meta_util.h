/* Shape inference with unknown dims. A static-graph Variable's dims may be
 * -1 (unknown until its Program runs, typically the batch), and every
 * infer_meta follows the same rules, written here once:
 *  - a dim computed from an unknown dim is unknown (sums, products, slices);
 *  - two dims that must be equal agree when either is unknown, and the
 *    known one is the result;
 *  - only known dims that conflict are errors;
 *  - a dim that depends on tensor values (nonzero's count) is unknown when
 *    the tensor is a Variable.
 * Eager tensors have no unknown dims, so these cost eager ops nothing but a
 * comparison. */
#ifndef PADDLEC_OPS_META_UTIL_H
#define PADDLEC_OPS_META_UTIL_H

#include <stdbool.h>
#include <stdint.h>

#define PD_DIM_UNKNOWN ((int64_t)-1)

static inline bool pd_dim_known(int64_t d) { return d >= 0; }
/* Whether dims that must be equal can be: equal, or either unknown. */
static inline bool pd_dims_agree(int64_t a, int64_t b) { return a == b || a < 0 || b < 0; }
/* The size two agreeing dims have: the known one (unknown when neither is). */
static inline int64_t pd_dim_merge(int64_t a, int64_t b) { return a >= 0 ? a : b; }
/* a + b, unknown when either is (concat along an axis). */
static inline int64_t pd_dim_add(int64_t a, int64_t b) { return a < 0 || b < 0 ? PD_DIM_UNKNOWN : a + b; }
/* a * b, unknown when either is (flatten, reshape); the caller checks
 * overflow of known products as it did before. */
static inline int64_t pd_dim_mul(int64_t a, int64_t b) { return a < 0 || b < 0 ? PD_DIM_UNKNOWN : a * b; }
/* a / b for a known b > 0 that divides a (glu's halves), unknown when a is. */
static inline int64_t pd_dim_div(int64_t a, int64_t b) { return a < 0 ? PD_DIM_UNKNOWN : a / b; }
/* One dim of a broadcast of a against b: false when they conflict (both
 * known, different, neither 1). An unknown dim takes the other's size,
 * except against 1, where it stays unknown (it may be 1 or anything). */
static inline bool pd_broadcast_dim(int64_t a, int64_t b, int64_t *out) {
  if (a == b || b == 1) {
    *out = a;
    return true;
  }
  if (a == 1 || a < 0) {
    *out = b;
    return true;
  }
  *out = a;
  return b < 0;
}
/* Whether shapes of n dims that must be equal can be (pd_dims_agree per dim). */
static inline bool pd_shapes_agree(int n, const int64_t *a, const int64_t *b) {
  for (int i = 0; i < n; i++)
    if (!pd_dims_agree(a[i], b[i])) return false;
  return true;
}
/* Whether any of n dims is unknown. */
static inline bool pd_dims_any_unknown(int n, const int64_t *d) {
  for (int i = 0; i < n; i++)
    if (d[i] < 0) return true;
  return false;
}
/* The element count of n dims; unknown when any dim is. */
static inline int64_t pd_dims_numel(int n, const int64_t *d) {
  int64_t p = 1;
  for (int i = 0; i < n; i++) p = pd_dim_mul(p, d[i]);
  return p;
}

#endif
