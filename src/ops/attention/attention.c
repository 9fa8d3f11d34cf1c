/* scaled_dot_product_attention: the fused, blocked attention op in Paddle's
 * [batch, seq_len, num_heads, head_dim] layout (kernels/cpu/attention.c),
 * and its grad op, which recomputes the scores block by block from q, k and
 * the saved per-row logsumexp.
 *
 * Attrs: i0 is_causal, i1 has_mask, i2 dropout active (training and p > 0),
 *        f0 dropout_p, f1 scale.
 * Inputs: q, k, v, [mask]. Outputs: out [B, Sq, H, Dv], softmax_lse
 * [B, H, Sq] and seed_offset (int64 [2]: the Philox counter and key of the
 * dropout draw), the last two carrying no gradient.
 * Grad op inputs: q, k, v, [mask], out, softmax_lse, seed_offset, dout ->
 * dq, dk, dv. The mask gets no gradient. */
#include <math.h>
#include <string.h>

#include "../../kernels/cpu/attention.h"
#include "../op_registry.h"
#include "paddlec/manipulation.h"
#include "paddlec/transformer.h"

enum { A_CAUSAL = 0, A_HAS_MASK = 1, A_DROP = 2 };
enum { F_P = 0, F_SCALE = 1 };

static pd_status check_qkv(const pd_op_def *def, pd_tensor *const *in, bool has_mask) {
  static const char *const names[3] = {"query", "key", "value"};
  pd_tensor *q = in[0], *k = in[1], *v = in[2];
  for (int i = 0; i < 3; i++) {
    if (in[i]->ndim != 4)
      return pd_set_error(PD_ERR_SHAPE,
                          "%s: %s must be 4-D [batch, seq_len, num_heads, head_dim], got shape %s", def->name,
                          names[i], PD_SHAPE_STR(in[i]));
    if (in[i]->dtype != PD_FLOAT32 && in[i]->dtype != PD_FLOAT64)
      return pd_set_error(PD_ERR_DTYPE, "%s: %s has dtype %s; expected float16, bfloat16, float32 or float64",
                          def->name, names[i], pd_dtype_name(in[i]->dtype));
    if (in[i]->dtype != q->dtype)
      return pd_set_error(PD_ERR_DTYPE, "%s: %s has dtype %s but query has %s", def->name, names[i],
                          pd_dtype_name(in[i]->dtype), pd_dtype_name(q->dtype));
  }
  if (k->shape[0] != q->shape[0] || v->shape[0] != q->shape[0] || k->shape[2] != q->shape[2] ||
      v->shape[2] != q->shape[2] || k->shape[1] != v->shape[1])
    return pd_set_error(PD_ERR_SHAPE,
                        "%s: query %s, key %s and value %s must agree in batch and num_heads, and key and "
                        "value in seq_len",
                        def->name, PD_SHAPE_STR(q), PD_SHAPE_STR(k), PD_SHAPE_STR(v));
  if (k->shape[3] != q->shape[3])
    return pd_set_error(
        PD_ERR_SHAPE, "%s: query head_dim %lld (shape %s) differs from key head_dim %lld (shape %s)",
        def->name, (long long)q->shape[3], PD_SHAPE_STR(q), (long long)k->shape[3], PD_SHAPE_STR(k));
  if (has_mask) {
    pd_tensor *m = in[3];
    if (m->dtype != PD_BOOL && m->dtype != q->dtype)
      return pd_set_error(PD_ERR_DTYPE, "%s: attn_mask has dtype %s; expected bool or %s", def->name,
                          pd_dtype_name(m->dtype), pd_dtype_name(q->dtype));
    int64_t full[4] = {q->shape[0], q->shape[2], q->shape[1], k->shape[1]};
    bool ok = m->ndim <= 4;
    for (int d = 0; ok && d < m->ndim; d++) {
      int64_t s = m->shape[m->ndim - 1 - d], f = full[3 - d];
      ok = s == 1 || s == f;
    }
    if (!ok) {
      char b[96];
      return pd_set_error(PD_ERR_SHAPE, "%s: attn_mask of shape %s does not broadcast to %s", def->name,
                          PD_SHAPE_STR(m), pd_shape_str(4, full, b, sizeof b));
    }
  }
  return PD_OK;
}

