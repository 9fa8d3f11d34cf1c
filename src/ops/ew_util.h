/* Glue between tensors and the raw elementwise driver. */
#ifndef PADDLEC_OPS_EW_HELPERS_H
#define PADDLEC_OPS_EW_HELPERS_H

#include "../kernels/cpu/elementwise.h"
#include "op_registry.h"

/* Geometry for out = f(in...), inputs broadcast to out's shape. */
static inline void pd_ew_geom_from(pd_ew_geom *g, pd_tensor *out, pd_tensor *const *in, int n_in) {
  g->ndim = out->ndim;
  g->nops = n_in + 1;
  for (int d = 0; d < out->ndim; d++) g->shape[d] = out->shape[d];
  for (int k = 0; k <= n_in; k++) {
    pd_tensor *t = k == 0 ? out : in[k - 1];
    g->base[k] = (char *)pd_data_ptr(t);
    g->elsize[k] = (int64_t)pd_dtype_size_fast(t->dtype);
    int lead = out->ndim - t->ndim;
    for (int d = 0; d < out->ndim; d++) {
      int td = d - lead;
      g->stride[k][d] = td < 0 || t->shape[td] == 1 ? 0 : t->strides[td];
    }
  }
  pdk_ew_coalesce(g);
}

/* Runs fns[dtype] over out and inputs; error names the op and dtype. */
static inline pd_status pd_ew_apply(const char *op, pd_ew_fn const *fns, pd_dtype dt, pd_tensor *out,
                                    pd_tensor *const *in, int n_in, const double *params) {
  pd_ew_fn fn = (unsigned)dt < PD_NUM_DTYPES ? fns[dt] : NULL;
  if (!fn) return pd_set_error(PD_ERR_DTYPE, "%s: dtype %s is not supported", op, pd_dtype_name(dt));
  /* fast path: every operand contiguous with out's element count (no
   * broadcasting) runs as one flat unit-stride loop. A static Variable (no
   * data; a backward rule computing on values meets one when a Program is
   * traced) leaves it, and the other path refuses it. */
  bool flat = out->is_contiguous && !out->is_meta && n_in < PD_EW_MAX_OPERANDS;
  for (int k = 0; k < n_in && flat; k++)
    flat = in[k]->is_contiguous && in[k]->numel == out->numel && !in[k]->is_meta;
  if (!flat) {
    bool meta = out->is_meta;
    for (int k = 0; k < n_in; k++) meta |= in[k]->is_meta;
    if (meta)
      return pd_set_error(PD_ERR_UNIMPLEMENTED, "%s: computes on values, which a static Variable has not",
                          op);
  }
  if (out->numel == 0) return PD_OK;
  if (flat) {
    static const int64_t unit[PD_EW_MAX_OPERANDS] = {1, 1, 1, 1};
    char *ptr[PD_EW_MAX_OPERANDS];
    ptr[0] = (char *)pd_data_ptr(out);
    for (int k = 0; k < n_in; k++) ptr[k + 1] = (char *)pd_data_ptr(in[k]);
    if (out->numel < PD_EW_GRAIN) {
      fn(out->numel, ptr, unit, params);
    } else { /* element sizes are needed only to split the work */
      int64_t es[PD_EW_MAX_OPERANDS];
      es[0] = (int64_t)pd_dtype_size_fast(out->dtype);
      for (int k = 0; k < n_in; k++) es[k + 1] = (int64_t)pd_dtype_size_fast(in[k]->dtype);
      pdk_ew_run_flat_sized(out->numel, n_in + 1, ptr, es, fn, params);
    }
    return PD_OK;
  }
  pd_ew_geom g;
  pd_ew_geom_from(&g, out, in, n_in);
  pdk_ew_run(&g, fn, params);
  return PD_OK;
}

/* Type lists for generating kernels. X(suffix, C type). */
#define PD_FOR_FLOAT_TYPES(X) X(f32, float) X(f64, double)
#define PD_FOR_INT_TYPES(X) X(u8, uint8_t) X(i8, int8_t) X(i16, int16_t) X(i32, int32_t) X(i64, int64_t)
#define PD_FOR_NUMERIC_TYPES(X) PD_FOR_FLOAT_TYPES(X) PD_FOR_INT_TYPES(X)
/* Integer types with the unsigned type their arithmetic is done in:
 * X(suffix, C type, unsigned type). Integer results wrap around (two's
 * complement) as Paddle's kernels do; computed as (T)((UT)x op (UT)y), the
 * wrap is defined C instead of signed overflow. uint32_t for the narrow
 * types, which promote to int, so that x * y cannot overflow int. */
#define PD_FOR_SIGNED_TYPES(X) \
  X(i8, int8_t, uint32_t) X(i16, int16_t, uint32_t) X(i32, int32_t, uint32_t) X(i64, int64_t, uint64_t)
#define PD_FOR_INT_TYPES_WRAP(X) X(u8, uint8_t, uint32_t) PD_FOR_SIGNED_TYPES(X)

/* A dtype-indexed table from generated functions named prefix_<suffix>. */
#define PD_EW_TABLE_NUMERIC(prefix)                                                                          \
  {                                                                                                          \
    [PD_FLOAT32] = prefix##_f32, [PD_FLOAT64] = prefix##_f64, [PD_UINT8] = prefix##_u8,                      \
    [PD_INT8] = prefix##_i8, [PD_INT16] = prefix##_i16, [PD_INT32] = prefix##_i32, [PD_INT64] = prefix##_i64 \
  }
#define PD_EW_TABLE_INT_ONLY(prefix)                                                                         \
  {                                                                                                          \
    [PD_UINT8] = prefix##_u8, [PD_INT8] = prefix##_i8, [PD_INT16] = prefix##_i16, [PD_INT32] = prefix##_i32, \
    [PD_INT64] = prefix##_i64                                                                                \
  }
#define PD_EW_TABLE_FLOAT(prefix) \
  { [PD_FLOAT32] = prefix##_f32, [PD_FLOAT64] = prefix##_f64 }

/* infer_meta for same-shape unary ops (output dtype = input dtype). */
pd_status pd_meta_unary(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a, pd_meta *out,
                        int *n_out);
/* infer_meta for broadcasting binary/ternary ops (dtype of input 0). */
pd_status pd_meta_broadcast(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                            pd_meta *out, int *n_out);
/* Same, but the output is bool (comparisons, logic). */
pd_status pd_meta_broadcast_bool(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                                 pd_meta *out, int *n_out);
/* FLOPs: one per output element. */
double pd_flops_per_elem(pd_tensor *const *in, int n_in, const pd_attrs *a, const pd_meta *out, int n_out);

#endif
