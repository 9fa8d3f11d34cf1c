/* Random ops: reproducibility after pd_seed, bit-identical results for any
 * number of threads, the documented element -> Philox counter map,
 * statistics of 100k samples (within 5 sigma), and bad inputs. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/core_internal.h"
#include "ops/creation/creation_util.h"
#include "test_util.h"

#define N 100000

/* Mean and variance of a tensor's elements, computed here in double. */
static void moments(const pd_tensor *t, double *mean, double *var) {
  int64_t n = pd_tensor_numel(t);
  double s = 0, s2 = 0;
  for (int64_t i = 0; i < n; i++) s += pd_tensor_item_at(t, i);
  *mean = s / (double)n;
  for (int64_t i = 0; i < n; i++) {
    double d = pd_tensor_item_at(t, i) - *mean;
    s2 += d * d;
  }
  *var = s2 / (double)(n - 1);
}

/* |got - want| within 5 standard errors. */
static void expect_within(const char *what, double got, double want, double sigma) {
  if (!(fabs(got - want) <= 5 * sigma))
    fail_msg("%s: %.6g, expected %.6g +- 5 * %.3g", what, got, want, sigma);
}

/* Moments of n samples of a distribution with mean mu, variance v and
 * fourth central moment m4. */
static void expect_moments(const char *what, const pd_tensor *t, double mu, double v, double m4) {
  double mean, var, n = (double)pd_tensor_numel(t);
  moments(t, &mean, &var);
  expect_within(what, mean, mu, sqrt(v / n));
  expect_within(what, var, v, sqrt((m4 - v * v) / n));
}

/* ---- the generator contract ------------------------------------------- */
static void test_philox_known_answer(void **state) {
  (void)state;
  /* Philox4x32-10 with counter 0 and key 0 (the published test vector) */
  uint32_t w[4];
  pd_philox(0, 0, w);
  assert_int_equal(w[0], 0x6627e8d5u);
  assert_int_equal(w[1], 0xe169c58du);
  assert_int_equal(w[2], 0xbc57ac4cu);
  assert_int_equal(w[3], 0x9b00dbd8u);
  /* the batched form used by the kernels gives the same words, also across
   * the 2^32 boundary of the counter and with a 64-bit key */
  const uint64_t ctrs[3] = {0, 0xFFFFFFFCull, 123456789012345ull};
  const uint64_t keys[3] = {0, 0x5eed, 0xDEADBEEFCAFEF00Dull};
  for (int c = 0; c < 3; c++)
    for (int k = 0; k < 3; k++) {
      uint32_t lanes[PD_PHILOX_LANES][4];
      pd_philox_lanes(ctrs[c], keys[k], lanes);
      for (int l = 0; l < PD_PHILOX_LANES; l++) {
        pd_philox(ctrs[c] + (uint64_t)l, keys[k], w);
        assert_memory_equal(lanes[l], w, sizeof w);
      }
    }
}

/* After pd_seed(s) the generator starts at counter 0 with key s: rand's
 * element i is word i%4 of counter i/4; the next op continues after the
 * counters the previous one reserved. */
