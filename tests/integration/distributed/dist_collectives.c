/* Multi-process tests of the collectives, checked element by element
 * against a serial computation of what every rank contributed.
 *
 *   dist_collectives <backend> <nranks> <scenario>
 *
 * Started directly, it forks nranks ranks with the launcher's environment
 * (PADDLE_TRAINER_ID, PADDLE_TRAINERS_NUM, PADDLE_MASTER, ...); under mpirun
 * (OMPI_COMM_WORLD_SIZE set) it is one rank. Exits 0 when every rank passed.
 * Scenarios: all (every collective x dtype x size), dims (the collectives
 * along a dim only), big (64 MB through every collective),
 * mismatch, missing, kill (rank 1 is killed with SIGKILL mid-collective). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <math.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../../src/distributed/comm/group_internal.h"
#include "dist_ranks.h"
#include "paddlec.h"
#include "paddlec/distributed.h"

static int g_rank, g_n;
static const char *g_backend;

#define FAIL(...)                                      \
  do {                                                 \
    fprintf(stderr, "rank %d: FAIL ", g_rank);         \
    fprintf(stderr, __VA_ARGS__);                      \
    fprintf(stderr, " (%s:%d)\n", __FILE__, __LINE__); \
    exit(1);                                           \
  } while (0)
#define CHECK_OK(expr)                                             \
  do {                                                             \
    if ((expr) < 0) FAIL("%s failed: %s", #expr, pd_last_error()); \
  } while (0)

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Rank r's value at element i: small integers, so sums and products are
 * exact in every dtype (bool: 0/1). */
static double value_of(int r, int64_t i, pd_dtype dt) {
  if (dt == PD_BOOL) return (double)(((i + r) % 3) == 0);
  if (dt == PD_UINT8) return (double)((i * 7 + r * 3) % 4 + 1);
  return (double)((i * 7 + r * 3) % 5 + 1) * (((i + r) % 2) ? 1 : -1) * (dt == PD_UINT8 ? -1 : 1);
}

static pd_tensor *make(int r, int64_t n, pd_dtype dt, int64_t salt) {
  double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
  for (int64_t i = 0; i < n; i++) v[i] = value_of(r, i + salt, dt);
  int64_t shape[1] = {n};
  pd_tensor *t64 = pd_to_tensor(v, PD_FLOAT64, 1, shape);
  pd_tensor *t = pd_cast(t64, dt);
  pd_tensor_release(t64);
  free(v);
  return t;
}

/* The serial reference for element i (round to the dtype like the kernel). */
static double expect_reduce(int64_t i, pd_dtype dt, pd_reduce_op op, int nr, const int *ranks, int64_t salt) {
  double acc = value_of(ranks[0], i + salt, dt);
  for (int k = 1; k < nr; k++) {
    double x = value_of(ranks[k], i + salt, dt);
    if (dt == PD_BOOL)
      acc = (op == PD_REDUCE_PROD || op == PD_REDUCE_MIN) ? (acc && x) : (acc || x);
    else if (op == PD_REDUCE_SUM || op == PD_REDUCE_AVG)
      acc += x;
    else if (op == PD_REDUCE_PROD)
      acc *= x;
    else if (op == PD_REDUCE_MAX)
      acc = x > acc ? x : acc;
    else
      acc = x < acc ? x : acc;
  }
  if (op == PD_REDUCE_AVG) {
    if (pd_dtype_is_floating(dt))
      acc = acc * (1.0 / nr);
    else
      acc = trunc(acc / nr);
  }
  if (dt == PD_UINT8 && acc < 0) acc += 256; /* wraps like the hardware */
  return acc;
}

static void check_values(const pd_tensor *t, int64_t n, const char *what, pd_dtype dt,
                         double (*ref)(int64_t, void *), void *ctx) {
  if (pd_tensor_numel(t) != n)
    FAIL("%s %s: %lld elements, expected %lld", what, pd_dtype_name(dt), (long long)pd_tensor_numel(t),
         (long long)n);
  double tol = dt == PD_FLOAT16 || dt == PD_BFLOAT16 ? 1e-2 : dt == PD_FLOAT32 ? 1e-6 : 0;
  for (int64_t i = 0; i < n; i++) {
    double got = pd_tensor_item_at(t, i), want = ref(i, ctx);
    if (fabs(got - want) > tol * (1 + fabs(want)))
      FAIL("%s %s n=%lld: element %lld is %g, expected %g", what, pd_dtype_name(dt), (long long)n,
           (long long)i, got, want);
  }
}

typedef struct red_ctx {
  pd_dtype dt;
  pd_reduce_op op;
  int nr;
  const int *ranks;
  int64_t salt;
} red_ctx;
static double ref_reduce(int64_t i, void *c) {
  red_ctx *r = c;
  return expect_reduce(i, r->dt, r->op, r->nr, r->ranks, r->salt);
}
typedef struct val_ctx {
  int r;
  pd_dtype dt;
  int64_t salt;
} val_ctx;
static double ref_value(int64_t i, void *c) {
  val_ctx *v = c;
  return value_of(v->r, i + v->salt, v->dt);
}

static const pd_dtype k_dtypes[] = {PD_BOOL,  PD_UINT8,   PD_INT8,     PD_INT16,   PD_INT32,
                                    PD_INT64, PD_FLOAT16, PD_BFLOAT16, PD_FLOAT32, PD_FLOAT64};
static const int64_t k_sizes[] = {0, 1, 7, 1000, 100003};

