/* Sub-plans of a lowered plan's control ops (see control_plan.h).
 *
 * A sub-plan runs the ops of one sub-block with their inputs resolved
 * ahead: a slot of the block, or one of the values the control op
 * captured. It keeps the interpreter's semantics (control_run.c) and
 * messages, so a program gives the same values and errors either way.
 *
 * Its arena: a value gets bytes in it when a registry op (not a view or
 * an inplace op) writes it, its shape was the same every time the ops ran
 * before the arena was planned, and no control or array op reads it (an
 * array keeps its elements, a nested control op may return its inputs).
 * Values that outlive the block's ops are copied out of the arena: the
 * next values of a loop into a buffer per loop variable (reused while
 * nothing else holds it), a loop's final values and a branch's results
 * into new tensors. */
#include <stdlib.h>
#include <string.h>

#include "../core/alloc.h"
#include "../core/tensor_impl.h"
#include "control_internal.h"
#include "control_plan.h"
#include "memory_plan.h"
#include "paddlec/autograd.h"
#include "paddlec/creation.h"
#include "paddlec/manipulation.h"

/* An input that names no Variable of the block and no capture: an error
 * when the op runs, as in the interpreter. */
#define REF_UNRESOLVED (-1)

typedef struct sub_op {
  const pd_operator *op;
  int *in;  /* >= 0: a slot of the block; <= -2: capture -(ref + 2); REF_UNRESOLVED */
  int *out; /* a slot of the block, or REF_UNRESOLVED */
} sub_op;

typedef struct sub_plan {
  const pd_static_block *sub;
  sub_op *ops;
  int n_ops, n_vars;
  int *refs;
  pd_tensor **env; /* per slot: its value while the block runs */
  bool busy;
  /* before the arena: the shape each slot had (seen: 1 one shape, 2 more) */
  pd_meta *meta;
  unsigned char *seen;
  bool *ran;  /* per op: it ran at least once */
  bool *keep; /* per slot: read after the block's ops (set by the control op) */
  bool planned_once;
  /* the arena */
  void *mem;
  size_t bytes;
  pd_tensor **slot; /* per slot: its tensor in the arena, or NULL */
  bool *into;       /* per op: writes into the arena */
} sub_plan;

typedef struct ctl_entry {
  char *const *key; /* the op's inputs array: one per op, also for a grad op's forward view */
  sub_plan *sp[2];
  pd_ctl_loop loop;
  pd_tensor *carry[PD_MAX_OUTPUTS][2];  /* a loop variable's value between iterations (two buffers) */
  pd_tensor *result[PD_MAX_OUTPUTS][2]; /* a loop's final value, a branch's result */
  int res_idx[2][PD_MAX_OUTPUTS];       /* a branch's results */
} ctl_entry;

struct pd_ctl_cache {
  const pd_program *p;
  bool arenas; /* sub-plans may get arenas (pd_executor_set_arena) */
  ctl_entry **e;
  int n, cap;
  pd_ctl_stats stats;
};

/* ---- building ---------------------------------------------------------------- */
static void sub_free(sub_plan *sp) {
  if (!sp) return;
  for (int s = 0; s < sp->n_vars; s++) {
    if (sp->env) pd_tensor_release(sp->env[s]);
    if (sp->slot) pd_tensor_release(sp->slot[s]);
  }
  if (sp->mem) pd_free(sp->mem, sp->bytes);
  free(sp->ops), free(sp->refs), free(sp->env), free(sp->meta), free(sp->seen), free(sp->ran);
  free(sp->keep), free(sp->slot), free(sp->into);
  free(sp);
}

/* Compiles block sub of control op op, whose captures are its inputs from
 * cap0 on. */
