/* Program files: the JSON form of a Program (docs/static.md, "Program
 * files") and its reader, which checks every field before it builds
 * anything, so a bad, truncated or newer file is an error naming what is
 * wrong. */
#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../ops/op_attrs.h"
#include "paddlec/creation.h"
#include "static_internal.h"

#define PROGRAM_MAGIC "paddle.c program"
/* Version 2 added control flow (while, conditional_block and their grad
 * ops, with "control_attrs") and tensor arrays (a variable's "type");
 * version 3 an op's "op_device" (device_guard). A file is written with the
 * lowest version that has everything it holds (a Program without these is
 * still version 1, readable by every reader), and the reader refuses a
 * field its file's version does not have. */
#define PROGRAM_VERSION 3
#define VERSION_CONTROL 2
#define VERSION_OP_DEVICE 3
#define MAX_NESTING 64 /* sub-blocks inside sub-blocks: a file deeper than this is refused */
/* Generous bounds a real Program stays far below: a file past them is
 * refused before anything is allocated for it. */
#define MAX_BLOCKS 4096
#define MAX_VALUE_BYTES ((size_t)1 << 30)

/* ---- writing ----------------------------------------------------------------- */
/* The ints of a control op's attributes a file holds (sub-blocks, counts,
 * tensor_array_to_tensor's axis and use_stack). */
#define CONTROL_INTS 3

static cJSON *names_json(char *const *names, int n) {
  cJSON *a = cJSON_CreateArray();
  for (int k = 0; a && k < n; k++) {
    cJSON *s = cJSON_CreateString(names[k]);
    if (!s || !cJSON_AddItemToArray(a, s)) {
      cJSON_Delete(s);
      cJSON_Delete(a);
      return NULL;
    }
  }
  return a;
}

static cJSON *shape_json(int ndim, const int64_t *shape) {
  cJSON *a = cJSON_CreateArray();
  for (int d = 0; a && d < ndim; d++) {
    cJSON *e = cJSON_CreateNumber((double)shape[d]);
    if (!e || !cJSON_AddItemToArray(a, e)) {
      cJSON_Delete(e);
      cJSON_Delete(a);
      return NULL;
    }
  }
  return a;
}

/* An assign_value constant: dtype, shape and its bytes in hex. */
static cJSON *value_json(const pd_tensor *t) {
  if (!pd_tensor_is_contiguous(t)) {
    pd_set_error(PD_ERR_INVALID, "serialize_program: an assign_value constant is not contiguous");
    return NULL;
  }
  size_t n = (size_t)pd_tensor_numel(t) * pd_dtype_size(pd_tensor_dtype(t));
  const unsigned char *src = pd_tensor_data(t);
  char *hex = malloc(2 * n + 1);
  cJSON *o = cJSON_CreateObject();
  if (!hex || !o) goto oom;
  static const char digits[] = "0123456789abcdef";
  for (size_t i = 0; i < n; i++) {
    hex[2 * i] = digits[src[i] >> 4];
    hex[2 * i + 1] = digits[src[i] & 15];
  }
  hex[2 * n] = 0;
  if (!cJSON_AddStringToObject(o, "dtype", pd_dtype_name(pd_tensor_dtype(t))) ||
      !cJSON_AddItemToObject(o, "shape", shape_json(pd_tensor_ndim(t), pd_tensor_shape(t))) ||
      !cJSON_AddStringToObject(o, "data", hex))
    goto oom;
  free(hex);
  return o;
oom:
  free(hex);
  cJSON_Delete(o);
  pd_set_error(PD_ERR_MEMORY, "serialize_program: out of memory");
  return NULL;
}

static cJSON *var_json(const pd_variable *v) {
  cJSON *o = cJSON_CreateObject();
  if (!o || !cJSON_AddStringToObject(o, "name", v->name) ||
      !cJSON_AddStringToObject(o, "dtype", pd_dtype_name(v->dtype)) ||
      !cJSON_AddItemToObject(o, "shape", shape_json(v->ndim, v->shape)) ||
      !cJSON_AddBoolToObject(o, "persistable", v->persistable) ||
      !cJSON_AddBoolToObject(o, "stop_gradient", v->stop_gradient) ||
      !cJSON_AddBoolToObject(o, "is_parameter", v->is_parameter) ||
      !cJSON_AddBoolToObject(o, "is_data", v->is_data) ||
      (v->is_array && !cJSON_AddStringToObject(o, "type", "LOD_TENSOR_ARRAY"))) {
    cJSON_Delete(o);
    return NULL;
  }
  return o;
}

