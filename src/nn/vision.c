/* paddle.nn.Pad1D/2D/3D, PixelShuffle (and F.pixel_shuffle), Upsample,
 * UpsamplingNearest2D, UpsamplingBilinear2D. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/core_internal.h"
#include "../core/shape_check.h"
#include "../core/tensor_impl.h"
#include "paddlec/layers.h"
#include "paddlec/manipulation.h"

/* ---- Pad1D / Pad2D / Pad3D ------------------------------------------------------- */
typedef struct pad_layer {
  pd_layer base;
  int npad;
  int64_t pad[6];
  char mode[16];
  double value;
  char data_format[8];
} pad_layer;

static int pad_forward(pd_layer *self, pd_tensor *const *in, int n_in, pd_tensor **out, int max_out) {
  (void)max_out;
  pad_layer *l = (pad_layer *)self;
  if (n_in != 1) return pd_set_error(PD_ERR_INVALID, "%s: expects 1 input, got %d", self->type->name, n_in);
  out[0] = pd_pad(in[0], l->npad, l->pad, l->mode, l->value, l->data_format);
  return out[0] ? 1 : pd_last_status();
}

static char *pad_repr(const pd_layer *self) {
  const pad_layer *l = (const pad_layer *)self;
  char *s = malloc(256), list[160] = "[";
  if (!s) return NULL;
  for (int i = 0; i < l->npad; i++) {
    char b[32];
    snprintf(b, sizeof b, "%s%lld", i ? ", " : "", (long long)l->pad[i]);
    strncat(list, b, sizeof list - strlen(list) - 1);
  }
  strncat(list, "]", sizeof list - strlen(list) - 1);
  snprintf(s, 256, "padding=%s, mode=%s, value=%g%s, data_format=%s", list, l->mode, l->value,
           l->value == (double)(long long)l->value ? ".0" : "", l->data_format);
  return s;
}

static const pd_layer_type pad_types[3] = {{"Pad1D", pad_forward, NULL, pad_repr},
                                           {"Pad2D", pad_forward, NULL, pad_repr},
                                           {"Pad3D", pad_forward, NULL, pad_repr}};

static pd_layer *pad_new(int nsp, int npad, const int64_t *padding, const pd_nn_pad1d_opts *opts) {
  static const pd_nn_pad1d_opts defaults;
  static const char *const formats[3][2] = {{"NCL", "NLC"}, {"NCHW", "NHWC"}, {"NCDHW", "NDHWC"}};
  static const char *const modes[] = {"constant", "reflect", "replicate", "circular"};
  const char *name = pad_types[nsp - 1].name;
  if (!opts) opts = &defaults;
  if ((npad != 1 && npad != 2 * nsp) || !padding) {
    pd_set_error(PD_ERR_INVALID, "%s: padding must have 1 or %d values, got %d", name, 2 * nsp,
                 padding ? npad : 0);
    return NULL;
  }
  const char *mode = opts->mode ? opts->mode : "constant";
  bool mode_ok = false;
  for (int i = 0; i < 4; i++) mode_ok |= strcmp(mode, modes[i]) == 0;
  if (!mode_ok) {
    pd_set_error(PD_ERR_INVALID, "%s: mode '%s' is not one of constant, reflect, replicate, circular", name,
                 mode);
    return NULL;
  }
  const char *df = opts->data_format ? opts->data_format : formats[nsp - 1][0];
  if (strcmp(df, formats[nsp - 1][0]) != 0 && strcmp(df, formats[nsp - 1][1]) != 0) {
    pd_set_error(PD_ERR_INVALID, "%s: data_format '%s' is not '%s' or '%s'", name, df, formats[nsp - 1][0],
                 formats[nsp - 1][1]);
    return NULL;
  }
  for (int i = 0; i < npad; i++)
    if (padding[i] < 0) {
      pd_set_error(PD_ERR_INVALID, "%s: padding[%d] is %lld; pads must be >= 0", name, i,
                   (long long)padding[i]);
      return NULL;
    }
  pad_layer *l = pd_layer_new(sizeof *l, &pad_types[nsp - 1]);
  if (!l) return NULL;
  l->npad = 2 * nsp;
  for (int i = 0; i < l->npad; i++) l->pad[i] = padding[npad == 1 ? 0 : i];
  snprintf(l->mode, sizeof l->mode, "%s", mode);
  l->value = opts->value;
  snprintf(l->data_format, sizeof l->data_format, "%s", df);
  return &l->base;
}

pd_layer *pd_nn_pad1d(int npad, const int64_t *padding, const pd_nn_pad1d_opts *opts) {
  return pad_new(1, npad, padding, opts);
}
pd_layer *pd_nn_pad2d(int npad, const int64_t *padding, const pd_nn_pad2d_opts *opts) {
  return pad_new(2, npad, padding, opts);
}
pd_layer *pd_nn_pad3d(int npad, const int64_t *padding, const pd_nn_pad3d_opts *opts) {
  return pad_new(3, npad, padding, opts);
}

