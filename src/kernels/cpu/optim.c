/* Fused optimizer update rules (see optim.h). Each rule is written once as a
 * macro and instantiated for float and double; the loops are unit stride
 * with branch-free selects so they vectorise. */
#include "optim.h"

#include <math.h>
#include <string.h>

#include "parallel.h"
#include "vmath.h"

/* Elements per task: float/double params run in place, half params are
 * staged through float32 blocks on the stack. */
#define BLOCK 8192
#define HBLOCK 1024

/* ---- the gradient transform ---------------------------------------------- */
PD_VINLINE float gt_f32(float g, float p, float gs, float lo, float hi, float l1, float l2) {
  float v = g * gs;
  v = pd_self(v < lo, lo, v);
  v = pd_self(v > hi, hi, v);
  float sg = pd_self(p > 0.0f, 1.0f, 0.0f) - pd_self(p < 0.0f, 1.0f, 0.0f);
  return v + l2 * p + l1 * sg;
}
PD_VINLINE double gt_f64(double g, double p, double gs, double lo, double hi, double l1, double l2) {
  double v = g * gs;
  v = pd_seld(v < lo, lo, v);
  v = pd_seld(v > hi, hi, v);
  double sg = pd_seld(p > 0.0, 1.0, 0.0) - pd_seld(p < 0.0, 1.0, 0.0);
  return v + l2 * p + l1 * sg;
}

/* The identity transform, for the common call without clipping or decay. */
PD_VINLINE float gt_f32_plain(float g, float p, float gs, float lo, float hi, float l1, float l2) {
  (void)p, (void)gs, (void)lo, (void)hi, (void)l1, (void)l2;
  return g;
}
PD_VINLINE double gt_f64_plain(double g, double p, double gs, double lo, double hi, double l1, double l2) {
  (void)p, (void)gs, (void)lo, (void)hi, (void)l1, (void)l2;
  return g;
}

#define GT_LOAD(T) const T gs = (T)a->gscale, lo = (T)a->lo, hi = (T)a->hi, l1 = (T)a->l1, l2 = (T)a->l2
#define GT(fn, gv, pv) fn((gv), (pv), gs, lo, hi, l1, l2)

/* ---- rules ----------------------------------------------------------------- */
/* Each rule's loop is an always-inline body run by PD_KCLONES in the CPU
 * variant in use (kvariant.h). */
