/* paddle.distributed.ParallelEnv: what the launcher's environment says
 * about this process (Paddle's launcher, mpirun or Slurm). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launch_env.h"
#include "paddlec/distributed.h"

/* The first variable of `names` that is set; its name in *which. */
static const char *first_env(const char *const *names, const char **which) {
  for (; *names; names++) {
    const char *v = getenv(*names);
    if (v && *v) {
      if (which) *which = *names;
      return v;
    }
  }
  return NULL;
}

/* Parses a non-negative integer variable; PD_ERR_INVALID naming it. */
static pd_status env_int(const char *const *names, int dflt, int min, int *out) {
  const char *which = NULL;
  const char *v = first_env(names, &which);
  if (!v) {
    *out = dflt;
    return PD_OK;
  }
  char *end;
  errno = 0;
  long x = strtol(v, &end, 10);
  if (errno || end == v || *end || x < min || x > 1 << 24)
    return pd_set_error(PD_ERR_INVALID, "parallel env: %s='%s' is not an integer >= %d", which, v, min);
  *out = (int)x;
  return PD_OK;
}

static int split_list(const char *s, char ***out) {
  int n = 1;
  for (const char *p = s; *p; p++) n += *p == ',';
  char **v = calloc((size_t)n, sizeof *v);
  if (!v) return -1;
  int k = 0;
  const char *b = s;
  for (const char *p = s;; p++) {
    if (*p == ',' || !*p) {
      if (p > b) v[k++] = strndup(b, (size_t)(p - b));
      if (!*p) break;
      b = p + 1;
    }
  }
  *out = v;
  return k;
}

void pd_dist_env_free(pd_dist_env *env) {
  if (!env) return;
  for (int i = 0; i < env->n_endpoints; i++) free(env->trainer_endpoints[i]);
  free(env->trainer_endpoints);
  env->trainer_endpoints = NULL;
  env->n_endpoints = 0;
}

