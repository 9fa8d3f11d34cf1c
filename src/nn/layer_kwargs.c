/* Keyword arguments of a layer call (Paddle's forward(x, mask=None, ...)):
 * the checks of a call and the getters forward_kw reads them with. */
#include <string.h>

#include "layer_kwargs.h"

static const char *const kKindNames[] = {"None", "a tensor", "an int", "a float", "a bool", "a string"};

static const pd_arg *find(const pd_kwargs *kw, const char *name) {
  if (!kw || !name) return NULL;
  for (int i = 0; i < kw->n; i++)
    if (kw->args[i].name && strcmp(kw->args[i].name, name) == 0) return &kw->args[i];
  return NULL;
}

pd_status pd_kwargs_check_call(const pd_kwargs *kw, const char *layer, const char *const *names, int n) {
  if (kw->n < 0 || (kw->n > 0 && !kw->args))
    return pd_set_error(PD_ERR_INVALID, "%s: keyword arguments: %d entries at %p", layer, kw->n,
                        (const void *)kw->args);
  for (int i = 0; i < kw->n; i++) {
    const pd_arg *a = &kw->args[i];
    if (!a->name || !a->name[0])
      return pd_set_error(PD_ERR_INVALID, "%s: keyword argument %d has no name", layer, i);
    if ((unsigned)a->kind > PD_ARG_STRING)
      return pd_set_error(PD_ERR_INVALID, "%s: keyword argument '%s' has an unknown kind %d", layer, a->name,
                          (int)a->kind);
    if (a->kind == PD_ARG_TENSOR && !a->tensor)
      return pd_last_status() != PD_OK
                 ? pd_last_status()
                 : pd_set_error(PD_ERR_INVALID,
                                "%s: keyword argument '%s' is a NULL tensor (pass PD_KW_NONE for None)",
                                layer, a->name);
    for (int j = 0; j < i; j++)
      if (strcmp(kw->args[j].name, a->name) == 0)
        return pd_set_error(PD_ERR_INVALID, "%s.forward() got multiple values for keyword argument '%s'",
                            layer, a->name);
  }
  for (int i = 0; i < kw->n && n >= 0; i++) {
    bool known = false;
    for (int k = 0; k < n && !known; k++) known = strcmp(names[k], kw->args[i].name) == 0;
    if (!known)
      return pd_set_error(PD_ERR_INVALID,
                          "%s.forward() got an unexpected keyword argument '%s' (the keywords it takes are "
                          "named with pd_layer_declare_kwargs)",
                          layer, kw->args[i].name);
  }
  return PD_OK;
}

bool pd_kwargs_has(const pd_kwargs *kw, const char *name) { return find(kw, name) != NULL; }

static pd_status wrong_kind(const pd_arg *a, const char *want) {
  return pd_set_error(PD_ERR_INVALID, "keyword argument '%s': expected %s, got %s", a->name, want,
                      kKindNames[a->kind]);
}

pd_status pd_kwargs_tensor(const pd_kwargs *kw, const char *name, pd_tensor **out) {
  if (!out) return pd_set_error(PD_ERR_INVALID, "kwargs_tensor: out is NULL");
  *out = NULL;
  const pd_arg *a = find(kw, name);
  if (!a || a->kind == PD_ARG_NONE) return PD_OK;
  if (a->kind != PD_ARG_TENSOR) return wrong_kind(a, "a tensor or None");
  *out = a->tensor;
  return PD_OK;
}

pd_status pd_kwargs_int(const pd_kwargs *kw, const char *name, int64_t def, int64_t *out) {
  if (!out) return pd_set_error(PD_ERR_INVALID, "kwargs_int: out is NULL");
  *out = def;
  const pd_arg *a = find(kw, name);
  if (!a) return PD_OK;
  if (a->kind != PD_ARG_INT) return wrong_kind(a, "an int");
  *out = a->i;
  return PD_OK;
}

pd_status pd_kwargs_float(const pd_kwargs *kw, const char *name, double def, double *out) {
  if (!out) return pd_set_error(PD_ERR_INVALID, "kwargs_float: out is NULL");
  *out = def;
  const pd_arg *a = find(kw, name);
  if (!a) return PD_OK;
  if (a->kind == PD_ARG_INT) {
    *out = (double)a->i;
    return PD_OK;
  }
  if (a->kind != PD_ARG_FLOAT) return wrong_kind(a, "a float");
  *out = a->f;
  return PD_OK;
}

pd_status pd_kwargs_bool(const pd_kwargs *kw, const char *name, bool def, bool *out) {
  if (!out) return pd_set_error(PD_ERR_INVALID, "kwargs_bool: out is NULL");
  *out = def;
  const pd_arg *a = find(kw, name);
  if (!a) return PD_OK;
  if (a->kind != PD_ARG_BOOL) return wrong_kind(a, "a bool");
  *out = a->i != 0;
  return PD_OK;
}

pd_status pd_kwargs_string(const pd_kwargs *kw, const char *name, const char *def, const char **out) {
  if (!out) return pd_set_error(PD_ERR_INVALID, "kwargs_string: out is NULL");
  *out = def;
  const pd_arg *a = find(kw, name);
  if (!a) return PD_OK;
  if (a->kind != PD_ARG_STRING) return wrong_kind(a, "a string");
  *out = a->s;
  return PD_OK;
}
