/* Internal gather/scatter along one axis with int64 indices, used by the
 * gradients of topk and sort (not in the public headers):
 *   take_along(x, idx; axis)           out[.., j, ..] = x[.., idx[.., j, ..], ..]
 *   scatter_along(src, idx; axis, shape) out = zeros(shape); out[.., idx[.., j, ..], ..] += src[.., j, ..]
 * Each is the other's gradient. Every index is checked. */
#include <omp.h>
#include <string.h>

#include "../../kernels/cpu/parallel.h"
#include "paddlec/ops.h"
#include "reduction_util.h"

#define GRAIN 32768

/* idx matches `shape` on every dim but axis; names the op and both shapes. */
static pd_status check_idx(const char *op, const pd_tensor *idx, int nd, const int64_t *shape, int64_t axis,
                           int *ax) {
  if (idx->dtype != PD_INT64)
    return pd_set_error(PD_ERR_DTYPE, "%s: indices must be int64, got %s", op, pd_dtype_name(idx->dtype));
  pd_status st = pd_norm_axis(op, axis, nd, ax);
  if (st != PD_OK) return st;
  char b[160];
  if (idx->ndim != nd)
    return pd_set_error(PD_ERR_SHAPE, "%s: indices of shape %s must have the rank of %s", op,
                        PD_SHAPE_STR(idx), pd_shape_str(nd, shape, b, sizeof b));
  for (int d = 0; d < nd; d++)
    if (d != *ax && idx->shape[d] != shape[d])
      return pd_set_error(PD_ERR_SHAPE, "%s: indices of shape %s do not match %s at dim %d", op,
                          PD_SHAPE_STR(idx), pd_shape_str(nd, shape, b, sizeof b), d);
  return PD_OK;
}

/* every index in [0, n) */
static pd_status check_range(const char *op, const int64_t *ix, int64_t count, int64_t n) {
  for (int64_t i = 0; i < count; i++)
    if (ix[i] < 0 || ix[i] >= n)
      return pd_set_error(PD_ERR_INDEX, "%s: index %lld (element %lld of indices) is out of range [0, %lld)",
                          op, (long long)ix[i], (long long)i, (long long)n);
  return PD_OK;
}

/* ---- take_along --------------------------------------------------------------- */
static pd_status take_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                           pd_meta *out, int *n_out) {
  (void)n_in;
  int ax;
  pd_status st = check_idx(def->name, in[1], in[0]->ndim, in[0]->shape, a->i[0], &ax);
  pd_meta_of(in[1], out);
  out->dtype = in[0]->dtype;
  *n_out = 1;
  return st;
}

#define TAKE_LOOP(T)                                                           \
  do {                                                                         \
    const T *xs = (const T *)xd;                                               \
    T *os = (T *)od;                                                           \
    PD_OMP_FOR_IF(                                                             \
        nt > 1, for (int64_t o = 0; o < outer; o++),                           \
        for (int64_t j = 0; j < ni; j++) for (int64_t k = 0; k < inner; k++) { \
          int64_t p = (o * ni + j) * inner + k;                                \
          os[p] = xs[(o * nx + ix[p]) * inner + k];                            \
        });                                                                    \
  } while (0)

static pd_status take_kernel(const pd_kernel_ctx *ctx) {
  int ax;
  pd_status st =
      check_idx(ctx->def->name, ctx->in[1], ctx->in[0]->ndim, ctx->in[0]->shape, ctx->attrs->i[0], &ax);
  if (st != PD_OK) return st;
  pd_tensor *xc = pd_kernel_contiguous(ctx->in[0]), *ic = xc ? pd_kernel_contiguous(ctx->in[1]) : NULL;
  if (!ic) {
    pd_tensor_release(xc);
    return pd_last_status();
  }
  int64_t outer, nx, inner, o2, ni, i2;
  pd_axis_split(xc->ndim, xc->shape, ax, &outer, &nx, &inner);
  pd_axis_split(ic->ndim, ic->shape, ax, &o2, &ni, &i2);
  const int64_t *ix = pd_tensor_data(ic);
  st = check_range(ctx->def->name, ix, ic->numel, nx);
  if (st == PD_OK && ctx->out[0]->numel > 0) {
    const char *xd = pd_tensor_data(xc);
    char *od = pd_tensor_data(ctx->out[0]);
    int nt = ctx->out[0]->numel < GRAIN ? 1 : pd_loop_threads();
    switch (pd_dtype_size(xc->dtype)) {
      case 1:
        TAKE_LOOP(uint8_t);
        break;
      case 2:
        TAKE_LOOP(uint16_t);
        break;
      case 4:
        TAKE_LOOP(uint32_t);
        break;
      default:
        TAKE_LOOP(uint64_t);
        break;
    }
  }
  pd_tensor_release(xc);
  pd_tensor_release(ic);
  return st;
}

static pd_status take_backward(const pd_backward_ctx *c) {
  if (!c->needs_grad[0]) return PD_OK;
  c->grad_in[0] =
      pd_scatter_along(c->grad_out[0], c->inputs[1], c->attrs->i[0], c->in_meta[0].ndim, c->in_meta[0].shape);
  return c->grad_in[0] ? PD_OK : pd_last_status();
}

PD_OPDEF(take_along, .n_in = 2, .n_out = 1, .flags = PD_OPF_DIFF | PD_OPF_SAVE_IN, .attr_names = "i0:axis",
         .infer_meta = take_meta, .kernel = {[PD_PLACE_CPU] = take_kernel}, .backward = take_backward);

