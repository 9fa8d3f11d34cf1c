/* DataParallel's check that every rank wraps the same model.
 *
 * The initial broadcast sends rank 0's parameters in flattened groups, so
 * a model that differs only in how its elements are shaped (a [2, 4]
 * weight against a [4, 2] one) would be overwritten silently, and one
 * with a different element count fails as a broadcast whose sizes differ,
 * naming no parameter. Before it, the ranks compare their entries (names,
 * dtypes and shapes, in order): the count first, then one fingerprint per
 * entry broadcast from the source rank. Each decision is an all_reduce, so
 * every rank reaches the same verdict and all of them fail together; none
 * is left waiting in a collective the others skipped. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/tensor_impl.h"
#include "dp_internal.h"
#include "paddlec/creation.h"

/* FNV-1a over the name, the dtype and the shape. */
static int64_t fingerprint(const char *name, const pd_tensor *t) {
  uint64_t h = 1469598103934665603ull;
#define MIX(byte) (h = (h ^ (uint8_t)(byte)) * 1099511628211ull)
  for (const char *c = name; *c; c++) MIX(*c);
  MIX(0);
  MIX(t->dtype);
  MIX(t->ndim);
  for (int d = 0; d < t->ndim; d++)
    for (int b = 0; b < 8; b++) MIX((uint64_t)t->shape[d] >> (8 * b));
#undef MIX
  return (int64_t)h;
}

/* all_reduce of a few int64 values in place. */
static pd_status reduce_i64(int64_t *v, int n, pd_reduce_op op, pd_dist_group *group) {
  pd_tensor *t = pd_to_tensor(v, PD_INT64, 1, (int64_t[]){n});
  if (!t) return pd_last_status();
  pd_status st = pd_dist_all_reduce(t, op, &(pd_dist_opts){.group = group});
  if (st == PD_OK) memcpy(v, pd_tensor_data(t), (size_t)n * sizeof *v);
  pd_tensor_release(t);
  return st;
}

/* The first entry whose fingerprint differs from rank src's (n: none). */
static pd_status first_difference(pd_tensor *const *ts, char *const *names, int n, int src,
                                  pd_dist_group *group, int64_t *first) {
  int64_t *fp = malloc((size_t)n * sizeof *fp);
  if (!fp) return pd_set_error(PD_ERR_MEMORY, "DataParallel: out of memory");
  for (int i = 0; i < n; i++) fp[i] = fingerprint(names[i], ts[i]);
  pd_tensor *t = pd_to_tensor(fp, PD_INT64, 1, (int64_t[]){n});
  pd_status st = t ? pd_dist_broadcast(t, src, &(pd_dist_opts){.group = group}) : pd_last_status();
  *first = n;
  if (st == PD_OK) {
    const int64_t *theirs = pd_tensor_data(t);
    for (int i = 0; i < n && *first == n; i++)
      if (theirs[i] != fp[i]) *first = i;
  }
  pd_tensor_release(t);
  free(fp);
  return st == PD_OK ? reduce_i64(first, 1, PD_REDUCE_MIN, group) : st;
}

pd_status pd_dp_check_same_model(pd_tensor *const *ts, char *const *names, int n, int src,
                                 pd_dist_group *group) {
  int64_t count[2] = {n, -(int64_t)n}; /* MIN gives the fewest entries and minus the most */
  pd_status st = reduce_i64(count, 2, PD_REDUCE_MIN, group);
  if (st != PD_OK) return st;
  if (count[0] != -count[1])
    return pd_set_error(PD_ERR_INVALID,
                        "DataParallel: the ranks wrap different models: they have between %lld and %lld "
                        "parameters and buffers (this rank %d); every rank must build the same model",
                        (long long)count[0], (long long)-count[1], n);
  if (n == 0) return PD_OK;
  int64_t first;
  st = first_difference(ts, names, n, src, group, &first);
  if (st != PD_OK || first == n) return st;
  const pd_tensor *t = ts[first];
  char where[64];
  if (pd_dist_get_rank(NULL) == src)
    snprintf(where, sizeof where, "on another rank from this one (rank %d, the source)", src);
  else
    snprintf(where, sizeof where, "from rank %d's", src);
  return pd_set_error(PD_ERR_INVALID,
                      "DataParallel: the ranks wrap different models: entry %lld, '%s' (%s %s on this rank), "
                      "differs %s in its name, dtype or shape; every rank must build the same model",
                      (long long)first, names[first], pd_dtype_name(t->dtype), PD_SHAPE_STR(t), where);
}
