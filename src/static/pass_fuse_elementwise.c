/* Elementwise chain fusion: ops whose registry rows give their kernel as a
 * 1-D function (ew_fn: add, multiply, exp, relu, scale, greater_than,
 * where, ...) and whose intermediate results have one reader each become
 * one fused op. It walks the output in blocks of FUSE_BLOCK elements and
 * runs every op's function on the block, intermediates in per-thread
 * scratch, so the chain makes one pass over memory instead of one per op
 * and its intermediates take no arena bytes. The functions are the
 * kernels' own, on the same values: the results are the same bits.
 *
 * An op joins when its output has a known shape, every input has that
 * shape, one element, or a shape broadcast over the output's trailing
 * FUSE_ROW_MIN or more elements (a [4, 128, 1] input of a [4, 128, 1000]
 * output), and its inputs share one dtype (where: a bool condition, then
 * x and y). A producer joins its consumer when its result is read by that
 * op only, is not fetched and not persistable, and has the consumer's
 * output shape; the group then runs at its last op. No inplace op may lie
 * between a group's first and last op (it could change an input the moved
 * ops read). */
#include <stdlib.h>
#include <string.h>

#include "../kernels/cpu/parallel.h"
#include "paddlec/manipulation.h"
#include "passes.h"

#define FUSE_MAX_OPS 16   /* ops of one chain */
#define FUSE_MAX_IN 12    /* external inputs of one chain */
#define FUSE_BLOCK 512    /* elements per block */
#define FUSE_ROW_MIN 256  /* a broadcast input needs rows at least this long */
#define FUSE_MAX_ELSIZE 8 /* float64 */

/* ---- the fused op -------------------------------------------------------- */
typedef enum { IN_FULL, IN_SCALAR, IN_ROW } in_kind;

typedef struct ew_step {
  pd_ew_fn fn;
  double params[PD_ATTR_FLOATS];
  int n_src;
  int src[3]; /* >= 0: external input; < 0: scratch -1 - r */
  int dst;    /* scratch register, or -1: the output */
  int elsize; /* of dst */
} ew_step;

typedef struct ew_chain {
  pd_fused_op base;
  int n_steps, n_in, n_regs;
  ew_step steps[FUSE_MAX_OPS];
  in_kind kind[FUSE_MAX_IN];
  /* IN_ROW: the input's element offset per output row index (row = all dims
   * but the trailing `row_dims`), from its broadcast strides, and whether it
   * varies along the row (1) or not (0) */
  int64_t row_stride[FUSE_MAX_IN][PD_MAX_DIMS];
  int in_row_unit[FUSE_MAX_IN];
  int out_ndim, row_dims; /* the output's dims; how many trailing dims form a row */
  int64_t out_shape[PD_MAX_DIMS];
  int out_elsize, in_elsize[FUSE_MAX_IN];
} ew_chain;

static void chain_release(pd_fused_op *f) { free(f); }

/* Runs the chain on elements [start, start + n) of row `row` (offset of
 * the row's first element: row_off); n <= FUSE_BLOCK. */
static void run_block(const ew_chain *c, char *const *in, char *out, int64_t row, int64_t row_off,
                      int64_t start, int64_t n) {
  _Alignas(64) char scratch[FUSE_MAX_OPS][FUSE_BLOCK * FUSE_MAX_ELSIZE];
  char *src_ptr[FUSE_MAX_IN];
  int64_t src_stride[FUSE_MAX_IN];
  for (int i = 0; i < c->n_in; i++) {
    switch (c->kind[i]) {
      case IN_FULL:
        src_ptr[i] = in[i] + (row_off + start) * c->in_elsize[i], src_stride[i] = 1;
        break;
      case IN_SCALAR:
        src_ptr[i] = in[i], src_stride[i] = 0;
        break;
      case IN_ROW: { /* unravel the row index over the leading dims */
        int64_t off = 0, r = row;
        for (int d = c->out_ndim - c->row_dims - 1; d >= 0; d--) {
          off += (r % c->out_shape[d]) * c->row_stride[i][d];
          r /= c->out_shape[d];
        }
        if (c->in_row_unit[i]) off += start;
        src_ptr[i] = in[i] + off * c->in_elsize[i], src_stride[i] = c->in_row_unit[i];
        break;
      }
    }
  }
  for (int k = 0; k < c->n_steps; k++) {
    const ew_step *s = &c->steps[k];
    char *ptr[4];
    int64_t stride[4] = {1, 1, 1, 1};
    ptr[0] = s->dst < 0 ? out + (row_off + start) * c->out_elsize : scratch[s->dst];
    for (int j = 0; j < s->n_src; j++) {
      int r = s->src[j];
      ptr[j + 1] = r >= 0 ? src_ptr[r] : scratch[-1 - r];
      stride[j + 1] = r >= 0 ? src_stride[r] : 1;
    }
    s->fn(n, ptr, stride, s->params);
  }
}

