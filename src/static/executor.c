/* paddle.static.Executor: runs a Program's global block on real tensors.
 *
 * A run first compiles the block into a plan, cached per program and
 * version: every op's inputs and outputs resolved to variable slots, its
 * registry row looked up, and the ops no fetch needs removed (an op stays
 * when a fetched value depends on it or when it writes a persistable
 * variable, such as an optimizer update). Running the plan dispatches each
 * op through the one dispatcher (grad off, no tracer), keeping values of
 * non-persistable variables for the run only and persistable ones in the
 * scope.
 *
 * A lowered plan (every shape known) also gets an arena: the values its
 * compute ops write are placed by the buffer planner (memory_plan.h) in one
 * block allocated when the plan is made, and those ops run into them
 * (pd_dispatch_into), so a step allocates no activation memory; views and
 * inplace ops alias what they read, and a fetched arena value is copied
 * out. A program the planner refuses runs as before. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../core/alloc.h"
#include "../ops/meta_util.h"
#include "control_grad.h"
#include "control_plan.h"
#include "memory_plan.h"
#include "paddlec/creation.h"
#include "passes.h"
#include "paddlec/manipulation.h"
#include "static_internal.h"

typedef struct plan_op {
  const pd_operator *op;
  int *in, *out; /* variable slots */
  int pair;      /* a while or cond: its last grad op's index; a grad op: its forward's; else -1 */
} plan_op;

typedef struct plan {
  const pd_program *program;
  uint64_t version;
  const pd_static_block *block;
  plan_op *ops; /* every op of the block, in order */
  int n_ops;
  int *ins_outs;  /* backing store of the slot arrays */
  bool has_pairs; /* a while or cond keeps its taped run for its grad ops */
} plan;

/* A program lowered for one call's feed shapes, fetch list and scope (the
 * key), with its plan. */
typedef struct lowered {
  const pd_program *program;
  uint64_t version;
  pd_var_scope *scope;
  int n_feed, n_fetch;
  char **feed_names;
  pd_meta *feed_meta;
  int *fetch_src; /* the fetches' slots in the source program */
  pd_program *prog;
  plan plan;
  int *feed_slots, *fetch_slots; /* in prog */
  bool failed;                   /* lowering refused this program: interpret it */
  struct arena *arena;           /* NULL: the plan runs without one */
  pd_ctl_cache *ctl;             /* the sub-plans of its control ops */
  pd_pass_stats stats;           /* what the compile passes did */
  double compile_s;              /* seconds from the run's start to a plan ready to run */
} lowered;

struct pd_executor {
  pd_place place;
  bool interpret;         /* never lower (tests compare both ways) */
  bool no_arena;          /* lowered plans run without an arena (the bench compares) */
  pd_pass_options passes; /* the compile passes lowered plans get */
  plan cache;             /* the source program's */
  lowered low;            /* the last lowered form */
};

pd_executor *pd_static_executor(pd_place place) {
  if (place.kind != PD_PLACE_CPU) {
    pd_set_error(PD_ERR_UNIMPLEMENTED, "Executor: place %d is not available (CPU only)", (int)place.kind);
    return NULL;
  }
  pd_executor *e = calloc(1, sizeof *e);
  if (!e) {
    pd_set_error(PD_ERR_MEMORY, "Executor: out of memory");
    return NULL;
  }
  e->place = place;
  e->passes = pd_pass_options_all();
  return e;
}

static void plan_clear(plan *pl) {
  free(pl->ops);
  free(pl->ins_outs);
  memset(pl, 0, sizeof *pl);
}

static void lowered_clear(lowered *l);

void pd_executor_release(pd_executor *e) {
  if (!e) return;
  plan_clear(&e->cache);
  lowered_clear(&e->low);
  free(e);
}

/* Whether plan op g differentiates plan op f: f is a while or a
 * conditional_block, g its grad op reading its inputs and outputs. */
static bool differentiates(const plan_op *g, const plan_op *f) {
  int fi = g->op->fwd_n_in, fo = g->op->fwd_n_out;
  if (!pd_ctl_keeps_taped_run(f->op->ctl) || f->op->ctl_grad || !g->op->ctl_grad ||
      g->op->ctl != f->op->ctl || fi != f->op->n_in || fo != f->op->n_out || g->op->n_in != fi + 2 * fo)
    return false;
  for (int j = 0; j < fi; j++)
    if (g->in[j] < 0 || g->in[j] != f->in[j]) return false;
  for (int i = 0; i < fo; i++)
    if (f->out[i] < 0 || g->in[fi + i] != f->out[i]) return false;
  return true;
}

/* Pairs each while and conditional_block with the grad ops after it that
 * differentiate it: it keeps its taped run for them (control_grad.h). A
 * grad op's pair is its forward; a forward's, its last grad op. */
static void pair_control_ops(plan *pl) {
  for (int k = 0; k < pl->n_ops; k++) pl->ops[k].pair = -1;
  pl->has_pairs = false;
  for (int g = 0; g < pl->n_ops; g++) {
    if (!pl->ops[g].op->ctl_grad || !pd_ctl_keeps_taped_run(pl->ops[g].op->ctl)) continue;
    for (int f = g - 1; f >= 0 && pl->ops[g].pair < 0; f--) /* the nearest forward it differentiates */
      if (differentiates(&pl->ops[g], &pl->ops[f])) {
        pl->ops[g].pair = f;
        pl->ops[f].pair = g;
        pl->has_pairs = true;
      }
  }
}

