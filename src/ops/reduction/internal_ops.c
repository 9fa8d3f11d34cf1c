/* Internal ops the reduction family's backward functions are built from
 * (not in the public headers): exp_shifted (logsumexp), abs_pow (p-norms)
 * and prod_exclusive (prod). Each is differentiable, so the gradients of
 * logsumexp, norm and prod can themselves be differentiated. */
#include <math.h>
#include <string.h>

#include "../ew_util.h"
#include "paddlec/ops.h"
#include "reduction_util.h"

/* ---- exp_shifted(x, c) = exp(x - c), c broadcast ---------------------------- */
PD_EW_BINARY(exps_f32, float, float, (float)exp((double)x - (double)y))
PD_EW_BINARY(exps_f64, double, double, exp(x - y))
static const pd_ew_fn k_exps[PD_NUM_DTYPES] = PD_EW_TABLE_FLOAT(exps);

static pd_status exps_kernel(const pd_kernel_ctx *ctx) {
  return pd_ew_apply(ctx->def->name, k_exps, ctx->out[0]->dtype, ctx->out[0], ctx->in, ctx->n_in, NULL);
}

static pd_status exps_backward(const pd_backward_ctx *c) {
  pd_tensor *gy = pd_multiply(c->grad_out[0], c->outputs[0]);
  if (!gy) return pd_last_status();
  if (c->needs_grad[0]) c->grad_in[0] = pd_grad_reduce_to(gy, c->in_meta[0].ndim, c->in_meta[0].shape);
  if (c->needs_grad[1]) {
    pd_tensor *n = pd_scale(gy, -1.0, 0.0, true);
    c->grad_in[1] = n ? pd_grad_reduce_to(n, c->in_meta[1].ndim, c->in_meta[1].shape) : NULL;
    pd_tensor_release(n);
  }
  pd_tensor_release(gy);
  if ((c->needs_grad[0] && !c->grad_in[0]) || (c->needs_grad[1] && !c->grad_in[1])) return pd_last_status();
  return PD_OK;
}

PD_OPDEF(exp_shifted, .attr_names = "", .n_in = 2, .n_out = 1,
         .flags = PD_OPF_DIFF | PD_OPF_PROMOTE | PD_OPF_FLOAT_ONLY | PD_OPF_HALF_VIA_F32 | PD_OPF_SAVE_OUT,
         .infer_meta = pd_meta_broadcast, .kernel = {[PD_PLACE_CPU] = exps_kernel}, .backward = exps_backward,
         .flops = pd_flops_per_elem);

pd_tensor *pd_exp_shifted(pd_tensor *x, pd_tensor *c) {
  pd_tensor *in[2] = {x, c};
  return pd_dispatch1(PD_OP_exp_shifted, in, 2, NULL);
}

/* ---- abs_pow(x) = |x|^e (attr f0) ------------------------------------------- */
PD_EW_UNARY(apow_f32, float, float, (float)pow(fabs((double)x), P[0]))
PD_EW_UNARY(apow_f64, double, double, pow(fabs(x), P[0]))
static const pd_ew_fn k_apow[PD_NUM_DTYPES] = PD_EW_TABLE_FLOAT(apow);

static pd_status apow_kernel(const pd_kernel_ctx *ctx) {
  return pd_ew_apply(ctx->def->name, k_apow, ctx->out[0]->dtype, ctx->out[0], ctx->in, ctx->n_in,
                     &ctx->attrs->f[0]);
}

/* d|x|^e = e |x|^(e-1) sign(x) */
static pd_status apow_backward(const pd_backward_ctx *c) {
  if (!c->needs_grad[0]) return PD_OK;
  double e = c->attrs->f[0];
  pd_tensor *x = c->inputs[0];
  if (e == 0.0) {
    c->grad_in[0] = pd_scale(c->grad_out[0], 0.0, 0.0, true);
    return c->grad_in[0] ? PD_OK : pd_last_status();
  }
  pd_tensor *sg = pd_reduce_sign(x);
  pd_tensor *pw = sg ? pd_abs_pow(x, e - 1.0) : NULL;
  pd_tensor *t = pw ? pd_multiply(pw, sg) : NULL;
  pd_tensor *u = t ? pd_multiply(c->grad_out[0], t) : NULL;
  c->grad_in[0] = u ? pd_scale(u, e, 0.0, true) : NULL;
  pd_tensor_release(sg);
  pd_tensor_release(pw);
  pd_tensor_release(t);
  pd_tensor_release(u);
  return c->grad_in[0] ? PD_OK : pd_last_status();
}