static void test_counter_map(void **state) {
  (void)state;
  pd_scope_begin();
  pd_seed(1234);
  pd_tensor *a = pd_rand(1, SHAPE(10), PD_FLOAT32);
  pd_tensor *b = pd_rand(1, SHAPE(3), PD_FLOAT32);
  const float *pa = pd_tensor_data(a), *pb = pd_tensor_data(b);
  for (int i = 0; i < 10; i++) {
    uint32_t w[4];
    pd_philox((uint64_t)i / 4, 1234, w);
    assert_true(pa[i] == pd_u32_to_unit_f32(w[i % 4]));
  }
  uint32_t w[4];
  pd_philox(3, 1234, w); /* a used counters 0, 1, 2 */
  for (int i = 0; i < 3; i++) assert_true(pb[i] == pd_u32_to_unit_f32(w[i]));
  /* float64: two words per element */
  pd_seed(99);
  pd_tensor *c = pd_rand(1, SHAPE(3), PD_FLOAT64);
  const double *pc = pd_tensor_data(c);
  pd_philox(0, 99, w);
  assert_true(pc[0] == pd_u64_to_unit_f64(w[0], w[1]));
  assert_true(pc[1] == pd_u64_to_unit_f64(w[2], w[3]));
  pd_philox(1, 99, w);
  assert_true(pc[2] == pd_u64_to_unit_f64(w[0], w[1]));
  assert_int_equal(pd_get_seed(), 99);
  /* randn float64: Box-Muller on the two 53-bit uniforms of counter i/2 */
  pd_seed(7);
  pd_tensor *z = pd_randn(1, SHAPE(2), PD_FLOAT64);
  pd_philox(0, 7, w);
  double u1 = 1.0 - pd_u64_to_unit_f64(w[0], w[1]), u2 = pd_u64_to_unit_f64(w[2], w[3]);
  double r = sqrt(-2.0 * log(u1));
  assert_float_equal(pd_tensor_item_at(z, 0), r * cos(2 * M_PI * u2), 1e-14);
  assert_float_equal(pd_tensor_item_at(z, 1), r * sin(2 * M_PI * u2), 1e-14);
  /* randint: 64 bits per element scaled to the range */
  pd_seed(8);
  pd_tensor *ri = pd_randint(10, 1010, 1, SHAPE(2), PD_INT64);
  pd_philox(0, 8, w);
  for (int i = 0; i < 2; i++) {
    uint64_t bits = (uint64_t)w[2 * i] << 32 | w[2 * i + 1];
    int64_t want = 10 + (int64_t)(((unsigned __int128)bits * 1000) >> 64);
    assert_int_equal((int64_t)pd_tensor_item_at(ri, i), want);
  }
  pd_scope_end();
  expect_no_live_tensors();
}

/* ---- reproducibility and thread independence --------------------------- */
typedef pd_tensor *(*make_fn)(pd_tensor *probs);

static pd_tensor *mk_rand32(pd_tensor *p) {
  (void)p;
  return pd_rand(2, SHAPE(317, 331), PD_FLOAT32);
}
static pd_tensor *mk_rand64(pd_tensor *p) {
  (void)p;
  return pd_rand(1, SHAPE(N + 3), PD_FLOAT64);
}
static pd_tensor *mk_rand16(pd_tensor *p) {
  (void)p;
  return pd_rand(1, SHAPE(N + 1), PD_FLOAT16);
}
static pd_tensor *mk_randn32(pd_tensor *p) {
  (void)p;
  return pd_randn(1, SHAPE(N + 3), PD_FLOAT32);
}
static pd_tensor *mk_randn64(pd_tensor *p) {
  (void)p;
  return pd_randn(1, SHAPE(N + 1), PD_FLOAT64);
}
static pd_tensor *mk_randnbf(pd_tensor *p) {
  (void)p;
  return pd_randn(1, SHAPE(N + 2), PD_BFLOAT16);
}
static pd_tensor *mk_uniform(pd_tensor *p) {
  (void)p;
  return pd_uniform(1, SHAPE(N), PD_FLOAT32, -2, 3, 0);
}
static pd_tensor *mk_normal(pd_tensor *p) {
  (void)p;
  return pd_normal(1, 2, 1, SHAPE(N + 1));
}
static pd_tensor *mk_randint(pd_tensor *p) {
  (void)p;
  return pd_randint(-7, 100, 1, SHAPE(N + 1), PD_INT64);
}
static pd_tensor *mk_randint32(pd_tensor *p) {
  (void)p;
  return pd_randint(0, 5, 1, SHAPE(N), PD_INT32);
}
static pd_tensor *mk_bernoulli(pd_tensor *p) { return pd_bernoulli(p); }
static pd_tensor *mk_multi_repl(pd_tensor *p) { return pd_multinomial(p, 40, true); }
static pd_tensor *mk_multi_norepl(pd_tensor *p) { return pd_multinomial(p, 5, false); }
static pd_tensor *mk_randperm(pd_tensor *p) {
  (void)p;
  return pd_randperm(N, PD_NUM_DTYPES);
}

