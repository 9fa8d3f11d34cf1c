/* paddle.static.save_inference_model / load_inference_model: a Program
 * pruned to the ops its fetches need from its feeds, in <prefix>.pdmodel
 * (a Program file), and its persistable values in <prefix>.pdiparams
 * (safetensors whose metadata names the feeds and fetches in order). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "paddlec/checkpoint.h"
#include "static_internal.h"

#define MAX_IO 256

/* block 0 of p (a for_test clone) without the ops no fetch needs. */
static pd_program *prune(const pd_program *p, char *const *fetch, int n_fetch) {
  if (p->n_blocks > 1) {
    pd_set_error(PD_ERR_UNIMPLEMENTED,
                 "save_inference_model: a Program with sub-blocks cannot be pruned yet");
    return NULL;
  }
  const pd_static_block *b = p->blocks[0];
  bool *need_var = calloc((size_t)b->n_vars + 1, sizeof *need_var);
  bool *keep = calloc((size_t)b->n_ops + 1, sizeof *keep);
  pd_program *out = NULL;
  if (!need_var || !keep) {
    pd_set_error(PD_ERR_MEMORY, "save_inference_model: out of memory");
    goto done;
  }
  for (int k = 0; k < b->n_vars; k++)
    for (int f = 0; f < n_fetch; f++) need_var[k] |= strcmp(b->vars[k]->name, fetch[f]) == 0;
  for (int o = b->n_ops - 1; o >= 0; o--) {
    const pd_operator *op = b->ops[o];
    if (op->role & (PD_OP_ROLE_BACKWARD | PD_OP_ROLE_OPTIMIZE)) continue;
    for (int j = 0; j < op->n_out && !keep[o]; j++)
      for (int k = 0; k < b->n_vars && !keep[o]; k++)
        keep[o] = need_var[k] && strcmp(b->vars[k]->name, op->outputs[j]) == 0;
    /* a kept op keeps all its variables: its other outputs (max_pool2d's
     * indices) too, which the file names */
    for (int i = 0; keep[o] && i < op->n_in + op->n_out; i++) {
      const char *name = i < op->n_in ? op->inputs[i] : op->outputs[i - op->n_in];
      for (int k = 0; k < b->n_vars; k++)
        if (strcmp(b->vars[k]->name, name) == 0) need_var[k] = true;
    }
  }
  if (!(out = pd_static_program())) goto done;
  out->is_test = true;
  pd_static_block *nb = out->blocks[0];
  for (int k = 0; k < b->n_vars; k++)
    if (need_var[k] && !pd_ir_copy_var(nb, b->vars[k], NULL)) goto fail;
  for (int o = 0; o < b->n_ops; o++)
    if (keep[o] && !pd_ir_copy_op(nb, b->ops[o])) goto fail;
  goto done;
fail:
  pd_program_release(out);
  out = NULL;
done:
  free(need_var);
  free(keep);
  return out;
}

/* The value of persistable v: the scope's, else the eager tensor it stands for. */
static pd_tensor *value_of(const pd_variable *v, pd_var_scope *scope) {
  pd_tensor *t = scope ? pd_var_scope_find_var(scope, v->name) : NULL;
  if (!t && v->tensor && !pd_tensor_is_meta(v->tensor)) t = v->tensor;
  return t;
}

static pd_status put_names(pd_string_map *m, const char *kind, char *const *names, int n) {
  char key[32], num[16];
  snprintf(key, sizeof key, "%s_count", kind);
  snprintf(num, sizeof num, "%d", n);
  pd_status st = pd_string_map_set(m, key, num);
  for (int i = 0; st == PD_OK && i < n; i++) {
    snprintf(key, sizeof key, "%s_%d", kind, i);
    st = pd_string_map_set(m, key, names[i]);
  }
  return st;
}

pd_status pd_static_save_inference_model_names(const char *path_prefix, char *const *feed, int n_feed,
                                               char *const *fetch, int n_fetch, const pd_program *program,
                                               pd_var_scope *scope) {
  if (!path_prefix || !program || n_feed < 0 || n_fetch < 1 || n_feed > MAX_IO || n_fetch > MAX_IO)
    return pd_set_error(PD_ERR_INVALID,
                        "save_inference_model: path, program or the feed/fetch lists are invalid");
  const pd_static_block *gb = program->blocks[0];
  for (int i = 0; i < n_feed + n_fetch; i++) {
    const char *name = i < n_feed ? feed[i] : fetch[i - n_feed];
    if (!name || !pd_ir_find_var(gb, name))
      return pd_set_error(PD_ERR_INVALID, "save_inference_model: %s '%s' is no variable of the program",
                          i < n_feed ? "feed" : "fetch", name ? name : "(NULL)");
  }
  /* clone(for_test) semantics: dropout off, batch norm on its running statistics */
  pd_program *test = pd_ir_clone(program, true);
  pd_program *pruned = test ? prune(test, fetch, n_fetch) : NULL;
  pd_program_release(test);
  if (!pruned) return pd_last_status();
  pd_status st = PD_OK;
  const pd_static_block *b = pruned->blocks[0];
  pd_named_tensors state = {0};
  state.names = calloc((size_t)b->n_vars + 1, sizeof *state.names);
  state.tensors = calloc((size_t)b->n_vars + 1, sizeof *state.tensors);
  if (!state.names || !state.tensors) st = pd_set_error(PD_ERR_MEMORY, "save_inference_model: out of memory");
  for (int k = 0; st == PD_OK && k < b->n_vars; k++) {
    const pd_variable *v = b->vars[k];
    if (!v->persistable) continue;
    pd_tensor *t = value_of(pd_ir_find_var(gb, v->name), scope);
    if (!t)
      st = pd_set_error(
          PD_ERR_STATE,
          "save_inference_model: persistable variable '%s' has no value (run the startup program first)",
          v->name);
    state.names[state.n] = v->name;
    state.tensors[state.n++] = t;
  }
  char path[4096];
  if (st == PD_OK) {
    size_t n;
    char *text = pd_static_serialize_program(pruned, &n);
    snprintf(path, sizeof path, "%s.pdmodel", path_prefix);
    st = text ? pd_static_save_to_file(path, text, n) : pd_last_status();
    free(text);
  }
  pd_string_map meta = {0};
  if (st == PD_OK) st = pd_string_map_set(&meta, "kind", "inference");
  if (st == PD_OK) st = put_names(&meta, "feed", feed, n_feed);
  if (st == PD_OK) st = put_names(&meta, "fetch", fetch, n_fetch);
  if (st == PD_OK) {
    snprintf(path, sizeof path, "%s.pdiparams", path_prefix);
    st = pd_save_with_metadata(&state, path, &meta);
  }
  pd_string_map_free(&meta);
  free(state.names);
  free(state.tensors);
  pd_program_release(pruned);
  return st;
}

