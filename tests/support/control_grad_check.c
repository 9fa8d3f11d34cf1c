/* What the tests of the control ops' grad ops share (control_grad_check.h). */
#include "control_grad_check.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "static/static_internal.h"
#include "test_util.h"

static pd_status counted(void *user, pd_tensor *const *in, int n_in, pd_tensor **out, int n_out) {
  (void)n_in, (void)n_out;
  call_count *calls = user;
  calls->forward++;
  calls->taped += !pd_tensor_stop_gradient(in[0]);
  out[0] = pd_assign(in[0]);
  return out[0] ? PD_OK : pd_last_status();
}

static pd_status counted_grad(void *user, pd_tensor *const *in, int n_in, pd_tensor **out, int n_out) {
  (void)n_in, (void)n_out;
  ((call_count *)user)->backward++;
  out[0] = pd_assign(in[2]); /* in: x, out, d out */
  return out[0] ? PD_OK : pd_last_status();
}

pd_tensor *record_counted(call_count *calls, pd_tensor *x) {
  pd_input_spec spec = {.name = "counted", .ndim = 1, .shape = {1}, .dtype = PD_FLOAT64};
  pd_tensor *y = NULL;
  return pd_static_py_func(counted, calls, &x, 1, &spec, 1, &y, counted_grad) == PD_OK ? y : NULL;
}

pd_program *xw_program_begin(int n, scalar_feed s, pd_tensor **x, pd_tensor **w, pd_tensor **sv) {
  pd_program *p = pd_static_program();
  assert_int_equal(pd_static_program_guard_begin(p, NULL), PD_OK);
  *x = pd_static_data("x", 1, SHAPE(n), PD_FLOAT64);
  *w = pd_static_data("w", 1, SHAPE(n), PD_FLOAT64);
  *sv = pd_static_data(s.name, 1, SHAPE(1), s.dtype);
  pd_tensor_set_stop_gradient(*x, false);
  pd_tensor_set_stop_gradient(*w, false);
  return p;
}

void xw_program_end(pd_tensor *out, pd_tensor *x, pd_tensor *w, int n_grads, pd_tensor **g) {
  pd_tensor *wrt[2] = {x, w};
  if (n_grads == 1) assert_int_equal(pd_static_gradients(&out, 1, wrt, 2, NULL, NULL, 0, g), PD_OK);
  for (int i = 0; n_grads == 2 && i < 2; i++)
    assert_int_equal(pd_static_gradients(&out, 1, &wrt[i], 1, NULL, NULL, 0, &g[i]), PD_OK);
  assert_int_equal(pd_static_program_guard_end(), PD_OK);
}

/* run_xw's run: its status (the fetches read or released either way). */
static pd_status try_run_xw(pd_executor *exe, pd_program *p, const double *x, const double *w, int n,
                            scalar_feed s, pd_tensor *const *fetch, int n_fetch, double *got) {
  pd_tensor *xv = pd_to_tensor(x, PD_FLOAT64, 1, SHAPE(n)), *wv = pd_to_tensor(w, PD_FLOAT64, 1, SHAPE(n)),
            *sv = pd_full(1, SHAPE(1), s.value, s.dtype);
  pd_static_feed feed[3] = {{"x", xv}, {"w", wv}, {s.name, sv}};
  pd_tensor *out[4] = {0};
  pd_status st = n_fetch <= 4 ? pd_executor_run(exe, p, feed, 3, fetch, n_fetch, out, NULL)
                              : pd_set_error(PD_ERR_INVALID, "run_xw: %d fetches, at most 4", n_fetch);
  for (int i = 0; i < n_fetch && st == PD_OK; i++) {
    if (got) memcpy(got + i * n, pd_tensor_data(out[i]), (size_t)n * sizeof(double));
    pd_tensor_release(out[i]);
  }
  pd_tensor_release(xv);
  pd_tensor_release(wv);
  pd_tensor_release(sv);
  return st;
}

void run_xw(pd_executor *exe, pd_program *p, const double *x, const double *w, int n, scalar_feed s,
            pd_tensor *const *fetch, int n_fetch, double *got) {
  if (try_run_xw(exe, p, x, w, n, s, fetch, n_fetch, got) != PD_OK) fail_msg("run: %s", pd_last_error());
}

