/* auto_parallel in eager mode: ProcessMesh and its sub-meshes, placement
 * checks, every reshard transition on 1-d and 2-d meshes (float32 and
 * int64, even and uneven shards, element-exact), a move to another mesh,
 * matmul in every transpose case sharded against dense (forward and
 * backward), and seed 000's DemoNet trained on 2 processes against one. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/tensor_impl.h"
#include "dist_ranks.h"
#include "paddlec/auto_parallel.h"
#include "test_util.h"

static void expect_msg(const char *frag) {
  if (!strstr(pd_last_error(), frag)) fail_msg("error '%s' lacks '%s'", pd_last_error(), frag);
}

/* ---- ProcessMesh --------------------------------------------------------- */
static void test_mesh(void **state) {
  (void)state;
  const char *names[] = {"x", "y"};
  pd_dist_process_mesh *m = pd_dist_process_mesh_new(2, SHAPE(2, 3), (const int[]){0, 1, 2, 3, 4, 5}, names);
  assert_non_null(m);
  assert_int_equal(pd_dist_process_mesh_ndim(m), 2);
  assert_int_equal(pd_dist_process_mesh_size(m), 6);
  assert_int_equal(pd_dist_process_mesh_shape(m)[1], 3);
  assert_string_equal(pd_dist_process_mesh_dim_name(m, 1), "y");
  assert_int_equal(pd_dist_process_mesh_get_dim_size(m, "y"), 3);
  assert_int_equal(pd_dist_process_mesh_get_dim_size(m, "z"), -1);
  expect_msg("no dim named 'z'");
  assert_int_equal(pd_dist_process_mesh_get_rank_by_dim_and_process_id(m, "y", 4), 1);
  assert_int_equal(pd_dist_process_mesh_get_rank_by_dim_and_process_id(m, "x", 4), 1);

  pd_dist_process_mesh *col = pd_dist_process_mesh_get_mesh_with_dim(m, "y", 1);
  assert_non_null(col);
  assert_int_equal(pd_dist_process_mesh_ndim(col), 1);
  assert_int_equal(pd_dist_process_mesh_process_ids(col)[0], 1);
  assert_int_equal(pd_dist_process_mesh_process_ids(col)[1], 4);
  assert_string_equal(pd_dist_process_mesh_dim_name(col, 0), "x");
  pd_dist_process_mesh *row = pd_dist_process_mesh_index(m, -1);
  assert_int_equal(pd_dist_process_mesh_size(row), 3);
  assert_int_equal(pd_dist_process_mesh_process_ids(row)[2], 5);
  assert_string_equal(pd_dist_process_mesh_dim_name(row, 0), "y");
  pd_dist_process_mesh *one = pd_dist_process_mesh_index(row, 1);
  assert_int_equal(pd_dist_process_mesh_size(one), 1);
  assert_int_equal(pd_dist_process_mesh_process_ids(one)[0], 4);
  assert_string_equal(pd_dist_process_mesh_dim_name(one, 0), "d0");
  assert_null(pd_dist_process_mesh_index(row, 3));
  expect_msg("index 3 is out of range");

  /* equality: shape and ids, names ignored */
  pd_dist_process_mesh *same =
      pd_dist_process_mesh_new(2, SHAPE(2, 3), (const int[]){0, 1, 2, 3, 4, 5}, NULL);
  pd_dist_process_mesh *flat = pd_dist_process_mesh_new(1, SHAPE(6), (const int[]){0, 1, 2, 3, 4, 5}, NULL);
  pd_dist_process_mesh *other =
      pd_dist_process_mesh_new(2, SHAPE(2, 3), (const int[]){5, 1, 2, 3, 4, 0}, NULL);
  assert_string_equal(pd_dist_process_mesh_dim_name(same, 1), "d1");
  assert_true(pd_dist_process_mesh_equal(m, same));
  assert_false(pd_dist_process_mesh_equal(m, flat));
  assert_false(pd_dist_process_mesh_equal(m, other));
  assert_true(pd_dist_process_mesh_contains(m, 5));
  assert_false(pd_dist_process_mesh_contains(m, 6));

  /* bad meshes name the value */
  assert_null(pd_dist_process_mesh_new(1, SHAPE(3), (const int[]){0, 1, 1}, NULL));
  expect_msg("process id 1 appears twice");
  assert_null(pd_dist_process_mesh_new(1, SHAPE(2), (const int[]){0, -2}, NULL));
  expect_msg("process id -2");
  assert_null(pd_dist_process_mesh_new(2, SHAPE(1, 2), (const int[]){0, 1}, (const char *[]){"a", "a"}));
  expect_msg("'a' is used twice");
  assert_null(pd_dist_process_mesh_new(1, SHAPE(0), (const int[]){0}, NULL));
  expect_msg("size 0");
  for (pd_dist_process_mesh **p = (pd_dist_process_mesh *[]){m, col, row, one, same, flat, other, NULL}; *p;
       p++)
    pd_dist_process_mesh_release(*p);
}

