/* Activation layers: one table-driven type over the functional ops of
 * paddlec/math.h, plus PReLU (a learnable slope) and F.prelu. */
#include <math.h>
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

typedef enum act_kind {
  ACT_RELU,
  ACT_RELU6,
  ACT_LEAKY_RELU,
  ACT_ELU,
  ACT_SELU,
  ACT_GELU,
  ACT_SILU,
  ACT_SWISH,
  ACT_SIGMOID,
  ACT_SOFTPLUS,
  ACT_SOFTSIGN,
  ACT_HARDSWISH,
  ACT_HARDSIGMOID,
  ACT_LOG_SIGMOID,
  ACT_SOFTMAX,
  ACT_LOG_SOFTMAX,
  ACT_TANH,
  ACT_COUNT
} act_kind;

typedef struct act {
  pd_layer base;
  act_kind kind;
  double a, b; /* slope / alpha / scale, beta / threshold */
  int axis;
  bool flag; /* gelu approximate */
} act;

/* Paddle's Hardsigmoid layer slope. */
#define HARDSIGMOID_SLOPE 0.1666667

static int act_forward(pd_layer *self, pd_tensor *const *in, int n_in, pd_tensor **out, int max_out);
static char *act_repr(const pd_layer *self);

#define TYPE(kind, name) [kind] = {name, act_forward, NULL, act_repr}
static const pd_layer_type act_types[ACT_COUNT] = {
    TYPE(ACT_RELU, "ReLU"),
    TYPE(ACT_RELU6, "ReLU6"),
    TYPE(ACT_LEAKY_RELU, "LeakyReLU"),
    TYPE(ACT_ELU, "ELU"),
    TYPE(ACT_SELU, "SELU"),
    TYPE(ACT_GELU, "GELU"),
    TYPE(ACT_SILU, "Silu"),
    TYPE(ACT_SWISH, "Swish"),
    TYPE(ACT_SIGMOID, "Sigmoid"),
    TYPE(ACT_SOFTPLUS, "Softplus"),
    TYPE(ACT_SOFTSIGN, "Softsign"),
    TYPE(ACT_HARDSWISH, "Hardswish"),
    TYPE(ACT_HARDSIGMOID, "Hardsigmoid"),
    TYPE(ACT_LOG_SIGMOID, "LogSigmoid"),
    TYPE(ACT_SOFTMAX, "Softmax"),
    TYPE(ACT_LOG_SOFTMAX, "LogSoftmax"),
    TYPE(ACT_TANH, "Tanh"),
};
#undef TYPE

static int act_forward(pd_layer *self, pd_tensor *const *in, int n_in, pd_tensor **out, int max_out) {
  (void)max_out;
  act *l = (act *)self;
  if (n_in != 1) return pd_set_error(PD_ERR_INVALID, "%s: expects 1 input, got %d", self->type->name, n_in);
  pd_tensor *x = in[0], *y = NULL;
  switch (l->kind) {
    case ACT_RELU:
      y = pd_relu(x);
      break;
    case ACT_RELU6:
      y = pd_relu6(x);
      break;
    case ACT_LEAKY_RELU:
      y = pd_leaky_relu(x, l->a);
      break;
    case ACT_ELU:
      y = pd_elu(x, l->a);
      break;
    case ACT_SELU:
      y = pd_selu(x, l->a, l->b);
      break;
    case ACT_GELU:
      y = pd_gelu(x, l->flag);
      break;
    case ACT_SILU:
      y = pd_silu(x);
      break;
    case ACT_SWISH:
      y = pd_swish(x);
      break;
    case ACT_SIGMOID:
      y = pd_sigmoid(x);
      break;
    case ACT_SOFTPLUS:
      y = pd_softplus(x, l->a, l->b);
      break;
    case ACT_SOFTSIGN:
      y = pd_softsign(x);
      break;
    case ACT_HARDSWISH:
      y = pd_hardswish(x);
      break;
    case ACT_HARDSIGMOID:
      y = pd_hardsigmoid(x, HARDSIGMOID_SLOPE, 0.5);
      break;
    case ACT_LOG_SIGMOID:
      y = pd_log_sigmoid(x);
      break;
    case ACT_SOFTMAX:
      y = pd_softmax(x, l->axis);
      break;
    case ACT_LOG_SOFTMAX:
      y = pd_log_softmax(x, l->axis);
      break;
    case ACT_TANH:
      y = pd_tanh(x);
      break;
    case ACT_COUNT:
      break;
  }
  out[0] = y;
  return y ? 1 : pd_last_status();
}

