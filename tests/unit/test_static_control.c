/* paddle.static.nn.cond and while_loop: forward values and gradients
 * through them against hand-derived values, and the errors for branches or
 * loop bodies that do not fit together. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "paddlec/static.h"
#include "paddlec/static_control.h"
#include "paddlec/tensor_array.h"
#include "core/alloc.h"
#include "static/control_plan.h"
#include "static/static_internal.h"
#include "test_util.h"

static pd_tensor *scalar(double v, pd_dtype dt) { return pd_full(1, SHAPE(1), v, dt); }

/* Runs p with one float64 feed "x" (and int64 "k" when k >= 0), fetching n. */
static void run(pd_program *p, bool interpret, double x, int64_t k, pd_tensor **fetch, int n, double *got) {
  pd_executor *exe = pd_static_executor(PD_CPU);
  pd_executor_set_interpret(exe, interpret);
  pd_var_scope *scope = pd_static_scope();
  pd_tensor *xv = scalar(x, PD_FLOAT64), *kv = scalar((double)k, PD_INT64), *out[8] = {0};
  pd_static_feed feed[2] = {{"x", xv}, {"k", kv}};
  if (pd_executor_run(exe, p, feed, k >= 0 ? 2 : 1, fetch, n, out, scope) != PD_OK)
    fail_msg("run: %s", pd_last_error());
  /* not interpreted: the control ops ran lowered, through sub-plans */
  if (!interpret && (!pd_executor_lowered_program(exe) || !pd_executor_control_stats(exe)))
    fail_msg("the program was not lowered");
  for (int i = 0; i < n; i++) {
    got[i] = pd_tensor_item(out[i]);
    pd_tensor_release(out[i]);
  }
  pd_tensor_release(xv);
  pd_tensor_release(kv);
  pd_var_scope_release(scope);
  pd_executor_release(exe);
}

/* ---- cond ---------------------------------------------------------------- */
static int square_fn(void *user, pd_tensor **out, int cap) {
  (void)cap;
  out[0] = pd_multiply(user, user);
  return out[0] ? 1 : -1;
}
static int neg_fn(void *user, pd_tensor **out, int cap) {
  (void)cap;
  out[0] = pd_neg(user);
  return out[0] ? 1 : -1;
}

/* A Program computing y = cond(x > 0, x * x, false_fn(x)) and dy/dx, for a
 * fed float64 x of shape [1]. */
typedef struct cond_prog {
  pd_program *main;
  pd_tensor *x, *zero, *pred, *y, *gx;
} cond_prog;

static void build_cond(cond_prog *c, pd_static_branch_fn false_fn) {
  c->main = pd_static_program();
  assert_int_equal(pd_static_program_guard_begin(c->main, NULL), PD_OK);
  c->x = pd_static_data("x", 1, SHAPE(1), PD_FLOAT64);
  pd_tensor_set_stop_gradient(c->x, false);
  c->zero = scalar(0, PD_FLOAT64);
  c->pred = pd_greater_than(c->x, c->zero);
  assert_int_equal(pd_static_nn_cond(c->pred, square_fn, false_fn, c->x, &c->y, 1), 1);
  assert_int_equal(pd_static_gradients(&c->y, 1, &c->x, 1, NULL, NULL, 0, &c->gx), PD_OK);
  assert_int_equal(pd_static_program_guard_end(), PD_OK);
}

static void free_cond(cond_prog *c) {
  pd_tensor *all[] = {c->x, c->zero, c->pred, c->y, c->gx};
  for (int i = 0; i < 5; i++) pd_tensor_release(all[i]);
  pd_program_release(c->main);
}

/* y = cond(x > 0, x * x, -x): at 3, y = 9 and dy/dx = 6; at -2, y = 2 and
 * dy/dx = -1 (the gradient flows into the branch taken only). */
static void test_cond_value_and_gradient(void **state) {
  (void)state;
  cond_prog c;
  build_cond(&c, neg_fn);
  pd_tensor *fetch[2] = {c.y, c.gx};
  double got[2];
  for (int interp = 0; interp < 2; interp++) {
    run(c.main, interp, 3.0, -1, fetch, 2, got);
    assert_true(got[0] == 9.0 && got[1] == 6.0);
    run(c.main, interp, -2.0, -1, fetch, 2, got);
    assert_true(got[0] == 2.0 && got[1] == -1.0);
  }
  free_cond(&c);
}