/* ---- placements on one process ----------------------------------------- */
static void test_placement_errors(void **state) {
  (void)state;
  pd_dist_process_mesh *m = pd_dist_process_mesh_new(1, SHAPE(1), (const int[]){0}, NULL);
  pd_dist_process_mesh *m2 = pd_dist_process_mesh_new(2, SHAPE(1, 1), (const int[]){0}, NULL);
  pd_tensor *x = pd_arange(0, 6, 1, PD_FLOAT32);
  pd_dist_placement two[2] = {pd_dist_shard(0), pd_dist_replicate()};
  assert_null(pd_dist_shard_tensor(x, m, two, 2));
  expect_msg("2 placements for mesh");
  assert_null(pd_dist_shard_tensor(x, m, (pd_dist_placement[]){pd_dist_shard(1)}, 1));
  expect_msg("Shard(dim=1), out of range for a tensor of rank 1");
  assert_null(pd_dist_shard_tensor(x, m2, (pd_dist_placement[]){pd_dist_shard(0), pd_dist_shard(0)}, 2));
  expect_msg("both shard tensor dim 0");
  assert_null(pd_dist_dtensor_from_local(x, NULL, two, 1));
  expect_msg("mesh is NULL");

  /* a one-process mesh: the DTensor is the whole value; ops run */
  pd_tensor *d = pd_dist_shard_tensor(x, m, (pd_dist_placement[]){pd_dist_shard(0)}, 1);
  assert_non_null(d);
  assert_true(pd_dist_is_dist(d));
  assert_false(pd_dist_is_dist(x));
  pd_dist_placement p[4];
  assert_int_equal(pd_dist_placements(d, p, 4), 1);
  assert_int_equal(p[0].kind, PD_DIST_SHARD);
  assert_ptr_equal(pd_dist_process_mesh_of(d), m);
  int64_t gs[PD_MAX_DIMS];
  assert_int_equal(pd_dist_global_shape(d, gs), 1);
  assert_int_equal(gs[0], 6);
  pd_tensor *e = pd_exp(d);
  assert_true(pd_dist_is_dist(e));
  pd_tensor *u = pd_dist_unshard_dtensor(e);
  assert_false(pd_dist_is_dist(u));
  pd_tensor *ref = pd_exp(x);
  expect_close(u, ref, 0, 0);
  /* two meshes in one op */
  pd_dist_process_mesh *mb = pd_dist_process_mesh_new(1, SHAPE(1), (const int[]){1}, NULL);
  pd_tensor *db = pd_dist_dtensor_from_local(x, mb, (pd_dist_placement[]){pd_dist_replicate()}, 1);
  assert_null(pd_add(d, db));
  expect_msg("input 0 is on mesh");
  pd_tensor *ts[] = {x, d, e, u, ref, db};
  for (int i = 0; i < 6; i++) pd_tensor_release(ts[i]);
  pd_dist_process_mesh_release(m);
  pd_dist_process_mesh_release(m2);
  pd_dist_process_mesh_release(mb);
  pd_clear_error();
}

/* ---- forked ranks -------------------------------------------------------- */
static void run_ranks(int n, int (*fn)(int rank)) { dist_run_ranks_or_fail(n, fn, 120); }

/* The helpers below run inside a scope (each rank's, or a check's): the
 * tensors they make are released when it ends. */
/* Element-exact equality (values read as float64). */
static bool same_values(pd_tensor *a, pd_tensor *b) {
  if (!a || !b || a->ndim != b->ndim || !pd_shape_eq(a->ndim, a->shape, b->shape)) return false;
  pd_tensor *fa = pd_cast(a, PD_FLOAT64), *fb = pd_cast(b, PD_FLOAT64);
  pd_tensor *ca = pd_contiguous(fa), *cb = pd_contiguous(fb);
  return ca && cb && memcmp(pd_tensor_data(ca), pd_tensor_data(cb), (size_t)ca->numel * 8) == 0;
}

static bool close_values(pd_tensor *a, pd_tensor *b, double tol) {
  if (!a || !b || a->ndim != b->ndim || !pd_shape_eq(a->ndim, a->shape, b->shape)) return false;
  pd_tensor *fa = pd_cast(a, PD_FLOAT64), *fb = pd_cast(b, PD_FLOAT64);
  pd_tensor *ca = pd_contiguous(fa), *cb = pd_contiguous(fb);
  bool ok = ca && cb;
  for (int64_t i = 0; ok && i < ca->numel; i++) {
    double x = ((double *)pd_tensor_data(ca))[i], y = ((double *)pd_tensor_data(cb))[i];
    ok = fabs(x - y) <= tol * (1 + fabs(y));
  }
  return ok;
}

/* A global tensor known on every rank: 1 + i * 7 mod 97. */
static pd_tensor *global_value(int ndim, const int64_t *shape, pd_dtype dt) {
  int64_t n = 1;
  for (int d = 0; d < ndim; d++) n *= shape[d];
  double *v = malloc((size_t)n * sizeof *v);
  for (int64_t i = 0; i < n; i++) v[i] = (double)(1 + (i * 7) % 97);
  pd_tensor *t = pd_tensor_from_f64(v, dt, ndim, shape);
  free(v);
  return t;
}

/* What this rank's shard of g under placements p on mesh must hold:
 * Shard slices (Paddle's uneven split), Replicate and Partial the whole. */
static pd_tensor *expected_local(pd_tensor *g, pd_dist_process_mesh *m, const pd_dist_placement *p,
                                 int rank) {
  pd_tensor *x = g;
  const int *ids = pd_dist_process_mesh_process_ids(m);
  const int64_t *ms = pd_dist_process_mesh_shape(m);
  int nd = pd_dist_process_mesh_ndim(m);
  int64_t idx = -1, co[4];
  for (int64_t i = 0; i < pd_dist_process_mesh_size(m); i++)
    if (ids[i] == rank) idx = i;
  if (idx < 0) return pd_zeros(1, SHAPE(0), g->dtype);
  for (int d = nd - 1; d >= 0; d--) {
    co[d] = idx % ms[d];
    idx /= ms[d];
  }
  for (int a = 0; a < nd; a++) {
    if (p[a].kind != PD_DIST_SHARD) continue;
    int64_t G = g->shape[p[a].dim], chunk = (G + ms[a] - 1) / ms[a], s = co[a] * chunk;
    if (s > G) s = G;
    int64_t e = s + chunk > G ? G : s + chunk;
    x = pd_slice(x, 1, (const int64_t[]){p[a].dim}, (const int64_t[]){s}, (const int64_t[]){e});
  }
  return x;
}

static const char *pname(pd_dist_placement p, char *buf) {
  if (p.kind == PD_DIST_SHARD)
    sprintf(buf, "S%d", p.dim);
  else if (p.kind == PD_DIST_PARTIAL)
    sprintf(buf, "P%d", (int)p.reduce_type);
  else
    sprintf(buf, "R");
  return buf;
}

