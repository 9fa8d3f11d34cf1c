/* Containers: paddle.nn.Sequential, LayerList, ParameterList, LayerDict.
 * Their members are registered with the layer base (so parameters, state
 * dicts, train/eval and printing see them); each container also keeps the
 * order and count it needs for positional access. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "paddlec/layers.h"

#define MAX_IO 64

/* One struct for the four containers: `items` are borrowed (the base holds
 * the references), `keys` are owned copies of the names in order. */
typedef struct container {
  pd_layer base;
  int64_t n, cap;
  pd_layer **items; /* Sequential / LayerList / LayerDict */
  char **keys;      /* Sequential / LayerDict */
} container;

static int sequential_forward(pd_layer *self, pd_tensor *const *in, int n_in, pd_tensor **out, int max_out);
static void container_destroy(pd_layer *self);

static const pd_layer_type sequential_type = {"Sequential", sequential_forward, container_destroy, NULL};
static const pd_layer_type layer_list_type = {"LayerList", NULL, container_destroy, NULL};
static const pd_layer_type parameter_list_type = {"ParameterList", NULL, container_destroy, NULL};
static const pd_layer_type layer_dict_type = {"LayerDict", NULL, container_destroy, NULL};

static void container_destroy(pd_layer *self) {
  container *c = (container *)self;
  for (int64_t i = 0; c->keys && i < c->n; i++) free(c->keys[i]);
  free(c->keys);
  free(c->items);
}

static container *as(const pd_layer *l, const pd_layer_type *type, const char *fn) {
  if (!l) {
    pd_set_error(PD_ERR_INVALID, "%s: layer is NULL", fn);
    return NULL;
  }
  if (l->type != type) {
    pd_set_error(PD_ERR_INVALID, "%s: expects a %s, got a %s", fn, type->name,
                 l->type && l->type->name ? l->type->name : "layer");
    return NULL;
  }
  return (container *)l;
}

static pd_status grow(container *c, bool with_keys) {
  if (c->n < c->cap) return PD_OK;
  int64_t cap = c->cap ? c->cap * 2 : 8;
  pd_layer **items = realloc(c->items, (size_t)cap * sizeof *items);
  if (!items) return pd_set_error(PD_ERR_MEMORY, "%s: out of memory", c->base.type->name);
  c->items = items;
  if (with_keys) {
    char **keys = realloc(c->keys, (size_t)cap * sizeof *keys);
    if (!keys) return pd_set_error(PD_ERR_MEMORY, "%s: out of memory", c->base.type->name);
    c->keys = keys;
  }
  c->cap = cap;
  return PD_OK;
}

/* Normalises a Python-style index against n; the error names both. */
static pd_status norm_index(const char *fn, int64_t index, int64_t n, int64_t *out) {
  if (index < -n || index >= n)
    return pd_set_error(PD_ERR_INDEX,
                        "%s: index %lld is out of range for length %lld (valid range [%lld, %lld))", fn,
                        (long long)index, (long long)n, (long long)-n, (long long)n);
  *out = index < 0 ? index + n : index;
  return PD_OK;
}

static void name_of(int64_t i, char *buf, size_t cap) { snprintf(buf, cap, "%lld", (long long)i); }

/* Registers sub under key and appends it (takes over sub's reference). */
static pd_status push(container *c, const char *key, pd_layer *sub, bool with_keys) {
  if (grow(c, with_keys) != PD_OK) {
    pd_layer_release(sub);
    return pd_last_status();
  }
  char *k = NULL;
  if (with_keys && !(k = strdup(key))) {
    pd_layer_release(sub);
    return pd_set_error(PD_ERR_MEMORY, "%s: out of memory", c->base.type->name);
  }
  if (!pd_layer_add_sublayer(&c->base, key, sub)) {
    free(k);
    return pd_last_status();
  }
  c->items[c->n] = sub;
  if (with_keys) c->keys[c->n] = k;
  c->n++;
  return PD_OK;
}

static void release_from(pd_layer *const *layers, int from, int n) {
  for (int i = from; i < n; i++) pd_layer_release(layers[i]);
}

