/* nearest_interp (4-D and 5-D, channel-first) and bilinear_interp (4-D),
 * their adjoints nearest_interp_grad / bilinear_interp_grad, and
 * F.interpolate / F.upsample on top (channel-last inputs are transposed
 * around the ops).
 * Attrs: v0 output spatial sizes, v1 input spatial sizes (the grad ops
 * only), f0..f2 the scale of each spatial dim (0: none; it changes the
 * index ratio as in Paddle), i0 align_corners, i1 align_mode. */
#include <stdlib.h>
#include <string.h>

#include "../../kernels/cpu/interp.h"
#include "../manipulation/manipulation_util.h"
#include "paddlec/layers.h"
#include "paddlec/manipulation.h"

static pd_status check_sizes(const char *op, int nsp, const int64_t *v, int nv, const char *what) {
  if (nv != nsp)
    return pd_set_error(PD_ERR_INVALID, "%s: %d %s sizes for %d spatial dims", op, nv, what, nsp);
  for (int k = 0; k < nsp; k++)
    if (v[k] <= 0)
      return pd_set_error(PD_ERR_INVALID, "%s: %s size %d is %lld; sizes must be > 0", op, what, k,
                          (long long)v[k]);
  return PD_OK;
}

/* grad: whether this is a grad op (sizes of its output come from v1). */
static pd_status interp_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                             pd_meta *out, int *n_out, bool bilinear, bool grad) {
  (void)n_in;
  const pd_tensor *x = in[0];
  if (bilinear ? x->ndim != 4 : (x->ndim != 4 && x->ndim != 5))
    return pd_set_error(PD_ERR_SHAPE, "%s: x must be %s [N, C, %s], got shape %s", def->name,
                        bilinear ? "4-D" : "4-D or 5-D", bilinear ? "H, W" : "(D,) H, W", PD_SHAPE_STR(x));
  if (bilinear && !pd_dtype_is_floating(x->dtype))
    return pd_set_error(PD_ERR_DTYPE, "%s: x must be a floating dtype, got %s", def->name,
                        pd_dtype_name(x->dtype));
  int nsp = x->ndim - 2;
  for (int k = 0; k < nsp; k++)
    if (x->shape[2 + k] == 0)
      return pd_set_error(PD_ERR_SHAPE, "%s: x of shape %s has an empty spatial dim %d", def->name,
                          PD_SHAPE_STR(x), 2 + k);
  pd_status st = check_sizes(def->name, nsp, a->v[0], a->nv[0], "output");
  if (st == PD_OK && grad) st = check_sizes(def->name, nsp, a->v[1], a->nv[1], "input");
  if (st != PD_OK) return st;
  if (grad)
    for (int k = 0; k < nsp; k++)
      if (x->shape[2 + k] != a->v[0][k]) {
        char b[160];
        return pd_set_error(PD_ERR_SHAPE, "%s: grad of shape %s does not match the output size %s", def->name,
                            PD_SHAPE_STR(x), pd_shape_str(nsp, a->v[0], b, sizeof b));
      }
  if (a->i[1] != 0 && a->i[1] != 1)
    return pd_set_error(PD_ERR_INVALID, "%s: align_mode %lld is not 0 or 1", def->name, (long long)a->i[1]);
  pd_meta_of(x, out);
  for (int k = 0; k < nsp; k++) out->shape[2 + k] = grad ? a->v[1][k] : a->v[0][k];
  *n_out = 1;
  return PD_OK;
}

static pd_status nearest_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                              pd_meta *out, int *n_out) {
  return interp_meta(def, in, n_in, a, out, n_out, false, false);
}
static pd_status bilinear_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                               pd_meta *out, int *n_out) {
  return interp_meta(def, in, n_in, a, out, n_out, true, false);
}
static pd_status nearest_grad_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                                   pd_meta *out, int *n_out) {
  return interp_meta(def, in, n_in, a, out, n_out, false, true);
}
static pd_status bilinear_grad_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                                    pd_meta *out, int *n_out) {
  return interp_meta(def, in, n_in, a, out, n_out, true, true);
}

/* Geometry of one call as [planes, d, h, w] in and out (d = 1 for 4-D). */
typedef struct geom {
  int64_t planes, in[3], out[3];
  float ratio[3];
  bool same;
} geom;

static void geom_of(const pd_tensor *big, const int64_t *insz, const int64_t *outsz, const pd_attrs *a,
                    geom *g) {
  int nsp = big->ndim - 2, lead = 3 - nsp;
  g->planes = big->shape[0] * big->shape[1];
  g->same = true;
  for (int k = 0; k < 3; k++) {
    int s = k - lead;
    g->in[k] = s < 0 ? 1 : insz[s];
    g->out[k] = s < 0 ? 1 : outsz[s];
    g->ratio[k] = s < 0 ? 0.f : pdk_interp_ratio(g->in[k], g->out[k], a->f[s], a->i[0] != 0);
    g->same &= g->in[k] == g->out[k];
  }
}

