/* The Program IR: programs of blocks, blocks of variables and operators. */
#include <stdlib.h>
#include <string.h>

#include "static_internal.h"

static char *dup_str(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = malloc(n);
  if (d) memcpy(d, s, n);
  return d;
}

/* Grows *arr (of element size sz) to hold one more than *n. */
static bool grow(void **arr, int *cap, int n, size_t sz) {
  if (n < *cap) return true;
  int nc = *cap ? *cap * 2 : 8;
  void *p = realloc(*arr, (size_t)nc * sz);
  if (!p) return false;
  *arr = p;
  *cap = nc;
  return true;
}

/* ---- the handle -> variable map ----------------------------------------- */
static size_t hash_ptr(const void *p) {
  uintptr_t x = (uintptr_t)p;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  return (size_t)x;
}

static bool map_put(pd_var_map *m, const pd_tensor *k, pd_variable *v) {
  if ((m->n + 1) * 2 > m->cap) {
    int nc = m->cap ? m->cap * 2 : 64;
    const pd_tensor **nk = calloc((size_t)nc, sizeof *nk);
    pd_variable **nv = calloc((size_t)nc, sizeof *nv);
    if (!nk || !nv) {
      free(nk);
      free(nv);
      return false;
    }
    for (int i = 0; i < m->cap; i++) {
      if (!m->keys[i]) continue;
      size_t j = hash_ptr(m->keys[i]) & (size_t)(nc - 1);
      while (nk[j]) j = (j + 1) & (size_t)(nc - 1);
      nk[j] = m->keys[i];
      nv[j] = m->vals[i];
    }
    free(m->keys);
    free(m->vals);
    m->keys = nk;
    m->vals = nv;
    m->cap = nc;
  }
  size_t j = hash_ptr(k) & (size_t)(m->cap - 1);
  while (m->keys[j] && m->keys[j] != k) j = (j + 1) & (size_t)(m->cap - 1);
  if (!m->keys[j]) m->n++;
  m->keys[j] = k;
  m->vals[j] = v;
  return true;
}

pd_variable *pd_ir_var_of(const pd_program *p, const pd_tensor *t) {
  const pd_var_map *m = &p->map;
  if (!t || !m->cap) return NULL;
  size_t j = hash_ptr(t) & (size_t)(m->cap - 1);
  while (m->keys[j]) {
    if (m->keys[j] == t) return m->vals[j];
    j = (j + 1) & (size_t)(m->cap - 1);
  }
  return NULL;
}

/* ---- programs and blocks --------------------------------------------------- */
static pd_static_block *new_block(pd_program *p, int parent) {
  if (!grow((void **)&p->blocks, &p->cap_blocks, p->n_blocks, sizeof *p->blocks)) return NULL;
  pd_static_block *b = calloc(1, sizeof *b);
  if (!b) return NULL;
  b->program = p;
  b->idx = p->n_blocks;
  b->parent_idx = parent;
  p->blocks[p->n_blocks++] = b;
  return b;
}

pd_static_block *pd_ir_add_block(pd_program *p, int parent_idx) {
  pd_static_block *b = new_block(p, parent_idx);
  if (!b) pd_set_error(PD_ERR_MEMORY, "Program: out of memory adding block %d", p->n_blocks);
  return b;
}

pd_program *pd_static_program(void) {
  pd_program *p = calloc(1, sizeof *p);
  if (!p || !new_block(p, -1)) {
    free(p);
    pd_set_error(PD_ERR_MEMORY, "Program: out of memory");
    return NULL;
  }
  return p;
}

static void free_var(pd_variable *v) {
  if (!v) return;
  if (v->dist_attr && v->dist_attr_ops) v->dist_attr_ops->free(v->dist_attr);
  pd_tensor_release(v->tensor);
  free(v->name);
  free(v);
}

static void free_op(pd_operator *op) {
  if (!op) return;
  for (int i = 0; i < op->n_in; i++) free(op->inputs[i]);
  for (int i = 0; i < op->n_out; i++) free(op->outputs[i]);
  free(op->inputs);
  free(op->outputs);
  pd_tensor_release(op->value);
  if (op->fused) op->fused->release(op->fused);
  free(op->type);
  free(op);
}

