/* Pooling: max/avg pooling and their adaptive forms over 1-3 spatial dims,
 * channels first ([N, C, spatial...]; the wrappers transpose channels-last
 * inputs).
 *
 *   max_pool{1,2,3}d, adaptive_max_pool{1,2,3}d: x -> (out, mask int32)
 *   max_pool_grad(mask, dy) -> dx        scatter-add dy to the argmax
 *   max_pool_gather(x, mask) -> y        y = x at the argmax
 *   avg_pool{1,2,3}d, adaptive_avg_pool{1,2,3}d: x -> out
 *   avg_pool_grad(dy) -> dx              the adjoint of avg pooling
 * max_pool_grad and max_pool_gather are each other's adjoints, as are
 * avg pooling and avg_pool_grad, so every order of derivative is defined.
 *
 * Attributes: v0 kernel size, v1 strides, v2 paddings [before_0, after_0,
 * ...], i0 ceil_mode, i1 exclusive (avg); v3 the output size of the
 * adaptive forms and the input size of the grad ops; avg_pool_grad's i2
 * says whether the forward was adaptive. */
#include <string.h>

#include "../../core/shape_check.h"
#include "../../kernels/cpu/pool.h"
#include "../manipulation/manipulation_util.h"
#include "conv_util.h"
#include "../op_registry.h"
#include "paddlec/conv.h"
#include "paddlec/manipulation.h"
#include "paddlec/math.h"

static const pd_op_id k_max_ids[3] = {PD_OP_max_pool1d, PD_OP_max_pool2d, PD_OP_max_pool3d};
static const pd_op_id k_amax_ids[3] = {PD_OP_adaptive_max_pool1d, PD_OP_adaptive_max_pool2d,
                                       PD_OP_adaptive_max_pool3d};
static const pd_op_id k_avg_ids[3] = {PD_OP_avg_pool1d, PD_OP_avg_pool2d, PD_OP_avg_pool3d};
static const pd_op_id k_aavg_ids[3] = {PD_OP_adaptive_avg_pool1d, PD_OP_adaptive_avg_pool2d,
                                       PD_OP_adaptive_avg_pool3d};

static bool is_adaptive(const pd_op_def *def) { return strncmp(def->name, "adaptive", 8) == 0; }

/* The spatial rank of a forward op from its name. */
static int rank_of(const pd_op_def *def) {
  for (const char *p = def->name; *p; p++)
    if (*p >= '1' && *p <= '3') return *p - '0';
  return 0;
}

static const char *layout_of(int nsp) {
  static const char *k[3] = {"NCL", "NCHW", "NCDHW"};
  return nsp >= 1 && nsp <= 3 ? k[nsp - 1] : "NC...";
}

static pd_status check_shape(const char *op, int nsp, int ndim, const int64_t *shape, pd_dtype dt) {
  if (ndim != nsp + 2)
    return pd_set_error(PD_ERR_SHAPE, "%s: x must be a %d-D tensor (%s), got shape %s", op, nsp + 2,
                        layout_of(nsp), pd_shape_str(ndim, shape, (char[160]){0}, 160));
  if (dt != PD_FLOAT32 && dt != PD_FLOAT64)
    return pd_set_error(PD_ERR_DTYPE,
                        "%s: dtype %s of x is not supported (expected float16, bfloat16, float32 or float64)",
                        op, pd_dtype_name(dt));
  return PD_OK;
}
static pd_status check_x(const char *op, int nsp, const pd_tensor *x) {
  return check_shape(op, nsp, x->ndim, x->shape, x->dtype);
}

/* Output size of a non-adaptive window along one dim (Paddle's PoolOutputSize);
 * false when the padded sizes overflow int64. */
static bool pool_out_size(int64_t in, int64_t k, int64_t pb, int64_t pa, int64_t s, bool ceil_mode,
                          int64_t *out) {
  int64_t num;
  if (pd_add_overflow(in, pb, &num) || pd_add_overflow(num, pa, &num) ||
      pd_add_overflow(num, ceil_mode ? s - 1 : 0, &num))
    return false;
  num -= k;                         /* cannot overflow: num >= 0 and k >= 1 */
  *out = num < 0 ? 0 : num / s + 1; /* a window larger than the input: no output */
  return true;
}

