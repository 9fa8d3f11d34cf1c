/* Every reducing op gives the same bits on 1, 2, 3 and 8 threads, forward
 * and backward (docs/determinism.md). The op list is generated from the
 * registry: every op of the reduction, norm and loss families
 * (src/ops/defs/{reduction,norm,loss}.def) and the other reducing ops of
 * k_extra (products, convolutions, attention, softmax) must have a case below, or the test fails. Inputs are
 * large enough to be split over threads (the reduction grain is 32768 elements) and to span several of the
 * fixed blocks of each loop shape: a few long outputs, a long reduction across short rows, and one total. Ops
 * that only serve as another op's backward name that op (`via`). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ops/op_registry.h"
#include "test_util.h"

#define AX(...) \
  ((const int64_t[]){__VA_ARGS__}), (int)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t))
#define MAX_RES 48

/* Results of one case: the outputs, then the gradients of a fixed random
 * linear functional of them. */
typedef struct res {
  int n;
  pd_tensor *t[MAX_RES];
} res;

static void push(res *r, pd_tensor *t) {
  if (!t) fail_msg("an op failed: %s", pd_last_error());
  if (r->n == MAX_RES) fail_msg("too many results");
  r->t[r->n++] = t;
}

/* Pushes out, then the gradients of sum(out * w) (w random) with respect to
 * the n inputs (which must have been made to need gradients). */
static void out_and_grads(res *r, pd_tensor *out, pd_tensor *const *in, int n) {
  push(r, out);
  if (!n || !pd_dtype_is_floating(pd_tensor_dtype(out))) return;
  pd_tensor *w = pd_randn(pd_tensor_ndim(out), pd_tensor_shape(out), pd_tensor_dtype(out));
  pd_tensor *l = pd_sum(pd_multiply(out, w), NULL, 0, false);
  pd_tensor *g[8] = {0};
  if (pd_grad(&l, 1, in, n, NULL, &(pd_grad_opts){.allow_unused = true}, g) != PD_OK)
    fail_msg("backward failed: %s", pd_last_error());
  for (int i = 0; i < n; i++)
    if (g[i]) push(r, g[i]);
}

static pd_tensor *leaf(pd_tensor *t) {
  pd_tensor_set_stop_gradient(t, false);
  return t;
}
static pd_tensor *randn2(int64_t a, int64_t b) { return leaf(pd_randn(2, SHAPE(a, b), PD_FLOAT32)); }

/* The three reduction geometries: [4, 150000] over axis 1 (few long
 * outputs), [150000, 4] over axis 0 (short rows), and all of [300000]. */
typedef pd_tensor *(*reduce_fn)(pd_tensor *x, const int64_t *axis, int naxis);
static void reduce_cases(res *r, reduce_fn f, double lo_shift) {
  pd_tensor *a = randn2(4, 150000), *b = randn2(150000, 4), *c = leaf(pd_randn(1, SHAPE(300000), PD_FLOAT32));
  if (lo_shift != 0) { /* values near lo_shift (products) */
    a = leaf(pd_scale(a, 1e-4, lo_shift, true));
    b = leaf(pd_scale(b, 1e-4, lo_shift, true));
    c = leaf(pd_scale(c, 1e-4, lo_shift, true));
  }
  out_and_grads(r, f(a, AX(1)), &a, 1);
  out_and_grads(r, f(b, AX(0)), &b, 1);
  out_and_grads(r, f(c, NULL, 0), &c, 1);
}

