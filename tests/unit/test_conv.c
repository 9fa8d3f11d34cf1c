/* Convolutions: every form against a direct convolution written here in
 * double (strides, paddings, dilations, groups, depthwise, channels last,
 * transposes with output_padding / output_size), gradients against that
 * convolution's finite differences, double backward, layers, the oneDNN
 * primitive cache, and bad inputs. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/conv.h"
#include "ops/op_registry.h"
#include "test_util.h"

/* ---- the reference ------------------------------------------------------- */

typedef struct ccase {
  int nsp;
  int64_t N, Ci, Co, G; /* transposes: Ci = input channels, Co = output channels */
  int64_t I[3], K[3], S[3], D[3], PB[3], PA[3];
  int64_t OP[3]; /* transposes: output_padding */
} ccase;

static uint64_t g_rng = 88172645463325252ull;
static double urand(void) {
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 7;
  g_rng ^= g_rng << 17;
  return (double)(g_rng >> 11) / 9007199254740992.0 * 2 - 1;
}
static double *rand_buf(int64_t n) {
  double *p = malloc(sizeof(double) * (size_t)(n ? n : 1));
  for (int64_t i = 0; i < n; i++) p[i] = urand();
  return p;
}
static int64_t prod3(const int64_t *v, int n) {
  int64_t p = 1;
  for (int i = 0; i < n; i++) p *= v[i];
  return p;
}
/* the spatial dims padded to 3 with size 1 */
static void pad3(int nsp, const int64_t *v, int64_t fill, int64_t *o) {
  for (int d = 0; d < 3; d++) o[d] = d < nsp ? v[d] : fill;
}

static void conv_out_size(const ccase *c, int64_t *O) {
  for (int d = 0; d < c->nsp; d++)
    O[d] = (c->I[d] + c->PB[d] + c->PA[d] - (c->D[d] * (c->K[d] - 1) + 1)) / c->S[d] + 1;
}
static void convt_out_size(const ccase *c, int64_t *O) {
  for (int d = 0; d < c->nsp; d++)
    O[d] = (c->I[d] - 1) * c->S[d] - c->PB[d] - c->PA[d] + c->D[d] * (c->K[d] - 1) + 1 + c->OP[d];
}

/* y[n, co, o] = b[co] + sum_{ci in group, k} x[n, ci, o * S - PB + k * D] w[co, ci - g * Cg, k] */
static void ref_conv(const ccase *c, const double *x, const double *w, const double *b, double *y) {
  int64_t O[3], I3[3], O3[3], K3[3], S3[3], D3[3], P3[3];
  conv_out_size(c, O);
  pad3(c->nsp, c->I, 1, I3), pad3(c->nsp, O, 1, O3), pad3(c->nsp, c->K, 1, K3);
  pad3(c->nsp, c->S, 1, S3), pad3(c->nsp, c->D, 1, D3), pad3(c->nsp, c->PB, 0, P3);
  int64_t Cg = c->Ci / c->G, Cog = c->Co / c->G, isz = prod3(I3, 3), osz = prod3(O3, 3), ksz = prod3(K3, 3);
  for (int64_t n = 0; n < c->N; n++)
    for (int64_t co = 0; co < c->Co; co++)
      for (int64_t o0 = 0; o0 < O3[0]; o0++)
        for (int64_t o1 = 0; o1 < O3[1]; o1++)
          for (int64_t o2 = 0; o2 < O3[2]; o2++) {
            double s = b ? b[co] : 0;
            int64_t g = co / Cog;
            for (int64_t cl = 0; cl < Cg; cl++)
              for (int64_t k0 = 0; k0 < K3[0]; k0++)
                for (int64_t k1 = 0; k1 < K3[1]; k1++)
                  for (int64_t k2 = 0; k2 < K3[2]; k2++) {
                    int64_t i0 = o0 * S3[0] - P3[0] + k0 * D3[0], i1 = o1 * S3[1] - P3[1] + k1 * D3[1],
                            i2 = o2 * S3[2] - P3[2] + k2 * D3[2];
                    if (i0 < 0 || i0 >= I3[0] || i1 < 0 || i1 >= I3[1] || i2 < 0 || i2 >= I3[2]) continue;
                    s += x[(n * c->Ci + g * Cg + cl) * isz + (i0 * I3[1] + i1) * I3[2] + i2] *
                         w[(co * Cg + cl) * ksz + (k0 * K3[1] + k1) * K3[2] + k2];
                  }
            y[(n * c->Co + co) * osz + (o0 * O3[1] + o1) * O3[2] + o2] = s;
          }
}

