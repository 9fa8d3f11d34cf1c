/* The pass manager: runs the compile passes over a lowered plan in their
 * fixed order (see passes.h), and the helpers they share. */
#include "passes.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../core/tensor_impl.h"
#include "../ops/meta_util.h"

pd_pass_options pd_pass_options_all(void) {
  return (pd_pass_options){.fold_constants = true,
                           .remove_dead_ops = true,
                           .fuse_gemm_epilogue = true,
                           .fuse_dropout_add = true,
                           .fuse_elementwise = true,
                           .inplace = true,
                           .recompute = true};
}

/* The name -> slot index: open addressing over FNV-1a hashes (a plan has
 * hundreds of variables, looked up several times per op by every pass). */
static uint32_t name_hash(const char *s) {
  uint32_t h = 2166136261u;
  for (; *s; s++) h = (h ^ (uint8_t)*s) * 16777619u;
  return h;
}

static void index_put(pd_pass_ctx *c, int s) {
  uint32_t mask = (uint32_t)(c->index_cap - 1), h = name_hash(c->b->vars[s]->name) & mask;
  while (c->index[h] >= 0) h = (h + 1) & mask;
  c->index[h] = s;
}

/* At most half full, so that probes stay short. */
static pd_status index_build(pd_pass_ctx *c) {
  int cap = 16;
  while (cap < 2 * c->b->n_vars + 1) cap *= 2;
  int *index = malloc(sizeof(int) * (size_t)cap);
  if (!index) return pd_set_error(PD_ERR_MEMORY, "Executor: out of memory in the compile passes");
  free(c->index);
  c->index = index;
  c->index_cap = cap;
  for (int i = 0; i < cap; i++) c->index[i] = -1;
  for (int s = 0; s < c->b->n_vars; s++) index_put(c, s);
  return PD_OK;
}

pd_status pd_pass_index_add(pd_pass_ctx *c, int s) {
  if (2 * c->b->n_vars + 1 > c->index_cap) return index_build(c); /* takes s with the rest */
  index_put(c, s);
  return PD_OK;
}

pd_status pd_static_run_passes(pd_program *lowered, const pd_pass_options *o, const char *const *fetch,
                               int n_fetch, pd_pass_stats *stats) {
  pd_pass_stats local;
  if (!stats) stats = &local;
  memset(stats, 0, sizeof *stats);
  pd_pass_ctx c = {.b = lowered->blocks[0], .fetch = fetch, .n_fetch = n_fetch, .stats = stats};
  stats->ops_before = c.b->n_ops;
  pd_status st = index_build(&c); /* a pass adding a variable adds it with pd_pass_index_add */
  if (st == PD_OK && o->fold_constants) st = pd_pass_fold_constants(&c);
  if (st == PD_OK && o->remove_dead_ops) st = pd_pass_remove_dead_ops(&c);
  if (st == PD_OK && o->fuse_gemm_epilogue) st = pd_pass_fuse_gemm_epilogue(&c);
  if (st == PD_OK && o->fuse_dropout_add) st = pd_pass_fuse_dropout_add(&c);
  if (st == PD_OK && o->fuse_elementwise) st = pd_pass_fuse_rope(&c);
  if (st == PD_OK && o->fuse_elementwise) st = pd_pass_fuse_elementwise(&c);
  if (st == PD_OK && o->recompute) st = pd_pass_recompute(&c);
  stats->ops_after = c.b->n_ops;
  free(c.index);
  pd_ir_touch(lowered);
  return st;
}

int pd_pass_slot(const pd_pass_ctx *c, const char *name) {
  if (strcmp(name, PD_STATIC_EMPTY_VAR) == 0) return -1;
  uint32_t mask = (uint32_t)(c->index_cap - 1);
  for (uint32_t h = name_hash(name) & mask; c->index[h] >= 0; h = (h + 1) & mask)
    if (strcmp(c->b->vars[c->index[h]]->name, name) == 0) return c->index[h];
  return -1;
}

bool pd_pass_is_fetched(const pd_pass_ctx *c, const char *name) {
  for (int i = 0; i < c->n_fetch; i++)
    if (c->fetch[i] && strcmp(c->fetch[i], name) == 0) return true;
  return false;
}

