/* max / min over axes. NaN propagates. The gradient is split evenly among
 * the elements equal to the result, as Paddle's max_grad/min_grad. */
#include "paddlec/ops.h"
#include "reduction_util.h"

static pd_status ext_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                          pd_meta *out, int *n_out) {
  (void)n_in;
  bool mask[PD_MAX_DIMS];
  *n_out = 1;
  pd_status st = pd_reduce_meta(def, in[0], a, out, mask);
  return st != PD_OK ? st : pd_reduce_check_nonempty(def, in[0], mask);
}

static pd_status max_kernel(const pd_kernel_ctx *ctx) {
  return pd_reduce_kernel_run(ctx, &(pd_reduce_spec){.kind = PD_RK_MAX});
}

static pd_status min_kernel(const pd_kernel_ctx *ctx) {
  return pd_reduce_kernel_run(ctx, &(pd_reduce_spec){.kind = PD_RK_MIN});
}

/* dx = expand(dy) * (x == out) / count(x == out) */
/* The tie weights (x == out) / count(x == out) with ops, for a DTensor x:
 * the count then spans every shard of the reduced dims (the dense helper
 * counts the local data only). */
static pd_tensor *tie_weights_by_ops(pd_tensor *x, pd_tensor *out, const pd_meta *xm, const bool *mask) {
  int64_t axes[PD_MAX_DIMS];
  int n = 0;
  for (int d = 0; d < xm->ndim; d++)
    if (mask[d]) axes[n++] = d;
  pd_tensor *o = pd_reduce_unsqueeze(out, xm, mask);
  pd_tensor *eq = o ? pd_equal(x, o) : NULL;
  pd_tensor *e = eq ? pd_cast(eq, x->dtype) : NULL;
  pd_tensor *cnt = e ? pd_sum(e, axes, n, true) : NULL;
  pd_tensor *w = cnt ? pd_divide(e, cnt) : NULL;
  pd_tensor_release(o);
  pd_tensor_release(eq);
  pd_tensor_release(e);
  pd_tensor_release(cnt);
  return w;
}

static pd_status ext_backward(const pd_backward_ctx *c, const char *op) {
  if (!c->needs_grad[0]) return PD_OK;
  const pd_meta *xm = &c->in_meta[0];
  bool mask[PD_MAX_DIMS];
  pd_reduce_mask(xm->ndim, c->attrs, mask);
  pd_tensor *w = c->inputs[0]->dist_attr ? tie_weights_by_ops(c->inputs[0], c->outputs[0], xm, mask)
                                         : pd_reduce_tie_weights(op, c->inputs[0], c->outputs[0], mask);
  pd_tensor *g = w ? pd_reduce_unsqueeze(c->grad_out[0], xm, mask) : NULL;
  c->grad_in[0] = g ? pd_multiply(g, w) : NULL;
  pd_tensor_release(g);
  pd_tensor_release(w);
  return c->grad_in[0] ? PD_OK : pd_last_status();
}

static pd_status max_backward(const pd_backward_ctx *c) { return ext_backward(c, "max"); }
static pd_status min_backward(const pd_backward_ctx *c) { return ext_backward(c, "min"); }

#define EXT_DEF(nm)                                                                        \
  PD_OPDEF(nm, .n_in = 1, .n_out = 1,                                                      \
           .flags = PD_OPF_DIFF | PD_OPF_HALF_VIA_F32 | PD_OPF_SAVE_IN | PD_OPF_SAVE_OUT | \
                    PD_OPF_BACKWARD_READS_VALUES,                                          \
           .attr_names = "v0:axis,i0:keepdim", .infer_meta = ext_meta,                     \
           .kernel = {[PD_PLACE_CPU] = nm##_kernel}, .backward = nm##_backward, .flops = pd_flops_reduce);
EXT_DEF(max)
EXT_DEF(min)

pd_tensor *pd_max(pd_tensor *x, const int64_t *axis, int naxis, bool keepdim) {
  return pd_reduce_call(PD_OP_max, "max", x, axis, naxis, keepdim, NULL);
}
pd_tensor *pd_min(pd_tensor *x, const int64_t *axis, int naxis, bool keepdim) {
  return pd_reduce_call(PD_OP_min, "min", x, axis, naxis, keepdim, NULL);
}
