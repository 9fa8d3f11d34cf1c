/* DistModel.state_dict / set_state_dict.
 *
 * A model's state lives in three places: the layer's parameters and
 * buffers (DTensors; the static scope's values of the parameters are
 * aliases of their local shards), the eager optimizer's accumulators
 * (dense global tensors), and, once the train Program is built, the
 * static scope's accumulators (this rank's part under the Program's
 * placements: shards with sharding stages 1 and 2). state_dict gives the
 * first, then the scope's accumulators where they exist, else the eager
 * ones; set_state_dict writes each entry into every place holding it, so
 * a load reaches the Program whether it is built already or later (it
 * then starts from the eager values, pd_ap_model_eager_state). */
#include <stdlib.h>
#include <string.h>

#include "../../core/shape.h"
#include "../../optim/optim_internal.h"
#include "dist_model_internal.h"
#include "paddlec.h"

/* Appends src's entries to dst (names copied). */
static pd_status append_named(pd_named_tensors *dst, const pd_named_tensors *src) {
  int n = dst->n + src->n;
  char **names = realloc(dst->names, (size_t)(n ? n : 1) * sizeof *names);
  if (names) dst->names = names;
  pd_tensor **ts = names ? realloc(dst->tensors, (size_t)(n ? n : 1) * sizeof *ts) : NULL;
  if (!ts) return pd_set_error(PD_ERR_MEMORY, "DistModel.state_dict: out of memory");
  dst->tensors = ts;
  for (int i = 0; i < src->n; i++) {
    if (!(dst->names[dst->n] = strdup(src->names[i])))
      return pd_set_error(PD_ERR_MEMORY, "DistModel.state_dict: out of memory");
    dst->tensors[dst->n++] = src->tensors[i];
  }
  return PD_OK;
}

/* Whether `name` is an accumulator Variable of parameter Variable `param`
 * (<param>_<...>_0, as the static optimizer names them; the sharding
 * rewrite's update reads <param>@SHARD). */
static bool is_accumulator_of(const char *name, const char *param) {
  size_t np = strcspn(param, "@"), n = strlen(name);
  return n > np + 3 && strncmp(name, param, np) == 0 && name[np] == '_' && strcmp(name + n - 2, "_0") == 0;
}

/* DTensors made for a state dict, released together. */
typedef struct held_list {
  pd_tensor **t;
  int n;
} held_list;

static void held_clear(held_list *h) {
  for (int i = 0; i < h->n; i++) pd_tensor_release(h->t[i]);
  free(h->t);
  *h = (held_list){0};
}

/* A DTensor of placements a (NULL: dense, local itself) over local, the
 * model's view of a state it keeps as this rank's part; held in *held.
 * Borrowed; NULL with an error. */
static pd_tensor *held_view(held_list *held, pd_tensor *local, const pd_dist_attr *a) {
  pd_internal_enter();
  pd_tensor *t = a ? pd_dist_dtensor_from_local(local, a->mesh, a->p, a->n) : pd_tensor_retain(local);
  pd_internal_leave();
  pd_tensor **h = t ? realloc(held->t, (size_t)(held->n + 1) * sizeof *h) : NULL;
  if (!h) {
    if (t) pd_set_error(PD_ERR_MEMORY, "DistModel.state_dict: out of memory");
    pd_tensor_release(t);
    return NULL;
  }
  held->t = h;
  return held->t[held->n++] = t;
}

/* The train Program's accumulators as the static steps left them in the
 * scope (the eager optimizer's own are not stepped by the Program): each
 * replaces the entry of its name in *out or is appended, a DTensor of the
 * Variable's placements over the scope's tensor (writing its local value
 * writes the scope's), held in *held. */
