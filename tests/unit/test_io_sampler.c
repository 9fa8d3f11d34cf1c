/* paddle.io datasets and samplers: Dataset callbacks, TensorDataset, Subset,
 * random_split, SequenceSampler, RandomSampler, BatchSampler and
 * DistributedBatchSampler (index lists derived by hand from Paddle's
 * algorithm; NumPy's RandomState shuffle checked against known outputs). */
#include <stdlib.h>
#include <string.h>

#include "io/io_internal.h"
#include "test_util.h"

/* ---- a dataset of n samples: (int64 0-D tensor holding the index) --------- */
static int64_t range_len(void *user) { return *(int64_t *)user; }
static int range_get_item(void *user, int64_t index, pd_tensor **out, int max_out) {
  (void)user;
  (void)max_out;
  out[0] = pd_to_tensor(&index, PD_INT64, 0, NULL);
  return 1;
}
static pd_io_dataset *range_dataset(int64_t *n) {
  pd_io_dataset_fns fns = {.len = range_len, .get_item = range_get_item};
  return pd_io_dataset_new(&fns, n);
}

static void expect_indices(const pd_io_epoch *e, const int64_t *want, int64_t n) {
  assert_int_equal(e->num_indices, n);
  for (int64_t i = 0; i < n; i++)
    if (e->indices[i] != want[i])
      fail_msg("index %lld: got %lld, want %lld", (long long)i, (long long)e->indices[i], (long long)want[i]);
}
#define EXPECT_INDICES(e, ...)                        \
  expect_indices((e), (const int64_t[]){__VA_ARGS__}, \
                 (int64_t)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t)))
/* batch boundaries: the sizes of each batch */
static void expect_batches(const pd_io_epoch *e, const int64_t *sizes, int64_t nb) {
  assert_int_equal(e->num_batches, nb);
  for (int64_t b = 0; b < nb; b++) assert_int_equal(e->offsets[b + 1] - e->offsets[b], sizes[b]);
}
#define EXPECT_BATCHES(e, ...)                        \
  expect_batches((e), (const int64_t[]){__VA_ARGS__}, \
                 (int64_t)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t)))

static void expect_status_error(int st, const char *frag1, const char *frag2) {
  if (st >= 0) fail_msg("expected an error, got status %d", st);
  const char *m = pd_last_error();
  if (frag1 && !strstr(m, frag1)) fail_msg("error '%s' lacks '%s'", m, frag1);
  if (frag2 && !strstr(m, frag2)) fail_msg("error '%s' lacks '%s'", m, frag2);
}
static void expect_null_error(const void *p, const char *frag1, const char *frag2) {
  if (p) fail_msg("expected NULL");
  expect_status_error(-1, frag1, frag2);
}

/* ---- datasets ---------------------------------------------------------------------- */
static void test_dataset_callbacks(void **state) {
  (void)state;
  int64_t n = 5;
  pd_io_dataset *ds = range_dataset(&n);
  assert_int_equal(pd_io_dataset_len(ds), 5);
  assert_false(pd_io_dataset_is_iterable(ds));
  pd_scope_begin();
  pd_tensor *out[2];
  assert_int_equal(pd_io_dataset_get_item(ds, 3, out, 2), 1);
  assert_int_equal(pd_tensor_item(out[0]), 3);
  expect_status_error(pd_io_dataset_get_item(ds, 5, out, 2), "index 5", "[0, 5)");
  expect_status_error(pd_io_dataset_get_item(ds, -1, out, 2), "index -1", NULL);
  expect_status_error(pd_io_dataset_next(ds, out, 2), "iterable", NULL);
  pd_scope_end();
  pd_io_dataset_release(ds);
  expect_null_error(pd_io_dataset_new(&(pd_io_dataset_fns){.get_item = range_get_item}, NULL), "len", NULL);
  expect_null_error(pd_io_dataset_new(&(pd_io_dataset_fns){.len = range_len}, NULL), "get_item", NULL);
  expect_no_live_tensors();
}

