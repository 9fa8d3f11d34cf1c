/* paddle.jit: to_static traces a layer's forward into a Program and
 * returns a layer that runs it with the Executor; jit.save writes the
 * traced Program (in eval mode, pruned to its outputs) and the parameters
 * as an inference model; jit.load reads one back as a callable layer that
 * needs none of the model's code. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "paddlec/autograd.h"
#include "paddlec/creation.h"
#include "paddlec/jit.h"
#include "static_internal.h"

#define MAX_IO 256

/* The gradient Program of to_static: the forward and its gradients with
 * respect to the parameters and the floating inputs, given one gradient
 * per output (fed as grad_feed[k]). */
typedef struct train_parts {
  pd_program *train;
  int n_params, n_inputs;
  pd_tensor **params; /* the layer's trainable parameters (owned references) */
  char **param_grads; /* the gradient Variable of each (NULL: none flows) */
  char **input_grads; /* n_inputs: the gradient Variable of each input (NULL: none flows) */
  char **grad_feed;   /* one name per output */
} train_parts;

/* Frees t's contents (n_fetch: its outputs) and zeroes it. */
static void free_parts(train_parts *t, int n_fetch) {
  pd_program_release(t->train);
  for (int j = 0; j < t->n_params; j++) {
    pd_tensor_release(t->params[j]);
    free(t->param_grads[j]);
  }
  for (int k = 0; t->grad_feed && k < n_fetch; k++) free(t->grad_feed[k]);
  for (int i = 0; t->input_grads && i < t->n_inputs; i++) free(t->input_grads[i]);
  free(t->params);
  free(t->param_grads);
  free(t->grad_feed);
  free(t->input_grads);
  memset(t, 0, sizeof *t);
}

/* The layer to_static and jit.load return. */
typedef struct static_function {
  pd_layer base;
  pd_inference_model m; /* the Program and its feed and fetch names */
  pd_var_scope *scope;  /* the persistable values */
  pd_executor *exe;
  train_parts t; /* to_static only (else zeroed) */
} static_function;

static _Thread_local static_function *t_applying; /* the function pd_pylayer_apply runs */

static int run_forward(static_function *f, pd_tensor *const *in, int n_in, pd_tensor **out, int max_out) {
  if (n_in != f->m.n_feed)
    return pd_set_error(PD_ERR_INVALID, "StaticFunction: called with %d inputs, the Program takes %d", n_in,
                        f->m.n_feed);
  if (max_out < f->m.n_fetch)
    return pd_set_error(PD_ERR_INVALID, "StaticFunction: room for %d outputs, the Program has %d", max_out,
                        f->m.n_fetch);
  pd_static_feed feed[MAX_IO];
  pd_tensor *fetch[MAX_IO];
  for (int i = 0; i < n_in; i++) feed[i] = (pd_static_feed){f->m.feed_names[i], in[i]};
  pd_static_block *gb = pd_program_global_block(f->m.program);
  for (int k = 0; k < f->m.n_fetch; k++)
    if (!(fetch[k] = pd_static_block_var(gb, f->m.fetch_names[k]))) return pd_last_status();
  pd_status st = pd_executor_run(f->exe, f->m.program, feed, n_in, fetch, f->m.n_fetch, out, f->scope);
  return st == PD_OK ? f->m.n_fetch : st;
}

/* The PyLayer whose forward runs the forward Program and whose backward
 * runs the gradient Program: inputs are the call's inputs, then the
 * parameters, so the eager engine accumulates their gradients. */
/* What a call's backward needs besides the saved inputs: the function and
 * the outputs' shapes (for an output no gradient reached). Saving the
 * outputs themselves would tie them to their own grad node. */
typedef struct call_data {
  static_function *f;
  int n_out;
  bool *input_needs_grad; /* per input: stop_gradient was False at the call */
  pd_meta out[];
} call_data;

static void free_call_data(void *p) {
  call_data *d = p;
  free(d->input_needs_grad);
  free(d);
}

