/* dist.to_static on 2 processes with placements that make the partitioned
 * Program reshard in every way the op rules ask for, forward and backward:
 *
 *   h = x @ w0          w0 Shard(1): h Shard(1)
 *   p = h @ w1          w1 Shard(0): p Partial(sum)
 *   r = p + b           b replicated: p all-reduced (Partial -> Replicate)
 *   t = h + h^T         h^T Shard(0): h moved Shard(1) -> Shard(0)
 *                       (all_gather, then slice)
 *   out = r + t         r sliced to t's rows (Replicate -> Shard)
 *   loss = mse(out, y)
 *
 * and the gradients of the sharded weights' neighbours gathered for the
 * replicated bias's update (Shard -> Replicate). Three train steps' losses
 * and the trained parameters equal the same model trained eagerly in one
 * process to 1e-6. No op rule asks a replicated input to become Partial
 * (add keeps Partial only where every input is Partial), so the
 * partitioner's Replicate -> Partial scale has no case here. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist_ranks.h"
#include "paddlec.h"
#include "test_util.h"

enum { N = 4, STEPS = 3 }; /* batch = features = N, so h and h^T add */

typedef struct net {
  pd_layer base;
  pd_tensor *w0, *w1, *b; /* borrowed from the base's parameters */
} net;

static int net_forward(pd_layer *self, pd_tensor *const *in, int n_in, pd_tensor **out, int max_out) {
  net *m = (net *)self;
  if (n_in < 1 || max_out < 1) return PD_ERR_INVALID;
  pd_tensor *h = pd_matmul(in[0], m->w0, false, false);
  pd_tensor *r = h ? pd_add(pd_matmul(h, m->w1, false, false), m->b) : NULL;
  pd_tensor *t = h ? pd_add(h, pd_transpose(h, 2, (const int64_t[]){1, 0})) : NULL;
  out[0] = r && t ? pd_add(r, t) : NULL;
  return out[0] ? 1 : pd_last_status();
}

static const pd_layer_type k_net_type = {.name = "ReshardNet", .forward = net_forward};

static pd_tensor *param_of(pd_layer *l, const char *name, double base, int ndim, const int64_t *shape) {
  double v[N * N];
  int n = ndim == 1 ? (int)shape[0] : (int)(shape[0] * shape[1]);
  for (int i = 0; i < n; i++) v[i] = 0.3 * sin(base + 0.7 * i);
  pd_scope_begin(); /* the scope drops the creation's reference; the layer keeps one */
  pd_tensor *t = pd_tensor_from_f64(v, PD_FLOAT32, ndim, shape);
  bool ok = t && pd_layer_add_parameter(l, name, t) == PD_OK;
  pd_scope_end();
  return ok ? pd_layer_parameter(l, name) : NULL;
}

/* The net, with w0 Shard(1) and w1 Shard(0) on mesh (NULL: dense). */
static net *net_new(pd_dist_process_mesh *mesh) {
  net *m = pd_layer_new(sizeof *m, &k_net_type);
  if (!m) return NULL;
  const int64_t sq[2] = {N, N}, vec[1] = {N};
  m->w0 = param_of(&m->base, "w0", 0.1, 2, sq);
  m->w1 = param_of(&m->base, "w1", 1.3, 2, sq);
  m->b = param_of(&m->base, "b", 2.9, 1, vec);
  bool ok = m->w0 && m->w1 && m->b;
  if (ok && mesh) {
    pd_scope_begin(); /* sharded in place; the scope takes the handles returned */
    ok = pd_dist_shard_tensor(m->w0, mesh, (pd_dist_placement[]){pd_dist_shard(1)}, 1) &&
         pd_dist_shard_tensor(m->w1, mesh, (pd_dist_placement[]){pd_dist_shard(0)}, 1);
    pd_scope_end();
  }
  if (!ok) {
    pd_layer_release(&m->base);
    return NULL;
  }
  return m;
}

