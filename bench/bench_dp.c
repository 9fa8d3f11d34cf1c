/* DataParallel step time on one machine: the same global batch trained by
 *   (a) 1 process with 2 threads (no DataParallel), and
 *   (b) 2 processes with 1 thread each (DataParallel over the shm backend),
 *   (c) as (b) with every all_reduce launched after backward
 *       (pd_data_parallel_opts.defer_all_reduce: no overlap).
 * Models: an MLP 784-1024-1024-10 (ReLU, cross entropy, Adam) at global
 * batch 256, and the decoder of bench_decoder.c / examples/decoder_model.c
 * (hidden 256, 4 heads, inter 688, 2 layers, vocab 1000, seq 128, AdamW) at
 * global batch 4. Target: (b) <= 1.1 x (a). Two more rows: one process on one
 * thread with half the batch (one rank's work, the machine to itself), and 2
 * such processes at once without DataParallel (what sharing the machine costs
 * before any communication). Each row splits rank 0's step into forward, backward
 * (which includes DataParallel's wait for the last all_reduce) and
 * optimizer (step, clear_grad and the end of the step's scope).
 *
 * The parent only forks and collects: every configuration runs in fresh
 * processes (OpenMP is never started before a fork), ranks rendezvous at a
 * free local port, and rank 0 sends its per-step time through a pipe.
 * (a) and (b) are measured in alternating rounds (see ROUNDS). */
#include <paddlec.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "decoder_model.h"
#include "timing.h"

enum { MODEL_MLP, MODEL_DECODER };

typedef struct job {
  int model;
  int nprocs; /* 1: plain training with 2 threads; 2: DataParallel, 1 thread each */
  bool defer;
  bool no_dp; /* 2 processes that each train alone: what sharing the machine costs */
  bool half;  /* 1 process, 1 thread, half the batch: one rank's work with the machine to itself */
} job;

/* Seconds per step of each phase, summed over the timed steps of the best block. */
typedef struct phases {
  double fwd, bwd, opt;
} phases;

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
  if (j->nprocs > 1 && !j->no_dp) {
    m->net = pd_data_parallel(m->inner, &(pd_data_parallel_opts){.defer_all_reduce = j->defer});
    check(m->net != NULL, "DataParallel");
  }
  pd_seed(100 + (uint64_t)rank);
  int64_t b = (j->model == MODEL_MLP ? 256 : 4) / (j->half ? 2 : j->nprocs);
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
static double time_steps(const job *j, model *m, int steps, int reps, phases *ph) {
  double best = 1e30;
  for (int r = 0; r < reps; r++) {
    phases cur = {0};
    double t0 = bench_now_s();
    for (int s = 0; s < steps; s++) {
      double a = bench_now_s();
      pd_scope_begin();
      pd_tensor *loss = j->model == MODEL_MLP ? mlp_loss(m) : decoder_loss(m);
      check(loss != NULL, "forward");
      double b = bench_now_s();
      check(pd_backward(loss, NULL, false) == PD_OK, "backward");
      double c = bench_now_s();
      check(pd_optimizer_step(m->opt) == PD_OK, "step");
      pd_optimizer_clear_grad(m->opt, true);
      pd_scope_end();
      double d = bench_now_s();
      cur.fwd += b - a, cur.bwd += c - b, cur.opt += d - c;
    }
    double t = (bench_now_s() - t0) / steps;
    if (t < best) {
      best = t;
      if (ph) *ph = (phases){cur.fwd / steps, cur.bwd / steps, cur.opt / steps};
    }
  }
  return best;
}

typedef struct rank_arg {
  const job *j;
  int fd; /* rank 0 writes its seconds per step, then its phases, here */
} rank_arg;

typedef struct result {
  double step;
  phases ph;
} result;

/* One rank, started by pd_dist_spawn with the launcher's environment. */
static int run_rank(int rank, void *arg) {
  const job *j = ((rank_arg *)arg)->j;
  int fd = ((rank_arg *)arg)->fd;
  pd_set_num_threads(j->nprocs == 1 && !j->half ? 2 : 1);
  if (j->nprocs > 1 && !j->no_dp) {
    check(pd_dist_init_parallel_env(&(pd_dist_init_opts){.timeout_s = 120}) != NULL, "init_parallel_env");
  }
  model m = {0};
  build(j, rank, &m);
  int steps = j->model == MODEL_MLP ? 20 : 5;
  time_steps(j, &m, 3, 1, NULL); /* warm up pools and primitives */
  result res;
  res.step = time_steps(j, &m, steps, 5, &res.ph);
  if (rank == 0 && write(fd, &res, sizeof res) != (ssize_t)sizeof res) return 2;
  pd_tensor_release(m.x), pd_tensor_release(m.y);
  pd_optimizer_release(m.opt);
  if (m.net != m.inner) pd_layer_release(m.net);
  pd_layer_release(m.inner);
  if (j->nprocs > 1 && !j->no_dp) pd_dist_destroy_process_group(NULL);
  return 0;
}

