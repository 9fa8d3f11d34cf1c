/* The ops a partitioned distributed Program runs for the SPMD rules' local
 * steps: dropout of a shard draws the slice of the whole
 * tensor's mask (fixed seed and generator alike), c_softmax_with_cross_
 * entropy and its grad over one shard of every class equal
 * cross_entropy_with_softmax and its grad (and so do two ranks' shards of
 * the classes, through the allreduce), c_embedding reads its shard's
 * rows and zeros for the other ids (c_embedding_grad adds only those),
 * c_nll_loss and its grad in a group of one are nll_loss's mean and its
 * grad, and attributes that do not fit are errors naming the op and the
 * values. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "dist_ranks.h"
#include "distributed/auto_parallel/ap_internal.h"
#include "op_samples.h"
#include "test_util.h"

#define S(...) ((const int64_t[]){__VA_ARGS__})

/* Output k of op id (every output stays with the test's scope). */
static pd_tensor *run1(pd_op_id id, pd_tensor *const *in, int n, const pd_attrs *a, int k) {
  pd_tensor *out[PD_MAX_OUTPUTS] = {0};
  int n_out = 0;
  return pd_dispatch(id, in, n, a, out, &n_out) == PD_OK ? out[k] : NULL;
}

/* rows [r0, r1) and columns [c0, c1) of a 2-D tensor */
static pd_tensor *block(pd_tensor *t, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
  return pd_contiguous(pd_slice(t, 2, S(0, 1), S(r0, c0), S(r1, c1)));
}

static void check_dropout_shard(int64_t seed) {
  pd_tensor *x = sample_uniform(2, S(6, 5), 1, 2); /* no zeros: the mask shows in the output */
  pd_attrs a = {.f = {0.5}, .i = {0, seed}};
  pd_seed(3);
  pd_tensor *whole = run1(PD_OP_dropout, &x, 1, &a, 0);
  pd_tensor *xs = block(x, 2, 5, 1, 4);
  a.nv[1] = a.nv[2] = 2;
  memcpy(a.v[1], S(6, 5), 2 * sizeof(int64_t));
  memcpy(a.v[2], S(2, 1), 2 * sizeof(int64_t));
  pd_seed(3);
  pd_tensor *shard = run1(PD_OP_dropout, &xs, 1, &a, 0);
  expect_close(shard, block(whole, 2, 5, 1, 4), 0, 0);
  /* the shard reserved the whole tensor's counters: the next draw is the
   * one after the whole tensor's */
  if (seed == 0) {
    pd_tensor *next_after_shard = pd_rand(1, S(4), PD_FLOAT32);
    pd_seed(3);
    assert_non_null(run1(PD_OP_dropout, &x, 1, &(pd_attrs){.f = {0.5}}, 0));
    expect_close(next_after_shard, pd_rand(1, S(4), PD_FLOAT32), 0, 0);
  }
}

static void test_dropout_shard_is_the_whole_mask_slice(void **state) {
  (void)state;
  pd_scope_begin();
  check_dropout_shard(0);
  check_dropout_shard(1234);
  pd_scope_end();
}

static void test_c_softmax_ce_one_shard_is_the_dense_op(void **state) {
  (void)state;
  pd_scope_begin();
  for (int soft = 0; soft < 2; soft++) {
    pd_tensor *x = sample_uniform(2, S(4, 5), -2, 2);
    pd_tensor *label = soft ? sample_uniform(2, S(4, 5), 0, 1) : sample_indices(2, S(4, 1), 5);
    pd_attrs dense = {.i = {soft, 1, -100, 1}};
    pd_attrs shard = {.i = {soft, 0, -100, 1, 1, 0}, .nv = {1}, .v = {{5}}};
    for (int k = 0; k < 2; k++)
      expect_close(run1(PD_OP_c_softmax_with_cross_entropy, (pd_tensor *[]){x, label}, 2, &shard, k),
                   run1(PD_OP_cross_entropy_with_softmax, (pd_tensor *[]){x, label}, 2, &dense, k), 0, 1e-12);
    pd_tensor *lse = run1(PD_OP_cross_entropy_with_softmax, (pd_tensor *[]){x, label}, 2, &dense, 1);
    pd_tensor *g = sample_uniform(2, S(4, 1), -1, 1), *in[4] = {x, label, lse, g};
    expect_close(run1(PD_OP_c_softmax_with_cross_entropy_grad, in, 4, &shard, 0),
                 run1(PD_OP_cross_entropy_with_softmax_grad, in, 4, &dense, 0), 0, 1e-12);
  }
  pd_scope_end();
}

/* Whether a and b (same shape) agree to 1e-12, in a rank (no cmocka). */
static bool agree(pd_tensor *a, pd_tensor *b) {
  pd_tensor *r = a && b ? pd_allclose(a, b, 0, 1e-12, false) : NULL;
  return r && *(const bool *)pd_tensor_data(r);
}

/* Over two ranks, each holding three of x's six classes, every rank's
 * c_softmax_with_cross_entropy (loss and lse) is the dense op's on the
 * whole x, and its grad is the dense grad's columns of its classes: the
 * row statistics go through the allreduce, hard and soft labels alike. */
