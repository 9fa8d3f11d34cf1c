/* paddle.nn.MaxPool1D/2D/3D, AvgPool1D/2D/3D, AdaptiveAvgPool1D/2D/3D,
 * AdaptiveMaxPool1D/2D/3D. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "paddlec/conv.h"

typedef enum { P_MAX, P_AVG, P_AMAX, P_AAVG } pool_kind;

typedef struct pool_layer {
  pd_layer base;
  int nsp;
  pool_kind kind;
  int64_t k[3];      /* kernel size, or the adaptive output size */
  int nk;            /* ... as given (1 or nsp values), for printing */
  pd_pool_opts opts; /* strings point into the buffers below */
  char data_format[8], padding_algorithm[16];
} pool_layer;

typedef pd_tensor *(*pool_fn)(pd_tensor *, int, const int64_t *, const pd_pool_opts *);
typedef pd_tensor *(*pool_mask_fn)(pd_tensor *, int, const int64_t *, const pd_pool_opts *, pd_tensor **);
static const pool_fn k_max[3] = {pd_max_pool1d, pd_max_pool2d, pd_max_pool3d};
static const pool_mask_fn k_max_mask[3] = {pd_max_pool1d_with_mask, pd_max_pool2d_with_mask,
                                           pd_max_pool3d_with_mask};
static const pool_fn k_avg[3] = {pd_avg_pool1d, pd_avg_pool2d, pd_avg_pool3d};

static int pool_forward(pd_layer *self, pd_tensor *const *in, int n_in, pd_tensor **out, int max_out) {
  pool_layer *l = (pool_layer *)self;
  if (n_in != 1) return pd_set_error(PD_ERR_INVALID, "%s: expects 1 input, got %d", self->type->name, n_in);
  int nsp = l->nsp, k = nsp - 1;
  bool want_mask = l->opts.return_mask && max_out >= 2;
  pd_tensor *mask = NULL;
  switch (l->kind) {
    case P_MAX:
      out[0] =
          want_mask ? k_max_mask[k](in[0], nsp, l->k, &l->opts, &mask) : k_max[k](in[0], nsp, l->k, &l->opts);
      break;
    case P_AVG:
      out[0] = k_avg[k](in[0], nsp, l->k, &l->opts);
      break;
    case P_AAVG:
      out[0] = nsp == 1   ? pd_adaptive_avg_pool1d(in[0], 1, l->k)
               : nsp == 2 ? pd_adaptive_avg_pool2d(in[0], 2, l->k, l->opts.data_format)
                          : pd_adaptive_avg_pool3d(in[0], 3, l->k, l->opts.data_format);
      break;
    case P_AMAX:
      out[0] = nsp == 1   ? pd_adaptive_max_pool1d(in[0], 1, l->k, want_mask ? &mask : NULL)
               : nsp == 2 ? pd_adaptive_max_pool2d(in[0], 2, l->k, want_mask ? &mask : NULL)
                          : pd_adaptive_max_pool3d(in[0], 3, l->k, want_mask ? &mask : NULL);
      break;
  }
  if (!out[0]) return pd_last_status();
  if (!want_mask) return 1;
  out[1] = mask;
  return 2;
}

static void list_str(char *s, size_t cap, int n, const int64_t *v) {
  size_t w = (size_t)snprintf(s, cap, n == 1 ? "" : "[");
  for (int i = 0; i < n && w < cap; i++)
    w += (size_t)snprintf(s + w, cap - w, "%s%lld", i ? ", " : "", (long long)v[i]);
  if (n != 1 && w < cap) snprintf(s + w, cap - w, "]");
}

static char *pool_repr(const pd_layer *self) {
  const pool_layer *l = (const pool_layer *)self;
  char *s = malloc(384), a[96], b[96], c[96];
  if (!s) return NULL;
  if (l->kind == P_AAVG || l->kind == P_AMAX) {
    list_str(a, sizeof a, l->nk, l->k);
    snprintf(s, 384, "output_size=%s", a);
    return s;
  }
  const pd_pool_opts *o = &l->opts;
  list_str(a, sizeof a, l->nk, l->k);
  if (o->n_stride)
    list_str(b, sizeof b, o->n_stride, o->stride);
  else
    snprintf(b, sizeof b, "None");
  if (o->padding_algorithm)
    snprintf(c, sizeof c, "%s", o->padding_algorithm);
  else if (o->n_padding)
    list_str(c, sizeof c, o->n_padding, o->padding);
  else
    snprintf(c, sizeof c, "0");
  snprintf(s, 384, "kernel_size=%s, stride=%s, padding=%s", a, b, c);
  return s;
}