/* The geometry of a forward pooling op on x; fills the output spatial sizes. */
static pd_status pool_geom(const char *op, bool adaptive, int nsp, const pd_meta *x, const pd_attrs *a,
                           pd_pool_geom *g) {
  pd_status st = check_shape(op, nsp, x->ndim, x->shape, x->dtype);
  if (st != PD_OK) return st;
  memset(g, 0, sizeof *g);
  g->nsp = nsp;
  g->planes = x->shape[0] * x->shape[1];
  g->adaptive = adaptive;
  g->exclusive = a->i[1] != 0;
  for (int d = 0; d < nsp; d++) g->in[d] = x->shape[2 + d];
  if (adaptive) {
    if (a->nv[3] != nsp)
      return pd_set_error(PD_ERR_INVALID, "%s: expects %d output sizes, got %d", op, nsp, a->nv[3]);
    for (int d = 0; d < nsp; d++) {
      if (a->v[3][d] < 1)
        return pd_set_error(PD_ERR_INVALID, "%s: output_size %lld on spatial dim %d must be positive", op,
                            (long long)a->v[3][d], d);
      g->out[d] = a->v[3][d];
      g->k[d] = g->stride[d] = 1;
    }
    return PD_OK;
  }
  if (a->nv[0] != nsp || a->nv[1] != nsp || a->nv[2] != 2 * nsp)
    return pd_set_error(PD_ERR_INVALID,
                        "%s: expects %d kernel sizes, %d strides and %d paddings, got %d, %d and %d", op, nsp,
                        nsp, 2 * nsp, a->nv[0], a->nv[1], a->nv[2]);
  for (int d = 0; d < nsp; d++) {
    int64_t k = a->v[0][d], s = a->v[1][d], pb = a->v[2][2 * d], pa = a->v[2][2 * d + 1];
    if (k < 1 || s < 1 || pb < 0 || pa < 0)
      return pd_set_error(
          PD_ERR_INVALID,
          "%s: kernel_size (%lld) and stride (%lld) must be positive and paddings (%lld, %lld) "
          "non-negative on spatial dim %d",
          op, (long long)k, (long long)s, (long long)pb, (long long)pa, d);
    /* a wider padding puts whole windows in the padding: max pooling would
     * output its -FLT_MAX fill, average pooling a 0 or a division by 0 */
    if (pb > k / 2 || pa > k / 2)
      return pd_set_error(PD_ERR_INVALID,
                          "%s: padding %lld on spatial dim %d must be at most half the kernel size %lld "
                          "(paddings %lld, %lld)",
                          op, (long long)(pb > k / 2 ? pb : pa), d, (long long)k, (long long)pb,
                          (long long)pa);
    int64_t o;
    if (!pool_out_size(g->in[d], k, pb, pa, s, a->i[0] != 0, &o))
      return pd_set_error(
          PD_ERR_SHAPE,
          "%s: spatial dim %d: input %lld with paddings %lld and %lld and stride %lld overflows "
          "int64",
          op, d, (long long)g->in[d], (long long)pb, (long long)pa, (long long)s);
    if (o < 1)
      return pd_set_error(
          PD_ERR_SHAPE,
          "%s: the kernel (%lld) on spatial dim %d is larger than the padded input (%lld + %lld + "
          "%lld = %lld; x shape %s)",
          op, (long long)k, d, (long long)g->in[d], (long long)pb, (long long)pa,
          (long long)(g->in[d] + pb + pa), pd_shape_str(x->ndim, x->shape, (char[160]){0}, 160));
    g->k[d] = k;
    g->stride[d] = s;
    g->pad[d] = pb;
    g->out[d] = o;
  }
  return PD_OK;
}

/* The geometry of op `def` applied to x. */
static pd_status geom_of(const pd_op_def *def, const pd_tensor *x, const pd_attrs *a, pd_pool_geom *g) {
  pd_meta xm;
  pd_meta_of(x, &xm);
  return pool_geom(def->name, is_adaptive(def), rank_of(def), &xm, a, g);
}

static void out_meta(pd_meta *m, const pd_tensor *x, const pd_pool_geom *g, pd_dtype dt) {
  m->dtype = dt;
  m->ndim = g->nsp + 2;
  m->shape[0] = x->shape[0];
  m->shape[1] = x->shape[1];
  for (int d = 0; d < g->nsp; d++) m->shape[2 + d] = g->out[d];
}

/* ---- max pooling --------------------------------------------------------- */

static pd_status max_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                          pd_meta *out, int *n_out) {
  (void)n_in;
  pd_pool_geom g;
  pd_status st = geom_of(def, in[0], a, &g);
  if (st != PD_OK) return st;
  out_meta(&out[0], in[0], &g, in[0]->dtype);
  out_meta(&out[1], in[0], &g, PD_INT32);
  *n_out = 2;
  return PD_OK;
}

