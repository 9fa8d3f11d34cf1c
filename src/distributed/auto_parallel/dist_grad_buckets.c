/* Strategy.dp_optimization on a rank's partitioned train Program: the
 * gradient all_reduces of the data-parallel axes fused into buckets and
 * overlapped with the rest of backward (Paddle's data-parallel
 * optimization pass of auto_parallel).
 *
 * A gradient all_reduce is a c_allreduce whose input a backward op writes
 * and only it reads, and whose result only the optimizer's ops read (or
 * the c_allgather of a gradient sharded on another axis too).
 * Taken in the order backward produces their inputs, the all_reduces of
 * one process group, reduce op and dtype go into a bucket until it holds
 * fuse_grad_size_in_MB (a bucket may exceed it, as Paddle's) or 64
 * gradients (an op's input limit); a bucket closes early where the next
 * gradient comes after an update that reads the bucket. Each bucket
 * becomes
 *
 *   c_coalesce(g_1, ..., g_n) -> bucket    the gradients, one flat buffer
 *   c_allreduce_start_(bucket)              launched on the comm thread
 *   ...                                    the rest of backward
 *   c_allreduce_wait_(bucket)               before the first reader
 *   slice + reshape -> r_i                 each result, a view of it
 *
 * with the start right after the op that writes the bucket's last
 * gradient (overlap_comm_cacl; else right before the wait). The Executor's
 * arena plans each gradient inside its bucket (executor.c,
 * plan_bucket_pieces), so the ops that compute the gradients write them
 * there and c_coalesce copies nothing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist_program.h"

#define BUCKET_MAX_GRADS 64

typedef struct grad_ar {
  int op;       /* the c_allreduce */
  int producer; /* the op writing its input */
  int reader;   /* the first op reading its result */
  int64_t bytes;
  int bucket;
} grad_ar;

typedef struct bucket {
  int first, n; /* into the sorted grad_ar array */
  int producer; /* the last gradient's producer */
  int reader;   /* the first reader of any result */
} bucket;

/* What may read an all-reduced gradient: the optimizer's ops, or the
 * gather of a gradient also sharded on another mesh axis (which then feeds
 * the update). */
static bool is_optimizer_op(const pd_operator *op) {
  return (op->role & 0xff) == PD_OP_ROLE_OPTIMIZE || op->op_id == PD_OP_c_allgather ||
         (op->op_id >= 0 && pd_ap_is_update_op(op->op_id));
}

static bool names(const pd_operator *op, const char *name, bool inputs) {
  int n = inputs ? op->n_in : op->n_out;
  char **v = inputs ? op->inputs : op->outputs;
  for (int i = 0; i < n; i++)
    if (strcmp(v[i], name) == 0) return true;
  return false;
}

/* Whether c_allreduce op k of b is a gradient's; fills *g. */
static bool gradient_allreduce(const pd_static_block *b, int k, grad_ar *g) {
  const pd_operator *op = b->ops[k];
  if (op->op_id != PD_OP_c_allreduce || op->n_in != 1 || op->n_out != 1) return false;
  const pd_variable *x = pd_ir_find_var(b, op->inputs[0]), *y = pd_ir_find_var(b, op->outputs[0]);
  if (!x || !y || x->persistable || y->persistable || x->ndim < 0) return false;
  int producer = -1, reader = -1;
  for (int j = 0; j < b->n_ops; j++) {
    const pd_operator *o = b->ops[j];
    if (j != k && names(o, x->name, true)) return false; /* the bucket's reduce would change what it reads */
    if (names(o, x->name, false)) {
      if (producer >= 0 || j > k) return false;
      producer = j;
    }
    if (j != k && names(o, y->name, false)) return false;
    if (names(o, y->name, true)) {
      if (!is_optimizer_op(o) || j < k) return false;
      if (reader < 0) reader = j;
    }
  }
  if (producer < 0 || reader < 0 || (b->ops[producer]->role & 0xff) != PD_OP_ROLE_BACKWARD) return false;
  *g = (grad_ar){.op = k,
                 .producer = producer,
                 .reader = reader,
                 .bytes = pd_shape_numel(x->ndim, x->shape) * (int64_t)pd_dtype_size(x->dtype),
                 .bucket = -1};
  return g->bytes > 0;
}

static int by_producer(const void *a, const void *b) {
  const grad_ar *x = a, *y = b;
  return x->producer != y->producer ? x->producer - y->producer : x->op - y->op;
}

