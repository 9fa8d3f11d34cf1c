/* Tensor arrays: paddle.tensor.create_array, array_write, array_read,
 * array_length and tensor_array_to_tensor (fluid.layers' too).
 *
 * In eager mode an array is what Paddle's Python list is: a handle (a
 * tensor whose storage holds the list; no kernel reads it) whose elements
 * are the written tensors themselves, so autograd follows a tensor through
 * the array. array_write changes the list in place, as Paddle's does.
 *
 * Under a program guard the functions record ops (create_array,
 * write_to_array, read_from_array, lod_array_length,
 * tensor_array_to_tensor) over Variables marked is_array, whose dtype and
 * shape are their elements'. A write makes a new version of the array
 * Variable (pd_ir_new_version), so every op of a Program reads one value,
 * and the executor's array values are never changed once made: a write
 * copies the list. */
#include <stdlib.h>
#include <string.h>

#include "../core/tensor_impl.h"
#include "control_internal.h"
#include "paddlec/creation.h"
#include "paddlec/manipulation.h"
#include "paddlec/math.h"
#include "paddlec/tensor_array.h"

/* ---- array values ------------------------------------------------------------ */
typedef struct array_list {
  int n, cap;
  pd_tensor **items; /* owned references; NULL: a slot never written */
} array_list;

static void list_free(void *data, void *ctx) {
  (void)ctx;
  array_list *l = data;
  for (int i = 0; i < l->n; i++) pd_tensor_release(l->items[i]);
  free(l->items);
  free(l);
}

bool pd_array_is_value(const pd_tensor *t) {
  return t && !t->is_meta && t->storage && t->storage->free_fn == list_free;
}
static array_list *list_of(const pd_tensor *t) { return pd_array_is_value(t) ? t->storage->data : NULL; }
int pd_array_value_len(const pd_tensor *t) { return pd_array_is_value(t) ? list_of(t)->n : 0; }
pd_tensor *pd_array_value_item(const pd_tensor *t, int i) {
  array_list *l = list_of(t);
  return l && i >= 0 && i < l->n ? l->items[i] : NULL;
}

static bool list_reserve(array_list *l, int n) {
  if (n <= l->cap) return true;
  int nc = l->cap ? l->cap : 4;
  while (nc < n) nc *= 2;
  pd_tensor **it = realloc(l->items, (size_t)nc * sizeof *it);
  if (!it) return false;
  l->items = it;
  l->cap = nc;
  return true;
}

/* Not tracked by any scope. */
pd_tensor *pd_array_value_new(pd_dtype dt, pd_tensor *const *items, int n) {
  array_list *l = calloc(1, sizeof *l);
  if (!l || !list_reserve(l, n)) {
    free(l);
    pd_set_error(PD_ERR_MEMORY, "create_array: out of memory");
    return NULL;
  }
  for (int i = 0; i < n; i++) l->items[i] = items ? pd_tensor_retain(items[i]) : NULL;
  l->n = n;
  pd_internal_enter();
  pd_tensor *t = pd_tensor_from_blob(l, dt, 1, (const int64_t[]){0}, list_free, NULL);
  pd_internal_leave();
  if (!t) list_free(l, NULL);
  return t;
}

/* Sets slot k of l to x (retained), growing l with holes up to k. */
static pd_status list_set(array_list *l, int64_t k, pd_tensor *x) {
  if (k >= l->n && (k >= INT32_MAX || !list_reserve(l, (int)k + 1)))
    return pd_set_error(PD_ERR_MEMORY, "array_write: out of memory for index %lld", (long long)k);
  while (l->n <= k) l->items[l->n++] = NULL;
  pd_tensor_release(l->items[k]);
  l->items[k] = pd_tensor_retain(x);
  return PD_OK;
}

pd_status pd_array_value_set(pd_tensor *t, int64_t k, pd_tensor *x) {
  if (!pd_array_is_value(t) || k < 0)
    return pd_set_error(PD_ERR_INVALID, "array: slot %lld of no array", (long long)k);
  return list_set(list_of(t), k, x);
}

