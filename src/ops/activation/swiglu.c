/* swiglu(x, y) = silu(x) * y (paddle.incubate.nn.functional.swiglu); with
 * one input, x's last dim holds [a | b] and the result is silu(a) * b.
 * The backward is one fused op, swiglu_grad (first order, as Paddle's). */
#include <string.h>

#include "../../kernels/cpu/parallel.h"
#include "../elementwise/elementwise_util.h"

PD_EW_BINARY(swiglu_f32, float, float, x / (1.0f + pd_vexpf(-x)) * y)
PD_EW_BINARY(swiglu_f64, double, double, x / (1.0 + exp(-x)) * y)
static const pd_ew_fn k_swiglu[PD_NUM_DTYPES] = PD_EW_TABLE_FLOAT(swiglu);

/* The gate's gradient at one element: g b s (1 + a (1 - s)), s = sigmoid(a). */
#define GATE_D(T, a, b, g, sg) ((g) * (b) * (sg) * ((T)1 + (a) * ((T)1 - (sg))))

/* grad of the gate (operands: out, a, b, g); in the CPU variants of
 * kvariant.h, as the generated functions above */
#define GATE_GRAD(sfx, T, SIG)                                                                          \
  PD_VINLINE void gate_grad_##sfx##_body(int64_t n, char *const *p, const int64_t *s, const void *pp) { \
    (void)pp;                                                                                           \
    T *o = (T *)p[0];                                                                                   \
    const T *a = (const T *)p[1], *b = (const T *)p[2], *g = (const T *)p[3];                           \
    if (s[0] == 1 && s[1] == 1 && s[2] == 1 && s[3] == 1) {                                             \
      PD_SIMD for (int64_t i = 0; i < n; i++) {                                                         \
        T sg = SIG(a[i]);                                                                               \
        o[i] = GATE_D(T, a[i], b[i], g[i], sg);                                                         \
      }                                                                                                 \
    } else {                                                                                            \
      for (int64_t i = 0; i < n; i++) {                                                                 \
        T av = a[i * s[1]], sg = SIG(av);                                                               \
        o[i * s[0]] = GATE_D(T, av, b[i * s[2]], g[i * s[3]], sg);                                      \
      }                                                                                                 \
    }                                                                                                   \
  }                                                                                                     \
  PD_KCLONES(gate_grad_##sfx, (int64_t n, char *const *p, const int64_t *s, const void *pp), (n, p, s, pp))
GATE_GRAD(f32, float, pd_vsigmoidf)
GATE_GRAD(f64, double, pd_sigmoidd)
static const pd_ew_fn k_gate_grad[PD_NUM_DTYPES] = PD_EW_TABLE_FLOAT(gate_grad);
/* grad of the value: g silu(a) (operands: out, a, g) */
PD_EW_BINARY(value_grad_f32, float, float, y *(x / (1.0f + pd_vexpf(-x))))
PD_EW_BINARY(value_grad_f64, double, double, y *(x / (1.0 + exp(-x))))
static const pd_ew_fn k_value_grad[PD_NUM_DTYPES] = PD_EW_TABLE_FLOAT(value_grad);

/* Both gradients in one pass over contiguous operands, one sigmoid per
 * element: da = g b s (1 + a (1 - s)), db = g a s (s = sigmoid(a)). */
#define BOTH_GRADS(sfx, T, SIG)                                                                            \
  PD_VINLINE void swiglu_grads_##sfx##_body(int64_t n, const T *a, const T *b, const T *g, T *da, T *db) { \
    PD_SIMD for (int64_t i = 0; i < n; i++) {                                                              \
      T sg = SIG(a[i]);                                                                                    \
      da[i] = GATE_D(T, a[i], b[i], g[i], sg);                                                             \
      db[i] = g[i] * (a[i] * sg);                                                                          \
    }                                                                                                      \
  }                                                                                                        \
  PD_KCLONES(swiglu_grads_##sfx, (int64_t n, const T *a, const T *b, const T *g, T *da, T *db),            \
             (n, a, b, g, da, db))
BOTH_GRADS(f32, float, pd_vsigmoidf)
BOTH_GRADS(f64, double, pd_sigmoidd)

/* The one-pass path: float32 or float64, every operand contiguous (the
 * two-input form; the one-input form's halves are strided views). */
