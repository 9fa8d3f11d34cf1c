/* The per-process environment contract of a launched job (see launch_env.h). */
#define _GNU_SOURCE
#include "launch_env.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* ---- the ordered NAME=value list ------------------------------------- */

void pd_launch_env_init(pd_launch_env *e) { memset(e, 0, sizeof *e); }

void pd_launch_env_clear(pd_launch_env *e) {
  for (int i = 0; i < e->n; i++) {
    free(e->keys[i]);
    free(e->vals[i]);
  }
  free(e->keys);
  free(e->vals);
  memset(e, 0, sizeof *e);
}

pd_status pd_launch_env_set(pd_launch_env *e, const char *key, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *val = NULL;
  int len = vasprintf(&val, fmt, ap);
  va_end(ap);
  if (len < 0) return pd_set_error(PD_ERR_MEMORY, "launch env: out of memory formatting %s", key);
  for (int i = 0; i < e->n; i++) {
    if (strcmp(e->keys[i], key) == 0) {
      free(e->vals[i]);
      e->vals[i] = val;
      return PD_OK;
    }
  }
  if (e->n == e->cap) {
    int cap = e->cap ? 2 * e->cap : 32;
    char **k = realloc(e->keys, (size_t)cap * sizeof *k);
    if (k) e->keys = k;
    char **v = k ? realloc(e->vals, (size_t)cap * sizeof *v) : NULL;
    if (v) e->vals = v;
    if (!k || !v) {
      free(val);
      return pd_set_error(PD_ERR_MEMORY, "launch env: out of memory adding %s", key);
    }
    e->cap = cap;
  }
  char *k = strdup(key);
  if (!k) {
    free(val);
    return pd_set_error(PD_ERR_MEMORY, "launch env: out of memory adding %s", key);
  }
  e->keys[e->n] = k;
  e->vals[e->n] = val;
  e->n++;
  return PD_OK;
}

const char *pd_launch_env_get(const pd_launch_env *e, const char *key) {
  for (int i = 0; i < e->n; i++)
    if (strcmp(e->keys[i], key) == 0) return e->vals[i];
  return NULL;
}

pd_status pd_launch_env_apply(const pd_launch_env *e) {
  for (int i = 0; i < e->n; i++)
    if (setenv(e->keys[i], e->vals[i], 1) != 0)
      return pd_set_error(PD_ERR_INVALID, "launch env: setenv(%s) failed: %s", e->keys[i], strerror(errno));
  return PD_OK;
}

/* ---- strings ------------------------------------------------------------ */

char **pd_launch_split(const char *s, char sep, int *n) {
  int count = 1;
  for (const char *p = s; *p; p++) count += *p == sep;
  char **v = calloc((size_t)count, sizeof *v);
  if (!v) return NULL;
  const char *start = s;
  for (int i = 0; i < count; i++) {
    const char *end = strchr(start, sep);
    size_t len = end ? (size_t)(end - start) : strlen(start);
    v[i] = strndup(start, len);
    if (!v[i]) {
      pd_launch_strv_free(v, i);
      return NULL;
    }
    start = end ? end + 1 : start + len;
  }
  *n = count;
  return v;
}

void pd_launch_strv_free(char **v, int n) {
  if (!v) return;
  for (int i = 0; i < n; i++) free(v[i]);
  free(v);
}

/* Joins v[from .. to) with sep into a malloc'ed string. */
static char *join(char *const *v, int from, int to, const char *sep) {
  size_t len = 1;
  for (int i = from; i < to; i++) len += strlen(v[i]) + strlen(sep);
  char *s = malloc(len);
  if (!s) return NULL;
  s[0] = '\0';
  for (int i = from; i < to; i++) {
    if (i > from) strcat(s, sep);
    strcat(s, v[i]);
  }
  return s;
}

/* ---- the contract --------------------------------------------------------- */

const char *const pd_launch_table_keys[5] = {"PADDLE_CURRENT_ENDPOINT", "PADDLE_TRAINERS_NUM",
                                             "FLAGS_selected_gpus", "PADDLE_TRAINER_ENDPOINTS",
                                             "PADDLE_TRAINER_ID"};