static sub_plan *sub_compile(const pd_static_block *sub, const pd_operator *op, int cap0) {
  sub_plan *sp = calloc(1, sizeof *sp);
  size_t total = 0, nv = (size_t)sub->n_vars + 1, no = (size_t)sub->n_ops + 1;
  for (int k = 0; k < sub->n_ops; k++) total += (size_t)sub->ops[k]->n_in + (size_t)sub->ops[k]->n_out;
  if (sp) {
    sp->sub = sub;
    sp->n_ops = sub->n_ops;
    sp->n_vars = sub->n_vars;
    sp->ops = calloc(no, sizeof *sp->ops);
    sp->refs = malloc((total + 1) * sizeof *sp->refs);
    sp->env = calloc(nv, sizeof *sp->env);
    sp->meta = calloc(nv, sizeof *sp->meta);
    sp->seen = calloc(nv, 1);
    sp->ran = calloc(no, sizeof *sp->ran);
    sp->keep = calloc(nv, sizeof *sp->keep);
  }
  if (!sp || !sp->ops || !sp->refs || !sp->env || !sp->meta || !sp->seen || !sp->ran || !sp->keep) {
    sub_free(sp);
    pd_set_error(PD_ERR_MEMORY, "%s: out of memory compiling block %d", op->type, sub->idx);
    return NULL;
  }
  int *cur = sp->refs;
  for (int k = 0; k < sub->n_ops; k++) {
    const pd_operator *o = sub->ops[k];
    sub_op *so = &sp->ops[k];
    so->op = o;
    so->in = cur;
    for (int i = 0; i < o->n_in; i++) {
      int r = pd_ir_var_index(sub, o->inputs[i]);
      for (int j = cap0; r < 0 && j < op->n_in; j++)
        if (strcmp(op->inputs[j], o->inputs[i]) == 0) r = -(j - cap0 + 2);
      *cur++ = r < 0 && r > -2 ? REF_UNRESOLVED : r;
    }
    so->out = cur;
    for (int j = 0; j < o->n_out; j++) *cur++ = pd_ir_var_index(sub, o->outputs[j]);
  }
  return sp;
}

static bool registry_op(const pd_operator *op) { return op->op_id >= 0 && op->grad_of < 0 && !op->fused; }

static bool view_op(const pd_operator *op) {
  return registry_op(op) && (pd_op_table[op->op_id]->flags & (PD_OPF_VIEW | PD_OPF_INPLACE));
}

/* Plans the arena of sp from the shapes its runs have shown; leaves it
 * without one (no error) where no plan can be made. */
