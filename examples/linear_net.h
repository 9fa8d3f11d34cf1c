/* The LinearNet of seeds 001 and 002, shared by the examples that train it:
 *
 *   class LinearNet(nn.Layer):
 *       def __init__(self):
 *           self._linear1 = nn.Linear(10, 10)
 *           self._linear2 = nn.Linear(10, 1)
 *       def forward(self, x):
 *           return self._linear2(self._linear1(x))
 */
#ifndef PADDLEC_EXAMPLES_LINEAR_NET_H
#define PADDLEC_EXAMPLES_LINEAR_NET_H

#include <paddlec.h>

/* A new LinearNet (refcount 1), NULL with an error set on failure. */
pd_layer *linear_net_new(void);
/* Prints a float32 as numpy's repr does: the fewest digits that read back
 * exactly (the seeds print losses this way). */
void print_float32(float v);

#endif
