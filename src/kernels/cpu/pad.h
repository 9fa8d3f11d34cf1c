/* Padding on raw buffers: constant, reflect, replicate and circular modes
 * over any dims, and the adjoint (gradient) one dim at a time. */
#ifndef PADDLEC_KERNELS_PAD_H
#define PADDLEC_KERNELS_PAD_H

#include <stdint.h>

#include "paddlec/core.h"

typedef enum pd_pad_mode { PD_PAD_CONSTANT, PD_PAD_REFLECT, PD_PAD_REPLICATE, PD_PAD_CIRCULAR } pd_pad_mode;

/* Index read along one dim for output index o, with `before` pads in front of
 * n input elements; -1 where constant padding applies. reflect needs
 * before, after < n; the other modes need n > 0 where they pad. */
static inline int64_t pd_pad_src(int64_t o, int64_t before, int64_t n, int mode) {
  int64_t i = o - before;
  if (i >= 0 && i < n) return i;
  switch (mode) {
    case PD_PAD_REFLECT:
      return i < 0 ? -i : 2 * (n - 1) - i;
    case PD_PAD_REPLICATE:
      return i < 0 ? 0 : n - 1;
    case PD_PAD_CIRCULAR:
      return ((i % n) + n) % n;
    default:
      return -1;
  }
}

/* out (contiguous, shape oshape) = x (shape xshape, strides in elements,
 * possibly negative or zero) padded by before[d] in front along each dim;
 * `value` points at one element of the constant. Returns 0, or -1 when out
 * of memory. */
int pdk_pad(int ndim, const int64_t *xshape, const int64_t *xstrides, const void *x, const int64_t *before,
            const int64_t *oshape, int mode, const void *value, void *out, int64_t elsize);

/* Adjoint of padding along one dim: g contiguous [outer, nout, inner] ->
 * dx contiguous [outer, nin, inner], dx[., i, .] = sum of g[., o, .] over
 * the o that read i. float32/float64; returns -1 for other dtypes or when
 * out of memory. */
int pdk_pad_grad_dim(pd_dtype dt, const void *g, void *dx, int64_t outer, int64_t nout, int64_t nin,
                     int64_t inner, int64_t before, int mode);

#endif
