/* optimizer.minimize in static mode: append_backward, then one update op
 * per (parameter, gradient) pair, the op the eager step runs, with its
 * accumulators and learning rate as persistable Variables that the startup
 * program initialises (Paddle's _create_accumulators and
 * _append_optimize_op). */
#include <stdlib.h>
#include <string.h>

#include "../optim/optim_internal.h"
#include "paddlec/creation.h"
#include "paddlec/manipulation.h"
#include "paddlec/math.h"
#include "static_internal.h"

/* A persistable variable of main's global block named `name`, filled with
 * value by an assign_value op of startup. Reuses an existing one. */
static pd_variable *persistable(pd_program *main, pd_program *startup, const char *name, int ndim,
                                const int64_t *shape, pd_dtype dt, double value) {
  pd_static_block *gb = main->blocks[0];
  pd_variable *v = pd_ir_find_var(gb, name);
  if (v) return v;
  pd_static_pause tok = pd_static_pause_begin();
  pd_internal_enter();
  pd_tensor *init = pd_full(ndim, shape, value, dt);
  pd_internal_leave();
  pd_static_pause_end(tok);
  if (!init) return NULL;
  v = pd_ir_add_var(gb, name, dt, ndim, shape, NULL);
  pd_variable *sv =
      v && startup != main ? pd_ir_add_var(startup->blocks[0], name, dt, ndim, shape, NULL) : NULL;
  pd_operator *op = NULL;
  if (sv) {
    const char *outs[1] = {name};
    op = pd_ir_append_op(startup->blocks[0], PD_STATIC_ASSIGN_VALUE, NULL, 0, outs, 1,
                         &(pd_attrs){.dtype = dt});
  }
  if (!op) {
    pd_tensor_release(init);
    if (v && startup == main)
      pd_set_error(PD_ERR_INVALID, "minimize: the startup program is the main program");
    return NULL;
  }
  op->value = init;
  v->persistable = sv->persistable = true;
  return v;
}

/* The Variable name of accumulator k of parameter Variable pname (Paddle's
 * <param>_<optimizer name>_<accumulator>_0). */
static void acc_var_name(const char *pname, const pd_optim_update_desc *u, int k, char *buf, size_t cap) {
  snprintf(buf, cap, "%s_%s%s%s_0", pname, u->opt_name ? u->opt_name : "", u->opt_name ? "_" : "",
           u->acc_names[k]);
}

/* The learning-rate variable of an update: one per distinct rate, or per
 * scheduler and multiplier (the executor then sets it before every run). */
static pd_variable *lr_var(pd_program *main, pd_program *startup, const pd_optim_update_desc *u) {
  pd_static_block *gb = main->blocks[0];
  if (u->lr_scheduler) {
    for (int i = 0; i < main->n_lr; i++)
      if (main->lr[i].sched == u->lr_scheduler && main->lr[i].mult == u->lr_mult)
        return pd_ir_find_var(gb, main->lr[i].var);
  } else {
    for (int k = 0; k < gb->n_ops; k++) { /* an update op already reading this rate */
      const pd_operator *op = gb->ops[k];
      if (!(op->role & PD_OP_ROLE_OPTIMIZE) || op->n_in < 3) continue;
      pd_variable *v = pd_ir_find_var(gb, op->inputs[2]);
      bool driven = false;
      for (int i = 0; v && i < main->n_lr; i++) driven |= strcmp(main->lr[i].var, v->name) == 0;
      for (int j = 0; v && !driven && j < startup->blocks[0]->n_ops; j++) {
        const pd_operator *so = startup->blocks[0]->ops[j];
        if (so->value && so->n_out == 1 && strcmp(so->outputs[0], v->name) == 0 &&
            pd_tensor_item(so->value) == u->lr)
          return v;
      }
    }
  }
  char name[96];
  pd_static_unique_name("learning_rate", name, sizeof name);
  pd_variable *v = persistable(main, startup, name, 1, (int64_t[]){1}, PD_FLOAT64, u->lr);
  if (v && u->lr_scheduler && pd_ir_add_lr_entry(main, name, u->lr_mult, u->lr_scheduler) != PD_OK)
    return NULL;
  return v;
}

/* clip_norm / max(norm, clip_norm) as a [1] float64 Variable, norm being
 * sqrt(sq): the factor the eager step computes (pd_grad_clip_scale), with
 * the same operations in the same order. */
