/* The layer base: parameters, buffers, sublayers, names, state dicts,
 * train/eval, hooks, and the call that runs forward inside its own scope. */
#include <ctype.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../core/core_internal.h"
#include "../ops/op_registry.h"
#include "layer_kwargs.h"
#include "paddlec/autograd.h"
#include "paddlec/nn.h"

typedef struct entry {
  char *name;
  void *ptr; /* pd_tensor * or pd_layer * */
  bool persistable;
} entry;

typedef struct vec {
  entry *v;
  int n, cap;
} vec;

typedef struct fhook {
  int id;
  pd_forward_pre_hook_fn pre;
  pd_forward_post_hook_fn post;
  void *user;
  struct fhook *next;
} fhook;

struct pd_layer_state {
  atomic_int refcount;
  char full_name[64];
  vec params, buffers, subs;
  fhook *hooks;
  int n_weights, n_biases; /* for generated parameter names */
  char **kw_names;         /* the keywords forward takes (declare_kwargs) */
  int n_kw;                /* -1: any */
};

static void free_kw_names(pd_layer_state *st) {
  for (int i = 0; i < st->n_kw; i++) free(st->kw_names[i]);
  free(st->kw_names);
  st->kw_names = NULL;
  st->n_kw = 0;
}

#define MAX_CALL_IO 64

/* ---- small containers --------------------------------------------------- */
static int vec_find(const vec *v, const char *name) {
  for (int i = 0; i < v->n; i++)
    if (strcmp(v->v[i].name, name) == 0) return i;
  return -1;
}

static pd_status vec_put(vec *v, const char *name, void *ptr, bool persistable, void **old) {
  *old = NULL;
  int i = vec_find(v, name);
  if (i >= 0) {
    *old = v->v[i].ptr;
    v->v[i].ptr = ptr;
    v->v[i].persistable = persistable;
    return PD_OK;
  }
  if (v->n == v->cap) {
    int cap = v->cap ? v->cap * 2 : 4;
    entry *e = realloc(v->v, (size_t)cap * sizeof *e);
    if (!e) return pd_set_error(PD_ERR_MEMORY, "layer: out of memory");
    v->v = e;
    v->cap = cap;
  }
  char *nm = strdup(name);
  if (!nm) return pd_set_error(PD_ERR_MEMORY, "layer: out of memory");
  v->v[v->n++] = (entry){nm, ptr, persistable};
  return PD_OK;
}

static void vec_remove(vec *v, int i) {
  free(v->v[i].name);
  memmove(&v->v[i], &v->v[i + 1], (size_t)(v->n - i - 1) * sizeof *v->v);
  v->n--;
}

static pd_status check_name(const char *what, const char *name) {
  if (!name || !name[0]) return pd_set_error(PD_ERR_INVALID, "%s: name is empty", what);
  if (strchr(name, '.'))
    return pd_set_error(PD_ERR_INVALID, "%s: name '%s' must not contain '.' (it separates sublayer names)",
                        what, name);
  return PD_OK;
}

/* ---- naming -------------------------------------------------------------- */
static pthread_mutex_t g_name_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
  char type[48];
  int count;
} g_names[256];
static int g_nnames;

/* "LinearNet" -> "linear_net", then a per-type counter: "linear_net_0". */
static void make_full_name(const char *type, char *out, size_t cap) {
  char snake[48];
  size_t k = 0;
  for (size_t i = 0; type && type[i] && k + 2 < sizeof snake; i++) {
    unsigned char c = (unsigned char)type[i];
    if (isupper(c) && i > 0 &&
        (islower((unsigned char)type[i - 1]) ||
         (type[i + 1] && islower((unsigned char)type[i + 1]) && isupper((unsigned char)type[i - 1]))))
      snake[k++] = '_';
    snake[k++] = (char)tolower(c);
  }
  snake[k] = 0;
  if (!k) strcpy(snake, "layer");
  pthread_mutex_lock(&g_name_lock);
  int idx = -1;
  for (int i = 0; i < g_nnames; i++)
    if (strcmp(g_names[i].type, snake) == 0) idx = i;
  if (idx < 0 && g_nnames < 256) {
    idx = g_nnames++;
    strcpy(g_names[idx].type, snake);
    g_names[idx].count = 0;
  }
  int n = idx >= 0 ? g_names[idx].count++ : 0;
  pthread_mutex_unlock(&g_name_lock);
  snprintf(out, cap, "%s_%d", snake, n);
}

