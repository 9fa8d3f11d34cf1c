/* paddle.nn.Conv1D/2D/3D and Conv1DTranspose/2D/3D. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "paddlec/conv.h"
#include "layer_dtype.h"

typedef pd_tensor *(*conv_fn)(pd_tensor *, pd_tensor *, pd_tensor *, const pd_conv_opts *);
static const conv_fn k_conv[3] = {pd_conv1d, pd_conv2d, pd_conv3d};
static const conv_fn k_convt[3] = {pd_conv1d_transpose, pd_conv2d_transpose, pd_conv3d_transpose};

typedef struct conv_layer {
  pd_layer base;
  int nsp;
  bool transpose;
  int64_t in_channels, out_channels, k[3];
  pd_conv_opts conv; /* strings point into the buffers below */
  char data_format[8], padding_algorithm[16];
  int n_output_size; /* forward(x, output_size) of transposed layers */
  int64_t output_size[3];
  pd_tensor *weight, *bias; /* borrowed from the base's parameter list */
} conv_layer;

static int conv_forward(pd_layer *self, pd_tensor *const *in, int n_in, pd_tensor **out, int max_out) {
  (void)max_out;
  conv_layer *l = (conv_layer *)self;
  if (n_in != 1) return pd_set_error(PD_ERR_INVALID, "%s: expects 1 input, got %d", l->base.type->name, n_in);
  pd_conv_opts o = l->conv;
  o.n_output_size = l->n_output_size;
  memcpy(o.output_size, l->output_size, sizeof o.output_size);
  out[0] = (l->transpose ? k_convt : k_conv)[l->nsp - 1](in[0], l->weight, l->bias, &o);
  return out[0] ? 1 : pd_last_status();
}

static int list_str(char *s, size_t cap, int n, const int64_t *v) {
  int w = snprintf(s, cap, "[");
  for (int i = 0; i < n; i++)
    w += snprintf(s + w, cap > (size_t)w ? cap - (size_t)w : 0, "%s%lld", i ? ", " : "", (long long)v[i]);
  w += snprintf(s + w, cap > (size_t)w ? cap - (size_t)w : 0, "]");
  return w;
}

/* Paddle's extra_repr: "4, 8, kernel_size=[3, 3], stride=[2, 2], padding=1, data_format=NCHW". */
static char *conv_repr(const pd_layer *self) {
  const conv_layer *l = (const conv_layer *)self;
  size_t cap = 512;
  char *s = malloc(cap), b[128];
  if (!s) return NULL;
  int w = snprintf(s, cap, "%lld, %lld, kernel_size=", (long long)l->in_channels, (long long)l->out_channels);
  list_str(b, sizeof b, l->nsp, l->k);
  w += snprintf(s + w, cap - (size_t)w, "%s", b);
  const pd_conv_opts *o = &l->conv;
  bool unit = true;
  for (int i = 0; i < o->n_stride; i++) unit &= o->stride[i] == 1;
  if (!unit) {
    list_str(b, sizeof b, o->n_stride, o->stride);
    w += snprintf(s + w, cap - (size_t)w, ", stride=%s", b);
  }
  if (o->padding_algorithm) {
    w += snprintf(s + w, cap - (size_t)w, ", padding=%s", o->padding_algorithm);
  } else {
    bool zero = true;
    for (int i = 0; i < o->n_padding; i++) zero &= o->padding[i] == 0;
    if (!zero) {
      if (o->n_padding == 1)
        snprintf(b, sizeof b, "%lld", (long long)o->padding[0]);
      else
        list_str(b, sizeof b, o->n_padding, o->padding);
      w += snprintf(s + w, cap - (size_t)w, ", padding=%s", b);
    }
  }
  bool zero_op = true;
  for (int i = 0; i < o->n_output_padding; i++) zero_op &= o->output_padding[i] == 0;
  if (l->transpose && !zero_op) {
    list_str(b, sizeof b, o->n_output_padding, o->output_padding);
    w += snprintf(s + w, cap - (size_t)w, ", output_padding=%s", b);
  }
  unit = true;
  for (int i = 0; i < o->n_dilation; i++) unit &= o->dilation[i] == 1;
  if (!unit) {
    list_str(b, sizeof b, o->n_dilation, o->dilation);
    w += snprintf(s + w, cap - (size_t)w, ", dilation=%s", b);
  }
  if (o->groups > 1) w += snprintf(s + w, cap - (size_t)w, ", groups=%lld", (long long)o->groups);
  snprintf(s + w, cap - (size_t)w, ", data_format=%s", l->data_format);
  return s;
}

static const char *k_names[2][3] = {{"Conv1D", "Conv2D", "Conv3D"},
                                    {"Conv1DTranspose", "Conv2DTranspose", "Conv3DTranspose"}};
