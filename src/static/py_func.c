/* paddle.static.py_func: registers the callbacks and dispatches the
 * py_func op (src/ops/core/py_func.c), which the recorder records like any
 * other op. */
#include <string.h>

#include "../ops/core/py_func.h"
#include "static_internal.h"

pd_status pd_static_py_func(pd_py_func_fn func, void *user, pd_tensor *const *x, int n_x,
                            const pd_input_spec *out_specs, int n_out, pd_tensor **out,
                            pd_py_func_fn backward_func) {
  if (!out) return pd_set_error(PD_ERR_INVALID, "py_func: out is NULL");
  for (int k = 0; k < n_out; k++) out[k] = NULL;
  if (n_x < 0 || n_x > PD_MAX_OUTPUTS || (n_x > 0 && !x))
    return pd_set_error(PD_ERR_INVALID, "py_func: %d inputs (expected 0 to %d)", n_x, PD_MAX_OUTPUTS);
  for (int i = 0; i < n_x; i++)
    if (!x[i]) return pd_set_error(PD_ERR_INVALID, "py_func: input %d is NULL", i);
  int id = pd_py_func_register(func, user, backward_func, out_specs, n_out);
  if (id < 0) return pd_last_status();
  pd_attrs a;
  memset(&a, 0, sizeof a);
  a.i[0] = id;
  int got = 0;
  pd_tensor *res[PD_MAX_OUTPUTS];
  pd_status st = pd_dispatch(PD_OP_py_func, x, n_x, &a, res, &got);
  if (st != PD_OK) return st;
  for (int k = 0; k < got; k++) out[k] = pd_scope_track(res[k]);
  return PD_OK;
}
