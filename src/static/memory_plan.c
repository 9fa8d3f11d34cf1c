/* Liveness-based buffer planning (see memory_plan.h): values are placed in
 * op order, each output best-fit into the free blocks of the arena (the
 * arena grows at its end when none fits), and a value's block is freed
 * after the last op that reads it. A second plan places the same values
 * offline, largest first, each at the lowest offset clear of the values
 * already placed whose lifetimes meet its own (the "greedy by size" of
 * TensorFlow Lite's arena planner); the smaller arena of the two is kept.
 * Op order fragments when a large value is born after smaller ones that
 * outlive it: on the decoder of bench_static the online plan left 1.6 MB
 * (7%) above the bytes live at its peak. */
#include "memory_plan.h"

#include <stdlib.h>
#include <string.h>

static size_t align_up(size_t n) { return (n + PD_PLAN_ALIGN - 1) / PD_PLAN_ALIGN * PD_PLAN_ALIGN; }

/* Free blocks of the arena, sorted by offset, neighbours merged. */
typedef struct {
  size_t off, size;
} block;

typedef struct {
  block *b;
  int n, cap;
  size_t end; /* the arena's size so far */
} free_list;

static pd_status insert_block(free_list *f, int at, size_t off, size_t size) {
  if (f->n == f->cap) {
    int cap = f->cap ? 2 * f->cap : 16;
    block *nb = realloc(f->b, sizeof *nb * (size_t)cap);
    if (!nb) return pd_set_error(PD_ERR_MEMORY, "memory plan: out of memory for %d free blocks", cap);
    f->b = nb, f->cap = cap;
  }
  memmove(f->b + at + 1, f->b + at, sizeof *f->b * (size_t)(f->n - at));
  f->b[at] = (block){off, size};
  f->n++;
  return PD_OK;
}

static void remove_block(free_list *f, int at) {
  memmove(f->b + at, f->b + at + 1, sizeof *f->b * (size_t)(f->n - at - 1));
  f->n--;
}

/* Best fit: the smallest free block that holds size; else the free block at
 * the end of the arena grows; else new bytes at the end. */
static pd_status take(free_list *f, size_t size, size_t *off) {
  int best = -1;
  for (int i = 0; i < f->n; i++)
    if (f->b[i].size >= size && (best < 0 || f->b[i].size < f->b[best].size)) best = i;
  if (best >= 0) {
    *off = f->b[best].off;
    f->b[best].off += size;
    f->b[best].size -= size;
    if (f->b[best].size == 0) remove_block(f, best);
    return PD_OK;
  }
  if (f->n > 0 && f->b[f->n - 1].off + f->b[f->n - 1].size == f->end) {
    *off = f->b[f->n - 1].off;
    f->end = *off + size;
    remove_block(f, f->n - 1);
    return PD_OK;
  }
  *off = f->end;
  f->end += size;
  return PD_OK;
}

static pd_status give_back(free_list *f, size_t off, size_t size) {
  int at = 0;
  while (at < f->n && f->b[at].off < off) at++;
  bool join_prev = at > 0 && f->b[at - 1].off + f->b[at - 1].size == off;
  bool join_next = at < f->n && off + size == f->b[at].off;
  if (join_prev && join_next) {
    f->b[at - 1].size += size + f->b[at].size;
    remove_block(f, at);
    return PD_OK;
  }
  if (join_prev) {
    f->b[at - 1].size += size;
    return PD_OK;
  }
  if (join_next) {
    f->b[at].off = off;
    f->b[at].size += size;
    return PD_OK;
  }
  return insert_block(f, at, off, size);
}

/* first[v]: the op writing v; last[v]: the last op reading it (n_ops when
 * kept, first[v] when never read). */