static pd_tensor *mk_truncated(pd_tensor *p) {
  (void)p;
  pd_initializer init = pd_nn_initializer_truncated_normal(0.5, 2.0, -1.0, 3.0);
  pd_tensor *t = pd_zeros(1, SHAPE(N), PD_FLOAT32);
  return t && pd_initializer_apply(&init, t) == PD_OK ? t : NULL;
}

static const struct {
  const char *name;
  make_fn make;
  int probs; /* 0: none, 1: [N + 3] in (0, 1), 2: [2000, 8] weights */
} k_makers[] = {
    {"rand float32", mk_rand32, 0},
    {"rand float64", mk_rand64, 0},
    {"rand float16", mk_rand16, 0},
    {"randn float32", mk_randn32, 0},
    {"randn float64", mk_randn64, 0},
    {"randn bfloat16", mk_randnbf, 0},
    {"uniform", mk_uniform, 0},
    {"normal", mk_normal, 0},
    {"randint int64", mk_randint, 0},
    {"randint int32", mk_randint32, 0},
    {"bernoulli", mk_bernoulli, 1},
    {"multinomial replacement", mk_multi_repl, 2},
    {"multinomial", mk_multi_norepl, 2},
    {"randperm", mk_randperm, 0},
    {"truncated normal", mk_truncated, 0},
};

static pd_tensor *make_probs(int kind) {
  if (kind == 1) return pd_uniform(1, SHAPE(N + 3), PD_FLOAT32, 0.05, 0.95, 777);
  if (kind == 2) return pd_uniform(2, SHAPE(2000, 8), PD_FLOAT64, 0.1, 2.0, 778);
  return NULL;
}

