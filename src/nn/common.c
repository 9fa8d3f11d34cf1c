/* paddle.nn.Identity, Flatten, Bilinear (and F.bilinear), Embedding. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/core_internal.h"
#include "../core/tensor_impl.h"
#include "../ops/op_registry.h"
#include "paddlec/layers.h"
#include "paddlec/linalg.h"
#include "paddlec/manipulation.h"
#include "paddlec/math.h"
#include "paddlec/reduction.h"
#include "layer_dtype.h"

static char *fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
static char *fmt(const char *f, ...) {
  char *s = malloc(160);
  if (!s) return NULL;
  va_list ap;
  va_start(ap, f);
  vsnprintf(s, 160, f, ap);
  va_end(ap);
  return s;
}

static pd_dtype param_dtype(pd_dtype dt) { return pd_nn_layer_dtype(dt); }

/* ---- Identity ------------------------------------------------------------------ */
static int identity_forward(pd_layer *self, pd_tensor *const *in, int n_in, pd_tensor **out, int max_out) {
  (void)self;
  if (n_in != 1) return pd_set_error(PD_ERR_INVALID, "Identity: expects 1 input, got %d", n_in);
  (void)max_out;
  out[0] = in[0];
  return 1;
}

static const pd_layer_type identity_type = {"Identity", identity_forward, NULL, NULL};

pd_layer *pd_nn_identity(void) { return pd_layer_new(sizeof(pd_layer), &identity_type); }

/* ---- Flatten ------------------------------------------------------------------- */
typedef struct flatten {
  pd_layer base;
  int64_t start_axis, stop_axis;
} flatten;

static int flatten_forward(pd_layer *self, pd_tensor *const *in, int n_in, pd_tensor **out, int max_out) {
  (void)max_out;
  flatten *l = (flatten *)self;
  if (n_in != 1) return pd_set_error(PD_ERR_INVALID, "Flatten: expects 1 input, got %d", n_in);
  out[0] = pd_flatten(in[0], l->start_axis, l->stop_axis);
  return out[0] ? 1 : pd_last_status();
}

static const pd_layer_type flatten_type = {"Flatten", flatten_forward, NULL, NULL};

pd_layer *pd_nn_flatten(int64_t start_axis, int64_t stop_axis) {
  flatten *l = pd_layer_new(sizeof *l, &flatten_type);
  if (!l) return NULL;
  l->start_axis = start_axis;
  l->stop_axis = stop_axis;
  return &l->base;
}

/* ---- F.bilinear ---------------------------------------------------------------- */
static bool bilinear_check(pd_tensor *x1, pd_tensor *x2, pd_tensor *w, pd_tensor *b) {
  if (!x1 || !x2 || !w) {
    if (pd_last_status() == PD_OK)
      pd_set_error(PD_ERR_INVALID, "bilinear: %s is NULL", !x1 ? "x1" : !x2 ? "x2" : "weight");
    return false;
  }
  if (x1->ndim != 2 || x2->ndim != 2) {
    pd_set_error(PD_ERR_SHAPE, "bilinear: x1 and x2 must be 2-D [batch, features], got shapes %s and %s",
                 PD_SHAPE_STR(x1), PD_SHAPE_STR(x2));
    return false;
  }
  if (x1->shape[0] != x2->shape[0]) {
    pd_set_error(PD_ERR_SHAPE,
                 "bilinear: x1 of shape %s and x2 of shape %s differ in batch size (%lld vs %lld)",
                 PD_SHAPE_STR(x1), PD_SHAPE_STR(x2), (long long)x1->shape[0], (long long)x2->shape[0]);
    return false;
  }
  if (w->ndim != 3 || w->shape[1] != x1->shape[1] || w->shape[2] != x2->shape[1]) {
    pd_set_error(PD_ERR_SHAPE,
                 "bilinear: weight of shape %s does not match [out, %lld, %lld] for x1 %s and x2 %s",
                 PD_SHAPE_STR(w), (long long)x1->shape[1], (long long)x2->shape[1], PD_SHAPE_STR(x1),
                 PD_SHAPE_STR(x2));
    return false;
  }
  if (b && !((b->ndim == 2 && b->shape[0] == 1 && b->shape[1] == w->shape[0]) ||
             (b->ndim == 1 && b->shape[0] == w->shape[0]))) {
    pd_set_error(PD_ERR_SHAPE, "bilinear: bias of shape %s does not match [1, %lld]", PD_SHAPE_STR(b),
                 (long long)w->shape[0]);
    return false;
  }
  return true;
}

