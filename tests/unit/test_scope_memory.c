/* Scopes (pd_scope_begin/end, pd_keep, nesting), the memory counters of
 * the caching allocator, PADDLEC_ABORT_ON_ERROR, and NULL propagation that
 * keeps the first error message through a chain of ops. */
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_util.h"

static void test_scope_releases(void **state) {
  (void)state;
  size_t base = pd_memory_allocated();
  pd_scope_begin();
  pd_tensor *a = pd_ones(1, SHAPE(1000), PD_FLOAT32);
  pd_tensor *b = pd_add(a, a);
  pd_tensor *c = pd_reshape(b, 2, SHAPE(10, 100)); /* a view: its own struct, shared storage */
  assert_non_null(c);
  assert_true(pd_memory_allocated() >= base + 2 * 4000);
  pd_scope_end();
  assert_int_equal(pd_memory_allocated(), base);
  /* ending a scope that is not open is an error, not a crash */
  pd_scope_end();
  assert_non_null(strstr(pd_last_error(), "scope_end"));
  assert_non_null(strstr(pd_last_error(), "no scope"));
  pd_clear_error();
  expect_no_live_tensors();
}

static void test_keep_moves_out(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *a = pd_full(1, SHAPE(64), 3, PD_FLOAT64);
  pd_tensor *b = pd_scale(a, 2, 0, true);
  assert_ptr_equal(pd_keep(b), b);
  assert_ptr_equal(pd_keep(b), b); /* a second keep is harmless */
  pd_scope_end();
  /* b survived; a did not */
  assert_int_equal(pd_memory_allocated(), 64 * 8);
  assert_true(pd_tensor_item_at(b, 63) == 6);
  pd_tensor_release(b);
  /* keep outside any scope, and keep(NULL), return their argument */
  pd_tensor *c = pd_zeros(1, SHAPE(2), PD_FLOAT32);
  assert_ptr_equal(pd_keep(c), c);
  assert_null(pd_keep(NULL));
  pd_tensor_release(c);
  expect_no_live_tensors();
}

static void test_nested_scopes(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *outer = pd_ones(1, SHAPE(100), PD_FLOAT32);
  size_t after_outer = pd_memory_allocated();
  pd_tensor *moved = NULL;
  pd_scope_begin();
  pd_tensor *inner = pd_ones(1, SHAPE(300), PD_FLOAT32);
  moved = pd_keep(pd_add(inner, inner)); /* goes to the outer scope */
  pd_tensor *lost = pd_multiply(inner, inner);
  assert_non_null(lost);
  pd_scope_end();
  /* inner and lost are gone; outer and moved remain */
  assert_true(pd_memory_allocated() > after_outer);
  assert_true(pd_tensor_item_at(moved, 299) == 2);
  assert_true(pd_tensor_item_at(outer, 0) == 1);
  /* a third level, begun and ended empty */
  pd_scope_begin();
  pd_scope_end();
  pd_scope_end(); /* the outer scope releases outer and moved */
  expect_no_live_tensors();
  /* deep nesting beyond the initial capacity of the scope stack */
  for (int d = 0; d < 40; d++) {
    pd_scope_begin();
    pd_zeros(1, SHAPE(d + 1), PD_INT32);
  }
  for (int d = 0; d < 40; d++) pd_scope_end();
  expect_no_live_tensors();
}

/* Tensors an op makes internally are not tracked by the user's scope: a
 * chain of ops inside a scope leaves only its results to release. */
static void test_internal_temporaries_not_tracked(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = T(PD_FLOAT16, 1, SHAPE(3), 1, 2, 3); /* add computes through float32 casts */
  pd_tensor *y = pd_add(x, x);
  EXPECT_VALUES(y, 0, 2, 4, 6);
  pd_tensor_retain(y); /* outlive the scope by an extra reference */
  pd_scope_end();
  assert_true(pd_tensor_item_at(y, 2) == 6);
  pd_tensor_release(y);
  expect_no_live_tensors();
}

static void test_memory_counters(void **state) {
  (void)state;
  size_t a0 = pd_memory_allocated();
  pd_memory_reset_peak();
  assert_int_equal(pd_memory_peak(), a0);
  pd_tensor *x = pd_empty(1, SHAPE(1000), PD_FLOAT32); /* 4000 bytes, rounded up to a size class */
  size_t a1 = pd_memory_allocated();
  assert_true(a1 - a0 >= 4000 && a1 - a0 <= 5120);
  assert_true(pd_memory_reserved() >= a1);
  pd_tensor *y = pd_empty(1, SHAPE(5000), PD_FLOAT64);
  size_t a2 = pd_memory_allocated();
  assert_true(a2 - a1 >= 40000 && a2 - a1 <= 50000);
  assert_int_equal(pd_memory_peak(), a2);
  pd_tensor_release(y);
  assert_int_equal(pd_memory_allocated(), a1);
  assert_int_equal(pd_memory_peak(), a2); /* the peak remembers */
  pd_memory_reset_peak();
  assert_int_equal(pd_memory_peak(), a1);
  size_t r = pd_memory_reserved();
#ifndef PADDLEC_NO_CACHING
  /* the freed block stays cached and is reused for the same size */
  assert_true(r >= a1 + 40000);
  pd_tensor *y2 = pd_empty(1, SHAPE(5000), PD_FLOAT64);
  assert_int_equal(pd_memory_reserved(), r);
  pd_tensor_release(y2);
  pd_memory_empty_cache();
  assert_int_equal(pd_memory_reserved(), pd_memory_allocated());
#else
  /* without caching every free goes back to the system */
  assert_int_equal(r, pd_memory_allocated());
#endif
  pd_tensor_release(x);
  assert_int_equal(pd_memory_allocated(), a0);
  /* empty tensors still count a minimal block while alive */
  pd_tensor *e = pd_empty(1, SHAPE(0), PD_FLOAT32);
  assert_true(pd_memory_allocated() > a0);
  pd_tensor_release(e);
  expect_no_live_tensors();
}