/* ---- lifetime ------------------------------------------------------------ */
void *pd_layer_new(size_t size, const pd_layer_type *type) {
  if (size < sizeof(pd_layer) || !type) {
    pd_set_error(PD_ERR_INVALID, "layer_new: size %zu is smaller than pd_layer or type is NULL", size);
    return NULL;
  }
  pd_layer *l = calloc(1, size);
  pd_layer_state *st = calloc(1, sizeof *st);
  if (!l || !st) {
    free(l);
    free(st);
    pd_set_error(PD_ERR_MEMORY, "layer_new: out of memory");
    return NULL;
  }
  atomic_init(&st->refcount, 1);
  make_full_name(type->name, st->full_name, sizeof st->full_name);
  l->type = type;
  l->st = st;
  l->training = true;
  return l;
}

pd_layer *pd_layer_retain(pd_layer *l) {
  if (l) atomic_fetch_add(&l->st->refcount, 1);
  return l;
}

void pd_layer_release(pd_layer *l) {
  if (!l || atomic_fetch_sub(&l->st->refcount, 1) != 1) return;
  if (l->type->destroy) l->type->destroy(l);
  pd_layer_state *st = l->st;
  for (int i = 0; i < st->params.n; i++) {
    free(st->params.v[i].name);
    pd_tensor_release(st->params.v[i].ptr);
  }
  for (int i = 0; i < st->buffers.n; i++) {
    free(st->buffers.v[i].name);
    pd_tensor_release(st->buffers.v[i].ptr);
  }
  for (int i = 0; i < st->subs.n; i++) {
    free(st->subs.v[i].name);
    pd_layer_release(st->subs.v[i].ptr);
  }
  free(st->params.v);
  free(st->buffers.v);
  free(st->subs.v);
  while (st->hooks) {
    fhook *h = st->hooks;
    st->hooks = h->next;
    free(h);
  }
  free_kw_names(st);
  free(st);
  free(l);
}

const char *pd_layer_full_name(const pd_layer *l) { return l ? l->st->full_name : NULL; }

/* ---- registration ------------------------------------------------------- */
/* Whether `target` is `from` or one of its descendants. The tree is acyclic
 * (add_sublayer keeps it so), so the walk ends. */
static bool contains_layer(const pd_layer *from, const pd_layer *target) {
  if (from == target) return true;
  for (int i = 0; i < from->st->subs.n; i++)
    if (contains_layer(from->st->subs.v[i].ptr, target)) return true;
  return false;
}

pd_layer *pd_layer_add_sublayer(pd_layer *l, const char *name, pd_layer *sub) {
  if (!l || !sub) {
    pd_layer_release(sub);
    if (pd_last_status() == PD_OK)
      pd_set_error(PD_ERR_INVALID, "add_sublayer: %s is NULL", l ? "sublayer" : "layer");
    return NULL;
  }
  if (check_name("add_sublayer", name) != PD_OK) {
    pd_layer_release(sub);
    return NULL;
  }
  /* A cycle would make every walk over the tree (train, parameters,
   * state_dict, apply) recurse without end. */
  if (contains_layer(sub, l)) {
    if (sub == l)
      pd_set_error(PD_ERR_INVALID, "add_sublayer: layer '%s' cannot be its own sublayer ('%s')",
                   l->st->full_name, name);
    else
      pd_set_error(PD_ERR_INVALID,
                   "add_sublayer: adding '%s' as sublayer '%s' of '%s' would make a cycle: '%s' already "
                   "contains '%s'",
                   sub->st->full_name, name, l->st->full_name, sub->st->full_name, l->st->full_name);
    pd_layer_release(sub);
    return NULL;
  }
  void *old;
  if (vec_put(&l->st->subs, name, sub, false, &old) != PD_OK) {
    pd_layer_release(sub);
    return NULL;
  }
  pd_layer_release(old);
  return sub;
}

pd_layer *pd_layer_remove_sublayer(pd_layer *l, const char *name) {
  if (!l || !name) {
    pd_set_error(PD_ERR_INVALID, "remove_sublayer: %s is NULL", l ? "name" : "layer");
    return NULL;
  }
  int i = vec_find(&l->st->subs, name);
  if (i < 0) {
    char have[256] = "";
    size_t k = 0;
    for (int j = 0; j < l->st->subs.n && k < sizeof have; j++) {
      int w = snprintf(have + k, sizeof have - k, "%s'%s'", j ? ", " : "", l->st->subs.v[j].name);
      k += w > 0 ? (size_t)w : 0;
    }
    pd_set_error(PD_ERR_INVALID, "remove_sublayer: %s has no sublayer '%s' (its sublayers: %s)",
                 l->st->full_name, name, l->st->subs.n ? have : "none");
    return NULL;
  }
  pd_layer *sub = l->st->subs.v[i].ptr;
  vec_remove(&l->st->subs, i);
  return sub;
}

const pd_param_info *pd_tensor_param_info(const pd_tensor *t) { return t ? t->param_info : NULL; }

