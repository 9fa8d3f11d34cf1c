/* The SPMD rules whose shards compute something else than the op on them,
 * on 2 forked ranks: a vocab-sharded embedding (Partial output, Shard(0)
 * weight gradient), a class-sharded softmax cross entropy (the logits and
 * their gradient stay class-sharded), dropout on a shard (the global mask's
 * slice: exactly the one-process output for the same seed), the heads of
 * rotary embedding and attention kept sharded, and max/min over a sharded
 * dim (Partial) splitting the gradient over ties on both shards; the placements
 * of addmm and dot (Partial), nll_loss's mean, gather_nd, batch_norm and
 * multinomial; scatter and scatter_ into a row shard (duplicate indices
 * across the shards), through a Partial x or updates, and gather_nd with
 * its index's batch dims sharded, on 2 processes and on a 2x2 mesh of 4.
 * Each result, unsharded, equals the one-process result (float64 to
 * 1e-12). */
#include <stdio.h>
#include <string.h>

#include "dist_ranks.h"
#include "dtensor_checks.h"
#include "op_samples.h"
#include "test_util.h"

static void run_ranks(int n, int (*fn)(int rank)) { dist_run_ranks_or_fail(n, fn, 120); }

static bool placed(const pd_tensor *t, pd_dist_placement want) {
  pd_dist_placement p;
  return pd_dist_placements(t, &p, 1) == 1 && pd_dist_placement_equal(p, want);
}

static pd_dist_process_mesh *mesh2(void) {
  return pd_dist_process_mesh_new(1, (const int64_t[]){2}, (const int[]){0, 1}, NULL);
}

static pd_tensor *input(int ndim, const int64_t *shape) {
  pd_tensor *t = sample_uniform(ndim, shape, -1, 1);
  pd_tensor_set_stop_gradient(t, false);
  return t;
}

static pd_tensor *sharded(pd_tensor *x, pd_dist_process_mesh *m, pd_dist_placement p) {
  pd_tensor *d = pd_dist_shard_tensor(x, m, &p, 1);
  if (d) pd_tensor_set_stop_gradient(d, false);
  return d;
}

/* ---- embedding over a vocab-sharded table (7 rows: shards of 4 and 3) ---- */
static int rank_embedding(int rank) {
  pd_dist_process_mesh *m = mesh2();
  sample_reseed(3);
  pd_tensor *w = input(2, SHAPE(7, 3));
  pd_tensor *ids = pd_tensor_from_f64((const double[]){0, 6, 3, 4, 2, 5}, PD_INT64, 2, SHAPE(2, 3));
  pd_tensor *ref = pd_embedding(ids, w, 5); /* row 5, on rank 1, is padding */
  DIST_CHECK(pd_backward(dtensor_weighted_sum(ref), NULL, false) == PD_OK, 1);
  pd_tensor *dw = sharded(w, m, pd_dist_shard(0));
  pd_tensor *out = pd_embedding(ids, dw, 5);
  DIST_CHECK(out && placed(out, pd_dist_partial(PD_REDUCE_SUM)), 2);
  DIST_CHECK(dtensor_close(pd_dist_unshard_dtensor(out), ref, 1e-12), 3);
  DIST_CHECK(pd_backward(dtensor_weighted_sum(out), NULL, false) == PD_OK, 4);
  pd_tensor *g = pd_tensor_grad(dw);
  DIST_CHECK(g && placed(g, pd_dist_shard(0)), 5);
  DIST_CHECK(dtensor_close(pd_dist_unshard_dtensor(g), pd_tensor_grad(w), 1e-12), 6);
  pd_dist_process_mesh_release(m);
  return 0;
}

