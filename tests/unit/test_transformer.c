/* MultiHeadAttention and the Transformer layers: outputs against the same
 * computation composed here from public ops with the layers' own weights
 * (fused and explicit attention paths, masks, pre/post norm), parameter
 * names and counts, the causal mask function, bad inputs. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

static unsigned g_rng = 777u;
static double rnd(void) {
  g_rng = g_rng * 1103515245u + 12345u;
  return (double)((g_rng >> 8) & 0xffffu) / 65536.0;
}

static pd_tensor *rand_t(pd_dtype dt, int nd, const int64_t *shape, double lo, double hi) {
  int64_t n = 1;
  for (int d = 0; d < nd; d++) n *= shape[d];
  double *v = malloc(sizeof(double) * (size_t)(n + 1));
  for (int64_t i = 0; i < n; i++) v[i] = lo + (hi - lo) * rnd();
  pd_tensor *t = pd_tensor_from_f64(v, dt, nd, shape);
  free(v);
  return t;
}

/* Paddle's defaults with the given dropout, norm placement, activation and dtype. */
static pd_nn_transformer_opts topts(double dropout, bool pre, const char *act, pd_dtype dt) {
  pd_nn_transformer_opts o = pd_nn_transformer_defaults();
  o.dropout = dropout;
  o.normalize_before = pre;
  o.activation = act;
  o.dtype = dt;
  return o;
}

/* The parameter at a dotted path ("self_attn.q_proj.weight"). */
static pd_tensor *par(pd_layer *l, const char *path) {
  char buf[128];
  strncpy(buf, path, sizeof buf - 1);
  buf[sizeof buf - 1] = 0;
  char *s = buf, *dot;
  while ((dot = strchr(s, '.')) != NULL) {
    *dot = 0;
    l = pd_layer_sublayer(l, s);
    assert_non_null(l);
    s = dot + 1;
  }
  pd_tensor *p = pd_layer_parameter(l, s);
  assert_non_null(p);
  return p;
}

static pd_tensor *lin(pd_layer *l, const char *name, pd_tensor *x) {
  char w[96], b[96];
  snprintf(w, sizeof w, "%s.weight", name);
  snprintf(b, sizeof b, "%s.bias", name);
  return pd_add(pd_matmul(x, par(l, w), false, false), par(l, b));
}

/* MultiHeadAttention composed: projections, softmax(q k^T / sqrt(hd) + mask) v, out_proj. */
static pd_tensor *ref_mha(pd_layer *l, const char *pre, pd_tensor *q, pd_tensor *k, pd_tensor *v,
                          pd_tensor *mask, int64_t nh, pd_tensor **weights) {
  char n[4][96];
  const char *nm[4] = {"q_proj", "k_proj", "v_proj", "out_proj"};
  for (int i = 0; i < 4; i++) snprintf(n[i], sizeof n[i], "%s%s", pre, nm[i]);
  const int64_t *qs = pd_tensor_shape(q), *ks = pd_tensor_shape(k);
  int64_t E = qs[2], hd = E / nh, perm[4] = {0, 2, 1, 3};
  pd_tensor *Q = pd_transpose(pd_reshape(lin(l, n[0], q), 4, (int64_t[]){qs[0], qs[1], nh, hd}), 4, perm);
  pd_tensor *K = pd_transpose(pd_reshape(lin(l, n[1], k), 4, (int64_t[]){ks[0], ks[1], nh, hd}), 4, perm);
  pd_tensor *V = pd_transpose(pd_reshape(lin(l, n[2], v), 4, (int64_t[]){ks[0], ks[1], nh, hd}), 4, perm);
  pd_tensor *s = pd_scale(pd_matmul(Q, K, false, true), 1.0 / sqrt((double)hd), 0, true);
  if (mask) s = pd_add(s, mask);
  pd_tensor *w = pd_softmax(s, -1);
  if (weights) *weights = w;
  pd_tensor *o =
      pd_reshape(pd_transpose(pd_matmul(w, V, false, false), 4, perm), 3, (int64_t[]){qs[0], qs[1], E});
  return lin(l, n[3], o);
}