/* The integer an index tensor holds: one element of an integer dtype. */
static pd_status index_of(const pd_tensor *i, const char *fn, int64_t *k) {
  if (!i) return pd_set_error(PD_ERR_INVALID, "%s: the index i is NULL", fn);
  if (pd_tensor_is_meta(i))
    return pd_set_error(PD_ERR_INVALID, "%s: the index '%s' is a Variable, the array is not", fn,
                        i->name ? i->name : "(unnamed)");
  if (i->numel != 1 || (i->dtype != PD_INT64 && i->dtype != PD_INT32))
    return pd_set_error(PD_ERR_INVALID,
                        "%s: the index must be one int64 (or int32) element, got %s of shape %s", fn,
                        pd_dtype_name(i->dtype), PD_SHAPE_STR(i));
  double v = pd_tensor_item(i);
  if (v < 0) return pd_set_error(PD_ERR_INVALID, "%s: the index is %.0f, below 0", fn, v);
  *k = (int64_t)v;
  return PD_OK;
}

static pd_status need_value(const pd_tensor *a, const char *fn) {
  if (pd_array_is_value(a)) return PD_OK;
  if (!a) return pd_set_error(PD_ERR_INVALID, "%s: the array is NULL", fn);
  return pd_set_error(PD_ERR_INVALID, "%s: '%s' (shape %s) is a tensor, not a tensor array", fn,
                      a->name ? a->name : "(unnamed)", PD_SHAPE_STR(a));
}

static pd_tensor *read_at(const pd_tensor *a, const pd_tensor *i, const char *fn) {
  int64_t k;
  if (need_value(a, fn) != PD_OK || index_of(i, fn, &k) != PD_OK) return NULL;
  array_list *l = list_of(a);
  if (k >= l->n || !l->items[k]) {
    pd_set_error(PD_ERR_INVALID, "%s: index %lld of an array of length %d %s", fn, (long long)k, l->n,
                 k >= l->n ? "is out of range" : "was never written");
    return NULL;
  }
  return pd_tensor_retain(l->items[k]);
}

static pd_tensor *length_of(const pd_tensor *a, const char *fn) {
  if (need_value(a, fn) != PD_OK) return NULL;
  pd_internal_enter();
  pd_tensor *t = pd_full(0, NULL, (double)list_of(a)->n, PD_INT64);
  pd_internal_leave();
  return t;
}

/* concat or stack of every element along axis, and their sizes along it. */
static pd_status to_tensor(const pd_tensor *a, int64_t axis, bool use_stack, pd_tensor **out,
                           pd_tensor **index) {
  const char *fn = "tensor_array_to_tensor";
  if (need_value(a, fn) != PD_OK) return pd_last_status();
  array_list *l = list_of(a);
  if (l->n == 0) return pd_set_error(PD_ERR_INVALID, "%s: the array is empty", fn);
  for (int k = 0; k < l->n; k++)
    if (!l->items[k]) return pd_set_error(PD_ERR_INVALID, "%s: element %d was never written", fn, k);
  double *sizes = malloc(sizeof(double) * (size_t)(l->n > 0 ? l->n : 1));
  if (!sizes) return pd_set_error(PD_ERR_MEMORY, "%s: out of memory", fn);
  for (int k = 0; k < l->n; k++) {
    const pd_tensor *e = l->items[k];
    int64_t ax = axis < 0 ? axis + e->ndim + (use_stack ? 1 : 0) : axis;
    sizes[k] = use_stack ? 1.0 : ax >= 0 && ax < e->ndim ? (double)e->shape[ax] : 0.0;
  }
  pd_internal_enter();
  *out = use_stack ? pd_stack(l->items, l->n, axis) : pd_concat(l->items, l->n, axis);
  *index = *out ? pd_tensor_from_f64(sizes, PD_INT32, 1, (const int64_t[]){l->n}) : NULL;
  pd_internal_leave();
  free(sizes);
  if (!*out || !*index) {
    pd_tensor_release(*out);
    *out = NULL;
    pd_error_prefix("%s", fn);
    return pd_last_status();
  }
  return PD_OK;
}