/* x1 W' (W' = W as [in1, out * in2]) gives t[b, o, j] = sum_i x1[b, i] W[o, i, j];
 * then out[b, o] = sum_j t[b, o, j] x2[b, j]. */
pd_tensor *pd_bilinear(pd_tensor *x1, pd_tensor *x2, pd_tensor *weight, pd_tensor *bias) {
  if (!bilinear_check(x1, x2, weight, bias)) return NULL;
  int64_t B = x1->shape[0], O = weight->shape[0], I1 = weight->shape[1], I2 = weight->shape[2];
  pd_internal_enter();
  pd_tensor *wt = pd_transpose(weight, 3, (const int64_t[]){1, 0, 2});
  pd_tensor *wr = pd_reshape(wt, 2, (const int64_t[]){I1, O * I2});
  pd_tensor *t = pd_matmul(x1, wr, false, false);
  pd_tensor *t3 = pd_reshape(t, 3, (const int64_t[]){B, O, I2});
  pd_tensor *x2u = pd_unsqueeze(x2, 1, (const int64_t[]){1});
  pd_tensor *p = pd_multiply(t3, x2u);
  pd_tensor *s = pd_sum(p, (const int64_t[]){2}, 1, false);
  pd_tensor *r = bias && s ? pd_add(s, bias) : pd_tensor_retain(s);
  pd_tensor *tmp[] = {wt, wr, t, t3, x2u, p, s};
  for (size_t i = 0; i < sizeof tmp / sizeof *tmp; i++) pd_tensor_release(tmp[i]);
  pd_internal_leave();
  return pd_scope_track(r);
}

/* ---- Bilinear -------------------------------------------------------------------- */
typedef struct bilinear {
  pd_layer base;
  int64_t in1, in2, out;
  pd_tensor *weight, *bias;
} bilinear;

static int bilinear_forward(pd_layer *self, pd_tensor *const *in, int n_in, pd_tensor **out, int max_out) {
  (void)max_out;
  bilinear *l = (bilinear *)self;
  if (n_in != 2) return pd_set_error(PD_ERR_INVALID, "Bilinear: expects 2 inputs (x1, x2), got %d", n_in);
  out[0] = pd_bilinear(in[0], in[1], l->weight, l->bias);
  return out[0] ? 1 : pd_last_status();
}

static char *bilinear_repr(const pd_layer *self) {
  const bilinear *l = (const bilinear *)self;
  return fmt("in1_features=%lld, in2_features=%lld, out_features=%lld, dtype=%s", (long long)l->in1,
             (long long)l->in2, (long long)l->out, pd_dtype_name(l->weight->dtype));
}

static const pd_layer_type bilinear_type = {"Bilinear", bilinear_forward, NULL, bilinear_repr};

pd_layer *pd_nn_bilinear(int64_t in1_features, int64_t in2_features, int64_t out_features,
                         const pd_nn_bilinear_opts *opts) {
  static const pd_nn_bilinear_opts defaults;
  if (!opts) opts = &defaults;
  if (in1_features <= 0 || in2_features <= 0 || out_features <= 0) {
    pd_set_error(
        PD_ERR_INVALID,
        "Bilinear: in1_features (%lld), in2_features (%lld) and out_features (%lld) must be positive",
        (long long)in1_features, (long long)in2_features, (long long)out_features);
    return NULL;
  }
  pd_dtype dt = param_dtype(opts->dtype);
  bilinear *l = pd_layer_new(sizeof *l, &bilinear_type);
  if (!l) return NULL;
  l->in1 = in1_features;
  l->in2 = in2_features;
  l->out = out_features;
  l->weight = pd_layer_create_parameter(&l->base, "weight", 3,
                                        (const int64_t[]){out_features, in1_features, in2_features}, dt,
                                        opts->weight_attr, NULL, false);
  if (l->weight && !opts->no_bias)
    l->bias = pd_layer_create_parameter(&l->base, "bias", 2, (const int64_t[]){1, out_features}, dt,
                                        opts->bias_attr, NULL, true);
  if (!l->weight || (!opts->no_bias && !l->bias)) {
    pd_layer_release(&l->base);
    return NULL;
  }
  return &l->base;
}

