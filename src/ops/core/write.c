/* The writes the library makes into tensors it owns, as registry ops run
 * through the dispatcher (see op_registry.h): a tracer records them and the
 * storage version moves, as for any inplace op. */
#include "../op_registry.h"

/* The output is dst itself: inside the library, so the user's scope does
 * not take the extra reference the dispatch hands out. */
static pd_status run_inplace(pd_op_id id, pd_tensor *const *in, int n_in, const pd_attrs *a) {
  pd_tensor *out[PD_MAX_OUTPUTS];
  int n_out = 0;
  pd_internal_enter();
  pd_status st = pd_dispatch(id, in, n_in, a, out, &n_out);
  pd_internal_leave();
  for (int k = 0; k < n_out; k++) pd_tensor_release(out[k]);
  return st;
}

pd_status pd_write_copy(pd_tensor *dst, pd_tensor *src) {
  pd_tensor *in[2] = {dst, src};
  return run_inplace(PD_OP_copy_, in, 2, NULL);
}

pd_status pd_write_fill(pd_tensor *dst, double value) {
  /* the optimizer fills its rate slot on every step: attrs zeroed once per
   * thread (a tracer copies them) rather than 424 bytes per call */
  static _Thread_local pd_attrs a;
  a.f[0] = value;
  return pd_dispatch_inplace_trusted(PD_OP_fill_, &dst, 1, &a);
}

pd_status pd_write_scale(pd_tensor *dst, double scale) {
  pd_attrs a = {.f = {scale}, .i = {1}};
  return run_inplace(PD_OP_scale_, &dst, 1, &a);
}