/* ---- the ops the executor runs ----------------------------------------------- */
/* array_add: element k of the result is a_k + b_k, or the one present. */
static pd_status add_arrays(const pd_tensor *a, const pd_tensor *b, pd_tensor **out) {
  const char *fn = PD_STATIC_ARRAY_ADD;
  if (need_value(a, fn) != PD_OK || need_value(b, fn) != PD_OK) return pd_last_status();
  const array_list *la = list_of(a), *lb = list_of(b);
  int n = la->n > lb->n ? la->n : lb->n;
  pd_tensor *r = pd_array_value_new(a->dtype, NULL, n);
  if (!r) return pd_last_status();
  array_list *l = list_of(r);
  for (int k = 0; k < n; k++) {
    pd_tensor *x = k < la->n ? la->items[k] : NULL, *y = k < lb->n ? lb->items[k] : NULL;
    l->items[k] = x && y ? pd_add(x, y) : pd_tensor_retain(x ? x : y);
    if (x && y && !l->items[k]) {
      pd_tensor_release(r);
      pd_error_prefix("%s: element %d", fn, k);
      return pd_last_status();
    }
  }
  *out = r;
  return PD_OK;
}

pd_status pd_static_run_array_op(const pd_operator *op, pd_tensor *const *in, pd_tensor **out) {
  const char *t = op->type;
  for (int i = 0; i < op->n_in; i++)
    if (!in[i]) return pd_set_error(PD_ERR_INVALID, "%s: input '%s' has no value", t, op->inputs[i]);
  int want_in = -1, want_out = 1;
  pd_ctl_kind k = op->ctl_grad ? PD_CTL_NONE : op->ctl;
  if (k == PD_CTL_CREATE_ARRAY)
    want_in = 0;
  else if (k == PD_CTL_WRITE_ARRAY)
    want_in = 3;
  else if (k == PD_CTL_READ_ARRAY)
    want_in = 2;
  else if (k == PD_CTL_ARRAY_LENGTH || k == PD_CTL_ASSIGN_ARRAY)
    want_in = 1;
  else if (k == PD_CTL_ARRAY_TO_TENSOR)
    want_in = 1, want_out = 2;
  else if (k == PD_CTL_ARRAY_ADD)
    want_in = 2;
  if (want_in < 0) return pd_set_error(PD_ERR_INVALID, "Executor: '%s' is no tensor array op", t);
  if (op->n_in != want_in || op->n_out != want_out)
    return pd_set_error(PD_ERR_INVALID, "%s: %d inputs and %d outputs, expected %d and %d", t, op->n_in,
                        op->n_out, want_in, want_out);
  if (want_in == 0) {
    out[0] = pd_array_value_new(op->attrs.dtype < PD_NUM_DTYPES ? op->attrs.dtype : PD_FLOAT32, NULL, 0);
    return out[0] ? PD_OK : pd_last_status();
  }
  if (k == PD_CTL_WRITE_ARRAY) { /* (x, i, array): a new list */
    int64_t k;
    if (need_value(in[2], t) != PD_OK || index_of(in[1], t, &k) != PD_OK) return pd_last_status();
    if (pd_array_is_value(in[0])) return pd_set_error(PD_ERR_INVALID, "%s: x is a tensor array", t);
    if (k > (int64_t)1 << 24)
      return pd_set_error(PD_ERR_INVALID, "%s: index %lld is too large", t, (long long)k);
    array_list *l = list_of(in[2]);
    pd_tensor *r = pd_array_value_new(in[2]->dtype, l->items, l->n);
    if (!r) return pd_last_status();
    if (list_set(list_of(r), k, in[0]) != PD_OK) {
      pd_tensor_release(r);
      return pd_last_status();
    }
    out[0] = r;
    return PD_OK;
  }
  if (k == PD_CTL_READ_ARRAY) return (out[0] = read_at(in[0], in[1], t)) ? PD_OK : pd_last_status();
  if (k == PD_CTL_ARRAY_LENGTH) return (out[0] = length_of(in[0], t)) ? PD_OK : pd_last_status();
  if (k == PD_CTL_ARRAY_ADD) return add_arrays(in[0], in[1], out);
  if (k == PD_CTL_ASSIGN_ARRAY) { /* values never change: share it */
    if (need_value(in[0], t) != PD_OK) return pd_last_status();
    out[0] = pd_tensor_retain(in[0]);
    return PD_OK;
  }
  return to_tensor(in[0], op->attrs.i[0], op->attrs.i[1] != 0, &out[0], &out[1]);
}