/* ---- F.pixel_shuffle / PixelShuffle ------------------------------------------------------ */
static int shuffle_format(const char *df) {
  if (!df || strcmp(df, "NCHW") == 0) return 1;
  return strcmp(df, "NHWC") == 0 ? 2 : 0;
}

pd_tensor *pd_pixel_shuffle(pd_tensor *x, int64_t upscale_factor, const char *data_format) {
  if (!x) {
    if (pd_last_status() == PD_OK) pd_set_error(PD_ERR_INVALID, "pixel_shuffle: x is NULL");
    return NULL;
  }
  int fmt = shuffle_format(data_format);
  if (!fmt) {
    pd_set_error(PD_ERR_INVALID, "pixel_shuffle: data_format '%s' is not 'NCHW' or 'NHWC'", data_format);
    return NULL;
  }
  if (x->ndim != 4) {
    pd_set_error(PD_ERR_SHAPE, "pixel_shuffle: x must be 4-D, got shape %s", PD_SHAPE_STR(x));
    return NULL;
  }
  int64_t r = upscale_factor;
  if (r <= 0) {
    pd_set_error(PD_ERR_INVALID, "pixel_shuffle: upscale_factor %lld must be positive", (long long)r);
    return NULL;
  }
  int64_t n = x->shape[0], c = x->shape[fmt == 1 ? 1 : 3], h = x->shape[fmt == 1 ? 2 : 1],
          w = x->shape[fmt == 1 ? 3 : 2];
  int64_t rr, hr, wr;
  if (pd_mul_overflow(r, r, &rr) || pd_mul_overflow(h, r, &hr) || pd_mul_overflow(w, r, &wr)) {
    pd_set_error(PD_ERR_SHAPE, "pixel_shuffle: upscale_factor %lld is too large for input %s", (long long)r,
                 PD_SHAPE_STR(x));
    return NULL;
  }
  if (c % rr != 0) {
    pd_set_error(
        PD_ERR_SHAPE,
        "pixel_shuffle: the square of upscale_factor %lld (%lld) does not divide the %lld channels of x %s",
        (long long)r, (long long)rr, (long long)c, PD_SHAPE_STR(x));
    return NULL;
  }
  int64_t oc = c / rr;
  int64_t s6[6], o4[4];
  if (fmt == 1) { /* [n, oc, r, r, h, w] -> [n, oc, h, r, w, r] */
    memcpy(s6, (int64_t[]){n, oc, r, r, h, w}, sizeof s6);
    memcpy(o4, (int64_t[]){n, oc, hr, wr}, sizeof o4);
  } else { /* [n, h, w, oc, r, r] -> [n, h, r, w, r, oc] */
    memcpy(s6, (int64_t[]){n, h, w, oc, r, r}, sizeof s6);
    memcpy(o4, (int64_t[]){n, hr, wr, oc}, sizeof o4);
  }
  static const int64_t perm_first[6] = {0, 1, 4, 2, 5, 3}, perm_last[6] = {0, 1, 4, 2, 5, 3};
  pd_internal_enter();
  pd_tensor *a = pd_reshape(x, 6, s6);
  pd_tensor *b = pd_transpose(a, 6, fmt == 1 ? perm_first : perm_last);
  pd_tensor *y = pd_reshape(b, 4, o4);
  pd_tensor_release(a);
  pd_tensor_release(b);
  pd_internal_leave();
  return pd_scope_track(y);
}

typedef struct pixel_shuffle {
  pd_layer base;
  int64_t r;
  char data_format[8];
} pixel_shuffle;

static int pixel_shuffle_forward(pd_layer *self, pd_tensor *const *in, int n_in, pd_tensor **out,
                                 int max_out) {
  (void)max_out;
  pixel_shuffle *l = (pixel_shuffle *)self;
  if (n_in != 1) return pd_set_error(PD_ERR_INVALID, "PixelShuffle: expects 1 input, got %d", n_in);
  out[0] = pd_pixel_shuffle(in[0], l->r, l->data_format);
  return out[0] ? 1 : pd_last_status();
}

static char *pixel_shuffle_repr(const pd_layer *self) {
  const pixel_shuffle *l = (const pixel_shuffle *)self;
  char *s = malloc(96);
  if (!s) return NULL;
  if (strcmp(l->data_format, "NCHW") != 0)
    snprintf(s, 96, "upscale_factor=%lld, data_format=%s", (long long)l->r, l->data_format);
  else
    snprintf(s, 96, "upscale_factor=%lld", (long long)l->r);
  return s;
}

static const pd_layer_type pixel_shuffle_type = {"PixelShuffle", pixel_shuffle_forward, NULL,
                                                 pixel_shuffle_repr};

