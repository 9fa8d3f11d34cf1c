/* Lowering a Program for known feed shapes: the ops are dispatched again,
 * under the recorder, on Variables whose shapes the feeds and the scope
 * now fix, and each grad op's backward rule is run the same way, so its
 * ops (matmul, sum, reshape, ...) are recorded with the constants the
 * shapes imply (mean's 1/n). The result holds registry ops only; the
 * executor caches it per program version, feed shapes and fetch list.
 * A rule that reads values cannot be traced: its grad op stays in the
 * result and runs the rule on each run's values. */
#include <stdlib.h>
#include <string.h>

#include "../ops/meta_util.h"
#include "paddlec/creation.h"
#include "static_internal.h"

typedef struct lower {
  const pd_static_block *src;
  pd_static_block *dst;
  pd_var_scope *scope;
  pd_tensor **meta; /* per source variable: its handle in dst (borrowed), NULL until known */
} lower;

/* A variable of dst named as source variable v, shaped like t. */
static pd_tensor *add_like(lower *w, const pd_variable *v, const pd_tensor *t) {
  pd_variable *d = pd_ir_add_var(w->dst, v->name, t->dtype, t->ndim, t->shape, NULL);
  if (!d) return NULL;
  d->persistable = v->persistable;
  d->is_parameter = v->is_parameter;
  d->is_data = v->is_data;
  d->stop_gradient = v->stop_gradient;
  return d->tensor;
}

/* The handle of source slot s, from the scope when no op wrote it yet. */
static pd_tensor *input(lower *w, int s) {
  if (w->meta[s]) return w->meta[s];
  const pd_variable *v = w->src->vars[s];
  pd_tensor *t = pd_var_scope_find_var(w->scope, v->name);
  if (t) return w->meta[s] = add_like(w, v, t);
  if (v->is_data)
    pd_set_error(PD_ERR_INVALID, "Executor.run: data variable '%s' was not fed", v->name);
  else if (v->persistable)
    pd_set_error(
        PD_ERR_STATE,
        "Executor.run: persistable variable '%s' is not in the scope (run the startup program first)",
        v->name);
  else
    pd_set_error(PD_ERR_STATE, "Executor.run: variable '%s' is read before any op writes it", v->name);
  return NULL;
}

/* Makes handle t the value of source slot s; a persistable variable keeps
 * its name in dst (the scope stores it under that name). */
static pd_status output(lower *w, int s, pd_tensor *t) {
  const pd_variable *v = w->src->vars[s];
  pd_variable *d = pd_ir_var_of(w->dst->program, t);
  if (!d) { /* an eager tensor (a constant a rule made): a Variable of dst */
    pd_program *p = w->dst->program;
    if (!(d = pd_static_var_for(p, t))) return pd_last_status();
  }
  if (v->persistable && strcmp(d->name, v->name) != 0) {
    pd_status st = pd_ir_rename_var(w->dst, d->name, v->name);
    if (st != PD_OK) return st;
  }
  if (v->persistable) d->persistable = true;
  w->meta[s] = d->tensor;
  return PD_OK;
}

static pd_status lower_assign_value(lower *w, const pd_operator *op, const int *out) {
  const pd_variable *v = w->src->vars[out[0]];
  pd_tensor *h = add_like(w, v, op->value);
  if (!h) return pd_last_status();
  const char *outs[1] = {v->name};
  pd_operator *d = pd_ir_append_op(w->dst, PD_STATIC_ASSIGN_VALUE, NULL, 0, outs, 1, &op->attrs);
  if (!d) return pd_last_status();
  d->value = pd_tensor_retain(op->value);
  w->meta[out[0]] = h;
  return PD_OK;
}

/* The names in dst of op's inputs (in: their source slots). */
static pd_status input_names(lower *w, const pd_operator *op, const int *in, const char **ins) {
  for (int i = 0; i < op->n_in; i++) {
    pd_tensor *h = in[i] >= 0 ? input(w, in[i]) : NULL;
    if (in[i] >= 0 && !h) return pd_last_status();
    ins[i] = h ? pd_ir_var_of(w->dst->program, h)->name : PD_STATIC_EMPTY_VAR;
  }
  return PD_OK;
}

/* Keeps grad op `op` as it is, on dst's variables: it then runs its rule on
 * each run's values. */
