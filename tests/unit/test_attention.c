/* The fused scaled_dot_product_attention op: values against a naive
 * attention in double written here (several shapes, sequence lengths that
 * are not multiples of the block size, causal, bool and additive masks),
 * gradients against the composed computation (matmul + softmax + matmul),
 * the blocked kernel's outputs, lse and gradients against a naive forward
 * and backward in double that draws the dropout as attention.h documents,
 * float32 against float64 with one dropout draw, dropout modes, rotary
 * embedding values, bad inputs. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/core_internal.h"
#include "ops/op_registry.h"
#include "test_util.h"

static unsigned g_rng = 4321u;
static double rnd(void) {
  g_rng = g_rng * 1103515245u + 12345u;
  return (double)((g_rng >> 8) & 0xffffu) / 65536.0;
}

static pd_tensor *rand_t(pd_dtype dt, int nd, const int64_t *shape, double lo, double hi) {
  int64_t n = 1;
  for (int d = 0; d < nd; d++) n *= shape[d];
  double *v = malloc(sizeof(double) * (size_t)(n + 1));
  for (int64_t i = 0; i < n; i++) v[i] = lo + (hi - lo) * rnd();
  pd_tensor *t = pd_tensor_from_f64(v, dt, nd, shape);
  free(v);
  return t;
}

static double *vals(const pd_tensor *t) {
  int64_t n = pd_tensor_numel(t);
  double *v = malloc(sizeof(double) * (size_t)(n + 1));
  for (int64_t i = 0; i < n; i++) v[i] = pd_tensor_item_at(t, i);
  return v;
}

/* Naive attention in double. mask (may be NULL) has its own 4-D shape ms
 * broadcast to [B, H, Sq, Sk]; is_bool: nonzero keeps. */
static double *naive(const pd_tensor *q, const pd_tensor *k, const pd_tensor *v, const pd_tensor *mask,
                     const int64_t *ms, bool is_bool, bool causal) {
  const int64_t *qs = pd_tensor_shape(q), *ks = pd_tensor_shape(k), *vs = pd_tensor_shape(v);
  int64_t B = qs[0], Sq = qs[1], H = qs[2], D = qs[3], Sk = ks[1], Dv = vs[3];
  double *Q = vals(q), *K = vals(k), *V = vals(v), *M = mask ? vals(mask) : NULL;
  double *out = calloc((size_t)(B * Sq * H * Dv), sizeof(double)), *s = malloc(sizeof(double) * (size_t)Sk);
  for (int64_t b = 0; b < B; b++)
    for (int64_t h = 0; h < H; h++)
      for (int64_t i = 0; i < Sq; i++) {
        double mx = -INFINITY;
        for (int64_t j = 0; j < Sk; j++) {
          double acc = 0;
          for (int64_t d = 0; d < D; d++)
            acc += Q[((b * Sq + i) * H + h) * D + d] * K[((b * Sk + j) * H + h) * D + d];
          acc /= sqrt((double)D);
          if (M) {
            int64_t mi =
                (((ms[0] == 1 ? 0 : b) * ms[1] + (ms[1] == 1 ? 0 : h)) * ms[2] + (ms[2] == 1 ? 0 : i)) *
                    ms[3] +
                (ms[3] == 1 ? 0 : j);
            if (is_bool)
              acc = M[mi] != 0 ? acc : -INFINITY;
            else
              acc += M[mi];
          }
          if (causal && j > i) acc = -INFINITY;
          s[j] = acc;
          mx = acc > mx ? acc : mx;
        }
        double sum = 0;
        for (int64_t j = 0; j < Sk; j++) sum += (s[j] = mx == -INFINITY ? 0 : exp(s[j] - mx));
        for (int64_t j = 0; j < Sk; j++)
          for (int64_t d = 0; d < Dv; d++)
            out[((b * Sq + i) * H + h) * Dv + d] +=
                (sum > 0 ? s[j] / sum : 0) * V[((b * Sk + j) * H + h) * Dv + d];
      }
  free(Q);
  free(K);
  free(V);
  free(M);
  free(s);
  return out;
}

