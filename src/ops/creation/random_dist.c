/* Random tensors of a given shape: uniform (rand), gaussian (randn, normal)
 * and randint. Every value comes from the global Philox generator with a
 * fixed map from element index to counter and word, so a seed gives the same
 * tensor whatever the number of threads:
 *   uniform float32/16/bf16  element i: counter first + i/4, word i%4
 *   uniform float64          element i: counter first + i/2, words 2(i%2), 2(i%2)+1
 *   gaussian float32/16/bf16 element i: counter first + i/4; Box-Muller on the
 *                            word pair (i%4)/2, cosine branch for even i, sine for odd
 *   gaussian float64         element i: counter first + i/2; Box-Muller on the
 *                            two 53-bit uniforms of the counter, cos/sin by i%2
 *   randint                  element i: counter first + i/2, 64 bits as for float64
 *   truncated_gaussian_random  element i: the float64 uniform's draw, through the
 *                            normal's inverse CDF (any output dtype) */
#include <float.h>
#include <math.h>
#include <string.h>

#include "creation_util.h"
#include "../op_registry.h"
#include "paddlec/ops.h"

/* Counter blocks below this many run on one thread. */
#define RNG_GRAIN 4096
#define TWO_PI 6.283185307179586476925286766559

/* First counter and key: the global generator, or (seed != 0) a private
 * stream starting at counter 0, as Paddle's per-op seed attribute. */
static uint64_t reserve(uint64_t n, int64_t seed, uint64_t *key) {
  if (seed != 0) {
    *key = (uint64_t)seed;
    return 0;
  }
  return pd_rng_reserve(n, key);
}

static pd_status shape_meta(const pd_op_def *def, const pd_attrs *a, pd_meta *out, int *n_out) {
  pd_status st = pd_check_shape_arg(def->name, a->nv[0], a->v[0]);
  if (st != PD_OK) return st;
  out->dtype = a->dtype;
  out->ndim = a->nv[0];
  memcpy(out->shape, a->v[0], sizeof(int64_t) * (size_t)a->nv[0]);
  *n_out = 1;
  return PD_OK;
}

static pd_status float_shape_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                                  pd_meta *out, int *n_out) {
  (void)in;
  (void)n_in;
  if (!pd_dtype_is_floating(a->dtype))
    return pd_set_error(PD_ERR_DTYPE, "%s: dtype %s is not supported (float16, bfloat16, float32, float64)",
                        def->name, pd_dtype_name(a->dtype));
  return shape_meta(def, a, out, n_out);
}

/* Stores float32 value v as element i of a float32/float16/bfloat16 buffer. */
static inline void store_f32(void *p, pd_dtype dt, int64_t i, float v) {
  if (dt == PD_FLOAT32)
    ((float *)p)[i] = v;
  else if (dt == PD_FLOAT16)
    ((uint16_t *)p)[i] = pd_f32_to_f16(v);
  else
    ((uint16_t *)p)[i] = pd_f32_to_bf16(v);
}

/* ---- uniform ------------------------------------------------------------- */
static pd_status uniform_kernel(const pd_kernel_ctx *ctx) {
  pd_tensor *o = ctx->out[0];
  int64_t n = o->numel;
  if (n == 0) return PD_OK;
  pd_dtype dt = o->dtype;
  void *p = pd_tensor_data(o);
  uint64_t key;
  if (dt == PD_FLOAT64) {
    int64_t nb = (n + 1) / 2;
    uint64_t first = reserve((uint64_t)nb, ctx->attrs->i[0], &key);
    double lo = ctx->attrs->f[0], range = ctx->attrs->f[1] - ctx->attrs->f[0];
    double *q = p;
    PD_FOR_PHILOX_BLOCKS(nb, first, key, RNG_GRAIN, {
      int64_t i = 2 * b;
      q[i] = lo + range * pd_u64_to_unit_f64(w[0], w[1]);
      if (i + 1 < n) q[i + 1] = lo + range * pd_u64_to_unit_f64(w[2], w[3]);
    });
    return PD_OK;
  }
  int64_t nb = (n + 3) / 4;
  uint64_t first = reserve((uint64_t)nb, ctx->attrs->i[0], &key);
  float lo = (float)ctx->attrs->f[0], range = (float)(ctx->attrs->f[1] - ctx->attrs->f[0]);
  if (dt == PD_FLOAT32) {
    float *q = p;
    PD_FOR_PHILOX_BLOCKS(nb, first, key, RNG_GRAIN, {
      int64_t i0 = 4 * b, m = n - i0 < 4 ? n - i0 : 4;
      for (int k = 0; k < m; k++) q[i0 + k] = lo + range * pd_u32_to_unit_f32(w[k]);
    });
    return PD_OK;
  }
  PD_FOR_PHILOX_BLOCKS(nb, first, key, RNG_GRAIN, {
    int64_t i0 = 4 * b, m = n - i0 < 4 ? n - i0 : 4;
    for (int k = 0; k < m; k++) store_f32(p, dt, i0 + k, lo + range * pd_u32_to_unit_f32(w[k]));
  });
  return PD_OK;
}

