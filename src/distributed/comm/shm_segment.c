/* Shared segments of the shm backend: the group segment and the zero-copy
 * allocations. Group rank 0 creates each segment under a name unique to the
 * job; the others map it; once every rank has mapped it the name is
 * unlinked, so the memory lives exactly as long as the processes using it.
 * Should a rank die before that, fleetrun removes the job's names; for
 * ranks started without fleetrun, every segment starts with its creator's
 * pid, and the next group created on the host removes the segments whose
 * creator is gone. */
#define _GNU_SOURCE
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "shm_internal.h"

#define PAGE 4096u

static size_t round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void nap(void) {
  struct timespec ts = {0, 200 * 1000};
  nanosleep(&ts, NULL);
}

static size_t env_size(const char *name, size_t dflt, size_t lo, size_t hi) {
  const char *v = getenv(name);
  if (!v || !*v) return dflt;
  long long x = atoll(v);
  if (x < (long long)lo) return lo;
  if ((size_t)x > hi) return hi;
  return (size_t)x;
}

/* The inode number of this process's pid namespace; 0 when unknown. */
static uint64_t pid_namespace(void) {
  char link[64];
  ssize_t n = readlink("/proc/self/ns/pid", link, sizeof link - 1);
  if (n <= 0) return 0;
  link[n] = 0;
  const char *lb = strchr(link, '[');
  return lb ? strtoull(lb + 1, NULL, 10) : 0;
}

int shm_remove_stale_segments(void) {
  uint64_t ns = pid_namespace();
  if (!ns) return 0; /* another namespace's pids cannot be judged */
  DIR *d = opendir("/dev/shm");
  if (!d) return 0;
  int removed = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    if (strncmp(e->d_name, "paddlec-", 8) != 0) continue;
    char name[300];
    snprintf(name, sizeof name, "/%s", e->d_name);
    int fd = shm_open(name, O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0) continue;
    shm_stamp st;
    int stale = pread(fd, &st, sizeof st, 0) == (ssize_t)sizeof st && st.magic == SHM_STAMP_MAGIC &&
                st.pid_ns == ns && st.creator_pid > 0 && st.creator_pid != getpid() &&
                kill((pid_t)st.creator_pid, 0) != 0 && errno == ESRCH;
    close(fd);
    if (stale && shm_unlink(name) == 0) removed++;
  }
  closedir(d);
  return removed;
}

/* Creates (creator) or opens and maps a segment of `bytes`; waits for the
 * creator's ready flag at *ready_at (an atomic_int inside the mapping). */
static void *map_segment(const char *name, size_t bytes, int creator, double timeout_s, const char *what) {
  int fd = -1;
  double deadline = now_s() + timeout_s;
  if (creator) {
    fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0) {
      pd_set_error(PD_ERR_IO, "shm %s: cannot create the shared segment /dev/shm%s: %s", what, name,
                   strerror(errno));
      return NULL;
    }
    if (ftruncate(fd, (off_t)bytes) < 0) {
      int e = errno;
      close(fd);
      shm_unlink(name);
      pd_set_error(PD_ERR_MEMORY, "shm %s: cannot size the shared segment /dev/shm%s to %zu bytes: %s", what,
                   name, bytes, strerror(e));
      return NULL;
    }
  } else {
    for (;;) {
      fd = shm_open(name, O_RDWR | O_CLOEXEC, 0600);
      if (fd >= 0) {
        struct stat st;
        if (fstat(fd, &st) == 0 && (size_t)st.st_size == bytes) break;
        close(fd);
        fd = -1;
      }
      if (now_s() > deadline) {
        pd_set_error(
            PD_ERR_COMM,
            "shm %s: the shared segment /dev/shm%s did not appear within %.0f s (is group rank 0 alive and "
            "in the same call?)",
            what, name, timeout_s);
        return NULL;
      }
      nap();
    }
  }
  void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  close(fd);
  if (p == MAP_FAILED) {
    if (creator) shm_unlink(name);
    pd_set_error(PD_ERR_MEMORY, "shm %s: cannot map %zu bytes of /dev/shm%s: %s", what, bytes, name,
                 strerror(errno));
    return NULL;
  }
  if (creator) {
    shm_stamp *st = p;
    st->creator_pid = getpid();
    st->pid_ns = pid_namespace();
    __atomic_store_n(&st->magic, SHM_STAMP_MAGIC, __ATOMIC_RELEASE);
  }
  return p;
}

