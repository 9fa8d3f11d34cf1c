#include "world_mesh.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

pd_dist_process_mesh *world_mesh_init(void) {
  if (!pd_dist_init_parallel_env(NULL)) {
    fprintf(stderr, "init_parallel_env: %s\n", pd_last_error());
    return NULL;
  }
  int n = pd_dist_get_world_size(NULL);
  int *ids = malloc((size_t)n * sizeof *ids);
  pd_dist_process_mesh *mesh = NULL;
  if (ids) {
    for (int i = 0; i < n; i++) ids[i] = i;
    mesh = pd_dist_process_mesh_new(1, (const int64_t[]){n}, ids, (const char *[]){"x"});
    free(ids);
  }
  if (!mesh) fprintf(stderr, "rank %d: ProcessMesh: %s\n", pd_dist_get_rank(NULL), pd_last_error());
  return mesh;
}

int world_mesh_check_losses(const double *sharded, const double *single, int n, int train, const char *what) {
  int rank = pd_dist_get_rank(NULL), world = pd_dist_get_world_size(NULL);
  for (int s = 0; s < n; s++)
    if (fabs(sharded[s] - single[s]) > 1e-6) {
      fprintf(stderr, "rank %d: loss %d is %.9g on %d processes, %.9g on one\n", rank, s, sharded[s], world,
              single[s]);
      return 1;
    }
  if (sharded[train - 1] >= sharded[0]) {
    fprintf(stderr, "rank %d: the train loss did not decrease\n", rank);
    return 1;
  }
  /* the backend is named so that a multi-host run shows it went through mpi */
  printf("rank %d: %d %s equal the one-process run to 1e-6 (mesh of %d processes, %s backend)\n", rank, n,
         what, world, pd_dist_group_backend(pd_dist_get_group(0)));
  return 0;
}
