/* What the tests of the control ops' grad ops share: a py_func that counts
 * its calls, a run of a Program fed "x" and "w" (float64 vectors) and one
 * scalar, the allocations of such a run, and a check of a gradient against
 * central differences. */
#ifndef PADDLEC_TEST_CONTROL_GRAD_CHECK_H
#define PADDLEC_TEST_CONTROL_GRAD_CHECK_H

#include "paddlec.h"
#include "paddlec/static.h"

typedef struct call_count {
  int forward, backward;
  int taped; /* forward calls whose input wants a gradient: it ran on the tape */
} call_count;

/* Records counted(x) under the current program guard (x a float64
 * Variable of shape [1]): the identity, counting its forward calls and
 * its backward calls (which pass the gradient on) in *calls. Returns it
 * (a new reference), or NULL. */
pd_tensor *record_counted(call_count *calls, pd_tensor *x);

/* The scalar fed besides x and w: its name, value and dtype. */
typedef struct scalar_feed {
  const char *name;
  double value;
  pd_dtype dtype;
} scalar_feed;

/* Makes a Program and opens its guard: data "x" and "w" (float64 of
 * shape [n], gradients wanted) and s.name (a [1] of s.dtype) written to
 * *x, *w and *sv (new references). */
pd_program *xw_program_begin(int n, scalar_feed s, pd_tensor **x, pd_tensor **w, pd_tensor **sv);

/* Appends the gradients of sum(out) for x and w (n_grads of them: 0
 * appends none, 1 asks both at once, 2 asks twice, one input each, so
 * out's op has two grad ops) to g[0] and g[1], and closes the guard. */
void xw_program_end(pd_tensor *out, pd_tensor *x, pd_tensor *w, int n_grads, pd_tensor **g);

/* Runs p with x and w (n values each) and s fed, fetching n_fetch values
 * of n doubles each into got (NULL: released unread); fails the test when
 * the run fails. */
void run_xw(pd_executor *exe, pd_program *p, const double *x, const double *w, int n, scalar_feed s,
            pd_tensor *const *fetch, int n_fetch, double *got);

/* The allocations a run of p with x and w of 64 values (i / 64 and 0.5)
 * and s fed counts. */
size_t run_xw_allocations(pd_executor *exe, pd_program *p, scalar_feed s, pd_tensor *const *fetch,
                          int n_fetch);

/* tanh(x) * w + x * x * 0.5, recorded (a new reference, or NULL). */
pd_tensor *tanh_poly(pd_tensor *x, pd_tensor *w);

/* Three steps of p, lowered and then interpreted, whose fetch[0] is
 * s = x * m for a dropout mask m scaled by 2 (or a product of such) and
 * fetch[1] ds/dx, with the seed seed0 + step: each fetches both, and s
 * alone from another executor (its grad op is dead, so the forward keeps
 * nothing). Fails the test unless s is the same in both runs, ds/dx =
 * s / x elementwise (the gradient is m exactly when it uses the mask the
 * forward drew), some but not all of s are 0, and the first step's values
 * (2 n doubles, written to first) are the same lowered and interpreted. */
void check_dropout_steps(pd_program *p, scalar_feed s, pd_tensor *const *fetch, const double *x,
                         const double *w, int n, uint64_t seed0, double *first);

/* The loss whose gradient is checked, at x and w. */
typedef double (*xw_loss_fn)(void *ctx, const double *x, const double *w);

/* Fails the test unless grad (d loss / dx then d loss / dw, n each)
 * equals central differences of loss (step 1e-6) within 1e-7 (1 + |fd|);
 * what names the case in the message. x and w are restored. */
void expect_central_differences(xw_loss_fn loss, void *ctx, double *x, double *w, int n, const double *grad,
                                const char *what);

/* A cmocka teardown: closes the program guards a failed assertion left open
 * (and the error that closing one too many sets), so the next test of the
 * binary starts outside any Program instead of failing for another reason. */
int close_program_guards(void **state);

#endif
