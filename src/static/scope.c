/* paddle.static.Scope: where persistable values live between runs. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "static_internal.h"

typedef struct entry {
  char *name;
  pd_tensor *t;
} entry;

struct pd_var_scope {
  entry *v;
  int n, cap;
};

pd_var_scope *pd_static_scope(void) {
  pd_var_scope *s = calloc(1, sizeof *s);
  if (!s) pd_set_error(PD_ERR_MEMORY, "Scope: out of memory");
  return s;
}

void pd_var_scope_release(pd_var_scope *s) {
  if (!s || s == pd_static_global_scope()) return;
  for (int i = 0; i < s->n; i++) {
    free(s->v[i].name);
    pd_tensor_release(s->v[i].t);
  }
  free(s->v);
  free(s);
}

static pd_var_scope g_global;
pd_var_scope *pd_static_global_scope(void) { return &g_global; }

static int find(const pd_var_scope *s, const char *name) {
  for (int i = 0; i < s->n; i++)
    if (strcmp(s->v[i].name, name) == 0) return i;
  return -1;
}

pd_tensor *pd_var_scope_find_var(pd_var_scope *s, const char *name) {
  if (!s || !name) return NULL;
  int i = find(s, name);
  return i >= 0 ? s->v[i].t : NULL;
}

pd_status pd_var_scope_set_var(pd_var_scope *s, const char *name, pd_tensor *t) {
  if (!s || !name || !t)
    return pd_set_error(PD_ERR_INVALID, "Scope.set_var: %s is NULL",
                        !s      ? "scope"
                        : !name ? "name"
                                : "tensor");
  int i = find(s, name);
  if (i >= 0) {
    pd_tensor *old = s->v[i].t;
    s->v[i].t = pd_tensor_retain(t);
    pd_tensor_release(old);
    return PD_OK;
  }
  if (s->n == s->cap) {
    int nc = s->cap ? s->cap * 2 : 16;
    entry *nv = realloc(s->v, (size_t)nc * sizeof *nv);
    if (!nv) return pd_set_error(PD_ERR_MEMORY, "Scope.set_var: out of memory");
    s->v = nv;
    s->cap = nc;
  }
  size_t len = strlen(name) + 1;
  char *nm = malloc(len);
  if (!nm) return pd_set_error(PD_ERR_MEMORY, "Scope.set_var: out of memory");
  memcpy(nm, name, len);
  s->v[s->n].name = nm;
  s->v[s->n].t = pd_tensor_retain(t);
  s->n++;
  return PD_OK;
}

/* scope_guard: a per-thread stack. */
#define MAX_SCOPE_GUARDS 32
static _Thread_local pd_var_scope *t_guards[MAX_SCOPE_GUARDS];
static _Thread_local int t_nguards;

pd_status pd_static_scope_guard_begin(pd_var_scope *s) {
  if (!s) return pd_set_error(PD_ERR_INVALID, "scope_guard: scope is NULL");
  if (t_nguards >= MAX_SCOPE_GUARDS)
    return pd_set_error(PD_ERR_STATE, "scope_guard: nested more than %d deep", MAX_SCOPE_GUARDS);
  t_guards[t_nguards++] = s;
  return PD_OK;
}

pd_status pd_static_scope_guard_end(void) {
  if (t_nguards <= 0) return pd_set_error(PD_ERR_STATE, "scope_guard: _end without a matching _begin");
  t_nguards--;
  return PD_OK;
}

pd_var_scope *pd_static_current_scope(void) {
  return t_nguards > 0 ? t_guards[t_nguards - 1] : pd_static_global_scope();
}
