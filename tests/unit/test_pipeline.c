/* Pipeline stages on stage meshes with the FThenB and 1F1B micro-batch
 * schedules: the merged orders, an MLP cut into 2 stages on 2 processes
 * and 4 stages on 4 (losses and parameters after several steps equal one
 * process training on the whole batch, 1F1B holding fewer live activations
 * per stage than FThenB; eval_batch gives the loss without gradients), 2
 * stages of 2 tensor-parallel processes each, and the errors. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/distributed/auto_parallel/ap_internal.h"
#include "dist_ranks.h"
#include "paddlec/auto_parallel.h"
#include "test_util.h"

enum { BATCH = 8, HIDDEN = 16, OUT = 8, MICRO = 4, STEPS = 3, MAX_STAGES = 4 };

/* ---- the merged orders ------------------------------------------------------ */
/* Stage s's actions in the merged order as "F0 B0 ..." into buf. */
static const char *stage_actions(const pd_ap_pipe_action *order, int n, int s, char *buf) {
  buf[0] = 0;
  for (int a = 0; a < n; a++)
    if (order[a].stage == s)
      sprintf(buf + strlen(buf), "%s%c%d", buf[0] ? " " : "", order[a].backward ? 'B' : 'F',
              order[a].micro_batch);
  return buf;
}

static void test_schedule_orders(void **state) {
  (void)state;
  pd_ap_pipe_action order[2 * 4 * 4];
  char buf[256];
  assert_int_equal(pd_ap_pipe_order(PD_AP_PIPE_1F1B, 2, 4, order), PD_OK);
  assert_string_equal(stage_actions(order, 16, 0, buf), "F0 F1 B0 F2 B1 F3 B2 B3");
  assert_string_equal(stage_actions(order, 16, 1, buf), "F0 B0 F1 B1 F2 B2 F3 B3");
  assert_int_equal(pd_ap_pipe_order(PD_AP_PIPE_FTHENB, 2, 4, order), PD_OK);
  assert_string_equal(stage_actions(order, 16, 0, buf), "F0 F1 F2 F3 B0 B1 B2 B3");
  assert_string_equal(stage_actions(order, 16, 1, buf), "F0 F1 F2 F3 B0 B1 B2 B3");
  /* 4 stages: stage s warms up with 3 - s forwards */
  assert_int_equal(pd_ap_pipe_order(PD_AP_PIPE_1F1B, 4, 4, order), PD_OK);
  assert_string_equal(stage_actions(order, 32, 0, buf), "F0 F1 F2 F3 B0 B1 B2 B3");
  assert_string_equal(stage_actions(order, 32, 1, buf), "F0 F1 F2 B0 F3 B1 B2 B3");
  assert_string_equal(stage_actions(order, 32, 3, buf), "F0 B0 F1 B1 F2 B2 F3 B3");
  /* every action comes after what it needs */
  for (int a = 0; a < 32; a++) {
    pd_ap_pipe_action x = order[a];
    int need_stage = x.backward ? (x.stage == 3 ? 3 : x.stage + 1) : x.stage - 1;
    bool need_backward = x.backward && x.stage != 3;
    if (need_stage < 0) continue;
    bool found = false;
    for (int b = 0; b < a; b++)
      found |= order[b].stage == need_stage && order[b].micro_batch == x.micro_batch &&
               order[b].backward == need_backward;
    assert_true(found);
  }
  assert_int_equal(pd_ap_pipe_order(PD_AP_PIPE_1F1B, 2, 0, order), PD_ERR_INVALID);
}

/* ---- the model -------------------------------------------------------------- */
/* S stages of an MLP: Linear(16, 16) + ReLU each, the last Linear(16, 8);
 * the same initial weights for every S call (seeded). */