static pd_status keep_grad_op(lower *w, const pd_operator *op, const int *in, const int *out) {
  const char *ins[3 * PD_MAX_OUTPUTS], *outs[PD_MAX_OUTPUTS];
  if (input_names(w, op, in, ins) != PD_OK) return pd_last_status();
  pd_tensor *handles[PD_MAX_OUTPUTS] = {0};
  for (int i = 0; i < op->n_out; i++) {
    outs[i] = PD_STATIC_EMPTY_VAR;
    if (out[i] < 0) continue;
    const pd_variable *v = w->src->vars[out[i]];
    const pd_tensor *like = input(w, in[i]); /* a gradient is shaped as its input */
    if (!like || !(handles[i] = add_like(w, v, like))) return pd_last_status();
    outs[i] = v->name;
  }
  if (!pd_ir_append_grad_op(w->dst, (pd_op_id)op->grad_of, op->fwd_n_in, op->fwd_n_out, ins, outs,
                            &op->attrs))
    return pd_last_status();
  for (int i = 0; i < op->n_out; i++)
    if (handles[i]) w->meta[out[i]] = handles[i];
  return PD_OK;
}

/* The gradient of an output nothing reads: zeros made eagerly (the tracer
 * paused), as the eager engine passes them, so a rule that skips a zero
 * gradient (cross entropy's lse term: exp(x - lse) times zeros) sees its
 * values and records nothing for it; a rule that uses it records a
 * constant the folding pass takes up. */
static pd_tensor *known_zeros(const pd_tensor *like) {
  pd_static_pause tok = pd_static_pause_begin();
  pd_tensor *z = pd_zeros(like->ndim, like->shape, like->dtype);
  pd_static_pause_end(tok);
  return z;
}

static pd_status trace_grad_op(lower *w, const pd_operator *op, const int *in, const int *out) {
  const pd_op_def *def = pd_op_table[op->grad_of];
  int fi = op->fwd_n_in, fo = op->fwd_n_out;
  pd_tensor *ins[PD_MAX_OUTPUTS], *outs[PD_MAX_OUTPUTS], *gout[PD_MAX_OUTPUTS] = {0},
                                                         *gin[PD_MAX_OUTPUTS] = {0};
  pd_meta in_meta[PD_MAX_OUTPUTS];
  bool needs[PD_MAX_OUTPUTS];
  pd_status st = PD_OK;
  for (int i = 0; i < fi + fo && st == PD_OK; i++) {
    pd_tensor *h = input(w, in[i]);
    if (!h)
      st = pd_last_status();
    else if (i < fi)
      ins[i] = h;
    else
      outs[i - fi] = h;
  }
  for (int k = 0; k < fo && st == PD_OK; k++) {
    int gs = in[fi + fo + k];
    pd_tensor *g = gs >= 0 ? input(w, gs) : known_zeros(outs[k]);
    if (!g)
      st = pd_last_status();
    else
      gout[k] = gs >= 0 ? pd_tensor_retain(g) : g;
  }
  for (int i = 0; i < fi; i++) {
    if (st == PD_OK) pd_meta_of(ins[i], &in_meta[i]);
    needs[i] = out[i] >= 0;
  }
  if (st == PD_OK) {
    pd_backward_ctx ctx = {.attrs = &op->attrs,
                           .n_in = fi,
                           .n_out = fo,
                           .inputs = ins,
                           .outputs = outs,
                           .in_meta = in_meta,
                           .grad_out = gout,
                           .needs_grad = needs,
                           .grad_in = gin};
    st = def->backward(&ctx);
  }
  for (int i = 0; i < fi && st == PD_OK; i++) {
    if (!needs[i]) continue;
    const pd_meta *m = &in_meta[i];
    if (!gin[i] && !(gin[i] = pd_zeros(m->ndim, m->shape, m->dtype))) st = pd_last_status();
    if (st == PD_OK && (gin[i]->ndim != m->ndim || !pd_shape_eq(m->ndim, gin[i]->shape, m->shape)))
      st = pd_set_error(PD_ERR_SHAPE, "%s: the gradient of input %d has shape %s", op->type, i,
                        PD_SHAPE_STR(gin[i]));
    if (st == PD_OK) st = output(w, out[i], gin[i]);
  }
  for (int i = 0; i < fi; i++) pd_tensor_release(gin[i]);
  for (int k = 0; k < fo; k++) pd_tensor_release(gout[k]);
  return st;
}

/* A grad op becomes the ops of its rule, traced; a rule that reads values
 * (PD_OPF_BACKWARD_READS_VALUES, or one that does so for some attributes
 * only and fails on a Variable) keeps its grad op, so the rest of the
 * program is still lowered. */
