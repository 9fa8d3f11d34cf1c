/* Gradcheck samples for the conv ops (convolutions, their transposes and
 * weight gradient, pooling and the pooling grad ops). Small float64 shapes;
 * random inputs keep max-pool windows free of ties. */
#include "op_samples.h"

#define S(...) ((const int64_t[]){__VA_ARGS__})

/* strides, dilations, paddings (pairs), groups, channel_last */
static void conv_attrs(pd_attrs *a, int nsp, const int64_t *s, const int64_t *d, const int64_t *p, int64_t g,
                       bool cl) {
  sample_set_list(a, 0, nsp, s);
  sample_set_list(a, 1, nsp, d);
  sample_set_list(a, 2, 2 * nsp, p);
  a->i[0] = g;
  a->i[1] = cl;
}

static int s_conv1d(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(3, S(2, 2, 7), -1, 1);
  in[1] = sample_uniform(3, S(3, 2, 3), -1, 1);
  in[2] = sample_uniform(1, S(3), -1, 1);
  conv_attrs(a, 1, S(2), S(1), S(1, 2), 1, false);
  return 3;
}
/* stride, dilation, asymmetric padding, groups */
static int s_conv2d(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(4, S(2, 4, 5, 6), -1, 1);
  in[1] = sample_uniform(4, S(4, 2, 2, 3), -1, 1);
  in[2] = sample_uniform(1, S(4), -1, 1);
  conv_attrs(a, 2, S(2, 1), S(1, 2), S(1, 0, 2, 1), 2, false);
  return 3;
}
/* depthwise, channels last, no bias */
static int s_conv2d_nhwc(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(4, S(1, 4, 4, 3), -1, 1);
  in[1] = sample_uniform(4, S(6, 1, 3, 2), -1, 1);
  conv_attrs(a, 2, S(1, 2), S(1, 1), S(1, 1, 0, 1), 3, true);
  return 2;
}
static int s_conv3d(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(5, S(1, 2, 3, 4, 4), -1, 1);
  in[1] = sample_uniform(5, S(2, 2, 2, 2, 3), -1, 1);
  in[2] = sample_uniform(1, S(2), -1, 1);
  conv_attrs(a, 3, S(1, 2, 1), S(1, 1, 1), S(0, 0, 1, 1, 1, 1), 1, false);
  return 3;
}
static int s_conv1d_t(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(3, S(2, 2, 4), -1, 1);
  in[1] = sample_uniform(3, S(2, 3, 3), -1, 1);
  in[2] = sample_uniform(1, S(3), -1, 1);
  conv_attrs(a, 1, S(2), S(1), S(1, 1), 1, false);
  sample_set_list(a, 3, 1, S(8)); /* (4 - 1) * 2 - 2 + 3 = 7, plus output_padding 1 */
  return 3;
}
static int s_conv2d_t(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(4, S(1, 4, 3, 3), -1, 1);
  in[1] = sample_uniform(4, S(4, 1, 3, 2), -1, 1);
  in[2] = sample_uniform(1, S(2), -1, 1);
  conv_attrs(a, 2, S(2, 1), S(1, 2), S(1, 1, 0, 0), 2, false);
  sample_set_list(a, 3, 2, S(5, 5)); /* (3 - 1) * 2 - 2 + 3 = 5; (3 - 1) + 2 + 1 = 5 */
  return 3;
}
static int s_conv3d_t(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(5, S(1, 2, 2, 3, 2), -1, 1);
  in[1] = sample_uniform(5, S(2, 2, 2, 2, 2), -1, 1);
  conv_attrs(a, 3, S(1, 2, 1), S(1, 1, 1), S(0, 0, 1, 1, 0, 0), 1, false);
  sample_set_list(a, 3, 3, S(3, 4, 3));
  return 2;
}
static int s_grad_filter(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(4, S(2, 4, 5, 5), -1, 1);
  in[1] = sample_uniform(4, S(2, 2, 3, 2), -1, 1);
  conv_attrs(a, 2, S(2, 2), S(1, 1), S(1, 1, 0, 0), 2, false);
  sample_set_list(a, 3, 2, S(3, 3)); /* (5 + 2 - 3) / 2 + 1 = 3, (5 - 3) / 2 + 1 = 2 */
  return 2;
}

