/* fleetrun: paddle.distributed.launch / fleetrun for C programs.
 *
 *   fleetrun --nproc_per_node=2 ./train --epochs 3
 *
 * See docs/fleetrun.md. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "fleetrun.h"

static void on_signal(int sig) {
  if (!fr_stop_signal) fr_stop_signal = sig;
}

int main(int argc, char **argv) {
  /* no SA_RESTART: the watch loop's sleeps end at once */
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGHUP, &sa, NULL);
  signal(SIGPIPE, SIG_IGN);

  fr_args a;
  int rc = fr_parse_args(argc, argv, &a);
  if (rc) {
    fr_args_free(&a);
    return rc;
  }
  if (a.help) {
    fr_usage(stdout);
    fr_args_free(&a);
    return 0;
  }
  if (a.mpi_child) {
    rc = fr_mpi_child(&a);
  } else {
    fr_print_config(&a);
    rc = a.ps ? fr_run_ps(&a) : a.nips > 1 ? fr_run_mpirun(&a) : fr_run_collective(&a);
  }
  fr_args_free(&a);
  fr_lifeline_end();
  if (fr_stop_signal) {
    /* end the way the signal would have ended us */
    int sig = fr_stop_signal;
    if (!a.mpi_child)
      fprintf(stderr, "fleetrun: got signal %d (%s); the job's processes were stopped\n", sig,
              strsignal(sig));
    fflush(NULL);
    signal(sig, SIG_DFL);
    raise(sig);
    return 128 + sig;
  }
  return rc;
}
