/* Broadcasting binary math: floor_divide, remainder (mod), elementwise_pow,
 * maximum, minimum, and pow with a scalar exponent. Integer arithmetic
 * wraps; integer division by zero is an error. */
#include <stdatomic.h>

#include "elementwise_util.h"

/* ---- floor_divide ------------------------------------------------------- */
/* Python's //: truncating division corrected toward -inf. b == -1 is done
 * by negation (INT_MIN / -1 overflows). */
#define G(sfx, T, UT)                                       \
  static inline T fdiv_##sfx(T a, T b) {                    \
    if (b == 0) return 0;                                   \
    if (b == -1) return (T)(0u - (UT)a);                    \
    T q = (T)(a / b), r = (T)(a % b);                       \
    return r != 0 && ((r < 0) != (b < 0)) ? (T)(q - 1) : q; \
  }
PD_FOR_SIGNED_TYPES(G)
#undef G
static inline uint8_t fdiv_u8(uint8_t a, uint8_t b) { return b ? (uint8_t)(a / b) : 0; }
/* Floats: from fmod, so that the result is exact where a / b rounds up to
 * an integer (7.0 // 0.7 is 9, not 10); IEEE result for b == 0. */
#define G(sfx, T, FMOD, FLOOR, COPYSIGN)            \
  static inline T fdiv_##sfx(T a, T b) {            \
    if (b == 0) return a / b;                       \
    T mod = FMOD(a, b), div = (a - mod) / b;        \
    if (mod != 0 && (b < 0) != (mod < 0)) div -= 1; \
    if (div == 0) return COPYSIGN((T)0, a / b);     \
    T fl = FLOOR(div);                              \
    return div - fl > (T)0.5 ? fl + 1 : fl;         \
  }
G(f32, float, fmodf, floorf, copysignf)
G(f64, double, fmod, floor, copysign)
#undef G
#define G(sfx, T) PD_EW_BINARY(floor_divide_##sfx, T, T, fdiv_##sfx(x, y))
PD_FOR_NUMERIC_TYPES(G)
#undef G
static const pd_ew_fn k_floor_divide[PD_NUM_DTYPES] = PD_EW_TABLE_NUMERIC(floor_divide);

/* ---- remainder: the sign of the divisor --------------------------------- */
#define G(sfx, T, UT)                                       \
  static inline T mod_##sfx(T a, T b) {                     \
    if (b == 0 || b == -1) return 0;                        \
    T r = (T)(a % b);                                       \
    return r != 0 && ((r < 0) != (b < 0)) ? (T)(r + b) : r; \
  }
PD_FOR_SIGNED_TYPES(G)
#undef G
static inline uint8_t mod_u8(uint8_t a, uint8_t b) { return b ? (uint8_t)(a % b) : 0; }
static inline float mod_f32(float a, float b) {
  float r = fmodf(a, b);
  return r != 0 && (r < 0) != (b < 0) ? r + b : r;
}
static inline double mod_f64(double a, double b) {
  double r = fmod(a, b);
  return r != 0 && (r < 0) != (b < 0) ? r + b : r;
}
#define G(sfx, T) PD_EW_BINARY(remainder_##sfx, T, T, mod_##sfx(x, y))
PD_FOR_NUMERIC_TYPES(G)
#undef G
static const pd_ew_fn k_remainder[PD_NUM_DTYPES] = PD_EW_TABLE_NUMERIC(remainder);

/* ---- pow ---------------------------------------------------------------- */
/* Integer power by squaring, wrapping; a negative exponent truncates 1/a^n. */
static inline int64_t ipow(int64_t a, int64_t b) {
  if (b < 0) return a == 1 ? 1 : a == -1 ? ((b & 1) ? -1 : 1) : 0;
  uint64_t r = 1, base = (uint64_t)a;
  while (b) {
    if (b & 1) r *= base;
    base *= base;
    b >>= 1;
  }
  return (int64_t)r;
}
PD_EW_BINARY(elementwise_pow_f32, float, float, powf(x, y))
PD_EW_BINARY(elementwise_pow_f64, double, double, pow(x, y))
#define G(sfx, T) PD_EW_BINARY(elementwise_pow_##sfx, T, T, (T)ipow((int64_t)x, (int64_t)y))
PD_FOR_INT_TYPES(G)
#undef G
static const pd_ew_fn k_elementwise_pow[PD_NUM_DTYPES] = PD_EW_TABLE_NUMERIC(elementwise_pow);