#define CORE_PARAMS(T) const pd_optim_args *a, int64_t n, T *restrict p, const T *restrict g, T *const *acc
#define GEN_SGD(SFX, T, GTF, SQRT, SEL)                                             \
  PD_VINLINE void sgd_##SFX##_body(CORE_PARAMS(T)) {                                \
    (void)acc;                                                                      \
    GT_LOAD(T);                                                                     \
    const T lr = (T)a->lr;                                                          \
    PD_SIMD for (int64_t i = 0; i < n; i++) p[i] = p[i] - lr * GT(GTF, g[i], p[i]); \
  }                                                                                 \
  PD_KCLONES(sgd_##SFX, (CORE_PARAMS(T)), (a, n, p, g, acc))

/* velocity = mu v + g; p -= lr v, or with Nesterov p -= lr (g + mu v). */
#define GEN_MOMENTUM(SFX, T, GTF, SQRT, SEL)              \
  PD_VINLINE void momentum_##SFX##_body(CORE_PARAMS(T)) { \
    GT_LOAD(T);                                           \
    T *restrict v = acc[0];                               \
    const T lr = (T)a->lr, mu = (T)a->s[0];               \
    if (a->flag) {                                        \
      PD_SIMD for (int64_t i = 0; i < n; i++) {           \
        T gv = GT(GTF, g[i], p[i]);                       \
        T vv = v[i] * mu + gv;                            \
        v[i] = vv;                                        \
        p[i] = p[i] - (gv + vv * mu) * lr;                \
      }                                                   \
    } else {                                              \
      PD_SIMD for (int64_t i = 0; i < n; i++) {           \
        T vv = v[i] * mu + GT(GTF, g[i], p[i]);           \
        v[i] = vv;                                        \
        p[i] = p[i] - lr * vv;                            \
      }                                                   \
    }                                                     \
  }                                                       \
  PD_KCLONES(momentum_##SFX, (CORE_PARAMS(T)), (a, n, p, g, acc))

/* Adam with the bias corrections folded into lr_t and eps_t (as Paddle):
 * p = p * decay - lr_t m / (sqrt(v) + eps_t); decay = 1 - lr coeff for AdamW. */
#define GEN_ADAM(SFX, T, GTF, SQRT, SEL)                                                             \
  PD_VINLINE void adam_##SFX##_body(CORE_PARAMS(T)) {                                                \
    GT_LOAD(T);                                                                                      \
    T *restrict m = acc[0];                                                                          \
    T *restrict v = acc[1];                                                                          \
    const T b1 = (T)a->s[0], b2 = (T)a->s[1], lrt = (T)a->s[2], epst = (T)a->s[3], dec = (T)a->s[4]; \
    const T c1 = (T)1 - b1, c2 = (T)1 - b2;                                                          \
    PD_SIMD for (int64_t i = 0; i < n; i++) {                                                        \
      T pv = p[i];                                                                                   \
      T gv = GT(GTF, g[i], pv);                                                                      \
      T mv = b1 * m[i] + c1 * gv;                                                                    \
      T vv = b2 * v[i] + c2 * gv * gv;                                                               \
      m[i] = mv;                                                                                     \
      v[i] = vv;                                                                                     \
      p[i] = pv * dec - lrt * (mv / (SQRT(vv) + epst));                                              \
    }                                                                                                \
  }                                                                                                  \
  PD_KCLONES(adam_##SFX, (CORE_PARAMS(T)), (a, n, p, g, acc))

/* Adamax: u = max(|g|, beta2 u + eps); p -= lr/(1-b1^t) m / u. */
#define GEN_ADAMAX(SFX, T, GTF, SQRT, SEL)                                        \
  PD_VINLINE void adamax_##SFX##_body(CORE_PARAMS(T)) {                           \
    GT_LOAD(T);                                                                   \
    T *restrict m = acc[0];                                                       \
    T *restrict u = acc[1];                                                       \
    const T b1 = (T)a->s[0], b2 = (T)a->s[1], eps = (T)a->s[2], lrt = (T)a->s[3]; \
    const T c1 = (T)1 - b1;                                                       \
    PD_SIMD for (int64_t i = 0; i < n; i++) {                                     \
      T gv = GT(GTF, g[i], p[i]);                                                 \
      T mv = b1 * m[i] + c1 * gv;                                                 \
      T t = b2 * u[i] + eps;                                                      \
      T ag = SEL(gv < (T)0, -gv, gv);                                             \
      T uv = SEL(ag > t, ag, t);                                                  \
      m[i] = mv;                                                                  \
      u[i] = uv;                                                                  \
      p[i] = p[i] - lrt * (mv / uv);                                              \
    }                                                                             \
  }                                                                               \
  PD_KCLONES(adamax_##SFX, (CORE_PARAMS(T)), (a, n, p, g, acc))

/* Adagrad: acc += g^2; p -= lr g / (sqrt(acc) + eps). */
#define GEN_ADAGRAD(SFX, T, GTF, SQRT, SEL)              \
  PD_VINLINE void adagrad_##SFX##_body(CORE_PARAMS(T)) { \
    GT_LOAD(T);                                          \
    T *restrict s = acc[0];                              \
    const T lr = (T)a->lr, eps = (T)a->s[0];             \
    PD_SIMD for (int64_t i = 0; i < n; i++) {            \
      T gv = GT(GTF, g[i], p[i]);                        \
      T sv = s[i] + gv * gv;                             \
      s[i] = sv;                                         \
      p[i] = p[i] - lr * gv / (SQRT(sv) + eps);          \
    }                                                    \
  }                                                      \
  PD_KCLONES(adagrad_##SFX, (CORE_PARAMS(T)), (a, n, p, g, acc))

/* Adadelta: E[g^2] = rho E[g^2] + (1-rho) g^2;
 * u = -sqrt(E[u^2] + eps) / sqrt(E[g^2] + eps) g; p += lr u; E[u^2] = rho E[u^2] + (1-rho) u^2. */
#define GEN_ADADELTA(SFX, T, GTF, SQRT, SEL)                                   \
  PD_VINLINE void adadelta_##SFX##_body(CORE_PARAMS(T)) {                      \
    GT_LOAD(T);                                                                \
    T *restrict sg = acc[0];                                                   \
    T *restrict su = acc[1];                                                   \
    const T lr = (T)a->lr, rho = (T)a->s[0], eps = (T)a->s[1], c = (T)1 - rho; \
    PD_SIMD for (int64_t i = 0; i < n; i++) {                                  \
      T gv = GT(GTF, g[i], p[i]);                                              \
      T sgv = rho * sg[i] + c * gv * gv;                                       \
      T up = -(SQRT(su[i] + eps) / SQRT(sgv + eps) * gv);                      \
      sg[i] = sgv;                                                             \
      su[i] = rho * su[i] + c * up * up;                                       \
      p[i] = p[i] + lr * up;                                                   \
    }                                                                          \
  }                                                                            \
  PD_KCLONES(adadelta_##SFX, (CORE_PARAMS(T)), (a, n, p, g, acc))

/* RMSProp: ms = rho ms + (1-rho) g^2; (centered) mg = rho mg + (1-rho) g;
 * mom = momentum mom + lr g / sqrt(ms [- mg^2] + eps); p -= mom. */
#define GEN_RMSPROP(SFX, T, GTF, SQRT, SEL)                                                     \
  PD_VINLINE void rmsprop_##SFX##_body(CORE_PARAMS(T)) {                                        \
    GT_LOAD(T);                                                                                 \
    T *restrict mom = acc[0];                                                                   \
    T *restrict ms = acc[1];                                                                    \
    T *restrict mg = acc[2];                                                                    \
    const T lr = (T)a->lr, rho = (T)a->s[0], eps = (T)a->s[1], mu = (T)a->s[2], c = (T)1 - rho; \
    if (a->flag) {                                                                              \
      PD_SIMD for (int64_t i = 0; i < n; i++) {                                                 \
        T gv = GT(GTF, g[i], p[i]);                                                             \
        T msv = rho * ms[i] + c * gv * gv;                                                      \
        T mgv = rho * mg[i] + c * gv;                                                           \
        T mv = mu * mom[i] + lr * gv / SQRT(msv - mgv * mgv + eps);                             \
        ms[i] = msv;                                                                            \
        mg[i] = mgv;                                                                            \
        mom[i] = mv;                                                                            \
        p[i] = p[i] - mv;                                                                       \
      }                                                                                         \
    } else {                                                                                    \
      PD_SIMD for (int64_t i = 0; i < n; i++) {                                                 \
        T gv = GT(GTF, g[i], p[i]);                                                             \
        T msv = rho * ms[i] + c * gv * gv;                                                      \
        T mv = mu * mom[i] + lr * gv / SQRT(msv + eps);                                         \
        ms[i] = msv;                                                                            \
        mom[i] = mv;                                                                            \
        p[i] = p[i] - mv;                                                                       \
      }                                                                                         \
    }                                                                                           \
  }                                                                                             \
  PD_KCLONES(rmsprop_##SFX, (CORE_PARAMS(T)), (a, n, p, g, acc))

/* Lamb pass 1: moments, and the squared norms of p and of the update r. */
#define GEN_LAMB(SFX, T, GTF, SQRT, SEL)                                                                  \
  PD_VINLINE void lamb1_##SFX##_body(const pd_optim_args *a, int64_t n, const T *restrict p,              \
                                     const T *restrict g, T *restrict m, T *restrict v, double *sp,       \
                                     double *sr) {                                                        \
    GT_LOAD(T);                                                                                           \
    const T b1 = (T)a->s[0], b2 = (T)a->s[1], eps = (T)a->s[2], wd = (T)a->s[3];                          \
    const T c1 = (T)1 - b1, c2 = (T)1 - b2, bc1 = (T)a->s[4], bc2 = (T)a->s[5];                           \
    double s1 = 0, s2 = 0;                                                                                \
    _Pragma("omp simd reduction(+ : s1, s2)") for (int64_t i = 0; i < n; i++) {                           \
      T pv = p[i];                                                                                        \
      T gv = GT(GTF, g[i], pv);                                                                           \
      T mv = b1 * m[i] + c1 * gv;                                                                         \
      T vv = b2 * v[i] + c2 * gv * gv;                                                                    \
      m[i] = mv;                                                                                          \
      v[i] = vv;                                                                                          \
      T r = (mv / bc1) / (SQRT(vv / bc2) + eps) + wd * pv;                                                \
      s1 += (double)pv * (double)pv;                                                                      \
      s2 += (double)r * (double)r;                                                                        \
    }                                                                                                     \
    *sp += s1;                                                                                            \
    *sr += s2;                                                                                            \
  }                                                                                                       \
  PD_KCLONES(lamb1_##SFX,                                                                                 \
             (const pd_optim_args *a, int64_t n, const T *restrict p, const T *restrict g, T *restrict m, \
              T *restrict v, double *sp, double *sr),                                                     \
             (a, n, p, g, m, v, sp, sr))

