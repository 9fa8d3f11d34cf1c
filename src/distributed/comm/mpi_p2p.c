/* send / recv on the p2p communicator, and alltoall as point-to-point
 * messages on the collective one.
 *
 * A send is a handshake, so both sides check each other before any data
 * moves: the sender posts a header (tag 0: dtype, count, and the id that
 * names this message's tags); the receiver compares it with its own call
 * and answers with an ack (tag 2 * id + 1) saying yes or what it expected;
 * only then the data follows (tag 2 * id + 2), in chunks. Ids come from a
 * per-comm counter, so concurrent sends from several threads never mix their
 * data, and acks (odd tags) never match data (even tags) going the same way. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_internal.h"

typedef struct p2p_header {
  uint64_t count;
  uint64_t id;
  int32_t dtype;
  int32_t pad;
} p2p_header;

typedef struct p2p_ack {
  uint64_t count; /* what the receiver expects */
  int32_t dtype;
  int32_t ok;
} p2p_ack;

/* Heap, so that a header or ack whose request cannot be cancelled after a
 * timeout can be left behind instead of pointing into a dead stack frame. */
typedef struct p2p_msgs {
  p2p_header hdr;
  p2p_ack ack;
} p2p_msgs;

static size_t nchunks(size_t bytes, size_t chunk) { return bytes == 0 ? 0 : (bytes + chunk - 1) / chunk; }

/* Where a message's bytes lie: contiguous (cols = 0), or a piece of a
 * blocked buffer (blocked_layout.h counted in bytes: rows of cols bytes, ld
 * apart), which the chunks describe as datatypes (pd_mpi_blocked_range) so
 * that nothing is packed. */
typedef struct msg_layout {
  size_t cols, ld;
} msg_layout;
static const msg_layout k_contiguous = {0, 0};

/* Posts the chunks of one message; reqs has nchunks(bytes) slots. Every
 * chunk is `chunk` bytes of MPI_BYTE but the last, whatever the layout, so
 * either side may hold its piece blocked or contiguous. */
static int post_chunks_laid(int is_send, void *buf, msg_layout lay, size_t bytes, size_t chunk, int peer,
                            int tag, MPI_Comm comm, MPI_Request *reqs) {
  size_t k = 0;
  for (size_t off = 0; off < bytes; off += chunk, k++) {
    int n = (int)(bytes - off < chunk ? bytes - off : chunk);
    MPI_Datatype t = MPI_BYTE;
    size_t at = off;
    int cnt = n;
    if (lay.cols) {
      int rc = pd_mpi_blocked_range(lay.cols, lay.ld, off, (size_t)n, &t, &at);
      if (rc != MPI_SUCCESS) return rc;
      cnt = 1;
    }
    int rc = is_send ? MPI_Isend((char *)buf + at, cnt, t, peer, tag, comm, &reqs[k])
                     : MPI_Irecv((char *)buf + at, cnt, t, peer, tag, comm, &reqs[k]);
    if (t != MPI_BYTE) MPI_Type_free(&t); /* a posted transfer keeps its datatype */
    if (rc != MPI_SUCCESS) return rc;
  }
  return MPI_SUCCESS;
}

static int post_chunks(int is_send, void *buf, size_t bytes, size_t chunk, int peer, int tag, MPI_Comm comm,
                       MPI_Request *reqs) {
  return post_chunks_laid(is_send, buf, k_contiguous, bytes, chunk, peer, tag, comm, reqs);
}

/* bytes of piece src into piece dst, each contiguous or blocked. */
static void copy_laid(char *dst, msg_layout dl, const char *src, msg_layout sl, size_t bytes) {
  if (!dl.cols && !sl.cols) {
    if (bytes) memmove(dst, src, bytes);
    return;
  }
  size_t dc = dl.cols ? dl.cols : bytes, sc = sl.cols ? sl.cols : bytes;
  for (size_t off = 0; off < bytes;) {
    size_t di = off / dc, dj = off % dc, si = off / sc, sj = off % sc;
    size_t m = dc - dj < sc - sj ? dc - dj : sc - sj;
    if (m > bytes - off) m = bytes - off;
    memcpy(dst + di * dl.ld + dj, src + si * sl.ld + sj, m);
    off += m;
  }
}

static void call_str(char *buf, size_t cap, const char *kind, pd_dtype dt, size_t count) {
  snprintf(buf, cap, "%s(%s, %zu elements)", kind, pd_dtype_name(dt), count);
}

