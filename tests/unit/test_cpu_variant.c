/* The CPU variants of the hot kernels (docs/cpu.md): the variant in use is
 * the one PADDLEC_CPU asks for or the best the CPU has, bad requests fall
 * back to the best one, and every variant the CPU supports computes the
 * same results as the baseline one within float tolerance: every op sample
 * of the registry in float32 and float64, plus larger inputs through the
 * vector loops and their tails (GEMM, elementwise, softmax, norms,
 * reductions, cross entropy, optimizer rules, collective reduction). The
 * ctest label `variant` runs the whole unit suite again under
 * PADDLEC_CPU=baseline and =avx2. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/comm_reduce.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/kvariant.h"
#include "kernels/cpu/optim.h"
#include "op_samples.h"
#include "test_util.h"

static pd_kvariant k_start; /* the variant chosen at start-up, restored after each test */

static int save_variant(void **state) {
  (void)state;
  k_start = (pd_kvariant)pd_kvariant_level;
  return 0;
}
static int restore_variant(void **state) {
  (void)state;
  if (pd_kvariant_level != (int)k_start) pd_kvariant_select(k_start);
  return 0;
}

static void test_variant_is_the_one_asked_for(void **state) {
  (void)state;
#ifdef PADDLEC_NATIVE /* one copy of everything, tuned for the build machine */
  assert_string_equal(pd_cpu_variant(), "native");
  assert_int_equal(pd_kvariant_select(PD_KV_BASELINE), -1);
  return;
#endif
  const char *name = pd_cpu_variant();
  const char *env = getenv("PADDLEC_CPU");
  pd_kvariant want = pd_kvariant_best();
  if (env && (strcmp(env, "baseline") == 0 || strcmp(env, "avx2") == 0 || strcmp(env, "avx512") == 0)) {
    pd_kvariant asked = strcmp(env, "baseline") == 0 ? PD_KV_BASELINE
                        : strcmp(env, "avx2") == 0   ? PD_KV_AVX2
                                                     : PD_KV_AVX512;
    if (asked <= want) want = asked;
  }
  printf("cpu variant: %s (best %s)\n", name, pd_kvariant_name(pd_kvariant_best()));
  assert_string_equal(name, pd_kvariant_name(want));
  assert_int_equal(pd_kvariant_level, (int)want);
}

static void test_bad_requests_fall_back_to_the_best(void **state) {
  (void)state;
  pd_kvariant best = pd_kvariant_best();
  assert_int_equal(pd_kvariant_choose(NULL), best);
  assert_int_equal(pd_kvariant_choose(""), best);
  assert_int_equal(pd_kvariant_choose("sse9"), best);
  assert_int_equal(pd_kvariant_choose("AVX2"), best); /* names are lower case */
  assert_int_equal(pd_kvariant_choose("baseline"), PD_KV_BASELINE);
  assert_int_equal(pd_kvariant_choose("avx512"), best); /* the best, or what the CPU lacks */
  if (best >= PD_KV_AVX2) assert_int_equal(pd_kvariant_choose("avx2"), PD_KV_AVX2);
  /* a variant beyond the CPU cannot be selected; the level stays */
  int before = pd_kvariant_level;
  if (best < PD_KV_AVX512) assert_int_equal(pd_kvariant_select(PD_KV_AVX512), -1);
  assert_int_equal(pd_kvariant_select(PD_KV_COUNT), -1);
  assert_int_equal(pd_kvariant_level, before);
}

/* Runs one sample (float inputs cast to float32 when f32) with a fixed seed;
 * returns the number of outputs, or -1 when the op refuses the inputs. */
static int run_sample(pd_op_id id, const pd_op_sample *s, bool f32, pd_tensor **out) {
  pd_tensor *in[PD_MAX_OUTPUTS] = {0};
  pd_attrs a;
  memset(&a, 0, sizeof a);
  sample_reseed(42);
  int n_in = s->make(in, &a), n_out = 0;
  if (n_in < 0) return -1;
  for (int i = 0; i < n_in && f32; i++) {
    if (in[i] && pd_tensor_dtype(in[i]) == PD_FLOAT64) {
      pd_tensor *c = pd_cast(in[i], PD_FLOAT32);
      pd_tensor_release(in[i]);
      in[i] = c;
    }
  }
  pd_seed(1234);
  if (pd_dispatch(id, in, n_in, &a, out, &n_out) != PD_OK) n_out = -1;
  for (int i = 0; i < n_in; i++) pd_tensor_release(in[i]);
  pd_clear_error();
  return n_out;
}

