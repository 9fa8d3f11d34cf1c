/* Waiting in the shm backend: spin briefly, then sleep on a futex; while
 * waiting, watch the peers (a dead rank is an error within a second), the
 * group's abort flag and the timeout. */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "shm_internal.h"

/* How long to spin before sleeping. A synchronous caller has nothing else to
 * do: it spins long enough to cover the skew between ranks arriving at
 * back-to-back collectives. An asynchronous collective (a lane's worker
 * thread, e.g. DataParallel's buckets during backward) shares the core with
 * its rank's computation, and the peers may still be computing: at the entry
 * it spins briefly and then sleeps, or it would take the core from the
 * backward it is meant to overlap (1.3x slower steps with a 30 us spin).
 * Inside a collective every rank is moving data and waits are short. */
#define ENTRY_SPIN_NS 50000
#define ENTRY_SPIN_ASYNC_NS 2000
#define DATA_SPIN_NS 50000
#define SLEEP_NS 2000000         /* futex sleeps at most 2 ms between checks */
#define WATCH_EVERY_NS 200000000 /* look at the peers' liveness every 200 ms */

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

void shm_notify(shm_comm *s) {
  if (atomic_load(&s->hdr->nwaiters) > 0) {
    atomic_fetch_add(&s->hdr->wake, 1);
    syscall(SYS_futex, &s->hdr->wake, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
  }
}

pd_status shm_fail(shm_comm *s) {
  pd_status st = pd_last_status();
  int expect = -1;
  if (atomic_compare_exchange_strong(&s->hdr->abort_rank, &expect, s->base.rank)) {
    snprintf(s->hdr->abort_msg, sizeof s->hdr->abort_msg, "%s", pd_last_error());
    atomic_fetch_add(&s->hdr->wake, 1);
    syscall(SYS_futex, &s->hdr->wake, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
  }
  pd_comm_break(&s->base);
  return st < 0 ? st : PD_ERR_COMM;
}

/* Group rank of a peer that has exited, or -1. */
static int dead_peer(shm_comm *s) {
  int n = s->base.nranks;
  for (int i = 0; i < n; i++) {
    if (i == s->base.rank) continue;
    if (s->pidfds[i] >= 0) {
      struct pollfd p = {s->pidfds[i], POLLIN, 0};
      if (poll(&p, 1, 0) > 0) return i;
    } else if (s->pids[i] > 0) {
      if (kill(s->pids[i], 0) < 0 && errno == ESRCH) return i;
      char path[64], buf[256];
      snprintf(path, sizeof path, "/proc/%d/stat", s->pids[i]);
      FILE *f = fopen(path, "r");
      if (f) {
        size_t k = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[k] = 0;
        const char *rp = strrchr(buf, ')');
        if (rp && rp[1] == ' ' && (rp[2] == 'Z' || rp[2] == 'X')) return i;
      }
    }
  }
  return -1;
}

typedef int (*shm_ready_fn)(shm_comm *s, const void *arg);

/* The wait's description, formatted only when it fails. */
static const char *wait_what(const shm_wait_ctx *w, char *buf, size_t cap) {
  if (w->what) return w->what;
  return w->sig ? pd_comm_sig_str(w->sig, buf, cap) : "wait";
}

static int all_arrived(shm_comm *s, const void *arg);

/* Who a long wait is waiting for, for the periodic warning. */
static void waiting_for(shm_comm *s, shm_ready_fn ready, const void *arg, const shm_wait_ctx *w, char *buf,
                        size_t cap) {
  int n = s->base.nranks, small[8];
  int *pending = n <= 8 ? small : calloc((size_t)n, sizeof *pending);
  if (ready == all_arrived && pending) {
    uint64_t target = *(const uint64_t *)arg;
    for (int i = 0; i < n; i++) pending[i] = atomic_load(&s->ctl[i].arrive) < target;
    pd_comm_rank_list(s->base.global_ranks, pending, n, buf, cap);
  } else if (w->peer >= 0) {
    snprintf(buf, cap, "rank %d", s->base.global_ranks[w->peer]);
  } else {
    snprintf(buf, cap, "the other ranks (every rank entered it; the data is not moving)");
  }
  if (n > 8) free(pending);
}

/* The one wait loop. `missing` lists (as text) who has not arrived when the
 * wait fails; built lazily by describe(). */
/* own_failure: NULL publishes a timeout or a dead peer at once (shm_fail);
 * otherwise *own_failure = 1 and the caller publishes a fuller message. */
static pd_status wait_for(shm_comm *s, uint64_t spin_ns, shm_ready_fn ready, const void *arg,
                          const shm_wait_ctx *w, void (*describe)(shm_comm *, const void *, char *, size_t),
                          int *own_failure) {
  if (ready(s, arg)) return PD_OK;
  uint64_t t0 = now_ns(), next_watch = t0 + WATCH_EVERY_NS;
  uint64_t deadline = t0 + (uint64_t)(s->base.timeout_s * 1e9);
  uint64_t warn_every = (uint64_t)(s->base.warn_s * 1e9), next_warn = t0 + warn_every;
  for (int spins = 0;; spins++) {
    if (ready(s, arg)) return PD_OK;
    if (spins < 64) {
      cpu_relax();
      continue;
    }
    uint64_t t = now_ns();
    if (t - t0 < spin_ns) {
      /* more ranks than cores: the rank we wait for may need this core */
      if (s->oversubscribed)
        sched_yield();
      else
        for (int k = 0; k < 32; k++) cpu_relax();
      continue;
    }
    /* sleep: announce, re-check, then wait on the futex word */
    unsigned w0 = atomic_load(&s->hdr->wake);
    atomic_fetch_add(&s->hdr->nwaiters, 1);
    if (!ready(s, arg)) {
      struct timespec ts = {0, SLEEP_NS};
      syscall(SYS_futex, &s->hdr->wake, FUTEX_WAIT, w0, &ts, NULL, 0);
    }
    atomic_fetch_sub(&s->hdr->nwaiters, 1);
    if (ready(s, arg)) return PD_OK;
    t = now_ns();
    int ab = atomic_load(&s->hdr->abort_rank);
    if (ab >= 0 && ab != s->base.rank) {
      char wb[160];
      pd_set_error(PD_ERR_COMM, "shm %s on group %d: rank %d failed: %s", wait_what(w, wb, sizeof wb),
                   s->base.group_id, s->base.global_ranks[ab], s->hdr->abort_msg);
      pd_comm_break(&s->base);
      return PD_ERR_COMM;
    }
    if (t >= next_watch) {
      next_watch = t + WATCH_EVERY_NS;
      int d = dead_peer(s);
      if (d >= 0) {
        char who[512] = "";
        if (describe) describe(s, arg, who, sizeof who);
        char wb[160];
        pd_set_error(PD_ERR_COMM, "shm %s on group %d: rank %d (pid %d) died%s%s",
                     wait_what(w, wb, sizeof wb), s->base.group_id, s->base.global_ranks[d], s->pids[d],
                     who[0] ? "; " : "", who);
        if (own_failure) return *own_failure = 1, PD_ERR_COMM;
        return shm_fail(s);
      }
    }
    if (t >= next_warn && t < deadline) {
      next_warn += warn_every;
      char who[512], wb[160], what[256];
      waiting_for(s, ready, arg, w, who, sizeof who);
      snprintf(what, sizeof what, "shm %s on group %d", wait_what(w, wb, sizeof wb), s->base.group_id);
      pd_comm_warn_waiting(s->base.global_ranks[s->base.rank], what, who, (double)(t - t0) * 1e-9,
                           s->base.timeout_s);
    }
    if (t >= deadline) {
      char who[512] = "";
      if (describe) describe(s, arg, who, sizeof who);
      char wb[160];
      pd_set_error(PD_ERR_COMM, "shm %s on group %d: timed out after %.1f s%s%s", wait_what(w, wb, sizeof wb),
                   s->base.group_id, s->base.timeout_s, who[0] ? "; " : "", who);
      if (own_failure) return *own_failure = 1, PD_ERR_COMM;
      return shm_fail(s);
    }
  }
}

/* ---- barriers ---- */
static int all_arrived(shm_comm *s, const void *arg) {
  uint64_t target = *(const uint64_t *)arg;
  for (int i = 0; i < s->base.nranks; i++)
    if (atomic_load_explicit(&s->ctl[i].arrive, memory_order_acquire) < target) return 0;
  return 1;
}

static void describe_missing(shm_comm *s, const void *arg, char *buf, size_t cap) {
  uint64_t target = *(const uint64_t *)arg;
  size_t n = (size_t)snprintf(buf, cap, "waiting for");
  int k = 0;
  for (int i = 0; i < s->base.nranks && n < cap; i++)
    if (atomic_load(&s->ctl[i].arrive) < target)
      n += (size_t)snprintf(buf + n, cap - n, "%s rank %d", k++ ? "," : "", s->base.global_ranks[i]);
  if (!k) buf[0] = 0;
}

static void arrive(shm_comm *s) {
  s->epoch++;
  atomic_store_explicit(&s->ctl[s->base.rank].arrive, s->epoch, memory_order_seq_cst);
  shm_notify(s);
}

pd_status shm_barrier(shm_comm *s, const shm_wait_ctx *w) {
  arrive(s);
  uint64_t target = s->epoch;
  return wait_for(s, DATA_SPIN_NS, all_arrived, &target, w, describe_missing, NULL);
}

pd_status shm_enter(shm_comm *s, const shm_post *post) {
  pd_status st = pd_comm_check_broken(&s->base, pd_comm_kind_name((pd_comm_kind)post->sig.kind));
  if (st < 0) return st;
  int par = (int)(post->sig.seq & 1);
  s->ctl[s->base.rank].post[par] = *post;
  shm_wait_ctx w = {NULL, &post->sig, -1};
  arrive(s);
  uint64_t target = s->epoch;
  int n = s->base.nranks;
  pd_comm_sig sigs_small[8];
  int present_small[8];
  pd_comm_sig *sigs = n <= 8 ? sigs_small : malloc((size_t)n * sizeof *sigs);
  int *present = n <= 8 ? present_small : malloc((size_t)n * sizeof *present);
  if (!sigs || !present) {
    if (n > 8) free(sigs), free(present);
    return pd_set_error(PD_ERR_MEMORY, "shm collective: out of memory");
  }
  int own_failure = 0;
  st = wait_for(s, pd_comm_async_thread ? ENTRY_SPIN_ASYNC_NS : ENTRY_SPIN_NS, all_arrived, &target, &w, NULL,
                &own_failure);
  int mismatch = 0;
  for (int i = 0; i < n; i++) {
    present[i] = atomic_load_explicit(&s->ctl[i].arrive, memory_order_acquire) >= target;
    sigs[i] = s->ctl[i].post[par].sig;
    if (present[i] && !pd_comm_sig_equal(&sigs[i], &post->sig)) mismatch = 1;
  }
  if (mismatch) {
    pd_comm_mismatch_error("shm", s->base.group_id, s->base.rank, n, sigs, present, s->base.global_ranks,
                           "ranks called different collectives");
    st = shm_fail(s);
  } else if (st < 0 && own_failure) {
    /* this rank timed out or saw a death: restate with who called what */
    char reason[1200];
    char on[48];
    snprintf(on, sizeof on, "on group %d: ", s->base.group_id);
    const char *e = pd_last_error(), *tail = strstr(e, on);
    snprintf(reason, sizeof reason, "%s", tail ? tail + strlen(on) : e);
    pd_comm_mismatch_error("shm", s->base.group_id, s->base.rank, n, sigs, present, s->base.global_ranks,
                           reason);
    st = shm_fail(s);
  }
  if (n > 8) free(sigs), free(present);
  return st;
}

typedef struct word_target {
  atomic_uint_fast64_t *word;
  uint64_t target;
} word_target;

static int word_reached(shm_comm *s, const void *arg) {
  (void)s;
  const word_target *a = arg;
  return atomic_load_explicit(a->word, memory_order_acquire) >= a->target;
}

pd_status shm_wait_u64(shm_comm *s, atomic_uint_fast64_t *word, uint64_t target, const shm_wait_ctx *w) {
  word_target a = {word, target};
  return wait_for(s, DATA_SPIN_NS, word_reached, &a, w, NULL, NULL);
}
