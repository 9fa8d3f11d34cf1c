/* The inplace ops that change a DTensor's shape (squeeze_, unsqueeze_,
 * reshape_) on forked ranks, with autograd recording (x needs a gradient)
 * and without (grad mode off): x takes the out-of-place op's dist attr, so
 * its global shape and the dims of its Shard placements follow the new
 * shape; a shard of a squeezed dim (or of a dim reshape_ merges unevenly) is
 * gathered first, as Paddle's squeeze rule does; squeeze_ with no axes, or
 * naming a dim whose shard is of size 1, drops only the global size-1 dims.
 * Each result's local value is its global value's shard, and unsharded
 * (with x's gradient) equals the one-process result, on 2 processes and on
 * a 2x2 mesh of 4. A bad axis or shape is an error naming the op, x left
 * as it was. */
#include <stdio.h>
#include <string.h>

#include "dist_ranks.h"
#include "dtensor_checks.h"
#include "op_samples.h"
#include "test_util.h"

enum geom_op { SQUEEZE, UNSQUEEZE, RESHAPE };

typedef struct geom_case {
  enum geom_op op;
  int nv; /* axes or shape */
  int64_t v[4];
  int ndim; /* x's global shape */
  int64_t shape[4];
  pd_dist_placement xp[2], want[2]; /* x's placements, the result's */
} geom_case;

static pd_tensor *apply(const geom_case *c, pd_tensor *x) {
  switch (c->op) {
    case SQUEEZE:
      return pd_squeeze_(x, c->nv, c->v);
    case UNSQUEEZE:
      return pd_unsqueeze_(x, c->nv, c->v);
    default:
      return pd_reshape_(x, c->nv, c->v);
  }
}

static bool has_partial(const pd_dist_placement *p, int n) {
  for (int m = 0; m < n; m++)
    if (pd_dist_placement_equal(p[m], pd_dist_partial(PD_REDUCE_SUM))) return true;
  return false;
}

/* One case on mesh m (np axes), recorded or not; 0 or the failed check's
 * code. x = 2 * x0 (a non-leaf, so the recorded inplace op is allowed). */
static int check_case(int rank, pd_dist_process_mesh *m, int np, const geom_case *c, bool record) {
  sample_reseed(31);
  pd_tensor *x0 = sample_uniform(c->ndim, c->shape, -1, 1);
  pd_tensor_set_stop_gradient(x0, false);
  pd_tensor *d0 = pd_dist_shard_tensor(pd_clone(x0, PD_FLOAT64), m, c->xp, np);
  DIST_CHECK(d0, 1);
  pd_tensor_set_stop_gradient(d0, false);
  /* one process */
  pd_tensor *ref = pd_scale(x0, 2, 0, true);
  DIST_CHECK(apply(c, ref) == ref, 2);
  DIST_CHECK(pd_backward(dtensor_weighted_sum(ref), NULL, false) == PD_OK, 3);
  /* the DTensor */
  pd_tensor *x = pd_scale(d0, 2, 0, true);
  bool was = pd_grad_mode_set(record);
  pd_tensor *r = apply(c, x);
  pd_grad_mode_set(was);
  DIST_CHECK(r == x, 4);
  DIST_CHECK(dtensor_placed(x, c->want, np), 5);
  int64_t gs[PD_MAX_DIMS];
  int gn = pd_dist_global_shape(x, gs);
  DIST_CHECK(gn == pd_tensor_ndim(ref) && memcmp(gs, pd_tensor_shape(ref), sizeof(int64_t) * (size_t)gn) == 0,
             6);
  if (!has_partial(c->want, np)) { /* the local value is the result's shard */
    pd_tensor *shard = pd_dist_shard_tensor(ref, m, c->want, np);
    DIST_CHECK(dtensor_close(pd_dist_local_value(x), pd_dist_local_value(shard), 0), 7);
  }
  DIST_CHECK(dtensor_close(pd_dist_unshard_dtensor(x), ref, 1e-12), 8);
  if (!record) return 0;
  DIST_CHECK(pd_backward(dtensor_weighted_sum(x), NULL, false) == PD_OK, 9);
  DIST_CHECK(dtensor_placed(pd_tensor_grad(d0), c->xp, np) || has_partial(c->xp, np), 10);
  DIST_CHECK(dtensor_close(pd_dist_unshard_dtensor(pd_tensor_grad(d0)), pd_tensor_grad(x0), 1e-12), 11);
  return 0;
}

/* Runs every case, recorded and not; the first failure's code. */
static int run_cases(int rank, pd_dist_process_mesh *m, int np, const geom_case *cases, int n) {
  int first = 0;
  for (int k = 0; k < n; k++)
    for (int rec = 0; rec < 2; rec++) {
      int code = check_case(rank, m, np, &cases[k], rec);
      pd_clear_error();
      if (!code) continue;
      fprintf(stderr, "rank %d: case %d (%s) failed\n", rank, k, rec ? "recorded" : "not recorded");
      if (!first) first = 20 * k + code;
    }
  return first;
}

