/* Running the control-flow ops: while and conditional_block run their
 * sub-blocks on the values the executor hands them; their grad ops
 * differentiate them on the eager tape (control_grad.c). Only the branch
 * taken runs. The tensor array ops run in tensor_array.c.
 *
 * A sub-block sees its own Variables and the values the op captured: the
 * op's inputs from index cap0 on, by name. */
#include <stdlib.h>
#include <string.h>

#include "../core/tensor_impl.h"
#include "control_grad.h"
#include "control_internal.h"
#include "control_plan.h"
#include "paddlec/creation.h"
#include "paddlec/manipulation.h"

/* The types by kind (pd_ctl_kind). */
static const char *const control_types[] = {NULL,
                                            PD_STATIC_WHILE,
                                            PD_STATIC_COND,
                                            PD_STATIC_CREATE_ARRAY,
                                            PD_STATIC_WRITE_ARRAY,
                                            PD_STATIC_READ_ARRAY,
                                            PD_STATIC_ARRAY_LENGTH,
                                            PD_STATIC_ARRAY_TO_TENSOR,
                                            PD_STATIC_ASSIGN_ARRAY,
                                            PD_STATIC_ARRAY_ADD};
_Static_assert(sizeof control_types / sizeof *control_types == PD_CTL_ARRAY_ADD + 1, "a type per kind");

pd_ctl_kind pd_static_control_kind(const char *type, bool *grad) {
  size_t n = type ? strlen(type) : 0;
  *grad = n > 5 && strcmp(type + n - 5, "_grad") == 0;
  size_t base = *grad ? n - 5 : n;
  for (int k = PD_CTL_WHILE; k <= PD_CTL_ARRAY_ADD; k++)
    if (strlen(control_types[k]) == base && strncmp(type, control_types[k], base) == 0) return (pd_ctl_kind)k;
  *grad = false;
  return PD_CTL_NONE;
}

const char *pd_static_control_type(pd_ctl_kind k) { return control_types[k]; }

bool pd_ctl_may_keep_input(const pd_operator *op, int i) {
  return !(i == 0 && op->ctl == PD_CTL_COND && !op->ctl_grad); /* a cond's pred is only read */
}

bool pd_static_is_control_type(const char *type) {
  bool grad;
  return pd_static_control_kind(type, &grad) != PD_CTL_NONE;
}

/* ---- running a sub-block ------------------------------------------------------- */
typedef struct block_run {
  const pd_program *p;
  const pd_operator *op; /* the control op */
  const pd_static_block *sub;
  pd_tensor **env;        /* per sub-block variable: its value */
  pd_tensor *const *caps; /* values of op->inputs[cap0 ..] */
  int cap0, n_caps;
} block_run;

static pd_tensor *value_of(const block_run *r, const char *name) {
  int s = pd_ir_var_index(r->sub, name);
  if (s >= 0) {
    if (!r->env[s])
      pd_set_error(PD_ERR_STATE, "%s: '%s' is read before any op of block %d writes it", r->op->type, name,
                   r->sub->idx);
    return r->env[s];
  }
  for (int j = 0; j < r->n_caps; j++)
    if (strcmp(r->op->inputs[r->cap0 + j], name) == 0) return r->caps[j];
  pd_set_error(PD_ERR_STATE, "%s: '%s' is neither a Variable of block %d nor captured", r->op->type, name,
               r->sub->idx);
  return NULL;
}

static pd_status set_value(block_run *r, const char *name, pd_tensor *t) {
  int s = pd_ir_var_index(r->sub, name);
  if (s < 0) {
    pd_tensor_release(t);
    return pd_set_error(PD_ERR_STATE, "%s: an op writes '%s', which block %d lacks", r->op->type, name,
                        r->sub->idx);
  }
  pd_tensor_release(r->env[s]);
  r->env[s] = t;
  return PD_OK;
}

static void clear_env(block_run *r) {
  for (int i = 0; i < r->sub->n_vars; i++) {
    pd_tensor_release(r->env[i]);
    r->env[i] = NULL;
  }
}