/* pooling: kernel, strides, paddings, ceil_mode, exclusive */
static void pool_attrs(pd_attrs *a, int nsp, const int64_t *k, const int64_t *s, const int64_t *p, bool ceil,
                       bool excl) {
  sample_set_list(a, 0, nsp, k);
  sample_set_list(a, 1, nsp, s);
  sample_set_list(a, 2, 2 * nsp, p);
  a->i[0] = ceil;
  a->i[1] = excl;
}
static int s_max1d(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(3, S(2, 2, 7), -1, 1);
  pool_attrs(a, 1, S(3), S(2), S(1, 1), false, true);
  return 1;
}
static int s_max2d(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(4, S(2, 2, 5, 6), -1, 1);
  pool_attrs(a, 2, S(2, 3), S(2, 2), S(1, 0, 0, 1), true, true);
  return 1;
}
static int s_max3d(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(5, S(1, 2, 3, 4, 4), -1, 1);
  pool_attrs(a, 3, S(2, 2, 2), S(1, 2, 2), S(0, 0, 0, 0, 1, 1), false, true);
  return 1;
}
static int s_amax(pd_tensor **in, pd_attrs *a, int nsp) {
  static const int64_t xs[3][5] = {{2, 2, 7}, {1, 2, 5, 7}, {1, 2, 3, 4, 5}};
  static const int64_t os[3][3] = {{3}, {2, 3}, {2, 3, 2}};
  in[0] = sample_uniform(nsp + 2, xs[nsp - 1], -1, 1);
  sample_set_list(a, 3, nsp, os[nsp - 1]);
  return 1;
}
static int s_amax1d(pd_tensor **in, pd_attrs *a) { return s_amax(in, a, 1); }
static int s_amax2d(pd_tensor **in, pd_attrs *a) { return s_amax(in, a, 2); }
static int s_amax3d(pd_tensor **in, pd_attrs *a) { return s_amax(in, a, 3); }
static int s_max_grad(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_indices(4, S(2, 2, 2, 3), 20);
  in[1] = sample_uniform(4, S(2, 2, 2, 3), -1, 1);
  sample_set_list(a, 3, 2, S(4, 5));
  return 2;
}
static int s_max_gather(pd_tensor **in, pd_attrs *a) {
  (void)a;
  in[0] = sample_uniform(4, S(2, 2, 4, 5), -1, 1);
  in[1] = sample_indices(4, S(2, 2, 2, 3), 20);
  return 2;
}
static int s_avg1d(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(3, S(2, 2, 7), -1, 1);
  pool_attrs(a, 1, S(3), S(2), S(1, 1), true, false);
  return 1;
}
static int s_avg2d(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(4, S(2, 2, 5, 6), -1, 1);
  pool_attrs(a, 2, S(3, 2), S(2, 2), S(1, 1, 0, 0), true, true);
  return 1;
}
static int s_avg3d(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(5, S(1, 2, 3, 4, 4), -1, 1);
  pool_attrs(a, 3, S(2, 2, 2), S(1, 2, 2), S(0, 0, 1, 1, 1, 1), false, false);
  return 1;
}
static int s_aavg1d(pd_tensor **in, pd_attrs *a) { return s_amax(in, a, 1); }
static int s_aavg2d(pd_tensor **in, pd_attrs *a) { return s_amax(in, a, 2); }
static int s_aavg3d(pd_tensor **in, pd_attrs *a) { return s_amax(in, a, 3); }
static int s_avg_grad(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(4, S(2, 2, 3, 3), -1, 1);
  pool_attrs(a, 2, S(3, 2), S(2, 2), S(1, 1, 0, 0), true, true);
  sample_set_list(a, 3, 2, S(5, 6));
  return 1;
}
static int s_avg_grad_adaptive(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(4, S(1, 2, 2, 3), -1, 1);
  a->i[2] = 1;
  sample_set_list(a, 3, 2, S(5, 7));
  return 1;
}

const pd_op_sample pd_samples_conv[] = {
    {"conv1d", s_conv1d, 0},
    {"conv2d", s_conv2d, 0},
    {"conv2d", s_conv2d_nhwc, 0},
    {"conv3d", s_conv3d, 0},
    {"conv1d_transpose", s_conv1d_t, 0},
    {"conv2d_transpose", s_conv2d_t, 0},
    {"conv3d_transpose", s_conv3d_t, 0},
    {"conv_grad_filter", s_grad_filter, 0},
    {"max_pool1d", s_max1d, 0},
    {"max_pool2d", s_max2d, 0},
    {"max_pool3d", s_max3d, 0},
    {"adaptive_max_pool1d", s_amax1d, 0},
    {"adaptive_max_pool2d", s_amax2d, 0},
    {"adaptive_max_pool3d", s_amax3d, 0},
    {"max_pool_grad", s_max_grad, 0},
    {"max_pool_gather", s_max_gather, 0},
    {"avg_pool1d", s_avg1d, 0},
    {"avg_pool2d", s_avg2d, 0},
    {"avg_pool3d", s_avg3d, 0},
    {"adaptive_avg_pool1d", s_aavg1d, 0},
    {"adaptive_avg_pool2d", s_aavg2d, 0},
    {"adaptive_avg_pool3d", s_aavg3d, 0},
    {"avg_pool_grad", s_avg_grad, 0},
    {"avg_pool_grad", s_avg_grad_adaptive, 0},
    {NULL, NULL, 0},
};