static pd_status compile(plan *pl, const pd_program *p) {
  plan_clear(pl);
  const pd_static_block *b = p->blocks[0];
  size_t total = 0;
  for (int k = 0; k < b->n_ops; k++) total += (size_t)b->ops[k]->n_in + (size_t)b->ops[k]->n_out;
  pl->ops = calloc((size_t)b->n_ops + 1, sizeof *pl->ops);
  pl->ins_outs = malloc((total ? total : 1) * sizeof(int));
  if (!pl->ops || !pl->ins_outs) {
    plan_clear(pl);
    return pd_set_error(PD_ERR_MEMORY, "Executor: out of memory compiling the program");
  }
  int *cur = pl->ins_outs;
  for (int k = 0; k < b->n_ops; k++) {
    const pd_operator *op = b->ops[k];
    plan_op *po = &pl->ops[k];
    po->op = op;
    po->in = cur;
    cur += op->n_in;
    po->out = cur;
    cur += op->n_out;
    for (int s = 0; s < op->n_in + op->n_out; s++) {
      const char *nm = s < op->n_in ? op->inputs[s] : op->outputs[s - op->n_in];
      int slot = strcmp(nm, PD_STATIC_EMPTY_VAR) == 0 ? -1 : pd_ir_var_index(b, nm);
      if (slot < 0 && strcmp(nm, PD_STATIC_EMPTY_VAR) != 0) {
        plan_clear(pl);
        return pd_set_error(PD_ERR_INVALID, "Executor: op %d (%s) names variable '%s', which block 0 lacks",
                            k, op->type, nm);
      }
      (s < op->n_in ? po->in : po->out)[s < op->n_in ? s : s - op->n_in] = slot;
    }
  }
  pl->n_ops = b->n_ops;
  pl->program = p;
  pl->version = p->version;
  pl->block = b;
  pair_control_ops(pl);
  return PD_OK;
}

/* Checks a feed against its variable. */
static pd_status check_feed(const pd_static_block *b, const pd_static_feed *f, int *slot) {
  if (!f->name || !f->value)
    return pd_set_error(PD_ERR_INVALID, "Executor.run: feed entry has a NULL %s", f->name ? "value" : "name");
  *slot = pd_ir_var_index(b, f->name);
  if (*slot < 0) {
    char have[512] = "";
    size_t k = 0;
    for (int i = 0; i < b->n_vars && k + 1 < sizeof have; i++) {
      if (!b->vars[i]->is_data) continue;
      int w = snprintf(have + k, sizeof have - k, "%s'%s'", k ? ", " : "", b->vars[i]->name);
      k += w > 0 ? (size_t)w : 0;
    }
    return pd_set_error(PD_ERR_INVALID,
                        "Executor.run: feed '%s' is no variable of the program (its data: %s)", f->name,
                        k ? have : "none");
  }
  const pd_variable *v = b->vars[*slot];
  const pd_tensor *t = f->value;
  if (pd_tensor_is_meta(t))
    return pd_set_error(PD_ERR_INVALID, "Executor.run: feed '%s' is a Variable without data", f->name);
  if (t->dtype != v->dtype)
    return pd_set_error(PD_ERR_DTYPE, "Executor.run: feed '%s' is %s, but the variable is %s", f->name,
                        pd_dtype_name(t->dtype), pd_dtype_name(v->dtype));
  bool ok = t->ndim == v->ndim;
  for (int d = 0; ok && d < v->ndim; d++) ok = v->shape[d] == -1 || v->shape[d] == t->shape[d];
  if (!ok) {
    char c[160];
    return pd_set_error(PD_ERR_SHAPE, "Executor.run: feed '%s' has shape %s, but the variable's shape is %s",
                        f->name, PD_SHAPE_STR(t), pd_shape_str(v->ndim, v->shape, c, sizeof c));
  }
  return PD_OK;
}

/* The variable a fetch_list entry names. */
static pd_status fetch_slot(const pd_program *p, const pd_static_block *b, const pd_tensor *t, int *slot) {
  if (!t) return pd_set_error(PD_ERR_INVALID, "Executor.run: fetch_list entry is NULL");
  const pd_variable *v = pd_ir_var_of(p, t);
  const char *name = v ? v->name : pd_tensor_name(t);
  *slot = name ? pd_ir_var_index(b, name) : -1;
  if (*slot < 0)
    return pd_set_error(PD_ERR_INVALID, "Executor.run: fetch '%s' is no variable of the program",
                        name ? name : "(unnamed tensor)");
  return PD_OK;
}

/* Where the value of slot s comes from when no op of this run wrote it. */
static pd_status load(const pd_static_block *b, pd_var_scope *scope, pd_tensor **env, int s) {
  if (env[s]) return PD_OK;
  const pd_variable *v = b->vars[s];
  pd_tensor *t = pd_var_scope_find_var(scope, v->name);
  if (t) {
    env[s] = pd_tensor_retain(t);
    return PD_OK;
  }
  if (v->is_data)
    return pd_set_error(PD_ERR_INVALID, "Executor.run: data variable '%s' was not fed", v->name);
  if (v->persistable)
    return pd_set_error(PD_ERR_STATE,
                        "Executor.run: persistable variable '%s' is not in the scope (run the startup "
                        "program first)",
                        v->name);
  return pd_set_error(PD_ERR_STATE, "Executor.run: variable '%s' is read before any op writes it", v->name);
}