/* Creator side: wait until every rank has mapped, then drop the name. */
static pd_status wait_attached(atomic_int *attached, int n, const char *name, double timeout_s,
                               const char *what) {
  double deadline = now_s() + timeout_s;
  while (atomic_load(attached) < n) {
    if (now_s() > deadline) {
      int got = atomic_load(attached);
      shm_unlink(name);
      return pd_set_error(PD_ERR_COMM, "shm %s: only %d of %d ranks mapped /dev/shm%s within %.0f s", what,
                          got, n, name, timeout_s);
    }
    nap();
  }
  shm_unlink(name);
  return PD_OK;
}

static int pidfd_open_compat(int pid) {
#ifdef SYS_pidfd_open
  return (int)syscall(SYS_pidfd_open, pid, 0);
#else
  (void)pid;
  return -1;
#endif
}

pd_status shm_map_group(shm_comm *s, const pd_comm_init *init) {
  int n = init->nranks;
  s->chunk_bytes = round_up(env_size("PADDLEC_SHM_CHUNK", 256 * 1024, 4096, 64u << 20), PAGE);
  size_t ring_bytes =
      round_up(env_size("PADDLEC_SHM_RING", (4u << 20) / (size_t)n, 64 * 1024, 4u << 20), PAGE);
  s->ring_stride = round_up(sizeof(shm_ring) + ring_bytes, PAGE);
  size_t hdr = round_up(sizeof(shm_header), PAGE);
  size_t ctl = round_up((size_t)n * sizeof(shm_ctl), PAGE);
  size_t rings = (size_t)n * (size_t)n * s->ring_stride;
  size_t stage = (size_t)n * 2 * s->chunk_bytes;
  s->map_bytes = hdr + ctl + rings + stage;
  snprintf(s->name, sizeof s->name, "/paddlec-%s-g%d", init->job_key, init->group_id);
  int creator = init->rank == 0;
  if (creator) shm_remove_stale_segments(); /* left by ranks killed while starting */
  unsigned char *base = map_segment(s->name, s->map_bytes, creator, init->timeout_s, "group setup");
  if (!base) return pd_last_status();
  s->hdr = (shm_header *)base;
  s->ctl = (shm_ctl *)(base + hdr);
  s->rings = base + hdr + ctl;
  s->stage = base + hdr + ctl + rings;
  if (creator) {
    s->hdr->magic = SHM_MAGIC;
    s->hdr->nranks = n;
    s->hdr->total_bytes = s->map_bytes;
    s->hdr->chunk_bytes = s->chunk_bytes;
    s->hdr->ring_bytes = ring_bytes;
    atomic_store(&s->hdr->abort_rank, -1);
    atomic_store(&s->hdr->ready, 1);
  } else {
    double deadline = now_s() + init->timeout_s;
    while (!atomic_load(&s->hdr->ready)) {
      if (now_s() > deadline) {
        munmap(base, s->map_bytes);
        s->hdr = NULL;
        return pd_set_error(PD_ERR_COMM, "shm group setup: /dev/shm%s never became ready", s->name);
      }
      nap();
    }
    if (s->hdr->magic != SHM_MAGIC || s->hdr->nranks != n || s->hdr->chunk_bytes != s->chunk_bytes) {
      munmap(base, s->map_bytes);
      s->hdr = NULL;
      return pd_set_error(
          PD_ERR_COMM,
          "shm group setup: /dev/shm%s was made for %d ranks with %llu-byte chunks, this rank "
          "expects %d and %zu (PADDLEC_SHM_CHUNK must be equal on every rank)",
          s->name, s->hdr->nranks, (unsigned long long)s->hdr->chunk_bytes, n, s->chunk_bytes);
    }
  }
  s->ctl[init->rank].pid = (int32_t)getpid();
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  s->oversubscribed = cpus > 0 && n > cpus;
  atomic_fetch_add(&s->hdr->attached, 1);
  s->pids = calloc((size_t)n, sizeof *s->pids);
  s->pidfds = malloc((size_t)n * sizeof *s->pidfds);
  s->p2p_sent_seq = calloc((size_t)n, sizeof *s->p2p_sent_seq);
  s->p2p_recv_seq = calloc((size_t)n, sizeof *s->p2p_recv_seq);
  if (!s->pids || !s->pidfds || !s->p2p_sent_seq || !s->p2p_recv_seq)
    return pd_set_error(PD_ERR_MEMORY, "shm group setup: out of memory");
  for (int i = 0; i < n; i++) {
    s->pids[i] = init->world_pids ? init->world_pids[init->global_ranks[i]] : 0;
    s->pidfds[i] = i != init->rank && s->pids[i] > 0 ? pidfd_open_compat(s->pids[i]) : -1;
  }
  if (creator) return wait_attached(&s->hdr->attached, n, s->name, init->timeout_s, "group setup");
  return PD_OK;
}

