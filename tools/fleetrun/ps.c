/* Legacy parameter-server mode: servers (serverlog.N) and trainers
 * (workerlog.N) of this node with TRAINING_ROLE=PSERVER / TRAINER; the job
 * ends when every trainer has exited 0, the servers are then stopped. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "distributed/env/launch_env.h"
#include "fleetrun.h"

#define DEFAULT_WORKER_PORT 6170

/* 127.0.0.1 / localhost, or an address this host can bind. */
static int local_ip(const char *ep) {
  char ip[256];
  const char *colon = strrchr(ep, ':');
  snprintf(ip, sizeof ip, "%.*s", colon ? (int)(colon - ep) : (int)strlen(ep), ep);
  if (strcmp(ip, "localhost") == 0 || strncmp(ip, "127.", 4) == 0) return 1;
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = 0};
  if (inet_pton(AF_INET, ip, &sa.sin_addr) != 1) return 0;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  int ok = bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
  close(fd);
  return ok;
}

/* n endpoints on 127.0.0.1: start .. start+n-1, or free ports when start <= 0. */
static char **local_endpoints(int n, int start) {
  char ip[] = "127.0.0.1";
  char *ips[] = {ip};
  char **eps = NULL;
  return pd_launch_endpoints(ips, 1, n, start, &eps) == PD_OK ? eps : NULL;
}

static char **resolve_servers(const fr_args *a, int *n) {
  if (a->servers) {
    char **v = pd_launch_split(a->servers, ',', n);
    for (int i = 0; v && i < *n; i++) {
      const char *why = pd_launch_endpoint_problem(v[i]);
      if (why) {
        fprintf(stderr, "fleetrun: error: --servers entry '%s': %s\n", v[i], why);
        pd_launch_strv_free(v, *n);
        return NULL;
      }
    }
    return v;
  }
  if (!a->server_num_n) {
    fprintf(stderr, "fleetrun: error: ps mode needs --server_num or --servers\n");
    return NULL;
  }
  *n = a->server_num_n;
  char **v = local_endpoints(*n, a->start_port_n);
  if (!v) fprintf(stderr, "fleetrun: error: %s\n", pd_last_error());
  return v;
}

static char **resolve_workers(const fr_args *a, int nservers, int *n) {
  if (a->workers) {
    char **v = pd_launch_split(a->workers, ',', n);
    for (int i = 0; v && i < *n; i++)
      if (!strchr(v[i], ':')) { /* Paddle: a missing port is 6170 + server count + index */
        char *ep = NULL;
        if (asprintf(&ep, "%s:%d", v[i], DEFAULT_WORKER_PORT + nservers + i) < 0) ep = NULL;
        if (ep) free(v[i]), v[i] = ep;
      }
    for (int i = 0; v && i < *n; i++) {
      const char *why = pd_launch_endpoint_problem(v[i]);
      if (why) {
        fprintf(stderr, "fleetrun: error: --workers entry '%s': %s\n", v[i], why);
        pd_launch_strv_free(v, *n);
        return NULL;
      }
    }
    return v;
  }
  *n = a->worker_num_n ? a->worker_num_n : a->nproc_per_node ? a->nproc : 0;
  if (!*n) {
    fprintf(stderr, "fleetrun: error: ps mode needs --worker_num, --workers or --nproc_per_node\n");
    return NULL;
  }
  char **v = local_endpoints(*n, a->start_port_n ? a->start_port_n + nservers : 0);
  if (!v) fprintf(stderr, "fleetrun: error: %s\n", pd_last_error());
  return v;
}

