/* Core-internal hooks that higher layers register (the core never calls up). */
#ifndef PADDLEC_CORE_INTERNAL_H
#define PADDLEC_CORE_INTERNAL_H

#include "tensor_impl.h"

/* A gradient hook: fn(grad, user) returns a replacement grad (a new
 * reference) or NULL to keep the grad unchanged. */
typedef pd_tensor *(*pd_grad_hook_fn)(pd_tensor *grad, void *user);
/* A post-accumulate hook on a leaf: fn(leaf, user) after its grad changed. */
typedef void (*pd_post_hook_fn)(pd_tensor *leaf, void *user);

struct pd_hook {
  pd_grad_hook_fn fn;
  pd_post_hook_fn post_fn;
  void *user;
  int id;
  struct pd_hook *next;
};

void pd_hook_list_free(pd_hook *h);

/* Puts "<formatted prefix>: " before the current error message, keeping its
 * status: the context a caller adds when a call inside it failed (the layer
 * whose forward failed, the op whose output could not be allocated). */
void pd_error_prefix(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The options rule (docs/architecture.md "Options structs"): a struct whose
 * Paddle defaults are not all zero must start from its defaults function,
 * which sets explicit_zero. Sets and returns the PD_ERR_INVALID error for
 * one that did not: "<cls>: options must start from <defaults_fn> (...)". */
pd_status pd_opts_not_from_defaults(const char *cls, const char *defaults_fn);

/* The autograd layer registers how a tensor drops its grad_fn. */
void pd_core_set_node_release(void (*fn)(pd_node *));

/* t takes over src's storage, dtype and geometry, and src gets t's old
 * storage (release src afterwards); t's identity, name, parameter info and
 * autograd flags stay. For Layer.to(dtype): src is the converted copy. */
void pd_tensor_take_data(pd_tensor *t, pd_tensor *src);

/* Library internals run at depth > 0: tensors they create are not tracked
 * by the user's scope (they release them by hand). */
extern _Thread_local int pd_g_internal_depth;
static inline void pd_internal_enter(void) { pd_g_internal_depth++; }
static inline void pd_internal_leave(void) { pd_g_internal_depth--; }
static inline int pd_internal_depth(void) { return pd_g_internal_depth; }

/* Philox 4x32-10: 4 random words for (counter, key). */
void pd_philox(uint64_t counter, uint64_t key, uint32_t out[4]);
/* Reserves n consecutive counters of the global generator; returns the first
 * and writes the key. Element i of a random op uses counter first + i / 4,
 * word i % 4, so results do not depend on the number of threads. */
uint64_t pd_rng_reserve(uint64_t n, uint64_t *key);
static inline float pd_u32_to_unit_f32(uint32_t u) { return (float)(u >> 8) * (1.0f / 16777216.0f); }
static inline double pd_u64_to_unit_f64(uint32_t hi, uint32_t lo) {
  return (double)((((uint64_t)hi << 32) | lo) >> 11) * (1.0 / 9007199254740992.0);
}

#endif