static cJSON *op_json(const pd_operator *op) {
  cJSON *o = cJSON_CreateObject();
  if (!o) return NULL;
  bool ok = cJSON_AddStringToObject(o, "type", op->type) &&
            cJSON_AddItemToObject(o, "inputs", names_json(op->inputs, op->n_in)) &&
            cJSON_AddItemToObject(o, "outputs", names_json(op->outputs, op->n_out)) &&
            cJSON_AddNumberToObject(o, "role", op->role) &&
            cJSON_AddStringToObject(o, "name_scope", op->name_scope) &&
            (!op->op_device[0] || cJSON_AddStringToObject(o, "op_device", op->op_device));
  const pd_op_def *def = op->op_id >= 0     ? pd_op_table[op->op_id]
                         : op->grad_of >= 0 ? pd_op_table[op->grad_of]
                                            : NULL;
  if (ok && op->grad_of >= 0)
    ok = cJSON_AddStringToObject(o, "grad_of", def->name) &&
         cJSON_AddNumberToObject(o, "fwd_n_in", op->fwd_n_in) &&
         cJSON_AddNumberToObject(o, "fwd_n_out", op->fwd_n_out);
  if (ok && !def && op->grad_of < 0 && pd_static_is_control_type(op->type)) {
    cJSON *ca = cJSON_CreateObject(), *ints = NULL;
    ok = ca && cJSON_AddItemToObject(o, "control_attrs", ca); /* o owns ca from here */
    if (!ok) cJSON_Delete(ca);
    if (ok && !((ints = shape_json(CONTROL_INTS, op->attrs.i)) && cJSON_AddItemToObject(ca, "i", ints))) {
      cJSON_Delete(ints);
      ok = false;
    }
    ok = ok && cJSON_AddStringToObject(ca, "s", op->attrs.s) &&
         cJSON_AddStringToObject(ca, "dtype", pd_dtype_name(op->attrs.dtype));
    if (ok && op->fwd_n_out > 0) /* a grad op: while_grad, conditional_block_grad */
      ok = cJSON_AddNumberToObject(o, "fwd_n_in", op->fwd_n_in) &&
           cJSON_AddNumberToObject(o, "fwd_n_out", op->fwd_n_out);
  }
  if (ok && def) {
    cJSON *attrs = pd_op_attrs_to_json(def, &op->attrs);
    if (!attrs) {
      cJSON_Delete(o);
      return NULL;
    }
    ok = cJSON_AddItemToObject(o, "attrs", attrs);
  }
  if (ok && op->value) {
    cJSON *val = value_json(op->value);
    if (!val) {
      cJSON_Delete(o);
      return NULL;
    }
    ok = cJSON_AddItemToObject(o, "value", val);
  }
  if (!ok) {
    cJSON_Delete(o);
    pd_set_error(PD_ERR_MEMORY, "serialize_program: out of memory at op %s", op->type);
    return NULL;
  }
  return o;
}

static cJSON *block_json(const pd_static_block *b) {
  cJSON *o = cJSON_CreateObject(), *vars = cJSON_CreateArray(), *ops = cJSON_CreateArray();
  bool ok = o && vars && ops && cJSON_AddNumberToObject(o, "idx", b->idx) &&
            cJSON_AddNumberToObject(o, "parent_idx", b->parent_idx);
  for (int k = 0; ok && k < b->n_vars; k++) {
    cJSON *v = var_json(b->vars[k]);
    ok = v && cJSON_AddItemToArray(vars, v);
    if (!ok) cJSON_Delete(v);
  }
  for (int k = 0; ok && k < b->n_ops; k++) {
    cJSON *op = op_json(b->ops[k]);
    ok = op && cJSON_AddItemToArray(ops, op);
    if (!ok) cJSON_Delete(op);
  }
  if (ok && cJSON_AddItemToObject(o, "vars", vars)) {
    vars = NULL;
    if (cJSON_AddItemToObject(o, "ops", ops)) return o;
  }
  cJSON_Delete(vars);
  cJSON_Delete(ops);
  cJSON_Delete(o);
  if (pd_last_error()[0] == 0) pd_set_error(PD_ERR_MEMORY, "serialize_program: out of memory");
  return NULL;
}

