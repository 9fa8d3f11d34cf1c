/* shard_optimizer with ShardingStage1/2/3 over 2 processes (data parallel
 * on a 1-d "dp" mesh): the parameters after 10 AdamW steps equal one
 * process's unsharded training to 1e-6, and each rank holds half of the
 * moments' bytes; dist.Strategy's defaults and checks. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/tensor_impl.h"
#include "dist_ranks.h"
#include "paddlec/auto_parallel.h"
#include "paddlec/dist_sharding.h"
#include "test_util.h"

enum { BATCH = 4, IN = 8, HID = 6, OUT = 4, STEPS = 10, N_PARAMS = 4 };

static void run_ranks(int n, int (*fn)(int rank)) { dist_run_ranks_or_fail(n, fn, 120); }

static pd_layer *net_new(void) {
  pd_seed(11);
  pd_layer *ls[3] = {pd_nn_linear(IN, HID, NULL), pd_nn_relu(), pd_nn_linear(HID, OUT, NULL)};
  return pd_nn_sequential(ls, 3);
}

static pd_tensor *data(int step, int cols, double f) {
  double v[BATCH * IN];
  for (int i = 0; i < BATCH * cols; i++) v[i] = sin(f * (i + 1) + 0.7 * step);
  return pd_tensor_from_f64(v, PD_FLOAT32, 2, (const int64_t[]){BATCH, cols});
}

/* Trains STEPS steps of AdamW; with a mesh the batch is sharded on dp and
 * the optimizer is shard_optimizer(stage) (stage 0: shard_fn NULL). Writes
 * the final parameters (global values) and this rank's moment bytes. */
static int train(pd_dist_process_mesh *mesh, int stage, pd_tensor **final, int64_t *moment_bytes) {
  pd_layer *net = net_new(), *mse = pd_nn_mse_loss(NULL);
  if (mesh && pd_dist_shard_layer(net, mesh, NULL) != PD_OK) return 1;
  pd_named_tensors ps;
  if (pd_layer_parameters(net, &ps) != PD_OK || ps.n != N_PARAMS) return 2;
  pd_optimizer *opt = pd_optimizer_adam_w(0.05, ps.tensors, ps.n, NULL);
  if (mesh) {
    pd_dist_sharding_stage s = stage == 1   ? pd_dist_sharding_stage1("dp", mesh)
                               : stage == 2 ? pd_dist_sharding_stage2(NULL, mesh)
                                            : pd_dist_sharding_stage3("dp", NULL);
    pd_optimizer *w = pd_dist_shard_optimizer(opt, stage ? &s : NULL);
    if (!w) return 3;
    opt = w;
  }
  pd_dist_placement dp[1] = {pd_dist_shard(0)};
  for (int s = 0; s < STEPS; s++) {
    pd_scope_begin();
    pd_tensor *x = data(s, IN, 0.41), *y = data(s, OUT, 0.29);
    if (mesh) {
      x = pd_dist_shard_tensor(x, mesh, dp, 1);
      y = pd_dist_shard_tensor(y, mesh, dp, 1);
    }
    pd_tensor *loss = NULL;
    pd_layer_call(mse, (pd_tensor *[]){pd_layer_call1(net, x), y}, 2, &loss, 1);
    pd_status st = loss ? pd_backward(loss, NULL, false) : pd_last_status();
    if (st == PD_OK) st = pd_optimizer_step(opt);
    pd_optimizer_clear_grad(opt, false); /* zeroed Partial grads cannot take add_ yet */
    pd_scope_end();
    if (st != PD_OK) return 4;
  }
  for (int i = 0; i < ps.n; i++) {
    final[i] = pd_dist_unshard_dtensor(ps.tensors[i]);
    if (!final[i]) return 5;
  }
  pd_named_tensors sd;
  if (pd_optimizer_state_dict(opt, &sd) != PD_OK) return 6;
  *moment_bytes = 0;
  for (int i = 0; i < sd.n; i++)
    if (strstr(sd.names[i], "moment"))
      *moment_bytes += pd_tensor_numel(sd.tensors[i]) * (int64_t)pd_dtype_size(sd.tensors[i]->dtype);
  pd_named_tensors_free(&sd);
  pd_named_tensors_free(&ps);
  pd_optimizer_release(opt);
  pd_layer_release(mse);
  pd_layer_release(net);
  return 0;
}

