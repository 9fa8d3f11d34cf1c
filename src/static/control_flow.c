/* paddle.static.nn.cond and while_loop.
 *
 * cond and case record every branch into the current block and select
 * each output with where ops: the registry's where backward sends the
 * gradient into the branch taken only.
 *
 * while_loop records cond and body once into a sub-block on placeholder
 * Variables "<key>.in_<i>"; the cond result is assigned to "<key>.cond"
 * and the body results to "<key>.next_<i>". The while op of the enclosing
 * block (attrs: i[0] the sub-block, i[1] the loop variable count, i[2] the
 * number of cond ops at the head of the sub-block, s the key) takes the
 * initial values, then every Variable of enclosing blocks the sub-block
 * reads (captures), and writes the final values. Its grad op while_grad
 * runs the loop again with the eager tape on, which keeps every
 * iteration's values, and differentiates it (Paddle's while_grad walks the
 * saved step scopes the same way). */
#include <stdlib.h>
#include <string.h>

#include "../core/tensor_impl.h"
#include "paddlec/autograd.h"
#include "paddlec/creation.h"
#include "paddlec/manipulation.h"
#include "paddlec/math.h"
#include "paddlec/static_control.h"
#include "static_internal.h"

bool pd_static_is_control_type(const char *type) {
  return type && (strcmp(type, PD_STATIC_WHILE) == 0 || strcmp(type, PD_STATIC_WHILE_GRAD) == 0);
}

static pd_program *recording_program(const char *fn) {
  pd_program *p = pd_static_current_main();
  if (!p) pd_set_error(PD_ERR_STATE, "%s: call it under program_guard or in static mode", fn);
  return p;
}

/* A bool tensor holding one element (dims of 1, or a 0-d tensor). */
static pd_status check_bool_scalar(const pd_tensor *t, const char *fn, const char *what) {
  if (!t)
    return pd_last_status() != PD_OK ? pd_last_status()
                                     : pd_set_error(PD_ERR_INVALID, "%s: %s is NULL", fn, what);
  bool one = true;
  for (int d = 0; d < t->ndim; d++) one &= t->shape[d] == 1;
  if (t->dtype != PD_BOOL || !one)
    return pd_set_error(PD_ERR_INVALID, "%s: %s must be a bool scalar (shape [] or [1]), got %s of shape %s",
                        fn, what, pd_dtype_name(t->dtype), PD_SHAPE_STR(t));
  return PD_OK;
}

static bool same_shape(int na, const int64_t *a, int nb, const int64_t *b) {
  if (na != nb) return false;
  for (int d = 0; d < na; d++)
    if (a[d] != b[d]) return false;
  return true;
}

/* ---- cond and case ---------------------------------------------------------- */
/* Records every branch (fns[n_preds] is the fallback), checks that their
 * outputs agree and selects them: the first branch whose pred is true,
 * else the fallback, as a chain of where ops built from the last pred.
 * labels name the branches in errors. */
