/* The lifeline: a small guard process that outlives the launcher by a
 * moment. The launcher holds the write end of a pipe, the guard the read
 * end; the launcher tells it each process group it starts and each one it
 * has stopped. When the pipe closes (the launcher exited, or was killed
 * with SIGKILL and could clean up nothing) the guard stops the groups still
 * listed (SIGTERM, SIGKILL after 3 s: grandchildren too, and a rank that
 * ignores SIGTERM) and removes the job's /dev/shm names. The ranks
 * themselves also get SIGTERM from the kernel when the launcher dies
 * (PR_SET_PDEATHSIG, see fr_start); the guard covers what that cannot. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "distributed/env/launch_env.h"
#include "fleetrun.h"

typedef struct lifeline_msg {
  int32_t op; /* 'A' add a group, 'D' drop it */
  int32_t pgid;
} lifeline_msg;

static int g_fd = -1; /* the launcher's write end; -1: no guard */
static pid_t g_guard;
static char g_key[160];

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* True while some process of group pg is alive (zombies do not count: the
 * launcher's orphans wait for whoever reaps them now). */
static int group_alive(pid_t pg) {
  if (kill(-pg, 0) != 0 && errno == ESRCH) return 0;
  DIR *d = opendir("/proc");
  if (!d) return 1;
  int alive = 0;
  for (struct dirent *e; !alive && (e = readdir(d)) != NULL;) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    char path[300], buf[512];
    snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    /* "pid (comm) state ppid pgrp ..."; comm may hold spaces and ')' */
    char *rp = strrchr(buf, ')');
    char state = 0;
    long ppid = 0, pgrp = 0;
    if (rp && sscanf(rp + 1, " %c %ld %ld", &state, &ppid, &pgrp) == 3 && pgrp == pg && state != 'Z' &&
        state != 'X')
      alive = 1;
  }
  closedir(d);
  return alive;
}

static void stop_groups(const pid_t *pg, int n) {
  for (int i = 0; i < n; i++) kill(-pg[i], SIGTERM);
  for (int waited = 0; waited < 3000; waited += 20) {
    int live = 0;
    for (int i = 0; i < n && !live; i++) live = group_alive(pg[i]);
    if (!live) return;
    sleep_ms(20);
  }
  for (int i = 0; i < n; i++) kill(-pg[i], SIGKILL);
  for (int waited = 0; waited < 2000; waited += 20) {
    int live = 0;
    for (int i = 0; i < n && !live; i++) live = group_alive(pg[i]);
    if (!live) return;
    sleep_ms(20);
  }
}

static void guard(int rfd, pid_t launcher) {
  setsid(); /* a terminal's Ctrl-C is the launcher's to handle */
  /* it only ever writes to stderr: whoever reads the launcher's stdout
   * (a pipe, $(...)) need not wait for the guard */
  int null = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null >= 0) {
    dup2(null, STDIN_FILENO);
    dup2(null, STDOUT_FILENO);
    close(null);
  }
  signal(SIGINT, SIG_IGN);
  signal(SIGHUP, SIG_IGN);
  signal(SIGPIPE, SIG_IGN);
  pid_t *pg = NULL;
  int n = 0, cap = 0;
  lifeline_msg m;
  for (;;) {
    ssize_t r = read(rfd, &m, sizeof m);
    if (r < 0 && errno == EINTR) continue;
    if (r != (ssize_t)sizeof m) break; /* the launcher is gone */
    if (m.op == 'A') {
      if (n == cap) {
        int c = cap ? 2 * cap : 16;
        pid_t *v = realloc(pg, (size_t)c * sizeof *v);
        if (!v) continue;
        pg = v;
        cap = c;
      }
      pg[n++] = m.pgid;
    } else if (m.op == 'D') {
      for (int i = 0; i < n; i++)
        if (pg[i] == m.pgid) {
          pg[i] = pg[--n];
          break;
        }
    }
  }
  if (n > 0) {
    fprintf(stderr, "fleetrun: the launcher (pid %ld) is gone; stopping its %d process group(s)\n",
            (long)launcher, n);
    stop_groups(pg, n);
  }
  if (g_key[0]) pd_launch_remove_shm(g_key);
  free(pg);
  _exit(0);
}

void fr_lifeline_set_key(const char *job_key) { snprintf(g_key, sizeof g_key, "%s", job_key ? job_key : ""); }

void fr_lifeline_start(void) {
  static int tried;
  if (tried) return;
  tried = 1;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    FR_WARN("cannot create the lifeline pipe (%s): processes may outlive a killed launcher", strerror(errno));
    return;
  }
  pid_t launcher = getpid();
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) {
    FR_WARN("cannot start the lifeline guard (%s): processes may outlive a killed launcher", strerror(errno));
    close(fds[0]);
    close(fds[1]);
    return;
  }
  if (pid == 0) {
    close(fds[1]);
    guard(fds[0], launcher);
  }
  close(fds[0]);
  g_fd = fds[1];
  g_guard = pid;
}

void fr_lifeline_end(void) {
  if (g_fd < 0) return;
  close(g_fd);
  g_fd = -1;
  /* it finds nothing left to stop and exits at once: the launcher ends
   * after its guard, never before */
  while (waitpid(g_guard, NULL, 0) < 0 && errno == EINTR) {
  }
}

static void send_msg(int op, pid_t pgid) {
  if (g_fd < 0) return;
  lifeline_msg m = {op, (int32_t)pgid};
  while (write(g_fd, &m, sizeof m) < 0 && errno == EINTR) {
  }
}

void fr_lifeline_add(pid_t pgid) { send_msg('A', pgid); }
void fr_lifeline_drop(pid_t pgid) { send_msg('D', pgid); }
