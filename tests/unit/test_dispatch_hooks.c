/* The dispatcher's tracer and DTensor hooks are per thread: installing one
 * affects the calling thread only, each call gets its own context back, a
 * new thread (a DataLoader worker) starts with neither, and removing a hook
 * ends its calls. */
#include <pthread.h>

#include "ops/op_registry.h"
#include "test_util.h"

typedef struct {
  int before, after; /* tracer calls per phase */
  int dist_calls;
} counts;

static int count_tracer(void *ctx, pd_op_id id, pd_tensor *const *in, int n_in, const pd_attrs *a,
                        const pd_meta *meta, pd_tensor **out, int n_out, int phase) {
  (void)id, (void)in, (void)n_in, (void)a, (void)meta, (void)out, (void)n_out;
  counts *c = ctx;
  if (phase == 0)
    c->before++;
  else
    c->after++;
  return 0; /* let the op run */
}

static int count_dist(void *ctx, pd_op_id id, pd_tensor *const *in, int n_in, const pd_attrs *a,
                      pd_tensor **out, int *n_out, pd_status *st) {
  (void)id, (void)in, (void)n_in, (void)a, (void)out, (void)n_out, (void)st;
  ((counts *)ctx)->dist_calls++;
  return 0;
}

static pd_tensor *add_once(void) {
  pd_tensor *x = pd_ones(1, SHAPE(3), PD_FLOAT32);
  pd_tensor *y = pd_add(x, x);
  pd_tensor_release(x);
  return y;
}

static void *worker(void *arg) {
  counts *mine = arg;
  /* inherited nothing from the main thread */
  mine->before = pd_dispatch_get_tracer(NULL) != NULL ? 100 : 0;
  pd_tensor_release(add_once());
  pd_dispatch_set_tracer(count_tracer, mine);
  pd_tensor_release(add_once());
  pd_tensor_release(add_once());
  pd_dispatch_set_tracer(NULL, NULL);
  return NULL;
}

static void test_tracer_is_per_thread(void **state) {
  (void)state;
  counts main_c = {0}, worker_c = {0};
  pd_dispatch_set_tracer(count_tracer, &main_c);
  void *ctx = NULL;
  assert_ptr_equal(pd_dispatch_get_tracer(&ctx), count_tracer);
  assert_ptr_equal(ctx, &main_c);
  pd_tensor *y = add_once();
  assert_non_null(y);
  assert_float_equal(((float *)pd_tensor_data(y))[2], 2.0f, 0);
  pd_tensor_release(y);
  assert_int_equal(main_c.before, 2); /* ones and add */
  assert_int_equal(main_c.after, 2);

  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, worker, &worker_c), 0);
  pthread_join(th, NULL);
  assert_int_equal(worker_c.before, 4); /* 0 inherited + two (ones, add) pairs */
  assert_int_equal(worker_c.after, 4);
  assert_int_equal(main_c.before, 2); /* the worker's ops did not reach us */

  pd_dispatch_set_tracer(NULL, &main_c);
  assert_null(pd_dispatch_get_tracer(&ctx));
  assert_null(ctx);
  pd_tensor_release(add_once());
  assert_int_equal(main_c.before, 2);
}

static void *dist_worker(void *arg) {
  (void)arg;
  return pd_dispatch_get_dist(NULL) != NULL ? arg : NULL;
}

static void test_dist_hook_is_per_thread(void **state) {
  (void)state;
  counts c = {0};
  pd_dispatch_set_dist(count_dist, &c);
  void *ctx = NULL;
  assert_ptr_equal(pd_dispatch_get_dist(&ctx), count_dist);
  assert_ptr_equal(ctx, &c);
  pthread_t th;
  void *seen = &c;
  assert_int_equal(pthread_create(&th, NULL, dist_worker, &c), 0);
  pthread_join(th, &seen);
  assert_null(seen);
  /* plain tensors never reach the DTensor hook */
  pd_tensor_release(add_once());
  assert_int_equal(c.dist_calls, 0);
  pd_dispatch_set_dist(NULL, NULL);
  assert_null(pd_dispatch_get_dist(NULL));
}

/* A hook that answers every op with a [2, 2] tensor of sevens. */
static int answer_dist(void *ctx, pd_op_id id, pd_tensor *const *in, int n_in, const pd_attrs *a,
                       pd_tensor **out, int *n_out, pd_status *st) {
  (void)id, (void)in, (void)n_in, (void)a;
  ((counts *)ctx)->dist_calls++;
  out[0] = pd_full(2, SHAPE(2, 2), 7.0, PD_FLOAT32);
  *n_out = 1;
  *st = out[0] ? PD_OK : pd_last_status();
  return 1;
}

/* The DTensor hook runs before infer_meta: a DTensor's shape is its local
 * shard's, which need not satisfy the op (x's k sharded, y's not). */
static void test_dist_hook_runs_before_infer_meta(void **state) {
  (void)state;
  counts c = {0};
  static int tag;
  pd_tensor *x = pd_ones(2, SHAPE(2, 3), PD_FLOAT32);
  pd_tensor *y = pd_ones(2, SHAPE(4, 2), PD_FLOAT32);
  x->dist_attr = &tag; /* only its presence matters to the dispatcher */
  pd_dispatch_set_dist(answer_dist, &c);
  pd_tensor *z = pd_matmul(x, y, false, false);
  pd_dispatch_set_dist(NULL, NULL);
  x->dist_attr = NULL;
  assert_non_null(z);
  assert_int_equal(c.dist_calls, 1);
  assert_true(((const float *)pd_tensor_data(z))[3] == 7.0f);
  pd_tensor_release(z);
  pd_tensor_release(x);
  pd_tensor_release(y);
}

/* Eager ops take a copy of the dispatcher without the hooks' code while
 * neither hook is set: removing one hook keeps the other in force. */
static void test_removing_one_hook_keeps_the_other(void **state) {
  (void)state;
  counts c = {0};
  static int tag;
  pd_tensor *x = pd_ones(2, SHAPE(2, 3), PD_FLOAT32);
  x->dist_attr = &tag;
  pd_dispatch_set_dist(answer_dist, &c);
  pd_dispatch_set_tracer(count_tracer, &c);
  pd_dispatch_set_tracer(NULL, NULL);
  pd_tensor *z = pd_add(x, x); /* still answered by the DTensor hook */
  assert_int_equal(c.dist_calls, 1);
  assert_true(z && ((const float *)pd_tensor_data(z))[3] == 7.0f);
  pd_tensor_release(z);
  pd_dispatch_set_tracer(count_tracer, &c);
  pd_dispatch_set_dist(NULL, NULL);
  x->dist_attr = NULL;
  z = pd_add(x, x); /* still seen by the tracer, computed by the kernel */
  assert_int_equal(c.before, 1);
  assert_int_equal(c.after, 1);
  assert_true(z && ((const float *)pd_tensor_data(z))[5] == 2.0f);
  pd_tensor_release(z);
  pd_dispatch_set_tracer(NULL, NULL);
  z = pd_add(x, x); /* neither */
  assert_int_equal(c.before, 1);
  assert_int_equal(c.dist_calls, 1);
  pd_tensor_release(z);
  pd_tensor_release(x);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_tracer_is_per_thread),
      cmocka_unit_test(test_dist_hook_is_per_thread),
      cmocka_unit_test(test_dist_hook_runs_before_infer_meta),
      cmocka_unit_test(test_removing_one_hook_keeps_the_other),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
