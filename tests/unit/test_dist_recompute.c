/* dist.to_static's Strategy.recompute and Strategy.fused_passes.
 *
 * recompute: a stack of MLP blocks, each marked by pd_dist_recompute,
 * trained with and without Strategy.recompute on 1 process and on 2
 * (the blocks tensor-parallel: column- then row-parallel Linear): the
 * losses and the parameters after the steps are the same bits, the train
 * Program runs the blocks' forward ops again in the backward (values
 * named .subprog_<n>), and the arena the Executor plans for the step is
 * smaller. With a dropout in each block, the dropouts keep their draws.
 *
 * fused_passes: residual blocks with dropout (y = dropout(relu(linear(x)))
 * + x) trained with fused_passes off, with dropout_add, and with
 * dropout_add and gemm_epilogue: the plan holds fused_dropout_add (and
 * fused_gemm_epilogue) in place of the ops, dropout_add gives the same
 * bits (the same masks from the same random stream), and the GEMM
 * epilogue's SGD update the same to 1e-6. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "distributed/auto_parallel/dist_program.h"
#include "dist_ranks.h"
#include "paddlec.h"
#include "test_util.h"

enum { B = 64, D = 16, H = 64, C = 4, BLOCKS = 4, STEPS = 3, MAX_P = 4 * BLOCKS + 2 };

static void batch(int s, pd_tensor **x, pd_tensor **y) {
  double xs[B * D], ys[B * C];
  for (int i = 0; i < B * D; i++) xs[i] = sin(0.29 * (s * B * D + i + 1));
  for (int i = 0; i < B * C; i++) ys[i] = 0.5 * cos(0.41 * (s * B * C + i + 1));
  *x = pd_tensor_from_f64(xs, PD_FLOAT32, 2, (const int64_t[]){B, D});
  *y = pd_tensor_from_f64(ys, PD_FLOAT32, 2, (const int64_t[]){B, C});
}

/* What a run gives: the losses, the parameters' global values, the bytes
 * of the train step's arena and the serial train Program (printed). */
typedef struct run_result {
  double loss[STEPS];
  float *param[MAX_P];
  int64_t numel[MAX_P];
  int n_param;
  size_t arena;
  char *program;
  char *lowered; /* the op types of the plan the Executor ran, space-separated */
} run_result;

static void result_free(run_result *r) {
  for (int i = 0; i < r->n_param; i++) free(r->param[i]);
  free(r->program);
  free(r->lowered);
}

/* Trains net (SGD 0.05, MSE) with strategy s for STEPS calls. */
static int train(int rank, pd_layer *net, const pd_dist_strategy *s, run_result *r) {
  memset(r, 0, sizeof *r);
  pd_layer *mse = pd_nn_mse_loss(NULL);
  pd_named_tensors ps;
  DIST_CHECK(net && mse && pd_layer_parameters(net, &ps) == PD_OK && ps.n <= MAX_P, 1);
  pd_optimizer *opt = pd_optimizer_sgd(0.05, ps.tensors, ps.n, NULL);
  pd_named_tensors_free(&ps);
  pd_tensor *x0, *y0;
  batch(0, &x0, &y0);
  pd_io_dataset *ds = pd_io_tensor_dataset((pd_tensor *[]){x0, y0}, 2);
  pd_io_loader *loader = pd_io_data_loader(ds, &(pd_io_data_loader_opts){.batch_size = B});
  pd_dist_model *m = NULL;
  pd_dist_data_loader *dl = NULL;
  DIST_CHECK(opt && loader && pd_dist_to_static(net, loader, NULL, mse, opt, s, &m, &dl) == PD_OK, 2);
  pd_seed(77); /* every run draws its dropout masks from the same stream */
  for (int k = 0; k < STEPS; k++) {
    pd_tensor *x, *y, *loss = NULL;
    batch(k, &x, &y);
    DIST_CHECK(pd_dist_model_call(m, (pd_tensor *[]){x, y}, 2, &loss, 1) == 1, 3);
    r->loss[k] = pd_tensor_item(loss);
  }
  pd_executor *exe = pd_ap_model_executor(m);
  r->arena = pd_executor_arena_bytes(exe);
  r->program = pd_program_to_string(pd_dist_model_main_program(m, PD_DIST_MODE_TRAIN, true));
  const pd_program *low = pd_executor_lowered_program(exe);
  DIST_CHECK(r->program && low, 4);
  size_t cap = 16384, len = 0;
  r->lowered = calloc(cap, 1);
  for (int k = 0; r->lowered && k < low->blocks[0]->n_ops; k++)
    len += (size_t)snprintf(r->lowered + len, cap - len, "%s ", low->blocks[0]->ops[k]->type);
  DIST_CHECK(pd_layer_parameters(net, &ps) == PD_OK, 5);
  for (int i = 0; i < ps.n; i++) { /* unshard: a collective, every rank in the same order */
    pd_tensor *t = pd_dist_is_dist(ps.tensors[i]) ? pd_dist_unshard_dtensor(ps.tensors[i]) : ps.tensors[i];
    DIST_CHECK(t, 6);
    r->numel[i] = pd_tensor_numel(t);
    r->param[i] = malloc(sizeof(float) * (size_t)r->numel[i]);
    r->n_param = i + 1;
    DIST_CHECK(r->param[i] && pd_tensor_copy_to(t, r->param[i], r->numel[i], PD_FLOAT32) == r->numel[i], 7);
  }
  pd_named_tensors_free(&ps);
  pd_dist_model_release(m);
  pd_dist_data_loader_release(dl);
  pd_io_loader_release(loader);
  pd_io_dataset_release(ds);
  pd_optimizer_release(opt);
  pd_layer_release(mse);
  return 0;
}