static pd_status static_accumulators(pd_dist_model *m, pd_named_tensors *out, held_list *held) {
  const pd_program *p = m->progs[PD_DIST_MODE_TRAIN].built ? m->progs[PD_DIST_MODE_TRAIN].dist.main : NULL;
  const pd_static_block *b = p ? p->blocks[0] : NULL;
  pd_status st = PD_OK;
  for (int k = 0; b && k < b->n_ops && st == PD_OK; k++) {
    const pd_operator *op = b->ops[k];
    if (op->op_id < 0 || !pd_ap_is_update_op((pd_op_id)op->op_id)) continue;
    for (int i = 3; i < op->n_in && st == PD_OK; i++) {
      const pd_variable *v = pd_ir_find_var(b, op->inputs[i]);
      pd_tensor *local = v && v->persistable && is_accumulator_of(v->name, op->inputs[0])
                             ? pd_var_scope_find_var(m->scope, v->name)
                             : NULL;
      if (!local) continue;
      pd_tensor *t = held_view(held, local, pd_ap_var_attr(v));
      if (!t) {
        st = pd_last_status();
        break;
      }
      int j = 0;
      while (j < out->n && strcmp(out->names[j], v->name) != 0) j++;
      if (j < out->n) {
        out->tensors[j] = t;
      } else {
        pd_named_tensors one = {.n = 1, .names = (char *[]){(char *)v->name}, .tensors = &t};
        st = append_named(out, &one);
      }
    }
  }
  return st;
}

/* The eager optimizer's accumulators of every parameter, created (as its
 * first step would: zeros, beta powers at beta) where missing, so that a
 * state dict has every optimizer entry before the first train call, as
 * Paddle's (whose startup program runs at to_static) has. */
static pd_status ensure_eager_states(pd_dist_model *m) {
  pd_optimizer *o = m->record_opt; /* shard_optimizer's wrapper keeps its states in the one it wraps */
  pd_status st = PD_OK;
  for (int i = 0; o && i < pd_optim_n_params(o) && st == PD_OK; i++) {
    pd_tensor *p = pd_optim_param(o, i);
    const char *name = pd_tensor_name(p);
    pd_optim_update_desc u;
    /* an update the static Program cannot make (train refuses it by name)
     * leaves the parameter's states as they are */
    if (pd_optim_describe_update(o, p, name ? name : "", &u) != PD_OK) {
      pd_clear_error();
      continue;
    }
    for (int k = 0; k < u.n_acc + u.n_pow && st == PD_OK; k++)
      if (!pd_optim_accumulator(o, p, k)) st = pd_last_status();
  }
  return st;
}

/* The eager optimizer's state dict as the model sees it: an accumulator
 * of a distributed parameter, which the eager optimizer keeps as the
 * parameter's local shape, is a DTensor of the parameter's placements over
 * it (held in *held); the rest as they are. */
static pd_status eager_states(pd_dist_model *m, pd_named_tensors *out, held_list *held) {
  *out = (pd_named_tensors){0};
  pd_optimizer *o = m->record_opt;
  pd_status st = ensure_eager_states(m);
  if (st == PD_OK) st = pd_optimizer_state_dict(o, out);
  for (int i = 0; i < pd_optim_n_params(o) && st == PD_OK; i++) {
    pd_tensor *p = pd_optim_param(o, i);
    const pd_dist_attr *pa = pd_ap_attr(p);
    const char *name = pd_tensor_name(p);
    pd_optim_update_desc u;
    if (!pa || pd_optim_describe_update(o, p, name ? name : "", &u) != PD_OK) {
      pd_clear_error();
      continue;
    }
    for (int k = 0; k < u.n_acc && st == PD_OK; k++) {
      pd_tensor *acc = pd_optim_accumulator(o, p, k);
      for (int j = 0; j < out->n && st == PD_OK; j++) {
        if (out->tensors[j] == acc && !(out->tensors[j] = held_view(held, acc, pa))) st = pd_last_status();
      }
    }
  }
  if (st != PD_OK) pd_named_tensors_free(out);
  return st;
}

pd_status pd_ap_model_eager_value(pd_dist_model *m, const pd_variable *v, pd_tensor **out) {
  *out = NULL;
  if (!m->opt) return PD_OK;
  pd_named_tensors sd;
  held_list held = {0};
  pd_status st = eager_states(m, &sd, &held);
  bool listed = st == PD_OK;
  pd_tensor *e = NULL;
  for (int i = 0; st == PD_OK && i < sd.n && !e; i++)
    if (strcmp(sd.names[i], v->name) == 0) e = sd.tensors[i];
  const pd_dist_attr *a = pd_ap_var_attr(v);
  pd_tensor *r = !e              ? NULL
                 : a             ? pd_ap_reshard(e, a)
                 : pd_ap_attr(e) ? pd_dist_unshard_dtensor(e)
                                 : pd_tensor_retain(e);
  pd_tensor *local = r && pd_ap_attr(r) ? pd_ap_local_alias(r) : pd_tensor_retain(r);
  if (local) *out = pd_clone(local, local->dtype);
  if (e && !*out) st = pd_last_status();
  pd_tensor_release(local);
  pd_tensor_release(r);
  if (listed) pd_named_tensors_free(&sd);
  held_clear(&held);
  return st;
}

