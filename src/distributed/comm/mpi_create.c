/* Creating a group's communicators.
 *
 * The world group (group_id 0) is MPI_COMM_WORLD split with the job's rank
 * as the key, so group rank i is the process whose PADDLE_TRAINER_ID is i
 * whatever order mpirun started the processes in. Other groups are carved
 * out of it with MPI_Comm_create_group, which only the members call.
 *
 * The MPI calls that build communicators block until every member calls
 * them, so a rendezvous with a timeout comes first: each member sends a
 * token to every other member and waits for theirs, and a member that
 * never comes is named in the error instead of hanging the job. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_internal.h"

static const int k_token = 1; /* static: a send that cannot be cancelled may still read it */

/* members[i] is member i's rank in comm, names[i] its global rank. */
static pd_status rendezvous(MPI_Comm comm, const int *members, const int *names, int n, int me, int tag,
                            double timeout, double warn_s, const char *what) {
  if (n == 1) return PD_OK;
  int *tokens = calloc((size_t)n, sizeof *tokens);
  MPI_Request *reqs = malloc(2 * (size_t)n * sizeof *reqs);
  if (!tokens || !reqs) {
    free(tokens);
    free(reqs);
    return pd_set_error(PD_ERR_MEMORY, "%s: out of memory", what);
  }
  int rc = MPI_SUCCESS;
  for (int j = 0; j < 2 * n; j++) reqs[j] = MPI_REQUEST_NULL;
  for (int j = 0; j < n && rc == MPI_SUCCESS; j++) {
    if (j == me) continue;
    rc = MPI_Irecv(&tokens[j], 1, MPI_INT, members[j], tag, comm, &reqs[j]);
    if (rc == MPI_SUCCESS) rc = MPI_Isend(&k_token, 1, MPI_INT, members[j], tag, comm, &reqs[n + j]);
  }
  int err = rc;
  pd_mpi_warn warn = {.what = what,
                      .me = names[me],
                      .warn_s = warn_s > 0 ? warn_s : PD_COMM_WARN_DEFAULT_S,
                      .timeout_s = timeout,
                      .per_rank = reqs,
                      .names = names,
                      .nmembers = n,
                      .me_member = me,
                      .peer = -1};
  if (rc == MPI_SUCCESS && pd_mpi_poll(reqs, 2 * n, pd_mpi_now() + timeout, &err, &warn) == PD_OK) {
    free(tokens);
    free(reqs);
    return PD_OK;
  }
  char missing[1024], es[MPI_MAX_ERROR_STRING];
  size_t len = 0;
  int k = 0;
  missing[0] = 0;
  for (int j = 0; j < n; j++)
    if (j != me && reqs[j] != MPI_REQUEST_NULL && len < sizeof missing)
      len += (size_t)snprintf(missing + len, sizeof missing - len, "%s%d", k++ ? ", " : "", names[j]);
  int stuck = pd_mpi_abandon(reqs, 2 * n);
  if (!stuck) free(tokens); /* else a receive may still land in it */
  free(reqs);
  if (err != MPI_SUCCESS)
    return pd_set_error(PD_ERR_COMM, "%s: %s", what, pd_mpi_error_string(err, es, sizeof es));
  return pd_set_error(
      PD_ERR_COMM, "%s: timed out after %g s waiting for %s %s to join (every member must create the group)",
      what, timeout, k > 1 ? "ranks" : "rank", missing);
}

