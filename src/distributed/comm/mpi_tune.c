/* Algorithm choice for MPI_Iallreduce.
 *
 * Open MPI's nonblocking collectives (libnbc) pick recursive doubling or a
 * binomial tree for all_reduce whatever the size, which moves every byte
 * log2(p) times: a 64 MB float32 all_reduce over 2 processes took 88 ms
 * against 41 ms for the blocking MPI_Allreduce. Its ring algorithm is
 * bandwidth-optimal, so large messages switch to it through the MPI_T
 * control variable coll_libnbc_iallreduce_algorithm (read when a call is
 * posted). The choice depends only on the size, which the signature check
 * made equal on every rank, so all ranks run the same algorithm. A value
 * the user set in the environment is left alone, and with another MPI (or
 * another collective component) the variable is absent and nothing changes. */
#include <pthread.h>
#include <stdlib.h>

#include "mpi_internal.h"

static pthread_mutex_t g_tune_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_tune_state; /* 0: not looked up, 1: usable, -1: not available */
static MPI_T_cvar_handle g_handle;

enum { ALG_DEFAULT = 0, ALG_RING = 1 };

/* ring when each rank's block is at least 32 KB: then bandwidth, not the
 * 2 (p - 1) steps' latency, dominates */
static int want_alg(size_t bytes, int nranks) {
  return bytes / (size_t)nranks >= ((size_t)32 << 10) ? ALG_RING : ALG_DEFAULT;
}

static void lookup(void) {
  g_tune_state = -1;
  if (getenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm")) return;
  int provided, idx, n;
  if (MPI_T_init_thread(MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) return;
  if (MPI_T_cvar_get_index("coll_libnbc_iallreduce_algorithm", &idx) != MPI_SUCCESS ||
      MPI_T_cvar_handle_alloc(idx, NULL, &g_handle, &n) != MPI_SUCCESS || n != 1) {
    MPI_T_finalize();
    return;
  }
  int v = 0;
  if (MPI_T_cvar_read(g_handle, &v) != MPI_SUCCESS || v != ALG_DEFAULT) {
    MPI_T_cvar_handle_free(&g_handle);
    MPI_T_finalize();
    return;
  }
  g_tune_state = 1;
}

int pd_mpi_iallreduce(const void *in, void *out, int n, MPI_Datatype t, MPI_Op op, MPI_Comm comm, int nranks,
                      size_t esz, MPI_Request *req) {
  pthread_mutex_lock(&g_tune_lock);
  if (g_tune_state == 0) lookup();
  int ring = g_tune_state == 1 && want_alg((size_t)n * esz, nranks) == ALG_RING;
  if (ring) {
    int v = ALG_RING;
    ring = MPI_T_cvar_write(g_handle, &v) == MPI_SUCCESS;
  }
  /* posted under the lock, and the default is back at once: Open MPI's own
   * internal all_reduces (communicator creation, a handful of integers)
   * must keep the default, the ring is only for our large ones */
  int rc = MPI_Iallreduce(in, out, n, t, op, comm, req);
  if (ring) {
    int v = ALG_DEFAULT;
    MPI_T_cvar_write(g_handle, &v);
  }
  pthread_mutex_unlock(&g_tune_lock);
  return rc;
}

void pd_mpi_tune_finalize(void) {
  pthread_mutex_lock(&g_tune_lock);
  if (g_tune_state == 1) {
    MPI_T_cvar_handle_free(&g_handle);
    MPI_T_finalize();
  }
  g_tune_state = 0;
  pthread_mutex_unlock(&g_tune_lock);
}