/* get_item that fails at one index, and one that forgets an output */
static int failing_get_item(void *user, int64_t index, pd_tensor **out, int max_out) {
  (void)user;
  (void)max_out;
  if (index == 2) return pd_set_error(PD_ERR_IO, "cannot decode record %lld", (long long)index);
  if (index == 3) return 1; /* out[0] left NULL */
  out[0] = pd_to_tensor(&index, PD_INT64, 0, NULL);
  return 1;
}

static void test_dataset_errors_name_the_index(void **state) {
  (void)state;
  int64_t n = 4;
  pd_io_dataset *ds =
      pd_io_dataset_new(&(pd_io_dataset_fns){.len = range_len, .get_item = failing_get_item}, &n);
  pd_scope_begin();
  pd_tensor *out[2];
  expect_status_error(pd_io_dataset_get_item(ds, 2, out, 2), "sample 2", "cannot decode record 2");
  assert_null(out[0]);
  expect_status_error(pd_io_dataset_get_item(ds, 3, out, 2), "sample 3", "NULL");
  assert_int_equal(pd_io_dataset_get_item(ds, 1, out, 2), 1);
  pd_scope_end();
  pd_io_dataset_release(ds);
  expect_no_live_tensors();
}

/* an iterable dataset counting 0 .. n-1, rewound by reset */
typedef struct counter {
  int64_t n, i;
  int resets;
} counter;
static int counter_next(void *user, pd_tensor **out, int max_out) {
  (void)max_out;
  counter *c = user;
  if (c->i >= c->n) return 0;
  int64_t v = c->i++;
  out[0] = pd_to_tensor(&v, PD_INT64, 0, NULL);
  return 1;
}
static pd_status counter_reset(void *user) {
  counter *c = user;
  c->i = 0;
  c->resets++;
  return PD_OK;
}

static void test_iterable_dataset(void **state) {
  (void)state;
  counter c = {3, 0, 0};
  pd_io_dataset *ds =
      pd_io_dataset_new(&(pd_io_dataset_fns){.next = counter_next, .reset = counter_reset}, &c);
  assert_true(pd_io_dataset_is_iterable(ds));
  pd_scope_begin();
  pd_tensor *out[1];
  for (int64_t i = 0; i < 3; i++) {
    assert_int_equal(pd_io_dataset_next(ds, out, 1), 1);
    assert_int_equal(pd_tensor_item(out[0]), i);
  }
  assert_int_equal(pd_io_dataset_next(ds, out, 1), 0);
  assert_int_equal(pd_io_dataset_reset(ds), PD_OK);
  assert_int_equal(pd_io_dataset_next(ds, out, 1), 1);
  assert_int_equal(pd_tensor_item(out[0]), 0);
  expect_status_error((int)pd_io_dataset_len(ds), "len", "iterable");
  expect_status_error(pd_io_dataset_get_item(ds, 0, out, 1), "get_item", "iterable");
  pd_scope_end();
  expect_null_error(pd_io_sequence_sampler(ds), "SequenceSampler", "iterable");
  expect_null_error(pd_io_subset(ds, (const int64_t[]){0}, 1), "Subset", "iterable");
  pd_io_dataset_release(ds);
  expect_no_live_tensors();
}

