/* DataParallel step time on one machine: the same global batch trained by
 *   (a) 1 process with 2 threads (no DataParallel), and
 *   (b) 2 processes with 1 thread each (DataParallel over the shm backend),
 *   (c) as (b) with every all_reduce launched after backward
 *       (pd_data_parallel_opts.defer_all_reduce: no overlap).
 * Models: an MLP 784-1024-1024-10 (ReLU, cross entropy, Adam) at global
 * batch 256, and the decoder of bench_decoder.c / examples/decoder_model.c
 * (hidden 256, 4 heads, inter 688, 2 layers, vocab 1000, seq 128, AdamW) at
 * global batch 4. Target: (b) <= 1.1 x (a).
 *
 * The parent only forks and collects: every configuration runs in fresh
 * processes (OpenMP is never started before a fork), ranks rendezvous at a
 * free local port, and rank 0 sends its per-step time through a pipe. */
#include <paddlec.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "decoder_model.h"

enum { MODEL_MLP, MODEL_DECODER };

typedef struct job {
  int model;
  int nprocs; /* 1: plain training with 2 threads; 2: DataParallel, 1 thread each */
  bool defer;
} job;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void check(bool ok, const char *what) {
  if (!ok) {
    fprintf(stderr, "bench_dp: %s: %s\n", what, pd_last_error());
    exit(1);
  }
}

typedef struct model {
  pd_layer *net; /* what the step calls: the DataParallel wrapper or the model */
  pd_layer *inner;
  pd_optimizer *opt;
  pd_tensor *x, *y;
} model;

static pd_tensor *mlp_loss(model *m) {
  pd_tensor *logits = pd_layer_call1(m->net, m->x);
  return pd_cross_entropy(logits, m->y, NULL, -100, PD_REDUCTION_MEAN, false, -1, true, 0.0);
}

static pd_tensor *decoder_loss(model *m) {
  pd_tensor *loss = NULL;
  return pd_layer_call(m->net, (pd_tensor *[]){m->x, m->y}, 2, &loss, 1) == 1 ? loss : NULL;
}

/* Builds the model (same parameters on every rank: seeded, then broadcast),
 * its optimizer and this rank's share of the global batch. */
static void build(const job *j, int rank, model *m) {
  pd_seed(1);
  const decoder_config cfg = {.vocab_size = 1000,
                              .hidden_size = 256,
                              .num_heads = 4,
                              .intermediate_size = 688,
                              .num_layers = 2,
                              .max_seq_len = 128};
  if (j->model == MODEL_MLP) {
    pd_layer *ls[5] = {pd_nn_linear(784, 1024, NULL), pd_nn_relu(), pd_nn_linear(1024, 1024, NULL),
                       pd_nn_relu(), pd_nn_linear(1024, 10, NULL)};
    m->inner = pd_nn_sequential(ls, 5);
  } else {
    m->inner = decoder_model_new(&cfg);
  }
  check(m->inner != NULL, "model");
  pd_named_tensors ps;
  check(pd_layer_parameters(m->inner, &ps) == PD_OK, "parameters");
  m->opt = j->model == MODEL_MLP ? pd_optimizer_adam(1e-3, ps.tensors, ps.n, NULL)
                                 : pd_optimizer_adam_w(1e-4, ps.tensors, ps.n, NULL);
  pd_named_tensors_free(&ps);
  check(m->opt != NULL, "optimizer");
  m->net = m->inner;
  if (j->nprocs > 1) {
    m->net = pd_data_parallel(m->inner, &(pd_data_parallel_opts){.defer_all_reduce = j->defer});
    check(m->net != NULL, "DataParallel");
  }
  pd_seed(100 + (uint64_t)rank);
  int64_t b = (j->model == MODEL_MLP ? 256 : 4) / j->nprocs;
  if (j->model == MODEL_MLP) {
    m->x = pd_randn(2, (int64_t[]){b, 784}, PD_FLOAT32);
    m->y = pd_randint(0, 10, 1, (int64_t[]){b}, PD_INT64);
  } else {
    m->x = pd_randint(0, cfg.vocab_size, 2, (int64_t[]){b, 128}, PD_INT64);
    m->y = pd_randint(0, cfg.vocab_size, 2, (int64_t[]){b, 128}, PD_INT64);
  }
  check(m->x && m->y, "data");
}

