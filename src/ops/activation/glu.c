/* glu(x, axis) = a * sigmoid(b), a and b the two halves of x along axis
 * (paddle.nn.functional.glu). The kernel runs on two views of x, so no
 * copy is made; the backward is written with public ops:
 *   da = g s,  db = g a s (1 - s),  dx = concat([da, db], axis). */
#include "../elementwise/elementwise_util.h"
#include "paddlec/manipulation.h"

PD_EW_BINARY(glu_f32, float, float, x *pd_vsigmoidf(y))
PD_EW_BINARY(glu_f64, double, double, x *pd_sigmoidd(y))
static const pd_ew_fn k_glu[PD_NUM_DTYPES] = PD_EW_TABLE_FLOAT(glu);

/* The axis in [0, rank) with an even size there; error names the values. */
static pd_status glu_axis(const pd_op_def *def, const pd_tensor *x, int64_t axis, int *ax) {
  if (axis < -x->ndim || axis >= x->ndim)
    return pd_set_error(PD_ERR_INDEX, "%s: axis %lld is out of range [%d, %d) for x of shape %s", def->name,
                        (long long)axis, -x->ndim, x->ndim, PD_SHAPE_STR(x));
  *ax = (int)(axis < 0 ? axis + x->ndim : axis);
  if (x->shape[*ax] % 2 != 0 && pd_dim_known(x->shape[*ax]))
    return pd_set_error(PD_ERR_SHAPE,
                        "%s: the size %lld of x (shape %s) along axis %lld is odd; it must split into "
                        "two equal halves",
                        def->name, (long long)x->shape[*ax], PD_SHAPE_STR(x), (long long)axis);
  return PD_OK;
}

static pd_status glu_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                          pd_meta *out, int *n_out) {
  (void)n_in;
  int ax = 0;
  pd_status st = glu_axis(def, in[0], a->i[0], &ax);
  if (st != PD_OK) return st;
  pd_meta_of(in[0], out);
  out->shape[ax] = pd_dim_div(out->shape[ax], 2);
  *n_out = 1;
  return PD_OK;
}

static pd_status glu_kernel(const pd_kernel_ctx *ctx) {
  pd_tensor *x = ctx->in[0];
  int ax = 0;
  pd_status st = glu_axis(ctx->def, x, ctx->attrs->i[0], &ax);
  if (st != PD_OK) return st;
  int64_t h = x->shape[ax] / 2;
  pd_tensor *ab[2];
  ab[0] = pd_tensor_new_view(x, x->ndim, ctx->out[0]->shape, x->strides, x->offset);
  ab[1] = pd_tensor_new_view(x, x->ndim, ctx->out[0]->shape, x->strides, x->offset + h * x->strides[ax]);
  st = ab[0] && ab[1] ? pd_ew_apply(ctx->def->name, k_glu, x->dtype, ctx->out[0], ab, 2, NULL)
                      : pd_last_status();
  pd_tensor_release(ab[0]);
  pd_tensor_release(ab[1]);
  return st;
}

#define K PD_K

static pd_status glu_backward(const pd_backward_ctx *c) {
  if (!c->needs_grad[0]) return PD_OK;
  pd_tensor *g = c->grad_out[0], *x = c->inputs[0];
  int64_t axis = c->attrs->i[0], h = c->in_meta[0].shape[axis < 0 ? axis + c->in_meta[0].ndim : axis] / 2;
  int64_t zero = 0, end = 2 * h;
  pd_tmps T = {0};
  pd_tensor *a = K(pd_slice(x, 1, &axis, &zero, &h));
  pd_tensor *b = K(pd_slice(x, 1, &axis, &h, &end));
  pd_tensor *s = K(pd_sigmoid(b));
  pd_tensor *gs = K(pd_multiply(g, s));
  pd_tensor *parts[2] = {gs, K(pd_multiply(K(pd_multiply(gs, a)), K(pd_scale(s, -1.0, 1.0, true))))};
  pd_status st = pd_ew_set_grad(c, 0, parts[1] ? pd_concat(parts, 2, axis) : NULL);
  pd_tmps_free(&T);
  return st;
}
#undef K

PD_OPDEF(glu, .n_in = 1, .n_out = 1,
         .flags = PD_OPF_DIFF | PD_OPF_FLOAT_ONLY | PD_OPF_HALF_VIA_F32 | PD_OPF_SAVE_IN,
         .attr_names = "i0:axis", .infer_meta = glu_meta, .kernel = {[PD_PLACE_CPU] = glu_kernel},
         .backward = glu_backward, .flops = pd_flops_per_elem);

pd_tensor *pd_glu(pd_tensor *x, int axis) {
  pd_attrs a = {.i = {axis}};
  return pd_dispatch1(PD_OP_glu, &x, 1, &a);
}
