/* Maxout on raw contiguous buffers (paddle.nn.functional.maxout). x is
 * viewed as [outer, cout * groups, inner] and y as [outer, cout, inner]:
 *   y[o, c, j] = max_k x[o, c * groups + k, j],  0 <= k < groups.
 * The maximum is taken as m = m > v ? m : v from k = 0 upwards. */
#ifndef PADDLEC_KERNELS_MAXOUT_H
#define PADDLEC_KERNELS_MAXOUT_H

#include <stdint.h>

typedef struct pd_maxout_geom {
  int64_t outer, cout, groups, inner;
} pd_maxout_geom;

void pdk_maxout_f32(const pd_maxout_geom *g, const float *x, float *y);
void pdk_maxout_f64(const pd_maxout_geom *g, const double *x, double *y);
/* The gradient: dx[o, c * groups + k, j] = dy[o, c, j] at the first k whose
 * x equals y[o, c, j], zero elsewhere (every element of dx is written). */
void pdk_maxout_grad_f32(const pd_maxout_geom *g, const float *x, const float *y, const float *dy, float *dx);
void pdk_maxout_grad_f64(const pd_maxout_geom *g, const double *x, const double *y, const double *dy,
                         double *dx);

#endif
