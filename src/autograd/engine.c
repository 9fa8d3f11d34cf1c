/* The backward engine: dependency counting over the tape, nodes run
 * latest-first (a max-heap on creation order), leaf gradients accumulate. */
#include <stdlib.h>
#include <string.h>

#include "node.h"
#include "paddlec/ops.h"

typedef struct engine {
  pd_node **nodes; /* every node reached */
  size_t n, cap;
  pd_tensor ***gbuf; /* per node slot: n_out grads */
  bool *exec;        /* per slot: must run (leads to a target) */
  bool *capture;     /* per slot: an output of this node is a pd_grad input */
  uint64_t stamp;
  bool create_graph, keep_graph;
  /* leaves: their grads are summed over all incoming edges, then hooks and
   * accumulation run once (as Paddle's and PyTorch's accumulation nodes) */
  pd_tensor **leaves;
  pd_tensor **leaf_gbuf;
  int *leaf_pending;
  size_t nleaves, leaf_cap;
  /* pd_grad mode */
  pd_tensor *const *targets;
  int n_targets;
  pd_tensor **captured;
} engine;

static uint64_t g_stamp;

/* Callbacks queued during the outermost run on this thread. */
typedef struct queued_cb {
  pd_autograd_callback_fn fn;
  void *user;
} queued_cb;
static _Thread_local queued_cb *g_cbs;
static _Thread_local int g_ncbs, g_cbcap;
static pd_status run_callbacks(pd_status st);

/* Scratch for one backward run: a thread-local bump arena that keeps its
 * chunks between runs, so a small backward does no malloc. Nested runs (a
 * custom backward calling pd_grad) keep bumping; the outermost run resets. */
typedef struct chunk {
  struct chunk *next;
  size_t cap, used;
  _Alignas(16) char data[];
} chunk;
static _Thread_local chunk *g_chunks, *g_cur;
static _Thread_local int g_run_depth;

static void *scratch(size_t bytes) {
  bytes = (bytes + 15) & ~(size_t)15;
  while (g_cur && g_cur->used + bytes > g_cur->cap) g_cur = g_cur->next;
  if (!g_cur) {
    size_t cap = bytes > 65536 ? bytes : 65536;
    chunk *c = malloc(sizeof(chunk) + cap);
    if (!c) return NULL;
    c->cap = cap;
    c->used = 0;
    c->next = NULL;
    chunk **tail = &g_chunks;
    while (*tail) tail = &(*tail)->next;
    *tail = c;
    g_cur = c;
  }
  void *p = g_cur->data + g_cur->used;
  g_cur->used += bytes;
  memset(p, 0, bytes);
  return p;
}

/* A copy of old (old_bytes) in a new block of new_bytes. */
static void *scratch_grow(void *old, size_t old_bytes, size_t new_bytes) {
  void *p = scratch(new_bytes);
  if (p && old) memcpy(p, old, old_bytes);
  return p;
}

static void scratch_reset(void) {
  for (chunk *c = g_chunks; c; c = c->next) c->used = 0;
  g_cur = g_chunks;
}

static pd_status add_node(engine *e, pd_node *n) {
  if (e->n == e->cap) {
    size_t cap = e->cap ? e->cap * 2 : 64;
    pd_node **nodes = scratch_grow(e->nodes, e->cap * sizeof *nodes, cap * sizeof *nodes);
    if (!nodes) return pd_set_error(PD_ERR_MEMORY, "backward: out of memory");
    e->nodes = nodes;
    e->cap = cap;
  }
  n->stamp = e->stamp;
  n->slot = (int)e->n;
  n->deps = 0;
  e->nodes[e->n++] = n;
  return PD_OK;
}

