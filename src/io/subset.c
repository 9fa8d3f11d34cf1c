/* paddle.io.Subset and paddle.io.random_split. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "io_internal.h"

typedef struct subset {
  pd_io_dataset *parent;
  int64_t n;
  int64_t idx[];
} subset;

static int64_t subset_len(void *user) { return ((subset *)user)->n; }

static int subset_get_item(void *user, int64_t index, pd_tensor **out, int max_out) {
  subset *s = user;
  if (index < 0 || index >= s->n)
    return pd_set_error(PD_ERR_INDEX, "Subset: index %lld out of range [0, %lld)", (long long)index,
                        (long long)s->n);
  /* runs in the caller's scope already: call the parent's callback as is */
  pd_io_dataset *p = s->parent;
  int n = p->fns.get_item(p->user, s->idx[index], out, max_out);
  if (n < 0) {
    char msg[2048];
    pd_io_error_copy(msg, sizeof msg);
    return pd_set_error(pd_last_status() != PD_OK ? pd_last_status() : n,
                        "Subset: sample %lld of the underlying dataset: %s", (long long)s->idx[index],
                        msg[0] ? msg : "get_item failed with no message");
  }
  return n;
}

static void subset_destroy(void *user) {
  subset *s = user;
  pd_io_dataset_release(s->parent);
  free(s);
}

pd_io_dataset *pd_io_subset(pd_io_dataset *ds, const int64_t *indices, int64_t n) {
  if (!ds || n < 0 || (n > 0 && !indices)) {
    pd_set_error(PD_ERR_INVALID, "Subset: needs a dataset and n >= 0 indices (got %s, n = %lld)",
                 ds ? "a dataset" : "NULL", (long long)n);
    return NULL;
  }
  if (pd_io_dataset_is_iterable(ds)) {
    pd_set_error(PD_ERR_INVALID, "Subset: the dataset is iterable (it has no get_item)");
    return NULL;
  }
  int64_t len = pd_io_dataset_len(ds);
  if (len < 0) return NULL;
  for (int64_t i = 0; i < n; i++)
    if (indices[i] < 0 || indices[i] >= len) {
      pd_set_error(PD_ERR_INDEX, "Subset: indices[%lld] = %lld out of range [0, %lld)", (long long)i,
                   (long long)indices[i], (long long)len);
      return NULL;
    }
  subset *s = malloc(sizeof *s + (size_t)n * sizeof(int64_t));
  if (!s) {
    pd_set_error(PD_ERR_MEMORY, "Subset: out of memory for %lld indices", (long long)n);
    return NULL;
  }
  s->parent = pd_io_dataset_retain(ds);
  s->n = n;
  if (n) memcpy(s->idx, indices, (size_t)n * sizeof(int64_t));
  pd_io_dataset_fns fns = {.len = subset_len, .get_item = subset_get_item, .destroy = subset_destroy};
  pd_io_dataset *out = pd_io_dataset_new(&fns, s);
  if (!out) subset_destroy(s);
  return out;
}

/* Python's math.isclose(a, b) with its default rel_tol 1e-9 */
static bool isclose(double a, double b) { return fabs(a - b) <= 1e-9 * fmax(fabs(a), fabs(b)); }

pd_status pd_io_random_split(pd_io_dataset *ds, const double *lengths, int n, uint64_t seed,
                             pd_io_dataset **out) {
  if (!ds || !lengths || n < 1 || !out)
    return pd_set_error(PD_ERR_INVALID,
                        "random_split: needs a dataset, n >= 1 lengths and room for the splits "
                        "(n = %d)",
                        n);
  for (int i = 0; i < n; i++) out[i] = NULL;
  int64_t len = pd_io_dataset_len(ds);
  if (len < 0) return (pd_status)len;
  int64_t *counts = calloc((size_t)n, sizeof *counts);
  int64_t *perm = malloc((size_t)(len > 0 ? len : 1) * sizeof *perm);
  pd_status st = PD_OK;
  if (!counts || !perm) {
    st = pd_set_error(PD_ERR_MEMORY, "random_split: out of memory");
    goto done;
  }
  double sum = 0;
  for (int i = 0; i < n; i++) sum += lengths[i];
  if (isclose(sum, 1) && sum <= 1) { /* fractions */
    int64_t total = 0;
    for (int i = 0; i < n; i++) {
      if (!(lengths[i] >= 0 && lengths[i] <= 1)) {
        st = pd_set_error(PD_ERR_INVALID, "random_split: Fraction at index %d (%g) is not between 0 and 1", i,
                          lengths[i]);
        goto done;
      }
      counts[i] = (int64_t)floor((double)len * lengths[i]);
      total += counts[i];
    }
    for (int64_t i = 0; i < len - total; i++) counts[i % n] += 1;
  } else {
    for (int i = 0; i < n; i++) {
      if (!(lengths[i] >= 0) || lengths[i] != floor(lengths[i]) || lengths[i] > 9.0e18) {
        st = pd_set_error(PD_ERR_INVALID, "random_split: length at index %d (%g) is not a count >= 0", i,
                          lengths[i]);
        goto done;
      }
      counts[i] = (int64_t)lengths[i];
    }
  }
  int64_t total = 0;
  for (int i = 0; i < n; i++) total += counts[i];
  if (total != len) {
    st = pd_set_error(
        PD_ERR_INVALID,
        "random_split: Sum of input lengths (%lld) does not equal the length of the input dataset "
        "(%lld)",
        (long long)total, (long long)len);
    goto done;
  }
  st = pd_io_permutation(len, seed, perm);
  if (st < 0) goto done;
  int64_t off = 0;
  for (int i = 0; i < n; i++) {
    out[i] = pd_io_subset(ds, perm + off, counts[i]);
    if (!out[i]) {
      st = pd_last_status();
      for (int k = 0; k < i; k++) {
        pd_io_dataset_release(out[k]);
        out[k] = NULL;
      }
      goto done;
    }
    off += counts[i];
  }
done:
  free(counts);
  free(perm);
  return st;
}