static void check_case(pd_dtype dt, int64_t B, int64_t Sq, int64_t Sk, int64_t H, int64_t D, int mask_kind,
                       const int64_t *ms, bool causal, double tol) {
  pd_scope_begin();
  pd_tensor *q = rand_t(dt, 4, (int64_t[]){B, Sq, H, D}, -1, 1);
  pd_tensor *k = rand_t(dt, 4, (int64_t[]){B, Sk, H, D}, -1, 1);
  pd_tensor *v = rand_t(dt, 4, (int64_t[]){B, Sk, H, D}, -1, 1);
  pd_tensor *mask = NULL;
  if (mask_kind == 1)
    mask = pd_greater_than(rand_t(PD_FLOAT64, 4, ms, 0, 1), pd_full(0, NULL, 0.3, PD_FLOAT64));
  if (mask_kind == 2) mask = rand_t(dt, 4, ms, -2, 1);
  pd_tensor *o = pd_scaled_dot_product_attention(q, k, v, mask, 0.0, causal, true);
  assert_non_null(o);
  expect_shape(o, 4, (int64_t[]){B, Sq, H, D});
  double *want = naive(q, k, v, mask, ms, mask_kind == 1, causal);
  pd_tensor *w = pd_tensor_from_f64(want, PD_FLOAT64, 4, pd_tensor_shape(o));
  expect_close(o, w, tol, tol);
  free(want);
  pd_scope_end();
}

static void test_sdpa_values(void **state) {
  (void)state;
  check_case(PD_FLOAT64, 2, 70, 67, 2, 8, 0, NULL, false, 1e-12);
  check_case(PD_FLOAT32, 1, 130, 130, 2, 64, 0, NULL, true, 2e-5);
  check_case(PD_FLOAT64, 2, 65, 129, 3, 8, 0, NULL, true, 1e-12);
  check_case(PD_FLOAT64, 2, 33, 70, 2, 8, 1, (int64_t[]){2, 1, 33, 70}, false, 1e-12);
  check_case(PD_FLOAT32, 2, 40, 66, 3, 64, 2, (int64_t[]){1, 1, 40, 66}, false, 2e-5);
  check_case(PD_FLOAT64, 2, 9, 5, 2, 4, 2, (int64_t[]){2, 1, 1, 5}, true, 1e-12);
  expect_no_live_tensors();
}

static void test_sdpa_fully_masked_row_and_views(void **state) {
  (void)state;
  pd_scope_begin();
  /* a bool mask that drops every key of row 0: that row is 0, the rest normal */
  pd_tensor *q = rand_t(PD_FLOAT64, 4, (int64_t[]){1, 2, 1, 2}, -1, 1);
  pd_tensor *k = rand_t(PD_FLOAT64, 4, (int64_t[]){1, 3, 1, 2}, -1, 1);
  pd_tensor *v = rand_t(PD_FLOAT64, 4, (int64_t[]){1, 3, 1, 2}, -1, 1);
  double mv[6] = {0, 0, 0, 1, 1, 0};
  pd_tensor *m = pd_cast(pd_tensor_from_f64(mv, PD_FLOAT64, 2, (int64_t[]){2, 3}), PD_BOOL);
  pd_tensor *o = pd_scaled_dot_product_attention(q, k, v, m, 0.0, false, false);
  assert_non_null(o);
  double *want = naive(q, k, v, m, (int64_t[]){1, 1, 2, 3}, true, false);
  assert_true(fabs(pd_tensor_item_at(o, 0)) < 1e-15 && fabs(pd_tensor_item_at(o, 1)) < 1e-15);
  assert_true(fabs(pd_tensor_item_at(o, 2) - want[2]) < 1e-12 &&
              fabs(pd_tensor_item_at(o, 3) - want[3]) < 1e-12);
  free(want);
  /* a non-contiguous query: [B, H, S, D] transposed to [B, S, H, D] */
  pd_tensor *qh = rand_t(PD_FLOAT64, 4, (int64_t[]){2, 3, 5, 4}, -1, 1);
  pd_tensor *qv = pd_transpose(qh, 4, (int64_t[]){0, 2, 1, 3});
  pd_tensor *kk = rand_t(PD_FLOAT64, 4, (int64_t[]){2, 6, 3, 4}, -1, 1);
  pd_tensor *vv = rand_t(PD_FLOAT64, 4, (int64_t[]){2, 6, 3, 4}, -1, 1);
  pd_tensor *o2 = pd_scaled_dot_product_attention(qv, kk, vv, NULL, 0.0, false, true);
  want = naive(qv, kk, vv, NULL, NULL, false, false);
  expect_close(o2, pd_tensor_from_f64(want, PD_FLOAT64, 4, pd_tensor_shape(o2)), 1e-12, 1e-12);
  free(want);
  pd_scope_end();
  expect_no_live_tensors();
}