/* Lamb pass 2: p -= lr * ratio * r, r recomputed from the new moments. */
#define GEN_LAMB2(SFX, T, SQRT)                                                                             \
  PD_VINLINE void lamb2_##SFX##_body(const pd_optim_args *a, int64_t n, T *restrict p, const T *restrict m, \
                                     const T *restrict v, double lr_ratio) {                                \
    const T eps = (T)a->s[2], wd = (T)a->s[3], bc1 = (T)a->s[4], bc2 = (T)a->s[5], lrr = (T)lr_ratio;       \
    PD_SIMD for (int64_t i = 0; i < n; i++) {                                                               \
      T pv = p[i];                                                                                          \
      T r = (m[i] / bc1) / (SQRT(v[i] / bc2) + eps) + wd * pv;                                              \
      p[i] = pv - lrr * r;                                                                                  \
    }                                                                                                       \
  }                                                                                                         \
  PD_KCLONES(lamb2_##SFX,                                                                                   \
             (const pd_optim_args *a, int64_t n, T *restrict p, const T *restrict m, const T *restrict v,   \
              double lr_ratio),                                                                             \
             (a, n, p, m, v, lr_ratio))

#define GEN_ALL(G)                                  \
  G(f32, float, gt_f32, sqrtf, pd_self)             \
  G(f64, double, gt_f64, sqrt, pd_seld)             \
  G(f32_plain, float, gt_f32_plain, sqrtf, pd_self) \
  G(f64_plain, double, gt_f64_plain, sqrt, pd_seld)

