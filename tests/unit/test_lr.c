/* LR schedulers: the first epochs of each against sequences written out
 * from Paddle's formulas (literals, or the closed forms evaluated here),
 * epoch 0 at construction, step(epoch), ReduceOnPlateau, state through an
 * optimizer, bad arguments. */
#include <math.h>
#include <string.h>

#include "test_util.h"

/* Checks the scheduler's values for epochs 0..n-1, stepping in between,
 * then releases it. */
static void expect_seq(pd_lr_scheduler *s, const double *want, int n, double tol) {
  if (!s) fail_msg("scheduler is NULL: %s", pd_last_error());
  for (int e = 0; e < n; e++) {
    if (e) assert_int_equal(pd_lr_step(s), PD_OK);
    assert_int_equal(pd_lr_last_epoch(s), e);
    double v = pd_lr_get(s);
    if (!(fabs(v - want[e]) <= tol * (1 + fabs(want[e]))))
      fail_msg("%s epoch %d: got %.15g, want %.15g", pd_lr_name(s), e, v, want[e]);
  }
  pd_lr_release(s);
}
#define SEQ(s, tol, ...)                         \
  expect_seq((s), (const double[]){__VA_ARGS__}, \
             (int)(sizeof((const double[]){__VA_ARGS__}) / sizeof(double)), (tol))

static void test_step_and_multistep(void **state) {
  (void)state;
  SEQ(pd_optimizer_lr_step_decay(0.5, 3, 0.1), 1e-15, 0.5, 0.5, 0.5, 0.05, 0.05, 0.05, 0.005, 0.005, 0.005,
      0.0005);
  SEQ(pd_optimizer_lr_multi_step_decay(0.5, (const int64_t[]){2, 4, 6}, 3, 0.8), 1e-15, 0.5, 0.5, 0.4, 0.4,
      0.32, 0.32, 0.256, 0.256, 0.256, 0.256);
}

static void test_exponential_family(void **state) {
  (void)state;
  double e[10], ne[10], it[10];
  for (int k = 0; k < 10; k++) {
    e[k] = 0.5 * pow(0.9, k);
    ne[k] = 0.5 * exp(-0.1 * k);
    it[k] = 0.5 / (1 + 0.1 * k);
  }
  expect_seq(pd_optimizer_lr_exponential_decay(0.5, 0.9), e, 10, 1e-14);
  expect_seq(pd_optimizer_lr_natural_exp_decay(0.5, 0.1), ne, 10, 1e-14);
  expect_seq(pd_optimizer_lr_inverse_time_decay(0.5, 0.1), it, 10, 1e-14);
  SEQ(pd_optimizer_lr_exponential_decay(1.0, 0.5), 1e-15, 1, 0.5, 0.25, 0.125, 0.0625);
}

static void test_cosine_annealing(void **state) {
  (void)state;
  /* Paddle steps it recursively; the values agree with the closed form
   * eta + (lr - eta)(1 + cos(pi e / T)) / 2, across the (2k+1)T boundary too */
  double want[25];
  for (int e = 0; e < 25; e++) want[e] = 0.1 + (0.5 - 0.1) * (1 + cos(M_PI * e / 10)) / 2;
  expect_seq(pd_optimizer_lr_cosine_annealing_decay(0.5, 10, 0.1), want, 25, 1e-12);
  SEQ(pd_optimizer_lr_cosine_annealing_decay(1.0, 2, 0.0), 1e-15, 1.0, 0.5, 0.0, 0.5, 1.0);
  /* step(epoch) takes the closed form */
  pd_lr_scheduler *s = pd_optimizer_lr_cosine_annealing_decay(0.5, 10, 0.1);
  assert_int_equal(pd_lr_step_epoch(s, 5), PD_OK);
  assert_true(fabs(pd_lr_get(s) - 0.3) < 1e-15);
  pd_lr_release(s);
}

static void test_linear_warmup(void **state) {
  (void)state;
  /* after a float */
  SEQ(pd_optimizer_lr_linear_warmup(NULL, 0.5, 4, 0.0, 0.5), 1e-15, 0, 0.125, 0.25, 0.375, 0.5, 0.5, 0.5);
  /* after a scheduler, which restarts at epoch e - warmup_steps */
  pd_lr_scheduler *inner = pd_optimizer_lr_step_decay(0.5, 2, 0.5);
  pd_lr_scheduler *s = pd_optimizer_lr_linear_warmup(inner, 0, 3, 0.1, 0.5);
  pd_lr_release(inner); /* the warm-up holds it */
  SEQ(s, 1e-15, 0.1, 0.1 + 0.4 / 3, 0.1 + 0.8 / 3, 0.5, 0.5, 0.25, 0.25, 0.125, 0.125, 0.0625);
}

