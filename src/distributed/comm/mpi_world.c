/* MPI start-up and shutdown for the mpi backend: MPI_Init_thread once per
 * process (or the user's MPI when it is already initialised), the bootstrap
 * allgather over MPI_COMM_WORLD, and the world communicator ordered by the
 * job's ranks that groups are carved out of. */
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mpi_internal.h"

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_we_initialised; /* MPI_Init_thread was ours: we finalise it */
static int g_atexit_registered;
/* A duplicate of MPI_COMM_WORLD with errors returned (the user's
 * MPI_COMM_WORLD keeps its own error handler). */
static MPI_Comm g_boot = MPI_COMM_NULL;
static MPI_Comm g_world = MPI_COMM_NULL;
/* The first comm of this process that broke: its message and timeout. */
static pthread_mutex_t g_broken_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_broken;
static double g_broken_timeout;
static char g_broken_msg[1024];

const char *pd_mpi_error_string(int code, char *buf, int cap) {
  int len = 0;
  if (cap < 2 || MPI_Error_string(code, buf, &len) != MPI_SUCCESS) {
    snprintf(buf, (size_t)cap, "MPI error %d", code);
    return buf;
  }
  buf[len < cap ? len : cap - 1] = 0;
  return buf;
}

static const char *thread_level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE:
      return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED:
      return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED:
      return "MPI_THREAD_SERIALIZED";
    default:
      return "MPI_THREAD_MULTIPLE";
  }
}

static void finalize_at_exit(void) { pd_comm_mpi_finalize(); }

/* Called with g_lock held. */
static pd_status init_locked(void) {
  int inited = 0, finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized)
    return pd_set_error(PD_ERR_STATE,
                        "mpi backend: MPI was finalized in this process and cannot be initialised again");
  MPI_Initialized(&inited);
  if (!inited) {
    int provided = 0;
    int rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided);
    if (rc != MPI_SUCCESS)
      return pd_set_error(PD_ERR_COMM, "mpi backend: MPI_Init_thread failed (error %d)", rc);
    g_we_initialised = 1;
    /* under mpirun a process that exits without MPI_Finalize fails the job */
    if (!g_atexit_registered && atexit(finalize_at_exit) == 0) g_atexit_registered = 1;
  }
  int level = MPI_THREAD_SINGLE;
  MPI_Query_thread(&level);
  if (level < MPI_THREAD_MULTIPLE)
    return pd_set_error(
        PD_ERR_COMM,
        "mpi backend: MPI provides %s but the backend needs MPI_THREAD_MULTIPLE (send and recv run on "
        "their own threads beside the collectives)%s",
        thread_level_name(level),
        g_we_initialised ? "" : "; initialise MPI with MPI_Init_thread(..., MPI_THREAD_MULTIPLE, ...)");
  if (g_boot == MPI_COMM_NULL) {
    int rc = MPI_Comm_dup(MPI_COMM_WORLD, &g_boot);
    if (rc != MPI_SUCCESS)
      return pd_set_error(PD_ERR_COMM, "mpi backend: MPI_Comm_dup(MPI_COMM_WORLD) failed");
    MPI_Comm_set_errhandler(g_boot, MPI_ERRORS_RETURN);
  }
  return PD_OK;
}

pd_status pd_comm_mpi_init_world(int *rank, int *size) {
  pthread_mutex_lock(&g_lock);
  pd_status st = init_locked();
  if (st == PD_OK) {
    int r = 0, s = 1;
    MPI_Comm_rank(g_boot, &r);
    MPI_Comm_size(g_boot, &s);
    if (rank) *rank = r;
    if (size) *size = s;
  }
  pthread_mutex_unlock(&g_lock);
  return st;
}

pd_status pd_mpi_require_ready(const char *what) {
  pd_status st = pd_comm_mpi_init_world(NULL, NULL);
  if (st != PD_OK) return pd_set_error(st, "%s: %s", what, pd_last_error());
  return PD_OK;
}

MPI_Comm pd_mpi_boot_comm(void) { return g_boot; }

MPI_Comm pd_mpi_world_comm(void) {
  pthread_mutex_lock(&g_lock);
  MPI_Comm w = g_world;
  pthread_mutex_unlock(&g_lock);
  return w;
}

