/* Keeps the OpenMP pool from taking cores that the machine needs elsewhere.
 *
 * libgomp's waiting threads (idle between parallel regions, or early at a
 * region's closing barrier) spin for GOMP_SPINCOUNT iterations, 300000 by
 * default (a few milliseconds), before they sleep on a futex. On a quiet
 * machine that starts the next region within a microsecond. When other
 * processes compete for the cores, the spinning threads burn the time slices
 * that a descheduled teammate, our own main thread or the competitor needs,
 * and a training step slows 2-17x (docs/threads.md has the measurements).
 *
 * libgomp reads OMP_WAIT_POLICY and GOMP_SPINCOUNT once, in its constructor,
 * which runs before any code of this library (and setenv from an earlier
 * constructor is undone when libc initialises the environment). What it does
 * honour at run time: while it manages more threads than the process may use
 * CPUs, every wait spins only its "throttled" count (100 iterations) and then
 * sleeps. A parked thread that once ran a team of its own raises that count
 * without running anything: its team's worker sleeps at its dock and the
 * parked thread sleeps on a condition variable. Releasing the parked thread
 * (it exits and libgomp frees its team) restores the spinning.
 *
 * Every 50 ms the governor looks at the process's involuntary context
 * switches (the kernel preempting our threads because others want the CPU)
 * and at the machine's CPU pressure (/proc/pressure/cpu: time during which a
 * ready task waited for a CPU). It parks a team when either shows contention
 * and releases it after two calm seconds, so a quiet machine keeps the fast
 * spinning.
 * PADDLEC_WAIT_POLICY=auto (default) | passive (always sleep-wait) | active
 * (libgomp's own behaviour). An explicit OMP_WAIT_POLICY or GOMP_SPINCOUNT is
 * the user's choice and turns the governor off. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <omp.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <errno.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core_claim.h"
#include "procfs.h"
#include "thread_governor.h"

#define WINDOW_NS 50000000L      /* how often the governor looks */
#define PREEMPTIONS_PER_WINDOW 5 /* more than this in a window: contended */
#define STALL_FRACTION 5         /* a task waited for a CPU 1/5 of the window: contended */
#define BUSY_WINDOWS 3           /* park after this many contended windows in a row */
#define CALM_WINDOWS 40          /* release after this many calm windows in a row (2 s) */
#define CHANGE_WINDOWS 2         /* windows in a row that say the competitors changed */

atomic_int pd_g_governor_state;        /* pd_governor_state */
atomic_bool pd_g_cores_contended;      /* kernels/cpu/parallel.h */
atomic_llong pd_g_gemm_panel_products; /* kernels/cpu/parallel.h */
atomic_int pd_g_cores_free;            /* kernels/cpu/parallel.h */
atomic_bool pd_g_cores_spread;         /* kernels/cpu/parallel.h */
atomic_int pd_g_compute_tid;           /* kernels/cpu/parallel.h */

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
/* 0 none, 3 starting, 1 parked, 2 leaving (until its workers are gone) */
static int g_park_state;
static pthread_t g_parked;
/* The kernel ids of the parked team's libgomp workers. They exit after the
 * parked thread does (libgomp undocks them when their master leaves), and a
 * thread that is exiting still frees memory: a fork in that moment would
 * give the child an allocator lock that nobody releases (AddressSanitizer's
 * allocator has no fork handler). unpark waits until they are gone. */
static pid_t g_team_tids[257];
static int g_team_size;
static atomic_int g_parks; /* how many times a team was parked (tests) */
static pid_t g_compute;    /* the thread whose first op started the governor, until a product says */
static pd_wait_policy g_policy;
static atomic_int
    g_threads; /* the pool's size as the main thread set it (the watcher's own is libgomp's default) */

