/* Gradients through inplace ops in a static Program: an inplace op keeps
 * its Variable's name, and the backward treats what it writes as a new
 * version of that Variable, so w2 = scale(w); exp_(w2); sum(w2 * x) has
 * d/dw = x exp(w2) 1.5, as eager computes it. Each case is checked against
 * float64 central differences and against eager's gradients of the same
 * code, plain, read through a while loop, and trained by minimize. Where
 * a grad op would read a value an inplace op overwrote after it (eager's
 * version check fails there too), the backward is an error naming the op
 * and the Variable, never a missing or wrong gradient. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "paddlec/static.h"
#include "paddlec/static_control.h"
#include "control_grad_check.h"
#include "ops/op_registry.h"
#include "static/static_internal.h"
#include "test_util.h"

#define N 4
static const double X0[N] = {0.9, -0.4, 1.3, 0.25}, W0[N] = {0.3, -0.7, 1.1, -0.45};
static const scalar_feed K3 = {"k", 3, PD_INT64};

/* scale_(t, s, b): t = s t + b in place (no public function; the library's
 * writes reach it through pd_write_scale) */
static pd_tensor *scale_inplace(pd_tensor *t, double s, double b) {
  pd_attrs a = {.f = {s, b}, .i = {1}};
  return pd_dispatch1(PD_OP_scale_, &t, 1, &a);
}

/* Runs an inplace op on t, dropping the reference it returns; false when
 * it failed. */
static bool keep(pd_tensor *r) {
  pd_tensor_release(r);
  return r != NULL;
}

enum { EXP, RELU, SCALE, ADD, CHAIN, READ_BEFORE, ADD_INTO_FULL, N_CASES };
static const char *const CASE_NAME[N_CASES] = {
    "exp_", "relu_", "scale_", "add_", "add_ scale_ exp_", "add before exp_", "add_ into full"};

/* w2 = scale(w, 1.5, 0.2), the case's inplace ops on w2, then the
 * loss sum(w2 * x) (READ_BEFORE: y = w2 + x before exp_(w2), then
 * sum(y * w2); ADD_INTO_FULL: a = full(0.5) (no gradient wanted),
 * add_(a, w2), sum(a * x)). The same code runs eagerly and recorded. */
static pd_tensor *inplace_loss(int c, pd_tensor *x, pd_tensor *w) {
  pd_tensor *w2 = pd_scale(w, 1.5, 0.2, true), *y = NULL, *a = NULL, *prod = NULL, *loss = NULL;
  bool ok = w2 != NULL;
  switch (c) {
    case EXP:
      ok = ok && keep(pd_exp_(w2));
      break;
    case RELU:
      ok = ok && keep(pd_relu_(w2));
      break;
    case SCALE:
      ok = ok && keep(scale_inplace(w2, 0.7, 0.1));
      break;
    case ADD:
      ok = ok && keep(pd_add_(w2, x));
      break;
    case CHAIN:
      ok = ok && keep(pd_add_(w2, x)) && keep(scale_inplace(w2, 0.5, 0.1)) && keep(pd_exp_(w2));
      break;
    case READ_BEFORE:
      ok = ok && (y = pd_add(w2, x)) && keep(pd_exp_(w2));
      break;
    case ADD_INTO_FULL: /* a takes on w2's gradient history */
      ok = ok && (a = pd_full(1, SHAPE(N), 0.5, PD_FLOAT64)) && keep(pd_add_(a, w2));
      break;
  }
  if (ok) prod = a ? pd_multiply(a, x) : pd_multiply(y ? y : x, w2);
  if (prod) loss = pd_sum(prod, NULL, 0, false);
  pd_tensor_release(w2), pd_tensor_release(y), pd_tensor_release(a), pd_tensor_release(prod);
  return loss;
}

static pd_tensor *g_k; /* the fed trip count ("k") while recording */

/* ---- the loss and its gradients eagerly ----------------------------------------- */
typedef pd_tensor *(*loss_fn)(int c, pd_tensor *x, pd_tensor *w);
typedef struct eager_case {
  loss_fn f;
  int c;
} eager_case;

static double eager_value(void *ctx, const double *x, const double *w) {
  eager_case *e = ctx;
  pd_tensor *xv = pd_to_tensor(x, PD_FLOAT64, 1, SHAPE(N)), *wv = pd_to_tensor(w, PD_FLOAT64, 1, SHAPE(N));
  pd_tensor *l = e->f(e->c, xv, wv);
  if (!l) fail_msg("eager loss: %s", pd_last_error());
  double v = *(const double *)pd_tensor_data(l);
  pd_tensor_release(l), pd_tensor_release(xv), pd_tensor_release(wv);
  return v;
}

