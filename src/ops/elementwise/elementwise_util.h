/* Helpers shared by the elementwise and activation op files: temporaries of
 * backward formulas, scalar operands, gradient reduction, kernel glue. */
#ifndef PADDLEC_OPS_ELEMENTWISE_UTIL_H
#define PADDLEC_OPS_ELEMENTWISE_UTIL_H

#include <assert.h>
#include "../../kernels/cpu/vmath.h"
#include "../ew_util.h"
#include "paddlec/ops.h"

/* Temporaries of a backward formula. Every intermediate result is pushed,
 * so a chain of ops needs no NULL checks (an op given a NULL input returns
 * NULL and keeps the first error) and one call releases them all. */
#define PD_TMPS_CAP 48
typedef struct pd_tmps {
  pd_tensor *t[PD_TMPS_CAP];
  int n;
} pd_tmps;

static inline pd_tensor *pd_tk(pd_tmps *s, pd_tensor *t) {
  /* a backward formula holds a handful of temporaries; overflowing the list
   * is a bug in the formula, not a user error */
  assert(s->n < PD_TMPS_CAP);
  if (t && s->n < PD_TMPS_CAP) s->t[s->n++] = t;
  return t;
}
static inline void pd_tmps_free(pd_tmps *s) {
  for (int i = 0; i < s->n; i++) pd_tensor_release(s->t[i]);
  s->n = 0;
}

/* A 0-d tensor holding v in like's dtype (NULL when like is NULL). */
static inline pd_tensor *pd_ew_scalar(double v, const pd_tensor *like) {
  return like ? pd_full(0, NULL, v, like->dtype) : NULL;
}

/* Makes g (a new reference or NULL) the gradient of input i, summed down to
 * the input's shape where it was broadcast. Releases g. */
static inline pd_status pd_ew_set_grad(const pd_backward_ctx *c, int i, pd_tensor *g) {
  if (!g) return pd_last_status() != PD_OK ? pd_last_status() : PD_ERR_INVALID;
  c->grad_in[i] = pd_grad_reduce_to(g, c->in_meta[i].ndim, c->in_meta[i].shape);
  pd_tensor_release(g);
  return c->grad_in[i] ? PD_OK : pd_last_status();
}

/* Backward of a unary op: the common locals (g, x, out, the attrs' floats P
 * and the temporaries T), returning early when x needs no gradient. */
#define PD_UNARY_BWD_PROLOGUE                                             \
  if (!c->needs_grad[0]) return PD_OK;                                    \
  pd_tensor *g = c->grad_out[0], *x = c->inputs[0], *out = c->outputs[0]; \
  const double *P = c->attrs->f;                                          \
  pd_tmps T = {0};                                                        \
  (void)g;                                                                \
  (void)x;                                                                \
  (void)out;                                                              \
  (void)P
/* Stores dx (a new reference or NULL) as the gradient of input 0 and
 * releases the temporaries. */
static inline pd_status pd_unary_bwd_finish(const pd_backward_ctx *c, pd_tmps *T, pd_tensor *dx) {
  pd_status st = pd_ew_set_grad(c, 0, dx);
  pd_tmps_free(T);
  return st;
}
/* Pushes an op result onto T / a 0-d scalar like `like` onto T. */
#define PD_K(t) pd_tk(&T, (t))
#define PD_S(v, like) PD_K(pd_ew_scalar((v), (like)))

/* where(mask, g, 0): g where mask holds, zero elsewhere. */
static inline pd_tensor *pd_ew_masked(pd_tensor *mask, pd_tensor *g) {
  pd_tensor *z = pd_ew_scalar(0.0, g);
  pd_tensor *r = pd_where(mask, g, z);
  pd_tensor_release(z);
  return r;
}

/* A kernel running table[in[0]->dtype] over out and all inputs, params
 * from the attrs' float slots; kname##_ew gives the same function for the
 * registry row's ew_fn. */
#define PD_EW_KERNEL(kname, table)                                                                       \
  static pd_status kname##_kernel(const pd_kernel_ctx *ctx) {                                            \
    return pd_ew_apply(ctx->def->name, table, ctx->in[0]->dtype, ctx->out[0], ctx->in, ctx->n_in,        \
                       ctx->attrs->f);                                                                   \
  }                                                                                                      \
  __attribute__((unused)) static pd_ew_fn kname##_ew(const pd_attrs *a, const pd_dtype *dt, double *p) { \
    for (int i = 0; i < PD_ATTR_FLOATS; i++) p[i] = a->f[i];                                             \
    return (unsigned)dt[0] < PD_NUM_DTYPES ? table[dt[0]] : NULL;                                        \
  }

#endif