static pd_status max_kernel(const pd_kernel_ctx *ctx) {
  pd_pool_geom g;
  pd_status st = geom_of(ctx->def, ctx->in[0], ctx->attrs, &g);
  if (st != PD_OK || ctx->out[0]->numel == 0) return st;
  pd_tensor *x = pd_kernel_contiguous(ctx->in[0]);
  if (!x) return pd_last_status();
  int rc =
      x->dtype == PD_FLOAT32
          ? pdk_max_pool_f32(&g, pd_tensor_data(x), pd_tensor_data(ctx->out[0]), pd_tensor_data(ctx->out[1]))
          : pdk_max_pool_f64(&g, pd_tensor_data(x), pd_tensor_data(ctx->out[0]), pd_tensor_data(ctx->out[1]));
  pd_tensor_release(x);
  return rc ? pd_set_error(PD_ERR_MEMORY, "%s: out of memory", ctx->def->name) : PD_OK;
}

static pd_attrs sized(int nsp, const int64_t *shape) {
  pd_attrs a = {.nv = {0, 0, 0, nsp}};
  for (int d = 0; d < nsp; d++) a.v[3][d] = shape[2 + d];
  return a;
}

static pd_status max_backward(const pd_backward_ctx *c) {
  if (!c->needs_grad[0]) return PD_OK;
  const pd_meta *xm = &c->in_meta[0];
  pd_attrs a = sized(xm->ndim - 2, xm->shape);
  pd_tensor *in[2] = {c->outputs[1], c->grad_out[0]};
  c->grad_in[0] = pd_dispatch1(PD_OP_max_pool_grad, in, 2, &a);
  return c->grad_in[0] ? PD_OK : pd_last_status();
}

/* mask [N, C, O...] and a float tensor with the same N, C (and, for the
 * gather's x / the grad's dy, the shapes the op needs). */
static pd_status check_mask(const char *op, const pd_tensor *mask, const pd_tensor *t, const char *tname,
                            bool same_spatial) {
  pd_status st = pd_mu_check_index_dtype(op, "mask", mask);
  if (st != PD_OK) return st;
  int nsp = mask->ndim - 2;
  if (nsp < 1 || nsp > 3)
    return pd_set_error(PD_ERR_SHAPE, "%s: mask must be a 3-D, 4-D or 5-D tensor, got shape %s", op,
                        PD_SHAPE_STR(mask));
  if ((st = check_x(op, nsp, t)) != PD_OK) return st;
  bool ok = t->shape[0] == mask->shape[0] && t->shape[1] == mask->shape[1];
  for (int d = 0; ok && same_spatial && d < nsp; d++) ok = t->shape[2 + d] == mask->shape[2 + d];
  if (!ok)
    return pd_set_error(PD_ERR_SHAPE, "%s: mask of shape %s does not match %s of shape %s", op,
                        PD_SHAPE_STR(mask), tname, PD_SHAPE_STR(t));
  return PD_OK;
}

static void plane_geom(pd_pool_geom *g, const pd_tensor *x_space_or_null, const int64_t *in_sp,
                       const pd_tensor *mask) {
  memset(g, 0, sizeof *g);
  (void)x_space_or_null;
  g->nsp = mask->ndim - 2;
  g->planes = mask->shape[0] * mask->shape[1];
  for (int d = 0; d < g->nsp; d++) {
    g->in[d] = in_sp[d];
    g->out[d] = mask->shape[2 + d];
  }
}

/* max_pool_grad(mask, dy) -> dx of spatial size v3 */
static pd_status max_grad_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                               pd_meta *out, int *n_out) {
  (void)n_in;
  pd_status st = check_mask(def->name, in[0], in[1], "grad_out", true);
  if (st != PD_OK) return st;
  int nsp = in[0]->ndim - 2;
  if (a->nv[3] != nsp)
    return pd_set_error(PD_ERR_INVALID, "%s: expects %d input sizes, got %d", def->name, nsp, a->nv[3]);
  out->dtype = in[1]->dtype;
  out->ndim = nsp + 2;
  out->shape[0] = in[1]->shape[0];
  out->shape[1] = in[1]->shape[1];
  for (int d = 0; d < nsp; d++) {
    if (a->v[3][d] < 0)
      return pd_set_error(PD_ERR_INVALID, "%s: input size %lld must be non-negative", def->name,
                          (long long)a->v[3][d]);
    out->shape[2 + d] = a->v[3][d];
  }
  *n_out = 1;
  return PD_OK;
}

/* The two kernels over a max-pool mask: max_pool_grad (mask, dy) scatters
 * dy into x's planes (their shape in attrs v3), max_pool_gather (x, mask)
 * gathers x at the mask. */
