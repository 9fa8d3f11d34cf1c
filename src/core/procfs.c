/* Reading /proc without allocating (procfs.h). */
#define _GNU_SOURCE
#include "procfs.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

ssize_t pd_proc_read(const char *path, char *buf, size_t size) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t n = read(fd, buf, size - 1);
  close(fd);
  if (n <= 0) return -1;
  buf[n] = 0;
  return n;
}

char pd_proc_stat(const char *stat_path, int *cpu) {
  char buf[512];
  if (cpu) *cpu = -1;
  if (pd_proc_read(stat_path, buf, sizeof buf) < 0) return 0;
  const char *p = strrchr(buf, ')'); /* the state, then the fields from the fourth on, follow the command */
  if (!p || p[1] != ' ') return 0;
  char state = p[2];
  if (cpu) {
    for (int field = 2; p && field < 39; field++) p = strchr(p + 1, ' ');
    *cpu = p ? atoi(p + 1) : -1;
  }
  return state;
}

int pd_proc_cpu_of(const char *stat_path) {
  int cpu;
  pd_proc_stat(stat_path, &cpu);
  return cpu;
}

void pd_for_each_own_task(void (*fn)(pid_t tid, void *arg), void *arg) {
  pd_proc_for_each_numeric("/proc/self/task", fn, arg);
}

void pd_proc_for_each_numeric(const char *dir, void (*fn)(pid_t id, void *arg), void *arg) {
  int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return;
  char ents[4096];
  long got;
  while ((got = syscall(SYS_getdents64, dfd, ents, sizeof ents)) > 0) {
    for (long off = 0; off < got;) {
      /* struct linux_dirent64: d_ino (8), d_off (8), d_reclen (2), d_type (1), d_name */
      unsigned short reclen;
      memcpy(&reclen, ents + off + 16, sizeof reclen);
      const char *name = ents + off + 19;
      off += reclen;
      if (name[0] >= '0' && name[0] <= '9') fn((pid_t)atoi(name), arg);
    }
  }
  close(dfd);
}
