/* The seed's LinearNet for the unit tests, with its sublayers reachable:
 *
 *   class LinearNet(nn.Layer):
 *       def __init__(self):
 *           self.linear1 = nn.Linear(10, hidden)
 *           self.linear2 = nn.Linear(hidden, 1)
 *       def forward(self, x):
 *           return self.linear2(self.linear1(x))
 *
 * (examples/linear_net.c is the examples' copy-free one, with the seed's
 * "_linear1" names and no access to the sublayers.) */
#ifndef PADDLEC_TEST_LINEAR_NET_H
#define PADDLEC_TEST_LINEAR_NET_H

#include <stdint.h>

#include "paddlec.h"

typedef struct linear_net {
  pd_layer base;
  pd_layer *linear1, *linear2; /* borrowed from the layer's sublayers */
} linear_net;

/* LinearNet with hidden = 10, the seed's (refcount 1; release &net->base). */
linear_net *linear_net_new(void);
/* The same with another hidden width. */
linear_net *linear_net_with_hidden(int64_t hidden);

#endif
