/* paddle.io.DataLoader: batches from a dataset in the batch sampler's order,
 * loaded in the calling thread or ahead of time by worker threads.
 *
 * Workers take batch numbers in order (at most `cap` ahead of the one the
 * caller waits for) and leave each result in slot seq % cap; the caller
 * takes the slots in order, so the batch order never depends on the number
 * of workers or on which finishes first. Each epoch has a generation
 * number: a result of an abandoned epoch (reset, error) is dropped by the
 * worker that made it. */
#include <omp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "io_internal.h"

typedef struct result {
  bool ready, end;
  int64_t seq;
  int n; /* fields, or a negative status (err holds the message) */
  pd_tensor *t[PD_IO_MAX_FIELDS];
  char *err;
} result;

struct pd_io_loader {
  pd_io_dataset *ds;
  pd_io_sampler *bsampler; /* NULL for iterable datasets */
  bool iterable, auto_collate, drop_last;
  int64_t batch_size; /* iterable datasets: samples per batch */
  pd_io_collate_fn collate;
  void *collate_user;
  int num_workers, cap;

  /* the epoch (guarded by mu when workers run) */
  bool in_epoch;
  pd_io_epoch ep;
  uint64_t gen;
  int64_t next_dispatch, next_consume;
  bool dispatch_ended; /* iterable: the producer met the end or an error */

  result *slots;
  pthread_mutex_t mu;
  pthread_cond_t cv_work, cv_ready;
  pthread_t *threads;
  int nthreads;
  bool stop;
};

static void result_clear(result *r) {
  for (int k = 0; k < r->n; k++) pd_tensor_release(r->t[k]);
  free(r->err);
  *r = (result){0};
}

static void result_fail(result *r) {
  r->n = pd_last_status() != PD_OK ? pd_last_status() : PD_ERR_STATE;
  const char *m = pd_last_error();
  r->err = strdup(m[0] ? m : "DataLoader: loading failed with no message");
}

/* Collates samples[batch * nf] (owned; released here) into r. */
static void collate_into(pd_io_loader *l, pd_tensor **samples, int64_t batch, int nf, result *r) {
  int n;
  if (l->collate)
    n = pd_io_run_collate(l->collate, l->collate_user, samples, batch, nf, r->t, PD_IO_MAX_FIELDS);
  else if (!l->auto_collate) { /* batch_size None: the sample as it is */
    for (int k = 0; k < nf; k++) r->t[k] = pd_tensor_retain(samples[k]);
    n = nf;
  } else
    n = pd_io_default_collate(samples, batch, nf, r->t, PD_IO_MAX_FIELDS);
  for (int64_t i = 0; i < batch * nf; i++) pd_tensor_release(samples[i]);
  if (n < 0)
    result_fail(r);
  else
    r->n = n;
}

/* Fetches samples idx[0..n) and collates them. */
static void load_batch(pd_io_loader *l, const int64_t *idx, int64_t n, result *r) {
  pd_tensor **samples = malloc((size_t)(n > 0 ? n : 1) * PD_IO_MAX_FIELDS * sizeof *samples);
  if (!samples) {
    pd_set_error(PD_ERR_MEMORY, "DataLoader: out of memory for a batch of %lld", (long long)n);
    result_fail(r);
    return;
  }
  int nf = 0;
  for (int64_t i = 0; i < n; i++) {
    pd_tensor *buf[PD_IO_MAX_FIELDS];
    int got = pd_io_fetch_item(l->ds, idx[i], buf, PD_IO_MAX_FIELDS);
    if (got >= 0 && i > 0 && got != nf) {
      for (int k = 0; k < got; k++) pd_tensor_release(buf[k]);
      got = pd_set_error(PD_ERR_INVALID, "DataLoader: sample %lld has %d fields but sample %lld has %d",
                         (long long)idx[i], got, (long long)idx[0], nf);
    }
    if (got < 0) {
      result_fail(r);
      for (int64_t j = 0; j < i * nf; j++) pd_tensor_release(samples[j]);
      free(samples);
      return;
    }
    nf = got;
    for (int k = 0; k < nf; k++) samples[i * nf + k] = buf[k];
  }
  collate_into(l, samples, n, nf, r);
  free(samples);
}

/* Iterable datasets: up to batch_size samples from next(); r->end when
 * none is left (or only a short batch under drop_last). */
