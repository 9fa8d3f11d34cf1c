/* fleetrun: paddle.distributed.launch / fleetrun for C programs. */
#ifndef PADDLEC_FLEETRUN_H
#define PADDLEC_FLEETRUN_H

#include <signal.h>
#include <stdio.h>
#include <sys/types.h>

/* The command line: every flag as given (NULL when absent), then what it
 * resolves to. */
typedef struct fr_args {
  const char *nproc_per_node, *devices, *gpus, *ips, *master, *nnodes, *log_dir, *job_id, *run_mode,
      *server_num, *worker_num, *servers, *workers, *max_restart, *start_port, *rsh_agent, *mpirun_args;
  int help;
  int mpi_child;       /* --__mpi_child: one rank started by mpirun */
  const char *job_key; /* --__job_key (mpi child) */
  char **argv;         /* the launcher's own argv */
  int flags_argc;      /* argv[1 .. flags_argc] are the launcher's flags */
  char **prog_argv;    /* the training program and its arguments (NULL-terminated) */
  int prog_argc;

  /* resolved */
  int nproc; /* processes per node */
  int n_nodes;
  int max_restart_n;
  int start_port_n; /* 0: free ports */
  int ps;           /* run_mode ps */
  int server_num_n, worker_num_n;
  char **ip_list;
  int nips;
  char **dev_list; /* NULL: none given */
  int ndev;
} fr_args;

/* Parses argv; 0 on success, else prints the error to stderr and returns
 * 2 (the exit status of a usage error). */
int fr_parse_args(int argc, char **argv, fr_args *a);
void fr_args_free(fr_args *a);
void fr_usage(FILE *f);
void fr_print_config(const fr_args *a);

/* "INFO 2024-05-01 08:33:30,247 local.c:120] message" (INFO to stdout,
 * WARNING and ERROR to stderr). */
void fr_log(const char *level, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
#define FR_INFO(...) fr_log("INFO", __FILE__, __LINE__, __VA_ARGS__)
#define FR_WARN(...) fr_log("WARNING", __FILE__, __LINE__, __VA_ARGS__)
#define FR_ERROR(...) fr_log("ERROR", __FILE__, __LINE__, __VA_ARGS__)

/* The signal that asked the launcher to stop (0: none). */
extern volatile sig_atomic_t fr_stop_signal;

/* One process the launcher watches. */
typedef struct fr_proc {
  pid_t pid;        /* leader of its own session / process group */
  int rank;         /* rank (or server index) shown in messages */
  int server;       /* parameter server: not waited for */
  char log[4096];   /* "" : output not redirected */
  int done, status; /* exited, and its wait status */
} fr_proc;

/* Starts argv as p's process: own session, stdout+stderr appended to
 * p->log when set, env applied (NULL: none); it gets SIGTERM when the
 * launcher dies (PR_SET_PDEATHSIG) and is on the lifeline. 0 or -1
 * (message printed). */
struct pd_launch_env;
int fr_start(fr_proc *p, char *const *argv, const struct pd_launch_env *env);

/* Watches the processes until every non-server one has exited 0 (servers
 * are then stopped), one fails (the others are stopped within ~3 s), or a
 * signal arrives. Streams the file `tail` (NULL: none) from `tail_offset`
 * to stdout meanwhile. Returns 0 on success, 1 on failure (failed[] gets
 * the failed procs' indices, *nfailed their count), or the signal number
 * (as a negative value). */
int fr_watch(fr_proc *procs, int n, const char *tail, long tail_offset, int *failed, int *nfailed);
/* Logs Paddle's "ABORT!!! Out of all N trainers, ..." line and, for each
 * failed process, how it ended and where its log is. */
void fr_report_abort(const fr_proc *procs, const int *failed, int nfailed, int total, const char *role);
/* "exit code 3" / "signal SIGKILL" */
const char *fr_describe_status(int status, char *buf, size_t cap);
/* SIGTERM to each live process group, SIGKILL after 3 s; reaps them. */
void fr_stop_all(fr_proc *procs, int n);

/* The lifeline (lifeline.c): a guard process that stops the launcher's
 * process groups and removes the job's /dev/shm names when the launcher
 * dies without doing so (SIGKILL). fr_start starts it (once) and registers
 * each process; fr_stop_all drops the groups it has stopped. The key names
 * the job's segments (set before the first fr_start; NULL: none). */
void fr_lifeline_set_key(const char *job_key);
void fr_lifeline_start(void);
void fr_lifeline_add(pid_t pgid);
void fr_lifeline_drop(pid_t pgid);
/* The launcher ends normally (every process stopped): the guard exits and
 * is reaped. */
void fr_lifeline_end(void);

/* The modes; each returns the launcher's exit status. */
int fr_run_collective(fr_args *a);
int fr_run_ps(fr_args *a);
int fr_run_mpirun(fr_args *a);
int fr_mpi_child(fr_args *a); /* execs the program, returns only on error */

/* <log_dir>/endpoints.log: "PADDLE_TRAINER_ENDPOINTS: " then one per line. */
int fr_write_endpoints_log(const fr_args *a, char *const *eps, int n);
/* "Local start N processes. ..." and the table of local process 0. */
void fr_print_first_env(const fr_args *a, int nlocal, const struct pd_launch_env *env0);

/* "log_dir/name" made absolute against the current directory. */
void fr_log_path(const fr_args *a, const char *name, char *buf, size_t cap);
/* Creates the log directory; 0 or -1 (message printed). */
int fr_make_log_dir(const fr_args *a);
/* The size of a file (0 when absent). */
long fr_file_size(const char *path);

#endif
