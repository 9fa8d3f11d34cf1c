/* GEMM epilogue fusion. The GEMM entry point is oneDNN's dnnl_sgemm (see
 * kernels/cpu/gemm.h), which has no post-ops, so the epilogues are applied
 * by the fused op itself, row by row while the row is in cache:
 *
 *  - matmul(x, w) -> add(., bias) [-> act(.)], bias a vector over the last
 *    dim and act an elementwise op of one input (relu, sigmoid, tanh, ...):
 *    the matmul writes straight into the final output, then each row gets
 *    the add's and the activation's 1-D functions (the registry rows' own,
 *    so the bits equal the unfused ops'); the add's result and the extra
 *    pass over it disappear.
 *  - matmul(a, g) -> sgd_(w, ., lr), the plain SGD update (no weight decay,
 *    clipping or master weights) of a 2-D parameter: one GEMM with
 *    alpha = -lr and beta = 1 into the parameter, w -= lr * (a^T g), so the
 *    weight gradient is never stored and the update makes no pass of its
 *    own. This one rounds differently from the two ops (lr times the
 *    accumulated sum, not times the rounded gradient): equal to about one
 *    unit in the last place.
 *
 * A matmul's result must have the one reader the pattern names, must not
 * be fetched or persistable, and no inplace op may lie between the ops
 * fused (for the SGD update: no op between them may read or write the
 * parameter or the rate). */
#include <stdlib.h>
#include <string.h>

#include "../kernels/cpu/gemm.h"
#include "../kernels/cpu/parallel.h"
#include "paddlec/manipulation.h"
#include "passes.h"

/* ---- matmul + bias [+ activation] ------------------------------------------ */
typedef struct gemm_bias {
  pd_fused_op base;
  pd_attrs mm_attrs; /* the matmul's */
  pd_ew_fn add, act;
  double add_p[PD_ATTR_FLOATS], act_p[PD_ATTR_FLOATS];
  bool bias_first; /* add(bias, mm) rather than add(mm, bias) */
} gemm_bias;

static void fused_release(pd_fused_op *f) { free(f); }

static pd_status gemm_bias_run(const pd_fused_op *f, pd_tensor *const *in, int n_in, pd_tensor *const *out,
                               int n_out) {
  const gemm_bias *g = (const gemm_bias *)f;
  (void)n_in, (void)n_out;
  pd_status st = pd_dispatch_into(PD_OP_matmul, in, 2, &g->mm_attrs, out, 1);
  if (st != PD_OK) return st;
  pd_tensor *o = out[0], *bias = in[2], *bc = NULL;
  if (!bias->is_contiguous && !(bias = bc = pd_contiguous(bias))) return pd_last_status();
  int64_t ncol = o->shape[o->ndim - 1], rows = ncol ? o->numel / ncol : 0;
  size_t es = pd_dtype_size(o->dtype);
  char *base = (char *)pd_data_ptr(o), *b = (char *)pd_data_ptr(bias);
  PD_PARALLEL_FOR(r, rows, PD_GRAIN / (ncol ? ncol : 1) + 1, {
    char *row = base + (size_t)r * (size_t)ncol * es;
    static const int64_t unit[3] = {1, 1, 1};
    char *pa[3] = {row, g->bias_first ? b : row, g->bias_first ? row : b};
    g->add(ncol, pa, unit, g->add_p);
    if (g->act) {
      char *pr[2] = {row, row};
      g->act(ncol, pr, unit, g->act_p);
    }
  });
  pd_tensor_release(bc);
  return PD_OK;
}

/* ---- weight gradient into the SGD update ------------------------------------ */
typedef struct gemm_sgd {
  pd_fused_op base;
  pd_attrs mm_attrs, sgd_attrs;
} gemm_sgd;

/* in: a, g, w, lr. w -= lr * matmul(a, g) as one GEMM when every operand
 * is a contiguous matrix; otherwise the two ops. */
