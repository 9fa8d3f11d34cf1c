/* dist.to_static: in one process, the default mode from the loss and the
 * optimizer given, the errors of calling in a mode that lacks them or with
 * the wrong number of inputs (naming the feed names), a train step that
 * updates the parameters and returns the loss, eval returning the same loss
 * as a hand-computed MSE, predict's "out0", and strategy passes refused by
 * name; on 2 processes, seed 000 (DemoNet with linear_0.weight Shard(1) and
 * linear_1.weight Shard(0)) equal to the same model trained eagerly in one
 * process, and its partitioned Program op by op; on 4 processes, a 2-d mesh
 * (dp x mp) equal to one process; Strategy.gradient_merge (k=4, avg) on 2
 * processes equal to one step of the 4x batch in one process. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist_ranks.h"
#include "dist_seed.h"
#include "paddlec.h"
#include "test_util.h"

enum { BATCH = 4, IN = 3, OUT = 2 };

static pd_layer *net_new(void) {
  pd_seed(5);
  return pd_nn_linear(IN, OUT, NULL);
}

static pd_io_dataset *dataset_new(void) {
  double x[BATCH * IN], y[BATCH * OUT];
  for (int i = 0; i < BATCH * IN; i++) x[i] = sin(0.3 * (i + 1));
  for (int i = 0; i < BATCH * OUT; i++) y[i] = cos(0.7 * (i + 1));
  pd_tensor *t[2] = {pd_tensor_from_f64(x, PD_FLOAT32, 2, (const int64_t[]){BATCH, IN}),
                     pd_tensor_from_f64(y, PD_FLOAT32, 2, (const int64_t[]){BATCH, OUT})};
  pd_io_dataset *ds = pd_io_tensor_dataset(t, 2);
  pd_tensor_release(t[0]);
  pd_tensor_release(t[1]);
  return ds;
}

/* A Linear, MSELoss, a DataLoader of one batch and SGD(0.1). */
typedef struct fixture {
  pd_layer *net, *mse;
  pd_io_dataset *ds;
  pd_io_loader *loader;
  pd_optimizer *opt;
} fixture;

static void fixture_init(fixture *f) {
  f->net = net_new();
  f->mse = pd_nn_mse_loss(NULL);
  f->ds = dataset_new();
  f->loader = pd_io_data_loader(f->ds, &(pd_io_data_loader_opts){.batch_size = BATCH});
  pd_named_tensors ps;
  assert_int_equal(pd_layer_parameters(f->net, &ps), PD_OK);
  f->opt = pd_optimizer_sgd(0.1, ps.tensors, ps.n, NULL);
  pd_named_tensors_free(&ps);
}

static void fixture_free(fixture *f) {
  pd_optimizer_release(f->opt);
  pd_io_loader_release(f->loader);
  pd_io_dataset_release(f->ds);
  pd_layer_release(f->mse);
  pd_layer_release(f->net);
}

static void test_default_modes_and_errors(void **state) {
  (void)state;
  fixture f;
  fixture_init(&f);
  pd_layer *net = f.net, *mse = f.mse;
  pd_io_loader *loader = f.loader;
  pd_optimizer *opt = f.opt;
  pd_dist_model *m = NULL;
  pd_dist_data_loader *dl = NULL;

  assert_int_equal(pd_dist_to_static(net, loader, NULL, mse, opt, NULL, &m, &dl), PD_OK);
  assert_int_equal(pd_dist_model_get_mode(m), PD_DIST_MODE_TRAIN);
  pd_dist_model_release(m);
  pd_dist_data_loader_release(dl);
  assert_int_equal(pd_dist_to_static(net, loader, NULL, mse, NULL, NULL, &m, &dl), PD_OK);
  assert_int_equal(pd_dist_model_get_mode(m), PD_DIST_MODE_EVAL);
  assert_int_equal(pd_dist_model_train(m), PD_ERR_STATE);
  assert_non_null(strstr(pd_last_error(), "optimizer"));
  pd_dist_model_release(m);
  pd_dist_data_loader_release(dl);
  assert_int_equal(pd_dist_to_static(net, loader, NULL, NULL, NULL, NULL, &m, &dl), PD_OK);
  assert_int_equal(pd_dist_model_get_mode(m), PD_DIST_MODE_PREDICT);
  assert_int_equal(pd_dist_model_eval(m), PD_ERR_STATE);
  assert_non_null(strstr(pd_last_error(), "loss"));
  pd_dist_model_release(m);
  pd_dist_data_loader_release(dl);

  /* both loaders, neither, and a pass that does not exist yet */
  assert_int_equal(pd_dist_to_static(net, NULL, NULL, mse, opt, NULL, &m, &dl), PD_ERR_INVALID);
  pd_dist_strategy s = pd_dist_strategy_default();
  s.amp.enable = true;
  assert_int_equal(pd_dist_to_static(net, loader, NULL, mse, opt, &s, &m, &dl), PD_ERR_UNIMPLEMENTED);
  assert_non_null(strstr(pd_last_error(), "amp"));
  s.amp.enable = false;
  s.pipeline.enable = true;
  assert_int_equal(pd_dist_to_static(net, loader, NULL, mse, opt, &s, &m, &dl), PD_ERR_UNIMPLEMENTED);
  assert_non_null(strstr(pd_last_error(), "pipeline"));

  /* the wrong number of inputs names the feeds; no Program before a call */
  assert_int_equal(pd_dist_to_static(net, loader, NULL, mse, opt, NULL, &m, &dl), PD_OK);
  assert_null(pd_dist_model_main_program(m, PD_DIST_MODE_NONE, false));
  assert_non_null(strstr(pd_last_error(), "first call"));
  pd_scope_begin();
  pd_tensor *batch[2], *loss = NULL;
  assert_int_equal(pd_dist_data_loader_next(dl, batch, 2), 2);
  assert_int_equal(pd_dist_model_call(m, batch, 1, &loss, 1), PD_ERR_INVALID);
  assert_non_null(strstr(pd_last_error(), "input0, label0"));
  pd_scope_end();

  pd_dist_model_release(m);
  pd_dist_data_loader_release(dl);
  fixture_free(&f);
}

