/* The fused scaled_dot_product_attention op: values against a naive
 * attention in double written here (several shapes, sequence lengths that
 * are not multiples of the block size, causal, bool and additive masks),
 * gradients against the composed computation (matmul + softmax + matmul),
 * dropout modes, rotary embedding values, bad inputs. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

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
      cmocka_unit_test(test_sdpa_values),    cmocka_unit_test(test_sdpa_fully_masked_row_and_views),
      cmocka_unit_test(test_sdpa_gradients), cmocka_unit_test(test_sdpa_dropout),
      cmocka_unit_test(test_rotary),         cmocka_unit_test(test_sdpa_bad_inputs),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
