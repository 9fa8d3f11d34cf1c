/* Recomputing cheap values instead of keeping them (rematerialization): a
 * value that a memory-bound op computes in the forward and the backward
 * reads again much later (a normalization's output read by its weight
 * gradient's product, a SwiGLU's output read by the down projection's)
 * is held in the arena all that time, across the plan's live peak, the
 * start of the backward. When every input of its op is live at that later
 * reader anyway (a parameter, or a value the backward still reads), the
 * pass runs the op again just before that reader into a new value and
 * lets the later readers read it: the first value then dies at its last
 * forward reader, and no value lives longer than before, so no op's live
 * bytes grow. The copy runs the same kernel on the same inputs, so the
 * plan computes the same bits.
 *
 * Only where it lowers the peak: the pass finds the op with the most
 * bytes live (values by their root, views counting as their base),
 * recomputes the largest value that is live there without being read
 * there and qualifies, and repeats until no value live at the (new) peak
 * does. The cost is one more pass over memory per value recomputed
 * (docs/static.md, "Compile passes").
 *
 * An op qualifies when it is a registry op, elementwise or flagged
 * PD_OPF_RECOMPUTE, deterministic (no RANDOM), neither a view nor in
 * place, with one output; no op between it and the reader may write in
 * place (an input could have changed), and its output is not fetched, not
 * read later by a control op (its sub-blocks read it by name) and not read
 * later through a view made before (that view would keep reading the first
 * value). */
#include <stdlib.h>
#include <string.h>

#include "passes.h"

/* The plan's lifetimes: per slot its root (views and in-place results are
 * their input 0's), per root its bytes (0: not held by the arena), the op
 * writing it first and the last op reading it or one of its aliases. */
typedef struct lifetimes {
  int *root, *first, *last;
  size_t *bytes;
  int *made; /* per slot: the op writing it last, or -1 */
} lifetimes;

static bool is_alias_op(const pd_operator *op) {
  return op->op_id >= 0 && !op->fused && op->grad_of < 0 &&
         (pd_op_table[op->op_id]->flags & (PD_OPF_VIEW | PD_OPF_INPLACE));
}

static void lifetimes_free(lifetimes *l) {
  free(l->root), free(l->first), free(l->last), free(l->bytes), free(l->made);
}

static pd_status lifetimes_build(const pd_pass_ctx *c, lifetimes *l) {
  const pd_static_block *b = c->b;
  size_t n = (size_t)b->n_vars + 1;
  l->root = malloc(sizeof(int) * n), l->first = malloc(sizeof(int) * n), l->last = malloc(sizeof(int) * n);
  l->bytes = calloc(n, sizeof(size_t)), l->made = malloc(sizeof(int) * n);
  if (!l->root || !l->first || !l->last || !l->bytes || !l->made) {
    lifetimes_free(l);
    return pd_set_error(PD_ERR_MEMORY, "Executor: out of memory in the compile passes");
  }
  for (int s = 0; s < b->n_vars; s++) l->root[s] = s, l->first[s] = -1, l->last[s] = -1, l->made[s] = -1;
  for (int k = 0; k < b->n_ops; k++) {
    const pd_operator *op = b->ops[k];
    bool alias = is_alias_op(op);
    int in0 = op->n_in > 0 ? pd_pass_slot(c, op->inputs[0]) : -1;
    for (int i = 0; i < op->n_in; i++) {
      int s = pd_pass_slot(c, op->inputs[i]);
      if (s < 0) continue;
      l->last[l->root[s]] = k;
    }
    for (int j = 0; j < op->n_out; j++) {
      int s = pd_pass_slot(c, op->outputs[j]);
      if (s < 0) continue;
      if (alias && in0 >= 0) l->root[s] = l->root[in0];
      l->made[s] = k;
      int r = l->root[s];
      if (l->first[r] < 0) l->first[r] = k;
      l->last[r] = k; /* a write is a use */
      const pd_variable *v = b->vars[s];
      int64_t numel;
      if (r == s && !alias && !v->persistable && !v->is_data && !v->is_array &&
          pd_pass_known_shape(v, &numel))
        l->bytes[s] = (size_t)numel * pd_dtype_size(v->dtype);
    }
  }
  for (int i = 0; i < c->n_fetch; i++) {
    int s = c->fetch[i] ? pd_pass_slot(c, c->fetch[i]) : -1;
    if (s >= 0) l->last[l->root[s]] = b->n_ops; /* read after the plan */
  }
  return PD_OK;
}

/* The op with the most bytes live (written at or before it, read at or
 * after it): a running sum over the ops of the bytes born minus the bytes
 * that died at the op before. */
static int peak_op(const pd_static_block *b, const lifetimes *l) {
  int64_t *delta = calloc((size_t)b->n_ops + 2, sizeof *delta);
  if (!delta) return -1; /* no recomputation: correct, only larger */
  for (int s = 0; s < b->n_vars; s++)
    if (l->bytes[s] && l->first[s] >= 0) {
      delta[l->first[s]] += (int64_t)l->bytes[s];
      delta[l->last[s] + 1] -= (int64_t)l->bytes[s];
    }
  int best = -1;
  int64_t live = 0, best_bytes = 0;
  for (int k = 0; k < b->n_ops; k++) {
    live += delta[k];
    if (live > best_bytes) best_bytes = live, best = k;
  }
  free(delta);
  return best;
}