static int triple_fn(void *user, pd_tensor **out, int cap) {
  (void)cap;
  out[0] = pd_scale(user, 3.0, 0.0, true);
  return out[0] ? 1 : -1;
}

/* case([(x < 0, -x), (x < 10, x * x)], default 3x), the fluid Switch: at -2,
 * 3 and 20 the values are 2, 9 and 60, the gradients -1, 6 and 3; without
 * the default the last pair's fn is it: 400 and 40 at 20. */
static void test_case_value_and_gradient(void **state) {
  (void)state;
  pd_program *main = pd_static_program();
  assert_int_equal(pd_static_program_guard_begin(main, NULL), PD_OK);
  pd_tensor *x = pd_static_data("x", 1, SHAPE(1), PD_FLOAT64);
  pd_tensor_set_stop_gradient(x, false);
  pd_tensor *zero = scalar(0, PD_FLOAT64), *ten = scalar(10, PD_FLOAT64);
  pd_tensor *preds[2] = {pd_less_than(x, zero), pd_less_than(x, ten)};
  const pd_static_branch_fn fns[2] = {neg_fn, square_fn};
  pd_tensor *y[2] = {0}, *g[2] = {0};
  assert_int_equal(pd_static_nn_case(preds, fns, 2, triple_fn, x, &y[0], 1), 1);
  assert_int_equal(pd_static_nn_case(preds, fns, 2, NULL, x, &y[1], 1), 1);
  for (int i = 0; i < 2; i++)
    assert_int_equal(pd_static_gradients(&y[i], 1, &x, 1, NULL, NULL, 0, &g[i]), PD_OK);
  assert_int_equal(pd_static_program_guard_end(), PD_OK);
  pd_tensor *fetch[4] = {y[0], g[0], y[1], g[1]};
  double got[4];
  run(main, false, -2.0, -1, fetch, 4, got);
  assert_true(got[0] == 2.0 && got[1] == -1.0 && got[2] == 2.0 && got[3] == -1.0);
  run(main, false, 3.0, -1, fetch, 4, got);
  assert_true(got[0] == 9.0 && got[1] == 6.0 && got[2] == 9.0 && got[3] == 6.0);
  run(main, false, 20.0, -1, fetch, 4, got);
  assert_true(got[0] == 60.0 && got[1] == 3.0 && got[2] == 400.0 && got[3] == 40.0);
  pd_tensor_release(x);
  pd_tensor_release(zero);
  pd_tensor_release(ten);
  for (int i = 0; i < 2; i++) {
    pd_tensor_release(preds[i]);
    pd_tensor_release(y[i]);
    pd_tensor_release(g[i]);
  }
  pd_program_release(main);
}

/* Only the branch taken runs: the false branch reads index 3 of an empty
 * tensor array, which fails when it runs. At x = 3 the run gives 9; at
 * x = -2 it fails naming the read, in the lowered and the interpreted run. */
static int failing_fn(void *user, pd_tensor **out, int cap) {
  (void)cap;
  pd_tensor *arr = pd_create_array(PD_FLOAT64, NULL, 0), *i = pd_full(1, SHAPE(1), 3, PD_INT64);
  pd_tensor *e = pd_array_read(arr, i);
  out[0] = e ? pd_add(e, user) : NULL;
  pd_tensor_release(arr);
  pd_tensor_release(i);
  pd_tensor_release(e);
  return out[0] ? 1 : -1;
}

