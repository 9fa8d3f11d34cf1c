/* paddle.nn.MultiHeadAttention and the Transformer layers (encoder, decoder,
 * full model), following python/paddle/nn/layer/transformer.py: the same
 * sublayer names and creation order, hence the same parameter names. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/core_internal.h"
#include "../core/tensor_impl.h"
#include "paddlec/creation.h"
#include "paddlec/layers.h"
#include "paddlec/linalg.h"
#include "paddlec/manipulation.h"
#include "paddlec/math.h"
#include "paddlec/norm.h"
#include "paddlec/transformer.h"
#include "layer_dtype.h"

/* Which optional inputs of the next forward are present (bit k: optional
 * input k), set by the *_call helpers; a plain pd_layer_call passes inputs
 * positionally. Read and reset at the start of each forward. */
static _Thread_local unsigned g_present = ~0u;

static unsigned take_present(void) {
  unsigned p = g_present;
  g_present = ~0u;
  return p;
}

static pd_tensor *drop(pd_tensor *x, double p, bool training) {
  return x ? pd_dropout(x, p, 0, NULL, training, NULL) : NULL;
}

/* Paddle's _convert_attention_mask: bool / integer masks become additive
 * (mask - 1) * 1e9 in dtype; float masks are cast to dtype. */
static pd_tensor *additive_mask(pd_tensor *m, pd_dtype dt) {
  if (!m) return NULL;
  pd_dtype md = pd_tensor_dtype(m);
  if (md == PD_FLOAT32 || md == PD_FLOAT64 || md == PD_FLOAT16 || md == PD_BFLOAT16)
    return md == dt ? m : pd_cast(m, dt);
  return pd_scale(pd_cast(m, dt), 1e9, -1.0, false);
}

/* ---- MultiHeadAttention ------------------------------------------------------------------------ */

typedef struct mha {
  pd_layer base;
  int64_t embed_dim, num_heads, head_dim, kdim, vdim;
  double dropout;
  bool need_weights;
  pd_layer *q_proj, *k_proj, *v_proj, *out_proj; /* borrowed from the sublayer list */
} mha;

static pd_tensor *heads(pd_tensor *x, const mha *m) {
  const int64_t *s = pd_tensor_shape(x);
  return pd_reshape(x, 4, (int64_t[]){s[0], s[1], m->num_heads, m->head_dim});
}

