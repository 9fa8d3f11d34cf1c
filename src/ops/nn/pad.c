/* pad (constant / reflect / replicate / circular over any dims) and its
 * adjoint pad_grad; F.pad maps Paddle's pad lists onto them.
 * Attrs of both: v0 pads before each dim, v1 pads after each dim (one entry
 * per dim of x), i0 mode (pd_pad_mode), f0 the constant value. */
#include <stdlib.h>
#include <string.h>

#include "../../core/shape_check.h"
#include "../../kernels/cpu/pad.h"
#include "../manipulation/manipulation_util.h"
#include "paddlec/layers.h"

static const char *const k_modes[] = {"constant", "reflect", "replicate", "circular"};

/* Checks the pads of x's shape `in` (ndim dims) for the mode. */
static pd_status check_pads(const char *op, int ndim, const int64_t *in, const pd_attrs *a) {
  if (a->nv[0] != ndim || a->nv[1] != ndim)
    return pd_set_error(PD_ERR_INVALID, "%s: %d / %d pad entries for a tensor of rank %d", op, a->nv[0],
                        a->nv[1], ndim);
  if (a->i[0] < 0 || a->i[0] > PD_PAD_CIRCULAR)
    return pd_set_error(PD_ERR_INVALID, "%s: mode %lld is not a pad mode", op, (long long)a->i[0]);
  const char *mode = k_modes[a->i[0]];
  for (int d = 0; d < ndim; d++) {
    int64_t b = a->v[0][d], e = a->v[1][d], n = in[d];
    if (b < 0 || e < 0)
      return pd_set_error(PD_ERR_INVALID, "%s: pads of dim %d are %lld and %lld; they must be >= 0", op, d,
                          (long long)b, (long long)e);
    if ((b == 0 && e == 0) || !pd_dim_known(n)) continue;
    if (a->i[0] == PD_PAD_REFLECT && (b >= n || e >= n))
      return pd_set_error(
          PD_ERR_SHAPE,
          "%s: reflect mode needs pads smaller than the dim: dim %d has size %lld but pads %lld "
          "and %lld",
          op, d, (long long)n, (long long)b, (long long)e);
    if (a->i[0] != PD_PAD_CONSTANT && n == 0)
      return pd_set_error(PD_ERR_SHAPE, "%s: %s mode cannot pad dim %d of size 0", op, mode, d);
  }
  return PD_OK;
}

static pd_status pad_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                          pd_meta *out, int *n_out) {
  (void)n_in;
  const pd_tensor *x = in[0];
  pd_status st = check_pads(def->name, x->ndim, x->shape, a);
  if (st != PD_OK) return st;
  pd_meta_of(x, out);
  for (int d = 0; d < x->ndim; d++)
    if (!pd_dim_known(x->shape[d])) /* out->shape[d] stays unknown */
      continue;
    else if (pd_add_overflow(x->shape[d], a->v[0][d], &out->shape[d]) ||
             pd_add_overflow(out->shape[d], a->v[1][d], &out->shape[d]))
      return pd_set_error(PD_ERR_SHAPE, "%s: dim %d of size %lld with pads %lld and %lld overflows int64",
                          def->name, d, (long long)x->shape[d], (long long)a->v[0][d], (long long)a->v[1][d]);
  *n_out = 1;
  return PD_OK;
}

static pd_status pad_kernel(const pd_kernel_ctx *ctx) {
  const pd_tensor *x = ctx->in[0];
  uint64_t value = 0;
  pd_store_from_f64(&value, x->dtype, ctx->attrs->f[0]);
  if (x->numel == 0 && ctx->out[0]->numel > 0) { /* constant mode around an empty x: all value */
    int64_t zero[PD_MAX_DIMS] = {0};
    return pdk_pad(x->ndim, x->shape, zero, &value, ctx->attrs->v[0], ctx->out[0]->shape, PD_PAD_CONSTANT,
                   &value, pd_tensor_data(ctx->out[0]), (int64_t)pd_dtype_size(x->dtype))
               ? pd_set_error(PD_ERR_MEMORY, "%s: out of memory", ctx->def->name)
               : PD_OK;
  }
  if (pdk_pad(x->ndim, x->shape, x->strides, pd_tensor_data(x), ctx->attrs->v[0], ctx->out[0]->shape,
              (int)ctx->attrs->i[0], &value, pd_tensor_data(ctx->out[0]), (int64_t)pd_dtype_size(x->dtype)))
    return pd_set_error(PD_ERR_MEMORY, "%s: out of memory", ctx->def->name);
  return PD_OK;
}

