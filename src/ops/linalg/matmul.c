/* matmul and the products built on the same GEMM driver: mm, bmm, mv, addmm.
 *
 * The driver views each operand as a (possibly broadcast) batch of R x C
 * matrices. A matrix whose rows are unit-stride goes to GEMM as is; one
 * whose columns are unit-stride (a transposed view) goes with the transpose
 * flag flipped; anything else is copied to contiguous memory first. Batch
 * dims are coalesced, a weight shared by every batch folds the batch into M
 * (one large GEMM), and the rest runs as strided batches. */
#include <string.h>

#include "../../kernels/cpu/gemm.h"
#include "../../kernels/cpu/gemm_backup.h"
#include "linalg_util.h"
#include "paddlec/ops.h"

/* ---- shapes ---------------------------------------------------------------- */

static pd_status check_float_pair(const char *op, const pd_tensor *x, const pd_tensor *y) {
  if (x->dtype != PD_FLOAT32 && x->dtype != PD_FLOAT64)
    return pd_set_error(PD_ERR_DTYPE,
                        "%s: dtype %s of x is not supported (expected float16, bfloat16, "
                        "float32 or float64)",
                        op, pd_dtype_name(x->dtype));
  if (y->dtype != x->dtype)
    return pd_set_error(PD_ERR_DTYPE, "%s: x and y must have the same dtype, got %s and %s", op,
                        pd_dtype_name(x->dtype), pd_dtype_name(y->dtype));
  return PD_OK;
}

pd_status pd_matmul_meta_of(const char *op, const pd_tensor *x, const pd_tensor *y, bool tx, bool ty,
                            pd_meta *out) {
  pd_status st = check_float_pair(op, x, y);
  if (st != PD_OK) return st;
  int xn = x->ndim, yn = y->ndim;
  if (xn < 1 || yn < 1)
    return pd_set_error(PD_ERR_SHAPE, "%s: x and y must have at least 1 dim, got x shape %s, y shape %s", op,
                        PD_SHAPE_STR(x), PD_SHAPE_STR(y));
  if (xn == 1) tx = false; /* a transpose flag has no effect on a vector */
  if (yn == 1) ty = false;
  int xk = xn == 1 ? 0 : (tx ? xn - 2 : xn - 1);
  int yk = yn == 1 ? 0 : (ty ? yn - 1 : yn - 2);
  if (!pd_dims_agree(x->shape[xk], y->shape[yk]))
    return pd_set_error(PD_ERR_SHAPE,
                        "%s: x.shape[%d] (%lld) != y.shape[%d] (%lld) (x shape %s, y shape %s, "
                        "transpose_x=%s, transpose_y=%s)",
                        op, xk, (long long)x->shape[xk], yk, (long long)y->shape[yk], PD_SHAPE_STR(x),
                        PD_SHAPE_STR(y), tx ? "true" : "false", ty ? "true" : "false");
  int nbx = xn > 2 ? xn - 2 : 0, nby = yn > 2 ? yn - 2 : 0, nbo = nbx > nby ? nbx : nby;
  out->dtype = x->dtype;
  out->ndim = 0;
  for (int d = 0; d < nbo; d++) {
    int dx = d - (nbo - nbx), dy = d - (nbo - nby);
    int64_t sx = dx < 0 ? 1 : x->shape[dx], sy = dy < 0 ? 1 : y->shape[dy];
    if (!pd_broadcast_dim(sx, sy, &out->shape[out->ndim]))
      return pd_set_error(PD_ERR_SHAPE,
                          "%s: batch dims cannot be broadcast: x.shape[%d] (%lld) vs y.shape[%d] "
                          "(%lld) (x shape %s, y shape %s)",
                          op, dx, (long long)sx, dy, (long long)sy, PD_SHAPE_STR(x), PD_SHAPE_STR(y));
    out->ndim++;
  }
  if (xn > 1) out->shape[out->ndim++] = x->shape[tx ? xn - 1 : xn - 2];
  if (yn > 1) out->shape[out->ndim++] = y->shape[ty ? yn - 2 : yn - 1];
  return PD_OK;
}

/* ---- the driver ------------------------------------------------------------ */

/* One operand as a batch of R x C matrices; bstride per output batch dim. */
typedef struct operand {
  const pd_tensor *t;
  int64_t R, C, sr, sc;
  int64_t bstride[PD_MAX_DIMS];
} operand;

