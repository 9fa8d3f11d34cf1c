/* paddle.io.DistributedBatchSampler: each replica's share of the batches,
 * with Paddle's padding, shuffling and subsampling. */
#include <stdlib.h>
#include <string.h>

#include "io_internal.h"

typedef struct dist_sampler {
  pd_io_sampler base;
  pd_io_dataset *ds;
  int64_t batch_size;
  int nranks, rank;
  bool shuffle, drop_last;
  int64_t epoch;
  int64_t num_samples, total_size; /* per replica, padded total */
} dist_sampler;

static int64_t dist_len(pd_io_sampler *s) {
  dist_sampler *d = (dist_sampler *)s;
  int64_t n = d->num_samples;
  if (!d->drop_last) n += d->batch_size - 1;
  return n / d->batch_size;
}

static pd_status dist_epoch(pd_io_sampler *s, pd_io_epoch *e) {
  dist_sampler *d = (dist_sampler *)s;
  int64_t len = pd_io_dataset_len(d->ds);
  if (len < 0) return (pd_status)len;
  if ((len + d->nranks - 1) / d->nranks != d->num_samples)
    return pd_set_error(PD_ERR_STATE,
                        "DistributedBatchSampler: the dataset's length changed from %lld to %lld",
                        (long long)(d->num_samples * d->nranks), (long long)len);
  int64_t total = d->total_size;
  int64_t *all = malloc((size_t)(total > 0 ? total : 1) * sizeof *all);
  e->indices = malloc((size_t)(d->num_samples > 0 ? d->num_samples : 1) * sizeof *e->indices);
  if (!all || !e->indices) {
    free(all);
    return pd_set_error(PD_ERR_MEMORY, "DistributedBatchSampler: out of memory for %lld indices",
                        (long long)total);
  }
  /* indices + indices[:padding] (repeated as often as needed) */
  for (int64_t i = 0; i < total; i++) all[i] = i % len;
  if (d->shuffle) {
    if (d->epoch < 0 || d->epoch > 0xffffffffLL) {
      free(all);
      return pd_set_error(PD_ERR_INVALID, "DistributedBatchSampler: epoch %lld is not a seed in [0, 2^32)",
                          (long long)d->epoch);
    }
    pd_mt19937 mt;
    pd_mt19937_seed(&mt, (uint32_t)d->epoch);
    pd_numpy_shuffle_i64(&mt, all, total);
    d->epoch++;
  }
  if (d->nranks > 1) {
    int64_t bs = d->batch_size, k = 0;
    int64_t last_batch = total % (bs * d->nranks), last_local = last_batch / d->nranks;
    for (int64_t i = d->rank * bs; i < total - last_batch; i += bs * d->nranks)
      for (int64_t j = i; j < i + bs; j++) e->indices[k++] = all[j];
    const int64_t *tail = all + (total - last_batch);
    for (int64_t j = d->rank * last_local; j < (d->rank + 1) * last_local; j++) e->indices[k++] = tail[j];
  } else if (total) {
    memcpy(e->indices, all, (size_t)total * sizeof *all);
  }
  free(all);
  e->num_indices = d->num_samples;
  return pd_io_epoch_batch(e, d->batch_size, d->drop_last);
}

static void dist_destroy(pd_io_sampler *s) { pd_io_dataset_release(((dist_sampler *)s)->ds); }

static int env_int(const char *name, int dflt) {
  const char *v = getenv(name);
  if (!v || !*v) return dflt;
  char *end;
  long x = strtol(v, &end, 10);
  return (*end || x < -1000000000L || x > 1000000000L) ? -2 : (int)x;
}

pd_io_sampler *pd_io_distributed_batch_sampler(pd_io_dataset *ds, int64_t batch_size, int num_replicas,
                                               int rank, bool shuffle, bool drop_last) {
  static const pd_io_sampler proto = {.is_batch = true,
                                      .name = "DistributedBatchSampler",
                                      .len = dist_len,
                                      .epoch = dist_epoch,
                                      .destroy = dist_destroy};
  if (!ds || pd_io_dataset_is_iterable(ds)) {
    pd_set_error(PD_ERR_INVALID, "DistributedBatchSampler: needs a map-style dataset (got %s)",
                 ds ? "an iterable one" : "NULL");
    return NULL;
  }
  if (batch_size <= 0) {
    pd_set_error(PD_ERR_INVALID,
                 "DistributedBatchSampler: batch_size should be a positive integer, but got %lld",
                 (long long)batch_size);
    return NULL;
  }
  if (num_replicas == -1) num_replicas = env_int("PADDLE_TRAINERS_NUM", 1);
  if (rank == -1) rank = env_int("PADDLE_TRAINER_ID", 0);
  if (num_replicas <= 0) {
    pd_set_error(PD_ERR_INVALID,
                 "DistributedBatchSampler: num_replicas should be a positive integer, but got %d",
                 num_replicas);
    return NULL;
  }
  if (rank < 0 || rank >= num_replicas) {
    pd_set_error(PD_ERR_INVALID, "DistributedBatchSampler: rank %d out of range [0, %d)", rank, num_replicas);
    return NULL;
  }
  int64_t len = pd_io_dataset_len(ds);
  if (len < 0) return NULL;
  dist_sampler *d = pd_io_sampler_alloc(sizeof *d, &proto);
  if (!d) return NULL;
  d->ds = pd_io_dataset_retain(ds);
  d->batch_size = batch_size;
  d->nranks = num_replicas;
  d->rank = rank;
  d->shuffle = shuffle;
  d->drop_last = drop_last;
  d->num_samples = (len + num_replicas - 1) / num_replicas;
  d->total_size = d->num_samples * num_replicas;
  return &d->base;
}

pd_status pd_io_distributed_batch_sampler_set_epoch(pd_io_sampler *s, int64_t epoch) {
  if (!s || s->epoch != dist_epoch)
    return pd_set_error(PD_ERR_INVALID, "set_epoch: needs a DistributedBatchSampler (got %s)",
                        s ? s->name : "NULL");
  if (epoch < 0 || epoch > 0xffffffffLL)
    return pd_set_error(PD_ERR_INVALID, "set_epoch: epoch %lld is not a seed in [0, 2^32)", (long long)epoch);
  ((dist_sampler *)s)->epoch = epoch;
  return PD_OK;
}