/* softmax(q k^T / sqrt(d) + mask) v composed from public ops, [B, S, H, D] layout. */
static pd_tensor *composed(pd_tensor *q, pd_tensor *k, pd_tensor *v, pd_tensor *mask, bool causal) {
  int64_t perm[4] = {0, 2, 1, 3};
  int64_t D = pd_tensor_shape(q)[3], Sq = pd_tensor_shape(q)[1], Sk = pd_tensor_shape(k)[1];
  pd_tensor *qt = pd_transpose(q, 4, perm), *kt = pd_transpose(k, 4, perm), *vt = pd_transpose(v, 4, perm);
  pd_tensor *s = pd_matmul(pd_scale(qt, 1.0 / sqrt((double)D), 0, true), kt, false, true);
  if (mask) s = pd_add(s, mask);
  if (causal) {
    double *c = malloc(sizeof(double) * (size_t)(Sq * Sk));
    for (int64_t i = 0; i < Sq; i++)
      for (int64_t j = 0; j < Sk; j++) c[i * Sk + j] = j > i ? -1e30 : 0;
    s = pd_add(s, pd_tensor_from_f64(c, pd_tensor_dtype(q), 2, (int64_t[]){Sq, Sk}));
    free(c);
  }
  return pd_transpose(pd_matmul(pd_softmax(s, -1), vt, false, false), 4, perm);
}

static void grads_of(pd_tensor *const *x, pd_tensor *out, pd_tensor *w, pd_tensor **g) {
  pd_tensor *loss = pd_sum(pd_multiply(out, w), NULL, 0, false);
  assert_int_equal(pd_backward(loss, NULL, false), PD_OK);
  for (int i = 0; i < 3; i++) {
    g[i] = pd_clone(pd_tensor_grad(x[i]), PD_FLOAT64);
    pd_tensor_clear_grad(x[i], false);
  }
}

static void grad_case(pd_dtype dt, int64_t B, int64_t Sq, int64_t Sk, int64_t H, int64_t D, bool with_mask,
                      bool causal, double tol) {
  pd_scope_begin();
  pd_tensor *x[3] = {rand_t(dt, 4, (int64_t[]){B, Sq, H, D}, -1, 1),
                     rand_t(dt, 4, (int64_t[]){B, Sk, H, D}, -1, 1),
                     rand_t(dt, 4, (int64_t[]){B, Sk, H, D}, -1, 1)};
  for (int i = 0; i < 3; i++) pd_tensor_set_stop_gradient(x[i], false);
  pd_tensor *mask = with_mask ? rand_t(dt, 4, (int64_t[]){B, 1, Sq, Sk}, -1, 1) : NULL;
  pd_tensor *w = rand_t(dt, 4, (int64_t[]){B, Sq, H, D}, -1, 1);
  pd_tensor *ga[3], *gb[3];
  grads_of(x, pd_scaled_dot_product_attention(x[0], x[1], x[2], mask, 0.0, causal, true), w, ga);
  grads_of(x, composed(x[0], x[1], x[2], mask, causal), w, gb);
  for (int i = 0; i < 3; i++) expect_close(ga[i], gb[i], tol, tol);
  pd_scope_end();
}

static void test_sdpa_gradients(void **state) {
  (void)state;
  grad_case(PD_FLOAT64, 2, 70, 67, 2, 8, false, false, 1e-10);
  grad_case(PD_FLOAT64, 1, 66, 66, 2, 8, true, true, 1e-10);
  grad_case(PD_FLOAT32, 2, 100, 130, 2, 64, true, false, 1e-4);
  expect_no_live_tensors();
}

