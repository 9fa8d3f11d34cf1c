/* Several nodes: the job is handed to mpirun, which starts this launcher
 * on every node in child mode (--__mpi_child); each child derives its rank
 * from Open MPI, sets the same environment contract as a local launch and
 * runs the program with its output in <log_dir>/workerlog.<local rank>.
 *
 * World rank = PADDLE_TRAINER_ID: mpirun gets "--host ip0:n,ip1:n,..." with
 * exactly n = nproc_per_node slots per node in --ips order and
 * "--map-by slot" (ranks fill node 0's slots, then node 1's, ...), so MPI
 * rank r runs on node r / n as local rank r % n, which is where the
 * node-major endpoint list puts PADDLE_TRAINER_ID r. The child checks
 * OMPI_COMM_WORLD_LOCAL_RANK and _SIZE against that and refuses to run on
 * a mismatch. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "distributed/env/launch_env.h"
#include "fleetrun.h"

extern char **environ;

#define DEFAULT_START_PORT 6070

/* Variables the ranks must see as the launcher does (mpirun -x). */
static int forwarded(const char *kv) {
  static const char *const prefixes[] = {"PADDLE_", "FLAGS_", "PADDLEC_", "OMP_", "GLOG_"};
  for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
    if (strncmp(kv, prefixes[i], strlen(prefixes[i])) == 0) return 1;
  return 0;
}

typedef struct argv_b {
  char **v;
  int n, cap;
} argv_b;

static void push(argv_b *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void push(argv_b *b, const char *fmt, ...) {
  if (b->n + 2 > b->cap) {
    int cap = b->cap ? 2 * b->cap : 64;
    char **v = realloc(b->v, (size_t)cap * sizeof *v);
    if (!v) return;
    b->v = v;
    b->cap = cap;
  }
  va_list ap;
  va_start(ap, fmt);
  if (vasprintf(&b->v[b->n], fmt, ap) >= 0) b->n++;
  va_end(ap);
  b->v[b->n] = NULL;
}

static void argv_free(argv_b *b) {
  for (int i = 0; i < b->n; i++) free(b->v[i]);
  free(b->v);
}

int fr_run_mpirun(fr_args *a) {
  int n = a->nproc, nn = a->nips, world = n * nn;
  int start_port = a->start_port_n ? a->start_port_n : DEFAULT_START_PORT;
  FR_INFO("Run collective mode on %d nodes through mpirun: %d processes per node, %d in all", nn, n, world);
  if (fr_make_log_dir(a)) return 1;
  char **eps = NULL;
  if (pd_launch_endpoints(a->ip_list, nn, n, start_port, &eps) != PD_OK) {
    FR_ERROR("%s", pd_last_error());
    return 1;
  }
  char key[160];
  pd_launch_make_job_key(a->job_id, key, sizeof key);
  fr_lifeline_set_key(key);

  /* what rank 0 will see, for the table */
  pd_launch_job job = {.nnodes = nn,
                       .node_rank = 0,
                       .nproc_per_node = n,
                       .endpoints = eps,
                       .job_id = a->job_id,
                       .job_key = key,
                       .master = a->master,
                       .devices = a->dev_list,
                       .ndevices = a->ndev};
  pd_launch_env env0;
  pd_launch_env_init(&env0);
  int rc = 1;
  argv_b b = {0};
  if (pd_launch_env_build(&job, 0, &env0) != PD_OK) {
    FR_ERROR("%s", pd_last_error());
    goto done;
  }
  if (fr_write_endpoints_log(a, eps, world)) goto done;
  fr_print_first_env(a, n, &env0);

  char self[4096];
  ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
  if (sl <= 0) {
    FR_ERROR("cannot find the fleetrun executable (/proc/self/exe): %s", strerror(errno));
    goto done;
  }
  self[sl] = '\0';
  char hosts[8192];
  size_t hl = 0;
  for (int i = 0; i < nn && hl < sizeof hosts; i++)
    hl += (size_t)snprintf(hosts + hl, sizeof hosts - hl, "%s%s:%d", i ? "," : "", a->ip_list[i], n);

  push(&b, "mpirun");
  if (geteuid() == 0) push(&b, "--allow-run-as-root");
  push(&b, "-np");
  push(&b, "%d", world);
  push(&b, "--host");
  push(&b, "%s", hosts);
  push(&b, "--map-by");
  push(&b, "slot");
  const char *agent = a->rsh_agent ? a->rsh_agent : getenv("PADDLEC_RSH_AGENT");
  if (agent && *agent) {
    push(&b, "--mca");
    push(&b, "plm_rsh_agent");
    push(&b, "%s", agent);
  }
  const char *extra = a->mpirun_args ? a->mpirun_args : getenv("PADDLEC_MPIRUN_ARGS");
  if (extra) {
    char *copy = strdup(extra), *save = NULL;
    for (char *t = copy ? strtok_r(copy, " \t", &save) : NULL; t; t = strtok_r(NULL, " \t", &save))
      push(&b, "%s", t);
    free(copy);
  }
  for (char **e = environ; *e; e++)
    if (forwarded(*e)) push(&b, "-x"), push(&b, "%.*s", (int)(strchr(*e, '=') - *e), *e);
  push(&b, "%s", self);
  push(&b, "--__mpi_child");
  push(&b, "--__job_key=%s", key);
  for (int i = 1; i <= a->flags_argc; i++) push(&b, "%s", a->argv[i]);
  char logdir[4096];
  fr_log_path(a, "", logdir, sizeof logdir);
  push(&b, "--log_dir=%s", logdir);
  push(&b, "--");
  for (int i = 0; i < a->prog_argc; i++) push(&b, "%s", a->prog_argv[i]);
  if (getenv("PADDLE_LOG_LEVEL") && strcmp(getenv("PADDLE_LOG_LEVEL"), "DEBUG") == 0)
    for (int i = 0; i < b.n; i++) FR_INFO("mpirun argv[%d]: %s", i, b.v[i]);

  fr_proc p = {.rank = 0};
  if (fr_start(&p, b.v, NULL)) goto done;
  char tail[4096];
  fr_log_path(a, "workerlog.0", tail, sizeof tail);
  int failed[1], nfailed = 0;
  int r = fr_watch(&p, 1, tail, fr_file_size(tail), failed, &nfailed);
  pd_launch_remove_shm(key);
  if (r == 0) {
    FR_INFO("All %d processes on %d nodes completed.", world, nn);
    rc = 0;
  } else if (r == 1) {
    char how[64];
    FR_ERROR(
        "ABORT!!! mpirun ended with %s: the job of %d processes on %d nodes was aborted. Please check the "
        "logs "
        "%s/workerlog.N on each node.",
        fr_describe_status(p.status, how, sizeof how), world, nn, a->log_dir ? a->log_dir : "log");
  }
done:
  argv_free(&b);
  pd_launch_env_clear(&env0);
  pd_launch_strv_free(eps, world);
  return rc;
}

/* True when ip is an address of this host (it can be bound). */
static int is_local_ip(const char *ip) {
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = 0};
  if (inet_pton(AF_INET, ip, &sa.sin_addr) != 1) return -1;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  int ok = bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
  close(fd);
  return ok;
}

