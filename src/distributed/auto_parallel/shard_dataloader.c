/* shard_dataloader: a DataLoader whose batches are DTensors of the global
 * batch, each dp rank loading only its slice (Paddle's ShardDataloader). */
#include <stdlib.h>
#include <string.h>

#include "../../core/core_internal.h"
#include "ap_internal.h"

#define MAX_FIELDS 16

struct pd_dist_shard_dataloader {
  pd_io_loader *loader;
  pd_dist_process_mesh *meshes[MAX_FIELDS];
  int n_meshes;
  int axis[MAX_FIELDS]; /* per mesh: the split axis, -1 none */
};

static int mesh_axis(const pd_dist_process_mesh *m, const char *name) {
  for (int a = 0; name && a < m->ndim; a++)
    if (strcmp(m->names[a], name) == 0) return a;
  return -1;
}

pd_dist_shard_dataloader *pd_dist_shard_dataloader_new(pd_io_dataset *ds, const pd_io_data_loader_opts *lo,
                                                       const pd_dist_shard_dataloader_opts *opts) {
  if (!ds || !opts || !opts->meshes || opts->n_meshes < 1 || opts->n_meshes > MAX_FIELDS) {
    pd_set_error(PD_ERR_INVALID, "shard_dataloader: %s",
                 !ds                      ? "dataset is NULL"
                 : !opts || !opts->meshes ? "meshes is NULL"
                                          : "n_meshes out of range (1 to 16)");
    return NULL;
  }
  pd_dist_shard_dataloader *l = calloc(1, sizeof *l);
  if (!l) {
    pd_set_error(PD_ERR_MEMORY, "shard_dataloader: out of memory");
    return NULL;
  }
  int me = pd_ap_my_rank(), dp = 1, coord = 0;
  bool found = false;
  l->n_meshes = opts->n_meshes;
  for (int i = 0; i < opts->n_meshes; i++) {
    pd_dist_process_mesh *m = opts->meshes[i];
    l->meshes[i] = pd_dist_process_mesh_retain(m);
    l->axis[i] = opts->shard_dim ? mesh_axis(m, opts->shard_dim) : -1;
    char buf[256];
    if (!m || (opts->shard_dim && l->axis[i] < 0)) {
      pd_set_error(PD_ERR_INVALID, "shard_dataloader: mesh %d %s%s%s", i,
                   m ? pd_ap_mesh_str(m, buf, sizeof buf) : "is NULL", m ? " has no dim named " : "",
                   m ? opts->shard_dim : "");
      pd_dist_shard_dataloader_release(l);
      return NULL;
    }
    int64_t co[PD_DIST_MAX_MESH_DIMS];
    if (!found && pd_ap_mesh_coords(m, me, co)) {
      found = true;
      if (l->axis[i] >= 0) {
        dp = (int)m->shape[l->axis[i]];
        coord = (int)co[l->axis[i]];
      }
    }
  }
  pd_io_data_loader_opts o = lo ? *lo : (pd_io_data_loader_opts){0};
  int64_t global = o.batch_size == 0 ? 1 : o.batch_size;
  if (dp > 1 && !opts->is_dataset_splitted) {
    if (global < 0 || global % dp != 0 || o.batch_sampler) {
      pd_set_error(PD_ERR_INVALID,
                   "shard_dataloader: the global batch size %lld must be a positive multiple of the %d ranks "
                   "along '%s'%s",
                   (long long)global, dp, opts->shard_dim,
                   o.batch_sampler ? " (and no batch_sampler given)" : "");
      pd_dist_shard_dataloader_release(l);
      return NULL;
    }
    o.batch_sampler = pd_io_distributed_batch_sampler(ds, global / dp, dp, coord, o.shuffle, o.drop_last);
    if (!o.batch_sampler) {
      pd_dist_shard_dataloader_release(l);
      return NULL;
    }
    o.batch_size = 0;
    o.shuffle = false;
    o.drop_last = false;
    l->loader = pd_io_data_loader(ds, &o);
    pd_io_sampler_release(o.batch_sampler);
  } else {
    l->loader = pd_io_data_loader(ds, &o);
  }
  if (!l->loader) {
    pd_dist_shard_dataloader_release(l);
    return NULL;
  }
  return l;
}

int pd_dist_shard_dataloader_next(pd_dist_shard_dataloader *l, pd_tensor **batch, int max) {
  if (!l || (!batch && max > 0))
    return pd_set_error(PD_ERR_INVALID, "shard_dataloader next: %s is NULL", !l ? "loader" : "batch");
  pd_tensor *local[MAX_FIELDS];
  pd_internal_enter(); /* the local batch is ours to release */
  int n = pd_io_loader_next(l->loader, local, max < MAX_FIELDS ? max : MAX_FIELDS);
  pd_internal_leave();
  for (int f = 0; f < n; f++) {
    int i = f < l->n_meshes ? f : l->n_meshes - 1;
    pd_dist_process_mesh *m = l->meshes[i];
    pd_dist_placement p[PD_DIST_MAX_MESH_DIMS];
    for (int a = 0; a < m->ndim; a++) p[a] = a == l->axis[i] ? pd_dist_shard(0) : pd_dist_replicate();
    batch[f] = pd_dist_dtensor_from_local(local[f], m, p, m->ndim);
    if (!batch[f]) {
      pd_status st = pd_last_status();
      for (int k = f; k < n; k++) pd_tensor_release(local[k]);
      return st;
    }
    pd_tensor_release(local[f]);
  }
  return n;
}

int64_t pd_dist_shard_dataloader_len(pd_dist_shard_dataloader *l) {
  return l ? pd_io_loader_len(l->loader)
           : pd_set_error(PD_ERR_INVALID, "shard_dataloader len: loader is NULL");
}

void pd_dist_shard_dataloader_release(pd_dist_shard_dataloader *l) {
  if (!l) return;
  pd_io_loader_release(l->loader);
  for (int i = 0; i < l->n_meshes; i++) pd_dist_process_mesh_release(l->meshes[i]);
  free(l);
}