static int mha_forward(pd_layer *self, pd_tensor *const *in, int n_in, pd_tensor **out, int max_out) {
  mha *m = (mha *)self;
  take_present();
  if (n_in > 4)
    return pd_set_error(PD_ERR_UNIMPLEMENTED,
                        "MultiHeadAttention: got %d inputs; a cache (incremental decoding) is not supported",
                        n_in);
  if (n_in < 1) return pd_set_error(PD_ERR_INVALID, "MultiHeadAttention: expects a query input");
  pd_tensor *query = in[0], *key = n_in > 1 ? in[1] : query, *value = n_in > 2 ? in[2] : key;
  pd_tensor *mask = n_in > 3 ? in[3] : NULL;
  if (pd_tensor_ndim(query) != 3 || pd_tensor_ndim(key) != 3 || pd_tensor_ndim(value) != 3 ||
      pd_tensor_shape(query)[2] != m->embed_dim || pd_tensor_shape(key)[2] != m->kdim ||
      pd_tensor_shape(value)[2] != m->vdim || pd_tensor_shape(key)[1] != pd_tensor_shape(value)[1]) {
    char a[64], b[64], c[64];
    return pd_set_error(PD_ERR_SHAPE,
                        "MultiHeadAttention: query %s, key %s, value %s must be [batch, seq_len, %lld], "
                        "[batch, seq_len_k, %lld], [batch, seq_len_k, %lld]",
                        pd_shape_str(pd_tensor_ndim(query), pd_tensor_shape(query), a, sizeof a),
                        pd_shape_str(pd_tensor_ndim(key), pd_tensor_shape(key), b, sizeof b),
                        pd_shape_str(pd_tensor_ndim(value), pd_tensor_shape(value), c, sizeof c),
                        (long long)m->embed_dim, (long long)m->kdim, (long long)m->vdim);
  }
  pd_tensor *q = heads(pd_layer_call1(m->q_proj, query), m);
  pd_tensor *k = heads(pd_layer_call1(m->k_proj, key), m);
  pd_tensor *v = heads(pd_layer_call1(m->v_proj, value), m);
  if (!q || !k || !v) return pd_last_status();
  pd_dtype dt = pd_tensor_dtype(q);
  const int64_t *qs = pd_tensor_shape(query);
  pd_tensor *o, *weights = NULL;
  if (!m->need_weights) {
    pd_tensor *fm = mask && pd_tensor_dtype(mask) != PD_BOOL ? additive_mask(mask, dt) : mask;
    o = pd_scaled_dot_product_attention(q, k, v, fm, m->dropout, false, self->training);
  } else {
    int64_t perm[4] = {0, 2, 1, 3};
    pd_tensor *qt = pd_transpose(q, 4, perm), *kt = pd_transpose(k, 4, perm), *vt = pd_transpose(v, 4, perm);
    pd_tensor *prod = pd_matmul(pd_scale(qt, 1.0 / sqrt((double)m->head_dim), 0.0, true), kt, false, true);
    if (mask) prod = pd_add(prod, additive_mask(mask, dt));
    weights = pd_softmax(prod, -1);
    pd_tensor *w = drop(weights, m->dropout, self->training);
    o = pd_transpose(pd_matmul(w, vt, false, false), 4, perm);
  }
  o = pd_reshape(o, 3, (int64_t[]){qs[0], qs[1], m->embed_dim});
  out[0] = pd_layer_call1(m->out_proj, o);
  if (!out[0]) return pd_last_status();
  if (m->need_weights && max_out > 1) {
    out[1] = weights;
    return 2;
  }
  return 1;
}

static char *mha_repr(const pd_layer *self) {
  const mha *m = (const mha *)self;
  char *s = malloc(128);
  if (s)
    snprintf(s, 128, "embed_dim=%lld, num_heads=%lld, dropout=%g", (long long)m->embed_dim,
             (long long)m->num_heads, m->dropout);
  return s;
}

static const pd_layer_type mha_type = {"MultiHeadAttention", mha_forward, NULL, mha_repr};

static pd_layer *add_linear(pd_layer *parent, const char *name, int64_t in, int64_t outf,
                            const pd_param_attr *wa, const pd_param_attr *ba, bool no_bias, pd_dtype dt) {
  pd_nn_linear_opts lo = {.weight_attr = wa, .bias_attr = ba, .no_bias = no_bias, .dtype = dt};
  pd_layer *l = pd_nn_linear(in, outf, &lo);
  return l ? pd_layer_add_sublayer(parent, name, l) : NULL;
}