/* MSE of the layer's output by hand */
static double mse_by_hand(pd_layer *net, pd_tensor *x, pd_tensor *y) {
  pd_tensor *out = pd_layer_call1(net, x);
  float o[BATCH * OUT], t[BATCH * OUT];
  pd_tensor_copy_to(out, o, BATCH * OUT, PD_FLOAT32);
  pd_tensor_copy_to(y, t, BATCH * OUT, PD_FLOAT32);
  double s = 0;
  for (int i = 0; i < BATCH * OUT; i++) s += ((double)o[i] - t[i]) * ((double)o[i] - t[i]);
  return s / (BATCH * OUT);
}

static void test_train_eval_predict(void **state) {
  (void)state;
  fixture f;
  fixture_init(&f);
  pd_layer *net = f.net, *mse = f.mse;
  pd_io_loader *loader = f.loader;
  pd_optimizer *opt = f.opt;
  pd_dist_model *m = NULL;
  pd_dist_data_loader *dl = NULL;
  assert_int_equal(pd_dist_to_static(net, loader, NULL, mse, opt, NULL, &m, &dl), PD_OK);
  assert_int_equal(pd_dist_data_loader_len(dl), 1);

  pd_scope_begin();
  pd_tensor *batch[2], *loss = NULL, *outs[2];
  assert_int_equal(pd_dist_data_loader_next(dl, batch, 2), 2);
  double before = mse_by_hand(net, batch[0], batch[1]);
  assert_int_equal(pd_dist_model_call(m, batch, 2, &loss, 1), 1);
  assert_true(fabs((pd_tensor_item(loss)) - (before)) < 1e-6);
  double after = mse_by_hand(net, batch[0], batch[1]);
  assert_true(after < before); /* the step updated the parameters */
  assert_int_equal(pd_dist_model_eval(m), PD_OK);
  assert_int_equal(pd_dist_model_call(m, batch, 2, &loss, 1), 1);
  assert_true(fabs((pd_tensor_item(loss)) - (after)) < 1e-6);
  assert_true(fabs((mse_by_hand(net, batch[0], batch[1])) - (after)) < 1e-7); /* eval does not update */
  assert_int_equal(pd_dist_model_predict(m), PD_OK);
  assert_int_equal(pd_dist_model_call(m, batch, 2, outs, 2), PD_ERR_INVALID);
  assert_non_null(strstr(pd_last_error(), "input0"));
  assert_int_equal(pd_dist_model_call(m, batch, 1, outs, 2), 1);
  assert_int_equal(pd_tensor_shape(outs[0])[0], BATCH);
  assert_int_equal(pd_tensor_shape(outs[0])[1], OUT);
  char name[8];
  assert_string_equal(pd_dist_model_output_name(0, name, sizeof name), "out0");
  pd_scope_end();

  pd_dist_model_release(m);
  pd_dist_data_loader_release(dl);
  fixture_free(&f);
}

/* state_dict("param") has the Linear's structured names; loading it into
 * a model with other weights gives the same eval loss. */