pd_status pd_dist_parallel_env(pd_dist_env *env) {
  if (!env) return pd_set_error(PD_ERR_INVALID, "parallel env: NULL output");
  memset(env, 0, sizeof *env);
  env->master_from = "";
  static const char *const rank_vars[] = {"PADDLE_TRAINER_ID", "OMPI_COMM_WORLD_RANK", "PMI_RANK",
                                          "SLURM_PROCID", NULL};
  static const char *const size_vars[] = {"PADDLE_TRAINERS_NUM", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE",
                                          "SLURM_NTASKS", NULL};
  static const char *const lrank_vars[] = {"PADDLE_RANK_IN_NODE", "PADDLE_LOCAL_RANK",
                                           "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", NULL};
  static const char *const lsize_vars[] = {"PADDLE_LOCAL_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE",
                                           "SLURM_NTASKS_PER_NODE", NULL};
  static const char *const nnodes_vars[] = {"PADDLE_NNODES", "SLURM_NNODES", NULL};
  const char *which = NULL;
  first_env(rank_vars, &which);
  env->launcher = !which                                ? "none"
                  : !strcmp(which, "PADDLE_TRAINER_ID") ? "paddle"
                  : !strcmp(which, "SLURM_PROCID")      ? "slurm"
                                                        : "mpirun";
  pd_status st;
  if ((st = env_int(rank_vars, 0, 0, &env->rank)) < 0) return st;
  if ((st = env_int(size_vars, 1, 1, &env->world_size)) < 0) return st;
  if ((st = env_int(lrank_vars, env->rank, 0, &env->local_rank)) < 0) return st;
  if ((st = env_int(lsize_vars, env->world_size, 1, &env->local_size)) < 0) return st;
  if ((st = env_int(nnodes_vars, 1, 1, &env->nnodes)) < 0) return st;
  if (env->rank >= env->world_size) {
    const char *rv = NULL, *sv = NULL;
    first_env(rank_vars, &rv);
    first_env(size_vars, &sv);
    return pd_set_error(PD_ERR_INVALID, "parallel env: rank %d (%s) must be < world size %d (%s)", env->rank,
                        rv ? rv : "default", env->world_size, sv ? sv : "default");
  }
  if (env->local_rank >= env->local_size)
    return pd_set_error(PD_ERR_INVALID, "parallel env: local rank %d must be < local size %d",
                        env->local_rank, env->local_size);
  static const char *const dev_vars[] = {"FLAGS_selected_gpus", "FLAGS_selected_accelerators", NULL};
  const char *dev = first_env(dev_vars, NULL);
  env->device_id = dev ? atoi(dev) : 0;

  const char *eps = getenv("PADDLE_TRAINER_ENDPOINTS");
  if (eps && *eps) {
    env->n_endpoints = split_list(eps, &env->trainer_endpoints);
    if (env->n_endpoints < 0) return pd_set_error(PD_ERR_MEMORY, "parallel env: out of memory");
    for (int i = 0; i < env->n_endpoints; i++) {
      const char *why = pd_launch_endpoint_problem(env->trainer_endpoints[i]);
      if (!why) continue;
      char bad[256];
      snprintf(bad, sizeof bad, "%s", env->trainer_endpoints[i]);
      pd_dist_env_free(env);
      return pd_set_error(
          PD_ERR_INVALID,
          "parallel env: PADDLE_TRAINER_ENDPOINTS entry %d '%s': %s (PADDLE_TRAINER_ENDPOINTS='%s')", i, bad,
          why, eps);
    }
    if (env->n_endpoints != env->world_size) {
      int n = env->n_endpoints;
      pd_dist_env_free(env);
      return pd_set_error(
          PD_ERR_INVALID,
          "parallel env: PADDLE_TRAINER_ENDPOINTS lists %d endpoints but the world size is %d "
          "(PADDLE_TRAINER_ENDPOINTS='%s')",
          n, env->world_size, eps);
    }
  }
  const char *cur = getenv("PADDLE_CURRENT_ENDPOINT");
  if (cur && *cur) {
    const char *why = pd_launch_endpoint_problem(cur);
    if (why) {
      pd_dist_env_free(env);
      return pd_set_error(PD_ERR_INVALID, "parallel env: PADDLE_CURRENT_ENDPOINT='%s': %s", cur, why);
    }
    snprintf(env->current_endpoint, sizeof env->current_endpoint, "%s", cur);
    if (env->n_endpoints && strcmp(env->trainer_endpoints[env->rank], cur) != 0) {
      char msg[512];
      snprintf(msg, sizeof msg, "%s", env->trainer_endpoints[env->rank]);
      pd_dist_env_free(env);
      return pd_set_error(
          PD_ERR_INVALID,
          "parallel env: PADDLE_CURRENT_ENDPOINT='%s' but entry %d of PADDLE_TRAINER_ENDPOINTS "
          "(this rank's) is '%s'",
          cur, env->rank, msg);
    }
  } else if (env->n_endpoints) {
    snprintf(env->current_endpoint, sizeof env->current_endpoint, "%s", env->trainer_endpoints[env->rank]);
  }
  const char *ma = getenv("MASTER_ADDR"), *mp = getenv("MASTER_PORT"), *pm = getenv("PADDLE_MASTER");
  const char *why = NULL;
  if (ma && *ma && mp && *mp) {
    if ((why = pd_launch_port_problem(mp)) != NULL) {
      pd_dist_env_free(env);
      return pd_set_error(PD_ERR_INVALID, "parallel env: MASTER_PORT='%s': %s", mp, why);
    }
    snprintf(env->master, sizeof env->master, "%s:%s", ma, mp);
    env->master_from = "MASTER_ADDR/MASTER_PORT";
  } else if (pm && *pm) {
    if ((why = pd_launch_endpoint_problem(pm)) != NULL) {
      pd_dist_env_free(env);
      return pd_set_error(PD_ERR_INVALID, "parallel env: PADDLE_MASTER='%s': %s", pm, why);
    }
    snprintf(env->master, sizeof env->master, "%s", pm);
    env->master_from = "PADDLE_MASTER";
  } else if (env->n_endpoints) {
    snprintf(env->master, sizeof env->master, "%s", env->trainer_endpoints[0]);
    env->master_from = "PADDLE_TRAINER_ENDPOINTS";
  }
  return PD_OK;
}
