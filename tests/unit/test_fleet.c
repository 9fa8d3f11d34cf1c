/* paddle.distributed.fleet: DistributedStrategy defaults and the options
 * rule (fields as written from the defaults, literals refused), the rejection of what paddle.c does not do
 * yet, fleet.init and the worker queries in a one-rank world,
 * distributed_model, and the distributed optimizer's gradient merge against
 * hand-computed SGD updates. */
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

static const char *const k_vars[] = {"PADDLE_TRAINER_ID",
                                     "PADDLE_TRAINERS_NUM",
                                     "PADDLE_TRAINER_ENDPOINTS",
                                     "PADDLE_CURRENT_ENDPOINT",
                                     "PADDLE_MASTER",
                                     "OMPI_COMM_WORLD_RANK",
                                     "OMPI_COMM_WORLD_SIZE",
                                     "SLURM_PROCID",
                                     "SLURM_NTASKS",
                                     "MASTER_ADDR",
                                     "MASTER_PORT",
                                     "PMI_RANK",
                                     "PMI_SIZE",
                                     NULL};

static void clear_env(void) {
  for (int i = 0; k_vars[i]; i++) unsetenv(k_vars[i]);
}

static void expect_msg(pd_status st, pd_status want, const char *frag) {
  assert_int_equal(st, want);
  if (!strstr(pd_last_error(), frag)) fail_msg("error '%s' lacks '%s'", pd_last_error(), frag);
}

/* Paddle's defaults, as a user starts from them. */
static pd_fleet_distributed_strategy dflt(void) { return pd_fleet_distributed_strategy_default(); }

static void test_strategy_defaults(void **state) {
  (void)state;
  pd_fleet_distributed_strategy d = pd_fleet_distributed_strategy_default();
  assert_true(d.explicit_zero);
  assert_false(d.amp);
  assert_true(d.amp_configs.init_loss_scaling == 32768.0);
  assert_int_equal(d.amp_configs.incr_every_n_steps, 1000);
  assert_int_equal(d.amp_configs.decr_every_n_nan_or_inf, 2);
  assert_true(d.amp_configs.incr_ratio == 2.0 && d.amp_configs.decr_ratio == 0.8);
  assert_true(d.amp_configs.use_dynamic_loss_scaling);
  assert_int_equal(d.hybrid_configs.dp_degree, -1);
  assert_int_equal(d.hybrid_configs.mp_degree, 1);
  assert_int_equal(d.hybrid_configs.pp_degree, 1);
  assert_int_equal(d.hybrid_configs.sharding_degree, 1);
  assert_int_equal(d.hybrid_configs.sep_degree, 1);
  const char *order[5] = {"dp", "pp", "sharding", "sep", "mp"};
  for (int i = 0; i < 5; i++) assert_string_equal(d.hybrid_configs.order[i], order[i]);
  assert_int_equal(d.gradient_merge_configs.k_steps, 1);
  assert_true(d.gradient_merge_configs.avg);
  assert_true(d.fuse_all_reduce_ops);
  assert_true(d.fuse_grad_size_in_MB == 32.0);
  assert_true(d.last_comm_group_size_MB == 1.0);
  assert_false(d.find_unused_parameters);
  assert_true(d.a_sync);
  assert_int_equal(d.a_sync_configs.k_steps, -1);
  assert_true(d.sync_nccl_allreduce);
  assert_int_equal(d.nccl_comm_num, 1);
  assert_int_equal(d.pipeline_configs.micro_batch_size, 1);
  assert_string_equal(d.pipeline_configs.schedule_mode, "1F1B");
  assert_int_equal(d.sharding_configs.sharding_degree, 8);
  assert_int_equal(d.tensor_parallel_configs.tensor_init_seed, -1);
  assert_true(d.lamb_configs.lamb_weight_decay == 0.01);
  assert_true(d.lars_configs.lars_coeff == 0.001);
  assert_int_equal(d.dgc_configs.n_sparsity, 1);
  assert_true(d.dgc_configs.sparsity[0] == 0.999);
  assert_string_equal(d.gradient_scale_configs.scale_strategy, "avg");
  assert_int_equal(d.execution_strategy.num_iteration_per_drop_scope, 10);
  assert_int_equal(d.conv_workspace_size_limit, 512);

  /* NULL means the defaults */
  pd_fleet_distributed_strategy r;
  pd_fleet_distributed_strategy_resolve(NULL, &r);
  assert_true(r.fuse_all_reduce_ops && r.fuse_grad_size_in_MB == 32.0 && r.hybrid_configs.dp_degree == -1);
  assert_true(r.gradient_merge_configs.avg && r.a_sync && r.adam_d2sum);
  assert_int_equal(r.gradient_merge_configs.k_steps, 1);
  assert_int_equal(pd_fleet_distributed_strategy_check(NULL, 4), PD_OK);
  /* from the defaults every field is as written: false and 0 where Paddle's
   * default is true or not 0 */
  d.fuse_all_reduce_ops = false;
  d.gradient_merge_configs.avg = false;
  d.a_sync = false;
  d.amp_configs.incr_ratio = 0;
  d.hybrid_configs.order[0] = NULL; /* a partly NULL order is as written too */
  pd_fleet_distributed_strategy_resolve(&d, &r);
  assert_false(r.fuse_all_reduce_ops);
  assert_false(r.gradient_merge_configs.avg);
  assert_false(r.a_sync);
  assert_true(r.amp_configs.incr_ratio == 0);
  assert_null(r.hybrid_configs.order[0]);
  /* a struct that did not start from the defaults (a literal, all-zero
   * included) is refused by name: its zeros would not be Paddle's defaults */
  pd_fleet_distributed_strategy zero;
  memset(&zero, 0, sizeof zero);
  expect_msg(pd_fleet_distributed_strategy_check(&zero, 1), PD_ERR_INVALID,
             "DistributedStrategy: options must start from pd_fleet_distributed_strategy_default()");
  pd_fleet_distributed_strategy lit = {.fuse_all_reduce_ops = false, .fuse_grad_size_in_MB = 4};
  expect_msg(pd_fleet_distributed_strategy_check(&lit, 1), PD_ERR_INVALID, "must start from");
  /* NULL strings and lists of a struct from the defaults are the defaults */
  d = dflt();
  d.gradient_scale_configs.scale_strategy = NULL;
  memset(d.hybrid_configs.order, 0, sizeof d.hybrid_configs.order);
  pd_fleet_distributed_strategy_resolve(&d, &r);
  assert_string_equal(r.gradient_scale_configs.scale_strategy, "avg");
  assert_string_equal(r.hybrid_configs.order[4], "mp");
  assert_int_equal(pd_fleet_distributed_strategy_check(&d, 1), PD_OK);
}