/* scalar exponent P[0] (integers: truncated); common exponents get their
 * own vectorised loops */
PD_EW_UNARY(pow_f32, float, float, powf(x, (float)P[0]))
PD_EW_UNARY(pow_f64, double, double, pow(x, P[0]))
#define G(sfx, T) PD_EW_UNARY(pow_##sfx, T, T, (T)ipow((int64_t)x, (int64_t)P[0]))
PD_FOR_INT_TYPES(G)
#undef G
static const pd_ew_fn k_pow[PD_NUM_DTYPES] = PD_EW_TABLE_NUMERIC(pow);
PD_EW_UNARY(pow2_f32, float, float, x *x)
PD_EW_UNARY(pow2_f64, double, double, x *x)
PD_EW_UNARY(pow3_f32, float, float, x *x *x)
PD_EW_UNARY(pow3_f64, double, double, x *x *x)
PD_EW_UNARY(powh_f32, float, float, sqrtf(x))
PD_EW_UNARY(powh_f64, double, double, sqrt(x))
PD_EW_UNARY(powm1_f32, float, float, 1.0f / x)
PD_EW_UNARY(powm1_f64, double, double, 1.0 / x)
static const pd_ew_fn k_pow2[PD_NUM_DTYPES] = PD_EW_TABLE_FLOAT(pow2);
static const pd_ew_fn k_pow3[PD_NUM_DTYPES] = PD_EW_TABLE_FLOAT(pow3);
static const pd_ew_fn k_powh[PD_NUM_DTYPES] = PD_EW_TABLE_FLOAT(powh);
static const pd_ew_fn k_powm1[PD_NUM_DTYPES] = PD_EW_TABLE_FLOAT(powm1);