static void batch_of(pd_tensor **x, pd_tensor **y) {
  double xs[N * N], ys[N * N];
  for (int i = 0; i < N * N; i++) {
    xs[i] = sin(0.41 * (i + 1)); /* the same batch each step: the loss falls */
    ys[i] = cos(0.29 * (i + 1));
  }
  *x = pd_tensor_from_f64(xs, PD_FLOAT32, 2, (const int64_t[]){N, N});
  *y = pd_tensor_from_f64(ys, PD_FLOAT32, 2, (const int64_t[]){N, N});
}

/* The losses and trained parameters (w0, w1, b) of a run. */
typedef struct result {
  double loss[STEPS];
  float param[3][N * N];
} result;

static int params_of(int rank, net *m, result *r) {
  pd_tensor *ps[3] = {m->w0, m->w1, m->b};
  for (int k = 0; k < 3; k++) {
    pd_scope_begin();
    pd_tensor *d = pd_dist_is_dist(ps[k]) ? pd_dist_unshard_dtensor(ps[k]) : ps[k];
    DIST_CHECK(d, 50 + k);
    pd_tensor_copy_to(d, r->param[k], k == 2 ? N : N * N, PD_FLOAT32);
    pd_scope_end();
  }
  return 0;
}

static int run_eager(int rank, result *r) {
  net *m = net_new(NULL);
  pd_layer *mse = pd_nn_mse_loss(NULL);
  DIST_CHECK(m && mse, 1);
  pd_optimizer *opt = pd_optimizer_sgd(0.1, (pd_tensor *[]){m->w0, m->w1, m->b}, 3, NULL);
  for (int s = 0; s < STEPS; s++) {
    pd_scope_begin();
    pd_tensor *x, *y, *loss = NULL;
    batch_of(&x, &y);
    pd_tensor *out = pd_layer_call1(&m->base, x);
    DIST_CHECK(out && pd_layer_call(mse, (pd_tensor *[]){out, y}, 2, &loss, 1) == 1, 2);
    r->loss[s] = pd_tensor_item(loss);
    DIST_CHECK(pd_backward(loss, NULL, false) == PD_OK && pd_optimizer_step(opt) == PD_OK, 3);
    pd_optimizer_clear_grad(opt, false);
    pd_scope_end();
  }
  int rc = params_of(rank, m, r);
  pd_optimizer_release(opt);
  pd_layer_release(mse);
  pd_layer_release(&m->base);
  return rc;
}

