/* Random index draws of samplers and random_split: the global generator
 * through paddle.randperm / paddle.randint, or a Philox stream of its own. */
#include <string.h>

#include "io_internal.h"
#include "paddlec/creation.h"

static pd_status copy_out(pd_tensor *t, int64_t n, int64_t *out, const char *what) {
  if (!t) return pd_last_status();
  int64_t got = pd_tensor_copy_to(t, out, n, PD_INT64);
  pd_tensor_release(t);
  if (got != n)
    return got < 0 ? (pd_status)got
                   : pd_set_error(PD_ERR_STATE, "%s: drew %lld of %lld", what, (long long)got, (long long)n);
  return PD_OK;
}

pd_status pd_io_permutation(int64_t n, uint64_t seed, int64_t *out) {
  if (n <= 0) return PD_OK;
  if (seed == 0) {
    pd_internal_enter();
    pd_status st = copy_out(pd_randperm(n, PD_INT64), n, out, "randperm");
    pd_internal_leave();
    return st;
  }
  /* Fisher-Yates; step i draws 64 bits from counter i of the stream */
  for (int64_t i = 0; i < n; i++) out[i] = i;
  for (int64_t i = n - 1; i > 0; i--) {
    uint32_t w[4];
    pd_philox((uint64_t)i, seed, w);
    uint64_t r = ((uint64_t)w[0] << 32) | w[1];
    int64_t j = (int64_t)(((unsigned __int128)r * (uint64_t)(i + 1)) >> 64);
    int64_t tmp = out[i];
    out[i] = out[j];
    out[j] = tmp;
  }
  return PD_OK;
}

pd_status pd_io_randint(int64_t high, int64_t n, int64_t *out) {
  if (n <= 0) return PD_OK;
  pd_internal_enter();
  pd_status st = copy_out(pd_randint(0, high, 1, (const int64_t[]){n}, PD_INT64), n, out, "randint");
  pd_internal_leave();
  return st;
}