static void sub_plan_arena(pd_ctl_cache *c, sub_plan *sp) {
  sp->planned_once = true;
  int nv = sp->n_vars, no = sp->n_ops;
  int *root = malloc(sizeof(int) * (size_t)(nv + 1));
  bool *escaped = calloc((size_t)nv + 1, sizeof(bool)), *planned = calloc((size_t)nv + 1, sizeof(bool));
  pd_plan_value *vals = calloc((size_t)nv + 1, sizeof *vals);
  pd_plan_op *ops = calloc((size_t)no + 1, sizeof *ops);
  int *ids = malloc(sizeof(int) * (size_t)(2 * 3 * PD_MAX_OUTPUTS * (no + 1)));
  sp->into = calloc((size_t)no + 1, sizeof *sp->into);
  sp->slot = calloc((size_t)nv + 1, sizeof *sp->slot);
  bool ok = root && escaped && planned && vals && ops && ids && sp->into && sp->slot;
  pd_memory_plan mp = {0};
  for (int s = 0; ok && s < nv; s++) root[s] = s;
  for (int k = 0; ok && k < no; k++) { /* views alias their input 0; control ops keep what they read */
    const sub_op *so = &sp->ops[k];
    if (view_op(so->op) && so->op->n_in > 0 && so->in[0] >= 0)
      for (int j = 0; j < so->op->n_out; j++)
        if (so->out[j] >= 0) root[so->out[j]] = root[so->in[0]];
    if (!registry_op(so->op) && !so->op->value)
      for (int i = 0; i < so->op->n_in; i++)
        if (so->in[i] >= 0 && pd_ctl_may_keep_input(so->op, i)) escaped[root[so->in[i]]] = true;
  }
  for (int k = 0; ok && k < no; k++) {
    const sub_op *so = &sp->ops[k];
    const pd_operator *op = so->op;
    bool fresh = (registry_op(op) && !view_op(op)) ||
                 (op->value && op->n_out == 1 && op->value->is_contiguous && !pd_array_is_value(op->value));
    bool all =
        fresh && sp->ran[k] && op->n_out > 0 && op->n_out <= PD_MAX_OUTPUTS && op->n_in <= 3 * PD_MAX_OUTPUTS;
    for (int j = 0; j < op->n_out && all; j++) {
      int s = so->out[j];
      const pd_variable *v = s >= 0 ? sp->sub->vars[s] : NULL;
      all = v && !v->persistable && !v->is_array && sp->seen[s] == 1 && !escaped[s] && root[s] == s;
    }
    sp->into[k] = all;
    for (int j = 0; j < op->n_out && all; j++) planned[so->out[j]] = true;
  }
  for (int s = 0; ok && s < nv; s++) {
    vals[s].external = !planned[s];
    if (planned[s])
      vals[s].bytes =
          (size_t)pd_shape_numel(sp->meta[s].ndim, sp->meta[s].shape) * pd_dtype_size(sp->meta[s].dtype);
    if (sp->keep[s]) vals[root[s]].keep = true;
  }
  int *cur = ids;
  for (int k = 0; ok && k < no; k++) {
    const sub_op *so = &sp->ops[k];
    pd_plan_op *po = &ops[k];
    po->inplace_in = -1;
    po->in = cur;
    for (int i = 0; i < so->op->n_in && i < 3 * PD_MAX_OUTPUTS; i++)
      if (so->in[i] >= 0) *cur++ = root[so->in[i]];
    po->n_in = (int)(cur - po->in);
    po->out = cur;
    if (sp->into[k])
      for (int j = 0; j < so->op->n_out; j++) *cur++ = so->out[j];
    po->n_out = (int)(cur - po->out);
  }
  if (ok && pd_memory_plan_build(vals, nv, ops, no, &mp) != PD_OK) {
    pd_clear_error();
    ok = false;
  }
  if (ok && mp.arena_bytes == 0) ok = false; /* nothing planned */
  if (ok && !(sp->mem = pd_alloc(mp.arena_bytes))) {
    pd_clear_error();
    ok = false;
  }
  if (ok) sp->bytes = mp.arena_bytes;
  for (int s = 0; ok && s < nv; s++) {
    if (!planned[s]) continue;
    const pd_meta *m = &sp->meta[s];
    if (!(sp->slot[s] =
              pd_tensor_from_blob((char *)sp->mem + mp.offset[s], m->dtype, m->ndim, m->shape, NULL, NULL))) {
      pd_clear_error();
      ok = false;
    }
  }
  if (!ok) { /* no arena: the sub-plan runs allocating its values */
    for (int s = 0; sp->slot && s < nv; s++) pd_tensor_release(sp->slot[s]);
    free(sp->slot), free(sp->into);
    sp->slot = NULL;
    sp->into = NULL;
    if (sp->mem) pd_free(sp->mem, sp->bytes);
    sp->mem = NULL;
    sp->bytes = 0;
  } else {
    c->stats.arenas++;
    c->stats.arena_bytes += sp->bytes;
  }
  pd_memory_plan_free(&mp);
  free(root), free(escaped), free(planned), free(vals), free(ops), free(ids);
}

/* ---- running ----------------------------------------------------------------- */
static bool in_arena(const sub_plan *sp, const pd_tensor *t) {
  return t && sp->mem && !t->is_meta && t->storage && (char *)t->storage->data >= (char *)sp->mem &&
         (char *)t->storage->data < (char *)sp->mem + sp->bytes;
}

static void clear_env(sub_plan *sp) {
  for (int s = 0; s < sp->n_vars; s++) {
    pd_tensor_release(sp->env[s]);
    sp->env[s] = NULL;
  }
}

static void observe(sub_plan *sp, int s, const pd_tensor *t) {
  if (s < 0 || !t || t->is_meta || pd_array_is_value(t) || sp->seen[s] == 2) return;
  pd_meta m;
  pd_meta_of(t, &m);
  if (sp->seen[s] == 0) {
    sp->meta[s] = m;
    sp->seen[s] = 1;
  } else if (m.dtype != sp->meta[s].dtype || m.ndim != sp->meta[s].ndim ||
             !pd_shape_eq(m.ndim, m.shape, sp->meta[s].shape)) {
    sp->seen[s] = 2;
  }
}

/* A registry op or constant written into the arena; false (no error) when
 * it cannot be (the shapes differ this time), the op then runs as usual. */
static bool run_into(pd_ctl_cache *c, sub_plan *sp, int k, pd_tensor *const *in, pd_tensor **out) {
  const sub_op *so = &sp->ops[k];
  const pd_operator *op = so->op;
  for (int j = 0; j < op->n_out; j++) out[j] = sp->slot[so->out[j]];
  if (op->value) {
    pd_tensor *d = out[0];
    if (d->dtype != op->value->dtype || d->numel != op->value->numel) return false;
    memcpy(pd_data_ptr(d), pd_data_ptr(op->value), (size_t)d->numel * pd_dtype_size(d->dtype));
  } else if (pd_dispatch_into((pd_op_id)op->op_id, in, op->n_in, &op->attrs, out, op->n_out) != PD_OK) {
    pd_clear_error();
    return false;
  }
  for (int j = 0; j < op->n_out; j++) pd_tensor_retain(out[j]);
  c->stats.into_runs++;
  return true;
}