/* ---- softmax cross entropy over class-sharded logits --------------------- */
static int rank_cross_entropy(int rank) {
  pd_dist_process_mesh *m = mesh2();
  sample_reseed(5);
  for (int soft = 0; soft < 2; soft++) {
    pd_tensor *x = sample_uniform(2, SHAPE(4, 5), -8, 8); /* wide logits: the max matters */
    pd_tensor_set_stop_gradient(x, false);
    pd_tensor *label = soft ? pd_softmax(sample_uniform(2, SHAPE(4, 5), 0, 2), -1)
                            : pd_tensor_from_f64((const double[]){4, 0, -100, 2}, PD_INT64, 2, SHAPE(4, 1));
    pd_tensor *ref = pd_cross_entropy(x, label, NULL, -100, PD_REDUCTION_MEAN, soft, -1, true, 0.0);
    DIST_CHECK(pd_backward(ref, NULL, false) == PD_OK, 1);
    pd_tensor *dx = sharded(x, m, pd_dist_shard(1));
    pd_tensor *dl = soft ? sharded(label, m, pd_dist_shard(1)) : label;
    pd_tensor *loss = pd_softmax_with_cross_entropy(dx, dl, soft, -100, -1, NULL);
    DIST_CHECK(loss && placed(loss, pd_dist_replicate()), 2);
    pd_tensor *mean = pd_cross_entropy(dx, dl, NULL, -100, PD_REDUCTION_MEAN, soft, -1, true, 0.0);
    DIST_CHECK(dtensor_close(pd_dist_unshard_dtensor(mean), ref, 1e-12), 3);
    DIST_CHECK(pd_backward(mean, NULL, false) == PD_OK, 4);
    pd_tensor *g = pd_tensor_grad(dx);
    DIST_CHECK(g && placed(g, pd_dist_shard(1)), 5); /* no gather of the classes */
    DIST_CHECK(dtensor_close(pd_dist_unshard_dtensor(g), pd_tensor_grad(x), 1e-12), 6);
  }
  pd_dist_process_mesh_release(m);
  return 0;
}

/* ---- dropout on a shard: the one-process mask's slice ---------------------- */
static int rank_dropout(int rank) {
  pd_dist_process_mesh *m = mesh2();
  sample_reseed(9);
  pd_tensor *x = input(2, SHAPE(5, 7));
  for (int dim = 0; dim < 2; dim++) {
    pd_seed(77);
    pd_tensor *ref = pd_dropout(x, 0.4, 0, NULL, true, NULL);
    pd_tensor *after_ref = pd_uniform(1, SHAPE(3), PD_FLOAT64, 0, 1, 0);
    DIST_CHECK(pd_backward(dtensor_weighted_sum(ref), NULL, false) == PD_OK, 1);
    pd_tensor *gref = pd_clone(pd_tensor_grad(x), PD_FLOAT64);
    pd_tensor_clear_grad(x, false);
    pd_seed(77);
    pd_tensor *dx = sharded(x, m, pd_dist_shard(dim));
    pd_tensor *out = pd_dropout(dx, 0.4, 0, NULL, true, NULL);
    DIST_CHECK(out && placed(out, pd_dist_shard(dim)), 2);
    DIST_CHECK(dtensor_close(pd_dist_unshard_dtensor(out), ref, 0), 3);
    /* the generators moved as one process's did */
    DIST_CHECK(dtensor_close(pd_uniform(1, SHAPE(3), PD_FLOAT64, 0, 1, 0), after_ref, 0), 4);
    DIST_CHECK(pd_backward(dtensor_weighted_sum(out), NULL, false) == PD_OK, 5);
    DIST_CHECK(dtensor_close(pd_dist_unshard_dtensor(pd_tensor_grad(dx)), gref, 0), 6);
  }
  pd_dist_process_mesh_release(m);
  return 0;
}

/* ---- heads sharded through rotary embedding and attention ------------------ */
static int rank_heads(int rank) {
  pd_dist_process_mesh *m = mesh2();
  sample_reseed(13);
  pd_tensor *q = input(4, SHAPE(2, 3, 4, 6)), *k = input(4, SHAPE(2, 3, 4, 6)),
            *v = input(4, SHAPE(2, 3, 4, 6));
  pd_tensor *sin = sample_uniform(2, SHAPE(3, 6), -1, 1), *cos = sample_uniform(2, SHAPE(3, 6), -1, 1);
  pd_tensor *rq = NULL, *rk = NULL;
  DIST_CHECK(pd_fused_rotary_position_embedding(q, k, NULL, sin, cos, NULL, false, &rq, &rk, NULL) == PD_OK,
             1);
  pd_tensor *ref = pd_scaled_dot_product_attention(rq, rk, v, NULL, 0.0, true, true);
  DIST_CHECK(pd_backward(dtensor_weighted_sum(ref), NULL, false) == PD_OK, 2);
  pd_tensor *dq = sharded(q, m, pd_dist_shard(2)), *dk = sharded(k, m, pd_dist_shard(2));
  pd_tensor *dv = sharded(v, m, pd_dist_shard(2));
  pd_tensor *sq = NULL, *sk = NULL;
  DIST_CHECK(pd_fused_rotary_position_embedding(dq, dk, NULL, sin, cos, NULL, false, &sq, &sk, NULL) == PD_OK,
             3);
  DIST_CHECK(placed(sq, pd_dist_shard(2)) && placed(sk, pd_dist_shard(2)), 4);
  pd_tensor *out = pd_scaled_dot_product_attention(sq, sk, dv, NULL, 0.0, true, true);
  DIST_CHECK(out && placed(out, pd_dist_shard(2)), 5);
  DIST_CHECK(dtensor_close(pd_dist_unshard_dtensor(out), ref, 1e-12), 6);
  DIST_CHECK(pd_backward(dtensor_weighted_sum(out), NULL, false) == PD_OK, 7);
  pd_tensor *dense[3] = {q, k, v}, *dist[3] = {dq, dk, dv};
  for (int i = 0; i < 3; i++) {
    pd_tensor *g = pd_tensor_grad(dist[i]);
    DIST_CHECK(g && placed(g, pd_dist_shard(2)), 8);
    DIST_CHECK(dtensor_close(pd_dist_unshard_dtensor(g), pd_tensor_grad(dense[i]), 1e-12), 9);
  }
  pd_dist_process_mesh_release(m);
  return 0;
}

