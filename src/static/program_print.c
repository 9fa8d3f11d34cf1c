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
#include "../ops/op_attrs.h"
#include "static_internal.h"

static void slot_name(int i, char *out, size_t cap) {
  static const char *const first[] = {"X", "Y", "Z"};
  if (i < 3)
    snprintf(out, cap, "%s", first[i]);
  else
    snprintf(out, cap, "X%d", i);
}

/* One "name = value" per attribute the row names (op_attrs.h). */
static void print_attrs(pd_strbuf *b, const pd_operator *op) {
  int id = op->op_id >= 0 ? op->op_id : op->grad_of;
  if (id < 0) { /* control flow and arrays: their sub-blocks, as Paddle prints sub_block */
    const pd_attrs *a = &op->attrs;
    if (strncmp(op->type, PD_STATIC_WHILE, strlen(PD_STATIC_WHILE)) == 0)
      pd_sb_printf(b, ", sub_block = block[%lld]", (long long)a->i[0]);
    else if (strncmp(op->type, PD_STATIC_COND, strlen(PD_STATIC_COND)) == 0)
      pd_sb_printf(b, ", true_block = block[%lld], false_block = block[%lld]", (long long)a->i[0],
                   (long long)a->i[1]);
    else if (strncmp(op->type, PD_STATIC_ARRAY_TO_TENSOR, strlen(PD_STATIC_ARRAY_TO_TENSOR)) == 0)
      pd_sb_printf(b, ", axis = %lld, use_stack = %lld", (long long)a->i[0], (long long)a->i[1]);
    return;
  }
  pd_attr v[PD_MAX_ATTRS];
  int n = pd_op_attrs_list(pd_op_table[id], &op->attrs, v, PD_MAX_ATTRS);
  if (n < 0) pd_clear_error(); /* printing shows what it can; test_op_attrs checks every row */
  for (int k = 0; k < n; k++) {
    pd_sb_printf(b, ", %s = ", v[k].name);
    switch (v[k].kind) {
      case PD_AK_INT:
        pd_sb_printf(b, "%lld", (long long)v[k].i);
        break;
      case PD_AK_FLOAT:
        pd_sb_printf(b, "%.17g", v[k].f);
        break;
      case PD_AK_INTS:
        pd_sb_shape(b, v[k].n, v[k].v);
        break;
      case PD_AK_STRING:
        pd_sb_printf(b, "'%s'", v[k].s);
        break;
      case PD_AK_DTYPE:
        pd_sb_puts(b, pd_dtype_name(v[k].dtype));
        break;
    }
  }
}

static void print_var(pd_strbuf *b, const pd_variable *v) {
  pd_sb_puts(b, "    ");
  if (v->persistable) pd_sb_puts(b, "persist ");
  pd_sb_puts(b, !v->is_parameter ? "var " : v->stop_gradient ? "param " : "trainable param ");
  pd_sb_printf(b, "%s : %s.shape(", v->name, v->is_array ? "LOD_TENSOR_ARRAY" : "LOD_TENSOR");
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
  if (op->op_device[0]) pd_sb_printf(b, ", op_device = '%s'", op->op_device);
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
