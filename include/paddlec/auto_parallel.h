/* paddle.c semi-automatic parallelism (paddle.distributed auto_parallel) in
 * eager mode: process meshes, placements, distributed tensors (DTensors)
 * and reshard.
 *
 * A DTensor is an ordinary pd_tensor carrying a dist attr: a process mesh,
 * one placement per mesh axis and the global shape. Its data and shape are
 * this rank's local shard. Every op accepts DTensors: the op's SPMD rule
 * decides, on the global shapes, how each input must be placed and how the
 * outputs are; inputs are resharded as needed, the op runs on the local
 * shards and its outputs are DTensors. A dense tensor used together with
 * DTensors counts as replicated on their mesh. Ops without a rule reshard
 * every input to Replicate (correct, slower; logged once per op on stderr
 * when PADDLEC_LOG_SPMD=1). Gradients go through the same path, so they are
 * DTensors too (Partial where a contraction was sharded).
 *
 * Ranks outside a tensor's mesh hold no data (a local shard of zero
 * elements) and skip its ops, but, as every rank runs the same program, they
 * still make the calls: the first reshard on a mesh creates its
 * communication groups (pd_dist_new_group) on every rank of the world.
 *
 * Shards of a dim not divisible by the mesh axis are as Paddle's: every
 * shard has ceil(global / n) elements except the last ones, which hold
 * what is left (possibly nothing). */
#ifndef PADDLEC_AUTO_PARALLEL_H
#define PADDLEC_AUTO_PARALLEL_H

#include "paddlec/core.h"
#include "paddlec/distributed.h"
#include "paddlec/export.h"
#include "paddlec/io.h"
#include "paddlec/nn.h"
#include "paddlec/optim.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Most mesh dimensions. */
#define PD_DIST_MAX_MESH_DIMS 4

/* ---- ProcessMesh ---------------------------------------------------------- */
typedef struct pd_dist_process_mesh pd_dist_process_mesh;

/* paddle.distributed.ProcessMesh(mesh, dim_names): an n-d array of process
 * ids (row-major, `ndim` dims of `shape`); ids >= 0 and unique; dim_names
 * NULL gives "d0", "d1", ...; names must be unique. Reference counted: a
 * new reference, or NULL with the error naming the offending value. */
PD_API pd_dist_process_mesh *pd_dist_process_mesh_new(int ndim, const int64_t *shape, const int *process_ids,
                                                      const char *const *dim_names);
PD_API pd_dist_process_mesh *pd_dist_process_mesh_retain(pd_dist_process_mesh *m);
PD_API void pd_dist_process_mesh_release(pd_dist_process_mesh *m);
PD_API int pd_dist_process_mesh_ndim(const pd_dist_process_mesh *m);
/* The shape (ndim entries, borrowed). */
PD_API const int64_t *pd_dist_process_mesh_shape(const pd_dist_process_mesh *m);
/* Number of processes. */
PD_API int64_t pd_dist_process_mesh_size(const pd_dist_process_mesh *m);
/* The process ids, row-major (size entries, borrowed). */
PD_API const int *pd_dist_process_mesh_process_ids(const pd_dist_process_mesh *m);
/* Name of dim i (borrowed); NULL when out of range. */
PD_API const char *pd_dist_process_mesh_dim_name(const pd_dist_process_mesh *m, int i);
/* get_dim_size(name); -1 with the error set when no dim has that name. */
PD_API int64_t pd_dist_process_mesh_get_dim_size(const pd_dist_process_mesh *m, const char *dim_name);
/* get_mesh_with_dim(dim_name, index): the sub-mesh at coordinate `index` of
 * that dim (the dim moved to the front and dropped); index < 0 counts from
 * the end. New reference or NULL. */
PD_API pd_dist_process_mesh *pd_dist_process_mesh_get_mesh_with_dim(const pd_dist_process_mesh *m,
                                                                    const char *dim_name, int64_t index);
/* mesh[index]: the first dim dropped, the other names kept; a 1-d mesh
 * gives a one-process 1-d mesh named "d0". New reference or NULL. */
