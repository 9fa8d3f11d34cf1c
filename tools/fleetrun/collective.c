/* Collective mode on one node: nproc local processes, Paddle's legacy
 * console output, the watch loop and --max_restart. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "distributed/env/launch_env.h"
#include "fleetrun.h"

/* ['--gpus', '--ips']: the device-related flags given, as Paddle logs them. */
static void device_flags(const fr_args *a, char *buf, size_t cap) {
  const char *names[] = {"--gpus", "--devices", "--ips", "--nproc_per_node"};
  const char *vals[] = {a->gpus, a->devices, a->ips, a->nproc_per_node};
  size_t n = (size_t)snprintf(buf, cap, "[");
  int first = 1;
  for (int i = 0; i < 4; i++)
    if (vals[i] && n < cap) {
      n += (size_t)snprintf(buf + n, cap - n, "%s'%s'", first ? "" : ", ", names[i]);
      first = 0;
    }
  if (n < cap) snprintf(buf + n, cap - n, "]");
}

int fr_write_endpoints_log(const fr_args *a, char *const *eps, int n) {
  char path[4096];
  fr_log_path(a, "endpoints.log", path, sizeof path);
  FILE *f = fopen(path, "w");
  if (!f) {
    FR_ERROR("cannot write %s", path);
    return -1;
  }
  fprintf(f, "PADDLE_TRAINER_ENDPOINTS: \n");
  for (int i = 0; i < n; i++) fprintf(f, "%s\n", eps[i]);
  fclose(f);
  return 0;
}

/* The table of local process 0 and the line after it. */
void fr_print_first_env(const fr_args *a, int nlocal, const pd_launch_env *env0) {
  char *table = pd_launch_format_table(env0, pd_launch_table_keys, 5, "Distributed Envs", "Value");
  FR_INFO("Local start %d processes. First process distributed environment info (Only For Debug):", nlocal);
  fputs(table ? table : "(out of memory)\n", stdout);
  free(table);
  const char *dir = a->log_dir ? a->log_dir : "log";
  FR_INFO(
      "details abouts PADDLE_TRAINER_ENDPOINTS can be found in %s/endpoints.log, and detail running logs "
      "maybe "
      "found in %s/workerlog.0",
      dir, dir);
}

/* One run of the local job: 0 done, 1 a process failed, <0 a signal. */
static int attempt(fr_args *a, const char *key, const char *gloo_dir) {
  int n = a->nproc;
  char **eps = NULL;
  if (pd_launch_endpoints(a->ip_list, 1, n, a->start_port_n, &eps) != PD_OK) {
    FR_ERROR("%s", pd_last_error());
    return 1;
  }
  pd_launch_job job = {.nnodes = 1,
                       .node_rank = 0,
                       .nproc_per_node = n,
                       .endpoints = eps,
                       .job_id = a->job_id,
                       .job_key = key,
                       .master = a->master,
                       .devices = a->dev_list,
                       .ndevices = a->ndev,
                       .gloo_fs_path = gloo_dir,
                       .omp_threads = pd_launch_default_omp_threads(n)};
  pd_launch_env *envs = calloc((size_t)n, sizeof *envs);
  fr_proc *procs = calloc((size_t)n, sizeof *procs);
  int *failed = calloc((size_t)n, sizeof *failed);
  int result = 1, started = 0;
  if (!envs || !procs || !failed) {
    FR_ERROR("out of memory for %d processes", n);
    goto done;
  }
  for (int i = 0; i < n; i++) {
    pd_launch_env_init(&envs[i]);
    if (pd_launch_env_build(&job, i, &envs[i]) != PD_OK) {
      FR_ERROR("%s", pd_last_error());
      goto done;
    }
  }
  if (fr_write_endpoints_log(a, eps, n)) goto done;
  fr_print_first_env(a, n, &envs[0]);

  char tail[4096];
  fr_log_path(a, "workerlog.0", tail, sizeof tail);
  long offset = fr_file_size(tail);
  for (; started < n && !fr_stop_signal; started++) {
    procs[started].rank = started;
    char name[64];
    snprintf(name, sizeof name, "workerlog.%d", started);
    fr_log_path(a, name, procs[started].log, sizeof procs[started].log);
    if (fr_start(&procs[started], a->prog_argv, &envs[started])) break;
  }
  if (started < n && !fr_stop_signal) {
    fr_stop_all(procs, started);
    goto done;
  }
  int nfailed = 0;
  result = fr_watch(procs, started, tail, offset, failed, &nfailed);
  if (result == 1) fr_report_abort(procs, failed, nfailed, n, "trainer");
done:
  for (int i = 0; envs && i < n; i++) pd_launch_env_clear(&envs[i]);
  free(envs);
  free(procs);
  free(failed);
  pd_launch_strv_free(eps, n);
  return result;
}

int fr_run_collective(fr_args *a) {
  char flags[256];
  device_flags(a, flags, sizeof flags);
  FR_INFO("Run collective mode. gpu arguments:%s, cpu count:%ld", flags, sysconf(_SC_NPROCESSORS_ONLN));
  if (fr_make_log_dir(a)) return 1;
  char key[160];
  pd_launch_make_job_key(a->job_id, key, sizeof key);
  fr_lifeline_set_key(key);
  char gloo_dir[] = "/tmp/paddlec-gloo-XXXXXX";
  const char *gloo = mkdtemp(gloo_dir);
  int rc = 1;
  for (int restart = 0;; restart++) {
    int r = attempt(a, key, gloo);
    pd_launch_remove_shm(key);
    if (r == 0) {
      FR_INFO("Local processes completed.");
      rc = 0;
      break;
    }
    if (r < 0 || fr_stop_signal) break;
    if (restart >= a->max_restart_n) {
      if (a->max_restart_n)
        FR_ERROR("the job failed after %d restart(s) (--max_restart=%d)", restart, a->max_restart_n);
      break;
    }
    FR_INFO("Restarting the local job: restart %d of %d (--max_restart)", restart + 1, a->max_restart_n);
  }
  if (gloo) rmdir(gloo);
  return rc;
}