void shm_unmap_group(shm_comm *s) {
  for (int i = 0; i < s->nallocs; i++)
    if (s->allocs[i].base) munmap(s->allocs[i].base - PAGE, s->allocs[i].map_bytes);
  if (s->pidfds)
    for (int i = 0; i < s->base.nranks; i++)
      if (s->pidfds[i] >= 0) close(s->pidfds[i]);
  free(s->pidfds);
  free(s->pids);
  free(s->p2p_sent_seq);
  free(s->p2p_recv_seq);
  if (s->hdr) munmap(s->hdr, s->map_bytes);
  s->hdr = NULL;
}

/* ---- zero-copy allocations ---- */
typedef struct alloc_head {
  shm_stamp stamp;
  atomic_int ready, attached;
} alloc_head;

void *shm_alloc_shared(pd_comm *c, size_t nbytes) {
  shm_comm *s = (shm_comm *)c;
  if (pd_comm_check_broken(c, "alloc_shared") < 0) return NULL;
  int k = 0;
  while (k < s->nallocs && s->allocs[k].base) k++; /* reuse a freed slot */
  if (k >= SHM_MAX_ALLOCS) {
    pd_set_error(PD_ERR_MEMORY, "shm alloc_shared: group %d already holds %d shared allocations (the limit)",
                 c->group_id, SHM_MAX_ALLOCS);
    return NULL;
  }
  uint64_t id = s->alloc_seq++;
  char name[200];
  snprintf(name, sizeof name, "%s-a%llu", s->name, (unsigned long long)id);
  size_t block = round_up(nbytes ? nbytes : 1, PAGE);
  size_t bytes = PAGE + (size_t)c->nranks * block;
  int creator = c->rank == 0;
  unsigned char *base = map_segment(name, bytes, creator, c->timeout_s, "alloc_shared");
  if (!base) {
    pd_comm_break(c);
    return NULL;
  }
  alloc_head *h = (alloc_head *)base;
  if (creator) atomic_store(&h->ready, 1);
  double deadline = now_s() + c->timeout_s;
  while (!atomic_load(&h->ready)) {
    if (now_s() > deadline) {
      munmap(base, bytes);
      pd_set_error(PD_ERR_COMM, "shm alloc_shared: /dev/shm%s never became ready within %.0f s", name,
                   c->timeout_s);
      pd_comm_break(c);
      return NULL;
    }
    nap();
  }
  atomic_fetch_add(&h->attached, 1);
  if (creator && wait_attached(&h->attached, c->nranks, name, c->timeout_s, "alloc_shared") < 0) {
    munmap(base, bytes);
    pd_comm_break(c);
    return NULL;
  }
  s->allocs[k] = (shm_alloc){base + PAGE, block, bytes, id};
  if (k == s->nallocs) s->nallocs++;
  unsigned char *mine = base + PAGE + (size_t)c->rank * block;
  memset(mine, 0, block);
  return mine;
}

void shm_free_shared(pd_comm *c, void *ptr) {
  shm_comm *s = (shm_comm *)c;
  for (int i = 0; i < s->nallocs; i++) {
    shm_alloc *a = &s->allocs[i];
    if (a->base && (unsigned char *)ptr == a->base + (size_t)c->rank * a->block_bytes) {
      munmap(a->base - PAGE, a->map_bytes);
      a->base = NULL;
      return;
    }
  }
}

int shm_find_alloc(shm_comm *s, const void *p, size_t n, uint64_t *off) {
  const unsigned char *q = p;
  for (int i = 0; i < s->nallocs; i++) {
    shm_alloc *a = &s->allocs[i];
    if (!a->base) continue;
    const unsigned char *mine = a->base + (size_t)s->base.rank * a->block_bytes;
    if (q >= mine && q + n <= mine + a->block_bytes) {
      *off = (uint64_t)(q - mine);
      return i;
    }
  }
  return -1;
}