static void test_tensor_dataset(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = T(PD_FLOAT32, 2, SHAPE(3, 2), 1, 2, 3, 4, 5, 6);
  pd_tensor *y = T(PD_INT64, 1, SHAPE(3), 7, 8, 9);
  pd_tensor *xt = pd_transpose(T(PD_FLOAT32, 2, SHAPE(2, 3), 1, 2, 3, 4, 5, 6), 2, (const int64_t[]){1, 0});
  pd_io_dataset *ds = pd_io_tensor_dataset((pd_tensor *[]){x, y, xt}, 3);
  assert_non_null(ds);
  assert_int_equal(pd_io_dataset_len(ds), 3);
  pd_tensor *out[3];
  assert_int_equal(pd_io_dataset_get_item(ds, 1, out, 3), 3);
  expect_shape(out[0], 1, SHAPE(2));
  EXPECT_VALUES(out[0], 0, 3, 4);
  expect_shape(out[1], 0, NULL);
  EXPECT_VALUES(out[1], 0, 8);
  EXPECT_VALUES(out[2], 0, 2, 5); /* row 1 of the transposed view */
  assert_int_equal(pd_io_dataset_get_item(ds, 2, out, 3), 3);
  EXPECT_VALUES(out[0], 0, 5, 6);
  expect_status_error(pd_io_dataset_get_item(ds, 1, out, 2), "3 fields", "room of 2");
  expect_null_error(pd_io_tensor_dataset((pd_tensor *[]){x, T(PD_INT64, 1, SHAPE(2), 1, 2)}, 2),
                    "TensorDataset", "[2]");
  expect_null_error(pd_io_tensor_dataset((pd_tensor *[]){pd_full(0, NULL, 1, PD_FLOAT32)}, 1),
                    "TensorDataset", "0-D");
  expect_null_error(pd_io_tensor_dataset(NULL, 0), "TensorDataset", "got 0");
  pd_scope_end();
  pd_io_dataset_release(ds); /* it kept its own references */
  expect_no_live_tensors();
}

static void test_subset(void **state) {
  (void)state;
  int64_t n = 6;
  pd_io_dataset *ds = range_dataset(&n);
  pd_io_dataset *sub = pd_io_subset(ds, (const int64_t[]){4, 1, 1}, 3);
  pd_io_dataset_release(ds); /* the subset keeps it alive */
  assert_int_equal(pd_io_dataset_len(sub), 3);
  pd_scope_begin();
  pd_tensor *out[1];
  const int64_t want[3] = {4, 1, 1};
  for (int i = 0; i < 3; i++) {
    assert_int_equal(pd_io_dataset_get_item(sub, i, out, 1), 1);
    assert_int_equal(pd_tensor_item(out[0]), want[i]);
  }
  expect_status_error(pd_io_dataset_get_item(sub, 3, out, 1), "index 3", NULL);
  pd_scope_end();
  expect_null_error(pd_io_subset(sub, (const int64_t[]){0, 3}, 2), "indices[1] = 3", "[0, 3)");
  /* errors of the underlying dataset name both indices */
  int64_t m = 4;
  pd_io_dataset *bad =
      pd_io_dataset_new(&(pd_io_dataset_fns){.len = range_len, .get_item = failing_get_item}, &m);
  pd_io_dataset *bsub = pd_io_subset(bad, (const int64_t[]){0, 2}, 2);
  pd_io_dataset_release(bad);
  pd_scope_begin();
  expect_status_error(pd_io_dataset_get_item(bsub, 1, out, 1), "sample 1", "sample 2 of the underlying");
  assert_non_null(strstr(pd_last_error(), "cannot decode record 2"));
  pd_scope_end();
  pd_io_dataset_release(bsub);
  pd_io_dataset_release(sub);
  expect_no_live_tensors();
}

static int64_t subset_index(pd_io_dataset *s, int64_t i) {
  pd_tensor *out[1];
  pd_scope_begin();
  assert_int_equal(pd_io_dataset_get_item(s, i, out, 1), 1);
  int64_t v = (int64_t)pd_tensor_item(out[0]);
  pd_scope_end();
  return v;
}

