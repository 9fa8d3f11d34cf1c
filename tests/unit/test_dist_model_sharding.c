/* Strategy.sharding stages 1 and 2 in dist.to_static: seed 000's DemoNet
 * trained with AdamW through DistModel on a data-parallel mesh (each batch
 * split over "dp") with sharding stage 1 (from the Strategy) and stage 2
 * (from shard_optimizer's ShardingStage2, which turns sharding on) gives
 * the losses and parameters of the unsharded DistModel and of one process
 * to 1e-6, each rank holding half of the optimizer states; the partitioned
 * Program shows the rewrite op by op; state_dict("opt") returns the states
 * as shards whose global values equal the unsharded run's; with
 * gradient_merge too, the same as gradient_merge alone. On 4 processes
 * the same on a 2-d mesh (dp x mp). Bad sharding settings are refused by
 * name. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist_ranks.h"
#include "dist_seed.h"
#include "ops/op_registry.h"
#include "paddlec.h"
#include "test_util.h"

enum { STEPS = SN, RATE_PERMILLE = 50 };

/* How a run shards the optimizer. */
typedef enum how {
  NO_SHARDING,
  STRATEGY_STAGE1,
  STRATEGY_STAGE2,
  SHARD_OPT_STAGE2,
  MERGE_ONLY,  /* gradient_merge k=2, no sharding */
  MERGE_STAGE2 /* gradient_merge k=2 and sharding stage 2 */
} how;

/* What a run gives. */
typedef struct run_result {
  double loss[STEPS];
  double param[4][SEED_MAX_PARAM];
  int n[4];
  int64_t opt_bytes;         /* this rank's optimizer-state bytes (local shards) */
  double moment1[IMG * IMG]; /* linear_0's weight moment1, its global value */
  char placements[256];      /* ... and its placements */
  char *ops;                 /* the partitioned train Program's op types */
} run_result;

static double lr(void) { return RATE_PERMILLE / 1000.0; }

/* The seed's train loop, eagerly in this process on the global batches. */
static int run_eager(int rank, pd_tensor *const *xs, pd_tensor *const *ys, run_result *r) {
  pd_layer *net = demo_net(NULL, NULL, NULL), *mse = pd_nn_mse_loss(NULL);
  pd_named_tensors ps;
  DIST_CHECK(net && mse && pd_layer_parameters(net, &ps) == PD_OK, 1);
  pd_optimizer *opt = pd_optimizer_adam_w(lr(), ps.tensors, ps.n, NULL);
  pd_named_tensors_free(&ps);
  for (int s = 0; s < STEPS; s++) {
    pd_scope_begin();
    pd_tensor *loss = NULL;
    pd_layer_call(mse, (pd_tensor *[]){pd_layer_call1(net, xs[s]), ys[s]}, 2, &loss, 1);
    DIST_CHECK(loss && pd_backward(loss, NULL, false) == PD_OK && pd_optimizer_step(opt) == PD_OK, 2);
    r->loss[s] = pd_tensor_item(loss);
    pd_optimizer_clear_grad(opt, false);
    pd_scope_end();
  }
  int rc = seed_param_values(rank, net, r->param, r->n);
  pd_optimizer_release(opt);
  pd_layer_release(mse);
  pd_layer_release(net);
  return rc;
}

/* The optimizer-state bytes this rank holds, and linear_0's weight moment1
 * (global value and placements), from state_dict("opt"). */
static int opt_state(int rank, pd_dist_model *m, run_result *r) {
  pd_named_tensors sd = {0};
  DIST_CHECK(pd_dist_model_state_dict(m, "opt", &sd) == PD_OK, 20);
  int rc = 0, found = 0;
  r->opt_bytes = 0;
  for (int i = 0; i < sd.n && rc == 0; i++) {
    pd_tensor *t = sd.tensors[i];
    pd_tensor *local = pd_dist_is_dist(t) ? pd_dist_local_value(t) : t; /* the rank's scope holds it */
    r->opt_bytes += pd_tensor_numel(local) * 4;
    if (!strstr(sd.names[i], ".w_0_moment1_0")) continue;
    if (found++) continue; /* the first Linear's weight comes first */
    pd_tensor *g = pd_dist_is_dist(t) ? pd_dist_unshard_dtensor(t) : t;
    if (!g || pd_tensor_numel(g) != IMG * IMG) rc = 21;
    if (rc == 0) pd_tensor_copy_to(g, r->moment1, IMG * IMG, PD_FLOAT64);
    if (rc == 0 && !pd_dist_attr_str(t, r->placements, sizeof r->placements)) rc = 22;
  }
  pd_named_tensors_free(&sd);
  DIST_CHECK(rc == 0 && found == 2, rc ? rc : 23);
  return 0;
}

