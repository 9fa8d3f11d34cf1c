/* Shared by the normalization ops (op_norm_*.c): optional weight/bias
 * inputs, contiguous operands, data formats, and the backward of the fused
 * grad ops written with public ops (so any order of derivative works). */
#ifndef PADDLEC_OPS_NORM_INTERNAL_H
#define PADDLEC_OPS_NORM_INTERNAL_H

#include "../op_registry.h"
#include "paddlec/ops.h"

/* Temporaries of a composite formula, released together. The first
 * PD_NORM_TMPS live inline, more spill to the heap (never dropped). */
#define PD_NORM_TMPS 96
typedef struct pd_norm_tmps {
  pd_tensor *t[PD_NORM_TMPS];
  pd_tensor **more;
  int n, nmore, capmore;
} pd_norm_tmps;
pd_tensor *pd_norm_keep(pd_norm_tmps *s, pd_tensor *t);
void pd_norm_tmps_free(pd_norm_tmps *s);

/* Attribute slots shared by the norm ops. */
enum {
  PD_NORM_I_AXIS = 0,  /* begin_norm_axis (layer/rms), groups (group norm), channel_last (batch norm) */
  PD_NORM_I_HAS_W = 1, /* weight given */
  PD_NORM_I_HAS_B = 2, /* bias given */
  PD_NORM_F_EPS = 0,   /* epsilon */
  PD_NORM_F_MOMENTUM = 1,
};

/* Checks n_in against the optional inputs named by the attrs: x, then the
 * `fixed` extra inputs, then weight and bias when present. */
pd_status pd_norm_check_arity(const pd_op_def *def, int n_in, int fixed, const pd_attrs *a);
/* x must be float32/float64 (half types arrive as float32); every other
 * input must have x's dtype. */
pd_status pd_norm_check_dtypes(const pd_op_def *def, pd_tensor *const *in, int n_in,
                               const char *const *names);
/* A 1-D per-channel tensor of `channels` elements (weight, bias, statistics). */
pd_status pd_norm_check_channel_param(const char *op, const pd_tensor *p, const char *what, int64_t channels,
                                      const pd_tensor *x, const char *layout);
/* The same check of a parameter's shape given apart (a DTensor's global one). */
pd_status pd_norm_check_channel_dims(const char *op, int ndim, const int64_t *shape, const char *what,
                                     int64_t channels, const pd_tensor *x, const char *layout);

/* t itself (retained) when contiguous, else a contiguous copy. */

/* Data formats: NULL means `dflt`. Channel-first: NC, NCL, NCHW, NCDHW;
 * channel-last: NLC, NHWC, NDHWC. Sets *channel_last. */
pd_status pd_norm_parse_format(const char *op, const char *fmt, const char *dflt, bool *channel_last);

/* Permutation moving the last dim to position 1 (to_first) or dim 1 to the
 * end (!to_first), for rank nd. */
void pd_norm_perm(int nd, bool to_first, int64_t *perm);

/* Geometry of a normalization seen through a reshape of x: statistics over
 * `axes` of the view (keepdim), the affine parameters broadcast with shape
 * `wshape` (same rank as the view). */
typedef struct pd_norm_view {
  int nd;
  int64_t shape[PD_MAX_DIMS];
  int naxes;
  int64_t axes[PD_MAX_DIMS];
  int64_t wshape[PD_MAX_DIMS];
  int64_t count; /* elements per statistic */
  bool centered; /* subtract the mean (all but rms norm) */
  double eps;
} pd_norm_view;

/* Backward of a fused grad op (x, [w], dy) -> (dx, [dw], [db]), whose
 * forward is y = xhat w + b normalized as `v` describes:
 *   d/d(dy) = w P(A) + xhat Bw + Bb
 *   d/dw    = sum(dy P(A))
 *   d/dx    = -r^2 S xhat - r (mean(g xhat) P(A) + mean(A xhat) P(g)) + P(Bw dy)
 * with A, Bw, Bb the gradients of dx, dw, db, g = dy w, r = rstd,
 * P(v) = r (v - mean(v) - xhat mean(v xhat)) (no mean(v) term for rms) and
 * S = mean(A g) - mean(A) mean(g) - mean(A xhat) mean(g xhat) (no
 * mean(A) mean(g) term for rms). Written with public ops. */
pd_status pd_norm_grad_backward(const pd_backward_ctx *c, const pd_norm_view *v, bool has_w, bool has_b);

/* Runs a fused grad op and hands its outputs to the forward's inputs: dx to
 * input 0, dw / db (reshaped to the inputs' shapes) to the weight / bias
 * slots `iw` / `ib` (-1: absent). `gin` are the grad op's inputs. */
pd_status pd_norm_run_grad(const pd_backward_ctx *c, pd_op_id grad_op, pd_tensor *const *gin, int n_gin,
                           const pd_attrs *a, int iw, int ib);

/* ---- the kernels and grad ops of the family ----------------------------- */
/* Contiguous copies of a kernel's inputs into c[0..PD_NORM_MAX_IN) (new
 * references, NULL past n_in or after a failure); release with
 * pd_norm_release_inputs whatever the result. */
#define PD_NORM_MAX_IN 5
pd_status pd_norm_contiguous_inputs(const pd_kernel_ctx *ctx, pd_tensor **c);
void pd_norm_release_inputs(pd_tensor **c);
/* The data of the optional weight and bias among t[first], t[first + 1]
 * as the attrs say which are present (NULL where absent): the forward's
 * inputs, or a grad op's dweight / dbias outputs. b may be NULL. */
void pd_norm_affine_data(const pd_attrs *a, pd_tensor *const *t, int first, void **w, void **b);
/* The forward's backward: runs grad_op on (x, [weight], dy) with attrs a. */
pd_status pd_norm_backward_via(const pd_backward_ctx *c, pd_op_id grad_op, const pd_attrs *a);
/* A grad op's inputs (x, [weight], dy): their count and dtypes. */
pd_status pd_norm_grad_check_inputs(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a);
/* A grad op's metas once x and weight are checked: dy must have x's shape;
 * dx has x's meta, dweight / dbias `channels` elements. */
pd_status pd_norm_grad_metas(const pd_op_def *def, pd_tensor *const *in, int n_in, const pd_attrs *a,
                             int64_t channels, pd_meta *out, int *n_out);

/* Sets an error naming op when a required input is NULL (keeping an earlier
 * error) and returns NULL. */
pd_tensor *pd_norm_null_input(const char *op, const char *what);

#endif