static void test_reductions(pd_dtype dt, int64_t n, int *world) {
  for (int op = 0; op < PD_NUM_REDUCE_OPS; op++) {
    if (op == PD_REDUCE_AVG && dt == PD_BOOL) continue;
    if (op == PD_REDUCE_PROD && n > 1000 && dt != PD_BOOL)
      continue; /* products overflow: covered at small n */
    pd_tensor *t = make(g_rank, n, dt, op);
    CHECK_OK(pd_dist_all_reduce(t, (pd_reduce_op)op, NULL));
    red_ctx c = {dt, (pd_reduce_op)op, g_n, world, op};
    char what[64];
    snprintf(what, sizeof what, "all_reduce %s", pd_reduce_op_name((pd_reduce_op)op));
    check_values(t, n, what, dt, ref_reduce, &c);
    pd_tensor_release(t);
    /* out of place (reshard's Partial -> Replicate): the input is kept (the
     * sizes of scenario all; the big one's take long to check) */
    if (n > 100003) continue;
    pd_tensor *in = make(g_rank, n, dt, op), *out = pd_empty(1, (const int64_t[]){n}, dt);
    CHECK_OK(pd_dist_all_reduce_into(out, in, (pd_reduce_op)op, NULL));
    check_values(out, n, what, dt, ref_reduce, &c);
    val_ctx v = {g_rank, dt, op};
    check_values(in, n, "all_reduce_into (input kept)", dt, ref_value, &v);
    pd_tensor_release(in);
    pd_tensor_release(out);
  }
  /* out of place into a tensor of another size: an error naming both */
  pd_tensor *in = make(g_rank, n, dt, 0), *small = pd_empty(1, (const int64_t[]){n + 1}, dt);
  if (pd_dist_all_reduce_into(small, in, PD_REDUCE_SUM, NULL) == PD_OK ||
      !strstr(pd_last_error(), "out has dtype"))
    FAIL("all_reduce_into of %lld elements into %lld: %s", (long long)n, (long long)n + 1, pd_last_error());
  pd_tensor_release(in);
  pd_tensor_release(small);
  /* reduce to the last rank: only it changes */
  int dst = g_n - 1;
  pd_tensor *t = make(g_rank, n, dt, 11);
  CHECK_OK(pd_dist_reduce(t, dst, PD_REDUCE_MAX, NULL));
  if (g_rank == dst) {
    red_ctx c = {dt, PD_REDUCE_MAX, g_n, world, 11};
    check_values(t, n, "reduce", dt, ref_reduce, &c);
  } else {
    val_ctx v = {g_rank, dt, 11};
    check_values(t, n, "reduce (non-root keeps input)", dt, ref_value, &v);
  }
  pd_tensor_release(t);
}