static int run_dist(int rank, pd_dist_process_mesh *mesh, result *r) {
  net *m = net_new(mesh);
  pd_layer *mse = pd_nn_mse_loss(NULL);
  DIST_CHECK(m && mse, 11);
  pd_optimizer *opt = pd_optimizer_sgd(0.1, (pd_tensor *[]){m->w0, m->w1, m->b}, 3, NULL);
  double xs[STEPS * N * N], ys[STEPS * N * N];
  pd_scope_begin();
  for (int s = 0; s < STEPS; s++) {
    pd_tensor *x, *y;
    batch_of(&x, &y);
    pd_tensor_copy_to(x, xs + s * N * N, N * N, PD_FLOAT64);
    pd_tensor_copy_to(y, ys + s * N * N, N * N, PD_FLOAT64);
  }
  pd_tensor *t[2] = {pd_tensor_from_f64(xs, PD_FLOAT32, 2, (const int64_t[]){STEPS * N, N}),
                     pd_tensor_from_f64(ys, PD_FLOAT32, 2, (const int64_t[]){STEPS * N, N})};
  pd_io_dataset *ds = pd_io_tensor_dataset(t, 2);
  pd_scope_end();
  pd_io_loader *loader = pd_io_data_loader(ds, &(pd_io_data_loader_opts){.batch_size = N});
  pd_dist_model *dm = NULL;
  pd_dist_data_loader *dl = NULL;
  DIST_CHECK(opt && loader && pd_dist_to_static(&m->base, loader, NULL, mse, opt, NULL, &dm, &dl) == PD_OK,
             12);
  for (int s = 0; s < STEPS; s++) {
    pd_scope_begin();
    pd_tensor *in[2], *loss = NULL;
    DIST_CHECK(pd_dist_data_loader_next(dl, in, 2) == 2, 13);
    DIST_CHECK(pd_dist_model_call(dm, in, 2, &loss, 1) == 1, 14);
    r->loss[s] = pd_tensor_item(loss);
    pd_scope_end();
  }
  int rc = params_of(rank, m, r);
  /* each reshard kind the rules ask for is in this rank's train Program */
  char *prog = pd_program_to_string(pd_dist_model_main_program(dm, PD_DIST_MODE_TRAIN, false));
  DIST_CHECK(prog, 15);
  const char *kinds[] = {"c_allreduce", "c_allgather", " slice(", "strided_slice(", "transpose"};
  for (int k = 0; k < 5 && rc == 0; k++)
    if (test_count_of(prog, kinds[k]) == 0) {
      fprintf(stderr, "rank %d: no %s in the partitioned Program:\n%s\n", rank, kinds[k], prog);
      rc = 16;
    }
  /* Shard(1) -> Shard(0) of h forward and of h^T's gradient backward: a
   * gather along dim 1, then this rank's rows [2 rank, 2 rank + 2) */
  char rows[64];
  snprintf(rows, sizeof rows, "starts = [%d], ends = [%d]", 2 * rank, 2 * rank + 2);
  if (rc == 0 && (test_count_of(prog, "nranks = 2, axis = 1") < 2 || test_count_of(prog, rows) < 2)) {
    fprintf(stderr, "rank %d: no gather along dim 1 and slice %s:\n%s\n", rank, rows, prog);
    rc = 17;
  }
  /* p's all_reduce forward, w0's Partial gradient's backward; b's
   * gradient, sharded by rows, gathered for its replicated update */
  if (rc == 0 &&
      (test_count_of(prog, "nranks = 2, reduce_type = 0") < 2 || !strstr(prog, "nranks = 2, axis = 0"))) {
    fprintf(stderr, "rank %d: the all_reduces or the gradient's gather are missing:\n%s\n", rank, prog);
    rc = 18;
  }
  free(prog);
  pd_dist_model_release(dm);
  pd_dist_data_loader_release(dl);
  pd_io_loader_release(loader);
  pd_io_dataset_release(ds);
  pd_optimizer_release(opt);
  pd_layer_release(mse);
  pd_layer_release(&m->base);
  return rc;
}

static int rank_reshard(int rank) {
  result eager, dist;
  int rc = run_eager(rank, &eager);
  pd_dist_process_mesh *mesh =
      pd_dist_process_mesh_new(1, (const int64_t[]){2}, (const int[]){0, 1}, (const char *[]){"x"});
  if (rc == 0) rc = run_dist(rank, mesh, &dist);
  pd_dist_process_mesh_release(mesh);
  for (int s = 0; s < STEPS && rc == 0; s++)
    if (fabs(dist.loss[s] - eager.loss[s]) > 1e-6) {
      fprintf(stderr, "rank %d: step %d: loss %.9g, eagerly %.9g\n", rank, s, dist.loss[s], eager.loss[s]);
      rc = 21;
    }
  for (int k = 0; k < 3 && rc == 0; k++)
    for (int i = 0; i < (k == 2 ? N : N * N); i++)
      if (fabs((double)dist.param[k][i] - eager.param[k][i]) > 1e-6) {
        fprintf(stderr, "rank %d: param %d [%d] %.9g, eagerly %.9g\n", rank, k, i, dist.param[k][i],
                eager.param[k][i]);
        rc = 22;
        break;
      }
  if (rc == 0 && !(dist.loss[STEPS - 1] < dist.loss[0])) rc = 23;
  return rc;
}

static void test_every_reshard_on_two_processes(void **state) {
  (void)state;
  dist_run_ranks_or_fail(2, rank_reshard, 120);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_reshard_on_two_processes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
