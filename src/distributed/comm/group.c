/* The parallel environment and process groups: init_parallel_env, the
 * world group, new_group, destroy_process_group. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../env/rendezvous.h"
#include "group_internal.h"

typedef struct dist_state {
  int initialized;
  int world_rank, world_size;
  int *pids;
  char job_key[96];
  char backend[8];
  double timeout_s;
  double warn_s;          /* PADDLEC_COMM_WARN_INTERVAL */
  pd_dist_group **groups; /* by id */
  int ngroups;
} dist_state;

static dist_state g_dist;
/* Counts the worlds joined in this process (reset_state keeps it). */
static unsigned long g_world_generation;

pd_dist_group *pd_dist_world(void) { return g_dist.initialized ? g_dist.groups[0] : NULL; }

pd_dist_group *pd_dist_resolve_group(pd_dist_group *g, const char *op) {
  if (g) return g;
  if (!g_dist.initialized) {
    pd_set_error(PD_ERR_STATE,
                 "%s: the parallel environment is not initialised (call pd_dist_init_parallel_env)", op);
    return NULL;
  }
  return g_dist.groups[0];
}

bool pd_dist_backend_available(const char *name) {
  if (!name) return false;
  if (!strcmp(name, "shm")) return true;
#ifdef PADDLEC_WITH_MPI
  if (!strcmp(name, "mpi")) return true;
#endif
  return false;
}

static pd_comm *create_comm(const char *backend, const pd_comm_init *init) {
  if (!strcmp(backend, "shm")) return pd_comm_shm_create(init);
#ifdef PADDLEC_WITH_MPI
  if (!strcmp(backend, "mpi")) return pd_comm_mpi_create(init);
#endif
  pd_set_error(PD_ERR_UNIMPLEMENTED, "distributed: backend '%s' is not built in this library", backend);
  return NULL;
}