static pd_status mask_kernel(const pd_kernel_ctx *ctx, bool scatter) {
  pd_tensor *t0 = pd_kernel_contiguous(ctx->in[0]), *t1 = t0 ? pd_kernel_contiguous(ctx->in[1]) : NULL;
  if (!t1) {
    pd_tensor_release(t0);
    return pd_last_status();
  }
  pd_tensor *m = scatter ? t0 : t1, *src = scatter ? t1 : t0;
  pd_pool_geom g;
  if (scatter)
    plane_geom(&g, NULL, ctx->attrs->v[3], m);
  else
    plane_geom(&g, src, src->shape + 2, m);
  bool m64 = m->dtype == PD_INT64, f32 = ctx->out[0]->dtype == PD_FLOAT32;
  void *md = pd_tensor_data(m), *sd = pd_tensor_data(src), *od = pd_tensor_data(ctx->out[0]);
  if (scatter && f32)
    pdk_max_pool_scatter_f32(&g, md, m64, sd, od);
  else if (scatter)
    pdk_max_pool_scatter_f64(&g, md, m64, sd, od);
  else if (f32)
    pdk_max_pool_gather_f32(&g, md, m64, sd, od);
  else
    pdk_max_pool_gather_f64(&g, md, m64, sd, od);
  pd_tensor_release(t0);
  pd_tensor_release(t1);
  return PD_OK;
}

static pd_status max_grad_kernel(const pd_kernel_ctx *ctx) { return mask_kernel(ctx, true); }

static pd_status max_grad_backward(const pd_backward_ctx *c) {
  if (!c->needs_grad[1]) return PD_OK;
  pd_tensor *in[2] = {c->grad_out[0], c->inputs[0]};
  c->grad_in[1] = pd_dispatch1(PD_OP_max_pool_gather, in, 2, NULL);
  return c->grad_in[1] ? PD_OK : pd_last_status();
}

/* max_pool_gather(x, mask) -> y shaped like mask */
static pd_status gather_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                             pd_meta *out, int *n_out) {
  (void)n_in, (void)a;
  pd_status st = check_mask(def->name, in[1], in[0], "x", false);
  if (st != PD_OK) return st;
  pd_meta_of(in[1], out);
  out->dtype = in[0]->dtype;
  *n_out = 1;
  return PD_OK;
}

static pd_status gather_kernel(const pd_kernel_ctx *ctx) { return mask_kernel(ctx, false); }

static pd_status gather_backward(const pd_backward_ctx *c) {
  if (!c->needs_grad[0]) return PD_OK;
  const pd_meta *xm = &c->in_meta[0];
  pd_attrs a = sized(xm->ndim - 2, xm->shape);
  pd_tensor *in[2] = {c->inputs[1], c->grad_out[0]};
  c->grad_in[0] = pd_dispatch1(PD_OP_max_pool_grad, in, 2, &a);
  return c->grad_in[0] ? PD_OK : pd_last_status();
}

/* ---- avg pooling --------------------------------------------------------- */

static pd_status avg_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                          pd_meta *out, int *n_out) {
  (void)n_in;
  pd_pool_geom g;
  pd_status st = geom_of(def, in[0], a, &g);
  if (st != PD_OK) return st;
  out_meta(out, in[0], &g, in[0]->dtype);
  *n_out = 1;
  return PD_OK;
}

static pd_status avg_kernel(const pd_kernel_ctx *ctx) {
  pd_pool_geom g;
  pd_status st = geom_of(ctx->def, ctx->in[0], ctx->attrs, &g);
  if (st != PD_OK || ctx->out[0]->numel == 0) return st;
  pd_tensor *x = pd_kernel_contiguous(ctx->in[0]);
  if (!x) return pd_last_status();
  int rc = x->dtype == PD_FLOAT32 ? pdk_avg_pool_f32(&g, pd_tensor_data(x), pd_tensor_data(ctx->out[0]))
                                  : pdk_avg_pool_f64(&g, pd_tensor_data(x), pd_tensor_data(ctx->out[0]));
  pd_tensor_release(x);
  return rc ? pd_set_error(PD_ERR_MEMORY, "%s: out of memory", ctx->def->name) : PD_OK;
}

static pd_status avg_backward(const pd_backward_ctx *c) {
  if (!c->needs_grad[0]) return PD_OK;
  const pd_meta *xm = &c->in_meta[0];
  int nsp = xm->ndim - 2;
  pd_attrs a = *c->attrs;
  a.i[2] = c->attrs->nv[0] == 0; /* adaptive forms carry no kernel sizes */
  a.nv[3] = nsp;
  for (int d = 0; d < nsp; d++) a.v[3][d] = xm->shape[2 + d];
  c->grad_in[0] = pd_dispatch1(PD_OP_avg_pool_grad, &c->grad_out[0], 1, &a);
  return c->grad_in[0] ? PD_OK : pd_last_status();
}

