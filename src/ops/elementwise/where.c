/* where(cond, x, y): cond bool; cond, x, y broadcast together. The kernel
 * copies elements by size, so every dtype (float16 included) is served. */
#include "elementwise_util.h"

/* The select is done on the bits with a mask (c ? a : b == (a & m) | (b & ~m),
 * m all ones where c): branch-free, so the compiler vectorises it, where a
 * branch per element mispredicts on a mask like relu's (half of the
 * elements, at random) and ran ~30x slower. Bits are copied, so every value
 * (NaN, -0) comes through unchanged. */
#define SEL(T, ci, av, bv) (((av) & (T)(0 - (T)((ci) != 0))) | ((bv) & (T) ~(T)(0 - (T)((ci) != 0))))
#define G(T)                                                                                       \
  static void where_##T(int64_t n, char *const *p, const int64_t *s, const void *pp) {             \
    (void)pp;                                                                                      \
    T *o = (T *)p[0];                                                                              \
    const uint8_t *c = (const uint8_t *)p[1];                                                      \
    const T *a = (const T *)p[2], *b = (const T *)p[3];                                            \
    if (s[0] == 1 && s[1] == 1 && s[2] == 1 && s[3] == 1) {                                        \
      PD_SIMD for (int64_t i = 0; i < n; i++) o[i] = SEL(T, c[i], a[i], b[i]);                     \
    } else if (s[0] == 1 && s[1] == 1 && s[2] == 1 && s[3] == 0) {                                 \
      const T bv = b[0];                                                                           \
      PD_SIMD for (int64_t i = 0; i < n; i++) o[i] = SEL(T, c[i], a[i], bv);                       \
    } else if (s[0] == 1 && s[1] == 1 && s[2] == 0 && s[3] == 1) {                                 \
      const T av = a[0];                                                                           \
      PD_SIMD for (int64_t i = 0; i < n; i++) o[i] = SEL(T, c[i], av, b[i]);                       \
    } else {                                                                                       \
      for (int64_t i = 0; i < n; i++) o[i * s[0]] = SEL(T, c[i * s[1]], a[i * s[2]], b[i * s[3]]); \
    }                                                                                              \
  }
G(uint8_t)
G(uint16_t)
G(uint32_t)
G(uint64_t)
#undef G
#undef SEL

static pd_status where_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                            pd_meta *out, int *n_out) {
  if (in[0]->dtype != PD_BOOL)
    return pd_set_error(PD_ERR_DTYPE, "%s: condition must be a bool tensor, got dtype %s", def->name,
                        pd_dtype_name(in[0]->dtype));
  if (in[1]->dtype != in[2]->dtype)
    return pd_set_error(PD_ERR_DTYPE, "%s: x and y must have one dtype, got %s and %s", def->name,
                        pd_dtype_name(in[1]->dtype), pd_dtype_name(in[2]->dtype));
  pd_status st = pd_meta_broadcast(def, in, n_in, a, out, n_out);
  out->dtype = in[1]->dtype;
  return st;
}

static pd_status where_kernel(const pd_kernel_ctx *ctx) {
  static const pd_ew_fn by_size[9] = {
      [1] = where_uint8_t, [2] = where_uint16_t, [4] = where_uint32_t, [8] = where_uint64_t};
  pd_ew_fn fns[PD_NUM_DTYPES] = {0};
  size_t es = pd_dtype_size(ctx->in[1]->dtype);
  fns[ctx->in[1]->dtype] = es <= 8 ? by_size[es] : NULL;
  return pd_ew_apply(ctx->def->name, fns, ctx->in[1]->dtype, ctx->out[0], ctx->in, ctx->n_in, NULL);
}

/* The row's ew_fn (chain fusion): keyed on x's element size, as the kernel. */
static pd_ew_fn where_ew(const pd_attrs *a, const pd_dtype *dt, double *p) {
  (void)a, (void)p;
  static const pd_ew_fn by_size[9] = {
      [1] = where_uint8_t, [2] = where_uint16_t, [4] = where_uint32_t, [8] = where_uint64_t};
  size_t es = dt[0] == PD_BOOL ? pd_dtype_size(dt[1]) : 0;
  return es <= 8 ? by_size[es] : NULL;
}

/* dx = where(cond, g, 0), dy = where(cond, 0, g), summed to their shapes */
static pd_status where_backward(const pd_backward_ctx *c) {
  pd_tensor *cond = c->inputs[0], *g = c->grad_out[0];
  pd_tmps T = {0};
  pd_tensor *z = pd_tk(&T, pd_ew_scalar(0.0, g));
  pd_status st = PD_OK;
  if (c->needs_grad[1]) st = pd_ew_set_grad(c, 1, pd_where(cond, g, z));
  if (st == PD_OK && c->needs_grad[2]) st = pd_ew_set_grad(c, 2, pd_where(cond, z, g));
  pd_tmps_free(&T);
  return st;
}

PD_OPDEF(where, .attr_names = "", .n_in = 3, .n_out = 1, .flags = PD_OPF_DIFF | PD_OPF_SAVE_IN,
         .infer_meta = where_meta, .kernel = {[PD_PLACE_CPU] = where_kernel}, .backward = where_backward,
         .ew_fn = where_ew);

pd_tensor *pd_where(pd_tensor *cond, pd_tensor *x, pd_tensor *y) {
  if (x && y && x->dtype != y->dtype) { /* promote x and y (not cond) */
    pd_dtype dt = pd_promote_types(x->dtype, y->dtype);
    if (dt == PD_NUM_DTYPES) {
      pd_set_error(PD_ERR_DTYPE,
                   "where: x is %s and y is %s; Paddle promotes only between floating dtypes, "
                   "so cast one of them first",
                   pd_dtype_name(x->dtype), pd_dtype_name(y->dtype));
      return NULL;
    }
    pd_internal_enter();
    pd_tensor *xc = x->dtype != dt ? pd_cast(x, dt) : NULL;
    pd_tensor *yc = y->dtype != dt ? pd_cast(y, dt) : NULL;
    pd_internal_leave();
    pd_tensor *in[3] = {cond, xc ? xc : x, yc ? yc : y};
    pd_tensor *r =
        (x->dtype != dt && !xc) || (y->dtype != dt && !yc) ? NULL : pd_dispatch1(PD_OP_where, in, 3, NULL);
    pd_tensor_release(xc);
    pd_tensor_release(yc);
    return r;
  }
  pd_tensor *in[3] = {cond, x, y};
  return pd_dispatch1(PD_OP_where, in, 3, NULL);
}
