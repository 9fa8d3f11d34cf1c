/* paddle.static.nn.cond, case and while_loop: recording (control_run.c
 * runs them).
 *
 * cond records each branch into its own sub-block of the current block,
 * naming the branch results "<key>.true_<i>" and "<key>.false_<i>", and
 * appends a conditional_block op (attrs: i[0] the true block, i[1] the
 * false block, i[2] the output count, s the key) that takes pred and
 * every Variable of enclosing blocks the branches read (captures), and
 * writes the outputs. Running it runs the branch pred picks, and only
 * that one; its grad op reruns that branch and differentiates it, so the
 * gradient reaches the branch taken only. case is a chain of conds.
 *
 * while_loop records cond and body once into a sub-block on placeholder
 * Variables "<key>.in_<i>"; the cond result is assigned to "<key>.cond"
 * and the body results to "<key>.next_<i>". The while op of the enclosing
 * block (attrs: i[0] the sub-block, i[1] the loop variable count, i[2] the
 * number of cond ops at the head of the sub-block, s the key) takes the
 * initial values, then every Variable of enclosing blocks the sub-block
 * reads (captures), and writes the final values. */
#include <stdlib.h>
#include <string.h>

#include "../core/tensor_impl.h"
#include "control_internal.h"
#include "paddlec/autograd.h"
#include "paddlec/creation.h"
#include "paddlec/manipulation.h"
#include "paddlec/math.h"
#include "paddlec/static_control.h"

pd_program *pd_ctl_recording_program(const char *fn) {
  pd_program *p = pd_static_current_main();
  if (!p) pd_set_error(PD_ERR_STATE, "%s: call it under program_guard or in static mode", fn);
  return p;
}

