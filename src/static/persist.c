/* Saving and loading a Program's persistable values (parameters, optimizer
 * state) as safetensors, and the Program files of paddle.static.save /
 * load (<prefix>.pdmodel: the Program, <prefix>.pdparams: the values). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../io/io_internal.h"
#include "paddlec/checkpoint.h"
#include "static_internal.h"

pd_status pd_static_save_to_file(const char *path, const void *data, size_t size) {
  if (!path || (!data && size)) return pd_set_error(PD_ERR_INVALID, "save_to_file: path or data is NULL");
  return pd_io_write_file(path, data, size, "save_to_file");
}

void *pd_static_load_from_file(const char *path, size_t *size) {
  if (size) *size = 0;
  if (!path || !size) {
    pd_set_error(PD_ERR_INVALID, "load_from_file: path or size is NULL");
    return NULL;
  }
  return pd_io_read_file(path, size, "load_from_file");
}

/* The persistable variables of p (global block) with their values in scope. */
static pd_status gather(const pd_program *p, pd_var_scope *scope, pd_named_tensors *out, const char *fn) {
  const pd_static_block *b = p->blocks[0];
  out->n = 0;
  out->names = calloc((size_t)b->n_vars + 1, sizeof *out->names);
  out->tensors = calloc((size_t)b->n_vars + 1, sizeof *out->tensors);
  if (!out->names || !out->tensors) {
    free(out->names);
    free(out->tensors);
    return pd_set_error(PD_ERR_MEMORY, "%s: out of memory", fn);
  }
  for (int k = 0; k < b->n_vars; k++) {
    const pd_variable *v = b->vars[k];
    if (!v->persistable) continue;
    pd_tensor *t = pd_var_scope_find_var(scope, v->name);
    if (!t) {
      free(out->names);
      free(out->tensors);
      return pd_set_error(PD_ERR_STATE,
                          "%s: persistable variable '%s' is not in the scope (run the startup "
                          "program first)",
                          fn, v->name);
    }
    out->names[out->n] = v->name;
    out->tensors[out->n++] = t;
  }
  return PD_OK;
}

static pd_var_scope *scope_or_current(pd_var_scope *scope) {
  return scope ? scope : pd_static_current_scope();
}

pd_status pd_static_save_persistables_file(const pd_program *p, const char *path, pd_var_scope *scope) {
  if (!p || !path) return pd_set_error(PD_ERR_INVALID, "save_persistables: program or path is NULL");
  pd_named_tensors st;
  pd_status s = gather(p, scope_or_current(scope), &st, "save_persistables");
  if (s != PD_OK) return s;
  pd_string_map meta = {0};
  s = pd_string_map_set(&meta, "kind", "persistables");
  if (s == PD_OK) s = pd_save_with_metadata(&st, path, &meta);
  pd_string_map_free(&meta);
  free(st.names);
  free(st.tensors);
  return s;
}

void *pd_static_serialize_persistables(const pd_program *p, pd_var_scope *scope, size_t *size) {
  if (size) *size = 0;
  if (!p || !size) {
    pd_set_error(PD_ERR_INVALID, "serialize_persistables: program or size is NULL");
    return NULL;
  }
  /* the safetensors writer writes files: go through a private temporary one */
  const char *dir = getenv("TMPDIR");
  char path[512];
  snprintf(path, sizeof path, "%s/pdc-persistables-XXXXXX", dir && *dir ? dir : "/tmp");
  int fd = mkstemp(path);
  if (fd < 0) {
    pd_set_error(PD_ERR_IO, "serialize_persistables: cannot create a temporary file in %s", path);
    return NULL;
  }
  close(fd);
  void *data = NULL;
  if (pd_static_save_persistables_file(p, path, scope) == PD_OK)
    data = pd_io_read_file(path, size, "serialize_persistables");
  unlink(path);
  return data;
}