/* Transposed: every x[n, ci, i] spreads x * w[ci, col, k] to y[n, g * Cog + col, i * S - PB + k * D]. */
static void ref_convt(const ccase *c, const double *x, const double *w, const double *b, const int64_t *O,
                      double *y) {
  int64_t I3[3], O3[3], K3[3], S3[3], D3[3], P3[3];
  pad3(c->nsp, c->I, 1, I3), pad3(c->nsp, O, 1, O3), pad3(c->nsp, c->K, 1, K3);
  pad3(c->nsp, c->S, 1, S3), pad3(c->nsp, c->D, 1, D3), pad3(c->nsp, c->PB, 0, P3);
  int64_t Cg = c->Ci / c->G, Cog = c->Co / c->G, isz = prod3(I3, 3), osz = prod3(O3, 3), ksz = prod3(K3, 3);
  for (int64_t n = 0; n < c->N; n++)
    for (int64_t co = 0; co < c->Co; co++)
      for (int64_t p = 0; p < osz; p++) y[(n * c->Co + co) * osz + p] = b ? b[co] : 0;
  for (int64_t n = 0; n < c->N; n++)
    for (int64_t ci = 0; ci < c->Ci; ci++) {
      int64_t g = ci / Cg;
      for (int64_t i0 = 0; i0 < I3[0]; i0++)
        for (int64_t i1 = 0; i1 < I3[1]; i1++)
          for (int64_t i2 = 0; i2 < I3[2]; i2++) {
            double xv = x[(n * c->Ci + ci) * isz + (i0 * I3[1] + i1) * I3[2] + i2];
            for (int64_t col = 0; col < Cog; col++)
              for (int64_t k0 = 0; k0 < K3[0]; k0++)
                for (int64_t k1 = 0; k1 < K3[1]; k1++)
                  for (int64_t k2 = 0; k2 < K3[2]; k2++) {
                    int64_t o0 = i0 * S3[0] - P3[0] + k0 * D3[0], o1 = i1 * S3[1] - P3[1] + k1 * D3[1],
                            o2 = i2 * S3[2] - P3[2] + k2 * D3[2];
                    if (o0 < 0 || o0 >= O3[0] || o1 < 0 || o1 >= O3[1] || o2 < 0 || o2 >= O3[2]) continue;
                    y[(n * c->Co + g * Cog + col) * osz + (o0 * O3[1] + o1) * O3[2] + o2] +=
                        xv * w[(ci * Cog + col) * ksz + (k0 * K3[1] + k1) * K3[2] + k2];
                  }
          }
    }
}

/* ---- helpers --------------------------------------------------------------- */

static pd_conv_opts opts_of(const ccase *c) {
  pd_conv_opts o = {.n_stride = c->nsp, .n_dilation = c->nsp, .n_padding = 2 * c->nsp, .groups = c->G};
  for (int d = 0; d < c->nsp; d++) {
    o.stride[d] = c->S[d];
    o.dilation[d] = c->D[d];
    o.padding[2 * d] = c->PB[d];
    o.padding[2 * d + 1] = c->PA[d];
    o.output_padding[d] = c->OP[d];
  }
  o.n_output_padding = c->nsp;
  return o;
}

static pd_tensor *call_conv(int nsp, bool transpose, pd_tensor *x, pd_tensor *w, pd_tensor *b,
                            const pd_conv_opts *o) {
  switch (nsp) {
    case 1:
      return transpose ? pd_conv1d_transpose(x, w, b, o) : pd_conv1d(x, w, b, o);
    case 2:
      return transpose ? pd_conv2d_transpose(x, w, b, o) : pd_conv2d(x, w, b, o);
    default:
      return transpose ? pd_conv3d_transpose(x, w, b, o) : pd_conv3d(x, w, b, o);
  }
}

static void expect_buf(const pd_tensor *t, const double *want, int64_t n, double tol) {
  assert_non_null(t);
  assert_int_equal(pd_tensor_numel(t), n);
  double *got = malloc(sizeof(double) * (size_t)(n ? n : 1));
  assert_int_equal(pd_tensor_copy_to(t, got, n, PD_FLOAT64), n);
  for (int64_t i = 0; i < n; i++)
    if (!(fabs(got[i] - want[i]) <= tol * (1 + fabs(want[i])))) {
      double g = got[i];
      free(got);
      fail_msg("element %lld: got %.8g, want %.8g", (long long)i, g, want[i]);
    }
  free(got);
}

/* Runs one case (forward conv or transpose) in dtype dt and compares with the reference. */
static void check_case(const ccase *c, bool transpose, bool bias, pd_dtype dt) {
  int nsp = c->nsp;
  int64_t O[3];
  if (transpose)
    convt_out_size(c, O);
  else
    conv_out_size(c, O);
  int64_t xs[5] = {c->N, c->Ci}, ws[5], ys[5] = {c->N, c->Co};
  ws[0] = transpose ? c->Ci : c->Co;
  ws[1] = transpose ? c->Co / c->G : c->Ci / c->G;
  for (int d = 0; d < nsp; d++) xs[2 + d] = c->I[d], ws[2 + d] = c->K[d], ys[2 + d] = O[d];
  int64_t nx = prod3(xs, 2) * prod3(c->I, nsp), nw = prod3(ws, nsp + 2), ny = prod3(ys, nsp + 2);
  double *x = rand_buf(nx), *w = rand_buf(nw), *b = rand_buf(c->Co), *y = malloc(sizeof(double) * (size_t)ny);
  if (transpose)
    ref_convt(c, x, w, bias ? b : NULL, O, y);
  else
    ref_conv(c, x, w, bias ? b : NULL, y);
  pd_scope_begin();
  pd_tensor *tx = pd_tensor_from_f64(x, dt, nsp + 2, xs), *tw = pd_tensor_from_f64(w, dt, nsp + 2, ws);
  pd_tensor *tb = bias ? pd_tensor_from_f64(b, dt, 1, (int64_t[]){c->Co}) : NULL;
  pd_conv_opts o = opts_of(c);
  pd_tensor *ty = call_conv(nsp, transpose, tx, tw, tb, &o);
  if (!ty) fail_msg("%s", pd_last_error());
  expect_shape(ty, nsp + 2, ys);
  assert_int_equal(pd_tensor_dtype(ty), dt);
  expect_buf(ty, y, ny, dt == PD_FLOAT64 ? 1e-12 : 2e-5);
  pd_scope_end();
  free(x), free(w), free(b), free(y);
}