static pd_status add_leaf_edge(engine *e, pd_tensor *leaf) {
  if (leaf->bw_stamp == e->stamp) {
    e->leaf_pending[leaf->bw_slot]++;
    return PD_OK;
  }
  if (e->nleaves == e->leaf_cap) {
    size_t cap = e->leaf_cap ? e->leaf_cap * 2 : 32;
    size_t old = e->leaf_cap;
    pd_tensor **l = scratch_grow(e->leaves, old * sizeof *l, cap * sizeof *l);
    if (l) e->leaves = l;
    pd_tensor **g = scratch_grow(e->leaf_gbuf, old * sizeof *g, cap * sizeof *g);
    if (g) e->leaf_gbuf = g;
    int *p = scratch_grow(e->leaf_pending, old * sizeof *p, cap * sizeof *p);
    if (p) e->leaf_pending = p;
    if (!l || !g || !p) return pd_set_error(PD_ERR_MEMORY, "backward: out of memory");
    e->leaf_cap = cap;
  }
  leaf->bw_stamp = e->stamp;
  leaf->bw_slot = (int)e->nleaves;
  e->leaves[e->nleaves] = leaf;
  e->leaf_gbuf[e->nleaves] = NULL;
  e->leaf_pending[e->nleaves++] = 1;
  return PD_OK;
}

static int target_index(const engine *e, const pd_tensor *leaf, const pd_node *node, int k) {
  for (int i = 0; i < e->n_targets; i++) {
    const pd_tensor *t = e->targets[i];
    if (leaf && t == leaf) return i;
    if (node && t->grad_fn == node && t->out_index == k) return i;
  }
  return -1;
}

/* Collects the graph reachable from roots (iterative DFS) and counts, for
 * each node, the edges that reach it. */
static pd_status collect(engine *e, pd_node *const *roots, int n_roots) {
  typedef struct frame {
    pd_node *n;
    int next;
  } frame;
  frame *st = NULL;
  size_t sp = 0, cap = 0;
  pd_status rc = PD_OK;
  for (int r = 0; r < n_roots && rc == PD_OK; r++) {
    if (!roots[r] || roots[r]->stamp == e->stamp) continue;
    if ((rc = add_node(e, roots[r])) != PD_OK) break;
    if (sp == cap) {
      cap = cap ? cap * 2 : 64;
      st = scratch_grow(st, sp * sizeof *st, cap * sizeof *st);
      if (!st) abort();
    }
    st[sp++] = (frame){roots[r], 0};
    while (sp) {
      frame *f = &st[sp - 1];
      if (f->next < f->n->n_in) {
        pd_edge *ed = &f->n->edges[f->next++];
        if (ed->leaf && (rc = add_leaf_edge(e, ed->leaf)) != PD_OK) break;
        pd_node *c = ed->node;
        if (!c) continue;
        if (c->stamp == e->stamp) {
          c->deps++;
          continue;
        }
        if ((rc = add_node(e, c)) != PD_OK) break;
        c->deps = 1;
        if (sp == cap) {
          cap *= 2;
          st = scratch_grow(st, sp * sizeof *st, cap * sizeof *st);
          if (!st) abort();
        }
        st[sp++] = (frame){c, 0};
      } else {
        sp--;
      }
    }
  }
  return rc;
}

static pd_status grow_scratch(engine *e) {
  size_t n = e->cap ? e->cap : 64;
  e->gbuf = scratch(n * sizeof *e->gbuf);
  e->exec = scratch(n * sizeof *e->exec);
  e->capture = scratch(n * sizeof *e->capture);
  if (!e->gbuf || !e->exec || !e->capture) return pd_set_error(PD_ERR_MEMORY, "backward: out of memory");
  return PD_OK;
}

/* Adds g into *slot (new references everywhere). */
static pd_status accumulate_into(pd_tensor **slot, pd_tensor *g) {
  if (!*slot) {
    *slot = pd_tensor_retain(g);
    return PD_OK;
  }
  pd_tensor *s = pd_add(*slot, g);
  if (!s) return pd_last_status();
  pd_tensor_release(*slot);
  *slot = s;
  return PD_OK;
}