char *pd_static_serialize_program(const pd_program *p, size_t *size) {
  if (size) *size = 0;
  if (!p) {
    pd_set_error(PD_ERR_INVALID, "serialize_program: program is NULL");
    return NULL;
  }
  int version = 1; /* the lowest version that has everything p holds */
  for (int i = 0; i < p->n_blocks; i++) {
    for (int k = 0; k < p->blocks[i]->n_ops; k++) {
      const pd_operator *op = p->blocks[i]->ops[k];
      if (pd_static_is_control_type(op->type) && version < VERSION_CONTROL) version = VERSION_CONTROL;
      if (op->op_device[0] && version < VERSION_OP_DEVICE) version = VERSION_OP_DEVICE;
    }
    for (int k = 0; k < p->blocks[i]->n_vars; k++)
      if (p->blocks[i]->vars[k]->is_array && version < VERSION_CONTROL) version = VERSION_CONTROL;
  }
  pd_clear_error();
  cJSON *root = cJSON_CreateObject(), *blocks = cJSON_CreateArray();
  bool ok = root && blocks && cJSON_AddStringToObject(root, "magic", PROGRAM_MAGIC) &&
            cJSON_AddNumberToObject(root, "version", version) &&
            cJSON_AddBoolToObject(root, "is_test", p->is_test);
  for (int i = 0; ok && i < p->n_blocks; i++) {
    cJSON *b = block_json(p->blocks[i]);
    ok = b && cJSON_AddItemToArray(blocks, b);
    if (!ok) cJSON_Delete(b);
  }
  char *text = NULL;
  if (ok && cJSON_AddItemToObject(root, "blocks", blocks)) {
    blocks = NULL;
    text = cJSON_PrintUnformatted(root);
  }
  cJSON_Delete(blocks);
  cJSON_Delete(root);
  if (!text) {
    if (pd_last_error()[0] == 0) pd_set_error(PD_ERR_MEMORY, "serialize_program: out of memory");
    return NULL;
  }
  if (size) *size = strlen(text);
  return text;
}

/* ---- reading ------------------------------------------------------------------ */
/* Every reader error starts with where it is: "deserialize_program: block
 * 0, op 3 (matmul): ...". */
typedef struct reader {
  char where[160];
  int64_t version; /* the file's format version */
} reader;

static pd_status bad(const reader *r, const char *fmt, const char *detail) {
  char msg[256];
  snprintf(msg, sizeof msg, fmt, detail);
  return pd_set_error(PD_ERR_INVALID, "deserialize_program: %s%s%s", r->where, r->where[0] ? ": " : "", msg);
}

static const cJSON *member(const cJSON *o, const char *key) {
  return cJSON_GetObjectItemCaseSensitive(o, key);
}

/* An integer member in [lo, hi]. */
static pd_status int_member(const reader *r, const cJSON *o, const char *key, int64_t lo, int64_t hi,
                            int64_t *out) {
  const cJSON *j = member(o, key);
  if (!cJSON_IsNumber(j) || j->valuedouble != (double)(int64_t)j->valuedouble)
    return bad(r, "'%s' is missing or not an integer", key);
  int64_t v = (int64_t)j->valuedouble;
  if (v < lo || v > hi) return bad(r, "'%s' is out of range", key);
  *out = v;
  return PD_OK;
}

static pd_status bool_member(const reader *r, const cJSON *o, const char *key, bool *out) {
  const cJSON *j = member(o, key);
  if (!cJSON_IsBool(j)) return bad(r, "'%s' is missing or not true/false", key);
  *out = cJSON_IsTrue(j);
  return PD_OK;
}

static const char *string_member(const reader *r, const cJSON *o, const char *key) {
  const cJSON *j = member(o, key);
  if (!cJSON_IsString(j) || !j->valuestring) {
    bad(r, "'%s' is missing or not a string", key);
    return NULL;
  }
  return j->valuestring;
}