static pd_status chain_run(const pd_fused_op *f, pd_tensor *const *in, int n_in, pd_tensor *const *out,
                           int n_out) {
  const ew_chain *c = (const ew_chain *)f;
  (void)n_out;
  char *ptr[FUSE_MAX_IN];
  pd_tensor *tmp[FUSE_MAX_IN] = {0};
  pd_status st = PD_OK;
  for (int i = 0; i < n_in && st == PD_OK; i++) {
    pd_tensor *t = in[i];
    if (!t->is_contiguous && c->kind[i] != IN_SCALAR) /* a strided view: read a copy */
      if (!(t = tmp[i] = pd_contiguous(t))) st = pd_last_status();
    if (st == PD_OK) ptr[i] = (char *)pd_data_ptr(t);
  }
  if (st == PD_OK) {
    char *o = (char *)pd_data_ptr(out[0]);
    int64_t numel = out[0]->numel, row = 1;
    for (int d = c->out_ndim - c->row_dims; d < c->out_ndim; d++) row *= c->out_shape[d];
    int64_t rows = row ? numel / row : 0, per_row = (row + FUSE_BLOCK - 1) / FUSE_BLOCK;
    PD_PARALLEL_FOR(t, rows * per_row, PD_GRAIN / FUSE_BLOCK, {
      int64_t r = t / per_row, start = (t % per_row) * FUSE_BLOCK;
      int64_t n = row - start < FUSE_BLOCK ? row - start : FUSE_BLOCK;
      run_block(c, ptr, o, r, r * row, start, n);
    });
  }
  for (int i = 0; i < n_in; i++) pd_tensor_release(tmp[i]);
  return st;
}

/* ---- finding chains ------------------------------------------------------- */
typedef struct finder {
  pd_pass_ctx *c;
  pd_static_block *b;
  int *producer; /* per slot: the op writing it, or -1 */
  int *readers;  /* per slot */
  int *group;    /* per op: its group's id (its last op), -1: not fusable */
  int *size;     /* per group id: ops in it */
  int *first;    /* per group id: its first op */
} finder;

/* How input v reads over output o: -1 when it cannot; else the kind, with
 * *row_dims the trailing output dims an IN_ROW input needs as a row. */
static int input_kind(const pd_variable *v, const pd_variable *o, int *row_dims) {
  int64_t n;
  if (!pd_pass_known_shape(v, &n) || v->ndim > o->ndim) return -1;
  if (pd_pass_same_shape(v, o)) return IN_FULL;
  if (n == 1) return IN_SCALAR;
  /* broadcast: dims agree or are 1 (aligned from the right); the trailing
   * dims where v is either all present or all 1 form the row */
  int lead = o->ndim - v->ndim, rd = 0;
  bool present = false, first = true;
  for (int d = o->ndim - 1; d >= 0; d--) {
    int64_t vd = d < lead ? 1 : v->shape[d - lead];
    if (vd != o->shape[d] && vd != 1) return -1;
    bool p = vd == o->shape[d] && vd != 1;
    if (o->shape[d] == 1) p = present; /* a 1 goes with either */
    if (first) present = p, first = false;
    if (p != present) break;
    rd++;
  }
  *row_dims = rd;
  return IN_ROW;
}