/* Whether an input or output of grad op op (its first fi + fo inputs) has
 * a shape only the run fixes (a -1 dim after a value-shaped control op
 * result): its rule would bake the -1 into what it records. */
static bool grad_op_sees_unknown_dims(lower *w, const pd_operator *op, const int *in) {
  for (int i = 0; i < op->fwd_n_in + op->fwd_n_out && i < op->n_in; i++) {
    const pd_tensor *h = in[i] >= 0 ? w->meta[in[i]] : NULL;
    if (h && pd_dims_any_unknown(h->ndim, h->shape)) return true;
  }
  return false;
}

static pd_status lower_grad_op(lower *w, const pd_operator *op, const int *in, const int *out) {
  if ((pd_op_table[op->grad_of]->flags & PD_OPF_BACKWARD_READS_VALUES) ||
      grad_op_sees_unknown_dims(w, op, in))
    return keep_grad_op(w, op, in, out);
  int mark = w->dst->n_ops;
  if (trace_grad_op(w, op, in, out) == PD_OK) return PD_OK;
  pd_ir_truncate_ops(w->dst, mark);
  pd_clear_error();
  return keep_grad_op(w, op, in, out);
}

/* The shape of result j of control op op, whose source Variable v may have
 * -1 dims: a loop variable's is its initial value's, a gradient's its
 * input's; false when nothing fixes it before the op runs. */
static bool control_result_shape(lower *w, const pd_operator *op, const int *in, int j, const pd_variable *v,
                                 int64_t *shape) {
  if (v->ndim >= 0 && !pd_dims_any_unknown(v->ndim, v->shape)) {
    memcpy(shape, v->shape, sizeof(int64_t) * (size_t)v->ndim);
    return true;
  }
  bool grad = op->ctl_grad, loop = op->ctl == PD_CTL_WHILE && !grad && j < (int)op->attrs.i[1];
  if ((!grad && !loop) || j >= op->n_in || in[j] < 0) return false;
  const pd_tensor *like = input(w, in[j]);
  if (!like || like->ndim != v->ndim) {
    pd_clear_error();
    return false;
  }
  for (int d = 0; d < v->ndim; d++) {
    if (v->shape[d] >= 0 && v->shape[d] != like->shape[d]) return false;
    shape[d] = like->shape[d];
  }
  return true;
}

/* Keeps control or array op op (a while, a conditional_block, their grad
 * ops, a tensor array op) in dst: it runs through sub-plans of the source
 * program's sub-blocks (control_plan.h). Its results get the shapes the
 * program fixes, so the ops after it are lowered on them; an array result
 * is an array Variable, shaped as its elements. */
static pd_status keep_control_op(lower *w, const pd_operator *op, const int *in, const int *out) {
  const char *ins[3 * PD_MAX_OUTPUTS], *outs[PD_MAX_OUTPUTS];
  if (input_names(w, op, in, ins) != PD_OK) return pd_last_status();
  pd_tensor *handles[PD_MAX_OUTPUTS] = {0};
  for (int j = 0; j < op->n_out; j++) {
    outs[j] = PD_STATIC_EMPTY_VAR;
    if (out[j] < 0) continue;
    const pd_variable *v = w->src->vars[out[j]];
    int64_t shape[PD_MAX_DIMS];
    if (v->ndim > PD_MAX_DIMS)
      return pd_set_error(PD_ERR_INVALID, "lowering: %s's result '%s' has %d dims", op->type, v->name,
                          v->ndim);
    /* a shape only the run fixes (an array stacked into a tensor): its -1
     * dims stay, the values downstream stay out of the arena, and grad ops
     * reading them run their rules on the run's values */
    bool fixed = !v->is_array && control_result_shape(w, op, in, j, v, shape);
    pd_variable *d = pd_ir_add_var(w->dst, v->name, v->dtype, v->ndim, fixed ? shape : v->shape, NULL);
    if (!d) return pd_last_status();
    d->is_array = v->is_array;
    d->stop_gradient = v->stop_gradient;
    handles[j] = d->tensor;
    outs[j] = v->name;
  }
  pd_operator *d = pd_ir_append_op(w->dst, op->type, ins, op->n_in, outs, op->n_out, &op->attrs);
  if (!d) return pd_last_status();
  d->fwd_n_in = op->fwd_n_in;
  d->fwd_n_out = op->fwd_n_out;
  d->role = op->role;
  d->lowered_from = op;
  for (int j = 0; j < op->n_out; j++)
    if (handles[j]) w->meta[out[j]] = handles[j];
  return PD_OK;
}