pd_status pd_launch_env_build(const pd_launch_job *job, int local_rank, pd_launch_env *out) {
  int nproc = job->nproc_per_node, nnodes = job->nnodes;
  if (nproc < 1 || nnodes < 1 || job->node_rank < 0 || job->node_rank >= nnodes)
    return pd_set_error(PD_ERR_INVALID, "launch env: bad layout: %d nodes of %d processes, node rank %d",
                        nnodes, nproc, job->node_rank);
  if (local_rank < 0 || local_rank >= nproc)
    return pd_set_error(PD_ERR_INVALID, "launch env: local rank %d outside [0, %d)", local_rank, nproc);
  if (job->devices && (job->ndevices < nproc || job->ndevices % nproc != 0))
    return pd_set_error(PD_ERR_INVALID, "launch env: %d device ids cannot be split over %d processes",
                        job->ndevices, nproc);
  int world = nnodes * nproc, rank = job->node_rank * nproc + local_rank;

  /* this node's device ids: the given ones or one virtual id per process */
  int ndev = job->devices ? job->ndevices : nproc;
  char **dev = job->devices;
  char **own = NULL;
  if (!dev) {
    own = calloc((size_t)nproc, sizeof *own);
    for (int i = 0; own && i < nproc; i++)
      if (asprintf(&own[i], "%d", i) < 0) own[i] = NULL;
    for (int i = 0; own && i < nproc; i++)
      if (!own[i]) {
        pd_launch_strv_free(own, nproc);
        own = NULL;
      }
    if (!own) return pd_set_error(PD_ERR_MEMORY, "launch env: out of memory");
    dev = own;
  }
  int per = ndev / nproc;
  char *mine = join(dev, local_rank * per, (local_rank + 1) * per, ",");
  char *node_ids = join(dev, 0, ndev, ":");
  char *eps = join(job->endpoints, 0, world, ",");
  char *world_ids = NULL;
  if (node_ids) {
    /* every node runs the same device list (the launcher's --devices) */
    size_t len = (strlen(node_ids) + 1) * (size_t)nnodes + 1;
    world_ids = malloc(len);
    if (world_ids) {
      world_ids[0] = '\0';
      for (int i = 0; i < nnodes; i++) {
        if (i) strcat(world_ids, ",");
        strcat(world_ids, node_ids);
      }
    }
  }
  pd_status st = PD_OK;
  if (!mine || !node_ids || !eps || !world_ids) st = pd_set_error(PD_ERR_MEMORY, "launch env: out of memory");
  const char *gloo = getenv("PADDLE_WITH_GLOO");
#define SET(k, ...) \
  if (st == PD_OK) st = pd_launch_env_set(out, k, __VA_ARGS__)
  SET("PADDLE_CURRENT_ENDPOINT", "%s", job->endpoints[rank]);
  SET("PADDLE_TRAINERS_NUM", "%d", world);
  SET("FLAGS_selected_gpus", "%s", mine);
  SET("PADDLE_TRAINER_ENDPOINTS", "%s", eps);
  SET("PADDLE_TRAINER_ID", "%d", rank);
  SET("PADDLE_RANK_IN_NODE", "%d", local_rank);
  SET("PADDLE_LOCAL_DEVICE_IDS", "%s", mine);
  SET("PADDLE_WORLD_DEVICE_IDS", "%s", world_ids);
  SET("FLAGS_selected_accelerators", "%s", mine);
  SET("PADDLE_MASTER", "%s", job->master ? job->master : job->endpoints[0]);
  SET("PADDLE_GLOBAL_SIZE", "%d", world);
  SET("PADDLE_GLOBAL_RANK", "%d", rank);
  SET("PADDLE_LOCAL_SIZE", "%d", nproc);
  SET("PADDLE_LOCAL_RANK", "%d", local_rank);
  SET("PADDLE_NNODES", "%d", nnodes);
  SET("PADDLE_JOB_ID", "%s", job->job_id ? job->job_id : "default");
  SET("PADDLE_WITH_GLOO", "%s", gloo && *gloo ? gloo : "0");
  SET("PADDLE_GLOO_RENDEZVOUS", "3");
  if (job->gloo_fs_path) SET("PADDLE_GLOO_FS_PATH", "%s", job->gloo_fs_path);
  if (!job->devices) SET("PADDLE_DISTRI_BACKEND", "gloo"); /* no devices: the CPU backend */
  if (job->job_key) SET("PADDLEC_JOB_KEY", "%s", job->job_key);
  if (job->comm_backend) SET("PADDLEC_COMM_BACKEND", "%s", job->comm_backend);
  if (job->omp_threads > 0) SET("OMP_NUM_THREADS", "%d", job->omp_threads);
#undef SET
  free(mine);
  free(node_ids);
  free(eps);
  free(world_ids);
  pd_launch_strv_free(own, own ? nproc : 0);
  return st;
}

