/* dot (1-D, or row-wise over 2-D) and t (transpose of a tensor of rank <= 2). */
#include "../../kernels/cpu/parallel.h"
#include <string.h>

#include "linalg_util.h"
#include "paddlec/ops.h"

/* ---- dot -------------------------------------------------------------------- */

#define DOT_GRAIN 32768

static pd_status dot_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                          pd_meta *out, int *n_out) {
  (void)n_in;
  (void)a;
  const pd_tensor *x = in[0], *y = in[1];
  *n_out = 1;
  if (x->dtype != PD_FLOAT32 && x->dtype != PD_FLOAT64)
    return pd_set_error(PD_ERR_DTYPE,
                        "%s: dtype %s of x is not supported (expected float16, bfloat16, "
                        "float32 or float64)",
                        def->name, pd_dtype_name(x->dtype));
  if (y->dtype != x->dtype)
    return pd_set_error(PD_ERR_DTYPE, "%s: x and y must have the same dtype, got %s and %s", def->name,
                        pd_dtype_name(x->dtype), pd_dtype_name(y->dtype));
  if ((x->ndim != 1 && x->ndim != 2) || x->ndim != y->ndim)
    return pd_set_error(PD_ERR_SHAPE, "%s: x and y must both be 1-D or both 2-D, got x shape %s, y shape %s",
                        def->name, PD_SHAPE_STR(x), PD_SHAPE_STR(y));
  for (int d = 0; d < x->ndim; d++)
    if (!pd_dims_agree(x->shape[d], y->shape[d]))
      return pd_set_error(
          PD_ERR_SHAPE, "%s: x.shape[%d] (%lld) != y.shape[%d] (%lld) (x shape %s, y shape %s)", def->name, d,
          (long long)x->shape[d], d, (long long)y->shape[d], PD_SHAPE_STR(x), PD_SHAPE_STR(y));
  out->dtype = x->dtype;
  out->ndim = x->ndim - 1;
  if (out->ndim) out->shape[0] = x->shape[0];
  return PD_OK;
}

/* One dot product of n elements, summed in blocks of DOT_BLOCK whose sums
 * are added in order; `par` computes the blocks over the threads (the same
 * bits on any number of threads). */
#define DOT_BLOCK 8192
#define DEFINE_DOT_RUN(sfx, T)                                                                      \
  static PD_NOINLINE T dot_block_##sfx(int64_t n, const T *a, int64_t sa, const T *b, int64_t sb) { \
    T s = 0;                                                                                        \
    if (sa == 1 && sb == 1) {                                                                       \
      _Pragma("omp simd reduction(+ : s)") for (int64_t k = 0; k < n; k++) s += a[k] * b[k];        \
    } else {                                                                                        \
      for (int64_t k = 0; k < n; k++) s += a[k * sa] * b[k * sb];                                   \
    }                                                                                               \
    return s;                                                                                       \
  }                                                                                                 \
  static T dot_run_##sfx(int64_t n, const T *a, int64_t sa, const T *b, int64_t sb, bool par) {     \
    if (n <= DOT_BLOCK) return dot_block_##sfx(n, a, sa, b, sb);                                    \
    T s = 0;                                                                                        \
    PD_ORDERED_SUM(T, s, (n + DOT_BLOCK - 1) / DOT_BLOCK, par, k,                                   \
                   dot_block_##sfx(n - k * DOT_BLOCK < DOT_BLOCK ? n - k * DOT_BLOCK : DOT_BLOCK,   \
                                   a + k * DOT_BLOCK * sa, sa, b + k * DOT_BLOCK * sb, sb));        \
    return s;                                                                                       \
  }
DEFINE_DOT_RUN(f32, float)
DEFINE_DOT_RUN(f64, double)

