/* The dispatcher's DTensor step: an op with a DTensor input is checked on
 * the global metas (infer_meta), its SPMD rule places inputs and outputs,
 * inputs are resharded as asked (differentiably), the op runs on the local
 * shards (recording its grad node there, so backward comes back through
 * here) and its outputs become DTensors. Ranks outside the mesh skip the
 * op: their outputs hold no data. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../autograd/node.h"
#include "../../core/core_internal.h"
#include "ap_internal.h"
#include "paddlec/autograd.h"
#include "paddlec/creation.h"

static atomic_bool g_logged[PD_NUM_OPS];

static void log_fallback(const pd_op_def *def, pd_op_id id) {
  if (atomic_exchange(&g_logged[id], true)) return;
  fprintf(stderr,
          "paddle.c auto_parallel: op '%s' has no SPMD rule; its DTensor inputs are resharded to "
          "Replicate (logged once)\n",
          def->name);
}

/* The optimizer's accumulators are made dense, shaped like the parameter's
 * local shard: they are that shard, so they get the parameter's attr. */
static void adopt_accumulators(pd_tensor *const *in, int n_in) {
  const pd_dist_attr *pa = pd_ap_attr(in[0]);
  if (!pa) return;
  for (int i = 1; i < n_in; i++) {
    pd_tensor *t = in[i];
    if (t->dist_attr || t->ndim != in[0]->ndim || !pd_shape_eq(t->ndim, t->shape, in[0]->shape)) continue;
    if (t->numel == 1 && pa->ndim <= 1 && pa->shape[0] != 1) continue;
    if (i == 1) continue; /* the gradient: dense means replicated */
    pd_dist_attr *c = pd_ap_attr_copy(pa);
    if (c) pd_ap_attr_set(t, c);
  }
}

static int fail(pd_status *st, pd_status s) {
  *st = s;
  return 1;
}

/* Outputs on a rank outside the mesh: no data, the global metas. */
static pd_status skip_op(const pd_op_def *def, pd_tensor *const *in, pd_dist_process_mesh *mesh,
                         const pd_meta *gm, const pd_spmd_dist *dout, int nm, pd_tensor **out) {
  for (int k = 0; k < nm; k++) out[k] = NULL;
  for (int k = 0; k < nm; k++) {
    pd_dist_placement p[PD_DIST_MAX_MESH_DIMS];
    pd_ap_from_spmd(&dout[k], mesh->ndim, gm[k].ndim, p);
    pd_dist_attr *a = pd_ap_attr_new(mesh, p, gm[k].ndim, gm[k].shape);
    if (k == 0 && (def->flags & PD_OPF_INPLACE)) {
      out[0] = pd_tensor_retain(in[0]);
      if (a) pd_ap_attr_set(out[0], a);
    } else {
      out[k] = a ? pd_ap_wrap(pd_zeros(1, (const int64_t[]){0}, gm[k].dtype), a) : NULL;
    }
    if (!out[k] || !a) {
      for (int j = 0; j <= k; j++) pd_tensor_release(out[j]);
      return pd_last_status();
    }
  }
  return PD_OK;
}

/* On a rank outside the mesh the skipped op still records a node (when an
 * input needs a gradient), whose backward hands each DTensor input an empty
 * gradient with that input's attr: the graph is then the same on every
 * rank, so the backward of a reshard between meshes (a pipeline stage
 * boundary) runs on both sides and its send meets its receive. */
typedef struct skip_args {
  const pd_op_def *def;
  pd_dist_process_mesh *mesh;
  const pd_meta *gm;
  const pd_spmd_dist *dout;
} skip_args;
static _Thread_local const skip_args *t_skip;

static pd_status skip_forward(pd_pylayer_ctx *ctx, pd_tensor *const *in, int n_in, pd_tensor **out,
                              int n_out) {
  const skip_args *c = t_skip;
  pd_status st = skip_op(c->def, in, c->mesh, c->gm, c->dout, n_out, out);
  return st == PD_OK ? pd_pylayer_save_for_backward(ctx, in, n_in) : st;
}