static pd_tensor *f_sum(pd_tensor *x, const int64_t *ax, int n) { return pd_sum(x, ax, n, false); }
static pd_tensor *f_mean(pd_tensor *x, const int64_t *ax, int n) { return pd_mean(x, ax, n, false); }
static pd_tensor *f_max(pd_tensor *x, const int64_t *ax, int n) { return pd_max(x, ax, n, false); }
static pd_tensor *f_min(pd_tensor *x, const int64_t *ax, int n) { return pd_min(x, ax, n, true); }
static pd_tensor *f_prod(pd_tensor *x, const int64_t *ax, int n) { return pd_prod(x, ax, n, false); }
static pd_tensor *f_lse(pd_tensor *x, const int64_t *ax, int n) { return pd_logsumexp(x, ax, n, false); }
static pd_tensor *f_var(pd_tensor *x, const int64_t *ax, int n) { return pd_var(x, ax, n, true, false); }
static pd_tensor *f_std(pd_tensor *x, const int64_t *ax, int n) { return pd_std(x, ax, n, false, true); }
static pd_tensor *f_norm2(pd_tensor *x, const int64_t *ax, int n) { return pd_norm(x, 2, ax, n, false); }
static pd_tensor *f_norm3(pd_tensor *x, const int64_t *ax, int n) { return pd_norm(x, 3, ax, n, false); }
static pd_tensor *f_all(pd_tensor *x, const int64_t *ax, int n) {
  return pd_all(pd_greater_than(x, pd_full(0, NULL, -4.0, PD_FLOAT32)), ax, n, false);
}
static pd_tensor *f_any(pd_tensor *x, const int64_t *ax, int n) {
  return pd_any(pd_greater_than(x, pd_full(0, NULL, 4.5, PD_FLOAT32)), ax, n, false);
}
static pd_tensor *f_argmax(pd_tensor *x, const int64_t *ax, int n) {
  return pd_argmax(x, n ? ax[0] : PD_AXIS_NONE, false, PD_INT64);
}
static pd_tensor *f_argmin(pd_tensor *x, const int64_t *ax, int n) {
  return pd_argmin(x, n ? ax[0] : PD_AXIS_NONE, false, PD_INT64);
}
static pd_tensor *f_cumsum(pd_tensor *x, const int64_t *ax, int n) {
  return pd_cumsum(x, n ? ax[0] : PD_AXIS_NONE, PD_NUM_DTYPES);
}
static pd_tensor *f_topk(pd_tensor *x, const int64_t *ax, int n) {
  pd_tensor *v = NULL, *i = NULL;
  if (pd_topk(x, 5, n ? ax[0] : 0, true, true, &v, &i) != PD_OK) return NULL;
  return v;
}
static pd_tensor *f_argsort(pd_tensor *x, const int64_t *ax, int n) {
  return pd_argsort(x, n ? ax[0] : 0, false, true);
}

static void c_sum(res *r) { reduce_cases(r, f_sum, 0); }
static void c_mean(res *r) { reduce_cases(r, f_mean, 0); }
static void c_max(res *r) { reduce_cases(r, f_max, 0); }
static void c_min(res *r) { reduce_cases(r, f_min, 0); }
static void c_prod(res *r) { reduce_cases(r, f_prod, 1.0); }
static void c_all(res *r) { reduce_cases(r, f_all, 0); }
static void c_any(res *r) { reduce_cases(r, f_any, 0); }
static void c_argmax(res *r) { reduce_cases(r, f_argmax, 0); }
static void c_argmin(res *r) { reduce_cases(r, f_argmin, 0); }
static void c_logsumexp(res *r) { reduce_cases(r, f_lse, 0); }
static void c_var(res *r) { reduce_cases(r, f_var, 0); }
static void c_std(res *r) { reduce_cases(r, f_std, 0); }
static void c_norm(res *r) {
  reduce_cases(r, f_norm2, 0);
  reduce_cases(r, f_norm3, 0);
}
static void c_cumsum(res *r) { reduce_cases(r, f_cumsum, 0); }
static void c_topk(res *r) { reduce_cases(r, f_topk, 0); }
static void c_argsort(res *r) { reduce_cases(r, f_argsort, 0); }

/* ---- norms ----------------------------------------------------------- */
static void row_norm(res *r, bool rms) {
  pd_tensor *x = randn2(2048, 384), *w = leaf(pd_randn(1, SHAPE(384), PD_FLOAT32)),
            *b = leaf(pd_randn(1, SHAPE(384), PD_FLOAT32));
  pd_tensor *in[3] = {x, w, b};
  pd_tensor *y = rms ? pd_rms_norm(x, 1, SHAPE(384), w, 1e-5) : pd_layer_norm(x, 1, SHAPE(384), w, b, 1e-5);
  out_and_grads(r, y, in, rms ? 2 : 3);
}
static void c_layer_norm(res *r) { row_norm(r, false); }
static void c_rms_norm(res *r) { row_norm(r, true); }