static const pd_layer_type k_types[2][3] = {{{"Conv1D", conv_forward, NULL, conv_repr},
                                             {"Conv2D", conv_forward, NULL, conv_repr},
                                             {"Conv3D", conv_forward, NULL, conv_repr}},
                                            {{"Conv1DTranspose", conv_forward, NULL, conv_repr},
                                             {"Conv2DTranspose", conv_forward, NULL, conv_repr},
                                             {"Conv3DTranspose", conv_forward, NULL, conv_repr}}};

static bool copy_list(const char *name, const char *what, int n, const int64_t *src, int max, int *dn,
                      int64_t *dst) {
  if (n < 0 || n > max || (n > 0 && !src)) {
    pd_set_error(PD_ERR_INVALID, "%s: %s must have at most %d values, got %d", name, what, max, n);
    return false;
  }
  *dn = n;
  if (n) memcpy(dst, src, sizeof(int64_t) * (size_t)n);
  return true;
}

static pd_layer *conv_new(int nsp, bool transpose, int64_t in_c, int64_t out_c, int nk, const int64_t *ks,
                          const pd_nn_conv_opts *opts) {
  static const pd_nn_conv_opts defaults;
  if (!opts) opts = &defaults;
  const char *name = k_names[transpose][nsp - 1];
  const pd_conv_opts *o = &opts->conv;
  int64_t groups = o->groups ? o->groups : 1;
  if (in_c <= 0 || out_c <= 0) {
    pd_set_error(PD_ERR_INVALID, "%s: in_channels (%lld) and out_channels (%lld) must be positive", name,
                 (long long)in_c, (long long)out_c);
    return NULL;
  }
  if (!ks || (nk != 1 && nk != nsp)) {
    pd_set_error(PD_ERR_INVALID, "%s: kernel_size must have 1 or %d values, got %d", name, nsp, ks ? nk : 0);
    return NULL;
  }
  if (groups < 1) {
    pd_set_error(PD_ERR_INVALID, "%s: groups (%lld) must be positive", name, (long long)groups);
    return NULL;
  }
  if (!transpose && in_c % groups != 0) {
    pd_set_error(PD_ERR_INVALID, "%s: in_channels (%lld) must be divisible by groups (%lld)", name,
                 (long long)in_c, (long long)groups);
    return NULL;
  }
  if (transpose && out_c % groups != 0) {
    pd_set_error(PD_ERR_INVALID, "%s: out_channels (%lld) must be divisible by groups (%lld)", name,
                 (long long)out_c, (long long)groups);
    return NULL;
  }
  if (opts->padding_mode && strcmp(opts->padding_mode, "zeros") != 0) {
    bool known = strcmp(opts->padding_mode, "reflect") == 0 || strcmp(opts->padding_mode, "replicate") == 0 ||
                 strcmp(opts->padding_mode, "circular") == 0;
    pd_set_error(
        known ? PD_ERR_UNIMPLEMENTED : PD_ERR_INVALID,
        known ? "%s: padding_mode '%s' is not supported yet (only 'zeros')"
              : "%s: padding_mode must be one of 'zeros', 'reflect', 'replicate', 'circular', got '%s'",
        name, opts->padding_mode);
    return NULL;
  }
  static const char *first[3] = {"NCL", "NCHW", "NCDHW"}, *last[3] = {"NLC", "NHWC", "NDHWC"};
  const char *fmt = o->data_format ? o->data_format : first[nsp - 1];
  if (strcmp(fmt, first[nsp - 1]) != 0 && strcmp(fmt, last[nsp - 1]) != 0) {
    pd_set_error(PD_ERR_INVALID, "%s: data_format must be \"%s\" or \"%s\", got \"%s\"", name, first[nsp - 1],
                 last[nsp - 1], fmt);
    return NULL;
  }
  if (o->padding_algorithm && strlen(o->padding_algorithm) >= 16) {
    pd_set_error(PD_ERR_INVALID, "%s: unknown padding algorithm \"%s\"", name, o->padding_algorithm);
    return NULL;
  }
  int64_t k[3];
  for (int d = 0; d < nsp; d++) {
    k[d] = ks[nk == 1 ? 0 : d];
    if (k[d] < 1) {
      pd_set_error(PD_ERR_INVALID, "%s: kernel_size %lld must be positive", name, (long long)k[d]);
      return NULL;
    }
  }
  conv_layer *l = pd_layer_new(sizeof *l, &k_types[transpose][nsp - 1]);
  if (!l) return NULL;
  l->nsp = nsp;
  l->transpose = transpose;
  l->in_channels = in_c;
  l->out_channels = out_c;
  memcpy(l->k, k, sizeof k);
  pd_conv_opts *c = &l->conv;
  if (!copy_list(name, "stride", o->n_stride, o->stride, 3, &c->n_stride, c->stride) ||
      !copy_list(name, "padding", o->n_padding, o->padding, 6, &c->n_padding, c->padding) ||
      !copy_list(name, "dilation", o->n_dilation, o->dilation, 3, &c->n_dilation, c->dilation) ||
      !copy_list(name, "output_padding", o->n_output_padding, o->output_padding, 3, &c->n_output_padding,
                 c->output_padding)) {
    pd_layer_release(&l->base);
    return NULL;
  }
  c->groups = groups;
  snprintf(l->data_format, sizeof l->data_format, "%s", fmt);
  c->data_format = l->data_format;
  if (o->padding_algorithm) {
    snprintf(l->padding_algorithm, sizeof l->padding_algorithm, "%s", o->padding_algorithm);
    c->padding_algorithm = l->padding_algorithm;
  }
  pd_dtype dt = pd_nn_layer_dtype(opts->dtype);
  int64_t wshape[5];
  double fan = (double)in_c; /* in double: only its square root is used, and it must not overflow */
  wshape[0] = transpose ? in_c : out_c;
  wshape[1] = transpose ? out_c / groups : in_c / groups;
  for (int d = 0; d < nsp; d++) wshape[2 + d] = k[d], fan *= (double)k[d];
  /* Paddle: Normal(0, (2 / (in_channels * prod(k)))^0.5) for convolutions,
   * the XavierUniform fallback for transposed ones */
  pd_initializer normal = pd_nn_initializer_normal(0.0, sqrt(2.0 / fan));
  l->weight = pd_layer_create_parameter(&l->base, "weight", nsp + 2, wshape, dt, opts->weight_attr,
                                        transpose ? NULL : &normal, false);
  if (l->weight && !opts->no_bias)
    l->bias =
        pd_layer_create_parameter(&l->base, "bias", 1, (int64_t[]){out_c}, dt, opts->bias_attr, NULL, true);
  if (!l->weight || (!opts->no_bias && !l->bias)) {
    pd_layer_release(&l->base);
    return NULL;
  }
  return &l->base;
}