static pd_status attach_param_info(pd_tensor *t, const pd_param_attr *attr) {
  pd_param_info *pi = t->param_info;
  if (!pi) {
    pi = calloc(1, sizeof *pi);
    if (!pi) return pd_set_error(PD_ERR_MEMORY, "parameter: out of memory");
    t->param_info = pi;
  }
  pi->learning_rate = attr && attr->learning_rate != 0 ? attr->learning_rate : 1.0;
  pi->trainable = !(attr && attr->not_trainable);
  pi->need_clip = !(attr && attr->no_clip);
  pi->l2_decay = attr ? attr->l2_decay : 0;
  pi->l1_decay = attr ? attr->l1_decay : 0;
  t->stop_gradient = !pi->trainable;
  return PD_OK;
}

pd_status pd_layer_add_parameter(pd_layer *l, const char *name, pd_tensor *param) {
  if (!l || !param)
    return pd_last_status() != PD_OK
               ? pd_last_status()
               : pd_set_error(PD_ERR_INVALID, "add_parameter: %s is NULL", l ? "param" : "layer");
  pd_status st = check_name("add_parameter", name);
  if (st != PD_OK) return st;
  if (param->grad_fn)
    return pd_set_error(PD_ERR_INVALID, "add_parameter: '%s' is not a leaf tensor (it has a grad_fn)", name);
  if (!param->param_info && (st = attach_param_info(param, NULL)) != PD_OK) return st;
  void *old;
  pd_tensor_retain(param);
  if ((st = vec_put(&l->st->params, name, param, true, &old)) != PD_OK) {
    pd_tensor_release(param);
    return st;
  }
  pd_tensor_release(old);
  return PD_OK;
}

pd_tensor *pd_layer_create_parameter(pd_layer *l, const char *name, int ndim, const int64_t *shape,
                                     pd_dtype dt, const pd_param_attr *attr,
                                     const pd_initializer *default_init, bool is_bias) {
  if (!l) {
    pd_set_error(PD_ERR_INVALID, "create_parameter: layer is NULL");
    return NULL;
  }
  if (dt == PD_NUM_DTYPES) dt = pd_get_default_dtype();
  if (!pd_dtype_is_floating(dt)) {
    pd_set_error(PD_ERR_DTYPE, "create_parameter: parameter '%s' must be a floating dtype, got %s",
                 name ? name : "?", pd_dtype_name(dt));
    return NULL;
  }
  if (check_name("create_parameter", name) != PD_OK) return NULL;
  pd_internal_enter();
  pd_tensor *p = pd_tensor_new(dt, ndim, shape);
  pd_internal_leave();
  if (!p) return NULL;
  pd_initializer fallback =
      is_bias ? pd_nn_initializer_constant(0.0) : pd_nn_initializer_xavier_uniform(0, 0, 1);
  const pd_initializer *init = attr && attr->initializer ? attr->initializer
                               : default_init            ? default_init
                                                         : &fallback;
  char pname[128];
  if (attr && attr->name)
    snprintf(pname, sizeof pname, "%s", attr->name);
  else
    snprintf(pname, sizeof pname, "%s.%s_%d", l->st->full_name, is_bias ? "b" : "w",
             is_bias ? l->st->n_biases++ : l->st->n_weights++);
  /* named and marked a parameter first: while a Program is being built the
   * initializer is recorded into its startup Program under this name */
  pd_tensor_set_name(p, pname);
  pd_status st = attach_param_info(p, attr);
  if (st == PD_OK) st = pd_initializer_apply(init, p);
  if (st == PD_OK) st = pd_layer_add_parameter(l, name, p);
  pd_tensor_release(p); /* the layer holds it now (or nobody, on error) */
  return st == PD_OK ? p : NULL;
}

pd_status pd_layer_register_buffer(pd_layer *l, const char *name, pd_tensor *buf, bool persistable) {
  if (!l) return pd_set_error(PD_ERR_INVALID, "register_buffer: layer is NULL");
  pd_status st = check_name("register_buffer", name);
  if (st != PD_OK) return st;
  if (!buf) {
    int i = vec_find(&l->st->buffers, name);
    if (i >= 0) {
      pd_tensor_release(l->st->buffers.v[i].ptr);
      vec_remove(&l->st->buffers, i);
    }
    return PD_OK;
  }
  void *old;
  pd_tensor_retain(buf);
  if ((st = vec_put(&l->st->buffers, name, buf, persistable, &old)) != PD_OK) {
    pd_tensor_release(buf);
    return st;
  }
  pd_tensor_release(old);
  /* A persistable buffer is state: recorded into a Program it becomes a
   * persistable Variable (the startup Program sets its value, ops that
   * write it in place update the scope's value, save_persistables saves
   * it). Unnamed, it is named after the layer, so the Variable's name does
   * not depend on which Program sees it first. */
  if (persistable) {
    buf->is_buffer = true;
    const char *tn = pd_tensor_name(buf);
    if (!tn || !*tn) {
      char bname[192];
      snprintf(bname, sizeof bname, "%s.%s", l->st->full_name, name);
      pd_tensor_set_name(buf, bname);
    }
  }
  return PD_OK;
}

