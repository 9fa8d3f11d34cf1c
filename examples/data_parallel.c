/* Seed 001, paddle.DataParallel:
 *
 *   fleetrun --nproc_per_node=2 ./data_parallel
 *
 * Part 1: LinearNet (Linear(10, 10) -> Linear(10, 1)) wrapped in
 * DataParallel, MSELoss and Adam(learning_rate=0.001) on random [10, 10]
 * inputs and [10, 1] labels, each step printing its loss; the gradients are
 * averaged over the ranks during backward.
 *
 * Part 2: the documented workaround for a custom PyLayer (cus_tanh) in the
 * forward: forward and backward under no_sync, then
 * fused_allreduce_gradients on the parameters before SGD's step.
 *
 * After each part the program checks that every rank holds the same
 * parameters and exits 1 otherwise. Run alone it is a single-card program
 * (DataParallel is then a pass-through). */
#include <math.h>
#include <paddlec.h>
#include <paddlec/parallel.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "linear_net.h"

/* ---- part 2: cus_tanh and SimpleNet ----------------------------------------- */
static pd_status cus_tanh_forward(pd_pylayer_ctx *ctx, pd_tensor *const *x, int n_in, pd_tensor **y,
                                  int n_out) {
  (void)n_in, (void)n_out;
  y[0] = pd_tanh(x[0]);
  return y[0] ? pd_pylayer_save_for_backward(ctx, y, 1) : pd_last_status();
}

/* grad = dy * (1 - y^2) */
static pd_status cus_tanh_backward(pd_pylayer_ctx *ctx, pd_tensor *const *dy, int n_out, pd_tensor **dx,
                                   int n_in) {
  (void)n_out, (void)n_in;
  pd_tensor *y = pd_pylayer_saved_tensor(ctx, 0);
  /* backward runs inside the library: temporaries are released by hand */
  pd_tensor *yy = pd_square(y);
  pd_tensor *one_minus = pd_scale(yy, -1.0, 1.0, true);
  dx[0] = pd_multiply(dy[0], one_minus);
  pd_tensor_release(yy);
  pd_tensor_release(one_minus);
  return dx[0] ? PD_OK : pd_last_status();
}

static const pd_pylayer cus_tanh = {
    .name = "cus_tanh", .forward = cus_tanh_forward, .backward = cus_tanh_backward};

typedef struct simple_net {
  pd_layer base;
  pd_layer *linear;
} simple_net;

static int simple_net_forward(pd_layer *self, pd_tensor *const *in, int n_in, pd_tensor **out, int max_out) {
  (void)n_in, (void)max_out;
  pd_tensor *h = NULL;
  if (pd_pylayer_apply(&cus_tanh, in, 1, &h, 1) != PD_OK) return pd_last_status();
  out[0] = pd_layer_call1(((simple_net *)self)->linear, h);
  return out[0] ? 1 : pd_last_status();
}

static const pd_layer_type simple_net_type = {.name = "SimpleNet", .forward = simple_net_forward};

static pd_layer *simple_net_new(void) {
  simple_net *net = pd_layer_new(sizeof *net, &simple_net_type);
  if (!net) return NULL;
  net->linear = pd_layer_add_sublayer(&net->base, "linear", pd_nn_linear(2, 2, NULL));
  if (!net->linear) {
    pd_layer_release(&net->base);
    return NULL;
  }
  return &net->base;
}

/* ---- helpers ----------------------------------------------------------------- */

/* True when every rank holds bit-identical parameters (MAX and MIN of each
 * element over the ranks agree with the local value). */
static bool same_on_all_ranks(pd_layer *model) {
  pd_named_tensors ps;
  if (pd_layer_parameters(model, &ps) != PD_OK) return false;
  bool same = true;
  pd_scope_begin();
  for (int i = 0; i < ps.n && same; i++) {
    pd_tensor *hi = pd_clone(ps.tensors[i], PD_FLOAT32), *lo = pd_clone(ps.tensors[i], PD_FLOAT32);
    if (pd_dist_all_reduce(hi, PD_REDUCE_MAX, NULL) != PD_OK ||
        pd_dist_all_reduce(lo, PD_REDUCE_MIN, NULL) != PD_OK)
      same = false;
    for (int64_t k = 0; same && k < pd_tensor_numel(hi); k++)
      same = pd_tensor_item_at(hi, k) == pd_tensor_item_at(lo, k);
  }
  pd_scope_end();
  pd_named_tensors_free(&ps);
  return same;
}

static pd_optimizer *optimizer_for(pd_layer *model, bool adam) {
  pd_named_tensors ps;
  if (pd_layer_parameters(model, &ps) != PD_OK) return NULL;
  pd_optimizer *o = adam ? pd_optimizer_adam(0.001, ps.tensors, ps.n, NULL)
                         : pd_optimizer_sgd(0.01, ps.tensors, ps.n, NULL);
  pd_named_tensors_free(&ps);
  return o;
}