static void test_cond_runs_the_branch_taken_only(void **state) {
  (void)state;
  cond_prog c;
  build_cond(&c, failing_fn);
  pd_program *main = c.main;
  assert_int_equal(pd_program_num_blocks(main), 3); /* a block per branch */
  pd_static_block *gb = pd_program_global_block(main);
  bool has_cond = false;
  for (int k = 0; k < pd_static_block_num_ops(gb); k++)
    has_cond |= strcmp(pd_static_block_op_type(gb, k), "conditional_block") == 0;
  assert_true(has_cond);
  pd_tensor *fetch[2] = {c.y, c.gx};
  double got[2];
  for (int interp = 0; interp < 2; interp++) {
    run(main, interp, 3.0, -1, fetch, 2, got);
    assert_true(got[0] == 9.0 && got[1] == 6.0);
    pd_executor *exe = pd_static_executor(PD_CPU);
    pd_executor_set_interpret(exe, interp);
    pd_tensor *xv = scalar(-2.0, PD_FLOAT64), *out[2] = {0};
    pd_static_feed feed[1] = {{"x", xv}};
    assert_int_not_equal(pd_executor_run(exe, main, feed, 1, fetch, 1, out, NULL), PD_OK);
    assert_non_null(strstr(pd_last_error(), "index 3 of an array of length 0 is out of range"));
    pd_tensor_release(xv);
    pd_executor_release(exe);
  }
  /* from its Program file: the same value and gradient */
  size_t size = 0;
  char *text = pd_static_serialize_program(main, &size);
  pd_program *back = text ? pd_static_deserialize_program(text, size) : NULL;
  free(text);
  if (!back) fail_msg("%s", pd_last_error());
  pd_tensor *bf[2];
  for (int i = 0; i < 2; i++)
    assert_non_null(bf[i] = pd_static_block_var(pd_program_global_block(back), pd_tensor_name(fetch[i])));
  run(back, false, 3.0, -1, bf, 2, got);
  assert_true(got[0] == 9.0 && got[1] == 6.0);
  pd_program_release(back);
  free_cond(&c);
}

/* The same with counters: each branch calls a py_func that counts its
 * calls; a run at x = 3 calls the true branch's once and the false
 * branch's never, a run at x = -2 the other way round. */
static int calls[2];
static pd_status count_call(void *user, pd_tensor *const *in, int n_in, pd_tensor **out, int n_out) {
  (void)n_in;
  (void)n_out;
  calls[*(int *)user]++;
  out[0] = pd_assign(in[0]);
  return out[0] ? PD_OK : pd_last_status();
}
static int counted(int which, pd_tensor *x, pd_tensor **out) {
  static int ids[2] = {0, 1};
  pd_input_spec spec = {.name = "counted", .ndim = 1, .shape = {1}, .dtype = PD_FLOAT64};
  if (pd_static_py_func(count_call, &ids[which], &x, 1, &spec, 1, out, NULL) != PD_OK) return -1;
  return 1;
}
static int count_true(void *user, pd_tensor **out, int cap) {
  (void)cap;
  return counted(0, user, out);
}
static int count_false(void *user, pd_tensor **out, int cap) {
  (void)cap;
  return counted(1, user, out);
}

static void test_cond_counts_calls(void **state) {
  (void)state;
  pd_program *main = pd_static_program();
  assert_int_equal(pd_static_program_guard_begin(main, NULL), PD_OK);
  pd_tensor *x = pd_static_data("x", 1, SHAPE(1), PD_FLOAT64);
  pd_tensor *zero = scalar(0, PD_FLOAT64), *pred = pd_greater_than(x, zero), *y = NULL;
  assert_int_equal(pd_static_nn_cond(pred, count_true, count_false, x, &y, 1), 1);
  assert_int_equal(pd_static_program_guard_end(), PD_OK);
  calls[0] = calls[1] = 0;
  double got;
  run(main, false, 3.0, -1, &y, 1, &got);
  assert_true(got == 3.0 && calls[0] == 1 && calls[1] == 0);
  run(main, true, -2.0, -1, &y, 1, &got);
  assert_true(got == -2.0 && calls[0] == 1 && calls[1] == 1);
  pd_tensor_release(x);
  pd_tensor_release(zero);
  pd_tensor_release(pred);
  pd_tensor_release(y);
  pd_program_release(main);
}

/* A cond capturing w, inside a while_loop: four times s = cond(s > 5,
 * s * w, 3 s) from s = x = 1 with w = 0.5 gives 3, 9, 4.5, 13.5; the
 * gradient is the product of the factors taken, ds/dx = 3 * 3 * 0.5 * 3
 * = 13.5, and ds/dw = s / w over the one step that took w: 27. */
