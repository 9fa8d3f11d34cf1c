/* fluid.layers.While: a block guard whose ops write Variables of the
 * enclosing blocks in place (assign(x, output), array_write, the cond
 * Variable), as Paddle's While block does, turned at its end into the
 * same while op as while_loop's.
 *
 * While the block is open, a write to an outer Variable X is recorded
 * with X as its output. At the end every outer Variable the block writes
 * becomes a loop variable: its reads in the block are renamed to the
 * value current at that point (the placeholder "<key>.in_<j>" before the
 * first write, then each write's own Variable), the last value is assigned
 * to "<key>.next_<j>", a head op assigns the condition to "<key>.cond", and
 * the while op takes the Variables' values before the loop and writes new
 * versions of them (pd_ir_new_version), so the handles the caller holds
 * read the final values afterwards. */
#include <stdlib.h>
#include <string.h>

#include "../core/tensor_impl.h"
#include "../ops/meta_util.h"
#include "control_internal.h"
#include "paddlec/static_control.h"

#define MAX_OPEN_WHILE 32

typedef struct while_frame {
  pd_program *p;
  int parent, sub;
  char key[64];
  char cond[160]; /* the condition Variable's name */
} while_frame;

static _Thread_local while_frame t_open[MAX_OPEN_WHILE];
static _Thread_local int t_n_open;

bool pd_ctl_in_while_block(const pd_program *p, int idx) {
  return t_n_open > 0 && t_open[t_n_open - 1].p == p && t_open[t_n_open - 1].sub == idx;
}

pd_status pd_static_while_begin(pd_tensor *cond) {
  pd_program *p = pd_ctl_recording_program("While");
  if (!p) return pd_last_status();
  if (t_n_open >= MAX_OPEN_WHILE)
    return pd_set_error(PD_ERR_STATE, "While: nested more than %d deep", MAX_OPEN_WHILE);
  pd_status st = pd_ctl_check_bool_scalar(cond, "While", "cond");
  pd_variable *cv = st == PD_OK ? pd_static_var_for(p, cond) : NULL;
  if (!cv) return pd_last_status();
  while_frame *f = &t_open[t_n_open];
  pd_static_block *sub = pd_ir_add_block(p, p->current_block);
  if (!sub) return pd_last_status();
  f->p = p;
  f->parent = p->current_block;
  f->sub = sub->idx;
  pd_static_unique_name(PD_STATIC_WHILE, f->key, sizeof f->key);
  snprintf(f->cond, sizeof f->cond, "%s", cv->name);
  t_n_open++;
  p->current_block = sub->idx;
  return PD_OK;
}

pd_status pd_static_assign_to(pd_tensor *x, pd_tensor *output) {
  const char *fn = "assign";
  pd_program *p = pd_ctl_recording_program(fn);
  if (!p) return pd_last_status();
  if (!x || !output) return pd_set_error(PD_ERR_INVALID, "%s: %s is NULL", fn, x ? "output" : "x");
  pd_variable *xv = pd_static_var_for(p, x), *ov = xv ? pd_static_var_for(p, output) : NULL;
  if (!ov) return pd_last_status();
  if (xv->is_array != ov->is_array || xv->dtype != ov->dtype)
    return pd_set_error(PD_ERR_INVALID, "%s: x ('%s') is %s %s, output ('%s') %s %s", fn, xv->name,
                        xv->is_array ? "an array of" : "a tensor of", pd_dtype_name(xv->dtype), ov->name,
                        ov->is_array ? "an array of" : "a tensor of", pd_dtype_name(ov->dtype));
  bool fits = xv->is_array || (xv->ndim == ov->ndim && pd_shapes_agree(xv->ndim, xv->shape, ov->shape));
  if (!fits) {
    char a[160], b[160];
    return pd_set_error(PD_ERR_SHAPE, "%s: x ('%s') has shape %s, output ('%s') %s", fn, xv->name,
                        pd_shape_str(xv->ndim, xv->shape, a, sizeof a), ov->name,
                        pd_shape_str(ov->ndim, ov->shape, b, sizeof b));
  }
  const char *in_name = xv->name; /* before a version of output may move handles */
  bool stop = xv->stop_gradient;
  const char *to = pd_ctl_write_target(p, ov, fn);
  if (!to) return pd_last_status();
  pd_static_block *b = p->blocks[p->current_block];
  pd_variable *tv = pd_ir_find_var_recursive(b, to);
  if (tv && tv != ov) tv->stop_gradient = stop; /* a new version: x's flag */
  const char *ins[1] = {in_name}, *outs[1] = {to};
  return pd_ir_append_op(b, xv->is_array ? PD_STATIC_ASSIGN_ARRAY : "assign", ins, 1, outs, 1, NULL)
             ? PD_OK
             : pd_last_status();
}

