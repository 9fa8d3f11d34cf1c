/* Training step time on a busy machine, against the quiet step measured in
 * the same run.
 *
 * Real users share machines (CI runners, login nodes, a data-loading process
 * beside training, two ranks and their launcher on one host). This bench
 * starts its own competitors, child processes at the same nice level as the
 * bench, and times three steps under four conditions:
 *   quiet     nothing else of ours running, and the thread governor's team
 *             released (it stays parked two calm seconds after the
 *             competitors of the condition before leave);
 *   1 busy    one process spinning on arithmetic;
 *   2 busy    two of them;
 *   mixed     one busy process, one that alternates 4 ms of arithmetic with
 *             3 ms of sleep, and one that alternates 4 ms of streaming over
 *             32 MiB of memory with 3 ms of sleep.
 * The steps: the seed LinearNet (Linear 10-10-1, MSE, Adam, batch 10), the
 * MLP of bench_train (784-1024-1024-10, batch 128, SGD) and the decoder of
 * bench_decoder (seed 003 at hidden 256, 2 layers, seq 128, batch 4, AdamW).
 *
 * Each condition runs for a fixed time after its competitors have started;
 * its figure is the median step time. The conditions alternate over rounds
 * (the machine's own speed drifts within seconds) and the ratio reported is
 * the median over rounds of (condition / quiet of the same round). Last, the
 * share of samples begun while the governor saw contention and the free
 * cores it counted, per step and condition.
 * Targets: MLP and decoder <= 2.0x with one competitor, <= 2.5x with two,
 * <= 3x under the mixed load; LinearNet <= 2x under every load.
 *
 * Usage: bench_contention [rounds] (default 3). The competitors are this
 * program re-executed with --compete KIND; they die with it. */
#define _GNU_SOURCE
#include <paddlec.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/core_claim.h" /* whether the governor kept the threads to a share of the cores */
#include "core/procfs.h"     /* where the competitors run */
#include "decoder_model.h"
#include "kernels/cpu/parallel.h" /* the governor's flags, read to report what it saw */
#include "linear_net.h"
#include "timing.h"

static void check(bool ok, const char *what) {
  if (!ok) {
    fprintf(stderr, "bench_contention: %s: %s\n", what, pd_last_error());
    exit(1);
  }
}

/* ---- competitors --------------------------------------------------------- */

static volatile double g_sink;

static void spin_for(double seconds) {
  double x = 1.0, t0 = bench_now_s();
  while (bench_now_s() - t0 < seconds)
    for (int i = 0; i < 100000; i++) x = x * 1.0000001 + 1e-9;
  g_sink = x;
}

static void stream_for(float *buf, size_t n, double seconds) {
  double t0 = bench_now_s();
  while (bench_now_s() - t0 < seconds)
    for (size_t i = 0; i < n; i++) buf[i] = buf[i] * 0.5f + 1.0f;
  g_sink = buf[n / 2];
}

static void sleep_s(double seconds) {
  struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
  nanosleep(&ts, NULL);
}

static int compete(const char *kind) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() == 1) return 0; /* the bench died before we armed the signal */
  if (strcmp(kind, "busy") == 0) {
    for (;;) spin_for(1.0);
  } else if (strcmp(kind, "bursty") == 0) {
    for (;;) spin_for(0.004), sleep_s(0.003);
  } else if (strcmp(kind, "memory") == 0) {
    size_t n = (size_t)32 << 18; /* 32 MiB of floats */
    float *buf = calloc(n, sizeof *buf);
    if (!buf) return 1;
    for (;;) stream_for(buf, n, 0.004), sleep_s(0.003);
  }
  fprintf(stderr, "bench_contention: unknown competitor '%s'\n", kind);
  return 2;
}

typedef struct condition {
  const char *name;
  int n;
  const char *kinds[3];
} condition;

