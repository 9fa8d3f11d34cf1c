/* A conditional_block whose grad ops run in the same step keeps the taped
 * run of the branch taken, and the grad ops differentiate it without
 * running the branch again: the branch's forward ops run once per step
 * (a counting py_func in each branch), also with two grad ops, a random
 * op's values are the forward's in the gradient too, the gradient equals
 * central differences in float64, a cond no grad op differentiates keeps
 * nothing, and what a step keeps is freed with it. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "paddlec/static.h"
#include "paddlec/static_control.h"
#include "control_grad_check.h"
#include "static/static_internal.h"
#include "test_util.h"

static pd_tensor *scalar(double v, pd_dtype dt) { return pd_full(1, SHAPE(1), v, dt); }

typedef struct branch_ctx {
  pd_tensor *x, *w; /* fed float64 Variables the branches capture */
} branch_ctx;

/* ---- the branch's forward runs once per step ---------------------------------------- */
static call_count g_calls[2]; /* per branch: true, false */

/* counted(x) * w in the true branch, counted(x) + w in the false one */
static int counted_branch(branch_ctx *c, int which, pd_tensor **out) {
  pd_tensor *y = record_counted(&g_calls[which], c->x);
  out[0] = !y ? NULL : which == 0 ? pd_multiply(y, c->w) : pd_add(y, c->w);
  pd_tensor_release(y);
  return out[0] ? 1 : -1;
}
static int counted_true(void *user, pd_tensor **out, int cap) {
  (void)cap;
  return counted_branch(user, 0, out);
}
static int counted_false(void *user, pd_tensor **out, int cap) {
  (void)cap;
  return counted_branch(user, 1, out);
}

typedef struct cond_prog {
  pd_program *main;
  pd_tensor *x, *w, *p, *zero, *pred, *out, *g[2];
} cond_prog;

/* s = cond(p > 0, true_fn, false_fn) over x and w (fed "x", "w" of shape
 * [n]) with p fed ("p"); grads: ds/dx and ds/dw of sum(s) (n_grads of
 * them: 0 builds no backward, 2 asks twice, so the cond has two grad
 * ops). */
static void build(cond_prog *cp, int n, pd_static_branch_fn true_fn, pd_static_branch_fn false_fn,
                  int n_grads) {
  memset(cp, 0, sizeof *cp);
  cp->main = xw_program_begin(n, (scalar_feed){"p", 0, PD_FLOAT64}, &cp->x, &cp->w, &cp->p);
  cp->zero = scalar(0, PD_FLOAT64);
  cp->pred = pd_greater_than(cp->p, cp->zero);
  branch_ctx c = {cp->x, cp->w};
  assert_int_equal(pd_static_nn_cond(cp->pred, true_fn, false_fn, &c, &cp->out, 1), 1);
  xw_program_end(cp->out, cp->x, cp->w, n_grads, cp->g);
}

static void free_prog(cond_prog *cp) {
  pd_tensor *all[] = {cp->x, cp->w, cp->p, cp->zero, cp->pred, cp->out, cp->g[0], cp->g[1]};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) pd_tensor_release(all[i]);
  pd_program_release(cp->main);
}

/* Runs p with x, w (n values each) and the pred fed, fetching n_fetch
 * values of n doubles each into got (NULL: released unread). */
static void run(pd_executor *exe, pd_program *p, const double *x, const double *w, int n, bool pred,
                pd_tensor *const *fetch, int n_fetch, double *got) {
  run_xw(exe, p, x, w, n, (scalar_feed){"p", pred ? 1.0 : -1.0, PD_FLOAT64}, fetch, n_fetch, got);
}

/* At x = 2, w = 1.5: the true branch gives s = x w (ds/dx = w, ds/dw = x),
 * the false one s = x + w (1 and 1). Every step calls the py_func of the
 * branch taken once forward and once backward per grad op, the other
 * branch's not at all, lowered or interpreted, with one grad op or two
 * (one per input: they share the kept run); fetching s alone, once off
 * the tape. */