pd_status pd_launch_ps_env_build(char *const *servers, int nservers, char *const *workers, int nworkers,
                                 const char *role, int index, const pd_launch_job *common,
                                 pd_launch_env *out) {
  int server = strcmp(role, "PSERVER") == 0;
  if ((!server && strcmp(role, "TRAINER") != 0) || index < 0 || index >= (server ? nservers : nworkers))
    return pd_set_error(PD_ERR_INVALID, "launch env: no %s %d in a job of %d servers and %d trainers", role,
                        index, nservers, nworkers);
  const char *ep = server ? servers[index] : workers[index];
  const char *colon = strrchr(ep, ':');
  if (!colon) return pd_set_error(PD_ERR_INVALID, "launch env: endpoint '%s' has no port", ep);
  char *slist = join(servers, 0, nservers, ",");
  char *wlist = join(workers, 0, nworkers, ",");
  pd_status st = slist && wlist ? PD_OK : pd_set_error(PD_ERR_MEMORY, "launch env: out of memory");
  const char *gloo = getenv("PADDLE_WITH_GLOO");
#define SET(k, ...) \
  if (st == PD_OK) st = pd_launch_env_set(out, k, __VA_ARGS__)
  SET("PADDLE_PSERVERS_IP_PORT_LIST", "%s", slist);
  SET("PADDLE_TRAINER_ENDPOINTS", "%s", wlist);
  SET("PADDLE_PORT", "%s", colon + 1);
  SET("TRAINING_ROLE", "%s", role);
  SET("PADDLE_ROLE", "%s", role);
  SET("PADDLE_TRAINERS_NUM", "%d", nworkers);
  SET("POD_IP", "%.*s", (int)(colon - ep), ep);
  if (!server) {
    SET("PADDLE_TRAINER_ID", "%d", index);
    SET("FLAGS_selected_gpus", "0");
  }
  SET("PADDLE_WITH_GLOO", "%s", gloo && *gloo ? gloo : "0");
  SET("PADDLE_GLOO_RENDEZVOUS", "3");
  if (common && common->gloo_fs_path) SET("PADDLE_GLOO_FS_PATH", "%s", common->gloo_fs_path);
  if (common && common->job_id) SET("PADDLE_JOB_ID", "%s", common->job_id);
  if (common && common->job_key) SET("PADDLEC_JOB_KEY", "%s", common->job_key);
  if (common && common->comm_backend) SET("PADDLEC_COMM_BACKEND", "%s", common->comm_backend);
  if (common && common->omp_threads > 0) SET("OMP_NUM_THREADS", "%d", common->omp_threads);
#undef SET
  free(slist);
  free(wlist);
  return st;
}

/* ---- the table -------------------------------------------------------- */

