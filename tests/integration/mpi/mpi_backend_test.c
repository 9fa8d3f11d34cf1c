/* Drives the mpi backend (src/distributed/comm/backend.h) under mpirun: every op x
 * every dtype x sizes 0, 1, 7, 1000, a 64 MB float32 all_reduce, a subgroup,
 * concurrent send/recv, and the failures: mismatched collectives, counts,
 * split sizes and point-to-point calls, and a rank that never arrives. Every
 * result is compared element by element with a serial computation of what
 * every rank contributed (the data is a deterministic function of the rank).
 *
 *   mpirun -np N mpi_backend_test [--reverse] [--chunk-bytes B] [--no-failures]
 *
 * --reverse gives the job's ranks in the reverse of MPI's order (as
 * PADDLE_TRAINER_ID may), --chunk-bytes lowers the largest single transfer so
 * the chunked paths run on small buffers. Exits 0 when every check passed. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "distributed/comm/backend.h"

static int g_rank, g_size, g_fail, g_checks;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#define CHECK(cond, ...)                                                      \
  do {                                                                        \
    g_checks++;                                                               \
    if (!(cond)) {                                                            \
      if (g_fail++ < 20) {                                                    \
        fprintf(stderr, "rank %d: FAIL %s:%d: ", g_rank, __FILE__, __LINE__); \
        fprintf(stderr, __VA_ARGS__);                                         \
        fprintf(stderr, "\n");                                                \
      }                                                                       \
    }                                                                         \
  } while (0)

#define CHECK_OK(st, what) CHECK((st) == PD_OK, "%s: status %d: %s", what, (int)(st), pd_last_error())

/* ---- element access in every dtype ------------------------------------ */
static void set_elem(void *buf, pd_dtype dt, size_t i, double v) {
  switch (dt) {
    case PD_BOOL:
      ((uint8_t *)buf)[i] = v != 0;
      break;
    case PD_UINT8:
      ((uint8_t *)buf)[i] = (uint8_t)v;
      break;
    case PD_INT8:
      ((int8_t *)buf)[i] = (int8_t)v;
      break;
    case PD_INT16:
      ((int16_t *)buf)[i] = (int16_t)v;
      break;
    case PD_INT32:
      ((int32_t *)buf)[i] = (int32_t)v;
      break;
    case PD_INT64:
      ((int64_t *)buf)[i] = (int64_t)v;
      break;
    case PD_FLOAT16:
      ((uint16_t *)buf)[i] = pd_f32_to_f16((float)v);
      break;
    case PD_BFLOAT16:
      ((uint16_t *)buf)[i] = pd_f32_to_bf16((float)v);
      break;
    case PD_FLOAT32:
      ((float *)buf)[i] = (float)v;
      break;
    default:
      ((double *)buf)[i] = v;
      break;
  }
}

static double get_elem(const void *buf, pd_dtype dt, size_t i) {
  switch (dt) {
    case PD_BOOL:
    case PD_UINT8:
      return ((const uint8_t *)buf)[i];
    case PD_INT8:
      return ((const int8_t *)buf)[i];
    case PD_INT16:
      return ((const int16_t *)buf)[i];
    case PD_INT32:
      return ((const int32_t *)buf)[i];
    case PD_INT64:
      return (double)((const int64_t *)buf)[i];
    case PD_FLOAT16:
      return pd_f16_to_f32(((const uint16_t *)buf)[i]);
    case PD_BFLOAT16:
      return pd_bf16_to_f32(((const uint16_t *)buf)[i]);
    case PD_FLOAT32:
      return ((const float *)buf)[i];
    default:
      return ((const double *)buf)[i];
  }
}

/* What `src` (a rank, or any seed) contributes at element i: small integers,
 * so sums and products of 3 ranks are exact in every dtype (int8 included). */
static double value(int src, size_t i, pd_dtype dt) {
  if (dt == PD_BOOL) return (double)((i + (size_t)src) % 3 != 0);
  if (dt == PD_UINT8) return (double)(((size_t)src * 7 + i * 3) % 4);
  return (double)(((size_t)src * 7 + i * 3 + 1) % 7) - 3.0;
}