static pd_status skip_backward(pd_pylayer_ctx *ctx, pd_tensor *const *g, int n_out, pd_tensor **gin,
                               int n_in) {
  (void)g, (void)n_out;
  for (int i = 0; i < n_in; i++) {
    pd_tensor *t = pd_pylayer_saved_tensor(ctx, i);
    gin[i] = NULL;
    if (!t || !t->dist_attr || t->stop_gradient) continue;
    pd_dist_attr *a = pd_ap_attr_copy(pd_ap_attr(t));
    gin[i] = a ? pd_ap_wrap(pd_zeros(1, (const int64_t[]){0}, t->dtype), a) : NULL;
    if (!gin[i]) return pd_last_status();
  }
  return PD_OK;
}

static const pd_pylayer k_skip = {"skipped op (rank outside the mesh)", skip_forward, skip_backward};

static pd_status skip_op_recorded(const pd_op_def *def, pd_tensor *const *in, int n_in,
                                  pd_dist_process_mesh *mesh, const pd_meta *gm, const pd_spmd_dist *dout,
                                  int nm, pd_tensor **out) {
  bool record = pd_grad_mode_enabled() && (def->flags & PD_OPF_DIFF) && !(def->flags & PD_OPF_INPLACE);
  bool needs = false;
  for (int i = 0; i < n_in; i++) needs |= !in[i]->stop_gradient;
  if (!record || !needs) return skip_op(def, in, mesh, gm, dout, nm, out);
  skip_args c = {def, mesh, gm, dout};
  t_skip = &c;
  pd_status st = pd_pylayer_apply(&k_skip, in, n_in, out, nm);
  t_skip = NULL;
  return st;
}

static bool has_unknown_dim(const pd_meta *gm, int nm) {
  for (int k = 0; k < nm; k++)
    for (int d = 0; d < gm[k].ndim; d++)
      if (gm[k].shape[d] < 0) return true;
  return false;
}

/* A global size infer_meta left unknown (it depends on values) is the
 * local output's where the rule replicated that dim; a sharded one has no
 * size this rank knows. */
static pd_status settle_unknown_dims(const pd_op_def *def, pd_meta *gm, const pd_spmd_dist *dout,
                                     pd_tensor **out, int n_out) {
  for (int k = 0; k < n_out; k++)
    for (int d = 0; d < gm[k].ndim; d++) {
      if (gm[k].shape[d] >= 0) continue;
      if (dout[k].dims_mapping[d] >= 0 || d >= out[k]->ndim)
        return pd_set_error(PD_ERR_UNIMPLEMENTED,
                            "%s: output %d's dim %d depends on the values and its SPMD rule shards it",
                            def->name, k, d);
      gm[k].shape[d] = out[k]->shape[d];
    }
  return PD_OK;
}