static const ccase k_cases[] = {
    /* plain 3x3, padding 1 */
    {2, 2, 3, 4, 1, {6, 7}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, {0}},
    /* strides, asymmetric padding, dilation */
    {2, 2, 3, 4, 1, {9, 8}, {3, 2}, {2, 3}, {2, 1}, {0, 2}, {1, 0}, {0}},
    /* groups */
    {2, 1, 4, 6, 2, {5, 6}, {2, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, {0}},
    /* depthwise with a channel multiplier */
    {2, 2, 3, 6, 3, {7, 7}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, {0}},
    /* pointwise */
    {2, 2, 5, 3, 1, {4, 3}, {1, 1}, {1, 1}, {1, 1}, {0, 0}, {0, 0}, {0}},
    /* 1-D */
    {1, 2, 2, 3, 1, {11}, {4}, {2}, {2}, {1}, {2}, {0}},
    /* 3-D */
    {3, 1, 2, 4, 2, {4, 5, 6}, {2, 3, 2}, {1, 2, 1}, {1, 1, 2}, {1, 0, 1}, {1, 1, 0}, {0}},
    /* wide enough for oneDNN's blocked layouts */
    {2, 2, 16, 32, 1, {10, 9}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, {0}},
};

static void test_conv_forward_against_reference(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof k_cases / sizeof *k_cases; i++) {
    check_case(&k_cases[i], false, true, PD_FLOAT64);
    check_case(&k_cases[i], false, true, PD_FLOAT32);
    check_case(&k_cases[i], false, false, PD_FLOAT32);
  }
  expect_no_live_tensors();
}

static const ccase k_tcases[] = {
    /* stride 2, padding 1, output_padding */
    {2, 2, 3, 4, 1, {3, 4}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, {1, 0}},
    /* groups, dilation, asymmetric padding */
    {2, 1, 4, 6, 2, {4, 3}, {2, 3}, {1, 2}, {2, 1}, {0, 1}, {1, 0}, {0, 1}},
    /* depthwise-like: groups = in channels */
    {2, 2, 3, 3, 3, {4, 4}, {3, 3}, {2, 2}, {1, 1}, {0, 0}, {0, 0}, {0, 0}},
    /* 1-D with output_padding < dilation but >= stride */
    {1, 2, 2, 3, 1, {5}, {3}, {1}, {3}, {1}, {1}, {2}},
    /* 3-D */
    {3, 1, 2, 2, 1, {2, 3, 2}, {2, 2, 3}, {2, 1, 2}, {1, 1, 1}, {0, 1, 1}, {0, 1, 0}, {1, 0, 0}},
    /* wide */
    {2, 2, 16, 16, 1, {6, 5}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, {1, 1}},
};

static void test_conv_transpose_against_reference(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof k_tcases / sizeof *k_tcases; i++) {
    check_case(&k_tcases[i], true, true, PD_FLOAT64);
    check_case(&k_tcases[i], true, true, PD_FLOAT32);
    check_case(&k_tcases[i], true, false, PD_FLOAT32);
  }
  expect_no_live_tensors();
}

/* output_size picks a size in [inferred, inferred + stride): same as output_padding */
static void test_conv_transpose_output_size(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = pd_randn(4, SHAPE(1, 2, 3, 3), PD_FLOAT32), *w = pd_randn(4, SHAPE(2, 3, 3, 3), PD_FLOAT32);
  pd_tensor *a = pd_conv2d_transpose(x, w, NULL,
                                     &(pd_conv_opts){.n_stride = 1,
                                                     .stride = {2},
                                                     .n_padding = 1,
                                                     .padding = {1},
                                                     .n_output_size = 2,
                                                     .output_size = {6, 5}});
  pd_tensor *b = pd_conv2d_transpose(x, w, NULL,
                                     &(pd_conv_opts){.n_stride = 1,
                                                     .stride = {2},
                                                     .n_padding = 1,
                                                     .padding = {1},
                                                     .n_output_padding = 2,
                                                     .output_padding = {1, 0}});
  expect_shape(a, 4, SHAPE(1, 3, 6, 5));
  expect_close(a, b, 1e-6, 1e-6);
  pd_scope_end();
  expect_no_live_tensors();
}