static int train_linear_net(int rank) {
  pd_layer *layer = linear_net_new();
  pd_layer *dp_layer = layer ? pd_data_parallel(layer, NULL) : NULL; /* rank 0's weights everywhere */
  pd_layer *loss_fn = pd_nn_mse_loss(NULL);
  pd_optimizer *adam = dp_layer ? optimizer_for(dp_layer, true) : NULL;
  int rc = 0;
  if (!adam || !loss_fn) rc = 1;
  for (int step = 0; step < 5 && !rc; step++) {
    pd_scope_begin();
    pd_tensor *inputs = pd_randn(2, (int64_t[]){10, 10}, PD_FLOAT32);
    pd_tensor *outputs = pd_layer_call1(dp_layer, inputs);
    pd_tensor *labels = pd_randn(2, (int64_t[]){10, 1}, PD_FLOAT32);
    pd_tensor *loss = NULL;
    if (pd_layer_call(loss_fn, (pd_tensor *[]){outputs, labels}, 2, &loss, 1) != 1 ||
        pd_backward(loss, NULL, false) != PD_OK || pd_optimizer_step(adam) != PD_OK) {
      rc = 1;
    } else {
      printf("[rank %d] LinearNet step:%d\tloss:[", rank, step);
      print_float32((float)pd_tensor_item(loss));
      printf("]\n");
    }
    pd_optimizer_clear_grad(adam, true);
    pd_scope_end();
  }
  if (!rc && !same_on_all_ranks(layer)) {
    fprintf(stderr, "data_parallel: LinearNet parameters differ between ranks\n");
    rc = 1;
  }
  if (rc && pd_last_status() != PD_OK) fprintf(stderr, "data_parallel: %s\n", pd_last_error());
  pd_optimizer_release(adam);
  pd_layer_release(loss_fn);
  pd_layer_release(dp_layer); /* before the process group goes: its buckets live in the group's memory */
  pd_layer_release(layer);
  return rc;
}

static int train_pylayer_net(int rank) {
  pd_layer *model = simple_net_new();
  pd_layer *dp = model ? pd_data_parallel(model, NULL) : NULL;
  pd_optimizer *opt = dp ? optimizer_for(dp, false) : NULL;
  pd_named_tensors ps = {0};
  int rc = !opt || pd_layer_parameters(dp, &ps) != PD_OK;
  for (int step = 0; step < 10 && !rc; step++) {
    pd_scope_begin();
    pd_tensor *x = pd_randn(2, (int64_t[]){2, 2}, PD_FLOAT32);
    pd_tensor_set_stop_gradient(x, false);
    /* step 1: skip gradient synchronization by no_sync */
    pd_data_parallel_no_sync_begin(dp);
    pd_tensor *loss = pd_mean(pd_layer_call1(dp, x), NULL, 0, false);
    pd_status st = pd_backward(loss, NULL, false);
    pd_data_parallel_no_sync_end(dp);
    /* step 2: fuse + allreduce manually before optimization */
    if (st == PD_OK) st = pd_fleet_utils_fused_allreduce_gradients(ps.tensors, ps.n, NULL);
    if (st == PD_OK) st = pd_optimizer_step(opt);
    if (st != PD_OK) {
      rc = 1;
    } else {
      printf("[rank %d] SimpleNet+cus_tanh step:%d\tloss:[", rank, step);
      print_float32((float)pd_tensor_item(loss));
      printf("]\n");
    }
    pd_optimizer_clear_grad(opt, true);
    pd_scope_end();
  }
  if (!rc && !same_on_all_ranks(model)) {
    fprintf(stderr, "data_parallel: SimpleNet parameters differ between ranks\n");
    rc = 1;
  }
  if (rc && pd_last_status() != PD_OK) fprintf(stderr, "data_parallel: %s\n", pd_last_error());
  pd_named_tensors_free(&ps);
  pd_optimizer_release(opt);
  pd_layer_release(dp);
  pd_layer_release(model);
  return rc;
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  /* 1. initialize parallel environment */
  if (!pd_dist_init_parallel_env(NULL)) {
    fprintf(stderr, "data_parallel: %s\n", pd_last_error());
    return 1;
  }
  int rank = pd_dist_get_rank(NULL), world = pd_dist_get_world_size(NULL);
  pd_seed(2023 + (uint64_t)rank); /* each rank draws its own batches */
  int rc = train_linear_net(rank);
  if (!rc) rc = train_pylayer_net(rank);
  if (!rc) printf("[rank %d] parameters identical on all %d ranks\n", rank, world);
  pd_dist_destroy_process_group(NULL);
  return rc;
}
