/* dist.to_static with the inplace ops that change their input's shape
 * (reshape_, squeeze_, unsqueeze_) on a sharded activation, 2 processes:
 *
 *   h = x @ w                       dp: the batch split (a ShardDataloader),
 *                                   w replicated: h Shard(0);
 *                                   mp: w Shard(1): h Shard(1)
 *   reshape_(h, [B, 2, 3]);  out = sum(h, axis 2)           [B, 2]
 *   unsqueeze_(h, [1]);      out = sum(h, axis 2)           [B, 1]
 *   u = unsqueeze(h, [1]); squeeze_(u, [1]);
 *                            out = sum(u, axis 1, keepdim)  [B, 1]
 *   loss = mse(out, label)
 *
 * After the inplace op the Program's h must have the new shape and the
 * placements renumbered for it (mp: Shard(1) becomes Shard(2) under
 * unsqueeze_), or the ops after it read a stale shape or shard the wrong
 * dim. The losses of a few SGD steps and the trained weight equal the same
 * model trained eagerly in one process to 1e-6. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist_model_checks.h"
#include "dist_ranks.h"
#include "paddlec.h"
#include "test_util.h"

enum { B = 4, IN = 3, H = 6, STEPS = 3 };

typedef enum which { RESHAPE, UNSQUEEZE, SQUEEZE } which;

static which g_which;
static bool g_mp; /* w Shard(1) and the batch whole; else the batch split and w replicated */

typedef struct net {
  pd_layer base;
  pd_tensor *w; /* borrowed from the base's parameters */
} net;

static int label_cols(void) { return g_which == RESHAPE ? 2 : 1; }

static int net_forward(pd_layer *self, pd_tensor *const *in, int n_in, pd_tensor **out, int max_out) {
  net *m = (net *)self;
  if (n_in < 1 || max_out < 1) return PD_ERR_INVALID;
  pd_tensor *h = pd_matmul(in[0], m->w, false, false), *r = NULL;
  if (!h) return pd_last_status();
  switch (g_which) {
    case RESHAPE:
      if (pd_reshape_(h, 3, (const int64_t[]){B, 2, 3}) == h) r = pd_sum(h, (const int64_t[]){2}, 1, false);
      break;
    case UNSQUEEZE:
      if (pd_unsqueeze_(h, 1, (const int64_t[]){1}) == h) r = pd_sum(h, (const int64_t[]){2}, 1, false);
      break;
    case SQUEEZE: {
      pd_tensor *u = pd_unsqueeze(h, 1, (const int64_t[]){1});
      if (u && pd_squeeze_(u, 1, (const int64_t[]){1}) == u) r = pd_sum(u, (const int64_t[]){1}, 1, true);
      break;
    }
  }
  out[0] = r;
  return r ? 1 : pd_last_status();
}

static const pd_layer_type k_net_type = {.name = "InplaceShapeNet", .forward = net_forward};

/* The net; w Shard(1) on mesh where mesh is given. */
static net *net_new(pd_dist_process_mesh *mesh) {
  net *m = pd_layer_new(sizeof *m, &k_net_type);
  if (!m) return NULL;
  double v[IN * H];
  for (int i = 0; i < IN * H; i++) v[i] = 0.4 * sin(0.3 + 0.71 * i);
  pd_scope_begin(); /* the scope drops the creation's reference; the layer keeps one */
  pd_tensor *t = pd_tensor_from_f64(v, PD_FLOAT32, 2, (const int64_t[]){IN, H});
  bool ok = t && pd_layer_add_parameter(&m->base, "w", t) == PD_OK;
  m->w = ok ? pd_layer_parameter(&m->base, "w") : NULL;
  if (m->w && mesh) /* sharded in place */
    ok = pd_dist_shard_tensor(m->w, mesh, (pd_dist_placement[]){pd_dist_shard(1)}, 1) != NULL;
  pd_scope_end();
  if (!ok || !m->w) {
    pd_layer_release(&m->base);
    return NULL;
  }
  return m;
}

/* The dataset's STEPS batches of B: x [STEPS B, IN], label [STEPS B, cols]. */
static void dataset_tensors(pd_tensor **x, pd_tensor **label) {
  int cols = label_cols();
  double xs[STEPS * B * IN], ls[STEPS * B * 2];
  for (int i = 0; i < STEPS * B * IN; i++) xs[i] = sin(0.37 * (i + 1));
  for (int i = 0; i < STEPS * B * cols; i++) ls[i] = cos(0.23 * (i + 1));
  *x = pd_tensor_from_f64(xs, PD_FLOAT32, 2, (const int64_t[]){STEPS * B, IN});
  *label = pd_tensor_from_f64(ls, PD_FLOAT32, 2, (const int64_t[]){STEPS * B, cols});
}

typedef struct result {
  double loss[STEPS];
  float w[IN * H];
} result;

