/* Contended products shared with helper threads (gemm_backup.c), the path
 * of large float32 products while the governor spreads a team of two beside
 * one competitor (gemm.c, core/core_claim.h): results
 * against a double-precision loop for every transpose, alpha, beta, padding
 * and panel count; a helper that has lost its core (made to sleep) gets its
 * panel backed up by the caller, which returns without it; the inputs' owners
 * stay held until that helper is done, through pd_matmul too. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/cpu/gemm.h"
#include "kernels/cpu/gemm_backup.h"
#include "kernels/cpu/parallel.h"
#include "test_util.h"

static float frand(unsigned *s) {
  *s = *s * 1103515245u + 12345u;
  return (float)((*s >> 8) & 0xffff) / 32768.0f - 1.0f;
}

static void sleep_ms(int ms) { nanosleep(&(struct timespec){ms / 1000, (long)(ms % 1000) * 1000000}, NULL); }

/* a keep whose owners are counters */
static atomic_int g_retained, g_released;
static void count_retain(void *o) {
  (void)o;
  atomic_fetch_add(&g_retained, 1);
}
static void count_release(void *o) {
  (void)o;
  atomic_fetch_add(&g_released, 1);
}
static int g_owner[2];
static const pdk_gemm_keep g_keep = {count_retain, count_release, {&g_owner[0], &g_owner[1]}};

/* Waits (at most 5 s) until every owner retained has been released. */
static void wait_released(void) {
  for (int i = 0; i < 500 && atomic_load(&g_released) != atomic_load(&g_retained); i++) sleep_ms(10);
  assert_int_equal(atomic_load(&g_released), atomic_load(&g_retained));
}

/* One product through the backup path, checked element by element (C
 * outside its M x N block untouched). */
static void check_one(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, float beta, int pad,
                      bool by_cols, int np, int helpers) {
  int64_t lda = (ta ? M : K) + pad, ldb = (tb ? K : N) + pad, ldc = N + pad;
  int64_t ra = ta ? K : M, rb = tb ? N : K;
  float *A = malloc(sizeof(float) * (size_t)(ra * lda)), *B = malloc(sizeof(float) * (size_t)(rb * ldb));
  float *C = malloc(sizeof(float) * (size_t)(M * ldc)), *C0 = malloc(sizeof(float) * (size_t)(M * ldc));
  unsigned s = (unsigned)(M * 131 + N * 17 + K * 7 + ta * 3 + tb * 5 + pad + np);
  for (int64_t i = 0; i < ra * lda; i++) A[i] = frand(&s);
  for (int64_t i = 0; i < rb * ldb; i++) B[i] = frand(&s);
  for (int64_t i = 0; i < M * ldc; i++) C[i] = C0[i] = frand(&s);
  assert_int_equal(pdk_gemm_backup_f32(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, by_cols, np,
                                       helpers, &g_keep),
                   0);
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < ldc; j++) {
      if (j >= N) {
        assert_true(C[i * ldc + j] == C0[i * ldc + j]);
        continue;
      }
      double acc = 0;
      for (int64_t k = 0; k < K; k++)
        acc +=
            (double)(ta ? A[k * lda + i] : A[i * lda + k]) * (double)(tb ? B[j * ldb + k] : B[k * ldb + j]);
      double want = alpha * acc + (beta == 0.0f ? 0.0 : beta * (double)C0[i * ldc + j]);
      assert_true(fabs(C[i * ldc + j] - want) <= 1e-4 * (1.0 + fabs(want)));
    }
  /* a late helper may still read A and B: they outlive the product only
   * because the keep says so; here the test frees them once it is released */
  wait_released();
  free(A), free(B), free(C), free(C0);
}

static void test_backup_results(void **state) {
  (void)state;
  for (int t = 0; t < 4; t++) {
    check_one(t & 1, t & 2, 64, 301, 200, 1.0f, 0.0f, 1, true, 8, 1);
    check_one(t & 1, t & 2, 303, 96, 120, 0.5f, -1.0f, 2, false, 16, 1);
    check_one(t & 1, t & 2, 130, 130, 130, 1.0f, 1.0f, 0, true, 5, 3);
    check_one(t & 1, t & 2, 37, 70, 300, -2.0f, 0.25f, 3, false, 7, 2);
  }
}

/* A helper made to sleep 50 ms after taking a panel (as if it had lost its
 * core): the caller backs that panel up and returns long before the helper
 * wakes; the owners are released only after the helper is done. The helper
 * may not come in time to take a panel at all (a slow machine), so the
 * product is tried until one was backed up. */