static void describe(operand *o, const pd_tensor *t, bool is_x, int nbo, const int64_t *bshape) {
  int n = t->ndim;
  o->t = t;
  if (n == 1) {
    if (is_x) { /* [K] as [1, K] */
      o->R = 1, o->C = t->shape[0], o->sr = 0, o->sc = t->strides[0];
    } else { /* [K] as [K, 1] */
      o->R = t->shape[0], o->C = 1, o->sr = t->strides[0], o->sc = 0;
    }
  } else {
    o->R = t->shape[n - 2], o->C = t->shape[n - 1];
    o->sr = t->strides[n - 2], o->sc = t->strides[n - 1];
  }
  int nb = n > 2 ? n - 2 : 0;
  for (int d = 0; d < nbo; d++) {
    int td = d - (nbo - nb);
    o->bstride[d] = td < 0 || t->shape[td] == 1 || bshape[d] == 1 ? 0 : t->strides[td];
  }
}

/* How GEMM reads the operand: stored row-major with leading dim *ld, and
 * whether GEMM must transpose it to get op(operand). False when neither
 * rows nor columns are unit-stride. */
static bool gemm_layout(const operand *o, bool trans, bool *gemm_trans, int64_t *ld) {
  int64_t cmin = o->C > 1 ? o->C : 1, rmin = o->R > 1 ? o->R : 1;
  if (o->C == 1 || o->sc == 1) { /* rows are unit-stride */
    int64_t l = o->R == 1 ? cmin : o->sr;
    if (l >= cmin) {
      *gemm_trans = trans;
      *ld = l;
      return true;
    }
  }
  if (o->R == 1 || o->sr == 1) { /* columns are unit-stride: memory holds the transpose */
    int64_t l = o->C == 1 ? rmin : o->sc;
    if (l >= rmin) {
      *gemm_trans = !trans;
      *ld = l;
      return true;
    }
  }
  return false;
}

/* a and b: the tensors whose data A and B point into (the GEMM may hand
 * their storages to helper threads that outlive the call: gemm_backup.h) */
static int run_gemm(pd_dtype dt, bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha,
                    const char *A, int64_t lda, int64_t sA, const char *B, int64_t ldb, int64_t sB,
                    double beta, char *C, int64_t ldc, int64_t sC, int64_t batch, const pd_tensor *a,
                    const pd_tensor *b) {
  if (dt == PD_FLOAT32) {
    const pdk_gemm_keep keep = {pd_storage_retain_ref, pd_storage_release_ref, {a->storage, b->storage}};
    pdk_gemm_keep_inputs(&keep);
    int rc = pdk_gemm_batched_f32(ta, tb, M, N, K, (float)alpha, (const float *)A, lda, sA, (const float *)B,
                                  ldb, sB, (float)beta, (float *)C, ldc, sC, batch);
    pdk_gemm_keep_inputs(NULL);
    return rc;
  }
  return pdk_gemm_batched_f64(ta, tb, M, N, K, alpha, (const double *)A, lda, sA, (const double *)B, ldb, sB,
                              beta, (double *)C, ldc, sC, batch);
}

static void scale_out(pd_tensor *out, double beta) {
  int64_t n = out->numel;
  if (out->dtype == PD_FLOAT32) {
    float *o = pd_tensor_data(out), b = (float)beta;
    for (int64_t i = 0; i < n; i++) o[i] = beta == 0 ? 0.0f : o[i] * b;
  } else {
    double *o = pd_tensor_data(out);
    for (int64_t i = 0; i < n; i++) o[i] = beta == 0 ? 0.0 : o[i] * beta;
  }
}