static void load_iterable(pd_io_loader *l, result *r) {
  int64_t want = l->auto_collate ? l->batch_size : 1, got = 0;
  pd_tensor **samples = malloc((size_t)want * PD_IO_MAX_FIELDS * sizeof *samples);
  if (!samples) {
    pd_set_error(PD_ERR_MEMORY, "DataLoader: out of memory for a batch of %lld", (long long)want);
    result_fail(r);
    return;
  }
  int nf = 0;
  while (got < want) {
    pd_tensor *buf[PD_IO_MAX_FIELDS];
    int k = pd_io_fetch_next(l->ds, buf, PD_IO_MAX_FIELDS);
    if (k == 0) break;
    if (k > 0 && got > 0 && k != nf) {
      for (int j = 0; j < k; j++) pd_tensor_release(buf[j]);
      k = pd_set_error(PD_ERR_INVALID,
                       "DataLoader: sample %lld of the batch has %d fields but sample 0 has %d",
                       (long long)got, k, nf);
    }
    if (k < 0) {
      result_fail(r);
      for (int64_t j = 0; j < got * nf; j++) pd_tensor_release(samples[j]);
      free(samples);
      return;
    }
    nf = k;
    for (int j = 0; j < nf; j++) samples[got * nf + j] = buf[j];
    got++;
  }
  if (got == 0 || (l->drop_last && got < want)) {
    for (int64_t j = 0; j < got * nf; j++) pd_tensor_release(samples[j]);
    r->end = true;
  } else {
    collate_into(l, samples, got, nf, r);
  }
  free(samples);
}

/* ---- workers ---------------------------------------------------------------------- */
static bool can_dispatch(const pd_io_loader *l) {
  if (!l->in_epoch || l->next_dispatch >= l->next_consume + l->cap) return false;
  return l->iterable ? !l->dispatch_ended : l->next_dispatch < l->ep.num_batches;
}

static void *worker_main(void *arg) {
  pd_io_loader *l = arg;
  /* workers run side by side with the training thread: ops they call stay
   * on one thread each rather than each starting an OpenMP team */
  omp_set_num_threads(1);
  int64_t *idx = NULL, idx_cap = 0;
  pthread_mutex_lock(&l->mu);
  for (;;) {
    while (!l->stop && !can_dispatch(l)) pthread_cond_wait(&l->cv_work, &l->mu);
    if (l->stop) break;
    int64_t seq = l->next_dispatch++;
    uint64_t gen = l->gen;
    int64_t n = 0;
    bool oom = false;
    if (!l->iterable) { /* copy the batch's indices: the epoch may be replaced meanwhile */
      n = l->ep.offsets[seq + 1] - l->ep.offsets[seq];
      if (n > idx_cap) {
        int64_t *p = realloc(idx, (size_t)n * sizeof *idx);
        if (p) {
          idx = p;
          idx_cap = n;
        } else {
          oom = true;
        }
      }
      if (!oom) memcpy(idx, l->ep.indices + l->ep.offsets[seq], (size_t)n * sizeof *idx);
    }
    pthread_mutex_unlock(&l->mu);

    result r = {0};
    if (oom) {
      pd_set_error(PD_ERR_MEMORY, "DataLoader: out of memory for a batch of %lld", (long long)n);
      result_fail(&r);
    } else if (l->iterable) {
      /* the only producer of an iterable dataset starts each pass itself */
      if (seq == 0 && pd_io_dataset_reset(l->ds) < 0)
        result_fail(&r);
      else
        load_iterable(l, &r);
    } else {
      load_batch(l, idx, n, &r);
    }

    pthread_mutex_lock(&l->mu);
    if (gen == l->gen && !l->stop) {
      r.ready = true;
      r.seq = seq;
      l->slots[seq % l->cap] = r;
      if (l->iterable && (r.end || r.n < 0)) l->dispatch_ended = true;
      pthread_cond_broadcast(&l->cv_ready);
    } else { /* an abandoned epoch's batch */
      pthread_mutex_unlock(&l->mu);
      result_clear(&r);
      pthread_mutex_lock(&l->mu);
    }
  }
  pthread_mutex_unlock(&l->mu);
  free(idx);
  return NULL;
}

/* Ends the epoch and drops what was loaded ahead; the caller holds mu. */
static void abandon_locked(pd_io_loader *l) {
  l->in_epoch = false;
  l->gen++;
  for (int i = 0; i < l->cap; i++)
    if (l->slots[i].ready) result_clear(&l->slots[i]);
}

