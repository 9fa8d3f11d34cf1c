/* The optimizer base: parameters and groups, lazily created accumulators
 * (named as Paddle names them), the step that runs one fused update op per
 * parameter, learning rates, state dicts. */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/core_internal.h"
#include "../ops/optim/optim_util.h"
#include "optim_internal.h"
#include "paddlec/autograd.h"
#include "paddlec/creation.h"
#include "paddlec/manipulation.h"
#include "paddlec/math.h"

#define MAX_STATE (PD_OPTIM_MAX_ACC + 2)
_Static_assert(MAX_STATE == PD_OPTIM_MAX_STATE, "optim_internal.h sizes the same state");

typedef struct kind_desc {
  const char *cls;
  pd_op_id op;
  int n_acc, n_pow;
  const char *acc[MAX_STATE]; /* accumulators, then beta powers */
  bool group_reg_replaces;    /* in group mode the group's weight_decay replaces ParamAttr's */
} kind_desc;

static pd_optim_static_minimize_fn g_static_minimize;

static const kind_desc k_kinds[] = {
    [PD_OPTIM_SGD] = {"SGD", PD_OP_sgd_, 0, 0, {NULL}, true},
    [PD_OPTIM_MOMENTUM] = {"Momentum", PD_OP_momentum_, 1, 0, {"velocity"}, true},
    [PD_OPTIM_ADAM] =
        {"Adam", PD_OP_adam_, 2, 2, {"moment1", "moment2", "beta1_pow_acc", "beta2_pow_acc"}, true},
    [PD_OPTIM_ADAMW] =
        {"AdamW", PD_OP_adamw_, 2, 2, {"moment1", "moment2", "beta1_pow_acc", "beta2_pow_acc"}, false},
    [PD_OPTIM_ADAMAX] = {"Adamax", PD_OP_adamax_, 2, 1, {"moment", "inf_norm", "beta1_pow_acc"}, true},
    [PD_OPTIM_ADAGRAD] = {"Adagrad", PD_OP_adagrad_, 1, 0, {"moment"}, true},
    [PD_OPTIM_ADADELTA] =
        {"Adadelta", PD_OP_adadelta_, 2, 0, {"_avg_squared_grad", "_avg_squared_update"}, true},
    [PD_OPTIM_RMSPROP] = {"RMSProp", PD_OP_rmsprop_, 3, 0, {"momentum", "mean_square", "mean_grad"}, true},
    [PD_OPTIM_LAMB] =
        {"Lamb", PD_OP_lamb_, 2, 2, {"moment1", "moment2", "beta1_pow_acc", "beta2_pow_acc"}, true},
};

typedef struct slot {
  pd_tensor *param; /* retained */
  char *pname;
  int group;
  bool has_state;
  pd_tensor *acc[MAX_STATE];
  char *acc_name[MAX_STATE];
  pd_tensor *master; /* float32 master weights (multi_precision, half params) */
  char *master_key;  /* "master_weights.<param name>" */
  pd_tensor *lr;     /* this parameter's rate, float64 [1] */
  pd_tensor *gscale; /* the clipping scale, float64 [1] (created when used) */
} slot;

typedef struct group {
  pd_optim_hyper h;
  double lr_mult;
} group;

struct pd_optimizer {
  pd_optim_kind kind;
  const kind_desc *desc;
  double lr;
  pd_lr_scheduler *sched;
  bool multi_precision, group_mode;
  char *name;
  int n_groups;
  group *groups;
  int n_slots;
  slot *slots;
  pd_tensor *lr_state[PD_LR_MAX_STATE]; /* the scheduler entries of the last state_dict */
  int n_lr_state;
  /* A wrapper (pd_optim_wrap): step/clear_grad/release go through wops,
   * everything else to `inner`. */
  pd_optimizer *inner;
  const pd_optim_wrapper_ops *wops;
  void *wctx;
  atomic_int refcount; /* pd_optimizer_retain / pd_optimizer_release */
};

pd_optimizer *pd_optim_wrap(pd_optimizer *inner, const pd_optim_wrapper_ops *ops, void *ctx) {
  if (!inner || !ops || !ops->step || !ops->clear_grad) {
    pd_set_error(PD_ERR_INVALID, "optimizer wrapper: %s is NULL", inner ? "ops" : "inner optimizer");
    return NULL;
  }
  pd_optimizer *o = calloc(1, sizeof *o);
  if (!o) {
    pd_set_error(PD_ERR_MEMORY, "optimizer wrapper: out of memory");
    return NULL;
  }
  atomic_init(&o->refcount, 1);
  o->inner = inner;
  o->wops = ops;
  o->wctx = ctx;
  return o;
}

void *pd_optim_wrapper_ctx(const pd_optimizer *o, const pd_optim_wrapper_ops *ops) {
  return o && o->inner && o->wops == ops ? o->wctx : NULL;
}