/* avg_pool_grad(dy) -> dx: the forward geometry is rebuilt on a tensor of
 * dx's shape, and dy must have its output shape. */
static pd_status avg_grad_geom(const pd_op_def *def, const pd_tensor *dy, const pd_attrs *a, pd_pool_geom *g,
                               pd_meta *out) {
  int nsp = dy->ndim - 2;
  pd_status st = check_x(def->name, nsp >= 1 && nsp <= 3 ? nsp : 2, dy);
  if (st != PD_OK) return st;
  if (a->nv[3] != nsp)
    return pd_set_error(PD_ERR_INVALID, "%s: expects %d input sizes, got %d", def->name, nsp, a->nv[3]);
  pd_meta xm;
  pd_meta_of(dy, &xm);
  for (int d = 0; d < nsp; d++) {
    if (a->v[3][d] < 0)
      return pd_set_error(PD_ERR_INVALID, "%s: input size %lld on spatial dim %d must be non-negative",
                          def->name, (long long)a->v[3][d], d);
    xm.shape[2 + d] = a->v[3][d];
  }
  pd_attrs fa = *a;
  for (int d = 0; d < nsp; d++) fa.v[3][d] = dy->shape[2 + d];
  st = pool_geom(def->name, a->i[2] != 0, nsp, &xm, &fa, g);
  if (st != PD_OK) return st;
  for (int d = 0; d < nsp; d++)
    if (g->out[d] != dy->shape[2 + d])
      return pd_set_error(PD_ERR_SHAPE,
                          "%s: grad_out of shape %s does not match the pooled size %lld on spatial dim %d",
                          def->name, PD_SHAPE_STR(dy), (long long)g->out[d], d);
  *out = xm;
  return PD_OK;
}

static pd_status avg_grad_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                               pd_meta *out, int *n_out) {
  (void)n_in;
  pd_pool_geom g;
  *n_out = 1;
  return avg_grad_geom(def, in[0], a, &g, out);
}

static pd_status avg_grad_kernel(const pd_kernel_ctx *ctx) {
  pd_pool_geom g;
  pd_meta m;
  pd_status st = avg_grad_geom(ctx->def, ctx->in[0], ctx->attrs, &g, &m);
  if (st != PD_OK || ctx->out[0]->numel == 0) return st;
  pd_tensor *dy = pd_kernel_contiguous(ctx->in[0]);
  if (!dy) return pd_last_status();
  int rc = dy->dtype == PD_FLOAT32
               ? pdk_avg_pool_grad_f32(&g, pd_tensor_data(dy), pd_tensor_data(ctx->out[0]))
               : pdk_avg_pool_grad_f64(&g, pd_tensor_data(dy), pd_tensor_data(ctx->out[0]));
  pd_tensor_release(dy);
  return rc ? pd_set_error(PD_ERR_MEMORY, "%s: out of memory", ctx->def->name) : PD_OK;
}

static pd_status avg_grad_backward(const pd_backward_ctx *c) {
  if (!c->needs_grad[0]) return PD_OK;
  const pd_meta *gm = &c->in_meta[0];
  int nsp = gm->ndim - 2;
  bool adaptive = c->attrs->i[2] != 0;
  pd_attrs a = *c->attrs;
  a.i[2] = 0;
  a.nv[3] = adaptive ? nsp : 0;
  for (int d = 0; d < nsp; d++) a.v[3][d] = gm->shape[2 + d];
  pd_op_id id = adaptive ? k_aavg_ids[nsp - 1] : k_avg_ids[nsp - 1];
  c->grad_in[0] = pd_dispatch1(id, &c->grad_out[0], 1, &a);
  return c->grad_in[0] ? PD_OK : pd_last_status();
}

/* FLOPs: one operation per window element read. */
static double pool_flops(pd_tensor *const *in, int n_in, const pd_attrs *a, const pd_meta *out, int n_out) {
  (void)n_in, (void)n_out;
  double n = 1, k = 1;
  for (int i = 0; i < out->ndim; i++) n *= (double)out->shape[i];
  if (a->nv[0] > 0)
    for (int d = 0; d < a->nv[0]; d++) k *= (double)a->v[0][d];
  else
    for (int d = 2; d < in[0]->ndim; d++) k *= (double)in[0]->shape[d] / (double)out->shape[d];
  return n * k;
}

