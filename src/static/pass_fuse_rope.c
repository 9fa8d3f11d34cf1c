/* Rotary embedding fusion. pd_rotary_embedding is composed from public ops
 * (so every order of gradient flows), which a plan runs as seven passes
 * over q or k forward and nine backward; the cos and sin tables broadcast
 * over rows of head_dim elements, too short for the elementwise chains
 * (pass_fuse_elementwise.c). Two patterns over the last axis, d = 2h wide:
 *
 *  forward   y = add(multiply(x, cos), multiply(concat(neg(slice(x, h, d)),
 *            slice(x, 0, h)), sin))
 *  backward  dx = the sum, in the plan's order, of multiply(g, cb),
 *            slice_grad(scale(slice(a, 0, h), -1), at h) and
 *            slice_grad(slice(a, h, d), at 0), where a = multiply(g, ca)
 *
 * each become one op that walks x (or g) in blocks of whole rows, the
 * broadcast tables' rows copied beside them, and runs the replaced ops'
 * own 1-D functions (the registry rows' ew_fn, with their attributes) on
 * the block: one pass, and the same bits as the ops it replaces (the
 * half-rotations and zero paddings are copies; the sums keep their order).
 *
 * Every intermediate must have the one reader the pattern names and not be
 * fetched or persistable; no inplace op may lie between the first op and
 * the last. */
#include <stdlib.h>
#include <string.h>

#include "../kernels/cpu/parallel.h"
#include "paddlec/manipulation.h"
#include "passes.h"

#define ROPE_BLOCK 512 /* elements per block: whole rows */
#define ROPE_BUFS 6
#define ROPE_ELSIZE 8 /* float64 at most */

typedef struct rope_op {
  pd_fused_op base;
  bool backward;
  pd_ew_fn mul_a, mul_b, neg_or_scale, add1, add2;
  double mul_a_p[PD_ATTR_FLOATS], mul_b_p[PD_ATTR_FLOATS], ns_p[PD_ATTR_FLOATS];
  double add1_p[PD_ATTR_FLOATS], add2_p[PD_ATTR_FLOATS];
  /* backward: which of b (0), the h-padded term (1) and the 0-padded term
   * (2) the first add takes (u, v) and the second adds (w) */
  int u, v, w;
  int ndim;
  int64_t shape[PD_MAX_DIMS];         /* x's */
  int64_t tab_stride[2][PD_MAX_DIMS]; /* the two tables' element offsets per x index (0: broadcast) */
  int elsize;
} rope_op;

static void rope_release(pd_fused_op *f) { free(f); }

static void call2(pd_ew_fn fn, int64_t n, char *out, char *a, char *b, const double *p) {
  static const int64_t unit[3] = {1, 1, 1};
  char *ptr[3] = {out, a, b};
  fn(n, ptr, unit, p);
}

static void call1(pd_ew_fn fn, int64_t n, char *out, char *a, const double *p) {
  static const int64_t unit[2] = {1, 1};
  char *ptr[2] = {out, a};
  fn(n, ptr, unit, p);
}