GEN_ALL(GEN_SGD)
GEN_ALL(GEN_MOMENTUM)
GEN_ALL(GEN_ADAM)
GEN_ALL(GEN_ADAMAX)
GEN_ALL(GEN_ADAGRAD)
GEN_ALL(GEN_ADADELTA)
GEN_ALL(GEN_RMSPROP)
GEN_ALL(GEN_LAMB)
GEN_LAMB2(f32, float, sqrtf)
GEN_LAMB2(f64, double, sqrt)

const pd_optim_rule pd_optim_sgd_rule = {sgd_f32, sgd_f64, sgd_f32_plain, sgd_f64_plain};
const pd_optim_rule pd_optim_momentum_rule = {momentum_f32, momentum_f64, momentum_f32_plain,
                                              momentum_f64_plain};
const pd_optim_rule pd_optim_adam_rule = {adam_f32, adam_f64, adam_f32_plain, adam_f64_plain};
const pd_optim_rule pd_optim_adamax_rule = {adamax_f32, adamax_f64, adamax_f32_plain, adamax_f64_plain};
const pd_optim_rule pd_optim_adagrad_rule = {adagrad_f32, adagrad_f64, adagrad_f32_plain, adagrad_f64_plain};
const pd_optim_rule pd_optim_adadelta_rule = {adadelta_f32, adadelta_f64, adadelta_f32_plain,
                                              adadelta_f64_plain};