static void build_stages(int S, pd_layer **stages) {
  pd_seed(2024);
  for (int s = 0; s < S; s++) {
    if (s < S - 1) {
      pd_layer *ls[2] = {pd_nn_linear(HIDDEN, HIDDEN, NULL), pd_nn_relu()};
      stages[s] = pd_nn_sequential(ls, 2);
    } else {
      pd_layer *ls[1] = {pd_nn_linear(HIDDEN, OUT, NULL)};
      stages[s] = pd_nn_sequential(ls, 1);
    }
  }
}

static pd_tensor *batch_data(int step, int cols, double f) {
  double v[BATCH * HIDDEN];
  for (int i = 0; i < BATCH * cols; i++) v[i] = sin(f * (i + 1) + 0.3 * step);
  return pd_tensor_from_f64(v, PD_FLOAT32, 2, SHAPE(BATCH, cols));
}

static pd_optimizer *sgd_of(pd_layer **stages, int S) {
  pd_tensor *all[4 * MAX_STAGES];
  int n = 0;
  for (int s = 0; s < S; s++) {
    pd_named_tensors ps;
    pd_layer_parameters(stages[s], &ps);
    for (int i = 0; i < ps.n; i++) all[n++] = ps.tensors[i];
    pd_named_tensors_free(&ps);
  }
  return pd_optimizer_sgd(0.1, all, n, NULL);
}

/* One process, the whole batch: losses[STEPS] and the stages' parameters
 * after STEPS steps (dense, kept in params[stage][i]). */
static int reference(int S, double *losses, pd_tensor *params[][2]) {
  pd_layer *stages[MAX_STAGES];
  build_stages(S, stages);
  pd_optimizer *opt = sgd_of(stages, S);
  pd_layer *mse = pd_nn_mse_loss(NULL);
  for (int step = 0; step < STEPS; step++) {
    pd_scope_begin();
    pd_tensor *h = batch_data(step, HIDDEN, 0.37), *y = batch_data(step, OUT, 0.53), *loss = NULL;
    for (int s = 0; s < S; s++) h = pd_layer_call1(stages[s], h);
    pd_layer_call(mse, (pd_tensor *[]){h, y}, 2, &loss, 1);
    bool ok = loss && pd_backward(loss, NULL, false) == PD_OK && pd_optimizer_step(opt) == PD_OK;
    pd_optimizer_clear_grad(opt, false);
    losses[step] = ok ? pd_tensor_item(loss) : NAN;
    pd_scope_end();
    if (!ok) return 1;
  }
  for (int s = 0; s < S; s++) {
    pd_layer *lin = pd_nn_sequential_get(stages[s], 0);
    params[s][0] = pd_keep(pd_clone(pd_layer_parameter(lin, "weight"), PD_FLOAT32));
    params[s][1] = pd_keep(pd_clone(pd_layer_parameter(lin, "bias"), PD_FLOAT32));
  }
  pd_optimizer_release(opt);
  pd_layer_release(mse);
  for (int s = 0; s < S; s++) pd_layer_release(stages[s]);
  return 0;
}

static bool close_to(pd_tensor *a, pd_tensor *b, double tol) {
  if (!a || !b || pd_tensor_numel(a) != pd_tensor_numel(b)) return false;
  for (int64_t i = 0; i < pd_tensor_numel(a); i++) {
    double x = pd_tensor_item_at(a, i), y = pd_tensor_item_at(b, i);
    if (fabs(x - y) > tol * (1 + fabs(y))) return false;
  }
  return true;
}

typedef struct pipe_case {
  int S;            /* stages */
  int mp;           /* processes per stage (tensor parallel inside it when 2) */
  const char *mode; /* schedule_mode */
  int peak[MAX_STAGES];
} pipe_case;

/* Column-then-row sharding of a 2-process stage: stage 0's weight
 * Shard(1), the last stage's Shard(0) (Partial output, reduced by the
 * reshard to the next stage or the loss). */
