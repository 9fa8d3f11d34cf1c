/* Keeping the process's threads on a share of the cores while other
 * processes leave none free (core_claim.h says why). Only threads whose
 * mask is still the process's own are moved. On release the moved threads,
 * and threads born during the claim that inherited its mask, get the
 * process's mask back; a thread the user pinned before the claim stays where
 * it is, even on the claimed CPUs. (One the user pins during a claim to
 * exactly the claimed CPUs is taken for an heir and released.)
 *
 * While a claim holds and the process computes, one holder thread per
 * claimed CPU keeps that CPU counted busy by the kernel's balancer: it only
 * calls sched_yield, so any other task there runs first (core_claim.h). */
#define _GNU_SOURCE
#include <stddef.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "core_claim.h"
#include "procfs.h"

static cpu_set_t g_own;     /* the process's CPUs, given back on release */
static cpu_set_t g_claimed; /* the CPUs of the claim in force */
static bool g_allowed, g_hold_allowed, g_claimed_now;
/* a spread (core_claim.h): the compute thread's CPU, g_claimed the others' */
static cpu_set_t g_compute_set;
static pid_t g_compute;
static bool g_spread;
/* the threads there were when the claim began, and whether it moved each */
enum { MAX_SEEN = 1024 };
static struct seen {
  pid_t tid;
  bool moved;
} g_seen[MAX_SEEN];
static int g_nseen;
/* One abstract socket bound per claimed CPU: a machine-wide lock that the
 * kernel drops when the process dies, so that two processes of this library
 * never claim the same CPU (they would share it for as long as both claim,
 * where the kernel cannot move either away). */
static int g_locks[CPU_SETSIZE];
static int g_nlocks;

/* Binds the CPU's lock name; the socket, or -1 when another process holds it. */
static int lock_cpu(int cpu) {
  int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  int len = snprintf(a.sun_path + 1, sizeof a.sun_path - 1, "paddlec-core-claim-%d", cpu);
  if (bind(fd, (struct sockaddr *)&a, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + len)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

static void unlock_cpus(void) {
  for (int i = 0; i < g_nlocks; i++) close(g_locks[i]);
  g_nlocks = 0;
}
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;

/* ---- the holders ---------------------------------------------------------- */
enum { HOLD_STOP, HOLD_RUN, HOLD_PAUSE };
static _Atomic int g_hold_state = HOLD_STOP;
static pthread_mutex_t g_hold_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_hold_cv = PTHREAD_COND_INITIALIZER;
enum { MAX_HOLDERS = 256 };
static pthread_t g_holders[MAX_HOLDERS];
static clockid_t g_holder_clock[MAX_HOLDERS];
static int g_nholders;

static void *hold_main(void *arg) {
  (void)arg;
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, NULL); /* the process's signals go to its own threads */
  for (;;) {
    int s = atomic_load_explicit(&g_hold_state, memory_order_relaxed);
    if (s == HOLD_RUN) {
      sched_yield(); /* whatever else is ready on this CPU runs first */
      continue;
    }
    if (s == HOLD_STOP) return NULL;
    pthread_mutex_lock(&g_hold_mu);
    while (atomic_load(&g_hold_state) == HOLD_PAUSE) pthread_cond_wait(&g_hold_cv, &g_hold_mu);
    pthread_mutex_unlock(&g_hold_mu);
  }
}

static void set_hold_state(int s) {
  pthread_mutex_lock(&g_hold_mu);
  atomic_store(&g_hold_state, s);
  pthread_cond_broadcast(&g_hold_cv);
  pthread_mutex_unlock(&g_hold_mu);
}

/* One holder per claimed CPU, pinned there, holding from the start (a
 * claim begins while the process computes). A holder that cannot be
 * made is done without: the claim works, only less well. */
static void holders_start(void) {
  if (!g_hold_allowed) return;
  set_hold_state(HOLD_RUN);
  for (int c = 0; c < CPU_SETSIZE && g_nholders < MAX_HOLDERS; c++) {
    if (!CPU_ISSET(c, &g_claimed)) continue;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(c, &one);
    pthread_attr_t at;
    if (pthread_attr_init(&at) != 0) break;
    bool ok = pthread_attr_setaffinity_np(&at, sizeof one, &one) == 0 &&
              pthread_create(&g_holders[g_nholders], &at, hold_main, NULL) == 0;
    pthread_attr_destroy(&at);
    if (!ok) break;
    if (pthread_getcpuclockid(g_holders[g_nholders], &g_holder_clock[g_nholders]) != 0)
      g_holder_clock[g_nholders] = (clockid_t)-1;
    g_nholders++;
  }
}

static void holders_stop(void) {
  if (g_nholders == 0) return;
  set_hold_state(HOLD_STOP);
  for (int i = 0; i < g_nholders; i++) pthread_join(g_holders[i], NULL);
  g_nholders = 0;
}

void pd_core_claim_hold(bool hold) {
  pthread_mutex_lock(&g_mu);
  if (g_nholders > 0 && atomic_load(&g_hold_state) != (hold ? HOLD_RUN : HOLD_PAUSE))
    set_hold_state(hold ? HOLD_RUN : HOLD_PAUSE);
  pthread_mutex_unlock(&g_mu);
}

int pd_core_claim_holders(bool *holding) {
  pthread_mutex_lock(&g_mu);
  int n = g_nholders;
  if (holding) *holding = n > 0 && atomic_load(&g_hold_state) == HOLD_RUN;
  pthread_mutex_unlock(&g_mu);
  return n;
}

long long pd_core_claim_holders_cpu_ns(void) {
  pthread_mutex_lock(&g_mu);
  long long ns = 0;
  for (int i = 0; i < g_nholders; i++) {
    struct timespec ts;
    if (g_holder_clock[i] != (clockid_t)-1 && clock_gettime(g_holder_clock[i], &ts) == 0)
      ns += (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
  }
  pthread_mutex_unlock(&g_mu);
  return ns;
}

int pd_core_claim_size(int cpus, int free_cores, int threads, double others) {
  if (free_cores > 0 || cpus < 2 || threads < 2) return 0;
  if (others < 0) others = 0;
  int k = (int)((double)cpus * threads / (threads + others));
  if (k < 1) k = 1;
  if (k > cpus - 1) k = cpus - 1;
  return k;
}

bool pd_core_claim_init(void) {
  pthread_mutex_lock(&g_mu);
  const char *off = getenv("PADDLEC_CORE_CLAIM");
  bool user_binds = getenv("OMP_PROC_BIND") || getenv("OMP_PLACES") || getenv("GOMP_CPU_AFFINITY");
  g_allowed = !(off && (strcasecmp(off, "off") == 0 || strcmp(off, "0") == 0)) && !user_binds &&
              sched_getaffinity(0, sizeof g_own, &g_own) == 0 && CPU_COUNT(&g_own) >= 2;
  g_hold_allowed = g_allowed && !(off && strcasecmp(off, "pin") == 0);
  bool allowed = g_allowed;
  pthread_mutex_unlock(&g_mu);
  return allowed;
}

/* The CPU thread tid of this process last ran on, or -1. */
static int thread_cpu(pid_t tid) {
  char path[64];
  snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)tid);
  return pd_proc_cpu_of(path);
}

