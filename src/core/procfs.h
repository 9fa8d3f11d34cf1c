/* Reading /proc from threads that must not allocate: the thread governor's
 * watcher and the core claims run beside forks from other threads, and a
 * fork in the middle of an allocation would leave the child a held
 * allocator lock or a leak. Both helpers use open/read/getdents64 into
 * buffers of the caller's or on the stack. */
#ifndef PADDLEC_CORE_PROCFS_H
#define PADDLEC_CORE_PROCFS_H

#include <stddef.h>
#include <sys/types.h>

/* Reads a small /proc file whole into buf (NUL-terminated): its length, or
 * -1. */
ssize_t pd_proc_read(const char *path, char *buf, size_t size);

/* A task's state letter ('R' ready to run, 'S' sleeping, ...) from the
 * stat file at stat_path, or 0 when it cannot be read; *cpu (unless NULL)
 * the CPU it last ran on, or -1. */
char pd_proc_stat(const char *stat_path, int *cpu);

/* The CPU a task last ran on (field 39 of the stat file at stat_path, e.g.
 * /proc/<pid>/stat or /proc/self/task/<tid>/stat), or -1. */
int pd_proc_cpu_of(const char *stat_path);

/* Calls fn for every thread of the process (/proc/self/task). */
void pd_for_each_own_task(void (*fn)(pid_t tid, void *arg), void *arg);
/* Calls fn for every numeric entry of a /proc directory (/proc: the
 * processes; /proc/<pid>/task: a process's threads). */
void pd_proc_for_each_numeric(const char *dir, void (*fn)(pid_t id, void *arg), void *arg);

#endif
