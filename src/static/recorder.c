/* Recording: program_guard and static mode install a tracer on the calling
 * thread; the dispatcher hands it every op, which it appends to the current
 * block of the main program instead of running it. Its outputs are new
 * Variables (meta tensors). An eager tensor reaching a recorded op becomes
 * a Variable the first time: a parameter (persistable, initialised by the
 * startup program) or a constant (an assign_value op in the main program).
 * A parameter created while a Program is being built gets its
 * initializer's ops (uniform, gaussian, full, ...) in the startup program;
 * one created before gets its value as a constant there. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "paddlec/autograd.h"
#include "paddlec/creation.h"
#include "../nn/initializer_internal.h"
#include "paddlec/manipulation.h"
#include "paddlec/math.h"
#include "static_internal.h"

#define MAX_GUARDS 64

typedef struct frame {
  pd_program *main, *startup;
  pd_tracer_fn prev_fn;
  void *prev_ctx;
  /* the executor's lowering names its temporaries itself ("<op>@<n>"),
   * leaving the process-wide counters to the programs users build */
  bool private_names;
  int next_name;
} frame;

static _Thread_local frame t_frames[MAX_GUARDS];
static _Thread_local int t_depth;
static _Thread_local int t_role;
static _Thread_local int t_static_depth = -1; /* the frame enable_static pushed */

static pd_program *g_default_main, *g_default_startup;
static pthread_mutex_t g_default_lock = PTHREAD_MUTEX_INITIALIZER;

pd_program *pd_static_default_main_program(void) {
  pthread_mutex_lock(&g_default_lock);
  if (!g_default_main) g_default_main = pd_static_program();
  pd_program *p = g_default_main;
  pthread_mutex_unlock(&g_default_lock);
  return p;
}

pd_program *pd_static_default_startup_program(void) {
  pthread_mutex_lock(&g_default_lock);
  if (!g_default_startup) g_default_startup = pd_static_program();
  pd_program *p = g_default_startup;
  pthread_mutex_unlock(&g_default_lock);
  return p;
}

static frame *top(void) {
  void *ctx = NULL;
  pd_tracer_fn fn = pd_dispatch_get_tracer(&ctx);
  (void)fn;
  return t_depth > 0 && ctx == &t_frames[t_depth - 1] ? &t_frames[t_depth - 1] : NULL;
}

pd_program *pd_static_current_main(void) {
  frame *f = top();
  return f ? f->main : NULL;
}
pd_program *pd_static_current_startup(void) {
  frame *f = top();
  return f ? f->startup : NULL;
}

int pd_static_set_role(int role) {
  int prev = t_role;
  t_role = role;
  return prev;
}

pd_static_pause pd_static_pause_begin(void) {
  pd_static_pause tok;
  tok.fn = pd_dispatch_get_tracer(&tok.ctx);
  pd_dispatch_set_tracer(NULL, NULL);
  return tok;
}
void pd_static_pause_end(pd_static_pause tok) { pd_dispatch_set_tracer(tok.fn, tok.ctx); }

/* ---- Variables for eager tensors ------------------------------------------ */
/* A copy of t's data computed eagerly (the tracer paused). */
static pd_tensor *snapshot(pd_tensor *t) {
  pd_static_pause tok = pd_static_pause_begin();
  bool g = pd_grad_mode_set(false);
  pd_internal_enter();
  pd_tensor *c = pd_assign(t);
  pd_internal_leave();
  pd_grad_mode_set(g);
  pd_static_pause_end(tok);
  return c;
}

/* An assign_value op writing `name` from a copy of t's data. */
static pd_status add_assign_value(pd_static_block *b, const char *name, pd_tensor *t, int role) {
  pd_tensor *c = snapshot(t);
  if (!c) return pd_last_status();
  const char *outs[1] = {name};
  pd_attrs a = {.dtype = t->dtype};
  pd_operator *op = pd_ir_append_op(b, PD_STATIC_ASSIGN_VALUE, NULL, 0, outs, 1, &a);
  if (!op) {
    pd_tensor_release(c);
    return pd_last_status();
  }
  op->value = c;
  op->role = role;
  return PD_OK;
}

/* Registers t (named) in main's global block as a persistable Variable
 * (param: a parameter; else a buffer) and its present value as an
 * assign_value of startup. */