pd_tensor *pd_layer_parameter(const pd_layer *l, const char *name) {
  int i = l && name ? vec_find(&l->st->params, name) : -1;
  return i >= 0 ? l->st->params.v[i].ptr : NULL;
}
pd_tensor *pd_layer_buffer(const pd_layer *l, const char *name) {
  int i = l && name ? vec_find(&l->st->buffers, name) : -1;
  return i >= 0 ? l->st->buffers.v[i].ptr : NULL;
}
pd_layer *pd_layer_sublayer(const pd_layer *l, const char *name) {
  int i = l && name ? vec_find(&l->st->subs, name) : -1;
  return i >= 0 ? l->st->subs.v[i].ptr : NULL;
}

/* ---- named lists ----------------------------------------------------------- */
typedef struct lst {
  int n, cap;
  char **names;
  void **ptrs;
} lst;

static pd_status lst_push(lst *o, const char *prefix, const char *name, void *ptr) {
  if (o->n == o->cap) {
    int cap = o->cap ? o->cap * 2 : 16;
    char **nm = realloc(o->names, (size_t)cap * sizeof *nm);
    if (nm) o->names = nm;
    void **pt = realloc(o->ptrs, (size_t)cap * sizeof *pt);
    if (pt) o->ptrs = pt;
    if (!nm || !pt) return pd_set_error(PD_ERR_MEMORY, "layer: out of memory");
    o->cap = cap;
  }
  size_t len = strlen(prefix) + strlen(name) + 2;
  char *s = malloc(len);
  if (!s) return pd_set_error(PD_ERR_MEMORY, "layer: out of memory");
  snprintf(s, len, "%s%s%s", prefix, prefix[0] ? "." : "", name);
  o->names[o->n] = s;
  o->ptrs[o->n++] = ptr;
  return PD_OK;
}

static bool lst_has(const lst *o, const void *ptr) {
  for (int i = 0; i < o->n; i++)
    if (o->ptrs[i] == ptr) return true;
  return false;
}

static void lst_free(lst *o) {
  for (int i = 0; i < o->n; i++) free(o->names[i]);
  free(o->names);
  free(o->ptrs);
  *o = (lst){0};
}

/* WANT_EVERY_PATH lists a tensor under each path that reaches it (the
 * state dict, as Paddle's); the other lists name each tensor once. */
enum {
  WANT_PARAMS = 1,
  WANT_BUFFERS = 2,
  WANT_PERSISTABLE_ONLY = 4,
  WANT_LAYERS = 8,
  WANT_OWN_ONLY = 16,
  WANT_EVERY_PATH = 32
};

static pd_status collect(const pd_layer *l, const char *prefix, int want, lst *o, int depth) {
  if (depth > 256) return pd_set_error(PD_ERR_STATE, "layer: sublayers nest deeper than 256 (a cycle?)");
  pd_status st = PD_OK;
  const pd_layer_state *s = l->st;
  bool every = want & WANT_EVERY_PATH;
  if (want & WANT_PARAMS)
    for (int i = 0; i < s->params.n && st == PD_OK; i++)
      if (every || !lst_has(o, s->params.v[i].ptr))
        st = lst_push(o, prefix, s->params.v[i].name, s->params.v[i].ptr);
  if (want & WANT_BUFFERS)
    for (int i = 0; i < s->buffers.n && st == PD_OK; i++)
      if ((!(want & WANT_PERSISTABLE_ONLY) || s->buffers.v[i].persistable) &&
          (every || !lst_has(o, s->buffers.v[i].ptr)))
        st = lst_push(o, prefix, s->buffers.v[i].name, s->buffers.v[i].ptr);
  for (int i = 0; i < s->subs.n && st == PD_OK && !(want & WANT_OWN_ONLY); i++) {
    const pd_layer *sub = s->subs.v[i].ptr;
    size_t len = strlen(prefix) + strlen(s->subs.v[i].name) + 2;
    char *p = malloc(len);
    if (!p) return pd_set_error(PD_ERR_MEMORY, "layer: out of memory");
    snprintf(p, len, "%s%s%s", prefix, prefix[0] ? "." : "", s->subs.v[i].name);
    if ((want & WANT_LAYERS) && !lst_has(o, sub)) st = lst_push(o, "", p, (void *)sub);
    if (st == PD_OK) st = collect(sub, p, want, o, depth + 1);
    free(p);
  }
  return st;
}