static const struct seen *seen_at_claim(pid_t tid) {
  for (int i = 0; i < g_nseen; i++)
    if (g_seen[i].tid == tid) return &g_seen[i];
  return NULL;
}

static void claim_task(pid_t tid, void *arg) {
  pid_t caller = *(const pid_t *)arg;
  const cpu_set_t *to = g_spread && tid == g_compute ? &g_compute_set : &g_claimed;
  cpu_set_t cur;
  bool moved = tid != caller && sched_getaffinity(tid, sizeof cur, &cur) == 0 && CPU_EQUAL(&cur, &g_own) &&
               sched_setaffinity(tid, sizeof *to, to) == 0;
  if (g_nseen < MAX_SEEN) g_seen[g_nseen++] = (struct seen){tid, moved};
}

/* Moves the process's threads once g_claimed (and for a spread
 * g_compute_set) is set and locked; the caller (the watcher) stays. */
static void apply_claim(void) {
  pid_t caller = (pid_t)syscall(SYS_gettid);
  g_nseen = 0;
  pd_for_each_own_task(claim_task, &caller);
  g_claimed_now = true;
}

static void release_task(pid_t tid, void *arg) {
  (void)arg;
  const struct seen *s = seen_at_claim(tid);
  cpu_set_t cur;
  if ((!s || s->moved) && sched_getaffinity(tid, sizeof cur, &cur) == 0 &&
      (CPU_EQUAL(&cur, &g_claimed) || (g_spread && CPU_EQUAL(&cur, &g_compute_set))))
    (void)sched_setaffinity(tid, sizeof g_own, &g_own); /* one that just exited: nothing to do */
}

/* A spread's thread born to the compute thread (a helper it started) has the
 * compute thread's CPU: it goes to the others'. */
static void refresh_task(pid_t tid, void *arg) {
  (void)arg;
  cpu_set_t cur;
  if (tid == g_compute || seen_at_claim(tid) || sched_getaffinity(tid, sizeof cur, &cur) != 0) return;
  bool moved = CPU_EQUAL(&cur, &g_compute_set) && sched_setaffinity(tid, sizeof g_claimed, &g_claimed) == 0;
  if (g_nseen < MAX_SEEN) g_seen[g_nseen++] = (struct seen){tid, moved};
}

/* Other processes' ready tasks per CPU (one scan of /proc). */
typedef struct runnable_count {
  pid_t pid;
  int *per_cpu;
} runnable_count;

static void count_task(pid_t tid, void *arg) {
  runnable_count *rc = arg;
  char path[96];
  snprintf(path, sizeof path, "/proc/%d/task/%d/stat", (int)rc->pid, (int)tid);
  int cpu;
  if (pd_proc_stat(path, &cpu) == 'R' && cpu >= 0 && cpu < CPU_SETSIZE) rc->per_cpu[cpu]++;
}