static pd_status check_peer(pd_comm *c, const char *kind, pd_dtype dt, int peer) {
  pd_status st = pd_comm_check_broken(c, kind);
  if (st != PD_OK) return st;
  if (pd_mpi_datatype(dt) == MPI_DATATYPE_NULL)
    return pd_set_error(PD_ERR_DTYPE, "mpi %s: invalid dtype %d", kind, (int)dt);
  if (peer < 0 || peer >= c->nranks)
    return pd_set_error(PD_ERR_INDEX, "mpi %s: peer %d is not a rank of group %d (size %d)", kind, peer,
                        c->group_id, c->nranks);
  if (peer == c->rank)
    return pd_set_error(PD_ERR_INVALID, "mpi %s: rank %d cannot %s itself", kind, c->global_ranks[peer],
                        kind);
  return PD_OK;
}

/* Polls reqs; on failure abandons them, sets the error and breaks c. The
 * messages block is freed unless a request on it could not be cancelled. */
static pd_status finish(pd_comm *c, MPI_Request *reqs, int n, double deadline, const char *call, int peer,
                        const char *waiting_for) {
  int err = MPI_SUCCESS;
  char what[192];
  snprintf(what, sizeof what, "mpi %s on group %d", call, c->group_id);
  pd_mpi_warn warn = pd_mpi_comm_warn(c, what, NULL, peer);
  if (pd_mpi_poll(reqs, n, deadline, &err, &warn) == PD_OK) return PD_OK;
  int stuck = pd_mpi_abandon(reqs, n);
  char es[MPI_MAX_ERROR_STRING];
  if (err != MPI_SUCCESS)
    pd_set_error(PD_ERR_COMM, "mpi %s on group %d (rank %d, peer %d): %s", call, c->group_id,
                 c->global_ranks[c->rank], c->global_ranks[peer], pd_mpi_error_string(err, es, sizeof es));
  else
    pd_set_error(PD_ERR_COMM, "mpi %s on group %d (rank %d): timed out after %g s waiting for rank %d %s%s",
                 call, c->group_id, c->global_ranks[c->rank], c->timeout_s, c->global_ranks[peer],
                 waiting_for,
                 stuck ? " (a transfer could not be cancelled; MPI may still touch the buffer)" : "");
  pd_comm_break(c);
  return stuck ? PD_ERR_STATE : PD_ERR_COMM; /* PD_ERR_STATE: tells the caller to leak the messages */
}

pd_status pd_mpi_send(pd_comm *c, const void *buf, size_t count, pd_dtype dt, int peer) {
  pd_status st = check_peer(c, "send", dt, peer);
  if (st != PD_OK) return st;
  pd_mpi_comm *m = PD_MPI(c);
  char call[96];
  call_str(call, sizeof call, "send", dt, count);
  p2p_msgs *msg = calloc(1, sizeof *msg);
  size_t bytes = count * pd_dtype_size(dt), nc = nchunks(bytes, m->chunk_bytes);
  MPI_Request *reqs = malloc((nc > 2 ? nc : 2) * sizeof *reqs);
  if (!msg || !reqs) {
    free(msg);
    free(reqs);
    return pd_set_error(PD_ERR_MEMORY, "mpi %s: out of memory", call);
  }
  uint64_t id = atomic_fetch_add(&m->p2p_id, 1) % (uint64_t)((m->tag_ub - 2) / 2);
  int ack_tag = (int)(2 * id + 1), data_tag = ack_tag + 1;
  msg->hdr = (p2p_header){.count = count, .id = id, .dtype = (int32_t)dt};
  double deadline = pd_mpi_now() + c->timeout_s;
  reqs[0] = reqs[1] = MPI_REQUEST_NULL;
  int rc = MPI_Irecv(&msg->ack, (int)sizeof msg->ack, MPI_BYTE, peer, ack_tag, m->p2p, &reqs[0]);
  if (rc == MPI_SUCCESS) rc = MPI_Isend(&msg->hdr, (int)sizeof msg->hdr, MPI_BYTE, peer, 0, m->p2p, &reqs[1]);
  if (rc != MPI_SUCCESS) {
    pd_mpi_abandon(reqs, 2);
    free(reqs);
    free(msg);
    return pd_set_error(PD_ERR_COMM, "mpi %s to rank %d: posting the header failed (error %d)", call,
                        c->global_ranks[peer], rc);
  }
  st = finish(c, reqs, 2, deadline, call, peer, "to call the matching recv");
  if (st == PD_OK && !msg->ack.ok) {
    char theirs[96];
    call_str(theirs, sizeof theirs, "recv", (pd_dtype)msg->ack.dtype, (size_t)msg->ack.count);
    st = pd_set_error(PD_ERR_COMM,
                      "mpi point-to-point on group %d: rank %d (this process) called %s to rank %d but rank "
                      "%d called %s from rank %d",
                      c->group_id, c->global_ranks[c->rank], call, c->global_ranks[peer],
                      c->global_ranks[peer], theirs, c->global_ranks[c->rank]);
    pd_comm_break(c);
  }
  if (st == PD_OK && nc > 0) {
    for (size_t k = 0; k < nc; k++) reqs[k] = MPI_REQUEST_NULL;
    rc = post_chunks(1, (void *)buf, bytes, m->chunk_bytes, peer, data_tag, m->p2p, reqs);
    if (rc != MPI_SUCCESS) {
      pd_mpi_abandon(reqs, (int)nc);
      st = pd_set_error(PD_ERR_COMM, "mpi %s to rank %d: MPI_Isend failed (error %d)", call,
                        c->global_ranks[peer], rc);
      pd_comm_break(c);
    } else {
      st = finish(c, reqs, (int)nc, deadline, call, peer, "to receive the data");
    }
  }
  if (st != PD_ERR_STATE) free(msg);
  free(reqs);
  return st == PD_ERR_STATE ? PD_ERR_COMM : st;
}