static pd_status dtype_member(const reader *r, const cJSON *o, pd_dtype *out) {
  const char *s = string_member(r, o, "dtype");
  if (!s) return pd_last_status();
  int dt = pd_dtype_from_name(s);
  if (dt < 0) return bad(r, "unknown dtype '%s'", s);
  *out = (pd_dtype)dt;
  return PD_OK;
}

/* A shape: at most PD_MAX_DIMS integers, each >= -1 (-1: unknown) or,
 * with known_only, >= 0. */
static pd_status shape_member(const reader *r, const cJSON *o, bool known_only, int *ndim, int64_t *shape) {
  const cJSON *a = member(o, "shape");
  if (!cJSON_IsArray(a)) return bad(r, "'%s' is missing or not an array", "shape");
  int n = 0;
  for (const cJSON *e = a->child; e; e = e->next) {
    if (n >= PD_MAX_DIMS) return bad(r, "%s", "'shape' has more dims than a tensor may");
    if (!cJSON_IsNumber(e) || e->valuedouble != (double)(int64_t)e->valuedouble || e->valuedouble < -1 ||
        e->valuedouble > (double)((int64_t)1 << 53) || (known_only && e->valuedouble < 0))
      return bad(r, "'shape' has a dim that is not %s", known_only ? "an integer >= 0" : "an integer >= -1");
    shape[n++] = (int64_t)e->valuedouble;
  }
  *ndim = n;
  return PD_OK;
}

static pd_status read_var(reader *r, const cJSON *o, pd_static_block *b) {
  if (!cJSON_IsObject(o)) return bad(r, "%s", "a variable is not an object");
  const char *name = string_member(r, o, "name");
  if (!name) return pd_last_status();
  if (!*name || strlen(name) > 1000) return bad(r, "%s", "a variable name is empty or too long");
  size_t at = strlen(r->where);
  snprintf(r->where + at, sizeof r->where - at, ", variable '%.60s'", name);
  pd_dtype dt = PD_FLOAT32;
  int ndim = 0;
  int64_t shape[PD_MAX_DIMS];
  bool persistable = false, stop = false, param = false, data = false;
  pd_status st = dtype_member(r, o, &dt);
  if (st == PD_OK) st = shape_member(r, o, false, &ndim, shape);
  if (st == PD_OK) st = bool_member(r, o, "persistable", &persistable);
  if (st == PD_OK) st = bool_member(r, o, "stop_gradient", &stop);
  if (st == PD_OK) st = bool_member(r, o, "is_parameter", &param);
  if (st == PD_OK) st = bool_member(r, o, "is_data", &data);
  bool array = false;
  const cJSON *type = member(o, "type");
  if (st == PD_OK && type) {
    if (!cJSON_IsString(type) ||
        (strcmp(type->valuestring, "LOD_TENSOR_ARRAY") != 0 && strcmp(type->valuestring, "LOD_TENSOR") != 0))
      st = bad(r, "%s", "'type' is neither \"LOD_TENSOR\" nor \"LOD_TENSOR_ARRAY\"");
    else
      array = strcmp(type->valuestring, "LOD_TENSOR_ARRAY") == 0;
  }
  if (st == PD_OK && pd_ir_find_var(b, name)) st = bad(r, "%s", "the block names this variable twice");
  if (st == PD_OK) {
    pd_variable *v = pd_ir_add_var(b, name, dt, ndim, shape, NULL);
    if (!v) return pd_last_status();
    v->persistable = persistable;
    v->stop_gradient = stop;
    v->is_parameter = param;
    v->is_data = data;
    v->is_array = array;
  }
  r->where[at] = 0;
  return st;
}

