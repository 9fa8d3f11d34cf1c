/* Seed 002, single card: a two-layer LinearNet trained with MSELoss and Adam
 * on random data for 20 steps, printing "step:i<TAB>loss:[x]" like the
 * Python original. */
#include <paddlec.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "linear_net.h"

int main(void) {
  pd_layer *layer = linear_net_new();
  pd_layer *loss_fn = pd_nn_mse_loss(NULL);
  pd_named_tensors params;
  if (!layer || !loss_fn || pd_layer_parameters(layer, &params) != PD_OK) goto fail;
  pd_optimizer *adam = pd_optimizer_adam(0.001, params.tensors, params.n, NULL);
  pd_named_tensors_free(&params);
  if (!adam) goto fail;
  for (int step = 0; step < 20; step++) {
    pd_scope_begin();
    pd_tensor *inputs = pd_randn(2, (int64_t[]){10, 10}, PD_FLOAT32);
    pd_tensor *outputs = pd_layer_call1(layer, inputs);
    pd_tensor *labels = pd_randn(2, (int64_t[]){10, 1}, PD_FLOAT32);
    pd_tensor *loss = NULL;
    if (pd_layer_call(loss_fn, (pd_tensor *[]){outputs, labels}, 2, &loss, 1) != 1) goto fail;
    printf("step:%d\tloss:[", step);
    print_float32((float)pd_tensor_item(loss));
    printf("]\n");
    if (pd_backward(loss, NULL, false) != PD_OK || pd_optimizer_step(adam) != PD_OK) goto fail;
    pd_optimizer_clear_grad(adam, true);
    pd_scope_end();
  }
  pd_optimizer_release(adam);
  pd_layer_release(loss_fn);
  pd_layer_release(layer);
  return 0;
fail:
  fprintf(stderr, "train_single: %s\n", pd_last_error());
  return 1;
}
