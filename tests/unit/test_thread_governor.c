/* The thread governor (src/core/thread_governor.c): with the passive policy
 * the OpenMP pool's idle threads sleep instead of spinning after a parallel
 * op; with the auto policy a team is parked while other processes compete
 * for the cores (released by the watcher's decision, tested on made-up
 * readings, or by hand); an explicit OMP_WAIT_POLICY
 * turns the governor off. Each policy is read once per process, so every
 * scenario runs in a fresh process (this program re-executed). */
#define _GNU_SOURCE
#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/core_claim.h"
#include "core/thread_governor.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/parallel.h"
#include "test_util.h"

static double cpu_ms(void) {
  struct rusage r;
  getrusage(RUSAGE_SELF, &r);
  return (double)(r.ru_utime.tv_sec + r.ru_stime.tv_sec) * 1e3 +
         (double)(r.ru_utime.tv_usec + r.ru_stime.tv_usec) * 1e-3;
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* One op large enough to run as a parallel region on every thread. */
static void parallel_op(void) {
  pd_scope_begin();
  pd_tensor *x = pd_ones(1, (int64_t[]){1 << 21}, PD_FLOAT32);
  pd_tensor *y = pd_add(x, x);
  if (!y || pd_tensor_item_at(y, 12345) != 2.0) _exit(10);
  pd_scope_end();
}

/* CPU time the process burns while its main thread sleeps 200 ms right
 * after a parallel op: libgomp's spinning idle threads, if they spin. */
static double idle_burn_ms(void) {
  parallel_op();
  double c0 = cpu_ms();
  sleep_ms(200);
  return cpu_ms() - c0;
}

static int count_threads(void) {
  DIR *d = opendir("/proc/self/task");
  int n = 0;
  if (!d) return -1;
  for (struct dirent *e; (e = readdir(d));) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

/* The thread count, a claim's holders left out (a claim begins and ends
 * with the machine's load, which other tests share). */
static int threads_not_holding(void) {
  for (;;) {
    int h = pd_core_claim_holders(NULL), c = count_threads();
    if (pd_core_claim_holders(NULL) == h) return c - h;
  }
}

/* The thread count once libgomp's released workers (which leave on their
 * own, a little after their team) are gone: stable over 50 ms. */
static int settled_threads(void) {
  int c = threads_not_holding();
  for (int i = 0; i < 100; i++) {
    sleep_ms(50);
    int n = threads_not_holding();
    if (n == c) return c;
    c = n;
  }
  return c;
}

static cpu_set_t mask_of(pid_t tid) {
  cpu_set_t m;
  CPU_ZERO(&m);
  sched_getaffinity(tid, sizeof m, &m);
  return m;
}

static pid_t busy_child(void) {
  pid_t p = fork();
  if (p == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    volatile double x = 1;
    for (;;) x = x * 1.0000001 + 1e-9;
  }
  return p;
}

/* ---- scenarios, each in its own process; exit status 0 = passed ---------- */

static int scenario_passive(void) {
  pd_set_num_threads(2);
  parallel_op();
  if (pd_thread_governor_policy() != PD_WAIT_PASSIVE) return 20;
  if (!pd_thread_governor_parked()) return 21;
  double burn = idle_burn_ms();
  if (getenv("GOV_DEBUG")) fprintf(stderr, "burn %.2f ms\n", burn);
  if (burn > 2.0) {
    fprintf(stderr, "passive: the idle pool burned %.2f ms of CPU in 200 ms\n", burn);
    return 22;
  }
  /* A fork leaves the child nothing of the parked team to leak (under
   * LeakSanitizer a leak makes the child's exit status non-zero), and the
   * parent parked again. */
  pid_t p = fork();
  if (p == 0) {
    /* the child: nothing parked, and the governor stays off */
    pd_scope_begin();
    pd_tensor *t = pd_add(pd_ones(1, (int64_t[]){4}, PD_FLOAT32), pd_ones(1, (int64_t[]){4}, PD_FLOAT32));
    bool ok = t && !pd_thread_governor_parked() && pd_thread_governor_parks() == 0;
    pd_scope_end();
    exit(ok ? 0 : 1);
  }
  int status = 0;
  if (p < 0 || waitpid(p, &status, 0) != p || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return 23;
  return pd_thread_governor_parked() ? 0 : 24;
}

static int scenario_auto(void) {
  pd_set_num_threads(2);
  parallel_op();
  if (pd_thread_governor_policy() != PD_WAIT_AUTO) return 30;
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  if (ncpu < 1) ncpu = 1;
  pid_t kids[65];
  int nk = (int)(ncpu + 1 < 65 ? ncpu + 1 : 65);
  for (int i = 0; i < nk; i++) kids[i] = busy_child();
  bool parked = false, claimed = false;
  for (int i = 0; i < 200 && !parked; i++) { /* up to ~10 s of parallel work */
    for (int k = 0; k < 20; k++) parallel_op();
    parked = pd_thread_governor_parked();
  }
  /* with no core free the process keeps its threads on its share of them */
  for (int i = 0; i < 200 && parked && ncpu >= 2 && !claimed; i++) {
    for (int k = 0; k < 20; k++) parallel_op();
    cpu_set_t m = mask_of(0);
    claimed = pd_core_claimed() && CPU_COUNT(&m) < ncpu;
  }
  /* while it computes, the claim's holder runs; when it stops, the holder
   * pauses within a few windows; computing again runs it again */
  bool held = false, paused = false, again = false;
  for (int i = 0; i < 200 && claimed && !held; i++) {
    for (int k = 0; k < 20; k++) parallel_op();
    pd_core_claim_holders(&held);
  }
  for (int i = 0; i < 40 && held && !paused; i++) {
    sleep_ms(50);
    bool h = true;
    paused = pd_core_claim_holders(&h) > 0 && !h;
  }
  for (int i = 0; i < 200 && paused && !again; i++) {
    for (int k = 0; k < 20; k++) parallel_op();
    pd_core_claim_holders(&again);
  }
  /* under lasting contention the library's own loops go to one thread */
  bool contended = false;
  for (int i = 0; i < 200 && parked && !contended; i++) {
    for (int k = 0; k < 20; k++) parallel_op();
    contended = atomic_load(&pd_g_cores_contended);
  }
  for (int i = 0; i < nk; i++) kill(kids[i], SIGKILL);
  for (int i = 0; i < nk; i++) waitpid(kids[i], NULL, 0);
  if (parked && !contended) {
    fprintf(stderr, "auto: the watcher parked a team without marking the cores contended\n");
    return 37;
  }
  if (parked && ncpu >= 2 && !claimed) {
    fprintf(stderr, "auto: no core claimed while %d busy processes left none free\n", nk);
    return 38;
  }
  if (claimed && !(held && paused && again)) {
    fprintf(stderr, "auto: the claim's holders ran %d, paused when idle %d, ran again %d\n", held, paused,
            again);
    return 39;
  }
  if (!parked) {
    fprintf(stderr, "auto: no team parked while %d busy processes competed\n", nk);
    return 31;
  }
  /* Whether the machine is calm again is not ours to know here (other
   * tests may run beside this one): release by hand, then park and release
   * again, and check no thread is left behind. */
  pd_thread_governor_set_parked(false);
  if (pd_thread_governor_parked()) return 32;
  int threads = settled_threads();
  for (int i = 0; i < 5; i++) {
    pd_thread_governor_set_parked(true);
    if (!pd_thread_governor_parked()) return 34;
    parallel_op();
    pd_thread_governor_set_parked(false);
    if (pd_thread_governor_parked()) return 35;
  }
  int after = settled_threads();
  if (after != threads) {
    fprintf(stderr, "auto: %d threads before five park/release cycles, %d after\n", threads, after);
    return 36;
  }
  return pd_thread_governor_parks() >= 6 ? 0 : 33;
}

static void *touch_thread(void *arg) { return arg; }

/* A child forked while the parked team was being released: it allocates in
 * every size class and starts a thread (as a forked rank starts its
 * collective worker). An allocator lock copied held from an exiting team
 * worker stalls it; it must finish within 10 s. */
static bool forked_child_runs(void) {
  pid_t p = fork();
  if (p == 0) {
    for (size_t n = 16; n <= (1u << 20); n += n / 4 + 16) free(malloc(n));
    pthread_t t;
    bool ok = pthread_create(&t, NULL, touch_thread, NULL) == 0 && pthread_join(t, NULL) == 0;
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  for (int i = 0; i < 1000; i++) {
    if (waitpid(p, &status, WNOHANG) == p) return WIFEXITED(status) && WEXITSTATUS(status) == 0;
    sleep_ms(10);
  }
  kill(p, SIGKILL);
  waitpid(p, NULL, 0);
  return false;
}

static atomic_bool g_stop_flapping;

/* Parks and releases the team over and over, as the watcher does on a
 * machine whose load comes and goes. */
static void *flap_main(void *arg) {
  (void)arg;
  while (!atomic_load(&g_stop_flapping)) {
    pd_thread_governor_set_parked(true);
    pd_thread_governor_set_parked(false);
  }
  return NULL;
}

/* Forks while another thread parks and releases teams: the fork waits for a
 * team being made or leaving, so no allocator lock is copied held. */
static int scenario_fork_release(void) {
  pd_set_num_threads(2);
  parallel_op();
  pthread_t flapper;
  if (pthread_create(&flapper, NULL, flap_main, NULL) != 0) return 60;
  int rc = 0;
  for (int i = 0; i < 100 && !rc; i++) {
    if (!forked_child_runs()) {
      fprintf(stderr, "fork_release: forked child %d stalled or failed\n", i);
      rc = 61;
    }
  }
  atomic_store(&g_stop_flapping, true);
  pthread_join(flapper, NULL);
  return rc;
}

/* A child forked after parallel work computes, on one thread: a region of
 * two would wait forever for the parent's libgomp workers. */
static int scenario_fork_team(void) {
  pd_set_num_threads(2);
  parallel_op();
  pid_t p = fork();
  if (p == 0) {
    parallel_op();
    pd_set_num_threads(2); /* kept at one */
    parallel_op();
    _exit(pd_get_num_threads() == 1 ? 0 : 1);
  }
  int status = 0;
  for (int i = 0; i < 1000; i++) {
    if (waitpid(p, &status, WNOHANG) == p) return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 81;
    sleep_ms(10);
  }
  kill(p, SIGKILL);
  waitpid(p, NULL, 0);
  fprintf(stderr, "fork_team: the forked child's parallel op did not finish in 10 s\n");
  return 80;
}

/* A fork right after the governor starts its watcher thread. */
static int scenario_start_fork(void) {
  pd_set_num_threads(2);
  pd_thread_governor_start();
  if (pd_thread_governor_policy() != PD_WAIT_AUTO) return 70;
  return forked_child_runs() ? 0 : 71;
}

typedef struct claim_thread {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int cmd; /* 0 wait, 1 start a thread and report its mask, 2 fork and report, 9 leave */
  int done;
  pid_t tid;
  int pin;                  /* >= 0: pin itself to this CPU first (a user's binding) */
  cpu_set_t heir_mask, own; /* own: the process's CPUs */
  int child_ok;
} claim_thread;

static void *heir_main(void *arg) {
  claim_thread *c = arg;
  c->heir_mask = mask_of(0);
  return NULL;
}

static void *claim_thread_main(void *arg) {
  claim_thread *c = arg;
  if (c->pin >= 0) {
    cpu_set_t m;
    CPU_ZERO(&m);
    CPU_SET(c->pin, &m);
    sched_setaffinity(0, sizeof m, &m);
  }
  pthread_mutex_lock(&c->mu);
  c->tid = (pid_t)syscall(SYS_gettid);
  pthread_cond_broadcast(&c->cv);
  for (;;) {
    while (c->cmd == 0) pthread_cond_wait(&c->cv, &c->mu);
    int cmd = c->cmd;
    c->cmd = 0;
    if (cmd == 9) break;
    pthread_mutex_unlock(&c->mu);
    if (cmd == 1) { /* a thread born now inherits this one's mask */
      pthread_t h;
      if (pthread_create(&h, NULL, heir_main, c) == 0) pthread_join(h, NULL);
    } else if (cmd == 2) { /* a fork from a claimed thread */
      pid_t p = fork();
      if (p == 0) { /* the process's CPUs, and none of the parent's holders */
        cpu_set_t m = mask_of(0);
        _exit(CPU_EQUAL(&m, &c->own) && pd_core_claim_holders(NULL) == 0 ? 0 : 1);
      }
      int status = 0;
      c->child_ok = p > 0 && waitpid(p, &status, 0) == p && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    }
    pthread_mutex_lock(&c->mu);
    c->done++;
    pthread_cond_broadcast(&c->cv);
  }
  pthread_mutex_unlock(&c->mu);
  return NULL;
}

static void claim_thread_do(claim_thread *c, int cmd) {
  pthread_mutex_lock(&c->mu);
  int done = c->done;
  c->cmd = cmd;
  pthread_cond_broadcast(&c->cv);
  while (cmd != 9 && c->done == done) pthread_cond_wait(&c->cv, &c->mu);
  pthread_mutex_unlock(&c->mu);
}

static void claim_thread_start(claim_thread *c, pthread_t *t, int pin, cpu_set_t own) {
  *c =
      (claim_thread){.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER, .pin = pin, .own = own};
  pthread_create(t, NULL, claim_thread_main, c);
  pthread_mutex_lock(&c->mu);
  while (c->tid == 0) pthread_cond_wait(&c->cv, &c->mu);
  pthread_mutex_unlock(&c->mu);
}

/* A claim has one holder per claimed CPU, running: it uses CPU time while
 * it holds (it yields to every other task there, but gets picked between
 * them), none while paused. */
static bool holders_follow(void) {
  cpu_set_t claimed;
  int n = pd_core_claimed_cpus(&claimed);
  bool holding = false;
  if (pd_core_claim_holders(&holding) != n || !holding) return false;
  long long t0 = pd_core_claim_holders_cpu_ns();
  sleep_ms(100);
  long long t1 = pd_core_claim_holders_cpu_ns();
  pd_core_claim_hold(false);
  if (pd_core_claim_holders(&holding) != n || holding) return false;
  sleep_ms(20); /* a holder finishes the yield it was in */
  long long t2 = pd_core_claim_holders_cpu_ns();
  sleep_ms(100);
  long long t3 = pd_core_claim_holders_cpu_ns();
  pd_core_claim_hold(true);
  if (!(t1 > t0 && t3 - t2 < 200000)) {
    fprintf(stderr, "holders: %lld ns of CPU in 100 ms holding, %lld ns paused\n", t1 - t0, t3 - t2);
    return false;
  }
  return pd_core_claim_holders(&holding) == n && holding;
}

/* Another process of the library claims a CPU this one has not (a forked
 * child, which drops the parent's locks; the parent's CPUs are those in
 * `taken`), and a third finds none left on two CPUs. */
static bool claims_exclude(const cpu_set_t *taken) {
  pid_t p = fork();
  if (p == 0) {
    cpu_set_t mine, both;
    if (!pd_core_claim(1) || pd_core_claimed_cpus(&mine) != 1) _exit(1);
    CPU_AND(&both, &mine, taken);
    if (CPU_COUNT(&both) != 0) _exit(2);
    pid_t q = fork();
    if (q == 0) { /* on two CPUs, both are claimed now */
      cpu_set_t m = mask_of(0);
      _exit(CPU_COUNT(&m) == 2 && pd_core_claim(1) ? 3 : 0);
    }
    int status = 0;
    if (q < 0 || waitpid(q, &status, 0) != q || !WIFEXITED(status)) _exit(4);
    _exit(WEXITSTATUS(status));
  }
  int status = 0;
  if (p < 0 || waitpid(p, &status, 0) != p || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fprintf(stderr, "claims_exclude: child status %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    return false;
  }
  return true;
}

/* A claim moves the threads that run where the process may, onto one CPU;
 * a thread the user pinned stays pinned, before, during and after, even
 * when the claim takes its CPU; a thread born during the claim and a child
 * forked from a claimed thread get the process's CPUs back. No watcher runs
 * (policy active): the claims are made by hand. */
static int scenario_claim_masks(void) {
  pd_set_num_threads(2);
  parallel_op(); /* the governor's fork handler is set */
  cpu_set_t own = mask_of(0);
  if (CPU_COUNT(&own) < 2) return 0; /* nothing to claim on one CPU */
  if (!pd_core_claim_init()) return 90;
  int cpus[2], n = 0;
  for (int c = 0; c < CPU_SETSIZE && n < 2; c++)
    if (CPU_ISSET(c, &own)) cpus[n++] = c;
  for (int round = 0; round < 2; round++) {
    claim_thread free_t, pinned_t;
    pthread_t ft, pt;
    claim_thread_start(&free_t, &ft, -1, own);
    claim_thread_start(&pinned_t, &pt, cpus[round], own);
    cpu_set_t pinned_mask = mask_of(pinned_t.tid);
    /* the claim starts at the main thread's CPU: there, in the second round,
     * it takes the CPU the user pinned a thread to */
    cpu_set_t main_cpu;
    CPU_ZERO(&main_cpu);
    CPU_SET(cpus[1], &main_cpu);
    sched_setaffinity(0, sizeof main_cpu, &main_cpu);
    if (!pd_core_claim(1) || !pd_core_claimed()) return 91;
    cpu_set_t m = mask_of(free_t.tid), me = mask_of(0);
    if (!CPU_EQUAL(&m, &main_cpu) || !CPU_EQUAL(&me, &main_cpu)) return 92; /* moved; the caller is not */
    cpu_set_t p = mask_of(pinned_t.tid);
    if (!CPU_EQUAL(&p, &pinned_mask)) return 93;
    if (pd_core_claim(1)) return 94; /* one claim at a time */
    if (!holders_follow()) return 86;
    if (!claims_exclude(&main_cpu)) return 89;
    claim_thread_do(&free_t, 1);
    if (!CPU_EQUAL(&free_t.heir_mask, &m)) return 95; /* born with the claim's mask */
    claim_thread_do(&free_t, 2);
    if (!free_t.child_ok) return 96; /* the forked child has the process's CPUs */
    pd_core_claim_release();
    if (pd_core_claimed() || pd_core_claim_holders(NULL) != 0) return 97;
    m = mask_of(free_t.tid), p = mask_of(pinned_t.tid);
    if (!CPU_EQUAL(&m, &own) || !CPU_EQUAL(&p, &pinned_mask)) return 98;
    claim_thread_do(&free_t, 1); /* a thread born after it: the process's CPUs */
    if (!CPU_EQUAL(&free_t.heir_mask, &own)) return 99;
    sched_setaffinity(0, sizeof own, &own);
    claim_thread_do(&free_t, 9), claim_thread_do(&pinned_t, 9);
    pthread_join(ft, NULL), pthread_join(pt, NULL);
  }
  return 0;
}

typedef struct spread_call {
  int what; /* 0 spread, 1 refresh, 2 release */
  bool ok;
} spread_call;

static void *spread_call_main(void *arg) {
  spread_call *c = arg;
  if (c->what == 0) c->ok = pd_core_spread();
  if (c->what == 1) pd_core_claim_refresh();
  if (c->what == 2) pd_core_claim_release();
  return NULL;
}

/* Runs a spread operation from another thread, as the watcher does (the
 * caller of a claim is never moved). */
static bool spread_from_another_thread(int what) {
  spread_call c = {what, false};
  pthread_t t;
  if (pthread_create(&t, NULL, spread_call_main, &c) != 0) return false;
  pthread_join(t, NULL);
  return what != 0 || c.ok;
}

/* A spread keeps the compute thread (here the main thread) on a CPU of its
 * own and moves the others to the rest, with no holders; a thread the
 * compute thread starts during the spread is moved there too once
 * refreshed; release gives every one the process's CPUs back. */
static int scenario_spread_masks(void) {
  pd_set_num_threads(2);
  parallel_op();
  cpu_set_t own = mask_of(0);
  if (CPU_COUNT(&own) < 2) return 0;
  if (!pd_core_claim_init()) return 110;
  pd_core_claim_set_compute((pid_t)syscall(SYS_gettid));
  claim_thread other;
  pthread_t ot;
  claim_thread_start(&other, &ot, -1, own);
  if (!spread_from_another_thread(0) || !pd_core_claimed()) return 111;
  cpu_set_t mine = mask_of(0), theirs = mask_of(other.tid), both, all;
  CPU_AND(&both, &mine, &theirs);
  CPU_OR(&all, &mine, &theirs);
  if (CPU_COUNT(&mine) != 1 || CPU_COUNT(&both) != 0 || !CPU_EQUAL(&all, &own)) return 112;
  cpu_set_t claimed;
  if (pd_core_claimed_cpus(&claimed) != CPU_COUNT(&own) - 1 || !CPU_EQUAL(&claimed, &theirs)) return 113;
  if (pd_core_claim_holders(NULL) != 0) return 118;
  claim_thread heir; /* born to the compute thread: its CPU, until refreshed */
  pthread_t ht;
  claim_thread_start(&heir, &ht, -1, own);
  cpu_set_t h = mask_of(heir.tid);
  if (!CPU_EQUAL(&h, &mine)) return 114;
  spread_from_another_thread(1);
  h = mask_of(heir.tid);
  if (!CPU_EQUAL(&h, &theirs)) return 115;
  if (pd_core_claim(1) || pd_core_spread()) return 116; /* one claim at a time */
  spread_from_another_thread(2);
  mine = mask_of(0), theirs = mask_of(other.tid), h = mask_of(heir.tid);
  if (pd_core_claimed() || !CPU_EQUAL(&mine, &own) || !CPU_EQUAL(&theirs, &own) || !CPU_EQUAL(&h, &own))
    return 117;
  claim_thread_do(&other, 9), claim_thread_do(&heir, 9);
  pthread_join(ot, NULL), pthread_join(ht, NULL);
  return 0;
}

/* PADDLEC_CORE_CLAIM=pin: claims without holders. */
static int scenario_claim_pin(void) {
  cpu_set_t own = mask_of(0);
  if (CPU_COUNT(&own) < 2) return 0;
  if (!pd_core_claim_init() || !pd_core_claim(1)) return 102;
  int n = pd_core_claim_holders(NULL);
  pd_core_claim_release();
  return n == 0 ? 0 : 103;
}

/* A user's binding, or PADDLEC_CORE_CLAIM=off, turns claims off. */
static int scenario_claim_off(void) {
  cpu_set_t own = mask_of(0);
  if (CPU_COUNT(&own) < 2) return 0;
  if (pd_core_claim_init() || pd_core_claim(1)) return 100;
  unsetenv("PADDLEC_CORE_CLAIM"), unsetenv("OMP_PROC_BIND");
  if (!pd_core_claim_init()) return 101; /* allowed once the setting is gone */
  return 0;
}

static int scenario_user_policy(void) {
  pd_set_num_threads(2);
  parallel_op();
  if (pd_thread_governor_policy() != PD_WAIT_ACTIVE) return 40;
  return pd_thread_governor_parked() ? 41 : 0;
}

static int scenario_single(void) {
  pd_set_num_threads(1);
  parallel_op();
  if (pd_thread_governor_parked() || pd_thread_governor_parks() != 0) return 50;
  pd_set_num_threads(2); /* now there is a team to govern */
  parallel_op();
  return pd_thread_governor_parked() ? 0 : 51;
}

/* Under contention the library's loops keep to one thread (the same
 * elements, the same results); otherwise they use the team. */
static void test_contended_loops_run_on_one_thread(void **state) {
  (void)state;
  pd_set_num_threads(2);
  int64_t n = 4 * PD_GRAIN;
  double *v = calloc((size_t)n, sizeof *v);
  assert_non_null(v);
  for (int contended = 1; contended >= 0; contended--) {
    atomic_store(&pd_g_cores_contended, contended);
    atomic_int team = 0;
    PD_PARALLEL_FOR(i, n, PD_GRAIN, {
      if (i == 0) atomic_store(&team, omp_get_num_threads());
      v[i] += (double)i;
    });
    assert_int_equal(atomic_load(&team), contended ? 1 : 2);
  }
  for (int64_t i = 0; i < n; i++) assert_true(v[i] == 2.0 * (double)i);
  free(v);
}

typedef struct product_thread {
  pid_t tid;
  int rc;
} product_thread;

static void *contended_product(void *arg) {
  product_thread *p = arg;
  p->tid = (pid_t)syscall(SYS_gettid);
  enum { N = 256 };
  float *a = calloc(N * N, sizeof *a), *c = calloc(N * N, sizeof *c);
  p->rc = a && c ? pdk_gemm_f32(false, false, N, N, N, 1.0f, a, N, a, N, 0.0f, c, N) : -1;
  free(a), free(c);
  return NULL;
}

/* A large product while the cores are contended names its thread as the
 * one a spread keeps on a CPU of its own. */
static void test_contended_product_names_the_compute_thread(void **state) {
  (void)state;
  pd_set_num_threads(2);
  atomic_store(&pd_g_cores_contended, true);
  atomic_store(&pd_g_compute_tid, 0);
  product_thread p = {0, -1};
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, contended_product, &p), 0);
  pthread_join(t, NULL);
  atomic_store(&pd_g_cores_contended, false);
  assert_int_equal(p.rc, 0);
  assert_int_equal(atomic_load(&pd_g_compute_tid), p.tid);
}

/* The watcher's decision, window by window, on made-up readings. */
static void test_decision(void **state) {
  (void)state;
  pd_governor_window w = {0};
  const long win = 50000;                                  /* us */
  assert_false(pd_thread_governor_step(&w, 0, 0, win));    /* quiet */
  assert_false(pd_thread_governor_step(&w, 5, 9000, win)); /* a little of both: still quiet */
  assert_false(pd_thread_governor_step(&w, 0, -1, win));   /* no pressure file */
  assert_false(pd_thread_governor_step(&w, 6, 0, win));    /* one preempted window is not enough */
  assert_false(pd_thread_governor_step(&w, 6, 0, win));    /* nor two (a quiet machine's daemons) */
  assert_false(pd_thread_governor_step(&w, 0, 0, win));    /* ... and a calm one resets the count */
  assert_false(pd_thread_governor_step(&w, 6, 0, win));
  assert_false(pd_thread_governor_step(&w, 6, 0, win));
  assert_true(pd_thread_governor_step(&w, 6, 0, win)); /* three in a row: park */
  assert_true(pd_thread_governor_step(&w, 0, 0, win)); /* one calm window is not enough */
  for (int i = 0; i < 38; i++) assert_true(pd_thread_governor_step(&w, 0, 0, win));
  assert_false(pd_thread_governor_step(&w, 0, 0, win));     /* the 40th calm window releases */
  assert_false(pd_thread_governor_step(&w, 0, 11000, win)); /* others waited 22% of the window */
  assert_false(pd_thread_governor_step(&w, 0, 11000, win));
  assert_true(pd_thread_governor_step(&w, 0, 11000, win)); /* ... three times */
  for (int i = 0; i < 30; i++) assert_true(pd_thread_governor_step(&w, 0, 0, win));
  assert_true(pd_thread_governor_step(&w, 9, 0, win)); /* a busy window or two: the calm count goes on */
  assert_true(pd_thread_governor_step(&w, 9, 0, win));
  for (int i = 0; i < 9; i++) assert_true(pd_thread_governor_step(&w, 0, 0, win));
  assert_false(pd_thread_governor_step(&w, 0, 0, win)); /* the 40th calm window releases */
  for (int i = 0; i < 2; i++) assert_false(pd_thread_governor_step(&w, 9, 0, win));
  assert_true(pd_thread_governor_step(&w, 9, 0, win)); /* parked again */
  for (int i = 0; i < 30; i++) assert_true(pd_thread_governor_step(&w, 0, 0, win));
  for (int i = 0; i < 3; i++)
    assert_true(pd_thread_governor_step(&w, 9, 0, win)); /* contention again, lasting */
  for (int i = 0; i < 39; i++)
    assert_true(pd_thread_governor_step(&w, 1, 100, win)); /* the count restarted */
  assert_false(pd_thread_governor_step(&w, 0, -1, win));
}

/* How many cores to keep while others leave none free: the fair share of
 * the CPUs, at least one, never all. */
static void test_claim_size(void **state) {
  (void)state;
  assert_int_equal(pd_core_claim_size(2, 0, 2, 2.0), 1); /* two busy beside a team of two */
  assert_int_equal(pd_core_claim_size(2, 0, 2, 3.4), 1); /* more: still one */
  assert_int_equal(pd_core_claim_size(2, 1, 2, 1.0), 0); /* a core is free: no claim */
  assert_int_equal(pd_core_claim_size(2, 0, 1, 2.0), 0); /* one thread: nothing to keep together */
  assert_int_equal(pd_core_claim_size(1, 0, 2, 2.0), 0); /* one CPU */
  assert_int_equal(pd_core_claim_size(16, 0, 16, 16.0), 8);
  assert_int_equal(pd_core_claim_size(16, 0, 16, 48.0), 4);
  assert_int_equal(pd_core_claim_size(4, 0, 4, 0.4), 3); /* never every CPU */
  assert_int_equal(pd_core_claim_size(4, 0, 4, -1.0), 3);
}

/* The claim, window by window: taken while parked with no core free, held
 * (and the calm count with it) until a core is free, gone with the park. */
static void test_claim_decision(void **state) {
  (void)state;
  pd_governor_window w = {0};
  assert_int_equal(pd_thread_governor_claim(&w, 0, 2, 2, 2.0), 0); /* not parked: no claim */
  w.parked = true;
  assert_int_equal(pd_thread_governor_claim(&w, 1, 4, 4, 3.0), 0); /* parked, a core free */
  assert_int_equal(pd_thread_governor_claim(&w, 0, 4, 4, 4.0), 2); /* none free: claim the share */
  w.calm = 7;
  assert_int_equal(pd_thread_governor_claim(&w, 0, 4, 4, 3.6), 2); /* held */
  assert_int_equal(w.calm, 0); /* our own threads' preemptions say nothing now */
  assert_int_equal(pd_thread_governor_claim(&w, 1, 4, 4, 3.2), 2); /* one window with a core free: */
  assert_int_equal(pd_thread_governor_claim(&w, 0, 4, 4, 4.0), 2); /* the count wavers, the claim holds */
  assert_int_equal(pd_thread_governor_claim(&w, 1, 4, 4, 3.2), 2);
  assert_int_equal(pd_thread_governor_claim(&w, 1, 4, 4, 3.2), 0); /* the second in a row ends it */
  w.calm = 5;
  assert_int_equal(pd_thread_governor_claim(&w, 1, 4, 4, 3.2), 0);
  assert_int_equal(w.calm, 5); /* the calm count runs again */
  assert_int_equal(pd_thread_governor_claim(&w, 0, 4, 4, 4.0), 2);
  w.parked = false;
  assert_int_equal(pd_thread_governor_claim(&w, 0, 4, 4, 4.0), 0); /* released with the team */
  /* one core free beside a team of two on two CPUs: spread; then a second
   * competitor: two windows say so, the next takes the claim */
  w = (pd_governor_window){.parked = true};
  assert_int_equal(pd_thread_governor_claim(&w, 1, 2, 2, 1.0), PD_CLAIM_SPREAD);
  assert_int_equal(pd_thread_governor_claim(&w, 1, 2, 2, 1.0), PD_CLAIM_SPREAD);
  assert_int_equal(pd_thread_governor_claim(&w, 0, 2, 2, 2.0), PD_CLAIM_SPREAD);
  assert_int_equal(pd_thread_governor_claim(&w, 0, 2, 2, 2.0), 0);
  assert_int_equal(pd_thread_governor_claim(&w, 0, 2, 2, 2.0), 1);
  assert_int_equal(pd_thread_governor_claim(&w, 1, 2, 2, 1.0), 1); /* and back */
  assert_int_equal(pd_thread_governor_claim(&w, 1, 2, 2, 1.0), 0);
  assert_int_equal(pd_thread_governor_claim(&w, 1, 2, 2, 1.0), PD_CLAIM_SPREAD);
  w = (pd_governor_window){.parked = true};
  assert_int_equal(pd_thread_governor_claim(&w, 1, 4, 4, 3.0), 0); /* only two threads on two CPUs */
  assert_int_equal(pd_thread_governor_claim(&w, 1, 2, 1, 1.0), 0);
  assert_int_equal(pd_thread_governor_claim(&w, 2, 2, 2, 0.0), 0); /* both free */
  /* a parked team's calm count waits for as many free cores as it has threads */
  pd_governor_window h = {.parked = true, .calm = 5};
  pd_thread_governor_hold_calm(&h, 1, 2, 2);
  assert_int_equal(h.calm, 0); /* one competitor still takes a core */
  h.calm = 5;
  pd_thread_governor_hold_calm(&h, 2, 2, 2);
  assert_int_equal(h.calm, 5); /* both free */
  pd_thread_governor_hold_calm(&h, 14, 16, 2);
  assert_int_equal(h.calm, 5); /* a team of two, fourteen cores free */
  pd_thread_governor_hold_calm(&h, 3, 16, 4);
  assert_int_equal(h.calm, 0); /* a team of four, three free */
  h = (pd_governor_window){.parked = false, .calm = 5};
  pd_thread_governor_hold_calm(&h, 0, 2, 2);
  assert_int_equal(h.calm, 5); /* no team parked: nothing to hold */
  /* the claim's holders run while the process's own threads use a quarter of a CPU */
  assert_true(pd_thread_governor_computing(50000000LL, 50000000L));
  assert_true(pd_thread_governor_computing(12500000LL, 50000000L));
  assert_false(pd_thread_governor_computing(12000000LL, 50000000L));
  assert_false(pd_thread_governor_computing(0, 50000000L));
}

static const char *g_self;

/* Runs a scenario in a fresh process with one environment variable set. */
static void run_scenario(const char *name, const char *var, const char *value) {
  pid_t p = fork();
  assert_true(p >= 0);
  if (p == 0) {
    unsetenv("OMP_WAIT_POLICY"), unsetenv("GOMP_SPINCOUNT"), unsetenv("PADDLEC_WAIT_POLICY");
    setenv(var, value, 1);
    execl(g_self, g_self, "--scenario", name, (char *)NULL);
    _exit(127);
  }
  int status = 0;
  assert_int_equal(waitpid(p, &status, 0), p);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    fail_msg("scenario %s (%s=%s) failed: status %d", name, var, value,
             WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status));
}

/* The cores others leave free: one window's runnable tasks of the machine
 * less the process's own, averaged (weight 0.2 for the newest window). */
static void test_free_cores(void **state) {
  (void)state;
  double others = 0;
  /* quiet: only our own tasks run */
  for (int i = 0; i < 20; i++) assert_int_equal(pd_thread_governor_free_cores(&others, 2, 3, 3), 2);
  /* one busy process appears: the average passes 0.5 after 4 windows (1 - 0.8^4 = 0.59) */
  int first_one = -1;
  for (int i = 0; i < 20; i++)
    if (pd_thread_governor_free_cores(&others, 2, 4, 3) == 1 && first_one < 0) first_one = i;
  assert_int_equal(first_one, 3);
  assert_int_equal(pd_thread_governor_free_cores(&others, 2, 2, 1), 1);
  /* two of them: no core free, never negative with more */
  for (int i = 0; i < 20; i++) pd_thread_governor_free_cores(&others, 2, 4, 2);
  assert_int_equal(pd_thread_governor_free_cores(&others, 2, 4, 2), 0);
  for (int i = 0; i < 20; i++) pd_thread_governor_free_cores(&others, 2, 9, 1);
  assert_int_equal(pd_thread_governor_free_cores(&others, 2, 9, 1), 0);
  /* a count read between our threads' state reads may go below ours: taken as 0 others */
  others = 0;
  assert_int_equal(pd_thread_governor_free_cores(&others, 2, 1, 3), 2);
  assert_true(others == 0);
}

static void test_passive_pool_sleeps(void **state) {
  (void)state;
  run_scenario("passive", "PADDLEC_WAIT_POLICY", "passive");
}

static void test_auto_parks_under_contention(void **state) {
  (void)state;
  run_scenario("auto", "PADDLEC_WAIT_POLICY", "auto");
}

static void test_user_wait_policy_wins(void **state) {
  (void)state;
  run_scenario("user", "OMP_WAIT_POLICY", "active");
  run_scenario("user", "GOMP_SPINCOUNT", "1000");
  run_scenario("user", "PADDLEC_WAIT_POLICY", "active");
}

/* a fork while teams are parked and released waits for a team in motion */
static void test_fork_while_parked(void **state) {
  (void)state;
  run_scenario("fork_release", "PADDLEC_WAIT_POLICY", "passive");
}

/* the governor returns only once its watcher runs: a fork right after it
 * copies no lock of the newborn thread (20 fresh processes) */
static void test_fork_after_start(void **state) {
  (void)state;
  for (int i = 0; i < 20; i++) run_scenario("start_fork", "PADDLEC_WAIT_POLICY", "auto");
}

static void test_forked_child_computes(void **state) {
  (void)state;
  run_scenario("fork_team", "PADDLEC_WAIT_POLICY", "auto");
  run_scenario("fork_team", "PADDLEC_WAIT_POLICY", "active");
}

static void test_claim_masks(void **state) {
  (void)state;
  run_scenario("claim_masks", "PADDLEC_WAIT_POLICY", "active");
  run_scenario("spread_masks", "PADDLEC_WAIT_POLICY", "active");
  run_scenario("claim_off", "PADDLEC_CORE_CLAIM", "off");
  run_scenario("claim_off", "OMP_PROC_BIND", "true");
  run_scenario("claim_pin", "PADDLEC_CORE_CLAIM", "pin");
}

static void test_single_thread_then_team(void **state) {
  (void)state;
  run_scenario("single", "PADDLEC_WAIT_POLICY", "passive");
}

int main(int argc, char **argv) {
  g_self = "/proc/self/exe";
  if (argc == 3 && strcmp(argv[1], "--scenario") == 0) {
    const char *s = argv[2];
    if (strcmp(s, "passive") == 0) return scenario_passive();
    if (strcmp(s, "auto") == 0) return scenario_auto();
    if (strcmp(s, "user") == 0) return scenario_user_policy();
    if (strcmp(s, "single") == 0) return scenario_single();
    if (strcmp(s, "fork_release") == 0) return scenario_fork_release();
    if (strcmp(s, "start_fork") == 0) return scenario_start_fork();
    if (strcmp(s, "fork_team") == 0) return scenario_fork_team();
    if (strcmp(s, "claim_masks") == 0) return scenario_claim_masks();
    if (strcmp(s, "claim_off") == 0) return scenario_claim_off();
    if (strcmp(s, "claim_pin") == 0) return scenario_claim_pin();
    if (strcmp(s, "spread_masks") == 0) return scenario_spread_masks();
    return 99;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_decision),
      cmocka_unit_test(test_free_cores),
      cmocka_unit_test(test_claim_size),
      cmocka_unit_test(test_claim_decision),
      cmocka_unit_test(test_claim_masks),
      cmocka_unit_test(test_contended_loops_run_on_one_thread),
      cmocka_unit_test(test_contended_product_names_the_compute_thread),
      cmocka_unit_test(test_passive_pool_sleeps),
      cmocka_unit_test(test_user_wait_policy_wins),
      cmocka_unit_test(test_single_thread_then_team),
      cmocka_unit_test(test_fork_while_parked),
      cmocka_unit_test(test_fork_after_start),
      cmocka_unit_test(test_forked_child_computes),
      cmocka_unit_test(test_auto_parks_under_contention),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
