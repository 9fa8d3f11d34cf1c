/* Distributed checkpoints (paddle.distributed.save_state_dict /
 * load_state_dict): a state dict of DTensors (and dense tensors) saved by
 * every rank at once, loadable on another number of ranks or with other
 * placements.
 *
 * A checkpoint is a directory:
 *   <rank>_<generation>.distcp  one safetensors file per rank: the slices
 *                               of the global values this rank holds
 *   metadata                    a safetensors file without tensors whose
 *                               "__metadata__" lists, for every key, its
 *                               dtype, global shape and which file holds
 *                               which slice (global offsets and lengths)
 * Each slice is written once: a value replicated over mesh axes is written
 * by the rank at coordinate 0 of those axes, a dense tensor by rank 0, and
 * a Partial value is reduced first. Loading reads the metadata, then only
 * the files whose slices overlap this rank's local shards, and copies each
 * overlap in place, so parameters and optimizer states held elsewhere see
 * the values.
 *
 * Crash safety: every file is written atomically (paddlec/checkpoint.h),
 * and the data files of a save carry a new generation number, so they
 * never replace the files of the checkpoint already there. The metadata
 * file, written by rank 0 only after every rank's file is on disk, is the
 * commit: until it is renamed in place the directory holds the previous
 * checkpoint, whole; after it, the previous generation's files are removed. */
#ifndef PADDLEC_DIST_CHECKPOINT_H
#define PADDLEC_DIST_CHECKPOINT_H

#include "paddlec/core.h"
#include "paddlec/export.h"
#include "paddlec/nn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* save_state_dict(state_dict, path): collective over the world (every rank
 * calls it with the same keys in the same order; one process without a
 * parallel environment is a world of one). path is a directory, created if
 * absent. Keys must be distinct and hold no tab or newline. */
PD_API pd_status pd_dist_save_state_dict(const pd_named_tensors *state, const char *path);

/* load_state_dict(state_dict, path): fills every tensor of `state` in place
 * from the checkpoint at path, whatever the number of ranks and placements
 * it was saved with: each rank reads the slices that overlap its local
 * shard. Not collective (no communication). Errors name the key or the
 * file: a key absent from the checkpoint, a global shape that differs, a
 * missing or corrupt file, slices that do not cover a shard, a Partial
 * target (reshard it to Replicate or Shard first). dtypes are converted.
 * Every value is assembled before any tensor is written: on error no
 * tensor has changed. */
PD_API pd_status pd_dist_load_state_dict(const pd_named_tensors *state, const char *path);

#ifdef __cplusplus
}
#endif
#endif
