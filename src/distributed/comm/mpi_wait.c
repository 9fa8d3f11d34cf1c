/* Waiting with a timeout, and the signature check before every collective.
 *
 * Nothing here blocks inside MPI: requests are polled with MPI_Testsome
 * (which also drives MPI's progress for nonblocking collectives) until they
 * complete or the comm's timeout passes, so a rank that never arrives is an
 * error naming it, not a hang. */
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mpi_internal.h"

double pd_mpi_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* MPI progresses nonblocking collectives only inside MPI calls, so every
 * round of a multi-round algorithm waits for the next test: polling spins
 * (yielding the core now and then) for the first 200 ms, which keeps
 * collectives at MPI's own speed, then sleeps 10 us growing to 200 us so a
 * long wait for a late peer does not hold a core at full speed. */
pd_mpi_warn pd_mpi_comm_warn(pd_comm *c, const char *what, const MPI_Request *per_rank, int peer) {
  return (pd_mpi_warn){.what = what,
                       .me = c->global_ranks[c->rank],
                       .warn_s = c->warn_s,
                       .timeout_s = c->timeout_s,
                       .per_rank = per_rank,
                       .names = c->global_ranks,
                       .nmembers = c->nranks,
                       .me_member = c->rank,
                       .peer = peer >= 0 ? c->global_ranks[peer] : -1};
}

static void warn_now(const pd_mpi_warn *w, double waited) {
  char who[512];
  int small[16];
  int *pending = w->nmembers <= 16 ? small : calloc((size_t)w->nmembers, sizeof *pending);
  if (w->per_rank && pending) {
    for (int i = 0; i < w->nmembers; i++)
      pending[i] = i != w->me_member && w->per_rank[i] != MPI_REQUEST_NULL;
    pd_comm_rank_list(w->names, pending, w->nmembers, who, sizeof who);
  } else if (w->peer >= 0) {
    snprintf(who, sizeof who, "rank %d", w->peer);
  } else {
    snprintf(who, sizeof who, "the other ranks (every rank called it; the data is not moving)");
  }
  if (w->nmembers > 16) free(pending);
  pd_comm_warn_waiting(w->me, w->what, who, waited, w->timeout_s);
}

pd_status pd_mpi_poll(MPI_Request *reqs, int n, double deadline, int *mpi_err, const pd_mpi_warn *warn) {
  *mpi_err = MPI_SUCCESS;
  if (n <= 0) return PD_OK;
  int *idx = malloc((size_t)n * sizeof *idx);
  if (!idx) return pd_set_error(PD_ERR_MEMORY, "mpi wait: out of memory for %d requests", n);
  double start = pd_mpi_now();
  double next_warn = warn && warn->warn_s > 0 ? start + warn->warn_s : 1e300;
  long sleep_ns = 10000;
  pd_status st = PD_OK;
  for (unsigned iter = 0;; iter++) {
    int done = 0;
    int rc = MPI_Testsome(n, reqs, &done, idx, MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS) {
      *mpi_err = rc;
      st = PD_ERR_COMM;
      break;
    }
    if (done == MPI_UNDEFINED) break; /* every request is MPI_REQUEST_NULL */
    if (done > 0) continue;
    double now = pd_mpi_now();
    if (now > deadline) {
      st = PD_ERR_COMM;
      break;
    }
    if (now >= next_warn) {
      next_warn += warn->warn_s;
      warn_now(warn, now - start);
    }
    if (now - start < 0.2) {
      if (iter % 16 == 15) sched_yield();
      continue;
    }
    struct timespec ts = {0, sleep_ns};
    nanosleep(&ts, NULL);
    sleep_ns = sleep_ns * 2 < 200000 ? sleep_ns * 2 : 200000;
  }
  free(idx);
  return st;
}

int pd_mpi_abandon(MPI_Request *reqs, int n) {
  int stuck = 0;
  for (int i = 0; i < n; i++) {
    if (reqs[i] == MPI_REQUEST_NULL) continue;
    MPI_Cancel(&reqs[i]);
    /* a cancelled receive completes at once; a send usually cannot be
     * cancelled (it may already be on its way) */
    int flag = 0;
    for (int k = 0; k < 100 && !flag; k++) {
      MPI_Test(&reqs[i], &flag, MPI_STATUS_IGNORE);
      if (!flag) {
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
      }
    }
    if (!flag) {
      MPI_Request_free(&reqs[i]);
      stuck = 1;
    }
    reqs[i] = MPI_REQUEST_NULL;
  }
  return stuck;
}

