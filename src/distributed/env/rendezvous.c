#define _GNU_SOURCE
#include "rendezvous.h"

#include "../comm/backend.h"
#include "launch_env.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define PD_RDV_MAGIC 0x70646376u /* "pdcv" */

/* The master's first bytes on every connection it accepts. */
typedef struct rdv_banner {
  uint32_t magic;
  uint32_t role; /* PD_RDV_MASTER */
} rdv_banner;
#define PD_RDV_MASTER 0x6d617374u /* "mast" */

typedef struct rdv_hello {
  uint32_t magic;
  int32_t rank, world;
  pd_rank_record rec;
} rdv_hello;

typedef struct rdv_reply {
  uint32_t magic;
  int32_t status; /* 0 ok, else an error whose text follows */
  char text[512];
  char job_key[96];
} rdv_reply;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

void pd_rank_record_self(pd_rank_record *r, int rank) {
  memset(r, 0, sizeof *r);
  r->rank = rank;
  r->pid = (int32_t)getpid();
  char host[64] = "", ns[40] = "", boot[40] = "";
  gethostname(host, sizeof host - 1);
  ssize_t n = readlink("/proc/self/ns/net", ns, sizeof ns - 1);
  if (n > 0) ns[n] = 0;
  FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
  if (f) {
    if (!fgets(boot, sizeof boot, f)) boot[0] = 0;
    fclose(f);
    boot[strcspn(boot, "\n")] = 0;
  }
  snprintf(r->host, sizeof r->host, "%s|%s|%s", host, ns, boot);
}

