/* Activation layers: one table-driven type over the functional ops of
 * paddlec/math.h. Parameters Paddle would only refuse at forward time are
 * refused by the constructors already. PReLU is in prelu.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/tensor_impl.h"
#include "activation_internal.h"
#include "paddlec/layers.h"
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
  ACT_CELU,
  ACT_HARDTANH,
  ACT_HARDSHRINK,
  ACT_SOFTSHRINK,
  ACT_TANHSHRINK,
  ACT_MISH,
  ACT_MAXOUT,
  ACT_THRESHOLDED_RELU,
  ACT_RRELU,
  ACT_GLU,
  ACT_SOFTMAX2D,
  ACT_COUNT
} act_kind;

typedef struct act {
  pd_layer base;
  act_kind kind;
  double a, b; /* slope / alpha / scale / min / threshold / lower, beta / threshold / max / value / upper */
  int axis;
  int groups; /* Maxout */
  bool flag;  /* gelu approximate */
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
    TYPE(ACT_CELU, "CELU"),
    TYPE(ACT_HARDTANH, "Hardtanh"),
    TYPE(ACT_HARDSHRINK, "Hardshrink"),
    TYPE(ACT_SOFTSHRINK, "Softshrink"),
    TYPE(ACT_TANHSHRINK, "Tanhshrink"),
    TYPE(ACT_MISH, "Mish"),
    TYPE(ACT_MAXOUT, "Maxout"),
    TYPE(ACT_THRESHOLDED_RELU, "ThresholdedReLU"),
    TYPE(ACT_RRELU, "RReLU"),
    TYPE(ACT_GLU, "GLU"),
    TYPE(ACT_SOFTMAX2D, "Softmax2D"),
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
    case ACT_CELU:
      y = pd_celu(x, l->a);
      break;
    case ACT_HARDTANH:
      y = pd_hardtanh(x, l->a, l->b);
      break;
    case ACT_HARDSHRINK:
      y = pd_hardshrink(x, l->a);
      break;
    case ACT_SOFTSHRINK:
      y = pd_softshrink(x, l->a);
      break;
    case ACT_TANHSHRINK:
      y = pd_tanhshrink(x);
      break;
    case ACT_MISH:
      y = pd_mish(x);
      break;
    case ACT_MAXOUT:
      y = pd_maxout(x, l->groups, l->axis);
      break;
    case ACT_THRESHOLDED_RELU:
      y = pd_thresholded_relu(x, l->a, l->b);
      break;
    case ACT_RRELU:
      y = pd_rrelu(x, l->a, l->b, self->training);
      break;
    case ACT_GLU:
      y = pd_glu(x, l->axis);
      break;
    case ACT_SOFTMAX2D:
      if (x && x->ndim != 3 && x->ndim != 4)
        return pd_set_error(PD_ERR_SHAPE, "Softmax2D: requires a 3-D or 4-D input, got %d-D (shape %s)",
                            x->ndim, PD_SHAPE_STR(x));
      y = pd_softmax(x, -3);
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
  char *s = malloc(160), a[40], b[40];
  if (!s) return NULL;
  s[0] = 0;
  pd_nn_pyfloat(l->a, a, sizeof a);
  pd_nn_pyfloat(l->b, b, sizeof b);
  switch (l->kind) {
    case ACT_LEAKY_RELU:
      snprintf(s, 160, "negative_slope=%s", a);
      break;
    case ACT_ELU:
      snprintf(s, 160, "alpha=%s", a);
      break;
    case ACT_SELU:
      snprintf(s, 160, "scale=%.16f, alpha=%.16f", l->a, l->b);
      break;
    case ACT_GELU:
      snprintf(s, 160, "approximate=%s", l->flag ? "True" : "False");
      break;
    case ACT_SOFTPLUS:
      snprintf(s, 160, "beta=%s, threshold=%s", a, b);
      break;
    case ACT_SOFTMAX:
    case ACT_LOG_SOFTMAX:
      snprintf(s, 160, "axis=%d", l->axis);
      break;
    case ACT_CELU:
      snprintf(s, 160, "alpha=%s", a);
      break;
    case ACT_HARDTANH:
      snprintf(s, 160, "min=%s, max=%s", a, b);
      break;
    case ACT_HARDSHRINK:
    case ACT_SOFTSHRINK:
      snprintf(s, 160, "threshold=%s", a);
      break;
    case ACT_MAXOUT:
      snprintf(s, 160, "groups=%d, axis=%d", l->groups, l->axis);
      break;
    case ACT_THRESHOLDED_RELU:
      snprintf(s, 160, "threshold=%s, value=%s", a, b);
      break;
    case ACT_RRELU:
      snprintf(s, 160, "lower=%s, upper=%s, training=%s, dtype=float32", a, b,
               self->training ? "True" : "False");
      break;
    case ACT_GLU:
      snprintf(s, 160, "axis=%d", l->axis);
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
pd_layer *pd_nn_celu(double alpha) {
  if (alpha == 0.0) {
    pd_set_error(PD_ERR_INVALID, "CELU: alpha cannot be 0 (got %g)", alpha);
    return NULL;
  }
  return make(ACT_CELU, alpha, 0, 0, false);
}
pd_layer *pd_nn_hardtanh(double min, double max) { return make(ACT_HARDTANH, min, max, 0, false); }
pd_layer *pd_nn_hardshrink(double threshold) { return make(ACT_HARDSHRINK, threshold, 0, 0, false); }
pd_layer *pd_nn_softshrink(double threshold) {
  if (!(threshold >= 0.0)) {
    pd_set_error(PD_ERR_INVALID, "Softshrink: threshold (%g) must be no less than zero", threshold);
    return NULL;
  }
  return make(ACT_SOFTSHRINK, threshold, 0, 0, false);
}
pd_layer *pd_nn_tanhshrink(void) { return make(ACT_TANHSHRINK, 0, 0, 0, false); }
pd_layer *pd_nn_mish(void) { return make(ACT_MISH, 0, 0, 0, false); }
pd_layer *pd_nn_maxout(int groups, int axis) {
  if (groups <= 1) {
    pd_set_error(PD_ERR_INVALID, "Maxout: groups (%d) must be greater than 1", groups);
    return NULL;
  }
  if (axis != 1 && axis != 3 && axis != -1) {
    pd_set_error(PD_ERR_INVALID, "Maxout: axis %d is not supported; it must be 1 (NCHW), 3 or -1 (NHWC)",
                 axis);
    return NULL;
  }
  pd_layer *l = make(ACT_MAXOUT, 0, 0, axis, false);
  if (l) ((act *)l)->groups = groups;
  return l;
}
pd_layer *pd_nn_thresholded_relu(double threshold, double value) {
  return make(ACT_THRESHOLDED_RELU, threshold, value, 0, false);
}
pd_layer *pd_nn_rrelu(double lower, double upper) {
  if (!(lower >= 0.0 && lower <= 1.0)) {
    pd_set_error(PD_ERR_INVALID, "RReLU: lower (%g) must be in [0, 1]", lower);
    return NULL;
  }
  if (!(upper >= lower && upper <= 1.0)) {
    pd_set_error(PD_ERR_INVALID, "RReLU: upper (%g) must be in [lower, 1] = [%g, 1]", upper, lower);
    return NULL;
  }
  return make(ACT_RRELU, lower, upper, 0, false);
}
pd_layer *pd_nn_glu(int axis) { return make(ACT_GLU, 0, 0, axis, false); }
pd_layer *pd_nn_softmax2d(void) { return make(ACT_SOFTMAX2D, 0, 0, 0, false); }