/* ---- max / min with ties on both shards: the gradient splits over all ---- */
static int rank_max_ties(int rank) {
  pd_dist_process_mesh *m = mesh2();
  const double v[] = {3, 1, 0, 3, -2, 1, 3, 0}; /* column 0's max 3 in rows 0, 1 (rank 0) and 3 (rank 1) */
  for (int full = 0; full < 2; full++)
    for (int is_min = 0; is_min < 2; is_min++) {
      pd_tensor *x = pd_tensor_from_f64(v, PD_FLOAT64, 2, SHAPE(4, 2));
      if (is_min) x = pd_neg(x);
      pd_tensor_set_stop_gradient(x, false);
      int64_t ax = 0;
      pd_tensor *ref = is_min ? pd_min(x, &ax, full ? 0 : 1, false) : pd_max(x, &ax, full ? 0 : 1, false);
      DIST_CHECK(pd_backward(dtensor_weighted_sum(ref), NULL, false) == PD_OK, 1);
      pd_tensor *dx = sharded(x, m, pd_dist_shard(0));
      pd_tensor *out = is_min ? pd_min(dx, &ax, full ? 0 : 1, false) : pd_max(dx, &ax, full ? 0 : 1, false);
      DIST_CHECK(out && placed(out, pd_dist_partial(is_min ? PD_REDUCE_MIN : PD_REDUCE_MAX)), 2);
      DIST_CHECK(dtensor_close(pd_dist_unshard_dtensor(out), ref, 0), 3);
      DIST_CHECK(pd_backward(dtensor_weighted_sum(out), NULL, false) == PD_OK, 4);
      DIST_CHECK(dtensor_close(pd_dist_unshard_dtensor(pd_tensor_grad(dx)), pd_tensor_grad(x), 1e-15), 5);
    }
  pd_dist_process_mesh_release(m);
  return 0;
}

/* The rules of the contractions, the indexed ops, nll_loss, batch_norm
 * and multinomial place their results as they say (a rule that replicated
 * everything would pass test_spmd_rules' value checks too). */