pd_status pd_mpi_wait_data(pd_comm *c, MPI_Request *reqs, int n, double deadline, const pd_comm_sig *sig) {
  int err = MPI_SUCCESS;
  char s[160], what[224], es[MPI_MAX_ERROR_STRING];
  pd_comm_sig_str(sig, s, sizeof s);
  snprintf(what, sizeof what, "mpi %s on group %d", s, c->group_id);
  pd_mpi_warn warn = pd_mpi_comm_warn(c, what, NULL, -1);
  if (pd_mpi_poll(reqs, n, deadline, &err, &warn) == PD_OK) return PD_OK;
  if (err != MPI_SUCCESS)
    pd_set_error(PD_ERR_COMM, "mpi %s on group %d (rank %d): %s", s, c->group_id, c->global_ranks[c->rank],
                 pd_mpi_error_string(err, es, sizeof es));
  else
    pd_set_error(
        PD_ERR_COMM,
        "mpi %s on group %d (rank %d): timed out after %g s moving data: every rank called it but a peer "
        "stopped responding (hung or died)",
        s, c->group_id, c->global_ranks[c->rank], c->timeout_s);
  pd_comm_break(c);
  return PD_ERR_COMM;
}

size_t pd_mpi_chunk_elems(pd_comm *c, pd_dtype dt) {
  size_t e = PD_MPI(c)->chunk_bytes / pd_dtype_size(dt);
  if (e < 1) e = 1;
  if (e > (size_t)INT_MAX) e = (size_t)INT_MAX;
  return e;
}

/* ---- the signature exchange -------------------------------------------
 * Every member sends its signature to every other member on the sig
 * communicator, tagged with the sequence number, and receives theirs; so
 * every rank sees every signature and all of them agree on the verdict.
 * For alltoall the message also carries the sender's whole send and recv
 * count vectors, so every rank can check every pair of split sizes. */

static int sig_tag(const pd_mpi_comm *m, uint64_t seq) { return (int)(seq % (uint64_t)m->tag_ub); }

/* alltoall: every pair (i -> j) must agree: what i sends j expects. */
static pd_status check_splits(pd_comm *c, const pd_comm_sig *sig) {
  pd_mpi_comm *m = PD_MPI(c);
  int n = c->nranks;
  char msg[2048], s[160];
  size_t len = 0;
  int bad = 0;
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) {
      const uint64_t *vi = (const uint64_t *)(m->sig_in + (size_t)i * m->sig_stride + sizeof(pd_comm_sig));
      const uint64_t *vj = (const uint64_t *)(m->sig_in + (size_t)j * m->sig_stride + sizeof(pd_comm_sig));
      uint64_t sends = vi[j], expects = vj[n + i];
      if (sends == expects) continue;
      if (bad++ < 6 && len < sizeof msg)
        len += (size_t)snprintf(msg + len, sizeof msg - len,
                                "%srank %d sends %llu elements to rank %d, which expects %llu",
                                bad > 1 ? "; " : "", c->global_ranks[i], (unsigned long long)sends,
                                c->global_ranks[j], (unsigned long long)expects);
    }
  if (!bad) return PD_OK;
  if (bad > 6 && len < sizeof msg) snprintf(msg + len, sizeof msg - len, "; and %d more pairs", bad - 6);
  pd_comm_sig_str(sig, s, sizeof s);
  return pd_set_error(PD_ERR_COMM,
                      "mpi collective on group %d: the ranks disagree on the split sizes of %s: %s",
                      c->group_id, s, msg);
}

