/* DistModel's state through the distributed checkpoint format: seed 000's
 * DemoNet trained with AdamW on 2 processes ("dp" mesh, each batch split
 * over it) for 2 steps, saved with dist.save_state_dict(state_dict()), then
 * loaded into a fresh DistModel (a fresh layer and optimizer with other
 * values) and trained 2 more steps: the losses and parameters equal 4
 * uninterrupted steps to 1e-6, whether the new model's Programs are built
 * already (set_state_dict writes the static scope) or not yet (they start
 * from what was loaded), with the same layout, with sharding stage 2 (the
 * optimizer states loaded as this rank's slices), with the weights sharded
 * (mp), from entries of other placements (resharded on the way in) and in
 * one process. set_state_dict refuses unknown names, wrong
 * global shapes and dtypes by name, changing nothing; a DistModel holds its
 * layer, loss and optimizer, so the caller may release them first.
 *
 * Each phase runs in freshly forked processes, so the Linears of its model
 * get the names the checkpoint's had (linear_0, linear_1: the optimizer
 * states' keys). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist_ranks.h"
#include "dist_seed.h"
#include "ops/op_registry.h"
#include "paddlec.h"
#include "paddlec/dist_checkpoint.h"
#include "test_util.h"

enum { STEPS = SN, SAVED = 2 };

typedef enum layout { ONE_PROCESS, DP, DP_STAGE2, MP } layout;

/* What 4 uninterrupted steps give (phase 1 writes it, one file per rank). */
typedef struct reference {
  double loss[STEPS];
  double param[4][SEED_MAX_PARAM];
  int n[4];
} reference;

static char g_dir[64];
static pd_dist_process_mesh *g_mesh;

/* A model of the layout: the caller's references to the layer, the loss
 * and the optimizer are released at once (the model holds its own); net
 * stays readable through the model's. other: other initial weights. */
typedef struct model {
  pd_layer *net; /* borrowed from m */
  pd_dist_model *m;
  pd_dist_data_loader *dl;
  pd_io_dataset *ds;
  pd_io_loader *loader;
} model;

static int open_model(int rank, layout lay, bool other, model *md) {
  const pd_dist_placement rep[1] = {pd_dist_replicate()}, s1[1] = {pd_dist_shard(1)},
                          s0[1] = {pd_dist_shard(0)};
  pd_dist_process_mesh *mesh = lay == ONE_PROCESS ? NULL : g_mesh;
  pd_layer *net = demo_net(mesh, lay == MP ? s1 : rep, lay == MP ? s0 : rep), *mse = pd_nn_mse_loss(NULL);
  pd_named_tensors ps;
  DIST_CHECK(net && mse && pd_layer_parameters(net, &ps) == PD_OK, 1);
  for (int i = 0; other && i < ps.n; i++) {
    pd_tensor *local = pd_dist_is_dist(ps.tensors[i]) ? pd_dist_local_value(ps.tensors[i]) : ps.tensors[i];
    DIST_CHECK(pd_write_fill(local, 0.01 * (i + 1)) == PD_OK, 2);
  }
  pd_optimizer *opt = pd_optimizer_adam_w(0.05, ps.tensors, ps.n, NULL);
  pd_named_tensors_free(&ps);
  pd_dist_strategy s = pd_dist_strategy_default();
  s.sharding = (pd_dist_strategy_sharding){lay == DP_STAGE2, 2, 2};
  md->ds = seed_dataset();
  md->loader = md->ds ? pd_io_data_loader(md->ds, &(pd_io_data_loader_opts){.batch_size = SB}) : NULL;
  DIST_CHECK(
      opt && md->loader && pd_dist_to_static(net, md->loader, NULL, mse, opt, &s, &md->m, &md->dl) == PD_OK,
      3);
  pd_optimizer_release(opt);
  pd_layer_release(mse);
  pd_layer_release(net);
  md->net = net;
  return 0;
}

static void close_model(model *md) {
  pd_dist_model_release(md->m);
  pd_dist_data_loader_release(md->dl);
  pd_io_loader_release(md->loader);
  pd_io_dataset_release(md->ds);
}