pd_optimizer *pd_optim_wrapper_inner(const pd_optimizer *o) { return o ? o->inner : NULL; }

int pd_optim_n_params(const pd_optimizer *o) {
  return !o ? 0 : o->inner ? pd_optim_n_params(o->inner) : o->n_slots;
}

pd_tensor *pd_optim_param(const pd_optimizer *o, int i) {
  if (!o) return NULL;
  if (o->inner) return pd_optim_param(o->inner, i);
  return i >= 0 && i < o->n_slots ? o->slots[i].param : NULL;
}

static char *dup_str(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = malloc(n);
  if (d) memcpy(d, s, n);
  return d;
}

static bool is_half(pd_dtype dt) { return dt == PD_FLOAT16 || dt == PD_BFLOAT16; }

/* ---- construction ------------------------------------------------------------ */
static pd_status add_slot(pd_optimizer *o, pd_tensor *p, int gi, int cap) {
  const char *cls = o->desc->cls;
  if (!p) return pd_set_error(PD_ERR_INVALID, "%s: parameter %d is NULL", cls, o->n_slots);
  if (!pd_dtype_is_floating(p->dtype))
    return pd_set_error(PD_ERR_DTYPE, "%s: parameter %d (%s) must be floating, got %s", cls, o->n_slots,
                        p->name ? p->name : "unnamed", pd_dtype_name(p->dtype));
  for (int i = 0; i < o->n_slots; i++)
    if (o->slots[i].param == p)
      return pd_set_error(PD_ERR_INVALID, "%s: parameter %s appears more than once%s", cls,
                          p->name ? p->name : "(unnamed)", o->group_mode ? " (in more than one group)" : "");
  if (o->n_slots >= cap) return pd_set_error(PD_ERR_INVALID, "%s: too many parameters", cls);
  slot *s = &o->slots[o->n_slots];
  memset(s, 0, sizeof *s);
  char gen[32];
  snprintf(gen, sizeof gen, "param_%d", o->n_slots);
  s->pname = dup_str(p->name ? p->name : gen);
  if (!s->pname) return pd_set_error(PD_ERR_MEMORY, "%s: out of memory", cls);
  s->param = pd_tensor_retain(p);
  s->group = gi;
  o->n_slots++;
  return PD_OK;
}

/* An options struct (NULL: the spec's defaults) into h; a struct that has a
 * pd_*_defaults() function must have started from it. */
static pd_status read_opts(const pd_optim_spec *spec, const char *cls, const void *opts, pd_optim_hyper *h) {
  if (!opts) opts = spec->defaults;
  const pd_optimizer_common_opts *c = opts;
  if (spec->defaults_fn && !c->explicit_zero) return pd_opts_not_from_defaults(cls, spec->defaults_fn);
  if (c->grad_clip) h->clip = *c->grad_clip;
  return spec->read(opts, h);
}

