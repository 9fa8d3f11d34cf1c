/* Optimizers: each update rule over three steps with fixed grads against the
 * formula evaluated here in double (textbook forms, not the library's
 * kernels), regularizers, clipping, parameter attributes and groups,
 * multi_precision master weights, state dicts, bad inputs, and a small
 * training run. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ops/op_registry.h"
#include "test_util.h"

#define N 4
static const double P0[N] = {1.0, -2.0, 0.5, 3.0};
static const double G[3][N] = {{0.5, -1.0, 2.0, 0.1}, {-0.3, 0.7, 1.5, -0.2}, {1.2, -0.4, -0.8, 0.05}};

/* A named float64 (or dt) leaf that needs a gradient, owned by the open scope. */
static pd_tensor *make_param(const char *name, const double *v, int n, pd_dtype dt) {
  pd_tensor *p = pd_tensor_from_f64(v, dt, 1, (const int64_t[]){n});
  pd_tensor_set_stop_gradient(p, false);
  pd_tensor_set_name(p, name);
  return p;
}

static void set_grad(pd_tensor *p, const double *g, pd_dtype dt) {
  pd_tensor_set_grad(p, pd_tensor_from_f64(g, dt, pd_tensor_ndim(p), pd_tensor_shape(p)));
}

static void expect_param(const pd_tensor *p, const double *want, double tol) {
  for (int64_t i = 0; i < pd_tensor_numel(p); i++) {
    double x = pd_tensor_item_at(p, i);
    if (!(fabs(x - want[i]) <= tol * (1 + fabs(want[i]))))
      fail_msg("element %lld: got %.12g, want %.12g", (long long)i, x, want[i]);
  }
}

/* Runs three steps on a fresh float64 param and compares after each with
 * ref(step t (1-based), p, g, state) applied to a double copy. */
typedef void (*ref_step)(int t, double *p, const double *g, double *st, const void *cfg);

static void run_three(pd_optimizer *opt, pd_tensor *p, ref_step ref, const void *cfg, double tol) {
  assert_non_null(opt);
  double rp[N], st[8 * N] = {0};
  memcpy(rp, P0, sizeof rp);
  for (int t = 0; t < 3; t++) {
    set_grad(p, G[t], pd_tensor_dtype(p));
    assert_int_equal(pd_optimizer_step(opt), PD_OK);
    ref(t + 1, rp, G[t], st, cfg);
    expect_param(p, rp, tol);
  }
}

/* ---- SGD / Momentum ------------------------------------------------------------------ */
typedef struct cfg {
  double lr, b1, b2, eps, mu, rho, wd, l2;
  bool flag;
} cfg;

static void ref_sgd(int t, double *p, const double *g, double *st, const void *c_) {
  (void)t;
  (void)st;
  const cfg *c = c_;
  for (int i = 0; i < N; i++) p[i] -= c->lr * (g[i] + c->l2 * p[i]);
}

static void test_sgd_with_l2(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *p = make_param("w", P0, N, PD_FLOAT64);
  cfg c = {.lr = 0.1, .l2 = 0.125};
  pd_optimizer_sgd_opts o = {.weight_decay = pd_regularizer_l2_decay(0.125)};
  pd_optimizer *opt = pd_optimizer_sgd(0.1, &p, 1, &o);
  run_three(opt, p, ref_sgd, &c, 1e-13);
  assert_string_equal(pd_optimizer_name(opt), "SGD");
  pd_optimizer_release(opt);
  pd_scope_end();
  expect_no_live_tensors();
}

static void ref_momentum(int t, double *p, const double *g, double *v, const void *c_) {
  (void)t;
  const cfg *c = c_;
  for (int i = 0; i < N; i++) {
    v[i] = c->mu * v[i] + g[i];
    p[i] -= c->flag ? c->lr * (g[i] + c->mu * v[i]) : c->lr * v[i];
  }
}

static void test_momentum_and_nesterov(void **state) {
  (void)state;
  for (int nesterov = 0; nesterov < 2; nesterov++) {
    pd_scope_begin();
    pd_tensor *p = make_param("w", P0, N, PD_FLOAT64);
    cfg c = {.lr = 0.05, .mu = 0.9, .flag = nesterov};
    pd_optimizer_momentum_opts o = pd_optimizer_momentum_defaults(); /* Paddle's momentum 0.9 */
    o.use_nesterov = nesterov;
    pd_optimizer *opt = pd_optimizer_momentum(0.05, &p, 1, &o);
    run_three(opt, p, ref_momentum, &c, 1e-13);
    /* the velocity is in the state dict under Paddle's name */
    pd_named_tensors sd;
    assert_int_equal(pd_optimizer_state_dict(opt, &sd), PD_OK);
    assert_int_equal(sd.n, 1);
    assert_string_equal(sd.names[0], "w_velocity_0");
    pd_named_tensors_free(&sd);
    pd_optimizer_release(opt);
    pd_scope_end();
  }
  /* momentum = 0 explicitly: plain SGD */
  pd_scope_begin();
  pd_tensor *p = make_param("w", P0, N, PD_FLOAT64);
  pd_optimizer_momentum_opts o = pd_optimizer_momentum_defaults();
  o.momentum = 0;
  pd_optimizer *opt = pd_optimizer_momentum(0.1, &p, 1, &o);
  cfg c = {.lr = 0.1};
  run_three(opt, p, ref_sgd, &c, 1e-13);
  pd_optimizer_release(opt);
  pd_scope_end();
  expect_no_live_tensors();
}

/* ---- the options rule: a field means what it says ----------------------------------- */
static void test_options_mean_what_they_say(void **state) {
  (void)state;
  pd_scope_begin();
  /* a literal that sets explicit_zero is taken as written: momentum 0 is plain SGD (0.9 would
   * give a second step of 1.9 lr g) */
  pd_tensor *p = make_param("w", (const double[]){1, 2}, 2, PD_FLOAT64);
  pd_optimizer_momentum_opts zero = {.explicit_zero = true, .momentum = 0, .rescale_grad = 1.0};
  pd_optimizer *opt = pd_optimizer_momentum(0.5, &p, 1, &zero);
  assert_non_null(opt);
  for (int t = 0; t < 2; t++) {
    set_grad(p, (const double[]){1, -2}, PD_FLOAT64);
    assert_int_equal(pd_optimizer_step(opt), PD_OK);
  }
  expect_param(p, (const double[]){1 - 2 * 0.5 * 1, 2 + 2 * 0.5 * 2}, 1e-15);
  pd_optimizer_release(opt);
  /* the surprising form is refused, not read as the default: {.momentum = 0} without
   * explicit_zero names the function to start from */
  pd_optimizer_momentum_opts literal = {.momentum = 0};
  assert_null(pd_optimizer_momentum(0.5, &p, 1, &literal));
  expect_error(NULL, "Momentum", "pd_optimizer_momentum_defaults()");
  pd_optimizer_adam_opts adam = {.beta1 = 0};
  assert_null(pd_optimizer_adam(0.5, &p, 1, &adam));
  expect_error(NULL, "Adam", "pd_optimizer_adam_defaults()");
  /* a group's options follow the same rule */
  pd_optimizer_group g = {.params = &p, .n_params = 1, .opts = &literal};
  pd_optimizer_momentum_opts grouped = pd_optimizer_momentum_defaults();
  grouped.groups = &g;
  grouped.n_groups = 1;
  assert_null(pd_optimizer_momentum(0.5, NULL, 0, &grouped));
  expect_error(NULL, "Momentum", "pd_optimizer_momentum_defaults()");
  /* so do the schedulers with non-zero defaults */
  pd_optimizer_lr_reduce_on_plateau_opts plateau = {.patience = 0};
  assert_null(pd_optimizer_lr_reduce_on_plateau(0.1, &plateau));
  expect_error(NULL, "ReduceOnPlateau", "pd_optimizer_lr_reduce_on_plateau_defaults()");
  /* SGD's defaults are all zero: any literal is what it says */
  pd_optimizer_sgd_opts sgd = {.weight_decay = {0}};
  opt = pd_optimizer_sgd(0.5, &p, 1, &sgd);
  assert_non_null(opt);
  pd_optimizer_release(opt);
  pd_scope_end();
  expect_no_live_tensors();
}

