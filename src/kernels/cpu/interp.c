/* Nearest and bilinear resizing. Forward loops split rows of all planes
 * over threads; the adjoints split planes (each plane of dx is written by
 * one thread only, so accumulation needs no atomics). */
#include "interp.h"

#include <string.h>

#include "parallel.h"

float pdk_interp_ratio(int64_t in, int64_t out, double scale, bool align_corners) {
  if (out <= 1) return 0.f;
  if (align_corners) return (float)(in - 1) / (float)(out - 1);
  return scale > 0 ? (float)(1. / (double)(float)scale) : (float)in / (float)out;
}

void pdk_interp_nearest_index(int64_t in, int64_t out, float ratio, bool align_corners, int64_t *idx) {
  for (int64_t k = 0; k < out; k++) {
    float r = ratio * (float)k;
    int64_t i = align_corners ? (int64_t)(r + 0.5) : (int64_t)r;
    idx[k] = i < 0 ? 0 : i >= in ? in - 1 : i;
  }
}

void pdk_interp_linear_index(int64_t in, int64_t out, float ratio, bool align_corners, int align_mode,
                             int64_t *i0, int64_t *i1, float *w0, float *w1) {
  bool align_flag = align_mode == 0 && !align_corners;
  for (int64_t k = 0; k < out; k++) {
    int64_t a = align_flag ? (int64_t)(ratio * (k + 0.5) - 0.5) : (int64_t)(ratio * (float)k);
    if (a < 0) a = 0;
    if (a > in - 1) a = in - 1;
    int64_t b = a + 1 < in - 1 ? a + 1 : in - 1;
    float src = (float)(ratio * (k + 0.5) - 0.5);
    if (src < 0) src = 0;
    float d = align_flag ? src - (float)a : ratio * (float)k - (float)a;
    i0[k] = a;
    i1[k] = b;
    w1[k] = d;
    w0[k] = 1.f - d;
  }
}

#define NEAREST_ROW(T)                                                                   \
  static void nearest_row_##T(const char *xp, char *op, int64_t ow, const int64_t *iw) { \
    const T *x = (const T *)xp;                                                          \
    T *o = (T *)op;                                                                      \
    for (int64_t w = 0; w < ow; w++) o[w] = x[iw[w]];                                    \
  }
NEAREST_ROW(uint8_t)
NEAREST_ROW(uint16_t)
NEAREST_ROW(uint32_t)
NEAREST_ROW(uint64_t)

void pdk_nearest(const void *x, void *out, int64_t planes, int64_t in_d, int64_t in_h, int64_t in_w,
                 int64_t od, int64_t oh, int64_t ow, const int64_t *id, const int64_t *ih, const int64_t *iw,
                 int64_t elsize) {
  int64_t rows = planes * od * oh;
  int64_t grain = PD_GRAIN / (ow > 0 ? ow : 1);
  PD_PARALLEL_FOR(r, rows, grain > 0 ? grain : 1, {
    int64_t h = r % oh, d = (r / oh) % od, p = r / (oh * od);
    const char *xr = (const char *)x + ((p * in_d + id[d]) * in_h + ih[h]) * in_w * elsize;
    char *orow = (char *)out + r * ow * elsize;
    switch (elsize) {
      case 1:
        nearest_row_uint8_t(xr, orow, ow, iw);
        break;
      case 2:
        nearest_row_uint16_t(xr, orow, ow, iw);
        break;
      case 4:
        nearest_row_uint32_t(xr, orow, ow, iw);
        break;
      default:
        nearest_row_uint64_t(xr, orow, ow, iw);
        break;
    }
  });
}

#define NEAREST_GRAD(T)                                                                                     \
  static void nearest_grad_##T(const T *g, T *dx, int64_t planes, int64_t in_d, int64_t in_h, int64_t in_w, \
                               int64_t od, int64_t oh, int64_t ow, const int64_t *id, const int64_t *ih,    \
                               const int64_t *iw) {                                                         \
    int64_t isz = in_d * in_h * in_w, osz = od * oh * ow;                                                   \
    PD_PARALLEL_FOR_IF(planes *osz >= PD_GRAIN, p, planes, {                                                \
      T *d0 = dx + p * isz;                                                                                 \
      const T *g0 = g + p * osz;                                                                            \
      memset(d0, 0, (size_t)isz * sizeof(T));                                                               \
      for (int64_t d = 0; d < od; d++)                                                                      \
        for (int64_t h = 0; h < oh; h++) {                                                                  \
          T *drow = d0 + (id[d] * in_h + ih[h]) * in_w;                                                     \
          const T *grow = g0 + (d * oh + h) * ow;                                                           \
          for (int64_t w = 0; w < ow; w++) drow[iw[w]] += grow[w];                                          \
        }                                                                                                   \
    });                                                                                                     \
  }
NEAREST_GRAD(float)
NEAREST_GRAD(double)