static void test_random_split(void **state) {
  (void)state;
  int64_t n = 10;
  pd_io_dataset *ds = range_dataset(&n);
  pd_io_dataset *parts[3];
  /* seed 0: the permutation is paddle.randperm from the global generator */
  pd_seed(2023);
  assert_int_equal(pd_io_random_split(ds, (const double[]){3, 7}, 2, 0, parts), PD_OK);
  pd_seed(2023);
  pd_scope_begin();
  pd_tensor *perm = pd_randperm(10, PD_INT64);
  assert_int_equal(pd_io_dataset_len(parts[0]), 3);
  assert_int_equal(pd_io_dataset_len(parts[1]), 7);
  for (int64_t i = 0; i < 3; i++) assert_int_equal(subset_index(parts[0], i), pd_tensor_item_at(perm, i));
  for (int64_t i = 0; i < 7; i++) assert_int_equal(subset_index(parts[1], i), pd_tensor_item_at(perm, 3 + i));
  pd_scope_end();
  pd_io_dataset_release(parts[0]);
  pd_io_dataset_release(parts[1]);
  /* fractions: floor(10 * f) = 3, 3, 2, the remainder 2 goes to the first two */
  assert_int_equal(pd_io_random_split(ds, (const double[]){0.3, 0.3, 0.4}, 3, 7, parts), PD_OK);
  assert_int_equal(pd_io_dataset_len(parts[0]), 3);
  assert_int_equal(pd_io_dataset_len(parts[1]), 3);
  assert_int_equal(pd_io_dataset_len(parts[2]), 4);
  int seen[10] = {0};
  for (int p = 0; p < 3; p++)
    for (int64_t i = 0; i < pd_io_dataset_len(parts[p]); i++) seen[subset_index(parts[p], i)]++;
  for (int i = 0; i < 10; i++) assert_int_equal(seen[i], 1);
  /* a fixed seed gives the same split whatever the global generator did */
  int64_t first[10], k = 0;
  for (int p = 0; p < 3; p++)
    for (int64_t i = 0; i < pd_io_dataset_len(parts[p]); i++) first[k++] = subset_index(parts[p], i);
  for (int p = 0; p < 3; p++) pd_io_dataset_release(parts[p]);
  pd_seed(99);
  assert_int_equal(pd_io_random_split(ds, (const double[]){0.3, 0.3, 0.4}, 3, 7, parts), PD_OK);
  k = 0;
  for (int p = 0; p < 3; p++)
    for (int64_t i = 0; i < pd_io_dataset_len(parts[p]); i++)
      assert_int_equal(subset_index(parts[p], i), first[k++]);
  for (int p = 0; p < 3; p++) pd_io_dataset_release(parts[p]);
  /* 0.25 * 10 = 2.5 -> 2 each, remainder 2 */
  pd_io_dataset *four[4];
  assert_int_equal(pd_io_random_split(ds, (const double[]){0.25, 0.25, 0.25, 0.25}, 4, 1, four), PD_OK);
  const int64_t want_len[4] = {3, 3, 2, 2};
  for (int p = 0; p < 4; p++) {
    assert_int_equal(pd_io_dataset_len(four[p]), want_len[p]);
    pd_io_dataset_release(four[p]);
  }
  expect_status_error(pd_io_random_split(ds, (const double[]){3, 6}, 2, 0, parts), "Sum of input lengths (9)",
                      "(10)");
  expect_status_error(pd_io_random_split(ds, (const double[]){2.5, 7.5}, 2, 0, parts), "index 0", "2.5");
  expect_status_error(pd_io_random_split(ds, (const double[]){1.5, -0.5}, 2, 0, parts), "Fraction at index 0",
                      "1.5");
  pd_io_dataset_release(ds);
  expect_no_live_tensors();
}