pd_status pd_mpi_recv(pd_comm *c, void *buf, size_t count, pd_dtype dt, int peer) {
  pd_status st = check_peer(c, "recv", dt, peer);
  if (st != PD_OK) return st;
  pd_mpi_comm *m = PD_MPI(c);
  char call[96];
  call_str(call, sizeof call, "recv", dt, count);
  p2p_msgs *msg = calloc(1, sizeof *msg);
  size_t bytes = count * pd_dtype_size(dt), nc = nchunks(bytes, m->chunk_bytes);
  MPI_Request *reqs = malloc((nc + 1) * sizeof *reqs);
  if (!msg || !reqs) {
    free(msg);
    free(reqs);
    return pd_set_error(PD_ERR_MEMORY, "mpi %s: out of memory", call);
  }
  double deadline = pd_mpi_now() + c->timeout_s;
  reqs[0] = MPI_REQUEST_NULL;
  int rc = MPI_Irecv(&msg->hdr, (int)sizeof msg->hdr, MPI_BYTE, peer, 0, m->p2p, &reqs[0]);
  if (rc != MPI_SUCCESS) {
    free(reqs);
    free(msg);
    return pd_set_error(PD_ERR_COMM, "mpi %s from rank %d: MPI_Irecv failed (error %d)", call,
                        c->global_ranks[peer], rc);
  }
  st = finish(c, reqs, 1, deadline, call, peer, "to call the matching send");
  if (st == PD_OK) {
    int ok = msg->hdr.dtype == (int32_t)dt && msg->hdr.count == count;
    msg->ack = (p2p_ack){.count = count, .dtype = (int32_t)dt, .ok = ok};
    int ack_tag = (int)(2 * msg->hdr.id + 1);
    for (size_t k = 0; k <= nc; k++) reqs[k] = MPI_REQUEST_NULL;
    /* the data receives go up before the ack that releases the sender */
    rc = ok ? post_chunks(0, buf, bytes, m->chunk_bytes, peer, ack_tag + 1, m->p2p, reqs + 1) : MPI_SUCCESS;
    if (rc == MPI_SUCCESS)
      rc = MPI_Isend(&msg->ack, (int)sizeof msg->ack, MPI_BYTE, peer, ack_tag, m->p2p, &reqs[0]);
    if (rc != MPI_SUCCESS) {
      pd_mpi_abandon(reqs, (int)nc + 1);
      st = pd_set_error(PD_ERR_COMM, "mpi %s from rank %d: posting the receive failed (error %d)", call,
                        c->global_ranks[peer], rc);
      pd_comm_break(c);
    } else {
      st = finish(c, reqs, ok ? (int)nc + 1 : 1, deadline, call, peer,
                  ok ? "to send the data" : "to take the answer");
    }
    if (st == PD_OK && !ok) {
      char theirs[96];
      call_str(theirs, sizeof theirs, "send", (pd_dtype)msg->hdr.dtype, (size_t)msg->hdr.count);
      st = pd_set_error(PD_ERR_COMM,
                        "mpi point-to-point on group %d: rank %d (this process) called %s from rank %d but "
                        "rank %d called %s to rank %d",
                        c->group_id, c->global_ranks[c->rank], call, c->global_ranks[peer],
                        c->global_ranks[peer], theirs, c->global_ranks[c->rank]);
      pd_comm_break(c);
    }
  }
  if (st != PD_ERR_STATE) free(msg);
  free(reqs);
  return st == PD_ERR_STATE ? PD_ERR_COMM : st;
}

/* Each pair exchanges its blocks directly (as MPI's own linear alltoallv
 * does), in chunks, so neither counts nor displacements overflow int.
 * Tagged with the collective's sequence number on the collective
 * communicator: MPI's collectives there never match these. in_lay /
 * out_lay: blocked pieces (block j at j * cols bytes) or contiguous ones
 * (at the running sum of the counts); the messages are the same. */