pd_layer *pd_nn_multi_head_attention(int64_t embed_dim, int64_t num_heads,
                                     const pd_nn_multi_head_attention_opts *opts) {
  static const pd_nn_multi_head_attention_opts defaults;
  if (!opts) opts = &defaults;
  if (embed_dim <= 0 || num_heads <= 0 || embed_dim % num_heads != 0) {
    pd_set_error(PD_ERR_INVALID,
                 "MultiHeadAttention: embed_dim (%lld) must be positive and divisible by num_heads (%lld)",
                 (long long)embed_dim, (long long)num_heads);
    return NULL;
  }
  if (opts->kdim < 0 || opts->vdim < 0 || !(opts->dropout >= 0.0 && opts->dropout <= 1.0)) {
    pd_set_error(PD_ERR_INVALID, "MultiHeadAttention: bad kdim %lld, vdim %lld or dropout %g",
                 (long long)opts->kdim, (long long)opts->vdim, opts->dropout);
    return NULL;
  }
  mha *m = pd_layer_new(sizeof *m, &mha_type);
  if (!m) return NULL;
  m->embed_dim = embed_dim;
  m->num_heads = num_heads;
  m->head_dim = embed_dim / num_heads;
  m->kdim = opts->kdim ? opts->kdim : embed_dim;
  m->vdim = opts->vdim ? opts->vdim : embed_dim;
  m->dropout = opts->dropout;
  m->need_weights = opts->need_weights;
  pd_dtype dt = pd_nn_layer_dtype(opts->dtype);
  const pd_param_attr *wa = opts->weight_attr, *ba = opts->bias_attr;
  m->q_proj = add_linear(&m->base, "q_proj", embed_dim, embed_dim, wa, ba, opts->no_bias, dt);
  m->k_proj =
      m->q_proj ? add_linear(&m->base, "k_proj", m->kdim, embed_dim, wa, ba, opts->no_bias, dt) : NULL;
  m->v_proj =
      m->k_proj ? add_linear(&m->base, "v_proj", m->vdim, embed_dim, wa, ba, opts->no_bias, dt) : NULL;
  m->out_proj =
      m->v_proj ? add_linear(&m->base, "out_proj", embed_dim, embed_dim, wa, ba, opts->no_bias, dt) : NULL;
  if (!m->out_proj) {
    pd_layer_release(&m->base);
    return NULL;
  }
  return &m->base;
}

pd_tensor *pd_nn_multi_head_attention_call(pd_layer *l, pd_tensor *query, pd_tensor *key, pd_tensor *value,
                                           pd_tensor *attn_mask, pd_tensor **weights) {
  if (weights) *weights = NULL;
  if (!key) key = query;
  if (!value) value = key;
  pd_tensor *in[4] = {query, key, value, attn_mask}, *out[2] = {NULL, NULL};
  int n = pd_layer_call(l, in, attn_mask ? 4 : 3, out, 2);
  if (n <= 0) return NULL;
  if (weights && n > 1) *weights = out[1];
  return out[0];
}

/* ---- encoder / decoder layers ------------------------------------------------------------------ */

/* The configuration of a layer, kept to build fresh copies (Paddle's
 * _config); the attrs are copied (without names, which must be unique). */
typedef struct tcfg {
  int64_t d_model, nhead, dff;
  pd_nn_transformer_opts o;
  pd_param_attr wa, ba;
  pd_initializer wi, bi;
} tcfg;

pd_nn_transformer_opts pd_nn_transformer_defaults(void) {
  return (pd_nn_transformer_opts){.dropout = 0.1,
                                  .attn_dropout = PD_NN_SAME_AS_DROPOUT,
                                  .act_dropout = PD_NN_SAME_AS_DROPOUT,
                                  .layer_norm_eps = 1e-5,
                                  .explicit_zero = true};
}

static void cfg_init(tcfg *c, int64_t d_model, int64_t nhead, int64_t dff, const pd_nn_transformer_opts *o) {
  memset(c, 0, sizeof *c);
  c->d_model = d_model;
  c->nhead = nhead;
  c->dff = dff;
  c->o = o ? *o : pd_nn_transformer_defaults();
  if (c->o.weight_attr) {
    c->wa = *c->o.weight_attr;
    c->wa.name = NULL;
    if (c->wa.initializer) c->wi = *c->wa.initializer, c->wa.initializer = &c->wi;
    c->o.weight_attr = &c->wa;
  }
  if (c->o.bias_attr) {
    c->ba = *c->o.bias_attr;
    c->ba.name = NULL;
    if (c->ba.initializer) c->bi = *c->ba.initializer, c->ba.initializer = &c->bi;
    c->o.bias_attr = &c->ba;
  }
}