const pd_optim_rule pd_optim_rmsprop_rule = {rmsprop_f32, rmsprop_f64, rmsprop_f32_plain, rmsprop_f64_plain};

/* ---- half staging ------------------------------------------------------------ */
static void half_to_f32(const uint16_t *src, pd_dtype dt, float *dst, int64_t n) {
  if (dt == PD_BFLOAT16)
    for (int64_t i = 0; i < n; i++) dst[i] = pd_bf16_to_f32(src[i]);
  else
    for (int64_t i = 0; i < n; i++) dst[i] = pd_f16_to_f32(src[i]);
}

static void f32_to_half(const float *src, uint16_t *dst, pd_dtype dt, int64_t n) {
  if (dt == PD_BFLOAT16)
    for (int64_t i = 0; i < n; i++) dst[i] = pd_f32_to_bf16(src[i]);
  else
    for (int64_t i = 0; i < n; i++) dst[i] = pd_f32_to_f16(src[i]);
}

static bool is_half(pd_dtype dt) { return dt == PD_FLOAT16 || dt == PD_BFLOAT16; }

static bool supported(const pd_optim_bufs *b) {
  if (b->nacc < 0 || b->nacc > PD_OPTIM_MAX_ACC) return false;
  if (b->pdt == PD_FLOAT32 || b->pdt == PD_FLOAT64) return b->gdt == b->pdt && !b->master;
  return is_half(b->pdt) && (b->gdt == b->pdt || b->gdt == PD_FLOAT32);
}

/* Whether the gradient transform is the identity. */
static bool plain(const pd_optim_args *a) {
  return a->gscale == 1.0 && a->lo == -INFINITY && a->hi == INFINITY && a->l1 == 0 && a->l2 == 0;
}

/* One block [off, off + len) of a rule. */
static void run_block(const pd_optim_bufs *b, const pd_optim_args *a, const pd_optim_rule *rule, int64_t off,
                      int64_t len) {
  bool id = plain(a);
  if (b->pdt == PD_FLOAT64) {
    double *acc[PD_OPTIM_MAX_ACC];
    for (int k = 0; k < b->nacc; k++) acc[k] = (double *)b->acc[k] + off;
    (id ? rule->f64_plain : rule->f64)(a, len, (double *)b->param + off, (const double *)b->grad + off, acc);
    return;
  }
  pd_optim_core32 f32 = id ? rule->f32_plain : rule->f32;
  if (b->pdt == PD_FLOAT32) {
    float *acc[PD_OPTIM_MAX_ACC];
    for (int k = 0; k < b->nacc; k++) acc[k] = (float *)b->acc[k] + off;
    f32(a, len, (float *)b->param + off, (const float *)b->grad + off, acc);
    return;
  }
  float pb[HBLOCK], gb[HBLOCK];
  for (int64_t o = off; o < off + len; o += HBLOCK) {
    int64_t l = off + len - o < HBLOCK ? off + len - o : HBLOCK;
    float *acc[PD_OPTIM_MAX_ACC];
    for (int k = 0; k < b->nacc; k++) acc[k] = (float *)b->acc[k] + o;
    uint16_t *ph = (uint16_t *)b->param + o;
    float *pp = b->master ? b->master + o : pb;
    if (!b->master) half_to_f32(ph, b->pdt, pb, l);
    const float *gp = gb;
    if (b->gdt == PD_FLOAT32)
      gp = (const float *)b->grad + o;
    else
      half_to_f32((const uint16_t *)b->grad + o, b->gdt, gb, l);
    f32(a, l, pp, gp, acc);
    f32_to_half(pp, ph, b->pdt, l);
  }
}