/* ---- the end: loop variables from the writes ----------------------------------- */
static bool descends_from(const pd_program *p, int b, int ancestor) {
  while (b > ancestor) b = p->blocks[b]->parent_idx;
  return b == ancestor;
}

/* Renames the inputs named from to `to` in block root and the blocks
 * nested in it (nested control flow reads outer values by name). */
static pd_status rename_in_tree(pd_program *p, int root, const char *from, const char *to) {
  for (int b = root; b < p->n_blocks; b++) {
    if (!descends_from(p, b, root)) continue;
    pd_static_block *blk = p->blocks[b];
    for (int k = 0; k < blk->n_ops; k++)
      for (int i = 0; i < blk->ops[k]->n_in; i++)
        if (strcmp(blk->ops[k]->inputs[i], from) == 0 && pd_ir_set_slot(&blk->ops[k]->inputs[i], to) != PD_OK)
          return pd_last_status();
  }
  return PD_OK;
}

static int find_name(char (*names)[160], int n, const char *s) {
  for (int i = 0; i < n; i++)
    if (strcmp(names[i], s) == 0) return i;
  return -1;
}

/* Appends assign(from) -> a new Variable `to` of sub shaped like v. */
static pd_status assign_into(pd_static_block *sub, const pd_variable *v, const char *from, const char *to) {
  pd_variable *nv = pd_ir_add_var(sub, to, v->dtype, v->ndim, v->shape, NULL);
  if (!nv) return pd_last_status();
  nv->is_array = v->is_array;
  nv->stop_gradient = v->stop_gradient;
  const char *ins[1] = {from}, *outs[1] = {to};
  return pd_ir_append_op(sub, v->is_array ? PD_STATIC_ASSIGN_ARRAY : "assign", ins, 1, outs, 1, NULL)
             ? PD_OK
             : pd_last_status();
}

