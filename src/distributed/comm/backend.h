/* The backend interface under the collective API: raw buffers, one group.
 *
 * src/distributed/comm/collective_api.c turns tensors into these calls; each
 * backend (shm: shm_collectives.c, shm_p2p.c, shm_segment.c, shm_sync.c;
 * mpi: mpi_backend.c and the mpi_*.c beside it) implements them synchronously.
 * Calls on one pd_comm come from one thread at a time for the collectives,
 * while sends and receives may each run on their own thread concurrently
 * with the collectives (isend/irecv must not deadlock a pairwise exchange).
 *
 * Every call: counts in elements, ranks are GROUP ranks, PD_OK or a negative
 * status with pd_set_error naming the op, the ranks and what each called.
 * A backend checks the signature of every collective against the other
 * ranks' (pd_comm_sig) before moving data, and marks the comm broken
 * (pd_comm_break) after a failure so later calls fail fast. */
#ifndef PADDLEC_DIST_COMM_BACKEND_H
#define PADDLEC_DIST_COMM_BACKEND_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "../../kernels/cpu/comm_reduce.h"
#include "paddlec/core.h"
#include "paddlec/distributed.h"

typedef enum pd_comm_kind {
  PD_COMM_ALL_REDUCE = 1,
  PD_COMM_BROADCAST,
  PD_COMM_REDUCE,
  PD_COMM_ALL_GATHER,
  PD_COMM_REDUCE_SCATTER,
  PD_COMM_ALLTOALL,
  PD_COMM_SCATTER,
  PD_COMM_GATHER,
  PD_COMM_BARRIER,
  PD_COMM_SEND,
  PD_COMM_RECV,
  PD_COMM_NUM_KINDS
} pd_comm_kind;

/* What one rank called: compared across ranks before any data moves. For
 * alltoall `count` is the total number of elements this rank sends. */
typedef struct pd_comm_sig {
  uint64_t seq;   /* collective sequence number in the group, from 1 */
  uint64_t count; /* elements */
  int32_t kind;   /* pd_comm_kind */
  int32_t dtype;  /* pd_dtype */
  int32_t op;     /* pd_reduce_op, -1 when none */
  int32_t root;   /* group rank of src/dst, -1 when none */
} pd_comm_sig;

/* "all_reduce(float32, 1024 elements, SUM)" into buf. */
const char *pd_comm_sig_str(const pd_comm_sig *s, char *buf, size_t cap);
const char *pd_comm_kind_name(pd_comm_kind k);
/* True when the two signatures describe the same collective. */
int pd_comm_sig_equal(const pd_comm_sig *a, const pd_comm_sig *b);

/* Sets the mismatch error for `me` (group rank) given every rank's
 * signature (sigs[i], present[i] = it arrived): names the disagreeing ranks
 * and what each called, and the ranks that never arrived. Returns PD_ERR_COMM. */
pd_status pd_comm_mismatch_error(const char *backend, int group_id, int me, int nranks,
                                 const pd_comm_sig *sigs, const int *present, const int *global_ranks,
                                 const char *reason);

typedef struct pd_comm pd_comm;