pd_tensor *pd_take_along(pd_tensor *x, pd_tensor *idx, int64_t axis) {
  pd_tensor *in[2] = {x, idx};
  pd_attrs a = {.i = {axis}};
  return pd_dispatch1(PD_OP_take_along, in, 2, &a);
}

/* ---- scatter_along ------------------------------------------------------------- */
static pd_status scatter_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                              pd_meta *out, int *n_out) {
  (void)n_in;
  *n_out = 1;
  if (a->nv[0] < 0 || a->nv[0] > PD_MAX_DIMS)
    return pd_set_error(PD_ERR_INVALID, "%s: rank %d is out of range", def->name, a->nv[0]);
  for (int d = 0; d < a->nv[0]; d++)
    if (a->v[0][d] < 0)
      return pd_set_error(PD_ERR_SHAPE, "%s: shape[%d] is %lld", def->name, d, (long long)a->v[0][d]);
  int ax;
  pd_status st = check_idx(def->name, in[1], a->nv[0], a->v[0], a->i[0], &ax);
  if (st != PD_OK) return st;
  if (in[0]->ndim != in[1]->ndim || !pd_shapes_agree(in[0]->ndim, in[0]->shape, in[1]->shape)) {
    char b[160];
    return pd_set_error(PD_ERR_SHAPE, "%s: src of shape %s must have the shape of indices %s", def->name,
                        PD_SHAPE_STR(in[0]), pd_shape_str(in[1]->ndim, in[1]->shape, b, sizeof b));
  }
  out->dtype = in[0]->dtype;
  out->ndim = a->nv[0];
  memcpy(out->shape, a->v[0], sizeof(int64_t) * (size_t)a->nv[0]);
  return PD_OK;
}

#define SCATTER_LOOP(T)                                                                            \
  do {                                                                                             \
    const T *ss = (const T *)sd;                                                                   \
    T *os = (T *)od;                                                                               \
    PD_OMP_FOR_IF(                                                                                 \
        nt > 1, for (int64_t l = 0; l < outer * inner; l++), int64_t o = l / inner, k = l % inner; \
        for (int64_t j = 0; j < ni; j++) {                                                         \
          int64_t p = (o * ni + j) * inner + k;                                                    \
          os[(o * nx + ix[p]) * inner + k] += ss[p];                                               \
        });                                                                                        \
  } while (0)

static pd_status scatter_kernel(const pd_kernel_ctx *ctx) {
  pd_tensor *o = ctx->out[0];
  int ax;
  pd_status st =
      check_idx(ctx->def->name, ctx->in[1], ctx->attrs->nv[0], ctx->attrs->v[0], ctx->attrs->i[0], &ax);
  if (st != PD_OK) return st;
  if (!pd_dtype_is_floating(o->dtype) && o->dtype != PD_INT64 && o->dtype != PD_INT32)
    return pd_set_error(PD_ERR_DTYPE, "%s: dtype %s is not supported", ctx->def->name,
                        pd_dtype_name(o->dtype));
  memset(pd_tensor_data(o), 0, (size_t)o->numel * pd_dtype_size(o->dtype));
  pd_tensor *sc = pd_kernel_contiguous(ctx->in[0]), *ic = sc ? pd_kernel_contiguous(ctx->in[1]) : NULL;
  if (!ic) {
    pd_tensor_release(sc);
    return pd_last_status();
  }
  int64_t outer, nx, inner, o2, ni, i2;
  pd_axis_split(o->ndim, o->shape, ax, &outer, &nx, &inner);
  pd_axis_split(ic->ndim, ic->shape, ax, &o2, &ni, &i2);
  const int64_t *ix = pd_tensor_data(ic);
  st = check_range(ctx->def->name, ix, ic->numel, nx);
  if (st == PD_OK && ic->numel > 0) {
    const char *sd = pd_tensor_data(sc);
    char *od = pd_tensor_data(o);
    int nt = ic->numel < GRAIN ? 1 : pd_loop_threads();
    switch (o->dtype) {
      case PD_FLOAT32:
        SCATTER_LOOP(float);
        break;
      case PD_FLOAT64:
        SCATTER_LOOP(double);
        break;
      case PD_INT32:
        SCATTER_LOOP(int32_t);
        break;
      case PD_INT64:
        SCATTER_LOOP(int64_t);
        break;
      default:
        break;
    }
  }
  pd_tensor_release(sc);
  pd_tensor_release(ic);
  return st;
}

static pd_status scatter_backward(const pd_backward_ctx *c) {
  if (!c->needs_grad[0]) return PD_OK;
  c->grad_in[0] = pd_take_along(c->grad_out[0], c->inputs[1], c->attrs->i[0]);
  return c->grad_in[0] ? PD_OK : pd_last_status();
}

PD_OPDEF(scatter_along, .n_in = 2, .n_out = 1, .flags = PD_OPF_DIFF | PD_OPF_SAVE_IN | PD_OPF_HALF_VIA_F32,
         .attr_names = "i0:axis,v0:shape", .infer_meta = scatter_meta,
         .kernel = {[PD_PLACE_CPU] = scatter_kernel}, .backward = scatter_backward);

pd_tensor *pd_scatter_along(pd_tensor *src, pd_tensor *idx, int64_t axis, int ndim, const int64_t *shape) {
  if (ndim < 0 || ndim > PD_MAX_DIMS) {
    pd_set_error(PD_ERR_INVALID, "scatter_along: rank %d is out of range", ndim);
    return NULL;
  }
  pd_tensor *in[2] = {src, idx};
  pd_attrs a = {.i = {axis}, .nv = {ndim}};
  if (ndim) memcpy(a.v[0], shape, sizeof(int64_t) * (size_t)ndim);
  return pd_dispatch1(PD_OP_scatter_along, in, 2, &a);
}