#define POOL_ATTRS "v0:kernel_size,v1:strides,v2:paddings,i0:ceil_mode,i1:exclusive"
#define DEF_MAX(NAME, ATTRS)                                                                          \
  PD_OPDEF(NAME, .n_in = 1, .n_out = 2, .flags = PD_OPF_DIFF | PD_OPF_SAVE_OUT | PD_OPF_HALF_VIA_F32, \
           .nondiff_out = 1u << 1, .attr_names = ATTRS, .infer_meta = max_meta,                       \
           .kernel = {[PD_PLACE_CPU] = max_kernel}, .backward = max_backward, .flops = pool_flops);
#define DEF_AVG(NAME, ATTRS)                                                                             \
  PD_OPDEF(NAME, .n_in = 1, .n_out = 1, .flags = PD_OPF_DIFF | PD_OPF_HALF_VIA_F32, .attr_names = ATTRS, \
           .infer_meta = avg_meta, .kernel = {[PD_PLACE_CPU] = avg_kernel}, .backward = avg_backward,    \
           .flops = pool_flops);
DEF_MAX(max_pool1d, POOL_ATTRS)
DEF_MAX(max_pool2d, POOL_ATTRS)
DEF_MAX(max_pool3d, POOL_ATTRS)
DEF_MAX(adaptive_max_pool1d, "v3:output_size")
DEF_MAX(adaptive_max_pool2d, "v3:output_size")
DEF_MAX(adaptive_max_pool3d, "v3:output_size")
DEF_AVG(avg_pool1d, POOL_ATTRS)
DEF_AVG(avg_pool2d, POOL_ATTRS)
DEF_AVG(avg_pool3d, POOL_ATTRS)
DEF_AVG(adaptive_avg_pool1d, "v3:output_size")
DEF_AVG(adaptive_avg_pool2d, "v3:output_size")
DEF_AVG(adaptive_avg_pool3d, "v3:output_size")

PD_OPDEF(max_pool_grad, .n_in = 2, .n_out = 1, .flags = PD_OPF_DIFF | PD_OPF_SAVE_IN | PD_OPF_HALF_VIA_F32,
         .nondiff_out = 0, .attr_names = "v3:input_size", .infer_meta = max_grad_meta,
         .kernel = {[PD_PLACE_CPU] = max_grad_kernel}, .backward = max_grad_backward);
PD_OPDEF(max_pool_gather, .attr_names = "", .n_in = 2, .n_out = 1,
         .flags = PD_OPF_DIFF | PD_OPF_SAVE_IN | PD_OPF_HALF_VIA_F32, .infer_meta = gather_meta,
         .kernel = {[PD_PLACE_CPU] = gather_kernel}, .backward = gather_backward);
PD_OPDEF(avg_pool_grad, .n_in = 1, .n_out = 1, .flags = PD_OPF_DIFF | PD_OPF_HALF_VIA_F32,
         .attr_names = POOL_ATTRS ",i2:adaptive,v3:input_size", .infer_meta = avg_grad_meta,
         .kernel = {[PD_PLACE_CPU] = avg_grad_kernel}, .backward = avg_grad_backward);

/* ---- public wrappers ------------------------------------------------------ */

/* to channels first: [0, nsp + 1, 1, ..., nsp]; back: [0, 2, ..., nsp + 1, 1] */
static pd_tensor *to_first(pd_tensor *x, int nsp) {
  int64_t p[5] = {0, nsp + 1};
  for (int d = 0; d < nsp; d++) p[2 + d] = 1 + d;
  return pd_transpose(x, nsp + 2, p);
}
static pd_tensor *to_last(pd_tensor *x, int nsp) {
  int64_t p[5] = {0};
  for (int d = 0; d < nsp; d++) p[1 + d] = 2 + d;
  p[nsp + 1] = 1;
  return pd_transpose(x, nsp + 2, p);
}

/* Runs pooling op `id` with attrs a on x given in layout cl; returns out
 * (and the mask when wanted), joined to the caller's scope. */
static pd_tensor *run_pool(pd_op_id id, pd_tensor *x, bool cl, int nsp, const pd_attrs *a, double scale,
                           pd_tensor **mask) {
  pd_internal_enter();
  pd_tensor *xf = cl ? to_first(x, nsp) : pd_tensor_retain(x);
  pd_tensor *outs[PD_MAX_OUTPUTS] = {NULL};
  int n = 0;
  pd_tensor *y = NULL;
  if (xf && pd_dispatch(id, &xf, 1, a, outs, &n) == PD_OK) {
    y = outs[0];
    if (scale != 1.0 && y) {
      pd_tensor *s = pd_scale(y, scale, 0.0, true);
      pd_tensor_release(y);
      y = s;
    }
    if (cl && y) {
      pd_tensor *t = to_last(y, nsp);
      pd_tensor_release(y);
      y = t;
    }
    if (mask && y) {
      *mask = outs[1];
      outs[1] = NULL;
    }
    for (int k = 1; k < n; k++) pd_tensor_release(outs[k]);
  }
  pd_tensor_release(xf);
  pd_internal_leave();
  if (mask && !y) *mask = NULL;
  if (mask && *mask) pd_scope_track(*mask);
  return pd_scope_track(y);
}