typedef struct step_ctx {
  pd_tensor *w, *s;
} step_ctx;
static int times_w(void *user, pd_tensor **out, int cap) {
  (void)cap;
  step_ctx *c = user;
  out[0] = pd_multiply(c->s, c->w);
  return out[0] ? 1 : -1;
}
static int times_3(void *user, pd_tensor **out, int cap) {
  (void)cap;
  out[0] = pd_scale(((step_ctx *)user)->s, 3.0, 0.0, true);
  return out[0] ? 1 : -1;
}
static pd_tensor *below_4(void *user, pd_tensor *const *v, int n) {
  (void)n;
  (void)user;
  pd_tensor *four = scalar(4, PD_INT64), *c = pd_less_than(v[0], four);
  pd_tensor_release(four);
  return c;
}
static pd_status cond_body(void *user, pd_tensor *const *v, int n, pd_tensor **next) {
  (void)n;
  step_ctx c = {((step_ctx *)user)->w, v[1]};
  pd_tensor *five = scalar(5, PD_FLOAT64), *big = pd_greater_than(v[1], five);
  next[0] = pd_increment(v[0], 1);
  int k = pd_static_nn_cond(big, times_w, times_3, &c, &next[1], 1);
  pd_tensor_release(five);
  pd_tensor_release(big);
  return k == 1 && next[0] ? PD_OK : pd_last_status();
}

static void test_cond_inside_while_loop(void **state) {
  (void)state;
  pd_program *main = pd_static_program();
  assert_int_equal(pd_static_program_guard_begin(main, NULL), PD_OK);
  pd_tensor *x = pd_static_data("x", 1, SHAPE(1), PD_FLOAT64);
  pd_tensor_set_stop_gradient(x, false);
  pd_tensor *half = scalar(-0.5, PD_FLOAT64), *w = pd_add(x, half); /* 0.5 at x = 1 */
  pd_tensor *i0 = scalar(0, PD_INT64), *vars[2] = {i0, x}, *out[2] = {0};
  step_ctx c = {w, NULL};
  assert_int_equal(pd_static_nn_while_loop(below_4, cond_body, &c, vars, 2, out), PD_OK);
  pd_tensor *gs[2] = {0}, *wrt[2] = {x, w};
  assert_int_equal(pd_static_gradients(&out[1], 1, wrt, 2, NULL, NULL, 0, gs), PD_OK);
  assert_int_equal(pd_static_program_guard_end(), PD_OK);
  pd_tensor *fetch[3] = {out[1], gs[0], gs[1]};
  double got[3];
  run(main, false, 1.0, -1, fetch, 3, got);
  /* ds/dx counts w's own dependence on x too: 13.5 + 27 */
  assert_true(got[0] == 13.5 && got[1] == 13.5 + 27.0 && got[2] == 27.0);
  pd_tensor_release(x);
  pd_tensor_release(half);
  pd_tensor_release(w);
  pd_tensor_release(i0);
  for (int i = 0; i < 2; i++) {
    pd_tensor_release(out[i]);
    pd_tensor_release(gs[i]);
  }
  pd_program_release(main);
}

/* ---- while_loop ------------------------------------------------------------ */
typedef struct loop_ctx {
  pd_tensor *k; /* trip count (int64 Variable) */
  pd_tensor *w; /* a captured float64 Variable, or NULL */
} loop_ctx;

static pd_tensor *below_k(void *user, pd_tensor *const *v, int n) {
  (void)n;
  return pd_less_than(v[0], ((loop_ctx *)user)->k);
}
/* (i, x) -> (i + 1, x * x), or (i + 1, x * w) with a captured w */
static pd_status square_body(void *user, pd_tensor *const *v, int n, pd_tensor **next) {
  (void)n;
  loop_ctx *c = user;
  next[0] = pd_increment(v[0], 1);
  next[1] = pd_multiply(v[1], c->w ? c->w : v[1]);
  return next[0] && next[1] ? PD_OK : pd_last_status();
}

/* x^(2^k) by squaring k times: at x = 1.5, k = 3 that is 1.5^8 and the
 * gradient 8 * 1.5^7; k = 2 gives 1.5^4 and 4 * 1.5^3 (k is fed: the trip
 * count is known only when the program runs). */