static int rank_c_softmax_ce(int rank) {
  pd_ap_install_comm_ops(); /* as a partitioned Program's run does */
  pd_dist_group *grp = pd_dist_new_group((const int[]){0, 1}, 2, NULL);
  DIST_CHECK(grp, 1);
  for (int soft = 0; soft < 2; soft++) {
    sample_reseed(7); /* the same samples on both ranks */
    pd_tensor *x = sample_uniform(2, S(4, 6), -2, 2);
    pd_tensor *label = soft ? sample_uniform(2, S(4, 6), 0, 1) : sample_indices(2, S(4, 1), 6);
    pd_tensor *g = sample_uniform(2, S(4, 1), -1, 1);
    pd_attrs dense = {.i = {soft, 1, -100, 1}};
    pd_attrs shard = {.i = {soft, pd_dist_group_id(grp), -100, 1, 2, 3 * rank}, .nv = {1}, .v = {{6}}};
    pd_tensor *xs = block(x, 0, 4, 3 * rank, 3 * rank + 3),
              *ls = soft ? block(label, 0, 4, 3 * rank, 3 * rank + 3) : label;
    for (int k = 0; k < 2; k++)
      DIST_CHECK(agree(run1(PD_OP_c_softmax_with_cross_entropy, (pd_tensor *[]){xs, ls}, 2, &shard, k),
                       run1(PD_OP_cross_entropy_with_softmax, (pd_tensor *[]){x, label}, 2, &dense, k)),
                 10 + 2 * soft + k);
    pd_tensor *lse = run1(PD_OP_cross_entropy_with_softmax, (pd_tensor *[]){x, label}, 2, &dense, 1);
    pd_tensor *dx =
        run1(PD_OP_cross_entropy_with_softmax_grad, (pd_tensor *[]){x, label, lse, g}, 4, &dense, 0);
    DIST_CHECK(dx, 20);
    DIST_CHECK(
        agree(run1(PD_OP_c_softmax_with_cross_entropy_grad, (pd_tensor *[]){xs, ls, lse, g}, 4, &shard, 0),
              block(dx, 0, 4, 3 * rank, 3 * rank + 3)),
        21 + soft);
  }
  return 0;
}

static void test_c_softmax_ce_two_ranks_is_the_dense_op(void **state) {
  (void)state;
  dist_run_ranks_or_fail(2, rank_c_softmax_ce, 120);
}

/* c_nll_loss and its grad in a group of one are nll_loss's mean and its
 * grad (a weight and an ignored label: the total weight is not the count). */
static void test_c_nll_loss_one_shard_is_the_mean(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = sample_uniform(2, S(5, 4), -3, 0);
  pd_tensor *label = pd_tensor_from_f64((const double[]){3, 1, 0, 1, 2}, PD_INT64, 1, S(5));
  pd_tensor *w = pd_tensor_from_f64((const double[]){0.5, 1.5, 2, 0.25}, PD_FLOAT64, 1, S(4));
  pd_attrs dense = {.i = {1, PD_REDUCTION_MEAN}};
  pd_attrs shard = {.i = {1, PD_REDUCTION_MEAN}, .nv = {0, 1, 1}, .v = {{0}, {0}, {1}}};
  pd_tensor *in[3] = {x, label, w};
  pd_tensor *loss = run1(PD_OP_c_nll_loss, in, 3, &shard, 0);
  expect_close(loss, run1(PD_OP_nll_loss, in, 3, &dense, 0), 0, 1e-12);
  /* by hand: labels 3, 0, 2 count (weights 0.25, 0.5, 2) */
  pd_tensor *xc = pd_contiguous(x);
  const double *xv = pd_tensor_data(xc);
  double want = -(0.25 * xv[0 * 4 + 3] + 0.5 * xv[2 * 4 + 0] + 2 * xv[4 * 4 + 2]) / 2.75;
  assert_true(fabs(pd_tensor_item(loss) - want) < 1e-12);
  pd_tensor *g = pd_tensor_from_f64((const double[]){0.7}, PD_FLOAT64, 0, NULL), *gin[3] = {label, g, w};
  dense.nv[0] = shard.nv[0] = 2;
  memcpy(dense.v[0], S(5, 4), 2 * sizeof(int64_t));
  memcpy(shard.v[0], S(5, 4), 2 * sizeof(int64_t));
  expect_close(run1(PD_OP_c_nll_loss_grad, gin, 3, &shard, 0), run1(PD_OP_nll_loss_grad, gin, 3, &dense, 0),
               0, 1e-12);
  pd_scope_end();
}