typedef enum { POOL_MAX, POOL_AVG } pool_type;

static pd_tensor *pool_public(pool_type type, int nsp, pd_tensor *x, int nk, const int64_t *ks,
                              const pd_pool_opts *o, pd_tensor **mask) {
  static const pd_pool_opts defaults;
  if (!o) o = &defaults;
  pd_op_id id = type == POOL_MAX ? k_max_ids[nsp - 1] : k_avg_ids[nsp - 1];
  const char *op = pd_op_table[id]->name;
  if (mask) *mask = NULL;
  if (!x) return pd_dispatch1(id, &x, 1, NULL);
  bool cl;
  if (pd_conv_parse_format(op, o->data_format, nsp, &cl) != PD_OK) return NULL;
  if (cl && mask) {
    pd_set_error(PD_ERR_INVALID, "%s: return_mask needs data_format \"%s\", got \"%s\"", op, layout_of(nsp),
                 o->data_format);
    return NULL;
  }
  if (x->ndim != nsp + 2) {
    pd_set_error(PD_ERR_SHAPE, "%s: x must be a %d-D tensor (%s), got shape %s", op, nsp + 2,
                 o->data_format ? o->data_format : layout_of(nsp), PD_SHAPE_STR(x));
    return NULL;
  }
  pd_attrs a = {.nv = {nsp, nsp, 2 * nsp}};
  if (!ks || (nk != 1 && nk != nsp)) {
    pd_set_error(PD_ERR_INVALID, "%s: kernel_size must have 1 or %d values, got %d", op, nsp, ks ? nk : 0);
    return NULL;
  }
  for (int d = 0; d < nsp; d++) a.v[0][d] = ks[nk == 1 ? 0 : d];
  if (o->n_stride == 0) {
    memcpy(a.v[1], a.v[0], sizeof(int64_t) * (size_t)nsp);
  } else if (o->n_stride == 1 || o->n_stride == nsp) {
    for (int d = 0; d < nsp; d++) a.v[1][d] = o->stride[o->n_stride == 1 ? 0 : d];
  } else {
    pd_set_error(PD_ERR_INVALID, "%s: stride must have 1 or %d values, got %d", op, nsp, o->n_stride);
    return NULL;
  }
  for (int d = 0; d < nsp; d++)
    if (a.v[0][d] < 1 || a.v[1][d] < 1) {
      pd_set_error(PD_ERR_INVALID,
                   "%s: kernel_size (%lld) and stride (%lld) on spatial dim %d must be positive", op,
                   (long long)a.v[0][d], (long long)a.v[1][d], d);
      return NULL;
    }
  int64_t in_sp[3];
  for (int d = 0; d < nsp; d++) in_sp[d] = x->shape[(cl ? 1 : 2) + d];
  if (o->padding_algorithm && o->ceil_mode && pd_conv_str_ieq(o->padding_algorithm, "VALID")) {
    pd_set_error(PD_ERR_INVALID, "%s: with padding \"VALID\", ceil_mode must be false", op);
    return NULL;
  }
  if (pd_conv_parse_padding(op, o->padding_algorithm, o->n_padding, o->padding, nsp, in_sp, a.v[0], a.v[1],
                            NULL, a.v[2]) != PD_OK)
    return NULL;
  a.i[0] = o->ceil_mode;
  a.i[1] = !o->inclusive;
  double scale = 1.0;
  if (type == POOL_AVG && o->divisor_override) {
    if (o->divisor_override < 0) {
      pd_set_error(PD_ERR_INVALID, "%s: divisor_override (%lld) must be positive", op,
                   (long long)o->divisor_override);
      return NULL;
    }
    double k = 1;
    for (int d = 0; d < nsp; d++) k *= (double)a.v[0][d];
    scale = k / (double)o->divisor_override;
  }
  return run_pool(id, x, cl, nsp, &a, scale, mask);
}