static void test_while_loop_repeated_squaring(void **state) {
  (void)state;
  pd_program *main = pd_static_program();
  assert_int_equal(pd_static_program_guard_begin(main, NULL), PD_OK);
  pd_tensor *x = pd_static_data("x", 1, SHAPE(1), PD_FLOAT64);
  pd_tensor *k = pd_static_data("k", 1, SHAPE(1), PD_INT64);
  pd_tensor_set_stop_gradient(x, false);
  pd_tensor *i0 = scalar(0, PD_INT64), *vars[2] = {i0, x}, *out[2] = {0}, *gx = NULL;
  loop_ctx c = {k, NULL};
  assert_int_equal(pd_static_nn_while_loop(below_k, square_body, &c, vars, 2, out), PD_OK);
  assert_int_equal(pd_static_gradients(&out[1], 1, &x, 1, NULL, NULL, 0, &gx), PD_OK);
  assert_int_equal(pd_static_program_guard_end(), PD_OK);
  assert_int_equal(pd_program_num_blocks(main), 2);
  pd_tensor *fetch[3] = {out[0], out[1], gx};
  double got[3];
  run(main, false, 1.5, 3, fetch, 3, got);
  assert_true(got[0] == 3.0);
  assert_true(fabs(got[1] - pow(1.5, 8)) < 1e-12);
  assert_true(fabs(got[2] - 8 * pow(1.5, 7)) < 1e-12);
  run(main, true, 1.5, 2, fetch, 3, got);
  assert_true(got[0] == 2.0 && got[1] == pow(1.5, 4) && got[2] == 4 * pow(1.5, 3));
  run(main, true, 1.5, 0, fetch, 3, got); /* no iteration: y = x, dy/dx = 1 */
  assert_true(got[0] == 0.0 && got[1] == 1.5 && got[2] == 1.0);
  /* a clone runs the same loop and its gradient */
  pd_program *copy = pd_program_clone(main, false);
  run(copy, false, 1.5, 3, fetch, 3, got);
  assert_true(got[1] == pow(1.5, 8) && got[2] == 8 * pow(1.5, 7));
  pd_program_release(copy);
  /* its Program file holds the loop and its grad op: read back, it runs the same */
  size_t size = 0;
  char *text = pd_static_serialize_program(main, &size);
  assert_non_null(text);
  assert_non_null(strstr(text, "\"version\":2"));
  pd_program *back = pd_static_deserialize_program(text, size);
  free(text);
  if (!back) fail_msg("%s", pd_last_error());
  pd_tensor *bf[3];
  for (int i = 0; i < 3; i++)
    assert_non_null(bf[i] = pd_static_block_var(pd_program_global_block(back), pd_tensor_name(fetch[i])));
  run(back, false, 1.5, 3, bf, 3, got);
  assert_true(got[0] == 3.0 && got[1] == pow(1.5, 8) && got[2] == 8 * pow(1.5, 7));
  pd_program_release(back);
  pd_tensor_release(x);
  pd_tensor_release(k);
  pd_tensor_release(i0);
  for (int i = 0; i < 2; i++) pd_tensor_release(out[i]);
  pd_tensor_release(gx);
  pd_program_release(main);
}

/* (i, x) -> (i + 1, x * tanh(x) + x): temporaries the size of x */
static pd_status tanh_body(void *user, pd_tensor *const *v, int n, pd_tensor **next) {
  (void)n;
  (void)user;
  pd_tensor *t = pd_tanh(v[1]), *m = t ? pd_multiply(t, v[1]) : NULL;
  next[0] = pd_increment(v[0], 1);
  next[1] = m ? pd_add(m, v[1]) : NULL;
  pd_tensor_release(t);
  pd_tensor_release(m);
  return next[0] && next[1] ? PD_OK : pd_last_status();
}

/* Runs loop program p once with x (64 values from x0) and k fed, into got
 * (64 values); returns the allocations the run counted. */
static size_t run_loop_counted(pd_executor *exe, pd_program *p, pd_var_scope *scope, pd_tensor **fetch,
                               int64_t k, double *got) {
  pd_tensor *xv = pd_linspace(-1.0, 1.0, 64, PD_FLOAT64), *kv = scalar((double)k, PD_INT64), *out[1] = {0};
  pd_static_feed feed[2] = {{"x", xv}, {"k", kv}};
  atomic_store(&pd_g_alloc_counting, true);
  size_t before = atomic_load(&pd_g_alloc_calls);
  pd_status st = pd_executor_run(exe, p, feed, 2, fetch, 1, out, scope);
  size_t calls = atomic_load(&pd_g_alloc_calls) - before;
  atomic_store(&pd_g_alloc_counting, false); /* before a failure leaves the test */
  if (st != PD_OK) fail_msg("run: %s", pd_last_error());
  memcpy(got, pd_tensor_data(out[0]), 64 * sizeof(double));
  pd_tensor_release(out[0]);
  pd_tensor_release(xv);
  pd_tensor_release(kv);
  return calls;
}

