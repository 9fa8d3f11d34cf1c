/* Checkpoints (paddle.save / paddle.load in safetensors), summary, flops,
 * and the high-level Model (paddle.Model) with callbacks and metrics. */
#ifndef PADDLEC_HAPI_H
#define PADDLEC_HAPI_H

#include "paddlec/core.h"
#include "paddlec/nn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- checkpoints (safetensors) -------------------------------------------
 *
 * Files are in the safetensors format, readable by other tools (Python's
 * safetensors.numpy.load_file, ...): an 8-byte little-endian header length N,
 * N bytes of JSON (padded with spaces to a multiple of 8)
 *   {"__metadata__": {"format": "paddle.c", ...},
 *    "linear1.weight": {"dtype": "F32", "shape": [10, 10], "data_offsets": [0, 400]}, ...}
 * then the tensors' bytes, row-major, little-endian, back to back in the
 * order of the list given to pd_save (insertion order, not sorted).
 * dtypes: BOOL U8 I8 I16 I32 I64 F16 BF16 F32 F64.
 *
 * Writes are atomic: the file is written to "<path>.tmp.<pid>", flushed to
 * disk, renamed over `path`, and the directory is synced, so a crash at any
 * point leaves either the previous file or the new one, whole. */

/* A string-to-string map (the header's "__metadata__"); the map owns its strings. */
typedef struct pd_string_map {
  int n;
  char **keys;
  char **values;
} pd_string_map;
/* Sets key to value (copies both; replaces an existing key). */
pd_status pd_string_map_set(pd_string_map *m, const char *key, const char *value);
/* The value of key (borrowed), or NULL. */
const char *pd_string_map_get(const pd_string_map *m, const char *key);
void pd_string_map_free(pd_string_map *m);

/* paddle.save(state_dict, path): writes every tensor of `state` (names must
 * be distinct, valid UTF-8, and not "__metadata__"). Non-contiguous tensors
 * are written row-major. The metadata is {"format": "paddle.c"}. */
pd_status pd_save(const pd_named_tensors *state, const char *path);
/* pd_save with extra metadata entries (NULL: none); a "format" key in
 * `metadata` replaces the default "paddle.c". */
pd_status pd_save_ex(const pd_named_tensors *state, const char *path, const pd_string_map *metadata);

/* paddle.load(path): the tensors of a safetensors file, in the order of
 * their data in the file (for files written by pd_save, the order they were
 * saved in). Every file is validated before anything is allocated: header
 * length and JSON, known dtypes, shape products against data_offsets,
 * offsets that tile the data area exactly, no duplicate names, the file
 * size; a bad file gives an error naming the file and the problem.
 * Ownership: `out` owns its names and one reference to each tensor (the
 * tensors are not tracked by any open scope); free both with pd_state_free.
 * On error *out is empty. */
pd_status pd_load(const char *path, pd_named_tensors *out);
/* pd_load that also returns the header's "__metadata__" (metadata may be
 * NULL; free it with pd_string_map_free). */
pd_status pd_load_ex(const char *path, pd_named_tensors *out, pd_string_map *metadata);
/* The same from a safetensors image in memory (`what` names it in errors;
 * NULL: "buffer"). The tensors own copies of the data. */
pd_status pd_load_buffer(const void *data, size_t size, const char *what, pd_named_tensors *out,
                         pd_string_map *metadata);
/* Releases every tensor of a list returned by pd_load and frees the list. */
void pd_state_free(pd_named_tensors *state);

/* layer.state_dict() saved with pd_save; the metadata adds "kind": "layer". */
pd_status pd_layer_save(const pd_layer *layer, const char *path);
/* layer.set_state_dict(paddle.load(path)): shapes must match (dtypes are
 * converted). With `strict`, names the layer has but the file lacks, or the
 * file has but the layer lacks, are an error listing them, and the layer is
 * left unchanged; without, matching entries are loaded and the rest ignored. */
pd_status pd_layer_load(pd_layer *layer, const char *path, bool strict);

/* ---- summary (paddle.summary) --------------------------------------------- */
typedef struct pd_summary_info {
  int64_t total_params, trainable_params, non_trainable_params;
  /* the memory estimate Paddle prints (4 bytes per element, whatever the dtype) */
  double input_size_mb, forward_backward_size_mb, params_size_mb, total_size_mb;
} pd_summary_info;