/* Runs op of block block_idx (control op ctl's) on in: new references in
 * out[0..*n). A nested control or array op runs through c (NULL: as it
 * is). */
pd_status pd_ctl_run_block_op(const pd_program *p, pd_ctl_cache *c, const pd_operator *ctl, int block_idx,
                              const pd_operator *op, pd_tensor *const *in, pd_tensor **out, int *n) {
  pd_status st;
  *n = 0;
  if (op->grad_of >= 0 || op->fused) {
    st = pd_set_error(PD_ERR_INVALID, "%s: grad op %s inside block %d", ctl->type, op->type, block_idx);
  } else if (op->op_id < 0 && op->value) {
    st = (out[0] = pd_assign(op->value)) ? PD_OK : pd_last_status();
    *n = 1;
  } else if (op->op_id < 0) { /* nested control flow, tensor array ops */
    bool want[PD_MAX_OUTPUTS];
    for (int j = 0; j < op->n_out; j++) want[j] = true;
    st = c ? pd_ctl_run(c, op, in, want, out) : pd_static_run_control(p, op, in, want, out);
    *n = op->n_out;
  } else {
    st = pd_dispatch((pd_op_id)op->op_id, in, op->n_in, &op->attrs, out, n);
    if (st == PD_OK && *n != op->n_out)
      st = pd_set_error(PD_ERR_STATE, "%s: op %s produced %d outputs, the program records %d", ctl->type,
                        op->type, *n, op->n_out);
  }
  return st;
}

/* Runs ops [from, to) of the sub-block. */
static pd_status run_ops(block_run *r, int from, int to) {
  for (int k = from; k < to; k++) {
    const pd_operator *op = r->sub->ops[k];
    if (op->n_in > 3 * PD_MAX_OUTPUTS || op->n_out > PD_MAX_OUTPUTS)
      return pd_set_error(PD_ERR_INVALID, "%s: op %s has %d inputs", r->op->type, op->type, op->n_in);
    pd_tensor *in[3 * PD_MAX_OUTPUTS], *out[PD_MAX_OUTPUTS] = {0};
    for (int i = 0; i < op->n_in; i++)
      if (!(in[i] = value_of(r, op->inputs[i]))) return pd_last_status();
    int n = 0;
    pd_status st = pd_ctl_run_block_op(r->p, NULL, r->op, r->sub->idx, op, in, out, &n);
    for (int j = 0; j < n; j++) {
      if (st != PD_OK) {
        pd_tensor_release(out[j]);
        continue;
      }
      st = set_value(r, op->outputs[j], out[j]);
    }
    if (st != PD_OK) {
      if (op->op_id < 0 && !op->value) /* a control or array op's message names it already */
        pd_error_prefix("%s", r->op->type);
      else
        pd_error_prefix("%s: %s", r->op->type, op->type);
      return st;
    }
  }
  return PD_OK;
}

/* The sub-block attribute at attrs.i[which], checked: a later block whose
 * parent holds the op (a Program file may say anything). */
pd_status pd_ctl_sub_block(const pd_program *p, const pd_operator *op, int which,
                           const pd_static_block **sub) {
  int64_t bi = op->attrs.i[which];
  if (bi <= 0 || bi >= p->n_blocks)
    return pd_set_error(PD_ERR_INVALID, "%s: sub-block %lld is no block of the program", op->type,
                        (long long)bi);
  *sub = p->blocks[bi];
  return PD_OK;
}