static pd_variable *register_persistable(pd_program *main, pd_program *startup, pd_tensor *t, bool param) {
  char name[128];
  const char *tn = pd_tensor_name(t);
  if (tn && *tn)
    snprintf(name, sizeof name, "%s", tn);
  else
    pd_static_unique_name(param ? "param" : "generated_tensor", name, sizeof name);
  pd_static_block *gb = main->blocks[0];
  if (pd_ir_find_var(gb, name)) {
    pd_set_error(PD_ERR_INVALID,
                 "program_guard: two different %s are both named '%s'; give one another name%s",
                 param ? "parameters" : "buffers", name, param ? " (ParamAttr.name)" : "");
    return NULL;
  }
  pd_variable *v = pd_ir_add_var(gb, name, t->dtype, t->ndim, t->shape, t);
  if (!v) return NULL;
  if (!tn || !*tn) pd_tensor_set_name(t, name);
  v->persistable = true;
  v->is_parameter = param;
  v->stop_gradient = param ? t->stop_gradient : true;
  if (startup && startup != main) {
    pd_static_block *sb = startup->blocks[0];
    pd_variable *sv = pd_ir_find_var(sb, name);
    if (!sv) {
      sv = pd_ir_add_var(sb, name, t->dtype, t->ndim, t->shape, t);
      if (!sv) return NULL;
      sv->persistable = true;
      sv->is_parameter = param;
      sv->stop_gradient = v->stop_gradient;
      if (add_assign_value(sb, name, t, PD_OP_ROLE_FORWARD) != PD_OK) return NULL;
    }
  }
  return v;
}

static pd_variable *register_param(pd_program *main, pd_program *startup, pd_tensor *t) {
  return register_persistable(main, startup, t, true);
}

/* A constant: an assign_value op in the current block. */
static pd_variable *register_constant(pd_program *p, pd_tensor *t) {
  char key[96], name[128];
  pd_static_unique_name(PD_STATIC_ASSIGN_VALUE, key, sizeof key);
  snprintf(name, sizeof name, "%s.tmp_0", key);
  pd_static_block *b = p->blocks[p->current_block];
  pd_variable *v = pd_ir_add_var(b, name, t->dtype, t->ndim, t->shape, t);
  if (!v) return NULL;
  if (add_assign_value(b, name, t, t_role) != PD_OK) return NULL;
  return v;
}

pd_variable *pd_static_var_for(pd_program *p, pd_tensor *t) {
  pd_variable *v = pd_ir_var_of(p, t);
  if (v) return v;
  if (pd_tensor_is_meta(t)) {
    const char *n = pd_tensor_name(t);
    pd_set_error(PD_ERR_INVALID,
                 "program_guard: Variable '%s' belongs to another Program than the one being built",
                 n ? n : "(unnamed)");
    return NULL;
  }
  frame *f = top();
  pd_program *startup = f && f->main == p ? f->startup : NULL;
  if (pd_tensor_param_info(t)) return register_param(p, startup, t);
  if (t->is_buffer) return register_persistable(p, startup, t, false);
  return register_constant(p, t);
}

/* Before an inplace op on eager tensor t is recorded into p (built with
 * startup): a constant Variable of the global block standing for t (an
 * assign_value made when an earlier op read t) becomes persistable state,
 * as eager mode's write persists from call to call: its assign_value moves
 * to the startup program, and the write updates the scope's value (batch
 * norm's running statistics passed as plain tensors). A constant of a
 * sub-block stays one. */
static pd_status constant_to_state(pd_program *p, pd_program *startup, pd_variable *v, pd_tensor *t) {
  if (!startup || startup == p || v->persistable || v->tensor != t || pd_tensor_is_meta(t)) return PD_OK;
  pd_static_block *gb = p->blocks[0];
  if (pd_ir_find_var(gb, v->name) != v) return PD_OK;
  int k = gb->n_ops - 1;
  while (k >= 0 && !(gb->ops[k]->op_id < 0 && strcmp(gb->ops[k]->type, PD_STATIC_ASSIGN_VALUE) == 0 &&
                     gb->ops[k]->n_out == 1 && strcmp(gb->ops[k]->outputs[0], v->name) == 0))
    k--;
  if (k < 0) return PD_OK;
  pd_static_block *sb = startup->blocks[0];
  if (pd_ir_find_var(sb, v->name))
    return pd_set_error(PD_ERR_INVALID,
                        "program_guard: the startup program has a variable named '%s' already", v->name);
  pd_variable *sv = pd_ir_add_var(sb, v->name, t->dtype, t->ndim, t->shape, t);
  if (!sv) return pd_last_status();
  sv->persistable = true;
  pd_status st = add_assign_value(sb, v->name, t, PD_OP_ROLE_FORWARD);
  if (st != PD_OK) return st;
  pd_ir_remove_op(gb, k);
  v->persistable = true;
  v->stop_gradient = true;
  return PD_OK;
}