static pd_tensor *adaptive_public(pool_type type, int nsp, pd_tensor *x, int n, const int64_t *size,
                                  const char *fmt, pd_tensor **mask) {
  pd_op_id id = type == POOL_MAX ? k_amax_ids[nsp - 1] : k_aavg_ids[nsp - 1];
  const char *op = pd_op_table[id]->name;
  if (mask) *mask = NULL;
  if (!x) return pd_dispatch1(id, &x, 1, NULL);
  bool cl;
  if (pd_conv_parse_format(op, fmt, nsp, &cl) != PD_OK) return NULL;
  if (x->ndim != nsp + 2) {
    pd_set_error(PD_ERR_SHAPE, "%s: x must be a %d-D tensor (%s), got shape %s", op, nsp + 2,
                 fmt ? fmt : layout_of(nsp), PD_SHAPE_STR(x));
    return NULL;
  }
  if (!size || (n != 1 && n != nsp)) {
    pd_set_error(PD_ERR_INVALID, "%s: output_size must have 1 or %d values, got %d", op, nsp, size ? n : 0);
    return NULL;
  }
  pd_attrs a = {.nv = {0, 0, 0, nsp}};
  for (int d = 0; d < nsp; d++) {
    int64_t v = size[n == 1 ? 0 : d];
    a.v[3][d] = v > 0 ? v : x->shape[(cl ? 1 : 2) + d]; /* None keeps the input size */
  }
  return run_pool(id, x, cl, nsp, &a, 1.0, mask);
}

pd_tensor *pd_max_pool1d(pd_tensor *x, int nk, const int64_t *kernel_size, const pd_pool_opts *opts) {
  return pool_public(POOL_MAX, 1, x, nk, kernel_size, opts, NULL);
}
pd_tensor *pd_max_pool2d(pd_tensor *x, int nk, const int64_t *kernel_size, const pd_pool_opts *opts) {
  return pool_public(POOL_MAX, 2, x, nk, kernel_size, opts, NULL);
}
pd_tensor *pd_max_pool3d(pd_tensor *x, int nk, const int64_t *kernel_size, const pd_pool_opts *opts) {
  return pool_public(POOL_MAX, 3, x, nk, kernel_size, opts, NULL);
}
pd_tensor *pd_max_pool1d_with_mask(pd_tensor *x, int nk, const int64_t *kernel_size, const pd_pool_opts *opts,
                                   pd_tensor **mask) {
  return pool_public(POOL_MAX, 1, x, nk, kernel_size, opts, mask);
}
pd_tensor *pd_max_pool2d_with_mask(pd_tensor *x, int nk, const int64_t *kernel_size, const pd_pool_opts *opts,
                                   pd_tensor **mask) {
  return pool_public(POOL_MAX, 2, x, nk, kernel_size, opts, mask);
}
pd_tensor *pd_max_pool3d_with_mask(pd_tensor *x, int nk, const int64_t *kernel_size, const pd_pool_opts *opts,
                                   pd_tensor **mask) {
  return pool_public(POOL_MAX, 3, x, nk, kernel_size, opts, mask);
}
pd_tensor *pd_avg_pool1d(pd_tensor *x, int nk, const int64_t *kernel_size, const pd_pool_opts *opts) {
  return pool_public(POOL_AVG, 1, x, nk, kernel_size, opts, NULL);
}
pd_tensor *pd_avg_pool2d(pd_tensor *x, int nk, const int64_t *kernel_size, const pd_pool_opts *opts) {
  return pool_public(POOL_AVG, 2, x, nk, kernel_size, opts, NULL);
}
pd_tensor *pd_avg_pool3d(pd_tensor *x, int nk, const int64_t *kernel_size, const pd_pool_opts *opts) {
  return pool_public(POOL_AVG, 3, x, nk, kernel_size, opts, NULL);
}
pd_tensor *pd_adaptive_avg_pool1d(pd_tensor *x, int n, const int64_t *output_size) {
  return adaptive_public(POOL_AVG, 1, x, n, output_size, NULL, NULL);
}
pd_tensor *pd_adaptive_avg_pool2d(pd_tensor *x, int n, const int64_t *output_size, const char *data_format) {
  return adaptive_public(POOL_AVG, 2, x, n, output_size, data_format, NULL);
}
pd_tensor *pd_adaptive_avg_pool3d(pd_tensor *x, int n, const int64_t *output_size, const char *data_format) {
  return adaptive_public(POOL_AVG, 3, x, n, output_size, data_format, NULL);
}
pd_tensor *pd_adaptive_max_pool1d(pd_tensor *x, int n, const int64_t *output_size, pd_tensor **mask) {
  return adaptive_public(POOL_MAX, 1, x, n, output_size, NULL, mask);
}
pd_tensor *pd_adaptive_max_pool2d(pd_tensor *x, int n, const int64_t *output_size, pd_tensor **mask) {
  return adaptive_public(POOL_MAX, 2, x, n, output_size, NULL, mask);
}
pd_tensor *pd_adaptive_max_pool3d(pd_tensor *x, int n, const int64_t *output_size, pd_tensor **mask) {
  return adaptive_public(POOL_MAX, 3, x, n, output_size, NULL, mask);
}
