/* Ranges and matrices: arange, linspace, eye. No inputs; the result is a
 * function of the attributes only. */
#include <math.h>
#include <string.h>

#include "../../kernels/cpu/parallel.h"
#include "../op_registry.h"
#include "paddlec/ops.h"

#define RANGE_GRAIN 65536

/* Writes element i of a float range held as double into a buffer of dtype
 * dt (float16/bfloat16 through float32, as Paddle computes them). */
static inline void store_f(void *p, pd_dtype dt, int64_t i, double v) {
  switch (dt) {
    case PD_FLOAT64:
      ((double *)p)[i] = v;
      break;
    case PD_FLOAT32:
      ((float *)p)[i] = (float)v;
      break;
    case PD_FLOAT16:
      ((uint16_t *)p)[i] = pd_f32_to_f16((float)v);
      break;
    case PD_BFLOAT16:
      ((uint16_t *)p)[i] = pd_f32_to_bf16((float)v);
      break;
    default:
      break;
  }
}

/* The value a scalar attribute takes in dtype dt (Paddle casts start, end
 * and step to the output dtype before anything else). */
static double round_to(pd_dtype dt, double v) {
  switch (dt) {
    case PD_FLOAT64:
      return v;
    case PD_FLOAT32:
      return (float)v;
    case PD_FLOAT16:
      return pd_f16_to_f32(pd_f32_to_f16((float)v));
    case PD_BFLOAT16:
      return pd_bf16_to_f32(pd_f32_to_bf16((float)v));
    default:
      return trunc(v);
  }
}

static bool range_dtype_ok(pd_dtype dt) {
  return dt == PD_INT32 || dt == PD_INT64 || dt == PD_FLOAT16 || dt == PD_BFLOAT16 || dt == PD_FLOAT32 ||
         dt == PD_FLOAT64;
}

/* Integer arguments must fit the integer dtype they are cast to. */
static pd_status check_int_range(const char *op, const char *what, double v, pd_dtype dt) {
  double lo = dt == PD_INT32 ? -2147483648.0 : -9223372036854775808.0;
  double hi = dt == PD_INT32 ? 2147483647.0 : 9223372036854774784.0;
  if (!(v >= lo && v <= hi))
    return pd_set_error(PD_ERR_INVALID, "%s: %s %g does not fit dtype %s", op, what, v, pd_dtype_name(dt));
  return PD_OK;
}

/* ---- arange --------------------------------------------------------------- */
/* Number of elements, as Paddle's GetSize in the output dtype's arithmetic. */
static pd_status arange_size(const char *op, const pd_attrs *a, int64_t *size) {
  pd_dtype dt = a->dtype;
  double start = a->f[0], end = a->f[1], step = a->f[2];
  if (!range_dtype_ok(dt))
    return pd_set_error(PD_ERR_DTYPE,
                        "%s: dtype %s is not supported (int32, int64, float16, bfloat16, "
                        "float32, float64)",
                        op, pd_dtype_name(dt));
  if (!isfinite(start) || !isfinite(end) || !isfinite(step))
    return pd_set_error(PD_ERR_INVALID, "%s: start %g, end %g and step %g must be finite", op, start, end,
                        step);
  if (pd_dtype_is_integer(dt)) {
    pd_status st;
    if ((st = check_int_range(op, "start", start, dt)) != PD_OK ||
        (st = check_int_range(op, "end", end, dt)) != PD_OK ||
        (st = check_int_range(op, "step", step, dt)) != PD_OK)
      return st;
    int64_t s = (int64_t)start, e = (int64_t)end, k = (int64_t)step;
    if (k == 0)
      return pd_set_error(PD_ERR_INVALID, "%s: step must not be 0 (got step %g as %s)", op, step,
                          pd_dtype_name(dt));
    if ((s < e && k < 0) || (s > e && k > 0)) {
      *size = 0;
      return PD_OK;
    }
    /* |e - s| may exceed int64 for extreme arguments: count in unsigned */
    uint64_t span = s < e ? (uint64_t)e - (uint64_t)s : (uint64_t)s - (uint64_t)e;
    uint64_t ak = k < 0 ? (uint64_t)0 - (uint64_t)k : (uint64_t)k;
    uint64_t n = span / ak + (span % ak != 0);
    if (n > (uint64_t)INT64_MAX / 16)
      return pd_set_error(PD_ERR_INVALID, "%s: start %g, end %g, step %g give too many elements", op, start,
                          end, step);
    *size = (int64_t)n;
    return PD_OK;
  }
  double s = round_to(dt, start), e = round_to(dt, end), k = round_to(dt, step);
  if (k == 0)
    return pd_set_error(PD_ERR_INVALID, "%s: step must not be 0 (got step %g as %s)", op, step,
                        pd_dtype_name(dt));
  if ((s < e && k < 0) || (s > e && k > 0)) {
    *size = 0;
    return PD_OK;
  }
  double n =
      dt == PD_FLOAT64 ? ceil(fabs((e - s) / k)) : (double)ceilf(fabsf(((float)e - (float)s) / (float)k));
  if (!(n < 4.0e18))
    return pd_set_error(PD_ERR_INVALID, "%s: start %g, end %g, step %g give too many elements", op, start,
                        end, step);
  *size = (int64_t)n;
  return PD_OK;
}