static void test_mha_against_composed(void **state) {
  (void)state;
  pd_scope_begin();
  for (int nw = 0; nw < 2; nw++) {
    pd_nn_multi_head_attention_opts o = {.kdim = 6, .vdim = 5, .need_weights = nw, .dtype = PD_FLOAT64};
    pd_layer *m = pd_nn_multi_head_attention(8, 2, &o);
    assert_non_null(m);
    pd_tensor *q = rand_t(PD_FLOAT64, 3, (int64_t[]){2, 3, 8}, -1, 1);
    pd_tensor *k = rand_t(PD_FLOAT64, 3, (int64_t[]){2, 4, 6}, -1, 1);
    pd_tensor *v = rand_t(PD_FLOAT64, 3, (int64_t[]){2, 4, 5}, -1, 1);
    pd_tensor *mask = rand_t(PD_FLOAT64, 4, (int64_t[]){2, 1, 3, 4}, -1, 0);
    pd_tensor *w = NULL, *wr = NULL;
    pd_tensor *out = pd_nn_multi_head_attention_call(m, q, k, v, mask, &w);
    expect_close(out, ref_mha(m, "", q, k, v, mask, 2, &wr), 1e-12, 1e-12);
    if (nw)
      expect_close(w, wr, 1e-12, 1e-12);
    else
      assert_null(w);
    /* a bool mask: false -> -1e9 */
    double bm[12] = {1, 1, 0, 1, 0, 1, 1, 1, 1, 1, 1, 0};
    pd_tensor *b = pd_tensor_from_f64(bm, PD_BOOL, 2, (int64_t[]){3, 4});
    pd_tensor *add = pd_scale(pd_cast(b, PD_FLOAT64), 1e9, -1.0, false);
    expect_close(pd_nn_multi_head_attention_call(m, q, k, v, b, NULL), ref_mha(m, "", q, k, v, add, 2, NULL),
                 1e-12, 1e-12);
    /* self-attention with key = value = query */
    pd_layer *s = pd_nn_multi_head_attention(
        8, 4, &(pd_nn_multi_head_attention_opts){.need_weights = nw, .dtype = PD_FLOAT64});
    expect_close(pd_nn_multi_head_attention_call(s, q, NULL, NULL, NULL, NULL),
                 ref_mha(s, "", q, q, q, NULL, 4, NULL), 1e-12, 1e-12);
    pd_layer_release(s);
    pd_layer_release(m);
  }
  pd_scope_end();
  expect_no_live_tensors();
}

static pd_tensor *ln(pd_layer *l, const char *name, pd_tensor *x) {
  char w[96], b[96];
  snprintf(w, sizeof w, "%s.weight", name);
  snprintf(b, sizeof b, "%s.bias", name);
  int64_t d = pd_tensor_shape(x)[2];
  return pd_layer_norm(x, 1, &d, par(l, w), par(l, b), 1e-5);
}

static pd_tensor *ref_encoder_layer(pd_layer *l, pd_tensor *x, pd_tensor *mask, bool pre, bool gelu) {
  pd_tensor *h = pre ? ln(l, "norm1", x) : x;
  pd_tensor *y = pd_add(x, ref_mha(l, "self_attn.", h, h, h, mask, 2, NULL));
  if (!pre) y = ln(l, "norm1", y);
  h = pre ? ln(l, "norm2", y) : y;
  pd_tensor *a = lin(l, "linear1", h);
  a = gelu ? pd_gelu(a, false) : pd_relu(a);
  pd_tensor *z = pd_add(y, lin(l, "linear2", a));
  return pre ? z : ln(l, "norm2", z);
}

static void randomize_norms(pd_layer *l) { /* LayerNorm starts at ones / zeros: make it matter */
  pd_named_tensors ps = {0};
  assert_int_equal(pd_layer_named_parameters(l, &ps), PD_OK);
  for (int i = 0; i < ps.n; i++)
    if (strstr(ps.names[i], "norm")) {
      pd_tensor *r =
          rand_t(PD_FLOAT64, pd_tensor_ndim(ps.tensors[i]), pd_tensor_shape(ps.tensors[i]), 0.5, 1.5);
      pd_initializer init = pd_nn_initializer_assign(r);
      assert_int_equal(pd_initializer_apply(&init, ps.tensors[i]), PD_OK);
    }
  pd_named_tensors_free(&ps);
}