static bool both_grads_in_one_pass(pd_tensor *a, pd_tensor *b, pd_tensor *g, pd_tensor *da, pd_tensor *db) {
  pd_tensor *t[5] = {a, b, g, da, db};
  for (int i = 0; i < 5; i++)
    if (!t[i]->is_contiguous || t[i]->dtype != a->dtype || t[i]->numel != a->numel) return false;
  if (a->dtype != PD_FLOAT32 && a->dtype != PD_FLOAT64) return false;
  const int64_t n = a->numel, chunk = 4096, nc = (n + chunk - 1) / chunk;
#define RUN(T, sfx)                                                           \
  do {                                                                        \
    const T *pa = pd_data_ptr(a), *pb = pd_data_ptr(b), *pg = pd_data_ptr(g); \
    T *pda = pd_data_ptr(da), *pdb = pd_data_ptr(db);                         \
    PD_PARALLEL_FOR(c, nc, PD_GRAIN / chunk, {                                \
      int64_t i0 = c * chunk, m = n - i0 < chunk ? n - i0 : chunk;            \
      swiglu_grads_##sfx(m, pa + i0, pb + i0, pg + i0, pda + i0, pdb + i0);   \
    });                                                                       \
  } while (0)
  if (a->dtype == PD_FLOAT32)
    RUN(float, f32);
  else
    RUN(double, f64);
#undef RUN
  return true;
}

/* Views of the two halves of t's last dim (new references). */
static pd_status halves(pd_tensor *t, pd_tensor **a, pd_tensor **b) {
  int64_t shape[PD_MAX_DIMS];
  int last = t->ndim - 1;
  memcpy(shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
  shape[last] /= 2;
  *a = pd_tensor_new_view(t, t->ndim, shape, t->strides, t->offset);
  *b = pd_tensor_new_view(t, t->ndim, shape, t->strides, t->offset + shape[last] * t->strides[last]);
  if (*a && *b) return PD_OK;
  pd_tensor_release(*a);
  pd_tensor_release(*b);
  *a = *b = NULL;
  return pd_last_status();
}

/* The shape of silu(a) * b for one input x, or two inputs x, y. */
static pd_status check_inputs(const pd_op_def *def, pd_tensor *const *in, int n_x, pd_meta *m) {
  if (n_x == 2) {
    if (in[0]->ndim != in[1]->ndim || !pd_shapes_agree(in[0]->ndim, in[0]->shape, in[1]->shape))
      return pd_set_error(PD_ERR_SHAPE, "%s: x of shape %s and y of shape %s must have the same shape",
                          def->name, PD_SHAPE_STR(in[0]), PD_SHAPE_STR(in[1]));
    pd_meta_of(in[0], m);
    return PD_OK;
  }
  if (in[0]->ndim == 0 || in[0]->shape[in[0]->ndim - 1] % 2 != 0)
    return pd_set_error(PD_ERR_SHAPE,
                        "%s: with y omitted the last dim of x (shape %s) must be even, "
                        "to split into two halves",
                        def->name, PD_SHAPE_STR(in[0]));
  pd_meta_of(in[0], m);
  m->shape[m->ndim - 1] /= 2;
  return PD_OK;
}

static pd_status swiglu_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                             pd_meta *out, int *n_out) {
  (void)a;
  if (n_in != 1 && n_in != 2)
    return pd_set_error(PD_ERR_INVALID, "%s: expects 1 or 2 inputs, got %d", def->name, n_in);
  *n_out = 1;
  return check_inputs(def, in, n_in, out);
}

static pd_status swiglu_kernel(const pd_kernel_ctx *ctx) {
  if (ctx->n_in == 2)
    return pd_ew_apply(ctx->def->name, k_swiglu, ctx->in[0]->dtype, ctx->out[0], ctx->in, 2, NULL);
  pd_tensor *ab[2];
  if (halves(ctx->in[0], &ab[0], &ab[1]) != PD_OK) return pd_last_status();
  pd_status st = pd_ew_apply(ctx->def->name, k_swiglu, ctx->in[0]->dtype, ctx->out[0], ab, 2, NULL);
  pd_tensor_release(ab[0]);
  pd_tensor_release(ab[1]);
  return st;
}

