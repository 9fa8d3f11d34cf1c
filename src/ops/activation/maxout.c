/* maxout(x, groups, axis) (paddle.nn.functional.maxout): x is 4-D, NCHW
 * (axis 1) or NHWC (axis 3 or -1); output channel c is the maximum of input
 * channels c * groups .. c * groups + groups - 1. The backward is one
 * registered op, maxout_grad(x, out, g), which routes each gradient to the
 * first input equal to the output (as Paddle's); it is first order only. */
#include <string.h>

#include "../../kernels/cpu/maxout.h"
#include "../elementwise/elementwise_util.h"

/* Checks as Paddle's MaxOutInferMeta; fills the geometry. */
static pd_status maxout_geom(const pd_op_def *def, const pd_tensor *x, const pd_attrs *a, pd_maxout_geom *g,
                             int *ax) {
  int64_t groups = a->i[0], axis = a->i[1];
  if (groups <= 1)
    return pd_set_error(PD_ERR_INVALID, "%s: groups (%lld) must be greater than 1", def->name,
                        (long long)groups);
  if (axis != 1 && axis != 3 && axis != -1)
    return pd_set_error(PD_ERR_INVALID, "%s: axis %lld is not supported; it must be 1 (NCHW), 3 or -1 (NHWC)",
                        def->name, (long long)axis);
  if (x->ndim != 4)
    return pd_set_error(PD_ERR_SHAPE, "%s: x must be 4-D, got shape %s", def->name, PD_SHAPE_STR(x));
  *ax = axis == 1 ? 1 : 3;
  int64_t ch = x->shape[*ax];
  if (ch % groups != 0)
    return pd_set_error(PD_ERR_SHAPE,
                        "%s: the %lld channels of x (shape %s, axis %lld) are not divisible by groups %lld",
                        def->name, (long long)ch, PD_SHAPE_STR(x), (long long)axis, (long long)groups);
  g->groups = groups;
  g->cout = ch / groups;
  g->outer = 1;
  g->inner = 1;
  for (int d = 0; d < *ax; d++) g->outer *= x->shape[d];
  for (int d = *ax + 1; d < 4; d++) g->inner *= x->shape[d];
  return PD_OK;
}

static pd_status maxout_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                             pd_meta *out, int *n_out) {
  (void)n_in;
  pd_maxout_geom g = {0, 0, 0, 0};
  int ax = 1;
  pd_status st = maxout_geom(def, in[0], a, &g, &ax);
  if (st != PD_OK) return st;
  pd_meta_of(in[0], out);
  out->shape[ax] = g.cout;
  *n_out = 1;
  return PD_OK;
}

/* What both kernels check first: the geometry and the dtype. */
static pd_status kernel_geom(const pd_op_def *def, const pd_tensor *x, const pd_attrs *a, pd_maxout_geom *g) {
  int ax = 1;
  pd_status st = maxout_geom(def, x, a, g, &ax);
  if (st == PD_OK && x->dtype != PD_FLOAT32 && x->dtype != PD_FLOAT64)
    st = pd_set_error(PD_ERR_DTYPE, "%s: dtype %s is not supported", def->name, pd_dtype_name(x->dtype));
  return st;
}

static pd_status maxout_kernel(const pd_kernel_ctx *ctx) {
  pd_maxout_geom g = {0, 0, 0, 0};
  pd_status st = kernel_geom(ctx->def, ctx->in[0], ctx->attrs, &g);
  if (st != PD_OK || ctx->out[0]->numel == 0) return st;
  pd_tensor *x = pd_kernel_contiguous(ctx->in[0]);
  if (!x) return pd_last_status();
  if (x->dtype == PD_FLOAT32)
    pdk_maxout_f32(&g, pd_tensor_data(x), pd_tensor_data(ctx->out[0]));
  else
    pdk_maxout_f64(&g, pd_tensor_data(x), pd_tensor_data(ctx->out[0]));
  pd_tensor_release(x);
  return PD_OK;
}

/* maxout_grad(x, out, g) -> dx; attrs as maxout's. */
static pd_status maxout_grad_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                                  pd_meta *out, int *n_out) {
  (void)n_in;
  pd_meta m;
  int n;
  pd_status st = maxout_meta(def, in, 1, a, &m, &n);
  if (st != PD_OK) return st;
  for (int k = 1; k < 3; k++) {
    const pd_tensor *t = in[k];
    if (t->ndim != m.ndim || !pd_shapes_agree(m.ndim, t->shape, m.shape) || t->dtype != in[0]->dtype)
      return pd_set_error(PD_ERR_SHAPE, "%s: %s of shape %s (%s) does not match the output of x %s (%s)",
                          def->name, k == 1 ? "out" : "grad", PD_SHAPE_STR(t), pd_dtype_name(t->dtype),
                          PD_SHAPE_STR(in[0]), pd_dtype_name(in[0]->dtype));
  }
  pd_meta_of(in[0], out);
  *n_out = 1;
  return PD_OK;
}

static pd_status maxout_grad_kernel(const pd_kernel_ctx *ctx) {
  pd_maxout_geom g = {0, 0, 0, 0};
  pd_status st = kernel_geom(ctx->def, ctx->in[0], ctx->attrs, &g);
  if (st != PD_OK || ctx->out[0]->numel == 0) return st;
  pd_tensor *c[3] = {NULL, NULL, NULL};
  for (int k = 0; k < 3; k++)
    if (!(c[k] = pd_kernel_contiguous(ctx->in[k]))) st = pd_last_status();
  if (st == PD_OK) {
    if (ctx->in[0]->dtype == PD_FLOAT32)
      pdk_maxout_grad_f32(&g, pd_tensor_data(c[0]), pd_tensor_data(c[1]), pd_tensor_data(c[2]),
                          pd_tensor_data(ctx->out[0]));
    else
      pdk_maxout_grad_f64(&g, pd_tensor_data(c[0]), pd_tensor_data(c[1]), pd_tensor_data(c[2]),
                          pd_tensor_data(ctx->out[0]));
  }
  for (int k = 0; k < 3; k++) pd_tensor_release(c[k]);
  return st;
}

static pd_status maxout_backward(const pd_backward_ctx *c) {
  if (!c->needs_grad[0]) return PD_OK;
  pd_tensor *in[3] = {c->inputs[0], c->outputs[0], c->grad_out[0]};
  c->grad_in[0] = pd_dispatch1(PD_OP_maxout_grad, in, 3, c->attrs);
  return c->grad_in[0] ? PD_OK : pd_last_status();
}

PD_OPDEF(maxout, .n_in = 1, .n_out = 1,
         .flags = PD_OPF_DIFF | PD_OPF_FLOAT_ONLY | PD_OPF_HALF_VIA_F32 | PD_OPF_SAVE_IN | PD_OPF_SAVE_OUT,
         .attr_names = "i0:groups,i1:axis", .infer_meta = maxout_meta,
         .kernel = {[PD_PLACE_CPU] = maxout_kernel}, .backward = maxout_backward, .flops = pd_flops_per_elem);
PD_OPDEF(maxout_grad, .n_in = 3, .n_out = 1, .flags = PD_OPF_FLOAT_ONLY | PD_OPF_HALF_VIA_F32,
         .attr_names = "i0:groups,i1:axis", .infer_meta = maxout_grad_meta,
         .kernel = {[PD_PLACE_CPU] = maxout_grad_kernel});

pd_tensor *pd_maxout(pd_tensor *x, int groups, int axis) {
  pd_attrs a = {.i = {groups, axis}};
  return pd_dispatch1(PD_OP_maxout, &x, 1, &a);
}