static pd_status to_tensors(const pd_layer *l, const char *prefix, int want, pd_named_tensors *out) {
  if (!out) return pd_set_error(PD_ERR_INVALID, "layer: output list is NULL");
  *out = (pd_named_tensors){0};
  if (!l) return pd_set_error(PD_ERR_INVALID, "layer: layer is NULL");
  lst o = {0};
  pd_status st = collect(l, prefix ? prefix : "", want, &o, 0);
  if (st != PD_OK) {
    lst_free(&o);
    return st;
  }
  out->n = o.n;
  out->names = o.names;
  out->tensors = (pd_tensor **)o.ptrs;
  return PD_OK;
}

pd_status pd_layer_named_parameters(const pd_layer *l, pd_named_tensors *out) {
  return to_tensors(l, NULL, WANT_PARAMS, out);
}
pd_status pd_layer_parameters(const pd_layer *l, pd_named_tensors *out) {
  return to_tensors(l, NULL, WANT_PARAMS, out);
}
pd_status pd_layer_named_buffers(const pd_layer *l, pd_named_tensors *out) {
  return to_tensors(l, NULL, WANT_BUFFERS, out);
}
pd_status pd_layer_named_parameters_with_prefix(const pd_layer *l, const char *prefix, bool include_sublayers,
                                                pd_named_tensors *out) {
  return to_tensors(l, prefix, WANT_PARAMS | (include_sublayers ? 0 : WANT_OWN_ONLY), out);
}
pd_status pd_layer_named_buffers_with_prefix(const pd_layer *l, const char *prefix, bool include_sublayers,
                                             pd_named_tensors *out) {
  return to_tensors(l, prefix, WANT_BUFFERS | (include_sublayers ? 0 : WANT_OWN_ONLY), out);
}
pd_status pd_layer_state_dict(const pd_layer *l, pd_named_tensors *out) {
  return to_tensors(l, NULL, WANT_PARAMS | WANT_BUFFERS | WANT_PERSISTABLE_ONLY | WANT_EVERY_PATH, out);
}

pd_status pd_layer_named_sublayers(const pd_layer *l, pd_named_layers *out) {
  if (!out) return pd_set_error(PD_ERR_INVALID, "named_sublayers: output list is NULL");
  *out = (pd_named_layers){0};
  if (!l) return pd_set_error(PD_ERR_INVALID, "named_sublayers: layer is NULL");
  lst o = {0};
  pd_status st = collect(l, "", WANT_LAYERS, &o, 0);
  if (st != PD_OK) {
    lst_free(&o);
    return st;
  }
  out->n = o.n;
  out->names = o.names;
  out->layers = (pd_layer **)o.ptrs;
  return PD_OK;
}

void pd_named_tensors_free(pd_named_tensors *list) {
  if (!list) return;
  for (int i = 0; i < list->n; i++) free(list->names[i]);
  free(list->names);
  free(list->tensors);
  *list = (pd_named_tensors){0};
}

void pd_named_layers_free(pd_named_layers *list) {
  if (!list) return;
  for (int i = 0; i < list->n; i++) free(list->names[i]);
  free(list->names);
  free(list->layers);
  *list = (pd_named_layers){0};
}

static pd_status append_named(pd_named_tensors *l, const char *name, pd_tensor *t) {
  lst o = {l->n, l->n, l->names, (void **)l->tensors};
  pd_status st = lst_push(&o, "", name, t);
  l->n = o.n;
  l->names = o.names;
  l->tensors = (pd_tensor **)o.ptrs;
  return st;
}

static int find_entry(const pd_named_tensors *l, const char *name) {
  for (int j = 0; j < l->n; j++)
    if (strcmp(l->names[j], name) == 0) return j;
  return -1;
}

/* A name of the layer that sd lacks is missing unless sd holds its tensor
 * under another of its names (a tensor shared by two layers). */
static bool entry_missing(const pd_named_tensors *own, int i, const pd_named_tensors *sd) {
  if (find_entry(sd, own->names[i]) >= 0) return false;
  for (int k = 0; k < own->n; k++)
    if (k != i && own->tensors[k] == own->tensors[i] && find_entry(sd, own->names[k]) >= 0) return false;
  return true;
}

