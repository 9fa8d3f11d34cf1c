/* Pooling kernels on raw buffers, channels-first: planes = N * C contiguous
 * planes of spatial size in[] (input) and out[] (output); one to three
 * spatial dims, unused trailing dims of size 1.
 *
 * Windows follow Paddle: for output o along a dim, start = o * stride - pad,
 * end = min(start + k, in + pad); an "inclusive" average divides by
 * end - start (padding counted), then the window is clipped to [0, in) and
 * an "exclusive" average divides by the clipped size. Adaptive windows are
 * [floor(o * in / out), ceil((o + 1) * in / out)). Max pooling records the
 * flat spatial index of the first maximum of each window (-1 when a window
 * holds nothing above -FLT_MAX). */
#ifndef PADDLEC_KERNELS_POOL_H
#define PADDLEC_KERNELS_POOL_H

#include <stdbool.h>
#include <stdint.h>

typedef struct pd_pool_geom {
  int nsp;
  int64_t planes;
  int64_t in[3], out[3], k[3], stride[3], pad[3];
  bool adaptive;
  bool exclusive;
} pd_pool_geom;

/* Return 0, or -1 when scratch memory cannot be allocated. */
int pdk_max_pool_f32(const pd_pool_geom *g, const float *x, float *y, int32_t *mask);
int pdk_max_pool_f64(const pd_pool_geom *g, const double *x, double *y, int32_t *mask);
int pdk_avg_pool_f32(const pd_pool_geom *g, const float *x, float *y);
int pdk_avg_pool_f64(const pd_pool_geom *g, const double *x, double *y);
/* The adjoint of avg pooling: dx = sum over windows of dy / divisor. */
int pdk_avg_pool_grad_f32(const pd_pool_geom *g, const float *dy, float *dx);
int pdk_avg_pool_grad_f64(const pd_pool_geom *g, const double *dy, double *dx);

/* dx[p, mask[p, o]] += dy[p, o] (indices outside the plane are skipped);
 * mask is int32, or int64 when mask64. Only planes, in and out are read. */
void pdk_max_pool_scatter_f32(const pd_pool_geom *g, const void *mask, bool mask64, const float *dy,
                              float *dx);
void pdk_max_pool_scatter_f64(const pd_pool_geom *g, const void *mask, bool mask64, const double *dy,
                              double *dx);
/* y[p, o] = x[p, mask[p, o]] (0 for indices outside the plane). */
void pdk_max_pool_gather_f32(const pd_pool_geom *g, const void *mask, bool mask64, const float *x, float *y);
void pdk_max_pool_gather_f64(const pd_pool_geom *g, const void *mask, bool mask64, const double *x,
                             double *y);

#endif
