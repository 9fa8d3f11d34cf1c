/* The local step of lamb_ on a sharded parameter. Lamb scales each update
 * by the trust ratio |p| / |r|, norms of the whole parameter and of its
 * whole update: each shard's sums of squares are Partial(sum) over the mesh
 * axes that shard the parameter, so they are all-reduced there between the
 * kernel's two passes (as squared_l2_norm's Partial sums are for the global
 * norm clipping), and every shard applies the unsharded ratio. */
#include "../../ops/optim/optim_util.h"
#include "ap_internal.h"

/* Sums the two sums over every mesh axis that shards the parameter. */
static int lamb_sums(double sums[2], void *user) { return pd_ap_sum_over_shards(user, 0, sums, 2) != PD_OK; }

pd_status pd_ap_local_lamb(const pd_spmd_local *c, pd_tensor **out, int *n_out) {
  const pd_op_def *def = pd_op_table[c->id];
  pd_tensor *p = c->in[0];
  if (p->place.kind != PD_PLACE_CPU)
    return pd_set_error(PD_ERR_UNIMPLEMENTED, "%s: a sharded parameter on place %d is not supported",
                        def->name, (int)p->place.kind);
  /* the op's checks on the shards (contiguity, dtypes, the input count) */
  pd_meta m[PD_MAX_OUTPUTS];
  int nm = def->n_out;
  pd_status st = pd_check_inplace_target(def->name, p);
  if (st == PD_OK) st = def->infer_meta(def, c->in, c->n_in, c->attrs, m, &nm);
  if (st != PD_OK) return st;
  out[0] = pd_tensor_retain(p);
  const pd_kernel_ctx kc = {def, c->in, c->n_in, c->attrs, m, out, 1};
  st = pd_optim_lamb_kernel_reduced(&kc, lamb_sums, (void *)c);
  if (st != PD_OK) {
    pd_tensor_release(out[0]);
    return st;
  }
  p->storage->version++;
  *n_out = 1;
  return PD_OK;
}
