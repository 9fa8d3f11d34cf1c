/* dist.to_static with the ops whose SPMD rules need a local step, trained
 * on 2 processes (mesh "mp") and on a 2x2 mesh of 4 (dp x mp, the batch
 * split along dp by a ShardDataloader):
 *
 *   e = embedding(ids, we)    we [V, D] Shard(0): c_embedding, e Partial
 *   h = e @ w1                w1 Shard(1): h sharded on its columns
 *   d = dropout(h, 0.5)       dropout of the shard (its global offset)
 *   g = d @ w2                w2 Shard(0): g Partial, all-reduced
 *   z = g @ w3                w3 Shard(1): the logits sharded by class
 *   loss = cross_entropy(z, label)   c_softmax_with_cross_entropy
 *
 * and their backward (c_embedding_grad, c_softmax_with_cross_entropy_grad,
 * the dropout mask's product). The losses of a few SGD steps and the
 * trained weights equal the same model trained eagerly in one process to
 * 1e-6, with the same seed for the dropout masks; each rank's partitioned
 * Program holds the local ops with its shard's attributes and not the
 * plain ones. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist_ranks.h"
#include "paddlec.h"
#include "test_util.h"

enum { V = 8, D = 4, H = 8, C = 6, B = 4, STEPS = 3, SEED = 11 };
enum { N_W = 4 };

typedef struct net {
  pd_layer base;
  pd_tensor *w[N_W]; /* we, w1, w2, w3, borrowed from the base's parameters */
} net;

static int net_forward(pd_layer *self, pd_tensor *const *in, int n_in, pd_tensor **out, int max_out) {
  net *m = (net *)self;
  if (n_in < 1 || max_out < 1) return PD_ERR_INVALID;
  pd_tensor *e = pd_embedding(in[0], m->w[0], PD_NO_PADDING);
  pd_tensor *h = e ? pd_matmul(e, m->w[1], false, false) : NULL;
  pd_tensor *d = h ? pd_dropout(h, 0.5, 0, NULL, true, NULL) : NULL;
  pd_tensor *g = d ? pd_matmul(d, m->w[2], false, false) : NULL;
  out[0] = g ? pd_matmul(g, m->w[3], false, false) : NULL;
  return out[0] ? 1 : pd_last_status();
}

static const pd_layer_type k_net_type = {.name = "LocalOpsNet", .forward = net_forward};

static const int64_t k_shape[N_W][2] = {{V, D}, {D, H}, {H, D}, {D, C}};
static const int k_shard_dim[N_W] = {0, 1, 0, 1};

/* The net with fixed weights; on mesh (NULL: dense) each weight is
 * Shard(k_shard_dim) on its last mesh axis, replicated on the others. */
static net *net_new(pd_dist_process_mesh *mesh, int mesh_ndim) {
  net *m = pd_layer_new(sizeof *m, &k_net_type);
  if (!m) return NULL;
  bool ok = true;
  for (int k = 0; k < N_W && ok; k++) {
    double v[V * H];
    int64_t n = k_shape[k][0] * k_shape[k][1];
    for (int64_t i = 0; i < n; i++) v[i] = 0.5 * sin(0.9 * k + 0.37 * (double)i);
    char name[8];
    snprintf(name, sizeof name, "w%d", k);
    pd_scope_begin(); /* the scope drops the creation's reference; the layer keeps one */
    pd_tensor *t = pd_tensor_from_f64(v, PD_FLOAT32, 2, k_shape[k]);
    ok = t && pd_layer_add_parameter(&m->base, name, t) == PD_OK;
    pd_scope_end();
    m->w[k] = ok ? pd_layer_parameter(&m->base, name) : NULL;
    ok = m->w[k] != NULL;
    if (ok && mesh) {
      pd_dist_placement p[2] = {pd_dist_replicate(), pd_dist_replicate()};
      p[mesh_ndim - 1] = pd_dist_shard(k_shard_dim[k]);
      pd_scope_begin(); /* sharded in place; the scope takes the handle returned */
      ok = pd_dist_shard_tensor(m->w[k], mesh, p, mesh_ndim) != NULL;
      pd_scope_end();
    }
  }
  if (!ok) {
    pd_layer_release(&m->base);
    return NULL;
  }
  return m;
}

/* The ids and labels of step s (each vocab and class shard gets some). */
static int64_t id_of(int s, int i) { return (3 * s + 5 * i + 1) % V; }
static int64_t label_of(int s, int i) { return (2 * s + 5 * i) % C; }

static pd_tensor *ids_tensor(int steps, int64_t (*f)(int, int), int ndim) {
  double v[STEPS * B];
  for (int s = 0; s < steps; s++)
    for (int i = 0; i < B; i++) v[s * B + i] = (double)f(s, i);
  const int64_t shape[2] = {steps * B, 1};
  return pd_tensor_from_f64(v, PD_INT64, ndim, shape);
}

