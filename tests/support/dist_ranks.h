/* Multi-process tests: fork ranks with the launcher's environment. */
#ifndef PADDLEC_TEST_DIST_RANKS_H
#define PADDLEC_TEST_DIST_RANKS_H

#include <stdbool.h>

/* The code of every rank of a job of n ranks run under mpirun with another
 * number of processes (see dist_run_ranks). */
enum { DIST_SKIPPED = 77 };

/* Whether this process is one rank of a job started by mpirun. */
bool dist_under_mpirun(void);

/* A free TCP port on 127.0.0.1 (for PADDLE_MASTER). */
int dist_free_port(void);

/* Forks n ranks with PADDLE_MASTER, PADDLE_TRAINERS_NUM and
 * PADDLE_TRAINER_ID set; each joins the parallel environment (timeout
 * timeout_s), runs fn(rank, arg) inside a scope, leaves it and exits with
 * fn's status (90 when it could not join). A job still running after
 * kill_after_s seconds is killed. codes[r] receives each exit status
 * (128 + signal when killed); returns 0 when all are 0.
 * Under mpirun (the test binary started as one rank of a job, the backend
 * from PADDLEC_COMM_BACKEND) nothing is forked: this process runs fn for
 * its own rank when the job has n processes, codes[] holding its status
 * (the others' 0); with another number of processes every code is
 * DIST_SKIPPED and 0 is returned. */
int dist_run_ranks(int n, int (*fn)(int rank, void *arg), void *arg, double timeout_s, double kill_after_s,
                   int *codes);

/* dist_run_ranks of fn(rank) (timeout 20 s to join): the first rank whose
 * status is neither 0 nor DIST_SKIPPED, or -1; codes[r] as above. */
int dist_run_rank_fn(int n, int (*fn)(int rank), double kill_after_s, int *codes);

/* dist_run_rank_fn for a cmocka test: fails it naming the first rank whose
 * status is not 0; skips it under mpirun with another number of ranks. */
void dist_run_ranks_or_fail(int n, int (*fn)(int rank), double kill_after_s);

/* In a rank's function (with `rank` in scope): unless cond holds, prints
 * the condition and the last error naming the rank, and returns code. */
#define DIST_CHECK(cond, code)                                                    \
  do {                                                                            \
    if (!(cond)) {                                                                \
      fprintf(stderr, "rank %d: %s failed (%s)\n", rank, #cond, pd_last_error()); \
      return code;                                                                \
    }                                                                             \
  } while (0)

#endif