static void test_state_dict(void **state) {
  (void)state;
  fixture a, b;
  fixture_init(&a);
  fixture_init(&b);
  pd_layer_release(b.net);
  pd_seed(123);
  b.net = pd_nn_linear(IN, OUT, NULL);
  pd_dist_model *ma = NULL, *mb = NULL;
  pd_dist_data_loader *la = NULL, *lb = NULL;
  assert_int_equal(pd_dist_to_static(a.net, a.loader, NULL, a.mse, NULL, NULL, &ma, &la), PD_OK);
  assert_int_equal(pd_dist_to_static(b.net, b.loader, NULL, b.mse, NULL, NULL, &mb, &lb), PD_OK);
  pd_named_tensors sd;
  assert_int_equal(pd_dist_model_state_dict(ma, "bogus", &sd), PD_ERR_INVALID);
  assert_int_equal(pd_dist_model_state_dict(ma, "param", &sd), PD_OK);
  assert_int_equal(sd.n, 2);
  assert_string_equal(sd.names[0], "weight");
  assert_string_equal(sd.names[1], "bias");
  pd_scope_begin();
  pd_tensor *batch[2], *la_loss = NULL, *lb_loss = NULL;
  assert_int_equal(pd_dist_data_loader_next(la, batch, 2), 2);
  assert_int_equal(pd_dist_model_call(ma, batch, 2, &la_loss, 1), 1);
  assert_int_equal(pd_dist_model_call(mb, batch, 2, &lb_loss, 1), 1);
  assert_true(fabs(pd_tensor_item(la_loss) - pd_tensor_item(lb_loss)) > 1e-3);
  assert_int_equal(pd_dist_model_set_state_dict(mb, &sd), PD_OK);
  assert_int_equal(pd_dist_model_call(mb, batch, 2, &lb_loss, 1), 1);
  assert_true(fabs(pd_tensor_item(la_loss) - pd_tensor_item(lb_loss)) < 1e-7);
  pd_scope_end();
  pd_named_tensors_free(&sd);
  pd_dist_model_release(ma);
  pd_dist_model_release(mb);
  pd_dist_data_loader_release(la);
  pd_dist_data_loader_release(lb);
  fixture_free(&a);
  fixture_free(&b);
}

/* state_dict("opt") after train steps gives the accumulators the static
 * steps updated (the eager optimizer's own are never stepped): AdamW's
 * moments equal those of the same steps run eagerly. */
static void test_state_dict_opt_after_steps(void **state) {
  (void)state;
  fixture a, b;
  fixture_init(&a);
  fixture_init(&b);
  pd_named_tensors ps;
  pd_optimizer *opts[2];
  fixture *fs[2] = {&a, &b};
  for (int i = 0; i < 2; i++) {
    assert_int_equal(pd_layer_parameters(fs[i]->net, &ps), PD_OK);
    opts[i] = pd_optimizer_adam_w(0.05, ps.tensors, ps.n, NULL);
    pd_named_tensors_free(&ps);
  }
  pd_dist_model *m = NULL;
  pd_dist_data_loader *dl = NULL;
  assert_int_equal(pd_dist_to_static(a.net, a.loader, NULL, a.mse, opts[0], NULL, &m, &dl), PD_OK);
  pd_scope_begin();
  pd_tensor *batch[2], *loss = NULL;
  assert_int_equal(pd_dist_data_loader_next(dl, batch, 2), 2);
  for (int s = 0; s < 2; s++) {
    assert_int_equal(pd_dist_model_call(m, batch, 2, &loss, 1), 1);
    pd_tensor *out = pd_layer_call1(b.net, batch[0]), *el = NULL;
    assert_int_equal(pd_layer_call(b.mse, (pd_tensor *[]){out, batch[1]}, 2, &el, 1), 1);
    assert_int_equal(pd_backward(el, NULL, false), PD_OK);
    assert_int_equal(pd_optimizer_step(opts[1]), PD_OK);
    pd_optimizer_clear_grad(opts[1], false);
  }
  pd_named_tensors sd, eager;
  assert_int_equal(pd_dist_model_state_dict(m, "opt", &sd), PD_OK);
  assert_int_equal(pd_optimizer_state_dict(opts[1], &eager), PD_OK);
  int moments = 0;
  for (int i = 0; i < eager.n; i++) {
    int j = 0;
    /* the two Linears differ in name only: linear_<n>.w_0_moment1_0 */
    while (j < sd.n && strcmp(strchr(sd.names[j], '.'), strchr(eager.names[i], '.')) != 0) j++;
    assert_true(j < sd.n); /* every eager accumulator has its static one */
    int64_t n = pd_tensor_numel(eager.tensors[i]);
    assert_int_equal(pd_tensor_numel(sd.tensors[j]), n);
    double x[IN * OUT], y[IN * OUT];
    pd_tensor_copy_to(sd.tensors[j], x, n, PD_FLOAT64);
    pd_tensor_copy_to(eager.tensors[i], y, n, PD_FLOAT64);
    for (int k = 0; k < n; k++) assert_true(fabs(x[k] - y[k]) < 1e-6);
    if (strstr(eager.names[i], "moment1") && fabs(y[0]) > 1e-6) moments++;
  }
  assert_int_equal(moments, 2); /* weight and bias moved: not the zeros the eager state starts at */
  pd_named_tensors_free(&sd);
  pd_named_tensors_free(&eager);
  pd_scope_end();
  pd_dist_model_release(m);
  pd_dist_data_loader_release(dl);
  for (int i = 0; i < 2; i++) pd_optimizer_release(opts[i]);
  fixture_free(&a);
  fixture_free(&b);
}