/* (i, x) -> (i + 1, cond(i < 2, x * w, 3 x)): a branch inside the body */
static pd_tensor *g_two;
static pd_status cond_tanh_body(void *user, pd_tensor *const *v, int n, pd_tensor **next) {
  (void)n;
  step_ctx c = {((loop_ctx *)user)->w, v[1]};
  pd_tensor *small = pd_less_than(v[0], g_two);
  next[0] = pd_increment(v[0], 1);
  int k = small ? pd_static_nn_cond(small, times_w, times_3, &c, &next[1], 1) : -1;
  pd_tensor_release(small);
  return k == 1 && next[0] ? PD_OK : pd_last_status();
}

/* Runs the [64] loop (with_cond: a cond in its body) lowered and
 * interpreted: see the test below. */
static void check_loop_allocates_nothing_per_iteration(bool with_cond) {
  pd_program *main = pd_static_program();
  assert_int_equal(pd_static_program_guard_begin(main, NULL), PD_OK);
  pd_tensor *x = pd_static_data("x", 1, SHAPE(64), PD_FLOAT64);
  pd_tensor *k = pd_static_data("k", 1, SHAPE(1), PD_INT64);
  pd_tensor *i0 = scalar(0, PD_INT64), *vars[2] = {i0, x}, *out[2] = {0}, *w = scalar(0.5, PD_FLOAT64);
  g_two = scalar(2, PD_INT64);
  loop_ctx c = {k, w};
  assert_int_equal(pd_static_nn_while_loop(below_k, with_cond ? cond_tanh_body : tanh_body, &c, vars, 2, out),
                   PD_OK);
  assert_int_equal(pd_static_program_guard_end(), PD_OK);
  pd_executor *exe = pd_static_executor(PD_CPU), *ref = pd_static_executor(PD_CPU);
  pd_executor_set_interpret(ref, true);
  pd_var_scope *scope = pd_static_scope();
  double got[64], want[64];
  run_loop_counted(exe, main, scope, &out[1], 3, got); /* lowers, shows the body's shapes */
  const pd_program *low = pd_executor_lowered_program(exe);
  assert_non_null(low);
  bool has_while = false;
  for (int j = 0; j < low->blocks[0]->n_ops; j++)
    has_while |= strcmp(low->blocks[0]->ops[j]->type, "while") == 0;
  assert_true(has_while);
  const pd_ctl_stats *st = pd_executor_control_stats(exe);
  assert_non_null(st);
  int plans = with_cond ? 3 : 1; /* the body, and both branches (3 steps take both) */
  assert_int_equal(st->sub_plans, plans);
  assert_int_equal(st->arenas, plans);
  assert_true(st->arena_bytes >= 64 * sizeof(double));
  run_loop_counted(exe, main, scope, &out[1], 5, got); /* runs in the arena, makes the loop buffers */
  int64_t into0 = st->into_runs;
  size_t a20 = run_loop_counted(exe, main, scope, &out[1], 20, got);
  run_loop_counted(ref, main, scope, &out[1], 20, want);
  assert_memory_equal(got, want, sizeof got);
  size_t a60 = run_loop_counted(exe, main, scope, &out[1], 60, got);
  run_loop_counted(ref, main, scope, &out[1], 60, want);
  assert_memory_equal(got, want, sizeof got);
  if (a20 != a60) fail_msg("20 iterations counted %zu allocations, 60 counted %zu", a20, a60);
  size_t i20 = run_loop_counted(ref, main, scope, &out[1], 20, want),
         i60 = run_loop_counted(ref, main, scope, &out[1], 60, want);
  assert_true(i60 > i20 + 40); /* interpreted, every iteration allocates */
  assert_true(pd_executor_control_stats(exe)->into_runs > into0 + 80 * 3);
  assert_int_equal(pd_executor_control_stats(exe)->arenas, plans); /* planned once, cached with the plan */
  pd_executor_set_arena(exe, false); /* no arenas: the sub-plans allocate as they go, the same bits */
  size_t n20 = run_loop_counted(exe, main, scope, &out[1], 20, got);
  run_loop_counted(exe, main, scope, &out[1], 20, got);
  assert_int_equal(pd_executor_control_stats(exe)->arenas, 0);
  run_loop_counted(ref, main, scope, &out[1], 20, want);
  assert_memory_equal(got, want, sizeof got);
  assert_true(n20 > a20 + 20);
  pd_var_scope_release(scope);
  pd_executor_release(exe);
  pd_executor_release(ref);
  pd_tensor_release(x);
  pd_tensor_release(k);
  pd_tensor_release(i0);
  pd_tensor_release(w);
  pd_tensor_release(g_two);
  for (int i = 0; i < 2; i++) pd_tensor_release(out[i]);
  pd_program_release(main);
}