void pd_nn_pyfloat(double v, char *buf, size_t cap) {
  if (isnan(v)) {
    snprintf(buf, cap, "nan");
    return;
  }
  if (isinf(v)) {
    snprintf(buf, cap, v > 0 ? "inf" : "-inf");
    return;
  }
  for (int prec = 1; prec <= 17; prec++) {
    snprintf(buf, cap, "%.*g", prec, v);
    if (strtod(buf, NULL) == v) break;
  }
  if (!strpbrk(buf, ".en")) strncat(buf, ".0", cap - strlen(buf) - 1);
}

static char *act_repr(const pd_layer *self) {
  const act *l = (const act *)self;
  char *s = malloc(128), a[40], b[40];
  if (!s) return NULL;
  s[0] = 0;
  pd_nn_pyfloat(l->a, a, sizeof a);
  pd_nn_pyfloat(l->b, b, sizeof b);
  switch (l->kind) {
    case ACT_LEAKY_RELU:
      snprintf(s, 128, "negative_slope=%s", a);
      break;
    case ACT_ELU:
      snprintf(s, 128, "alpha=%s", a);
      break;
    case ACT_SELU:
      snprintf(s, 128, "scale=%.16f, alpha=%.16f", l->a, l->b);
      break;
    case ACT_GELU:
      snprintf(s, 128, "approximate=%s", l->flag ? "True" : "False");
      break;
    case ACT_SOFTPLUS:
      snprintf(s, 128, "beta=%s, threshold=%s", a, b);
      break;
    case ACT_SOFTMAX:
    case ACT_LOG_SOFTMAX:
      snprintf(s, 128, "axis=%d", l->axis);
      break;
    default:
      break;
  }
  return s;
}

static pd_layer *make(act_kind kind, double a, double b, int axis, bool flag) {
  act *l = pd_layer_new(sizeof *l, &act_types[kind]);
  if (!l) return NULL;
  l->kind = kind;
  l->a = a;
  l->b = b;
  l->axis = axis;
  l->flag = flag;
  return &l->base;
}

pd_layer *pd_nn_relu(void) { return make(ACT_RELU, 0, 0, 0, false); }
pd_layer *pd_nn_relu6(void) { return make(ACT_RELU6, 0, 0, 0, false); }
pd_layer *pd_nn_leaky_relu(double negative_slope) {
  return make(ACT_LEAKY_RELU, negative_slope, 0, 0, false);
}
pd_layer *pd_nn_elu(double alpha) { return make(ACT_ELU, alpha, 0, 0, false); }
pd_layer *pd_nn_selu(double scale, double alpha) { return make(ACT_SELU, scale, alpha, 0, false); }
pd_layer *pd_nn_gelu(bool approximate) { return make(ACT_GELU, 0, 0, 0, approximate); }
pd_layer *pd_nn_silu(void) { return make(ACT_SILU, 0, 0, 0, false); }
pd_layer *pd_nn_swish(void) { return make(ACT_SWISH, 0, 0, 0, false); }
pd_layer *pd_nn_sigmoid(void) { return make(ACT_SIGMOID, 0, 0, 0, false); }
pd_layer *pd_nn_softplus(double beta, double threshold) {
  return make(ACT_SOFTPLUS, beta, threshold, 0, false);
}
pd_layer *pd_nn_softsign(void) { return make(ACT_SOFTSIGN, 0, 0, 0, false); }
pd_layer *pd_nn_hardswish(void) { return make(ACT_HARDSWISH, 0, 0, 0, false); }
pd_layer *pd_nn_hardsigmoid(void) { return make(ACT_HARDSIGMOID, 0, 0, 0, false); }
pd_layer *pd_nn_log_sigmoid(void) { return make(ACT_LOG_SIGMOID, 0, 0, 0, false); }
pd_layer *pd_nn_softmax(int axis) { return make(ACT_SOFTMAX, 0, 0, axis, false); }
pd_layer *pd_nn_log_softmax(int axis) { return make(ACT_LOG_SOFTMAX, 0, 0, axis, false); }
pd_layer *pd_nn_tanh(void) { return make(ACT_TANH, 0, 0, 0, false); }

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
                                        opts->dtype == PD_BOOL ? PD_FLOAT32 : opts->dtype, opts->weight_attr,
                                        &c, false);
  if (!l->weight) {
    pd_layer_release(&l->base);
    return NULL;
  }
  return &l->base;
}