static double combine(double a, double b, pd_dtype dt, pd_reduce_op op) {
  if (dt == PD_BOOL) op = (op == PD_REDUCE_SUM || op == PD_REDUCE_MAX) ? PD_REDUCE_MAX : PD_REDUCE_MIN;
  switch (op) {
    case PD_REDUCE_MAX:
      return a > b ? a : b;
    case PD_REDUCE_MIN:
      return a < b ? a : b;
    case PD_REDUCE_PROD:
      return a * b;
    default:
      return a + b;
  }
}

/* the reduction over `ranks` (world ranks; NULL: 0..n-1) of value(r, i) */
static double expected_reduce(const int *ranks, int n, size_t i, pd_dtype dt, pd_reduce_op op, int seed_mul) {
  double acc = value((ranks ? ranks[0] : 0) * seed_mul, i, dt);
  for (int k = 1; k < n; k++) acc = combine(acc, value((ranks ? ranks[k] : k) * seed_mul, i, dt), dt, op);
  return acc;
}

static void *alloc_elems(size_t n, pd_dtype dt) { return calloc(n ? n : 1, pd_dtype_size(dt)); }

static pd_comm *make_comm(int group_id, const int *ranks, int n, int my_group_rank, double timeout) {
  pd_comm_init init = {.group_id = group_id,
                       .rank = my_group_rank,
                       .nranks = n,
                       .global_ranks = ranks,
                       .world_rank = g_rank,
                       .world_size = g_size,
                       .world_pids = NULL,
                       .job_key = "mpi-test",
                       .timeout_s = timeout};
  pd_comm *c = pd_comm_mpi_create(&init);
  CHECK(c != NULL, "create group %d: %s", group_id, pd_last_error());
  return c;
}

/* ---- every op x dtype x size on comm c whose members are world ranks
 * `ranks` (group rank k = ranks[k]) ------------------------------------ */