PD_OPDEF(uniform, .n_in = 0, .n_out = 1, .flags = PD_OPF_RANDOM,
         .attr_names = "v0:shape,f0:min,f1:max,i0:seed,dtype", .infer_meta = float_shape_meta,
         .kernel = {[PD_PLACE_CPU] = uniform_kernel});

static bool shape_ok(const char *op, int ndim, const int64_t *shape) {
  if (ndim < 0 || ndim > PD_MAX_DIMS || (ndim > 0 && !shape)) {
    pd_set_error(PD_ERR_INVALID, "%s: invalid shape (rank %d, shape %s)", op, ndim, shape ? "given" : "NULL");
    return false;
  }
  return true;
}

static pd_tensor *uniform_impl(const char *op, int ndim, const int64_t *shape, pd_dtype dt, double min,
                               double max, uint64_t seed) {
  if (!shape_ok(op, ndim, shape)) return NULL;
  pd_attrs a = {.f = {min, max},
                .i = {(int64_t)seed},
                .dtype = dt == PD_NUM_DTYPES ? pd_get_default_dtype() : dt,
                .nv = {ndim}};
  if (ndim) memcpy(a.v[0], shape, sizeof(int64_t) * (size_t)ndim);
  return pd_dispatch1(PD_OP_uniform, NULL, 0, &a);
}

pd_tensor *pd_rand(int ndim, const int64_t *shape, pd_dtype dt) {
  return uniform_impl("rand", ndim, shape, dt, 0.0, 1.0, 0);
}

pd_tensor *pd_uniform(int ndim, const int64_t *shape, pd_dtype dt, double min, double max, uint64_t seed) {
  return uniform_impl("uniform", ndim, shape, dt, min, max, seed);
}

/* ---- gaussian ------------------------------------------------------------ */
static pd_status gaussian_kernel(const pd_kernel_ctx *ctx) {
  pd_tensor *o = ctx->out[0];
  int64_t n = o->numel;
  if (n == 0) return PD_OK;
  pd_dtype dt = o->dtype;
  void *p = pd_tensor_data(o);
  uint64_t key;
  if (dt == PD_FLOAT64) {
    int64_t nb = (n + 1) / 2;
    uint64_t first = reserve((uint64_t)nb, ctx->attrs->i[0], &key);
    double mean = ctx->attrs->f[0], std = ctx->attrs->f[1];
    double *q = p;
    PD_FOR_PHILOX_BLOCKS(nb, first, key, RNG_GRAIN / 4, {
      double u1 = 1.0 - pd_u64_to_unit_f64(w[0], w[1]); /* (0, 1]: log is finite */
      double u2 = pd_u64_to_unit_f64(w[2], w[3]);
      double r = sqrt(-2.0 * log(u1)), t = TWO_PI * u2;
      int64_t i = 2 * b;
      q[i] = mean + std * (r * cos(t));
      if (i + 1 < n) q[i + 1] = mean + std * (r * sin(t));
    });
    return PD_OK;
  }
  int64_t nb = (n + 3) / 4;
  uint64_t first = reserve((uint64_t)nb, ctx->attrs->i[0], &key);
  float mean = (float)ctx->attrs->f[0], std = (float)ctx->attrs->f[1];
  PD_FOR_PHILOX_BLOCKS(nb, first, key, RNG_GRAIN / 4, {
    float z[4];
    for (int k = 0; k < 4; k += 2) {
      float u1 = 1.0f - pd_u32_to_unit_f32(w[k]);
      float u2 = pd_u32_to_unit_f32(w[k + 1]);
      float r = sqrtf(-2.0f * logf(u1)), t = (float)TWO_PI * u2;
      z[k] = r * cosf(t);
      z[k + 1] = r * sinf(t);
    }
    int64_t i0 = 4 * b, m = n - i0 < 4 ? n - i0 : 4;
    for (int k = 0; k < m; k++) store_f32(p, dt, i0 + k, mean + std * z[k]);
  });
  return PD_OK;
}

/* std is a spread: negative or NaN is no distribution (and mean must be a
 * number). */
static pd_status check_gaussian(const char *op, double mean, double std) {
  if (!(std >= 0) || isinf(std) || !isfinite(mean))
    return pd_set_error(PD_ERR_INVALID,
                        "%s: std must be finite and >= 0 and mean finite, got mean %g, std %g", op, mean,
                        std);
  return PD_OK;
}