/* d loss / dx then d loss / dw (2 N values) from eager autograd */
static void eager_grads(eager_case *e, double *g) {
  pd_tensor *xv = pd_to_tensor(X0, PD_FLOAT64, 1, SHAPE(N)), *wv = pd_to_tensor(W0, PD_FLOAT64, 1, SHAPE(N));
  pd_tensor_set_stop_gradient(xv, false);
  pd_tensor_set_stop_gradient(wv, false);
  pd_tensor *l = e->f(e->c, xv, wv), *in[2] = {xv, wv}, *gr[2] = {NULL, NULL};
  if (!l || pd_grad(&l, 1, in, 2, NULL, NULL, gr) != PD_OK) fail_msg("eager grad: %s", pd_last_error());
  for (int i = 0; i < 2; i++) memcpy(g + i * N, pd_tensor_data(gr[i]), N * sizeof(double));
  pd_tensor *ts[] = {l, xv, wv, gr[0], gr[1]};
  for (int i = 0; i < 5; i++) pd_tensor_release(ts[i]);
}

/* Runs p with X0, W0 and k = 3 fed, writing the n_fetch values (all their
 * elements, in order) to got. */
static void run_fetch(pd_executor *exe, pd_program *p, pd_tensor *const *fetch, int n_fetch, double *got) {
  pd_tensor *xv = pd_to_tensor(X0, PD_FLOAT64, 1, SHAPE(N)), *wv = pd_to_tensor(W0, PD_FLOAT64, 1, SHAPE(N)),
            *kv = pd_full(1, SHAPE(1), 3, PD_INT64);
  pd_static_feed feed[3] = {{"x", xv}, {"w", wv}, {"k", kv}};
  pd_tensor *out[3] = {0};
  if (pd_executor_run(exe, p, feed, 3, fetch, n_fetch, out, NULL) != PD_OK)
    fail_msg("run: %s", pd_last_error());
  for (int i = 0; i < n_fetch; i++) {
    int64_t n = pd_tensor_numel(out[i]);
    memcpy(got, pd_tensor_data(out[i]), (size_t)n * sizeof(double));
    got += n;
    pd_tensor_release(out[i]);
  }
  pd_tensor_release(xv), pd_tensor_release(wv), pd_tensor_release(kv);
}

/* ---- recorded ----------------------------------------------------------------------- */
/* Records f's loss on fed x and w, appends its gradients for both, runs
 * the Program lowered and interpreted, and checks the loss against eager,
 * the gradients against eager (1e-12) and central differences. */
static void check_recorded(loss_fn f, int c, const char *what) {
  pd_tensor *x, *w, *k, *g[2] = {NULL, NULL};
  pd_program *p = xw_program_begin(N, K3, &x, &w, &k);
  g_k = k;
  pd_tensor *loss = f(c, x, w), *wrt[2] = {x, w};
  if (!loss) fail_msg("%s: recording: %s", what, pd_last_error());
  if (pd_static_gradients(&loss, 1, wrt, 2, NULL, NULL, 0, g) != PD_OK)
    fail_msg("%s: gradients: %s", what, pd_last_error());
  assert_int_equal(pd_static_program_guard_end(), PD_OK);
  if (!g[0] || !g[1]) fail_msg("%s: no gradient for %s", what, g[0] ? "w" : "x");
  eager_case e = {f, c};
  double want[2 * N], x0[N], w0[N];
  eager_grads(&e, want);
  memcpy(x0, X0, sizeof x0), memcpy(w0, W0, sizeof w0);
  double eager_loss = eager_value(&e, x0, w0);
  for (int interp = 0; interp < 2; interp++) {
    pd_executor *exe = pd_static_executor(PD_CPU);
    pd_executor_set_interpret(exe, interp);
    double got[2 * N + 1];
    pd_tensor *fetch[3] = {g[0], g[1], loss};
    run_fetch(exe, p, fetch, 3, got);
    pd_executor_release(exe);
    if (fabs(got[2 * N] - eager_loss) > 1e-12 * (1 + fabs(eager_loss)))
      fail_msg("%s: loss %.17g, eager %.17g", what, got[2 * N], eager_loss);
    for (int i = 0; i < 2 * N; i++)
      if (fabs(got[i] - want[i]) > 1e-12 * (1 + fabs(want[i])))
        fail_msg("%s (%s): d/d%s[%d] %.17g, eager %.17g", what, interp ? "interpreted" : "lowered",
                 i < N ? "x" : "w", i % N, got[i], want[i]);
    expect_central_differences(eager_value, &e, x0, w0, N, got, what);
  }
  pd_tensor *ts[] = {x, w, k, loss, g[0], g[1]};
  for (int i = 0; i < 6; i++) pd_tensor_release(ts[i]);
  pd_program_release(p);
}