/* ---- recording ---------------------------------------------------------------- */
/* A new array Variable of the current block named "<key>.out". */
static pd_variable *new_array_var(pd_program *p, const char *key, pd_dtype dt) {
  char name[128];
  pd_static_unique_name(key, name, sizeof name);
  strncat(name, ".out", sizeof name - strlen(name) - 1);
  pd_variable *v = pd_ir_add_var(p->blocks[p->current_block], name, dt, 0, NULL, NULL);
  if (!v) return NULL;
  v->is_array = true;
  v->stop_gradient = true;
  const char *outs[1] = {v->name};
  pd_attrs a = {.dtype = dt};
  pd_operator *op =
      pd_ir_append_op(p->blocks[p->current_block], PD_STATIC_CREATE_ARRAY, NULL, 0, outs, 1, &a);
  return op ? v : NULL;
}

/* The array Variable of p behind handle a, else NULL with an error. */
static pd_variable *array_var(pd_program *p, pd_tensor *a, const char *fn) {
  pd_variable *v = a ? pd_ir_var_of(p, a) : NULL;
  if (v && v->is_array) return v;
  if (!a)
    pd_set_error(PD_ERR_INVALID, "%s: the array is NULL", fn);
  else if (pd_array_is_value(a))
    pd_set_error(PD_ERR_INVALID,
                 "%s: the array was made eagerly; under a program guard make it with create_array", fn);
  else
    pd_set_error(PD_ERR_INVALID, "%s: '%s' is no tensor array of the Program being built", fn,
                 v         ? v->name
                 : a->name ? a->name
                           : "(unnamed)");
  return NULL;
}

/* An index Variable: one integer element. */
static pd_variable *index_var(pd_program *p, pd_tensor *i, const char *fn) {
  if (!i) {
    pd_set_error(PD_ERR_INVALID, "%s: the index i is NULL", fn);
    return NULL;
  }
  bool one = true;
  for (int d = 0; d < i->ndim; d++) one &= i->shape[d] == 1;
  if (!one || (i->dtype != PD_INT64 && i->dtype != PD_INT32)) {
    pd_set_error(PD_ERR_INVALID, "%s: the index must be one int64 (or int32) element, got %s of shape %s", fn,
                 pd_dtype_name(i->dtype), PD_SHAPE_STR(i));
    return NULL;
  }
  pd_variable *v = pd_static_var_for(p, i);
  if (!v) pd_error_prefix("%s: the index", fn);
  return v;
}

/* Appends op type(ins) -> outs to the current block with Paddle's role. */
static pd_operator *append(pd_program *p, const char *type, const char *const *ins, int n_in,
                           const char *const *outs, int n_out, const pd_attrs *a) {
  return pd_ir_append_op(p->blocks[p->current_block], type, ins, n_in, outs, n_out, a);
}

/* A new Variable of the current block for an op's output. */
static pd_variable *out_var(pd_program *p, const char *key, int k, pd_dtype dt, int ndim,
                            const int64_t *shape, bool stop) {
  char name[160];
  snprintf(name, sizeof name, "%s.tmp_%d", key, k);
  pd_variable *v = pd_ir_add_var(p->blocks[p->current_block], name, dt, ndim, shape, NULL);
  if (v) v->stop_gradient = stop;
  return v;
}

static pd_tensor *handle_of(pd_variable *v) {
  pd_tensor *t = pd_tensor_retain(v->tensor);
  t->stop_gradient = v->stop_gradient;
  return pd_scope_track(t);
}

/* The element shape an array Variable records: the first write's (rank 0:
 * none yet), with the dims later writes disagree on made -1. */
static void note_element(pd_variable *a, const pd_variable *x) {
  if (a->ndim == 0) {
    a->ndim = x->ndim;
    memcpy(a->shape, x->shape, sizeof(int64_t) * (size_t)x->ndim);
  } else if (a->ndim == x->ndim) {
    for (int d = 0; d < a->ndim; d++)
      if (a->shape[d] != x->shape[d]) a->shape[d] = -1;
  }
}