static int rank_placements(int rank) {
  (void)rank;
  pd_dist_process_mesh *m = mesh2();
  /* addmm and dot over a sharded contracted dim: Partial(sum) */
  pd_tensor *in = input(2, SHAPE(4, 5)), *x = input(2, SHAPE(4, 6)), *y = input(2, SHAPE(6, 5));
  pd_tensor *out = pd_addmm(in, sharded(pd_clone(x, PD_FLOAT64), m, pd_dist_shard(1)), y, 0.5, 2.0);
  DIST_CHECK(out && placed(out, pd_dist_partial(PD_REDUCE_SUM)), 1);
  DIST_CHECK(dtensor_close(pd_dist_unshard_dtensor(out), pd_addmm(in, x, y, 0.5, 2.0), 1e-12), 2);
  pd_tensor *v = input(1, SHAPE(6)), *dv = pd_dot(sharded(pd_clone(v, PD_FLOAT64), m, pd_dist_shard(0)), v);
  DIST_CHECK(dv && placed(dv, pd_dist_partial(PD_REDUCE_SUM)), 3);
  DIST_CHECK(dtensor_close(pd_dist_unshard_dtensor(dv), pd_dot(v, v), 1e-12), 4);
  /* nll_loss's mean over a batch shard: replicated, the gradient sharded */
  pd_tensor *logp = input(2, SHAPE(5, 4)), *lab = T(PD_INT64, 1, SHAPE(5), 3, 1, 0, 1, 2);
  pd_tensor *w = T(PD_FLOAT64, 1, SHAPE(4), 0.5, 1, 2, 1.5);
  pd_tensor *ref = pd_nll_loss(logp, lab, w, 1, PD_REDUCTION_MEAN);
  DIST_CHECK(pd_backward(ref, NULL, false) == PD_OK, 5);
  pd_tensor *dlogp = sharded(pd_clone(logp, PD_FLOAT64), m, pd_dist_shard(0));
  pd_tensor *loss = pd_nll_loss(dlogp, lab, w, 1, PD_REDUCTION_MEAN);
  DIST_CHECK(loss && placed(loss, pd_dist_replicate()), 6);
  DIST_CHECK(dtensor_close(pd_dist_unshard_dtensor(loss), ref, 1e-12), 7);
  DIST_CHECK(pd_backward(loss, NULL, false) == PD_OK, 8);
  pd_tensor *g = pd_tensor_grad(dlogp);
  DIST_CHECK(g && placed(g, pd_dist_shard(0)), 9);
  DIST_CHECK(dtensor_close(pd_dist_unshard_dtensor(g), pd_tensor_grad(logp), 1e-12), 10);
  /* a bad label in rank 1's rows (3, 4) fails both ranks, none waits */
  pd_tensor *bad = T(PD_INT64, 1, SHAPE(5), 3, 1, 0, 1, 7);
  DIST_CHECK(!pd_nll_loss(dlogp, bad, w, 1, PD_REDUCTION_MEAN), 20);
  DIST_CHECK(strstr(pd_last_error(), rank == 1 ? "label value 7 at index 1 is out of range"
                                               : "the labels of another shard are invalid"),
             21);
  /* gather_nd keeps the dims its index does not address */
  pd_tensor *gx = input(3, SHAPE(3, 4, 6)), *idx = T(PD_INT64, 2, SHAPE(2, 2), 0, 1, 2, 3);
  pd_tensor *gout = pd_gather_nd(sharded(pd_clone(gx, PD_FLOAT64), m, pd_dist_shard(2)), idx);
  DIST_CHECK(gout && placed(gout, pd_dist_shard(1)), 11);
  DIST_CHECK(dtensor_close(pd_dist_unshard_dtensor(gout), pd_gather_nd(gx, idx), 0), 12);
  /* batch_norm keeps a channel shard and gathers a batch shard (Paddle's rule) */
  pd_tensor *bx = input(3, SHAPE(4, 6, 3));
  pd_tensor *bref = pd_batch_norm(bx, pd_zeros(1, SHAPE(6), PD_FLOAT64), pd_ones(1, SHAPE(6), PD_FLOAT64),
                                  NULL, NULL, true, 0.9, 1e-5, "NCL", PD_GLOBAL_STATS_NONE);
  for (int dim = 0; dim < 2; dim++) {
    pd_tensor *bo = pd_batch_norm(sharded(pd_clone(bx, PD_FLOAT64), m, pd_dist_shard(dim)),
                                  pd_zeros(1, SHAPE(6), PD_FLOAT64), pd_ones(1, SHAPE(6), PD_FLOAT64), NULL,
                                  NULL, true, 0.9, 1e-5, "NCL", PD_GLOBAL_STATS_NONE);
    DIST_CHECK(bo && placed(bo, dim == 1 ? pd_dist_shard(1) : pd_dist_replicate()), 13);
    DIST_CHECK(dtensor_close(pd_dist_unshard_dtensor(bo), bref, 1e-12), 14);
  }
  /* multinomial keeps its rows sharded and draws what one process draws */
  pd_tensor *probs = sample_uniform(2, SHAPE(5, 7), 0.1, 1);
  pd_seed(99);
  pd_tensor *mref = pd_multinomial(probs, 3, true);
  pd_seed(99);
  pd_tensor *mo = pd_multinomial(sharded(pd_clone(probs, PD_FLOAT64), m, pd_dist_shard(0)), 3, true);
  DIST_CHECK(mo && placed(mo, pd_dist_shard(0)), 15);
  DIST_CHECK(dtensor_close(pd_dist_unshard_dtensor(mo), mref, 0), 16);
  pd_dist_process_mesh_release(m);
  return 0;
}

/* ---- scatter and scatter_ ------------------------------------------------- */
/* index with duplicates on both row shards of a 5-row x (rows 0-2 on rank
 * 0, 3-4 on rank 1): row 3 twice, so with overwrite the last one wins */