static pd_status pl_forward(pd_pylayer_ctx *ctx, pd_tensor *const *in, int n_in, pd_tensor **out, int n_out) {
  static_function *f = t_applying;
  int n_x = n_in - f->t.n_params;
  int n = run_forward(f, in, n_x, out, n_out);
  if (n < 0) return (pd_status)n;
  call_data *d = malloc(sizeof *d + (size_t)n_out * sizeof(pd_meta));
  bool *needs = d ? calloc((size_t)n_x + 1, sizeof *needs) : NULL;
  if (!needs) {
    free(d);
    return pd_set_error(PD_ERR_MEMORY, "to_static: out of memory");
  }
  d->f = f;
  d->n_out = n_out;
  d->input_needs_grad = needs;
  for (int i = 0; i < n_x; i++) needs[i] = !pd_tensor_stop_gradient(in[i]) && f->t.input_grads[i];
  for (int k = 0; k < n_out; k++) {
    d->out[k].dtype = pd_tensor_dtype(out[k]);
    d->out[k].ndim = pd_tensor_ndim(out[k]);
    memcpy(d->out[k].shape, pd_tensor_shape(out[k]), sizeof(int64_t) * (size_t)d->out[k].ndim);
  }
  pd_pylayer_set_data(ctx, d, free_call_data);
  /* the gradient Program reruns the forward on the inputs */
  return pd_pylayer_save_for_backward(ctx, in, n_x);
}

static pd_status pl_backward(pd_pylayer_ctx *ctx, pd_tensor *const *gout, int n_out, pd_tensor **gin,
                             int n_in) {
  call_data *d = pd_pylayer_data(ctx);
  static_function *f = d->f;
  int n_x = n_in - f->t.n_params;
  for (int i = 0; i < n_in; i++) gin[i] = NULL;
  pd_static_feed feed[2 * MAX_IO];
  pd_tensor *zeros[MAX_IO] = {0}, *fetch[MAX_IO], *got[MAX_IO] = {0};
  int n_fetch = 0, slot[MAX_IO];
  pd_status st = PD_OK;
  for (int i = 0; i < n_x; i++)
    feed[i] = (pd_static_feed){f->m.feed_names[i], pd_pylayer_saved_tensor(ctx, i)};
  for (int k = 0; k < n_out && st == PD_OK; k++) {
    pd_tensor *g = gout[k];
    if (!g) g = zeros[k] = pd_zeros(d->out[k].ndim, d->out[k].shape, d->out[k].dtype);
    if (!g) st = pd_last_status();
    feed[n_x + k] = (pd_static_feed){f->t.grad_feed[k], g};
  }
  pd_static_block *gb = pd_program_global_block(f->t.train);
  /* only the gradients wanted: the executor prunes the ops of the others */
  for (int i = 0; i < n_x && st == PD_OK; i++) {
    if (!d->input_needs_grad[i]) continue;
    if (!(fetch[n_fetch] = pd_static_block_var(gb, f->t.input_grads[i]))) st = pd_last_status();
    slot[n_fetch++] = i;
  }
  for (int j = 0; j < f->t.n_params && st == PD_OK; j++) {
    if (!f->t.param_grads[j]) continue;
    if (!(fetch[n_fetch] = pd_static_block_var(gb, f->t.param_grads[j]))) st = pd_last_status();
    slot[n_fetch++] = n_x + j;
  }
  if (st == PD_OK && n_fetch)
    st = pd_executor_run(f->exe, f->t.train, feed, n_x + n_out, fetch, n_fetch, got, f->scope);
  for (int k = 0; k < n_fetch; k++) {
    if (st == PD_OK)
      gin[slot[k]] = got[k];
    else
      pd_tensor_release(got[k]);
  }
  for (int k = 0; k < n_out; k++) pd_tensor_release(zeros[k]);
  return st;
}

static const pd_pylayer k_run_program = {"run_program", pl_forward, pl_backward};

static int sf_forward(pd_layer *self, pd_tensor *const *in, int n_in, pd_tensor **out, int max_out) {
  static_function *f = (static_function *)self;
  if (!f->t.train || !pd_is_grad_enabled()) return run_forward(f, in, n_in, out, max_out);
  if (n_in != f->m.n_feed || max_out < f->m.n_fetch)
    return run_forward(f, in, n_in, out, max_out); /* its error */
  pd_tensor *args[2 * MAX_IO];
  for (int i = 0; i < n_in; i++) args[i] = in[i];
  for (int j = 0; j < f->t.n_params; j++) args[n_in + j] = f->t.params[j];
  static_function *outer = t_applying;
  t_applying = f;
  pd_status st = pd_pylayer_apply(&k_run_program, args, n_in + f->t.n_params, out, f->m.n_fetch);
  t_applying = outer;
  return st == PD_OK ? f->m.n_fetch : st;
}

static void sf_destroy(pd_layer *self) {
  static_function *f = (static_function *)self;
  pd_executor_release(f->exe);
  pd_var_scope_release(f->scope);
  free_parts(&f->t, f->m.n_fetch);
  pd_inference_model_free(&f->m);
}

static const pd_layer_type k_static_function = {"StaticFunction", sf_forward, sf_destroy, NULL};

