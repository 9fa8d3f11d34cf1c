/* The Open MPI backend: a group is three MPI communicators over its members
 * (see pd_mpi_comm). Every collective first checks its signature against
 * every other member's (mpi_wait.c), then moves data with MPI's
 * nonblocking collectives, polled with the comm's timeout. Counts beyond
 * one chunk (1 GiB by default, MPI counts are int) are moved chunk by
 * chunk. */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "blocked_layout.h"
#include "mpi_internal.h"

static pd_status mpi_call_failed(pd_comm *c, int rc, const char *call, const pd_comm_sig *sig) {
  char s[160], es[MPI_MAX_ERROR_STRING];
  pd_set_error(PD_ERR_COMM, "mpi %s on group %d (rank %d): %s failed: %s", pd_comm_sig_str(sig, s, sizeof s),
               c->group_id, c->global_ranks[c->rank], call, pd_mpi_error_string(rc, es, sizeof es));
  pd_comm_break(c);
  return PD_ERR_COMM;
}

/* After the signatures agree: the arguments every rank shares. */
static pd_status check_args(pd_comm *c, const char *what, pd_dtype dt, int root) {
  if (pd_mpi_datatype(dt) == MPI_DATATYPE_NULL)
    return pd_set_error(PD_ERR_DTYPE, "mpi %s: invalid dtype %d", what, (int)dt);
  if (root != -1 && (root < 0 || root >= c->nranks))
    return pd_set_error(PD_ERR_INDEX, "mpi %s: root %d is not a rank of group %d (size %d)", what, root,
                        c->group_id, c->nranks);
  return PD_OK;
}

static size_t min_sz(size_t a, size_t b) { return a < b ? a : b; }

/* n elements of t with an extent of `stride` elements: rank i's block of a
 * chunked all_gather / gather / scatter then lands at i * stride. */
static int strided_block(int n, MPI_Datatype t, size_t stride, size_t esz, MPI_Datatype *out) {
  MPI_Datatype contig;
  int rc = MPI_Type_contiguous(n, t, &contig);
  if (rc != MPI_SUCCESS) return rc;
  rc = MPI_Type_create_resized(contig, 0, (MPI_Aint)(stride * esz), out);
  MPI_Type_free(&contig);
  if (rc == MPI_SUCCESS) rc = MPI_Type_commit(out);
  return rc;
}

static pd_status mpi_all_reduce(pd_comm *c, const void *in, void *out, size_t count, pd_dtype dt,
                                pd_reduce_op op) {
  pd_comm_sig sig;
  pd_status st = pd_mpi_check_sig(c, PD_COMM_ALL_REDUCE, dt, count, (int)op, -1, NULL, NULL, &sig);
  MPI_Op mop;
  if (st == PD_OK) st = check_args(c, "all_reduce", dt, -1);
  if (st == PD_OK) st = pd_mpi_reduce_op(dt, op, &mop);
  if (st != PD_OK) return st;
  MPI_Datatype t = pd_mpi_datatype(dt);
  size_t esz = pd_dtype_size(dt), chunk = pd_mpi_chunk_elems(c, dt);
  double deadline = pd_mpi_now() + c->timeout_s;
  for (size_t off = 0; off < count; off += chunk) {
    int n = (int)min_sz(chunk, count - off);
    const void *src = in == out ? MPI_IN_PLACE : (const char *)in + off * esz;
    MPI_Request r;
    int rc = pd_mpi_iallreduce(src, (char *)out + off * esz, n, t, mop, PD_MPI(c)->coll, c->nranks, esz, &r);
    if (rc != MPI_SUCCESS) return mpi_call_failed(c, rc, "MPI_Iallreduce", &sig);
    if ((st = pd_mpi_wait_data(c, &r, 1, deadline, &sig)) != PD_OK) return st;
  }
  return PD_OK;
}

static pd_status mpi_broadcast(pd_comm *c, void *buf, size_t count, pd_dtype dt, int root) {
  pd_comm_sig sig;
  pd_status st = pd_mpi_check_sig(c, PD_COMM_BROADCAST, dt, count, -1, root, NULL, NULL, &sig);
  if (st == PD_OK) st = check_args(c, "broadcast", dt, root);
  if (st != PD_OK) return st;
  MPI_Datatype t = pd_mpi_datatype(dt);
  size_t esz = pd_dtype_size(dt), chunk = pd_mpi_chunk_elems(c, dt);
  double deadline = pd_mpi_now() + c->timeout_s;
  for (size_t off = 0; off < count; off += chunk) {
    MPI_Request r;
    int rc =
        MPI_Ibcast((char *)buf + off * esz, (int)min_sz(chunk, count - off), t, root, PD_MPI(c)->coll, &r);
    if (rc != MPI_SUCCESS) return mpi_call_failed(c, rc, "MPI_Ibcast", &sig);
    if ((st = pd_mpi_wait_data(c, &r, 1, deadline, &sig)) != PD_OK) return st;
  }
  return PD_OK;
}

