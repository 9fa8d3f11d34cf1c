/* shard_optimizer with ShardingStage1/2/3: a wrapper optimizer that puts
 * each parameter (stage 1/2: for the step only; stage 3: for good) and its
 * gradient on the parameter's sharded placement, so the inner optimizer
 * creates and updates states of the shard only. See paddlec/dist_sharding.h. */
#include <stdlib.h>
#include <string.h>

#include "../../core/core_internal.h"
#include "../../optim/optim_internal.h"
#include "ap_internal.h"
#include "paddlec/autograd.h"
#include "paddlec/dist_sharding.h"

static pd_dist_sharding_stage stage_of(int stage, const char *dim, pd_dist_process_mesh *mesh) {
  return (pd_dist_sharding_stage){stage, dim, mesh};
}
pd_dist_sharding_stage pd_dist_sharding_stage1(const char *sharding_mesh_dim, pd_dist_process_mesh *mesh) {
  return stage_of(1, sharding_mesh_dim, mesh);
}
pd_dist_sharding_stage pd_dist_sharding_stage2(const char *sharding_mesh_dim, pd_dist_process_mesh *mesh) {
  return stage_of(2, sharding_mesh_dim, mesh);
}
pd_dist_sharding_stage pd_dist_sharding_stage3(const char *sharding_mesh_dim, pd_dist_process_mesh *mesh) {
  return stage_of(3, sharding_mesh_dim, mesh);
}

typedef struct shard_ctx {
  int stage; /* 0: no sharding */
  int axis;
  pd_dist_process_mesh *mesh; /* retained */
} shard_ctx;

bool pd_ap_sharded_placements(int axis, const pd_dist_attr *a, pd_dist_placement *out) {
  memcpy(out, a->p, sizeof(pd_dist_placement) * (size_t)a->n);
  if (a->p[axis].kind != PD_DIST_REPLICATE) return false;
  for (int d = 0; d < a->ndim; d++) {
    bool taken = false;
    for (int m = 0; m < a->n; m++) taken |= a->p[m].kind == PD_DIST_SHARD && a->p[m].dim == d;
    if (taken) continue;
    out[axis] = pd_dist_shard(d);
    return true;
  }
  return false;
}

/* The local data of t (attr src, or replicated on dst's mesh when dense)
 * placed as dst; a new dense tensor. */
static pd_tensor *relocal(pd_tensor *t, const pd_dist_attr *dst) {
  pd_dist_attr *rep = NULL;
  const pd_dist_attr *src = pd_ap_attr(t);
  if (!src) {
    if (!(rep = pd_ap_attr_replicated(dst->mesh, dst->ndim, dst->shape))) return NULL;
    src = rep;
  }
  pd_tensor *local = pd_ap_local_alias(t);
  pd_tensor *r = local ? pd_ap_reshard_local(local, src, dst) : NULL;
  pd_tensor_release(local);
  pd_ap_attr_free(rep);
  return r;
}

/* Places parameter p as `to`, in place (the same tensor, new local data). */
static pd_status place_param(pd_tensor *p, const pd_dist_placement *to) {
  const pd_dist_attr *a = pd_ap_attr(p);
  if (pd_ap_placements_equal(a->p, to, a->n)) return PD_OK;
  pd_dist_attr *dst = pd_ap_attr_new(a->mesh, to, a->ndim, a->shape);
  pd_tensor *r = dst ? relocal(p, dst) : NULL;
  if (!r) {
    pd_ap_attr_free(dst);
    return pd_last_status();
  }
  pd_tensor_take_data(p, r);
  pd_tensor_release(r);
  pd_ap_attr_set(p, dst);
  return PD_OK;
}

/* The gradient g placed as `to` (a new DTensor, no autograd). Stage 1
 * reduces it whole first, as Paddle's stage 1 all-reduces. */