static void test_sdpa_dropout(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *q = rand_t(PD_FLOAT64, 4, (int64_t[]){2, 20, 2, 4}, -1, 1);
  pd_tensor *k = rand_t(PD_FLOAT64, 4, (int64_t[]){2, 20, 2, 4}, -1, 1);
  pd_tensor *v = rand_t(PD_FLOAT64, 4, (int64_t[]){2, 20, 2, 4}, -1, 1);
  pd_tensor_set_stop_gradient(v, false);
  /* not training: no dropout */
  expect_close(pd_scaled_dot_product_attention(q, k, v, NULL, 0.5, false, false),
               pd_scaled_dot_product_attention(q, k, v, NULL, 0.0, false, true), 1e-14, 1e-14);
  /* p = 1 drops everything */
  pd_tensor *z = pd_scaled_dot_product_attention(q, k, v, NULL, 1.0, false, true);
  for (int64_t i = 0; i < pd_tensor_numel(z); i++) assert_true(pd_tensor_item_at(z, i) == 0.0);
  /* out is linear in v: with a fixed draw, d(sum(out))/dv equals the dropped
   * probabilities' column sums, so sum(out) = sum(dv * v) */
  pd_tensor *o = pd_scaled_dot_product_attention(q, k, v, NULL, 0.4, false, true);
  pd_tensor *loss = pd_sum(o, NULL, 0, false);
  assert_int_equal(pd_backward(loss, NULL, false), PD_OK);
  double lhs = pd_tensor_item_at(loss, 0);
  double rhs = pd_tensor_item_at(pd_sum(pd_multiply(pd_tensor_grad(v), v), NULL, 0, false), 0);
  assert_true(fabs(lhs - rhs) < 1e-10);
  assert_true(
      fabs(lhs - pd_tensor_item_at(
                     pd_sum(pd_scaled_dot_product_attention(q, k, v, NULL, 0.0, false, true), NULL, 0, false),
                     0)) > 1e-6);
  pd_scope_end();
  expect_no_live_tensors();
}

/* ---- the blocked kernel against a reference in double ----------------------
 * The op and its grad op dispatched directly (the grad op gets the forward's
 * softmax_lse and seed_offset), float32 and float64, against naive loops in
 * double that apply the mask, the causal rule and dropout as attention.h
 * documents them: (b, h, i, j) is kept when the Philox uniform of element
 * e = ((b*H + h)*Sq + i)*Sk + j (counter first + e/4, word e%4) is >= p.
 * The sequence lengths straddle the kernel's block sizes (64 to 256). */
typedef struct attn_case {
  int64_t B, Sq, Sk, H, D, Dv;
  int mask_kind;    /* 0 none, 1 bool, 2 additive */
  int64_t ms[4];    /* the mask's shape, 1 where broadcast over [B, H, Sq, Sk] */
  int64_t dead_row; /* >= 0: with a mask, the row of batch 0 whose every key is dropped */
  bool causal;
  double p; /* dropout */
} attn_case;

static double keep_factor(const attn_case *c, uint64_t first, uint64_t key, int64_t b, int64_t h, int64_t i,
                          int64_t j) {
  if (c->p <= 0) return 1;
  uint64_t e = (uint64_t)(((b * c->H + h) * c->Sq + i) * c->Sk + j);
  uint32_t w[4];
  pd_philox(first + e / 4, key, w);
  return (double)pd_u32_to_unit_f32(w[e % 4]) >= c->p ? 1.0 / (1.0 - c->p) : 0.0;
}