static void test_c_embedding_reads_its_rows(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *ids = pd_tensor_from_f64((const double[]){1, 3, 6, 2}, PD_INT64, 1, S(4));
  pd_tensor *table = sample_uniform(2, S(8, 2), -1, 1), *rows = block(table, 2, 5, 0, 2);
  pd_attrs a = {.i = {0, 0, 2, 8}};
  pd_tensor *e = run1(PD_OP_c_embedding, (pd_tensor *[]){ids, rows}, 2, &a, 0);
  /* ids 3 and 2 are rows 1 and 0 of the shard; 1 and 6 read zeros */
  pd_tensor *want = pd_concat((pd_tensor *[]){pd_zeros(2, S(1, 2), PD_FLOAT64), block(table, 3, 4, 0, 2),
                                              pd_zeros(2, S(1, 2), PD_FLOAT64), block(table, 2, 3, 0, 2)},
                              4, 0);
  expect_close(e, want, 0, 0);
  /* the grad adds the output gradient's rows 1 and 3 into the shard's rows 1 and 0 */
  pd_tensor *g = sample_uniform(2, S(4, 2), -1, 1);
  pd_attrs ga = {.i = {3, 0, 0, 2, 8}};
  pd_tensor *dw = run1(PD_OP_c_embedding_grad, (pd_tensor *[]){ids, g}, 2, &ga, 0);
  pd_tensor *dwant = pd_concat(
      (pd_tensor *[]){block(g, 3, 4, 0, 2), block(g, 1, 2, 0, 2), pd_zeros(2, S(1, 2), PD_FLOAT64)}, 3, 0);
  expect_close(dw, dwant, 0, 0);
  pd_scope_end();
}

/* op id on in with a refuses, naming the op and `what`. */
static void expect_refused(pd_op_id id, pd_tensor *const *in, int n, const pd_attrs *a, const char *what) {
  pd_tensor *t = run1(id, in, n, a, 0);
  assert_int_equal(pd_last_status(), PD_ERR_INVALID);
  expect_error(t, pd_op_table[id]->name, what);
}

static void test_attributes_that_do_not_fit_are_errors(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *ids = pd_tensor_from_f64((const double[]){1, 3}, PD_INT64, 1, S(2));
  pd_tensor *rows = sample_uniform(2, S(3, 2), -1, 1);
  /* rows [6, 9) of a vocab of 8 */
  expect_refused(PD_OP_c_embedding, (pd_tensor *[]){ids, rows}, 2, &(pd_attrs){.i = {0, 0, 6, 8}},
                 "start_index 6 does not fit a vocab_size of 8");
  expect_refused(PD_OP_c_embedding_grad, (pd_tensor *[]){ids, sample_uniform(2, S(2, 2), -1, 1)}, 2,
                 &(pd_attrs){.i = {3, 0, 0, -1, 8}}, "start_index -1");
  /* a [3, 2] shard at offset [4, 0] of a [6, 2] tensor */
  pd_tensor *x = sample_uniform(2, S(3, 2), -1, 1);
  pd_attrs d = {.f = {0.5}, .nv = {0, 2, 2}, .v = {{0}, {6, 2}, {4, 0}}};
  expect_refused(PD_OP_dropout, &x, 1, &d, "offset 4 does not fit the global size 6");
  d.nv[2] = 1;
  expect_refused(PD_OP_dropout, &x, 1, &d, "global_shape and offset of x's rank 2");
  pd_tensor *label = sample_indices(2, S(3, 1), 2);
  pd_attrs ce = {.i = {0, 0, -100, 1, 0, 0}, .nv = {1}, .v = {{2}}};
  expect_refused(PD_OP_c_softmax_with_cross_entropy, (pd_tensor *[]){x, label}, 2, &ce, "nranks 0");
  ce.i[4] = 2;
  ce.i[5] = 1; /* classes [1, 3) of 2 */
  expect_refused(PD_OP_c_softmax_with_cross_entropy, (pd_tensor *[]){x, label}, 2, &ce, "start_index 1");
  /* c_nll_loss: mean only, one size per ring id, sizes >= 1 */
  pd_tensor *lp = sample_uniform(2, S(3, 2), -2, 0), *nl = sample_indices(1, S(3), 2);
  pd_attrs nll = {.i = {-100, PD_REDUCTION_SUM}, .nv = {0, 1, 1}, .v = {{0}, {0}, {2}}};
  expect_refused(PD_OP_c_nll_loss, (pd_tensor *[]){lp, nl}, 2, &nll, "reduction 1 (only mean");
  nll.i[1] = PD_REDUCTION_MEAN;
  nll.nv[2] = 0;
  expect_refused(PD_OP_c_nll_loss, (pd_tensor *[]){lp, nl}, 2, &nll, "1 ring_ids but 0 nranks");
  nll.nv[2] = 1;
  nll.v[2][0] = 0;
  expect_refused(PD_OP_c_nll_loss, (pd_tensor *[]){lp, nl}, 2, &nll, "nranks[0] is 0");
  pd_scope_end();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_dropout_shard_is_the_whole_mask_slice),
      cmocka_unit_test(test_c_softmax_ce_one_shard_is_the_dense_op),
      cmocka_unit_test(test_c_softmax_ce_two_ranks_is_the_dense_op),
      cmocka_unit_test(test_c_nll_loss_one_shard_is_the_mean),
      cmocka_unit_test(test_c_embedding_reads_its_rows),
      cmocka_unit_test(test_attributes_that_do_not_fit_are_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
