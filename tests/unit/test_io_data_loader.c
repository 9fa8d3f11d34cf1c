/* paddle.io.DataLoader: batch contents and order (identical for 0, 1 and 3
 * worker threads), epochs, drop_last, custom collate, batch samplers,
 * iterable datasets, errors with the sample index, teardown mid-epoch. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "test_util.h"

/* sample i: (x float32 [3] = {i, 2i, 3i} + an offset, y int64 0-D = i); the
 * loading time varies with i so workers finish out of order */
typedef struct toy {
  int64_t n;
  int64_t fail_at; /* -1: never */
  atomic_int calls;
} toy;

static int64_t toy_len(void *user) { return ((toy *)user)->n; }

static void pause_for(int64_t i) {
  struct timespec ts = {0, (long)((i * 7919) % 5) * 200000L};
  nanosleep(&ts, NULL);
}

static int toy_get_item(void *user, int64_t i, pd_tensor **out, int max_out) {
  (void)max_out;
  toy *t = user;
  atomic_fetch_add(&t->calls, 1);
  pause_for(i);
  if (i == t->fail_at) return pd_set_error(PD_ERR_IO, "toy: record %lld is corrupt", (long long)i);
  float x[3] = {(float)i + 0.25f, 2.0f * (float)i, 3.0f * (float)i};
  /* a temporary the scope must release: the callback never releases */
  pd_tensor *tmp = pd_to_tensor(x, PD_FLOAT32, 1, SHAPE(3));
  out[0] = pd_scale(tmp, 1.0, 0.0, true);
  out[1] = pd_to_tensor(&i, PD_INT64, 0, NULL);
  return 2;
}

static pd_io_dataset *toy_dataset(toy *t, int64_t n) {
  t->n = n;
  t->fail_at = -1;
  atomic_init(&t->calls, 0);
  return pd_io_dataset_new(&(pd_io_dataset_fns){.len = toy_len, .get_item = toy_get_item}, t);
}

/* Every batch of one epoch, flattened: values of x then y per batch. */
typedef struct run {
  int nb;
  int64_t sizes[64];
  double vals[1024];
  int nv;
} run;

static void collect_epoch(pd_io_loader *l, run *r) {
  memset(r, 0, sizeof *r);
  pd_tensor *b[4];
  int n;
  pd_scope_begin();
  while ((n = pd_io_loader_next(l, b, 4)) > 0) {
    assert_int_equal(n, 2);
    assert_int_equal(pd_tensor_dtype(b[0]), PD_FLOAT32);
    assert_int_equal(pd_tensor_dtype(b[1]), PD_INT64);
    int64_t bs = pd_tensor_shape(b[0])[0];
    expect_shape(b[0], 2, SHAPE(bs, 3));
    expect_shape(b[1], 1, SHAPE(bs));
    r->sizes[r->nb++] = bs;
    for (int64_t i = 0; i < 3 * bs; i++) r->vals[r->nv++] = pd_tensor_item_at(b[0], i);
    for (int64_t i = 0; i < bs; i++) r->vals[r->nv++] = pd_tensor_item_at(b[1], i);
  }
  assert_int_equal(n, 0);
  pd_scope_end();
}

static void expect_same_run(const run *a, const run *b) {
  assert_int_equal(a->nb, b->nb);
  assert_int_equal(a->nv, b->nv);
  for (int i = 0; i < a->nb; i++) assert_int_equal(a->sizes[i], b->sizes[i]);
  assert_memory_equal(a->vals, b->vals, sizeof(double) * (size_t)a->nv);
}

static void test_batches_in_order(void **state) {
  (void)state;
  toy t;
  pd_io_dataset *ds = toy_dataset(&t, 10);
  pd_io_loader *l = pd_io_data_loader(ds, &(pd_io_data_loader_opts){.batch_size = 4});
  assert_int_equal(pd_io_loader_len(l), 3);
  run r;
  collect_epoch(l, &r);
  assert_int_equal(r.nb, 3);
  assert_int_equal(r.sizes[2], 2);
  /* first batch: x rows {i + 0.25, 2i, 3i} for i = 0..3, then y = 0..3 */
  const double want0[16] = {0.25, 0, 0, 1.25, 2, 3, 2.25, 4, 6, 3.25, 6, 9, 0, 1, 2, 3};
  for (int i = 0; i < 16; i++) assert_true(r.vals[i] == want0[i]);
  const double want_last[8] = {8.25, 16, 24, 9.25, 18, 27, 8, 9};
  for (int i = 0; i < 8; i++) assert_true(r.vals[r.nv - 8 + i] == want_last[i]);
  /* iterating again is a new epoch */
  run r2;
  collect_epoch(l, &r2);
  expect_same_run(&r, &r2);
  pd_io_loader_release(l);
  /* defaults: batch_size 1 */
  l = pd_io_data_loader(ds, NULL);
  assert_int_equal(pd_io_loader_len(l), 10);
  collect_epoch(l, &r);
  assert_int_equal(r.nb, 10);
  pd_io_loader_release(l);
  pd_io_dataset_release(ds);
  expect_no_live_tensors();
}

