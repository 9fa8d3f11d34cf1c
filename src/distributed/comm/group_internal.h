/* Process groups and their task lanes (internal to src/distributed). */
#ifndef PADDLEC_DIST_GROUP_INTERNAL_H
#define PADDLEC_DIST_GROUP_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "backend.h"

/* A unit of communication work, run on the caller's thread (sync, lane idle)
 * or on the lane's worker thread (async, or behind pending async work). */
struct pd_dist_task {
  pd_status (*run)(struct pd_dist_task *t);
  void (*cleanup)(struct pd_dist_task *t); /* releases what the call holds */
  void *call;                              /* the call's arguments */
  atomic_int done;
  pd_status status;
  char err[1024];
  atomic_int refs; /* the lane and the user each hold one until done / freed */
  struct pd_dist_lane *lane;
  struct pd_dist_task *next;
};

/* Collectives, sends and receives each run in order on their own lane, so
 * an isend/irecv exchange between two ranks never deadlocks. */
typedef struct pd_dist_lane {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  struct pd_dist_task *head, *tail;
  int running; /* a task is executing (inline or on the worker) */
  int worker_started, stopping;
  pthread_t worker;
} pd_dist_lane;

enum { PD_LANE_COLL = 0, PD_LANE_SEND, PD_LANE_RECV, PD_NUM_LANES };

struct pd_dist_group {
  int id;
  int nranks;
  int *ranks; /* global ranks in group order */
  int rank;   /* this process's group rank, -1 if not a member */
  pd_comm *comm;
  char backend[8];
  pd_dist_lane lanes[PD_NUM_LANES];
};

/* task.c */
void pd_dist_lane_init(pd_dist_lane *l);
/* Waits for queued work, stops the worker. */
void pd_dist_lane_destroy(pd_dist_lane *l);
/* Runs the task: async -> queued, *out receives it; sync -> completed
 * (inline when the lane is idle) and the task freed; returns its status. */
pd_status pd_dist_submit(pd_dist_group *g, int lane, struct pd_dist_task *t, pd_dist_task **out);
struct pd_dist_task *pd_dist_task_new(pd_status (*run)(struct pd_dist_task *),
                                      void (*cleanup)(struct pd_dist_task *), void *call);

/* collective_api.c */
/* all_reduce out of place: out (contiguous, in's dtype and element count)
 * receives the reduction of every rank's `in`, which is left as it was
 * (saves the copy an in-place all_reduce of a value to keep needs). */
pd_status pd_dist_all_reduce_into(pd_tensor *out, pd_tensor *in, pd_reduce_op op, const pd_dist_opts *opts);

/* Collectives along a dim of contiguous tensors, the blocks of the side
 * that holds every rank's read or written in place (no packed copy; see
 * blocked_layout.h). Group ranks in group order; a non-member returns
 * PD_OK untouched. */
/* out = the ranks' `in` concatenated along dim (out's dim is nranks times
 * in's, the other dims equal). */
pd_status pd_dist_all_gather_dim(pd_tensor *out, pd_tensor *in, int dim, const pd_dist_opts *opts);
/* in cut into nranks equal blocks along dim: rank r's out = the reduction
 * of every rank's block r. */
pd_status pd_dist_reduce_scatter_dim(pd_tensor *out, pd_tensor *in, int dim, pd_reduce_op op,
                                     const pd_dist_opts *opts);
/* in cut into nranks equal blocks along in_dim, block j sent to rank j;
 * out cut into nranks blocks along out_dim, block j received from rank j
 * (in and out hold as many elements; both dims multiples of nranks). */
pd_status pd_dist_alltoall_dim(pd_tensor *out, pd_tensor *in, int in_dim, int out_dim,
                               const pd_dist_opts *opts);

/* group.c */
/* The world group (NULL when not initialised). */
pd_dist_group *pd_dist_world(void);
/* Which world this is: a number that changes each time the parallel
 * environment is joined (0 when not initialised). Caches of groups key on
 * it, not on the world group's address, which a new world may reuse. */
unsigned long pd_dist_world_generation(void);
/* g, or the world for NULL; NULL with an error when not initialised. */
pd_dist_group *pd_dist_resolve_group(pd_dist_group *g, const char *op);

#endif
