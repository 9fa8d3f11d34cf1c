/* paddle.nn.LayerNorm and paddle.nn.RMSNorm over the trailing dims. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/tensor_impl.h" /* pd_shape_str, pd_shape_numel */
#include "paddlec/norm.h"
#include "layer_dtype.h"

typedef struct row_norm_layer {
  pd_layer base;
  int nshape;
  int64_t shape[PD_MAX_DIMS];
  double epsilon;
  bool rms;
  pd_tensor *weight, *bias; /* borrowed from the base's parameters; NULL when absent */
} row_norm_layer;

static int row_norm_forward(pd_layer *self, pd_tensor *const *in, int n_in, pd_tensor **out, int max_out) {
  (void)max_out;
  row_norm_layer *l = (row_norm_layer *)self;
  const char *name = l->rms ? "RMSNorm" : "LayerNorm";
  if (n_in != 1) return pd_set_error(PD_ERR_INVALID, "%s: expects 1 input, got %d", name, n_in);
  out[0] = l->rms ? pd_rms_norm(in[0], l->nshape, l->shape, l->weight, l->epsilon)
                  : pd_layer_norm(in[0], l->nshape, l->shape, l->weight, l->bias, l->epsilon);
  return out[0] ? 1 : pd_last_status();
}

static char *row_norm_repr(const pd_layer *self) {
  const row_norm_layer *l = (const row_norm_layer *)self;
  char shp[160], *s = malloc(256);
  if (s)
    snprintf(s, 256, "normalized_shape=%s, epsilon=%g", pd_shape_str(l->nshape, l->shape, shp, sizeof shp),
             l->epsilon);
  return s;
}

static const pd_layer_type layer_norm_type = {"LayerNorm", row_norm_forward, NULL, row_norm_repr};
static const pd_layer_type rms_norm_type = {"RMSNorm", row_norm_forward, NULL, row_norm_repr};

static row_norm_layer *row_norm_new(const char *name, const pd_layer_type *type, int nshape,
                                    const int64_t *normalized_shape, double epsilon, pd_dtype dtype) {
  if (nshape < 1 || nshape > PD_MAX_DIMS || !normalized_shape) {
    pd_set_error(PD_ERR_INVALID, "%s: normalized_shape must have 1 to %d dims, got %d", name, PD_MAX_DIMS,
                 nshape);
    return NULL;
  }
  for (int d = 0; d < nshape; d++)
    if (normalized_shape[d] <= 0) {
      char b[160];
      pd_set_error(PD_ERR_INVALID, "%s: normalized_shape %s must have positive dims", name,
                   pd_shape_str(nshape, normalized_shape, b, sizeof b));
      return NULL;
    }
  if (dtype != PD_BOOL && !pd_dtype_is_floating(dtype)) {
    pd_set_error(PD_ERR_DTYPE, "%s: dtype must be floating, got %s", name, pd_dtype_name(dtype));
    return NULL;
  }
  row_norm_layer *l = pd_layer_new(sizeof *l, type);
  if (!l) return NULL;
  l->nshape = nshape;
  memcpy(l->shape, normalized_shape, sizeof(int64_t) * (size_t)nshape);
  l->epsilon = epsilon != 0 ? epsilon : 1e-5;
  return l;
}

pd_layer *pd_nn_layer_norm(int nshape, const int64_t *normalized_shape, const pd_nn_layer_norm_opts *opts) {
  static const pd_nn_layer_norm_opts defaults;
  if (!opts) opts = &defaults;
  row_norm_layer *l =
      row_norm_new("LayerNorm", &layer_norm_type, nshape, normalized_shape, opts->epsilon, opts->dtype);
  if (!l) return NULL;
  pd_dtype dt = pd_nn_layer_dtype(opts->dtype);
  int64_t n = pd_shape_numel(nshape, normalized_shape);
  pd_initializer one = pd_nn_initializer_constant(1.0);
  bool ok = true;
  if (!opts->no_weight)
    ok = (l->weight = pd_layer_create_parameter(&l->base, "weight", 1, &n, dt, opts->weight_attr, &one,
                                                false)) != NULL;
  if (ok && !opts->no_bias)
    ok = (l->bias = pd_layer_create_parameter(&l->base, "bias", 1, &n, dt, opts->bias_attr, NULL, true)) !=
         NULL;
  if (!ok) {
    pd_layer_release(&l->base);
    return NULL;
  }
  return &l->base;
}

pd_layer *pd_nn_rms_norm(int nshape, const int64_t *normalized_shape, const pd_nn_rms_norm_opts *opts) {
  static const pd_nn_rms_norm_opts defaults;
  if (!opts) opts = &defaults;
  row_norm_layer *l =
      row_norm_new("RMSNorm", &rms_norm_type, nshape, normalized_shape, opts->epsilon, opts->dtype);
  if (!l) return NULL;
  l->rms = true;
  pd_dtype dt = pd_nn_layer_dtype(opts->dtype);
  pd_initializer one = pd_nn_initializer_constant(1.0);
  if (!opts->no_weight &&
      !(l->weight = pd_layer_create_parameter(&l->base, "weight", nshape, normalized_shape, dt,
                                              opts->weight_attr, &one, false))) {
    pd_layer_release(&l->base);
    return NULL;
  }
  return &l->base;
}