static const condition CONDITIONS[] = {
    {"quiet", 0, {NULL}},
    {"1 busy", 1, {"busy"}},
    {"2 busy", 2, {"busy", "busy"}},
    {"mixed", 3, {"busy", "bursty", "memory"}},
};
enum { N_COND = sizeof CONDITIONS / sizeof CONDITIONS[0] };

static int start_competitors(const condition *c, pid_t *pids) {
  for (int i = 0; i < c->n; i++) {
    pid_t p = fork();
    if (p < 0) return -1;
    if (p == 0) {
      execl("/proc/self/exe", "bench_contention", "--compete", c->kinds[i], (char *)NULL);
      _exit(127);
    }
    pids[i] = p;
  }
  sleep_s(0.2); /* let them reach their steady state */
  return 0;
}

static void stop_competitors(const condition *c, pid_t *pids) {
  for (int i = 0; i < c->n; i++) kill(pids[i], SIGKILL);
  for (int i = 0; i < c->n; i++) waitpid(pids[i], NULL, 0);
}

/* ---- the steps ---------------------------------------------------------- */

typedef struct workload {
  const char *name;
  pd_layer *model, *loss_fn; /* loss_fn NULL: the model returns the loss */
  pd_optimizer *opt;
  pd_tensor *x, *y;
  int steps_per_sample; /* steps timed together as one sample */
  double seconds;       /* per condition and round */
  double limit[N_COND]; /* target ratio per condition (0 for quiet) */
} workload;

static void one_step(workload *w) {
  pd_scope_begin();
  pd_tensor *loss = NULL;
  if (w->loss_fn) {
    pd_tensor *out = pd_layer_call1(w->model, w->x);
    pd_layer_call(w->loss_fn, (pd_tensor *[]){out, w->y}, 2, &loss, 1);
  } else {
    pd_layer_call(w->model, (pd_tensor *[]){w->x, w->y}, 2, &loss, 1);
  }
  check(loss && pd_backward(loss, NULL, false) == PD_OK && pd_optimizer_step(w->opt) == PD_OK, w->name);
  pd_optimizer_clear_grad(w->opt, true);
  pd_scope_end();
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* What the thread governor saw during a condition's samples: how many
 * samples began with the cores contended, and the free cores it counted. */
typedef struct governor_seen {
  int samples, contended, claimed, holding;
  double free_sum;
  /* with two competitors: steps and samples begun with both on one CPU
   * ([0]) or one on each ([1]) */
  double placed_s[2];
  int placed_n[2];
  /* with a claim in force: steps and samples begun with no competitor on
   * a claimed CPU ([0]) or one or more ([1]) */
  double shared_s[2];
  int shared_n[2];
} governor_seen;

/* The CPU each competitor last ran on, read as a sample begins; false when
 * one is unknown. */
static bool competitor_cpus(const pid_t *pids, int n, int *cpu) {
  for (int i = 0; i < n; i++) {
    char path[48];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pids[i]);
    if ((cpu[i] = pd_proc_cpu_of(path)) < 0) return false;
  }
  return true;
}

/* 0: every competitor on one CPU, 1: not. */
static int competitors_split(const int *cpu, int n) {
  for (int i = 1; i < n; i++)
    if (cpu[i] != cpu[0]) return 1;
  return 0;
}

/* With a claim in force: 1 when a competitor runs on a claimed CPU, 0 when
 * none does; -1 without a claim. */
static int competitor_on_claim(const int *cpu, int n) {
  cpu_set_t claimed;
  if (n == 0 || pd_core_claimed_cpus(&claimed) == 0) return -1;
  for (int i = 0; i < n; i++)
    if (CPU_ISSET(cpu[i], &claimed)) return 1;
  return 0;
}