static pd_status alltoall_laid(pd_comm *c, const void *in, msg_layout in_lay, const size_t *send_counts,
                               void *out, msg_layout out_lay, const size_t *recv_counts, pd_dtype dt) {
  int n = c->nranks, me = c->rank;
  size_t total = 0;
  for (int j = 0; j < n; j++) total += send_counts[j];
  pd_comm_sig sig;
  pd_status st = pd_mpi_check_sig(c, PD_COMM_ALLTOALL, dt, total, -1, -1, send_counts, recv_counts, &sig);
  if (st != PD_OK) return st;
  if (pd_mpi_datatype(dt) == MPI_DATATYPE_NULL)
    return pd_set_error(PD_ERR_DTYPE, "mpi alltoall: invalid dtype %d", (int)dt);
  pd_mpi_comm *m = PD_MPI(c);
  size_t esz = pd_dtype_size(dt), nreq = 0;
  for (int j = 0; j < n; j++)
    if (j != me)
      nreq += nchunks(send_counts[j] * esz, m->chunk_bytes) + nchunks(recv_counts[j] * esz, m->chunk_bytes);
  MPI_Request *reqs = malloc((nreq ? nreq : 1) * sizeof *reqs);
  if (!reqs) return pd_set_error(PD_ERR_MEMORY, "mpi alltoall: out of memory for %zu requests", nreq);
  for (size_t k = 0; k < nreq; k++) reqs[k] = MPI_REQUEST_NULL;
  int tag = (int)(sig.seq % (uint64_t)m->tag_ub);
  size_t soff = 0, roff = 0, k = 0;
  int rc = MPI_SUCCESS;
  for (int j = 0; j < n && rc == MPI_SUCCESS; j++) {
    size_t sb = send_counts[j] * esz, rb = recv_counts[j] * esz;
    char *sp = (char *)(uintptr_t)in + (in_lay.cols ? (size_t)j * in_lay.cols : soff);
    char *rp = (char *)out + (out_lay.cols ? (size_t)j * out_lay.cols : roff);
    if (j == me) {
      copy_laid(rp, out_lay, sp, in_lay, sb);
    } else {
      rc = post_chunks_laid(0, rp, out_lay, rb, m->chunk_bytes, j, tag, m->coll, reqs + k);
      k += nchunks(rb, m->chunk_bytes);
      if (rc == MPI_SUCCESS)
        rc = post_chunks_laid(1, sp, in_lay, sb, m->chunk_bytes, j, tag, m->coll, reqs + k);
      k += nchunks(sb, m->chunk_bytes);
    }
    soff += sb;
    roff += rb;
  }
  if (rc != MPI_SUCCESS) {
    pd_mpi_abandon(reqs, (int)nreq);
    free(reqs);
    char s[160];
    st = pd_set_error(PD_ERR_COMM, "mpi %s on group %d: posting a transfer failed (error %d)",
                      pd_comm_sig_str(&sig, s, sizeof s), c->group_id, rc);
    pd_comm_break(c);
    return st;
  }
  st = pd_mpi_wait_data(c, reqs, (int)nreq, pd_mpi_now() + c->timeout_s, &sig);
  if (st != PD_OK) pd_mpi_abandon(reqs, (int)nreq);
  free(reqs);
  return st;
}

pd_status pd_mpi_alltoall(pd_comm *c, const void *in, const size_t *send_counts, void *out,
                          const size_t *recv_counts, pd_dtype dt) {
  return alltoall_laid(c, in, k_contiguous, send_counts, out, k_contiguous, recv_counts, dt);
}

pd_status pd_mpi_alltoall_blocked(pd_comm *c, const void *in, size_t in_rows, void *out, size_t out_rows,
                                  size_t count, pd_dtype dt) {
  size_t n = (size_t)c->nranks, esz = pd_dtype_size(dt);
  size_t *counts = malloc(n * sizeof *counts + 1);
  if (!counts) return pd_set_error(PD_ERR_MEMORY, "mpi alltoall: out of memory");
  for (size_t j = 0; j < n; j++) counts[j] = count;
  /* one row per block is the plain layout, whose pieces are contiguous */
  size_t ic = count / in_rows * esz, oc = count / out_rows * esz;
  msg_layout il = in_rows > 1 ? (msg_layout){ic, n * ic} : k_contiguous;
  msg_layout ol = out_rows > 1 ? (msg_layout){oc, n * oc} : k_contiguous;
  pd_status st = alltoall_laid(c, in, il, counts, out, ol, counts, dt);
  free(counts);
  return st;
}
