/* Sampling from given probabilities (bernoulli, multinomial) and random
 * permutations (randperm), from the global Philox generator with a fixed map
 * from element index to counter, so results do not depend on the number of
 * threads:
 *   bernoulli float32  element i: counter first + i/4, word i%4
 *   bernoulli float64  element i: counter first + i/2, words 2(i%2), 2(i%2)+1
 *   multinomial        draw e (row-major over [rows, num_samples] with
 *                      replacement, over [rows, categories] without): 53-bit
 *                      uniform from counter first + e/2, words 2(e%2), 2(e%2)+1
 *   randperm           Fisher-Yates; the swap at position i takes 64 bits from
 *                      counter first + i/2, words 2(i%2), 2(i%2)+1 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/shape_check.h"
#include "../../kernels/cpu/parallel.h"
#include "creation_util.h"
#include "../op_registry.h"
#include "paddlec/ops.h"

#define RNG_GRAIN 4096

static inline double unit_f64_at(uint64_t first, uint64_t key, int64_t e) {
  uint32_t w[4];
  pd_philox(first + (uint64_t)e / 2, key, w);
  int k = (int)(e % 2) * 2;
  return pd_u64_to_unit_f64(w[k], w[k + 1]);
}

/* ---- bernoulli ------------------------------------------------------------ */
static pd_status bernoulli_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                                pd_meta *out, int *n_out) {
  (void)n_in;
  (void)a;
  if (in[0]->dtype != PD_FLOAT32 && in[0]->dtype != PD_FLOAT64)
    return pd_set_error(PD_ERR_DTYPE, "%s: x has dtype %s; expected float16, bfloat16, float32 or float64",
                        def->name, pd_dtype_name(in[0]->dtype));
  pd_meta_of(in[0], out);
  *n_out = 1;
  return PD_OK;
}

/* Finds the first element outside [0, 1] (or NaN); -1 when all are fine. */
#define FIRST_BAD(T, q, n, bad)                    \
  do {                                             \
    for (int64_t i_ = 0; i_ < (n); i_++)           \
      if (!((q)[i_] >= (T)0 && (q)[i_] <= (T)1)) { \
        (bad) = i_;                                \
        break;                                     \
      }                                            \
  } while (0)

static pd_status bernoulli_kernel(const pd_kernel_ctx *ctx) {
  pd_tensor *o = ctx->out[0];
  int64_t n = o->numel;
  if (n == 0) return PD_OK;
  pd_tensor *x = pd_kernel_contiguous(ctx->in[0]);
  if (!x) return pd_last_status();
  int64_t bad = -1;
  uint64_t key;
  if (o->dtype == PD_FLOAT64) {
    const double *px = pd_tensor_data(x);
    FIRST_BAD(double, px, n, bad);
    if (bad >= 0) {
      double v = px[bad];
      pd_tensor_release(x);
      return pd_set_error(PD_ERR_INVALID, "%s: x[%lld] = %g is not a probability in [0, 1]", ctx->def->name,
                          (long long)bad, v);
    }
    int64_t nb = (n + 1) / 2;
    uint64_t first = pd_rng_reserve((uint64_t)nb, &key);
    double *q = pd_tensor_data(o);
    PD_FOR_PHILOX_BLOCKS(nb, first, key, RNG_GRAIN, {
      int64_t i = 2 * b;
      q[i] = pd_u64_to_unit_f64(w[0], w[1]) < px[i] ? 1.0 : 0.0;
      if (i + 1 < n) q[i + 1] = pd_u64_to_unit_f64(w[2], w[3]) < px[i + 1] ? 1.0 : 0.0;
    });
  } else {
    const float *px = pd_tensor_data(x);
    FIRST_BAD(float, px, n, bad);
    if (bad >= 0) {
      double v = px[bad];
      pd_tensor_release(x);
      return pd_set_error(PD_ERR_INVALID, "%s: x[%lld] = %g is not a probability in [0, 1]", ctx->def->name,
                          (long long)bad, v);
    }
    int64_t nb = (n + 3) / 4;
    uint64_t first = pd_rng_reserve((uint64_t)nb, &key);
    float *q = pd_tensor_data(o);
    PD_FOR_PHILOX_BLOCKS(nb, first, key, RNG_GRAIN, {
      int64_t i0 = 4 * b, m = n - i0 < 4 ? n - i0 : 4;
      for (int k = 0; k < m; k++) q[i0 + k] = pd_u32_to_unit_f32(w[k]) < px[i0 + k] ? 1.0f : 0.0f;
    });
  }
  pd_tensor_release(x);
  return PD_OK;
}