pd_optimizer *pd_optim_create(const pd_optim_spec *spec, double learning_rate, pd_tensor *const *params,
                              int n_params, const void *opts) {
  pd_optim_kind kind = spec->kind;
  const pd_optimizer_common_opts *c = opts ? opts : spec->defaults;
  const kind_desc *d = &k_kinds[kind];
  if (!c->lr_scheduler && (!isfinite(learning_rate) || learning_rate < 0)) {
    pd_set_error(PD_ERR_INVALID, "%s: learning_rate must be a finite value >= 0, got %g", d->cls,
                 learning_rate);
    return NULL;
  }
  bool groups = c->groups != NULL || c->n_groups != 0;
  if (groups && (params || n_params)) {
    pd_set_error(PD_ERR_INVALID, "%s: give either parameters (%d) or parameter groups (%d), not both", d->cls,
                 n_params, c->n_groups);
    return NULL;
  }
  /* as in Paddle, only static mode (a Program being built on this thread)
   * may leave the parameters out: minimize then takes the Program's */
  bool recording = pd_dispatch_get_tracer(NULL) != NULL;
  if (!groups && (!params || n_params < 0) && !(recording && !params && n_params == 0)) {
    pd_set_error(PD_ERR_INVALID, "%s: parameters is NULL (%d given); pass the list of parameters to optimize",
                 d->cls, n_params);
    return NULL;
  }
  if (groups && (!c->groups || c->n_groups <= 0)) {
    pd_set_error(PD_ERR_INVALID, "%s: %d parameter groups given as %s", d->cls, c->n_groups,
                 c->groups ? "a list" : "NULL");
    return NULL;
  }
  int total = groups ? 0 : n_params;
  for (int g = 0; groups && g < c->n_groups; g++) {
    if (c->groups[g].n_params < 0 || (!c->groups[g].params && c->groups[g].n_params > 0)) {
      pd_set_error(PD_ERR_INVALID, "%s: group %d has %d parameters and params %s", d->cls, g,
                   c->groups[g].n_params, c->groups[g].params ? "set" : "NULL");
      return NULL;
    }
    total += c->groups[g].n_params;
  }
  pd_optimizer *o = calloc(1, sizeof *o);
  int ng = groups ? c->n_groups : 1;
  if (o) {
    atomic_init(&o->refcount, 1);
    o->groups = calloc((size_t)ng, sizeof *o->groups);
    o->slots = calloc((size_t)(total ? total : 1), sizeof *o->slots);
  }
  if (!o || !o->groups || !o->slots) {
    if (o) {
      free(o->groups);
      free(o->slots);
    }
    free(o);
    pd_set_error(PD_ERR_MEMORY, "%s: out of memory", d->cls);
    return NULL;
  }
  o->kind = kind;
  o->desc = d;
  o->lr = learning_rate;
  o->multi_precision = c->multi_precision;
  o->group_mode = groups;
  o->n_groups = ng;
  pd_status st = PD_OK;
  if (c->name && !(o->name = dup_str(c->name))) st = pd_set_error(PD_ERR_MEMORY, "%s: out of memory", d->cls);
  pd_optim_hyper top;
  memset(&top, 0, sizeof top);
  if (st == PD_OK) st = read_opts(spec, d->cls, opts, &top);
  for (int g = 0; g < ng && st == PD_OK; g++) {
    group *gr = &o->groups[g];
    gr->h = top;
    gr->lr_mult = 1.0;
    if (groups) {
      if (c->groups[g].opts) st = read_opts(spec, d->cls, c->groups[g].opts, &gr->h);
      if (c->groups[g].learning_rate < 0 || !isfinite(c->groups[g].learning_rate))
        st = pd_set_error(PD_ERR_INVALID, "%s: group %d learning_rate %g must be >= 0", d->cls, g,
                          c->groups[g].learning_rate);
      if (c->groups[g].learning_rate != 0) gr->lr_mult = c->groups[g].learning_rate;
    }
    pd_tensor *const *ps = groups ? c->groups[g].params : params;
    int np = groups ? c->groups[g].n_params : n_params;
    for (int i = 0; i < np && st == PD_OK; i++) st = add_slot(o, ps[i], g, total);
  }
  if (st != PD_OK) {
    pd_optimizer_release(o);
    return NULL;
  }
  o->sched = pd_lr_retain(c->lr_scheduler);
  return o;
}

/* ---- state ----------------------------------------------------------------------- */
static pd_dtype acc_dtype(const pd_tensor *p) { return p->dtype == PD_FLOAT64 ? PD_FLOAT64 : PD_FLOAT32; }

/* Creates s's accumulators (Paddle's _add_accumulator), its master weights
 * and rate tensor. Runs at internal depth. */
static pd_status ensure_state(pd_optimizer *o, slot *s) {
  if (s->has_state) return PD_OK;
  const kind_desc *d = o->desc;
  const pd_optim_hyper *h = &o->groups[s->group].h;
  pd_tensor *p = s->param;
  pd_dtype adt = acc_dtype(p);
  pd_status st = PD_OK;
  for (int k = 0; k < d->n_acc + d->n_pow && st == PD_OK; k++) {
    double fill = 0;
    if (k >= d->n_acc) fill = k == d->n_acc ? h->beta1 : h->beta2; /* beta powers start at beta */
    if (o->kind == PD_OPTIM_ADAGRAD) fill = h->initial_accumulator;
    s->acc[k] = k < d->n_acc ? pd_full(p->ndim, p->shape, fill, adt) : pd_full(1, (int64_t[]){1}, fill, adt);
    char buf[512];
    snprintf(buf, sizeof buf, "%s_%s%s%s_0", s->pname, o->name ? o->name : "", o->name ? "_" : "", d->acc[k]);
    s->acc_name[k] = dup_str(buf);
    if (!s->acc[k] || !s->acc_name[k])
      st = s->acc[k] ? pd_set_error(PD_ERR_MEMORY, "%s: out of memory", d->cls) : pd_last_status();
  }
  if (st == PD_OK && o->multi_precision && is_half(p->dtype)) {
    s->master = pd_cast(p, PD_FLOAT32);
    size_t n = strlen(s->pname) + 16;
    s->master_key = malloc(n);
    if (s->master_key) snprintf(s->master_key, n, "master_weights.%s", s->pname);
    if (!s->master || !s->master_key)
      st = s->master ? pd_set_error(PD_ERR_MEMORY, "%s: out of memory", d->cls) : pd_last_status();
  }
  if (st == PD_OK && !(s->lr = pd_full(1, (int64_t[]){1}, 0.0, PD_FLOAT64))) st = pd_last_status();
  if (st != PD_OK) {
    for (int k = 0; k < MAX_STATE; k++) {
      pd_tensor_release(s->acc[k]);
      free(s->acc_name[k]);
      s->acc[k] = NULL;
      s->acc_name[k] = NULL;
    }
    pd_tensor_release(s->master);
    pd_tensor_release(s->lr);
    free(s->master_key);
    s->master = s->lr = NULL;
    s->master_key = NULL;
    return st;
  }
  s->has_state = true;
  return PD_OK;
}

