/* Bucket plans: Paddle's assign_group_by_size for the reducer and
 * build_groups for coalesced broadcasts and fused all_reduces, plus the
 * flatten / unflatten helpers they share. */
#include <stdlib.h>
#include <string.h>

#include "../../core/core_internal.h"
#include "dp_internal.h"

typedef struct bucket_first {
  int id, first;
} bucket_first;

static int by_first(const void *a, const void *b) {
  return ((const bucket_first *)a)->first - ((const bucket_first *)b)->first;
}

int pd_dp_assign_buckets(int n, const pd_dtype *dtypes, const size_t *bytes, const size_t *limits,
                         int n_limits, int **starts, int **members) {
  *starts = NULL;
  *members = NULL;
  if (n <= 0 || n_limits <= 0)
    return pd_set_error(PD_ERR_INVALID, "DataParallel: bucket assignment of %d parameters with %d limits", n,
                        n_limits);
  int *bucket_of = malloc((size_t)n * sizeof *bucket_of);
  bucket_first *firsts = malloc((size_t)n * sizeof *firsts);
  int *count = calloc((size_t)n, sizeof *count);
  int *st = malloc(((size_t)n + 1) * sizeof *st), *mem = malloc((size_t)n * sizeof *mem);
  int *rank_of = malloc((size_t)n * sizeof *rank_of);
  if (!bucket_of || !firsts || !count || !st || !mem || !rank_of) {
    free(bucket_of), free(firsts), free(count), free(st), free(mem), free(rank_of);
    return pd_set_error(PD_ERR_MEMORY, "DataParallel: out of memory assigning buckets");
  }
  /* per dtype: the open bucket (-1: none), its bytes and the limit in use */
  int open[PD_NUM_DTYPES], limit_idx[PD_NUM_DTYPES];
  size_t acc[PD_NUM_DTYPES];
  for (int d = 0; d < PD_NUM_DTYPES; d++) open[d] = -1, limit_idx[d] = 0, acc[d] = 0;
  int nb = 0;
  for (int i = 0; i < n; i++) {
    int d = (int)dtypes[i];
    if (open[d] < 0) {
      open[d] = nb;
      firsts[nb] = (bucket_first){nb, i};
      nb++;
    }
    bucket_of[i] = open[d];
    count[open[d]]++;
    acc[d] += bytes[i];
    if (acc[d] >= limits[limit_idx[d]]) { /* close: a bucket may exceed its limit */
      open[d] = -1;
      acc[d] = 0;
      if (limit_idx[d] + 1 < n_limits) limit_idx[d]++;
    }
  }
  qsort(firsts, (size_t)nb, sizeof *firsts, by_first);
  for (int k = 0; k < nb; k++) rank_of[firsts[k].id] = k;
  st[0] = 0;
  for (int k = 0; k < nb; k++) st[k + 1] = st[k] + count[firsts[k].id];
  int *fill = count; /* reuse: next free position per sorted bucket */
  for (int k = 0; k < nb; k++) fill[k] = st[k];
  for (int i = 0; i < n; i++) mem[fill[rank_of[bucket_of[i]]]++] = i;
  free(bucket_of), free(firsts), free(count), free(rank_of);
  *starts = st;
  *members = mem;
  return nb;
}

int pd_dp_build_groups(pd_tensor *const *ts, int n, size_t limit, int **starts) {
  *starts = malloc(((size_t)n + 1) * sizeof **starts);
  if (!*starts) return pd_set_error(PD_ERR_MEMORY, "build_groups: out of memory");
  int ng = 0;
  size_t counter = 0;
  for (int i = 0; i < n; i++) {
    size_t b = (size_t)ts[i]->numel * pd_dtype_size(ts[i]->dtype);
    if (ng > 0 && counter < limit && ts[i]->dtype == ts[(*starts)[ng - 1]]->dtype) {
      counter += b;
      continue;
    }
    (*starts)[ng++] = i;
    counter = b;
  }
  (*starts)[ng] = n;
  return ng;
}

pd_tensor *pd_dp_flatten(pd_tensor *const *ts, int n) {
  int64_t total = 0;
  for (int i = 0; i < n; i++) total += ts[i]->numel;
  pd_tensor *flat = pd_tensor_new(ts[0]->dtype, 1, (int64_t[]){total});
  if (!flat) return NULL;
  size_t es = pd_dtype_size(flat->dtype);
  char *p = pd_data_ptr(flat);
  for (int i = 0; i < n; i++) {
    int64_t k = pd_tensor_copy_to(ts[i], p, ts[i]->numel, flat->dtype);
    if (k < 0) {
      pd_tensor_release(flat);
      return NULL;
    }
    p += (size_t)ts[i]->numel * es;
  }
  return flat;
}

pd_status pd_dp_unflatten(const pd_tensor *flat, pd_tensor *const *ts, int n) {
  size_t es = pd_dtype_size(flat->dtype);
  const char *p = pd_data_ptr(flat);
  for (int i = 0; i < n; i++) {
    pd_tensor *t = ts[i];
    if (!t->is_contiguous || t->dtype != flat->dtype)
      return pd_set_error(PD_ERR_INVALID, "DataParallel: tensor %d of a coalesced group is not contiguous %s",
                          i, pd_dtype_name(t->dtype));
    memcpy(pd_data_ptr(t), p, (size_t)t->numel * es);
    t->storage->version++;
    p += (size_t)t->numel * es;
  }
  return PD_OK;
}
