/* paddle.c distributed: the parallel environment, process groups and the
 * collective communication API of paddle.distributed.
 *
 * A job is N processes ("ranks"). `pd_dist_init_parallel_env` reads the
 * environment a launcher sets (fleetrun / paddle.distributed.launch:
 * PADDLE_TRAINER_ID, PADDLE_TRAINERS_NUM, PADDLE_TRAINER_ENDPOINTS,
 * PADDLE_CURRENT_ENDPOINT, PADDLE_MASTER, ...; mpirun: OMPI_COMM_WORLD_*;
 * Slurm: SLURM_PROCID, SLURM_NTASKS, ...) and joins the world group.
 *
 * Backends: "shm" (built in, the default when every rank is on one host: a
 * shared-memory segment per group, each rank reduces its own slice) and
 * "mpi" (Open MPI, for several hosts; present when the library was built
 * with it, see pd_dist_backend_available).
 *
 * Collectives are Paddle's: in place on the given tensors, issued in the same
 * order on every member of the group. Ranks named as src/dst/peer are GLOBAL
 * ranks. A process that is not a member of the group returns PD_OK at once.
 * Every collective carries a sequence number and a signature (op, dtype,
 * element count, root); ranks that disagree, die or never arrive make the
 * call fail with PD_ERR_COMM and a message naming the ranks, what each
 * called and who is missing, never a silent hang. After such an error the
 * group is broken: later calls on it fail with the same message.
 *
 * sync_op: by default a call returns when it is complete (Paddle's
 * sync_op=True). Passing `.task = &task` in pd_dist_opts makes it
 * asynchronous (sync_op=False): the call returns at once and *task is a new
 * task to pass to pd_dist_task_wait and then pd_dist_task_release; the tensors
 * must not be touched until the task completes (the task keeps them alive). */
#ifndef PADDLEC_DISTRIBUTED_H
#define PADDLEC_DISTRIBUTED_H

#include "paddlec/core.h"
#include "paddlec/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* paddle.distributed.ReduceOp (same values). AVG divides the sum by the
 * group size (integer division for integer dtypes). */
typedef enum pd_reduce_op {
  PD_REDUCE_SUM = 0,
  PD_REDUCE_MAX = 1,
  PD_REDUCE_MIN = 2,
  PD_REDUCE_PROD = 3,
  PD_REDUCE_AVG = 4,
  PD_NUM_REDUCE_OPS
} pd_reduce_op;

/* "SUM", "MAX", ... ; "invalid" for a bad value. */
PD_API const char *pd_reduce_op_name(pd_reduce_op op);

/* ---- the parallel environment ------------------------------------------ */

/* paddle.distributed.ParallelEnv: what the environment says about this
 * process. Read with pd_dist_parallel_env; no communication. */
typedef struct pd_dist_env {
  int rank;       /* PADDLE_TRAINER_ID | OMPI_COMM_WORLD_RANK | SLURM_PROCID; 0 */
  int world_size; /* PADDLE_TRAINERS_NUM | OMPI_COMM_WORLD_SIZE | SLURM_NTASKS; 1 */
  int local_rank; /* PADDLE_RANK_IN_NODE | OMPI_COMM_WORLD_LOCAL_RANK | SLURM_LOCALID */
  int local_size; /* PADDLE_LOCAL_SIZE | OMPI_COMM_WORLD_LOCAL_SIZE | SLURM_NTASKS_PER_NODE */
  int nnodes;     /* PADDLE_NNODES | SLURM_NNODES; 1 */
  int device_id;  /* first of FLAGS_selected_gpus / FLAGS_selected_accelerators; 0 */
  int n_endpoints;
  char **trainer_endpoints;   /* PADDLE_TRAINER_ENDPOINTS split on ',' (owned) */
  char current_endpoint[256]; /* PADDLE_CURRENT_ENDPOINT */
  char master[256];           /* MASTER_ADDR:MASTER_PORT | PADDLE_MASTER | first endpoint; "" */
  const char *launcher;       /* "paddle", "mpirun", "slurm" or "none" */
  const char *master_from;    /* the variable(s) master came from ("PADDLE_MASTER", ...); "" */
} pd_dist_env;

/* Fills *env from the environment. Inconsistent values (rank >= world size,
 * a negative or non-numeric rank, endpoints whose count is not the world
 * size, a current endpoint missing from the list, an endpoint or
 * MASTER_PORT that is not host:port with a port in [1, 65535]) are
 * PD_ERR_INVALID naming the variable and its value. Free with
 * pd_dist_env_free. */
