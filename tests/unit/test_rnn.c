/* Recurrent layers: cells and multi-layer networks against a naive step
 * written here in double, sequence_length masking, time_major, dropout,
 * gradients of an LSTM against finite differences, parameter names and
 * shapes, bad inputs. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

enum { K_TANH, K_RELU, K_LSTM, K_GRU };

static int gates(int kind) { return kind == K_LSTM ? 4 : kind == K_GRU ? 3 : 1; }
static double sig(double v) { return 1.0 / (1.0 + exp(-v)); }

/* The values of t in logical order (malloc'ed). */
static double *vals(const pd_tensor *t) {
  int64_t n = pd_tensor_numel(t);
  double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
  for (int64_t i = 0; i < n; i++) v[i] = pd_tensor_item_at(t, i);
  return v;
}

typedef struct ref_w {
  double *wih, *whh, *bih, *bhh;
} ref_w;

static ref_w ref_weights(const pd_layer *l, const char *suffix) {
  char n[64];
  ref_w w;
  snprintf(n, sizeof n, "weight_ih%s", suffix);
  w.wih = vals(pd_layer_parameter(l, n));
  snprintf(n, sizeof n, "weight_hh%s", suffix);
  w.whh = vals(pd_layer_parameter(l, n));
  snprintf(n, sizeof n, "bias_ih%s", suffix);
  w.bih = vals(pd_layer_parameter(l, n));
  snprintf(n, sizeof n, "bias_hh%s", suffix);
  w.bhh = vals(pd_layer_parameter(l, n));
  return w;
}
static void ref_free(ref_w *w) {
  free(w->wih);
  free(w->whh);
  free(w->bih);
  free(w->bhh);
}

/* One step for batch row b: x [I], h [H] and c [H] updated in place
 * (Paddle's formulas, written out). */
static void ref_step(int kind, int I, int H, const ref_w *w, const double *x, double *h, double *c) {
  int G = gates(kind) * H;
  double gx[64], gh[64], hn[16];
  for (int g = 0; g < G; g++) {
    gx[g] = w->bih[g];
    gh[g] = w->bhh[g];
    for (int i = 0; i < I; i++) gx[g] += w->wih[g * I + i] * x[i];
    for (int j = 0; j < H; j++) gh[g] += w->whh[g * H + j] * h[j];
  }
  for (int j = 0; j < H; j++) {
    if (kind == K_TANH) {
      hn[j] = tanh(gx[j] + gh[j]);
    } else if (kind == K_RELU) {
      hn[j] = fmax(0.0, gx[j] + gh[j]);
    } else if (kind == K_LSTM) {
      double i = sig(gx[j] + gh[j]), f = sig(gx[H + j] + gh[H + j]);
      double g = tanh(gx[2 * H + j] + gh[2 * H + j]), o = sig(gx[3 * H + j] + gh[3 * H + j]);
      c[j] = f * c[j] + i * g;
      hn[j] = o * tanh(c[j]);
    } else {
      double r = sig(gx[j] + gh[j]), z = sig(gx[H + j] + gh[H + j]);
      double cc = tanh(gx[2 * H + j] + r * gh[2 * H + j]);
      hn[j] = (h[j] - cc) * z + cc;
    }
  }
  memcpy(h, hn, (size_t)H * sizeof *h);
}

/* A whole network, batch major: x [B, T, I], h0/c0 [L*D, B, H] (c0 LSTM
 * only), lens NULL or [B]. Fills out [B, T, D*H], hT, cT [L*D, B, H].
 * zero_between: the inputs of layers > 0 are zeros (dropout with p = 1). */
static void ref_net(int kind, const pd_layer *net, int L, int D, int B, int T, int I, int H, const double *x,
                    const double *h0, const double *c0, const int64_t *lens, bool zero_between, double *out,
                    double *hT, double *cT) {
  int maxw = I > D * H ? I : D * H;
  double *in = calloc((size_t)B * T * maxw, sizeof *in);
  memcpy(in, x, (size_t)B * T * I * sizeof *in);
  int in_size = I;
  for (int l = 0; l < L; l++) {
    if (l > 0 && zero_between) memset(in, 0, (size_t)B * T * in_size * sizeof *in);
    for (int d = 0; d < D; d++) {
      char suffix[32];
      snprintf(suffix, sizeof suffix, "_l%d%s", l, d ? "_reverse" : "");
      ref_w w = ref_weights(net, suffix);
      int s = l * D + d;
      for (int b = 0; b < B; b++) {
        double h[16], c[16];
        for (int j = 0; j < H; j++) {
          h[j] = h0 ? h0[(s * B + b) * H + j] : 0;
          c[j] = c0 ? c0[(s * B + b) * H + j] : 0;
        }
        for (int k = 0; k < T; k++) {
          int t = d ? T - 1 - k : k;
          double *o = &out[((size_t)b * T + t) * D * H + d * H];
          if (lens && t >= lens[b]) {
            for (int j = 0; j < H; j++) o[j] = 0;
            continue;
          }
          ref_step(kind, in_size, H, &w, &in[((size_t)b * T + t) * in_size], h, c);
          for (int j = 0; j < H; j++) o[j] = h[j];
        }
        for (int j = 0; j < H; j++) {
          hT[(s * B + b) * H + j] = h[j];
          if (cT) cT[(s * B + b) * H + j] = c[j];
        }
      }
      ref_free(&w);
    }
    in_size = D * H;
    memcpy(in, out, (size_t)B * T * in_size * sizeof *in);
  }
  free(in);
}

