/* What every backend shares: signatures, the mismatch message, the broken
 * state of a comm. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"

static const char *const k_kind_names[PD_COMM_NUM_KINDS] = {
    "?",        "all_reduce", "broadcast", "reduce",  "all_gather", "reduce_scatter",
    "alltoall", "scatter",    "gather",    "barrier", "send",       "recv"};

_Thread_local int pd_comm_async_thread;

const char *pd_comm_kind_name(pd_comm_kind k) {
  return k > 0 && k < PD_COMM_NUM_KINDS ? k_kind_names[k] : "?";
}

const char *pd_reduce_op_name(pd_reduce_op op) {
  static const char *const n[] = {"SUM", "MAX", "MIN", "PROD", "AVG"};
  return (int)op >= 0 && op < PD_NUM_REDUCE_OPS ? n[op] : "invalid";
}

const char *pd_comm_sig_str(const pd_comm_sig *s, char *buf, size_t cap) {
  int n = snprintf(buf, cap, "%s(", pd_comm_kind_name((pd_comm_kind)s->kind));
  if (s->kind != PD_COMM_BARRIER) {
    n += snprintf(buf + n, cap > (size_t)n ? cap - n : 0, "%s, %llu elements",
                  pd_dtype_name((pd_dtype)s->dtype), (unsigned long long)s->count);
    if (s->op >= 0)
      n += snprintf(buf + n, cap > (size_t)n ? cap - n : 0, ", %s", pd_reduce_op_name((pd_reduce_op)s->op));
    if (s->root >= 0) n += snprintf(buf + n, cap > (size_t)n ? cap - n : 0, ", root %d", s->root);
  }
  snprintf(buf + n, cap > (size_t)n ? cap - n : 0, ") #%llu", (unsigned long long)s->seq);
  return buf;
}

int pd_comm_sig_equal(const pd_comm_sig *a, const pd_comm_sig *b) {
  return a->seq == b->seq && a->count == b->count && a->kind == b->kind && a->dtype == b->dtype &&
         a->op == b->op && a->root == b->root;
}

pd_status pd_comm_mismatch_error(const char *backend, int group_id, int me, int nranks,
                                 const pd_comm_sig *sigs, const int *present, const int *global_ranks,
                                 const char *reason) {
  char msg[3072], sig[160];
  size_t n = 0;
  n += snprintf(msg + n, sizeof msg - n, "%s collective on group %d: %s; ", backend, group_id, reason);
  /* group the ranks by what they called, so a 3-rank job reads
   * "ranks 0, 2 called all_reduce(...) but rank 1 called broadcast(...)" */
  int *done = calloc((size_t)nranks, sizeof *done);
  int first_group = 1;
  for (int i = 0; i < nranks && done; i++) {
    if (done[i] || !present[i]) continue;
    int count = 0;
    for (int j = i; j < nranks; j++)
      if (!done[j] && present[j] && pd_comm_sig_equal(&sigs[i], &sigs[j])) count++;
    n += snprintf(msg + n, n < sizeof msg ? sizeof msg - n : 0, "%s%s ", first_group ? "" : " but ",
                  count > 1 ? "ranks" : "rank");
    int k = 0;
    for (int j = i; j < nranks; j++) {
      if (done[j] || !present[j] || !pd_comm_sig_equal(&sigs[i], &sigs[j])) continue;
      done[j] = 1;
      n += snprintf(msg + n, n < sizeof msg ? sizeof msg - n : 0, "%s%d%s", k++ ? ", " : "", global_ranks[j],
                    j == me ? " (this process)" : "");
    }
    n += snprintf(msg + n, n < sizeof msg ? sizeof msg - n : 0, " called %s",
                  pd_comm_sig_str(&sigs[i], sig, sizeof sig));
    first_group = 0;
  }
  int missing = 0;
  for (int i = 0; i < nranks; i++)
    if (!present[i]) missing++;
  if (missing) {
    n += snprintf(msg + n, n < sizeof msg ? sizeof msg - n : 0, "; missing (never arrived): %s",
                  missing > 1 ? "ranks " : "rank ");
    int k = 0;
    for (int i = 0; i < nranks; i++)
      if (!present[i])
        n += snprintf(msg + n, n < sizeof msg ? sizeof msg - n : 0, "%s%d", k++ ? ", " : "", global_ranks[i]);
  }
  free(done);
  return pd_set_error(PD_ERR_COMM, "%s", msg);
}

