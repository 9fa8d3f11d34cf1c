/* The unit tests' LinearNet (linear_net.h). */
#include "linear_net.h"

static int linear_net_forward(pd_layer *self, pd_tensor *const *in, int n_in, pd_tensor **out, int max_out) {
  (void)n_in;
  (void)max_out;
  linear_net *net = (linear_net *)self;
  out[0] = pd_layer_call1(net->linear2, pd_layer_call1(net->linear1, in[0]));
  return out[0] ? 1 : pd_last_status();
}

static const pd_layer_type linear_net_type = {"LinearNet", linear_net_forward, NULL, NULL};

linear_net *linear_net_with_hidden(int64_t hidden) {
  linear_net *net = pd_layer_new(sizeof *net, &linear_net_type);
  if (!net) return NULL;
  net->linear1 = pd_layer_add_sublayer(&net->base, "linear1", pd_nn_linear(10, hidden, NULL));
  net->linear2 = pd_layer_add_sublayer(&net->base, "linear2", pd_nn_linear(hidden, 1, NULL));
  return net;
}

linear_net *linear_net_new(void) { return linear_net_with_hidden(10); }
