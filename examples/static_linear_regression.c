/* Seed 004's single-machine fluid program, trained in static mode:
 *
 *   x = fluid.layers.data(name='x', shape=[13], dtype='float32')
 *   y = fluid.layers.data(name='y', shape=[1], dtype='float32')
 *   y_predict = fluid.layers.fc(input=x, size=1, act=None)
 *   cost = fluid.layers.square_error_cost(input=y_predict, label=y)
 *   avg_loss = fluid.layers.mean(cost)
 *   sgd_optimizer = fluid.optimizer.SGD(learning_rate=0.001)
 *   sgd_optimizer.minimize(avg_loss)
 *
 * fluid.layers.data prepends the batch dim, so x is [-1, 13]. The targets
 * are y = x . w* + b* with known w* and b*, without noise: least squares
 * recovers them exactly, so training must reach them. The seed's rate
 * 0.001 would need tens of thousands of steps here; this example uses 0.05
 * on the full batch of 256 rows. */
#include <math.h>
#include <paddlec.h>
#include <stdio.h>
#include <stdlib.h>

#define N 256
#define D 13

static int fail(const char *what) {
  fprintf(stderr, "%s: %s\n", what, pd_last_error());
  return 1;
}

int main(int argc, char **argv) {
  int steps = argc > 1 ? atoi(argv[1]) : 2000;
  double w_true[D], b_true = 0.5;
  for (int j = 0; j < D; j++) w_true[j] = (j % 2 ? -1.0 : 1.0) * (0.25 + 0.125 * j);
  static double xs[N * D], ys[N];
  unsigned s = 1;
  for (int i = 0; i < N; i++) {
    ys[i] = b_true;
    for (int j = 0; j < D; j++) {
      s = s * 1103515245u + 12345u;
      xs[i * D + j] = ((s >> 8) & 0xffff) / 32768.0 - 1.0; /* in [-1, 1) */
      ys[i] += xs[i * D + j] * w_true[j];
    }
  }

  pd_program *main_program = pd_static_program(), *startup_program = pd_static_program();
  if (pd_static_program_guard_begin(main_program, startup_program) != PD_OK) return fail("program_guard");
  pd_tensor *x = pd_static_data("x", 2, (int64_t[]){-1, D}, PD_FLOAT32);
  pd_tensor *y = pd_static_data("y", 2, (int64_t[]){-1, 1}, PD_FLOAT32);
  pd_tensor *y_predict = pd_static_nn_fc(x, 1, 1, NULL);
  pd_tensor *cost = pd_square_error_cost(y_predict, y);
  pd_tensor *avg_loss = pd_mean(cost, NULL, 0, false);
  pd_optimizer *sgd_optimizer = pd_optimizer_sgd(0.05, NULL, 0, NULL);
  if (pd_optimizer_minimize(sgd_optimizer, avg_loss) != PD_OK) return fail("minimize");
  pd_static_program_guard_end();

  char *text = pd_program_to_string(main_program);
  if (!text) return fail("print");
  printf("%s", text);
  free(text);

  pd_executor *exe = pd_static_executor(PD_CPU);
  if (pd_executor_run(exe, startup_program, NULL, 0, NULL, 0, NULL, NULL) != PD_OK) return fail("startup");
  pd_tensor *xv = pd_tensor_from_f64(xs, PD_FLOAT32, 2, (int64_t[]){N, D});
  pd_tensor *yv = pd_tensor_from_f64(ys, PD_FLOAT32, 2, (int64_t[]){N, 1});
  pd_static_feed feed[2] = {{"x", xv}, {"y", yv}};
  double last = NAN;
  for (int step = 0; step < steps; step++) {
    pd_tensor *loss;
    if (pd_executor_run(exe, main_program, feed, 2, &avg_loss, 1, &loss, NULL) != PD_OK) return fail("run");
    last = pd_tensor_item(loss);
    if (step % 500 == 0) printf("step %4d  avg_loss %.8f\n", step, last);
    pd_tensor_release(loss);
  }
  /* the trained parameters live in the global scope under Paddle's names */
  pd_tensor *w = pd_var_scope_find_var(pd_static_global_scope(), "fc_0.w_0");
  pd_tensor *b = pd_var_scope_find_var(pd_static_global_scope(), "fc_0.b_0");
  if (!w || !b) return fail("scope");
  double err = fabs(pd_tensor_item(b) - b_true);
  for (int j = 0; j < D; j++) err = fmax(err, fabs(pd_tensor_item_at(w, j) - w_true[j]));
  printf("avg_loss %.3g, largest parameter error %.3g\n", last, err);

  pd_tensor_release(xv), pd_tensor_release(yv);
  pd_tensor_release(x), pd_tensor_release(y), pd_tensor_release(y_predict);
  pd_tensor_release(cost), pd_tensor_release(avg_loss);
  pd_optimizer_release(sgd_optimizer);
  pd_executor_release(exe);
  pd_program_release(main_program);
  pd_program_release(startup_program);
  return err < 1e-3 ? 0 : 1;
}