static int select_branches(const char *fn, pd_tensor *const *preds, int n_preds,
                           const pd_static_branch_fn *fns, const char *const *labels, void *user,
                           pd_tensor **out, int cap) {
  if (!recording_program(fn)) return pd_last_status();
  if (!out || cap < 0 || n_preds < 1 || (n_preds && !preds))
    return pd_set_error(PD_ERR_INVALID, "%s: %d preds at %p, out %p (cap %d)", fn, n_preds, (void *)preds,
                        (void *)out, cap);
  pd_status st = PD_OK;
  for (int b = 0; b <= n_preds && st == PD_OK; b++)
    if (!fns[b]) st = pd_set_error(PD_ERR_INVALID, "%s: %s is NULL", fn, labels[b]);
  for (int b = 0; b < n_preds && st == PD_OK; b++) {
    char what[32];
    snprintf(what, sizeof what, n_preds == 1 ? "pred" : "pred %d", b);
    st = check_bool_scalar(preds[b], fn, what);
  }
  if (st != PD_OK) return st;
  int nb = n_preds + 1, lim = cap < PD_MAX_OUTPUTS ? cap : PD_MAX_OUTPUTS;
  pd_tensor **o = calloc((size_t)nb * PD_MAX_OUTPUTS, sizeof *o); /* branch b's outputs at o[b * MAX] */
  int *cnt = calloc((size_t)nb, sizeof *cnt);
  if (!o || !cnt) st = pd_set_error(PD_ERR_MEMORY, "%s: out of memory", fn);
  for (int b = 0; b < nb && st == PD_OK; b++) {
    cnt[b] = fns[b](user, o + (size_t)b * PD_MAX_OUTPUTS, lim);
    if (cnt[b] < 0) {
      st =
          pd_last_status() != PD_OK ? pd_last_status() : pd_set_error(PD_ERR_INVALID, "%s failed", labels[b]);
      pd_error_prefix("%s: %s", fn, labels[b]);
    } else if (cnt[b] > lim) {
      st = pd_set_error(PD_ERR_INVALID, "%s: %s returned %d outputs, more than cap %d", fn, labels[b], cnt[b],
                        lim);
    } else if (cnt[b] != cnt[0]) {
      st = pd_set_error(PD_ERR_INVALID, "%s: %s returns %d outputs, %s %d", fn, labels[0], cnt[0], labels[b],
                        cnt[b]);
    }
  }
  int n = st == PD_OK ? cnt[0] : 0;
  for (int b = 1; b < nb && st == PD_OK; b++)
    for (int i = 0; i < n && st == PD_OK; i++) {
      pd_tensor *t = o[i], *f = o[(size_t)b * PD_MAX_OUTPUTS + i];
      if (!t || !f)
        st = pd_set_error(PD_ERR_INVALID, "%s: output %d of %s is NULL", fn, i, t ? labels[b] : labels[0]);
      else if (t->dtype != f->dtype)
        st = pd_set_error(PD_ERR_INVALID, "%s: output %d is %s in %s, %s in %s", fn, i,
                          pd_dtype_name(t->dtype), labels[0], pd_dtype_name(f->dtype), labels[b]);
      else if (!same_shape(t->ndim, t->shape, f->ndim, f->shape))
        st = pd_set_error(PD_ERR_INVALID, "%s: output %d has shape %s in %s, %s in %s", fn, i,
                          PD_SHAPE_STR(t), labels[0], PD_SHAPE_STR(f), labels[b]);
    }
  for (int i = 0; i < n && st == PD_OK; i++) {
    pd_tensor *acc = pd_tensor_retain(o[(size_t)n_preds * PD_MAX_OUTPUTS + i]);
    for (int b = n_preds - 1; b >= 0 && acc; b--) {
      pd_tensor *sel = pd_where(preds[b], o[(size_t)b * PD_MAX_OUTPUTS + i], acc);
      pd_tensor_release(acc);
      acc = sel;
    }
    out[i] = acc;
    if (!acc) {
      st = pd_last_status();
      pd_error_prefix("%s: output %d", fn, i);
      for (int j = 0; j < i; j++) pd_tensor_release(out[j]);
    }
  }
  for (size_t k = 0; o && k < (size_t)nb * PD_MAX_OUTPUTS; k++) pd_tensor_release(o[k]);
  free(o);
  free(cnt);
  return st == PD_OK ? n : st;
}

int pd_static_nn_cond(pd_tensor *pred, pd_static_branch_fn true_fn, pd_static_branch_fn false_fn, void *user,
                      pd_tensor **out, int cap) {
  const pd_static_branch_fn fns[2] = {true_fn, false_fn};
  const char *const labels[2] = {"true_fn", "false_fn"};
  return select_branches("cond", &pred, 1, fns, labels, user, out, cap);
}