/* The tensor hooks on g, whose reference this takes; returns a reference. */
static pd_tensor *apply_hooks(pd_hook *h, pd_tensor *g) {
  for (; h; h = h->next) {
    if (!h->fn) continue;
    pd_tensor *r = h->fn(g, h->user);
    if (r) {
      pd_tensor_release(g);
      g = r;
    }
  }
  return g;
}

/* Adds g0 into leaf's .grad. With `take`, the caller's reference to g0 is
 * given over: a fresh gradient that nothing else holds then becomes the
 * leaf's .grad itself instead of a copy of it. */
static pd_status accumulate_leaf(engine *e, pd_tensor *leaf, pd_tensor *g0, bool take) {
  pd_tensor *g = apply_hooks(leaf->hooks, take ? g0 : pd_tensor_retain(g0));
  pd_status st = PD_OK;
  if (e->targets) {
    int i = target_index(e, leaf, NULL, 0);
    if (i >= 0) st = accumulate_into(&e->captured[i], g);
    pd_tensor_release(g);
    return st;
  }
  if (!leaf->grad) {
    /* Own the buffer: the incoming grad may be shared with other leaves. */
    bool own = atomic_load(&g->refcount) == 1 && atomic_load(&g->storage->refcount) == 1 &&
               g->is_contiguous && g->dtype == leaf->dtype && !g->grad_fn;
    pd_tensor *c = own               ? pd_tensor_retain(g)
                   : e->create_graph ? pd_cast(g, leaf->dtype)
                                     : pd_clone(g, leaf->dtype);
    if (!c) st = pd_last_status();
    leaf->grad = c;
  } else if (e->create_graph) {
    st = accumulate_into(&leaf->grad, g);
  } else {
    pd_tensor *r = pd_add_(leaf->grad, g);
    if (!r) st = pd_last_status();
    pd_tensor_release(r);
  }
  pd_tensor_release(g);
  if (st == PD_OK)
    for (pd_hook *h = leaf->post_hooks; h; h = h->next)
      if (h->post_fn) h->post_fn(leaf, h->user);
  return st;
}

/* Max-heap on creation order. */
static void heap_push(pd_node **h, size_t *n, pd_node *x) {
  size_t i = (*n)++;
  while (i && h[(i - 1) / 2]->seq < x->seq) {
    h[i] = h[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  h[i] = x;
}
static pd_node *heap_pop(pd_node **h, size_t *n) {
  pd_node *top = h[0], *x = h[--*n];
  size_t i = 0;
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= *n) break;
    if (c + 1 < *n && h[c + 1]->seq > h[c]->seq) c++;
    if (h[c]->seq <= x->seq) break;
    h[i] = h[c];
    i = c;
  }
  if (*n) h[i] = x;
  return top;
}

static pd_status check_versions(const pd_node *n) {
  const char *name = n->op >= 0 ? pd_op_table[n->op]->name : n->custom->name;
  for (int i = 0; i < n->n_in; i++)
    if (n->saved_in[i] && n->saved_in[i]->storage->version != n->ver_in[i])
      return pd_set_error(PD_ERR_STATE,
                          "backward: input %d of %s was modified by an inplace operation after "
                          "it was saved for backward (version %u, expected %u)",
                          i, name ? name : "?", n->saved_in[i]->storage->version, n->ver_in[i]);
  for (int k = 0; k < n->n_out; k++)
    if (n->saved_out[k] && n->saved_out[k]->storage->version != n->ver_out[k])
      return pd_set_error(PD_ERR_STATE,
                          "backward: output %d of %s was modified by an inplace operation after "
                          "it was saved for backward (version %u, expected %u)",
                          k, name ? name : "?", n->saved_out[k]->storage->version, n->ver_out[k]);
  return PD_OK;
}

