/* paddle.io.SequenceSampler and RandomSampler; what all samplers share. */
#include <stdlib.h>
#include <string.h>

#include "io_internal.h"

void *pd_io_sampler_alloc(size_t size, const pd_io_sampler *proto) {
  pd_io_sampler *s = calloc(1, size);
  if (!s) {
    pd_set_error(PD_ERR_MEMORY, "%s: out of memory", proto->name);
    return NULL;
  }
  *s = *proto;
  atomic_init(&s->refcount, 1);
  return s;
}

pd_io_sampler *pd_io_sampler_retain(pd_io_sampler *s) {
  if (s) atomic_fetch_add(&s->refcount, 1);
  return s;
}

void pd_io_sampler_release(pd_io_sampler *s) {
  if (!s || atomic_fetch_sub(&s->refcount, 1) != 1) return;
  if (s->destroy) s->destroy(s);
  free(s);
}

bool pd_io_sampler_is_batch(const pd_io_sampler *s) { return s && s->is_batch; }

int64_t pd_io_sampler_len(pd_io_sampler *s) {
  if (!s) return pd_set_error(PD_ERR_INVALID, "Sampler: len of NULL");
  return s->len(s);
}

void pd_io_epoch_free(pd_io_epoch *e) {
  if (!e) return;
  free(e->indices);
  free(e->offsets);
  *e = (pd_io_epoch){0};
}

pd_status pd_io_sampler_epoch(pd_io_sampler *s, pd_io_epoch *e) {
  if (!e) return pd_set_error(PD_ERR_INVALID, "Sampler: epoch needs somewhere to write");
  *e = (pd_io_epoch){0};
  if (!s) return pd_set_error(PD_ERR_INVALID, "Sampler: epoch of NULL");
  pd_status st = s->epoch(s, e);
  if (st < 0) pd_io_epoch_free(e);
  return st;
}

pd_status pd_io_epoch_batch(pd_io_epoch *e, int64_t batch_size, bool drop_last) {
  int64_t nb = e->num_indices / batch_size;
  if (!drop_last && e->num_indices % batch_size) nb++;
  e->offsets = malloc((size_t)(nb + 1) * sizeof *e->offsets);
  if (!e->offsets) return pd_set_error(PD_ERR_MEMORY, "BatchSampler: out of memory");
  for (int64_t b = 0; b < nb; b++) e->offsets[b] = b * batch_size;
  e->offsets[nb] = nb * batch_size < e->num_indices ? nb * batch_size : e->num_indices;
  e->num_batches = nb;
  return PD_OK;
}

static pd_status alloc_indices(pd_io_epoch *e, int64_t n, const char *who) {
  e->indices = malloc((size_t)(n > 0 ? n : 1) * sizeof *e->indices);
  if (!e->indices)
    return pd_set_error(PD_ERR_MEMORY, "%s: out of memory for %lld indices", who, (long long)n);
  e->num_indices = n;
  return PD_OK;
}

/* ---- SequenceSampler ---------------------------------------------------------- */
typedef struct seq_sampler {
  pd_io_sampler base;
  pd_io_dataset *ds;
} seq_sampler;

static int64_t seq_len(pd_io_sampler *s) { return pd_io_dataset_len(((seq_sampler *)s)->ds); }

static pd_status seq_epoch(pd_io_sampler *s, pd_io_epoch *e) {
  int64_t n = seq_len(s);
  if (n < 0) return (pd_status)n;
  if (alloc_indices(e, n, s->name) < 0) return pd_last_status();
  for (int64_t i = 0; i < n; i++) e->indices[i] = i;
  return PD_OK;
}

static void seq_destroy(pd_io_sampler *s) { pd_io_dataset_release(((seq_sampler *)s)->ds); }

static bool check_map_style(pd_io_dataset *ds, const char *who) {
  if (!ds) {
    pd_set_error(PD_ERR_INVALID, "%s: needs a dataset (got NULL)", who);
    return false;
  }
  if (pd_io_dataset_is_iterable(ds)) {
    pd_set_error(PD_ERR_INVALID, "%s: the dataset is iterable and has no len", who);
    return false;
  }
  return true;
}

pd_io_sampler *pd_io_sequence_sampler(pd_io_dataset *ds) {
  static const pd_io_sampler proto = {
      .name = "SequenceSampler", .len = seq_len, .epoch = seq_epoch, .destroy = seq_destroy};
  if (!check_map_style(ds, proto.name)) return NULL;
  seq_sampler *s = pd_io_sampler_alloc(sizeof *s, &proto);
  if (!s) return NULL;
  s->ds = pd_io_dataset_retain(ds);
  return &s->base;
}

/* ---- RandomSampler ------------------------------------------------------------ */
typedef struct random_sampler {
  pd_io_sampler base;
  pd_io_dataset *ds;
  bool replacement;
  int64_t num_samples; /* 0: len(ds) */
} random_sampler;

static int64_t rand_len(pd_io_sampler *s) {
  random_sampler *r = (random_sampler *)s;
  return r->num_samples ? r->num_samples : pd_io_dataset_len(r->ds);
}

static pd_status rand_epoch(pd_io_sampler *s, pd_io_epoch *e) {
  random_sampler *r = (random_sampler *)s;
  int64_t n = pd_io_dataset_len(r->ds);
  if (n < 0) return (pd_status)n;
  int64_t m = r->num_samples ? r->num_samples : n;
  if (m <= 0 || n <= 0)
    return pd_set_error(PD_ERR_INVALID,
                        "RandomSampler: nothing to draw from (%lld samples, num_samples %lld)", (long long)n,
                        (long long)m);
  if (!r->replacement && m > n)
    return pd_set_error(PD_ERR_INVALID,
                        "RandomSampler: num_samples (%lld) > len(data_source) (%lld) without replacement",
                        (long long)m, (long long)n);
  if (r->replacement) {
    if (alloc_indices(e, m, s->name) < 0) return pd_last_status();
    return pd_io_randint(n, m, e->indices);
  }
  if (alloc_indices(e, n, s->name) < 0) return pd_last_status();
  pd_status st = pd_io_permutation(n, 0, e->indices);
  e->num_indices = m; /* numpy.random.choice(n, m, replace=False): a permutation's prefix */
  return st;
}

static void rand_destroy(pd_io_sampler *s) { pd_io_dataset_release(((random_sampler *)s)->ds); }

pd_io_sampler *pd_io_random_sampler(pd_io_dataset *ds, bool replacement, int64_t num_samples) {
  static const pd_io_sampler proto = {
      .name = "RandomSampler", .len = rand_len, .epoch = rand_epoch, .destroy = rand_destroy};
  if (!check_map_style(ds, proto.name)) return NULL;
  int64_t n = pd_io_dataset_len(ds);
  if (n < 0) return NULL;
  int64_t m = num_samples ? num_samples : n;
  if (!replacement && m > n) {
    pd_set_error(PD_ERR_INVALID,
                 "RandomSampler: num_samples should be smaller than or equal to length of data_source when "
                 "replacement is False, but got num_samples: %lld > data_source: %lld",
                 (long long)m, (long long)n);
    return NULL;
  }
  if (m <= 0) {
    pd_set_error(PD_ERR_INVALID,
                 "RandomSampler: num_samples should be a positive integer, but got num_samples=%lld",
                 (long long)m);
    return NULL;
  }
  random_sampler *s = pd_io_sampler_alloc(sizeof *s, &proto);
  if (!s) return NULL;
  s->ds = pd_io_dataset_retain(ds);
  s->replacement = replacement;
  s->num_samples = num_samples;
  return &s->base;
}