/* A while_loop over a [64] value runs lowered: its body is a sub-plan with
 * an arena, so after the first run an iteration allocates nothing (20 and
 * 60 iterations count the same allocations), and every value equals the
 * interpreted run's bit for bit; with a cond in the body too (its branches'
 * sub-plans have arenas, its results reuse one buffer). */
static void test_while_loop_lowered_allocates_nothing_per_iteration(void **state) {
  (void)state;
  check_loop_allocates_nothing_per_iteration(false);
  check_loop_allocates_nothing_per_iteration(true);
}

/* s_{t+1} = s_t * w with w read from outside the loop: after k = 3 steps
 * from s = x = 2, w = 1.5: s = x w^3, ds/dx = w^3, ds/dw = 3 x w^2. */
static void test_while_loop_gradient_of_captured_variable(void **state) {
  (void)state;
  pd_program *main = pd_static_program();
  assert_int_equal(pd_static_program_guard_begin(main, NULL), PD_OK);
  pd_tensor *x = pd_static_data("x", 1, SHAPE(1), PD_FLOAT64);
  pd_tensor_set_stop_gradient(x, false);
  pd_tensor *half = scalar(0.5, PD_FLOAT64), *w = pd_add(x, half); /* w = x + 0.5: 2.5 at x = 2 */
  pd_tensor *k = scalar(3, PD_INT64), *i0 = scalar(0, PD_INT64), *vars[2] = {i0, x}, *out[2] = {0};
  loop_ctx c = {k, w};
  assert_int_equal(pd_static_nn_while_loop(below_k, square_body, &c, vars, 2, out), PD_OK);
  pd_tensor *gs[2] = {0}, *wrt[2] = {x, w};
  assert_int_equal(pd_static_gradients(&out[1], 1, wrt, 2, NULL, NULL, 0, gs), PD_OK);
  assert_int_equal(pd_static_program_guard_end(), PD_OK);
  pd_tensor *fetch[3] = {out[1], gs[0], gs[1]};
  double got[3];
  run(main, false, 2.0, -1, fetch, 3, got);
  /* s = x w^3 with w = x + 0.5: ds/dw (w held) = 3 x w^2; ds/dx counts
   * both paths: w^3 + 3 x w^2 */
  double xv = 2.0, wv = 2.5;
  assert_true(fabs(got[0] - xv * pow(wv, 3)) < 1e-12);
  assert_true(fabs(got[1] - (pow(wv, 3) + 3 * xv * wv * wv)) < 1e-12);
  assert_true(fabs(got[2] - 3 * xv * wv * wv) < 1e-12);
  pd_tensor_release(x);
  pd_tensor_release(half);
  pd_tensor_release(w);
  pd_tensor_release(k);
  pd_tensor_release(i0);
  for (int i = 0; i < 2; i++) {
    pd_tensor_release(out[i]);
    pd_tensor_release(gs[i]);
  }
  pd_program_release(main);
}

/* A counter loop: i = 0; acc = 0; while i < 5: i = increment(i); acc += i
 * gives i = 5, acc = 15. */
static pd_status count_body(void *user, pd_tensor *const *v, int n, pd_tensor **next) {
  (void)user;
  (void)n;
  next[0] = pd_increment(v[0], 1);
  next[1] = pd_add(v[1], next[0]);
  return next[0] && next[1] ? PD_OK : pd_last_status();
}

static void test_while_loop_counter(void **state) {
  (void)state;
  pd_program *main = pd_static_program();
  assert_int_equal(pd_static_program_guard_begin(main, NULL), PD_OK);
  pd_tensor *x = pd_static_data("x", 1, SHAPE(1), PD_FLOAT64); /* unused: the run feeds it */
  pd_tensor *k = scalar(5, PD_INT64), *i0 = scalar(0, PD_INT64), *a0 = scalar(0, PD_INT64);
  pd_tensor *vars[2] = {i0, a0}, *out[2] = {0};
  loop_ctx c = {k, NULL};
  assert_int_equal(pd_static_nn_while_loop(below_k, count_body, &c, vars, 2, out), PD_OK);
  assert_int_equal(pd_static_program_guard_end(), PD_OK);
  double got[2];
  run(main, false, 0, -1, out, 2, got);
  assert_true(got[0] == 5.0 && got[1] == 15.0);
  pd_tensor_release(x);
  pd_tensor_release(k);
  pd_tensor_release(i0);
  pd_tensor_release(a0);
  for (int i = 0; i < 2; i++) pd_tensor_release(out[i]);
  pd_program_release(main);
}

