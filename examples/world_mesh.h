/* What the seed-000 programs (shard_tensor, dist_to_static) share: the
 * ProcessMesh of every rank, and the check that a run on it gives the
 * losses of the same model trained in one process. */
#ifndef PADDLEC_EXAMPLES_WORLD_MESH_H
#define PADDLEC_EXAMPLES_WORLD_MESH_H

#include <paddlec.h>

/* init_parallel_env(), then ProcessMesh(list(range(world_size)),
 * dim_names=["x"]); NULL, with the error printed, on failure. */
pd_dist_process_mesh *world_mesh_init(void);
/* 0 when the n losses of the run on the mesh equal those of one process to
 * 1e-6 and the first `train` of them decrease; else 1, with the reason on
 * stderr. Prints "rank R: N <what> equal the one-process run ... (mesh of W
 * processes, B backend)" on success, B the world group's backend. */
int world_mesh_check_losses(const double *sharded, const double *single, int n, int train, const char *what);

#endif