/* Small blocks freed on a thread stay in that thread's cache until it
 * exits or allocates after pd_memory_empty_cache; the counters stay exact
 * throughout. */
typedef struct cache_thread {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int phase;   /* 0: fill the cache, 1: cache filled, 2: allocate once more, 3: done */
  size_t live; /* pd_memory_allocated seen by the thread after its allocation */
} cache_thread;

static void *cache_thread_main(void *arg) {
  cache_thread *c = arg;
  pd_tensor *ts[8];
  for (int i = 0; i < 8; i++) ts[i] = pd_empty(1, SHAPE(250 + i), PD_FLOAT32); /* ~1 KB each */
  for (int i = 0; i < 8; i++) pd_tensor_release(ts[i]);
  pthread_mutex_lock(&c->mu);
  c->phase = 1;
  pthread_cond_broadcast(&c->cv);
  while (c->phase != 2) pthread_cond_wait(&c->cv, &c->mu);
  pthread_mutex_unlock(&c->mu);
  pd_tensor *t = pd_empty(1, SHAPE(250), PD_FLOAT32); /* sees empty_cache: gives its cache back */
  c->live = pd_memory_allocated();
  pd_tensor_release(t);
  pthread_mutex_lock(&c->mu);
  c->phase = 3;
  pthread_cond_broadcast(&c->cv);
  pthread_mutex_unlock(&c->mu);
  return NULL;
}

static void test_thread_caches(void **state) {
  (void)state;
  size_t a0 = pd_memory_allocated();
  cache_thread c = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0};
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, cache_thread_main, &c), 0);
  pthread_mutex_lock(&c.mu);
  while (c.phase != 1) pthread_cond_wait(&c.cv, &c.mu);
  pthread_mutex_unlock(&c.mu);
  assert_int_equal(pd_memory_allocated(), a0);
  pd_memory_empty_cache();
#ifndef PADDLEC_NO_CACHING
  size_t r = pd_memory_reserved(); /* the thread's cached blocks are still reserved */
  assert_true(r >= pd_memory_allocated() + 8 * 1000);
#endif
  pthread_mutex_lock(&c.mu);
  c.phase = 2;
  pthread_cond_broadcast(&c.cv);
  while (c.phase != 3) pthread_cond_wait(&c.cv, &c.mu);
  pthread_mutex_unlock(&c.mu);
  assert_int_equal(pthread_join(th, NULL), 0);
  assert_true(c.live >= a0 + 1000 && c.live <= a0 + 1088);
  assert_int_equal(pd_memory_allocated(), a0);
  pd_memory_empty_cache(); /* the thread's blocks went to the shared cache */
  assert_int_equal(pd_memory_reserved(), pd_memory_allocated());
  expect_no_live_tensors();
}

/* A training-like step repeated: once warm, reserved memory stays flat. */
static void test_steady_state_does_not_grow(void **state) {
  (void)state;
  pd_tensor *w = pd_keep(T(PD_FLOAT32, 2, SHAPE(2, 2), 0.5, -0.5, 0.25, 1));
  size_t reserved_after_warmup = 0, peak_after_warmup = 0;
  for (int it = 0; it < 200; it++) {
    pd_scope_begin();
    pd_tensor *x = pd_rand(2, SHAPE(64, 2), PD_FLOAT32);
    pd_tensor *h = pd_multiply(pd_expand(pd_reshape(w, 3, SHAPE(1, 2, 2)), 3, SHAPE(64, 2, 2)),
                               pd_reshape(x, 3, SHAPE(64, 2, 1)));
    pd_tensor *l = pd_sum(pd_multiply(h, h), NULL, 0, false);
    assert_non_null(l);
    pd_scope_end();
    if (it == 2) {
      reserved_after_warmup = pd_memory_reserved();
      pd_memory_reset_peak();
      peak_after_warmup = pd_memory_peak();
    }
  }
  assert_int_equal(pd_memory_reserved(), reserved_after_warmup);
  assert_true(pd_memory_peak() < peak_after_warmup + 64 * 1024);
  pd_tensor_release(w);
  expect_no_live_tensors();
}

