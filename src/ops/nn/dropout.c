/* dropout and alpha_dropout (training mode; eval is handled by the public
 * functions). Both return (out, mask) where mask holds the per-element
 * factor the backward multiplies by: for dropout 0 or 1/(1-p)
 * (upscale_in_train) / 0 or 1 (downscale_in_infer), for alpha_dropout 0 or a.
 * Random draws: mask element i (row-major over the mask's shape) uses the
 * float32 uniform of word i%4 of Philox counter first + i/4, as uniform
 * (creation/random_dist.c), and is kept when that uniform is >= p; the result does
 * not depend on the number of threads. A nonzero seed attribute draws from a
 * private stream starting at counter 0 (Paddle's fix_seed). A dropout of a
 * shard (auto_parallel) names the whole tensor's shape and the shard's
 * offset in it: it reserves the whole tensor's counters and fills each
 * element from its global index, so the shard's mask is the slice of the
 * mask the whole tensor would draw. */
#include <math.h>
#include <string.h>

#include "dropout.h"
#include "../../kernels/cpu/parallel.h"
#include "../ew_util.h"
#include "../manipulation/manipulation_util.h"
#include "../creation/creation_util.h"
#include "dropout_add.h"
#include "paddlec/layers.h"
#include "paddlec/math.h"

/* Counter blocks below this many run on one thread. */
#define DROPOUT_GRAIN 4096

#define SELU_ALPHA 1.6732632423543772848170429916717
#define SELU_SCALE 1.0507009873554804934193349852946

/* Runs BODY for every counter block b in [0, nb) with its four words w,
 * PD_PHILOX_LANES blocks at a time, split over threads when nb > grain. */
#define FOR_BLOCKS(nb, first, key, ...)                                                 \
  do {                                                                                  \
    const int64_t nb_ = (nb), ng_ = (nb_ + PD_PHILOX_LANES - 1) / PD_PHILOX_LANES;      \
    const uint64_t first_ = (first), key_ = (key);                                      \
    PD_PARALLEL_FOR_IF(nb_ > DROPOUT_GRAIN, g_, ng_, {                                  \
      uint32_t lanes_[PD_PHILOX_LANES][4];                                              \
      pd_philox_lanes(first_ + (uint64_t)g_ * PD_PHILOX_LANES, key_, lanes_);           \
      for (int l_ = 0; l_ < PD_PHILOX_LANES && g_ * PD_PHILOX_LANES + l_ < nb_; l_++) { \
        const int64_t b = g_ * PD_PHILOX_LANES + l_;                                    \
        const uint32_t *w = lanes_[l_];                                                 \
        __VA_ARGS__                                                                     \
      }                                                                                 \
    });                                                                                 \
  } while (0)

static uint64_t reserve(uint64_t nblocks, int64_t seed, uint64_t *key) {
  if (seed != 0) {
    *key = (uint64_t)seed;
    return 0;
  }
  return pd_rng_reserve(nblocks, key);
}

static pd_status check_p(const char *op, double p) {
  if (!(p >= 0.0 && p <= 1.0)) return pd_set_error(PD_ERR_INVALID, "%s: p %g is out of range [0, 1]", op, p);
  return PD_OK;
}

static pd_status check_float(const char *op, const pd_tensor *x) {
  if (!pd_dtype_is_floating(x->dtype))
    return pd_set_error(PD_ERR_DTYPE, "%s: x must be float16, bfloat16, float32 or float64, got %s", op,
                        pd_dtype_name(x->dtype));
  return PD_OK;
}

/* Axes of the shared-mask form: each in [0, rank) as Paddle, at most rank of them. */
static pd_status check_axes(const char *op, const pd_tensor *x, int n, const int64_t *axes) {
  if (n > x->ndim)
    return pd_set_error(PD_ERR_INVALID, "%s: %d axes given for x of rank %d (shape %s)", op, n, x->ndim,
                        PD_SHAPE_STR(x));
  for (int k = 0; k < n; k++)
    if (axes[k] < 0 || axes[k] >= x->ndim)
      return pd_set_error(PD_ERR_INDEX,
                          "%s: axis %lld is out of range for x of rank %d (expected 0 <= axis < %d)", op,
                          (long long)axes[k], x->ndim, x->ndim);
  return PD_OK;
}

