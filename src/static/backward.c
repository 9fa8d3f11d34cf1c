/* paddle.static.append_backward and gradients: one grad op per forward op
 * on the way from the targets back, in reverse order, as Paddle's backward
 * pass writes them. A grad op runs the op's registry backward rule when the
 * Executor reaches it, on that run's values: the rules compute constants
 * from shapes (mean's 1/n), which a Program with -1 dims knows only then.
 *
 * Gradient names are Paddle's: x@GRAD; when several ops contribute to x,
 * each contribution is x@GRAD@RENAME@block0@k and add ops sum them into
 * x@GRAD.
 *
 * An inplace op (exp_, relu_, add_, ...) writes its output under its input
 * 0's name: what it writes is a new version of that Variable. The walk
 * back sums the gradient of the version it wrote, passes it through the
 * op's rule, and starts the Variable's gradient afresh for the version the
 * op read, which the ops before it contribute to. A grad op runs after the
 * whole forward, so it reads a Variable's last version: where its rule
 * reads a value (PD_OPF_SAVE_IN / PD_OPF_SAVE_OUT, or a control op, which
 * runs its block again) that an inplace op overwrote later, the backward
 * is an error naming both ops and the Variable, as eager's version check
 * fails there. */
#include <stdlib.h>
#include <string.h>

#include "../ops/meta_util.h"
#include "static_internal.h"

pd_program *pd_static_program_of(const pd_tensor *t, const char *fn) {
  if (!t) {
    if (pd_last_status() == PD_OK) pd_set_error(PD_ERR_INVALID, "%s: Variable is NULL", fn);
    return NULL;
  }
  pd_program *p = pd_static_current_main();
  if (p && pd_ir_var_of(p, t)) return p;
  p = pd_static_default_main_program();
  if (p && pd_ir_var_of(p, t)) return p;
  const char *n = pd_tensor_name(t);
  pd_set_error(PD_ERR_INVALID,
               "%s: '%s' is no Variable of the Program being built on this thread (call it under the "
               "program_guard of the Program that holds it)",
               fn, n ? n : "(unnamed)");
  return NULL;
}

/* Per forward variable (by scratch index): its gradient contributions and,
 * once summed, its gradient. */
typedef struct grad_state {
  pd_variable **contrib;
  int n, cap;
  pd_variable *grad;
  bool done;
} grad_state;

typedef struct bw {
  pd_static_block *b;
  int n_vars; /* the forward variables */
  grad_state *g;
  int *last_write; /* by scratch index: the last op writing the variable in place, or -1 */
} bw;

static grad_state *state_of(bw *w, const pd_variable *v) {
  return v->scratch >= 0 && v->scratch < w->n_vars && w->b->vars[v->scratch] == v ? &w->g[v->scratch] : NULL;
}

/* A name not taken in the block: base, else base@1, base@2, ... */
static void free_name(const pd_static_block *b, const char *base, char *out, size_t cap) {
  snprintf(out, cap, "%s", base);
  for (int k = 1; pd_ir_find_var(b, out); k++) snprintf(out, cap, "%s@%d", base, k);
}

static pd_variable *new_grad_var(bw *w, const pd_variable *of, const char *suffix) {
  char base[256], name[272];
  snprintf(base, sizeof base, "%s%s", of->name, suffix);
  free_name(w->b, base, name, sizeof name);
  pd_variable *v = pd_ir_add_var(w->b, name, of->dtype, of->ndim, of->shape, NULL);
  if (v) {
    v->stop_gradient = false;
    v->is_array = of->is_array; /* an array's gradient is an array of its elements' */
    v->scratch = -1;
  }
  return v;
}

static pd_status add_contrib(bw *w, const pd_variable *of, pd_variable *g) {
  grad_state *s = state_of(w, of);
  if (!s) return pd_set_error(PD_ERR_STATE, "append_backward: '%s' is not a forward variable", of->name);
  if (s->n == s->cap) {
    int nc = s->cap ? s->cap * 2 : 4;
    pd_variable **c = realloc(s->contrib, (size_t)nc * sizeof *c);
    if (!c) return pd_set_error(PD_ERR_MEMORY, "append_backward: out of memory");
    s->contrib = c;
    s->cap = nc;
  }
  s->contrib[s->n++] = g;
  return PD_OK;
}