/* A grad op: the registry row's backward rule on this run's values. */
static pd_status run_grad_op(const plan_op *po, const pd_static_block *b, pd_var_scope *scope,
                             pd_tensor **env) {
  const pd_operator *op = po->op;
  const pd_op_def *def = pd_op_table[op->grad_of];
  int fi = op->fwd_n_in, fo = op->fwd_n_out;
  if (fi > PD_MAX_OUTPUTS || fo > PD_MAX_OUTPUTS)
    return pd_set_error(PD_ERR_INVALID, "Executor: %s has %d inputs and %d outputs", op->type, fi, fo);
  pd_tensor *ins[PD_MAX_OUTPUTS], *outs[PD_MAX_OUTPUTS], *gout[PD_MAX_OUTPUTS], *gin[PD_MAX_OUTPUTS];
  pd_meta in_meta[PD_MAX_OUTPUTS];
  bool needs[PD_MAX_OUTPUTS];
  pd_status st = PD_OK;
  for (int i = 0; i < op->n_in && st == PD_OK; i++)
    if (po->in[i] >= 0) st = load(b, scope, env, po->in[i]);
  if (st != PD_OK) {
    pd_error_prefix("%s", op->type);
    return st;
  }
  for (int i = 0; i < fi; i++) {
    ins[i] = env[po->in[i]];
    pd_meta_of(ins[i], &in_meta[i]);
    needs[i] = po->out[i] >= 0;
    gin[i] = NULL;
  }
  for (int k = 0; k < fo; k++) {
    outs[k] = env[po->in[fi + k]];
    int gs = po->in[fi + fo + k];
    /* no gradient flowed into output k: zeros, as the eager engine passes */
    gout[k] = gs >= 0 ? pd_tensor_retain(env[gs]) : pd_zeros(outs[k]->ndim, outs[k]->shape, outs[k]->dtype);
    if (!gout[k]) st = pd_last_status();
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
    if (st != PD_OK) pd_error_prefix("%s", op->type);
  }
  for (int i = 0; i < fi && st == PD_OK; i++) {
    if (!needs[i]) continue;
    const pd_meta *m = &in_meta[i];
    if (!gin[i]) { /* the rule found no gradient for it: zeros */
      if (!(gin[i] = pd_zeros(m->ndim, m->shape, m->dtype))) st = pd_last_status();
    } else if (gin[i]->ndim != m->ndim || !pd_shape_eq(m->ndim, gin[i]->shape, m->shape)) {
      char c[160];
      st = pd_set_error(PD_ERR_SHAPE, "%s: the gradient of input %d has shape %s, the input %s", op->type, i,
                        PD_SHAPE_STR(gin[i]), pd_shape_str(m->ndim, m->shape, c, sizeof c));
    }
  }
  for (int i = 0; i < fi; i++) {
    if (st == PD_OK && needs[i]) {
      int s = po->out[i];
      pd_tensor_release(env[s]);
      env[s] = gin[i];
      if (b->vars[s]->persistable) st = pd_var_scope_set_var(scope, b->vars[s]->name, gin[i]);
    } else {
      pd_tensor_release(gin[i]);
    }
  }
  for (int k = 0; k < fo; k++) pd_tensor_release(gout[k]);
  return st;
}

/* What a run of a plan hands its control ops besides their values. */
typedef struct run_state {
  const plan *pl;
  const bool *live;   /* the ops that run (NULL: all) */
  pd_ctl_cache *ctl;  /* the sub-plans of a lowered plan's control ops (NULL: interpreted) */
  pd_ctl_kept **kept; /* per paired forward: its taped run until its last grad op ran */
  int *uses;          /* per paired forward: how many of its grad ops are still to run */
} run_state;

/* Keeps the taped run of forward k for the grad ops of this run that
 * differentiate it (those after k paired with it that run): the gradients
 * any of them writes are asked of the tape. */
static pd_status run_and_keep(const run_state *rs, int k, const pd_program *p, pd_ctl_cache *c,
                              const pd_operator *src, pd_tensor *const *in, const bool *want,
                              pd_tensor **out) {
  const plan_op *po = &rs->pl->ops[k];
  bool grad_want[3 * PD_MAX_OUTPUTS] = {0};
  rs->uses[k] = 0;
  for (int g = k + 1; g <= po->pair; g++) {
    const plan_op *go = &rs->pl->ops[g];
    if (go->pair != k || (rs->live && !rs->live[g])) continue;
    rs->uses[k]++;
    for (int j = 0; j < po->op->n_in && j < go->op->n_out; j++) grad_want[j] |= go->out[j] >= 0;
  }
  if (rs->uses[k] == 0) /* no grad op of this run differentiates it */
    return c ? pd_ctl_run(c, src, in, want, out) : pd_static_run_control(p, src, in, want, out);
  return pd_ctl_run_kept(p, c, src, in, want, grad_want, out, &rs->kept[k]);
}

/* Runs control or array op po (the k-th of rs->pl) on in: a while or cond
 * whose grad ops run later keeps its taped run, which they differentiate,
 * the last one freeing it. */
static pd_status control_op_run(const run_state *rs, int k, pd_tensor *const *in, const bool *want,
                                pd_tensor **out) {
  const plan_op *po = &rs->pl->ops[k];
  const pd_operator *op = po->op;
  pd_ctl_cache *c = rs->ctl && op->lowered_from ? rs->ctl : NULL;
  const pd_operator *src = c ? op->lowered_from : op;
  const pd_program *p = c ? pd_ctl_cache_program(c) : rs->pl->block->program;
  int pair = rs->kept ? po->pair : -1;
  if (pair > k) return run_and_keep(rs, k, p, c, src, in, want, out);
  if (pair >= 0) {
    bool last = --rs->uses[pair] <= 0;
    pd_status st = pd_ctl_grad_kept(p, c, rs->kept[pair], src, in, want, last, out);
    if (last) { /* the steps are done with */
      pd_ctl_kept_free(rs->kept[pair]);
      rs->kept[pair] = NULL;
    }
    return st;
  }
  return c ? pd_ctl_run(c, src, in, want, out) : pd_static_run_control(p, src, in, want, out);
}

/* A control or array op (control_run.c) on this run's values: in a
 * lowered plan (ctl set) through the sub-plans of the op it stands for,
 * each result checked against the shape lowering gave its Variable. */