/* A rate or scale slot (one float64) takes v with the fill_ op, only when it
 * changes: the rate is the same on most steps. */
static pd_status set_scalar(pd_tensor *t, double v) {
  if (*(const double *)pd_data_ptr(t) == v) return PD_OK;
  return pd_write_fill(t, v);
}

/* ---- step -------------------------------------------------------------------------- */
static pd_regularizer slot_regularizer(const pd_optimizer *o, const slot *s, const pd_param_info *pi) {
  const pd_optim_hyper *h = &o->groups[s->group].h;
  if (o->group_mode && o->desc->group_reg_replaces) return h->weight_decay;
  if (pi && pi->l2_decay != 0) return pd_regularizer_l2_decay(pi->l2_decay);
  if (pi && pi->l1_decay != 0) return pd_regularizer_l1_decay(pi->l1_decay);
  return h->weight_decay;
}

/* The update op's attributes for parameter p of a group with
 * hyperparameters h; returns p's rate (lr times AdamW's lr_ratio). */
static double fill_update_attrs(const pd_optimizer *o, const pd_optim_hyper *h, const pd_tensor *p,
                                const char *pname, pd_attrs *a, double lr) {
  switch (o->kind) {
    case PD_OPTIM_MOMENTUM:
      a->f[0] = h->momentum;
      a->i[2] = h->nesterov;
      break;
    case PD_OPTIM_ADAM:
    case PD_OPTIM_ADAMAX:
      a->f[0] = h->beta1;
      a->f[1] = h->beta2;
      a->f[2] = h->epsilon;
      break;
    case PD_OPTIM_ADAMW:
      a->f[0] = h->beta1;
      a->f[1] = h->beta2;
      a->f[2] = h->epsilon;
      a->f[3] = h->coeff;
      if (h->lr_ratio) lr *= h->lr_ratio(p, h->user);
      a->i[2] = h->apply_decay ? h->apply_decay(pname, h->user) : true;
      break;
    case PD_OPTIM_ADAGRAD:
      a->f[0] = h->epsilon;
      break;
    case PD_OPTIM_ADADELTA:
      a->f[0] = h->rho;
      a->f[1] = h->epsilon;
      break;
    case PD_OPTIM_RMSPROP:
      a->f[0] = h->rho;
      a->f[1] = h->epsilon;
      a->f[2] = h->momentum;
      a->i[2] = h->centered;
      break;
    case PD_OPTIM_LAMB:
      a->f[0] = h->beta1;
      a->f[1] = h->beta2;
      a->f[2] = h->epsilon;
      a->f[3] = h->exclude_decay && h->exclude_decay(p, h->user) ? 0.0 : h->coeff;
      a->i[2] = h->always_adapt;
      break;
    case PD_OPTIM_SGD:
      break;
  }
  return lr;
}

static pd_status update_slot(pd_optimizer *o, slot *s, double base_lr, double global_scale) {
  const kind_desc *d = o->desc;
  const pd_optim_hyper *h = &o->groups[s->group].h;
  pd_tensor *p = s->param;
  pd_status st = ensure_state(o, s);
  if (st != PD_OK) return st;
  pd_tensor *g = p->grad->is_contiguous ? pd_tensor_retain(p->grad) : pd_contiguous(p->grad);
  if (!g) return pd_last_status();
  const pd_param_info *pi = pd_tensor_param_info(p);
  bool need_clip = !pi || pi->need_clip;
  double lr = base_lr * (o->group_mode ? o->groups[s->group].lr_mult : pi ? pi->learning_rate : 1.0);

  pd_attrs a = {0};
  lr = fill_update_attrs(o, h, p, s->pname, &a, lr);

  /* the gradient transform: scale (norm clipping, rescale_grad), bounds, regularizer */
  double scale = o->kind == PD_OPTIM_MOMENTUM ? h->rescale_grad : 1.0;
  double lo = -INFINITY, hi = INFINITY;
  if (need_clip) {
    if (h->clip.kind == PD_GRAD_CLIP_BY_GLOBAL_NORM) {
      scale *= global_scale;
    } else if (h->clip.kind == PD_GRAD_CLIP_BY_NORM) {
      double sq = pd_grad_squared_norm(g);
      if (sq < 0) st = pd_last_status();
      scale *= pd_grad_clip_scale(&h->clip, sq);
    } else if (h->clip.kind == PD_GRAD_CLIP_BY_VALUE) {
      lo = h->clip.min;
      hi = h->clip.max;
    }
  }
  pd_regularizer reg = slot_regularizer(o, s, pi);
  if (st == PD_OK)
    st = pd_optim_format_transform(a.s, sizeof a.s, lo, hi, reg.kind == PD_REGULARIZER_L1 ? reg.coeff : 0,
                                   reg.kind == PD_REGULARIZER_L2 ? reg.coeff : 0);
  if (st == PD_OK && scale != 1.0 && !s->gscale && !(s->gscale = pd_full(1, (int64_t[]){1}, 1.0, PD_FLOAT64)))
    st = pd_last_status();
  if (st == PD_OK) st = set_scalar(s->lr, lr);
  if (st == PD_OK && scale != 1.0) st = set_scalar(s->gscale, scale);
  if (st != PD_OK) {
    pd_tensor_release(g);
    return st;
  }

  pd_tensor *in[3 + MAX_STATE + 2];
  int n = 0;
  in[n++] = p;
  in[n++] = g;
  in[n++] = s->lr;
  for (int k = 0; k < d->n_acc + d->n_pow; k++) in[n++] = s->acc[k];
  if (s->master) {
    a.i[0] = 1;
    in[n++] = s->master;
  }
  if (scale != 1.0) {
    a.i[1] = 1;
    in[n++] = s->gscale;
  }
  /* Everything but the gradient and the parameter's layout is ours; with
   * those as the update op requires, its checks can be skipped. */
  if (g->dtype == p->dtype && p->is_contiguous && g->ndim == p->ndim &&
      pd_shape_eq(p->ndim, p->shape, g->shape)) {
    st = pd_dispatch_inplace_trusted(d->op, in, n, &a);
  } else {
    pd_tensor *out[PD_MAX_OUTPUTS];
    int nout = 0;
    st = pd_dispatch(d->op, in, n, &a, out, &nout);
    for (int k = 0; k < nout; k++) pd_tensor_release(out[k]);
  }
  pd_tensor_release(g);
  return st;
}