static pd_status oom(const char *op) { return pd_set_error(PD_ERR_MEMORY, "%s: out of memory", op); }

/* Runs the forward (grad = false: in[0] is x) or the adjoint (in[0] is g). */
static pd_status interp_run(const pd_op_def *def, pd_tensor *in0, const pd_attrs *a, pd_tensor *o,
                            bool bilinear, bool grad) {
  pd_tensor *t = pd_kernel_contiguous(in0);
  if (!t) return pd_last_status();
  geom g;
  const int64_t *insz = grad ? o->shape + 2 : t->shape + 2, *outsz = grad ? t->shape + 2 : o->shape + 2;
  geom_of(t, insz, outsz, a, &g);
  pd_status st = PD_OK;
  size_t es = pd_dtype_size(t->dtype);
  if (g.same) {
    memcpy(pd_tensor_data(o), pd_tensor_data(t), (size_t)o->numel * es);
    pd_tensor_release(t);
    return PD_OK;
  }
  int64_t ntab = g.out[0] + g.out[1] + g.out[2];
  int64_t *idx = malloc((size_t)ntab * 2 * sizeof *idx);
  float *wts = malloc((size_t)ntab * 2 * sizeof *wts);
  if (!idx || !wts) {
    st = oom(def->name);
    goto done;
  }
  if (!bilinear) {
    int64_t *id = idx, *ih = id + g.out[0], *iw = ih + g.out[1];
    int64_t *tabs[3] = {id, ih, iw};
    for (int k = 0; k < 3; k++)
      pdk_interp_nearest_index(g.in[k], g.out[k], g.ratio[k], a->i[0] != 0, tabs[k]);
    if (!grad)
      pdk_nearest(pd_tensor_data(t), pd_tensor_data(o), g.planes, g.in[0], g.in[1], g.in[2], g.out[0],
                  g.out[1], g.out[2], id, ih, iw, (int64_t)es);
    else if (pdk_nearest_grad(t->dtype, pd_tensor_data(t), pd_tensor_data(o), g.planes, g.in[0], g.in[1],
                              g.in[2], g.out[0], g.out[1], g.out[2], id, ih, iw))
      st = pd_set_error(PD_ERR_DTYPE, "%s: dtype %s is not supported", def->name, pd_dtype_name(t->dtype));
  } else {
    int64_t oh = g.out[1], ow = g.out[2];
    int64_t *y0 = idx, *y1 = y0 + oh, *x0 = y1 + oh, *x1 = x0 + ow;
    float *wy0 = wts, *wy1 = wy0 + oh, *wx0 = wy1 + oh, *wx1 = wx0 + ow;
    pdk_interp_linear_index(g.in[1], oh, g.ratio[1], a->i[0] != 0, (int)a->i[1], y0, y1, wy0, wy1);
    pdk_interp_linear_index(g.in[2], ow, g.ratio[2], a->i[0] != 0, (int)a->i[1], x0, x1, wx0, wx1);
    int rc = grad ? pdk_bilinear_grad(t->dtype, pd_tensor_data(t), pd_tensor_data(o), g.planes, g.in[1],
                                      g.in[2], oh, ow, y0, y1, wy0, wy1, x0, x1, wx0, wx1)
                  : pdk_bilinear(t->dtype, pd_tensor_data(t), pd_tensor_data(o), g.planes, g.in[1], g.in[2],
                                 oh, ow, y0, y1, wy0, wy1, x0, x1, wx0, wx1);
    if (rc)
      st = pd_set_error(PD_ERR_DTYPE, "%s: dtype %s is not supported", def->name, pd_dtype_name(t->dtype));
  }
done:
  free(idx);
  free(wts);
  pd_tensor_release(t);
  return st;
}

#define KERNEL(name, bil, grad)                                                  \
  static pd_status name##_kernel(const pd_kernel_ctx *ctx) {                     \
    return interp_run(ctx->def, ctx->in[0], ctx->attrs, ctx->out[0], bil, grad); \
  }
KERNEL(nearest, false, false)
KERNEL(bilinear, true, false)
KERNEL(nearest_grad, false, true)
KERNEL(bilinear_grad, true, true)
#undef KERNEL

