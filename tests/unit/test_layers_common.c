/* Identity, Flatten, Bilinear, Embedding, the activation layers and PReLU:
 * values against formulas evaluated in the test, parameter shapes and
 * default initializers, gradients, printing, bad inputs. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

static void expect_repr(pd_layer *l, const char *want) {
  char *s = pd_layer_to_string(l);
  if (!s || strcmp(s, want) != 0) fail_msg("repr '%s', want '%s'", s ? s : "(null)", want);
  free(s);
}

static void test_identity_flatten(void **state) {
  (void)state;
  pd_layer *id = pd_nn_identity(), *fl = pd_nn_flatten(1, -1), *fl01 = pd_nn_flatten(0, 1);
  pd_scope_begin();
  pd_tensor *x = pd_ones(4, SHAPE(2, 3, 4, 5), PD_FLOAT32);
  assert_ptr_equal(pd_layer_call1(id, x), x);
  expect_shape(pd_layer_call1(fl, x), 2, SHAPE(2, 60));
  expect_shape(pd_layer_call1(fl01, x), 3, SHAPE(6, 4, 5));
  pd_layer *bad = pd_nn_flatten(1, 7);
  expect_error(pd_layer_call1(bad, x), "flatten", "7");
  pd_layer_release(bad);
  pd_scope_end();
  expect_repr(id, "Identity()");
  pd_layer_release(id);
  pd_layer_release(fl);
  pd_layer_release(fl01);
  expect_no_live_tensors();
}

static void test_bilinear(void **state) {
  (void)state;
  pd_seed(8);
  pd_layer *l = pd_nn_bilinear(3, 4, 2, NULL);
  pd_tensor *w = pd_layer_parameter(l, "weight"), *b = pd_layer_parameter(l, "bias");
  expect_shape(w, 3, SHAPE(2, 3, 4));
  expect_shape(b, 2, SHAPE(1, 2));
  /* XavierUniform over [out, in1, in2]: fan_in = in1 * in2, fan_out = out * in2 */
  double lim = sqrt(6.0 / (12 + 8)), mx = 0;
  for (int64_t i = 0; i < 24; i++) mx = fmax(mx, fabs(pd_tensor_item_at(w, i)));
  assert_true(mx <= lim && mx > lim / 4);
  EXPECT_VALUES(b, 0, 0, 0);
  expect_repr(l, "Bilinear(in1_features=3, in2_features=4, out_features=2, dtype=float32)");
  pd_scope_begin();
  float *bp = pd_tensor_data(b);
  bp[0] = 0.5f;
  bp[1] = -1.0f;
  pd_tensor *x1 = pd_randn(2, SHAPE(5, 3), PD_FLOAT32), *x2 = pd_randn(2, SHAPE(5, 4), PD_FLOAT32);
  pd_tensor *out[1];
  assert_int_equal(pd_layer_call(l, (pd_tensor *[]){x1, x2}, 2, out, 1), 1);
  expect_shape(out[0], 2, SHAPE(5, 2));
  double want[10];
  for (int r = 0; r < 5; r++)
    for (int o = 0; o < 2; o++) {
      double s = pd_tensor_item_at(b, o);
      for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++)
          s += pd_tensor_item_at(x1, r * 3 + i) * pd_tensor_item_at(w, (o * 3 + i) * 4 + j) *
               pd_tensor_item_at(x2, r * 4 + j);
      want[r * 2 + o] = s;
    }
  expect_values(out[0], want, 10, 1e-5);
  /* dL/dW[o, i, j] = sum_b x1[b, i] x2[b, j] for L = sum(out) */
  assert_int_equal(pd_backward(pd_sum(out[0], NULL, 0, false), NULL, false), PD_OK);
  for (int o = 0; o < 2; o++)
    for (int i = 0; i < 3; i++)
      for (int j = 0; j < 4; j++) {
        double g = 0;
        for (int r = 0; r < 5; r++) g += pd_tensor_item_at(x1, r * 3 + i) * pd_tensor_item_at(x2, r * 4 + j);
        assert_true(fabs(pd_tensor_item_at(pd_tensor_grad(w), (o * 3 + i) * 4 + j) - g) <
                    1e-4 * (1 + fabs(g)));
      }
  EXPECT_VALUES(pd_tensor_grad(b), 0, 5, 5);
  /* functional without bias; bad shapes */
  pd_tensor *y = pd_bilinear(x1, x2, w, NULL);
  for (int k = 0; k < 10; k++)
    assert_true(fabs(pd_tensor_item_at(y, k) - (want[k] - pd_tensor_item_at(b, k % 2))) < 1e-5);
  expect_error(pd_bilinear(x2, x1, w, b), "bilinear", "weight of shape [2, 3, 4]");
  expect_error(pd_bilinear(x1, pd_randn(2, SHAPE(4, 4), PD_FLOAT32), w, b), "bilinear",
               "batch size (5 vs 4)");
  expect_error(pd_bilinear(x1, x2, w, pd_zeros(1, SHAPE(3), PD_FLOAT32)), "bilinear", "bias of shape [3]");
  expect_error(pd_bilinear(pd_ones(1, SHAPE(3), PD_FLOAT32), x2, w, b), "bilinear", "2-D");
  assert_true(pd_layer_call(l, &x1, 1, out, 1) < 0);
  expect_error(NULL, "Bilinear", "2 inputs");
  pd_scope_end();
  pd_layer_release(l);
  pd_layer *nb = pd_nn_bilinear(2, 2, 1, &(pd_nn_bilinear_opts){.no_bias = true, .dtype = PD_FLOAT64});
  pd_named_tensors ps;
  assert_int_equal(pd_layer_named_parameters(nb, &ps), PD_OK);
  assert_int_equal(ps.n, 1);
  assert_int_equal(pd_tensor_dtype(ps.tensors[0]), PD_FLOAT64);
  pd_named_tensors_free(&ps);
  pd_layer_release(nb);
  assert_null(pd_nn_bilinear(0, 2, 2, NULL));
  expect_error(NULL, "Bilinear", "in1_features (0)");
  expect_no_live_tensors();
}