static pd_tensor *place_grad(const shard_ctx *c, pd_tensor *g, const pd_dist_attr *pa,
                             const pd_dist_placement *to) {
  pd_tensor *cur = pd_tensor_retain(g);
  if (c->stage == 1 && pd_ap_attr(g)) {
    pd_dist_placement mid[PD_DIST_MAX_MESH_DIMS];
    memcpy(mid, to, sizeof(pd_dist_placement) * (size_t)pa->n);
    mid[c->axis] = pd_dist_replicate();
    pd_dist_attr *ma = pd_ap_attr_new(pa->mesh, mid, pa->ndim, pa->shape);
    pd_tensor *l = ma ? relocal(cur, ma) : NULL;
    pd_tensor_release(cur);
    cur = l ? pd_ap_wrap(l, ma) : NULL;
    if (!l) pd_ap_attr_free(ma);
    if (!cur) return NULL;
  }
  pd_dist_attr *dst = pd_ap_attr_new(pa->mesh, to, pa->ndim, pa->shape);
  pd_tensor *l = dst ? relocal(cur, dst) : NULL;
  pd_tensor_release(cur);
  if (!l) {
    pd_ap_attr_free(dst);
    return NULL;
  }
  return pd_ap_wrap(l, dst);
}

static pd_status shard_step(void *ctx, pd_optimizer *inner) {
  shard_ctx *c = ctx;
  if (c->stage == 0) return pd_optimizer_step(inner);
  int n = pd_optim_n_params(inner);
  pd_tensor **saved = calloc((size_t)n + 1, sizeof *saved);
  pd_dist_placement(*orig)[PD_DIST_MAX_MESH_DIMS] = calloc((size_t)n + 1, sizeof *orig);
  if (!saved || !orig) {
    free(saved);
    free(orig);
    return pd_set_error(PD_ERR_MEMORY, "shard_optimizer: out of memory");
  }
  bool prev = pd_set_grad_enabled(false);
  pd_internal_enter();
  pd_status st = PD_OK;
  for (int i = 0; i < n && st == PD_OK; i++) {
    pd_tensor *p = pd_optim_param(inner, i);
    const pd_dist_attr *a = pd_ap_attr(p);
    if (p->stop_gradient || !p->grad || !a) continue;
    memcpy(orig[i], a->p, sizeof(pd_dist_placement) * (size_t)a->n);
    pd_dist_placement to[PD_DIST_MAX_MESH_DIMS];
    pd_ap_sharded_placements(c->axis, a, to);
    pd_tensor *g = place_grad(c, p->grad, a, to);
    if (!g) {
      st = pd_last_status();
      break;
    }
    saved[i] = p->grad; /* the reference p held */
    p->grad = g;
    st = place_param(p, to);
  }
  if (st == PD_OK) st = pd_optimizer_step(inner);
  for (int i = 0; i < n; i++) {
    if (!saved[i]) continue;
    pd_tensor *p = pd_optim_param(inner, i);
    pd_tensor_release(p->grad);
    p->grad = saved[i];
    if (c->stage < 3) { /* stage 1/2: the updated slices gathered back */
      pd_status s2 = place_param(p, orig[i]);
      if (st == PD_OK) st = s2;
    }
  }
  pd_internal_leave();
  pd_set_grad_enabled(prev);
  free(saved);
  free(orig);
  return st;
}

static void shard_clear_grad(void *ctx, pd_optimizer *inner, bool set_to_zero) {
  (void)ctx;
  pd_optimizer_clear_grad(inner, set_to_zero);
}

static void shard_release(void *ctx) {
  shard_ctx *c = ctx;
  if (c) pd_dist_process_mesh_release(c->mesh);
  free(c);
}

static const pd_optim_wrapper_ops k_shard_ops = {shard_step, shard_clear_grad, shard_release};

int pd_ap_shard_optimizer_stage(const pd_optimizer *opt, int *axis, int *degree) {
  const shard_ctx *c = opt ? pd_optim_wrapper_ctx(opt, &k_shard_ops) : NULL;
  if (!c || !c->stage) return 0;
  *axis = c->axis;
  *degree = (int)c->mesh->shape[c->axis];
  return c->stage;
}