static pd_status sdpa_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                           pd_meta *out, int *n_out) {
  bool has_mask = a->i[A_HAS_MASK];
  if (n_in != 3 + has_mask)
    return pd_set_error(PD_ERR_INVALID, "%s: expects %d inputs, got %d", def->name, 3 + has_mask, n_in);
  pd_status st = check_qkv(def, in, has_mask);
  if (st != PD_OK) return st;
  const pd_tensor *q = in[0], *v = in[2];
  out[0] =
      (pd_meta){.dtype = q->dtype, .ndim = 4, .shape = {q->shape[0], q->shape[1], q->shape[2], v->shape[3]}};
  out[1] = (pd_meta){.dtype = q->dtype, .ndim = 3, .shape = {q->shape[0], q->shape[2], q->shape[1]}};
  out[2] = (pd_meta){.dtype = PD_INT64, .ndim = 1, .shape = {2}};
  *n_out = 3;
  return PD_OK;
}

static void geom_of(pd_tensor *const *in, const pd_attrs *a, pd_attn_geom *g) {
  pd_tensor *q = in[0], *k = in[1], *v = in[2];
  *g = (pd_attn_geom){.B = q->shape[0],
                      .Sq = q->shape[1],
                      .H = q->shape[2],
                      .D = q->shape[3],
                      .Sk = k->shape[1],
                      .Dv = v->shape[3],
                      .causal = a->i[A_CAUSAL] != 0,
                      .scale = a->f[F_SCALE],
                      .dropout_p = a->i[A_DROP] ? a->f[F_P] : 0.0};
  if (a->i[A_HAS_MASK]) {
    pd_tensor *m = in[3];
    g->mask_kind = m->dtype == PD_BOOL ? PD_ATTN_MASK_BOOL : PD_ATTN_MASK_ADD;
    g->mask = pd_tensor_data(m);
    for (int d = 0; d < 4; d++) {
      int md = m->ndim - 4 + d;
      g->mstride[d] = md >= 0 && m->shape[md] != 1 ? m->strides[md] : 0;
    }
  }
}

static pd_status sdpa_kernel(const pd_kernel_ctx *ctx) {
  pd_tensor *c[4] = {NULL, NULL, NULL, NULL};
  pd_status st = PD_OK;
  for (int i = 0; i < 3 && st == PD_OK; i++)
    if (!(c[i] = pd_kernel_contiguous(ctx->in[i]))) st = pd_last_status();
  if (st == PD_OK) {
    if (ctx->n_in > 3) c[3] = pd_tensor_retain(ctx->in[3]);
    pd_attn_geom g;
    geom_of(c, ctx->attrs, &g);
    int64_t *so = pd_tensor_data(ctx->out[2]);
    so[0] = so[1] = 0;
    if (g.dropout_p > 0 && g.B * g.H * g.Sq * g.Sk > 0) {
      uint64_t key;
      g.rng_first = pd_rng_reserve((uint64_t)(g.B * g.H * g.Sq * g.Sk + 3) / 4, &key);
      g.rng_key = key;
      so[0] = (int64_t)g.rng_first;
      so[1] = (int64_t)key;
    }
    int bad =
        ctx->in[0]->dtype == PD_FLOAT32
            ? pdk_attention_fwd_f32(&g, pd_tensor_data(c[0]), pd_tensor_data(c[1]), pd_tensor_data(c[2]),
                                    pd_tensor_data(ctx->out[0]), pd_tensor_data(ctx->out[1]))
            : pdk_attention_fwd_f64(&g, pd_tensor_data(c[0]), pd_tensor_data(c[1]), pd_tensor_data(c[2]),
                                    pd_tensor_data(ctx->out[0]), pd_tensor_data(ctx->out[1]));
    if (bad) st = pd_set_error(PD_ERR_MEMORY, "%s: out of memory for the block buffers", ctx->def->name);
  }
  for (int i = 0; i < 4; i++) pd_tensor_release(c[i]);
  return st;
}

