/* fleetrun's command line: Paddle's launcher flags, "--flag=value" or
 * "--flag value", then the program and its arguments. */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "distributed/env/launch_env.h"
#include "fleetrun.h"

typedef struct flag_def {
  const char *name;
  size_t offset; /* of the const char * field in fr_args */
  const char *help;
} flag_def;

#define F(field) offsetof(fr_args, field)
static const flag_def k_flags[] = {
    {"nproc_per_node", F(nproc_per_node), "processes per node (default: the number of --devices, else 1)"},
    {"nprocs", F(nproc_per_node), "alias of --nproc_per_node"},
    {"devices", F(devices), "device ids, comma separated; sets the process count on the CPU"},
    {"gpus", F(gpus), "alias of --devices (Paddle's legacy name)"},
    {"selected_gpus", F(gpus), "alias of --gpus"},
    {"ips", F(ips), "node ips, comma separated (default 127.0.0.1); several: the job runs under mpirun"},
    {"master", F(master), "PADDLE_MASTER endpoint ip:port (default: the first trainer endpoint)"},
    {"nnodes", F(nnodes), "number of nodes; must match the number of --ips"},
    {"log_dir", F(log_dir), "directory of workerlog.N, serverlog.N and endpoints.log (default log)"},
    {"job_id", F(job_id), "job name, exported as PADDLE_JOB_ID (default default)"},
    {"run_mode", F(run_mode), "collective (default) or ps"},
    {"server_num", F(server_num), "ps: number of parameter servers on this node"},
    {"worker_num", F(worker_num), "ps: number of trainers on this node"},
    {"servers", F(servers), "ps: server endpoints ip:port, comma separated"},
    {"workers", F(workers), "ps: trainer endpoints ip[:port], comma separated"},
    {"max_restart", F(max_restart), "restart the local job up to N times when a process fails (default 0)"},
    {"start_port", F(start_port),
     "first port of the endpoints (default: free ports on one node, 6070 on several;"
     " env FLAGS_START_PORT)"},
    {"rsh_agent", F(rsh_agent), "several nodes: mpirun's plm_rsh_agent (env PADDLEC_RSH_AGENT)"},
    {"mpirun_args", F(mpirun_args),
     "several nodes: extra mpirun arguments, space separated (env PADDLEC_MPIRUN_ARGS)"},
};
#undef F
#define NFLAGS ((int)(sizeof k_flags / sizeof k_flags[0]))

void fr_usage(FILE *f) {
  fprintf(f,
          "usage: fleetrun [flags] training_program [program args...]\n"
          "\n"
          "Starts a distributed job: one process per rank with Paddle's launcher environment\n"
          "(PADDLE_TRAINER_ID, PADDLE_TRAINERS_NUM, PADDLE_TRAINER_ENDPOINTS, ...); the output of\n"
          "local process N goes to <log_dir>/workerlog.N, workerlog.0 is shown on the console.\n"
          "Flags take a value as --flag=value or --flag value:\n\n");
  for (int i = 0; i < NFLAGS; i++) fprintf(f, "  --%-16s %s\n", k_flags[i].name, k_flags[i].help);
  fprintf(f, "  --%-16s %s\n", "help, -h", "this text");
}

static const char **field(fr_args *a, size_t off) { return (const char **)((char *)a + off); }

/* Whole-string integer in [lo, hi]; -1 on error (message printed). */
static int parse_int(const char *flag, const char *s, int lo, int hi, int *out) {
  char *end = NULL;
  errno = 0;
  long v = s && *s ? strtol(s, &end, 10) : 0;
  if (!s || !*s || *end || errno || v < lo || v > hi) {
    fprintf(stderr, "fleetrun: error: --%s must be an integer in [%d, %d], got '%s'\n", flag, lo, hi,
            s ? s : "");
    return -1;
  }
  *out = (int)v;
  return 0;
}