/* Rows [r0, r0 + nr) of x (or g) into out. */
static void rope_block(const rope_op *f, const char *x, char *const *tab, char *out, int64_t r0, int64_t nr) {
  _Alignas(64) char buf[ROPE_BUFS][ROPE_BLOCK * ROPE_ELSIZE];
  size_t es = (size_t)f->elsize;
  int64_t d = f->shape[f->ndim - 1], h = d / 2, n = nr * d;
  size_t row = (size_t)d * es, half = (size_t)h * es;
  char *ta = buf[0], *tb = buf[1];
  for (int64_t r = 0; r < nr; r++) { /* the tables' rows beside the block's */
    int64_t off[2] = {0, 0}, idx = r0 + r;
    for (int dim = f->ndim - 2; dim >= 0; dim--) {
      int64_t i = idx % f->shape[dim];
      idx /= f->shape[dim];
      off[0] += i * f->tab_stride[0][dim], off[1] += i * f->tab_stride[1][dim];
    }
    memcpy(ta + (size_t)r * row, tab[0] + (size_t)off[0] * es, row);
    memcpy(tb + (size_t)r * row, tab[1] + (size_t)off[1] * es, row);
  }
  char *xb = (char *)x + (size_t)r0 * row, *ob = out + (size_t)r0 * row;
  if (!f->backward) {
    /* y = x * cos + [-x2, x1] * sin; ta = cos, tb = sin */
    char *neg = buf[2], *rot = buf[3], *m1 = buf[4], *m2 = buf[5];
    call1(f->neg_or_scale, n, neg, xb, f->ns_p);
    for (int64_t r = 0; r < nr; r++) {
      size_t o = (size_t)r * row;
      memcpy(rot + o, neg + o + half, half);
      memcpy(rot + o + half, xb + o, half);
    }
    call2(f->mul_a, n, m1, xb, ta, f->mul_a_p);
    call2(f->mul_b, n, m2, rot, tb, f->mul_b_p);
    call2(f->add1, n, ob, m1, m2, f->add1_p);
    return;
  }
  /* a = g * ta, b = g * tb; term 1: [0, scale(a1)]; term 2: [a2, 0] */
  char *a = buf[2], *sc = buf[3], *t[3] = {buf[4], buf[5], buf[0]};
  call2(f->mul_a, n, a, xb, ta, f->mul_a_p);
  call1(f->neg_or_scale, n, sc, a, f->ns_p);
  call2(f->mul_b, n, t[0], xb, tb, f->mul_b_p); /* ta is free again: the term 2 buffer */
  for (int64_t r = 0; r < nr; r++) {
    size_t o = (size_t)r * row;
    memset(t[1] + o, 0, half); /* slice_grad's zeros */
    memcpy(t[1] + o + half, sc + o, half);
    memcpy(t[2] + o, a + o + half, half);
    memset(t[2] + o + half, 0, half);
  }
  call2(f->add1, n, sc, t[f->u], t[f->v], f->add1_p);
  call2(f->add2, n, ob, sc, t[f->w], f->add2_p);
}

static pd_status rope_run(const pd_fused_op *base, pd_tensor *const *in, int n_in, pd_tensor *const *out,
                          int n_out) {
  const rope_op *f = (const rope_op *)base;
  (void)n_in, (void)n_out;
  pd_tensor *tmp[3] = {0};
  char *ptr[3];
  pd_status st = PD_OK;
  for (int i = 0; i < 3 && st == PD_OK; i++) {
    pd_tensor *t = in[i];
    if (!t->is_contiguous && !(t = tmp[i] = pd_contiguous(t))) st = pd_last_status();
    if (st == PD_OK) ptr[i] = (char *)pd_data_ptr(t);
  }
  if (st == PD_OK) {
    int64_t d = f->shape[f->ndim - 1], rows = d ? out[0]->numel / d : 0, per = ROPE_BLOCK / d;
    int64_t blocks = (rows + per - 1) / per;
    char *o = (char *)pd_data_ptr(out[0]);
    PD_PARALLEL_FOR(k, blocks, PD_GRAIN / ROPE_BLOCK + 1, {
      int64_t r0 = k * per, nr = rows - r0 < per ? rows - r0 : per;
      rope_block(f, ptr[0], ptr + 1, o, r0, nr);
    });
  }
  for (int i = 0; i < 3; i++) pd_tensor_release(tmp[i]);
  return st;
}

/* ---- finding the patterns ---------------------------------------------------- */
typedef struct finder {
  pd_pass_ctx *c;
  pd_static_block *b;
  int *readers;  /* per slot */
  int *producer; /* per slot: the op writing it, or -1 */
  bool *drop;
} finder;

static int slot(const finder *w, const char *name) { return pd_pass_slot(w->c, name); }

/* The op producing variable `name` when it is op_id with one output read
 * once (by the pattern) and not persistable, else -1. */
static int made_by(const finder *w, const char *name, int op_id) {
  int s = slot(w, name);
  if (s < 0 || w->readers[s] != 1 || w->b->vars[s]->persistable) return -1;
  int k = w->producer[s];
  if (k < 0 || w->drop[k]) return -1;
  const pd_operator *op = w->b->ops[k];
  return op->op_id == op_id && op->n_out == 1 && !op->fused ? k : -1;
}

static bool last_axis(int64_t ax, int ndim) { return ax == ndim - 1 || ax == -1; }

