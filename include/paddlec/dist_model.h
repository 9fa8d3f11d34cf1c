#ifndef PADDLEC_DIST_MODEL_H
#define PADDLEC_DIST_MODEL_H
/* paddle.distributed.to_static: a layer whose parameters carry placements,
 * its data loader, a loss and an optimizer become a DistModel (called once
 * per step in train, eval or predict mode) and a DistributedDataLoader.
 *
 *   pd_dist_model *m; pd_dist_data_loader *dl;
 *   pd_dist_to_static(layer, loader, NULL, loss_fn, opt, NULL, &m, &dl);
 *   pd_dist_model_train(m);
 *   while ((n = pd_dist_data_loader_next(dl, batch, 2)) > 0)
 *     pd_dist_model_call(m, batch, n, &loss, 1);
 *
 * A mode's step is a static Program: at the first call in a mode the
 * layer's forward (and the loss, the backward and the optimizer update) is
 * recorded with the parameters' placements, the placements of every value
 * are completed by the SPMD rules, and each rank gets its partitioned
 * Program (local shapes, collectives where placements change), which the
 * Executor runs from then on (docs/auto_parallel.md). */

#include "paddlec/auto_parallel.h"
#include "paddlec/dist_sharding.h"
#include "paddlec/export.h"
#include "paddlec/io.h"
#include "paddlec/nn.h"
#include "paddlec/optim.h"
#include "paddlec/static.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pd_dist_model pd_dist_model;
typedef struct pd_dist_data_loader pd_dist_data_loader;

typedef enum pd_dist_model_mode {
  PD_DIST_MODE_NONE = 0,
  PD_DIST_MODE_TRAIN,
  PD_DIST_MODE_EVAL,
  PD_DIST_MODE_PREDICT
} pd_dist_model_mode;

/* to_static(layer, loader, loss, optimizer, strategy): exactly one of loader
 * (a DataLoader) and shard_loader (from shard_dataloader) is given (borrowed;
 * it must outlive the results), and layer, loss and opt (loss and opt may
 * be NULL), which the model holds a reference to, as Paddle's DistModel
 * does: the caller may release its own at any time. The default mode: train with a loss and an optimizer,
 * eval with a loss only, predict with neither. A strategy enabling a pass that is not implemented is refused
 * by name. An optimizer from pd_dist_shard_optimizer with ShardingStage1/2 turns Strategy.sharding on (its
 * stage; degree: its sharding axis' size), as Paddle does. Writes *model and *dist_loader. */
PD_API pd_status pd_dist_to_static(pd_layer *layer, pd_io_loader *loader,
                                   pd_dist_shard_dataloader *shard_loader, pd_layer *loss, pd_optimizer *opt,
                                   const pd_dist_strategy *strategy, pd_dist_model **model,
                                   pd_dist_data_loader **dist_loader);
PD_API void pd_dist_model_release(pd_dist_model *m);
/* train() / eval() / predict(): errors when the mode needs an optimizer or
 * a loss that to_static was not given. */
PD_API pd_status pd_dist_model_train(pd_dist_model *m);
PD_API pd_status pd_dist_model_eval(pd_dist_model *m);
PD_API pd_status pd_dist_model_predict(pd_dist_model *m);
PD_API pd_dist_model_mode pd_dist_model_get_mode(const pd_dist_model *m);
/* __call__: train and eval take the layer's input then the label (feed
 * names "input0", "label0"), predict the input only. Train runs one step
 * (forward, loss, backward, optimizer update); train and eval write the
 * loss (a dense 0-D tensor, the same on every rank) and return 1; predict
 * writes the layer's outputs as dense global tensors, named "out0", ... by
 * pd_dist_model_output_name, and returns their count. The results belong
 * to the innermost scope when one is open. A negative status on error. */
PD_API int pd_dist_model_call(pd_dist_model *m, pd_tensor *const *inputs, int n_inputs, pd_tensor **out,
                              int max_out);
/* dist_main_program(mode) / serial_main_program(mode): this rank's
 * partitioned Program of a mode (local shapes, the reshards as c_allreduce,
 * c_allgather, slice and scale ops), or the serial one before partitioning
 * (global shapes, grad ops whole); print them with pd_program_to_string.
 * Borrowed, valid until the model is released or rebuilds the mode. Mode
 * NONE: the current mode. NULL with an error before the first call in that
 * mode, which builds it from the batch's shapes and placements. */
