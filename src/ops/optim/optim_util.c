/* Input checks and the kernel glue shared by the optimizer update ops. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optim_util.h"

static bool is_half(pd_dtype dt) { return dt == PD_FLOAT16 || dt == PD_BFLOAT16; }

/* The accumulators' dtype: float32 for float16/bfloat16/float32 params. */
static pd_dtype acc_dtype(pd_dtype pdt) { return pdt == PD_FLOAT64 ? PD_FLOAT64 : PD_FLOAT32; }

static bool same_shape(const pd_tensor *a, const pd_tensor *b) {
  return a->ndim == b->ndim && pd_shape_eq(a->ndim, a->shape, b->shape);
}

static int expected_inputs(const pd_optim_op_desc *d, const pd_attrs *a) {
  return 3 + d->n_acc + d->n_pow + (a->i[0] ? 1 : 0) + (a->i[1] ? 1 : 0);
}

pd_status pd_optim_meta(const pd_optim_op_desc *d, const pd_op_def *def, pd_tensor *const *in, int n_in,
                        const pd_attrs *a, pd_meta *out, int *n_out) {
  const char *op = def->name;
  int want = expected_inputs(d, a);
  if (n_in != want)
    return pd_set_error(PD_ERR_INVALID, "%s: expects %d inputs (%s%s%s), got %d", op, want, d->inputs,
                        a->i[0] ? ", master_param" : "", a->i[1] ? ", grad_scale" : "", n_in);
  pd_tensor *p = in[0], *g = in[1], *lr = in[2];
  if (p->dtype != PD_FLOAT32 && p->dtype != PD_FLOAT64 && !is_half(p->dtype))
    return pd_set_error(PD_ERR_DTYPE, "%s: param must be float16, bfloat16, float32 or float64, got %s", op,
                        pd_dtype_name(p->dtype));
  if (g->dtype != p->dtype && !(is_half(p->dtype) && g->dtype == PD_FLOAT32))
    return pd_set_error(PD_ERR_DTYPE, "%s: grad is %s but param is %s", op, pd_dtype_name(g->dtype),
                        pd_dtype_name(p->dtype));
  if (!same_shape(p, g))
    return pd_set_error(PD_ERR_SHAPE, "%s: grad shape %s does not match param shape %s", op, PD_SHAPE_STR(g),
                        PD_SHAPE_STR(p));
  if (!p->is_contiguous || !g->is_contiguous)
    return pd_set_error(PD_ERR_INVALID, "%s: %s must be contiguous", op, p->is_contiguous ? "grad" : "param");
  if (lr->numel != 1 || !pd_dtype_is_floating(lr->dtype))
    return pd_set_error(PD_ERR_INVALID, "%s: learning_rate must be one floating value, got %s of shape %s",
                        op, pd_dtype_name(lr->dtype), PD_SHAPE_STR(lr));
  pd_dtype adt = acc_dtype(p->dtype);
  for (int k = 0; k < d->n_acc; k++) {
    pd_tensor *t = in[3 + k];
    if (!same_shape(t, p) || t->dtype != adt || !t->is_contiguous)
      return pd_set_error(
          PD_ERR_SHAPE,
          "%s: accumulator %d must be a contiguous %s tensor of the param's shape %s, got %s %s", op, k,
          pd_dtype_name(adt), PD_SHAPE_STR(p), pd_dtype_name(t->dtype), PD_SHAPE_STR(t));
  }
  for (int k = 0; k < d->n_pow; k++) {
    pd_tensor *t = in[3 + d->n_acc + k];
    if (t->numel != 1 || !pd_dtype_is_floating(t->dtype) || is_half(t->dtype))
      return pd_set_error(PD_ERR_SHAPE,
                          "%s: beta power %d must be one float32/float64 value, got %s of shape %s", op, k,
                          pd_dtype_name(t->dtype), PD_SHAPE_STR(t));
  }
  int idx = 3 + d->n_acc + d->n_pow;
  if (a->i[0]) {
    pd_tensor *m = in[idx++];
    if (!is_half(p->dtype))
      return pd_set_error(PD_ERR_INVALID, "%s: master weights are for float16/bfloat16 params, param is %s",
                          op, pd_dtype_name(p->dtype));
    if (m->dtype != PD_FLOAT32 || !same_shape(m, p) || !m->is_contiguous)
      return pd_set_error(PD_ERR_SHAPE,
                          "%s: master_param must be a contiguous float32 tensor of shape %s, got %s %s", op,
                          PD_SHAPE_STR(p), pd_dtype_name(m->dtype), PD_SHAPE_STR(m));
  }
  if (a->i[1]) {
    pd_tensor *s = in[idx++];
    if (s->numel != 1 || !pd_dtype_is_floating(s->dtype))
      return pd_set_error(PD_ERR_INVALID, "%s: grad_scale must be one floating value, got %s of shape %s", op,
                          pd_dtype_name(s->dtype), PD_SHAPE_STR(s));
  }
  pd_optim_args tmp;
  pd_status st = pd_optim_parse_transform(op, a->s, &tmp);
  if (st != PD_OK) return st;
  pd_meta_of(p, &out[0]);
  *n_out = 1;
  return PD_OK;
}