typedef struct tlayer {
  pd_layer base;
  tcfg *cfg;
  bool decoder, gelu, normalize_before;
  pd_layer *self_attn, *cross_attn, *linear1, *linear2, *norm1, *norm2, *norm3;
  pd_layer *dropout, *dropout1, *dropout2, *dropout3; /* Dropout layers: activation, then per block */
} tlayer;

static pd_tensor *feed_forward(tlayer *t, pd_tensor *x) {
  pd_tensor *h = pd_layer_call1(t->linear1, x);
  h = t->gelu ? pd_gelu(h, false) : pd_relu(h);
  return pd_layer_call1(t->linear2, pd_layer_call1(t->dropout, h));
}

/* residual + dropout(f(norm?(x))), then norm unless pre-norm. */
static pd_tensor *attn_block(tlayer *t, pd_layer *attn, pd_layer *norm, pd_layer *dropout, pd_tensor *x,
                             pd_tensor *mem, pd_tensor *mask) {
  pd_tensor *h = t->normalize_before ? pd_layer_call1(norm, x) : x;
  pd_tensor *kv = mem ? mem : h;
  h = pd_nn_multi_head_attention_call(attn, h, kv, kv, mask, NULL);
  pd_tensor *y = h ? pd_add(x, pd_layer_call1(dropout, h)) : NULL;
  return t->normalize_before ? y : pd_layer_call1(norm, y);
}

static pd_tensor *ffn_block(tlayer *t, pd_layer *norm, pd_layer *dropout, pd_tensor *x) {
  pd_tensor *h = t->normalize_before ? pd_layer_call1(norm, x) : x;
  pd_tensor *f = feed_forward(t, h);
  pd_tensor *y = f ? pd_add(x, pd_layer_call1(dropout, f)) : NULL;
  return t->normalize_before ? y : pd_layer_call1(norm, y);
}

/* Picks the optional inputs: slots[k] = the k-th optional input or NULL. */
static int pick_optional(const char *name, pd_tensor *const *in, int n_in, int n_req, int n_opt,
                         pd_tensor **slots) {
  unsigned present = take_present();
  if (n_in < n_req || n_in > n_req + n_opt)
    return pd_set_error(n_in > n_req + n_opt ? PD_ERR_UNIMPLEMENTED : PD_ERR_INVALID,
                        "%s: expects %d to %d inputs, got %d%s", name, n_req, n_req + n_opt, n_in,
                        n_in > n_req + n_opt ? " (a cache is not supported)" : "");
  int next = n_req;
  for (int k = 0; k < n_opt; k++) slots[k] = (present >> k & 1u) && next < n_in ? in[next++] : NULL;
  return 0;
}

static int tlayer_forward(pd_layer *self, pd_tensor *const *in, int n_in, pd_tensor **out, int max_out) {
  (void)max_out;
  tlayer *t = (tlayer *)self;
  pd_tensor *opt[2];
  int st = pick_optional(self->type->name, in, n_in, t->decoder ? 2 : 1, t->decoder ? 2 : 1, opt);
  if (st < 0) return st;
  pd_tensor *x = in[0];
  if (!t->decoder) {
    x = attn_block(t, t->self_attn, t->norm1, t->dropout1, x, NULL, opt[0]);
    out[0] = ffn_block(t, t->norm2, t->dropout2, x);
  } else {
    x = attn_block(t, t->self_attn, t->norm1, t->dropout1, x, NULL, opt[0]);
    x = attn_block(t, t->cross_attn, t->norm2, t->dropout2, x, in[1], opt[1]);
    out[0] = ffn_block(t, t->norm3, t->dropout3, x);
  }
  return out[0] ? 1 : pd_last_status();
}

static void tlayer_destroy(pd_layer *self) { free(((tlayer *)self)->cfg); }

static char *tlayer_repr(const pd_layer *self) {
  const tlayer *t = (const tlayer *)self;
  char *s = malloc(160);
  if (s)
    snprintf(s, 160, "d_model=%lld, nhead=%lld, dim_feedforward=%lld, normalize_before=%s",
             (long long)t->cfg->d_model, (long long)t->cfg->nhead, (long long)t->cfg->dff,
             t->normalize_before ? "True" : "False");
  return s;
}