static void test_embedding(void **state) {
  (void)state;
  pd_seed(12);
  pd_layer *l = pd_nn_embedding(10, 4, &(pd_nn_embedding_opts){.has_padding_idx = true, .padding_idx = -1});
  pd_tensor *w = pd_layer_parameter(l, "weight");
  expect_shape(w, 2, SHAPE(10, 4));
  /* XavierUniform over [num, dim]; the padding row (9) starts at zero */
  double lim = sqrt(6.0 / 14);
  for (int64_t i = 0; i < 36; i++) assert_true(fabs(pd_tensor_item_at(w, i)) <= lim);
  for (int64_t i = 36; i < 40; i++) assert_true(pd_tensor_item_at(w, i) == 0);
  expect_repr(l, "Embedding(10, 4, padding_idx=-1, sparse=False)");
  pd_scope_begin();
  /* the row is zero at the start only: a forward of a nonzero padding row still reads zeros */
  float *wp = pd_tensor_data(w);
  wp[36] = 5.0f;
  pd_tensor *ids = T(PD_INT64, 2, SHAPE(2, 2), 1, 9, 3, 1);
  pd_tensor *y = pd_layer_call1(l, ids);
  expect_shape(y, 3, SHAPE(2, 2, 4));
  const int64_t rows[4] = {1, 9, 3, 1};
  for (int k = 0; k < 4; k++)
    for (int d = 0; d < 4; d++) {
      double want = rows[k] == 9 ? 0 : pd_tensor_item_at(w, rows[k] * 4 + d);
      assert_true(pd_tensor_item_at(y, k * 4 + d) == want);
    }
  assert_int_equal(pd_backward(pd_sum(y, NULL, 0, false), NULL, false), PD_OK);
  pd_tensor *g = pd_tensor_grad(w);
  for (int d = 0; d < 4; d++) {
    assert_true(pd_tensor_item_at(g, 1 * 4 + d) == 2);
    assert_true(pd_tensor_item_at(g, 3 * 4 + d) == 1);
    assert_true(pd_tensor_item_at(g, 9 * 4 + d) == 0);
    assert_true(pd_tensor_item_at(g, 0 * 4 + d) == 0);
  }
  expect_error(pd_layer_call1(l, T(PD_INT64, 1, SHAPE(2), 1, 10)), "embedding", "10");
  pd_scope_end();
  pd_layer_release(l);
  pd_layer *plain = pd_nn_embedding(5, 3, NULL);
  expect_repr(plain, "Embedding(5, 3, sparse=False)");
  pd_layer_release(plain);
  assert_null(pd_nn_embedding(10, 4, &(pd_nn_embedding_opts){.has_padding_idx = true, .padding_idx = 10}));
  expect_error(NULL, "Embedding", "padding_idx 10");
  assert_null(pd_nn_embedding(10, 0, NULL));
  expect_error(NULL, "Embedding", "embedding_dim (0)");
  expect_no_live_tensors();
}

/* ---- activations ------------------------------------------------------------------------------ */
static const double k_x[8] = {-2.5, -1, -0.3, 0.05, 0.4, 1.2, 3, 7};