static pd_status run_control_op(const run_state *rs, int k, pd_var_scope *scope, pd_tensor **env) {
  const plan_op *po = &rs->pl->ops[k];
  const pd_static_block *b = rs->pl->block;
  pd_ctl_cache *ctl = rs->ctl;
  const pd_operator *op = po->op;
  if (op->n_in > 3 * PD_MAX_OUTPUTS || op->n_out > PD_MAX_OUTPUTS)
    return pd_set_error(PD_ERR_INVALID, "Executor: %s has %d inputs and %d outputs", op->type, op->n_in,
                        op->n_out);
  pd_tensor *in[3 * PD_MAX_OUTPUTS], *out[PD_MAX_OUTPUTS] = {0};
  bool want[PD_MAX_OUTPUTS];
  pd_status st;
  for (int i = 0; i < op->n_in; i++) {
    in[i] = NULL;
    if (po->in[i] < 0) continue;
    if ((st = load(b, scope, env, po->in[i])) != PD_OK) {
      pd_error_prefix("%s", op->type);
      return st;
    }
    in[i] = env[po->in[i]];
  }
  for (int k = 0; k < op->n_out; k++) want[k] = po->out[k] >= 0;
  st = control_op_run(rs, k, in, want, out);
  for (int k = 0; k < op->n_out && st == PD_OK && ctl; k++) {
    const pd_variable *v = want[k] ? b->vars[po->out[k]] : NULL;
    if (!v || v->is_array || !out[k] || pd_array_is_value(out[k])) continue;
    bool same = out[k]->dtype == v->dtype && out[k]->ndim == v->ndim;
    for (int d = 0; same && d < v->ndim; d++) same = v->shape[d] < 0 || v->shape[d] == out[k]->shape[d];
    if (!same) {
      char c[160];
      st = pd_set_error(PD_ERR_SHAPE, "%s: output '%s' is %s of shape %s, the plan expected %s of shape %s",
                        op->type, v->name, pd_dtype_name(out[k]->dtype), PD_SHAPE_STR(out[k]),
                        pd_dtype_name(v->dtype), pd_shape_str(v->ndim, v->shape, c, sizeof c));
    }
  }
  for (int k = 0; k < op->n_out; k++) {
    if (st != PD_OK || !want[k]) {
      pd_tensor_release(out[k]);
      continue;
    }
    int s = po->out[k];
    pd_tensor_release(env[s]);
    env[s] = out[k];
  }
  return st;
}

/* A fused op (passes.h): its inputs from env; outputs given (the arena's)
 * or, with out NULL, allocated from their Variables and stored in env. */
static pd_status run_fused(const plan_op *po, const pd_static_block *b, pd_var_scope *scope, pd_tensor **env,
                           bool into) {
  const pd_operator *op = po->op;
  if (op->n_in > 3 * PD_MAX_OUTPUTS || op->n_out > PD_MAX_OUTPUTS)
    return pd_set_error(PD_ERR_INVALID, "Executor: %s has %d inputs, %d outputs", op->type, op->n_in,
                        op->n_out);
  pd_tensor *in[3 * PD_MAX_OUTPUTS], *out[PD_MAX_OUTPUTS] = {0};
  pd_status st = PD_OK;
  for (int i = 0; i < op->n_in && st == PD_OK; i++)
    if ((st = load(b, scope, env, po->in[i])) == PD_OK) in[i] = env[po->in[i]];
  for (int j = 0; j < op->n_out && st == PD_OK; j++) {
    const pd_variable *v = b->vars[po->out[j]];
    out[j] = into ? pd_tensor_retain(env[po->out[j]]) : pd_empty(v->ndim, v->shape, v->dtype);
    if (!out[j]) st = pd_last_status();
  }
  if (st == PD_OK) st = op->fused->run(op->fused, in, op->n_in, out, op->n_out);
  for (int j = 0; j < op->n_out; j++) {
    int s = po->out[j];
    if (st == PD_OK && !into) {
      pd_tensor_release(env[s]);
      env[s] = pd_tensor_retain(out[j]);
      if (b->vars[s]->persistable) st = pd_var_scope_set_var(scope, b->vars[s]->name, out[j]);
    }
    pd_tensor_release(out[j]);
  }
  if (st != PD_OK) pd_error_prefix("%s", op->type);
  return st;
}

static pd_status run_op(const run_state *rs, int k, pd_var_scope *scope, pd_tensor **env) {
  const plan_op *po = &rs->pl->ops[k];
  const pd_static_block *b = rs->pl->block;
  const pd_operator *op = po->op;
  pd_tensor *out[PD_MAX_OUTPUTS];
  int n = 0;
  pd_status st;
  if (op->grad_of >= 0) return run_grad_op(po, b, scope, env);
  if (op->fused) return run_fused(po, b, scope, env, false);
  if (op->op_id < 0 && !op->value) return run_control_op(rs, k, scope, env);
  if (op->op_id < 0) { /* assign_value: a copy, unless no one can modify the constant */
    out[0] = op->shared_value ? pd_tensor_retain(op->value) : pd_assign(op->value);
    if (!out[0]) return pd_last_status();
    n = 1;
  } else {
    pd_tensor *in[PD_MAX_OUTPUTS];
    if (op->n_in > PD_MAX_OUTPUTS)
      return pd_set_error(PD_ERR_INVALID, "Executor: op %s has %d inputs", op->type, op->n_in);
    for (int i = 0; i < op->n_in; i++) {
      if ((st = load(b, scope, env, po->in[i])) != PD_OK) {
        pd_error_prefix("%s", op->type);
        return st;
      }
      in[i] = env[po->in[i]];
    }
    st = pd_dispatch((pd_op_id)op->op_id, in, op->n_in, &op->attrs, out, &n);
    if (st != PD_OK) return st;
    if (n != op->n_out) {
      for (int k = 0; k < n; k++) pd_tensor_release(out[k]);
      return pd_set_error(PD_ERR_STATE, "Executor: op %s produced %d outputs, the program records %d",
                          op->type, n, op->n_out);
    }
  }
  st = PD_OK;
  for (int k = 0; k < n; k++) {
    int s = po->out[k];
    pd_tensor_release(env[s]);
    env[s] = out[k];
    if (st == PD_OK && b->vars[s]->persistable) st = pd_var_scope_set_var(scope, b->vars[s]->name, out[k]);
  }
  return st;
}

/* live[k]: op k contributes to a fetch or writes a persistable variable. */
static pd_status mark_live(const plan *pl, const int *fetch, int n_fetch, bool *live) {
  const pd_static_block *b = pl->block;
  bool *needed = calloc((size_t)(b->n_vars ? b->n_vars : 1), sizeof *needed);
  if (!needed) return pd_set_error(PD_ERR_MEMORY, "Executor: out of memory");
  for (int i = 0; i < n_fetch; i++) needed[fetch[i]] = true;
  for (int k = pl->n_ops - 1; k >= 0; k--) {
    const plan_op *po = &pl->ops[k];
    bool l = false;
    for (int j = 0; j < po->op->n_out; j++)
      if (po->out[j] >= 0) l |= needed[po->out[j]] || b->vars[po->out[j]]->persistable;
    live[k] = l;
    if (l)
      for (int j = 0; j < po->op->n_in; j++)
        if (po->in[j] >= 0) needed[po->in[j]] = true;
  }
  free(needed);
  return PD_OK;
}

