/* Under mpirun -np 2 with the mpi backend: rank 1 never joins an
 * all_reduce (it sleeps, as a hung rank would), rank 0 times out and
 * returns from main. The job must then end at once (MPI_Abort at exit), not
 * wait in MPI_Finalize for rank 1. Each rank prints its pid and the
 * /dev/shm files it has mapped, so the test can check that none is left. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "paddlec.h"
#include "paddlec/distributed.h"

static void print_shm_mappings(int rank) {
  FILE *f = fopen("/proc/self/maps", "r");
  if (!f) return;
  char line[4096], last[4096] = "";
  while (fgets(line, sizeof line, f)) {
    char *p = strstr(line, "/dev/shm/");
    if (!p) continue;
    p[strcspn(p, "\n")] = 0;
    if (strcmp(p, last) == 0) continue;
    snprintf(last, sizeof last, "%s", p);
    printf("rank %d maps %s\n", rank, p);
  }
  fclose(f);
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  pd_dist_group *world = pd_dist_init_parallel_env(&(pd_dist_init_opts){.backend = "mpi"});
  if (!world) {
    fprintf(stderr, "init_parallel_env: %s\n", pd_last_error());
    return 1;
  }
  int rank = pd_dist_get_rank(NULL);
  printf("rank %d pid %ld\n", rank, (long)getpid());
  print_shm_mappings(rank);
  if (rank == 1) {
    printf("rank 1 skips the all_reduce\n");
    sleep(300);
    return 0;
  }
  pd_tensor *t = pd_full(1, (const int64_t[]){4}, 1.0, PD_FLOAT32);
  pd_status st = pd_dist_all_reduce(t, PD_REDUCE_SUM, NULL);
  if (st != PD_OK) fprintf(stderr, "rank %d: all_reduce failed: %s\n", rank, pd_last_error());
  pd_tensor_release(t);
  return st == PD_OK ? 0 : 1;
}