pd_status pd_mpi_check_sig(pd_comm *c, pd_comm_kind kind, pd_dtype dt, size_t count, int op, int root,
                           const size_t *send_counts, const size_t *recv_counts, pd_comm_sig *sig) {
  pd_status st = pd_comm_check_broken(c, pd_comm_kind_name(kind));
  if (st != PD_OK) return st;
  pd_mpi_comm *m = PD_MPI(c);
  int n = c->nranks, me = c->rank;
  memset(sig, 0, sizeof *sig);
  sig->seq = ++c->seq;
  sig->count = count;
  sig->kind = kind;
  sig->dtype = (int32_t)dt;
  sig->op = op;
  sig->root = root;
  if (n == 1) return PD_OK;

  /* my message: the signature, then for alltoall the count vectors */
  size_t bytes = sizeof(pd_comm_sig);
  memcpy(m->sig_out, sig, sizeof *sig);
  if (send_counts) {
    uint64_t *v = (uint64_t *)(m->sig_out + sizeof(pd_comm_sig));
    for (int j = 0; j < n; j++) {
      v[j] = send_counts[j];
      v[n + j] = recv_counts[j];
    }
    bytes = m->sig_stride;
  }
  memcpy(m->sig_in + (size_t)me * m->sig_stride, m->sig_out, bytes);

  int tag = sig_tag(m, sig->seq);
  MPI_Request *rq = m->reqs, *sq = m->reqs + n;
  int rc = MPI_SUCCESS;
  for (int j = 0; j < n; j++) rq[j] = sq[j] = MPI_REQUEST_NULL;
  for (int j = 0; j < n && rc == MPI_SUCCESS; j++) {
    if (j == me) continue;
    rc = MPI_Irecv(m->sig_in + (size_t)j * m->sig_stride, (int)m->sig_stride, MPI_BYTE, j, tag, m->sig,
                   &rq[j]);
    if (rc == MPI_SUCCESS) rc = MPI_Isend(m->sig_out, (int)bytes, MPI_BYTE, j, tag, m->sig, &sq[j]);
  }
  int err = rc;
  double deadline = pd_mpi_now() + c->timeout_s;
  char s[160], what[224];
  snprintf(what, sizeof what, "mpi %s on group %d", pd_comm_sig_str(sig, s, sizeof s), c->group_id);
  pd_mpi_warn warn = pd_mpi_comm_warn(c, what, rq, -1);
  if (rc == MPI_SUCCESS && pd_mpi_poll(m->reqs, 2 * n, deadline, &err, &warn) == PD_OK) {
    /* every signature arrived: compare (for alltoall the counts are
     * checked per pair below, the totals may differ) */
    pd_comm_sig *sigs = malloc((size_t)n * sizeof *sigs);
    int *present = malloc((size_t)n * sizeof *present);
    if (!sigs || !present) {
      free(sigs);
      free(present);
      return pd_set_error(PD_ERR_MEMORY, "mpi %s: out of memory", pd_comm_kind_name(kind));
    }
    int same = 1;
    for (int j = 0; j < n; j++) {
      memcpy(&sigs[j], m->sig_in + (size_t)j * m->sig_stride, sizeof *sigs);
      present[j] = 1;
      pd_comm_sig a = sigs[j], b = *sig;
      if (kind == PD_COMM_ALLTOALL && a.kind == PD_COMM_ALLTOALL) a.count = b.count;
      if (!pd_comm_sig_equal(&a, &b)) same = 0;
    }
    if (!same)
      st = pd_comm_mismatch_error("mpi", c->group_id, me, n, sigs, present, c->global_ranks,
                                  "the ranks called different collectives");
    else if (kind == PD_COMM_ALLTOALL)
      st = check_splits(c, sig);
    free(sigs);
    free(present);
    if (st != PD_OK) pd_comm_break(c);
    return st;
  }

  /* an MPI error or a timeout: whoever did not arrive is missing */
  pd_comm_sig *sigs = malloc((size_t)n * sizeof *sigs);
  int *present = malloc((size_t)n * sizeof *present);
  if (sigs && present) {
    for (int j = 0; j < n; j++) {
      present[j] = j == me || rq[j] == MPI_REQUEST_NULL;
      memcpy(&sigs[j], m->sig_in + (size_t)j * m->sig_stride, sizeof *sigs);
    }
  }
  if (pd_mpi_abandon(m->reqs, 2 * n)) m->leak_sig_buffers = 1;
  char reason[256], es[MPI_MAX_ERROR_STRING];
  if (err != MPI_SUCCESS)
    snprintf(reason, sizeof reason, "MPI error while exchanging signatures: %s",
             pd_mpi_error_string(err, es, sizeof es));
  else
    snprintf(reason, sizeof reason, "timed out after %g s waiting for every rank to call it", c->timeout_s);
  if (sigs && present)
    pd_comm_mismatch_error("mpi", c->group_id, me, n, sigs, present, c->global_ranks, reason);
  else
    pd_set_error(PD_ERR_COMM, "mpi collective on group %d: %s", c->group_id, reason);
  free(sigs);
  free(present);
  pd_comm_break(c);
  return PD_ERR_COMM;
}