void pd_program_release(pd_program *p) {
  if (!p) return;
  for (int i = 0; i < p->n_blocks; i++) {
    pd_static_block *b = p->blocks[i];
    for (int k = 0; k < b->n_vars; k++) free_var(b->vars[k]);
    for (int k = 0; k < b->n_ops; k++) free_op(b->ops[k]);
    free(b->vars);
    free(b->ops);
    free(b);
  }
  free(p->blocks);
  for (int i = 0; i < p->n_lr; i++) {
    free(p->lr[i].var);
    pd_lr_release(p->lr[i].sched);
  }
  free(p->lr);
  free(p->map.keys);
  free(p->map.vals);
  free(p);
}

void pd_ir_touch(pd_program *p) { p->version++; }

pd_static_block *pd_program_global_block(pd_program *p) {
  if (!p) {
    pd_set_error(PD_ERR_INVALID, "global_block: program is NULL");
    return NULL;
  }
  return p->blocks[0];
}
int pd_program_num_blocks(const pd_program *p) { return p ? p->n_blocks : 0; }
uint64_t pd_program_version(const pd_program *p) { return p ? p->version : 0; }

int pd_static_block_num_ops(const pd_static_block *b) { return b ? b->n_ops : 0; }
int pd_static_block_num_vars(const pd_static_block *b) { return b ? b->n_vars : 0; }
const char *pd_static_block_op_type(const pd_static_block *b, int i) {
  return b && i >= 0 && i < b->n_ops ? b->ops[i]->type : NULL;
}

/* ---- variables --------------------------------------------------------------- */
int pd_ir_var_index(const pd_static_block *b, const char *name) {
  for (int i = 0; i < b->n_vars; i++)
    if (strcmp(b->vars[i]->name, name) == 0) return i;
  return -1;
}

pd_variable *pd_ir_find_var(const pd_static_block *b, const char *name) {
  int i = pd_ir_var_index(b, name);
  return i >= 0 ? b->vars[i] : NULL;
}

pd_variable *pd_ir_find_var_recursive(const pd_static_block *b, const char *name) {
  while (b) {
    pd_variable *v = pd_ir_find_var(b, name);
    if (v) return v;
    b = b->parent_idx >= 0 ? b->program->blocks[b->parent_idx] : NULL;
  }
  return NULL;
}

pd_variable *pd_ir_add_var(pd_static_block *b, const char *name, pd_dtype dt, int ndim, const int64_t *shape,
                           pd_tensor *handle) {
  if (pd_ir_find_var(b, name)) {
    pd_set_error(PD_ERR_INVALID, "Program: block %d already has a variable named '%s'", b->idx, name);
    return NULL;
  }
  if (ndim < 0 || ndim > PD_MAX_DIMS) {
    pd_set_error(PD_ERR_INVALID, "Program: variable '%s' has rank %d (at most %d)", name, ndim, PD_MAX_DIMS);
    return NULL;
  }
  pd_variable *v = calloc(1, sizeof *v);
  if (!v || !(v->name = dup_str(name)) ||
      !grow((void **)&b->vars, &b->cap_vars, b->n_vars, sizeof *b->vars)) {
    if (v) free(v->name);
    free(v);
    pd_set_error(PD_ERR_MEMORY, "Program: out of memory adding variable '%s'", name);
    return NULL;
  }
  v->dtype = dt;
  v->ndim = ndim;
  for (int d = 0; d < ndim; d++) v->shape[d] = shape[d];
  v->stop_gradient = true;
  if (handle) {
    v->tensor = pd_tensor_retain(handle);
  } else {
    pd_internal_enter(); /* the Program owns it, not the caller's scope */
    v->tensor = pd_tensor_new_meta(dt, ndim, shape);
    pd_internal_leave();
    if (!v->tensor) {
      free(v->name);
      free(v);
      return NULL;
    }
    pd_tensor_set_name(v->tensor, name);
  }
  if (!map_put(&b->program->map, v->tensor, v)) {
    free_var(v);
    pd_set_error(PD_ERR_MEMORY, "Program: out of memory adding variable '%s'", name);
    return NULL;
  }
  b->vars[b->n_vars++] = v;
  pd_ir_touch(b->program);
  return v;
}