static pd_status run_node(engine *e, pd_node *n, pd_node **heap, size_t *hn) {
  const char *name = n->op >= 0 ? pd_op_table[n->op]->name : (n->custom->name ? n->custom->name : "PyLayer");
  pd_tensor **g = e->gbuf[n->slot];
  if (!g) { /* no gradient reached this node (e.g. pd_grad inputs it does not lead to) */
    g = e->gbuf[n->slot] = scratch((size_t)n->n_out * sizeof *g);
    if (!g) return pd_set_error(PD_ERR_MEMORY, "backward: out of memory");
  }
  pd_status st = PD_OK;
  pd_tensor *gin[PD_MAX_OUTPUTS];
  pd_tensor **grad_in = n->n_in <= PD_MAX_OUTPUTS ? gin : scratch((size_t)n->n_in * sizeof *grad_in);
  bool need_stack[PD_MAX_OUTPUTS];
  bool *needs = n->n_in <= PD_MAX_OUTPUTS ? need_stack : scratch((size_t)n->n_in * sizeof *needs);
  if (!grad_in || !needs) return pd_set_error(PD_ERR_MEMORY, "backward: out of memory");
  for (int i = 0; i < n->n_in; i++) {
    grad_in[i] = NULL;
    needs[i] = n->edges[i].node || n->edges[i].leaf;
  }
  for (int k = 0; k < n->n_out; k++) {
    if (g[k] && n->out_hooks[k]) g[k] = apply_hooks(n->out_hooks[k], g[k]);
    if (e->capture[n->slot]) {
      int ti = target_index(e, NULL, n, k);
      if (ti >= 0 && g[k] && (st = accumulate_into(&e->captured[ti], g[k])) != PD_OK) goto out;
    }
  }
  if (!e->exec[n->slot]) goto propagate;
  if (n->freed) {
    st = pd_set_error(PD_ERR_STATE,
                      "backward: the graph through %s was already freed by an earlier backward; "
                      "pass retain_graph=true to the first backward to run it twice",
                      name);
    goto out;
  }
  if ((st = check_versions(n)) != PD_OK) goto out;
  for (int k = 0; k < n->n_out; k++) {
    if (!g[k]) {
      const pd_meta *m = &n->out_meta[k];
      g[k] = pd_zeros(m->ndim, m->shape, m->dtype);
      if (!g[k]) {
        st = pd_last_status();
        goto out;
      }
    }
  }
  if (n->custom) {
    st = n->custom->backward(n->ctx, g, n->n_out, grad_in, n->n_in);
  } else {
    pd_backward_ctx ctx = {.attrs = &n->attrs,
                           .n_in = n->n_in,
                           .n_out = n->n_out,
                           .inputs = n->saved_in,
                           .outputs = n->saved_out,
                           .in_meta = n->in_meta,
                           .grad_out = g,
                           .needs_grad = needs,
                           .grad_in = grad_in};
    st = pd_op_table[n->op]->backward(&ctx);
  }
  if (st != PD_OK) goto out;
  for (int i = 0; i < n->n_in; i++) {
    /* a DTensor gradient holds a shard; the DTensor handler checked it
     * against the global metas the node keeps */
    if (!grad_in[i] || !needs[i] || grad_in[i]->dist_attr) continue;
    const pd_meta *m = &n->in_meta[i];
    if (grad_in[i]->ndim != m->ndim || !pd_shape_eq(m->ndim, grad_in[i]->shape, m->shape)) {
      char a[160], b[160];
      st = pd_set_error(PD_ERR_SHAPE, "backward of %s: grad of input %d has shape %s, expected %s", name, i,
                        pd_shape_str(grad_in[i]->ndim, grad_in[i]->shape, a, sizeof a),
                        pd_shape_str(m->ndim, m->shape, b, sizeof b));
      goto out;
    }
  }
propagate:
  for (int i = 0; i < n->n_in && st == PD_OK; i++) {
    pd_edge *ed = &n->edges[i];
    if (ed->leaf) {
      int ls = ed->leaf->bw_slot;
      if (grad_in[i]) st = accumulate_into(&e->leaf_gbuf[ls], grad_in[i]);
      if (st == PD_OK && --e->leaf_pending[ls] == 0 && e->leaf_gbuf[ls]) {
        /* the leaf's last contribution: its buffer's reference, and this
         * node's own when it is the same tensor, go with it (a weight's
         * gradient from a GEMM then becomes its .grad without a copy) */
        pd_tensor *g = e->leaf_gbuf[ls];
        e->leaf_gbuf[ls] = NULL;
        if (grad_in[i] == g && !ed->node) {
          pd_tensor_release(grad_in[i]);
          grad_in[i] = NULL;
        }
        st = accumulate_leaf(e, ed->leaf, g, true);
      }
    }
    if (ed->node) {
      pd_node *c = ed->node;
      if (grad_in[i]) {
        if (!e->gbuf[c->slot]) {
          e->gbuf[c->slot] = scratch((size_t)c->n_out * sizeof(pd_tensor *));
          if (!e->gbuf[c->slot]) {
            st = pd_set_error(PD_ERR_MEMORY, "backward: out of memory");
            break;
          }
        }
        st = accumulate_into(&e->gbuf[c->slot][ed->index], grad_in[i]);
      }
      if (--c->deps == 0) heap_push(heap, hn, c);
    }
  }
  if (st == PD_OK && !e->keep_graph && e->exec[n->slot]) pd_node_free_saved(n);
out:
  for (int i = 0; i < n->n_in; i++) pd_tensor_release(grad_in[i]);
  return st;
}