static void batch_norm_case(res *r, bool training, const char *fmt) {
  bool nhwc = fmt && strcmp(fmt, "NHWC") == 0;
  pd_tensor *x = leaf(pd_randn(4, nhwc ? SHAPE(32, 16, 16, 24) : SHAPE(32, 24, 16, 16), PD_FLOAT32));
  pd_tensor *w = leaf(pd_randn(1, SHAPE(24), PD_FLOAT32)), *b = leaf(pd_randn(1, SHAPE(24), PD_FLOAT32));
  pd_tensor *rm = pd_zeros(1, SHAPE(24), PD_FLOAT32), *rv = pd_ones(1, SHAPE(24), PD_FLOAT32);
  pd_tensor *in[3] = {x, w, b};
  out_and_grads(r, pd_batch_norm(x, rm, rv, w, b, training, 0.9, 1e-5, fmt, PD_GLOBAL_STATS_NONE), in, 3);
  push(r, rm);
  push(r, rv);
}
static void c_batch_norm(res *r) {
  batch_norm_case(r, true, NULL);
  batch_norm_case(r, true, "NHWC");
}
static void c_batch_norm_infer(res *r) { batch_norm_case(r, false, NULL); }
static void c_group_norm(res *r) {
  pd_tensor *x = leaf(pd_randn(4, SHAPE(8, 32, 32, 32), PD_FLOAT32));
  pd_tensor *w = leaf(pd_randn(1, SHAPE(32), PD_FLOAT32)), *b = leaf(pd_randn(1, SHAPE(32), PD_FLOAT32));
  pd_tensor *in[3] = {x, w, b};
  out_and_grads(r, pd_group_norm(x, 8, 1e-5, w, b, NULL), in, 3);
}
static void c_instance_norm(res *r) {
  pd_tensor *x = leaf(pd_randn(4, SHAPE(4, 16, 64, 64), PD_FLOAT32));
  pd_tensor *w = leaf(pd_randn(1, SHAPE(16), PD_FLOAT32)), *b = leaf(pd_randn(1, SHAPE(16), PD_FLOAT32));
  pd_tensor *in[3] = {x, w, b};
  out_and_grads(r, pd_instance_norm(x, NULL, NULL, w, b, true, 0.9, 1e-5, NULL), in, 3);
}

/* ---- losses (mean over 300000 elements; sum for one of each) ----------- */
#define LOSS_N 300000
static void pair(pd_tensor **x, pd_tensor **y) {
  *x = leaf(pd_randn(1, SHAPE(LOSS_N), PD_FLOAT32));
  *y = leaf(pd_randn(1, SHAPE(LOSS_N), PD_FLOAT32));
}
static void c_mse(res *r) {
  pd_tensor *in[2];
  pair(&in[0], &in[1]);
  out_and_grads(r, pd_mse_loss(in[0], in[1], PD_REDUCTION_MEAN), in, 2);
  out_and_grads(r, pd_mse_loss(in[0], in[1], PD_REDUCTION_SUM), in, 2);
}
static void c_l1(res *r) {
  pd_tensor *in[2];
  pair(&in[0], &in[1]);
  out_and_grads(r, pd_l1_loss(in[0], in[1], PD_REDUCTION_MEAN), in, 2);
}
static void c_smooth_l1(res *r) {
  pd_tensor *in[2];
  pair(&in[0], &in[1]);
  out_and_grads(r, pd_smooth_l1_loss(in[0], in[1], PD_REDUCTION_MEAN, 1.0), in, 2);
}
static void c_bce(res *r) {
  pd_tensor *p = leaf(pd_sigmoid(pd_randn(1, SHAPE(LOSS_N), PD_FLOAT32))),
            *y = pd_rand(1, SHAPE(LOSS_N), PD_FLOAT32);
  out_and_grads(r, pd_binary_cross_entropy(p, y, NULL, PD_REDUCTION_MEAN), &p, 1);
}
static void c_bce_logits(res *r) {
  pd_tensor *z = leaf(pd_randn(1, SHAPE(LOSS_N), PD_FLOAT32)), *y = pd_rand(1, SHAPE(LOSS_N), PD_FLOAT32);
  out_and_grads(r, pd_binary_cross_entropy_with_logits(z, y, NULL, PD_REDUCTION_MEAN, NULL), &z, 1);
}
static void c_kl_div(res *r) {
  pd_tensor *in[2];
  pair(&in[0], &in[1]);
  out_and_grads(r, pd_kl_div(in[0], in[1], PD_REDUCTION_MEAN, true), in, 2);
}
static void c_margin_ranking(res *r) {
  pd_tensor *in[2];
  pair(&in[0], &in[1]);
  pd_tensor *lab = pd_sign(pd_randn(1, SHAPE(LOSS_N), PD_FLOAT32));
  out_and_grads(r, pd_margin_ranking_loss(in[0], in[1], lab, 0.1, PD_REDUCTION_MEAN), in, 2);
}
static void c_cross_entropy(res *r) {
  pd_tensor *z = randn2(4096, 100), *lab = pd_randint(0, 100, 1, SHAPE(4096), PD_INT64);
  out_and_grads(r, pd_cross_entropy(z, lab, NULL, -100, PD_REDUCTION_MEAN, false, -1, true, 0.0), &z, 1);
  out_and_grads(r, pd_cross_entropy(z, lab, NULL, -100, PD_REDUCTION_SUM, false, -1, true, 0.1), &z, 1);
}
static void c_nll(res *r) {
  pd_tensor *z = randn2(4096, 100), *lab = pd_randint(0, 100, 1, SHAPE(4096), PD_INT64);
  out_and_grads(r, pd_nll_loss(pd_log_softmax(z, -1), lab, NULL, -100, PD_REDUCTION_MEAN), &z, 1);
}

