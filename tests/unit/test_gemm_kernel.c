/* The float32 GEMM entry point against a double-precision loop: every
 * combination of transposes, small and odd sizes (the vector tails of the
 * small-product kernel, its matrix-vector paths and the oneDNN path),
 * padded leading dimensions, alpha and beta, and C left untouched outside
 * its M x N block. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/gemm.h"
#include "kernels/cpu/gemm_dnnl_matmul.h"
#include "kernels/cpu/parallel.h"
#include "test_util.h"

static float frand(unsigned *s) {
  *s = *s * 1103515245u + 12345u;
  return (float)((*s >> 8) & 0xffff) / 32768.0f - 1.0f;
}

/* One product: C = alpha op(A) op(B) + beta C, checked element by element. */
static void check_one(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, float beta, int pad) {
  int64_t lda = (ta ? M : K) + pad, ldb = (tb ? K : N) + pad, ldc = N + pad;
  int64_t ra = ta ? K : M, rb = tb ? N : K;
  float *A = malloc(sizeof(float) * (size_t)(ra * lda + 1)),
        *B = malloc(sizeof(float) * (size_t)(rb * ldb + 1));
  float *C = malloc(sizeof(float) * (size_t)(M * ldc + 1)),
        *C0 = malloc(sizeof(float) * (size_t)(M * ldc + 1));
  unsigned s = (unsigned)(M * 131 + N * 17 + K * 7 + ta * 3 + tb * 5 + pad);
  for (int64_t i = 0; i < ra * lda; i++) A[i] = frand(&s);
  for (int64_t i = 0; i < rb * ldb; i++) B[i] = frand(&s);
  for (int64_t i = 0; i < M * ldc; i++) C[i] = C0[i] = beta == 0.0f && i % 3 == 0 ? NAN : frand(&s);
  assert_int_equal(pdk_gemm_f32(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc), 0);
  for (int64_t i = 0; i < M; i++) {
    for (int64_t j = 0; j < ldc; j++) {
      float got = C[i * ldc + j];
      if (j >= N) { /* the padding stays as it was */
        float was = C0[i * ldc + j];
        assert_true((isnan(was) && isnan(got)) || was == got);
        continue;
      }
      double ref = 0, mag = 0;
      for (int64_t p = 0; p < K; p++) {
        double a = ta ? A[p * lda + i] : A[i * lda + p], b = tb ? B[j * ldb + p] : B[p * ldb + j];
        ref += a * b;
        mag += fabs(a * b);
      }
      ref *= alpha;
      mag *= fabs(alpha);
      if (beta != 0.0f) {
        ref += (double)beta * C0[i * ldc + j];
        mag += fabs((double)beta * C0[i * ldc + j]);
      }
      if (fabs(got - ref) > 1e-6 * (mag + 1.0)) {
        print_error(
            "gemm ta=%d tb=%d M=%lld N=%lld K=%lld alpha=%g beta=%g pad=%d: C[%lld][%lld] = %.9g, want "
            "%.9g\n",
            ta, tb, (long long)M, (long long)N, (long long)K, alpha, beta, pad, (long long)i, (long long)j,
            got, ref);
        fail();
      }
    }
  }
  free(A), free(B), free(C), free(C0);
}

static void test_gemm_small_shapes(void **state) {
  (void)state;
  const int64_t sizes[] = {1, 2, 3, 4, 7, 8, 9, 10, 15, 16, 17, 33};
  const int ns = (int)(sizeof sizes / sizeof *sizes);
  const float ab[][2] = {{1.0f, 0.0f}, {0.5f, 1.0f}, {-1.5f, -0.25f}};
  for (int t = 0; t < 4; t++)
    for (int mi = 0; mi < ns; mi++)
      for (int ni = 0; ni < ns; ni++)
        for (int ki = 0; ki < ns; ki += 2)
          for (int c = 0; c < 3; c++)
            check_one(t & 1, t & 2, sizes[mi], sizes[ni], sizes[ki], ab[c][0], ab[c][1],
                      (mi + ni + ki + c) % 3);
}

/* Sizes past the small-product limit (oneDNN) and long K with a tail that
 * does not fit the packed panel (masked loads). */