/* channels last: the same numbers with the channel dim moved */
static void test_conv_channels_last(void **state) {
  (void)state;
  pd_scope_begin();
  for (int dt = 0; dt < 2; dt++) {
    pd_dtype t = dt ? PD_FLOAT64 : PD_FLOAT32;
    pd_tensor *x = pd_cast(pd_randn(4, SHAPE(2, 3, 7, 6), PD_FLOAT64), t);
    pd_tensor *w = pd_cast(pd_randn(4, SHAPE(6, 1, 3, 2), PD_FLOAT64), t);
    pd_tensor *b = pd_cast(pd_randn(1, SHAPE(6), PD_FLOAT64), t);
    pd_conv_opts o = {.n_stride = 2, .stride = {2, 1}, .n_padding = 1, .padding = {1}, .groups = 3};
    pd_tensor *y = pd_conv2d(x, w, b, &o);
    pd_tensor *xl = pd_contiguous(pd_transpose(x, 4, SHAPE(0, 2, 3, 1)));
    o.data_format = "NHWC";
    pd_tensor *yl = pd_conv2d(xl, w, b, &o);
    expect_close(pd_transpose(yl, 4, SHAPE(0, 3, 1, 2)), y, 1e-5, 1e-5);
    /* transposed */
    pd_tensor *wt = pd_cast(pd_randn(4, SHAPE(3, 2, 3, 3), PD_FLOAT64), t);
    pd_conv_opts ot = {.n_stride = 1, .stride = {2}, .n_output_padding = 1, .output_padding = {1}};
    pd_tensor *z = pd_conv2d_transpose(x, wt, NULL, &ot);
    ot.data_format = "NHWC";
    pd_tensor *zl = pd_conv2d_transpose(xl, wt, NULL, &ot);
    expect_close(pd_transpose(zl, 4, SHAPE(0, 3, 1, 2)), z, 1e-5, 1e-5);
    /* 1-D and 3-D names */
    pd_tensor *x1 = pd_cast(pd_randn(3, SHAPE(1, 4, 2), PD_FLOAT64), t);
    pd_tensor *w1 = pd_cast(pd_randn(3, SHAPE(3, 2, 2), PD_FLOAT64), t);
    pd_tensor *y1 = pd_conv1d(x1, w1, NULL, &(pd_conv_opts){.data_format = "NLC"});
    expect_close(
        y1, pd_transpose(pd_conv1d(pd_transpose(x1, 3, SHAPE(0, 2, 1)), w1, NULL, NULL), 3, SHAPE(0, 2, 1)),
        1e-5, 1e-5);
  }
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_conv_padding_algorithms(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = pd_randn(4, SHAPE(1, 2, 7, 8), PD_FLOAT64), *w = pd_randn(4, SHAPE(3, 2, 3, 2), PD_FLOAT64);
  /* SAME: out = ceil(in / stride); pad_sum = (out - 1) * s + k - in split before/after; dilation -> 1 */
  pd_tensor *y = pd_conv2d(
      x, w, NULL,
      &(pd_conv_opts){
          .n_stride = 1, .stride = {2}, .padding_algorithm = "same", .n_dilation = 1, .dilation = {3}});
  expect_shape(y, 4, SHAPE(1, 3, 4, 4));
  /* h: pad_sum = 3 * 2 + 3 - 7 = 2 -> (1, 1); w: 3 * 2 + 2 - 8 = 0 -> (0, 0) */
  pd_tensor *e = pd_conv2d(
      x, w, NULL, &(pd_conv_opts){.n_stride = 1, .stride = {2}, .n_padding = 4, .padding = {1, 1, 0, 0}});
  expect_close(y, e, 1e-12, 1e-12);
  pd_tensor *v =
      pd_conv2d(x, w, NULL, &(pd_conv_opts){.padding_algorithm = "VALID", .n_padding = 1, .padding = {5}});
  expect_close(v, pd_conv2d(x, w, NULL, NULL), 0, 0);
  expect_shape(v, 4, SHAPE(1, 3, 5, 7));
  /* per-dim symmetric padding (2 values) */
  pd_tensor *p2 = pd_conv2d(x, w, NULL, &(pd_conv_opts){.n_padding = 2, .padding = {2, 1}});
  expect_close(p2, pd_conv2d(x, w, NULL, &(pd_conv_opts){.n_padding = 4, .padding = {2, 2, 1, 1}}), 0, 0);
  /* SAME on a transpose: out = in * stride */
  pd_tensor *wt = pd_randn(4, SHAPE(2, 3, 3, 3), PD_FLOAT64);
  expect_shape(pd_conv2d_transpose(
                   x, wt, NULL, &(pd_conv_opts){.n_stride = 1, .stride = {2}, .padding_algorithm = "SAME"}),
               4, SHAPE(1, 3, 13, 16)); /* (7 - 1) * 2 - 2 + 3, (8 - 1) * 2 - 1 + 3 */
  pd_scope_end();
  expect_no_live_tensors();
}

/* non-contiguous inputs, empty batches, float16, a strided weight */
static void test_conv_edge_cases(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *xl = pd_randn(4, SHAPE(2, 5, 6, 3), PD_FLOAT32);
  pd_tensor *xv = pd_transpose(xl, 4, SHAPE(0, 3, 1, 2)); /* an NCHW view of NHWC memory */
  assert_false(pd_tensor_is_contiguous(xv));
  pd_tensor *w = pd_randn(4, SHAPE(4, 3, 3, 3), PD_FLOAT32);
  expect_close(pd_conv2d(xv, w, NULL, NULL), pd_conv2d(pd_contiguous(xv), w, NULL, NULL), 1e-6, 1e-6);
  pd_tensor *wv = pd_transpose(pd_randn(4, SHAPE(3, 4, 3, 3), PD_FLOAT32), 4, SHAPE(1, 0, 2, 3));
  expect_close(pd_conv2d(xv, wv, NULL, NULL), pd_conv2d(xv, pd_contiguous(wv), NULL, NULL), 1e-6, 1e-6);
  /* empty batch */
  pd_tensor *e = pd_conv2d(pd_zeros(4, SHAPE(0, 3, 5, 5), PD_FLOAT32), w, NULL, NULL);
  expect_shape(e, 4, SHAPE(0, 4, 3, 3));
  /* float16 computes in float32 and returns float16 */
  pd_tensor *x16 = pd_cast(pd_contiguous(xv), PD_FLOAT16);
  pd_tensor *y16 = pd_conv2d(x16, pd_cast(w, PD_FLOAT16), NULL, NULL);
  assert_int_equal(pd_tensor_dtype(y16), PD_FLOAT16);
  expect_close(pd_cast(y16, PD_FLOAT32),
               pd_conv2d(pd_cast(x16, PD_FLOAT32), pd_cast(pd_cast(w, PD_FLOAT16), PD_FLOAT32), NULL, NULL),
               1e-2, 2e-2);
  pd_scope_end();
  expect_no_live_tensors();
}

/* ---- gradients against finite differences of the reference ---------------- */

/* L = sum(y * r): analytic dL/dx, dL/dw, dL/db by autograd in dt; numeric by
 * central differences of the reference in double. */
static void check_grads(const ccase *c, bool transpose, pd_dtype dt, double tol) {
  int nsp = c->nsp;
  int64_t O[3];
  if (transpose)
    convt_out_size(c, O);
  else
    conv_out_size(c, O);
  int64_t xs[5] = {c->N, c->Ci}, ws[5], ys[5] = {c->N, c->Co};
  ws[0] = transpose ? c->Ci : c->Co;
  ws[1] = transpose ? c->Co / c->G : c->Ci / c->G;
  for (int d = 0; d < nsp; d++) xs[2 + d] = c->I[d], ws[2 + d] = c->K[d], ys[2 + d] = O[d];
  int64_t n[3] = {prod3(xs, nsp + 2), prod3(ws, nsp + 2), c->Co}, ny = prod3(ys, nsp + 2);
  double *v[3] = {rand_buf(n[0]), rand_buf(n[1]), rand_buf(n[2])}, *r = rand_buf(ny);
  double *y = malloc(sizeof(double) * (size_t)ny);
  pd_scope_begin();
  pd_tensor *t[3] = {pd_tensor_from_f64(v[0], dt, nsp + 2, xs), pd_tensor_from_f64(v[1], dt, nsp + 2, ws),
                     pd_tensor_from_f64(v[2], dt, 1, &c->Co)};
  for (int i = 0; i < 3; i++) pd_tensor_set_stop_gradient(t[i], false);
  pd_conv_opts o = opts_of(c);
  pd_tensor *out = call_conv(nsp, transpose, t[0], t[1], t[2], &o);
  pd_tensor *L = pd_sum(pd_multiply(out, pd_tensor_from_f64(r, dt, nsp + 2, ys)), NULL, 0, false);
  assert_int_equal(pd_backward(L, NULL, false), PD_OK);
  const double eps = 1e-6;
  for (int i = 0; i < 3; i++) {
    pd_tensor *g = pd_tensor_grad(t[i]);
    assert_non_null(g);
    int64_t step = n[i] / 150 + 1; /* a sample of the elements of large inputs */
    for (int64_t e = 0; e < n[i]; e += step) {
      double orig = v[i][e], lp = 0, lm = 0;
      v[i][e] = orig + eps;
      if (transpose)
        ref_convt(c, v[0], v[1], v[2], O, y);
      else
        ref_conv(c, v[0], v[1], v[2], y);
      for (int64_t k = 0; k < ny; k++) lp += y[k] * r[k];
      v[i][e] = orig - eps;
      if (transpose)
        ref_convt(c, v[0], v[1], v[2], O, y);
      else
        ref_conv(c, v[0], v[1], v[2], y);
      for (int64_t k = 0; k < ny; k++) lm += y[k] * r[k];
      v[i][e] = orig;
      double num = (lp - lm) / (2 * eps), ana = pd_tensor_item_at(g, e);
      if (!(fabs(num - ana) <= tol * (1 + fabs(num))))
        fail_msg("%s %s input %d element %lld: analytic %.8g, numeric %.8g", transpose ? "transpose" : "conv",
                 pd_dtype_name(dt), i, (long long)e, ana, num);
    }
  }
  pd_scope_end();
  for (int i = 0; i < 3; i++) free(v[i]);
  free(r), free(y);
}

static void test_conv_grads_against_finite_differences(void **state) {
  (void)state;
  static const ccase cs[] = {
      {2, 2, 4, 4, 2, {5, 6}, {3, 2}, {2, 1}, {1, 2}, {1, 0}, {0, 1}, {0}},
      {1, 1, 2, 3, 1, {8}, {3}, {2}, {2}, {2}, {1}, {0}},
      {3, 1, 2, 2, 1, {3, 4, 3}, {2, 2, 2}, {1, 2, 1}, {1, 1, 1}, {1, 0, 0}, {0, 1, 1}, {0}},
      {2, 1, 16, 16, 1, {5, 5}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, {0}},
  };
  static const ccase ts[] = {
      {2, 2, 4, 2, 2, {3, 3}, {3, 2}, {2, 1}, {1, 2}, {1, 0}, {1, 0}, {1, 0}},
      {1, 1, 2, 3, 1, {4}, {3}, {2}, {1}, {1}, {1}, {1}},
      {2, 1, 16, 16, 1, {3, 3}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, {1, 1}},
  };
  for (size_t i = 0; i < sizeof cs / sizeof *cs; i++) {
    check_grads(&cs[i], false, PD_FLOAT64, 1e-6);
    check_grads(&cs[i], false, PD_FLOAT32, 2e-3);
  }
  for (size_t i = 0; i < sizeof ts / sizeof *ts; i++) {
    check_grads(&ts[i], true, PD_FLOAT64, 1e-6);
    check_grads(&ts[i], true, PD_FLOAT32, 2e-3);
  }
  expect_no_live_tensors();
}

/* Second order: M(x, w) = sum(dL/dw * s) with L = sum(conv(x, w) * r) depends on
 * x (through conv_grad_filter); dM/dx from a create_graph pass matches central
 * differences of M computed with first-order passes. */
static double first_order_m(pd_tensor *x, pd_tensor *w, pd_tensor *r, pd_tensor *s, const pd_conv_opts *o) {
  pd_scope_begin();
  pd_tensor *L = pd_sum(pd_multiply(pd_conv2d(x, w, NULL, o), r), NULL, 0, false);
  pd_tensor *gw = NULL;
  assert_int_equal(pd_grad(&L, 1, &w, 1, NULL, NULL, &gw), PD_OK);
  double m = pd_tensor_item(pd_sum(pd_multiply(gw, s), NULL, 0, false));
  pd_scope_end();
  return m;
}

static void test_conv_double_backward(void **state) {
  (void)state;
  pd_scope_begin();
  pd_conv_opts o = {.n_stride = 1, .stride = {2}, .n_padding = 1, .padding = {1}, .groups = 2};
  pd_tensor *x = pd_randn(4, SHAPE(1, 4, 5, 5), PD_FLOAT64), *w = pd_randn(4, SHAPE(2, 2, 3, 3), PD_FLOAT64);
  pd_tensor_set_stop_gradient(x, false);
  pd_tensor_set_stop_gradient(w, false);
  pd_tensor *r = pd_randn(4, SHAPE(1, 2, 3, 3), PD_FLOAT64), *s = pd_randn(4, SHAPE(2, 2, 3, 3), PD_FLOAT64);
  pd_tensor *L = pd_sum(pd_multiply(pd_conv2d(x, w, NULL, &o), r), NULL, 0, false);
  pd_tensor *gw = NULL, *gx = NULL;
  assert_int_equal(pd_grad(&L, 1, &w, 1, NULL, &(pd_grad_opts){.create_graph = true}, &gw), PD_OK);
  pd_tensor *M = pd_sum(pd_multiply(gw, s), NULL, 0, false);
  assert_int_equal(pd_grad(&M, 1, &x, 1, NULL, NULL, &gx), PD_OK);
  double *xp = pd_tensor_data(x);
  for (int64_t e = 0; e < pd_tensor_numel(x); e++) {
    double orig = xp[e];
    xp[e] = orig + 1e-6;
    double mp = first_order_m(x, w, r, s, &o);
    xp[e] = orig - 1e-6;
    double mm = first_order_m(x, w, r, s, &o);
    xp[e] = orig;
    double num = (mp - mm) / 2e-6, ana = pd_tensor_item_at(gx, e);
    if (!(fabs(num - ana) <= 1e-6 * (1 + fabs(num))))
      fail_msg("d2L/dwdx element %lld: analytic %.10g, numeric %.10g", (long long)e, ana, num);
  }
  pd_scope_end();
  expect_no_live_tensors();
}

/* ---- the oneDNN primitive cache ------------------------------------------ */

static void test_conv_primitive_cache(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = pd_randn(4, SHAPE(2, 8, 9, 9), PD_FLOAT32), *w = pd_randn(4, SHAPE(8, 8, 3, 3), PD_FLOAT32);
  pd_tensor_set_stop_gradient(w, false);
  pd_tensor_set_stop_gradient(x, false);
  pd_conv_opts o = {.n_padding = 1, .padding = {1}, .n_stride = 1, .stride = {1}};
  pd_tensor *y = pd_conv2d(x, w, NULL, &o);
  assert_int_equal(pd_backward(pd_sum(y, NULL, 0, false), NULL, false), PD_OK);
  int n = pdk_conv_dnnl_cache_size();
  assert_true(n >= 3); /* forward, backward data, backward weights */
  for (int step = 0; step < 3; step++) {
    pd_tensor *y2 = pd_conv2d(x, w, NULL, &o);
    assert_int_equal(pd_backward(pd_sum(y2, NULL, 0, false), NULL, false), PD_OK);
  }
  assert_int_equal(pdk_conv_dnnl_cache_size(), n);
  /* FLOPs of the row: 2 * out elements * (C_in / groups * kh * kw) */
  pd_attrs a = {.nv = {2, 2, 4}, .v = {{1, 1}, {1, 1}, {1, 1, 1, 1}}, .i = {1}};
  pd_meta m = {.dtype = PD_FLOAT32, .ndim = 4, .shape = {2, 8, 9, 9}};
  pd_tensor *in[2] = {x, w};
  assert_true(fabs(pd_op_table[PD_OP_conv2d]->flops(in, 2, &a, &m, 1) - 2.0 * 2 * 8 * 81 * 8 * 9) < 1);
  pd_scope_end();
  expect_no_live_tensors();
}

/* ---- layers ---------------------------------------------------------------- */

static void test_conv_layers(void **state) {
  (void)state;
  pd_seed(3);
  pd_layer *c = pd_nn_conv2d(
      16, 32, 1, SHAPE(3),
      &(pd_nn_conv_opts){.conv = {.n_padding = 1, .padding = {1}, .n_stride = 1, .stride = {2}}});
  assert_non_null(c);
  pd_tensor *w = pd_layer_parameter(c, "weight"), *b = pd_layer_parameter(c, "bias");
  expect_shape(w, 4, SHAPE(32, 16, 3, 3));
  expect_shape(b, 1, SHAPE(32));
  /* Normal(0, sqrt(2 / (16 * 9))) */
  double s1 = 0, s2 = 0;
  int64_t nw = pd_tensor_numel(w);
  for (int64_t i = 0; i < nw; i++) {
    double v = pd_tensor_item_at(w, i);
    s1 += v, s2 += v * v;
  }
  double mean = s1 / (double)nw, sd = sqrt(s2 / (double)nw - mean * mean), want = sqrt(2.0 / 144);
  assert_true(fabs(mean) < 0.1 * want);
  assert_true(fabs(sd - want) < 0.05 * want);
  for (int64_t i = 0; i < 32; i++) assert_true(pd_tensor_item_at(b, i) == 0);
  char *repr = pd_layer_to_string(c);
  assert_non_null(
      strstr(repr, "Conv2D(16, 32, kernel_size=[3, 3], stride=[2], padding=1, data_format=NCHW)"));
  free(repr);
  pd_scope_begin();
  pd_tensor *x = pd_randn(4, SHAPE(2, 16, 8, 8), PD_FLOAT32);
  pd_tensor *y = pd_layer_call1(c, x);
  expect_shape(y, 4, SHAPE(2, 32, 4, 4));
  expect_close(
      y, pd_conv2d(x, w, b, &(pd_conv_opts){.n_padding = 1, .padding = {1}, .n_stride = 1, .stride = {2}}),
      1e-6, 1e-6);
  assert_int_equal(pd_backward(pd_sum(y, NULL, 0, false), NULL, false), PD_OK);
  /* dL/db = the number of output positions per channel */
  EXPECT_VALUES(pd_sum(pd_tensor_grad(b), NULL, 0, false), 1e-3, 32.0 * 32);
  expect_shape(pd_tensor_grad(w), 4, SHAPE(32, 16, 3, 3));
  pd_scope_end();
  pd_layer_release(c);

  /* transposed: weight [in, out / groups, k], XavierUniform by default */
  pd_layer *t = pd_nn_conv2d_transpose(
      4, 6, 2, SHAPE(3, 2),
      &(pd_nn_conv_opts){.conv = {.groups = 2, .n_stride = 1, .stride = {2}}, .no_bias = true});
  assert_non_null(t);
  pd_tensor *tw = pd_layer_parameter(t, "weight");
  expect_shape(tw, 4, SHAPE(4, 3, 3, 2));
  assert_null(pd_layer_parameter(t, "bias"));
  double lim = sqrt(6.0 / (3 * 6 + 4 * 6));
  for (int64_t i = 0; i < pd_tensor_numel(tw); i++) assert_true(fabs(pd_tensor_item_at(tw, i)) <= lim);
  pd_scope_begin();
  pd_tensor *xt = pd_randn(4, SHAPE(1, 4, 3, 3), PD_FLOAT32);
  expect_shape(pd_layer_call1(t, xt), 4, SHAPE(1, 6, 7, 6));
  expect_shape(pd_nn_conv_transpose_forward(t, xt, 2, SHAPE(8, 7)), 4, SHAPE(1, 6, 8, 7));
  pd_scope_end();
  pd_layer_release(t);

  /* 1-D and 3-D, float64, channels last */
  pd_layer *c1 = pd_nn_conv1d(3, 5, 1, SHAPE(3),
                              &(pd_nn_conv_opts){.conv = {.data_format = "NLC"}, .dtype = PD_FLOAT64});
  pd_layer *c3 = pd_nn_conv3d(2, 4, 3, SHAPE(1, 2, 3), NULL);
  pd_layer *t1 = pd_nn_conv1d_transpose(3, 2, 1, SHAPE(2), NULL);
  pd_layer *t3 = pd_nn_conv3d_transpose(2, 2, 1, SHAPE(2), NULL);
  pd_scope_begin();
  expect_shape(pd_layer_call1(c1, pd_randn(3, SHAPE(2, 7, 3), PD_FLOAT64)), 3, SHAPE(2, 5, 5));
  expect_shape(pd_layer_call1(c3, pd_randn(5, SHAPE(1, 2, 3, 4, 5), PD_FLOAT32)), 5, SHAPE(1, 4, 3, 3, 3));
  expect_shape(pd_layer_call1(t1, pd_randn(3, SHAPE(1, 3, 4), PD_FLOAT32)), 3, SHAPE(1, 2, 5));
  expect_shape(pd_layer_call1(t3, pd_randn(5, SHAPE(1, 2, 2, 2, 2), PD_FLOAT32)), 5, SHAPE(1, 2, 3, 3, 3));
  pd_scope_end();
  pd_layer_release(c1);
  pd_layer_release(c3);
  pd_layer_release(t1);
  pd_layer_release(t3);

  /* bad layer arguments */
  assert_null(pd_nn_conv2d(3, 4, 1, SHAPE(3), &(pd_nn_conv_opts){.conv = {.groups = 2}}));
  assert_non_null(strstr(pd_last_error(), "in_channels (3) must be divisible by groups (2)"));
  assert_null(pd_nn_conv2d(4, 4, 1, SHAPE(3), &(pd_nn_conv_opts){.padding_mode = "reflect"}));
  assert_non_null(strstr(pd_last_error(), "reflect"));
  assert_null(pd_nn_conv2d(4, 4, 3, SHAPE(3, 3, 3), NULL));
  assert_non_null(strstr(pd_last_error(), "kernel_size must have 1 or 2 values, got 3"));
  pd_scope_begin();
  expect_error(pd_nn_conv_transpose_forward(NULL, NULL, 0, NULL), "Conv transpose forward", "NULL");
  pd_scope_end();
  pd_clear_error();
  expect_no_live_tensors();
}

/* ---- bad inputs -------------------------------------------------------------- */

/* expect_error with a third fragment */
static void expect_error3(const pd_tensor *t, const char *f1, const char *f2, const char *f3) {
  if (!t && !strstr(pd_last_error(), f3)) fail_msg("error '%s' lacks '%s'", pd_last_error(), f3);
  expect_error(t, f1, f2);
}

static void test_conv_bad_inputs(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = pd_randn(4, SHAPE(1, 3, 5, 5), PD_FLOAT32);
  /* channel mismatch names both numbers */
  expect_error3(pd_conv2d(x, pd_randn(4, SHAPE(4, 2, 3, 3), PD_FLOAT32), NULL, NULL), "conv2d",
                "has 3 channels", "weight.shape[1] (2)");
  /* kernel larger than the padded input */
  expect_error(pd_conv2d(x, pd_randn(4, SHAPE(2, 3, 8, 3), PD_FLOAT32), NULL,
                         &(pd_conv_opts){.n_padding = 1, .padding = {1}}),
               "conv2d", "larger than the padded input (5 + 1 + 1 = 7");
  expect_error(pd_conv2d(x, pd_randn(4, SHAPE(2, 3, 3, 3), PD_FLOAT32), NULL,
                         &(pd_conv_opts){.n_dilation = 1, .dilation = {3}}),
               "conv2d", "extent 7");
  /* groups not dividing the channels */
  expect_error3(pd_conv2d(x, pd_randn(4, SHAPE(4, 1, 3, 3), PD_FLOAT32), NULL, &(pd_conv_opts){.groups = 2}),
                "conv2d", "input channels (3", "groups (2)");
  pd_tensor *x4 = pd_randn(4, SHAPE(1, 4, 5, 5), PD_FLOAT32);
  expect_error(pd_conv2d(x4, pd_randn(4, SHAPE(6, 1, 3, 3), PD_FLOAT32), NULL, &(pd_conv_opts){.groups = 4}),
               "conv2d", "output channels (weight.shape[0] = 6) are not divisible by groups (4)");
  /* ranks, dtypes, layouts, options */
  expect_error(pd_conv2d(pd_randn(3, SHAPE(3, 5, 5), PD_FLOAT32), pd_randn(4, SHAPE(2, 3, 3, 3), PD_FLOAT32),
                         NULL, NULL),
               "conv2d", "x must be a 4-D tensor (NCHW), got shape [3, 5, 5]");
  expect_error(pd_conv3d(x, pd_randn(4, SHAPE(2, 3, 3, 3), PD_FLOAT32), NULL, NULL), "conv3d", "5-D");
  expect_error(pd_conv2d(x, pd_randn(4, SHAPE(2, 3, 3, 3), PD_FLOAT64), NULL, NULL), "conv2d", "same dtype");
  expect_error(
      pd_conv2d(pd_ones(4, SHAPE(1, 3, 5, 5), PD_INT32), pd_ones(4, SHAPE(2, 3, 3, 3), PD_INT32), NULL, NULL),
      "conv2d", "int32");
  expect_error(
      pd_conv2d(x, pd_randn(4, SHAPE(2, 3, 3, 3), PD_FLOAT32), NULL, &(pd_conv_opts){.data_format = "NCWH"}),
      "conv2d", "\"NCWH\"");
  expect_error(
      pd_conv2d(x, pd_randn(4, SHAPE(2, 3, 3, 3), PD_FLOAT32), pd_randn(1, SHAPE(3), PD_FLOAT32), NULL),
      "conv2d", "bias must have shape [2]");
  expect_error(pd_conv2d(x, pd_randn(4, SHAPE(2, 3, 3, 3), PD_FLOAT32), NULL,
                         &(pd_conv_opts){.n_stride = 1, .stride = {0}}),
               "conv2d", "stride 0");
  expect_error(pd_conv2d(x, pd_randn(4, SHAPE(2, 3, 3, 3), PD_FLOAT32), NULL,
                         &(pd_conv_opts){.n_padding = 3, .padding = {1, 1, 1}}),
               "conv2d", "padding must have 1, 2 or 4 values, got 3");
  expect_error(pd_conv2d(x, pd_randn(4, SHAPE(2, 3, 3, 3), PD_FLOAT32), NULL,
                         &(pd_conv_opts){.n_padding = 1, .padding = {-1}}),
               "conv2d", "padding -1");
  expect_error(pd_conv2d(x, pd_randn(4, SHAPE(2, 3, 3, 3), PD_FLOAT32), NULL,
                         &(pd_conv_opts){.padding_algorithm = "FULL"}),
               "conv2d", "\"FULL\"");
  expect_error(pd_conv2d(NULL, x, NULL, NULL), "conv2d", "NULL");
  /* transposes */
  pd_tensor *wt = pd_randn(4, SHAPE(3, 2, 3, 3), PD_FLOAT32);
  expect_error3(pd_conv2d_transpose(x4, wt, NULL, NULL), "conv2d_transpose", "has 4 channels",
                "weight.shape[0] is 3");
  expect_error(
      pd_conv2d_transpose(x, wt, NULL, &(pd_conv_opts){.n_output_padding = 1, .output_padding = {1}}),
      "conv2d_transpose", "output_padding 1 on spatial dim 0 must be in [0, max(stride 1, dilation 1))");
  expect_error(
      pd_conv2d_transpose(
          x, wt, NULL,
          &(pd_conv_opts){.n_stride = 1, .stride = {2}, .n_output_size = 2, .output_size = {13, 11}}),
      "conv2d_transpose", "output_size 13 on spatial dim 0 must be in [11, 13)");
  assert_non_null(pd_conv2d_transpose(
      x, wt, NULL,
      &(pd_conv_opts){.n_stride = 1, .stride = {2}, .n_output_size = 2, .output_size = {12, 12}}));
  expect_error(pd_conv2d_transpose(x, wt, NULL,
                                   &(pd_conv_opts){.n_stride = 1,
                                                   .stride = {2},
                                                   .n_output_size = 1,
                                                   .output_size = {12},
                                                   .n_output_padding = 1,
                                                   .output_padding = {1}}),
               "conv2d_transpose", "mutually exclusive");
  expect_error(pd_conv2d_transpose(x, wt, NULL, &(pd_conv_opts){.n_padding = 1, .padding = {4}}),
               "conv2d_transpose", "output size on spatial dim 0 is -1");
  expect_error(
      pd_conv2d_transpose(x, pd_randn(4, SHAPE(3, 2, 3, 3), PD_FLOAT32), NULL, &(pd_conv_opts){.groups = 2}),
      "conv2d_transpose", "not divisible by groups (2)");
  pd_scope_end();
  pd_clear_error();
  expect_no_live_tensors();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_conv_forward_against_reference),
      cmocka_unit_test(test_conv_transpose_against_reference),
      cmocka_unit_test(test_conv_transpose_output_size),
      cmocka_unit_test(test_conv_channels_last),
      cmocka_unit_test(test_conv_padding_algorithms),
      cmocka_unit_test(test_conv_edge_cases),
      cmocka_unit_test(test_conv_grads_against_finite_differences),
      cmocka_unit_test(test_conv_double_backward),
      cmocka_unit_test(test_conv_primitive_cache),
      cmocka_unit_test(test_conv_layers),
      cmocka_unit_test(test_conv_bad_inputs),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