/* The seed's train loop through dist.to_static: DemoNet with the weights
 * placed w0, w1 on mesh, each batch split along "dp" by a ShardDataloader,
 * AdamW sharded as `h` says. */
static int run_dist(int rank, pd_dist_process_mesh *mesh, const pd_dist_placement *w0,
                    const pd_dist_placement *w1, how h, run_result *r) {
  pd_layer *net = demo_net(mesh, w0, w1), *mse = pd_nn_mse_loss(NULL);
  pd_named_tensors ps;
  DIST_CHECK(net && mse && pd_layer_parameters(net, &ps) == PD_OK, 10);
  pd_optimizer *opt = pd_optimizer_adam_w(lr(), ps.tensors, ps.n, NULL);
  pd_named_tensors_free(&ps);
  if (h == SHARD_OPT_STAGE2) {
    pd_dist_sharding_stage s2 = pd_dist_sharding_stage2("dp", mesh);
    pd_optimizer *w = pd_dist_shard_optimizer(opt, &s2);
    DIST_CHECK(w, 11);
    opt = w;
  }
  pd_dist_strategy s = pd_dist_strategy_default();
  s.sharding = (pd_dist_strategy_sharding){h == STRATEGY_STAGE1 || h == STRATEGY_STAGE2 || h == MERGE_STAGE2,
                                           h == STRATEGY_STAGE1 ? 1 : 2, 2};
  s.gradient_merge = (pd_dist_strategy_gradient_merge){h == MERGE_ONLY || h == MERGE_STAGE2, 2, true};
  pd_io_dataset *ds = seed_dataset();
  pd_dist_shard_dataloader *sl = ds ? seed_shard_loader(ds, mesh, "dp") : NULL;
  pd_dist_model *m = NULL;
  pd_dist_data_loader *dl = NULL;
  DIST_CHECK(sl && pd_dist_to_static(net, NULL, sl, mse, opt, &s, &m, &dl) == PD_OK, 12);
  for (int b = 0; b < STEPS; b++) {
    pd_scope_begin();
    pd_tensor *in[2], *out = NULL;
    DIST_CHECK(pd_dist_data_loader_next(dl, in, 2) == 2, 13);
    DIST_CHECK(pd_dist_model_call(m, in, 2, &out, 1) == 1, 14);
    r->loss[b] = pd_tensor_item(out);
    pd_scope_end();
  }
  int rc = seed_param_values(rank, net, r->param, r->n);
  if (rc == 0) rc = opt_state(rank, m, r);
  pd_program *p = pd_dist_model_main_program(m, PD_DIST_MODE_TRAIN, false);
  r->ops = seed_op_list(p);
  char *text = pd_program_to_string(p);
  if (rc == 0 && (!r->ops || !text)) rc = 15;
  /* the printed Program names the shards the update runs on */
  bool sharded = h != NO_SHARDING && h != MERGE_ONLY;
  if (rc == 0 && (strstr(text, "w_0@SHARD") != NULL) != sharded) rc = 16;
  free(text);
  pd_dist_model_release(m);
  pd_dist_data_loader_release(dl);
  pd_dist_shard_dataloader_release(sl);
  pd_io_dataset_release(ds);
  pd_optimizer_release(opt);
  pd_layer_release(mse);
  pd_layer_release(net);
  return rc;
}

