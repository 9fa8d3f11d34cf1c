/* dist.to_static in one process: the default mode from the loss and the
 * optimizer given, the errors of calling in a mode that lacks them or with
 * the wrong number of inputs (naming the feed names), a train step that
 * updates the parameters and returns the loss, eval returning the same loss
 * as a hand-computed MSE, predict's "out0", and strategy passes refused by
 * name. */
#include <math.h>
#include <string.h>

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
  s.recompute.enable = true;
  assert_int_equal(pd_dist_to_static(net, loader, NULL, mse, opt, &s, &m, &dl), PD_ERR_UNIMPLEMENTED);
  assert_non_null(strstr(pd_last_error(), "recompute"));

  /* the wrong number of inputs names the feeds */
  assert_int_equal(pd_dist_to_static(net, loader, NULL, mse, opt, NULL, &m, &dl), PD_OK);
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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_default_modes_and_errors),
      cmocka_unit_test(test_train_eval_predict),
      cmocka_unit_test(test_state_dict),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