int pdk_nearest_grad(pd_dtype dt, const void *g, void *dx, int64_t planes, int64_t in_d, int64_t in_h,
                     int64_t in_w, int64_t od, int64_t oh, int64_t ow, const int64_t *id, const int64_t *ih,
                     const int64_t *iw) {
  if (dt == PD_FLOAT32)
    nearest_grad_float(g, dx, planes, in_d, in_h, in_w, od, oh, ow, id, ih, iw);
  else if (dt == PD_FLOAT64)
    nearest_grad_double(g, dx, planes, in_d, in_h, in_w, od, oh, ow, id, ih, iw);
  else
    return -1;
  return 0;
}

/* Each output: x[y0][x0] wy0 wx0 + x[y1][x0] wy1 wx0 + x[y0][x1] wy0 wx1 + x[y1][x1] wy1 wx1, in that order.
 */
#define BILINEAR(T)                                                                                        \
  static void bilinear_##T(const T *x, T *out, int64_t planes, int64_t in_h, int64_t in_w, int64_t oh,     \
                           int64_t ow, const int64_t *y0, const int64_t *y1, const float *wy0,             \
                           const float *wy1, const int64_t *x0, const int64_t *x1, const float *wx0,       \
                           const float *wx1) {                                                             \
    int64_t rows = planes * oh, grain = PD_GRAIN / (4 * (ow > 0 ? ow : 1));                                \
    PD_PARALLEL_FOR(r, rows, grain > 0 ? grain : 1, {                                                      \
      int64_t h = r % oh, p = r / oh;                                                                      \
      const T *xn = x + (p * in_h + y0[h]) * in_w, *xs = x + (p * in_h + y1[h]) * in_w;                    \
      T *o = out + r * ow;                                                                                 \
      T ds = (T)wy0[h], dn = (T)wy1[h];                                                                    \
      for (int64_t w = 0; w < ow; w++) {                                                                   \
        T de = (T)wx0[w], dw = (T)wx1[w];                                                                  \
        o[w] = xn[x0[w]] * ds * de + xs[x0[w]] * dn * de + xn[x1[w]] * ds * dw + xs[x1[w]] * dn * dw;      \
      }                                                                                                    \
    });                                                                                                    \
  }                                                                                                        \
  static void bilinear_grad_##T(const T *g, T *dx, int64_t planes, int64_t in_h, int64_t in_w, int64_t oh, \
                                int64_t ow, const int64_t *y0, const int64_t *y1, const float *wy0,        \
                                const float *wy1, const int64_t *x0, const int64_t *x1, const float *wx0,  \
                                const float *wx1) {                                                        \
    int64_t isz = in_h * in_w, osz = oh * ow;                                                              \
    PD_PARALLEL_FOR_IF(planes *osz >= PD_GRAIN / 4, p, planes, {                                           \
      T *d0 = dx + p * isz;                                                                                \
      const T *g0 = g + p * osz;                                                                           \
      memset(d0, 0, (size_t)isz * sizeof(T));                                                              \
      for (int64_t h = 0; h < oh; h++) {                                                                   \
        T *dn_row = d0 + y0[h] * in_w, *ds_row = d0 + y1[h] * in_w;                                        \
        T ds = (T)wy0[h], dn = (T)wy1[h];                                                                  \
        const T *grow = g0 + h * ow;                                                                       \
        for (int64_t w = 0; w < ow; w++) {                                                                 \
          T gv = grow[w], de = (T)wx0[w], dw = (T)wx1[w];                                                  \
          dn_row[x0[w]] += gv * ds * de;                                                                   \
          ds_row[x0[w]] += gv * dn * de;                                                                   \
          dn_row[x1[w]] += gv * ds * dw;                                                                   \
          ds_row[x1[w]] += gv * dn * dw;                                                                   \
        }                                                                                                  \
      }                                                                                                    \
    });                                                                                                    \
  }
BILINEAR(float)
BILINEAR(double)

int pdk_bilinear(pd_dtype dt, const void *x, void *out, int64_t planes, int64_t in_h, int64_t in_w,
                 int64_t oh, int64_t ow, const int64_t *y0, const int64_t *y1, const float *wy0,
                 const float *wy1, const int64_t *x0, const int64_t *x1, const float *wx0, const float *wx1) {
  if (dt == PD_FLOAT32)
    bilinear_float(x, out, planes, in_h, in_w, oh, ow, y0, y1, wy0, wy1, x0, x1, wx0, wx1);
  else if (dt == PD_FLOAT64)
    bilinear_double(x, out, planes, in_h, in_w, oh, ow, y0, y1, wy0, wy1, x0, x1, wx0, wx1);
  else
    return -1;
  return 0;
}

int pdk_bilinear_grad(pd_dtype dt, const void *g, void *dx, int64_t planes, int64_t in_h, int64_t in_w,
                      int64_t oh, int64_t ow, const int64_t *y0, const int64_t *y1, const float *wy0,
                      const float *wy1, const int64_t *x0, const int64_t *x1, const float *wx0,
                      const float *wx1) {
  if (dt == PD_FLOAT32)
    bilinear_grad_float(g, dx, planes, in_h, in_w, oh, ow, y0, y1, wy0, wy1, x0, x1, wx0, wx1);
  else if (dt == PD_FLOAT64)
    bilinear_grad_double(g, dx, planes, in_h, in_w, oh, ow, y0, y1, wy0, wy1, x0, x1, wx0, wx1);
  else
    return -1;
  return 0;
}
