/* Attention and the Transformer family: the fused scaled-dot-product
 * attention op, rotary position embedding, and paddle.nn's
 * MultiHeadAttention, TransformerEncoder(Layer), TransformerDecoder(Layer)
 * and Transformer. Tensors use Paddle's layouts: attention inputs are
 * [batch, seq_len, num_heads, head_dim]; layer inputs [batch, seq_len,
 * embed_dim]. */
#ifndef PADDLEC_TRANSFORMER_H
#define PADDLEC_TRANSFORMER_H

#include "paddlec/core.h"
#include "paddlec/nn.h"
#include "paddlec/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- functional ops ------------------------------------------------------ */

/* paddle.nn.functional.scaled_dot_product_attention: softmax(q k^T /
 * sqrt(head_dim) + mask) v per batch and head, computed blockwise (no
 * [seq, seq] matrix is formed). query [B, Sq, H, D], key [B, Sk, H, D],
 * value [B, Sk, H, Dv] -> [B, Sq, H, Dv]. attn_mask (NULL: none) broadcasts
 * to [B, H, Sq, Sk]: bool (true = attend) or additive float of query's
 * dtype. is_causal drops key j > query i. dropout_p applies to the attention
 * probabilities (scaled by 1/(1-p)) only when training. A query row with no
 * key left gives 0. Gradients flow to query, key and value (not the mask). */
PD_API pd_tensor *pd_scaled_dot_product_attention(pd_tensor *query, pd_tensor *key, pd_tensor *value,
                                                  pd_tensor *attn_mask, double dropout_p, bool is_causal,
                                                  bool training);

/* Rotary position embedding in the rotate-half form: x * cos + rotate_half(x)
 * * sin with rotate_half(x) = concat(-x[..., D/2:], x[..., :D/2]) over the
 * last dim (even D). cos and sin broadcast to x (e.g. [1, S, 1, D] for x of
 * [B, S, H, D]). Built from public ops (differentiable in x, cos, sin). */
PD_API pd_tensor *pd_rotary_embedding(pd_tensor *x, pd_tensor *cos, pd_tensor *sin);

/* paddle.incubate.nn.functional.fused_rotary_position_embedding for q (and k,
 * v when not NULL) of shape [B, S, H, D] with sin / cos of shape [1, S, 1, D]
 * or [S, D] (required here). position_ids ([B, S] int64, NULL: 0..S-1)
 * selects rows of sin / cos. use_neox_rotary_style = true rotates adjacent
 * pairs (x[2i], x[2i+1]); false rotates the two halves (rotate_half). Writes
 * the rotated tensors to out_q, out_k, out_v (NULL where the input is NULL).
 * Returns PD_OK or an error status. */
PD_API pd_status pd_fused_rotary_position_embedding(pd_tensor *q, pd_tensor *k, pd_tensor *v, pd_tensor *sin,
                                                    pd_tensor *cos, pd_tensor *position_ids,
                                                    bool use_neox_rotary_style, pd_tensor **out_q,
                                                    pd_tensor **out_k, pd_tensor **out_v);

/* ---- layers ----------------------------------------------------------------
 * Dropout acts only in training mode. Incremental-decoding caches (Paddle's
 * `cache` argument) are not supported. */

typedef struct pd_nn_multi_head_attention_opts {
  double dropout;                   /* on the attention weights; 0: 0.0 */
  int64_t kdim, vdim;               /* 0: embed_dim */
  bool need_weights;                /* also return the attention weights [B, H, Sq, Sk] */
  const pd_param_attr *weight_attr; /* of the four projections; default XavierUniform */
  const pd_param_attr *bias_attr;   /* default zeros */
  bool no_bias;                     /* bias_attr=False */
  pd_dtype dtype;
} pd_nn_multi_head_attention_opts;

/* paddle.nn.MultiHeadAttention(embed_dim, num_heads): sublayers q_proj,
 * k_proj (kdim -> embed_dim), v_proj (vdim -> embed_dim), out_proj (Linear).
 * Inputs (pd_layer_call): query [B, Sq, embed_dim], then optionally key
 * [B, Sk, kdim], value [B, Sk, vdim] (default: query) and attn_mask
 * (broadcast to [B, num_heads, Sq, Sk]; bool/int: false/0 masks, float:
 * added). Outputs: out [B, Sq, embed_dim], and the weights with need_weights.
 * Without need_weights the fused attention op is used. */
PD_API pd_layer *pd_nn_multi_head_attention(int64_t embed_dim, int64_t num_heads,
                                            const pd_nn_multi_head_attention_opts *opts);
/* Calls a MultiHeadAttention with optional key / value / attn_mask (NULL).
 * Returns out (weights, with need_weights, to *weights when not NULL). */
PD_API pd_tensor *pd_nn_multi_head_attention_call(pd_layer *mha, pd_tensor *query, pd_tensor *key,
                                                  pd_tensor *value, pd_tensor *attn_mask,
                                                  pd_tensor **weights);

/* attn_dropout / act_dropout: Paddle's None, the same probability as dropout. */
#define PD_NN_SAME_AS_DROPOUT (-1.0)