/* ---- Adam family ---------------------------------------------------------------------- */
/* textbook Adam: bias-corrected moments, eps outside the root */
static void ref_adam(int t, double *p, const double *g, double *st, const void *c_) {
  const cfg *c = c_;
  double *m = st, *v = st + N;
  for (int i = 0; i < N; i++) {
    double gi = g[i] + c->l2 * p[i];
    if (c->wd != 0) p[i] -= c->lr * c->wd * p[i]; /* AdamW's decoupled decay */
    m[i] = c->b1 * m[i] + (1 - c->b1) * gi;
    v[i] = c->b2 * v[i] + (1 - c->b2) * gi * gi;
    double mh = m[i] / (1 - pow(c->b1, t)), vh = v[i] / (1 - pow(c->b2, t));
    p[i] -= c->lr * mh / (sqrt(vh) + c->eps);
  }
}

static void test_adam_trajectory_and_bias_correction(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *p = make_param("w", P0, N, PD_FLOAT64);
  pd_optimizer *opt = pd_optimizer_adam(0.01, &p, 1, NULL);
  /* step 1: m^ = g and v^ = g^2, so each element moves by lr * sign(g) */
  set_grad(p, G[0], PD_FLOAT64);
  assert_int_equal(pd_optimizer_step(opt), PD_OK);
  for (int i = 0; i < N; i++)
    assert_true(fabs(pd_tensor_item_at(p, i) - (P0[i] - 0.01 * (G[0][i] > 0 ? 1 : -1))) < 1e-9);
  pd_optimizer_release(opt);
  pd_scope_end();

  /* three steps, float64 and float32, with Paddle's defaults and with L2 */
  for (int f32 = 0; f32 < 2; f32++) {
    for (int l2 = 0; l2 < 2; l2++) {
      pd_scope_begin();
      pd_tensor *q = make_param("w", P0, N, f32 ? PD_FLOAT32 : PD_FLOAT64);
      cfg c = {.lr = 0.01, .b1 = 0.9, .b2 = 0.999, .eps = 1e-8, .l2 = l2 ? 0.0625 : 0};
      pd_optimizer_adam_opts o = pd_optimizer_adam_defaults();
      o.weight_decay = l2 ? pd_regularizer_l2_decay(0.0625) : (pd_regularizer){0};
      pd_optimizer *a = pd_optimizer_adam(0.01, &q, 1, &o);
      run_three(a, q, ref_adam, &c, f32 ? 2e-6 : 1e-12);
      /* the powers hold beta^t of the next step: beta^4 after three */
      pd_named_tensors sd;
      assert_int_equal(pd_optimizer_state_dict(a, &sd), PD_OK);
      assert_int_equal(sd.n, 4);
      assert_string_equal(sd.names[0], "w_moment1_0");
      assert_string_equal(sd.names[1], "w_moment2_0");
      assert_string_equal(sd.names[2], "w_beta1_pow_acc_0");
      assert_string_equal(sd.names[3], "w_beta2_pow_acc_0");
      assert_int_equal(pd_tensor_dtype(sd.tensors[0]), f32 ? PD_FLOAT32 : PD_FLOAT64);
      assert_true(fabs(pd_tensor_item(sd.tensors[2]) - 0.6561) < 1e-7);
      assert_true(fabs(pd_tensor_item(sd.tensors[3]) - pow(0.999, 4)) < 1e-7);
      pd_named_tensors_free(&sd);
      pd_optimizer_release(a);
      pd_scope_end();
    }
  }
  /* beta1 = 0 explicitly (RMSProp-like Adam) */
  pd_scope_begin();
  p = make_param("w", P0, N, PD_FLOAT64);
  pd_optimizer_adam_opts o = pd_optimizer_adam_defaults();
  o.beta1 = 0;
  opt = pd_optimizer_adam(0.01, &p, 1, &o);
  cfg c = {.lr = 0.01, .b1 = 0, .b2 = 0.999, .eps = 1e-8};
  run_three(opt, p, ref_adam, &c, 1e-12);
  pd_optimizer_release(opt);
  pd_scope_end();
  expect_no_live_tensors();
}

static bool decay_all_but_bias(const char *name, void *user) {
  (void)user;
  return strstr(name, "bias") == NULL;
}

static double half_ratio_for_bias(const pd_tensor *p, void *user) {
  (void)user;
  return strstr(pd_tensor_name(p), "bias") ? 0.5 : 1.0;
}

static void test_adamw_decay_callback(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *w = make_param("my.weight", P0, N, PD_FLOAT64);
  pd_tensor *b = make_param("my.bias", P0, N, PD_FLOAT64);
  pd_tensor *ps[2] = {w, b};
  pd_optimizer_adam_w_opts o = pd_optimizer_adam_w_defaults();
  o.weight_decay = 0.25;
  o.apply_decay_param_fun = decay_all_but_bias;
  o.lr_ratio = half_ratio_for_bias;
  pd_optimizer *opt = pd_optimizer_adam_w(0.01, ps, 2, &o);
  assert_non_null(opt);
  cfg cw = {.lr = 0.01, .b1 = 0.9, .b2 = 0.999, .eps = 1e-8, .wd = 0.25};
  cfg cb = {.lr = 0.005, .b1 = 0.9, .b2 = 0.999, .eps = 1e-8, .wd = 0}; /* excluded; lr_ratio 0.5 */
  double rw[N], rb[N], sw[2 * N] = {0}, sb[2 * N] = {0};
  memcpy(rw, P0, sizeof rw);
  memcpy(rb, P0, sizeof rb);
  for (int t = 0; t < 3; t++) {
    set_grad(w, G[t], PD_FLOAT64);
    set_grad(b, G[t], PD_FLOAT64);
    assert_int_equal(pd_optimizer_step(opt), PD_OK);
    ref_adam(t + 1, rw, G[t], sw, &cw);
    ref_adam(t + 1, rb, G[t], sb, &cb);
    expect_param(w, rw, 1e-12);
    expect_param(b, rb, 1e-12);
  }
  pd_optimizer_release(opt);

  /* default AdamW decays with 0.01 */
  pd_tensor *q = make_param("q", P0, N, PD_FLOAT64);
  opt = pd_optimizer_adam_w(0.01, &q, 1, NULL);
  cfg cd = {.lr = 0.01, .b1 = 0.9, .b2 = 0.999, .eps = 1e-8, .wd = 0.01};
  run_three(opt, q, ref_adam, &cd, 1e-12);
  assert_string_equal(pd_optimizer_name(opt), "AdamW");
  pd_optimizer_release(opt);
  pd_scope_end();
  expect_no_live_tensors();
}