/* The missing and unexpected lists of sd against the layer's own state dict. */
static pd_status match_lists(const pd_named_tensors *own, const pd_named_tensors *sd,
                             pd_named_tensors *missing, pd_named_tensors *unexpected) {
  pd_status st = PD_OK;
  for (int i = 0; i < own->n && st == PD_OK && missing; i++)
    if (entry_missing(own, i, sd)) st = append_named(missing, own->names[i], own->tensors[i]);
  for (int j = 0; j < sd->n && st == PD_OK && unexpected; j++)
    if (find_entry(own, sd->names[j]) < 0) st = append_named(unexpected, sd->names[j], sd->tensors[j]);
  if (st != PD_OK) {
    pd_named_tensors_free(missing);
    pd_named_tensors_free(unexpected);
  }
  return st;
}

pd_status pd_layer_match_state_dict(const pd_layer *l, const pd_named_tensors *sd, pd_named_tensors *missing,
                                    pd_named_tensors *unexpected) {
  if (missing) *missing = (pd_named_tensors){0};
  if (unexpected) *unexpected = (pd_named_tensors){0};
  if (!l || !sd)
    return pd_set_error(PD_ERR_INVALID, "state dict match: %s is NULL", l ? "state dict" : "layer");
  pd_named_tensors own;
  pd_status st = pd_layer_state_dict(l, &own);
  if (st == PD_OK) st = match_lists(&own, sd, missing, unexpected);
  pd_named_tensors_free(&own);
  return st;
}

pd_status pd_layer_set_state_dict(pd_layer *l, const pd_named_tensors *sd, pd_named_tensors *missing,
                                  pd_named_tensors *unexpected) {
  if (missing) *missing = (pd_named_tensors){0};
  if (unexpected) *unexpected = (pd_named_tensors){0};
  if (!l || !sd)
    return pd_set_error(PD_ERR_INVALID, "set_state_dict: %s is NULL", l ? "state dict" : "layer");
  pd_named_tensors own;
  pd_status st = pd_layer_state_dict(l, &own);
  if (st != PD_OK) return st;
  /* check every shape first, so a mismatch changes nothing */
  for (int i = 0; i < own.n && st == PD_OK; i++) {
    int j = find_entry(sd, own.names[i]);
    if (j < 0) continue;
    const pd_tensor *src = sd->tensors[j], *dst = own.tensors[i];
    if (!src) {
      st = pd_set_error(PD_ERR_INVALID, "set_state_dict: entry '%s' is NULL", sd->names[j]);
    } else if (src->is_meta || dst->is_meta) {
      st = pd_tensor_meta_error("set_state_dict", src->is_meta ? src : dst);
    } else if (src->numel != dst->numel || src->ndim != dst->ndim ||
               memcmp(src->shape, dst->shape, sizeof(int64_t) * (size_t)dst->ndim) != 0) {
      char a[160], b[160];
      st = pd_set_error(PD_ERR_SHAPE,
                        "set_state_dict: '%s' has shape %s in the state dict but %s in the layer",
                        own.names[i], pd_shape_str(src->ndim, src->shape, a, sizeof a),
                        pd_shape_str(dst->ndim, dst->shape, b, sizeof b));
    }
  }
  for (int i = 0; i < own.n && st == PD_OK; i++) {
    int j = find_entry(sd, own.names[i]);
    if (j < 0) continue;
    pd_tensor *dst = own.tensors[i];
    st = pd_write_copy(dst, sd->tensors[j]);
  }
  if (st == PD_OK) st = match_lists(&own, sd, missing, unexpected);
  pd_named_tensors_free(&own);
  return st;
}

/* ---- modes and traversal --------------------------------------------------- */
static void set_training(pd_layer *l, void *user) { l->training = *(bool *)user; }

void pd_layer_train(pd_layer *l) {
  bool on = true;
  pd_layer_apply(l, set_training, &on);
}

void pd_layer_eval(pd_layer *l) {
  bool off = false;
  pd_layer_apply(l, set_training, &off);
}

void pd_layer_apply(pd_layer *l, void (*fn)(pd_layer *, void *), void *user) {
  if (!l || !fn) return;
  for (int i = 0; i < l->st->subs.n; i++) pd_layer_apply(l->st->subs.v[i].ptr, fn, user);
  fn(l, user);
}

void pd_layer_clear_gradients(pd_layer *l, bool set_to_zero) {
  pd_named_tensors ps;
  if (pd_layer_parameters(l, &ps) != PD_OK) return;
  for (int i = 0; i < ps.n; i++) pd_tensor_clear_grad(ps.tensors[i], set_to_zero);
  pd_named_tensors_free(&ps);
}