pd_status pd_static_set_program_state(pd_program *p, const pd_named_tensors *state, pd_var_scope *scope) {
  if (!p || !state) return pd_set_error(PD_ERR_INVALID, "set_program_state: program or state is NULL");
  scope = scope_or_current(scope);
  const pd_static_block *b = p->blocks[0];
  /* check everything first: a failed load leaves the scope as it was */
  for (int pass = 0; pass < 2; pass++) {
    for (int k = 0; k < b->n_vars; k++) {
      const pd_variable *v = b->vars[k];
      if (!v->persistable) continue;
      pd_tensor *t = NULL;
      for (int i = 0; i < state->n && !t; i++)
        if (strcmp(state->names[i], v->name) == 0) t = state->tensors[i];
      if (!t)
        return pd_set_error(PD_ERR_INVALID, "set_program_state: no value for persistable variable '%s'",
                            v->name);
      if (pass == 0) {
        bool same = pd_tensor_dtype(t) == v->dtype && pd_tensor_ndim(t) == v->ndim;
        for (int d = 0; same && d < v->ndim; d++)
          same = v->shape[d] < 0 || v->shape[d] == pd_tensor_shape(t)[d];
        if (!same)
          return pd_set_error(PD_ERR_INVALID,
                              "set_program_state: the value of '%s' (%s, rank %d) does not match the "
                              "variable (%s, rank %d, or another shape)",
                              v->name, pd_dtype_name(pd_tensor_dtype(t)), pd_tensor_ndim(t),
                              pd_dtype_name(v->dtype), v->ndim);
      } else {
        pd_status s = pd_var_scope_set_var(scope, v->name, t);
        if (s != PD_OK) return s;
      }
    }
  }
  return PD_OK;
}

pd_status pd_static_deserialize_persistables(pd_program *p, const void *data, size_t size,
                                             pd_var_scope *scope) {
  if (!p || !data) return pd_set_error(PD_ERR_INVALID, "deserialize_persistables: program or data is NULL");
  pd_named_tensors st = {0};
  pd_status s = pd_load_buffer(data, size, "deserialize_persistables", &st, NULL);
  if (s == PD_OK) s = pd_static_set_program_state(p, &st, scope);
  pd_state_free(&st);
  return s;
}

static void join(char *out, size_t cap, const char *prefix, const char *ext) {
  snprintf(out, cap, "%s%s", prefix, ext);
}

pd_status pd_static_save(const pd_program *p, const char *model_path, pd_var_scope *scope) {
  if (!p || !model_path) return pd_set_error(PD_ERR_INVALID, "static.save: program or path is NULL");
  char path[4096];
  size_t n;
  char *text = pd_static_serialize_program(p, &n);
  if (!text) return pd_last_status();
  join(path, sizeof path, model_path, ".pdmodel");
  pd_status s = pd_static_save_to_file(path, text, n);
  free(text);
  join(path, sizeof path, model_path, ".pdparams");
  if (s == PD_OK) s = pd_static_save_persistables_file(p, path, scope);
  return s;
}

pd_status pd_static_load_program_state(const char *model_path, pd_named_tensors *out) {
  if (!model_path || !out) return pd_set_error(PD_ERR_INVALID, "load_program_state: path or out is NULL");
  char path[4096];
  join(path, sizeof path, model_path, ".pdparams");
  return pd_load(path, out);
}

pd_status pd_static_load(pd_program *p, const char *model_path, pd_var_scope *scope) {
  if (!p || !model_path) return pd_set_error(PD_ERR_INVALID, "static.load: program or path is NULL");
  pd_named_tensors st = {0};
  pd_status s = pd_static_load_program_state(model_path, &st);
  if (s == PD_OK) s = pd_static_set_program_state(p, &st, scope);
  pd_state_free(&st);
  return s;
}

pd_program *pd_static_load_program_file(const char *path) {
  size_t n;
  char *text = pd_static_load_from_file(path, &n);
  if (!text) return NULL;
  pd_program *p = pd_static_deserialize_program(text, n);
  if (!p) pd_error_prefix("%s", path);
  free(text);
  return p;
}