static void ref_adamax(int t, double *p, const double *g, double *st, const void *c_) {
  const cfg *c = c_;
  double *m = st, *u = st + N;
  for (int i = 0; i < N; i++) {
    m[i] = c->b1 * m[i] + (1 - c->b1) * g[i];
    u[i] = fmax(c->b2 * u[i] + c->eps, fabs(g[i]));
    p[i] -= c->lr / (1 - pow(c->b1, t)) * m[i] / u[i];
  }
}

static void test_adamax(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *p = make_param("w", P0, N, PD_FLOAT64);
  pd_optimizer *opt = pd_optimizer_adamax(0.02, &p, 1, NULL);
  cfg c = {.lr = 0.02, .b1 = 0.9, .b2 = 0.999, .eps = 1e-8};
  run_three(opt, p, ref_adamax, &c, 1e-12);
  pd_named_tensors sd;
  assert_int_equal(pd_optimizer_state_dict(opt, &sd), PD_OK);
  assert_int_equal(sd.n, 3);
  assert_string_equal(sd.names[1], "w_inf_norm_0");
  pd_named_tensors_free(&sd);
  pd_optimizer_release(opt);
  pd_scope_end();
  expect_no_live_tensors();
}

static void ref_adagrad(int t, double *p, const double *g, double *s, const void *c_) {
  const cfg *c = c_;
  if (t == 1)
    for (int i = 0; i < N; i++) s[i] = c->mu; /* initial_accumulator_value */
  for (int i = 0; i < N; i++) {
    s[i] += g[i] * g[i];
    p[i] -= c->lr * g[i] / (sqrt(s[i]) + c->eps);
  }
}

static void test_adagrad(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *p = make_param("w", P0, N, PD_FLOAT64);
  pd_optimizer_adagrad_opts o = pd_optimizer_adagrad_defaults();
  o.initial_accumulator_value = 0.1;
  pd_optimizer *opt = pd_optimizer_adagrad(0.1, &p, 1, &o);
  cfg c = {.lr = 0.1, .eps = 1e-6, .mu = 0.1};
  run_three(opt, p, ref_adagrad, &c, 1e-12);
  pd_optimizer_release(opt);
  pd_scope_end();
  expect_no_live_tensors();
}

static void ref_adadelta(int t, double *p, const double *g, double *st, const void *c_) {
  (void)t;
  const cfg *c = c_;
  double *eg = st, *eu = st + N;
  for (int i = 0; i < N; i++) {
    eg[i] = c->rho * eg[i] + (1 - c->rho) * g[i] * g[i];
    double u = -sqrt((eu[i] + c->eps) / (eg[i] + c->eps)) * g[i];
    eu[i] = c->rho * eu[i] + (1 - c->rho) * u * u;
    p[i] += c->lr * u;
  }
}

static void test_adadelta(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *p = make_param("w", P0, N, PD_FLOAT64);
  pd_optimizer *opt = pd_optimizer_adadelta(1.0, &p, 1, NULL);
  cfg c = {.lr = 1.0, .eps = 1e-6, .rho = 0.95};
  run_three(opt, p, ref_adadelta, &c, 1e-12);
  pd_named_tensors sd;
  assert_int_equal(pd_optimizer_state_dict(opt, &sd), PD_OK);
  assert_string_equal(sd.names[0], "w__avg_squared_grad_0");
  assert_string_equal(sd.names[1], "w__avg_squared_update_0");
  pd_named_tensors_free(&sd);
  pd_optimizer_release(opt);
  pd_scope_end();
  expect_no_live_tensors();
}

static void ref_rmsprop(int t, double *p, const double *g, double *st, const void *c_) {
  (void)t;
  const cfg *c = c_;
  double *mom = st, *ms = st + N, *mg = st + 2 * N;
  for (int i = 0; i < N; i++) {
    ms[i] = c->rho * ms[i] + (1 - c->rho) * g[i] * g[i];
    double den = ms[i] + c->eps;
    if (c->flag) {
      mg[i] = c->rho * mg[i] + (1 - c->rho) * g[i];
      den -= mg[i] * mg[i];
    }
    mom[i] = c->mu * mom[i] + c->lr * g[i] / sqrt(den);
    p[i] -= mom[i];
  }
}

static void test_rmsprop(void **state) {
  (void)state;
  for (int centered = 0; centered < 2; centered++) {
    pd_scope_begin();
    pd_tensor *p = make_param("w", P0, N, PD_FLOAT64);
    pd_optimizer_rms_prop_opts o = pd_optimizer_rms_prop_defaults();
    o.momentum = 0.5;
    o.centered = centered;
    o.rho = 0.9;
    pd_optimizer *opt = pd_optimizer_rms_prop(0.01, &p, 1, &o);
    cfg c = {.lr = 0.01, .eps = 1e-6, .rho = 0.9, .mu = 0.5, .flag = centered};
    run_three(opt, p, ref_rmsprop, &c, 1e-12);
    pd_named_tensors sd;
    assert_int_equal(pd_optimizer_state_dict(opt, &sd), PD_OK);
    assert_int_equal(sd.n, 3);
    assert_string_equal(sd.names[0], "w_momentum_0");
    assert_string_equal(sd.names[1], "w_mean_square_0");
    assert_string_equal(sd.names[2], "w_mean_grad_0");
    pd_named_tensors_free(&sd);
    pd_optimizer_release(opt);
    pd_scope_end();
  }
  expect_no_live_tensors();
}

static void ref_lamb(int t, double *p, const double *g, double *st, const void *c_) {
  const cfg *c = c_;
  double *m = st, *v = st + N, r[N], pn = 0, rn = 0;
  for (int i = 0; i < N; i++) {
    m[i] = c->b1 * m[i] + (1 - c->b1) * g[i];
    v[i] = c->b2 * v[i] + (1 - c->b2) * g[i] * g[i];
    double mh = m[i] / (1 - pow(c->b1, t)), vh = v[i] / (1 - pow(c->b2, t));
    r[i] = mh / (sqrt(vh) + c->eps) + c->wd * p[i];
    pn += p[i] * p[i];
    rn += r[i] * r[i];
  }
  double ratio = (c->wd != 0 || c->flag) && pn > 0 && rn > 0 ? sqrt(pn) / sqrt(rn) : 1.0;
  for (int i = 0; i < N; i++) p[i] -= c->lr * ratio * r[i];
}

static bool exclude_bias(const pd_tensor *p, void *user) {
  (void)user;
  return strcmp(pd_tensor_name(p), "bias") == 0;
}

static void test_lamb(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *w = make_param("weight", P0, N, PD_FLOAT64);
  pd_tensor *b = make_param("bias", P0, N, PD_FLOAT64);
  pd_tensor *ps[2] = {w, b};
  pd_optimizer_lamb_opts o = pd_optimizer_lamb_defaults();
  o.lamb_weight_decay = 0.1;
  o.exclude_from_weight_decay_fn = exclude_bias;
  pd_optimizer *opt = pd_optimizer_lamb(0.01, ps, 2, &o);
  cfg cw = {.lr = 0.01, .b1 = 0.9, .b2 = 0.999, .eps = 1e-6, .wd = 0.1};
  cfg cb = {
      .lr = 0.01, .b1 = 0.9, .b2 = 0.999, .eps = 1e-6, .wd = 0}; /* excluded: no decay, no trust ratio */
  double rw[N], rb[N], sw[2 * N] = {0}, sb[2 * N] = {0};
  memcpy(rw, P0, sizeof rw);
  memcpy(rb, P0, sizeof rb);
  for (int t = 0; t < 3; t++) {
    set_grad(w, G[t], PD_FLOAT64);
    set_grad(b, G[t], PD_FLOAT64);
    assert_int_equal(pd_optimizer_step(opt), PD_OK);
    ref_lamb(t + 1, rw, G[t], sw, &cw);
    ref_lamb(t + 1, rb, G[t], sb, &cb);
    expect_param(w, rw, 1e-12);
    expect_param(b, rb, 1e-12);
  }
  pd_optimizer_release(opt);
  /* always_adapt: the trust ratio also without weight decay */
  pd_tensor *q = make_param("q", P0, N, PD_FLOAT64);
  pd_optimizer_lamb_opts oa = pd_optimizer_lamb_defaults();
  oa.lamb_weight_decay = 0;
  oa.always_adapt = true;
  opt = pd_optimizer_lamb(0.01, &q, 1, &oa);
  cfg ca = {.lr = 0.01, .b1 = 0.9, .b2 = 0.999, .eps = 1e-6, .wd = 0, .flag = true};
  run_three(opt, q, ref_lamb, &ca, 1e-12);
  pd_optimizer_release(opt);
  pd_scope_end();
  expect_no_live_tensors();
}