static bool active(const slot *s) { return !s->param->stop_gradient && s->param->grad; }

pd_status pd_optimizer_step(pd_optimizer *o) {
  if (!o) return pd_set_error(PD_ERR_INVALID, "optimizer step: optimizer is NULL");
  if (o->inner) return o->wops->step(o->wctx, o->inner);
  double base = o->sched ? pd_lr_get(o->sched) : o->lr;
  bool prev = pd_set_grad_enabled(false);
  pd_internal_enter();
  pd_status st = PD_OK;
  for (int gi = 0; gi < o->n_groups && st == PD_OK; gi++) {
    const pd_optim_hyper *h = &o->groups[gi].h;
    double global = 1.0;
    if (h->clip.kind == PD_GRAD_CLIP_BY_GLOBAL_NORM) {
      double sq = 0;
      bool any = false;
      for (int i = 0; i < o->n_slots && st == PD_OK; i++) {
        slot *s = &o->slots[i];
        const pd_param_info *pi = pd_tensor_param_info(s->param);
        if (s->group != gi || !active(s) || (pi && !pi->need_clip)) continue;
        double v = pd_grad_squared_norm(s->param->grad);
        if (v < 0) st = pd_last_status();
        sq += v;
        any = true;
      }
      if (any) global = pd_grad_clip_scale(&h->clip, sq);
    }
    for (int i = 0; i < o->n_slots && st == PD_OK; i++)
      if (o->slots[i].group == gi && active(&o->slots[i])) st = update_slot(o, &o->slots[i], base, global);
  }
  pd_internal_leave();
  pd_set_grad_enabled(prev);
  return st;
}

void pd_optimizer_clear_grad(pd_optimizer *o, bool set_to_zero) {
  if (!o) return;
  if (o->inner) {
    o->wops->clear_grad(o->wctx, o->inner, set_to_zero);
    return;
  }
  for (int i = 0; i < o->n_slots; i++)
    if (!o->slots[i].param->stop_gradient) pd_tensor_clear_grad(o->slots[i].param, set_to_zero);
}

pd_status pd_optimizer_minimize(pd_optimizer *o, pd_tensor *loss) {
  if (!o || !loss)
    return pd_last_status() != PD_OK
               ? pd_last_status()
               : pd_set_error(PD_ERR_INVALID, "minimize: %s is NULL", o ? "loss" : "optimizer");
  if (pd_tensor_is_meta(loss)) { /* a static Variable: append to its Program */
    if (!g_static_minimize)
      return pd_set_error(PD_ERR_STATE,
                          "%s.minimize: loss is a static Variable but no Program is being built",
                          o->desc ? o->desc->cls : "optimizer");
    return g_static_minimize(o, loss);
  }
  pd_status st = pd_backward(loss, NULL, false);
  return st != PD_OK ? st : pd_optimizer_step(o);
}

void pd_optim_set_static_minimize(pd_optim_static_minimize_fn fn) { g_static_minimize = fn; }