static pd_tensor *scatter_index(void) { return T(PD_INT64, 1, SHAPE(5), 3, 0, 3, 4, 1); }

static int rank_scatter(int rank) {
  pd_dist_process_mesh *m = mesh2();
  sample_reseed(17);
  pd_tensor *idx = scatter_index();
  for (int ow = 0; ow < 2; ow++) {
    pd_tensor *x = input(2, SHAPE(5, 4)), *u = input(2, SHAPE(5, 4));
    pd_tensor *ref = pd_scatter(x, idx, u, ow);
    DIST_CHECK(pd_backward(dtensor_weighted_sum(ref), NULL, false) == PD_OK, 1);
    /* x's row shard stays: each rank writes its own rows */
    pd_tensor *dx = sharded(pd_clone(x, PD_FLOAT64), m, pd_dist_shard(0));
    pd_tensor *du = sharded(pd_clone(u, PD_FLOAT64), m, pd_dist_shard(0));
    pd_tensor *out = pd_scatter(dx, idx, du, ow);
    DIST_CHECK(out && placed(out, pd_dist_shard(0)), 2);
    DIST_CHECK(dtensor_close(pd_dist_unshard_dtensor(out), ref, 0), 3);
    DIST_CHECK(pd_backward(dtensor_weighted_sum(out), NULL, false) == PD_OK, 4);
    DIST_CHECK(placed(pd_tensor_grad(dx), pd_dist_shard(0)), 5);
    DIST_CHECK(dtensor_close(pd_dist_unshard_dtensor(pd_tensor_grad(dx)), pd_tensor_grad(x), 1e-12), 6);
    DIST_CHECK(dtensor_close(pd_dist_unshard_dtensor(pd_tensor_grad(du)), pd_tensor_grad(u), 1e-12), 7);
    /* linear in (x, updates): a Partial(sum) x or updates keeps the output Partial(sum) */
    pd_tensor *px = sharded(pd_clone(x, PD_FLOAT64), m, pd_dist_partial(PD_REDUCE_SUM));
    out = pd_scatter(px, idx, u, ow);
    DIST_CHECK(out && placed(out, pd_dist_partial(PD_REDUCE_SUM)), 8);
    DIST_CHECK(dtensor_close(pd_dist_unshard_dtensor(out), ref, 1e-12), 9);
    pd_tensor *pu = sharded(pd_clone(u, PD_FLOAT64), m, pd_dist_partial(PD_REDUCE_SUM));
    out = pd_scatter(x, idx, pu, ow);
    DIST_CHECK(out && placed(out, pd_dist_partial(PD_REDUCE_SUM)), 10);
    DIST_CHECK(dtensor_close(pd_dist_unshard_dtensor(out), ref, 1e-12), 11);
    /* Partial(max) is not linear: resolved first */
    out = pd_scatter(sharded(pd_clone(x, PD_FLOAT64), m, pd_dist_partial(PD_REDUCE_MAX)), idx, u, ow);
    DIST_CHECK(out && placed(out, pd_dist_replicate()), 12);
    DIST_CHECK(dtensor_close(pd_dist_unshard_dtensor(out), ref, 0), 13);
  }
  pd_dist_process_mesh_release(m);
  return 0;
}