/* ---- hooks and call ---------------------------------------------------------- */
static int add_hook(pd_layer *l, pd_forward_pre_hook_fn pre, pd_forward_post_hook_fn post, void *user) {
  static atomic_int next_id;
  if (!l || (!pre && !post)) return pd_set_error(PD_ERR_INVALID, "register_forward_hook: NULL layer or hook");
  fhook *h = calloc(1, sizeof *h);
  if (!h) return pd_set_error(PD_ERR_MEMORY, "register_forward_hook: out of memory");
  h->id = atomic_fetch_add(&next_id, 1) + 1;
  h->pre = pre;
  h->post = post;
  h->user = user;
  fhook **p = &l->st->hooks;
  while (*p) p = &(*p)->next;
  *p = h;
  return h->id;
}

int pd_layer_register_forward_pre_hook(pd_layer *l, pd_forward_pre_hook_fn fn, void *user) {
  return add_hook(l, fn, NULL, user);
}
int pd_layer_register_forward_post_hook(pd_layer *l, pd_forward_post_hook_fn fn, void *user) {
  return add_hook(l, NULL, fn, user);
}

pd_status pd_layer_remove_hook(pd_layer *l, int id) {
  if (!l) return pd_set_error(PD_ERR_INVALID, "remove_hook: layer is NULL");
  for (fhook **p = &l->st->hooks; *p; p = &(*p)->next) {
    if ((*p)->id == id) {
      fhook *h = *p;
      *p = h->next;
      free(h);
      return PD_OK;
    }
  }
  return pd_set_error(PD_ERR_INVALID, "remove_hook: no forward hook with id %d on %s", id, l->st->full_name);
}

/* The keyword arguments of the calls running on this thread, innermost
 * first (frames live on call_impl's stack). */
typedef struct kw_frame {
  const pd_layer *l;
  const pd_kwargs *kw;
  struct kw_frame *up;
} kw_frame;
static _Thread_local kw_frame *g_kw_top;
static const pd_kwargs no_kwargs = {0, NULL};

const pd_kwargs *pd_layer_kwargs(const pd_layer *l) {
  for (const kw_frame *f = g_kw_top; f; f = f->up)
    if (f->l == l) return f->kw;
  return &no_kwargs;
}

pd_status pd_layer_declare_kwargs(pd_layer *l, const char *const *names, int n) {
  if (!l) return pd_set_error(PD_ERR_INVALID, "declare_kwargs: layer is NULL");
  if (n < -1 || (n > 0 && !names))
    return pd_set_error(PD_ERR_INVALID, "declare_kwargs: %s: %d names at %p", l->st->full_name, n,
                        (const void *)names);
  char **copy = n > 0 ? calloc((size_t)n, sizeof *copy) : NULL;
  if (n > 0 && !copy) return pd_set_error(PD_ERR_MEMORY, "declare_kwargs: out of memory");
  for (int i = 0; i < n; i++) {
    if (!names[i] || !(copy[i] = strdup(names[i]))) {
      for (int k = 0; k < i; k++) free(copy[k]);
      free(copy);
      return names[i]
                 ? pd_set_error(PD_ERR_MEMORY, "declare_kwargs: out of memory")
                 : pd_set_error(PD_ERR_INVALID, "declare_kwargs: %s: name %d is NULL", l->st->full_name, i);
    }
  }
  free_kw_names(l->st);
  l->st->kw_names = copy;
  l->st->n_kw = n;
  return PD_OK;
}