/* Runs a job in fresh processes; rank 0's seconds per step and phases. */
static result run_job(const job *j) {
  int p[2];
  if (pipe(p) != 0) {
    perror("bench_dp: pipe");
    exit(1);
  }
  /* the bytes rank 0 writes fit in the pipe: spawn may return first */
  pd_status st = pd_dist_spawn(run_rank, &(rank_arg){j, p[1]}, j->nprocs, NULL);
  close(p[1]);
  result t = {.step = -1};
  if (st != PD_OK || read(p[0], &t, sizeof t) != (ssize_t)sizeof t) t.step = -1;
  close(p[0]);
  if (t.step < 0) {
    fprintf(stderr, "bench_dp: a rank failed: %s\n", pd_last_error());
    exit(1);
  }
  return t;
}

static void print_row(const char *what, result r, const char *tail) {
  printf("  %-42s %8.2f ms/step (forward %6.2f, backward %6.2f, optimizer %6.2f)%s\n", what, r.step * 1e3,
         r.ph.fwd * 1e3, r.ph.bwd * 1e3, r.ph.opt * 1e3, tail);
}

/* (a) and (b) alternate for ROUNDS rounds. Two figures come out: the
 * fastest (b) over the fastest (a), and the median of the per-round ratios.
 * The machine's speed drifts by several percent over the seconds one
 * configuration takes; the two fastest may come from different moments,
 * while each round compares (a) and (b) run back to back, so the median
 * of paired ratios is the figure drift moves least. Both are printed with
 * their verdicts, and every round's ratio as the spread. */
#define ROUNDS 5

static result faster(result x, result y) { return y.step < x.step ? y : x; }

static int cmp_double(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return (a > b) - (a < b);
}

static const char *verdict(double ratio) { return ratio <= 1.1 ? "met" : "NOT met"; }

int main(void) {
  unsetenv("PADDLE_TRAINER_ID");
  unsetenv("PADDLE_TRAINER_ENDPOINTS");
  unsetenv("PADDLE_CURRENT_ENDPOINT");
  const char *names[2] = {
      "MLP 784-1024-1024-10, batch 256, Adam",
      "decoder (hidden 256, 4 heads, inter 688, 2 layers, vocab 1000, seq 128), batch 4, AdamW"};
  for (int mdl = 0; mdl < 2; mdl++) {
    result one = {.step = 1e30}, two = {.step = 1e30};
    double ratios[ROUNDS];
    for (int r = 0; r < ROUNDS; r++) {
      result a = run_job(&(job){.model = mdl, .nprocs = 1});
      result b = run_job(&(job){.model = mdl, .nprocs = 2});
      one = faster(one, a), two = faster(two, b);
      ratios[r] = b.step / a.step;
    }
    result half = run_job(&(job){.model = mdl, .nprocs = 1, .half = true});
    result alone = run_job(&(job){.model = mdl, .nprocs = 2, .no_dp = true});
    result deferred = run_job(&(job){.model = mdl, .nprocs = 2, .defer = true});
    char tail[160];
    printf("%s (global batch; phases are rank 0's):\n", names[mdl]);
    print_row("(a) 1 process  x 2 threads:", one, "");
    print_row("    1 process x 1 thread, half the batch:", half, "");
    snprintf(tail, sizeof tail, " = %.3fx (a)", alone.step / one.step);
    print_row("    2 processes x 1 thread, no DataParallel:", alone, tail);
    snprintf(tail, sizeof tail, " = %.3fx (a) (target <= 1.1: %s)", two.step / one.step,
             verdict(two.step / one.step));
    print_row("(b) 2 processes x 1 thread, DataParallel:", two, tail);
    snprintf(tail, sizeof tail, " = %.3fx (b)", deferred.step / two.step);
    print_row("(c) as (b), all_reduce after backward:", deferred, tail);
    printf("      (b)/(a) in each of %d alternating rounds:", ROUNDS);
    for (int r = 0; r < ROUNDS; r++) printf(" %.3f", ratios[r]);
    qsort(ratios, ROUNDS, sizeof ratios[0], cmp_double);
    printf("; median %.3f (target <= 1.1: %s)\n", ratios[ROUNDS / 2], verdict(ratios[ROUNDS / 2]));
  }
  return 0;
}