/* How often `what` occurs in s. */
static int count(const char *s, const char *what) {
  int n = 0;
  for (const char *p = strstr(s, what); p; p = strstr(p + 1, what)) n++;
  return n;
}

/* Whether a and b trained alike: bit-equal, or within tol when tol > 0. */
static int same_training(int rank, const char *what, const run_result *a, const run_result *b, double tol) {
  for (int k = 0; k < STEPS; k++) {
    double d = fabs(a->loss[k] - b->loss[k]);
    if (tol > 0 ? d > tol : a->loss[k] != b->loss[k]) {
      fprintf(stderr, "rank %d: %s: loss %d %.9g, expected %.9g\n", rank, what, k, a->loss[k], b->loss[k]);
      return 20;
    }
  }
  DIST_CHECK(a->n_param == b->n_param, 21);
  for (int i = 0; i < a->n_param; i++)
    for (int64_t j = 0; j < a->numel[i]; j++) {
      double d = fabs((double)a->param[i][j] - b->param[i][j]);
      if (tol > 0 ? d > tol : a->param[i][j] != b->param[i][j]) {
        fprintf(stderr, "rank %d: %s: parameter %d [%lld] %.9g, expected %.9g\n", rank, what, i, (long long)j,
                a->param[i][j], b->param[i][j]);
        return 22;
      }
    }
  DIST_CHECK(a->loss[STEPS - 1] < a->loss[0], 23);
  return 0;
}

/* ---- recompute --------------------------------------------------------------- */
/* BLOCKS blocks Linear(D, H), ReLU, [Dropout(0.2),] Linear(H, D), each
 * marked (when mark) as a recompute segment, then a head Linear(D, C);
 * the same weights on every rank; with a mesh, each block's first weight
 * Shard(1) and second Shard(0). */
static pd_layer *mlp_stack(pd_dist_process_mesh *mesh, bool mark, bool dropout) {
  pd_seed(2024);
  pd_layer *ls[BLOCKS + 1];
  for (int i = 0; i < BLOCKS; i++) {
    pd_layer *blk[4] = {pd_nn_linear(D, H, NULL), pd_nn_relu(), NULL, NULL};
    blk[dropout ? 3 : 2] = pd_nn_linear(H, D, NULL);
    if (dropout) blk[2] = pd_nn_dropout(0.2, NULL);
    ls[i] = pd_nn_sequential(blk, dropout ? 4 : 3);
    if (mark && pd_dist_recompute(ls[i]) != PD_OK) return NULL;
    if (mesh) {
      pd_scope_begin();
      bool ok = pd_dist_shard_tensor(pd_layer_parameter(blk[0], "weight"), mesh,
                                     (pd_dist_placement[]){pd_dist_shard(1)}, 1) &&
                pd_dist_shard_tensor(pd_layer_parameter(blk[dropout ? 3 : 2], "weight"), mesh,
                                     (pd_dist_placement[]){pd_dist_shard(0)}, 1);
      pd_scope_end();
      if (!ok) return NULL;
    }
  }
  ls[BLOCKS] = pd_nn_linear(D, C, NULL);
  return pd_nn_sequential(ls, BLOCKS + 1);
}

