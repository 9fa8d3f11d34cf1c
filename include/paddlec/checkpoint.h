/* Checkpoints: paddle.save / paddle.load in safetensors files, a layer's
 * state_dict saved and loaded, and the string map of a file's metadata. */
#ifndef PADDLEC_CHECKPOINT_H
#define PADDLEC_CHECKPOINT_H

#include "paddlec/core.h"
#include "paddlec/export.h"
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
PD_API pd_status pd_string_map_set(pd_string_map *m, const char *key, const char *value);
/* The value of key (borrowed), or NULL. */
PD_API const char *pd_string_map_get(const pd_string_map *m, const char *key);
PD_API void pd_string_map_free(pd_string_map *m);

/* paddle.save(state_dict, path): writes every tensor of `state` (names must
 * be distinct, valid UTF-8, and not "__metadata__"). Non-contiguous tensors
 * are written row-major. The metadata is {"format": "paddle.c"}. The save
 * is atomic: the data goes to a temporary "<path>.tmp.<pid>.<n>" of its own
 * (created exclusively, removed on any error), is synced, and is renamed
 * over path; threads saving to one path at once leave one of their files,
 * whole. */
PD_API pd_status pd_save(const pd_named_tensors *state, const char *path);
/* pd_save with extra metadata entries (NULL: none); a "format" key in
 * `metadata` replaces the default "paddle.c". */
PD_API pd_status pd_save_with_metadata(const pd_named_tensors *state, const char *path,
                                       const pd_string_map *metadata);

/* paddle.load(path): the tensors of a safetensors file, in the order of
 * their data in the file (for files written by pd_save, the order they were
 * saved in). Every file is validated before anything is allocated: header
 * length and JSON, known dtypes, shape products against data_offsets,
 * offsets that tile the data area exactly, no duplicate names, the file
 * size; a bad file gives an error naming the file and the problem.
 * Ownership: `out` owns its names and one reference to each tensor (the
 * tensors are not tracked by any open scope); free both with pd_state_free.
 * On error *out is empty. */
PD_API pd_status pd_load(const char *path, pd_named_tensors *out);
/* pd_load that also returns the header's "__metadata__" (metadata may be
 * NULL; free it with pd_string_map_free). */
PD_API pd_status pd_load_with_metadata(const char *path, pd_named_tensors *out, pd_string_map *metadata);
/* The same from a safetensors image in memory (`what` names it in errors;
 * NULL: "buffer"). The tensors own copies of the data. */
PD_API pd_status pd_load_buffer(const void *data, size_t size, const char *what, pd_named_tensors *out,
                                pd_string_map *metadata);
/* Releases every tensor of a list returned by pd_load and frees the list. */
PD_API void pd_state_free(pd_named_tensors *state);

/* layer.state_dict() saved with pd_save; the metadata adds "kind": "layer". */
PD_API pd_status pd_layer_save(const pd_layer *layer, const char *path);
/* layer.set_state_dict(paddle.load(path)): shapes must match (dtypes are
 * converted). With `strict`, names the layer has but the file lacks, or the
 * file has but the layer lacks, are an error listing them, and the layer is
 * left unchanged; without, matching entries are loaded and the rest ignored. */
PD_API pd_status pd_layer_load(pd_layer *layer, const char *path, bool strict);

/* Deprecated names, kept for one release (docs/architecture.md, "Names"). */
#define pd_save_ex pd_save_with_metadata
#define pd_load_ex pd_load_with_metadata

#ifdef __cplusplus
}
#endif
#endif
