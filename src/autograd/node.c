/* Grad node lifetime and the dispatcher's autograd recorder. */
#include <stdlib.h>
#include <string.h>

#include "node.h"

static atomic_uint_fast64_t g_seq;
static atomic_int g_hook_id;

int pd_next_hook_id(void) { return atomic_fetch_add(&g_hook_id, 1) + 1; }

/* One block: node, then the per-input and per-output arrays. */
static size_t node_bytes(int n_in, int n_out) {
  size_t ni = (size_t)n_in, no = (size_t)n_out;
  return sizeof(pd_node) + ni * (sizeof(pd_edge) + sizeof(pd_meta) + sizeof(pd_tensor *) + sizeof(uint32_t)) +
         no * (sizeof(pd_meta) + sizeof(pd_tensor *) + sizeof(uint32_t) + sizeof(pd_hook *)) + 64;
}

pd_node *pd_node_alloc(int n_in, int n_out) {
  size_t ni = (size_t)n_in, no = (size_t)n_out;
  size_t sz = node_bytes(n_in, n_out);
  char *p;
  if (sz <= PD_POOL_BLOCK) { /* most nodes: a pooled block */
    p = pd_block_get();
    if (p) memset(p, 0, sz);
  } else {
    p = calloc(1, sz);
  }
  if (!p) {
    pd_set_error(PD_ERR_MEMORY, "autograd: out of memory for a grad node");
    return NULL;
  }
  pd_node *n = (pd_node *)p;
  char *q = p + sizeof(pd_node);
#define CARVE(field, count)                           \
  do {                                                \
    q = (char *)(((uintptr_t)q + 7) & ~(uintptr_t)7); \
    n->field = (void *)q;                             \
    q += (count) * sizeof(*n->field);                 \
  } while (0)
  CARVE(edges, ni);
  CARVE(in_meta, ni);
  CARVE(saved_in, ni);
  CARVE(ver_in, ni);
  CARVE(out_meta, no);
  CARVE(saved_out, no);
  CARVE(ver_out, no);
  CARVE(out_hooks, no);
#undef CARVE
  n->n_in = n_in;
  n->n_out = n_out;
  n->seq = atomic_fetch_add(&g_seq, 1);
  n->slot = -1;
  return n;
}

void pd_node_retain(pd_node *n) {
  if (n) atomic_fetch_add(&n->refcount, 1);
}

void pd_node_free_saved(pd_node *n) {
  for (int i = 0; i < n->n_in; i++) {
    pd_tensor_release(n->saved_in[i]);
    n->saved_in[i] = NULL;
  }
  for (int k = 0; k < n->n_out; k++) {
    pd_tensor_release(n->saved_out[k]);
    n->saved_out[k] = NULL;
  }
  if (n->ctx) {
    for (int i = 0; i < n->ctx->n_saved; i++) pd_tensor_release(n->ctx->saved[i]);
    free(n->ctx->saved);
    n->ctx->saved = NULL;
    n->ctx->n_saved = 0;
  }
  n->freed = true;
}

/* Iterative, so that releasing a long chain does not overflow the stack. */
void pd_node_release(pd_node *first) {
  pd_node *local[16], **stack = local;
  size_t sp = 0, cap = 16;
  pd_node *n = first;
  while (n) {
    if (atomic_fetch_sub(&n->refcount, 1) == 1) {
      pd_node_free_saved(n);
      if (n->ctx) {
        if (n->ctx->data_free) n->ctx->data_free(n->ctx->data);
        free(n->ctx);
      }
      for (int k = 0; k < n->n_out; k++) pd_hook_list_free(n->out_hooks[k]);
      for (int i = 0; i < n->n_in; i++) {
        pd_tensor_release(n->edges[i].leaf);
        if (n->edges[i].node) {
          if (sp == cap) {
            pd_node **s = stack == local ? malloc(2 * cap * sizeof *s) : realloc(stack, 2 * cap * sizeof *s);
            if (!s) abort();
            if (stack == local) memcpy(s, local, sizeof local);
            stack = s;
            cap *= 2;
          }
          stack[sp++] = n->edges[i].node;
        }
      }
      if (node_bytes(n->n_in, n->n_out) <= PD_POOL_BLOCK)
        pd_block_put(n);
      else
        free(n);
    }
    n = sp ? stack[--sp] : NULL;
  }
  if (stack != local) free(stack);
}

void pd_node_connect_inputs(pd_node *node, pd_tensor *const *in, int n_in) {
  for (int i = 0; i < n_in; i++) {
    pd_meta_of(in[i], &node->in_meta[i]);
    if (in[i]->stop_gradient) continue;
    if (in[i]->grad_fn) {
      node->edges[i].node = in[i]->grad_fn;
      node->edges[i].index = in[i]->out_index;
      pd_node_retain(in[i]->grad_fn);
    } else {
      node->edges[i].leaf = pd_tensor_retain(in[i]);
    }
  }
}

void pd_node_attach_outputs(pd_node *node, pd_tensor **out, int n_out, unsigned nondiff) {
  for (int k = 0; k < n_out; k++) {
    pd_meta_of(out[k], &node->out_meta[k]);
    if (k < 32 && (nondiff & (1u << k))) { /* nondiff names outputs 0..31 */
      out[k]->stop_gradient = true;
      continue;
    }
    pd_node *old = out[k]->grad_fn_weak ? NULL : out[k]->grad_fn; /* inplace: history moves */
    pd_node_retain(node);
    out[k]->grad_fn = node;
    out[k]->grad_fn_weak = false;
    out[k]->out_index = k;
    out[k]->stop_gradient = false;
    if (old) pd_node_release(old);
  }
}

/* A saved output must not own its node (that would be a cycle): it is an
 * alias of the output whose grad_fn is a weak pointer back to the node. */
static pd_tensor *saved_output_alias(pd_node *node, pd_tensor *t, int k) {
  pd_tensor *a = pd_tensor_new_view(t, t->ndim, t->shape, t->strides, t->offset);
  if (!a) return NULL;
  a->grad_fn = node;
  a->grad_fn_weak = true;
  a->out_index = k;
  a->stop_gradient = false;
  return a;
}

static pd_status record(pd_op_id id, pd_tensor *const *in, int n_in, const pd_attrs *a, pd_tensor **out,
                        int n_out) {
  const pd_op_def *def = pd_op_table[id];
  pd_node *node = pd_node_alloc(n_in, n_out);
  if (!node) return pd_last_status();
  node->op = (int)id;
  node->attrs = *a;
  pd_node_connect_inputs(node, in, n_in);
  if (def->flags & PD_OPF_SAVE_IN) {
    for (int i = 0; i < n_in; i++) {
      node->saved_in[i] = pd_tensor_retain(in[i]);
      node->ver_in[i] = in[i]->storage->version;
    }
  }
  pd_node_attach_outputs(node, out, n_out, def->nondiff_out);
  if (def->flags & PD_OPF_SAVE_OUT) {
    for (int k = 0; k < n_out; k++) {
      node->saved_out[k] = saved_output_alias(node, out[k], k);
      node->ver_out[k] = out[k]->storage->version;
    }
  }
  if (atomic_load(&node->refcount) == 0) { /* no output carries a gradient */
    pd_node_retain(node);
    pd_node_release(node);
  }
  return PD_OK;
}

static void release_node_from_tensor(pd_node *n) { pd_node_release(n); }

__attribute__((constructor)) static void install_autograd(void) {
  pd_dispatch_set_autograd(record);
  pd_core_set_node_release(release_node_from_tensor);
}