pd_variable *pd_ir_new_version(pd_static_block *b, pd_variable *v) {
  char name[300];
  snprintf(name, sizeof name, "%s", v->name);
  char *at = strstr(name, "@V"); /* x, x@V1, x@V2, ...: strip a version suffix */
  if (at) *at = 0;
  size_t base = strlen(name);
  bool taken = true; /* unique in the whole program: sub-blocks resolve outer names */
  for (int k = 1; taken; k++) {
    snprintf(name + base, sizeof name - base, "@V%d", k);
    taken = false;
    for (int i = 0; i < b->program->n_blocks && !taken; i++)
      taken = pd_ir_find_var(b->program->blocks[i], name) != NULL;
  }
  pd_variable *nv = pd_ir_add_var(b, name, v->dtype, v->ndim, v->shape, NULL);
  if (!nv) return NULL;
  nv->stop_gradient = v->stop_gradient;
  nv->is_array = v->is_array;
  return pd_ir_give_handle(b->program, v, nv) == PD_OK ? nv : NULL;
}

/* Swaps the shapes of meta tensors a and b. */
static void swap_meta_geometry(pd_tensor *a, pd_tensor *b) {
  int ndim = a->ndim;
  int64_t numel = a->numel, shape[PD_MAX_DIMS], strides[PD_MAX_DIMS];
  bool contiguous = a->is_contiguous;
  memcpy(shape, a->shape, sizeof shape);
  memcpy(strides, a->strides, sizeof strides);
  a->ndim = b->ndim;
  a->numel = b->numel;
  a->is_contiguous = b->is_contiguous;
  memcpy(a->shape, b->shape, sizeof shape);
  memcpy(a->strides, b->strides, sizeof strides);
  b->ndim = ndim;
  b->numel = numel;
  b->is_contiguous = contiguous;
  memcpy(b->shape, shape, sizeof shape);
  memcpy(b->strides, strides, sizeof strides);
}

pd_status pd_ir_give_handle(pd_program *p, pd_variable *v, pd_variable *nv) {
  pd_tensor *user = v->tensor; /* the handle the caller holds moves to nv */
  if (pd_tensor_is_meta(user) && pd_tensor_is_meta(nv->tensor)) swap_meta_geometry(user, nv->tensor);
  v->tensor = nv->tensor;
  nv->tensor = user;
  if (!map_put(&p->map, user, nv) || !map_put(&p->map, v->tensor, v))
    return pd_set_error(PD_ERR_MEMORY, "Program: out of memory adding variable '%s'", nv->name);
  v->tensor->stop_gradient = v->stop_gradient; /* backward reads the flag from the handle */
  if (pd_tensor_is_meta(v->tensor)) pd_tensor_set_name(v->tensor, v->name);
  if (pd_tensor_is_meta(user)) pd_tensor_set_name(user, nv->name);
  return PD_OK;
}

pd_status pd_ir_alias_handle(pd_program *p, const pd_tensor *t, pd_variable *v) {
  if (!map_put(&p->map, t, v))
    return pd_set_error(PD_ERR_MEMORY, "Program: out of memory adding a handle of '%s'", v->name);
  return PD_OK;
}

pd_tensor *pd_static_block_var(pd_static_block *b, const char *name) {
  if (!b || !name) {
    pd_set_error(PD_ERR_INVALID, "Block.var: %s is NULL", b ? "name" : "block");
    return NULL;
  }
  pd_variable *v = pd_ir_find_var_recursive(b, name);
  if (v) return v->tensor;
  char have[512] = "";
  size_t k = 0;
  for (int i = 0; i < b->n_vars && k + 1 < sizeof have; i++) {
    int w = snprintf(have + k, sizeof have - k, "%s'%s'", i ? ", " : "", b->vars[i]->name);
    k += w > 0 ? (size_t)w : 0;
  }
  pd_set_error(PD_ERR_INVALID, "Block.var: block %d has no variable named '%s' (it has %s)", b->idx, name,
               b->n_vars ? have : "none");
  return NULL;
}