/* ---- multi_precision ----------------------------------------------------------------- */
static void test_multi_precision_float16(void **state) {
  (void)state;
  for (int bf = 0; bf < 2; bf++) {
    pd_dtype dt = bf ? PD_BFLOAT16 : PD_FLOAT16;
    pd_scope_begin();
    pd_tensor *p = make_param("h", P0, N, dt);
    pd_optimizer_adam_opts o = pd_optimizer_adam_defaults();
    o.multi_precision = true;
    pd_optimizer *opt = pd_optimizer_adam(0.001, &p, 1, &o);
    cfg c = {.lr = 0.001, .b1 = 0.9, .b2 = 0.999, .eps = 1e-8};
    double rp[N], st[2 * N] = {0}, g16[N];
    memcpy(rp, P0, sizeof rp);
    for (int t = 0; t < 3; t++) {
      set_grad(p, G[t], dt);
      for (int i = 0; i < N; i++) g16[i] = pd_tensor_item_at(pd_tensor_grad(p), i); /* rounded grads */
      assert_int_equal(pd_optimizer_step(opt), PD_OK);
      ref_adam(t + 1, rp, g16, st, &c);
    }
    pd_named_tensors sd;
    assert_int_equal(pd_optimizer_state_dict(opt, &sd), PD_OK);
    assert_int_equal(sd.n, 5);
    assert_string_equal(sd.names[4], "master_weights.h");
    pd_tensor *master = sd.tensors[4];
    assert_int_equal(pd_tensor_dtype(master), PD_FLOAT32);
    assert_int_equal(pd_tensor_dtype(sd.tensors[0]), PD_FLOAT32); /* moments in float32 */
    /* the update is visible in the float32 master (3 steps of 1e-3 would be
     * lost in float16 rounding near 3.0) ... */
    expect_param(master, rp, 2e-6);
    /* ... and the parameter is the master cast to the half type */
    const uint16_t *ph = pd_tensor_data(p);
    const float *pm = pd_tensor_data(master);
    for (int i = 0; i < N; i++) assert_int_equal(ph[i], bf ? pd_f32_to_bf16(pm[i]) : pd_f32_to_f16(pm[i]));
    pd_named_tensors_free(&sd);
    pd_optimizer_release(opt);
    pd_scope_end();
  }
  /* without multi_precision a half param still updates (in float32 compute) */
  pd_scope_begin();
  pd_tensor *p = make_param("h", P0, N, PD_FLOAT16);
  pd_optimizer *opt = pd_optimizer_sgd(0.5, &p, 1, NULL);
  set_grad(p, G[0], PD_FLOAT16);
  assert_int_equal(pd_optimizer_step(opt), PD_OK);
  for (int i = 0; i < N; i++) assert_true(fabs(pd_tensor_item_at(p, i) - (P0[i] - 0.5 * G[0][i])) < 3e-3);
  pd_optimizer_release(opt);
  pd_scope_end();
  expect_no_live_tensors();
}

/* ---- large tensors: the parallel split and the float16 staging ----------------------- */
static void test_large_tensor_blocks(void **state) {
  (void)state;
  const int64_t n = 100003;
  double *v = malloc(sizeof(double) * (size_t)n), *g = malloc(sizeof(double) * (size_t)n);
  for (int64_t i = 0; i < n; i++) {
    v[i] = sin(0.001 * (double)i);
    g[i] = cos(0.003 * (double)i);
  }
  for (int half = 0; half < 2; half++) {
    pd_dtype dt = half ? PD_FLOAT16 : PD_FLOAT32;
    pd_scope_begin();
    pd_tensor *p = pd_tensor_from_f64(v, dt, 1, (const int64_t[]){n});
    pd_tensor_set_stop_gradient(p, false);
    pd_tensor *pv = pd_clone(p, PD_FLOAT64); /* the rounded start */
    pd_optimizer_adam_opts o = pd_optimizer_adam_defaults();
    o.multi_precision = half;
    pd_optimizer *opt = pd_optimizer_adam(0.01, &p, 1, &o);
    pd_tensor_set_grad(p, pd_tensor_from_f64(g, dt, 1, (const int64_t[]){n}));
    assert_int_equal(pd_optimizer_step(opt), PD_OK);
    /* step 1 of Adam moves each element by lr * sign(g) */
    for (int64_t i = 0; i < n; i += 997) {
      double gi = pd_tensor_item_at(pd_tensor_grad(p), i);
      double want = pd_tensor_item_at(pv, i) - (gi > 0 ? 0.01 : gi < 0 ? -0.01 : 0.0);
      double got = pd_tensor_item_at(p, i);
      if (!(fabs(got - want) < (half ? 2e-3 : 1e-6)))
        fail_msg("element %lld: %g vs %g", (long long)i, got, want);
    }
    pd_optimizer_release(opt);
    pd_scope_end();
  }

  /* Lamb's two passes with the norms reduced over blocks and threads */
  for (int half = 0; half < 2; half++) {
    pd_dtype dt = half ? PD_BFLOAT16 : PD_FLOAT32;
    pd_scope_begin();
    pd_tensor *p = pd_tensor_from_f64(v, dt, 1, (const int64_t[]){n});
    pd_tensor_set_stop_gradient(p, false);
    pd_tensor_set_grad(p, pd_tensor_from_f64(g, dt, 1, (const int64_t[]){n}));
    double *p0 = malloc(sizeof(double) * (size_t)n), *r = malloc(sizeof(double) * (size_t)n), pn = 0, rn = 0;
    for (int64_t i = 0; i < n; i++) {
      p0[i] = pd_tensor_item_at(p, i);
      double gi = pd_tensor_item_at(pd_tensor_grad(p), i);
      r[i] = gi / (fabs(gi) + 1e-6) + 0.01 * p0[i]; /* step 1: m^ = g, v^ = g^2 */
      pn += p0[i] * p0[i];
      rn += r[i] * r[i];
    }
    pd_optimizer_lamb_opts o = pd_optimizer_lamb_defaults();
    o.multi_precision = half;
    pd_optimizer *opt = pd_optimizer_lamb(0.01, &p, 1, &o);
    assert_int_equal(pd_optimizer_step(opt), PD_OK);
    pd_named_tensors sd;
    assert_int_equal(pd_optimizer_state_dict(opt, &sd), PD_OK);
    const pd_tensor *res = half ? sd.tensors[4] : p; /* the float32 master for bfloat16 */
    double ratio = sqrt(pn) / sqrt(rn);
    for (int64_t i = 0; i < n; i += 101) {
      double want = p0[i] - 0.01 * ratio * r[i], got = pd_tensor_item_at(res, i);
      if (!(fabs(got - want) < 1e-5)) fail_msg("lamb element %lld: %g vs %g", (long long)i, got, want);
    }
    pd_named_tensors_free(&sd);
    free(p0);
    free(r);
    pd_optimizer_release(opt);
    pd_scope_end();
  }
  free(v);
  free(g);
  expect_no_live_tensors();
}