static pd_status run_engine(engine *e, pd_tensor *const *roots, pd_tensor *const *root_grads, int n_roots) {
  pd_status st = PD_OK;
  e->stamp = ++g_stamp;
  if (g_run_depth++ == 0) scratch_reset();
  pd_node **rn = scratch(((size_t)n_roots + 1) * sizeof *rn);
  if (!rn) {
    g_run_depth--;
    return pd_set_error(PD_ERR_MEMORY, "backward: out of memory");
  }
  for (int r = 0; r < n_roots; r++) rn[r] = roots[r]->grad_fn;
  st = collect(e, rn, n_roots);
  if (st == PD_OK) st = grow_scratch(e);
  if (st == PD_OK && e->targets) {
    /* run only nodes that lead to an input of pd_grad */
    for (size_t s = 0; s < e->n; s++) {
      pd_node *n = e->nodes[s];
      for (int k = 0; k < n->n_out; k++)
        if (target_index(e, NULL, n, k) >= 0) e->capture[s] = true;
    }
    bool changed = true;
    while (changed) { /* fixed point over the (small) graph */
      changed = false;
      for (size_t s = e->n; s-- > 0;) { /* children mostly sit after parents */
        if (e->exec[s]) continue;
        pd_node *n = e->nodes[s];
        for (int i = 0; i < n->n_in; i++) {
          pd_edge *ed = &n->edges[i];
          if ((ed->leaf && target_index(e, ed->leaf, NULL, 0) >= 0) ||
              (ed->node && (e->exec[ed->node->slot] || e->capture[ed->node->slot]))) {
            e->exec[s] = true;
            changed = true;
            break;
          }
        }
      }
    }
  } else if (st == PD_OK) {
    for (size_t s = 0; s < e->n; s++) e->exec[s] = true;
  }
  pd_node **heap = st == PD_OK ? scratch((e->n + 1) * sizeof *heap) : NULL;
  size_t hn = 0;
  if (st == PD_OK && !heap) st = pd_set_error(PD_ERR_MEMORY, "backward: out of memory");
  for (int r = 0; r < n_roots && st == PD_OK; r++) {
    pd_tensor *t = roots[r];
    if (!t->grad_fn) {
      st = accumulate_leaf(e, t, root_grads[r], false);
      continue;
    }
    pd_node *n = t->grad_fn;
    if (!e->gbuf[n->slot]) e->gbuf[n->slot] = scratch((size_t)n->n_out * sizeof(pd_tensor *));
    if (!e->gbuf[n->slot]) {
      st = pd_set_error(PD_ERR_MEMORY, "backward: out of memory");
      break;
    }
    st = accumulate_into(&e->gbuf[n->slot][t->out_index], root_grads[r]);
  }
  if (st == PD_OK)
    for (size_t s = 0; s < e->n; s++)
      if (e->nodes[s]->deps == 0) heap_push(heap, &hn, e->nodes[s]);
  while (st == PD_OK && hn) st = run_node(e, heap_pop(heap, &hn), heap, &hn);
  for (size_t s = 0; s < e->n; s++) {
    if (e->gbuf && e->gbuf[s]) {
      for (int k = 0; k < e->nodes[s]->n_out; k++) pd_tensor_release(e->gbuf[s][k]);
    }
    e->nodes[s]->slot = -1;
  }
  for (size_t l = 0; l < e->nleaves; l++) {
    pd_tensor_release(e->leaf_gbuf[l]);
    e->leaves[l]->bw_stamp = 0;
  }
  if (--g_run_depth == 0) st = run_callbacks(st);
  return st;
}