static void test_movement(pd_dtype dt, int64_t n, int *world) {
  (void)world;
  for (int root = 0; root < g_n; root++) {
    pd_tensor *t = make(g_rank, n, dt, 5);
    CHECK_OK(pd_dist_broadcast(t, root, NULL));
    val_ctx v = {root, dt, 5};
    check_values(t, n, "broadcast", dt, ref_value, &v);
    pd_tensor_release(t);
  }
  /* all_gather into a list (new tensors) and into one tensor */
  pd_tensor *t = make(g_rank, n, dt, 3);
  pd_tensor *list[8] = {0};
  CHECK_OK(pd_dist_all_gather(list, t, NULL));
  for (int r = 0; r < g_n; r++) {
    val_ctx v = {r, dt, 3};
    check_values(list[r], n, "all_gather", dt, ref_value, &v);
    pd_tensor_release(list[r]);
  }
  int64_t shape[1] = {n * g_n};
  pd_tensor *all = pd_zeros(1, shape, dt);
  CHECK_OK(pd_dist_all_gather_into_tensor(all, t, NULL));
  for (int r = 0; r < g_n; r++) {
    pd_tensor *part = pd_slice(all, 1, (int64_t[]){0}, (int64_t[]){r * n}, (int64_t[]){(r + 1) * n});
    val_ctx v = {r, dt, 3};
    check_values(part, n, "all_gather_into_tensor", dt, ref_value, &v);
    pd_tensor_release(part);
  }
  pd_tensor_release(all);
  pd_tensor_release(t);

  /* reduce_scatter: block j of every rank's list reduced onto rank j */
  if (dt != PD_BOOL) {
    pd_tensor *in[8];
    for (int j = 0; j < g_n; j++) in[j] = make(g_rank, n, dt, 100 * j);
    pd_tensor *out = pd_zeros(1, (int64_t[]){n}, dt);
    CHECK_OK(pd_dist_reduce_scatter(out, in, PD_REDUCE_SUM, NULL));
    red_ctx c = {dt, PD_REDUCE_SUM, g_n, world, 100 * g_rank};
    check_values(out, n, "reduce_scatter", dt, ref_reduce, &c);
    pd_tensor_release(out);
    for (int j = 0; j < g_n; j++) pd_tensor_release(in[j]);
  }

  /* alltoall: out[j] on rank i = in[i] of rank j */
  {
    pd_tensor *in[8], *out[8] = {0};
    for (int j = 0; j < g_n; j++) in[j] = make(g_rank, n, dt, 1000 * j);
    CHECK_OK(pd_dist_alltoall(out, in, NULL));
    for (int j = 0; j < g_n; j++) {
      val_ctx v = {j, dt, 1000 * g_rank};
      check_values(out[j], n, "alltoall", dt, ref_value, &v);
      pd_tensor_release(out[j]);
      pd_tensor_release(in[j]);
    }
  }
  /* alltoall_single with uneven splits: rank i sends (i + j + 1) * m rows to j */
  {
    int64_t m = n > 3 ? 3 : n, sin[8], sout[8], rows_in = 0, rows_out = 0;
    for (int j = 0; j < g_n; j++) {
      sin[j] = (g_rank + j + 1) * m;
      sout[j] = (j + g_rank + 1) * m;
      rows_in += sin[j];
      rows_out += sout[j];
    }
    pd_tensor *in = make(g_rank, rows_in, dt, 0);
    pd_tensor *out = pd_zeros(1, (int64_t[]){rows_out}, dt);
    CHECK_OK(pd_dist_alltoall_single(out, in, sin, sout, NULL));
    int64_t off = 0;
    for (int j = 0; j < g_n; j++) {
      /* rank j's block for this rank starts after its blocks for ranks < me */
      int64_t src_off = 0;
      for (int k = 0; k < g_rank; k++) src_off += (j + k + 1) * m;
      for (int64_t e = 0; e < sout[j]; e++) {
        double got = pd_tensor_item_at(out, off + e), want = value_of(j, src_off + e, dt);
        if (fabs(got - want) > 1e-2 * (1 + fabs(want)))
          FAIL("alltoall_single %s: from rank %d element %lld is %g, expected %g", pd_dtype_name(dt), j,
               (long long)e, got, want);
      }
      off += sout[j];
    }
    pd_tensor_release(in);
    pd_tensor_release(out);
  }
  /* scatter from rank 0, gather to the last rank */
  {
    pd_tensor *list2[8];
    for (int j = 0; j < g_n; j++) list2[j] = make(0, n, dt, 7 * j);
    pd_tensor *mine = pd_zeros(1, (int64_t[]){n}, dt);
    CHECK_OK(pd_dist_scatter(mine, g_rank == 0 ? list2 : NULL, 0, NULL));
    val_ctx v = {0, dt, 7 * g_rank};
    check_values(mine, n, "scatter", dt, ref_value, &v);
    for (int j = 0; j < g_n; j++) pd_tensor_release(list2[j]);
    pd_tensor_release(mine);
    pd_tensor *src = make(g_rank, n, dt, 9), *got[8] = {0};
    CHECK_OK(pd_dist_gather(src, g_rank == g_n - 1 ? got : NULL, g_n - 1, NULL));
    if (g_rank == g_n - 1)
      for (int r = 0; r < g_n; r++) {
        val_ctx w = {r, dt, 9};
        check_values(got[r], n, "gather", dt, ref_value, &w);
        pd_tensor_release(got[r]);
      }
    pd_tensor_release(src);
  }
  /* send/recv around the ring, and an isend/irecv exchange with the next rank */
  {
    int next = (g_rank + 1) % g_n, prev = (g_rank + g_n - 1) % g_n;
    pd_tensor *s = make(g_rank, n, dt, 13), *r = pd_zeros(1, (int64_t[]){n}, dt);
    if (g_rank % 2 == 0) {
      CHECK_OK(pd_dist_send(s, next, NULL));
      CHECK_OK(pd_dist_recv(r, prev, NULL));
    } else {
      CHECK_OK(pd_dist_recv(r, prev, NULL));
      CHECK_OK(pd_dist_send(s, next, NULL));
    }
    val_ctx v = {prev, dt, 13};
    check_values(r, n, "send/recv", dt, ref_value, &v);
    pd_dist_task *ts, *tr;
    pd_tensor *r2 = pd_zeros(1, (int64_t[]){n}, dt);
    CHECK_OK(pd_dist_isend(s, next, NULL, &ts));
    CHECK_OK(pd_dist_irecv(r2, prev, NULL, &tr));
    CHECK_OK(pd_dist_task_wait(ts));
    CHECK_OK(pd_dist_task_wait(tr));
    if (!pd_dist_task_is_completed(tr)) FAIL("irecv task not completed after wait");
    pd_dist_task_release(ts);
    pd_dist_task_release(tr);
    check_values(r2, n, "isend/irecv", dt, ref_value, &v);
    pd_tensor_release(s);
    pd_tensor_release(r);
    pd_tensor_release(r2);
  }
}

/* Rank r's tensor of `shape` (3-d), values as make's. For a scope, which
 * owns every tensor made in it (so nothing here is released). */
static pd_tensor *make3(int r, const int64_t *shape, pd_dtype dt, int64_t salt) {
  int64_t n = shape[0] * shape[1] * shape[2];
  double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
  for (int64_t i = 0; i < n; i++) v[i] = value_of(r, i + salt, dt);
  pd_tensor *t64 = pd_to_tensor(v, PD_FLOAT64, 3, shape);
  free(v);
  return pd_cast(t64, dt);
}

/* got equals want element by element (same shape, exact). */
static void check_same(pd_tensor *got, pd_tensor *want, const char *what, pd_dtype dt, int dim) {
  int64_t n = pd_tensor_numel(want);
  if (pd_tensor_numel(got) != n)
    FAIL("%s %s dim %d: %lld elements, expected %lld", what, pd_dtype_name(dt), dim,
         (long long)pd_tensor_numel(got), (long long)n);
  for (int64_t i = 0; i < n; i++) {
    double g = pd_tensor_item_at(got, i), w = pd_tensor_item_at(want, i);
    if (g != w)
      FAIL("%s %s dim %d of %lld elements: element %lld is %g, expected %g", what, pd_dtype_name(dt), dim,
           (long long)n, (long long)i, g, w);
  }
}

/* The collectives along a dim (blocked buffers: the shm backend reads and
 * writes the blocks in place, a backend without them packs) against the
 * same result built from concat and split of every rank's tensors, for
 * each dim of a 3-d block shape. */
