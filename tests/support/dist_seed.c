/* Seed 000 of dist.to_static for the tests: its RandomDataset, DemoNet, and
 * the global values of a model's parameters. */
#include "dist_seed.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "dist_ranks.h"

/* Batch b of the seed's RandomDataset: images [SB, IMG], labels [SB, CLS]. */
void seed_batch(int b, pd_tensor **x, pd_tensor **y) {
  double xs[SB * IMG], ys[SB * CLS];
  for (int i = 0; i < SB; i++) {
    int r = b * SB + i;
    for (int j = 0; j < IMG; j++) xs[i * IMG + j] = 0.5 + 0.5 * sin(0.37 * (r * IMG + j + 1));
    for (int j = 0; j < CLS; j++) ys[i * CLS + j] = 0.5 + 0.5 * sin(0.53 * (r * CLS + j + 1));
  }
  *x = pd_tensor_from_f64(xs, PD_FLOAT32, 2, (const int64_t[]){SB, IMG});
  *y = pd_tensor_from_f64(ys, PD_FLOAT32, 2, (const int64_t[]){SB, CLS});
}

/* DemoNet: Linear(16, 16), ReLU, Linear(16, 8), the same weights on every
 * rank; with a mesh, the weights placed as w0 and w1 say. */
pd_layer *demo_net(pd_dist_process_mesh *mesh, const pd_dist_placement *w0, const pd_dist_placement *w1) {
  pd_seed(2024);
  pd_layer *ls[3] = {pd_nn_linear(IMG, IMG, NULL), pd_nn_relu(), pd_nn_linear(IMG, CLS, NULL)};
  pd_layer *net = pd_nn_sequential(ls, 3);
  if (!net || !mesh) return net;
  pd_scope_begin(); /* the weights are sharded in place; the scope takes the handles returned */
  int n = pd_dist_process_mesh_ndim(mesh);
  bool ok = pd_dist_shard_tensor(pd_layer_parameter(ls[0], "weight"), mesh, w0, n) &&
            pd_dist_shard_tensor(pd_layer_parameter(ls[2], "weight"), mesh, w1, n);
  pd_scope_end();
  if (!ok) {
    pd_layer_release(net);
    return NULL;
  }
  return net;
}

/* The whole RandomDataset of the seed: 16 images and labels. */
pd_io_dataset *seed_dataset(void) {
  pd_scope_begin();
  double xs[SN * SB * IMG], ys[SN * SB * CLS];
  for (int b = 0; b < SN; b++) {
    pd_tensor *x, *y;
    seed_batch(b, &x, &y);
    pd_tensor_copy_to(x, xs + b * SB * IMG, SB * IMG, PD_FLOAT64);
    pd_tensor_copy_to(y, ys + b * SB * CLS, SB * CLS, PD_FLOAT64);
  }
  pd_tensor *t[2] = {pd_tensor_from_f64(xs, PD_FLOAT32, 2, (const int64_t[]){SN * SB, IMG}),
                     pd_tensor_from_f64(ys, PD_FLOAT32, 2, (const int64_t[]){SN * SB, CLS})};
  pd_io_dataset *ds = pd_io_tensor_dataset(t, 2);
  pd_scope_end();
  return ds;
}

/* A ShardDataloader of the seed's dataset, its global batch of SB split
 * along mesh dim shard_dim. */
pd_dist_shard_dataloader *seed_shard_loader(pd_io_dataset *ds, pd_dist_process_mesh *mesh,
                                            const char *shard_dim) {
  return pd_dist_shard_dataloader_new(
      ds, &(pd_io_data_loader_opts){.batch_size = SB},
      &(pd_dist_shard_dataloader_opts){.meshes = &mesh, .n_meshes = 1, .shard_dim = shard_dim});
}

/* The global values of net's parameters (unsharded: a collective, so every
 * rank calls it in the same order), in layer order. */
int seed_param_values(int rank, pd_layer *net, double (*v)[SEED_MAX_PARAM], int *n) {
  pd_named_tensors ps;
  DIST_CHECK(pd_layer_parameters(net, &ps) == PD_OK && ps.n == 4, 60);
  int rc = 0;
  pd_scope_begin();
  for (int i = 0; i < ps.n && rc == 0; i++) {
    pd_tensor *t = pd_dist_is_dist(ps.tensors[i]) ? pd_dist_unshard_dtensor(ps.tensors[i]) : ps.tensors[i];
    if (!t || pd_tensor_numel(t) > SEED_MAX_PARAM ||
        pd_tensor_copy_to(t, v[i], pd_tensor_numel(t), PD_FLOAT64) != pd_tensor_numel(t))
      rc = 61;
    else
      n[i] = (int)pd_tensor_numel(t);
  }
  pd_scope_end();
  pd_named_tensors_free(&ps);
  return rc;
}

int seed_values_equal(int rank, const char *what, double (*a)[SEED_MAX_PARAM], double (*b)[SEED_MAX_PARAM],
                      const int *n) {
  for (int p = 0; p < 4; p++)
    for (int i = 0; i < n[p]; i++)
      if (fabs(a[p][i] - b[p][i]) > 1e-6) {
        fprintf(stderr, "rank %d: %s: parameter %d [%d] %.9g, expected %.9g\n", rank, what, p, i, a[p][i],
                b[p][i]);
        return 62;
      }
  return 0;
}

int seed_global_batches(int rank, pd_dist_process_mesh *mesh, const char *shard_dim, pd_tensor **xs,
                        pd_tensor **ys) {
  pd_io_dataset *ds = seed_dataset();
  pd_dist_shard_dataloader *sl = ds ? seed_shard_loader(ds, mesh, shard_dim) : NULL;
  int rc = sl ? 0 : 40;
  for (int b = 0; b < SN && rc == 0; b++) {
    pd_tensor *batch[2];
    if (pd_dist_shard_dataloader_next(sl, batch, 2) != 2) {
      rc = 41;
      break;
    }
    xs[b] = pd_dist_unshard_dtensor(batch[0]); /* the caller's scope holds them */
    ys[b] = pd_dist_unshard_dtensor(batch[1]);
    if (!xs[b] || !ys[b] || pd_tensor_shape(xs[b])[0] != SB) rc = 42;
  }
  if (rc) fprintf(stderr, "rank %d: the global batches: status %d (%s)\n", rank, rc, pd_last_error());
  pd_dist_shard_dataloader_release(sl);
  pd_io_dataset_release(ds);
  return rc;
}

char *seed_op_list(pd_program *p) {
  pd_static_block *b = pd_program_global_block(p);
  size_t cap = 8192, len = 0;
  char *s = b ? calloc(cap, 1) : NULL;
  for (int i = 0; s && i < pd_static_block_num_ops(b); i++)
    len += (size_t)snprintf(s + len, cap - len, "%s%s", i ? " " : "", pd_static_block_op_type(b, i));
  return s;
}
