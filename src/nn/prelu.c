/* F.prelu and the PReLU layer (a learnable slope per channel or one for all). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/core_internal.h"
#include "../core/tensor_impl.h"
#include "activation_internal.h"
#include "paddlec/creation.h"
#include "paddlec/layers.h"
#include "paddlec/manipulation.h"
#include "paddlec/math.h"
#include "layer_dtype.h"

/* ---- F.prelu ---------------------------------------------------------------------- */
static const char *const k_prelu_formats[] = {"NC", "NCL", "NCHW", "NCDHW", "NLC", "NHWC", "NDHWC"};

/* 1: channel first, 2: channel last, 0: unknown. */
static int prelu_format(const char *df) {
  if (!df) return 1;
  for (int i = 0; i < 7; i++)
    if (strcmp(df, k_prelu_formats[i]) == 0) return i < 4 ? 1 : 2;
  return 0;
}

pd_tensor *pd_prelu(pd_tensor *x, pd_tensor *weight, const char *data_format) {
  if (!x || !weight) {
    if (pd_last_status() == PD_OK) pd_set_error(PD_ERR_INVALID, "prelu: %s is NULL", x ? "weight" : "x");
    return NULL;
  }
  int fmt = prelu_format(data_format);
  if (!fmt) {
    pd_set_error(PD_ERR_INVALID,
                 "prelu: data_format '%s' is not one of NC, NCL, NCHW, NCDHW, NLC, NHWC, NDHWC", data_format);
    return NULL;
  }
  if (weight->ndim != 1) {
    pd_set_error(PD_ERR_SHAPE, "prelu: weight must be 1-D, got shape %s", PD_SHAPE_STR(weight));
    return NULL;
  }
  int64_t c = weight->shape[0];
  int64_t bshape[PD_MAX_DIMS];
  int bnd = 1;
  bshape[0] = 1;
  if (c != 1) { /* mode 'channel' */
    if (x->ndim < 2) {
      pd_set_error(PD_ERR_SHAPE, "prelu: x of shape %s needs rank >= 2 for a per-channel weight of shape %s",
                   PD_SHAPE_STR(x), PD_SHAPE_STR(weight));
      return NULL;
    }
    int ch = fmt == 1 ? 1 : x->ndim - 1;
    if (x->shape[ch] != c) {
      pd_set_error(PD_ERR_SHAPE,
                   "prelu: weight of shape %s does not match the %lld channels (dim %d) of x %s (%s)",
                   PD_SHAPE_STR(weight), (long long)x->shape[ch], ch, PD_SHAPE_STR(x),
                   data_format ? data_format : "NCHW");
      return NULL;
    }
    bnd = x->ndim;
    for (int d = 0; d < bnd; d++) bshape[d] = d == ch ? c : 1;
  }
  pd_internal_enter();
  pd_tensor *w = pd_reshape(weight, bnd, bshape);
  pd_tensor *zero = pd_full(0, NULL, 0.0, x->dtype);
  pd_tensor *pos = pd_greater_than(x, zero);
  pd_tensor *wx = pd_multiply(w, x);
  pd_tensor *r = pd_where(pos, x, wx);
  pd_tensor_release(w);
  pd_tensor_release(zero);
  pd_tensor_release(pos);
  pd_tensor_release(wx);
  pd_internal_leave();
  return pd_scope_track(r);
}

/* ---- PReLU ------------------------------------------------------------------------------ */
typedef struct prelu {
  pd_layer base;
  int64_t num;
  double init;
  char data_format[8];
  pd_tensor *weight;
} prelu;

static int prelu_forward(pd_layer *self, pd_tensor *const *in, int n_in, pd_tensor **out, int max_out) {
  (void)max_out;
  prelu *l = (prelu *)self;
  if (n_in != 1) return pd_set_error(PD_ERR_INVALID, "PReLU: expects 1 input, got %d", n_in);
  out[0] = pd_prelu(in[0], l->weight, l->data_format);
  return out[0] ? 1 : pd_last_status();
}

static char *prelu_repr(const pd_layer *self) {
  const prelu *l = (const prelu *)self;
  char *s = malloc(128), v[40];
  if (!s) return NULL;
  pd_nn_pyfloat(l->init, v, sizeof v);
  snprintf(s, 128, "num_parameters=%lld, data_format=%s, init=%s, dtype=%s", (long long)l->num,
           l->data_format, v, pd_dtype_name(l->weight->dtype));
  return s;
}

static const pd_layer_type prelu_type = {"PReLU", prelu_forward, NULL, prelu_repr};

pd_layer *pd_nn_prelu(int64_t num_parameters, double init, const pd_nn_prelu_opts *opts) {
  static const pd_nn_prelu_opts defaults;
  if (!opts) opts = &defaults;
  if (num_parameters <= 0) {
    pd_set_error(PD_ERR_INVALID, "PReLU: num_parameters (%lld) must be positive", (long long)num_parameters);
    return NULL;
  }
  if (!prelu_format(opts->data_format)) {
    pd_set_error(PD_ERR_INVALID,
                 "PReLU: data_format '%s' is not one of NC, NCL, NCHW, NCDHW, NLC, NHWC, NDHWC",
                 opts->data_format);
    return NULL;
  }
  prelu *l = pd_layer_new(sizeof *l, &prelu_type);
  if (!l) return NULL;
  l->num = num_parameters;
  l->init = init;
  snprintf(l->data_format, sizeof l->data_format, "%s", opts->data_format ? opts->data_format : "NCHW");
  pd_initializer c = pd_nn_initializer_constant(init);
  l->weight = pd_layer_create_parameter(&l->base, "weight", 1, (const int64_t[]){num_parameters},
                                        pd_nn_layer_dtype(opts->dtype), opts->weight_attr, &c, false);
  if (!l->weight) {
    pd_layer_release(&l->base);
    return NULL;
  }
  return &l->base;
}