static void test_plain(void **state) {
  (void)state;
  for (int c = 0; c < N_CASES; c++) check_recorded(inplace_loss, c, CASE_NAME[c]);
}

/* ---- through a while loop --------------------------------------------------------- */

static pd_tensor *below_k(void *user, pd_tensor *const *v, int n) {
  (void)user, (void)n;
  return pd_less_than(v[0], g_k);
}

/* s * m, or with exp: t = scale(s, 0.5, 0.1), exp_(t), t * m */
static pd_tensor *step(pd_tensor *s, pd_tensor *m, bool with_exp) {
  if (!with_exp) return pd_multiply(s, m);
  pd_tensor *t = pd_scale(s, 0.5, 0.1, true), *r = t && keep(pd_exp_(t)) ? pd_multiply(t, m) : NULL;
  pd_tensor_release(t);
  return r;
}

typedef struct body_ctx {
  pd_tensor *m;
  bool with_exp;
} body_ctx;

/* (i, s) -> (i + 1, step(s)) */
static pd_status times_body(void *user, pd_tensor *const *v, int n, pd_tensor **next) {
  (void)n;
  body_ctx *c = user;
  next[0] = pd_increment(v[0], 1);
  next[1] = step(v[1], c->m, c->with_exp);
  return next[0] && next[1] ? PD_OK : pd_last_status();
}

/* s = from, then step(s) three times: while_loop recorded, a loop eagerly */
static pd_tensor *three_steps(pd_tensor *from, pd_tensor *m, bool with_exp) {
  if (pd_in_dynamic_mode()) {
    pd_tensor *s = pd_tensor_retain(from);
    for (int i = 0; i < 3 && s; i++) {
      pd_tensor *nx = step(s, m, with_exp);
      pd_tensor_release(s);
      s = nx;
    }
    return s;
  }
  body_ctx c = {m, with_exp};
  pd_tensor *i0 = pd_full(1, SHAPE(1), 0, PD_INT64), *vars[2] = {i0, from}, *out[2] = {NULL, NULL};
  pd_status st = i0 ? pd_static_nn_while_loop(below_k, times_body, &c, vars, 2, out) : pd_last_status();
  pd_tensor_release(i0), pd_tensor_release(out[0]);
  return st == PD_OK ? out[1] : NULL;
}

static pd_tensor *times_three(pd_tensor *from, pd_tensor *m) { return three_steps(from, m, false); }

enum { LOOP_CAPTURED, LOOP_CARRIED, LOOP_BODY };

/* w2 = exp_(scale(w, 1.5, 0.2)); LOOP_CAPTURED: sum(x w2^3), w2 read by
 * the body; LOOP_CARRIED: sum(w2 x^3), w2 the loop variable; LOOP_BODY:
 * w2 the loop variable, the body's step with an exp_ of its own. */
static pd_tensor *loop_loss(int c, pd_tensor *x, pd_tensor *w) {
  pd_tensor *w2 = pd_scale(w, 0.5, 0.2, true), *s = NULL, *loss = NULL;
  if (w2 && keep(pd_exp_(w2)))
    s = c == LOOP_CAPTURED ? times_three(x, w2) : three_steps(w2, x, c == LOOP_BODY);
  if (s) loss = pd_sum(s, NULL, 0, false);
  pd_tensor_release(w2), pd_tensor_release(s);
  return loss;
}

static void test_through_while(void **state) {
  (void)state;
  check_recorded(loop_loss, LOOP_CAPTURED, "exp_ then captured by while_loop");
  check_recorded(loop_loss, LOOP_CARRIED, "exp_ then carried by while_loop");
  check_recorded(loop_loss, LOOP_BODY, "exp_ then carried by while_loop, exp_ in the body");
}