int pd_static_nn_case(pd_tensor *const *preds, const pd_static_branch_fn *fns, int n_pairs,
                      pd_static_branch_fn default_fn, void *user, pd_tensor **out, int cap) {
  if (n_pairs < 1 || n_pairs > PD_MAX_OUTPUTS || !preds || !fns)
    return pd_set_error(PD_ERR_INVALID, "case: %d (pred, fn) pairs at %p, %p (1 to %d)", n_pairs,
                        (void *)preds, (void *)fns, PD_MAX_OUTPUTS);
  if (!recording_program("case")) return pd_last_status();
  for (int b = 0; b < n_pairs; b++) { /* every pred, the default's too (Paddle checks them all) */
    char what[32];
    snprintf(what, sizeof what, "pred %d", b);
    pd_status st = check_bool_scalar(preds[b], "case", what);
    if (st != PD_OK) return st;
  }
  /* without a default, the last pair's fn is it (Paddle's rule) */
  int np = default_fn ? n_pairs : n_pairs - 1;
  if (np < 1) { /* one pair and no default: its fn runs whatever pred says */
    const pd_static_branch_fn one[2] = {fns[0], fns[0]};
    const char *const labels[2] = {"fn 0", "fn 0"};
    return select_branches("case", preds, 1, one, labels, user, out, cap);
  }
  pd_static_branch_fn all[PD_MAX_OUTPUTS + 1];
  char names[PD_MAX_OUTPUTS + 1][16];
  const char *labels[PD_MAX_OUTPUTS + 1];
  for (int b = 0; b < np; b++) {
    all[b] = fns[b];
    snprintf(names[b], sizeof names[b], "fn %d", b);
    labels[b] = names[b];
  }
  all[np] = default_fn ? default_fn : fns[np];
  snprintf(names[np], sizeof names[np], default_fn ? "default" : "fn %d", np);
  labels[np] = names[np];
  return select_branches("case", preds, np, all, labels, user, out, cap);
}

pd_tensor *pd_increment(pd_tensor *x, double value) {
  if (!x) {
    pd_set_error(PD_ERR_INVALID, "increment: x is NULL");
    return NULL;
  }
  int64_t numel = 1;
  for (int d = 0; d < x->ndim; d++) numel *= x->shape[d];
  if (numel != 1) {
    pd_set_error(PD_ERR_INVALID, "increment: x must hold one element, got shape %s", PD_SHAPE_STR(x));
    return NULL;
  }
  return pd_scale(x, 1.0, value, true);
}

/* ---- while_loop: recording ------------------------------------------------- */
static pd_status rename_result(pd_static_block *sub, pd_tensor *t, const char *to) {
  pd_variable *v = pd_ir_var_of(sub->program, t);
  if (!v || !pd_ir_find_var(sub, v->name))
    return pd_set_error(PD_ERR_STATE, "while_loop: '%s' was not recorded in the loop block", to);
  return pd_ir_rename_var(sub, v->name, to);
}

static bool has_name(char **names, int n, const char *s) {
  for (int i = 0; i < n; i++)
    if (strcmp(names[i], s) == 0) return true;
  return false;
}

/* Records cond and body into sub; result names per the file comment. */
static pd_status record_loop(pd_static_block *sub, const char *key, pd_static_loop_cond_fn cond,
                             pd_static_loop_body_fn body, void *user, pd_tensor *const *ph, int n,
                             int *n_cond) {
  char name[160];
  pd_tensor *c = cond(user, ph, n);
  pd_status st = check_bool_scalar(c, "while_loop", "the value cond returns");
  pd_tensor *a = st == PD_OK ? pd_assign(c) : NULL;
  pd_tensor_release(c);
  if (st == PD_OK && !a) st = pd_last_status();
  snprintf(name, sizeof name, "%s.cond", key);
  if (st == PD_OK) st = rename_result(sub, a, name);
  pd_tensor_release(a);
  if (st != PD_OK) return st;
  *n_cond = sub->n_ops;
  pd_tensor *next[PD_MAX_OUTPUTS] = {0};
  st = body(user, ph, n, next);
  if (st != PD_OK && pd_last_status() == PD_OK) st = pd_set_error(PD_ERR_INVALID, "while_loop: body failed");
  if (st != PD_OK) pd_error_prefix("while_loop: body");
  for (int i = 0; i < n && st == PD_OK; i++) {
    if (!next[i])
      st = pd_set_error(PD_ERR_INVALID, "while_loop: body returned NULL for loop variable %d", i);
    else if (next[i]->dtype != ph[i]->dtype)
      st = pd_set_error(PD_ERR_INVALID, "while_loop: body turns loop variable %d from %s into %s", i,
                        pd_dtype_name(ph[i]->dtype), pd_dtype_name(next[i]->dtype));
    else if (!same_shape(next[i]->ndim, next[i]->shape, ph[i]->ndim, ph[i]->shape))
      st = pd_set_error(PD_ERR_INVALID, "while_loop: body turns loop variable %d of shape %s into shape %s",
                        i, PD_SHAPE_STR(ph[i]), PD_SHAPE_STR(next[i]));
  }
  for (int i = 0; i < n && st == PD_OK; i++) {
    pd_tensor *r = pd_assign(next[i]);
    snprintf(name, sizeof name, "%s.next_%d", key, i);
    st = r ? rename_result(sub, r, name) : pd_last_status();
    pd_tensor_release(r);
  }
  for (int i = 0; i < n; i++) pd_tensor_release(next[i]);
  return st;
}