/* swiglu_grad(x, [y], g) -> dx, [dy] */
static pd_status swiglu_grad_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                                  pd_meta *out, int *n_out) {
  (void)a;
  if (n_in != 2 && n_in != 3)
    return pd_set_error(PD_ERR_INVALID, "%s: expects 2 or 3 inputs, got %d", def->name, n_in);
  pd_meta m;
  pd_status st = check_inputs(def, in, n_in - 1, &m);
  if (st != PD_OK) return st;
  pd_tensor *g = in[n_in - 1];
  if (g->ndim != m.ndim || !pd_shapes_agree(m.ndim, g->shape, m.shape) || g->dtype != in[0]->dtype)
    return pd_set_error(PD_ERR_SHAPE, "%s: grad of shape %s (%s) does not match the output", def->name,
                        PD_SHAPE_STR(g), pd_dtype_name(g->dtype));
  *n_out = n_in - 1;
  for (int k = 0; k < *n_out; k++) pd_meta_of(in[k], &out[k]);
  return PD_OK;
}

static pd_status swiglu_grad_kernel(const pd_kernel_ctx *ctx) {
  pd_tensor *av = NULL, *bv = NULL, *dav = NULL, *dbv = NULL;
  pd_status st = PD_OK;
  pd_tensor *g = ctx->in[ctx->n_in - 1];
  if (ctx->n_in == 3) {
    av = pd_tensor_retain(ctx->in[0]), bv = pd_tensor_retain(ctx->in[1]);
    dav = pd_tensor_retain(ctx->out[0]), dbv = pd_tensor_retain(ctx->out[1]);
  } else if ((st = halves(ctx->in[0], &av, &bv)) == PD_OK) {
    st = halves(ctx->out[0], &dav, &dbv);
  }
  bool done = st == PD_OK && both_grads_in_one_pass(av, bv, g, dav, dbv);
  if (st == PD_OK && !done) {
    pd_tensor *ops[3] = {av, bv, g};
    st = pd_ew_apply(ctx->def->name, k_gate_grad, av->dtype, dav, ops, 3, NULL);
  }
  if (st == PD_OK && !done) {
    pd_tensor *ops[2] = {av, g};
    st = pd_ew_apply(ctx->def->name, k_value_grad, av->dtype, dbv, ops, 2, NULL);
  }
  pd_tensor_release(av);
  pd_tensor_release(bv);
  pd_tensor_release(dav);
  pd_tensor_release(dbv);
  return st;
}

static pd_status swiglu_backward(const pd_backward_ctx *c) {
  pd_tensor *in[3], *outs[PD_MAX_OUTPUTS];
  int n = 0, no = 0;
  for (int i = 0; i < c->n_in; i++) in[n++] = c->inputs[i];
  in[n++] = c->grad_out[0];
  pd_status st = pd_dispatch(PD_OP_swiglu_grad, in, n, NULL, outs, &no);
  if (st != PD_OK) return st;
  for (int k = 0; k < no; k++) {
    if (c->needs_grad[k])
      c->grad_in[k] = outs[k];
    else
      pd_tensor_release(outs[k]);
  }
  return PD_OK;
}

PD_OPDEF(swiglu, .attr_names = "", .n_in = -1, .n_out = 1,
         .flags = PD_OPF_DIFF | PD_OPF_PROMOTE | PD_OPF_FLOAT_ONLY | PD_OPF_HALF_VIA_F32 | PD_OPF_SAVE_IN |
                  PD_OPF_RECOMPUTE,
         .infer_meta = swiglu_meta, .kernel = {[PD_PLACE_CPU] = swiglu_kernel}, .backward = swiglu_backward,
         .flops = pd_flops_per_elem);
PD_OPDEF(swiglu_grad, .attr_names = "", .n_in = -1, .n_out = -1, .flags = PD_OPF_FLOAT_ONLY,
         .infer_meta = swiglu_grad_meta, .kernel = {[PD_PLACE_CPU] = swiglu_grad_kernel});

pd_tensor *pd_swiglu(pd_tensor *x, pd_tensor *y) {
  pd_tensor *in[2] = {x, y};
  return pd_dispatch1(PD_OP_swiglu, in, y ? 2 : 1, NULL);
}