/* A comma list with no empty entries; -1 on error (message printed). */
static int parse_list(const char *flag, const char *s, char ***out, int *n) {
  *out = pd_launch_split(s, ',', n);
  if (!*out) {
    fprintf(stderr, "fleetrun: error: out of memory\n");
    return -1;
  }
  for (int i = 0; i < *n; i++)
    if (!(*out)[i][0]) {
      fprintf(stderr, "fleetrun: error: --%s has an empty entry: '%s'\n", flag, s);
      return -1;
    }
  return 0;
}

static int resolve(fr_args *a) {
  if (a->devices && a->gpus && strcmp(a->devices, a->gpus) != 0) {
    fprintf(stderr, "fleetrun: error: --devices (%s) and --gpus (%s) disagree; give one of them\n",
            a->devices, a->gpus);
    return -1;
  }
  const char *dev = a->devices ? a->devices : a->gpus;
  if (dev && parse_list(a->devices ? "devices" : "gpus", dev, &a->dev_list, &a->ndev)) return -1;
  if (parse_list("ips", a->ips ? a->ips : "127.0.0.1", &a->ip_list, &a->nips)) return -1;
  if (a->nproc_per_node) {
    if (parse_int("nproc_per_node", a->nproc_per_node, 1, 4096, &a->nproc)) return -1;
    if (a->dev_list && a->ndev % a->nproc != 0) {
      fprintf(stderr,
              "fleetrun: error: %d devices (%s) cannot be split evenly over --nproc_per_node=%d processes\n",
              a->ndev, dev, a->nproc);
      return -1;
    }
  } else {
    a->nproc = a->dev_list ? a->ndev : 1;
  }
  a->n_nodes = a->nips;
  if (a->nnodes) {
    int nn;
    if (parse_int("nnodes", a->nnodes, 1, 4096, &nn)) return -1;
    if (nn != a->nips) {
      fprintf(stderr,
              "fleetrun: error: --nnodes=%d but --ips names %d node(s) (%s); several nodes need one ip each "
              "in --ips\n",
              nn, a->nips, a->ips ? a->ips : "127.0.0.1");
      return -1;
    }
  }
  if (a->max_restart && parse_int("max_restart", a->max_restart, 0, 1000, &a->max_restart_n)) return -1;
  const char *sp = a->start_port ? a->start_port : getenv("FLAGS_START_PORT");
  if (sp && *sp &&
      parse_int(a->start_port ? "start_port" : "start_port (FLAGS_START_PORT)", sp, 1, 65535,
                &a->start_port_n))
    return -1;
  if (a->run_mode && strcmp(a->run_mode, "collective") != 0 && strcmp(a->run_mode, "ps") != 0) {
    fprintf(stderr, "fleetrun: error: --run_mode must be collective or ps, got '%s'\n", a->run_mode);
    return -1;
  }
  /* Paddle: an explicit run_mode, else any parameter-server flag means ps */
  a->ps = a->run_mode ? strcmp(a->run_mode, "ps") == 0
                      : (a->server_num || a->worker_num || a->servers || a->workers);
  if (a->server_num && parse_int("server_num", a->server_num, 1, 4096, &a->server_num_n)) return -1;
  if (a->worker_num && parse_int("worker_num", a->worker_num, 1, 4096, &a->worker_num_n)) return -1;
  const char *why = a->master ? pd_launch_endpoint_problem(a->master) : NULL;
  if (why) {
    fprintf(stderr, "fleetrun: error: --master must be ip:port with a port in [1, 65535], got '%s': %s\n",
            a->master, why);
    return -1;
  }
  return 0;
}