static void test_noam_and_polynomial(void **state) {
  (void)state;
  double noam[10];
  for (int e = 0; e < 10; e++) {
    double a = e == 0 ? 1 : pow(e, -0.5), b = pow(4, -1.5) * e;
    noam[e] = 2.0 * pow(512, -0.5) * (a < b ? a : b);
  }
  assert_true(noam[0] == 0 && fabs(noam[4] - 2.0 / sqrt(512) * 0.5) < 1e-15);
  expect_seq(pd_optimizer_lr_noam_decay(512, 4, 2.0), noam, 10, 1e-14);

  SEQ(pd_optimizer_lr_polynomial_decay(0.5, 5, 0.1, 2.0, false), 1e-14, 0.5, 0.1 + 0.4 * 0.64,
      0.1 + 0.4 * 0.36, 0.1 + 0.4 * 0.16, 0.1 + 0.4 * 0.04, 0.1, 0.1, 0.1);
  /* cycle: decay_steps grows to the next multiple */
  SEQ(pd_optimizer_lr_polynomial_decay(0.5, 5, 0.1, 1.0, true), 1e-14, 0.5, 0.42, 0.34, 0.26, 0.18, 0.1,
      0.1 + 0.4 * 0.4, 0.1 + 0.4 * 0.3, 0.1 + 0.4 * 0.2, 0.1 + 0.4 * 0.1, 0.1, 0.1 + 0.4 * (1 - 11.0 / 15));
}

static void test_piecewise(void **state) {
  (void)state;
  SEQ(pd_optimizer_lr_piecewise_decay((const int64_t[]){3, 6, 9}, 3, (const double[]){0.1, 0.2, 0.3, 0.4}, 4),
      0, 0.1, 0.1, 0.1, 0.2, 0.2, 0.2, 0.3, 0.3, 0.3, 0.4, 0.4);
  /* a NULL callback is refused */
  assert_null(pd_optimizer_lr_lambda_decay(0.5, NULL, NULL));
  expect_error(NULL, "LambdaDecay", "lr_lambda");
}

static double pow95(int64_t e, void *user) {
  (void)user;
  return pow(0.95, (double)e);
}
static double const95(int64_t e, void *user) {
  (void)e;
  return *(double *)user;
}

static void test_callbacks_and_linear_lr(void **state) {
  (void)state;
  double lam[10], lin[10];
  for (int e = 0; e < 10; e++) {
    lam[e] = 0.5 * pow(0.95, e);
    lin[e] = 0.5 * (1.0 / 3 + (2.0 / 3) * (e < 4 ? e : 4) / 4);
  }
  expect_seq(pd_optimizer_lr_lambda_decay(0.5, pow95, NULL), lam, 10, 1e-14);
  double f = 0.95;
  SEQ(pd_optimizer_lr_multiplicative_decay(0.5, const95, &f), 1e-14, 0.5, 0.475, 0.45125, 0.4286875);
  expect_seq(pd_optimizer_lr_linear_lr(0.5, 4, 0, 0), lin, 10, 1e-14);
}

static void test_one_cycle(void **state) {
  (void)state;
  /* max 1.0 over 10 steps: initial 0.04, up over [0, 2], down to 1e-4 over [2, 9] */
  double want[11];
  for (int e = 0; e <= 10; e++) {
    double lo, hi, pct;
    if (e <= 2) {
      lo = 0.04, hi = 1.0, pct = e / 2.0;
    } else {
      lo = 1.0, hi = 1e-4, pct = (e - 2) / 7.0;
    }
    want[e] = hi + (lo - hi) / 2 * (cos(M_PI * pct) + 1);
  }
  assert_true(fabs(want[1] - 0.52) < 1e-15 && fabs(want[9] - 1e-4) < 1e-15);
  pd_lr_scheduler *s = pd_optimizer_lr_one_cycle_lr(1.0, 10, NULL);
  expect_seq(pd_lr_retain(s), want, 11, 1e-14);
  /* past total_steps is an error, and the epoch stays */
  assert_true(pd_lr_step(s) < 0);
  expect_error(NULL, "OneCycleLR", "total_steps is 10");
  assert_int_equal(pd_lr_last_epoch(s), 10);
  pd_lr_release(s);

  /* linear, three phases: 0.04 -> 1.0 over [0, 2], -> 0.04 over [2, 4], -> 1e-4 over [4, 9] */
  pd_optimizer_lr_one_cycle_lr_opts o = pd_optimizer_lr_one_cycle_lr_defaults();
  o.linear = true;
  o.three_phase = true;
  o.phase_pct = 0.3;
  SEQ(pd_optimizer_lr_one_cycle_lr(1.0, 10, &o), 1e-14, 0.04, 0.52, 1.0, 0.52, 0.04, 0.04 - 0.0399 * 0.2,
      0.04 - 0.0399 * 0.4, 0.04 - 0.0399 * 0.6, 0.04 - 0.0399 * 0.8, 1e-4);
}