PD_OPDEF(bernoulli, .attr_names = "", .n_in = 1, .n_out = 1, .flags = PD_OPF_RANDOM | PD_OPF_HALF_VIA_F32,
         .infer_meta = bernoulli_meta, .kernel = {[PD_PLACE_CPU] = bernoulli_kernel});

pd_tensor *pd_bernoulli(pd_tensor *x) { return pd_dispatch1(PD_OP_bernoulli, &x, 1, NULL); }

/* ---- multinomial ---------------------------------------------------------- */
static pd_status multinomial_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                                  pd_meta *out, int *n_out) {
  (void)n_in;
  const pd_tensor *x = in[0];
  if (x->dtype != PD_FLOAT32 && x->dtype != PD_FLOAT64)
    return pd_set_error(PD_ERR_DTYPE, "%s: x has dtype %s; expected float16, bfloat16, float32 or float64",
                        def->name, pd_dtype_name(x->dtype));
  if (x->ndim < 1 || x->ndim > 2)
    return pd_set_error(PD_ERR_SHAPE, "%s: x must be 1-D or 2-D probabilities, got shape %s", def->name,
                        PD_SHAPE_STR(x));
  int64_t cats = x->shape[x->ndim - 1], s = a->i[0];
  if (s <= 0)
    return pd_set_error(PD_ERR_INVALID, "%s: num_samples must be > 0, got num_samples %lld", def->name,
                        (long long)s);
  if (cats == 0)
    return pd_set_error(PD_ERR_SHAPE, "%s: x of shape %s has no categories", def->name, PD_SHAPE_STR(x));
  int64_t rows = x->ndim == 2 ? x->shape[0] : 1;
  int64_t draws; /* the whole tensor's rows draw num_samples (or read all categories) each */
  if (a->i[2] < 0 || a->i[3] < 0 || (a->i[3] == 0 ? a->i[2] != 0 : a->i[2] > a->i[3] - rows) ||
      pd_mul_overflow(a->i[3] ? a->i[3] : rows, s > cats ? s : cats, &draws))
    return pd_set_error(PD_ERR_INVALID, "%s: rows %lld.. of %lld do not hold the %lld rows of x (shape %s)",
                        def->name, (long long)a->i[2], (long long)a->i[3], (long long)rows, PD_SHAPE_STR(x));
  if (!a->i[1] && s > cats)
    return pd_set_error(PD_ERR_INVALID,
                        "%s: num_samples %lld is larger than the %lld categories of x "
                        "(shape %s) when replacement is False",
                        def->name, (long long)s, (long long)cats, PD_SHAPE_STR(x));
  out->dtype = PD_INT64;
  out->ndim = x->ndim;
  if (x->ndim == 2) out->shape[0] = x->shape[0];
  out->shape[x->ndim - 1] = s;
  *n_out = 1;
  return PD_OK;
}

typedef struct key_idx {
  double key;
  int64_t idx;
} key_idx;

static int key_cmp(const void *pa, const void *pb) {
  const key_idx *a = pa, *b = pb;
  if (a->key < b->key) return -1;
  if (a->key > b->key) return 1;
  return a->idx < b->idx ? -1 : a->idx > b->idx;
}

/* Checks one row of probabilities, writing the cumulative sums (cum may be
 * NULL) and counting the non-zero categories. */
static pd_status check_row(const char *op, const double *p, int64_t cats, int64_t row, double *cum,
                           int64_t *nonzero) {
  double total = 0.0;
  int64_t nz = 0;
  for (int64_t j = 0; j < cats; j++) {
    double v = p[j];
    if (!(v >= 0.0) || isinf(v))
      return pd_set_error(PD_ERR_INVALID, "%s: probability x[%lld][%lld] = %g must be finite and >= 0", op,
                          (long long)row, (long long)j, v);
    total += v;
    nz += v > 0.0;
    if (cum) cum[j] = total;
  }
  if (!(total > 0.0) || isinf(total))
    return pd_set_error(PD_ERR_INVALID,
                        "%s: the probabilities of row %lld sum to %g; the sum must be > 0 "
                        "and finite",
                        op, (long long)row, total);
  *nonzero = nz;
  return PD_OK;
}