static pd_status check_init(const pd_comm_init *init, int world_size) {
  if (!init || !init->global_ranks || init->nranks < 1 || init->rank < 0 || init->rank >= init->nranks)
    return pd_set_error(PD_ERR_INVALID, "mpi backend: invalid group (rank %d of %d ranks)",
                        init ? init->rank : -1, init ? init->nranks : 0);
  if (init->world_size != world_size)
    return pd_set_error(
        PD_ERR_COMM,
        "mpi backend: the job has %d ranks but MPI_COMM_WORLD has %d processes (start every rank "
        "under one mpirun, or use the shm backend)",
        init->world_size, world_size);
  if (init->world_rank < 0 || init->world_rank >= world_size)
    return pd_set_error(PD_ERR_INVALID, "mpi backend: world rank %d is outside [0, %d)", init->world_rank,
                        world_size);
  for (int i = 0; i < init->nranks; i++) {
    int g = init->global_ranks[i];
    if (g < 0 || g >= world_size)
      return pd_set_error(PD_ERR_INVALID, "mpi backend: group %d lists rank %d, outside the world [0, %d)",
                          init->group_id, g, world_size);
    for (int j = 0; j < i; j++)
      if (init->global_ranks[j] == g)
        return pd_set_error(PD_ERR_INVALID, "mpi backend: group %d lists rank %d twice", init->group_id, g);
  }
  if (init->global_ranks[init->rank] != init->world_rank)
    return pd_set_error(PD_ERR_INVALID,
                        "mpi backend: group %d says rank %d is world rank %d, but this process is %d",
                        init->group_id, init->rank, init->global_ranks[init->rank], init->world_rank);
  if (init->group_id == 0 && init->nranks != world_size)
    return pd_set_error(PD_ERR_INVALID, "mpi backend: the world group has %d ranks, the world %d",
                        init->nranks, world_size);
  return PD_OK;
}

static int tag_ub_of(MPI_Comm comm) {
  int *v = NULL, flag = 0;
  MPI_Comm_get_attr(comm, MPI_TAG_UB, &v, &flag);
  return flag && v && *v > 32767 ? *v : 32767;
}

/* The world: every process of MPI_COMM_WORLD, ordered by the job's rank. */
static pd_status create_world(const pd_comm_init *init, MPI_Comm *base) {
  MPI_Comm boot = pd_mpi_boot_comm();
  int n = init->world_size, me = 0;
  MPI_Comm_rank(boot, &me);
  int *members = malloc((size_t)n * sizeof *members);
  if (!members) return pd_set_error(PD_ERR_MEMORY, "mpi world group: out of memory");
  for (int i = 0; i < n; i++) members[i] = i;
  /* names: MPI ranks, the job's ranks are not known to each other yet */
  pd_status st = rendezvous(boot, members, members, n, me, 0, init->timeout_s, init->warn_s,
                            "mpi world group: MPI_COMM_WORLD ranks");
  free(members);
  if (st != PD_OK) return st;
  int rc = MPI_Comm_split(boot, 0, init->world_rank, base);
  if (rc != MPI_SUCCESS)
    return pd_set_error(PD_ERR_COMM, "mpi world group: MPI_Comm_split failed (error %d)", rc);
  MPI_Comm world;
  rc = MPI_Comm_dup(*base, &world);
  if (rc != MPI_SUCCESS) {
    MPI_Comm_free(base);
    return pd_set_error(PD_ERR_COMM, "mpi world group: MPI_Comm_dup failed (error %d)", rc);
  }
  pd_mpi_set_world_comm(world);
  return PD_OK;
}

static pd_status create_group(const pd_comm_init *init, MPI_Comm *base) {
  MPI_Comm world = pd_mpi_world_comm();
  if (world == MPI_COMM_NULL)
    return pd_set_error(PD_ERR_STATE, "mpi group %d: the world group (group 0) must be created first",
                        init->group_id);
  char what[96];
  snprintf(what, sizeof what, "mpi new group %d", init->group_id);
  int tag = 1 + init->group_id % (tag_ub_of(world) - 1);
  pd_status st = rendezvous(world, init->global_ranks, init->global_ranks, init->nranks, init->rank, tag,
                            init->timeout_s, init->warn_s, what);
  if (st != PD_OK) return st;
  MPI_Group wg, g;
  MPI_Comm_group(world, &wg);
  int rc = MPI_Group_incl(wg, init->nranks, init->global_ranks, &g);
  MPI_Group_free(&wg);
  if (rc != MPI_SUCCESS) return pd_set_error(PD_ERR_COMM, "%s: MPI_Group_incl failed (error %d)", what, rc);
  rc = MPI_Comm_create_group(world, g, tag, base);
  MPI_Group_free(&g);
  if (rc != MPI_SUCCESS)
    return pd_set_error(PD_ERR_COMM, "%s: MPI_Comm_create_group failed (error %d)", what, rc);
  return PD_OK;
}

