/* DataParallel: bucket plans, the autograd callback and leaf walk it uses,
 * and forked two-rank jobs on the shm backend checked against one process
 * training on the whole batch: several buckets and the default sizes,
 * bit-identical reruns, no_sync accumulation, find_unused_parameters (with
 * and without), checkpoint save / load / resume, fused_allreduce_gradients. */
#include <arpa/inet.h>
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

#include "autograd/graph_walk.h"
#include "distributed/dataparallel/dp_internal.h"
#include "paddlec/parallel.h"
#include "dist_ranks.h"
#include "test_util.h"

/* ---- bucket plans (no processes) ------------------------------------------ */
static void test_assign_buckets(void **state) {
  (void)state;
  /* limits [500, 1000] bytes. f32: p0 400 < 500, p1 -> 500 closes {0,1}
   * and f32 moves to 1000; f64: p2 800 >= 500 closes {2}; f32: p3 700,
   * p4 750, p6 2750 closes {3,4,6}; f64 {5} is left open and closes at the
   * end; sorted by first index. */
  pd_dtype dt[] = {PD_FLOAT32, PD_FLOAT32, PD_FLOAT64, PD_FLOAT32, PD_FLOAT32, PD_FLOAT64, PD_FLOAT32};
  size_t bytes[] = {400, 100, 800, 700, 50, 10, 2000};
  size_t limits[] = {500, 1000};
  int *starts, *members;
  int nb = pd_dp_assign_buckets(7, dt, bytes, limits, 2, &starts, &members);
  assert_int_equal(nb, 4);
  int want_starts[] = {0, 2, 3, 6, 7}, want_members[] = {0, 1, 2, 3, 4, 6, 5};
  assert_memory_equal(starts, want_starts, sizeof want_starts);
  assert_memory_equal(members, want_members, sizeof want_members);
  free(starts);
  free(members);
  /* a huge first parameter is alone; a limit of 0 puts every one alone */
  size_t big[] = {5000, 1, 1};
  pd_dtype f32[] = {PD_FLOAT32, PD_FLOAT32, PD_FLOAT32};
  nb = pd_dp_assign_buckets(3, f32, big, limits, 2, &starts, &members);
  assert_int_equal(nb, 2);
  assert_int_equal(starts[1], 1);
  free(starts);
  free(members);
  size_t zero[] = {0, 0};
  nb = pd_dp_assign_buckets(3, (pd_dtype[]){PD_FLOAT32, PD_FLOAT32, PD_FLOAT32}, big, zero, 2, &starts,
                            &members);
  assert_int_equal(nb, 3);
  free(starts);
  free(members);
  assert_true(pd_dp_assign_buckets(0, dt, bytes, limits, 2, &starts, &members) < 0);
}

static void test_build_groups(void **state) {
  (void)state;
  pd_tensor *ts[4] = {pd_zeros(1, SHAPE(10), PD_FLOAT32), pd_zeros(1, SHAPE(10), PD_FLOAT32),
                      pd_zeros(1, SHAPE(10), PD_FLOAT64), pd_zeros(1, SHAPE(10), PD_FLOAT64)};
  int *starts;
  /* 40 and 80 bytes: p1 joins (40 < 100), p2 changes dtype, p3 joins (80 < 100) */
  assert_int_equal(pd_dp_build_groups(ts, 4, 100, &starts), 2);
  assert_int_equal(starts[1], 2);
  free(starts);
  assert_int_equal(pd_dp_build_groups(ts, 4, 50, &starts), 3); /* p3 starts anew: 80 is not < 50 */
  assert_int_equal(starts[2], 3);
  free(starts);
  assert_int_equal(pd_dp_build_groups(ts, 4, 100, &starts), 2);
  assert_int_equal(starts[1], 2);
  free(starts);
  assert_int_equal(pd_dp_build_groups(ts, 4, 40, &starts), 4); /* counter 40 is not < 40 */
  free(starts);
  for (int i = 0; i < 4; i++) pd_tensor_release(ts[i]);
  expect_no_live_tensors();
}

/* ---- the autograd extension points ---------------------------------------- */
static int g_cb_calls;
static pd_status g_cb_seen;
static pd_status cb_ok(pd_status st, void *user) {
  g_cb_calls++;
  g_cb_seen = st;
  (void)user;
  return PD_OK;
}
static pd_status cb_fail(pd_status st, void *user) {
  (void)st, (void)user;
  g_cb_calls++;
  return pd_set_error(PD_ERR_COMM, "callback failed on purpose");
}
static void queue_from_hook(pd_tensor *leaf, void *user) {
  (void)leaf;
  pd_autograd_queue_callback((pd_autograd_callback_fn)user, NULL);
  pd_autograd_queue_callback((pd_autograd_callback_fn)user, NULL); /* runs twice */
}