int pd_program_list_vars(const pd_program *p, pd_tensor **out, int cap) {
  if (!p) {
    pd_set_error(PD_ERR_INVALID, "list_vars: program is NULL");
    return PD_ERR_INVALID;
  }
  int n = 0;
  for (int i = 0; i < p->n_blocks; i++)
    for (int k = 0; k < p->blocks[i]->n_vars; k++, n++)
      if (out && n < cap) out[n] = p->blocks[i]->vars[k]->tensor;
  return n;
}

pd_status pd_program_var_info(const pd_program *p, const char *name, pd_static_var_info *info) {
  if (!p || !name || !info)
    return pd_set_error(PD_ERR_INVALID, "var_info: %s is NULL", !p ? "program" : !name ? "name" : "info");
  pd_variable *v = NULL;
  for (int i = 0; i < p->n_blocks && !v; i++) v = pd_ir_find_var(p->blocks[i], name);
  if (!v) return pd_set_error(PD_ERR_INVALID, "var_info: the program has no variable named '%s'", name);
  memset(info, 0, sizeof *info);
  info->name = v->name;
  info->dtype = v->dtype;
  info->ndim = v->ndim;
  memcpy(info->shape, v->shape, sizeof(int64_t) * (size_t)v->ndim);
  info->persistable = v->persistable;
  info->stop_gradient = v->stop_gradient;
  info->is_parameter = v->is_parameter;
  info->is_data = v->is_data;
  return PD_OK;
}

/* ---- operators ------------------------------------------------------------- */
static char **dup_names(const char *const *names, int n) {
  char **r = calloc((size_t)(n > 0 ? n : 1), sizeof *r);
  if (!r) return NULL;
  for (int i = 0; i < n; i++) {
    if (!(r[i] = dup_str(names[i]))) {
      for (int j = 0; j < i; j++) free(r[j]);
      free(r);
      return NULL;
    }
  }
  return r;
}

pd_operator *pd_ir_append_op(pd_static_block *b, const char *type, const char *const *inputs, int n_in,
                             const char *const *outputs, int n_out, const pd_attrs *attrs) {
  int id = pd_op_find(type);
  bool ctl_grad;
  pd_ctl_kind ctl = pd_static_control_kind(type, &ctl_grad);
  if (id < 0 && strcmp(type, PD_STATIC_ASSIGN_VALUE) != 0 && ctl == PD_CTL_NONE) {
    pd_set_error(PD_ERR_INVALID, "Program: no op named '%s' in the registry", type);
    return NULL;
  }
  pd_operator *op = calloc(1, sizeof *op);
  if (!op || !grow((void **)&b->ops, &b->cap_ops, b->n_ops, sizeof *b->ops)) {
    free(op);
    pd_set_error(PD_ERR_MEMORY, "Program: out of memory appending op %s", type);
    return NULL;
  }
  op->type = dup_str(type);
  op->inputs = dup_names(inputs, n_in);
  op->outputs = dup_names(outputs, n_out);
  op->n_in = op->inputs ? n_in : 0;
  op->n_out = op->outputs ? n_out : 0;
  if (!op->type || !op->inputs || !op->outputs) {
    free_op(op);
    pd_set_error(PD_ERR_MEMORY, "Program: out of memory appending op %s", type);
    return NULL;
  }
  op->op_id = id;
  op->grad_of = -1;
  op->ctl = ctl;
  op->ctl_grad = ctl_grad;
  if (attrs) op->attrs = *attrs;
  b->ops[b->n_ops++] = op;
  pd_ir_touch(b->program);
  return op;
}