static void test_reduce_on_plateau(void **state) {
  (void)state;
  pd_optimizer_lr_reduce_on_plateau_opts o = pd_optimizer_lr_reduce_on_plateau_defaults();
  o.factor = 0.5;
  o.patience = 2;
  pd_lr_scheduler *s = pd_optimizer_lr_reduce_on_plateau(1.0, &o);
  assert_int_equal(pd_lr_last_epoch(s), 0);
  const double metric[10] = {10, 9, 9, 9, 9, 8, 8, 8, 8, 8};
  const double want[10] = {1, 1, 1, 1, 0.5, 0.5, 0.5, 0.5, 0.25, 0.25};
  for (int i = 0; i < 10; i++) {
    assert_int_equal(pd_lr_step_metric(s, metric[i]), PD_OK);
    assert_true(pd_lr_get(s) == want[i]);
  }
  assert_int_equal(pd_lr_last_epoch(s), 10);
  /* step without a metric is refused */
  assert_true(pd_lr_step(s) < 0);
  expect_error(NULL, "ReduceOnPlateau", "metric");
  pd_lr_release(s);

  /* max mode, abs threshold, cooldown 1, min_lr */
  pd_optimizer_lr_reduce_on_plateau_opts m = pd_optimizer_lr_reduce_on_plateau_defaults();
  m.mode_max = true;
  m.threshold_mode_abs = true;
  m.threshold = 0.5;
  m.patience = 0;
  m.cooldown = 1;
  m.min_lr = 0.3;
  s = pd_optimizer_lr_reduce_on_plateau(1.0, &m);
  const double mm[6] = {1, 1.2, 2, 2, 2, 2};
  /* 1: best; 1.2: not > 1.5, bad 1 > 0 -> 0.1 (clamped 0.3), cooldown 1;
   * 2: cooling; 2: > 1+0.5 best; 2: bad -> 0.3 stays (no change > eps); 2: cooling */
  const double mw[6] = {1, 0.3, 0.3, 0.3, 0.3, 0.3};
  for (int i = 0; i < 6; i++) {
    assert_int_equal(pd_lr_step_metric(s, mm[i]), PD_OK);
    assert_true(fabs(pd_lr_get(s) - mw[i]) < 1e-15);
  }
  pd_lr_release(s);
  s = pd_optimizer_lr_step_decay(0.1, 1, 0.5);
  assert_true(pd_lr_step_metric(s, 1.0) < 0);
  expect_error(NULL, "StepDecay", "metric");
  pd_lr_release(s);
}