/* ---- other reducing ops ------------------------------------------------ */
static void c_softmax(res *r) {
  pd_tensor *x = randn2(512, 1000);
  out_and_grads(r, pd_softmax(x, -1), &x, 1);
  out_and_grads(r, pd_softmax(x, 0), &x, 1);
}
static void c_log_softmax(res *r) {
  pd_tensor *x = randn2(512, 1000);
  out_and_grads(r, pd_log_softmax(x, -1), &x, 1);
  out_and_grads(r, pd_log_softmax(x, 0), &x, 1);
}
static void c_matmul(res *r) {
  /* shapes whose products oneDNN would split along K by thread count */
  pd_tensor *in[2] = {randn2(8, 4608), randn2(4608, 512)};
  out_and_grads(r, pd_matmul(in[0], in[1], false, false), in, 2);
  pd_tensor *in2[2] = {randn2(64, 2048), randn2(512, 2048)};
  out_and_grads(r, pd_matmul(in2[0], in2[1], false, true), in2, 2);
  pd_tensor *in3[2] = {randn2(16, 65536), randn2(65536, 16)};
  out_and_grads(r, pd_matmul(in3[0], in3[1], false, false), in3, 2);
}
static void c_dot(res *r) {
  pd_tensor *in[2] = {leaf(pd_randn(1, SHAPE(1 << 20), PD_FLOAT32)),
                      leaf(pd_randn(1, SHAPE(1 << 20), PD_FLOAT32))};
  out_and_grads(r, pd_dot(in[0], in[1]), in, 2);
}
static void c_conv2d(res *r) {
  pd_tensor *x = leaf(pd_randn(4, SHAPE(32, 16, 32, 32), PD_FLOAT32));
  pd_tensor *w = leaf(pd_randn(4, SHAPE(32, 16, 3, 3), PD_FLOAT32)),
            *b = leaf(pd_randn(1, SHAPE(32), PD_FLOAT32));
  pd_tensor *in[3] = {x, w, b};
  out_and_grads(r, pd_conv2d(x, w, b, &(pd_conv_opts){.n_padding = 1, .padding = {1}}), in, 3);
}
static void c_conv2d_transpose(res *r) {
  pd_tensor *x = leaf(pd_randn(4, SHAPE(16, 32, 16, 16), PD_FLOAT32));
  pd_tensor *w = leaf(pd_randn(4, SHAPE(32, 16, 3, 3), PD_FLOAT32));
  pd_tensor *in[2] = {x, w};
  out_and_grads(r, pd_conv2d_transpose(x, w, NULL, &(pd_conv_opts){0}), in, 2);
}
static void c_attention(res *r) {
  /* [B, S, H, D]: the blockwise softmax and its backward, products batched */
  pd_tensor *in[3];
  for (int i = 0; i < 3; i++) in[i] = leaf(pd_randn(4, SHAPE(2, 256, 4, 64), PD_FLOAT32));
  out_and_grads(r, pd_scaled_dot_product_attention(in[0], in[1], in[2], NULL, 0.0, true, true), in, 3);
}
static void c_squared_l2_norm(res *r) {
  pd_tensor *x = pd_randn(1, SHAPE(1 << 20), PD_FLOAT32);
  pd_tensor *out = pd_dispatch1(PD_OP_squared_l2_norm, &x, 1, &(pd_attrs){0});
  push(r, out);
}