int *pd_pass_count_readers(const pd_pass_ctx *c) {
  const pd_static_block *b = c->b;
  int *readers = calloc((size_t)b->n_vars + 1, sizeof *readers);
  int *seen = malloc(sizeof(int) * ((size_t)b->n_vars + 1));
  if (!readers || !seen) {
    free(readers), free(seen);
    pd_set_error(PD_ERR_MEMORY, "Executor: out of memory in the compile passes");
    return NULL;
  }
  for (int s = 0; s < b->n_vars; s++) seen[s] = -1;
  for (int k = 0; k < b->n_ops; k++) {
    const pd_operator *op = b->ops[k];
    for (int i = 0; i < op->n_in; i++) {
      int s = pd_pass_slot(c, op->inputs[i]);
      if (s >= 0 && seen[s] != k) seen[s] = k, readers[s]++;
    }
  }
  for (int i = 0; i < c->n_fetch; i++) {
    int s = c->fetch[i] ? pd_pass_slot(c, c->fetch[i]) : -1;
    if (s >= 0) readers[s]++;
  }
  free(seen);
  return readers;
}

void pd_pass_note_producer(const pd_pass_ctx *c, int k, int *producer) {
  const pd_operator *op = c->b->ops[k];
  for (int j = 0; j < op->n_out; j++) {
    int s = pd_pass_slot(c, op->outputs[j]);
    if (s >= 0) producer[s] = k;
  }
}

int *pd_pass_producers(const pd_pass_ctx *c) {
  const pd_static_block *b = c->b;
  int *producer = malloc(sizeof(int) * ((size_t)b->n_vars + 1));
  if (!producer) {
    pd_set_error(PD_ERR_MEMORY, "Executor: out of memory in the compile passes");
    return NULL;
  }
  for (int s = 0; s < b->n_vars; s++) producer[s] = -1;
  for (int k = 0; k < b->n_ops; k++) pd_pass_note_producer(c, k, producer);
  return producer;
}

void pd_pass_replace_op(pd_static_block *b, int k) {
  pd_operator *old = b->ops[k];
  b->ops[k] = b->ops[b->n_ops - 1];
  b->ops[b->n_ops - 1] = old;
  pd_ir_truncate_ops(b, b->n_ops - 1);
}

void pd_pass_drop_ops(pd_static_block *b, const bool *drop) {
  /* the kept ops to the front in order, the dropped ones after them, which
   * truncating frees */
  int n = b->n_ops, kept = 0;
  if (n == 0) return;
  pd_operator **tmp = malloc(sizeof *tmp * ((size_t)n + 1));
  if (!tmp) { /* keeping every op is correct, only slower */
    pd_clear_error();
    return;
  }
  for (int k = 0; k < n; k++)
    if (!drop[k]) tmp[kept++] = b->ops[k];
  int d = kept;
  for (int k = 0; k < n; k++)
    if (drop[k]) tmp[d++] = b->ops[k];
  memcpy(b->ops, tmp, sizeof *tmp * (size_t)n);
  free(tmp);
  pd_ir_truncate_ops(b, kept);
}

bool pd_pass_known_shape(const pd_variable *v, int64_t *numel) {
  if (v->ndim < 0 || pd_dims_any_unknown(v->ndim, v->shape)) return false;
  if (numel) *numel = pd_dims_numel(v->ndim, v->shape);
  return true;
}

bool pd_pass_same_shape(const pd_variable *a, const pd_variable *b) {
  return a->ndim == b->ndim && pd_shape_eq(a->ndim, a->shape, b->shape) &&
         !pd_dims_any_unknown(a->ndim, a->shape);
}

bool pd_pass_inplace_between(const pd_static_block *b, int from, int to) {
  for (int k = from + 1; k < to; k++) {
    const pd_operator *op = b->ops[k];
    if (op->op_id >= 0 && (pd_op_table[op->op_id]->flags & PD_OPF_INPLACE)) return true;
    if (op->op_id < 0 && !op->value && !op->fused) return true; /* a grad or control op: be safe */
    if (op->fused && op->n_out == 0) return true;               /* a fused update */
  }
  return false;
}