static void test_scheduler_state_in_optimizer(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *p = T(PD_FLOAT64, 1, SHAPE(2), 1, 2);
  pd_tensor_set_stop_gradient(p, false);
  pd_optimizer_lr_reduce_on_plateau_opts o = pd_optimizer_lr_reduce_on_plateau_defaults();
  o.factor = 0.5;
  o.patience = 1;
  pd_lr_scheduler *s = pd_optimizer_lr_reduce_on_plateau(1.0, &o);
  pd_optimizer_sgd_opts so = {.lr_scheduler = s};
  pd_optimizer *opt = pd_optimizer_sgd(0, &p, 1, &so);
  pd_lr_step_metric(s, 3);
  pd_lr_step_metric(s, 3);
  pd_named_tensors sd;
  assert_int_equal(pd_optimizer_state_dict(opt, &sd), PD_OK);
  assert_int_equal(sd.n, 5);
  assert_string_equal(sd.names[0], "LR_Scheduler.cooldown_counter");
  assert_string_equal(sd.names[1], "LR_Scheduler.best");
  assert_true(pd_tensor_item(sd.tensors[1]) == 3);
  assert_string_equal(sd.names[2], "LR_Scheduler.num_bad_epochs");
  assert_true(pd_tensor_item(sd.tensors[2]) == 1);
  assert_int_equal(pd_tensor_dtype(sd.tensors[3]), PD_INT64);
  /* a fresh scheduler picks the state up and reduces on the next bad epoch */
  pd_lr_scheduler *s2 = pd_optimizer_lr_reduce_on_plateau(1.0, &o);
  pd_optimizer_sgd_opts so2 = {.lr_scheduler = s2};
  pd_optimizer *opt2 = pd_optimizer_sgd(0, &p, 1, &so2);
  assert_int_equal(pd_optimizer_set_state_dict(opt2, &sd), PD_OK);
  pd_named_tensors_free(&sd);
  pd_lr_step_metric(s2, 3);
  assert_true(pd_lr_get(s2) == 0.5);
  assert_int_equal(pd_lr_last_epoch(s2), 3);
  /* a missing scheduler entry is an error */
  pd_named_tensors empty = {0};
  assert_true(pd_optimizer_set_state_dict(opt2, &empty) < 0);
  expect_error(NULL, "SGD", "LR_Scheduler.cooldown_counter");

  /* LinearWarmup nests its scheduler's state */
  pd_lr_scheduler *in = pd_optimizer_lr_step_decay(0.5, 2, 0.5);
  pd_lr_scheduler *w = pd_optimizer_lr_linear_warmup(in, 0, 2, 0.0, 0.5);
  pd_optimizer_sgd_opts wo = {.lr_scheduler = w};
  pd_optimizer *opt3 = pd_optimizer_sgd(0, &p, 1, &wo);
  for (int i = 0; i < 5; i++) pd_lr_step(w);
  assert_int_equal(pd_optimizer_state_dict(opt3, &sd), PD_OK);
  assert_int_equal(sd.n, 4);
  assert_string_equal(sd.names[2], "LR_Scheduler.LinearWarmup_LR.last_epoch");
  assert_true(pd_tensor_item(sd.tensors[2]) == 3);
  pd_named_tensors_free(&sd);

  pd_lr_release(s);
  pd_lr_release(s2);
  pd_lr_release(in);
  pd_lr_release(w);
  pd_optimizer_release(opt);
  pd_optimizer_release(opt2);
  pd_optimizer_release(opt3);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_bad_arguments(void **state) {
  (void)state;
  assert_null(pd_optimizer_lr_step_decay(0.1, 0, 0.1));
  expect_error(NULL, "StepDecay", "step_size");
  assert_null(pd_optimizer_lr_step_decay(0.1, 2, 1.0));
  expect_error(NULL, "StepDecay", "gamma should be < 1.0, got 1");
  assert_null(pd_optimizer_lr_step_decay(-0.1, 2, 0.5));
  expect_error(NULL, "StepDecay", "-0.1");
  assert_null(pd_optimizer_lr_multi_step_decay(0.1, (const int64_t[]){3, 2}, 2, 0.1));
  expect_error(NULL, "MultiStepDecay", "increasing");
  assert_null(pd_optimizer_lr_exponential_decay(0.1, 1.5));
  expect_error(NULL, "ExponentialDecay", "1.5");
  assert_null(pd_optimizer_lr_piecewise_decay((const int64_t[]){3}, 1, (const double[]){0.1}, 1));
  expect_error(NULL, "PiecewiseDecay", "1 values for 1 boundaries");
  assert_null(pd_optimizer_lr_linear_warmup(NULL, 0.5, 3, 0.5, 0.1));
  expect_error(NULL, "LinearWarmup", "end_lr 0.1 must be greater than start_lr 0.5");
  assert_null(pd_optimizer_lr_cosine_annealing_decay(0.1, 0, 0));
  expect_error(NULL, "CosineAnnealingDecay", "T_max");
  assert_null(pd_optimizer_lr_polynomial_decay(0.1, 10, 0, -1, false));
  expect_error(NULL, "PolynomialDecay", "power");
  pd_optimizer_lr_one_cycle_lr_opts o = pd_optimizer_lr_one_cycle_lr_defaults();
  o.three_phase = true;
  o.phase_pct = 0.5;
  assert_null(pd_optimizer_lr_one_cycle_lr(0.1, 10, &o));
  expect_error(NULL, "OneCycleLR", "0.5");
  pd_optimizer_lr_reduce_on_plateau_opts r = pd_optimizer_lr_reduce_on_plateau_defaults();
  r.factor = 1.0;
  assert_null(pd_optimizer_lr_reduce_on_plateau(0.1, &r));
  expect_error(NULL, "ReduceOnPlateau", "factor");
  assert_null(pd_optimizer_lr_noam_decay(0, 10, 1));
  expect_error(NULL, "NoamDecay", "d_model");
  assert_true(isnan(pd_lr_get(NULL)));
  expect_error(NULL, "scheduler", "NULL");
  pd_lr_scheduler *s = pd_optimizer_lr_step_decay(0.1, 2, 0.5);
  assert_true(pd_lr_step_epoch(s, -1) < 0);
  expect_error(NULL, "StepDecay", "-1");
  pd_lr_release(s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_step_and_multistep),      cmocka_unit_test(test_exponential_family),
      cmocka_unit_test(test_cosine_annealing),        cmocka_unit_test(test_linear_warmup),
      cmocka_unit_test(test_noam_and_polynomial),     cmocka_unit_test(test_piecewise),
      cmocka_unit_test(test_callbacks_and_linear_lr), cmocka_unit_test(test_one_cycle),
      cmocka_unit_test(test_reduce_on_plateau),       cmocka_unit_test(test_scheduler_state_in_optimizer),
      cmocka_unit_test(test_bad_arguments),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
