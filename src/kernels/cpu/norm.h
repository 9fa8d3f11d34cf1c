/* Normalization kernels over contiguous buffers: one fused forward and one
 * fused backward per kind, in float and double.
 *
 * Statistics are numerically stable: a row (layer/rms/group/instance norm)
 * is reduced mean-first, then the squared deviations from that mean, both
 * in vectorised float blocks whose sums are added in double; batch norm
 * reduces cache-sized chunks the same way and merges the chunks with the
 * pairwise (Chan) update, so a channel spread over memory is read once.
 * Backward kernels recompute the statistics from x (rows are in cache), so
 * they are pure functions of (x, weight, dy).
 *
 * Weight and bias pointers may be NULL (scale 1, shift 0). In the backward
 * kernels dw / db may be NULL when not wanted; dx is always written.
 * Functions returning int return non-zero when scratch memory could not be
 * allocated. */
#ifndef PADDLEC_KERNELS_NORM_H
#define PADDLEC_KERNELS_NORM_H

#include <stdbool.h>
#include <stdint.h>

/* ---- row norms: x is [rows, n], statistics per row -------------------------
 * centered: layer norm  y = (x - mean) rstd w + b,  rstd = 1/sqrt(var + eps)
 * !centered: rms norm   y = x rstd w,               rstd = 1/sqrt(mean(x^2) + eps)
 * w and b have n elements (b ignored when !centered). */
void pdk_row_norm_fwd_f32(const float *x, const float *w, const float *b, float *y, int64_t rows, int64_t n,
                          double eps, bool centered);
void pdk_row_norm_fwd_f64(const double *x, const double *w, const double *b, double *y, int64_t rows,
                          int64_t n, double eps, bool centered);
/* dw = sum over rows of dy * xhat, db = sum over rows of dy (n elements). */
int pdk_row_norm_bwd_f32(const float *x, const float *w, const float *dy, float *dx, float *dw, float *db,
                         int64_t rows, int64_t n, double eps, bool centered);
int pdk_row_norm_bwd_f64(const double *x, const double *w, const double *dy, double *dx, double *dw,
                         double *db, int64_t rows, int64_t n, double eps, bool centered);

/* ---- group norm: x is [batch, channels, spatial] (channel-first), channels
 * split into `groups` equal groups; statistics per (sample, group) over
 * (channels / groups) * spatial elements; w, b per channel. Instance norm is
 * groups == channels. */
void pdk_group_norm_fwd_f32(const float *x, const float *w, const float *b, float *y, int64_t batch,
                            int64_t channels, int64_t spatial, int64_t groups, double eps);
void pdk_group_norm_fwd_f64(const double *x, const double *w, const double *b, double *y, int64_t batch,
                            int64_t channels, int64_t spatial, int64_t groups, double eps);
int pdk_group_norm_bwd_f32(const float *x, const float *w, const float *dy, float *dx, float *dw, float *db,
                           int64_t batch, int64_t channels, int64_t spatial, int64_t groups, double eps);
int pdk_group_norm_bwd_f64(const double *x, const double *w, const double *dy, double *dx, double *dw,
                           double *db, int64_t batch, int64_t channels, int64_t spatial, int64_t groups,
                           double eps);

/* ---- batch norm: statistics per channel over everything else.
 * Layout: channel-first x is [batch, channels, spatial]; channel-last x is
 * [batch * spatial, channels] (pass batch = rows, spatial = 1). */
typedef struct pd_bn_geom {
  int64_t batch, channels, spatial;
  bool channel_last;
} pd_bn_geom;

/* Training forward: batch statistics (mean, biased variance; either output
 * may be NULL), then y. */
int pdk_batch_norm_fwd_f32(const float *x, const float *w, const float *b, float *y, float *mean_out,
                           float *var_out, const pd_bn_geom *g, double eps);
int pdk_batch_norm_fwd_f64(const double *x, const double *w, const double *b, double *y, double *mean_out,
                           double *var_out, const pd_bn_geom *g, double eps);
/* Training backward (statistics recomputed from x). */
int pdk_batch_norm_bwd_f32(const float *x, const float *w, const float *dy, float *dx, float *dw, float *db,
                           const pd_bn_geom *g, double eps);
int pdk_batch_norm_bwd_f64(const double *x, const double *w, const double *dy, double *dx, double *dw,
                           double *db, const pd_bn_geom *g, double eps);
/* y = (x - mean[c]) * scale[c] + shift[c] per channel (inference with given
 * statistics, and the last step of the training forward). */
void pdk_channel_affine_f32(const float *x, const float *mean, const float *scale, const float *shift,
                            float *y, const pd_bn_geom *g);
void pdk_channel_affine_f64(const double *x, const double *mean, const double *scale, const double *shift,
                            double *y, const pd_bn_geom *g);

#endif