/* ---- the arena of a lowered plan ------------------------------------------- */
typedef struct arena {
  void *mem;
  size_t bytes;
  pd_tensor **slot; /* per variable slot: its tensor in the arena, or NULL */
  bool *into;       /* per op: written into the arena with pd_dispatch_into */
  int n_slots;
  pd_memory_plan mp;
} arena;

static void arena_free(arena *a) {
  if (!a) return;
  for (int s = 0; s < a->n_slots; s++) pd_tensor_release(a->slot[s]);
  free(a->slot);
  free(a->into);
  if (a->mem) pd_free(a->mem, a->bytes);
  pd_memory_plan_free(&a->mp);
  free(a);
}

/* Gradient buckets without copies: a c_coalesce op (a bucket of gradients
 * to all-reduce as one buffer) whose input is a fresh arena value that it
 * alone reads gets that value planned as a piece of its output, at the
 * input's place in the concatenation; the op producing the gradient then
 * writes it straight into the bucket, and the coalesce copies nothing for
 * it (its kernel skips an input already in place). piece_of[s]: the
 * bucket slot s is a piece of (-1: none), piece_off[s] its byte offset.
 * Returns false when out of memory. */
static bool plan_bucket_pieces(const plan *pl, const arena *a, const int *root, const bool *planned,
                               pd_plan_value *vals, int *piece_of, size_t *piece_off) {
  const pd_static_block *b = pl->block;
  int *readers = calloc((size_t)b->n_vars + 1, sizeof *readers);
  if (!readers) return false;
  for (int k = 0; k < pl->n_ops; k++)
    for (int i = 0; i < pl->ops[k].op->n_in; i++)
      if (pl->ops[k].in[i] >= 0) readers[root[pl->ops[k].in[i]]]++;
  for (int k = 0; k < pl->n_ops; k++) {
    const pd_operator *op = pl->ops[k].op;
    if (op->op_id != PD_OP_c_coalesce || op->fused || !a->into[k] || op->n_out != 1) continue;
    int f = pl->ops[k].out[0];
    size_t off = 0, es = pd_dtype_size(b->vars[f]->dtype);
    for (int i = 0; i < op->n_in; i++) {
      int m = pl->ops[k].in[i];
      if (m < 0) break;
      const pd_variable *v = b->vars[m];
      if (m != f && planned[m] && root[m] == m && readers[m] == 1 && piece_of[m] < 0 && !vals[m].keep &&
          v->dtype == b->vars[f]->dtype) {
        piece_of[m] = f;
        piece_off[m] = off;
        vals[m].external = true; /* placed with its bucket */
        vals[f].shared_writes = true;
      }
      off += (size_t)pd_shape_numel(v->ndim, v->shape) * es;
    }
  }
  free(readers);
  return true;
}

/* Plans the arena of the lowered plan pl (fetches in fetch_slots). Returns
 * NULL (no error) where a plan cannot be made; the plan then runs as the
 * interpreter does. */