pd_layer *pd_nn_conv1d(int64_t in_channels, int64_t out_channels, int nk, const int64_t *kernel_size,
                       const pd_nn_conv_opts *opts) {
  return conv_new(1, false, in_channels, out_channels, nk, kernel_size, opts);
}
pd_layer *pd_nn_conv2d(int64_t in_channels, int64_t out_channels, int nk, const int64_t *kernel_size,
                       const pd_nn_conv_opts *opts) {
  return conv_new(2, false, in_channels, out_channels, nk, kernel_size, opts);
}
pd_layer *pd_nn_conv3d(int64_t in_channels, int64_t out_channels, int nk, const int64_t *kernel_size,
                       const pd_nn_conv_opts *opts) {
  return conv_new(3, false, in_channels, out_channels, nk, kernel_size, opts);
}
pd_layer *pd_nn_conv1d_transpose(int64_t in_channels, int64_t out_channels, int nk,
                                 const int64_t *kernel_size, const pd_nn_conv_opts *opts) {
  return conv_new(1, true, in_channels, out_channels, nk, kernel_size, opts);
}
pd_layer *pd_nn_conv2d_transpose(int64_t in_channels, int64_t out_channels, int nk,
                                 const int64_t *kernel_size, const pd_nn_conv_opts *opts) {
  return conv_new(2, true, in_channels, out_channels, nk, kernel_size, opts);
}
pd_layer *pd_nn_conv3d_transpose(int64_t in_channels, int64_t out_channels, int nk,
                                 const int64_t *kernel_size, const pd_nn_conv_opts *opts) {
  return conv_new(3, true, in_channels, out_channels, nk, kernel_size, opts);
}

pd_tensor *pd_nn_conv_transpose_forward(pd_layer *layer, pd_tensor *x, int n, const int64_t *output_size) {
  bool ok = false;
  for (int d = 0; layer && d < 3; d++) ok |= layer->type == &k_types[1][d];
  if (!ok) {
    pd_set_error(PD_ERR_INVALID,
                 "Conv transpose forward: the layer is not a Conv1DTranspose, Conv2DTranspose or "
                 "Conv3DTranspose (got %s)",
                 layer ? layer->type->name : "NULL");
    return NULL;
  }
  conv_layer *l = (conv_layer *)layer;
  if (n < 0 || n > 3 || (n > 0 && !output_size)) {
    pd_set_error(PD_ERR_INVALID, "%s: output_size must have 1 or %d values, got %d", layer->type->name,
                 l->nsp, n);
    return NULL;
  }
  l->n_output_size = n;
  if (n) memcpy(l->output_size, output_size, sizeof(int64_t) * (size_t)n);
  pd_tensor *y = pd_layer_call1(layer, x);
  l->n_output_size = 0;
  return y;
}
