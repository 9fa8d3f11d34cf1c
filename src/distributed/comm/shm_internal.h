/* The shm backend: one shared segment per group on one host.
 *
 * Layout of a group's segment (every part cache-line aligned):
 *   shm_header                       magic, sizes, the futex word, abort state
 *   shm_ctl[nranks]                  per rank: barrier counter, signatures,
 *                                    small payloads (by collective parity)
 *   shm_ring[nranks * nranks]        point-to-point byte streams i -> j
 *   staging[nranks][2][chunk_bytes]  per rank, two halves by step parity
 *
 * Every collective starts with an entry barrier at which each rank has
 * posted its signature; the ranks compare them before any data moves.
 * Data moves in chunks ("steps"): a rank copies its chunk into its staging
 * half, a barrier, every rank reduces its own slice of the chunk reading all
 * ranks' halves, a barrier, every rank gathers the reduced slices. The two
 * halves alternate with a step counter shared by all collectives: a rank
 * writes a half again only after a barrier that every rank passes after it
 * has finished reading that half, so no extra barrier is needed. */
#ifndef PADDLEC_DIST_SHM_INTERNAL_H
#define PADDLEC_DIST_SHM_INTERNAL_H

#include <stdatomic.h>
#include <stdint.h>

#include "backend.h"

#define SHM_MAGIC 0x7061646c63736d31ull /* "padlcsm1" */
#define SHM_LINE 128
#define SHM_SMALL_BYTES 1024 /* payloads up to this size travel inside the control block */
#define SHM_MAX_ALLOCS 64
/* Results of at least this many bytes are written with streaming stores
 * (stream_copy.h): a large result is not read again soon, and rows written
 * by ordinary stores each cost a read of the line first (a strided
 * destination copied row by row ran at half the speed of one memcpy). */
#define SHM_STREAM_BYTES (4u << 20)

/* The first bytes of every segment the backend creates: who created it,
 * so a segment left by a creator that died before unlinking it (killed
 * while the other ranks were still mapping) can be recognised and removed. */
#define SHM_STAMP_MAGIC 0x7064637374616d70ull /* "pdcstamp" */
typedef struct shm_stamp {
  uint64_t magic; /* SHM_STAMP_MAGIC once pid and pid_ns are written */
  int64_t creator_pid;
  uint64_t pid_ns; /* the creator's pid namespace (its inode number) */
} shm_stamp;

typedef struct shm_header {
  shm_stamp stamp;
  uint64_t magic;
  int32_t nranks;
  atomic_int ready;
  atomic_int attached;
  uint64_t total_bytes;
  uint64_t chunk_bytes;
  uint64_t ring_bytes;
  _Alignas(SHM_LINE) atomic_uint wake; /* futex word: bumped on every state change while someone sleeps */
  atomic_int nwaiters;
  _Alignas(SHM_LINE) atomic_int abort_rank; /* -1, or the group rank that broke the group */
  char abort_msg[1024];
} shm_header;

/* What a rank posts at a collective's entry (by collective parity). */
typedef struct shm_post {
  pd_comm_sig sig;
  int64_t zc_alloc; /* zero-copy: id of the shared allocation, -1 none */
  uint64_t zc_off;  /* and the byte offset inside this rank's block */
  uint64_t aux;     /* per-collective extra (alltoall: largest piece for one peer) */
} shm_post;

typedef struct shm_ctl {
  _Alignas(SHM_LINE) atomic_uint_fast64_t arrive; /* barriers passed */
  int32_t pid;
  _Alignas(SHM_LINE) shm_post post[2];
  _Alignas(SHM_LINE) unsigned char small[2][SHM_SMALL_BYTES];
} shm_ctl;

/* A byte stream from one rank to another: head = bytes written, tail =
 * bytes read; data[pos % ring_bytes]. */
typedef struct shm_ring {
  _Alignas(SHM_LINE) atomic_uint_fast64_t head;
  _Alignas(SHM_LINE) atomic_uint_fast64_t tail;
  _Alignas(SHM_LINE) unsigned char data[];
} shm_ring;