size_t run_xw_allocations(pd_executor *exe, pd_program *p, scalar_feed s, pd_tensor *const *fetch,
                          int n_fetch) {
  double x[64], w[64];
  for (int i = 0; i < 64; i++) x[i] = i / 64.0, w[i] = 0.5;
  atomic_store(&pd_g_alloc_counting, true);
  size_t before = atomic_load(&pd_g_alloc_calls);
  pd_status st = try_run_xw(exe, p, x, w, 64, s, fetch, n_fetch, NULL);
  size_t n = atomic_load(&pd_g_alloc_calls) - before;
  atomic_store(&pd_g_alloc_counting, false); /* before a failure leaves the test */
  if (st != PD_OK) fail_msg("run: %s", pd_last_error());
  return n;
}

pd_tensor *tanh_poly(pd_tensor *x, pd_tensor *w) {
  pd_tensor *t = pd_tanh(x), *tw = t ? pd_multiply(t, w) : NULL, *sq = pd_multiply(x, x);
  pd_tensor *h = sq ? pd_scale(sq, 0.5, 0.0, true) : NULL, *r = tw && h ? pd_add(tw, h) : NULL;
  pd_tensor *ts[] = {t, tw, sq, h};
  for (int i = 0; i < 4; i++) pd_tensor_release(ts[i]);
  return r;
}

/* One step of check_dropout_steps into got (2 n doubles). */
static void dropout_step(pd_executor *exe, pd_executor *fwd_only, pd_program *p, scalar_feed s,
                         pd_tensor *const *fetch, const double *x, const double *w, int n, uint64_t seed,
                         double *got, double *ref) {
  pd_seed(seed);
  run_xw(exe, p, x, w, n, s, fetch, 2, got);
  pd_seed(seed);
  run_xw(fwd_only, p, x, w, n, s, fetch, 1, ref);
  assert_memory_equal(got, ref, (size_t)n * sizeof *ref);
  int zeros = 0;
  for (int i = 0; i < n; i++) {
    if (got[n + i] != got[i] / x[i]) fail_msg("element %d: ds/dx %g, s/x %g", i, got[n + i], got[i] / x[i]);
    zeros += got[i] == 0.0;
  }
  if (zeros == 0 || zeros == n) fail_msg("%d of %d elements dropped", zeros, n);
}

void check_dropout_steps(pd_program *p, scalar_feed s, pd_tensor *const *fetch, const double *x,
                         const double *w, int n, uint64_t seed0, double *first) {
  double *got = malloc(3 * (size_t)n * sizeof *got);
  assert_non_null(got);
  for (int interp = 0; interp < 2; interp++) {
    pd_executor *exe = pd_static_executor(PD_CPU), *fwd_only = pd_static_executor(PD_CPU);
    pd_executor_set_interpret(exe, interp);
    pd_executor_set_interpret(fwd_only, interp);
    for (int step = 0; step < 3; step++) {
      dropout_step(exe, fwd_only, p, s, fetch, x, w, n, seed0 + (uint64_t)step, got, got + 2 * n);
      if (step == 0 && interp == 0) memcpy(first, got, 2 * (size_t)n * sizeof *got);
      if (step == 0 && interp == 1) assert_memory_equal(got, first, 2 * (size_t)n * sizeof *got);
    }
    pd_executor_release(exe);
    pd_executor_release(fwd_only);
  }
  free(got);
}

void expect_central_differences(xw_loss_fn loss, void *ctx, double *x, double *w, int n, const double *grad,
                                const char *what) {
  const double h = 1e-6;
  for (int which = 0; which < 2; which++)
    for (int i = 0; i < n; i++) {
      double *v = which ? w : x, keep = v[i];
      v[i] = keep + h;
      double up = loss(ctx, x, w);
      v[i] = keep - h;
      double down = loss(ctx, x, w);
      v[i] = keep;
      double fd = (up - down) / (2 * h), g = grad[which * n + i];
      if (fabs(fd - g) > 1e-7 * (1 + fabs(fd)))
        fail_msg("%s, d/d%s[%d]: %.12g, central difference %.12g", what, which ? "w" : "x", i, g, fd);
    }
}

int close_program_guards(void **state) {
  (void)state;
  while (pd_static_program_guard_end() == PD_OK) {
  }
  pd_clear_error();
  return 0;
}