typedef struct pd_comm_ops {
  const char *name;
  /* true: all_reduce, reduce and reduce_scatter take PD_REDUCE_AVG (each
   * rank divides its slice as it reduces it); false: the caller passes SUM
   * and divides the result */
  bool avg_native;
  pd_status (*all_reduce)(pd_comm *c, const void *in, void *out, size_t count, pd_dtype dt, pd_reduce_op op);
  pd_status (*broadcast)(pd_comm *c, void *buf, size_t count, pd_dtype dt, int root);
  /* out is read only at root (may equal in); the others' out is untouched */
  pd_status (*reduce)(pd_comm *c, const void *in, void *out, size_t count, pd_dtype dt, pd_reduce_op op,
                      int root);
  /* out holds nranks * count elements, rank i's block at i * count */
  pd_status (*all_gather)(pd_comm *c, const void *in, void *out, size_t count, pd_dtype dt);
  /* in holds nranks * count elements; out (count) = reduction of block `rank` */
  pd_status (*reduce_scatter)(pd_comm *c, const void *in, void *out, size_t count, pd_dtype dt,
                              pd_reduce_op op);
  /* send_counts[j] elements (packed in rank order in `in`) go to rank j;
   * recv_counts[j] elements come from rank j (packed in `out`) */
  pd_status (*alltoall)(pd_comm *c, const void *in, const size_t *send_counts, void *out,
                        const size_t *recv_counts, pd_dtype dt);
  /* in (nranks * count, read at root only) -> out (count) */
  pd_status (*scatter)(pd_comm *c, const void *in, void *out, size_t count, pd_dtype dt, int root);
  /* in (count) -> out (nranks * count, written at root only) */
  pd_status (*gather)(pd_comm *c, const void *in, void *out, size_t count, pd_dtype dt, int root);
  pd_status (*send)(pd_comm *c, const void *buf, size_t count, pd_dtype dt, int peer);
  pd_status (*recv)(pd_comm *c, void *buf, size_t count, pd_dtype dt, int peer);
  pd_status (*barrier)(pd_comm *c);
  /* Optional (NULL: the caller packs and unpacks around the plain call):
   * all_gather, reduce_scatter and alltoall with the side that holds every
   * rank's block in the blocked layout of blocked_layout.h (rows x cols
   * elements per block), so a tensor's blocks along any dim move without a
   * packed copy. They are the same collectives as the plain ones (same
   * signature, count = rows * cols): ranks may mix the two forms.
   * all_gather: in contiguous (rows * cols), out blocked. */
  pd_status (*all_gather_blocked)(pd_comm *c, const void *in, void *out, size_t rows, size_t cols,
                                  pd_dtype dt);
  /* reduce_scatter: in blocked, out contiguous (rows * cols). */
  pd_status (*reduce_scatter_blocked)(pd_comm *c, const void *in, void *out, size_t rows, size_t cols,
                                      pd_dtype dt, pd_reduce_op op);
  /* alltoall of `count` elements per peer: in blocked with in_rows rows per
   * block (block j goes to rank j), out blocked with out_rows rows per block
   * (block j comes from rank j); count is a multiple of both. */
  pd_status (*alltoall_blocked)(pd_comm *c, const void *in, size_t in_rows, void *out, size_t out_rows,
                                size_t count, pd_dtype dt);
  /* Optional: nbytes of memory every rank can address for zero-copy
   * collectives (collective call, same size on every rank). NULL when the
   * backend has none (the caller then uses ordinary memory). */
  void *(*alloc_shared)(pd_comm *c, size_t nbytes);
  void (*free_shared)(pd_comm *c, void *ptr);
  void (*destroy)(pd_comm *c);
  /* Optional: called once, when pd_comm_break first marks c broken (the
   * message is in c->broken_msg). */
  void (*on_break)(pd_comm *c);
} pd_comm_ops;

/* Everything a backend needs to build a group's communicator. */
typedef struct pd_comm_init {
  int group_id;
  int rank;                /* in the group */
  int nranks;              /* group size */
  const int *global_ranks; /* nranks entries */
  int world_rank, world_size;
  const int *world_pids; /* pid of every world rank (same-host backends watch them) */
  const char *job_key;   /* unique per job: names shared segments */
  double timeout_s;
  double warn_s; /* "still waiting" warnings every warn_s seconds; 0: PD_COMM_WARN_DEFAULT_S */
} pd_comm_init;

struct pd_comm {
  const pd_comm_ops *ops;
  int group_id, rank, nranks;
  int *global_ranks; /* owned copy */
  double timeout_s;
  double warn_s;     /* interval of the "still waiting" warnings */
  uint64_t seq;      /* collectives issued so far */
  atomic_int refs;   /* the group and every shared tensor hold one */
  atomic_int broken; /* 0 healthy, 1 being marked, 2 broken (broken_msg set) */
  char broken_msg[1024];
  void *impl;
};

