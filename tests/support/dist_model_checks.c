#include "dist_model_checks.h"

#include <math.h>
#include <stdio.h>

static pd_tensor *rows_of(pd_tensor *t, int s, int rows) {
  return pd_slice(t, 1, (const int64_t[]){0}, (const int64_t[]){(int64_t)s * rows},
                  (const int64_t[]){(int64_t)(s + 1) * rows});
}

int dist_model_eager_steps(int rank, pd_layer *net, pd_layer *loss_fn, pd_optimizer *opt, pd_tensor *x,
                           pd_tensor *label, int rows, int steps, double *loss) {
  int rc = 0;
  for (int s = 0; s < steps && rc == 0; s++) {
    pd_scope_begin();
    pd_tensor *out = pd_layer_call1(net, rows_of(x, s, rows)), *l = NULL;
    if (!out || pd_layer_call(loss_fn, (pd_tensor *[]){out, rows_of(label, s, rows)}, 2, &l, 1) != 1) {
      rc = 2;
    } else {
      loss[s] = pd_tensor_item(l);
      if (pd_backward(l, NULL, false) != PD_OK || pd_optimizer_step(opt) != PD_OK) rc = 3;
    }
    if (rc) fprintf(stderr, "rank %d: eager step %d: %s\n", rank, s, pd_last_error());
    pd_optimizer_clear_grad(opt, false);
    pd_scope_end();
  }
  return rc;
}

int dist_model_run_steps(int rank, pd_dist_model *dm, pd_dist_data_loader *dl, int steps, double *loss) {
  int rc = 0;
  for (int s = 0; s < steps && rc == 0; s++) {
    pd_scope_begin();
    pd_tensor *in[2], *l = NULL;
    if (pd_dist_data_loader_next(dl, in, 2) != 2) {
      rc = 13;
    } else if (pd_dist_model_call(dm, in, 2, &l, 1) != 1) {
      fprintf(stderr, "rank %d: step %d: %s\n", rank, s, pd_last_error());
      rc = 14;
    } else {
      loss[s] = pd_tensor_item(l);
    }
    pd_scope_end();
  }
  return rc;
}

int dist_model_compare_runs(int rank, const double *loss, const double *eager_loss, int steps, const float *w,
                            const float *eager_w, int n) {
  for (int s = 0; s < steps; s++)
    if (fabs(loss[s] - eager_loss[s]) > 1e-6) {
      fprintf(stderr, "rank %d: step %d: loss %.9g, eagerly %.9g\n", rank, s, loss[s], eager_loss[s]);
      return 21;
    }
  for (int i = 0; i < n; i++)
    if (fabs((double)w[i] - eager_w[i]) > 1e-6) {
      fprintf(stderr, "rank %d: w[%d] %.9g, eagerly %.9g\n", rank, i, w[i], eager_w[i]);
      return 22;
    }
  return loss[steps - 1] != loss[0] ? 0 : 23; /* the weight moved */
}