/* One train step on global batch b (split over "dp" in the dp layouts). */
static int step(int rank, layout lay, model *md, int b, double *loss) {
  pd_scope_begin();
  pd_tensor *x, *y, *out = NULL;
  seed_batch(b, &x, &y);
  if (lay == DP || lay == DP_STAGE2) {
    const pd_dist_placement s0[1] = {pd_dist_shard(0)};
    x = pd_dist_shard_tensor(x, g_mesh, s0, 1);
    y = pd_dist_shard_tensor(y, g_mesh, s0, 1);
  }
  int n = pd_dist_model_call(md->m, (pd_tensor *[]){x, y}, 2, &out, 1);
  if (n == 1) *loss = pd_tensor_item(out);
  pd_scope_end();
  DIST_CHECK(n == 1, 4);
  return 0;
}

static void ref_path(int rank, char *buf, size_t cap) { snprintf(buf, cap, "%s/reference_%d", g_dir, rank); }

/* Phase 1: 2 steps, save, 2 more: the reference (saving changes nothing). */
static int phase_save(int rank) {
  model md = {0};
  reference r;
  int rc = open_model(rank, DP, false, &md);
  for (int b = 0; b < STEPS && rc == 0; b++) {
    if (b == SAVED) {
      pd_named_tensors sd;
      DIST_CHECK(pd_dist_model_state_dict(md.m, "all", &sd) == PD_OK, 10);
      pd_status st = pd_dist_save_state_dict(&sd, g_dir);
      pd_named_tensors_free(&sd);
      DIST_CHECK(st == PD_OK, 11);
    }
    rc = step(rank, DP, &md, b, &r.loss[b]);
  }
  if (rc == 0) rc = seed_param_values(rank, md.net, r.param, r.n);
  close_model(&md);
  char path[128];
  ref_path(rank, path, sizeof path);
  FILE *f = rc == 0 ? fopen(path, "wb") : NULL;
  DIST_CHECK(f && fwrite(&r, sizeof r, 1, f) == 1 && fclose(f) == 0, 12);
  return rc;
}

/* A state dict of new tensors shaped as m's global values (a copy of the
 * names), for a load that does not write the model's own tensors: dense,
 * or (sharded) DTensors split along dim 0 over "dp" where it splits evenly,
 * placements the model's own tensors do not all have. */
static int new_tensors(int rank, pd_dist_model *m, bool sharded, pd_named_tensors *out) {
  pd_named_tensors own;
  DIST_CHECK(pd_dist_model_state_dict(m, "all", &own) == PD_OK, 20);
  *out = (pd_named_tensors){
      .n = own.n, .names = own.names, .tensors = calloc((size_t)own.n, sizeof(pd_tensor *))};
  for (int i = 0; i < own.n; i++) {
    int64_t shape[PD_MAX_DIMS];
    int nd = pd_dist_global_shape(own.tensors[i], shape);
    if (nd < 0) { /* dense: the global value itself */
      nd = pd_tensor_ndim(own.tensors[i]);
      memcpy(shape, pd_tensor_shape(own.tensors[i]), sizeof(int64_t) * (size_t)nd);
    }
    out->tensors[i] = pd_full(nd, shape, 0.0, pd_tensor_dtype(own.tensors[i])); /* the scope holds it */
    const pd_dist_placement s0[1] = {pd_dist_shard(0)};
    if (sharded && nd > 0 && shape[0] % 2 == 0)
      out->tensors[i] = pd_dist_shard_tensor(out->tensors[i], g_mesh, s0, 1);
    DIST_CHECK(out->tensors[i], 21);
  }
  free(own.tensors);
  return 0;
}

typedef enum how_loaded {
  IN_PLACE_FRESH, /* state_dict's own tensors filled, before any call: the Programs start from them */
  IN_PLACE_BUILT, /* the same after a step that built the Programs (and moved the states) */
  COPY_BUILT,     /* new dense tensors filled, then set_state_dict into built Programs */
  SHARDED_BUILT   /* the same with DTensors of other placements (resharded on the way in) */
} how_loaded;

/* Loads the checkpoint into a fresh model (layout lay, other weights), then
 * trains steps SAVED.. and compares with the reference. */