typedef struct det_case {
  const char *op;
  void (*run)(res *r);
  const char *via; /* run by this op's case instead (a backward-only op) */
} det_case;

static const det_case k_cases[] = {
    {"sum", c_sum, NULL},
    {"mean", c_mean, NULL},
    {"max", c_max, NULL},
    {"min", c_min, NULL},
    {"prod", c_prod, NULL},
    {"all", c_all, NULL},
    {"any", c_any, NULL},
    {"argmax", c_argmax, NULL},
    {"argmin", c_argmin, NULL},
    {"logsumexp", c_logsumexp, NULL},
    {"var", c_var, NULL},
    {"std", c_std, NULL},
    {"norm", c_norm, NULL},
    {"cumsum", c_cumsum, NULL},
    {"topk", c_topk, NULL},
    {"argsort", c_argsort, NULL},
    {"exp_shifted", NULL, "logsumexp"},
    {"abs_pow", NULL, "norm"},
    {"prod_exclusive", NULL, "prod"},
    {"take_along", NULL, "topk"},
    {"scatter_along", NULL, "topk"},
    {"layer_norm", c_layer_norm, NULL},
    {"layer_norm_grad", NULL, "layer_norm"},
    {"rms_norm", c_rms_norm, NULL},
    {"rms_norm_grad", NULL, "rms_norm"},
    {"batch_norm", c_batch_norm, NULL},
    {"batch_norm_grad", NULL, "batch_norm"},
    {"batch_norm_infer", c_batch_norm_infer, NULL},
    {"group_norm", c_group_norm, NULL},
    {"instance_norm", c_instance_norm, NULL},
    {"group_norm_grad", NULL, "group_norm"},
    {"mse_loss", c_mse, NULL},
    {"l1_loss", c_l1, NULL},
    {"smooth_l1_loss", c_smooth_l1, NULL},
    {"binary_cross_entropy", c_bce, NULL},
    {"binary_cross_entropy_with_logits", c_bce_logits, NULL},
    {"kl_div", c_kl_div, NULL},
    {"margin_ranking_loss", c_margin_ranking, NULL},
    {"cross_entropy_with_softmax", c_cross_entropy, NULL},
    {"cross_entropy_with_softmax_grad", NULL, "cross_entropy_with_softmax"},
    {"nll_loss", c_nll, NULL},
    {"nll_loss_grad", NULL, "nll_loss"},
    /* nll_loss's kernels with the sums added over ranks' groups afterwards */
    {"c_nll_loss", NULL, "nll_loss"},
    {"c_nll_loss_grad", NULL, "nll_loss"},
    {"softmax", c_softmax, NULL},
    {"log_softmax", c_log_softmax, NULL},
    {"matmul", c_matmul, NULL},
    {"dot", c_dot, NULL},
    {"conv2d", c_conv2d, NULL},
    {"conv2d_transpose", c_conv2d_transpose, NULL},
    {"scaled_dot_product_attention", c_attention, NULL},
    {"scaled_dot_product_attention_grad", NULL, "scaled_dot_product_attention"},
    {"squared_l2_norm", c_squared_l2_norm, NULL},
};

/* The registry's reducing families, from their X-macro lists. */
#define PD_OP(name) #name,
static const char *const k_family_ops[] = {
#include "ops/defs/reduction.def"
#include "ops/defs/norm.def"
#include "ops/defs/loss.def"
};
#undef PD_OP
/* Reducing ops of other families. */
static const char *const k_extra[] = {"sum",
                                      "softmax",
                                      "log_softmax",
                                      "matmul",
                                      "dot",
                                      "conv2d",
                                      "conv2d_transpose",
                                      "scaled_dot_product_attention",
                                      "squared_l2_norm"};