static bool recomputable(const pd_operator *op) {
  if (op->op_id < 0 || op->fused || op->value || op->grad_of >= 0 || op->n_out != 1) return false;
  const pd_op_def *def = pd_op_table[op->op_id];
  if (def->flags & (PD_OPF_RANDOM | PD_OPF_VIEW | PD_OPF_INPLACE)) return false;
  return def->kernel[PD_PLACE_CPU] && (def->ew_fn || (def->flags & PD_OPF_RECOMPUTE));
}

/* Whether op reads root r, itself or through a view. */
static bool reads_root(const pd_pass_ctx *c, const lifetimes *l, const pd_operator *op, int r) {
  for (int i = 0; i < op->n_in; i++) {
    int s = pd_pass_slot(c, op->inputs[i]);
    if (s >= 0 && l->root[s] == r) return true;
  }
  return false;
}

/* For op p's output, live across op peak without being read there: the
 * first op after peak reading it (where the copy would run), or -1 when
 * the value does not qualify. From there on every reader must read the
 * value itself or a view made from there on (a view made before would
 * keep reading the first value). */
static int recompute_at(const pd_pass_ctx *c, const lifetimes *l, int p, int peak) {
  const pd_static_block *b = c->b;
  const pd_operator *op = b->ops[p];
  int s = pd_pass_slot(c, op->outputs[0]);
  if (s < 0 || !l->bytes[s] || l->first[s] != p || l->last[s] <= peak ||
      pd_pass_is_fetched(c, op->outputs[0]) || reads_root(c, l, b->ops[peak], s))
    return -1;
  bool read_before = false;
  for (int k = p + 1; k < peak && !read_before; k++) read_before = reads_root(c, l, b->ops[k], s);
  if (!read_before) return -1; /* moving the op itself later would do; not done */
  int next = peak + 1;
  while (next < b->n_ops && !reads_root(c, l, b->ops[next], s)) next++;
  if (next == b->n_ops || pd_pass_inplace_between(b, p, next)) return -1;
  for (int k = next; k < b->n_ops; k++) {
    const pd_operator *r = b->ops[k];
    /* a control op's sub-blocks read the value by its name */
    if (r->op_id < 0 && !r->fused && !r->value && r->grad_of < 0 && reads_root(c, l, r, s)) return -1;
    for (int i = 0; i < r->n_in; i++) {
      int u = pd_pass_slot(c, r->inputs[i]);
      if (u >= 0 && u != s && l->root[u] == s && l->made[u] < next) return -1;
    }
  }
  for (int i = 0; i < op->n_in; i++) {
    int u = pd_pass_slot(c, op->inputs[i]);
    if (u < 0) continue;
    const pd_variable *v = b->vars[u];
    if (v->is_array) return -1;
    int r = l->root[u];
    bool external = l->first[r] < 0 || v->persistable || v->is_data || b->vars[r]->persistable;
    if (!external && l->last[r] < next) return -1; /* it would have to live longer */
  }
  return next;
}

/* Runs a copy of op p just before op `at` into a new variable, which the
 * readers from `at` on read instead of p's output. */
static pd_status recompute(pd_pass_ctx *c, int p, int at) {
  pd_static_block *b = c->b;
  const pd_operator *op = b->ops[p];
  const char *name = op->outputs[0];
  const pd_variable *v = b->vars[pd_pass_slot(c, name)];
  char copy[256];
  int n = 0;
  do snprintf(copy, sizeof copy, n ? "%s@RECOMPUTE_%d" : "%s@RECOMPUTE", name, n);
  while (pd_ir_find_var(b, copy) && ++n < 1000);
  if (!pd_ir_add_var(b, copy, v->dtype, v->ndim, v->shape, NULL)) return pd_last_status();
  pd_status st = pd_pass_index_add(c, b->n_vars - 1);
  const char *out[1] = {copy};
  pd_operator *again = st == PD_OK ? pd_ir_append_op(b, op->type, (const char *const *)op->inputs, op->n_in,
                                                     out, 1, &op->attrs)
                                   : NULL;
  if (!again) return pd_last_status();
  again->role = b->ops[at]->role;
  memmove(b->ops + at + 1, b->ops + at, sizeof *b->ops * (size_t)(b->n_ops - 1 - at));
  b->ops[at] = again;
  for (int k = at + 1; k < b->n_ops && st == PD_OK; k++) {
    pd_operator *r = b->ops[k];
    for (int i = 0; i < r->n_in && st == PD_OK; i++)
      if (strcmp(r->inputs[i], name) == 0) st = pd_ir_set_slot(&r->inputs[i], copy);
  }
  return st;
}

pd_status pd_pass_recompute(pd_pass_ctx *c) {
  pd_static_block *b = c->b;
  for (int round = 0, limit = b->n_ops; round < limit; round++) {
    lifetimes l = {0};
    pd_status st = lifetimes_build(c, &l);
    if (st != PD_OK) return st;
    int peak = peak_op(b, &l), best = -1, best_at = -1;
    size_t best_bytes = 0;
    for (int p = 0; p < peak; p++) {
      if (!recomputable(b->ops[p])) continue;
      int at = recompute_at(c, &l, p, peak);
      if (at < 0) continue;
      size_t bytes = l.bytes[pd_pass_slot(c, b->ops[p]->outputs[0])];
      if (bytes > best_bytes) best = p, best_at = at, best_bytes = bytes;
    }
    lifetimes_free(&l);
    if (best < 0) return PD_OK;
    if ((st = recompute(c, best, best_at)) != PD_OK) return st;
    c->stats->recomputed++;
  }
  return PD_OK;
}
