/* Shared pieces of the Open MPI backend (mpi_*.c): the per-group state,
 * dtype and reduce-op mapping, the polling waits with a timeout and the
 * signature exchange. */
#ifndef PADDLEC_DIST_COMM_MPI_INTERNAL_H
#define PADDLEC_DIST_COMM_MPI_INTERNAL_H

#include <mpi.h>
#include <stdatomic.h>

#include "backend.h"

/* One group's MPI state. Three communicators over the same members, so the
 * three kinds of traffic never match each other's messages:
 *   coll: the data of collectives (MPI collectives, and alltoall's
 *         point-to-point messages tagged by sequence number);
 *   sig:  the signature exchange before every collective;
 *   p2p:  send/recv, which may run on other threads meanwhile. */
typedef struct pd_mpi_comm {
  MPI_Comm coll, sig, p2p;
  int tag_ub;         /* MPI_TAG_UB of these communicators */
  size_t chunk_bytes; /* largest single MPI transfer (counts are int) */
  /* signature exchange: my message and every rank's (sig_stride bytes
   * each: a pd_comm_sig, then for alltoall 2 * nranks uint64 counts) */
  unsigned char *sig_out, *sig_in;
  size_t sig_stride;
  MPI_Request *reqs;           /* 2 * nranks */
  int leak_sig_buffers;        /* a send was abandoned: its buffer must outlive the comm */
  atomic_uint_fast64_t p2p_id; /* ids of send calls: pick the data/ack tags */
} pd_mpi_comm;

#define PD_MPI(c) ((pd_mpi_comm *)(c)->impl)

/* ---- mpi_backend.c ---- */
const pd_comm_ops *pd_mpi_ops(void);

/* ---- mpi_world.c ---- */
/* The world communicator ordered by the job's ranks (MPI_COMM_NULL until the
 * world group is created); groups are carved out of it. */
MPI_Comm pd_mpi_world_comm(void);
/* Replaces (and frees) the recorded world communicator. */
void pd_mpi_set_world_comm(MPI_Comm world);
/* MPI_COMM_WORLD duplicated with errors returned (after init). */
MPI_Comm pd_mpi_boot_comm(void);
/* Initialised, with MPI_THREAD_MULTIPLE, and not finalised: else an error. */
pd_status pd_mpi_require_ready(const char *what);
/* Records that comm c broke: pd_comm_mpi_finalize then ends the job with
 * MPI_Abort unless every rank reaches the exit in time. */
void pd_mpi_note_broken(pd_comm *c);
/* Text of an MPI error code: "MPI_ERR_TRUNCATE: message truncated". */
const char *pd_mpi_error_string(int code, char *buf, int cap);

/* ---- mpi_types.c ---- */
/* The MPI datatype that carries pd dtype dt (float16/bfloat16 as 16-bit
 * integers, bool as bytes). */
MPI_Datatype pd_mpi_datatype(pd_dtype dt);
/* The MPI reduction for (dt, op): a built-in one where MPI has it, else a
 * user op over pdk_comm_reduce. AVG is SUM (the caller divides).
 * Ops are created on first use; pd_mpi_free_ops releases them. */
pd_status pd_mpi_reduce_op(pd_dtype dt, pd_reduce_op op, MPI_Op *out);
void pd_mpi_free_ops(void);
/* Bytes [off, off + len) of a piece of a blocked buffer (blocked_layout.h
 * counted in bytes: rows of cols bytes, ld apart; len <= INT_MAX) as one
 * committed datatype of len MPI_BYTEs starting *disp bytes into the piece:
 * the rest of a row, whole rows (an hvector), the start of the next. An MPI
 * error code; the caller frees *out. */
int pd_mpi_blocked_range(size_t cols, size_t ld, size_t off, size_t len, MPI_Datatype *out, size_t *disp);

/* ---- mpi_wait.c ---- */
double pd_mpi_now(void);
/* What a long wait warns about, every warn_s seconds (see
 * pd_comm_warn_waiting). */