static void test_null_keeps_first_error(void **state) {
  (void)state;
  pd_scope_begin();
  pd_clear_error();
  pd_tensor *x = T(PD_FLOAT32, 1, SHAPE(2), 1, 2);
  pd_tensor *y = T(PD_FLOAT32, 1, SHAPE(3), 1, 2, 3);
  pd_tensor *a = pd_add(x, y); /* shapes [2] and [3] do not broadcast */
  assert_null(a);
  char first[512];
  snprintf(first, sizeof first, "%s", pd_last_error());
  assert_non_null(strstr(first, "add"));
  assert_non_null(strstr(first, "[2]"));
  assert_non_null(strstr(first, "[3]"));
  pd_tensor *b = pd_multiply(a, x);
  pd_tensor *c = pd_scale(b, 2, 1, true);
  pd_tensor *d = pd_sum(c, NULL, 0, false);
  pd_tensor *e = pd_reshape(pd_transpose(d, 1, SHAPE(0)), 1, SHAPE(-1));
  pd_tensor *f = pd_cast(pd_bernoulli(e), PD_FLOAT64);
  pd_tensor *g = pd_multinomial(pd_contiguous(f), 1, true);
  assert_null(b);
  assert_null(c);
  assert_null(d);
  assert_null(e);
  assert_null(f);
  assert_null(g);
  assert_string_equal(pd_last_error(), first);
  assert_int_equal(pd_last_status(), PD_ERR_SHAPE);
  pd_clear_error();
  assert_int_equal(pd_last_status(), PD_OK);
  assert_string_equal(pd_last_error(), "");
  /* without an earlier error a NULL input names the op */
  assert_null(pd_multiply(NULL, x));
  assert_non_null(strstr(pd_last_error(), "multiply"));
  assert_non_null(strstr(pd_last_error(), "NULL"));
  pd_clear_error();
  pd_scope_end();
  expect_no_live_tensors();
}

/* In the child: trigger an error with PADDLEC_ABORT_ON_ERROR=1. Returning
 * means the library did not abort. */
static int abort_child(void) {
  pd_tensor *x = pd_zeros(1, SHAPE(2), PD_FLOAT32);
  pd_tensor *y = pd_zeros(1, SHAPE(3), PD_FLOAT32);
  pd_tensor *z = pd_add(x, y);
  pd_tensor_release(z);
  pd_tensor_release(x);
  pd_tensor_release(y);
  return 0;
}

static void test_abort_on_error(void **state) {
  (void)state;
  int err_pipe[2];
  assert_int_equal(pipe(err_pipe), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    dup2(err_pipe[1], 2);
    close(err_pipe[0]);
    close(err_pipe[1]);
    setenv("PADDLEC_ABORT_ON_ERROR", "1", 1);
    /* a fresh process reads the variable at its first error */
    execl("/proc/self/exe", "test_scope_memory", "--abort-child", (char *)NULL);
    _exit(3);
  }
  close(err_pipe[1]);
  char buf[8192];
  size_t n = 0;
  ssize_t k;
  while (n < sizeof buf - 1 && (k = read(err_pipe[0], buf + n, sizeof buf - 1 - n)) > 0) n += (size_t)k;
  buf[n] = 0;
  close(err_pipe[0]);
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  if (!WIFSIGNALED(status))
    fail_msg("child did not die from a signal (exit status %d); stderr:\n%s", WEXITSTATUS(status), buf);
  assert_int_equal(WTERMSIG(status), SIGABRT);
  assert_non_null(strstr(buf, "paddle.c error"));
  assert_non_null(strstr(buf, "add: shapes [2] and [3]"));
}

/* Errors are per thread: an error on one thread is not seen on another. */
static void *error_thread(void *arg) {
  int *out = arg;
  out[0] = (int)pd_last_status();
  pd_set_error(PD_ERR_INDEX, "thread test: index 5");
  out[1] = (int)pd_last_status();
  return NULL;
}

static void test_errors_are_thread_local(void **state) {
  (void)state;
  pd_set_error(PD_ERR_SHAPE, "main thread error");
  int out[2] = {1, 1};
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, error_thread, out), 0);
  assert_int_equal(pthread_join(th, NULL), 0);
  assert_int_equal(out[0], PD_OK);
  assert_int_equal(out[1], PD_ERR_INDEX);
  assert_int_equal(pd_last_status(), PD_ERR_SHAPE);
  assert_string_equal(pd_last_error(), "main thread error");
  pd_clear_error();
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--abort-child") == 0) return abort_child();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_scope_releases),          cmocka_unit_test(test_keep_moves_out),
      cmocka_unit_test(test_nested_scopes),           cmocka_unit_test(test_internal_temporaries_not_tracked),
      cmocka_unit_test(test_memory_counters),         cmocka_unit_test(test_steady_state_does_not_grow),
      cmocka_unit_test(test_null_keeps_first_error),  cmocka_unit_test(test_abort_on_error),
      cmocka_unit_test(test_errors_are_thread_local), cmocka_unit_test(test_thread_caches),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