static pd_status arange_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                             pd_meta *out, int *n_out) {
  (void)in;
  (void)n_in;
  int64_t n = 0;
  pd_status st = arange_size(def->name, a, &n);
  if (st != PD_OK) return st;
  out->dtype = a->dtype;
  out->ndim = 1;
  out->shape[0] = n;
  *n_out = 1;
  return PD_OK;
}

/* Element i is start + i * step (computed once per element, so the work
 * splits across threads and rounding does not accumulate). */
static pd_status arange_kernel(const pd_kernel_ctx *ctx) {
  pd_tensor *o = ctx->out[0];
  int64_t n = o->numel;
  void *p = pd_tensor_data(o);
  pd_dtype dt = o->dtype;
  if (dt == PD_INT64 || dt == PD_INT32) {
    int64_t s = (int64_t)ctx->attrs->f[0], k = (int64_t)ctx->attrs->f[2];
    if (dt == PD_INT64) {
      int64_t *q = p;
      PD_PARALLEL_FOR_IF(n > RANGE_GRAIN, i, n, q[i] = (int64_t)((uint64_t)s + (uint64_t)i * (uint64_t)k););
    } else {
      int32_t *q = p;
      PD_PARALLEL_FOR_IF(n > RANGE_GRAIN, i, n, q[i] = (int32_t)(s + i * k););
    }
    return PD_OK;
  }
  double s = round_to(dt, ctx->attrs->f[0]), k = round_to(dt, ctx->attrs->f[2]);
  if (dt == PD_FLOAT32) {
    float *q = p;
    PD_PARALLEL_FOR_IF(n > RANGE_GRAIN, i, n, q[i] = (float)(s + (double)i * k););
    return PD_OK;
  }
  PD_PARALLEL_FOR_IF(n > RANGE_GRAIN, i, n, store_f(p, dt, i, s + (double)i * k););
  return PD_OK;
}

PD_OPDEF(arange, .n_in = 0, .n_out = 1, .attr_names = "f0:start,f1:end,f2:step,dtype",
         .infer_meta = arange_meta, .kernel = {[PD_PLACE_CPU] = arange_kernel});

static bool integral(double v) { return isfinite(v) && floor(v) == v; }

pd_tensor *pd_arange(double start, double end, double step, pd_dtype dt) {
  if (dt == PD_NUM_DTYPES)
    dt = integral(start) && integral(end) && integral(step) ? PD_INT64 : pd_get_default_dtype();
  pd_attrs a = {.f = {start, end, step}, .dtype = dt};
  return pd_dispatch1(PD_OP_arange, NULL, 0, &a);
}

/* ---- linspace ------------------------------------------------------------- */
static pd_status linspace_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                               pd_meta *out, int *n_out) {
  (void)in;
  (void)n_in;
  pd_dtype dt = a->dtype;
  if (!range_dtype_ok(dt))
    return pd_set_error(PD_ERR_DTYPE,
                        "%s: dtype %s is not supported (int32, int64, float16, bfloat16, "
                        "float32, float64)",
                        def->name, pd_dtype_name(dt));
  if (a->i[0] < 0)
    return pd_set_error(PD_ERR_INVALID, "%s: num must be >= 0, got num %lld", def->name, (long long)a->i[0]);
  if (!isfinite(a->f[0]) || !isfinite(a->f[1]))
    return pd_set_error(PD_ERR_INVALID, "%s: start %g and stop %g must be finite", def->name, a->f[0],
                        a->f[1]);
  if (pd_dtype_is_integer(dt)) {
    pd_status st;
    if ((st = check_int_range(def->name, "start", a->f[0], dt)) != PD_OK ||
        (st = check_int_range(def->name, "stop", a->f[1], dt)) != PD_OK)
      return st;
  }
  out->dtype = dt;
  out->ndim = 1;
  out->shape[0] = a->i[0];
  *n_out = 1;
  return PD_OK;
}