static pd_status multinomial_kernel(const pd_kernel_ctx *ctx) {
  pd_tensor *x = ctx->in[0];
  int64_t cats = x->shape[x->ndim - 1], rows = x->ndim == 2 ? x->shape[0] : 1, s = ctx->attrs->i[0];
  bool replacement = ctx->attrs->i[1] != 0;
  /* a shard of the rows (auto_parallel): its first row's global index and
   * the whole tensor's rows, so each row draws what it draws unsharded */
  int64_t row0 = ctx->attrs->i[2], all_rows = ctx->attrs->i[3] ? ctx->attrs->i[3] : rows;
  if (all_rows == 0) return PD_OK;
  /* probabilities as contiguous float64 */
  pd_attrs ca = {.dtype = PD_FLOAT64};
  pd_tensor *p64 =
      x->dtype == PD_FLOAT64 && x->is_contiguous ? pd_tensor_retain(x) : pd_dispatch1(PD_OP_cast, &x, 1, &ca);
  if (!p64) return pd_last_status();
  const double *p = pd_tensor_data(p64);
  int64_t *q = pd_tensor_data(ctx->out[0]);
  size_t work = (size_t)(replacement ? cats : 0) * sizeof(double);
  double *cum = work ? malloc(work * (size_t)(rows ? rows : 1)) : NULL;
  pd_status st = PD_OK;
  if (work && !cum) {
    st = pd_set_error(PD_ERR_MEMORY, "%s: out of memory for %lld x %lld cumulative sums", ctx->def->name,
                      (long long)rows, (long long)cats);
    goto done;
  }
  for (int64_t r = 0; r < rows && st == PD_OK; r++) {
    int64_t nz = 0;
    st = check_row(ctx->def->name, p + r * cats, cats, r, cum ? cum + r * cats : NULL, &nz);
    if (st == PD_OK && !replacement && s > nz)
      st = pd_set_error(PD_ERR_INVALID,
                        "%s: num_samples %lld is larger than the %lld categories with non-zero "
                        "probability in row %lld when replacement is False",
                        ctx->def->name, (long long)s, (long long)nz, (long long)r);
  }
  if (st != PD_OK) goto done;
  uint64_t key;
  if (replacement) {
    /* inverse CDF: the first category whose cumulative sum exceeds u * total */
    int64_t nd = rows * s, e0 = row0 * s;
    uint64_t first = pd_rng_reserve((uint64_t)(all_rows * s + 1) / 2, &key);
    PD_PARALLEL_FOR_IF(
        nd > RNG_GRAIN, e, nd, int64_t r = e / s; const double *c = cum + r * cats;
        double t = unit_f64_at(first, key, e0 + e) * c[cats - 1]; int64_t lo = 0, hi = cats - 1;
        while (lo < hi) {
          int64_t mid = lo + (hi - lo) / 2;
          if (c[mid] > t)
            hi = mid;
          else
            lo = mid + 1;
        } while (lo > 0 && c[lo] == c[lo - 1]) lo--; /* never a zero-probability category */
        q[e] = lo;);
  } else {
    /* exponential race: category j gets key E_j / p_j with E_j ~ Exp(1); the
     * num_samples smallest keys in order are a draw without replacement */
    uint64_t first = pd_rng_reserve((uint64_t)(all_rows * cats + 1) / 2, &key);
    int fail = 0;
#pragma omp parallel if (rows * cats > RNG_GRAIN && rows > 1 && pd_parallel_loops_on())
    {
      key_idx *ki = malloc(sizeof(key_idx) * (size_t)cats);
      if (!ki) {
#pragma omp atomic write
        fail = 1;
      }
#pragma omp for
      for (int64_t r = 0; r < rows; r++) {
        if (!ki) continue;
        for (int64_t j = 0; j < cats; j++) {
          double pj = p[r * cats + j];
          double u = unit_f64_at(first, key, (row0 + r) * cats + j);
          ki[j].key = pj > 0.0 ? -log1p(-u) / pj : INFINITY;
          ki[j].idx = j;
        }
        qsort(ki, (size_t)cats, sizeof *ki, key_cmp);
        for (int64_t k = 0; k < s; k++) q[r * s + k] = ki[k].idx;
      }
      free(ki);
    }
    if (fail)
      st = pd_set_error(PD_ERR_MEMORY, "%s: out of memory sorting %lld categories", ctx->def->name,
                        (long long)cats);
  }
done:
  free(cum);
  pd_tensor_release(p64);
  return st;
}

