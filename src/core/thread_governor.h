/* The thread governor (thread_governor.c): keeps libgomp's waiting threads
 * from spinning on cores that other processes need. The dispatcher pokes it
 * before every kernel; the first poke starts it. */
#ifndef PADDLEC_CORE_THREAD_GOVERNOR_H
#define PADDLEC_CORE_THREAD_GOVERNOR_H

#include <stdatomic.h>
#include <stdbool.h>

typedef enum pd_wait_policy {
  PD_WAIT_AUTO,    /* spin while the machine is quiet, sleep-wait under contention */
  PD_WAIT_PASSIVE, /* always sleep-wait after a short spin */
  PD_WAIT_ACTIVE,  /* libgomp's own policy (also when the user set OMP_WAIT_POLICY or GOMP_SPINCOUNT) */
} pd_wait_policy;

typedef enum pd_governor_state {
  PD_GOVERNOR_UNSTARTED,
  PD_GOVERNOR_STARTING,
  PD_GOVERNOR_RUNNING,
  PD_GOVERNOR_SINGLE, /* one thread: nothing to govern until pd_set_num_threads raises it */
  PD_GOVERNOR_FORKED, /* a forked child: off for good (thread_governor.c, child_after_fork) */
} pd_governor_state;

extern atomic_int pd_g_governor_state;

void pd_thread_governor_start(void);

static inline void pd_thread_governor_poke(void) {
  if (__builtin_expect(
          atomic_load_explicit(&pd_g_governor_state, memory_order_relaxed) == PD_GOVERNOR_UNSTARTED, 0))
    pd_thread_governor_start();
}

/* pd_set_num_threads: a single-threaded process may now have a team. */
void pd_thread_governor_threads_changed(int n);

/* The watcher's decision for one window: `preempted` involuntary context
 * switches of the process and `stall_us` microseconds of CPU pressure (-1:
 * unknown) during `window_us`. Returns whether a team should be parked. */
typedef struct pd_governor_window {
  int busy; /* consecutive contended windows */
  int calm; /* consecutive calm windows while parked */
  bool parked;
  int claim;    /* cores kept to the process (core_claim.h), PD_CLAIM_SPREAD, 0: none */
  int changing; /* windows in a row that asked for another kind of claim */
} pd_governor_window;
bool pd_thread_governor_step(pd_governor_window *w, long preempted, long long stall_us, long window_us);

/* The cores other processes leave free, from one window's count of the
 * machine's runnable tasks and this process's own (the watcher's, read from
 * /proc/loadavg and /proc/self/task): *others keeps the other processes'
 * runnable tasks averaged over the last windows (weight 0.2 for the newest,
 * about half a second); cpus less that average, rounded, at least 0. */
int pd_thread_governor_free_cores(double *others, int cpus, int machine_runnable, int own_runnable);

/* The watcher's claim decision for one window, after the step above
 * (core_claim.h): while parked and no core is free, keep
 * pd_core_claim_size cores to the process (while such a claim holds, the
 * calm count stays at 0); while parked with exactly one core free, a team
 * of two on two CPUs is spread (PD_CLAIM_SPREAD). A claim or spread ends
 * when two windows in a row ask for another kind (the free-core count
 * wavers by one now and then), and the next window takes that one;
 * unparking ends it at once. Returns w->claim. */
enum { PD_CLAIM_SPREAD = -1 };
int pd_thread_governor_claim(pd_governor_window *w, int free_cores, int cpus, int threads, double others);

/* Also after the step: a parked team's calm count stays at 0 while the
 * other processes leave fewer free cores than the team has threads (at
 * most cpus), claims or not. */
void pd_thread_governor_hold_calm(pd_governor_window *w, int free_cores, int cpus, int threads);

/* Whether the process computes, for its claim's holders (core_claim.h):
 * its own threads, holders left out, used at least a quarter of a CPU in
 * the window (work_ns of CPU time in window_ns). */
bool pd_thread_governor_computing(long long work_ns, long window_ns);

/* Parks a team (libgomp's waits then sleep after a short spin) or releases
 * it; idempotent. The watcher calls it; tests may too. */
void pd_thread_governor_set_parked(bool parked);

/* For tests: the policy in force, whether a team is parked now, and how many
 * times one was parked since the start. */
pd_wait_policy pd_thread_governor_policy(void);
bool pd_thread_governor_parked(void);
/* A child forked after the governor started (after the parent's first op
 * with a pool of more than one thread): it computes on one thread. */
bool pd_thread_governor_forked(void);
int pd_thread_governor_parks(void);

#endif