pd_status pd_matmul_into(const char *op, pd_tensor *x, pd_tensor *y, bool tx, bool ty, double alpha,
                         double beta, pd_tensor *out) {
  if (x->ndim == 2 && y->ndim == 2 && x->dtype == y->dtype && x->dtype == out->dtype &&
      (x->dtype == PD_FLOAT32 || x->dtype == PD_FLOAT64)) {
    /* two matrices (most products): straight to GEMM when both are read in
     * place; anything else (errors included) takes the general path below */
    operand ox = {.R = x->shape[0], .C = x->shape[1], .sr = x->strides[0], .sc = x->strides[1]};
    operand oy = {.R = y->shape[0], .C = y->shape[1], .sr = y->strides[0], .sc = y->strides[1]};
    int64_t M = tx ? ox.C : ox.R, K = tx ? ox.R : ox.C, N = ty ? oy.R : oy.C;
    bool ta, tb;
    int64_t lda, ldb;
    if (K == (ty ? oy.C : oy.R) && M > 0 && N > 0 && K > 0 && gemm_layout(&ox, tx, &ta, &lda) &&
        gemm_layout(&oy, ty, &tb, &ldb)) {
      int rc = run_gemm(out->dtype, ta, tb, M, N, K, alpha, pd_data_ptr(x), lda, 0, pd_data_ptr(y), ldb, 0,
                        beta, pd_data_ptr(out), N, 0, 1, x, y);
      if (rc != 0)
        return pd_set_error(PD_ERR_INVALID, "%s: GEMM failed (status %d) for M=%lld N=%lld K=%lld", op, rc,
                            (long long)M, (long long)N, (long long)K);
      return PD_OK;
    }
  }
  if (x->ndim == 1) tx = false;
  if (y->ndim == 1) ty = false;
  pd_meta m;
  pd_status st = pd_matmul_meta_of(op, x, y, tx, ty, &m);
  if (st != PD_OK) return st;
  int nbo = m.ndim - (x->ndim > 1) - (y->ndim > 1);
  int64_t bshape[PD_MAX_DIMS], batch = 1;
  for (int d = 0; d < nbo; d++) batch *= bshape[d] = m.shape[d];
  operand ox, oy;
  describe(&ox, x, true, nbo, bshape);
  describe(&oy, y, false, nbo, bshape);
  int64_t M = tx ? ox.C : ox.R, K = tx ? ox.R : ox.C, N = ty ? oy.R : oy.C;
  if (M == 0 || N == 0 || batch == 0) return PD_OK;
  if (K == 0) {
    scale_out(out, beta);
    return PD_OK;
  }

  pd_tensor *xc = NULL, *yc = NULL;
  bool ta = false, tb = false;
  int64_t lda = 0, ldb = 0;
  if (!gemm_layout(&ox, tx, &ta, &lda)) {
    if (!(xc = pd_clone(x, x->dtype))) return pd_last_status();
    describe(&ox, xc, true, nbo, bshape);
    gemm_layout(&ox, tx, &ta, &lda);
  }
  if (!gemm_layout(&oy, ty, &tb, &ldb)) {
    if (!(yc = pd_clone(y, y->dtype))) {
      pd_tensor_release(xc);
      return pd_last_status();
    }
    describe(&oy, yc, false, nbo, bshape);
    gemm_layout(&oy, ty, &tb, &ldb);
  }

  /* batch geometry: operand 0 = out (contiguous), 1 = x, 2 = y */
  int64_t bs[PD_MAX_DIMS], st3[3][PD_MAX_DIMS];
  int nb = 0;
  int64_t cstride = M * N;
  for (int d = nbo - 1; d >= 0; d--) { /* contiguous out strides, innermost first */
    st3[0][d] = cstride;
    cstride *= bshape[d];
  }
  for (int d = 0; d < nbo; d++) {
    if (bshape[d] == 1) continue;
    if (nb > 0 && st3[0][nb - 1] == st3[0][d] * bshape[d] && st3[1][nb - 1] == ox.bstride[d] * bshape[d] &&
        st3[2][nb - 1] == oy.bstride[d] * bshape[d]) {
      bs[nb - 1] *= bshape[d];
      st3[0][nb - 1] = st3[0][d];
      st3[1][nb - 1] = ox.bstride[d];
      st3[2][nb - 1] = oy.bstride[d];
      continue;
    }
    bs[nb] = bshape[d];
    st3[0][nb] = st3[0][d];
    st3[1][nb] = ox.bstride[d];
    st3[2][nb] = oy.bstride[d];
    nb++;
  }
  /* a weight shared by the innermost batch dim: fold that dim into M */
  if (nb > 0 && !ta && st3[2][nb - 1] == 0 && st3[1][nb - 1] == M * lda && st3[0][nb - 1] == M * N) {
    M *= bs[nb - 1];
    nb--;
  }

  size_t es = pd_dtype_size(out->dtype);
  const char *A = pd_tensor_data(xc ? xc : x), *B = pd_tensor_data(yc ? yc : y);
  char *C = pd_tensor_data(out);
  int64_t inner = nb > 0 ? bs[nb - 1] : 1, sA = nb > 0 ? st3[1][nb - 1] : 0, sB = nb > 0 ? st3[2][nb - 1] : 0,
          sC = nb > 0 ? st3[0][nb - 1] : 0;
  int64_t outer = 1, idx[PD_MAX_DIMS] = {0};
  for (int d = 0; d < nb - 1; d++) outer *= bs[d];
  int rc = 0;
  for (int64_t o = 0; o < outer && rc == 0; o++) {
    int64_t offa = 0, offb = 0, offc = 0;
    for (int d = 0; d < nb - 1; d++) {
      offc += idx[d] * st3[0][d];
      offa += idx[d] * st3[1][d];
      offb += idx[d] * st3[2][d];
    }
    rc = run_gemm(out->dtype, ta, tb, M, N, K, alpha, A + offa * (int64_t)es, lda, sA, B + offb * (int64_t)es,
                  ldb, sB, beta, C + offc * (int64_t)es, N, sC, inner, xc ? xc : x, yc ? yc : y);
    for (int d = nb - 2; d >= 0; d--) {
      if (++idx[d] < bs[d]) break;
      idx[d] = 0;
    }
  }
  pd_tensor_release(xc);
  pd_tensor_release(yc);
  if (rc != 0)
    return pd_set_error(PD_ERR_INVALID, "%s: GEMM failed (status %d) for M=%lld N=%lld K=%lld", op, rc,
                        (long long)M, (long long)N, (long long)K);
  return PD_OK;
}