pd_status pd_static_nn_while_loop(pd_static_loop_cond_fn cond, pd_static_loop_body_fn body, void *user,
                                  pd_tensor *const *loop_vars, int n, pd_tensor **out) {
  pd_program *p = recording_program("while_loop");
  if (!p) return pd_last_status();
  if (!cond || !body || !loop_vars || !out || n < 1 || n > PD_MAX_OUTPUTS / 2)
    return pd_set_error(PD_ERR_INVALID,
                        "while_loop: cond %p, body %p, %d loop variables at %p (1 to %d), out %p",
                        (void *)(uintptr_t)cond, (void *)(uintptr_t)body, n, (void *)loop_vars,
                        PD_MAX_OUTPUTS / 2, (void *)out);
  int parent = p->current_block;
  pd_static_block *pb = p->blocks[parent];
  const char *init[PD_MAX_OUTPUTS];
  bool stop = true;
  for (int i = 0; i < n; i++) {
    pd_variable *v = loop_vars[i] ? pd_static_var_for(p, loop_vars[i]) : NULL;
    if (!v) {
      if (pd_last_status() == PD_OK) pd_set_error(PD_ERR_INVALID, "while_loop: loop variable %d is NULL", i);
      pd_error_prefix("while_loop: loop variable %d", i);
      return pd_last_status();
    }
    init[i] = v->name;
    stop &= v->stop_gradient;
  }
  char key[64], name[160]; /* the key fits the op's string attribute */
  pd_static_unique_name(PD_STATIC_WHILE, key, sizeof key);
  pd_static_block *sub = pd_ir_add_block(p, parent);
  if (!sub) return pd_last_status();
  pd_tensor *ph[PD_MAX_OUTPUTS];
  for (int i = 0; i < n; i++) {
    snprintf(name, sizeof name, "%s.in_%d", key, i);
    pd_variable *v =
        pd_ir_add_var(sub, name, loop_vars[i]->dtype, loop_vars[i]->ndim, loop_vars[i]->shape, NULL);
    if (!v) return pd_last_status();
    v->stop_gradient = pd_ir_var_of(p, loop_vars[i])->stop_gradient;
    v->tensor->stop_gradient = v->stop_gradient;
    ph[i] = v->tensor;
  }
  int n_cond = 0;
  p->current_block = sub->idx;
  pd_status st = record_loop(sub, key, cond, body, user, ph, n, &n_cond);
  p->current_block = parent;
  /* captures: what the sub-block reads and does not define */
  char *caps[PD_MAX_OUTPUTS];
  int m = 0;
  for (int k = 0; k < sub->n_ops && st == PD_OK; k++)
    for (int j = 0; j < sub->ops[k]->n_in && st == PD_OK; j++) {
      const char *nm = sub->ops[k]->inputs[j];
      if (pd_ir_find_var(sub, nm) || has_name(caps, m, nm)) continue;
      pd_variable *cv = pd_ir_find_var_recursive(pb, nm);
      if (!cv)
        st =
            pd_set_error(PD_ERR_STATE, "while_loop: the loop reads '%s', which no enclosing block holds", nm);
      else if (n + m + 1 > PD_MAX_OUTPUTS)
        st = pd_set_error(PD_ERR_INVALID, "while_loop: the loop reads more than %d outer Variables",
                          PD_MAX_OUTPUTS - n);
      else {
        caps[m++] = cv->name;
        stop &= cv->stop_gradient;
      }
    }
  const char *ins[PD_MAX_OUTPUTS];
  char outn[PD_MAX_OUTPUTS][160];
  const char *outs[PD_MAX_OUTPUTS];
  pd_variable *ov[PD_MAX_OUTPUTS];
  for (int i = 0; i < n; i++) ins[i] = init[i];
  for (int j = 0; j < m; j++) ins[n + j] = caps[j];
  for (int i = 0; i < n && st == PD_OK; i++) {
    snprintf(outn[i], sizeof outn[i], "%s.tmp_%d", key, i);
    outs[i] = outn[i];
    ov[i] = pd_ir_add_var(pb, outn[i], loop_vars[i]->dtype, loop_vars[i]->ndim, loop_vars[i]->shape, NULL);
    if (!ov[i])
      st = pd_last_status();
    else
      ov[i]->stop_gradient = stop || !pd_dtype_is_floating(loop_vars[i]->dtype);
  }
  if (st == PD_OK) {
    pd_attrs a = {.i = {sub->idx, n, n_cond}};
    memcpy(a.s, key, sizeof a.s);
    pd_operator *op = pd_ir_append_op(pb, PD_STATIC_WHILE, ins, n + m, outs, n, &a);
    if (!op) st = pd_last_status();
  }
  if (st != PD_OK) return st;
  for (int i = 0; i < n; i++) {
    out[i] = pd_tensor_retain(ov[i]->tensor);
    out[i]->stop_gradient = ov[i]->stop_gradient;
  }
  pd_ir_touch(p);
  return PD_OK;
}