/* paddle.summary(net, input_size, dtypes): runs one forward pass (eval mode,
 * no grad, random inputs of the given shapes; a -1 dim, at most one per
 * shape, becomes 1) with a forward post-hook on every sublayer (not
 * Sequential / LayerList; the net itself only when it has no sublayers) and
 * prints Paddle's table to stdout:
 *   ---------------------------------------------------------------------------
 *    Layer (type)       Input Shape          Output Shape         Param #
 *   ===========================================================================
 *      Linear-1          [[1, 10]]             [1, 10]              110
 *   ...
 *   Total params: 121
 *   Trainable params: 121
 *   Non-trainable params: 0
 *   ---------------------------------------------------------------------------
 *   Input size (MB): 0.00
 *   Forward/backward pass size (MB): 0.00
 *   Params size (MB): 0.00
 *   Estimated Total Size (MB): 0.00
 *   ---------------------------------------------------------------------------
 * Rows are named "<type>-<n>" with n from the layer's full_name ("linear_0"
 * gives Linear-1). dtypes may be NULL (float32). `info` (may be NULL) gets
 * the counts. The training flag is restored afterwards. */
pd_status pd_summary(pd_layer *net, int n_inputs, const int *ndims, const int64_t *const *shapes,
                     const pd_dtype *dtypes, pd_summary_info *info);
/* The same table as a malloc'ed string (the caller frees), printing nothing. */
char *pd_summary_string(pd_layer *net, int n_inputs, const int *ndims, const int64_t *const *shapes,
                        const pd_dtype *dtypes, pd_summary_info *info);
/* paddle.summary(net, input=...): the given tensors are the inputs. */
char *pd_summary_string_inputs(pd_layer *net, pd_tensor *const *inputs, int n_inputs, pd_summary_info *info);

/* ---- flops (paddle.flops) ------------------------------------------------ */
/* A counter for one layer call: returns the FLOPs of that call (>= 0) or a
 * negative status. */
typedef int64_t (*pd_flops_count_fn)(pd_layer *layer, pd_tensor *const *in, int n_in, pd_tensor *const *out,
                                     int n_out, void *user);
/* custom_ops: a counter for the layers whose type name is `type_name`. */
typedef struct pd_flops_custom {
  const char *type_name;
  pd_flops_count_fn fn;
  void *user;
} pd_flops_custom;

typedef struct pd_flops_opts {
  bool print_detail;                 /* print the per-layer table */
  const pd_flops_custom *custom_ops; /* checked before the built-in counters */
  int n_custom_ops;
  FILE *out;  /* where the report goes; NULL: stdout */
  bool quiet; /* print nothing */
} pd_flops_opts;

typedef struct pd_flops_row {
  char *name; /* full_name(): "linear_0" */
  int in_ndim, out_ndim;
  int64_t in_shape[PD_MAX_DIMS], out_shape[PD_MAX_DIMS]; /* first input / output */
  int64_t params, flops;
} pd_flops_row;

typedef struct pd_flops_result {
  int64_t total_flops, total_params;
  int n_rows; /* one per leaf layer that ran, in named_sublayers order */
  pd_flops_row *rows;
  int n_unknown; /* leaf layer types with no counter (counted as 0) */
  char **unknown_types;
} pd_flops_result;
void pd_flops_result_free(pd_flops_result *r);

/* paddle.flops(net, input_size, print_detail=...): runs one forward pass (eval
 * mode, no grad) on a float32 randn input of the given shape with a forward
 * post-hook on every leaf layer (one with no sublayers), counting per layer
 * type as Paddle's dynamic counter does:
 *   Linear                   in_features * numel(output)
 *   Conv1D/2D/3D(Transpose)  numel(output) * (x.shape[1] / groups * prod(kernel) + has_bias)
 *   BatchNorm, BatchNorm2D   2 * numel(input)
 *   LeakyReLU                numel(input)
 *   AvgPool1D/2D/3D          numel(output)
 *   AdaptiveAvgPool1D/2D/3D  (prod(in_spatial / out_spatial) + 1) * numel(output)
 *   ReLU, ReLU6, Dropout     0
 * Other types count 0 and are reported. Prints what Paddle prints (the
 * counted/unknown type lines, the table when print_detail, and
 * "Total Flops: F     Total Params: P"). Returns the total FLOPs or a
 * negative status. Unlike Paddle, a net that is itself a leaf layer is
 * counted (Paddle sums sublayers only and reports 0 for it). */
int64_t pd_flops(pd_layer *net, int ndim, const int64_t *input_shape, bool print_detail);
/* pd_flops with options (NULL: defaults) and the per-layer result (may be
 * NULL; free it with pd_flops_result_free). */
int64_t pd_flops_ex(pd_layer *net, int ndim, const int64_t *input_shape, const pd_flops_opts *opts,
                    pd_flops_result *result);

#ifdef __cplusplus
}
#endif
#endif