/* inputs or outputs: names of variables visible from b, or @EMPTY@. */
static pd_status read_names(const reader *r, const cJSON *o, const char *key, const pd_static_block *b,
                            const char **names, int *n) {
  const cJSON *a = member(o, key);
  if (!cJSON_IsArray(a)) return bad(r, "'%s' is missing or not an array", key);
  *n = 0;
  for (const cJSON *e = a->child; e; e = e->next) {
    if (*n >= PD_MAX_OUTPUTS) return bad(r, "'%s' has too many entries", key);
    if (!cJSON_IsString(e)) return bad(r, "'%s' has an entry that is not a string", key);
    const char *s = e->valuestring;
    if (strcmp(s, PD_STATIC_EMPTY_VAR) != 0 && !pd_ir_find_var_recursive(b, s)) {
      char msg[160];
      snprintf(msg, sizeof msg, "'%s' names '%.60s', no variable of the block", key, s);
      return bad(r, "%s", msg);
    }
    names[(*n)++] = s;
  }
  return PD_OK;
}

static int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

static pd_tensor *read_value(const reader *r, const cJSON *o) {
  if (!cJSON_IsObject(o)) {
    bad(r, "%s", "'value' is not an object");
    return NULL;
  }
  pd_dtype dt = PD_FLOAT32;
  int ndim = 0;
  int64_t shape[PD_MAX_DIMS];
  if (dtype_member(r, o, &dt) != PD_OK || shape_member(r, o, true, &ndim, shape) != PD_OK) return NULL;
  size_t numel = 1;
  for (int d = 0; d < ndim; d++) {
    if (shape[d] != 0 && numel > MAX_VALUE_BYTES / (size_t)shape[d]) {
      bad(r, "%s", "'value' is too large");
      return NULL;
    }
    numel *= (size_t)shape[d];
  }
  size_t bytes = numel * pd_dtype_size(dt);
  const char *hex = string_member(r, o, "data");
  if (!hex) return NULL;
  if (bytes > MAX_VALUE_BYTES || strlen(hex) != 2 * bytes) {
    bad(r, "%s", "'value' data does not hold shape x dtype bytes (two hex digits each)");
    return NULL;
  }
  for (size_t i = 0; i < 2 * bytes; i++)
    if (hex_digit(hex[i]) < 0) {
      bad(r, "%s", "'value' data is not lowercase hex");
      return NULL;
    }
  pd_internal_enter(); /* the Program owns it, not the caller's scope */
  pd_tensor *t = pd_empty(ndim, shape, dt);
  pd_internal_leave();
  if (!t) return NULL;
  unsigned char *dst = pd_tensor_data(t);
  for (size_t i = 0; i < bytes; i++)
    dst[i] = (unsigned char)(hex_digit(hex[2 * i]) << 4 | hex_digit(hex[2 * i + 1]));
  return t;
}

/* A control-flow or tensor array op: its "control_attrs" ({"i": up to
 * CONTROL_INTS integers, "s": the key, "dtype"}) and, for a grad op, its
 * forward op's slot counts. Sub-block references are checked once every
 * block is read (check_sub_blocks); the executor checks the rest when it
 * runs the op. */