/* ---- seed 000 on several processes against one process, eagerly ---------- */
/* What a run gives: SN train losses, SN eval losses, SN predict outputs. */
typedef struct seed_result {
  double train[SN], eval[SN];
  float pred[SN][SB * CLS];
} seed_result;

static pd_optimizer *seed_optimizer(bool adam, pd_tensor *const *ps, int n) {
  return adam ? pd_optimizer_adam_w(0.05, ps, n, NULL) : pd_optimizer_sgd(0.1, ps, n, NULL);
}

/* The seed's loops run eagerly on dense tensors in this process, on the
 * global batches xs, ys (NULL: seed_batch's). */
static int seed_eager(int rank, bool adam, pd_tensor *const *xs, pd_tensor *const *ys, seed_result *r) {
  pd_layer *net = demo_net(NULL, NULL, NULL), *mse = pd_nn_mse_loss(NULL);
  pd_named_tensors ps;
  DIST_CHECK(net && mse && pd_layer_parameters(net, &ps) == PD_OK, 1);
  pd_optimizer *opt = seed_optimizer(adam, ps.tensors, ps.n);
  pd_named_tensors_free(&ps);
  for (int phase = 0; phase < 3; phase++)
    for (int b = 0; b < SN; b++) {
      pd_scope_begin();
      pd_tensor *x, *y;
      if (xs)
        x = xs[b], y = ys[b];
      else
        seed_batch(b, &x, &y);
      pd_tensor *out = pd_layer_call1(net, x);
      DIST_CHECK(out, 2);
      if (phase == 2) {
        pd_tensor_copy_to(out, r->pred[b], SB * CLS, PD_FLOAT32);
      } else {
        pd_tensor *loss = NULL;
        pd_layer_call(mse, (pd_tensor *[]){out, y}, 2, &loss, 1);
        DIST_CHECK(loss, 3);
        (phase == 0 ? r->train : r->eval)[b] = pd_tensor_item(loss);
        if (phase == 0) {
          DIST_CHECK(pd_backward(loss, NULL, false) == PD_OK && pd_optimizer_step(opt) == PD_OK, 4);
          pd_optimizer_clear_grad(opt, false);
        }
      }
      pd_scope_end();
    }
  pd_optimizer_release(opt);
  pd_layer_release(mse);
  pd_layer_release(net);
  return 0;
}

/* state_dict("opt") of m (AdamW) after its train steps: the moments of
 * both weights are DTensors of the weights' global shapes, moved from the
 * zeros they start at (the static steps' values, not the eager
 * optimizer's, which never stepped). */
static int check_moments(int rank, pd_dist_model *m) {
  pd_named_tensors sd = {0};
  DIST_CHECK(pd_dist_model_state_dict(m, "opt", &sd) == PD_OK, 43);
  int moved = 0;
  for (int i = 0; i < sd.n; i++) {
    if (!strstr(sd.names[i], ".w_0_moment1_0")) continue;
    pd_tensor *g = pd_dist_unshard_dtensor(sd.tensors[i]); /* the rank's scope holds it */
    DIST_CHECK(pd_dist_is_dist(sd.tensors[i]) && g && pd_tensor_shape(g)[0] == IMG, 44);
    double v[IMG * IMG], mx = 0;
    pd_tensor_copy_to(g, v, pd_tensor_numel(g), PD_FLOAT64);
    for (int64_t k = 0; k < pd_tensor_numel(g); k++) mx = fmax(mx, fabs(v[k]));
    moved += mx > 1e-9;
  }
  pd_named_tensors_free(&sd);
  DIST_CHECK(moved == 2, 45);
  return 0;
}

/* The seed's loops through dist.to_static with net's placements: the
 * batches of a DataLoader (the global batch, replicated), or with
 * shard_dim of a ShardDataloader (each rank's part, Shard(0) on that mesh
 * dim), through the DistributedDataLoader. */
