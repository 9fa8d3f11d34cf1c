/* split, chunk and unbind: variadic outputs, each a view of x. */
#include <string.h>

#include "../../core/shape_check.h"
#include "manipulation_util.h"
#include "paddlec/ops.h"

/* Sections live in the four attr lists, PD_MAX_DIMS each. */
#define SEC_PER_OP (PD_ATTR_LISTS * PD_MAX_DIMS)
#define SEC(a, k) ((a)->v[(k) / PD_MAX_DIMS][(k) % PD_MAX_DIMS])

/* Attrs: i0 axis, i1 num (equal parts; 0 when sections are given),
 * i2 number of sections, sections in v0..v3. Writes the part sizes. */
static pd_status split_sizes(const char *op, const pd_tensor *x, const pd_attrs *a, int *ax, int *n,
                             int64_t *len) {
  if (x->ndim == 0) return pd_set_error(PD_ERR_SHAPE, "%s: x is 0-D and cannot be split", op);
  pd_status st = pd_norm_axis(op, a->i[0], x->ndim, ax);
  if (st != PD_OK) return st;
  int64_t dim = x->shape[*ax];
  bool is_chunk = strcmp(op, "chunk") == 0;
  if (a->i[1] != 0 || a->i[2] == 0) {
    int64_t num = a->i[1];
    if (num <= 0)
      return pd_set_error(PD_ERR_INVALID, "%s: %s must be positive, got %lld", op,
                          is_chunk ? "chunks" : "num", (long long)num);
    if (num > PD_MAX_OUTPUTS)
      return pd_set_error(PD_ERR_INVALID, "%s: %s = %lld exceeds the maximum of %d outputs", op,
                          is_chunk ? "chunks" : "num", (long long)num, PD_MAX_OUTPUTS);
    if (dim % num != 0 && pd_dim_known(dim))
      return pd_set_error(PD_ERR_SHAPE,
                          "%s: the size %lld of axis %d (x shape %s) is not divisible by %s = %lld", op,
                          (long long)dim, *ax, PD_SHAPE_STR(x), is_chunk ? "chunks" : "num", (long long)num);
    *n = (int)num;
    for (int k = 0; k < *n; k++) len[k] = pd_dim_div(dim, num);
    return PD_OK;
  }
  int ns = (int)a->i[2], unknown = -1;
  if (ns < 0 || ns > SEC_PER_OP)
    return pd_set_error(PD_ERR_INVALID, "%s: %d sections (expected 1 to %d per op)", op, ns, SEC_PER_OP);
  int64_t sum = 0;
  for (int k = 0; k < ns; k++) {
    int64_t s = SEC(a, k);
    if (s == -1) {
      if (unknown >= 0)
        return pd_set_error(PD_ERR_INVALID,
                            "%s: sections[%d] and sections[%d] are both -1; at most one may be "
                            "inferred",
                            op, unknown, k);
      unknown = k;
      continue;
    }
    if (s < 0)
      return pd_set_error(PD_ERR_INVALID, "%s: sections[%d] = %lld is negative", op, k, (long long)s);
    if (pd_add_overflow(sum, s, &sum))
      return pd_set_error(PD_ERR_SHAPE, "%s: the sections sum to more than INT64_MAX (sections[%d] = %lld)",
                          op, k, (long long)s);
    len[k] = s;
  }
  if (!pd_dim_known(dim)) { /* the sections stand; an inferred one is unknown too */
    if (unknown >= 0) len[unknown] = PD_DIM_UNKNOWN;
  } else if (unknown >= 0) {
    if (sum > dim)
      return pd_set_error(PD_ERR_SHAPE,
                          "%s: the known sections sum to %lld, more than the size %lld of axis %d", op,
                          (long long)sum, (long long)dim, *ax);
    len[unknown] = dim - sum;
  } else if (sum != dim) {
    return pd_set_error(PD_ERR_SHAPE,
                        "%s: the sections sum to %lld but axis %d of x (shape %s) has size %lld", op,
                        (long long)sum, *ax, PD_SHAPE_STR(x), (long long)dim);
  }
  *n = ns;
  return PD_OK;
}

static pd_status split_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                            pd_meta *out, int *n_out) {
  (void)n_in;
  int ax, n;
  int64_t len[PD_MAX_OUTPUTS];
  pd_status st = split_sizes(def->name, in[0], a, &ax, &n, len);
  if (st != PD_OK) return st;
  for (int k = 0; k < n; k++) {
    pd_meta_of(in[0], &out[k]);
    out[k].shape[ax] = len[k];
  }
  *n_out = n;
  return PD_OK;
}