/* The gradient of v: its one contribution renamed v@GRAD, or their sum. */
static pd_status finalize(bw *w, const pd_variable *v, pd_variable **out) {
  grad_state *s = state_of(w, v);
  *out = NULL;
  if (!s) return PD_OK;
  if (s->done) {
    *out = s->grad;
    return PD_OK;
  }
  s->done = true;
  if (s->n == 0) return PD_OK;
  char base[256], name[272];
  snprintf(base, sizeof base, "%s@GRAD", v->name);
  if (s->n == 1) {
    free_name(w->b, base, name, sizeof name);
    pd_status st = pd_ir_rename_var(w->b, s->contrib[0]->name, name);
    if (st != PD_OK) return st;
    s->grad = s->contrib[0];
  } else {
    pd_variable *acc = s->contrib[0];
    for (int k = 1; k < s->n; k++) {
      pd_variable *sum = new_grad_var(w, v, k + 1 < s->n ? "@GRAD@SUM" : "@GRAD");
      if (!sum) return pd_last_status();
      const char *ins[2] = {acc->name, s->contrib[k]->name}, *outs[1] = {sum->name};
      pd_operator *op =
          pd_ir_append_op(w->b, v->is_array ? PD_STATIC_ARRAY_ADD : "add", ins, 2, outs, 1, NULL);
      if (!op) return pd_last_status();
      op->role = PD_OP_ROLE_BACKWARD;
      acc = sum;
    }
    s->grad = acc;
  }
  *out = s->grad;
  return PD_OK;
}

static bool in_set(pd_variable *const *set, int n, const pd_variable *v) {
  for (int i = 0; i < n; i++)
    if (set[i] == v) return true;
  return false;
}

/* The seed gradient of target t: ones (or the given gradient) as t@GRAD. */
static pd_status seed(bw *w, pd_variable *t, pd_variable *given) {
  pd_variable *g = new_grad_var(w, t, "@GRAD@RENAME@block0@0");
  if (!g) return pd_last_status();
  pd_operator *op;
  bool known = !pd_dims_any_unknown(t->ndim, t->shape);
  const char *outs[1] = {g->name};
  if (given) {
    const char *ins[1] = {given->name};
    op = pd_ir_append_op(w->b, "assign", ins, 1, outs, 1, NULL);
  } else if (known) { /* fill_constant(shape, 1.0) */
    pd_attrs a = {.f = {1.0}, .dtype = t->dtype, .nv = {t->ndim}};
    memcpy(a.v[0], t->shape, sizeof(int64_t) * (size_t)t->ndim);
    op = pd_ir_append_op(w->b, "full", NULL, 0, outs, 1, &a);
  } else { /* shape known only at run time: 0 * t + 1 */
    const char *ins[1] = {t->name};
    pd_attrs a = {.f = {0.0, 1.0}, .i = {1}};
    op = pd_ir_append_op(w->b, "scale", ins, 1, outs, 1, &a);
  }
  if (!op) return pd_last_status();
  op->role = PD_OP_ROLE_BACKWARD | PD_OP_ROLE_LOSS;
  return add_contrib(w, t, g);
}

static bool writes_inplace(const pd_operator *op) {
  return op->op_id >= 0 && (pd_op_table[op->op_id]->flags & PD_OPF_INPLACE) && op->n_in > 0 &&
         op->n_out > 0 && strcmp(op->inputs[0], op->outputs[0]) == 0;
}

/* Notes, per variable, the last op of the block that writes it in place. */
static void note_inplace_writes(bw *w) {
  for (int i = 0; i < w->n_vars; i++) w->last_write[i] = -1;
  for (int k = 0; k < w->b->n_ops; k++) {
    const pd_operator *op = w->b->ops[k];
    if (!writes_inplace(op)) continue;
    pd_variable *v = pd_ir_find_var(w->b, op->outputs[0]);
    if (v && state_of(w, v)) w->last_write[v->scratch] = k;
  }
}

/* Refuses the grad op of op (the block's op k) where its rule reads the
 * value of a Variable that an inplace op overwrites after op read it
 * (input i: from op k itself on; output: after op k). The grad op would
 * read the last version instead. */
static pd_status check_values_kept(bw *w, const pd_operator *op, int k, pd_variable *const *iv) {
  bool ctrl = op->op_id < 0;
  unsigned flags = ctrl ? PD_OPF_SAVE_IN | PD_OPF_SAVE_OUT : pd_op_table[op->op_id]->flags;
  for (int side = 0; side < 2; side++) {
    if (!(flags & (side ? PD_OPF_SAVE_OUT : PD_OPF_SAVE_IN))) continue;
    int n = side ? op->n_out : op->n_in;
    for (int i = 0; i < n; i++) {
      const pd_variable *v = side ? pd_ir_find_var(w->b, op->outputs[i]) : iv[i];
      int last = v && state_of(w, v) ? w->last_write[v->scratch] : -1;
      if (last < k + side) continue;
      return pd_set_error(PD_ERR_UNIMPLEMENTED,
                          "append_backward: the gradient of %s reads its %s '%s', which inplace op %s "
                          "overwrites after it; the grad op would see the overwritten value (compute on a "
                          "copy, or use the out-of-place op)",
                          op->type, side ? "output" : "input", v->name, w->b->ops[last]->type);
    }
  }
  return PD_OK;
}

