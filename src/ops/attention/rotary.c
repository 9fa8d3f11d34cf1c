/* Rotary position embedding, composed from public ops (so every order of
 * gradient flows): out = x * cos + rotate(x) * sin, with rotate the
 * half-swap (rotate_half) or the adjacent-pair swap (neox style). */
#include "../../core/core_internal.h"
#include "../op_registry.h"
#include "paddlec/manipulation.h"
#include "paddlec/math.h"
#include "paddlec/transformer.h"

#define RMAX 16
typedef struct rtmp {
  pd_tensor *t[RMAX];
  int n;
} rtmp;

static pd_tensor *keep(rtmp *r, pd_tensor *t) {
  if (t && r->n < RMAX) r->t[r->n++] = t;
  return t;
}

static void rtmp_free(rtmp *r) {
  for (int i = 0; i < r->n; i++) pd_tensor_release(r->t[i]);
  r->n = 0;
}

/* x * cos + rotate(x) * sin at depth > 0 (a new reference or NULL). */
static pd_tensor *rope(const char *op, pd_tensor *x, pd_tensor *cos, pd_tensor *sin, bool pairs) {
  int nd = x->ndim;
  int64_t d = nd ? x->shape[nd - 1] : 0;
  if (nd < 1 || d % 2 != 0) {
    pd_set_error(PD_ERR_SHAPE, "%s: the last dim of x (shape %s) must be even", op, PD_SHAPE_STR(x));
    return NULL;
  }
  rtmp r = {.n = 0};
  pd_tensor *rot = NULL;
  if (!pairs) {
    int64_t ax = nd - 1, z = 0, h = d / 2;
    pd_tensor *x1 = keep(&r, pd_slice(x, 1, &ax, &z, &h)), *x2 = keep(&r, pd_slice(x, 1, &ax, &h, &d));
    pd_tensor *parts[2] = {keep(&r, pd_neg(x2)), x1};
    rot = parts[0] && x1 ? keep(&r, pd_concat(parts, 2, ax)) : NULL;
  } else {
    int64_t s[PD_MAX_DIMS + 1];
    for (int i = 0; i < nd - 1; i++) s[i] = x->shape[i];
    s[nd - 1] = d / 2;
    s[nd] = 2;
    pd_tensor *xp = keep(&r, pd_reshape(x, nd + 1, s));
    int64_t ax = nd, z = 0, one = 1, two = 2;
    pd_tensor *xe = xp ? keep(&r, pd_slice(xp, 1, &ax, &z, &one)) : NULL;
    pd_tensor *xo = xp ? keep(&r, pd_slice(xp, 1, &ax, &one, &two)) : NULL;
    pd_tensor *parts[2] = {xo ? keep(&r, pd_neg(xo)) : NULL, xe};
    pd_tensor *c = parts[0] && xe ? keep(&r, pd_concat(parts, 2, ax)) : NULL;
    rot = c ? keep(&r, pd_reshape(c, nd, x->shape)) : NULL;
  }
  pd_tensor *a = rot ? keep(&r, pd_multiply(x, cos)) : NULL;
  pd_tensor *b = a ? keep(&r, pd_multiply(rot, sin)) : NULL;
  pd_tensor *y = b ? pd_add(a, b) : NULL;
  rtmp_free(&r);
  return y;
}

pd_tensor *pd_rotary_embedding(pd_tensor *x, pd_tensor *cos, pd_tensor *sin) {
  if (!x || !cos || !sin) {
    if (pd_last_status() == PD_OK) pd_set_error(PD_ERR_INVALID, "rotary_embedding: x, cos or sin is NULL");
    return NULL;
  }
  pd_internal_enter();
  pd_tensor *y = rope("rotary_embedding", x, cos, sin, false);
  pd_internal_leave();
  return y ? pd_scope_track(y) : NULL;
}

