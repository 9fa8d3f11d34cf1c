/* Cross entropy forward + backward: the fused op (one pass for the
 * log-sum-exp and the loss, one pass for the gradient) against the same
 * loss composed of public ops in the same run,
 *   -mean(index_sample(log_softmax(x), label)),
 * float32 logits, hard int64 labels, reduction mean; best and median of the
 * timed runs (the two losses run interleaved, so both see the same load).
 *   [512, 1000]        a classifier batch
 *   [4, 128, 1000]     a token-level loss (batch 4, sequence 128) on the last axis
 * Usage: bench_cross_entropy [reps] */
#include <paddlec.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "timing.h"

static double now_ms(void) { return 1e3 * bench_now_s(); }

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* fused: pd_cross_entropy; composed: log_softmax, index_sample, mean */
static pd_tensor *loss_fused(pd_tensor *x, pd_tensor *label) {
  return pd_cross_entropy(x, label, NULL, -100, PD_REDUCTION_MEAN, false, -1, true, 0.0);
}
static pd_tensor *loss_composed(pd_tensor *x, pd_tensor *label2d, int64_t rows, int64_t classes) {
  pd_tensor *lp = pd_log_softmax(x, -1);
  pd_tensor *lp2 = pd_reshape(lp, 2, (int64_t[]){rows, classes});
  pd_tensor *picked = pd_index_sample(lp2, label2d);
  pd_tensor *s = pd_sum(picked, NULL, 0, false);
  return pd_scale(s, -1.0 / (double)rows, 0.0, true);
}

/* one forward + backward; returns ms */
static double step(pd_tensor *x, pd_tensor *label, pd_tensor *label2d, int64_t rows, int64_t classes,
                   bool fused, double *value) {
  pd_scope_begin();
  double t0 = now_ms();
  pd_tensor *l = fused ? loss_fused(x, label) : loss_composed(x, label2d, rows, classes);
  pd_backward(l, NULL, false);
  double t = now_ms() - t0;
  *value = pd_tensor_item(l);
  pd_scope_end();
  pd_tensor_clear_grad(x, false);
  return t;
}

static void run(const char *name, int ndim, const int64_t *shape, int reps) {
  int64_t classes = shape[ndim - 1], rows = 1;
  for (int d = 0; d < ndim - 1; d++) rows *= shape[d];
  pd_seed(1);
  pd_tensor *x = pd_randn(ndim, shape, PD_FLOAT32);
  pd_tensor_set_stop_gradient(x, false);
  pd_tensor *label = pd_randint(0, classes, ndim - 1, shape, PD_INT64);
  pd_tensor *label2d = pd_reshape(label, 2, (int64_t[]){rows, 1});
  double *tf = malloc(sizeof(double) * (size_t)reps), *tc = malloc(sizeof(double) * (size_t)reps);
  double vf = 0, vc = 0;
  for (int w = 0; w < 3; w++) { /* warm-up */
    step(x, label, label2d, rows, classes, true, &vf);
    step(x, label, label2d, rows, classes, false, &vc);
  }
  for (int r = 0; r < reps; r++) { /* interleaved so both see the same machine state */
    tf[r] = step(x, label, label2d, rows, classes, true, &vf);
    tc[r] = step(x, label, label2d, rows, classes, false, &vc);
  }
  qsort(tf, (size_t)reps, sizeof *tf, cmp);
  qsort(tc, (size_t)reps, sizeof *tc, cmp);
  printf("%-16s %8.3f %8.3f %10.3f %8.3f %7.2fx %7.2fx   loss %.6f / %.6f\n", name, tf[0], tf[reps / 2],
         tc[0], tc[reps / 2], tc[0] / tf[0], tc[reps / 2] / tf[reps / 2], vf, vc);
  free(tf);
  free(tc);
  pd_tensor_release(label2d);
  pd_tensor_release(label);
  pd_tensor_release(x);
}

int main(int argc, char **argv) {
  int reps = argc > 1 ? atoi(argv[1]) : 21;
  if (reps < 1) reps = 1;
  printf("cross entropy, float32, forward + backward, %d runs (ms; speedup = composed / fused)\n", reps);
  printf("%-16s %8s %8s %10s %8s %8s %8s\n", "shape", "fused", "(median)", "composed", "(median)", "best",
         "median");
  run("[512, 1000]", 2, (int64_t[]){512, 1000}, reps);
  run("[4, 128, 1000]", 3, (int64_t[]){4, 128, 1000}, reps);
  return 0;
}
