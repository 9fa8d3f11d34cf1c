/* A while whose while_grad runs in the same step keeps its taped run, and
 * the grad op differentiates it without running the loop again: the body's
 * forward ops run once per iteration per step (a counting py_func in the
 * body), a random op's values are the forward's in the gradient too, the
 * gradient equals central differences in float64, a loop no grad op
 * differentiates keeps nothing, and what a step keeps is freed with it. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "paddlec/static.h"
#include "paddlec/static_control.h"
#include "control_grad_check.h"
#include "core/alloc.h"
#include "static/static_internal.h"
#include "test_util.h"

static pd_tensor *scalar(double v, pd_dtype dt) { return pd_full(1, SHAPE(1), v, dt); }

typedef struct loop_ctx {
  pd_tensor *k; /* trip count (int64 Variable) */
  pd_tensor *w; /* a captured float64 Variable */
} loop_ctx;

static pd_tensor *below_k(void *user, pd_tensor *const *v, int n) {
  (void)n;
  return pd_less_than(v[0], ((loop_ctx *)user)->k);
}

/* ---- the body's forward runs once per iteration ----------------------------------- */
static call_count g_calls;

/* (i, x) -> (i + 1, counted(x) * w) */
static pd_status counted_body(void *user, pd_tensor *const *v, int n, pd_tensor **next) {
  (void)n;
  loop_ctx *c = user;
  pd_tensor *y = record_counted(&g_calls, v[1]);
  next[0] = pd_increment(v[0], 1);
  next[1] = y ? pd_multiply(y, c->w) : NULL;
  pd_tensor_release(y);
  return next[0] && next[1] ? PD_OK : pd_last_status();
}

typedef struct loop_prog {
  pd_program *main;
  pd_tensor *x, *w, *k, *i0, *out[2], *g[2];
} loop_prog;

/* s = while_loop(i < k, (i + 1, body(s))) from s = x (fed "x" of shape
 * [n]) with w fed ("w", [n]) and k fed ("k"); grads: ds/dx and ds/dw of
 * sum(s) (n_grads of them: 0 builds no backward, 2 asks twice, so the
 * loop has two grad ops). */
static void build(loop_prog *lp, int n, pd_static_loop_body_fn body, int n_grads) {
  memset(lp, 0, sizeof *lp);
  lp->main = xw_program_begin(n, (scalar_feed){"k", 0, PD_INT64}, &lp->x, &lp->w, &lp->k);
  lp->i0 = scalar(0, PD_INT64);
  pd_tensor *vars[2] = {lp->i0, lp->x};
  loop_ctx c = {lp->k, lp->w};
  assert_int_equal(pd_static_nn_while_loop(below_k, body, &c, vars, 2, lp->out), PD_OK);
  xw_program_end(lp->out[1], lp->x, lp->w, n_grads, lp->g);
}

static void free_prog(loop_prog *lp) {
  pd_tensor *all[] = {lp->x, lp->w, lp->k, lp->i0, lp->out[0], lp->out[1], lp->g[0], lp->g[1]};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) pd_tensor_release(all[i]);
  pd_program_release(lp->main);
}

/* Runs p with x, w (n values each) and k fed, fetching n_fetch values of n
 * doubles each into got (NULL: released unread). */
static void run(pd_executor *exe, pd_program *p, const double *x, const double *w, int n, int64_t k,
                pd_tensor *const *fetch, int n_fetch, double *got) {
  run_xw(exe, p, x, w, n, (scalar_feed){"k", (double)k, PD_INT64}, fetch, n_fetch, got);
}

/* s = x w^3 after 3 steps at x = 2, w = 1.5: ds/dx = w^3, ds/dw = 3 x w^2.
 * Every step calls the body's py_func 3 times forward, lowered or
 * interpreted, and 3 times backward per grad op; with two grad ops (one
 * per input) both differentiate the one kept run: still 3 forward calls,
 * 3 backward calls for ds/dx and 3 for ds/dw. */
