/* Seed 002, several cards: the LinearNet of train_single.c trained with
 * fleet (fleet.init, distributed_optimizer, distributed_model), printing
 * "step:i<TAB>loss:[x]" like the Python original. Run it through the
 * launcher:
 *
 *   fleetrun --nproc_per_node=2 build/examples/train_fleet
 *
 * Each rank draws its own random batch; DataParallel averages the
 * gradients, so every rank applies the same update. Alone it trains on one
 * card like train_single. */
#include <paddlec.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "linear_net.h"

int main(void) {
  pd_layer *layer = NULL, *loss_fn = NULL, *dp_layer = NULL;
  pd_optimizer *adam = NULL;
  /* distributed step 2: fleet.init(is_collective=True) */
  if (pd_fleet_init(true, NULL) != PD_OK) goto fail;

  layer = linear_net_new();
  loss_fn = pd_nn_mse_loss(NULL);
  pd_named_tensors params;
  if (!layer || !loss_fn || pd_layer_parameters(layer, &params) != PD_OK) goto fail;
  adam = pd_optimizer_adam(0.001, params.tensors, params.n, NULL);
  pd_named_tensors_free(&params);
  if (!adam) goto fail;

  /* distributed step 3: the distributed optimizer and model */
  pd_fleet_distributed_strategy strategy = pd_fleet_distributed_strategy_default();
  pd_optimizer *dist_adam = pd_fleet_distributed_optimizer(adam, &strategy);
  if (!dist_adam) goto fail;
  adam = dist_adam;
  dp_layer = pd_fleet_distributed_model(layer);
  if (!dp_layer) goto fail;
  /* every rank starts from rank 0's parameters; now each draws its own data */
  pd_seed(2020 + (uint64_t)pd_fleet_worker_index());

  for (int step = 0; step < 20; step++) {
    pd_scope_begin();
    pd_tensor *inputs = pd_randn(2, (int64_t[]){10, 10}, PD_FLOAT32);
    pd_tensor *outputs = pd_layer_call1(dp_layer, inputs);
    pd_tensor *labels = pd_randn(2, (int64_t[]){10, 1}, PD_FLOAT32);
    pd_tensor *loss = NULL;
    if (pd_layer_call(loss_fn, (pd_tensor *[]){outputs, labels}, 2, &loss, 1) != 1) goto fail_scope;
    printf("step:%d\tloss:[", step);
    print_float32((float)pd_tensor_item(loss));
    printf("]\n");
    fflush(stdout);
    if (pd_backward(loss, NULL, false) != PD_OK || pd_optimizer_step(adam) != PD_OK) goto fail_scope;
    pd_optimizer_clear_grad(adam, true);
    pd_scope_end();
  }
  pd_layer_release(dp_layer);
  pd_optimizer_release(adam);
  pd_layer_release(loss_fn);
  pd_layer_release(layer);
  pd_dist_destroy_process_group(NULL);
  return 0;
fail_scope:
  pd_scope_end();
fail:
  fprintf(stderr, "train_fleet: %s\n", pd_last_error());
  pd_layer_release(dp_layer);
  pd_optimizer_release(adam);
  pd_layer_release(loss_fn);
  pd_layer_release(layer);
  return 1;
}
