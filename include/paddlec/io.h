/* Data: datasets, samplers, DataLoader (paddle.io.*), readers for .npy/.npz,
 * MNIST idx and CSV files, paddle.vision.datasets.
 *
 * Callbacks (get_item, next, collate, transform) are user-level code: each
 * call runs in a scope of its own, like a layer's forward. Call public ops
 * freely and never release what they return; write the result tensors to
 * out[] and return their count (or a negative status with pd_set_error).
 * The library takes its own reference to every output before that scope
 * closes, so an output may also be a tensor the callback's user data keeps.
 * With num_workers > 0 the DataLoader calls get_item and collate from
 * several threads at once: they must be thread-safe (reading immutable
 * data and calling ops is). */
#ifndef PADDLEC_IO_H
#define PADDLEC_IO_H

#include "paddlec/core.h"
#include "paddlec/nn.h"
#include "paddlec/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The most fields one sample or one batch may have. */
#define PD_IO_MAX_FIELDS 16

/* ---- datasets (paddle.io.Dataset, IterableDataset) ------------------------ */

/* A dataset: reference-counted, so subsets, samplers and loaders may share
 * one. */
typedef struct pd_io_dataset pd_io_dataset;

/* The callbacks of a dataset. A map-style dataset (paddle.io.Dataset) has
 * len and get_item; an iterable one (paddle.io.IterableDataset) has next
 * (and reset to start a new pass; it is called before every epoch). */
typedef struct pd_io_dataset_fns {
  /* Number of samples (>= 0), or a negative status. */
  int64_t (*len)(void *user);
  /* Sample `index` (0 <= index < len): writes its fields to out (room for
   * max_out) and returns their count, or a negative status. */
  int (*get_item)(void *user, int64_t index, pd_tensor **out, int max_out);
  /* Iterable datasets: the next sample's fields, 0 at the end of the pass, or
   * a negative status. */
  int (*next)(void *user, pd_tensor **out, int max_out);
  /* Iterable datasets, optional: rewinds for a new pass. */
  pd_status (*reset)(void *user);
  /* Optional: frees `user` when the last reference goes. */
  void (*destroy)(void *user);
} pd_io_dataset_fns;

/* A dataset from callbacks (copied) and user data. Needs get_item and len,
 * or next. Returns NULL and an error otherwise. */
PD_API pd_io_dataset *pd_io_dataset_new(const pd_io_dataset_fns *fns, void *user);
PD_API pd_io_dataset *pd_io_dataset_retain(pd_io_dataset *ds);
/* Drops one reference (NULL is a no-op); the last one calls destroy. */
PD_API void pd_io_dataset_release(pd_io_dataset *ds);
/* True for an iterable dataset (no get_item). */
PD_API bool pd_io_dataset_is_iterable(const pd_io_dataset *ds);
/* len(dataset); a negative status for iterable datasets. */
PD_API int64_t pd_io_dataset_len(pd_io_dataset *ds);
/* dataset[index]: writes new references to out (owned by the innermost scope
 * when one is open) and returns the number of fields. index must lie in
 * [0, len); errors name the index. */
PD_API int pd_io_dataset_get_item(pd_io_dataset *ds, int64_t index, pd_tensor **out, int max_out);
/* Iterable datasets: the next sample (as get_item), 0 at the end. */
PD_API int pd_io_dataset_next(pd_io_dataset *ds, pd_tensor **out, int max_out);
/* Iterable datasets: starts a new pass (calls reset when there is one). */
PD_API pd_status pd_io_dataset_reset(pd_io_dataset *ds);

/* paddle.io.TensorDataset: sample i is (tensors[0][i], ..., tensors[n-1][i])
 * (views; the dataset keeps a reference to each tensor). All tensors need
 * the same dim 0 and at least one dim; 1 <= n <= PD_IO_MAX_FIELDS. */
PD_API pd_io_dataset *pd_io_tensor_dataset(pd_tensor *const *tensors, int n);
/* paddle.io.Subset: sample i is dataset[indices[i]] (indices copied; each
 * must lie in [0, len(dataset)); repeats allowed). */
