/* Large float32 products while other processes compete for the cores.
 *
 * A team that divides a product and meets at its end waits, at every
 * product, for a member that has lost its core: measured on 2 cores with
 * two busy processes beside the MLP of bench_train, the calling thread spent
 * 40% of its time in contended products waiting at their end
 * (docs/threads.md). Here the product is cut into panels that the calling
 * thread and helper threads (plain threads, not an OpenMP team: nothing joins
 * them) take one at a time. A helper computes its panel into a buffer of its
 * own and commits it into C only if nobody did first. When the caller has
 * no panel left to take and a helper's panel is overdue (it has been at it
 * half again as long as the caller's own panels take), the caller computes
 * that panel itself, straight into C, and the helper's late result is
 * discarded: the caller returns as soon as every panel is in C, whatever
 * the helpers' cores do.
 *
 * A helper still computing a discarded panel reads A and B after the
 * product has returned; the caller's pdk_gemm_keep holds their owners until
 * the helpers are done with the product. C is written only under the
 * commit flag of each panel, never after the product returns. */
#define _GNU_SOURCE
#include "gemm_backup.h"

#include <omp.h>
#include <oneapi/dnnl/dnnl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_HELPERS 63

atomic_llong pd_g_gemm_backup_products, pd_g_gemm_backups, pd_g_gemm_helper_panels;
atomic_int pd_g_gemm_helper_delay_us;

static _Thread_local const pdk_gemm_keep *t_keep;

void pdk_gemm_keep_inputs(const pdk_gemm_keep *k) { t_keep = k; }
const pdk_gemm_keep *pdk_gemm_kept_inputs(void) { return t_keep; }

/* panel states: started_ns 0 = taken but not begun, -1 = given up by its
 * helper (no buffer, or oneDNN failed): the caller computes it at once */
typedef struct job {
  atomic_int refs; /* the caller's, and one per helper slot it was put in */
  bool ta, tb, by_cols;
  int np;
  int64_t M, N, K, lda, ldb, ldc;
  float alpha, beta;
  const float *A, *B;
  float *C;
  pdk_gemm_keep keep;
  atomic_int next; /* the next panel nobody has taken */
  atomic_llong *started_ns;
  atomic_uchar *committed, *finished;
} job;

static int64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static void job_drop(job *j) {
  if (atomic_fetch_sub_explicit(&j->refs, 1, memory_order_acq_rel) != 1) return;
  for (int i = 0; i < 2; i++)
    if (j->keep.obj[i]) j->keep.release(j->keep.obj[i]);
  free(j);
}

/* Panel t's rows m0..m1 and columns n0..n1 of C. */
static void panel_bounds(const job *j, int t, int64_t *m0, int64_t *m1, int64_t *n0, int64_t *n1) {
  *m0 = 0, *m1 = j->M, *n0 = 0, *n1 = j->N;
  if (j->by_cols)
    *n0 = j->N * t / j->np, *n1 = j->N * (t + 1) / j->np;
  else
    *m0 = j->M * t / j->np, *m1 = j->M * (t + 1) / j->np;
}

/* dst = alpha * panel t of op(A) op(B) + beta * dst; 0 or oneDNN's status.
 * One thread: the caller and the helpers all run with one OpenMP thread. */
static int panel_into(const job *j, int t, float *dst, int64_t ldd, float beta) {
  int64_t m0, m1, n0, n1;
  panel_bounds(j, t, &m0, &m1, &n0, &n1);
  const float *a = j->ta ? j->A + m0 : j->A + m0 * j->lda;
  const float *b = j->tb ? j->B + n0 * j->ldb : j->B + n0;
  dnnl_status_t st = dnnl_sgemm(j->ta ? 'T' : 'N', j->tb ? 'T' : 'N', m1 - m0, n1 - n0, j->K, j->alpha, a,
                                j->lda, b, j->ldb, beta, dst, ldd);
  return st == dnnl_success ? 0 : (int)st;
}

