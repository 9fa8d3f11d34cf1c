/* Padding (F.pad, Pad1D/2D/3D) against hand-written arrays, resizing
 * (F.interpolate, Upsample*) against a naive loop of Paddle's index rules,
 * pixel shuffle against its index formula, gradients, bad inputs. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

static pd_tensor *arange(int ndim, const int64_t *shape, pd_dtype dt) {
  int64_t n = 1;
  for (int d = 0; d < ndim; d++) n *= shape[d];
  return pd_reshape(pd_cast(pd_arange(1, (double)n + 1, 1, PD_FLOAT64), dt), ndim, shape);
}

/* ---- padding ------------------------------------------------------------------------------ */
static void test_pad1d_modes(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = arange(3, SHAPE(1, 2, 3), PD_FLOAT32); /* [[1,2,3],[4,5,6]] */
  const int64_t pad[2] = {2, 1};
  EXPECT_VALUES(pd_pad(x, 2, pad, NULL, 0, NULL), 0, 0, 0, 1, 2, 3, 0, 0, 0, 4, 5, 6, 0);
  EXPECT_VALUES(pd_pad(x, 2, pad, "constant", -1.5, "NCL"), 0, -1.5, -1.5, 1, 2, 3, -1.5, -1.5, -1.5, 4, 5, 6,
                -1.5);
  EXPECT_VALUES(pd_pad(x, 2, pad, "reflect", 0, NULL), 0, 3, 2, 1, 2, 3, 2, 6, 5, 4, 5, 6, 5);
  EXPECT_VALUES(pd_pad(x, 2, pad, "replicate", 0, NULL), 0, 1, 1, 1, 2, 3, 3, 4, 4, 4, 5, 6, 6);
  EXPECT_VALUES(pd_pad(x, 2, pad, "circular", 0, NULL), 0, 2, 3, 1, 2, 3, 1, 5, 6, 4, 5, 6, 4);
  expect_shape(pd_pad(x, 2, pad, "circular", 0, NULL), 3, SHAPE(1, 2, 6));
  /* NLC: the same data as [1, 3, 2] pads dim 1 */
  pd_tensor *xl = pd_transpose(x, 3, SHAPE(0, 2, 1)); /* a non-contiguous view too */
  pd_tensor *yl = pd_pad(xl, 2, pad, "reflect", 0, "NLC");
  expect_shape(yl, 3, SHAPE(1, 6, 2));
  EXPECT_VALUES(yl, 0, 3, 6, 2, 5, 1, 4, 2, 5, 3, 6, 2, 5);
  /* the layer: an int padding pads both sides */
  pd_layer *l = pd_nn_pad1d(1, SHAPE(1), &(pd_nn_pad1d_opts){.mode = "replicate"});
  EXPECT_VALUES(pd_layer_call1(l, x), 0, 1, 1, 2, 3, 3, 4, 4, 5, 6, 6);
  char *s = pd_layer_to_string(l);
  assert_string_equal(s, "Pad1D(padding=[1, 1], mode=replicate, value=0.0, data_format=NCL)");
  free(s);
  pd_layer_release(l);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_pad2d_pad3d_modes(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = arange(4, SHAPE(1, 1, 3, 3), PD_FLOAT64);
  const int64_t pad[4] = {1, 0, 2, 1}; /* left, right, top, bottom */
  pd_tensor *y = pd_pad(x, 4, pad, "reflect", 0, NULL);
  expect_shape(y, 4, SHAPE(1, 1, 6, 4));
  EXPECT_VALUES(y, 0, 8, 7, 8, 9, 5, 4, 5, 6, 2, 1, 2, 3, 5, 4, 5, 6, 8, 7, 8, 9, 5, 4, 5, 6);
  EXPECT_VALUES(pd_pad(x, 4, pad, "replicate", 0, NULL), 0, 1, 1, 2, 3, 1, 1, 2, 3, 1, 1, 2, 3, 4, 4, 5, 6, 7,
                7, 8, 9, 7, 7, 8, 9);
  EXPECT_VALUES(pd_pad(x, 4, pad, "circular", 0, NULL), 0, 6, 4, 5, 6, 9, 7, 8, 9, 3, 1, 2, 3, 6, 4, 5, 6, 9,
                7, 8, 9, 3, 1, 2, 3);
  const double c = 9.5;
  EXPECT_VALUES(pd_pad(x, 4, pad, "constant", c, NULL), 0, c, c, c, c, c, c, c, c, c, 1, 2, 3, c, 4, 5, 6, c,
                7, 8, 9, c, c, c, c);
  /* NHWC: [1, 3, 3, 1] pads dims 1 and 2 */
  pd_tensor *yh = pd_pad(pd_reshape(x, 4, SHAPE(1, 3, 3, 1)), 4, pad, "reflect", 0, "NHWC");
  expect_shape(yh, 4, SHAPE(1, 6, 4, 1));
  expect_close(pd_reshape(yh, 4, SHAPE(1, 1, 6, 4)), y, 0, 0);
  /* every dim in constant mode: pad = [before0, after0, before1, after1] */
  pd_tensor *x2 = arange(2, SHAPE(2, 3), PD_INT32);
  pd_tensor *y2 = pd_pad(x2, 4, SHAPE(1, 0, 0, 2), NULL, 7, NULL);
  assert_int_equal(pd_tensor_dtype(y2), PD_INT32);
  expect_shape(y2, 2, SHAPE(3, 5));
  EXPECT_VALUES(y2, 0, 7, 7, 7, 7, 7, 1, 2, 3, 7, 7, 4, 5, 6, 7, 7);
  /* Pad3D replicate: [left, right, top, bottom, front, back] */
  pd_layer *l3 = pd_nn_pad3d(6, SHAPE(1, 0, 0, 0, 0, 1), &(pd_nn_pad3d_opts){.mode = "replicate"});
  pd_tensor *y3 = pd_layer_call1(l3, arange(5, SHAPE(1, 1, 2, 2, 2), PD_FLOAT32));
  expect_shape(y3, 5, SHAPE(1, 1, 3, 2, 3));
  EXPECT_VALUES(y3, 0, 1, 1, 2, 3, 3, 4, 5, 5, 6, 7, 7, 8, 5, 5, 6, 7, 7, 8);
  pd_layer_release(l3);
  pd_layer *l2 = pd_nn_pad2d(1, SHAPE(1), NULL);
  expect_shape(pd_layer_call1(l2, x), 4, SHAPE(1, 1, 5, 5));
  assert_true(pd_tensor_item_at(pd_layer_call1(l2, x), 0) == 0);
  pd_layer_release(l2);
  /* empty spatial dim in constant mode: all value */
  EXPECT_VALUES(pd_pad(pd_ones(3, SHAPE(1, 1, 0), PD_FLOAT32), 2, SHAPE(1, 1), NULL, 3, NULL), 0, 3, 3);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_pad_gradients(void **state) {
  (void)state;
  pd_scope_begin();
  const char *modes[] = {"constant", "reflect", "replicate", "circular"};
  /* how many outputs read each input for pads [2, 1] over 3 elements */
  const double counts[4][3] = {{1, 1, 1}, {1, 3, 2}, {3, 1, 2}, {2, 2, 2}};
  for (int m = 0; m < 4; m++) {
    pd_tensor *x = T(PD_FLOAT64, 3, SHAPE(1, 1, 3), 1, 2, 3);
    pd_tensor_set_stop_gradient(x, false);
    pd_tensor *y = pd_pad(x, 2, SHAPE(2, 1), modes[m], 0, NULL);
    assert_int_equal(pd_backward(pd_sum(y, NULL, 0, false), NULL, false), PD_OK);
    expect_values(pd_tensor_grad(x), counts[m], 3, 0);
  }
  /* 2-D reflect with weights: dx[i] = sum of w over the outputs reading i */
  pd_tensor *x = T(PD_FLOAT32, 4, SHAPE(1, 1, 2, 3), 1, 2, 3, 4, 5, 6);
  pd_tensor_set_stop_gradient(x, false);
  pd_tensor *y = pd_pad(x, 4, SHAPE(1, 1, 1, 0), "reflect", 0, NULL);
  pd_tensor *w = arange(4, SHAPE(1, 1, 3, 5), PD_FLOAT32);
  assert_int_equal(pd_backward(pd_sum(pd_multiply(y, w), NULL, 0, false), NULL, false), PD_OK);
  /* output rows read x rows [1, 0, 1], columns read [1, 0, 1, 2, 1] */
  const int rows[3] = {1, 0, 1}, cols[5] = {1, 0, 1, 2, 1};
  double want[6] = {0};
  for (int r = 0; r < 3; r++)
    for (int c = 0; c < 5; c++) want[rows[r] * 3 + cols[c]] += r * 5 + c + 1;
  expect_values(pd_tensor_grad(x), want, 6, 1e-6);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_pad_bad_inputs(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = pd_ones(3, SHAPE(1, 2, 3), PD_FLOAT32);
  expect_error(pd_pad(x, 2, SHAPE(3, 0), "reflect", 0, NULL), "pad", "dim 2 has size 3 but pads 3");
  expect_error(pd_pad(x, 2, SHAPE(-1, 0), NULL, 0, NULL), "pad", "-1");
  expect_error(pd_pad(x, 4, SHAPE(1, 1, 1, 1), NULL, 0, NULL), "pad", "pad has 4 entries");
  expect_error(pd_pad(x, 2, SHAPE(1, 1), "edge", 0, NULL), "pad", "'edge'");
  expect_error(pd_pad(x, 2, SHAPE(1, 1), NULL, 0, "NCHW"), "pad", "'NCHW'");
  expect_error(pd_pad(pd_ones(2, SHAPE(2, 3), PD_FLOAT32), 2, SHAPE(1, 1), "reflect", 0, NULL), "pad",
               "[2, 3]");
  expect_error(pd_pad(pd_ones(3, SHAPE(1, 2, 0), PD_FLOAT32), 2, SHAPE(1, 1), "replicate", 0, NULL), "pad",
               "size 0");
  expect_error(pd_pad(NULL, 2, SHAPE(1, 1), NULL, 0, NULL), "pad", "NULL");
  pd_scope_end();
  assert_null(pd_nn_pad2d(3, SHAPE(1, 2, 3), NULL));
  expect_error(NULL, "Pad2D", "1 or 4 values, got 3");
  assert_null(pd_nn_pad1d(1, SHAPE(1), &(pd_nn_pad1d_opts){.mode = "wrap"}));
  expect_error(NULL, "Pad1D", "'wrap'");
  assert_null(pd_nn_pad3d(1, SHAPE(1), &(pd_nn_pad3d_opts){.data_format = "NCHW"}));
  expect_error(NULL, "Pad3D", "'NCHW'");
  assert_null(pd_nn_pad1d(2, SHAPE(1, -2), NULL));
  expect_error(NULL, "Pad1D", "-2");
  expect_no_live_tensors();
}

/* ---- resizing --------------------------------------------------------------------------------- */
/* Paddle's index rules, written out naively (float32 index math as its CPU kernels). */
static float ref_ratio(int64_t in, int64_t out, double scale, bool ac) {
  if (out <= 1) return 0.f;
  if (ac) return (float)(in - 1) / (float)(out - 1);
  if (scale > 0) return (float)(1.0 / (double)(float)scale);
  return (float)in / (float)out;
}

static int64_t ref_nearest(int64_t k, float ratio, int64_t in) {
  int64_t i = (int64_t)(ratio * (float)k);
  return i < in ? i : in - 1;
}

static void ref_linear(int64_t k, float ratio, int64_t in, bool ac, int mode, int64_t *i0, int64_t *i1,
                       float *l1) {
  bool flag = mode == 0 && !ac;
  double src = flag ? ratio * (k + 0.5) - 0.5 : (double)(ratio * (float)k);
  int64_t a = (int64_t)src; /* truncation toward zero, as a C cast */
  if (a < 0) a = 0;
  float s = (float)(ratio * (k + 0.5) - 0.5);
  if (s < 0) s = 0;
  *i0 = a;
  *i1 = a + 1 < in - 1 ? a + 1 : in - 1;
  *l1 = flag ? s - (float)a : ratio * (float)k - (float)a;
}

/* out and (optional) adjoint dx of the upstream weights w, all [planes, h, w]. */
static void ref_resize(const double *x, double *out, const double *w, double *dx, int64_t planes, int64_t ih,
                       int64_t iw, int64_t oh, int64_t ow, double sh, double sw, bool bilinear, bool ac,
                       int mode) {
  float rh = ref_ratio(ih, oh, sh, ac), rw = ref_ratio(iw, ow, sw, ac);
  if (dx) memset(dx, 0, sizeof(double) * (size_t)(planes * ih * iw));
  for (int64_t p = 0; p < planes; p++)
    for (int64_t k = 0; k < oh; k++)
      for (int64_t l = 0; l < ow; l++) {
        int64_t o = (p * oh + k) * ow + l;
        if (!bilinear || (ih == oh && iw == ow)) {
          int64_t y = ih == oh ? k : ref_nearest(k, rh, ih), xx = iw == ow ? l : ref_nearest(l, rw, iw);
          out[o] = x[(p * ih + y) * iw + xx];
          if (dx) dx[(p * ih + y) * iw + xx] += w[o];
          continue;
        }
        int64_t y0, y1, x0, x1;
        float fy, fx;
        ref_linear(k, rh, ih, ac, mode, &y0, &y1, &fy);
        ref_linear(l, rw, iw, ac, mode, &x0, &x1, &fx);
        /* Paddle keeps both weights of a dim in float32: w0 = 1 - w1 rounded to float */
        double dy = fy, dxw = fx, ey = 1.f - fy, ex = 1.f - fx;
        const double *xp = x + p * ih * iw;
        out[o] = xp[y0 * iw + x0] * ey * ex + xp[y1 * iw + x0] * dy * ex + xp[y0 * iw + x1] * ey * dxw +
                 xp[y1 * iw + x1] * dy * dxw;
        if (dx) {
          double *d = dx + p * ih * iw;
          d[y0 * iw + x0] += w[o] * ey * ex;
          d[y1 * iw + x0] += w[o] * dy * ex;
          d[y0 * iw + x1] += w[o] * ey * dxw;
          d[y1 * iw + x1] += w[o] * dy * dxw;
        }
      }
}

typedef struct resize_case {
  int64_t ih, iw, oh, ow; /* oh = 0: by scale */
  double sh, sw;
  const char *mode;
  bool ac;
  int align_mode;
} resize_case;

static void test_interpolate_against_naive_loop(void **state) {
  (void)state;
  const resize_case cases[] = {
      {3, 4, 7, 9, 0, 0, "nearest", false, 0},      {5, 6, 3, 2, 0, 0, "nearest", false, 0},
      {4, 5, 0, 0, 1.7, 2.5, "nearest", false, 0},  {6, 7, 0, 0, 0.5, 0.3, "nearest", false, 0},
      {3, 4, 7, 9, 0, 0, "bilinear", false, 0},     {3, 4, 7, 9, 0, 0, "bilinear", true, 0},
      {3, 4, 7, 9, 0, 0, "bilinear", false, 1},     {7, 9, 3, 4, 0, 0, "bilinear", false, 0},
      {4, 5, 0, 0, 1.5, 2.0, "bilinear", false, 0}, {4, 5, 0, 0, 0.6, 1.3, "bilinear", true, 0},
      {5, 4, 5, 1, 0, 0, "bilinear", false, 0},     {1, 4, 3, 4, 0, 0, "bilinear", false, 1},
      {4, 4, 4, 4, 0, 0, "bilinear", false, 0},
  };
  pd_seed(17);
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
    const resize_case *rc = &cases[c];
    pd_scope_begin();
    const int64_t planes = 6;
    pd_tensor *x = pd_randn(4, SHAPE(2, 3, rc->ih, rc->iw), PD_FLOAT64);
    pd_tensor_set_stop_gradient(x, false);
    pd_interpolate_opts o = {.mode = rc->mode, .align_corners = rc->ac, .align_mode = rc->align_mode};
    int64_t oh = rc->oh, ow = rc->ow;
    if (oh) {
      o.nsize = 2;
      o.size[0] = oh;
      o.size[1] = ow;
    } else {
      o.nscale = 2;
      o.scale_factor[0] = rc->sh;
      o.scale_factor[1] = rc->sw;
      oh = (int64_t)((float)rc->ih * (float)rc->sh);
      ow = (int64_t)((float)rc->iw * (float)rc->sw);
    }
    pd_tensor *y = pd_interpolate(x, &o);
    if (!y) fail_msg("case %zu: %s", c, pd_last_error());
    expect_shape(y, 4, SHAPE(2, 3, oh, ow));
    pd_tensor *w = pd_randn(4, SHAPE(2, 3, oh, ow), PD_FLOAT64);
    int64_t nin = planes * rc->ih * rc->iw, nout = planes * oh * ow;
    double *xv = malloc(sizeof(double) * (size_t)nin), *ov = malloc(sizeof(double) * (size_t)nout);
    double *wv = malloc(sizeof(double) * (size_t)nout), *dv = malloc(sizeof(double) * (size_t)nin);
    pd_tensor_copy_to(x, xv, nin, PD_FLOAT64);
    pd_tensor_copy_to(w, wv, nout, PD_FLOAT64);
    ref_resize(xv, ov, wv, dv, planes, rc->ih, rc->iw, oh, ow, oh == rc->oh ? 0 : rc->sh,
               oh == rc->oh ? 0 : rc->sw, strcmp(rc->mode, "bilinear") == 0, rc->ac, rc->align_mode);
    expect_values(y, ov, nout, 1e-12);
    assert_int_equal(pd_backward(pd_sum(pd_multiply(y, w), NULL, 0, false), NULL, false), PD_OK);
    expect_values(pd_tensor_grad(x), dv, nin, 1e-12);
    /* float32 agrees too */
    pd_tensor *y32 = pd_interpolate(pd_cast(x, PD_FLOAT32), &o);
    expect_values(y32, ov, nout, 1e-5);
    free(xv);
    free(ov);
    free(wv);
    free(dv);
    pd_scope_end();
  }
  expect_no_live_tensors();
}

static void test_interpolate_hand_values_and_layouts(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = T(PD_FLOAT32, 4, SHAPE(1, 1, 2, 2), 1, 2, 3, 4);
  pd_interpolate_opts nearest2 = {.nscale = 1, .scale_factor = {2}};
  EXPECT_VALUES(pd_interpolate(x, &nearest2), 0, 1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4);
  pd_interpolate_opts ac = {.nsize = 2, .size = {3, 3}, .mode = "bilinear", .align_corners = true};
  EXPECT_VALUES(pd_interpolate(x, &ac), 1e-7, 1, 1.5, 2, 2, 2.5, 3, 3, 3.5, 4);
  pd_interpolate_opts half = {.nscale = 1, .scale_factor = {2}, .mode = "bilinear"};
  EXPECT_VALUES(pd_upsample(x, &half), 1e-7, 1, 1.25, 1.75, 2, 1.5, 1.75, 2.25, 2.5, 2.5, 2.75, 3.25, 3.5, 3,
                3.25, 3.75, 4);
  /* NHWC equals NCHW transposed */
  pd_seed(4);
  pd_tensor *xc = pd_randn(4, SHAPE(2, 3, 4, 5), PD_FLOAT32);
  pd_interpolate_opts bl = {.nsize = 2, .size = {6, 7}, .mode = "bilinear"};
  pd_tensor *ref = pd_interpolate(xc, &bl);
  bl.data_format = "NHWC";
  pd_tensor *yl = pd_interpolate(pd_transpose(xc, 4, SHAPE(0, 2, 3, 1)), &bl);
  expect_shape(yl, 4, SHAPE(2, 6, 7, 3));
  expect_close(pd_transpose(yl, 4, SHAPE(0, 3, 1, 2)), ref, 0, 0);
  /* 5-D nearest: per-dim indices, NDHWC too */
  pd_tensor *x5 = arange(5, SHAPE(1, 2, 2, 3, 2), PD_FLOAT32);
  pd_interpolate_opts n5 = {.nsize = 3, .size = {4, 3, 3}};
  pd_tensor *y5 = pd_interpolate(x5, &n5);
  expect_shape(y5, 5, SHAPE(1, 2, 4, 3, 3));
  for (int64_t c = 0; c < 2; c++)
    for (int64_t d = 0; d < 4; d++)
      for (int64_t h = 0; h < 3; h++)
        for (int64_t w = 0; w < 3; w++) {
          int64_t sd = ref_nearest(d, 0.5f, 2), sw = ref_nearest(w, 2.f / 3.f, 2);
          double want = pd_tensor_item_at(x5, ((c * 2 + sd) * 3 + h) * 2 + sw);
          assert_true(pd_tensor_item_at(y5, (((c * 4 + d) * 3 + h) * 3) + w) == want);
        }
  n5.data_format = "NDHWC";
  pd_tensor *y5l = pd_interpolate(pd_transpose(x5, 5, SHAPE(0, 2, 3, 4, 1)), &n5);
  expect_close(pd_transpose(y5l, 5, SHAPE(0, 4, 1, 2, 3)), y5, 0, 0);
  /* nearest keeps integer dtypes */
  pd_tensor *xi = pd_cast(x, PD_INT64);
  pd_tensor *yi = pd_interpolate(xi, &nearest2);
  assert_int_equal(pd_tensor_dtype(yi), PD_INT64);
  EXPECT_VALUES(yi, 0, 1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4);
  /* a batch of zero images */
  expect_shape(pd_interpolate(pd_ones(4, SHAPE(0, 2, 3, 3), PD_FLOAT32), &nearest2), 4, SHAPE(0, 2, 6, 6));
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_upsample_layers(void **state) {
  (void)state;
  pd_layer *up = pd_nn_upsample(&(pd_nn_upsample_opts){.nscale = 1, .scale_factor = {2}, .mode = "bilinear"});
  pd_layer *nn2 = pd_nn_upsampling_nearest2d(&(pd_nn_upsample_opts){.nsize = 2, .size = {4, 4}});
  pd_layer *bl2 = pd_nn_upsampling_bilinear2d(&(pd_nn_upsample_opts){.nsize = 2, .size = {3, 3}});
  char *s = pd_layer_to_string(up);
  assert_string_equal(
      s, "Upsample(scale_factor=2, mode=bilinear, align_corners=False, align_mode=0, data_format=None)");
  free(s);
  s = pd_layer_to_string(bl2);
  assert_string_equal(s,
                      "UpsamplingBilinear2D(size=[3, 3], mode=bilinear, align_corners=True, align_mode=0, "
                      "data_format=NCHW)");
  free(s);
  pd_scope_begin();
  pd_tensor *x = T(PD_FLOAT32, 4, SHAPE(1, 1, 2, 2), 1, 2, 3, 4);
  EXPECT_VALUES(pd_layer_call1(up, x), 1e-7, 1, 1.25, 1.75, 2, 1.5, 1.75, 2.25, 2.5, 2.5, 2.75, 3.25, 3.5, 3,
                3.25, 3.75, 4);
  EXPECT_VALUES(pd_layer_call1(nn2, x), 0, 1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4);
  EXPECT_VALUES(pd_layer_call1(bl2, x), 1e-7, 1, 1.5, 2, 2, 2.5, 3, 3, 3.5, 4);
  pd_scope_end();
  pd_layer_release(up);
  pd_layer_release(nn2);
  pd_layer_release(bl2);
  assert_null(pd_nn_upsample(NULL));
  expect_error(NULL, "Upsample", "exactly one of size");
  assert_null(pd_nn_upsample(&(pd_nn_upsample_opts){.nsize = 2, .size = {2, 2}, .mode = "bicubic"}));
  expect_error(NULL, "Upsample", "'bicubic'");
  expect_no_live_tensors();
}

static void test_interpolate_bad_inputs(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = pd_ones(4, SHAPE(1, 1, 2, 2), PD_FLOAT32);
  pd_interpolate_opts o = {.nsize = 2, .size = {3, 3}};
  expect_error(pd_interpolate(pd_ones(2, SHAPE(2, 2), PD_FLOAT32), &o), "interpolate", "[2, 2]");
  expect_error(pd_interpolate(pd_ones(3, SHAPE(1, 2, 2), PD_FLOAT32), &o), "interpolate", "'nearest' needs");
  o.mode = "bilinear";
  expect_error(pd_interpolate(pd_ones(5, SHAPE(1, 1, 2, 2, 2), PD_FLOAT32), &o), "interpolate",
               "[1, 1, 2, 2, 2]");
  expect_error(pd_interpolate(pd_ones(4, SHAPE(1, 1, 2, 2), PD_INT32), &o), "bilinear_interp", "int32");
  o.mode = "area";
  expect_error(pd_interpolate(x, &o), "interpolate", "'area'");
  o = (pd_interpolate_opts){.nsize = 2, .size = {3, 3}, .align_corners = true};
  expect_error(pd_interpolate(x, &o), "interpolate", "align_corners");
  o = (pd_interpolate_opts){.nsize = 2, .size = {3, 3}, .nscale = 1, .scale_factor = {2}};
  expect_error(pd_interpolate(x, &o), "interpolate", "exactly one of size");
  expect_error(pd_interpolate(x, NULL), "interpolate", "exactly one of size");
  o = (pd_interpolate_opts){.nsize = 1, .size = {3}};
  expect_error(pd_interpolate(x, &o), "interpolate", "size has 1 values");
  o = (pd_interpolate_opts){.nsize = 2, .size = {3, 0}};
  expect_error(pd_interpolate(x, &o), "interpolate", "size[1] is 0");
  o = (pd_interpolate_opts){.nscale = 1, .scale_factor = {-2}};
  expect_error(pd_interpolate(x, &o), "interpolate", "-2");
  o = (pd_interpolate_opts){.nscale = 1, .scale_factor = {0.2}};
  expect_error(pd_interpolate(x, &o), "interpolate", "output size of 0");
  o = (pd_interpolate_opts){.nsize = 2, .size = {3, 3}, .data_format = "NCW"};
  expect_error(pd_interpolate(x, &o), "interpolate", "'NCW'");
  o = (pd_interpolate_opts){.nsize = 2, .size = {3, 3}, .mode = "bilinear", .align_mode = 2};
  expect_error(pd_interpolate(x, &o), "interpolate", "align_mode 2");
  o = (pd_interpolate_opts){.nsize = 2, .size = {3, 3}};
  expect_error(pd_interpolate(pd_ones(4, SHAPE(1, 1, 0, 2), PD_FLOAT32), &o), "nearest_interp",
               "spatial dim 2");
  pd_scope_end();
  expect_no_live_tensors();
}

/* Second order through pad / resize: for L = sum(y * y) with y = A x (A linear),
 * dL/dx = 2 A^T A x, and d/dx sum(dL/dx) = 2 A^T A 1. */
static pd_tensor *second_order(pd_tensor *x, pd_tensor *(*op)(pd_tensor *, const void *), const void *arg) {
  pd_tensor_set_stop_gradient(x, false);
  pd_tensor *y = op(x, arg);
  pd_tensor *L = pd_sum(pd_multiply(y, y), NULL, 0, false), *g = NULL, *gg = NULL;
  assert_int_equal(pd_grad(&L, 1, &x, 1, NULL, &(pd_grad_opts){.create_graph = true}, &g), PD_OK);
  pd_tensor *gs = pd_sum(g, NULL, 0, false);
  assert_int_equal(pd_grad(&gs, 1, &x, 1, NULL, NULL, &gg), PD_OK);
  return gg;
}
static pd_tensor *op_pad(pd_tensor *x, const void *arg) {
  return pd_pad(x, 2, SHAPE(2, 1), (const char *)arg, 0, NULL);
}
static pd_tensor *op_interp(pd_tensor *x, const void *arg) { return pd_interpolate(x, arg); }

static void test_double_backward(void **state) {
  (void)state;
  pd_scope_begin();
  /* replicate: A 1 = 1, so 2 A^T 1 = 2 * (reads of each input) */
  EXPECT_VALUES(second_order(T(PD_FLOAT64, 3, SHAPE(1, 1, 3), 0.5, -1, 2), op_pad, "replicate"), 1e-12, 6, 2,
                4);
  /* constant: A^T A = I */
  EXPECT_VALUES(second_order(T(PD_FLOAT64, 3, SHAPE(1, 1, 3), 0.5, -1, 2), op_pad, "constant"), 1e-12, 2, 2,
                2);
  /* nearest x2: every input is read 4 times */
  pd_interpolate_opts n2 = {.nscale = 1, .scale_factor = {2}};
  pd_tensor *gn = second_order(pd_randn(4, SHAPE(1, 2, 3, 3), PD_FLOAT64), op_interp, &n2);
  for (int i = 0; i < 18; i++) assert_true(fabs(pd_tensor_item_at(gn, i) - 8) < 1e-12);
  /* bilinear: weights sum to 1, so 2 A^T 1 is twice the column sums of A */
  pd_interpolate_opts b = {.nsize = 2, .size = {5, 7}, .mode = "bilinear"};
  pd_tensor *gb = second_order(pd_randn(4, SHAPE(1, 1, 3, 4), PD_FLOAT64), op_interp, &b);
  double ones_in[12], ones_out[35], outv[35], want[12];
  for (int i = 0; i < 12; i++) ones_in[i] = 1;
  for (int i = 0; i < 35; i++) ones_out[i] = 1;
  ref_resize(ones_in, outv, ones_out, want, 1, 3, 4, 5, 7, 0, 0, true, false, 0);
  for (int i = 0; i < 12; i++) want[i] *= 2;
  expect_values(gb, want, 12, 1e-6); /* the two float32 weights of a tap sum to 1 within 1e-7 */
  pd_scope_end();
  expect_no_live_tensors();
}

/* ---- pixel shuffle -------------------------------------------------------------------------------- */
static void test_pixel_shuffle(void **state) {
  (void)state;
  pd_scope_begin();
  const int64_t r = 2, n = 2, c = 3, h = 2, w = 3;
  pd_tensor *x = arange(4, SHAPE(n, c * r * r, h, w), PD_FLOAT32);
  pd_layer *ps = pd_nn_pixel_shuffle(r, NULL);
  pd_tensor *y = pd_layer_call1(ps, x);
  expect_shape(y, 4, SHAPE(n, c, h * r, w * r));
  pd_tensor *xl = arange(4, SHAPE(n, h, w, c * r * r), PD_FLOAT32);
  pd_tensor *yl = pd_pixel_shuffle(xl, r, "NHWC");
  expect_shape(yl, 4, SHAPE(n, h * r, w * r, c));
  for (int64_t b = 0; b < n; b++)
    for (int64_t ch = 0; ch < c; ch++)
      for (int64_t i = 0; i < h * r; i++)
        for (int64_t j = 0; j < w * r; j++) {
          int64_t src_c = ch * r * r + (i % r) * r + (j % r);
          double want = pd_tensor_item_at(x, ((b * c * r * r + src_c) * h + i / r) * w + j / r);
          assert_true(pd_tensor_item_at(y, ((b * c + ch) * h * r + i) * w * r + j) == want);
          double want_l = pd_tensor_item_at(xl, ((b * h + i / r) * w + j / r) * c * r * r + src_c);
          assert_true(pd_tensor_item_at(yl, ((b * h * r + i) * w * r + j) * c + ch) == want_l);
        }
  char *s = pd_layer_to_string(ps);
  assert_string_equal(s, "PixelShuffle(upscale_factor=2)");
  free(s);
  /* gradient flows back through the reshapes */
  pd_tensor *xg = pd_cast(x, PD_FLOAT64);
  pd_tensor_set_stop_gradient(xg, false);
  assert_int_equal(pd_backward(pd_sum(pd_pixel_shuffle(xg, r, NULL), NULL, 0, false), NULL, false), PD_OK);
  assert_true(pd_tensor_item_at(pd_tensor_grad(xg), 5) == 1);
  expect_error(pd_pixel_shuffle(pd_ones(4, SHAPE(1, 6, 2, 2), PD_FLOAT32), 2, NULL), "pixel_shuffle",
               "does not divide the 6 channels");
  expect_error(pd_pixel_shuffle(pd_ones(3, SHAPE(4, 2, 2), PD_FLOAT32), 2, NULL), "pixel_shuffle",
               "[4, 2, 2]");
  expect_error(pd_pixel_shuffle(x, 0, NULL), "pixel_shuffle", "upscale_factor 0");
  expect_error(pd_pixel_shuffle(x, 2, "NCL"), "pixel_shuffle", "'NCL'");
  pd_layer_release(ps);
  pd_scope_end();
  assert_null(pd_nn_pixel_shuffle(-1, NULL));
  expect_error(NULL, "PixelShuffle", "-1");
  expect_no_live_tensors();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pad1d_modes),
      cmocka_unit_test(test_pad2d_pad3d_modes),
      cmocka_unit_test(test_pad_gradients),
      cmocka_unit_test(test_pad_bad_inputs),
      cmocka_unit_test(test_interpolate_against_naive_loop),
      cmocka_unit_test(test_interpolate_hand_values_and_layouts),
      cmocka_unit_test(test_upsample_layers),
      cmocka_unit_test(test_interpolate_bad_inputs),
      cmocka_unit_test(test_double_backward),
      cmocka_unit_test(test_pixel_shuffle),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