static void shard_stage(pd_layer *stage, pd_dist_process_mesh *m, int s, int S) {
  pd_tensor *w = pd_layer_parameter(pd_nn_sequential_get(stage, 0), "weight");
  pd_dist_placement p = pd_dist_shard(s == S - 1 ? 0 : 1);
  pd_dist_shard_tensor(w, m, &p, 1);
  if (s < S - 1) {
    pd_tensor *b = pd_layer_parameter(pd_nn_sequential_get(stage, 0), "bias");
    pd_dist_shard_tensor(b, m, (pd_dist_placement[]){pd_dist_shard(0)}, 1);
  }
}

static int run_case(int rank, const pipe_case *c) {
  int S = c->S;
  double ref[STEPS];
  pd_tensor *ref_params[MAX_STAGES][2];
  DIST_CHECK(reference(S, ref, ref_params) == 0, 1);

  /* the global mesh [pp, mp]; stage s is its row s */
  int ids[MAX_STAGES * 2];
  for (int i = 0; i < S * c->mp; i++) ids[i] = i;
  pd_dist_process_mesh *global =
      pd_dist_process_mesh_new(2, SHAPE(S, c->mp), ids, (const char *const[]){"pp", "mp"});
  pd_layer *layers[MAX_STAGES];
  build_stages(S, layers);
  pd_dist_pipeline_stage stages[MAX_STAGES];
  pd_dist_process_mesh *meshes[MAX_STAGES];
  for (int s = 0; s < S; s++) {
    meshes[s] = pd_dist_process_mesh_get_mesh_with_dim(global, "pp", s);
    if (c->mp == 2) shard_stage(layers[s], meshes[s], s, S);
    stages[s] = (pd_dist_pipeline_stage){.layer = layers[s], .mesh = meshes[s]};
  }
  pd_layer *mse = pd_nn_mse_loss(NULL);
  pd_dist_pipeline_opts o = {.schedule_mode = c->mode, .accumulate_steps = MICRO, .loss_fn = mse};
  pd_dist_pipeline *p = pd_dist_pipeline_new(global, stages, S, &o);
  DIST_CHECK(p, 2);
  pd_optimizer *opt = sgd_of(layers, S);
  int me = rank / c->mp;
  /* eval_batch before any step: the first step's loss, and no gradient */
  pd_scope_begin();
  pd_tensor *eval = pd_dist_pipeline_eval_batch(p, batch_data(0, HIDDEN, 0.37), batch_data(0, OUT, 0.53));
  double ev = eval ? pd_tensor_item(eval) : NAN;
  pd_tensor *w_me = pd_layer_parameter(pd_nn_sequential_get(layers[me], 0), "weight");
  pd_scope_end();
  DIST_CHECK(eval && fabs(ev - ref[0]) <= 1e-6, 9);
  DIST_CHECK(pd_tensor_grad(w_me) == NULL && pd_dist_pipeline_peak_live_activations(p, me) == -1, 9);
  for (int step = 0; step < STEPS; step++) {
    pd_scope_begin();
    pd_tensor *loss =
        pd_dist_pipeline_train_batch(p, batch_data(step, HIDDEN, 0.37), batch_data(step, OUT, 0.53), opt);
    double v = loss ? pd_tensor_item(loss) : NAN;
    pd_scope_end();
    DIST_CHECK(loss, 3);
    if (fabs(v - ref[step]) > 1e-6) {
      fprintf(stderr, "rank %d (%s, %d stages): step %d loss %.9g, one process %.9g\n", rank, c->mode, S,
              step, v, ref[step]);
      return 4;
    }
    for (int s = 0; s < S; s++) {
      int peak = pd_dist_pipeline_peak_live_activations(p, s);
      if (peak != (s == me ? c->peak[s] : -1)) {
        fprintf(stderr, "rank %d (%s): stage %d held %d live activations, expected %d\n", rank, c->mode, s,
                peak, s == me ? c->peak[s] : -1);
        return 5;
      }
    }
  }
  DIST_CHECK(ref[STEPS - 1] < ref[0], 6); /* it trains */
  /* this rank's stage's parameters equal the one-process ones */
  pd_layer *lin = pd_nn_sequential_get(layers[me], 0);
  const char *names[2] = {"weight", "bias"};
  for (int i = 0; i < 2; i++) {
    pd_tensor *param = pd_layer_parameter(lin, names[i]);
    pd_tensor *whole = pd_dist_unshard_dtensor(param);
    if (!close_to(whole, ref_params[me][i], 1e-6)) {
      fprintf(stderr, "rank %d (%s): stage %d's %s differs from one process\n", rank, c->mode, me, names[i]);
      return 7;
    }
    for (int s = 0; s < S; s++) /* the other stages' parameters hold nothing here */
      DIST_CHECK(
          s == me || pd_tensor_numel(pd_layer_parameter(pd_nn_sequential_get(layers[s], 0), names[i])) == 0,
          8);
  }
  pd_dist_pipeline_release(p);
  pd_optimizer_release(opt);
  pd_layer_release(mse);
  for (int s = 0; s < S; s++) {
    pd_layer_release(layers[s]);
    pd_dist_process_mesh_release(meshes[s]);
    pd_tensor_release(ref_params[s][0]);
    pd_tensor_release(ref_params[s][1]);
  }
  pd_dist_process_mesh_release(global);
  return 0;
}