static int seed_dist(int rank, pd_layer *net, pd_dist_process_mesh *mesh, const char *shard_dim, bool adam,
                     seed_result *r, pd_dist_model **keep) {
  pd_layer *mse = pd_nn_mse_loss(NULL);
  pd_named_tensors ps;
  DIST_CHECK(net && mse && pd_layer_parameters(net, &ps) == PD_OK, 11);
  pd_optimizer *opt = seed_optimizer(adam, ps.tensors, ps.n);
  pd_named_tensors_free(&ps);
  pd_io_dataset *ds = seed_dataset();
  pd_io_loader *loader =
      shard_dim ? NULL : pd_io_data_loader(ds, &(pd_io_data_loader_opts){.batch_size = SB});
  pd_dist_shard_dataloader *sl = shard_dim ? seed_shard_loader(ds, mesh, shard_dim) : NULL;
  pd_dist_model *m = NULL;
  pd_dist_data_loader *dl = NULL;
  DIST_CHECK(ds && (loader || sl), 10);
  DIST_CHECK(pd_dist_to_static(net, loader, sl, mse, opt, NULL, &m, &dl) == PD_OK, 12);
  pd_status (*modes[3])(pd_dist_model *) = {pd_dist_model_train, pd_dist_model_eval, pd_dist_model_predict};
  for (int phase = 0; phase < 3; phase++) {
    DIST_CHECK(modes[phase](m) == PD_OK, 13);
    for (int b = 0; b < SN; b++) {
      pd_scope_begin();
      pd_tensor *in[2], *out = NULL;
      int n = pd_dist_data_loader_next(dl, in, 2);
      if (n == 0) n = pd_dist_data_loader_next(dl, in, 2); /* the previous loop's epoch ended */
      DIST_CHECK(n == 2, 16);
      DIST_CHECK(pd_dist_is_dist(in[0]) == (shard_dim != NULL), 17);
      DIST_CHECK(pd_dist_model_call(m, in, phase == 2 ? 1 : 2, &out, 1) == 1, 14);
      DIST_CHECK(!pd_dist_is_dist(out), 15);
      if (phase == 2)
        pd_tensor_copy_to(out, r->pred[b], SB * CLS, PD_FLOAT32);
      else
        (phase == 0 ? r->train : r->eval)[b] = pd_tensor_item(out);
      pd_scope_end();
    }
  }
  int rc = adam ? check_moments(rank, m) : 0;
  pd_dist_data_loader_release(dl);
  pd_io_loader_release(loader);
  pd_dist_shard_dataloader_release(sl);
  pd_io_dataset_release(ds);
  pd_optimizer_release(opt);
  pd_layer_release(mse);
  if (keep)
    *keep = m;
  else
    pd_dist_model_release(m);
  return rc;
}

static int seed_compare(int rank, const seed_result *a, const seed_result *b) {
  for (int s = 0; s < SN; s++) {
    if (fabs(a->train[s] - b->train[s]) > 1e-6 || fabs(a->eval[s] - b->eval[s]) > 1e-6) {
      fprintf(stderr, "rank %d: step %d: losses %.9g %.9g, eagerly %.9g %.9g\n", rank, s, a->train[s],
              a->eval[s], b->train[s], b->eval[s]);
      return 21;
    }
    for (int i = 0; i < SB * CLS; i++)
      if (fabs((double)a->pred[s][i] - b->pred[s][i]) > 1e-6) {
        fprintf(stderr, "rank %d: predict %d [%d] %.9g, eagerly %.9g\n", rank, s, i, a->pred[s][i],
                b->pred[s][i]);
        return 22;
      }
  }
  DIST_CHECK(a->train[SN - 1] < a->train[0], 23);
  return 0;
}

/* What each rank runs in the seed's train step: the column-parallel
 * linear_0 (its replicated bias sliced to this rank's columns before the
 * add), the row-parallel linear_1 whose Partial output is all-reduced before
 * its replicated bias is added, the loss and its gradient (replicated), the
 * backward matmuls following the weights' shards (relu's gradient as
 * greater_than and where), and linear_0's bias gradient, sharded like its
 * columns, all-gathered just before its replicated update. */
static const char *const k_seed_train_ops =
    "matmul slice add relu matmul c_allreduce add mse_loss full scale subtract scale multiply sum reshape "
    "matmul matmul full greater_than full where sum reshape matmul sgd_ c_allgather sgd_ sgd_ sgd_";

/* Whether the printed Program holds `what`. */
static bool program_has(pd_program *p, const char *what) {
  char *s = pd_program_to_string(p);
  bool has = s && strstr(s, what);
  free(s);
  return has;
}