static pd_status sdpa_backward(const pd_backward_ctx *c) {
  bool has_mask = c->attrs->i[A_HAS_MASK];
  pd_tensor *gin[8];
  int n = 0;
  for (int i = 0; i < 3 + has_mask; i++) gin[n++] = c->inputs[i];
  for (int i = 0; i < 3; i++) gin[n++] = c->outputs[i];
  gin[n++] = c->grad_out[0];
  pd_tensor *outs[PD_MAX_OUTPUTS];
  int no = 0;
  pd_status st = pd_dispatch(PD_OP_scaled_dot_product_attention_grad, gin, n, c->attrs, outs, &no);
  if (st != PD_OK) return st;
  for (int i = 0; i < 3; i++)
    if (c->needs_grad[i]) c->grad_in[i] = pd_tensor_retain(outs[i]);
  for (int j = 0; j < no; j++) pd_tensor_release(outs[j]);
  return PD_OK;
}

static pd_status grad_meta(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                           pd_meta *out, int *n_out) {
  bool has_mask = a->i[A_HAS_MASK];
  int nb = 3 + has_mask;
  if (n_in != nb + 4)
    return pd_set_error(PD_ERR_INVALID, "%s: expects %d inputs, got %d", def->name, nb + 4, n_in);
  pd_status st = check_qkv(def, in, has_mask);
  if (st != PD_OK) return st;
  const pd_tensor *q = in[0], *v = in[2], *o = in[nb], *lse = in[nb + 1], *so = in[nb + 2], *g = in[nb + 3];
  int64_t os[4] = {q->shape[0], q->shape[1], q->shape[2], v->shape[3]};
  int64_t ls[3] = {q->shape[0], q->shape[2], q->shape[1]};
  if (o->ndim != 4 || !pd_shapes_agree(4, o->shape, os) || g->ndim != 4 ||
      !pd_shapes_agree(4, g->shape, os) || lse->ndim != 3 || !pd_shapes_agree(3, lse->shape, ls) ||
      !pd_dims_agree(so->numel, 2) || so->dtype != PD_INT64 || o->dtype != q->dtype || g->dtype != q->dtype ||
      lse->dtype != q->dtype)
    return pd_set_error(PD_ERR_SHAPE,
                        "%s: out %s, softmax_lse %s, seed_offset %s and dout %s do not match query %s and "
                        "value %s",
                        def->name, PD_SHAPE_STR(o), PD_SHAPE_STR(lse), PD_SHAPE_STR(so), PD_SHAPE_STR(g),
                        PD_SHAPE_STR(q), PD_SHAPE_STR(v));
  for (int i = 0; i < 3; i++) pd_meta_of(in[i], &out[i]);
  *n_out = 3;
  return PD_OK;
}