/* a's losses and parameters equal b's to 1e-6. */
static int same_training(int rank, const char *what, run_result *a, run_result *b) {
  for (int s = 0; s < STEPS; s++)
    if (fabs(a->loss[s] - b->loss[s]) > 1e-6) {
      fprintf(stderr, "rank %d: %s: step %d loss %.9g, expected %.9g\n", rank, what, s, a->loss[s],
              b->loss[s]);
      return 30;
    }
  return seed_values_equal(rank, what, a->param, b->param, b->n);
}

/* The sharded run holds about half the unsharded run's optimizer states
 * (the moments exactly half; the beta powers stay whole), and its moment's
 * global value is the unsharded one. */
static int half_the_states(int rank, const char *what, const run_result *sharded, const run_result *whole) {
  double ratio = (double)sharded->opt_bytes / (double)whole->opt_bytes;
  if (ratio < 0.45 || ratio > 0.55) {
    fprintf(stderr, "rank %d: %s: %lld optimizer-state bytes, unsharded %lld (ratio %.3f)\n", rank, what,
            (long long)sharded->opt_bytes, (long long)whole->opt_bytes, ratio);
    return 50;
  }
  for (int k = 0; k < IMG * IMG; k++)
    if (fabs(sharded->moment1[k] - whole->moment1[k]) > 1e-6) {
      fprintf(stderr, "rank %d: %s: moment1[%d] %.9g, unsharded %.9g\n", rank, what, k, sharded->moment1[k],
              whole->moment1[k]);
      return 51;
    }
  return 0;
}

/* What each rank runs to update one parameter P with stage 1: this rank's
 * rows of P copied into P@SHARD, P's gradient all-reduced over "dp" and
 * sliced to the same rows, AdamW on the shard, the shards all-gathered
 * back into P. Stage 2 reduce-scatters the gradient instead. The loss,
 * Partial over "dp", is all-reduced last for the fetch. */
#define STAGE1_UPDATE "slice assign c_allreduce slice adamw_ c_allgather copy_"
#define STAGE2_UPDATE "slice assign c_reduce_scatter adamw_ c_allgather copy_"
static const char *const k_forward_backward =
    "matmul add relu matmul add mse_loss full scale subtract scale multiply sum reshape matmul matmul full "
    "greater_than full where sum reshape matmul ";

static int check_ops(int rank, const char *what, const char *ops, const char *update) {
  char want[4096];
  snprintf(want, sizeof want, "%s%s %s %s %s c_allreduce", k_forward_backward, update, update, update,
           update);
  if (strcmp(ops, want) != 0) {
    fprintf(stderr, "rank %d: %s: the partitioned train Program runs\n  %s\nnot\n  %s\n", rank, what, ops,
            want);
    return 60;
  }
  return 0;
}

static int rank_dp(int rank) {
  pd_dist_process_mesh *mesh =
      pd_dist_process_mesh_new(1, (const int64_t[]){2}, (const int[]){0, 1}, (const char *[]){"dp"});
  pd_tensor *xs[STEPS], *ys[STEPS];
  int rc = seed_global_batches(rank, mesh, "dp", xs, ys);
  static run_result one, whole, st1, st2, merge, merge_st2;
  const pd_dist_placement rep[1] = {pd_dist_replicate()};
  if (rc == 0) rc = run_eager(rank, xs, ys, &one);
  if (rc == 0) rc = run_dist(rank, mesh, rep, rep, NO_SHARDING, &whole);
  if (rc == 0) rc = run_dist(rank, mesh, rep, rep, STRATEGY_STAGE1, &st1);
  if (rc == 0) rc = run_dist(rank, mesh, rep, rep, SHARD_OPT_STAGE2, &st2);
  if (rc == 0) rc = run_dist(rank, mesh, rep, rep, MERGE_ONLY, &merge);
  if (rc == 0) rc = run_dist(rank, mesh, rep, rep, MERGE_STAGE2, &merge_st2);
  if (rc == 0) rc = same_training(rank, "unsharded vs one process", &whole, &one);
  if (rc == 0) rc = same_training(rank, "stage 1 vs unsharded", &st1, &whole);
  if (rc == 0) rc = same_training(rank, "stage 2 vs unsharded", &st2, &whole);
  if (rc == 0) rc = same_training(rank, "gradient_merge with stage 2 vs without", &merge_st2, &merge);
  if (rc == 0) rc = half_the_states(rank, "stage 1", &st1, &whole);
  if (rc == 0) rc = half_the_states(rank, "stage 2", &st2, &whole);
  /* the states come back as shards of dp; the unsharded ones replicated */
  if (rc == 0 && (!strstr(st1.placements, "Shard(dim=0)") || strstr(whole.placements, "Shard"))) {
    fprintf(stderr, "rank %d: moment1 placements: stage 1 %s, unsharded %s\n", rank, st1.placements,
            whole.placements);
    rc = 52;
  }
  if (rc == 0 && strstr(whole.ops, "assign")) rc = 61; /* no rewrite without sharding */
  if (rc == 0) rc = check_ops(rank, "stage 1", st1.ops, STAGE1_UPDATE);
  if (rc == 0) rc = check_ops(rank, "stage 2", st2.ops, STAGE2_UPDATE);
  free(whole.ops);
  free(st1.ops);
  free(st2.ops);
  free(merge.ops);
  free(merge_st2.ops);
  pd_dist_process_mesh_release(mesh);
  return rc;
}