static int rank_seed(int rank) {
  seed_result eager, dist;
  int rc = seed_eager(rank, false, NULL, NULL, &eager);
  if (rc) return rc;
  pd_dist_process_mesh *mesh =
      pd_dist_process_mesh_new(1, (const int64_t[]){2}, (const int[]){0, 1}, (const char *[]){"x"});
  pd_layer *net =
      demo_net(mesh, (pd_dist_placement[]){pd_dist_shard(1)}, (pd_dist_placement[]){pd_dist_shard(0)});
  pd_dist_model *m = NULL;
  if ((rc = seed_dist(rank, net, mesh, NULL, false, &dist, &m)) || (rc = seed_compare(rank, &dist, &eager)))
    return rc;
  char *ops = seed_op_list(pd_dist_model_main_program(m, PD_DIST_MODE_TRAIN, false));
  DIST_CHECK(ops, 30);
  if (strcmp(ops, k_seed_train_ops) != 0) {
    fprintf(stderr, "rank %d: the partitioned train Program runs\n  %s\nnot\n  %s\n", rank, ops,
            k_seed_train_ops);
    char *full = pd_program_to_string(pd_dist_model_main_program(m, PD_DIST_MODE_TRAIN, false));
    fprintf(stderr, "%s\n", full ? full : "");
    free(full);
    rc = 31;
  }
  free(ops);
  /* the slice is this rank's half; sum over the mesh's 2 ranks, gather on dim 0 */
  pd_program *dp = pd_dist_model_main_program(m, PD_DIST_MODE_TRAIN, false);
  char slice[64];
  snprintf(slice, sizeof slice, "starts = [%d], ends = [%d]", 8 * rank, 8 * rank + 8);
  DIST_CHECK(program_has(dp, slice), 32);
  DIST_CHECK(program_has(dp, "nranks = 2, reduce_type = 0"), 33);
  DIST_CHECK(program_has(dp, "nranks = 2, axis = 0"), 34);
  /* eval: forward and loss only, the one all_reduce; predict: the forward */
  char *eval = seed_op_list(pd_dist_model_main_program(m, PD_DIST_MODE_EVAL, false));
  char *pred = seed_op_list(pd_dist_model_main_program(m, PD_DIST_MODE_PREDICT, false));
  DIST_CHECK(eval && strcmp(eval, "matmul slice add relu matmul c_allreduce add mse_loss") == 0, 35);
  DIST_CHECK(pred && strcmp(pred, "matmul slice add relu matmul c_allreduce add") == 0, 36);
  free(eval);
  free(pred);
  /* the serial Program: global shapes, grad ops whole */
  pd_program *sp = pd_dist_model_main_program(m, PD_DIST_MODE_TRAIN, true);
  DIST_CHECK(program_has(sp, "matmul_grad") && program_has(sp, "shape(16, 16)"), 37);
  DIST_CHECK(!program_has(sp, "c_allreduce"), 38);
  /* the environment left and joined again: the Programs' ring ids named the
   * old groups, so a call is refused by name instead of using freed groups */
  DIST_CHECK(pd_dist_destroy_process_group(NULL) == PD_OK, 39);
  DIST_CHECK(pd_dist_init_parallel_env(&(pd_dist_init_opts){.timeout_s = 20}), 40);
  /* the rank's scope (dist_run_ranks) owns them */
  pd_tensor *in[2] = {pd_zeros(2, (const int64_t[]){SB, IMG}, PD_FLOAT32),
                      pd_zeros(2, (const int64_t[]){SB, CLS}, PD_FLOAT32)};
  pd_tensor *loss = NULL;
  DIST_CHECK(pd_dist_model_train(m) == PD_OK, 41);
  DIST_CHECK(pd_dist_model_call(m, in, 2, &loss, 1) == PD_ERR_STATE && !loss, 42);
  DIST_CHECK(strstr(pd_last_error(), "since been destroyed"), 43);
  pd_dist_model_release(m);
  pd_layer_release(net);
  pd_dist_process_mesh_release(mesh);
  return rc;
}

static void test_seed_on_two_processes(void **state) {
  (void)state;
  dist_run_ranks_or_fail(2, rank_seed, 120);
}

/* A ShardDataloader splits each batch along "dp"; AdamW's moments take the
 * weights' placements on the 2-d mesh. The eager run trains on the same
 * global batches, gathered from the loader. */