pd_operator *pd_static_append_control_grad(pd_static_block *b, const pd_operator *op, const char *const *ins,
                                           const char *const *outs) {
  pd_operator *g =
      pd_ir_append_op(b, PD_STATIC_WHILE_GRAD, ins, op->n_in + 2 * op->n_out, outs, op->n_in, &op->attrs);
  if (!g) return NULL;
  g->fwd_n_in = op->n_in;
  g->fwd_n_out = op->n_out;
  g->role = PD_OP_ROLE_BACKWARD;
  return g;
}

/* ---- while_loop: running ------------------------------------------------------ */
/* One run of a loop's sub-block: env[i] holds the value of sub-block
 * variable i; captures come from the while op's inputs. */
typedef struct loop_run {
  const pd_program *p;
  const pd_operator *op;
  const pd_static_block *sub;
  pd_tensor **env;
  pd_tensor *const *caps; /* values of op->inputs[n ..] */
  int n, n_caps;
} loop_run;

static int var_index(const pd_static_block *b, const char *name) {
  for (int i = 0; i < b->n_vars; i++)
    if (strcmp(b->vars[i]->name, name) == 0) return i;
  return -1;
}

static pd_tensor *value_of(const loop_run *r, const char *name) {
  int s = var_index(r->sub, name);
  if (s >= 0) {
    if (!r->env[s])
      pd_set_error(PD_ERR_STATE, "while: '%s' is read before any op of the loop writes it", name);
    return r->env[s];
  }
  for (int j = 0; j < r->n_caps; j++)
    if (strcmp(r->op->inputs[r->n + j], name) == 0) return r->caps[j];
  pd_set_error(PD_ERR_STATE, "while: '%s' is neither a loop Variable nor captured", name);
  return NULL;
}

static pd_status set_value(loop_run *r, const char *name, pd_tensor *t) {
  int s = var_index(r->sub, name);
  if (s < 0) {
    pd_tensor_release(t);
    return pd_set_error(PD_ERR_STATE, "while: an op writes '%s', which the loop block lacks", name);
  }
  pd_tensor_release(r->env[s]);
  r->env[s] = t;
  return PD_OK;
}

/* Runs ops [from, to) of the sub-block. */
static pd_status run_ops(loop_run *r, int from, int to) {
  for (int k = from; k < to; k++) {
    const pd_operator *op = r->sub->ops[k];
    if (op->n_in > 3 * PD_MAX_OUTPUTS || op->n_out > PD_MAX_OUTPUTS)
      return pd_set_error(PD_ERR_INVALID, "while: op %s has %d inputs", op->type, op->n_in);
    pd_tensor *in[3 * PD_MAX_OUTPUTS], *out[PD_MAX_OUTPUTS] = {0};
    for (int i = 0; i < op->n_in; i++)
      if (!(in[i] = value_of(r, op->inputs[i]))) return pd_last_status();
    int n = 0;
    pd_status st;
    if (op->op_id < 0 && op->value) {
      st = (out[0] = pd_assign(op->value)) ? PD_OK : pd_last_status();
      n = 1;
    } else if (op->op_id < 0) { /* a nested loop */
      bool want[PD_MAX_OUTPUTS];
      for (int j = 0; j < op->n_out; j++) want[j] = true;
      st = pd_static_run_control(r->p, op, in, want, out);
      n = op->n_out;
    } else {
      st = pd_dispatch((pd_op_id)op->op_id, in, op->n_in, &op->attrs, out, &n);
      if (st == PD_OK && n != op->n_out)
        st = pd_set_error(PD_ERR_STATE, "while: op %s produced %d outputs, the program records %d", op->type,
                          n, op->n_out);
    }
    for (int j = 0; j < n; j++) {
      if (st != PD_OK) {
        pd_tensor_release(out[j]);
        continue;
      }
      st = set_value(r, op->outputs[j], out[j]);
    }
    if (st != PD_OK) {
      pd_error_prefix("while: %s", op->type);
      return st;
    }
  }
  return PD_OK;
}