/* Appends s to buf (grown as needed); returns false on allocation failure. */
typedef struct sbuf {
  char *s;
  size_t len, cap;
  int oom;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...) {
  if (b->oom) return;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (b->len + (size_t)n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 1024;
    while (cap < b->len + (size_t)n + 1) cap *= 2;
    char *s = realloc(b->s, cap);
    if (!s) {
      b->oom = 1;
      return;
    }
    b->s = s;
    b->cap = cap;
  }
  va_start(ap, fmt);
  vsnprintf(b->s + b->len, b->cap - b->len, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
}

/* Python's "|{:>K}  {:^V}|": a centred value puts the odd space on the right. */
static void table_row(sbuf *b, int kw, int vw, const char *k, const char *v) {
  char shown[64];
  size_t vl = strlen(v);
  if ((int)vl >= vw) {
    snprintf(shown, sizeof shown, "... %s", v + vl - 41);
    v = shown;
    vl = strlen(v);
  }
  int pad = vw - (int)vl;
  int left = pad > 0 ? pad / 2 : 0, right = pad > 0 ? pad - left : 0;
  sb_printf(b, "    |%*s  %*s%s%*s|\n", kw, k, left, "", v, right, "");
}

char *pd_launch_format_table(const pd_launch_env *e, const char *const *keys, int nkeys, const char *head_key,
                             const char *head_val) {
  const int vw = 45;
  int kw = 40;
  int n = keys ? nkeys : e->n;
  for (int i = 0; i < n; i++) {
    int l = (int)strlen(keys ? keys[i] : e->keys[i]);
    if (l > kw) kw = l;
  }
  sbuf b = {0};
  char *border = malloc((size_t)(kw + vw + 2) + 1), *line = malloc((size_t)(kw + vw + 2) + 1);
  if (!border || !line) {
    free(border);
    free(line);
    return NULL;
  }
  memset(border, '=', (size_t)(kw + vw + 2));
  memset(line, '-', (size_t)(kw + vw + 2));
  border[kw + vw + 2] = line[kw + vw + 2] = '\0';
  sb_printf(&b, "    +%s+\n", border);
  table_row(&b, kw, vw, head_key, head_val);
  sb_printf(&b, "    +%s+\n", line);
  for (int i = 0; i < n; i++) {
    const char *k = keys ? keys[i] : e->keys[i];
    const char *v = keys ? pd_launch_env_get(e, k) : e->vals[i];
    table_row(&b, kw, vw, k, v ? v : "");
  }
  sb_printf(&b, "    +%s+\n", border);
  free(border);
  free(line);
  if (b.oom) {
    free(b.s);
    return NULL;
  }
  return b.s;
}

/* ---- ports and endpoints ------------------------------------------------ */

const char *pd_launch_port_problem(const char *port) {
  if (!port || !*port) return "the port is missing";
  long v = 0;
  for (const char *p = port; *p; p++) {
    if (*p < '0' || *p > '9') return "the port must be an integer in [1, 65535]";
    if (v <= 65535) v = v * 10 + (*p - '0');
  }
  return v >= 1 && v <= 65535 ? NULL : "the port must be an integer in [1, 65535]";
}

const char *pd_launch_endpoint_problem(const char *ep) {
  const char *colon = ep ? strrchr(ep, ':') : NULL;
  if (!colon || colon == ep) return "it is not host:port";
  return pd_launch_port_problem(colon + 1);
}

pd_status pd_launch_free_ports(int n, int *ports) {
  if (n < 1) return pd_set_error(PD_ERR_INVALID, "free ports: asked for %d ports", n);
  int *fds = malloc((size_t)n * sizeof *fds);
  if (!fds) return pd_set_error(PD_ERR_MEMORY, "free ports: out of memory for %d ports", n);
  pd_status st = PD_OK;
  int opened = 0;
  for (; opened < n; opened++) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY), .sin_port = 0};
    socklen_t al = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &al) != 0) {
      st = pd_set_error(PD_ERR_IO, "free ports: cannot bind a TCP port (%d of %d): %s", opened + 1, n,
                        strerror(errno));
      if (fd >= 0) close(fd);
      break;
    }
    fds[opened] = fd;
    ports[opened] = ntohs(a.sin_port);
  }
  for (int i = 0; i < opened; i++) close(fds[i]);
  free(fds);
  return st;
}