#define S(d) pd_dist_shard(d)
#define R pd_dist_replicate()
#define P pd_dist_partial(PD_REDUCE_SUM)

static int rank_1d(int rank) {
  pd_dist_process_mesh *m = pd_dist_process_mesh_new(1, SHAPE(2), (const int[]){0, 1}, NULL);
  const geom_case cases[] = {
      /* the shard's dim moves down past the squeezed one */
      {SQUEEZE, 1, {1}, 3, {4, 1, 3}, {S(2)}, {S(1)}},
      {SQUEEZE, 1, {1}, 3, {4, 1, 3}, {S(0)}, {S(0)}},
      /* a shard of the squeezed dim is gathered first (one rank holds it, the other none) */
      {SQUEEZE, 1, {0}, 2, {1, 4}, {S(0)}, {R}},
      /* the shards of dim 0 hold 1 row each: only the global size-1 dim goes */
      {SQUEEZE, 0, {0}, 3, {2, 1, 3}, {S(0)}, {S(0)}},
      {SQUEEZE, 2, {0, 1}, 3, {2, 1, 3}, {S(0)}, {S(0)}},
      {SQUEEZE, 1, {-2}, 3, {4, 1, 3}, {P}, {P}},
      {UNSQUEEZE, 1, {0}, 2, {4, 3}, {S(1)}, {S(2)}},
      {UNSQUEEZE, 2, {-1, 0}, 2, {4, 3}, {S(0)}, {S(1)}},
      {RESHAPE, 3, {4, 2, 3}, 2, {4, 6}, {S(1)}, {S(1)}},
      {RESHAPE, 1, {24}, 2, {4, 6}, {S(0)}, {S(0)}},
      /* a shard of the inner dim of a merge is gathered first */
      {RESHAPE, 1, {24}, 2, {4, 6}, {S(1)}, {R}},
  };
  int code = run_cases(rank, m, 1, cases, (int)(sizeof cases / sizeof cases[0]));
  /* a bad axis or shape names the op and leaves x as it was, recorded or not */
  for (int rec = 0; rec < 2 && !code; rec++) {
    pd_tensor *d0 = pd_dist_shard_tensor(sample_uniform(2, SHAPE(4, 3), -1, 1), m, &cases[0].want[0], 1);
    pd_tensor_set_stop_gradient(d0, false);
    pd_tensor *x = pd_scale(d0, 2, 0, true);
    bool was = pd_grad_mode_set(rec);
    DIST_CHECK(!pd_squeeze_(x, 1, SHAPE(2)) && strstr(pd_last_error(), "squeeze_") &&
                   strstr(pd_last_error(), "axis 2"),
               100);
    DIST_CHECK(!pd_unsqueeze_(x, 1, SHAPE(4)) && strstr(pd_last_error(), "unsqueeze_"), 101);
    DIST_CHECK(!pd_reshape_(x, 1, SHAPE(5)) && strstr(pd_last_error(), "reshape_"), 102);
    pd_grad_mode_set(was);
    pd_clear_error();
    int64_t gs[PD_MAX_DIMS];
    DIST_CHECK(dtensor_placed(x, &cases[0].want[0], 1) && pd_dist_global_shape(x, gs) == 2 && gs[0] == 4 &&
                   gs[1] == 3,
               103);
  }
  pd_dist_process_mesh_release(m);
  return code;
}

static int rank_2d(int rank) {
  pd_dist_process_mesh *m = pd_dist_process_mesh_new(2, SHAPE(2, 2), (const int[]){0, 1, 2, 3}, NULL);
  const geom_case cases[] = {
      {SQUEEZE, 1, {1}, 3, {4, 1, 6}, {S(0), S(2)}, {S(0), S(1)}},
      {SQUEEZE, 0, {0}, 3, {2, 1, 6}, {S(2), S(0)}, {S(1), S(0)}},
      {UNSQUEEZE, 1, {1}, 2, {4, 6}, {S(0), S(1)}, {S(0), S(2)}},
      {RESHAPE, 2, {4, 6}, 3, {4, 2, 3}, {P, S(1)}, {P, S(1)}},
  };
  int code = run_cases(rank, m, 2, cases, (int)(sizeof cases / sizeof cases[0]));
  pd_dist_process_mesh_release(m);
  return code;
}

static void test_inplace_geometry_on_2_ranks(void **state) {
  (void)state;
  dist_run_ranks_or_fail(2, rank_1d, 120);
}

static void test_inplace_geometry_on_2x2_mesh(void **state) {
  (void)state;
  dist_run_ranks_or_fail(4, rank_2d, 120);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_inplace_geometry_on_2_ranks),
      cmocka_unit_test(test_inplace_geometry_on_2x2_mesh),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