/* The shard form's attrs (v1 the whole tensor's shape, v2 x's offset in
 * it): one per dim of x, x inside the whole, no shared-mask axes. */
static pd_status check_shard(const char *op, const pd_tensor *x, const pd_attrs *a) {
  if (a->nv[1] == 0 && a->nv[2] == 0) return PD_OK;
  if (a->nv[0] > 0 || a->nv[1] != x->ndim || a->nv[2] != x->ndim)
    return pd_set_error(
        PD_ERR_INVALID,
        "%s: a shard needs global_shape and offset of x's rank %d (got %d and %d) and no axis "
        "(got %d)",
        op, x->ndim, a->nv[1], a->nv[2], a->nv[0]);
  int64_t total = 1;
  for (int d = 0; d < x->ndim; d++) {
    int64_t g = a->v[1][d], o = a->v[2][d];
    if (o < 0 || g < 0 || o > g - x->shape[d])
      return pd_set_error(PD_ERR_INVALID,
                          "%s: dim %d: a shard of %lld from offset %lld does not fit the global size %lld",
                          op, d, (long long)x->shape[d], (long long)o, (long long)g);
    if (g > 0 && total > INT64_MAX / 4 / g)
      return pd_set_error(PD_ERR_SHAPE, "%s: the global shape overflows int64", op);
    total *= g;
  }
  return PD_OK;
}

/* ---- dropout ---------------------------------------------------------------- */
/* Attrs: f0 p, i0 mode (0 upscale_in_train, 1 downscale_in_infer), i1 seed,
 * v0 axes (none: one draw per element), v1 and v2 a shard's global shape
 * and offset (none: x is the whole tensor). */
static pd_status dropout_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                              pd_meta *out, int *n_out) {
  (void)n_in;
  const pd_tensor *x = in[0];
  pd_status st = check_float(def->name, x);
  if (st == PD_OK) st = check_p(def->name, a->f[0]);
  if (st == PD_OK) st = check_axes(def->name, x, a->nv[0], a->v[0]);
  if (st == PD_OK) st = check_shard(def->name, x, a);
  if (st != PD_OK) return st;
  pd_meta_of(x, &out[0]);
  pd_meta_of(x, &out[1]);
  if (a->nv[0] > 0) {
    for (int d = 0; d < x->ndim; d++) out[1].shape[d] = 1;
    for (int k = 0; k < a->nv[0]; k++) out[1].shape[a->v[0][k]] = x->shape[a->v[0][k]];
  }
  *n_out = 2;
  return PD_OK;
}

PD_EW_BINARY(dmul_f32, float, float, x *y)
PD_EW_BINARY(dmul_f64, double, double, x *y)
static const pd_ew_fn k_mul[PD_NUM_DTYPES] = PD_EW_TABLE_FLOAT(dmul);

#define FILL_MASK(T, m, n, first, key, pf, kv)                                             \
  FOR_BLOCKS(((n) + 3) / 4, first, key, {                                                  \
    int64_t i0 = 4 * b, c = (n)-i0 < 4 ? (n)-i0 : 4;                                       \
    for (int k = 0; k < c; k++) (m)[i0 + k] = pd_u32_to_unit_f32(w[k]) >= (pf) ? (kv) : 0; \
  })

#define FUSED(T, xp, yp, m, n, first, key, pf, kv)          \
  FOR_BLOCKS(((n) + 3) / 4, first, key, {                   \
    int64_t i0 = 4 * b, c = (n)-i0 < 4 ? (n)-i0 : 4;        \
    for (int k = 0; k < c; k++) {                           \
      T f = pd_u32_to_unit_f32(w[k]) >= (pf) ? (kv) : (T)0; \
      (m)[i0 + k] = f;                                      \
      (yp)[i0 + k] = (xp)[i0 + k] * f;                      \
    }                                                       \
  })

/* The mask of a shard: element i of x at global row-major index gi takes
 * word gi % 4 of counter first + gi / 4 of the whole tensor's reservation. */
