/* Strategy.dp_optimization in dist.to_static: the gradient all_reduces of
 * a data-parallel model fused into buckets and overlapped with backward.
 * On 2 processes (mesh "dp") and on 4 (a 2 x 2 dp x mp mesh), the losses
 * and the parameters after 4 SGD steps equal those without buckets to
 * 1e-6, with one bucket (the default 32 MB) and with a bucket per gradient
 * (a tiny fuse_grad_size_in_MB); the partitioned Program runs c_coalesce,
 * c_allreduce_start_ and c_allreduce_wait_ instead of the gradients'
 * c_allreduces, the start of the first bucket before backward's last
 * matmul (the overlap) and each wait right before the update that reads
 * its bucket. The Strategy's checks name the field. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist_ranks.h"
#include "dist_seed.h"
#include "paddlec.h"
#include "test_util.h"

enum { STEPS = SN };

typedef struct run_result {
  double loss[STEPS];
  double param[4][SEED_MAX_PARAM];
  int numel[4];
  char *ops; /* the partitioned train Program's op types, space-separated */
} run_result;

/* STEPS train calls of the DistModel of net on batches split along mesh
 * dim 0 (Shard(0) on it, replicated on the others), with strategy s. */
static int train(int rank, pd_dist_process_mesh *mesh, const pd_dist_placement *w0,
                 const pd_dist_placement *w1, const pd_dist_strategy *s, run_result *r) {
  pd_layer *net = demo_net(mesh, w0, w1), *mse = pd_nn_mse_loss(NULL);
  pd_named_tensors ps;
  DIST_CHECK(net && mse && pd_layer_parameters(net, &ps) == PD_OK && ps.n == 4, 10);
  pd_optimizer *opt = pd_optimizer_sgd(0.1, ps.tensors, ps.n, NULL);
  pd_dist_model *m = NULL;
  pd_dist_data_loader *dl = NULL;
  pd_tensor *stub = pd_zeros(2, (const int64_t[]){SB, IMG}, PD_FLOAT32); /* the rank's scope holds it */
  pd_io_dataset *ds = pd_io_tensor_dataset(&stub, 1);
  pd_io_loader *loader = pd_io_data_loader(ds, NULL);
  DIST_CHECK(opt && loader && pd_dist_to_static(net, loader, NULL, mse, opt, s, &m, &dl) == PD_OK, 11);
  int nd = pd_dist_process_mesh_ndim(mesh);
  pd_dist_placement split[4] = {pd_dist_shard(0), pd_dist_replicate(), pd_dist_replicate(),
                                pd_dist_replicate()};
  for (int step = 0; step < STEPS; step++) {
    pd_scope_begin();
    pd_tensor *x, *y, *loss = NULL;
    seed_batch(step, &x, &y);
    pd_tensor *in[2] = {pd_dist_shard_tensor(x, mesh, split, nd), pd_dist_shard_tensor(y, mesh, split, nd)};
    DIST_CHECK(in[0] && in[1] && pd_dist_model_call(m, in, 2, &loss, 1) == 1, 12);
    r->loss[step] = pd_tensor_item(loss);
    pd_scope_end();
  }
  int rc = seed_param_values(rank, net, r->param, r->numel);
  if (rc) return rc;
  r->ops = seed_op_list(pd_dist_model_main_program(m, PD_DIST_MODE_TRAIN, false));
  DIST_CHECK(r->ops, 14);
  pd_named_tensors_free(&ps);
  pd_dist_model_release(m);
  pd_dist_data_loader_release(dl);
  pd_io_loader_release(loader);
  pd_io_dataset_release(ds);
  pd_optimizer_release(opt);
  pd_layer_release(mse);
  pd_layer_release(net);
  return 0;
}

static int same(int rank, const char *what, const run_result *a, const run_result *b) {
  for (int s = 0; s < STEPS; s++)
    if (fabs(a->loss[s] - b->loss[s]) > 1e-6) {
      fprintf(stderr, "rank %d: %s: step %d loss %.9g, without buckets %.9g\n", rank, what, s, a->loss[s],
              b->loss[s]);
      return 20;
    }
  int rc = seed_values_equal(rank, what, (double(*)[SEED_MAX_PARAM])a->param,
                             (double(*)[SEED_MAX_PARAM])b->param, b->numel);
  if (rc) return rc;
  DIST_CHECK(a->loss[STEPS - 1] < a->loss[0], 22);
  return 0;
}

/* The position of the n-th (0-based) word w in the op list, or -1. */
static int word_at(const char *ops, const char *w, int n) {
  int k = 0;
  size_t lw = strlen(w);
  for (const char *p = ops; *p;) {
    const char *e = strchr(p, ' ');
    size_t l = e ? (size_t)(e - p) : strlen(p);
    if (l == lw && strncmp(p, w, l) == 0 && n-- == 0) return k;
    k++;
    p += l + (e ? 1 : 0);
  }
  return -1;
}

/* Word k of the op list into buf ("" past the end). */
static void word_k(const char *ops, int k, char *buf, size_t cap) {
  buf[0] = 0;
  const char *p = ops;
  for (int i = 0; i < k && p; i++) {
    p = strchr(p, ' ');
    if (p) p++;
  }
  if (!p || k < 0) return;
  size_t l = strcspn(p, " ");
  snprintf(buf, cap, "%.*s", (int)l, p);
}

static int count(const char *ops, const char *w) {
  int n = 0;
  while (word_at(ops, w, n) >= 0) n++;
  return n;
}

/* Runs without buckets, with one bucket and with a bucket per gradient;
 * n_grads: the gradient all_reduces each rank runs. */