static int dist_hook(void *ctx, pd_op_id id, pd_tensor *const *in, int n_in, const pd_attrs *a,
                     pd_tensor **out, int *n_out, pd_status *st) {
  (void)ctx;
  const pd_op_def *def = pd_op_table[id];
  if (n_in > PD_MAX_OUTPUTS)
    return fail(st, pd_set_error(PD_ERR_INVALID, "%s: too many inputs (%d)", def->name, n_in));
  /* one mesh */
  pd_dist_process_mesh *mesh = NULL;
  int first = -1;
  for (int i = 0; i < n_in; i++) {
    const pd_dist_attr *ai = pd_ap_attr(in[i]);
    if (!ai) continue;
    if (!mesh) {
      mesh = ai->mesh;
      first = i;
    } else if (!pd_dist_process_mesh_equal(mesh, ai->mesh)) {
      char b1[256], b2[256];
      return fail(st, pd_set_error(PD_ERR_INVALID,
                                   "%s: input %d is on mesh %s and input %d on mesh %s; there is no rule for "
                                   "one op over two meshes (reshard one of them first)",
                                   def->name, first, pd_ap_mesh_str(mesh, b1, sizeof b1), i,
                                   pd_ap_mesh_str(ai->mesh, b2, sizeof b2)));
    }
  }
  if (pd_ap_is_update_op(id)) adopt_accumulators(in, n_in);
  /* Code written for dense tensors (backward functions) reshapes a tensor
   * to its own shape read from its fields: for a DTensor that is its local
   * shape, and the reshape is the identity on the global value. */
  pd_attrs own;
  if (id == PD_OP_reshape && in[0]->dist_attr && a->nv[0] == in[0]->ndim &&
      pd_shape_eq(in[0]->ndim, a->v[0], in[0]->shape)) {
    own = *a;
    const pd_dist_attr *xa = pd_ap_attr(in[0]);
    own.nv[0] = xa->ndim;
    memcpy(own.v[0], xa->shape, sizeof(int64_t) * (size_t)xa->ndim);
    a = &own;
  }

  /* the op on the global metas */
  pd_tensor shadow[PD_MAX_OUTPUTS];
  pd_tensor *sp[PD_MAX_OUTPUTS];
  pd_meta im[PD_MAX_OUTPUTS];
  pd_spmd_dist din[PD_MAX_OUTPUTS], want[PD_MAX_OUTPUTS];
  for (int i = 0; i < n_in; i++) {
    const pd_dist_attr *ai = pd_ap_attr(in[i]);
    sp[i] = in[i];
    if (ai) {
      shadow[i] = *in[i];
      pd_tensor *s = &shadow[i];
      s->ndim = ai->ndim;
      int64_t numel = 1, stride = 1;
      for (int d = ai->ndim - 1; d >= 0; d--) {
        s->shape[d] = ai->shape[d];
        s->strides[d] = stride;
        stride *= ai->shape[d];
        numel *= ai->shape[d];
      }
      s->numel = numel;
      s->is_contiguous = true;
      /* a meta only: its data is the local shard, so an infer_meta that
       * counts values (masked_select, nonzero) leaves that size unknown */
      s->is_meta = true;
      sp[i] = s;
      pd_ap_to_spmd(ai->p, ai->n, ai->ndim, &din[i]);
    } else {
      pd_ap_to_spmd(NULL, 0, in[i]->ndim, &din[i]);
    }
    pd_meta_of(sp[i], &im[i]);
    want[i] = din[i];
  }
  pd_meta gm[PD_MAX_OUTPUTS];
  int nm = def->n_out;
  pd_status s = def->infer_meta(def, sp, n_in, a, gm, &nm);
  if (s != PD_OK) return fail(st, s);
  if (nm < 0 || nm > PD_MAX_OUTPUTS)
    return fail(st,
                pd_set_error(PD_ERR_INVALID, "%s: %d outputs (at most %d)", def->name, nm, PD_MAX_OUTPUTS));

  /* the rule */
  pd_spmd_dist dout[PD_MAX_OUTPUTS];
  for (int k = 0; k < nm; k++) pd_ap_to_spmd(NULL, 0, gm[k].ndim, &dout[k]);
  pd_spmd_args args = {.def = def,
                       .attrs = a,
                       .n_in = n_in,
                       .n_out = nm,
                       .mesh_ndim = mesh->ndim,
                       .mesh_shape = mesh->shape,
                       .in_meta = im,
                       .out_meta = gm,
                       .in = din,
                       .in_want = want,
                       .out = dout};
  pd_spmd_fn rule = pd_ap_rule_of(id);
  if (!rule) {
    log_fallback(def, id);
    rule = pd_ap_rule_replicated;
  }
  if ((s = rule(&args)) != PD_OK) return fail(st, s);

  /* reshard the inputs the rule places otherwise */
  pd_tensor *use[PD_MAX_OUTPUTS], *owned[PD_MAX_OUTPUTS] = {0};
  bool member = pd_dist_process_mesh_contains(mesh, pd_ap_my_rank());
  s = PD_OK;
  for (int i = 0; i < n_in && s == PD_OK; i++) {
    use[i] = in[i];
    pd_dist_placement p[PD_DIST_MAX_MESH_DIMS];
    pd_ap_from_spmd(&want[i], mesh->ndim, im[i].ndim, p);
    const pd_dist_attr *ai = pd_ap_attr(in[i]);
    bool same = pd_ap_placements_equal(p, ai ? ai->p : pd_ap_replicated, mesh->ndim);
    if (same) continue;
    if (i == 0 && (def->flags & PD_OPF_INPLACE)) {
      char b1[600];
      s = pd_set_error(
          PD_ERR_INVALID,
          "%s: the inplace op's SPMD rule needs x (%s) placed otherwise; reshard it first or use "
          "the out-of-place op",
          def->name, pd_ap_attr_str(ai, b1, sizeof b1));
      break;
    }
    pd_dist_attr *dst = pd_ap_attr_new(mesh, p, im[i].ndim, im[i].shape);
    owned[i] = dst ? pd_ap_reshard(in[i], dst) : NULL;
    pd_ap_attr_free(dst);
    if (!owned[i]) s = pd_last_status();
    use[i] = owned[i];
  }
  /* a local step may use the mesh's axis groups, which every rank makes */
  if (s == PD_OK && args.local) s = pd_ap_mesh_prepare(mesh);
  if (s == PD_OK && !member && has_unknown_dim(gm, nm)) {
    s = pd_set_error(PD_ERR_UNIMPLEMENTED,
                     "%s: an output's size depends on the values of inputs this rank (%d) holds no part of "
                     "(it is outside the mesh)",
                     def->name, pd_ap_my_rank());
  } else if (s == PD_OK && !member) {
    s = skip_op_recorded(def, use, n_in, mesh, gm, dout, nm, out);
    if (s == PD_OK) *n_out = nm;
  } else if (s == PD_OK) {
    /* ops whose attrs hold the output's shape get its local shape */
    pd_attrs local_attrs;
    const pd_attrs *a_global = a;
    if (nm == 1 && pd_ap_op_attrs_hold_out_shape(id)) {
      pd_dist_placement p[PD_DIST_MAX_MESH_DIMS];
      pd_ap_from_spmd(&dout[0], mesh->ndim, gm[0].ndim, p);
      pd_dist_attr *oa = pd_ap_attr_new(mesh, p, gm[0].ndim, gm[0].shape);
      if (oa) {
        local_attrs = *a;
        pd_ap_localize_out_shape(oa, &local_attrs);
        a = &local_attrs;
        pd_ap_attr_free(oa);
      }
    }
    /* the op on the local shards, this handler off meanwhile */
    void *hctx = NULL;
    pd_dist_fn self = pd_dispatch_suspend_dist(&hctx);
    pd_node *before = (def->flags & PD_OPF_INPLACE) ? in[0]->grad_fn : NULL;
    if (args.local) {
      int64_t coords[PD_DIST_MAX_MESH_DIMS];
      pd_ap_mesh_coords(mesh, pd_ap_my_rank(), coords);
      pd_spmd_local lc = {.id = id,
                          .attrs = a,
                          .in = use,
                          .n_in = n_in,
                          .n_out = nm,
                          .in_meta = im,
                          .out_meta = gm,
                          .in_dist = want,
                          .out_dist = dout,
                          .mesh = mesh,
                          .coords = coords};
      s = args.local(&lc, out, n_out);
    } else {
      s = pd_dispatch(id, use, n_in, a, out, n_out);
    }
    pd_dispatch_resume_dist(self, hctx);
    if (s == PD_OK) s = settle_unknown_dims(def, gm, dout, out, *n_out);
    /* The grad node keeps the global metas: its backward builds shapes
     * from them (expand to x's shape, reduce to y's), and those ops come
     * back here as ops on DTensors, whose attrs are global. */
    pd_node *node = s == PD_OK && *n_out > 0 ? out[0]->grad_fn : NULL;
    if (node && node != before && node->op == (int)id && node->n_in == n_in && node->n_out == *n_out) {
      for (int i = 0; i < n_in; i++) node->in_meta[i] = im[i];
      for (int k = 0; k < *n_out; k++) node->out_meta[k] = gm[k];
      node->attrs = *a_global;
    } else {
      node = NULL;
    }
    for (int k = 0; s == PD_OK && k < *n_out; k++) {
      pd_dist_placement p[PD_DIST_MAX_MESH_DIMS];
      pd_ap_from_spmd(&dout[k], mesh->ndim, gm[k].ndim, p);
      bool inplace0 = k == 0 && (def->flags & PD_OPF_INPLACE);
      if (inplace0 && !in[0]->dist_attr) {
        if (pd_ap_placements_equal(p, pd_ap_replicated, mesh->ndim))
          continue; /* a dense x updated by replicated values stays dense */
      }
      if (!inplace0)
        for (int i = 0; i < n_in; i++)
          if (out[k] == use[i] || out[k] == in[i]) { /* never relabel an input */
            pd_tensor *v = pd_ap_local_alias(out[k]);
            if (v) v->stop_gradient = out[k]->stop_gradient;
            pd_tensor_release(out[k]);
            out[k] = v;
            if (!v) s = pd_last_status();
            break;
          }
      pd_dist_attr *oa = s == PD_OK ? pd_ap_attr_new(mesh, p, gm[k].ndim, gm[k].shape) : NULL;
      if (!oa) {
        s = pd_last_status();
        break;
      }
      int64_t ls[PD_MAX_DIMS];
      int ln = pd_ap_local_shape(oa, ls);
      if (ln != out[k]->ndim || !pd_shape_eq(ln, ls, out[k]->shape)) {
        char b1[600], sh[160];
        s = pd_set_error(PD_ERR_SHAPE, "%s: output %d's local shape %s does not match its dist attr %s",
                         def->name, k, PD_SHAPE_STR(out[k]), pd_ap_attr_str(oa, b1, sizeof b1));
        (void)sh;
        pd_ap_attr_free(oa);
        break;
      }
      /* the node's saved alias of the output is the same DTensor */
      pd_tensor *saved = node && node->saved_out ? node->saved_out[k] : NULL;
      if (saved && saved != out[k]) {
        pd_dist_attr *sa = pd_ap_attr_copy(oa);
        if (sa) pd_ap_attr_set(saved, sa);
      }
      pd_ap_attr_set(out[k], oa);
    }
    if (s != PD_OK) {
      for (int k = 0; k < *n_out; k++) pd_tensor_release(out[k]);
      *n_out = 0;
    }
  }
  for (int i = 0; i < n_in; i++) pd_tensor_release(owned[i]);
  *st = s;
  return 1;
}