/* ---- refused: a grad op would read an overwritten value ------------------------------ */
static char g_w2_name[128]; /* the name of the last recorded w2 */

enum { EXP_THEN_RELU, MUL_BEFORE_EXP, LOOP_BEFORE_EXP, FILL };

/* w2 = scale(w, 1.5, 0.2); EXP_THEN_RELU: exp_ (whose backward reads its
 * output) then relu_ on w2, sum(w2 x); MUL_BEFORE_EXP: y = w2 x (whose
 * backward reads w2) before exp_(w2), sum(y + w2); LOOP_BEFORE_EXP: s =
 * x w2^3 by while_loop before exp_(w2), sum(s + w2); FILL: fill_(w2, 0.5),
 * which has no backward, then sum(w2 x). */
static pd_tensor *overwritten_loss(int c, pd_tensor *x, pd_tensor *w) {
  pd_tensor *w2 = pd_scale(w, 1.5, 0.2, true), *y = NULL, *loss = NULL;
  if (!w2) return NULL;
  const char *nm = pd_tensor_name(w2);
  snprintf(g_w2_name, sizeof g_w2_name, "%s", nm ? nm : "");
  bool ok = true;
  switch (c) {
    case EXP_THEN_RELU:
      ok = keep(pd_exp_(w2)) && keep(pd_relu_(w2)) && (y = pd_multiply(w2, x));
      break;
    case MUL_BEFORE_EXP:
      ok = (y = pd_multiply(w2, x)) && keep(pd_exp_(w2)) && keep(pd_add_(y, w2));
      break;
    case LOOP_BEFORE_EXP:
      ok = (y = times_three(x, w2)) && keep(pd_exp_(w2)) && keep(pd_add_(y, w2));
      break;
    case FILL: {
      pd_attrs a = {.f = {0.5}};
      ok = keep(pd_dispatch1(PD_OP_fill_, &w2, 1, &a)) && (y = pd_multiply(w2, x));
      break;
    }
  }
  if (ok) loss = pd_sum(y, NULL, 0, false);
  pd_tensor_release(w2), pd_tensor_release(y);
  return loss;
}

static void expect_refused(int c, const char *op, const char *eager_op) {
  pd_tensor *x, *w, *k, *g[2] = {NULL, NULL};
  pd_program *p = xw_program_begin(N, K3, &x, &w, &k);
  g_k = k;
  pd_tensor *loss = overwritten_loss(c, x, w), *wrt[2] = {x, w};
  if (!loss) fail_msg("%s: recording: %s", op, pd_last_error());
  pd_status st = pd_static_gradients(&loss, 1, wrt, 2, NULL, NULL, 0, g);
  assert_int_equal(pd_static_program_guard_end(), PD_OK);
  if (st == PD_OK) fail_msg("%s over an overwritten '%s': gradients succeeded", op, g_w2_name);
  const char *msg = pd_last_error();
  if (!strstr(msg, op) || !strstr(msg, g_w2_name) || !strstr(msg, "inplace op"))
    fail_msg("the error names neither %s nor '%s': %s", op, g_w2_name, msg);
  assert_null(g[0]);
  assert_null(g[1]);
  pd_tensor *ts[] = {x, w, k, loss};
  for (int i = 0; i < 4; i++) pd_tensor_release(ts[i]);
  pd_program_release(p);
  if (!eager_op) return;
  /* eager's version check refuses the same backward */
  pd_tensor *xv = pd_to_tensor(X0, PD_FLOAT64, 1, SHAPE(N)), *wv = pd_to_tensor(W0, PD_FLOAT64, 1, SHAPE(N));
  pd_tensor_set_stop_gradient(wv, false);
  pd_tensor *el = overwritten_loss(c, xv, wv), *eg = NULL;
  assert_non_null(el);
  assert_int_not_equal(pd_grad(&el, 1, &wv, 1, NULL, NULL, &eg), PD_OK);
  if (!strstr(pd_last_error(), eager_op)) fail_msg("eager: %s", pd_last_error());
  pd_tensor_release(el), pd_tensor_release(xv), pd_tensor_release(wv);
}

static void test_overwritten_value_refused(void **state) {
  (void)state;
  expect_refused(EXP_THEN_RELU, "exp_", "exp_");
  expect_refused(MUL_BEFORE_EXP, "multiply", "multiply");
  expect_refused(LOOP_BEFORE_EXP, "while", NULL);
  expect_refused(FILL, "fill_", NULL);
}

