/* The collectives behind the registry's communication ops (c_allreduce,
 * c_allgather), which a partitioned distributed Program runs: ring_id is a
 * process group's id (pd_dist_group_id). */
#include <string.h>

#include "../../ops/comm/comm_util.h"
#include "ap_internal.h"
#include "paddlec/distributed.h"
#include "paddlec/manipulation.h"

static pd_status comm_op(pd_comm_op_kind kind, int64_t ring_id, int64_t nranks, int64_t arg, pd_tensor *x,
                         pd_tensor *out) {
  const char *name = kind == PD_COMM_OP_ALLREDUCE ? "c_allreduce" : "c_allgather";
  pd_dist_group *g = pd_dist_get_group((int)ring_id);
  if (!g || pd_dist_group_nranks(g) != nranks)
    return pd_set_error(PD_ERR_INVALID, "%s: ring_id %lld is no process group of %lld ranks", name,
                        (long long)ring_id, (long long)nranks);
  pd_dist_opts o = {.group = g};
  size_t bytes = (size_t)out->numel * pd_dtype_size(out->dtype);
  if (kind == PD_COMM_OP_ALLREDUCE) {
    pd_status st = pd_write_copy(out, x);
    return st == PD_OK ? pd_dist_all_reduce(out, (pd_reduce_op)arg, &o) : st;
  }
  pd_tensor *list[1 << 10] = {0};
  if (nranks > (int64_t)(sizeof list / sizeof *list))
    return pd_set_error(PD_ERR_INVALID, "%s: %lld ranks (at most %zu)", name, (long long)nranks,
                        sizeof list / sizeof *list);
  pd_tensor *xc = x->is_contiguous ? pd_tensor_retain(x) : pd_contiguous(x);
  pd_status st = xc ? pd_dist_all_gather(list, xc, &o) : pd_last_status();
  pd_tensor *cat = st == PD_OK ? pd_concat(list, (int)nranks, (int)arg) : NULL;
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

void pd_ap_install_comm_ops(void) { pd_comm_ops_install(comm_op); }