static const pd_layer_type enc_layer_type = {"TransformerEncoderLayer", tlayer_forward, tlayer_destroy,
                                             tlayer_repr};
static const pd_layer_type dec_layer_type = {"TransformerDecoderLayer", tlayer_forward, tlayer_destroy,
                                             tlayer_repr};

static pd_layer *add_norm(pd_layer *parent, const char *name, const tcfg *c, pd_dtype dt) {
  pd_nn_layer_norm_opts no = {.epsilon = c->o.layer_norm_eps, .dtype = dt};
  pd_layer *l = pd_nn_layer_norm(1, &c->d_model, &no);
  return l ? pd_layer_add_sublayer(parent, name, l) : NULL;
}

static pd_layer *add_mha(pd_layer *parent, const char *name, const tcfg *c, double p, pd_dtype dt) {
  pd_nn_multi_head_attention_opts mo = {.dropout = p,
                                        .weight_attr = c->o.weight_attr,
                                        .bias_attr = c->o.bias_attr,
                                        .no_bias = c->o.no_bias,
                                        .dtype = dt};
  pd_layer *l = pd_nn_multi_head_attention(c->d_model, c->nhead, &mo);
  return l ? pd_layer_add_sublayer(parent, name, l) : NULL;
}

static pd_layer *add_dropout(pd_layer *parent, const char *name, double p) {
  pd_layer *l = pd_nn_dropout(p, NULL);
  return l ? pd_layer_add_sublayer(parent, name, l) : NULL;
}

static pd_layer *new_tlayer(bool decoder, int64_t d_model, int64_t nhead, int64_t dff,
                            const pd_nn_transformer_opts *opts) {
  const char *name = decoder ? "TransformerDecoderLayer" : "TransformerEncoderLayer";
  tcfg *c = malloc(sizeof *c);
  if (!c) {
    pd_set_error(PD_ERR_MEMORY, "%s: out of memory", name);
    return NULL;
  }
  cfg_init(c, d_model, nhead, dff, opts);
  if (!c->o.explicit_zero) {
    pd_opts_not_from_defaults(name, "pd_nn_transformer_defaults()");
    free(c);
    return NULL;
  }
  const char *act = c->o.activation ? c->o.activation : "relu";
  double p = c->o.dropout;
  double pa = c->o.attn_dropout == PD_NN_SAME_AS_DROPOUT ? p : c->o.attn_dropout;
  double pf = c->o.act_dropout == PD_NN_SAME_AS_DROPOUT ? p : c->o.act_dropout;
  if (d_model <= 0 || nhead <= 0 || dff <= 0 || d_model % nhead != 0 ||
      (strcmp(act, "relu") != 0 && strcmp(act, "gelu") != 0) || !(p >= 0.0 && p <= 1.0) ||
      !(pa >= 0.0 && pa <= 1.0) || !(pf >= 0.0 && pf <= 1.0)) {
    pd_set_error(PD_ERR_INVALID,
                 "%s: d_model %lld, nhead %lld, dim_feedforward %lld must be positive with d_model "
                 "divisible by nhead; activation '%s' must be relu or gelu; dropout %g, %g, %g in [0, 1]",
                 name, (long long)d_model, (long long)nhead, (long long)dff, act, p, pa, pf);
    free(c);
    return NULL;
  }
  tlayer *t = pd_layer_new(sizeof *t, decoder ? &dec_layer_type : &enc_layer_type);
  if (!t) {
    free(c);
    return NULL;
  }
  t->cfg = c;
  t->decoder = decoder;
  t->gelu = strcmp(act, "gelu") == 0;
  t->normalize_before = c->o.normalize_before;
  pd_dtype dt = pd_nn_layer_dtype(c->o.dtype);
  const pd_param_attr *wa = c->o.weight_attr, *ba = c->o.bias_attr;
  bool ok = (t->self_attn = add_mha(&t->base, "self_attn", c, pa, dt)) != NULL;
  if (ok && decoder) ok = (t->cross_attn = add_mha(&t->base, "cross_attn", c, pa, dt)) != NULL;
  ok = ok && (t->linear1 = add_linear(&t->base, "linear1", d_model, dff, wa, ba, c->o.no_bias, dt));
  ok = ok && (t->dropout = add_dropout(&t->base, "dropout", pf));
  ok = ok && (t->linear2 = add_linear(&t->base, "linear2", dff, d_model, wa, ba, c->o.no_bias, dt));
  ok = ok && (t->norm1 = add_norm(&t->base, "norm1", c, dt));
  ok = ok && (t->norm2 = add_norm(&t->base, "norm2", c, dt));
  if (ok && decoder) ok = (t->norm3 = add_norm(&t->base, "norm3", c, dt)) != NULL;
  ok = ok && (t->dropout1 = add_dropout(&t->base, "dropout1", p));
  ok = ok && (t->dropout2 = add_dropout(&t->base, "dropout2", p));
  if (ok && decoder) ok = (t->dropout3 = add_dropout(&t->base, "dropout3", p)) != NULL;
  if (!ok) {
    pd_layer_release(&t->base);
    return NULL;
  }
  return &t->base;
}