static void test_seed_reproducible(void **state) {
  (void)state;
  pd_scope_begin();
  for (size_t k = 0; k < sizeof k_makers / sizeof *k_makers; k++) {
    pd_tensor *p = make_probs(k_makers[k].probs);
    pd_seed(2024);
    pd_tensor *a = k_makers[k].make(p);
    pd_tensor *a2 = k_makers[k].make(p); /* the generator moved on */
    pd_seed(2024);
    pd_tensor *b = k_makers[k].make(p);
    pd_seed(2025);
    pd_tensor *c = k_makers[k].make(p);
    if (!a || !b || !c || !a2) fail_msg("%s: %s", k_makers[k].name, pd_last_error());
    if (!same_bits(a, b)) fail_msg("%s: not reproducible after pd_seed", k_makers[k].name);
    if (same_bits(a, c)) fail_msg("%s: seeds 2024 and 2025 give the same tensor", k_makers[k].name);
    if (same_bits(a, a2)) fail_msg("%s: two calls give the same tensor", k_makers[k].name);
  }
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_thread_count_independent(void **state) {
  (void)state;
  int prev = pd_get_num_threads();
  pd_scope_begin();
  for (size_t k = 0; k < sizeof k_makers / sizeof *k_makers; k++) {
    pd_tensor *p = make_probs(k_makers[k].probs);
    pd_tensor *r[3];
    const int threads[3] = {1, 2, 3};
    for (int j = 0; j < 3; j++) {
      pd_set_num_threads(threads[j]);
      pd_seed(31337);
      r[j] = k_makers[k].make(p);
      if (!r[j]) fail_msg("%s: %s", k_makers[k].name, pd_last_error());
    }
    if (!same_bits(r[0], r[1]) || !same_bits(r[0], r[2]))
      fail_msg("%s: results differ between 1, 2 and 3 threads", k_makers[k].name);
  }
  pd_set_num_threads(prev);
  pd_scope_end();
  expect_no_live_tensors();
}

/* A per-op seed gives a fixed stream and leaves the global one alone. */
static void test_uniform_seed_attribute(void **state) {
  (void)state;
  pd_scope_begin();
  pd_seed(5);
  pd_tensor *g1 = pd_rand(1, SHAPE(8), PD_FLOAT32);
  pd_seed(5);
  pd_tensor *s1 = pd_uniform(1, SHAPE(8), PD_FLOAT32, -1, 1, 42);
  pd_tensor *g2 = pd_rand(1, SHAPE(8), PD_FLOAT32);
  pd_tensor *s2 = pd_uniform(1, SHAPE(8), PD_FLOAT32, -1, 1, 42);
  assert_true(same_bits(g1, g2));
  assert_true(same_bits(s1, s2));
  assert_false(same_bits(s1, pd_uniform(1, SHAPE(8), PD_FLOAT32, -1, 1, 43)));
  pd_scope_end();
  expect_no_live_tensors();
}

/* ---- statistics ------------------------------------------------------ */
static void expect_all_in(const pd_tensor *t, double lo, double hi, bool hi_open) {
  for (int64_t i = 0; i < pd_tensor_numel(t); i++) {
    double v = pd_tensor_item_at(t, i);
    if (!(v >= lo && (hi_open ? v < hi : v <= hi)))
      fail_msg("element %lld = %.9g outside [%g, %g%c", (long long)i, v, lo, hi, hi_open ? ')' : ']');
  }
}

static void test_uniform_statistics(void **state) {
  (void)state;
  pd_scope_begin();
  pd_seed(11);
  /* U[0, 1): mean 1/2, variance 1/12, fourth central moment 1/80 */
  pd_tensor *a = pd_rand(1, SHAPE(N), PD_NUM_DTYPES);
  assert_int_equal(pd_tensor_dtype(a), PD_FLOAT32);
  expect_all_in(a, 0, 1, true);
  expect_moments("rand float32", a, 0.5, 1.0 / 12, 1.0 / 80);
  pd_tensor *b = pd_rand(2, SHAPE(400, 250), PD_FLOAT64);
  expect_all_in(b, 0, 1, true);
  expect_moments("rand float64", b, 0.5, 1.0 / 12, 1.0 / 80);
  pd_tensor *h = pd_rand(1, SHAPE(N), PD_BFLOAT16);
  assert_int_equal(pd_tensor_dtype(h), PD_BFLOAT16);
  expect_all_in(h, 0, 1, false); /* rounding to 8 bits may reach 1 */
  expect_moments("rand bfloat16", h, 0.5, 1.0 / 12, 1.0 / 80);
  /* U[-3, 5): mean 1, variance 64/12, m4 = 8^4 / 80 */
  pd_tensor *u = pd_uniform(1, SHAPE(N), PD_FLOAT64, -3, 5, 0);
  expect_all_in(u, -3, 5, true);
  expect_moments("uniform", u, 1, 64.0 / 12, 4096.0 / 80);
  /* quartile counts of U[0,1): each 1/4 */
  int64_t cnt[4] = {0};
  for (int64_t i = 0; i < N; i++) cnt[(int)(pd_tensor_item_at(a, i) * 4)]++;
  for (int q = 0; q < 4; q++) expect_within("rand quartile", (double)cnt[q] / N, 0.25, sqrt(0.25 * 0.75 / N));
  /* 0-d and empty */
  assert_int_equal(pd_tensor_ndim(pd_rand(0, NULL, PD_FLOAT32)), 0);
  expect_shape(pd_rand(2, SHAPE(0, 3), PD_FLOAT32), 2, SHAPE(0, 3));
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_normal_statistics(void **state) {
  (void)state;
  pd_scope_begin();
  pd_seed(12);
  /* N(0, 1): variance 1, fourth moment 3 */
  pd_tensor *a = pd_randn(1, SHAPE(N), PD_NUM_DTYPES);
  assert_int_equal(pd_tensor_dtype(a), PD_FLOAT32);
  expect_moments("randn float32", a, 0, 1, 3);
  pd_tensor *b = pd_randn(1, SHAPE(N), PD_FLOAT64);
  expect_moments("randn float64", b, 0, 1, 3);
  /* the cosine and sine halves are each standard normal */
  double s_even = 0, s_odd = 0, q_even = 0, q_odd = 0;
  for (int64_t i = 0; i < N; i += 2) {
    double e = pd_tensor_item_at(b, i), o = pd_tensor_item_at(b, i + 1);
    s_even += e;
    s_odd += o;
    q_even += e * e;
    q_odd += o * o;
  }
  expect_within("randn even mean", s_even / (N / 2), 0, sqrt(2.0 / N));
  expect_within("randn odd mean", s_odd / (N / 2), 0, sqrt(2.0 / N));
  expect_within("randn even var", q_even / (N / 2), 1, sqrt(4.0 / N));
  expect_within("randn odd var", q_odd / (N / 2), 1, sqrt(4.0 / N));
  /* P(|z| < 1) = 0.682689 */
  int64_t inside = 0;
  for (int64_t i = 0; i < N; i++) inside += fabs(pd_tensor_item_at(a, i)) < 1;
  expect_within("randn P(|z|<1)", (double)inside / N, 0.682689492, sqrt(0.6827 * 0.3173 / N));
  /* N(2, 3^2) */
  pd_tensor *c = pd_normal(2, 3, 2, SHAPE(200, 500));
  assert_int_equal(pd_tensor_dtype(c), PD_FLOAT32);
  expect_moments("normal", c, 2, 9, 3 * 81);
  pd_tensor *h = pd_randn(1, SHAPE(N), PD_FLOAT16);
  assert_int_equal(pd_tensor_dtype(h), PD_FLOAT16);
  expect_moments("randn float16", h, 0, 1, 3);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_randint_statistics(void **state) {
  (void)state;
  pd_scope_begin();
  pd_seed(13);
  pd_tensor *a = pd_randint(-5, 7, 1, SHAPE(N), PD_NUM_DTYPES);
  assert_int_equal(pd_tensor_dtype(a), PD_INT64);
  expect_all_in(a, -5, 6, false);
  /* discrete uniform on 12 values: mean 0.5, variance (12^2 - 1) / 12 */
  double v = (144.0 - 1) / 12, m4 = 0;
  for (int k = -5; k <= 6; k++) m4 += pow(k - 0.5, 4) / 12;
  expect_moments("randint", a, 0.5, v, m4);
  int64_t cnt[12] = {0};
  for (int64_t i = 0; i < N; i++) cnt[(int)pd_tensor_item_at(a, i) + 5]++;
  for (int k = 0; k < 12; k++)
    expect_within("randint frequency", (double)cnt[k] / N, 1.0 / 12, sqrt(11.0 / 144 / N));
  pd_tensor *b = pd_randint(0, 2, 1, SHAPE(N), PD_INT32);
  assert_int_equal(pd_tensor_dtype(b), PD_INT32);
  expect_all_in(b, 0, 1, false);
  double mb, vb;
  moments(b, &mb, &vb);
  expect_within("randint 0/1 mean", mb, 0.5, sqrt(0.25 / N));
  /* a range wider than 32 bits */
  pd_tensor *c = pd_randint(-(1LL << 40), 1LL << 40, 1, SHAPE(N), PD_INT64);
  double sd = pow(2, 41) / sqrt(12);
  double mean, var;
  moments(c, &mean, &var);
  expect_within("randint wide mean", mean, 0, sd / sqrt(N));
  expect_within("randint wide sd", sqrt(var), sd, 8e-3 * sd);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_bernoulli(void **state) {
  (void)state;
  pd_scope_begin();
  pd_seed(14);
  pd_tensor *p = pd_full(1, SHAPE(N), 0.3, PD_FLOAT32);
  pd_tensor *a = pd_bernoulli(p);
  assert_int_equal(pd_tensor_dtype(a), PD_FLOAT32);
  expect_shape(a, 1, SHAPE(N));
  expect_all_in(a, 0, 1, false);
  for (int64_t i = 0; i < N; i++) assert_true(pd_tensor_item_at(a, i) == 0 || pd_tensor_item_at(a, i) == 1);
  expect_moments("bernoulli 0.3", a, 0.3, 0.21, 0.3 * 0.7 * (0.7 * 0.7 * 0.7 + 0.3 * 0.3 * 0.3) / 1.0);
  /* p = 0 and p = 1 are exact; float64, float16 and a transposed input */
  pd_tensor *x = T(PD_FLOAT64, 2, SHAPE(2, 3), 0, 1, 0, 1, 1, 0);
  EXPECT_VALUES(pd_bernoulli(x), 0, 0, 1, 0, 1, 1, 0);
  pd_tensor *xt = pd_transpose(x, 2, SHAPE(1, 0));
  pd_tensor *bt = pd_bernoulli(xt);
  expect_shape(bt, 2, SHAPE(3, 2));
  EXPECT_VALUES(bt, 0, 0, 1, 1, 1, 0, 0);
  pd_tensor *h = pd_bernoulli(T(PD_FLOAT16, 1, SHAPE(3), 1, 0, 1));
  assert_int_equal(pd_tensor_dtype(h), PD_FLOAT16);
  EXPECT_VALUES(h, 0, 1, 0, 1);
  pd_tensor *p64 = pd_full(1, SHAPE(N), 0.8, PD_FLOAT64);
  expect_moments("bernoulli 0.8", pd_bernoulli(p64), 0.8, 0.16,
                 0.8 * 0.2 * (0.2 * 0.2 * 0.2 + 0.8 * 0.8 * 0.8));
  /* errors */
  expect_error(pd_bernoulli(T(PD_FLOAT32, 1, SHAPE(3), 0.5, 1.5, 0.1)), "bernoulli", "x[1] = 1.5");
  expect_error(pd_bernoulli(T(PD_FLOAT64, 1, SHAPE(2), -0.1, 0.5)), "bernoulli", "x[0] = -0.1");
  expect_error(pd_bernoulli(T(PD_FLOAT32, 1, SHAPE(2), 0.5, NAN)), "bernoulli", "x[1] = nan");
  expect_error(pd_bernoulli(T(PD_INT64, 1, SHAPE(2), 0, 1)), "bernoulli", "int64");
  expect_error(pd_bernoulli(NULL), "bernoulli", "NULL");
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_multinomial_with_replacement(void **state) {
  (void)state;
  pd_scope_begin();
  pd_seed(15);
  /* weights need not sum to 1: 1:2:3:4 -> 0.1, 0.2, 0.3, 0.4; category 4 has 0 */
  pd_tensor *w = T(PD_FLOAT32, 1, SHAPE(5), 1, 2, 3, 4, 0);
  pd_tensor *s = pd_multinomial(w, N, true);
  assert_int_equal(pd_tensor_dtype(s), PD_INT64);
  expect_shape(s, 1, SHAPE(N));
  int64_t cnt[5] = {0};
  for (int64_t i = 0; i < N; i++) {
    double v = pd_tensor_item_at(s, i);
    assert_true(v >= 0 && v <= 3);
    cnt[(int)v]++;
  }
  for (int k = 0; k < 4; k++) {
    double p = (k + 1) / 10.0;
    expect_within("multinomial frequency", (double)cnt[k] / N, p, sqrt(p * (1 - p) / N));
  }
  assert_int_equal(cnt[4], 0);
  /* 2-D: one row per distribution */
  pd_tensor *x = T(PD_FLOAT64, 2, SHAPE(2, 3), 0, 0, 1, 1, 0, 0);
  pd_tensor *r = pd_multinomial(x, 4, true);
  expect_shape(r, 2, SHAPE(2, 4));
  EXPECT_VALUES(r, 0, 2, 2, 2, 2, 0, 0, 0, 0);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_multinomial_without_replacement(void **state) {
  (void)state;
  pd_scope_begin();
  pd_seed(16);
  /* each row a draw of 3 distinct categories out of 4 (weights 1:2:3:4);
   * the first draw follows the weights */
  const int64_t rows = 20000;
  pd_tensor *w = pd_expand(T(PD_FLOAT32, 1, SHAPE(4), 1, 2, 3, 4), 2, SHAPE(rows, 4));
  pd_tensor *s = pd_multinomial(w, 3, false);
  expect_shape(s, 2, SHAPE(rows, 3));
  int64_t first[4] = {0}, pair01 = 0;
  for (int64_t r = 0; r < rows; r++) {
    int64_t a = (int64_t)pd_tensor_item_at(s, r * 3), b = (int64_t)pd_tensor_item_at(s, r * 3 + 1),
            c = (int64_t)pd_tensor_item_at(s, r * 3 + 2);
    assert_true(a >= 0 && a < 4 && b >= 0 && b < 4 && c >= 0 && c < 4);
    if (a == b || a == c || b == c)
      fail_msg("row %lld repeats a category: %lld %lld %lld", (long long)r, (long long)a, (long long)b,
               (long long)c);
    first[a]++;
    pair01 += a == 3 && b == 2;
  }
  for (int k = 0; k < 4; k++) {
    double p = (k + 1) / 10.0;
    expect_within("multinomial first draw", (double)first[k] / rows, p, sqrt(p * (1 - p) / rows));
  }
  /* P(first 3, then 2) = 0.4 * 0.3 / 0.6 = 0.2 */
  expect_within("multinomial second draw", (double)pair01 / rows, 0.2, sqrt(0.2 * 0.8 / rows));
  /* all categories: a permutation; zero weights are never drawn */
  for (int rep = 0; rep < 50; rep++) {
    pd_tensor *nz = pd_multinomial(T(PD_FLOAT64, 1, SHAPE(5), 0.5, 0, 2, 0, 0.25), 3, false);
    for (int i = 0; i < 3; i++) assert_true(pd_tensor_item_at(nz, i) != 1 && pd_tensor_item_at(nz, i) != 3);
  }
  pd_tensor *all = pd_multinomial(T(PD_FLOAT32, 1, SHAPE(6), 1, 1, 1, 1, 1, 1), 6, false);
  int seen = 0;
  for (int i = 0; i < 6; i++) seen |= 1 << (int)pd_tensor_item_at(all, i);
  assert_int_equal(seen, 63);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_multinomial_errors(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *w = T(PD_FLOAT32, 1, SHAPE(3), 0.2, 0.3, 0.5);
  expect_error(pd_multinomial(w, 4, false), "multinomial", "num_samples 4 is larger than the 3 categories");
  pd_tensor *z = T(PD_FLOAT32, 1, SHAPE(3), 0.2, 0, 0.5);
  expect_error(pd_multinomial(z, 3, false), "multinomial", "2 categories with non-zero probability");
  expect_error(pd_multinomial(w, 0, true), "multinomial", "num_samples 0");
  expect_error(pd_multinomial(T(PD_FLOAT32, 2, SHAPE(2, 2), 1, 1, -1, 2), 1, true), "multinomial",
               "x[1][0] = -1");
  expect_error(pd_multinomial(T(PD_FLOAT32, 1, SHAPE(2), 0, 0), 1, true), "multinomial", "sum to 0");
  expect_error(pd_multinomial(T(PD_FLOAT32, 1, SHAPE(2), INFINITY, 1), 1, true), "multinomial", "inf");
  expect_error(pd_multinomial(pd_ones(3, SHAPE(2, 2, 2), PD_FLOAT32), 1, true), "multinomial", "[2, 2, 2]");
  expect_error(pd_multinomial(pd_ones(0, NULL, PD_FLOAT32), 1, true), "multinomial", "1-D or 2-D");
  expect_error(pd_multinomial(T(PD_INT64, 1, SHAPE(2), 1, 1), 1, true), "multinomial", "int64");
  expect_error(pd_multinomial(pd_ones(1, SHAPE(0), PD_FLOAT32), 1, true), "multinomial", "no categories");
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_randperm(void **state) {
  (void)state;
  pd_scope_begin();
  pd_seed(17);
  const pd_dtype dts[4] = {PD_INT64, PD_INT32, PD_FLOAT32, PD_FLOAT64};
  for (int k = 0; k < 4; k++) {
    pd_tensor *p = pd_randperm(1000, dts[k]);
    assert_int_equal(pd_tensor_dtype(p), dts[k]);
    expect_shape(p, 1, SHAPE(1000));
    char seen[1000] = {0};
    int fixed = 0;
    for (int i = 0; i < 1000; i++) {
      double v = pd_tensor_item_at(p, i);
      assert_true(v >= 0 && v < 1000 && v == floor(v));
      assert_int_equal(seen[(int)v], 0);
      seen[(int)v] = 1;
      fixed += v == i;
    }
    assert_true(fixed < 10); /* a uniform permutation has 1 fixed point on average */
  }
  assert_int_equal(pd_tensor_dtype(pd_randperm(3, PD_NUM_DTYPES)), PD_INT64);
  /* every position is uniform: mean of perm[0] over many draws is (n - 1) / 2 */
  double s = 0;
  const int draws = 4000;
  for (int d = 0; d < draws; d++) {
    pd_tensor *p = pd_randperm(10, PD_INT64);
    s += pd_tensor_item_at(p, 0);
    pd_tensor_release(pd_keep(p));
  }
  expect_within("randperm first position", s / draws, 4.5, sqrt(99.0 / 12 / draws));
  expect_shape(pd_randperm(0, PD_INT64), 1, SHAPE(0));
  EXPECT_VALUES(pd_randperm(1, PD_INT64), 0, 0);
  expect_error(pd_randperm(-1, PD_INT64), "randperm", "n -1");
  expect_error(pd_randperm(3, PD_BOOL), "randperm", "bool");
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_bad_inputs(void **state) {
  (void)state;
  pd_scope_begin();
  expect_error(pd_rand(1, SHAPE(3), PD_INT64), "uniform", "int64");
  expect_error(pd_randn(1, SHAPE(3), PD_BOOL), "gaussian", "bool");
  expect_error(pd_rand(2, SHAPE(3, -1), PD_FLOAT32), "uniform", "shape[1] is -1");
  expect_error(pd_randn(10, SHAPE(1, 1, 1, 1, 1, 1, 1, 1, 1, 1), PD_FLOAT32), "randn", "rank 10");
  expect_error(pd_uniform(2, NULL, PD_FLOAT32, 0, 1, 0), "uniform", "NULL");
  expect_error(pd_normal(0, 1, -1, NULL), "normal", "rank -1");
  expect_error(pd_randint(5, 5, 1, SHAPE(2), PD_INT64), "randint", "low 5, high 5");
  expect_error(pd_randint(0, 5, 1, SHAPE(2), PD_FLOAT32), "randint", "float32");
  expect_error(pd_randint(0, 1LL << 33, 1, SHAPE(2), PD_INT32), "randint", "int32");
  expect_error(pd_randint(0, 5, 1, SHAPE(-2), PD_INT64), "randint", "shape[0] is -2");
  pd_scope_end();
  expect_no_live_tensors();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_philox_known_answer),
      cmocka_unit_test(test_counter_map),
      cmocka_unit_test(test_seed_reproducible),
      cmocka_unit_test(test_thread_count_independent),
      cmocka_unit_test(test_uniform_seed_attribute),
      cmocka_unit_test(test_uniform_statistics),
      cmocka_unit_test(test_normal_statistics),
      cmocka_unit_test(test_randint_statistics),
      cmocka_unit_test(test_bernoulli),
      cmocka_unit_test(test_multinomial_with_replacement),
      cmocka_unit_test(test_multinomial_without_replacement),
      cmocka_unit_test(test_multinomial_errors),
      cmocka_unit_test(test_randperm),
      cmocka_unit_test(test_bad_inputs),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
