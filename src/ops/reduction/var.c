/* var / std over axes, two passes (mean, then squared deviations). As
 * Paddle: the divisor is N - 1 when unbiased (1 when N <= 1), else N.
 * Integer inputs compute in float32. */
#include <stdlib.h>

#include "paddlec/ops.h"
#include "reduction_util.h"

/* attrs: v0 axes, i0 keepdim, i1 unbiased */
static double divisor(int64_t n, bool unbiased) {
  if (!unbiased) return (double)n;
  return n > 1 ? (double)(n - 1) : 1.0;
}

static pd_status var_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                          pd_meta *out, int *n_out) {
  (void)n_in;
  bool mask[PD_MAX_DIMS];
  *n_out = 1;
  return pd_reduce_meta(def, in[0], a, out, mask);
}

static pd_status var_run(const pd_op_def *def, pd_tensor *x, const pd_attrs *a, pd_tensor *out, bool is_std) {
  pd_meta m;
  bool mask[PD_MAX_DIMS];
  pd_status st = pd_reduce_meta(def, x, a, &m, mask);
  if (st != PD_OK) return st;
  int64_t n = pd_reduce_count(x->ndim, x->shape, mask), n_out = out->numel;
  double *c = malloc(sizeof(double) * (size_t)(n_out > 0 ? n_out : 1));
  if (!c) return pd_set_error(PD_ERR_MEMORY, "%s: out of memory", def->name);
  pd_reduce_geom g;
  pdk_reduce_geom_init(&g, x->ndim, x->shape, x->strides, mask);
  pd_reduce_spec s1 = {.kind = PD_RK_SUM, .post = PD_RP_DIV, .d = n > 0 ? (double)n : 1.0};
  int r = pdk_reduce_run(&g, &s1, pd_tensor_data(x), x->dtype, c, PD_FLOAT64);
  if (!r) {
    pd_reduce_spec s2 = {.kind = PD_RK_SUMSQ_DEV,
                         .post = is_std ? PD_RP_SQRT_DIV : PD_RP_DIV,
                         .d = divisor(n, a->i[1]),
                         .center = c};
    r = pdk_reduce_run(&g, &s2, pd_tensor_data(x), x->dtype, pd_tensor_data(out), out->dtype);
  }
  free(c);
  if (r == 2) return pd_set_error(PD_ERR_MEMORY, "%s: out of memory", def->name);
  if (r)
    return pd_set_error(PD_ERR_DTYPE, "%s: dtype %s is not supported", def->name, pd_dtype_name(x->dtype));
  return PD_OK;
}

static pd_status var_kernel(const pd_kernel_ctx *ctx) {
  return var_run(ctx->def, ctx->in[0], ctx->attrs, ctx->out[0], false);
}

static pd_status std_kernel(const pd_kernel_ctx *ctx) {
  return var_run(ctx->def, ctx->in[0], ctx->attrs, ctx->out[0], true);
}

/* x - mean(x) over the axes (keepdim), differentiable */
static pd_tensor *centered(const pd_backward_ctx *c) {
  pd_tensor *x = c->inputs[0];
  pd_attrs a = *c->attrs;
  a.i[0] = 1;
  a.i[1] = 0;
  pd_tensor *mu = pd_dispatch1(PD_OP_mean, &x, 1, &a);
  pd_tensor *d = mu ? pd_subtract(x, mu) : NULL;
  pd_tensor_release(mu);
  return d;
}

/* var: dx = dy * 2 (x - mean) / div; std (is_std): dx = dy / std * (x - mean) / div. */
static pd_status spread_backward(const pd_backward_ctx *c, bool is_std) {
  if (!c->needs_grad[0]) return PD_OK;
  const pd_meta *xm = &c->in_meta[0];
  bool mask[PD_MAX_DIMS];
  pd_reduce_mask(xm->ndim, c->attrs, mask);
  double div = divisor(pd_reduce_count(xm->ndim, xm->shape, mask), c->attrs->i[1]);
  pd_tensor *d = centered(c);
  pd_tensor *g = d ? pd_reduce_unsqueeze(c->grad_out[0], xm, mask) : NULL;
  if (g && is_std) { /* dy / std */
    pd_tensor *s = pd_reduce_unsqueeze(c->outputs[0], xm, mask);
    pd_tensor *q = s ? pd_divide(g, s) : NULL;
    pd_tensor_release(s);
    pd_tensor_release(g);
    g = q;
  }
  pd_tensor *p = g ? pd_multiply(g, d) : NULL;
  c->grad_in[0] = p ? pd_scale(p, (is_std ? 1.0 : 2.0) / div, 0.0, true) : NULL;
  pd_tensor_release(d);
  pd_tensor_release(g);
  pd_tensor_release(p);
  return c->grad_in[0] ? PD_OK : pd_last_status();
}
static pd_status var_backward(const pd_backward_ctx *c) { return spread_backward(c, false); }
static pd_status std_backward(const pd_backward_ctx *c) { return spread_backward(c, true); }

#define VAR_DEF(nm, extra)                                                                            \
  PD_OPDEF(nm, .n_in = 1, .n_out = 1,                                                                 \
           .flags = PD_OPF_DIFF | PD_OPF_FLOAT_ONLY | PD_OPF_HALF_VIA_F32 | PD_OPF_SAVE_IN | (extra), \
           .attr_names = "v0:axis,i0:keepdim,i1:unbiased", .infer_meta = var_meta,                    \
           .kernel = {[PD_PLACE_CPU] = nm##_kernel}, .backward = nm##_backward, .flops = pd_flops_reduce);
VAR_DEF(var, 0)
VAR_DEF(std, PD_OPF_SAVE_OUT)

static pd_tensor *var_call(pd_op_id id, const char *name, pd_tensor *x, const int64_t *axis, int naxis,
                           bool unbiased, bool keepdim) {
  pd_attrs extra = {.i = {0, unbiased}};
  return pd_reduce_call(id, name, x, axis, naxis, keepdim, &extra);
}

pd_tensor *pd_var(pd_tensor *x, const int64_t *axis, int naxis, bool unbiased, bool keepdim) {
  return var_call(PD_OP_var, "var", x, axis, naxis, unbiased, keepdim);
}
pd_tensor *pd_std(pd_tensor *x, const int64_t *axis, int naxis, bool unbiased, bool keepdim) {
  return var_call(PD_OP_std, "std", x, axis, naxis, unbiased, keepdim);
}