/* ---- samplers ---------------------------------------------------------------------- */
static void test_sequence_and_random_sampler(void **state) {
  (void)state;
  int64_t n = 6;
  pd_io_dataset *ds = range_dataset(&n);
  pd_io_sampler *s = pd_io_sequence_sampler(ds);
  assert_int_equal(pd_io_sampler_len(s), 6);
  assert_false(pd_io_sampler_is_batch(s));
  pd_io_epoch e;
  assert_int_equal(pd_io_sampler_epoch(s, &e), PD_OK);
  EXPECT_INDICES(&e, 0, 1, 2, 3, 4, 5);
  assert_null(e.offsets);
  pd_io_epoch_free(&e);
  pd_io_sampler_release(s);

  /* RandomSampler: paddle.randperm of the global generator, cut to num_samples */
  s = pd_io_random_sampler(ds, false, 0);
  assert_int_equal(pd_io_sampler_len(s), 6);
  pd_seed(42);
  assert_int_equal(pd_io_sampler_epoch(s, &e), PD_OK);
  pd_seed(42);
  pd_scope_begin();
  pd_tensor *perm = pd_randperm(6, PD_INT64);
  for (int i = 0; i < 6; i++) assert_int_equal(e.indices[i], pd_tensor_item_at(perm, i));
  pd_scope_end();
  /* the exact sequence for seed 42 (pins the generator: Philox 4x32-10) */
  const int64_t seed42[6] = {4, 1, 0, 5, 2, 3};
  expect_indices(&e, seed42, 6);
  pd_io_epoch_free(&e);
  pd_seed(42);
  assert_int_equal(pd_io_sampler_epoch(s, &e), PD_OK);
  expect_indices(&e, seed42, 6);
  pd_io_epoch e2;
  assert_int_equal(pd_io_sampler_epoch(s, &e2), PD_OK); /* the next pass draws anew */
  assert_int_equal(e2.num_indices, 6);
  assert_true(memcmp(e.indices, e2.indices, sizeof seed42) != 0);
  int seen[6] = {0};
  for (int i = 0; i < 6; i++) seen[e2.indices[i]]++;
  for (int i = 0; i < 6; i++) assert_int_equal(seen[i], 1);
  pd_io_epoch_free(&e);
  pd_io_epoch_free(&e2);
  pd_io_sampler_release(s);

  s = pd_io_random_sampler(ds, false, 4);
  assert_int_equal(pd_io_sampler_len(s), 4);
  pd_seed(42);
  assert_int_equal(pd_io_sampler_epoch(s, &e), PD_OK);
  expect_indices(&e, seed42, 4);
  pd_io_epoch_free(&e);
  pd_io_sampler_release(s);

  /* with replacement: paddle.randint(0, n, [num_samples]) */
  s = pd_io_random_sampler(ds, true, 20);
  assert_int_equal(pd_io_sampler_len(s), 20);
  pd_seed(5);
  assert_int_equal(pd_io_sampler_epoch(s, &e), PD_OK);
  pd_seed(5);
  pd_scope_begin();
  pd_tensor *draws = pd_randint(0, 6, 1, SHAPE(20), PD_INT64);
  for (int i = 0; i < 20; i++) assert_int_equal(e.indices[i], pd_tensor_item_at(draws, i));
  pd_scope_end();
  EXPECT_INDICES(&e, 4, 5, 2, 3, 5, 1, 4, 0, 4, 2, 3, 0, 5, 1, 3, 5, 1, 5, 2, 0);
  pd_io_epoch_free(&e);
  pd_io_sampler_release(s);

  expect_null_error(pd_io_random_sampler(ds, false, 7), "num_samples: 7", "data_source: 6");
  expect_null_error(pd_io_random_sampler(ds, true, -3), "positive integer", "-3");
  int64_t zero = 0;
  pd_io_dataset *empty = range_dataset(&zero);
  expect_null_error(pd_io_random_sampler(empty, false, 0), "positive integer", "0");
  pd_io_dataset_release(empty);
  pd_io_dataset_release(ds);
  expect_no_live_tensors();
}