static pd_status mpi_reduce(pd_comm *c, const void *in, void *out, size_t count, pd_dtype dt, pd_reduce_op op,
                            int root) {
  pd_comm_sig sig;
  pd_status st = pd_mpi_check_sig(c, PD_COMM_REDUCE, dt, count, (int)op, root, NULL, NULL, &sig);
  MPI_Op mop;
  if (st == PD_OK) st = check_args(c, "reduce", dt, root);
  if (st == PD_OK) st = pd_mpi_reduce_op(dt, op, &mop);
  if (st != PD_OK) return st;
  MPI_Datatype t = pd_mpi_datatype(dt);
  size_t esz = pd_dtype_size(dt), chunk = pd_mpi_chunk_elems(c, dt);
  int at_root = c->rank == root;
  double deadline = pd_mpi_now() + c->timeout_s;
  for (size_t off = 0; off < count; off += chunk) {
    const void *src = at_root && in == out ? MPI_IN_PLACE : (const char *)in + off * esz;
    void *dst = at_root ? (char *)out + off * esz : NULL;
    MPI_Request r;
    int rc = MPI_Ireduce(src, dst, (int)min_sz(chunk, count - off), t, mop, root, PD_MPI(c)->coll, &r);
    if (rc != MPI_SUCCESS) return mpi_call_failed(c, rc, "MPI_Ireduce", &sig);
    if ((st = pd_mpi_wait_data(c, &r, 1, deadline, &sig)) != PD_OK) return st;
  }
  return PD_OK;
}

/* all_gather, gather and scatter move one block of `count` elements per
 * rank: rank r's block is elements [r count, (r+1) count) of the buffer
 * that holds them all (every rank's out for all_gather, the root's out for
 * gather, the root's in for scatter). Large counts go in chunks; chunk
 * [off, off+n) of every block at once is one strided datatype on the side
 * holding all blocks. A rank whose own block already sits at its place in
 * that buffer passes MPI_IN_PLACE. */
static pd_status blocks_collective(pd_comm *c, pd_comm_kind kind, const void *in, void *out, size_t count,
                                   pd_dtype dt, int root) {
  const char *name = kind == PD_COMM_ALL_GATHER ? "all_gather"
                     : kind == PD_COMM_GATHER   ? "gather"
                                                : "scatter";
  const char *fn = kind == PD_COMM_ALL_GATHER ? "MPI_Iallgather"
                   : kind == PD_COMM_GATHER   ? "MPI_Igather"
                                              : "MPI_Iscatter";
  pd_comm_sig sig;
  pd_status st = pd_mpi_check_sig(c, kind, dt, count, -1, root, NULL, NULL, &sig);
  if (st == PD_OK) st = check_args(c, name, dt, root);
  if (st != PD_OK || count == 0) return st;
  MPI_Datatype t = pd_mpi_datatype(dt);
  size_t esz = pd_dtype_size(dt), chunk = pd_mpi_chunk_elems(c, dt);
  int scatter = kind == PD_COMM_SCATTER;
  int holds_all = kind == PD_COMM_ALL_GATHER || c->rank == root;
  char *all = scatter ? (char *)(uintptr_t)in : (char *)out;
  char *mine = scatter ? (char *)out : (char *)(uintptr_t)in;
  int place = kind == PD_COMM_ALL_GATHER ? c->rank : root;
  int in_place = holds_all && mine == all + (size_t)place * count * esz;
  double deadline = pd_mpi_now() + c->timeout_s;
  for (size_t off = 0; off < count; off += chunk) {
    int n = (int)min_sz(chunk, count - off);
    MPI_Datatype block = t;
    int rc = n == (int)count || !holds_all ? MPI_SUCCESS : strided_block(n, t, count, esz, &block);
    if (rc != MPI_SUCCESS) return mpi_call_failed(c, rc, "MPI_Type_create_resized", &sig);
    int nb = block == t ? n : 1;
    void *a = holds_all ? all + off * esz : NULL;
    void *m = in_place ? MPI_IN_PLACE : mine + off * esz;
    MPI_Request r;
    if (kind == PD_COMM_ALL_GATHER)
      rc = MPI_Iallgather(m, n, t, a, nb, block, PD_MPI(c)->coll, &r);
    else if (kind == PD_COMM_GATHER)
      rc = MPI_Igather(m, n, t, a, nb, block, root, PD_MPI(c)->coll, &r);
    else
      rc = MPI_Iscatter(a, nb, block, m, n, t, root, PD_MPI(c)->coll, &r);
    if (rc == MPI_SUCCESS) st = pd_mpi_wait_data(c, &r, 1, deadline, &sig);
    if (block != t) MPI_Type_free(&block);
    if (rc != MPI_SUCCESS) return mpi_call_failed(c, rc, fn, &sig);
    if (st != PD_OK) return st;
  }
  return PD_OK;
}