int pdk_optim_run(const pd_optim_bufs *b, const pd_optim_args *a, const pd_optim_rule *rule) {
  if (!supported(b)) return 1;
  int64_t nblk = (b->n + BLOCK - 1) / BLOCK;
  PD_PARALLEL_FOR(k, nblk, PD_GRAIN / BLOCK, {
    int64_t off = k * BLOCK;
    run_block(b, a, rule, off, b->n - off < BLOCK ? b->n - off : BLOCK);
  });
  return 0;
}

/* ---- Lamb -------------------------------------------------------------------- */
static PD_NOINLINE void lamb_block1(const pd_optim_bufs *b, const pd_optim_args *a, int64_t off, int64_t len,
                                    double *sp, double *sr) {
  bool id = plain(a);
  if (b->pdt == PD_FLOAT64) {
    (id ? lamb1_f64_plain : lamb1_f64)(a, len, (const double *)b->param + off, (const double *)b->grad + off,
                                       (double *)b->acc[0] + off, (double *)b->acc[1] + off, sp, sr);
    return;
  }
  if (b->pdt == PD_FLOAT32) {
    (id ? lamb1_f32_plain : lamb1_f32)(a, len, (const float *)b->param + off, (const float *)b->grad + off,
                                       (float *)b->acc[0] + off, (float *)b->acc[1] + off, sp, sr);
    return;
  }
  float pb[HBLOCK], gb[HBLOCK];
  for (int64_t o = off; o < off + len; o += HBLOCK) {
    int64_t l = off + len - o < HBLOCK ? off + len - o : HBLOCK;
    const float *pp = b->master ? b->master + o : pb;
    if (!b->master) half_to_f32((const uint16_t *)b->param + o, b->pdt, pb, l);
    const float *gp = gb;
    if (b->gdt == PD_FLOAT32)
      gp = (const float *)b->grad + o;
    else
      half_to_f32((const uint16_t *)b->grad + o, b->gdt, gb, l);
    (id ? lamb1_f32_plain : lamb1_f32)(a, l, pp, gp, (float *)b->acc[0] + o, (float *)b->acc[1] + o, sp, sr);
  }
}

static void lamb_block2(const pd_optim_bufs *b, const pd_optim_args *a, int64_t off, int64_t len,
                        double lr_ratio) {
  if (b->pdt == PD_FLOAT64) {
    lamb2_f64(a, len, (double *)b->param + off, (const double *)b->acc[0] + off,
              (const double *)b->acc[1] + off, lr_ratio);
    return;
  }
  if (b->pdt == PD_FLOAT32) {
    lamb2_f32(a, len, (float *)b->param + off, (const float *)b->acc[0] + off, (const float *)b->acc[1] + off,
              lr_ratio);
    return;
  }
  float pb[HBLOCK];
  for (int64_t o = off; o < off + len; o += HBLOCK) {
    int64_t l = off + len - o < HBLOCK ? off + len - o : HBLOCK;
    uint16_t *ph = (uint16_t *)b->param + o;
    float *pp = b->master ? b->master + o : pb;
    if (!b->master) half_to_f32(ph, b->pdt, pb, l);
    lamb2_f32(a, l, pp, (const float *)b->acc[0] + o, (const float *)b->acc[1] + o, lr_ratio);
    f32_to_half(pp, ph, b->pdt, l);
  }
}

/* The two block sums in block order on any number of threads (as in
 * PD_ORDERED_SUM). */
#define PGROUP PD_SUM_GROUP

int pdk_optim_lamb(const pd_optim_bufs *b, const pd_optim_args *a) {
  return pdk_optim_lamb_reduced(b, a, NULL, NULL);
}