/* ---- helper threads --------------------------------------------------------- */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static _Atomic(job *) g_slot[MAX_HELPERS];
static int g_helpers; /* started (under g_mu) */

static void helper_work(job *j, float **buf, size_t *cap) {
  int t;
  while ((t = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed)) < j->np) {
    atomic_store_explicit(&j->started_ns[t], now_ns(), memory_order_relaxed);
    int delay = atomic_load_explicit(&pd_g_gemm_helper_delay_us, memory_order_relaxed);
    if (delay > 0) nanosleep(&(struct timespec){delay / 1000000, (long)(delay % 1000000) * 1000}, NULL);
    int64_t m0, m1, n0, n1;
    panel_bounds(j, t, &m0, &m1, &n0, &n1);
    size_t need = (size_t)((m1 - m0) * (n1 - n0));
    if (need > *cap) {
      free(*buf);
      *cap = 0;
      if ((*buf = malloc(sizeof(float) * need)) != NULL) *cap = need;
    }
    if (!*buf || panel_into(j, t, *buf, n1 - n0, 0.0f) != 0) {
      atomic_store_explicit(&j->started_ns[t], -1, memory_order_relaxed); /* the caller takes it over */
      continue;
    }
    unsigned char no = 0;
    if (!atomic_compare_exchange_strong_explicit(&j->committed[t], &no, 1, memory_order_acq_rel,
                                                 memory_order_relaxed))
      continue; /* the caller backed it up */
    for (int64_t i = m0; i < m1; i++) {
      float *c = j->C + i * j->ldc + n0;
      const float *s = *buf + (i - m0) * (n1 - n0);
      if (j->beta == 0.0f)
        memcpy(c, s, sizeof(float) * (size_t)(n1 - n0));
      else
        for (int64_t x = 0; x < n1 - n0; x++) c[x] = j->beta * c[x] + s[x];
    }
    atomic_store_explicit(&j->finished[t], 1, memory_order_release);
    atomic_fetch_add_explicit(&pd_g_gemm_helper_panels, 1, memory_order_relaxed);
  }
}

static void *helper_main(void *arg) {
  int id = (int)(intptr_t)arg;
  omp_set_num_threads(1); /* oneDNN runs each panel on this thread alone */
  float *buf = NULL;
  size_t cap = 0;
  for (;;) {
    pthread_mutex_lock(&g_mu);
    job *j;
    while (!(j = atomic_exchange(&g_slot[id], NULL))) pthread_cond_wait(&g_cv, &g_mu);
    pthread_mutex_unlock(&g_mu);
    helper_work(j, &buf, &cap);
    job_drop(j);
  }
  return NULL;
}

/* A forked child has none of the helpers (fork copies only the calling
 * thread); it starts its own if it ever needs them. Jobs left in the slots
 * are not the child's to free: a helper of the parent may hold them. */
static void child_after_fork(void) {
  pthread_mutex_init(&g_mu, NULL);
  pthread_cond_init(&g_cv, NULL);
  for (int i = 0; i < MAX_HELPERS; i++) atomic_store(&g_slot[i], NULL);
  g_helpers = 0;
}

/* At least n helpers running; false when none could be started. */
static int ensure_helpers(int n) {
  if (n > MAX_HELPERS) n = MAX_HELPERS;
  pthread_mutex_lock(&g_mu);
  static bool fork_handler;
  if (!fork_handler) fork_handler = pthread_atfork(NULL, NULL, child_after_fork) == 0;
  while (fork_handler && g_helpers < n) {
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&t, &attr, helper_main, (void *)(intptr_t)g_helpers);
    pthread_attr_destroy(&attr);
    if (rc != 0) break;
    g_helpers++;
  }
  int have = g_helpers < n ? g_helpers : n;
  pthread_mutex_unlock(&g_mu);
  return have;
}