static int rank_stages(int rank) {
  pd_tensor *ref[N_PARAMS], *got[N_PARAMS];
  int64_t ref_bytes, bytes;
  DIST_CHECK(train(NULL, 0, ref, &ref_bytes) == 0, 1);
  DIST_CHECK(ref_bytes == 2 * 4 * (IN * HID + HID + HID * OUT + OUT), 2);
  for (int stage = 0; stage <= 3; stage++) {
    pd_dist_process_mesh *m =
        pd_dist_process_mesh_new(1, (const int64_t[]){2}, (const int[]){0, 1}, (const char *[]){"dp"});
    int rc = train(m, stage, got, &bytes);
    if (rc) {
      fprintf(stderr, "rank %d: stage %d: step failed (%d): %s\n", rank, stage, rc, pd_last_error());
      return 10 + stage;
    }
    int64_t want = stage ? ref_bytes / 2 : ref_bytes;
    if (bytes != want) {
      fprintf(stderr, "rank %d: stage %d: %lld bytes of moments, want %lld\n", rank, stage, (long long)bytes,
              (long long)want);
      return 20 + stage;
    }
    for (int i = 0; i < N_PARAMS; i++) {
      pd_tensor *a = pd_contiguous(pd_cast(got[i], PD_FLOAT64)),
                *b = pd_contiguous(pd_cast(ref[i], PD_FLOAT64));
      DIST_CHECK(a && b && a->numel == b->numel, 3);
      for (int64_t k = 0; k < a->numel; k++) {
        double x = ((double *)pd_tensor_data(a))[k], y = ((double *)pd_tensor_data(b))[k];
        if (fabs(x - y) > 1e-6) {
          fprintf(stderr, "rank %d: stage %d: parameter %d[%lld] = %.9g, unsharded %.9g\n", rank, stage, i,
                  (long long)k, x, y);
          return 30 + stage;
        }
      }
      /* it trained: the parameters moved */
    }
    pd_dist_process_mesh_release(m);
  }
  return 0;
}

static void test_sharding_stages_two_ranks(void **state) {
  (void)state;
  run_ranks(2, rank_stages);
}

static void test_bad_input(void **state) {
  (void)state;
  pd_layer *net = net_new();
  pd_named_tensors ps;
  assert_int_equal(pd_layer_parameters(net, &ps), PD_OK);
  pd_optimizer *opt = pd_optimizer_adam_w(0.05, ps.tensors, ps.n, NULL);
  pd_dist_process_mesh *m = pd_dist_process_mesh_new(1, (const int64_t[]){1}, (const int[]){0}, NULL);
  pd_dist_sharding_stage s = pd_dist_sharding_stage1("dp", m);
  s.stage = 4;
  assert_null(pd_dist_shard_optimizer(opt, &s));
  assert_non_null(strstr(pd_last_error(), "sharding stage 4"));
  s.stage = 2;
  assert_null(pd_dist_shard_optimizer(opt, &s));
  assert_non_null(strstr(pd_last_error(), "no dim named 'dp'"));
  pd_dist_sharding_stage no_mesh = pd_dist_sharding_stage3(NULL, NULL);
  pd_layer *other = net_new();
  pd_named_tensors ps2;
  assert_int_equal(pd_layer_parameters(other, &ps2), PD_OK);
  pd_optimizer *opt2 = pd_optimizer_adam_w(0.05, ps2.tensors, ps2.n, NULL);
  assert_null(pd_dist_shard_optimizer(opt2, &no_mesh));
  assert_non_null(strstr(pd_last_error(), "is not a DTensor and no mesh was given"));
  assert_null(pd_dist_shard_optimizer(NULL, &s));
  /* a one-process mesh: stage 3 runs (each "shard" is the whole value) */
  pd_optimizer *w = pd_dist_shard_optimizer(opt, &(pd_dist_sharding_stage){3, "d0", m});
  assert_non_null(w);
  assert_true(pd_dist_is_dist(ps.tensors[0]));
  pd_optimizer_release(w);
  pd_optimizer_release(opt2);
  pd_named_tensors_free(&ps);
  pd_named_tensors_free(&ps2);
  pd_layer_release(net);
  pd_layer_release(other);
  pd_dist_process_mesh_release(m);
  pd_clear_error();
}