static void test_ops(pd_comm *c, const int *ranks, size_t count, pd_dtype dt) {
  int n = c->nranks, me = c->rank, wr = ranks[me];
  const char *dn = pd_dtype_name(dt);
  size_t esz = pd_dtype_size(dt);
  void *in = alloc_elems(count * (size_t)n, dt), *out = alloc_elems(count * (size_t)n, dt);
  for (size_t i = 0; i < count; i++) set_elem(in, dt, i, value(wr, i, dt));

  for (int op = 0; op < 4; op++) {
    memset(out, 0, count * esz);
    CHECK_OK(c->ops->all_reduce(c, in, out, count, dt, (pd_reduce_op)op), "all_reduce");
    for (size_t i = 0; i < count; i++) {
      double want = expected_reduce(ranks, n, i, dt, (pd_reduce_op)op, 1), got = get_elem(out, dt, i);
      CHECK(got == want, "all_reduce %s op %d count %zu [%zu]: %g != %g", dn, op, count, i, got, want);
      if (got != want) break;
    }
    /* reduce to a rank that varies with the op; AVG arrives as SUM */
    int root = (op + 1) % n;
    for (size_t i = 0; i < count; i++) set_elem(out, dt, i, 99);
    CHECK_OK(c->ops->reduce(c, in, out, count, dt, op == 0 ? PD_REDUCE_AVG : (pd_reduce_op)op, root),
             "reduce");
    double untouched = count ? get_elem(out, dt, 0) : 0; /* 99 in dt: the others' out must keep it */
    for (size_t i = 0; i < count; i++) {
      double want = me == root ? expected_reduce(ranks, n, i, dt, (pd_reduce_op)op, 1) : untouched;
      double got = get_elem(out, dt, i);
      CHECK(got == want, "reduce %s op %d root %d count %zu [%zu]: %g != %g", dn, op, root, count, i, got,
            want);
      if (got != want) break;
    }
    /* reduce_scatter: block k of rank r holds value(r * 10 + k, i) */
    void *rs_in = alloc_elems(count * (size_t)n, dt);
    for (int k = 0; k < n; k++)
      for (size_t i = 0; i < count; i++)
        set_elem(rs_in, dt, (size_t)k * count + i, value(wr * 10 + k, i, dt));
    memset(out, 0, count * esz);
    CHECK_OK(c->ops->reduce_scatter(c, rs_in, out, count, dt, (pd_reduce_op)op), "reduce_scatter");
    for (size_t i = 0; i < count; i++) {
      double want = value(ranks[0] * 10 + me, i, dt);
      for (int k = 1; k < n; k++)
        want = combine(want, value(ranks[k] * 10 + me, i, dt), dt, (pd_reduce_op)op);
      double got = get_elem(out, dt, i);
      CHECK(got == want, "reduce_scatter %s op %d count %zu [%zu]: %g != %g", dn, op, count, i, got, want);
      if (got != want) break;
    }
    free(rs_in);
  }

  /* in-place all_reduce */
  void *buf = alloc_elems(count, dt);
  memcpy(buf, in, count * esz);
  CHECK_OK(c->ops->all_reduce(c, buf, buf, count, dt, PD_REDUCE_SUM), "all_reduce in place");
  for (size_t i = 0; i < count; i++) {
    double want = expected_reduce(ranks, n, i, dt, PD_REDUCE_SUM, 1);
    CHECK(get_elem(buf, dt, i) == want, "all_reduce in place %s [%zu]", dn, i);
    if (get_elem(buf, dt, i) != want) break;
  }

  /* broadcast from the last rank */
  int root = n - 1;
  for (size_t i = 0; i < count; i++) set_elem(buf, dt, i, value(wr + 5, i, dt));
  CHECK_OK(c->ops->broadcast(c, buf, count, dt, root), "broadcast");
  for (size_t i = 0; i < count; i++) {
    double want = value(ranks[root] + 5, i, dt);
    CHECK(get_elem(buf, dt, i) == want, "broadcast %s count %zu [%zu]", dn, count, i);
    if (get_elem(buf, dt, i) != want) break;
  }

  /* all_gather, out of place and in place */
  for (int inplace = 0; inplace < 2; inplace++) {
    memset(out, 0, count * (size_t)n * esz);
    const void *src = in;
    if (inplace) {
      memcpy((char *)out + (size_t)me * count * esz, in, count * esz);
      src = (char *)out + (size_t)me * count * esz;
    }
    CHECK_OK(c->ops->all_gather(c, src, out, count, dt), "all_gather");
    for (int k = 0; k < n; k++)
      for (size_t i = 0; i < count; i++) {
        double want = value(ranks[k], i, dt), got = get_elem(out, dt, (size_t)k * count + i);
        CHECK(got == want, "all_gather%s %s count %zu block %d [%zu]: %g != %g", inplace ? " in place" : "",
              dn, count, k, i, got, want);
        if (got != want) break;
      }
  }

  /* gather to rank 0 / scatter from rank n-1 */
  memset(out, 0, count * (size_t)n * esz);
  CHECK_OK(c->ops->gather(c, in, out, count, dt, 0), "gather");
  if (me == 0)
    for (int k = 0; k < n; k++)
      for (size_t i = 0; i < count; i++) {
        double want = value(ranks[k], i, dt), got = get_elem(out, dt, (size_t)k * count + i);
        CHECK(got == want, "gather %s count %zu block %d [%zu]: %g != %g", dn, count, k, i, got, want);
        if (got != want) break;
      }
  void *sc_in = alloc_elems(count * (size_t)n, dt);
  if (me == n - 1)
    for (int k = 0; k < n; k++)
      for (size_t i = 0; i < count; i++) set_elem(sc_in, dt, (size_t)k * count + i, value(k + 20, i, dt));
  memset(buf, 0, count * esz);
  CHECK_OK(c->ops->scatter(c, sc_in, buf, count, dt, n - 1), "scatter");
  for (size_t i = 0; i < count; i++) {
    double want = value(me + 20, i, dt), got = get_elem(buf, dt, i);
    CHECK(got == want, "scatter %s count %zu [%zu]: %g != %g", dn, count, i, got, want);
    if (got != want) break;
  }
  free(sc_in);

  /* alltoall with uneven splits: rank i sends cnt(i, j) elements to j */
#define CNT(i, j) (count == 0 ? 0 : count + (size_t)(((i) + 2 * (j)) % 3))
  size_t *sc = calloc((size_t)n, sizeof *sc), *rc = calloc((size_t)n, sizeof *rc), stot = 0, rtot = 0;
  for (int j = 0; j < n; j++) {
    sc[j] = CNT(me, j);
    rc[j] = CNT(j, me);
    stot += sc[j];
    rtot += rc[j];
  }
  void *a_in = alloc_elems(stot, dt), *a_out = alloc_elems(rtot, dt);
  size_t off = 0;
  for (int j = 0; j < n; j++)
    for (size_t i = 0; i < sc[j]; i++) set_elem(a_in, dt, off++, value(ranks[me] * 31 + ranks[j], i, dt));
  CHECK_OK(c->ops->alltoall(c, a_in, sc, a_out, rc, dt), "alltoall");
  off = 0;
  for (int j = 0; j < n; j++)
    for (size_t i = 0; i < rc[j]; i++) {
      double want = value(ranks[j] * 31 + ranks[me], i, dt), got = get_elem(a_out, dt, off++);
      CHECK(got == want, "alltoall %s count %zu from %d [%zu]: %g != %g", dn, count, j, i, got, want);
      if (got != want) break;
    }
  free(a_in);
  free(a_out);
  free(sc);
  free(rc);

  free(buf);
  free(in);
  free(out);
}