PD_API pd_io_dataset *pd_io_subset(pd_io_dataset *ds, const int64_t *indices, int64_t n);
/* paddle.io.random_split: splits a permutation of range(len(ds)) into n
 * Subsets written to out. lengths are counts summing to len(ds), or
 * fractions in [0, 1] summing to 1 (floor(len * f) each, the remainder
 * handed out one by one from the first split on), as Paddle decides. The
 * permutation is paddle.randperm from the global generator when seed is 0,
 * otherwise a fixed stream of its own for that seed. */
PD_API pd_status pd_io_random_split(pd_io_dataset *ds, const double *lengths, int n, uint64_t seed,
                                    pd_io_dataset **out);

/* ---- samplers (paddle.io.Sampler, BatchSampler, ...) ---------------------- */

/* A sampler of indices or of batches of indices; reference-counted. */
typedef struct pd_io_sampler pd_io_sampler;

/* One pass of a sampler: `indices` in order; for a batch sampler `offsets`
 * splits them, batch b being indices[offsets[b] .. offsets[b + 1]). */
typedef struct pd_io_epoch {
  int64_t *indices;
  int64_t num_indices;
  int64_t *offsets; /* num_batches + 1 entries; NULL for index samplers */
  int64_t num_batches;
} pd_io_epoch;
PD_API void pd_io_epoch_free(pd_io_epoch *e);

/* paddle.io.SequenceSampler: 0, 1, ..., len(ds) - 1. */
PD_API pd_io_sampler *pd_io_sequence_sampler(pd_io_dataset *ds);
/* paddle.io.RandomSampler: a random permutation of range(len(ds)) cut to
 * num_samples, or with replacement num_samples uniform draws from it.
 * num_samples 0 means len(ds); without replacement it may not exceed
 * len(ds). Every pass draws from the global generator (pd_seed). */
PD_API pd_io_sampler *pd_io_random_sampler(pd_io_dataset *ds, bool replacement, int64_t num_samples);
/* paddle.io.BatchSampler: groups the indices of `sampler` (when given: ds
 * must be NULL and shuffle false), or of a Random/SequenceSampler over ds
 * chosen by shuffle, into batches of batch_size (> 0); drop_last drops a
 * short last batch. */
PD_API pd_io_sampler *pd_io_batch_sampler(pd_io_dataset *ds, pd_io_sampler *sampler, bool shuffle,
                                          int64_t batch_size, bool drop_last);
/* paddle.io.DistributedBatchSampler: the batches of replica `rank` among
 * num_replicas. The index list is padded to a multiple of num_replicas by
 * repeating it from the start, shuffled (shuffle) with NumPy's
 * RandomState(epoch).shuffle, then each replica takes its batch_size-long
 * slices in turn, the last incomplete round split evenly. Each shuffled pass
 * advances the epoch by one. num_replicas -1 / rank -1 take
 * PADDLE_TRAINERS_NUM / PADDLE_TRAINER_ID from the environment (1 / 0 when
 * unset), as ParallelEnv does. */
PD_API pd_io_sampler *pd_io_distributed_batch_sampler(pd_io_dataset *ds, int64_t batch_size, int num_replicas,
                                                      int rank, bool shuffle, bool drop_last);
/* DistributedBatchSampler.set_epoch: the shuffle seed of the next pass
 * (0 <= epoch < 2^32). */
PD_API pd_status pd_io_distributed_batch_sampler_set_epoch(pd_io_sampler *s, int64_t epoch);
PD_API pd_io_sampler *pd_io_sampler_retain(pd_io_sampler *s);
PD_API void pd_io_sampler_release(pd_io_sampler *s);
/* True for batch samplers (BatchSampler, DistributedBatchSampler). */
PD_API bool pd_io_sampler_is_batch(const pd_io_sampler *s);
/* len(sampler): indices for index samplers, batches for batch samplers;
 * negative status on error. */
PD_API int64_t pd_io_sampler_len(pd_io_sampler *s);
/* Draws one pass (iter(sampler)) into *e (free with pd_io_epoch_free). */
PD_API pd_status pd_io_sampler_epoch(pd_io_sampler *s, pd_io_epoch *e);