static int rank_recompute(int rank) {
  int nranks = pd_dist_is_initialized() ? 2 : 1;
  pd_dist_process_mesh *mesh =
      nranks == 2
          ? pd_dist_process_mesh_new(1, (const int64_t[]){2}, (const int[]){0, 1}, (const char *[]){"x"})
          : NULL;
  pd_dist_strategy on = pd_dist_strategy_default(), off = on;
  on.recompute.enable = true;
  pd_dist_strategy some = on; /* Paddle's no_recompute_segments: the first and the third left alone */
  some.recompute.no_recompute_segments = (const int[]){0, 2};
  some.recompute.n_no_recompute_segments = 2;
  run_result plain = {0}, rc = {0}, unmarked = {0}, part = {0};
  pd_layer *n1 = mlp_stack(mesh, true, false), *n2 = mlp_stack(mesh, true, false),
           *n3 = mlp_stack(mesh, false, false), *n4 = mlp_stack(mesh, true, false);
  int err = train(rank, n1, &off, &plain);
  if (!err) err = train(rank, n2, &on, &rc);
  if (!err) err = train(rank, n3, &on, &unmarked); /* nothing marked: nothing to recompute */
  if (!err) err = train(rank, n4, &some, &part);
  if (!err) err = same_training(rank, "recompute", &rc, &plain, 0);
  if (!err) err = same_training(rank, "recompute, no layer marked", &unmarked, &plain, 0);
  if (!err) err = same_training(rank, "recompute, segments 0 and 2 left alone", &part, &plain, 0);
  if (!err) {
    fprintf(stderr, "rank %d of %d: train step arena %zu bytes, %zu with recompute\n", rank, nranks,
            plain.arena, rc.arena);
    /* each block's copies: the first Linear and the ReLU run again */
    char copy[64];
    snprintf(copy, sizeof copy, ".subprog_%d", BLOCKS - 1);
    DIST_CHECK(strstr(rc.program, copy) && !strstr(plain.program, ".subprog_"), 30);
    DIST_CHECK(!strstr(unmarked.program, ".subprog_") && unmarked.arena == plain.arena, 31);
    /* the plan runs each block's relu twice (its first matmul and add too;
     * the second matmul's copy is dead: no gradient reads its result) */
    DIST_CHECK(count(plain.lowered, "relu ") == BLOCKS && count(rc.lowered, "relu ") == 2 * BLOCKS, 33);
    DIST_CHECK(count(part.lowered, "relu ") == BLOCKS + 2 && !strstr(part.program, ".subprog_0") &&
                   strstr(part.program, ".subprog_1") && strstr(part.program, ".subprog_3"),
               34);
    DIST_CHECK(rc.arena <= part.arena && part.arena < plain.arena, 35);
    /* the blocks' [B, H] activations (the column-parallel half on 2 ranks)
     * are no longer kept from the forward to the backward; the arena also
     * holds every weight gradient until the updates at the end, and a
     * block's copies run with their own temporaries: 103808 -> 77824 bytes
     * on 1 process, 65536 -> 38272 on 2 */
    size_t block = (size_t)B * (H / nranks) * sizeof(float);
    DIST_CHECK(rc.arena > 0 && rc.arena + block <= plain.arena && rc.arena <= 0.8 * plain.arena, 32);
  }
  result_free(&plain);
  result_free(&rc);
  result_free(&unmarked);
  result_free(&part);
  pd_layer_release(n1);
  pd_layer_release(n2);
  pd_layer_release(n3);
  pd_layer_release(n4);
  pd_dist_process_mesh_release(mesh);
  return err;
}

