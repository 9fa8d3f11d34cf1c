/* Internals shared by the data sources of src/io/. */
#ifndef PADDLEC_IO_INTERNAL_H
#define PADDLEC_IO_INTERNAL_H

#include <stdatomic.h>

#include "../core/core_internal.h"
#include "paddlec/io.h"

struct pd_io_dataset {
  atomic_int refcount;
  pd_io_dataset_fns fns;
  void *user;
};

/* A sampler: the first member of every sampler kind. */
struct pd_io_sampler {
  atomic_int refcount;
  bool is_batch;
  const char *name; /* Paddle's class name, for messages */
  int64_t (*len)(pd_io_sampler *s);
  pd_status (*epoch)(pd_io_sampler *s, pd_io_epoch *e);
  void (*destroy)(pd_io_sampler *s); /* frees what the kind holds, not s */
};
/* Allocates a zeroed sampler of `size` bytes with the given vtable. */
void *pd_io_sampler_alloc(size_t size, const pd_io_sampler *proto);
/* Splits e->indices into batches of batch_size (drop_last drops a short
 * last one), filling e->offsets and e->num_batches. */
pd_status pd_io_epoch_batch(pd_io_epoch *e, int64_t batch_size, bool drop_last);

/* User-level callbacks run at depth 0 in a scope of their own; the outputs
 * they leave in out[0..n) are retained before the scope closes. */
typedef struct pd_io_user_call {
  int saved_depth;
} pd_io_user_call;
void pd_io_user_begin(pd_io_user_call *c, pd_tensor **out, int max_out);
/* Validates n (count within max_out, no NULL output; `what` names the
 * callback in messages), takes a reference to each output and closes the
 * scope. Returns n or a negative status (outputs then all NULL). */
int pd_io_user_end(pd_io_user_call *c, int n, pd_tensor **out, int max_out, const char *what);

/* dataset[index] / next(dataset) with references owned by the caller (not
 * tracked by any scope); errors name the index. */
int pd_io_fetch_item(pd_io_dataset *ds, int64_t index, pd_tensor **out, int max_out);
int pd_io_fetch_next(pd_io_dataset *ds, pd_tensor **out, int max_out);
/* A custom collate callback run as user code (references owned by the caller). */
int pd_io_run_collate(pd_io_collate_fn fn, void *user, pd_tensor *const *samples, int64_t batch, int nfields,
                      pd_tensor **out, int max_out);
/* The default collate: stacks each field along a new dim 0. */
int pd_io_default_collate(pd_tensor *const *samples, int64_t batch, int nfields, pd_tensor **out,
                          int max_out);

/* Copies the current error message (it lives in a thread-local buffer that
 * the next pd_set_error overwrites). */
void pd_io_error_copy(char *buf, size_t cap);

/* A random permutation of 0..n-1: the global generator (paddle.randperm)
 * when seed is 0, a Philox stream keyed by seed otherwise. */
pd_status pd_io_permutation(int64_t n, uint64_t seed, int64_t *out);
/* n uniform draws from [0, high) from the global generator. */
pd_status pd_io_randint(int64_t high, int64_t n, int64_t *out);

/* NumPy's legacy MT19937 RandomState, enough for RandomState(seed).shuffle. */
typedef struct pd_mt19937 {
  uint32_t key[624];
  int pos;
} pd_mt19937;
void pd_mt19937_seed(pd_mt19937 *s, uint32_t seed);
uint32_t pd_mt19937_next32(pd_mt19937 *s);
/* numpy.random.RandomState(seed).shuffle(x) for a list or 1-D array. */
void pd_numpy_shuffle_i64(pd_mt19937 *s, int64_t *x, int64_t n);

/* Whole-file reads: malloc'ed contents (NUL-terminated past *size), or NULL
 * and an error naming the path. */
char *pd_io_read_file(const char *path, size_t *size, const char *what);

/* The bytes of a .npy file holding t (malloc'ed). */
pd_status pd_io_npy_encode(const pd_tensor *t, unsigned char **out, size_t *size, const char *what);
/* Writes size bytes to path (created or truncated). */
pd_status pd_io_write_file(const char *path, const void *data, size_t size, const char *what);

#endif