static void test_encoder_layer_against_composed(void **state) {
  (void)state;
  pd_scope_begin();
  for (int pre = 0; pre < 2; pre++) {
    pd_nn_transformer_opts o = topts(0, pre, pre ? "gelu" : NULL, PD_FLOAT64);
    pd_layer *l = pd_nn_transformer_encoder_layer(8, 2, 16, &o);
    assert_non_null(l);
    randomize_norms(l);
    pd_tensor *x = rand_t(PD_FLOAT64, 3, (int64_t[]){2, 5, 8}, -1, 1);
    pd_tensor *mask = pd_nn_transformer_generate_square_subsequent_mask(5);
    pd_tensor *m64 = pd_cast(mask, PD_FLOAT64);
    expect_close(pd_nn_transformer_encoder_call(l, x, m64), ref_encoder_layer(l, x, m64, pre, pre), 1e-10,
                 1e-10);
    expect_close(pd_layer_call1(l, x), ref_encoder_layer(l, x, NULL, pre, pre), 1e-10, 1e-10);
    /* a two-layer encoder: layer 0 is l, layer 1 a fresh one of the same config */
    pd_layer *enc = pd_nn_transformer_encoder(pd_layer_retain(l), 2, NULL);
    assert_non_null(enc);
    pd_layer *l1 = pd_layer_sublayer(pd_layer_sublayer(enc, "layers"), "1");
    assert_true(pd_layer_sublayer(pd_layer_sublayer(enc, "layers"), "0") == l);
    expect_close(pd_layer_call1(enc, x),
                 ref_encoder_layer(l1, ref_encoder_layer(l, x, NULL, pre, pre), NULL, pre, pre), 1e-10,
                 1e-10);
    pd_layer_release(enc);
    pd_layer_release(l);
  }
  pd_scope_end();
  expect_no_live_tensors();
}

static int count_and_check(pd_layer *l, const char *const *names, int nn) {
  pd_named_tensors ps = {0};
  assert_int_equal(pd_layer_named_parameters(l, &ps), PD_OK);
  for (int k = 0; k < nn; k++) {
    bool found = false;
    for (int i = 0; i < ps.n; i++) found |= strcmp(ps.names[i], names[k]) == 0;
    if (!found) fail_msg("parameter %s not found", names[k]);
  }
  int n = ps.n;
  pd_named_tensors_free(&ps);
  return n;
}