/* out [B,Sq,H,Dv], lse [B,H,Sq] and, for dout GO, dq, dk, dv (zeroed by the caller). */
static void reference(const attn_case *c, const double *Q, const double *K, const double *V, const double *M,
                      const double *GO, uint64_t first, uint64_t key, double *out, double *lse, double *dq,
                      double *dk, double *dv) {
  const int64_t B = c->B, Sq = c->Sq, Sk = c->Sk, H = c->H, D = c->D, Dv = c->Dv;
  const int64_t *ms = c->ms;
  const double scale = 1.0 / sqrt((double)D);
  double *p = malloc(sizeof(double) * (size_t)Sk), *f = malloc(sizeof(double) * (size_t)Sk);
  for (int64_t b = 0; b < B; b++)
    for (int64_t h = 0; h < H; h++)
      for (int64_t i = 0; i < Sq; i++) {
        const double *q = Q + ((b * Sq + i) * H + h) * D, *go = GO + ((b * Sq + i) * H + h) * Dv;
        double mx = -INFINITY;
        for (int64_t j = 0; j < Sk; j++) {
          const double *k = K + ((b * Sk + j) * H + h) * D;
          double s = 0;
          for (int64_t d = 0; d < D; d++) s += q[d] * k[d];
          s *= scale;
          if (c->mask_kind) {
            double m =
                M[(((ms[0] == 1 ? 0 : b) * ms[1] + (ms[1] == 1 ? 0 : h)) * ms[2] + (ms[2] == 1 ? 0 : i)) *
                      ms[3] +
                  (ms[3] == 1 ? 0 : j)];
            s = c->mask_kind == 1 ? (m != 0 ? s : -INFINITY) : s + m;
          }
          if (c->causal && j > i) s = -INFINITY;
          p[j] = s;
          mx = s > mx ? s : mx;
        }
        double sum = 0;
        for (int64_t j = 0; j < Sk; j++) sum += p[j] = mx == -INFINITY ? 0 : exp(p[j] - mx);
        lse[(b * H + h) * Sq + i] = sum > 0 ? mx + log(sum) : -INFINITY;
        double *o = out + ((b * Sq + i) * H + h) * Dv;
        for (int64_t j = 0; j < Sk; j++) {
          p[j] = sum > 0 ? p[j] / sum : 0;
          f[j] = keep_factor(c, first, key, b, h, i, j);
          for (int64_t d = 0; d < Dv; d++) o[d] += p[j] * f[j] * V[((b * Sk + j) * H + h) * Dv + d];
        }
        /* backward: dS_j = P_j (f_j dO.v_j - dO.out), dq = scale dS K, dk_j += scale dS_j q, dv_j += P_j f_j
         * dO */
        double di = 0;
        for (int64_t d = 0; d < Dv; d++) di += go[d] * o[d];
        for (int64_t j = 0; j < Sk; j++) {
          if (p[j] == 0) continue;
          const double *k = K + ((b * Sk + j) * H + h) * D, *v = V + ((b * Sk + j) * H + h) * Dv;
          double dp = 0;
          for (int64_t d = 0; d < Dv; d++) dp += go[d] * v[d];
          const double ds = p[j] * (dp * f[j] - di) * scale;
          for (int64_t d = 0; d < D; d++) {
            dq[((b * Sq + i) * H + h) * D + d] += ds * k[d];
            dk[((b * Sk + j) * H + h) * D + d] += ds * q[d];
          }
          for (int64_t d = 0; d < Dv; d++) dv[((b * Sk + j) * H + h) * Dv + d] += p[j] * f[j] * go[d];
        }
      }
  free(p);
  free(f);
}

static pd_tensor *from(const double *x, pd_dtype dt, int nd, const int64_t *shape) {
  return pd_tensor_from_f64(x, dt, nd, shape);
}