/* An inplace op computed out of place writes its result r back into x
 * (pd_mu_inplace_on_copy): r placed as x first, since the out-of-place rule
 * may place it otherwise (scatter: an updates dim sharded where x's is not,
 * a Partial x gathered by the copy). r is taken. */
static pd_tensor *place_as_x(const char *op, pd_tensor *x, pd_tensor *r) {
  const pd_dist_attr *xa = pd_ap_attr(x), *ra = pd_ap_attr(r);
  if (!xa) {
    pd_tensor_release(r);
    pd_set_error(PD_ERR_INVALID,
                 "%s: x is a dense tensor and another input a DTensor; make x a DTensor (shard_tensor) or "
                 "use the op out of place",
                 op);
    return NULL;
  }
  int rn = ra ? ra->ndim : r->ndim;
  const int64_t *rs = ra ? ra->shape : r->shape;
  if (rn != xa->ndim || !pd_shape_eq(rn, rs, xa->shape)) {
    char b1[160], b2[160];
    pd_set_error(PD_ERR_SHAPE, "%s: the result's global shape %s is not x's %s", op,
                 pd_shape_str(rn, rs, b1, sizeof b1), pd_shape_str(xa->ndim, xa->shape, b2, sizeof b2));
    pd_tensor_release(r);
    return NULL;
  }
  if (ra && pd_dist_process_mesh_equal(ra->mesh, xa->mesh) && pd_ap_placements_equal(ra->p, xa->p, xa->n))
    return r;
  pd_tensor *t = pd_ap_reshard(r, xa);
  pd_tensor_release(r);
  if (!t) pd_error_prefix("%s: placing the result as x", op);
  return t;
}

void pd_ap_install_hook(void) {
  atomic_store_explicit(&pd_g_dtensors_made, true, memory_order_relaxed);
  if (pd_dispatch_get_dist(NULL) != dist_hook) pd_dispatch_set_dist(dist_hook, NULL);
  if (pd_dispatch_get_dist_place_as() != place_as_x) pd_dispatch_set_dist_place_as(place_as_x);
}