/* The sharding axis (Paddle's choice when no name is given). */
static pd_status resolve_axis(shard_ctx *c, const pd_dist_sharding_stage *s, pd_optimizer *opt) {
  pd_dist_process_mesh *m = c->mesh;
  if (s->sharding_mesh_dim) {
    for (int i = 0; i < m->ndim; i++)
      if (strcmp(m->names[i], s->sharding_mesh_dim) == 0) {
        c->axis = i;
        return PD_OK;
      }
    char buf[256];
    return pd_set_error(PD_ERR_INVALID, "shard_optimizer: the mesh %s has no dim named '%s'",
                        pd_ap_mesh_str(m, buf, sizeof buf), s->sharding_mesh_dim);
  }
  if (m->ndim == 1) {
    c->axis = 0;
    return PD_OK;
  }
  for (int i = 0; i < pd_optim_n_params(opt); i++) {
    const pd_dist_attr *a = pd_ap_attr(pd_optim_param(opt, i));
    bool sharded = false;
    for (int k = 0; a && k < a->n; k++) sharded |= a->p[k].kind == PD_DIST_SHARD;
    for (int k = 0; sharded && k < a->n; k++)
      if (a->p[k].kind == PD_DIST_REPLICATE) {
        c->axis = k;
        return PD_OK;
      }
  }
  char buf[256];
  return pd_set_error(
      PD_ERR_INVALID,
      "shard_optimizer: cannot tell the sharding axis of mesh %s (no parameter is sharded on one "
      "axis and replicated on another); name it with sharding_mesh_dim",
      pd_ap_mesh_str(m, buf, sizeof buf));
}

/* Every parameter a DTensor on the mesh (dense ones made Replicate). */
static pd_status check_params(shard_ctx *c, pd_optimizer *opt) {
  for (int i = 0; i < pd_optim_n_params(opt); i++) {
    pd_tensor *p = pd_optim_param(opt, i);
    const pd_dist_attr *a = pd_ap_attr(p);
    if (!a && !c->mesh)
      return pd_set_error(PD_ERR_INVALID,
                          "shard_optimizer: parameter %d ('%s') is not a DTensor and no mesh was given", i,
                          pd_tensor_name(p) ? pd_tensor_name(p) : "");
    if (!c->mesh) c->mesh = pd_dist_process_mesh_retain(a->mesh);
    if (!a) {
      pd_tensor *r = pd_dist_shard_tensor(p, c->mesh, pd_ap_replicated, c->mesh->ndim);
      if (!r) return pd_last_status();
      pd_tensor_release(r);
    } else if (!pd_dist_process_mesh_equal(a->mesh, c->mesh)) {
      char b1[256], b2[256];
      return pd_set_error(PD_ERR_INVALID, "shard_optimizer: parameter %d ('%s') is on mesh %s, not on %s", i,
                          pd_tensor_name(p) ? pd_tensor_name(p) : "", pd_ap_mesh_str(a->mesh, b1, sizeof b1),
                          pd_ap_mesh_str(c->mesh, b2, sizeof b2));
    }
  }
  return PD_OK;
}

pd_optimizer *pd_dist_shard_optimizer(pd_optimizer *opt, const pd_dist_sharding_stage *shard_fn) {
  if (!opt) {
    pd_set_error(PD_ERR_INVALID, "shard_optimizer: optimizer is NULL");
    return NULL;
  }
  if (shard_fn && (shard_fn->stage < 1 || shard_fn->stage > 3)) {
    pd_set_error(PD_ERR_INVALID, "shard_optimizer: sharding stage %d (ShardingStage1, 2 or 3 is 1, 2 or 3)",
                 shard_fn->stage);
    return NULL;
  }
  shard_ctx *c = calloc(1, sizeof *c);
  if (!c) {
    pd_set_error(PD_ERR_MEMORY, "shard_optimizer: out of memory");
    return NULL;
  }
  pd_status st = PD_OK;
  if (shard_fn) {
    c->stage = shard_fn->stage;
    c->mesh = shard_fn->mesh ? pd_dist_process_mesh_retain(shard_fn->mesh) : NULL;
    pd_internal_enter();
    st = check_params(c, opt);
    if (st == PD_OK && !c->mesh)
      st = pd_set_error(PD_ERR_INVALID,
                        "shard_optimizer: the optimizer has no parameters and no mesh was given");
    if (st == PD_OK) st = resolve_axis(c, shard_fn, opt);
    bool prev = pd_set_grad_enabled(false);
    for (int i = 0; st == PD_OK && c->stage == 3 && i < pd_optim_n_params(opt); i++) {
      pd_tensor *p = pd_optim_param(opt, i);
      pd_dist_placement to[PD_DIST_MAX_MESH_DIMS];
      if (pd_ap_sharded_placements(c->axis, pd_ap_attr(p), to)) st = place_param(p, to);
    }
    pd_set_grad_enabled(prev);
    pd_internal_leave();
  }
  pd_optimizer *w = st == PD_OK ? pd_optim_wrap(opt, &k_shard_ops, c) : NULL;
  if (!w) shard_release(c);
  return w;
}