/* The losses and trained weights of a run. */
typedef struct result {
  double loss[STEPS];
  float w[N_W][V * H];
} result;

static int weights_of(int rank, net *m, result *r) {
  for (int k = 0; k < N_W; k++) {
    pd_scope_begin();
    pd_tensor *d = pd_dist_is_dist(m->w[k]) ? pd_dist_unshard_dtensor(m->w[k]) : m->w[k];
    DIST_CHECK(d, 50 + k);
    pd_tensor_copy_to(d, r->w[k], k_shape[k][0] * k_shape[k][1], PD_FLOAT32);
    pd_scope_end();
  }
  return 0;
}

static int run_eager(int rank, result *r) {
  net *m = net_new(NULL, 0);
  pd_layer *ce = pd_nn_cross_entropy_loss(NULL);
  DIST_CHECK(m && ce, 1);
  pd_optimizer *opt = pd_optimizer_sgd(0.1, m->w, N_W, NULL);
  pd_seed(SEED);
  for (int s = 0; s < STEPS; s++) {
    pd_scope_begin();
    pd_tensor *all_ids = ids_tensor(STEPS, id_of, 1), *all_labels = ids_tensor(STEPS, label_of, 2),
              *loss = NULL;
    pd_tensor *ids =
        pd_slice(all_ids, 1, (const int64_t[]){0}, (const int64_t[]){s * B}, (const int64_t[]){(s + 1) * B});
    pd_tensor *label = pd_slice(all_labels, 1, (const int64_t[]){0}, (const int64_t[]){s * B},
                                (const int64_t[]){(s + 1) * B});
    pd_tensor *z = pd_layer_call1(&m->base, ids);
    DIST_CHECK(z && pd_layer_call(ce, (pd_tensor *[]){z, label}, 2, &loss, 1) == 1, 2);
    r->loss[s] = pd_tensor_item(loss);
    DIST_CHECK(pd_backward(loss, NULL, false) == PD_OK && pd_optimizer_step(opt) == PD_OK, 3);
    pd_optimizer_clear_grad(opt, false);
    pd_scope_end();
  }
  int rc = weights_of(rank, m, r);
  pd_optimizer_release(opt);
  pd_layer_release(ce);
  pd_layer_release(&m->base);
  return rc;
}

/* The local ops, with this rank's shard (mp coordinate mp, dp coordinate
 * dp of n_dp) in their attributes, and none of the plain ops. */
static int check_program(int rank, int mp, int dp, int n_dp, const char *prog) {
  char emb[96], ce[96], drop[96];
  snprintf(emb, sizeof emb, "start_index = %d, vocab_size = %d", mp * V / 2, V);
  snprintf(ce, sizeof ce, "nranks = 2, start_index = %d, num_classes = [%d]", mp * C / 2, C);
  snprintf(drop, sizeof drop, "global_shape = [%d, %d], offset = [%d, %d]", B, H, dp * B / n_dp, mp * H / 2);
  struct {
    const char *what;
    int min, max;
  } want[] = {
      {" c_embedding(", 1, 1},
      {" c_embedding_grad(", 1, 1},
      {" c_softmax_with_cross_entropy(", 1, 1},
      {" c_softmax_with_cross_entropy_grad(", 1, 1},
      {" dropout(", 1, 1},
      {emb, 2, 2}, /* c_embedding and its grad */
      {ce, 2, 2},
      {drop, 1, 1},
      {" embedding(", 0, 0},
      {" embedding_grad(", 0, 0},
      {" cross_entropy_with_softmax(", 0, 0},
      {" cross_entropy_with_softmax_grad(", 0, 0},
  };
  for (size_t k = 0; k < sizeof want / sizeof *want; k++) {
    int n = test_count_of(prog, want[k].what);
    if (n < want[k].min || n > want[k].max) {
      fprintf(stderr, "rank %d: '%s' %d times in the partitioned Program (want %d..%d):\n%s\n", rank,
              want[k].what, n, want[k].min, want[k].max, prog);
      return 30 + (int)k;
    }
  }
  return 0;
}

/* mesh_ndim 1: mesh "mp" of 2, a DataLoader of the global batch; 2: mesh
 * dp x mp of 2 x 2, a ShardDataloader splitting the batch along dp. */