static int resume(int rank, layout lay, how_loaded how) {
  model md = {0};
  int rc = open_model(rank, lay, true, &md);
  double loss[STEPS];
  if (rc == 0 && how != IN_PLACE_FRESH) rc = step(rank, lay, &md, STEPS - 1, &loss[0]);
  pd_named_tensors sd = {0};
  if (rc == 0 && (how == COPY_BUILT || how == SHARDED_BUILT)) {
    rc = new_tensors(rank, md.m, how == SHARDED_BUILT, &sd);
  } else if (rc == 0) {
    DIST_CHECK(pd_dist_model_state_dict(md.m, "all", &sd) == PD_OK, 30);
  }
  DIST_CHECK(rc == 0 && sd.n == 4 + 4 * 4, 31); /* 4 parameters, 2 moments and 2 beta powers each */
  DIST_CHECK(pd_dist_load_state_dict(&sd, g_dir) == PD_OK, 32);
  DIST_CHECK(pd_dist_model_set_state_dict(md.m, &sd) == PD_OK, 33);
  pd_named_tensors_free(&sd);
  for (int b = SAVED; b < STEPS && rc == 0; b++) rc = step(rank, lay, &md, b, &loss[b]);
  reference got, want;
  if (rc == 0) rc = seed_param_values(rank, md.net, got.param, got.n);
  close_model(&md);
  char path[128];
  ref_path(rank, path, sizeof path);
  FILE *f = fopen(path, "rb");
  DIST_CHECK(f && fread(&want, sizeof want, 1, f) == 1, 34);
  fclose(f);
  for (int b = SAVED; b < STEPS && rc == 0; b++)
    if (fabs(loss[b] - want.loss[b]) > 1e-6) {
      fprintf(stderr, "rank %d: layout %d load %d: step %d loss %.9g, uninterrupted %.9g\n", rank, lay, how,
              b, loss[b], want.loss[b]);
      rc = 35;
    }
  if (rc == 0) rc = seed_values_equal(rank, "resumed vs uninterrupted", got.param, want.param, want.n);
  return rc;
}

static int phase_dp_copy(int rank) { return resume(rank, DP, COPY_BUILT); }
static int phase_dp_fresh(int rank) { return resume(rank, DP, IN_PLACE_FRESH); }
static int phase_stage2_fresh(int rank) { return resume(rank, DP_STAGE2, IN_PLACE_FRESH); }
static int phase_stage2_copy(int rank) { return resume(rank, DP_STAGE2, COPY_BUILT); }
static int phase_mp_built(int rank) { return resume(rank, MP, IN_PLACE_BUILT); }
static int phase_mp_sharded(int rank) { return resume(rank, MP, SHARDED_BUILT); }
static int phase_stage2_sharded(int rank) { return resume(rank, DP_STAGE2, SHARDED_BUILT); }
/* rank 0 alone: the model of one process reads the 2-process checkpoint */
static int phase_one_process(int rank) { return rank == 0 ? resume(rank, ONE_PROCESS, COPY_BUILT) : 0; }

static void test_checkpoint_round_trip(void **state) {
  (void)state;
  snprintf(g_dir, sizeof g_dir, "/tmp/pd_distmodel_XXXXXX");
  assert_non_null(mkdtemp(g_dir));
  g_mesh = pd_dist_process_mesh_new(1, (const int64_t[]){2}, (const int[]){0, 1}, (const char *[]){"dp"});
  dist_run_ranks_or_fail(2, phase_save, 120);
  dist_run_ranks_or_fail(2, phase_dp_copy, 120);
  dist_run_ranks_or_fail(2, phase_dp_fresh, 120);
  dist_run_ranks_or_fail(2, phase_stage2_fresh, 120);
  dist_run_ranks_or_fail(2, phase_stage2_copy, 120);
  dist_run_ranks_or_fail(2, phase_mp_built, 120);
  dist_run_ranks_or_fail(2, phase_mp_sharded, 120);
  dist_run_ranks_or_fail(2, phase_stage2_sharded, 120);
  dist_run_ranks_or_fail(2, phase_one_process, 120);
  pd_dist_process_mesh_release(g_mesh);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
  assert_int_equal(system(cmd), 0);
}