static int rank_scatter_inplace(int rank) {
  pd_dist_process_mesh *m = mesh2();
  sample_reseed(19);
  pd_tensor *idx = scatter_index();
  pd_tensor *x = sample_uniform(2, SHAPE(5, 4), -1, 1), *u = sample_uniform(2, SHAPE(5, 4), -1, 1);
  pd_tensor *ref = pd_scatter(x, idx, u, true);
  /* not recorded; x keeps its placement: a row shard, a column shard (updates follow), Partial(sum) */
  const pd_dist_placement keep[3] = {pd_dist_shard(0), pd_dist_shard(1), pd_dist_partial(PD_REDUCE_SUM)};
  for (int k = 0; k < 3; k++) {
    pd_tensor *dx = pd_dist_shard_tensor(pd_clone(x, PD_FLOAT64), m, &keep[k], 1);
    pd_tensor *du = pd_dist_shard_tensor(pd_clone(u, PD_FLOAT64), m,
                                         (pd_dist_placement[]){pd_dist_shard(k == 1 ? 0 : 1)}, 1);
    pd_tensor *out = pd_scatter_(dx, idx, du, true);
    DIST_CHECK(out == dx && placed(dx, keep[k]), 1);
    DIST_CHECK(dtensor_close(pd_dist_unshard_dtensor(dx), ref, 1e-12), 2);
  }
  /* a Partial(max) x would have to be resolved, which an inplace op cannot do */
  pd_tensor *mx = pd_dist_shard_tensor(pd_clone(x, PD_FLOAT64), m,
                                       (pd_dist_placement[]){pd_dist_partial(PD_REDUCE_MAX)}, 1);
  DIST_CHECK(!pd_scatter_(mx, idx, u, true) && strstr(pd_last_error(), "scatter_") &&
                 strstr(pd_last_error(), "reshard it first"),
             3);
  pd_clear_error();
  /* recorded (x needs a gradient): the result of scatter on a copy is placed as x */
  pd_tensor *x0 = input(2, SHAPE(5, 4));
  pd_tensor *xr = pd_scale(x0, 2, 0, true);
  DIST_CHECK(pd_scatter_(xr, idx, u, true) == xr, 4);
  DIST_CHECK(pd_backward(dtensor_weighted_sum(xr), NULL, false) == PD_OK, 5);
  for (int k = 0; k < 2; k++) {
    pd_tensor *d0 = sharded(pd_clone(x0, PD_FLOAT64), m, k ? pd_dist_shard(0) : pd_dist_replicate());
    pd_tensor *dr = pd_scale(d0, 2, 0, true);
    pd_tensor *du = sharded(pd_clone(u, PD_FLOAT64), m, pd_dist_shard(1)); /* the copy's result is Shard(1) */
    DIST_CHECK(pd_scatter_(dr, idx, du, true) == dr, 6);
    DIST_CHECK(placed(dr, k ? pd_dist_shard(0) : pd_dist_replicate()), 7);
    DIST_CHECK(dtensor_close(pd_dist_unshard_dtensor(dr), xr, 1e-12), 8);
    DIST_CHECK(pd_backward(dtensor_weighted_sum(dr), NULL, false) == PD_OK, 9);
    DIST_CHECK(dtensor_close(pd_dist_unshard_dtensor(pd_tensor_grad(d0)), pd_tensor_grad(x0), 1e-12), 10);
  }
  /* recorded, a dense x and a DTensor updates: refused by name, x untouched */
  pd_tensor *xd = pd_scale(x0, 2, 0, true);
  pd_tensor *ud = sharded(pd_clone(u, PD_FLOAT64), m, pd_dist_shard(1));
  DIST_CHECK(!pd_scatter_(xd, idx, ud, true) && strstr(pd_last_error(), "scatter_: x is a dense tensor"), 11);
  pd_clear_error();
  DIST_CHECK(dtensor_close(xd, pd_scale(x0, 2, 0, true), 0), 12);
  pd_dist_process_mesh_release(m);
  return 0;
}

/* ---- gather_nd with a sharded index ----------------------------------------- */
static int rank_gather_nd_index(int rank) {
  pd_dist_process_mesh *m = mesh2();
  sample_reseed(23);
  pd_tensor *x = input(3, SHAPE(3, 4, 6));
  pd_tensor *idx = T(PD_INT64, 3, SHAPE(2, 3, 2), 0, 1, 2, -1, 1, 3, -3, 0, 2, 2, 0, -4); /* negatives too */
  pd_tensor *ref = pd_gather_nd(x, idx);
  DIST_CHECK(pd_backward(dtensor_weighted_sum(ref), NULL, false) == PD_OK, 1);
  for (int d = 0; d < 2; d++) {
    pd_tensor *dx = sharded(pd_clone(x, PD_FLOAT64), m, pd_dist_replicate());
    pd_tensor *out =
        pd_gather_nd(dx, pd_dist_shard_tensor(idx, m, (pd_dist_placement[]){pd_dist_shard(d)}, 1));
    DIST_CHECK(out && placed(out, pd_dist_shard(d)), 2); /* the index's batch dims shard the output's */
    DIST_CHECK(dtensor_close(pd_dist_unshard_dtensor(out), ref, 0), 3);
    DIST_CHECK(pd_backward(dtensor_weighted_sum(out), NULL, false) == PD_OK, 4);
    DIST_CHECK(dtensor_close(pd_dist_unshard_dtensor(pd_tensor_grad(dx)), pd_tensor_grad(x), 1e-12), 5);
  }
  /* one mesh axis for an index batch dim and x's kept dim: x keeps it */
  pd_tensor *out = pd_gather_nd(sharded(pd_clone(x, PD_FLOAT64), m, pd_dist_shard(2)),
                                pd_dist_shard_tensor(idx, m, (pd_dist_placement[]){pd_dist_shard(0)}, 1));
  DIST_CHECK(out && placed(out, pd_dist_shard(2)), 6);
  DIST_CHECK(dtensor_close(pd_dist_unshard_dtensor(out), ref, 0), 7);
  pd_dist_process_mesh_release(m);
  return 0;
}

