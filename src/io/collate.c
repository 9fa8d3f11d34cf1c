/* The default collate_fn: each field of a batch is its samples stacked
 * along a new dim 0 (numbers, i.e. 0-D samples, become a [batch] tensor). */
#include <stdlib.h>
#include <string.h>

#include "io_internal.h"
#include "paddlec/manipulation.h"

int pd_io_default_collate(pd_tensor *const *samples, int64_t batch, int nfields, pd_tensor **out,
                          int max_out) {
  if (nfields > max_out)
    return pd_set_error(PD_ERR_INVALID, "default_collate_fn: %d fields for room of %d", nfields, max_out);
  if (batch < 1 || batch > 0x7fffffff)
    return pd_set_error(PD_ERR_INVALID, "default_collate_fn: batch of %lld samples", (long long)batch);
  pd_tensor **xs = malloc((size_t)batch * sizeof *xs);
  if (!xs) return pd_set_error(PD_ERR_MEMORY, "default_collate_fn: out of memory");
  int n = nfields;
  pd_internal_enter();
  for (int f = 0; f < nfields; f++) {
    for (int64_t i = 0; i < batch; i++) xs[i] = samples[i * nfields + f];
    out[f] = pd_stack(xs, (int)batch, 0);
    if (!out[f]) {
      char msg[2048];
      pd_io_error_copy(msg, sizeof msg);
      n = pd_set_error(pd_last_status(), "default_collate_fn: field %d: %s", f, msg);
      for (int k = 0; k < f; k++) {
        pd_tensor_release(out[k]);
        out[k] = NULL;
      }
      break;
    }
  }
  pd_internal_leave();
  free(xs);
  return n;
}
