/* paddle.io.TensorDataset: samples are rows (dim 0) of a list of tensors. */
#include <stdlib.h>

#include "io_internal.h"

typedef struct tensor_dataset {
  int n;
  int64_t len;
  pd_tensor *t[PD_IO_MAX_FIELDS];
} tensor_dataset;

static int64_t td_len(void *user) { return ((tensor_dataset *)user)->len; }

static int td_get_item(void *user, int64_t index, pd_tensor **out, int max_out) {
  tensor_dataset *d = user;
  if (d->n > max_out)
    return pd_set_error(PD_ERR_INVALID, "TensorDataset: %d fields for room of %d", d->n, max_out);
  if (index < 0 || index >= d->len)
    return pd_set_error(PD_ERR_INDEX, "TensorDataset: index %lld out of range [0, %lld)", (long long)index,
                        (long long)d->len);
  for (int k = 0; k < d->n; k++) {
    const pd_tensor *t = d->t[k];
    /* t[index]: a view dropping dim 0 */
    out[k] =
        pd_tensor_new_view(t, t->ndim - 1, t->shape + 1, t->strides + 1, t->offset + index * t->strides[0]);
    if (!out[k]) return pd_last_status();
  }
  return d->n;
}

static void td_destroy(void *user) {
  tensor_dataset *d = user;
  for (int k = 0; k < d->n; k++) pd_tensor_release(d->t[k]);
  free(d);
}

pd_io_dataset *pd_io_tensor_dataset(pd_tensor *const *tensors, int n) {
  if (n < 1 || n > PD_IO_MAX_FIELDS || !tensors) {
    pd_set_error(PD_ERR_INVALID, "TensorDataset: needs 1 to %d tensors, got %d", PD_IO_MAX_FIELDS, n);
    return NULL;
  }
  for (int k = 0; k < n; k++) {
    if (!tensors[k]) {
      if (pd_last_status() == PD_OK) pd_set_error(PD_ERR_INVALID, "TensorDataset: tensor %d is NULL", k);
      return NULL;
    }
    if (tensors[k]->ndim < 1) {
      pd_set_error(PD_ERR_SHAPE, "TensorDataset: tensor %d is 0-D (shape []); samples index dim 0", k);
      return NULL;
    }
    if (tensors[k]->shape[0] != tensors[0]->shape[0]) {
      pd_set_error(PD_ERR_SHAPE,
                   "TensorDataset: tensors not have same shape of the 1st dimension: tensor 0 has shape %s, "
                   "tensor %d has shape %s",
                   PD_SHAPE_STR(tensors[0]), k, PD_SHAPE_STR(tensors[k]));
      return NULL;
    }
  }
  tensor_dataset *d = calloc(1, sizeof *d);
  if (!d) {
    pd_set_error(PD_ERR_MEMORY, "TensorDataset: out of memory");
    return NULL;
  }
  d->n = n;
  d->len = tensors[0]->shape[0];
  for (int k = 0; k < n; k++) d->t[k] = pd_tensor_retain(tensors[k]);
  pd_io_dataset_fns fns = {.len = td_len, .get_item = td_get_item, .destroy = td_destroy};
  pd_io_dataset *ds = pd_io_dataset_new(&fns, d);
  if (!ds) td_destroy(d);
  return ds;
}
