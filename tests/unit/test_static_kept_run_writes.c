/* A while or conditional_block keeping its taped run for its grad op
 * while a later op writes, in place, a value that run holds: exp_ over a
 * view of the control op's result (a tensor, or an element of a result
 * array: the body wrote the output of tanh, whose grad rule reads it,
 * into the array), or over a view of one of its inputs between the
 * forward and its grad op. The grad op then differentiates the forward at
 * the values its inputs hold when it runs: the result's gradient is the
 * forward's, the written input's is taken at the written values (the
 * forward runs again, as before runs were kept). Each gradient equals
 * central differences in float64, lowered and interpreted. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "paddlec/static.h"
#include "paddlec/static_control.h"
#include "paddlec/tensor_array.h"
#include "control_grad_check.h"
#include "static/static_internal.h"
#include "test_util.h"

enum { N = 3, STEPS = 3 };

static pd_tensor *scalar(double v, pd_dtype dt) { return pd_full(1, SHAPE(1), v, dt); }

/* What the exp_ writes: the control op's result, an element of its
 * result array, or its input w2 (a copy of the fed w). */
typedef enum { WRITE_RESULT, WRITE_ELEMENT, WRITE_INPUT } write_at;

typedef struct ctx {
  pd_tensor *k, *x, *w, *arr; /* trip count; the values the body or branches read */
  write_at at;
} ctx;

static pd_tensor *below_k(void *user, pd_tensor *const *v, int n) {
  (void)n;
  return pd_less_than(v[0], ((ctx *)user)->k);
}

/* (i, s, a) -> (i + 1, tanh(s w), a with tanh(s w) written at i) */
static pd_status tanh_body(void *user, pd_tensor *const *v, int n, pd_tensor **next) {
  (void)n;
  pd_tensor *sw = pd_multiply(v[1], ((ctx *)user)->w);
  next[0] = pd_increment(v[0], 1);
  next[1] = sw ? pd_tanh(sw) : NULL;
  next[2] = next[1] ? pd_array_write(next[1], v[0], v[2]) : NULL;
  pd_tensor_release(sw);
  return next[0] && next[1] && next[2] ? PD_OK : pd_last_status();
}

/* The branch's result: r, or a new array holding r at 0 (WRITE_ELEMENT). */
static int branch_result(ctx *c, pd_tensor *r, pd_tensor **out) {
  if (c->at != WRITE_ELEMENT || !r) {
    out[0] = r;
    return r ? 1 : -1;
  }
  pd_tensor *zero = scalar(0, PD_INT64), *a = pd_create_array(PD_FLOAT64, NULL, 0);
  out[0] = zero && a ? pd_array_write(r, zero, a) : NULL;
  pd_tensor_release(zero);
  pd_tensor_release(a);
  pd_tensor_release(r);
  return out[0] ? 1 : -1;
}
static int tanh_branch(void *user, pd_tensor **out, int cap) {
  (void)cap;
  ctx *c = user;
  pd_tensor *xw = pd_multiply(c->x, c->w), *t = xw ? pd_tanh(xw) : NULL;
  pd_tensor_release(xw);
  return branch_result(c, t, out);
}
static int sum_branch(void *user, pd_tensor **out, int cap) {
  (void)cap;
  ctx *c = user;
  return branch_result(c, pd_add(c->x, c->w), out);
}

typedef struct prog {
  pd_program *main;
  pd_tensor *x, *w, *s, *w2, *zero, *one, *arr, *pred, *out[3], *r, *view, *e, *g[2];
} prog;

/* loop: three steps of tanh_body from (0, x, an empty array) (k fed);
 * else cond(p > 0, tanh(x w), x + w) (p fed, each branch's result in an
 * array for WRITE_ELEMENT), over w2 = w * 1. r: the result (the loop's s),
 * or its array's element 1 (the loop's) or 0 (the cond's); e = exp_ over
 * a view of r or of w2; g: the gradients of sum(r) for x and w. */