pd_status pd_ctl_check_bool_scalar(const pd_tensor *t, const char *fn, const char *what) {
  if (!t)
    return pd_last_status() != PD_OK ? pd_last_status()
                                     : pd_set_error(PD_ERR_INVALID, "%s: %s is NULL", fn, what);
  bool one = true;
  for (int d = 0; d < t->ndim; d++) one &= t->shape[d] == 1;
  if (t->dtype != PD_BOOL || !one || pd_array_is_value(t))
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

static bool has_name(const char **names, int n, const char *s) {
  for (int i = 0; i < n; i++)
    if (strcmp(names[i], s) == 0) return true;
  return false;
}

pd_status pd_ctl_captures(const pd_static_block *sub, const char *fn, const char **caps, int *m, int cap,
                          bool *stop) {
  const pd_static_block *parent = sub->program->blocks[sub->parent_idx];
  for (int k = 0; k < sub->n_ops; k++)
    for (int j = 0; j < sub->ops[k]->n_in; j++) {
      const char *nm = sub->ops[k]->inputs[j];
      if (pd_ir_find_var(sub, nm) || has_name(caps, *m, nm)) continue;
      pd_variable *cv = pd_ir_find_var_recursive(parent, nm);
      if (!cv)
        return pd_set_error(PD_ERR_STATE, "%s: block %d reads '%s', which no enclosing block holds", fn,
                            sub->idx, nm);
      if (*m >= cap)
        return pd_set_error(PD_ERR_INVALID, "%s: block %d reads more than %d outer Variables", fn, sub->idx,
                            cap);
      caps[(*m)++] = cv->name;
      *stop &= cv->stop_gradient;
    }
  return PD_OK;
}

pd_status pd_ctl_assign_as(pd_program *p, pd_tensor *t, const char *name) {
  pd_static_block *b = p->blocks[p->current_block];
  pd_variable *v = pd_static_var_for(p, t);
  if (!v) return pd_last_status();
  if (v->is_array) {
    pd_variable *nv = pd_ir_add_var(b, name, v->dtype, v->ndim, v->shape, NULL);
    if (!nv) return pd_last_status();
    nv->is_array = true;
    nv->stop_gradient = v->stop_gradient;
    const char *ins[1] = {v->name}, *outs[1] = {name};
    return pd_ir_append_op(b, PD_STATIC_ASSIGN_ARRAY, ins, 1, outs, 1, NULL) ? PD_OK : pd_last_status();
  }
  pd_tensor *a = pd_assign(t);
  pd_variable *av = a ? pd_ir_var_of(p, a) : NULL;
  pd_status st = av && pd_ir_find_var(b, av->name) ? pd_ir_rename_var(b, av->name, name)
                 : a ? pd_set_error(PD_ERR_STATE, "'%s' was not recorded in block %d", name, b->idx)
                     : pd_last_status();
  pd_tensor_release(a);
  return st;
}

const char *pd_ctl_write_target(pd_program *p, pd_variable *v, const char *fn) {
  pd_static_block *cur = p->blocks[p->current_block];
  if (pd_ir_find_var(cur, v->name)) {
    if (v->persistable) return v->name; /* the scope keeps it by name: written in place */
    pd_variable *nv = pd_ir_new_version(cur, v);
    return nv ? nv->name : NULL;
  }
  if (pd_ctl_in_while_block(p, cur->idx)) return v->name;
  pd_set_error(
      PD_ERR_INVALID,
      "%s: '%s' belongs to an enclosing block; a cond branch or while_loop body cannot write it (return "
      "the new value instead)",
      fn, v->name);
  return NULL;
}

/* ---- cond and case ---------------------------------------------------------- */
typedef struct branch {
  pd_static_branch_fn fn;
  void *user;
  const char *label;
} branch;

/* Records br into a new sub-block of the current block; its outputs are
 * assigned to "<key>.<tag>_<i>", whose Variables go to vars. Returns the
 * count or a negative pd_status. */
static int record_branch(pd_program *p, const char *fn, const char *key, const char *tag, branch br, int lim,
                         pd_static_block **sub, pd_variable **vars) {
  int parent = p->current_block;
  if (!(*sub = pd_ir_add_block(p, parent))) return pd_last_status();
  p->current_block = (*sub)->idx;
  pd_tensor *o[PD_MAX_OUTPUTS] = {0};
  int n = br.fn(br.user, o, lim);
  pd_status st = PD_OK;
  if (n < 0) {
    st = pd_last_status() != PD_OK ? pd_last_status() : pd_set_error(PD_ERR_INVALID, "%s failed", br.label);
    pd_error_prefix("%s: %s", fn, br.label);
  } else if (n > lim) {
    st = pd_set_error(PD_ERR_INVALID, "%s: %s returned %d outputs, more than cap %d", fn, br.label, n, lim);
  }
  for (int i = 0; i < n && i < lim && st == PD_OK; i++) {
    char name[160];
    snprintf(name, sizeof name, "%s.%s_%d", key, tag, i);
    pd_variable *v = o[i] ? pd_static_var_for(p, o[i]) : NULL;
    if (!v)
      st = o[i] ? pd_last_status()
                : pd_set_error(PD_ERR_INVALID, "%s: output %d of %s is NULL", fn, i, br.label);
    else if (v->is_array)
      st = pd_set_error(PD_ERR_INVALID, "%s: output %d of %s is a tensor array; return tensors", fn, i,
                        br.label);
    else if ((st = pd_ctl_assign_as(p, o[i], name)) == PD_OK)
      vars[i] = pd_ir_find_var(*sub, name);
  }
  for (int i = 0; i < PD_MAX_OUTPUTS; i++) pd_tensor_release(o[i]);
  p->current_block = parent;
  return st == PD_OK ? n : st;
}

/* cond(pred, t, f) with each branch's own user pointer. */
static int record_cond(const char *fn, pd_tensor *pred, branch t, branch f, pd_tensor **out, int cap) {
  pd_program *p = pd_ctl_recording_program(fn);
  if (!p) return pd_last_status();
  if (!out || cap < 0) return pd_set_error(PD_ERR_INVALID, "%s: out %p (cap %d)", fn, (void *)out, cap);
  if (!t.fn || !f.fn) return pd_set_error(PD_ERR_INVALID, "%s: %s is NULL", fn, t.fn ? f.label : t.label);
  pd_status st = pd_ctl_check_bool_scalar(pred, fn, "pred");
  pd_variable *pv = st == PD_OK ? pd_static_var_for(p, pred) : NULL;
  if (!pv) return pd_last_status();
  int lim = cap < PD_MAX_OUTPUTS ? cap : PD_MAX_OUTPUTS;
  char key[64];
  pd_static_unique_name(PD_STATIC_COND, key, sizeof key);
  pd_static_block *tb = NULL, *fb = NULL;
  pd_variable *tv[PD_MAX_OUTPUTS] = {0}, *fv[PD_MAX_OUTPUTS] = {0};
  int nt = record_branch(p, fn, key, "true", t, lim, &tb, tv);
  if (nt < 0) return nt;
  int nf = record_branch(p, fn, key, "false", f, lim, &fb, fv);
  if (nf < 0) return nf;
  if (nt != nf)
    return pd_set_error(PD_ERR_INVALID, "%s: %s returns %d outputs, %s %d", fn, t.label, nt, f.label, nf);
  if (nt == 0) return pd_set_error(PD_ERR_INVALID, "%s: the branches return no outputs", fn);
  for (int i = 0; i < nt; i++) {
    if (tv[i]->dtype != fv[i]->dtype)
      return pd_set_error(PD_ERR_INVALID, "%s: output %d is %s in %s, %s in %s", fn, i,
                          pd_dtype_name(tv[i]->dtype), t.label, pd_dtype_name(fv[i]->dtype), f.label);
    if (!same_shape(tv[i]->ndim, tv[i]->shape, fv[i]->ndim, fv[i]->shape)) {
      char a[160], b[160];
      return pd_set_error(PD_ERR_INVALID, "%s: output %d has shape %s in %s, %s in %s", fn, i,
                          pd_shape_str(tv[i]->ndim, tv[i]->shape, a, sizeof a), t.label,
                          pd_shape_str(fv[i]->ndim, fv[i]->shape, b, sizeof b), f.label);
    }
  }
  const char *ins[PD_MAX_OUTPUTS] = {pv->name};
  int m = 1;
  bool stop = true;
  st = pd_ctl_captures(tb, fn, ins, &m, PD_MAX_OUTPUTS, &stop);
  if (st == PD_OK) st = pd_ctl_captures(fb, fn, ins, &m, PD_MAX_OUTPUTS, &stop);
  if (st != PD_OK) return st;
  pd_static_block *pb = p->blocks[p->current_block];
  char outn[PD_MAX_OUTPUTS][96];
  const char *outs[PD_MAX_OUTPUTS];
  pd_variable *ov[PD_MAX_OUTPUTS];
  for (int i = 0; i < nt; i++) {
    snprintf(outn[i], sizeof outn[i], "%s.tmp_%d", key, i);
    outs[i] = outn[i];
    if (!(ov[i] = pd_ir_add_var(pb, outn[i], tv[i]->dtype, tv[i]->ndim, tv[i]->shape, NULL)))
      return pd_last_status();
    ov[i]->stop_gradient =
        (tv[i]->stop_gradient && fv[i]->stop_gradient) || !pd_dtype_is_floating(tv[i]->dtype);
  }
  pd_attrs a = {.i = {tb->idx, fb->idx, nt}};
  memcpy(a.s, key, sizeof key);
  if (!pd_ir_append_op(pb, PD_STATIC_COND, ins, m, outs, nt, &a)) return pd_last_status();
  for (int i = 0; i < nt; i++) {
    out[i] = pd_tensor_retain(ov[i]->tensor);
    out[i]->stop_gradient = ov[i]->stop_gradient;
    pd_scope_track(out[i]);
  }
  return nt;
}

int pd_static_nn_cond(pd_tensor *pred, pd_static_branch_fn true_fn, pd_static_branch_fn false_fn, void *user,
                      pd_tensor **out, int cap) {
  return record_cond("cond", pred, (branch){true_fn, user, "true_fn"}, (branch){false_fn, user, "false_fn"},
                     out, cap);
}

/* case's pairs from index at on: cond(preds[at], fns[at], the rest). */
typedef struct case_rest {
  pd_tensor *const *preds;
  const pd_static_branch_fn *fns;
  int at, n;
  pd_static_branch_fn dflt;
  void *user;
  char label[32];
} case_rest;

static int case_branch(void *u, pd_tensor **out, int cap) {
  const case_rest *c = u;
  if (c->at == c->n) return c->dflt(c->user, out, cap);
  case_rest next = *c;
  next.at++;
  snprintf(next.label, sizeof next.label, next.at == c->n ? "default" : "fn %d", next.at);
  char lab[16];
  snprintf(lab, sizeof lab, "fn %d", c->at);
  return record_cond("case", c->preds[c->at], (branch){c->fns[c->at], c->user, lab},
                     (branch){case_branch, &next, next.label}, out, cap);
}

int pd_static_nn_case(pd_tensor *const *preds, const pd_static_branch_fn *fns, int n_pairs,
                      pd_static_branch_fn default_fn, void *user, pd_tensor **out, int cap) {
  if (n_pairs < 1 || n_pairs > PD_MAX_OUTPUTS || !preds || !fns)
    return pd_set_error(PD_ERR_INVALID, "case: %d (pred, fn) pairs at %p, %p (1 to %d)", n_pairs,
                        (void *)preds, (void *)fns, PD_MAX_OUTPUTS);
  if (!pd_ctl_recording_program("case")) return pd_last_status();
  for (int b = 0; b < n_pairs; b++) { /* every pred, the default's too (Paddle checks them all) */
    char what[32];
    snprintf(what, sizeof what, "pred %d", b);
    pd_status st = pd_ctl_check_bool_scalar(preds[b], "case", what);
    if (st != PD_OK) return st;
    if (!fns[b]) return pd_set_error(PD_ERR_INVALID, "case: fn %d is NULL", b);
  }
  /* without a default, the last pair's fn is it (Paddle's rule) */
  int np = default_fn ? n_pairs : n_pairs - 1;
  pd_static_branch_fn dflt = default_fn ? default_fn : fns[np];
  if (np < 1) { /* one pair and no default: its fn runs whatever pred says */
    branch one = {fns[0], user, "fn 0"};
    return record_cond("case", preds[0], one, one, out, cap);
  }
  case_rest c = {.preds = preds, .fns = fns, .at = 0, .n = np, .dflt = dflt, .user = user};
  return case_branch(&c, out, cap);
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

/* ---- while_loop ------------------------------------------------------------------ */
/* Records cond and body into sub; result names per the file comment. */
static pd_status record_loop(pd_program *p, const char *key, pd_static_loop_cond_fn cond,
                             pd_static_loop_body_fn body, void *user, pd_tensor *const *ph,
                             pd_variable *const *phv, int n, int *n_cond) {
  char name[160];
  pd_static_block *sub = p->blocks[p->current_block];
  pd_tensor *c = cond(user, ph, n);
  pd_status st = pd_ctl_check_bool_scalar(c, "while_loop", "the value cond returns");
  snprintf(name, sizeof name, "%s.cond", key);
  if (st == PD_OK) st = pd_ctl_assign_as(p, c, name);
  pd_tensor_release(c);
  if (st != PD_OK) return st;
  *n_cond = sub->n_ops;
  pd_tensor *next[PD_MAX_OUTPUTS] = {0};
  st = body(user, ph, n, next);
  if (st != PD_OK && pd_last_status() == PD_OK) st = pd_set_error(PD_ERR_INVALID, "while_loop: body failed");
  if (st != PD_OK) pd_error_prefix("while_loop: body");
  for (int i = 0; i < n && st == PD_OK; i++) {
    pd_variable *nv = next[i] ? pd_static_var_for(p, next[i]) : NULL;
    if (!next[i])
      st = pd_set_error(PD_ERR_INVALID, "while_loop: body returned NULL for loop variable %d", i);
    else if (!nv)
      st = pd_last_status();
    else if (nv->is_array != phv[i]->is_array)
      st = pd_set_error(PD_ERR_INVALID, "while_loop: body turns loop variable %d from %s into %s", i,
                        phv[i]->is_array ? "a tensor array" : "a tensor",
                        nv->is_array ? "a tensor array" : "a tensor");
    else if (nv->dtype != phv[i]->dtype)
      st = pd_set_error(PD_ERR_INVALID, "while_loop: body turns loop variable %d from %s into %s", i,
                        pd_dtype_name(phv[i]->dtype), pd_dtype_name(nv->dtype));
    else if (!nv->is_array && !same_shape(nv->ndim, nv->shape, phv[i]->ndim, phv[i]->shape)) {
      char a[160], b[160];
      st = pd_set_error(PD_ERR_INVALID, "while_loop: body turns loop variable %d of shape %s into shape %s",
                        i, pd_shape_str(phv[i]->ndim, phv[i]->shape, a, sizeof a),
                        pd_shape_str(nv->ndim, nv->shape, b, sizeof b));
    }
  }
  for (int i = 0; i < n && st == PD_OK; i++) {
    snprintf(name, sizeof name, "%s.next_%d", key, i);
    st = pd_ctl_assign_as(p, next[i], name);
  }
  for (int i = 0; i < n; i++) pd_tensor_release(next[i]);
  return st;
}

pd_status pd_ctl_append_while(pd_program *p, pd_static_block *sub, const char *key, const char *const *init,
                              int n, int n_cond, bool stop, const char *const *outs) {
  pd_static_block *pb = p->blocks[sub->parent_idx];
  const char *ins[PD_MAX_OUTPUTS];
  for (int i = 0; i < n; i++) ins[i] = init[i];
  int m = n;
  pd_status st = pd_ctl_captures(sub, "while", ins, &m, PD_MAX_OUTPUTS, &stop);
  if (st != PD_OK) return st;
  for (int i = 0; i < n; i++) { /* an output that is no Variable yet: a new one, shaped as its input */
    if (pd_ir_find_var_recursive(pb, outs[i])) continue;
    pd_variable *iv = pd_ir_find_var_recursive(pb, init[i]);
    char next[160];
    snprintf(next, sizeof next, "%s.next_%d", key, i);
    const pd_variable *nv = pd_ir_find_var(sub, next); /* an array's elements may be known only there */
    if (iv && nv && iv->is_array) iv = (pd_variable *)nv;
    pd_variable *ov = iv ? pd_ir_add_var(pb, outs[i], iv->dtype, iv->ndim, iv->shape, NULL) : NULL;
    if (!ov) return iv ? pd_last_status() : pd_set_error(PD_ERR_STATE, "while: no Variable '%s'", init[i]);
    ov->is_array = iv->is_array;
    ov->stop_gradient = stop || !pd_dtype_is_floating(iv->dtype);
  }
  pd_attrs a = {.i = {sub->idx, n, n_cond}};
  snprintf(a.s, sizeof a.s, "%s", key);
  return pd_ir_append_op(pb, PD_STATIC_WHILE, ins, m, outs, n, &a) ? PD_OK : pd_last_status();
}

pd_status pd_static_nn_while_loop(pd_static_loop_cond_fn cond, pd_static_loop_body_fn body, void *user,
                                  pd_tensor *const *loop_vars, int n, pd_tensor **out) {
  pd_program *p = pd_ctl_recording_program("while_loop");
  if (!p) return pd_last_status();
  if (!cond || !body || !loop_vars || !out || n < 1 || n > PD_MAX_OUTPUTS / 2)
    return pd_set_error(PD_ERR_INVALID,
                        "while_loop: cond %p, body %p, %d loop variables at %p (1 to %d), out %p",
                        (void *)(uintptr_t)cond, (void *)(uintptr_t)body, n, (void *)loop_vars,
                        PD_MAX_OUTPUTS / 2, (void *)out);
  int parent = p->current_block;
  const char *init[PD_MAX_OUTPUTS];
  pd_variable *iv[PD_MAX_OUTPUTS];
  bool stop = true;
  for (int i = 0; i < n; i++) {
    pd_variable *v = loop_vars[i] ? pd_static_var_for(p, loop_vars[i]) : NULL;
    if (!v) {
      if (pd_last_status() == PD_OK) pd_set_error(PD_ERR_INVALID, "while_loop: loop variable %d is NULL", i);
      pd_error_prefix("while_loop: loop variable %d", i);
      return pd_last_status();
    }
    init[i] = v->name;
    iv[i] = v;
    stop &= v->stop_gradient;
  }
  char key[64], name[160];
  pd_static_unique_name(PD_STATIC_WHILE, key, sizeof key);
  pd_static_block *sub = pd_ir_add_block(p, parent);
  if (!sub) return pd_last_status();
  pd_tensor *ph[PD_MAX_OUTPUTS];
  pd_variable *phv[PD_MAX_OUTPUTS];
  for (int i = 0; i < n; i++) {
    snprintf(name, sizeof name, "%s.in_%d", key, i);
    pd_variable *v = pd_ir_add_var(sub, name, iv[i]->dtype, iv[i]->ndim, iv[i]->shape, NULL);
    if (!v) return pd_last_status();
    v->is_array = iv[i]->is_array;
    v->stop_gradient = iv[i]->stop_gradient;
    v->tensor->stop_gradient = v->stop_gradient;
    ph[i] = v->tensor;
    phv[i] = v;
  }
  int n_cond = 0;
  p->current_block = sub->idx;
  pd_status st = record_loop(p, key, cond, body, user, ph, phv, n, &n_cond);
  p->current_block = parent;
  char outn[PD_MAX_OUTPUTS][96];
  const char *outs[PD_MAX_OUTPUTS];
  for (int i = 0; i < n; i++) {
    snprintf(outn[i], sizeof outn[i], "%s.tmp_%d", key, i);
    outs[i] = outn[i];
  }
  if (st == PD_OK) st = pd_ctl_append_while(p, sub, key, init, n, n_cond, stop, outs);
  if (st != PD_OK) return st;
  for (int i = 0; i < n; i++) {
    pd_variable *ov = pd_ir_find_var(p->blocks[parent], outs[i]);
    out[i] = pd_tensor_retain(ov->tensor);
    out[i]->stop_gradient = ov->stop_gradient;
    pd_scope_track(out[i]);
  }
  pd_ir_touch(p);
  return PD_OK;
}