/* shuffled, with and without drop_last: 0, 1 and 3 workers give the same
 * batches bit for bit */
static void test_workers_same_order(void **state) {
  (void)state;
  toy t;
  pd_io_dataset *ds = toy_dataset(&t, 23);
  for (int drop = 0; drop < 2; drop++) {
    run ref = {0};
    const int workers[3] = {0, 1, 3};
    for (int w = 0; w < 3; w++) {
      pd_io_loader *l = pd_io_data_loader(
          ds, &(pd_io_data_loader_opts){
                  .batch_size = 5, .shuffle = true, .drop_last = drop, .num_workers = workers[w]});
      assert_non_null(l);
      assert_int_equal(pd_io_loader_len(l), drop ? 4 : 5);
      pd_seed(1234);
      run r, r2;
      collect_epoch(l, &r);
      collect_epoch(l, &r2); /* the second epoch draws a new order */
      assert_int_equal(r.nb, drop ? 4 : 5);
      if (!drop) assert_int_equal(r.sizes[4], 3);
      assert_true(memcmp(r.vals, r2.vals, sizeof(double) * (size_t)r.nv) != 0);
      if (w == 0) {
        ref = r;
        /* a permutation: each index once (without drop_last) */
        if (!drop) {
          int seen[23] = {0};
          int off = 0;
          for (int b = 0; b < r.nb; b++) {
            for (int64_t i = 0; i < r.sizes[b]; i++) seen[(int)r.vals[off + 3 * r.sizes[b] + i]]++;
            off += 4 * (int)r.sizes[b];
          }
          for (int i = 0; i < 23; i++) assert_int_equal(seen[i], 1);
        }
      } else {
        expect_same_run(&ref, &r);
      }
      pd_io_loader_release(l);
    }
  }
  pd_io_dataset_release(ds);
  expect_no_live_tensors();
}

/* custom collate: the sum of x over the batch and the list of y as float64 */
static int sum_collate(pd_tensor *const *samples, int64_t bs, int nf, pd_tensor **out, int max_out,
                       void *user) {
  (void)max_out;
  int *calls = user;
  __atomic_add_fetch(calls, 1, __ATOMIC_SEQ_CST);
  /* runs on worker threads: report problems as errors, not test failures */
  if (nf != 2 || bs > 16)
    return pd_set_error(PD_ERR_INVALID, "sum_collate: %d fields, %lld samples", nf, (long long)bs);
  pd_tensor *acc = samples[0];
  for (int64_t i = 1; i < bs; i++) acc = pd_add(acc, samples[i * nf]);
  out[0] = acc;
  double ys[16];
  for (int64_t i = 0; i < bs; i++) ys[i] = pd_tensor_item(samples[i * nf + 1]);
  out[1] = pd_tensor_from_f64(ys, PD_FLOAT64, 1, (const int64_t[]){bs});
  out[2] = samples[0]; /* a borrowed input may be returned too */
  return 3;
}

static void test_custom_collate(void **state) {
  (void)state;
  toy t;
  pd_io_dataset *ds = toy_dataset(&t, 6);
  for (int w = 0; w < 2; w++) {
    int calls = 0;
    pd_io_loader *l = pd_io_data_loader(
        ds, &(pd_io_data_loader_opts){
                .batch_size = 3, .collate_fn = sum_collate, .collate_user = &calls, .num_workers = w * 2});
    pd_scope_begin();
    pd_tensor *b[3];
    assert_int_equal(pd_io_loader_next(l, b, 3), 3);
    EXPECT_VALUES(b[0], 0, 3.75, 6, 9); /* rows 0..2 summed */
    EXPECT_VALUES(b[1], 0, 0, 1, 2);
    EXPECT_VALUES(b[2], 0, 0.25, 0, 0);
    assert_int_equal(pd_io_loader_next(l, b, 3), 3);
    EXPECT_VALUES(b[0], 0, 12.75, 24, 36);
    assert_int_equal(pd_io_loader_next(l, b, 3), 0);
    /* room for fewer fields than the batch has */
    int st = pd_io_loader_next(l, b, 2);
    assert_true(st < 0);
    assert_non_null(strstr(pd_last_error(), "3 fields"));
    pd_scope_end();
    pd_io_loader_release(l);
    assert_true(calls >= 2);
  }
  pd_io_dataset_release(ds);
  expect_no_live_tensors();
}