static void test_batch_sampler(void **state) {
  (void)state;
  int64_t n = 10;
  pd_io_dataset *ds = range_dataset(&n);
  pd_io_sampler *b = pd_io_batch_sampler(ds, NULL, false, 4, false);
  assert_true(pd_io_sampler_is_batch(b));
  assert_int_equal(pd_io_sampler_len(b), 3);
  pd_io_epoch e;
  assert_int_equal(pd_io_sampler_epoch(b, &e), PD_OK);
  EXPECT_INDICES(&e, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9);
  EXPECT_BATCHES(&e, 4, 4, 2);
  pd_io_epoch_free(&e);
  pd_io_sampler_release(b);

  b = pd_io_batch_sampler(ds, NULL, false, 4, true);
  assert_int_equal(pd_io_sampler_len(b), 2);
  assert_int_equal(pd_io_sampler_epoch(b, &e), PD_OK);
  EXPECT_BATCHES(&e, 4, 4);
  pd_io_epoch_free(&e);
  pd_io_sampler_release(b);

  /* over a sampler: the sampler's order */
  pd_io_sampler *r = pd_io_random_sampler(ds, false, 0);
  b = pd_io_batch_sampler(NULL, r, false, 3, false);
  assert_int_equal(pd_io_sampler_len(b), 4);
  pd_seed(11);
  assert_int_equal(pd_io_sampler_epoch(b, &e), PD_OK);
  pd_seed(11);
  pd_io_epoch re;
  assert_int_equal(pd_io_sampler_epoch(r, &re), PD_OK);
  expect_indices(&e, re.indices, 10);
  EXPECT_BATCHES(&e, 3, 3, 3, 1);
  pd_io_epoch_free(&e);
  pd_io_epoch_free(&re);
  /* shuffle=True over a dataset is a RandomSampler */
  pd_io_sampler *bs = pd_io_batch_sampler(ds, NULL, true, 3, false);
  pd_seed(11);
  assert_int_equal(pd_io_sampler_epoch(bs, &e), PD_OK);
  pd_seed(11);
  assert_int_equal(pd_io_sampler_epoch(r, &re), PD_OK);
  expect_indices(&e, re.indices, 10);
  pd_io_epoch_free(&e);
  pd_io_epoch_free(&re);
  pd_io_sampler_release(bs);

  expect_null_error(pd_io_batch_sampler(ds, NULL, false, 0, false), "batch_size", "0");
  expect_null_error(pd_io_batch_sampler(NULL, NULL, false, 2, false), "either dataset or sampler", NULL);
  expect_null_error(pd_io_batch_sampler(ds, r, false, 2, false), "both dataset and sampler", NULL);
  expect_null_error(pd_io_batch_sampler(NULL, r, true, 2, false), "shuffle should be False", NULL);
  expect_null_error(pd_io_batch_sampler(NULL, b, false, 2, false), "batch sampler", "BatchSampler");
  pd_io_sampler_release(b);
  pd_io_sampler_release(r);
  pd_io_dataset_release(ds);
  expect_no_live_tensors();
}

/* NumPy's legacy generator: MT19937 (init_genrand) and RandomState.shuffle */
static void test_numpy_random_state(void **state) {
  (void)state;
  pd_mt19937 mt;
  pd_mt19937_seed(&mt, 5489); /* the reference implementation's default seed */
  assert_int_equal(pd_mt19937_next32(&mt), 3499211612u);
  /* numpy: np.random.seed(0); np.random.permutation(10) */
  int64_t x[10];
  for (int i = 0; i < 10; i++) x[i] = i;
  pd_mt19937_seed(&mt, 0);
  pd_numpy_shuffle_i64(&mt, x, 10);
  const int64_t want[10] = {2, 8, 4, 9, 1, 6, 7, 3, 0, 5};
  for (int i = 0; i < 10; i++) assert_int_equal(x[i], want[i]);
}

static void dist_epoch(pd_io_dataset *ds, int64_t bs, int nranks, int rank, bool shuffle, bool drop_last,
                       pd_io_epoch *e) {
  pd_io_sampler *s = pd_io_distributed_batch_sampler(ds, bs, nranks, rank, shuffle, drop_last);
  assert_non_null(s);
  assert_int_equal(pd_io_sampler_epoch(s, e), PD_OK);
  assert_int_equal(pd_io_sampler_len(s), e->num_batches);
  pd_io_sampler_release(s);
}

