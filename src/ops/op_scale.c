/* scale: scale * x + bias, or scale * (x + bias). */
#include "ew_helpers.h"
#include "paddlec/ops.h"

#define GEN(sfx, T) PD_EW_UNARY(scale_##sfx, T, T, P[2] != 0.0 ? x * P[0] + P[1] : (x + P[1]) * P[0])
PD_FOR_NUMERIC_TYPES(GEN)
#undef GEN
static const pd_ew_fn k_scale[PD_NUM_DTYPES] = PD_EW_TABLE_NUMERIC(scale);

static pd_status scale_kernel(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                              pd_tensor **out, int n_out) {
  (void)n_out;
  double p[3] = {a->f[0], a->f[1], a->i[0] ? 1.0 : 0.0};
  return pd_ew_apply(def->name, k_scale, out[0]->dtype, out[0], in, n_in, p);
}

static pd_status scale_backward(const pd_backward_ctx *c) {
  if (c->needs_grad[0]) {
    c->grad_in[0] = pd_scale(c->grad_out[0], c->attrs->f[0], 0.0, true);
    if (!c->grad_in[0]) return pd_last_status();
  }
  return PD_OK;
}

const pd_op_def pd_opdef_scale = {.name = "scale",
                                  .n_in = 1,
                                  .n_out = 1,
                                  .flags = PD_OPF_DIFF | PD_OPF_HALF_VIA_F32,
                                  .attr_names = "f0:scale,f1:bias,i0:bias_after_scale",
                                  .infer_meta = pd_meta_unary,
                                  .kernel = {[PD_PLACE_CPU] = scale_kernel},
                                  .backward = scale_backward,
                                  .flops = pd_flops_per_elem};

pd_tensor *pd_scale(pd_tensor *x, double scale, double bias, bool bias_after_scale) {
  pd_attrs a = {.f = {scale, bias}, .i = {bias_after_scale}};
  return pd_dispatch1(PD_OP_scale, &x, 1, &a);
}