/* With a dropout in each block: the dropouts are not run again (their
 * draws would differ); their results and masks are kept, so the same bits. */
static void test_recompute_keeps_random_ops(void **state) {
  (void)state;
  pd_scope_begin();
  int rank = 0;
  pd_dist_strategy on = pd_dist_strategy_default(), off = on;
  on.recompute.enable = true;
  run_result plain = {0}, rc = {0};
  pd_layer *n1 = mlp_stack(NULL, true, true), *n2 = mlp_stack(NULL, true, true);
  assert_int_equal(train(rank, n1, &off, &plain), 0);
  assert_int_equal(train(rank, n2, &on, &rc), 0);
  assert_int_equal(same_training(rank, "recompute with dropout", &rc, &plain, 0), 0);
  /* each block's first matmul runs again (relu's gradient reads its input) */
  assert_int_equal(count(rc.lowered, "matmul "), count(plain.lowered, "matmul ") + BLOCKS);
  assert_int_equal(count(rc.lowered, "dropout "), BLOCKS);
  assert_int_equal(count(plain.lowered, "dropout "), BLOCKS);
  assert_true(rc.arena < plain.arena);
  result_free(&plain);
  result_free(&rc);
  pd_layer_release(n1);
  pd_layer_release(n2);
  pd_scope_end();
}

static void test_recompute_one_process(void **state) {
  (void)state;
  pd_scope_begin();
  int rank = 0;
  assert_int_equal(rank_recompute(rank), 0);
  pd_scope_end();
}

static void test_recompute_two_processes(void **state) {
  (void)state;
  dist_run_ranks_or_fail(2, rank_recompute, 120);
}

/* A NULL layer; a negative or missing segment list; a segment the
 * Program does not have (the first train call fails naming it). */
static void test_recompute_bad_input(void **state) {
  (void)state;
  assert_int_equal(pd_dist_recompute(NULL), PD_ERR_INVALID);
  assert_non_null(strstr(pd_last_error(), "recompute"));
  pd_dist_strategy s = pd_dist_strategy_default();
  s.recompute.enable = true;
  s.recompute.n_no_recompute_segments = 1;
  assert_int_equal(pd_dist_strategy_check(&s), PD_ERR_INVALID);
  s.recompute.no_recompute_segments = (const int[]){-1};
  assert_int_equal(pd_dist_strategy_check(&s), PD_ERR_INVALID);
  assert_non_null(strstr(pd_last_error(), "no_recompute_segments[0]: -1"));
  s.recompute.no_recompute_segments = (const int[]){BLOCKS};
  assert_int_equal(pd_dist_strategy_check(&s), PD_OK);

  pd_scope_begin();
  pd_layer *net = mlp_stack(NULL, true, false), *mse = pd_nn_mse_loss(NULL);
  pd_named_tensors ps;
  assert_int_equal(pd_layer_parameters(net, &ps), PD_OK);
  pd_optimizer *opt = pd_optimizer_sgd(0.05, ps.tensors, ps.n, NULL);
  pd_named_tensors_free(&ps);
  pd_tensor *x, *y, *loss = NULL;
  batch(0, &x, &y);
  pd_io_dataset *ds = pd_io_tensor_dataset((pd_tensor *[]){x, y}, 2);
  pd_io_loader *loader = pd_io_data_loader(ds, NULL);
  pd_dist_model *m = NULL;
  pd_dist_data_loader *dl = NULL;
  assert_int_equal(pd_dist_to_static(net, loader, NULL, mse, opt, &s, &m, &dl), PD_OK);
  assert_int_equal(pd_dist_model_call(m, (pd_tensor *[]){x, y}, 2, &loss, 1), PD_ERR_INVALID);
  assert_non_null(strstr(pd_last_error(), "no_recompute_segments: segment 4, but the train Program has 4"));
  pd_dist_model_release(m);
  pd_dist_data_loader_release(dl);
  pd_io_loader_release(loader);
  pd_io_dataset_release(ds);
  pd_optimizer_release(opt);
  pd_layer_release(mse);
  pd_layer_release(net);
  pd_scope_end();
  pd_clear_error();
}