static void test_errors_propagate(void **state) {
  (void)state;
  toy t;
  pd_io_dataset *ds = toy_dataset(&t, 12);
  t.fail_at = 7;
  for (int w = 0; w < 3; w++) {
    const int workers[3] = {0, 1, 3};
    pd_io_loader *l =
        pd_io_data_loader(ds, &(pd_io_data_loader_opts){.batch_size = 2, .num_workers = workers[w]});
    pd_scope_begin();
    pd_tensor *b[2];
    int n, got = 0;
    while ((n = pd_io_loader_next(l, b, 2)) > 0) got++;
    assert_int_equal(got, 3); /* batches [0,1] [2,3] [4,5], then [6,7] fails */
    assert_true(n < 0);
    assert_non_null(strstr(pd_last_error(), "sample 7"));
    assert_non_null(strstr(pd_last_error(), "record 7 is corrupt"));
    /* the next call starts a new epoch */
    assert_int_equal(pd_io_loader_next(l, b, 2), 2);
    EXPECT_VALUES(b[1], 0, 0, 1);
    pd_scope_end();
    pd_io_loader_release(l);
  }
  t.fail_at = -1;
  /* a TensorDataset with one field */
  pd_scope_begin();
  pd_tensor *x = pd_zeros(2, SHAPE(4, 2), PD_FLOAT32);
  pd_io_dataset *tds = pd_io_tensor_dataset(&x, 1);
  pd_scope_end();
  pd_io_loader *l = pd_io_data_loader(tds, &(pd_io_data_loader_opts){.batch_size = 2});
  pd_scope_begin();
  pd_tensor *b[1];
  assert_int_equal(pd_io_loader_next(l, b, 1), 1);
  expect_shape(b[0], 2, SHAPE(2, 2));
  pd_scope_end();
  pd_io_loader_release(l);
  pd_io_dataset_release(tds);
  pd_io_dataset_release(ds);
  expect_no_live_tensors();
}

/* samples of different shapes: the default collate names the field */
static int64_t ragged_len(void *user) { return *(int64_t *)user; }
static int ragged_get_item(void *user, int64_t i, pd_tensor **out, int max_out) {
  (void)user;
  (void)max_out;
  out[0] = pd_zeros(0, NULL, PD_INT64);
  out[1] = pd_zeros(1, (const int64_t[]){i + 1}, PD_FLOAT32);
  return 2;
}

static void test_collate_errors(void **state) {
  (void)state;
  int64_t n = 4;
  pd_io_dataset *ds =
      pd_io_dataset_new(&(pd_io_dataset_fns){.len = ragged_len, .get_item = ragged_get_item}, &n);
  for (int w = 0; w < 2; w++) {
    pd_io_loader *l = pd_io_data_loader(ds, &(pd_io_data_loader_opts){.batch_size = 2, .num_workers = w});
    pd_tensor *b[2];
    int st = pd_io_loader_next(l, b, 2);
    assert_true(st < 0);
    assert_non_null(strstr(pd_last_error(), "field 1"));
    assert_non_null(strstr(pd_last_error(), "stack"));
    pd_io_loader_release(l);
  }
  pd_io_dataset_release(ds);
  expect_no_live_tensors();
}

static void test_reset_and_destroy_mid_epoch(void **state) {
  (void)state;
  toy t;
  pd_io_dataset *ds = toy_dataset(&t, 40);
  for (int w = 0; w < 4; w += 3) {
    pd_io_loader *l = pd_io_data_loader(
        ds, &(pd_io_data_loader_opts){.batch_size = 2, .num_workers = w, .prefetch_factor = 3});
    pd_scope_begin();
    pd_tensor *b[2];
    assert_int_equal(pd_io_loader_next(l, b, 2), 2);
    assert_int_equal(pd_io_loader_next(l, b, 2), 2);
    EXPECT_VALUES(b[1], 0, 2, 3);
    assert_int_equal(pd_io_loader_reset(l), PD_OK);
    assert_int_equal(pd_io_loader_next(l, b, 2), 2); /* from the start again */
    EXPECT_VALUES(b[1], 0, 0, 1);
    pd_scope_end();
    pd_io_loader_release(l); /* workers busy loading ahead */
  }
  /* destroyed before any batch is taken, and right after creation */
  pd_io_loader *l = pd_io_data_loader(ds, &(pd_io_data_loader_opts){.batch_size = 3, .num_workers = 3});
  pd_io_loader_release(l);
  pd_io_dataset_release(ds);
  pd_io_loader_release(NULL);
  expect_no_live_tensors();
}