static void test_dim_collectives(pd_dtype dt, const int64_t *block, int *world, pd_dist_group *g) {
  int n = g ? pd_dist_get_world_size(g) : g_n, me = g ? pd_dist_get_rank(g) : g_rank;
  const int *ranks = g ? world : NULL;
  pd_dist_opts o = {.group = g};
  pd_scope_begin();
  for (int d = 0; d < 3; d++) {
    int64_t whole[3] = {block[0], block[1], block[2]};
    whole[d] *= n;
    pd_tensor *parts[8], *wholes[8];
    for (int r = 0; r < n; r++) {
      int gr = ranks ? ranks[r] : r;
      parts[r] = make3(gr, block, dt, d);
      wholes[r] = make3(gr, whole, dt, 10 + d);
    }
    if (me < 0) { /* not a member: every call returns untouched */
      pd_tensor *x = make3(g_rank, block, dt, d), *y = make3(g_rank, whole, dt, 10 + d);
      CHECK_OK(pd_dist_all_gather_dim(y, x, d, &o));
      CHECK_OK(pd_dist_reduce_scatter_dim(x, y, d, PD_REDUCE_SUM, &o));
      CHECK_OK(pd_dist_alltoall_dim(y, y, d, d, &o));
      check_same(x, make3(g_rank, block, dt, d), "non-member keeps its tensor", dt, d);
      continue;
    }
    /* all_gather: the ranks' parts concatenated along d */
    pd_tensor *out = pd_empty(3, whole, dt);
    CHECK_OK(pd_dist_all_gather_dim(out, parts[me], d, &o));
    check_same(out, pd_concat(parts, n, d), "all_gather along a dim", dt, d);
    /* reduce_scatter: block `me` along d of every rank's whole, reduced */
    pd_reduce_op ops[2] = {PD_REDUCE_SUM, PD_REDUCE_MAX};
    for (int k = 0; k < (dt == PD_BOOL ? 0 : 2); k++) {
      pd_tensor *rs = pd_empty(3, block, dt), *want = NULL, *blocks[64];
      CHECK_OK(pd_dist_reduce_scatter_dim(rs, wholes[me], d, ops[k], &o));
      for (int r = 0; r < n; r++) {
        if (pd_split(wholes[r], n, NULL, d, blocks, 64) != n) FAIL("split: %s", pd_last_error());
        want = !want ? blocks[me] : k == 0 ? pd_add(want, blocks[me]) : pd_maximum(want, blocks[me]);
      }
      check_same(rs, want, k == 0 ? "reduce_scatter SUM along a dim" : "reduce_scatter MAX along a dim", dt,
                 d);
    }
    /* alltoall from blocks along d to blocks along every dim e: block j
     * of rank r goes to rank j, which places it at r along e */
    for (int e = 0; e < 3; e++) {
      int64_t oshape[3] = {block[0], block[1], block[2]};
      oshape[e] *= n;
      pd_tensor *a2a = pd_empty(3, oshape, dt), *got[8], *blocks[64];
      CHECK_OK(pd_dist_alltoall_dim(a2a, wholes[me], d, e, &o));
      for (int r = 0; r < n; r++) {
        if (pd_split(wholes[r], n, NULL, d, blocks, 64) != n) FAIL("split: %s", pd_last_error());
        got[r] = blocks[me];
      }
      check_same(a2a, pd_concat(got, n, e), "alltoall between dims", dt, d * 3 + e);
    }
  }
  pd_scope_end();
}

/* The blocked and the plain forms are the same collective: ranks may mix
 * them (all_gather, alltoall); and bad shapes are errors naming them (the group stays usable). */
static void test_dim_mixed_and_errors(void) {
  pd_scope_begin();
  const int64_t block[3] = {3, 2, 5}, whole[3] = {3, 2 * g_n, 5};
  pd_tensor *parts[8];
  for (int r = 0; r < g_n; r++) parts[r] = make3(r, block, PD_INT64, 7);
  if (g_rank == 0) {
    pd_tensor *out = pd_empty(3, whole, PD_INT64);
    CHECK_OK(pd_dist_all_gather_dim(out, parts[0], 1, NULL));
    check_same(out, pd_concat(parts, g_n, 1), "all_gather along dim 1 beside plain ones", PD_INT64, 1);
  } else {
    pd_tensor *flat = pd_empty(3, (const int64_t[]){3 * g_n, 2, 5}, PD_INT64);
    CHECK_OK(pd_dist_all_gather_into_tensor(flat, parts[g_rank], NULL));
    check_same(flat, pd_concat(parts, g_n, 0), "all_gather_into_tensor beside one along dim 1", PD_INT64, 0);
  }
  /* alltoall: rank 0 sends and receives blocks along dim 1 (rows of 35
   * elements, longer than the 256-byte chunks of dist_mpi_dims_3_chunked),
   * the others the same blocks packed along dim 0 */
  {
    const int64_t aw[3] = {3, 7 * g_n, 5}, ap[3] = {3 * g_n, 7, 5};
    pd_tensor *blocks[8][8], *mine[8];
    for (int r = 0; r < g_n; r++)
      if (pd_split(make3(r, aw, PD_INT64, 21), g_n, NULL, 1, blocks[r], 8) != g_n)
        FAIL("split: %s", pd_last_error());
    for (int r = 0; r < g_n; r++) mine[r] = blocks[r][g_rank];
    if (g_rank == 0) {
      pd_tensor *out = pd_empty(3, aw, PD_INT64);
      CHECK_OK(pd_dist_alltoall_dim(out, make3(0, aw, PD_INT64, 21), 1, 1, NULL));
      check_same(out, pd_concat(mine, g_n, 1), "alltoall along dim 1 beside plain ones", PD_INT64, 1);
    } else {
      pd_tensor *out = pd_empty(3, ap, PD_INT64);
      CHECK_OK(pd_dist_alltoall_single(out, pd_concat(blocks[g_rank], g_n, 0), NULL, NULL, NULL));
      check_same(out, pd_concat(mine, g_n, 0), "alltoall_single beside one along dim 1", PD_INT64, 0);
    }
  }
  pd_tensor *x = make3(g_rank, block, PD_FLOAT32, 0),
            *bad = pd_empty(3, (const int64_t[]){3, 2 * g_n, 4}, PD_FLOAT32);
  if (pd_dist_all_gather_dim(bad, x, 1, NULL) >= 0 || !strstr(pd_last_error(), "[3, 2, 5]"))
    FAIL("all_gather_dim with a bad out shape: '%s'", pd_last_error());
  if (pd_dist_all_gather_dim(bad, x, 3, NULL) >= 0 || !strstr(pd_last_error(), "dim 3"))
    FAIL("all_gather_dim along dim 3 of a 3-d tensor: '%s'", pd_last_error());
  if (pd_dist_reduce_scatter_dim(x, x, 0, PD_REDUCE_SUM, NULL) >= 0 ||
      !strstr(pd_last_error(), "reduce_scatter"))
    FAIL("reduce_scatter_dim with out as big as in: '%s'", pd_last_error());
  if (pd_dist_alltoall_dim(bad, x, 0, 0, NULL) >= 0 || !strstr(pd_last_error(), "alltoall"))
    FAIL("alltoall_dim of different sizes: '%s'", pd_last_error());
  CHECK_OK(pd_dist_all_gather_dim(pd_empty(3, whole, PD_FLOAT32), x, 1, NULL));
  pd_scope_end();
}