static pd_status pad_backward(const pd_backward_ctx *c) {
  if (!c->needs_grad[0]) return PD_OK;
  c->grad_in[0] = pd_dispatch1(PD_OP_pad_grad, (pd_tensor *[]){c->grad_out[0]}, 1, c->attrs);
  return c->grad_in[0] ? PD_OK : pd_last_status();
}

PD_OPDEF(pad, .n_in = 1, .n_out = 1, .flags = PD_OPF_DIFF,
         .attr_names = "v0:pad_before,v1:pad_after,i0:mode,f0:value", .infer_meta = pad_meta,
         .kernel = {[PD_PLACE_CPU] = pad_kernel}, .backward = pad_backward);

/* pad_grad: g of the padded shape -> the gradient of x (sums what each
 * element of x was read into). */
static pd_status pad_grad_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                               pd_meta *out, int *n_out) {
  (void)n_in;
  const pd_tensor *g = in[0];
  if (a->nv[0] != g->ndim || a->nv[1] != g->ndim)
    return pd_set_error(PD_ERR_INVALID, "%s: %d / %d pad entries for a tensor of rank %d", def->name,
                        a->nv[0], a->nv[1], g->ndim);
  pd_meta_of(g, out);
  for (int d = 0; d < g->ndim; d++) {
    if (!pd_dim_known(g->shape[d])) continue; /* out->shape[d] stays unknown */
    if (pd_sub_overflow(g->shape[d], a->v[0][d], &out->shape[d]) ||
        pd_sub_overflow(out->shape[d], a->v[1][d], &out->shape[d]) || out->shape[d] < 0)
      return pd_set_error(PD_ERR_SHAPE, "%s: dim %d of size %lld is smaller than its pads %lld + %lld",
                          def->name, d, (long long)g->shape[d], (long long)a->v[0][d], (long long)a->v[1][d]);
  }
  *n_out = 1;
  return check_pads(def->name, out->ndim, out->shape, a);
}

static pd_status pad_grad_kernel(const pd_kernel_ctx *ctx) {
  pd_tensor *o = ctx->out[0];
  if (o->numel == 0) return PD_OK;
  pd_tensor *g = pd_kernel_contiguous(ctx->in[0]);
  if (!g) return pd_last_status();
  int nd = g->ndim, npadded = 0;
  for (int d = 0; d < nd; d++) npadded += ctx->attrs->v[0][d] != 0 || ctx->attrs->v[1][d] != 0;
  size_t es = pd_dtype_size(g->dtype);
  pd_status st = PD_OK;
  if (npadded == 0) {
    memcpy(pd_tensor_data(o), pd_tensor_data(g), (size_t)o->numel * es);
    pd_tensor_release(g);
    return PD_OK;
  }
  /* one adjoint pass per padded dim, each shrinking that dim to x's size */
  pd_tensor *cur = g;
  for (int d = 0, done = 0; d < nd && st == PD_OK; d++) {
    if (ctx->attrs->v[0][d] == 0 && ctx->attrs->v[1][d] == 0) continue;
    int64_t outer = 1, inner = 1, nin = o->shape[d], shape[PD_MAX_DIMS];
    memcpy(shape, cur->shape, sizeof(int64_t) * (size_t)nd);
    for (int k = 0; k < d; k++) outer *= shape[k];
    for (int k = d + 1; k < nd; k++) inner *= shape[k];
    shape[d] = nin;
    pd_tensor *dst = ++done == npadded ? pd_tensor_retain(o) : pd_tensor_new(g->dtype, nd, shape);
    if (!dst) {
      st = pd_last_status();
      break;
    }
    if (pdk_pad_grad_dim(g->dtype, pd_tensor_data(cur), pd_tensor_data(dst), outer, cur->shape[d], nin, inner,
                         ctx->attrs->v[0][d], (int)ctx->attrs->i[0]))
      st = pd_set_error(PD_ERR_DTYPE, "%s: dtype %s is not supported", ctx->def->name,
                        pd_dtype_name(g->dtype));
    pd_tensor_release(cur);
    cur = dst;
  }
  pd_tensor_release(cur);
  return st;
}