/* ---- DataLoader (paddle.io.DataLoader) ------------------------------------ */

/* Custom collate_fn: samples[i * num_fields + f] is field f of sample i
 * (batch_size samples). Writes the batch's fields to out (room for max_out)
 * and returns their count, or a negative status. */
typedef int (*pd_io_collate_fn)(pd_tensor *const *samples, int64_t batch_size, int num_fields,
                                pd_tensor **out, int max_out, void *user);

/* Options; all-zero means Paddle's defaults. */
typedef struct pd_io_data_loader_opts {
  /* samples per batch: 0 = 1 (Paddle's default); -1 = None (no batching:
   * each step gives one sample, through collate_fn when set) */
  int64_t batch_size;
  bool shuffle;
  bool drop_last;
  /* a batch sampler (retained); batch_size, shuffle and drop_last must then
   * keep their defaults */
  pd_io_sampler *batch_sampler;
  /* NULL: stack each field along a new dim 0 (pd_stack), so 0-D samples
   * (numbers) become a [batch] tensor */
  pd_io_collate_fn collate_fn;
  void *collate_user;
  /* 0: load in the calling thread; > 0: that many worker threads load
   * batches ahead. Batches come in the sampler's order either way. An
   * iterable dataset is read by one worker thread (its next need not be
   * thread-safe, and each sample comes once). Ops called on a worker thread
   * run single-threaded. */
  int num_workers;
  /* batches loaded ahead per worker: 0 = 2 */
  int prefetch_factor;
} pd_io_data_loader_opts;

/* A DataLoader; pd_io_data_loader makes one. */
typedef struct pd_io_loader pd_io_loader;

/* A DataLoader over ds (retained); opts NULL = defaults. Iterable datasets
 * take no shuffle and no batch_sampler. */
PD_API pd_io_loader *pd_io_data_loader(pd_io_dataset *ds, const pd_io_data_loader_opts *opts);
/* The next batch: writes new references (owned by the innermost scope when
 * one is open) to batch and returns the number of fields; 0 at the end of
 * the epoch. The call after that starts a new epoch (a fresh pass of the
 * sampler, as iterating a DataLoader again does). On an error (e.g. from
 * get_item, the message naming the sample index) the epoch is abandoned
 * and a negative status returned. */
PD_API int pd_io_loader_next(pd_io_loader *l, pd_tensor **batch, int max);
/* Abandons the current epoch (batches loaded ahead are dropped); the next
 * call of pd_io_loader_next starts a new one. */
PD_API pd_status pd_io_loader_reset(pd_io_loader *l);
/* len(DataLoader): batches per epoch; a negative status for iterable
 * datasets. */
PD_API int64_t pd_io_loader_len(pd_io_loader *l);
/* Stops the workers (waiting for the batch each is loading), drops what is
 * loaded ahead and frees the loader. NULL is a no-op. */
PD_API void pd_io_loader_release(pd_io_loader *l);

/* ---- NumPy files ---------------------------------------------------------- */

/* numpy.load of a .npy file: bool, uint8, int8, int16, int32, int64,
 * float16, float32, float64 ('<', '|' or '=' byte order; '>' is swapped),
 * bfloat16 as 2-byte void ('|V2', how ml_dtypes' arrays are written); C or
 * Fortran order (the result is contiguous either way). Anything malformed
 * is an error naming the file and what is wrong. */
PD_API pd_tensor *pd_io_load_npy(const char *path);
/* The same from memory; `name` is used in messages. */
PD_API pd_tensor *pd_io_load_npy_buffer(const void *data, size_t size, const char *name);
/* numpy.save: format 1.0, C order, little endian, the data starting at a
 * multiple of 64 bytes. */
PD_API pd_status pd_io_save_npy(const char *path, const pd_tensor *t);

/* The arrays of a .npz file (numpy.load of an archive). */
typedef struct pd_io_npz pd_io_npz;
/* Reads every member (stored or deflated; ZIP64 records understood; CRCs
 * checked). Member "x.npy" is named "x". */
