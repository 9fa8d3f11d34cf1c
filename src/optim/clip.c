/* Regularizers (paddle.regularizer) and gradient clipping
 * (paddle.nn.ClipGradByValue / ByNorm / ByGlobalNorm). Inside an optimizer
 * step the clipping is folded into the fused update (a gradient scale or
 * bounds); pd_nn_clip_grad_apply is the standalone clip(params_grads). */
#include <math.h>

#include "../core/core_internal.h"
#include "optim_internal.h"
#include "paddlec/autograd.h"
#include "paddlec/math.h"

pd_regularizer pd_regularizer_l1_decay(double coeff) { return (pd_regularizer){PD_REGULARIZER_L1, coeff}; }
pd_regularizer pd_regularizer_l2_decay(double coeff) { return (pd_regularizer){PD_REGULARIZER_L2, coeff}; }

pd_grad_clip pd_nn_clip_grad_by_value(double max, double min) {
  return (pd_grad_clip){.kind = PD_GRAD_CLIP_BY_VALUE, .max = max, .min = min};
}
pd_grad_clip pd_nn_clip_grad_by_norm(double clip_norm) {
  return (pd_grad_clip){.kind = PD_GRAD_CLIP_BY_NORM, .clip_norm = clip_norm};
}
pd_grad_clip pd_nn_clip_grad_by_global_norm(double clip_norm) {
  return (pd_grad_clip){.kind = PD_GRAD_CLIP_BY_GLOBAL_NORM, .clip_norm = clip_norm};
}

pd_status pd_grad_clip_check(const char *op, const pd_grad_clip *c) {
  if (!c) return PD_OK;
  switch (c->kind) {
    case PD_GRAD_CLIP_NONE:
      return PD_OK;
    case PD_GRAD_CLIP_BY_VALUE:
      if (isnan(c->min) || isnan(c->max) || c->min > c->max)
        return pd_set_error(PD_ERR_INVALID, "%s: ClipGradByValue needs min <= max, got min %g and max %g", op,
                            c->min, c->max);
      return PD_OK;
    case PD_GRAD_CLIP_BY_NORM:
    case PD_GRAD_CLIP_BY_GLOBAL_NORM:
      if (!(c->clip_norm > 0))
        return pd_set_error(PD_ERR_INVALID, "%s: %s needs clip_norm > 0, got %g", op,
                            c->kind == PD_GRAD_CLIP_BY_NORM ? "ClipGradByNorm" : "ClipGradByGlobalNorm",
                            c->clip_norm);
      return PD_OK;
  }
  return pd_set_error(PD_ERR_INVALID, "%s: unknown gradient clip kind %d", op, (int)c->kind);
}

double pd_grad_clip_scale(const pd_grad_clip *c, double sq) {
  double norm = sqrt(sq);
  if (c->kind == PD_GRAD_CLIP_BY_NORM) return norm > c->clip_norm ? c->clip_norm / norm : 1.0;
  if (c->kind == PD_GRAD_CLIP_BY_GLOBAL_NORM) {
    if (c->auto_skip_clip) return norm > c->clip_norm ? c->clip_norm / norm : 1.0;
    return c->clip_norm / (norm > c->clip_norm ? norm : c->clip_norm);
  }
  return 1.0;
}

double pd_grad_squared_norm(pd_tensor *g) {
  pd_tensor *s = pd_dispatch1(PD_OP_squared_l2_norm, &g, 1, NULL);
  if (!s) return -1;
  double v = pd_load_as_f64(pd_data_ptr(s), s->dtype);
  pd_tensor_release(s);
  return v;
}

static bool wants_clip(pd_tensor *const *params, int i) {
  const pd_param_info *pi = params && params[i] ? pd_tensor_param_info(params[i]) : NULL;
  return !pi || pi->need_clip;
}

pd_status pd_nn_clip_grad_apply(const pd_grad_clip *clip, pd_tensor *const *params, pd_tensor *const *grads,
                                int n, pd_tensor **out) {
  if (!clip || !grads || !out || n < 0)
    return pd_set_error(PD_ERR_INVALID, "clip_grad: clip, grads and out must be given (n = %d)", n);
  pd_status st = pd_grad_clip_check("clip_grad", clip);
  if (st != PD_OK) return st;
  for (int i = 0; i < n; i++) out[i] = NULL;
  bool prev = pd_set_grad_enabled(false);
  pd_internal_enter();
  double global = 1.0;
  if (clip->kind == PD_GRAD_CLIP_BY_GLOBAL_NORM) {
    double sq = 0;
    bool any = false;
    for (int i = 0; i < n && st == PD_OK; i++) {
      if (!grads[i] || !wants_clip(params, i)) continue;
      double v = pd_grad_squared_norm(grads[i]);
      if (v < 0) st = pd_last_status();
      sq += v;
      any = true;
    }
    global = any ? pd_grad_clip_scale(clip, sq) : 1.0;
  }
  for (int i = 0; i < n && st == PD_OK; i++) {
    pd_tensor *g = grads[i];
    if (!g) continue;
    if (!wants_clip(params, i) || clip->kind == PD_GRAD_CLIP_NONE) {
      out[i] = pd_tensor_retain(g);
      continue;
    }
    if (clip->kind == PD_GRAD_CLIP_BY_VALUE) {
      out[i] = pd_clip(g, clip->min, clip->max);
    } else {
      double s = global;
      if (clip->kind == PD_GRAD_CLIP_BY_NORM) {
        double v = pd_grad_squared_norm(g);
        if (v < 0) {
          st = pd_last_status();
          break;
        }
        s = pd_grad_clip_scale(clip, v);
      }
      out[i] =
          s == 1.0 && clip->kind == PD_GRAD_CLIP_BY_NORM ? pd_tensor_retain(g) : pd_scale(g, s, 0.0, true);
    }
    if (!out[i]) st = pd_last_status();
  }
  pd_internal_leave();
  pd_set_grad_enabled(prev);
  for (int i = 0; i < n; i++) {
    if (st != PD_OK) {
      pd_tensor_release(out[i]);
      out[i] = NULL;
    } else {
      pd_scope_track(out[i]); /* handed to the caller like an op's output */
    }
  }
  return st;
}