/* ---- epochs --------------------------------------------------------------------- */
static pd_status start_epoch(pd_io_loader *l) {
  pd_io_epoch ep = {0};
  if (!l->iterable) {
    pd_status st = pd_io_sampler_epoch(l->bsampler, &ep);
    if (st < 0) return st;
  } else if (l->num_workers == 0) {
    pd_status st = pd_io_dataset_reset(l->ds);
    if (st < 0) return st;
  }
  if (l->num_workers) pthread_mutex_lock(&l->mu);
  pd_io_epoch old = l->ep;
  l->ep = ep;
  l->gen++;
  l->next_dispatch = l->next_consume = 0;
  l->dispatch_ended = false;
  l->in_epoch = true;
  if (l->num_workers) {
    pthread_cond_broadcast(&l->cv_work);
    pthread_mutex_unlock(&l->mu);
  }
  pd_io_epoch_free(&old);
  return PD_OK;
}

/* The next result in order: 1 with *r filled, 0 at the end of the epoch. */
static int take_next(pd_io_loader *l, result *r) {
  *r = (result){0};
  if (l->num_workers == 0) {
    if (l->iterable) {
      load_iterable(l, r);
    } else {
      int64_t b = l->next_consume;
      if (b >= l->ep.num_batches) {
        l->in_epoch = false;
        return 0;
      }
      load_batch(l, l->ep.indices + l->ep.offsets[b], l->ep.offsets[b + 1] - l->ep.offsets[b], r);
    }
    l->next_consume++;
    if (r->end || r->n < 0) l->in_epoch = false;
    return r->end ? 0 : 1;
  }
  pthread_mutex_lock(&l->mu);
  if (!l->iterable && l->next_consume >= l->ep.num_batches) {
    l->in_epoch = false;
    pthread_mutex_unlock(&l->mu);
    return 0;
  }
  result *slot = &l->slots[l->next_consume % l->cap];
  while (!(slot->ready && slot->seq == l->next_consume)) pthread_cond_wait(&l->cv_ready, &l->mu);
  *r = *slot;
  *slot = (result){0};
  l->next_consume++;
  if (r->end || r->n < 0) /* the epoch is over: drop what was loaded ahead */
    abandon_locked(l);
  else
    pthread_cond_broadcast(&l->cv_work);
  pthread_mutex_unlock(&l->mu);
  return r->end ? 0 : 1;
}

int pd_io_loader_next(pd_io_loader *l, pd_tensor **batch, int max) {
  if (!l) return pd_set_error(PD_ERR_INVALID, "DataLoader: next on NULL");
  if (!batch || max < 1)
    return pd_set_error(PD_ERR_INVALID, "DataLoader: no room for the batch (max %d)", max);
  if (!l->in_epoch) {
    pd_status st = start_epoch(l);
    if (st < 0) return st;
  }
  result r;
  if (take_next(l, &r) == 0) return 0;
  if (r.n < 0) {
    int st = r.n;
    pd_set_error(st, "%s", r.err);
    free(r.err);
    return st;
  }
  if (r.n > max) {
    int n = r.n;
    result_clear(&r);
    pd_io_loader_reset(l);
    return pd_set_error(PD_ERR_INVALID, "DataLoader: the batch has %d fields but there is room for %d", n,
                        max);
  }
  for (int k = 0; k < r.n; k++) batch[k] = pd_scope_track(r.t[k]);
  return r.n;
}

pd_status pd_io_loader_reset(pd_io_loader *l) {
  if (!l) return pd_set_error(PD_ERR_INVALID, "DataLoader: reset on NULL");
  if (l->num_workers == 0) {
    l->in_epoch = false;
    return PD_OK;
  }
  pthread_mutex_lock(&l->mu);
  abandon_locked(l);
  pthread_mutex_unlock(&l->mu);
  return PD_OK;
}

int64_t pd_io_loader_len(pd_io_loader *l) {
  if (!l) return pd_set_error(PD_ERR_INVALID, "DataLoader: len of NULL");
  if (l->iterable) return pd_set_error(PD_ERR_INVALID, "DataLoader: length of IterableDataset not supported");
  if (!l->auto_collate) return pd_io_dataset_len(l->ds);
  return pd_io_sampler_len(l->bsampler);
}

void pd_io_loader_release(pd_io_loader *l) {
  if (!l) return;
  if (l->nthreads) {
    pthread_mutex_lock(&l->mu);
    l->stop = true;
    pthread_cond_broadcast(&l->cv_work);
    pthread_mutex_unlock(&l->mu);
    for (int i = 0; i < l->nthreads; i++) pthread_join(l->threads[i], NULL);
  }
  if (l->num_workers) {
    for (int i = 0; l->slots && i < l->cap; i++)
      if (l->slots[i].ready) result_clear(&l->slots[i]);
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->cv_work);
    pthread_cond_destroy(&l->cv_ready);
  }
  free(l->slots);
  free(l->threads);
  pd_io_epoch_free(&l->ep);
  pd_io_sampler_release(l->bsampler);
  pd_io_dataset_release(l->ds);
  free(l);
}