static void test_queue_callback(void **state) {
  (void)state;
  pd_scope_begin();
  assert_int_equal(pd_autograd_queue_callback(cb_ok, NULL), PD_ERR_STATE); /* no backward running */
  assert_non_null(strstr(pd_last_error(), "no backward is running"));
  pd_tensor *w = T(PD_FLOAT32, 1, SHAPE(2), 1, 2);
  pd_tensor_set_stop_gradient(w, false);
  assert_true(pd_tensor_register_post_accumulate_hook(w, queue_from_hook, (void *)cb_ok) > 0);
  g_cb_calls = 0;
  g_cb_seen = PD_ERR_INVALID;
  assert_int_equal(pd_backward(pd_sum(pd_multiply(w, w), NULL, 0, false), NULL, false), PD_OK);
  assert_int_equal(g_cb_calls, 2);
  assert_int_equal(g_cb_seen, PD_OK);
  EXPECT_VALUES(pd_tensor_grad(w), 0, 2, 4);
  /* a failing callback fails the backward */
  pd_tensor *v = T(PD_FLOAT32, 1, SHAPE(2), 1, 2);
  pd_tensor_set_stop_gradient(v, false);
  assert_true(pd_tensor_register_post_accumulate_hook(v, queue_from_hook, (void *)cb_fail) > 0);
  g_cb_calls = 0;
  assert_int_equal(pd_backward(pd_sum(v, NULL, 0, false), NULL, false), PD_ERR_COMM);
  assert_int_equal(g_cb_calls, 2);
  assert_non_null(strstr(pd_last_error(), "callback failed on purpose"));
  /* the queue is empty again: a plain backward runs no callback */
  g_cb_calls = 0;
  pd_tensor *u = T(PD_FLOAT32, 1, SHAPE(2), 1, 2);
  pd_tensor_set_stop_gradient(u, false);
  assert_int_equal(pd_backward(pd_sum(u, NULL, 0, false), NULL, false), PD_OK);
  assert_int_equal(g_cb_calls, 0);
  pd_scope_end();
  expect_no_live_tensors();
}

static void count_leaf(pd_tensor *leaf, void *user) {
  pd_tensor **seen = user;
  for (int i = 0; i < 4; i++)
    if (!seen[i]) {
      seen[i] = leaf;
      return;
    }
}

static void test_visit_leaves(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *a = T(PD_FLOAT32, 1, SHAPE(2), 1, 2), *b = T(PD_FLOAT32, 1, SHAPE(2), 3, 4),
            *c = T(PD_FLOAT32, 1, SHAPE(2), 5, 6);
  pd_tensor_set_stop_gradient(a, false);
  pd_tensor_set_stop_gradient(b, false);
  pd_tensor_set_stop_gradient(c, false);
  pd_tensor *ab = pd_add(pd_multiply(a, b), a); /* a twice, b once, c never */
  pd_tensor *unrelated = pd_tanh(c);
  pd_tensor *seen[4] = {0};
  assert_int_equal(pd_autograd_visit_leaves(&ab, 1, count_leaf, seen), PD_OK);
  assert_true((seen[0] == a && seen[1] == b) || (seen[0] == b && seen[1] == a));
  assert_null(seen[2]);
  memset(seen, 0, sizeof seen);
  pd_tensor *roots[] = {unrelated, c}; /* c is reached twice (through tanh and as a root) */
  assert_int_equal(pd_autograd_visit_leaves(roots, 2, count_leaf, seen), PD_OK);
  assert_ptr_equal(seen[0], c);
  assert_null(seen[1]);
  pd_scope_end();
  expect_no_live_tensors();
}

/* ---- models and data -------------------------------------------------------- */
/* An MLP of Linear layers with tanh between them; optionally a second head
 * `c` that is used only when use_c is set (the branch that skips a layer). */
typedef struct net {
  pd_layer base;
  pd_layer *l[4];
  int nl;
  pd_layer *c;
  int use_c;
} net;