/* Runs the loop from init, writing the final values (new references). */
static pd_status run_loop(const pd_program *p, const pd_operator *op, pd_tensor *const *init,
                          pd_tensor *const *caps, pd_tensor **final) {
  int bi = (int)op->attrs.i[0], n = (int)op->attrs.i[1], n_cond = (int)op->attrs.i[2];
  if (bi <= 0 || bi >= p->n_blocks || n < 1 || n > op->n_in || n_cond < 0 || n_cond > p->blocks[bi]->n_ops)
    return pd_set_error(PD_ERR_INVALID, "while: sub-block %d, %d loop variables, %d cond ops: not a loop", bi,
                        n, n_cond);
  const pd_static_block *sub = p->blocks[bi];
  const char *key = op->attrs.s;
  loop_run r = {.p = p, .op = op, .sub = sub, .caps = caps, .n = n, .n_caps = op->n_in - n};
  int in_idx[PD_MAX_OUTPUTS], next_idx[PD_MAX_OUTPUTS], cond_idx;
  char name[160];
  snprintf(name, sizeof name, "%s.cond", key);
  cond_idx = var_index(sub, name);
  pd_status st = cond_idx >= 0 ? PD_OK : pd_set_error(PD_ERR_INVALID, "while: block %d lacks '%s'", bi, name);
  for (int i = 0; i < n && st == PD_OK; i++) {
    snprintf(name, sizeof name, "%s.in_%d", key, i);
    in_idx[i] = var_index(sub, name);
    snprintf(name, sizeof name, "%s.next_%d", key, i);
    next_idx[i] = var_index(sub, name);
    if (in_idx[i] < 0 || next_idx[i] < 0)
      st = pd_set_error(PD_ERR_INVALID, "while: block %d lacks loop variable %d ('%s')", bi, i, name);
  }
  if (st != PD_OK) return st;
  if (!(r.env = calloc((size_t)sub->n_vars + 1, sizeof *r.env)))
    return pd_set_error(PD_ERR_MEMORY, "while: out of memory");
  for (int i = 0; i < n; i++) r.env[in_idx[i]] = pd_tensor_retain(init[i]);
  for (;;) {
    if ((st = run_ops(&r, 0, n_cond)) != PD_OK) break;
    pd_tensor *c = r.env[cond_idx];
    if ((st = check_bool_scalar(c, "while", "the loop condition")) != PD_OK) break;
    if (pd_tensor_item(c) == 0.0) break;
    if ((st = run_ops(&r, n_cond, sub->n_ops)) != PD_OK) break;
    pd_tensor *next[PD_MAX_OUTPUTS];
    for (int i = 0; i < n; i++) next[i] = pd_tensor_retain(r.env[next_idx[i]]);
    for (int i = 0; i < sub->n_vars; i++) {
      pd_tensor_release(r.env[i]);
      r.env[i] = NULL;
    }
    for (int i = 0; i < n; i++) r.env[in_idx[i]] = next[i];
  }
  for (int i = 0; i < n; i++) final[i] = st == PD_OK ? pd_tensor_retain(r.env[in_idx[i]]) : NULL;
  for (int i = 0; i < sub->n_vars; i++) pd_tensor_release(r.env[i]);
  free(r.env);
  return st;
}

/* while_grad: inputs [init (n), captures (m), outputs (n), output grads
 * (n)], outputs one gradient per init and capture. */
