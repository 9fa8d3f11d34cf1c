/* layer_norm and rms_norm over the trailing dims of x, with their fused
 * grad ops layer_norm_grad / rms_norm_grad (kernels/cpu/norm_row.c). The
 * grad ops recompute the row statistics from x, so they are functions of
 * (x, weight, dy) only, and are themselves differentiable (their backward,
 * norm/norm_util.c, uses public ops).
 *
 * Attrs: i0 begin_norm_axis, i1 has_weight, i2 has_bias, f0 epsilon.
 * Inputs: x, [weight], [bias]; grad ops: x, [weight], dy -> dx, [dw], [db]
 * with dw, db flat (the forward's backward reshapes them). */
#include <string.h>

#include "../../kernels/cpu/norm.h"
#include "norm_util.h"
#include "paddlec/norm.h"

static bool is_rms(const pd_op_def *def) {
  return def == &pd_opdef_rms_norm || def == &pd_opdef_rms_norm_grad;
}

/* Rows and row length of x split at begin_norm_axis. */
static void row_geom(const pd_tensor *x, int k, int64_t *rows, int64_t *n) {
  *rows = 1;
  *n = 1;
  for (int d = 0; d < x->ndim; d++) *(d < k ? rows : n) *= x->shape[d];
}

/* Checks the axis and an affine parameter against x's normalized dims. */
static pd_status check_param(const pd_op_def *def, const pd_tensor *x, int k, const pd_tensor *p,
                             const char *what) {
  int64_t rows, n;
  row_geom(x, k, &rows, &n);
  bool ok = p->numel == n;
  if (ok && p->ndim != 1) ok = p->ndim == x->ndim - k && pd_shapes_agree(p->ndim, p->shape, x->shape + k);
  if (!ok) {
    char b[160];
    return pd_set_error(PD_ERR_SHAPE,
                        "%s: %s of shape %s does not match the normalized shape %s of x (shape %s); "
                        "expected %lld elements",
                        def->name, what, PD_SHAPE_STR(p),
                        pd_shape_str(x->ndim - k, x->shape + k, b, sizeof b), PD_SHAPE_STR(x), (long long)n);
  }
  return PD_OK;
}

static pd_status check_axis(const pd_op_def *def, const pd_tensor *x, int64_t k) {
  if (k < 0 || k >= x->ndim || x->ndim == 0)
    return pd_set_error(
        PD_ERR_INDEX, "%s: begin_norm_axis %lld is out of range for x of shape %s (expected 0 <= axis < %d)",
        def->name, (long long)k, PD_SHAPE_STR(x), x->ndim);
  return PD_OK;
}

static pd_status norm_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                           pd_meta *out, int *n_out) {
  if (is_rms(def) && a->i[PD_NORM_I_HAS_B])
    return pd_set_error(PD_ERR_INVALID, "%s: rms_norm takes no bias", def->name);
  pd_status st = pd_norm_check_arity(def, n_in, 0, a);
  if (st != PD_OK) return st;
  const char *names[3] = {"x", a->i[PD_NORM_I_HAS_W] ? "weight" : "bias", "bias"};
  if ((st = pd_norm_check_dtypes(def, in, n_in, names)) != PD_OK) return st;
  int k = (int)a->i[PD_NORM_I_AXIS];
  if ((st = check_axis(def, in[0], a->i[PD_NORM_I_AXIS])) != PD_OK) return st;
  for (int i = 1; i < n_in; i++)
    if ((st = check_param(def, in[0], k, in[i], names[i])) != PD_OK) return st;
  pd_meta_of(in[0], out);
  *n_out = 1;
  return PD_OK;
}

static pd_status norm_kernel(const pd_kernel_ctx *ctx) {
  pd_tensor *c[PD_NORM_MAX_IN];
  pd_status st = pd_norm_contiguous_inputs(ctx, c);
  if (st == PD_OK) {
    int64_t rows, n;
    row_geom(ctx->in[0], (int)ctx->attrs->i[PD_NORM_I_AXIS], &rows, &n);
    bool centered = !is_rms(ctx->def);
    void *w, *b;
    pd_norm_affine_data(ctx->attrs, c, 1, &w, &b);
    double eps = ctx->attrs->f[PD_NORM_F_EPS];
    if (ctx->in[0]->dtype == PD_FLOAT32)
      pdk_row_norm_fwd_f32(pd_tensor_data(c[0]), w, b, pd_tensor_data(ctx->out[0]), rows, n, eps, centered);
    else
      pdk_row_norm_fwd_f64(pd_tensor_data(c[0]), w, b, pd_tensor_data(ctx->out[0]), rows, n, eps, centered);
  }
  pd_norm_release_inputs(c);
  return st;
}