/* shard_tensor(g, src) then reshard to dst: dst's local shard (Partial: the
 * unsharded value) and the unsharded value equal g exactly. */
static int check_transition(int rank, pd_dist_process_mesh *m, pd_dist_process_mesh *m2, pd_tensor *g,
                            const pd_dist_placement *src, const pd_dist_placement *dst) {
  int n = pd_dist_process_mesh_ndim(m), n2 = pd_dist_process_mesh_ndim(m2);
  char b[4][16];
  pd_scope_begin();
  int rc = 0;
  pd_tensor *x = pd_dist_shard_tensor(g, m, src, n);
  pd_tensor *y = x ? pd_dist_reshard(x, m2, dst, n2) : NULL;
  pd_tensor *u = y ? pd_dist_unshard_dtensor(y) : NULL;
  bool partial = false;
  for (int a = 0; a < n2; a++) partial |= dst[a].kind == PD_DIST_PARTIAL;
  pd_tensor *want = expected_local(g, m2, dst, rank);
  pd_tensor *loc = y ? pd_dist_local_value(y) : NULL;
  bool in_m2 = pd_dist_process_mesh_contains(m2, rank);
  if (!u || (in_m2 && !same_values(u, g)) || (!partial && !same_values(loc, want))) {
    fprintf(stderr, "rank %d: %s %s [%s%s%s -> %s%s%s] of shape [%lld, %lld] failed: %s\n", rank,
            pd_dtype_name(g->dtype), m == m2 ? "same mesh" : "to another mesh", pname(src[0], b[0]),
            n > 1 ? "," : "", n > 1 ? pname(src[1], b[1]) : "", pname(dst[0], b[2]), n2 > 1 ? "," : "",
            n2 > 1 ? pname(dst[1], b[3]) : "", (long long)g->shape[0], (long long)g->shape[1],
            u ? "wrong values" : pd_last_error());
    rc = 1;
  }
  pd_scope_end();
  return rc;
}

static const pd_dist_placement k_kinds[] = {{PD_DIST_REPLICATE, 0, PD_REDUCE_SUM},
                                            {PD_DIST_SHARD, 0, PD_REDUCE_SUM},
                                            {PD_DIST_SHARD, 1, PD_REDUCE_SUM},
                                            {PD_DIST_PARTIAL, 0, PD_REDUCE_SUM},
                                            {PD_DIST_PARTIAL, 0, PD_REDUCE_MAX}};
enum { NKINDS = 5 };

/* Every pair of placements on a 1-d mesh of 2 (S->R, R->S, P->R, P->S,
 * R->P, S->P, S(i)->S(j), P(sum)->P(max)...), even and uneven, float32 and
 * int64. */
static int rank_transitions_1d(int rank) {
  pd_dist_process_mesh *m = pd_dist_process_mesh_new(1, SHAPE(2), (const int[]){0, 1}, NULL);
  int rc = 0;
  /* the last two move through several staging chunks (rows of a dim-1
   * shard cross chunk boundaries), one even, one uneven */
  const int64_t shapes[][2] = {{4, 6}, {5, 3}, {1, 3}, {64, 1030}, {67, 1031}};
  const pd_dtype dts[] = {PD_FLOAT32, PD_INT64};
  for (int s = 0; s < 5; s++)
    for (int t = 0; t < 2; t++) {
      pd_tensor *g = global_value(2, shapes[s], dts[t]);
      for (int i = 0; i < NKINDS; i++)
        for (int j = 0; j < NKINDS; j++) rc |= check_transition(rank, m, m, g, &k_kinds[i], &k_kinds[j]);
    }
  /* onto another mesh of the same shape: ranks swapped */
  pd_dist_process_mesh *sw = pd_dist_process_mesh_new(1, SHAPE(2), (const int[]){1, 0}, NULL);
  pd_tensor *g = global_value(2, SHAPE(5, 3), PD_FLOAT32);
  for (int i = 0; i < NKINDS; i++)
    for (int j = 0; j < 3; j++) rc |= check_transition(rank, m, sw, g, &k_kinds[i], &k_kinds[j]);
  /* on that mesh, whose order is not the group's: every pair */
  for (int i = 0; i < NKINDS; i++)
    for (int j = 0; j < NKINDS; j++) rc |= check_transition(rank, sw, sw, g, &k_kinds[i], &k_kinds[j]);
  pd_dist_process_mesh_release(sw);
  /* a mesh naming a process the world lacks: an error naming it, on every rank */
  pd_dist_process_mesh *bad = pd_dist_process_mesh_new(1, SHAPE(2), (const int[]){0, 5}, NULL);
  pd_tensor *x = pd_dist_shard_tensor(global_value(2, SHAPE(4, 2), PD_FLOAT32), m, &k_kinds[1], 1);
  DIST_CHECK(x && !pd_dist_reshard(x, bad, &k_kinds[1], 1), 20);
  DIST_CHECK(strstr(pd_last_error(), "names process 5 but the world has 2"), 21);
  pd_clear_error();
  pd_dist_process_mesh_release(bad);
  pd_dist_process_mesh_release(m);
  return rc;
}

static void test_transitions_1d(void **state) {
  (void)state;
  run_ranks(2, rank_transitions_1d);
}

/* Every pair of placements on a 2x2 mesh (one axis at a time), float32
 * and int64, even and uneven. */