pd_status pd_autograd_queue_callback(pd_autograd_callback_fn fn, void *user) {
  if (!fn) return pd_set_error(PD_ERR_INVALID, "queue_callback: callback is NULL");
  if (g_run_depth == 0)
    return pd_set_error(PD_ERR_STATE, "queue_callback: no backward is running on this thread");
  if (g_ncbs == g_cbcap) {
    int cap = g_cbcap ? g_cbcap * 2 : 8;
    queued_cb *c = realloc(g_cbs, (size_t)cap * sizeof *c);
    if (!c) return pd_set_error(PD_ERR_MEMORY, "queue_callback: out of memory");
    g_cbs = c;
    g_cbcap = cap;
  }
  g_cbs[g_ncbs++] = (queued_cb){fn, user};
  return PD_OK;
}

/* Runs (and empties) the queue after the outermost run; a callback may
 * queue no more (no backward is running), but may itself run a backward,
 * whose callbacks then run at its own end. */
static pd_status run_callbacks(pd_status st) {
  while (g_ncbs > 0) {
    queued_cb c = g_cbs[0];
    memmove(g_cbs, g_cbs + 1, (size_t)(g_ncbs - 1) * sizeof *g_cbs);
    g_ncbs--;
    pd_status r = c.fn(st, c.user);
    if (st == PD_OK && r != PD_OK) st = r;
  }
  return st; /* the array is kept for the next run, like the scratch chunks */
}

static pd_tensor *ones_like_root(pd_tensor *t, const char *op) {
  /* a DTensor's value is its global one: one element, whatever this rank
   * holds of it (nothing outside its mesh) */
  int gn;
  const int64_t *gs = pd_global_shape(t, &gn);
  int64_t numel = 1;
  for (int d = 0; d < gn; d++) numel *= gs[d];
  if (numel != 1) {
    pd_set_error(PD_ERR_SHAPE,
                 "%s: grad can be implicitly created only for a tensor of one element, "
                 "got shape %s; pass a grad tensor",
                 op, PD_SHAPE_STR(t));
    return NULL;
  }
  /* eagerly, the seed is one element set to 1, made without an op; a
   * Variable or a traced backward records the op */
  if (!t->is_meta && !t->dist_attr && !pd_dispatch_get_tracer(NULL)) {
    pd_tensor *g = pd_tensor_new_untracked(t->dtype, t->ndim, t->shape);
    if (g) pd_store_from_f64(pd_data_ptr(g), g->dtype, 1.0);
    return g;
  }
  return pd_ones(t->ndim, t->shape, t->dtype);
}