static pd_status pad_grad_backward(const pd_backward_ctx *c) {
  if (!c->needs_grad[0]) return PD_OK;
  c->grad_in[0] = pd_dispatch1(PD_OP_pad, (pd_tensor *[]){c->grad_out[0]}, 1, c->attrs);
  return c->grad_in[0] ? PD_OK : pd_last_status();
}

PD_OPDEF(pad_grad, .n_in = 1, .n_out = 1, .flags = PD_OPF_DIFF | PD_OPF_FLOAT_ONLY | PD_OPF_HALF_VIA_F32,
         .attr_names = "v0:pad_before,v1:pad_after,i0:mode,f0:value", .infer_meta = pad_grad_meta,
         .kernel = {[PD_PLACE_CPU] = pad_grad_kernel}, .backward = pad_grad_backward);

/* ---- F.pad ------------------------------------------------------------------------------ */
static int parse_mode(const char *mode) {
  if (!mode) return PD_PAD_CONSTANT;
  for (int i = 0; i < 4; i++)
    if (strcmp(mode, k_modes[i]) == 0) return i;
  return -1;
}

/* 1 channel first, 2 channel last, 0 not a format of this rank. */
static int format_kind(const char *df, int ndim) {
  static const char *const first[] = {"NCL", "NCHW", "NCDHW"}, *const last[] = {"NLC", "NHWC", "NDHWC"};
  if (ndim < 3 || ndim > 5) return 0;
  if (!df || strcmp(df, first[ndim - 3]) == 0) return 1;
  return strcmp(df, last[ndim - 3]) == 0 ? 2 : 0;
}

pd_tensor *pd_pad(pd_tensor *x, int npad, const int64_t *pad, const char *mode, double value,
                  const char *data_format) {
  if (!x) {
    if (pd_last_status() == PD_OK) pd_set_error(PD_ERR_INVALID, "pad: x is NULL");
    return NULL;
  }
  int m = parse_mode(mode);
  if (m < 0) {
    pd_set_error(PD_ERR_INVALID, "pad: mode '%s' is not one of constant, reflect, replicate, circular", mode);
    return NULL;
  }
  if (npad < 0 || (npad > 0 && !pad)) {
    pd_set_error(PD_ERR_INVALID, "pad: invalid pad list (npad %d)", npad);
    return NULL;
  }
  int nd = x->ndim;
  pd_attrs a = {.i = {m}, .f = {m == PD_PAD_CONSTANT ? value : 0.0}, .nv = {nd, nd}};
  if (m == PD_PAD_CONSTANT && npad == 2 * nd) {
    for (int d = 0; d < nd; d++) {
      a.v[0][d] = pad[2 * d];
      a.v[1][d] = pad[2 * d + 1];
    }
    return pd_dispatch1(PD_OP_pad, &x, 1, &a);
  }
  if (nd < 3 || nd > 5) {
    pd_set_error(
        PD_ERR_SHAPE,
        "pad: x of shape %s must be 3-D, 4-D or 5-D (or, in constant mode, pad must have 2 * rank = %d "
        "entries, got %d)",
        PD_SHAPE_STR(x), 2 * nd, npad);
    return NULL;
  }
  int kind = format_kind(data_format, nd);
  if (!kind) {
    static const char *const ok[] = {"NCL or NLC", "NCHW or NHWC", "NCDHW or NDHWC"};
    pd_set_error(PD_ERR_INVALID, "pad: data_format '%s' does not fit a %d-D x (expected %s)", data_format, nd,
                 ok[nd - 3]);
    return NULL;
  }
  int nsp = nd - 2;
  if (npad != 2 * nsp) {
    pd_set_error(PD_ERR_INVALID,
                 "pad: pad has %d entries; a %d-D x takes %d ([left, right%s]) or, in constant mode, %d",
                 npad, nd, 2 * nsp,
                 nsp == 1   ? ""
                 : nsp == 2 ? ", top, bottom"
                            : ", top, bottom, front, back",
                 2 * nd);
    return NULL;
  }
  /* pad[0:2] is the last spatial dim, pad[2:4] the one before, ... */
  int last_sp = kind == 1 ? nd - 1 : nd - 2;
  for (int k = 0; k < nsp; k++) {
    a.v[0][last_sp - k] = pad[2 * k];
    a.v[1][last_sp - k] = pad[2 * k + 1];
  }
  return pd_dispatch1(PD_OP_pad, &x, 1, &a);
}
