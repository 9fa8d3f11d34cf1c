/* The local steps of the random ops on shards: each element is drawn at
 * its global index, so a sharded result is the unsharded one's slice for
 * the same seed. The elementwise ops (alpha_dropout, rrelu, bernoulli) map
 * element i of the whole tensor (row-major) to a fixed Philox counter and
 * word (their kernels' comments give the map); every rank reserves the
 * whole tensor's counters, so the generators stay together, and fills its
 * shard from its elements' global indices. dropout's and multinomial's
 * steps are one op each (spmd_local.c). They run with the DTensor hook
 * off. */
#include <stdlib.h>

#include "../../core/core_internal.h"
#include "../../ops/nn/dropout.h"
#include "ap_internal.h"
#include "paddlec/creation.h"
#include "paddlec/manipulation.h"
#include "paddlec/math.h"

/* The global row-major index of each element of input i's shard, in the
 * shard's row-major order (malloc'ed, at least one entry); *total the
 * whole tensor's elements. */
static int64_t *global_indices(const pd_spmd_local *c, int i, int64_t *total) {
  const pd_meta *gm = &c->in_meta[i];
  const pd_tensor *x = c->in[i];
  int nd = gm->ndim;
  int64_t n = 1, start[PD_MAX_DIMS], gstride[PD_MAX_DIMS];
  for (int d = nd - 1; d >= 0; d--) {
    gstride[d] = n;
    n *= gm->shape[d];
    start[d] = pd_ap_local_start(c, c->in_dist[i].dims_mapping[d], gm->shape[d]);
  }
  *total = n;
  int64_t *gi = malloc(sizeof(int64_t) * (size_t)(x->numel ? x->numel : 1));
  if (!gi) {
    pd_set_error(PD_ERR_MEMORY, "%s: out of memory for %lld indices", pd_op_table[c->id]->name,
                 (long long)x->numel);
    return NULL;
  }
  int64_t idx[PD_MAX_DIMS] = {0};
  for (int64_t e = 0; e < x->numel; e++) {
    int64_t g = 0;
    for (int d = 0; d < nd; d++) g += (start[d] + idx[d]) * gstride[d];
    gi[e] = g;
    for (int d = nd - 1; d >= 0; d--) { /* the next local index, row-major */
      if (++idx[d] < x->shape[d]) break;
      idx[d] = 0;
    }
  }
  return gi;
}

/* The first counter of the whole tensor's blocks, and the key: a nonzero
 * seed attribute is a private stream from counter 0 (as the kernels). */
static uint64_t reserve(int64_t blocks, int64_t seed, uint64_t *key) {
  if (seed != 0) {
    *key = (uint64_t)seed;
    return 0;
  }
  return blocks > 0 ? pd_rng_reserve((uint64_t)blocks, key) : 0;
}

/* Word gi % 4 of counter first + gi / 4 as a float32 uniform (the map of
 * dropout, alpha_dropout, rrelu and float32 bernoulli). */
static float unit_f32_at(uint64_t first, uint64_t key, int64_t gi) {
  uint32_t w[4];
  pd_philox(first + (uint64_t)(gi / 4), key, w);
  return pd_u32_to_unit_f32(w[gi % 4]);
}

/* The float32 uniform of each element of x's shard under that map, the
 * whole tensor's counters reserved (i1: the seed attribute). malloc'ed. */
static float *shard_uniforms(const pd_spmd_local *c) {
  int64_t total;
  int64_t *gi = global_indices(c, 0, &total);
  if (!gi) return NULL;
  uint64_t key, first = reserve((total + 3) / 4, c->attrs->i[1], &key);
  int64_t n = c->in[0]->numel;
  float *u = malloc(sizeof(float) * (size_t)(n ? n : 1));
  if (u)
    for (int64_t e = 0; e < n; e++) u[e] = unit_f32_at(first, key, gi[e]);
  else
    pd_set_error(PD_ERR_MEMORY, "%s: out of memory", pd_op_table[c->id]->name);
  free(gi);
  return u;
}

/* fill writes a random op's two outputs (contiguous, x's dtype) from
 * contiguous x and each element's uniform. */
typedef void (*fill2_fn)(const pd_spmd_local *c, const pd_tensor *x, const float *u, pd_tensor *o0,
                         pd_tensor *o1);

static pd_status two_outputs_drawn(const pd_spmd_local *c, pd_tensor **out, fill2_fn fill) {
  float *u = shard_uniforms(c);
  if (!u) return pd_last_status();
  pd_tensor *x = c->in[0], *xc = x->is_contiguous ? pd_tensor_retain(x) : pd_contiguous(x);
  pd_tensor *o0 = xc ? pd_zeros(xc->ndim, xc->shape, xc->dtype) : NULL;
  pd_tensor *o1 = o0 ? pd_zeros(xc->ndim, xc->shape, xc->dtype) : NULL;
  pd_status st = o1 ? PD_OK : pd_last_status();
  if (st == PD_OK) fill(c, xc, u, o0, o1);
  free(u);
  pd_tensor_release(xc);
  if (st != PD_OK) {
    pd_tensor_release(o0);
    return st;
  }
  out[0] = o0;
  out[1] = o1;
  return PD_OK;
}

/* ---- alpha_dropout ------------------------------------------------------ */

