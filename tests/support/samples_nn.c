/* Gradcheck samples for the nn ops (dropout, padding, resizing). The
 * random ops get a fixed seed attribute, so every forward of the check
 * draws the same mask. */
#include "op_samples.h"

#define S(...) ((const int64_t[]){__VA_ARGS__})

static int s_dropout(pd_tensor **in, pd_attrs *a) {
  pd_seed(2024);
  in[0] = sample_uniform(2, S(6, 5), -1, 1);
  a->f[0] = 0.4;
  a->i[1] = 1234; /* seed */
  return 1;
}
static int s_dropout_axis_downscale(pd_tensor **in, pd_attrs *a) {
  pd_seed(2024);
  in[0] = sample_uniform(3, S(4, 3, 2), -1, 1);
  a->f[0] = 0.5;
  a->i[0] = 1; /* downscale_in_infer */
  a->i[1] = 99;
  sample_set_list(a, 0, 2, S(0, 1));
  return 1;
}
/* A shard [3, 2] of a [6, 5] tensor at offset [3, 2]: the whole mask's slice. */
static int s_dropout_shard(pd_tensor **in, pd_attrs *a) {
  pd_seed(2024);
  in[0] = sample_uniform(2, S(3, 2), -1, 1);
  a->f[0] = 0.4;
  a->i[1] = 77;
  sample_set_list(a, 1, 2, S(6, 5));
  sample_set_list(a, 2, 2, S(3, 2));
  return 1;
}
static int s_alpha_dropout(pd_tensor **in, pd_attrs *a) {
  pd_seed(7);
  in[0] = sample_uniform(2, S(5, 4), -1, 1);
  a->f[0] = 0.3;
  a->i[1] = 4321;
  return 1;
}

static void pads(pd_attrs *a, int n, const int64_t *before, const int64_t *after, int mode, double value) {
  sample_set_list(a, 0, n, before);
  sample_set_list(a, 1, n, after);
  a->i[0] = mode;
  a->f[0] = value;
}
static int s_pad_constant(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, S(2, 3), -1, 1);
  pads(a, 2, S(1, 0), S(0, 2), 0, 0.5);
  return 1;
}
static int s_pad_reflect(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(3, S(2, 3, 4), -1, 1);
  pads(a, 3, S(0, 2, 2), S(0, 1, 3), 1, 0);
  return 1;
}
static int s_pad_replicate(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(3, S(2, 3, 3), -1, 1);
  pads(a, 3, S(0, 1, 2), S(0, 3, 1), 2, 0);
  return 1;
}
static int s_pad_circular(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(3, S(1, 2, 3), -1, 1);
  pads(a, 3, S(0, 0, 4), S(0, 1, 2), 3, 0);
  return 1;
}
static int s_pad_grad_reflect(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(2, S(2, 9), -1, 1); /* x [2, 4] padded by 2 and 3 */
  pads(a, 2, S(0, 2), S(0, 3), 1, 0);
  return 1;
}
static int s_pad_grad_replicate(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(3, S(2, 6, 6), -1, 1); /* x [2, 2, 3] */
  pads(a, 3, S(0, 1, 2), S(0, 3, 1), 2, 0);
  return 1;
}

static void interp(pd_attrs *a, int nsp, const int64_t *out, const int64_t *in_sz, bool align_corners,
                   int align_mode) {
  sample_set_list(a, 0, nsp, out);
  if (in_sz) sample_set_list(a, 1, nsp, in_sz);
  a->i[0] = align_corners;
  a->i[1] = align_mode;
}
static int s_nearest(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(4, S(1, 2, 3, 4), -1, 1);
  interp(a, 2, S(5, 7), NULL, false, 0);
  return 1;
}
static int s_nearest_down_scale(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(4, S(2, 1, 5, 6), -1, 1);
  interp(a, 2, S(3, 4), NULL, false, 0); /* scale 0.7: out = floor(5*0.7), floor(6*0.7) */
  a->f[0] = a->f[1] = 0.7;
  return 1;
}
static int s_nearest_5d(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(5, S(1, 1, 2, 3, 2), -1, 1);
  interp(a, 3, S(3, 4, 5), NULL, false, 0);
  return 1;
}
static int s_nearest_grad(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(4, S(1, 2, 5, 7), -1, 1);
  interp(a, 2, S(5, 7), S(3, 4), false, 0);
  return 1;
}
static int s_bilinear(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(4, S(1, 2, 3, 4), -1, 1);
  interp(a, 2, S(5, 6), NULL, false, 0);
  return 1;
}
static int s_bilinear_align_corners(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(4, S(2, 1, 3, 4), -1, 1);
  interp(a, 2, S(4, 7), NULL, true, 0);
  return 1;
}
static int s_bilinear_mode1_down(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(4, S(1, 1, 5, 6), -1, 1);
  interp(a, 2, S(3, 4), NULL, false, 1);
  return 1;
}
static int s_bilinear_grad(pd_tensor **in, pd_attrs *a) {
  in[0] = sample_uniform(4, S(1, 2, 5, 6), -1, 1);
  interp(a, 2, S(5, 6), S(3, 4), false, 0);
  return 1;
}

const pd_op_sample pd_samples_nn[] = {
    {"dropout", s_dropout, 0},
    {"dropout", s_dropout_axis_downscale, 0},
    {"dropout", s_dropout_shard, 0},
    {"alpha_dropout", s_alpha_dropout, 0},
    {"pad", s_pad_constant, 0},
    {"pad", s_pad_reflect, 0},
    {"pad", s_pad_replicate, 0},
    {"pad", s_pad_circular, 0},
    {"pad_grad", s_pad_grad_reflect, 0},
    {"pad_grad", s_pad_grad_replicate, 0},
    {"nearest_interp", s_nearest, 0},
    {"nearest_interp", s_nearest_down_scale, 0},
    {"nearest_interp", s_nearest_5d, 0},
    {"nearest_interp_grad", s_nearest_grad, 0},
    {"bilinear_interp", s_bilinear, 0},
    {"bilinear_interp", s_bilinear_align_corners, 0},
    {"bilinear_interp", s_bilinear_mode1_down, 0},
    {"bilinear_interp_grad", s_bilinear_grad, 0},
    {NULL, NULL, 0},
};