/* ---- while ----------------------------------------------------------------------- */
pd_status pd_ctl_loop_layout(const pd_program *p, const pd_operator *op, pd_ctl_loop *l) {
  l->n = (int)op->attrs.i[1];
  l->n_cond = (int)op->attrs.i[2];
  pd_status st = pd_ctl_sub_block(p, op, 0, &l->sub);
  if (st != PD_OK) return st;
  const pd_static_block *sub = l->sub;
  if (l->n < 1 || l->n > op->n_in || l->n > PD_MAX_OUTPUTS || l->n_cond < 0 || l->n_cond > sub->n_ops)
    return pd_set_error(PD_ERR_INVALID, "while: %d loop variables, %d cond ops in block %d: not a loop", l->n,
                        l->n_cond, sub->idx);
  const char *key = op->attrs.s;
  char name[160];
  snprintf(name, sizeof name, "%s.cond", key);
  l->cond_idx = pd_ir_var_index(sub, name);
  if (l->cond_idx < 0) return pd_set_error(PD_ERR_INVALID, "while: block %d lacks '%s'", sub->idx, name);
  for (int i = 0; i < l->n; i++) {
    snprintf(name, sizeof name, "%s.in_%d", key, i);
    l->in_idx[i] = pd_ir_var_index(sub, name);
    snprintf(name, sizeof name, "%s.next_%d", key, i);
    l->next_idx[i] = pd_ir_var_index(sub, name);
    if (l->in_idx[i] < 0 || l->next_idx[i] < 0)
      return pd_set_error(PD_ERR_INVALID, "while: block %d lacks loop variable %d ('%s')", sub->idx, i, name);
  }
  return PD_OK;
}

/* Runs the loop from init, writing the final values (new references). */
static pd_status run_loop(const pd_program *p, const pd_operator *op, pd_tensor *const *init,
                          pd_tensor **final) {
  pd_ctl_loop l;
  pd_status st = pd_ctl_loop_layout(p, op, &l);
  if (st != PD_OK) return st;
  const pd_static_block *sub = l.sub;
  int n = l.n;
  block_run r = {.p = p, .op = op, .sub = sub, .caps = init + n, .cap0 = n, .n_caps = op->n_in - n};
  if (!(r.env = calloc((size_t)sub->n_vars + 1, sizeof *r.env)))
    return pd_set_error(PD_ERR_MEMORY, "while: out of memory");
  for (int i = 0; i < n; i++) r.env[l.in_idx[i]] = pd_tensor_retain(init[i]);
  for (;;) {
    if ((st = run_ops(&r, 0, l.n_cond)) != PD_OK) break;
    pd_tensor *c = r.env[l.cond_idx];
    if ((st = pd_ctl_check_bool_scalar(c, "while", "the loop condition")) != PD_OK) break;
    if (pd_tensor_item(c) == 0.0) break;
    if ((st = run_ops(&r, l.n_cond, sub->n_ops)) != PD_OK) break;
    pd_tensor *next[PD_MAX_OUTPUTS];
    for (int i = 0; i < n; i++) next[i] = pd_tensor_retain(r.env[l.next_idx[i]]);
    clear_env(&r);
    for (int i = 0; i < n; i++) r.env[l.in_idx[i]] = next[i];
  }
  for (int i = 0; i < n; i++) final[i] = st == PD_OK ? pd_tensor_retain(r.env[l.in_idx[i]]) : NULL;
  clear_env(&r);
  free(r.env);
  return st;
}

/* ---- conditional_block ------------------------------------------------------------ */
pd_status pd_ctl_branch_taken(const pd_operator *op, pd_tensor *const *in, bool *taken) {
  int n = (int)op->attrs.i[2];
  if (op->n_in < 1 || n != op->n_out || n < 1 || n > PD_MAX_OUTPUTS)
    return pd_set_error(PD_ERR_INVALID, "conditional_block: %d inputs and %d outputs for %d results",
                        op->n_in, op->n_out, n);
  pd_status st = pd_ctl_check_bool_scalar(in[0], "conditional_block", "pred");
  if (st == PD_OK) *taken = pd_tensor_item(in[0]) != 0.0;
  return st;
}

/* Runs the branch pred (in[0]) picks, writing its n outputs "<key>.true_i"
 * or "<key>.false_i" (new references) to res. */