/* ---- the same on a 2x2 mesh ---------------------------------------------------- */
static int rank_indexed_2d(int rank) {
  pd_dist_process_mesh *m = pd_dist_process_mesh_new(2, SHAPE(2, 2), (const int[]){0, 1, 2, 3}, NULL);
  sample_reseed(29);
  pd_tensor *idx = scatter_index();
  pd_tensor *x = input(2, SHAPE(5, 4)), *u = input(2, SHAPE(5, 4));
  pd_tensor *ref = pd_scatter(x, idx, u, true);
  DIST_CHECK(pd_backward(dtensor_weighted_sum(ref), NULL, false) == PD_OK, 1);
  /* rows on axis 0, columns on axis 1; a Partial(sum) updates on axis 1 yields to x's columns */
  const pd_dist_placement xp[2] = {pd_dist_shard(0), pd_dist_shard(1)};
  pd_tensor *dx = pd_dist_shard_tensor(pd_clone(x, PD_FLOAT64), m, xp, 2);
  pd_tensor_set_stop_gradient(dx, false);
  pd_tensor *out = pd_scatter(dx, idx, u, true);
  DIST_CHECK(dtensor_placed(out, xp, 2), 2);
  DIST_CHECK(dtensor_close(pd_dist_unshard_dtensor(out), ref, 0), 3);
  DIST_CHECK(pd_backward(dtensor_weighted_sum(out), NULL, false) == PD_OK, 4);
  DIST_CHECK(dtensor_close(pd_dist_unshard_dtensor(pd_tensor_grad(dx)), pd_tensor_grad(x), 1e-12), 5);
  const pd_dist_placement pp[2] = {pd_dist_partial(PD_REDUCE_SUM), pd_dist_shard(1)};
  out = pd_scatter(pd_dist_shard_tensor(pd_clone(x, PD_FLOAT64), m, pp, 2), idx, u, true);
  DIST_CHECK(dtensor_placed(out, pp, 2), 6);
  DIST_CHECK(dtensor_close(pd_dist_unshard_dtensor(out), ref, 1e-12), 7);
  pd_tensor *ix = pd_dist_shard_tensor(pd_clone(x, PD_FLOAT64), m, pp, 2);
  DIST_CHECK(pd_scatter_(ix, idx, u, true) == ix && dtensor_placed(ix, pp, 2), 8);
  DIST_CHECK(dtensor_close(pd_dist_unshard_dtensor(ix), ref, 1e-12), 9);
  /* gather_nd: the index's batch dim on axis 0, x's kept dim on axis 1 */
  pd_tensor *gx = input(3, SHAPE(3, 4, 6));
  pd_tensor *gi = T(PD_INT64, 3, SHAPE(2, 3, 2), 0, 1, 2, -1, 1, 3, -3, 0, 2, 2, 0, -4);
  pd_tensor *gref = pd_gather_nd(gx, gi);
  DIST_CHECK(pd_backward(dtensor_weighted_sum(gref), NULL, false) == PD_OK, 10);
  const pd_dist_placement gxp[2] = {pd_dist_replicate(), pd_dist_shard(2)};
  const pd_dist_placement gip[2] = {pd_dist_shard(1), pd_dist_replicate()};
  const pd_dist_placement gop[2] = {pd_dist_shard(1), pd_dist_shard(2)};
  pd_tensor *dgx = pd_dist_shard_tensor(pd_clone(gx, PD_FLOAT64), m, gxp, 2);
  pd_tensor_set_stop_gradient(dgx, false);
  pd_tensor *gout = pd_gather_nd(dgx, pd_dist_shard_tensor(gi, m, gip, 2));
  DIST_CHECK(dtensor_placed(gout, gop, 2), 11);
  DIST_CHECK(dtensor_close(pd_dist_unshard_dtensor(gout), gref, 0), 12);
  DIST_CHECK(pd_backward(dtensor_weighted_sum(gout), NULL, false) == PD_OK, 13);
  DIST_CHECK(dtensor_close(pd_dist_unshard_dtensor(pd_tensor_grad(dgx)), pd_tensor_grad(gx), 1e-12), 14);
  pd_dist_process_mesh_release(m);
  return 0;
}