static void test_branch_runs_once_per_step(void **state) {
  (void)state;
  const double x = 2.0, w = 1.5, want[2][3] = {{x * w, w, x}, {x + w, 1, 1}};
  for (int n_grads = 1; n_grads <= 2; n_grads++)
    for (int interp = 0; interp < 2; interp++) {
      cond_prog cp;
      build(&cp, 1, counted_true, counted_false, n_grads);
      pd_executor *exe = pd_static_executor(PD_CPU);
      pd_executor_set_interpret(exe, interp);
      pd_tensor *fetch[3] = {cp.out, cp.g[0], cp.g[1]};
      for (int step = 0; step < 4; step++) {
        int taken = step % 2; /* 0: the true branch */
        memset(g_calls, 0, sizeof g_calls);
        double got[3];
        run(exe, cp.main, &x, &w, 1, taken == 0, fetch, 3, got);
        for (int i = 0; i < 3; i++)
          if (fabs(got[i] - want[taken][i]) > 1e-12)
            fail_msg("branch %d, value %d: %.17g, expected %.17g", taken, i, got[i], want[taken][i]);
        call_count t = g_calls[taken], u = g_calls[1 - taken];
        if (t.forward != 1 || t.taped != 1 || t.backward != n_grads || u.forward != 0 || u.backward != 0)
          fail_msg("%s, %d grad ops, branch %d: %d forward and %d backward calls, the other branch %d and %d",
                   interp ? "interpreted" : "lowered", n_grads, taken, t.forward, t.backward, u.forward,
                   u.backward);
      }
      /* s alone: the grad ops are dead, so the branch runs off the tape */
      memset(g_calls, 0, sizeof g_calls);
      run(exe, cp.main, &x, &w, 1, true, fetch, 1, NULL);
      assert_true(g_calls[0].forward == 1 && g_calls[0].taped == 0 && g_calls[0].backward == 0);
      pd_executor_release(exe);
      free_prog(&cp);
    }
}

/* ---- random ops ------------------------------------------------------------------- */
/* dropout(x, 0.5) * w: each element 0 or 2 x w */
static int dropout_true(void *user, pd_tensor **out, int cap) {
  (void)cap;
  branch_ctx *c = user;
  pd_tensor *d = pd_dropout(c->x, 0.5, 0, NULL, true, "upscale_in_train");
  out[0] = d ? pd_multiply(d, c->w) : NULL;
  pd_tensor_release(d);
  return out[0] ? 1 : -1;
}
static int times_w(void *user, pd_tensor **out, int cap) {
  (void)cap;
  branch_ctx *c = user;
  out[0] = pd_multiply(c->x, c->w);
  return out[0] ? 1 : -1;
}

/* With w = 1 the true branch gives s = x * m, m the mask scaled by 2, so
 * ds/dx = m = s / x exactly when the gradient uses the mask the forward
 * drew, with one grad op or two. From one seed, s equals the s of a run
 * with no grad op (the cond kept nothing), lowered and interpreted. */
static void test_random_ops_keep_the_forward_values(void **state) {
  (void)state;
  enum { N = 64 };
  double x[N], w[N];
  for (int i = 0; i < N; i++) x[i] = 0.25 + i / 16.0, w[i] = 1.0;
  double first[2][2 * N];
  for (int n_grads = 1; n_grads <= 2; n_grads++) {
    cond_prog cp;
    build(&cp, N, dropout_true, times_w, n_grads);
    pd_tensor *fetch[2] = {cp.out, cp.g[0]};
    check_dropout_steps(cp.main, (scalar_feed){"p", 1, PD_FLOAT64}, fetch, x, w, N, 2000, first[n_grads - 1]);
    free_prog(&cp);
  }
  assert_memory_equal(first[0], first[1], sizeof first[0]);
}

/* ---- finite differences ------------------------------------------------------------- */
/* tanh(x) * w + x * x * 0.5 */
static int tanh_true(void *user, pd_tensor **out, int cap) {
  (void)cap;
  branch_ctx *c = user;
  out[0] = tanh_poly(c->x, c->w);
  return out[0] ? 1 : -1;
}
/* exp(x * w) * w */
static int exp_false(void *user, pd_tensor **out, int cap) {
  (void)cap;
  branch_ctx *c = user;
  pd_tensor *xw = pd_multiply(c->x, c->w), *e = xw ? pd_exp(xw) : NULL;
  out[0] = e ? pd_multiply(e, c->w) : NULL;
  pd_tensor_release(xw);
  pd_tensor_release(e);
  return out[0] ? 1 : -1;
}

typedef struct loss_ctx {
  pd_executor *exe;
  cond_prog *cp;
  bool pred;
} loss_ctx;

static double loss_at(void *ctx, const double *x, const double *w) {
  loss_ctx *c = ctx;
  double s[3];
  run(c->exe, c->cp->main, x, w, 3, c->pred, &c->cp->out, 1, s);
  return s[0] + s[1] + s[2];
}

/* d sum(s) / dx and dw through either branch equal central differences of
 * the run's loss (h = 1e-6, float64) within 1e-7, and, bit for bit, the
 * gradients of the same cond with a grad op per input and those of the
 * interpreter. */