#define FILL_SHARD(T, m, kv)                                                         \
  do {                                                                               \
    T *mp_ = pd_tensor_data(m);                                                      \
    int64_t idx_[PD_MAX_DIMS] = {0}, cached_ = -1;                                   \
    uint32_t w_[4] = {0};                                                            \
    for (int64_t i_ = 0; i_ < (m)->numel; i_++) {                                    \
      int64_t gi_ = 0;                                                               \
      for (int d_ = 0; d_ < nd; d_++) gi_ += (a->v[2][d_] + idx_[d_]) * gstride[d_]; \
      if (gi_ / 4 != cached_) {                                                      \
        cached_ = gi_ / 4;                                                           \
        pd_philox(first + (uint64_t)cached_, key, w_);                               \
      }                                                                              \
      mp_[i_] = pd_u32_to_unit_f32(w_[gi_ % 4]) >= pf ? (kv) : (T)0;                 \
      for (int d_ = nd - 1; d_ >= 0; d_--) { /* the next local index */              \
        if (++idx_[d_] < (m)->shape[d_]) break;                                      \
        idx_[d_] = 0;                                                                \
      }                                                                              \
    }                                                                                \
  } while (0)

static pd_status dropout_shard_kernel(const pd_kernel_ctx *ctx, double kv, float pf) {
  const pd_attrs *a = ctx->attrs;
  pd_tensor *m = ctx->out[1];
  int nd = m->ndim;
  int64_t total = 1, gstride[PD_MAX_DIMS];
  for (int d = nd - 1; d >= 0; d--) {
    gstride[d] = total;
    total *= a->v[1][d];
  }
  uint64_t key, first = reserve((uint64_t)((total + 3) / 4), a->i[1], &key);
  if (m->dtype == PD_FLOAT32)
    FILL_SHARD(float, m, (float)kv);
  else
    FILL_SHARD(double, m, kv);
  pd_tensor *y = ctx->out[0];
  return pd_ew_apply(ctx->def->name, k_mul, y->dtype, y, (pd_tensor *[]){ctx->in[0], m}, 2, NULL);
}

/* A kept element's factor: 1 / (1 - p) in mode 0 (upscale_in_train; 0
 * for p = 1, where nothing is kept), else 1. */
static double kept_scale(const pd_attrs *a) {
  double p = a->f[0];
  return a->i[0] == 0 ? (p < 1.0 ? 1.0 / (1.0 - p) : 0.0) : 1.0;
}

static pd_status dropout_kernel(const pd_kernel_ctx *ctx) {
  pd_tensor *x = ctx->in[0], *y = ctx->out[0], *m = ctx->out[1];
  double p = ctx->attrs->f[0], kv = kept_scale(ctx->attrs);
  float pf = (float)p;
  int64_t n = m->numel;
  if (ctx->attrs->nv[1] > 0) return dropout_shard_kernel(ctx, kv, pf);
  if (n == 0) return PD_OK;
  uint64_t key, first = reserve((uint64_t)((n + 3) / 4), ctx->attrs->i[1], &key);
  bool fused = ctx->attrs->nv[0] == 0 && x->is_contiguous;
  if (x->dtype == PD_FLOAT32) {
    float *mp = pd_tensor_data(m), k32 = (float)kv;
    if (fused) {
      const float *xp = pd_tensor_data(x);
      float *yp = pd_tensor_data(y);
      FUSED(float, xp, yp, mp, n, first, key, pf, k32);
      return PD_OK;
    }
    FILL_MASK(float, mp, n, first, key, pf, k32);
  } else {
    double *mp = pd_tensor_data(m);
    if (fused) {
      const double *xp = pd_tensor_data(x);
      double *yp = pd_tensor_data(y);
      FUSED(double, xp, yp, mp, n, first, key, pf, kv);
      return PD_OK;
    }
    FILL_MASK(double, mp, n, first, key, pf, kv);
  }
  return pd_ew_apply(ctx->def->name, k_mul, y->dtype, y, (pd_tensor *[]){x, m}, 2, NULL);
}

