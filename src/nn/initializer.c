/* paddle.nn.initializer: fills parameters in place, without recording. */
#include <math.h>
#include <string.h>

#include "../ops/op_registry.h"
#include "paddlec/creation.h"
#include "paddlec/math.h"
#include "initializer_internal.h"
#include "paddlec/nn.h"

pd_initializer pd_nn_initializer_constant(double value) {
  return (pd_initializer){.kind = PD_INIT_CONSTANT, .a = value};
}
pd_initializer pd_nn_initializer_normal(double mean, double std) {
  return (pd_initializer){.kind = PD_INIT_NORMAL, .a = mean, .b = std};
}
pd_initializer pd_nn_initializer_truncated_normal(double mean, double std, double a, double b) {
  return (pd_initializer){.kind = PD_INIT_TRUNCATED_NORMAL, .a = mean, .b = std, .lower = a, .upper = b};
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

/* Paddle's calculate_gain(nonlinearity, param); -1 for a name it rejects. */
static double kaiming_gain(const char *nl, double slope) {
  static const char *const ones[] = {"sigmoid", "linear",           "conv1d",           "conv2d",
                                     "conv3d",  "conv1d_transpose", "conv2d_transpose", "conv3d_transpose"};
  if (!nl || strcmp(nl, "relu") == 0) return sqrt(2.0);
  if (strcmp(nl, "leaky_relu") == 0) return sqrt(2.0 / (1 + slope * slope));
  if (strcmp(nl, "tanh") == 0) return 5.0 / 3;
  if (strcmp(nl, "selu") == 0) return 3.0 / 4;
  for (size_t i = 0; i < sizeof ones / sizeof *ones; i++)
    if (strcmp(nl, ones[i]) == 0) return 1.0;
  return -1.0;
}

/* Copies src's values into t (shapes already equal) with the copy_ op. */
static pd_status fill_from(pd_tensor *t, pd_tensor *src) {
  if (!src) return pd_last_status();
  pd_status st = pd_write_copy(t, src);
  pd_tensor_release(src);
  return st;
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

/* Paddle's truncated_gaussian_random op (src/ops/creation/random_dist.c),
 * drawn in float64: the parameter's dtype is cast to afterwards. */
static pd_tensor *truncated_like(const pd_tensor *t, double mean, double std, double lo, double hi) {
  pd_attrs a = {.f = {mean, std, lo, hi}, .dtype = PD_FLOAT64, .nv = {t->ndim}};
  if (t->ndim) memcpy(a.v[0], t->shape, sizeof(int64_t) * (size_t)t->ndim);
  return pd_dispatch1(PD_OP_truncated_gaussian_random, NULL, 0, &a);
}

static pd_nn_init_recorder_fn g_init_recorder;

void pd_nn_set_init_recorder(pd_nn_init_recorder_fn fn) { g_init_recorder = fn; }

bool pd_initializer_records(const pd_initializer *init) { return init && init->kind != PD_INIT_ASSIGN; }

/* The checks of init's arguments against t that need no values. */
static pd_status check_args(const pd_initializer *init, const pd_tensor *t) {
  switch (init->kind) {
    case PD_INIT_DEFAULT:
    case PD_INIT_CONSTANT:
    case PD_INIT_XAVIER_NORMAL:
    case PD_INIT_XAVIER_UNIFORM:
      return PD_OK;
    case PD_INIT_NORMAL:
      if (!(init->b >= 0) || isinf(init->b) || !isfinite(init->a))
        return pd_set_error(
            PD_ERR_INVALID,
            "initializer: Normal needs a finite mean and a finite std >= 0, got mean %g, std %g", init->a,
            init->b);
      return PD_OK;
    case PD_INIT_TRUNCATED_NORMAL:
      if (!(init->lower <= init->upper) || !(init->b >= 0))
        return pd_set_error(PD_ERR_INVALID,
                            "initializer: TruncatedNormal needs a <= b and std >= 0, got a %g, b %g, std %g",
                            init->lower, init->upper, init->b);
      return PD_OK;
    case PD_INIT_UNIFORM:
      if (init->a > init->b)
        return pd_set_error(PD_ERR_INVALID, "initializer: Uniform low %g > high %g", init->a, init->b);
      return PD_OK;
    case PD_INIT_KAIMING_NORMAL:
    case PD_INIT_KAIMING_UNIFORM:
      if (kaiming_gain(init->nonlinearity, init->gain) < 0)
        return pd_set_error(
            PD_ERR_INVALID,
            "initializer: Kaiming nonlinearity '%s' is not supported (relu, leaky_relu, tanh, "
            "selu, sigmoid, linear, conv1d/2d/3d, conv1d/2d/3d_transpose)",
            init->nonlinearity);
      return PD_OK;
    case PD_INIT_ASSIGN: {
      const pd_tensor *v = init->value;
      if (!v) return pd_set_error(PD_ERR_INVALID, "initializer: Assign needs a value tensor");
      if (v->ndim != t->ndim || memcmp(v->shape, t->shape, sizeof(int64_t) * (size_t)t->ndim) != 0) {
        char a[160];
        return pd_set_error(PD_ERR_SHAPE,
                            "initializer: Assign value of shape %s does not fit a parameter of shape %s",
                            pd_shape_str(v->ndim, v->shape, a, sizeof a), PD_SHAPE_STR(t));
      }
      return PD_OK;
    }
  }
  return pd_set_error(PD_ERR_INVALID, "initializer: unknown kind %d", (int)init->kind);
}

pd_tensor *pd_initializer_values(const pd_initializer *init, const pd_tensor *t, pd_status *st) {
  *st = check_args(init, t);
  if (*st != PD_OK) return NULL;
  double fi, fo;
  fans(t, &fi, &fo);
  pd_tensor *v = NULL;
  switch (init->kind) {
    case PD_INIT_DEFAULT:
    case PD_INIT_CONSTANT:
      v = pd_full(t->ndim, t->shape, init->a, pd_dtype_is_floating(t->dtype) ? t->dtype : PD_FLOAT64);
      break;
    case PD_INIT_NORMAL:
      v = normal_like(t, init->a, init->b);
      break;
    case PD_INIT_TRUNCATED_NORMAL:
      v = truncated_like(t, init->a, init->b, init->lower, init->upper);
      break;
    case PD_INIT_UNIFORM:
      v = uniform_like(t, init->a, init->b);
      break;
    case PD_INIT_XAVIER_NORMAL:
    case PD_INIT_XAVIER_UNIFORM: {
      double in = init->a > 0 ? init->a : fi, out = init->b > 0 ? init->b : fo;
      double gain = init->gain > 0 ? init->gain : 1.0;
      bool zero = in == 0 || out == 0; /* Paddle: limit / std 0 when a fan is 0 */
      if (init->kind == PD_INIT_XAVIER_UNIFORM) {
        double lim = zero ? 0.0 : gain * sqrt(6.0 / (in + out));
        v = uniform_like(t, -lim, lim);
      } else {
        v = normal_like(t, 0.0, zero ? 0.0 : gain * sqrt(2.0 / (in + out)));
      }
      break;
    }
    case PD_INIT_KAIMING_NORMAL:
    case PD_INIT_KAIMING_UNIFORM: {
      if (t->numel == 0) return NULL; /* nothing to draw; fan_in may be 0 */
      double in = init->a > 0 ? init->a : fi;
      double gain = kaiming_gain(init->nonlinearity, init->gain);
      if (init->kind == PD_INIT_KAIMING_UNIFORM)
        v = uniform_like(t, -gain * sqrt(3.0 / in), gain * sqrt(3.0 / in));
      else
        v = normal_like(t, 0.0, gain / sqrt(in));
      break;
    }
    case PD_INIT_ASSIGN:
      v = pd_tensor_retain((pd_tensor *)init->value);
      break;
  }
  if (!v) *st = pd_last_status();
  return v;
}

pd_status pd_initializer_apply(const pd_initializer *init, pd_tensor *t) {
  if (!init || !t)
    return pd_set_error(PD_ERR_INVALID, "initializer: %s is NULL", init ? "tensor" : "initializer");
  if (!pd_dtype_is_floating(t->dtype) && init->kind != PD_INIT_CONSTANT && init->kind != PD_INIT_ASSIGN)
    return pd_set_error(PD_ERR_DTYPE, "initializer: random initializers need a floating tensor, got %s",
                        pd_dtype_name(t->dtype));
  if (t->is_meta) return pd_tensor_meta_error("initializer", t);
  if (!t->is_contiguous) return pd_set_error(PD_ERR_INVALID, "initializer: the tensor must be contiguous");
  pd_internal_enter();
  bool prev = pd_grad_mode_set(false);
  /* A parameter gets its value now even while a Program is being built
   * (a layer created under program_guard), so the draws are not recorded
   * into the main Program; the init recorder puts the same ops into the
   * startup Program instead. */
  void *tracer_ctx;
  pd_tracer_fn tracer = pd_dispatch_get_tracer(&tracer_ctx);
  pd_dispatch_set_tracer(NULL, NULL);
  pd_status st;
  pd_tensor *v = pd_initializer_values(init, t, &st);
  if (v) st = fill_from(t, v);
  if (st == PD_OK && tracer && g_init_recorder && t->param_info && pd_initializer_records(init))
    st = g_init_recorder(init, t);
  pd_dispatch_set_tracer(tracer, tracer_ctx);
  pd_grad_mode_set(prev);
  pd_internal_leave();
  return st;
}