PD_API pd_dist_process_mesh *pd_dist_process_mesh_index(const pd_dist_process_mesh *m, int64_t index);
/* Equality as Paddle's: the same shape and process ids (names ignored). */
PD_API bool pd_dist_process_mesh_equal(const pd_dist_process_mesh *a, const pd_dist_process_mesh *b);
/* Whether process id `pid` is in the mesh. */
PD_API bool pd_dist_process_mesh_contains(const pd_dist_process_mesh *m, int pid);
/* get_rank_by_dim_and_process_id: pid's coordinate along dim (-1 when
 * absent or no such dim). */
PD_API int64_t pd_dist_process_mesh_get_rank_by_dim_and_process_id(const pd_dist_process_mesh *m,
                                                                   const char *dim_name, int pid);

/* ---- placements ------------------------------------------------------------ */
typedef enum pd_dist_placement_kind {
  PD_DIST_REPLICATE = 0,
  PD_DIST_SHARD = 1,
  PD_DIST_PARTIAL = 2,
} pd_dist_placement_kind;

/* One entry per mesh axis. dim: the tensor dim of a Shard; reduce_type: the
 * pending reduction of a Partial (sum, avg, max, min, prod). */
typedef struct pd_dist_placement {
  pd_dist_placement_kind kind;
  int dim;
  pd_reduce_op reduce_type;
} pd_dist_placement;

PD_API pd_dist_placement pd_dist_shard(int dim);
PD_API pd_dist_placement pd_dist_replicate(void);
PD_API pd_dist_placement pd_dist_partial(pd_reduce_op reduce_type);
PD_API bool pd_dist_placement_equal(pd_dist_placement a, pd_dist_placement b);

/* ---- DTensor constructors and accessors ----------------------------------- */
/* shard_tensor(data, mesh, placements): data is the global value (the same
 * on every rank); each rank keeps its shard (Partial: the value on mesh
 * coordinate 0 and zeros elsewhere, Avg: everywhere). Errors name the
 * values: placements not one per mesh axis, a Shard dim out of range, a
 * mesh of processes the world lacks. stop_gradient is data's.
 * A parameter stays the same parameter: data is converted in place (so
 * layers and optimizers holding it see the DTensor) and returned with a new
 * reference; any other tensor gives a new DTensor. */
PD_API pd_tensor *pd_dist_shard_tensor(pd_tensor *data, pd_dist_process_mesh *mesh,
                                       const pd_dist_placement *placements, int n_placements);
/* dtensor_from_local(local, mesh, placements): no communication; the global
 * shape is the local one with every Shard(d) dim times its axis size. */
PD_API pd_tensor *pd_dist_dtensor_from_local(pd_tensor *local, pd_dist_process_mesh *mesh,
                                             const pd_dist_placement *placements, int n_placements);
/* dtensor_from_fn(fn, mesh, placements): shard_tensor(fn(arg), ...). */
PD_API pd_tensor *pd_dist_dtensor_from_fn(pd_tensor *(*fn)(void *arg), void *arg, pd_dist_process_mesh *mesh,
                                          const pd_dist_placement *placements, int n_placements);
/* unshard_dtensor(t): the global value as a dense tensor (reshard to
 * Replicate); a dense t is returned retained. */
PD_API pd_tensor *pd_dist_unshard_dtensor(pd_tensor *t);
/* reshard(t, mesh, placements): the same global value placed anew.
 * Differentiable. Transitions on one mesh: S->R all_gather, R->S local
 * slice, P->R all_reduce, P->S reduce_scatter, R->P, S->P, S(i)->S(j)
 * alltoall; n-d meshes one axis at a time; onto another mesh of the same
 * shape by send/recv. A transition without a rule is an error naming both
 * dist attrs. */
PD_API pd_tensor *pd_dist_reshard(pd_tensor *t, pd_dist_process_mesh *mesh,
                                  const pd_dist_placement *placements, int n_placements);

PD_API bool pd_dist_is_dist(const pd_tensor *t);
/* The local shard as a dense tensor sharing t's storage (new reference). */
PD_API pd_tensor *pd_dist_local_value(pd_tensor *t);
/* The placements (one per mesh axis) into out (cap entries); returns their
 * number, or -1 when t is not a DTensor. */
PD_API int pd_dist_placements(const pd_tensor *t, pd_dist_placement *out, int cap);
/* The mesh (borrowed), NULL for a dense tensor. */
PD_API pd_dist_process_mesh *pd_dist_process_mesh_of(const pd_tensor *t);
/* The global shape into shape (PD_MAX_DIMS entries); returns its rank, -1
 * for a dense tensor. */