static void expect_vals(const pd_tensor *t, const double *want, double tol) {
  assert_non_null(t);
  int64_t n = pd_tensor_numel(t);
  for (int64_t i = 0; i < n; i++) {
    double v = pd_tensor_item_at(t, i);
    if (fabs(v - want[i]) > tol * (1 + fabs(want[i])))
      fail_msg("element %lld: got %.12g, want %.12g", (long long)i, v, want[i]);
  }
}

/* ---- cells ---------------------------------------------------------------------- */

static pd_layer *make_cell(int kind, int64_t I, int64_t H, pd_dtype dt) {
  pd_nn_rnn_cell_opts o = {.dtype = dt, .activation = kind == K_RELU ? "relu" : NULL};
  if (kind == K_LSTM) return pd_nn_lstm_cell(I, H, &o);
  if (kind == K_GRU) return pd_nn_gru_cell(I, H, &o);
  return pd_nn_simple_rnn_cell(I, H, &o);
}

static void test_cells(void **state) {
  (void)state;
  pd_seed(11);
  const int B = 3, I = 4, H = 5;
  for (int kind = K_TANH; kind <= K_GRU; kind++) {
    pd_layer *cell = make_cell(kind, I, H, PD_FLOAT64);
    assert_non_null(cell);
    pd_scope_begin();
    pd_tensor *x = pd_randn(2, SHAPE(B, I), PD_FLOAT64);
    pd_tensor *h0 = pd_randn(2, SHAPE(B, H), PD_FLOAT64), *c0 = pd_randn(2, SHAPE(B, H), PD_FLOAT64);
    int ns = kind == K_LSTM ? 2 : 1;
    pd_tensor *out[4];
    for (int with_states = 0; with_states < 2; with_states++) {
      pd_tensor *args[3] = {x, h0, c0};
      int n = pd_layer_call(cell, args, with_states ? 1 + ns : 1, out, 4);
      assert_int_equal(n, 1 + ns);
      ref_w w = ref_weights(cell, "");
      double *xv = vals(x), *hv = vals(h0), *cv = vals(c0);
      if (!with_states) memset(hv, 0, sizeof(double) * B * H), memset(cv, 0, sizeof(double) * B * H);
      for (int b = 0; b < B; b++) ref_step(kind, I, H, &w, xv + b * I, hv + b * H, cv + b * H);
      expect_shape(out[0], 2, SHAPE(B, H));
      expect_vals(out[0], hv, 1e-12);
      expect_vals(out[1], hv, 1e-12);
      if (kind == K_LSTM) expect_vals(out[2], cv, 1e-12);
      free(xv), free(hv), free(cv);
      ref_free(&w);
    }
    pd_scope_end();
    pd_layer_release(cell);
  }
  /* float32 LSTM cell, inputs given as a transposed view */
  pd_layer *cell = make_cell(K_LSTM, I, H, PD_FLOAT32);
  pd_scope_begin();
  pd_tensor *xt = pd_transpose(pd_randn(2, SHAPE(I, B), PD_FLOAT32), 2, SHAPE(1, 0));
  pd_tensor *y = pd_layer_call1(cell, xt);
  ref_w w = ref_weights(cell, "");
  double *xv = vals(xt), h[3 * 5] = {0}, c[3 * 5] = {0};
  for (int b = 0; b < B; b++) ref_step(K_LSTM, I, H, &w, xv + b * I, h + b * H, c + b * H);
  expect_vals(y, h, 1e-5);
  free(xv);
  ref_free(&w);
  pd_scope_end();
  pd_layer_release(cell);
  expect_no_live_tensors();
}

/* ---- networks ------------------------------------------------------------------- */

static pd_layer *make_net(int kind, int64_t I, int64_t H, int L, bool bi, bool time_major, pd_dtype dt) {
  pd_nn_rnn_net_opts o = {.num_layers = L,
                          .direction = bi ? "bidirect" : NULL,
                          .time_major = time_major,
                          .activation = kind == K_RELU ? "relu" : NULL,
                          .dtype = dt};
  if (kind == K_LSTM) return pd_nn_lstm(I, H, &o);
  if (kind == K_GRU) return pd_nn_gru(I, H, &o);
  return pd_nn_simple_rnn(I, H, &o);
}