PD_API pd_status pd_dist_parallel_env(pd_dist_env *env);
PD_API void pd_dist_env_free(pd_dist_env *env);

typedef struct pd_dist_group pd_dist_group;

typedef struct pd_dist_init_opts {
  const char *backend; /* "shm", "mpi"; NULL, "auto" or "gloo": shm on one host, else mpi */
  double timeout_s;    /* per collective; 0: $PADDLEC_COMM_TIMEOUT or 1800 (Paddle's 30 min) */
} pd_dist_init_opts;

/* paddle.distributed.init_parallel_env: joins the world group (rendezvous
 * with every rank through the master endpoint, or through MPI under mpirun)
 * and returns it (borrowed; lives until pd_dist_destroy_process_group).
 * Idempotent. With world size 1 it returns a one-rank group. NULL on error:
 * a wrong environment, an unreachable master (after the timeout), an
 * unknown or unavailable backend. */
PD_API pd_dist_group *pd_dist_init_parallel_env(const pd_dist_init_opts *opts);
PD_API bool pd_dist_is_initialized(void);
/* paddle.distributed.destroy_process_group: NULL destroys every group and
 * leaves the parallel environment (init may be called again). */
PD_API pd_status pd_dist_destroy_process_group(pd_dist_group *group);
/* True when the library was built with the named backend ("shm", "mpi"). */
PD_API bool pd_dist_backend_available(const char *name);

/* Rank of this process in `group` (NULL: the world); -1 when not a member
 * or not initialised (then the world rank from the environment, as Paddle). */
PD_API int pd_dist_get_rank(const pd_dist_group *group);
/* Size of `group` (NULL: the world); the environment's when not initialised. */
PD_API int pd_dist_get_world_size(const pd_dist_group *group);

typedef struct pd_dist_new_group_opts {
  const char *backend; /* NULL: the world's backend */
  double timeout_s;    /* 0: the world's timeout */
} pd_dist_new_group_opts;

/* paddle.distributed.new_group(ranks): a group of the given global ranks
 * (NULL / 0: all). Must be called by every process of the world, members
 * or not, in the same order. Returns the group (owned by the environment;
 * non-members get a group whose rank is -1). */
PD_API pd_dist_group *pd_dist_new_group(const int *ranks, int nranks, const pd_dist_new_group_opts *opts);
/* The group with this id (0: the world); NULL when none. */
PD_API pd_dist_group *pd_dist_get_group(int id);
PD_API int pd_dist_group_id(const pd_dist_group *group);
PD_API int pd_dist_group_nranks(const pd_dist_group *group);
/* This process's rank in the group, -1 when not a member. */
PD_API int pd_dist_group_rank(const pd_dist_group *group);
PD_API bool pd_dist_group_is_member(const pd_dist_group *group);
/* Group rank of a global rank, -1 when it is not in the group. */
PD_API int pd_dist_group_get_group_rank(const pd_dist_group *group, int global_rank);
/* The global ranks of the group, in group-rank order (borrowed). */
PD_API const int *pd_dist_group_ranks(const pd_dist_group *group);
/* "shm" or "mpi". */
PD_API const char *pd_dist_group_backend(const pd_dist_group *group);

/* ---- tasks ------------------------------------------------------------- */
typedef struct pd_dist_task pd_dist_task;

/* Blocks until the task completes; its status (the error of the
 * communication, if any). Waiting twice returns the same status. */
PD_API pd_status pd_dist_task_wait(pd_dist_task *task);
PD_API bool pd_dist_task_is_completed(pd_dist_task *task);
/* Frees the task, waiting for it first if it is still running. NULL: no-op. */
PD_API void pd_dist_task_release(pd_dist_task *task);

/* ---- collectives ------------------------------------------------------- */
typedef struct pd_dist_opts {
  pd_dist_group *group; /* NULL: the world */
  pd_dist_task **task;  /* non-NULL: asynchronous (sync_op=False), *task receives the task */
} pd_dist_opts;

/* Tensors must be contiguous, on the CPU, with the same dtype and element
 * count on every rank (checked: a mismatch is an error on every rank). */
