/* Starting, watching and stopping the launcher's processes; the log line. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "distributed/env/launch_env.h"
#include "fleetrun.h"

volatile sig_atomic_t fr_stop_signal;

void fr_log(const char *level, const char *file, int line, const char *fmt, ...) {
  struct timeval tv;
  gettimeofday(&tv, NULL);
  struct tm tm;
  localtime_r(&tv.tv_sec, &tm);
  char when[32];
  strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
  const char *base = strrchr(file, '/');
  FILE *f = strcmp(level, "INFO") == 0 ? stdout : stderr;
  fflush(stdout);
  fprintf(f, "%s %s,%03ld %s:%d] ", level, when, (long)(tv.tv_usec / 1000), base ? base + 1 : file, line);
  va_list ap;
  va_start(ap, fmt);
  vfprintf(f, fmt, ap);
  va_end(ap);
  fputc('\n', f);
  fflush(f);
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

long fr_file_size(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 ? (long)st.st_size : 0;
}

void fr_log_path(const fr_args *a, const char *name, char *buf, size_t cap) {
  const char *dir = a->log_dir ? a->log_dir : "log";
  if (dir[0] == '/') {
    snprintf(buf, cap, "%s/%s", dir, name);
    return;
  }
  char cwd[2048];
  if (!getcwd(cwd, sizeof cwd)) snprintf(cwd, sizeof cwd, ".");
  snprintf(buf, cap, "%s/%s/%s", cwd, dir, name);
}

int fr_make_log_dir(const fr_args *a) {
  const char *dir = a->log_dir ? a->log_dir : "log";
  char path[4096];
  snprintf(path, sizeof path, "%s", dir);
  /* mkdir -p */
  for (char *p = path + 1;; p++) {
    if (*p == '/' || *p == '\0') {
      char c = *p;
      *p = '\0';
      if (mkdir(path, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "fleetrun: error: cannot create the log directory '%s': %s\n", path, strerror(errno));
        return -1;
      }
      *p = c;
      if (!c) break;
    }
  }
  return 0;
}

int fr_start(fr_proc *p, char *const *argv, const pd_launch_env *env) {
  fr_lifeline_start();
  int fd = -1;
  if (p->log[0]) {
    fd = open(p->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) {
      fprintf(stderr, "fleetrun: error: cannot open the log '%s': %s\n", p->log, strerror(errno));
      return -1;
    }
  }
  fflush(NULL);
  pid_t launcher = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    fprintf(stderr, "fleetrun: error: fork failed: %s\n", strerror(errno));
    if (fd >= 0) close(fd);
    return -1;
  }
  if (pid == 0) {
    /* own session: a terminal's Ctrl-C reaches only the launcher, which
     * stops the whole process group of each child */
    setsid();
    /* a launcher killed with SIGKILL must not leave its ranks running */
    if (pd_launch_die_with_parent(launcher, SIGTERM) < 0) _exit(127);
    signal(SIGPIPE, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    if (fd >= 0 && (dup2(fd, STDOUT_FILENO) < 0 || dup2(fd, STDERR_FILENO) < 0)) _exit(127);
    if (env && pd_launch_env_apply(env) != PD_OK) {
      fprintf(stderr, "fleetrun: %s\n", pd_last_error());
      _exit(127);
    }
    execvp(argv[0], argv);
    fprintf(stderr, "fleetrun: cannot run '%s': %s\n", argv[0], strerror(errno));
    fflush(stderr);
    _exit(127);
  }
  if (fd >= 0) close(fd);
  fr_lifeline_add(pid); /* its own session: pgid == pid */
  p->pid = pid;
  p->done = 0;
  p->status = 0;
  if (getenv("PADDLE_LOG_LEVEL") && strcmp(getenv("PADDLE_LOG_LEVEL"), "DEBUG") == 0)
    FR_INFO("launch proc_id:%ld idx:%d", (long)pid, p->rank);
  return 0;
}