static void build(prog *pr, bool loop, write_at at) {
  memset(pr, 0, sizeof *pr);
  scalar_feed sf = loop ? (scalar_feed){"k", 0, PD_INT64} : (scalar_feed){"p", 0, PD_FLOAT64};
  pr->main = xw_program_begin(N, sf, &pr->x, &pr->w, &pr->s);
  pr->w2 = pd_scale(pr->w, 1.0, 0.0, true);
  pr->arr = pd_create_array(PD_FLOAT64, NULL, 0);
  ctx c = {pr->s, pr->x, pr->w2, pr->arr, at};
  if (loop) {
    pr->zero = scalar(0, PD_INT64);
    pr->one = scalar(1, PD_INT64);
    pd_tensor *vars[3] = {pr->zero, pr->x, pr->arr};
    assert_int_equal(pd_static_nn_while_loop(below_k, tanh_body, &c, vars, 3, pr->out), PD_OK);
    pr->r = at == WRITE_ELEMENT ? pd_array_read(pr->out[2], pr->one) : pd_tensor_retain(pr->out[1]);
  } else {
    pr->zero = scalar(0, PD_FLOAT64);
    pr->one = scalar(0, PD_INT64);
    pr->pred = pd_greater_than(pr->s, pr->zero);
    if (pd_static_nn_cond(pr->pred, tanh_branch, sum_branch, &c, &pr->out[0], 1) != 1)
      fail_msg("cond: %s", pd_last_error());
    pr->r = at == WRITE_ELEMENT ? pd_array_read(pr->out[0], pr->one) : pd_tensor_retain(pr->out[0]);
  }
  assert_non_null(pr->r);
  pr->view = pd_reshape(at == WRITE_INPUT ? pr->w2 : pr->r, 2, SHAPE(1, N)); /* the same values */
  pr->e = pd_exp_(pr->view);
  assert_non_null(pr->e);
  xw_program_end(pr->r, pr->x, pr->w, 1, pr->g);
}

static void free_prog(prog *pr) {
  pd_tensor *all[] = {pr->x,      pr->w,      pr->s,      pr->w2, pr->zero, pr->one, pr->arr,  pr->pred,
                      pr->out[0], pr->out[1], pr->out[2], pr->r,  pr->view, pr->e,   pr->g[0], pr->g[1]};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) pd_tensor_release(all[i]);
  pd_program_release(pr->main);
}

/* Element i of r in C: x after steps steps of tanh(s w) (the loop's s
 * after 3, its array's element 1 after 2, the cond's true branch after 1). */
static double ref_r(int steps, double x, double w) {
  for (int t = 0; t < steps; t++) x = tanh(x * w);
  return x;
}

static double ref_loss(void *user, const double *x, const double *w) {
  double sum = 0;
  for (int i = 0; i < N; i++) sum += ref_r(*(const int *)user, x[i], w[i]);
  return sum;
}

/* Two steps of the program (the first lowers it) fetching the gradients
 * and e: the gradients equal central differences of sum(r) at the values
 * the grad op reads (w, or exp(w) when the exp_ wrote w2). */
static void check(bool loop, write_at at) {
  prog pr;
  build(&pr, loop, at);
  scalar_feed sf = loop ? (scalar_feed){"k", STEPS, PD_INT64} : (scalar_feed){"p", 1, PD_FLOAT64};
  double x[N] = {0.3, -0.7, 0.5}, w[N] = {1.2, -0.4, 0.8}, w_read[N];
  for (int i = 0; i < N; i++) w_read[i] = at == WRITE_INPUT ? exp(w[i]) : w[i];
  int steps = !loop ? 1 : at == WRITE_ELEMENT ? 2 : STEPS;
  static const char *const where[] = {"result", "result's element", "input"};
  for (int interp = 0; interp < 2; interp++) {
    pd_executor *exe = pd_static_executor(PD_CPU);
    pd_executor_set_interpret(exe, interp);
    pd_tensor *fetch[3] = {pr.g[0], pr.g[1], pr.e};
    for (int step = 0; step < 2; step++) {
      double got[3 * N];
      char what[96];
      run_xw(exe, pr.main, x, w, N, sf, fetch, 3, got);
      snprintf(what, sizeof what, "%s, exp_ over its %s, %s, step %d", loop ? "while" : "cond", where[at],
               interp ? "interpreted" : "lowered", step);
      expect_central_differences(ref_loss, &steps, x, w_read, N, got, what);
      for (int i = 0; i < N; i++) { /* e: exp of what it wrote */
        double want = exp(at == WRITE_INPUT ? w[i] : ref_r(steps, x[i], w[i]));
        if (fabs(got[2 * N + i] - want) > 1e-12 * want)
          fail_msg("%s: e[%d] %.17g, expected %.17g", what, i, got[2 * N + i], want);
      }
    }
    pd_executor_release(exe);
  }
  free_prog(&pr);
}

static void test_while_result_written(void **state) {
  (void)state;
  check(true, WRITE_RESULT);
}
static void test_cond_result_written(void **state) {
  (void)state;
  check(false, WRITE_RESULT);
}
static void test_while_result_element_written(void **state) {
  (void)state;
  check(true, WRITE_ELEMENT);
}
static void test_while_input_written(void **state) {
  (void)state;
  check(true, WRITE_INPUT);
}
static void test_cond_input_written(void **state) {
  (void)state;
  check(false, WRITE_INPUT);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(test_while_result_written, close_program_guards),
      cmocka_unit_test_teardown(test_cond_result_written, close_program_guards),
      cmocka_unit_test_teardown(test_while_result_element_written, close_program_guards),
      cmocka_unit_test_teardown(test_while_input_written, close_program_guards),
      cmocka_unit_test_teardown(test_cond_input_written, close_program_guards),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
