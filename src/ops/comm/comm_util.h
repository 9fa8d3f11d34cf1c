/* The communication ops of the registry (c_allreduce, c_allgather,
 * c_reduce_scatter, c_softmax_with_cross_entropy, c_nll_loss and their grads): their
 * kernels run a collective over the process group whose id is the op's
 * ring_id attribute. The collectives live in the distributed layer, above
 * the registry, which installs them here (as autograd installs its hook). */
#ifndef PADDLEC_OPS_COMM_UTIL_H
#define PADDLEC_OPS_COMM_UTIL_H

#include "../op_registry.h"

typedef enum pd_comm_op_kind {
  PD_COMM_OP_ALLREDUCE,
  PD_COMM_OP_ALLGATHER,
  PD_COMM_OP_REDUCE_SCATTER,
  PD_COMM_OP_ALLREDUCE_START,
  PD_COMM_OP_WAIT
} pd_comm_op_kind;

/* Runs collective `kind` of group ring_id with nranks members on x into out
 * (allocated, contiguous): allreduce with reduce op `arg` (a pd_reduce_op),
 * allgather concatenating the members' x along dim `arg`, in group-rank
 * order, reduce_scatter reducing (op `arg`) the members' x and keeping
 * block r of nranks equal blocks along dim `axis` on group rank r.
 * ALLREDUCE_START launches the allreduce of x in place (out is x) on the
 * group's communication thread and returns; WAIT waits for the one
 * launched on x's memory (ring_id, nranks and arg as the start's). */
typedef pd_status (*pd_comm_op_fn)(pd_comm_op_kind kind, int64_t ring_id, int64_t nranks, int64_t arg,
                                   int64_t axis, pd_tensor *x, pd_tensor *out);
void pd_comm_ops_install(pd_comm_op_fn fn);

/* Allreduces n float64 values in place over group ring_id of nranks
 * members with reduce op `reduce` (a pd_reduce_op), for ops that combine
 * per-shard statistics (c_softmax_with_cross_entropy, c_nll_loss); nothing to do for
 * one rank. The error names def's op. */
pd_status pd_comm_allreduce_f64(const pd_op_def *def, int64_t ring_id, int64_t nranks, int64_t reduce,
                                double *buf, int64_t n);

#endif