static pd_status run_branch(const pd_program *p, const pd_operator *op, pd_tensor *const *in,
                            pd_tensor **res) {
  int n = (int)op->attrs.i[2];
  bool taken = false;
  pd_status st = pd_ctl_branch_taken(op, in, &taken);
  if (st != PD_OK) return st;
  const pd_static_block *sub = NULL;
  if ((st = pd_ctl_sub_block(p, op, taken ? 0 : 1, &sub)) != PD_OK) return st;
  block_run r = {.p = p, .op = op, .sub = sub, .caps = in + 1, .cap0 = 1, .n_caps = op->n_in - 1};
  if (!(r.env = calloc((size_t)sub->n_vars + 1, sizeof *r.env)))
    return pd_set_error(PD_ERR_MEMORY, "conditional_block: out of memory");
  st = run_ops(&r, 0, sub->n_ops);
  for (int i = 0; i < n; i++) res[i] = NULL;
  for (int i = 0; i < n && st == PD_OK; i++) {
    char name[160];
    snprintf(name, sizeof name, "%s.%s_%d", op->attrs.s, taken ? "true" : "false", i);
    int s = pd_ir_var_index(sub, name);
    if (s < 0 || !r.env[s])
      st = pd_set_error(PD_ERR_INVALID, "conditional_block: block %d %s '%s'", sub->idx,
                        s < 0 ? "lacks" : "never writes", name);
    else
      res[i] = pd_tensor_retain(r.env[s]);
  }
  if (st != PD_OK)
    for (int i = 0; i < n; i++) {
      pd_tensor_release(res[i]);
      res[i] = NULL;
    }
  clear_env(&r);
  free(r.env);
  return st;
}

static pd_status array_forward(const pd_operator *op, pd_tensor *const *in, pd_tensor **res) {
  if (op->n_out > 2) return pd_set_error(PD_ERR_INVALID, "%s: %d outputs", op->type, op->n_out);
  return pd_static_run_array_op(op, in, res);
}

/* ---- the entry points -------------------------------------------------------------- */
pd_status pd_ctl_forward(const pd_program *p, pd_ctl_cache *c, const pd_operator *op, pd_tensor *const *in,
                         pd_tensor **res) {
  if (op->ctl == PD_CTL_NONE || op->ctl_grad)
    return pd_set_error(PD_ERR_INVALID, "Executor: '%s' is no forward control-flow op", op->type);
  bool loop = op->ctl == PD_CTL_WHILE, branch = op->ctl == PD_CTL_COND;
  if (!loop && !branch) return array_forward(op, in, res);
  if (op->n_out < 1 || op->n_out > PD_MAX_OUTPUTS || op->n_in < 1 ||
      (loop && (op->n_in < op->n_out || op->attrs.i[1] != op->n_out)))
    return pd_set_error(PD_ERR_INVALID, "%s: %d inputs, %d outputs", op->type, op->n_in, op->n_out);
  for (int i = 0; i < op->n_in; i++)
    if (!in[i]) return pd_set_error(PD_ERR_INVALID, "%s: input '%s' has no value", op->type, op->inputs[i]);
  return loop ? (c ? pd_ctl_plan_loop(c, op, in, res) : run_loop(p, op, in, res))
              : (c ? pd_ctl_plan_branch(c, op, in, res) : run_branch(p, op, in, res));
}

/* c: the lowered plan's cache of sub-plans, NULL when interpreted. */
static pd_status run_control(const pd_program *p, pd_ctl_cache *c, const pd_operator *op,
                             pd_tensor *const *in, const bool *want, pd_tensor **out) {
  if (op->ctl == PD_CTL_NONE)
    return pd_set_error(PD_ERR_INVALID, "Executor: '%s' is no control-flow op", op->type);
  if (op->ctl_grad) return pd_ctl_grad(p, c, op, in, want, out);
  pd_tensor *res[PD_MAX_OUTPUTS] = {0};
  pd_status st = pd_ctl_forward(p, c, op, in, res);
  for (int k = 0; k < op->n_out && k < PD_MAX_OUTPUTS; k++) {
    if (st == PD_OK && want[k])
      out[k] = res[k];
    else
      pd_tensor_release(res[k]);
  }
  return st;
}

pd_status pd_static_run_control(const pd_program *p, const pd_operator *op, pd_tensor *const *in,
                                const bool *want, pd_tensor **out) {
  return run_control(p, NULL, op, in, want, out);
}

pd_status pd_ctl_run(pd_ctl_cache *c, const pd_operator *op, pd_tensor *const *in, const bool *want,
                     pd_tensor **out) {
  return run_control(pd_ctl_cache_program(c), c, op, in, want, out);
}