/* Runs net (kind, L layers, D directions) on random data against ref_net. */
static void check_net(int kind, int L, int D, bool with_states, const int64_t *lens, pd_dtype len_dt,
                      bool time_major, pd_dtype dt, double tol) {
  const int B = 3, T = 4, I = 3, H = 4;
  pd_layer *net = make_net(kind, I, H, L, D == 2, time_major, dt);
  assert_non_null(net);
  pd_scope_begin();
  pd_tensor *x = pd_randn(3, SHAPE(B, T, I), dt);
  pd_tensor *h0 = pd_randn(3, SHAPE(L * D, B, H), dt), *c0 = pd_randn(3, SHAPE(L * D, B, H), dt);
  pd_tensor *len = NULL;
  if (lens)
    len = pd_cast(T(PD_INT64, 1, SHAPE(B), (double)lens[0], (double)lens[1], (double)lens[2]), len_dt);
  int ns = kind == K_LSTM ? 2 : 1;
  pd_tensor *xin = time_major ? pd_transpose(x, 3, SHAPE(1, 0, 2)) : x, *y, *fin[2];
  int n = pd_nn_rnn_call(net, xin, (pd_tensor *[]){h0, c0}, with_states ? ns : 0, len, &y, fin, 2);
  assert_int_equal(n, ns);
  double *xv = vals(x), *hv = vals(h0), *cv = vals(c0);
  double *out = calloc((size_t)B * T * D * H, sizeof *out), *hT = calloc((size_t)L * D * B * H, sizeof *hT),
         *cT = calloc((size_t)L * D * B * H, sizeof *cT);
  ref_net(kind, net, L, D, B, T, I, H, xv, with_states ? hv : NULL, with_states ? cv : NULL, lens, false, out,
          hT, kind == K_LSTM ? cT : NULL);
  if (time_major) {
    expect_shape(y, 3, SHAPE(T, B, D * H));
    y = pd_transpose(y, 3, SHAPE(1, 0, 2));
  }
  expect_shape(y, 3, SHAPE(B, T, D * H));
  expect_vals(y, out, tol);
  expect_shape(fin[0], 3, SHAPE(L * D, B, H));
  expect_vals(fin[0], hT, tol);
  if (kind == K_LSTM) expect_vals(fin[1], cT, tol);
  free(xv), free(hv), free(cv), free(out), free(hT), free(cT);
  pd_scope_end();
  pd_layer_release(net);
  expect_no_live_tensors();
}

static void test_nets_two_layers_bidirectional(void **state) {
  (void)state;
  pd_seed(3);
  for (int kind = K_TANH; kind <= K_GRU; kind++) {
    check_net(kind, 2, 2, true, NULL, PD_INT64, false, PD_FLOAT64, 1e-12);
    check_net(kind, 2, 1, false, NULL, PD_INT64, false, PD_FLOAT64, 1e-12);
  }
  check_net(K_LSTM, 2, 2, true, NULL, PD_INT64, false, PD_FLOAT32, 1e-5);
  check_net(K_GRU, 1, 1, true, NULL, PD_INT64, false, PD_FLOAT32, 1e-5);
}

static void test_sequence_length(void **state) {
  (void)state;
  pd_seed(5);
  const int64_t lens[3] = {4, 2, 1};
  check_net(K_LSTM, 2, 2, true, lens, PD_INT64, false, PD_FLOAT64, 1e-12);
  check_net(K_GRU, 1, 2, false, lens, PD_INT32, false, PD_FLOAT64, 1e-12);
  check_net(K_TANH, 2, 1, true, lens, PD_INT32, true, PD_FLOAT64, 1e-12);
  const int64_t zero[3] = {0, 3, 4};
  check_net(K_LSTM, 1, 2, true, zero, PD_INT64, false, PD_FLOAT64, 1e-12);
}

static void test_time_major(void **state) {
  (void)state;
  pd_seed(9);
  check_net(K_GRU, 2, 2, true, NULL, PD_INT64, true, PD_FLOAT64, 1e-12);
  check_net(K_LSTM, 1, 1, false, NULL, PD_INT64, true, PD_FLOAT64, 1e-12);
}

