/* Keeping the process's threads on a share of the cores while other
 * processes leave none free (core_claim.c; the thread governor decides when).
 *
 * Two busy processes beside a team of two on two cores: the scheduler puts
 * them either both on one core, leaving the other to our team, or one on
 * each, where each of our threads shares a core with one of them. The second
 * placement loses about a third of the step (measured with the decoder, 70
 * against 105-125 ms, docs/threads.md): whenever one of our threads sleeps
 * (the serial parts of a step, a wait at a product's end) its core goes to the
 * competitor beside it, where in the first our other thread gets it. Both
 * placements are balanced in the kernel's eyes and each lasts for seconds.
 * Keeping our threads on one core makes the first placement the balanced one:
 * the kernel moves the competitors off the core our threads may not leave. */
#ifndef PADDLEC_CORE_CORE_CLAIM_H
#define PADDLEC_CORE_CORE_CLAIM_H

#include <sched.h>
#include <stdbool.h>
#include <sys/types.h>

/* How many cores a process of `threads` threads should keep to itself on a
 * machine of `cpus` CPUs where `free_cores` are left free by the others,
 * whose runnable tasks average `others`: 0 (no claim) while a core is free,
 * with fewer than two CPUs or threads; else its fair share of the CPUs,
 * cpus * threads / (threads + others) rounded down, at least 1 and at most
 * cpus - 1. */
int pd_core_claim_size(int cpus, int free_cores, int threads, double others);

/* Records the process's CPUs (this thread's affinity mask) as the ones to
 * give back on release, and whether a claim is allowed at all: not with
 * PADDLEC_CORE_CLAIM=off, not when the user binds threads
 * (OMP_PROC_BIND, OMP_PLACES, GOMP_CPU_AFFINITY), not with fewer than two
 * CPUs; and whether a claim starts holders (not with PADDLEC_CORE_CLAIM=pin).
 * Returns whether claims are allowed. */
bool pd_core_claim_init(void);

/* Moves every thread of the process whose mask is the recorded one, except
 * the caller, onto `k` of its CPUs: from the one the process's main thread
 * runs on, in the mask's order, skipping CPUs that another process of this
 * library has claimed (a machine-wide lock per CPU, an abstract socket name,
 * gone when its holder is). Returns whether the claim took (not when fewer
 * than k CPUs were free to claim, or one is in force). */
bool pd_core_claim(int k);

/* Gives the threads the claim moved, and those born during it with its
 * mask, the recorded mask back (a thread the user had pinned to the
 * claimed CPUs before stays pinned); idempotent. */
void pd_core_claim_release(void);

/* While a claim holds, the process's threads on a claimed CPU are its only
 * ready tasks there whenever they sleep for a moment (the serial parts of a
 * step, a wait at a product's end), and the kernel's balancer, counting the
 * competitors that wait on the other CPUs, moves one onto it: under a mixed
 * load (a busy, a bursty and a memory-streaming process beside a team of two
 * on two CPUs) one of them shared our CPU most of the time. So a claim also
 * starts one holder thread per claimed CPU, pinned there, that only calls
 * sched_yield: it takes no time from any other ready task on that CPU, ours
 * or another process's, but keeps the CPU counted busy. Holders run only
 * while the process computes: the watcher pauses them when the process's
 * own threads (holders left out) used less than a quarter of a CPU in a
 * window, and runs them again when they use more (pd_core_claim_hold).
 * PADDLEC_CORE_CLAIM=pin claims without holders. Holders stop with the
 * claim. */
void pd_core_claim_hold(bool hold);
/* The holders there are, and whether they run (not paused). */
int pd_core_claim_holders(bool *holding);
/* The CPU time the holders have used (the watcher leaves it out of the
 * process's own), in nanoseconds. */
long long pd_core_claim_holders_cpu_ns(void);

/* The thread that runs the ops (the governor's starter), for a spread. */
void pd_core_claim_set_compute(pid_t tid);

/* The other form of claim, for a team of two beside one competitor on two
 * CPUs (one core free): the compute thread keeps to itself the CPU where
 * the fewest other tasks are ready (locked as above) and every other thread
 * of the process's mask goes to the other CPUs. Left to itself the kernel
 * puts a team's two threads together (a woken thread goes where its waker
 * runs); spread, the competitor joins the helper, the compute thread runs
 * the step's serial parts on a core of its own, and the helper adds half a
 * core to the products (gemm.c shares them so that nobody waits for it). No
 * holders. pd_core_claimed is true while it holds, and release ends it. */
bool pd_core_spread(void);

/* During a spread: threads born since with the compute thread's CPU (its
 * helpers) go to the others'. The watcher calls it every window. */
void pd_core_claim_refresh(void);

bool pd_core_claimed(void);
/* The claimed CPUs (none when no claim is in force); returns their count. */
int pd_core_claimed_cpus(cpu_set_t *cpus);

/* In a forked child: its one thread gets the recorded mask back (a fork
 * from a claimed thread copies the claimed mask) and the claim is
 * forgotten. */
void pd_core_claim_forget_in_child(void);

#endif