/* A layer over m (taken over) whose values live in scope (taken over). */
static pd_layer *wrap(pd_inference_model *m, pd_var_scope *scope) {
  static_function *f = pd_layer_new(sizeof *f, &k_static_function);
  pd_executor *exe = f ? pd_static_executor(PD_CPU) : NULL;
  if (!exe) {
    if (f) pd_layer_release(&f->base);
    pd_inference_model_free(m);
    pd_var_scope_release(scope);
    return NULL;
  }
  f->m = *m;
  f->scope = scope;
  f->exe = exe;
  memset(m, 0, sizeof *m);
  return &f->base;
}

static char *dup_name(const char *s) {
  char *d = s ? strdup(s) : NULL;
  if (s && !d) pd_set_error(PD_ERR_MEMORY, "jit: out of memory");
  return d;
}

/* Under the guard of m->program, after the forward on the data Variables
 * ins: m->program becomes a copy of the forward, and t->train the forward
 * with the gradients of sum(out_k * grad_k) with respect to the trainable
 * parameters and the inputs (those recorded with stop_gradient False: the
 * floating ones). */
static pd_status add_backward(pd_inference_model *m, pd_tensor *const *ins, int n_in, pd_tensor *const *outs,
                              int n_out, train_parts *t) {
  const pd_static_block *gb = m->program->blocks[0];
  pd_program *fwd = pd_program_clone(m->program, false);
  t->params = calloc((size_t)gb->n_vars + 1, sizeof *t->params);
  t->param_grads = calloc((size_t)gb->n_vars + 1, sizeof *t->param_grads);
  t->grad_feed = calloc((size_t)n_out + 1, sizeof *t->grad_feed);
  t->input_grads = calloc((size_t)n_in + 1, sizeof *t->input_grads);
  t->n_inputs = n_in;
  pd_tensor *gv[MAX_IO] = {0}, **grads = calloc((size_t)gb->n_vars + (size_t)n_in + 1, sizeof *grads);
  pd_tensor **wrt = calloc((size_t)gb->n_vars + (size_t)n_in + 1, sizeof *wrt);
  pd_status st = fwd && t->params && t->param_grads && t->grad_feed && t->input_grads && grads && wrt
                     ? PD_OK
                     : pd_set_error(PD_ERR_MEMORY, "to_static: out of memory");
  for (int k = 0; st == PD_OK && k < gb->n_vars; k++)
    if (gb->vars[k]->is_parameter && !gb->vars[k]->stop_gradient)
      t->params[t->n_params++] = pd_tensor_retain(gb->vars[k]->tensor);
  int n_wrt = 0, input_at[MAX_IO];
  for (int j = 0; st == PD_OK && j < t->n_params; j++) wrt[n_wrt++] = t->params[j];
  for (int i = 0; st == PD_OK && i < n_in; i++) {
    input_at[i] = pd_tensor_stop_gradient(ins[i]) ? -1 : n_wrt;
    if (input_at[i] >= 0) wrt[n_wrt++] = ins[i];
  }
  for (int k = 0; st == PD_OK && k < n_out; k++) {
    char name[64];
    snprintf(name, sizeof name, "to_static_out_%d@GRAD", k);
    gv[k] = pd_static_data(name, pd_tensor_ndim(outs[k]), pd_tensor_shape(outs[k]), pd_tensor_dtype(outs[k]));
    if (!gv[k] || !(t->grad_feed[k] = dup_name(name))) st = pd_last_status();
  }
  if (st == PD_OK && n_wrt) st = pd_static_gradients(outs, n_out, wrt, n_wrt, gv, NULL, 0, grads);
  for (int j = 0; st == PD_OK && j < t->n_params; j++)
    if (grads[j] && !(t->param_grads[j] = dup_name(pd_tensor_name(grads[j])))) st = pd_last_status();
  for (int i = 0; st == PD_OK && i < n_in; i++)
    if (input_at[i] >= 0 && grads[input_at[i]] &&
        !(t->input_grads[i] = dup_name(pd_tensor_name(grads[input_at[i]]))))
      st = pd_last_status();
  for (int j = 0; grads && j < n_wrt; j++) pd_tensor_release(grads[j]);
  for (int k = 0; k < n_out; k++) pd_tensor_release(gv[k]);
  free(grads);
  free(wrt);
  if (st != PD_OK) {
    pd_program_release(fwd);
    return st;
  }
  t->train = m->program;
  m->program = fwd;
  return PD_OK;
}

