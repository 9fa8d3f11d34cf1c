/* paddle.nn.initializer: fills parameters in place, without recording. */
#include <math.h>
#include <string.h>

#include "../ops/op_registry.h"
#include "paddlec/creation.h"
#include "paddlec/math.h"
#include "paddlec/nn.h"

pd_initializer pd_nn_initializer_constant(double value) {
  return (pd_initializer){.kind = PD_INIT_CONSTANT, .a = value};
}
pd_initializer pd_nn_initializer_normal(double mean, double std) {
  return (pd_initializer){.kind = PD_INIT_NORMAL, .a = mean, .b = std};
}
pd_initializer pd_nn_initializer_truncated_normal(double mean, double std) {
  return (pd_initializer){.kind = PD_INIT_TRUNCATED_NORMAL, .a = mean, .b = std};
}
pd_initializer pd_nn_initializer_uniform(double low, double high) {
  return (pd_initializer){.kind = PD_INIT_UNIFORM, .a = low, .b = high};
}
pd_initializer pd_nn_initializer_xavier_normal(double fan_in, double fan_out, double gain) {
  return (pd_initializer){.kind = PD_INIT_XAVIER_NORMAL, .a = fan_in, .b = fan_out, .gain = gain};
}
pd_initializer pd_nn_initializer_xavier_uniform(double fan_in, double fan_out, double gain) {
  return (pd_initializer){.kind = PD_INIT_XAVIER_UNIFORM, .a = fan_in, .b = fan_out, .gain = gain};
}
pd_initializer pd_nn_initializer_kaiming_normal(double fan_in, double negative_slope,
                                                const char *nonlinearity) {
  return (pd_initializer){
      .kind = PD_INIT_KAIMING_NORMAL, .a = fan_in, .gain = negative_slope, .nonlinearity = nonlinearity};
}
pd_initializer pd_nn_initializer_kaiming_uniform(double fan_in, double negative_slope,
                                                 const char *nonlinearity) {
  return (pd_initializer){
      .kind = PD_INIT_KAIMING_UNIFORM, .a = fan_in, .gain = negative_slope, .nonlinearity = nonlinearity};
}
pd_initializer pd_nn_initializer_assign(const pd_tensor *value) {
  return (pd_initializer){.kind = PD_INIT_ASSIGN, .value = value};
}

/* Paddle's _compute_fans. */
static void fans(const pd_tensor *t, double *fan_in, double *fan_out) {
  if (t->ndim == 0) {
    *fan_in = *fan_out = 1;
  } else if (t->ndim == 1) {
    *fan_in = *fan_out = (double)t->shape[0];
  } else if (t->ndim == 2) {
    *fan_in = (double)t->shape[0];
    *fan_out = (double)t->shape[1];
  } else {
    double receptive = 1;
    for (int d = 2; d < t->ndim; d++) receptive *= (double)t->shape[d];
    *fan_in = (double)t->shape[1] * receptive;
    *fan_out = (double)t->shape[0] * receptive;
  }
}

/* Paddle's calculate_gain. */
static double kaiming_gain(const char *nl, double slope) {
  if (!nl || strcmp(nl, "relu") == 0) return sqrt(2.0);
  if (strcmp(nl, "leaky_relu") == 0) return sqrt(2.0 / (1 + slope * slope));
  if (strcmp(nl, "tanh") == 0) return 5.0 / 3;
  if (strcmp(nl, "selu") == 0) return 3.0 / 4;
  return 1.0; /* linear, conv*, sigmoid */
}

/* Copies src's values into t (shapes already equal). */
static pd_status fill_from(pd_tensor *t, pd_tensor *src) {
  if (!src) return pd_last_status();
  int64_t n = pd_tensor_copy_to(src, pd_tensor_data(t), t->numel, t->dtype);
  pd_tensor_release(src);
  if (n < 0) return (pd_status)n;
  t->storage->version++;
  return PD_OK;
}

static pd_tensor *uniform_like(const pd_tensor *t, double lo, double hi) {
  pd_dtype dt = t->dtype == PD_FLOAT64 ? PD_FLOAT64 : PD_FLOAT32;
  return pd_uniform(t->ndim, t->shape, dt, lo, hi, 0);
}

static pd_tensor *normal_like(const pd_tensor *t, double mean, double std) {
  pd_dtype dt = t->dtype == PD_FLOAT64 ? PD_FLOAT64 : PD_FLOAT32;
  pd_tensor *z = pd_randn(t->ndim, t->shape, dt);
  pd_tensor *r = pd_scale(z, std, mean, true);
  pd_tensor_release(z);
  return r;
}