static void blocked_case(const attn_case *c, pd_dtype dt, double tol) {
  pd_scope_begin();
  const int64_t B = c->B, Sq = c->Sq, Sk = c->Sk, H = c->H, D = c->D, Dv = c->Dv;
  const int64_t qs[4] = {B, Sq, H, D}, ks[4] = {B, Sk, H, D}, vs[4] = {B, Sk, H, Dv}, os[4] = {B, Sq, H, Dv},
                ls[3] = {B, H, Sq};
  pd_tensor *in[8];
  int n = 0;
  in[n++] = rand_t(dt, 4, qs, -1, 1);
  in[n++] = rand_t(dt, 4, ks, -1, 1);
  in[n++] = rand_t(dt, 4, vs, -1, 1);
  double *M = NULL;
  if (c->mask_kind) {
    int64_t nm = c->ms[0] * c->ms[1] * c->ms[2] * c->ms[3];
    M = malloc(sizeof(double) * (size_t)nm);
    for (int64_t x = 0; x < nm; x++) {
      double r = rnd();
      M[x] = c->mask_kind == 1 ? (r > 0.3) : r < 0.1 ? -INFINITY : 3 * r - 2;
    }
    if (c->dead_row >= 0) /* batch 0, every head: nothing to attend to */
      for (int64_t h = 0; h < c->ms[1]; h++)
        for (int64_t j = 0; j < c->ms[3]; j++)
          M[(h * c->ms[2] + c->dead_row) * c->ms[3] + j] = c->mask_kind == 1 ? 0 : -INFINITY;
    in[n++] = from(M, c->mask_kind == 1 ? PD_BOOL : dt, 4, c->ms);
  }
  pd_attrs a = {.i = {c->causal, c->mask_kind != 0, c->p > 0}, .f = {c->p, 1.0 / sqrt((double)D)}};
  pd_tensor *fwd[PD_MAX_OUTPUTS];
  int nf = 0;
  assert_int_equal(pd_dispatch(PD_OP_scaled_dot_product_attention, in, n, &a, fwd, &nf), PD_OK);
  assert_int_equal(nf, 3);
  pd_tensor *dout = rand_t(dt, 4, os, -1, 1);
  pd_tensor *gin[8];
  int ng = 0;
  for (int x = 0; x < n; x++) gin[ng++] = in[x];
  for (int x = 0; x < 3; x++) gin[ng++] = fwd[x];
  gin[ng++] = dout;
  pd_tensor *grads[PD_MAX_OUTPUTS];
  int ngr = 0;
  assert_int_equal(pd_dispatch(PD_OP_scaled_dot_product_attention_grad, gin, ng, &a, grads, &ngr), PD_OK);
  assert_int_equal(ngr, 3);

  double *Q = vals(in[0]), *K = vals(in[1]), *V = vals(in[2]), *GO = vals(dout);
  if (M && c->mask_kind == 2) { /* the mask as the kernel saw it (rounded to dt) */
    free(M);
    M = vals(in[3]);
  }
  double *out = calloc((size_t)(B * Sq * H * Dv), sizeof(double)),
         *lse = calloc((size_t)(B * H * Sq), sizeof(double));
  double *dq = calloc((size_t)(B * Sq * H * D), sizeof(double)),
         *dk = calloc((size_t)(B * Sk * H * D), sizeof(double));
  double *dv = calloc((size_t)(B * Sk * H * Dv), sizeof(double));
  const int64_t *so = pd_tensor_data(fwd[2]);
  reference(c, Q, K, V, M, GO, (uint64_t)so[0], (uint64_t)so[1], out, lse, dq, dk, dv);
  expect_close(fwd[0], from(out, PD_FLOAT64, 4, os), tol, tol);
  expect_close(fwd[1], from(lse, PD_FLOAT64, 3, ls), tol, tol);
  expect_close(grads[0], from(dq, PD_FLOAT64, 4, qs), tol, tol);
  expect_close(grads[1], from(dk, PD_FLOAT64, 4, ks), tol, tol);
  expect_close(grads[2], from(dv, PD_FLOAT64, 4, vs), tol, tol);
  if (c->dead_row >= 0) { /* the row whose keys are all dropped: lse -inf, output 0, no gradient */
    for (int64_t h = 0; h < H; h++) {
      assert_true(pd_tensor_item_at(fwd[1], h * Sq + c->dead_row) == -INFINITY);
      for (int64_t d = 0; d < Dv; d++)
        assert_true(pd_tensor_item_at(fwd[0], (c->dead_row * H + h) * Dv + d) == 0.0);
      for (int64_t d = 0; d < D; d++)
        assert_true(pd_tensor_item_at(grads[0], (c->dead_row * H + h) * D + d) == 0.0);
    }
  }
  free(Q), free(K), free(V), free(GO), free(M);
  free(out), free(lse), free(dq), free(dk), free(dv);
  pd_scope_end();
}