static void test_strategy_rejections(void **state) {
  (void)state;
  pd_fleet_distributed_strategy s = dflt();
  s.amp = true;
  expect_msg(pd_fleet_distributed_strategy_check(&s, 2), PD_ERR_UNIMPLEMENTED,
             "DistributedStrategy.amp is not supported yet by paddle.c");
  s = dflt();
  s.recompute = true;
  expect_msg(pd_fleet_distributed_strategy_check(&s, 2), PD_ERR_UNIMPLEMENTED,
             "DistributedStrategy.recompute is not supported yet by paddle.c");
  s = dflt();
  s.sharding = true;
  expect_msg(pd_fleet_distributed_strategy_check(&s, 2), PD_ERR_UNIMPLEMENTED,
             "DistributedStrategy.sharding ");
  s = dflt();
  s.lamb = true;
  expect_msg(pd_fleet_distributed_strategy_check(&s, 2), PD_ERR_UNIMPLEMENTED, "DistributedStrategy.lamb ");
  s = dflt();
  s.nccl_comm_num = 2;
  expect_msg(pd_fleet_distributed_strategy_check(&s, 2), PD_ERR_UNIMPLEMENTED,
             "nccl_comm_num is not supported");
  s = dflt();
  s.hybrid_configs.mp_degree = 2;
  expect_msg(pd_fleet_distributed_strategy_check(&s, 2), PD_ERR_UNIMPLEMENTED,
             "DistributedStrategy.hybrid_configs.mp_degree is not supported yet by paddle.c (set to 2)");
  s = dflt();
  s.hybrid_configs.pp_degree = 2;
  expect_msg(pd_fleet_distributed_strategy_check(&s, 2), PD_ERR_UNIMPLEMENTED, "hybrid_configs.pp_degree");
  s = dflt();
  s.hybrid_configs.dp_degree = 3;
  expect_msg(pd_fleet_distributed_strategy_check(&s, 2), PD_ERR_INVALID,
             "hybrid_configs.dp_degree = 3 but the world has 2 ranks");
  s.hybrid_configs.dp_degree = 2;
  assert_int_equal(pd_fleet_distributed_strategy_check(&s, 2), PD_OK);
  s = dflt();
  s.hybrid_configs.order[2] = "mp";
  expect_msg(pd_fleet_distributed_strategy_check(&s, 2), PD_ERR_INVALID, "order names 'mp' twice");
  s = dflt();
  s.hybrid_configs.order[2] = "tp";
  expect_msg(pd_fleet_distributed_strategy_check(&s, 2), PD_ERR_INVALID, "order[2] = 'tp'");
  s = dflt();
  s.gradient_merge = true;
  s.gradient_merge_configs.k_steps = -2;
  expect_msg(pd_fleet_distributed_strategy_check(&s, 2), PD_ERR_INVALID, "k_steps must be >= 1, got -2");
  s = dflt();
  s.fuse_grad_size_in_MB = -1;
  expect_msg(pd_fleet_distributed_strategy_check(&s, 2), PD_ERR_INVALID, "fuse_grad_size_in_MB must be > 0");
  /* explicit_zero: switching off a default-on feature is named too */
  s = pd_fleet_distributed_strategy_default();
  s.sync_nccl_allreduce = false;
  expect_msg(pd_fleet_distributed_strategy_check(&s, 2), PD_ERR_UNIMPLEMENTED,
             "sync_nccl_allreduce is not supported yet by paddle.c (set to False)");
  /* ignored as in Paddle's collective dygraph mode: parameter-server and
   * static-graph settings, configs of features that are off */
  s = pd_fleet_distributed_strategy_default();
  s.a_sync = false;
  s.a_sync_configs.k_steps = 4;
  s.execution_strategy.num_threads = 4;
  s.without_graph_optimization = true;
  s.amp_configs.init_loss_scaling = 1024;
  s.recompute_configs.enable_offload = true;
  s.fuse_all_reduce_ops = false;
  s.find_unused_parameters = true;
  assert_int_equal(pd_fleet_distributed_strategy_check(&s, 2), PD_OK);
}