/* nll_loss's mean with its samples split on both axes of a 2x2 mesh (N on
 * axis 0, the trailing dim on axis 1): c_nll_loss sums over both groups,
 * the loss is replicated and the gradient keeps both shards. */
static int rank_nll_mean_2d(int rank) {
  (void)rank;
  pd_dist_process_mesh *m = pd_dist_process_mesh_new(2, SHAPE(2, 2), (const int[]){0, 1, 2, 3}, NULL);
  sample_reseed(31);
  pd_tensor *logp = input(3, SHAPE(4, 3, 2));
  pd_tensor *lab = T(PD_INT64, 2, SHAPE(4, 2), 0, 1, 2, 1, 1, 1, 0, 2); /* 1 ignored: shards weigh apart */
  pd_tensor *w = T(PD_FLOAT64, 1, SHAPE(3), 0.5, 2, 1.5);
  pd_tensor *ref = pd_nll_loss(logp, lab, w, 1, PD_REDUCTION_MEAN);
  DIST_CHECK(pd_backward(ref, NULL, false) == PD_OK, 1);
  const pd_dist_placement xp[2] = {pd_dist_shard(0), pd_dist_shard(2)};
  pd_tensor *dlogp = pd_dist_shard_tensor(pd_clone(logp, PD_FLOAT64), m, xp, 2);
  pd_tensor_set_stop_gradient(dlogp, false);
  pd_tensor *loss = pd_nll_loss(dlogp, lab, w, 1, PD_REDUCTION_MEAN);
  const pd_dist_placement rep[2] = {pd_dist_replicate(), pd_dist_replicate()};
  DIST_CHECK(loss && dtensor_placed(loss, rep, 2), 2);
  DIST_CHECK(dtensor_close(pd_dist_unshard_dtensor(loss), ref, 1e-12), 3);
  DIST_CHECK(pd_backward(loss, NULL, false) == PD_OK, 4);
  DIST_CHECK(dtensor_placed(pd_tensor_grad(dlogp), xp, 2), 5);
  DIST_CHECK(dtensor_close(pd_dist_unshard_dtensor(pd_tensor_grad(dlogp)), pd_tensor_grad(logp), 1e-12), 6);
  pd_dist_process_mesh_release(m);
  return 0;
}

static void test_nll_mean_on_2x2_mesh(void **state) {
  (void)state;
  run_ranks(4, rank_nll_mean_2d);
}

static void test_scatter_row_shard_and_partial(void **state) {
  (void)state;
  run_ranks(2, rank_scatter);
}
static void test_scatter_inplace_keeps_placement(void **state) {
  (void)state;
  run_ranks(2, rank_scatter_inplace);
}
static void test_gather_nd_index_batch_sharded(void **state) {
  (void)state;
  run_ranks(2, rank_gather_nd_index);
}
static void test_indexed_on_2x2_mesh(void **state) {
  (void)state;
  run_ranks(4, rank_indexed_2d);
}

static void test_placements_of_contractions_indexing_and_norms(void **state) {
  (void)state;
  run_ranks(2, rank_placements);
}

static void test_embedding_vocab_sharded(void **state) {
  (void)state;
  run_ranks(2, rank_embedding);
}
static void test_cross_entropy_class_sharded(void **state) {
  (void)state;
  run_ranks(2, rank_cross_entropy);
}
static void test_dropout_shard_is_mask_slice(void **state) {
  (void)state;
  run_ranks(2, rank_dropout);
}
static void test_max_min_ties_across_shards(void **state) {
  (void)state;
  run_ranks(2, rank_max_ties);
}
static void test_heads_sharded_rotary_attention(void **state) {
  (void)state;
  run_ranks(2, rank_heads);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_embedding_vocab_sharded),
      cmocka_unit_test(test_cross_entropy_class_sharded),
      cmocka_unit_test(test_dropout_shard_is_mask_slice),
      cmocka_unit_test(test_heads_sharded_rotary_attention),
      cmocka_unit_test(test_max_min_ties_across_shards),
      cmocka_unit_test(test_placements_of_contractions_indexing_and_norms),
      cmocka_unit_test(test_scatter_row_shard_and_partial),
      cmocka_unit_test(test_scatter_inplace_keeps_placement),
      cmocka_unit_test(test_gather_nd_index_batch_sharded),
      cmocka_unit_test(test_indexed_on_2x2_mesh),
      cmocka_unit_test(test_nll_mean_on_2x2_mesh),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