/* Median step time over `seconds` of samples. */
static double time_condition(workload *w, governor_seen *g, const pid_t *pids, int n_pids) {
  enum { MAX_SAMPLES = 4096 };
  static double samples[MAX_SAMPLES];
  int n = 0;
  one_step(w); /* the first step after the competitors start is not counted */
  double t_end = bench_now_s() + w->seconds;
  while (n < MAX_SAMPLES && (n < 5 || bench_now_s() < t_end)) {
    g->samples++;
    g->contended += atomic_load_explicit(&pd_g_cores_contended, memory_order_relaxed);
    g->claimed += pd_core_claimed();
    bool holding = false;
    pd_core_claim_holders(&holding);
    g->holding += holding;
    int cpu[3];
    bool placed = competitor_cpus(pids, n_pids, cpu);
    int shared = placed ? competitor_on_claim(cpu, n_pids) : -1;
    g->free_sum += atomic_load_explicit(&pd_g_cores_free, memory_order_relaxed);
    int split = placed && n_pids == 2 ? competitors_split(cpu, n_pids) : -1;
    double t0 = bench_now_s();
    for (int s = 0; s < w->steps_per_sample; s++) one_step(w);
    samples[n] = (bench_now_s() - t0) / w->steps_per_sample;
    if (split >= 0) g->placed_s[split] += samples[n], g->placed_n[split]++;
    if (shared >= 0) g->shared_s[shared] += samples[n], g->shared_n[shared]++;
    n++;
  }
  return median(samples, n);
}

static pd_optimizer *make_opt(pd_layer *net, int kind, double lr) {
  pd_named_tensors ps;
  check(pd_layer_parameters(net, &ps) == PD_OK, "parameters");
  pd_optimizer *o = kind == 0   ? pd_optimizer_sgd(lr, ps.tensors, ps.n, NULL)
                    : kind == 1 ? pd_optimizer_adam(lr, ps.tensors, ps.n, NULL)
                                : pd_optimizer_adam_w(lr, ps.tensors, ps.n, NULL);
  pd_named_tensors_free(&ps);
  check(o != NULL, "optimizer");
  return o;
}

typedef struct mlp {
  pd_layer base;
  pd_layer *l1, *l2, *l3;
} mlp;

static int mlp_forward(pd_layer *self, pd_tensor *const *in, int n_in, pd_tensor **out, int max_out) {
  (void)n_in, (void)max_out;
  mlp *m = (mlp *)self;
  pd_tensor *h = pd_relu(pd_layer_call1(m->l1, in[0]));
  h = pd_relu(pd_layer_call1(m->l2, h));
  out[0] = pd_layer_call1(m->l3, h);
  return out[0] ? 1 : pd_last_status();
}
static const pd_layer_type mlp_type = {.name = "MLP", .forward = mlp_forward};

static pd_layer *mlp_new(void) {
  mlp *m = pd_layer_new(sizeof *m, &mlp_type);
  m->l1 = pd_layer_add_sublayer(&m->base, "l1", pd_nn_linear(784, 1024, NULL));
  m->l2 = pd_layer_add_sublayer(&m->base, "l2", pd_nn_linear(1024, 1024, NULL));
  m->l3 = pd_layer_add_sublayer(&m->base, "l3", pd_nn_linear(1024, 10, NULL));
  return &m->base;
}