/* ---- matmul / mm ------------------------------------------------------------ */

static pd_status matmul_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                             pd_meta *out, int *n_out) {
  (void)n_in;
  *n_out = 1;
  return pd_matmul_meta_of(def->name, in[0], in[1], a->i[0] != 0, a->i[1] != 0, out);
}

static pd_status matmul_kernel(const pd_kernel_ctx *ctx) {
  return pd_matmul_into(ctx->def->name, ctx->in[0], ctx->in[1], ctx->attrs->i[0] != 0, ctx->attrs->i[1] != 0,
                        1.0, 0.0, ctx->out[0]);
}

/* 2 * M * N * K per batch = 2 * numel(out) * K. */
static double matmul_flops(pd_tensor *const *in, int n_in, const pd_attrs *a, const pd_meta *out, int n_out) {
  (void)n_in;
  (void)n_out;
  const pd_tensor *x = in[0];
  bool tx = a->i[0] && x->ndim > 1;
  int64_t K = x->ndim == 1 ? x->shape[0] : x->shape[tx ? x->ndim - 2 : x->ndim - 1];
  return 2.0 * (double)pd_shape_numel(out->ndim, out->shape) * (double)K;
}

static pd_status reduce_into(const pd_backward_ctx *c, int i, pd_tensor *g) {
  if (!g) return pd_last_status();
  c->grad_in[i] = pd_grad_reduce_to(g, c->in_meta[i].ndim, c->in_meta[i].shape);
  pd_tensor_release(g);
  return c->grad_in[i] ? PD_OK : pd_last_status();
}

/* Gradients of out = op(x) @ op(y) (op = optional transpose of the last two
 * dims), written with matmul itself so they are differentiable again:
 *   dx = g y^T | y g^T (tx) | g y (ty) | y^T g^T (both)
 *   dy = x^T g | x g (tx)   | g^T x (ty) | g^T x^T (both)
 * then summed over broadcast batch dims. Vectors are handled as [1, K] / [K, 1]. */