PD_OPDEF(multinomial, .n_in = 1, .n_out = 1, .flags = PD_OPF_RANDOM | PD_OPF_HALF_VIA_F32, .nondiff_out = 1u,
         .attr_names = "i0:num_samples,i1:replacement,i2:shard_row,i3:shard_rows",
         .infer_meta = multinomial_meta, .kernel = {[PD_PLACE_CPU] = multinomial_kernel});

pd_tensor *pd_multinomial(pd_tensor *x, int64_t num_samples, bool replacement) {
  pd_attrs a = {.i = {num_samples, replacement}};
  return pd_dispatch1(PD_OP_multinomial, &x, 1, &a);
}

/* ---- randperm ------------------------------------------------------------- */
static pd_status randperm_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                               pd_meta *out, int *n_out) {
  (void)in;
  (void)n_in;
  pd_dtype dt = a->dtype;
  if (dt != PD_INT32 && dt != PD_INT64 && dt != PD_FLOAT32 && dt != PD_FLOAT64)
    return pd_set_error(PD_ERR_DTYPE, "%s: dtype %s is not supported (int32, int64, float32, float64)",
                        def->name, pd_dtype_name(dt));
  if (a->i[0] < 0)
    return pd_set_error(PD_ERR_INVALID, "%s: n must be >= 0, got n %lld", def->name, (long long)a->i[0]);
  if (dt == PD_INT32 && a->i[0] - 1 > INT32_MAX)
    return pd_set_error(PD_ERR_INVALID, "%s: n %lld does not fit dtype int32", def->name, (long long)a->i[0]);
  out->dtype = dt;
  out->ndim = 1;
  out->shape[0] = a->i[0];
  *n_out = 1;
  return PD_OK;
}

static pd_status randperm_kernel(const pd_kernel_ctx *ctx) {
  pd_tensor *o = ctx->out[0];
  int64_t n = o->numel;
  if (n == 0) return PD_OK;
  pd_dtype dt = o->dtype;
  int64_t *perm = dt == PD_INT64 ? pd_tensor_data(o) : malloc(sizeof(int64_t) * (size_t)n);
  if (!perm)
    return pd_set_error(PD_ERR_MEMORY, "%s: out of memory for %lld indices", ctx->def->name, (long long)n);
  for (int64_t i = 0; i < n; i++) perm[i] = i;
  uint64_t key;
  uint64_t first = pd_rng_reserve((uint64_t)(n + 1) / 2, &key);
  uint32_t w[4];
  int64_t cached = -1;
  for (int64_t i = n - 1; i > 0; i--) {
    if (i / 2 != cached) {
      cached = i / 2;
      pd_philox(first + (uint64_t)cached, key, w);
    }
    int k = (int)(i % 2) * 2;
    uint64_t r = (uint64_t)w[k] << 32 | w[k + 1];
    int64_t j = (int64_t)(r % (uint64_t)(i + 1));
    int64_t t = perm[i];
    perm[i] = perm[j];
    perm[j] = t;
  }
  if (dt != PD_INT64) {
    void *p = pd_tensor_data(o);
    for (int64_t i = 0; i < n; i++) {
      if (dt == PD_INT32)
        ((int32_t *)p)[i] = (int32_t)perm[i];
      else if (dt == PD_FLOAT32)
        ((float *)p)[i] = (float)perm[i];
      else
        ((double *)p)[i] = (double)perm[i];
    }
    free(perm);
  }
  return PD_OK;
}

PD_OPDEF(randperm, .n_in = 0, .n_out = 1, .flags = PD_OPF_RANDOM, .attr_names = "i0:n,dtype",
         .infer_meta = randperm_meta, .kernel = {[PD_PLACE_CPU] = randperm_kernel});

pd_tensor *pd_randperm(int64_t n, pd_dtype dt) {
  pd_attrs a = {.i = {n}, .dtype = dt == PD_NUM_DTYPES ? PD_INT64 : dt};
  return pd_dispatch1(PD_OP_randperm, NULL, 0, &a);
}
