/* squeeze / unsqueeze and their inplace forms: views that drop or insert
 * size-1 dims. */
#include <string.h>

#include "manipulation_util.h"
#include "paddlec/ops.h"

/* ---- geometry ---------------------------------------------------------------- */

/* Paddle: no axes removes every size-1 dim; a named axis whose size is not 1
 * is left alone. */
static pd_status squeeze_geom(const char *op, const pd_tensor *x, const pd_attrs *a, int *nd, int64_t *shape,
                              int64_t *strides) {
  bool drop[PD_MAX_DIMS] = {0};
  if (a->nv[0] == 0) {
    for (int d = 0; d < x->ndim; d++) drop[d] = x->shape[d] == 1;
  } else {
    for (int k = 0; k < a->nv[0]; k++) {
      int ax;
      pd_status st = pd_norm_axis(op, a->v[0][k], x->ndim, &ax);
      if (st != PD_OK) return st;
      if (x->ndim > 0 && x->shape[ax] == 1) drop[ax] = true;
    }
  }
  *nd = 0;
  for (int d = 0; d < x->ndim; d++) {
    if (drop[d]) continue;
    shape[*nd] = x->shape[d];
    strides[*nd] = x->strides[d];
    (*nd)++;
  }
  return PD_OK;
}

/* Paddle inserts the axes one after another, each counted in the rank
 * reached so far (negative: from the end of that rank + 1). */
static pd_status unsqueeze_geom(const char *op, const pd_tensor *x, const pd_attrs *a, int *nd,
                                int64_t *shape, int64_t *strides) {
  int n = a->nv[0], out_rank = x->ndim + n, cur_rank = x->ndim;
  if (out_rank > PD_MAX_DIMS)
    return pd_set_error(PD_ERR_INVALID, "%s: x of rank %d with %d new axes exceeds the maximum rank %d", op,
                        x->ndim, n, PD_MAX_DIMS);
  int mark[PD_MAX_DIMS + 1] = {0}; /* 1: a new axis */
  for (int k = 0; k < n; k++) {
    int64_t axis = a->v[0][k];
    int64_t cur = axis < 0 ? axis + cur_rank + 1 : axis;
    if (cur < 0 || cur > cur_rank)
      return pd_set_error(PD_ERR_INDEX,
                          "%s: axis %lld is out of range for a tensor of rank %d "
                          "(expected -%d <= axis <= %d)",
                          op, (long long)axis, cur_rank, cur_rank + 1, cur_rank);
    for (int i = cur_rank; i >= (int)cur; --i) {
      if (mark[i] == 1) {
        mark[i + 1] = 1;
        mark[i] = 0;
      }
    }
    mark[cur] = 1;
    cur_rank++;
  }
  for (int o = 0, i = 0; o < out_rank; o++) {
    if (mark[o]) {
      shape[o] = 1;
    } else {
      shape[o] = x->shape[i];
      strides[o] = x->strides[i];
      i++;
    }
  }
  for (int o = out_rank - 1; o >= 0; o--) /* new dims get the stride that keeps a contiguous x contiguous */
    if (mark[o]) strides[o] = o + 1 < out_rank ? strides[o + 1] * (shape[o + 1] > 1 ? shape[o + 1] : 1) : 1;
  *nd = out_rank;
  return PD_OK;
}

typedef pd_status (*geom_fn)(const char *, const pd_tensor *, const pd_attrs *, int *, int64_t *, int64_t *);

static pd_status meta_with(geom_fn f, const pd_op_def *def, pd_tensor *const *in, const pd_attrs *a,
                           pd_meta *out, int *n_out) {
  int64_t strides[PD_MAX_DIMS];
  out->dtype = in[0]->dtype;
  *n_out = 1;
  return f(def->name, in[0], a, &out->ndim, out->shape, strides);
}

static pd_status view_with(geom_fn f, const pd_op_def *def, pd_tensor *const *in, const pd_attrs *a,
                           pd_tensor **out) {
  int nd;
  int64_t shape[PD_MAX_DIMS], strides[PD_MAX_DIMS];
  pd_status st = f(def->name, in[0], a, &nd, shape, strides);
  if (st != PD_OK) return st;
  out[0] = pd_tensor_new_view(in[0], nd, shape, strides, in[0]->offset);
  return out[0] ? PD_OK : pd_last_status();
}

/* inplace: x itself takes the new geometry */
static pd_status inplace_with(geom_fn f, const pd_op_def *def, pd_tensor *const *in, const pd_attrs *a) {
  pd_tensor *v = NULL;
  pd_status st = view_with(f, def, in, a, &v);
  if (st != PD_OK) return st;
  pd_mu_become(in[0], v, true);
  return PD_OK;
}