static void test_sharding_stages_equal_no_sharding(void **state) {
  (void)state;
  dist_run_ranks_or_fail(2, rank_dp, 120);
}

/* dp x mp: linear_0's weight Shard(1) and linear_1's Shard(0) on "mp", the
 * batch split on "dp"; sharding stage 2 on "dp" shards each weight's other
 * dim (the second weight along dim 1: a strided copy, gathered along dim 1). */
static int rank_hybrid(int rank) {
  pd_dist_process_mesh *mesh = pd_dist_process_mesh_new(2, (const int64_t[]){2, 2}, (const int[]){0, 1, 2, 3},
                                                        (const char *[]){"dp", "mp"});
  pd_tensor *xs[STEPS], *ys[STEPS];
  int rc = seed_global_batches(rank, mesh, "dp", xs, ys);
  static run_result one, whole, st2;
  const pd_dist_placement w0[2] = {pd_dist_replicate(), pd_dist_shard(1)},
                          w1[2] = {pd_dist_replicate(), pd_dist_shard(0)};
  if (rc == 0) rc = run_eager(rank, xs, ys, &one);
  if (rc == 0) rc = run_dist(rank, mesh, w0, w1, NO_SHARDING, &whole);
  if (rc == 0) rc = run_dist(rank, mesh, w0, w1, STRATEGY_STAGE2, &st2);
  if (rc == 0) rc = same_training(rank, "dp x mp unsharded vs one process", &whole, &one);
  if (rc == 0) rc = same_training(rank, "dp x mp stage 2 vs unsharded", &st2, &whole);
  if (rc == 0) rc = half_the_states(rank, "dp x mp stage 2", &st2, &whole);
  if (rc == 0 && (!strstr(st2.ops, "c_reduce_scatter") || !strstr(st2.ops, "strided_slice"))) {
    fprintf(stderr, "rank %d: dp x mp stage 2 runs %s\n", rank, st2.ops);
    rc = 62;
  }
  free(whole.ops);
  free(st2.ops);
  pd_dist_process_mesh_release(mesh);
  return rc;
}

static void test_sharding_on_dp_x_mp(void **state) {
  (void)state;
  dist_run_ranks_or_fail(4, rank_hybrid, 120);
}

/* In one process: stage 3 and a degree that is not the sharding axis' size
 * are refused by name. */
