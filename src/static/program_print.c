/* print(program): Paddle's text form of a Program, e.g.
 *
 *   { // block 0
 *       var x : LOD_TENSOR.shape(-1, 13).dtype(float32).stop_gradient(True)
 *       persist trainable param fc_0.w_0 : LOD_TENSOR.shape(13, 1).dtype(float32).stop_gradient(False)
 *       {Out=['fc_0.tmp_0']} = matmul(inputs={X=['x'], Y=['fc_0.w_0']}, transpose_x = 0, transpose_y = 0)
 *   }
 *
 * Registry rows take their inputs by position: the slots print as X, Y, Z,
 * then X3, X4, ... and attributes by the names the row gives them. */
#include <stdlib.h>
#include <string.h>

#include "../core/strbuf.h"
#include "static_internal.h"

static void slot_name(int i, char *out, size_t cap) {
  static const char *const first[] = {"X", "Y", "Z"};
  if (i < 3)
    snprintf(out, cap, "%s", first[i]);
  else
    snprintf(out, cap, "X%d", i);
}

/* One "name = value" per entry of the row's attr_names
 * ("i0:axis,f0:alpha,v0:shape,s:equation,dtype"). */
static void print_attrs(pd_strbuf *b, const pd_operator *op) {
  int id = op->op_id >= 0 ? op->op_id : op->grad_of;
  const char *names = id >= 0 ? pd_op_table[id]->attr_names : NULL;
  if (!names) return;
  const pd_attrs *a = &op->attrs;
  const char *p = names;
  while (*p) {
    const char *end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    char item[96];
    if (len >= sizeof item) len = sizeof item - 1;
    memcpy(item, p, len);
    item[len] = 0;
    p += len + (end ? 1 : 0);
    while (*p == ' ') p++;
    char *colon = strchr(item, ':');
    const char *key = colon ? colon + 1 : item;
    char kind = item[0];
    int idx = colon && colon > item + 1 ? atoi(item + 1) : 0;
    if (!colon && strcmp(item, "dtype") == 0) {
      pd_sb_printf(b, ", dtype = %s", pd_dtype_name(a->dtype));
    } else if (kind == 'i' && idx < PD_ATTR_INTS) {
      pd_sb_printf(b, ", %s = %lld", key, (long long)a->i[idx]);
    } else if (kind == 'f' && idx < PD_ATTR_FLOATS) {
      pd_sb_printf(b, ", %s = %.17g", key, a->f[idx]);
    } else if (kind == 'v' && idx < PD_ATTR_LISTS) {
      pd_sb_printf(b, ", %s = ", key);
      pd_sb_shape(b, a->nv[idx] > 0 && a->nv[idx] <= PD_MAX_DIMS ? a->nv[idx] : 0, a->v[idx]);
    } else if (kind == 's') {
      pd_sb_printf(b, ", %s = '%.*s'", key, (int)sizeof a->s, a->s);
    }
  }
}

static void print_var(pd_strbuf *b, const pd_variable *v) {
  pd_sb_puts(b, "    ");
  if (v->persistable) pd_sb_puts(b, "persist ");
  pd_sb_puts(b, !v->is_parameter ? "var " : v->stop_gradient ? "param " : "trainable param ");
  pd_sb_printf(b, "%s : LOD_TENSOR.shape(", v->name);
  for (int d = 0; d < v->ndim; d++) pd_sb_printf(b, "%s%lld", d ? ", " : "", (long long)v->shape[d]);
  pd_sb_printf(b, ").dtype(%s).stop_gradient(%s)\n", pd_dtype_name(v->dtype),
               v->stop_gradient ? "True" : "False");
}

/* A grad op's input slot i: the forward inputs, Out, Out@GRAD. */
static void grad_slot_name(const pd_operator *op, int i, char *out, size_t cap) {
  if (i < op->fwd_n_in) {
    slot_name(i, out, cap);
    return;
  }
  i -= op->fwd_n_in;
  const char *suffix = i < op->fwd_n_out ? "" : "@GRAD";
  i %= op->fwd_n_out > 0 ? op->fwd_n_out : 1;
  if (op->fwd_n_out == 1)
    snprintf(out, cap, "Out%s", suffix);
  else
    snprintf(out, cap, "Out%d%s", i, suffix);
}

static void print_op(pd_strbuf *b, const pd_operator *op) {
  char s[24];
  if (op->grad_of >= 0) {
    pd_sb_puts(b, "    {");
    for (int i = 0; i < op->n_out; i++) {
      slot_name(i, s, sizeof s);
      pd_sb_printf(b, "%s%s@GRAD=['%s']", i ? ", " : "", s, op->outputs[i]);
    }
    pd_sb_puts(b, "}");
  } else {
    pd_sb_puts(b, "    {Out=[");
    for (int i = 0; i < op->n_out; i++) pd_sb_printf(b, "%s'%s'", i ? ", " : "", op->outputs[i]);
    pd_sb_puts(b, "]}");
  }
  pd_sb_printf(b, " = %s(inputs={", op->type);
  for (int i = 0; i < op->n_in; i++) {
    if (op->grad_of >= 0)
      grad_slot_name(op, i, s, sizeof s);
    else
      slot_name(i, s, sizeof s);
    pd_sb_printf(b, "%s%s=['%s']", i ? ", " : "", s, op->inputs[i]);
  }
  pd_sb_puts(b, "}");
  if (op->value) {
    const pd_tensor *t = op->value;
    pd_sb_puts(b, ", shape = ");
    pd_sb_shape(b, t->ndim, t->shape);
    pd_sb_printf(b, ", dtype = %s", pd_dtype_name(t->dtype));
  }
  print_attrs(b, op);
  if (op->name_scope[0]) pd_sb_printf(b, ", op_namescope = '%s'", op->name_scope);
  if (op->role & PD_OP_ROLE_BACKWARD)
    pd_sb_puts(b, ", op_role = backward");
  else if (op->role & PD_OP_ROLE_OPTIMIZE)
    pd_sb_puts(b, ", op_role = optimize");
  pd_sb_puts(b, ")\n");
}

char *pd_program_to_string(const pd_program *p) {
  if (!p) {
    pd_set_error(PD_ERR_INVALID, "to_string: program is NULL");
    return NULL;
  }
  pd_strbuf b = {0};
  for (int i = 0; i < p->n_blocks; i++) {
    const pd_static_block *blk = p->blocks[i];
    pd_sb_printf(&b, "{ // block %d\n", blk->idx);
    for (int k = 0; k < blk->n_vars; k++) print_var(&b, blk->vars[k]);
    if (blk->n_vars && blk->n_ops) pd_sb_puts(&b, "\n");
    for (int k = 0; k < blk->n_ops; k++) print_op(&b, blk->ops[k]);
    pd_sb_puts(&b, "}\n");
  }
  if (b.failed || !b.s) {
    free(b.s);
    pd_set_error(PD_ERR_MEMORY, "to_string: out of memory");
    return NULL;
  }
  return b.s;
}