static pd_status lower_op(lower *w, const pd_operator *op, const int *in, const int *out) {
  if (op->grad_of >= 0) return lower_grad_op(w, op, in, out);
  if (op->op_id < 0 && !op->value) return keep_control_op(w, op, in, out);
  if (op->op_id < 0) return lower_assign_value(w, op, out);
  if (op->n_in > PD_MAX_OUTPUTS) return pd_set_error(PD_ERR_INVALID, "%s: %d inputs", op->type, op->n_in);
  pd_tensor *ins[PD_MAX_OUTPUTS], *outs[PD_MAX_OUTPUTS];
  for (int i = 0; i < op->n_in; i++)
    if (!(ins[i] = input(w, in[i]))) return pd_last_status();
  int n = 0;
  pd_status st = pd_dispatch((pd_op_id)op->op_id, ins, op->n_in, &op->attrs, outs, &n);
  if (st != PD_OK) return st;
  if (n != op->n_out)
    st = pd_set_error(PD_ERR_STATE, "%s: %d outputs recorded, %d now", op->type, op->n_out, n);
  for (int k = 0; k < n && st == PD_OK; k++) st = output(w, out[k], outs[k]);
  for (int k = 0; k < n; k++) pd_tensor_release(outs[k]);
  return st;
}

/* The slots of op's names in src (-1 for an empty slot). */
static pd_status slots(const pd_static_block *b, char *const *names, int n, int *out) {
  for (int i = 0; i < n; i++) {
    out[i] = -1;
    if (strcmp(names[i], PD_STATIC_EMPTY_VAR) == 0) continue;
    for (int s = 0; s < b->n_vars && out[i] < 0; s++)
      if (strcmp(b->vars[s]->name, names[i]) == 0) out[i] = s;
    if (out[i] < 0)
      return pd_set_error(PD_ERR_INVALID, "Executor: the program has no variable '%s'", names[i]);
  }
  return PD_OK;
}

pd_status pd_static_lower(const pd_program *p, const bool *live, const pd_static_feed *feed, int n_feed,
                          const int *fetch, int n_fetch, pd_var_scope *scope, pd_program **out,
                          const char **fetch_names) {
  *out = NULL;
  lower w = {.src = p->blocks[0], .scope = scope};
  pd_program *dst = pd_static_program();
  w.meta = calloc((size_t)w.src->n_vars + 1, sizeof *w.meta);
  if (!dst || !w.meta) {
    pd_program_release(dst);
    free(w.meta);
    return pd_set_error(PD_ERR_MEMORY, "Executor: out of memory lowering the program");
  }
  w.dst = dst->blocks[0];
  pd_status st = PD_OK;
  for (int i = 0; i < n_feed && st == PD_OK; i++) {
    int s;
    char *nm = (char *)feed[i].name;
    if ((st = slots(w.src, &nm, 1, &s)) == PD_OK &&
        !(w.meta[s] = add_like(&w, w.src->vars[s], feed[i].value)))
      st = pd_last_status();
  }
  if (st == PD_OK) st = pd_static_record_begin(dst);
  if (st == PD_OK) {
    for (int k = 0; k < w.src->n_ops && st == PD_OK; k++) {
      if (!live[k]) continue;
      const pd_operator *op = w.src->ops[k];
      int in[3 * PD_MAX_OUTPUTS], o[PD_MAX_OUTPUTS];
      if (op->n_in > 3 * PD_MAX_OUTPUTS || op->n_out > PD_MAX_OUTPUTS)
        st = pd_set_error(PD_ERR_INVALID, "Executor: op %s has %d inputs, %d outputs", op->type, op->n_in,
                          op->n_out);
      if (st == PD_OK) st = slots(w.src, op->inputs, op->n_in, in);
      if (st == PD_OK) st = slots(w.src, op->outputs, op->n_out, o);
      if (st == PD_OK) {
        int role = pd_static_set_role(op->role);
        st = lower_op(&w, op, in, o);
        pd_static_set_role(role);
        if (st != PD_OK) pd_error_prefix("lowering %s", op->type);
      }
    }
    pd_static_record_end();
  }
  for (int i = 0; i < n_fetch && st == PD_OK; i++) {
    pd_tensor *h = input(&w, fetch[i]);
    if (!h)
      st = pd_last_status();
    else
      fetch_names[i] = pd_ir_var_of(dst, h)->name;
  }
  free(w.meta);
  if (st != PD_OK) {
    pd_program_release(dst);
    return st;
  }
  *out = dst;
  return PD_OK;
}