/* ---- Sequential -------------------------------------------------------------- */
static pd_layer *sequential_build(const char *const *names, pd_layer *const *layers, int n) {
  if (n < 0 || (n > 0 && !layers)) {
    pd_set_error(PD_ERR_INVALID, "Sequential: invalid layer list (n = %d)", n);
    return NULL;
  }
  for (int i = 0; i < n; i++) {
    if (!layers[i] || (names && !names[i])) {
      bool keep = !layers[i] && pd_last_status() != PD_OK; /* the error that made the layer NULL */
      release_from(layers, 0, n);
      if (!keep) pd_set_error(PD_ERR_INVALID, "Sequential: %s %d is NULL", layers[i] ? "name" : "layer", i);
      return NULL;
    }
  }
  container *c = pd_layer_new(sizeof *c, &sequential_type);
  if (!c) {
    release_from(layers, 0, n);
    return NULL;
  }
  for (int i = 0; i < n; i++) {
    char buf[32];
    if (!names) name_of(i, buf, sizeof buf);
    if (names && pd_layer_sublayer(&c->base, names[i])) {
      pd_set_error(PD_ERR_INVALID, "Sequential: name '%s' is given twice", names[i]);
      release_from(layers, i, n);
      pd_layer_release(&c->base);
      return NULL;
    }
    if (push(c, names ? names[i] : buf, layers[i], true) != PD_OK) {
      release_from(layers, i + 1, n);
      pd_layer_release(&c->base);
      return NULL;
    }
  }
  return &c->base;
}

pd_layer *pd_nn_sequential(pd_layer *const *layers, int n) { return sequential_build(NULL, layers, n); }

pd_layer *pd_nn_sequential_named(const char *const *names, pd_layer *const *layers, int n) {
  if (!names && n > 0) {
    release_from(layers, 0, layers ? n : 0);
    pd_set_error(PD_ERR_INVALID, "Sequential: names is NULL");
    return NULL;
  }
  return sequential_build(names, layers, n);
}

static int sequential_forward(pd_layer *self, pd_tensor *const *in, int n_in, pd_tensor **out, int max_out) {
  container *c = (container *)self;
  pd_tensor *buf[2][MAX_IO];
  if (n_in > MAX_IO) return pd_set_error(PD_ERR_INVALID, "Sequential: %d inputs (at most %d)", n_in, MAX_IO);
  for (int i = 0; i < n_in; i++) buf[0][i] = in[i];
  int n = n_in, cur = 0;
  for (int64_t k = 0; k < c->n; k++) {
    n = pd_layer_call(c->items[k], buf[cur], n, buf[cur ^ 1], MAX_IO);
    if (n < 0) return n;
    cur ^= 1;
  }
  if (n > max_out)
    return pd_set_error(PD_ERR_INVALID, "Sequential: the last layer gave %d outputs for room of %d", n,
                        max_out);
  for (int i = 0; i < n; i++) out[i] = buf[cur][i];
  return n;
}

pd_layer *pd_nn_sequential_get(const pd_layer *seq, int64_t index) {
  container *c = as(seq, &sequential_type, "Sequential.get");
  int64_t i = 0;
  if (!c || norm_index("Sequential.get", index, c->n, &i) != PD_OK) return NULL;
  return c->items[i];
}

int64_t pd_nn_sequential_len(const pd_layer *seq) {
  container *c = as(seq, &sequential_type, "Sequential.len");
  return c ? c->n : pd_last_status();
}

/* ---- LayerList ---------------------------------------------------------------- */
pd_layer *pd_nn_layer_list(pd_layer *const *layers, int n) {
  if (n < 0 || (n > 0 && !layers)) {
    pd_set_error(PD_ERR_INVALID, "LayerList: invalid layer list (n = %d)", n);
    return NULL;
  }
  container *c = pd_layer_new(sizeof *c, &layer_list_type);
  if (!c) {
    release_from(layers, 0, n);
    return NULL;
  }
  if (n > 0 && pd_nn_layer_list_extend(&c->base, layers, n) != PD_OK) {
    pd_layer_release(&c->base);
    return NULL;
  }
  return &c->base;
}

static pd_status list_append(container *c, pd_layer *sub, const char *fn) {
  if (!sub)
    return pd_last_status() != PD_OK ? pd_last_status()
                                     : pd_set_error(PD_ERR_INVALID, "%s: sublayer is NULL", fn);
  char key[32];
  name_of(c->n, key, sizeof key);
  return push(c, key, sub, false);
}

pd_status pd_nn_layer_list_append(pd_layer *list, pd_layer *sublayer) {
  container *c = as(list, &layer_list_type, "LayerList.append");
  if (!c) {
    pd_layer_release(sublayer);
    return pd_last_status();
  }
  return list_append(c, sublayer, "LayerList.append");
}

pd_status pd_nn_layer_list_extend(pd_layer *list, pd_layer *const *layers, int n) {
  container *c = as(list, &layer_list_type, "LayerList.extend");
  if (!c || n < 0 || (n > 0 && !layers)) {
    if (c) pd_set_error(PD_ERR_INVALID, "LayerList.extend: invalid layer list (n = %d)", n);
    if (layers && n > 0) release_from(layers, 0, n);
    return pd_last_status();
  }
  for (int i = 0; i < n; i++) {
    pd_status st = list_append(c, layers[i], "LayerList.extend");
    if (st != PD_OK) {
      release_from(layers, i + 1, n);
      return st;
    }
  }
  return PD_OK;
}