/* Runs ops [from, to) of sp for control op ctl, captures caps. */
static pd_status sub_run(pd_ctl_cache *c, sub_plan *sp, const pd_operator *ctl, pd_tensor *const *caps,
                         int from, int to, bool arena) {
  for (int k = from; k < to; k++) {
    const sub_op *so = &sp->ops[k];
    const pd_operator *op = so->op;
    if (op->n_in > 3 * PD_MAX_OUTPUTS || op->n_out > PD_MAX_OUTPUTS)
      return pd_set_error(PD_ERR_INVALID, "%s: op %s has %d inputs", ctl->type, op->type, op->n_in);
    pd_tensor *in[3 * PD_MAX_OUTPUTS], *out[PD_MAX_OUTPUTS] = {0};
    for (int i = 0; i < op->n_in; i++) {
      int r = so->in[i];
      in[i] = r >= 0 ? sp->env[r] : r <= -2 ? caps[-r - 2] : NULL;
      if (in[i]) continue;
      if (r >= 0)
        return pd_set_error(PD_ERR_STATE, "%s: '%s' is read before any op of block %d writes it", ctl->type,
                            op->inputs[i], sp->sub->idx);
      return pd_set_error(PD_ERR_STATE, "%s: '%s' is neither a Variable of block %d nor captured", ctl->type,
                          op->inputs[i], sp->sub->idx);
    }
    int n = 0;
    pd_status st = PD_OK;
    if (arena && sp->into && sp->into[k] && run_into(c, sp, k, in, out))
      n = op->n_out;
    else
      st = pd_ctl_run_block_op(c->p, c, ctl, sp->sub->idx, op, in, out, &n);
    for (int j = 0; j < n; j++) {
      int s = so->out[j];
      if (st == PD_OK && s < 0) {
        st = pd_set_error(PD_ERR_STATE, "%s: an op writes '%s', which block %d lacks", ctl->type,
                          op->outputs[j], sp->sub->idx);
      }
      if (st != PD_OK) {
        pd_tensor_release(out[j]);
        continue;
      }
      if (!sp->planned_once) observe(sp, s, out[j]);
      pd_tensor_release(sp->env[s]);
      sp->env[s] = out[j];
    }
    if (st != PD_OK) {
      if (op->op_id < 0 && !op->value) /* a control or array op's message names it already */
        pd_error_prefix("%s", ctl->type);
      else
        pd_error_prefix("%s: %s", ctl->type, op->type);
      return st;
    }
    sp->ran[k] = true;
  }
  return PD_OK;
}

/* Plans sp's arena once every op of it has run (and shown its shapes). */
static void maybe_plan(pd_ctl_cache *c, sub_plan *sp) {
  if (sp->planned_once || pd_is_grad_enabled() || !c->arenas) return; /* a taped run never uses one */
  for (int k = 0; k < sp->n_ops; k++)
    if (!sp->ran[k]) return;
  sub_plan_arena(c, sp);
}

/* ---- the cache ---------------------------------------------------------------- */
pd_ctl_cache *pd_ctl_cache_new(const pd_program *p, bool arenas) {
  pd_ctl_cache *c = calloc(1, sizeof *c);
  if (!c) {
    pd_set_error(PD_ERR_MEMORY, "Executor: out of memory");
    return NULL;
  }
  c->p = p;
  c->arenas = arenas;
  return c;
}

void pd_ctl_cache_free(pd_ctl_cache *c) {
  if (!c) return;
  for (int i = 0; i < c->n; i++) {
    ctl_entry *e = c->e[i];
    sub_free(e->sp[0]);
    sub_free(e->sp[1]);
    for (int k = 0; k < PD_MAX_OUTPUTS; k++)
      for (int b = 0; b < 2; b++) {
        pd_tensor_release(e->carry[k][b]);
        pd_tensor_release(e->result[k][b]);
      }
    free(e);
  }
  free(c->e);
  free(c);
}