/* The collectives along dims: tiny (inside the control block), a few
 * chunks with rows that cross chunk boundaries, empty; then mixed forms
 * and errors. */
static void scenario_dims(int *world) {
  const int64_t dim_blocks[][3] = {{2, 1, 3}, {3, 2, 5}, {37, 11, 129}, {4, 0, 3}};
  const pd_dtype dim_dtypes[] = {PD_FLOAT32, PD_INT64, PD_UINT8, PD_FLOAT16, PD_BOOL};
  for (size_t b = 0; b < sizeof dim_blocks / sizeof *dim_blocks; b++)
    for (size_t t = 0; t < sizeof dim_dtypes / sizeof *dim_dtypes; t++)
      test_dim_collectives(dim_dtypes[t], dim_blocks[b], world, NULL);
  test_dim_mixed_and_errors();
}

static void scenario_all(void) {
  int world[8];
  for (int i = 0; i < g_n; i++) world[i] = i;
  for (size_t d = 0; d < sizeof k_dtypes / sizeof *k_dtypes; d++)
    for (size_t s = 0; s < sizeof k_sizes / sizeof *k_sizes; s++) {
      test_reductions(k_dtypes[d], k_sizes[s], world);
      test_movement(k_dtypes[d], k_sizes[s], world);
    }
  CHECK_OK(pd_dist_barrier(NULL));
  scenario_dims(world);

  /* async: several all_reduces in flight complete in order */
  {
    pd_tensor *t[4];
    pd_dist_task *task[4];
    for (int k = 0; k < 4; k++) {
      t[k] = make(g_rank, 50000, PD_FLOAT32, k);
      CHECK_OK(pd_dist_all_reduce(t[k], PD_REDUCE_SUM, &(pd_dist_opts){.task = &task[k]}));
    }
    for (int k = 3; k >= 0; k--) {
      CHECK_OK(pd_dist_task_wait(task[k]));
      pd_dist_task_release(task[k]);
      red_ctx c = {PD_FLOAT32, PD_REDUCE_SUM, g_n, world, k};
      check_values(t[k], 50000, "async all_reduce", PD_FLOAT32, ref_reduce, &c);
      pd_tensor_release(t[k]);
    }
  }
  /* a subgroup of the first and last ranks; the others are not members */
  {
    int ranks[2] = {g_n - 1, 0};
    pd_dist_group *g = pd_dist_new_group(ranks, 2, NULL);
    if (!g) FAIL("new_group: %s", pd_last_error());
    int member = g_rank == 0 || g_rank == g_n - 1;
    if (pd_dist_group_is_member(g) != member) FAIL("new_group membership");
    if (member && pd_dist_get_rank(g) != (g_rank == 0 ? 0 : 1)) FAIL("group rank %d", pd_dist_get_rank(g));
    pd_tensor *t = make(g_rank, 300000, PD_FLOAT64, 1);
    CHECK_OK(pd_dist_all_reduce(t, PD_REDUCE_SUM, &(pd_dist_opts){.group = g}));
    int sorted[2] = {0, g_n - 1};
    if (member) {
      red_ctx c = {PD_FLOAT64, PD_REDUCE_SUM, 2, sorted, 1};
      check_values(t, 300000, "subgroup all_reduce", PD_FLOAT64, ref_reduce, &c);
    } else {
      val_ctx v = {g_rank, PD_FLOAT64, 1};
      check_values(t, 300000, "non-member keeps its tensor", PD_FLOAT64, ref_value, &v);
    }
    pd_tensor_release(t);
    /* broadcast inside the group from global rank n-1 */
    pd_tensor *b = make(g_rank, 9, PD_INT32, 0);
    CHECK_OK(pd_dist_broadcast(b, g_n - 1, &(pd_dist_opts){.group = g}));
    if (member) {
      val_ctx v = {g_n - 1, PD_INT32, 0};
      check_values(b, 9, "subgroup broadcast", PD_INT32, ref_value, &v);
    }
    pd_tensor_release(b);
    /* along dims in the subgroup (group ranks: global n-1, then 0) */
    test_dim_collectives(PD_FLOAT32, (const int64_t[]){5, 3, 70}, (int[]){0, g_n - 1}, g);
  }
  /* zero-copy: tensors inside the group's shared segment */
  {
    int64_t shape[2] = {1000, 301};
    pd_tensor *t = pd_dist_alloc_shared(NULL, PD_FLOAT32, 2, shape);
    if (!t) FAIL("alloc_shared: %s", pd_last_error());
    float *p = pd_tensor_data(t);
    for (int64_t i = 0; i < 301000; i++) p[i] = (float)value_of(g_rank, i, PD_FLOAT32);
    for (int rep = 0; rep < 3; rep++) {
      CHECK_OK(pd_dist_all_reduce(t, PD_REDUCE_SUM, NULL));
      for (int64_t i = 0; i < 301000; i++) {
        double want = expect_reduce(i, PD_FLOAT32, PD_REDUCE_SUM, g_n, world, 0);
        for (int k = 0; k < rep; k++) want *= g_n;
        if (fabs(p[i] - want) > 1e-5 * (1 + fabs(want)))
          FAIL("zero-copy all_reduce rep %d: element %lld is %g, expected %g", rep, (long long)i, p[i], want);
      }
    }
    /* reduce to the last rank: the root gets the sum, the other ranks'
     * shared buffers stay as they were */
    int root = g_n - 1;
    for (int64_t i = 0; i < 301000; i++) p[i] = (float)value_of(g_rank, i, PD_FLOAT32);
    CHECK_OK(pd_dist_reduce(t, root, PD_REDUCE_SUM, NULL));
    for (int64_t i = 0; i < 301000; i++) {
      double want = g_rank == root ? expect_reduce(i, PD_FLOAT32, PD_REDUCE_SUM, g_n, world, 0)
                                   : value_of(g_rank, i, PD_FLOAT32);
      if (fabs(p[i] - want) > 1e-5 * (1 + fabs(want)))
        FAIL("zero-copy reduce to %d on rank %d: element %lld is %g, expected %g", root, g_rank, (long long)i,
             p[i], want);
    }
    /* AVG, and a count that does not split into whole lines per rank */
    pd_tensor *odd = pd_dist_alloc_shared(NULL, PD_FLOAT64, 1, (int64_t[]){300007});
    if (!odd) FAIL("alloc_shared: %s", pd_last_error());
    double *q = pd_tensor_data(odd);
    for (int64_t i = 0; i < 300007; i++) q[i] = value_of(g_rank, i, PD_FLOAT64);
    CHECK_OK(pd_dist_all_reduce(odd, PD_REDUCE_AVG, NULL));
    for (int64_t i = 0; i < 300007; i++) {
      double want = expect_reduce(i, PD_FLOAT64, PD_REDUCE_SUM, g_n, world, 0) / g_n;
      if (fabs(q[i] - want) > 1e-12 * (1 + fabs(want)))
        FAIL("zero-copy AVG all_reduce: element %lld is %.17g, expected %.17g", (long long)i, q[i], want);
    }
    pd_tensor_release(odd);
    pd_tensor_release(t);
  }
  /* zero copy on rank 0 only: the others stage, and the result is the same */
  {
    int64_t n = 200003;
    pd_tensor *shared = pd_dist_alloc_shared(NULL, PD_FLOAT32, 1, (int64_t[]){n}); /* collective */
    if (!shared) FAIL("alloc_shared: %s", pd_last_error());
    pd_tensor *t = g_rank == 0 ? shared : pd_empty(1, (int64_t[]){n}, PD_FLOAT32);
    if (!t) FAIL("tensor: %s", pd_last_error());
    float *p = pd_tensor_data(t);
    for (int64_t i = 0; i < n; i++) p[i] = (float)value_of(g_rank, i, PD_FLOAT32);
    CHECK_OK(pd_dist_all_reduce(t, PD_REDUCE_SUM, NULL));
    red_ctx c = {PD_FLOAT32, PD_REDUCE_SUM, g_n, world, 0};
    check_values(t, n, "all_reduce, zero copy on rank 0 only", PD_FLOAT32, ref_reduce, &c);
    if (t != shared) pd_tensor_release(t);
    pd_tensor_release(shared);
  }
  /* all_gather_object: bytes of different lengths */
  {
    char msg[64];
    int len = snprintf(msg, sizeof msg, "rank %d says %.*s", g_rank, g_rank * 3, "hello world!");
    void *objs[8];
    size_t lens[8];
    CHECK_OK(pd_dist_all_gather_object(objs, lens, msg, (size_t)len, NULL));
    for (int r = 0; r < g_n; r++) {
      char want[64];
      int wl = snprintf(want, sizeof want, "rank %d says %.*s", r, r * 3, "hello world!");
      if (lens[r] != (size_t)wl || memcmp(objs[r], want, (size_t)wl))
        FAIL("all_gather_object from rank %d", r);
      free(objs[r]);
    }
  }
  /* bad input is an error on the calling rank, the group stays usable */
  {
    pd_tensor *t = make(g_rank, 6, PD_FLOAT32, 0);
    if (pd_dist_broadcast(t, g_n + 5, NULL) >= 0 || !strstr(pd_last_error(), "not a member"))
      FAIL("broadcast from a rank outside the world: '%s'", pd_last_error());
    if (pd_dist_all_reduce(t, (pd_reduce_op)9, NULL) >= 0 || !strstr(pd_last_error(), "reduce op 9"))
      FAIL("bad reduce op: '%s'", pd_last_error());
    CHECK_OK(pd_dist_all_reduce(t, PD_REDUCE_SUM, NULL));
    pd_tensor_release(t);
  }
}

