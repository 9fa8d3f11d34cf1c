/* The temporary files of atomic saves: "<path>.tmp.<pid>.<n>" beside the
 * checkpoint. A save creates its own; a save killed before its rename
 * leaves one behind, which the next save to the same path removes once the
 * process named in it is gone. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checkpoint_internal.h"

/* Numbers the temporary files of this process, so that threads saving to
 * the same path at once never share one. */
static atomic_ullong g_tmp_serial;

int pd_ckpt_open_temp(const char *path, char *tmp, size_t cap) {
  for (int attempt = 0;; attempt++) {
    unsigned long long n = atomic_fetch_add(&g_tmp_serial, 1);
    snprintf(tmp, cap, "%s.tmp.%ld.%llu", path, (long)getpid(), n);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0 || errno != EEXIST || attempt == 1000) return fd;
  }
}

/* The pid of "<base>.tmp.<pid>.<n>" (digits only in both numbers), or 0
 * when name is anything else. */
static long temp_pid(const char *name, const char *base, size_t base_len) {
  if (strncmp(name, base, base_len) != 0 || strncmp(name + base_len, ".tmp.", 5) != 0) return 0;
  const char *p = name + base_len + 5;
  long pid = 0;
  const char *start = p;
  for (; *p >= '0' && *p <= '9'; p++) {
    if (pid > 1L << 30) return 0; /* no pid is that large */
    pid = pid * 10 + (*p - '0');
  }
  if (p == start || *p != '.' || !p[1]) return 0;
  for (p++; *p; p++)
    if (*p < '0' || *p > '9') return 0;
  return pid;
}

int pd_ckpt_remove_dead_temps(const char *path) {
  const char *slash = strrchr(path, '/');
  const char *base = slash ? slash + 1 : path;
  size_t dir_len = slash ? (size_t)(slash - path) : 0;
  char *dir = slash ? strndup(path, dir_len ? dir_len : 1) : strdup(".");
  if (!dir) return 0;
  size_t base_len = strlen(base);
  int removed = 0;
  DIR *d = base_len ? opendir(dir) : NULL;
  for (struct dirent *e; d && (e = readdir(d)) != NULL;) {
    long pid = temp_pid(e->d_name, base, base_len);
    /* ESRCH only: EPERM means the process exists under another user */
    if (pid <= 0 || pid == (long)getpid() || kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
    char *full = NULL;
    if (asprintf(&full, "%s/%s", dir, e->d_name) < 0) break;
    if (unlink(full) == 0) removed++;
    free(full);
  }
  if (d) closedir(d);
  free(dir);
  return removed;
}