/* A training step to record instead of the forward (to_static_train). */
typedef struct train_step {
  pd_jit_loss_fn loss_fn;
  void *user;
  pd_optimizer *opt;
} train_step;

/* The recorded loss of a training step, and its minimize (the backward and
 * the optimizer's update ops) after it. */
static int record_step(const train_step *ts, pd_layer *layer, pd_tensor *const *ins, int n_in,
                       pd_tensor **outs) {
  outs[0] = ts->loss_fn(layer, ins, n_in, ts->user);
  if (!outs[0])
    return pd_last_status() != PD_OK ? pd_last_status()
                                     : pd_set_error(PD_ERR_INVALID, "to_static_train: loss_fn returned NULL");
  pd_status st = pd_optimizer_minimize(ts->opt, outs[0]);
  return st == PD_OK ? 1 : st;
}

/* Records layer's forward (or, with ts, the training step) on data
 * Variables from specs into a new Program (*m gets it with the feed and
 * fetch names; *startup_out, when given, the startup Program). */
static pd_status trace(pd_layer *layer, const pd_input_spec *specs, int n_specs, pd_inference_model *m,
                       train_parts *t, const train_step *ts, pd_program **startup_out) {
  memset(m, 0, sizeof *m);
  if (!layer || n_specs < 0 || n_specs > MAX_IO || (n_specs && !specs))
    return pd_set_error(PD_ERR_INVALID, "jit: layer is NULL or the %d input specs are invalid", n_specs);
  pd_program *startup = pd_static_program();
  m->program = pd_static_program();
  m->feed_names = calloc((size_t)n_specs + 1, sizeof *m->feed_names);
  m->fetch_names = calloc(MAX_IO, sizeof *m->fetch_names);
  pd_tensor *ins[MAX_IO] = {0}, *outs[MAX_IO] = {0};
  int n_out = -1;
  pd_status st = startup && m->program && m->feed_names && m->fetch_names
                     ? pd_static_program_guard_begin(m->program, startup)
                     : pd_set_error(PD_ERR_MEMORY, "jit: out of memory");
  if (st == PD_OK) {
    for (int i = 0; i < n_specs && st == PD_OK; i++) {
      pd_input_spec s = specs[i];
      char name[32];
      if (!s.name) {
        snprintf(name, sizeof name, "input_%d", i);
        s.name = name;
      }
      ins[i] = pd_static_data_from_spec(&s);
      /* to_static differentiates with respect to its floating inputs, as
       * Paddle's InputSpec (stop_gradient False); a call asks for the
       * gradients of the inputs that need one */
      if (ins[i] && t && pd_dtype_is_floating(pd_tensor_dtype(ins[i])))
        pd_tensor_set_stop_gradient(ins[i], false);
      if (!ins[i])
        st = pd_last_status();
      else if (!(m->feed_names[m->n_feed++] = dup_name(s.name)))
        st = pd_last_status();
    }
    if (st == PD_OK) {
      n_out =
          ts ? record_step(ts, layer, ins, n_specs, outs) : pd_layer_call(layer, ins, n_specs, outs, MAX_IO);
      if (n_out < 0)
        st = (pd_status)n_out;
      else if (n_out == 0)
        st = pd_set_error(PD_ERR_INVALID, "jit: the layer's forward returned no outputs");
      else if (t)
        st = add_backward(m, ins, n_specs, outs, n_out, t);
    }
    pd_status end = pd_static_program_guard_end();
    if (st == PD_OK) st = end;
  }
  for (int k = 0; st == PD_OK && k < n_out; k++) {
    const char *name = pd_tensor_name(outs[k]);
    if (!name || !pd_ir_var_of(m->program, outs[k]))
      st = pd_set_error(PD_ERR_INVALID,
                        "jit: output %d of the forward is no Variable of the traced Program (an "
                        "input returned as it is, or a value computed outside the ops)",
                        k);
    else if (!(m->fetch_names[m->n_fetch++] = dup_name(name)))
      st = pd_last_status();
  }
  for (int i = 0; i < MAX_IO; i++) {
    pd_tensor_release(ins[i]);
    pd_tensor_release(outs[i]);
  }
  if (st == PD_OK && startup_out)
    *startup_out = startup;
  else
    pd_program_release(startup);
  if (st != PD_OK) {
    if (t) free_parts(t, n_out);
    pd_inference_model_free(m);
  }
  return st;
}