pd_status pd_backward(pd_tensor *loss, pd_tensor *grad, bool retain_graph) {
  if (!loss)
    return pd_last_status() != PD_OK ? pd_last_status()
                                     : pd_set_error(PD_ERR_INVALID, "backward: tensor is NULL");
  if (loss->stop_gradient)
    return pd_set_error(PD_ERR_STATE,
                        "backward: the tensor has stop_gradient=True, so nothing "
                        "depends on a tensor that needs a gradient");
  pd_internal_enter();
  pd_status st = PD_OK;
  pd_tensor *g = grad ? pd_tensor_retain(grad) : ones_like_root(loss, "backward");
  if (!g)
    st = pd_last_status();
  else if (g->ndim != loss->ndim || memcmp(g->shape, loss->shape, sizeof(int64_t) * (size_t)g->ndim)) {
    char a[160];
    st = pd_set_error(PD_ERR_SHAPE, "backward: grad has shape %s but the tensor has shape %s",
                      pd_shape_str(g->ndim, g->shape, a, sizeof a), PD_SHAPE_STR(loss));
  }
  if (st == PD_OK) {
    bool prev = pd_grad_mode_set(false);
    engine e = {.keep_graph = retain_graph};
    st = run_engine(&e, &loss, &g, 1);
    pd_grad_mode_set(prev);
  }
  pd_tensor_release(g);
  pd_internal_leave();
  return st;
}

pd_status pd_grad(pd_tensor *const *outputs, int n_out, pd_tensor *const *inputs, int n_in,
                  pd_tensor *const *grad_outputs, const pd_grad_opts *opts, pd_tensor **grads_out) {
  static const pd_grad_opts defaults;
  if (!opts) opts = &defaults;
  if (!outputs || !inputs || !grads_out || n_out <= 0 || n_in <= 0)
    return pd_set_error(PD_ERR_INVALID, "grad: outputs (%d) and inputs (%d) must be non-empty arrays", n_out,
                        n_in);
  for (int i = 0; i < n_in; i++) grads_out[i] = NULL;
  for (int k = 0; k < n_out; k++)
    if (!outputs[k])
      return pd_last_status() ? pd_last_status()
                              : pd_set_error(PD_ERR_INVALID, "grad: outputs[%d] is NULL", k);
  for (int i = 0; i < n_in; i++) {
    if (!inputs[i])
      return pd_last_status() ? pd_last_status()
                              : pd_set_error(PD_ERR_INVALID, "grad: inputs[%d] is NULL", i);
    if (inputs[i]->stop_gradient)
      return pd_set_error(PD_ERR_STATE, "grad: inputs[%d] has stop_gradient=True", i);
  }
  pd_internal_enter();
  pd_status st = PD_OK;
  pd_tensor **roots = calloc((size_t)n_out, sizeof *roots), **rg = calloc((size_t)n_out, sizeof *rg);
  int nr = 0;
  if (!roots || !rg) st = pd_set_error(PD_ERR_MEMORY, "grad: out of memory");
  for (int k = 0; k < n_out && st == PD_OK; k++) {
    if (outputs[k]->stop_gradient) continue;
    pd_tensor *g = grad_outputs && grad_outputs[k] ? pd_tensor_retain(grad_outputs[k])
                                                   : ones_like_root(outputs[k], "grad");
    if (!g) {
      st = pd_last_status();
      break;
    }
    roots[nr] = outputs[k];
    rg[nr++] = g;
  }
  if (st == PD_OK) {
    bool prev = pd_grad_mode_set(opts->create_graph);
    engine e = {.create_graph = opts->create_graph,
                .keep_graph = opts->retain_graph || opts->create_graph,
                .targets = inputs,
                .n_targets = n_in,
                .captured = grads_out};
    st = run_engine(&e, roots, rg, nr);
    pd_grad_mode_set(prev);
  }
  for (int k = 0; k < nr; k++) pd_tensor_release(rg[k]);
  free(roots);
  free(rg);
  if (st == PD_OK && !opts->allow_unused) {
    for (int i = 0; i < n_in; i++)
      if (!grads_out[i]) {
        st = pd_set_error(PD_ERR_STATE,
                          "grad: inputs[%d] is not used to compute the outputs; "
                          "pass allow_unused=true to get NULL for it",
                          i);
        break;
      }
  }
  if (st != PD_OK)
    for (int i = 0; i < n_in; i++) {
      pd_tensor_release(grads_out[i]);
      grads_out[i] = NULL;
    }
  pd_internal_leave();
  if (st == PD_OK)
    for (int i = 0; i < n_in; i++) pd_scope_track(grads_out[i]);
  return st;
}