/* ---- the tracer -------------------------------------------------------------- */
/* op's Program name key (unique, or frame-private), into key. */
static void op_key(frame *f, const char *op, char *key, size_t cap) {
  if (f->private_names)
    snprintf(key, cap, "%s@%d", op, f->next_name++);
  else
    pd_static_unique_name(op, key, cap);
}

/* What every recorded op carries: its role, name scope and device. */
static void stamp(pd_operator *op) {
  op->role = t_role;
  const char *scope = pd_static_name_scope_prefix();
  if (*scope) snprintf(op->name_scope, sizeof op->name_scope, "/%s", scope);
  snprintf(op->op_device, sizeof op->op_device, "%s", pd_static_current_device());
}

/* An inplace shape change (reshape_, squeeze_, unsqueeze_) of Variable x
 * is recorded as its view op (reshape, ...) writing a new Variable of the
 * new shape, which x's handle then stands for (pd_ir_give_handle), as
 * Paddle's static graph records reshape_ as reshape: written into x's own
 * Variable, the op would leave that Variable its old shape (and, under
 * dist.to_static, its old placements), and the static backward has no
 * gradient through an inplace op. */
static int record_geometry(frame *f, const pd_op_def *def, pd_tensor *x, const pd_attrs *a,
                           const pd_meta *meta, bool stop, pd_tensor **out) {
  pd_program *p = f->main;
  pd_static_block *b = p->blocks[p->current_block];
  char view[64];
  snprintf(view, sizeof view, "%.*s", (int)strlen(def->name) - 1, def->name); /* the name less its '_' */
  int vid = pd_op_find(view);
  const pd_op_def *vdef = vid >= 0 ? pd_op_table[vid] : NULL;
  if (!vdef || !(vdef->flags & PD_OPF_VIEW) || strcmp(vdef->attr_names, def->attr_names) != 0) {
    pd_set_error(PD_ERR_UNIMPLEMENTED, "%s: no view op '%s' with its attributes to record it as", def->name,
                 view);
    return 1;
  }
  pd_variable *xv = pd_ir_var_of(p, x);
  if (!pd_tensor_is_meta(x) || xv->tensor != x || xv->persistable) {
    pd_set_error(PD_ERR_INVALID,
                 "%s: '%s' is %s; only a value computed in the Program can change its shape inplace while "
                 "recording (use %s)",
                 def->name, xv->name,
                 xv->persistable ? "a persistable Variable (a parameter or state)" : "a tensor with data",
                 view);
    return 1;
  }
  if (pd_ir_find_var(b, xv->name) != xv) {
    pd_set_error(PD_ERR_INVALID,
                 "%s: '%s' belongs to an enclosing block; a cond branch or while_loop body cannot change "
                 "its shape (use %s and return the result)",
                 def->name, xv->name, view);
    return 1;
  }
  char key[96], name[128];
  op_key(f, view, key, sizeof key);
  snprintf(name, sizeof name, "%s.tmp_0", key);
  pd_variable *nv = pd_ir_add_var(b, name, meta[0].dtype, meta[0].ndim, meta[0].shape, NULL);
  if (!nv) {
    pd_error_prefix("%s", def->name);
    return 1;
  }
  nv->stop_gradient = stop || !(vdef->flags & PD_OPF_DIFF);
  const char *ins[1] = {xv->name}, *outs[1] = {name};
  pd_operator *op = pd_ir_append_op(b, view, ins, 1, outs, 1, a);
  if (!op || pd_ir_give_handle(p, xv, nv) != PD_OK) return 1;
  stamp(op);
  x->stop_gradient = nv->stop_gradient;
  out[0] = pd_tensor_retain(x);
  return 1;
}

