/* Gradcheck samples for the norm ops. Attr slots: i0 begin_norm_axis /
 * channel_last / groups, i1 has_weight, i2 has_bias, f0 epsilon. The fused
 * grad ops (*_grad) are checked too, which checks second derivatives of the
 * forward ops. */
#include "op_samples.h"

#define S(...) ((const int64_t[]){__VA_ARGS__})

static void attrs(pd_attrs *a, int64_t i0, bool w, bool b, double eps) {
  a->i[0] = i0;
  a->i[1] = w;
  a->i[2] = b;
  a->f[0] = eps;
}

/* x, then optional weight and bias of shape pshape (weights near 1) */
static int with_affine(pd_tensor **in, pd_tensor *x, int np, const int64_t *pshape, bool w, bool b) {
  int n = 0;
  in[n++] = x;
  if (w) in[n++] = sample_uniform(np, pshape, 0.5, 1.5);
  if (b) in[n++] = sample_uniform(np, pshape, -0.5, 0.5);
  return n;
}

/* ---- layer_norm / rms_norm ---------------------------------------------------------------------- */

static int s_layer_norm(pd_tensor **in, pd_attrs *a) {
  attrs(a, 1, true, true, 1e-5);
  return with_affine(in, sample_uniform(2, S(3, 5), -1, 1), 1, S(5), true, true);
}
static int s_layer_norm_2d(pd_tensor **in, pd_attrs *a) { /* over the last 2 dims, weight shaped [3, 4] */
  attrs(a, 1, true, false, 1e-5);
  return with_affine(in, sample_uniform(3, S(2, 3, 4), -1, 1), 2, S(3, 4), true, false);
}
static int s_layer_norm_plain(pd_tensor **in, pd_attrs *a) {
  attrs(a, 1, false, true, 1e-3);
  return with_affine(in, sample_uniform(2, S(4, 3), -2, 2), 1, S(3), false, true);
}
static int s_rms_norm(pd_tensor **in, pd_attrs *a) {
  attrs(a, 1, true, false, 1e-5);
  return with_affine(in, sample_uniform(2, S(3, 4), -1, 1), 1, S(4), true, false);
}
static int s_rms_norm_plain(pd_tensor **in, pd_attrs *a) {
  attrs(a, 1, false, false, 1e-6);
  return with_affine(in, sample_uniform(3, S(2, 2, 3), -1, 1), 0, NULL, false, false);
}

/* grad ops: x, [weight], dy */
static int grad_sample(pd_tensor **in, int nd, const int64_t *xs, int np, const int64_t *ps, bool w) {
  int n = 0;
  in[n++] = sample_uniform(nd, xs, -1, 1);
  if (w) in[n++] = sample_uniform(np, ps, 0.5, 1.5);
  in[n++] = sample_uniform(nd, xs, -1, 1);
  return n;
}
static int s_layer_norm_grad(pd_tensor **in, pd_attrs *a) {
  attrs(a, 1, true, true, 1e-5);
  return grad_sample(in, 2, S(3, 4), 1, S(4), true);
}
static int s_layer_norm_grad_plain(pd_tensor **in, pd_attrs *a) {
  attrs(a, 2, false, true, 1e-5);
  return grad_sample(in, 3, S(2, 2, 3), 0, NULL, false);
}
static int s_rms_norm_grad(pd_tensor **in, pd_attrs *a) {
  attrs(a, 1, true, false, 1e-5);
  return grad_sample(in, 2, S(3, 4), 1, S(4), true);
}
static int s_rms_norm_grad_plain(pd_tensor **in, pd_attrs *a) {
  attrs(a, 1, false, false, 1e-5);
  return grad_sample(in, 2, S(2, 5), 0, NULL, false);
}

/* ---- batch norm -------------------------------------------------------------------------------- */