static arena *arena_build(const plan *pl, pd_var_scope *scope, const int *fetch_slots, int n_fetch,
                          bool inplace) {
  const pd_static_block *b = pl->block;
  int nv = b->n_vars, no = pl->n_ops;
  arena *a = calloc(1, sizeof *a);
  int *root = malloc(sizeof(int) * (size_t)(nv + 1));
  bool *planned = calloc((size_t)nv + 1, sizeof(bool));
  pd_plan_value *vals = calloc((size_t)nv + 1, sizeof *vals);
  pd_plan_op *ops = calloc((size_t)no + 1, sizeof *ops);
  int *slots = malloc(sizeof(int) * (size_t)(2 * PD_MAX_OUTPUTS * (no + 1)));
  int *piece_of = malloc(sizeof(int) * (size_t)(nv + 1));
  size_t *piece_off = calloc((size_t)nv + 1, sizeof(size_t));
  if (a) {
    a->n_slots = nv;
    a->slot = calloc((size_t)nv + 1, sizeof *a->slot);
    a->into = calloc((size_t)no + 1, sizeof *a->into);
  }
  bool ok = a && root && planned && vals && ops && slots && piece_of && piece_off && a->slot && a->into;
  for (int s = 0; ok && s < nv; s++) root[s] = s, piece_of[s] = -1;
  /* root[s]: the value slot s aliases (views and inplace ops alias their
   * input 0); a control or array op may keep what it reads (an array its
   * elements, a loop run no iteration its inputs): those values stay out
   * of the arena */
  bool *escaped = calloc((size_t)nv + 1, sizeof(bool));
  ok = ok && escaped;
  for (int k = 0; ok && k < no; k++) {
    const pd_operator *op = pl->ops[k].op;
    const pd_op_def *def = op->op_id >= 0 && !op->fused ? pd_op_table[op->op_id] : NULL;
    if (def && (def->flags & (PD_OPF_VIEW | PD_OPF_INPLACE)) && op->grad_of < 0)
      for (int j = 0; j < op->n_out && op->n_in > 0; j++)
        if (pl->ops[k].out[j] >= 0 && pl->ops[k].in[0] >= 0) root[pl->ops[k].out[j]] = root[pl->ops[k].in[0]];
    if (op->op_id < 0 && !op->value && !op->fused && op->grad_of < 0)
      for (int i = 0; i < op->n_in; i++)
        if (pl->ops[k].in[i] >= 0 && pd_ctl_may_keep_input(op, i)) escaped[root[pl->ops[k].in[i]]] = true;
  }
  /* which ops write fresh values into the arena (views and inplace ops
   * write none) */
  for (int k = 0; ok && k < no; k++) {
    const pd_operator *op = pl->ops[k].op;
    if ((op->op_id < 0 && !op->fused) || op->grad_of >= 0 || op->n_out > PD_MAX_OUTPUTS ||
        op->n_in > PD_MAX_OUTPUTS)
      continue;
    const pd_op_def *def = op->fused ? NULL : pd_op_table[op->op_id];
    if (def && (def->flags & (PD_OPF_VIEW | PD_OPF_INPLACE))) continue;
    bool all = op->n_out > 0;
    for (int j = 0; j < op->n_out && all; j++) {
      int s = pl->ops[k].out[j];
      const pd_variable *v = s >= 0 ? b->vars[s] : NULL;
      all = v && !v->persistable && !v->is_data && !v->is_array && !escaped[s] &&
            !pd_var_scope_find_var(scope, v->name) && v->ndim >= 0 && !pd_dims_any_unknown(v->ndim, v->shape);
    }
    a->into[k] = all;
    for (int j = 0; j < op->n_out && all; j++) planned[pl->ops[k].out[j]] = true;
  }
  for (int s = 0; ok && s < nv; s++) {
    const pd_variable *v = b->vars[s];
    vals[s].external = !planned[s];
    if (planned[s]) vals[s].bytes = (size_t)pd_shape_numel(v->ndim, v->shape) * pd_dtype_size(v->dtype);
  }
  for (int i = 0; ok && i < n_fetch; i++)
    if (fetch_slots[i] >= 0) vals[root[fetch_slots[i]]].keep = true;
  if (ok) ok = plan_bucket_pieces(pl, a, root, planned, vals, piece_of, piece_off);
  int *cur = slots;
  for (int k = 0; ok && k < no; k++) {
    const pd_operator *op = pl->ops[k].op;
    pd_plan_op *po = &ops[k];
    po->inplace_in = -1;
    po->in = cur;
    /* in place: output 0 over input ip, when the planner finds it dying here */
    int ip = inplace && a->into[k] ? pd_pass_inplace_input(b, op, pl->ops[k].in, pl->ops[k].out) : -1;
    for (int i = 0; i < op->n_in && i < PD_MAX_OUTPUTS; i++) {
      if (pl->ops[k].in[i] < 0) continue;
      int r = root[pl->ops[k].in[i]]; /* not a view: a transposed view over the output is no elementwise op */
      if (i == ip && r == pl->ops[k].in[i] && planned[r]) po->inplace_in = (int)(cur - po->in);
      *cur++ = piece_of[r] >= 0 ? piece_of[r] : r; /* a bucket's piece is its bucket */
    }
    po->n_in = (int)(cur - po->in);
    po->out = cur;
    if (a->into[k])
      for (int j = 0; j < op->n_out; j++) {
        int o = pl->ops[k].out[j];
        *cur++ = o >= 0 && piece_of[o] >= 0 ? piece_of[o] : o;
      }
    po->n_out = (int)(cur - po->out);
  }
  if (ok && pd_memory_plan_build(vals, nv, ops, no, &a->mp) != PD_OK) {
    pd_clear_error(); /* e.g. a value read before any op of the plan writes it */
    ok = false;
  }
  if (ok && a->mp.arena_bytes > 0) {
    a->bytes = a->mp.arena_bytes;
    if (!(a->mem = pd_alloc(a->bytes))) {
      pd_clear_error();
      ok = false;
    }
  }
  for (int s = 0; ok && s < nv; s++) {
    if (!planned[s]) continue;
    const pd_variable *v = b->vars[s];
    int64_t at = piece_of[s] >= 0 ? a->mp.offset[piece_of[s]] + (int64_t)piece_off[s] : a->mp.offset[s];
    a->slot[s] = pd_tensor_from_blob((char *)a->mem + at, v->dtype, v->ndim, v->shape, NULL, NULL);
    if (!a->slot[s]) {
      pd_clear_error();
      ok = false;
    }
  }
  free(root), free(planned), free(vals), free(ops), free(slots), free(piece_of), free(piece_off),
      free(escaped);
  if (!ok) {
    arena_free(a);
    return NULL;
  }
  return a;
}

/* An arena op: its inputs from env, written into its planned tensors. */
static pd_status run_into(const plan_op *po, const pd_static_block *b, pd_var_scope *scope, pd_tensor **env) {
  const pd_operator *op = po->op;
  if (op->fused) return run_fused(po, b, scope, env, true);
  pd_tensor *in[PD_MAX_OUTPUTS], *out[PD_MAX_OUTPUTS];
  pd_status st = PD_OK;
  for (int i = 0; i < op->n_in && st == PD_OK; i++)
    if ((st = load(b, scope, env, po->in[i])) == PD_OK) in[i] = env[po->in[i]];
  for (int j = 0; j < op->n_out; j++) out[j] = env[po->out[j]];
  if (st == PD_OK) st = pd_dispatch_into((pd_op_id)op->op_id, in, op->n_in, &op->attrs, out, op->n_out);
  if (st != PD_OK) pd_error_prefix("%s", op->type);
  return st;
}

static double seconds_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Runs the live ops of pl (all when live is NULL) with the feeds placed in
 * feed_slots, writing the fetches (new references) on success. With an
 * arena, its tensors stand for their slots, its ops write into them, and a
 * fetched value in it is copied out (the next run reuses the bytes). */