static int rank_mesh_2d(int rank) {
  pd_dist_process_mesh *mesh = pd_dist_process_mesh_new(2, (const int64_t[]){2, 2}, (const int[]){0, 1, 2, 3},
                                                        (const char *[]){"dp", "mp"});
  pd_tensor *xs[SN], *ys[SN];
  seed_result eager, dist;
  int rc = seed_global_batches(rank, mesh, "dp", xs, ys);
  if (rc == 0) rc = seed_eager(rank, true, xs, ys, &eager);
  pd_layer *net = demo_net(mesh, (pd_dist_placement[]){pd_dist_replicate(), pd_dist_shard(1)},
                           (pd_dist_placement[]){pd_dist_replicate(), pd_dist_shard(0)});
  if (rc == 0 && (rc = seed_dist(rank, net, mesh, "dp", true, &dist, NULL)) == 0)
    rc = seed_compare(rank, &dist, &eager);
  pd_layer_release(net);
  pd_dist_process_mesh_release(mesh);
  return rc;
}

static void test_mesh_2d_on_four_processes(void **state) {
  (void)state;
  dist_run_ranks_or_fail(4, rank_mesh_2d, 120);
}

/* An op whose SPMD rule needs a local step of several ops (alpha_dropout
 * on a batch shard) has no op for that step in a Program: it runs
 * replicated there, as an op without a rule, after an all_gather of its
 * input. */
static int rank_local_step_replicated(int rank) {
  pd_dist_process_mesh *mesh =
      pd_dist_process_mesh_new(1, (const int64_t[]){2}, (const int[]){0, 1}, (const char *[]){"dp"});
  pd_seed(2024);
  pd_layer *ls[3] = {pd_nn_linear(IMG, IMG, NULL), pd_nn_alpha_dropout(0.5), pd_nn_linear(IMG, CLS, NULL)};
  pd_layer *net = pd_nn_sequential(ls, 3);
  DIST_CHECK(mesh && net, 70);
  pd_scope_begin();
  const pd_dist_placement rep[1] = {pd_dist_replicate()};
  DIST_CHECK(pd_dist_shard_tensor(pd_layer_parameter(ls[0], "weight"), mesh, rep, 1) &&
                 pd_dist_shard_tensor(pd_layer_parameter(ls[2], "weight"), mesh, rep, 1),
             71);
  pd_scope_end();
  pd_layer *mse = pd_nn_mse_loss(NULL);
  pd_named_tensors ps;
  DIST_CHECK(mse && pd_layer_parameters(net, &ps) == PD_OK, 72);
  pd_optimizer *opt = pd_optimizer_sgd(0.1, ps.tensors, ps.n, NULL);
  pd_named_tensors_free(&ps);
  pd_io_dataset *ds = seed_dataset();
  pd_dist_shard_dataloader *sl = seed_shard_loader(ds, mesh, "dp");
  pd_dist_model *m = NULL;
  pd_dist_data_loader *dl = NULL;
  DIST_CHECK(pd_dist_to_static(net, NULL, sl, mse, opt, NULL, &m, &dl) == PD_OK, 73);
  pd_scope_begin();
  pd_tensor *in[2], *out = NULL;
  DIST_CHECK(pd_dist_data_loader_next(dl, in, 2) == 2, 74);
  DIST_CHECK(pd_dist_model_call(m, in, 2, &out, 1) == 1 && isfinite(pd_tensor_item(out)), 75);
  pd_scope_end();
  char *ops = seed_op_list(pd_dist_model_main_program(m, PD_DIST_MODE_TRAIN, false));
  DIST_CHECK(ops && strstr(ops, "c_allgather alpha_dropout"), 76);
  free(ops);
  pd_dist_model_release(m);
  pd_dist_data_loader_release(dl);
  pd_dist_shard_dataloader_release(sl);
  pd_io_dataset_release(ds);
  pd_optimizer_release(opt);
  pd_layer_release(mse);
  pd_layer_release(net);
  pd_dist_process_mesh_release(mesh);
  return 0;
}

static void test_local_step_replicated_on_two_processes(void **state) {
  (void)state;
  dist_run_ranks_or_fail(2, rank_local_step_replicated, 120);
}

/* ---- Strategy.gradient_merge ---------------------------------------------- */
enum { GM_K = 4 };

/* GM_K calls of batch SB with gradient_merge (k=GM_K, avg) against one SGD
 * step of the GM_K*SB batch in one process: each call returns its
 * micro-batch's loss, the parameters do not move before the GM_K-th call,
 * and after it they equal the big step's. */