static pd_status gemm_sgd_run(const pd_fused_op *f, pd_tensor *const *in, int n_in, pd_tensor *const *out,
                              int n_out) {
  const gemm_sgd *g = (const gemm_sgd *)f;
  (void)n_in, (void)out, (void)n_out;
  pd_tensor *a = in[0], *b = in[1], *w = in[2], *lr = in[3];
  bool ta = g->mm_attrs.i[0] != 0, tb = g->mm_attrs.i[1] != 0;
  bool direct = a->ndim == 2 && b->ndim == 2 && w->ndim == 2 && a->is_contiguous && b->is_contiguous &&
                w->is_contiguous && a->dtype == w->dtype && b->dtype == w->dtype && lr->numel == 1 &&
                (w->dtype == PD_FLOAT32 || w->dtype == PD_FLOAT64);
  if (!direct) {
    pd_tensor *grad = NULL;
    int n = 0;
    pd_status st = pd_dispatch(PD_OP_matmul, (pd_tensor *[]){a, b}, 2, &g->mm_attrs, &grad, &n);
    pd_tensor *upd[PD_MAX_OUTPUTS];
    if (st == PD_OK) st = pd_dispatch(PD_OP_sgd_, (pd_tensor *[]){w, grad, lr}, 3, &g->sgd_attrs, upd, &n);
    if (st == PD_OK)
      for (int k = 0; k < n; k++) pd_tensor_release(upd[k]);
    pd_tensor_release(grad);
    return st;
  }
  int64_t M = ta ? a->shape[1] : a->shape[0], K = ta ? a->shape[0] : a->shape[1];
  int64_t N = tb ? b->shape[0] : b->shape[1];
  if (w->shape[0] != M || w->shape[1] != N || (tb ? b->shape[1] : b->shape[0]) != K)
    return pd_set_error(PD_ERR_SHAPE, "fused matmul+sgd_: gradient [%lld, %lld] (K %lld) for parameter %s",
                        (long long)M, (long long)N, (long long)K, PD_SHAPE_STR(w));
  double rate = pd_tensor_item(lr);
  int rc;
  if (w->dtype == PD_FLOAT32)
    rc = pdk_gemm_f32(ta, tb, M, N, K, -(float)rate, pd_data_ptr(a), a->shape[1], pd_data_ptr(b), b->shape[1],
                      1.0f, pd_data_ptr(w), N);
  else
    rc = pdk_gemm_f64(ta, tb, M, N, K, -rate, pd_data_ptr(a), a->shape[1], pd_data_ptr(b), b->shape[1], 1.0,
                      pd_data_ptr(w), N);
  if (rc != 0) return pd_set_error(PD_ERR_STATE, "fused matmul+sgd_: the GEMM failed (%d)", rc);
  w->storage->version++; /* as the inplace sgd_ would */
  return PD_OK;
}

/* ---- finding the patterns ----------------------------------------------------- */
typedef struct finder {
  pd_pass_ctx *c;
  pd_static_block *b;
  int *readers;  /* per slot */
  int *producer; /* per slot: the op writing it */
  int *reader;   /* per slot with one reader: that op */
  bool *drop;
} finder;

static const pd_variable *var_of(const finder *w, const char *name) {
  int s = pd_pass_slot(w->c, name);
  return s >= 0 ? w->b->vars[s] : NULL;
}

/* The one op reading op k's output 0 when it is an intermediate the
 * pattern may swallow, else -1. */
static int sole_reader(const finder *w, int k) {
  const pd_operator *op = w->b->ops[k];
  if (op->n_out != 1) return -1;
  int s = pd_pass_slot(w->c, op->outputs[0]);
  if (s < 0 || w->readers[s] != 1 || w->b->vars[s]->persistable || pd_pass_is_fetched(w->c, op->outputs[0]))
    return -1;
  return w->reader[s];
}

/* Puts fused op f (appended last) in place of op `at`, dropping `at` and
 * the other ops listed. */
static void install(finder *w, int at, const int *others, int n_others) {
  pd_pass_replace_op(w->b, at);
  for (int i = 0; i < n_others; i++) w->drop[others[i]] = true;
}

static bool is_float(pd_dtype dt) { return dt == PD_FLOAT32 || dt == PD_FLOAT64; }

