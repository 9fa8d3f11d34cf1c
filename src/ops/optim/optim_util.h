/* Shared glue of the optimizer update ops (sgd_, momentum_, adam_, adamw_,
 * adamax_, adagrad_, adadelta_, rmsprop_, lamb_). They are inplace and not
 * differentiable; each takes
 *   param, grad, learning_rate, <accumulators>, <beta powers>,
 *   [master_param when i0 multi_precision], [grad_scale when i1 is set]
 * and updates param (the output), the accumulators, the beta powers and the
 * master weights in one fused pass. learning_rate holds this parameter's
 * rate (the optimizer's times its multipliers); grad_scale is the factor
 * the norm clippings computed. The string attribute is the static part of
 * the gradient transform: ';'-separated "clip=<min>,<max>",
 * "l1_decay=<coeff>", "l2_decay=<coeff>" (empty: none). */
#ifndef PADDLEC_OPS_OP_OPTIM_H
#define PADDLEC_OPS_OP_OPTIM_H

#include "../../kernels/cpu/optim.h"
#include "../op_registry.h"

typedef struct pd_optim_op_desc {
  int n_acc;          /* accumulators shaped like param */
  int n_pow;          /* one-element accumulators (beta powers) */
  const char *inputs; /* the input list, for messages */
  /* fills the rule's scalars from the attrs, the rate and the powers */
  void (*prep)(const pd_attrs *at, double lr, const double *pows, pd_optim_args *a);
  /* advances the powers after the update (NULL: none) */
  void (*post)(const pd_attrs *at, double *pows, bool pows_f32);
  const pd_optim_rule *rule; /* NULL: Lamb's two-pass update */
} pd_optim_op_desc;

pd_status pd_optim_meta(const pd_optim_op_desc *d, const pd_op_def *def, pd_tensor *const *in, int n_in,
                        const pd_attrs *a, pd_meta *out, int *n_out);
/* The kernel of an update op over d. */
pd_status pd_optim_kernel(const pd_optim_op_desc *d, const pd_kernel_ctx *ctx);
/* The same with Lamb's sums handed to reduce between its passes (see
 * pdk_optim_lamb_reduced; the other rules ignore it). */
pd_status pd_optim_kernel_reduced(const pd_optim_op_desc *d, const pd_kernel_ctx *ctx,
                                  pdk_lamb_sums_fn reduce, void *user);
/* lamb_'s kernel over a shard of the parameter: reduce makes the shard's
 * sums of squares the whole parameter's (the auto_parallel local step). */
pd_status pd_optim_lamb_kernel_reduced(const pd_kernel_ctx *ctx, pdk_lamb_sums_fn reduce, void *user);

/* Defines the registry row pd_opdef_<NAME>_ of an update op over DESC. */
#define PD_OPTIM_OP(NAME, DESC, ATTRS)                                                                  \
  static pd_status NAME##_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a, \
                               pd_meta *out, int *n_out) {                                              \
    return pd_optim_meta(&DESC, def, in, n_in, a, out, n_out);                                          \
  }                                                                                                     \
  static pd_status NAME##_kernel(const pd_kernel_ctx *ctx) { return pd_optim_kernel(&DESC, ctx); }      \
  PD_OPDEF(NAME##_, .n_in = -1, .n_out = 1, .flags = PD_OPF_INPLACE, .attr_names = ATTRS,               \
           .infer_meta = NAME##_meta, .kernel = {[PD_PLACE_CPU] = NAME##_kernel});

/* Writes the transform string for the attrs' `s` (see above); min/max of
 * +-inf and a zero coefficient are left out. Returns PD_OK, or an error
 * when it does not fit. */
pd_status pd_optim_format_transform(char *s, size_t cap, double clip_min, double clip_max, double l1,
                                    double l2);
/* Parses it into a's gradient transform; an error names op and the text. */
pd_status pd_optim_parse_transform(const char *op, const char *s, pd_optim_args *a);

/* beta * pow as the accumulator's dtype computes it (float32 products for
 * float32 powers, as Paddle's float attributes give). */
static inline double pd_optim_pow_step(double beta, double pow, bool f32) {
  return f32 ? (double)((float)beta * (float)pow) : beta * pow;
}

#endif