static pd_status matmul_grads(const pd_backward_ctx *c, pd_tensor *x, pd_tensor *y, bool tx, bool ty,
                              double alpha) {
  const pd_meta *xm = &c->in_meta[0], *ym = &c->in_meta[1];
  pd_tensor *g = c->grad_out[0];
  int xn = xm->ndim, yn = ym->ndim;
  if (xn == 1) tx = false;
  if (yn == 1) ty = false;
  pd_tensor *x2 = xn == 1 ? pd_reshape(x, 2, (const int64_t[]){1, xm->shape[0]}) : pd_tensor_retain(x);
  pd_tensor *y2 = yn == 1 ? pd_reshape(y, 2, (const int64_t[]){ym->shape[0], 1}) : pd_tensor_retain(y);
  int64_t gs[PD_MAX_DIMS];
  int gn;
  const int64_t *g_shape = pd_global_shape(g, &gn); /* a DTensor gradient: its global shape */
  memcpy(gs, g_shape, sizeof(int64_t) * (size_t)gn);
  if (xn == 1) { /* put M = 1 back before N (or at the end) */
    int at = yn == 1 ? gn : gn - 1;
    memmove(gs + at + 1, gs + at, sizeof(int64_t) * (size_t)(gn - at));
    gs[at] = 1;
    gn++;
  }
  if (yn == 1) gs[gn++] = 1;
  pd_tensor *g2 = pd_reshape(g, gn, gs);
  pd_status st = x2 && y2 && g2 ? PD_OK : pd_last_status();

  if (st == PD_OK && c->needs_grad[0]) {
    pd_tensor *r = !tx && !ty  ? pd_matmul(g2, y2, false, true)
                   : tx && !ty ? pd_matmul(y2, g2, false, true)
                   : !tx       ? pd_matmul(g2, y2, false, false)
                               : pd_matmul(y2, g2, true, true);
    if (r && alpha != 1.0) {
      pd_tensor *s = pd_scale(r, alpha, 0.0, true);
      pd_tensor_release(r);
      r = s;
    }
    st = reduce_into(c, 0, r);
  }
  if (st == PD_OK && c->needs_grad[1]) {
    pd_tensor *r;
    if (yn == 2 && xn > 2 && !tx) {
      /* a weight shared over x's batch: one GEMM over the flattened rows */
      int64_t K = xm->shape[xn - 1], N = gs[gn - 1];
      pd_tensor *xf = pd_reshape(x2, 2, (const int64_t[]){-1, K});
      pd_tensor *gf = pd_reshape(g2, 2, (const int64_t[]){-1, N});
      r = ty ? pd_matmul(gf, xf, true, false) : pd_matmul(xf, gf, true, false);
      pd_tensor_release(xf);
      pd_tensor_release(gf);
    } else {
      r = !tx && !ty  ? pd_matmul(x2, g2, true, false)
          : tx && !ty ? pd_matmul(x2, g2, false, false)
          : !tx       ? pd_matmul(g2, x2, true, false)
                      : pd_matmul(g2, x2, true, true);
    }
    if (r && yn == 1) { /* [..., K, 1] -> [..., K] */
      int rn;
      const int64_t *r_shape = pd_global_shape(r, &rn);
      pd_tensor *s = pd_reshape(r, rn - 1, r_shape);
      pd_tensor_release(r);
      r = s;
    }
    if (r && alpha != 1.0) {
      pd_tensor *s = pd_scale(r, alpha, 0.0, true);
      pd_tensor_release(r);
      r = s;
    }
    st = reduce_into(c, 1, r);
  }
  pd_tensor_release(x2);
  pd_tensor_release(y2);
  pd_tensor_release(g2);
  return st;
}

static pd_status matmul_backward(const pd_backward_ctx *c) {
  return matmul_grads(c, c->inputs[0], c->inputs[1], c->attrs->i[0] != 0, c->attrs->i[1] != 0, 1.0);
}

#define MATMUL_FLAGS (PD_OPF_DIFF | PD_OPF_SAVE_IN | PD_OPF_HALF_VIA_F32)

PD_OPDEF(matmul, .n_in = 2, .n_out = 1, .flags = MATMUL_FLAGS, .attr_names = "i0:transpose_x,i1:transpose_y",
         .infer_meta = matmul_meta, .kernel = {[PD_PLACE_CPU] = matmul_kernel}, .backward = matmul_backward,
         .flops = matmul_flops);

/* mm: Paddle's paddle.mm, matmul without transpose flags. */
PD_OPDEF(mm, .attr_names = "", .n_in = 2, .n_out = 1, .flags = MATMUL_FLAGS, .infer_meta = matmul_meta,
         .kernel = {[PD_PLACE_CPU] = matmul_kernel}, .backward = matmul_backward, .flops = matmul_flops);

/* ---- bmm ---------------------------------------------------------------------- */