static pd_status gaussian_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                               pd_meta *out, int *n_out) {
  pd_status st = check_gaussian(def->name, a->f[0], a->f[1]);
  return st != PD_OK ? st : float_shape_meta(def, in, n_in, a, out, n_out);
}

PD_OPDEF(gaussian, .n_in = 0, .n_out = 1, .flags = PD_OPF_RANDOM,
         .attr_names = "v0:shape,f0:mean,f1:std,i0:seed,dtype", .infer_meta = gaussian_meta,
         .kernel = {[PD_PLACE_CPU] = gaussian_kernel});

static pd_tensor *gaussian_impl(const char *op, int ndim, const int64_t *shape, pd_dtype dt, double mean,
                                double std) {
  if (!shape_ok(op, ndim, shape) || check_gaussian(op, mean, std) != PD_OK) return NULL;
  pd_attrs a = {.f = {mean, std}, .dtype = dt == PD_NUM_DTYPES ? pd_get_default_dtype() : dt, .nv = {ndim}};
  if (ndim) memcpy(a.v[0], shape, sizeof(int64_t) * (size_t)ndim);
  return pd_dispatch1(PD_OP_gaussian, NULL, 0, &a);
}

pd_tensor *pd_randn(int ndim, const int64_t *shape, pd_dtype dt) {
  return gaussian_impl("randn", ndim, shape, dt, 0.0, 1.0);
}

pd_tensor *pd_normal(double mean, double std, int ndim, const int64_t *shape) {
  return gaussian_impl("normal", ndim, shape, pd_get_default_dtype(), mean, std);
}

/* ---- truncated_gaussian_random ------------------------------------------- */
/* Solves Phi(x) = p for the standard normal CDF Phi, p in (0, 1]: a
 * rational first guess (Abramowitz & Stegun 26.2.23, |error| < 4.5e-4)
 * polished by Halley steps on Phi computed with erfc, which keeps its
 * relative accuracy deep in the lower tail. */
static double normal_quantile(double p) {
  if (p <= 0) return -INFINITY;
  if (p >= 1) return INFINITY;
  if (p > 0.5) return -normal_quantile(1.0 - p); /* 1 - p is exact for p >= 0.5 */
  double t = sqrt(-2.0 * log(p));
  double x = -(t - (2.515517 + t * (0.802853 + t * 0.010328)) /
                       (1.0 + t * (1.432788 + t * (0.189269 + t * 0.001308))));
  for (int it = 0; it < 3; it++) {
    double phi = exp(-0.5 * x * x) / sqrt(2.0 * M_PI);
    if (!(phi > 0)) break; /* p below the normal doubles: the guess is as good as it gets */
    double u = (0.5 * erfc(-x / M_SQRT2) - p) / phi;
    x -= u / (1.0 + 0.5 * x * u);
  }
  return x;
}

static double normal_cdf(double x) { return 0.5 * erfc(-x / M_SQRT2); }

/* Stores double v as element i of a buffer of any floating dtype. */
static inline void store_f64(void *p, pd_dtype dt, int64_t i, double v) {
  if (dt == PD_FLOAT64)
    ((double *)p)[i] = v;
  else
    store_f32(p, dt, i, (float)v);
}

/* attrs: f0 mean, f1 std, f2 a, f3 b (the cut-offs, values not standard
 * deviations, as paddle.nn.initializer.TruncatedNormal), i0 seed. Element
 * i draws the float64 uniform u_i of `uniform` (counter first + i/2) on
 * [FLT_MIN, 1), takes p between Phi(alpha) and Phi(beta) and gives
 * mean + std * Phi^-1(p) clamped to [a, b]. When both cut-offs lie above
 * the mean the mirrored problem is solved instead (the same distribution;
 * the CDF keeps its precision in the lower tail). std 0 draws nothing:
 * every element is the mean clamped to [a, b]. */
static pd_status truncated_kernel(const pd_kernel_ctx *ctx) {
  pd_tensor *o = ctx->out[0];
  int64_t n = o->numel;
  if (n == 0) return PD_OK;
  pd_dtype dt = o->dtype;
  void *p = pd_tensor_data(o);
  double mean = ctx->attrs->f[0], std = ctx->attrs->f[1], lo = ctx->attrs->f[2], hi = ctx->attrs->f[3];
  if (std == 0) {
    double v = mean < lo ? lo : mean > hi ? hi : mean;
    for (int64_t i = 0; i < n; i++) store_f64(p, dt, i, v);
    return PD_OK;
  }
  double alpha = (lo - mean) / std, beta = (hi - mean) / std, sign = 1;
  if (alpha > 0) {
    double a2 = -beta;
    beta = -alpha;
    alpha = a2;
    sign = -1;
  }
  double ca = normal_cdf(alpha), cb = normal_cdf(beta), ulo = FLT_MIN, urange = 1.0 - FLT_MIN;
  uint64_t key;
  int64_t nb = (n + 1) / 2;
  uint64_t first = reserve((uint64_t)nb, ctx->attrs->i[0], &key);
  PD_FOR_PHILOX_BLOCKS(nb, first, key, RNG_GRAIN / 16, {
    for (int k = 0; k < 2 && 2 * b + k < n; k++) {
      double u = ulo + urange * pd_u64_to_unit_f64(w[2 * k], w[2 * k + 1]);
      double v = mean + sign * std * normal_quantile(ca + (cb - ca) * u);
      store_f64(p, dt, 2 * b + k, v < lo ? lo : v > hi ? hi : v);
    }
  });
  return PD_OK;
}