static pd_status reshape_back(const pd_backward_ctx *c) {
  if (!c->needs_grad[0]) return PD_OK;
  c->grad_in[0] = pd_reshape(c->grad_out[0], c->in_meta[0].ndim, c->in_meta[0].shape);
  return c->grad_in[0] ? PD_OK : pd_last_status();
}

#define VIEW_OP(OPN, geom)                                                                                 \
  static pd_status OPN##_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,     \
                              pd_meta *out, int *n_out) {                                                  \
    (void)n_in;                                                                                            \
    return meta_with(geom, def, in, a, out, n_out);                                                        \
  }                                                                                                        \
  static pd_status OPN##_kernel(const pd_kernel_ctx *ctx) {                                                \
    return view_with(geom, ctx->def, ctx->in, ctx->attrs, ctx->out);                                       \
  }                                                                                                        \
  static pd_status OPN##__kernel(const pd_kernel_ctx *ctx) {                                               \
    return inplace_with(geom, ctx->def, ctx->in, ctx->attrs);                                              \
  }                                                                                                        \
  PD_OPDEF(OPN, .n_in = 1, .n_out = 1, .flags = PD_OPF_DIFF | PD_OPF_VIEW, .attr_names = "v0:axis",        \
           .infer_meta = OPN##_meta, .kernel = {[PD_PLACE_CPU] = OPN##_kernel}, .backward = reshape_back); \
  PD_OPDEF(OPN##_, .n_in = 1, .n_out = 1, .flags = PD_OPF_INPLACE | PD_OPF_GEOMETRY,                       \
           .attr_names = "v0:axis", .infer_meta = OPN##_meta, .kernel = {[PD_PLACE_CPU] = OPN##__kernel});

VIEW_OP(squeeze, squeeze_geom)
VIEW_OP(unsqueeze, unsqueeze_geom)

/* ---- public wrappers ------------------------------------------------------------ */

static pd_tensor *call(pd_op_id id, const char *name, pd_tensor *x, int naxes, const int64_t *axes) {
  pd_attrs a = {0};
  if (pd_mu_set_list(name, "axis", &a, 0, naxes, axes) != PD_OK) return NULL;
  return pd_dispatch1(id, &x, 1, &a);
}

/* The inplace view ops: when autograd records, the out-of-place view op runs
 * (recording a node) and x takes over its geometry and autograd identity.
 * Recorded into a Program, the inplace row goes to the recorder.
 * A DTensor x takes the view op's result recorded or not, its dist attr
 * included (the global shape and the placements' dims follow the new
 * shape): the view op's SPMD rule may reshard x first (a shard of a
 * squeezed dim is gathered), which the inplace row cannot do to x. */
pd_tensor *pd_mu_inplace_view(pd_op_id view_id, pd_op_id inplace_id, pd_tensor *x, const pd_attrs *a) {
  const char *name = pd_op_table[inplace_id]->name;
  if (!x) {
    if (pd_last_status() == PD_OK) pd_set_error(PD_ERR_INVALID, "%s: input 0 is NULL", name);
    return NULL;
  }
  bool record = pd_mu_would_record(&x, 1);
  /* recording into a Program: the recorder writes the view op with a new
   * Variable for x (src/static/recorder.c), autograd has no part in it */
  if ((!record && !x->dist_attr) || pd_dispatch_get_tracer(NULL)) return pd_dispatch1(inplace_id, &x, 1, a);
  if (record && !x->grad_fn) {
    pd_mu_leaf_inplace_error(name);
    return NULL;
  }
  pd_internal_enter();
  pd_tensor *r = pd_dispatch1(view_id, &x, 1, a);
  pd_internal_leave();
  if (!r) {
    pd_error_prefix("%s", name); /* the view op's error, named as the op called */
    return NULL;
  }
  pd_mu_become(x, r, true);
  return pd_scope_track(pd_tensor_retain(x));
}

pd_tensor *pd_squeeze(pd_tensor *x, int naxes, const int64_t *axes) {
  return call(PD_OP_squeeze, "squeeze", x, naxes, axes);
}
pd_tensor *pd_unsqueeze(pd_tensor *x, int naxes, const int64_t *axes) {
  return call(PD_OP_unsqueeze, "unsqueeze", x, naxes, axes);
}
pd_tensor *pd_squeeze_(pd_tensor *x, int naxes, const int64_t *axes) {
  pd_attrs a = {0};
  if (pd_mu_set_list("squeeze_", "axis", &a, 0, naxes, axes) != PD_OK) return NULL;
  return pd_mu_inplace_view(PD_OP_squeeze, PD_OP_squeeze_, x, &a);
}
pd_tensor *pd_unsqueeze_(pd_tensor *x, int naxes, const int64_t *axes) {
  pd_attrs a = {0};
  if (pd_mu_set_list("unsqueeze_", "axis", &a, 0, naxes, axes) != PD_OK) return NULL;
  return pd_mu_inplace_view(PD_OP_unsqueeze, PD_OP_unsqueeze_, x, &a);
}