static pd_status mpi_all_gather(pd_comm *c, const void *in, void *out, size_t count, pd_dtype dt) {
  return blocks_collective(c, PD_COMM_ALL_GATHER, in, out, count, dt, -1);
}
static pd_status mpi_gather(pd_comm *c, const void *in, void *out, size_t count, pd_dtype dt, int root) {
  return blocks_collective(c, PD_COMM_GATHER, in, out, count, dt, root);
}
static pd_status mpi_scatter(pd_comm *c, const void *in, void *out, size_t count, pd_dtype dt, int root) {
  return blocks_collective(c, PD_COMM_SCATTER, in, out, count, dt, root);
}

/* all_gather into a blocked out (blocked_layout.h): each rank's block is
 * a vector datatype (rows of cols elements, n * cols apart) that MPI
 * writes in place, chunk by chunk of whole rows. Rows longer than a chunk
 * (or strides past int) gather into a packed buffer first. */
static pd_status mpi_all_gather_blocked(pd_comm *c, const void *in, void *out, size_t rows, size_t cols,
                                        pd_dtype dt) {
  size_t n = (size_t)c->nranks, count = rows * cols, esz = pd_dtype_size(dt);
  size_t chunk = pd_mpi_chunk_elems(c, dt);
  if (rows == 1) return mpi_all_gather(c, in, out, count, dt);
  if (cols > chunk || n * cols > INT_MAX) {
    unsigned char *tmp = malloc(n * count * esz + 1);
    if (!tmp)
      return pd_set_error(PD_ERR_MEMORY, "mpi all_gather: out of memory for %zu bytes", n * count * esz);
    pd_status st = mpi_all_gather(c, in, tmp, count, dt);
    if (st == PD_OK) pd_blocked_unpack(out, tmp, n, count, cols, esz);
    free(tmp);
    return st;
  }
  pd_comm_sig sig;
  pd_status st = pd_mpi_check_sig(c, PD_COMM_ALL_GATHER, dt, count, -1, -1, NULL, NULL, &sig);
  if (st == PD_OK) st = check_args(c, "all_gather", dt, -1);
  if (st != PD_OK || count == 0) return st;
  MPI_Datatype t = pd_mpi_datatype(dt);
  double deadline = pd_mpi_now() + c->timeout_s;
  for (size_t i0 = 0, k; i0 < rows; i0 += k) {
    k = min_sz(rows - i0, chunk / cols);
    MPI_Datatype vec, block;
    int rc = MPI_Type_vector((int)k, (int)cols, (int)(n * cols), t, &vec);
    if (rc == MPI_SUCCESS) {
      rc = MPI_Type_create_resized(vec, 0, (MPI_Aint)(cols * esz), &block);
      MPI_Type_free(&vec);
      if (rc == MPI_SUCCESS && (rc = MPI_Type_commit(&block)) != MPI_SUCCESS) MPI_Type_free(&block);
    }
    if (rc != MPI_SUCCESS) return mpi_call_failed(c, rc, "MPI_Type_vector", &sig);
    MPI_Request r;
    rc = MPI_Iallgather((const char *)in + i0 * cols * esz, (int)(k * cols), t,
                        (char *)out + i0 * n * cols * esz, 1, block, PD_MPI(c)->coll, &r);
    if (rc == MPI_SUCCESS) st = pd_mpi_wait_data(c, &r, 1, deadline, &sig);
    MPI_Type_free(&block);
    if (rc != MPI_SUCCESS) return mpi_call_failed(c, rc, "MPI_Iallgather", &sig);
    if (st != PD_OK) return st;
  }
  return PD_OK;
}