/* ---- the caller -------------------------------------------------------------- */
int pdk_gemm_backup_f32(bool transa, bool transb, int64_t M, int64_t N, int64_t K, float alpha,
                        const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
                        int64_t ldc, bool by_cols, int np, int helpers, const pdk_gemm_keep *keep) {
  helpers = ensure_helpers(helpers);
  if (helpers < 1 || np < 1) return -1;
  size_t arrays = (sizeof(atomic_llong) + 2 * sizeof(atomic_uchar)) * (size_t)np;
  job *j = calloc(1, sizeof *j + arrays);
  if (!j) return -1;
  *j = (job){.ta = transa,
             .tb = transb,
             .by_cols = by_cols,
             .np = np,
             .M = M,
             .N = N,
             .K = K,
             .lda = lda,
             .ldb = ldb,
             .ldc = ldc,
             .alpha = alpha,
             .beta = beta,
             .A = A,
             .B = B,
             .C = C};
  j->started_ns = (atomic_llong *)(j + 1);
  j->committed = (atomic_uchar *)(j->started_ns + np);
  j->finished = j->committed + np;
  if (keep) {
    j->keep = *keep;
    for (int i = 0; i < 2; i++)
      if (j->keep.obj[i]) j->keep.retain(j->keep.obj[i]);
  }
  atomic_init(&j->refs, 1 + helpers);
  atomic_fetch_add_explicit(&pd_g_gemm_backup_products, 1, memory_order_relaxed);
  for (int i = 0; i < helpers; i++) {
    job *old = atomic_exchange(&g_slot[i], j);
    if (old) job_drop(old); /* a product its helper never came to */
  }
  pthread_mutex_lock(&g_mu);
  pthread_cond_broadcast(&g_cv);
  pthread_mutex_unlock(&g_mu);

  int nt = omp_get_max_threads();
  omp_set_num_threads(1);
  int failed = 0, own = 0, t;
  int64_t own_ns = 0;
  while ((t = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed)) < np) {
    atomic_store_explicit(&j->committed[t], 1, memory_order_relaxed); /* taken here: nobody else commits it */
    int64_t t0 = now_ns();
    int64_t m0, m1, n0, n1;
    panel_bounds(j, t, &m0, &m1, &n0, &n1);
    int st = panel_into(j, t, C + m0 * ldc + n0, ldc, beta);
    if (st) failed = st;
    own_ns += now_ns() - t0, own++;
    atomic_store_explicit(&j->finished[t], 1, memory_order_relaxed);
  }
  /* a helper's panel is overdue after half again the time this thread's
   * panels took (a fixed 0.2 ms if it computed none) */
  int64_t overdue = own ? own_ns * 3 / (2 * own) : 200000;
  for (t = 0; t < np; t++) {
    int64_t seen = 0;
    while (!atomic_load_explicit(&j->finished[t], memory_order_acquire)) {
      int64_t began = atomic_load_explicit(&j->started_ns[t], memory_order_relaxed), now = now_ns();
      if (began == 0) began = seen ? seen : (seen = now); /* taken, not begun: count from now */
      if (began > 0 && now - began < overdue) {
        __builtin_ia32_pause();
        continue;
      }
      unsigned char no = 0;
      if (atomic_compare_exchange_strong_explicit(&j->committed[t], &no, 1, memory_order_acq_rel,
                                                  memory_order_relaxed)) {
        int64_t m0, m1, n0, n1;
        panel_bounds(j, t, &m0, &m1, &n0, &n1);
        int st = panel_into(j, t, C + m0 * ldc + n0, ldc, beta);
        if (st) failed = st;
        atomic_store_explicit(&j->finished[t], 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&pd_g_gemm_backups, 1, memory_order_relaxed);
        break;
      }
      /* the helper is committing it: a copy, moments away */
      while (!atomic_load_explicit(&j->finished[t], memory_order_acquire)) __builtin_ia32_pause();
    }
  }
  omp_set_num_threads(nt);
  for (int i = 0; i < helpers; i++) {
    job *mine = j;
    if (atomic_compare_exchange_strong(&g_slot[i], &mine, NULL)) job_drop(j); /* never taken */
  }
  job_drop(j);
  return failed;
}