/* Whether op k is elementwise with a 1-D function for its dtypes. */
static bool fusable(const finder *w, int k) {
  const pd_operator *op = w->b->ops[k];
  if (op->op_id < 0 || op->fused || op->n_out != 1 || op->n_in < 1 || op->n_in > 3) return false;
  const pd_op_def *def = pd_op_table[op->op_id];
  if (!def->ew_fn || (def->flags & (PD_OPF_VIEW | PD_OPF_INPLACE | PD_OPF_RANDOM))) return false;
  int o = pd_pass_slot(w->c, op->outputs[0]);
  int64_t n;
  if (o < 0 || !pd_pass_known_shape(w->b->vars[o], &n) || n == 0) return false;
  const pd_variable *out = w->b->vars[o];
  if (pd_dtype_size(out->dtype) > FUSE_MAX_ELSIZE) return false;
  pd_dtype dt[3];
  bool is_where = op->op_id == PD_OP_where;
  for (int i = 0; i < op->n_in; i++) {
    int s = pd_pass_slot(w->c, op->inputs[i]), rd;
    if (s < 0 || input_kind(w->b->vars[s], out, &rd) < 0) return false;
    if (input_kind(w->b->vars[s], out, &rd) == IN_ROW) {
      int64_t row = 1;
      for (int d = out->ndim - rd; d < out->ndim; d++) row *= out->shape[d];
      if (row < FUSE_ROW_MIN) return false;
    }
    dt[i] = w->b->vars[s]->dtype;
    if (pd_dtype_size(dt[i]) > FUSE_MAX_ELSIZE) return false;
  }
  for (int i = is_where ? 2 : 1; i < op->n_in; i++)
    if (dt[i] != dt[is_where ? 1 : 0]) return false;
  double p[PD_ATTR_FLOATS];
  return def->ew_fn(&op->attrs, dt, p) != NULL;
}

/* Builds the fused op for the group ending at op `last`. */
static pd_status build_chain(finder *w, int last, bool *drop) {
  pd_static_block *b = w->b;
  int members[FUSE_MAX_OPS], n = 0;
  for (int k = w->first[last]; k <= last; k++)
    if (w->group[k] == last) members[n++] = k;
  ew_chain *c = calloc(1, sizeof *c);
  if (!c) return pd_set_error(PD_ERR_MEMORY, "Executor: out of memory fusing ops");
  c->base.run = chain_run;
  c->base.release = chain_release;
  c->base.n_ops = n;
  c->base.elementwise = true;
  const pd_variable *out = b->vars[pd_pass_slot(w->c, b->ops[last]->outputs[0])];
  c->out_ndim = out->ndim;
  memcpy(c->out_shape, out->shape, sizeof(int64_t) * (size_t)out->ndim);
  c->out_elsize = (int)pd_dtype_size(out->dtype);
  c->row_dims = out->ndim;
  const char *in_names[FUSE_MAX_IN];
  int in_slot[FUSE_MAX_IN], reg_of[FUSE_MAX_OPS];
  bool ok = true;
  for (int m = 0; m < n && ok; m++) {
    const pd_operator *op = b->ops[members[m]];
    ew_step *s = &c->steps[c->n_steps++];
    pd_dtype dt[3];
    s->n_src = op->n_in;
    for (int i = 0; i < op->n_in && ok; i++) {
      int sl = pd_pass_slot(w->c, op->inputs[i]);
      dt[i] = b->vars[sl]->dtype;
      int p = w->producer[sl];
      int pm = -1;
      for (int q = 0; q < m; q++)
        if (members[q] == p) pm = q;
      if (pm >= 0) { /* an intermediate of the chain */
        s->src[i] = -1 - reg_of[pm];
        continue;
      }
      int e = -1;
      for (int q = 0; q < c->n_in; q++)
        if (in_slot[q] == sl) e = q;
      if (e < 0) {
        if (c->n_in == FUSE_MAX_IN) {
          ok = false;
          break;
        }
        e = c->n_in++;
        in_slot[e] = sl, in_names[e] = op->inputs[i];
        const pd_variable *v = b->vars[sl];
        int rd = 0;
        c->kind[e] = (in_kind)input_kind(v, out, &rd);
        c->in_elsize[e] = (int)pd_dtype_size(v->dtype);
        if (c->kind[e] == IN_ROW) {
          if (rd < c->row_dims) c->row_dims = rd;
          int lead = out->ndim - v->ndim;
          int64_t st = 1;
          for (int d = out->ndim - 1; d >= 0; d--) {
            int64_t vd = d < lead ? 1 : v->shape[d - lead];
            c->row_stride[e][d] = vd == 1 ? 0 : st;
            st *= vd;
          }
        }
      }
      s->src[i] = e;
    }
    s->fn = pd_op_table[op->op_id]->ew_fn(&op->attrs, dt, s->params);
    int o = pd_pass_slot(w->c, op->outputs[0]);
    s->elsize = (int)pd_dtype_size(b->vars[o]->dtype);
    reg_of[m] = m;
    s->dst = members[m] == last ? -1 : m;
  }
  /* a row input varies along the row when its trailing row_dims are present */
  for (int e = 0; e < c->n_in && ok; e++) {
    if (c->kind[e] != IN_ROW) continue;
    c->in_row_unit[e] = c->row_stride[e][out->ndim - 1] != 0;
    for (int d = out->ndim - c->row_dims; d < out->ndim; d++)
      if ((c->row_stride[e][d] != 0) != c->in_row_unit[e] && out->shape[d] != 1) ok = false;
  }
  int64_t row = 1;
  for (int d = out->ndim - c->row_dims; d < out->ndim; d++) row *= out->shape[d];
  if (!ok || (c->row_dims < out->ndim && row < FUSE_ROW_MIN)) {
    free(c);
    return PD_OK; /* not fused after all */
  }
  const char *outs[1] = {b->ops[last]->outputs[0]};
  pd_operator *f = pd_ir_append_fused_op(b, "fused_elementwise", in_names, c->n_in, outs, 1, &c->base);
  if (!f) return pd_last_status();
  f->role = b->ops[last]->role;
  pd_pass_replace_op(b, last); /* the fused op takes the last op's place; the members are dropped */
  for (int m = 0; m < n; m++)
    if (members[m] != last) drop[members[m]] = true;
  w->c->stats->elementwise_chains++;
  return PD_OK;
}