/* At inplace op `op` on the walk back: the gradient of its input 0 from
 * here on is that of the version op read, which starts from the grad op's
 * contribution g (NULL: none). */
static pd_status restart_version(bw *w, const pd_operator *op, pd_variable *g) {
  pd_variable *v = pd_ir_find_var(w->b, op->inputs[0]);
  grad_state *s = v ? state_of(w, v) : NULL;
  if (!s) return PD_OK;
  s->n = 0;
  s->done = false;
  s->grad = NULL;
  return g ? add_contrib(w, v, g) : PD_OK;
}

/* The grad op of forward op `op` (the block's op k_op), when a gradient
 * reaches one of its outputs and one of its inputs needs one. */
static pd_status grad_of_op(bw *w, const pd_operator *op, int k_op, pd_variable *const *no_grad,
                            int n_no_grad) {
  bool ctrl = op->op_id < 0; /* control flow and arrays: their grad ops are control_run.c's */
  const pd_op_def *def = ctrl ? NULL : pd_op_table[op->op_id];
  int fi = op->n_in, fo = op->n_out;
  if (fi > PD_MAX_OUTPUTS || fo > PD_MAX_OUTPUTS)
    return pd_set_error(PD_ERR_INVALID, "append_backward: %s has %d inputs and %d outputs", op->type, fi, fo);
  pd_variable *iv[PD_MAX_OUTPUTS], *gout[PD_MAX_OUTPUTS];
  bool any_out = false, any_in = false;
  pd_status st;
  for (int k = 0; k < fo; k++) {
    pd_variable *ov = pd_ir_find_var(w->b, op->outputs[k]);
    if (!ov)
      return pd_set_error(PD_ERR_STATE, "append_backward: %s writes unknown '%s'", op->type, op->outputs[k]);
    if ((st = finalize(w, ov, &gout[k])) != PD_OK) return st;
    any_out |= gout[k] != NULL;
  }
  bool inplace = writes_inplace(op);
  if (!any_out) return inplace ? restart_version(w, op, NULL) : PD_OK;
  if (!ctrl && (!(def->flags & PD_OPF_DIFF) || !def->backward)) {
    if (!inplace) return PD_OK;
    /* fill_, copy_, scatter_, reshape_: no rule says what reaches the
     * version read, which an earlier op may want */
    pd_variable *v = pd_ir_find_var(w->b, op->inputs[0]);
    if (v && !v->stop_gradient && pd_dtype_is_floating(v->dtype) && !in_set(no_grad, n_no_grad, v))
      return pd_set_error(PD_ERR_UNIMPLEMENTED,
                          "append_backward: a gradient reaches '%s', which inplace op %s writes, and %s has "
                          "no backward to pass it on to the value '%s' held before",
                          v->name, op->type, op->type, v->name);
    return restart_version(w, op, NULL);
  }
  bool needs[PD_MAX_OUTPUTS];
  for (int i = 0; i < fi; i++) {
    iv[i] = pd_ir_find_var(w->b, op->inputs[i]);
    if (!iv[i])
      return pd_set_error(PD_ERR_STATE, "append_backward: %s reads unknown '%s'", op->type, op->inputs[i]);
    needs[i] =
        !iv[i]->stop_gradient && pd_dtype_is_floating(iv[i]->dtype) && !in_set(no_grad, n_no_grad, iv[i]);
    any_in |= needs[i];
  }
  if (!any_in) return inplace ? restart_version(w, op, NULL) : PD_OK;
  if ((st = check_values_kept(w, op, k_op, iv)) != PD_OK) return st;
  const char *ins[3 * PD_MAX_OUTPUTS], *outs[PD_MAX_OUTPUTS];
  pd_variable *gin[PD_MAX_OUTPUTS];
  for (int i = 0; i < fi; i++) ins[i] = op->inputs[i];
  for (int k = 0; k < fo; k++) {
    ins[fi + k] = op->outputs[k];
    ins[fi + fo + k] = gout[k] ? gout[k]->name : PD_STATIC_EMPTY_VAR;
  }
  for (int i = 0; i < fi; i++) {
    gin[i] = NULL;
    if (!needs[i]) {
      outs[i] = PD_STATIC_EMPTY_VAR;
      continue;
    }
    grad_state *s = state_of(w, iv[i]);
    int k = s ? s->n : 0; /* contributions so far, this op's earlier slots included */
    for (int j = 0; j < i; j++) k += gin[j] && iv[j] == iv[i];
    char suffix[64];
    snprintf(suffix, sizeof suffix, "@GRAD@RENAME@block0@%d", k);
    if (!(gin[i] = new_grad_var(w, iv[i], suffix))) return pd_last_status();
    outs[i] = gin[i]->name;
  }
  pd_operator *g = ctrl ? pd_static_append_control_grad(w->b, op, ins, outs)
                        : pd_ir_append_grad_op(w->b, (pd_op_id)op->op_id, fi, fo, ins, outs, &op->attrs);
  if (!g) return pd_last_status();
  int from = 0;
  if (inplace) { /* input 0's gradient is the version's op read */
    if ((st = restart_version(w, op, gin[0])) != PD_OK) return st;
    from = 1;
  }
  for (int i = from; i < fi; i++)
    if (gin[i] && (st = add_contrib(w, iv[i], gin[i])) != PD_OK) return st;
  return PD_OK;
}

