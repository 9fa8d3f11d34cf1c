/* SPMD rules of the contractions matmul's rule does not cover (addmm, dot)
 * and of the indexed reads and writes (gather_nd, scatter_nd_add, scatter;
 * masked_select and nonzero replicate on purpose, see spmd_rules.c's
 * replicates_on_purpose). A contraction over a sharded dim leaves its result
 * Partial(sum) on that mesh axis; an indexed op keeps the shards of the
 * dims its index does not address and gathers the ones it does. */
#include <string.h>

#include "spmd_util.h"

/* ---- contractions ------------------------------------------------------- */

/* addmm(input, x [M, K], y [K, N]; f0 beta, f1 alpha) = beta input +
 * alpha x y, input broadcast to [M, N]: M and N take the first mapping of
 * input, then x / y; a sharded K makes x y Partial(sum), so input is
 * placed Partial(sum) on that axis too (coordinate 0 keeps it, the others
 * hold zeros) and every rank's beta input_r + alpha x_r y_r sums to the
 * result. */
static pd_status rule_addmm(pd_spmd_args *s) {
  const pd_meta *in = &s->in_meta[0], *o = &s->out_meta[0];
  int lead = 2 - in->ndim;
  /* input's dims that are the output's M / N at full size */
  int im = lead == 0 && in->shape[0] == o->shape[0] ? 0 : -1;
  int in_ = in->ndim >= 1 && in->shape[in->ndim - 1] == o->shape[1] ? in->ndim - 1 : -1;
  int8_t map[3] = {pick(mapped(s, 0, im), mapped(s, 1, 0)), pick(mapped(s, 0, in_), mapped(s, 2, 1)),
                   pick(mapped(s, 1, 1), mapped(s, 2, 0))};
  pd_spmd_dedupe(3, map);
  int8_t m = map[0], n = map[1], k = map[2];
  pd_spmd_clear(&s->in_want[0]);
  if (im >= 0 && in->shape[im] > 1) s->in_want[0].dims_mapping[im] = m;
  if (in_ >= 0 && in->shape[in_] > 1) s->in_want[0].dims_mapping[in_] = n;
  want(s, 1, (const int8_t[]){m, k}, 2);
  want(s, 2, (const int8_t[]){k, n}, 2);
  place_out(s, 0, (const int8_t[]){m, n}, 2);
  if (k >= 0) {
    s->in_want[0].partial[k] = PD_REDUCE_SUM;
    s->out[0].partial[k] = PD_REDUCE_SUM;
  }
  return PD_OK;
}

/* dot(x, y): [n] . [n] -> [] or [B, n] . [B, n] -> [B]: the rows share one
 * mapping, a sharded n makes the result Partial(sum). */
static pd_status rule_dot(pd_spmd_args *s) {
  int nd = s->in_meta[0].ndim;
  if (nd < 1 || nd > 2) return pd_ap_rule_replicated(s); /* infer_meta refuses it */
  int8_t map[2];
  int last = nd - 1;
  map[0] = nd == 2 ? pick(mapped(s, 0, 0), mapped(s, 1, 0)) : -1;
  map[1] = pick(mapped(s, 0, last), mapped(s, 1, last));
  pd_spmd_dedupe(2, map);
  const int8_t *dims = nd == 2 ? map : map + 1;
  want(s, 0, dims, nd);
  want(s, 1, dims, nd);
  place_out(s, 0, map, nd - 1);
  if (map[1] >= 0) s->out[0].partial[map[1]] = PD_REDUCE_SUM;
  return PD_OK;
}

/* ---- indexed reads and writes ------------------------------------------- */

/* gather_nd(x, index [..., K]) -> index.shape[:-1] + x.shape[K:]: the K
 * addressed dims of x are gathered, its other dims keep their shards in
 * the output's trailing dims. The index is replicated: its backward reads
 * the index's values to make them non-negative, which a shard of it would
 * give at its local shape. (Paddle's GatherNdInferSpmd also lets the
 * index's leading dims shard the output's.) */
