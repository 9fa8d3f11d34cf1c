#define _GNU_SOURCE
#include "dist_ranks.h"

#include "test_util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "paddlec.h"

int dist_free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t l = sizeof a;
  if (fd < 0) return 0;
  if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || getsockname(fd, (struct sockaddr *)&a, &l) < 0) {
    close(fd);
    return 0;
  }
  close(fd);
  return ntohs(a.sin_port);
}

/* Under mpirun this process is one rank of the job: it runs fn for its own
 * rank when the job has n ranks (the others' codes are left 0: each rank
 * reports its own failure), and marks all n DIST_SKIPPED otherwise. */
static int run_under_mpirun(int n, int (*fn)(int rank, void *arg), void *arg, double timeout_s, int *codes) {
  int size = atoi(getenv("OMPI_COMM_WORLD_SIZE")), rank = atoi(getenv("OMPI_COMM_WORLD_RANK"));
  for (int r = 0; r < n; r++) codes[r] = size == n ? 0 : DIST_SKIPPED;
  if (size != n || rank < 0 || rank >= n) return size != n ? 0 : 1;
  int rc = 90;
  const char *want = getenv("PADDLEC_COMM_BACKEND");
  pd_dist_group *world = pd_dist_init_parallel_env(&(pd_dist_init_opts){.timeout_s = timeout_s});
  if (world && want && *want && strcmp(pd_dist_group_backend(world), want) != 0) {
    fprintf(stderr, "rank %d: the job runs on the %s backend, not %s\n", rank, pd_dist_group_backend(world),
            want);
    rc = 91;
  } else if (world) {
    pd_scope_begin();
    rc = fn(rank, arg);
    pd_scope_end();
  } else {
    fprintf(stderr, "rank %d: %s\n", rank, pd_last_error());
  }
  if (world) pd_dist_destroy_process_group(NULL);
  codes[rank] = rc;
  return rc != 0;
}

bool dist_under_mpirun(void) { return getenv("OMPI_COMM_WORLD_SIZE") != NULL; }

int dist_run_ranks(int n, int (*fn)(int rank, void *arg), void *arg, double timeout_s, double kill_after_s,
                   int *codes) {
  if (dist_under_mpirun()) return run_under_mpirun(n, fn, arg, timeout_s, codes);
  char m[64], nbuf[16];
  snprintf(m, sizeof m, "127.0.0.1:%d", dist_free_port());
  snprintf(nbuf, sizeof nbuf, "%d", n);
  setenv("PADDLE_MASTER", m, 1);
  setenv("PADDLE_TRAINERS_NUM", nbuf, 1);
  pid_t *pids = calloc((size_t)n, sizeof *pids);
  for (int r = 0; r < n; r++) {
    codes[r] = -1;
    pids[r] = fork();
    if (pids[r] == 0) {
      /* a rank that crashes dies (cmocka's handlers would go on with the
       * parent's next test in the child) */
      const int crash[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
      for (size_t k = 0; k < sizeof crash / sizeof *crash; k++) signal(crash[k], SIG_DFL);
      char buf[16];
      snprintf(buf, sizeof buf, "%d", r);
      setenv("PADDLE_TRAINER_ID", buf, 1);
      int rc = 90;
      if (pd_dist_init_parallel_env(&(pd_dist_init_opts){.timeout_s = timeout_s})) {
        pd_scope_begin();
        rc = fn(r, arg);
        pd_scope_end();
        pd_dist_destroy_process_group(NULL);
      }
      exit(rc);
    }
  }
  /* never hang: a job still running after kill_after_s is killed */
  int left = n;
  for (long t = 0; t < (long)(kill_after_s * 100) && left; t++) {
    for (int r = 0; r < n; r++) {
      int st;
      if (codes[r] == -1 && waitpid(pids[r], &st, WNOHANG) == pids[r]) {
        codes[r] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        left--;
      }
    }
    if (left) nanosleep(&(struct timespec){0, 10000000}, NULL);
  }
  int bad = 0;
  for (int r = 0; r < n; r++) {
    if (codes[r] == -1) {
      kill(pids[r], SIGKILL);
      waitpid(pids[r], NULL, 0);
      codes[r] = 128 + SIGKILL;
    }
    if (codes[r] != 0) bad = 1;
  }
  free(pids);
  unsetenv("PADDLE_MASTER");
  unsetenv("PADDLE_TRAINERS_NUM");
  unsetenv("PADDLE_TRAINER_ID");
  return bad;
}

static int call_rank_fn(int rank, void *fn) { return ((int (*)(int))fn)(rank); }

int dist_run_rank_fn(int n, int (*fn)(int rank), double kill_after_s, int *codes) {
  dist_run_ranks(n, call_rank_fn, (void *)fn, 20, kill_after_s, codes);
  for (int r = 0; r < n; r++)
    if (codes[r] != 0 && codes[r] != DIST_SKIPPED) return r;
  return -1;
}

void dist_run_ranks_or_fail(int n, int (*fn)(int rank), double kill_after_s) {
  int codes[64], r = n <= 64 ? dist_run_rank_fn(n, fn, kill_after_s, codes) : -2;
  if (r == -2) fail_msg("%d ranks (at most 64)", n);
  if (r >= 0) fail_msg("rank %d exited with %d", r, codes[r]);
  if (r == -1 && codes[0] == DIST_SKIPPED) skip(); /* under mpirun with another number of ranks */
}