pd_layer *pd_nn_transformer_encoder_layer(int64_t d_model, int64_t nhead, int64_t dim_feedforward,
                                          const pd_nn_transformer_opts *opts) {
  return new_tlayer(false, d_model, nhead, dim_feedforward, opts);
}

pd_layer *pd_nn_transformer_decoder_layer(int64_t d_model, int64_t nhead, int64_t dim_feedforward,
                                          const pd_nn_transformer_opts *opts) {
  return new_tlayer(true, d_model, nhead, dim_feedforward, opts);
}

/* ---- stacks ------------------------------------------------------------------------------------- */

static const pd_layer_type layer_list_type = {"LayerList", NULL, NULL, NULL};

typedef struct tstack {
  pd_layer base;
  bool decoder;
  int n;
  pd_layer **layers; /* borrowed */
  pd_layer *norm;    /* borrowed, or NULL */
} tstack;

static int tstack_forward(pd_layer *self, pd_tensor *const *in, int n_in, pd_tensor **out, int max_out) {
  (void)max_out;
  tstack *s = (tstack *)self;
  pd_tensor *opt[2];
  int st = pick_optional(self->type->name, in, n_in, s->decoder ? 2 : 1, s->decoder ? 2 : 1, opt);
  if (st < 0) return st;
  pd_tensor *x = in[0];
  for (int i = 0; i < s->n && x; i++)
    x = s->decoder ? pd_nn_transformer_decoder_call(s->layers[i], x, in[1], opt[0], opt[1])
                   : pd_nn_transformer_encoder_call(s->layers[i], x, opt[0]);
  if (x && s->norm) x = pd_layer_call1(s->norm, x);
  out[0] = x;
  return x ? 1 : pd_last_status();
}

static void tstack_destroy(pd_layer *self) { free(((tstack *)self)->layers); }

static const pd_layer_type enc_type = {"TransformerEncoder", tstack_forward, tstack_destroy, NULL};
static const pd_layer_type dec_type = {"TransformerDecoder", tstack_forward, tstack_destroy, NULL};