pd_status pd_optim_describe_update(const pd_optimizer *o, const pd_tensor *p, const char *pname,
                                   pd_optim_update_desc *u) {
  if (o->inner)
    return pd_set_error(PD_ERR_UNIMPLEMENTED,
                        "minimize: a wrapped (distributed) optimizer cannot update a static "
                        "Program yet");
  const kind_desc *d = o->desc;
  int gi = 0;
  for (int i = 0; i < o->n_slots; i++)
    if (o->slots[i].param == p) gi = o->slots[i].group;
  const pd_optim_hyper *h = &o->groups[gi].h;
  if ((o->kind == PD_OPTIM_MOMENTUM && h->rescale_grad != 1.0) || o->multi_precision)
    return pd_set_error(PD_ERR_UNIMPLEMENTED,
                        "%s.minimize: rescale_grad and multi_precision are not available in static mode yet",
                        d->cls);
  memset(u, 0, sizeof *u);
  const pd_param_info *pi = pd_tensor_param_info(p);
  u->group = gi;
  if ((h->clip.kind == PD_GRAD_CLIP_BY_NORM || h->clip.kind == PD_GRAD_CLIP_BY_GLOBAL_NORM) &&
      (!pi || pi->need_clip))
    u->norm_clip = h->clip;
  double mult = fill_update_attrs(o, h, p, pname, &u->attrs,
                                  o->group_mode ? o->groups[gi].lr_mult
                                  : pi          ? pi->learning_rate
                                                : 1.0);
  u->lr = pd_optimizer_get_lr(o) * mult;
  u->lr_mult = mult;
  u->lr_scheduler = o->sched;
  pd_regularizer reg = h->weight_decay;
  if (!(o->group_mode && d->group_reg_replaces) && pi && pi->l2_decay != 0)
    reg = pd_regularizer_l2_decay(pi->l2_decay);
  if (!(o->group_mode && d->group_reg_replaces) && pi && pi->l1_decay != 0 && !(pi->l2_decay != 0))
    reg = pd_regularizer_l1_decay(pi->l1_decay);
  bool clip = h->clip.kind == PD_GRAD_CLIP_BY_VALUE && (!pi || pi->need_clip);
  pd_status st = pd_optim_format_transform(
      u->attrs.s, sizeof u->attrs.s, clip ? h->clip.min : -INFINITY, clip ? h->clip.max : INFINITY,
      reg.kind == PD_REGULARIZER_L1 ? reg.coeff : 0, reg.kind == PD_REGULARIZER_L2 ? reg.coeff : 0);
  if (st != PD_OK) return st;
  u->op = d->op;
  u->n_acc = d->n_acc;
  u->n_pow = d->n_pow;
  for (int k = 0; k < d->n_acc + d->n_pow; k++) {
    u->acc_names[k] = d->acc[k];
    u->acc_fill[k] = k >= d->n_acc                 ? (k == d->n_acc ? h->beta1 : h->beta2)
                     : o->kind == PD_OPTIM_ADAGRAD ? h->initial_accumulator
                                                   : 0.0;
  }
  u->opt_name = o->name;
  return PD_OK;
}

pd_tensor *pd_optim_accumulator(pd_optimizer *o, const pd_tensor *p, int k) {
  if (o && o->inner) return pd_optim_accumulator(o->inner, p, k);
  for (int i = 0; o && i < o->n_slots; i++) {
    slot *s = &o->slots[i];
    if (s->param != p) continue;
    if (k < 0 || k >= o->desc->n_acc + o->desc->n_pow) break;
    pd_internal_enter();
    pd_status st = ensure_state(o, s);
    pd_internal_leave();
    return st == PD_OK ? s->acc[k] : NULL;
  }
  pd_set_error(PD_ERR_INVALID, "optimizer: no accumulator %d for parameter '%s'", k,
               p && p->name ? p->name : "?");
  return NULL;
}

/* ---- learning rate ---------------------------------------------------------------- */
double pd_optimizer_get_lr(const pd_optimizer *o) {
  if (!o) {
    pd_set_error(PD_ERR_INVALID, "get_lr: optimizer is NULL");
    return NAN;
  }
  if (o->inner) return pd_optimizer_get_lr(o->inner);
  return o->sched ? pd_lr_get(o->sched) : o->lr;
}

pd_status pd_optimizer_set_lr(pd_optimizer *o, double value) {
  if (!o) return pd_set_error(PD_ERR_INVALID, "set_lr: optimizer is NULL");
  if (o->inner) return pd_optimizer_set_lr(o->inner, value);
  if (o->sched)
    return pd_set_error(PD_ERR_STATE,
                        "%s: set_lr cannot be used while the learning rate comes from an LRScheduler (%s)",
                        o->desc->cls, pd_lr_name(o->sched));
  if (!isfinite(value) || value < 0)
    return pd_set_error(PD_ERR_INVALID, "%s: set_lr value must be a finite value >= 0, got %g", o->desc->cls,
                        value);
  o->lr = value;
  return PD_OK;
}

pd_status pd_optimizer_set_lr_scheduler(pd_optimizer *o, pd_lr_scheduler *s) {
  if (!o || !s)
    return pd_set_error(PD_ERR_INVALID, "set_lr_scheduler: %s is NULL", o ? "scheduler" : "optimizer");
  if (o->inner) return pd_optimizer_set_lr_scheduler(o->inner, s);
  pd_lr_retain(s);
  pd_lr_release(o->sched);
  o->sched = s;
  return PD_OK;
}