static void scenario_big(void) {
  int world[8];
  for (int i = 0; i < g_n; i++) world[i] = i;
  int64_t n = 16 * 1024 * 1024; /* 64 MB of float32 */
  pd_tensor *t = make(g_rank, n, PD_FLOAT32, 0);
  CHECK_OK(pd_dist_all_reduce(t, PD_REDUCE_SUM, NULL));
  red_ctx c = {PD_FLOAT32, PD_REDUCE_SUM, g_n, world, 0};
  check_values(t, n, "64 MB all_reduce", PD_FLOAT32, ref_reduce, &c);
  pd_tensor_release(t);
  t = make(g_rank, n, PD_FLOAT32, 0);
  CHECK_OK(pd_dist_broadcast(t, g_n - 1, NULL));
  val_ctx v = {g_n - 1, PD_FLOAT32, 0};
  check_values(t, n, "64 MB broadcast", PD_FLOAT32, ref_value, &v);
  pd_tensor_release(t);
  /* every other collective with 64 MB gathered or scattered in all (each
   * rank's part is 64 MB / n, not a multiple of the chunk) */
  test_movement(PD_FLOAT32, n / g_n + 3, world);
  test_reductions(PD_INT32, n / g_n + 3, world);
  /* out of place (a large result goes out by streaming stores): the
   * input stays as it was */
  {
    int64_t m = n / 4 + 5;
    pd_tensor *src = make(g_rank, m, PD_FLOAT32, 2), *dst = pd_empty(1, (int64_t[]){m}, PD_FLOAT32);
    CHECK_OK(pd_dist_all_reduce_into(dst, src, PD_REDUCE_SUM, NULL));
    red_ctx rc = {PD_FLOAT32, PD_REDUCE_SUM, g_n, world, 2};
    check_values(dst, m, "16 MB all_reduce into another tensor", PD_FLOAT32, ref_reduce, &rc);
    val_ctx keep = {g_rank, PD_FLOAT32, 2};
    check_values(src, m, "the input of an out-of-place all_reduce", PD_FLOAT32, ref_value, &keep);
    pd_tensor_release(src);
    pd_tensor_release(dst);
  }
  /* along dims: 6 MB per rank's block, rows of 4 KiB and of 12 bytes */
  test_dim_collectives(PD_FLOAT32, (const int64_t[]){509, 3, 1031}, world, NULL);
}