static void *parked_main(void *arg) {
  (void)arg;
  /* A team of this thread and one libgomp worker per CPU, which then sleep
   * at their dock for as long as this thread lives. libgomp counts the
   * threads of the teams in use, so the main thread's teams add one worker
   * or none depending on their size (a team of one lowers the count): with
   * as many parked workers as CPUs the count stays above the CPUs whatever
   * the main thread runs. */
  int workers = (int)sysconf(_SC_NPROCESSORS_ONLN);
  if (workers < 1) workers = 1;
  if (workers > 256) workers = 256;
#pragma omp parallel num_threads(workers + 1)
  {
    int t = omp_get_thread_num();
    if (t < (int)(sizeof g_team_tids / sizeof *g_team_tids)) g_team_tids[t] = (pid_t)syscall(SYS_gettid);
#pragma omp single
    g_team_size = omp_get_num_threads();
  }
  pthread_mutex_lock(&g_mu);
  g_park_state = 1;
  pthread_cond_broadcast(&g_cv);
  while (g_park_state != 2) pthread_cond_wait(&g_cv, &g_mu);
  pthread_mutex_unlock(&g_mu);
  return NULL; /* unpark sets "none" once the team's workers are gone too */
}

static void park(void) {
  pthread_mutex_lock(&g_mu);
  if (g_park_state == 0) {
    /* "starting" until the team stands: before_fork waits for it, since the
     * team is being allocated meanwhile */
    g_park_state = 3;
    if (pthread_create(&g_parked, NULL, parked_main, NULL) == 0) {
      while (g_park_state != 1) pthread_cond_wait(&g_cv, &g_mu);
      atomic_fetch_add(&g_parks, 1);
    } else {
      g_park_state = 0;
      pthread_cond_broadcast(&g_cv);
    }
  }
  pthread_mutex_unlock(&g_mu);
}

/* Waits (at most a second, never forever) until the parked team's workers
 * have left the process. */
static void wait_team_gone(int size) {
  pid_t pid = getpid();
  int n = size < (int)(sizeof g_team_tids / sizeof *g_team_tids)
              ? size
              : (int)(sizeof g_team_tids / sizeof *g_team_tids);
  for (int i = 1, tries = 0; i < n && tries < 10000; tries++) {
    if (syscall(SYS_tgkill, pid, g_team_tids[i], 0) != 0 && errno == ESRCH) {
      i++;
      continue;
    }
    nanosleep(&(struct timespec){0, 100000}, NULL);
  }
}

static void unpark(void) {
  pthread_mutex_lock(&g_mu);
  bool joined = g_park_state == 1;
  int size = g_team_size;
  if (joined) {
    g_park_state = 2;
    pthread_cond_broadcast(&g_cv);
  }
  pthread_mutex_unlock(&g_mu);
  if (joined) {
    pthread_join(g_parked, NULL);
    wait_team_gone(size);
    pthread_mutex_lock(&g_mu);
    g_park_state = 0;
    pthread_cond_broadcast(&g_cv);
    pthread_mutex_unlock(&g_mu);
  }
}

/* Tasks of the whole machine ready to run now (/proc/loadavg's fourth
 * field, "running/total"), or -1. */
static int machine_runnable(void) {
  char line[128];
  if (pd_proc_read("/proc/loadavg", line, sizeof line) < 0) return -1;
  const char *p = line;
  for (int f = 0; f < 3 && p; f++) p = strchr(p + 1, ' ');
  return p ? atoi(p + 1) : -1;
}

/* This process's threads ready to run now (state R in
 * /proc/self/task/<tid>/stat), the watcher itself included. */
static void count_runnable(pid_t tid, void *arg) {
  char path[64];
  snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)tid);
  if (pd_proc_stat(path, NULL) == 'R') ++*(int *)arg;
}

static int own_runnable(void) {
  int n = 0;
  pd_for_each_own_task(count_runnable, &n);
  return n;
}

static long preemptions(void) {
  struct rusage ru;
  return getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_nivcsw : 0;
}

/* Microseconds during which some task of the machine was ready to run but
 * waited for a CPU (the kernel's pressure-stall information), or -1 where
 * the kernel does not provide it. */
static long long cpu_stall_us(void) {
  char line[256];
  if (pd_proc_read("/proc/pressure/cpu", line, sizeof line) < 0) return -1;
  const char *t = strncmp(line, "some ", 5) == 0 ? strstr(line, "total=") : NULL;
  return t ? strtoll(t + 6, NULL, 10) : -1;
}

