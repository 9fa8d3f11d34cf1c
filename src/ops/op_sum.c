/* sum over axes (all when none given). */
#include <string.h>

#include "../kernels/cpu/reduce.h"
#include "op_registry.h"
#include "paddlec/ops.h"

/* Shared by the reductions: normalises axes into a mask, fills out meta. */
pd_status pd_reduce_meta(const pd_op_def *def, const pd_tensor *x, const pd_attrs *a, pd_meta *out,
                         bool *mask) {
  int nd = x->ndim;
  for (int d = 0; d < PD_MAX_DIMS; d++) mask[d] = a->nv[0] == 0;
  for (int k = 0; k < a->nv[0]; k++) {
    int ax;
    pd_status st = pd_norm_axis(def->name, a->v[0][k], nd, &ax);
    if (st != PD_OK) return st;
    if (nd == 0) continue;
    if (mask[ax])
      return pd_set_error(PD_ERR_INVALID, "%s: axis %lld appears twice", def->name, (long long)a->v[0][k]);
    mask[ax] = true;
  }
  out->ndim = 0;
  for (int d = 0; d < nd; d++) {
    if (!mask[d])
      out->shape[out->ndim++] = x->shape[d];
    else if (a->i[0])
      out->shape[out->ndim++] = 1;
  }
  out->dtype = x->dtype;
  return PD_OK;
}

static pd_status sum_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                          pd_meta *out, int *n_out) {
  (void)n_in;
  bool mask[PD_MAX_DIMS];
  pd_status st = pd_reduce_meta(def, in[0], a, out, mask);
  if (a->i[1])
    out->dtype = a->dtype;
  else if (in[0]->dtype == PD_BOOL || in[0]->dtype == PD_INT32 || in[0]->dtype == PD_UINT8 ||
           in[0]->dtype == PD_INT8 || in[0]->dtype == PD_INT16)
    out->dtype = PD_INT64; /* Paddle sums bool and small ints into int64 */
  *n_out = 1;
  return st;
}

static pd_status sum_kernel(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                            pd_tensor **out, int n_out) {
  (void)n_in;
  (void)n_out;
  pd_meta m;
  bool mask[PD_MAX_DIMS];
  pd_status st = pd_reduce_meta(def, in[0], a, &m, mask);
  if (st != PD_OK) return st;
  pd_reduce_geom g;
  pd_reduce_geom_init(&g, in[0]->ndim, in[0]->shape, in[0]->strides, mask);
  return pd_reduce_sum(&g, pd_tensor_data(in[0]), in[0]->dtype, pd_tensor_data(out[0]), out[0]->dtype)
             ? pd_set_error(PD_ERR_DTYPE, "%s: dtype %s is not supported", def->name,
                            pd_dtype_name(in[0]->dtype))
             : PD_OK;
}

static pd_status sum_backward(const pd_backward_ctx *c) {
  if (!c->needs_grad[0]) return PD_OK;
  const pd_meta *xm = &c->in_meta[0];
  pd_tensor *g = c->grad_out[0];
  /* put the reduced dims back as 1s, then broadcast */
  int64_t kshape[PD_MAX_DIMS];
  bool mask[PD_MAX_DIMS];
  for (int d = 0; d < PD_MAX_DIMS; d++) mask[d] = c->attrs->nv[0] == 0;
  for (int k = 0; k < c->attrs->nv[0]; k++) {
    int64_t ax = c->attrs->v[0][k];
    if (xm->ndim > 0) mask[ax < 0 ? ax + xm->ndim : ax] = true;
  }
  for (int d = 0; d < xm->ndim; d++) kshape[d] = mask[d] ? 1 : xm->shape[d];
  pd_tensor *r = pd_reshape(g, xm->ndim, kshape);
  pd_tensor *e = pd_expand(r, xm->ndim, xm->shape);
  pd_tensor_release(r);
  if (e && e->dtype != xm->dtype) {
    pd_tensor *cst = pd_cast(e, xm->dtype);
    pd_tensor_release(e);
    e = cst;
  }
  c->grad_in[0] = e;
  return e ? PD_OK : pd_last_status();
}

const pd_op_def pd_opdef_sum = {.name = "sum",
                                .n_in = 1,
                                .n_out = 1,
                                .flags = PD_OPF_DIFF | PD_OPF_HALF_VIA_F32,
                                .attr_names = "v0:axis,i0:keepdim,i1:has_dtype,dtype",
                                .infer_meta = sum_meta,
                                .kernel = {[PD_PLACE_CPU] = sum_kernel},
                                .backward = sum_backward};

pd_tensor *pd_sum(pd_tensor *x, const int64_t *axis, int naxis, bool keepdim) {
  if (naxis < 0 || naxis > PD_MAX_DIMS || (naxis > 0 && !axis)) {
    pd_set_error(PD_ERR_INVALID, "sum: invalid axis list (naxis %d)", naxis);
    return NULL;
  }
  pd_attrs a = {.i = {keepdim}, .nv = {naxis}};
  if (naxis) memcpy(a.v[0], axis, sizeof(int64_t) * (size_t)naxis);
  return pd_dispatch1(PD_OP_sum, &x, 1, &a);
}