/* Whether two all_reduces may share a bucket: group, reduce op, dtype. */
static bool same_kind(const pd_static_block *b, const grad_ar *x, const grad_ar *y) {
  const pd_operator *p = b->ops[x->op], *q = b->ops[y->op];
  return p->attrs.i[0] == q->attrs.i[0] && p->attrs.i[1] == q->attrs.i[1] && p->attrs.i[2] == q->attrs.i[2] &&
         pd_ir_find_var(b, p->inputs[0])->dtype == pd_ir_find_var(b, q->inputs[0])->dtype;
}

/* Buckets of gs (sorted by producer): gs is reordered so each bucket's
 * members are consecutive. Returns the bucket count, or -1 (out of memory). */
static int assign(const pd_static_block *b, grad_ar *gs, int n, const pd_dist_strategy_dp_optimization *o,
                  bucket **out) {
  bucket *bs = calloc((size_t)n + 1, sizeof *bs);
  grad_ar *sorted = calloc((size_t)n + 1, sizeof *sorted);
  if (!bs || !sorted) {
    free(bs), free(sorted);
    return -1;
  }
  int64_t limit = (int64_t)(o->fuse_grad_size_in_MB * 1024 * 1024);
  int nb = 0;
  /* per kind, the open bucket: scan for it (few kinds) */
  int *open_of = malloc(sizeof(int) * ((size_t)n + 1));
  int64_t *acc = calloc((size_t)n + 1, sizeof *acc);
  if (!open_of || !acc) {
    free(bs), free(sorted), free(open_of), free(acc);
    return -1;
  }
  for (int i = 0; i < n; i++) {
    int open = -1;
    for (int j = 0; j < i && open < 0; j++)
      if (gs[j].bucket >= 0 && open_of[gs[j].bucket] >= 0 && same_kind(b, &gs[j], &gs[i]))
        open = gs[j].bucket;
    if (open >= 0 && (gs[i].producer >= bs[open].reader || bs[open].n == BUCKET_MAX_GRADS)) {
      open_of[open] = -1; /* closed: the gradient comes after an update reading it, or it is full */
      open = -1;
    }
    if (open < 0) {
      open = nb++;
      bs[open] = (bucket){.reader = gs[i].reader};
      open_of[open] = open;
      acc[open] = 0;
    }
    gs[i].bucket = open;
    bs[open].n++;
    bs[open].producer = gs[i].producer;
    if (gs[i].reader < bs[open].reader) bs[open].reader = gs[i].reader;
    acc[open] += gs[i].bytes;
    if (!o->fuse_all_reduce_ops || acc[open] >= limit) open_of[open] = -1;
  }
  /* members consecutive, buckets in order of their first gradient */
  int at = 0;
  for (int k = 0; k < nb; k++) {
    bs[k].first = at;
    for (int i = 0; i < n; i++)
      if (gs[i].bucket == k) sorted[at++] = gs[i];
  }
  memcpy(gs, sorted, sizeof *gs * (size_t)n);
  free(sorted), free(open_of), free(acc);
  *out = bs;
  return nb;
}

static pd_operator *append(pd_static_block *b, const char *type, const char *const *ins, int n_in,
                           const char *out, const pd_attrs *a) {
  pd_operator *op = pd_ir_append_op(b, type, ins, n_in, &out, 1, a);
  if (op) op->role = PD_OP_ROLE_BACKWARD;
  return op;
}

/* Appends bucket k's ops (at the block's end, moved into place later):
 * coalesce and start, then wait and the results. */
