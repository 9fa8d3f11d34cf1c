/* Grad nodes: what a differentiable op call leaves for backward. */
#ifndef PADDLEC_AUTOGRAD_NODE_H
#define PADDLEC_AUTOGRAD_NODE_H

#include "../ops/op_registry.h"
#include "paddlec/autograd.h"

/* Where the gradient of one input goes: into another node's output slot,
 * or into a leaf tensor's .grad. */
typedef struct pd_edge {
  pd_node *node; /* owning */
  int index;
  pd_tensor *leaf; /* owning */
} pd_edge;

struct pd_pylayer_ctx {
  pd_tensor **saved;
  int n_saved;
  void *data;
  void (*data_free)(void *);
};

struct pd_node {
  atomic_int refcount;
  int op;       /* pd_op_id, or -1 for a custom function */
  uint64_t seq; /* creation order: later nodes run first in backward */
  pd_attrs attrs;
  int n_in, n_out;
  pd_edge *edges;        /* n_in */
  pd_meta *in_meta;      /* n_in */
  pd_meta *out_meta;     /* n_out */
  pd_tensor **saved_in;  /* n_in, entries NULL unless saved */
  pd_tensor **saved_out; /* n_out, weak aliases of the outputs */
  uint32_t *ver_in, *ver_out;
  pd_hook **out_hooks; /* n_out: hooks registered on non-leaf outputs */
  bool freed;          /* saved tensors dropped after a backward */
  const pd_pylayer *custom;
  pd_pylayer_ctx *ctx;
  /* engine scratch, valid during one backward */
  uint64_t stamp;
  int deps;
  int slot;
};

void pd_node_retain(pd_node *n);
void pd_node_release(pd_node *n);
/* Drops saved tensors (after a backward without retain_graph). */
void pd_node_free_saved(pd_node *n);
/* Allocates a node with its arrays, refcount 0. */
pd_node *pd_node_alloc(int n_in, int n_out);
/* Fills edges and in_meta from the inputs. */
void pd_node_connect_inputs(pd_node *node, pd_tensor *const *in, int n_in);
/* Makes the node the grad_fn of the differentiable outputs. */
void pd_node_attach_outputs(pd_node *node, pd_tensor **out, int n_out, unsigned nondiff);
int pd_next_hook_id(void);

#endif
