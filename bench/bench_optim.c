/* Optimizer step cost: the fused Adam/AdamW/Momentum updates of
 * pd_optimizer_step against (a) a plain C loop over the same buffers (the
 * memory-bound floor for one thread) and (b) the same Adam step written as
 * separate elementwise ops (what an unfused update costs). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "paddlec.h"
#include "timing.h"

/* Adam on raw float buffers, one thread. */
static void adam_loop(int64_t n, float *p, const float *g, float *m, float *v, float lr_t, float eps_t) {
  const float b1 = 0.9f, b2 = 0.999f;
  for (int64_t i = 0; i < n; i++) {
    m[i] = b1 * m[i] + (1 - b1) * g[i];
    v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
    p[i] -= lr_t * (m[i] / (sqrtf(v[i]) + eps_t));
  }
}

/* The same step with one op per line: m, v and p rebuilt each time. */
static void adam_unfused(pd_tensor *p, pd_tensor *g, pd_tensor **m, pd_tensor **v) {
  pd_scope_begin();
  pd_tensor *m2 = pd_add(pd_scale(*m, 0.9, 0, true), pd_scale(g, 0.1, 0, true));
  pd_tensor *v2 = pd_add(pd_scale(*v, 0.999, 0, true), pd_scale(pd_multiply(g, g), 0.001, 0, true));
  pd_tensor *upd = pd_divide(m2, pd_scale(pd_sqrt(v2), 1.0, 1e-8, true));
  pd_tensor *p2 = pd_subtract(p, pd_scale(upd, 1e-3, 0, true));
  pd_tensor_copy_to(p2, pd_tensor_data(p), pd_tensor_numel(p), PD_FLOAT32);
  pd_tensor_release(*m);
  pd_tensor_release(*v);
  *m = pd_keep(m2);
  *v = pd_keep(v2);
  pd_scope_end();
}

int main(int argc, char **argv) {
  int64_t n = argc > 1 ? atoll(argv[1]) : (int64_t)1 << 22;
  int reps = 20;
  pd_seed(1);
  pd_tensor *p = pd_randn(1, &n, PD_FLOAT32);
  pd_tensor_set_stop_gradient(p, false);
  pd_tensor_set_grad(p, pd_randn(1, &n, PD_FLOAT32));
  pd_tensor *g = pd_tensor_grad(p);
  printf("params: %lld float32 (%.1f MB), %d threads\n", (long long)n, 4.0 * (double)n / 1e6,
         pd_get_num_threads());

  const char *names[3] = {"Adam", "AdamW", "Momentum"};
  double fused[3];
  for (int k = 0; k < 3; k++) {
    pd_optimizer *opt = k == 0   ? pd_optimizer_adam(1e-3, &p, 1, NULL)
                        : k == 1 ? pd_optimizer_adam_w(1e-3, &p, 1, NULL)
                                 : pd_optimizer_momentum(1e-3, &p, 1, NULL);
    pd_optimizer_step(opt); /* creates the accumulators */
    double t0 = bench_now_s();
    for (int r = 0; r < reps; r++) pd_optimizer_step(opt);
    fused[k] = (bench_now_s() - t0) / reps;
    pd_optimizer_release(opt);
  }

  float *m = calloc((size_t)n, sizeof(float)), *v = calloc((size_t)n, sizeof(float));
  adam_loop(n, pd_tensor_data(p), pd_tensor_data(g), m, v, 1e-3f, 1e-8f);
  double t0 = bench_now_s();
  for (int r = 0; r < reps; r++) adam_loop(n, pd_tensor_data(p), pd_tensor_data(g), m, v, 1e-3f, 1e-8f);
  double loop = (bench_now_s() - t0) / reps;
  free(m);
  free(v);

  pd_tensor *mt = pd_zeros(1, &n, PD_FLOAT32), *vt = pd_zeros(1, &n, PD_FLOAT32);
  adam_unfused(p, g, &mt, &vt);
  t0 = bench_now_s();
  for (int r = 0; r < reps; r++) adam_unfused(p, g, &mt, &vt);
  double unfused = (bench_now_s() - t0) / reps;
  pd_tensor_release(mt);
  pd_tensor_release(vt);

  double bytes = 4.0 * (double)n * 6; /* read p g m v, write p m v: ~6-7 streams */
  for (int k = 0; k < 3; k++)
    printf("%-9s fused step: %8.3f ms  (%.1f GB/s)\n", names[k], 1e3 * fused[k],
           (k == 2 ? bytes * 4 / 6 : bytes) / fused[k] / 1e9);
  printf("Adam      C loop, 1 thread: %8.3f ms  fused is %.2fx\n", 1e3 * loop, loop / fused[0]);
  printf("Adam      unfused ops:      %8.3f ms  fused is %.2fx\n", 1e3 * unfused, unfused / fused[0]);
  pd_tensor_release(p);
  return 0;
}