static pd_status split_kernel(const pd_kernel_ctx *ctx) {
  pd_tensor *x = ctx->in[0];
  int ax, n;
  int64_t len[PD_MAX_OUTPUTS], shape[PD_MAX_DIMS], off = 0;
  pd_status st = split_sizes(ctx->def->name, x, ctx->attrs, &ax, &n, len);
  if (st != PD_OK) return st;
  memcpy(shape, x->shape, sizeof shape);
  for (int k = 0; k < n; k++) {
    shape[ax] = len[k];
    ctx->out[k] = pd_tensor_new_view(x, x->ndim, shape, x->strides, x->offset + off * x->strides[ax]);
    if (!ctx->out[k]) return pd_last_status();
    off += len[k];
  }
  return PD_OK;
}

static pd_status split_backward(const pd_backward_ctx *c) {
  if (!c->needs_grad[0]) return PD_OK;
  int64_t ax = c->attrs->i[0] < 0 ? c->attrs->i[0] + c->in_meta[0].ndim : c->attrs->i[0];
  c->grad_in[0] = pd_concat(c->grad_out, c->n_out, ax);
  return c->grad_in[0] ? PD_OK : pd_last_status();
}

/* sections 8 and on continue in v1..v3 */
PD_OPDEF(split, .n_in = 1, .n_out = -1, .flags = PD_OPF_DIFF | PD_OPF_VIEW,
         .attr_names = "i0:axis,i1:num,i2:nsections,v0:sections,v1:sections_8,v2:sections_16,v3:sections_24",
         .infer_meta = split_meta, .kernel = {[PD_PLACE_CPU] = split_kernel}, .backward = split_backward);

PD_OPDEF(chunk, .n_in = 1, .n_out = -1, .flags = PD_OPF_DIFF | PD_OPF_VIEW, .attr_names = "i0:axis,i1:chunks",
         .infer_meta = split_meta, .kernel = {[PD_PLACE_CPU] = split_kernel}, .backward = split_backward);

/* ---- unbind ------------------------------------------------------------------- */

static pd_status unbind_check(const char *op, const pd_tensor *x, const pd_attrs *a, int *ax) {
  if (x->ndim == 0) return pd_set_error(PD_ERR_SHAPE, "%s: x is 0-D and cannot be unbound", op);
  pd_status st = pd_norm_axis(op, a->i[0], x->ndim, ax);
  if (st != PD_OK) return st;
  if (x->shape[*ax] > PD_MAX_OUTPUTS)
    return pd_set_error(PD_ERR_INVALID,
                        "%s: axis %d of x (shape %s) has size %lld, more than the maximum of %d "
                        "outputs",
                        op, *ax, PD_SHAPE_STR(x), (long long)x->shape[*ax], PD_MAX_OUTPUTS);
  return PD_OK;
}

static pd_status unbind_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                             pd_meta *out, int *n_out) {
  (void)n_in;
  int ax;
  pd_status st = unbind_check(def->name, in[0], a, &ax);
  if (st != PD_OK) return st;
  int n = (int)in[0]->shape[ax];
  for (int k = 0; k < n; k++) {
    out[k].dtype = in[0]->dtype;
    out[k].ndim = 0;
    for (int d = 0; d < in[0]->ndim; d++)
      if (d != ax) out[k].shape[out[k].ndim++] = in[0]->shape[d];
  }
  *n_out = n;
  return PD_OK;
}

static pd_status unbind_kernel(const pd_kernel_ctx *ctx) {
  pd_tensor *x = ctx->in[0];
  int ax;
  pd_status st = unbind_check(ctx->def->name, x, ctx->attrs, &ax);
  if (st != PD_OK) return st;
  int64_t shape[PD_MAX_DIMS], strides[PD_MAX_DIMS];
  int nd = 0;
  for (int d = 0; d < x->ndim; d++) {
    if (d == ax) continue;
    shape[nd] = x->shape[d];
    strides[nd++] = x->strides[d];
  }
  for (int k = 0; k < (int)x->shape[ax]; k++) {
    ctx->out[k] = pd_tensor_new_view(x, nd, shape, strides, x->offset + k * x->strides[ax]);
    if (!ctx->out[k]) return pd_last_status();
  }
  return PD_OK;
}

static pd_status unbind_backward(const pd_backward_ctx *c) {
  if (!c->needs_grad[0]) return PD_OK;
  int64_t ax = c->attrs->i[0] < 0 ? c->attrs->i[0] + c->in_meta[0].ndim : c->attrs->i[0];
  c->grad_in[0] = pd_stack(c->grad_out, c->n_out, ax);
  return c->grad_in[0] ? PD_OK : pd_last_status();
}

PD_OPDEF(unbind, .n_in = 1, .n_out = -1, .flags = PD_OPF_DIFF | PD_OPF_VIEW, .attr_names = "i0:axis",
         .infer_meta = unbind_meta, .kernel = {[PD_PLACE_CPU] = unbind_kernel}, .backward = unbind_backward);

