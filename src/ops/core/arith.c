/* add, subtract, multiply, divide (broadcasting) and the inplace add_. */
#include <string.h>

#include "../ew_util.h"
#include "paddlec/ops.h"

#define GEN(sfx, T)                    \
  PD_EW_BINARY(add_##sfx, T, T, x + y) \
  PD_EW_BINARY(sub_##sfx, T, T, x - y) \
  PD_EW_BINARY(mul_##sfx, T, T, x *y)
PD_FOR_FLOAT_TYPES(GEN)
#undef GEN
/* integers wrap around, as Paddle's (see PD_FOR_INT_TYPES_WRAP) */
#define GEN(sfx, T, UT)                             \
  PD_EW_BINARY(add_##sfx, T, T, (T)((UT)x + (UT)y)) \
  PD_EW_BINARY(sub_##sfx, T, T, (T)((UT)x - (UT)y)) \
  PD_EW_BINARY(mul_##sfx, T, T, (T)((UT)x * (UT)y))
PD_FOR_INT_TYPES_WRAP(GEN)
#undef GEN
PD_EW_BINARY(div_f32, float, float, x / y)
PD_EW_BINARY(div_f64, double, double, x / y)
/* bool: add is logical or, multiply logical and (as Paddle) */
PD_EW_BINARY(add_b, uint8_t, uint8_t, (x | y) != 0)
PD_EW_BINARY(mul_b, uint8_t, uint8_t, (x & y) != 0)

static const pd_ew_fn k_add[PD_NUM_DTYPES] = {
    [PD_FLOAT32] = add_f32, [PD_FLOAT64] = add_f64, [PD_UINT8] = add_u8,  [PD_INT8] = add_i8,
    [PD_INT16] = add_i16,   [PD_INT32] = add_i32,   [PD_INT64] = add_i64, [PD_BOOL] = add_b};
static const pd_ew_fn k_sub[PD_NUM_DTYPES] = PD_EW_TABLE_NUMERIC(sub);
static const pd_ew_fn k_mul[PD_NUM_DTYPES] = {
    [PD_FLOAT32] = mul_f32, [PD_FLOAT64] = mul_f64, [PD_UINT8] = mul_u8,  [PD_INT8] = mul_i8,
    [PD_INT16] = mul_i16,   [PD_INT32] = mul_i32,   [PD_INT64] = mul_i64, [PD_BOOL] = mul_b};
static const pd_ew_fn k_div[PD_NUM_DTYPES] = PD_EW_TABLE_FLOAT(div);

#define KERNEL(kname, table)                                                                      \
  static pd_status kname##_kernel(const pd_kernel_ctx *ctx) {                                     \
    return pd_ew_apply(ctx->def->name, table, ctx->out[0]->dtype, ctx->out[0], ctx->in, 2, NULL); \
  }
KERNEL(add, k_add)
KERNEL(sub, k_sub)
KERNEL(mul, k_mul)
KERNEL(div, k_div)

/* The registry rows' ew_fn: the same tables, for chain fusion. */
#define EW_FN(kname, table)                                                      \
  static pd_ew_fn kname##_ew(const pd_attrs *a, const pd_dtype *dt, double *p) { \
    (void)a, (void)p;                                                            \
    return (unsigned)dt[0] < PD_NUM_DTYPES ? table[dt[0]] : NULL;                \
  }
EW_FN(add, k_add)
EW_FN(sub, k_sub)
EW_FN(mul, k_mul)
EW_FN(div, k_div)

static pd_status reduce_grad(const pd_backward_ctx *c, int i, pd_tensor *g) {
  if (!g) return pd_last_status();
  c->grad_in[i] = pd_grad_reduce_to(g, c->in_meta[i].ndim, c->in_meta[i].shape);
  pd_tensor_release(g);
  return c->grad_in[i] ? PD_OK : pd_last_status();
}

static pd_status add_backward(const pd_backward_ctx *c) {
  for (int i = 0; i < 2; i++)
    if (c->needs_grad[i] && reduce_grad(c, i, pd_tensor_retain(c->grad_out[0])) != PD_OK)
      return pd_last_status();
  return PD_OK;
}

static pd_status sub_backward(const pd_backward_ctx *c) {
  if (c->needs_grad[0] && reduce_grad(c, 0, pd_tensor_retain(c->grad_out[0])) != PD_OK)
    return pd_last_status();
  if (c->needs_grad[1] && reduce_grad(c, 1, pd_scale(c->grad_out[0], -1.0, 0.0, true)) != PD_OK)
    return pd_last_status();
  return PD_OK;
}

static pd_status mul_backward(const pd_backward_ctx *c) {
  pd_tensor *g = c->grad_out[0], *x = c->inputs[0], *y = c->inputs[1];
  if (c->needs_grad[0] && reduce_grad(c, 0, pd_multiply(g, y)) != PD_OK) return pd_last_status();
  if (c->needs_grad[1] && reduce_grad(c, 1, pd_multiply(g, x)) != PD_OK) return pd_last_status();
  return PD_OK;
}

static pd_status div_backward(const pd_backward_ctx *c) {
  pd_tensor *g = c->grad_out[0], *x = c->inputs[0], *y = c->inputs[1];
  if (c->needs_grad[0] && reduce_grad(c, 0, pd_divide(g, y)) != PD_OK) return pd_last_status();
  if (c->needs_grad[1]) {
    /* d(x/y)/dy = -x / y^2 */
    pd_tensor *gx = pd_multiply(g, x), *yy = pd_multiply(y, y);
    pd_tensor *q = pd_divide(gx, yy);
    pd_tensor *n = pd_scale(q, -1.0, 0.0, true);
    pd_tensor_release(gx);
    pd_tensor_release(yy);
    pd_tensor_release(q);
    if (reduce_grad(c, 1, n) != PD_OK) return pd_last_status();
  }
  return PD_OK;
}

#define BINARY_DEF(opname, kname, extra)                                                 \
  PD_OPDEF(opname, .attr_names = "", .n_in = 2, .n_out = 1,                              \
           .flags = PD_OPF_DIFF | PD_OPF_PROMOTE | PD_OPF_HALF_VIA_F32 | (extra),        \
           .infer_meta = pd_meta_broadcast, .kernel = {[PD_PLACE_CPU] = kname##_kernel}, \
           .backward = kname##_backward, .flops = pd_flops_per_elem, .ew_fn = kname##_ew);
BINARY_DEF(add, add, 0)
BINARY_DEF(subtract, sub, 0)
BINARY_DEF(multiply, mul, PD_OPF_SAVE_IN)
BINARY_DEF(divide, div, PD_OPF_SAVE_IN | PD_OPF_FLOAT_ONLY)

/* add_: x += y, y broadcast to x's shape. */
static pd_status add__meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                           pd_meta *out, int *n_out) {
  pd_status st = pd_meta_broadcast(def, in, n_in, a, out, n_out);
  if (st != PD_OK) return st;
  if (out->ndim != in[0]->ndim || !pd_shape_eq(out->ndim, out->shape, in[0]->shape)) {
    char b[160];
    return pd_set_error(PD_ERR_SHAPE, "%s: y of shape %s does not broadcast to x's shape %s (inplace)",
                        def->name, pd_shape_str(in[1]->ndim, in[1]->shape, b, sizeof b), PD_SHAPE_STR(in[0]));
  }
  return PD_OK;
}

PD_OPDEF(add_, .attr_names = "", .n_in = 2, .n_out = 1, .flags = PD_OPF_DIFF | PD_OPF_INPLACE,
         .infer_meta = add__meta, .kernel = {[PD_PLACE_CPU] = add_kernel}, .backward = add_backward,
         .flops = pd_flops_per_elem);

static pd_tensor *binary(pd_op_id id, pd_tensor *x, pd_tensor *y) {
  pd_tensor *in[2] = {x, y};
  return pd_dispatch1(id, in, 2, NULL);
}

pd_tensor *pd_add(pd_tensor *x, pd_tensor *y) { return binary(PD_OP_add, x, y); }
pd_tensor *pd_subtract(pd_tensor *x, pd_tensor *y) { return binary(PD_OP_subtract, x, y); }
pd_tensor *pd_multiply(pd_tensor *x, pd_tensor *y) { return binary(PD_OP_multiply, x, y); }
pd_tensor *pd_divide(pd_tensor *x, pd_tensor *y) { return binary(PD_OP_divide, x, y); }
pd_tensor *pd_add_(pd_tensor *x, pd_tensor *y) {
  if (x && y && x->dtype != y->dtype) { /* y takes x's dtype, as Paddle's inplace ops */
    pd_internal_enter();
    pd_tensor *yc = pd_cast(y, x->dtype);
    pd_internal_leave();
    pd_tensor *r = binary(PD_OP_add_, x, yc);
    pd_tensor_release(yc);
    return r;
  }
  return binary(PD_OP_add_, x, y);
}