static int record(void *ctx, pd_op_id id, pd_tensor *const *in, int n_in, const pd_attrs *a,
                  const pd_meta *meta, pd_tensor **out, int n_out, int phase) {
  if (phase != 0) return 0;
  frame *f = ctx;
  pd_program *p = f->main;
  pd_static_block *b = p->blocks[p->current_block];
  const pd_op_def *def = pd_op_table[id];
  const char *in_names[PD_MAX_OUTPUTS];
  char out_names[PD_MAX_OUTPUTS][128];
  const char *outs[PD_MAX_OUTPUTS];
  pd_variable *ov[PD_MAX_OUTPUTS];
  for (int k = 0; k < n_out; k++) out[k] = NULL;
  if (n_in > PD_MAX_OUTPUTS) {
    pd_set_error(PD_ERR_INVALID, "%s: cannot record an op with %d inputs (at most %d)", def->name, n_in,
                 PD_MAX_OUTPUTS);
    return 1;
  }
  bool stop = true;
  for (int i = 0; i < n_in; i++) {
    pd_variable *v = pd_static_var_for(p, in[i]);
    if (!v) {
      pd_error_prefix("%s: input %d", def->name, i);
      return 1;
    }
    if (v->is_array) {
      pd_set_error(PD_ERR_INVALID, "%s: input %d ('%s') is a tensor array; read an element with array_read",
                   def->name, i, v->name);
      return 1;
    }
    /* the user may have changed the handle's flag (x.stop_gradient = False) */
    if (v->tensor == in[i]) v->stop_gradient = in[i]->stop_gradient;
    in_names[i] = v->name;
    stop &= v->stop_gradient;
  }
  bool inplace = def->flags & PD_OPF_INPLACE;
  if (inplace && (def->flags & PD_OPF_GEOMETRY) && n_in == 1 && n_out == 1)
    return record_geometry(f, def, in[0], a, meta, stop, out);
  if (inplace && n_in > 0 && !f->private_names) {
    pd_variable *v0 = pd_ir_var_of(p, in[0]);
    if (constant_to_state(p, f->startup, v0, in[0]) != PD_OK) {
      pd_error_prefix("%s", def->name);
      return 1;
    }
  }
  char key[96];
  op_key(f, def->name, key, sizeof key);
  for (int k = 0; k < n_out; k++) {
    if (inplace && k == 0) {
      ov[k] = pd_static_var_for(p, in[0]);
      outs[k] = in_names[0];
      /* add_(a, w) with w wanting a gradient: the version of a it writes
       * wants one too, as in eager (not under no_grad: an average of the
       * parameters kept in a buffer) */
      if (!stop && (def->flags & PD_OPF_DIFF) && !(def->nondiff_out & 1u) && pd_is_grad_enabled())
        ov[k]->stop_gradient = false;
      continue;
    }
    snprintf(out_names[k], sizeof out_names[k], "%s.tmp_%d", key, k);
    outs[k] = out_names[k];
    ov[k] = pd_ir_add_var(b, out_names[k], meta[k].dtype, meta[k].ndim, meta[k].shape, NULL);
    if (!ov[k]) {
      pd_error_prefix("%s", def->name);
      return 1;
    }
    ov[k]->stop_gradient = stop || !(def->flags & PD_OPF_DIFF) || (def->nondiff_out >> k & 1u);
  }
  pd_operator *op = pd_ir_append_op(b, def->name, in_names, n_in, outs, n_out, a);
  if (!op) return 1;
  stamp(op);
  for (int k = 0; k < n_out; k++) {
    out[k] = pd_tensor_retain(ov[k]->tensor);
    out[k]->stop_gradient = ov[k]->stop_gradient;
  }
  return 1;
}

/* ---- guards and mode ------------------------------------------------------------ */
static pd_status record_init_hook(const pd_initializer *init, pd_tensor *param);

static pd_status push(pd_program *main, pd_program *startup) {
  if (t_depth >= MAX_GUARDS)
    return pd_set_error(PD_ERR_STATE, "program_guard: nested more than %d deep", MAX_GUARDS);
  pd_static_install_minimize();
  pd_nn_set_init_recorder(record_init_hook);
  frame *f = &t_frames[t_depth];
  f->main = main;
  f->startup = startup;
  f->prev_fn = pd_dispatch_get_tracer(&f->prev_ctx);
  f->private_names = false;
  f->next_name = 0;
  t_depth++;
  pd_dispatch_set_tracer(record, f);
  return PD_OK;
}

static void pop(void) {
  frame *f = &t_frames[--t_depth];
  pd_dispatch_set_tracer(f->prev_fn, f->prev_ctx);
}

/* ---- parameter initialisation in the startup program ----------------------------- */
/* Records init for parameter t into startup: the ops that computed its
 * eager value (pd_initializer_values), cast to t's dtype where drawn in
 * another, the last output renamed to t's name and made a persistable
 * parameter. Running the startup program after the same pd_seed as the
 * eager initialisation draws the same numbers. A name the startup program
 * has already is kept as it is. */