static pd_status run_while_grad(const pd_program *p, const pd_operator *op, pd_tensor *const *in,
                                const bool *want, pd_tensor **out) {
  int fi = op->fwd_n_in, fo = op->fwd_n_out, n = (int)op->attrs.i[1];
  if (fo != n || fi < n || op->n_in != fi + 2 * fo || op->n_out != fi)
    return pd_set_error(PD_ERR_INVALID, "while_grad: %d inputs, %d outputs for a loop of %d variables",
                        op->n_in, op->n_out, n);
  pd_tensor *leaf[PD_MAX_OUTPUTS] = {0}, *res[PD_MAX_OUTPUTS] = {0}, *gout[PD_MAX_OUTPUTS] = {0};
  pd_tensor *ys[PD_MAX_OUTPUTS], *gys[PD_MAX_OUTPUTS], *xs[PD_MAX_OUTPUTS], *gx[PD_MAX_OUTPUTS] = {0};
  int xi[PD_MAX_OUTPUTS], nx = 0, ny = 0;
  pd_status st = PD_OK;
  for (int j = 0; j < fi && st == PD_OK; j++) {
    if (!(leaf[j] = pd_detach(in[j]))) {
      st = pd_last_status();
      break;
    }
    if (want[j] && pd_dtype_is_floating(in[j]->dtype)) {
      pd_tensor_set_stop_gradient(leaf[j], false);
      xi[nx] = j;
      xs[nx++] = leaf[j];
    }
  }
  bool prev = pd_set_grad_enabled(true);
  if (st == PD_OK && nx > 0) st = run_loop(p, op, leaf, leaf + n, res);
  for (int i = 0; i < n && st == PD_OK && nx > 0; i++) {
    if (res[i]->stop_gradient || !pd_dtype_is_floating(res[i]->dtype)) continue;
    pd_tensor *g = in[fi + fo + i];
    gout[i] = g ? pd_tensor_retain(g) : pd_zeros(res[i]->ndim, res[i]->shape, res[i]->dtype);
    if (!gout[i]) st = pd_last_status();
    ys[ny] = res[i];
    gys[ny++] = gout[i];
  }
  if (st == PD_OK && ny > 0) {
    pd_grad_opts o = {.allow_unused = true};
    st = pd_grad(ys, ny, xs, nx, gys, &o, gx);
  }
  pd_set_grad_enabled(prev);
  for (int k = 0; k < nx && st == PD_OK; k++) {
    int j = xi[k];
    if (gx[k]) {
      out[j] = pd_detach(gx[k]);
    } else {
      out[j] = pd_zeros(in[j]->ndim, in[j]->shape, in[j]->dtype);
    }
    if (!out[j]) st = pd_last_status();
  }
  for (int j = 0; j < fi && st == PD_OK; j++)
    if (want[j] && !out[j] && !(out[j] = pd_zeros(in[j]->ndim, in[j]->shape, in[j]->dtype)))
      st = pd_last_status();
  for (int k = 0; k < PD_MAX_OUTPUTS; k++) {
    pd_tensor_release(leaf[k]);
    pd_tensor_release(res[k]);
    pd_tensor_release(gout[k]);
    pd_tensor_release(gx[k]);
  }
  return st;
}

pd_status pd_static_run_control(const pd_program *p, const pd_operator *op, pd_tensor *const *in,
                                const bool *want, pd_tensor **out) {
  if (strcmp(op->type, PD_STATIC_WHILE_GRAD) == 0) return run_while_grad(p, op, in, want, out);
  if (strcmp(op->type, PD_STATIC_WHILE) != 0)
    return pd_set_error(PD_ERR_INVALID, "Executor: '%s' is no control-flow op", op->type);
  int n = (int)op->attrs.i[1];
  if (n < 1 || n > op->n_in || n != op->n_out)
    return pd_set_error(PD_ERR_INVALID, "while: %d loop variables, %d inputs, %d outputs", n, op->n_in,
                        op->n_out);
  for (int i = 0; i < op->n_in; i++)
    if (!in[i]) return pd_set_error(PD_ERR_INVALID, "while: input '%s' has no value", op->inputs[i]);
  pd_tensor *final[PD_MAX_OUTPUTS];
  pd_status st = run_loop(p, op, in, in + n, final);
  if (st != PD_OK) return st;
  for (int i = 0; i < n; i++) {
    if (want[i])
      out[i] = final[i];
    else
      pd_tensor_release(final[i]);
  }
  return PD_OK;
}