pd_lr_scheduler *pd_optimizer_lr_scheduler(const pd_optimizer *o) {
  return !o ? NULL : o->inner ? pd_optimizer_lr_scheduler(o->inner) : o->sched;
}
const char *pd_optimizer_name(const pd_optimizer *o) {
  return !o ? NULL : o->inner ? pd_optimizer_name(o->inner) : o->desc->cls;
}

/* ---- state dicts --------------------------------------------------------------------- */
static pd_status push(pd_named_tensors *l, int *cap, const char *name, pd_tensor *t) {
  if (l->n == *cap) {
    int c = *cap ? *cap * 2 : 16;
    char **nm = realloc(l->names, (size_t)c * sizeof *nm);
    if (nm) l->names = nm;
    pd_tensor **ts = realloc(l->tensors, (size_t)c * sizeof *ts);
    if (ts) l->tensors = ts;
    if (!nm || !ts) return pd_set_error(PD_ERR_MEMORY, "state_dict: out of memory");
    *cap = c;
  }
  char *s = dup_str(name);
  if (!s) return pd_set_error(PD_ERR_MEMORY, "state_dict: out of memory");
  l->names[l->n] = s;
  l->tensors[l->n++] = t;
  return PD_OK;
}

static void drop_lr_state(pd_optimizer *o) {
  for (int i = 0; i < o->n_lr_state; i++) pd_tensor_release(o->lr_state[i]);
  o->n_lr_state = 0;
}

pd_status pd_optimizer_state_dict(pd_optimizer *o, pd_named_tensors *out) {
  if (!out) return pd_set_error(PD_ERR_INVALID, "state_dict: output list is NULL");
  *out = (pd_named_tensors){0};
  if (!o) return pd_set_error(PD_ERR_INVALID, "state_dict: optimizer is NULL");
  if (o->inner) return pd_optimizer_state_dict(o->inner, out);
  int cap = 0;
  pd_status st = PD_OK;
  const kind_desc *d = o->desc;
  for (int k = 0; k < d->n_acc + d->n_pow && st == PD_OK; k++)
    for (int i = 0; i < o->n_slots && st == PD_OK; i++)
      if (o->slots[i].has_state) st = push(out, &cap, o->slots[i].acc_name[k], o->slots[i].acc[k]);
  for (int i = 0; i < o->n_slots && st == PD_OK; i++)
    if (o->slots[i].master) st = push(out, &cap, o->slots[i].master_key, o->slots[i].master);
  if (o->sched && st == PD_OK) {
    drop_lr_state(o);
    pd_lr_state_entry e[PD_LR_MAX_STATE];
    int n = pd_lr_state_list(o->sched, "LR_Scheduler", e, PD_LR_MAX_STATE);
    pd_internal_enter();
    for (int i = 0; i < n && st == PD_OK; i++) {
      pd_tensor *t = pd_full(0, NULL, e[i].value, e[i].is_int ? PD_INT64 : PD_FLOAT64);
      if (!t) {
        st = pd_last_status();
        break;
      }
      o->lr_state[o->n_lr_state++] = t;
      st = push(out, &cap, e[i].key, t);
    }
    pd_internal_leave();
  }
  if (st != PD_OK) pd_named_tensors_free(out);
  return st;
}

static int find(const pd_named_tensors *sd, const char *name) {
  for (int j = 0; j < sd->n; j++)
    if (sd->names[j] && strcmp(sd->names[j], name) == 0) return j;
  return -1;
}

/* src must have the shape (ndim, shape); one-element entries (beta powers)
 * only need one element. */
static pd_status check_entry(const char *cls, const char *name, const pd_tensor *src, int ndim,
                             const int64_t *shape) {
  if (!src) return pd_set_error(PD_ERR_INVALID, "%s set_state_dict: entry '%s' is NULL", cls, name);
  bool one = pd_shape_numel(ndim, shape) == 1 && ndim <= 1;
  bool ok = one ? src->numel == 1
                : src->ndim == ndim && memcmp(src->shape, shape, sizeof(int64_t) * (size_t)ndim) == 0;
  if (!ok) {
    char a[160], b[160];
    return pd_set_error(PD_ERR_SHAPE, "%s set_state_dict: '%s' has shape %s in the state dict but %s here",
                        cls, name, pd_shape_str(src->ndim, src->shape, a, sizeof a),
                        pd_shape_str(ndim, shape, b, sizeof b));
  }
  return PD_OK;
}

/* A one-element entry may have another rank than its slot: it is viewed
 * with the slot's shape first. */