/* sin / cos as [1, S, 1, D], or [B, S, 1, D] picked by position_ids. */
static pd_tensor *table(const char *op, pd_tensor *t, const pd_tensor *q, pd_tensor *pos) {
  int64_t S = q->shape[1], D = q->shape[3];
  bool ok = (t->ndim == 4 && t->shape[0] == 1 && t->shape[2] == 1 && t->shape[3] == D) ||
            (t->ndim == 2 && t->shape[1] == D);
  int64_t rows = t->ndim == 4 ? t->shape[1] : t->ndim == 2 ? t->shape[0] : 0;
  if (ok && !pos) ok = rows == S;
  if (!ok) {
    pd_set_error(PD_ERR_SHAPE,
                 "%s: sin/cos of shape %s do not match q of shape %s (expected [1, %lld, 1, %lld])", op,
                 PD_SHAPE_STR(t), PD_SHAPE_STR(q), (long long)S, (long long)D);
    return NULL;
  }
  if (!pos) return pd_reshape(t, 4, (int64_t[]){1, S, 1, D});
  if (pos->ndim != 2 || pos->shape[0] != q->shape[0] || pos->shape[1] != S) {
    pd_set_error(PD_ERR_SHAPE, "%s: position_ids of shape %s must be [%lld, %lld]", op, PD_SHAPE_STR(pos),
                 (long long)q->shape[0], (long long)S);
    return NULL;
  }
  pd_tensor *flat = pd_reshape(t, 2, (int64_t[]){rows, D});
  pd_tensor *idx = flat ? pd_reshape(pos, 1, (int64_t[]){q->shape[0] * S}) : NULL;
  pd_tensor *g = idx ? pd_index_select(flat, idx, 0) : NULL;
  pd_tensor *y = g ? pd_reshape(g, 4, (int64_t[]){q->shape[0], S, 1, D}) : NULL;
  pd_tensor_release(flat);
  pd_tensor_release(idx);
  pd_tensor_release(g);
  return y;
}

pd_status pd_fused_rotary_position_embedding(pd_tensor *q, pd_tensor *k, pd_tensor *v, pd_tensor *sin,
                                             pd_tensor *cos, pd_tensor *position_ids,
                                             bool use_neox_rotary_style, pd_tensor **out_q, pd_tensor **out_k,
                                             pd_tensor **out_v) {
  const char *op = "fused_rotary_position_embedding";
  pd_tensor **outs[3] = {out_q, out_k, out_v};
  for (int i = 0; i < 3; i++)
    if (outs[i]) *outs[i] = NULL;
  if (!q || !sin || !cos)
    return pd_last_status() != PD_OK ? pd_last_status()
                                     : pd_set_error(PD_ERR_INVALID, "%s: q, sin and cos are required", op);
  if (q->ndim != 4)
    return pd_set_error(PD_ERR_SHAPE, "%s: q must be [batch, seq_len, num_heads, head_dim], got %s", op,
                        PD_SHAPE_STR(q));
  pd_tensor *xs[3] = {q, k, v};
  for (int i = 1; i < 3; i++)
    if (xs[i] && (xs[i]->ndim != 4 || xs[i]->shape[0] != q->shape[0] || xs[i]->shape[1] != q->shape[1] ||
                  xs[i]->shape[3] != q->shape[3]))
      return pd_set_error(PD_ERR_SHAPE, "%s: %s of shape %s does not match q of shape %s", op,
                          i == 1 ? "k" : "v", PD_SHAPE_STR(xs[i]), PD_SHAPE_STR(q));
  pd_internal_enter();
  pd_tensor *s = table(op, sin, q, position_ids), *c = s ? table(op, cos, q, position_ids) : NULL;
  pd_tensor *ys[3] = {NULL, NULL, NULL};
  pd_status st = c ? PD_OK : pd_last_status();
  for (int i = 0; i < 3 && st == PD_OK; i++)
    if (xs[i] && outs[i] && !(ys[i] = rope(op, xs[i], c, s, use_neox_rotary_style))) st = pd_last_status();
  pd_tensor_release(s);
  pd_tensor_release(c);
  pd_internal_leave();
  for (int i = 0; i < 3; i++) {
    if (st == PD_OK && ys[i])
      *outs[i] = pd_scope_track(ys[i]);
    else
      pd_tensor_release(ys[i]);
  }
  return st;
}