static pd_status record_init(pd_program *startup, const pd_initializer *init, pd_tensor *t) {
  const char *name = pd_tensor_name(t);
  pd_static_block *sb = startup->blocks[0];
  if (!name || !*name || !pd_initializer_records(init) || pd_ir_find_var(sb, name)) return PD_OK;
  int n0 = sb->n_ops;
  pd_status st = push(startup, startup);
  if (st != PD_OK) return st;
  int role = pd_static_set_role(PD_OP_ROLE_FORWARD);
  pd_tensor *v = pd_initializer_values(init, t, &st);
  if (v && v->dtype != t->dtype) {
    pd_tensor *c = pd_cast(v, t->dtype);
    pd_tensor_release(v);
    v = c;
    if (!c) st = pd_last_status();
  }
  pd_static_set_role(role);
  pop();
  pd_variable *var = v ? pd_ir_var_of(startup, v) : NULL;
  char *tmp = var ? strdup(var->name) : NULL;
  if (st == PD_OK && var && !tmp) st = pd_set_error(PD_ERR_MEMORY, "create_parameter: out of memory");
  if (st == PD_OK && tmp) st = pd_ir_rename_var(sb, tmp, name);
  free(tmp);
  pd_tensor_release(v);
  if (st != PD_OK || !var) {
    /* nothing recorded (no elements to draw): the value becomes a constant
     * when the parameter is registered */
    pd_ir_truncate_ops(sb, n0);
    return st;
  }
  var->persistable = true;
  var->is_parameter = true;
  var->stop_gradient = t->stop_gradient;
  return PD_OK;
}

/* pd_initializer_apply's hook: a parameter initialised on a thread that is
 * building a Program (not the executor's lowering) is recorded into that
 * Program's startup program. The tracer is off while the hook runs, so the
 * innermost frame is read directly. */
static pd_status record_init_hook(const pd_initializer *init, pd_tensor *param) {
  if (t_depth <= 0) return PD_OK;
  frame *f = &t_frames[t_depth - 1];
  if (f->private_names || !f->startup || f->startup == f->main) return PD_OK;
  return record_init(f->startup, init, param);
}

pd_status pd_static_record_begin(pd_program *p) {
  pd_status st = push(p, p);
  if (st == PD_OK) t_frames[t_depth - 1].private_names = true;
  return st;
}
void pd_static_record_end(void) { pop(); }

pd_status pd_static_program_guard_begin(pd_program *main, pd_program *startup) {
  if (!main) return pd_set_error(PD_ERR_INVALID, "program_guard: main_program is NULL");
  if (!startup) startup = pd_static_default_startup_program();
  if (!startup) return pd_last_status();
  return push(main, startup);
}

pd_status pd_static_program_guard_end(void) {
  if (t_depth <= 0 || t_depth - 1 == t_static_depth)
    return pd_set_error(PD_ERR_STATE, "program_guard: _end without a matching _begin on this thread");
  pop();
  return PD_OK;
}

void pd_enable_static(void) {
  if (t_static_depth >= 0) return;
  pd_program *m = pd_static_default_main_program(), *s = pd_static_default_startup_program();
  if (m && s && push(m, s) == PD_OK) t_static_depth = t_depth - 1;
}

void pd_disable_static(void) {
  if (t_static_depth < 0) return;
  while (t_depth > t_static_depth) pop(); /* guards left open inside static mode end with it */
  t_static_depth = -1;
}

bool pd_in_dynamic_mode(void) { return top() == NULL; }

/* ---- Variables the user creates -------------------------------------------------- */
static pd_program *need_program(const char *fn) {
  pd_program *p = pd_static_current_main();
  if (!p)
    pd_set_error(PD_ERR_STATE,
                 "%s: no Program is being built on this thread (call it under program_guard or after "
                 "enable_static)",
                 fn);
  return p;
}

pd_tensor *pd_static_data(const char *name, int ndim, const int64_t *shape, pd_dtype dtype) {
  pd_program *p = need_program("static.data");
  if (!p) return NULL;
  if (!name || !*name) {
    pd_set_error(PD_ERR_INVALID, "static.data: name is empty");
    return NULL;
  }
  if (ndim < 0 || ndim > PD_MAX_DIMS || (ndim > 0 && !shape)) {
    pd_set_error(PD_ERR_INVALID, "static.data: '%s' has rank %d (expected 0..%d dims)", name, ndim,
                 PD_MAX_DIMS);
    return NULL;
  }
  for (int d = 0; d < ndim; d++)
    if (shape[d] < -1) {
      pd_set_error(PD_ERR_SHAPE, "static.data: '%s' dim %d is %lld (a size, or -1 for unknown)", name, d,
                   (long long)shape[d]);
      return NULL;
    }
  if ((unsigned)dtype >= PD_NUM_DTYPES) dtype = pd_get_default_dtype();
  pd_variable *v = pd_ir_add_var(p->blocks[0], name, dtype, ndim, shape, NULL);
  if (!v) return NULL;
  v->is_data = true;
  v->stop_gradient = true;
  return pd_scope_track(pd_tensor_retain(v->tensor));
}