static pd_status norm_backward(const pd_backward_ctx *c, pd_op_id gid) {
  return pd_norm_backward_via(c, gid, c->attrs);
}

/* ---- grad ops ------------------------------------------------------------------------------------ */

static pd_status grad_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                           pd_meta *out, int *n_out) {
  if (is_rms(def) && a->i[PD_NORM_I_HAS_B])
    return pd_set_error(PD_ERR_INVALID, "%s: rms_norm takes no bias", def->name);
  pd_status st = pd_norm_grad_check_inputs(def, in, n_in, a);
  if (st != PD_OK) return st;
  pd_tensor *x = in[0];
  if ((st = check_axis(def, x, a->i[PD_NORM_I_AXIS])) != PD_OK) return st;
  int k = (int)a->i[PD_NORM_I_AXIS];
  if (a->i[PD_NORM_I_HAS_W] && (st = check_param(def, x, k, in[1], "weight")) != PD_OK) return st;
  int64_t rows, n;
  row_geom(x, k, &rows, &n);
  return pd_norm_grad_metas(def, in, n_in, a, n, out, n_out);
}

static pd_status grad_kernel(const pd_kernel_ctx *ctx) {
  pd_tensor *c[PD_NORM_MAX_IN];
  pd_status st = pd_norm_contiguous_inputs(ctx, c);
  if (st == PD_OK) {
    int64_t rows, n;
    row_geom(ctx->in[0], (int)ctx->attrs->i[PD_NORM_I_AXIS], &rows, &n);
    void *w, *dw, *db, *dy = pd_tensor_data(c[ctx->n_in - 1]);
    pd_norm_affine_data(ctx->attrs, c, 1, &w, NULL);
    pd_norm_affine_data(ctx->attrs, ctx->out, 1, &dw, &db);
    double eps = ctx->attrs->f[PD_NORM_F_EPS];
    int bad = ctx->in[0]->dtype == PD_FLOAT32
                  ? pdk_row_norm_bwd_f32(pd_tensor_data(c[0]), w, dy, pd_tensor_data(ctx->out[0]), dw, db,
                                         rows, n, eps, !is_rms(ctx->def))
                  : pdk_row_norm_bwd_f64(pd_tensor_data(c[0]), w, dy, pd_tensor_data(ctx->out[0]), dw, db,
                                         rows, n, eps, !is_rms(ctx->def));
    if (bad)
      st = pd_set_error(PD_ERR_MEMORY, "%s: out of memory for %lld x %lld partial sums", ctx->def->name,
                        (long long)rows, (long long)n);
  }
  pd_norm_release_inputs(c);
  return st;
}

static pd_status grad_backward(const pd_backward_ctx *c, bool centered) {
  const pd_attrs *a = c->attrs;
  const pd_meta *x = &c->in_meta[0];
  int k = (int)a->i[PD_NORM_I_AXIS];
  int64_t rows = 1, n = 1;
  for (int d = 0; d < x->ndim; d++) *(d < k ? &rows : &n) *= x->shape[d];
  pd_norm_view v = {.nd = 2,
                    .shape = {rows, n},
                    .naxes = 1,
                    .axes = {1},
                    .wshape = {1, n},
                    .count = n,
                    .centered = centered,
                    .eps = a->f[PD_NORM_F_EPS]};
  return pd_norm_grad_backward(c, &v, a->i[PD_NORM_I_HAS_W], a->i[PD_NORM_I_HAS_B]);
}