static int cmp_int(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

static void group_free(pd_dist_group *g) {
  if (!g) return;
  for (int i = 0; i < PD_NUM_LANES; i++) pd_dist_lane_destroy(&g->lanes[i]);
  pd_comm_release(g->comm); /* shared tensors may keep it alive */
  free(g->ranks);
  free(g);
}

/* Builds group `id` of the given (sorted, validated) global ranks. */
static pd_dist_group *group_make(int id, const int *ranks, int n, const char *backend, double timeout_s) {
  pd_dist_group *g = calloc(1, sizeof *g);
  if (!g || !(g->ranks = malloc((size_t)n * sizeof *g->ranks))) {
    free(g);
    pd_set_error(PD_ERR_MEMORY, "new_group: out of memory");
    return NULL;
  }
  g->id = id;
  g->nranks = n;
  memcpy(g->ranks, ranks, (size_t)n * sizeof *ranks);
  g->rank = -1;
  for (int i = 0; i < n; i++)
    if (ranks[i] == g_dist.world_rank) g->rank = i;
  snprintf(g->backend, sizeof g->backend, "%s", backend);
  for (int i = 0; i < PD_NUM_LANES; i++) pd_dist_lane_init(&g->lanes[i]);
  if (g->rank >= 0) {
    pd_comm_init init = {.group_id = id,
                         .rank = g->rank,
                         .nranks = n,
                         .global_ranks = ranks,
                         .world_rank = g_dist.world_rank,
                         .world_size = g_dist.world_size,
                         .world_pids = g_dist.pids,
                         .job_key = g_dist.job_key,
                         .timeout_s = timeout_s,
                         .warn_s = g_dist.warn_s};
    g->comm = create_comm(backend, &init);
    if (!g->comm) {
      group_free(g);
      return NULL;
    }
  }
  return g;
}

static pd_status add_group(pd_dist_group *g) {
  pd_dist_group **v = realloc(g_dist.groups, (size_t)(g_dist.ngroups + 1) * sizeof *v);
  if (!v) return pd_set_error(PD_ERR_MEMORY, "new_group: out of memory");
  g_dist.groups = v;
  v[g_dist.ngroups++] = g;
  return PD_OK;
}

static void reset_state(void) {
  free(g_dist.pids);
  free(g_dist.groups);
  memset(&g_dist, 0, sizeof g_dist);
}

pd_dist_group *pd_dist_init_parallel_env(const pd_dist_init_opts *opts) {
  if (g_dist.initialized) return g_dist.groups[0];
  pd_dist_init_opts o = opts ? *opts : (pd_dist_init_opts){0};
  const char *want = o.backend ? o.backend : getenv("PADDLEC_COMM_BACKEND");
  if (want && (!*want || !strcmp(want, "auto") || !strcmp(want, "gloo"))) want = NULL;
  if (want && strcmp(want, "shm") && strcmp(want, "mpi")) {
    pd_set_error(PD_ERR_INVALID, "init_parallel_env: unknown backend '%s' (expected shm, mpi or auto)", want);
    return NULL;
  }
  if (want && !pd_dist_backend_available(want)) {
    pd_set_error(
        PD_ERR_UNIMPLEMENTED,
        "init_parallel_env: backend '%s' was not built into this library (Open MPI not found at build "
        "time)",
        want);
    return NULL;
  }
  double timeout, warn_s;
  if (pd_comm_timeout(o.timeout_s, "init_parallel_env", &timeout) != PD_OK) return NULL;
  if (pd_comm_warn_interval(&warn_s) != PD_OK) {
    pd_set_error(PD_ERR_INVALID, "init_parallel_env: %s", pd_last_error());
    return NULL;
  }
  pd_dist_env env;
  if (pd_dist_parallel_env(&env) < 0) return NULL;
  int n = env.world_size, rank = env.rank;
  pd_rank_record *recs = calloc((size_t)n, sizeof *recs);
  int *ranks = malloc((size_t)n * sizeof *ranks);
  g_dist.pids = calloc((size_t)n, sizeof *g_dist.pids);
  pd_rank_record mine;
  pd_rank_record_self(&mine, rank);
  pd_status st =
      recs && ranks && g_dist.pids ? PD_OK : pd_set_error(PD_ERR_MEMORY, "init_parallel_env: out of memory");
  if (st == PD_OK) {
    if (n == 1) {
      recs[0] = mine;
      pd_make_job_key(g_dist.job_key, sizeof g_dist.job_key);
    } else if (env.master[0]) {
      st = pd_rendezvous_tcp(env.master, env.master_from, rank, n, timeout, warn_s, &mine, recs,
                             g_dist.job_key);
    } else if (strcmp(env.launcher, "mpirun") != 0) {
      st = pd_set_error(
          PD_ERR_INVALID,
          "init_parallel_env: world size %d (from the %s environment) but no master endpoint: set "
          "PADDLE_MASTER (host:port), MASTER_ADDR and MASTER_PORT, or PADDLE_TRAINER_ENDPOINTS "
          "(fleetrun sets them)",
          n, env.launcher);
    } else {
#ifdef PADDLEC_WITH_MPI
      int mr = 0, ms = 0;
      st = pd_comm_mpi_init_world(&mr, &ms);
      if (st == PD_OK && (mr != rank || ms != n))
        st = pd_set_error(PD_ERR_INVALID,
                          "init_parallel_env: MPI says rank %d of %d but the environment says %d of %d", mr,
                          ms, rank, n);
      if (st == PD_OK) st = pd_comm_mpi_world_allgather(&mine, recs, sizeof mine);
      if (st == PD_OK) {
        char *keys = malloc((size_t)n * 96);
        char key[96] = {0};
        pd_make_job_key(key, sizeof key);
        st = keys ? pd_comm_mpi_world_allgather(key, keys, 96) : pd_set_error(PD_ERR_MEMORY, "out of memory");
        if (st == PD_OK) snprintf(g_dist.job_key, sizeof g_dist.job_key, "%s", keys);
        free(keys);
      }
#else
      st = pd_set_error(
          PD_ERR_INVALID,
          "init_parallel_env: world size %d but no master endpoint: set PADDLE_MASTER (host:port), "
          "MASTER_ADDR and MASTER_PORT, or PADDLE_TRAINER_ENDPOINTS (fleetrun sets them)",
          n);
#endif
    }
  }
  pd_dist_env_free(&env);
  const char *backend = want;
  if (st == PD_OK) {
    int one_host = 1;
    for (int i = 0; i < n; i++) {
      g_dist.pids[i] = recs[i].pid;
      ranks[i] = i;
      if (strcmp(recs[i].host, recs[0].host) != 0) one_host = 0;
    }
    if (!backend) backend = one_host ? "shm" : "mpi";
    if (!strcmp(backend, "shm") && !one_host)
      st = pd_set_error(
          PD_ERR_INVALID,
          "init_parallel_env: the shm backend needs every rank on one host, but rank 0 runs on '%s' "
          "and other ranks elsewhere (use the mpi backend)",
          recs[0].host);
    else if (!pd_dist_backend_available(backend))
      st = pd_set_error(
          PD_ERR_UNIMPLEMENTED,
          "init_parallel_env: the ranks run on several hosts and this library has no mpi backend "
          "(rebuild with Open MPI installed)");
  }
#ifdef PADDLEC_WITH_MPI
  if (st == PD_OK && !strcmp(backend, "mpi")) {
    int mr = 0, ms = 0;
    st = pd_comm_mpi_init_world(&mr, &ms);
    if (st == PD_OK && ms != n)
      st = pd_set_error(
          PD_ERR_INVALID,
          "init_parallel_env: the mpi backend needs the job started by mpirun (fleetrun --ips does "
          "that): MPI sees %d processes, the environment %d",
          ms, n);
  }
#endif
  free(recs);
  if (st == PD_OK) {
    g_dist.world_rank = rank;
    g_dist.world_size = n;
    g_dist.timeout_s = timeout;
    g_dist.warn_s = warn_s;
    snprintf(g_dist.backend, sizeof g_dist.backend, "%s", backend);
    pd_dist_group *world = group_make(0, ranks, n, backend, timeout);
    if (!world || add_group(world) < 0) {
      group_free(world);
      st = pd_last_status();
    }
  }
  free(ranks);
  if (st < 0) {
    reset_state();
    return NULL;
  }
  g_dist.initialized = 1;
  g_world_generation++;
  /* as Paddle: init ends with a barrier, so every rank leaves it ready */
  if (pd_dist_barrier(g_dist.groups[0]) < 0) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", pd_last_error());
    pd_dist_destroy_process_group(NULL);
    pd_set_error(PD_ERR_COMM, "init_parallel_env: the first barrier failed: %s", msg);
    return NULL;
  }
  return g_dist.groups[0];
}