static void test_dropout_between_layers(void **state) {
  (void)state;
  pd_seed(21);
  const int B = 2, T = 3, I = 2, H = 3;
  pd_nn_rnn_net_opts o = {.num_layers = 2, .dropout = 1.0, .dtype = PD_FLOAT64};
  pd_layer *net = pd_nn_lstm(I, H, &o);
  pd_scope_begin();
  pd_tensor *x = pd_randn(3, SHAPE(B, T, I), PD_FLOAT64), *y, *fin[2];
  double *xv = vals(x), out[2 * 3 * 3], hT[2 * 2 * 3], cT[2 * 2 * 3];
  /* training: p = 1 zeroes the second layer's inputs */
  assert_int_equal(pd_nn_rnn_call(net, x, NULL, 0, NULL, &y, fin, 2), 2);
  ref_net(K_LSTM, net, 2, 1, B, T, I, H, xv, NULL, NULL, NULL, true, out, hT, cT);
  expect_vals(y, out, 1e-12);
  expect_vals(fin[1], cT, 1e-12);
  /* eval: no dropout */
  pd_layer_eval(net);
  assert_int_equal(pd_nn_rnn_call(net, x, NULL, 0, NULL, &y, fin, 2), 2);
  ref_net(K_LSTM, net, 2, 1, B, T, I, H, xv, NULL, NULL, NULL, false, out, hT, cT);
  expect_vals(y, out, 1e-12);
  free(xv);
  pd_scope_end();
  pd_layer_release(net);
  /* p = 0.5 in training: the outputs still have the right shape and differ from eval */
  o.dropout = 0.5;
  o.num_layers = 3;
  net = pd_nn_gru(I, H, &o);
  pd_scope_begin();
  pd_tensor *x2 = pd_randn(3, SHAPE(B, T, I), PD_FLOAT64);
  pd_tensor *ytrain = pd_layer_call1(net, x2);
  pd_layer_eval(net);
  pd_tensor *yeval = pd_layer_call1(net, x2);
  expect_shape(ytrain, 3, SHAPE(B, T, H));
  double diff = 0;
  for (int64_t i = 0; i < B * T * H; i++)
    diff += fabs(pd_tensor_item_at(ytrain, i) - pd_tensor_item_at(yeval, i));
  assert_true(diff > 1e-6);
  pd_scope_end();
  pd_layer_release(net);
  expect_no_live_tensors();
}

/* ---- RNN / BiRNN wrappers, including a user cell ---------------------------------- */

/* h = tanh(0.5 x + h) summed over the input features; state defaults to zeros. */
static int toy_cell_forward(pd_layer *self, pd_tensor *const *in, int n_in, pd_tensor **out, int max_out) {
  (void)self, (void)max_out;
  pd_tensor *x = pd_sum(in[0], SHAPE(1), 1, true);
  pd_tensor *h = n_in > 1 ? in[1] : pd_zeros(2, SHAPE(pd_tensor_shape(in[0])[0], 2), pd_tensor_dtype(in[0]));
  out[0] = out[1] = pd_tanh(pd_add(pd_scale(x, 0.5, 0, true), h));
  return 2;
}
static const pd_layer_type toy_cell_type = {"ToyCell", toy_cell_forward, NULL, NULL};

static void test_rnn_wrappers(void **state) {
  (void)state;
  pd_seed(17);
  const int B = 3, T = 4, I = 3, H = 4;
  /* RNN(LSTMCell, is_reverse) equals the backward half of a naive loop */
  pd_layer *cell = make_cell(K_LSTM, I, H, PD_FLOAT64);
  pd_layer *rnn = pd_nn_rnn(cell, true, false);
  assert_non_null(rnn);
  pd_scope_begin();
  pd_tensor *x = pd_randn(3, SHAPE(B, T, I), PD_FLOAT64), *y, *fin[2];
  assert_int_equal(pd_nn_rnn_call(rnn, x, NULL, 0, NULL, &y, fin, 2), 2);
  ref_w w = ref_weights(cell, "");
  double *xv = vals(x);
  for (int b = 0; b < B; b++) {
    double h[4] = {0}, c[4] = {0};
    for (int t = T - 1; t >= 0; t--) {
      ref_step(K_LSTM, I, H, &w, xv + (b * T + t) * I, h, c);
      for (int j = 0; j < H; j++) assert_true(fabs(pd_tensor_item_at(y, (b * T + t) * H + j) - h[j]) < 1e-12);
    }
    for (int j = 0; j < H; j++) assert_true(fabs(pd_tensor_item_at(fin[1], b * H + j) - c[j]) < 1e-12);
  }
  ref_free(&w);
  pd_named_layers subs;
  assert_int_equal(pd_layer_named_sublayers(rnn, &subs), PD_OK);
  assert_int_equal(subs.n, 1);
  assert_string_equal(subs.names[0], "cell");
  pd_named_layers_free(&subs);
  pd_layer_release(rnn);

  /* a user cell runs step by step, with its own initial state, masking and BiRNN */
  pd_layer *fw = pd_layer_new(sizeof(pd_layer), &toy_cell_type),
           *bw = pd_layer_new(sizeof(pd_layer), &toy_cell_type);
  pd_layer *bi = pd_nn_bi_rnn(fw, bw, false);
  assert_non_null(bi);
  pd_tensor *len = T(PD_INT64, 1, SHAPE(B), 4, 2, 3), *out[5];
  int n = pd_layer_call(bi, (pd_tensor *[]){x, len}, 2, out, 5);
  if (n < 0) fail_msg("%s", pd_last_error());
  assert_int_equal(n, 3);
  expect_shape(out[0], 3, SHAPE(B, T, 4));
  const int64_t lv[3] = {4, 2, 3};
  for (int b = 0; b < B; b++)
    for (int d = 0; d < 2; d++) {
      double h = 0;
      for (int k = 0; k < T; k++) {
        int t = d ? T - 1 - k : k;
        double want = 0;
        if (t < lv[b]) {
          double s = 0;
          for (int i = 0; i < I; i++) s += xv[(b * T + t) * I + i];
          h = want = tanh(0.5 * s + h);
        }
        for (int j = 0; j < 2; j++)
          assert_true(fabs(pd_tensor_item_at(out[0], (b * T + t) * 4 + d * 2 + j) - want) < 1e-12);
      }
      for (int j = 0; j < 2; j++) assert_true(fabs(pd_tensor_item_at(out[1 + d], b * 2 + j) - h) < 1e-12);
    }
  free(xv);
  pd_scope_end();
  pd_layer_release(bi);
  expect_no_live_tensors();
}