/* The fastest of `reps` blocks of `steps` steps, per step. */
static double time_steps(const job *j, model *m, int steps, int reps) {
  double best = 1e30;
  for (int r = 0; r < reps; r++) {
    double t0 = now_s();
    for (int s = 0; s < steps; s++) {
      pd_scope_begin();
      pd_tensor *loss = j->model == MODEL_MLP ? mlp_loss(m) : decoder_loss(m);
      check(loss != NULL, "forward");
      check(pd_backward(loss, NULL, false) == PD_OK, "backward");
      check(pd_optimizer_step(m->opt) == PD_OK, "step");
      pd_optimizer_clear_grad(m->opt, true);
      pd_scope_end();
    }
    double t = (now_s() - t0) / steps;
    if (t < best) best = t;
  }
  return best;
}

typedef struct rank_arg {
  const job *j;
  int fd; /* rank 0 writes its seconds per step here */
} rank_arg;

/* One rank, started by pd_dist_spawn with the launcher's environment. */
static int run_rank(int rank, void *arg) {
  const job *j = ((rank_arg *)arg)->j;
  int fd = ((rank_arg *)arg)->fd;
  pd_set_num_threads(j->nprocs == 1 ? 2 : 1);
  if (j->nprocs > 1) {
    check(pd_dist_init_parallel_env(&(pd_dist_init_opts){.timeout_s = 120}) != NULL, "init_parallel_env");
  }
  model m = {0};
  build(j, rank, &m);
  int steps = j->model == MODEL_MLP ? 20 : 5;
  time_steps(j, &m, 3, 1); /* warm up pools and primitives */
  double t = time_steps(j, &m, steps, 5);
  if (rank == 0 && write(fd, &t, sizeof t) != (ssize_t)sizeof t) return 2;
  pd_tensor_release(m.x), pd_tensor_release(m.y);
  pd_optimizer_release(m.opt);
  if (m.net != m.inner) pd_layer_release(m.net);
  pd_layer_release(m.inner);
  if (j->nprocs > 1) pd_dist_destroy_process_group(NULL);
  return 0;
}

/* Runs a job in fresh processes; rank 0's seconds per step. */
static double run_job(const job *j) {
  int p[2];
  if (pipe(p) != 0) {
    perror("bench_dp: pipe");
    exit(1);
  }
  /* the 8 bytes rank 0 writes fit in the pipe: spawn may return first */
  pd_status st = pd_dist_spawn(run_rank, &(rank_arg){j, p[1]}, j->nprocs, NULL);
  close(p[1]);
  double t = -1;
  if (st != PD_OK || read(p[0], &t, sizeof t) != (ssize_t)sizeof t) t = -1;
  close(p[0]);
  if (t < 0) {
    fprintf(stderr, "bench_dp: a rank failed: %s\n", pd_last_error());
    exit(1);
  }
  return t;
}

int main(void) {
  unsetenv("PADDLE_TRAINER_ID");
  unsetenv("PADDLE_TRAINER_ENDPOINTS");
  unsetenv("PADDLE_CURRENT_ENDPOINT");
  const char *names[2] = {
      "MLP 784-1024-1024-10, batch 256, Adam",
      "decoder (hidden 256, 4 heads, inter 688, 2 layers, vocab 1000, seq 128), batch 4, AdamW"};
  for (int mdl = 0; mdl < 2; mdl++) {
    double one = run_job(&(job){.model = mdl, .nprocs = 1});
    double two = run_job(&(job){.model = mdl, .nprocs = 2});
    double deferred = run_job(&(job){.model = mdl, .nprocs = 2, .defer = true});
    printf("%s (global batch):\n", names[mdl]);
    printf("  1 process  x 2 threads:                      %8.2f ms/step\n", one * 1e3);
    printf(
        "  2 processes x 1 thread (DataParallel):       %8.2f ms/step  = %.3fx the 1-process step "
        "(target <= 1.1: %s)\n",
        two * 1e3, two / one, two <= 1.1 * one ? "met" : "NOT met");
    printf("  2 processes, all_reduce after backward:      %8.2f ms/step  = %.3fx the overlapped step\n",
           deferred * 1e3, deferred / two);
  }
  return 0;
}
