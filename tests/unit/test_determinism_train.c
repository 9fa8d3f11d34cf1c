/* A short training run gives the same bits on 1, 2, 3 and 8 threads: a
 * conv (weight and bias gradients reduced over the batch), a large linear,
 * layer_norm, dropout, a variance term in the loss, Adam with clipping by
 * global norm. Every loss and, at the end, every parameter must match the
 * one-thread run bit for bit (docs/determinism.md). */
#include <string.h>

#include "test_util.h"

#define AX(...) \
  ((const int64_t[]){__VA_ARGS__}), (int)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t))

enum { BATCH = 8, STEPS = 3, CLASSES = 10 };

typedef struct run_result {
  float loss[STEPS];
  pd_named_tensors params;
} run_result;

static pd_layer *model_new(void) {
  const pd_nn_conv_opts pad1 = {.conv = {.n_padding = 1, .padding = {1}}};
  const int64_t k3[] = {3};
  pd_layer *layers[] = {
      pd_nn_conv2d(3, 8, 1, k3, &pad1),
      pd_nn_relu(),
      pd_nn_flatten(1, -1),
      pd_nn_linear(8 * 24 * 24, 512, NULL), /* 2.4M weights */
      pd_nn_layer_norm(1, (const int64_t[]){512}, NULL),
      pd_nn_dropout(0.25, NULL),
      pd_nn_relu(),
      pd_nn_linear(512, CLASSES, NULL),
  };
  return pd_nn_sequential(layers, (int)(sizeof layers / sizeof layers[0]));
}

/* Trains a freshly seeded model for STEPS steps on `threads` threads. */
static void train(int threads, run_result *r) {
  pd_set_num_threads(threads);
  pd_seed(20261126);
  pd_layer *net = model_new();
  assert_non_null(net);
  assert_int_equal(pd_layer_parameters(net, &r->params), PD_OK);
  pd_grad_clip clip = pd_nn_clip_grad_by_global_norm(0.5);
  pd_optimizer_adam_opts o = pd_optimizer_adam_defaults();
  o.grad_clip = &clip;
  pd_optimizer *opt = pd_optimizer_adam(1e-3, r->params.tensors, r->params.n, &o);
  assert_non_null(opt);
  pd_layer_train(net);
  for (int s = 0; s < STEPS; s++) {
    pd_scope_begin();
    pd_tensor *x = pd_randn(4, SHAPE(BATCH, 3, 24, 24), PD_FLOAT32);
    pd_tensor *label = pd_randint(0, CLASSES, 1, SHAPE(BATCH), PD_INT64);
    pd_tensor *logits = pd_layer_call1(net, x);
    assert_non_null(logits);
    pd_tensor *ce = pd_cross_entropy(logits, label, NULL, -100, PD_REDUCTION_MEAN, false, -1, true, 0.0);
    /* a variance over the batch: its backward is a reduction too */
    pd_tensor *v = pd_sum(pd_var(logits, AX(0), false, false), NULL, 0, false);
    pd_tensor *loss = pd_add(ce, pd_scale(v, 0.01, 0.0, true));
    assert_non_null(loss);
    r->loss[s] = (float)pd_tensor_item(loss);
    assert_int_equal(pd_backward(loss, NULL, false), PD_OK);
    assert_int_equal(pd_optimizer_step(opt), PD_OK);
    pd_optimizer_clear_grad(opt, true);
    pd_scope_end();
  }
  pd_optimizer_release(opt);
  for (int i = 0; i < r->params.n; i++) pd_tensor_retain(r->params.tensors[i]);
  pd_layer_release(net);
}

static void release_result(run_result *r) {
  for (int i = 0; i < r->params.n; i++) pd_tensor_release(r->params.tensors[i]);
  pd_named_tensors_free(&r->params);
}

static void test_training_bits_independent_of_threads(void **state) {
  (void)state;
  int prev = pd_get_num_threads();
  pd_set_deterministic(true); /* float32 GEMMs and convolutions too */
  const int threads[] = {1, 2, 3, 8};
  run_result ref;
  train(threads[0], &ref);
  for (size_t t = 1; t < sizeof threads / sizeof *threads; t++) {
    run_result r;
    train(threads[t], &r);
    for (int s = 0; s < STEPS; s++)
      if (memcmp(&ref.loss[s], &r.loss[s], sizeof(float)) != 0)
        fail_msg("step %d: loss %.9g on 1 thread, %.9g on %d", s, ref.loss[s], r.loss[s], threads[t]);
    assert_int_equal(r.params.n, ref.params.n);
    int differ = 0;
    for (int i = 0; i < ref.params.n; i++)
      if (!same_bits(ref.params.tensors[i], r.params.tensors[i])) {
        print_error("parameter %s differs between 1 and %d threads\n", ref.params.names[i], threads[t]);
        differ++;
      }
    if (differ) fail_msg("%d of %d parameters differ on %d threads", differ, ref.params.n, threads[t]);
    release_result(&r);
  }
  release_result(&ref);
  pd_set_num_threads(prev);
  pd_set_deterministic(false);
  expect_no_live_tensors();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_training_bits_independent_of_threads),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