PD_API int pd_dist_global_shape(const pd_tensor *t, int64_t *shape);
/* "{mesh: [2] [0, 1], placements: [Shard(1)], shape: [16, 16]}" into buf. */
PD_API const char *pd_dist_attr_str(const pd_tensor *t, char *buf, size_t cap);

/* ---- shard_layer ------------------------------------------------------------ */
/* shard_fn(name, layer, mesh, user): called on `layer` itself (name "") and
 * on every sublayer (dotted name), before the rest is replicated; it shards
 * what it wants with pd_dist_shard_tensor (parameters convert in place). */
typedef pd_status (*pd_dist_shard_layer_fn)(const char *name, pd_layer *layer, pd_dist_process_mesh *mesh,
                                            void *user);
typedef struct pd_dist_shard_layer_opts {
  pd_dist_shard_layer_fn shard_fn; /* NULL: only replicate */
  /* input_fn / output_fn: Paddle's, as forward pre- and post-hooks of the
   * layer (the mesh travels in user) */
  pd_forward_pre_hook_fn input_fn;
  pd_forward_post_hook_fn output_fn;
  void *user;
} pd_dist_shard_layer_opts;
/* shard_layer(layer, process_mesh, shard_fn, input_fn, output_fn): after
 * shard_fn, every parameter and buffer of the layer and its sublayers that
 * is still dense becomes a Replicate DTensor on mesh, in place. opts NULL:
 * replicate everything. */
PD_API pd_status pd_dist_shard_layer(pd_layer *layer, pd_dist_process_mesh *mesh,
                                     const pd_dist_shard_layer_opts *opts);

/* ---- shard_dataloader ------------------------------------------------------- */
typedef struct pd_dist_shard_dataloader pd_dist_shard_dataloader;
typedef struct pd_dist_shard_dataloader_opts {
  /* meshes[f] places field f of each batch (the last one serves the rest:
   * one mesh for all fields, or e.g. the first pipeline stage for inputs and
   * the last for labels); a rank takes its data coordinate from the first
   * mesh that holds it */
  pd_dist_process_mesh *const *meshes;
  int n_meshes;
  /* the mesh dim (name) the batch is split along; NULL: not split, every
   * field replicated */
  const char *shard_dim;
  /* the dataset already holds this rank's part: load it as it is */
  bool is_dataset_splitted;
} pd_dist_shard_dataloader_opts;
/* shard_dataloader(dataloader, meshes, shard_dims, is_dataset_splitted), as
 * a loader over ds with the global batch of loader_opts (batch_size,
 * shuffle, drop_last): split along shard_dim it loads this rank's slice of
 * every global batch (DistributedBatchSampler of batch_size / dp ranks,
 * replicas = the dim's size, rank = this rank's coordinate on it), and each
 * field comes as a DTensor of the global batch, Shard(0) on shard_dim and
 * Replicate elsewhere (dtensor_from_local). NULL on bad input, naming it. */
PD_API pd_dist_shard_dataloader *pd_dist_shard_dataloader_new(pd_io_dataset *ds,
                                                              const pd_io_data_loader_opts *loader_opts,
                                                              const pd_dist_shard_dataloader_opts *opts);
/* The next batch's fields as DTensors (new references, in the innermost
 * scope when one is open); 0 at the end of an epoch (the next call starts
 * another), a negative status on error. */
PD_API int pd_dist_shard_dataloader_next(pd_dist_shard_dataloader *l, pd_tensor **batch, int max);
PD_API int64_t pd_dist_shard_dataloader_len(pd_dist_shard_dataloader *l);
PD_API void pd_dist_shard_dataloader_release(pd_dist_shard_dataloader *l);