bool pd_thread_governor_step(pd_governor_window *w, long preempted, long long stall_us, long window_us) {
  /* Contention: the kernel preempted our threads for others, or some task
   * (ours or another process's) waited for a CPU during a fifth of the
   * window, in BUSY_WINDOWS windows in a row. The second catches what the first
   * misses: competitors of lower priority, which wait behind our spinning
   * threads without preempting them. */
  bool stalled = stall_us >= 0 && stall_us * STALL_FRACTION > window_us;
  if (preempted > PREEMPTIONS_PER_WINDOW || stalled) {
    /* one busy window on a quiet machine (a daemon waking, the process's
     * own start-up) is not contention: it must last, to park a team and,
     * once parked, to restart the calm count (a quiet machine whose
     * daemons wake every second or two kept a team parked that a single
     * window had been let restart: measured, docs/threads.md) */
    if (++w->busy >= BUSY_WINDOWS) {
      w->parked = true;
      w->calm = 0;
    }
  } else {
    w->busy = 0;
    if (w->parked && ++w->calm >= CALM_WINDOWS) {
      w->calm = 0;
      w->parked = false;
    }
  }
  return w->parked;
}

int pd_thread_governor_claim(pd_governor_window *w, int free_cores, int cpus, int threads, double others) {
  /* a spread for a team of two beside one competitor on two CPUs (core_claim.h) */
  int want = free_cores == 0 ? pd_core_claim_size(cpus, free_cores, threads, others)
             : free_cores == 1 && cpus == 2 && threads == 2 ? PD_CLAIM_SPREAD
                                                            : 0;
  if (!w->parked) {
    w->claim = w->changing = 0;
  } else if (w->claim == 0) {
    w->claim = want;
  } else if ((want > 0) != (w->claim > 0) || (want == PD_CLAIM_SPREAD) != (w->claim == PD_CLAIM_SPREAD)) {
    /* The competitors changed: two windows in a row (the free-core count
     * wavers by one now and then, and a spread and a claim flipped) end
     * the claim; the next window takes the new one. */
    if (++w->changing >= CHANGE_WINDOWS) w->claim = w->changing = 0;
  } else {
    w->changing = 0;
  }
  /* Our own threads preempt each other on the claimed cores, so the
   * preemptions and the pressure no longer tell whether others still
   * compete: only the free-core count (which leaves our threads out) ends a
   * claim, and the calm count starts after it. */
  if (w->claim > 0) w->calm = 0;
  return w->claim;
}

void pd_thread_governor_hold_calm(pd_governor_window *w, int free_cores, int cpus, int threads) {
  /* the preemptions stop because the team is parked, not because the
   * competitor left: one busy process beside a parked team of two on two
   * cores released it every two calm seconds, and it met the competitor
   * again for the three busy windows it takes to park */
  if (w->parked && free_cores < (threads < cpus ? threads : cpus)) w->calm = 0;
}

int pd_thread_governor_free_cores(double *others, int cpus, int machine_runnable, int own_runnable) {
  int o = machine_runnable - own_runnable;
  *others = 0.8 * *others + 0.2 * (o > 0 ? o : 0);
  int free = cpus - (int)(*others + 0.5);
  return free > 0 ? free : 0;
}

bool pd_thread_governor_computing(long long work_ns, long window_ns) { return work_ns * 4 >= window_ns; }

static long long process_cpu_ns(void) {
  struct timespec ts;
  return clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) == 0 ? (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec
                                                           : 0;
}

static bool g_watching; /* the watcher has started (pd_thread_governor_start waits for it) */

