/* paddle.nn.Dropout, Dropout2D, Dropout3D, AlphaDropout: the functional
 * dropouts with the layer's training flag. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "paddlec/layers.h"

typedef enum { K_DROPOUT, K_DROPOUT2D, K_DROPOUT3D, K_ALPHA } dropout_kind;

typedef struct dropout {
  pd_layer base;
  dropout_kind kind;
  double p;
  int naxis;
  int64_t axis[PD_MAX_DIMS];
  char mode[24];
  char data_format[8];
} dropout;

static int dropout_forward(pd_layer *self, pd_tensor *const *in, int n_in, pd_tensor **out, int max_out) {
  (void)max_out;
  dropout *l = (dropout *)self;
  if (n_in != 1) return pd_set_error(PD_ERR_INVALID, "%s: expects 1 input, got %d", self->type->name, n_in);
  pd_tensor *x = in[0];
  switch (l->kind) {
    case K_DROPOUT:
      out[0] = pd_dropout(x, l->p, l->naxis, l->axis, self->training, l->mode);
      break;
    case K_DROPOUT2D:
      out[0] = pd_dropout2d(x, l->p, self->training, l->data_format);
      break;
    case K_DROPOUT3D:
      out[0] = pd_dropout3d(x, l->p, self->training, l->data_format);
      break;
    case K_ALPHA:
      out[0] = pd_alpha_dropout(x, l->p, self->training);
      break;
  }
  return out[0] ? 1 : pd_last_status();
}

static char *dropout_repr(const pd_layer *self) {
  const dropout *l = (const dropout *)self;
  char *s = malloc(160), axis[96] = "None";
  if (!s) return NULL;
  if (l->naxis) {
    snprintf(axis, sizeof axis, "[");
    for (int i = 0; i < l->naxis; i++) {
      char b[24];
      snprintf(b, sizeof b, "%s%lld", i ? ", " : "", (long long)l->axis[i]);
      strncat(axis, b, sizeof axis - strlen(axis) - 1);
    }
    strncat(axis, "]", sizeof axis - strlen(axis) - 1);
  }
  switch (l->kind) {
    case K_DROPOUT:
      snprintf(s, 160, "p=%g, axis=%s, mode=%s", l->p, axis, l->mode);
      break;
    case K_DROPOUT2D:
    case K_DROPOUT3D:
      snprintf(s, 160, "p=%g, data_format=%s", l->p, l->data_format);
      break;
    case K_ALPHA:
      snprintf(s, 160, "p=%g", l->p);
      break;
  }
  return s;
}

static const pd_layer_type dropout_types[4] = {{"Dropout", dropout_forward, NULL, dropout_repr},
                                               {"Dropout2D", dropout_forward, NULL, dropout_repr},
                                               {"Dropout3D", dropout_forward, NULL, dropout_repr},
                                               {"AlphaDropout", dropout_forward, NULL, dropout_repr}};

static dropout *make(dropout_kind kind, double p) {
  if (!(p >= 0.0 && p <= 1.0)) {
    pd_set_error(PD_ERR_INVALID, "%s: p %g is out of range [0, 1]", dropout_types[kind].name, p);
    return NULL;
  }
  dropout *l = pd_layer_new(sizeof *l, &dropout_types[kind]);
  if (!l) return NULL;
  l->kind = kind;
  l->p = p;
  return l;
}

pd_layer *pd_nn_dropout(double p, const pd_nn_dropout_opts *opts) {
  static const pd_nn_dropout_opts defaults;
  if (!opts) opts = &defaults;
  const char *mode = opts->mode ? opts->mode : "upscale_in_train";
  if (strcmp(mode, "upscale_in_train") != 0 && strcmp(mode, "downscale_in_infer") != 0) {
    pd_set_error(PD_ERR_INVALID, "Dropout: mode '%s' is not 'upscale_in_train' or 'downscale_in_infer'",
                 mode);
    return NULL;
  }
  if (opts->naxis < 0 || opts->naxis > PD_MAX_DIMS) {
    pd_set_error(PD_ERR_INVALID, "Dropout: naxis %d is out of range [0, %d]", opts->naxis, PD_MAX_DIMS);
    return NULL;
  }
  for (int i = 0; i < opts->naxis; i++)
    if (opts->axis[i] < 0) {
      pd_set_error(PD_ERR_INDEX, "Dropout: axis %lld must be >= 0", (long long)opts->axis[i]);
      return NULL;
    }
  dropout *l = make(K_DROPOUT, p);
  if (!l) return NULL;
  l->naxis = opts->naxis;
  memcpy(l->axis, opts->axis, sizeof(int64_t) * (size_t)opts->naxis);
  snprintf(l->mode, sizeof l->mode, "%s", mode);
  return &l->base;
}

static pd_layer *dropout_nd(dropout_kind kind, double p, const char *df, const char *first,
                            const char *last) {
  const char *name = dropout_types[kind].name;
  if (df && strcmp(df, first) != 0 && strcmp(df, last) != 0) {
    pd_set_error(PD_ERR_INVALID, "%s: data_format '%s' is not '%s' or '%s'", name, df, first, last);
    return NULL;
  }
  dropout *l = make(kind, p);
  if (!l) return NULL;
  snprintf(l->data_format, sizeof l->data_format, "%s", df ? df : first);
  return &l->base;
}

pd_layer *pd_nn_dropout2d(double p, const pd_nn_dropout2d_opts *opts) {
  return dropout_nd(K_DROPOUT2D, p, opts ? opts->data_format : NULL, "NCHW", "NHWC");
}

pd_layer *pd_nn_dropout3d(double p, const pd_nn_dropout3d_opts *opts) {
  return dropout_nd(K_DROPOUT3D, p, opts ? opts->data_format : NULL, "NCDHW", "NDHWC");
}

pd_layer *pd_nn_alpha_dropout(double p) {
  dropout *l = make(K_ALPHA, p);
  return l ? &l->base : NULL;
}