/* One chunk fits MPI_Ireduce_scatter_block. Beyond that, each rank's block
 * is reduced to it chunk by chunk with MPI_Ireduce, one root at a time: when
 * out == in, root 0's chunk is consumed before another root's result
 * overwrites it. */
static pd_status mpi_reduce_scatter(pd_comm *c, const void *in, void *out, size_t count, pd_dtype dt,
                                    pd_reduce_op op) {
  pd_comm_sig sig;
  pd_status st = pd_mpi_check_sig(c, PD_COMM_REDUCE_SCATTER, dt, count, (int)op, -1, NULL, NULL, &sig);
  MPI_Op mop;
  if (st == PD_OK) st = check_args(c, "reduce_scatter", dt, -1);
  if (st == PD_OK) st = pd_mpi_reduce_op(dt, op, &mop);
  if (st != PD_OK || count == 0) return st;
  MPI_Datatype t = pd_mpi_datatype(dt);
  size_t esz = pd_dtype_size(dt), chunk = pd_mpi_chunk_elems(c, dt);
  double deadline = pd_mpi_now() + c->timeout_s;
  MPI_Request r;
  if (count <= chunk) {
    const void *src = in == out ? MPI_IN_PLACE : in;
    int rc = MPI_Ireduce_scatter_block(src, out, (int)count, t, mop, PD_MPI(c)->coll, &r);
    if (rc != MPI_SUCCESS) return mpi_call_failed(c, rc, "MPI_Ireduce_scatter_block", &sig);
    return pd_mpi_wait_data(c, &r, 1, deadline, &sig);
  }
  for (size_t off = 0; off < count; off += chunk) {
    int n = (int)min_sz(chunk, count - off);
    for (int root = 0; root < c->nranks; root++) {
      const char *src = (const char *)in + ((size_t)root * count + off) * esz;
      char *dst = (char *)out + off * esz;
      int at_root = c->rank == root;
      const void *s = at_root && (const void *)src == (const void *)dst ? MPI_IN_PLACE : (const void *)src;
      int rc = MPI_Ireduce(s, at_root ? dst : NULL, n, t, mop, root, PD_MPI(c)->coll, &r);
      if (rc != MPI_SUCCESS) return mpi_call_failed(c, rc, "MPI_Ireduce", &sig);
      if ((st = pd_mpi_wait_data(c, &r, 1, deadline, &sig)) != PD_OK) return st;
    }
  }
  return PD_OK;
}

/* The signature exchange is itself a barrier: no rank leaves it before
 * every member's signature has arrived. */
static pd_status mpi_barrier(pd_comm *c) {
  pd_comm_sig sig;
  return pd_mpi_check_sig(c, PD_COMM_BARRIER, (pd_dtype)0, 0, -1, -1, NULL, NULL, &sig);
}

static void free_comm(MPI_Comm *comm) {
  if (*comm != MPI_COMM_NULL) MPI_Comm_free(comm);
}

static void mpi_destroy(pd_comm *c) {
  if (!c) return;
  pd_mpi_comm *m = PD_MPI(c);
  if (m) {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) {
      free_comm(&m->coll);
      free_comm(&m->sig);
      free_comm(&m->p2p);
    }
    if (!m->leak_sig_buffers) {
      free(m->sig_out);
      free(m->sig_in);
    }
    free(m->reqs);
    free(m);
  }
  pd_comm_base_clear(c);
  free(c);
}

static const pd_comm_ops k_mpi_ops = {
    .name = "mpi",
    .all_reduce = mpi_all_reduce,
    .broadcast = mpi_broadcast,
    .reduce = mpi_reduce,
    .all_gather = mpi_all_gather,
    .reduce_scatter = mpi_reduce_scatter,
    .alltoall = pd_mpi_alltoall,
    .scatter = mpi_scatter,
    .gather = mpi_gather,
    .send = pd_mpi_send,
    .recv = pd_mpi_recv,
    .barrier = mpi_barrier,
    .all_gather_blocked = mpi_all_gather_blocked,
    .alltoall_blocked = pd_mpi_alltoall_blocked,
    .alloc_shared = NULL,
    .free_shared = NULL,
    .destroy = mpi_destroy,
    .on_break = pd_mpi_note_broken,
};

const pd_comm_ops *pd_mpi_ops(void) { return &k_mpi_ops; }