/* Rank 1 calls broadcast where the others call all_reduce; then a size
 * mismatch. Every rank must fail with a message naming the calls. */
static void scenario_mismatch(void) {
  pd_tensor *t = make(g_rank, 10, PD_FLOAT32, 0);
  pd_status st = g_rank == 1 ? pd_dist_broadcast(t, 0, NULL) : pd_dist_all_reduce(t, PD_REDUCE_SUM, NULL);
  const char *e = pd_last_error();
  if (st >= 0) FAIL("mismatched collectives succeeded");
  if (!strstr(e, "all_reduce(float32, 10 elements, SUM)") ||
      !strstr(e, "broadcast(float32, 10 elements, root 0)") || !strstr(e, "rank 1"))
    FAIL("mismatch message lacks the calls: '%s'", e);
  printf("rank %d: %s\n", g_rank, e);
  /* the group is broken now: the next call fails at once with the same story */
  double t0 = now_s();
  if (pd_dist_all_reduce(t, PD_REDUCE_SUM, NULL) >= 0 || !strstr(pd_last_error(), "broken"))
    FAIL("call on a broken group: '%s'", pd_last_error());
  if (now_s() - t0 > 0.5) FAIL("broken group took %.2f s to fail", now_s() - t0);
  pd_tensor_release(t);
  /* a fresh group: sizes differ */
  pd_dist_group *g = pd_dist_new_group(NULL, 0, NULL);
  if (!g) FAIL("new_group: %s", pd_last_error());
  pd_tensor *u = make(g_rank, g_rank == 0 ? 8 : 9, PD_INT64, 0);
  if (pd_dist_all_reduce(u, PD_REDUCE_MAX, &(pd_dist_opts){.group = g}) >= 0) FAIL("size mismatch succeeded");
  e = pd_last_error();
  if (!strstr(e, "8 elements") || !strstr(e, "9 elements")) FAIL("size mismatch message: '%s'", e);
  printf("rank %d: %s\n", g_rank, e);
  pd_tensor_release(u);
}

/* The last rank never calls the collective: the others time out naming it. */
static void scenario_missing(void) {
  pd_tensor *t = make(g_rank, 100, PD_FLOAT32, 0);
  if (g_rank == g_n - 1) {
    sleep(3);
    pd_tensor_release(t);
    return;
  }
  double t0 = now_s();
  pd_status st = pd_dist_all_reduce(t, PD_REDUCE_SUM, NULL);
  double dt = now_s() - t0;
  const char *e = pd_last_error();
  char want[64];
  snprintf(want, sizeof want, "missing (never arrived): rank %d", g_n - 1);
  if (st >= 0 || !strstr(e, want) || !strstr(e, "all_reduce(float32, 100 elements, SUM)"))
    FAIL("missing rank not named: '%s'", e);
  if (dt > 5) FAIL("timeout of 1 s took %.1f s", dt);
  printf("rank %d: %s\n", g_rank, e);
  pd_tensor_release(t);
}

/* Rank 1 dies inside a collective (SIGKILL from the parent while it waits
 * there for the others); the others enter later and must fail within 10 s
 * naming it. */
