/* Fused normalization against the same math composed from primitive ops
 * (sum, scale, subtract, multiply, rsqrt, add) in the same run, float32:
 *   layer_norm forward, and forward + backward (dx, dweight, dbias)
 *   rms_norm forward + backward
 * Backward is driven by paddle.grad with a fixed upstream gradient, so both
 * sides do exactly one normalization forward and its backward.
 * Prints milliseconds (best of BEST_OF runs) and composed / fused. */
#include <paddlec.h>
#include <stdio.h>
#include <time.h>

#include "timing.h"

#define BEST_OF 5

static double now_ms(void) { return 1e3 * bench_now_s(); }

typedef struct problem {
  pd_tensor *x, *w, *b, *dy;
  int64_t n;
  bool rms;
} problem;

/* y over the last dim, composed from primitive ops */
static pd_tensor *composed(const problem *p) {
  int64_t ax = -1;
  pd_tensor *xc = p->x;
  if (!p->rms) xc = pd_subtract(p->x, pd_scale(pd_sum(p->x, &ax, 1, true), 1.0 / (double)p->n, 0, true));
  pd_tensor *var = pd_scale(pd_sum(pd_multiply(xc, xc), &ax, 1, true), 1.0 / (double)p->n, 0, true);
  pd_tensor *y = pd_multiply(pd_multiply(xc, pd_rsqrt(pd_scale(var, 1.0, 1e-5, true))), p->w);
  return p->rms ? y : pd_add(y, p->b);
}

static pd_tensor *fused(const problem *p) {
  return p->rms ? pd_rms_norm(p->x, 1, &p->n, p->w, 1e-5) : pd_layer_norm(p->x, 1, &p->n, p->w, p->b, 1e-5);
}

/* ms per call of forward (+ backward), best of BEST_OF runs of `iters` */
static double time_it(const problem *p, bool use_fused, bool backward, int iters) {
  double best = 1e30;
  pd_tensor *in[3] = {p->x, p->w, p->b};
  int nin = p->rms ? 2 : 3;
  for (int rep = 0; rep < BEST_OF; rep++) {
    double t0 = now_ms();
    for (int i = 0; i < iters; i++) {
      pd_scope_begin();
      pd_tensor *y = use_fused ? fused(p) : composed(p);
      if (backward) {
        pd_tensor *g[3];
        if (pd_grad(&y, 1, in, nin, &p->dy, NULL, g) != PD_OK) {
          fprintf(stderr, "grad failed: %s\n", pd_last_error());
          return -1;
        }
      }
      pd_scope_end();
    }
    double t = (now_ms() - t0) / iters;
    if (t < best) best = t;
  }
  return best;
}

static void run(const char *name, int64_t rows, int64_t n, bool rms, bool backward, int iters) {
  const int64_t shape[2] = {rows, n};
  problem p = {.n = n, .rms = rms};
  p.x = pd_randn(2, shape, PD_FLOAT32);
  p.w = pd_randn(1, &n, PD_FLOAT32);
  p.b = pd_randn(1, &n, PD_FLOAT32);
  p.dy = pd_randn(2, shape, PD_FLOAT32);
  pd_tensor *in[3] = {p.x, p.w, p.b};
  for (int i = 0; i < 3; i++) pd_tensor_set_stop_gradient(in[i], !backward);
  /* the two agree */
  pd_scope_begin();
  pd_tensor *d = pd_subtract(fused(&p), composed(&p));
  double maxdiff = 0;
  for (int64_t i = 0; i < pd_tensor_numel(d); i++) {
    double v = pd_tensor_item_at(d, i);
    if (v < 0) v = -v;
    if (v > maxdiff) maxdiff = v;
  }
  pd_scope_end();
  double tf = time_it(&p, true, backward, iters), tc = time_it(&p, false, backward, iters);
  char shp[48];
  snprintf(shp, sizeof shp, "[%lld, %lld]", (long long)rows, (long long)n);
  printf("%-28s %-14s %10.3f %10.3f %8.2fx   (max |diff| %.1e)\n", name, shp, tf, tc, tc / tf, maxdiff);
  for (int i = 0; i < 3; i++) pd_tensor_release(in[i]);
  pd_tensor_release(p.dy);
}

int main(void) {
  pd_seed(1);
  printf("%-28s %-14s %10s %10s %9s\n", "case (float32)", "shape", "fused ms", "composed", "ratio");
  run("layer_norm forward", 2048, 768, false, false, 5);
  run("layer_norm forward+backward", 2048, 768, false, true, 3);
  run("layer_norm forward+backward", 128, 4096, false, true, 5);
  run("layer_norm forward+backward", 8192, 64, false, true, 3);
  run("rms_norm forward+backward", 2048, 768, true, true, 3);
  return 0;
}