static pd_status dot_kernel(const pd_kernel_ctx *ctx) {
  const pd_tensor *x = ctx->in[0], *y = ctx->in[1];
  int last = x->ndim - 1;
  int64_t rows = x->ndim == 2 ? x->shape[0] : 1, n = x->shape[last];
  int64_t sxr = x->ndim == 2 ? x->strides[0] : 0, syr = y->ndim == 2 ? y->strides[0] : 0;
  if (rows == 0) return PD_OK;
  int64_t sxk = x->strides[last], syk = y->strides[last];
  bool big = rows * n > DOT_GRAIN;
  if (x->dtype == PD_FLOAT32) {
    const float *xp = pd_tensor_data(x), *yp = pd_tensor_data(y);
    float *o = pd_tensor_data(ctx->out[0]);
    if (rows == 1) {
      o[0] = dot_run_f32(n, xp, sxk, yp, syk, big);
    } else {
      PD_OMP_FOR_IF(big, for (int64_t r = 0; r < rows; r++),
                    o[r] = dot_run_f32(n, xp + r * sxr, sxk, yp + r * syr, syk, false););
    }
  } else {
    const double *xp = pd_tensor_data(x), *yp = pd_tensor_data(y);
    double *o = pd_tensor_data(ctx->out[0]);
    if (rows == 1) {
      o[0] = dot_run_f64(n, xp, sxk, yp, syk, big);
    } else {
      PD_OMP_FOR_IF(big, for (int64_t r = 0; r < rows; r++),
                    o[r] = dot_run_f64(n, xp + r * sxr, sxk, yp + r * syr, syk, false););
    }
  }
  return PD_OK;
}

static pd_status dot_backward(const pd_backward_ctx *c) {
  const pd_meta *xm = &c->in_meta[0];
  pd_tensor *g = xm->ndim == 2 ? pd_reshape(c->grad_out[0], 2, (const int64_t[]){xm->shape[0], 1})
                               : pd_tensor_retain(c->grad_out[0]);
  if (!g) return pd_last_status();
  pd_status st = PD_OK;
  for (int i = 0; i < 2 && st == PD_OK; i++) {
    if (!c->needs_grad[i]) continue;
    c->grad_in[i] = pd_multiply(g, c->inputs[1 - i]);
    if (!c->grad_in[i]) st = pd_last_status();
  }
  pd_tensor_release(g);
  return st;
}

static double dot_flops(pd_tensor *const *in, int n_in, const pd_attrs *a, const pd_meta *out, int n_out) {
  (void)n_in;
  (void)a;
  (void)out;
  (void)n_out;
  return 2.0 * (double)in[0]->numel;
}

PD_OPDEF(dot, .attr_names = "", .n_in = 2, .n_out = 1,
         .flags = PD_OPF_DIFF | PD_OPF_SAVE_IN | PD_OPF_HALF_VIA_F32, .infer_meta = dot_meta,
         .kernel = {[PD_PLACE_CPU] = dot_kernel}, .backward = dot_backward, .flops = dot_flops);

pd_tensor *pd_dot(pd_tensor *x, pd_tensor *y) {
  pd_tensor *in[2] = {x, y};
  return pd_dispatch1(PD_OP_dot, in, 2, NULL);
}

/* ---- t ---------------------------------------------------------------------- */

static pd_status t_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a, pd_meta *out,
                        int *n_out) {
  (void)n_in;
  (void)a;
  const pd_tensor *x = in[0];
  *n_out = 1;
  if (x->ndim > 2)
    return pd_set_error(PD_ERR_SHAPE,
                        "%s: input must have rank <= 2, got rank %d (shape %s); use transpose "
                        "for higher ranks",
                        def->name, x->ndim, PD_SHAPE_STR(x));
  out->dtype = x->dtype;
  out->ndim = x->ndim;
  for (int d = 0; d < x->ndim; d++) out->shape[d] = x->shape[x->ndim - 1 - d];
  return PD_OK;
}

static pd_status t_kernel(const pd_kernel_ctx *ctx) {
  const pd_tensor *x = ctx->in[0];
  int64_t strides[PD_MAX_DIMS];
  for (int d = 0; d < x->ndim; d++) strides[d] = x->strides[x->ndim - 1 - d];
  ctx->out[0] = pd_tensor_new_view(x, ctx->meta[0].ndim, ctx->meta[0].shape, strides, x->offset);
  return ctx->out[0] ? PD_OK : pd_last_status();
}

static pd_status t_backward(const pd_backward_ctx *c) {
  if (!c->needs_grad[0]) return PD_OK;
  c->grad_in[0] = pd_t(c->grad_out[0]);
  return c->grad_in[0] ? PD_OK : pd_last_status();
}

PD_OPDEF(t, .attr_names = "", .n_in = 1, .n_out = 1, .flags = PD_OPF_DIFF | PD_OPF_VIEW, .infer_meta = t_meta,
         .kernel = {[PD_PLACE_CPU] = t_kernel}, .backward = t_backward);

pd_tensor *pd_t(pd_tensor *input) { return pd_dispatch1(PD_OP_t, &input, 1, NULL); }