PD_API pd_program *pd_dist_model_main_program(pd_dist_model *m, pd_dist_model_mode mode, bool serial);
/* The name of predict output i: "out0" for the first. */
PD_API const char *pd_dist_model_output_name(int i, char *buf, size_t cap);

/* state_dict(mode): mode "param" gives the layer's parameters and
 * persistable buffers by structured name ("0.weight"), "opt" the
 * optimizer's accumulators by Paddle's names ("linear_0.w_0_moment1_0",
 * "..._beta1_pow_acc_0"; master weights and LR_Scheduler entries as
 * pd_optimizer_state_dict gives them), "all" (or NULL) both. The tensors
 * are borrowed DTensors carrying their placements (pd_dist_attr_str), or
 * dense tensors for dense values, valid until the next state_dict or the
 * model's release. Every accumulator is listed, before the first train
 * call too (created as the first step would: zeros, beta powers at beta,
 * as Paddle's startup program makes them); after train calls they are the
 * values the static steps left, this rank's part under the train
 * Program's placements (with sharding stages 1 and 2, its slices: Shard
 * on the sharding axis). Writing into the tensors in place (as
 * pd_dist_load_state_dict does) writes the model's state. Free the list
 * with pd_named_tensors_free.
 *
 * Checkpoints (docs/auto_parallel.md):
 *   pd_dist_model_state_dict(m, "all", &sd);
 *   pd_dist_save_state_dict(&sd, dir);        (every rank)
 *   ... a fresh model, any layout or number of processes:
 *   pd_dist_model_state_dict(m2, "all", &sd2);
 *   pd_dist_load_state_dict(&sd2, dir);
 *   pd_dist_model_set_state_dict(m2, &sd2); */
PD_API pd_status pd_dist_model_state_dict(pd_dist_model *m, const char *mode, pd_named_tensors *out);
/* set_state_dict(sd): writes each entry into every place the model keeps
 * it: the layer's parameter or buffer, the eager optimizer's state, and,
 * once the train Program is built, the static scope its Executor runs
 * from (a Program built later starts from the values loaded). An entry is
 * a DTensor of any placements on the model's mesh, or a dense tensor
 * holding the global value; each place gets it resharded to its own
 * placements (this rank's slice of a sharded optimizer state). A
 * collective when entries are distributed: every rank calls it with the
 * same names in the same order. Entries the model has that sd lacks keep
 * their values; LR_Scheduler entries set the optimizer's scheduler.
 * Errors, before anything is written: a name neither the layer nor the
 * optimizer has, a global shape or a dtype other than the model's, each
 * naming the entry and the values. */
PD_API pd_status pd_dist_model_set_state_dict(pd_dist_model *m, const pd_named_tensors *sd);

/* auto.recompute(layer) (Paddle's paddle.distributed.fleet.utils.recompute
 * in a to_static model): marks layer so that each of its calls is one
 * recompute segment of dist.to_static's train Program when
 * Strategy.recompute.enable is set. Its activations are then not kept for
 * the backward: the segment's forward ops run again in the backward just
 * before the first gradient op that needs their results, so peak memory
 * falls by the activations of all segments but one, for the cost of one
 * more forward of each. The results are the same bits. What a segment
 * reads from outside, what the rest of the model reads of it (its output:
 * the checkpoint) and the draws of random ops (dropout) are kept. Mark the
 * repeated blocks of a model (a transformer layer, an MLP block); a layer
 * marked inside a marked layer is part of the outer segment. Eager calls
 * and the other modes run the layer as before. Registers two forward
 * hooks on layer (pd_layer_register_forward_pre_hook). */
PD_API pd_status pd_dist_recompute(pd_layer *layer);

/* The next batch of the wrapped loader (as pd_io_loader_next /
 * pd_dist_shard_dataloader_next); 0 at the end of an epoch. */
PD_API int pd_dist_data_loader_next(pd_dist_data_loader *l, pd_tensor **batch, int max);
PD_API int64_t pd_dist_data_loader_len(pd_dist_data_loader *l);
PD_API void pd_dist_data_loader_release(pd_dist_data_loader *l);

#ifdef __cplusplus
}
#endif
#endif
