/* allclose and equal_all: a 0-d bool over two tensors of one shape. The
 * elementwise driver walks x (as operand 0) and y together; runs report a
 * mismatch through an atomic flag. */
#include <stdatomic.h>
#include <string.h>

#include "elementwise_util.h"

typedef struct close_params {
  double rtol, atol;
  int equal_nan;
  atomic_int bad;
} close_params;

/* Paddle's rule: a == b, or |a - b| <= atol + rtol |b| (with 1e-15 slack);
 * NaNs match only each other and only with equal_nan. */
static inline int close_one(double a, double b, const close_params *p) {
  if (isnan(a) || isnan(b)) return p->equal_nan && isnan(a) && isnan(b);
  if (a == b) return 1;
  double left = fabs(a - b), right = p->atol + p->rtol * fabs(b);
  return left <= right || fabs(left - right) <= 1e-15;
}

#define G(sfx, T)                                                                              \
  static void allclose_##sfx(int64_t n, char *const *ptr, const int64_t *s, const void *pp) {  \
    close_params *p = (close_params *)(uintptr_t)pp;                                           \
    const T *a = (const T *)ptr[0], *b = (const T *)ptr[1];                                    \
    for (int64_t i = 0; i < n; i++)                                                            \
      if (!close_one((double)a[i * s[0]], (double)b[i * s[1]], p)) {                           \
        atomic_store_explicit(&p->bad, 1, memory_order_relaxed);                               \
        return;                                                                                \
      }                                                                                        \
  }                                                                                            \
  static void equal_all_##sfx(int64_t n, char *const *ptr, const int64_t *s, const void *pp) { \
    const T *a = (const T *)ptr[0], *b = (const T *)ptr[1];                                    \
    int bad = 0;                                                                               \
    for (int64_t i = 0; i < n; i++) bad |= a[i * s[0]] != b[i * s[1]];                         \
    if (bad) atomic_store_explicit((atomic_int *)(uintptr_t)pp, 1, memory_order_relaxed);      \
  }
PD_FOR_NUMERIC_TYPES(G)
G(b, uint8_t)
#undef G
#define TABLE(prefix)                                                                   \
  {                                                                                     \
    [PD_FLOAT32] = prefix##_f32, [PD_FLOAT64] = prefix##_f64, [PD_UINT8] = prefix##_u8, \
    [PD_INT8] = prefix##_i8, [PD_INT16] = prefix##_i16, [PD_INT32] = prefix##_i32,      \
    [PD_INT64] = prefix##_i64, [PD_BOOL] = prefix##_b                                   \
  }
static const pd_ew_fn k_allclose[PD_NUM_DTYPES] = TABLE(allclose);
static const pd_ew_fn k_equal_all[PD_NUM_DTYPES] = TABLE(equal_all);

static bool same_shape(const pd_tensor *x, const pd_tensor *y) {
  return x->ndim == y->ndim && pd_shapes_agree(x->ndim, x->shape, y->shape);
}

static pd_status scalar_bool_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                                  pd_meta *out, int *n_out) {
  (void)n_in;
  if (def == &pd_opdef_allclose) {
    if (!same_shape(in[0], in[1]))
      return pd_set_error(PD_ERR_SHAPE, "%s: x of shape %s and y of shape %s must have the same shape",
                          def->name, PD_SHAPE_STR(in[0]), PD_SHAPE_STR(in[1]));
    if (!(a->f[0] >= 0) || !(a->f[1] >= 0))
      return pd_set_error(PD_ERR_INVALID, "%s: rtol (%g) and atol (%g) must be non-negative", def->name,
                          a->f[0], a->f[1]);
  }
  out->dtype = PD_BOOL;
  out->ndim = 0;
  *n_out = 1;
  return PD_OK;
}

/* Runs fns[dtype] over x and y (same shape); runs flag mismatches in params. */
static pd_status scan_pair(const char *op, const pd_ew_fn *fns, pd_tensor *x, pd_tensor *y, void *params) {
  pd_ew_fn fn = fns[x->dtype];
  if (!fn) return pd_set_error(PD_ERR_DTYPE, "%s: dtype %s is not supported", op, pd_dtype_name(x->dtype));
  if (x->numel == 0) return PD_OK;
  pd_ew_geom g;
  pd_ew_geom_from(&g, x, &y, 1);
  pdk_ew_run(&g, fn, params);
  return PD_OK;
}

static pd_status allclose_kernel(const pd_kernel_ctx *ctx) {
  close_params p = {.rtol = ctx->attrs->f[0], .atol = ctx->attrs->f[1], .equal_nan = (int)ctx->attrs->i[0]};
  atomic_init(&p.bad, 0);
  if (scan_pair(ctx->def->name, k_allclose, ctx->in[0], ctx->in[1], &p) != PD_OK) return pd_last_status();
  *(uint8_t *)pd_tensor_data(ctx->out[0]) = !atomic_load(&p.bad);
  return PD_OK;
}

static pd_status equal_all_kernel(const pd_kernel_ctx *ctx) {
  atomic_int bad = 0;
  if (same_shape(ctx->in[0], ctx->in[1])) {
    if (scan_pair(ctx->def->name, k_equal_all, ctx->in[0], ctx->in[1], &bad) != PD_OK)
      return pd_last_status();
  } else {
    bad = 1; /* Paddle: different shapes are simply not equal */
  }
  *(uint8_t *)pd_tensor_data(ctx->out[0]) = !atomic_load(&bad);
  return PD_OK;
}

PD_OPDEF(allclose, .n_in = 2, .n_out = 1, .flags = PD_OPF_PROMOTE | PD_OPF_HALF_VIA_F32,
         .attr_names = "f0:rtol,f1:atol,i0:equal_nan", .infer_meta = scalar_bool_meta,
         .kernel = {[PD_PLACE_CPU] = allclose_kernel});
PD_OPDEF(equal_all, .attr_names = "", .n_in = 2, .n_out = 1, .flags = PD_OPF_PROMOTE | PD_OPF_HALF_VIA_F32,
         .infer_meta = scalar_bool_meta, .kernel = {[PD_PLACE_CPU] = equal_all_kernel});

pd_tensor *pd_allclose(pd_tensor *x, pd_tensor *y, double rtol, double atol, bool equal_nan) {
  pd_tensor *in[2] = {x, y};
  pd_attrs a = {.f = {rtol, atol}, .i = {equal_nan}};
  return pd_dispatch1(PD_OP_allclose, in, 2, &a);
}
pd_tensor *pd_equal_all(pd_tensor *x, pd_tensor *y) {
  pd_tensor *in[2] = {x, y};
  return pd_dispatch1(PD_OP_equal_all, in, 2, NULL);
}