static pd_status bmm_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                          pd_meta *out, int *n_out) {
  (void)n_in;
  (void)a;
  const pd_tensor *x = in[0], *y = in[1];
  *n_out = 1;
  if (x->ndim != 3 || y->ndim != 3)
    return pd_set_error(PD_ERR_SHAPE, "%s: x and y must be 3-D, got x shape %s, y shape %s", def->name,
                        PD_SHAPE_STR(x), PD_SHAPE_STR(y));
  if (!pd_dims_agree(x->shape[0], y->shape[0]))
    return pd_set_error(PD_ERR_SHAPE,
                        "%s: x.shape[0] (%lld) != y.shape[0] (%lld) (batch sizes differ; x shape "
                        "%s, y shape %s)",
                        def->name, (long long)x->shape[0], (long long)y->shape[0], PD_SHAPE_STR(x),
                        PD_SHAPE_STR(y));
  return pd_matmul_meta_of(def->name, x, y, false, false, out);
}

PD_OPDEF(bmm, .attr_names = "", .n_in = 2, .n_out = 1, .flags = MATMUL_FLAGS, .infer_meta = bmm_meta,
         .kernel = {[PD_PLACE_CPU] = matmul_kernel}, .backward = matmul_backward, .flops = matmul_flops);

/* ---- mv --------------------------------------------------------------------- */

static pd_status mv_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                         pd_meta *out, int *n_out) {
  (void)n_in;
  (void)a;
  const pd_tensor *x = in[0], *v = in[1];
  *n_out = 1;
  if (x->ndim != 2 || v->ndim != 1)
    return pd_set_error(PD_ERR_SHAPE, "%s: x must be 2-D and vec 1-D, got x shape %s, vec shape %s",
                        def->name, PD_SHAPE_STR(x), PD_SHAPE_STR(v));
  if (!pd_dims_agree(x->shape[1], v->shape[0]))
    return pd_set_error(PD_ERR_SHAPE,
                        "%s: x.shape[1] (%lld) != vec.shape[0] (%lld) (x shape %s, vec shape %s)", def->name,
                        (long long)x->shape[1], (long long)v->shape[0], PD_SHAPE_STR(x), PD_SHAPE_STR(v));
  return pd_matmul_meta_of(def->name, x, v, false, false, out);
}

PD_OPDEF(mv, .attr_names = "", .n_in = 2, .n_out = 1, .flags = MATMUL_FLAGS, .infer_meta = mv_meta,
         .kernel = {[PD_PLACE_CPU] = matmul_kernel}, .backward = matmul_backward, .flops = matmul_flops);

/* ---- addmm: beta * input + alpha * (x @ y) ---------------------------------- */

static pd_status addmm_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                            pd_meta *out, int *n_out) {
  (void)n_in;
  (void)a;
  const pd_tensor *inp = in[0], *x = in[1], *y = in[2];
  *n_out = 1;
  if (x->ndim != 2 || y->ndim != 2)
    return pd_set_error(PD_ERR_SHAPE, "%s: x and y must be 2-D, got x shape %s, y shape %s", def->name,
                        PD_SHAPE_STR(x), PD_SHAPE_STR(y));
  if (inp->ndim != 1 && inp->ndim != 2)
    return pd_set_error(PD_ERR_SHAPE, "%s: input must be 1-D or 2-D, got shape %s", def->name,
                        PD_SHAPE_STR(inp));
  if (inp->dtype != x->dtype)
    return pd_set_error(PD_ERR_DTYPE, "%s: input, x and y must have the same dtype, got %s, %s and %s",
                        def->name, pd_dtype_name(inp->dtype), pd_dtype_name(x->dtype),
                        pd_dtype_name(y->dtype));
  pd_status st = pd_matmul_meta_of(def->name, x, y, false, false, out);
  if (st != PD_OK) return st;
  int lead = 2 - inp->ndim;
  for (int d = 0; d < inp->ndim; d++) {
    /* the product's dim, or the input's where the product's is unknown */
    if (!pd_broadcast_dim(out->shape[d + lead], inp->shape[d], &out->shape[d + lead])) {
      char b[160];
      return pd_set_error(PD_ERR_SHAPE, "%s: input of shape %s cannot be broadcast to the product's shape %s",
                          def->name, PD_SHAPE_STR(inp), pd_shape_str(out->ndim, out->shape, b, sizeof b));
    }
  }
  return PD_OK;
}

#define BCAST_FILL(T)                                          \
  do {                                                         \
    T *o = pd_tensor_data(out);                                \
    const T *p = pd_tensor_data(inp);                          \
    for (int64_t i = 0; i < M; i++) {                          \
      const T *row = p + i * si;                               \
      T *orow = o + i * N;                                     \
      if (sj == 1) {                                           \
        for (int64_t j = 0; j < N; j++) orow[j] = row[j];      \
      } else {                                                 \
        for (int64_t j = 0; j < N; j++) orow[j] = row[j * sj]; \
      }                                                        \
    }                                                          \
  } while (0)

