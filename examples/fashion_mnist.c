/* Fashion-MNIST: a small CNN trained with Adam on the idx files under
 * /usr/share/datasets/fashion-mnist (Debian's fashion-mnist package), then
 * evaluated on the 10k test images, with paddle.Model (pd_model_prepare with
 * CrossEntropyLoss and an Accuracy metric, pd_model_fit, pd_model_evaluate).
 *
 *   Conv2D(1, 16, 3, padding=1) -> ReLU -> MaxPool2D(2)
 *   Conv2D(16, 32, 3, padding=1) -> ReLU -> MaxPool2D(2)
 *   Flatten -> Linear(32 * 7 * 7, 10)
 *
 * Options:
 *   --train-images N   train on the first N training images (default: all 60000)
 *   --epochs E         passes over them (default 1)
 *   --batch-size B     (default 64)
 *   --lr LR            Adam's learning rate (default 0.002)
 *   --min-accuracy A   exit with status 1 when the test accuracy is below A
 *   --data-dir DIR     where the four .gz files are
 *   --log-freq K       fit's progress line every K steps (default 100)
 *   --inference-model PREFIX
 *                      after the evaluation, record the trained CNN into a
 *                      static Program, save it with save_inference_model
 *                      (PREFIX.pdmodel, PREFIX.pdiparams), free the model,
 *                      the layers and the optimizer, load it back with
 *                      load_inference_model and run the test set through the
 *                      Executor: exit 1 unless it classifies the same number
 *                      of images correctly
 * Prints fit's progress and "test accuracy: 0.xxxx" at the end. */
#include <math.h>
#include <paddlec.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* transform: raw 0..255 pixels [28, 28] -> [1, 28, 28] in [0, 1] */
static int to_unit_chw(pd_tensor *image, pd_tensor **out, void *user) {
  (void)user;
  out[0] = pd_reshape(pd_scale(image, 1.0 / 255.0, 0.0, true), 3, (int64_t[]){1, 28, 28});
  return out[0] ? 1 : pd_last_status();
}

static pd_layer *cnn_new(void) {
  const pd_nn_conv_opts pad1 = {.conv = {.n_padding = 1, .padding = {1}}};
  const int64_t k3[] = {3}, k2[] = {2};
  pd_layer *layers[] = {
      pd_nn_conv2d(1, 16, 1, k3, &pad1),
      pd_nn_relu(),
      pd_nn_max_pool2d(1, k2, NULL),
      pd_nn_conv2d(16, 32, 1, k3, &pad1),
      pd_nn_relu(),
      pd_nn_max_pool2d(1, k2, NULL),
      pd_nn_flatten(1, -1),
      pd_nn_linear(32 * 7 * 7, 10, NULL),
  };
  return pd_nn_sequential(layers, (int)(sizeof layers / sizeof layers[0]));
}

/* Records net's forward on an image Variable [-1, 1, 28, 28] and saves it
 * as an inference model at prefix (the parameters' trained values). */
static pd_status save_inference(pd_layer *net, const char *prefix) {
  pd_program *main_program = pd_static_program(), *startup = pd_static_program();
  if (!main_program || !startup || pd_static_program_guard_begin(main_program, startup) != PD_OK) {
    pd_program_release(main_program);
    pd_program_release(startup);
    return pd_last_status();
  }
  pd_tensor *image = pd_static_data("image", 4, (const int64_t[]){-1, 1, 28, 28}, PD_FLOAT32);
  pd_tensor *logits = image ? pd_layer_call1(net, image) : NULL;
  pd_static_program_guard_end();
  pd_status st = logits ? pd_static_save_inference_model(prefix, &image, 1, &logits, 1, main_program, NULL)
                        : pd_last_status();
  pd_tensor_release(image);
  pd_tensor_release(logits);
  pd_program_release(main_program);
  pd_program_release(startup);
  return st;
}

/* Loads the inference model at prefix into a fresh scope and counts the test
 * images whose largest logit is their label (-1 on an error). */
static int64_t inference_correct(const char *prefix, pd_io_dataset *test) {
  pd_var_scope *scope = pd_static_scope();
  pd_executor *exe = pd_static_executor(PD_CPU);
  pd_inference_model m = {0};
  pd_io_data_loader_opts lo = {.batch_size = 1000};
  pd_io_loader *loader = pd_io_data_loader(test, &lo);
  int64_t correct = -1;
  if (!scope || !exe || !loader || pd_static_load_inference_model(prefix, scope, &m) != PD_OK) goto done;
  pd_tensor *out_var = pd_static_block_var(pd_program_global_block(m.program), m.fetch_names[0]);
  if (!out_var) goto done;
  correct = 0;
  pd_tensor *batch[2];
  int n;
  while ((n = pd_io_loader_next(loader, batch, 2)) == 2) {
    pd_static_feed feed = {m.feed_names[0], batch[0]};
    pd_tensor *logits = NULL;
    pd_status st = pd_executor_run(exe, m.program, &feed, 1, &out_var, 1, &logits, scope);
    if (st == PD_OK) {
      const float *z = pd_tensor_data(logits);
      const int64_t *label = pd_tensor_data(batch[1]);
      int64_t rows = pd_tensor_shape(logits)[0];
      for (int64_t r = 0; r < rows; r++) {
        int best = 0;
        for (int c = 1; c < 10; c++)
          if (z[r * 10 + c] > z[r * 10 + best]) best = c;
        correct += best == label[r];
      }
    }
    pd_tensor_release(logits);
    pd_tensor_release(batch[0]);
    pd_tensor_release(batch[1]);
    if (st != PD_OK) {
      correct = -1;
      break;
    }
  }
  if (n < 0) correct = -1;
done:
  pd_inference_model_free(&m);
  pd_io_loader_release(loader);
  pd_executor_release(exe);
  pd_var_scope_release(scope);
  return correct;
}