/* ---- gradients ------------------------------------------------------------------ */

/* loss = sum(y * ry) + sum(h * rh) + sum(c * rc) */
static pd_tensor *lstm_loss(pd_layer *net, pd_tensor *x, pd_tensor *h0, pd_tensor *c0, pd_tensor *len,
                            pd_tensor *ry, pd_tensor *rh, pd_tensor *rc) {
  pd_tensor *y, *fin[2];
  if (pd_nn_rnn_call(net, x, (pd_tensor *[]){h0, c0}, 2, len, &y, fin, 2) != 2) return NULL;
  pd_tensor *l =
      pd_add(pd_sum(pd_multiply(y, ry), NULL, 0, false), pd_sum(pd_multiply(fin[0], rh), NULL, 0, false));
  return pd_add(l, pd_sum(pd_multiply(fin[1], rc), NULL, 0, false));
}

static void fd_check(pd_tensor *p, double (*f)(void *), void *ctx, const char *what) {
  pd_tensor *g = pd_tensor_grad(p);
  assert_non_null(g);
  double *d = pd_tensor_data(p);
  const double eps = 1e-6;
  for (int64_t i = 0; i < pd_tensor_numel(p); i++) {
    double keep = d[i];
    d[i] = keep + eps;
    double lp = f(ctx);
    d[i] = keep - eps;
    double lm = f(ctx);
    d[i] = keep;
    double fd = (lp - lm) / (2 * eps), an = pd_tensor_item_at(g, i);
    if (fabs(fd - an) > 1e-6 * (1 + fabs(fd)))
      fail_msg("%s[%lld]: analytic %.10g, finite difference %.10g", what, (long long)i, an, fd);
  }
}

typedef struct grad_ctx {
  pd_layer *net;
  pd_tensor *x, *h0, *c0, *len, *ry, *rh, *rc;
} grad_ctx;

static double eval_loss(void *p) {
  grad_ctx *g = p;
  pd_scope_begin();
  bool prev = pd_set_grad_enabled(false);
  pd_tensor *l = lstm_loss(g->net, g->x, g->h0, g->c0, g->len, g->ry, g->rh, g->rc);
  double v = pd_tensor_item_at(l, 0);
  pd_set_grad_enabled(prev);
  pd_scope_end();
  return v;
}

static void test_lstm_gradients_finite_differences(void **state) {
  (void)state;
  pd_seed(29);
  const int B = 2, T = 3, I = 2, H = 2, L = 2, D = 2;
  pd_nn_lstm_opts o = {.num_layers = L, .direction = "bidirectional", .dtype = PD_FLOAT64};
  pd_layer *net = pd_nn_lstm(I, H, &o);
  pd_scope_begin();
  grad_ctx g = {.net = net};
  g.x = pd_randn(3, SHAPE(B, T, I), PD_FLOAT64);
  g.h0 = pd_randn(3, SHAPE(L * D, B, H), PD_FLOAT64);
  g.c0 = pd_randn(3, SHAPE(L * D, B, H), PD_FLOAT64);
  g.len = T(PD_INT64, 1, SHAPE(B), 3, 2);
  g.ry = pd_randn(3, SHAPE(B, T, D * H), PD_FLOAT64);
  g.rh = pd_randn(3, SHAPE(L * D, B, H), PD_FLOAT64);
  g.rc = pd_randn(3, SHAPE(L * D, B, H), PD_FLOAT64);
  pd_tensor_set_stop_gradient(g.x, false);
  pd_tensor_set_stop_gradient(g.h0, false);
  pd_tensor_set_stop_gradient(g.c0, false);
  pd_tensor *loss = lstm_loss(net, g.x, g.h0, g.c0, g.len, g.ry, g.rh, g.rc);
  assert_non_null(loss);
  assert_int_equal(pd_backward(loss, NULL, false), PD_OK);
  pd_named_tensors ps;
  assert_int_equal(pd_layer_named_parameters(net, &ps), PD_OK);
  assert_int_equal(ps.n, L * D * 4);
  for (int k = 0; k < ps.n; k++) fd_check(ps.tensors[k], eval_loss, &g, ps.names[k]);
  pd_named_tensors_free(&ps);
  fd_check(g.x, eval_loss, &g, "x");
  fd_check(g.h0, eval_loss, &g, "h0");
  fd_check(g.c0, eval_loss, &g, "c0");
  pd_scope_end();
  pd_layer_release(net);
  expect_no_live_tensors();
}

