/* add_n (paddle.add_n, fluid.layers.sums / sum): the sum of a list of
 * tensors of one shape and dtype, as a chain of add ops, so it records into
 * a Program and differentiates like add. */
#include "../op_registry.h"
#include "paddlec/math.h"

pd_tensor *pd_add_n(pd_tensor *const *inputs, int n) {
  if (n < 1 || !inputs) {
    pd_set_error(PD_ERR_INVALID, "add_n: needs at least one input, got %d", n);
    return NULL;
  }
  for (int i = 0; i < n; i++) {
    if (!inputs[i]) {
      if (pd_last_status() == PD_OK) pd_set_error(PD_ERR_INVALID, "add_n: input %d is NULL", i);
      return NULL;
    }
    const pd_tensor *a = inputs[0], *b = inputs[i];
    if (b->dtype != a->dtype || b->ndim != a->ndim || !pd_shape_eq(a->ndim, b->shape, a->shape)) {
      char s[160];
      pd_set_error(PD_ERR_SHAPE, "add_n: input %d is %s %s, input 0 %s %s (all must match)", i,
                   pd_dtype_name(b->dtype), PD_SHAPE_STR(b), pd_dtype_name(a->dtype),
                   pd_shape_str(a->ndim, a->shape, s, sizeof s));
      return NULL;
    }
  }
  if (n == 1) return pd_scale(inputs[0], 1.0, 0.0, true); /* a new tensor, as Paddle's sum op */
  pd_tensor *acc = pd_add(inputs[0], inputs[1]);
  for (int i = 2; acc && i < n; i++) {
    pd_tensor *next = pd_add(acc, inputs[i]);
    pd_tensor_release(acc);
    acc = next;
  }
  return acc;
}