void pd_mpi_set_world_comm(MPI_Comm world) {
  pthread_mutex_lock(&g_lock);
  if (g_world != MPI_COMM_NULL) MPI_Comm_free(&g_world);
  g_world = world;
  pthread_mutex_unlock(&g_lock);
}

pd_status pd_comm_mpi_world_allgather(const void *mine, void *all, size_t bytes) {
  pd_status st = pd_mpi_require_ready("mpi world allgather");
  if (st != PD_OK) return st;
  double timeout;
  st = pd_comm_timeout(0, "mpi world allgather", &timeout);
  if (st != PD_OK) return st;
  if (bytes > (size_t)INT_MAX)
    return pd_set_error(PD_ERR_INVALID, "mpi world allgather: %zu bytes per rank is more than INT_MAX",
                        bytes);
  MPI_Request req;
  int rc = MPI_Iallgather(mine, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE, g_boot, &req);
  int err = rc;
  if (rc == MPI_SUCCESS && pd_mpi_poll(&req, 1, pd_mpi_now() + timeout, &err, NULL) == PD_OK) return PD_OK;
  char es[MPI_MAX_ERROR_STRING];
  if (err != MPI_SUCCESS)
    return pd_set_error(PD_ERR_COMM, "mpi world allgather of %zu bytes: %s", bytes,
                        pd_mpi_error_string(err, es, sizeof es));
  return pd_set_error(
      PD_ERR_COMM,
      "mpi world allgather of %zu bytes: timed out after %g s: not every process of MPI_COMM_WORLD "
      "joined (set PADDLEC_COMM_TIMEOUT to wait longer)",
      bytes, timeout);
}

void pd_mpi_note_broken(pd_comm *c) {
  pthread_mutex_lock(&g_broken_lock);
  if (!g_broken) {
    g_broken = 1;
    g_broken_timeout = c->timeout_s;
    snprintf(g_broken_msg, sizeof g_broken_msg, "%s", c->broken_msg);
  }
  pthread_mutex_unlock(&g_broken_lock);
}

/* Every process passes a barrier on the way out. A process that saw a comm
 * break waits for it at most `grace` seconds: the rank it missed may be
 * stuck (in a collective it never finished, in a loop), and MPI_Finalize
 * would then wait for it forever. Returns 0 when everyone came. */
static int exit_barrier(int broken, double grace) {
  if (g_boot == MPI_COMM_NULL) return 0;
  MPI_Request req;
  if (MPI_Ibarrier(g_boot, &req) != MPI_SUCCESS) return broken ? -1 : 0;
  int err = MPI_SUCCESS;
  double deadline = broken ? pd_mpi_now() + grace : 1e300;
  if (pd_mpi_poll(&req, 1, deadline, &err, NULL) == PD_OK) return 0;
  return -1;
}

void pd_comm_mpi_finalize(void) {
  pthread_mutex_lock(&g_lock);
  int inited = 0, finalized = 0;
  MPI_Initialized(&inited);
  MPI_Finalized(&finalized);
  if (inited && !finalized && g_we_initialised) {
    pthread_mutex_lock(&g_broken_lock);
    int broken = g_broken;
    double grace = g_broken_timeout < PD_MPI_EXIT_GRACE_S ? g_broken_timeout : PD_MPI_EXIT_GRACE_S;
    char msg[sizeof g_broken_msg];
    snprintf(msg, sizeof msg, "%s", g_broken_msg);
    pthread_mutex_unlock(&g_broken_lock);
    if (exit_barrier(broken, grace) != 0) {
      int rank = -1;
      MPI_Comm_rank(MPI_COMM_WORLD, &rank);
      fprintf(stderr,
              "mpi backend: rank %d exits after a failed collective (%s) and not every process reached "
              "the exit within %g s: aborting the job (MPI_Abort) instead of waiting in MPI_Finalize\n",
              rank, msg, grace);
      fflush(NULL);
      MPI_Abort(MPI_COMM_WORLD, 1);
      _exit(1); /* MPI_Abort does not return; should it, do not finalise */
    }
  }
  if (inited && !finalized) {
    if (g_world != MPI_COMM_NULL) MPI_Comm_free(&g_world);
    if (g_boot != MPI_COMM_NULL) MPI_Comm_free(&g_boot);
    pd_mpi_free_ops();
    pd_mpi_tune_finalize();
    if (g_we_initialised) MPI_Finalize();
  }
  g_world = g_boot = MPI_COMM_NULL;
  pthread_mutex_unlock(&g_lock);
}