static pd_status rule_gather_nd(pd_spmd_args *s) {
  const pd_meta *x = &s->in_meta[0], *ix = &s->in_meta[1];
  int xn = x->ndim, in = ix->ndim;
  if (in < 1 || in > PD_MAX_DIMS) return pd_ap_rule_replicated(s); /* infer_meta refuses it */
  int64_t k = ix->shape[in - 1];
  if (k < 0 || k > xn) return pd_ap_rule_replicated(s);
  int8_t xm[PD_MAX_DIMS], om[2 * PD_MAX_DIMS];
  int no = 0;
  for (int d = 0; d < in - 1; d++) om[no++] = -1;
  for (int d = 0; d < xn; d++) {
    xm[d] = d < k ? -1 : mapped(s, 0, d);
    if (d >= k) om[no++] = xm[d];
  }
  want(s, 0, xm, xn);
  pd_spmd_clear(&s->in_want[1]);
  place_out(s, 0, om, no);
  return PD_OK;
}

/* scatter_nd_add(x, index [M..., K], updates [M..., x.shape[K:]]) -> as
 * x: the K addressed dims of x are gathered; x's other dims share their
 * shards with updates' trailing dims; index's leading dims with updates'
 * leading dims. A mesh axis that shards those leading dims splits the
 * updates: each rank adds its part into a Partial(sum) x (coordinate 0
 * holds x, the others zeros), so the result is Partial(sum) there. */
static pd_status rule_scatter_nd_add(pd_spmd_args *s) {
  const pd_meta *x = &s->in_meta[0], *ix = &s->in_meta[1], *u = &s->in_meta[2];
  int xn = x->ndim, in = ix->ndim, un = u->ndim;
  if (in < 1 || in > PD_MAX_DIMS) return pd_ap_rule_replicated(s);
  int64_t k = ix->shape[in - 1];
  int lead = in - 1;
  if (k < 0 || k > xn || un != lead + xn - k) return pd_ap_rule_replicated(s);
  int8_t map[2 * PD_MAX_DIMS]; /* updates' dims */
  memset(map, -1, sizeof map);
  for (int d = 0; d < lead; d++) map[d] = pick(mapped(s, 1, d), mapped(s, 2, d));
  for (int d = lead; d < un; d++) map[d] = pick(mapped(s, 0, (int)k + d - lead), mapped(s, 2, d));
  pd_spmd_dedupe(un, map);
  int8_t xm[PD_MAX_DIMS], im[PD_MAX_DIMS];
  for (int d = 0; d < xn; d++) xm[d] = d < k ? -1 : map[lead + d - k];
  for (int d = 0; d < in; d++) im[d] = d < lead ? map[d] : -1;
  want(s, 0, xm, xn);
  want(s, 1, im, in);
  want(s, 2, map, un);
  place_out(s, 0, xm, xn);
  for (int d = 0; d < lead; d++)
    if (map[d] >= 0) {
      s->in_want[0].partial[map[d]] = PD_REDUCE_SUM;
      s->out[0].partial[map[d]] = PD_REDUCE_SUM;
    }
  return PD_OK;
}

/* scatter(x, index, updates; i0 overwrite): rows of x (dim 0) replaced or
 * accumulated from updates' rows, so dim 0 of x and of updates is gathered
 * and the index replicated (an overwrite's last duplicate wins, which a
 * split of the updates would lose); the other dims of x and updates share
 * one mapping, kept by the output. (Paddle's ScatterInferSpmd also
 * replicates x's dim 0.) */
static pd_status rule_scatter(pd_spmd_args *s) {
  const pd_meta *x = &s->in_meta[0], *u = &s->in_meta[2];
  int xn = x->ndim;
  int8_t map[PD_MAX_DIMS];
  map[0] = -1;
  /* updates is [n, x.shape[1:]] or, with a 0-D index, x.shape[1:] */
  int off = u->ndim == xn ? 0 : -1;
  for (int d = 1; d < xn; d++) map[d] = pick(mapped(s, 0, d), mapped(s, 2, d + off));
  pd_spmd_dedupe(xn, map);
  want(s, 0, map, xn);
  pd_spmd_clear(&s->in_want[1]);
  pd_spmd_clear(&s->in_want[2]);
  for (int d = 1; d < xn; d++)
    if (d + off >= 0 && d + off < u->ndim && u->shape[d + off] > 1)
      s->in_want[2].dims_mapping[d + off] = map[d];
  place_out(s, 0, map, xn);
  return PD_OK;
}

pd_spmd_fn pd_ap_rule_index(pd_op_id id) {
  switch (id) {
    case PD_OP_addmm:
      return rule_addmm;
    case PD_OP_dot:
      return rule_dot;
    case PD_OP_gather_nd:
      return rule_gather_nd;
    case PD_OP_scatter_nd_add:
      return rule_scatter_nd_add;
    case PD_OP_scatter:
      return rule_scatter;
    default:
      return NULL;
  }
}