bool pd_dist_is_initialized(void) { return g_dist.initialized != 0; }

unsigned long pd_dist_world_generation(void) { return g_dist.initialized ? g_world_generation : 0; }

pd_status pd_dist_destroy_process_group(pd_dist_group *group) {
  if (!g_dist.initialized) return PD_OK;
  if (!group) {
    for (int i = g_dist.ngroups - 1; i >= 0; i--) group_free(g_dist.groups[i]);
    reset_state();
    return PD_OK;
  }
  for (int i = 1; i < g_dist.ngroups; i++)
    if (g_dist.groups[i] == group) {
      group_free(group);
      g_dist.groups[i] = NULL;
      return PD_OK;
    }
  if (group == g_dist.groups[0]) return pd_dist_destroy_process_group(NULL);
  return pd_set_error(PD_ERR_INVALID, "destroy_process_group: unknown group %p", (void *)group);
}

int pd_dist_get_rank(const pd_dist_group *group) {
  if (group) return group->rank;
  if (g_dist.initialized) return g_dist.world_rank;
  pd_dist_env env;
  if (pd_dist_parallel_env(&env) < 0) return 0;
  pd_dist_env_free(&env);
  return env.rank;
}

int pd_dist_get_world_size(const pd_dist_group *group) {
  if (group) return group->nranks;
  if (g_dist.initialized) return g_dist.world_size;
  pd_dist_env env;
  if (pd_dist_parallel_env(&env) < 0) return 1;
  pd_dist_env_free(&env);
  return env.world_size;
}