static pd_status lifetimes(const pd_plan_value *values, int n_values, const pd_plan_op *ops, int n_ops,
                           int *first, int *last) {
  for (int v = 0; v < n_values; v++) first[v] = last[v] = -1;
  for (int i = 0; i < n_ops; i++) {
    const pd_plan_op *op = &ops[i];
    if (op->n_in < 0 || op->n_out < 0 || (op->n_in && !op->in) || (op->n_out && !op->out))
      return pd_set_error(PD_ERR_INVALID, "memory plan: op %d has %d inputs and %d outputs", i, op->n_in,
                          op->n_out);
    if (op->inplace_in >= op->n_in)
      return pd_set_error(PD_ERR_INVALID, "memory plan: op %d: inplace input %d of %d inputs", i,
                          op->inplace_in, op->n_in);
    for (int k = 0; k < op->n_in; k++) {
      int v = op->in[k];
      if (v < 0 || v >= n_values)
        return pd_set_error(PD_ERR_INDEX, "memory plan: op %d reads value %d (there are %d)", i, v, n_values);
      if (!values[v].external && first[v] < 0)
        return pd_set_error(PD_ERR_INVALID, "memory plan: op %d reads value %d before any op writes it", i,
                            v);
      last[v] = i;
    }
    for (int k = 0; k < op->n_out; k++) {
      int v = op->out[k];
      if (v < 0 || v >= n_values)
        return pd_set_error(PD_ERR_INDEX, "memory plan: op %d writes value %d (there are %d)", i, v,
                            n_values);
      if (values[v].external)
        return pd_set_error(PD_ERR_INVALID,
                            "memory plan: op %d writes value %d, which lives outside the plan", i, v);
      if (first[v] >= 0 && !values[v].shared_writes)
        return pd_set_error(PD_ERR_INVALID, "memory plan: value %d is written by op %d and again by op %d", v,
                            first[v], i);
      if (first[v] < 0) first[v] = i;
      last[v] = i;
    }
  }
  for (int v = 0; v < n_values; v++)
    if (values[v].keep && first[v] >= 0) last[v] = n_ops;
  return PD_OK;
}

/* Whether op i may write its output 0 over input inplace_in. */
static bool can_reuse(const pd_plan_value *values, const pd_plan_op *op, int i, const int *last,
                      const int64_t *offset) {
  if (op->inplace_in < 0 || op->n_out < 1) return false;
  int src = op->in[op->inplace_in], dst = op->out[0];
  if (values[src].external || offset[src] < 0 || last[src] != i || src == dst) return false;
  if (values[src].shared_writes || values[dst].shared_writes) return false;
  if (align_up(values[src].bytes) != align_up(values[dst].bytes)) return false;
  for (int k = 1; k < op->n_out; k++)
    if (op->out[k] == src) return false;
  return true;
}

/* The offline plan (see the top): each group, a value and the chain of
 * outputs written in place over it (root[v]: the group's first value, from
 * the plan above), is one block of the size of its values living from its
 * first write to its last read. Replaces plan's offsets when its arena is
 * smaller. */
typedef struct group {
  int root, start, end;
  size_t size;
  int64_t off;
} group;

static int by_size(const void *a, const void *b) {
  const group *x = a, *y = b;
  if (x->size != y->size) return x->size < y->size ? 1 : -1;
  return (x->start > y->start) - (x->start < y->start);
}

static int by_offset(const void *a, const void *b) {
  const group *x = *(const group *const *)a, *y = *(const group *const *)b;
  return (x->off > y->off) - (x->off < y->off);
}

static pd_status plan_by_size(const pd_plan_value *values, int n_values, const int *first, const int *last,
                              const int *root, pd_memory_plan *plan) {
  size_t nv = n_values > 0 ? (size_t)n_values : 1;
  int *slot = malloc(sizeof(int) * nv);
  group *g = malloc(sizeof(group) * nv);
  const group **meet = malloc(sizeof(group *) * nv);
  if (!slot || !g || !meet) {
    free(slot), free(g), free(meet);
    return pd_set_error(PD_ERR_MEMORY, "memory plan: out of memory for %d values", n_values);
  }
  int ng = 0;
  for (int v = 0; v < n_values; v++) slot[v] = -1;
  for (int v = 0; v < n_values; v++) {
    if (values[v].external || first[v] < 0) continue;
    int r = root[v];
    if (slot[r] < 0) {
      slot[r] = ng;
      g[ng++] = (group){r, first[v], last[v], align_up(values[r].bytes), -1};
    }
    group *q = &g[slot[r]];
    if (first[v] < q->start) q->start = first[v];
    if (last[v] > q->end) q->end = last[v];
  }
  qsort(g, (size_t)ng, sizeof *g, by_size);
  size_t arena = 0;
  for (int i = 0; i < ng; i++) {
    int n = 0;
    for (int j = 0; j < i; j++)
      if (g[j].start <= g[i].end && g[i].start <= g[j].end) meet[n++] = &g[j];
    qsort(meet, (size_t)n, sizeof *meet, by_offset);
    int64_t at = 0;
    for (int j = 0; j < n && at + (int64_t)g[i].size > meet[j]->off; j++)
      if (meet[j]->off + (int64_t)meet[j]->size > at) at = meet[j]->off + (int64_t)meet[j]->size;
    g[i].off = at;
    if ((size_t)at + g[i].size > arena) arena = (size_t)at + g[i].size;
  }
  if (arena < plan->arena_bytes) {
    for (int i = 0; i < ng; i++) slot[g[i].root] = i;
    for (int v = 0; v < n_values; v++)
      if (!values[v].external && first[v] >= 0) plan->offset[v] = g[slot[root[v]]].off;
    plan->arena_bytes = arena;
  }
  free(slot), free(g), free(meet);
  return PD_OK;
}

