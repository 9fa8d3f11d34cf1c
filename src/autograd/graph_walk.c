/* Reachability over the backward graph (depth-first, a pointer set of the
 * nodes seen, so shared subgraphs are walked once). */
#include <stdint.h>
#include <stdlib.h>

#include "graph_walk.h"
#include "node.h"

typedef struct ptr_set {
  const void **slots;
  size_t cap, n;
} ptr_set;

static size_t ptr_hash(const void *p, size_t cap) {
  uint64_t x = (uint64_t)(uintptr_t)p;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  return (size_t)x & (cap - 1);
}

/* 1: inserted, 0: already there, <0: out of memory. */
static int set_add(ptr_set *s, const void *p) {
  if (2 * (s->n + 1) > s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 64;
    const void **slots = calloc(cap, sizeof *slots);
    if (!slots) return -1;
    for (size_t i = 0; i < s->cap; i++) {
      if (!s->slots[i]) continue;
      size_t h = ptr_hash(s->slots[i], cap);
      while (slots[h]) h = (h + 1) & (cap - 1);
      slots[h] = s->slots[i];
    }
    free(s->slots);
    s->slots = slots;
    s->cap = cap;
  }
  size_t h = ptr_hash(p, s->cap);
  while (s->slots[h]) {
    if (s->slots[h] == p) return 0;
    h = (h + 1) & (s->cap - 1);
  }
  s->slots[h] = p;
  s->n++;
  return 1;
}

pd_status pd_autograd_visit_leaves(pd_tensor *const *roots, int n_roots,
                                   void (*fn)(pd_tensor *leaf, void *user), void *user) {
  if (!fn || n_roots < 0 || (n_roots && !roots))
    return pd_set_error(PD_ERR_INVALID, "visit_leaves: bad arguments (%d roots)", n_roots);
  ptr_set seen = {0}, leaves = {0};
  pd_node **stack = NULL;
  size_t sp = 0, cap = 0;
  pd_status st = PD_OK;
#define PUSH(x)                                                          \
  do {                                                                   \
    if (sp == cap) {                                                     \
      size_t c2 = cap ? cap * 2 : 64;                                    \
      pd_node **s2 = realloc(stack, c2 * sizeof *s2);                    \
      if (!s2) {                                                         \
        st = pd_set_error(PD_ERR_MEMORY, "visit_leaves: out of memory"); \
        goto out;                                                        \
      }                                                                  \
      stack = s2;                                                        \
      cap = c2;                                                          \
    }                                                                    \
    stack[sp++] = (x);                                                   \
  } while (0)
  for (int r = 0; r < n_roots; r++) {
    pd_tensor *t = roots[r];
    if (!t || t->stop_gradient) continue;
    if (!t->grad_fn) {
      int a = set_add(&leaves, t);
      if (a < 0) {
        st = pd_set_error(PD_ERR_MEMORY, "visit_leaves: out of memory");
        goto out;
      }
      if (a) fn(t, user);
      continue;
    }
    int a = set_add(&seen, t->grad_fn);
    if (a < 0) {
      st = pd_set_error(PD_ERR_MEMORY, "visit_leaves: out of memory");
      goto out;
    }
    if (a) PUSH(t->grad_fn);
    while (sp) {
      pd_node *n = stack[--sp];
      for (int i = 0; i < n->n_in; i++) {
        const pd_edge *ed = &n->edges[i];
        if (ed->leaf) {
          int b = set_add(&leaves, ed->leaf);
          if (b < 0) {
            st = pd_set_error(PD_ERR_MEMORY, "visit_leaves: out of memory");
            goto out;
          }
          if (b) fn(ed->leaf, user);
        }
        if (ed->node) {
          int b = set_add(&seen, ed->node);
          if (b < 0) {
            st = pd_set_error(PD_ERR_MEMORY, "visit_leaves: out of memory");
            goto out;
          }
          if (b) PUSH(ed->node);
        }
      }
    }
  }
#undef PUSH
out:
  free(stack);
  free(seen.slots);
  free(leaves.slots);
  return st;
}
