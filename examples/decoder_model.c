/* The seed 003 decoder as layers; see decoder_model.h. */
#include "decoder_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* ---- RMSNorm: paddle.nn.RMSNorm with the seed's epsilon ------------------ */

static pd_layer *rms_norm_new(const decoder_config *cfg) {
  return pd_nn_rms_norm(1, &cfg->hidden_size,
                        &(pd_nn_rms_norm_opts){.epsilon = cfg->rms_epsilon > 0 ? cfg->rms_epsilon : 1.0});
}

static pd_layer *linear_nobias(int64_t in, int64_t out) {
  return pd_nn_linear(in, out, &(pd_nn_linear_opts){.no_bias = true});
}

/* ---- Attention ---------------------------------------------------------- */

typedef struct attention {
  pd_layer base;
  pd_layer *q_proj, *k_proj, *v_proj, *o_proj;
  int64_t num_heads, head_dim;
} attention;

/* in: hidden [B, S, hidden], cos, sin [1, S, 1, D]. Rotary q/k (rotate_half
 * form), then the fused causal scaled-dot-product attention. */
static int attention_forward(pd_layer *self, pd_tensor *const *in, int n_in, pd_tensor **out, int max_out) {
  (void)n_in, (void)max_out;
  attention *a = (attention *)self;
  const int64_t *xs = pd_tensor_shape(in[0]);
  const int64_t heads[] = {xs[0], xs[1], a->num_heads, a->head_dim};
  pd_tensor *q = pd_reshape(pd_layer_call1(a->q_proj, in[0]), 4, heads);
  pd_tensor *k = pd_reshape(pd_layer_call1(a->k_proj, in[0]), 4, heads);
  pd_tensor *v = pd_reshape(pd_layer_call1(a->v_proj, in[0]), 4, heads);
  if (!q || !k || !v) return pd_last_status();
  q = pd_rotary_embedding(q, in[1], in[2]);
  k = pd_rotary_embedding(k, in[1], in[2]);
  if (!q || !k) return pd_last_status();
  pd_tensor *o = pd_scaled_dot_product_attention(q, k, v, NULL, 0.0, true, self->training);
  out[0] = pd_layer_call1(a->o_proj, pd_reshape(o, 3, (int64_t[]){xs[0], xs[1], xs[2]}));
  return out[0] ? 1 : pd_last_status();
}

static const pd_layer_type attention_type = {.name = "Attention", .forward = attention_forward};

static pd_layer *attention_new(const decoder_config *cfg) {
  attention *a = pd_layer_new(sizeof *a, &attention_type);
  if (!a) return NULL;
  int64_t h = cfg->hidden_size;
  a->num_heads = cfg->num_heads;
  a->head_dim = h / cfg->num_heads;
  a->q_proj = pd_layer_add_sublayer(&a->base, "q_proj", linear_nobias(h, h));
  a->k_proj = pd_layer_add_sublayer(&a->base, "k_proj", linear_nobias(h, h));
  a->v_proj = pd_layer_add_sublayer(&a->base, "v_proj", linear_nobias(h, h));
  a->o_proj = pd_layer_add_sublayer(&a->base, "o_proj", linear_nobias(h, h));
  if (!a->q_proj || !a->k_proj || !a->v_proj || !a->o_proj) {
    pd_layer_release(&a->base);
    return NULL;
  }
  return &a->base;
}

/* ---- Mlp: down(swiglu(gate(x), up(x))) ------------------------------------ */

typedef struct mlp {
  pd_layer base;
  pd_layer *gate_proj, *up_proj, *down_proj;
} mlp;

static int mlp_forward(pd_layer *self, pd_tensor *const *in, int n_in, pd_tensor **out, int max_out) {
  (void)n_in, (void)max_out;
  mlp *m = (mlp *)self;
  pd_tensor *x = pd_swiglu(pd_layer_call1(m->gate_proj, in[0]), pd_layer_call1(m->up_proj, in[0]));
  out[0] = pd_layer_call1(m->down_proj, x);
  return out[0] ? 1 : pd_last_status();
}

static const pd_layer_type mlp_type = {.name = "Mlp", .forward = mlp_forward};