pd_dist_group *pd_dist_new_group(const int *ranks, int nranks, const pd_dist_new_group_opts *opts) {
  if (!g_dist.initialized) {
    pd_set_error(PD_ERR_STATE,
                 "new_group: the parallel environment is not initialised (call pd_dist_init_parallel_env)");
    return NULL;
  }
  int n = ranks && nranks > 0 ? nranks : g_dist.world_size;
  if (nranks < 0) {
    pd_set_error(PD_ERR_INVALID, "new_group: nranks %d is negative", nranks);
    return NULL;
  }
  int *sorted = malloc((size_t)n * sizeof *sorted);
  if (!sorted) {
    pd_set_error(PD_ERR_MEMORY, "new_group: out of memory");
    return NULL;
  }
  for (int i = 0; i < n; i++) sorted[i] = ranks && nranks > 0 ? ranks[i] : i;
  qsort(sorted, (size_t)n, sizeof *sorted, cmp_int);
  for (int i = 0; i < n; i++) {
    if (sorted[i] < 0 || sorted[i] >= g_dist.world_size || (i && sorted[i] == sorted[i - 1])) {
      pd_set_error(PD_ERR_INVALID, "new_group: rank %d is %s (world size %d)", sorted[i],
                   sorted[i] < 0 || sorted[i] >= g_dist.world_size ? "out of range" : "listed twice",
                   g_dist.world_size);
      free(sorted);
      return NULL;
    }
  }
  const char *backend = opts && opts->backend && *opts->backend ? opts->backend : g_dist.backend;
  if (!pd_dist_backend_available(backend)) {
    pd_set_error(PD_ERR_INVALID, "new_group: backend '%s' is not available", backend);
    free(sorted);
    return NULL;
  }
  double timeout = g_dist.timeout_s;
  if (opts && opts->timeout_s != 0 && pd_comm_timeout(opts->timeout_s, "new_group", &timeout) != PD_OK) {
    free(sorted);
    return NULL;
  }
  /* ids advance on every process, member or not, so they agree */
  pd_dist_group *g = group_make(g_dist.ngroups, sorted, n, backend, timeout);
  free(sorted);
  if (!g) {
    add_group(NULL); /* keep the ids in step with the other processes */
    return NULL;
  }
  if (add_group(g) < 0) {
    group_free(g);
    return NULL;
  }
  return g;
}

pd_dist_group *pd_dist_get_group(int id) {
  if (!g_dist.initialized || id < 0 || id >= g_dist.ngroups) return NULL;
  return g_dist.groups[id];
}

int pd_dist_group_id(const pd_dist_group *g) { return g ? g->id : -1; }
int pd_dist_group_nranks(const pd_dist_group *g) { return g ? g->nranks : 0; }
int pd_dist_group_rank(const pd_dist_group *g) { return g ? g->rank : -1; }
bool pd_dist_group_is_member(const pd_dist_group *g) { return g && g->rank >= 0; }
int pd_dist_group_get_group_rank(const pd_dist_group *g, int global_rank) {
  if (!g) return -1;
  for (int i = 0; i < g->nranks; i++)
    if (g->ranks[i] == global_rank) return i;
  return -1;
}
const int *pd_dist_group_ranks(const pd_dist_group *g) { return g ? g->ranks : NULL; }
const char *pd_dist_group_backend(const pd_dist_group *g) { return g ? g->backend : ""; }