static void test_backup_of_a_late_helper(void **state) {
  (void)state;
  atomic_store(&pd_g_gemm_helper_delay_us, 50000);
  bool seen = false;
  for (int attempt = 0; attempt < 20 && !seen; attempt++) {
    long long before = atomic_load(&pd_g_gemm_backups);
    int64_t M = 128, N = 512, K = 256;
    float *A = calloc((size_t)(M * K), sizeof(float)), *B = calloc((size_t)(K * N), sizeof(float)),
          *C = malloc(sizeof(float) * (size_t)(M * N));
    for (int64_t i = 0; i < M * K; i++) A[i] = (float)(i % 7) - 3.0f;
    for (int64_t i = 0; i < K * N; i++) B[i] = (float)(i % 5) - 2.0f;
    int released = atomic_load(&g_released);
    assert_int_equal(
        pdk_gemm_backup_f32(false, false, M, N, K, 1.0f, A, K, B, N, 0.0f, C, N, true, 8, 1, &g_keep), 0);
    for (int64_t i = 0; i < M; i += 17)
      for (int64_t j = 0; j < N; j += 13) {
        double acc = 0;
        for (int64_t k = 0; k < K; k++) acc += (double)A[i * K + k] * (double)B[k * N + j];
        assert_true(fabs(C[i * N + j] - acc) <= 1e-3 * (1.0 + fabs(acc)));
      }
    if (atomic_load(&pd_g_gemm_backups) > before) {
      seen = true;
      /* returned before the sleeping helper woke: it still holds the owners */
      assert_int_equal(atomic_load(&g_released), released);
    }
    wait_released();
    free(A), free(B), free(C);
  }
  atomic_store(&pd_g_gemm_helper_delay_us, 0);
  assert_true(seen);
}

/* Through pd_matmul: the operands' storages are held by the late helper, so
 * releasing x and y right after the product frees nothing yet (and the
 * sanitizer build sees no read of freed memory); their bytes go once the
 * helper is done. */
static void test_matmul_holds_its_operands(void **state) {
  (void)state;
  atomic_store(&pd_g_gemm_helper_delay_us, 50000);
  bool seen = false;
  for (int attempt = 0; attempt < 20 && !seen; attempt++) {
    long long before = atomic_load(&pd_g_gemm_backups);
    pd_tensor *x = pd_full(2, (int64_t[]){128, 256}, 0.5, PD_FLOAT32);
    pd_tensor *y = pd_full(2, (int64_t[]){256, 512}, 2.0, PD_FLOAT32);
    size_t with = pd_memory_allocated();
    pd_tensor *z = pd_matmul(x, y, false, false);
    assert_non_null(z);
    pd_tensor_release(x);
    pd_tensor_release(y);
    if (atomic_load(&pd_g_gemm_backups) > before) {
      seen = true;
      assert_true(pd_memory_allocated() >= with); /* x and y still held */
    }
    const float *zd = pd_tensor_data(z);
    for (int64_t i = 0; i < 128 * 512; i += 97) assert_true(fabsf(zd[i] - 256.0f) < 1e-3f);
    pd_tensor_release(z);
    for (int i = 0; i < 500 && pd_memory_allocated() >= with; i++) sleep_ms(10);
    assert_true(pd_memory_allocated() < with); /* all three gone */
  }
  atomic_store(&pd_g_gemm_helper_delay_us, 0);
  assert_true(seen);
}

/* pd_matmul takes the backup path only while the team is spread beside one
 * competitor (one core free, the governor's spread): with no core free the
 * team takes panels, with one free and no spread one thread computes; the
 * product is right each way. */
static void test_backup_only_when_spread(void **state) {
  (void)state;
  pd_tensor *x = pd_full(2, (int64_t[]){128, 256}, 0.5, PD_FLOAT32);
  pd_tensor *y = pd_full(2, (int64_t[]){256, 512}, 2.0, PD_FLOAT32);
  const struct {
    int free;
    bool spread, backup;
  } cases[] = {{1, true, true}, {1, false, false}, {0, false, false}, {0, true, false}};
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
    atomic_store(&pd_g_cores_free, cases[c].free);
    atomic_store(&pd_g_cores_spread, cases[c].spread);
    long long before = atomic_load(&pd_g_gemm_backup_products);
    pd_tensor *z = pd_matmul(x, y, false, false);
    assert_non_null(z);
    assert_int_equal(atomic_load(&pd_g_gemm_backup_products) > before, cases[c].backup);
    const float *zd = pd_tensor_data(z);
    for (int64_t i = 0; i < 128 * 512; i += 37) assert_true(zd[i] == 256.0f);
    pd_tensor_release(z);
  }
  atomic_store(&pd_g_cores_free, 1);
  atomic_store(&pd_g_cores_spread, true);
  pd_tensor_release(x);
  pd_tensor_release(y);
}

static int setup(void **state) {
  (void)state;
  omp_set_num_threads(2);
  atomic_store(&pd_g_cores_contended, true);
  atomic_store(&pd_g_cores_free, 1);
  atomic_store(&pd_g_cores_spread, true);
  return 0;
}

int main(void) {
  /* no thread governor: the test sets the contention flags itself */
  setenv("PADDLEC_WAIT_POLICY", "active", 1);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_backup_results),
      cmocka_unit_test(test_backup_of_a_late_helper),
      cmocka_unit_test(test_matmul_holds_its_operands),
      cmocka_unit_test(test_backup_only_when_spread),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