static int rank_gradient_merge(int rank) {
  static double init[4][SEED_MAX_PARAM], want[4][SEED_MAX_PARAM], got[4][SEED_MAX_PARAM];
  int n[4];
  pd_tensor *xs[GM_K], *ys[GM_K];
  double want_loss[GM_K];
  pd_scope_begin();
  for (int b = 0; b < GM_K; b++) seed_batch(b, &xs[b], &ys[b]);
  /* one process: the micro-batches' losses, then one step of their concatenation */
  pd_layer *ref = demo_net(NULL, NULL, NULL), *mse = pd_nn_mse_loss(NULL);
  pd_named_tensors ps;
  DIST_CHECK(ref && mse && pd_layer_parameters(ref, &ps) == PD_OK, 50);
  pd_optimizer *opt = pd_optimizer_sgd(0.1, ps.tensors, ps.n, NULL);
  pd_named_tensors_free(&ps);
  for (int b = 0; b < GM_K; b++) {
    pd_tensor *loss = NULL;
    pd_layer_call(mse, (pd_tensor *[]){pd_layer_call1(ref, xs[b]), ys[b]}, 2, &loss, 1);
    DIST_CHECK(loss, 51);
    want_loss[b] = pd_tensor_item(loss);
  }
  pd_tensor *big_x = pd_concat(xs, GM_K, 0), *big_y = pd_concat(ys, GM_K, 0), *loss = NULL;
  pd_layer_call(mse, (pd_tensor *[]){pd_layer_call1(ref, big_x), big_y}, 2, &loss, 1);
  DIST_CHECK(loss && pd_backward(loss, NULL, false) == PD_OK && pd_optimizer_step(opt) == PD_OK, 52);
  int rc = seed_param_values(rank, ref, want, n);
  pd_optimizer_release(opt);
  pd_layer_release(ref);
  if (rc) return rc;

  /* 2 processes: seed 000's placements, gradient_merge k=GM_K */
  pd_dist_process_mesh *mesh =
      pd_dist_process_mesh_new(1, (const int64_t[]){2}, (const int[]){0, 1}, (const char *[]){"x"});
  pd_layer *net =
      demo_net(mesh, (pd_dist_placement[]){pd_dist_shard(1)}, (pd_dist_placement[]){pd_dist_shard(0)});
  DIST_CHECK(net && pd_layer_parameters(net, &ps) == PD_OK, 53);
  opt = pd_optimizer_sgd(0.1, ps.tensors, ps.n, NULL);
  pd_named_tensors_free(&ps);
  pd_io_dataset *ds = seed_dataset();
  pd_io_loader *loader = pd_io_data_loader(ds, &(pd_io_data_loader_opts){.batch_size = SB});
  pd_dist_strategy s = pd_dist_strategy_default();
  s.gradient_merge = (pd_dist_strategy_gradient_merge){.enable = true, .k_steps = GM_K, .avg = true};
  pd_dist_model *m = NULL;
  pd_dist_data_loader *dl = NULL;
  DIST_CHECK(pd_dist_to_static(net, loader, NULL, mse, opt, &s, &m, &dl) == PD_OK, 54);
  if ((rc = seed_param_values(rank, net, init, n))) return rc;
  for (int b = 0; b < GM_K && rc == 0; b++) {
    pd_tensor *out = NULL;
    DIST_CHECK(pd_dist_model_call(m, (pd_tensor *[]){xs[b], ys[b]}, 2, &out, 1) == 1, 55);
    if (fabs(pd_tensor_item(out) - want_loss[b]) > 1e-6) {
      fprintf(stderr, "rank %d: call %d: loss %.9g, expected %.9g\n", rank, b + 1, pd_tensor_item(out),
              want_loss[b]);
      rc = 56;
    }
    if (rc == 0 && (rc = seed_param_values(rank, net, got, n)) == 0)
      rc = b < GM_K - 1 ? seed_values_equal(rank, "before the k-th call", got, init, n)
                        : seed_values_equal(rank, "after the k-th call", got, want, n);
  }
  /* the update Program reads the merged gradients, averaged, then zeroes them */
  pd_program *dp = pd_dist_model_main_program(m, PD_DIST_MODE_TRAIN, false);
  if (rc == 0 && !(program_has(dp, "@GRAD@MERGED") && program_has(dp, "scale_") && program_has(dp, "fill_")))
    rc = 57;
  pd_dist_model_release(m);
  pd_dist_data_loader_release(dl);
  pd_io_loader_release(loader);
  pd_io_dataset_release(ds);
  pd_optimizer_release(opt);
  pd_layer_release(mse);
  pd_layer_release(net);
  pd_dist_process_mesh_release(mesh);
  pd_scope_end();
  return rc;
}

static void test_gradient_merge_on_two_processes(void **state) {
  (void)state;
  dist_run_ranks_or_fail(2, rank_gradient_merge, 120);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_default_modes_and_errors),
      cmocka_unit_test(test_train_eval_predict),
      cmocka_unit_test(test_state_dict),
      cmocka_unit_test(test_state_dict_opt_after_steps),
      cmocka_unit_test(test_seed_on_two_processes),
      cmocka_unit_test(test_mesh_2d_on_four_processes),
      cmocka_unit_test(test_gradient_merge_on_two_processes),
      cmocka_unit_test(test_local_step_replicated_on_two_processes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
