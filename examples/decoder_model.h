/* The decoder-only transformer of Paddle's to_distributed example (seed 003)
 * as C layers: token embedding, num_layers x DecoderLayer (RMSNorm ->
 * attention with rotary q/k (pd_rotary_embedding) and causal fused
 * attention (pd_scaled_dot_product_attention) -> residual, RMSNorm -> SwiGLU
 * MLP -> residual), a final RMSNorm and an lm-head weight [hidden, vocab],
 * with the cross entropy over next-token labels (ignore_index -100).
 * Shared by examples/decoder_lm.c and bench/bench_decoder.c. */
#ifndef PADDLEC_EXAMPLES_DECODER_MODEL_H
#define PADDLEC_EXAMPLES_DECODER_MODEL_H

#include <paddlec.h>

typedef struct decoder_config {
  int64_t vocab_size;
  int64_t hidden_size;
  int64_t num_heads;
  int64_t intermediate_size;
  int num_layers;
  int64_t max_seq_len; /* rows of the rotary cos/sin cache */
  double rope_base;    /* 0: 10000 */
  double rms_epsilon;  /* 0: 1.0, the seed's variance_epsilon */
} decoder_config;

#define DECODER_IGNORE_INDEX (-100)

/* Model(vocab_size, hidden_size, intermediate_size) with sublayers
 * embed_tokens, layers.{i}.{self_attn.{q,k,v,o}_proj, mlp.{gate,up,down}_proj,
 * input_layernorm, post_attn_layernorm}, norm and the parameter weight.
 * Forward: input_ids [B, S] int64 (S <= max_seq_len) and optionally labels
 * [B, S] int64; outputs (loss, logits) with labels, else (logits). The loss
 * is the mean cross entropy over labels != -100. */
pd_layer *decoder_model_new(const decoder_config *cfg);

/* Multiply-add FLOPs (2 per MAC) of the matmuls of one forward pass over a
 * [batch, seq] batch: projections, q k^T and p v of every layer (the full
 * seq x seq products) and the lm head. */
double decoder_forward_flops(const decoder_config *cfg, int64_t batch, int64_t seq);

#endif