/* ---- send/recv around the ring, the send on its own thread ------------ */
typedef struct send_job {
  pd_comm *c;
  const void *buf;
  size_t count;
  pd_dtype dt;
  int peer;
  pd_status st;
} send_job;

static void *send_thread(void *arg) {
  send_job *j = arg;
  j->st = j->c->ops->send(j->c, j->buf, j->count, j->dt, j->peer);
  return NULL;
}

static void test_p2p(pd_comm *c, const int *ranks, size_t count, pd_dtype dt) {
  int n = c->nranks, me = c->rank;
  if (n < 2) return;
  int next = (me + 1) % n, prev = (me + n - 1) % n;
  void *sb = alloc_elems(count, dt), *rb = alloc_elems(count, dt);
  for (size_t i = 0; i < count; i++) set_elem(sb, dt, i, value(ranks[me] + 40, i, dt));
  send_job job = {c, sb, count, dt, next, PD_OK};
  pthread_t th;
  pthread_create(&th, NULL, send_thread, &job);
  pd_status st = c->ops->recv(c, rb, count, dt, prev);
  pthread_join(th, NULL);
  CHECK_OK(job.st, "send");
  CHECK_OK(st, "recv");
  for (size_t i = 0; i < count; i++) {
    double want = value(ranks[prev] + 40, i, dt), got = get_elem(rb, dt, i);
    CHECK(got == want, "recv %s count %zu [%zu]: %g != %g", pd_dtype_name(dt), count, i, got, want);
    if (got != want) break;
  }
  free(sb);
  free(rb);
}

static void test_big_all_reduce(pd_comm *c) {
  size_t count = (size_t)16 << 20; /* 64 MB of float32 */
  float *buf = malloc(count * sizeof *buf);
  for (size_t i = 0; i < count; i++) buf[i] = (float)value(g_rank, i, PD_FLOAT32);
  double t = now_s();
  CHECK_OK(c->ops->all_reduce(c, buf, buf, count, PD_FLOAT32, PD_REDUCE_SUM), "64 MB all_reduce");
  t = now_s() - t;
  if (g_rank == 0) printf("64 MB float32 all_reduce over %d ranks: %.1f ms\n", g_size, t * 1e3);
  size_t bad = 0;
  for (size_t i = 0; i < count; i++)
    if ((double)buf[i] != expected_reduce(NULL, g_size, i, PD_FLOAT32, PD_REDUCE_SUM, 1)) bad++;
  CHECK(bad == 0, "64 MB all_reduce: %zu wrong elements", bad);
  free(buf);
}

/* ---- failures ---------------------------------------------------------- */
static int contains(const char *s, const char *sub) { return strstr(s, sub) != NULL; }

