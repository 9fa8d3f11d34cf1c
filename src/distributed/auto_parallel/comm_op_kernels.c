/* The collectives behind the registry's communication ops (c_allreduce,
 * c_allgather, c_reduce_scatter), which a partitioned distributed Program
 * runs: ring_id is a process group's id (pd_dist_group_id). */
#include <string.h>

#include "../../ops/comm/comm_util.h"
#include "ap_internal.h"
#include "paddlec/distributed.h"
#include "paddlec/manipulation.h"

enum { COMM_MAX_RANKS = 1 << 10 };

static pd_status allgather(pd_dist_opts *o, int64_t nranks, int64_t axis, pd_tensor *x, pd_tensor *out) {
  pd_tensor *list[COMM_MAX_RANKS] = {0};
  size_t bytes = (size_t)out->numel * pd_dtype_size(out->dtype);
  pd_tensor *xc = x->is_contiguous ? pd_tensor_retain(x) : pd_contiguous(x);
  pd_status st = xc ? pd_dist_all_gather(list, xc, o) : pd_last_status();
  pd_tensor *cat = st == PD_OK ? pd_concat(list, (int)nranks, (int)axis) : NULL;
  if (st == PD_OK && !cat) st = pd_last_status();
  if (cat && !cat->is_contiguous) { /* a copy in memory order (pd_contiguous of a view is new) */
    pd_tensor *c = pd_contiguous(cat);
    pd_tensor_release(cat);
    if (!(cat = c)) st = pd_last_status();
  }
  if (cat) memcpy(pd_tensor_data(out), pd_tensor_data(cat), bytes);
  pd_tensor_release(cat);
  pd_tensor_release(xc);
  for (int64_t k = 0; k < nranks; k++) pd_tensor_release(list[k]);
  return st;
}

/* x cut into nranks equal blocks along axis (contiguous copies where a
 * block is not), block r reduced over the group into out on group rank r. */
static pd_status reduce_scatter(pd_dist_opts *o, int64_t nranks, pd_reduce_op op, int64_t axis, pd_tensor *x,
                                pd_tensor *out) {
  pd_tensor *list[COMM_MAX_RANKS] = {0};
  int64_t chunk = x->shape[axis] / nranks;
  pd_status st = PD_OK;
  for (int64_t k = 0; k < nranks && st == PD_OK; k++) {
    pd_tensor *b = pd_slice(x, 1, (const int64_t[]){axis}, (const int64_t[]){k * chunk},
                            (const int64_t[]){(k + 1) * chunk});
    list[k] = b && !b->is_contiguous ? pd_contiguous(b) : pd_tensor_retain(b);
    pd_tensor_release(b);
    if (!list[k]) st = pd_last_status();
  }
  if (st == PD_OK) st = pd_dist_reduce_scatter(out, list, op, o);
  for (int64_t k = 0; k < nranks; k++) pd_tensor_release(list[k]);
  return st;
}

static pd_status comm_op(pd_comm_op_kind kind, int64_t ring_id, int64_t nranks, int64_t arg, int64_t axis,
                         pd_tensor *x, pd_tensor *out) {
  static const char *const names[] = {"c_allreduce", "c_allgather", "c_reduce_scatter"};
  const char *name = names[kind];
  pd_dist_group *g = pd_dist_get_group((int)ring_id);
  if (!g || pd_dist_group_nranks(g) != nranks)
    return pd_set_error(PD_ERR_INVALID, "%s: ring_id %lld is no process group of %lld ranks", name,
                        (long long)ring_id, (long long)nranks);
  if (nranks > COMM_MAX_RANKS)
    return pd_set_error(PD_ERR_INVALID, "%s: %lld ranks (at most %d)", name, (long long)nranks,
                        COMM_MAX_RANKS);
  pd_dist_opts o = {.group = g};
  switch (kind) {
    case PD_COMM_OP_ALLREDUCE: {
      pd_status st = pd_write_copy(out, x);
      return st == PD_OK ? pd_dist_all_reduce(out, (pd_reduce_op)arg, &o) : st;
    }
    case PD_COMM_OP_ALLGATHER:
      return allgather(&o, nranks, arg, x, out);
    case PD_COMM_OP_REDUCE_SCATTER:
      return reduce_scatter(&o, nranks, (pd_reduce_op)arg, axis, x, out);
  }
  return pd_set_error(PD_ERR_INVALID, "communication op kind %d", (int)kind);
}

void pd_ap_install_comm_ops(void) { pd_comm_ops_install(comm_op); }