static const pd_layer_type k_types[4][3] = {{{"MaxPool1D", pool_forward, NULL, pool_repr},
                                             {"MaxPool2D", pool_forward, NULL, pool_repr},
                                             {"MaxPool3D", pool_forward, NULL, pool_repr}},
                                            {{"AvgPool1D", pool_forward, NULL, pool_repr},
                                             {"AvgPool2D", pool_forward, NULL, pool_repr},
                                             {"AvgPool3D", pool_forward, NULL, pool_repr}},
                                            {{"AdaptiveMaxPool1D", pool_forward, NULL, pool_repr},
                                             {"AdaptiveMaxPool2D", pool_forward, NULL, pool_repr},
                                             {"AdaptiveMaxPool3D", pool_forward, NULL, pool_repr}},
                                            {{"AdaptiveAvgPool1D", pool_forward, NULL, pool_repr},
                                             {"AdaptiveAvgPool2D", pool_forward, NULL, pool_repr},
                                             {"AdaptiveAvgPool3D", pool_forward, NULL, pool_repr}}};

static pd_layer *pool_new(pool_kind kind, int nsp, int nk, const int64_t *ks, const pd_pool_opts *opts) {
  static const pd_pool_opts defaults;
  if (!opts) opts = &defaults;
  const pd_layer_type *type = &k_types[kind][nsp - 1];
  bool adaptive = kind == P_AMAX || kind == P_AAVG;
  const char *what = adaptive ? "output_size" : "kernel_size";
  if (!ks || (nk != 1 && nk != nsp)) {
    pd_set_error(PD_ERR_INVALID, "%s: %s must have 1 or %d values, got %d", type->name, what, nsp,
                 ks ? nk : 0);
    return NULL;
  }
  if (opts->n_stride < 0 || opts->n_stride > 3 || opts->n_padding < 0 || opts->n_padding > 6) {
    pd_set_error(PD_ERR_INVALID, "%s: %d strides or %d paddings are too many", type->name, opts->n_stride,
                 opts->n_padding);
    return NULL;
  }
  if ((opts->data_format && strlen(opts->data_format) >= 8) ||
      (opts->padding_algorithm && strlen(opts->padding_algorithm) >= 16)) {
    pd_set_error(PD_ERR_INVALID, "%s: unknown data_format or padding algorithm", type->name);
    return NULL;
  }
  pool_layer *l = pd_layer_new(sizeof *l, type);
  if (!l) return NULL;
  l->nsp = nsp;
  l->kind = kind;
  l->nk = nk;
  for (int d = 0; d < nsp; d++) l->k[d] = ks[nk == 1 ? 0 : d];
  l->opts = *opts;
  if (opts->data_format) {
    snprintf(l->data_format, sizeof l->data_format, "%s", opts->data_format);
    l->opts.data_format = l->data_format;
  }
  if (opts->padding_algorithm) {
    snprintf(l->padding_algorithm, sizeof l->padding_algorithm, "%s", opts->padding_algorithm);
    l->opts.padding_algorithm = l->padding_algorithm;
  }
  return &l->base;
}

pd_layer *pd_nn_max_pool1d(int nk, const int64_t *kernel_size, const pd_pool_opts *opts) {
  return pool_new(P_MAX, 1, nk, kernel_size, opts);
}
pd_layer *pd_nn_max_pool2d(int nk, const int64_t *kernel_size, const pd_pool_opts *opts) {
  return pool_new(P_MAX, 2, nk, kernel_size, opts);
}
pd_layer *pd_nn_max_pool3d(int nk, const int64_t *kernel_size, const pd_pool_opts *opts) {
  return pool_new(P_MAX, 3, nk, kernel_size, opts);
}
pd_layer *pd_nn_avg_pool1d(int nk, const int64_t *kernel_size, const pd_pool_opts *opts) {
  return pool_new(P_AVG, 1, nk, kernel_size, opts);
}
pd_layer *pd_nn_avg_pool2d(int nk, const int64_t *kernel_size, const pd_pool_opts *opts) {
  return pool_new(P_AVG, 2, nk, kernel_size, opts);
}
pd_layer *pd_nn_avg_pool3d(int nk, const int64_t *kernel_size, const pd_pool_opts *opts) {
  return pool_new(P_AVG, 3, nk, kernel_size, opts);
}
pd_layer *pd_nn_adaptive_avg_pool1d(int n, const int64_t *output_size) {
  return pool_new(P_AAVG, 1, n, output_size, NULL);
}
pd_layer *pd_nn_adaptive_avg_pool2d(int n, const int64_t *output_size, const char *data_format) {
  return pool_new(P_AAVG, 2, n, output_size, &(pd_pool_opts){.data_format = data_format});
}
pd_layer *pd_nn_adaptive_avg_pool3d(int n, const int64_t *output_size, const char *data_format) {
  return pool_new(P_AAVG, 3, n, output_size, &(pd_pool_opts){.data_format = data_format});
}
pd_layer *pd_nn_adaptive_max_pool1d(int n, const int64_t *output_size, bool return_mask) {
  return pool_new(P_AMAX, 1, n, output_size, &(pd_pool_opts){.return_mask = return_mask});
}
pd_layer *pd_nn_adaptive_max_pool2d(int n, const int64_t *output_size, bool return_mask) {
  return pool_new(P_AMAX, 2, n, output_size, &(pd_pool_opts){.return_mask = return_mask});
}
pd_layer *pd_nn_adaptive_max_pool3d(int n, const int64_t *output_size, bool return_mask) {
  return pool_new(P_AMAX, 3, n, output_size, &(pd_pool_opts){.return_mask = return_mask});
}