pd_status pd_memory_plan_build(const pd_plan_value *values, int n_values, const pd_plan_op *ops, int n_ops,
                               pd_memory_plan *plan) {
  memset(plan, 0, sizeof *plan);
  if (n_values < 0 || n_ops < 0 || (n_values && !values) || (n_ops && !ops))
    return pd_set_error(PD_ERR_INVALID, "memory plan: %d values, %d ops", n_values, n_ops);
  size_t nv = n_values > 0 ? (size_t)n_values : 1;
  int *first = malloc(sizeof(int) * nv), *last = malloc(sizeof(int) * nv);
  int *taken_at = malloc(sizeof(int) * nv); /* op at which v's bytes passed to an in-place output */
  int *root = malloc(sizeof(int) * nv);     /* the first value of v's chain of in-place writes */
  plan->offset = malloc(sizeof(int64_t) * nv);
  free_list f = {0};
  pd_status st = PD_OK;
  if (!first || !last || !taken_at || !root || !plan->offset) {
    st = pd_set_error(PD_ERR_MEMORY, "memory plan: out of memory for %d values", n_values);
    goto done;
  }
  if ((st = lifetimes(values, n_values, ops, n_ops, first, last)) != PD_OK) goto done;
  for (int v = 0; v < n_values; v++) {
    plan->offset[v] = -1;
    taken_at[v] = -1;
    root[v] = v;
    if (!values[v].external && first[v] >= 0) plan->naive_bytes += align_up(values[v].bytes);
  }

  for (int i = 0; i < n_ops && st == PD_OK; i++) {
    const pd_plan_op *op = &ops[i];
    for (int k = 0; k < op->n_out && st == PD_OK; k++) {
      int v = op->out[k];
      if (k == 0 && can_reuse(values, op, i, last, plan->offset)) {
        int src = op->in[op->inplace_in];
        plan->offset[v] = plan->offset[src];
        taken_at[src] = i;
        root[v] = root[src];
        plan->n_inplace++;
        continue;
      }
      if (plan->offset[v] >= 0) continue; /* a shared_writes value, placed at its first write */
      size_t off;
      st = take(&f, align_up(values[v].bytes), &off);
      plan->offset[v] = (int64_t)off;
    }
    /* what dies here: inputs read for the last time (once each), and
     * outputs nobody reads */
    for (int k = 0; k < op->n_in && st == PD_OK; k++) {
      int v = op->in[k];
      bool seen = false;
      for (int j = 0; j < k; j++) seen |= op->in[j] == v;
      if (seen || values[v].external || last[v] != i || taken_at[v] == i) continue;
      st = give_back(&f, (size_t)plan->offset[v], align_up(values[v].bytes));
    }
    for (int k = 0; k < op->n_out && st == PD_OK; k++) {
      int v = op->out[k];
      bool read_here = false; /* a shared_writes value read and written here died with the inputs */
      for (int j = 0; j < op->n_in; j++) read_here |= op->in[j] == v;
      if (last[v] == i && !read_here) st = give_back(&f, (size_t)plan->offset[v], align_up(values[v].bytes));
    }
  }
  if (st != PD_OK) goto done;
  plan->arena_bytes = f.end;
  if ((st = plan_by_size(values, n_values, first, last, root, plan)) != PD_OK) goto done;

  /* the lower bound: bytes live during each op, an in-place pair once */
  for (int i = 0; i < n_ops; i++) {
    size_t live = 0;
    for (int v = 0; v < n_values; v++)
      if (!values[v].external && first[v] >= 0 && first[v] <= i && i <= last[v] && taken_at[v] != i)
        live += align_up(values[v].bytes);
    if (live > plan->live_peak) plan->live_peak = live;
  }
done:
  free(first), free(last), free(taken_at), free(root), free(f.b);
  if (st != PD_OK) pd_memory_plan_free(plan);
  return st;
}

void pd_memory_plan_free(pd_memory_plan *plan) {
  if (!plan) return;
  free(plan->offset);
  memset(plan, 0, sizeof *plan);
}