static const det_case *case_of(const char *op) {
  for (size_t i = 0; i < sizeof k_cases / sizeof *k_cases; i++)
    if (strcmp(k_cases[i].op, op) == 0) return &k_cases[i];
  return NULL;
}

static void test_every_reducing_op_has_a_case(void **state) {
  (void)state;
  int missing = 0;
  for (size_t i = 0; i < sizeof k_family_ops / sizeof *k_family_ops; i++)
    if (!case_of(k_family_ops[i])) {
      print_error("determinism: %s has no case\n", k_family_ops[i]);
      missing++;
    }
  for (size_t i = 0; i < sizeof k_cases / sizeof *k_cases; i++) {
    assert_true(pd_op_find(k_cases[i].op) >= 0);
    if (k_cases[i].via && !case_of(k_cases[i].via)->run)
      fail_msg("%s: via %s, which has no run", k_cases[i].op, k_cases[i].via);
  }
  for (size_t i = 0; i < sizeof k_extra / sizeof *k_extra; i++) assert_non_null(case_of(k_extra[i]));
  assert_int_equal(missing, 0);
}

static void test_same_bits_on_1_2_3_8_threads(void **state) {
  (void)state;
  const int threads[] = {1, 2, 3, 8};
  enum { NT = sizeof threads / sizeof *threads };
  int prev = pd_get_num_threads(), failures = 0;
  pd_set_deterministic(true); /* float32 GEMMs and convolutions too */
  for (size_t c = 0; c < sizeof k_cases / sizeof *k_cases; c++) {
    if (!k_cases[c].run) continue;
    pd_scope_begin();
    res r[NT];
    for (int t = 0; t < NT; t++) {
      memset(&r[t], 0, sizeof r[t]);
      pd_set_num_threads(threads[t]);
      pd_seed(4242);
      k_cases[c].run(&r[t]);
    }
    for (int t = 1; t < NT; t++) {
      assert_int_equal(r[t].n, r[0].n);
      for (int k = 0; k < r[0].n; k++)
        if (!same_bits(r[0].t[k], r[t].t[k])) {
          print_error("%s: result %d differs between 1 and %d threads\n", k_cases[c].op, k, threads[t]);
          failures++;
        }
    }
    pd_scope_end();
  }
  pd_set_num_threads(prev);
  pd_set_deterministic(false);
  assert_int_equal(failures, 0);
  expect_no_live_tensors();
}

/* Deterministic mode computes the same products and convolutions as the
 * default (oneDNN's own threading), to rounding: K split into blocks, the
 * im2col path of conv2d, its weight gradient accumulated with beta = 1. */
static void test_deterministic_mode_matches_default(void **state) {
  (void)state;
  pd_scope_begin();
  pd_seed(99);
  pd_tensor *a = randn2(16, 65536), *b = randn2(65536, 16);
  pd_tensor *x = leaf(pd_randn(4, SHAPE(8, 16, 20, 20), PD_FLOAT32));
  pd_tensor *w = leaf(pd_randn(4, SHAPE(32, 16, 3, 3), PD_FLOAT32));
  pd_tensor *in[2] = {x, w};
  res r[2];
  for (int det = 0; det < 2; det++) {
    pd_set_deterministic(det);
    memset(&r[det], 0, sizeof r[det]);
    pd_seed(7);
    push(&r[det], pd_matmul(a, b, false, false));
    out_and_grads(&r[det], pd_conv2d(x, w, NULL, &(pd_conv_opts){.n_stride = 1, .stride = {2}}), in, 2);
  }
  pd_set_deterministic(false);
  assert_int_equal(r[0].n, 4);
  assert_int_equal(r[1].n, 4);
  for (int k = 0; k < r[0].n; k++) expect_close(r[1].t[k], r[0].t[k], 1e-4, 1e-3);
  pd_scope_end();
  expect_no_live_tensors();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_reducing_op_has_a_case),
      cmocka_unit_test(test_same_bits_on_1_2_3_8_threads),
      cmocka_unit_test(test_deterministic_mode_matches_default),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
