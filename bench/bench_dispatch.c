/* Eager dispatch overhead: nanoseconds per tiny op, measured against a plain
 * C loop doing the same arithmetic in the same run.
 *   1-element add (forward only, grad off)
 *   1-element add with autograd recording
 *   add + backward (one node, leaf accumulation) */
#include <paddlec.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

#define BEST_OF 5

/* `bench_dispatch N`: N ops per case (default 200000); a small N suits an
 * instruction count under callgrind. */
int main(int argc, char **argv) {
  const int64_t one[] = {1};
  pd_tensor *a = pd_full(1, one, 1.0f, PD_FLOAT32), *b = pd_full(1, one, 2.0f, PD_FLOAT32);
  const int iters = argc > 1 && atoi(argv[1]) >= 4 ? atoi(argv[1]) : 200000;
  double best_fwd = 1e30, best_rec = 1e30, best_bwd = 1e30, best_c = 1e30;

  for (int rep = 0; rep < BEST_OF; rep++) {
    /* reference: the same add in plain C (volatile, so it is not folded) */
    volatile float x = 1.0f, y = 2.0f, z = 0;
    double t0 = now_ns();
    for (int i = 0; i < iters; i++) z = x + y;
    double c = (now_ns() - t0) / iters;
    (void)z;
    if (c < best_c) best_c = c;

    bool prev = pd_set_grad_enabled(false);
    t0 = now_ns();
    for (int i = 0; i < iters; i++) pd_tensor_release(pd_add(a, b));
    double f = (now_ns() - t0) / iters;
    pd_set_grad_enabled(prev);
    if (f < best_fwd) best_fwd = f;

    pd_tensor_set_stop_gradient(a, false);
    t0 = now_ns();
    for (int i = 0; i < iters; i++) pd_tensor_release(pd_add(a, b));
    double r = (now_ns() - t0) / iters;
    if (r < best_rec) best_rec = r;

    t0 = now_ns();
    for (int i = 0; i < iters / 4; i++) {
      pd_tensor *s = pd_add(a, b);
      pd_backward(s, NULL, false);
      pd_tensor_release(s);
    }
    double bw = (now_ns() - t0) / (iters / 4);
    if (bw < best_bwd) best_bwd = bw;
    pd_tensor_set_stop_gradient(a, true);
  }
  printf("%-36s %10s\n", "case", "ns/op");
  printf("%-36s %10.1f\n", "plain C float add (reference)", best_c);
  printf("%-36s %10.1f\n", "pd_add, 1 element, no grad", best_fwd);
  printf("%-36s %10.1f\n", "pd_add, 1 element, recording", best_rec);
  printf("%-36s %10.1f\n", "pd_add + pd_backward", best_bwd);
  printf("target: pd_add no grad <= 100 ns -> %s\n", best_fwd <= 100 ? "met" : "NOT met");
  pd_tensor_release(a);
  pd_tensor_release(b);
  return 0;
}