/* ---- public wrappers ------------------------------------------------------------ */

/* Runs a multi-output op and hands its outputs to the caller's array. */
static int run_multi(pd_op_id id, pd_tensor *x, const pd_attrs *a, pd_tensor **out, int cap) {
  const char *name = pd_op_table[id]->name;
  if (!out || cap < 0) {
    pd_set_error(PD_ERR_INVALID, "%s: the output array is NULL", name);
    return PD_ERR_INVALID;
  }
  pd_tensor *tmp[PD_MAX_OUTPUTS];
  int n = 0;
  pd_internal_enter(); /* outputs reach the scope only once they are handed over */
  pd_status st = pd_dispatch(id, &x, 1, a, tmp, &n);
  pd_internal_leave();
  if (st != PD_OK) return st;
  if (n > cap) {
    for (int k = 0; k < n; k++) pd_tensor_release(tmp[k]);
    return pd_set_error(PD_ERR_INVALID, "%s: %d outputs but the output array holds only %d", name, n, cap);
  }
  for (int k = 0; k < n; k++) out[k] = pd_scope_track(tmp[k]);
  return n;
}

int pd_split(pd_tensor *x, int num_or_nsections, const int64_t *sections, int64_t axis, pd_tensor **out,
             int cap) {
  pd_attrs a = {.i = {axis}};
  if (!sections) {
    if (num_or_nsections <= 0) {
      pd_set_error(PD_ERR_INVALID, "split: num must be positive, got %d", num_or_nsections);
      return PD_ERR_INVALID;
    }
    a.i[1] = num_or_nsections;
    return run_multi(PD_OP_split, x, &a, out, cap);
  }
  int ns = num_or_nsections;
  if (ns < 1 || ns > PD_MAX_OUTPUTS) {
    pd_set_error(PD_ERR_INVALID, "split: %d sections (expected 1 to %d outputs)", ns, PD_MAX_OUTPUTS);
    return PD_ERR_INVALID;
  }
  if (ns <= SEC_PER_OP) {
    a.i[2] = ns;
    for (int k = 0; k < ns; k++) SEC(&a, k) = sections[k];
    return run_multi(PD_OP_split, x, &a, out, cap);
  }
  /* More sections than one op's attrs hold: split off the first ones plus
   * the rest, then split the rest (gradients flow through both). */
  if (!x)
    return pd_last_status() != PD_OK ? pd_last_status() : pd_set_error(PD_ERR_INVALID, "split: x is NULL");
  if (!out || cap < ns) {
    pd_set_error(PD_ERR_INVALID, "split: %d outputs but the output array holds only %d", ns, out ? cap : 0);
    return PD_ERR_INVALID;
  }
  int head = SEC_PER_OP - 1;
  bool rest_unknown = false;
  int64_t rest = 0;
  for (int k = head; k < ns; k++) {
    if (sections[k] == -1)
      rest_unknown = true;
    else
      rest += sections[k];
  }
  a.i[2] = SEC_PER_OP;
  for (int k = 0; k < head; k++) SEC(&a, k) = sections[k];
  SEC(&a, head) = rest_unknown ? -1 : rest;
  pd_tensor *first[PD_MAX_OUTPUTS], *second[PD_MAX_OUTPUTS];
  int n1 = 0, n2 = 0;
  pd_internal_enter();
  pd_status st = pd_dispatch(PD_OP_split, &x, 1, &a, first, &n1);
  if (st == PD_OK) {
    pd_attrs b = {.i = {axis, 0, ns - head}};
    for (int k = head; k < ns; k++) SEC(&b, k - head) = sections[k];
    st = pd_dispatch(PD_OP_split, &first[head], 1, &b, second, &n2);
    pd_tensor_release(first[head]);
  }
  pd_internal_leave();
  if (st != PD_OK) {
    for (int k = 0; k < n1 && k < head; k++) pd_tensor_release(first[k]);
    return st;
  }
  for (int k = 0; k < head; k++) out[k] = pd_scope_track(first[k]);
  for (int k = 0; k < n2; k++) out[head + k] = pd_scope_track(second[k]);
  return head + n2;
}

int pd_chunk(pd_tensor *x, int chunks, int64_t axis, pd_tensor **out, int cap) {
  pd_attrs a = {.i = {axis, chunks}};
  if (chunks <= 0) {
    pd_set_error(PD_ERR_INVALID, "chunk: chunks must be positive, got %d", chunks);
    return PD_ERR_INVALID;
  }
  return run_multi(PD_OP_chunk, x, &a, out, cap);
}

int pd_unbind(pd_tensor *x, int64_t axis, pd_tensor **out, int cap) {
  pd_attrs a = {.i = {axis}};
  return run_multi(PD_OP_unbind, x, &a, out, cap);
}