pd_status pd_static_build_backward(pd_program *p, pd_variable *const *targets,
                                   pd_variable *const *target_grads, int n_targets,
                                   pd_variable *const *no_grad, int n_no_grad, pd_variable *const *wanted,
                                   int n_wanted, pd_variable **grads) {
  bw w = {.b = p->blocks[0]};
  w.n_vars = w.b->n_vars;
  int n_ops = w.b->n_ops;
  w.g = calloc((size_t)w.n_vars + 1, sizeof *w.g);
  w.last_write = malloc(((size_t)w.n_vars + 1) * sizeof *w.last_write);
  if (!w.g || !w.last_write) {
    free(w.g);
    free(w.last_write);
    return pd_set_error(PD_ERR_MEMORY, "append_backward: out of memory");
  }
  for (int i = 0; i < w.n_vars; i++) {
    pd_variable *v = w.b->vars[i];
    v->scratch = i;
    /* x.stop_gradient = False set on the handle after recording counts */
    if (v->tensor && (pd_tensor_is_meta(v->tensor) || v->is_parameter))
      v->stop_gradient = v->tensor->stop_gradient;
  }
  note_inplace_writes(&w);
  pd_status st = PD_OK;
  for (int t = 0; t < n_targets && st == PD_OK; t++)
    st = seed(&w, targets[t], target_grads ? target_grads[t] : NULL);
  for (int k = n_ops - 1; k >= 0 && st == PD_OK; k--) {
    const pd_operator *op = w.b->ops[k];
    if ((op->op_id < 0 && !pd_static_is_control_type(op->type)) || op->role != PD_OP_ROLE_FORWARD)
      continue; /* constants, grad and update ops */
    st = grad_of_op(&w, op, k, no_grad, n_no_grad);
  }
  for (int i = 0; i < n_wanted && st == PD_OK; i++) st = finalize(&w, wanted[i], &grads[i]);
  for (int i = 0; i < w.n_vars; i++) free(w.g[i].contrib);
  free(w.g);
  free(w.last_write);
  return st;
}

/* ---- the public entry points ------------------------------------------------ */
/* The variables of p for tensors ts (borrowed), NULL entries kept NULL. */
static pd_status vars_of(pd_program *p, pd_tensor *const *ts, int n, pd_variable **out, const char *fn,
                         const char *what) {
  for (int i = 0; i < n; i++) {
    out[i] = NULL;
    if (!ts[i]) continue;
    if (!(out[i] = pd_ir_var_of(p, ts[i]))) {
      const char *nm = pd_tensor_name(ts[i]);
      return pd_set_error(PD_ERR_INVALID, "%s: %s %d ('%s') is no Variable of the loss's Program", fn, what,
                          i, nm ? nm : "unnamed");
    }
  }
  return PD_OK;
}

