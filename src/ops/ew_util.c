/* Shared infer_meta and FLOP rules for elementwise ops. */
#include <string.h>

#include "ew_util.h"

pd_status pd_meta_unary(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a, pd_meta *out,
                        int *n_out) {
  (void)def;
  (void)n_in;
  (void)a;
  pd_meta_of(in[0], &out[0]);
  *n_out = 1;
  return PD_OK;
}

__attribute__((noinline)) static pd_status broadcast_all(const char *op, pd_tensor *const *in, int n_in,
                                                         pd_meta *out) {
  bool same = true; /* fast path: identical shapes */
  int nd = in[0]->ndim;
  for (int i = 1; i < n_in && same; i++) {
    same = in[i]->ndim == nd;
    for (int d = 0; d < nd && same; d++) same = in[i]->shape[d] == in[0]->shape[d];
  }
  out->ndim = nd;
  if (same) {
    for (int d = 0; d < nd; d++) out->shape[d] = in[0]->shape[d];
    return PD_OK;
  }
  memcpy(out->shape, in[0]->shape, sizeof(int64_t) * (size_t)in[0]->ndim);
  for (int i = 1; i < n_in; i++) {
    int64_t s[PD_MAX_DIMS];
    int n;
    pd_status st = pd_broadcast_shapes(op, out->ndim, out->shape, in[i]->ndim, in[i]->shape, &n, s);
    if (st != PD_OK) return st;
    out->ndim = n;
    memcpy(out->shape, s, sizeof(int64_t) * (size_t)n);
  }
  return PD_OK;
}

pd_status pd_meta_broadcast(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                            pd_meta *out, int *n_out) {
  (void)a;
  *n_out = 1;
  out->dtype = in[0]->dtype;
  if (n_in == 2 && in[0]->ndim == in[1]->ndim) { /* the common case: two operands of one shape */
    const int64_t *x = in[0]->shape, *y = in[1]->shape;
    int nd = in[0]->ndim;
    bool same = true;
    for (int d = 0; d < nd; d++) {
      same &= x[d] == y[d];
      out->shape[d] = x[d];
    }
    out->ndim = nd;
    if (same) return PD_OK;
  }
  return broadcast_all(def->name, in, n_in, out);
}

pd_status pd_meta_broadcast_bool(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                                 pd_meta *out, int *n_out) {
  pd_status st = pd_meta_broadcast(def, in, n_in, a, out, n_out);
  out->dtype = PD_BOOL;
  return st;
}

double pd_flops_per_elem(pd_tensor *const *in, int n_in, const pd_attrs *a, const pd_meta *out, int n_out) {
  (void)in;
  (void)n_in;
  (void)a;
  (void)n_out;
  return (double)pd_shape_numel(out->ndim, out->shape);
}
