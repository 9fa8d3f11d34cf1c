/* A tensor taking over another's data in place (Layer.to(dtype)): the
 * tensor object (its identity, name, parameter info, stop_gradient) stays,
 * its storage, dtype and geometry become the source's. */
#include <string.h>

#include "core_internal.h"

void pd_tensor_take_data(pd_tensor *t, pd_tensor *src) {
  pd_storage *s = t->storage;
  int64_t off = t->offset;
  pd_dtype dt = t->dtype;
  bool meta = t->is_meta;
  t->is_meta = src->is_meta;
  src->is_meta = meta;
  t->storage = src->storage;
  t->offset = src->offset;
  t->dtype = src->dtype;
  t->ndim = src->ndim;
  t->numel = src->numel;
  t->is_contiguous = src->is_contiguous;
  memcpy(t->shape, src->shape, sizeof t->shape);
  memcpy(t->strides, src->strides, sizeof t->strides);
  /* src keeps t's old storage with its dtype, so releasing it frees that */
  src->storage = s;
  src->offset = off;
  src->dtype = dt;
  if (t->storage) t->storage->version++;
}
