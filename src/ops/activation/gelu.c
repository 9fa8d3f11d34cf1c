/* gelu(x, approximate): x Phi(x) with Phi from erf, or Paddle's tanh
 * approximation 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
 * Computed as x Phi(x) with Phi from erfc (vectorised for float32, see
 * pd_vnormcdff) and x sigmoid(2u), which equal the above but keep their
 * accuracy for negative x (no 1 - 0.99... cancellation). */
#include "../elementwise/elementwise_util.h"

#define GELU_K 0.79788456080286535588 /* sqrt(2/pi) */
#define GELU_C 0.044715

PD_EW_UNARY(gelu_erf_f32, float, float, x *pd_vnormcdff(x))
PD_EW_UNARY(gelu_erf_f64, double, double, 0.5 * x * erfc(-x * M_SQRT1_2))
PD_EW_UNARY(gelu_tanh_f32, float, float,
            x / (1.0f + pd_vexpf(-2.0f * (float)GELU_K * (x + (float)GELU_C * x * x * x))))
PD_EW_UNARY(gelu_tanh_f64, double, double, x / (1.0 + exp(-2.0 * GELU_K * (x + GELU_C * x * x * x))))
static const pd_ew_fn k_gelu_erf[PD_NUM_DTYPES] = PD_EW_TABLE_FLOAT(gelu_erf);
static const pd_ew_fn k_gelu_tanh[PD_NUM_DTYPES] = PD_EW_TABLE_FLOAT(gelu_tanh);

static pd_status gelu_kernel(const pd_kernel_ctx *ctx) {
  return pd_ew_apply(ctx->def->name, ctx->attrs->i[0] ? k_gelu_tanh : k_gelu_erf, ctx->in[0]->dtype,
                     ctx->out[0], ctx->in, ctx->n_in, NULL);
}

#define K PD_K

/* erf form: g (Phi(x) + x phi(x)), phi(x) = e^{-x^2/2} / sqrt(2 pi).
 * tanh form, u = k (x + c x^3), t = tanh(u):
 *   g (0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 c x^2)). */
static pd_status gelu_backward(const pd_backward_ctx *c) {
  if (!c->needs_grad[0]) return PD_OK;
  pd_tensor *g = c->grad_out[0], *x = c->inputs[0];
  pd_tmps T = {0};
  pd_tensor *x2 = K(pd_square(x)), *d;
  if (c->attrs->i[0]) {
    pd_tensor *inner = K(pd_add(x, K(pd_scale(K(pd_multiply(x2, x)), GELU_C, 0.0, true))));
    pd_tensor *t = K(pd_tanh(K(pd_scale(inner, GELU_K, 0.0, true))));
    pd_tensor *a = K(pd_scale(t, 0.5, 0.5, true));
    pd_tensor *sech2 = K(pd_scale(K(pd_square(t)), -1.0, 1.0, true));
    pd_tensor *du = K(pd_scale(x2, 3.0 * GELU_C * GELU_K, GELU_K, true));
    pd_tensor *b = K(pd_scale(K(pd_multiply(K(pd_multiply(x, sech2)), du)), 0.5, 0.0, true));
    d = K(pd_add(a, b));
  } else {
    pd_tensor *cdf = K(pd_scale(K(pd_erf(K(pd_scale(x, M_SQRT1_2, 0.0, true)))), 0.5, 0.5, true));
    pd_tensor *pdf =
        K(pd_scale(K(pd_exp(K(pd_scale(x2, -0.5, 0.0, true)))), 0.5 * M_2_SQRTPI * M_SQRT1_2, 0.0, true));
    d = K(pd_add(cdf, K(pd_multiply(x, pdf))));
  }
  pd_status st = pd_ew_set_grad(c, 0, pd_multiply(g, d));
  pd_tmps_free(&T);
  return st;
}

PD_OPDEF(gelu, .n_in = 1, .n_out = 1,
         .flags = PD_OPF_DIFF | PD_OPF_FLOAT_ONLY | PD_OPF_HALF_VIA_F32 | PD_OPF_SAVE_IN,
         .attr_names = "i0:approximate", .infer_meta = pd_meta_unary,
         .kernel = {[PD_PLACE_CPU] = gelu_kernel}, .backward = gelu_backward, .flops = pd_flops_per_elem);

pd_tensor *pd_gelu(pd_tensor *x, bool approximate) {
  pd_attrs a = {.i = {approximate}};
  return pd_dispatch1(PD_OP_gelu, &x, 1, &a);
}