const pd_program *pd_ctl_cache_program(const pd_ctl_cache *c) { return c->p; }
const pd_ctl_stats *pd_ctl_cache_stats(const pd_ctl_cache *c) { return c ? &c->stats : NULL; }

static ctl_entry *entry_of(pd_ctl_cache *c, const pd_operator *op) {
  for (int i = 0; i < c->n; i++)
    if (c->e[i]->key == op->inputs) return c->e[i];
  if (c->n == c->cap) {
    int cap = c->cap ? 2 * c->cap : 8;
    ctl_entry **e = realloc(c->e, sizeof *e * (size_t)cap);
    if (!e) {
      pd_set_error(PD_ERR_MEMORY, "%s: out of memory", op->type);
      return NULL;
    }
    c->e = e;
    c->cap = cap;
  }
  ctl_entry *e = calloc(1, sizeof *e);
  if (!e) {
    pd_set_error(PD_ERR_MEMORY, "%s: out of memory", op->type);
    return NULL;
  }
  e->key = op->inputs;
  c->e[c->n++] = e;
  return e;
}

/* ---- while ---------------------------------------------------------------------- */
/* t's values in one of bufs[0..2): one nothing else holds (the consumer
 * of the value copied there last has let it go) and of t's shape, else one
 * made anew: how a value leaves the arena without an allocation per
 * iteration or run. Two, since a loop variable may hold the last value
 * while the next is copied. Takes the reference t; returns a new
 * reference to the buffer. */
static pd_tensor *copy_to_buffer(pd_tensor **bufs, pd_tensor *t) {
  if (!t->is_contiguous) { /* a strided view: copied anew */
    pd_tensor *r = pd_assign(t);
    pd_tensor_release(t);
    return r;
  }
  int pick = -1;
  for (int i = 0; i < 2 && pick < 0; i++) {
    pd_tensor *b = bufs[i];
    if (b && atomic_load(&b->refcount) == 1 && b->dtype == t->dtype && b->ndim == t->ndim &&
        pd_shape_eq(b->ndim, b->shape, t->shape))
      pick = i;
  }
  if (pick < 0) {
    pick = bufs[0] && atomic_load(&bufs[0]->refcount) == 1 ? 0 : 1; /* a free slot, else the second */
    if (!bufs[0]) pick = 0;
    pd_tensor_release(bufs[pick]);
    if (!(bufs[pick] = pd_empty(t->ndim, t->shape, t->dtype))) {
      pd_tensor_release(t);
      return NULL;
    }
  }
  pd_tensor *b = bufs[pick];
  memcpy(pd_data_ptr(b), pd_data_ptr(t), (size_t)t->numel * pd_dtype_size(t->dtype));
  pd_tensor_release(t);
  return pd_tensor_retain(b);
}

/* A value leaving the block (a new reference): t itself, or its bytes in
 * *buf when it lies in the arena (the next run writes there). */
static pd_tensor *leave(const sub_plan *sp, pd_tensor **bufs, pd_tensor *t) {
  pd_tensor_retain(t);
  return in_arena(sp, t) ? copy_to_buffer(bufs, t) : t;
}