/* Registers sub as key "i" in place of the current one (which is released). */
static pd_status list_put(container *c, int64_t i, pd_layer *sub) {
  char key[32];
  name_of(i, key, sizeof key);
  if (!pd_layer_add_sublayer(&c->base, key, sub)) return pd_last_status();
  c->items[i] = sub;
  return PD_OK;
}

pd_status pd_nn_layer_list_insert(pd_layer *list, int64_t index, pd_layer *sublayer) {
  container *c = as(list, &layer_list_type, "LayerList.insert");
  int64_t at = 0;
  pd_status st = c ? norm_index("LayerList.insert", index, c->n, &at) : pd_last_status();
  if (st == PD_OK && !sublayer)
    st = pd_last_status() != PD_OK ? pd_last_status()
                                   : pd_set_error(PD_ERR_INVALID, "LayerList.insert: sublayer is NULL");
  if (st != PD_OK) {
    pd_layer_release(sublayer);
    return st;
  }
  /* as Paddle: the last item moves to a new key, every other shifts up one */
  if ((st = list_append(c, pd_layer_retain(c->items[c->n - 1]), "LayerList.insert")) != PD_OK) {
    pd_layer_release(sublayer);
    return st;
  }
  for (int64_t i = c->n - 2; i > at; i--) list_put(c, i, pd_layer_retain(c->items[i - 1]));
  return list_put(c, at, sublayer);
}

pd_layer *pd_nn_layer_list_get(const pd_layer *list, int64_t index) {
  container *c = as(list, &layer_list_type, "LayerList.get");
  int64_t i = 0;
  if (!c || norm_index("LayerList.get", index, c->n, &i) != PD_OK) return NULL;
  return c->items[i];
}

pd_status pd_nn_layer_list_set(pd_layer *list, int64_t index, pd_layer *sublayer) {
  container *c = as(list, &layer_list_type, "LayerList.set");
  int64_t i = 0;
  pd_status st = c ? norm_index("LayerList.set", index, c->n, &i) : pd_last_status();
  if (st == PD_OK && !sublayer)
    st = pd_last_status() != PD_OK ? pd_last_status()
                                   : pd_set_error(PD_ERR_INVALID, "LayerList.set: sublayer is NULL");
  if (st != PD_OK) {
    pd_layer_release(sublayer);
    return st;
  }
  return list_put(c, i, sublayer);
}

pd_status pd_nn_layer_list_delete(pd_layer *list, int64_t index) {
  container *c = as(list, &layer_list_type, "LayerList.delete");
  int64_t at = 0;
  pd_status st = c ? norm_index("LayerList.delete", index, c->n, &at) : pd_last_status();
  if (st != PD_OK) return st;
  for (int64_t i = at; i + 1 < c->n; i++) list_put(c, i, pd_layer_retain(c->items[i + 1]));
  char key[32];
  name_of(c->n - 1, key, sizeof key);
  pd_layer_release(pd_layer_remove_sublayer(&c->base, key));
  c->n--;
  return PD_OK;
}

int64_t pd_nn_layer_list_len(const pd_layer *list) {
  container *c = as(list, &layer_list_type, "LayerList.len");
  return c ? c->n : pd_last_status();
}

/* ---- ParameterList ---------------------------------------------------------------- */
pd_layer *pd_nn_parameter_list(pd_tensor *const *params, int n) {
  if (n < 0 || (n > 0 && !params)) {
    pd_set_error(PD_ERR_INVALID, "ParameterList: invalid parameter list (n = %d)", n);
    return NULL;
  }
  container *c = pd_layer_new(sizeof *c, &parameter_list_type);
  if (!c) return NULL;
  for (int i = 0; i < n; i++) {
    if (pd_nn_parameter_list_append(&c->base, params[i]) != PD_OK) {
      pd_layer_release(&c->base);
      return NULL;
    }
  }
  return &c->base;
}

pd_status pd_nn_parameter_list_append(pd_layer *list, pd_tensor *param) {
  container *c = as(list, &parameter_list_type, "ParameterList.append");
  if (!c) return pd_last_status();
  if (!param)
    return pd_last_status() != PD_OK
               ? pd_last_status()
               : pd_set_error(PD_ERR_INVALID, "ParameterList.append: parameter is NULL");
  char key[32];
  name_of(c->n, key, sizeof key);
  pd_status st = pd_layer_add_parameter(&c->base, key, param);
  if (st == PD_OK) c->n++;
  return st;
}

pd_tensor *pd_nn_parameter_list_get(const pd_layer *list, int64_t index) {
  container *c = as(list, &parameter_list_type, "ParameterList.get");
  int64_t i = 0;
  if (!c || norm_index("ParameterList.get", index, c->n, &i) != PD_OK) return NULL;
  char key[32];
  name_of(i, key, sizeof key);
  return pd_layer_parameter(&c->base, key);
}