#define ALPHA_FILL(T)                                   \
  do {                                                  \
    const T *xp = pd_tensor_data(x);                    \
    T *yp = pd_tensor_data(y), *mp = pd_tensor_data(m); \
    T a = (T)A, b = (T)B, d = (T)D;                     \
    for (int64_t e = 0; e < x->numel; e++) {            \
      bool keep = u[e] >= pf;                           \
      mp[e] = keep ? a : (T)0;                          \
      yp[e] = keep ? a * xp[e] + b : d;                 \
    }                                                   \
  } while (0)

/* A kept element (uniform >= p) is a x + b, a dropped one d; the mask
 * output holds a or 0 (nn/dropout.c). */
static void alpha_dropout_fill(const pd_spmd_local *c, const pd_tensor *x, const float *u, pd_tensor *y,
                               pd_tensor *m) {
  double A, B, D;
  pd_alpha_dropout_coeffs(c->attrs->f[0], &A, &B, &D);
  float pf = (float)c->attrs->f[0];
  if (x->dtype == PD_FLOAT32)
    ALPHA_FILL(float);
  else
    ALPHA_FILL(double);
}
#undef ALPHA_FILL

static pd_status alpha_dropout_shard(const pd_spmd_local *c, pd_tensor **out) {
  return two_outputs_drawn(c, out, alpha_dropout_fill);
}
pd_status pd_ap_local_alpha_dropout(const pd_spmd_local *c, pd_tensor **out, int *n_out) {
  return pd_ap_local_computed(c, alpha_dropout_shard, out, n_out);
}

/* ---- rrelu (training) --------------------------------------------------- */

#define RRELU_FILL(T)                                        \
  do {                                                       \
    const T *xp = pd_tensor_data(x);                         \
    T *yp = pd_tensor_data(y), *np = pd_tensor_data(noise);  \
    for (int64_t e = 0; e < x->numel; e++) {                 \
      T v = xp[e];                                           \
      T s = v < (T)0 ? (T)(lo + span * (double)u[e]) : (T)1; \
      np[e] = s;                                             \
      yp[e] = v * s;                                         \
    }                                                        \
  } while (0)

/* A negative element gets the slope lower + (upper - lower) u, the others
 * 1 (activation/rrelu.c); the noise output holds the slopes. */
static void rrelu_fill(const pd_spmd_local *c, const pd_tensor *x, const float *u, pd_tensor *y,
                       pd_tensor *noise) {
  double lo = c->attrs->f[0], span = c->attrs->f[1] - c->attrs->f[0];
  if (x->dtype == PD_FLOAT32)
    RRELU_FILL(float);
  else
    RRELU_FILL(double);
}
#undef RRELU_FILL

static pd_status rrelu_shard(const pd_spmd_local *c, pd_tensor **out) {
  return two_outputs_drawn(c, out, rrelu_fill);
}
pd_status pd_ap_local_rrelu(const pd_spmd_local *c, pd_tensor **out, int *n_out) {
  return pd_ap_local_computed(c, rrelu_shard, out, n_out);
}

/* ---- bernoulli ---------------------------------------------------------- */

/* Element i is 1 when its uniform is below x[i]: float32 the word map
 * above, float64 a 53-bit uniform from words 2(i%2), 2(i%2)+1 of counter
 * first + i/2 (creation/random_sample.c). The probabilities are checked
 * as the kernel does. */
static pd_status bernoulli_shard(const pd_spmd_local *c, pd_tensor **out) {
  const char *op = pd_op_table[c->id]->name;
  bool f64 = c->in[0]->dtype == PD_FLOAT64;
  int64_t total;
  int64_t *gi = global_indices(c, 0, &total);
  if (!gi) return pd_last_status();
  uint64_t key, first = reserve(f64 ? (total + 1) / 2 : (total + 3) / 4, 0, &key);
  pd_tensor *p = pd_cast(c->in[0], PD_FLOAT64), *pc = p ? pd_contiguous(p) : NULL;
  pd_tensor *q = pc ? pd_zeros(pc->ndim, pc->shape, PD_FLOAT64) : NULL, *res = NULL;
  pd_status st = q ? PD_OK : pd_last_status();
  for (int64_t e = 0; q && e < pc->numel && st == PD_OK; e++) {
    double pv = ((const double *)pd_tensor_data(pc))[e], u;
    if (!(pv >= 0 && pv <= 1)) {
      st = pd_set_error(PD_ERR_INVALID, "%s: x[%lld] = %g is not a probability in [0, 1]", op,
                        (long long)gi[e], pv);
      break;
    }
    if (f64) {
      uint32_t w[4];
      pd_philox(first + (uint64_t)(gi[e] / 2), key, w);
      int k = (int)(gi[e] % 2) * 2;
      u = pd_u64_to_unit_f64(w[k], w[k + 1]);
    } else {
      u = unit_f32_at(first, key, gi[e]);
    }
    ((double *)pd_tensor_data(q))[e] = u < (f64 ? pv : (double)(float)pv) ? 1.0 : 0.0;
  }
  if (st == PD_OK) res = pd_cast(q, c->in[0]->dtype);
  if (!res && st == PD_OK) st = pd_last_status();
  free(gi);
  pd_tensor_release(p);
  pd_tensor_release(pc);
  pd_tensor_release(q);
  if (!res) return st;
  out[0] = res;
  return PD_OK;
}

pd_status pd_ap_local_bernoulli(const pd_spmd_local *c, pd_tensor **out, int *n_out) {
  return pd_ap_local_computed(c, bernoulli_shard, out, n_out);
}