static pd_status read_control_op(reader *r, const cJSON *o, pd_static_block *b, const char *type,
                                 const char **ins, int n_in, const char **outs, int n_out, int role,
                                 const char *scope) {
  const cJSON *ca = member(o, "control_attrs");
  if (!cJSON_IsObject(ca)) return bad(r, "%s", "'control_attrs' is missing or not an object");
  pd_attrs attrs;
  memset(&attrs, 0, sizeof attrs);
  const cJSON *ints = member(ca, "i");
  if (!cJSON_IsArray(ints) || cJSON_GetArraySize(ints) > CONTROL_INTS)
    return bad(r, "%s", "'control_attrs.i' is missing or too long");
  int k = 0;
  for (const cJSON *e = ints->child; e; e = e->next, k++) {
    if (!cJSON_IsNumber(e) || e->valuedouble != (double)(int64_t)e->valuedouble || fabs(e->valuedouble) > 1e9)
      return bad(r, "%s", "'control_attrs.i' has an entry that is not a small integer");
    attrs.i[k] = (int64_t)e->valuedouble;
  }
  const char *key = string_member(r, ca, "s");
  if (!key) return pd_last_status();
  if (strlen(key) >= sizeof attrs.s) return bad(r, "%s", "'control_attrs.s' is too long");
  memcpy(attrs.s, key, strlen(key) + 1);
  pd_status st = dtype_member(r, ca, &attrs.dtype);
  if (st != PD_OK) return st;
  int64_t fi = 0, fo = 0;
  size_t tn = strlen(type);
  bool grad = tn > 5 && strcmp(type + tn - 5, "_grad") == 0; /* while_grad, write_to_array_grad, ... */
  if (grad && ((st = int_member(r, o, "fwd_n_in", 1, PD_MAX_OUTPUTS, &fi)) != PD_OK ||
               (st = int_member(r, o, "fwd_n_out", 1, PD_MAX_OUTPUTS, &fo)) != PD_OK))
    return st;
  if (grad && (n_in != fi + 2 * fo || n_out != fi))
    return bad(r, "%s", "the grad op's slot counts do not match its forward op");
  bool loop = strcmp(type, PD_STATIC_WHILE) == 0 || strcmp(type, PD_STATIC_WHILE_GRAD) == 0;
  bool cond = strcmp(type, PD_STATIC_COND) == 0 || strcmp(type, PD_STATIC_COND_GRAD) == 0;
  int results = grad ? (int)fo : n_out;
  if ((loop && attrs.i[1] != results) || (cond && attrs.i[2] != results))
    return bad(r, "%s", "the op's output count differs from its attributes");
  pd_operator *op = pd_ir_append_op(b, type, ins, n_in, outs, n_out, &attrs);
  if (!op) return pd_last_status();
  op->fwd_n_in = (int)fi;
  op->fwd_n_out = (int)fo;
  op->role = role;
  snprintf(op->name_scope, sizeof op->name_scope, "%s", scope);
  return PD_OK;
}

/* The sub-blocks a while or conditional_block op of block b names: blocks
 * whose parent is b (so running them never comes back to b), at most
 * MAX_NESTING deep. */
static pd_status check_sub_blocks(reader *r, const pd_program *p) {
  for (int i = 0; i < p->n_blocks; i++) {
    int depth = 0;
    for (int b = i; b > 0; b = p->blocks[b]->parent_idx) depth++;
    if (depth > MAX_NESTING) {
      snprintf(r->where, sizeof r->where, "block %d", i);
      return bad(r, "%s", "is nested too deep");
    }
    const pd_static_block *blk = p->blocks[i];
    for (int k = 0; k < blk->n_ops; k++) {
      const pd_operator *op = blk->ops[k];
      int n_sub = op->ctl == PD_CTL_COND ? 2 : op->ctl == PD_CTL_WHILE ? 1 : 0; /* the op or its grad op */
      for (int s = 0; s < n_sub; s++) {
        int64_t sb = op->attrs.i[s];
        if (sb <= i || sb >= p->n_blocks || p->blocks[sb]->parent_idx != i) {
          snprintf(r->where, sizeof r->where, "block %d, op %d (%s)", i, k, op->type);
          return bad(r, "%s", "names a sub-block that is not a block nested in this one");
        }
      }
    }
  }
  return PD_OK;
}

/* An op's optional "op_device" (format version 3): a device this build
 * runs on, as device_guard accepts ("cpu"); *device stays "" without one. */
static pd_status read_op_device(reader *r, const cJSON *o, const char **device) {
  const cJSON *d = member(o, "op_device");
  if (!d) return PD_OK;
  if (r->version < VERSION_OP_DEVICE) return bad(r, "%s", "has 'op_device', which format version 3 added");
  if (!cJSON_IsString(d)) return bad(r, "%s", "'op_device' is not a string");
  if (strlen(d->valuestring) >= sizeof(((pd_operator *)0)->op_device))
    return bad(r, "%s", "'op_device' is too long");
  if (pd_static_check_device("op_device", d->valuestring) != PD_OK) {
    pd_error_prefix("deserialize_program: %s", r->where);
    return pd_last_status();
  }
  *device = d->valuestring;
  return PD_OK;
}