/* dropout + add, one group of PD_PHILOX_LANES counter blocks at a time:
 * the group's mask and x * f as FUSED writes them (f in T), then the add's
 * 1-D function on the group, r and the scaled x in the add's order. */
#define DROPOUT_ADD(T, xp, rp, yp, mp, n, first, key, pf, kv)                               \
  do {                                                                                      \
    const int64_t nb_ = ((n) + 3) / 4, ng_ = (nb_ + PD_PHILOX_LANES - 1) / PD_PHILOX_LANES; \
    PD_PARALLEL_FOR_IF(nb_ > DROPOUT_GRAIN, g_, ng_, {                                      \
      uint32_t lanes_[PD_PHILOX_LANES][4];                                                  \
      T d_[4 * PD_PHILOX_LANES];                                                            \
      pd_philox_lanes((first) + (uint64_t)g_ * PD_PHILOX_LANES, (key), lanes_);             \
      const int64_t i0_ = 4 * PD_PHILOX_LANES * g_;                                         \
      const int64_t c_ = (n)-i0_ < 4 * PD_PHILOX_LANES ? (n)-i0_ : 4 * PD_PHILOX_LANES;     \
      for (int64_t e_ = 0; e_ < c_; e_++) {                                                 \
        T f = pd_u32_to_unit_f32(lanes_[e_ / 4][e_ % 4]) >= (pf) ? (kv) : (T)0;             \
        (mp)[i0_ + e_] = f;                                                                 \
        d_[e_] = (xp)[i0_ + e_] * f;                                                        \
      }                                                                                     \
      static const int64_t unit_[3] = {1, 1, 1};                                            \
      char *ptr_[3] = {(char *)((yp) + i0_), r_first ? (char *)((rp) + i0_) : (char *)d_,   \
                       r_first ? (char *)d_ : (char *)((rp) + i0_)};                        \
      add(c_, ptr_, unit_, add_p);                                                          \
    });                                                                                     \
  } while (0)

pd_status pd_dropout_add_run(const pd_attrs *da, const pd_tensor *x, const pd_tensor *r, bool r_first,
                             pd_ew_fn add, const double *add_p, pd_tensor *y, pd_tensor *m) {
  double p = da->f[0], kv = kept_scale(da);
  float pf = (float)p;
  int64_t n = m->numel;
  if (da->nv[0] != 0 || !x->is_contiguous || !r->is_contiguous || x->numel != n || r->numel != n ||
      y->numel != n || (x->dtype != PD_FLOAT32 && x->dtype != PD_FLOAT64))
    return pd_set_error(PD_ERR_INVALID,
                        "fused_dropout_add: x %s and r %s are not contiguous float tensors of %lld elements",
                        PD_SHAPE_STR(x), PD_SHAPE_STR(r), (long long)n);
  if (n == 0) return PD_OK;
  uint64_t key, first = reserve((uint64_t)((n + 3) / 4), da->i[1], &key);
  if (x->dtype == PD_FLOAT32) {
    const float *xp = pd_tensor_data(x), *rp = pd_tensor_data(r);
    float *yp = pd_tensor_data(y), *mp = pd_tensor_data(m), k32 = (float)kv;
    DROPOUT_ADD(float, xp, rp, yp, mp, n, first, key, pf, k32);
  } else {
    const double *xp = pd_tensor_data(x), *rp = pd_tensor_data(r);
    double *yp = pd_tensor_data(y), *mp = pd_tensor_data(m);
    DROPOUT_ADD(double, xp, rp, yp, mp, n, first, key, pf, kv);
  }
  return PD_OK;
}

/* d out / d x = mask (the saved second output). */
static pd_status mask_backward(const pd_backward_ctx *c) {
  if (!c->needs_grad[0]) return PD_OK;
  c->grad_in[0] = pd_multiply(c->grad_out[0], c->outputs[1]);
  return c->grad_in[0] ? PD_OK : pd_last_status();
}