pd_operator *pd_ir_append_fused_op(pd_static_block *b, const char *type, const char *const *inputs, int n_in,
                                   const char *const *outputs, int n_out, pd_fused_op *f) {
  /* appended as assign_value, then named as the fused op */
  pd_operator *op = pd_ir_append_op(b, PD_STATIC_ASSIGN_VALUE, inputs, n_in, outputs, n_out, NULL);
  char *t = op ? dup_str(type) : NULL;
  if (!t) {
    if (op) b->n_ops--, free_op(op);
    f->release(f);
    pd_set_error(PD_ERR_MEMORY, "Program: out of memory appending op %s", type);
    return NULL;
  }
  free(op->type);
  op->type = t;
  op->fused = f;
  return op;
}

pd_operator *pd_ir_append_grad_op(pd_static_block *b, pd_op_id fwd, int fwd_n_in, int fwd_n_out,
                                  const char *const *inputs, const char *const *outputs,
                                  const pd_attrs *attrs) {
  char type[96];
  snprintf(type, sizeof type, "%s_grad", pd_op_table[fwd]->name);
  /* appended as assign_value, then made the grad op (its name may also be
   * a registry row's, such as nll_loss_grad: grad_of decides) */
  pd_operator *op =
      pd_ir_append_op(b, PD_STATIC_ASSIGN_VALUE, inputs, fwd_n_in + 2 * fwd_n_out, outputs, fwd_n_in, attrs);
  if (!op) return NULL;
  char *t = dup_str(type);
  if (!t) {
    b->n_ops--;
    free_op(op);
    pd_set_error(PD_ERR_MEMORY, "Program: out of memory appending op %s", type);
    return NULL;
  }
  free(op->type);
  op->type = t;
  op->op_id = -1;
  op->grad_of = (int)fwd;
  op->fwd_n_in = fwd_n_in;
  op->fwd_n_out = fwd_n_out;
  op->role = PD_OP_ROLE_BACKWARD;
  return op;
}

pd_status pd_ir_add_lr_entry(pd_program *p, const char *var, double mult, pd_lr_scheduler *sched) {
  pd_lr_entry *e = realloc(p->lr, (size_t)(p->n_lr + 1) * sizeof *e);
  if (!e) return pd_set_error(PD_ERR_MEMORY, "Program: out of memory");
  p->lr = e;
  char *v = dup_str(var);
  if (!v) return pd_set_error(PD_ERR_MEMORY, "Program: out of memory");
  p->lr[p->n_lr++] = (pd_lr_entry){.var = v, .mult = mult, .sched = pd_lr_retain(sched)};
  pd_ir_touch(p);
  return PD_OK;
}

void pd_ir_remove_op(pd_static_block *b, int k) {
  if (k < 0 || k >= b->n_ops) return;
  free_op(b->ops[k]);
  memmove(b->ops + k, b->ops + k + 1, (size_t)(b->n_ops - k - 1) * sizeof *b->ops);
  b->n_ops--;
  pd_ir_touch(b->program);
}

void pd_ir_truncate_ops(pd_static_block *b, int n) {
  while (b->n_ops > n) free_op(b->ops[--b->n_ops]);
  pd_ir_touch(b->program);
}

pd_status pd_ir_set_slot(char **slot, const char *name) {
  char *s = dup_str(name);
  if (!s) return pd_set_error(PD_ERR_MEMORY, "Program: out of memory naming '%s'", name);
  free(*slot);
  *slot = s;
  return PD_OK;
}

pd_status pd_ir_rename_var(pd_static_block *b, const char *from, const char *to) {
  pd_variable *v = pd_ir_find_var(b, from);
  if (!v) return pd_set_error(PD_ERR_INVALID, "Program: rename of unknown variable '%s'", from);
  if (pd_ir_find_var(b, to))
    return pd_set_error(PD_ERR_INVALID, "Program: cannot rename '%s' to '%s': the name is taken", from, to);
  char *old = v->name, *nn = dup_str(to);
  if (!nn) return pd_set_error(PD_ERR_MEMORY, "Program: out of memory");
  pd_program *p = b->program;
  for (int i = 0; i < p->n_blocks; i++) {
    pd_static_block *bb = p->blocks[i];
    for (int k = 0; k < bb->n_ops; k++) {
      pd_operator *op = bb->ops[k];
      for (int s = 0; s < op->n_in + op->n_out; s++) {
        char **slot = s < op->n_in ? &op->inputs[s] : &op->outputs[s - op->n_in];
        if (strcmp(*slot, old) == 0 && pd_ir_set_slot(slot, to) != PD_OK) {
          free(nn);
          return pd_last_status();
        }
      }
    }
  }
  v->name = nn;
  free(old);
  if (v->tensor && pd_tensor_is_meta(v->tensor)) pd_tensor_set_name(v->tensor, to);
  pd_ir_touch(p);
  return PD_OK;
}