static pd_layer *mlp_new(const decoder_config *cfg) {
  mlp *m = pd_layer_new(sizeof *m, &mlp_type);
  if (!m) return NULL;
  m->gate_proj =
      pd_layer_add_sublayer(&m->base, "gate_proj", linear_nobias(cfg->hidden_size, cfg->intermediate_size));
  m->up_proj =
      pd_layer_add_sublayer(&m->base, "up_proj", linear_nobias(cfg->hidden_size, cfg->intermediate_size));
  m->down_proj =
      pd_layer_add_sublayer(&m->base, "down_proj", linear_nobias(cfg->intermediate_size, cfg->hidden_size));
  if (!m->gate_proj || !m->up_proj || !m->down_proj) {
    pd_layer_release(&m->base);
    return NULL;
  }
  return &m->base;
}

/* ---- DecoderLayer ---------------------------------------------------------- */

typedef struct decoder_layer {
  pd_layer base;
  pd_layer *self_attn, *mlp, *input_layernorm, *post_attn_layernorm;
} decoder_layer;

/* in: hidden, cos, sin (passed on to the attention) */
static int decoder_layer_forward(pd_layer *self, pd_tensor *const *in, int n_in, pd_tensor **out,
                                 int max_out) {
  (void)n_in, (void)max_out;
  decoder_layer *l = (decoder_layer *)self;
  pd_tensor *attn_in[3] = {pd_layer_call1(l->input_layernorm, in[0]), in[1], in[2]};
  pd_tensor *attn_out = NULL;
  if (!attn_in[0] || pd_layer_call(l->self_attn, attn_in, 3, &attn_out, 1) != 1) return pd_last_status();
  pd_tensor *h = pd_add(in[0], attn_out);
  out[0] = pd_add(h, pd_layer_call1(l->mlp, pd_layer_call1(l->post_attn_layernorm, h)));
  return out[0] ? 1 : pd_last_status();
}

static const pd_layer_type decoder_layer_type = {.name = "DecoderLayer", .forward = decoder_layer_forward};

static pd_layer *decoder_layer_new(const decoder_config *cfg) {
  decoder_layer *l = pd_layer_new(sizeof *l, &decoder_layer_type);
  if (!l) return NULL;
  l->self_attn = pd_layer_add_sublayer(&l->base, "self_attn", attention_new(cfg));
  l->mlp = pd_layer_add_sublayer(&l->base, "mlp", mlp_new(cfg));
  l->input_layernorm = pd_layer_add_sublayer(&l->base, "input_layernorm", rms_norm_new(cfg));
  l->post_attn_layernorm = pd_layer_add_sublayer(&l->base, "post_attn_layernorm", rms_norm_new(cfg));
  if (!l->self_attn || !l->mlp || !l->input_layernorm || !l->post_attn_layernorm) {
    pd_layer_release(&l->base);
    return NULL;
  }
  return &l->base;
}

/* ---- Model ----------------------------------------------------------------- */

typedef struct decoder_model {
  pd_layer base;
  pd_layer *embed_tokens, *layers, *norm;
  pd_tensor *weight;    /* lm head [hidden, vocab] */
  pd_tensor *cos, *sin; /* [1, max_seq_len, 1, head_dim], buffers */
  int num_layers;
  int64_t max_seq_len;
} decoder_model;

static int decoder_model_forward(pd_layer *self, pd_tensor *const *in, int n_in, pd_tensor **out,
                                 int max_out) {
  decoder_model *m = (decoder_model *)self;
  const int64_t *is = pd_tensor_shape(in[0]);
  int64_t s = is[1];
  if (pd_tensor_ndim(in[0]) != 2 || s > m->max_seq_len)
    return pd_set_error(PD_ERR_SHAPE, "DecoderModel: input_ids must be [batch, seq<=%lld], got ndim %d",
                        (long long)m->max_seq_len, pd_tensor_ndim(in[0]));
  const int64_t axis = 1, zero = 0;
  pd_tensor *cos = pd_slice(m->cos, 1, &axis, &zero, &s), *sin = pd_slice(m->sin, 1, &axis, &zero, &s);
  /* the seed's causal mask is the attention op's is_causal */
  pd_tensor *h = pd_layer_call1(m->embed_tokens, in[0]);
  for (int i = 0; i < m->num_layers && h; i++) {
    pd_tensor *layer_in[3] = {h, cos, sin};
    if (pd_layer_call(pd_nn_layer_list_get(m->layers, i), layer_in, 3, &h, 1) != 1) return pd_last_status();
  }
  pd_tensor *logits = pd_matmul(pd_layer_call1(m->norm, h), m->weight, false, false);
  if (!logits) return pd_last_status();
  if (n_in < 2 || !in[1]) {
    out[0] = logits;
    return 1;
  }
  pd_tensor *loss = pd_cross_entropy(logits, pd_unsqueeze(in[1], 1, (int64_t[]){2}), NULL,
                                     DECODER_IGNORE_INDEX, PD_REDUCTION_MEAN, false, -1, true, 0.0);
  if (!loss) return pd_last_status();
  out[0] = loss;
  if (max_out > 1) out[1] = logits;
  return max_out > 1 ? 2 : 1;
}