static void count_process(pid_t pid, void *arg) {
  runnable_count *rc = arg;
  if (pid == getpid()) return;
  char dir[48];
  snprintf(dir, sizeof dir, "/proc/%d/task", (int)pid);
  runnable_count mine = {pid, rc->per_cpu};
  pd_proc_for_each_numeric(dir, count_task, &mine);
}

void pd_core_claim_set_compute(pid_t tid) {
  pthread_mutex_lock(&g_mu);
  g_compute = tid;
  pthread_mutex_unlock(&g_mu);
}

bool pd_core_spread(void) {
  pthread_mutex_lock(&g_mu);
  bool ok = false;
  if (g_allowed && !g_claimed_now && g_compute > 0) {
    static int others[CPU_SETSIZE];
    memset(others, 0, sizeof others);
    runnable_count rc = {0, others};
    pd_proc_for_each_numeric("/proc", count_process, &rc);
    int start = thread_cpu(g_compute), best = -1;
    if (start < 0 || start >= CPU_SETSIZE) start = 0;
    for (int i = 0, c = start; i < CPU_SETSIZE; i++, c = (c + 1) % CPU_SETSIZE)
      if (CPU_ISSET(c, &g_own) && (best < 0 || others[c] < others[best])) best = c;
    int fd = best >= 0 ? lock_cpu(best) : -1;
    if (fd >= 0) {
      g_locks[g_nlocks++] = fd;
      CPU_ZERO(&g_compute_set);
      CPU_SET(best, &g_compute_set);
      CPU_XOR(&g_claimed, &g_own, &g_compute_set);
      g_spread = true;
      apply_claim();
      ok = true;
    }
  }
  pthread_mutex_unlock(&g_mu);
  return ok;
}

void pd_core_claim_refresh(void) {
  pthread_mutex_lock(&g_mu);
  if (g_claimed_now && g_spread) pd_for_each_own_task(refresh_task, NULL);
  pthread_mutex_unlock(&g_mu);
}

bool pd_core_claim(int k) {
  pthread_mutex_lock(&g_mu);
  bool ok = false;
  int total = CPU_COUNT(&g_own);
  if (g_allowed && !g_claimed_now && k >= 1 && k < total) {
    int start = thread_cpu(getpid());
    if (start < 0 || start >= CPU_SETSIZE || !CPU_ISSET(start, &g_own)) start = 0;
    CPU_ZERO(&g_claimed);
    int c = start;
    for (int tried = 0; tried < CPU_SETSIZE && g_nlocks < k; tried++, c = (c + 1) % CPU_SETSIZE) {
      if (!CPU_ISSET(c, &g_own)) continue;
      int fd = lock_cpu(c);
      if (fd >= 0) g_locks[g_nlocks++] = fd, CPU_SET(c, &g_claimed);
    }
    if (g_nlocks == k) {
      apply_claim();
      ok = true;
      holders_start(); /* after the moves: they are born pinned, not heirs */
    } else {
      unlock_cpus(); /* others of this library hold the rest: no claim now */
    }
  }
  pthread_mutex_unlock(&g_mu);
  return ok;
}

void pd_core_claim_release(void) {
  pthread_mutex_lock(&g_mu);
  if (g_claimed_now) {
    holders_stop();
    pd_for_each_own_task(release_task, NULL);
    unlock_cpus();
    g_claimed_now = g_spread = false;
  }
  pthread_mutex_unlock(&g_mu);
}

int pd_core_claimed_cpus(cpu_set_t *cpus) {
  pthread_mutex_lock(&g_mu);
  CPU_ZERO(cpus);
  if (g_claimed_now) *cpus = g_claimed;
  int n = g_claimed_now ? CPU_COUNT(&g_claimed) : 0;
  pthread_mutex_unlock(&g_mu);
  return n;
}

bool pd_core_claimed(void) {
  pthread_mutex_lock(&g_mu);
  bool c = g_claimed_now;
  pthread_mutex_unlock(&g_mu);
  return c;
}

void pd_core_claim_forget_in_child(void) {
  /* the parent's locks may have been held by another thread at the fork */
  pthread_mutex_init(&g_mu, NULL);
  pthread_mutex_init(&g_hold_mu, NULL);
  pthread_cond_init(&g_hold_cv, NULL);
  g_nholders = 0; /* the parent's threads are the parent's */
  atomic_store(&g_hold_state, HOLD_STOP);
  if (g_claimed_now) {
    cpu_set_t cur;
    if (sched_getaffinity(0, sizeof cur, &cur) == 0 &&
        (CPU_EQUAL(&cur, &g_claimed) || (g_spread && CPU_EQUAL(&cur, &g_compute_set))))
      (void)sched_setaffinity(0, sizeof g_own, &g_own);
  }
  g_spread = false;
  unlock_cpus(); /* the parent's locks are the parent's */
  g_claimed_now = false;
}