static void test_distributed_batch_sampler(void **state) {
  (void)state;
  pd_io_epoch e;
  /* 10 samples, 3 replicas, batch 2: padded to 12 with 0, 1; replica r takes
   * indices[2r : 2r+2] of each round of 6 */
  int64_t n10 = 10;
  pd_io_dataset *ds = range_dataset(&n10);
  dist_epoch(ds, 2, 3, 0, false, false, &e);
  EXPECT_INDICES(&e, 0, 1, 6, 7);
  EXPECT_BATCHES(&e, 2, 2);
  pd_io_epoch_free(&e);
  dist_epoch(ds, 2, 3, 1, false, false, &e);
  EXPECT_INDICES(&e, 2, 3, 8, 9);
  pd_io_epoch_free(&e);
  dist_epoch(ds, 2, 3, 2, false, false, &e);
  EXPECT_INDICES(&e, 4, 5, 0, 1);
  pd_io_epoch_free(&e);
  /* 10 samples, 2 replicas, batch 4: 8 in full rounds, the last 2 split 1 + 1 */
  dist_epoch(ds, 4, 2, 0, false, false, &e);
  EXPECT_INDICES(&e, 0, 1, 2, 3, 8);
  EXPECT_BATCHES(&e, 4, 1);
  pd_io_epoch_free(&e);
  dist_epoch(ds, 4, 2, 1, false, false, &e);
  EXPECT_INDICES(&e, 4, 5, 6, 7, 9);
  pd_io_epoch_free(&e);
  dist_epoch(ds, 4, 2, 1, false, true, &e);
  EXPECT_INDICES(&e, 4, 5, 6, 7, 9);
  EXPECT_BATCHES(&e, 4);
  pd_io_epoch_free(&e);
  /* 8 samples, 3 replicas, batch 2: padded to 9 (with 0); a last round of 3 */
  int64_t n8 = 8;
  pd_io_dataset *ds8 = range_dataset(&n8);
  const int64_t want8[3][3] = {{0, 1, 6}, {2, 3, 7}, {4, 5, 0}};
  int seen[8] = {0};
  for (int r = 0; r < 3; r++) {
    dist_epoch(ds8, 2, 3, r, false, false, &e);
    expect_indices(&e, want8[r], 3);
    EXPECT_BATCHES(&e, 2, 1);
    for (int i = 0; i < 3; i++) seen[e.indices[i]]++;
    pd_io_epoch_free(&e);
  }
  for (int i = 0; i < 8; i++) assert_int_equal(seen[i], i == 0 ? 2 : 1); /* every index, 0 twice */
  /* more replicas than samples: the padding repeats the list */
  int64_t n2 = 2;
  pd_io_dataset *ds2 = range_dataset(&n2);
  for (int r = 0; r < 5; r++) {
    dist_epoch(ds2, 1, 5, r, false, false, &e);
    EXPECT_INDICES(&e, r % 2);
    pd_io_epoch_free(&e);
  }

  /* shuffle: np.random.RandomState(epoch).shuffle of the padded list; each
   * pass moves to the next epoch; set_epoch picks one */
  pd_io_sampler *s0 = pd_io_distributed_batch_sampler(ds, 3, 2, 0, true, false);
  pd_io_sampler *s1 = pd_io_distributed_batch_sampler(ds, 3, 2, 1, true, false);
  assert_int_equal(pd_io_sampler_len(s0), 2);
  assert_int_equal(pd_io_sampler_epoch(s0, &e), PD_OK); /* epoch 0: 2 8 4 9 1 6 7 3 0 5 */
  EXPECT_INDICES(&e, 2, 8, 4, 7, 3);
  EXPECT_BATCHES(&e, 3, 2);
  pd_io_epoch_free(&e);
  assert_int_equal(pd_io_sampler_epoch(s1, &e), PD_OK);
  EXPECT_INDICES(&e, 9, 1, 6, 0, 5);
  pd_io_epoch_free(&e);
  assert_int_equal(pd_io_sampler_epoch(s0, &e), PD_OK); /* epoch 1 */
  EXPECT_INDICES(&e, 2, 9, 6, 1, 7);
  pd_io_epoch_free(&e);
  assert_int_equal(pd_io_sampler_epoch(s1, &e), PD_OK);
  EXPECT_INDICES(&e, 4, 0, 3, 8, 5);
  pd_io_epoch_free(&e);
  assert_int_equal(pd_io_distributed_batch_sampler_set_epoch(s0, 5), PD_OK);
  assert_int_equal(pd_io_distributed_batch_sampler_set_epoch(s1, 5), PD_OK);
  assert_int_equal(pd_io_sampler_epoch(s0, &e), PD_OK);
  EXPECT_INDICES(&e, 9, 5, 2, 0, 8);
  pd_io_epoch_free(&e);
  assert_int_equal(pd_io_sampler_epoch(s1, &e), PD_OK);
  EXPECT_INDICES(&e, 4, 7, 1, 6, 3);
  pd_io_epoch_free(&e);
  assert_int_equal(pd_io_distributed_batch_sampler_set_epoch(s0, 5), PD_OK); /* same epoch, same order */
  assert_int_equal(pd_io_sampler_epoch(s0, &e), PD_OK);
  EXPECT_INDICES(&e, 9, 5, 2, 0, 8);
  pd_io_epoch_free(&e);
  expect_status_error(pd_io_distributed_batch_sampler_set_epoch(s0, -1), "epoch -1", NULL);
  pd_io_sampler *plain = pd_io_sequence_sampler(ds);
  expect_status_error(pd_io_distributed_batch_sampler_set_epoch(plain, 1), "DistributedBatchSampler",
                      "SequenceSampler");
  pd_io_sampler_release(plain);
  pd_io_sampler_release(s0);
  pd_io_sampler_release(s1);
  /* one replica: the shuffled list as it is */
  int64_t n7 = 7;
  pd_io_dataset *ds7 = range_dataset(&n7);
  pd_io_sampler *one = pd_io_distributed_batch_sampler(ds7, 3, 1, 0, true, false);
  assert_int_equal(pd_io_sampler_epoch(one, &e), PD_OK);
  EXPECT_INDICES(&e, 6, 2, 1, 3, 0, 5, 4);
  EXPECT_BATCHES(&e, 3, 3, 1);
  pd_io_epoch_free(&e);
  assert_int_equal(pd_io_sampler_epoch(one, &e), PD_OK);
  EXPECT_INDICES(&e, 6, 2, 1, 0, 4, 3, 5);
  pd_io_epoch_free(&e);
  pd_io_sampler_release(one);

  /* from the environment, as ParallelEnv */
  setenv("PADDLE_TRAINERS_NUM", "3", 1);
  setenv("PADDLE_TRAINER_ID", "2", 1);
  pd_io_sampler *env = pd_io_distributed_batch_sampler(ds, 2, -1, -1, false, false);
  assert_int_equal(pd_io_sampler_epoch(env, &e), PD_OK);
  EXPECT_INDICES(&e, 4, 5, 0, 1);
  pd_io_epoch_free(&e);
  pd_io_sampler_release(env);
  unsetenv("PADDLE_TRAINERS_NUM");
  unsetenv("PADDLE_TRAINER_ID");

  expect_null_error(pd_io_distributed_batch_sampler(ds, 2, 2, 2, false, false), "rank 2", "[0, 2)");
  expect_null_error(pd_io_distributed_batch_sampler(ds, 0, 2, 0, false, false), "batch_size", "0");
  expect_null_error(pd_io_distributed_batch_sampler(ds, 2, 0, 0, false, false), "num_replicas", "0");
  pd_io_dataset_release(ds);
  pd_io_dataset_release(ds8);
  pd_io_dataset_release(ds2);
  pd_io_dataset_release(ds7);
  expect_no_live_tensors();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_dataset_callbacks),
      cmocka_unit_test(test_dataset_errors_name_the_index),
      cmocka_unit_test(test_iterable_dataset),
      cmocka_unit_test(test_tensor_dataset),
      cmocka_unit_test(test_subset),
      cmocka_unit_test(test_random_split),
      cmocka_unit_test(test_sequence_and_random_sampler),
      cmocka_unit_test(test_batch_sampler),
      cmocka_unit_test(test_numpy_random_state),
      cmocka_unit_test(test_distributed_batch_sampler),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