static void test_parameter_names_and_counts(void **state) {
  (void)state;
  pd_scope_begin();
  pd_layer *m = pd_nn_multi_head_attention(8, 2, NULL);
  const char *mn[] = {"q_proj.weight", "q_proj.bias", "k_proj.weight", "v_proj.bias", "out_proj.weight"};
  assert_int_equal(count_and_check(m, mn, 5), 8);
  expect_shape(par(m, "k_proj.weight"), 2, (int64_t[]){8, 8});
  pd_layer_release(m);
  pd_layer *e = pd_nn_transformer_encoder_layer(8, 2, 16, NULL);
  const char *en[] = {"self_attn.q_proj.weight", "linear1.weight", "linear1.bias",
                      "linear2.weight",          "norm1.weight",   "norm2.bias"};
  assert_int_equal(count_and_check(e, en, 6), 16);
  expect_shape(par(e, "linear1.weight"), 2, (int64_t[]){8, 16});
  const char *subs[] = {"self_attn", "linear1", "dropout",  "linear2",
                        "norm1",     "norm2",   "dropout1", "dropout2"};
  pd_named_layers nl = {0};
  assert_int_equal(pd_layer_named_sublayers(e, &nl), PD_OK);
  for (int i = 0; i < 8; i++) assert_non_null(pd_layer_sublayer(e, subs[i]));
  pd_named_layers_free(&nl);
  pd_layer *enc = pd_nn_transformer_encoder(e, 3, pd_nn_layer_norm(1, (int64_t[]){8}, NULL));
  const char *encn[] = {"layers.0.self_attn.q_proj.weight", "layers.2.linear2.bias", "norm.weight"};
  assert_int_equal(count_and_check(enc, encn, 3), 50);
  pd_layer_release(enc);
  pd_layer *d = pd_nn_transformer_decoder_layer(8, 2, 16, NULL);
  const char *dn[] = {"self_attn.q_proj.weight", "cross_attn.k_proj.bias", "norm3.weight"};
  assert_int_equal(count_and_check(d, dn, 3), 26);
  pd_layer_release(d);
  pd_layer *t = pd_nn_transformer(8, 2, 2, 1, 16, NULL);
  assert_non_null(t);
  const char *tn[] = {"encoder.layers.1.norm2.weight", "encoder.norm.bias",
                      "decoder.layers.0.cross_attn.out_proj.bias", "decoder.norm.weight"};
  assert_int_equal(count_and_check(t, tn, 4), 2 * 16 + 2 + 26 + 2);
  pd_layer_release(t);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_decoder_and_transformer_run(void **state) {
  (void)state;
  pd_scope_begin();
  pd_nn_transformer_opts o = topts(0, false, NULL, PD_FLOAT64);
  pd_layer *d = pd_nn_transformer_decoder_layer(8, 2, 16, &o);
  randomize_norms(d);
  pd_tensor *tgt = rand_t(PD_FLOAT64, 3, (int64_t[]){2, 4, 8}, -1, 1);
  pd_tensor *mem = rand_t(PD_FLOAT64, 3, (int64_t[]){2, 6, 8}, -1, 1);
  pd_tensor *tm = pd_cast(pd_nn_transformer_generate_square_subsequent_mask(4), PD_FLOAT64);
  pd_tensor *mm = rand_t(PD_FLOAT64, 4, (int64_t[]){2, 1, 4, 6}, -1, 0);
  /* post-norm decoder layer composed */
  pd_tensor *y = ln(d, "norm1", pd_add(tgt, ref_mha(d, "self_attn.", tgt, tgt, tgt, tm, 2, NULL)));
  y = ln(d, "norm2", pd_add(y, ref_mha(d, "cross_attn.", y, mem, mem, mm, 2, NULL)));
  y = ln(d, "norm3", pd_add(y, lin(d, "linear2", pd_relu(lin(d, "linear1", y)))));
  expect_close(pd_nn_transformer_decoder_call(d, tgt, mem, tm, mm), y, 1e-10, 1e-10);
  /* memory_mask without tgt_mask */
  pd_tensor *y2 = ln(d, "norm1", pd_add(tgt, ref_mha(d, "self_attn.", tgt, tgt, tgt, NULL, 2, NULL)));
  y2 = ln(d, "norm2", pd_add(y2, ref_mha(d, "cross_attn.", y2, mem, mem, mm, 2, NULL)));
  y2 = ln(d, "norm3", pd_add(y2, lin(d, "linear2", pd_relu(lin(d, "linear1", y2)))));
  expect_close(pd_nn_transformer_decoder_call(d, tgt, mem, NULL, mm), y2, 1e-10, 1e-10);
  pd_layer_release(d);
  /* the full model in training mode (dropout on): shapes and gradients reach every parameter */
  pd_layer *t = pd_nn_transformer(8, 2, 1, 1, 16, NULL);
  pd_tensor *src = rand_t(PD_FLOAT32, 3, (int64_t[]){2, 5, 8}, -1, 1);
  pd_tensor *tg = rand_t(PD_FLOAT32, 3, (int64_t[]){2, 4, 8}, -1, 1);
  pd_tensor *out =
      pd_nn_transformer_call(t, src, tg, NULL, pd_nn_transformer_generate_square_subsequent_mask(4), NULL);
  expect_shape(out, 3, (int64_t[]){2, 4, 8});
  assert_int_equal(pd_backward(pd_sum(pd_multiply(out, out), NULL, 0, false), NULL, false), PD_OK);
  pd_named_tensors ps = {0};
  assert_int_equal(pd_layer_named_parameters(t, &ps), PD_OK);
  for (int i = 0; i < ps.n; i++)
    if (!pd_tensor_grad(ps.tensors[i])) fail_msg("no gradient for %s", ps.names[i]);
  pd_named_tensors_free(&ps);
  pd_layer_release(t);
  pd_scope_end();
  expect_no_live_tensors();
}

/* The sublayer at a dotted path ("encoder.layers.1"). */
static pd_layer *sub_at(pd_layer *l, const char *path) {
  char buf[128];
  snprintf(buf, sizeof buf, "%s", path);
  for (char *s = strtok(buf, "."); s; s = strtok(NULL, ".")) {
    l = pd_layer_sublayer(l, s);
    assert_non_null(l);
  }
  return l;
}

/* TransformerDecoderLayer composed: self-attention (tgt_mask), cross-attention
 * on memory (memory_mask; memory itself is never normalized), FFN; each
 * block residual, with its norm before (pre-norm) or after. */
static pd_tensor *ref_decoder_layer(pd_layer *l, pd_tensor *x, pd_tensor *mem, pd_tensor *tm, pd_tensor *mm,
                                    bool pre, bool gelu) {
  pd_tensor *h = pre ? ln(l, "norm1", x) : x;
  pd_tensor *y = pd_add(x, ref_mha(l, "self_attn.", h, h, h, tm, 2, NULL));
  if (!pre) y = ln(l, "norm1", y);
  h = pre ? ln(l, "norm2", y) : y;
  pd_tensor *z = pd_add(y, ref_mha(l, "cross_attn.", h, mem, mem, mm, 2, NULL));
  if (!pre) z = ln(l, "norm2", z);
  h = pre ? ln(l, "norm3", z) : z;
  pd_tensor *a = lin(l, "linear1", h);
  a = gelu ? pd_gelu(a, false) : pd_relu(a);
  pd_tensor *o = pd_add(z, lin(l, "linear2", a));
  return pre ? o : ln(l, "norm3", o);
}

/* A bool memory mask [2, 1, 4, 6] (every row keeps some key) and its additive
 * form (mask - 1) * 1e9, as Paddle's _convert_attention_mask. */
static pd_tensor *bool_mask(int64_t b, int64_t t, int64_t s, pd_tensor **additive, pd_dtype dt) {
  int64_t n = b * t * s;
  double *v = malloc(sizeof(double) * (size_t)n);
  for (int64_t i = 0; i < n; i++) v[i] = (i % s == 0) || rnd() > 0.35;
  pd_tensor *m = pd_tensor_from_f64(v, PD_BOOL, 4, (int64_t[]){b, 1, t, s});
  free(v);
  *additive = pd_scale(pd_cast(m, dt), 1e9, -1.0, false);
  return m;
}

static void test_decoder_stack_against_composed(void **state) {
  (void)state;
  pd_scope_begin();
  for (int pre = 0; pre < 2; pre++) {
    pd_nn_transformer_opts o = topts(0, pre, pre ? "gelu" : NULL, PD_FLOAT64);
    pd_layer *d0 = pd_nn_transformer_decoder_layer(8, 2, 16, &o);
    pd_layer *norm = pd_nn_layer_norm(1, (int64_t[]){8}, &(pd_nn_layer_norm_opts){.dtype = PD_FLOAT64});
    pd_layer *dec = pd_nn_transformer_decoder(d0, 3, norm);
    assert_non_null(dec);
    randomize_norms(dec); /* the final norm too */
    pd_tensor *tgt = rand_t(PD_FLOAT64, 3, (int64_t[]){2, 4, 8}, -1, 1);
    pd_tensor *mem = rand_t(PD_FLOAT64, 3, (int64_t[]){2, 6, 8}, -1, 1);
    pd_tensor *tm = pd_nn_transformer_generate_square_subsequent_mask(4); /* float32: cast by the layer */
    pd_tensor *tm64 = pd_cast(tm, PD_FLOAT64), *mm_add = NULL;
    pd_tensor *mm = bool_mask(2, 4, 6, &mm_add, PD_FLOAT64);
    /* layers.0 .. layers.2 in sequence, then the decoder's norm */
    pd_tensor *want = tgt;
    char path[32];
    for (int i = 0; i < 3; i++) {
      snprintf(path, sizeof path, "layers.%d", i);
      want = ref_decoder_layer(sub_at(dec, path), want, mem, tm64, mm_add, pre, pre);
    }
    want = ln(dec, "norm", want);
    pd_tensor *got = pd_nn_transformer_decoder_call(dec, tgt, mem, tm, mm);
    expect_close(got, want, 1e-10, 1e-10);
    /* the same from the (value-tested) layer calls and the norm layer */
    pd_tensor *x = tgt;
    for (int i = 0; i < 3; i++) {
      snprintf(path, sizeof path, "layers.%d", i);
      x = pd_nn_transformer_decoder_call(sub_at(dec, path), x, mem, tm, mm);
    }
    expect_close(got, pd_layer_call1(norm, x), 1e-12, 1e-12);
    /* only a memory mask; then no mask at all */
    want = tgt;
    for (int i = 0; i < 3; i++) {
      snprintf(path, sizeof path, "layers.%d", i);
      want = ref_decoder_layer(sub_at(dec, path), want, mem, NULL, mm_add, pre, pre);
    }
    expect_close(pd_nn_transformer_decoder_call(dec, tgt, mem, NULL, mm), ln(dec, "norm", want), 1e-10,
                 1e-10);
    want = tgt;
    for (int i = 0; i < 3; i++) {
      snprintf(path, sizeof path, "layers.%d", i);
      want = ref_decoder_layer(sub_at(dec, path), want, mem, NULL, NULL, pre, pre);
    }
    pd_tensor *in2[2] = {tgt, mem}, *out[1];
    assert_int_equal(pd_layer_call(dec, in2, 2, out, 1), 1);
    expect_close(out[0], ln(dec, "norm", want), 1e-10, 1e-10);
    pd_layer_release(dec);
  }
  /* without a final norm the stack ends with the last layer */
  pd_nn_transformer_opts o = topts(0, false, NULL, PD_FLOAT64);
  pd_layer *dec = pd_nn_transformer_decoder(pd_nn_transformer_decoder_layer(8, 2, 16, &o), 2, NULL);
  randomize_norms(dec);
  pd_tensor *tgt = rand_t(PD_FLOAT64, 3, (int64_t[]){2, 3, 8}, -1, 1);
  pd_tensor *mem = rand_t(PD_FLOAT64, 3, (int64_t[]){2, 5, 8}, -1, 1);
  pd_tensor *tm = pd_cast(pd_nn_transformer_generate_square_subsequent_mask(3), PD_FLOAT64);
  pd_tensor *want = ref_decoder_layer(sub_at(dec, "layers.0"), tgt, mem, tm, NULL, false, false);
  want = ref_decoder_layer(sub_at(dec, "layers.1"), want, mem, tm, NULL, false, false);
  expect_close(pd_nn_transformer_decoder_call(dec, tgt, mem, tm, NULL), want, 1e-10, 1e-10);
  pd_layer_release(dec);
  pd_scope_end();
  expect_no_live_tensors();
}

/* Transformer: memory = encoder.norm(encoder layers(src, src_mask)), then
 * decoder.norm(decoder layers(tgt, memory, tgt_mask, memory_mask)). */
static pd_tensor *ref_transformer(pd_layer *t, int n_enc, int n_dec, pd_tensor *src, pd_tensor *tgt,
                                  pd_tensor *sm, pd_tensor *tm, pd_tensor *mm, bool pre, bool gelu) {
  char path[48];
  pd_tensor *mem = src;
  for (int i = 0; i < n_enc; i++) {
    snprintf(path, sizeof path, "encoder.layers.%d", i);
    mem = ref_encoder_layer(sub_at(t, path), mem, sm, pre, gelu);
  }
  mem = ln(t, "encoder.norm", mem);
  pd_tensor *x = tgt;
  for (int i = 0; i < n_dec; i++) {
    snprintf(path, sizeof path, "decoder.layers.%d", i);
    x = ref_decoder_layer(sub_at(t, path), x, mem, tm, mm, pre, gelu);
  }
  return ln(t, "decoder.norm", x);
}

static void test_transformer_against_composed(void **state) {
  (void)state;
  pd_scope_begin();
  for (int pre = 0; pre < 2; pre++) {
    /* Paddle's default dropout 0.1: eval() turns it off */
    pd_nn_transformer_opts o = topts(0.1, pre, pre ? "gelu" : NULL, PD_FLOAT64);
    pd_layer *t = pd_nn_transformer(8, 2, 2, 3, 16, &o);
    assert_non_null(t);
    randomize_norms(t);
    pd_layer_eval(t);
    pd_tensor *src = rand_t(PD_FLOAT64, 3, (int64_t[]){2, 6, 8}, -1, 1);
    pd_tensor *tgt = rand_t(PD_FLOAT64, 3, (int64_t[]){2, 4, 8}, -1, 1);
    pd_tensor *sm = rand_t(PD_FLOAT64, 4, (int64_t[]){2, 1, 6, 6}, -2, 0);
    pd_tensor *tm = pd_nn_transformer_generate_square_subsequent_mask(4);
    pd_tensor *tm64 = pd_cast(tm, PD_FLOAT64), *mm_add = NULL;
    pd_tensor *mm = bool_mask(2, 4, 6, &mm_add, PD_FLOAT64);
    pd_tensor *got = pd_nn_transformer_call(t, src, tgt, sm, tm, mm);
    expect_close(got, ref_transformer(t, 2, 3, src, tgt, sm, tm64, mm_add, pre, pre), 1e-10, 1e-10);
    /* only the causal tgt_mask */
    expect_close(pd_nn_transformer_call(t, src, tgt, NULL, tm, NULL),
                 ref_transformer(t, 2, 3, src, tgt, NULL, tm64, NULL, pre, pre), 1e-10, 1e-10);
    /* the encoder and decoder sublayers called by hand give the same */
    pd_tensor *mem = pd_nn_transformer_encoder_call(sub_at(t, "encoder"), src, sm);
    expect_close(pd_nn_transformer_decoder_call(sub_at(t, "decoder"), tgt, mem, tm, mm), got, 1e-12, 1e-12);
    /* in training mode dropout acts */
    pd_layer_train(t);
    pd_tensor *tr = pd_nn_transformer_call(t, src, tgt, sm, tm, mm);
    double diff = pd_tensor_item(pd_max(pd_abs(pd_subtract(tr, got)), NULL, 0, false));
    assert_true(diff > 1e-3);
    pd_layer_release(t);
  }
  /* float32, post-norm, to 1e-5 */
  pd_nn_transformer_opts o32 = topts(0, false, NULL, PD_BOOL);
  pd_layer *t = pd_nn_transformer(8, 2, 1, 2, 16, &o32);
  randomize_norms(t);
  pd_tensor *src = rand_t(PD_FLOAT32, 3, (int64_t[]){3, 5, 8}, -1, 1);
  pd_tensor *tgt = rand_t(PD_FLOAT32, 3, (int64_t[]){3, 4, 8}, -1, 1);
  pd_tensor *tm = pd_nn_transformer_generate_square_subsequent_mask(4), *mm_add = NULL;
  pd_tensor *mm = bool_mask(3, 4, 5, &mm_add, PD_FLOAT32);
  expect_close(pd_nn_transformer_call(t, src, tgt, NULL, tm, mm),
               ref_transformer(t, 1, 2, src, tgt, NULL, tm, mm_add, false, false), 1e-5, 1e-5);
  pd_layer_release(t);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_square_subsequent_mask(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *m = pd_nn_transformer_generate_square_subsequent_mask(3);
  expect_shape(m, 2, (int64_t[]){3, 3});
  assert_int_equal(pd_tensor_dtype(m), PD_FLOAT32);
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++) {
      double v = pd_tensor_item_at(m, i * 3 + j);
      if (j > i)
        assert_true(isinf(v) && v < 0);
      else
        assert_true(v == 0.0);
    }
  expect_error(pd_nn_transformer_generate_square_subsequent_mask(-2), "generate_square_subsequent_mask",
               "-2");
  pd_scope_end();
  expect_no_live_tensors();
}

/* The p of Dropout sublayer `name` of l, from its repr "Dropout(p=0.1, ...)". */
static double dropout_p(pd_layer *l, const char *name) {
  char *r = pd_layer_to_string(pd_layer_sublayer(l, name));
  assert_non_null(r);
  const char *at = strstr(r, "p=");
  assert_non_null(at);
  double p = atof(at + 2);
  free(r);
  return p;
}

/* The options rule: from pd_nn_transformer_defaults() every field means what
 * it says, 0 included (Paddle accepts dropout 0), attn_dropout and
 * act_dropout follow dropout unless set; a struct literal is refused. */
static void test_transformer_options_mean_what_they_say(void **state) {
  (void)state;
  pd_scope_begin();
  pd_nn_transformer_opts d = pd_nn_transformer_defaults();
  assert_true(d.explicit_zero && d.dropout == 0.1 && d.layer_norm_eps == 1e-5);
  assert_true(d.attn_dropout == PD_NN_SAME_AS_DROPOUT && d.act_dropout == PD_NN_SAME_AS_DROPOUT);
  /* NULL: Paddle's 0.1 everywhere */
  pd_layer *l = pd_nn_transformer_encoder_layer(8, 2, 16, NULL);
  assert_true(dropout_p(l, "dropout") == 0.1 && dropout_p(l, "dropout1") == 0.1);
  pd_layer_release(l);
  /* dropout = 0 means 0, and the two that follow it are 0 too */
  pd_nn_transformer_opts o = pd_nn_transformer_defaults();
  o.dropout = 0;
  o.dtype = PD_FLOAT64;
  l = pd_nn_transformer_decoder_layer(8, 2, 16, &o);
  assert_non_null(l);
  assert_true(dropout_p(l, "dropout") == 0 && dropout_p(l, "dropout1") == 0 && dropout_p(l, "dropout3") == 0);
  pd_tensor *x = rand_t(PD_FLOAT64, 3, (int64_t[]){2, 4, 8}, -1, 1);
  pd_tensor *mem = rand_t(PD_FLOAT64, 3, (int64_t[]){2, 3, 8}, -1, 1);
  pd_layer_train(l); /* training mode, yet nothing is dropped */
  pd_tensor *tr = pd_nn_transformer_decoder_call(l, x, mem, NULL, NULL);
  pd_layer_eval(l);
  expect_close(tr, pd_nn_transformer_decoder_call(l, x, mem, NULL, NULL), 0, 0);
  pd_layer_release(l);
  /* attn_dropout and act_dropout 0 with dropout 0.5 */
  o = pd_nn_transformer_defaults();
  o.dropout = 0.5;
  o.attn_dropout = 0;
  o.act_dropout = 0;
  l = pd_nn_transformer_encoder_layer(8, 2, 16, &o);
  assert_true(dropout_p(l, "dropout") == 0 && dropout_p(l, "dropout1") == 0.5);
  char *r = pd_layer_to_string(pd_layer_sublayer(l, "self_attn"));
  assert_non_null(strstr(r, "dropout=0"));
  free(r);
  pd_layer_release(l);
  /* out of range */
  o.attn_dropout = -0.5;
  assert_null(pd_nn_transformer_encoder_layer(8, 2, 16, &o));
  assert_non_null(strstr(pd_last_error(), "-0.5"));
  /* a literal (here {.activation = "gelu"}, whose dropout would read 0) is refused */
  pd_nn_transformer_opts lit = {.activation = "gelu"};
  assert_null(pd_nn_transformer_encoder_layer(8, 2, 16, &lit));
  assert_non_null(strstr(pd_last_error(), "must start from pd_nn_transformer_defaults()"));
  assert_null(pd_nn_transformer(8, 2, 1, 1, 16, &lit));
  assert_non_null(strstr(pd_last_error(), "Transformer: options must start from"));
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_transformer_bad_inputs(void **state) {
  (void)state;
  pd_scope_begin();
  assert_null(pd_nn_multi_head_attention(10, 3, NULL));
  assert_non_null(strstr(pd_last_error(), "10"));
  assert_non_null(strstr(pd_last_error(), "num_heads (3)"));
  assert_null(pd_nn_transformer_encoder_layer(8, 3, 16, NULL));
  assert_non_null(strstr(pd_last_error(), "nhead 3"));
  pd_nn_transformer_opts tanh_o = topts(0.1, false, "tanh", PD_FLOAT32);
  assert_null(pd_nn_transformer_encoder_layer(8, 2, 16, &tanh_o));
  assert_non_null(strstr(pd_last_error(), "tanh"));
  pd_layer *m = pd_nn_multi_head_attention(8, 2, NULL);
  pd_tensor *q = pd_full(3, (int64_t[]){2, 3, 6}, 0.5, PD_FLOAT32);
  expect_error(pd_nn_multi_head_attention_call(m, q, NULL, NULL, NULL, NULL), "MultiHeadAttention",
               "[2, 3, 6]");
  pd_tensor *q8 = pd_full(3, (int64_t[]){2, 3, 8}, 0.5, PD_FLOAT32);
  pd_tensor *in[5] = {q8, q8, q8, q8, q8}, *out[2];
  assert_true(pd_layer_call(m, in, 5, out, 2) < 0);
  assert_non_null(strstr(pd_last_error(), "cache"));
  pd_layer_release(m);
  pd_layer *e = pd_nn_transformer_encoder_layer(8, 2, 16, NULL);
  assert_null(pd_nn_transformer_decoder(e, 2, NULL)); /* takes over e */
  assert_non_null(strstr(pd_last_error(), "TransformerEncoderLayer"));
  pd_scope_end();
  expect_no_live_tensors();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_mha_against_composed),
      cmocka_unit_test(test_encoder_layer_against_composed),
      cmocka_unit_test(test_parameter_names_and_counts),
      cmocka_unit_test(test_decoder_and_transformer_run),
      cmocka_unit_test(test_decoder_stack_against_composed),
      cmocka_unit_test(test_transformer_against_composed),
      cmocka_unit_test(test_square_subsequent_mask),
      cmocka_unit_test(test_transformer_options_mean_what_they_say),
      cmocka_unit_test(test_transformer_bad_inputs),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