pd_layer *pd_jit_to_static(pd_layer *layer, const pd_input_spec *input_spec, int n_specs) {
  pd_inference_model m;
  train_parts t = {0};
  if (trace(layer, input_spec, n_specs, &m, &t, NULL, NULL) != PD_OK) return NULL;
  /* the scope holds the layer's own parameter tensors: updates to them
   * (an optimizer step) are what the next call computes with */
  pd_var_scope *scope = pd_static_scope();
  pd_status st = scope ? PD_OK : pd_last_status();
  const pd_static_block *gb = m.program->blocks[0];
  for (int k = 0; st == PD_OK && k < gb->n_vars; k++)
    if (gb->vars[k]->persistable) st = pd_var_scope_set_var(scope, gb->vars[k]->name, gb->vars[k]->tensor);
  if (st != PD_OK) {
    free_parts(&t, m.n_fetch);
    pd_inference_model_free(&m);
    pd_var_scope_release(scope);
    return NULL;
  }
  int n_fetch = m.n_fetch;
  pd_layer *f = wrap(&m, scope);
  if (!f) {
    free_parts(&t, n_fetch);
    return NULL;
  }
  ((static_function *)f)->t = t;
  /* the traced layer is a sublayer: parameters() and state_dict() see its parameters */
  if (f && !pd_layer_add_sublayer(f, "layer", pd_layer_retain(layer))) {
    pd_layer_release(f);
    return NULL;
  }
  return f;
}

pd_layer *pd_jit_to_static_train(pd_layer *layer, pd_jit_loss_fn loss_fn, void *user, pd_optimizer *optimizer,
                                 const pd_input_spec *input_spec, int n_specs) {
  if (!loss_fn || !optimizer) {
    pd_set_error(PD_ERR_INVALID, "to_static_train: %s is NULL", loss_fn ? "optimizer" : "loss_fn");
    return NULL;
  }
  pd_inference_model m;
  pd_program *startup = NULL;
  train_step ts = {loss_fn, user, optimizer};
  if (trace(layer, input_spec, n_specs, &m, NULL, &ts, &startup) != PD_OK) return NULL;
  pd_var_scope *scope = pd_static_scope();
  pd_executor *exe = scope ? pd_static_executor(PD_CPU) : NULL;
  /* the startup Program sets the learning rates; then the layer's own
   * tensors and the optimizer's own accumulators replace what it made for
   * them, so the update ops change what eager code sees */
  pd_status st = exe ? pd_executor_run(exe, startup, NULL, 0, NULL, 0, NULL, scope) : pd_last_status();
  const pd_static_block *gb = m.program->blocks[0];
  for (int k = 0; st == PD_OK && k < gb->n_vars; k++) {
    const pd_variable *v = gb->vars[k];
    if (v->persistable && !pd_tensor_is_meta(v->tensor)) st = pd_var_scope_set_var(scope, v->name, v->tensor);
  }
  if (st == PD_OK) st = pd_static_share_optimizer_state(m.program, optimizer, scope);
  pd_executor_release(exe);
  pd_program_release(startup);
  if (st != PD_OK) {
    pd_inference_model_free(&m);
    pd_var_scope_release(scope);
    return NULL;
  }
  pd_layer *f = wrap(&m, scope);
  if (f && !pd_layer_add_sublayer(f, "layer", pd_layer_retain(layer))) {
    pd_layer_release(f);
    return NULL;
  }
  return f;
}

pd_program *pd_jit_main_program(pd_layer *fn) {
  if (!fn || fn->type != &k_static_function) {
    pd_set_error(PD_ERR_INVALID, "jit.main_program: the layer is no to_static or jit.load result");
    return NULL;
  }
  return ((static_function *)fn)->m.program;
}

pd_status pd_jit_save(pd_layer *layer, const char *path, const pd_input_spec *input_spec, int n_specs) {
  if (!layer || !path) return pd_set_error(PD_ERR_INVALID, "jit.save: layer or path is NULL");
  bool training = layer->training;
  pd_layer_eval(layer); /* an inference model: dropout off, batch norm on its running statistics */
  pd_inference_model m;
  pd_status st = trace(layer, input_spec, n_specs, &m, NULL, NULL, NULL);
  if (training) pd_layer_train(layer);
  if (st != PD_OK) return st;
  st = pd_static_save_inference_model_names(path, m.feed_names, m.n_feed, m.fetch_names, m.n_fetch, m.program,
                                            NULL);
  pd_inference_model_free(&m);
  return st;
}

pd_layer *pd_jit_load(const char *path) {
  pd_var_scope *scope = pd_static_scope();
  if (!scope) return NULL;
  pd_inference_model m;
  if (pd_static_load_inference_model(path, scope, &m) != PD_OK) {
    pd_var_scope_release(scope);
    return NULL;
  }
  return wrap(&m, scope);
}
