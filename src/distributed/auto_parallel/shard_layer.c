/* shard_layer: the user's shard_fn on a layer and its sublayers, then every
 * parameter and buffer still dense made a Replicate DTensor in place, and
 * input_fn / output_fn as forward hooks. */
#include <stdio.h>

#include "../../core/core_internal.h"
#include "ap_internal.h"
#include "paddlec/creation.h"

/* Makes each dense tensor of list a Replicate DTensor on mesh, in place. */
static pd_status replicate_all(const pd_named_tensors *list, pd_dist_process_mesh *mesh) {
  for (int i = 0; i < list->n; i++) {
    pd_tensor *t = list->tensors[i];
    if (t->dist_attr) continue;
    pd_dist_attr *a = pd_ap_attr_replicated(mesh, t->ndim, t->shape);
    if (!a) return pd_last_status();
    if (!pd_dist_process_mesh_contains(mesh, pd_ap_my_rank())) { /* no data outside the mesh */
      pd_tensor *empty = pd_zeros(1, (const int64_t[]){0}, t->dtype);
      if (!empty) {
        pd_ap_attr_free(a);
        return pd_last_status();
      }
      pd_tensor_take_data(t, empty);
      pd_tensor_release(empty);
    }
    pd_ap_attr_set(t, a);
  }
  return PD_OK;
}

static pd_status replicate_layer(pd_layer *l, pd_dist_process_mesh *mesh) {
  pd_named_tensors ps = {0}, bs = {0};
  pd_status st = pd_layer_named_parameters_with_prefix(l, NULL, false, &ps);
  if (st == PD_OK) st = pd_layer_named_buffers_with_prefix(l, NULL, false, &bs);
  if (st == PD_OK) st = replicate_all(&ps, mesh);
  if (st == PD_OK) st = replicate_all(&bs, mesh);
  pd_named_tensors_free(&ps);
  pd_named_tensors_free(&bs);
  return st;
}

pd_status pd_dist_shard_layer(pd_layer *layer, pd_dist_process_mesh *mesh,
                              const pd_dist_shard_layer_opts *opts) {
  if (!layer || !mesh)
    return pd_set_error(PD_ERR_INVALID, "shard_layer: %s is NULL", !layer ? "layer" : "process_mesh");
  pd_named_layers subs = {0};
  pd_status st = pd_layer_named_sublayers(layer, &subs);
  if (st != PD_OK) return st;
  pd_internal_enter();
  if (opts && opts->shard_fn) {
    st = opts->shard_fn("", layer, mesh, opts->user);
    for (int i = 0; st == PD_OK && i < subs.n; i++)
      st = opts->shard_fn(subs.names[i], subs.layers[i], mesh, opts->user);
    if (st != PD_OK) pd_error_prefix("shard_layer: shard_fn");
  }
  if (st == PD_OK) st = replicate_layer(layer, mesh);
  for (int i = 0; st == PD_OK && i < subs.n; i++) st = replicate_layer(subs.layers[i], mesh);
  pd_internal_leave();
  pd_named_layers_free(&subs);
  if (st == PD_OK) pd_ap_install_hook();
  if (st == PD_OK && opts && opts->input_fn) {
    int id = pd_layer_register_forward_pre_hook(layer, opts->input_fn, opts->user);
    if (id < 0) return (pd_status)id;
  }
  if (st == PD_OK && opts && opts->output_fn) {
    int id = pd_layer_register_forward_post_hook(layer, opts->output_fn, opts->user);
    if (id < 0) return (pd_status)id;
  }
  return st;
}
