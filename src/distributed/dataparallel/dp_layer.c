/* paddle.DataParallel: the wrapper layer, the initial broadcast, no_sync.
 *
 * The wrapper adopts the inner layer's direct sublayers, parameters and
 * buffers under the same names (shared references, not copies), so its
 * named_parameters / state_dict / set_state_dict see exactly the inner
 * layer's structured names, without a "_layers." prefix, and a checkpoint
 * saved through it loads into the single-process model. */
#include <stdlib.h>
#include <string.h>

#include "../../core/core_internal.h"
#include "dp_internal.h"
#include "paddlec/autograd.h"

#define SYNC_GROUP_BYTES ((size_t)128 * 1024 * 1024) /* Paddle's sync_params_buffers */

typedef struct dp_layer {
  pd_layer base;
  pd_layer *inner;
  pd_dp_reducer *red; /* NULL with one rank */
  int no_sync_depth;
} dp_layer;

static int dp_forward(pd_layer *self, pd_tensor *const *in, int n_in, pd_tensor **out, int max_out) {
  dp_layer *d = (dp_layer *)self;
  d->inner->training = self->training; /* train()/eval() reach the adopted sublayers, not the inner one */
  /* keyword arguments go on to the wrapped layer, as forward(*inputs, **kwargs) */
  int n = pd_layer_call_kw(d->inner, in, n_in, pd_layer_kwargs(self), out, max_out);
  if (n > 0 && d->red && d->no_sync_depth == 0 && pd_is_grad_enabled()) {
    pd_internal_enter();
    pd_status st = pd_dp_reducer_prepare(d->red, out, n);
    pd_internal_leave();
    if (st != PD_OK) return st; /* the outputs belong to this call's scope */
  }
  return n;
}

static void dp_destroy(pd_layer *self) {
  dp_layer *d = (dp_layer *)self;
  pd_dp_reducer_free(d->red);
  pd_layer_release(d->inner);
}

static const pd_layer_type dp_type = {.name = "DataParallel", .forward = dp_forward, .destroy = dp_destroy};

static dp_layer *as_dp(pd_layer *l, const char *what) {
  if (!l || l->type != &dp_type) {
    pd_set_error(PD_ERR_INVALID, "%s: the layer is %s, not a DataParallel layer", what,
                 l ? l->type->name : "NULL");
    return NULL;
  }
  return (dp_layer *)l;
}

/* sync_params_buffers: rank `src`'s parameters and buffers everywhere, in
 * coalesced same-dtype groups of up to 128 MiB. */
static pd_status broadcast_state(pd_layer *inner, pd_dist_group *group) {
  pd_named_tensors ps = {0}, bs = {0};
  pd_status st = pd_layer_named_parameters(inner, &ps);
  if (st == PD_OK) st = pd_layer_named_buffers(inner, &bs);
  int n = ps.n + bs.n;
  pd_tensor **all = st == PD_OK && n ? malloc((size_t)n * sizeof *all) : NULL;
  char **names = st == PD_OK && n ? malloc((size_t)n * sizeof *names) : NULL;
  if (st == PD_OK && n && (!all || !names)) st = pd_set_error(PD_ERR_MEMORY, "DataParallel: out of memory");
  int *starts = NULL;
  int ng = 0;
  int src = pd_dist_group_ranks(group)[0];
  if (st == PD_OK && n) {
    if (ps.n) memcpy(all, ps.tensors, (size_t)ps.n * sizeof *all);
    if (bs.n) memcpy(all + ps.n, bs.tensors, (size_t)bs.n * sizeof *all);
    if (ps.n) memcpy(names, ps.names, (size_t)ps.n * sizeof *names);
    if (bs.n) memcpy(names + ps.n, bs.names, (size_t)bs.n * sizeof *names);
  }
  if (st == PD_OK) st = pd_dp_check_same_model(all, names, n, src, group);
  if (st == PD_OK && n) {
    ng = pd_dp_build_groups(all, n, SYNC_GROUP_BYTES, &starts);
    if (ng < 0) st = ng;
  }
  for (int g = 0; g < ng && st == PD_OK; g++) {
    pd_tensor *flat = pd_dp_flatten(all + starts[g], starts[g + 1] - starts[g]);
    if (!flat) st = pd_last_status();
    if (st == PD_OK) st = pd_dist_broadcast(flat, src, &(pd_dist_opts){.group = group});
    if (st == PD_OK) st = pd_dp_unflatten(flat, all + starts[g], starts[g + 1] - starts[g]);
    pd_tensor_release(flat);
  }
  free(starts);
  free(all);
  free(names);
  pd_named_tensors_free(&ps);
  pd_named_tensors_free(&bs);
  return st;
}

static bool is_direct(const char *name) { return !strchr(name, '.'); }