static void workload_free(workload *w) {
  pd_tensor_release(w->x), pd_tensor_release(w->y);
  pd_optimizer_release(w->opt);
  pd_layer_release(w->model);
  if (w->loss_fn) pd_layer_release(w->loss_fn);
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "--compete") == 0) return compete(argv[2]);
  int rounds = argc > 1 ? atoi(argv[1]) : 3;
  if (rounds < 1 || rounds > 50) {
    fprintf(stderr, "usage: bench_contention [rounds 1..50]\n");
    return 2;
  }
  printf("threads: %d; competitors run at this process's nice level; %d rounds\n", pd_get_num_threads(),
         rounds);
  const char *policy = getenv("PADDLEC_WAIT_POLICY");
  printf("PADDLEC_WAIT_POLICY=%s OMP_WAIT_POLICY=%s GOMP_SPINCOUNT=%s\n\n", policy ? policy : "(unset)",
         getenv("OMP_WAIT_POLICY") ? getenv("OMP_WAIT_POLICY") : "(unset)",
         getenv("GOMP_SPINCOUNT") ? getenv("GOMP_SPINCOUNT") : "(unset)");
  pd_seed(1);

  workload ws[3] = {0};
  ws[0] = (workload){.name = "LinearNet",
                     .model = linear_net_new(),
                     .loss_fn = pd_nn_mse_loss(NULL),
                     .x = pd_randn(2, (int64_t[]){10, 10}, PD_FLOAT32),
                     .y = pd_randn(2, (int64_t[]){10, 1}, PD_FLOAT32),
                     .steps_per_sample = 200,
                     .seconds = 0.6,
                     .limit = {0, 2.0, 2.0, 2.0}};
  ws[0].opt = make_opt(ws[0].model, 1, 1e-3);
  ws[1] = (workload){.name = "MLP",
                     .model = mlp_new(),
                     .loss_fn = pd_nn_cross_entropy_loss(NULL),
                     .x = pd_randn(2, (int64_t[]){128, 784}, PD_FLOAT32),
                     .y = pd_randint(0, 10, 2, (int64_t[]){128, 1}, PD_INT64),
                     .steps_per_sample = 1,
                     .seconds = 1.0,
                     .limit = {0, 2.0, 2.5, 3.0}};
  ws[1].opt = make_opt(ws[1].model, 0, 0.01);
  const decoder_config cfg = {.vocab_size = 1000,
                              .hidden_size = 256,
                              .num_heads = 4,
                              .intermediate_size = 688,
                              .num_layers = 2,
                              .max_seq_len = 128};
  ws[2] = (workload){.name = "decoder",
                     .model = decoder_model_new(&cfg),
                     .x = pd_randint(0, cfg.vocab_size, 2, (int64_t[]){4, 128}, PD_INT64),
                     .y = pd_randint(0, cfg.vocab_size, 2, (int64_t[]){4, 128}, PD_INT64),
                     .steps_per_sample = 1,
                     .seconds = 1.5,
                     .limit = {0, 2.0, 2.5, 3.0}};
  check(ws[2].model != NULL, "decoder");
  ws[2].opt = make_opt(ws[2].model, 2, 1e-4);
  for (int k = 0; k < 3; k++) {
    check(ws[k].model && ws[k].x && ws[k].y, ws[k].name);
    for (int s = 0; s < 3; s++) one_step(&ws[k]); /* warm up pools and primitives */
  }

  /* t[k][c][r]: median step time of workload k under condition c in round r */
  double t[3][N_COND][50];
  governor_seen seen[3][N_COND] = {0};
  for (int r = 0; r < rounds; r++) {
    for (int c = 0; c < N_COND; c++) {
      /* the quiet reference waits until the governor has released the team
       * (it stays parked for two calm seconds after the competitors are gone
       * from the free-core count: up to about 2.5 s; waits up to 6 s) */
      for (int i = 0; c == 0 && i < 120 && atomic_load(&pd_g_cores_contended); i++) sleep_s(0.05);
      pid_t pids[3];
      check(start_competitors(&CONDITIONS[c], pids) == 0, "fork");
      for (int k = 0; k < 3; k++) t[k][c][r] = time_condition(&ws[k], &seen[k][c], pids, CONDITIONS[c].n);
      stop_competitors(&CONDITIONS[c], pids);
      sleep_s(0.1);
    }
  }

  int missed = 0;
  printf("%-10s %-8s %12s %10s %-24s %s\n", "step", "load", "median", "ratio", "per round", "target");
  for (int k = 0; k < 3; k++) {
    for (int c = 0; c < N_COND; c++) {
      double ratios[50], times[50];
      char per[128] = "";
      size_t len = 0;
      for (int r = 0; r < rounds; r++) {
        ratios[r] = t[k][c][r] / t[k][0][r];
        times[r] = t[k][c][r];
        if (len < sizeof per - 8)
          len += (size_t)snprintf(per + len, sizeof per - len, "%s%.2f", r ? " " : "", ratios[r]);
      }
      double ratio = median(ratios, rounds), tm = median(times, rounds);
      const char *unit = tm < 1e-3 ? "us" : "ms";
      double shown = tm < 1e-3 ? tm * 1e6 : tm * 1e3;
      if (c == 0) {
        printf("%-10s %-8s %9.2f %s %10s %-24s\n", ws[k].name, CONDITIONS[c].name, shown, unit, "1.00", "");
        continue;
      }
      bool ok = ratio <= ws[k].limit[c];
      missed += !ok;
      printf("%-10s %-8s %9.2f %s %9.2fx %-24s <= %.1fx: %s\n", ws[k].name, CONDITIONS[c].name, shown, unit,
             ratio, per, ws[k].limit[c], ok ? "met" : "NOT met");
    }
  }
  printf("\n%s\n", missed ? "some targets NOT met" : "every target met");
  printf(
      "\ngovernor (all rounds): samples begun with the cores contended, mean free cores it counted,\n"
      "samples begun with a share of the cores claimed, of them with its holders running\n");
  for (int k = 0; k < 3; k++) {
    printf("%-10s", ws[k].name);
    for (int c = 0; c < N_COND; c++) {
      const governor_seen *g = &seen[k][c];
      int n = g->samples > 0 ? g->samples : 1;
      printf("  %s %3.0f%% %.2f %3.0f%% %3.0f%%", CONDITIONS[c].name, 100.0 * g->contended / n,
             g->free_sum / n, 100.0 * g->claimed / n, g->claimed ? 100.0 * g->holding / g->claimed : 0.0);
    }
    printf("\n");
  }
  printf(
      "\nunder two busy processes (all rounds), by where they ran as a sample began: mean step with both\n"
      "on one CPU / with one on each CPU (share of samples)\n");
  int two = 0; /* the condition with two competitors */
  while (CONDITIONS[two].n != 2) two++;
  for (int k = 1; k < 3; k++) {
    const governor_seen *g = &seen[k][two];
    int n = g->placed_n[0] + g->placed_n[1] > 0 ? g->placed_n[0] + g->placed_n[1] : 1;
    printf("%-10s", ws[k].name);
    for (int p = 0; p < 2; p++)
      printf("  %s %.2f ms (%3.0f%%)", p ? "split" : "together",
             g->placed_n[p] ? 1e3 * g->placed_s[p] / g->placed_n[p] : 0.0, 100.0 * g->placed_n[p] / n);
    printf("\n");
  }
  printf(
      "\nwith a claim in force, by whether a competitor ran on a claimed CPU as a sample began: mean step\n"
      "with none there / with one there (share of the claimed samples; under one busy process the team\n"
      "is spread, and its claimed CPU is the helper's, where the competitor belongs)\n");
  for (int k = 1; k < 3; k++)
    for (int c = 0; c < N_COND; c++) {
      const governor_seen *g = &seen[k][c];
      int n = g->shared_n[0] + g->shared_n[1];
      if (n == 0) continue;
      printf("%-10s %-8s", ws[k].name, CONDITIONS[c].name);
      for (int p = 0; p < 2; p++)
        printf("  %s %.2f ms (%3.0f%%)", p ? "shared" : "apart",
               g->shared_n[p] ? 1e3 * g->shared_s[p] / g->shared_n[p] : 0.0, 100.0 * g->shared_n[p] / n);
      printf("\n");
    }
  for (int k = 0; k < 3; k++) workload_free(&ws[k]);
  return 0;
}