static void test_init_and_workers(void **state) {
  (void)state;
  clear_env();
  /* nothing before init */
  assert_false(pd_fleet_is_initialized());
  assert_null(pd_fleet_strategy());
  expect_msg(pd_fleet_barrier_worker(), PD_ERR_STATE, "call fleet.init");
  pd_layer *net = pd_nn_linear(3, 2, NULL);
  assert_null(pd_fleet_distributed_model(net));
  assert_non_null(strstr(pd_last_error(), "call fleet.init"));
  /* rejections at init, before the environment is touched */
  expect_msg(pd_fleet_init(false, NULL), PD_ERR_UNIMPLEMENTED, "parameter-server mode is not supported");
  pd_fleet_distributed_strategy bad = dflt();
  bad.recompute = true;
  expect_msg(pd_fleet_init(true, &bad), PD_ERR_UNIMPLEMENTED,
             "DistributedStrategy.recompute is not supported");
  pd_fleet_distributed_strategy lit = {.find_unused_parameters = true};
  expect_msg(pd_fleet_init(true, &lit), PD_ERR_INVALID,
             "must start from pd_fleet_distributed_strategy_default()");
  assert_false(pd_fleet_is_initialized());
  assert_false(pd_dist_is_initialized());

  pd_fleet_distributed_strategy s = dflt();
  s.fuse_grad_size_in_MB = 8;
  s.find_unused_parameters = true;
  assert_int_equal(pd_fleet_init(true, &s), PD_OK);
  assert_true(pd_fleet_is_initialized());
  assert_true(pd_dist_is_initialized());
  assert_true(pd_fleet_strategy()->fuse_grad_size_in_MB == 8.0);
  assert_true(pd_fleet_strategy()->find_unused_parameters);
  assert_true(pd_fleet_strategy()->last_comm_group_size_MB == 1.0);
  assert_int_equal(pd_fleet_worker_index(), 0);
  assert_int_equal(pd_fleet_worker_num(), 1);
  assert_true(pd_fleet_is_first_worker());
  assert_int_equal(pd_fleet_barrier_worker(), PD_OK);

  /* one rank: distributed_model is DataParallel's pass-through */
  pd_layer *dp = pd_fleet_distributed_model(net);
  assert_non_null(dp);
  assert_ptr_equal(pd_data_parallel_layers(dp), net);
  pd_scope_begin();
  pd_tensor *x = T(PD_FLOAT32, 2, SHAPE(1, 3), 1, 2, 3);
  pd_tensor *a = pd_layer_call1(dp, x), *b = pd_layer_call1(net, x);
  expect_close(a, b, 0, 0);
  pd_scope_end();
  assert_null(pd_fleet_distributed_model(NULL));
  pd_layer_release(dp);
  pd_layer_release(net);
  pd_fleet_shutdown();
  assert_int_equal(pd_dist_destroy_process_group(NULL), PD_OK);
  assert_false(pd_fleet_is_initialized());
  expect_no_live_tensors();
}

/* loss_t = sum(w * x_t): grad w = x_t. SGD lr 0.5 wrapped by the fleet
 * optimizer with gradient merge over k steps. Returns w after `steps`. */