pd_status pd_comm_env_seconds(const char *var, double dflt, double *out) {
  const char *v = getenv(var);
  if (!v || !*v) {
    *out = dflt;
    return PD_OK;
  }
  char *end = NULL;
  errno = 0;
  double x = strtod(v, &end);
  if (errno || end == v || *end || !isfinite(x) || x <= 0)
    return pd_set_error(PD_ERR_INVALID,
                        "%s='%s' is not a number of seconds > 0 (unset it for the default %g)", var, v, dflt);
  *out = x;
  return PD_OK;
}

pd_status pd_comm_timeout(double asked, const char *what, double *out) {
  if (!isfinite(asked) || asked < 0)
    return pd_set_error(PD_ERR_INVALID, "%s: timeout_s %g must be > 0 (0: $PADDLEC_COMM_TIMEOUT or 1800 s)",
                        what, asked);
  if (asked > 0) {
    *out = asked;
    return PD_OK;
  }
  pd_status st = pd_comm_env_seconds("PADDLEC_COMM_TIMEOUT", 1800.0, out);
  if (st != PD_OK) return pd_set_error(st, "%s: %s", what, pd_last_error());
  return PD_OK;
}

pd_status pd_comm_warn_interval(double *out) {
  return pd_comm_env_seconds("PADDLEC_COMM_WARN_INTERVAL", PD_COMM_WARN_DEFAULT_S, out);
}

void pd_comm_warn_waiting(int rank, const char *what, const char *missing, double waited_s,
                          double timeout_s) {
  fprintf(stderr,
          "paddle.c warning: rank %d (pid %ld) has waited %.0f s in %s for %s; it gives up after %.0f s "
          "(PADDLEC_COMM_TIMEOUT)\n",
          rank, (long)getpid(), waited_s, what, missing, timeout_s);
  fflush(stderr);
}

const char *pd_comm_rank_list(const int *names, const int *pending, int n, char *buf, size_t cap) {
  int count = 0;
  for (int i = 0; i < n; i++) count += pending[i] != 0;
  size_t len = (size_t)snprintf(buf, cap, "%s", count > 1 ? "ranks " : "rank ");
  for (int i = 0, k = 0; i < n && len < cap; i++)
    if (pending[i]) len += (size_t)snprintf(buf + len, cap - len, "%s%d", k++ ? ", " : "", names[i]);
  if (!count) snprintf(buf, cap, "the other ranks");
  return buf;
}

pd_status pd_comm_base_init(pd_comm *c, const pd_comm_ops *ops, const pd_comm_init *init) {
  c->ops = ops;
  c->warn_s = init->warn_s > 0 ? init->warn_s : PD_COMM_WARN_DEFAULT_S;
  c->group_id = init->group_id;
  c->rank = init->rank;
  c->nranks = init->nranks;
  c->timeout_s = init->timeout_s;
  c->seq = 0;
  atomic_store(&c->refs, 1);
  atomic_store(&c->broken, 0);
  c->broken_msg[0] = 0;
  c->global_ranks = malloc((size_t)init->nranks * sizeof *c->global_ranks);
  if (!c->global_ranks) return pd_set_error(PD_ERR_MEMORY, "comm: out of memory for %d ranks", init->nranks);
  memcpy(c->global_ranks, init->global_ranks, (size_t)init->nranks * sizeof *c->global_ranks);
  return PD_OK;
}

pd_comm *pd_comm_retain(pd_comm *c) {
  if (c) atomic_fetch_add(&c->refs, 1);
  return c;
}

void pd_comm_release(pd_comm *c) {
  if (c && atomic_fetch_sub(&c->refs, 1) == 1) c->ops->destroy(c);
}

void pd_comm_base_clear(pd_comm *c) {
  free(c->global_ranks);
  c->global_ranks = NULL;
}

/* The first failure wins; send, recv and collective threads may fail at once. */
void pd_comm_break(pd_comm *c) {
  int healthy = 0;
  if (!atomic_compare_exchange_strong(&c->broken, &healthy, 1)) return;
  snprintf(c->broken_msg, sizeof c->broken_msg, "%s", pd_last_error());
  atomic_store(&c->broken, 2);
  if (c->ops->on_break) c->ops->on_break(c);
}

pd_status pd_comm_check_broken(pd_comm *c, const char *what) {
  if (!atomic_load(&c->broken)) return PD_OK;
  while (atomic_load(&c->broken) == 1) {
  } /* the message is being written */
  return pd_set_error(PD_ERR_COMM, "%s: group %d is broken by an earlier failure: %s", what, c->group_id,
                      c->broken_msg);
}