static pd_layer *new_stack(bool decoder, pd_layer *first, int num_layers, pd_layer *norm) {
  const char *name = decoder ? "TransformerDecoder" : "TransformerEncoder";
  const pd_layer_type *want = decoder ? &dec_layer_type : &enc_layer_type;
  if (!first || first->type != want || num_layers < 1) {
    if (!first && pd_last_status() != PD_OK) {
      pd_layer_release(norm);
      return NULL;
    }
    pd_set_error(PD_ERR_INVALID, "%s: needs a %s (got %s) and num_layers >= 1 (got %d)", name, want->name,
                 first ? first->type->name : "NULL", num_layers);
    pd_layer_release(first);
    pd_layer_release(norm);
    return NULL;
  }
  tstack *s = pd_layer_new(sizeof *s, decoder ? &dec_type : &enc_type);
  pd_layer *list = pd_layer_new(sizeof(pd_layer), &layer_list_type);
  pd_layer **layers = calloc((size_t)num_layers, sizeof *layers);
  if (!s || !list || !layers) {
    pd_layer_release(s ? &s->base : NULL);
    pd_layer_release(list);
    free(layers);
    pd_layer_release(first);
    pd_layer_release(norm);
    if (pd_last_status() == PD_OK) pd_set_error(PD_ERR_MEMORY, "%s: out of memory", name);
    return NULL;
  }
  s->decoder = decoder;
  s->layers = layers;
  const tcfg *c = ((tlayer *)first)->cfg;
  bool ok = pd_layer_add_sublayer(&s->base, "layers", list) != NULL;
  for (int i = 0; i < num_layers; i++) {
    pd_layer *li = i == 0 ? first : ok ? new_tlayer(decoder, c->d_model, c->nhead, c->dff, &c->o) : NULL;
    char nm[16];
    snprintf(nm, sizeof nm, "%d", i);
    if (ok && li) {
      layers[i] = pd_layer_add_sublayer(list, nm, li);
      ok = layers[i] != NULL;
    } else {
      if (i == 0) pd_layer_release(li);
      ok = false;
    }
  }
  s->n = num_layers;
  if (ok && norm)
    ok = (s->norm = pd_layer_add_sublayer(&s->base, "norm", norm)) != NULL;
  else if (norm && !ok)
    pd_layer_release(norm);
  if (!ok) {
    pd_layer_release(&s->base);
    return NULL;
  }
  return &s->base;
}

pd_layer *pd_nn_transformer_encoder(pd_layer *encoder_layer, int num_layers, pd_layer *norm) {
  return new_stack(false, encoder_layer, num_layers, norm);
}

pd_layer *pd_nn_transformer_decoder(pd_layer *decoder_layer, int num_layers, pd_layer *norm) {
  return new_stack(true, decoder_layer, num_layers, norm);
}

/* ---- Transformer -------------------------------------------------------------------------------- */

typedef struct transformer {
  pd_layer base;
  pd_layer *encoder, *decoder; /* borrowed */
} transformer;

static int transformer_forward(pd_layer *self, pd_tensor *const *in, int n_in, pd_tensor **out, int max_out) {
  (void)max_out;
  transformer *t = (transformer *)self;
  pd_tensor *opt[3];
  int st = pick_optional("Transformer", in, n_in, 2, 3, opt);
  if (st < 0) return st;
  pd_tensor *memory = pd_nn_transformer_encoder_call(t->encoder, in[0], opt[0]);
  out[0] = memory ? pd_nn_transformer_decoder_call(t->decoder, in[1], memory, opt[1], opt[2]) : NULL;
  return out[0] ? 1 : pd_last_status();
}

static const pd_layer_type transformer_type = {"Transformer", transformer_forward, NULL, NULL};