pd_status pd_dist_model_state_dict(pd_dist_model *m, const char *mode, pd_named_tensors *out) {
  if (!m || !out) return pd_set_error(PD_ERR_INVALID, "DistModel.state_dict: model and out must not be NULL");
  if (!mode) mode = "all";
  bool all = strcmp(mode, "all") == 0, param = all || strcmp(mode, "param") == 0,
       opt = all || strcmp(mode, "opt") == 0;
  if (!param && !opt)
    return pd_set_error(PD_ERR_INVALID, "DistModel.state_dict: mode '%s' is none of 'opt', 'param', 'all'",
                        mode);
  *out = (pd_named_tensors){0};
  pd_named_tensors part = {0};
  pd_status st = param ? pd_layer_state_dict(m->layer, &part) : PD_OK;
  if (st == PD_OK) st = append_named(out, &part);
  pd_named_tensors_free(&part);
  if (st == PD_OK && opt && m->opt) {
    held_list old = {m->held, m->n_held}, now = {0};
    st = eager_states(m, &part, &now);
    if (st == PD_OK) st = append_named(out, &part);
    pd_named_tensors_free(&part);
    if (st == PD_OK) st = static_accumulators(m, out, &now);
    held_clear(&old);
    m->held = now.t;
    m->n_held = now.n;
  }
  if (st != PD_OK) pd_named_tensors_free(out);
  return st;
}

/* ---- set_state_dict ------------------------------------------------------- */

/* Every tensor of the model an entry may go to: the layer's, the eager
 * optimizer's, the static scope's (DTensors over its tensors, in held). */
typedef struct model_targets {
  pd_named_tensors lists[3];
  held_list held;
} model_targets;

static void targets_free(model_targets *t) {
  for (int i = 0; i < 3; i++) pd_named_tensors_free(&t->lists[i]);
  held_clear(&t->held);
}

static pd_status targets_of(pd_dist_model *m, model_targets *t) {
  *t = (model_targets){0};
  pd_status st = pd_layer_state_dict(m->layer, &t->lists[0]);
  if (st == PD_OK && m->opt) {
    st = eager_states(m, &t->lists[1], &t->held);
    if (st == PD_OK) st = static_accumulators(m, &t->lists[2], &t->held);
  }
  if (st != PD_OK) targets_free(t);
  return st;
}

/* Entry `name` (src) fits dst: the same global shape (one-element states,
 * the beta powers, may differ in rank) and dtype. */
static pd_status check_fits(const char *name, const pd_tensor *src, const pd_tensor *dst) {
  if (src->is_meta) return pd_tensor_meta_error("DistModel.set_state_dict", src);
  int ns, nd;
  const int64_t *ss = pd_global_shape(src, &ns), *ds = pd_global_shape(dst, &nd);
  bool one = pd_shape_numel(ns, ss) == 1 && pd_shape_numel(nd, ds) == 1;
  if (!one && (ns != nd || !pd_shape_eq(nd, ss, ds))) {
    char a[160], b[160];
    return pd_set_error(PD_ERR_SHAPE,
                        "DistModel.set_state_dict: '%s' has global shape %s in the state dict but %s in the "
                        "model",
                        name, pd_shape_str(ns, ss, a, sizeof a), pd_shape_str(nd, ds, b, sizeof b));
  }
  if (src->dtype != dst->dtype)
    return pd_set_error(PD_ERR_DTYPE,
                        "DistModel.set_state_dict: '%s' is %s in the state dict but %s in the model", name,
                        pd_dtype_name(src->dtype), pd_dtype_name(dst->dtype));
  return PD_OK;
}

/* Writes the global value src (a DTensor of any placements on the model's
 * mesh, or a dense global tensor) into dst: a DTensor's local shard gets
 * src resharded to dst's placements (a collective when src is
 * distributed), a dense tensor the whole value. */
