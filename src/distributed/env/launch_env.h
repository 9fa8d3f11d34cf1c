/* The per-process environment contract of a launched job: what fleetrun
 * (local processes and each rank under mpirun) and pd_dist_spawn export to
 * every process, built by one piece of code so the two never disagree.
 * Internal to the library and tools/fleetrun. */
#ifndef PADDLEC_DIST_ENV_LAUNCH_ENV_H
#define PADDLEC_DIST_ENV_LAUNCH_ENV_H

#include <stddef.h>
#include <sys/types.h>

#include "paddlec/core.h"

/* An ordered list of NAME=value pairs (insertion order is kept, setting a
 * name again replaces its value in place). */
typedef struct pd_launch_env {
  int n, cap;
  char **keys;
  char **vals;
} pd_launch_env;

void pd_launch_env_init(pd_launch_env *e);
void pd_launch_env_clear(pd_launch_env *e);
pd_status pd_launch_env_set(pd_launch_env *e, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* NULL when absent. */
const char *pd_launch_env_get(const pd_launch_env *e, const char *key);
/* setenv() of every pair into this process's environment. */
pd_status pd_launch_env_apply(const pd_launch_env *e);

/* A collective job as the launcher lays it out: nnodes nodes of
 * nproc_per_node processes each; global rank = node_rank * nproc_per_node +
 * local rank, endpoints node-major. */
typedef struct pd_launch_job {
  int nnodes;
  int node_rank;
  int nproc_per_node;
  char **endpoints;         /* nnodes * nproc_per_node "ip:port" */
  const char *job_id;       /* PADDLE_JOB_ID ("default" when NULL) */
  const char *job_key;      /* PADDLEC_JOB_KEY: names the job's shm segments; NULL: not set */
  const char *master;       /* PADDLE_MASTER; NULL: the first endpoint */
  char **devices;           /* device ids of this node; NULL: 0 .. nproc_per_node-1 */
  int ndevices;             /* a multiple of nproc_per_node: each process gets a contiguous slice */
  const char *comm_backend; /* PADDLEC_COMM_BACKEND; NULL: not set */
  const char *gloo_fs_path; /* PADDLE_GLOO_FS_PATH; NULL: not set */
  int omp_threads;          /* OMP_NUM_THREADS; 0: not set */
} pd_launch_job;

/* The environment of local process `local_rank` of `job` (appended to *out,
 * which must be initialised). Order: the rows of the legacy table first
 * (PADDLE_CURRENT_ENDPOINT, PADDLE_TRAINERS_NUM, FLAGS_selected_gpus,
 * PADDLE_TRAINER_ENDPOINTS, PADDLE_TRAINER_ID), then the rest. */
pd_status pd_launch_env_build(const pd_launch_job *job, int local_rank, pd_launch_env *out);

/* Legacy parameter-server mode: process `index` of `role` ("PSERVER" or
 * "TRAINER") given every server and worker endpoint (appended to *out):
 * PADDLE_PSERVERS_IP_PORT_LIST, PADDLE_TRAINER_ENDPOINTS, PADDLE_PORT,
 * TRAINING_ROLE (and PADDLE_ROLE), PADDLE_TRAINERS_NUM, POD_IP, the gloo
 * variables; trainers add PADDLE_TRAINER_ID and FLAGS_selected_gpus=0. */
pd_status pd_launch_ps_env_build(char *const *servers, int nservers, char *const *workers, int nworkers,
                                 const char *role, int index, const pd_launch_job *common,
                                 pd_launch_env *out);

/* The rows fleetrun prints for local process 0 (the seed's table). */
extern const char *const pd_launch_table_keys[5];

/* Paddle's legacy pretty_print_envs: 4-space indent, key column
 * K = max(40, longest key) right-aligned, value column 45 centred, values of
 * 45 characters or more shown as "... " + their last 41. keys: the rows in
 * order (NULL: every pair of e). Returns a malloc'ed string ending in '\n'. */
char *pd_launch_format_table(const pd_launch_env *e, const char *const *keys, int nkeys, const char *head_key,
                             const char *head_val);

/* Why ep is not a usable "host:port" endpoint (a host, then a port that
 * is an integer in [1, 65535]), or NULL when it is. */
const char *pd_launch_endpoint_problem(const char *ep);
/* The same for a port alone. */
const char *pd_launch_port_problem(const char *port);

/* n distinct TCP ports free right now: all n sockets are bound to port 0 at
 * the same time before any is closed, so the ports differ. */
pd_status pd_launch_free_ports(int n, int *ports);

/* nips * nproc endpoints, node-major: ips[i]:port[j]. start_port > 0:
 * ports start_port .. start_port+nproc-1 on every node; otherwise free
 * ports of this host (only sensible for one node). *out is malloc'ed (free
 * with pd_launch_strv_free). */
pd_status pd_launch_endpoints(char *const *ips, int nips, int nproc, int start_port, char ***out);

/* Splits s on sep into a malloc'ed vector of malloc'ed strings (empty
 * fields kept); *n receives the count. NULL on allocation failure. */
char **pd_launch_split(const char *s, char sep, int *n);
void pd_launch_strv_free(char **v, int n);

/* max(1, online CPUs / nproc) when OMP_NUM_THREADS is not set in this
 * process's environment, else 0 (the user's value is kept). */
int pd_launch_default_omp_threads(int nproc);

/* A key unique to this launch: job_id (letters, digits, '_' and '.' kept)
 * + pid + time + a counter. */
void pd_launch_make_job_key(const char *job_id, char *buf, size_t cap);

/* Removes /dev/shm/paddlec-<job_key> and /dev/shm/paddlec-<job_key>-*;
 * returns how many were removed. */
int pd_launch_remove_shm(const char *job_key);

/* For a child between fork and exec (or fn, in pd_dist_spawn): asks the
 * kernel to send it `sig` when the thread that forked it ends, so a
 * launcher killed with SIGKILL leaves no orphans. The parent may have died
 * before the request: returns -1 then (the child should exit), else 0. */
int pd_launch_die_with_parent(pid_t parent, int sig);

/* "SIGSEGV" for 11, "signal 99" for unknown numbers (buf: at least 32). */
const char *pd_launch_signal_name(int sig, char *buf, size_t cap);

#endif