/* ---- steady state: a step allocates nothing once the state exists ------------------------- */
static void test_steady_state_allocates_nothing(void **state) {
  (void)state;
  pd_scope_begin();
  const int64_t n = 5000;
  pd_tensor *a = pd_full(1, &n, 0.5, PD_FLOAT32), *h = pd_full(1, &n, 0.5, PD_FLOAT16);
  pd_tensor *ps[2] = {a, h};
  for (int i = 0; i < 2; i++) {
    pd_tensor_set_stop_gradient(ps[i], false);
    pd_tensor_set_grad(ps[i], pd_full(1, &n, 0.25, pd_tensor_dtype(ps[i])));
  }
  pd_optimizer_adam_w_opts o = pd_optimizer_adam_w_defaults();
  o.multi_precision = true;
  pd_optimizer *opt = pd_optimizer_adam_w(1e-3, ps, 2, &o);
  assert_int_equal(pd_optimizer_step(opt), PD_OK); /* creates the accumulators */
  size_t live = pd_memory_allocated();
  pd_memory_reset_peak();
  for (int t = 0; t < 3; t++) assert_int_equal(pd_optimizer_step(opt), PD_OK);
  assert_int_equal(pd_memory_allocated(), live);
  assert_int_equal(pd_memory_peak(), live);
  pd_optimizer_release(opt);
  pd_scope_end();
  expect_no_live_tensors();
}