static pd_status close_loop(pd_program *p, const while_frame *f) {
  pd_static_block *sub = p->blocks[f->sub], *pb = p->blocks[f->parent];
  char w[PD_MAX_OUTPUTS][160]; /* the outer Variables written, in order */
  char cur[PD_MAX_OUTPUTS][160];
  pd_variable *wv[PD_MAX_OUTPUTS];
  int n = 0;
  pd_status st = PD_OK;
  for (int k = 0; k < sub->n_ops && st == PD_OK; k++)
    for (int j = 0; j < sub->ops[k]->n_out && st == PD_OK; j++) {
      const char *o = sub->ops[k]->outputs[j];
      if (pd_ir_find_var(sub, o) || find_name(w, n, o) >= 0) continue;
      if (n >= PD_MAX_OUTPUTS / 2)
        return pd_set_error(PD_ERR_INVALID, "While: the block writes more than %d outer Variables",
                            PD_MAX_OUTPUTS / 2);
      if (!(wv[n] = pd_ir_find_var_recursive(pb, o)))
        return pd_set_error(PD_ERR_STATE, "While: the block writes '%s', which no block holds", o);
      snprintf(w[n++], sizeof w[0], "%s", o);
    }
  int c = find_name(w, n, f->cond);
  if (c < 0)
    return pd_set_error(PD_ERR_INVALID,
                        "While: the block never writes its condition '%s', so the loop would not end (assign "
                        "the new condition to it, e.g. pd_static_assign_to(pd_less_than(i, n), cond))",
                        f->cond);
  bool stop = true;
  for (int j = 0; j < n && st == PD_OK; j++) {
    snprintf(cur[j], sizeof cur[j], "%s.in_%d", f->key, j);
    pd_variable *ph = pd_ir_add_var(sub, cur[j], wv[j]->dtype, wv[j]->ndim, wv[j]->shape, NULL);
    if (!ph) return pd_last_status();
    ph->is_array = wv[j]->is_array;
    ph->stop_gradient = wv[j]->stop_gradient;
    stop &= wv[j]->stop_gradient;
  }
  /* reads see the value current at that point; each write a Variable of its own */
  int n_ops = sub->n_ops, writes = 0;
  for (int k = 0; k < n_ops && st == PD_OK; k++) {
    pd_operator *op = sub->ops[k];
    for (int i = 0; i < op->n_in && st == PD_OK; i++) {
      int j = find_name(w, n, op->inputs[i]);
      if (j >= 0) st = pd_ir_set_slot(&op->inputs[i], cur[j]);
    }
    int n_sub = op->ctl_grad ? 0 : op->ctl == PD_CTL_COND ? 2 : op->ctl == PD_CTL_WHILE ? 1 : 0;
    for (int s = 0; s < n_sub && st == PD_OK; s++) {
      int64_t nb = op->attrs.i[s];
      for (int j = 0; j < n && st == PD_OK && nb > f->sub && nb < p->n_blocks; j++)
        st = rename_in_tree(p, (int)nb, w[j], cur[j]);
    }
    for (int o = 0; o < op->n_out && st == PD_OK; o++) {
      int j = find_name(w, n, op->outputs[o]);
      if (j < 0) continue;
      char name[160];
      snprintf(name, sizeof name, "%s.w%d_%d", f->key, j, writes++);
      pd_variable *nv = pd_ir_add_var(sub, name, wv[j]->dtype, wv[j]->ndim, wv[j]->shape, NULL);
      if (!nv) return pd_last_status();
      nv->is_array = wv[j]->is_array;
      nv->stop_gradient = wv[j]->stop_gradient;
      st = pd_ir_set_slot(&op->outputs[o], name);
      snprintf(cur[j], sizeof cur[j], "%s", name);
    }
  }
  char name[160];
  for (int j = 0; j < n && st == PD_OK; j++) {
    snprintf(name, sizeof name, "%s.next_%d", f->key, j);
    st = assign_into(sub, wv[j], cur[j], name);
  }
  /* the head: "<key>.cond" from the condition's value at the top of a step */
  snprintf(name, sizeof name, "%s.cond", f->key);
  char in_c[160];
  snprintf(in_c, sizeof in_c, "%s.in_%d", f->key, c);
  if (st == PD_OK) st = assign_into(sub, wv[c], in_c, name);
  if (st == PD_OK) {
    pd_operator *head = sub->ops[sub->n_ops - 1];
    memmove(sub->ops + 1, sub->ops, sizeof *sub->ops * (size_t)(sub->n_ops - 1));
    sub->ops[0] = head;
  }
  if (st != PD_OK) return st;
  /* the while op: the values before the loop in, new versions out */
  const char *init[PD_MAX_OUTPUTS], *outs[PD_MAX_OUTPUTS];
  char outn[PD_MAX_OUTPUTS][160];
  for (int j = 0; j < n; j++) init[j] = wv[j]->name;
  int saved = p->current_block;
  p->current_block = f->parent;
  for (int j = 0; j < n && st == PD_OK; j++) {
    const char *to = pd_ctl_write_target(p, wv[j], "While");
    if (!to)
      st = pd_last_status();
    else
      snprintf(outn[j], sizeof outn[j], "%s", to);
    outs[j] = outn[j];
  }
  p->current_block = saved;
  if (st == PD_OK) st = pd_ctl_append_while(p, sub, f->key, init, n, 1, stop, outs);
  for (int j = 0; j < n && st == PD_OK; j++) { /* a version's gradient flag follows the loop's */
    pd_variable *ov = pd_ir_find_var_recursive(pb, outs[j]);
    if (ov && ov != wv[j]) ov->stop_gradient = stop || !pd_dtype_is_floating(ov->dtype);
  }
  pd_ir_touch(p);
  return st;
}

pd_status pd_static_while_end(void) {
  if (t_n_open <= 0)
    return pd_set_error(PD_ERR_STATE, "While: _end without a matching _begin on this thread");
  while_frame f = t_open[--t_n_open];
  pd_program *p = f.p;
  if (pd_static_current_main() != p || p->current_block != f.sub) {
    p->current_block = f.parent;
    return pd_set_error(PD_ERR_STATE,
                        "While: _end while another block (or program guard) opened inside is open");
  }
  p->current_block = f.parent;
  pd_status st = close_loop(p, &f);
  if (st != PD_OK) pd_error_prefix("While (block %d)", f.sub);
  return st;
}