pd_layer *pd_nn_pixel_shuffle(int64_t upscale_factor, const pd_nn_pixel_shuffle_opts *opts) {
  const char *df = opts ? opts->data_format : NULL;
  if (!shuffle_format(df)) {
    pd_set_error(PD_ERR_INVALID, "PixelShuffle: data_format '%s' is not 'NCHW' or 'NHWC'", df);
    return NULL;
  }
  if (upscale_factor <= 0) {
    pd_set_error(PD_ERR_INVALID, "PixelShuffle: upscale_factor %lld must be positive",
                 (long long)upscale_factor);
    return NULL;
  }
  pixel_shuffle *l = pd_layer_new(sizeof *l, &pixel_shuffle_type);
  if (!l) return NULL;
  l->r = upscale_factor;
  snprintf(l->data_format, sizeof l->data_format, "%s", df ? df : "NCHW");
  return &l->base;
}

/* ---- Upsample ------------------------------------------------------------------------------- */
typedef struct upsample {
  pd_layer base;
  pd_interpolate_opts o;
  char mode[16], data_format[8];
} upsample;

static int upsample_forward(pd_layer *self, pd_tensor *const *in, int n_in, pd_tensor **out, int max_out) {
  (void)max_out;
  upsample *l = (upsample *)self;
  if (n_in != 1) return pd_set_error(PD_ERR_INVALID, "%s: expects 1 input, got %d", self->type->name, n_in);
  out[0] = pd_interpolate(in[0], &l->o);
  return out[0] ? 1 : pd_last_status();
}

static void list_str(char *buf, size_t cap, int n, const int64_t *iv, const double *dv) {
  if (n == 1 && dv) {
    snprintf(buf, cap, "%g", dv[0]);
    return;
  }
  snprintf(buf, cap, "[");
  for (int i = 0; i < n; i++) {
    char b[40];
    if (dv)
      snprintf(b, sizeof b, "%s%g", i ? ", " : "", dv[i]);
    else
      snprintf(b, sizeof b, "%s%lld", i ? ", " : "", (long long)iv[i]);
    strncat(buf, b, cap - strlen(buf) - 1);
  }
  strncat(buf, "]", cap - strlen(buf) - 1);
}

static char *upsample_repr(const pd_layer *self) {
  const upsample *l = (const upsample *)self;
  char *s = malloc(256), v[128];
  if (!s) return NULL;
  if (l->o.nscale)
    list_str(v, sizeof v, l->o.nscale, NULL, l->o.scale_factor);
  else
    list_str(v, sizeof v, l->o.nsize, l->o.size, NULL);
  snprintf(s, 256, "%s=%s, mode=%s, align_corners=%s, align_mode=%d, data_format=%s",
           l->o.nscale ? "scale_factor" : "size", v, l->mode, l->o.align_corners ? "True" : "False",
           l->o.align_mode, l->data_format[0] ? l->data_format : "None");
  return s;
}

static const pd_layer_type upsample_types[3] = {
    {"Upsample", upsample_forward, NULL, upsample_repr},
    {"UpsamplingNearest2D", upsample_forward, NULL, upsample_repr},
    {"UpsamplingBilinear2D", upsample_forward, NULL, upsample_repr}};

static pd_layer *upsample_new(int kind, const pd_nn_upsample_opts *opts) {
  static const pd_nn_upsample_opts defaults;
  const char *name = upsample_types[kind].name;
  if (!opts) opts = &defaults;
  pd_interpolate_opts o = *opts;
  if (kind == 1) o.mode = "nearest";
  if (kind == 2) o.mode = "bilinear";
  if (kind) {
    o.align_corners = kind == 2;
    o.align_mode = 0;
  }
  const char *mode = o.mode ? o.mode : "nearest";
  if (strcmp(mode, "nearest") != 0 && strcmp(mode, "bilinear") != 0) {
    pd_set_error(PD_ERR_UNIMPLEMENTED, "%s: mode '%s' is not supported (nearest, bilinear)", name, mode);
    return NULL;
  }
  if ((o.nsize > 0) == (o.nscale > 0) || o.nsize < 0 || o.nsize > 3 || o.nscale < 0 || o.nscale > 3) {
    pd_set_error(PD_ERR_INVALID,
                 "%s: exactly one of size (%d values) and scale_factor (%d values) must be given", name,
                 o.nsize, o.nscale);
    return NULL;
  }
  if (o.data_format && strlen(o.data_format) >= 8) {
    pd_set_error(PD_ERR_INVALID, "%s: data_format '%s' is not a data format", name, o.data_format);
    return NULL;
  }
  upsample *l = pd_layer_new(sizeof *l, &upsample_types[kind]);
  if (!l) return NULL;
  snprintf(l->mode, sizeof l->mode, "%s", mode);
  snprintf(l->data_format, sizeof l->data_format, "%s", o.data_format ? o.data_format : (kind ? "NCHW" : ""));
  l->o = o;
  l->o.mode = l->mode; /* the strings live in the layer */
  l->o.data_format = l->data_format[0] ? l->data_format : NULL;
  return &l->base;
}

pd_layer *pd_nn_upsample(const pd_nn_upsample_opts *opts) { return upsample_new(0, opts); }
pd_layer *pd_nn_upsampling_nearest2d(const pd_nn_upsample_opts *opts) { return upsample_new(1, opts); }
pd_layer *pd_nn_upsampling_bilinear2d(const pd_nn_upsample_opts *opts) { return upsample_new(2, opts); }