pd_status pd_ctl_plan_loop(pd_ctl_cache *c, const pd_operator *op, pd_tensor *const *init,
                           pd_tensor **final) {
  ctl_entry *e = entry_of(c, op);
  if (!e) return pd_last_status();
  pd_status st = PD_OK;
  if (!e->sp[0]) {
    if ((st = pd_ctl_loop_layout(c->p, op, &e->loop)) != PD_OK) return st;
    if (!(e->sp[0] = sub_compile(e->loop.sub, op, e->loop.n))) return pd_last_status();
    c->stats.sub_plans++;
    e->sp[0]->keep[e->loop.cond_idx] = true;
    for (int i = 0; i < e->loop.n; i++) e->sp[0]->keep[e->loop.next_idx[i]] = true;
  }
  sub_plan *sp = e->sp[0];
  const pd_ctl_loop *l = &e->loop;
  int n = l->n;
  if (sp->busy) return pd_set_error(PD_ERR_STATE, "while: block %d runs inside itself", sp->sub->idx);
  sp->busy = true;
  bool arena = sp->mem && !pd_is_grad_enabled(); /* the tape keeps values: none are reused then */
  for (int i = 0; i < n; i++) sp->env[l->in_idx[i]] = pd_tensor_retain(init[i]);
  for (;;) {
    if ((st = sub_run(c, sp, op, init + n, 0, l->n_cond, arena)) != PD_OK) break;
    pd_tensor *cv = sp->env[l->cond_idx];
    if ((st = pd_ctl_check_bool_scalar(cv, "while", "the loop condition")) != PD_OK) break;
    if (pd_tensor_item(cv) == 0.0) break;
    if ((st = sub_run(c, sp, op, init + n, l->n_cond, sp->n_ops, arena)) != PD_OK) break;
    pd_tensor *next[PD_MAX_OUTPUTS];
    for (int i = 0; i < n; i++) next[i] = pd_tensor_retain(sp->env[l->next_idx[i]]);
    clear_env(sp);
    for (int i = 0; i < n; i++)
      if (next[i] && in_arena(sp, next[i]) && !(next[i] = copy_to_buffer(e->carry[i], next[i])) &&
          st == PD_OK)
        st = pd_last_status();
    for (int i = 0; i < n; i++) sp->env[l->in_idx[i]] = next[i];
    if (st != PD_OK) break;
  }
  for (int i = 0; i < n; i++) {
    pd_tensor *v = sp->env[l->in_idx[i]];
    bool carried = false;
    for (int j = 0; j < n && v; j++)
      for (int b = 0; b < 2; b++) carried |= e->carry[j][b] && v->storage == e->carry[j][b]->storage;
    final[i] = st != PD_OK ? NULL
               : carried   ? copy_to_buffer(e->result[i], pd_tensor_retain(v))
                           : leave(sp, e->result[i], v);
    if (st == PD_OK && !final[i]) st = pd_last_status();
  }
  if (st != PD_OK)
    for (int i = 0; i < n; i++) {
      pd_tensor_release(final[i]);
      final[i] = NULL;
    }
  clear_env(sp);
  sp->busy = false;
  if (st == PD_OK) maybe_plan(c, sp);
  return st;
}

/* ---- conditional_block ------------------------------------------------------------ */
pd_status pd_ctl_plan_branch(pd_ctl_cache *c, const pd_operator *op, pd_tensor *const *in, pd_tensor **res) {
  int n = (int)op->attrs.i[2];
  bool pred = false;
  pd_status st = pd_ctl_branch_taken(op, in, &pred);
  if (st != PD_OK) return st;
  int taken = pred ? 0 : 1; /* the sub-block attribute and sub-plan of the branch */
  ctl_entry *e = entry_of(c, op);
  if (!e) return pd_last_status();
  if (!e->sp[taken]) {
    const pd_static_block *sub = NULL;
    if ((st = pd_ctl_sub_block(c->p, op, taken, &sub)) != PD_OK) return st;
    if (!(e->sp[taken] = sub_compile(sub, op, 1))) return pd_last_status();
    c->stats.sub_plans++;
    for (int i = 0; i < n; i++) {
      char name[160];
      snprintf(name, sizeof name, "%s.%s_%d", op->attrs.s, taken == 0 ? "true" : "false", i);
      int s = e->res_idx[taken][i] = pd_ir_var_index(sub, name);
      if (s >= 0) e->sp[taken]->keep[s] = true;
    }
  }
  sub_plan *sp = e->sp[taken];
  if (sp->busy)
    return pd_set_error(PD_ERR_STATE, "conditional_block: block %d runs inside itself", sp->sub->idx);
  sp->busy = true;
  st = sub_run(c, sp, op, in + 1, 0, sp->n_ops, sp->mem && !pd_is_grad_enabled());
  for (int i = 0; i < n; i++) res[i] = NULL;
  for (int i = 0; i < n && st == PD_OK; i++) {
    int s = e->res_idx[taken][i];
    if (s < 0 || !sp->env[s]) {
      char name[160];
      snprintf(name, sizeof name, "%s.%s_%d", op->attrs.s, taken == 0 ? "true" : "false", i);
      st = pd_set_error(PD_ERR_INVALID, "conditional_block: block %d %s '%s'", sp->sub->idx,
                        s < 0 ? "lacks" : "never writes", name);
    } else if (!(res[i] = leave(sp, e->result[i], sp->env[s]))) {
      st = pd_last_status();
    }
  }
  if (st != PD_OK)
    for (int i = 0; i < n; i++) {
      pd_tensor_release(res[i]);
      res[i] = NULL;
    }
  clear_env(sp);
  sp->busy = false;
  if (st == PD_OK) maybe_plan(c, sp);
  return st;
}