static pd_status emit(pd_static_block *b, const grad_ar *gs, const bucket *bk, int k) {
  const pd_operator *ar = b->ops[gs[bk->first].op];
  const pd_variable *x0 = pd_ir_find_var(b, ar->inputs[0]);
  char flat[PD_AP_NAME_LEN], piece[PD_AP_NAME_LEN];
  snprintf(flat, sizeof flat, "grad_bucket_%d", k);
  const char *ins[BUCKET_MAX_GRADS];
  int64_t total = 0;
  for (int i = 0; i < bk->n; i++) {
    const pd_operator *op = b->ops[gs[bk->first + i].op];
    const pd_variable *x = pd_ir_find_var(b, op->inputs[0]);
    ins[i] = op->inputs[0];
    total += pd_shape_numel(x->ndim, x->shape);
  }
  if (!pd_ir_add_var(b, flat, x0->dtype, 1, (int64_t[]){total}, NULL)) return pd_last_status();
  pd_attrs comm = {.i = {ar->attrs.i[0], ar->attrs.i[1], ar->attrs.i[2]}};
  const char *f[1] = {flat};
  if (!append(b, "c_coalesce", ins, bk->n, flat, NULL) ||
      !append(b, "c_allreduce_start_", f, 1, flat, &comm) ||
      !append(b, "c_allreduce_wait_", f, 1, flat, &comm))
    return pd_last_status();
  int64_t off = 0;
  for (int i = 0; i < bk->n; i++) {
    const pd_operator *op = b->ops[gs[bk->first + i].op];
    const pd_variable *y = pd_ir_find_var(b, op->outputs[0]);
    int64_t numel = pd_shape_numel(y->ndim, y->shape);
    snprintf(piece, sizeof piece, "grad_bucket_%d@%d", k, i);
    if (!pd_ir_add_var(b, piece, y->dtype, 1, (int64_t[]){numel}, NULL)) return pd_last_status();
    pd_attrs s = {.nv = {1, 1, 1}};
    s.v[1][0] = off;
    s.v[2][0] = off + numel;
    pd_attrs r = {.nv = {y->ndim}};
    memcpy(r.v[0], y->shape, sizeof(int64_t) * (size_t)y->ndim);
    const char *p[1] = {piece};
    if (!append(b, "slice", f, 1, piece, &s) || !append(b, "reshape", p, 1, op->outputs[0], &r))
      return pd_last_status();
    off += numel;
  }
  return PD_OK;
}

pd_status pd_ap_grad_buckets(pd_ap_program *p, const pd_dist_strategy_dp_optimization *o) {
  pd_static_block *b = p->main->blocks[0];
  int n0 = b->n_ops, n = 0;
  grad_ar *gs = calloc((size_t)n0 + 1, sizeof *gs);
  if (!gs) return pd_set_error(PD_ERR_MEMORY, "dist.to_static: out of memory bucketing gradients");
  for (int k = 0; k < n0; k++)
    if (gradient_allreduce(b, k, &gs[n])) n++;
  if (n == 0) {
    free(gs);
    return PD_OK;
  }
  qsort(gs, (size_t)n, sizeof *gs, by_producer);
  bucket *bs = NULL;
  int nb = assign(b, gs, n, o, &bs);
  if (nb < 0) {
    free(gs);
    return pd_set_error(PD_ERR_MEMORY, "dist.to_static: out of memory bucketing gradients");
  }
  /* the new ops at the end: per bucket 3 + 2 per gradient */
  pd_status st = PD_OK;
  int *at = malloc(sizeof(int) * ((size_t)nb + 1));
  if (!at) st = pd_set_error(PD_ERR_MEMORY, "dist.to_static: out of memory bucketing gradients");
  for (int k = 0; k < nb && st == PD_OK; k++) {
    at[k] = b->n_ops;
    st = emit(b, gs, &bs[k], k);
  }
  pd_operator **order = st == PD_OK ? malloc(sizeof *order * (size_t)b->n_ops) : NULL;
  bool *dropped = st == PD_OK ? calloc((size_t)n0 + 1, sizeof *dropped) : NULL;
  if (st == PD_OK && (!order || !dropped))
    st = pd_set_error(PD_ERR_MEMORY, "dist.to_static: out of memory bucketing gradients");
  if (st == PD_OK) {
    for (int i = 0; i < n; i++) dropped[gs[i].op] = true;
    int m = 0;
    for (int k = 0; k < n0; k++) {
      for (int j = 0; j < nb; j++) /* before the first reader: (start,) wait, results */
        if (bs[j].reader == k) {
          int from = o->overlap_comm_cacl ? at[j] + 2 : at[j];
          for (int q = from; q < at[j] + 3 + 2 * bs[j].n; q++) order[m++] = b->ops[q];
        }
      if (!dropped[k]) order[m++] = b->ops[k];
      for (int j = 0; j < nb && o->overlap_comm_cacl; j++) /* after the last gradient: coalesce, start */
        if (bs[j].producer == k) order[m++] = b->ops[at[j]], order[m++] = b->ops[at[j] + 1];
    }
    for (int k = 0; k < n0; k++) /* the c_allreduces replaced, freed by the truncation */
      if (dropped[k]) order[m++] = b->ops[k];
    memcpy(b->ops, order, sizeof *order * (size_t)b->n_ops);
    pd_ir_truncate_ops(b, b->n_ops - n);
  }
  free(order), free(dropped), free(at), free(bs), free(gs);
  return st;
}
