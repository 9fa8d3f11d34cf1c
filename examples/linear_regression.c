/* Fits y = 3x + 2 with plain gradient descent through the public API. */
#include <paddlec.h>
#include <stdio.h>

int main(void) {
  double xs[64], ys[64];
  for (int i = 0; i < 64; i++) {
    xs[i] = -1.0 + 2.0 * i / 63.0;
    ys[i] = 3.0 * xs[i] + 2.0;
  }
  const int64_t n[] = {64};
  pd_tensor *x = pd_tensor_from_f64(xs, PD_FLOAT32, 1, n), *y = pd_tensor_from_f64(ys, PD_FLOAT32, 1, n);
  pd_tensor *w = pd_zeros(1, (int64_t[]){1}, PD_FLOAT32), *b = pd_zeros(1, (int64_t[]){1}, PD_FLOAT32);
  pd_tensor_set_stop_gradient(w, false);
  pd_tensor_set_stop_gradient(b, false);
  for (int step = 0; step < 200; step++) {
    pd_scope_begin(); /* every temporary of this step is released at scope end */
    pd_tensor *err = pd_subtract(pd_add(pd_multiply(x, w), b), y);
    pd_tensor *loss = pd_scale(pd_sum(pd_multiply(err, err), NULL, 0, false), 1.0 / 64, 0, true);
    if (pd_backward(loss, NULL, false) != PD_OK) {
      fprintf(stderr, "error: %s\n", pd_last_error());
      return 1;
    }
    pd_no_grad_begin();                                     /* w -= 0.1 * dw; b -= 0.1 * db */
    pd_add_(w, pd_scale(pd_tensor_grad(w), -0.1, 0, true)); /* results belong to the scope */
    pd_add_(b, pd_scale(pd_tensor_grad(b), -0.1, 0, true));
    pd_no_grad_end();
    pd_tensor_clear_grad(w, true);
    pd_tensor_clear_grad(b, true);
    if (step % 50 == 0) printf("step %3d  loss %.6f\n", step, pd_tensor_item(loss));
    pd_scope_end();
  }
  double wf = pd_tensor_item(w), bf = pd_tensor_item(b);
  printf("w = %.4f  b = %.4f\n", wf, bf);
  pd_tensor_release(x), pd_tensor_release(y), pd_tensor_release(w), pd_tensor_release(b);
  return (wf > 2.999 && wf < 3.001 && bf > 1.999 && bf < 2.001) ? 0 : 1;
}
