#include "norm_util.h"

#include "../core/tensor_impl.h" /* pd_shape_str */

pd_status pd_nn_norm_input(const char *name, int kind, pd_tensor *const *in, int n_in, pd_tensor **x) {
  if (n_in != 1) return pd_set_error(PD_ERR_INVALID, "%s: expects 1 input, got %d", name, n_in);
  *x = in[0];
  if (!*x)
    return pd_last_status() != PD_OK ? pd_last_status() : pd_set_error(PD_ERR_INVALID, "%s: x is NULL", name);
  int nd = pd_tensor_ndim(*x);
  bool ok = kind == 1 ? (nd == 2 || nd == 3) : nd == kind + 2;
  if (!ok) {
    char b[160];
    return pd_set_error(PD_ERR_SHAPE, "%s: expected %s input, got x of shape %s", name,
                        kind == 1   ? "2-D or 3-D"
                        : kind == 2 ? "4-D"
                                    : "5-D",
                        pd_shape_str(nd, pd_tensor_shape(*x), b, sizeof b));
  }
  return PD_OK;
}
