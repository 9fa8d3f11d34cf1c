/* dist.to_static's pipeline, one stage per file, each taking the previous
 * stage's result:
 *
 *   record     (dist_record.c)    the layer's forward (+ loss, backward and
 *              optimizer update, per mode) into a serial Program of global
 *              shapes whose parameters and data carry their dist attrs;
 *   complete   (dist_complete.c)  the serial Program lowered to registry
 *              ops (grad ops become the ops of their backward rules, as
 *              eager runs them) and every op's SPMD rule run on the global
 *              metas, forward and backward: each Variable gets its dist
 *              attr, each op input the placements its rule wants;
 *   partition  (dist_partition.c) one rank's Program: local shapes, and
 *              where an input's placements differ from the wanted ones the
 *              reshard as ops (c_allreduce, c_allgather, slice, scale);
 *              an op whose rule asks for a local step becomes the op that
 *              computes it (c_embedding, c_softmax_with_cross_entropy,
 *              dropout of a shard: spmd_local.c);
 *   buckets    (dist_grad_buckets.c, Strategy.dp_optimization) the
 *              gradient all_reduces fused into buckets that overlap
 *              backward;
 *   run        (dist_model.c)     the rank's Program on the Executor.
 *
 * Program rewrites (gradient merge, sharding, recompute) belong between
 * record and complete (on the serial Program, whose grad ops are still
 * whole) or between complete and partition (placements known, no
 * communication yet). */
#ifndef PADDLEC_AP_DIST_PROGRAM_H
#define PADDLEC_AP_DIST_PROGRAM_H

#include "../../static/static_internal.h"
#include "ap_internal.h"
#include "paddlec/dist_model.h"

#define PD_AP_MAX_FETCH 16
#define PD_AP_NAME_LEN 128

/* A Program with its feeds (data Variables, in call order) and fetches
 * (the loss, or the layer's outputs). */
typedef struct pd_ap_program {
  pd_program *main, *startup; /* startup: values of non-parameter persistables (may be NULL) */
  pd_dist_process_mesh *mesh; /* a reference */
  int n_feed, n_fetch;
  char feed[2][PD_AP_NAME_LEN];
  char fetch[PD_AP_MAX_FETCH][PD_AP_NAME_LEN];
} pd_ap_program;
void pd_ap_program_free(pd_ap_program *p);

/* What record takes: the model, the mode, the mesh, and the feeds' global
 * metas and placements (the layer's input, then the label). */
typedef struct pd_ap_record_args {
  pd_layer *layer, *loss;
  pd_optimizer *opt;
  pd_dist_model_mode mode;
  pd_dist_process_mesh *mesh;
  int n_feed;
  const pd_dist_attr *feed_attr[2];
  pd_dtype feed_dtype[2];
} pd_ap_record_args;

/* record: the serial Program of a mode. */
pd_status pd_ap_record(const pd_ap_record_args *a, pd_ap_program *out);

/* What complete adds: per op of out->main, the placements each input must
 * have (want[want_off[k] + i], in the rules' form), and whether its rule
 * asks for a local step (local[k]: partition emits the op that computes
 * it on the shards, pd_ap_local_op). reduce_scatter (set by the sharding
 * rewrite, stage 2): partition turns a Partial axis whose wanted placement
 * is Shard into one c_reduce_scatter rather than c_allreduce then a slice. */
typedef struct pd_ap_completion {
  pd_spmd_dist *want;
  int *want_off;
  bool *local;
  int n_ops;
  bool reduce_scatter;
} pd_ap_completion;
void pd_ap_completion_free(pd_ap_completion *c);

/* complete: serial (global shapes) -> out, registry ops only, every
 * Variable with a dist attr (pd_dist_attr). */
pd_status pd_ap_complete(const pd_ap_program *serial, pd_ap_program *out, pd_ap_completion *c);

/* partition: this rank's Program of completed program c. */
pd_status pd_ap_partition(const pd_ap_program *completed, const pd_ap_completion *c, pd_ap_program *out);

/* Strategy.gradient_merge (dist_gradient_merge.c): serial train Program ->
 * in place the Program of every k_steps-th call (the merged gradients,
 * divided by k_steps when avg, go to the optimizer, then are zeroed), and
 * *acc the Program of the other calls (the gradients added to the merged
 * buffers, no update). The buffers' zero values join serial's startup. */
pd_status pd_ap_gradient_merge(pd_ap_program *serial, int k_steps, bool avg, pd_ap_program *acc);

/* Strategy.recompute (dist_recompute.c): serial train Program -> in place,
 * each recompute segment's forward ops copied into the backward just
 * before their results are first read there, the backward reading the
 * copies; the segments numbered in skip[0..n_skip) (forward order, from 0)
 * are left alone, an index past the last an error. *n_segments (may be
 * NULL): the segments found. */
pd_status pd_ap_recompute(pd_ap_program *serial, const int *skip, int n_skip, int *n_segments);
/* While on, the calls of layers given to pd_dist_recompute record their
 * ops as recompute segments (record turns it on around the layer's run;
 * turning it either way closes what a failed call left open). */
void pd_ap_recompute_marking(bool on);
/* Strategy.sharding stages 1 and 2 (dist_sharding.c): completed train
 * Program c (between complete and partition) -> in place the Program whose
 * optimizer updates each parameter's shard on mesh axis `axis` (the
 * sharded placements of pd_ap_sharded_placements): the states held as
 * shards, the gradient reduced (stage 1: all-reduced then sliced; stage 2:
 * reduce-scattered) to the shard, the updated shard all-gathered back into
 * the parameter. Parameters whose sharded dim does not split evenly over
 * the axis are left whole. */
pd_status pd_ap_sharding(pd_ap_program *completed, pd_ap_completion *c, int stage, int axis);
/* Strategy.dp_optimization (dist_grad_buckets.c): in a rank's partitioned
 * Program p, the gradient c_allreduces become buckets (c_coalesce,
 * c_allreduce_start_ after the bucket's last gradient, c_allreduce_wait_
 * before its first reader, views of the result). */
pd_status pd_ap_grad_buckets(pd_ap_program *p, const pd_dist_strategy_dp_optimization *o);

/* The dist attr of a Program's Variable (NULL: replicated). */
static inline const pd_dist_attr *pd_ap_var_attr(const pd_variable *v) {
  return (const pd_dist_attr *)v->dist_attr;
}
/* Sets v's dist attr (v takes a). */
void pd_ap_var_set_attr(pd_variable *v, pd_dist_attr *a);

/* The name of a layer parameter's Variable: the tensor's name (Paddle's
 * "linear_0.w_0"), else its structured name. */
static inline const char *pd_ap_param_var_name(const pd_tensor *t, const char *structured) {
  const char *tn = pd_tensor_name(t);
  return tn && *tn ? tn : structured;
}

/* The Executor a DistModel runs its Programs with (for the bench's arena
 * figure). */
pd_executor *pd_ap_model_executor(pd_dist_model *m);

#endif