/* The wrapper takes the inner layer's direct children under their names. */
static pd_status adopt(pd_layer *self, pd_layer *inner) {
  pd_named_tensors ps = {0}, bs = {0}, sd = {0};
  pd_named_layers subs = {0};
  pd_status st = pd_layer_named_parameters(inner, &ps);
  if (st == PD_OK) st = pd_layer_named_buffers(inner, &bs);
  if (st == PD_OK) st = pd_layer_state_dict(inner, &sd);
  if (st == PD_OK) st = pd_layer_named_sublayers(inner, &subs);
  for (int i = 0; i < ps.n && st == PD_OK; i++)
    if (is_direct(ps.names[i])) st = pd_layer_add_parameter(self, ps.names[i], ps.tensors[i]);
  for (int i = 0; i < bs.n && st == PD_OK; i++) {
    if (!is_direct(bs.names[i])) continue;
    bool persistable = false;
    for (int j = 0; j < sd.n; j++) persistable = persistable || sd.tensors[j] == bs.tensors[i];
    st = pd_layer_register_buffer(self, bs.names[i], bs.tensors[i], persistable);
  }
  for (int i = 0; i < subs.n && st == PD_OK; i++)
    if (is_direct(subs.names[i]) &&
        !pd_layer_add_sublayer(self, subs.names[i], pd_layer_retain(subs.layers[i])))
      st = pd_last_status();
  pd_named_tensors_free(&ps);
  pd_named_tensors_free(&bs);
  pd_named_tensors_free(&sd);
  pd_named_layers_free(&subs);
  return st;
}

/* Trainable parameters in forward (registration) order: sublayers
 * pre-order, each layer's own parameters, shared ones once — the order of
 * named_parameters. */
static pd_dp_reducer *build_reducer(pd_layer *inner, pd_dist_group *group,
                                    const pd_data_parallel_opts *opts) {
  pd_named_tensors ps;
  if (pd_layer_named_parameters(inner, &ps) != PD_OK) return NULL;
  pd_tensor **ts = malloc(((size_t)ps.n + 1) * sizeof *ts);
  char **names = malloc(((size_t)ps.n + 1) * sizeof *names);
  pd_dp_reducer *r = NULL;
  int n = 0;
  if (!ts || !names) {
    pd_set_error(PD_ERR_MEMORY, "DataParallel: out of memory");
  } else {
    for (int i = 0; i < ps.n; i++) {
      const pd_param_info *pi = pd_tensor_param_info(ps.tensors[i]);
      if (pd_tensor_stop_gradient(ps.tensors[i]) || (pi && !pi->trainable)) continue;
      ts[n] = ps.tensors[i];
      names[n++] = ps.names[i];
    }
    if (n == 0)
      pd_set_error(PD_ERR_INVALID, "DataParallel: %s has no trainable parameter", pd_layer_full_name(inner));
    else
      r = pd_dp_reducer_new(ts, names, n, group, opts);
  }
  free(ts);
  free(names);
  pd_named_tensors_free(&ps);
  return r;
}

pd_layer *pd_data_parallel(pd_layer *layers, const pd_data_parallel_opts *opts) {
  if (!layers) {
    if (pd_last_status() == PD_OK) pd_set_error(PD_ERR_INVALID, "DataParallel: layers is NULL");
    return NULL;
  }
  double comm_mb, last_mb; /* checked with any number of ranks: a program fails the same way on one */
  if (pd_dp_buffer_sizes(opts, &comm_mb, &last_mb) != PD_OK) return NULL;
  pd_dist_group *group = opts ? opts->group : NULL;
  int nranks = pd_dist_get_world_size(group);
  if (nranks > 1 && !pd_dist_is_initialized()) {
    pd_set_error(PD_ERR_STATE,
                 "DataParallel: the world has %d ranks but the parallel environment is not initialised; "
                 "call pd_dist_init_parallel_env before constructing DataParallel",
                 nranks);
    return NULL;
  }
  if (nranks > 1) {
    if (!group) group = pd_dist_get_group(0);
    if (!pd_dist_group_is_member(group)) {
      pd_set_error(PD_ERR_INVALID, "DataParallel: this process (rank %d) is not a member of group %d",
                   pd_dist_get_rank(NULL), pd_dist_group_id(group));
      return NULL;
    }
  }
  dp_layer *d = pd_layer_new(sizeof *d, &dp_type);
  if (!d) return NULL;
  pd_layer_declare_kwargs(&d->base, NULL, -1); /* any: the wrapped layer checks them */
  d->inner = pd_layer_retain(layers);
  d->base.training = layers->training;
  pd_internal_enter();
  pd_status st = adopt(&d->base, layers);
  if (st == PD_OK && nranks > 1) st = broadcast_state(layers, group);
  if (st == PD_OK && nranks > 1 && !(d->red = build_reducer(layers, group, opts))) st = pd_last_status();
  pd_internal_leave();
  if (st != PD_OK) {
    pd_layer_release(&d->base);
    return NULL;
  }
  return &d->base;
}

pd_layer *pd_data_parallel_layers(pd_layer *dp) {
  dp_layer *d = as_dp(dp, "DataParallel._layers");
  return d ? d->inner : NULL;
}

pd_dp_reducer *pd_data_parallel_reducer(pd_layer *dp) {
  return dp && dp->type == &dp_type ? ((dp_layer *)dp)->red : NULL;
}

pd_status pd_data_parallel_no_sync_begin(pd_layer *dp) {
  dp_layer *d = as_dp(dp, "no_sync");
  if (!d) return pd_last_status();
  d->no_sync_depth++;
  return PD_OK;
}

pd_status pd_data_parallel_no_sync_end(pd_layer *dp) {
  dp_layer *d = as_dp(dp, "no_sync");
  if (!d) return pd_last_status();
  if (d->no_sync_depth == 0)
    return pd_set_error(PD_ERR_STATE, "no_sync: end without a matching no_sync_begin");
  d->no_sync_depth--;
  return PD_OK;
}
