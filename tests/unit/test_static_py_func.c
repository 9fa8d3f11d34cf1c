/* py_func: user C callbacks as an op, recorded in a Program and run by the
 * Executor; its backward checked against finite differences. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "paddlec/static.h"
#include "test_util.h"

static int g_forward_calls;

/* (a, b) -> (a * b, sin a + b) */
static pd_status mix(void *user, pd_tensor *const *in, int n_in, pd_tensor **out, int n_out) {
  (void)user;
  assert_int_equal(n_in, 2);
  assert_int_equal(n_out, 2);
  g_forward_calls++;
  pd_tensor *s = pd_sin(in[0]);
  out[0] = pd_multiply(in[0], in[1]);
  out[1] = pd_add(s, in[1]);
  pd_tensor_release(s);
  return out[0] && out[1] ? PD_OK : pd_last_status();
}

/* in: a, b, p, q, dp, dq. da = dp b + dq cos a, db = dp a + dq. */
static pd_status mix_grad(void *user, pd_tensor *const *in, int n_in, pd_tensor **out, int n_out) {
  (void)user;
  assert_int_equal(n_in, 6);
  assert_int_equal(n_out, 2);
  pd_tensor *c = pd_cos(in[0]), *t1 = pd_multiply(in[4], in[1]), *t2 = pd_multiply(in[5], c);
  pd_tensor *t3 = pd_multiply(in[4], in[0]);
  out[0] = pd_add(t1, t2);
  out[1] = pd_add(t3, in[5]);
  pd_tensor *ts[] = {c, t1, t2, t3};
  for (int i = 0; i < 4; i++) pd_tensor_release(ts[i]);
  return PD_OK;
}

static pd_status wrong_shape(void *user, pd_tensor *const *in, int n_in, pd_tensor **out, int n_out) {
  (void)user, (void)in, (void)n_in, (void)n_out;
  out[0] = pd_zeros(1, (const int64_t[]){7}, PD_FLOAT64);
  return PD_OK;
}

typedef struct net {
  pd_program *main, *startup;
  pd_tensor *a, *b, *out[2], *loss, *grads[2];
} net;

/* loss = sum(p * w1) + sum(q^2), (p, q) = mix(a, b); gradients for a, b. */
static void build(net *n) {
  n->main = pd_static_program();
  n->startup = pd_static_program();
  assert_int_equal(pd_static_program_guard_begin(n->main, n->startup), PD_OK);
  n->a = pd_static_data("a", 2, SHAPE(-1, 3), PD_FLOAT64);
  n->b = pd_static_data("b", 2, SHAPE(-1, 3), PD_FLOAT64);
  pd_tensor_set_stop_gradient(n->a, false);
  pd_tensor_set_stop_gradient(n->b, false);
  pd_input_spec specs[2] = {{.ndim = 2, .shape = {-1, 3}, .dtype = PD_FLOAT64},
                            {.ndim = 2, .shape = {-1, 3}, .dtype = PD_FLOAT64}};
  pd_tensor *in[2] = {n->a, n->b};
  assert_int_equal(pd_static_py_func(mix, NULL, in, 2, specs, 2, n->out, mix_grad), PD_OK);
  pd_tensor *w = T(PD_FLOAT64, 1, SHAPE(3), 0.5, -1.0, 2.0);
  pd_tensor *pw = pd_multiply(n->out[0], w), *s1 = pd_sum(pw, NULL, 0, false);
  pd_tensor *q2 = pd_square(n->out[1]), *s2 = pd_sum(q2, NULL, 0, false);
  n->loss = pd_add(s1, s2);
  assert_non_null(n->loss);
  pd_tensor *targets[1] = {n->loss};
  assert_int_equal(pd_static_gradients(targets, 1, in, 2, NULL, NULL, 0, n->grads), PD_OK);
  assert_int_equal(pd_static_program_guard_end(), PD_OK);
  pd_tensor *ts[] = {w, pw, s1, q2, s2};
  for (int i = 0; i < 5; i++) pd_tensor_release(ts[i]);
}

static void release_net(net *n) {
  pd_tensor *ts[] = {n->a, n->b, n->out[0], n->out[1], n->loss, n->grads[0], n->grads[1]};
  for (int i = 0; i < 7; i++) pd_tensor_release(ts[i]);
  pd_program_release(n->main);
  pd_program_release(n->startup);
}

static double run_loss(pd_executor *exe, net *n, pd_tensor *av, pd_tensor *bv) {
  pd_static_feed feed[2] = {{"a", av}, {"b", bv}};
  pd_tensor *got;
  assert_int_equal(pd_executor_run(exe, n->main, feed, 2, &n->loss, 1, &got, NULL), PD_OK);
  double v = *(const double *)pd_tensor_data(got);
  pd_tensor_release(got);
  return v;
}