pd_status pd_optim_kernel(const pd_optim_op_desc *d, const pd_kernel_ctx *ctx) {
  return pd_optim_kernel_reduced(d, ctx, NULL, NULL);
}

pd_status pd_optim_kernel_reduced(const pd_optim_op_desc *d, const pd_kernel_ctx *ctx,
                                  pdk_lamb_sums_fn reduce, void *user) {
  pd_tensor *const *in = ctx->in;
  const pd_attrs *at = ctx->attrs;
  pd_tensor *p = in[0], *g = in[1];
  pd_optim_args a = {.gscale = 1.0, .lo = -INFINITY, .hi = INFINITY};
  pd_status st = pd_optim_parse_transform(ctx->def->name, at->s, &a);
  if (st != PD_OK) return st;
  a.lr = pd_load_as_f64(pd_data_ptr(in[2]), in[2]->dtype);
  double pows[2] = {0, 0};
  pd_tensor *const *pw = in + 3 + d->n_acc;
  for (int k = 0; k < d->n_pow; k++) pows[k] = pd_load_as_f64(pd_data_ptr(pw[k]), pw[k]->dtype);
  int idx = 3 + d->n_acc + d->n_pow;
  pd_tensor *master = at->i[0] ? in[idx++] : NULL;
  if (at->i[1]) a.gscale = pd_load_as_f64(pd_data_ptr(in[idx]), in[idx]->dtype);
  d->prep(at, a.lr, pows, &a);

  pd_optim_bufs b = {.n = p->numel,
                     .param = pd_data_ptr(p),
                     .pdt = p->dtype,
                     .grad = pd_data_ptr(g),
                     .gdt = g->dtype,
                     .master = master ? pd_data_ptr(master) : NULL,
                     .nacc = d->n_acc};
  for (int k = 0; k < d->n_acc; k++) b.acc[k] = pd_data_ptr(in[3 + k]);
  int rc = d->rule ? pdk_optim_run(&b, &a, d->rule) : pdk_optim_lamb_reduced(&b, &a, reduce, user);
  if (rc == 2) return pd_last_status(); /* reduce's error */
  if (rc)
    return pd_set_error(PD_ERR_DTYPE, "%s: param %s with grad %s is not supported", ctx->def->name,
                        pd_dtype_name(p->dtype), pd_dtype_name(g->dtype));
  if (d->post) {
    d->post(at, pows, pw[0]->dtype == PD_FLOAT32);
    for (int k = 0; k < d->n_pow; k++) {
      pd_store_from_f64(pd_data_ptr(pw[k]), pw[k]->dtype, pows[k]);
      pw[k]->storage->version++;
    }
  }
  for (int k = 0; k < d->n_acc; k++) in[3 + k]->storage->version++;
  if (master) master->storage->version++;
  return PD_OK;
}

pd_status pd_optim_format_transform(char *s, size_t cap, double clip_min, double clip_max, double l1,
                                    double l2) {
  size_t len = 0;
  int n = 0;
  s[0] = 0;
  if (clip_min != -INFINITY || clip_max != INFINITY) {
    n = snprintf(s + len, cap - len, "clip=%.9g,%.9g", clip_min, clip_max);
    if (n < 0 || (size_t)n >= cap - len) goto full;
    len += (size_t)n;
  }
  if (l1 != 0) {
    n = snprintf(s + len, cap - len, "%sl1_decay=%.9g", len ? ";" : "", l1);
    if (n < 0 || (size_t)n >= cap - len) goto full;
    len += (size_t)n;
  }
  if (l2 != 0) {
    n = snprintf(s + len, cap - len, "%sl2_decay=%.9g", len ? ";" : "", l2);
    if (n < 0 || (size_t)n >= cap - len) goto full;
  }
  return PD_OK;
full:
  s[0] = 0;
  return pd_set_error(PD_ERR_INVALID,
                      "optimizer: gradient transform (clip %g..%g, l1 %g, l2 %g) does not fit", clip_min,
                      clip_max, l1, l2);
}

pd_status pd_optim_parse_transform(const char *op, const char *s, pd_optim_args *a) {
  a->lo = -INFINITY;
  a->hi = INFINITY;
  a->l1 = a->l2 = 0;
  const char *c = s;
  while (*c) {
    char *e = NULL;
    if (strncmp(c, "clip=", 5) == 0) {
      a->lo = strtod(c + 5, &e);
      if (e == c + 5 || *e != ',') goto bad;
      const char *h = e + 1;
      a->hi = strtod(h, &e);
      if (e == h) goto bad;
    } else if (strncmp(c, "l1_decay=", 9) == 0) {
      a->l1 = strtod(c + 9, &e);
      if (e == c + 9) goto bad;
    } else if (strncmp(c, "l2_decay=", 9) == 0) {
      a->l2 = strtod(c + 9, &e);
      if (e == c + 9) goto bad;
    } else {
      goto bad;
    }
    c = e;
    if (*c == ';')
      c++;
    else if (*c)
      goto bad;
  }
  return PD_OK;
bad:
  return pd_set_error(PD_ERR_INVALID,
                      "%s: gradient transform '%s' is malformed (expected clip=<min>,<max>;l1_decay=<c>;"
                      "l2_decay=<c>)",
                      op, s);
}