static int rank_transitions_2d(int rank) {
  pd_dist_process_mesh *m = pd_dist_process_mesh_new(2, SHAPE(2, 2), (const int[]){0, 1, 2, 3}, NULL);
  int rc = 0;
  const int64_t shapes[][2] = {{4, 6}, {3, 5}, {35, 1029}};
  const pd_dtype dts[] = {PD_FLOAT32, PD_INT64};
  for (int s = 0; s < 3; s++)
    for (int t = 0; t < 2; t++) {
      pd_tensor *g = global_value(2, shapes[s], dts[t]);
      for (int a0 = 0; a0 < NKINDS - 1; a0++)
        for (int a1 = 0; a1 < NKINDS - 1; a1++)
          for (int b0 = 0; b0 < NKINDS - 1; b0++)
            for (int b1 = 0; b1 < NKINDS - 1; b1++) {
              pd_dist_placement src[2] = {k_kinds[a0], k_kinds[a1]}, dst[2] = {k_kinds[b0], k_kinds[b1]};
              if ((src[0].kind == PD_DIST_SHARD && src[1].kind == PD_DIST_SHARD &&
                   src[0].dim == src[1].dim) ||
                  (dst[0].kind == PD_DIST_SHARD && dst[1].kind == PD_DIST_SHARD && dst[0].dim == dst[1].dim))
                continue;
              rc |= check_transition(rank, m, m, g, src, dst);
            }
    }
  pd_dist_process_mesh_release(m);
  return rc;
}

static void test_transitions_2d(void **state) {
  (void)state;
  run_ranks(4, rank_transitions_2d);
}

/* Pipeline stages: a 2x2 mesh [pp, mp] and its stage sub-meshes [0, 1] and
 * [2, 3]; every placement pair from the mesh to each stage and back. */
static int rank_submesh(int rank) {
  pd_dist_process_mesh *m =
      pd_dist_process_mesh_new(2, SHAPE(2, 2), (const int[]){0, 1, 2, 3}, (const char *[]){"pp", "mp"});
  pd_dist_process_mesh *stage[2] = {pd_dist_process_mesh_get_mesh_with_dim(m, "pp", 0),
                                    pd_dist_process_mesh_get_mesh_with_dim(m, "pp", 1)};
  int rc = 0;
  const pd_dtype dts[] = {PD_FLOAT32, PD_INT64};
  for (int t = 0; t < 2; t++) {
    pd_tensor *g = global_value(2, SHAPE(3, 5), dts[t]);
    for (int st = 0; st < 2; st++)
      for (int a0 = 0; a0 < NKINDS - 1; a0++)
        for (int a1 = 0; a1 < NKINDS - 1; a1++)
          for (int b = 0; b < NKINDS - 1; b++) {
            pd_dist_placement big[2] = {k_kinds[a0], k_kinds[a1]};
            if (big[0].kind == PD_DIST_SHARD && big[1].kind == PD_DIST_SHARD && big[0].dim == big[1].dim)
              continue;
            rc |= check_transition(rank, m, stage[st], g, big, &k_kinds[b]);
            rc |= check_transition(rank, stage[st], m, g, &k_kinds[b], big);
          }
  }
  pd_dist_process_mesh_release(stage[0]);
  pd_dist_process_mesh_release(stage[1]);
  pd_dist_process_mesh_release(m);
  return rc;
}

/* Backward across a stage boundary: x on stage 0 (process 0), doubled
 * there, moved to stage 1 (process 1) and multiplied by w there; each
 * process skips the other stage's ops, yet both run the backward of the
 * move, so x's gradient (2 w) reaches process 0. */
static int rank_pipeline_grad(int rank) {
  pd_dist_process_mesh *s0 = pd_dist_process_mesh_new(1, SHAPE(1), (const int[]){0}, NULL);
  pd_dist_process_mesh *s1 = pd_dist_process_mesh_new(1, SHAPE(1), (const int[]){1}, NULL);
  pd_dist_placement r = pd_dist_replicate();
  pd_tensor *x = global_value(2, SHAPE(2, 3), PD_FLOAT64), *w = pd_scale(x, 0.5, 1.0, true);
  pd_tensor *xs = pd_dist_shard_tensor(x, s0, &r, 1), *ws = pd_dist_shard_tensor(w, s1, &r, 1);
  pd_tensor_set_stop_gradient(xs, false);
  pd_tensor *h = pd_dist_reshard(pd_scale(xs, 2.0, 0.0, true), s1, &r, 1);
  pd_tensor *loss = pd_sum(pd_multiply(h, ws), NULL, 0, false);
  DIST_CHECK(loss && pd_backward(loss, NULL, false) == PD_OK, 1);
  pd_tensor *g = pd_tensor_grad(xs);
  DIST_CHECK(g && pd_dist_is_dist(g), 2);
  if (rank == 0)
    DIST_CHECK(same_values(pd_dist_local_value(g), pd_scale(w, 2.0, 0.0, true)), 3);
  else
    DIST_CHECK(pd_tensor_numel(g) == 0, 4);
  pd_dist_process_mesh_release(s0);
  pd_dist_process_mesh_release(s1);
  return 0;
}

static void test_backward_across_stages(void **state) {
  (void)state;
  run_ranks(2, rank_pipeline_grad);
}

static void test_global_and_sub_meshes(void **state) {
  (void)state;
  run_ranks(4, rank_submesh);
}

/* A rank outside a tensor's mesh holds no data and skips its ops. */
static int rank_outside_mesh(int rank) {
  pd_dist_process_mesh *m = pd_dist_process_mesh_new(1, SHAPE(2), (const int[]){0, 1}, NULL);
  pd_tensor *g = global_value(2, SHAPE(4, 2), PD_FLOAT32);
  pd_tensor *x = pd_dist_shard_tensor(g, m, (pd_dist_placement[]){pd_dist_shard(0)}, 1);
  DIST_CHECK(x, 1);
  pd_tensor *y = pd_exp(x);
  DIST_CHECK(y && pd_dist_is_dist(y), 2);
  pd_tensor *r = pd_dist_reshard(y, m, (pd_dist_placement[]){pd_dist_replicate()}, 1);
  DIST_CHECK(r, 3);
  pd_tensor *loc = pd_dist_local_value(r);
  if (rank == 2) {
    DIST_CHECK(pd_tensor_numel(loc) == 0, 4);
  } else {
    pd_tensor *want = pd_exp(g);
    DIST_CHECK(same_values(loc, want), 5);
  }
  pd_dist_process_mesh_release(m);
  return 0;
}