static pd_status try_bias(finder *w, int k) {
  pd_static_block *b = w->b;
  const pd_operator *mm = b->ops[k];
  int ka = sole_reader(w, k);
  if (ka < 0 || w->drop[ka]) return PD_OK;
  const pd_operator *add = b->ops[ka];
  if (add->op_id != PD_OP_add || add->n_in != 2) return PD_OK;
  const pd_variable *m = var_of(w, mm->outputs[0]), *sum = var_of(w, add->outputs[0]);
  bool bias_first = strcmp(add->inputs[0], mm->outputs[0]) != 0;
  const pd_variable *bias = var_of(w, add->inputs[bias_first ? 0 : 1]);
  if (!m || !sum || !bias || !is_float(m->dtype) || bias->dtype != m->dtype || sum->dtype != m->dtype ||
      !pd_pass_known_shape(m, NULL) || m->ndim < 1 || bias->ndim != 1 ||
      bias->shape[0] != m->shape[m->ndim - 1] || sum->ndim != m->ndim ||
      strcmp(add->inputs[0], add->inputs[1]) == 0)
    return PD_OK;
  for (int d = 0; d < m->ndim; d++)
    if (sum->shape[d] != m->shape[d]) return PD_OK;
  pd_dtype dts[3] = {m->dtype, m->dtype, m->dtype};
  gemm_bias *g = calloc(1, sizeof *g);
  if (!g) return pd_set_error(PD_ERR_MEMORY, "Executor: out of memory fusing a GEMM");
  g->add = pd_op_table[PD_OP_add]->ew_fn(&add->attrs, dts, g->add_p);
  g->bias_first = bias_first;
  g->mm_attrs = mm->attrs;
  int last = ka, ops[3] = {k, ka, -1}, n_ops = 2;
  int kr = sole_reader(w, ka);
  if (kr >= 0 && !w->drop[kr]) { /* an activation */
    const pd_operator *act = b->ops[kr];
    const pd_op_def *def = act->op_id >= 0 ? pd_op_table[act->op_id] : NULL;
    const pd_variable *y = act->n_out == 1 ? var_of(w, act->outputs[0]) : NULL;
    if (def && def->ew_fn && act->n_in == 1 &&
        !(def->flags & (PD_OPF_INPLACE | PD_OPF_VIEW | PD_OPF_RANDOM)) && y && y->dtype == m->dtype &&
        y->ndim == m->ndim && !pd_pass_inplace_between(b, k, kr) &&
        (g->act = def->ew_fn(&act->attrs, dts, g->act_p)) != NULL)
      last = kr, ops[n_ops++] = kr;
  }
  if (!g->add || pd_pass_inplace_between(b, k, ka)) {
    free(g);
    return PD_OK;
  }
  g->base.run = gemm_bias_run;
  g->base.release = fused_release;
  g->base.n_ops = n_ops;
  const char *ins[3] = {mm->inputs[0], mm->inputs[1], add->inputs[bias_first ? 0 : 1]};
  const char *outs[1] = {b->ops[last]->outputs[0]};
  int role = b->ops[last]->role;
  pd_operator *f = pd_ir_append_fused_op(b, "fused_gemm_epilogue", ins, 3, outs, 1, &g->base);
  if (!f) return pd_last_status();
  f->role = role;
  int others[2], n_others = 0;
  for (int i = 0; i < n_ops; i++)
    if (ops[i] != last) others[n_others++] = ops[i];
  install(w, last, others, n_others);
  w->c->stats->gemm_epilogues++;
  return PD_OK;
}

static bool reads(const pd_operator *op, const char *name) {
  for (int i = 0; i < op->n_in; i++)
    if (strcmp(op->inputs[i], name) == 0) return true;
  return false;
}

/* Writes name: an output, input 0 of an inplace op, or the parameter
 * (input 2) of a fused SGD update made before. */
static bool writes(const pd_operator *op, const char *name) {
  for (int i = 0; i < op->n_out; i++)
    if (strcmp(op->outputs[i], name) == 0) return true;
  int updated = op->fused ? (op->n_out == 0 && op->n_in == 4 ? 2 : -1)
                          : (op->op_id >= 0 && (pd_op_table[op->op_id]->flags & PD_OPF_INPLACE) ? 0 : -1);
  return updated >= 0 && updated < op->n_in && strcmp(op->inputs[updated], name) == 0;
}

