/* all_reduce bus bandwidth, shm against mpi in the same processes, beside
 * the memory-traffic bound measured in the same run.
 *
 *   mpirun --allow-run-as-root -np N build/bench/bench_allreduce   (shm and mpi)
 *   build/bench/bench_allreduce N                                  (shm only: spawns N ranks)
 *
 * Bus bandwidth = 2(n-1)/n * bytes / time (the NCCL convention).
 * Memory-traffic bound: an all_reduce of B bytes on private buffers must at
 * least read every rank's input and write every rank's output from and to
 * memory, 2B per rank, 2nB in all; the bound is that over the aggregate
 * copy bandwidth of n ranks copying at once (bytes read + written per
 * second, measured here). Staging traffic of the shm algorithm (copy in,
 * reduce a slice, gather) stays in cache for payloads split in chunks, so
 * it is not counted. The zero-copy column uses pd_dist_alloc_shared
 * tensors, which need no copy in or out. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "paddlec.h"
#include "paddlec/distributed.h"
#include "timing.h"

static int g_rank, g_n;

/* Median-free simple timing: warm up, then the mean of enough repetitions
 * to last ~0.3 s; every rank reports the max over ranks (via all_reduce MAX
 * on the world, outside the timed region). */
static double time_allreduce(pd_tensor *t, pd_dist_group *g) {
  pd_dist_opts o = {.group = g};
  for (int i = 0; i < 3; i++) pd_dist_all_reduce(t, PD_REDUCE_SUM, &o);
  int reps = 1;
  double dt = 0;
  for (;;) {
    pd_dist_barrier(g);
    double t0 = bench_now_s();
    for (int i = 0; i < reps; i++) pd_dist_all_reduce(t, PD_REDUCE_SUM, &o);
    dt = bench_now_s() - t0;
    /* agree on the repetition count across ranks */
    double v[1] = {dt};
    pd_tensor *m = pd_to_tensor(v, PD_FLOAT64, 1, (int64_t[]){1});
    pd_dist_all_reduce(m, PD_REDUCE_MAX, &o);
    dt = pd_tensor_item(m);
    pd_tensor_release(m);
    if (dt > 0.3 || reps >= 1 << 20) break;
    reps *= dt < 0.01 ? 16 : 2;
  }
  return dt / reps;
}

/* Aggregate copy bandwidth: every rank copies `bytes` at once. */
static double copy_bandwidth(size_t bytes, pd_dist_group *g) {
  char *a = malloc(bytes), *b = malloc(bytes);
  memset(a, 1, bytes);
  memset(b, 2, bytes);
  double best = 1e30;
  for (int rep = 0; rep < 5; rep++) {
    pd_dist_barrier(g);
    double t0 = bench_now_s();
    memcpy(b, a, bytes);
    double dt = bench_now_s() - t0;
    double v[1] = {dt};
    pd_tensor *m = pd_to_tensor(v, PD_FLOAT64, 1, (int64_t[]){1});
    pd_dist_all_reduce(m, PD_REDUCE_MAX, &(pd_dist_opts){.group = g});
    dt = pd_tensor_item(m);
    pd_tensor_release(m);
    if (dt < best) best = dt;
  }
  free(a);
  free(b);
  return 2.0 * (double)bytes * g_n / best; /* read + write, all ranks */
}

static void run(int have_mpi) {
  pd_dist_group *world = pd_dist_init_parallel_env(NULL);
  if (!world) {
    fprintf(stderr, "init: %s\n", pd_last_error());
    exit(1);
  }
  pd_dist_group *shm = world;
  if (have_mpi) {
    shm = pd_dist_new_group(NULL, 0, &(pd_dist_new_group_opts){.backend = "shm"});
    if (!shm) {
      fprintf(stderr, "shm group: %s\n", pd_last_error());
      exit(1);
    }
  }
  double bw = copy_bandwidth(64u << 20, shm);
  static const size_t sizes[] = {8, 4096, 1u << 20, 16u << 20, 64u << 20};
  if (g_rank == 0) {
    printf(
        "all_reduce float32 SUM, %d processes; aggregate copy bandwidth %.1f GB/s (read+write, %d ranks at "
        "once)\n",
        g_n, bw / 1e9, g_n);
    printf("%10s %12s %12s %12s %10s %12s %12s %9s\n", "bytes", "shm us", "shm GB/s", "shm-zc GB/s",
           have_mpi ? "mpi us" : "", have_mpi ? "mpi GB/s" : "", "bound GB/s", "shm/bound");
  }
  for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
    size_t bytes = sizes[k];
    int64_t n = (int64_t)(bytes / 4 ? bytes / 4 : 1);
    pd_tensor *t = pd_ones(1, (int64_t[]){n}, PD_FLOAT32);
    pd_tensor *z = pd_dist_alloc_shared(shm, PD_FLOAT32, 1, (int64_t[]){n});
    double ts = time_allreduce(t, shm), tz = time_allreduce(z, shm);
    double tm = have_mpi ? time_allreduce(t, world) : 0;
    double f = 2.0 * (g_n - 1) / g_n * (double)bytes;
    double bound_t = 2.0 * g_n * (double)bytes / bw; /* read input + write output, every rank */
    double bound_bus = f / bound_t;
    if (g_rank == 0) {
      printf("%10zu %12.2f %12.2f %12.2f", bytes, ts * 1e6, f / ts / 1e9, f / tz / 1e9);
      if (have_mpi)
        printf(" %10.2f %12.2f", tm * 1e6, f / tm / 1e9);
      else
        printf(" %10s %12s", "", "");
      printf(" %12.2f %8.0f%%", bound_bus / 1e9, 100.0 * bound_t / ts);
      if (have_mpi) printf("   shm/mpi %.2fx", tm / ts);
      printf("\n");
    }
    pd_tensor_release(t);
    pd_tensor_release(z);
  }
  pd_dist_destroy_process_group(NULL);
}

static int spawned_rank(int rank, void *arg) {
  (void)arg;
  g_rank = rank;
  run(0);
  return 0;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (getenv("OMPI_COMM_WORLD_SIZE")) {
    g_rank = atoi(getenv("OMPI_COMM_WORLD_RANK"));
    g_n = atoi(getenv("OMPI_COMM_WORLD_SIZE"));
    if (!pd_dist_backend_available("mpi")) {
      fprintf(stderr, "this build has no mpi backend\n");
      return 1;
    }
    setenv("PADDLEC_COMM_BACKEND", "mpi", 1);
    run(1);
    return 0;
  }
  g_n = argc > 1 ? atoi(argv[1]) : 2;
  setenv("OMP_NUM_THREADS", "1", 1);
  if (pd_dist_spawn(spawned_rank, NULL, g_n, NULL) != PD_OK) {
    fprintf(stderr, "%s\n", pd_last_error());
    return 1;
  }
  return 0;
}