/* Runs the call; with `track`, outputs join the caller's scope like an op's. */
static int call_impl(pd_layer *l, pd_tensor *const *in, int n_in, const pd_kwargs *kw, pd_tensor **out,
                     int max_out, bool track) {
  if (!l || !out || max_out <= 0 || n_in < 0 || n_in > MAX_CALL_IO || (n_in && !in))
    return pd_set_error(PD_ERR_INVALID,
                        "layer call: invalid arguments (layer %s, %d inputs, room for %d outputs)",
                        l ? l->st->full_name : "NULL", n_in, max_out);
  for (int i = 0; i < n_in; i++)
    if (!in[i])
      return pd_last_status() != PD_OK
                 ? pd_last_status()
                 : pd_set_error(PD_ERR_INVALID, "%s: input %d is NULL", l->st->full_name, i);
  if (!kw) kw = &no_kwargs;
  pd_status kst = pd_kwargs_check_call(kw, l->type->name ? l->type->name : l->st->full_name,
                                       (const char *const *)l->st->kw_names, l->st->n_kw);
  if (kst != PD_OK) return kst;
  if (!l->type->forward) return pd_set_error(PD_ERR_UNIMPLEMENTED, "%s has no forward", l->type->name);
  /* forward is user-level code: it runs at depth 0 in a scope of its own */
  int saved_depth = pd_g_internal_depth;
  pd_g_internal_depth = 0;
  pd_scope_begin();
  pd_tensor *args[MAX_CALL_IO];
  for (int i = 0; i < n_in; i++) args[i] = in[i];
  for (int i = 0; i < max_out; i++) out[i] = NULL;
  int n = 0;
  for (fhook *h = l->st->hooks; h && n >= 0; h = h->next)
    if (h->pre && h->pre(l, args, n_in, h->user) < 0) n = pd_last_status();
  kw_frame frame = {l, kw, g_kw_top};
  g_kw_top = &frame;
  if (n >= 0) n = l->type->forward(l, args, n_in, out, max_out);
  g_kw_top = frame.up;
  if (n > max_out)
    n = pd_set_error(PD_ERR_INVALID, "%s: forward returned %d outputs for room of %d", l->type->name, n,
                     max_out);
  for (int k = 0; k < n && n >= 0; k++)
    if (!out[k])
      n = pd_last_status() != PD_OK
              ? pd_last_status()
              : pd_set_error(PD_ERR_INVALID, "%s: forward left output %d NULL", l->type->name, k);
  for (fhook *h = l->st->hooks; h && n >= 0; h = h->next)
    if (h->post && h->post(l, args, n_in, out, n, h->user) < 0) n = pd_last_status();
  /* the outputs outlive the scope: take a reference before it closes */
  for (int k = 0; k < n; k++) pd_tensor_retain(out[k]);
  pd_scope_end();
  pd_g_internal_depth = saved_depth;
  if (n < 0) {
    for (int k = 0; k < max_out; k++) out[k] = NULL;
    /* the failing op names itself ("matmul: ..."); say which layer ran it.
     * Nested layers stack their names outermost first. */
    pd_error_prefix("%s '%s'", l->type->name ? l->type->name : "Layer", l->st->full_name);
    return n;
  }
  if (track)
    for (int k = 0; k < n; k++) pd_scope_track(out[k]);
  return n;
}

int pd_layer_call(pd_layer *l, pd_tensor *const *in, int n_in, pd_tensor **out, int max_out) {
  return call_impl(l, in, n_in, NULL, out, max_out, true);
}

int pd_layer_call_kw(pd_layer *l, pd_tensor *const *in, int n_in, const pd_kwargs *kw, pd_tensor **out,
                     int max_out) {
  return call_impl(l, in, n_in, kw, out, max_out, true);
}

pd_tensor *pd_layer_call1(pd_layer *l, pd_tensor *x) { return pd_layer_call1_kw(l, x, NULL); }

pd_tensor *pd_layer_call1_kw(pd_layer *l, pd_tensor *x, const pd_kwargs *kw) {
  pd_tensor *out[MAX_CALL_IO];
  int n = call_impl(l, &x, 1, kw, out, MAX_CALL_IO, false);
  if (n <= 0) {
    if (n == 0) pd_set_error(PD_ERR_INVALID, "%s: forward returned no output", l ? l->type->name : "layer");
    return NULL;
  }
  for (int k = 1; k < n; k++) pd_tensor_release(out[k]); /* only the first output is wanted */
  return pd_scope_track(out[0]);
}

/* ---- printing ------------------------------------------------------------------ */
static void emit(char **buf, size_t *len, size_t *cap, const char *s) {
  size_t n = strlen(s);
  if (*len + n + 1 > *cap) {
    size_t c = (*cap ? *cap * 2 : 256) + n;
    char *b = realloc(*buf, c);
    if (!b) return;
    *buf = b;
    *cap = c;
  }
  memcpy(*buf + *len, s, n + 1);
  *len += n;
}

static void repr(const pd_layer *l, int indent, char **buf, size_t *len, size_t *cap) {
  emit(buf, len, cap, l->type->name ? l->type->name : "Layer");
  emit(buf, len, cap, "(");
  char *extra = l->type->extra_repr ? l->type->extra_repr(l) : NULL;
  if (extra) emit(buf, len, cap, extra);
  free(extra);
  if (l->st->subs.n) {
    emit(buf, len, cap, "\n");
    for (int i = 0; i < l->st->subs.n; i++) {
      for (int k = 0; k < indent + 2; k++) emit(buf, len, cap, " ");
      emit(buf, len, cap, "(");
      emit(buf, len, cap, l->st->subs.v[i].name);
      emit(buf, len, cap, "): ");
      repr(l->st->subs.v[i].ptr, indent + 2, buf, len, cap);
      emit(buf, len, cap, "\n");
    }
    for (int k = 0; k < indent; k++) emit(buf, len, cap, " ");
  }
  emit(buf, len, cap, ")");
}

char *pd_layer_to_string(const pd_layer *l) {
  if (!l) {
    pd_set_error(PD_ERR_INVALID, "layer to_string: layer is NULL");
    return NULL;
  }
  char *buf = NULL;
  size_t len = 0, cap = 0;
  repr(l, 0, &buf, &len, &cap);
  return buf;
}
