/* F.cosine_similarity, composed of public ops as Paddle does:
 *   w12 = sum(x1 x2), w1 = sum(x1^2), w2 = sum(x2^2) along axis,
 *   cos = w12 / sqrt(clip(w1 w2, eps^2)). */
#include <math.h>

#include "../elementwise/elementwise_util.h"
#include "loss_util.h"
#include "paddlec/ops.h"

pd_tensor *pd_cosine_similarity(pd_tensor *x1, pd_tensor *x2, int axis, double eps) {
  static const char *op = "cosine_similarity";
  if (!x1 || !x2) {
    if (pd_last_status() == PD_OK) pd_set_error(PD_ERR_INVALID, "%s: %s is NULL", op, x1 ? "x2" : "x1");
    return NULL;
  }
  int nd = x1->ndim > x2->ndim ? x1->ndim : x2->ndim, ax;
  int64_t shape[PD_MAX_DIMS];
  if (pd_broadcast_shapes(op, x1->ndim, x1->shape, x2->ndim, x2->shape, &nd, shape) != PD_OK) return NULL;
  if (nd == 0) {
    pd_set_error(PD_ERR_SHAPE, "%s: x1 and x2 are 0-D; expected at least 1 dimension", op);
    return NULL;
  }
  /* each sum takes axis as given, counted in its own operand's rank (as Paddle) */
  if (pd_norm_axis(op, axis, nd, &ax) != PD_OK || pd_norm_axis(op, axis, x1->ndim, &ax) != PD_OK ||
      pd_norm_axis(op, axis, x2->ndim, &ax) != PD_OK)
    return NULL;
  int64_t a = axis;
  pd_internal_enter();
  pd_tmps T = {0};
  pd_tensor *w12 = PD_K(pd_sum(PD_K(pd_multiply(x1, x2)), &a, 1, false));
  pd_tensor *w1 = PD_K(pd_sum(PD_K(pd_multiply(x1, x1)), &a, 1, false));
  pd_tensor *w2 = PD_K(pd_sum(PD_K(pd_multiply(x2, x2)), &a, 1, false));
  pd_tensor *n12 = PD_K(pd_sqrt(PD_K(pd_clip(PD_K(pd_multiply(w1, w2)), eps * eps, INFINITY))));
  pd_tensor *out = pd_divide(w12, n12);
  pd_tmps_free(&T);
  pd_internal_leave();
  return pd_scope_track(out);
}
