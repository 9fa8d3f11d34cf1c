/* paddle.static.nn: layers that create their parameters in the Program
 * being built (Paddle's LayerHelper), recorded with the ordinary ops. */
#include <string.h>

#include "paddlec/linalg.h"
#include "paddlec/manipulation.h"
#include "paddlec/math.h"
#include "static_internal.h"

/* Renames the Variable t (just recorded) to "<prefix>.tmp_<k>". */
static pd_status name_result(pd_program *p, pd_tensor *t, const char *prefix, int k) {
  pd_variable *v = pd_ir_var_of(p, t);
  if (!v) return PD_OK; /* an input passed through: keep its name */
  char name[160];
  snprintf(name, sizeof name, "%s.tmp_%d", prefix, k);
  return pd_ir_rename_var(p->blocks[p->current_block], v->name, name);
}

static pd_tensor *fc(pd_tensor *x, int64_t size, int num_flatten_dims, const char *activation) {
  if (!x) {
    if (pd_last_status() == PD_OK) pd_set_error(PD_ERR_INVALID, "fc: x is NULL");
    return NULL;
  }
  pd_program *p = pd_static_program_of(x, "fc");
  if (!p) return NULL;
  if (num_flatten_dims <= 0) num_flatten_dims = 1;
  if (size <= 0 || num_flatten_dims >= x->ndim) {
    pd_set_error(PD_ERR_INVALID, "fc: size %lld must be > 0 and num_flatten_dims %d below the rank of x (%d)",
                 (long long)size, num_flatten_dims, x->ndim);
    return NULL;
  }
  int64_t in = 1;
  for (int d = num_flatten_dims; d < x->ndim; d++) {
    if (x->shape[d] < 0) {
      pd_set_error(PD_ERR_SHAPE, "fc: dim %d of x (shape %s) is unknown; the weight needs it", d,
                   PD_SHAPE_STR(x));
      return NULL;
    }
    in *= x->shape[d];
  }
  int act = !activation                          ? 0
            : strcmp(activation, "relu") == 0    ? 1
            : strcmp(activation, "sigmoid") == 0 ? 2
            : strcmp(activation, "tanh") == 0    ? 3
            : strcmp(activation, "softmax") == 0 ? 4
                                                 : -1;
  if (act < 0) {
    pd_set_error(PD_ERR_INVALID, "fc: activation '%s' (relu, sigmoid, tanh, softmax or none)", activation);
    return NULL;
  }
  char prefix[96], wname[128], bname[128];
  pd_static_unique_name("fc", prefix, sizeof prefix);
  snprintf(wname, sizeof wname, "%s.w_0", prefix);
  snprintf(bname, sizeof bname, "%s.b_0", prefix);
  pd_tensor *w = pd_static_create_parameter(2, (int64_t[]){in, size}, x->dtype, wname, NULL, false);
  pd_tensor *b = w ? pd_static_create_parameter(1, (int64_t[]){size}, x->dtype, bname, NULL, true) : NULL;
  pd_tensor *flat = NULL, *mm = NULL, *out = NULL;
  int k = 0;
  if (b) flat = x->ndim > 2 ? pd_flatten(x, num_flatten_dims, -1) : pd_tensor_retain(x);
  if (flat && flat != x && name_result(p, flat, prefix, k++) != PD_OK) goto done;
  if (flat) mm = pd_matmul(flat, w, false, false);
  if (mm && name_result(p, mm, prefix, k++) != PD_OK) goto done;
  if (mm) out = pd_add(mm, b);
  if (out && name_result(p, out, prefix, k++) != PD_OK) goto done;
  if (out && act) {
    pd_tensor *a = act == 1   ? pd_relu(out)
                   : act == 2 ? pd_sigmoid(out)
                   : act == 3 ? pd_tanh(out)
                              : pd_softmax(out, -1);
    pd_tensor_release(out);
    out = a;
    if (out && name_result(p, out, prefix, k++) != PD_OK) goto done;
  }
  pd_tensor_release(w);
  pd_tensor_release(b);
  pd_tensor_release(flat);
  pd_tensor_release(mm);
  return out;
done:
  pd_tensor_release(w);
  pd_tensor_release(b);
  pd_tensor_release(flat);
  pd_tensor_release(mm);
  pd_tensor_release(out);
  return NULL;
}

pd_tensor *pd_static_nn_fc(pd_tensor *x, int64_t size, int num_flatten_dims, const char *activation) {
  pd_internal_enter(); /* the intermediate results are released here, not by the caller's scope */
  pd_tensor *out = fc(x, size, num_flatten_dims, activation);
  pd_internal_leave();
  return pd_scope_track(out);
}