static bool tensors_agree(const pd_tensor *a, const pd_tensor *b, double rtol) {
  if (pd_tensor_dtype(a) != pd_tensor_dtype(b) || pd_tensor_numel(a) != pd_tensor_numel(b)) return false;
  int64_t n = pd_tensor_numel(a);
  double *x = malloc(sizeof(double) * (size_t)(n + 1)), *y = malloc(sizeof(double) * (size_t)(n + 1));
  pd_tensor_copy_to(a, x, n, PD_FLOAT64);
  pd_tensor_copy_to(b, y, n, PD_FLOAT64);
  double mag = 0;
  for (int64_t i = 0; i < n; i++)
    if (isfinite(x[i])) mag = fmax(mag, fabs(x[i]));
  bool ok = true;
  for (int64_t i = 0; i < n && ok; i++) {
    if (isnan(x[i]) || isnan(y[i]))
      ok = isnan(x[i]) && isnan(y[i]);
    else if (isinf(x[i]) || isinf(y[i]))
      ok = x[i] == y[i];
    else /* reassociated sums: relative to the output's scale */
      ok = fabs(x[i] - y[i]) <= rtol * (fabs(x[i]) + mag) + 1e-30;
    if (!ok) fprintf(stderr, "    element %lld: %.9g vs %.9g\n", (long long)i, x[i], y[i]);
  }
  free(x);
  free(y);
  return ok;
}

static void test_op_samples_agree_across_variants(void **state) {
  (void)state;
  pd_kvariant best = pd_kvariant_best();
  int compared = 0, failures = 0;
  for (int id = 0; id < PD_NUM_OPS; id++) {
    const pd_op_def *def = pd_op_table[id];
    for (size_t t = 0; pd_sample_tables[t]; t++) {
      for (const pd_op_sample *s = pd_sample_tables[t]; s->op; s++) {
        if (strcmp(s->op, def->name) != 0) continue;
        for (int f32 = 0; f32 < 2; f32++) {
          pd_tensor *ref[PD_MAX_OUTPUTS] = {0}, *got[PD_MAX_OUTPUTS] = {0};
          pd_kvariant_select(PD_KV_BASELINE);
          int n_ref = run_sample((pd_op_id)id, s, f32, ref);
          for (int v = PD_KV_AVX2; v <= (int)best && n_ref >= 0; v++) {
            pd_kvariant_select((pd_kvariant)v);
            int n_got = run_sample((pd_op_id)id, s, f32, got);
            bool ok = n_got == n_ref;
            for (int k = 0; k < n_ref && ok; k++) ok = tensors_agree(ref[k], got[k], f32 ? 2e-5 : 1e-12);
            if (!ok) {
              fprintf(stderr, "  %s (%s): %s differs from baseline\n", s->op, f32 ? "float32" : "float64",
                      pd_kvariant_name((pd_kvariant)v));
              failures++;
            }
            compared++;
            for (int k = 0; k < (n_got > 0 ? n_got : 0); k++) pd_tensor_release(got[k]);
          }
          for (int k = 0; k < n_ref; k++) pd_tensor_release(ref[k]);
        }
      }
    }
  }
  printf("cpu variants: %d sample runs compared with baseline\n", compared);
  assert_int_equal(failures, 0);
  expect_no_live_tensors();
}

/* Larger inputs: odd sizes reach the vector bodies and their tails. */
typedef pd_tensor *(*big_op)(pd_tensor *x, pd_tensor *y);
static pd_tensor *op_sigmoid(pd_tensor *x, pd_tensor *y) { return (void)y, pd_sigmoid(x); }
static pd_tensor *op_gelu(pd_tensor *x, pd_tensor *y) { return (void)y, pd_gelu(x, false); }
static pd_tensor *op_tanh(pd_tensor *x, pd_tensor *y) { return (void)y, pd_tanh(x); }
static pd_tensor *op_softmax(pd_tensor *x, pd_tensor *y) { return (void)y, pd_softmax(x, -1); }
static pd_tensor *op_log_softmax(pd_tensor *x, pd_tensor *y) { return (void)y, pd_log_softmax(x, 0); }
static pd_tensor *op_sum(pd_tensor *x, pd_tensor *y) { return (void)y, pd_sum(x, NULL, 0, false); }
static pd_tensor *op_mean_rows(pd_tensor *x, pd_tensor *y) {
  return (void)y, pd_mean(x, (int64_t[]){0}, 1, false);
}
static pd_tensor *op_add(pd_tensor *x, pd_tensor *y) { return pd_add(x, y); }
static pd_tensor *op_mul(pd_tensor *x, pd_tensor *y) { return pd_multiply(x, y); }
static pd_tensor *op_matmul(pd_tensor *x, pd_tensor *y) { return pd_matmul(x, y, false, true); }
static pd_tensor *op_layer_norm(pd_tensor *x, pd_tensor *y) {
  (void)y;
  return pd_layer_norm(x, 1, (int64_t[]){pd_tensor_shape(x)[1]}, NULL, NULL, 1e-5);
}