int pd_static_append_backward(pd_tensor *loss, pd_tensor *const *parameter_list, int n_params,
                              pd_tensor *const *no_grad_set, int n_no_grad, pd_tensor **params_out,
                              pd_tensor **grads_out, int cap) {
  pd_program *p = pd_static_program_of(loss, "append_backward");
  if (!p) return pd_last_status();
  if (n_params < 0 || n_no_grad < 0 || (n_params && !parameter_list) || (n_no_grad && !no_grad_set) ||
      cap < 0 || (cap && (!params_out || !grads_out)))
    return pd_set_error(PD_ERR_INVALID,
                        "append_backward: %d parameters, %d no_grad entries, room for %d pairs", n_params,
                        n_no_grad, cap);
  pd_static_block *gb = p->blocks[0];
  int np = n_params;
  if (!parameter_list) /* every trainable parameter of the program */
    for (int i = 0; i < gb->n_vars; i++) np += gb->vars[i]->is_parameter && !gb->vars[i]->stop_gradient;
  pd_variable **params = calloc((size_t)np + 1, sizeof *params),
              **grads = calloc((size_t)np + 1, sizeof *grads);
  pd_variable **ng = calloc((size_t)n_no_grad + 1, sizeof *ng);
  pd_status st =
      params && grads && ng ? PD_OK : pd_set_error(PD_ERR_MEMORY, "append_backward: out of memory");
  if (st == PD_OK && parameter_list)
    st = vars_of(p, parameter_list, n_params, params, "append_backward", "parameter");
  if (st == PD_OK && !parameter_list)
    for (int i = 0, k = 0; i < gb->n_vars; i++)
      if (gb->vars[i]->is_parameter && !gb->vars[i]->stop_gradient) params[k++] = gb->vars[i];
  if (st == PD_OK) st = vars_of(p, no_grad_set, n_no_grad, ng, "append_backward", "no_grad_set entry");
  pd_variable *lv = pd_ir_var_of(p, loss);
  if (st == PD_OK) st = pd_static_build_backward(p, &lv, NULL, 1, ng, n_no_grad, params, np, grads);
  int n = 0;
  for (int i = 0; i < np && st == PD_OK; i++) {
    if (!params[i] || !grads[i]) continue;
    if (n < cap) {
      params_out[n] = pd_scope_track(pd_tensor_retain(params[i]->tensor));
      grads_out[n] = pd_scope_track(pd_tensor_retain(grads[i]->tensor));
    }
    n++;
  }
  free(params);
  free(grads);
  free(ng);
  return st == PD_OK ? n : st;
}

pd_status pd_static_gradients(pd_tensor *const *targets, int n_targets, pd_tensor *const *inputs,
                              int n_inputs, pd_tensor *const *target_gradients, pd_tensor *const *no_grad_set,
                              int n_no_grad, pd_tensor **grads_out) {
  if (n_targets <= 0 || !targets || n_inputs < 0 || (n_inputs && (!inputs || !grads_out)) || n_no_grad < 0 ||
      (n_no_grad && !no_grad_set))
    return pd_set_error(PD_ERR_INVALID, "gradients: %d targets, %d inputs, %d no_grad entries", n_targets,
                        n_inputs, n_no_grad);
  for (int i = 0; i < n_inputs; i++) grads_out[i] = NULL;
  pd_program *p = pd_static_program_of(targets[0], "gradients");
  if (!p) return pd_last_status();
  size_t cap = (size_t)n_targets * 2 + (size_t)n_inputs * 2 + (size_t)n_no_grad + 1;
  pd_variable **all = calloc(cap, sizeof *all);
  if (!all) return pd_set_error(PD_ERR_MEMORY, "gradients: out of memory");
  pd_variable **tv = all, **tg = tv + n_targets, **iv = tg + n_targets, **gv = iv + n_inputs,
              **ng = gv + n_inputs;
  pd_status st = vars_of(p, targets, n_targets, tv, "gradients", "target");
  for (int i = 0; i < n_targets && st == PD_OK; i++)
    if (!tv[i]) st = pd_set_error(PD_ERR_INVALID, "gradients: target %d is NULL", i);
  if (st == PD_OK && target_gradients)
    st = vars_of(p, target_gradients, n_targets, tg, "gradients", "target gradient");
  if (st == PD_OK) st = vars_of(p, inputs, n_inputs, iv, "gradients", "input");
  if (st == PD_OK) st = vars_of(p, no_grad_set, n_no_grad, ng, "gradients", "no_grad_set entry");
  if (st == PD_OK)
    st = pd_static_build_backward(p, tv, target_gradients ? tg : NULL, n_targets, ng, n_no_grad, iv, n_inputs,
                                  gv);
  for (int i = 0; i < n_inputs && st == PD_OK; i++)
    if (gv[i]) grads_out[i] = pd_scope_track(pd_tensor_retain(gv[i]->tensor));
  free(all);
  return st;
}