static int run_eager(int rank, result *r) {
  net *m = net_new(NULL);
  pd_layer *mse = pd_nn_mse_loss(NULL);
  DIST_CHECK(m && mse, 1);
  pd_optimizer *opt = pd_optimizer_sgd(0.05, &m->w, 1, NULL);
  pd_scope_begin();
  pd_tensor *x, *label;
  dataset_tensors(&x, &label);
  int rc = dist_model_eager_steps(rank, &m->base, mse, opt, x, label, B, STEPS, r->loss);
  pd_scope_end();
  pd_tensor_copy_to(m->w, r->w, IN * H, PD_FLOAT32);
  pd_optimizer_release(opt);
  pd_layer_release(mse);
  pd_layer_release(&m->base);
  return rc;
}

static int run_dist(int rank, result *r) {
  pd_dist_process_mesh *mesh = pd_dist_process_mesh_new(1, (const int64_t[]){2}, (const int[]){0, 1},
                                                        (const char *[]){g_mp ? "mp" : "dp"});
  net *m = mesh ? net_new(g_mp ? mesh : NULL) : NULL;
  pd_layer *mse = pd_nn_mse_loss(NULL);
  DIST_CHECK(mesh && m && mse, 11);
  pd_optimizer *opt = pd_optimizer_sgd(0.05, &m->w, 1, NULL);
  pd_scope_begin();
  pd_tensor *t[2];
  dataset_tensors(&t[0], &t[1]);
  pd_io_dataset *ds = pd_io_tensor_dataset(t, 2);
  pd_scope_end();
  pd_io_loader *loader = NULL;
  pd_dist_shard_dataloader *sl = NULL;
  if (g_mp)
    loader = pd_io_data_loader(ds, &(pd_io_data_loader_opts){.batch_size = B});
  else
    sl = pd_dist_shard_dataloader_new(
        ds, &(pd_io_data_loader_opts){.batch_size = B},
        &(pd_dist_shard_dataloader_opts){.meshes = &mesh, .n_meshes = 1, .shard_dim = "dp"});
  pd_dist_model *dm = NULL;
  pd_dist_data_loader *dl = NULL;
  pd_status st = opt && (loader || sl) ? pd_dist_to_static(&m->base, loader, sl, mse, opt, NULL, &dm, &dl)
                                       : pd_last_status();
  if (st != PD_OK) fprintf(stderr, "rank %d: to_static: %s\n", rank, pd_last_error());
  DIST_CHECK(st == PD_OK, 12);
  int rc = dist_model_run_steps(rank, dm, dl, STEPS, r->loss);
  if (rc == 0) {
    pd_scope_begin();
    pd_tensor *w = pd_dist_is_dist(m->w) ? pd_dist_unshard_dtensor(m->w) : m->w;
    if (w)
      pd_tensor_copy_to(w, r->w, IN * H, PD_FLOAT32);
    else
      rc = 15;
    pd_scope_end();
  }
  pd_dist_model_release(dm);
  pd_dist_data_loader_release(dl);
  pd_dist_shard_dataloader_release(sl);
  pd_io_loader_release(loader);
  pd_io_dataset_release(ds);
  pd_optimizer_release(opt);
  pd_layer_release(mse);
  pd_layer_release(&m->base);
  pd_dist_process_mesh_release(mesh);
  return rc;
}

static int rank_run(int rank) {
  result eager, dist;
  int rc = run_eager(rank, &eager);
  if (rc == 0) rc = run_dist(rank, &dist);
  return rc ? rc : dist_model_compare_runs(rank, dist.loss, eager.loss, STEPS, dist.w, eager.w, IN * H);
}

static void run_case(which w, bool mp) {
  g_which = w; /* the forked ranks inherit them */
  g_mp = mp;
  dist_run_ranks_or_fail(2, rank_run, 120);
}

static void test_reshape_inplace_on_a_batch_shard(void **state) {
  (void)state;
  run_case(RESHAPE, false);
}

static void test_reshape_inplace_on_a_column_shard(void **state) {
  (void)state;
  run_case(RESHAPE, true);
}

static void test_unsqueeze_inplace_on_a_batch_shard(void **state) {
  (void)state;
  run_case(UNSQUEEZE, false);
}

static void test_unsqueeze_inplace_on_a_column_shard(void **state) {
  (void)state;
  run_case(UNSQUEEZE, true);
}

static void test_squeeze_inplace_on_a_batch_shard(void **state) {
  (void)state;
  run_case(SQUEEZE, false);
}

static void test_squeeze_inplace_on_a_column_shard(void **state) {
  (void)state;
  run_case(SQUEEZE, true);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_reshape_inplace_on_a_batch_shard),
      cmocka_unit_test(test_reshape_inplace_on_a_column_shard),
      cmocka_unit_test(test_unsqueeze_inplace_on_a_batch_shard),
      cmocka_unit_test(test_unsqueeze_inplace_on_a_column_shard),
      cmocka_unit_test(test_squeeze_inplace_on_a_batch_shard),
      cmocka_unit_test(test_squeeze_inplace_on_a_column_shard),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