static void test_large_inputs_agree_across_variants(void **state) {
  (void)state;
  static const struct {
    const char *name;
    big_op fn;
  } ops[] = {{"sigmoid", op_sigmoid},
             {"gelu", op_gelu},
             {"tanh", op_tanh},
             {"softmax", op_softmax},
             {"log_softmax", op_log_softmax},
             {"sum", op_sum},
             {"mean", op_mean_rows},
             {"add", op_add},
             {"multiply", op_mul},
             {"matmul", op_matmul},
             {"layer_norm", op_layer_norm}};
  pd_kvariant best = pd_kvariant_best();
  for (int f32 = 0; f32 < 2; f32++) {
    pd_tensor *x64 = sample_uniform(2, SHAPE(37, 53), -3, 3), *y64 = sample_uniform(2, SHAPE(37, 53), -3, 3);
    pd_tensor *x = f32 ? pd_cast(x64, PD_FLOAT32) : pd_tensor_retain(x64);
    pd_tensor *y = f32 ? pd_cast(y64, PD_FLOAT32) : pd_tensor_retain(y64);
    for (size_t k = 0; k < sizeof ops / sizeof *ops; k++) {
      pd_kvariant_select(PD_KV_BASELINE);
      pd_tensor *ref = ops[k].fn(x, y);
      assert_non_null(ref);
      for (int v = PD_KV_AVX2; v <= (int)best; v++) {
        pd_kvariant_select((pd_kvariant)v);
        pd_tensor *got = ops[k].fn(x, y);
        assert_non_null(got);
        if (!tensors_agree(ref, got, f32 ? 2e-6 : 1e-13))
          fail_msg("%s (%s): %s differs from baseline", ops[k].name, f32 ? "float32" : "float64",
                   pd_kvariant_name((pd_kvariant)v));
        pd_tensor_release(got);
      }
      pd_tensor_release(ref);
    }
    pd_tensor_release(x), pd_tensor_release(y), pd_tensor_release(x64), pd_tensor_release(y64);
  }
  expect_no_live_tensors();
}

/* GEMM tails (odd M, N, K), an Adam and a Lamb step, the sum of squares
 * of gradient clipping and a four-way collective sum
 * called on the kernels directly. */
static void fill(float *p, int64_t n, unsigned seed) {
  for (int64_t i = 0; i < n; i++) {
    seed = seed * 1103515245u + 12345u;
    p[i] = (float)((seed >> 8) & 0xffff) / 32768.0f - 1.0f;
  }
}

static void expect_same_floats(const float *a, const float *b, int64_t n, double rtol, const char *what) {
  for (int64_t i = 0; i < n; i++)
    if (!(fabs((double)a[i] - (double)b[i]) <= rtol * (1.0 + fabs((double)a[i]))))
      fail_msg("%s: element %lld: %.9g vs %.9g", what, (long long)i, (double)a[i], (double)b[i]);
}

typedef void (*raw_kernel)(float *out, const float *in, int64_t n);

static void gemm_tail(float *out, const float *in, int64_t n) {
  (void)n; /* C[7x13] = A[7x29] B[29x13] */
  memset(out, 0, sizeof(float) * 7 * 13);
  assert_int_equal(pdk_gemm_f32(false, false, 7, 13, 29, 1.0f, in, 29, in + 7 * 29, 13, 0.0f, out, 13), 0);
}