static pd_status write_entry(pd_tensor *dst, pd_tensor *src) {
  const pd_dist_attr *da = pd_ap_attr(dst);
  pd_tensor *dst_local = da ? pd_ap_local_alias(dst) : pd_tensor_retain(dst);
  pd_tensor *value = NULL;
  int nd;
  const int64_t *ds = pd_global_shape(dst, &nd);
  if (dst_local && pd_shape_numel(nd, ds) == 1) {
    /* one element, replicated: its rank may differ */
    pd_tensor *l = pd_ap_attr(src) ? pd_ap_local_alias(src) : pd_tensor_retain(src);
    if (l) {
      pd_status st = pd_write_fill(dst_local, pd_tensor_item(l));
      pd_tensor_release(l);
      pd_tensor_release(dst_local);
      return st;
    }
  } else if (dst_local && da) {
    pd_tensor *r = pd_ap_reshard(src, da);
    value = r ? pd_ap_local_alias(r) : NULL;
    pd_tensor_release(r);
  } else if (dst_local) {
    value = pd_ap_attr(src) ? pd_dist_unshard_dtensor(src) : pd_tensor_retain(src);
  }
  pd_status st = value ? pd_write_copy(dst_local, value) : pd_last_status();
  pd_tensor_release(value);
  pd_tensor_release(dst_local);
  return st;
}

/* The scheduler entries (LR_Scheduler.<key>) of sd into opt's scheduler. */
static pd_status set_scheduler(pd_optimizer *opt, const pd_named_tensors *sd) {
  pd_lr_scheduler *s = opt ? pd_optimizer_lr_scheduler(opt) : NULL;
  static const char prefix[] = "LR_Scheduler.";
  pd_status st = PD_OK;
  for (int i = 0; s && i < sd->n && st == PD_OK; i++)
    if (strncmp(sd->names[i], prefix, sizeof prefix - 1) == 0)
      st = pd_lr_state_set(s, sd->names[i] + sizeof prefix - 1, pd_tensor_item(sd->tensors[i]));
  return st;
}

pd_status pd_dist_model_set_state_dict(pd_dist_model *m, const pd_named_tensors *sd) {
  if (!m || !sd)
    return pd_set_error(PD_ERR_INVALID, "DistModel.set_state_dict: model and sd must not be NULL");
  model_targets t;
  pd_status st = targets_of(m, &t);
  if (st != PD_OK) return st;
  /* check every entry first, so a bad dict changes nothing */
  for (int i = 0; i < sd->n && st == PD_OK; i++) {
    if (!sd->names[i] || !sd->tensors[i]) {
      st = pd_set_error(PD_ERR_INVALID, "DistModel.set_state_dict: entry %d ('%s') is NULL", i,
                        sd->names[i] ? sd->names[i] : "(no name)");
      break;
    }
    int found = 0;
    for (int l = 0; l < 3 && st == PD_OK; l++)
      for (int j = 0; j < t.lists[l].n && st == PD_OK; j++)
        if (strcmp(t.lists[l].names[j], sd->names[i]) == 0) {
          found++;
          st = check_fits(sd->names[i], sd->tensors[i], t.lists[l].tensors[j]);
        }
    if (st == PD_OK && !found)
      st = pd_set_error(PD_ERR_INVALID,
                        "DistModel.set_state_dict: '%s' is neither a parameter or buffer of the layer nor a "
                        "state of the optimizer",
                        sd->names[i]);
  }
  /* then write, in sd's order on every rank (reshards are collectives) */
  bool grad = pd_set_grad_enabled(false);
  pd_internal_enter();
  for (int i = 0; i < sd->n && st == PD_OK; i++)
    for (int l = 0; l < 3 && st == PD_OK; l++)
      for (int j = 0; j < t.lists[l].n && st == PD_OK; j++)
        if (strcmp(t.lists[l].names[j], sd->names[i]) == 0 && t.lists[l].tensors[j] != sd->tensors[i])
          st = write_entry(t.lists[l].tensors[j], sd->tensors[i]);
  if (st == PD_OK) st = set_scheduler(m->opt, sd);
  pd_internal_leave();
  pd_set_grad_enabled(grad);
  targets_free(&t);
  return st;
}