static void test_py_func_forward_and_backward(void **state) {
  (void)state;
  net n;
  build(&n);
  char *text = pd_program_to_string(n.main);
  assert_non_null(strstr(text, "py_func("));
  assert_non_null(strstr(text, "py_func_grad("));
  free(text);
  pd_executor *exe = pd_static_executor(PD_CPU);
  pd_tensor *av = T(PD_FLOAT64, 2, SHAPE(2, 3), 0.3, -1.2, 0.7, 2.0, -0.4, 1.1);
  pd_tensor *bv = T(PD_FLOAT64, 2, SHAPE(2, 3), -0.5, 0.9, 1.4, 0.2, -1.7, 0.6);
  pd_static_feed feed[2] = {{"a", av}, {"b", bv}};
  pd_tensor *fetch[4] = {n.out[0], n.out[1], n.grads[0], n.grads[1]}, *got[4];
  g_forward_calls = 0;
  assert_int_equal(pd_executor_run(exe, n.main, feed, 2, fetch, 4, got, NULL), PD_OK);
  assert_true(g_forward_calls >= 1);
  /* the forward is the callback's */
  const double *a = pd_tensor_data(av), *b = pd_tensor_data(bv);
  const double *p = pd_tensor_data(got[0]), *q = pd_tensor_data(got[1]);
  for (int i = 0; i < 6; i++) {
    assert_true(fabs(p[i] - a[i] * b[i]) < 1e-15);
    assert_true(fabs(q[i] - (sin(a[i]) + b[i])) < 1e-15);
  }
  /* the gradients against central differences of the run loss */
  const double h = 1e-6;
  for (int k = 0; k < 2; k++) {
    const double *g = pd_tensor_data(got[2 + k]);
    for (int i = 0; i < 6; i++) {
      pd_tensor *plus = pd_clone(k ? bv : av, PD_FLOAT64), *minus = pd_clone(k ? bv : av, PD_FLOAT64);
      ((double *)pd_tensor_data(plus))[i] += h;
      ((double *)pd_tensor_data(minus))[i] -= h;
      double lp = k ? run_loss(exe, &n, av, plus) : run_loss(exe, &n, plus, bv);
      double lm = k ? run_loss(exe, &n, av, minus) : run_loss(exe, &n, minus, bv);
      double fd = (lp - lm) / (2 * h);
      if (fabs(fd - g[i]) > 1e-6 * (1 + fabs(fd)))
        fail_msg("d loss / d %s[%d]: py_func backward %.10g, finite differences %.10g", k ? "b" : "a", i,
                 g[i], fd);
      pd_tensor_release(plus), pd_tensor_release(minus);
    }
  }
  for (int i = 0; i < 4; i++) pd_tensor_release(got[i]);
  /* another batch size through the same Program */
  pd_tensor *a1 = T(PD_FLOAT64, 2, SHAPE(1, 3), 1, 2, 3), *b1 = T(PD_FLOAT64, 2, SHAPE(1, 3), 4, 5, 6);
  pd_static_feed f1[2] = {{"a", a1}, {"b", b1}};
  assert_int_equal(pd_executor_run(exe, n.main, f1, 2, fetch, 1, got, NULL), PD_OK);
  EXPECT_VALUES(got[0], 0, 4, 10, 18);
  pd_tensor_release(got[0]);
  pd_tensor *ts[] = {av, bv, a1, b1};
  for (int i = 0; i < 4; i++) pd_tensor_release(ts[i]);
  pd_executor_release(exe);
  release_net(&n);
}

/* Eagerly the op runs at once; without a backward no gradient flows; a
 * result of the wrong shape is an error naming the output. */
static void test_py_func_eager_and_errors(void **state) {
  (void)state;
  pd_tensor *a = T(PD_FLOAT64, 1, SHAPE(3), 0.1, 0.2, 0.3), *b = T(PD_FLOAT64, 1, SHAPE(3), 1, 2, 3);
  pd_tensor_set_stop_gradient(a, false);
  pd_input_spec specs[2] = {{.ndim = 1, .shape = {3}, .dtype = PD_FLOAT64},
                            {.ndim = 1, .shape = {3}, .dtype = PD_FLOAT64}};
  pd_tensor *in[2] = {a, b}, *out[2];
  assert_int_equal(pd_static_py_func(mix, NULL, in, 2, specs, 2, out, NULL), PD_OK);
  EXPECT_VALUES(out[0], 1e-15, 0.1, 0.4, 0.9);
  pd_tensor *s = pd_sum(out[0], NULL, 0, false);
  assert_int_equal(pd_backward(s, NULL, false), PD_OK);
  pd_tensor *ga = pd_tensor_grad(a);
  if (ga) EXPECT_VALUES(ga, 0, 0, 0, 0); /* none flowed */
  pd_tensor_release(s);
  pd_tensor_release(out[0]), pd_tensor_release(out[1]);

  assert_int_equal(pd_static_py_func(wrong_shape, NULL, in, 2, specs, 1, out, NULL), PD_ERR_SHAPE);
  assert_non_null(strstr(pd_last_error(), "output 0"));
  assert_null(out[0]);
  assert_int_equal(pd_static_py_func(NULL, NULL, in, 2, specs, 1, out, NULL), PD_ERR_INVALID);
  assert_int_equal(pd_static_py_func(mix, NULL, in, 2, specs, 0, out, NULL), PD_ERR_INVALID);
  pd_tensor_release(a), pd_tensor_release(b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_py_func_forward_and_backward),
      cmocka_unit_test(test_py_func_eager_and_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