static void scenario_kill(void) {
  int64_t n = 4 * 1024 * 1024;
  pd_tensor *t = make(g_rank, n, PD_FLOAT32, 0);
  CHECK_OK(pd_dist_all_reduce(t, PD_REDUCE_SUM, NULL));
  if (g_rank == 1) {
    FILE *f = fopen(getenv("DIST_TEST_PIDFILE"), "w");
    fprintf(f, "%d\n", getpid());
    fclose(f);
    pd_dist_all_reduce(t, PD_REDUCE_SUM, NULL); /* killed in here */
    pause();
  }
  sleep(1);
  double t0 = now_s();
  pd_status st = pd_dist_all_reduce(t, PD_REDUCE_SUM, NULL);
  double dt = now_s() - t0;
  const char *e = pd_last_error();
  if (st >= 0 || !strstr(e, "rank 1") || !strstr(e, "died")) FAIL("dead rank not named: '%s'", e);
  if (dt > 10) FAIL("took %.1f s to notice the dead rank", dt);
  printf("rank %d: noticed in %.2f s: %s\n", g_rank, dt, e);
  pd_tensor_release(t);
}

static int run_rank(const char *scenario) {
  double timeout = !strcmp(scenario, "missing") ? 1.0 : !strcmp(scenario, "kill") ? 60.0 : 60.0;
  pd_dist_group *w =
      pd_dist_init_parallel_env(&(pd_dist_init_opts){.backend = g_backend, .timeout_s = timeout});
  if (!w) FAIL("init_parallel_env: %s", pd_last_error());
  if (pd_dist_get_rank(NULL) != g_rank || pd_dist_get_world_size(NULL) != g_n)
    FAIL("rank %d / %d from the group", pd_dist_get_rank(NULL), pd_dist_get_world_size(NULL));
  if (strcmp(pd_dist_group_backend(w), g_backend)) FAIL("backend %s", pd_dist_group_backend(w));
  if (!strcmp(scenario, "all"))
    scenario_all();
  else if (!strcmp(scenario, "dims")) {
    int world[8];
    for (int i = 0; i < g_n; i++) world[i] = i;
    scenario_dims(world);
  } else if (!strcmp(scenario, "big"))
    scenario_big();
  else if (!strcmp(scenario, "mismatch"))
    scenario_mismatch();
  else if (!strcmp(scenario, "missing"))
    scenario_missing();
  else if (!strcmp(scenario, "kill"))
    scenario_kill();
  else
    FAIL("unknown scenario %s", scenario);
  pd_dist_destroy_process_group(NULL);
  return 0;
}

static int count_shm(const char *prefix) {
  DIR *d = opendir("/dev/shm");
  int k = 0;
  struct dirent *e;
  while (d && (e = readdir(d)))
    if (!strncmp(e->d_name, prefix, strlen(prefix))) k++;
  if (d) closedir(d);
  return k;
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s <shm|mpi> <nranks> <all|dims|big|mismatch|missing|kill>\n", argv[0]);
    return 2;
  }
  g_backend = argv[1];
  g_n = atoi(argv[2]);
  const char *scenario = argv[3];
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (getenv("OMPI_COMM_WORLD_SIZE")) { /* one rank under mpirun */
    g_rank = atoi(getenv("OMPI_COMM_WORLD_RANK"));
    g_n = atoi(getenv("OMPI_COMM_WORLD_SIZE"));
    int rc = run_rank(scenario);
    if (rc == 0) printf("PASS %s %s rank %d of %d\n", scenario, g_backend, g_rank, g_n);
    return rc;
  }
  char key[64], master[64], pidfile[128];
  snprintf(key, sizeof key, "disttest%d", getpid());
  snprintf(master, sizeof master, "127.0.0.1:%d", dist_free_port());
  snprintf(pidfile, sizeof pidfile, "/tmp/paddlec-disttest-%d.pid", getpid());
  setenv("PADDLEC_JOB_KEY", key, 1);
  setenv("PADDLE_MASTER", master, 1);
  setenv("DIST_TEST_PIDFILE", pidfile, 1);
  unlink(pidfile);
  pid_t pids[8];
  for (int r = 0; r < g_n; r++) {
    pids[r] = fork();
    if (pids[r] == 0) {
      char buf[16];
      snprintf(buf, sizeof buf, "%d", r);
      setenv("PADDLE_TRAINER_ID", buf, 1);
      snprintf(buf, sizeof buf, "%d", g_n);
      setenv("PADDLE_TRAINERS_NUM", buf, 1);
      setenv("OMP_NUM_THREADS", "1", 1);
      g_rank = r;
      _exit(run_rank(scenario));
    }
  }
  int failed = 0;
  if (!strcmp(scenario, "kill")) {
    /* wait until rank 1 sits in its collective, then SIGKILL it */
    for (int i = 0; i < 200 && access(pidfile, R_OK) != 0; i++) usleep(50000);
    usleep(300000);
    kill(pids[1], SIGKILL);
    unlink(pidfile);
  }
  for (int r = 0; r < g_n; r++) {
    int status;
    waitpid(pids[r], &status, 0);
    int killed_rank = !strcmp(scenario, "kill") && r == 1;
    if (!killed_rank && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
      fprintf(stderr, "rank %d exited with status %d\n", r, status);
      failed = 1;
    }
  }
  char prefix[80];
  snprintf(prefix, sizeof prefix, "paddlec-%s", key);
  int left = count_shm(prefix);
  if (left) {
    fprintf(stderr, "FAIL: %d shared segments named /dev/shm/%s* are left behind\n", left, prefix);
    failed = 1;
  }
  if (!failed) printf("PASS %s %s with %d ranks\n", scenario, g_backend, g_n);
  return failed;
}