static pd_tensor *clip_factor(pd_tensor *sq, double clip_norm) {
  pd_tensor *norm = pd_sqrt(sq), *c = pd_full(0, NULL, clip_norm, PD_FLOAT64);
  pd_tensor *m = norm && c ? pd_maximum(norm, c) : NULL, *f = m ? pd_divide(c, m) : NULL;
  pd_tensor *r = f ? pd_reshape(f, 1, (int64_t[]){1}) : NULL;
  pd_tensor *ts[] = {norm, c, m, f};
  for (size_t i = 0; i < sizeof ts / sizeof *ts; i++) pd_tensor_release(ts[i]);
  return r;
}

/* The squared norm of gradient g in float64, as the eager clipping sums it. */
static pd_tensor *squared_norm(pd_tensor *g) {
  pd_tensor *s = pd_dispatch1(PD_OP_squared_l2_norm, &g, 1, NULL);
  pd_tensor *c = s ? pd_cast(s, PD_FLOAT64) : NULL;
  pd_tensor_release(s);
  return c;
}

/* Records the norm clippings' factors (ClipGradByNorm per gradient,
 * ClipGradByGlobalNorm per parameter group) into p; scales[i] gets the
 * factor of gradient i (NULL: not clipped by norm). */
static pd_status clip_scales(pd_program *p, pd_program *startup, const pd_optim_update_desc *us,
                             pd_tensor *const *grads, int n, pd_tensor **scales) {
  bool any = false;
  for (int i = 0; i < n; i++) any |= us[i].norm_clip.kind != PD_GRAD_CLIP_NONE;
  if (!any) return PD_OK;
  pd_status st = pd_static_program_guard_begin(p, startup);
  if (st != PD_OK) return st;
  int role = pd_static_set_role(PD_OP_ROLE_OPTIMIZE);
  for (int i = 0; i < n && st == PD_OK; i++) {
    const pd_grad_clip *c = &us[i].norm_clip;
    if (c->kind == PD_GRAD_CLIP_BY_NORM) {
      pd_tensor *sq = squared_norm(grads[i]);
      scales[i] = sq ? clip_factor(sq, c->clip_norm) : NULL;
      pd_tensor_release(sq);
    } else if (c->kind == PD_GRAD_CLIP_BY_GLOBAL_NORM && !scales[i]) {
      pd_tensor *total = NULL;
      for (int j = i; j < n && st == PD_OK; j++) { /* the group's clipped gradients, in order */
        if (us[j].norm_clip.kind != PD_GRAD_CLIP_BY_GLOBAL_NORM || us[j].group != us[i].group) continue;
        pd_tensor *sq = squared_norm(grads[j]), *t = sq && total ? pd_add(total, sq) : pd_tensor_retain(sq);
        pd_tensor_release(sq);
        pd_tensor_release(total);
        total = t;
        if (!total) st = pd_last_status();
      }
      pd_tensor *f = total ? clip_factor(total, c->clip_norm) : NULL;
      pd_tensor_release(total);
      for (int j = i; j < n && f; j++)
        if (us[j].norm_clip.kind == PD_GRAD_CLIP_BY_GLOBAL_NORM && us[j].group == us[i].group)
          scales[j] = pd_tensor_retain(f);
      pd_tensor_release(f);
    }
    if (st == PD_OK && c->kind != PD_GRAD_CLIP_NONE && !scales[i]) st = pd_last_status();
  }
  pd_static_set_role(role);
  pd_static_program_guard_end();
  return st;
}

