/* paddle.io.BatchSampler: groups a sampler's indices into batches. */
#include "io_internal.h"

typedef struct batch_sampler {
  pd_io_sampler base;
  pd_io_sampler *inner;
  int64_t batch_size;
  bool drop_last;
} batch_sampler;

static int64_t bs_len(pd_io_sampler *s) {
  batch_sampler *b = (batch_sampler *)s;
  int64_t n = pd_io_sampler_len(b->inner);
  if (n < 0) return n;
  if (!b->drop_last) n += b->batch_size - 1;
  return n / b->batch_size;
}

static pd_status bs_epoch(pd_io_sampler *s, pd_io_epoch *e) {
  batch_sampler *b = (batch_sampler *)s;
  pd_status st = b->inner->epoch(b->inner, e);
  if (st < 0) return st;
  return pd_io_epoch_batch(e, b->batch_size, b->drop_last);
}

static void bs_destroy(pd_io_sampler *s) { pd_io_sampler_release(((batch_sampler *)s)->inner); }

pd_io_sampler *pd_io_batch_sampler(pd_io_dataset *ds, pd_io_sampler *sampler, bool shuffle,
                                   int64_t batch_size, bool drop_last) {
  static const pd_io_sampler proto = {
      .is_batch = true, .name = "BatchSampler", .len = bs_len, .epoch = bs_epoch, .destroy = bs_destroy};
  if (batch_size <= 0) {
    pd_set_error(PD_ERR_INVALID, "BatchSampler: batch_size should be a positive integer, but got %lld",
                 (long long)batch_size);
    return NULL;
  }
  pd_io_sampler *inner = NULL;
  if (!ds) {
    if (!sampler) {
      pd_set_error(PD_ERR_INVALID, "BatchSampler: either dataset or sampler should be set");
      return NULL;
    }
    if (sampler->is_batch) {
      pd_set_error(PD_ERR_INVALID, "BatchSampler: sampler is a batch sampler (%s), not a sampler of indices",
                   sampler->name);
      return NULL;
    }
    if (shuffle) {
      pd_set_error(PD_ERR_INVALID, "BatchSampler: shuffle should be False when sampler is set");
      return NULL;
    }
    inner = pd_io_sampler_retain(sampler);
  } else {
    if (sampler) {
      pd_set_error(PD_ERR_INVALID, "BatchSampler: should not set both dataset and sampler");
      return NULL;
    }
    if (pd_io_dataset_is_iterable(ds)) {
      pd_set_error(PD_ERR_INVALID, "BatchSampler: dataset should not be a paddle.io.IterableDataset");
      return NULL;
    }
    inner = shuffle ? pd_io_random_sampler(ds, false, 0) : pd_io_sequence_sampler(ds);
    if (!inner) return NULL;
  }
  batch_sampler *b = pd_io_sampler_alloc(sizeof *b, &proto);
  if (!b) {
    pd_io_sampler_release(inner);
    return NULL;
  }
  b->inner = inner;
  b->batch_size = batch_size;
  b->drop_last = drop_last;
  return &b->base;
}