static int s_batch_norm(pd_tensor **in, pd_attrs *a) { /* NCL */
  attrs(a, 0, true, true, 1e-5);
  return with_affine(in, sample_uniform(3, S(3, 2, 4), -1, 1), 1, S(2), true, true);
}
static int s_batch_norm_2d(pd_tensor **in, pd_attrs *a) { /* [N, C] */
  attrs(a, 0, true, false, 1e-5);
  return with_affine(in, sample_uniform(2, S(5, 3), -1, 1), 1, S(3), true, false);
}
static int s_batch_norm_nhwc(pd_tensor **in, pd_attrs *a) {
  attrs(a, 1, false, true, 1e-5);
  return with_affine(in, sample_uniform(4, S(2, 2, 2, 3), -1, 1), 1, S(3), false, true);
}
static int s_batch_norm_grad(pd_tensor **in, pd_attrs *a) {
  attrs(a, 0, true, true, 1e-5);
  return grad_sample(in, 3, S(3, 2, 3), 1, S(2), true);
}
static int s_batch_norm_grad_nhwc(pd_tensor **in, pd_attrs *a) {
  attrs(a, 1, false, true, 1e-5);
  return grad_sample(in, 3, S(2, 3, 2), 0, NULL, false);
}
static int s_batch_norm_infer(pd_tensor **in, pd_attrs *a) {
  attrs(a, 0, true, true, 1e-5);
  in[0] = sample_uniform(3, S(2, 3, 2), -1, 1);
  in[1] = sample_uniform(1, S(3), -0.5, 0.5);
  in[2] = sample_uniform(1, S(3), 0.5, 2.0);
  in[3] = sample_uniform(1, S(3), 0.5, 1.5);
  in[4] = sample_uniform(1, S(3), -0.5, 0.5);
  return 5;
}
static int s_batch_norm_infer_nhwc(pd_tensor **in, pd_attrs *a) {
  attrs(a, 1, false, false, 1e-5);
  in[0] = sample_uniform(3, S(2, 2, 3), -1, 1);
  in[1] = sample_uniform(1, S(3), -0.5, 0.5);
  in[2] = sample_uniform(1, S(3), 0.5, 2.0);
  return 3;
}

/* ---- group / instance norm ------------------------------------------------------------------------ */

static int s_group_norm(pd_tensor **in, pd_attrs *a) {
  attrs(a, 2, true, true, 1e-5);
  return with_affine(in, sample_uniform(3, S(2, 4, 3), -1, 1), 1, S(4), true, true);
}
static int s_group_norm_4d(pd_tensor **in, pd_attrs *a) {
  attrs(a, 3, false, false, 1e-5);
  return with_affine(in, sample_uniform(4, S(2, 3, 2, 2), -1, 1), 0, NULL, false, false);
}
static int s_instance_norm(pd_tensor **in, pd_attrs *a) {
  attrs(a, 0, true, true, 1e-5);
  return with_affine(in, sample_uniform(3, S(2, 3, 4), -1, 1), 1, S(3), true, true);
}
static int s_group_norm_grad(pd_tensor **in, pd_attrs *a) {
  attrs(a, 2, true, true, 1e-5);
  return grad_sample(in, 3, S(2, 4, 3), 1, S(4), true);
}
static int s_group_norm_grad_instance(pd_tensor **in, pd_attrs *a) {
  attrs(a, 3, false, true, 1e-5);
  return grad_sample(in, 4, S(2, 3, 2, 2), 0, NULL, false);
}

const pd_op_sample pd_samples_norm[] = {
    {"layer_norm", s_layer_norm, 0},
    {"layer_norm", s_layer_norm_2d, 0},
    {"layer_norm", s_layer_norm_plain, 0},
    {"layer_norm_grad", s_layer_norm_grad, 1e-5},
    {"layer_norm_grad", s_layer_norm_grad_plain, 1e-5},
    {"rms_norm", s_rms_norm, 0},
    {"rms_norm", s_rms_norm_plain, 0},
    {"rms_norm_grad", s_rms_norm_grad, 1e-5},
    {"rms_norm_grad", s_rms_norm_grad_plain, 1e-5},
    {"batch_norm", s_batch_norm, 0},
    {"batch_norm", s_batch_norm_2d, 0},
    {"batch_norm", s_batch_norm_nhwc, 0},
    {"batch_norm_grad", s_batch_norm_grad, 1e-5},
    {"batch_norm_grad", s_batch_norm_grad_nhwc, 1e-5},
    {"batch_norm_infer", s_batch_norm_infer, 0},
    {"batch_norm_infer", s_batch_norm_infer_nhwc, 0},
    {"group_norm", s_group_norm, 0},
    {"group_norm", s_group_norm_4d, 0},
    {"instance_norm", s_instance_norm, 0},
    {"group_norm_grad", s_group_norm_grad, 1e-5},
    {"group_norm_grad", s_group_norm_grad_instance, 1e-5},
    {NULL, NULL, 0},
};
