/* full and the creation functions built on it; to_tensor. */
#include <math.h>
#include <string.h>

#include "../../kernels/cpu/index.h"
#include "../../kernels/cpu/parallel.h"
#include "../ew_util.h"
#include "paddlec/ops.h"

/* A fill value the dtype cannot hold would saturate (or, cast to an
 * integer, be undefined): refused as Paddle's full refuses it. Infinities
 * and NaN are values of the floating dtypes. */
static pd_status check_fill_value(const char *op, double v, pd_dtype dt) {
  if (isnan(v) || isinf(v)) {
    if (pd_dtype_is_floating(dt) || dt == PD_BOOL) return PD_OK;
  } else {
    double lo, hi;
    bool open;
    pd_dtype_range(dt, &lo, &hi, &open);
    if (v >= lo && (open ? v < hi : v <= hi)) return PD_OK;
    /* float rounding: a value that rounds to the largest finite float fits */
    if (pd_dtype_is_floating(dt) && dt != PD_FLOAT64) {
      char one[8];
      pd_store_from_f64(one, dt, v);
      if (!isinf(pd_load_as_f64(one, dt))) return PD_OK;
    }
  }
  return pd_set_error(PD_ERR_INVALID, "%s: the fill value %g is out of the range of %s", op, v,
                      pd_dtype_name(dt));
}

static pd_status full_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                           pd_meta *out, int *n_out) {
  (void)in;
  (void)n_in;
  if ((unsigned)a->dtype >= PD_NUM_DTYPES)
    return pd_set_error(PD_ERR_DTYPE, "%s: invalid dtype %d", def->name, (int)a->dtype);
  pd_status st = pd_check_shape_arg(def->name, a->nv[0], a->v[0]);
  if (st == PD_OK && !a->i[0]) st = check_fill_value(def->name, a->f[0], a->dtype);
  if (st != PD_OK) return st;
  out->dtype = a->dtype;
  out->ndim = a->nv[0];
  memcpy(out->shape, a->v[0], sizeof(int64_t) * (size_t)a->nv[0]);
  *n_out = 1;
  return PD_OK;
}

/* Fills n elements of size es with the bit pattern of one element. */
static void fill_pattern(char *p, int64_t n, size_t es, const char *one) {
#define FILL(T)                                 \
  do {                                          \
    T v;                                        \
    memcpy(&v, one, sizeof v);                  \
    T *q = (T *)p;                              \
    PD_PARALLEL_FOR(i, n, PD_GRAIN, q[i] = v;); \
  } while (0)
  switch (es) {
    case 1:
      memset(p, one[0], (size_t)n);
      break;
    case 2:
      FILL(uint16_t);
      break;
    case 4:
      FILL(uint32_t);
      break;
    default:
      FILL(uint64_t);
      break;
  }
#undef FILL
}

static pd_status full_kernel(const pd_kernel_ctx *ctx) {
  pd_tensor *o = ctx->out[0];
  if (o->numel == 0) return PD_OK;
  if (ctx->attrs->i[0]) return PD_OK; /* empty: uninitialised */
  double v = ctx->attrs->f[0];
  size_t es = pd_dtype_size(o->dtype);
  char *p = pd_tensor_data(o);
  if (v == 0.0 && !signbit(v)) {
    memset(p, 0, (size_t)o->numel * es);
    return PD_OK;
  }
  char one[8];
  pd_store_from_f64(one, o->dtype, v);
  fill_pattern(p, o->numel, es, one);
  return PD_OK;
}

PD_OPDEF(full, .n_in = 0, .n_out = 1, .attr_names = "v0:shape,f0:value,dtype,i0:uninitialised",
         .infer_meta = full_meta, .kernel = {[PD_PLACE_CPU] = full_kernel});

/* fill_(x; f0 value): every element of x becomes value (Tensor.fill_,
 * zero_): the fills the library does on tensors it owns (a gradient slot, an
 * initializer's constant) run through the dispatcher as this op. */
static pd_status fill__meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                            pd_meta *out, int *n_out) {
  (void)n_in;
  pd_status st = check_fill_value(def->name, a->f[0], in[0]->dtype);
  if (st != PD_OK) return st;
  pd_meta_of(in[0], out);
  *n_out = 1;
  return PD_OK;
}

static pd_status fill__kernel(const pd_kernel_ctx *c) {
  pd_tensor *x = c->in[0];
  const pd_attrs *a = c->attrs;
  if (x->numel == 1) { /* the optimizer's rate slot, on every step */
    if (x->dtype == PD_FLOAT64)
      *(double *)pd_data_ptr(x) = a->f[0];
    else
      pd_store_from_f64(pd_data_ptr(x), x->dtype, a->f[0]);
    return PD_OK;
  }
  if (x->numel == 0) return PD_OK;
  size_t es = pd_dtype_size_fast(x->dtype);
  char one[8];
  pd_store_from_f64(one, x->dtype, a->f[0]);
  if (x->is_contiguous) {
    if (a->f[0] == 0.0 && !signbit(a->f[0]))
      memset(pd_data_ptr(x), 0, (size_t)x->numel * es);
    else
      fill_pattern(pd_data_ptr(x), x->numel, es, one);
    return PD_OK;
  }
  static const int64_t zero[PD_MAX_DIMS];
  pdk_copy(x->ndim, x->shape, pd_data_ptr(x), x->strides, one, zero, (int64_t)es); /* a strided view */
  return PD_OK;
}