int fr_parse_args(int argc, char **argv, fr_args *a) {
  memset(a, 0, sizeof *a);
  a->argv = argv;
  int i = 1, dashdash = 0;
  for (; i < argc; i++) {
    const char *arg = argv[i];
    if (strcmp(arg, "--") == 0) {
      dashdash = 1;
      break;
    }
    if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
      a->help = 1;
      continue;
    }
    if (strcmp(arg, "--__mpi_child") == 0) {
      a->mpi_child = 1;
      continue;
    }
    if (arg[0] != '-') break; /* the training program */
    const char *name = arg + (arg[1] == '-' ? 2 : 1);
    const char *eq = strchr(name, '=');
    size_t nlen = eq ? (size_t)(eq - name) : strlen(name);
    const char **slot = NULL;
    if (nlen == 9 && strncmp(name, "__job_key", 9) == 0) slot = &a->job_key;
    for (int f = 0; f < NFLAGS && !slot; f++)
      if (strlen(k_flags[f].name) == nlen && strncmp(k_flags[f].name, name, nlen) == 0)
        slot = field(a, k_flags[f].offset);
    if (!slot) {
      fprintf(stderr, "fleetrun: error: unknown flag '%.*s' (see fleetrun --help)\n",
              (int)(nlen + (name - arg)), arg);
      return 2;
    }
    if (eq) {
      *slot = eq + 1;
    } else if (i + 1 < argc) {
      *slot = argv[++i];
    } else {
      fprintf(stderr, "fleetrun: error: flag '%s' needs a value\n", arg);
      return 2;
    }
  }
  a->flags_argc = i - 1;
  i += dashdash;
  if (a->help) return 0;
  if (i >= argc) {
    fprintf(stderr,
            "fleetrun: error: no training program given (usage: fleetrun [flags] program [args...])\n");
    return 2;
  }
  a->prog_argv = argv + i;
  a->prog_argc = argc - i;
  return resolve(a) ? 2 : 0;
}

void fr_args_free(fr_args *a) {
  pd_launch_strv_free(a->ip_list, a->nips);
  pd_launch_strv_free(a->dev_list, a->ndev);
  a->ip_list = a->dev_list = NULL;
}

/* Python's repr of a str (the legacy launcher prints the argument list). */
static void print_repr(const char *s) {
  char q = strchr(s, '\'') && !strchr(s, '"') ? '"' : '\'';
  putchar(q);
  for (const char *p = s; *p; p++) {
    if (*p == q || *p == '\\') putchar('\\');
    if (*p == '\n')
      fputs("\\n", stdout);
    else if (*p == '\t')
      fputs("\\t", stdout);
    else
      putchar(*p);
  }
  putchar(q);
}

/* name: value, sorted by name, as Paddle's _print_arguments; an empty value
 * prints "name:" (the seed's layout). */
void fr_print_config(const fr_args *a) {
  struct {
    const char *name, *value;
  } rows[] = {
      {"devices", a->devices ? a->devices : "None"},
      {"gpus", a->gpus ? a->gpus : "None"},
      {"ips", a->ips ? a->ips : "127.0.0.1"},
      {"job_id", a->job_id ? a->job_id : "default"},
      {"log_dir", a->log_dir ? a->log_dir : "log"},
      {"master", a->master ? a->master : "None"},
      {"max_restart", a->max_restart ? a->max_restart : "0"},
      {"nnodes", a->nnodes ? a->nnodes : "None"},
      {"nproc_per_node", a->nproc_per_node ? a->nproc_per_node : "None"},
      {"run_mode", a->run_mode ? a->run_mode : "None"},
      {"server_num", a->server_num ? a->server_num : "None"},
      {"servers", a->servers ? a->servers : ""},
      {"training_script", a->prog_argv[0]},
      {"training_script_args", NULL},
      {"worker_num", a->worker_num ? a->worker_num : "None"},
      {"workers", a->workers ? a->workers : ""},
  };
  printf("-----------  Configuration Arguments -----------\n");
  for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
    if (!rows[r].value) {
      printf("%s: [", rows[r].name);
      for (int i = 1; i < a->prog_argc; i++) {
        if (i > 1) fputs(", ", stdout);
        print_repr(a->prog_argv[i]);
      }
      printf("]\n");
    } else if (!rows[r].value[0]) {
      printf("%s:\n", rows[r].name);
    } else {
      printf("%s: %s\n", rows[r].name, rows[r].value);
    }
  }
  printf("------------------------------------------------\n");
  fflush(stdout);
}
