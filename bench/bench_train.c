/* Training step time, against the machine's GEMM peak measured in the same
 * run (dnnl_sgemm at 1024^3 is the reference for "peak").
 *   (a) the seed LinearNet loop (Linear 10-10-1, MSELoss, Adam, batch 10):
 *       pure framework overhead, target <= 10 us per step;
 *   (b) an MLP 784-1024-1024-10, batch 128, ReLU, cross entropy, SGD:
 *       target >= 70% of the sgemm peak. */
#include <oneapi/dnnl/dnnl.h>
#include <paddlec.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "timing.h"

typedef struct two_linear {
  pd_layer base;
  pd_layer *l1, *l2, *l3;
} two_linear;

static int mlp_forward(pd_layer *self, pd_tensor *const *in, int n_in, pd_tensor **out, int max_out) {
  (void)n_in, (void)max_out;
  two_linear *m = (two_linear *)self;
  if (!m->l3) { /* LinearNet: linear2(linear1(x)) */
    out[0] = pd_layer_call1(m->l2, pd_layer_call1(m->l1, in[0]));
  } else {
    pd_tensor *h = pd_relu(pd_layer_call1(m->l1, in[0]));
    h = pd_relu(pd_layer_call1(m->l2, h));
    out[0] = pd_layer_call1(m->l3, h);
  }
  return out[0] ? 1 : pd_last_status();
}
static const pd_layer_type net_type = {.name = "Net", .forward = mlp_forward};

static pd_layer *make_net(int64_t a, int64_t b, int64_t c, int64_t d) {
  two_linear *m = pd_layer_new(sizeof *m, &net_type);
  m->l1 = pd_layer_add_sublayer(&m->base, "l1", pd_nn_linear(a, b, NULL));
  m->l2 = pd_layer_add_sublayer(&m->base, "l2", pd_nn_linear(b, c, NULL));
  if (d > 0) m->l3 = pd_layer_add_sublayer(&m->base, "l3", pd_nn_linear(c, d, NULL));
  return &m->base;
}

static pd_optimizer *make_opt(pd_layer *net, bool adam, double lr) {
  pd_named_tensors ps;
  pd_layer_parameters(net, &ps);
  pd_optimizer *o =
      adam ? pd_optimizer_adam(lr, ps.tensors, ps.n, NULL) : pd_optimizer_sgd(lr, ps.tensors, ps.n, NULL);
  pd_named_tensors_free(&ps);
  return o;
}

/* Median-free best-of: the fastest of `reps` blocks of `steps` steps. */
static double time_steps(pd_layer *net, pd_layer *loss_fn, pd_optimizer *opt, pd_tensor *x, pd_tensor *y,
                         int steps, int reps) {
  double best = 1e30;
  for (int r = 0; r < reps; r++) {
    double t0 = bench_now_s();
    for (int s = 0; s < steps; s++) {
      pd_scope_begin();
      pd_tensor *out = pd_layer_call1(net, x), *loss = NULL;
      pd_layer_call(loss_fn, (pd_tensor *[]){out, y}, 2, &loss, 1);
      if (pd_backward(loss, NULL, false) != PD_OK || pd_optimizer_step(opt) != PD_OK) {
        fprintf(stderr, "bench_train: %s\n", pd_last_error());
        exit(1);
      }
      pd_optimizer_clear_grad(opt, true);
      pd_scope_end();
    }
    double t = (bench_now_s() - t0) / steps;
    if (t < best) best = t;
  }
  return best;
}

/* `bench_train --count N`: only N LinearNet steps after 50 of warm-up, for
 * an instruction count (valgrind --tool=callgrind ./bench_train --count
 * 1000; divide the count of time_steps by N). */
static int count_only(int steps) {
  pd_layer *ln = make_net(10, 10, 1, 0), *mse = pd_nn_mse_loss(NULL);
  pd_optimizer *adam = make_opt(ln, true, 1e-3);
  pd_tensor *xa = pd_randn(2, (int64_t[]){10, 10}, PD_FLOAT32),
            *ya = pd_randn(2, (int64_t[]){10, 1}, PD_FLOAT32);
  time_steps(ln, mse, adam, xa, ya, 50, 1);
  time_steps(ln, mse, adam, xa, ya, steps, 1);
  pd_tensor_release(xa), pd_tensor_release(ya);
  pd_optimizer_release(adam);
  pd_layer_release(ln), pd_layer_release(mse);
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "--count") == 0) return count_only(atoi(argv[2]));
  double peak = bench_sgemm_peak(6);
  printf("machine: dnnl_sgemm 1024^3 = %.1f GFLOP/s (the peak reference), %d threads\n\n", peak,
         pd_get_num_threads());

  /* (a) LinearNet, batch 10 */
  pd_layer *ln = make_net(10, 10, 1, 0), *mse = pd_nn_mse_loss(NULL);
  pd_optimizer *adam = make_opt(ln, true, 1e-3);
  pd_tensor *xa = pd_randn(2, (int64_t[]){10, 10}, PD_FLOAT32),
            *ya = pd_randn(2, (int64_t[]){10, 1}, PD_FLOAT32);
  time_steps(ln, mse, adam, xa, ya, 200, 1); /* warm up pools */
  double ta = time_steps(ln, mse, adam, xa, ya, 2000, 5);
  printf("(a) LinearNet step (Linear 10-10-1, MSE, Adam):  %8.2f us/step   target <= 10 us: %s\n", ta * 1e6,
         ta <= 10e-6 ? "met" : "NOT met");

  /* (b) MLP 784-1024-1024-10, batch 128, SGD */
  const int64_t B = 128;
  pd_layer *mlp = make_net(784, 1024, 1024, 10), *ce = pd_nn_cross_entropy_loss(NULL);
  pd_optimizer *sgd = make_opt(mlp, false, 0.01);
  pd_tensor *xb = pd_randn(2, (int64_t[]){B, 784}, PD_FLOAT32);
  pd_tensor *yb = pd_randint(0, 10, 2, (int64_t[]){B, 1}, PD_INT64);
  time_steps(mlp, ce, sgd, xb, yb, 5, 1);
  double tb = time_steps(mlp, ce, sgd, xb, yb, 20, 5);
  /* forward + weight grads + input grads of layers 2 and 3 (x needs none) */
  double fwd = 2.0 * B * (784.0 * 1024 + 1024.0 * 1024 + 1024.0 * 10);
  double flops = 2 * fwd + 2.0 * B * (1024.0 * 1024 + 1024.0 * 10);
  double gf = flops / tb / 1e9;
  printf(
      "(b) MLP 784-1024-1024-10 step (batch 128, SGD):   %8.2f ms/step   %.1f GFLOP/s = %.0f%% of peak "
      "(target >= 70%%: %s)\n",
      tb * 1e3, gf, 100 * gf / peak, gf >= 0.7 * peak ? "met" : "NOT met");

  pd_tensor_release(xa), pd_tensor_release(ya), pd_tensor_release(xb), pd_tensor_release(yb);
  pd_optimizer_release(adam), pd_optimizer_release(sgd);
  pd_layer_release(ln), pd_layer_release(mse), pd_layer_release(mlp), pd_layer_release(ce);
  return 0;
}
