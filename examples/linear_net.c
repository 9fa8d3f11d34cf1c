#include "linear_net.h"

#include <stdio.h>
#include <stdlib.h>

typedef struct linear_net {
  pd_layer base;
  pd_layer *linear1, *linear2;
} linear_net;

static int linear_net_forward(pd_layer *self, pd_tensor *const *in, int n_in, pd_tensor **out, int max_out) {
  (void)n_in, (void)max_out;
  linear_net *net = (linear_net *)self;
  out[0] = pd_layer_call1(net->linear2, pd_layer_call1(net->linear1, in[0]));
  return out[0] ? 1 : pd_last_status();
}

static const pd_layer_type linear_net_type = {.name = "LinearNet", .forward = linear_net_forward};

pd_layer *linear_net_new(void) {
  linear_net *net = pd_layer_new(sizeof *net, &linear_net_type);
  if (!net) return NULL;
  net->linear1 = pd_layer_add_sublayer(&net->base, "_linear1", pd_nn_linear(10, 10, NULL));
  net->linear2 = pd_layer_add_sublayer(&net->base, "_linear2", pd_nn_linear(10, 1, NULL));
  if (!net->linear1 || !net->linear2) {
    pd_layer_release(&net->base);
    return NULL;
  }
  return &net->base;
}

void print_float32(float v) {
  char buf[32];
  for (int digits = 1; digits <= 9; digits++) {
    snprintf(buf, sizeof buf, "%.*g", digits, (double)v);
    if (strtof(buf, NULL) == v) break;
  }
  fputs(buf, stdout);
}