/* GRU and SimpleRNN cells: gradients of a step against finite differences. */
static pd_layer *g_cell;
static pd_tensor *g_cx, *g_ch;
static double eval_cell(void *p) {
  (void)p;
  pd_scope_begin();
  pd_tensor *out[2];
  pd_layer_call(g_cell, (pd_tensor *[]){g_cx, g_ch}, 2, out, 2);
  double v = 0;
  for (int64_t i = 0; i < pd_tensor_numel(out[0]); i++)
    v += pd_tensor_item_at(out[0], i) * (double)(i % 3 + 1);
  pd_scope_end();
  return v;
}

static void test_cell_gradients(void **state) {
  (void)state;
  pd_seed(31);
  for (int kind = K_TANH; kind <= K_GRU; kind += 3) {
    g_cell = make_cell(kind, 3, 2, PD_FLOAT64);
    pd_scope_begin();
    g_cx = pd_randn(2, SHAPE(2, 3), PD_FLOAT64);
    g_ch = pd_randn(2, SHAPE(2, 2), PD_FLOAT64);
    pd_tensor_set_stop_gradient(g_ch, false);
    pd_tensor *out[2];
    assert_int_equal(pd_layer_call(g_cell, (pd_tensor *[]){g_cx, g_ch}, 2, out, 2), 2);
    pd_tensor *wts =
        pd_scale(pd_remainder(pd_arange(0, 4, 1, PD_FLOAT64), T(PD_FLOAT64, 0, NULL, 3)), 1, 1, true);
    pd_tensor *loss = pd_sum(pd_multiply(out[0], pd_reshape(wts, 2, SHAPE(2, 2))), NULL, 0, false);
    assert_int_equal(pd_backward(loss, NULL, false), PD_OK);
    const char *names[4] = {"weight_ih", "weight_hh", "bias_ih", "bias_hh"};
    for (int k = 0; k < 4; k++) fd_check(pd_layer_parameter(g_cell, names[k]), eval_cell, NULL, names[k]);
    fd_check(g_ch, eval_cell, NULL, "h");
    pd_scope_end();
    pd_layer_release(g_cell);
  }
  expect_no_live_tensors();
}

/* ---- parameters ----------------------------------------------------------------- */