/* slice(x, [last], [from], [to]) on x of last dim d: its input, else NULL. */
static const char *slice_of(const finder *w, int k, int ndim, int64_t from, int64_t to) {
  const pd_operator *op = w->b->ops[k];
  const pd_attrs *a = &op->attrs;
  if (op->n_in != 1 || a->nv[0] != 1 || a->nv[1] != 1 || a->nv[2] != 1 || !last_axis(a->v[0][0], ndim) ||
      a->v[1][0] != from || a->v[2][0] != to)
    return NULL;
  return op->inputs[0];
}

/* The other input of a two-input op that reads `name`, or NULL. */
static const char *other_input(const pd_operator *op, const char *name) {
  if (op->n_in != 2) return NULL;
  if (strcmp(op->inputs[0], name) == 0) return op->inputs[1];
  if (strcmp(op->inputs[1], name) == 0) return op->inputs[0];
  return NULL;
}

/* Whether table t broadcasts over x along every dim but the last (each of
 * its dims, aligned right, 1 or x's), filling its element strides. */
static bool table_ok(const pd_variable *t, const pd_variable *x, int64_t *stride) {
  if (!t || t->dtype != x->dtype || t->ndim < 1 || t->ndim > x->ndim || !pd_pass_known_shape(t, NULL) ||
      t->shape[t->ndim - 1] != x->shape[x->ndim - 1])
    return false;
  int64_t s = 1;
  for (int dx = x->ndim - 1, dt = t->ndim - 1; dx >= 0; dx--, dt--) {
    int64_t n = dt >= 0 ? t->shape[dt] : 1;
    if (n != 1 && n != x->shape[dx]) return false;
    stride[dx] = n == 1 ? 0 : s;
    s *= n;
  }
  return true;
}

static pd_ew_fn fn_of(const pd_operator *op, pd_dtype dt, double *params) {
  pd_dtype dts[3] = {dt, dt, dt};
  const pd_op_def *def = pd_op_table[op->op_id];
  return def->ew_fn ? def->ew_fn(&op->attrs, dts, params) : NULL;
}

/* x, the shape checks of both patterns: a float tensor of known shape with
 * an even last dim d, 2 <= d <= ROPE_BLOCK. */
static const pd_variable *row_input(const finder *w, const char *name) {
  int s = slot(w, name);
  const pd_variable *x = s >= 0 ? w->b->vars[s] : NULL;
  if (!x || (x->dtype != PD_FLOAT32 && x->dtype != PD_FLOAT64) || x->ndim < 1 ||
      !pd_pass_known_shape(x, NULL))
    return NULL;
  int64_t d = x->shape[x->ndim - 1];
  return d >= 2 && d % 2 == 0 && d <= ROPE_BLOCK ? x : NULL;
}

static pd_status install(finder *w, rope_op *f, const char *const *ins, const char *out, const int *ops,
                         int n_ops) {
  int last = ops[0];
  for (int i = 1; i < n_ops; i++)
    if (ops[i] > last) last = ops[i];
  f->base.run = rope_run;
  f->base.release = rope_release;
  f->base.n_ops = n_ops;
  pd_static_block *b = w->b;
  int role = b->ops[last]->role;
  pd_operator *op =
      pd_ir_append_fused_op(b, f->backward ? "fused_rope_grad" : "fused_rope", ins, 3, &out, 1, &f->base);
  if (!op) return pd_last_status();
  op->role = role;
  pd_pass_replace_op(b, last); /* the fused op takes the last op's place */
  for (int i = 0; i < n_ops; i++)
    if (ops[i] != last) w->drop[ops[i]] = true;
  w->c->stats->rope++;
  return PD_OK;
}

static bool span_ok(const finder *w, const int *ops, int n) {
  int lo = ops[0], hi = ops[0];
  for (int i = 0; i < n; i++) {
    if (w->drop[ops[i]]) return false;
    lo = ops[i] < lo ? ops[i] : lo, hi = ops[i] > hi ? ops[i] : hi;
  }
  return !pd_pass_inplace_between(w->b, lo, hi);
}