static pd_tensor *record_write(pd_program *p, pd_tensor *x, pd_tensor *i, pd_tensor *array) {
  const char *fn = "array_write";
  if (!x) {
    pd_set_error(PD_ERR_INVALID, "%s: x is NULL", fn);
    return NULL;
  }
  pd_variable *xv = pd_static_var_for(p, x), *iv = xv ? index_var(p, i, fn) : NULL;
  if (!xv || !iv) return NULL;
  if (xv->is_array) {
    pd_set_error(PD_ERR_INVALID, "%s: x ('%s') is a tensor array; arrays of arrays are not supported", fn,
                 xv->name);
    return NULL;
  }
  pd_variable *av = array ? array_var(p, array, fn) : new_array_var(p, "array_write", xv->dtype);
  if (!av) return NULL;
  if (av->dtype != xv->dtype) {
    pd_set_error(PD_ERR_DTYPE, "%s: the array '%s' holds %s, x ('%s') is %s", fn, av->name,
                 pd_dtype_name(av->dtype), xv->name, pd_dtype_name(xv->dtype));
    return NULL;
  }
  const char *ins[3] = {xv->name, iv->name, av->name};
  const char *to = pd_ctl_write_target(p, av, fn);
  if (!to) return NULL;
  pd_variable *nv = pd_ir_find_var_recursive(p->blocks[p->current_block], to);
  nv->stop_gradient = av->stop_gradient && xv->stop_gradient;
  note_element(nv, xv);
  const char *outs[1] = {to};
  if (!append(p, PD_STATIC_WRITE_ARRAY, ins, 3, outs, 1, NULL)) return NULL;
  return handle_of(nv); /* the caller's handle: it now stands for the new version */
}

/* ---- the public functions ------------------------------------------------------ */
bool pd_tensor_is_array(const pd_tensor *t) {
  if (pd_array_is_value(t)) return true;
  pd_program *p = t ? pd_static_current_main() : NULL;
  pd_variable *v = p ? pd_ir_var_of(p, t) : NULL;
  return v && v->is_array;
}

pd_tensor *pd_create_array(pd_dtype dtype, pd_tensor *const *initialized_list, int n) {
  if (n < 0 || (n && !initialized_list) || (unsigned)dtype >= PD_NUM_DTYPES) {
    pd_set_error(PD_ERR_INVALID, "create_array: dtype %d, %d initial elements at %p", (int)dtype, n,
                 (const void *)initialized_list);
    return NULL;
  }
  for (int k = 0; k < n; k++)
    if (!initialized_list[k] || initialized_list[k]->dtype != dtype) {
      pd_set_error(PD_ERR_INVALID, "create_array: initial element %d is %s, the array's dtype %s", k,
                   initialized_list[k] ? pd_dtype_name(initialized_list[k]->dtype) : "NULL",
                   pd_dtype_name(dtype));
      return NULL;
    }
  pd_program *p = pd_static_current_main();
  if (!p) return pd_scope_track(pd_array_value_new(dtype, initialized_list, n));
  pd_variable *v = new_array_var(p, "array", dtype);
  if (!v) return NULL;
  pd_tensor *h = pd_tensor_retain(v->tensor);
  for (int k = 0; k < n && h; k++) { /* Paddle writes each at array_length(array) */
    pd_tensor *len = pd_array_length(h), *r = len ? record_write(p, initialized_list[k], len, h) : NULL;
    pd_tensor_release(len);
    if (!r) {
      pd_tensor_release(h);
      return NULL;
    }
    pd_tensor_release(r);
  }
  return pd_scope_track(h);
}

pd_tensor *pd_array_write(pd_tensor *x, pd_tensor *i, pd_tensor *array) {
  const char *fn = "array_write";
  pd_program *p = pd_static_current_main();
  if (p) return record_write(p, x, i, array);
  int64_t k;
  if (!x) {
    pd_set_error(PD_ERR_INVALID, "%s: x is NULL", fn);
    return NULL;
  }
  if (pd_array_is_value(x) || index_of(i, fn, &k) != PD_OK) {
    if (pd_array_is_value(x)) pd_set_error(PD_ERR_INVALID, "%s: x is a tensor array", fn);
    return NULL;
  }
  if (array && need_value(array, fn) != PD_OK) return NULL;
  if (array && array->dtype != x->dtype) {
    pd_set_error(PD_ERR_DTYPE, "%s: the array holds %s, x is %s", fn, pd_dtype_name(array->dtype),
                 pd_dtype_name(x->dtype));
    return NULL;
  }
  int len = array ? list_of(array)->n : 0;
  if (k > len) { /* Paddle's eager rule: i <= len(array) */
    pd_set_error(PD_ERR_INVALID, "%s: index %lld is past the end of an array of length %d", fn, (long long)k,
                 len);
    return NULL;
  }
  pd_tensor *a = array ? pd_tensor_retain(array) : pd_array_value_new(x->dtype, NULL, 0);
  if (!a || list_set(list_of(a), k, x) != PD_OK) {
    pd_tensor_release(a);
    return NULL;
  }
  return pd_scope_track(a);
}