int main(int argc, char **argv) {
  int64_t train_images = 60000, batch_size = 64;
  int epochs = 1, log_freq = 100;
  double lr = 0.002, min_accuracy = 0.0;
  const char *data_dir = NULL, *inference_prefix = NULL;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!v) goto usage;
    if (!strcmp(a, "--train-images"))
      train_images = strtoll(v, NULL, 10);
    else if (!strcmp(a, "--epochs"))
      epochs = atoi(v);
    else if (!strcmp(a, "--batch-size"))
      batch_size = strtoll(v, NULL, 10);
    else if (!strcmp(a, "--lr"))
      lr = strtod(v, NULL);
    else if (!strcmp(a, "--min-accuracy"))
      min_accuracy = strtod(v, NULL);
    else if (!strcmp(a, "--data-dir"))
      data_dir = v;
    else if (!strcmp(a, "--log-freq"))
      log_freq = atoi(v);
    else if (!strcmp(a, "--inference-model"))
      inference_prefix = v;
    else
      goto usage;
    i++;
  }
  if (train_images <= 0 || epochs <= 0 || batch_size <= 0 || log_freq <= 0) goto usage;
  pd_seed(2024);

  pd_vision_datasets_mnist_opts dopts = {.root = data_dir, .transform = to_unit_chw};
  pd_io_dataset *train_full = pd_vision_datasets_fashion_mnist(&dopts);
  dopts.mode = "test";
  pd_io_dataset *test = pd_vision_datasets_fashion_mnist(&dopts);
  if (!train_full || !test) goto fail;
  if (train_images > pd_io_dataset_len(train_full)) train_images = pd_io_dataset_len(train_full);
  int64_t *first = malloc((size_t)train_images * sizeof *first);
  for (int64_t i = 0; i < train_images; i++) first[i] = i;
  pd_io_dataset *train = pd_io_subset(train_full, first, train_images);
  free(first);
  pd_io_dataset_release(train_full);
  if (!train) goto fail;

  pd_layer *net = cnn_new();
  pd_layer *loss_fn = pd_nn_cross_entropy_loss(NULL);
  pd_metric *accuracy = pd_metric_accuracy(NULL, 0, NULL);
  pd_model *model = net ? pd_model_new(net, NULL, 0, NULL, 0) : NULL;
  pd_named_tensors params;
  if (!model || !loss_fn || !accuracy || pd_layer_parameters(net, &params) != PD_OK) goto fail;
  pd_optimizer *adam = pd_optimizer_adam(lr, params.tensors, params.n, NULL);
  pd_named_tensors_free(&params);
  if (!adam || pd_model_prepare(model, adam, loss_fn, &accuracy, 1) != PD_OK) goto fail;
  printf("fashion_mnist: %lld training images, %d epoch(s), batch size %lld, Adam lr %g, %d thread(s)\n",
         (long long)train_images, epochs, (long long)batch_size, lr, pd_get_num_threads());
  fflush(stdout);

  double t0 = now_s();
  pd_model_fit_opts fit = {.batch_size = batch_size, .epochs = epochs, .log_freq = log_freq};
  if (pd_model_fit(model, pd_model_dataset(train), (pd_model_data){0}, &fit) != PD_OK) goto fail;
  double train_s = now_s() - t0;
  pd_model_eval_result res;
  t0 = now_s();
  pd_model_eval_opts eval = {.batch_size = 1000, .quiet = true};
  if (pd_model_evaluate(model, pd_model_dataset(test), &eval, &res) != PD_OK) goto fail;
  double acc = pd_model_eval_result_get(&res, "acc"), test_loss = pd_model_eval_result_get(&res, "loss");
  pd_model_eval_result_free(&res);
  printf("train time: %.1f s; test loss: %.4f; test accuracy: %.4f (%.1f s)\n", train_s, test_loss, acc,
         now_s() - t0);

  if (inference_prefix && save_inference(net, inference_prefix) != PD_OK) goto fail;
  pd_model_release(model);
  pd_optimizer_release(adam);
  pd_metric_release(accuracy);
  pd_layer_release(loss_fn);
  pd_layer_release(net);
  pd_io_dataset_release(train);
  if (inference_prefix) {
    /* everything the training made is freed: only the files remain */
    int64_t n_test = pd_io_dataset_len(test), correct = inference_correct(inference_prefix, test);
    if (correct < 0) goto fail;
    double inf_acc = (double)correct / (double)n_test;
    printf("inference model accuracy: %.4f (%lld of %lld)\n", inf_acc, (long long)correct, (long long)n_test);
    if (llround(acc * (double)n_test) != correct) {
      fprintf(stderr, "fashion_mnist: the loaded inference model's accuracy %.4f differs from %.4f\n",
              inf_acc, acc);
      pd_io_dataset_release(test);
      return 1;
    }
  }
  pd_io_dataset_release(test);
  if (acc < min_accuracy) {
    fprintf(stderr, "fashion_mnist: test accuracy %.4f is below --min-accuracy %.4f\n", acc, min_accuracy);
    return 1;
  }
  return 0;
fail:
  fprintf(stderr, "fashion_mnist: %s\n", pd_last_error());
  return 1;
usage:
  fprintf(stderr,
          "usage: %s [--train-images N] [--epochs E] [--batch-size B] [--lr LR] [--min-accuracy A] "
          "[--data-dir DIR] [--log-freq K] [--inference-model PREFIX]\n",
          argv[0]);
  return 2;
}