typedef double (*ref_fn)(double x);
static double r_relu(double x) { return x > 0 ? x : 0; }
static double r_relu6(double x) { return fmin(fmax(x, 0), 6); }
static double r_leaky(double x) { return x > 0 ? x : 0.2 * x; }
static double r_elu(double x) { return x > 0 ? x : 0.7 * (exp(x) - 1); }
static double r_selu(double x) {
  return 1.0507009873554804934 * (x > 0 ? x : 1.6732632423543772848 * (exp(x) - 1));
}
static double r_gelu(double x) { return 0.5 * x * (1 + erf(x / sqrt(2.0))); }
static double r_gelu_tanh(double x) {
  return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}
static double r_sigmoid(double x) { return 1 / (1 + exp(-x)); }
static double r_silu(double x) { return x * r_sigmoid(x); }
static double r_softplus(double x) { return 2 * x > 5 ? x : log1p(exp(2 * x)) / 2; }
static double r_softsign(double x) { return x / (1 + fabs(x)); }
static double r_hardswish(double x) { return x * fmin(fmax(x + 3, 0), 6) / 6; }
static double r_hardsigmoid(double x) { return fmax(0, fmin(1, 0.1666667 * x + 0.5)); }
static double r_log_sigmoid(double x) { return log(r_sigmoid(x)); }