/* Forward, anchored at the concat. */
static pd_status try_forward(finder *w, int kc) {
  pd_static_block *b = w->b;
  const pd_operator *cat = b->ops[kc];
  if (cat->n_in != 2 || cat->n_out != 1) return PD_OK;
  int kn = made_by(w, cat->inputs[0], PD_OP_neg), ks1 = made_by(w, cat->inputs[1], PD_OP_slice);
  int ks2 = kn >= 0 ? made_by(w, b->ops[kn]->inputs[0], PD_OP_slice) : -1;
  if (kn < 0 || ks1 < 0 || ks2 < 0) return PD_OK;
  const pd_variable *x = row_input(w, b->ops[ks1]->inputs[0]);
  if (!x || !last_axis(cat->attrs.i[0], x->ndim)) return PD_OK;
  int64_t d = x->shape[x->ndim - 1], h = d / 2;
  const char *x1 = slice_of(w, ks1, x->ndim, 0, h), *x2 = slice_of(w, ks2, x->ndim, h, d);
  if (!x1 || !x2 || strcmp(x1, x->name) != 0 || strcmp(x2, x->name) != 0) return PD_OK;
  /* multiply(rot, sin) -> add(multiply(x, cos), .) */
  int sc = slot(w, cat->outputs[0]);
  if (sc < 0 || w->readers[sc] != 1 || b->vars[sc]->persistable) return PD_OK;
  int km2 = -1, ka = -1, km1 = -1;
  for (int k = kc + 1; k < b->n_ops && km2 < 0; k++)
    if (other_input(b->ops[k], cat->outputs[0])) km2 = k;
  if (km2 < 0 || b->ops[km2]->op_id != PD_OP_multiply || b->ops[km2]->n_out != 1) return PD_OK;
  const char *sin_name = other_input(b->ops[km2], cat->outputs[0]);
  int sm2 = slot(w, b->ops[km2]->outputs[0]);
  if (sm2 < 0 || w->readers[sm2] != 1 || b->vars[sm2]->persistable) return PD_OK;
  for (int k = km2 + 1; k < b->n_ops && ka < 0; k++)
    if (other_input(b->ops[k], b->ops[km2]->outputs[0])) ka = k;
  if (ka < 0 || b->ops[ka]->op_id != PD_OP_add || b->ops[ka]->n_out != 1) return PD_OK;
  km1 = made_by(w, other_input(b->ops[ka], b->ops[km2]->outputs[0]), PD_OP_multiply);
  if (km1 < 0) return PD_OK;
  const char *cos_name = other_input(b->ops[km1], x->name);
  const pd_variable *y = b->vars[slot(w, b->ops[ka]->outputs[0])];
  if (!cos_name || !pd_pass_same_shape(y, x) || y->dtype != x->dtype) return PD_OK;
  int ops[7] = {ks1, ks2, kn, kc, km1, km2, ka};
  if (!span_ok(w, ops, 7)) return PD_OK;
  rope_op *f = calloc(1, sizeof *f);
  if (!f) return pd_set_error(PD_ERR_MEMORY, "Executor: out of memory fusing a rotary embedding");
  int scos = slot(w, cos_name), ssin = slot(w, sin_name);
  f->ndim = x->ndim, f->elsize = (int)pd_dtype_size(x->dtype);
  memcpy(f->shape, x->shape, sizeof(int64_t) * (size_t)x->ndim);
  bool ok = scos >= 0 && ssin >= 0 && table_ok(b->vars[scos], x, f->tab_stride[0]) &&
            table_ok(b->vars[ssin], x, f->tab_stride[1]);
  f->neg_or_scale = fn_of(b->ops[kn], x->dtype, f->ns_p);
  f->mul_a = fn_of(b->ops[km1], x->dtype, f->mul_a_p);
  f->mul_b = fn_of(b->ops[km2], x->dtype, f->mul_b_p);
  f->add1 = fn_of(b->ops[ka], x->dtype, f->add1_p);
  if (!ok || !f->neg_or_scale || !f->mul_a || !f->mul_b || !f->add1) {
    free(f);
    return PD_OK;
  }
  const char *ins[3] = {x->name, cos_name, sin_name};
  return install(w, f, ins, b->ops[ka]->outputs[0], ops, 7);
}

/* slice_grad(t) into x_shape with every step 1, placed at `at` on the last
 * axis and 0 elsewhere. */
static bool padded_at(const pd_operator *op, const pd_variable *g, int64_t at) {
  const pd_attrs *a = &op->attrs;
  if (op->n_in != 1 || a->nv[0] != g->ndim || a->nv[1] != g->ndim || a->nv[2] != g->ndim) return false;
  for (int dim = 0; dim < g->ndim; dim++)
    if (a->v[0][dim] != g->shape[dim] || a->v[2][dim] != 1 || a->v[1][dim] != (dim == g->ndim - 1 ? at : 0))
      return false;
  return true;
}