static void test_bad_sharding_settings(void **state) {
  (void)state;
  pd_scope_begin();
  pd_layer *net = demo_net(NULL, NULL, NULL), *mse = pd_nn_mse_loss(NULL);
  pd_named_tensors ps;
  assert_int_equal(pd_layer_parameters(net, &ps), PD_OK);
  pd_optimizer *opt = pd_optimizer_adam_w(lr(), ps.tensors, ps.n, NULL);
  pd_named_tensors_free(&ps);
  pd_io_dataset *ds = seed_dataset();
  pd_io_loader *loader = pd_io_data_loader(ds, &(pd_io_data_loader_opts){.batch_size = SB});
  pd_dist_model *m = NULL;
  pd_dist_data_loader *dl = NULL;
  pd_dist_strategy s = pd_dist_strategy_default();
  s.sharding = (pd_dist_strategy_sharding){true, 3, 1};
  assert_int_equal(pd_dist_to_static(net, loader, NULL, mse, opt, &s, &m, &dl), PD_ERR_UNIMPLEMENTED);
  assert_non_null(strstr(pd_last_error(), "sharding stage 3"));
  s.sharding = (pd_dist_strategy_sharding){true, 1, 8}; /* Paddle's default degree; one process here */
  assert_int_equal(pd_dist_to_static(net, loader, NULL, mse, opt, &s, &m, &dl), PD_OK);
  pd_tensor *batch[2], *loss = NULL;
  assert_int_equal(pd_dist_data_loader_next(dl, batch, 2), 2);
  assert_int_equal(pd_dist_model_call(m, batch, 2, &loss, 1), PD_ERR_INVALID);
  assert_non_null(strstr(pd_last_error(), "degree is 8"));
  pd_dist_model_release(m);
  pd_dist_data_loader_release(dl);
  /* degree 1 on one process: the rewrite runs, no collective */
  s.sharding.degree = 1;
  assert_int_equal(pd_dist_to_static(net, loader, NULL, mse, opt, &s, &m, &dl), PD_OK);
  assert_int_equal(pd_dist_model_call(m, batch, 2, &loss, 1), 1);
  assert_true(isfinite(pd_tensor_item(loss)));
  char *ops = seed_op_list(pd_dist_model_main_program(m, PD_DIST_MODE_TRAIN, false));
  assert_non_null(strstr(ops, "assign adamw_ copy_"));
  assert_null(strstr(ops, "c_"));
  free(ops);
  pd_dist_model_release(m);
  pd_dist_data_loader_release(dl);
  pd_io_loader_release(loader);
  pd_io_dataset_release(ds);
  pd_optimizer_release(opt);
  pd_layer_release(mse);
  pd_layer_release(net);
  pd_scope_end();
}

/* c_reduce_scatter refuses bad attributes by name; in a group of one it
 * copies. */
static void test_reduce_scatter_op(void **state) {
  (void)state;
  int id = pd_op_find("c_reduce_scatter");
  assert_true(id >= 0);
  pd_tensor *x =
      pd_tensor_from_f64((const double[]){1, 2, 3, 4, 5, 6}, PD_FLOAT32, 2, (const int64_t[]){3, 2});
  pd_tensor *out[1] = {0};
  int n_out = 0;
  struct {
    int64_t nranks, reduce_type, axis;
    pd_status st;
    const char *says;
  } bad[] = {{2, 0, 0, PD_ERR_SHAPE, "dim 0 (3) does not split evenly over 2 ranks"},
             {2, 0, 5, PD_ERR_INVALID, "axis 5 is out of range"},
             {1, 9, 0, PD_ERR_INVALID, "reduce_type 9"},
             {0, 0, 0, PD_ERR_INVALID, "nranks is 0"}};
  for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
    pd_attrs a = {.i = {0, bad[k].nranks, bad[k].reduce_type, bad[k].axis}};
    assert_int_equal(pd_dispatch((pd_op_id)id, &x, 1, &a, out, &n_out), bad[k].st);
    assert_non_null(strstr(pd_last_error(), "c_reduce_scatter"));
    assert_non_null(strstr(pd_last_error(), bad[k].says));
  }
  pd_attrs one = {.i = {0, 1, 0, 1}};
  assert_int_equal(pd_dispatch((pd_op_id)id, &x, 1, &one, out, &n_out), PD_OK);
  assert_int_equal(n_out, 1);
  float got[6];
  assert_int_equal(pd_tensor_copy_to(out[0], got, 6, PD_FLOAT32), 6);
  for (int i = 0; i < 6; i++) assert_true(got[i] == (float)(i + 1));
  pd_tensor_release(out[0]);
  pd_tensor_release(x);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_reduce_scatter_op),
      cmocka_unit_test(test_bad_sharding_settings),
      cmocka_unit_test(test_sharding_stages_equal_no_sharding),
      cmocka_unit_test(test_sharding_on_dp_x_mp),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