/* The FThenB case, then 1F1B: the same numbers, fewer live activations. */
static int run_both(int rank, pipe_case *fthenb, pipe_case *one_f_one_b) {
  int rc = run_case(rank, fthenb);
  if (rc) return rc;
  rc = run_case(rank, one_f_one_b);
  if (rc) return 10 + rc;
  int me = rank / fthenb->mp;
  /* lower wherever 1F1B's warmup is shorter than the micro-batches */
  DIST_CHECK(one_f_one_b->peak[me] < fthenb->peak[me] || fthenb->S - me >= MICRO, 30);
  return 0;
}

static int rank_two_stages(int rank) {
  pipe_case f = {2, 1, "FThenB", {MICRO, MICRO}}, b = {2, 1, "1F1B", {2, 1}};
  return run_both(rank, &f, &b);
}

static void test_two_stages(void **state) {
  (void)state;
  dist_run_ranks_or_fail(2, rank_two_stages, 120);
}

static int rank_four_stages(int rank) {
  pipe_case f = {4, 1, "FThenB", {MICRO, MICRO, MICRO, MICRO}}, b = {4, 1, "1F1B", {4, 3, 2, 1}};
  return run_both(rank, &f, &b);
}

static void test_four_stages(void **state) {
  (void)state;
  dist_run_ranks_or_fail(4, rank_four_stages, 180);
}

/* 2 stages of 2 processes each, the weights sharded on mp inside them. */
static int rank_stages_with_mp(int rank) {
  pipe_case f = {2, 2, "FThenB", {MICRO, MICRO}}, b = {2, 2, "1F1B", {2, 1}};
  return run_both(rank, &f, &b);
}

static void test_stages_with_mp(void **state) {
  (void)state;
  dist_run_ranks_or_fail(4, rank_stages_with_mp, 180);
}

/* ---- errors ------------------------------------------------------------------ */
static void expect_msg(const char *frag) {
  if (!strstr(pd_last_error(), frag)) fail_msg("error '%s' lacks '%s'", pd_last_error(), frag);
}

