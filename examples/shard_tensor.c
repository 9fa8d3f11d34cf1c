/* Seed 000's DemoNet with semi-automatic parallelism, trained eagerly:
 *
 *   fleetrun --nproc_per_node=2 ./shard_tensor
 *
 * DemoNet is Linear(16, 16) -> ReLU -> Linear(16, 8). On the mesh of all
 * ranks (dim name "x") linear_0's weight is sharded by columns (Shard(1))
 * and linear_1's by rows (Shard(0)), as paddle.distributed.shard_tensor
 * does in the seed; MSELoss and SGD(learning_rate=0.1) on batches of 4.
 * Every op runs on the local shards: the first matmul gives an output
 * sharded by columns, the second a Partial sum that is all-reduced before
 * the bias is added; the gradients come back with the weights' placements.
 *
 * The program also trains the same model without sharding in each process
 * and exits 1 unless the losses agree to 1e-6. Run alone it uses a mesh of
 * one process. */
#include <math.h>
#include <paddlec.h>
#include <stdio.h>
#include <stdlib.h>

#include "world_mesh.h"

enum { BATCH_SIZE = 4, IMAGE_SIZE = 16, CLASS_NUM = 8, STEPS = 8 };

static pd_layer *demo_net(void) {
  pd_seed(2024); /* the same initial weights on every rank */
  pd_layer *ls[3] = {pd_nn_linear(IMAGE_SIZE, IMAGE_SIZE, NULL), pd_nn_relu(),
                     pd_nn_linear(IMAGE_SIZE, CLASS_NUM, NULL)};
  return pd_nn_sequential(ls, 3);
}

/* The seed's random images and labels, the same on every rank. */
static pd_tensor *batch(int step, int cols, double f) {
  double v[BATCH_SIZE * IMAGE_SIZE];
  for (int i = 0; i < BATCH_SIZE * cols; i++) v[i] = 0.5 + 0.5 * sin(f * (i + 1) + 0.7 * step);
  return pd_tensor_from_f64(v, PD_FLOAT32, 2, (const int64_t[]){BATCH_SIZE, cols});
}

/* Trains STEPS steps, writing the losses; with a mesh the weights are
 * sharded first. 0 on success. */
static int train(pd_dist_process_mesh *mesh, double *losses, int rank, bool print) {
  pd_layer *net = demo_net();
  if (mesh) {
    pd_tensor *w0 = pd_layer_parameter(pd_nn_sequential_get(net, 0), "weight");
    pd_tensor *w1 = pd_layer_parameter(pd_nn_sequential_get(net, 2), "weight");
    /* a parameter is sharded in place: the layer and the optimizer see it */
    pd_tensor *s0 = pd_dist_shard_tensor(w0, mesh, (pd_dist_placement[]){pd_dist_shard(1)}, 1);
    pd_tensor *s1 = pd_dist_shard_tensor(w1, mesh, (pd_dist_placement[]){pd_dist_shard(0)}, 1);
    if (!s0 || !s1) return 1;
    pd_tensor_release(s0);
    pd_tensor_release(s1);
    if (print) {
      char buf[512];
      printf("rank %d: linear_0.weight %s, local shape [%lld, %lld]\n", rank,
             pd_dist_attr_str(w0, buf, sizeof buf), (long long)pd_tensor_shape(w0)[0],
             (long long)pd_tensor_shape(w0)[1]);
      printf("rank %d: linear_1.weight %s, local shape [%lld, %lld]\n", rank,
             pd_dist_attr_str(w1, buf, sizeof buf), (long long)pd_tensor_shape(w1)[0],
             (long long)pd_tensor_shape(w1)[1]);
    }
  }
  pd_named_tensors ps;
  if (pd_layer_parameters(net, &ps) != PD_OK) return 1;
  pd_optimizer *opt = pd_optimizer_sgd(0.1, ps.tensors, ps.n, NULL);
  pd_named_tensors_free(&ps);
  pd_layer *loss_fn = pd_nn_mse_loss(NULL);
  int rc = opt && loss_fn ? 0 : 1;
  for (int step = 0; step < STEPS && rc == 0; step++) {
    pd_scope_begin();
    pd_tensor *out = pd_layer_call1(net, batch(step, IMAGE_SIZE, 0.37));
    pd_tensor *loss = NULL;
    pd_layer_call(loss_fn, (pd_tensor *[]){out, batch(step, CLASS_NUM, 0.53)}, 2, &loss, 1);
    pd_tensor *value = pd_dist_unshard_dtensor(loss);
    if (!value || pd_backward(loss, NULL, false) != PD_OK || pd_optimizer_step(opt) != PD_OK) {
      rc = 1;
    } else {
      pd_optimizer_clear_grad(opt, false);
      losses[step] = pd_tensor_item(value);
      if (print) printf("rank %d: step %d loss %.7f\n", rank, step, losses[step]);
    }
    pd_scope_end();
  }
  pd_optimizer_release(opt);
  pd_layer_release(loss_fn);
  pd_layer_release(net);
  return rc;
}

int main(void) {
  pd_dist_process_mesh *mesh = world_mesh_init();
  if (!mesh) return 1;
  int rank = pd_dist_get_rank(NULL);
  double sharded[STEPS], single[STEPS];
  int rc = train(mesh, sharded, rank, true);
  if (rc == 0) rc = train(NULL, single, rank, false);
  if (rc != 0) fprintf(stderr, "rank %d: %s\n", rank, pd_last_error());
  if (rc == 0) rc = world_mesh_check_losses(sharded, single, STEPS, STEPS, "losses");
  pd_dist_process_mesh_release(mesh);
  pd_dist_destroy_process_group(NULL);
  return rc;
}