static void test_prefetch_is_bounded(void **state) {
  (void)state;
  toy t;
  pd_io_dataset *ds = toy_dataset(&t, 100);
  pd_io_loader *l = pd_io_data_loader(
      ds, &(pd_io_data_loader_opts){.batch_size = 1, .num_workers = 2, .prefetch_factor = 2});
  pd_tensor *b[2];
  pd_scope_begin();
  assert_int_equal(pd_io_loader_next(l, b, 2), 2);
  pd_scope_end();
  struct timespec ts = {0, 50 * 1000000L};
  nanosleep(&ts, NULL);
  /* one taken + at most 2 * 2 loaded ahead (+ none beyond) */
  assert_true(atomic_load(&t.calls) <= 1 + 4);
  pd_io_loader_release(l);
  pd_io_dataset_release(ds);
  expect_no_live_tensors();
}

static void test_batch_sampler_option(void **state) {
  (void)state;
  toy t;
  pd_io_dataset *ds = toy_dataset(&t, 10);
  pd_io_sampler *s = pd_io_distributed_batch_sampler(ds, 2, 3, 1, false, false);
  for (int w = 0; w < 2; w++) {
    pd_io_loader *l = pd_io_data_loader(ds, &(pd_io_data_loader_opts){.batch_sampler = s, .num_workers = w});
    assert_int_equal(pd_io_loader_len(l), 2);
    pd_scope_begin();
    pd_tensor *b[2];
    assert_int_equal(pd_io_loader_next(l, b, 2), 2);
    EXPECT_VALUES(b[1], 0, 2, 3);
    assert_int_equal(pd_io_loader_next(l, b, 2), 2);
    EXPECT_VALUES(b[1], 0, 8, 9);
    assert_int_equal(pd_io_loader_next(l, b, 2), 0);
    pd_scope_end();
    pd_io_loader_release(l);
  }
  pd_io_loader *bad = pd_io_data_loader(ds, &(pd_io_data_loader_opts){.batch_sampler = s, .batch_size = 4});
  assert_null(bad);
  assert_non_null(strstr(pd_last_error(), "batch_sampler"));
  pd_io_sampler *seq = pd_io_sequence_sampler(ds);
  bad = pd_io_data_loader(ds, &(pd_io_data_loader_opts){.batch_sampler = seq});
  assert_null(bad);
  assert_non_null(strstr(pd_last_error(), "SequenceSampler"));
  pd_io_sampler_release(seq);
  pd_io_sampler_release(s);
  assert_null(pd_io_data_loader(ds, &(pd_io_data_loader_opts){.num_workers = -1}));
  assert_non_null(strstr(pd_last_error(), "num_workers"));
  assert_null(pd_io_data_loader(ds, &(pd_io_data_loader_opts){.batch_size = -2}));
  assert_non_null(strstr(pd_last_error(), "-2"));
  pd_io_dataset_release(ds);
  expect_no_live_tensors();
}

/* batch_size -1 (None): samples come one by one, not stacked */
static void test_no_batching(void **state) {
  (void)state;
  toy t;
  pd_io_dataset *ds = toy_dataset(&t, 3);
  pd_io_loader *l = pd_io_data_loader(ds, &(pd_io_data_loader_opts){.batch_size = -1});
  assert_int_equal(pd_io_loader_len(l), 3);
  pd_scope_begin();
  pd_tensor *b[2];
  for (int64_t i = 0; i < 3; i++) {
    assert_int_equal(pd_io_loader_next(l, b, 2), 2);
    expect_shape(b[0], 1, SHAPE(3));
    assert_int_equal(pd_tensor_item(b[1]), i);
  }
  assert_int_equal(pd_io_loader_next(l, b, 2), 0);
  pd_scope_end();
  pd_io_loader_release(l);
  assert_null(pd_io_data_loader(ds, &(pd_io_data_loader_opts){.batch_size = -1, .shuffle = true}));
  pd_io_dataset_release(ds);
  expect_no_live_tensors();
}

/* iterable datasets: batches of next(), the last short one unless drop_last */
typedef struct counter {
  int64_t n, i, fail_at;
} counter;
static int counter_next(void *user, pd_tensor **out, int max_out) {
  (void)max_out;
  counter *c = user;
  if (c->i >= c->n) return 0;
  int64_t v = c->i++;
  if (v == c->fail_at) return pd_set_error(PD_ERR_IO, "stream broke at %lld", (long long)v);
  out[0] = pd_to_tensor(&v, PD_INT64, 0, NULL);
  return 1;
}
static pd_status counter_reset(void *user) {
  ((counter *)user)->i = 0;
  return PD_OK;
}