pd_layer *pd_nn_transformer(int64_t d_model, int64_t nhead, int num_encoder_layers, int num_decoder_layers,
                            int64_t dim_feedforward, const pd_nn_transformer_opts *opts) {
  if (opts && !opts->explicit_zero) {
    pd_opts_not_from_defaults("Transformer", "pd_nn_transformer_defaults()");
    return NULL;
  }
  pd_dtype dt = pd_nn_layer_dtype(opts ? opts->dtype : PD_BOOL);
  pd_nn_layer_norm_opts no = {.epsilon = opts ? opts->layer_norm_eps : 1e-5, .dtype = dt};
  transformer *t = pd_layer_new(sizeof *t, &transformer_type);
  if (!t) return NULL;
  pd_layer *enc =
      pd_nn_transformer_encoder(pd_nn_transformer_encoder_layer(d_model, nhead, dim_feedforward, opts),
                                num_encoder_layers, pd_nn_layer_norm(1, &d_model, &no));
  t->encoder = enc ? pd_layer_add_sublayer(&t->base, "encoder", enc) : NULL;
  pd_layer *dec = t->encoder ? pd_nn_transformer_decoder(
                                   pd_nn_transformer_decoder_layer(d_model, nhead, dim_feedforward, opts),
                                   num_decoder_layers, pd_nn_layer_norm(1, &d_model, &no))
                             : NULL;
  t->decoder = dec ? pd_layer_add_sublayer(&t->base, "decoder", dec) : NULL;
  if (!t->decoder) {
    pd_layer_release(&t->base);
    return NULL;
  }
  return &t->base;
}

/* ---- calls with optional inputs ------------------------------------------------------------------- */

static pd_tensor *call_opt(pd_layer *l, pd_tensor *const *req, int n_req, pd_tensor *const *opt, int n_opt) {
  pd_tensor *in[8];
  int n = 0;
  unsigned present = 0;
  for (int i = 0; i < n_req; i++) in[n++] = req[i];
  for (int k = 0; k < n_opt; k++)
    if (opt[k]) {
      in[n++] = opt[k];
      present |= 1u << k;
    }
  for (int i = 0; i < n_req; i++)
    if (!req[i]) {
      if (pd_last_status() == PD_OK)
        pd_set_error(PD_ERR_INVALID, "%s: input %d is NULL", l ? pd_layer_full_name(l) : "layer", i);
      return NULL;
    }
  if (!l) {
    pd_set_error(PD_ERR_INVALID, "transformer call: the layer is NULL");
    return NULL;
  }
  pd_tensor *out[2] = {NULL, NULL};
  g_present = present;
  int r = pd_layer_call(l, in, n, out, 2);
  g_present = ~0u;
  return r > 0 ? out[0] : NULL;
}

pd_tensor *pd_nn_transformer_encoder_call(pd_layer *l, pd_tensor *src, pd_tensor *src_mask) {
  return call_opt(l, &src, 1, &src_mask, 1);
}

pd_tensor *pd_nn_transformer_decoder_call(pd_layer *l, pd_tensor *tgt, pd_tensor *memory, pd_tensor *tgt_mask,
                                          pd_tensor *memory_mask) {
  pd_tensor *req[2] = {tgt, memory}, *opt[2] = {tgt_mask, memory_mask};
  return call_opt(l, req, 2, opt, 2);
}

pd_tensor *pd_nn_transformer_call(pd_layer *l, pd_tensor *src, pd_tensor *tgt, pd_tensor *src_mask,
                                  pd_tensor *tgt_mask, pd_tensor *memory_mask) {
  pd_tensor *req[2] = {src, tgt}, *opt[3] = {src_mask, tgt_mask, memory_mask};
  return call_opt(l, req, 2, opt, 3);
}

pd_tensor *pd_nn_transformer_generate_square_subsequent_mask(int64_t n) {
  if (n < 0) {
    pd_set_error(PD_ERR_INVALID, "generate_square_subsequent_mask: length %lld is negative", (long long)n);
    return NULL;
  }
  double *d = malloc(sizeof *d * (size_t)(n * n > 0 ? n * n : 1));
  if (!d) {
    pd_set_error(PD_ERR_MEMORY, "generate_square_subsequent_mask: out of memory for %lld x %lld",
                 (long long)n, (long long)n);
    return NULL;
  }
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < n; j++) d[i * n + j] = j > i ? -INFINITY : 0.0;
  pd_tensor *t = pd_tensor_from_f64(d, pd_get_default_dtype(), 2, (int64_t[]){n, n});
  free(d);
  return t;
}