static void test_outside_mesh(void **state) {
  (void)state;
  run_ranks(3, rank_outside_mesh);
}

/* Shard(0) -> Replicate of g on mesh m: the all_gather along its axis
 * group gives g back. */
static bool gathers(pd_dist_process_mesh *m, pd_tensor *g) {
  pd_tensor *x = pd_dist_shard_tensor(g, m, (pd_dist_placement[]){pd_dist_shard(0)}, 1);
  pd_tensor *r = x ? pd_dist_reshard(x, m, (pd_dist_placement[]){pd_dist_replicate()}, 1) : NULL;
  return r && same_values(pd_dist_local_value(r), g);
}

/* The parallel environment left and joined again in one process (as
 * destroy_process_group allows): a mesh whose axis groups were made in the
 * old world makes them again, even after another mesh made the new
 * world's (the old groups are freed with their world). */
static int rank_mesh_after_reinit(int rank) {
  pd_dist_process_mesh *a = pd_dist_process_mesh_new(1, SHAPE(2), (const int[]){0, 1}, NULL);
  pd_dist_process_mesh *b = pd_dist_process_mesh_new(1, SHAPE(2), (const int[]){0, 1}, NULL);
  pd_tensor *g = global_value(2, SHAPE(4, 3), PD_FLOAT32);
  DIST_CHECK(gathers(a, g), 1);
  DIST_CHECK(pd_dist_destroy_process_group(NULL) == PD_OK, 2);
  DIST_CHECK(pd_dist_init_parallel_env(&(pd_dist_init_opts){.timeout_s = 20}), 3);
  DIST_CHECK(gathers(b, g), 4);
  DIST_CHECK(gathers(a, g), 5);
  pd_dist_process_mesh_release(a);
  pd_dist_process_mesh_release(b);
  return 0;
}

static void test_mesh_after_reinit(void **state) {
  (void)state;
  run_ranks(2, rank_mesh_after_reinit);
}

/* matmul with x and y each Replicate, Shard(0) or Shard(1), in the four
 * transpose cases: the unsharded result and gradients equal the dense
 * ones (float64). */
static int rank_matmul(int rank) {
  pd_dist_process_mesh *m = pd_dist_process_mesh_new(1, SHAPE(2), (const int[]){0, 1}, NULL);
  int rc = 0;
  for (int tx = 0; tx < 2; tx++)
    for (int ty = 0; ty < 2; ty++)
      for (int px = 0; px < 3; px++)
        for (int py = 0; py < 3; py++) {
          pd_scope_begin();
          pd_tensor *x = global_value(2, tx ? SHAPE(6, 4) : SHAPE(4, 6), PD_FLOAT64);
          pd_tensor *y = global_value(2, ty ? SHAPE(5, 6) : SHAPE(6, 5), PD_FLOAT64);
          pd_tensor_set_stop_gradient(x, false);
          pd_tensor_set_stop_gradient(y, false);
          pd_tensor *z = pd_matmul(x, y, tx, ty);
          pd_tensor *l = pd_sum(pd_multiply(z, z), NULL, 0, false);
          DIST_CHECK(pd_backward(l, NULL, false) == PD_OK, 1);
          pd_tensor *dx = pd_dist_shard_tensor(x, m, &k_kinds[px], 1);
          pd_tensor *dy = pd_dist_shard_tensor(y, m, &k_kinds[py], 1);
          pd_tensor_set_stop_gradient(dx, false);
          pd_tensor_set_stop_gradient(dy, false);
          pd_tensor *dz = pd_matmul(dx, dy, tx, ty);
          pd_tensor *dl = pd_sum(pd_multiply(dz, dz), NULL, 0, false);
          DIST_CHECK(dl && pd_backward(dl, NULL, false) == PD_OK, 2);
          pd_tensor *gx = pd_dist_unshard_dtensor(pd_tensor_grad(dx));
          pd_tensor *gy = pd_dist_unshard_dtensor(pd_tensor_grad(dy));
          if (!close_values(pd_dist_unshard_dtensor(dz), z, 1e-12) ||
              !close_values(pd_dist_unshard_dtensor(dl), l, 1e-12) ||
              !close_values(gx, pd_tensor_grad(x), 1e-12) || !close_values(gy, pd_tensor_grad(y), 1e-12)) {
            fprintf(stderr, "rank %d: matmul tx %d ty %d x %d y %d differs (%s)\n", rank, tx, ty, px, py,
                    pd_last_error());
            rc = 1;
          }
          pd_scope_end();
        }
  pd_dist_process_mesh_release(m);
  return rc;
}

/* Partial(sum) + Partial(sum) stays Partial, out of place and in place,
 * broadcast or not: the unsharded sum is the dense one. add_ into a Partial
 * gradient is what the backward after clear_grad(set_to_zero) does. */