static void run_merge(int k, bool avg, int steps, double *w_out, double *grad_after_first) {
  static const double xs[4][2] = {{1, 2}, {3, -4}, {0.5, 0.5}, {-2, 6}};
  pd_tensor *w = T(PD_FLOAT32, 1, SHAPE(2), 1, -1);
  pd_tensor_set_stop_gradient(w, false);
  pd_optimizer *sgd = pd_optimizer_sgd(0.5, &w, 1, NULL);
  assert_non_null(sgd);
  pd_fleet_distributed_strategy s = pd_fleet_distributed_strategy_default();
  s.gradient_merge = k > 1;
  s.gradient_merge_configs = (pd_fleet_gradient_merge_configs){.k_steps = k, .avg = avg};
  pd_optimizer *opt = pd_fleet_distributed_optimizer(sgd, &s);
  assert_non_null(opt);
  assert_ptr_equal(pd_fleet_inner_optimizer(opt), sgd);
  assert_string_equal(pd_optimizer_name(opt), "SGD");
  assert_true(pd_optimizer_get_lr(opt) == 0.5);
  for (int t = 0; t < steps; t++) {
    pd_scope_begin();
    pd_tensor *x = T(PD_FLOAT32, 1, SHAPE(2), xs[t][0], xs[t][1]);
    assert_int_equal(pd_backward(pd_sum(pd_multiply(w, x), NULL, 0, false), NULL, false), PD_OK);
    assert_int_equal(pd_optimizer_step(opt), PD_OK);
    pd_optimizer_clear_grad(opt, true);
    if (t == 0 && grad_after_first) grad_after_first[0] = pd_tensor_item_at(pd_tensor_grad(w), 0);
    pd_scope_end();
  }
  w_out[0] = pd_tensor_item_at(w, 0);
  w_out[1] = pd_tensor_item_at(w, 1);
  pd_optimizer_release(opt); /* releases sgd too */
  pd_tensor_release(w);
}

static void test_gradient_merge(void **state) {
  (void)state;
  double w[2], g0;
  /* no merging: plain SGD, every step */
  run_merge(1, true, 2, w, &g0);
  assert_float_equal(w[0], 1 - 0.5 * (1 + 3), 1e-6);
  assert_float_equal(w[1], -1 - 0.5 * (2 - 4), 1e-6);
  assert_float_equal(g0, 0, 0); /* cleared after each step */
  /* k = 2, avg: one update with the mean of two gradients */
  run_merge(2, true, 1, w, &g0);
  assert_float_equal(w[0], 1, 0); /* nothing applied yet */
  assert_float_equal(w[1], -1, 0);
  assert_float_equal(g0, 1, 0); /* the gradient is kept for merging */
  run_merge(2, true, 2, w, NULL);
  assert_float_equal(w[0], 1 - 0.5 * (1 + 3) / 2, 1e-6);
  assert_float_equal(w[1], -1 - 0.5 * (2 - 4) / 2, 1e-6);
  /* k = 2, sum: twice that update */
  run_merge(2, false, 2, w, NULL);
  assert_float_equal(w[0], 1 - 0.5 * (1 + 3), 1e-6);
  assert_float_equal(w[1], -1 - 0.5 * (2 - 4), 1e-6);
  /* k = 3 over 4 steps: one merged update, then the 4th gradient waits */
  run_merge(3, true, 4, w, NULL);
  assert_float_equal(w[0], 1 - 0.5 * (1 + 3 + 0.5) / 3, 1e-6);
  assert_float_equal(w[1], -1 - 0.5 * (2 - 4 + 0.5) / 3, 1e-6);
  /* the strategy is checked here too; the inner optimizer stays the caller's */
  pd_tensor *p = T(PD_FLOAT32, 1, SHAPE(1), 0);
  pd_optimizer *sgd = pd_optimizer_sgd(0.1, &p, 1, NULL);
  pd_fleet_distributed_strategy bad = dflt();
  bad.dgc = true;
  assert_null(pd_fleet_distributed_optimizer(sgd, &bad));
  assert_non_null(strstr(pd_last_error(), "DistributedStrategy.dgc is not supported yet"));
  pd_fleet_distributed_strategy lit = {.gradient_merge = true, .gradient_merge_configs = {.k_steps = 2}};
  assert_null(pd_fleet_distributed_optimizer(sgd, &lit));
  assert_non_null(strstr(pd_last_error(), "must start from pd_fleet_distributed_strategy_default()"));
  assert_null(pd_fleet_distributed_optimizer(NULL, NULL));
  assert_null(pd_fleet_inner_optimizer(sgd));
  pd_optimizer_release(sgd);
  pd_tensor_release(p);
  expect_no_live_tensors();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_strategy_defaults),
      cmocka_unit_test(test_strategy_rejections),
      cmocka_unit_test(test_init_and_workers),
      cmocka_unit_test(test_gradient_merge),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