pd_tensor *pd_static_data_from_spec(const pd_input_spec *spec) {
  if (!spec) {
    pd_set_error(PD_ERR_INVALID, "static.data: InputSpec is NULL");
    return NULL;
  }
  /* as everywhere an InputSpec is read, dtype 0 means float32 */
  return pd_static_data(spec->name, spec->ndim, spec->shape, spec->dtype ? spec->dtype : PD_FLOAT32);
}

pd_tensor *pd_static_create_parameter(int ndim, const int64_t *shape, pd_dtype dtype, const char *name,
                                      const pd_initializer *init, bool is_bias) {
  pd_program *p = need_program("create_parameter");
  if (!p) return NULL;
  if ((unsigned)dtype >= PD_NUM_DTYPES) dtype = pd_get_default_dtype();
  if (!pd_dtype_is_floating(dtype)) {
    pd_set_error(PD_ERR_DTYPE, "create_parameter: a parameter must be a floating dtype, got %s",
                 pd_dtype_name(dtype));
    return NULL;
  }
  pd_static_pause tok = pd_static_pause_begin();
  pd_internal_enter();
  pd_tensor *t = pd_tensor_new(dtype, ndim, shape);
  pd_internal_leave();
  pd_initializer fallback =
      is_bias ? pd_nn_initializer_constant(0.0) : pd_nn_initializer_xavier_uniform(0, 0, 1);
  if (!init) init = &fallback;
  pd_status st = t ? pd_initializer_apply(init, t) : pd_last_status();
  pd_static_pause_end(tok);
  char gen[128];
  if (!name) pd_static_unique_name("param", gen, sizeof gen);
  if (st == PD_OK) {
    pd_tensor_set_name(t, name ? name : gen);
    t->stop_gradient = false;
  }
  frame *f = top();
  if (st == PD_OK && f->startup != p && !pd_ir_find_var(p->blocks[0], pd_tensor_name(t)))
    st = record_init(f->startup, init, t);
  if (st != PD_OK) {
    pd_tensor_release(t);
    return NULL;
  }
  pd_variable *v = register_param(p, f->startup, t);
  pd_tensor_release(t); /* the Program holds it */
  return v ? pd_scope_track(pd_tensor_retain(v->tensor)) : NULL;
}

pd_tensor *pd_static_create_global_var(int ndim, const int64_t *shape, double value, pd_dtype dtype,
                                       bool persistable, const char *name) {
  pd_program *p = need_program("create_global_var");
  if (!p) return NULL;
  if ((unsigned)dtype >= PD_NUM_DTYPES) dtype = pd_get_default_dtype();
  char gen[128];
  if (!name) pd_static_unique_name("global_var", gen, sizeof gen);
  name = name ? name : gen;
  pd_static_pause tok = pd_static_pause_begin();
  pd_internal_enter();
  pd_tensor *t = pd_full(ndim, shape, value, dtype);
  pd_internal_leave();
  pd_static_pause_end(tok);
  if (!t) return NULL;
  pd_tensor_set_name(t, name);
  pd_variable *v = pd_ir_add_var(p->blocks[0], name, dtype, ndim, shape, NULL);
  pd_program *startup = top()->startup;
  pd_status st = v ? PD_OK : pd_last_status();
  if (v) v->persistable = persistable;
  if (st == PD_OK && persistable && startup != p) {
    pd_variable *sv = pd_ir_add_var(startup->blocks[0], name, dtype, ndim, shape, NULL);
    if (sv) sv->persistable = true;
    st = sv ? add_assign_value(startup->blocks[0], name, t, PD_OP_ROLE_FORWARD) : pd_last_status();
  } else if (st == PD_OK) { /* not persistable: the value is computed by the program itself */
    st = add_assign_value(p->blocks[0], name, t, PD_OP_ROLE_FORWARD);
  }
  pd_tensor_release(t);
  return st == PD_OK ? pd_scope_track(pd_tensor_retain(v->tensor)) : NULL;
}