int pdk_optim_lamb_reduced(const pd_optim_bufs *b, const pd_optim_args *a, pdk_lamb_sums_fn reduce,
                           void *user) {
  if (!supported(b) || b->nacc != 2) return 1;
  int64_t nblk = (b->n + BLOCK - 1) / BLOCK;
  double sp = 0, sr = 0;
  if (nblk >= PD_GRAIN / BLOCK && pd_parallel_loops_on()) {
    double pp[PGROUP], pr[PGROUP];
    for (int64_t k0 = 0; k0 < nblk; k0 += PGROUP) {
      int64_t m = nblk - k0 < PGROUP ? nblk - k0 : PGROUP;
#pragma omp parallel for schedule(static)
      for (int64_t k = 0; k < m; k++) {
        int64_t off = (k0 + k) * BLOCK;
        pp[k] = pr[k] = 0;
        lamb_block1(b, a, off, b->n - off < BLOCK ? b->n - off : BLOCK, &pp[k], &pr[k]);
      }
      for (int64_t k = 0; k < m; k++) {
        sp += pp[k];
        sr += pr[k];
      }
    }
  } else {
    for (int64_t k = 0; k < nblk; k++) {
      int64_t off = k * BLOCK;
      double bp = 0, br = 0;
      lamb_block1(b, a, off, b->n - off < BLOCK ? b->n - off : BLOCK, &bp, &br);
      sp += bp;
      sr += br;
    }
  }
  if (reduce) {
    double sums[2] = {sp, sr};
    if (reduce(sums, user)) return 2;
    sp = sums[0];
    sr = sums[1];
  }
  /* the trust ratio |p| / |r|, 1 when either is 0 or when adaptation is off
   * (a parameter excluded from weight decay, unless always_adapt) */
  double pn = sqrt(sp), rn = sqrt(sr);
  bool adapt = a->flag || a->s[3] != 0.0;
  double ratio = adapt && pn > 0 && rn > 0 ? pn / rn : 1.0;
  double lrr = a->lr * ratio;
  PD_PARALLEL_FOR(k, nblk, PD_GRAIN / BLOCK, {
    int64_t off = k * BLOCK;
    lamb_block2(b, a, off, b->n - off < BLOCK ? b->n - off : BLOCK, lrr);
  });
  return 0;
}

/* ---- norms ------------------------------------------------------------------- */
#define GEN_SUMSQ(SFX, T)                                                                                  \
  PD_VINLINE void sumsq_##SFX##_body(const T *restrict p, int64_t n, double *out) {                        \
    double s = 0;                                                                                          \
    _Pragma("omp simd reduction(+ : s)") for (int64_t i = 0; i < n; i++) s += (double)p[i] * (double)p[i]; \
    *out = s;                                                                                              \
  }                                                                                                        \
  PD_KCLONES(sumsq_##SFX, (const T *restrict p, int64_t n, double *out), (p, n, out))
GEN_SUMSQ(f32, float)
GEN_SUMSQ(f64, double)

static PD_NOINLINE double sumsq_range(const void *x, pd_dtype dt, int64_t off, int64_t n) {
  double s = 0;
  switch (dt) {
    case PD_FLOAT32:
      sumsq_f32((const float *)x + off, n, &s);
      break;
    case PD_FLOAT64:
      sumsq_f64((const double *)x + off, n, &s);
      break;
    case PD_FLOAT16:
    case PD_BFLOAT16: {
      const uint16_t *p = (const uint16_t *)x + off;
      for (int64_t i = 0; i < n; i++) {
        double v = dt == PD_FLOAT16 ? pd_f16_to_f32(p[i]) : pd_bf16_to_f32(p[i]);
        s += v * v;
      }
      break;
    }
    default:
      break;
  }
  return s;
}

double pdk_optim_sum_squares(const void *x, pd_dtype dt, int64_t n) {
  int64_t nblk = (n + BLOCK - 1) / BLOCK;
  double s = 0;
  PD_ORDERED_SUM(double, s, nblk, nblk >= PD_GRAIN / BLOCK, k,
                 sumsq_range(x, dt, k * BLOCK, n - k * BLOCK < BLOCK ? n - k * BLOCK : BLOCK));
  return s;
}
