/* The collectives behind the registry's communication ops (c_allreduce,
 * c_allgather, c_reduce_scatter, and a gradient bucket's c_allreduce_start_
 * / _wait_), which a partitioned distributed Program runs: ring_id is a
 * process group's id (pd_dist_group_id). */
#include <pthread.h>
#include <string.h>

#include "../../ops/comm/comm_util.h"
#include "../comm/group_internal.h"
#include "ap_internal.h"
#include "paddlec/distributed.h"
#include "paddlec/manipulation.h"

/* The buckets in flight: an allreduce launched by c_allreduce_start_, found
 * by c_allreduce_wait_ through the bucket's memory (the op's tensor). */
enum { MAX_IN_FLIGHT = 256 };
static struct in_flight {
  const void *data;
  pd_dist_task *task;
} g_flight[MAX_IN_FLIGHT];
static int g_n_flight;
static pthread_mutex_t g_flight_mu = PTHREAD_MUTEX_INITIALIZER;

/* Removes and returns the task launched on data (NULL: none). */
static pd_dist_task *take_task(const void *data) {
  pd_dist_task *t = NULL;
  pthread_mutex_lock(&g_flight_mu);
  for (int i = 0; i < g_n_flight && !t; i++)
    if (g_flight[i].data == data) {
      t = g_flight[i].task;
      g_flight[i] = g_flight[--g_n_flight];
    }
  pthread_mutex_unlock(&g_flight_mu);
  return t;
}

static pd_status wait_task(pd_dist_task *t) {
  pd_status st = pd_dist_task_wait(t);
  pd_dist_task_release(t);
  return st;
}

static pd_status start_bucket(pd_dist_group *g, pd_reduce_op op, pd_tensor *x) {
  const void *data = pd_tensor_data(x);
  pd_dist_task *old = take_task(data); /* a step that failed before its wait */
  if (old) (void)wait_task(old);
  pthread_mutex_lock(&g_flight_mu);
  bool full = g_n_flight == MAX_IN_FLIGHT;
  pthread_mutex_unlock(&g_flight_mu);
  if (full)
    return pd_set_error(PD_ERR_STATE, "c_allreduce_start_: %d buckets in flight already (at most %d)",
                        MAX_IN_FLIGHT, MAX_IN_FLIGHT);
  pd_dist_task *t = NULL;
  pd_status st = pd_dist_all_reduce(x, op, &(pd_dist_opts){.group = g, .task = &t});
  if (st != PD_OK) return st;
  pthread_mutex_lock(&g_flight_mu);
  g_flight[g_n_flight++] = (struct in_flight){data, t};
  pthread_mutex_unlock(&g_flight_mu);
  return PD_OK;
}

enum { COMM_MAX_RANKS = 1 << 10 };

/* The collectives along a dim read and write contiguous tensors; out is an
 * op's output, x may be a view. */
static pd_tensor *contiguous(pd_tensor *x) {
  return x->is_contiguous ? pd_tensor_retain(x) : pd_contiguous(x);
}

static pd_status comm_op(pd_comm_op_kind kind, int64_t ring_id, int64_t nranks, int64_t arg, int64_t axis,
                         pd_tensor *x, pd_tensor *out) {
  static const char *const names[] = {"c_allreduce", "c_allgather", "c_reduce_scatter", "c_allreduce_start_",
                                      "c_allreduce_wait_"};
  const char *name = names[kind];
  if (kind == PD_COMM_OP_WAIT) {
    pd_dist_task *t = take_task(pd_tensor_data(x));
    if (!t)
      return pd_set_error(PD_ERR_STATE,
                          "c_allreduce_wait_: no c_allreduce_start_ was launched on this bucket");
    return wait_task(t);
  }
  pd_dist_group *g = pd_dist_get_group((int)ring_id);
  if (!g || pd_dist_group_nranks(g) != nranks)
    return pd_set_error(PD_ERR_INVALID, "%s: ring_id %lld is no process group of %lld ranks", name,
                        (long long)ring_id, (long long)nranks);
  if (nranks > COMM_MAX_RANKS)
    return pd_set_error(PD_ERR_INVALID, "%s: %lld ranks (at most %d)", name, (long long)nranks,
                        COMM_MAX_RANKS);
  pd_dist_opts o = {.group = g};
  switch (kind) {
    case PD_COMM_OP_ALLREDUCE:
    case PD_COMM_OP_ALLGATHER:
    case PD_COMM_OP_REDUCE_SCATTER: {
      pd_tensor *xc = contiguous(x);
      if (!xc) return pd_last_status();
      pd_status st;
      if (kind == PD_COMM_OP_ALLGATHER)
        st = pd_dist_all_gather_dim(out, xc, (int)arg, &o);
      else if (kind == PD_COMM_OP_REDUCE_SCATTER)
        st = pd_dist_reduce_scatter_dim(out, xc, (int)axis, (pd_reduce_op)arg, &o);
      else if (pd_dist_group_rank(g) < 0) /* not in the group: the value passes as it is */
        st = pd_write_copy(out, xc);
      else
        st = pd_dist_all_reduce_into(out, xc, (pd_reduce_op)arg, &o);
      pd_tensor_release(xc);
      return st;
    }
    case PD_COMM_OP_ALLREDUCE_START:
      return start_bucket(g, (pd_reduce_op)arg, x);
    case PD_COMM_OP_WAIT:
      break;
  }
  return pd_set_error(PD_ERR_INVALID, "communication op kind %d", (int)kind);
}

void pd_ap_install_comm_ops(void) { pd_comm_ops_install(comm_op); }