static int rank_partial_add(int rank) {
  pd_dist_process_mesh *m = pd_dist_process_mesh_new(1, SHAPE(2), (const int[]){0, 1}, NULL);
  pd_dist_placement p = pd_dist_partial(PD_REDUCE_SUM);
  pd_tensor *la = pd_full(2, SHAPE(3, 4), 1.0 + rank, PD_FLOAT64),
            *lb = pd_full(1, SHAPE(4), 10.0 * (rank + 1), PD_FLOAT64);
  pd_tensor *a = pd_dist_dtensor_from_local(la, m, &p, 1), *b = pd_dist_dtensor_from_local(lb, m, &p, 1);
  DIST_CHECK(a && b, 1);
  pd_tensor *c = pd_add(a, b), *d = pd_subtract(a, b);
  DIST_CHECK(c && d, 2);
  pd_dist_placement got;
  DIST_CHECK(pd_dist_placements(c, &got, 1) == 1 && pd_dist_placement_equal(got, p), 3);
  /* dense: a = 1 + 2 = 3, b = 10 + 20 = 30 */
  DIST_CHECK(same_values(pd_dist_unshard_dtensor(c), pd_full(2, SHAPE(3, 4), 33.0, PD_FLOAT64)), 4);
  DIST_CHECK(same_values(pd_dist_unshard_dtensor(d), pd_full(2, SHAPE(3, 4), -27.0, PD_FLOAT64)), 5);
  DIST_CHECK(pd_add_(a, b) == a, 6);
  DIST_CHECK(pd_dist_placements(a, &got, 1) == 1 && pd_dist_placement_equal(got, p), 7);
  DIST_CHECK(same_values(pd_dist_unshard_dtensor(a), pd_full(2, SHAPE(3, 4), 33.0, PD_FLOAT64)), 8);
  pd_dist_process_mesh_release(m);
  return 0;
}

static void test_partial_add_stays_partial(void **state) {
  (void)state;
  run_ranks(2, rank_partial_add);
}

/* A DTensor that reaches a thread without the DTensor handler (a worker the
 * user started): an op on it fails naming the op, rather than adding the
 * local Partial parts as if they were the whole tensors; the thread may
 * still compute on the local part it is given. */
typedef struct foreign_run {
  pd_tensor *dt, *local;
  int rank;
  bool refused, named, local_ok;
} foreign_run;

static void *foreign_thread(void *arg) {
  foreign_run *f = arg;
  pd_scope_begin();
  f->refused = pd_add(f->dt, f->dt) == NULL;
  f->named = strstr(pd_last_error(), "add: input 0 is a distributed tensor (DTensor) made on another thread");
  f->local_ok =
      same_values(pd_add(f->local, f->local), pd_full(2, SHAPE(2, 2), 2.0 * (1 + f->rank), PD_FLOAT64));
  pd_scope_end();
  return NULL;
}

static int rank_foreign_thread(int rank) {
  pd_dist_process_mesh *m = pd_dist_process_mesh_new(1, SHAPE(2), (const int[]){0, 1}, NULL);
  pd_dist_placement p = pd_dist_partial(PD_REDUCE_SUM);
  pd_tensor *dt = pd_dist_dtensor_from_local(pd_full(2, SHAPE(2, 2), 1.0 + rank, PD_FLOAT64), m, &p, 1);
  DIST_CHECK(dt != NULL, 1);
  foreign_run f = {.dt = dt, .local = pd_dist_local_value(dt), .rank = rank};
  DIST_CHECK(f.local != NULL, 2);
  pthread_t t;
  DIST_CHECK(pthread_create(&t, NULL, foreign_thread, &f) == 0, 3);
  pthread_join(t, NULL);
  DIST_CHECK(f.refused && f.named, 4);
  DIST_CHECK(f.local_ok, 5);
  /* on its own thread the DTensor works as before: 3 + 3 */
  DIST_CHECK(same_values(pd_dist_unshard_dtensor(pd_add(dt, dt)), pd_full(2, SHAPE(2, 2), 6.0, PD_FLOAT64)),
             6);
  pd_dist_process_mesh_release(m);
  return 0;
}

static void test_dtensor_on_a_foreign_thread(void **state) {
  (void)state;
  run_ranks(2, rank_foreign_thread);
}

static void test_matmul_sharded(void **state) {
  (void)state;
  run_ranks(2, rank_matmul);
}

/* ---- seed 000's DemoNet --------------------------------------------------- */
enum { BATCH = 4, IMAGE = 16, CLASSES = 8, STEPS = 4 };

static pd_layer *demo_net(void) {
  pd_seed(2024);
  pd_layer *ls[3] = {pd_nn_linear(IMAGE, IMAGE, NULL), pd_nn_relu(), pd_nn_linear(IMAGE, CLASSES, NULL)};
  return pd_nn_sequential(ls, 3);
}

static pd_tensor *demo_data(int step, int cols, double f) {
  double v[BATCH * IMAGE];
  for (int i = 0; i < BATCH * cols; i++) v[i] = sin(f * (i + 1) + 0.3 * step);
  return pd_tensor_from_f64(v, PD_FLOAT32, 2, SHAPE(BATCH, cols));
}

/* The losses of STEPS steps of SGD(0.1) on MSELoss; with a mesh, linear_0's
 * weight is Shard(1) and linear_1's Shard(0) on its last dim ("mp"); on a
 * 2-d mesh [dp, mp] the batch is also sharded on dp. */
/* shard_layer's shard_fn for DemoNet (a Sequential: sublayers "0", "1",
 * "2"): linear_0's weight by columns, linear_1's by rows. */
static pd_status demo_shard_fn(const char *name, pd_layer *layer, pd_dist_process_mesh *mesh, void *user) {
  (void)user;
  int dim = strcmp(name, "0") == 0 ? 1 : strcmp(name, "2") == 0 ? 0 : -1;
  if (dim < 0) return PD_OK;
  pd_tensor *w = pd_layer_parameter(layer, "weight");
  return pd_dist_shard_tensor(w, mesh, (pd_dist_placement[]){pd_dist_shard(dim)}, 1) ? PD_OK
                                                                                     : pd_last_status();
}

static int g_input_fn_calls;

/* input_fn: the batch becomes a replicated DTensor on the mesh in user. */
static int demo_input_fn(pd_layer *l, pd_tensor **in, int n_in, void *user) {
  (void)l, (void)n_in;
  g_input_fn_calls++;
  in[0] = pd_dist_shard_tensor(in[0], user, (pd_dist_placement[]){pd_dist_replicate()}, 1);
  return in[0] ? 1 : pd_last_status();
}

static bool g_use_shard_layer;

