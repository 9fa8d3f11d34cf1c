/* pd_dist_spawn: paddle.distributed.spawn over fork(). The children get the
 * launcher's environment contract (one node, free local ports) and run
 * fn(rank, arg); the parent watches them and, when one fails, terminates
 * the others so a job never hangs on a dead peer. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "launch_env.h"
#include "paddlec/distributed.h"

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* The child: environment contract, then fn; never returns. */
static void run_child(const pd_launch_job *job, int rank, int (*fn)(int, void *), void *arg) {
  pd_launch_env env;
  pd_launch_env_init(&env);
  pd_status st = pd_launch_env_build(job, rank, &env);
  if (st == PD_OK) st = pd_launch_env_apply(&env);
  pd_launch_env_clear(&env);
  if (st != PD_OK) {
    fprintf(stderr, "spawn: rank %d: %s\n", rank, pd_last_error());
    fflush(stderr);
    _exit(1);
  }
  /* the OpenMP runtime read OMP_NUM_THREADS when the parent loaded it;
   * pd_set_num_threads keeps one thread where the parent had a team */
  if (job->omp_threads > 0) pd_set_num_threads(job->omp_threads);
  int rc = fn(rank, arg);
  fflush(NULL);
  _exit(rc == 0 ? 0 : (rc & 0xff) ? (rc & 0xff) : 1);
}

/* SIGTERM to the live children, SIGKILL to those still alive after 3 s;
 * every child is reaped. */
static void stop_children(pid_t *pids, int n) {
  for (int i = 0; i < n; i++)
    if (pids[i] > 0) kill(pids[i], SIGTERM);
  for (int waited = 0;; waited += 10) {
    int live = 0;
    for (int i = 0; i < n; i++) {
      if (pids[i] <= 0) continue;
      int status;
      pid_t r = waitpid(pids[i], &status, WNOHANG);
      if (r == pids[i] || (r < 0 && errno == ECHILD))
        pids[i] = 0;
      else
        live++;
    }
    if (!live) return;
    if (waited >= 3000) break;
    sleep_ms(10);
  }
  for (int i = 0; i < n; i++)
    if (pids[i] > 0) {
      kill(pids[i], SIGKILL);
      waitpid(pids[i], NULL, 0);
      pids[i] = 0;
    }
}

pd_status pd_dist_spawn(int (*fn)(int rank, void *arg), void *arg, int nprocs,
                        const pd_dist_spawn_opts *opts) {
  if (!fn) return pd_set_error(PD_ERR_INVALID, "spawn: fn is NULL");
  if (nprocs <= 0) {
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    nprocs = ncpu > 0 ? (int)ncpu : 1;
  }
  if (nprocs > 4096) return pd_set_error(PD_ERR_INVALID, "spawn: nprocs %d is more than 4096", nprocs);

  char ip[] = "127.0.0.1";
  char *ips[] = {ip};
  char **endpoints = NULL;
  pd_status st = pd_launch_endpoints(ips, 1, nprocs, 0, &endpoints);
  if (st != PD_OK) return st;
  char key[128];
  pd_launch_make_job_key("spawn", key, sizeof key);
  pd_launch_job job = {.nnodes = 1,
                       .node_rank = 0,
                       .nproc_per_node = nprocs,
                       .endpoints = endpoints,
                       .job_id = "default",
                       .job_key = key,
                       .comm_backend = opts && opts->backend ? opts->backend : NULL,
                       .omp_threads = pd_launch_default_omp_threads(nprocs)};
  pid_t *pids = calloc((size_t)nprocs, sizeof *pids);
  if (!pids) {
    pd_launch_strv_free(endpoints, nprocs);
    return pd_set_error(PD_ERR_MEMORY, "spawn: out of memory for %d processes", nprocs);
  }

  fflush(NULL); /* or the children would flush the parent's buffered output again */
  int failed = -1, fail_status = 0;
  pid_t parent = getpid();
  for (int r = 0; r < nprocs; r++) {
    pid_t pid = fork();
    if (pid == 0) {
      /* a parent killed with SIGKILL must not leave its children running;
       * SIGKILL, as they are copies of the parent and keep its handlers */
      if (pd_launch_die_with_parent(parent, SIGKILL) < 0) _exit(1);
      run_child(&job, r, fn, arg);
    }
    if (pid < 0) {
      st =
          pd_set_error(PD_ERR_COMM, "spawn: fork of process %d of %d failed: %s", r, nprocs, strerror(errno));
      break;
    }
    pids[r] = pid;
  }

  /* watch: the first child to fail stops the job */
  int live = 0;
  for (int r = 0; r < nprocs; r++) live += pids[r] > 0;
  while (st == PD_OK && live > 0 && failed < 0) {
    int progressed = 0;
    for (int r = 0; r < nprocs && failed < 0; r++) {
      if (pids[r] <= 0) continue;
      int status;
      pid_t w = waitpid(pids[r], &status, WNOHANG);
      if (w == 0) continue;
      progressed = 1;
      pids[r] = 0;
      live--;
      if (w < 0) {
        st = pd_set_error(PD_ERR_COMM, "spawn: waiting for process %d failed: %s", r, strerror(errno));
      } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        failed = r;
        fail_status = status;
      }
    }
    if (!progressed) sleep_ms(5);
  }
  stop_children(pids, nprocs);
  if (st == PD_OK && failed >= 0) {
    if (WIFSIGNALED(fail_status)) {
      char name[32];
      st = pd_set_error(PD_ERR_COMM, "Process %d terminated with signal %s.", failed,
                        pd_launch_signal_name(WTERMSIG(fail_status), name, sizeof name));
    } else {
      st = pd_set_error(PD_ERR_COMM, "Process %d terminated with exit code %d.", failed,
                        WEXITSTATUS(fail_status));
    }
  }
  pd_launch_remove_shm(key);
  free(pids);
  pd_launch_strv_free(endpoints, nprocs);
  return st;
}