typedef struct shm_alloc {
  unsigned char *base; /* nranks blocks of block_bytes; NULL: a free slot */
  size_t block_bytes, map_bytes;
  uint64_t id; /* the group's allocation number: equal on every rank */
} shm_alloc;

typedef struct shm_comm {
  pd_comm base;
  shm_header *hdr;
  size_t map_bytes;
  shm_ctl *ctl;         /* nranks */
  unsigned char *rings; /* nranks * nranks rings of ring_stride bytes */
  size_t ring_stride;
  unsigned char *stage; /* nranks * 2 * chunk_bytes */
  size_t chunk_bytes;
  int oversubscribed;                    /* more ranks than online CPUs: yield while waiting */
  uint64_t epoch;                        /* barriers this rank has entered */
  uint64_t step;                         /* staging steps so far (parity picks the half) */
  uint64_t *p2p_sent_seq, *p2p_recv_seq; /* messages per peer (send and recv threads own one each) */
  int *pidfds;                           /* per group rank; -1 for self or unknown */
  int *pids;
  char name[160];     /* segment name (for allocations derived from it) */
  int nallocs;        /* slots in use or freed */
  uint64_t alloc_seq; /* allocations made so far (names and ids) */
  shm_alloc allocs[SHM_MAX_ALLOCS];
} shm_comm;

static inline shm_ring *shm_ring_at(shm_comm *s, int from, int to) {
  return (shm_ring *)(s->rings + ((size_t)from * (size_t)s->base.nranks + (size_t)to) * s->ring_stride);
}
static inline unsigned char *shm_stage(shm_comm *s, int rank, uint64_t step) {
  return s->stage + ((size_t)rank * 2 + (size_t)(step & 1)) * s->chunk_bytes;
}

/* ---- shm_sync.c ---- */
/* What a wait is for, for error messages. */
typedef struct shm_wait_ctx {
  const char *what;       /* "all_reduce(...)" */
  const pd_comm_sig *sig; /* this rank's signature, NULL for p2p */
  int peer;               /* p2p peer (group rank) or -1 */
} shm_wait_ctx;

/* The entry barrier of a collective: posts `post`, waits for every rank,
 * compares signatures (then every rank's post is in ctl[i].post[seq & 1]). */
pd_status shm_enter(shm_comm *s, const shm_post *post);
/* A data barrier inside a collective. */
pd_status shm_barrier(shm_comm *s, const shm_wait_ctx *w);
/* Waits until *word >= target (a counter another rank advances). */
pd_status shm_wait_u64(shm_comm *s, atomic_uint_fast64_t *word, uint64_t target, const shm_wait_ctx *w);
/* Tells sleepers that shared state changed. */
void shm_notify(shm_comm *s);
/* Records the current error in the header so other ranks fail fast, and
 * marks the comm broken. Returns the current status. */
pd_status shm_fail(shm_comm *s);

/* ---- shm_segment.c ---- */
/* Removes /dev/shm/paddlec-* segments whose creator (named in the stamp) is
 * gone, when it ran in this pid namespace. Returns how many. */
int shm_remove_stale_segments(void);
pd_status shm_map_group(shm_comm *s, const pd_comm_init *init);
void shm_unmap_group(shm_comm *s);
void *shm_alloc_shared(pd_comm *c, size_t nbytes);
void shm_free_shared(pd_comm *c, void *ptr);
/* Zero-copy lookup: the slot of the allocation holding [p, p+n) in this
 * rank's block (-1 when none); *off = the offset inside the block. */
int shm_find_alloc(shm_comm *s, const void *p, size_t n, uint64_t *off);

/* ---- shm_p2p.c ---- */
pd_status shm_send(pd_comm *c, const void *buf, size_t count, pd_dtype dt, int peer);
pd_status shm_recv(pd_comm *c, void *buf, size_t count, pd_dtype dt, int peer);

#endif