void pd_make_job_key(char *key, size_t cap) {
  const char *base = getenv("PADDLEC_JOB_KEY");
  uint64_t rnd = 0;
  if (getrandom(&rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
    rnd = (uint64_t)getpid() * 0x9E3779B97F4A7C15ull ^ (uint64_t)time(NULL);
  char clean[72]; /* with "-" and 16 hex digits it fits a 96-byte key */
  size_t k = 0;
  for (const char *p = base && *base ? base : "job"; *p && k < sizeof clean - 1; p++) {
    int keep = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
               *p == '.' || *p == '_' || *p == '-';
    clean[k++] = keep ? *p : '_';
  }
  clean[k] = 0;
  snprintf(key, cap, "%s-%016llx", clean, (unsigned long long)rnd);
}

static int split_host_port(const char *master, char *host, size_t cap, char *port, size_t pcap) {
  const char *colon = strrchr(master, ':');
  if (!colon || colon == master || !colon[1]) return -1;
  size_t hl = (size_t)(colon - master);
  if (hl >= cap) return -1;
  memcpy(host, master, hl);
  host[hl] = 0;
  snprintf(port, pcap, "%s", colon + 1);
  return 0;
}

/* Reads or writes exactly n bytes before the deadline. */
static int io_all(int fd, void *buf, size_t n, int writing, double deadline) {
  char *p = buf;
  while (n) {
    struct pollfd pfd = {fd, writing ? POLLOUT : POLLIN, 0};
    double left = deadline - now_s();
    if (left <= 0) return -ETIMEDOUT;
    int pr = poll(&pfd, 1, (int)(left * 1000) + 1);
    if (pr < 0 && errno == EINTR) continue;
    if (pr <= 0) continue;
    ssize_t k = writing ? send(fd, p, n, MSG_NOSIGNAL) : recv(fd, p, n, 0);
    if (k < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (k <= 0) return k == 0 ? -ECONNRESET : -errno;
    p += k;
    n -= (size_t)k;
  }
  return 0;
}

/* The ranks of [1, world) that have no connection yet: "rank 2", "ranks 1, 3". */
static void missing_ranks(const int *fds, int world, char *buf, size_t cap) {
  size_t n = 0;
  int k = 0;
  buf[0] = 0;
  for (int i = 1; i < world && n < cap; i++)
    if (fds[i] < 0) k++;
  n = (size_t)snprintf(buf, cap, "%s", k > 1 ? "ranks " : "rank ");
  for (int i = 1, j = 0; i < world && n < cap; i++)
    if (fds[i] < 0) n += (size_t)snprintf(buf + n, cap - n, "%s%d", j++ ? ", " : "", i);
}

static pd_status serve(const char *master, const char *var, const char *port, int world, double timeout_s,
                       double warn_s, double deadline, const pd_rank_record *mine, pd_rank_record *all,
                       char *job_key) {
  struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE},
                  *ai = NULL;
  if (getaddrinfo(NULL, port, &hints, &ai) != 0 || !ai)
    return pd_set_error(PD_ERR_INVALID, "init_parallel_env: bad master port in '%s'", master);
  int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  int rc = ls < 0 ? -1 : bind(ls, ai->ai_addr, ai->ai_addrlen);
  freeaddrinfo(ai);
  if (rc < 0 || listen(ls, 256) < 0) {
    int e = errno;
    if (ls >= 0) close(ls);
    return pd_set_error(PD_ERR_IO,
                        "init_parallel_env: rank 0 cannot listen on the master endpoint %s (%s): %s", master,
                        var, strerror(e));
  }
  int *fds = malloc((size_t)world * sizeof *fds);
  if (!fds) {
    close(ls);
    return pd_set_error(PD_ERR_MEMORY, "init_parallel_env: out of memory");
  }
  for (int i = 0; i < world; i++) fds[i] = -1;
  all[0] = *mine;
  pd_make_job_key(job_key, 96);
  rdv_reply reply = {.magic = PD_RDV_MAGIC};
  int joined = 1;
  double start = now_s(), next_warn = start + warn_s;
  while (joined < world && !reply.status) {
    struct pollfd pfd = {ls, POLLIN, 0};
    double now = now_s(), left = deadline - now;
    if (now >= next_warn && left > 0) {
      next_warn += warn_s;
      char what[300], who[256];
      snprintf(what, sizeof what, "init_parallel_env at the master %s (%s)", master, var);
      missing_ranks(fds, world, who, sizeof who);
      strncat(who, " to join", sizeof who - strlen(who) - 1);
      pd_comm_warn_waiting(0, what, who, now - start, timeout_s);
    }
    if (next_warn - now < left) left = next_warn - now;
    if (left <= 0) {
      char missing[256];
      missing_ranks(fds, world, missing, sizeof missing);
      reply.status = 1;
      snprintf(reply.text, sizeof reply.text,
               "init_parallel_env: timed out after %.0f s waiting at the master %s for %s to join (%d of %d "
               "joined)",
               timeout_s, master, missing, joined, world);
      break;
    }
    if (poll(&pfd, 1, (int)(left * 1000) + 1) <= 0) continue;
    int fd = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0) continue;
    /* at once, so a rank can tell this master from another program on
     * the port; a hello that does not follow soon is a stranger's */
    rdv_banner b = {PD_RDV_MAGIC, PD_RDV_MASTER};
    double soon = now_s() + PD_RDV_BANNER_S / 2;
    rdv_hello h;
    if (io_all(fd, &b, sizeof b, 1, soon) < 0 ||
        io_all(fd, &h, sizeof h, 0, soon < deadline ? soon : deadline) < 0 || h.magic != PD_RDV_MAGIC) {
      close(fd); /* a stranger on the port: ignore it */
      continue;
    }
    if (h.world != world || h.rank <= 0 || h.rank >= world || fds[h.rank] >= 0) {
      reply.status = 1;
      snprintf(reply.text, sizeof reply.text,
               h.world != world ? "init_parallel_env: rank %d says the world size is %d but rank 0 says %d"
               : h.rank <= 0 || h.rank >= world
                   ? "init_parallel_env: a process joined as rank %d of world %d (rank 0: %d)"
                   : "init_parallel_env: two processes joined as rank %d (world %d, %d)",
               h.rank, h.world, world);
      close(fd);
      break;
    }
    fds[h.rank] = fd;
    all[h.rank] = h.rec;
    joined++;
  }
  close(ls);
  snprintf(reply.job_key, sizeof reply.job_key, "%s", job_key);
  pd_status st = PD_OK;
  for (int i = 1; i < world; i++) {
    if (fds[i] < 0) continue;
    if (io_all(fds[i], &reply, sizeof reply, 1, deadline + 5) == 0 && !reply.status)
      io_all(fds[i], all, (size_t)world * sizeof *all, 1, deadline + 5);
    close(fds[i]);
  }
  free(fds);
  if (reply.status) st = pd_set_error(PD_ERR_COMM, "%s", reply.text);
  return st;
}

/* A joining rank's warning while it waits for the master. */
static void join_warn(const char *master, const char *var, int rank, const char *for_what, double waited,
                      double timeout_s) {
  char what[300];
  snprintf(what, sizeof what, "init_parallel_env at the master %s (%s)", master, var);
  pd_comm_warn_waiting(rank, what, for_what, waited, timeout_s);
}

static pd_status join(const char *master, const char *var, const char *host, const char *port, int rank,
                      int world, double timeout_s, double warn_s, double deadline, const pd_rank_record *mine,
                      pd_rank_record *all, char *job_key) {
  double start = now_s(), next_warn = start + warn_s;
  struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *ai = NULL;
  int gai = getaddrinfo(host, port, &hints, &ai);
  if (gai != 0 || !ai)
    return pd_set_error(PD_ERR_INVALID, "init_parallel_env: cannot resolve the master %s (%s): %s", master,
                        var, gai_strerror(gai));
  int fd = -1, last_err = 0;
  for (double now; (now = now_s()) < deadline;) {
    if (now >= next_warn) {
      next_warn += warn_s;
      join_warn(master, var, rank, "rank 0 to listen there", now - start, timeout_s);
    }
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) break;
    last_err = errno;
    if (fd >= 0) close(fd);
    fd = -1;
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  freeaddrinfo(ai);
  if (fd < 0)
    return pd_set_error(PD_ERR_COMM,
                        "init_parallel_env: rank %d cannot reach the master %s (%s) within %.0f s (%s)", rank,
                        master, var, timeout_s, last_err ? strerror(last_err) : "timeout");
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  /* the master speaks first: silence or other bytes mean another program
   * holds the port (rank 0 then failed to listen on it) */
  rdv_banner b = {0, 0};
  double soon = now_s() + PD_RDV_BANNER_S;
  int rc = io_all(fd, &b, sizeof b, 0, soon < deadline + 10 ? soon : deadline + 10);
  if (rc == 0 && (b.magic != PD_RDV_MAGIC || b.role != PD_RDV_MASTER)) {
    close(fd);
    return pd_set_error(PD_ERR_COMM,
                        "init_parallel_env: rank %d: the master endpoint %s (%s) is held by another program: "
                        "it answered with bytes that are not a paddle.c rendezvous",
                        rank, master, var);
  }
  if (rc == -ETIMEDOUT) {
    close(fd);
    return pd_set_error(
        PD_ERR_COMM,
        "init_parallel_env: rank %d: the master endpoint %s (%s) accepted the connection but did "
        "not answer as a paddle.c rendezvous within %g s: is another program listening on that "
        "port?",
        rank, master, var, PD_RDV_BANNER_S);
  }
  rdv_hello h = {.magic = PD_RDV_MAGIC, .rank = rank, .world = world, .rec = *mine};
  rdv_reply reply;
  if (rc == 0) rc = io_all(fd, &h, sizeof h, 1, deadline);
  /* rank 0 answers once everyone has joined, or when its own wait ends */
  /* the reply comes when every rank has joined: warn meanwhile */
  while (rc == 0) {
    double now = now_s(), until = next_warn < deadline + 10 ? next_warn : deadline + 10;
    struct pollfd pfd = {fd, POLLIN, 0};
    int pr = poll(&pfd, 1, until > now ? (int)((until - now) * 1000) + 1 : 0);
    if (pr > 0 || now_s() >= deadline + 10) break;
    if (pr < 0 && errno != EINTR) break;
    if (now_s() >= next_warn) {
      next_warn += warn_s;
      join_warn(master, var, rank, "rank 0 to report that every rank joined (it names the missing ones)",
                now_s() - start, timeout_s);
    }
  }
  if (rc == 0) rc = io_all(fd, &reply, sizeof reply, 0, deadline + 10);
  if (rc == 0 && reply.magic == PD_RDV_MAGIC && !reply.status)
    rc = io_all(fd, all, (size_t)world * sizeof *all, 0, deadline + 10);
  close(fd);
  if (rc < 0)
    return pd_set_error(PD_ERR_COMM,
                        "init_parallel_env: rank %d lost the master %s (%s) during the rendezvous (%s)", rank,
                        master, var, strerror(-rc));
  reply.text[sizeof reply.text - 1] = 0;
  if (reply.magic != PD_RDV_MAGIC || reply.status)
    return pd_set_error(PD_ERR_COMM, "%s",
                        reply.magic == PD_RDV_MAGIC ? reply.text : "init_parallel_env: bad reply");
  reply.job_key[sizeof reply.job_key - 1] = 0;
  snprintf(job_key, 96, "%s", reply.job_key);
  return PD_OK;
}

pd_status pd_rendezvous_tcp(const char *master, const char *master_var, int rank, int world, double timeout_s,
                            double warn_s, const pd_rank_record *mine, pd_rank_record *all, char *job_key) {
  char host[256], port[32];
  const char *var = master_var && *master_var ? master_var : "master";
  if (!master || split_host_port(master, host, sizeof host, port, sizeof port) < 0)
    return pd_set_error(PD_ERR_INVALID, "init_parallel_env: the master endpoint %s='%s' is not host:port",
                        var, master ? master : "(null)");
  const char *why = pd_launch_port_problem(port);
  if (why)
    return pd_set_error(PD_ERR_INVALID, "init_parallel_env: the master endpoint %s='%s': %s", var, master,
                        why);
  double deadline = now_s() + timeout_s;
  if (!(warn_s > 0)) warn_s = PD_COMM_WARN_DEFAULT_S;
  if (rank == 0) return serve(master, var, port, world, timeout_s, warn_s, deadline, mine, all, job_key);
  return join(master, var, host, port, rank, world, timeout_s, warn_s, deadline, mine, all, job_key);
}