static pd_status read_op(reader *r, const cJSON *o, pd_static_block *b) {
  if (!cJSON_IsObject(o)) return bad(r, "%s", "an op is not an object");
  const char *type = string_member(r, o, "type");
  if (!type) return pd_last_status();
  size_t at = strlen(r->where);
  snprintf(r->where + at, sizeof r->where - at, " (%.60s)", type);
  const char *ins[PD_MAX_OUTPUTS], *outs[PD_MAX_OUTPUTS];
  int n_in, n_out;
  int64_t role;
  pd_status st = read_names(r, o, "inputs", b, ins, &n_in);
  if (st == PD_OK) st = read_names(r, o, "outputs", b, outs, &n_out);
  if (st == PD_OK) st = int_member(r, o, "role", 0, 0xffff, &role);
  const char *scope = st == PD_OK ? string_member(r, o, "name_scope") : NULL;
  if (st == PD_OK && !scope) st = pd_last_status();
  if (st == PD_OK && strlen(scope) >= sizeof(((pd_operator *)0)->name_scope))
    st = bad(r, "%s", "'name_scope' is too long");
  const char *device = "";
  if (st == PD_OK) st = read_op_device(r, o, &device);
  if (st != PD_OK) return st;
  const cJSON *grad_of = member(o, "grad_of");
  const pd_op_def *def = NULL;
  int64_t fwd_n_in = 0, fwd_n_out = 0;
  bool is_value = strcmp(type, PD_STATIC_ASSIGN_VALUE) == 0 && !grad_of;
  if (grad_of) {
    int id = cJSON_IsString(grad_of) ? pd_op_find(grad_of->valuestring) : -1;
    if (id < 0) return bad(r, "%s", "'grad_of' names no registry op");
    def = pd_op_table[id];
    if (!def->backward) return bad(r, "'grad_of' names %s, which has no backward", def->name);
    if ((st = int_member(r, o, "fwd_n_in", 0, PD_MAX_OUTPUTS, &fwd_n_in)) != PD_OK ||
        (st = int_member(r, o, "fwd_n_out", 1, PD_MAX_OUTPUTS, &fwd_n_out)) != PD_OK)
      return st;
    if ((def->n_in >= 0 && fwd_n_in != def->n_in) || (def->n_out >= 0 && fwd_n_out != def->n_out) ||
        n_in != fwd_n_in + 2 * fwd_n_out || n_out != fwd_n_in)
      return bad(r, "%s", "the grad op's slot counts do not match its forward op");
  } else if (pd_static_is_control_type(type)) {
    st = read_control_op(r, o, b, type, ins, n_in, outs, n_out, (int)role, scope);
    if (st == PD_OK) snprintf(b->ops[b->n_ops - 1]->op_device, sizeof b->ops[0]->op_device, "%s", device);
    return st;
  } else if (!is_value) {
    int id = pd_op_find(type);
    if (id < 0) return bad(r, "'%s' is no registry op", type);
    def = pd_op_table[id];
    if ((def->n_in >= 0 && n_in != def->n_in) || (def->n_out >= 0 && n_out != def->n_out) || n_out < 1)
      return bad(r, "%s", "the op's input or output count differs from its registry row");
  } else if (n_in != 0 || n_out != 1) {
    return bad(r, "%s", "assign_value takes no inputs and writes one output");
  }
  pd_attrs attrs;
  memset(&attrs, 0, sizeof attrs);
  const cJSON *ja = member(o, "attrs");
  if (def) {
    if (!ja) return bad(r, "%s", "'attrs' is missing");
    if (pd_op_attrs_from_json(def, ja, &attrs) != PD_OK) {
      pd_error_prefix("deserialize_program: %s", r->where);
      return pd_last_status();
    }
  }
  pd_tensor *value = NULL;
  if (is_value) {
    value = read_value(r, member(o, "value"));
    if (!value) return pd_last_status();
    const pd_variable *ov = pd_ir_find_var_recursive(b, outs[0]);
    if (ov->dtype != pd_tensor_dtype(value)) {
      pd_tensor_release(value);
      return bad(r, "%s", "the constant's dtype differs from its output variable's");
    }
    attrs.dtype = ov->dtype;
  }
  pd_operator *op = grad_of ? pd_ir_append_grad_op(b, (pd_op_id)pd_op_find(def->name), (int)fwd_n_in,
                                                   (int)fwd_n_out, ins, outs, &attrs)
                            : pd_ir_append_op(b, type, ins, n_in, outs, n_out, &attrs);
  if (!op) {
    pd_tensor_release(value);
    return pd_last_status();
  }
  op->value = value;
  op->role = (int)role;
  snprintf(op->name_scope, sizeof op->name_scope, "%s", scope);
  snprintf(op->op_device, sizeof op->op_device, "%s", device);
  r->where[at] = 0;
  return PD_OK;
}