PD_API pd_io_npz *pd_io_load_npz(const char *path);
PD_API pd_io_npz *pd_io_load_npz_buffer(const void *data, size_t size, const char *name);
PD_API int pd_io_npz_count(const pd_io_npz *z);
/* Name of array i (borrowed); NULL out of range. */
PD_API const char *pd_io_npz_name(const pd_io_npz *z, int i);
/* The array named `name` (a new reference), NULL and an error naming the
 * available arrays when there is none. */
PD_API pd_tensor *pd_io_npz_get(const pd_io_npz *z, const char *name);
PD_API void pd_io_npz_release(pd_io_npz *z);
/* numpy.savez (compress false) / numpy.savez_compressed (true): n arrays
 * stored as names[i] + ".npy". */
PD_API pd_status pd_io_save_npz(const char *path, const char *const *names, pd_tensor *const *tensors, int n,
                                bool compress);

/* ---- idx (MNIST) and CSV files -------------------------------------------- */

/* An idx file (the MNIST format), gzipped or not: big-endian header with
 * magic 0x0000TTNN (type TT: 0x08 uint8, 0x09 int8, 0x0B int16, 0x0C int32,
 * 0x0D float32, 0x0E float64; NN dims), sizes, then the data, which must
 * have exactly the announced length. */
PD_API pd_tensor *pd_io_load_idx(const char *path);

/* CSV options; all-zero: ',' delimiter, no header row, float32. */
typedef struct pd_io_csv_opts {
  char delimiter;
  bool header;    /* skip the first row */
  pd_dtype dtype; /* PD_FLOAT32 or PD_FLOAT64 (0 means float32) */
} pd_io_csv_opts;
/* A 2-D [rows, columns] tensor of the numbers of a CSV file. Empty lines
 * are skipped; every row needs the same number of cells; a cell that is
 * not a number (strtod in the C locale, surrounding blanks allowed) is an
 * error naming its line and column (both from 1). */
PD_API pd_tensor *pd_io_load_csv(const char *path, const pd_io_csv_opts *opts);

/* ---- paddle.vision.datasets ----------------------------------------------- */

/* A transform: replaces out[0] by a function of image (as a collate
 * callback: runs in a scope of its own); returns 1 or a negative status. */
typedef int (*pd_vision_transform_fn)(pd_tensor *image, pd_tensor **out, void *user);

/* Options of MNIST / FashionMNIST; all-zero = Paddle's defaults. */
typedef struct pd_vision_datasets_mnist_opts {
  /* explicit files (gzipped or not); NULL: <root>/train-images-idx3-ubyte.gz
   * and so on (the .gz name, else the name without .gz) */
  const char *image_path, *label_path;
  /* NULL: $HOME/.cache/paddle/dataset/mnist for MNIST,
   * /usr/share/datasets/fashion-mnist for FashionMNIST */
  const char *root;
  const char *mode; /* "train" (NULL) or "test" */
  pd_vision_transform_fn transform;
  void *transform_user;
  pd_dtype dtype; /* image dtype: 0 = paddle.get_default_dtype() */
} pd_vision_datasets_mnist_opts;

/* paddle.vision.datasets.MNIST with the 'cv2' backend: sample i is
 * (image, label): image a [rows, cols] (28 x 28) tensor of the raw pixel
 * values 0..255 in opts->dtype, passed through transform when set; label an
 * int64 [1] tensor. The files are read at construction; their magic
 * numbers, sizes and counts are checked. */
PD_API pd_io_dataset *pd_vision_datasets_mnist(const pd_vision_datasets_mnist_opts *opts);
/* paddle.vision.datasets.FashionMNIST: the same reader, its own root. */
PD_API pd_io_dataset *pd_vision_datasets_fashion_mnist(const pd_vision_datasets_mnist_opts *opts);

/* Deprecated names, kept for one release (docs/architecture.md, "Names"). */
#define pd_io_npz_free pd_io_npz_release
#define pd_io_data_loader_destroy pd_io_loader_release
#define pd_io_data_loader_next pd_io_loader_next
#define pd_io_data_loader_reset pd_io_loader_reset
#define pd_io_data_loader_len pd_io_loader_len

#ifdef __cplusplus
}
#endif
#endif