static int env_int(const char *name, int *out) {
  const char *s = getenv(name);
  char *end = NULL;
  long v = s && *s ? strtol(s, &end, 10) : -1;
  if (!s || !*s || *end || v < 0 || v > 1 << 20) return -1;
  *out = (int)v;
  return 0;
}

int fr_mpi_child(fr_args *a) {
  int rank, size, lrank;
  if (env_int("OMPI_COMM_WORLD_RANK", &rank) || env_int("OMPI_COMM_WORLD_SIZE", &size) ||
      env_int("OMPI_COMM_WORLD_LOCAL_RANK", &lrank)) {
    fprintf(stderr,
            "fleetrun: --__mpi_child runs only under mpirun (OMPI_COMM_WORLD_RANK/SIZE/LOCAL_RANK unset)\n");
    return 1;
  }
  int n = a->nproc, nn = a->nips;
  if (size != n * nn || lrank != rank % n) {
    fprintf(stderr,
            "fleetrun: mpirun placed rank %d of %d as local rank %d, but the job is %d nodes x %d processes "
            "(expected local rank %d): the MPI rank would not equal PADDLE_TRAINER_ID\n",
            rank, size, lrank, nn, n, rank % n);
    return 1;
  }
  int node = rank / n;
  fr_lifeline_set_key(a->job_key);
  char **eps = NULL;
  if (pd_launch_endpoints(a->ip_list, nn, n, a->start_port_n ? a->start_port_n : DEFAULT_START_PORT, &eps) !=
      PD_OK) {
    fprintf(stderr, "fleetrun: %s\n", pd_last_error());
    return 1;
  }
  pd_launch_job job = {.nnodes = nn,
                       .node_rank = node,
                       .nproc_per_node = n,
                       .endpoints = eps,
                       .job_id = a->job_id,
                       .job_key = a->job_key,
                       .master = a->master,
                       .devices = a->dev_list,
                       .ndevices = a->ndev,
                       .omp_threads = pd_launch_default_omp_threads(n)};
  pd_launch_env env;
  pd_launch_env_init(&env);
  int rc = 1;
  fr_proc p = {.rank = rank};
  char name[64];
  snprintf(name, sizeof name, "workerlog.%d", rank % n);
  fr_log_path(a, name, p.log, sizeof p.log);
  if (pd_launch_env_build(&job, rank % n, &env) != PD_OK) {
    fprintf(stderr, "fleetrun: rank %d: %s\n", rank, pd_last_error());
    goto done;
  }
  if (fr_make_log_dir(a)) goto done;
  if (is_local_ip(a->ip_list[node]) == 0)
    fprintf(stderr, "fleetrun: warning: rank %d runs on a host without the address %s (node %d of --ips)\n",
            rank, a->ip_list[node], node);
  /* the program runs as our child (not exec'd) so this node's shm segments
   * of the job can be removed when it ends, whatever way it ends */
  if (fr_start(&p, a->prog_argv, &env)) goto done;
  int failed[1], nfailed = 0;
  int r = fr_watch(&p, 1, NULL, 0, failed, &nfailed);
  if (a->job_key) pd_launch_remove_shm(a->job_key);
  if (r == 0)
    rc = 0;
  else if (r == 1 && WIFSIGNALED(p.status))
    rc = 128 + WTERMSIG(p.status);
  else if (r == 1)
    rc = WEXITSTATUS(p.status);
done:
  pd_launch_env_clear(&env);
  pd_launch_strv_free(eps, n * nn);
  return rc;
}
