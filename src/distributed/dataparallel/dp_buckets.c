/* Bucket plans: Paddle's assign_group_by_size for the reducer and
 * build_groups for coalesced broadcasts and fused all_reduces, plus the
 * flatten / unflatten helpers they share. */
#include <stdlib.h>
#include <string.h>

#include "../../core/core_internal.h"
#include "../../ops/op_registry.h"
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

/* Tensor i's piece of flat, starting at element off, with its shape. */
static pd_tensor *piece(const pd_tensor *flat, const pd_tensor *t, int64_t off) {
  return pd_tensor_new_view(flat, t->ndim, t->shape, NULL, flat->offset + off);
}

/* The copies in and out of a flat buffer are copy_ ops. */
pd_tensor *pd_dp_flatten(pd_tensor *const *ts, int n) {
  int64_t total = 0;
  for (int i = 0; i < n; i++) total += ts[i]->numel;
  pd_internal_enter();
  pd_tensor *flat = pd_tensor_new(ts[0]->dtype, 1, (int64_t[]){total});
  int64_t off = 0;
  for (int i = 0; i < n && flat; i++) {
    pd_tensor *v = piece(flat, ts[i], off);
    pd_status st = v ? pd_write_copy(v, ts[i]) : pd_last_status();
    pd_tensor_release(v);
    if (st != PD_OK) {
      pd_tensor_release(flat);
      flat = NULL;
    }
    off += ts[i]->numel;
  }
  pd_internal_leave();
  return flat;
}

pd_status pd_dp_unflatten(const pd_tensor *flat, pd_tensor *const *ts, int n) {
  int64_t off = 0;
  pd_status st = PD_OK;
  pd_internal_enter();
  for (int i = 0; i < n && st == PD_OK; i++) {
    pd_tensor *t = ts[i];
    if (!t->is_contiguous || t->dtype != flat->dtype) {
      st = pd_set_error(PD_ERR_INVALID, "DataParallel: tensor %d of a coalesced group is not contiguous %s",
                        i, pd_dtype_name(t->dtype));
      break;
    }
    pd_tensor *v = piece(flat, t, off);
    st = v ? pd_write_copy(t, v) : pd_last_status();
    pd_tensor_release(v);
    off += t->numel;
  }
  pd_internal_leave();
  return st;
}