/* Normal draws outside mean +- 2 std are drawn again. */
static pd_tensor *truncated_like(const pd_tensor *t, double mean, double std) {
  pd_tensor *r = pd_randn(t->ndim, t->shape, PD_FLOAT64);
  if (!r) return NULL;
  double *p = pd_tensor_data(r);
  for (int64_t i = 0; i < r->numel; i++) {
    while (fabs(p[i]) > 2.0) {
      pd_tensor *extra = pd_randn(0, NULL, PD_FLOAT64);
      if (!extra) {
        pd_tensor_release(r);
        return NULL;
      }
      p[i] = *(double *)pd_tensor_data(extra);
      pd_tensor_release(extra);
    }
    p[i] = mean + std * p[i];
  }
  return r;
}

pd_status pd_initializer_apply(const pd_initializer *init, pd_tensor *t) {
  if (!init || !t)
    return pd_set_error(PD_ERR_INVALID, "initializer: %s is NULL", init ? "tensor" : "initializer");
  if (!pd_dtype_is_floating(t->dtype) && init->kind != PD_INIT_CONSTANT && init->kind != PD_INIT_ASSIGN)
    return pd_set_error(PD_ERR_DTYPE, "initializer: random initializers need a floating tensor, got %s",
                        pd_dtype_name(t->dtype));
  if (!t->is_contiguous) return pd_set_error(PD_ERR_INVALID, "initializer: the tensor must be contiguous");
  double fi, fo;
  fans(t, &fi, &fo);
  pd_internal_enter();
  bool prev = pd_grad_mode_set(false);
  pd_status st;
  switch (init->kind) {
    case PD_INIT_DEFAULT:
    case PD_INIT_CONSTANT:
      st = fill_from(t, pd_full(t->ndim, t->shape, init->a, PD_FLOAT64));
      break;
    case PD_INIT_NORMAL:
      st = fill_from(t, normal_like(t, init->a, init->b));
      break;
    case PD_INIT_TRUNCATED_NORMAL:
      st = fill_from(t, truncated_like(t, init->a, init->b));
      break;
    case PD_INIT_UNIFORM:
      st = init->a > init->b
               ? pd_set_error(PD_ERR_INVALID, "initializer: Uniform low %g > high %g", init->a, init->b)
               : fill_from(t, uniform_like(t, init->a, init->b));
      break;
    case PD_INIT_XAVIER_NORMAL:
    case PD_INIT_XAVIER_UNIFORM: {
      double in = init->a > 0 ? init->a : fi, out = init->b > 0 ? init->b : fo;
      double gain = init->gain > 0 ? init->gain : 1.0;
      if (init->kind == PD_INIT_XAVIER_UNIFORM) {
        double lim = gain * sqrt(6.0 / (in + out));
        st = fill_from(t, uniform_like(t, -lim, lim));
      } else {
        st = fill_from(t, normal_like(t, 0.0, gain * sqrt(2.0 / (in + out))));
      }
      break;
    }
    case PD_INIT_KAIMING_NORMAL:
    case PD_INIT_KAIMING_UNIFORM: {
      double in = init->a > 0 ? init->a : fi;
      double gain = kaiming_gain(init->nonlinearity, init->gain);
      if (init->kind == PD_INIT_KAIMING_UNIFORM) {
        double lim = gain * sqrt(3.0 / in);
        st = fill_from(t, uniform_like(t, -lim, lim));
      } else {
        st = fill_from(t, normal_like(t, 0.0, gain / sqrt(in)));
      }
      break;
    }
    case PD_INIT_ASSIGN: {
      const pd_tensor *v = init->value;
      if (!v) {
        st = pd_set_error(PD_ERR_INVALID, "initializer: Assign needs a value tensor");
      } else if (v->numel != t->numel) {
        char a[160];
        st = pd_set_error(PD_ERR_SHAPE,
                          "initializer: Assign value of shape %s does not fit a parameter of shape %s",
                          pd_shape_str(v->ndim, v->shape, a, sizeof a), PD_SHAPE_STR(t));
      } else {
        int64_t n = pd_tensor_copy_to(v, pd_tensor_data(t), t->numel, t->dtype);
        st = n < 0 ? (pd_status)n : PD_OK;
        t->storage->version++;
      }
      break;
    }
    default:
      st = pd_set_error(PD_ERR_INVALID, "initializer: unknown kind %d", (int)init->kind);
  }
  pd_grad_mode_set(prev);
  pd_internal_leave();
  return st;
}
