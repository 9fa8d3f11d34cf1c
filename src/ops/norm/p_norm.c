/* norm: the p-norm of the elements over the given axes taken as one vector
 * (Paddle's linalg.norm for p = 'fro' (2), 0, 1, 2, inf, -inf and any other
 * p; a 2-axis numeric p flattens the matrix as Paddle 2.x does). The
 * gradient follows Paddle's p_norm_grad, including its eps of 1e-12. */
#include <math.h>

#include "paddlec/ops.h"
#include "../reduction/reduction_util.h"

#define NORM_EPS 1e-12

/* attrs: v0 axes, i0 keepdim, f0 p */
static pd_status norm_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                           pd_meta *out, int *n_out) {
  (void)n_in;
  bool mask[PD_MAX_DIMS];
  *n_out = 1;
  if (isnan(a->f[0])) return pd_set_error(PD_ERR_INVALID, "%s: p is NaN", def->name);
  pd_status st = pd_reduce_meta(def, in[0], a, out, mask);
  if (st == PD_OK && isinf(a->f[0])) st = pd_reduce_check_nonempty(def, in[0], mask);
  return st;
}

static pd_status norm_kernel(const pd_kernel_ctx *ctx) {
  double p = ctx->attrs->f[0];
  pd_reduce_spec s = {.kind = PD_RK_ABS_POW, .post = PD_RP_ROOT, .p = p};
  if (p == 2.0)
    s = (pd_reduce_spec){.kind = PD_RK_SUMSQ, .post = PD_RP_SQRT_DIV, .d = 1.0};
  else if (p == 1.0)
    s = (pd_reduce_spec){.kind = PD_RK_ABS_SUM};
  else if (p == INFINITY)
    s = (pd_reduce_spec){.kind = PD_RK_ABS_MAX};
  else if (p == -INFINITY)
    s = (pd_reduce_spec){.kind = PD_RK_ABS_MIN};
  else if (p == 0.0)
    s = (pd_reduce_spec){.kind = PD_RK_COUNT_NZ};
  return pd_reduce_kernel_run(ctx, &s);
}

static pd_status norm_backward(const pd_backward_ctx *c) {
  if (!c->needs_grad[0]) return PD_OK;
  const pd_meta *xm = &c->in_meta[0];
  bool mask[PD_MAX_DIMS];
  pd_reduce_mask(xm->ndim, c->attrs, mask);
  double p = c->attrs->f[0];
  pd_tensor *x = c->inputs[0], *out = c->outputs[0];
  pd_tensor *g = pd_reduce_unsqueeze(c->grad_out[0], xm, mask);
  pd_tensor *w = NULL; /* dx = g * w */
  if (!g) return pd_last_status();
  if (p == 0.0) {
    pd_tensor *e = pd_expand(g, xm->ndim, xm->shape);
    c->grad_in[0] = e ? pd_scale(e, 0.0, 0.0, true) : NULL;
    pd_tensor_release(e);
    pd_tensor_release(g);
    return c->grad_in[0] ? PD_OK : pd_last_status();
  }
  if (isinf(p) && x->dist_attr) { /* with ops, which keep the shards' placements */
    pd_tensor *ok = pd_reduce_unsqueeze(out, xm, mask), *ab = ok ? pd_abs(x) : NULL;
    pd_tensor *eq = ab ? pd_equal(ab, ok) : NULL, *m = eq ? pd_cast(eq, x->dtype) : NULL;
    pd_tensor *sg = m ? pd_sign(x) : NULL;
    w = sg ? pd_multiply(sg, m) : NULL;
    pd_tensor *tmp[] = {ok, ab, eq, m, sg};
    for (int i = 0; i < 5; i++) pd_tensor_release(tmp[i]);
  } else if (isinf(p)) {
    w = pd_reduce_absmax_sign(x, out, mask); /* sign(x) where |x| == norm */
  } else if (p == 2.0) {
    pd_tensor *ok = pd_reduce_unsqueeze(out, xm, mask);
    pd_tensor *den = ok ? pd_scale(ok, 1.0, NORM_EPS, true) : NULL;
    w = den ? pd_divide(x, den) : NULL;
    pd_tensor_release(ok);
    pd_tensor_release(den);
  } else {
    /* sign(x) |x|^(p-1) / (norm^(p-1) + eps) */
    pd_tensor *sg = pd_reduce_sign(x);
    pd_tensor *ax = sg ? pd_abs_pow(x, p - 1.0) : NULL;
    pd_tensor *num = ax ? pd_multiply(ax, sg) : NULL;
    pd_tensor *ok = num ? pd_reduce_unsqueeze(out, xm, mask) : NULL;
    pd_tensor *on = ok ? pd_abs_pow(ok, p - 1.0) : NULL;
    pd_tensor *den = on ? pd_scale(on, 1.0, NORM_EPS, true) : NULL;
    w = den ? pd_divide(num, den) : NULL;
    pd_tensor_release(sg);
    pd_tensor_release(ax);
    pd_tensor_release(num);
    pd_tensor_release(ok);
    pd_tensor_release(on);
    pd_tensor_release(den);
  }
  c->grad_in[0] = w ? pd_multiply(g, w) : NULL;
  pd_tensor_release(g);
  pd_tensor_release(w);
  return c->grad_in[0] ? PD_OK : pd_last_status();
}

PD_OPDEF(norm, .n_in = 1, .n_out = 1,
         .flags = PD_OPF_DIFF | PD_OPF_FLOAT_ONLY | PD_OPF_HALF_VIA_F32 | PD_OPF_SAVE_IN | PD_OPF_SAVE_OUT,
         .attr_names = "v0:axis,i0:keepdim,f0:p", .infer_meta = norm_meta,
         .kernel = {[PD_PLACE_CPU] = norm_kernel}, .backward = norm_backward, .flops = pd_flops_reduce);

pd_tensor *pd_norm(pd_tensor *x, double p, const int64_t *axis, int naxis, bool keepdim) {
  pd_attrs extra = {.f = {p}};
  return pd_reduce_call(PD_OP_norm, "norm", x, axis, naxis, keepdim, &extra);
}