/* Set on the lanes' worker threads: work there runs beside the caller's
 * computation (sync_op=False), so waits should leave the core early. */
extern _Thread_local int pd_comm_async_thread;

/* Fills the common fields of c from init (allocates global_ranks). */
pd_status pd_comm_base_init(pd_comm *c, const pd_comm_ops *ops, const pd_comm_init *init);
void pd_comm_base_clear(pd_comm *c);
/* A comm lives while its group or a tensor in its shared memory does. */
pd_comm *pd_comm_retain(pd_comm *c);
void pd_comm_release(pd_comm *c); /* the last reference destroys it */
/* Records the current error as the reason the comm is broken. */
void pd_comm_break(pd_comm *c);
/* PD_ERR_COMM with the broken message when broken, else PD_OK. */
pd_status pd_comm_check_broken(pd_comm *c, const char *what);

/* Seconds from the environment variable `var`: unset or empty gives dflt;
 * anything but a finite number > 0 ("-1", "0", "abc", "5s") is
 * PD_ERR_INVALID naming the variable and its value. */
pd_status pd_comm_env_seconds(const char *var, double dflt, double *out);
/* The timeout of a comm: `asked` seconds when > 0, else
 * $PADDLEC_COMM_TIMEOUT, else 1800 (Paddle's 30 minutes). A negative or
 * non-finite `asked` is PD_ERR_INVALID (what: the call, for the message). */
pd_status pd_comm_timeout(double asked, const char *what, double *out);

/* While a wait lasts, a warning every $PADDLEC_COMM_WARN_INTERVAL seconds
 * (default 60) names who has not arrived, as NCCL's watchdog does; the
 * wait itself still ends only at the timeout. */
#define PD_COMM_WARN_DEFAULT_S 60.0
pd_status pd_comm_warn_interval(double *out);
/* The warning, on stderr: "paddle.c warning: rank 0 (pid 1234) has waited
 * 60 s in <what> for <missing>; it gives up after 1800 s
 * (PADDLEC_COMM_TIMEOUT)". */
void pd_comm_warn_waiting(int rank, const char *what, const char *missing, double waited_s, double timeout_s);
/* "rank 3" or "ranks 1, 2" into buf: the names[i] with pending[i] set. */
const char *pd_comm_rank_list(const int *names, const int *pending, int n, char *buf, size_t cap);

/* Backends. Each returns NULL with an error set when it cannot start. */
pd_comm *pd_comm_shm_create(const pd_comm_init *init);
#ifdef PADDLEC_WITH_MPI
pd_comm *pd_comm_mpi_create(const pd_comm_init *init);
/* MPI bootstrap for runs under mpirun without a master endpoint. */
pd_status pd_comm_mpi_init_world(int *rank, int *size);
/* Allgather of a fixed-size record over MPI_COMM_WORLD (bootstrap only). */
pd_status pd_comm_mpi_world_allgather(const void *mine, void *all, size_t bytes);
/* Leaves MPI when this library initialised it. When a comm of this
 * process broke (a peer missing, an MPI error), every rank may not reach
 * MPI_Finalize: the process first waits at most
 * min(that comm's timeout, PD_MPI_EXIT_GRACE_S) for the others at an exit
 * barrier and, when they do not all come, aborts the job (MPI_Abort)
 * instead of hanging in MPI_Finalize. */
void pd_comm_mpi_finalize(void);
#define PD_MPI_EXIT_GRACE_S 10.0
#endif

/* The kernel's reduction for a collective's op (the two enums are kept apart
 * so the compute layer does not include the distributed API). */
static inline pdk_reduce_op pd_comm_kernel_op(pd_reduce_op op) {
  switch (op) {
    case PD_REDUCE_MAX:
      return PDK_REDUCE_MAX;
    case PD_REDUCE_MIN:
      return PDK_REDUCE_MIN;
    case PD_REDUCE_PROD:
      return PDK_REDUCE_PROD;
    case PD_REDUCE_AVG:
      return PDK_REDUCE_AVG;
    default:
      return PDK_REDUCE_SUM;
  }
}

#endif