pd_status pd_static_save_inference_model(const char *path_prefix, pd_tensor *const *feed_vars, int n_feed,
                                         pd_tensor *const *fetch_vars, int n_fetch, pd_program *program,
                                         pd_var_scope *scope) {
  if (n_feed < 0 || n_fetch < 1 || n_feed > MAX_IO || n_fetch > MAX_IO || (n_feed && !feed_vars) ||
      !fetch_vars)
    return pd_set_error(PD_ERR_INVALID,
                        "save_inference_model: %d feeds and %d fetches (at least one fetch, at most %d each)",
                        n_feed, n_fetch, MAX_IO);
  char *feed[MAX_IO], *fetch[MAX_IO];
  for (int i = 0; i < n_feed + n_fetch; i++) {
    pd_tensor *t = i < n_feed ? feed_vars[i] : fetch_vars[i - n_feed];
    const char *name = t ? pd_tensor_name(t) : NULL;
    if (!name) return pd_set_error(PD_ERR_INVALID, "save_inference_model: feed/fetch %d is no Variable", i);
    if (i < n_feed)
      feed[i] = (char *)name;
    else
      fetch[i - n_feed] = (char *)name;
  }
  if (!program) program = pd_static_default_main_program();
  return pd_static_save_inference_model_names(path_prefix, feed, n_feed, fetch, n_fetch, program,
                                              scope ? scope : pd_static_current_scope());
}

void pd_inference_model_free(pd_inference_model *m) {
  if (!m) return;
  for (int i = 0; i < m->n_feed; i++) free(m->feed_names[i]);
  for (int i = 0; i < m->n_fetch; i++) free(m->fetch_names[i]);
  free(m->feed_names);
  free(m->fetch_names);
  pd_program_release(m->program);
  memset(m, 0, sizeof *m);
}

static pd_status get_names(const pd_string_map *meta, const char *kind, const pd_program *p, char ***out,
                           int *n, const char *path) {
  char key[32];
  snprintf(key, sizeof key, "%s_count", kind);
  const char *c = pd_string_map_get(meta, key);
  char *end;
  long cnt = c ? strtol(c, &end, 10) : -1;
  if (!c || *end || cnt < 0 || cnt > MAX_IO)
    return pd_set_error(PD_ERR_INVALID, "load_inference_model: %s: the metadata has no valid '%s'", path,
                        key);
  *out = calloc((size_t)cnt + 1, sizeof **out);
  if (!*out) return pd_set_error(PD_ERR_MEMORY, "load_inference_model: out of memory");
  for (int i = 0; i < cnt; i++) {
    snprintf(key, sizeof key, "%s_%d", kind, i);
    const char *name = pd_string_map_get(meta, key);
    if (!name || !pd_ir_find_var(p->blocks[0], name))
      return pd_set_error(PD_ERR_INVALID, "load_inference_model: %s: '%s' names no variable of the program",
                          path, key);
    if (!((*out)[i] = strdup(name)))
      return pd_set_error(PD_ERR_MEMORY, "load_inference_model: out of memory");
    *n = i + 1;
  }
  return PD_OK;
}

pd_status pd_static_load_inference_model(const char *path_prefix, pd_var_scope *scope,
                                         pd_inference_model *out) {
  if (!path_prefix || !out) return pd_set_error(PD_ERR_INVALID, "load_inference_model: path or out is NULL");
  memset(out, 0, sizeof *out);
  char path[4096];
  snprintf(path, sizeof path, "%s.pdmodel", path_prefix);
  out->program = pd_static_load_program_file(path);
  if (!out->program) return pd_last_status();
  snprintf(path, sizeof path, "%s.pdiparams", path_prefix);
  pd_named_tensors state = {0};
  pd_string_map meta = {0};
  pd_status st = pd_load_with_metadata(path, &state, &meta);
  if (st == PD_OK) st = get_names(&meta, "feed", out->program, &out->feed_names, &out->n_feed, path);
  if (st == PD_OK) st = get_names(&meta, "fetch", out->program, &out->fetch_names, &out->n_fetch, path);
  if (st == PD_OK) st = pd_static_set_program_state(out->program, &state, scope);
  pd_state_free(&state);
  pd_string_map_free(&meta);
  if (st != PD_OK) pd_inference_model_free(out);
  return st;
}