static size_t chunk_bytes_from_env(void) {
  /* PADDLEC_MPI_CHUNK_BYTES: the largest single MPI transfer; tests lower
   * it to run the chunked paths on small buffers */
  const char *e = getenv("PADDLEC_MPI_CHUNK_BYTES");
  long long v = e ? atoll(e) : 0;
  return v > 0 && v <= (1LL << 30) ? (size_t)v : (size_t)1 << 30;
}

/* Blocking MPI_Comm_dup is safe here: the rendezvous has seen every member. */
static pd_status dup_comm(MPI_Comm base, MPI_Comm *out, const char *what) {
  int rc = MPI_Comm_dup(base, out);
  if (rc == MPI_SUCCESS) return PD_OK;
  char es[MPI_MAX_ERROR_STRING];
  *out = MPI_COMM_NULL;
  return pd_set_error(PD_ERR_COMM, "%s: MPI_Comm_dup: %s", what, pd_mpi_error_string(rc, es, sizeof es));
}

pd_comm *pd_comm_mpi_create(const pd_comm_init *init) {
  int world_size = 0;
  if (pd_comm_mpi_init_world(NULL, &world_size) != PD_OK) return NULL;
  if (check_init(init, world_size) != PD_OK) return NULL;
  MPI_Comm base = MPI_COMM_NULL;
  pd_status st = init->group_id == 0 ? create_world(init, &base) : create_group(init, &base);
  if (st != PD_OK) return NULL;
  MPI_Comm_set_errhandler(base, MPI_ERRORS_RETURN);
  int r = -1, s = 0;
  MPI_Comm_rank(base, &r);
  MPI_Comm_size(base, &s);
  if (r != init->rank || s != init->nranks) {
    MPI_Comm_free(&base);
    pd_set_error(PD_ERR_COMM, "mpi group %d: MPI made this process rank %d of %d, expected rank %d of %d",
                 init->group_id, r, s, init->rank, init->nranks);
    return NULL;
  }

  pd_comm *c = calloc(1, sizeof *c);
  pd_mpi_comm *m = calloc(1, sizeof *m);
  char what[64];
  snprintf(what, sizeof what, "mpi group %d", init->group_id);
  if (!c || !m) {
    free(c);
    free(m);
    MPI_Comm_free(&base);
    pd_set_error(PD_ERR_MEMORY, "%s: out of memory", what);
    return NULL;
  }
  c->impl = m;
  m->coll = base;
  m->sig = m->p2p = MPI_COMM_NULL;
  if (pd_comm_base_init(c, pd_mpi_ops(), init) != PD_OK) {
    c->ops->destroy(c);
    return NULL;
  }
  int n = init->nranks;
  m->tag_ub = tag_ub_of(base);
  m->chunk_bytes = chunk_bytes_from_env();
  m->sig_stride = sizeof(pd_comm_sig) + 2 * (size_t)n * sizeof(uint64_t);
  m->sig_out = malloc(m->sig_stride);
  m->sig_in = malloc((size_t)n * m->sig_stride);
  m->reqs = malloc(2 * (size_t)n * sizeof *m->reqs);
  atomic_init(&m->p2p_id, 0);
  if (!m->sig_out || !m->sig_in || !m->reqs) {
    pd_set_error(PD_ERR_MEMORY, "%s: out of memory for %d ranks", what, n);
    c->ops->destroy(c);
    return NULL;
  }
  if (dup_comm(base, &m->sig, what) != PD_OK || dup_comm(base, &m->p2p, what) != PD_OK) {
    c->ops->destroy(c);
    return NULL;
  }
  return c;
}