static void *watch_main(void *arg) {
  (void)arg;
  pthread_mutex_lock(&g_mu);
  g_watching = true;
  pthread_cond_broadcast(&g_cv);
  pthread_mutex_unlock(&g_mu);
  long last = preemptions();
  long long last_stall = cpu_stall_us();
  pd_governor_window w = {0};
  int cpus = (int)sysconf(_SC_NPROCESSORS_ONLN);
  double others = 0;                  /* other processes' runnable tasks, averaged over about half a second */
  bool claims = pd_core_claim_init(); /* core_claim.h */
  long long last_cpu = process_cpu_ns(), last_hold = 0;
  for (;;) {
    struct timespec ts = {0, WINDOW_NS};
    nanosleep(&ts, NULL);
    long now = preemptions();
    long long stall = cpu_stall_us();
    bool was = w.parked;
    pd_thread_governor_step(&w, now - last, stall >= 0 && last_stall >= 0 ? stall - last_stall : -1,
                            WINDOW_NS / 1000);
    last = now, last_stall = stall;
    int all = machine_runnable(), free = 0;
    if (all >= 0) {
      free = pd_thread_governor_free_cores(&others, cpus, all, own_runnable());
      atomic_store_explicit(&pd_g_cores_free, free, memory_order_relaxed);
    }
    int claim_was = w.claim;
    if (claims && all >= 0) pd_thread_governor_claim(&w, free, cpus, atomic_load(&g_threads), others);
    if (all >= 0) pd_thread_governor_hold_calm(&w, free, cpus, atomic_load(&g_threads));
    if (w.claim == 0 && claim_was != 0) {
      atomic_store_explicit(&pd_g_cores_spread, false, memory_order_relaxed);
      pd_core_claim_release();
    }
    if (w.parked != was) {
      /* contended: the library's loops go serial (kernels/cpu/parallel.h) */
      atomic_store_explicit(&pd_g_cores_contended, w.parked, memory_order_relaxed);
      pd_thread_governor_set_parked(w.parked);
    }
    /* a spread keeps the thread of the last contended product to itself */
    int computing = atomic_load_explicit(&pd_g_compute_tid, memory_order_relaxed);
    if (w.claim == PD_CLAIM_SPREAD && claim_was == 0)
      pd_core_claim_set_compute(computing > 0 ? computing : g_compute);
    /* not taken (other processes of this library hold the CPUs): tried again next window */
    if (w.claim != 0 && claim_was == 0 &&
        !(w.claim == PD_CLAIM_SPREAD ? pd_core_spread() : pd_core_claim(w.claim)))
      w.claim = 0;
    if (w.claim == PD_CLAIM_SPREAD) pd_core_claim_refresh();
    atomic_store_explicit(&pd_g_cores_spread, w.claim == PD_CLAIM_SPREAD, memory_order_relaxed);
    /* the claim's holders run while the process computes (core_claim.h) */
    long long cpu = process_cpu_ns(), hold = pd_core_claim_holders_cpu_ns();
    long long held = hold >= last_hold ? hold - last_hold : hold; /* holders started anew */
    if (w.claim > 0 && claim_was > 0)
      pd_core_claim_hold(pd_thread_governor_computing(cpu - last_cpu - held, WINDOW_NS));
    last_cpu = cpu, last_hold = hold;
  }
  return NULL;
}

void pd_thread_governor_set_parked(bool parked) {
  if (parked)
    park();
  else
    unpark();
}