/* ---- pipeline stages and micro-batch schedules ------------------------------ */
/* Pipeline parallelism over stage meshes (Paddle's pipeline schedules
 * FThenB and 1F1B, as its pipeline_scheduler_pass and PipelineParallel run
 * them). Each stage is a layer whose parameters live on the stage's mesh, a
 * sub-mesh of the global mesh (e.g. get_mesh_with_dim("pp", s)); a step
 * splits the global batch into accumulate_steps micro-batches, runs each
 * stage's forward and backward on its own ranks in the schedule's order and
 * moves activations (forward) and their gradients (backward) between stage
 * meshes by reshard. The gradients accumulate over the micro-batches, each
 * micro-batch loss scaled by 1 / accumulate_steps (Paddle's), so a step
 * equals one process training on the whole batch with a mean loss.
 *
 * As everywhere in auto_parallel every rank runs the same program: every
 * rank walks the same merged order of all stages' actions, runs the forward
 * of a stage it is not in without gradients (its ops are skipped; it learns
 * the activation's dist attr) and takes part in every move (a rank outside
 * both meshes does nothing there). So the sends of one stage meet the
 * receives of the next without a separate meta exchange. */
typedef struct pd_dist_pipeline pd_dist_pipeline;

typedef struct pd_dist_pipeline_stage {
  pd_layer *layer;            /* one input (the activation), one output; borrowed */
  pd_dist_process_mesh *mesh; /* the stage mesh; borrowed, retained by the pipeline */
  /* how the activation entering the stage is placed on its mesh (one per
   * mesh dim); NULL: Replicate on every dim */
  const pd_dist_placement *input_placements;
} pd_dist_pipeline_stage;

typedef struct pd_dist_pipeline_opts {
  /* Strategy.pipeline.schedule_mode: "FThenB" (every micro-batch's forward,
   * then every backward) or "1F1B" (stage s of S runs min(S - s - 1, A)
   * forwards, then alternates one forward and one backward, then the
   * remaining backwards); NULL: "1F1B" */
  const char *schedule_mode;
  int accumulate_steps; /* micro-batches per step, >= 1; it must divide the batch */
  /* the loss layer, called on the last stage as loss(output, label); borrowed */
  pd_layer *loss_fn;
  /* how the label is placed on the last stage's mesh; NULL: Replicate */
  const pd_dist_placement *label_placements;
} pd_dist_pipeline_opts;

/* A pipeline of n_stages stages on global_mesh. Every still-dense parameter
 * and buffer of a stage's layer becomes a Replicate DTensor on the stage
 * mesh (pd_dist_shard_layer); DTensor parameters must already be on it.
 * Errors name the values: a stage mesh with a process outside the global
 * mesh, a parameter on another mesh, a schedule_mode other than "FThenB"
 * and "1F1B", accumulate_steps < 1, placements not one per mesh dim. */
PD_API pd_dist_pipeline *pd_dist_pipeline_new(pd_dist_process_mesh *global_mesh,
                                              const pd_dist_pipeline_stage *stages, int n_stages,
                                              const pd_dist_pipeline_opts *opts);
/* PipelineParallel.train_batch([input, label], optimizer): one step over the
 * global batch (input and label: dense tensors, the same on every rank, or
 * DTensors; dim 0 is the batch). Gradients accumulate into the parameters'
 * .grad; with opt (NULL: none) the optimizer steps and clears them after the
 * last micro-batch. Returns the mean micro-batch loss as a dense tensor on
 * every rank (sent from the last stage), or NULL: a batch that
 * accumulate_steps does not divide is an error naming both. Collective over
 * the world. */
PD_API pd_tensor *pd_dist_pipeline_train_batch(pd_dist_pipeline *p, pd_tensor *input, pd_tensor *label,
                                               pd_optimizer *opt);
/* PipelineParallel.eval_batch([input, label], compute_loss=True): the mean
 * micro-batch loss of the forwards alone (no gradient, no update), micro-
 * batch by micro-batch, as a dense tensor on every rank; NULL on the errors
 * of train_batch. Collective over the world. */
PD_API pd_tensor *pd_dist_pipeline_eval_batch(pd_dist_pipeline *p, pd_tensor *input, pd_tensor *label);
/* The most micro-batches whose activations stage `stage` held at once on
 * this rank during the last train_batch (forward run, backward not yet):
 * accumulate_steps under FThenB, at most S - stage under 1F1B; -1 when this
 * rank is not in the stage or no step ran. */
PD_API int pd_dist_pipeline_peak_live_activations(const pd_dist_pipeline *p, int stage);
PD_API void pd_dist_pipeline_release(pd_dist_pipeline *p);

#ifdef __cplusplus
}
#endif
#endif