static const attn_case k_blocked_cases[] = {
    {1, 1, 1, 1, 8, 8, 0, {0}, -1, false, 0.0},
    {1, 1, 1, 1, 8, 8, 0, {0}, -1, true, 0.5},
    {2, 7, 7, 2, 16, 16, 0, {0}, -1, true, 0.3},
    {1, 129, 129, 2, 32, 24, 2, {1, 1, 129, 129}, 64, false, 0.0},
    {2, 300, 300, 2, 16, 16, 1, {2, 1, 300, 300}, 150, true, 0.0},
    {1, 300, 129, 2, 16, 8, 0, {0}, -1, true, 0.2},
    {1, 129, 300, 3, 8, 16, 1, {1, 3, 1, 300}, -1, true, 0.25},
    {2, 257, 300, 1, 16, 16, 2, {2, 1, 257, 1}, 200, false, 0.0},
    {1, 300, 7, 2, 16, 16, 2, {1, 2, 300, 7}, 299, false, 0.1},
    {1, 300, 300, 1, 64, 64, 0, {0}, -1, false, 0.1},
    {1, 3, 0, 1, 4, 4, 0, {0}, -1, false, 0.0}, /* no keys: out 0, lse -inf, dq 0 */
};

static void test_sdpa_blocked_kernel(void **state) {
  (void)state;
  for (size_t x = 0; x < sizeof k_blocked_cases / sizeof k_blocked_cases[0]; x++) {
    blocked_case(&k_blocked_cases[x], PD_FLOAT64, 1e-10);
    blocked_case(&k_blocked_cases[x], PD_FLOAT32, 2e-4);
  }
  expect_no_live_tensors();
}

/* float32 against float64 on the same inputs and the same dropout draw
 * (the generator reseeded before each), gradients through autograd. */