static const pd_layer_type decoder_model_type = {.name = "DecoderModel", .forward = decoder_model_forward};

/* cos/sin of t * inv_freq, inv_freq[i] = base^(-2i / D), duplicated over the
 * two halves: [1, S, 1, D]. */
static pd_status rotary_cache(decoder_model *m, int64_t head_dim, double base) {
  int64_t s = m->max_seq_len, d = head_dim;
  float *c = malloc((size_t)(s * d) * sizeof *c), *sn = malloc((size_t)(s * d) * sizeof *sn);
  if (!c || !sn) {
    free(c), free(sn);
    pd_set_error(PD_ERR_MEMORY, "DecoderModel: no memory for the rotary cache");
    return PD_ERR_MEMORY;
  }
  for (int64_t t = 0; t < s; t++)
    for (int64_t i = 0; i < d / 2; i++) {
      float inv_freq = (float)(1.0 / pow(base, (double)(2 * i) / (double)d));
      float f = (float)t * inv_freq;
      c[t * d + i] = c[t * d + i + d / 2] = cosf(f);
      sn[t * d + i] = sn[t * d + i + d / 2] = sinf(f);
    }
  const int64_t shape[] = {1, s, 1, d};
  pd_tensor *tc = pd_to_tensor(c, PD_FLOAT32, 4, shape), *ts = pd_to_tensor(sn, PD_FLOAT32, 4, shape);
  free(c), free(sn);
  pd_status st = tc && ts ? PD_OK : pd_last_status();
  if (st == PD_OK) st = pd_layer_register_buffer(&m->base, "cos_cached", tc, false);
  if (st == PD_OK) st = pd_layer_register_buffer(&m->base, "sin_cached", ts, false);
  m->cos = tc, m->sin = ts;
  pd_tensor_release(tc), pd_tensor_release(ts); /* the layer keeps them */
  return st;
}

pd_layer *decoder_model_new(const decoder_config *cfg) {
  if (cfg->hidden_size % cfg->num_heads || (cfg->hidden_size / cfg->num_heads) % 2) {
    pd_set_error(PD_ERR_INVALID,
                 "DecoderModel: hidden_size %lld must split into num_heads %lld even head dims",
                 (long long)cfg->hidden_size, (long long)cfg->num_heads);
    return NULL;
  }
  decoder_model *m = pd_layer_new(sizeof *m, &decoder_model_type);
  if (!m) return NULL;
  m->num_layers = cfg->num_layers;
  m->max_seq_len = cfg->max_seq_len;
  m->embed_tokens = pd_layer_add_sublayer(&m->base, "embed_tokens",
                                          pd_nn_embedding(cfg->vocab_size, cfg->hidden_size, NULL));
  m->layers = pd_layer_add_sublayer(&m->base, "layers", pd_nn_layer_list(NULL, 0));
  for (int i = 0; i < cfg->num_layers && m->layers; i++)
    if (pd_nn_layer_list_append(m->layers, decoder_layer_new(cfg)) != PD_OK) goto fail;
  m->norm = pd_layer_add_sublayer(&m->base, "norm", rms_norm_new(cfg));
  m->weight = pd_layer_create_parameter(&m->base, "weight", 2, (int64_t[]){cfg->hidden_size, cfg->vocab_size},
                                        PD_FLOAT32, NULL, NULL, false);
  if (!m->embed_tokens || !m->layers || !m->norm || !m->weight) goto fail;
  if (rotary_cache(m, cfg->hidden_size / cfg->num_heads, cfg->rope_base > 0 ? cfg->rope_base : 10000.0) !=
      PD_OK)
    goto fail;
  return &m->base;
fail:
  pd_layer_release(&m->base);
  return NULL;
}

double decoder_forward_flops(const decoder_config *cfg, int64_t batch, int64_t seq) {
  double tokens = (double)batch * (double)seq, h = (double)cfg->hidden_size;
  double proj = 2.0 * tokens * (4.0 * h * h + 3.0 * h * (double)cfg->intermediate_size);
  double attn = 2.0 * 2.0 * (double)batch * (double)seq * (double)seq * h; /* q k^T and p v */
  double head = 2.0 * tokens * h * (double)cfg->vocab_size;
  return (double)cfg->num_layers * (proj + attn) + head;
}
