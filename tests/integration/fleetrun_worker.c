/* A tiny program for the fleetrun tests: prints its environment contract
 * and seed 002's "step:i<TAB>loss:[x]" lines; env switches make it fail or
 * hang so the launcher's watch loop can be tested.
 *   FR_PID_DIR=d      write the pid to d/pid.<rank>
 *   FR_FAIL_RANK=r    rank r exits 3 after 0.3 s; the others sleep 30 s
 *   FR_FAIL_ONCE=f    rank 1 exits 1 when the file f is absent (creating it)
 *   FR_SLEEP=1        every rank sleeps 30 s
 *   FR_SHM=1          creates /dev/shm/paddlec-$PADDLEC_JOB_KEY-test (left behind)
 *   FR_ALL_REDUCE=1   joins the parallel environment and all-reduces rank + 1
 *   FR_KILL_WAIT=r    with FR_ALL_REDUCE: rank r writes its pid, then waits (to
 *                     be killed) while the others sit in a second all_reduce
 *   FR_LOOP=1         with FR_ALL_REDUCE: all-reduces forever (prints "looping")
 *   FR_GRANDCHILD=1   forks a child that sleeps (its pid in d/pid.<rank>.child)
 *   FR_IGNORE_TERM=r  rank r (and the child it forks) ignores SIGTERM
 * Parameter servers (TRAINING_ROLE=PSERVER) serve until stopped. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "paddlec.h"
#include "paddlec/distributed.h"

static const char *env(const char *k) {
  const char *v = getenv(k);
  return v ? v : "(unset)";
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0); /* the console streams workerlog.0 line by line */
  const char *id = getenv("PADDLE_TRAINER_ID");
  int rank = id ? atoi(id) : 0;
  static const char *const keys[] = {"PADDLE_TRAINER_ID",
                                     "PADDLE_TRAINERS_NUM",
                                     "PADDLE_TRAINER_ENDPOINTS",
                                     "PADDLE_CURRENT_ENDPOINT",
                                     "PADDLE_MASTER",
                                     "PADDLE_RANK_IN_NODE",
                                     "PADDLE_LOCAL_SIZE",
                                     "PADDLE_NNODES",
                                     "PADDLE_GLOBAL_RANK",
                                     "PADDLE_LOCAL_RANK",
                                     "PADDLE_GLOBAL_SIZE",
                                     "PADDLE_JOB_ID",
                                     "FLAGS_selected_gpus",
                                     "PADDLE_LOCAL_DEVICE_IDS",
                                     "PADDLE_WORLD_DEVICE_IDS",
                                     "OMP_NUM_THREADS",
                                     "PADDLEC_JOB_KEY",
                                     "TRAINING_ROLE",
                                     "PADDLE_PSERVERS_IP_PORT_LIST",
                                     "PADDLE_PORT",
                                     "POD_IP",
                                     "OMPI_COMM_WORLD_RANK"};
  for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) printf("env %s=%s\n", keys[i], env(keys[i]));
  if (getenv("FR_PID_DIR")) {
    char path[4096];
    snprintf(path, sizeof path, "%s/pid.%s%d", getenv("FR_PID_DIR"),
             strcmp(env("TRAINING_ROLE"), "PSERVER") == 0 ? "server." : "", rank);
    FILE *f = fopen(path, "w");
    if (f) fprintf(f, "%ld\n", (long)getpid()), fclose(f);
  }
  if (getenv("FR_IGNORE_TERM") && atoi(getenv("FR_IGNORE_TERM")) == rank) signal(SIGTERM, SIG_IGN);
  if (getenv("FR_GRANDCHILD") && getenv("FR_PID_DIR")) {
    fflush(NULL);
    pid_t child = fork();
    if (child == 0) {
      for (;;) pause();
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/pid.%d.child", getenv("FR_PID_DIR"), rank);
    FILE *f = fopen(path, "w");
    if (f) fprintf(f, "%ld\n", (long)child), fclose(f);
  }
  if (getenv("FR_SHM") && getenv("PADDLEC_JOB_KEY")) {
    char path[512];
    snprintf(path, sizeof path, "/dev/shm/paddlec-%s-test%d", getenv("PADDLEC_JOB_KEY"), rank);
    int fd = open(path, O_CREAT | O_WRONLY, 0600);
    if (fd >= 0) close(fd);
  }
  if (strcmp(env("TRAINING_ROLE"), "PSERVER") == 0) {
    printf("server serving on %s\n", env("PADDLE_PORT"));
    sleep(30);
    return 0;
  }
  if (getenv("FR_SLEEP")) sleep(30);
  if (getenv("FR_FAIL_RANK")) {
    if (rank == atoi(getenv("FR_FAIL_RANK"))) {
      usleep(300000);
      fprintf(stderr, "rank %d: failing on purpose\n", rank);
      return 3;
    }
    sleep(30);
  }
  if (getenv("FR_FAIL_ONCE") && rank == 1 && access(getenv("FR_FAIL_ONCE"), F_OK) != 0) {
    FILE *f = fopen(getenv("FR_FAIL_ONCE"), "w");
    if (f) fclose(f);
    fprintf(stderr, "rank 1: failing the first time\n");
    return 1;
  }

  if (getenv("FR_ALL_REDUCE")) {
    /* every rank contributes rank + 1: the sum must be n(n+1)/2 everywhere */
    pd_dist_group *world = pd_dist_init_parallel_env(NULL);
    if (!world) {
      fprintf(stderr, "init_parallel_env: %s\n", pd_last_error());
      return 1;
    }
    int n = pd_dist_get_world_size(NULL);
    pd_tensor *t = pd_full(1, (const int64_t[]){4}, (double)(rank + 1), PD_FLOAT32);
    if (!t || pd_dist_all_reduce(t, PD_REDUCE_SUM, NULL) != PD_OK) {
      fprintf(stderr, "all_reduce: %s\n", pd_last_error());
      return 1;
    }
    printf("all_reduce sum=%g expected=%d backend=%s\n", pd_tensor_item_at(t, 0), n * (n + 1) / 2,
           pd_dist_group_backend(world));
    if (getenv("FR_LOOP")) {
      printf("rank %d looping\n", rank);
      for (;;) {
        if (pd_dist_all_reduce(t, PD_REDUCE_SUM, NULL) != PD_OK) {
          fprintf(stderr, "all_reduce: %s\n", pd_last_error());
          return 1;
        }
        usleep(10000);
      }
    }
    const char *kw = getenv("FR_KILL_WAIT");
    if (kw) {
      if (atoi(kw) == rank) {
        printf("rank %d waits to be killed\n", rank);
        for (;;) pause();
      }
      /* the victim never joins: this fails once it is killed (or the
       * launcher stops this rank first) */
      if (pd_dist_all_reduce(t, PD_REDUCE_SUM, NULL) != PD_OK) {
        fprintf(stderr, "all_reduce: %s\n", pd_last_error());
        return 1;
      }
    }
    pd_tensor_release(t);
    pd_dist_destroy_process_group(NULL);
  }

  for (int i = 0; i < 3; i++) printf("step:%d\tloss:[%.7g]\n", i, 1.5 / (i + 1) + rank);
  return 0;
}
