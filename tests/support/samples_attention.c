/* Gradcheck samples for the attention ops. Attr slots: i0 is_causal,
 * i1 has_mask, i2 dropout (off: finite differences need a fixed function),
 * f0 dropout_p, f1 scale. */
#include <math.h>

#include "op_samples.h"

#define S(...) ((const int64_t[]){__VA_ARGS__})

static int qkv(pd_tensor **in, pd_attrs *a, int64_t B, int64_t Sq, int64_t Sk, int64_t H, int64_t D,
               bool causal) {
  a->i[0] = causal;
  a->f[1] = 1.0 / sqrt((double)D);
  in[0] = sample_uniform(4, S(B, Sq, H, D), -1, 1);
  in[1] = sample_uniform(4, S(B, Sk, H, D), -1, 1);
  in[2] = sample_uniform(4, S(B, Sk, H, D), -1, 1);
  return 3;
}

static int s_sdpa(pd_tensor **in, pd_attrs *a) { return qkv(in, a, 2, 3, 4, 2, 3, false); }
static int s_sdpa_causal(pd_tensor **in, pd_attrs *a) { return qkv(in, a, 1, 4, 4, 2, 2, true); }
static int s_sdpa_mask(pd_tensor **in, pd_attrs *a) { /* a bool mask broadcast over batch and heads (the
                                                       * mask itself gets no gradient) */
  int n = qkv(in, a, 2, 3, 5, 1, 2, false);
  a->i[1] = 1;
  static const double keep[15] = {1, 0, 1, 1, 0, 0, 1, 1, 1, 1, 1, 1, 0, 1, 0};
  in[n++] = pd_tensor_from_f64(keep, PD_BOOL, 2, S(3, 5));
  return n;
}
static int s_sdpa_long(pd_tensor **in, pd_attrs *a) { /* more keys than one block */
  return qkv(in, a, 1, 2, 70, 1, 2, true);
}
static int s_sdpa_blocks(pd_tensor **in, pd_attrs *a) { /* Sq > Sk, each past a block size (the kernel's
                                                         * 128 and 256), causal, a bool mask of keys
                                                         * (a float mask would get no gradient) */
  int n = qkv(in, a, 1, 300, 130, 1, 1, true);
  a->i[1] = 1;
  double keep[130];
  for (int j = 0; j < 130; j++) keep[j] = j % 5 != 2;
  in[n++] = pd_tensor_from_f64(keep, PD_BOOL, 1, S(130));
  return n;
}

/* The grad op: query, key, value, [mask], then the forward's out,
 * softmax_lse and seed_offset, and dout. */
static int sdpa_grad_of(pd_tensor **in, pd_attrs *a, int n) {
  pd_tensor *out[PD_MAX_OUTPUTS];
  int n_out = 0;
  if (pd_dispatch(PD_OP_scaled_dot_product_attention, in, n, a, out, &n_out) != PD_OK)
    return pd_last_status();
  for (int k = 0; k < n_out; k++) in[n + k] = out[k];
  in[n + n_out] = sample_uniform(4, pd_tensor_shape(out[0]), -1, 1);
  return n + n_out + 1;
}
static int s_sdpa_grad(pd_tensor **in, pd_attrs *a) { return sdpa_grad_of(in, a, s_sdpa(in, a)); }
static int s_sdpa_grad_mask(pd_tensor **in, pd_attrs *a) { return sdpa_grad_of(in, a, s_sdpa_mask(in, a)); }

const pd_op_sample pd_samples_attention[] = {
    {"scaled_dot_product_attention", s_sdpa, 0},
    {"scaled_dot_product_attention", s_sdpa_causal, 0},
    {"scaled_dot_product_attention", s_sdpa_mask, 0},
    {"scaled_dot_product_attention", s_sdpa_long, 0},
    {"scaled_dot_product_attention", s_sdpa_blocks, 0},
    {"scaled_dot_product_attention_grad", s_sdpa_grad, 0},
    {"scaled_dot_product_attention_grad", s_sdpa_grad_mask, 0},
    {NULL, NULL, 0},
};