pd_status pd_launch_endpoints(char *const *ips, int nips, int nproc, int start_port, char ***out) {
  if (nips < 1 || nproc < 1)
    return pd_set_error(PD_ERR_INVALID, "endpoints: %d ips and %d processes per node", nips, nproc);
  if (start_port > 0 && start_port + nproc - 1 > 65535)
    return pd_set_error(PD_ERR_INVALID, "endpoints: ports %d..%d exceed 65535", start_port,
                        start_port + nproc - 1);
  int *ports = malloc((size_t)nproc * sizeof *ports);
  char **v = calloc((size_t)nips * (size_t)nproc, sizeof *v);
  if (!ports || !v) {
    free(ports);
    free(v);
    return pd_set_error(PD_ERR_MEMORY, "endpoints: out of memory");
  }
  pd_status st = PD_OK;
  if (start_port > 0)
    for (int j = 0; j < nproc; j++) ports[j] = start_port + j;
  else
    st = pd_launch_free_ports(nproc, ports);
  for (int i = 0; st == PD_OK && i < nips; i++)
    for (int j = 0; st == PD_OK && j < nproc; j++)
      if (asprintf(&v[i * nproc + j], "%s:%d", ips[i], ports[j]) < 0) {
        v[i * nproc + j] = NULL;
        st = pd_set_error(PD_ERR_MEMORY, "endpoints: out of memory");
      }
  free(ports);
  if (st != PD_OK) {
    pd_launch_strv_free(v, nips * nproc);
    return st;
  }
  *out = v;
  return PD_OK;
}

/* ---- the rest --------------------------------------------------------- */

int pd_launch_default_omp_threads(int nproc) {
  const char *u = getenv("OMP_NUM_THREADS");
  if (u && *u) return 0;
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  if (ncpu < 1) ncpu = 1;
  long t = ncpu / (nproc > 0 ? nproc : 1);
  return t < 1 ? 1 : (int)t;
}

void pd_launch_make_job_key(const char *job_id, char *buf, size_t cap) {
  static atomic_int counter;
  char id[33];
  size_t n = 0;
  for (const char *p = job_id ? job_id : "default"; *p && n < sizeof id - 1; p++) {
    char c = *p;
    int ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.';
    id[n++] = ok ? c : '_';
  }
  id[n] = '\0';
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  snprintf(buf, cap, "%s.%ld.%lx%03lx.%d", id, (long)getpid(), (long)ts.tv_sec & 0xfffffff,
           (long)(ts.tv_nsec / 1000000), atomic_fetch_add(&counter, 1));
}

int pd_launch_remove_shm(const char *job_key) {
  if (!job_key || !*job_key) return 0;
  char prefix[300];
  int pl = snprintf(prefix, sizeof prefix, "paddlec-%s", job_key);
  if (pl <= 0 || (size_t)pl >= sizeof prefix) return 0;
  DIR *d = opendir("/dev/shm");
  if (!d) return 0;
  int removed = 0;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    /* the key itself or the key followed by '-': another job's key that
     * merely starts with ours is left alone */
    if (strncmp(de->d_name, prefix, (size_t)pl) != 0) continue;
    char next = de->d_name[pl];
    if (next != '\0' && next != '-') continue;
    char path[600];
    snprintf(path, sizeof path, "/dev/shm/%s", de->d_name);
    if (unlink(path) == 0) removed++;
  }
  closedir(d);
  return removed;
}

int pd_launch_die_with_parent(pid_t parent, int sig) {
  if (prctl(PR_SET_PDEATHSIG, sig) != 0) return 0; /* not Linux: nothing more to do */
  return getppid() == parent ? 0 : -1;
}

const char *pd_launch_signal_name(int sig, char *buf, size_t cap) {
  const char *abbrev = sig > 0 ? sigabbrev_np(sig) : NULL;
  if (abbrev)
    snprintf(buf, cap, "SIG%s", abbrev);
  else
    snprintf(buf, cap, "signal %d", sig);
  return buf;
}