PD_OPDEF(fill_, .n_in = 1, .n_out = 1, .flags = PD_OPF_INPLACE, .attr_names = "f0:value",
         .infer_meta = fill__meta, .kernel = {[PD_PLACE_CPU] = fill__kernel});

static pd_tensor *full_impl(int ndim, const int64_t *shape, double value, pd_dtype dt, bool empty) {
  if (ndim < 0 || ndim > PD_MAX_DIMS) {
    pd_set_error(PD_ERR_INVALID, "full: rank %d is out of range [0, %d]", ndim, PD_MAX_DIMS);
    return NULL;
  }
  if (ndim > 0 && !shape) {
    pd_set_error(PD_ERR_INVALID, "full: shape is NULL for rank %d", ndim);
    return NULL;
  }
  if (dt == PD_NUM_DTYPES) dt = pd_get_default_dtype();
  pd_attrs a = {.f = {value}, .dtype = dt, .nv = {ndim}, .i = {empty}};
  if (ndim) memcpy(a.v[0], shape, sizeof(int64_t) * (size_t)ndim);
  return pd_dispatch1(PD_OP_full, NULL, 0, &a);
}

pd_tensor *pd_full(int ndim, const int64_t *shape, double value, pd_dtype dt) {
  return full_impl(ndim, shape, value, dt, false);
}
pd_tensor *pd_zeros(int ndim, const int64_t *shape, pd_dtype dt) {
  return full_impl(ndim, shape, 0, dt, false);
}
pd_tensor *pd_ones(int ndim, const int64_t *shape, pd_dtype dt) {
  return full_impl(ndim, shape, 1, dt, false);
}
pd_tensor *pd_empty(int ndim, const int64_t *shape, pd_dtype dt) {
  return full_impl(ndim, shape, 0, dt, true);
}

pd_tensor *pd_empty_eager(int ndim, const int64_t *shape, pd_dtype dt) {
  void *ctx;
  pd_tracer_fn tracer = pd_dispatch_get_tracer(&ctx);
  pd_dispatch_set_tracer(NULL, NULL);
  pd_tensor *t = full_impl(ndim, shape, 0, dt, true);
  pd_dispatch_set_tracer(tracer, ctx);
  return t;
}

static pd_tensor *like(pd_tensor *x, double v, pd_dtype dt, bool empty) {
  if (!x) {
    if (pd_last_status() == PD_OK) pd_set_error(PD_ERR_INVALID, "full_like: x is NULL");
    return NULL;
  }
  return full_impl(x->ndim, x->shape, v, dt == PD_NUM_DTYPES ? x->dtype : dt, empty);
}
pd_tensor *pd_full_like(pd_tensor *x, double value, pd_dtype dt) { return like(x, value, dt, false); }
pd_tensor *pd_zeros_like(pd_tensor *x, pd_dtype dt) { return like(x, 0, dt, false); }
pd_tensor *pd_ones_like(pd_tensor *x, pd_dtype dt) { return like(x, 1, dt, false); }
pd_tensor *pd_empty_like(pd_tensor *x, pd_dtype dt) { return like(x, 0, dt, true); }

/* Checks a user shape and dtype for the copy-in constructors, naming op. */
static bool check_new(const char *op, const void *data, pd_dtype dt, int ndim, const int64_t *shape) {
  if (!data) {
    pd_set_error(PD_ERR_INVALID, "%s: data is NULL", op);
    return false;
  }
  if ((unsigned)dt >= PD_NUM_DTYPES) {
    pd_set_error(PD_ERR_DTYPE, "%s: invalid dtype %d", op, (int)dt);
    return false;
  }
  return pd_check_shape_arg(op, ndim, shape) == PD_OK;
}

pd_tensor *pd_to_tensor(const void *data, pd_dtype dt, int ndim, const int64_t *shape) {
  if (!check_new("to_tensor", data, dt, ndim, shape)) return NULL;
  pd_internal_enter();
  pd_tensor *t = pd_empty_eager(ndim, shape, dt);
  pd_internal_leave();
  if (!t) return NULL;
  memcpy(pd_tensor_data(t), data, (size_t)t->numel * pd_dtype_size(dt));
  return pd_scope_track(t);
}

pd_tensor *pd_tensor_from_f64(const double *data, pd_dtype dt, int ndim, const int64_t *shape) {
  if (!check_new("tensor_from_f64", data, dt, ndim, shape)) return NULL;
  pd_internal_enter();
  pd_tensor *t = pd_empty_eager(ndim, shape, dt);
  pd_internal_leave();
  if (!t) return NULL;
  size_t es = pd_dtype_size(dt);
  char *p = pd_tensor_data(t);
  for (int64_t i = 0; i < t->numel; i++) pd_store_from_f64(p + (size_t)i * es, dt, data[i]);
  return pd_scope_track(t);
}