/* The first value of net's first weight. */
static double first_weight(pd_layer *net) {
  pd_named_tensors ps;
  assert_int_equal(pd_layer_parameters(net, &ps), PD_OK);
  double v[IMG * IMG];
  assert_int_equal(pd_tensor_copy_to(ps.tensors[0], v, IMG * IMG, PD_FLOAT64), IMG * IMG);
  pd_named_tensors_free(&ps);
  return v[0];
}

/* Unknown names, wrong global shapes and dtypes are refused by name, and a
 * refused dict changes nothing, even its valid entries. In one process,
 * after the caller released the layer, the loss and the optimizer. */
static void test_set_state_dict_errors(void **state) {
  (void)state;
  pd_scope_begin();
  model md = {0};
  int rank = 0;
  assert_int_equal(open_model(rank, ONE_PROCESS, false, &md), 0);
  double loss = 0;
  assert_int_equal(step(rank, ONE_PROCESS, &md, 0, &loss), 0); /* the Programs are built */
  double before = first_weight(md.net);
  pd_tensor *good = pd_full(2, (const int64_t[]){IMG, IMG}, 0.5, PD_FLOAT32);
  struct {
    const char *name;
    pd_tensor *t;
    pd_status st;
    const char *says;
  } bad[] = {
      {"no_such_entry", pd_full(1, (const int64_t[]){3}, 0, PD_FLOAT32), PD_ERR_INVALID,
       "'no_such_entry' is neither"},
      {"0.weight", pd_full(2, (const int64_t[]){3, 3}, 0, PD_FLOAT32), PD_ERR_SHAPE,
       "'0.weight' has global shape"},
      {"0.weight", pd_full(2, (const int64_t[]){IMG, IMG}, 0, PD_FLOAT64), PD_ERR_DTYPE, "float64"},
      {"linear_0.w_0_moment1_0", pd_full(1, (const int64_t[]){IMG}, 0, PD_FLOAT32), PD_ERR_SHAPE,
       "'linear_0.w_0_moment1_0'"},
  };
  for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
    pd_named_tensors sd = {.n = 2,
                           .names = (char *[]){"0.weight", (char *)bad[k].name},
                           .tensors = (pd_tensor *[]){good, bad[k].t}};
    assert_int_equal(pd_dist_model_set_state_dict(md.m, &sd), bad[k].st);
    assert_non_null(strstr(pd_last_error(), "DistModel.set_state_dict"));
    assert_non_null(strstr(pd_last_error(), bad[k].says));
    assert_true(first_weight(md.net) == before);
  }
  /* a good one reaches the layer and the Program it runs: the loss moves */
  pd_named_tensors one = {.n = 1, .names = (char *[]){"0.weight"}, .tensors = &good};
  assert_int_equal(pd_dist_model_set_state_dict(md.m, &one), PD_OK);
  assert_true(first_weight(md.net) == 0.5);
  double again = 0;
  assert_int_equal(step(rank, ONE_PROCESS, &md, 0, &again), 0);
  assert_true(fabs(again - loss) > 1e-6);
  close_model(&md);
  pd_scope_end();
}

/* pd_optimizer_retain: the optimizer lives until its last reference goes. */
static void test_optimizer_retain(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *w = pd_full(1, (const int64_t[]){2}, 1.0, PD_FLOAT32);
  pd_tensor_set_stop_gradient(w, false);
  pd_optimizer *opt = pd_optimizer_sgd(0.5, &w, 1, NULL);
  assert_ptr_equal(pd_optimizer_retain(opt), opt);
  assert_null(pd_optimizer_retain(NULL));
  pd_optimizer_release(opt);
  assert_string_equal(pd_optimizer_name(opt), "SGD"); /* still alive */
  pd_optimizer_release(opt);
  pd_scope_end();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      /* first: its forks must see no Linear made before (the checkpoint's names) */
      cmocka_unit_test(test_checkpoint_round_trip),
      cmocka_unit_test(test_set_state_dict_errors),
      cmocka_unit_test(test_optimizer_retain),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