static pd_status grad_kernel(const pd_kernel_ctx *ctx) {
  int nb = 3 + (ctx->attrs->i[A_HAS_MASK] != 0);
  pd_tensor *c[8] = {NULL};
  pd_status st = PD_OK;
  for (int i = 0; i < ctx->n_in && st == PD_OK; i++) {
    if (i == 3 && nb == 4)
      c[i] = pd_tensor_retain(ctx->in[i]); /* the mask is read through its strides */
    else if (!(c[i] = pd_kernel_contiguous(ctx->in[i])))
      st = pd_last_status();
  }
  if (st == PD_OK) {
    pd_attn_geom g;
    geom_of(c, ctx->attrs, &g);
    const int64_t *so = pd_tensor_data(c[nb + 2]);
    g.rng_first = (uint64_t)so[0];
    g.rng_key = (uint64_t)so[1];
    void *o = pd_tensor_data(c[nb]), *lse = pd_tensor_data(c[nb + 1]), *go = pd_tensor_data(c[nb + 3]);
    int bad = ctx->in[0]->dtype == PD_FLOAT32
                  ? pdk_attention_bwd_f32(&g, pd_tensor_data(c[0]), pd_tensor_data(c[1]),
                                          pd_tensor_data(c[2]), o, lse, go, pd_tensor_data(ctx->out[0]),
                                          pd_tensor_data(ctx->out[1]), pd_tensor_data(ctx->out[2]))
                  : pdk_attention_bwd_f64(&g, pd_tensor_data(c[0]), pd_tensor_data(c[1]),
                                          pd_tensor_data(c[2]), o, lse, go, pd_tensor_data(ctx->out[0]),
                                          pd_tensor_data(ctx->out[1]), pd_tensor_data(ctx->out[2]));
    if (bad) st = pd_set_error(PD_ERR_MEMORY, "%s: out of memory for the block buffers", ctx->def->name);
  }
  for (int i = 0; i < 8; i++) pd_tensor_release(c[i]);
  return st;
}

static double sdpa_flops(pd_tensor *const *in, int n_in, const pd_attrs *a, const pd_meta *out, int n_out) {
  (void)n_in;
  (void)n_out;
  (void)out;
  double f = 2.0 * (double)in[0]->shape[0] * (double)in[0]->shape[2] * (double)in[0]->shape[1] *
             (double)in[1]->shape[1] * (double)(in[0]->shape[3] + in[2]->shape[3]);
  return a->i[A_CAUSAL] ? f / 2 : f;
}

static double grad_flops(pd_tensor *const *in, int n_in, const pd_attrs *a, const pd_meta *out, int n_out) {
  return 2.0 * sdpa_flops(in, n_in, a, out, n_out);
}

#define SDPA_ATTRS "i0:is_causal,i1:has_mask,i2:dropout,f0:dropout_p,f1:scale"

PD_OPDEF(scaled_dot_product_attention, .n_in = -1, .n_out = 3,
         .flags = PD_OPF_DIFF | PD_OPF_HALF_VIA_F32 | PD_OPF_SAVE_IN | PD_OPF_SAVE_OUT | PD_OPF_RANDOM,
         .nondiff_out = 6u, .attr_names = SDPA_ATTRS, .infer_meta = sdpa_meta,
         .kernel = {[PD_PLACE_CPU] = sdpa_kernel}, .backward = sdpa_backward, .flops = sdpa_flops);

PD_OPDEF(scaled_dot_product_attention_grad, .n_in = -1, .n_out = 3, .flags = PD_OPF_HALF_VIA_F32,
         .attr_names = SDPA_ATTRS, .infer_meta = grad_meta, .kernel = {[PD_PLACE_CPU] = grad_kernel},
         .flops = grad_flops);

pd_tensor *pd_scaled_dot_product_attention(pd_tensor *query, pd_tensor *key, pd_tensor *value,
                                           pd_tensor *attn_mask, double dropout_p, bool is_causal,
                                           bool training) {
  const char *op = "scaled_dot_product_attention";
  if (!query || !key || !value) {
    if (pd_last_status() == PD_OK)
      pd_set_error(PD_ERR_INVALID, "%s: %s is NULL", op, !query ? "query" : !key ? "key" : "value");
    return NULL;
  }
  if (!(dropout_p >= 0.0 && dropout_p <= 1.0)) {
    pd_set_error(PD_ERR_INVALID, "%s: dropout_p %g is outside [0, 1]", op, dropout_p);
    return NULL;
  }
  int64_t d = query->ndim == 4 ? query->shape[3] : 1;
  pd_attrs a = {.i = {is_causal, attn_mask != NULL, training && dropout_p > 0.0},
                .f = {dropout_p, d > 0 ? 1.0 / sqrt((double)d) : 1.0}};
  pd_tensor *in[4] = {query, key, value, attn_mask};
  return pd_dispatch1(PD_OP_scaled_dot_product_attention, in, 3 + (attn_mask != NULL), &a);
}