static int demo_losses(pd_dist_process_mesh *mesh, double *losses) {
  pd_layer *net = demo_net();
  int nd = mesh ? pd_dist_process_mesh_ndim(mesh) : 0;
  pd_dist_placement p0[2] = {pd_dist_replicate(), pd_dist_replicate()}, p1[2], pdata[2];
  memcpy(p1, p0, sizeof p1);
  memcpy(pdata, p0, sizeof pdata);
  if (mesh && g_use_shard_layer) {
    pd_dist_shard_layer_opts o = {.shard_fn = demo_shard_fn, .input_fn = demo_input_fn, .user = mesh};
    if (pd_dist_shard_layer(net, mesh, &o) != PD_OK) return 1;
    pd_named_tensors ps;
    if (pd_layer_parameters(net, &ps) != PD_OK) return 1;
    bool all_dist = ps.n == 4;
    for (int i = 0; i < ps.n; i++) all_dist &= pd_dist_is_dist(ps.tensors[i]);
    pd_named_tensors_free(&ps);
    if (!all_dist) return 6;
  } else if (mesh) {
    p0[nd - 1] = pd_dist_shard(1);
    p1[nd - 1] = pd_dist_shard(0);
    if (nd == 2) pdata[0] = pd_dist_shard(0);
    pd_tensor *w0 = pd_layer_parameter(pd_nn_sequential_get(net, 0), "weight");
    pd_tensor *w1 = pd_layer_parameter(pd_nn_sequential_get(net, 2), "weight");
    pd_tensor *s0 = pd_dist_shard_tensor(w0, mesh, p0, nd);
    pd_tensor *s1 = pd_dist_shard_tensor(w1, mesh, p1, nd);
    if (s0 != w0 || s1 != w1) return 1; /* the scope of the rank releases s0 and s1 */
  }
  pd_named_tensors ps;
  if (pd_layer_parameters(net, &ps) != PD_OK) return 2;
  pd_optimizer *opt = pd_optimizer_sgd(0.1, ps.tensors, ps.n, NULL);
  pd_named_tensors_free(&ps);
  pd_layer *mse = pd_nn_mse_loss(NULL);
  for (int s = 0; s < STEPS; s++) {
    pd_scope_begin();
    pd_tensor *x = demo_data(s, IMAGE, 0.37), *y = demo_data(s, CLASSES, 0.53);
    if (nd == 2) { /* the global batch, each dp rank holding its rows */
      x = pd_dist_shard_tensor(x, mesh, pdata, nd);
      y = pd_dist_shard_tensor(y, mesh, pdata, nd);
    }
    pd_tensor *out = pd_layer_call1(net, x);
    pd_tensor *loss = NULL;
    pd_layer_call(mse, (pd_tensor *[]){out, y}, 2, &loss, 1);
    pd_tensor *l = pd_dist_unshard_dtensor(loss);
    if (!l || pd_backward(loss, NULL, false) != PD_OK) {
      pd_scope_end();
      return 3;
    }
    if (mesh) { /* the weights hold their shards and so do their gradients (Partial on dp) */
      pd_tensor *w0 = pd_layer_parameter(pd_nn_sequential_get(net, 0), "weight");
      pd_tensor *w1 = pd_layer_parameter(pd_nn_sequential_get(net, 2), "weight");
      pd_dist_placement g0[2], g1[2];
      if (pd_tensor_numel(w0) != IMAGE * IMAGE / 2 || pd_tensor_numel(w1) != IMAGE * CLASSES / 2 ||
          pd_dist_placements(pd_tensor_grad(w0), g0, 2) != nd ||
          pd_dist_placements(pd_tensor_grad(w1), g1, 2) != nd ||
          !pd_dist_placement_equal(g0[nd - 1], pd_dist_shard(1)) ||
          !pd_dist_placement_equal(g1[nd - 1], pd_dist_shard(0)) ||
          (nd == 2 && (!pd_dist_placement_equal(g0[0], pd_dist_partial(PD_REDUCE_SUM)) ||
                       !pd_dist_placement_equal(g1[0], pd_dist_partial(PD_REDUCE_SUM))))) {
        char b0[600], b1[600];
        fprintf(stderr, "gradients: %s and %s\n", pd_dist_attr_str(pd_tensor_grad(w0), b0, sizeof b0),
                pd_dist_attr_str(pd_tensor_grad(w1), b1, sizeof b1));
        pd_scope_end();
        return 4;
      }
    }
    if (pd_optimizer_step(opt) != PD_OK) {
      pd_scope_end();
      return 5;
    }
    pd_optimizer_clear_grad(opt, false);
    losses[s] = pd_tensor_item(l);
    pd_scope_end();
  }
  pd_optimizer_release(opt);
  pd_layer_release(mse);
  pd_layer_release(net);
  return 0;
}

static int rank_demo_net(int rank) {
  double ref[STEPS], got[STEPS];
  DIST_CHECK(demo_losses(NULL, ref) == 0, 1);
  pd_dist_process_mesh *m = pd_dist_process_mesh_new(1, SHAPE(2), (const int[]){0, 1}, (const char *[]){"x"});
  int rc = demo_losses(m, got);
  DIST_CHECK(rc == 0, 10 + rc);
  for (int s = 0; s < STEPS; s++)
    if (fabs(got[s] - ref[s]) > 1e-6) {
      fprintf(stderr, "rank %d: step %d loss %.9g, one process %.9g\n", rank, s, got[s], ref[s]);
      return 4;
    }
  DIST_CHECK(ref[STEPS - 1] < ref[0], 5); /* it trains */
  pd_dist_process_mesh_release(m);
  return 0;
}

static void test_demo_net_two_ranks(void **state) {
  (void)state;
  run_ranks(2, rank_demo_net);
}

/* The same on a 2x2 mesh [dp, mp]: the batch sharded on dp, the weights
 * on mp; the weight gradients are Partial on dp, reduced by the update. */