/* ---- clone ------------------------------------------------------------------ */
pd_variable *pd_ir_copy_var(pd_static_block *b, const pd_variable *sv, pd_tensor *handle) {
  pd_variable *v = pd_ir_add_var(b, sv->name, sv->dtype, sv->ndim, sv->shape, handle);
  if (!v) return NULL;
  v->persistable = sv->persistable;
  v->stop_gradient = sv->stop_gradient;
  v->is_parameter = sv->is_parameter;
  v->is_data = sv->is_data;
  v->is_array = sv->is_array;
  if (sv->dist_attr && sv->dist_attr_ops) {
    if (!(v->dist_attr = sv->dist_attr_ops->copy(sv->dist_attr))) return NULL; /* b frees v */
    v->dist_attr_ops = sv->dist_attr_ops;
  }
  return v;
}

pd_operator *pd_ir_copy_op(pd_static_block *b, const pd_operator *so) {
  pd_operator *op = so->grad_of >= 0
                        ? pd_ir_append_grad_op(b, (pd_op_id)so->grad_of, so->fwd_n_in, so->fwd_n_out,
                                               (const char *const *)so->inputs,
                                               (const char *const *)so->outputs, &so->attrs)
                        : pd_ir_append_op(b, so->type, (const char *const *)so->inputs, so->n_in,
                                          (const char *const *)so->outputs, so->n_out, &so->attrs);
  if (!op) return NULL;
  op->role = so->role;
  op->fwd_n_in = so->fwd_n_in; /* while_grad's too */
  op->fwd_n_out = so->fwd_n_out;
  memcpy(op->name_scope, so->name_scope, sizeof op->name_scope);
  memcpy(op->op_device, so->op_device, sizeof op->op_device);
  op->value = so->value ? pd_tensor_retain(so->value) : NULL;
  op->lowered_from = so->lowered_from;
  return op;
}

pd_program *pd_ir_clone(const pd_program *src, bool for_test) {
  pd_program *p = calloc(1, sizeof *p);
  if (!p) goto oom;
  p->is_test = for_test || src->is_test;
  for (int i = 0; i < src->n_blocks; i++) {
    const pd_static_block *sb = src->blocks[i];
    pd_static_block *b = new_block(p, sb->parent_idx);
    if (!b) goto oom;
    for (int k = 0; k < sb->n_vars; k++) /* the same handle: a Variable fetches from the clone too */
      if (!pd_ir_copy_var(b, sb->vars[k], sb->vars[k]->tensor)) goto fail;
    pd_test_dead dead = {0};
    for (int k = 0; k < sb->n_ops; k++) {
      int replaced = for_test ? pd_ir_copy_op_for_test(b, sb, k, &dead) : 0;
      if (replaced == 0 && !pd_ir_copy_op(b, sb->ops[k])) replaced = -1;
      if (replaced < 0) {
        pd_test_dead_free(&dead);
        goto fail;
      }
    }
    pd_test_dead_free(&dead);
  }
  for (int i = 0; i < src->n_lr; i++)
    if (pd_ir_add_lr_entry(p, src->lr[i].var, src->lr[i].mult, src->lr[i].sched) != PD_OK) goto fail;
  p->version = 1;
  return p;
oom:
  pd_set_error(PD_ERR_MEMORY, "clone: out of memory");
fail:
  pd_program_release(p);
  return NULL;
}

pd_program *pd_program_clone(const pd_program *p, bool for_test) {
  if (!p) {
    pd_set_error(PD_ERR_INVALID, "clone: program is NULL");
    return NULL;
  }
  return pd_ir_clone(p, for_test);
}
