/* Fused scaled_dot_product_attention against the composed computation
 * (transpose, matmul, softmax, matmul) in the same run, float32, forward +
 * backward (a fixed upstream gradient through pd_backward), at
 * [batch, seq, heads, head_dim] = [4, 128, 4, 64] and [4, 1024, 4, 64].
 * Prints milliseconds (best of BEST_OF), composed / fused, and the peak
 * tensor memory of one forward + backward of each. */
#include <math.h>
#include <paddlec.h>
#include <stdio.h>
#include <time.h>

#include "timing.h"

#define BEST_OF 5

static double now_ms(void) { return 1e3 * bench_now_s(); }

static pd_tensor *composed(pd_tensor *q, pd_tensor *k, pd_tensor *v) {
  int64_t perm[4] = {0, 2, 1, 3};
  double scale = 1.0 / sqrt((double)pd_tensor_shape(q)[3]);
  pd_tensor *s =
      pd_matmul(pd_scale(pd_transpose(q, 4, perm), scale, 0, true), pd_transpose(k, 4, perm), false, true);
  return pd_transpose(pd_matmul(pd_softmax(s, -1), pd_transpose(v, 4, perm), false, false), 4, perm);
}

/* one forward + backward; returns 0 on success */
static int step(bool fused, pd_tensor *q, pd_tensor *k, pd_tensor *v, pd_tensor *dy) {
  pd_scope_begin();
  pd_tensor *o = fused ? pd_scaled_dot_product_attention(q, k, v, NULL, 0.0, false, true) : composed(q, k, v);
  int rc = o && pd_backward(o, dy, false) == PD_OK ? 0 : 1;
  pd_scope_end();
  pd_tensor_clear_grad(q, false);
  pd_tensor_clear_grad(k, false);
  pd_tensor_clear_grad(v, false);
  return rc;
}

static double time_ms(bool fused, pd_tensor *q, pd_tensor *k, pd_tensor *v, pd_tensor *dy, int iters,
                      size_t *peak) {
  step(fused, q, k, v, dy); /* warm-up */
  pd_memory_reset_peak();
  size_t base = pd_memory_peak();
  step(fused, q, k, v, dy);
  *peak = pd_memory_peak() - base;
  double best = 1e300;
  for (int r = 0; r < BEST_OF; r++) {
    double t0 = now_ms();
    for (int i = 0; i < iters; i++)
      if (step(fused, q, k, v, dy)) {
        fprintf(stderr, "bench_attention: %s\n", pd_last_error());
        return -1;
      }
    double t = (now_ms() - t0) / iters;
    best = t < best ? t : best;
  }
  return best;
}

int main(void) {
  const int64_t shapes[2][4] = {{4, 128, 4, 64}, {4, 1024, 4, 64}};
  printf("%-20s %12s %12s %8s %14s %14s\n", "shape [B,S,H,D]", "fused ms", "composed ms", "ratio",
         "fused peak MB", "composed MB");
  for (int c = 0; c < 2; c++) {
    pd_scope_begin();
    const int64_t *s = shapes[c];
    pd_tensor *q = pd_randn(4, s, PD_FLOAT32), *k = pd_randn(4, s, PD_FLOAT32),
              *v = pd_randn(4, s, PD_FLOAT32);
    pd_tensor *dy = pd_randn(4, s, PD_FLOAT32);
    pd_tensor_set_stop_gradient(q, false);
    pd_tensor_set_stop_gradient(k, false);
    pd_tensor_set_stop_gradient(v, false);
    int iters = s[1] > 256 ? 2 : 20;
    size_t pf = 0, pc = 0;
    double tf = time_ms(true, q, k, v, dy, iters, &pf), tc = time_ms(false, q, k, v, dy, iters, &pc);
    char name[64];
    snprintf(name, sizeof name, "[%lld,%lld,%lld,%lld]", (long long)s[0], (long long)s[1], (long long)s[2],
             (long long)s[3]);
    printf("%-20s %12.3f %12.3f %8.2f %14.2f %14.2f\n", name, tf, tc, tc / tf, (double)pf / 1048576.0,
           (double)pc / 1048576.0);
    pd_scope_end();
  }
  return 0;
}