typedef struct pd_mpi_warn {
  const char *what; /* "mpi all_reduce(float32, 4 elements, SUM) #2 on group 0" */
  int me;           /* this process's global rank */
  double warn_s, timeout_s;
  const MPI_Request *per_rank; /* member i has not arrived while per_rank[i] is pending; NULL */
  const int *names;            /* the global rank of each member (with per_rank) */
  int nmembers;
  int me_member; /* this process's index among the members (skipped) */
  int peer;      /* without per_rank: the global rank waited for; -1: "the other ranks" */
} pd_mpi_warn;
/* The warning of a collective or send/recv on c (per_rank, peer: as above). */
pd_mpi_warn pd_mpi_comm_warn(pd_comm *c, const char *what, const MPI_Request *per_rank, int peer);

/* Polls reqs[0..n) (MPI_REQUEST_NULL entries are done) until all complete
 * or `deadline` (pd_mpi_now seconds) passes, warning as `warn` says
 * meanwhile (NULL: silent). PD_OK; PD_ERR_COMM on timeout (the requests
 * still pending are left as they are) or on an MPI error; no error message
 * is set. *mpi_err receives the failing MPI code. */
pd_status pd_mpi_poll(MPI_Request *reqs, int n, double deadline, int *mpi_err, const pd_mpi_warn *warn);
/* Cancels what can be cancelled (receives) and frees the rest. Returns 1
 * when a request could not be cancelled (its buffer may still be read). */
int pd_mpi_abandon(MPI_Request *reqs, int n);

/* Waits for the data phase of a collective: on a timeout or an MPI error
 * sets an error naming the call and breaks the comm. */
pd_status pd_mpi_wait_data(pd_comm *c, MPI_Request *reqs, int n, double deadline, const pd_comm_sig *sig);
/* The signature check before a collective: a new sequence number, the
 * exchange with every member and the comparison. peer_counts (alltoall
 * only, else NULL): per peer, what this rank sends (send_counts) and
 * expects (recv_counts). Fills *sig; on a mismatch or a missing rank sets
 * the error, breaks the comm and returns PD_ERR_COMM. */
pd_status pd_mpi_check_sig(pd_comm *c, pd_comm_kind kind, pd_dtype dt, size_t count, int op, int root,
                           const size_t *send_counts, const size_t *recv_counts, pd_comm_sig *sig);
/* Elements of dt per chunk of a collective on c (>= 1, <= INT_MAX). */
size_t pd_mpi_chunk_elems(pd_comm *c, pd_dtype dt);

/* ---- mpi_tune.c ---- */
/* MPI_Iallreduce, with Open MPI's ring algorithm for large messages (every
 * rank must pass the same n and nranks). */
int pd_mpi_iallreduce(const void *in, void *out, int n, MPI_Datatype t, MPI_Op op, MPI_Comm comm, int nranks,
                      size_t esz, MPI_Request *req);
/* Releases the MPI_T handle; before MPI_Finalize. */
void pd_mpi_tune_finalize(void);

/* ---- mpi_p2p.c ---- */
pd_status pd_mpi_send(pd_comm *c, const void *buf, size_t count, pd_dtype dt, int peer);
pd_status pd_mpi_recv(pd_comm *c, void *buf, size_t count, pd_dtype dt, int peer);
pd_status pd_mpi_alltoall(pd_comm *c, const void *in, const size_t *send_counts, void *out,
                          const size_t *recv_counts, pd_dtype dt);
/* alltoall with blocked buffers (backend.h's alltoall_blocked): each block
 * moves as datatypes over the blocked rows, in the same messages as the
 * plain alltoall (so ranks may mix the forms); nothing is packed. */
pd_status pd_mpi_alltoall_blocked(pd_comm *c, const void *in, size_t in_rows, void *out, size_t out_rows,
                                  size_t count, pd_dtype dt);

#endif