/* As Paddle: step = (stop - start) / (num - 1) in double; the first half
 * counts up from start, the second half down from stop, so both ends are
 * exact. Integer dtypes truncate start, stop and each value. */
static pd_status linspace_kernel(const pd_kernel_ctx *ctx) {
  pd_tensor *o = ctx->out[0];
  int64_t n = o->numel;
  if (n == 0) return PD_OK;
  pd_dtype dt = o->dtype;
  double s = round_to(dt, ctx->attrs->f[0]), e = round_to(dt, ctx->attrs->f[1]);
  double step = n > 1 ? (e - s) / (double)(n - 1) : 0.0;
  int64_t half = n / 2;
  void *p = pd_tensor_data(o);
  if (n == 1) half = 1;
#define LINSPACE_VALUE(i) ((i) < half ? s + step * (double)(i) : e - step * (double)(n - (i)-1))
  switch (dt) {
    case PD_INT64: {
      int64_t *q = p;
      PD_PARALLEL_FOR_IF(n > RANGE_GRAIN, i, n, q[i] = (int64_t)LINSPACE_VALUE(i););
      break;
    }
    case PD_INT32: {
      int32_t *q = p;
      PD_PARALLEL_FOR_IF(n > RANGE_GRAIN, i, n, q[i] = (int32_t)LINSPACE_VALUE(i););
      break;
    }
    default:
      PD_PARALLEL_FOR_IF(n > RANGE_GRAIN, i, n, store_f(p, dt, i, LINSPACE_VALUE(i)););
      break;
  }
#undef LINSPACE_VALUE
  return PD_OK;
}

PD_OPDEF(linspace, .n_in = 0, .n_out = 1, .attr_names = "f0:start,f1:stop,i0:num,dtype",
         .infer_meta = linspace_meta, .kernel = {[PD_PLACE_CPU] = linspace_kernel});

pd_tensor *pd_linspace(double start, double stop, int64_t num, pd_dtype dt) {
  pd_attrs a = {.f = {start, stop}, .i = {num}, .dtype = dt == PD_NUM_DTYPES ? pd_get_default_dtype() : dt};
  return pd_dispatch1(PD_OP_linspace, NULL, 0, &a);
}

/* ---- eye ------------------------------------------------------------------ */
static pd_status eye_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                          pd_meta *out, int *n_out) {
  (void)in;
  (void)n_in;
  if ((unsigned)a->dtype >= PD_NUM_DTYPES)
    return pd_set_error(PD_ERR_DTYPE, "%s: invalid dtype %d", def->name, (int)a->dtype);
  if (a->i[0] < 0)
    return pd_set_error(PD_ERR_INVALID, "%s: num_rows must be >= 0, got num_rows %lld", def->name,
                        (long long)a->i[0]);
  if (a->i[1] < -1)
    return pd_set_error(PD_ERR_INVALID,
                        "%s: num_columns must be >= 0 (or -1 for num_rows), got num_columns %lld", def->name,
                        (long long)a->i[1]);
  out->dtype = a->dtype;
  out->ndim = 2;
  out->shape[0] = a->i[0];
  out->shape[1] = a->i[1] < 0 ? a->i[0] : a->i[1];
  *n_out = 1;
  return PD_OK;
}

static pd_status eye_kernel(const pd_kernel_ctx *ctx) {
  pd_tensor *o = ctx->out[0];
  if (o->numel == 0) return PD_OK;
  size_t es = pd_dtype_size(o->dtype);
  char *p = pd_tensor_data(o);
  memset(p, 0, (size_t)o->numel * es);
  char one[8];
  pd_store_from_f64(one, o->dtype, 1.0);
  int64_t rows = o->shape[0], cols = o->shape[1], nd = rows < cols ? rows : cols;
  for (int64_t i = 0; i < nd; i++) memcpy(p + (size_t)(i * cols + i) * es, one, es);
  return PD_OK;
}

PD_OPDEF(eye, .n_in = 0, .n_out = 1, .attr_names = "i0:num_rows,i1:num_columns,dtype", .infer_meta = eye_meta,
         .kernel = {[PD_PLACE_CPU] = eye_kernel});

pd_tensor *pd_eye(int64_t num_rows, int64_t num_columns, pd_dtype dt) {
  pd_attrs a = {.i = {num_rows, num_columns}, .dtype = dt == PD_NUM_DTYPES ? pd_get_default_dtype() : dt};
  return pd_dispatch1(PD_OP_eye, NULL, 0, &a);
}
