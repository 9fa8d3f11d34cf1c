/* c_allreduce, c_allgather and c_reduce_scatter: the collectives a
 * partitioned distributed Program runs where placements change (Partial ->
 * Replicate, Shard -> Replicate, Partial -> Shard). Attributes: ring_id
 * (the process group's id), nranks (its size), and the reduce op or the
 * gather dim (c_reduce_scatter: the reduce op, then the dim it splits).
 * With nranks 1 they copy. Below them, the ops of gradient buckets. */
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "comm_util.h"

static _Atomic(pd_comm_op_fn) g_comm;

void pd_comm_ops_install(pd_comm_op_fn fn) { atomic_store(&g_comm, fn); }

/* The installed collectives; NULL (the error naming op def) before the
 * parallel env installs them. */
static pd_comm_op_fn installed(const pd_op_def *def) {
  pd_comm_op_fn fn = atomic_load(&g_comm);
  if (!fn)
    pd_set_error(PD_ERR_STATE, "%s: no collectives are available (initialise the parallel env first)",
                 def->name);
  return fn;
}

pd_status pd_comm_allreduce_f64(const pd_op_def *def, int64_t ring_id, int64_t nranks, int64_t reduce,
                                double *buf, int64_t n) {
  if (nranks == 1 || n == 0) return PD_OK;
  pd_comm_op_fn fn = installed(def);
  if (!fn) return pd_last_status();
  /* buf itself, reduced in place: no data allocated or copied per call */
  pd_tensor *t = pd_tensor_from_blob(buf, PD_FLOAT64, 1, &n, NULL, NULL);
  if (!t) return pd_last_status();
  pd_status st = fn(PD_COMM_OP_ALLREDUCE, ring_id, nranks, reduce, 0, t, t);
  pd_tensor_release(t);
  return st;
}

static pd_status check_group(const pd_op_def *def, const pd_attrs *a) {
  if (a->i[1] < 1)
    return pd_set_error(PD_ERR_INVALID, "%s: nranks is %lld (at least 1)", def->name, (long long)a->i[1]);
  return PD_OK;
}

/* The group attributes and the reduce op (i2) of a reducing op. */
static pd_status check_reduce(const pd_op_def *def, const pd_attrs *a) {
  pd_status st = check_group(def, a);
  if (st == PD_OK && (a->i[2] < 0 || a->i[2] > 4))
    st = pd_set_error(PD_ERR_INVALID, "%s: reduce_type %lld is none of sum, max, min, prod, avg", def->name,
                      (long long)a->i[2]);
  return st;
}

/* Whether axis names a dim of x (else an error naming the op). */
static pd_status check_axis(const pd_op_def *def, const pd_tensor *x, int64_t axis) {
  if (axis < 0 || axis >= x->ndim)
    return pd_set_error(PD_ERR_INVALID, "%s: axis %lld is out of range for a tensor of rank %d", def->name,
                        (long long)axis, x->ndim);
  return PD_OK;
}

static pd_status allreduce_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                                pd_meta *out, int *n_out) {
  (void)n_in;
  pd_status st = check_reduce(def, a);
  if (st != PD_OK) return st;
  pd_meta_of(in[0], &out[0]);
  *n_out = 1;
  return PD_OK;
}

static pd_status allgather_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                                pd_meta *out, int *n_out) {
  (void)n_in;
  pd_status st = check_group(def, a);
  if (st != PD_OK) return st;
  const pd_tensor *x = in[0];
  if ((st = check_axis(def, x, a->i[2])) != PD_OK) return st;
  int64_t d = x->shape[a->i[2]];
  if (d > INT64_MAX / a->i[1])
    return pd_set_error(PD_ERR_SHAPE, "%s: dim %lld gathered from %lld ranks overflows int64", def->name,
                        (long long)d, (long long)a->i[1]);
  pd_meta_of(x, &out[0]);
  out[0].shape[a->i[2]] = pd_dim_mul(d, a->i[1]);
  *n_out = 1;
  return PD_OK;
}

static pd_status reduce_scatter_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                                     pd_meta *out, int *n_out) {
  (void)n_in;
  const pd_tensor *x = in[0];
  pd_status st = check_reduce(def, a);
  if (st == PD_OK) st = check_axis(def, x, a->i[3]);
  if (st != PD_OK) return st;
  int64_t d = x->shape[a->i[3]];
  if (d % a->i[1] != 0)
    return pd_set_error(PD_ERR_SHAPE, "%s: dim %lld (%lld) does not split evenly over %lld ranks", def->name,
                        (long long)a->i[3], (long long)d, (long long)a->i[1]);
  pd_meta_of(x, &out[0]);
  out[0].shape[a->i[3]] = d / a->i[1];
  *n_out = 1;
  return PD_OK;
}

static pd_status comm_kernel(const pd_kernel_ctx *ctx, pd_comm_op_kind kind) {
  const pd_attrs *a = ctx->attrs;
  pd_tensor *x = ctx->in[0], *out = ctx->out[0];
  if (a->i[1] == 1) return pd_write_copy(out, x);
  pd_comm_op_fn fn = installed(ctx->def);
  if (!fn) return pd_last_status();
  return fn(kind, a->i[0], a->i[1], a->i[2], a->i[3], x, out);
}

static pd_status allreduce_kernel(const pd_kernel_ctx *ctx) { return comm_kernel(ctx, PD_COMM_OP_ALLREDUCE); }
static pd_status allgather_kernel(const pd_kernel_ctx *ctx) { return comm_kernel(ctx, PD_COMM_OP_ALLGATHER); }
static pd_status reduce_scatter_kernel(const pd_kernel_ctx *ctx) {
  return comm_kernel(ctx, PD_COMM_OP_REDUCE_SCATTER);
}