PD_OPDEF(abs_pow, .n_in = 1, .n_out = 1,
         .flags = PD_OPF_DIFF | PD_OPF_FLOAT_ONLY | PD_OPF_HALF_VIA_F32 | PD_OPF_SAVE_IN |
                  PD_OPF_BACKWARD_READS_VALUES,
         .attr_names = "f0:exponent", .infer_meta = pd_meta_unary, .kernel = {[PD_PLACE_CPU] = apow_kernel},
         .backward = apow_backward, .flops = pd_flops_per_elem);

pd_tensor *pd_abs_pow(pd_tensor *x, double e) {
  pd_attrs a = {.f = {e}};
  return pd_dispatch1(PD_OP_abs_pow, &x, 1, &a);
}

/* ---- prod_exclusive(x; axes v0) ---------------------------------------------- */
static pd_status pex_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                          pd_meta *out, int *n_out) {
  (void)n_in;
  bool mask[PD_MAX_DIMS];
  pd_meta r;
  pd_status st = pd_reduce_meta(def, in[0], a, &r, mask);
  pd_meta_of(in[0], out);
  *n_out = 1;
  return st;
}

/* geometries of x and of a contiguous tensor of x's shape, same mask */
static pd_status pex_geoms(const pd_op_def *def, const pd_tensor *x, const pd_attrs *a, pd_reduce_geom *gx,
                           pd_reduce_geom *go) {
  pd_meta r;
  bool mask[PD_MAX_DIMS];
  pd_status st = pd_reduce_meta(def, x, a, &r, mask);
  if (st != PD_OK) return st;
  int64_t cs[PD_MAX_DIMS];
  pd_compute_contiguous_strides(x->ndim, x->shape, cs);
  pdk_reduce_geom_init(gx, x->ndim, x->shape, x->strides, mask);
  pdk_reduce_geom_init(go, x->ndim, x->shape, cs, mask);
  return PD_OK;
}

static pd_status pex_kernel(const pd_kernel_ctx *ctx) {
  pd_reduce_geom gx, go;
  pd_status st = pex_geoms(ctx->def, ctx->in[0], ctx->attrs, &gx, &go);
  if (st != PD_OK) return st;
  int r = pdk_reduce_prod_exclusive(&gx, pd_tensor_data(ctx->in[0]), &go, pd_tensor_data(ctx->out[0]),
                                    ctx->in[0]->dtype);
  if (r == 2) return pd_set_error(PD_ERR_MEMORY, "%s: out of memory", ctx->def->name);
  if (r)
    return pd_set_error(PD_ERR_DTYPE, "%s: dtype %s is not supported", ctx->def->name,
                        pd_dtype_name(ctx->in[0]->dtype));
  return PD_OK;
}

/* The gradient is computed directly (it is not itself recorded). */
static pd_status pex_backward(const pd_backward_ctx *c) {
  if (!c->needs_grad[0]) return PD_OK;
  const pd_op_def *def = pd_op_table[PD_OP_prod_exclusive];
  pd_tensor *x = c->inputs[0];
  pd_reduce_geom gx, go;
  pd_status st = pex_geoms(def, x, c->attrs, &gx, &go);
  if (st != PD_OK) return st;
  pd_tensor *g = c->grad_out[0]->dtype == x->dtype ? pd_kernel_contiguous(c->grad_out[0])
                                                   : pd_clone(c->grad_out[0], x->dtype);
  pd_tensor *gin = g ? pd_tensor_new(x->dtype, x->ndim, x->shape) : NULL;
  if (!gin) {
    pd_tensor_release(g);
    return pd_last_status() != PD_OK ? pd_last_status() : pd_set_error(PD_ERR_MEMORY, "prod: out of memory");
  }
  int r = pdk_reduce_prod_exclusive_grad(&gx, pd_tensor_data(x), &go, pd_tensor_data(g), pd_tensor_data(gin),
                                         x->dtype);
  pd_tensor_release(g);
  if (r) {
    pd_tensor_release(gin);
    return pd_set_error(PD_ERR_MEMORY, "%s: out of memory in backward", def->name);
  }
  c->grad_in[0] = gin;
  return PD_OK;
}

PD_OPDEF(prod_exclusive, .n_in = 1, .n_out = 1,
         .flags = PD_OPF_DIFF | PD_OPF_FLOAT_ONLY | PD_OPF_HALF_VIA_F32 | PD_OPF_SAVE_IN |
                  PD_OPF_BACKWARD_READS_VALUES,
         .attr_names = "v0:axis,i0:keepdim" /* prod's, as its backward passes them */, .infer_meta = pex_meta,
         .kernel = {[PD_PLACE_CPU] = pex_kernel}, .backward = pex_backward, .flops = pd_flops_per_elem);

pd_tensor *pd_prod_exclusive(pd_tensor *x, const pd_attrs *axes) {
  pd_attrs a = {.nv = {axes->nv[0]}};
  memcpy(a.v[0], axes->v[0], sizeof a.v[0]);
  return pd_dispatch1(PD_OP_prod_exclusive, &x, 1, &a);
}