static void test_parameter_names_and_shapes(void **state) {
  (void)state;
  pd_nn_lstm_opts o = {.num_layers = 2, .direction = "bidirect"};
  pd_layer *net = pd_nn_lstm(3, 4, &o);
  pd_named_tensors ps;
  assert_int_equal(pd_layer_named_parameters(net, &ps), PD_OK);
  assert_int_equal(ps.n, 16);
  const char *want[16] = {
      "weight_ih_l0",         "weight_hh_l0",         "bias_ih_l0",         "bias_hh_l0",
      "weight_ih_l0_reverse", "weight_hh_l0_reverse", "bias_ih_l0_reverse", "bias_hh_l0_reverse",
      "weight_ih_l1",         "weight_hh_l1",         "bias_ih_l1",         "bias_hh_l1",
      "weight_ih_l1_reverse", "weight_hh_l1_reverse", "bias_ih_l1_reverse", "bias_hh_l1_reverse"};
  for (int i = 0; i < 16; i++) assert_string_equal(ps.names[i], want[i]);
  expect_shape(ps.tensors[0], 2, SHAPE(16, 3));
  expect_shape(ps.tensors[1], 2, SHAPE(16, 4));
  expect_shape(ps.tensors[2], 1, SHAPE(16));
  expect_shape(ps.tensors[8], 2, SHAPE(16, 8));
  assert_int_equal(pd_tensor_dtype(ps.tensors[0]), PD_FLOAT32);
  /* Uniform(-1/sqrt(4), 1/sqrt(4)) for weights and biases, not all zero */
  double mx = 0;
  for (int k = 0; k < 16; k++)
    for (int64_t i = 0; i < pd_tensor_numel(ps.tensors[k]); i++) {
      double v = fabs(pd_tensor_item_at(ps.tensors[k], i));
      assert_true(v <= 0.5);
      if (v > mx) mx = v;
    }
  assert_true(mx > 0.3);
  /* the cells hold the same tensors */
  pd_layer *cell_bw = pd_layer_sublayer(pd_layer_sublayer(net, "1"), "cell_bw");
  assert_non_null(cell_bw);
  assert_ptr_equal(pd_layer_parameter(cell_bw, "weight_hh"), ps.tensors[13]);
  pd_named_tensors_free(&ps);
  pd_named_layers subs;
  assert_int_equal(pd_layer_named_sublayers(net, &subs), PD_OK);
  assert_int_equal(subs.n, 6);
  assert_string_equal(subs.names[0], "0");
  assert_string_equal(subs.names[1], "0.cell_fw");
  assert_string_equal(subs.names[2], "0.cell_bw");
  pd_named_layers_free(&subs);
  /* as Paddle's, the state dict lists each weight under both of its paths:
   * the LSTM's own name, then the cell's */
  pd_named_tensors sd;
  assert_int_equal(pd_layer_state_dict(net, &sd), PD_OK);
  assert_int_equal(sd.n, 32);
  for (int i = 0; i < 16; i++) assert_string_equal(sd.names[i], want[i]);
  assert_string_equal(sd.names[16], "0.cell_fw.weight_ih");
  assert_string_equal(sd.names[23], "0.cell_bw.bias_hh");
  assert_string_equal(sd.names[31], "1.cell_bw.bias_hh");
  assert_ptr_equal(sd.tensors[16], sd.tensors[0]);
  assert_ptr_equal(sd.tensors[31], sd.tensors[15]);
  /* either half loads every weight: nothing is missing */
  pd_named_tensors half = {.n = 16, .names = sd.names + 16, .tensors = sd.tensors + 16}, missing, unexpected;
  assert_int_equal(pd_layer_match_state_dict(net, &half, &missing, &unexpected), PD_OK);
  assert_int_equal(missing.n, 0);
  assert_int_equal(unexpected.n, 0);
  half.names = sd.names;
  half.n = 15; /* without bias_hh_l1_reverse (and its cell name): that one is missing, twice */
  assert_int_equal(pd_layer_match_state_dict(net, &half, &missing, &unexpected), PD_OK);
  assert_int_equal(missing.n, 2);
  assert_string_equal(missing.names[0], "bias_hh_l1_reverse");
  assert_string_equal(missing.names[1], "1.cell_bw.bias_hh");
  pd_named_tensors_free(&missing);
  pd_named_tensors_free(&unexpected);
  pd_named_tensors_free(&sd);
  char *s = pd_layer_to_string(net);
  assert_non_null(strstr(s, "LSTM(3, 4, num_layers=2"));
  assert_non_null(strstr(s, "(cell_fw): LSTMCell(3, 4)"));
  assert_non_null(strstr(s, "BiRNN("));
  free(s);
  pd_layer_release(net);

  /* GRU and SimpleRNN shapes; state dicts line up between two networks */
  pd_layer *g1 = pd_nn_gru(5, 3, NULL), *g2 = pd_nn_gru(5, 3, NULL);
  expect_shape(pd_layer_parameter(g1, "weight_ih_l0"), 2, SHAPE(9, 5));
  expect_shape(pd_layer_parameter(g1, "bias_hh_l0"), 1, SHAPE(9));
  assert_int_equal(pd_layer_state_dict(g1, &sd), PD_OK);
  assert_int_equal(pd_layer_set_state_dict(g2, &sd, &missing, &unexpected), PD_OK);
  assert_int_equal(missing.n, 0);
  assert_int_equal(unexpected.n, 0);
  pd_named_tensors_free(&missing);
  pd_named_tensors_free(&unexpected);
  pd_named_tensors_free(&sd);
  pd_scope_begin();
  pd_tensor *x = pd_randn(3, SHAPE(2, 3, 5), PD_FLOAT32);
  expect_close(pd_layer_call1(g2, x), pd_layer_call1(g1, x), 0, 0);
  pd_scope_end();
  pd_layer_release(g1);
  pd_layer_release(g2);
  pd_nn_simple_rnn_opts so = {.activation = "relu", .num_layers = 2};
  pd_layer *sr = pd_nn_simple_rnn(5, 3, &so);
  expect_shape(pd_layer_parameter(sr, "weight_ih_l1"), 2, SHAPE(3, 3));
  s = pd_layer_to_string(sr);
  assert_non_null(strstr(s, "SimpleRNNCell(5, 3, activation=relu)"));
  free(s);
  pd_layer_release(sr);
  expect_no_live_tensors();
}

/* ---- bad inputs ----------------------------------------------------------------- */