static void test_failures(const int *world, double timeout) {
  char msg[4096], want[256];
  float x[8] = {0};
  int last = g_size - 1;

  /* rank 1 calls broadcast while the others call all_reduce */
  pd_comm *c = make_comm(10, world, g_size, g_rank, timeout);
  if (!c) return;
  pd_status st = g_rank == 1 ? c->ops->broadcast(c, x, 4, PD_FLOAT32, 0)
                             : c->ops->all_reduce(c, x, x, 4, PD_FLOAT32, PD_REDUCE_SUM);
  snprintf(msg, sizeof msg, "%s", pd_last_error());
  CHECK(st == PD_ERR_COMM, "mismatched kinds: status %d", (int)st);
  CHECK(contains(msg, "all_reduce(float32, 4 elements, SUM)") &&
            contains(msg, "broadcast(float32, 4 elements, root 0)"),
        "mismatch message does not name both calls: %s", msg);
  CHECK(contains(msg, g_size > 2 ? "ranks 0" : "rank 0") && contains(msg, "rank 1") &&
            contains(msg, "(this process)"),
        "mismatch message does not name the ranks: %s", msg);
  /* the group is broken now: later calls fail at once with the reason */
  st = c->ops->barrier(c);
  CHECK(st == PD_ERR_COMM && contains(pd_last_error(), "broken") && contains(pd_last_error(), "broadcast"),
        "a broken group must fail fast: %d %s", (int)st, pd_last_error());
  c->ops->destroy(c);

  /* rank 0 reduces 5 elements, the others 4 */
  c = make_comm(11, world, g_size, g_rank, timeout);
  if (!c) return;
  st = c->ops->all_reduce(c, x, x, g_rank == 0 ? 5 : 4, PD_FLOAT32, PD_REDUCE_MAX);
  snprintf(msg, sizeof msg, "%s", pd_last_error());
  CHECK(st == PD_ERR_COMM, "mismatched counts: status %d", (int)st);
  CHECK(contains(msg, "rank 0") && contains(msg, "all_reduce(float32, 5 elements, MAX)") &&
            contains(msg, "all_reduce(float32, 4 elements, MAX)"),
        "count mismatch message: %s", msg);
  c->ops->destroy(c);

  /* alltoall: rank 0 expects one element more from rank 1 than rank 1 sends */
  c = make_comm(12, world, g_size, g_rank, timeout);
  if (!c) return;
  size_t sc[8], rc[8];
  for (int j = 0; j < g_size; j++) sc[j] = rc[j] = 1;
  if (g_rank == 0) rc[1] = 2;
  float a_out[16];
  st = c->ops->alltoall(c, x, sc, a_out, rc, PD_FLOAT32);
  snprintf(msg, sizeof msg, "%s", pd_last_error());
  CHECK(st == PD_ERR_COMM, "mismatched splits: status %d", (int)st);
  CHECK(contains(msg, "split sizes") && contains(msg, "rank 1 sends 1 elements to rank 0, which expects 2"),
        "split mismatch message: %s", msg);
  c->ops->destroy(c);

  /* point to point: rank 0 sends float32, rank 1 expects int32 */
  c = make_comm(13, world, g_size, g_rank, timeout);
  if (!c) return;
  if (g_rank <= 1) {
    st = g_rank == 0 ? c->ops->send(c, x, 5, PD_FLOAT32, 1) : c->ops->recv(c, x, 5, PD_INT32, 0);
    snprintf(msg, sizeof msg, "%s", pd_last_error());
    CHECK(st == PD_ERR_COMM, "p2p mismatch: status %d", (int)st);
    CHECK(contains(msg, "send(float32, 5 elements)") && contains(msg, "recv(int32, 5 elements)"),
          "p2p mismatch message: %s", msg);
  }
  c->ops->destroy(c);

  /* the last rank never calls: the others name it after the timeout */
  c = make_comm(14, world, g_size, g_rank, timeout);
  if (!c) return;
  if (g_rank != last) {
    double t0 = now_s();
    st = c->ops->all_reduce(c, x, x, 4, PD_FLOAT32, PD_REDUCE_SUM);
    double waited = now_s() - t0;
    snprintf(msg, sizeof msg, "%s", pd_last_error());
    snprintf(want, sizeof want, "missing (never arrived): rank %d", last);
    CHECK(st == PD_ERR_COMM, "missing rank: status %d", (int)st);
    CHECK(contains(msg, want) && contains(msg, "timed out"), "missing rank message: %s", msg);
    CHECK(waited >= timeout * 0.9 && waited < timeout + 5, "missing rank: gave up after %.2f s, timeout %g",
          waited, timeout);
  }
  c->ops->destroy(c);
}