static void test_body_runs_once_per_iteration(void **state) {
  (void)state;
  const double x = 2.0, w = 1.5, want[3] = {x * w * w * w, w * w * w, 3 * x * w * w};
  for (int n_grads = 1; n_grads <= 2; n_grads++)
    for (int interp = 0; interp < 2; interp++) {
      loop_prog lp;
      build(&lp, 1, counted_body, n_grads);
      pd_executor *exe = pd_static_executor(PD_CPU);
      pd_executor_set_interpret(exe, interp);
      pd_tensor *fetch[3] = {lp.out[1], lp.g[0], lp.g[1]};
      for (int step = 1; step <= 4; step++) {
        g_calls = (call_count){0};
        double got[3];
        run(exe, lp.main, &x, &w, 1, 3, fetch, 3, got);
        for (int i = 0; i < 3; i++)
          if (fabs(got[i] - want[i]) > 1e-12) fail_msg("value %d: %.17g, expected %.17g", i, got[i], want[i]);
        int fwd = 3, bwd = 3 * n_grads;
        if (g_calls.forward != fwd || g_calls.taped != fwd || g_calls.backward != bwd)
          fail_msg("%s, %d grad ops, step %d: %d forward and %d backward calls, expected %d and %d",
                   interp ? "interpreted" : "lowered", n_grads, step, g_calls.forward, g_calls.backward, fwd,
                   bwd);
      }
      pd_executor_release(exe);
      free_prog(&lp);
    }
}

/* ---- random ops ------------------------------------------------------------------- */
/* (i, x) -> (i + 1, dropout(x, 0.5) * w): each step scales by 0 or 2 w */
static pd_status dropout_body(void *user, pd_tensor *const *v, int n, pd_tensor **next) {
  (void)n;
  loop_ctx *c = user;
  pd_tensor *d = pd_dropout(v[1], 0.5, 0, NULL, true, "upscale_in_train");
  next[0] = pd_increment(v[0], 1);
  next[1] = d ? pd_multiply(d, c->w) : NULL;
  pd_tensor_release(d);
  return next[0] && next[1] ? PD_OK : pd_last_status();
}

/* With w = 1 the loop gives s = x * m, m the product of the masks scaled
 * by 2 (0 or a power of 2 per element), so ds/dx = m = s / x exactly when
 * the gradient uses the masks the forward drew. From one seed, s equals
 * the s of a run with no grad op (the loop kept nothing), lowered and
 * interpreted, and the masks differ between steps. */
static void test_random_ops_keep_the_forward_values(void **state) {
  (void)state;
  enum { N = 64 };
  double x[N], w[N];
  for (int i = 0; i < N; i++) x[i] = 0.25 + i / 16.0, w[i] = 1.0;
  loop_prog lp;
  build(&lp, N, dropout_body, 1);
  pd_tensor *fetch[2] = {lp.out[1], lp.g[0]};
  double first[2 * N];
  check_dropout_steps(lp.main, (scalar_feed){"k", 4, PD_INT64}, fetch, x, w, N, 1000, first);
  free_prog(&lp);
}

/* ---- finite differences ------------------------------------------------------------- */
/* (i, x) -> (i + 1, tanh(x) * w + x * x * 0.5) */
static pd_status tanh_body(void *user, pd_tensor *const *v, int n, pd_tensor **next) {
  (void)n;
  loop_ctx *c = user;
  next[0] = pd_increment(v[0], 1);
  next[1] = tanh_poly(v[1], c->w);
  return next[0] && next[1] ? PD_OK : pd_last_status();
}

typedef struct loss_ctx {
  pd_executor *exe;
  loop_prog *lp;
} loss_ctx;

static double loss_at(void *ctx, const double *x, const double *w) {
  loss_ctx *c = ctx;
  double s[3];
  run(c->exe, c->lp->main, x, w, 3, 3, &c->lp->out[1], 1, s);
  return s[0] + s[1] + s[2];
}

/* d sum(s) / dx and dw of three steps of the body above equal central
 * differences of the run's loss (h = 1e-6, float64) within 1e-7, and, bit
 * for bit, the gradients of the same loop with a grad op per input (the
 * two share one kept run). */
static void test_gradient_equals_finite_differences(void **state) {
  (void)state;
  loop_prog lp;
  build(&lp, 3, tanh_body, 1);
  pd_executor *exe = pd_static_executor(PD_CPU);
  double x[3] = {0.3, -0.7, 0.5}, w[3] = {1.2, -0.4, 0.8}, got[6];
  pd_tensor *fetch[2] = {lp.g[0], lp.g[1]};
  run(exe, lp.main, x, w, 3, 3, fetch, 2, got);
  loss_ctx lc = {exe, &lp};
  expect_central_differences(loss_at, &lc, x, w, 3, got, "while");
  loop_prog twice;
  build(&twice, 3, tanh_body, 2);
  double rerun[6];
  pd_tensor *fetch2[2] = {twice.g[0], twice.g[1]};
  run(exe, twice.main, x, w, 3, 3, fetch2, 2, rerun);
  assert_memory_equal(got, rerun, sizeof got);
  free_prog(&twice);
  pd_executor_release(exe);
  free_prog(&lp);
}