/* The op reading `name` (read once), from k on, or -1. */
static int reader_of(const finder *w, const char *name, int from) {
  for (int k = from; k < w->b->n_ops; k++) {
    const pd_operator *op = w->b->ops[k];
    for (int i = 0; i < op->n_in; i++)
      if (strcmp(op->inputs[i], name) == 0) return w->drop[k] ? -1 : k;
  }
  return -1;
}

/* Backward, anchored at a = multiply(g, ca) read by the two half slices. */
static pd_status try_backward(finder *w, int kma) {
  pd_static_block *b = w->b;
  const pd_operator *ma = b->ops[kma];
  if (ma->n_in != 2 || ma->n_out != 1) return PD_OK;
  int sa = slot(w, ma->outputs[0]);
  if (sa < 0 || w->readers[sa] != 2 || b->vars[sa]->persistable) return PD_OK;
  const pd_variable *av = b->vars[sa];
  if (!row_input(w, av->name)) return PD_OK;
  int64_t d = av->shape[av->ndim - 1], h = d / 2;
  int k1 = reader_of(w, av->name, kma + 1), k2 = k1 >= 0 ? reader_of(w, av->name, k1 + 1) : -1;
  if (k1 < 0 || k2 < 0 || b->ops[k1]->op_id != PD_OP_slice || b->ops[k2]->op_id != PD_OP_slice) return PD_OK;
  int klo = slice_of(w, k1, av->ndim, 0, h) ? k1 : k2, khi = klo == k1 ? k2 : k1;
  if (!slice_of(w, klo, av->ndim, 0, h) || !slice_of(w, khi, av->ndim, h, d)) return PD_OK;
  /* scale(lo, -1) -> slice_grad at h; hi -> slice_grad at 0 */
  int slo = slot(w, b->ops[klo]->outputs[0]), shi = slot(w, b->ops[khi]->outputs[0]);
  if (slo < 0 || shi < 0 || w->readers[slo] != 1 || w->readers[shi] != 1) return PD_OK;
  int ksc = reader_of(w, b->ops[klo]->outputs[0], klo + 1);
  if (ksc < 0 || b->ops[ksc]->op_id != PD_OP_scale || b->ops[ksc]->n_out != 1) return PD_OK;
  int ssc = slot(w, b->ops[ksc]->outputs[0]);
  if (ssc < 0 || w->readers[ssc] != 1) return PD_OK;
  int kp1 = reader_of(w, b->ops[ksc]->outputs[0], ksc + 1),
      kp2 = reader_of(w, b->ops[khi]->outputs[0], khi + 1);
  if (kp1 < 0 || kp2 < 0 || b->ops[kp1]->op_id != PD_OP_slice_grad ||
      b->ops[kp2]->op_id != PD_OP_slice_grad || !padded_at(b->ops[kp1], av, h) ||
      !padded_at(b->ops[kp2], av, 0))
    return PD_OK;
  /* g and the other multiply, b = multiply(g, cb), both summed by two adds */
  const char *g = NULL, *ca = NULL;
  for (int i = 0; i < 2 && !g; i++) {
    int s = slot(w, ma->inputs[i]);
    if (s >= 0 && pd_pass_same_shape(b->vars[s], av)) g = ma->inputs[i], ca = ma->inputs[1 - i];
  }
  if (!g) return PD_OK;
  const char *terms[3] = {NULL, b->ops[kp1]->outputs[0], b->ops[kp2]->outputs[0]};
  int kadd1 = -1, kadd2 = -1, kmb = -1, in_first[3] = {-1, -1, -1};
  for (int t = 1; t < 3; t++) { /* the padded terms: read once, by an add */
    int s = slot(w, terms[t]), k = reader_of(w, terms[t], 0);
    if (s < 0 || w->readers[s] != 1 || k < 0 || b->ops[k]->op_id != PD_OP_add) return PD_OK;
  }
  int r1 = reader_of(w, terms[1], 0), r2 = reader_of(w, terms[2], 0);
  kadd1 = r1 < r2 ? r1 : r2, kadd2 = r1 < r2 ? r2 : r1;
  if (kadd1 == kadd2) { /* both padded terms in the first add; the second adds b */
    int s = slot(w, b->ops[kadd1]->outputs[0]);
    kadd2 = s >= 0 && w->readers[s] == 1 ? reader_of(w, b->ops[kadd1]->outputs[0], kadd1 + 1) : -1;
    if (kadd2 < 0) return PD_OK;
    terms[0] = other_input(b->ops[kadd2], b->ops[kadd1]->outputs[0]);
  } else { /* b and one padded term first */
    const char *first = r1 < r2 ? terms[1] : terms[2];
    terms[0] = other_input(b->ops[kadd1], first);
  }
  if (!terms[0] || b->ops[kadd2]->op_id != PD_OP_add || b->ops[kadd2]->n_out != 1 ||
      b->ops[kadd1]->n_out != 1 || !other_input(b->ops[kadd2], b->ops[kadd1]->outputs[0]))
    return PD_OK;
  int sad1 = slot(w, b->ops[kadd1]->outputs[0]);
  if (sad1 < 0 || w->readers[sad1] != 1) return PD_OK;
  kmb = made_by(w, terms[0], PD_OP_multiply);
  const char *cb = kmb >= 0 ? other_input(b->ops[kmb], g) : NULL;
  if (!cb) return PD_OK;
  /* the order of the sums: the first add's operands, then the second's */
  const pd_operator *add1 = b->ops[kadd1];
  for (int i = 0; i < 2; i++)
    for (int t = 0; t < 3; t++)
      if (strcmp(add1->inputs[i], terms[t]) == 0) in_first[i] = t;
  if (in_first[0] < 0 || in_first[1] < 0) return PD_OK;
  const pd_variable *dx = b->vars[slot(w, b->ops[kadd2]->outputs[0])];
  if (!pd_pass_same_shape(dx, av) || dx->dtype != av->dtype) return PD_OK;
  int ops[9] = {kma, kmb, klo, khi, ksc, kp1, kp2, kadd1, kadd2};
  if (!span_ok(w, ops, 9)) return PD_OK;
  rope_op *f = calloc(1, sizeof *f);
  if (!f) return pd_set_error(PD_ERR_MEMORY, "Executor: out of memory fusing a rotary embedding");
  f->backward = true;
  f->u = in_first[0], f->v = in_first[1], f->w = 3 - in_first[0] - in_first[1];
  f->ndim = av->ndim, f->elsize = (int)pd_dtype_size(av->dtype);
  memcpy(f->shape, av->shape, sizeof(int64_t) * (size_t)av->ndim);
  int sca = slot(w, ca), scb = slot(w, cb);
  bool ok = sca >= 0 && scb >= 0 && table_ok(b->vars[sca], av, f->tab_stride[0]) &&
            table_ok(b->vars[scb], av, f->tab_stride[1]);
  f->mul_a = fn_of(ma, av->dtype, f->mul_a_p);
  f->mul_b = fn_of(b->ops[kmb], av->dtype, f->mul_b_p);
  f->neg_or_scale = fn_of(b->ops[ksc], av->dtype, f->ns_p);
  f->add1 = fn_of(add1, av->dtype, f->add1_p);
  f->add2 = fn_of(b->ops[kadd2], av->dtype, f->add2_p);
  if (!ok || !f->mul_a || !f->mul_b || !f->neg_or_scale || !f->add1 || !f->add2) {
    free(f);
    return PD_OK;
  }
  const char *ins[3] = {g, ca, cb};
  return install(w, f, ins, dx->name, ops, 9);
}

pd_status pd_pass_fuse_rope(pd_pass_ctx *c) {
  pd_static_block *b = c->b;
  int no = b->n_ops;
  finder w = {.c = c, .b = b};
  w.readers = pd_pass_count_readers(c);
  w.producer = pd_pass_producers(c);
  w.drop = calloc((size_t)no + 1, sizeof(bool));
  pd_status st = w.readers && w.producer && w.drop
                     ? PD_OK
                     : pd_set_error(PD_ERR_MEMORY, "Executor: out of memory fusing rotary embeddings");
  for (int k = 0; st == PD_OK && k < no; k++) {
    const pd_operator *op = b->ops[k];
    if (w.drop[k] || op->fused) continue;
    if (op->op_id == PD_OP_concat)
      st = try_forward(&w, k);
    else if (op->op_id == PD_OP_multiply)
      st = try_backward(&w, k);
  }
  if (st == PD_OK) pd_pass_drop_ops(b, w.drop);
  free(w.readers), free(w.producer), free(w.drop);
  return st;
}