/* The Transformer layers' options. Paddle's dropout default is 0.1, and 0 is
 * a probability a user may mean, so the struct follows the options rule
 * (docs/architecture.md): NULL means every default, and a struct given must
 * start from pd_nn_transformer_defaults(), after which every field means
 * what it says:
 *   pd_nn_transformer_opts o = pd_nn_transformer_defaults();
 *   o.dropout = 0; // no dropout (attn_dropout and act_dropout follow it)
 * A struct literal is refused with an error naming the function. */
typedef struct pd_nn_transformer_opts {
  double dropout;                   /* 0.1 */
  const char *activation;           /* "relu" (NULL) or "gelu" */
  double attn_dropout;              /* PD_NN_SAME_AS_DROPOUT or a probability */
  double act_dropout;               /* PD_NN_SAME_AS_DROPOUT or a probability */
  bool normalize_before;            /* pre-norm */
  const pd_param_attr *weight_attr; /* every Linear; default XavierUniform */
  const pd_param_attr *bias_attr;
  bool no_bias;
  double layer_norm_eps; /* 1e-5 (0 reads as 1e-5, as LayerNorm's epsilon) */
  pd_dtype dtype;
  bool explicit_zero; /* set by pd_nn_transformer_defaults(): every field as written */
} pd_nn_transformer_opts;

/* Paddle's defaults for the Transformer layers (dropout 0.1, attn_dropout
 * and act_dropout the same as dropout, ReLU, post-norm, layer_norm_eps 1e-5),
 * explicit_zero set. */
PD_API pd_nn_transformer_opts pd_nn_transformer_defaults(void);

/* paddle.nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward):
 * sublayers self_attn, linear1, dropout (after the activation), linear2,
 * norm1, norm2, dropout1, dropout2 (Dropout layers). Inputs: src
 * [B, S, d_model] and optionally src_mask. */
PD_API pd_layer *pd_nn_transformer_encoder_layer(int64_t d_model, int64_t nhead, int64_t dim_feedforward,
                                                 const pd_nn_transformer_opts *opts);
/* paddle.nn.TransformerEncoder(encoder_layer, num_layers, norm): takes over
 * the reference to encoder_layer (layers.0) and adds num_layers - 1 fresh
 * layers of the same configuration (layers.1, ...); norm (NULL: none, else
 * taken over) is applied last. Inputs: src and optionally src_mask. */
PD_API pd_layer *pd_nn_transformer_encoder(pd_layer *encoder_layer, int num_layers, pd_layer *norm);

/* paddle.nn.TransformerDecoderLayer: sublayers self_attn, cross_attn,
 * linear1, dropout, linear2, norm1, norm2, norm3, dropout1, dropout2,
 * dropout3. Inputs: tgt, memory and optionally
 * tgt_mask, memory_mask. */
PD_API pd_layer *pd_nn_transformer_decoder_layer(int64_t d_model, int64_t nhead, int64_t dim_feedforward,
                                                 const pd_nn_transformer_opts *opts);
/* paddle.nn.TransformerDecoder(decoder_layer, num_layers, norm), as the
 * encoder. Inputs: tgt, memory and optionally tgt_mask, memory_mask. */
PD_API pd_layer *pd_nn_transformer_decoder(pd_layer *decoder_layer, int num_layers, pd_layer *norm);

/* paddle.nn.Transformer(d_model, nhead, num_encoder_layers,
 * num_decoder_layers, dim_feedforward): sublayers encoder and decoder, each
 * with a final LayerNorm. Inputs: src, tgt and optionally src_mask,
 * tgt_mask, memory_mask. Paddle's defaults: 512, 8, 6, 6, 2048. */
PD_API pd_layer *pd_nn_transformer(int64_t d_model, int64_t nhead, int num_encoder_layers,
                                   int num_decoder_layers, int64_t dim_feedforward,
                                   const pd_nn_transformer_opts *opts);

/* Calls an encoder layer / encoder with an optional src_mask (NULL). */
PD_API pd_tensor *pd_nn_transformer_encoder_call(pd_layer *l, pd_tensor *src, pd_tensor *src_mask);
/* Calls a decoder layer / decoder with optional masks (NULL). */
PD_API pd_tensor *pd_nn_transformer_decoder_call(pd_layer *l, pd_tensor *tgt, pd_tensor *memory,
                                                 pd_tensor *tgt_mask, pd_tensor *memory_mask);
/* Calls a Transformer with optional masks (NULL). */
PD_API pd_tensor *pd_nn_transformer_call(pd_layer *l, pd_tensor *src, pd_tensor *tgt, pd_tensor *src_mask,
                                         pd_tensor *tgt_mask, pd_tensor *memory_mask);

/* Transformer.generate_square_subsequent_mask(length): [n, n] in the default
 * dtype (float32 unless pd_set_default_dtype changed it), with
 * 0 on and below the diagonal and -inf above. */
PD_API pd_tensor *pd_nn_transformer_generate_square_subsequent_mask(int64_t n);

#ifdef __cplusplus
}
#endif
#endif
