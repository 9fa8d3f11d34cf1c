/* cast: dtype conversion (also the copy behind clone and contiguous). */
#include <string.h>

#include "../ew_util.h"
#include "paddlec/ops.h"

static void cast_run(int64_t n, char *const *p, const int64_t *s, const void *pp) {
  const pd_dtype *dt = pp;
  pd_dtype to = dt[0], from = dt[1];
  size_t os = pd_dtype_size(to), is = pd_dtype_size(from);
  char *o = p[0];
  const char *a = p[1];
  if (to == from) {
    if (s[0] == 1 && s[1] == 1) {
      memcpy(o, a, (size_t)n * os);
    } else if (os == 4) { /* strided copies by element size, not per-byte memcpy */
      for (int64_t i = 0; i < n; i++) ((uint32_t *)o)[i * s[0]] = ((const uint32_t *)a)[i * s[1]];
    } else if (os == 8) {
      for (int64_t i = 0; i < n; i++) ((uint64_t *)o)[i * s[0]] = ((const uint64_t *)a)[i * s[1]];
    } else if (os == 2) {
      for (int64_t i = 0; i < n; i++) ((uint16_t *)o)[i * s[0]] = ((const uint16_t *)a)[i * s[1]];
    } else {
      for (int64_t i = 0; i < n; i++) o[i * s[0]] = a[i * s[1]];
    }
  } else if (to == PD_FLOAT64 && from == PD_FLOAT32) {
    for (int64_t i = 0; i < n; i++) ((double *)o)[i * s[0]] = ((const float *)a)[i * s[1]];
  } else if (to == PD_FLOAT32 && from == PD_FLOAT64) {
    for (int64_t i = 0; i < n; i++) ((float *)o)[i * s[0]] = (float)((const double *)a)[i * s[1]];
  } else if (!pd_dtype_is_floating(to) && !pd_dtype_is_floating(from)) {
    for (int64_t i = 0; i < n; i++) /* integers and bool, exactly, through int64 */
      pd_store_from_i64(o + i * s[0] * (int64_t)os, to, pd_load_as_i64(a + i * s[1] * (int64_t)is, from));
  } else {
    for (int64_t i = 0; i < n; i++)
      pd_store_from_f64(o + i * s[0] * (int64_t)os, to, pd_load_as_f64(a + i * s[1] * (int64_t)is, from));
  }
}

static pd_status cast_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                           pd_meta *out, int *n_out) {
  (void)n_in;
  if ((unsigned)a->dtype >= PD_NUM_DTYPES)
    return pd_set_error(PD_ERR_DTYPE, "%s: invalid target dtype %d", def->name, (int)a->dtype);
  pd_meta_of(in[0], out);
  out->dtype = a->dtype;
  *n_out = 1;
  return PD_OK;
}

static pd_status cast_kernel(const pd_kernel_ctx *ctx) {
  if (ctx->out[0]->numel == 0) return PD_OK;
  pd_dtype dts[2] = {ctx->out[0]->dtype, ctx->in[0]->dtype};
  pd_ew_geom g;
  pd_ew_geom_from(&g, ctx->out[0], ctx->in, 1);
  pdk_ew_run(&g, cast_run, dts);
  return PD_OK;
}

static pd_status cast_backward(const pd_backward_ctx *c) {
  if (c->needs_grad[0]) {
    c->grad_in[0] = pd_cast(c->grad_out[0], c->in_meta[0].dtype);
    if (!c->grad_in[0]) return pd_last_status();
  }
  return PD_OK;
}

PD_OPDEF(cast, .n_in = 1, .n_out = 1, .flags = PD_OPF_DIFF, .attr_names = "dtype", .infer_meta = cast_meta,
         .kernel = {[PD_PLACE_CPU] = cast_kernel}, .backward = cast_backward);

pd_tensor *pd_cast(pd_tensor *x, pd_dtype dt) {
  if (x && x->dtype == dt) return pd_scope_track(pd_tensor_retain(x)); /* Paddle returns x itself */
  pd_attrs a = {.dtype = dt};
  return pd_dispatch1(PD_OP_cast, &x, 1, &a);
}

pd_tensor *pd_clone(pd_tensor *x, pd_dtype dt) {
  if (!x) {
    if (pd_last_status() == PD_OK) pd_set_error(PD_ERR_INVALID, "clone: x is NULL");
    return NULL;
  }
  pd_attrs a = {.dtype = dt == PD_NUM_DTYPES ? x->dtype : dt};
  bool prev = pd_grad_mode_set(false);
  pd_tensor *r = pd_dispatch1(PD_OP_cast, &x, 1, &a);
  pd_grad_mode_set(prev);
  return r;
}