static void test_sdpa_f32_matches_f64(void **state) {
  (void)state;
  pd_scope_begin();
  const int64_t qs[4] = {2, 300, 2, 16}, ks[4] = {2, 260, 2, 16};
  pd_tensor *x64[3] = {rand_t(PD_FLOAT64, 4, qs, -1, 1), rand_t(PD_FLOAT64, 4, ks, -1, 1),
                       rand_t(PD_FLOAT64, 4, ks, -1, 1)};
  pd_tensor *keep =
      pd_greater_than(rand_t(PD_FLOAT64, 4, SHAPE(2, 1, 300, 260), 0, 1), pd_full(0, NULL, 0.2, PD_FLOAT64));
  pd_tensor *w = rand_t(PD_FLOAT64, 4, qs, -1, 1);
  pd_tensor *out[2], *g[2][3];
  for (int t = 0; t < 2; t++) {
    pd_dtype dt = t ? PD_FLOAT32 : PD_FLOAT64;
    pd_tensor *x[3];
    for (int i = 0; i < 3; i++) {
      x[i] = pd_clone(x64[i], dt);
      pd_tensor_set_stop_gradient(x[i], false);
    }
    pd_seed(7);
    out[t] = pd_scaled_dot_product_attention(x[0], x[1], x[2], keep, 0.2, true, true);
    assert_non_null(out[t]);
    grads_of(x, out[t], pd_cast(w, dt), g[t]);
  }
  expect_close(out[1], out[0], 1e-5, 1e-5);
  for (int i = 0; i < 3; i++) expect_close(g[1][i], g[0][i], 1e-4, 1e-4);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_rotary(void **state) {
  (void)state;
  pd_scope_begin();
  /* x [1, 2, 1, 4], angle table per position */
  double xv[8] = {1, 2, 3, 4, 5, 6, 7, 8}, th[2] = {0.3, -0.7};
  double cv[8], sv[8];
  for (int s = 0; s < 2; s++)
    for (int d = 0; d < 4; d++) cv[s * 4 + d] = cos(th[s] * (d + 1)), sv[s * 4 + d] = sin(th[s] * (d + 1));
  pd_tensor *x = pd_tensor_from_f64(xv, PD_FLOAT64, 4, (int64_t[]){1, 2, 1, 4});
  pd_tensor *c = pd_tensor_from_f64(cv, PD_FLOAT64, 4, (int64_t[]){1, 2, 1, 4});
  pd_tensor *s = pd_tensor_from_f64(sv, PD_FLOAT64, 4, (int64_t[]){1, 2, 1, 4});
  double half[8], pair[8];
  for (int p = 0; p < 2; p++) {
    const double *r = xv + 4 * p;
    double rh[4] = {-r[2], -r[3], r[0], r[1]}, rp[4] = {-r[1], r[0], -r[3], r[2]};
    for (int d = 0; d < 4; d++) {
      half[4 * p + d] = r[d] * cv[4 * p + d] + rh[d] * sv[4 * p + d];
      pair[4 * p + d] = r[d] * cv[4 * p + d] + rp[d] * sv[4 * p + d];
    }
  }
  expect_values(pd_rotary_embedding(x, c, s), half, 8, 1e-12);
  pd_tensor *oq = NULL, *ok = NULL;
  assert_int_equal(pd_fused_rotary_position_embedding(x, x, NULL, s, c, NULL, true, &oq, &ok, NULL), PD_OK);
  expect_values(oq, pair, 8, 1e-12);
  expect_values(ok, pair, 8, 1e-12);
  /* position_ids pick rows of the table: positions {1, 0} swap the angles */
  double pid[2] = {1, 0};
  pd_tensor *pos = pd_cast(pd_tensor_from_f64(pid, PD_FLOAT64, 2, (int64_t[]){1, 2}), PD_INT64);
  assert_int_equal(pd_fused_rotary_position_embedding(x, NULL, NULL, s, c, pos, false, &oq, NULL, NULL),
                   PD_OK);
  double sw[8];
  for (int p = 0; p < 2; p++) {
    const double *r = xv + 4 * p;
    double rh[4] = {-r[2], -r[3], r[0], r[1]};
    for (int d = 0; d < 4; d++) sw[4 * p + d] = r[d] * cv[4 * (1 - p) + d] + rh[d] * sv[4 * (1 - p) + d];
  }
  expect_values(oq, sw, 8, 1e-12);
  expect_error(pd_rotary_embedding(pd_full(2, (int64_t[]){2, 3}, 1.0, PD_FLOAT64), c, s), "rotary_embedding",
               "[2, 3]");
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_sdpa_bad_inputs(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *q = pd_full(4, (int64_t[]){1, 3, 2, 8}, 0.1, PD_FLOAT32);
  pd_tensor *k4 = pd_full(4, (int64_t[]){1, 5, 2, 4}, 0.1, PD_FLOAT32);
  pd_tensor *k = pd_full(4, (int64_t[]){1, 5, 2, 8}, 0.1, PD_FLOAT32);
  expect_error(pd_scaled_dot_product_attention(q, k4, k4, NULL, 0, false, true),
               "scaled_dot_product_attention", "[1, 5, 2, 4]");
  expect_error(pd_scaled_dot_product_attention(q, k4, k4, NULL, 0, false, true), "head_dim 8", "head_dim 4");
  expect_error(pd_scaled_dot_product_attention(pd_full(3, (int64_t[]){3, 2, 8}, 0, PD_FLOAT32), k, k, NULL, 0,
                                               false, true),
               "scaled_dot_product_attention", "[3, 2, 8]");
  expect_error(pd_scaled_dot_product_attention(q, k, pd_full(4, (int64_t[]){1, 4, 2, 8}, 0, PD_FLOAT32), NULL,
                                               0, false, true),
               "scaled_dot_product_attention", "[1, 4, 2, 8]");
  expect_error(
      pd_scaled_dot_product_attention(q, k, k, pd_full(2, (int64_t[]){3, 4}, 0, PD_FLOAT32), 0, false, true),
      "attn_mask", "[3, 4]");
  expect_error(
      pd_scaled_dot_product_attention(q, k, k, pd_full(2, (int64_t[]){3, 5}, 0, PD_INT32), 0, false, true),
      "attn_mask", "int32");
  expect_error(pd_scaled_dot_product_attention(q, pd_cast(k, PD_FLOAT64), k, NULL, 0, false, true), "key",
               "float64");
  expect_error(pd_scaled_dot_product_attention(q, k, k, NULL, 1.5, false, true), "dropout_p", "1.5");
  pd_scope_end();
  expect_no_live_tensors();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sdpa_values),
      cmocka_unit_test(test_sdpa_fully_masked_row_and_views),
      cmocka_unit_test(test_sdpa_gradients),
      cmocka_unit_test(test_sdpa_dropout),
      cmocka_unit_test(test_sdpa_blocked_kernel),
      cmocka_unit_test(test_sdpa_f32_matches_f64),
      cmocka_unit_test(test_rotary),
      cmocka_unit_test(test_sdpa_bad_inputs),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