/* dist.Strategy: Paddle's defaults; sharding and gradient_merge accepted
 * (k_steps checked); every other feature refused by name when enabled. */
static void test_strategy(void **state) {
  (void)state;
  pd_dist_strategy s = pd_dist_strategy_default();
  assert_false(s.sharding.enable);
  assert_int_equal(s.sharding.stage, 1);
  assert_int_equal(s.sharding.degree, 8);
  assert_false(s.gradient_merge.enable);
  assert_int_equal(s.gradient_merge.k_steps, 1);
  assert_true(s.gradient_merge.avg);
  assert_string_equal(s.pipeline.schedule_mode, "1F1B");
  assert_int_equal(s.pipeline.micro_batch_size, 1);
  assert_int_equal(s.pipeline.accumulate_steps, 1);
  assert_string_equal(s.amp.dtype, "float16");
  assert_string_equal(s.amp.level, "O1");
  assert_true(s.amp.init_loss_scaling == 32768);
  assert_int_equal(s.amp.incr_every_n_steps, 1000);
  assert_int_equal(s.amp.decr_every_n_nan_or_inf, 2);
  assert_false(s.amp.use_dynamic_loss_scaling);
  assert_false(s.fused_passes.enable || s.fused_passes.gemm_epilogue || s.fused_passes.dropout_add);
  assert_false(s.recompute.enable);
  assert_int_equal(pd_dist_strategy_check(&s), PD_OK);
  assert_int_equal(pd_dist_strategy_check(NULL), PD_OK);
  s.sharding.enable = true;
  s.sharding.stage = 3;
  s.sharding.degree = 2;
  assert_int_equal(pd_dist_strategy_check(&s), PD_OK);
  s.sharding.stage = 4;
  assert_int_equal(pd_dist_strategy_check(&s), PD_ERR_INVALID);
  assert_non_null(strstr(pd_last_error(), "Strategy.sharding.stage: 4"));
  s.sharding.stage = 2;
  s.gradient_merge.enable = true;
  s.gradient_merge.k_steps = 4;
  assert_int_equal(pd_dist_strategy_check(&s), PD_OK);
  s.gradient_merge.k_steps = 0;
  assert_int_equal(pd_dist_strategy_check(&s), PD_ERR_INVALID);
  assert_non_null(strstr(pd_last_error(), "Strategy.gradient_merge.k_steps: 0"));
  s.gradient_merge.enable = false;
  s.recompute.enable = s.fused_passes.enable = s.fused_passes.dropout_add = true;
  assert_int_equal(pd_dist_strategy_check(&s), PD_OK);
  s.recompute.enable = s.fused_passes.enable = s.fused_passes.dropout_add = false;
  const char *names[] = {"pipeline.enable", "amp.enable"};
  bool *flags[] = {&s.pipeline.enable, &s.amp.enable};
  for (int i = 0; i < 2; i++) {
    *flags[i] = true;
    assert_int_equal(pd_dist_strategy_check(&s), PD_ERR_UNIMPLEMENTED);
    if (!strstr(pd_last_error(), names[i])) fail_msg("'%s' does not name %s", pd_last_error(), names[i]);
    *flags[i] = false;
  }
  pd_dist_strategy lit = {.sharding = {.enable = true}};
  assert_int_equal(pd_dist_strategy_check(&lit), PD_ERR_INVALID);
  assert_non_null(strstr(pd_last_error(), "pd_dist_strategy_default()"));
  pd_clear_error();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sharding_stages_two_ranks),
      cmocka_unit_test(test_bad_input),
      cmocka_unit_test(test_strategy),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
