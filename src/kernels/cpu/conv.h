/* Convolution kernels on raw buffers.
 *
 * One geometry describes a convolution from an "input space" (spatial size
 * in[]) to an "output space" (spatial size out[]): output position o reads
 * input position o * stride - pad + k * dil for k in [0, K), positions
 * outside [0, in) reading zeros. The three computations of a convolution
 * share it:
 *   forward        y  = conv(x, w)       x: [N, Ci, in], w: [Co, Ci/G, K], y: [N, Co, out]
 *   backward data  dx = conv^T(dy, w)    (also the transposed convolution's forward)
 *   backward wts   dw = dconv/dw(x, dy)
 * Activations are contiguous, channels-first ([N, C, spatial]) or
 * channels-last ([N, spatial, C]); weights are contiguous [Co, Ci/G, K...].
 * One to three spatial dims; unused trailing dims have size 1. */
#ifndef PADDLEC_KERNELS_CONV_H
#define PADDLEC_KERNELS_CONV_H

#include <stdbool.h>
#include <stdint.h>

typedef struct pd_conv_geom {
  int nsp;                                 /* spatial dims, 1..3 */
  int64_t N, Ci, Co, G;                    /* batch, input channels, output channels, groups */
  int64_t in[3], out[3];                   /* spatial sizes of the input and output spaces */
  int64_t k[3], stride[3], dil[3], pad[3]; /* pad: before each dim */
  bool channel_last;
} pd_conv_geom;

typedef enum pd_conv_kind { PD_CONV_FWD = 0, PD_CONV_BWD_DATA, PD_CONV_BWD_WEIGHTS } pd_conv_kind;

/* The padding after each dim that makes the geometry consistent for a
 * library that needs it: out = (in + pad + pad_r - ext) / stride + 1 with
 * ext = dil * (k - 1) + 1, the smallest such value (may be negative). */
int64_t pdk_conv_pad_after(const pd_conv_geom *g, int d);

/* Direct (im2col + GEMM) path, any geometry. Return 0, or non-zero when a
 * buffer cannot be allocated or GEMM fails.
 *   fwd:          a = x, b = w, out = y (bias: [Co] or NULL)
 *   bwd data:     a = dy, b = w, out = dx
 *   bwd weights:  a = x, b = dy, out = dw */
int pdk_conv_ref_f32(pd_conv_kind kind, const pd_conv_geom *g, const float *a, const float *b,
                     const float *bias, float *out);
int pdk_conv_ref_f64(pd_conv_kind kind, const pd_conv_geom *g, const double *a, const double *b,
                     const double *bias, double *out);

/* float32 through oneDNN convolution primitives (engine, stream and
 * primitives are created once and cached by geometry; reorders to the
 * primitive's preferred layouts only where they differ from the plain
 * ones). Same arguments as the direct path. Returns 0 on success, 1 when
 * oneDNN cannot express the geometry (the caller falls back to the direct
 * path), negative on a library failure. */
int pdk_conv_dnnl_f32(pd_conv_kind kind, const pd_conv_geom *g, const float *a, const float *b,
                      const float *bias, float *out);

/* y[n, c, ...] += bias[c] over a contiguous activation. */
void pdk_conv_add_bias_f32(const pd_conv_geom *g, bool out_space, const float *bias, float *y);
void pdk_conv_add_bias_f64(const pd_conv_geom *g, bool out_space, const double *bias, double *y);

/* Number of primitives in the oneDNN cache (for tests). */
int pdk_conv_dnnl_cache_size(void);

#endif