PD_OPDEF(c_allreduce, .n_in = 1, .n_out = 1, .attr_names = "i0:ring_id,i1:nranks,i2:reduce_type",
         .infer_meta = allreduce_meta, .kernel = {[PD_PLACE_CPU] = allreduce_kernel});

PD_OPDEF(c_allgather, .n_in = 1, .n_out = 1, .attr_names = "i0:ring_id,i1:nranks,i2:axis",
         .infer_meta = allgather_meta, .kernel = {[PD_PLACE_CPU] = allgather_kernel});

PD_OPDEF(c_reduce_scatter, .n_in = 1, .n_out = 1, .attr_names = "i0:ring_id,i1:nranks,i2:reduce_type,i3:axis",
         .infer_meta = reduce_scatter_meta, .kernel = {[PD_PLACE_CPU] = reduce_scatter_kernel});

/* ---- gradient buckets (Strategy.dp_optimization) -------------------------
 * c_coalesce: its inputs (one dtype) flattened into one 1-D buffer, in
 * order; an input whose bytes already lie at their place in the output (a
 * compiled Program plans the bucket's gradients inside it) is not copied.
 * c_allreduce_start_ / c_allreduce_wait_: the allreduce of such a buffer in
 * place, launched on the group's communication thread and waited for
 * later, so the ops between them overlap it. Attributes of both: ring_id,
 * nranks, reduce_type, as c_allreduce's. */
static pd_status coalesce_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                               pd_meta *out, int *n_out) {
  (void)a;
  if (n_in < 1) return pd_set_error(PD_ERR_INVALID, "%s: no inputs", def->name);
  int64_t total = 0;
  bool unknown = false; /* a static Variable's -1 dim: the length is unknown too */
  for (int i = 0; i < n_in; i++) {
    if (in[i]->dtype != in[0]->dtype)
      return pd_set_error(PD_ERR_DTYPE, "%s: input %d is %s, input 0 %s (a bucket holds one dtype)",
                          def->name, i, pd_dtype_name(in[i]->dtype), pd_dtype_name(in[0]->dtype));
    for (int d = 0; d < in[i]->ndim; d++) unknown |= in[i]->shape[d] < 0;
    if (unknown) continue;
    if (in[i]->numel > INT64_MAX - total)
      return pd_set_error(PD_ERR_SHAPE, "%s: %d inputs of more than INT64_MAX elements", def->name, n_in);
    total += in[i]->numel;
  }
  out[0] = (pd_meta){.dtype = in[0]->dtype, .ndim = 1, .shape = {unknown ? -1 : total}};
  *n_out = 1;
  return PD_OK;
}

static pd_status coalesce_kernel(const pd_kernel_ctx *ctx) {
  pd_tensor *out = ctx->out[0];
  size_t es = pd_dtype_size(out->dtype);
  char *dst = pd_tensor_data(out);
  pd_status st = PD_OK;
  for (int i = 0; i < ctx->n_in && st == PD_OK; i++) {
    pd_tensor *x = ctx->in[i];
    size_t bytes = (size_t)x->numel * es;
    if (x->is_contiguous) {
      const char *src = pd_tensor_data(x);
      if (src != dst && bytes) memcpy(dst, src, bytes);
    } else {
      pd_tensor *c = pd_kernel_contiguous(x);
      if (c && bytes) memcpy(dst, pd_tensor_data(c), bytes);
      if (!c) st = pd_last_status();
      pd_tensor_release(c);
    }
    dst += bytes;
  }
  return st;
}

static pd_status bucket_kernel(const pd_kernel_ctx *ctx, pd_comm_op_kind kind) {
  const pd_attrs *a = ctx->attrs;
  pd_tensor *x = ctx->in[0];
  if (!x->is_contiguous)
    return pd_set_error(PD_ERR_INVALID, "%s: the bucket (shape %s) is not contiguous", ctx->def->name,
                        PD_SHAPE_STR(x));
  if (a->i[1] == 1) return PD_OK;
  pd_comm_op_fn fn = installed(ctx->def);
  if (!fn) return pd_last_status();
  return fn(kind, a->i[0], a->i[1], a->i[2], 0, x, x);
}

static pd_status start_kernel(const pd_kernel_ctx *ctx) {
  return bucket_kernel(ctx, PD_COMM_OP_ALLREDUCE_START);
}
static pd_status wait_kernel(const pd_kernel_ctx *ctx) { return bucket_kernel(ctx, PD_COMM_OP_WAIT); }

PD_OPDEF(c_coalesce, .n_in = -1, .n_out = 1, .attr_names = "", .infer_meta = coalesce_meta,
         .kernel = {[PD_PLACE_CPU] = coalesce_kernel});

PD_OPDEF(c_allreduce_start_, .n_in = 1, .n_out = 1, .flags = PD_OPF_INPLACE,
         .attr_names = "i0:ring_id,i1:nranks,i2:reduce_type", .infer_meta = allreduce_meta,
         .kernel = {[PD_PLACE_CPU] = start_kernel});

PD_OPDEF(c_allreduce_wait_, .n_in = 1, .n_out = 1, .flags = PD_OPF_INPLACE,
         .attr_names = "i0:ring_id,i1:nranks,i2:reduce_type", .infer_meta = allreduce_meta,
         .kernel = {[PD_PLACE_CPU] = wait_kernel});