PD_OPDEF(dropout, .n_in = 1, .n_out = 2,
         .flags = PD_OPF_DIFF | PD_OPF_RANDOM | PD_OPF_SAVE_OUT | PD_OPF_HALF_VIA_F32, .nondiff_out = 1u << 1,
         .attr_names = "f0:p,i0:mode,i1:seed,v0:axis,v1:global_shape,v2:offset", .infer_meta = dropout_meta,
         .kernel = {[PD_PLACE_CPU] = dropout_kernel}, .backward = mask_backward, .flops = pd_flops_per_elem);

static pd_status parse_mode(const char *op, const char *mode, int *out) {
  if (!mode || strcmp(mode, "upscale_in_train") == 0) {
    *out = 0;
    return PD_OK;
  }
  if (strcmp(mode, "downscale_in_infer") == 0) {
    *out = 1;
    return PD_OK;
  }
  return pd_set_error(PD_ERR_INVALID, "%s: mode '%s' is not 'upscale_in_train' or 'downscale_in_infer'", op,
                      mode);
}

static pd_tensor *same(pd_tensor *x) { return pd_scope_track(pd_tensor_retain(x)); }

static pd_tensor *dropout_impl(const char *op, pd_tensor *x, double p, int naxis, const int64_t *axis,
                               bool training, const char *mode) {
  if (!x) {
    if (pd_last_status() == PD_OK) pd_set_error(PD_ERR_INVALID, "%s: x is NULL", op);
    return NULL;
  }
  int m = 0;
  if (parse_mode(op, mode, &m) != PD_OK || check_p(op, p) != PD_OK) return NULL;
  if (naxis < 0 || (naxis > 0 && !axis)) {
    pd_set_error(PD_ERR_INVALID, "%s: invalid axis list (naxis %d)", op, naxis);
    return NULL;
  }
  if (check_axes(op, x, naxis, axis) != PD_OK) return NULL;
  if (p == 0.0) return same(x); /* Paddle's fast return */
  if (!training) return m == 1 ? pd_scale(x, 1.0 - p, 0.0, true) : same(x);
  pd_attrs a = {.f = {p}, .i = {m}, .nv = {naxis}};
  if (naxis) memcpy(a.v[0], axis, sizeof(int64_t) * (size_t)naxis);
  return pd_dispatch1(PD_OP_dropout, &x, 1, &a); /* out; the mask stays internal */
}

pd_tensor *pd_dropout(pd_tensor *x, double p, int naxis, const int64_t *axis, bool training,
                      const char *mode) {
  return dropout_impl("dropout", x, p, naxis, axis, training, mode);
}

static pd_tensor *dropout_nd(const char *op, pd_tensor *x, double p, bool training, const char *data_format,
                             int rank, const char *first, const char *last) {
  if (!x) {
    if (pd_last_status() == PD_OK) pd_set_error(PD_ERR_INVALID, "%s: x is NULL", op);
    return NULL;
  }
  if (x->ndim != rank) {
    pd_set_error(PD_ERR_SHAPE, "%s: x must be %d-D, got shape %s", op, rank, PD_SHAPE_STR(x));
    return NULL;
  }
  bool channel_last;
  if (!data_format || strcmp(data_format, first) == 0) {
    channel_last = false;
  } else if (strcmp(data_format, last) == 0) {
    channel_last = true;
  } else {
    pd_set_error(PD_ERR_INVALID, "%s: data_format '%s' is not '%s' or '%s'", op, data_format, first, last);
    return NULL;
  }
  int64_t axes[2] = {0, channel_last ? rank - 1 : 1};
  return dropout_impl(op, x, p, 2, axes, training, NULL);
}

pd_tensor *pd_dropout2d(pd_tensor *x, double p, bool training, const char *data_format) {
  return dropout_nd("dropout2d", x, p, training, data_format, 4, "NCHW", "NHWC");
}

pd_tensor *pd_dropout3d(pd_tensor *x, double p, bool training, const char *data_format) {
  return dropout_nd("dropout3d", x, p, training, data_format, 5, "NCDHW", "NDHWC");
}

/* ---- alpha_dropout ------------------------------------------------------------------ */
/* Attrs: f0 p, i1 seed. out = keep ? a x + b : a alpha' + b with
 * alpha' = -alpha * scale (SELU), a = ((1-p)(1 + p alpha'^2))^-1/2, b = -a alpha' p. */