/* ---- Embedding ------------------------------------------------------------------- */
typedef struct embedding {
  pd_layer base;
  int64_t num, dim;
  bool has_padding;
  int64_t padding_idx; /* as given (may be negative) */
  bool sparse;
  pd_tensor *weight;
} embedding;

static int embedding_forward(pd_layer *self, pd_tensor *const *in, int n_in, pd_tensor **out, int max_out) {
  (void)max_out;
  embedding *l = (embedding *)self;
  if (n_in != 1) return pd_set_error(PD_ERR_INVALID, "Embedding: expects 1 input, got %d", n_in);
  out[0] = pd_embedding(in[0], l->weight, l->has_padding ? l->padding_idx : PD_NO_PADDING);
  return out[0] ? 1 : pd_last_status();
}

static char *embedding_repr(const pd_layer *self) {
  const embedding *l = (const embedding *)self;
  if (l->has_padding)
    return fmt("%lld, %lld, padding_idx=%lld, sparse=%s", (long long)l->num, (long long)l->dim,
               (long long)l->padding_idx, l->sparse ? "True" : "False");
  return fmt("%lld, %lld, sparse=%s", (long long)l->num, (long long)l->dim, l->sparse ? "True" : "False");
}

static const pd_layer_type embedding_type = {"Embedding", embedding_forward, NULL, embedding_repr};

pd_layer *pd_nn_embedding(int64_t num_embeddings, int64_t embedding_dim, const pd_nn_embedding_opts *opts) {
  static const pd_nn_embedding_opts defaults;
  if (!opts) opts = &defaults;
  if (num_embeddings <= 0 || embedding_dim <= 0) {
    pd_set_error(PD_ERR_INVALID, "Embedding: num_embeddings (%lld) and embedding_dim (%lld) must be positive",
                 (long long)num_embeddings, (long long)embedding_dim);
    return NULL;
  }
  int64_t pad = opts->padding_idx;
  if (opts->has_padding_idx && (pad < -num_embeddings || pad >= num_embeddings)) {
    pd_set_error(PD_ERR_INDEX, "Embedding: padding_idx %lld must be within [%lld, %lld)", (long long)pad,
                 (long long)-num_embeddings, (long long)num_embeddings);
    return NULL;
  }
  embedding *l = pd_layer_new(sizeof *l, &embedding_type);
  if (!l) return NULL;
  l->num = num_embeddings;
  l->dim = embedding_dim;
  l->has_padding = opts->has_padding_idx;
  l->padding_idx = pad;
  l->sparse = opts->sparse;
  l->weight =
      pd_layer_create_parameter(&l->base, "weight", 2, (const int64_t[]){num_embeddings, embedding_dim},
                                param_dtype(opts->dtype), opts->weight_attr, NULL, false);
  if (!l->weight) {
    pd_layer_release(&l->base);
    return NULL;
  }
  if (l->has_padding) { /* the padding row starts at zero, written by the fill_ op */
    int64_t row = pad < 0 ? pad + num_embeddings : pad;
    pd_internal_enter();
    pd_tensor *r =
        pd_tensor_new_view(l->weight, 1, &embedding_dim, NULL, l->weight->offset + row * embedding_dim);
    pd_status st = r ? pd_write_fill(r, 0.0) : pd_last_status();
    pd_tensor_release(r);
    pd_internal_leave();
    if (st != PD_OK) {
      pd_layer_release(&l->base);
      return NULL;
    }
  }
  return &l->base;
}