/* One run: 0 done, 1 failed, <0 signal. */
static int attempt(fr_args *a, char **servers, int ns, char **workers, int nw, const char *key,
                   const char *gloo) {
  pd_launch_job common = {.job_id = a->job_id, .job_key = key, .gloo_fs_path = gloo};
  int total = ns + nw, nlocal_s = 0, nlocal_w = 0;
  for (int i = 0; i < ns; i++) nlocal_s += local_ip(servers[i]);
  for (int i = 0; i < nw; i++) nlocal_w += local_ip(workers[i]);
  if (!nlocal_s && !nlocal_w) {
    FR_ERROR("no server or trainer endpoint of --servers/--workers is an address of this host");
    return 1;
  }
  common.omp_threads = pd_launch_default_omp_threads(nlocal_s + nlocal_w);
  fr_proc *procs = calloc((size_t)total, sizeof *procs);
  pd_launch_env *envs = calloc((size_t)total, sizeof *envs);
  int *failed = calloc((size_t)total, sizeof *failed);
  int np = 0, result = 1;
  if (!procs || !envs || !failed) goto done;
  for (int role = 0; role < 2; role++) {
    int count = role == 0 ? ns : nw, local = 0;
    char **eps = role == 0 ? servers : workers;
    for (int i = 0; i < count; i++) {
      if (!local_ip(eps[i])) continue;
      fr_proc *p = &procs[np];
      pd_launch_env *e = &envs[np];
      pd_launch_env_init(e);
      np++;
      if (pd_launch_ps_env_build(servers, ns, workers, nw, role == 0 ? "PSERVER" : "TRAINER", i, &common,
                                 e) != PD_OK) {
        FR_ERROR("%s", pd_last_error());
        goto done;
      }
      p->rank = i;
      p->server = role == 0;
      char name[64];
      snprintf(name, sizeof name, "%s.%d", role == 0 ? "serverlog" : "workerlog", local);
      fr_log_path(a, name, p->log, sizeof p->log);
      if (local++ == 0) {
        char *table = pd_launch_format_table(e, NULL, 0, "Distributed Envs", "Value");
        FR_INFO("Local %s start %d processes. First process distributed environment info (Only For Debug):",
                role == 0 ? "server" : "worker", role == 0 ? nlocal_s : nlocal_w);
        fputs(table ? table : "(out of memory)\n", stdout);
        free(table);
      }
    }
  }
  char tail[4096];
  fr_log_path(a, "workerlog.0", tail, sizeof tail);
  long offset = fr_file_size(tail);
  /* servers first, as Paddle */
  int started = 0;
  for (; started < np && !fr_stop_signal; started++)
    if (fr_start(&procs[started], a->prog_argv, &envs[started])) break;
  if (started < np) {
    fr_stop_all(procs, started);
    result = fr_stop_signal ? -(int)fr_stop_signal : 1;
    goto done;
  }
  int nfailed = 0;
  result = fr_watch(procs, np, nlocal_w ? tail : NULL, offset, failed, &nfailed);
  if (result == 1) {
    /* report servers and trainers separately, each against its own count */
    int fs[64], nfs = 0, fw[64], nfw = 0;
    for (int i = 0; i < nfailed; i++) {
      if (procs[failed[i]].server && nfs < 64) fs[nfs++] = failed[i];
      if (!procs[failed[i]].server && nfw < 64) fw[nfw++] = failed[i];
    }
    if (nfw) fr_report_abort(procs, fw, nfw, nw, "trainer");
    if (nfs) fr_report_abort(procs, fs, nfs, ns, "server");
  }
done:
  for (int i = 0; envs && i < np; i++) pd_launch_env_clear(&envs[i]);
  free(envs);
  free(procs);
  free(failed);
  return result;
}

int fr_run_ps(fr_args *a) {
  int ns = 0, nw = 0;
  char **servers = resolve_servers(a, &ns);
  char **workers = servers ? resolve_workers(a, ns, &nw) : NULL;
  if (!servers || !workers) {
    pd_launch_strv_free(servers, ns);
    return 2;
  }
  FR_INFO(
      "Run parameter-sever mode. pserver arguments:%d servers (%s), %d trainers (%s), accelerators count:0",
      ns, a->servers ? "--servers" : "--server_num", nw, a->workers ? "--workers" : "--worker_num");
  int rc = 1;
  if (fr_make_log_dir(a) == 0) {
    char key[160];
    pd_launch_make_job_key(a->job_id, key, sizeof key);
    fr_lifeline_set_key(key);
    char gloo_dir[] = "/tmp/paddlec-gloo-XXXXXX";
    const char *gloo = mkdtemp(gloo_dir);
    for (int restart = 0;; restart++) {
      int r = attempt(a, servers, ns, workers, nw, key, gloo);
      pd_launch_remove_shm(key);
      if (r == 0) {
        FR_INFO("Local processes completed.");
        rc = 0;
        break;
      }
      if (r < 0 || fr_stop_signal || restart >= a->max_restart_n) break;
      FR_INFO("Restarting the local job: restart %d of %d (--max_restart)", restart + 1, a->max_restart_n);
    }
    if (gloo) rmdir(gloo);
  }
  pd_launch_strv_free(servers, ns);
  pd_launch_strv_free(workers, nw);
  return rc;
}