static pd_status static_minimize(pd_optimizer *o, pd_tensor *loss) {
  pd_program *p = pd_static_program_of(loss, "minimize");
  if (!p) return pd_last_status();
  pd_program *startup = pd_static_current_main() == p ? pd_static_current_startup() : NULL;
  if (!startup) startup = pd_static_default_startup_program();
  if (!startup) return pd_last_status();
  int np = pd_optim_n_params(o);
  pd_tensor **given = NULL;
  if (np > 0) {
    given = calloc((size_t)np, sizeof *given);
    if (!given) return pd_set_error(PD_ERR_MEMORY, "minimize: out of memory");
    /* the optimizer's parameters, those the Program uses */
    int k = 0;
    for (int i = 0; i < np; i++) {
      pd_tensor *t = pd_optim_param(o, i);
      if (pd_ir_var_of(p, t)) given[k++] = t;
    }
    np = k;
  }
  pd_static_block *gb = p->blocks[0];
  int cap = np > 0 ? np : gb->n_vars;
  pd_tensor **params = calloc((size_t)cap + 1, sizeof *params),
            **grads = calloc((size_t)cap + 1, sizeof *grads);
  if (!params || !grads) {
    free(given);
    free(params);
    free(grads);
    return pd_set_error(PD_ERR_MEMORY, "minimize: out of memory");
  }
  int n = pd_static_append_backward(loss, given, given ? np : 0, NULL, 0, params, grads, cap);
  pd_status st = n < 0 ? (pd_status)n : PD_OK;
  if (n > cap) n = cap;
  pd_optim_update_desc *us = calloc((size_t)(n > 0 ? n : 0) + 1, sizeof *us);
  pd_tensor **scales = calloc((size_t)(n > 0 ? n : 0) + 1, sizeof *scales);
  if (st == PD_OK && (!us || !scales)) st = pd_set_error(PD_ERR_MEMORY, "minimize: out of memory");
  for (int i = 0; i < n && st == PD_OK; i++)
    st = pd_optim_describe_update(o, params[i], pd_ir_var_of(p, params[i])->name, &us[i]);
  if (st == PD_OK) st = clip_scales(p, startup, us, grads, n, scales);
  for (int i = 0; i < n && st == PD_OK; i++) {
    pd_variable *pv = pd_ir_var_of(p, params[i]), *gv = pd_ir_var_of(p, grads[i]);
    pd_optim_update_desc u = us[i];
    pd_variable *lv = lr_var(p, startup, &u);
    if (!lv) {
      st = pd_last_status();
      break;
    }
    const char *ins[4 + PD_OPTIM_MAX_STATE] = {pv->name, gv->name, lv->name};
    int nin = 3;
    pd_dtype adt = pv->dtype == PD_FLOAT64 ? PD_FLOAT64 : PD_FLOAT32;
    for (int k = 0; k < u.n_acc + u.n_pow && st == PD_OK; k++) {
      char name[256];
      acc_var_name(pv->name, &u, k, name, sizeof name);
      bool pow = k >= u.n_acc;
      pd_variable *av = persistable(p, startup, name, pow ? 1 : pv->ndim, pow ? (int64_t[]){1} : pv->shape,
                                    adt, u.acc_fill[k]);
      if (!av)
        st = pd_last_status();
      else
        ins[nin++] = av->name;
    }
    if (st != PD_OK) break;
    if (scales[i]) { /* the clipping's factor: the update op's grad_scale input */
      u.attrs.i[1] = 1;
      ins[nin++] = pd_ir_var_of(p, scales[i])->name;
    }
    const char *outs[1] = {pv->name};
    pd_operator *op = pd_ir_append_op(gb, pd_op_table[u.op]->name, ins, nin, outs, 1, &u.attrs);
    if (!op)
      st = pd_last_status();
    else
      op->role = PD_OP_ROLE_OPTIMIZE;
  }
  for (int i = 0; i < n && scales; i++) pd_tensor_release(scales[i]);
  free(scales);
  free(us);
  for (int i = 0; i < n; i++) {
    pd_tensor_release(params[i]);
    pd_tensor_release(grads[i]);
  }
  free(given);
  free(params);
  free(grads);
  return st;
}

static pd_status minimize_entry(pd_optimizer *o, pd_tensor *loss) {
  pd_internal_enter(); /* the pairs append_backward returns are released here */
  pd_status st = static_minimize(o, loss);
  pd_internal_leave();
  return st;
}

pd_status pd_static_share_optimizer_state(const pd_program *p, pd_optimizer *o, pd_var_scope *scope) {
  const pd_static_block *gb = p->blocks[0];
  pd_status st = PD_OK;
  for (int i = 0; i < pd_optim_n_params(o) && st == PD_OK; i++) {
    pd_tensor *param = pd_optim_param(o, i);
    pd_variable *pv = pd_ir_var_of(p, param);
    pd_optim_update_desc u;
    if (!pv || (st = pd_optim_describe_update(o, param, pv->name, &u)) != PD_OK) continue;
    for (int k = 0; k < u.n_acc + u.n_pow && st == PD_OK; k++) {
      char name[256];
      acc_var_name(pv->name, &u, k, name, sizeof name);
      if (!pd_ir_find_var(gb, name)) continue; /* not updated by p */
      pd_tensor *acc = pd_optim_accumulator(o, param, k);
      st = acc ? pd_var_scope_set_var(scope, name, acc) : pd_last_status();
    }
  }
  return st;
}

void pd_static_install_minimize(void) { pd_optim_set_static_minimize(minimize_entry); }