static pd_status run_plan(const plan *pl, const bool *live, const arena *ar, pd_ctl_cache *ctl,
                          const pd_static_feed *feed, const int *feed_slots, int n_feed, const int *fetch,
                          int n_fetch, pd_var_scope *scope, pd_tensor **fetched) {
  const pd_static_block *b = pl->block;
  for (int i = 0; i < n_feed; i++)
    if (feed_slots[i] < 0 || feed_slots[i] >= b->n_vars)
      return pd_set_error(PD_ERR_STATE, "Executor.run: feed '%s' has no slot in the plan", feed[i].name);
  pd_tensor **env = calloc((size_t)b->n_vars + 1, sizeof *env);
  run_state rs = {.pl = pl, .live = live, .ctl = ctl};
  if (pl->has_pairs) {
    rs.kept = calloc((size_t)pl->n_ops, sizeof *rs.kept);
    rs.uses = calloc((size_t)pl->n_ops, sizeof *rs.uses);
  }
  if (!env || (pl->has_pairs && (!rs.kept || !rs.uses))) {
    free(env);
    free(rs.kept);
    free(rs.uses);
    return pd_set_error(PD_ERR_MEMORY, "Executor.run: out of memory");
  }
  for (int s = 0; ar && s < b->n_vars; s++)
    if (ar->slot[s]) env[s] = pd_tensor_retain(ar->slot[s]);
  for (int i = 0; i < n_feed; i++) {
    pd_tensor_release(env[feed_slots[i]]);
    env[feed_slots[i]] = pd_tensor_retain(feed[i].value);
  }
  pd_status st = PD_OK;
  for (int k = 0; k < pl->n_ops && st == PD_OK; k++) {
    if (live && !live[k]) continue;
    st = ar && ar->into[k] ? run_into(&pl->ops[k], b, scope, env) : run_op(&rs, k, scope, env);
  }
  for (int k = 0; rs.kept && k < pl->n_ops; k++) pd_ctl_kept_free(rs.kept[k]); /* a run's steps end with it */
  free(rs.kept);
  free(rs.uses);
  for (int i = 0; i < n_fetch && st == PD_OK; i++) {
    if ((st = load(b, scope, env, fetch[i])) != PD_OK) break;
    pd_tensor *t = env[fetch[i]];
    bool in_arena = ar && ar->mem && (char *)t->storage->data >= (char *)ar->mem &&
                    (char *)t->storage->data < (char *)ar->mem + ar->bytes;
    fetched[i] = in_arena ? pd_assign(t) : pd_tensor_retain(t);
    if (!fetched[i]) st = pd_last_status();
  }
  for (int i = 0; i < b->n_vars; i++) pd_tensor_release(env[i]);
  free(env);
  return st;
}

/* ---- the lowered plan cache ------------------------------------------------ */
static void lowered_clear(lowered *l) {
  arena_free(l->arena);
  pd_ctl_cache_free(l->ctl);
  for (int i = 0; i < l->n_feed; i++) free(l->feed_names[i]);
  free(l->feed_names);
  free(l->feed_meta);
  free(l->fetch_src);
  free(l->feed_slots);
  free(l->fetch_slots);
  plan_clear(&l->plan);
  pd_program_release(l->prog);
  memset(l, 0, sizeof *l);
}

static bool lowered_matches(const lowered *l, const pd_program *p, pd_var_scope *scope,
                            const pd_static_feed *feed, int n_feed, const int *fetch, int n_fetch) {
  if (l->program != p || l->version != p->version || l->scope != scope || l->n_feed != n_feed ||
      l->n_fetch != n_fetch)
    return false;
  for (int i = 0; i < n_fetch; i++)
    if (l->fetch_src[i] != fetch[i]) return false;
  for (int i = 0; i < n_feed; i++) {
    pd_meta m;
    pd_meta_of(feed[i].value, &m);
    const pd_meta *k = &l->feed_meta[i];
    if (strcmp(l->feed_names[i], feed[i].name) != 0 || m.dtype != k->dtype || m.ndim != k->ndim ||
        !pd_shape_eq(m.ndim, m.shape, k->shape))
      return false;
  }
  return true;
}

static bool has_unknown_dims(const pd_static_block *b) {
  for (int s = 0; s < b->n_vars; s++)
    if (!b->vars[s]->is_array && pd_dims_any_unknown(b->vars[s]->ndim, b->vars[s]->shape)) return true;
  return false;
}

/* Lowers p for this call into e->low (see lower.c). A program lowering
 * cannot handle (a backward rule that reads values, not only shapes) is
 * remembered as such and run by the interpreter. */
static pd_status lower_for(pd_executor *e, pd_program *p, const bool *live, pd_var_scope *scope,
                           const pd_static_feed *feed, int n_feed, const int *fetch, int n_fetch) {
  lowered *l = &e->low;
  lowered_clear(l);
  l->program = p;
  l->version = p->version;
  l->scope = scope;
  l->feed_names = calloc((size_t)n_feed + 1, sizeof *l->feed_names);
  l->feed_meta = calloc((size_t)n_feed + 1, sizeof *l->feed_meta);
  l->fetch_src = calloc((size_t)n_fetch + 1, sizeof *l->fetch_src);
  l->feed_slots = calloc((size_t)n_feed + 1, sizeof *l->feed_slots);
  l->fetch_slots = calloc((size_t)n_fetch + 1, sizeof *l->fetch_slots);
  const char **names = calloc((size_t)n_fetch + 1, sizeof *names);
  pd_status st = l->feed_names && l->feed_meta && l->fetch_src && l->feed_slots && l->fetch_slots && names
                     ? PD_OK
                     : pd_set_error(PD_ERR_MEMORY, "Executor.run: out of memory");
  for (int i = 0; i < n_feed && st == PD_OK; i++) {
    size_t len = strlen(feed[i].name) + 1;
    if (!(l->feed_names[i] = malloc(len)))
      st = pd_set_error(PD_ERR_MEMORY, "Executor.run: out of memory");
    else
      memcpy(l->feed_names[i], feed[i].name, len);
    l->n_feed = i + 1;
    pd_meta_of(feed[i].value, &l->feed_meta[i]);
  }
  l->n_fetch = n_fetch;
  for (int i = 0; i < n_fetch && st == PD_OK; i++) l->fetch_src[i] = fetch[i];
  if (st != PD_OK) {
    free(names);
    lowered_clear(l);
    return st;
  }
  if (pd_static_lower(p, live, feed, n_feed, fetch, n_fetch, scope, &l->prog, names) != PD_OK) {
    l->failed = true; /* the interpreter runs this one; the reason is of no use to the caller */
    pd_clear_error();
    free(names);
    return PD_OK;
  }
  /* a plan with value-shaped results (-1 dims after a control op) runs
   * without the passes: a fused op allocates its outputs from their shapes */
  if (!has_unknown_dims(l->prog->blocks[0]))
    st = pd_static_run_passes(l->prog, &e->passes, names, n_fetch, &l->stats);
  if (st == PD_OK && !(l->ctl = pd_ctl_cache_new(p, !e->no_arena))) st = pd_last_status();
  if (st == PD_OK) st = compile(&l->plan, l->prog);
  for (int i = 0; i < n_feed && st == PD_OK; i++)
    l->feed_slots[i] = pd_ir_var_index(l->plan.block, feed[i].name); /* every feed is a variable of prog */
  for (int i = 0; i < n_fetch && st == PD_OK; i++)
    l->fetch_slots[i] = pd_ir_var_index(l->plan.block, names[i]);
  free(names);
  if (st == PD_OK && !e->no_arena)
    l->arena = arena_build(&l->plan, scope, l->fetch_slots, n_fetch, e->passes.inplace);
  if (l->arena) l->stats.inplace = l->arena->mp.n_inplace;
  if (st != PD_OK) lowered_clear(l);
  return st;
}