PD_API pd_status pd_dist_all_reduce(pd_tensor *tensor, pd_reduce_op op, const pd_dist_opts *opts);
PD_API pd_status pd_dist_broadcast(pd_tensor *tensor, int src, const pd_dist_opts *opts);
/* Only dst's tensor receives the result; the others keep their input. */
PD_API pd_status pd_dist_reduce(pd_tensor *tensor, int dst, pd_reduce_op op, const pd_dist_opts *opts);
/* tensor_list has one slot per group rank: NULL slots receive new tensors
 * (the caller owns them), others are written in place (same shape and
 * dtype as `tensor`). */
PD_API pd_status pd_dist_all_gather(pd_tensor **tensor_list, pd_tensor *tensor, const pd_dist_opts *opts);
/* The gathered tensors concatenated along axis 0 into `out`, whose first
 * dimension is nranks times the input's. */
PD_API pd_status pd_dist_all_gather_into_tensor(pd_tensor *out, pd_tensor *tensor, const pd_dist_opts *opts);
/* all_gather_object over bytes: objs[i] receives a malloc'ed copy of rank
 * i's buffer and lens[i] its length (both arrays of nranks slots). Sync only. */
PD_API pd_status pd_dist_all_gather_object(void **objs, size_t *lens, const void *obj, size_t len,
                                           const pd_dist_opts *opts);
/* Output on group rank i = the reduction over ranks of tensor_list[i]. */
PD_API pd_status pd_dist_reduce_scatter(pd_tensor *tensor, pd_tensor **tensor_list, pd_reduce_op op,
                                        const pd_dist_opts *opts);
/* out_list[j] on rank i = in_list[i] of rank j; NULL out slots get new
 * tensors shaped like in_list[i]. */
PD_API pd_status pd_dist_alltoall(pd_tensor **out_list, pd_tensor **in_list, const pd_dist_opts *opts);
/* Along axis 0: in_split_sizes[j] rows go to rank j, out_split_sizes[j]
 * rows come from rank j; NULL = equal splits. */
PD_API pd_status pd_dist_alltoall_single(pd_tensor *out, pd_tensor *in, const int64_t *in_split_sizes,
                                         const int64_t *out_split_sizes, const pd_dist_opts *opts);
/* src supplies tensor_list (one per group rank; ignored elsewhere). */
PD_API pd_status pd_dist_scatter(pd_tensor *tensor, pd_tensor **tensor_list, int src,
                                 const pd_dist_opts *opts);
/* dst receives gather_list (one slot per group rank, NULL slots filled with
 * new tensors; ignored elsewhere). */
PD_API pd_status pd_dist_gather(pd_tensor *tensor, pd_tensor **gather_list, int dst,
                                const pd_dist_opts *opts);
PD_API pd_status pd_dist_send(pd_tensor *tensor, int dst, const pd_dist_opts *opts);
PD_API pd_status pd_dist_recv(pd_tensor *tensor, int src, const pd_dist_opts *opts);
/* isend / irecv: always asynchronous; *task receives the task. */
PD_API pd_status pd_dist_isend(pd_tensor *tensor, int dst, pd_dist_group *group, pd_dist_task **task);
PD_API pd_status pd_dist_irecv(pd_tensor *tensor, int src, pd_dist_group *group, pd_dist_task **task);
PD_API pd_status pd_dist_barrier(pd_dist_group *group);

/* A tensor whose storage lives in the group's shared segment (shm backend),
 * so a collective on it needs no copy in or out; elsewhere an ordinary
 * tensor. Collective: every member calls it in the same order with the same
 * dtype and shape. Zero-filled. */
PD_API pd_tensor *pd_dist_alloc_shared(pd_dist_group *group, pd_dtype dtype, int ndim, const int64_t *shape);

/* ---- spawn -------------------------------------------------------------- */
typedef struct pd_dist_spawn_opts {
  const char *backend; /* exported to the children as PADDLEC_COMM_BACKEND; NULL: auto */
} pd_dist_spawn_opts;

/* paddle.distributed.spawn: runs fn(rank, arg) in nprocs child processes
 * (nprocs <= 0: the number of online CPUs) with the launcher's environment
 * contract, waits for all of them and returns PD_OK when every child
 * returned 0. When one fails the others are terminated and the error reads
 * "Process N terminated with exit code X" (or "with signal NAME"). */
PD_API pd_status pd_dist_spawn(int (*fn)(int rank, void *arg), void *arg, int nprocs,
                               const pd_dist_spawn_opts *opts);

/* Deprecated names, kept for one release (docs/architecture.md, "Names"). */
#define pd_dist_task_free pd_dist_task_release
#define pd_dist_env_clear pd_dist_env_free

#ifdef __cplusplus
}
#endif

#endif