static pd_status read_block(reader *r, const cJSON *o, pd_program *p, int i) {
  snprintf(r->where, sizeof r->where, "block %d", i);
  if (!cJSON_IsObject(o)) return bad(r, "%s", "is not an object");
  int64_t idx, parent;
  pd_status st = int_member(r, o, "idx", i, i, &idx);
  if (st == PD_OK) st = int_member(r, o, "parent_idx", i == 0 ? -1 : 0, i - 1, &parent);
  if (st != PD_OK) return st;
  pd_static_block *b = i == 0 ? p->blocks[0] : pd_ir_add_block(p, (int)parent);
  if (!b) return pd_last_status();
  const cJSON *vars = member(o, "vars"), *ops = member(o, "ops");
  if (!cJSON_IsArray(vars)) return bad(r, "'%s' is missing or not an array", "vars");
  if (!cJSON_IsArray(ops)) return bad(r, "'%s' is missing or not an array", "ops");
  for (const cJSON *v = vars->child; v; v = v->next)
    if ((st = read_var(r, v, b)) != PD_OK) return st;
  int k = 0;
  for (const cJSON *op = ops->child; op; op = op->next, k++) {
    snprintf(r->where, sizeof r->where, "block %d, op %d", i, k);
    if ((st = read_op(r, op, b)) != PD_OK) return st;
  }
  return PD_OK;
}

pd_program *pd_static_deserialize_program(const void *data, size_t size) {
  reader r = {{0}, 0};
  if (!data) {
    pd_set_error(PD_ERR_INVALID, "deserialize_program: data is NULL");
    return NULL;
  }
  cJSON *root = cJSON_ParseWithLength(data, size);
  if (!root) {
    pd_set_error(PD_ERR_INVALID,
                 "deserialize_program: not a Program file (the JSON does not parse; truncated or another "
                 "format) after %zu of %zu bytes",
                 (size_t)(cJSON_GetErrorPtr() ? cJSON_GetErrorPtr() - (const char *)data : 0), size);
    return NULL;
  }
  pd_program *p = NULL;
  const cJSON *magic = member(root, "magic");
  int64_t version;
  if (!cJSON_IsObject(root) || !cJSON_IsString(magic) || strcmp(magic->valuestring, PROGRAM_MAGIC) != 0) {
    bad(&r, "%s", "not a Program file (no \"magic\": \"" PROGRAM_MAGIC "\")");
    goto done;
  }
  const cJSON *jv = member(root, "version");
  if (!cJSON_IsNumber(jv) || jv->valuedouble < 1 || jv->valuedouble != (double)(int64_t)jv->valuedouble) {
    bad(&r, "%s", "'version' is missing or not a positive integer");
    goto done;
  }
  version = (int64_t)jv->valuedouble;
  r.version = version;
  if (version > PROGRAM_VERSION) {
    pd_set_error(PD_ERR_INVALID,
                 "deserialize_program: the file has format version %lld, newer than this build reads (%d)",
                 (long long)version, PROGRAM_VERSION);
    goto done;
  }
  bool is_test = false;
  if (bool_member(&r, root, "is_test", &is_test) != PD_OK) goto done;
  const cJSON *blocks = member(root, "blocks");
  int nb = cJSON_IsArray(blocks) ? cJSON_GetArraySize(blocks) : 0;
  if (nb < 1 || nb > MAX_BLOCKS) {
    bad(&r, "%s", "'blocks' is missing, empty or too long");
    goto done;
  }
  if (!(p = pd_static_program())) goto done;
  p->is_test = is_test;
  int i = 0;
  for (const cJSON *b = blocks->child; b; b = b->next, i++)
    if (read_block(&r, b, p, i) != PD_OK) {
      pd_program_release(p);
      p = NULL;
      goto done;
    }
  if (check_sub_blocks(&r, p) != PD_OK) {
    pd_program_release(p);
    p = NULL;
    goto done;
  }
  p->version = 1;
done:
  cJSON_Delete(root);
  return p;
}