static int rank_demo_net_2d(int rank) {
  double ref[STEPS], got[STEPS];
  DIST_CHECK(demo_losses(NULL, ref) == 0, 1);
  pd_dist_process_mesh *m =
      pd_dist_process_mesh_new(2, SHAPE(2, 2), (const int[]){0, 1, 2, 3}, (const char *[]){"dp", "mp"});
  int rc = demo_losses(m, got);
  DIST_CHECK(rc == 0, 10 + rc);
  for (int s = 0; s < STEPS; s++)
    if (fabs(got[s] - ref[s]) > 1e-6) {
      fprintf(stderr, "rank %d: step %d loss %.9g, one process %.9g\n", rank, s, got[s], ref[s]);
      return 4;
    }
  pd_dist_process_mesh_release(m);
  return 0;
}

/* shard_layer: shard_fn shards the two weights, the biases become
 * Replicate DTensors, input_fn runs before every forward. */
static int rank_shard_layer(int rank) {
  double ref[STEPS], got[STEPS];
  DIST_CHECK(demo_losses(NULL, ref) == 0, 1);
  pd_dist_process_mesh *m = pd_dist_process_mesh_new(1, SHAPE(2), (const int[]){0, 1}, (const char *[]){"x"});
  g_use_shard_layer = true;
  int rc = demo_losses(m, got);
  DIST_CHECK(rc == 0, 10 + rc);
  DIST_CHECK(g_input_fn_calls == STEPS, 2);
  for (int s = 0; s < STEPS; s++)
    if (fabs(got[s] - ref[s]) > 1e-6) {
      fprintf(stderr, "rank %d: step %d loss %.9g, one process %.9g\n", rank, s, got[s], ref[s]);
      return 4;
    }
  DIST_CHECK(pd_dist_shard_layer(NULL, m, NULL) == PD_ERR_INVALID, 3);
  pd_dist_process_mesh_release(m);
  return 0;
}

static void test_shard_layer(void **state) {
  (void)state;
  run_ranks(2, rank_shard_layer);
}

/* shard_dataloader: each dp rank loads its slice of every global batch of
 * 4 (the last round of 2 split evenly), in order; the batch, unsharded, is
 * the global batch. */
static int rank_shard_dataloader(int rank) {
  pd_tensor *x = pd_reshape(pd_arange(0, 30, 1, PD_FLOAT32), 2, SHAPE(10, 3));
  pd_tensor *y = pd_arange(0, 10, 1, PD_INT64);
  pd_io_dataset *ds = pd_io_tensor_dataset((pd_tensor *[]){x, y}, 2);
  pd_dist_process_mesh *m =
      pd_dist_process_mesh_new(1, SHAPE(2), (const int[]){0, 1}, (const char *[]){"dp"});
  pd_dist_shard_dataloader_opts so = {.meshes = &m, .n_meshes = 1, .shard_dim = "dp"};
  pd_dist_shard_dataloader *l =
      pd_dist_shard_dataloader_new(ds, &(pd_io_data_loader_opts){.batch_size = 4}, &so);
  DIST_CHECK(l && pd_dist_shard_dataloader_len(l) == 3, 1);
  const int64_t rows[3][2] = {{0, 4}, {4, 8}, {8, 10}};
  for (int k = 0; k < 3; k++) {
    pd_tensor *b[2];
    DIST_CHECK(pd_dist_shard_dataloader_next(l, b, 2) == 2, 2);
    DIST_CHECK(pd_tensor_shape(b[0])[0] == (k < 2 ? 2 : 1), 3); /* this rank's slice */
    pd_tensor *want = pd_slice(x, 1, SHAPE(0), &rows[k][0], &rows[k][1]);
    pd_tensor *want_y = pd_slice(y, 1, SHAPE(0), &rows[k][0], &rows[k][1]);
    DIST_CHECK(same_values(pd_dist_unshard_dtensor(b[0]), want), 4);
    DIST_CHECK(same_values(pd_dist_unshard_dtensor(b[1]), want_y), 5);
  }
  pd_tensor *b[2];
  DIST_CHECK(pd_dist_shard_dataloader_next(l, b, 2) == 0, 6);
  pd_dist_shard_dataloader_release(l);
  /* a global batch the dp ranks cannot split */
  DIST_CHECK(!pd_dist_shard_dataloader_new(ds, &(pd_io_data_loader_opts){.batch_size = 3}, &so), 7);
  DIST_CHECK(
      strstr(pd_last_error(), "global batch size 3 must be a positive multiple of the 2 ranks along 'dp'"),
      8);
  so.shard_dim = "mp";
  DIST_CHECK(!pd_dist_shard_dataloader_new(ds, NULL, &so) && strstr(pd_last_error(), "has no dim named mp"),
             9);
  pd_clear_error();
  pd_io_dataset_release(ds);
  pd_dist_process_mesh_release(m);
  return 0;
}

static void test_shard_dataloader(void **state) {
  (void)state;
  run_ranks(2, rank_shard_dataloader);
}

static void test_demo_net_four_ranks_dp_mp(void **state) {
  (void)state;
  run_ranks(4, rank_demo_net_2d);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_mesh),
      cmocka_unit_test(test_placement_errors),
      cmocka_unit_test(test_transitions_1d),
      cmocka_unit_test(test_transitions_2d),
      cmocka_unit_test(test_global_and_sub_meshes),
      cmocka_unit_test(test_backward_across_stages),
      cmocka_unit_test(test_outside_mesh),
      cmocka_unit_test(test_mesh_after_reinit),
      cmocka_unit_test(test_matmul_sharded),
      cmocka_unit_test(test_partial_add_stays_partial),
      cmocka_unit_test(test_dtensor_on_a_foreign_thread),
      cmocka_unit_test(test_demo_net_two_ranks),
      cmocka_unit_test(test_demo_net_four_ranks_dp_mp),
      cmocka_unit_test(test_shard_layer),
      cmocka_unit_test(test_shard_dataloader),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