static void test_iterable(void **state) {
  (void)state;
  counter c = {10, 0, -1};
  pd_io_dataset *ds =
      pd_io_dataset_new(&(pd_io_dataset_fns){.next = counter_next, .reset = counter_reset}, &c);
  for (int w = 0; w < 3; w += 2) {
    for (int drop = 0; drop < 2; drop++) {
      pd_io_loader *l = pd_io_data_loader(
          ds, &(pd_io_data_loader_opts){.batch_size = 4, .drop_last = drop, .num_workers = w});
      assert_true(pd_io_loader_len(l) < 0);
      assert_non_null(strstr(pd_last_error(), "IterableDataset"));
      for (int epoch = 0; epoch < 2; epoch++) {
        pd_scope_begin();
        pd_tensor *b[1];
        assert_int_equal(pd_io_loader_next(l, b, 1), 1);
        EXPECT_VALUES(b[0], 0, 0, 1, 2, 3);
        assert_int_equal(pd_io_loader_next(l, b, 1), 1);
        EXPECT_VALUES(b[0], 0, 4, 5, 6, 7);
        if (!drop) {
          assert_int_equal(pd_io_loader_next(l, b, 1), 1);
          EXPECT_VALUES(b[0], 0, 8, 9);
        }
        assert_int_equal(pd_io_loader_next(l, b, 1), 0);
        pd_scope_end();
      }
      pd_io_loader_release(l);
    }
  }
  /* errors from next */
  c.fail_at = 5;
  pd_io_loader *l = pd_io_data_loader(ds, &(pd_io_data_loader_opts){.batch_size = 4, .num_workers = 1});
  pd_scope_begin();
  pd_tensor *b[1];
  assert_int_equal(pd_io_loader_next(l, b, 1), 1);
  assert_true(pd_io_loader_next(l, b, 1) < 0);
  assert_non_null(strstr(pd_last_error(), "stream broke at 5"));
  pd_scope_end();
  pd_io_loader_release(l);
  assert_null(pd_io_data_loader(ds, &(pd_io_data_loader_opts){.shuffle = true}));
  assert_non_null(strstr(pd_last_error(), "shuffle"));
  pd_io_dataset_release(ds);
  expect_no_live_tensors();
}

/* a TensorDataset through the loader with workers */
static void test_tensor_dataset_loader(void **state) {
  (void)state;
  pd_scope_begin();
  double xv[24];
  for (int i = 0; i < 24; i++) xv[i] = i;
  pd_tensor *x = pd_tensor_from_f64(xv, PD_FLOAT64, 3, SHAPE(6, 2, 2));
  pd_tensor *y = T(PD_INT32, 1, SHAPE(6), 5, 4, 3, 2, 1, 0);
  pd_io_dataset *ds = pd_io_tensor_dataset((pd_tensor *[]){x, y}, 2);
  pd_io_loader *l = pd_io_data_loader(ds, &(pd_io_data_loader_opts){.batch_size = 4, .num_workers = 2});
  pd_tensor *b[2];
  assert_int_equal(pd_io_loader_next(l, b, 2), 2);
  expect_shape(b[0], 3, SHAPE(4, 2, 2));
  for (int i = 0; i < 16; i++) assert_true(pd_tensor_item_at(b[0], i) == i);
  EXPECT_VALUES(b[1], 0, 5, 4, 3, 2);
  assert_int_equal(pd_tensor_dtype(b[1]), PD_INT32);
  assert_int_equal(pd_io_loader_next(l, b, 2), 2);
  expect_shape(b[0], 3, SHAPE(2, 2, 2));
  assert_int_equal(pd_io_loader_next(l, b, 2), 0);
  pd_io_loader_release(l);
  pd_io_dataset_release(ds);
  pd_scope_end();
  expect_no_live_tensors();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_batches_in_order),      cmocka_unit_test(test_workers_same_order),
      cmocka_unit_test(test_custom_collate),        cmocka_unit_test(test_errors_propagate),
      cmocka_unit_test(test_collate_errors),        cmocka_unit_test(test_reset_and_destroy_mid_epoch),
      cmocka_unit_test(test_prefetch_is_bounded),   cmocka_unit_test(test_batch_sampler_option),
      cmocka_unit_test(test_no_batching),           cmocka_unit_test(test_iterable),
      cmocka_unit_test(test_tensor_dataset_loader),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