pd_io_loader *pd_io_data_loader(pd_io_dataset *ds, const pd_io_data_loader_opts *opts) {
  static const pd_io_data_loader_opts defaults = {0};
  const pd_io_data_loader_opts *o = opts ? opts : &defaults;
  if (!ds) {
    pd_set_error(PD_ERR_INVALID, "DataLoader: dataset is NULL");
    return NULL;
  }
  if (o->batch_size < -1) {
    pd_set_error(PD_ERR_INVALID,
                 "DataLoader: batch_size should be a positive integer (or -1 for None), got %lld",
                 (long long)o->batch_size);
    return NULL;
  }
  if (o->num_workers < 0 || o->num_workers > 1024) {
    pd_set_error(PD_ERR_INVALID, "DataLoader: num_workers should be in [0, 1024], got %d", o->num_workers);
    return NULL;
  }
  if (o->prefetch_factor < 0 || o->prefetch_factor > 1024) {
    pd_set_error(PD_ERR_INVALID, "DataLoader: prefetch_factor should be positive, got %d",
                 o->prefetch_factor);
    return NULL;
  }
  bool iterable = pd_io_dataset_is_iterable(ds);
  if (o->batch_sampler) {
    if (o->batch_size != 0 || o->shuffle || o->drop_last) {
      pd_set_error(PD_ERR_INVALID,
                   "DataLoader: batch_size, shuffle and drop_last should not be set when "
                   "batch_sampler is specified");
      return NULL;
    }
    if (!pd_io_sampler_is_batch(o->batch_sampler)) {
      pd_set_error(PD_ERR_INVALID, "DataLoader: batch_sampler is a %s, not a batch sampler",
                   o->batch_sampler->name);
      return NULL;
    }
  }
  if (iterable && (o->shuffle || o->batch_sampler)) {
    pd_set_error(PD_ERR_INVALID, "DataLoader: IterableDataset not support %s",
                 o->shuffle ? "shuffle" : "batch_sampler");
    return NULL;
  }
  if (o->batch_size == -1 && o->shuffle) {
    pd_set_error(PD_ERR_INVALID, "DataLoader: shuffle needs batching (batch_size is None)");
    return NULL;
  }
  pd_io_loader *l = calloc(1, sizeof *l);
  if (!l) {
    pd_set_error(PD_ERR_MEMORY, "DataLoader: out of memory");
    return NULL;
  }
  l->ds = pd_io_dataset_retain(ds);
  l->iterable = iterable;
  l->auto_collate = o->batch_size != -1;
  l->batch_size = o->batch_size > 0 ? o->batch_size : 1;
  l->drop_last = o->drop_last;
  l->collate = o->collate_fn;
  l->collate_user = o->collate_user;
  if (!iterable) {
    if (o->batch_sampler)
      l->bsampler = pd_io_sampler_retain(o->batch_sampler);
    else
      l->bsampler = pd_io_batch_sampler(ds, NULL, o->shuffle, l->auto_collate ? l->batch_size : 1,
                                        l->auto_collate && o->drop_last);
    if (!l->bsampler) {
      pd_io_loader_release(l);
      return NULL;
    }
  }
  if (o->num_workers > 0) {
    l->num_workers = o->num_workers;
    l->cap = o->num_workers * (o->prefetch_factor ? o->prefetch_factor : 2);
    l->slots = calloc((size_t)l->cap, sizeof *l->slots);
    int want = iterable ? 1 : o->num_workers;
    l->threads = calloc((size_t)want, sizeof *l->threads);
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->cv_work, NULL);
    pthread_cond_init(&l->cv_ready, NULL);
    if (!l->slots || !l->threads) {
      pd_io_loader_release(l);
      pd_set_error(PD_ERR_MEMORY, "DataLoader: out of memory");
      return NULL;
    }
    for (int i = 0; i < want; i++) {
      if (pthread_create(&l->threads[i], NULL, worker_main, l) != 0) {
        pd_io_loader_release(l);
        pd_set_error(PD_ERR_STATE, "DataLoader: cannot start worker thread %d of %d", i, want);
        return NULL;
      }
      l->nthreads++;
    }
  }
  return l;
}