/* ---- clipping ---------------------------------------------------------------------------- */
static void test_clip_by_global_norm(void **state) {
  (void)state;
  pd_scope_begin();
  double a0[2] = {1, 2}, b0[2] = {-1, 0.5};
  double ga[2] = {3, 0}, gb[2] = {0, 4}; /* global norm 5 */
  pd_tensor *a = make_param("a", a0, 2, PD_FLOAT64), *b = make_param("b", b0, 2, PD_FLOAT64);
  pd_tensor *ps[2] = {a, b};
  pd_grad_clip clip = pd_nn_clip_grad_by_global_norm(1.0);
  pd_optimizer_sgd_opts o = {.grad_clip = &clip};
  pd_optimizer *opt = pd_optimizer_sgd(1.0, ps, 2, &o);
  set_grad(a, ga, PD_FLOAT64);
  set_grad(b, gb, PD_FLOAT64);
  assert_int_equal(pd_optimizer_step(opt), PD_OK);
  /* every grad scaled by clip_norm / global_norm = 1/5 */
  EXPECT_VALUES(a, 1e-14, 1 - 0.6, 2);
  EXPECT_VALUES(b, 1e-14, -1, 0.5 - 0.8);
  /* the grads themselves are left alone */
  EXPECT_VALUES(pd_tensor_grad(a), 0, 3, 0);
  /* below the threshold nothing is scaled: norm 0.5 */
  double sa[2] = {0.3, 0}, sb[2] = {0, 0.4};
  set_grad(a, sa, PD_FLOAT64);
  set_grad(b, sb, PD_FLOAT64);
  assert_int_equal(pd_optimizer_step(opt), PD_OK);
  EXPECT_VALUES(a, 1e-14, 0.4 - 0.3, 2);
  EXPECT_VALUES(b, 1e-14, -1, -0.3 - 0.4);
  pd_optimizer_release(opt);

  /* the standalone clip(params_grads) */
  pd_tensor *grads[2] = {pd_tensor_from_f64(ga, PD_FLOAT64, 1, SHAPE(2)),
                         pd_tensor_from_f64(gb, PD_FLOAT64, 1, SHAPE(2))};
  pd_tensor *out[2];
  assert_int_equal(pd_nn_clip_grad_apply(&clip, ps, grads, 2, out), PD_OK);
  EXPECT_VALUES(out[0], 1e-14, 0.6, 0);
  EXPECT_VALUES(out[1], 1e-14, 0, 0.8);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_clip_need_clip_and_kinds(void **state) {
  (void)state;
  pd_scope_begin();
  /* a Linear whose weight opts out of clipping: it is neither scaled nor counted */
  pd_param_attr wa = {.no_clip = true};
  pd_nn_linear_opts lo = {.weight_attr = &wa};
  pd_layer *lin = pd_nn_linear(1, 2, &lo);
  pd_named_tensors ps;
  assert_int_equal(pd_layer_parameters(lin, &ps), PD_OK);
  pd_tensor *w = ps.tensors[0], *bias = ps.tensors[1];
  double w0[2] = {pd_tensor_item_at(w, 0), pd_tensor_item_at(w, 1)};
  double gw[2] = {30, 40}, gbias[2] = {3, 4}; /* norm of the clipped ones: 5 */
  pd_grad_clip clip = pd_nn_clip_grad_by_global_norm(1.0);
  pd_optimizer_sgd_opts o = {.grad_clip = &clip};
  pd_optimizer *opt = pd_optimizer_sgd(1.0, ps.tensors, ps.n, &o);
  set_grad(w, gw, PD_FLOAT32);
  set_grad(bias, gbias, PD_FLOAT32);
  assert_int_equal(pd_optimizer_step(opt), PD_OK);
  EXPECT_VALUES(w, 1e-6, w0[0] - 30, w0[1] - 40);
  EXPECT_VALUES(bias, 1e-6, -0.6, -0.8);
  pd_optimizer_release(opt);

  /* by norm: each tensor on its own */
  pd_grad_clip cn = pd_nn_clip_grad_by_norm(2.5);
  pd_optimizer_sgd_opts on = {.grad_clip = &cn};
  double q0[2] = {0, 0}, r0[2] = {0, 0}, gq[2] = {3, 4}, gr[2] = {1, 1};
  pd_tensor *q = make_param("q", q0, 2, PD_FLOAT64), *r = make_param("r", r0, 2, PD_FLOAT64);
  pd_tensor *qr[2] = {q, r};
  opt = pd_optimizer_sgd(1.0, qr, 2, &on);
  set_grad(q, gq, PD_FLOAT64);
  set_grad(r, gr, PD_FLOAT64);
  assert_int_equal(pd_optimizer_step(opt), PD_OK);
  EXPECT_VALUES(q, 1e-14, -1.5, -2.0); /* |g| = 5 > 2.5: halved */
  EXPECT_VALUES(r, 1e-14, -1, -1);     /* |g| = sqrt 2 < 2.5: kept */
  pd_optimizer_release(opt);

  /* by value: each element into [min, max] */
  pd_grad_clip cv = pd_nn_clip_grad_by_value(0.5, -0.25);
  pd_optimizer_sgd_opts ov = {.grad_clip = &cv};
  double s0[4] = {0, 0, 0, 0}, gs[4] = {1, -1, 0.1, -0.1};
  pd_tensor *s = make_param("s", s0, 4, PD_FLOAT64);
  opt = pd_optimizer_sgd(1.0, &s, 1, &ov);
  set_grad(s, gs, PD_FLOAT64);
  assert_int_equal(pd_optimizer_step(opt), PD_OK);
  EXPECT_VALUES(s, 1e-14, -0.5, 0.25, -0.1, 0.1);
  pd_optimizer_release(opt);
  pd_named_tensors_free(&ps);
  pd_layer_release(lin);
  pd_scope_end();
  expect_no_live_tensors();
}

/* ---- parameter attributes, groups, skipping ------------------------------------------------- */
static void test_param_attr_lr_regularizer_trainable(void **state) {
  (void)state;
  pd_scope_begin();
  /* weight: lr multiplier 0.5 and its own L1 regularizer (overrides the
   * optimizer's L2); bias: the optimizer's L2 */
  pd_param_attr wa = {.learning_rate = 0.5, .l1_decay = 0.25};
  pd_nn_linear_opts lo = {.weight_attr = &wa};
  pd_layer *lin = pd_nn_linear(1, 2, &lo);
  pd_named_tensors ps;
  assert_int_equal(pd_layer_parameters(lin, &ps), PD_OK);
  pd_tensor *w = ps.tensors[0], *b = ps.tensors[1];
  double w0[2] = {pd_tensor_item_at(w, 0), pd_tensor_item_at(w, 1)};
  double g[2] = {1.0, -2.0};
  pd_optimizer_sgd_opts o = {.weight_decay = pd_regularizer_l2_decay(0.5)};
  pd_optimizer *opt = pd_optimizer_sgd(0.1, ps.tensors, ps.n, &o);
  set_grad(w, g, PD_FLOAT32);
  set_grad(b, g, PD_FLOAT32);
  assert_int_equal(pd_optimizer_step(opt), PD_OK);
  for (int i = 0; i < 2; i++) {
    double sg = w0[i] > 0 ? 1 : w0[i] < 0 ? -1 : 0;
    assert_true(fabs(pd_tensor_item_at(w, i) - (w0[i] - 0.05 * (g[i] + 0.25 * sg))) < 1e-6);
    assert_true(fabs(pd_tensor_item_at(b, i) - (0 - 0.1 * (g[i] + 0.5 * 0))) < 1e-6);
  }
  pd_optimizer_release(opt);
  pd_named_tensors_free(&ps);
  pd_layer_release(lin);

  /* not trainable, and no grad: both skipped (no accumulators either) */
  pd_param_attr frozen = {.not_trainable = true};
  pd_nn_linear_opts fo = {.weight_attr = &frozen};
  lin = pd_nn_linear(2, 1, &fo);
  assert_int_equal(pd_layer_parameters(lin, &ps), PD_OK);
  w = ps.tensors[0];
  b = ps.tensors[1];
  double wv = pd_tensor_item_at(w, 0), g2[2] = {1, 1};
  set_grad(w, g2, PD_FLOAT32);
  opt = pd_optimizer_adam(0.1, ps.tensors, ps.n, NULL);
  assert_int_equal(pd_optimizer_step(opt), PD_OK);
  assert_true(pd_tensor_item_at(w, 0) == wv);
  assert_true(pd_tensor_item_at(b, 0) == 0);
  pd_named_tensors sd;
  assert_int_equal(pd_optimizer_state_dict(opt, &sd), PD_OK);
  assert_int_equal(sd.n, 0);
  pd_named_tensors_free(&sd);
  pd_optimizer_release(opt);
  pd_named_tensors_free(&ps);
  pd_layer_release(lin);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_param_groups(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *a = make_param("a", P0, N, PD_FLOAT64), *b = make_param("b", P0, N, PD_FLOAT64);
  pd_optimizer_momentum_opts gb = pd_optimizer_momentum_defaults();
  gb.momentum = 0.5;
  gb.weight_decay = pd_regularizer_l2_decay(0.125);
  pd_optimizer_group groups[2] = {{.params = &a, .n_params = 1},
                                  {.params = &b, .n_params = 1, .learning_rate = 0.5, .opts = &gb}};
  pd_optimizer_momentum_opts o = pd_optimizer_momentum_defaults();
  o.groups = groups;
  o.n_groups = 2;
  pd_optimizer *opt = pd_optimizer_momentum(0.1, NULL, 0, &o);
  assert_non_null(opt);
  double ra[N], rb[N], va[N] = {0}, vb[N] = {0};
  memcpy(ra, P0, sizeof ra);
  memcpy(rb, P0, sizeof rb);
  for (int t = 0; t < 3; t++) {
    set_grad(a, G[t], PD_FLOAT64);
    set_grad(b, G[t], PD_FLOAT64);
    assert_int_equal(pd_optimizer_step(opt), PD_OK);
    for (int i = 0; i < N; i++) {
      va[i] = 0.9 * va[i] + G[t][i];
      ra[i] -= 0.1 * va[i];
      vb[i] = 0.5 * vb[i] + G[t][i] + 0.125 * rb[i];
      rb[i] -= 0.05 * vb[i];
    }
    expect_param(a, ra, 1e-13);
    expect_param(b, rb, 1e-13);
  }
  pd_optimizer_release(opt);
  /* a parameter in two groups is an error */
  pd_optimizer_group twice[2] = {{.params = &a, .n_params = 1}, {.params = &a, .n_params = 1}};
  pd_optimizer_sgd_opts so = {.groups = twice, .n_groups = 2};
  assert_null(pd_optimizer_sgd(0.1, NULL, 0, &so));
  expect_error(NULL, "SGD", "more than one group");
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_clear_grad_and_lr(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *p = make_param("w", P0, N, PD_FLOAT64);
  pd_lr_scheduler *s = pd_optimizer_lr_step_decay(0.5, 1, 0.5);
  pd_optimizer_sgd_opts o = {.lr_scheduler = s};
  pd_optimizer *opt = pd_optimizer_sgd(0.0, &p, 1, &o);
  pd_lr_release(s); /* the optimizer holds it */
  assert_true(pd_optimizer_get_lr(opt) == 0.5);
  set_grad(p, G[0], PD_FLOAT64);
  assert_int_equal(pd_optimizer_step(opt), PD_OK);
  pd_lr_step(pd_optimizer_lr_scheduler(opt));
  assert_true(pd_optimizer_get_lr(opt) == 0.25);
  assert_int_equal(pd_optimizer_step(opt), PD_OK);
  double want[N];
  for (int i = 0; i < N; i++) want[i] = P0[i] - 0.75 * G[0][i];
  expect_param(p, want, 1e-14);
  /* set_lr conflicts with a scheduler */
  assert_true(pd_optimizer_set_lr(opt, 0.1) < 0);
  expect_error(NULL, "SGD", "LRScheduler");
  /* clear_grad: zeros by default, dropped with set_to_zero=false */
  pd_optimizer_clear_grad(opt, true);
  assert_non_null(pd_tensor_grad(p));
  EXPECT_VALUES(pd_tensor_grad(p), 0, 0, 0, 0, 0);
  pd_optimizer_clear_grad(opt, false);
  assert_null(pd_tensor_grad(p));
  pd_optimizer_release(opt);

  opt = pd_optimizer_sgd(0.1, &p, 1, NULL);
  assert_int_equal(pd_optimizer_set_lr(opt, 0.2), PD_OK);
  assert_true(pd_optimizer_get_lr(opt) == 0.2);
  assert_true(pd_optimizer_set_lr(opt, -1) < 0);
  expect_error(NULL, "set_lr", "-1");
  /* set_lr_scheduler: the rate follows the scheduler from now on */
  pd_lr_scheduler *e = pd_optimizer_lr_exponential_decay(0.4, 0.5);
  assert_int_equal(pd_optimizer_set_lr_scheduler(opt, e), PD_OK);
  pd_lr_release(e);
  assert_true(pd_optimizer_get_lr(opt) == 0.4);
  pd_lr_step_epoch(pd_optimizer_lr_scheduler(opt), 2);
  assert_true(pd_optimizer_get_lr(opt) == 0.1);
  pd_optimizer_release(opt);
  pd_scope_end();
  expect_no_live_tensors();
}

/* ---- state dicts ------------------------------------------------------------------------------ */
static void test_state_dict_round_trip(void **state) {
  (void)state;
  pd_scope_begin();
  pd_layer *lin = pd_nn_linear(3, 2, NULL);
  pd_layer *copy = pd_nn_linear(3, 2, NULL);
  pd_named_tensors ps, pc, lsd;
  assert_int_equal(pd_layer_parameters(lin, &ps), PD_OK);
  assert_int_equal(pd_layer_parameters(copy, &pc), PD_OK);
  assert_int_equal(pd_layer_state_dict(lin, &lsd), PD_OK);
  pd_layer_set_state_dict(copy, &lsd, NULL, NULL);
  pd_named_tensors_free(&lsd);
  /* copy's parameters have other names (linear_1...), so rename them to
   * match the saved entries: a state dict travels between runs by name */
  for (int i = 0; i < 2; i++) pd_tensor_set_name(pc.tensors[i], pd_tensor_name(ps.tensors[i]));

  pd_lr_scheduler *sa = pd_optimizer_lr_step_decay(0.01, 2, 0.5);
  pd_optimizer_adam_opts oa = pd_optimizer_adam_defaults();
  oa.lr_scheduler = sa;
  pd_optimizer *A = pd_optimizer_adam(0.0, ps.tensors, ps.n, &oa);
  double gw[6] = {0.1, -0.2, 0.3, 0.4, -0.5, 0.6}, gb[2] = {1, -1};
  for (int t = 0; t < 3; t++) {
    set_grad(ps.tensors[0], gw, PD_FLOAT32);
    set_grad(ps.tensors[1], gb, PD_FLOAT32);
    assert_int_equal(pd_optimizer_step(A), PD_OK);
    pd_lr_step(sa);
  }
  pd_named_tensors sd;
  assert_int_equal(pd_optimizer_state_dict(A, &sd), PD_OK);
  char want[128];
  snprintf(want, sizeof want, "%s_moment1_0", pd_tensor_name(ps.tensors[0]));
  assert_string_equal(sd.names[0], want);
  assert_non_null(strstr(sd.names[0], "linear_"));
  assert_non_null(strstr(sd.names[0], ".w_0_moment1_0"));
  assert_int_equal(sd.n, 8 + 2);
  assert_string_equal(sd.names[8], "LR_Scheduler.last_epoch");
  assert_string_equal(sd.names[9], "LR_Scheduler.last_lr");
  assert_true(pd_tensor_item(sd.tensors[8]) == 3);
  assert_true(pd_tensor_item(sd.tensors[9]) == 0.005);

  /* B restores from the state and continues identically */
  pd_lr_scheduler *sb = pd_optimizer_lr_step_decay(0.01, 2, 0.5);
  pd_optimizer_adam_opts ob = pd_optimizer_adam_defaults();
  ob.lr_scheduler = sb;
  pd_optimizer *B = pd_optimizer_adam(0.0, pc.tensors, pc.n, &ob);
  /* copy the parameters too */
  for (int i = 0; i < 2; i++)
    pd_tensor_copy_to(ps.tensors[i], pd_tensor_data(pc.tensors[i]), pd_tensor_numel(pc.tensors[i]),
                      PD_FLOAT32);
  assert_int_equal(pd_optimizer_set_state_dict(B, &sd), PD_OK);
  pd_named_tensors_free(&sd);
  assert_true(pd_lr_get(sb) == pd_lr_get(sa));
  assert_int_equal(pd_lr_last_epoch(sb), 3);
  for (int t = 0; t < 2; t++) {
    set_grad(ps.tensors[0], gw, PD_FLOAT32);
    set_grad(ps.tensors[1], gb, PD_FLOAT32);
    set_grad(pc.tensors[0], gw, PD_FLOAT32);
    set_grad(pc.tensors[1], gb, PD_FLOAT32);
    assert_int_equal(pd_optimizer_step(A), PD_OK);
    assert_int_equal(pd_optimizer_step(B), PD_OK);
    pd_lr_step(sa);
    pd_lr_step(sb);
  }
  for (int i = 0; i < 2; i++)
    for (int64_t k = 0; k < pd_tensor_numel(ps.tensors[i]); k++)
      assert_true(pd_tensor_item_at(ps.tensors[i], k) == pd_tensor_item_at(pc.tensors[i], k));

  /* a state dict lacking an accumulator, or with a wrong shape, is refused */
  pd_named_tensors bad;
  assert_int_equal(pd_optimizer_state_dict(A, &bad), PD_OK);
  free(bad.names[0]);
  bad.names[0] = strdup("nothing");
  assert_true(pd_optimizer_set_state_dict(B, &bad) < 0);
  expect_error(NULL, "Adam", "moment1_0 not found");
  pd_named_tensors_free(&bad);
  assert_int_equal(pd_optimizer_state_dict(A, &bad), PD_OK);
  bad.tensors[0] = pd_zeros(1, SHAPE(5), PD_FLOAT32);
  assert_true(pd_optimizer_set_state_dict(B, &bad) < 0);
  expect_error(NULL, "[5]", "[3, 2]");
  pd_named_tensors_free(&bad);

  pd_lr_release(sa);
  pd_lr_release(sb);
  pd_optimizer_release(A);
  pd_optimizer_release(B);
  pd_named_tensors_free(&ps);
  pd_named_tensors_free(&pc);
  pd_layer_release(lin);
  pd_layer_release(copy);
  pd_scope_end();
  expect_no_live_tensors();
}

/* ---- bad inputs -------------------------------------------------------------------------------- */
static void test_bad_inputs(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *p = make_param("w", P0, N, PD_FLOAT64);
  assert_null(pd_optimizer_sgd(-0.1, &p, 1, NULL));
  expect_error(NULL, "SGD", "-0.1");
  assert_null(pd_optimizer_adam(0.1, NULL, 0, NULL));
  expect_error(NULL, "Adam", "parameters is NULL");
  pd_tensor *nul = NULL;
  assert_null(pd_optimizer_adam(0.1, &nul, 1, NULL));
  expect_error(NULL, "Adam", "parameter 0 is NULL");
  pd_optimizer_adam_opts o = pd_optimizer_adam_defaults();
  o.beta1 = 1.0;
  assert_null(pd_optimizer_adam(0.1, &p, 1, &o));
  expect_error(NULL, "beta1", "[0, 1), got 1");
  o = pd_optimizer_adam_defaults();
  o.beta2 = -0.5;
  assert_null(pd_optimizer_adam(0.1, &p, 1, &o));
  expect_error(NULL, "beta2", "-0.5");
  o = pd_optimizer_adam_defaults();
  o.epsilon = -1e-3;
  assert_null(pd_optimizer_adam(0.1, &p, 1, &o));
  expect_error(NULL, "epsilon", "-0.001");
  pd_optimizer_lamb_opts lo = pd_optimizer_lamb_defaults();
  lo.beta1 = 1.5;
  assert_null(pd_optimizer_lamb(0.1, &p, 1, &lo));
  expect_error(NULL, "Lamb", "beta1");
  pd_grad_clip c = pd_nn_clip_grad_by_global_norm(0);
  pd_optimizer_sgd_opts so = {.grad_clip = &c};
  assert_null(pd_optimizer_sgd(0.1, &p, 1, &so));
  expect_error(NULL, "ClipGradByGlobalNorm", "clip_norm > 0");
  c = pd_nn_clip_grad_by_value(-1, 1); /* max, min swapped */
  assert_null(pd_optimizer_sgd(0.1, &p, 1, &so));
  expect_error(NULL, "min 1", "max -1");
  pd_tensor *ip = pd_zeros(1, SHAPE(2), PD_INT64);
  assert_null(pd_optimizer_sgd(0.1, &ip, 1, NULL));
  expect_error(NULL, "SGD", "int64");
  pd_optimizer_group gr = {.params = &p, .n_params = 1};
  so = (pd_optimizer_sgd_opts){.groups = &gr, .n_groups = 1};
  assert_null(pd_optimizer_sgd(0.1, &p, 1, &so));
  expect_error(NULL, "SGD", "not both");
  assert_true(pd_optimizer_step(NULL) < 0);
  expect_error(NULL, "optimizer", "NULL");

  /* a gradient that does not match its parameter: set_grad refuses it; one
   * reshaped in place afterwards takes the checked path of the update op */
  pd_optimizer *bad = pd_optimizer_adam(0.1, &p, 1, NULL);
  assert_true(pd_tensor_set_grad(p, pd_zeros(1, SHAPE(3), PD_FLOAT64)) < 0);
  expect_error(NULL, "set_grad", "float64 of shape [3] but the tensor is float64 of shape [4]");
  assert_true(pd_tensor_set_grad(p, pd_zeros(1, SHAPE(4), PD_FLOAT32)) < 0);
  expect_error(NULL, "set_grad", "float32 of shape [4] but the tensor is float64 of shape [4]");
  assert_int_equal(pd_tensor_set_grad(p, pd_zeros(1, SHAPE(4), PD_FLOAT64)), PD_OK);
  assert_non_null(pd_reshape_(pd_tensor_grad(p), 2, SHAPE(2, 2)));
  assert_true(pd_optimizer_step(bad) < 0);
  expect_error(NULL, "adam_", "grad shape [2, 2] does not match param shape [4]");
  assert_int_equal(pd_tensor_set_grad(p, NULL), PD_OK);
  pd_optimizer_release(bad);
  /* the update op itself checks its inputs */
  pd_tensor *g = pd_zeros(1, SHAPE(3), PD_FLOAT64), *lr = pd_full(1, SHAPE(1), 0.1, PD_FLOAT64);
  pd_tensor *in[3] = {p, g, lr}, *out[4];
  int nout;
  assert_true(pd_dispatch(PD_OP_sgd_, in, 3, NULL, out, &nout) < 0);
  expect_error(NULL, "sgd_", "grad shape [3] does not match param shape [4]");
  in[1] = pd_zeros(1, SHAPE(4), PD_FLOAT64);
  assert_true(pd_dispatch(PD_OP_adam_, in, 3, NULL, out, &nout) < 0);
  expect_error(NULL, "adam_", "expects 7 inputs");
  pd_attrs a = {0};
  strcpy(a.s, "clip=1");
  assert_true(pd_dispatch(PD_OP_sgd_, in, 3, &a, out, &nout) < 0);
  expect_error(NULL, "sgd_", "clip=1");
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_squared_l2_norm_op(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = T(PD_FLOAT32, 2, SHAPE(2, 3), 1, 2, 3, 4, 5, 6);
  pd_tensor *xt = pd_transpose(x, 2, (const int64_t[]){1, 0}); /* non-contiguous */
  pd_tensor *s = pd_dispatch1(PD_OP_squared_l2_norm, &xt, 1, NULL);
  assert_int_equal(pd_tensor_ndim(s), 0);
  assert_int_equal(pd_tensor_dtype(s), PD_FLOAT32);
  assert_true(pd_tensor_item(s) == 91);
  pd_tensor *i = pd_zeros(1, SHAPE(2), PD_INT32);
  assert_null(pd_dispatch1(PD_OP_squared_l2_norm, &i, 1, NULL));
  expect_error(NULL, "squared_l2_norm", "int32");
  pd_scope_end();
  expect_no_live_tensors();
}

/* ---- training --------------------------------------------------------------------------------- */
static void test_adam_fits_linear_regression(void **state) {
  (void)state;
  pd_seed(3);
  pd_layer *lin = pd_nn_linear(1, 1, NULL);
  pd_named_tensors ps;
  assert_int_equal(pd_layer_parameters(lin, &ps), PD_OK);
  pd_optimizer *opt = pd_optimizer_adam(0.1, ps.tensors, ps.n, NULL);
  pd_tensor *w = ps.tensors[0], *b = ps.tensors[1];
  double xs[32], ys[32];
  for (int i = 0; i < 32; i++) {
    xs[i] = -1 + 2.0 * i / 31;
    ys[i] = 3 * xs[i] + 2;
  }
  int steps = 0;
  for (; steps < 300; steps++) {
    if (fabs(pd_tensor_item_at(w, 0) - 3) < 1e-3 && fabs(pd_tensor_item_at(b, 0) - 2) < 1e-3) break;
    pd_scope_begin();
    pd_tensor *x = pd_tensor_from_f64(xs, PD_FLOAT32, 2, SHAPE(32, 1));
    pd_tensor *y = pd_tensor_from_f64(ys, PD_FLOAT32, 2, SHAPE(32, 1));
    pd_tensor *d = pd_subtract(pd_layer_call1(lin, x), y);
    pd_tensor *loss = pd_scale(pd_sum(pd_multiply(d, d), NULL, 0, false), 1.0 / 32, 0, true);
    assert_int_equal(pd_optimizer_minimize(opt, loss), PD_OK);
    pd_optimizer_clear_grad(opt, true);
    pd_scope_end();
  }
  printf("adam fit y = 3x + 2 in %d steps: w %.6f b %.6f\n", steps, pd_tensor_item_at(w, 0),
         pd_tensor_item_at(b, 0));
  assert_true(steps < 300);
  pd_optimizer_release(opt);
  pd_named_tensors_free(&ps);
  pd_layer_release(lin);
  expect_no_live_tensors();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sgd_with_l2),
      cmocka_unit_test(test_momentum_and_nesterov),
      cmocka_unit_test(test_options_mean_what_they_say),
      cmocka_unit_test(test_adam_trajectory_and_bias_correction),
      cmocka_unit_test(test_adamw_decay_callback),
      cmocka_unit_test(test_adamax),
      cmocka_unit_test(test_adagrad),
      cmocka_unit_test(test_adadelta),
      cmocka_unit_test(test_rmsprop),
      cmocka_unit_test(test_lamb),
      cmocka_unit_test(test_multi_precision_float16),
      cmocka_unit_test(test_large_tensor_blocks),
      cmocka_unit_test(test_steady_state_allocates_nothing),
      cmocka_unit_test(test_clip_by_global_norm),
      cmocka_unit_test(test_clip_need_clip_and_kinds),
      cmocka_unit_test(test_param_attr_lr_regularizer_trainable),
      cmocka_unit_test(test_param_groups),
      cmocka_unit_test(test_clear_grad_and_lr),
      cmocka_unit_test(test_state_dict_round_trip),
      cmocka_unit_test(test_bad_inputs),
      cmocka_unit_test(test_squared_l2_norm_op),
      cmocka_unit_test(test_adam_fits_linear_regression),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