static void test_gradient_equals_finite_differences(void **state) {
  (void)state;
  cond_prog cp, twice;
  build(&cp, 3, tanh_true, exp_false, 1);
  build(&twice, 3, tanh_true, exp_false, 2);
  pd_executor *exe = pd_static_executor(PD_CPU), *interp = pd_static_executor(PD_CPU);
  pd_executor_set_interpret(interp, true);
  for (int branch = 0; branch < 2; branch++) {
    bool pred = branch == 0;
    double x[3] = {0.3, -0.7, 0.5}, w[3] = {1.2, -0.4, 0.8}, got[6], again[6];
    pd_tensor *fetch[2] = {cp.g[0], cp.g[1]}, *fetch2[2] = {twice.g[0], twice.g[1]};
    run(exe, cp.main, x, w, 3, pred, fetch, 2, got);
    loss_ctx lc = {exe, &cp, pred};
    expect_central_differences(loss_at, &lc, x, w, 3, got, pred ? "true branch" : "false branch");
    run(exe, twice.main, x, w, 3, pred, fetch2, 2, again);
    assert_memory_equal(got, again, sizeof got);
    run(interp, cp.main, x, w, 3, pred, fetch, 2, again);
    assert_memory_equal(got, again, sizeof got);
  }
  pd_executor_release(exe);
  pd_executor_release(interp);
  free_prog(&twice);
  free_prog(&cp);
}

/* ---- memory ------------------------------------------------------------------------- */
/* Runs p with x and w of 64 values and the pred fed; returns the
 * allocations it counted. */
static size_t allocations(pd_executor *exe, pd_program *p, bool pred, pd_tensor *const *fetch, int n_fetch) {
  return run_xw_allocations(exe, p, (scalar_feed){"p", pred ? 1.0 : -1.0, PD_FLOAT64}, fetch, n_fetch);
}

/* A cond no grad op of the run differentiates keeps nothing: fetching
 * only s from the program with a backward (its grad op is dead), or
 * running its for_test clone or a program without a backward count the
 * same allocations per step, through either branch. With the grad ops
 * (one or two), the bytes live after a step are the same after 1 step of
 * each branch and after 10 more: what the cond kept is freed with its
 * step. */
static void test_memory(void **state) {
  (void)state;
  cond_prog cp, plain, twice;
  build(&cp, 64, tanh_true, exp_false, 1);
  build(&plain, 64, tanh_true, exp_false, 0);
  build(&twice, 64, tanh_true, exp_false, 2);
  pd_program *test = pd_program_clone(cp.main, true);
  pd_program *progs[3] = {cp.main, test, plain.main};
  pd_tensor *s_of[3] = {cp.out, cp.out, plain.out};
  for (int branch = 0; branch < 2; branch++) {
    size_t first = 0;
    for (int i = 0; i < 3; i++) {
      pd_executor *exe = pd_static_executor(PD_CPU);
      allocations(exe, progs[i], branch == 0, &s_of[i], 1); /* lowers */
      allocations(exe, progs[i], branch == 0, &s_of[i], 1); /* runs in the arena */
      size_t a = allocations(exe, progs[i], branch == 0, &s_of[i], 1);
      if (i > 0 && a != first)
        fail_msg("branch %d: program %d allocated %zu times, program 0 %zu", branch, i, a, first);
      first = a;
      pd_executor_release(exe);
    }
  }
  cond_prog *with_grads[2] = {&cp, &twice};
  for (int k = 0; k < 2; k++) {
    pd_executor *exe = pd_static_executor(PD_CPU);
    pd_tensor *fetch[3] = {with_grads[k]->out, with_grads[k]->g[0], with_grads[k]->g[1]};
    allocations(exe, with_grads[k]->main, true, fetch, 3);
    allocations(exe, with_grads[k]->main, false, fetch, 3);
    size_t after1 = pd_memory_allocated();
    for (int step = 0; step < 10; step++) allocations(exe, with_grads[k]->main, step % 2 == 0, fetch, 3);
    size_t after10 = pd_memory_allocated();
    if (after1 != after10)
      fail_msg("%d grad ops: %zu bytes live after 1 step, %zu after 10", k + 1, after1, after10);
    pd_executor_release(exe);
  }
  pd_program_release(test);
  free_prog(&twice);
  free_prog(&plain);
  free_prog(&cp);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(test_branch_runs_once_per_step, close_program_guards),
      cmocka_unit_test_teardown(test_random_ops_keep_the_forward_values, close_program_guards),
      cmocka_unit_test_teardown(test_gradient_equals_finite_differences, close_program_guards),
      cmocka_unit_test_teardown(test_memory, close_program_guards),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