static pd_wait_policy policy_from_env(void) {
  if (getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT")) return PD_WAIT_ACTIVE;
  const char *s = getenv("PADDLEC_WAIT_POLICY");
  if (!s || !*s || strcasecmp(s, "auto") == 0) return PD_WAIT_AUTO;
  if (strcasecmp(s, "passive") == 0) return PD_WAIT_PASSIVE;
  if (strcasecmp(s, "active") == 0) return PD_WAIT_ACTIVE;
  fprintf(stderr, "paddlec: PADDLEC_WAIT_POLICY='%s' is not auto, passive or active; using auto\n", s);
  return PD_WAIT_AUTO;
}

/* fork copies only the calling thread: a parked team would be lost in the
 * child with libgomp's memory for it (leaked, as LeakSanitizer reports in
 * forked ranks), and a lock held by another thread would stay held. Release
 * the team and hold the lock across the fork; park again in the parent. */
static bool g_parked_at_fork;

static void before_fork(void) {
  g_parked_at_fork = false;
  for (;;) {
    pthread_mutex_lock(&g_mu);
    if (g_park_state == 0) break; /* kept locked until after the fork */
    if (g_park_state != 1) {      /* a team being made or leaving: wait for it */
      while (g_park_state == 3 || g_park_state == 2) pthread_cond_wait(&g_cv, &g_mu);
      pthread_mutex_unlock(&g_mu);
      continue;
    }
    g_parked_at_fork = true;
    pthread_mutex_unlock(&g_mu);
    unpark();
    sched_yield(); /* another thread may be releasing it */
  }
}

static void parent_after_fork(void) {
  pthread_mutex_unlock(&g_mu);
  if (g_parked_at_fork) park();
}

static void child_after_fork(void) {
  /* The child has none of the parent's other threads. libgomp's pool does
   * not survive a fork (a parallel region of the parent's team hangs in
   * the child), so a forked child that computes runs on one thread at most
   * and the governor stays off there: no watcher, and no team of its own
   * whose start would meet libgomp state copied mid-change. Processes
   * started by exec (fleetrun's ranks) begin afresh and are governed. */
  pthread_mutex_init(&g_mu, NULL);
  pthread_cond_init(&g_cv, NULL);
  g_park_state = 0;
  atomic_store(&g_parks, 0);
  atomic_store(&pd_g_governor_state, PD_GOVERNOR_FORKED);
  pd_core_claim_forget_in_child(); /* a claimed thread's fork: the child gets the process's CPUs */
  omp_set_num_threads(1);          /* pd_set_num_threads keeps it so */
}

bool pd_thread_governor_forked(void) { return atomic_load(&pd_g_governor_state) == PD_GOVERNOR_FORKED; }

void pd_thread_governor_start(void) {
  pthread_mutex_lock(&g_mu);
  if (atomic_load(&pd_g_governor_state) != PD_GOVERNOR_UNSTARTED) {
    pthread_mutex_unlock(&g_mu);
    return;
  }
  if (omp_get_max_threads() <= 1) { /* no team, nothing spins */
    atomic_store(&pd_g_governor_state, PD_GOVERNOR_SINGLE);
    pthread_mutex_unlock(&g_mu);
    return;
  }
  atomic_store(&pd_g_governor_state, PD_GOVERNOR_STARTING);
  atomic_store(&g_threads, omp_get_max_threads());
  g_compute = (pid_t)syscall(SYS_gettid);
  static bool fork_handler;
  if (!fork_handler) fork_handler = pthread_atfork(before_fork, parent_after_fork, child_after_fork) == 0;
  g_policy = policy_from_env();
  pthread_mutex_unlock(&g_mu);
  if (g_policy == PD_WAIT_PASSIVE) {
    park();
  } else if (g_policy == PD_WAIT_AUTO) {
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 64 << 10);
    if (pthread_create(&t, &attr, watch_main, NULL) != 0) {
      g_policy = PD_WAIT_ACTIVE;
    } else {
      /* A thread being born allocates (the C library and sanitizers set
       * it up): a fork in that moment would copy an allocator lock held.
       * Return only once it runs. */
      pthread_mutex_lock(&g_mu);
      while (!g_watching) pthread_cond_wait(&g_cv, &g_mu);
      pthread_mutex_unlock(&g_mu);
    }
    pthread_attr_destroy(&attr);
  }
  atomic_store(&pd_g_governor_state, PD_GOVERNOR_RUNNING);
}

void pd_thread_governor_threads_changed(int n) {
  atomic_store(&g_threads, n);
  int single = PD_GOVERNOR_SINGLE;
  if (n > 1) atomic_compare_exchange_strong(&pd_g_governor_state, &single, PD_GOVERNOR_UNSTARTED);
}

pd_wait_policy pd_thread_governor_policy(void) { return g_policy; }

bool pd_thread_governor_parked(void) {
  pthread_mutex_lock(&g_mu);
  bool p = g_park_state == 1;
  pthread_mutex_unlock(&g_mu);
  return p;
}

int pd_thread_governor_parks(void) { return atomic_load(&g_parks); }
