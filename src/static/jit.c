/* paddle.jit: to_static traces a layer's forward into a Program and
 * returns a layer that runs it with the Executor; jit.save writes the
 * traced Program (in eval mode, pruned to its outputs) and the parameters
 * as an inference model; jit.load reads one back as a callable layer that
 * needs none of the model's code. */
#include <stdlib.h>
#include <string.h>

#include "paddlec/jit.h"
#include "static_internal.h"

#define MAX_IO 256

/* The layer to_static and jit.load return. */
typedef struct static_function {
  pd_layer base;
  pd_inference_model m; /* the Program and its feed and fetch names */
  pd_var_scope *scope;  /* the persistable values */
  pd_executor *exe;
} static_function;

static int sf_forward(pd_layer *self, pd_tensor *const *in, int n_in, pd_tensor **out, int max_out) {
  static_function *f = (static_function *)self;
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

static void sf_destroy(pd_layer *self) {
  static_function *f = (static_function *)self;
  pd_executor_release(f->exe);
  pd_var_scope_release(f->scope);
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

/* Records layer's forward on data Variables from specs into a new
 * Program (*m gets it with the feed and fetch names). */
static pd_status trace(pd_layer *layer, const pd_input_spec *specs, int n_specs, pd_inference_model *m) {
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
      if (!ins[i])
        st = pd_last_status();
      else if (!(m->feed_names[m->n_feed++] = dup_name(s.name)))
        st = pd_last_status();
    }
    if (st == PD_OK) {
      n_out = pd_layer_call(layer, ins, n_specs, outs, MAX_IO);
      if (n_out < 0)
        st = (pd_status)n_out;
      else if (n_out == 0)
        st = pd_set_error(PD_ERR_INVALID, "jit: the layer's forward returned no outputs");
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
  pd_program_release(startup);
  if (st != PD_OK) pd_inference_model_free(m);
  return st;
}

pd_layer *pd_jit_to_static(pd_layer *layer, const pd_input_spec *input_spec, int n_specs) {
  pd_inference_model m;
  if (trace(layer, input_spec, n_specs, &m) != PD_OK) return NULL;
  /* the scope holds the layer's own parameter tensors: updates to them
   * (an optimizer step) are what the next call computes with */
  pd_var_scope *scope = pd_static_scope();
  pd_status st = scope ? PD_OK : pd_last_status();
  const pd_static_block *gb = m.program->blocks[0];
  for (int k = 0; st == PD_OK && k < gb->n_vars; k++)
    if (gb->vars[k]->persistable) st = pd_var_scope_set_var(scope, gb->vars[k]->name, gb->vars[k]->tensor);
  if (st != PD_OK) {
    pd_inference_model_free(&m);
    pd_var_scope_release(scope);
    return NULL;
  }
  pd_layer *f = wrap(&m, scope);
  /* the traced layer is a sublayer: parameters() and state_dict() see its parameters */
  if (f && !pd_layer_add_sublayer(f, "layer", pd_layer_retain(layer))) {
    pd_layer_release(f);
    return NULL;
  }
  return f;
}

pd_status pd_jit_save(pd_layer *layer, const char *path, const pd_input_spec *input_spec, int n_specs) {
  if (!layer || !path) return pd_set_error(PD_ERR_INVALID, "jit.save: layer or path is NULL");
  bool training = layer->training;
  pd_layer_eval(layer); /* an inference model: dropout off, batch norm on its running statistics */
  pd_inference_model m;
  pd_status st = trace(layer, input_spec, n_specs, &m);
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
