/* SPMD rules of the contractions matmul's rule does not cover (addmm, dot)
 * and of the indexed reads and writes (gather_nd, scatter_nd_add, scatter,
 * scatter_; masked_select and nonzero replicate on purpose, see
 * spmd_rules.c's replicates_on_purpose). A contraction over a sharded dim leaves its result
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

/* gather_nd(x, index [..., K]) -> index.shape[:-1] + x.shape[K:]
 * (Paddle's GatherNdInferSpmd): the K addressed dims of x are gathered,
 * its other dims keep their shards in the output's trailing dims; the
 * index's batch dims (all but its last) keep theirs in the output's
 * leading dims, and its last dim is gathered. A mesh axis both would use
 * stays with x (the index, smaller, is gathered instead). */
static pd_status rule_gather_nd(pd_spmd_args *s) {
  const pd_meta *x = &s->in_meta[0], *ix = &s->in_meta[1];
  int xn = x->ndim, in = ix->ndim;
  if (in < 1 || in > PD_MAX_DIMS) return pd_ap_rule_replicated(s); /* infer_meta refuses it */
  int64_t k = ix->shape[in - 1];
  if (k < 0 || k > xn) return pd_ap_rule_replicated(s);
  int8_t xm[PD_MAX_DIMS], im[PD_MAX_DIMS], om[2 * PD_MAX_DIMS];
  bool taken[PD_SPMD_MAX_MESH_DIMS] = {0};
  for (int d = 0; d < xn; d++) {
    xm[d] = d < k ? -1 : mapped(s, 0, d);
    if (xm[d] >= 0 && xm[d] < PD_SPMD_MAX_MESH_DIMS) taken[xm[d]] = true;
  }
  for (int d = 0; d < in; d++) {
    im[d] = d < in - 1 ? mapped(s, 1, d) : -1;
    if (im[d] >= 0 && im[d] < PD_SPMD_MAX_MESH_DIMS && taken[im[d]]) im[d] = -1;
  }
  int no = 0;
  for (int d = 0; d < in - 1; d++) om[no++] = im[d];
  for (int d = (int)k; d < xn; d++) om[no++] = xm[d];
  want(s, 0, xm, xn);
  want(s, 1, im, in);
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

static bool linear_reduce(int8_t t) { return t == PD_REDUCE_SUM || t == PD_REDUCE_AVG; }

/* scatter(x, index, updates; i0 overwrite) and scatter_: rows of x (dim 0)
 * replaced or accumulated from updates' rows. As Paddle's ScatterInferSpmd,
 * x's other dims and updates' share one mapping, kept by the output. Where
 * Paddle differs:
 * - x's dim 0 keeps its shard: each rank writes the rows of its shard
 *   (the local step's scatter skips the other index entries, which a
 *   replicated index and updates' replicated dim 0 give every rank).
 * - index and updates' dim 0 are replicated. Paddle shards them together
 *   and marks the output Partial(sum), which sums x once per rank and loses
 *   the rows another rank's index zeroes or overwrites; no Partial of the
 *   output is right for a split index, as the rows it writes are not known
 *   to the other ranks.
 * - For a fixed index the output is linear in (x, updates): a Partial(sum)
 *   or Partial(avg) x or updates keeps that Partial, the other placed so too
 *   (coordinate 0 holds it, the others zeros for sum), and so does the
 *   output. Other reduce types are resolved first.
 * The inplace scatter_ writes x where it is: x's placement alone decides
 * (updates follow it), so x is never resharded; a Partial x of another
 * reduce type makes the dispatcher refuse it. */
static pd_status scatter_rule(pd_spmd_args *s, bool inplace) {
  const pd_meta *x = &s->in_meta[0], *u = &s->in_meta[2];
  int xn = x->ndim, nm = s->mesh_ndim < PD_SPMD_MAX_MESH_DIMS ? s->mesh_ndim : PD_SPMD_MAX_MESH_DIMS;
  /* updates is [n, x.shape[1:]] or, with a 0-D index, x.shape[1:] */
  int off = u->ndim == xn ? 0 : -1;
  int8_t map[PD_MAX_DIMS], part[PD_SPMD_MAX_MESH_DIMS];
  bool x_shards[PD_SPMD_MAX_MESH_DIMS] = {0};
  for (int d = 0; d < xn; d++) {
    map[d] = mapped(s, 0, d);
    if (map[d] >= 0 && map[d] < PD_SPMD_MAX_MESH_DIMS) x_shards[map[d]] = true;
  }
  for (int m = 0; m < nm; m++) {
    int8_t px = s->in[0].partial[m], pu = s->in[2].partial[m];
    part[m] = linear_reduce(px) ? px : !inplace && px < 0 && !x_shards[m] && linear_reduce(pu) ? pu : -1;
  }
  for (int d = 1; d < xn && !inplace; d++) {
    int8_t a = mapped(s, 2, d + off);
    if (map[d] < 0 && a >= 0 && a < nm && part[a] < 0 && !x_shards[a]) map[d] = a;
  }
  pd_spmd_dedupe(xn, map);
  want(s, 0, map, xn);
  pd_spmd_clear(&s->in_want[1]);
  pd_spmd_clear(&s->in_want[2]);
  for (int d = 1; d < xn; d++)
    if (d + off >= 0 && d + off < u->ndim && u->shape[d + off] > 1)
      s->in_want[2].dims_mapping[d + off] = map[d];
  place_out(s, 0, map, xn);
  for (int m = 0; m < nm; m++)
    if (part[m] >= 0) s->in_want[0].partial[m] = s->in_want[2].partial[m] = s->out[0].partial[m] = part[m];
  if (map[0] >= 0) s->local = pd_ap_local_step;
  return PD_OK;
}
static pd_status rule_scatter(pd_spmd_args *s) { return scatter_rule(s, false); }
static pd_status rule_scatter_inplace(pd_spmd_args *s) { return scatter_rule(s, true); }

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
    case PD_OP_scatter_:
      return rule_scatter_inplace;
    default:
      return NULL;
  }
}