static void test_bad_inputs(void **state) {
  (void)state;
  pd_nn_lstm_opts o = {.num_layers = 2};
  pd_layer *net = pd_nn_lstm(4, 3, &o);
  pd_scope_begin();
  pd_tensor *y, *fin[2];
  /* input_size mismatch names both */
  assert_true(pd_nn_rnn_call(net, pd_zeros(3, SHAPE(2, 5, 6), PD_FLOAT32), NULL, 0, NULL, &y, fin, 2) < 0);
  expect_error(NULL, "LSTM: input_size mismatch", "input_size is 4 but inputs have shape [2, 5, 6]");
  /* 2-D inputs */
  expect_error(pd_layer_call1(net, pd_zeros(2, SHAPE(2, 4), PD_FLOAT32)), "LSTM", "[2, 4]");
  /* state shapes: [num_layers * num_directions, batch, hidden] */
  pd_tensor *x = pd_zeros(3, SHAPE(2, 5, 4), PD_FLOAT32);
  pd_tensor *h_bad = pd_zeros(3, SHAPE(1, 2, 3), PD_FLOAT32), *c = pd_zeros(3, SHAPE(2, 2, 3), PD_FLOAT32);
  assert_true(pd_nn_rnn_call(net, x, (pd_tensor *[]){h_bad, c}, 2, NULL, &y, fin, 2) < 0);
  expect_error(NULL, "[2, 2, 3]", "[1, 2, 3]");
  /* LSTM needs both h and c */
  assert_true(pd_nn_rnn_call(net, x, (pd_tensor *[]){c}, 1, NULL, &y, fin, 2) < 0);
  expect_error(NULL, "LSTM", "got 1");
  /* dtype mismatch */
  assert_true(pd_nn_rnn_call(net, pd_zeros(3, SHAPE(2, 5, 4), PD_FLOAT64), NULL, 0, NULL, &y, fin, 2) < 0);
  expect_error(NULL, "float64", "float32");
  /* sequence_length of the wrong length */
  assert_true(pd_nn_rnn_call(net, x, NULL, 0, T(PD_INT64, 1, SHAPE(3), 1, 2, 3), &y, fin, 2) < 0);
  expect_error(NULL, "sequence_length", "[3]");
  /* room for the states */
  assert_true(pd_nn_rnn_call(net, x, NULL, 0, NULL, &y, fin, 1) < 0);
  /* cells */
  pd_layer *cell = pd_nn_gru_cell(4, 3, NULL);
  expect_error(pd_layer_call1(cell, pd_zeros(2, SHAPE(2, 5), PD_FLOAT32)), "GRUCell", "input_size is 4");
  pd_tensor *out[2];
  assert_true(pd_layer_call(
                  cell,
                  (pd_tensor *[]){pd_zeros(2, SHAPE(2, 4), PD_FLOAT32), pd_zeros(2, SHAPE(3, 3), PD_FLOAT32)},
                  2, out, 2) < 0);
  expect_error(NULL, "[2, 3]", "[3, 3]");
  pd_layer_release(cell);
  pd_scope_end();
  pd_layer_release(net);
  /* constructors */
  expect_error((pd_tensor *)pd_nn_lstm_cell(4, 0, NULL), "LSTMCell", "hidden_size");
  pd_nn_lstm_cell_opts po = {.proj_size = 2};
  expect_error((pd_tensor *)pd_nn_lstm_cell(4, 3, &po), "proj_size=2", "not supported");
  pd_nn_gru_opts bo = {.direction = "sideways"};
  expect_error((pd_tensor *)pd_nn_gru(4, 3, &bo), "GRU", "sideways");
  pd_nn_simple_rnn_opts ao = {.activation = "gelu"};
  expect_error((pd_tensor *)pd_nn_simple_rnn(4, 3, &ao), "SimpleRNN", "gelu");
  pd_nn_gru_opts dro = {.dropout = 1.5};
  expect_error((pd_tensor *)pd_nn_gru(4, 3, &dro), "GRU", "1.5");
  pd_nn_rnn_cell_opts io = {.dtype = PD_INT32};
  expect_error((pd_tensor *)pd_nn_gru_cell(4, 3, &io), "GRUCell", "int32");
  pd_layer *c1 = pd_nn_gru_cell(4, 3, NULL), *c2 = pd_nn_gru_cell(5, 3, NULL);
  expect_error((pd_tensor *)pd_nn_bi_rnn(c1, c2, false), "(4)", "(5)");
  expect_no_live_tensors();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cells),
      cmocka_unit_test(test_nets_two_layers_bidirectional),
      cmocka_unit_test(test_sequence_length),
      cmocka_unit_test(test_time_major),
      cmocka_unit_test(test_dropout_between_layers),
      cmocka_unit_test(test_rnn_wrappers),
      cmocka_unit_test(test_lstm_gradients_finite_differences),
      cmocka_unit_test(test_cell_gradients),
      cmocka_unit_test(test_parameter_names_and_shapes),
      cmocka_unit_test(test_bad_inputs),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
