/* Resizing (F.interpolate) on raw buffers: nearest and bilinear, forward
 * and adjoint, over contiguous planes (N*C images of [D,] H, W). Source
 * indices and weights follow Paddle's CPU kernels, float32 index math
 * included, so results match Paddle's bit for bit where the arithmetic
 * allows. */
#ifndef PADDLEC_KERNELS_INTERP_H
#define PADDLEC_KERNELS_INTERP_H

#include <stdbool.h>
#include <stdint.h>

#include "paddlec/core.h"

/* The source step along one dim: 0 when out <= 1; (in-1)/(out-1) with
 * align_corners; else 1/scale when a scale was given (scale > 0), in/out
 * otherwise. */
float pdk_interp_ratio(int64_t in, int64_t out, double scale, bool align_corners);

/* Nearest source index of every output index (clamped into [0, in)). */
void pdk_interp_nearest_index(int64_t in, int64_t out, float ratio, bool align_corners, int64_t *idx);

/* Linear taps of every output index: out[o] = w0[o] x[i0[o]] + w1[o] x[i1[o]]. */
void pdk_interp_linear_index(int64_t in, int64_t out, float ratio, bool align_corners, int align_mode,
                             int64_t *i0, int64_t *i1, float *w0, float *w1);

/* out[p, d, h, w] = x[p, id[d], ih[h], iw[w]] for planes p of [od, oh, ow]
 * out of [in_d, in_h, in_w]; any element size. */
void pdk_nearest(const void *x, void *out, int64_t planes, int64_t in_d, int64_t in_h, int64_t in_w,
                 int64_t od, int64_t oh, int64_t ow, const int64_t *id, const int64_t *ih, const int64_t *iw,
                 int64_t elsize);
/* The adjoint: dx = 0, then dx[p, id[d], ih[h], iw[w]] += g[p, d, h, w].
 * float32/float64; -1 for other dtypes. */
int pdk_nearest_grad(pd_dtype dt, const void *g, void *dx, int64_t planes, int64_t in_d, int64_t in_h,
                     int64_t in_w, int64_t od, int64_t oh, int64_t ow, const int64_t *id, const int64_t *ih,
                     const int64_t *iw);

/* Bilinear over planes of [in_h, in_w] -> [oh, ow] with the taps of
 * pdk_interp_linear_index along h (y*) and w (x*). float32/float64. */
int pdk_bilinear(pd_dtype dt, const void *x, void *out, int64_t planes, int64_t in_h, int64_t in_w,
                 int64_t oh, int64_t ow, const int64_t *y0, const int64_t *y1, const float *wy0,
                 const float *wy1, const int64_t *x0, const int64_t *x1, const float *wx0, const float *wx1);
/* Its adjoint (dx zeroed first). */
int pdk_bilinear_grad(pd_dtype dt, const void *g, void *dx, int64_t planes, int64_t in_h, int64_t in_w,
                      int64_t oh, int64_t ow, const int64_t *y0, const int64_t *y1, const float *wy0,
                      const float *wy1, const int64_t *x0, const int64_t *x1, const float *wx0,
                      const float *wx1);

#endif