static void test_gemm_larger_shapes(void **state) {
  (void)state;
  for (int t = 0; t < 4; t++) {
    check_one(t & 1, t & 2, 40, 37, 50, 1.0f, 0.0f, 1);
    check_one(t & 1, t & 2, 1, 10, 3000, 1.0f, 1.0f, 0);
    check_one(t & 1, t & 2, 2, 13, 700, 0.5f, -1.0f, 2);
    check_one(t & 1, t & 2, 70, 1, 300, 1.0f, 0.5f, 0);
  }
}

/* While the cores are contended a large product runs as panels of C's
 * columns (wide C) or rows (tall C) handed out one at a time: every
 * transpose, with beta and padding, on a team of two; each of the 12
 * products takes the panel path, and none does once the cores are quiet. */
static void test_gemm_contended_panels(void **state) {
  (void)state;
  int nt = omp_get_max_threads();
  omp_set_num_threads(2);
  atomic_store(&pd_g_cores_contended, true);
  long long before = atomic_load(&pd_g_gemm_panel_products);
  for (int t = 0; t < 4; t++) {
    check_one(t & 1, t & 2, 64, 301, 200, 1.0f, 0.0f, 1);  /* by columns */
    check_one(t & 1, t & 2, 303, 96, 120, 0.5f, -1.0f, 2); /* by rows */
    check_one(t & 1, t & 2, 130, 130, 130, 1.0f, 1.0f, 0);
  }
  assert_int_equal(atomic_load(&pd_g_gemm_panel_products) - before, 12);
  /* one core left free by the others: one thread, no panels */
  atomic_store(&pd_g_cores_free, 1);
  before = atomic_load(&pd_g_gemm_panel_products);
  for (int t = 0; t < 4; t++) check_one(t & 1, t & 2, 64, 301, 200, 0.5f, -1.0f, 1);
  assert_int_equal(atomic_load(&pd_g_gemm_panel_products) - before, 0);
  assert_int_equal(omp_get_max_threads(), 2); /* the team's size comes back */
  atomic_store(&pd_g_cores_free, 0);
  atomic_store(&pd_g_cores_contended, false);
  before = atomic_load(&pd_g_gemm_panel_products);
  check_one(false, false, 64, 301, 200, 1.0f, 0.0f, 1);
  assert_int_equal(atomic_load(&pd_g_gemm_panel_products) - before, 0);
  omp_set_num_threads(nt);
}

/* A large product with B transposed goes to oneDNN's matmul primitive
 * (cached per shape, leading dimensions, alpha and beta): alpha as its output
 * scale, beta as a sum post-op, beta 0 not reading C (NaN there), padded
 * leading dimensions, each case twice (the second from the cache); other
 * transposes and deterministic mode do not take it. */
static void test_gemm_matmul_primitive(void **state) {
  (void)state;
  long before = pdk_gemm_matmul_products();
  const float ab[][2] = {{1.0f, 0.0f}, {0.5f, 1.0f}, {-1.5f, -0.25f}};
  for (int rep = 0; rep < 2; rep++)
    for (int c = 0; c < 3; c++) {
      check_one(false, true, 128, 160, 256, ab[c][0], ab[c][1], c); /* 5.2 M multiply-adds */
      check_one(false, true, 203, 97, 301, ab[c][0], ab[c][1], 2 - c);
    }
  assert_int_equal(pdk_gemm_matmul_products() - before, 12);
  before = pdk_gemm_matmul_products();
  check_one(false, false, 128, 160, 256, 1.0f, 0.0f, 0);
  check_one(true, true, 128, 160, 256, 1.0f, 0.0f, 0);
  check_one(false, true, 64, 64, 64, 1.0f, 0.0f, 0); /* small: dnnl_sgemm */
  bool det = pd_get_deterministic();
  pd_set_deterministic(true);
  check_one(false, true, 128, 160, 256, 1.0f, 0.0f, 0);
  pd_set_deterministic(det);
  assert_int_equal(pdk_gemm_matmul_products() - before, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gemm_small_shapes),
      cmocka_unit_test(test_gemm_larger_shapes),
      cmocka_unit_test(test_gemm_contended_panels),
      cmocka_unit_test(test_gemm_matmul_primitive),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