static void test_activation_layers(void **state) {
  (void)state;
  struct {
    pd_layer *l;
    ref_fn f;
    const char *repr;
  } cases[] = {
      {pd_nn_relu(), r_relu, "ReLU()"},
      {pd_nn_relu6(), r_relu6, "ReLU6()"},
      {pd_nn_leaky_relu(0.2), r_leaky, "LeakyReLU(negative_slope=0.2)"},
      {pd_nn_elu(0.7), r_elu, "ELU(alpha=0.7)"},
      {pd_nn_selu(PD_SELU_SCALE, PD_SELU_ALPHA), r_selu,
       "SELU(scale=1.0507009873554805, alpha=1.6732632423543772)"},
      {pd_nn_gelu(false), r_gelu, "GELU(approximate=False)"},
      {pd_nn_gelu(true), r_gelu_tanh, "GELU(approximate=True)"},
      {pd_nn_silu(), r_silu, "Silu()"},
      {pd_nn_swish(), r_silu, "Swish()"},
      {pd_nn_sigmoid(), r_sigmoid, "Sigmoid()"},
      {pd_nn_softplus(2, 5), r_softplus, "Softplus(beta=2.0, threshold=5.0)"},
      {pd_nn_softsign(), r_softsign, "Softsign()"},
      {pd_nn_hardswish(), r_hardswish, "Hardswish()"},
      {pd_nn_hardsigmoid(), r_hardsigmoid, "Hardsigmoid()"},
      {pd_nn_log_sigmoid(), r_log_sigmoid, "LogSigmoid()"},
      {pd_nn_tanh(), tanh, "Tanh()"},
  };
  pd_scope_begin();
  pd_tensor *x = pd_to_tensor(k_x, PD_FLOAT64, 2, SHAPE(2, 4));
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
    assert_non_null(cases[c].l);
    pd_tensor *y = pd_layer_call1(cases[c].l, x);
    if (!y) fail_msg("%s: %s", cases[c].repr, pd_last_error());
    expect_shape(y, 2, SHAPE(2, 4));
    for (int i = 0; i < 8; i++) {
      double want = cases[c].f(k_x[i]), got = pd_tensor_item_at(y, i);
      if (!(fabs(got - want) <= 1e-6 * (1 + fabs(want))))
        fail_msg("%s at x = %g: got %.10g, want %.10g", cases[c].repr, k_x[i], got, want);
    }
    expect_repr(cases[c].l, cases[c].repr);
    assert_true(pd_layer_call(cases[c].l, (pd_tensor *[]){x, x}, 2, (pd_tensor *[1]){0}, 1) < 0);
    expect_error(NULL, "expects 1 input", NULL);
    pd_layer_release(cases[c].l);
  }
  /* softmax / log_softmax along the given axis */
  pd_layer *sm = pd_nn_softmax(0), *lsm = pd_nn_log_softmax(-1);
  expect_repr(sm, "Softmax(axis=0)");
  expect_repr(lsm, "LogSoftmax(axis=-1)");
  pd_tensor *s0 = pd_layer_call1(sm, x), *l1 = pd_layer_call1(lsm, x);
  for (int j = 0; j < 4; j++) {
    double a = exp(k_x[j]), b = exp(k_x[4 + j]);
    assert_true(fabs(pd_tensor_item_at(s0, j) - a / (a + b)) < 1e-12);
    assert_true(fabs(pd_tensor_item_at(s0, 4 + j) - b / (a + b)) < 1e-12);
  }
  for (int r = 0; r < 2; r++) {
    double z = 0;
    for (int j = 0; j < 4; j++) z += exp(k_x[r * 4 + j]);
    for (int j = 0; j < 4; j++)
      assert_true(fabs(pd_tensor_item_at(l1, r * 4 + j) - (k_x[r * 4 + j] - log(z))) < 1e-12);
  }
  pd_layer *bad = pd_nn_softmax(3);
  expect_error(pd_layer_call1(bad, x), "softmax", "3");
  pd_layer_release(bad);
  pd_layer_release(sm);
  pd_layer_release(lsm);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_prelu(void **state) {
  (void)state;
  pd_layer *one = pd_nn_prelu(1, 0.25, NULL);
  expect_repr(one, "PReLU(num_parameters=1, data_format=NCHW, init=0.25, dtype=float32)");
  pd_tensor *w1 = pd_layer_parameter(one, "weight");
  expect_shape(w1, 1, SHAPE(1));
  EXPECT_VALUES(w1, 0, 0.25);
  pd_scope_begin();
  pd_tensor *x = pd_to_tensor(k_x, PD_FLOAT64, 2, SHAPE(2, 4));
  pd_tensor *y = pd_layer_call1(one, x);
  for (int i = 0; i < 8; i++)
    assert_true(fabs(pd_tensor_item_at(y, i) - (k_x[i] > 0 ? k_x[i] : 0.25 * k_x[i])) < 1e-7);

  /* per channel: NCL [2, 3, 2] and NLC [2, 2, 3] */
  pd_layer *ch = pd_nn_prelu(3, 0.1, &(pd_nn_prelu_opts){.dtype = PD_FLOAT64});
  pd_layer *chl = pd_nn_prelu(3, 0.1, &(pd_nn_prelu_opts){.data_format = "NLC", .dtype = PD_FLOAT64});
  double *wp = pd_tensor_data(pd_layer_parameter(ch, "weight"));
  wp[1] = 0.2;
  wp[2] = 0.3;
  double *wpl = pd_tensor_data(pd_layer_parameter(chl, "weight"));
  wpl[1] = 0.2;
  wpl[2] = 0.3;
  pd_tensor *xc = pd_to_tensor((const double[]){-1, 2, -3, 4, -5, -6, 7, -8, 9, -10, 11, -12}, PD_FLOAT64, 3,
                               SHAPE(2, 3, 2));
  pd_tensor *yc = pd_layer_call1(ch, xc);
  pd_tensor *ycl = pd_layer_call1(chl, pd_transpose(xc, 3, SHAPE(0, 2, 1)));
  expect_close(pd_transpose(ycl, 3, SHAPE(0, 2, 1)), yc, 0, 0);
  double want[12], gw[3] = {0};
  for (int i = 0; i < 12; i++) {
    double v = pd_tensor_item_at(xc, i), a = 0.1 * ((i / 2) % 3 + 1);
    want[i] = v > 0 ? v : a * v;
    if (v < 0) gw[(i / 2) % 3] += v;
  }
  expect_values(yc, want, 12, 1e-12);
  assert_int_equal(pd_backward(pd_sum(yc, NULL, 0, false), NULL, false), PD_OK);
  expect_values(pd_tensor_grad(pd_layer_parameter(ch, "weight")), gw, 3, 1e-12);
  expect_error(pd_layer_call1(ch, pd_ones(2, SHAPE(2, 4), PD_FLOAT64)), "prelu", "the 4 channels");
  expect_error(pd_prelu(x, pd_ones(2, SHAPE(1, 1), PD_FLOAT64), NULL), "prelu", "1-D");
  expect_error(pd_prelu(pd_ones(1, SHAPE(3), PD_FLOAT64), pd_ones(1, SHAPE(3), PD_FLOAT64), NULL), "prelu",
               "rank >= 2");
  expect_error(pd_prelu(x, w1, "NCWH"), "prelu", "'NCWH'");
  pd_scope_end();
  pd_layer_release(one);
  pd_layer_release(ch);
  pd_layer_release(chl);
  assert_null(pd_nn_prelu(0, 0.25, NULL));
  expect_error(NULL, "PReLU", "num_parameters (0)");
  assert_null(pd_nn_prelu(2, 0.25, &(pd_nn_prelu_opts){.data_format = "CHW"}));
  expect_error(NULL, "PReLU", "'CHW'");
  expect_no_live_tensors();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_identity_flatten),
      cmocka_unit_test(test_bilinear),
      cmocka_unit_test(test_embedding),
      cmocka_unit_test(test_activation_layers),
      cmocka_unit_test(test_prelu),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