pd_tensor *pd_array_read(pd_tensor *array, pd_tensor *i) {
  const char *fn = "array_read";
  pd_program *p = pd_static_current_main();
  if (!p) return pd_scope_track(read_at(array, i, fn));
  pd_variable *av = array_var(p, array, fn), *iv = av ? index_var(p, i, fn) : NULL;
  if (!iv) return NULL;
  char key[96];
  pd_static_unique_name(fn, key, sizeof key);
  pd_variable *ov = out_var(p, key, 0, av->dtype, av->ndim, av->shape, av->stop_gradient);
  const char *ins[2] = {av->name, iv->name}, *outs[1] = {ov ? ov->name : ""};
  if (!ov || !append(p, PD_STATIC_READ_ARRAY, ins, 2, outs, 1, NULL)) return NULL;
  return handle_of(ov);
}

pd_tensor *pd_array_length(pd_tensor *array) {
  const char *fn = "array_length";
  pd_program *p = pd_static_current_main();
  if (!p) return pd_scope_track(length_of(array, fn));
  pd_variable *av = array_var(p, array, fn);
  if (!av) return NULL;
  char key[96];
  pd_static_unique_name(fn, key, sizeof key);
  pd_variable *ov = out_var(p, key, 0, PD_INT64, 0, NULL, true);
  const char *ins[1] = {av->name}, *outs[1] = {ov ? ov->name : ""};
  if (!ov || !append(p, PD_STATIC_ARRAY_LENGTH, ins, 1, outs, 1, NULL)) return NULL;
  return handle_of(ov);
}

pd_tensor *pd_tensor_array_to_tensor(pd_tensor *input, int64_t axis, bool use_stack, pd_tensor **out_index) {
  const char *fn = "tensor_array_to_tensor";
  if (out_index) *out_index = NULL;
  pd_program *p = pd_static_current_main();
  if (!p) {
    pd_tensor *out = NULL, *idx = NULL;
    if (to_tensor(input, axis, use_stack, &out, &idx) != PD_OK) return NULL;
    if (out_index)
      *out_index = pd_scope_track(idx);
    else
      pd_tensor_release(idx);
    return pd_scope_track(out);
  }
  pd_variable *av = array_var(p, input, fn);
  if (!av) return NULL;
  /* the element count is known only when the program runs */
  int nd = av->ndim + (use_stack ? 1 : 0);
  int64_t ax = axis < 0 ? axis + nd : axis, shape[PD_MAX_DIMS];
  if (ax < 0 || ax >= nd || nd > PD_MAX_DIMS) {
    pd_set_error(PD_ERR_INVALID, "%s: axis %lld is out of range for elements of rank %d", fn, (long long)axis,
                 av->ndim);
    return NULL;
  }
  for (int d = 0, s = 0; d < nd; d++) { /* stack inserts dim ax, concat adds up dim ax */
    shape[d] = d == ax ? -1 : av->shape[s++];
    if (d == ax && !use_stack) s++;
  }
  char key[96];
  pd_static_unique_name(fn, key, sizeof key);
  pd_variable *ov = out_var(p, key, 0, av->dtype, nd, shape, av->stop_gradient);
  pd_variable *iv = ov ? out_var(p, key, 1, PD_INT32, 1, (const int64_t[]){-1}, true) : NULL;
  if (!iv) return NULL;
  const char *ins[1] = {av->name}, *outs[2] = {ov->name, iv->name};
  pd_attrs a = {.i = {ax, use_stack}};
  if (!append(p, PD_STATIC_ARRAY_TO_TENSOR, ins, 1, outs, 2, &a)) return NULL;
  if (out_index) *out_index = handle_of(iv);
  return handle_of(ov);
}