/* ---- memory ------------------------------------------------------------------------- */
/* the bytes live as each iteration starts (in its forward) */
static size_t g_live[64];
static int g_probes;
static pd_status probe(void *user, pd_tensor *const *in, int n_in, pd_tensor **out, int n_out) {
  (void)user, (void)n_in, (void)n_out;
  if (g_probes < 64) g_live[g_probes] = pd_memory_allocated();
  g_probes++;
  out[0] = pd_assign(in[0]);
  return out[0] ? PD_OK : pd_last_status();
}

/* (i, x) -> (i + 1, x * w + 1 + 1 + 1 + 1 + 1): six temporaries the size
 * of x, of which the grad rules read none but x (the product's reads x and
 * w); a probe of i first */
static pd_status chain_body(void *user, pd_tensor *const *v, int n, pd_tensor **next) {
  (void)n;
  loop_ctx *c = user;
  pd_input_spec spec = {.name = "probe", .ndim = 1, .shape = {1}, .dtype = PD_INT64};
  pd_tensor *seen = NULL;
  if (pd_static_py_func(probe, NULL, &v[0], 1, &spec, 1, &seen, NULL) != PD_OK) return pd_last_status();
  pd_tensor_release(seen);
  pd_tensor *y = pd_multiply(v[1], c->w);
  for (int j = 0; j < 5 && y; j++) {
    pd_tensor *z = pd_scale(y, 1.0, 1.0, true);
    pd_tensor_release(y);
    y = z;
  }
  next[0] = pd_increment(v[0], 1);
  next[1] = y;
  return next[0] && next[1] ? PD_OK : pd_last_status();
}

/* Runs p with x and w of 64 values and k fed; returns the allocations it
 * counted. */
static size_t allocations(pd_executor *exe, pd_program *p, int64_t k, pd_tensor *const *fetch, int n_fetch) {
  return run_xw_allocations(exe, p, (scalar_feed){"k", (double)k, PD_INT64}, fetch, n_fetch);
}

/* A loop no grad op of the run differentiates keeps nothing per
 * iteration: fetching only s from the program with a backward (its grad
 * op is dead), or running its for_test clone or a program without a
 * backward, 20 and 60 iterations count the same allocations, the same for
 * the three. With the grad op, the bytes live after a step are the same
 * after 1 and after 10 steps: what the loop kept is freed with its step. */
static void test_memory(void **state) {
  (void)state;
  loop_prog lp, plain;
  build(&lp, 64, tanh_body, 1);
  build(&plain, 64, tanh_body, 0);
  pd_program *test = pd_program_clone(lp.main, true);
  pd_program *progs[3] = {lp.main, test, plain.main};
  pd_tensor *s_of[3] = {lp.out[1], lp.out[1], plain.out[1]};
  size_t first20 = 0;
  for (int i = 0; i < 3; i++) {
    pd_executor *exe = pd_static_executor(PD_CPU);
    allocations(exe, progs[i], 3, &s_of[i], 1); /* lowers, shows the body's shapes */
    allocations(exe, progs[i], 5, &s_of[i], 1); /* runs in the arena */
    size_t a20 = allocations(exe, progs[i], 20, &s_of[i], 1),
           a60 = allocations(exe, progs[i], 60, &s_of[i], 1);
    if (a20 != a60) fail_msg("program %d: 20 iterations allocated %zu times, 60 %zu", i, a20, a60);
    if (i > 0 && a20 != first20) fail_msg("program %d allocated %zu times, program 0 %zu", i, a20, first20);
    first20 = a20;
    pd_executor_release(exe);
  }
  pd_executor *exe = pd_static_executor(PD_CPU);
  pd_tensor *fetch[3] = {lp.out[1], lp.g[0], lp.g[1]};
  allocations(exe, lp.main, 20, fetch, 3);
  size_t after1 = pd_memory_allocated();
  for (int step = 2; step <= 10; step++) allocations(exe, lp.main, 20, fetch, 3);
  size_t after10 = pd_memory_allocated();
  if (after1 != after10) fail_msg("%zu bytes live after 1 step, %zu after 10", after1, after10);
  /* the taped loop allocates per iteration, as it keeps each one's values */
  size_t g20 = allocations(exe, lp.main, 20, fetch, 3), g60 = allocations(exe, lp.main, 60, fetch, 3);
  assert_true(g60 > g20 + 40);
  pd_executor_release(exe);
  pd_program_release(test);
  free_prog(&plain);
  free_prog(&lp);
}

/* An iteration keeps what the grad rules read, not its temporaries: the
 * bytes live as an iteration of chain_body starts grow by one x (512
 * bytes) per iteration, not by six. */