int main(int argc, char **argv) {
  int reverse = 0, failures = 1, big = 1;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--reverse"))
      reverse = 1;
    else if (!strcmp(argv[i], "--no-failures"))
      failures = 0;
    else if (!strcmp(argv[i], "--chunk-bytes") && i + 1 < argc) {
      setenv("PADDLEC_MPI_CHUNK_BYTES", argv[++i], 1);
      big = 0; /* 64 MB in tiny chunks would take minutes */
    }
  }
  int mpi_rank = 0;
  pd_status st = pd_comm_mpi_init_world(&mpi_rank, &g_size);
  if (st != PD_OK) {
    fprintf(stderr, "init_world: %s\n", pd_last_error());
    return 1;
  }
  CHECK(pd_comm_mpi_init_world(NULL, NULL) == PD_OK, "init_world is idempotent");
  /* the job's rank, as PADDLE_TRAINER_ID would give it */
  g_rank = reverse ? g_size - 1 - mpi_rank : mpi_rank;
  int *world = malloc((size_t)g_size * sizeof *world);
  for (int i = 0; i < g_size; i++) world[i] = i;
  double t0 = now_s();

  /* the bootstrap allgather is in MPI order */
  int *all = calloc((size_t)g_size, sizeof *all);
  CHECK_OK(pd_comm_mpi_world_allgather(&g_rank, all, sizeof g_rank), "world allgather");
  for (int i = 0; i < g_size; i++)
    CHECK(all[i] == (reverse ? g_size - 1 - i : i), "allgather[%d] = %d", i, all[i]);

  pd_comm *c = make_comm(0, world, g_size, g_rank, 30);
  if (!c) return 1;
  /* the world communicator is in the job's order */
  memset(all, 0, (size_t)g_size * sizeof *all);
  CHECK_OK(c->ops->all_gather(c, &g_rank, all, 1, PD_INT32), "all_gather of ranks");
  for (int i = 0; i < g_size; i++) CHECK(all[i] == i, "world rank order: slot %d holds rank %d", i, all[i]);
  free(all);

  static const size_t sizes[] = {0, 1, 7, 1000};
  for (int dt = 0; dt < PD_NUM_DTYPES; dt++)
    for (int s = 0; s < 4; s++) {
      test_ops(c, world, sizes[s], (pd_dtype)dt);
      test_p2p(c, world, sizes[s], (pd_dtype)dt);
    }
  CHECK_OK(c->ops->barrier(c), "barrier");
  if (big) test_big_all_reduce(c);
  CHECK(c->seq > 0, "sequence numbers advance");

  /* the subgroup {0, 2}: only its members create it and call it */
  if (g_size >= 3) {
    int members[2] = {0, 2};
    if (g_rank == 0 || g_rank == 2) {
      pd_comm *g = make_comm(1, members, 2, g_rank == 0 ? 0 : 1, 30);
      if (g) {
        CHECK(g->nranks == 2 && g->rank == (g_rank == 0 ? 0 : 1), "subgroup rank %d of %d", g->rank,
              g->nranks);
        for (int dt = 0; dt < PD_NUM_DTYPES; dt++) {
          test_ops(g, members, 7, (pd_dtype)dt);
          test_p2p(g, members, 7, (pd_dtype)dt);
        }
        g->ops->destroy(g);
      }
    }
    CHECK_OK(c->ops->barrier(c), "barrier after the subgroup");
  }
  double t_ops = now_s() - t0;

  if (failures) test_failures(world, 2.0);
  CHECK_OK(c->ops->barrier(c), "final barrier");
  c->ops->destroy(c);
  free(world);
  printf("rank %d: %d checks, %d failed (ops %.2f s, total %.2f s)\n", g_rank, g_checks, g_fail, t_ops,
         now_s() - t0);
  pd_comm_mpi_finalize();
  return g_fail ? 1 : 0;
}