static void adam_step(float *out, const float *in, int64_t n) {
  float *m = out + n, *v = out + 2 * n;
  memcpy(out, in, sizeof(float) * (size_t)n);
  for (int64_t i = 0; i < n; i++) m[i] = 0.1f * in[n + i], v[i] = 0.01f + in[n + i] * in[n + i];
  pd_optim_args a = {.gscale = 1, .lo = -INFINITY, .hi = INFINITY, .lr = 1e-3};
  a.s[0] = 0.9, a.s[1] = 0.999, a.s[2] = 1e-3, a.s[3] = 1e-8, a.s[4] = 1.0;
  pd_optim_bufs b = {
      .n = n, .param = out, .pdt = PD_FLOAT32, .grad = in + n, .gdt = PD_FLOAT32, .acc = {m, v}, .nacc = 2};
  assert_int_equal(pdk_optim_run(&b, &a, &pd_optim_adam_rule), 0);
}

/* Lamb's two passes (moments and both norms, then the trust-ratio update). */
static void lamb_step(float *out, const float *in, int64_t n) {
  float *m = out + n, *v = out + 2 * n;
  memcpy(out, in, sizeof(float) * (size_t)n);
  for (int64_t i = 0; i < n; i++) m[i] = 0.1f * in[n + i], v[i] = 0.01f + in[n + i] * in[n + i];
  pd_optim_args a = {.gscale = 1, .lo = -INFINITY, .hi = INFINITY, .lr = 1e-2};
  a.s[0] = 0.9, a.s[1] = 0.999, a.s[2] = 1e-6, a.s[3] = 0.01, a.s[4] = 0.1, a.s[5] = 0.001;
  pd_optim_bufs b = {
      .n = n, .param = out, .pdt = PD_FLOAT32, .grad = in + n, .gdt = PD_FLOAT32, .acc = {m, v}, .nacc = 2};
  assert_int_equal(pdk_optim_lamb(&b, &a), 0);
}

/* The global norm of gradient clipping. */
static void sum_squares(float *out, const float *in, int64_t n) {
  out[0] = (float)pdk_optim_sum_squares(in, PD_FLOAT32, n);
  double d[1001];
  for (int64_t i = 0; i < n && i < 1001; i++) d[i] = in[i];
  out[1] = (float)pdk_optim_sum_squares(d, PD_FLOAT64, n < 1001 ? n : 1001);
}

static void comm_sum(float *out, const float *in, int64_t n) {
  const void *srcs[4] = {in, in + n, in + 2 * n, in + 3 * n};
  pdk_comm_reduce(out, srcs, 4, (size_t)n, PD_FLOAT32, PDK_REDUCE_SUM);
}

static void test_raw_kernels_agree_across_variants(void **state) {
  (void)state;
  static const struct {
    const char *name;
    raw_kernel fn;
    int64_t n, nout;
  } ks[] = {{"gemm_f32 7x13x29", gemm_tail, 1001, 7 * 13},
            {"adam f32", adam_step, 1001, 3 * 1001},
            {"lamb f32", lamb_step, 1001, 3 * 1001},
            {"sum of squares f32, f64", sum_squares, 1001, 2},
            {"comm_reduce sum f32", comm_sum, 1001, 1001}};
  pd_kvariant best = pd_kvariant_best();
  float *in = malloc(sizeof(float) * 4 * 1001);
  fill(in, 4 * 1001, 7);
  for (size_t k = 0; k < sizeof ks / sizeof *ks; k++) {
    float *ref = calloc((size_t)ks[k].nout, sizeof(float)), *got = calloc((size_t)ks[k].nout, sizeof(float));
    pd_kvariant_select(PD_KV_BASELINE);
    ks[k].fn(ref, in, ks[k].n);
    for (int v = PD_KV_AVX2; v <= (int)best; v++) {
      pd_kvariant_select((pd_kvariant)v);
      ks[k].fn(got, in, ks[k].n);
      expect_same_floats(ref, got, ks[k].nout, 1e-6, ks[k].name);
    }
    free(ref);
    free(got);
  }
  free(in);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_variant_is_the_one_asked_for),
      cmocka_unit_test_setup_teardown(test_bad_requests_fall_back_to_the_best, save_variant, restore_variant),
      cmocka_unit_test_setup_teardown(test_op_samples_agree_across_variants, save_variant, restore_variant),
      cmocka_unit_test_setup_teardown(test_large_inputs_agree_across_variants, save_variant, restore_variant),
      cmocka_unit_test_setup_teardown(test_raw_kernels_agree_across_variants, save_variant, restore_variant),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