static void test_iteration_keeps_what_grad_rules_read(void **state) {
  (void)state;
  loop_prog chain;
  build(&chain, 64, chain_body, 1);
  pd_executor *exe = pd_static_executor(PD_CPU);
  pd_tensor *fetch[3] = {chain.out[1], chain.g[0], chain.g[1]};
  g_probes = 0;
  allocations(exe, chain.main, 60, fetch, 3);
  assert_int_equal(g_probes, 60);
  size_t per_iteration = (g_live[50] - g_live[10]) / 40;
  if (per_iteration < 64 * sizeof(double) || per_iteration >= 2 * 64 * sizeof(double))
    fail_msg("an iteration keeps %zu bytes, x is %zu", per_iteration, 64 * sizeof(double));
  pd_executor_release(exe);
  free_prog(&chain);
}

/* ---- a failing backward ------------------------------------------------------------- */
static bool g_fail_backward;

static pd_status identity(void *user, pd_tensor *const *in, int n_in, pd_tensor **out, int n_out) {
  (void)user, (void)n_in, (void)n_out;
  out[0] = pd_assign(in[0]);
  return out[0] ? PD_OK : pd_last_status();
}

static pd_status identity_grad(void *user, pd_tensor *const *in, int n_in, pd_tensor **out, int n_out) {
  (void)user, (void)n_in, (void)n_out;
  if (g_fail_backward) return pd_set_error(PD_ERR_INVALID, "identity_grad: told to fail");
  out[0] = pd_assign(in[2]); /* in: x, out, d out */
  return out[0] ? PD_OK : pd_last_status();
}

/* (i, x) -> (i + 1, identity(x) * w), identity a py_func whose backward
 * fails while g_fail_backward is set */
static pd_status failing_body(void *user, pd_tensor *const *v, int n, pd_tensor **next) {
  (void)n;
  pd_input_spec spec = {.name = "identity", .ndim = 1, .shape = {1}, .dtype = PD_FLOAT64};
  pd_tensor *y = NULL;
  if (pd_static_py_func(identity, NULL, &v[1], 1, &spec, 1, &y, identity_grad) != PD_OK)
    return pd_last_status();
  next[0] = pd_increment(v[0], 1);
  next[1] = pd_multiply(y, ((loop_ctx *)user)->w);
  pd_tensor_release(y);
  return next[0] && next[1] ? PD_OK : pd_last_status();
}

/* Two grad ops (one per input) differentiate the kept run, each walking
 * to its own leaf: when the body's backward fails the step fails with its
 * error and leaks nothing (the sanitizer build checks), and the next step
 * gives ds/dx = w^3 and ds/dw = 3 x w^2 at x = 2, w = 1.5. */
static void test_failing_backward(void **state) {
  (void)state;
  loop_prog lp;
  build(&lp, 1, failing_body, 2);
  double x = 2.0, w = 1.5;
  pd_tensor *fetch[2] = {lp.g[0], lp.g[1]};
  for (int interp = 0; interp < 2; interp++) {
    pd_executor *exe = pd_static_executor(PD_CPU);
    pd_executor_set_interpret(exe, interp);
    pd_tensor *xv = pd_full(1, SHAPE(1), x, PD_FLOAT64), *wv = pd_full(1, SHAPE(1), w, PD_FLOAT64),
              *kv = scalar(3, PD_INT64), *out[2] = {0};
    pd_static_feed feed[3] = {{"x", xv}, {"w", wv}, {"k", kv}};
    g_fail_backward = true;
    pd_status st = pd_executor_run(exe, lp.main, feed, 3, fetch, 2, out, NULL);
    g_fail_backward = false;
    assert_int_equal(st, PD_ERR_INVALID);
    assert_non_null(strstr(pd_last_error(), "identity_grad: told to fail"));
    assert_null(out[0]);
    double got[2];
    run(exe, lp.main, &x, &w, 1, 3, fetch, 2, got);
    assert_true(fabs(got[0] - w * w * w) < 1e-12 && fabs(got[1] - 3 * x * w * w) < 1e-12);
    pd_tensor_release(xv), pd_tensor_release(wv), pd_tensor_release(kv);
    pd_executor_release(exe);
  }
  free_prog(&lp);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(test_body_runs_once_per_iteration, close_program_guards),
      cmocka_unit_test_teardown(test_random_ops_keep_the_forward_values, close_program_guards),
      cmocka_unit_test_teardown(test_gradient_equals_finite_differences, close_program_guards),
      cmocka_unit_test_teardown(test_memory, close_program_guards),
      cmocka_unit_test_teardown(test_iteration_keeps_what_grad_rules_read, close_program_guards),
      cmocka_unit_test_teardown(test_failing_backward, close_program_guards),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