/* ---- a parameter trained through an inplace chain ------------------------------------ */
/* h = linear(x); add_(h, x); scale_(h, 0.5, 0.1); exp_(h); mean(h^2) */
static pd_tensor *chain_loss(pd_layer *l, pd_tensor *x) {
  pd_tensor *h = pd_layer_call1(l, x), *sq = NULL, *loss = NULL;
  if (h && keep(pd_add_(h, x)) && keep(scale_inplace(h, 0.5, 0.1)) && keep(pd_exp_(h))) sq = pd_square(h);
  if (sq) loss = pd_mean(sq, NULL, 0, false);
  pd_tensor_release(h), pd_tensor_release(sq);
  return loss;
}

static void test_minimize_through_inplace_chain(void **state) {
  (void)state;
  pd_set_default_dtype(PD_FLOAT64);
  pd_layer *ls = pd_nn_linear(3, 3, NULL), *le = pd_nn_linear(3, 3, NULL);
  pd_set_default_dtype(PD_FLOAT32);
  pd_named_tensors pe, pst;
  assert_int_equal(pd_layer_parameters(le, &pe), PD_OK);
  assert_int_equal(pd_layer_parameters(ls, &pst), PD_OK);
  for (int i = 0; i < pe.n; i++) { /* the same starting values */
    int64_t n = pd_tensor_numel(pst.tensors[i]);
    if (pd_tensor_copy_to(pst.tensors[i], pd_tensor_data(pe.tensors[i]), n, PD_FLOAT64) != n)
      fail_msg("%s", pd_last_error());
  }
  pd_optimizer *eo = pd_optimizer_sgd(0.2, pe.tensors, pe.n, NULL);
  pd_program *main = pd_static_program(), *startup = pd_static_program();
  assert_int_equal(pd_static_program_guard_begin(main, startup), PD_OK);
  pd_tensor *x = pd_static_data("x", 2, SHAPE(-1, 3), PD_FLOAT64);
  pd_tensor *loss = chain_loss(ls, x);
  assert_non_null(loss);
  pd_optimizer *so = pd_optimizer_sgd(0.2, NULL, 0, NULL);
  if (pd_optimizer_minimize(so, loss) != PD_OK) fail_msg("minimize: %s", pd_last_error());
  assert_int_equal(pd_static_program_guard_end(), PD_OK);

  pd_executor *exe = pd_static_executor(PD_CPU);
  pd_var_scope *scope = pd_static_scope();
  assert_int_equal(pd_executor_run(exe, startup, NULL, 0, NULL, 0, NULL, scope), PD_OK);
  for (int step = 0; step < 4; step++) {
    pd_tensor *xv = test_wave(5, 3, step), *sl = NULL;
    pd_static_feed feed = {"x", xv};
    if (pd_executor_run(exe, main, &feed, 1, &loss, 1, &sl, scope) != PD_OK) fail_msg("%s", pd_last_error());
    pd_tensor *el = chain_loss(le, xv);
    expect_close(sl, el, 1e-12, 0);
    assert_int_equal(pd_optimizer_minimize(eo, el), PD_OK);
    pd_optimizer_clear_grad(eo, true);
    pd_tensor_release(xv), pd_tensor_release(sl), pd_tensor_release(el);
  }
  for (int i = 0; i < pst.n; i++) { /* trained: equal, and moved from the start */
    pd_tensor *now = pd_var_scope_find_var(scope, pd_tensor_name(pst.tensors[i]));
    assert_non_null(now);
    expect_close(now, pe.tensors[i], 1e-12, 1e-14);
    if (same_bits(now, pst.tensors[i])) fail_msg("%s did not move", pd_tensor_name(pst.tensors[i]));
  }
  pd_tensor_release(x), pd_tensor_release(loss);
  pd_optimizer_release(eo), pd_optimizer_release(so);
  pd_named_tensors_free(&pe), pd_named_tensors_free(&pst);
  pd_var_scope_release(scope);
  pd_executor_release(exe);
  pd_program_release(main), pd_program_release(startup);
  pd_layer_release(ls), pd_layer_release(le);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(test_plain, close_program_guards),
      cmocka_unit_test_teardown(test_through_while, close_program_guards),
      cmocka_unit_test_teardown(test_overwritten_value_refused, close_program_guards),
      cmocka_unit_test_teardown(test_minimize_through_inplace_chain, close_program_guards),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