/* ---- fused_passes -------------------------------------------------------------- */
typedef struct res_block {
  pd_layer base;
  pd_layer *linear, *dropout;
} res_block;

/* dropout(relu(linear(x))) + x */
static int res_forward(pd_layer *self, pd_tensor *const *in, int n_in, pd_tensor **out, int max_out) {
  (void)n_in, (void)max_out;
  res_block *r = (res_block *)self;
  pd_tensor *h = pd_layer_call1(r->dropout, pd_relu(pd_layer_call1(r->linear, in[0])));
  out[0] = h ? pd_add(h, in[0]) : NULL;
  return out[0] ? 1 : pd_last_status();
}

static const pd_layer_type res_type = {"ResBlock", res_forward, NULL, NULL};

static pd_layer *res_net(void) {
  pd_seed(2024);
  pd_layer *ls[3];
  for (int i = 0; i < 2; i++) {
    res_block *r = pd_layer_new(sizeof *r, &res_type);
    r->linear = pd_layer_add_sublayer(&r->base, "linear", pd_nn_linear(D, D, NULL));
    r->dropout = pd_layer_add_sublayer(&r->base, "dropout", pd_nn_dropout(0.25, NULL));
    ls[i] = &r->base;
  }
  ls[2] = pd_nn_linear(D, C, NULL);
  return pd_nn_sequential(ls, 3);
}

static void test_fused_passes(void **state) {
  (void)state;
  pd_scope_begin();
  int rank = 0;
  pd_dist_strategy off = pd_dist_strategy_default(), dadd = off, both = off, listed_off = off;
  dadd.fused_passes = (pd_dist_strategy_fused_passes){.enable = true, .dropout_add = true};
  both.fused_passes =
      (pd_dist_strategy_fused_passes){.enable = true, .dropout_add = true, .gemm_epilogue = true};
  listed_off.fused_passes = (pd_dist_strategy_fused_passes){.enable = false, .dropout_add = true};
  run_result r_off = {0}, r_dadd = {0}, r_both = {0}, r_listed_off = {0};
  pd_layer *n[4] = {res_net(), res_net(), res_net(), res_net()};
  assert_int_equal(train(rank, n[0], &off, &r_off), 0);
  assert_int_equal(train(rank, n[1], &dadd, &r_dadd), 0);
  assert_int_equal(train(rank, n[2], &both, &r_both), 0);
  assert_int_equal(train(rank, n[3], &listed_off, &r_listed_off), 0);
  /* the plans: two dropout + add pairs fused; the GEMM epilogue only when listed */
  assert_int_equal(count(r_off.lowered, "fused_dropout_add"), 0);
  assert_int_equal(count(r_off.lowered, "dropout "), 2);
  assert_int_equal(count(r_dadd.lowered, "fused_dropout_add"), 2);
  assert_int_equal(count(r_dadd.lowered, " dropout "), 0);
  assert_int_equal(count(r_dadd.lowered, "fused_gemm"), 0);
  assert_int_equal(count(r_both.lowered, "fused_dropout_add"), 2);
  assert_true(count(r_both.lowered, "fused_gemm_epilogue") >= 2);
  assert_int_equal(count(r_listed_off.lowered, "fused_dropout_add"), 0); /* enable off: none */
  /* the same masks: dropout_add the same bits, the GEMM's SGD update within 1e-6 */
  assert_int_equal(same_training(rank, "dropout_add", &r_dadd, &r_off, 0), 0);
  assert_int_equal(same_training(rank, "dropout_add + gemm_epilogue", &r_both, &r_off, 1e-6), 0);
  for (int i = 0; i < 4; i++) pd_layer_release(n[i]);
  result_free(&r_off);
  result_free(&r_dadd);
  result_free(&r_both);
  result_free(&r_listed_off);
  pd_scope_end();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_recompute_bad_input),
      cmocka_unit_test(test_recompute_one_process),
      cmocka_unit_test(test_recompute_two_processes),
      cmocka_unit_test(test_recompute_keeps_random_ops),
      cmocka_unit_test(test_fused_passes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