/* forward -> its adjoint, with x's spatial sizes as v1. */
static pd_status to_grad(const pd_backward_ctx *c, pd_op_id grad_op) {
  if (!c->needs_grad[0]) return PD_OK;
  pd_attrs ga = *c->attrs;
  int nsp = c->in_meta[0].ndim - 2;
  ga.nv[1] = nsp;
  memcpy(ga.v[1], c->in_meta[0].shape + 2, sizeof(int64_t) * (size_t)nsp);
  c->grad_in[0] = pd_dispatch1(grad_op, (pd_tensor *[]){c->grad_out[0]}, 1, &ga);
  return c->grad_in[0] ? PD_OK : pd_last_status();
}

/* adjoint -> the forward (both are linear in their input). */
static pd_status to_fwd(const pd_backward_ctx *c, pd_op_id op) {
  if (!c->needs_grad[0]) return PD_OK;
  pd_attrs fa = *c->attrs;
  fa.nv[1] = 0;
  c->grad_in[0] = pd_dispatch1(op, (pd_tensor *[]){c->grad_out[0]}, 1, &fa);
  return c->grad_in[0] ? PD_OK : pd_last_status();
}

static pd_status nearest_backward(const pd_backward_ctx *c) { return to_grad(c, PD_OP_nearest_interp_grad); }
static pd_status bilinear_backward(const pd_backward_ctx *c) {
  return to_grad(c, PD_OP_bilinear_interp_grad);
}
static pd_status nearest_grad_backward(const pd_backward_ctx *c) { return to_fwd(c, PD_OP_nearest_interp); }
static pd_status bilinear_grad_backward(const pd_backward_ctx *c) { return to_fwd(c, PD_OP_bilinear_interp); }

#define ATTRS "v0:out_size,v1:in_size,f0:scale_0,f1:scale_1,f2:scale_2,i0:align_corners,i1:align_mode"

PD_OPDEF(nearest_interp, .n_in = 1, .n_out = 1, .flags = PD_OPF_DIFF, .attr_names = ATTRS,
         .infer_meta = nearest_meta, .kernel = {[PD_PLACE_CPU] = nearest_kernel},
         .backward = nearest_backward);

PD_OPDEF(bilinear_interp, .n_in = 1, .n_out = 1, .flags = PD_OPF_DIFF | PD_OPF_HALF_VIA_F32,
         .attr_names = ATTRS, .infer_meta = bilinear_meta, .kernel = {[PD_PLACE_CPU] = bilinear_kernel},
         .backward = bilinear_backward);

PD_OPDEF(nearest_interp_grad, .n_in = 1, .n_out = 1,
         .flags = PD_OPF_DIFF | PD_OPF_FLOAT_ONLY | PD_OPF_HALF_VIA_F32, .attr_names = ATTRS,
         .infer_meta = nearest_grad_meta, .kernel = {[PD_PLACE_CPU] = nearest_grad_kernel},
         .backward = nearest_grad_backward);

PD_OPDEF(bilinear_interp_grad, .n_in = 1, .n_out = 1, .flags = PD_OPF_DIFF | PD_OPF_HALF_VIA_F32,
         .attr_names = ATTRS, .infer_meta = bilinear_grad_meta,
         .kernel = {[PD_PLACE_CPU] = bilinear_grad_kernel}, .backward = bilinear_grad_backward);

/* ---- F.interpolate ---------------------------------------------------------------------- */
static bool format_ok(const char *df, int nd, bool *channel_last) {
  static const char *const first[] = {"NCW", "NCHW", "NCDHW"}, *const last[] = {"NWC", "NHWC", "NDHWC"};
  *channel_last = false;
  if (!df) return true;
  if (strcmp(df, first[nd - 3]) == 0) return true;
  *channel_last = strcmp(df, last[nd - 3]) == 0;
  return *channel_last;
}