static int compare(int rank, pd_dist_process_mesh *mesh, const pd_dist_placement *w0,
                   const pd_dist_placement *w1, int n_grads) {
  static run_result plain, one, many;
  pd_dist_strategy s = pd_dist_strategy_default();
  int rc = train(rank, mesh, w0, w1, &s, &plain);
  s.dp_optimization.enable = true;
  if (rc == 0) rc = train(rank, mesh, w0, w1, &s, &one);
  s.dp_optimization.fuse_grad_size_in_MB = 1e-6; /* a byte: every gradient fills a bucket */
  if (rc == 0) rc = train(rank, mesh, w0, w1, &s, &many);
  if (rc == 0) rc = same(rank, "one bucket", &one, &plain);
  if (rc == 0) rc = same(rank, "a bucket per gradient", &many, &plain);
  if (rc == 0) {
    if (count(plain.ops, "c_allreduce") < n_grads || count(plain.ops, "c_coalesce") != 0 ||
        count(one.ops, "c_coalesce") != 1 || count(one.ops, "c_allreduce_start_") != 1 ||
        count(one.ops, "c_allreduce_wait_") != 1 ||
        count(one.ops, "c_allreduce") != count(plain.ops, "c_allreduce") - n_grads ||
        count(many.ops, "c_allreduce_start_") != n_grads || count(many.ops, "c_allreduce_wait_") != n_grads) {
      fprintf(stderr, "rank %d: the Programs run\n  %s\n  %s\n  %s\n", rank, plain.ops, one.ops, many.ops);
      rc = 30;
    }
  }
  if (rc == 0) {
    /* overlap: with a bucket per gradient the first starts before
     * backward's last matmul (one bucket: after it, with the last
     * gradient); each wait comes right before the views of its result and
     * the update (or gather) that reads it */
    int n_mm = count(many.ops, "matmul");
    bool placed =
        word_at(many.ops, "c_allreduce_start_", 0) < word_at(many.ops, "matmul", n_mm - 1) &&
        word_at(one.ops, "c_allreduce_start_", 0) > word_at(one.ops, "matmul", count(one.ops, "matmul") - 1);
    for (int i = 0; i < n_grads; i++) {
      int w = word_at(many.ops, "c_allreduce_wait_", i);
      char next[3][32];
      for (int j = 0; j < 3; j++) word_k(many.ops, w + 1 + j, next[j], sizeof next[j]);
      placed = placed && strcmp(next[0], "slice") == 0 && strcmp(next[1], "reshape") == 0 &&
               (strcmp(next[2], "sgd_") == 0 || strcmp(next[2], "c_allgather") == 0);
    }
    if (!placed) {
      fprintf(stderr, "rank %d: bucket ops out of place:\n  %s\n  %s\n", rank, one.ops, many.ops);
      rc = 31;
    }
  }
  free(plain.ops), free(one.ops), free(many.ops);
  return rc;
}

/* 2 processes, data parallel: all four gradients are all-reduced. */
static int rank_dp(int rank) {
  pd_dist_process_mesh *mesh =
      pd_dist_process_mesh_new(1, (const int64_t[]){2}, (const int[]){0, 1}, (const char *[]){"dp"});
  DIST_CHECK(mesh, 1);
  pd_dist_placement rep[1] = {pd_dist_replicate()};
  int rc = compare(rank, mesh, rep, rep, 4);
  pd_dist_process_mesh_release(mesh);
  return rc;
}

static void test_dp_on_two_processes(void **state) {
  (void)state;
  dist_run_ranks_or_fail(2, rank_dp, 120);
}

/* 4 processes, dp x mp: the weights sharded over "mp" as seed 000's, the
 * batch over "dp"; the four gradients are all-reduced over "dp". */
static int rank_dp_mp(int rank) {
  pd_dist_process_mesh *mesh = pd_dist_process_mesh_new(2, (const int64_t[]){2, 2}, (const int[]){0, 1, 2, 3},
                                                        (const char *[]){"dp", "mp"});
  DIST_CHECK(mesh, 1);
  int rc = compare(rank, mesh, (pd_dist_placement[]){pd_dist_replicate(), pd_dist_shard(1)},
                   (pd_dist_placement[]){pd_dist_replicate(), pd_dist_shard(0)}, 4);
  pd_dist_process_mesh_release(mesh);
  return rc;
}

static void test_dp_mp_on_four_processes(void **state) {
  (void)state;
  dist_run_ranks_or_fail(4, rank_dp_mp, 180);
}

static void test_strategy_checks(void **state) {
  (void)state;
  pd_dist_strategy s = pd_dist_strategy_default();
  assert_false(s.dp_optimization.enable);
  assert_true(s.dp_optimization.fuse_all_reduce_ops && s.dp_optimization.overlap_comm_cacl);
  assert_true(s.dp_optimization.fuse_grad_size_in_MB == 32);
  s.dp_optimization.enable = true;
  assert_int_equal(pd_dist_strategy_check(&s), PD_OK);
  s.dp_optimization.fuse_grad_size_in_MB = 0;
  assert_int_equal(pd_dist_strategy_check(&s), PD_ERR_INVALID);
  assert_non_null(strstr(pd_last_error(), "fuse_grad_size_in_MB: 0"));
  s.dp_optimization.fuse_grad_size_in_MB = 32;
  s.dp_optimization.gradient_sync_after_accumulate = true;
  assert_int_equal(pd_dist_strategy_check(&s), PD_ERR_UNIMPLEMENTED);
  assert_non_null(strstr(pd_last_error(), "dp_optimization.gradient_sync_after_accumulate"));
  pd_clear_error();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_strategy_checks),
      cmocka_unit_test(test_dp_on_two_processes),
      cmocka_unit_test(test_dp_mp_on_four_processes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