static pd_status layer_norm_backward(const pd_backward_ctx *c) {
  return norm_backward(c, PD_OP_layer_norm_grad);
}
static pd_status rms_norm_backward(const pd_backward_ctx *c) { return norm_backward(c, PD_OP_rms_norm_grad); }
static pd_status layer_norm_grad_backward(const pd_backward_ctx *c) { return grad_backward(c, true); }
static pd_status rms_norm_grad_backward(const pd_backward_ctx *c) { return grad_backward(c, false); }

static double norm_flops(pd_tensor *const *in, int n_in, const pd_attrs *a, const pd_meta *out, int n_out) {
  (void)n_in;
  (void)a;
  (void)out;
  (void)n_out;
  return 8.0 * (double)in[0]->numel;
}

static double grad_flops(pd_tensor *const *in, int n_in, const pd_attrs *a, const pd_meta *out, int n_out) {
  (void)n_in;
  (void)a;
  (void)out;
  (void)n_out;
  return 16.0 * (double)in[0]->numel;
}

#define NORM_DEF(opname, gradname)                                                                           \
  PD_OPDEF(opname, .n_in = -1, .n_out = 1,                                                                   \
           .flags = PD_OPF_DIFF | PD_OPF_HALF_VIA_F32 | PD_OPF_SAVE_IN | PD_OPF_RECOMPUTE,                   \
           .attr_names =                                                                                     \
               "i0:begin_norm_axis,i1:has_weight,i2:has_bias,"                                               \
               "f0:epsilon",                                                                                 \
           .infer_meta = norm_meta, .kernel = {[PD_PLACE_CPU] = norm_kernel}, .backward = opname##_backward, \
           .flops = norm_flops);                                                                             \
  PD_OPDEF(gradname, .n_in = -1, .n_out = -1, .flags = PD_OPF_DIFF | PD_OPF_HALF_VIA_F32 | PD_OPF_SAVE_IN,   \
           .attr_names =                                                                                     \
               "i0:begin_norm_axis,i1:has_weight,i2:has_bias,"                                               \
               "f0:epsilon",                                                                                 \
           .infer_meta = grad_meta, .kernel = {[PD_PLACE_CPU] = grad_kernel},                                \
           .backward = gradname##_backward, .flops = grad_flops);
NORM_DEF(layer_norm, layer_norm_grad)
NORM_DEF(rms_norm, rms_norm_grad)

/* ---- public functions ------------------------------------------------------------------------------ */

static pd_tensor *row_norm(pd_op_id id, const char *op, pd_tensor *x, int nshape,
                           const int64_t *normalized_shape, pd_tensor *weight, pd_tensor *bias,
                           double epsilon) {
  if (!x) return pd_norm_null_input(op, "x");
  if (nshape < 1 || nshape > x->ndim || !normalized_shape) {
    pd_set_error(PD_ERR_SHAPE,
                 "%s: normalized_shape has %d dims but x (shape %s) has %d; expected 1 to %d dims", op,
                 nshape, PD_SHAPE_STR(x), x->ndim, x->ndim);
    return NULL;
  }
  int k = x->ndim - nshape;
  if (!pd_shapes_agree(nshape, x->shape + k, normalized_shape)) {
    char b[160];
    pd_set_error(PD_ERR_SHAPE, "%s: normalized_shape %s does not match the trailing dims of x (shape %s)", op,
                 pd_shape_str(nshape, normalized_shape, b, sizeof b), PD_SHAPE_STR(x));
    return NULL;
  }
  pd_attrs a = {.i = {k, weight != NULL, bias != NULL}, .f = {epsilon}};
  pd_tensor *in[3];
  int n = 0;
  in[n++] = x;
  if (weight) in[n++] = weight;
  if (bias) in[n++] = bias;
  return pd_dispatch1(id, in, n, &a);
}

pd_tensor *pd_layer_norm(pd_tensor *x, int nshape, const int64_t *normalized_shape, pd_tensor *weight,
                         pd_tensor *bias, double epsilon) {
  return row_norm(PD_OP_layer_norm, "layer_norm", x, nshape, normalized_shape, weight, bias, epsilon);
}

pd_tensor *pd_rms_norm(pd_tensor *x, int nshape, const int64_t *normalized_shape, pd_tensor *weight,
                       double epsilon) {
  return row_norm(PD_OP_rms_norm, "rms_norm", x, nshape, normalized_shape, weight, NULL, epsilon);
}