static int run_dist(int rank, int mesh_ndim, result *r) {
  pd_dist_process_mesh *mesh =
      mesh_ndim == 1
          ? pd_dist_process_mesh_new(1, (const int64_t[]){2}, (const int[]){0, 1}, (const char *[]){"mp"})
          : pd_dist_process_mesh_new(2, (const int64_t[]){2, 2}, (const int[]){0, 1, 2, 3},
                                     (const char *[]){"dp", "mp"});
  net *m = net_new(mesh, mesh_ndim);
  pd_layer *ce = pd_nn_cross_entropy_loss(NULL);
  DIST_CHECK(mesh && m && ce, 11);
  pd_optimizer *opt = pd_optimizer_sgd(0.1, m->w, N_W, NULL);
  pd_scope_begin();
  pd_tensor *t[2] = {ids_tensor(STEPS, id_of, 1), ids_tensor(STEPS, label_of, 2)};
  pd_io_dataset *ds = pd_io_tensor_dataset(t, 2);
  pd_scope_end();
  pd_io_loader *loader =
      mesh_ndim == 1 ? pd_io_data_loader(ds, &(pd_io_data_loader_opts){.batch_size = B}) : NULL;
  pd_dist_shard_dataloader *sl =
      mesh_ndim == 2 ? pd_dist_shard_dataloader_new(ds, &(pd_io_data_loader_opts){.batch_size = B},
                                                    &(pd_dist_shard_dataloader_opts){
                                                        .meshes = &mesh, .n_meshes = 1, .shard_dim = "dp"})
                     : NULL;
  pd_dist_model *dm = NULL;
  pd_dist_data_loader *dl = NULL;
  DIST_CHECK(
      opt && (loader || sl) && pd_dist_to_static(&m->base, loader, sl, ce, opt, NULL, &dm, &dl) == PD_OK, 12);
  pd_seed(SEED);
  for (int s = 0; s < STEPS; s++) {
    pd_scope_begin();
    pd_tensor *in[2], *loss = NULL;
    DIST_CHECK(pd_dist_data_loader_next(dl, in, 2) == 2, 13);
    DIST_CHECK(pd_dist_model_call(dm, in, 2, &loss, 1) == 1, 14);
    r->loss[s] = pd_tensor_item(loss);
    pd_scope_end();
  }
  int rc = weights_of(rank, m, r);
  char *prog = pd_program_to_string(pd_dist_model_main_program(dm, PD_DIST_MODE_TRAIN, false));
  DIST_CHECK(prog, 15);
  int mp = mesh_ndim == 1 ? rank : rank % 2, dp = mesh_ndim == 1 ? 0 : rank / 2;
  if (rc == 0) rc = check_program(rank, mp, dp, mesh_ndim == 1 ? 1 : 2, prog);
  free(prog);
  pd_dist_model_release(dm);
  pd_dist_data_loader_release(dl);
  pd_io_loader_release(loader);
  pd_dist_shard_dataloader_release(sl);
  pd_io_dataset_release(ds);
  pd_optimizer_release(opt);
  pd_layer_release(ce);
  pd_layer_release(&m->base);
  pd_dist_process_mesh_release(mesh);
  return rc;
}

static int compare(int rank, const result *dist, const result *eager) {
  for (int s = 0; s < STEPS; s++)
    if (fabs(dist->loss[s] - eager->loss[s]) > 1e-6) {
      fprintf(stderr, "rank %d: step %d: loss %.9g, eagerly %.9g\n", rank, s, dist->loss[s], eager->loss[s]);
      return 21;
    }
  for (int k = 0; k < N_W; k++)
    for (int64_t i = 0; i < k_shape[k][0] * k_shape[k][1]; i++)
      if (fabs((double)dist->w[k][i] - eager->w[k][i]) > 1e-6) {
        fprintf(stderr, "rank %d: w%d [%lld] %.9g, eagerly %.9g\n", rank, k, (long long)i, dist->w[k][i],
                eager->w[k][i]);
        return 22;
      }
  /* the weights moved: every local op's gradient reached its weight */
  result init;
  net *m = net_new(NULL, 0);
  DIST_CHECK(m && weights_of(rank, m, &init) == 0, 23);
  pd_layer_release(&m->base);
  for (int k = 0; k < N_W; k++) {
    double moved = 0;
    for (int64_t i = 0; i < k_shape[k][0] * k_shape[k][1]; i++)
      moved = fmax(moved, fabs((double)dist->w[k][i] - init.w[k][i]));
    if (!(moved > 1e-4)) {
      fprintf(stderr, "rank %d: w%d did not move (%g)\n", rank, k, moved);
      return 24;
    }
  }
  return 0;
}

static int rank_run(int rank, int mesh_ndim) {
  result eager, dist;
  int rc = run_eager(rank, &eager);
  if (rc == 0) rc = run_dist(rank, mesh_ndim, &dist);
  return rc == 0 ? compare(rank, &dist, &eager) : rc;
}

static int rank_mp2(int rank) { return rank_run(rank, 1); }
static int rank_dp2_mp2(int rank) { return rank_run(rank, 2); }

static void test_local_ops_on_two_processes(void **state) {
  (void)state;
  dist_run_ranks_or_fail(2, rank_mp2, 120);
}

static void test_local_ops_on_a_2x2_mesh(void **state) {
  (void)state;
  dist_run_ranks_or_fail(4, rank_dp2_mp2, 120);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_local_ops_on_two_processes),
      cmocka_unit_test(test_local_ops_on_a_2x2_mesh),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