/* ---- maximum / minimum ------------------------------------------------- */
PD_EW_BINARY(maximum_f32, float, float, pd_self(x > y, x, y))
PD_EW_BINARY(maximum_f64, double, double, pd_seld(x > y, x, y))
PD_EW_BINARY(minimum_f32, float, float, pd_self(x < y, x, y))
PD_EW_BINARY(minimum_f64, double, double, pd_seld(x < y, x, y))
#define G(sfx, T)                                  \
  PD_EW_BINARY(maximum_##sfx, T, T, x > y ? x : y) \
  PD_EW_BINARY(minimum_##sfx, T, T, x < y ? x : y)
PD_FOR_INT_TYPES(G)
#undef G
static const pd_ew_fn k_maximum[PD_NUM_DTYPES] = PD_EW_TABLE_NUMERIC(maximum);
static const pd_ew_fn k_minimum[PD_NUM_DTYPES] = PD_EW_TABLE_NUMERIC(minimum);

/* ---- kernels ------------------------------------------------------------ */
/* Sets *flag when an element of the (single operand) run is zero. */
#define G(sfx, T)                                                                          \
  static void anyzero_##sfx(int64_t n, char *const *p, const int64_t *s, const void *pp) { \
    const T *a = (const T *)p[0];                                                          \
    int z = 0;                                                                             \
    for (int64_t i = 0; i < n; i++) z |= a[i * s[0]] == 0;                                 \
    if (z) atomic_store_explicit((atomic_int *)(uintptr_t)pp, 1, memory_order_relaxed);    \
  }
PD_FOR_INT_TYPES(G)
#undef G
static const pd_ew_fn k_anyzero[PD_NUM_DTYPES] = PD_EW_TABLE_INT_ONLY(anyzero);

static pd_status check_int_divisor(const pd_op_def *def, pd_tensor *y) {
  pd_ew_fn fn = k_anyzero[y->dtype];
  if (!fn || y->numel == 0) return PD_OK;
  atomic_int found = 0;
  pd_ew_geom g;
  pd_ew_geom_from(&g, y, NULL, 0);
  pdk_ew_run(&g, fn, (const void *)&found);
  if (atomic_load(&found))
    return pd_set_error(PD_ERR_INVALID, "%s: integer division by zero (y of dtype %s has a zero element)",
                        def->name, pd_dtype_name(y->dtype));
  return PD_OK;
}

static pd_status floor_divide_kernel(const pd_kernel_ctx *ctx) {
  if (check_int_divisor(ctx->def, ctx->in[1]) != PD_OK) return pd_last_status();
  return pd_ew_apply(ctx->def->name, k_floor_divide, ctx->in[0]->dtype, ctx->out[0], ctx->in, ctx->n_in,
                     NULL);
}
static pd_status remainder_kernel(const pd_kernel_ctx *ctx) {
  if (check_int_divisor(ctx->def, ctx->in[1]) != PD_OK) return pd_last_status();
  return pd_ew_apply(ctx->def->name, k_remainder, ctx->in[0]->dtype, ctx->out[0], ctx->in, ctx->n_in, NULL);
}
PD_EW_KERNEL(elementwise_pow, k_elementwise_pow)
PD_EW_KERNEL(maximum, k_maximum)
PD_EW_KERNEL(minimum, k_minimum)

static pd_status pow_kernel(const pd_kernel_ctx *ctx) {
  const pd_ew_fn *t = k_pow;
  double p[1] = {ctx->attrs->f[0]};
  if (pd_dtype_is_floating(ctx->in[0]->dtype)) {
    double f = ctx->attrs->f[0];
    t = f == 2.0 ? k_pow2 : f == 3.0 ? k_pow3 : f == 0.5 ? k_powh : f == -1.0 ? k_powm1 : k_pow;
  } else { /* integers truncate the exponent, clamped so that its conversion is defined (NaN: 0) */
    double e = ctx->attrs->f[0];
    p[0] = e != e ? 0 : e > 9.2e18 ? 9.2e18 : e < -9.2e18 ? -9.2e18 : e;
  }
  return pd_ew_apply(ctx->def->name, t, ctx->in[0]->dtype, ctx->out[0], ctx->in, ctx->n_in, p);
}

/* ---- backward ----------------------------------------------------------- */
/* remainder: dx = g, dy = -g * floor_divide(x, y) */
static pd_status remainder_backward(const pd_backward_ctx *c) {
  pd_tensor *g = c->grad_out[0];
  if (c->needs_grad[0] && pd_ew_set_grad(c, 0, pd_tensor_retain(g)) != PD_OK) return pd_last_status();
  if (!c->needs_grad[1]) return PD_OK;
  pd_tmps T = {0};
  pd_tensor *q = pd_tk(&T, pd_floor_divide(c->inputs[0], c->inputs[1]));
  pd_status st = pd_ew_set_grad(c, 1, pd_multiply(pd_tk(&T, pd_scale(g, -1.0, 0.0, true)), q));
  pd_tmps_free(&T);
  return st;
}

/* x^y: dx = g y x^(y-1), dy = g out log(x) */
static pd_status elementwise_pow_backward(const pd_backward_ctx *c) {
  pd_tensor *g = c->grad_out[0], *x = c->inputs[0], *y = c->inputs[1], *out = c->outputs[0];
  pd_tmps T = {0};
  pd_status st = PD_OK;
  if (c->needs_grad[0]) {
    pd_tensor *p = pd_tk(&T, pd_pow(x, pd_tk(&T, pd_scale(y, 1.0, -1.0, true))));
    st = pd_ew_set_grad(c, 0, pd_multiply(pd_tk(&T, pd_multiply(g, y)), p));
  }
  if (st == PD_OK && c->needs_grad[1])
    st = pd_ew_set_grad(c, 1, pd_multiply(pd_tk(&T, pd_multiply(g, out)), pd_tk(&T, pd_log(x))));
  pd_tmps_free(&T);
  return st;
}

/* x^f: g f x^(f-1) */
static pd_status pow_backward(const pd_backward_ctx *c) {
  if (!c->needs_grad[0]) return PD_OK;
  double f = c->attrs->f[0];
  pd_tensor *g = c->grad_out[0];
  if (f == 0.0) return pd_ew_set_grad(c, 0, pd_zeros_like(g, PD_NUM_DTYPES));
  pd_tmps T = {0};
  pd_tensor *p = f == 1.0 ? pd_tk(&T, pd_ones_like(c->inputs[0], PD_NUM_DTYPES))
                          : pd_tk(&T, pd_pow_scalar(c->inputs[0], f - 1.0));
  pd_status st = pd_ew_set_grad(c, 0, pd_multiply(pd_tk(&T, pd_scale(g, f, 0.0, true)), p));
  pd_tmps_free(&T);
  return st;
}

/* maximum: dx = g (x > y), dy = g (x <= y); minimum: dx = g (x < y),
 * dy = g (x >= y) */
static pd_status minmax_backward(const pd_backward_ctx *c, bool is_max) {
  pd_tensor *g = c->grad_out[0], *x = c->inputs[0], *y = c->inputs[1];
  pd_tmps T = {0};
  pd_status st = PD_OK;
  if (c->needs_grad[0]) {
    pd_tensor *m = pd_tk(&T, is_max ? pd_greater_than(x, y) : pd_less_than(x, y));
    st = pd_ew_set_grad(c, 0, pd_ew_masked(m, g));
  }
  if (st == PD_OK && c->needs_grad[1]) {
    pd_tensor *m = pd_tk(&T, is_max ? pd_less_equal(x, y) : pd_greater_equal(x, y));
    st = pd_ew_set_grad(c, 1, pd_ew_masked(m, g));
  }
  pd_tmps_free(&T);
  return st;
}
static pd_status maximum_backward(const pd_backward_ctx *c) { return minmax_backward(c, true); }
static pd_status minimum_backward(const pd_backward_ctx *c) { return minmax_backward(c, false); }

/* ---- registry rows and wrappers ----------------------------------------- */
#define BIN_FLAGS (PD_OPF_PROMOTE | PD_OPF_HALF_VIA_F32)
PD_OPDEF(floor_divide, .attr_names = "", .n_in = 2, .n_out = 1, .flags = BIN_FLAGS,
         .infer_meta = pd_meta_broadcast, .kernel = {[PD_PLACE_CPU] = floor_divide_kernel},
         .flops = pd_flops_per_elem);
#define BIN_DEF(opname, save)                                                                          \
  PD_OPDEF(opname, .attr_names = "", .n_in = 2, .n_out = 1, .flags = BIN_FLAGS | PD_OPF_DIFF | (save), \
           .infer_meta = pd_meta_broadcast, .kernel = {[PD_PLACE_CPU] = opname##_kernel},              \
           .backward = opname##_backward, .flops = pd_flops_per_elem);
BIN_DEF(remainder, PD_OPF_SAVE_IN)
BIN_DEF(elementwise_pow, PD_OPF_SAVE_IN | PD_OPF_SAVE_OUT)
BIN_DEF(maximum, PD_OPF_SAVE_IN)
BIN_DEF(minimum, PD_OPF_SAVE_IN)
PD_OPDEF(pow, .n_in = 1, .n_out = 1, .flags = PD_OPF_DIFF | PD_OPF_HALF_VIA_F32 | PD_OPF_SAVE_IN,
         .attr_names = "f0:factor", .infer_meta = pd_meta_unary, .kernel = {[PD_PLACE_CPU] = pow_kernel},
         .backward = pow_backward, .flops = pd_flops_per_elem);

static pd_tensor *binary(pd_op_id id, pd_tensor *x, pd_tensor *y) {
  pd_tensor *in[2] = {x, y};
  return pd_dispatch1(id, in, 2, NULL);
}
pd_tensor *pd_floor_divide(pd_tensor *x, pd_tensor *y) { return binary(PD_OP_floor_divide, x, y); }
pd_tensor *pd_remainder(pd_tensor *x, pd_tensor *y) { return binary(PD_OP_remainder, x, y); }
pd_tensor *pd_mod(pd_tensor *x, pd_tensor *y) { return binary(PD_OP_remainder, x, y); }
pd_tensor *pd_pow(pd_tensor *x, pd_tensor *y) { return binary(PD_OP_elementwise_pow, x, y); }
pd_tensor *pd_maximum(pd_tensor *x, pd_tensor *y) { return binary(PD_OP_maximum, x, y); }
pd_tensor *pd_minimum(pd_tensor *x, pd_tensor *y) { return binary(PD_OP_minimum, x, y); }
pd_tensor *pd_pow_scalar(pd_tensor *x, double y) {
  pd_attrs a = {.f = {y}};
  return pd_dispatch1(PD_OP_pow, &x, 1, &a);
}
