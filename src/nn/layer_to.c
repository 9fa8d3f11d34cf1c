/* Layer.to(dtype=...) / Layer.astype(dtype) and Tensor.astype: a whole
 * layer's parameters and buffers converted in place. */
#include "../core/core_internal.h"
#include "paddlec/autograd.h"
#include "paddlec/math.h"
#include "paddlec/nn.h"

pd_tensor *pd_tensor_astype(pd_tensor *x, pd_dtype dt) { return pd_cast(x, dt); }

/* Converts t to dt in place (same tensor object); drops its gradient,
 * which no longer matches. */
static pd_status convert(pd_tensor *t, pd_dtype dt) {
  if (t->dtype == dt) return PD_OK;
  pd_internal_enter();
  pd_no_grad_begin();
  pd_tensor *c = pd_cast(t, dt);
  pd_no_grad_end();
  pd_internal_leave();
  if (!c) return pd_last_status();
  pd_tensor_take_data(t, c);
  pd_tensor_release(c);
  pd_tensor_set_grad(t, NULL);
  return PD_OK;
}

pd_status pd_layer_to(pd_layer *l, pd_dtype dt) {
  if (!l) return pd_set_error(PD_ERR_INVALID, "Layer.to: layer is NULL");
  if ((unsigned)dt >= PD_NUM_DTYPES) return pd_set_error(PD_ERR_DTYPE, "Layer.to: invalid dtype %d", (int)dt);
  pd_named_tensors params = {0}, bufs = {0};
  pd_status st = pd_layer_named_parameters(l, &params);
  if (st == PD_OK) st = pd_layer_named_buffers(l, &bufs);
  /* parameters stay floating (optimizers and create_parameter require it):
   * checked before anything changes */
  if (st == PD_OK && !pd_dtype_is_floating(dt) && params.n > 0)
    st = pd_set_error(PD_ERR_DTYPE,
                      "Layer.to: parameter '%s' cannot become %s; parameters must be float16, bfloat16, "
                      "float32 or float64",
                      params.names[0], pd_dtype_name(dt));
  for (int i = 0; st == PD_OK && i < params.n; i++) st = convert(params.tensors[i], dt);
  for (int i = 0; st == PD_OK && i < bufs.n; i++) st = convert(bufs.tensors[i], dt);
  pd_named_tensors_free(&params);
  pd_named_tensors_free(&bufs);
  return st;
}

pd_status pd_layer_astype(pd_layer *l, pd_dtype dt) { return pd_layer_to(l, dt); }