static pd_status copy_into(pd_tensor *dst, pd_tensor *src) {
  if (src->ndim == dst->ndim && pd_shape_eq(dst->ndim, src->shape, dst->shape))
    return pd_write_copy(dst, src);
  pd_tensor *v = pd_reshape(src, dst->ndim, dst->shape);
  pd_status st = v ? pd_write_copy(dst, v) : pd_last_status();
  pd_tensor_release(v);
  return st;
}

/* The accumulator name slot s would get (before its state exists). */
static void acc_name(const pd_optimizer *o, const slot *s, int k, char *buf, size_t cap) {
  snprintf(buf, cap, "%s_%s%s%s_0", s->pname, o->name ? o->name : "", o->name ? "_" : "", o->desc->acc[k]);
}

pd_status pd_optimizer_set_state_dict(pd_optimizer *o, const pd_named_tensors *sd) {
  if (!o || !sd)
    return pd_set_error(PD_ERR_INVALID, "set_state_dict: %s is NULL", o ? "state dict" : "optimizer");
  if (o->inner) return pd_optimizer_set_state_dict(o->inner, sd);
  const kind_desc *d = o->desc;
  const char *cls = d->cls;
  int nk = d->n_acc + d->n_pow;
  /* check everything first, so a bad dict changes nothing */
  for (int i = 0; i < o->n_slots; i++) {
    slot *s = &o->slots[i];
    for (int k = 0; k < nk; k++) {
      char name[512];
      acc_name(o, s, k, name, sizeof name);
      int j = find(sd, name);
      if (j < 0) {
        if (s->has_state)
          return pd_set_error(PD_ERR_INVALID, "%s set_state_dict: optimizer tensor %s not found", cls, name);
        continue;
      }
      pd_tensor *p = s->param;
      pd_status st = k < d->n_acc ? check_entry(cls, name, sd->tensors[j], p->ndim, p->shape)
                                  : check_entry(cls, name, sd->tensors[j], 1, (const int64_t[]){1});
      if (st != PD_OK) return st;
    }
  }
  pd_lr_state_entry e[PD_LR_MAX_STATE];
  int ne = o->sched ? pd_lr_state_list(o->sched, "LR_Scheduler", e, PD_LR_MAX_STATE) : 0;
  for (int i = 0; i < ne; i++) {
    int j = find(sd, e[i].key);
    if (j < 0 || !sd->tensors[j] || sd->tensors[j]->numel != 1)
      return pd_set_error(PD_ERR_INVALID, "%s set_state_dict: the scheduler entry %s is %s", cls, e[i].key,
                          j < 0 ? "missing" : "not one value");
  }
  /* then load */
  bool prev = pd_set_grad_enabled(false);
  pd_internal_enter();
  pd_status st = PD_OK;
  for (int i = 0; i < o->n_slots && st == PD_OK; i++) {
    slot *s = &o->slots[i];
    char name[512];
    bool any = false;
    for (int k = 0; k < nk && !any; k++) {
      acc_name(o, s, k, name, sizeof name);
      any = find(sd, name) >= 0;
    }
    if (!any) continue;
    st = ensure_state(o, s);
    for (int k = 0; k < nk && st == PD_OK; k++) {
      int j = find(sd, s->acc_name[k]);
      if (j >= 0) st = copy_into(s->acc[k], sd->tensors[j]);
    }
    if (st == PD_OK && s->master) {
      int j = find(sd, s->master_key);
      if (j >= 0) st = check_entry(cls, s->master_key, sd->tensors[j], s->master->ndim, s->master->shape);
      if (j >= 0 && st == PD_OK) st = copy_into(s->master, sd->tensors[j]);
    }
  }
  for (int i = 0; i < ne && st == PD_OK; i++) {
    int j = find(sd, e[i].key);
    st = pd_lr_state_set(o->sched, e[i].key + strlen("LR_Scheduler."), pd_tensor_item(sd->tensors[j]));
  }
  pd_internal_leave();
  pd_set_grad_enabled(prev);
  return st;
}

pd_optimizer *pd_optimizer_retain(pd_optimizer *o) {
  if (o) atomic_fetch_add(&o->refcount, 1);
  return o;
}

void pd_optimizer_release(pd_optimizer *o) {
  if (!o || atomic_fetch_sub(&o->refcount, 1) != 1) return;
  if (o->inner) {
    if (o->wops->release) o->wops->release(o->wctx);
    pd_optimizer_release(o->inner);
    free(o);
    return;
  }
  for (int i = 0; i < o->n_slots; i++) {
    slot *s = &o->slots[i];
    for (int k = 0; k < MAX_STATE; k++) {
      pd_tensor_release(s->acc[k]);
      free(s->acc_name[k]);
    }
    pd_tensor_release(s->master);
    pd_tensor_release(s->lr);
    pd_tensor_release(s->gscale);
    pd_tensor_release(s->param);
    free(s->master_key);
    free(s->pname);
  }
  drop_lr_state(o);
  pd_lr_release(o->sched);
  free(o->slots);
  free(o->groups);
  free(o->name);
  free(o);
}
