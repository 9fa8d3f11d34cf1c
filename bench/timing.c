/* The benches' clock and GEMM yardstick (timing.h). */
#define _POSIX_C_SOURCE 200809L
#include "timing.h"

#include <oneapi/dnnl/dnnl.h>
#include <stdlib.h>
#include <time.h>

double bench_now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double bench_sgemm_peak(int runs) {
  const int n = 1024;
  float *a = malloc(sizeof(float) * n * n), *b = malloc(sizeof(float) * n * n),
        *c = malloc(sizeof(float) * n * n);
  if (!a || !b || !c) {
    free(a), free(b), free(c);
    return 0;
  }
  for (int i = 0; i < n * n; i++) a[i] = b[i] = 1.0f / (float)(i % 7 + 1);
  double best = 1e30;
  for (int r = 0; r <= runs; r++) {
    double t0 = bench_now_s();
    dnnl_sgemm('N', 'N', n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
    double t = bench_now_s() - t0;
    if (r > 0 && t < best) best = t; /* call 0 warms up */
  }
  free(a), free(b), free(c);
  return 2.0 * n * n * n / best / 1e9;
}