static pd_status alpha_dropout_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                                    pd_meta *out, int *n_out) {
  (void)n_in;
  pd_status st = check_float(def->name, in[0]);
  if (st == PD_OK) st = check_p(def->name, a->f[0]);
  if (st == PD_OK && a->f[0] >= 1.0)
    st = pd_set_error(PD_ERR_INVALID, "%s: p must be < 1 here (p = 1 gives zeros)", def->name);
  if (st != PD_OK) return st;
  pd_meta_of(in[0], &out[0]);
  pd_meta_of(in[0], &out[1]);
  *n_out = 2;
  return PD_OK;
}

#define ALPHA(T, xp, yp, m, n, first, key, pf, A, B, D)     \
  FOR_BLOCKS(((n) + 3) / 4, first, key, {                   \
    int64_t i0 = 4 * b, c = (n)-i0 < 4 ? (n)-i0 : 4;        \
    for (int k = 0; k < c; k++) {                           \
      bool keep = pd_u32_to_unit_f32(w[k]) >= (pf);         \
      (m)[i0 + k] = keep ? (A) : (T)0;                      \
      (yp)[i0 + k] = keep ? (A) * (xp)[i0 + k] + (B) : (D); \
    }                                                       \
  })

void pd_alpha_dropout_coeffs(double p, double *a, double *b, double *d) {
  double alpha_p = -SELU_ALPHA * SELU_SCALE;
  *a = pow((1.0 - p) * (1.0 + p * alpha_p * alpha_p), -0.5);
  *b = -*a * alpha_p * p;
  *d = *a * alpha_p + *b;
}

static pd_status alpha_dropout_kernel(const pd_kernel_ctx *ctx) {
  double p = ctx->attrs->f[0], A, B, D;
  pd_alpha_dropout_coeffs(p, &A, &B, &D);
  float pf = (float)p;
  int64_t n = ctx->out[0]->numel;
  if (n == 0) return PD_OK;
  pd_tensor *x = pd_kernel_contiguous(ctx->in[0]);
  if (!x) return pd_last_status();
  uint64_t key, first = reserve((uint64_t)((n + 3) / 4), ctx->attrs->i[1], &key);
  if (x->dtype == PD_FLOAT32) {
    const float *xp = pd_tensor_data(x);
    float *yp = pd_tensor_data(ctx->out[0]), *mp = pd_tensor_data(ctx->out[1]);
    float A32 = (float)A, B32 = (float)B, D32 = (float)D;
    ALPHA(float, xp, yp, mp, n, first, key, pf, A32, B32, D32);
  } else {
    const double *xp = pd_tensor_data(x);
    double *yp = pd_tensor_data(ctx->out[0]), *mp = pd_tensor_data(ctx->out[1]);
    ALPHA(double, xp, yp, mp, n, first, key, pf, A, B, D);
  }
  pd_tensor_release(x);
  return PD_OK;
}

PD_OPDEF(alpha_dropout, .n_in = 1, .n_out = 2,
         .flags = PD_OPF_DIFF | PD_OPF_RANDOM | PD_OPF_SAVE_OUT | PD_OPF_HALF_VIA_F32, .nondiff_out = 1u << 1,
         .attr_names = "f0:p,i1:seed", .infer_meta = alpha_dropout_meta,
         .kernel = {[PD_PLACE_CPU] = alpha_dropout_kernel}, .backward = mask_backward,
         .flops = pd_flops_per_elem);

pd_tensor *pd_alpha_dropout(pd_tensor *x, double p, bool training) {
  if (!x) {
    if (pd_last_status() == PD_OK) pd_set_error(PD_ERR_INVALID, "alpha_dropout: x is NULL");
    return NULL;
  }
  if (check_p("alpha_dropout", p) != PD_OK) return NULL;
  if (!training) return same(x);
  if (p == 1.0) return pd_scale(x, 0.0, 0.0, true);
  pd_attrs a = {.f = {p}};
  return pd_dispatch1(PD_OP_alpha_dropout, &x, 1, &a);
}