static pd_status truncated_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                                pd_meta *out, int *n_out) {
  if (!(a->f[2] <= a->f[3]) || !(a->f[1] >= 0) || isinf(a->f[1]) || !isfinite(a->f[0]))
    return pd_set_error(
        PD_ERR_INVALID,
        "%s: needs a finite mean, a finite std >= 0 and a <= b, got mean %g, std %g, a %g, b %g", def->name,
        a->f[0], a->f[1], a->f[2], a->f[3]);
  return float_shape_meta(def, in, n_in, a, out, n_out);
}

PD_OPDEF(truncated_gaussian_random, .n_in = 0, .n_out = 1, .flags = PD_OPF_RANDOM,
         .attr_names = "v0:shape,f0:mean,f1:std,f2:a,f3:b,i0:seed,dtype", .infer_meta = truncated_meta,
         .kernel = {[PD_PLACE_CPU] = truncated_kernel});

/* ---- randint ------------------------------------------------------------- */
static pd_status randint_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                              pd_meta *out, int *n_out) {
  (void)in;
  (void)n_in;
  if (a->dtype != PD_INT32 && a->dtype != PD_INT64)
    return pd_set_error(PD_ERR_DTYPE, "%s: dtype %s is not supported (int32, int64)", def->name,
                        pd_dtype_name(a->dtype));
  int64_t low = a->i[0], high = a->i[1];
  if (low >= high)
    return pd_set_error(PD_ERR_INVALID, "%s: low must be less than high, got low %lld, high %lld", def->name,
                        (long long)low, (long long)high);
  if (a->dtype == PD_INT32 && (low < INT32_MIN || high - 1 > INT32_MAX))
    return pd_set_error(PD_ERR_INVALID, "%s: range [%lld, %lld) does not fit dtype int32", def->name,
                        (long long)low, (long long)high);
  return shape_meta(def, a, out, n_out);
}

static pd_status randint_kernel(const pd_kernel_ctx *ctx) {
  pd_tensor *o = ctx->out[0];
  int64_t n = o->numel;
  if (n == 0) return PD_OK;
  uint64_t key;
  int64_t nb = (n + 1) / 2;
  uint64_t first = pd_rng_reserve((uint64_t)nb, &key);
  uint64_t low = (uint64_t)ctx->attrs->i[0], range = (uint64_t)ctx->attrs->i[1] - (uint64_t)ctx->attrs->i[0];
  bool i64 = o->dtype == PD_INT64;
  void *p = pd_tensor_data(o);
  PD_FOR_PHILOX_BLOCKS(nb, first, key, RNG_GRAIN, {
    for (int k = 0; k < 2 && 2 * b + k < n; k++) {
      /* 64 random bits scaled to [0, range): bias <= range / 2^64 */
      uint64_t bits = (uint64_t)w[2 * k] << 32 | w[2 * k + 1];
      uint64_t r = (uint64_t)(((unsigned __int128)bits * range) >> 64);
      int64_t v = (int64_t)(low + r);
      if (i64)
        ((int64_t *)p)[2 * b + k] = v;
      else
        ((int32_t *)p)[2 * b + k] = (int32_t)v;
    }
  });
  return PD_OK;
}

PD_OPDEF(randint, .n_in = 0, .n_out = 1, .flags = PD_OPF_RANDOM,
         .attr_names = "v0:shape,i0:low,i1:high,dtype", .infer_meta = randint_meta,
         .kernel = {[PD_PLACE_CPU] = randint_kernel});

pd_tensor *pd_randint(int64_t low, int64_t high, int ndim, const int64_t *shape, pd_dtype dt) {
  if (!shape_ok("randint", ndim, shape)) return NULL;
  pd_attrs a = {.i = {low, high}, .dtype = dt == PD_NUM_DTYPES ? PD_INT64 : dt, .nv = {ndim}};
  if (ndim) memcpy(a.v[0], shape, sizeof(int64_t) * (size_t)ndim);
  return pd_dispatch1(PD_OP_randint, NULL, 0, &a);
}