static int net_forward(pd_layer *self, pd_tensor *const *in, int n_in, pd_tensor **out, int max_out) {
  (void)n_in, (void)max_out;
  net *m = (net *)self;
  pd_tensor *h = in[0];
  for (int i = 0; i < m->nl; i++) {
    if (m->c && i == m->nl - 1) {
      pd_tensor *o = pd_layer_call1(m->l[i], h);
      out[0] = m->use_c ? pd_add(o, pd_layer_call1(m->c, h)) : o;
      return out[0] ? 1 : pd_last_status();
    }
    h = pd_layer_call1(m->l[i], h);
    if (i < m->nl - 1) h = pd_tanh(h);
  }
  out[0] = h;
  return h ? 1 : pd_last_status();
}
static const pd_layer_type net_type = {.name = "Net", .forward = net_forward};

/* sizes: 6 -> 8 -> 8 -> 4 -> 1, or with_c: 6 -> 4 -> {b: 1, c: 1} */
static net *net_new(uint64_t seed, bool with_c) {
  pd_seed(seed);
  net *m = pd_layer_new(sizeof *m, &net_type);
  static const int64_t dims[] = {6, 8, 8, 4, 1};
  char name[16];
  m->nl = with_c ? 2 : 4;
  for (int i = 0; i < m->nl; i++) {
    int64_t in = with_c ? (i == 0 ? 6 : 4) : dims[i], out = with_c ? (i == 0 ? 4 : 1) : dims[i + 1];
    snprintf(name, sizeof name, "l%d", i);
    m->l[i] = pd_layer_add_sublayer(&m->base, name, pd_nn_linear(in, out, NULL));
  }
  if (with_c) m->c = pd_layer_add_sublayer(&m->base, "c", pd_nn_linear(4, 1, NULL));
  return m;
}

static pd_tensor *batch_x(int step, int row0, int rows) {
  double *v = malloc((size_t)rows * 6 * sizeof *v);
  for (int i = 0; i < rows; i++)
    for (int j = 0; j < 6; j++) v[i * 6 + j] = sin(0.37 * (row0 + i + 1) + 0.11 * (j + 1) * (step + 1));
  pd_tensor *t = pd_tensor_from_f64(v, PD_FLOAT32, 2, SHAPE(rows, 6));
  free(v);
  return t;
}
static pd_tensor *batch_y(int step, int row0, int rows) {
  double *v = malloc((size_t)rows * sizeof *v);
  for (int i = 0; i < rows; i++) v[i] = cos(0.5 * (row0 + i) + step);
  pd_tensor *t = pd_tensor_from_f64(v, PD_FLOAT32, 2, SHAPE(rows, 1));
  free(v);
  return t;
}

/* loss = scale * mse(model(x), y) on rows [row0, row0 + rows) */
static pd_tensor *loss_of(pd_layer *model, int step, int row0, int rows, double scale) {
  pd_tensor *out = pd_layer_call1(model, batch_x(step, row0, rows));
  pd_tensor *l = pd_mse_loss(out, batch_y(step, row0, rows), PD_REDUCTION_MEAN);
  return scale == 1 ? l : pd_scale(l, scale, 0, true);
}

static pd_optimizer *sgd_of(pd_layer *model) {
  pd_named_tensors ps;
  if (pd_layer_parameters(model, &ps) != PD_OK) return NULL;
  pd_optimizer *o = pd_optimizer_sgd(0.1, ps.tensors, ps.n, NULL);
  pd_named_tensors_free(&ps);
  return o;
}

/* 0 when every parameter of a matches b within rtol (or bit for bit). */
static int compare_params(pd_layer *a, pd_layer *b, double rtol, const char *what) {
  pd_named_tensors pa, pb;
  pd_layer_named_parameters(a, &pa);
  pd_layer_named_parameters(b, &pb);
  int bad = pa.n != pb.n;
  for (int i = 0; i < pa.n && !bad; i++) {
    bad = strcmp(pa.names[i], pb.names[i]) != 0;
    for (int64_t k = 0; k < pd_tensor_numel(pa.tensors[i]) && !bad; k++) {
      double x = pd_tensor_item_at(pa.tensors[i], k), y = pd_tensor_item_at(pb.tensors[i], k);
      bad = rtol == 0 ? x != y : fabs(x - y) > rtol * fabs(y) + 1e-7;
      if (bad) fprintf(stderr, "%s: %s[%lld] = %.9g vs %.9g\n", what, pa.names[i], (long long)k, x, y);
    }
  }
  pd_named_tensors_free(&pa);
  pd_named_tensors_free(&pb);
  return bad;
}