int64_t pd_nn_parameter_list_len(const pd_layer *list) {
  container *c = as(list, &parameter_list_type, "ParameterList.len");
  return c ? c->n : pd_last_status();
}

/* ---- LayerDict -------------------------------------------------------------------- */
static int64_t dict_find(const container *c, const char *name) {
  for (int64_t i = 0; i < c->n; i++)
    if (strcmp(c->keys[i], name) == 0) return i;
  return -1;
}

pd_layer *pd_nn_layer_dict(const char *const *names, pd_layer *const *layers, int n) {
  if (n < 0 || (n > 0 && (!layers || !names))) {
    if (layers && n > 0) release_from(layers, 0, n);
    pd_set_error(PD_ERR_INVALID, "LayerDict: invalid layer list (n = %d, names %s)", n,
                 names ? "given" : "NULL");
    return NULL;
  }
  container *c = pd_layer_new(sizeof *c, &layer_dict_type);
  if (!c) {
    release_from(layers, 0, n);
    return NULL;
  }
  for (int i = 0; i < n; i++) {
    if (pd_nn_layer_dict_set(&c->base, names[i], layers[i]) != PD_OK) {
      release_from(layers, i + 1, n);
      pd_layer_release(&c->base);
      return NULL;
    }
  }
  return &c->base;
}

pd_status pd_nn_layer_dict_set(pd_layer *dict, const char *name, pd_layer *sublayer) {
  container *c = as(dict, &layer_dict_type, "LayerDict.set");
  pd_status st = c ? PD_OK : pd_last_status();
  if (st == PD_OK && !sublayer)
    st = pd_last_status() != PD_OK ? pd_last_status()
                                   : pd_set_error(PD_ERR_INVALID, "LayerDict.set: sublayer is NULL");
  if (st == PD_OK && !name) st = pd_set_error(PD_ERR_INVALID, "LayerDict.set: name is NULL");
  if (st != PD_OK) {
    pd_layer_release(sublayer);
    return st;
  }
  int64_t i = dict_find(c, name);
  if (i < 0) return push(c, name, sublayer, true);
  if (!pd_layer_add_sublayer(&c->base, name, sublayer)) return pd_last_status();
  c->items[i] = sublayer;
  return PD_OK;
}

pd_layer *pd_nn_layer_dict_get(const pd_layer *dict, const char *name) {
  container *c = as(dict, &layer_dict_type, "LayerDict.get");
  if (!c) return NULL;
  int64_t i = name ? dict_find(c, name) : -1;
  if (i < 0) {
    pd_set_error(PD_ERR_INDEX, "LayerDict.get: no key '%s' (%lld keys)", name ? name : "(null)",
                 (long long)c->n);
    return NULL;
  }
  return c->items[i];
}

pd_layer *pd_nn_layer_dict_pop(pd_layer *dict, const char *name) {
  container *c = as(dict, &layer_dict_type, "LayerDict.pop");
  if (!c) return NULL;
  int64_t i = name ? dict_find(c, name) : -1;
  if (i < 0) {
    pd_set_error(PD_ERR_INDEX, "LayerDict.pop: no key '%s' (%lld keys)", name ? name : "(null)",
                 (long long)c->n);
    return NULL;
  }
  pd_layer *sub = pd_layer_remove_sublayer(&c->base, name);
  free(c->keys[i]);
  memmove(&c->keys[i], &c->keys[i + 1], (size_t)(c->n - i - 1) * sizeof *c->keys);
  memmove(&c->items[i], &c->items[i + 1], (size_t)(c->n - i - 1) * sizeof *c->items);
  c->n--;
  return sub;
}

bool pd_nn_layer_dict_contains(const pd_layer *dict, const char *name) {
  container *c = as(dict, &layer_dict_type, "LayerDict.contains");
  return c && name && dict_find(c, name) >= 0;
}

int64_t pd_nn_layer_dict_len(const pd_layer *dict) {
  container *c = as(dict, &layer_dict_type, "LayerDict.len");
  return c ? c->n : pd_last_status();
}

const char *pd_nn_layer_dict_key(const pd_layer *dict, int64_t index) {
  container *c = as(dict, &layer_dict_type, "LayerDict.key");
  int64_t i = 0;
  if (!c || norm_index("LayerDict.key", index, c->n, &i) != PD_OK) return NULL;
  return c->keys[i];
}

pd_status pd_nn_layer_dict_clear(pd_layer *dict) {
  container *c = as(dict, &layer_dict_type, "LayerDict.clear");
  if (!c) return pd_last_status();
  while (c->n > 0) pd_layer_release(pd_nn_layer_dict_pop(dict, c->keys[c->n - 1]));
  return PD_OK;
}