static pd_status addmm_kernel(const pd_kernel_ctx *ctx) {
  pd_tensor *inp = ctx->in[0], *out = ctx->out[0];
  double beta = ctx->attrs->f[0], alpha = ctx->attrs->f[1];
  int64_t M = out->shape[0], N = out->shape[1];
  if (beta != 0.0 && out->numel > 0) {
    int lead = 2 - inp->ndim;
    int64_t si = lead > 0 || inp->shape[0] == 1 ? 0 : inp->strides[0];
    int64_t sj = inp->shape[inp->ndim - 1] == 1 ? 0 : inp->strides[inp->ndim - 1];
    if (out->dtype == PD_FLOAT32)
      BCAST_FILL(float);
    else
      BCAST_FILL(double);
  }
  return pd_matmul_into(ctx->def->name, ctx->in[1], ctx->in[2], false, false, alpha, beta, out);
}

static double addmm_flops(pd_tensor *const *in, int n_in, const pd_attrs *a, const pd_meta *out, int n_out) {
  (void)n_in;
  (void)a;
  (void)n_out;
  return 2.0 * (double)pd_shape_numel(out->ndim, out->shape) * (double)(in[1]->shape[1] + 1);
}

static pd_status addmm_backward(const pd_backward_ctx *c) {
  double beta = c->attrs->f[0], alpha = c->attrs->f[1];
  if (c->needs_grad[0]) {
    pd_tensor *g = beta == 1.0 ? pd_tensor_retain(c->grad_out[0]) : pd_scale(c->grad_out[0], beta, 0.0, true);
    pd_status st = reduce_into(c, 0, g);
    if (st != PD_OK) return st;
  }
  if (!c->needs_grad[1] && !c->needs_grad[2]) return PD_OK;
  /* reuse the matmul rule with the x, y slots shifted by one */
  bool ng[2] = {c->needs_grad[1], c->needs_grad[2]};
  pd_tensor *gi[2] = {NULL, NULL};
  pd_backward_ctx sub = {.attrs = c->attrs,
                         .n_in = 2,
                         .n_out = 1,
                         .inputs = c->inputs + 1,
                         .outputs = c->outputs,
                         .in_meta = c->in_meta + 1,
                         .grad_out = c->grad_out,
                         .needs_grad = ng,
                         .grad_in = gi};
  pd_status st = matmul_grads(&sub, c->inputs[1], c->inputs[2], false, false, alpha);
  c->grad_in[1] = gi[0];
  c->grad_in[2] = gi[1];
  return st;
}

PD_OPDEF(addmm, .n_in = 3, .n_out = 1, .flags = MATMUL_FLAGS, .attr_names = "f0:beta,f1:alpha",
         .infer_meta = addmm_meta, .kernel = {[PD_PLACE_CPU] = addmm_kernel}, .backward = addmm_backward,
         .flops = addmm_flops);

/* ---- public wrappers ---------------------------------------------------------- */

static pd_tensor *binary(pd_op_id id, pd_tensor *x, pd_tensor *y, const pd_attrs *a) {
  pd_tensor *in[2] = {x, y};
  return pd_dispatch1(id, in, 2, a);
}

pd_tensor *pd_matmul(pd_tensor *x, pd_tensor *y, bool transpose_x, bool transpose_y) {
  pd_attrs a = {.i = {transpose_x, transpose_y}};
  return binary(PD_OP_matmul, x, y, &a);
}
pd_tensor *pd_mm(pd_tensor *input, pd_tensor *mat2) { return binary(PD_OP_mm, input, mat2, NULL); }
pd_tensor *pd_bmm(pd_tensor *x, pd_tensor *y) { return binary(PD_OP_bmm, x, y, NULL); }
pd_tensor *pd_mv(pd_tensor *x, pd_tensor *vec) { return binary(PD_OP_mv, x, vec, NULL); }
pd_tensor *pd_addmm(pd_tensor *input, pd_tensor *x, pd_tensor *y, double beta, double alpha) {
  pd_attrs a = {.f = {beta, alpha}};
  pd_tensor *in[3] = {input, x, y};
  return pd_dispatch1(PD_OP_addmm, in, 3, &a);
}