static void test_errors(void **state) {
  (void)state;
  pd_scope_begin();
  pd_dist_process_mesh *global = pd_dist_process_mesh_new(1, SHAPE(1), (const int[]){0}, NULL);
  pd_dist_process_mesh *outside = pd_dist_process_mesh_new(1, SHAPE(1), (const int[]){3}, NULL);
  pd_layer *layers[2];
  build_stages(2, layers);
  pd_layer *mse = pd_nn_mse_loss(NULL);
  pd_dist_pipeline_stage stages[2] = {{.layer = layers[0], .mesh = global},
                                      {.layer = layers[1], .mesh = outside}};
  pd_dist_pipeline_opts o = {.schedule_mode = "1F1B", .accumulate_steps = MICRO, .loss_fn = mse};

  assert_null(pd_dist_pipeline_new(global, stages, 2, &o));
  expect_msg("stage 1's mesh");
  expect_msg("is not inside the global mesh");
  expect_msg("process 3 is not in it");

  stages[1].mesh = global;
  o.schedule_mode = "GPipe";
  assert_null(pd_dist_pipeline_new(global, stages, 2, &o));
  expect_msg("schedule_mode 'GPipe' is none of 'FThenB', '1F1B'");
  o.schedule_mode = "FThenB";
  o.accumulate_steps = 0;
  assert_null(pd_dist_pipeline_new(global, stages, 2, &o));
  expect_msg("accumulate_steps 0");

  /* a parameter already on another mesh */
  o.accumulate_steps = MICRO;
  pd_tensor *w = pd_layer_parameter(pd_nn_sequential_get(layers[1], 0), "weight");
  pd_dist_process_mesh *other = pd_dist_process_mesh_new(2, SHAPE(1, 1), (const int[]){0}, NULL);
  assert_non_null(
      pd_dist_shard_tensor(w, other, (pd_dist_placement[]){pd_dist_replicate(), pd_dist_replicate()}, 2));
  assert_null(pd_dist_pipeline_new(global, stages, 2, &o));
  expect_msg("stage 1's parameter '0.weight' is on mesh");
  pd_layer_release(layers[1]);
  pd_seed(7);
  pd_layer *ls[1] = {pd_nn_linear(HIDDEN, OUT, NULL)};
  stages[1].layer = layers[1] = pd_nn_sequential(ls, 1);

  /* on one process both stages may share the mesh: a batch of 6 does not
   * split into 4 micro-batches */
  o.schedule_mode = "1F1B";
  pd_dist_pipeline *p = pd_dist_pipeline_new(global, stages, 2, &o);
  assert_non_null(p);
  double v[6 * HIDDEN] = {0};
  pd_tensor *x = pd_tensor_from_f64(v, PD_FLOAT32, 2, SHAPE(6, HIDDEN));
  pd_tensor *y = pd_tensor_from_f64(v, PD_FLOAT32, 2, SHAPE(6, OUT));
  assert_null(pd_dist_pipeline_train_batch(p, x, y, NULL));
  expect_msg("a batch of 6 samples (label: 6) does not split into accumulate_steps=4 micro-batches");
  assert_null(pd_dist_pipeline_eval_batch(p, x, y));
  expect_msg("pipeline eval_batch: a batch of 6 samples");
  assert_int_equal(pd_dist_pipeline_peak_live_activations(p, 0), -1); /* no step ran */
  /* a batch of 8 trains, both stages on this process */
  pd_tensor *loss =
      pd_dist_pipeline_train_batch(p, batch_data(0, HIDDEN, 0.37), batch_data(0, OUT, 0.53), NULL);
  assert_non_null(loss);
  assert_true(isfinite(pd_tensor_item(loss)));
  assert_int_equal(pd_dist_pipeline_peak_live_activations(p, 0), 2);
  assert_int_equal(pd_dist_pipeline_peak_live_activations(p, 1), 1);
  pd_dist_pipeline_release(p);
  pd_layer_release(layers[0]);
  pd_layer_release(layers[1]);
  pd_layer_release(mse);
  pd_dist_process_mesh_release(global);
  pd_dist_process_mesh_release(outside);
  pd_dist_process_mesh_release(other);
  pd_scope_end();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_schedule_orders), cmocka_unit_test(test_errors),
      cmocka_unit_test(test_two_stages),      cmocka_unit_test(test_four_stages),
      cmocka_unit_test(test_stages_with_mp),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