void pd_executor_set_arena(pd_executor *e, bool on) {
  if (!e || e->no_arena == !on) return;
  e->no_arena = !on;
  lowered_clear(&e->low); /* the next run lowers again, with or without */
}

size_t pd_executor_arena_bytes(const pd_executor *e) {
  return e && !e->low.failed && e->low.arena ? e->low.arena->bytes : 0;
}

void pd_executor_set_passes(pd_executor *e, const pd_pass_options *o) {
  if (!e) return;
  pd_pass_options n = o ? *o : pd_pass_options_all();
  if (memcmp(&n, &e->passes, sizeof n) == 0) return;
  e->passes = n;
  lowered_clear(&e->low); /* the next run lowers again with these */
}

double pd_executor_compile_seconds(const pd_executor *e) {
  return e && !e->low.failed && e->low.prog ? e->low.compile_s : -1.0;
}

const pd_pass_stats *pd_executor_pass_stats(const pd_executor *e) {
  return e && !e->low.failed && e->low.prog ? &e->low.stats : NULL;
}

void pd_executor_set_interpret(pd_executor *e, bool on) {
  if (e) e->interpret = on;
}

const pd_ctl_stats *pd_executor_control_stats(const pd_executor *e) {
  return e && !e->low.failed && e->low.prog ? pd_ctl_cache_stats(e->low.ctl) : NULL;
}

const pd_program *pd_executor_lowered_program(const pd_executor *e) {
  return e && !e->low.failed ? e->low.prog : NULL;
}

pd_status pd_executor_run(pd_executor *e, pd_program *program, const pd_static_feed *feed, int n_feed,
                          pd_tensor *const *fetch_list, int n_fetch, pd_tensor **fetched,
                          pd_var_scope *scope) {
  if (!e) return pd_set_error(PD_ERR_INVALID, "Executor.run: executor is NULL");
  if (n_feed < 0 || n_fetch < 0 || (n_feed && !feed) || (n_fetch && (!fetch_list || !fetched)))
    return pd_set_error(PD_ERR_INVALID, "Executor.run: %d feeds at %p, %d fetches at %p (into %p)", n_feed,
                        (const void *)feed, n_fetch, (const void *)fetch_list, (void *)fetched);
  for (int i = 0; i < n_fetch; i++) fetched[i] = NULL;
  if (!program && !(program = pd_static_default_main_program())) return pd_last_status();
  if (!scope) scope = pd_static_current_scope();
  double t0 = seconds_now();
  pd_status st = PD_OK;
  if (e->cache.program != program || e->cache.version != program->version || !e->cache.ops)
    if ((st = compile(&e->cache, program)) != PD_OK) return st;
  const plan *pl = &e->cache;
  const pd_static_block *b = pl->block;

  int *fetch = calloc((size_t)n_fetch + 1, sizeof *fetch),
      *feed_slots = calloc((size_t)n_feed + 1, sizeof(int));
  bool *live = calloc((size_t)pl->n_ops + 1, sizeof *live);
  if (!fetch || !feed_slots || !live) {
    free(fetch);
    free(feed_slots);
    free(live);
    return pd_set_error(PD_ERR_MEMORY, "Executor.run: out of memory");
  }
  for (int i = 0; i < n_fetch && st == PD_OK; i++) st = fetch_slot(program, b, fetch_list[i], &fetch[i]);
  for (int i = 0; i < n_feed && st == PD_OK; i++) st = check_feed(b, &feed[i], &feed_slots[i]);
  if (st == PD_OK) st = mark_live(pl, fetch, n_fetch, live);

  pd_static_pause tok = pd_static_pause_begin();
  bool grad = pd_grad_mode_set(false);
  pd_internal_enter();
  for (int i = 0; i < program->n_lr && st == PD_OK; i++) { /* scheduler-driven rates, as of now */
    const pd_lr_entry *le = &program->lr[i];
    pd_tensor *v = pd_full(1, (int64_t[]){1}, pd_lr_get(le->sched) * le->mult, PD_FLOAT64);
    st = v ? pd_var_scope_set_var(scope, le->var, v) : pd_last_status();
    pd_tensor_release(v);
  }
  if (st == PD_OK && !e->interpret && !lowered_matches(&e->low, program, scope, feed, n_feed, fetch, n_fetch))
    if ((st = lower_for(e, program, live, scope, feed, n_feed, fetch, n_fetch)) == PD_OK)
      e->low.compile_s = seconds_now() - t0;
  const lowered *l = &e->low;
  if (st == PD_OK && !e->interpret && !l->failed)
    st = run_plan(&l->plan, NULL, l->arena, l->ctl, feed, l->feed_slots, n_feed, l->fetch_slots, n_fetch,
                  scope, fetched);
  else if (st == PD_OK)
    st = run_plan(pl, live, NULL, NULL, feed, feed_slots, n_feed, fetch, n_fetch, scope, fetched);
  pd_internal_leave();
  pd_grad_mode_set(grad);
  pd_static_pause_end(tok);

  free(fetch);
  free(feed_slots);
  free(live);
  if (st != PD_OK) {
    for (int i = 0; i < n_fetch; i++) {
      pd_tensor_release(fetched[i]);
      fetched[i] = NULL;
    }
    return st;
  }
  for (int i = 0; i < n_fetch; i++) pd_scope_track(fetched[i]);
  return PD_OK;
}