static pd_tensor *interpolate_impl(const char *op, pd_tensor *x, const pd_interpolate_opts *o) {
  static const pd_interpolate_opts none;
  if (!o) o = &none;
  if (!x) {
    if (pd_last_status() == PD_OK) pd_set_error(PD_ERR_INVALID, "%s: x is NULL", op);
    return NULL;
  }
  int nd = x->ndim;
  if (nd < 3 || nd > 5) {
    pd_set_error(PD_ERR_SHAPE, "%s: x must be 3-D, 4-D or 5-D, got shape %s", op, PD_SHAPE_STR(x));
    return NULL;
  }
  const char *mode = o->mode ? o->mode : "nearest";
  bool bilinear = strcmp(mode, "bilinear") == 0;
  if (!bilinear && strcmp(mode, "nearest") != 0) {
    pd_set_error(PD_ERR_UNIMPLEMENTED, "%s: mode '%s' is not supported (nearest, bilinear)", op, mode);
    return NULL;
  }
  if (bilinear ? nd != 4 : nd == 3) {
    pd_set_error(PD_ERR_SHAPE, "%s: mode '%s' needs a %s x, got shape %s", op, mode,
                 bilinear ? "4-D" : "4-D or 5-D", PD_SHAPE_STR(x));
    return NULL;
  }
  bool cl;
  if (!format_ok(o->data_format, nd, &cl)) {
    pd_set_error(PD_ERR_INVALID, "%s: data_format '%s' does not fit a %d-D x", op, o->data_format, nd);
    return NULL;
  }
  if (o->align_mode != 0 && o->align_mode != 1) {
    pd_set_error(PD_ERR_INVALID, "%s: align_mode %d is not 0 or 1", op, o->align_mode);
    return NULL;
  }
  if (o->align_corners && !bilinear) {
    pd_set_error(PD_ERR_INVALID,
                 "%s: align_corners can only be set with the interpolating modes (linear, bilinear, bicubic, "
                 "trilinear), not '%s'",
                 op, mode);
    return NULL;
  }
  int nsp = nd - 2;
  if ((o->nsize > 0) == (o->nscale > 0)) {
    pd_set_error(PD_ERR_INVALID,
                 "%s: exactly one of size (%d values) and scale_factor (%d values) must be given", op,
                 o->nsize, o->nscale);
    return NULL;
  }
  if (o->nsize && o->nsize != nsp) {
    pd_set_error(PD_ERR_INVALID, "%s: size has %d values but a %d-D x has %d spatial dims", op, o->nsize, nd,
                 nsp);
    return NULL;
  }
  if (o->nscale && o->nscale != 1 && o->nscale != nsp) {
    pd_set_error(PD_ERR_INVALID, "%s: scale_factor has %d values but a %d-D x has %d spatial dims", op,
                 o->nscale, nd, nsp);
    return NULL;
  }
  int64_t insz[3];
  for (int k = 0; k < nsp; k++) insz[k] = x->shape[cl ? 1 + k : 2 + k];
  pd_attrs a = {.i = {o->align_corners, o->align_mode}, .nv = {nsp}};
  for (int k = 0; k < nsp; k++) {
    if (o->nsize) {
      if (o->size[k] <= 0) {
        pd_set_error(PD_ERR_INVALID, "%s: size[%d] is %lld; sizes must be > 0", op, k, (long long)o->size[k]);
        return NULL;
      }
      a.v[0][k] = o->size[k];
    } else {
      double s = o->scale_factor[o->nscale == 1 ? 0 : k];
      if (!(s > 0)) {
        pd_set_error(PD_ERR_INVALID, "%s: scale_factor %g must be > 0", op, s);
        return NULL;
      }
      a.f[k] = s;
      float size = (float)insz[k] * (float)s;
      if (!(size < 9223372036854775808.0f)) { /* converting a larger float (or inf) is undefined */
        pd_set_error(PD_ERR_INVALID,
                     "%s: scale_factor %g gives an output size past INT64_MAX for input size %lld", op, s,
                     (long long)insz[k]);
        return NULL;
      }
      a.v[0][k] = (int64_t)size;
      if (a.v[0][k] <= 0) {
        pd_set_error(PD_ERR_INVALID, "%s: scale_factor %g gives an output size of %lld for input size %lld",
                     op, s, (long long)a.v[0][k], (long long)insz[k]);
        return NULL;
      }
    }
  }
  pd_op_id id = bilinear ? PD_OP_bilinear_interp : PD_OP_nearest_interp;
  if (!cl) return pd_dispatch1(id, &x, 1, &a);
  /* channel last: move C next to N, resize, move it back */
  int64_t to_first[5], to_last[5];
  to_first[0] = to_last[0] = 0;
  to_first[1] = nd - 1;
  for (int d = 2; d < nd; d++) to_first[d] = d - 1;
  for (int d = 1; d < nd - 1; d++) to_last[d] = d + 1;
  to_last[nd - 1] = 1;
  pd_internal_enter();
  pd_tensor *xt = pd_transpose(x, nd, to_first);
  pd_tensor *y = xt ? pd_dispatch1(id, &xt, 1, &a) : NULL;
  pd_tensor *yt = y ? pd_transpose(y, nd, to_last) : NULL;
  pd_tensor_release(xt);
  pd_tensor_release(y);
  pd_internal_leave();
  return pd_scope_track(yt);
}

pd_tensor *pd_interpolate(pd_tensor *x, const pd_interpolate_opts *opts) {
  return interpolate_impl("interpolate", x, opts);
}

pd_tensor *pd_upsample(pd_tensor *x, const pd_interpolate_opts *opts) {
  return interpolate_impl("upsample", x, opts);
}