#define CHECK(cond, code)                                                                           \
  do {                                                                                              \
    if (!(cond)) {                                                                                  \
      fprintf(stderr, "rank check failed at line %d: %s (%s)\n", __LINE__, #cond, pd_last_error()); \
      rc = (code);                                                                                  \
      goto done;                                                                                    \
    }                                                                                               \
  } while (0)

enum { B = 3, K = 4 };

/* ---- forked ranks ----------------------------------------------------------- */
static int call_rank(int rank, void *fn) { return ((int (*)(int))fn)(rank); }

static void run_two_ranks(int (*fn)(int rank)) {
  int codes[2];
  dist_run_ranks(2, call_rank, (void *)fn, 20, 60, codes);
  assert_int_equal(codes[0], 0);
  assert_int_equal(codes[1], 0);
}

/* A reference model and two DataParallel copies of it (same seed), each
 * with its SGD; trio_free releases whatever trio_new made. */
typedef struct trio {
  net *ref, *m, *m2;
  pd_layer *dp, *dp2;
  pd_optimizer *o_ref, *o, *o2;
} trio;

static bool trio_new(trio *t, uint64_t seed, bool with_c, const pd_data_parallel_opts *opts,
                     const pd_data_parallel_opts *opts2) {
  t->ref = net_new(seed, with_c);
  t->m = net_new(seed, with_c);
  t->m2 = net_new(seed, with_c);
  t->dp = pd_data_parallel(&t->m->base, opts);
  t->dp2 = pd_data_parallel(&t->m2->base, opts2);
  t->o_ref = sgd_of(&t->ref->base);
  t->o = t->dp ? sgd_of(t->dp) : NULL;
  t->o2 = t->dp2 ? sgd_of(t->dp2) : NULL;
  return t->o_ref && t->o && t->o2;
}

static void trio_free(trio *t) {
  pd_optimizer_release(t->o_ref);
  pd_optimizer_release(t->o);
  pd_optimizer_release(t->o2);
  pd_layer_release(t->dp);
  pd_layer_release(t->dp2);
  pd_layer_release(&t->ref->base);
  pd_layer_release(&t->m->base);
  pd_layer_release(&t->m2->base);
}

/* 0 when a fresh net (seed 7) under DataParallel(opts) plans n buckets,
 * bucket k (reducer order) holding want_n[k] parameters from index
 * want_first[k] on, want_numel[k] float32 elements in all. */
static int check_layout(const pd_data_parallel_opts *opts, int n, const int *want_n, const int *want_first,
                        const int64_t *want_numel) {
  net *probe = net_new(7, false);
  pd_layer *dp = pd_data_parallel(&probe->base, opts);
  pd_dp_reducer *red = dp ? pd_data_parallel_reducer(dp) : NULL;
  int bad = !red || pd_dp_reducer_num_buckets(red) != n;
  for (int k = 0; k < n && !bad; k++) {
    pd_dp_bucket_info bi = pd_dp_reducer_bucket(red, k);
    bad = bi.dtype != PD_FLOAT32 || bi.n_params != want_n[k] || bi.params[0] != want_first[k] ||
          bi.numel != want_numel[k];
    if (bad)
      fprintf(stderr, "bucket %d: %d params from %d, %lld elements\n", k, bi.n_params, bi.params[0],
              (long long)bi.numel);
  }
  pd_layer_release(dp);
  pd_layer_release(&probe->base);
  return bad;
}

/* K steps of DP on rows [rank * B, rank * B + B) against one process on
 * all 2B rows; parameters match to 1e-5; a rerun is bit-identical. */
static int train_dp(int rank, const pd_data_parallel_opts *opts, pd_layer **out_inner) {
  /* rank 1 starts from other weights: the broadcast must replace them */
  net *m = net_new(rank == 0 ? 7 : 99, false);
  pd_layer *dp = pd_data_parallel(&m->base, opts);
  pd_optimizer *opt = dp ? sgd_of(dp) : NULL;
  int rc = 0;
  CHECK(dp && opt, 1);
  for (int s = 0; s < K; s++) {
    pd_scope_begin();
    pd_status st = pd_backward(loss_of(dp, s, rank * B, B, 1), NULL, false);
    if (st == PD_OK) st = pd_optimizer_step(opt);
    pd_optimizer_clear_grad(opt, true);
    pd_scope_end();
    CHECK(st == PD_OK, 2);
  }
done:
  pd_optimizer_release(opt);
  pd_layer_release(dp);
  *out_inner = &m->base;
  return rc;
}

static int reference_run(pd_layer **out) {
  net *ref = net_new(7, false);
  pd_optimizer *opt = sgd_of(&ref->base);
  int rc = 0;
  for (int s = 0; s < K; s++) {
    pd_scope_begin();
    pd_status st = pd_backward(loss_of(&ref->base, s, 0, 2 * B, 1), NULL, false);
    if (st == PD_OK) st = pd_optimizer_step(opt);
    pd_optimizer_clear_grad(opt, true);
    pd_scope_end();
    if (st != PD_OK) rc = 3;
  }
  pd_optimizer_release(opt);
  *out = &ref->base;
  return rc;
}

static int rank_equivalence(int rank) {
  /* last 0.0002 MB = 209 bytes, comm 0.0003 MB = 314 bytes: assigned
   * {l0.w 192 B, l0.b 32 B} | {l1.w 256, l1.b 32, l2.w 128} | {l2.b, l3.w,
   * l3.b}: launched in reverse */
  pd_data_parallel_opts small = {.comm_buffer_size = 0.0003, .last_comm_buffer_size = 0.0002};
  pd_layer *ref = NULL, *a = NULL, *b = NULL, *c = NULL;
  int rc = reference_run(&ref);
  CHECK(rc == 0, 3);
  CHECK(check_layout(&small, 3, (int[]){3, 3, 2}, (int[]){5, 2, 0},
                     (int64_t[]){4 + 4 + 1, 64 + 8 + 32, 48 + 8}) == 0,
        4);
  CHECK(train_dp(rank, &small, &a) == 0, 6);
  CHECK(compare_params(a, ref, 1e-5, "several buckets vs one process") == 0, 7);
  CHECK(train_dp(rank, &small, &b) == 0, 8);
  CHECK(compare_params(b, a, 0, "rerun") == 0, 9);
  CHECK(train_dp(rank, NULL, &c) == 0, 10); /* default sizes: one bucket */
  CHECK(compare_params(c, ref, 1e-5, "default buckets vs one process") == 0, 11);
  CHECK(check_layout(NULL, 1, (int[]){8}, (int[]){0}, (int64_t[]){48 + 8 + 64 + 8 + 32 + 4 + 4 + 1}) == 0,
        12);
done:
  pd_layer_release(ref);
  pd_layer_release(a);
  pd_layer_release(b);
  pd_layer_release(c);
  return rc;
}

static void test_equivalence_two_ranks(void **state) {
  (void)state;
  run_two_ranks(rank_equivalence);
}

/* k = 3 micro-batches under no_sync + 1 synchronised one (losses scaled by
 * 1/4) equal one step on the 4x larger batch; deferred launch too. */
static int rank_no_sync(int rank) {
  int rc = 0;
  trio t;
  CHECK(trio_new(&t, 5, false,
                 &(pd_data_parallel_opts){.comm_buffer_size = 0.0003, .last_comm_buffer_size = 0.0002},
                 &(pd_data_parallel_opts){.defer_all_reduce = true}),
        1);
  net *ref = t.ref, *m = t.m, *m2 = t.m2;
  pd_layer *dp = t.dp, *dp2 = t.dp2;
  pd_optimizer *o_ref = t.o_ref, *o = t.o, *o2 = t.o2;
  for (int s = 0; s < 2; s++) {
    /* reference: rows 0..8B-1 of step s; micro-batch j of rank r takes
     * rows (2j + r) B .. (2j + r + 1) B - 1 */
    CHECK(pd_backward(loss_of(&ref->base, s, 0, 8 * B, 1), NULL, false) == PD_OK, 2);
    CHECK(pd_optimizer_step(o_ref) == PD_OK, 2);
    pd_optimizer_clear_grad(o_ref, true);
    pd_layer *dps[2] = {dp, dp2};
    pd_optimizer *os[2] = {o, o2};
    for (int v = 0; v < 2; v++) {
      CHECK(pd_data_parallel_no_sync_begin(dps[v]) == PD_OK, 3);
      for (int j = 0; j < 3; j++)
        CHECK(pd_backward(loss_of(dps[v], s, (2 * j + rank) * B, B, 0.25), NULL, false) == PD_OK, 4);
      CHECK(pd_data_parallel_no_sync_end(dps[v]) == PD_OK, 3);
      CHECK(pd_backward(loss_of(dps[v], s, (6 + rank) * B, B, 0.25), NULL, false) == PD_OK, 5);
      CHECK(pd_optimizer_step(os[v]) == PD_OK, 6);
      pd_optimizer_clear_grad(os[v], s == 0); /* drop the grads once: new tensors get bound again */
    }
  }
  CHECK(compare_params(&m->base, &ref->base, 1e-5, "no_sync") == 0, 7);
  CHECK(compare_params(&m2->base, &ref->base, 1e-5, "no_sync, deferred") == 0, 8);
  CHECK(pd_data_parallel_no_sync_end(dp) == PD_ERR_STATE, 9);
  CHECK(pd_data_parallel_no_sync_begin(&ref->base) == PD_ERR_INVALID, 9);
done:
  trio_free(&t);
  return rc;
}

static void test_no_sync_two_ranks(void **state) {
  (void)state;
  run_two_ranks(rank_no_sync);
}

/* Head c is skipped at odd steps by every rank, and at step 2 only by
 * rank 1 (so rank 1 must receive rank 0's averaged gradient). */
static bool uses_c(int step, int rank) { return step % 2 == 0 && !(step == 2 && rank == 1); }

static int rank_unused(int rank) {
  int rc = 0;
  trio t;
  CHECK(trio_new(&t, 11, true,
                 &(pd_data_parallel_opts){.find_unused_parameters = true,
                                          .comm_buffer_size = 0.00005,
                                          .last_comm_buffer_size = 0.00005},
                 NULL),
        1);
  net *ref = t.ref, *m = t.m, *m2 = t.m2;
  pd_layer *dp = t.dp, *dp2 = t.dp2;
  pd_optimizer *o_ref = t.o_ref, *o = t.o;
  for (int s = 0; s < 4; s++) {
    pd_scope_begin();
    /* reference: the mean of the two halves, each with its rank's branch */
    pd_tensor *halves[2];
    for (int r = 0; r < 2; r++) {
      ref->use_c = uses_c(s, r);
      halves[r] = loss_of(&ref->base, s, r * B, B, 0.5);
    }
    pd_status st = pd_backward(pd_add(halves[0], halves[1]), NULL, false);
    if (st == PD_OK) st = pd_optimizer_step(o_ref);
    pd_optimizer_clear_grad(o_ref, false);
    m->use_c = uses_c(s, rank);
    if (st == PD_OK) st = pd_backward(loss_of(dp, s, rank * B, B, 1), NULL, false);
    if (st == PD_OK && !uses_c(s, rank) && s == 2)
      st = pd_tensor_grad(pd_layer_parameter(m->c, "weight")) ? PD_OK : PD_ERR_STATE;
    if (st == PD_OK) st = pd_optimizer_step(o);
    pd_optimizer_clear_grad(o, false);
    pd_scope_end();
    CHECK(st == PD_OK, 2);
  }
  CHECK(compare_params(&m->base, &ref->base, 1e-5, "find_unused_parameters") == 0, 3);
  /* without the flag: step 0 uses c; step 1 does not -> a clear error on
   * every rank, no hang; then a step that uses c works again */
  m2->use_c = 1;
  CHECK(pd_backward(loss_of(dp2, 0, rank * B, B, 1), NULL, false) == PD_OK, 4);
  m2->use_c = 0;
  CHECK(pd_backward(loss_of(dp2, 1, rank * B, B, 1), NULL, false) == PD_ERR_STATE, 5);
  CHECK(strstr(pd_last_error(), "'c.weight'") && strstr(pd_last_error(), "'c.bias'") &&
            strstr(pd_last_error(), "find_unused_parameters=true"),
        6);
  m2->use_c = 1;
  CHECK(pd_backward(loss_of(dp2, 2, rank * B, B, 1), NULL, false) == PD_OK, 7);
done:
  trio_free(&t);
  return rc;
}

static void test_unused_parameters_two_ranks(void **state) {
  (void)state;
  run_two_ranks(rank_unused);
}

/* Rank 0 saves the wrapper's state_dict after 3 of 6 steps; new models load
 * it and continue: the losses are those of the uninterrupted run, bit for
 * bit. The file also loads into the plain model (no prefix). */
static char g_ckpt[128];

static int steps(pd_layer *dp, pd_optimizer *o, int rank, int from, int to, double *losses) {
  for (int s = from; s < to; s++) {
    pd_scope_begin();
    pd_tensor *l = loss_of(dp, s, rank * B, B, 1);
    pd_status st = l ? pd_backward(l, NULL, false) : pd_last_status();
    if (st == PD_OK) {
      losses[s] = pd_tensor_item(l);
      st = pd_optimizer_step(o);
    }
    pd_optimizer_clear_grad(o, true);
    pd_scope_end();
    if (st != PD_OK) return 1;
  }
  return 0;
}

static int rank_resume(int rank) {
  int rc = 0;
  double full[6], resumed[6];
  net *m = net_new(3, false), *m2 = net_new(3, false), *m3 = NULL, *plain = NULL;
  pd_layer *dp = pd_data_parallel(&m->base, NULL), *dp2 = pd_data_parallel(&m2->base, NULL), *dp3 = NULL;
  pd_optimizer *o = sgd_of(dp), *o2 = sgd_of(dp2), *o3 = NULL;
  pd_named_tensors sd = {0}, loaded = {0}, missing = {0}, unexpected = {0};
  CHECK(dp && dp2 && o && o2, 1);
  CHECK(steps(dp, o, rank, 0, 6, full) == 0, 2);
  CHECK(steps(dp2, o2, rank, 0, 3, resumed) == 0, 3);
  if (rank == 0) {
    CHECK(pd_layer_state_dict(dp2, &sd) == PD_OK && sd.n == 8 && strcmp(sd.names[0], "l0.weight") == 0, 4);
    CHECK(pd_save(&sd, g_ckpt) == PD_OK, 5);
  }
  CHECK(pd_dist_barrier(NULL) == PD_OK, 6);
  /* every rank loads into a new, differently initialised model */
  m3 = net_new(1234 + (uint64_t)rank, false);
  dp3 = pd_data_parallel(&m3->base, NULL);
  o3 = sgd_of(dp3);
  CHECK(dp3 && o3 && pd_load(g_ckpt, &loaded) == PD_OK, 7);
  CHECK(pd_layer_set_state_dict(dp3, &loaded, &missing, &unexpected) == PD_OK && missing.n == 0 &&
            unexpected.n == 0,
        8);
  pd_named_tensors_free(&missing);
  pd_named_tensors_free(&unexpected);
  CHECK(steps(dp3, o3, rank, 3, 6, resumed) == 0, 9);
  for (int s = 0; s < 6; s++) CHECK(full[s] == resumed[s], 10);
  /* the checkpoint is the single-process model's */
  plain = net_new(77, false);
  CHECK(pd_layer_set_state_dict(&plain->base, &loaded, &missing, &unexpected) == PD_OK && missing.n == 0 &&
            unexpected.n == 0,
        11);
  CHECK(pd_dist_barrier(NULL) == PD_OK, 12);
  if (rank == 0) unlink(g_ckpt);
done:
  pd_named_tensors_free(&missing);
  pd_named_tensors_free(&unexpected);
  pd_named_tensors_free(&sd);
  pd_state_free(&loaded);
  pd_optimizer_release(o);
  pd_optimizer_release(o2);
  pd_optimizer_release(o3);
  pd_layer_release(dp);
  pd_layer_release(dp2);
  pd_layer_release(dp3);
  pd_layer_release(&m->base);
  pd_layer_release(&m2->base);
  if (m3) pd_layer_release(&m3->base);
  if (plain) pd_layer_release(&plain->base);
  return rc;
}

static void test_resume_two_ranks(void **state) {
  (void)state;
  snprintf(g_ckpt, sizeof g_ckpt, "/tmp/paddlec_dp_ckpt_%d.pdparams", (int)getpid());
  run_two_ranks(rank_resume);
}

/* Ranks that wrap different models fail together with an error naming the
 * first entry that differs, instead of a broadcast overwriting a differently
 * shaped weight or failing on its element count. */
static int rank_different_models(int rank) {
  int rc = 0;
  /* same entries, the weight transposed on rank 1: [2, 4] against [4, 2] */
  pd_layer *a = pd_nn_linear(rank == 0 ? 2 : 4, rank == 0 ? 4 : 2, &(pd_nn_linear_opts){.no_bias = true});
  /* one entry fewer on rank 1 */
  pd_layer *b = pd_nn_linear(3, 3, &(pd_nn_linear_opts){.no_bias = rank == 1});
  pd_layer *c = pd_nn_linear(3, 3, NULL), *dp = NULL;
  CHECK(!pd_data_parallel(a, NULL) && pd_last_status() == PD_ERR_INVALID, 1);
  CHECK(strstr(pd_last_error(), "entry 0, 'weight'") &&
            strstr(pd_last_error(),
                   rank == 0 ? "float32 [2, 4] on this rank" : "float32 [4, 2] on this rank") &&
            strstr(pd_last_error(), rank == 0 ? "on another rank" : "from rank 0's"),
        2);
  CHECK(!pd_data_parallel(b, NULL) && strstr(pd_last_error(), "between 1 and 2 parameters and buffers"), 3);
  /* the ranks are still in step: a matching model works */
  CHECK((dp = pd_data_parallel(c, NULL)) != NULL, 4);
done:
  pd_layer_release(dp);
  pd_layer_release(a);
  pd_layer_release(b);
  pd_layer_release(c);
  return rc;
}

static void test_different_models_two_ranks(void **state) {
  (void)state;
  run_two_ranks(rank_different_models);
}

/* fused_allreduce_gradients averages the grads; a parameter without one is
 * skipped. */
static int rank_fused(int rank) {
  int rc = 0;
  pd_tensor *a = pd_zeros(1, SHAPE(3), PD_FLOAT32), *b = pd_zeros(2, SHAPE(2, 2), PD_FLOAT64),
            *c = pd_zeros(1, SHAPE(2), PD_FLOAT32);
  pd_tensor_set_stop_gradient(a, false);
  pd_tensor_set_stop_gradient(b, false);
  pd_tensor_set_stop_gradient(c, false);
  pd_tensor_set_grad(a, pd_full(1, SHAPE(3), rank == 0 ? 1 : 3, PD_FLOAT32));
  pd_tensor_set_grad(b, pd_full(2, SHAPE(2, 2), rank == 0 ? 10 : 20, PD_FLOAT64));
  pd_tensor *ps[] = {a, b, c};
  CHECK(pd_fleet_utils_fused_allreduce_gradients(ps, 3, NULL) == PD_OK, 1);
  CHECK(pd_tensor_item_at(pd_tensor_grad(a), 2) == 2 && pd_tensor_item_at(pd_tensor_grad(b), 3) == 15 &&
            !pd_tensor_grad(c),
        2);
done:
  return rc;
}

static void test_fused_allreduce_two_ranks(void **state) {
  (void)state;
  run_two_ranks(rank_fused);
}

/* One rank: a pass-through with the inner names. */
static void test_one_rank_pass_through(void **state) {
  (void)state;
  unsetenv("PADDLE_TRAINERS_NUM");
  unsetenv("PADDLE_TRAINER_ID");
  net *m = net_new(7, false);
  pd_layer *dp = pd_data_parallel(&m->base, NULL);
  assert_non_null(dp);
  assert_ptr_equal(pd_data_parallel_layers(dp), &m->base);
  assert_null(pd_data_parallel_reducer(dp));
  pd_named_tensors a, b;
  assert_int_equal(pd_layer_named_parameters(dp, &a), PD_OK);
  assert_int_equal(pd_layer_named_parameters(&m->base, &b), PD_OK);
  assert_int_equal(a.n, b.n);
  for (int i = 0; i < a.n; i++) {
    assert_string_equal(a.names[i], b.names[i]);
    assert_ptr_equal(a.tensors[i], b.tensors[i]);
  }
  pd_named_tensors_free(&a);
  pd_named_tensors_free(&b);
  pd_scope_begin();
  pd_tensor *x = batch_x(0, 0, 2);
  pd_tensor *y1 = pd_layer_call1(dp, x), *y2 = pd_layer_call1(&m->base, x);
  expect_close(y1, y2, 0, 0);
  pd_scope_end();
  assert_null(pd_data_parallel_layers(&m->base));
  assert_non_null(strstr(pd_last_error(), "not a DataParallel layer"));
  assert_null(pd_data_parallel(NULL, NULL));
  /* bad bucket sizes fail on one rank as they would on several */
  static const double bad[][2] = {{NAN, 1}, {25, -1}, {1e300, 1}, {25, INFINITY}};
  for (int i = 0; i < 4; i++) {
    pd_data_parallel_opts o = {.comm_buffer_size = bad[i][0], .last_comm_buffer_size = bad[i][1]};
    assert_null(pd_data_parallel(&m->base, &o));
    assert_non_null(strstr(pd_last_error(), "comm_buffer_size"));
    assert_non_null(strstr(pd_last_error(), "must be in (0, 1.04858e+06] MB"));
  }
  pd_clear_error();
  pd_layer_release(dp);
  pd_layer_release(&m->base);
  expect_no_live_tensors();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_assign_buckets),
      cmocka_unit_test(test_build_groups),
      cmocka_unit_test(test_queue_callback),
      cmocka_unit_test(test_visit_leaves),
      cmocka_unit_test(test_one_rank_pass_through),
      cmocka_unit_test(test_equivalence_two_ranks),
      cmocka_unit_test(test_no_sync_two_ranks),
      cmocka_unit_test(test_unused_parameters_two_ranks),
      cmocka_unit_test(test_resume_two_ranks),
      cmocka_unit_test(test_fused_allreduce_two_ranks),
      cmocka_unit_test(test_different_models_two_ranks),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