static pd_status try_sgd(finder *w, int k) {
  pd_static_block *b = w->b;
  const pd_operator *mm = b->ops[k];
  int ks = sole_reader(w, k);
  if (ks < 0 || w->drop[ks]) return PD_OK;
  const pd_operator *sgd = b->ops[ks];
  if (sgd->op_id != PD_OP_sgd_ || sgd->n_in != 3 || strcmp(sgd->inputs[1], mm->outputs[0]) != 0 ||
      sgd->attrs.i[0] != 0 || sgd->attrs.i[1] != 0 || sgd->attrs.s[0] != '\0')
    return PD_OK;
  const pd_variable *pw = var_of(w, sgd->inputs[0]), *grad = var_of(w, mm->outputs[0]);
  const pd_variable *x = var_of(w, mm->inputs[0]), *y = var_of(w, mm->inputs[1]);
  if (!pw || !grad || !x || !y || pw->ndim != 2 || grad->ndim != 2 || x->ndim != 2 || y->ndim != 2 ||
      !is_float(pw->dtype) || grad->dtype != pw->dtype || x->dtype != pw->dtype || y->dtype != pw->dtype ||
      grad->shape[0] != pw->shape[0] || grad->shape[1] != pw->shape[1] ||
      strcmp(sgd->outputs[0], pw->name) != 0)
    return PD_OK;
  /* the update moves up to the matmul: nothing in between may see w or change lr */
  for (int j = k + 1; j < ks; j++)
    if (reads(b->ops[j], pw->name) || writes(b->ops[j], pw->name) || writes(b->ops[j], sgd->inputs[2]))
      return PD_OK;
  gemm_sgd *g = calloc(1, sizeof *g);
  if (!g) return pd_set_error(PD_ERR_MEMORY, "Executor: out of memory fusing a GEMM");
  g->base.run = gemm_sgd_run;
  g->base.release = fused_release;
  g->base.n_ops = 2;
  g->mm_attrs = mm->attrs;
  g->sgd_attrs = sgd->attrs;
  const char *ins[4] = {mm->inputs[0], mm->inputs[1], sgd->inputs[0], sgd->inputs[2]};
  int role = sgd->role;
  pd_operator *f = pd_ir_append_fused_op(b, "fused_gemm_sgd", ins, 4, NULL, 0, &g->base);
  if (!f) return pd_last_status();
  f->role = role;
  install(w, k, &ks, 1);
  w->c->stats->gemm_epilogues++;
  return PD_OK;
}

pd_status pd_pass_fuse_gemm_epilogue(pd_pass_ctx *c) {
  pd_static_block *b = c->b;
  int nv = b->n_vars, no = b->n_ops;
  finder w = {.c = c, .b = b};
  w.readers = pd_pass_count_readers(c);
  w.producer = pd_pass_producers(c);
  w.reader = malloc(sizeof(int) * ((size_t)nv + 1));
  w.drop = calloc((size_t)no + 1, sizeof(bool));
  pd_status st = w.readers && w.producer && w.reader && w.drop
                     ? PD_OK
                     : pd_set_error(PD_ERR_MEMORY, "Executor: out of memory fusing GEMMs");
  for (int s = 0; st == PD_OK && s < nv; s++) w.reader[s] = -1;
  for (int k = 0; st == PD_OK && k < no; k++) {
    const pd_operator *op = b->ops[k];
    for (int i = 0; i < op->n_in; i++) {
      int s = pd_pass_slot(c, op->inputs[i]);
      if (s >= 0) w.reader[s] = k;
    }
  }
  for (int k = 0; st == PD_OK && k < no; k++) {
    const pd_operator *op = b->ops[k];
    if (w.drop[k] || op->op_id != PD_OP_matmul || op->n_in != 2 || op->n_out != 1) continue;
    st = try_bias(&w, k);
    if (st == PD_OK && !w.drop[k]) st = try_sgd(&w, k);
  }
  if (st == PD_OK) pd_pass_drop_ops(b, w.drop);
  free(w.readers), free(w.producer), free(w.reader), free(w.drop);
  return st;
}
