/* Blocked (flash-style) scaled-dot-product attention on contiguous buffers
 * in the [batch, seq_len, num_heads, head_dim] layout.
 *
 * Forward: for each (batch, head, block of query rows) an online softmax
 * over blocks of keys (running max, running sum, rescaled accumulator), so
 * no [seq_q, seq_k] matrix is ever formed; writes the output and the per-row
 * logsumexp lse [batch, heads, seq_q] of the (masked, scaled) scores.
 * Backward: recomputes each block of scores from q, k and lse and forms
 * dq, dk, dv (D_i = rowsum(dout_i * out_i)).
 *
 * Scores: s_ij = scale * q_i . k_j, plus the mask (additive float, or a bool
 * mask where false drops the pair), and with causal pairs j > i dropped
 * (top-left aligned). A row whose every key is dropped has output 0 and lse
 * -inf. Dropout (probability p > 0) zeroes probabilities where the Philox
 * uniform of element e = ((b*H + h)*Sq + i)*Sk + j (counter first + e/4,
 * word e%4) is below p and scales the rest by 1/(1-p). */
#ifndef PADDLEC_KERNELS_ATTENTION_H
#define PADDLEC_KERNELS_ATTENTION_H

#include <stdbool.h>
#include <stdint.h>

enum { PD_ATTN_MASK_NONE = 0, PD_ATTN_MASK_BOOL = 1, PD_ATTN_MASK_ADD = 2 };

typedef struct pd_attn_geom {
  int64_t B, Sq, Sk, H, D, Dv; /* q [B,Sq,H,D], k [B,Sk,H,D], v [B,Sk,H,Dv] */
  int mask_kind;               /* PD_ATTN_MASK_* */
  const void *mask;            /* bool (1 byte) or the data dtype; element (b,h,i,j) at */
  int64_t mstride[4];          /* mask + b*ms[0] + h*ms[1] + i*ms[2] + j*ms[3] (0: broadcast) */
  bool causal;
  double scale;
  double dropout_p; /* 0: none */
  uint64_t rng_first, rng_key;
} pd_attn_geom;

/* Return 0, or -1 when out of memory for the block buffers. */
int pdk_attention_fwd_f32(const pd_attn_geom *g, const float *q, const float *k, const float *v, float *out,
                          float *lse);
int pdk_attention_fwd_f64(const pd_attn_geom *g, const double *q, const double *k, const double *v,
                          double *out, double *lse);
/* dq, dk, dv are written (not accumulated). */
int pdk_attention_bwd_f32(const pd_attn_geom *g, const float *q, const float *k, const float *v,
                          const float *out, const float *lse, const float *dout, float *dq, float *dk,
                          float *dv);
int pdk_attention_bwd_f64(const pd_attn_geom *g, const double *q, const double *k, const double *v,
                          const double *out, const double *lse, const double *dout, double *dq, double *dk,
                          double *dv);

#endif
