/* paddle.jit.save and paddle.jit.load across processes:
 *
 *   net = LinearNet()                        # seed 002's model
 *   paddle.jit.save(net, "dir/linear_net",
 *                   input_spec=[InputSpec([None, 10], "float32", "x")])
 *   # ... in another process, without LinearNet's code:
 *   loaded = paddle.jit.load("dir/linear_net")
 *   y = loaded(x)
 *
 *   jit_save_load save DIR   trains LinearNet a few steps, saves it with
 *                            jit.save, and writes DIR/x.npy and DIR/y.npy
 *                            (an input and the model's eager output)
 *   jit_save_load load DIR   jit.load's DIR/linear_net, runs it on
 *                            DIR/x.npy and compares with DIR/y.npy
 *   jit_save_load [DIR]      both, the load in a new process (DIR defaults
 *                            to a fresh folder under /tmp)
 *
 * Exits 0 when the loaded model's outputs equal the original's exactly. */
#include <paddlec.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "linear_net.h"

static int fail(const char *what) {
  fprintf(stderr, "jit_save_load: %s: %s\n", what, pd_last_error());
  return 1;
}

static void path_in(char *out, size_t cap, const char *dir, const char *name) {
  snprintf(out, cap, "%s/%s", dir, name);
}

static int save(const char *dir) {
  pd_seed(2023);
  pd_layer *net = linear_net_new();
  if (!net) return fail("LinearNet");
  /* a few SGD steps on y = sum(x), so the saved weights are trained ones */
  pd_named_tensors params = {0};
  if (pd_layer_parameters(net, &params) != PD_OK) return fail("parameters");
  pd_optimizer *opt = pd_optimizer_sgd(0.01, params.tensors, params.n, NULL);
  pd_tensor *x = pd_rand(2, (int64_t[]){8, 10}, PD_FLOAT32);
  pd_tensor *target = pd_sum(x, (int64_t[]){1}, 1, true);
  for (int step = 0; step < 5; step++) {
    pd_tensor *y = pd_layer_call1(net, x);
    pd_tensor *loss = y ? pd_mse_loss(y, target, PD_REDUCTION_MEAN) : NULL;
    if (!loss || pd_backward(loss, NULL, false) != PD_OK || pd_optimizer_step(opt) != PD_OK)
      return fail("training");
    pd_optimizer_clear_grad(opt, false);
    pd_tensor_release(loss);
    pd_tensor_release(y);
  }
  char path[4096];
  path_in(path, sizeof path, dir, "linear_net");
  pd_input_spec spec = {2, {-1, 10}, PD_FLOAT32, "x"};
  if (pd_jit_save(net, path, &spec, 1) != PD_OK) return fail("jit.save");
  pd_tensor *y = pd_layer_call1(net, x);
  if (!y) return fail("forward");
  path_in(path, sizeof path, dir, "x.npy");
  if (pd_io_save_npy(path, x) != PD_OK) return fail(path);
  path_in(path, sizeof path, dir, "y.npy");
  if (pd_io_save_npy(path, y) != PD_OK) return fail(path);
  printf("saved %s/linear_net.pdmodel and .pdiparams\n", dir);
  pd_tensor_release(y);
  pd_tensor_release(x);
  pd_tensor_release(target);
  pd_optimizer_release(opt);
  pd_named_tensors_free(&params);
  pd_layer_release(net);
  return 0;
}

/* Uses nothing of LinearNet: the layer comes from the files. */
static int load(const char *dir) {
  char path[4096];
  path_in(path, sizeof path, dir, "linear_net");
  pd_layer *model = pd_jit_load(path);
  if (!model) return fail("jit.load");
  path_in(path, sizeof path, dir, "x.npy");
  pd_tensor *x = pd_io_load_npy(path);
  path_in(path, sizeof path, dir, "y.npy");
  pd_tensor *want = pd_io_load_npy(path);
  if (!x || !want) return fail("reading the input and output");
  pd_tensor *got = pd_layer_call1(model, x);
  if (!got) return fail("calling the loaded model");
  int64_t n = pd_tensor_numel(got), bad = n == pd_tensor_numel(want) ? 0 : 1;
  for (int64_t i = 0; !bad && i < n; i++) bad = pd_tensor_item_at(got, i) != pd_tensor_item_at(want, i);
  printf("loaded model: %lld outputs, %s the original's\n", (long long)n,
         bad ? "DIFFERENT from" : "equal to");
  pd_tensor_release(got);
  pd_tensor_release(x);
  pd_tensor_release(want);
  pd_layer_release(model);
  return bad ? 1 : 0;
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "save") == 0) return save(argv[2]);
  if (argc == 3 && strcmp(argv[1], "load") == 0) return load(argv[2]);
  if (argc > 2) {
    fprintf(stderr, "usage: jit_save_load [save|load] [DIR]\n");
    return 2;
  }
  char tmp[] = "/tmp/jit_save_load_XXXXXX";
  const char *dir = argc == 2 ? argv[1] : mkdtemp(tmp);
  if (!dir) {
    perror("jit_save_load: mkdtemp");
    return 1;
  }
  if (save(dir) != 0) return 1;
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    execl("/proc/self/exe", argv[0], "load", dir, (char *)NULL);
    perror("jit_save_load: exec");
    _exit(127);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid) {
    perror("jit_save_load: fork");
    return 1;
  }
  if (argc == 1) {
    const char *files[] = {"linear_net.pdmodel", "linear_net.pdiparams", "x.npy", "y.npy"};
    char path[4096];
    for (int i = 0; i < 4; i++) {
      path_in(path, sizeof path, dir, files[i]);
      unlink(path);
    }
    rmdir(dir);
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