/* Copies what was appended to the streamed file since the last call. */
static void stream(int *fd, const char *path, long offset) {
  if (!path) return;
  if (*fd < 0) {
    *fd = open(path, O_RDONLY | O_CLOEXEC);
    if (*fd < 0) return;
    if (lseek(*fd, offset, SEEK_SET) < 0) offset = 0;
  }
  char buf[65536];
  ssize_t r;
  while ((r = read(*fd, buf, sizeof buf)) > 0) {
    fflush(stdout);
    for (ssize_t w = 0; w < r;) {
      ssize_t k = write(STDOUT_FILENO, buf + w, (size_t)(r - w));
      if (k <= 0) {
        if (k < 0 && errno == EINTR) continue;
        break; /* a closed stdout loses the stream, not the job */
      }
      w += k;
    }
  }
}

static void reap(fr_proc *p, int block) {
  if (p->done || p->pid <= 0) return;
  int status;
  pid_t r = waitpid(p->pid, &status, block ? 0 : WNOHANG);
  if (r == p->pid) {
    p->done = 1;
    p->status = status;
  } else if (r < 0 && errno == ECHILD) {
    p->done = 1;
    p->status = 0;
  }
}

void fr_stop_all(fr_proc *procs, int n) {
  for (int i = 0; i < n; i++) {
    reap(&procs[i], 0);
    if (!procs[i].done && procs[i].pid > 0) kill(-procs[i].pid, SIGTERM);
  }
  for (int waited = 0; waited < 3000; waited += 20) {
    int live = 0;
    for (int i = 0; i < n; i++) {
      reap(&procs[i], 0);
      live += !procs[i].done;
    }
    if (!live) break;
    sleep_ms(20);
  }
  for (int i = 0; i < n; i++) {
    if (procs[i].pid > 0) kill(-procs[i].pid, SIGKILL); /* the group: grandchildren too */
    if (!procs[i].done) reap(&procs[i], 1);
    if (procs[i].pid > 0) fr_lifeline_drop(procs[i].pid);
  }
}

static int failed_status(int status) { return !WIFEXITED(status) || WEXITSTATUS(status) != 0; }

int fr_watch(fr_proc *procs, int n, const char *tail, long tail_offset, int *failed, int *nfailed) {
  int fd = -1, result = 0;
  *nfailed = 0;
  for (;;) {
    stream(&fd, tail, tail_offset);
    if (fr_stop_signal) {
      result = -(int)fr_stop_signal;
      break;
    }
    int waiting = 0;
    for (int i = 0; i < n; i++) {
      reap(&procs[i], 0);
      if (!procs[i].done && !procs[i].server) waiting++;
    }
    /* Several found in one poll (a loaded machine): a process killed by a
     * signal is the likelier cause of the others' failure, so it goes first. */
    for (int signaled = 1; signaled >= 0; signaled--)
      for (int i = 0; i < n; i++)
        if (procs[i].done && failed_status(procs[i].status) &&
            (WIFSIGNALED(procs[i].status) != 0) == signaled)
          failed[(*nfailed)++] = i;
    if (*nfailed) {
      result = 1;
      break;
    }
    if (!waiting) break;
    sleep_ms(50);
  }
  if (result == 0)
    for (int i = 0; i < n; i++)
      if (procs[i].server && !procs[i].done) {
        FR_INFO("all workers exit, going to finish parameter server and heter_worker.");
        break;
      }
  fr_stop_all(procs, n);
  stream(&fd, tail, tail_offset);
  if (fd >= 0) close(fd);
  return result;
}

const char *fr_describe_status(int status, char *buf, size_t cap) {
  char name[32];
  if (WIFSIGNALED(status))
    snprintf(buf, cap, "signal %s", pd_launch_signal_name(WTERMSIG(status), name, sizeof name));
  else
    snprintf(buf, cap, "exit code %d", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  return buf;
}

void fr_report_abort(const fr_proc *procs, const int *failed, int nfailed, int total, const char *role) {
  char ranks[1024] = "";
  size_t len = 0;
  for (int i = 0; i < nfailed && len < sizeof ranks - 16; i++)
    len += (size_t)snprintf(ranks + len, sizeof ranks - len, "%s%d", i ? ", " : "", procs[failed[i]].rank);
  FR_ERROR("ABORT!!! Out of all %d %ss, the %s process with rank=[%s] was aborted. Please check its log.",
           total, role, role, ranks);
  for (int i = 0; i < nfailed; i++) {
    char how[64];
    const fr_proc *p = &procs[failed[i]];
    FR_ERROR("%s %d ended with %s; its log: %s", role, p->rank,
             fr_describe_status(p->status, how, sizeof how), p->log[0] ? p->log : "(console)");
  }
}