pd_status pd_pass_fuse_elementwise(pd_pass_ctx *c) {
  pd_static_block *b = c->b;
  int nv = b->n_vars, no = b->n_ops;
  finder w = {.c = c, .b = b};
  w.producer = malloc(sizeof(int) * ((size_t)nv + 1));
  w.group = malloc(sizeof(int) * ((size_t)no + 1));
  w.size = calloc((size_t)no + 1, sizeof(int));
  w.first = calloc((size_t)no + 1, sizeof(int));
  bool *drop = calloc((size_t)no + 1, sizeof(bool));
  w.readers = pd_pass_count_readers(c);
  pd_status st = w.producer && w.group && w.size && w.first && drop && w.readers
                     ? PD_OK
                     : pd_set_error(PD_ERR_MEMORY, "Executor: out of memory fusing ops");
  for (int s = 0; st == PD_OK && s < nv; s++) w.producer[s] = -1;
  for (int k = 0; st == PD_OK && k < no; k++) {
    const pd_operator *op = b->ops[k];
    pd_pass_note_producer(c, k, w.producer); /* the writers up to op k */
    w.group[k] = -1;
    if (!fusable(&w, k)) continue;
    w.group[k] = k, w.size[k] = 1, w.first[k] = k;
    const pd_variable *out = b->vars[pd_pass_slot(c, op->outputs[0])];
    for (int i = 0; i < op->n_in; i++) {
      int s = pd_pass_slot(c, op->inputs[i]);
      int p = s >= 0 ? w.producer[s] : -1;
      if (p < 0 || w.group[p] < 0 || w.group[p] == k) continue;
      int g = w.group[p];
      const pd_variable *v = b->vars[s];
      if (w.readers[s] != 1 || v->persistable || !pd_pass_same_shape(v, out) ||
          w.size[g] + w.size[k] > FUSE_MAX_OPS || pd_pass_inplace_between(b, w.first[g], k))
        continue;
      for (int q = w.first[g]; q <= p; q++) /* group g joins k's */
        if (w.group[q] == g) w.group[q] = k;
      w.size[k] += w.size[g];
      if (w.first[g] < w.first[k]) w.first[k] = w.first[g];
    }
  }
  for (int k = 0; st == PD_OK && k < no; k++)
    if (w.group[k] == k && w.size[k] > 1) st = build_chain(&w, k, drop);
  if (st == PD_OK) pd_pass_drop_ops(b, drop);
  free(w.producer), free(w.group), free(w.size), free(w.first), free(drop), free(w.readers);
  return st;
}