/* ---- bad input ----------------------------------------------------------------- */
static int two_fn(void *user, pd_tensor **out, int cap) {
  (void)cap;
  out[0] = pd_neg(user);
  out[1] = pd_neg(user);
  return 2;
}
static int int_fn(void *user, pd_tensor **out, int cap) {
  (void)cap;
  out[0] = pd_cast(user, PD_INT64);
  return 1;
}
static int wide_fn(void *user, pd_tensor **out, int cap) {
  (void)cap;
  out[0] = pd_concat((pd_tensor *[]){user, user}, 2, 0);
  return 1;
}
static pd_tensor *float_cond(void *user, pd_tensor *const *v, int n) {
  (void)user;
  (void)n;
  return pd_neg(v[1]);
}
static pd_status widen_body(void *user, pd_tensor *const *v, int n, pd_tensor **next) {
  (void)user;
  (void)n;
  next[0] = pd_increment(v[0], 1);
  next[1] = pd_concat((pd_tensor *[]){v[1], v[1]}, 2, 0);
  return PD_OK;
}

static void expect_fails(int rc, const char *part) {
  assert_true(rc < 0);
  if (!strstr(pd_last_error(), part)) fail_msg("error '%s' lacks '%s'", pd_last_error(), part);
}

static void test_errors_name_what_differs(void **state) {
  (void)state;
  pd_program *main = pd_static_program();
  assert_int_equal(pd_static_program_guard_begin(main, NULL), PD_OK);
  pd_tensor *x = pd_static_data("x", 1, SHAPE(1), PD_FLOAT64);
  pd_tensor *zero = scalar(0, PD_FLOAT64), *pred = pd_greater_than(x, zero), *y[2] = {0};
  expect_fails(pd_static_nn_cond(pred, two_fn, neg_fn, x, y, 2), "true_fn returns 2 outputs, false_fn 1");
  expect_fails(pd_static_nn_cond(pred, int_fn, neg_fn, x, y, 2), "output 0 is int64 in true_fn, float64");
  expect_fails(pd_static_nn_cond(pred, wide_fn, neg_fn, x, y, 2), "output 0 has shape [2] in true_fn, [1]");
  expect_fails(pd_static_nn_cond(x, square_fn, neg_fn, x, y, 2), "pred must be a bool scalar");
  const pd_static_branch_fn fns[2] = {neg_fn, square_fn};
  pd_tensor *preds[2] = {pred, x};
  expect_fails(pd_static_nn_case(preds, fns, 1, two_fn, x, y, 2), "fn 0 returns 1 outputs, default 2");
  expect_fails(pd_static_nn_case(preds, fns, 2, NULL, x, y, 2), "case: pred 1 must be a bool scalar");
  pd_tensor *k = scalar(3, PD_INT64), *i0 = scalar(0, PD_INT64), *vars[2] = {i0, x};
  loop_ctx c = {k, NULL};
  expect_fails(pd_static_nn_while_loop(float_cond, square_body, &c, vars, 2, y), "must be a bool scalar");
  expect_fails(pd_static_nn_while_loop(below_k, widen_body, &c, vars, 2, y),
               "loop variable 1 of shape [1] into shape [2]");
  assert_int_equal(pd_static_program_guard_end(), PD_OK);
  pd_tensor_release(x);
  pd_tensor_release(zero);
  pd_tensor_release(pred);
  pd_tensor_release(k);
  pd_tensor_release(i0);
  pd_program_release(main);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cond_value_and_gradient),
      cmocka_unit_test(test_case_value_and_gradient),
      cmocka_unit_test(test_cond_runs_the_branch_taken_only),
      cmocka_unit_test(test_cond_counts_calls),
      cmocka_unit_test(test_cond_inside_while_loop),
      cmocka_unit_test(test_while_loop_repeated_squaring),
      cmocka_unit_test(test_while_loop_lowered_allocates_nothing_per_iteration),
      cmocka_unit_test(test_while_loop_gradient_of_captured_variable),
      cmocka_unit_test(test_while_loop_counter),
      cmocka_unit_test(test_errors_name_what_differs),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
