/* SPMD rules of the nn ops: embedding (a vocab-sharded table gives a
 * Partial output, as Paddle's c_embedding), softmax cross entropy (a
 * class-sharded input, as ParallelCrossEntropy), dropout (a shard draws its
 * part of the global mask), scaled_dot_product_attention (batch and heads
 * sharded), slice_grad, index_add and the elementwise losses, with their
 * grad ops. The ops whose local computation differs from the op on the
 * shards name a local step (spmd_local.c). Merging is spmd_rules.c's: per
 * dim the first mapped operand wins, a mesh axis claimed twice keeps its
 * first dim, dims of size 1 are never sharded. */
#include <string.h>

#include "paddlec/loss.h"
#include "spmd_util.h"

/* ---- embedding ---------------------------------------------------------- */

/* embedding(ids, weight [V, D]) -> [ids..., D]: the ids keep their shards,
 * D follows the weight's dim 1; a weight sharded on V (dim 0) leaves each
 * rank the rows of its vocab range, ids outside it read zeros, and the
 * output is Partial(sum) on that mesh axis. */
static pd_status rule_embedding(pd_spmd_args *s) {
  int nd = s->in_meta[0].ndim;
  if (nd < 0 || nd >= PD_MAX_DIMS) return pd_ap_rule_replicated(s); /* infer_meta refuses it */
  int8_t map[PD_MAX_DIMS + 2];
  for (int d = 0; d < nd; d++) map[d] = mapped(s, 0, d);
  map[nd] = mapped(s, 1, 1);     /* D */
  map[nd + 1] = mapped(s, 1, 0); /* V */
  pd_spmd_dedupe(nd + 2, map);
  want(s, 0, map, nd);
  want(s, 1, (const int8_t[]){map[nd + 1], map[nd]}, 2);
  place_out(s, 0, map, nd + 1);
  if (map[nd + 1] >= 0) {
    s->out[0].partial[map[nd + 1]] = PD_REDUCE_SUM;
    s->local = pd_ap_local_step;
  }
  return PD_OK;
}

/* embedding_grad(ids, dout, [weight]) -> dweight [V, D]: placed as the
 * weight (a vocab shard scatters only its rows); a mesh axis sharding the
 * ids sums partial tables, so dweight is Partial(sum) on it. */
static pd_status rule_embedding_grad(pd_spmd_args *s) {
  int nd = s->in_meta[0].ndim;
  if (nd < 0 || nd >= PD_MAX_DIMS) return pd_ap_rule_replicated(s); /* infer_meta refuses it */
  bool has_w = s->n_in == 3;
  int8_t map[PD_MAX_DIMS + 2];
  for (int d = 0; d < nd; d++) map[d] = pick(mapped(s, 0, d), mapped(s, 1, d));
  map[nd] = pick(mapped(s, 1, nd), has_w ? mapped(s, 2, 1) : -1);
  map[nd + 1] = has_w ? mapped(s, 2, 0) : -1;
  pd_spmd_dedupe(nd + 2, map);
  want(s, 0, map, nd);
  want(s, 1, map, nd + 1);
  if (has_w) want(s, 2, (const int8_t[]){map[nd + 1], map[nd]}, 2);
  place_out(s, 0, (const int8_t[]){map[nd + 1], map[nd]}, 2);
  for (int d = 0; d < nd; d++)
    if (map[d] >= 0) s->out[0].partial[map[d]] = PD_REDUCE_SUM;
  if (map[nd + 1] >= 0) s->local = pd_ap_local_step;
  return PD_OK;
}

/* ---- softmax cross entropy ---------------------------------------------- */

/* cross_entropy_with_softmax(x, label) -> (loss, lse), attrs i0 soft_label,
 * i1 use_softmax, i3 axis; and its grad op (x, label, lse, dloss) -> dx.
 * The samples' dims keep their shards. With softmax, a class-sharded x
 * stays so: the local step allreduces the row max, the sum of exponentials
 * and the target logit over the class shards (ParallelCrossEntropy), and
 * the gradient is local given the label's offset. Without softmax (x holds
 * probabilities) the class dim is gathered. */
static pd_status rule_cross_entropy(pd_spmd_args *s) {
  int nd = s->in_meta[0].ndim, ax = norm_axis(s->attrs->i[3], nd);
  if (nd < 1 || nd > PD_MAX_DIMS || ax < 0 || ax >= nd) return pd_ap_rule_replicated(s); /* refused */
  bool grad = s->def == &pd_opdef_cross_entropy_with_softmax_grad, soft = s->attrs->i[0] != 0;
  int8_t map[PD_MAX_DIMS];
  memset(map, -1, sizeof map);
  for (int d = 0; d < nd; d++)
    for (int i = 0; i < s->n_in; i++) map[d] = pick(map[d], mapped(s, i, d));
  map[ax] = s->attrs->i[1] ? pick(mapped(s, 0, ax), soft ? mapped(s, 1, ax) : -1) : -1;
  /* the class shard wins its mesh axis over a sample dim */
  for (int d = 0; d < nd; d++)
    if (d != ax && map[d] >= 0 && map[d] == map[ax]) map[d] = -1;
  pd_spmd_dedupe(nd, map);
  int8_t rows[PD_MAX_DIMS];
  memcpy(rows, map, sizeof rows);
  rows[ax] = -1;
  want(s, 0, map, nd);
  want(s, 1, soft ? map : rows, nd);
  for (int i = 2; i < s->n_in; i++) want(s, i, rows, nd);
  for (int k = 0; k < s->n_out; k++) place_out(s, k, grad ? map : rows, nd);
  if (map[ax] >= 0) s->local = pd_ap_local_step;
  return PD_OK;
}

/* ---- dropout ------------------------------------------------------------ */

/* Same-shape random ops (x -> out[, mask / noise]): the outputs as x; the
 * local step draws, for each element of the shard, the number the whole
 * tensor's draw gives its global index, so the sharded result is the
 * unsharded one's slice (spmd_local_random.c). */
static pd_status rule_drawn_elementwise(pd_spmd_args *s, pd_spmd_local_fn local) {
  pd_spmd_dist d = s->in[0];
  pd_spmd_drop_partial(&d);
  int nd = s->in_meta[0].ndim;
  for (int k = 0; k < nd; k++)
    if (s->in_meta[0].shape[k] <= 1) d.dims_mapping[k] = -1;
  s->in_want[0] = d;
  for (int k = 0; k < s->n_out; k++) s->out[k] = d;
  for (int k = 0; k < nd; k++)
    if (d.dims_mapping[k] >= 0) s->local = local;
  return PD_OK;
}

/* dropout(x) -> (out, mask), no shared-mask axes: as above. With axes (one
 * draw shared along the other dims) the mask has another shape than x and
 * everything is replicated. */
static pd_status rule_dropout(pd_spmd_args *s) {
  if (s->attrs->nv[0] > 0) return pd_ap_rule_replicated(s);
  return rule_drawn_elementwise(s, pd_ap_local_step);
}

/* alpha_dropout (out, mask), bernoulli, rrelu (out, noise; i0 is_test
 * draws nothing: the plain op on the shard). */
static pd_status rule_random_elementwise(pd_spmd_args *s) {
  const pd_op_def *def = s->def;
  if (def == &pd_opdef_alpha_dropout) return rule_drawn_elementwise(s, pd_ap_local_alpha_dropout);
  if (def == &pd_opdef_bernoulli) return rule_drawn_elementwise(s, pd_ap_local_bernoulli);
  return rule_drawn_elementwise(s, s->attrs->i[0] ? NULL : pd_ap_local_rrelu);
}

/* multinomial(x [rows, categories] or [categories]; i0 num_samples) ->
 * [rows, num_samples]: each row's draws depend on its global index only,
 * so the rows keep their shard (the local step tells the op its first
 * row); the categories are gathered. */
static pd_status rule_multinomial(pd_spmd_args *s) {
  int8_t r = s->in_meta[0].ndim == 2 ? mapped(s, 0, 0) : -1;
  int8_t map[2] = {r, -1};
  want(s, 0, map, s->in_meta[0].ndim);
  place_out(s, 0, map, s->out_meta[0].ndim);
  if (r >= 0) s->local = pd_ap_local_step;
  return PD_OK;
}

/* ---- scaled_dot_product_attention --------------------------------------- */

/* q, k, v [batch, seq, heads, head_dim]: batch and heads keep their shards
 * (attention is independent per batch and head), seq and head_dim are
 * gathered; the mask (broadcast to [batch, heads, sq, sk]) follows batch and
 * heads; out is [b, s, h, d], softmax_lse [b, h, s], seed_offset replicated.
 * The grad op (q, k, v, [mask], out, lse, seed_offset, dout -> dq, dk, dv)
 * places the same way. With dropout active the draws follow the local
 * shapes, so everything is replicated. */
static pd_status rule_sdpa(pd_spmd_args *s) {
  if (s->attrs->i[2]) return pd_ap_rule_replicated(s);
  bool grad = s->def == &pd_opdef_scaled_dot_product_attention_grad, has_mask = s->attrs->i[1] != 0;
  int8_t b = -1, h = -1;
  for (int i = 0; i < 3; i++) {
    b = pick(b, mapped(s, i, 0));
    h = pick(h, mapped(s, i, 2));
  }
  if (h == b) h = -1;
  const int8_t bshd[4] = {b, -1, h, -1}, bhs[3] = {b, h, -1};
  for (int i = 0; i < 3; i++) want(s, i, bshd, 4);
  int next = 3;
  if (has_mask && s->n_in > 3) {
    const pd_meta *m = &s->in_meta[3], *q = &s->in_meta[0];
    int8_t mm[4] = {-1, -1, -1, -1};
    int r = m->ndim;
    if (r >= 4 && m->shape[r - 4] == q->shape[0]) mm[r - 4] = b;
    if (r >= 3 && m->shape[r - 3] == q->shape[2]) mm[r - 3] = h;
    want(s, 3, mm, r);
    next = 4;
  }
  if (grad) {
    /* out, lse, seed_offset, dout */
    if (next < s->n_in) want(s, next, bshd, 4);
    if (next + 1 < s->n_in) want(s, next + 1, bhs, 3);
    if (next + 2 < s->n_in) pd_spmd_clear(&s->in_want[next + 2]);
    if (next + 3 < s->n_in) want(s, next + 3, bshd, 4);
    for (int k = 0; k < s->n_out; k++) place_out(s, k, bshd, 4);
  } else {
    place_out(s, 0, bshd, 4);
    if (s->n_out > 1) place_out(s, 1, bhs, 3);
    if (s->n_out > 2) pd_spmd_clear(&s->out[2]);
  }
  return PD_OK;
}

/* ---- manipulation grads and index_add ----------------------------------- */

/* slice_grad(dout; v0 x_shape, v1 starts, v2 steps): a dim the slice took
 * whole (start 0, step 1, full length) keeps dout's shard, the others are
 * gathered (the dispatcher gives the op its local x_shape). */
static pd_status rule_slice_grad(pd_spmd_args *s) {
  const pd_attrs *a = s->attrs;
  int nd = s->in_meta[0].ndim;
  int8_t map[PD_MAX_DIMS];
  for (int d = 0; d < nd; d++) {
    bool whole = d < a->nv[0] && a->v[1][d] == 0 && a->v[2][d] == 1 && a->v[0][d] == s->in_meta[0].shape[d];
    map[d] = whole ? mapped(s, 0, d) : -1;
  }
  want(s, 0, map, nd);
  place_out(s, 0, map, nd);
  return PD_OK;
}

/* index_add(x, index, value; i0 axis): the indexed axis is gathered in x
 * and value, their other dims share one mapping, index is replicated. */
static pd_status rule_index_add(pd_spmd_args *s) {
  int nd = s->in_meta[0].ndim, ax = norm_axis(s->attrs->i[0], nd);
  int8_t map[PD_MAX_DIMS];
  for (int d = 0; d < nd; d++) map[d] = d == ax ? -1 : pick(mapped(s, 0, d), mapped(s, 2, d));
  pd_spmd_dedupe(nd, map);
  want(s, 0, map, nd);
  pd_spmd_clear(&s->in_want[1]);
  want(s, 2, map, nd);
  place_out(s, 0, map, nd);
  return PD_OK;
}

/* ---- elementwise losses --------------------------------------------------- */

/* The elementwise losses (mse_loss, l1_loss, smooth_l1_loss,
 * binary_cross_entropy(_with_logits), margin_ranking_loss, kl_div; i0
 * reduction),
 * broadcasting: the dims of the broadcast shape take the first input's
 * mapping that is not broadcast. 'none' keeps it; 'sum' leaves the scalar
 * Partial(sum) on the mesh axes used; 'mean' Partial(avg) where the dim
 * splits evenly (each shard's mean then weighs the same), else the dim is
 * gathered; kl_div's 'batchmean' (the sum over the batch's size) gathers
 * the batch dim and leaves the rest Partial(sum). */
static pd_status rule_ew_loss(pd_spmd_args *s) {
  int on = 0;
  for (int i = 0; i < s->n_in; i++)
    if (s->in_meta[i].ndim > on) on = s->in_meta[i].ndim;
  if (on > PD_MAX_DIMS) return pd_ap_rule_replicated(s);
  int64_t shape[PD_MAX_DIMS];
  int8_t map[PD_MAX_DIMS];
  for (int od = 0; od < on; od++) {
    shape[od] = 1;
    for (int i = 0; i < s->n_in; i++) {
      int d = od - (on - s->in_meta[i].ndim);
      if (d >= 0 && s->in_meta[i].shape[d] > shape[od]) shape[od] = s->in_meta[i].shape[d];
    }
    map[od] = -1;
    for (int i = 0; i < s->n_in && map[od] < 0; i++) {
      int d = od - (on - s->in_meta[i].ndim);
      if (d >= 0 && s->in_meta[i].shape[d] == shape[od]) map[od] = mapped(s, i, d);
    }
  }
  int64_t red = s->attrs->i[0];
  if (red == PD_REDUCTION_BATCHMEAN && on > 0) map[0] = -1; /* the sum over the whole batch's size */
  if (red == PD_REDUCTION_MEAN)
    for (int od = 0; od < on; od++)
      if (map[od] >= 0 && shape[od] % s->mesh_shape[map[od]] != 0) map[od] = -1;
  pd_spmd_dedupe(on, map);
  for (int i = 0; i < s->n_in; i++) {
    const pd_meta *m = &s->in_meta[i];
    pd_spmd_clear(&s->in_want[i]);
    for (int d = 0; d < m->ndim; d++) {
      int od = d + on - m->ndim;
      if (m->shape[d] == shape[od] && m->shape[d] > 1) s->in_want[i].dims_mapping[d] = map[od];
    }
  }
  if (red == PD_REDUCTION_NONE) {
    place_out(s, 0, map, on);
    return PD_OK;
  }
  pd_spmd_clear(&s->out[0]);
  for (int od = 0; od < on; od++)
    if (map[od] >= 0) s->out[0].partial[map[od]] = red == PD_REDUCTION_MEAN ? PD_REDUCE_AVG : PD_REDUCE_SUM;
  return PD_OK;
}

/* pad and pad_grad (v0, v1 the pads before and after each dim): a dim
 * without pads keeps its shard, a padded one is gathered. */
static pd_status rule_pad(pd_spmd_args *s) {
  const pd_attrs *a = s->attrs;
  int nd = s->in_meta[0].ndim;
  int8_t map[PD_MAX_DIMS];
  for (int d = 0; d < nd && d < PD_MAX_DIMS; d++) {
    bool unpadded = d < a->nv[0] && d < a->nv[1] && a->v[0][d] == 0 && a->v[1][d] == 0;
    map[d] = unpadded ? mapped(s, 0, d) : -1;
  }
  want(s, 0, map, nd);
  place_out(s, 0, map, nd);
  return PD_OK;
}

/* ---- ops along axes, t, squared_l2_norm ---------------------------------- */

/* Ops that mix the elements along some axes (flip, roll, topk, argsort,
 * glu): those axes are gathered, the others keep their shards in x and in
 * every output of x's rank. roll without axes rolls the flattened tensor:
 * everything is gathered. */
static pd_status rule_along_axes(pd_spmd_args *s) {
  int nd = s->in_meta[0].ndim;
  const pd_attrs *a = s->attrs;
  bool whole[PD_MAX_DIMS] = {0};
  const pd_op_def *def = s->def;
  if (def == &pd_opdef_flip || def == &pd_opdef_roll) {
    int slot = def == &pd_opdef_roll ? 1 : 0;
    for (int k = 0; k < a->nv[slot]; k++) {
      int ax = norm_axis(a->v[slot][k], nd);
      if (ax >= 0 && ax < nd) whole[ax] = true;
    }
    if (def == &pd_opdef_roll && a->nv[1] == 0)
      for (int d = 0; d < nd; d++) whole[d] = true;
  } else {
    int ax = norm_axis(def == &pd_opdef_topk ? a->i[1] : a->i[0], nd);
    if (ax >= 0 && ax < nd) whole[ax] = true;
  }
  int8_t map[PD_MAX_DIMS];
  for (int d = 0; d < nd && d < PD_MAX_DIMS; d++) map[d] = whole[d] ? -1 : mapped(s, 0, d);
  want(s, 0, map, nd);
  for (int k = 0; k < s->n_out; k++) {
    pd_spmd_clear(&s->out[k]);
    if (s->out_meta[k].ndim == nd) place_out(s, k, map, nd);
  }
  return PD_OK;
}

/* take_along(x, index; i0 axis) and scatter_along(values, index; i0 axis,
 * v0 the output's shape; topk's backward): the axis is gathered; another
 * dim keeps its shard where both inputs and the output have it at one
 * size (the dispatcher gives scatter_along its local output shape). */
static pd_status rule_along_index(pd_spmd_args *s) {
  const pd_meta *o = &s->out_meta[0];
  int nd = o->ndim, ax = norm_axis(s->attrs->i[0], nd);
  int8_t map[PD_MAX_DIMS];
  for (int d = 0; d < nd && d < PD_MAX_DIMS; d++) {
    bool same = s->in_meta[0].ndim == nd && s->in_meta[1].ndim == nd &&
                s->in_meta[0].shape[d] == o->shape[d] && s->in_meta[1].shape[d] == o->shape[d];
    map[d] = d == ax || !same ? -1 : pick(mapped(s, 0, d), mapped(s, 1, d));
  }
  want(s, 0, map, nd);
  want(s, 1, map, nd);
  place_out(s, 0, map, nd);
  return PD_OK;
}

/* t: a 2-D x's dims swap their shards; 0-D and 1-D are the identity. */
static pd_status rule_t(pd_spmd_args *s) {
  int nd = s->in_meta[0].ndim;
  int8_t map[2] = {mapped(s, 0, 0), mapped(s, 0, 1)};
  want(s, 0, map, nd);
  if (nd == 2)
    place_out(s, 0, (const int8_t[]){map[1], map[0]}, 2);
  else
    place_out(s, 0, map, nd);
  return PD_OK;
}

/* squared_l2_norm (the gradient clippings' sum of squares, 0-D): each
 * shard's sum is Partial(sum) on the mesh axes that shard x. */
static pd_status rule_sqnorm(pd_spmd_args *s) {
  int nd = s->in_meta[0].ndim;
  int8_t map[PD_MAX_DIMS];
  for (int d = 0; d < nd && d < PD_MAX_DIMS; d++) map[d] = mapped(s, 0, d);
  want(s, 0, map, nd);
  pd_spmd_clear(&s->out[0]);
  for (int d = 0; d < nd && d < PD_MAX_DIMS; d++)
    if (map[d] >= 0) s->out[0].partial[map[d]] = PD_REDUCE_SUM;
  return PD_OK;
}

/* ---- nll_loss ------------------------------------------------------------ */

/* nll_loss(x [N, C, d...], label [N, d...], [weight [C]]; i0 ignore_index,
 * i1 reduction) and nll_loss_grad(label, g, [weight]; v0 x's shape) -> dx:
 * the sample dims (N, d...) keep their shards in x, the label, a 'none'
 * loss and its gradient; the class dim is gathered and the weight
 * replicated. 'sum' leaves the scalar Partial(sum) on the mesh axes that
 * shard the samples; 'mean' divides by the total weight of the whole
 * batch's labels: the local step is c_nll_loss(_grad), which all-reduces
 * each shard's sums (the loss is then replicated). */
static pd_status rule_nll(pd_spmd_args *s) {
  bool grad = s->def == &pd_opdef_nll_loss_grad, none = s->attrs->i[1] == PD_REDUCTION_NONE;
  int li = grad ? 0 : 1, nl = s->in_meta[li].ndim, nx = nl + 1;
  if (nl < 1 || nx > PD_MAX_DIMS) return pd_ap_rule_replicated(s); /* infer_meta refuses it */
  int8_t lmap[PD_MAX_DIMS], xmap[PD_MAX_DIMS];
  for (int d = 0; d < nl; d++) {
    int8_t from = grad ? (none ? mapped(s, 1, d) : -1) : mapped(s, 0, d == 0 ? 0 : d + 1);
    lmap[d] = pick(from, mapped(s, li, d));
  }
  pd_spmd_dedupe(nl, lmap);
  xmap[0] = lmap[0];
  xmap[1] = -1;
  for (int d = 1; d < nl; d++) xmap[d + 1] = lmap[d];
  bool sharded = false;
  for (int d = 0; d < nl; d++) sharded |= lmap[d] >= 0;
  want(s, li, lmap, nl);
  if (s->n_in > 2) pd_spmd_clear(&s->in_want[2]);
  if (grad) {
    if (none)
      want(s, 1, lmap, nl);
    else
      pd_spmd_clear(&s->in_want[1]);
    place_out(s, 0, xmap, nx);
    if (sharded && s->attrs->i[1] == PD_REDUCTION_MEAN) s->local = pd_ap_local_step;
    return PD_OK;
  }
  want(s, 0, xmap, nx);
  if (none) {
    place_out(s, 0, lmap, nl);
    return PD_OK;
  }
  pd_spmd_clear(&s->out[0]);
  if (s->attrs->i[1] == PD_REDUCTION_SUM) {
    for (int d = 0; d < nl; d++)
      if (lmap[d] >= 0) s->out[0].partial[lmap[d]] = PD_REDUCE_SUM;
  } else if (sharded) {
    s->local = pd_ap_local_step;
  }
  return PD_OK;
}

/* ---- batch_norm ------------------------------------------------------------ */

/* batch_norm(x, [weight], [bias]) -> y, mean, variance (the batch's),
 * batch_norm_infer(x, mean, variance, [weight], [bias]) -> y and
 * batch_norm_grad(x, [weight], dy) -> dx, [dweight], [dbias]; i0
 * channel_last (a 2-D x is [N, C]). Paddle's BatchNormInferSpmd lets only
 * the channel axis stay sharded and replicates N and the spatial dims, so
 * each channel's statistics come from the whole batch (there is no
 * synchronised batch norm over batch shards): we do the same. The
 * per-channel tensors (weight, bias, the statistics, their gradients)
 * follow the channel's shard, so every rank normalises its channels with
 * their own parameters. */
static pd_status rule_batch_norm(pd_spmd_args *s) {
  int nd = s->in_meta[0].ndim;
  if (nd < 2 || nd > PD_MAX_DIMS) return pd_ap_rule_replicated(s); /* infer_meta refuses it */
  int ca = s->attrs->i[0] || nd == 2 ? nd - 1 : 1;
  int8_t c = mapped(s, 0, ca);
  for (int i = 1; i < s->n_in; i++)
    c = pick(c, s->in_meta[i].ndim == nd ? mapped(s, i, ca) : mapped(s, i, 0));
  int8_t xmap[PD_MAX_DIMS];
  memset(xmap, -1, sizeof xmap);
  xmap[ca] = c;
  for (int i = 0; i < s->n_in; i++) want(s, i, s->in_meta[i].ndim == nd ? xmap : &c, s->in_meta[i].ndim);
  for (int k = 0; k < s->n_out; k++)
    place_out(s, k, s->out_meta[k].ndim == nd ? xmap : &c, s->out_meta[k].ndim);
  return PD_OK;
}

/* ---- batch-parallel ops (Paddle's default_data_parallel) ---------------- */

/* Whether input i (of n) of a batch-parallel op holds samples on dim 0
 * (the others, weights and biases, are replicated). */
static bool batch_major(const pd_op_def *def, int i, int n) {
  if (def == &pd_opdef_conv_grad_filter || def == &pd_opdef_max_pool_grad || def == &pd_opdef_max_pool_gather)
    return i < 2;
  if (def == &pd_opdef_group_norm_grad) return i == 0 || i == n - 1; /* x, [weight], dy */
  return i == 0;
}

/* Whether output k is a weight's gradient (a sum over the samples). */
static bool weight_grad(const pd_op_def *def, int k) {
  return def == &pd_opdef_conv_grad_filter || (def == &pd_opdef_group_norm_grad && k >= 1);
}

/* Convolutions, pooling, interpolation, group and instance norm (and their
 * grad ops) work sample by sample: a shard of the batch (dim 0) stays,
 * every other dim is gathered, weights are replicated; outputs keep the
 * batch shard, and a weight's gradient, summed over the samples, is
 * Partial(sum) on the batch's mesh axis. */
static pd_status rule_batch_parallel(pd_spmd_args *s) {
  int64_t batch = s->in_meta[0].ndim > 0 ? s->in_meta[0].shape[0] : 0;
  int8_t b = -1;
  for (int i = 0; i < s->n_in; i++)
    if (batch_major(s->def, i, s->n_in) && s->in_meta[i].ndim > 0 && s->in_meta[i].shape[0] == batch)
      b = pick(b, mapped(s, i, 0));
  for (int i = 0; i < s->n_in; i++) {
    pd_spmd_clear(&s->in_want[i]);
    if (batch_major(s->def, i, s->n_in) && s->in_meta[i].ndim > 0 && s->in_meta[i].shape[0] == batch)
      want(s, i, &b, 1);
  }
  for (int k = 0; k < s->n_out; k++) {
    pd_spmd_clear(&s->out[k]);
    if (weight_grad(s->def, k)) {
      if (b >= 0) s->out[k].partial[b] = PD_REDUCE_SUM;
    } else if (s->out_meta[k].ndim > 0 && s->out_meta[k].shape[0] == batch) {
      place_out(s, k, &b, 1);
    }
  }
  return PD_OK;
}

pd_spmd_fn pd_ap_rule_nn(pd_op_id id) {
  switch (id) {
    case PD_OP_embedding:
      return rule_embedding;
    case PD_OP_embedding_grad:
      return rule_embedding_grad;
    case PD_OP_cross_entropy_with_softmax:
    case PD_OP_cross_entropy_with_softmax_grad:
      return rule_cross_entropy;
    case PD_OP_dropout:
      return rule_dropout;
    case PD_OP_alpha_dropout:
    case PD_OP_bernoulli:
    case PD_OP_rrelu:
      return rule_random_elementwise;
    case PD_OP_multinomial:
      return rule_multinomial;
    case PD_OP_scaled_dot_product_attention:
    case PD_OP_scaled_dot_product_attention_grad:
      return rule_sdpa;
    case PD_OP_slice_grad:
      return rule_slice_grad;
    case PD_OP_index_add:
      return rule_index_add;
    case PD_OP_mse_loss:
    case PD_OP_l1_loss:
    case PD_OP_smooth_l1_loss:
    case PD_OP_binary_cross_entropy:
    case PD_OP_binary_cross_entropy_with_logits:
    case PD_OP_margin_ranking_loss:
    case PD_OP_kl_div:
      return rule_ew_loss;
    case PD_OP_pad:
    case PD_OP_pad_grad:
      return rule_pad;
    case PD_OP_flip:
    case PD_OP_roll:
    case PD_OP_topk:
    case PD_OP_argsort:
    case PD_OP_glu:
      return rule_along_axes;
    case PD_OP_take_along:
    case PD_OP_scatter_along:
      return rule_along_index;
    case PD_OP_t:
      return rule_t;
    case PD_OP_squared_l2_norm:
      return rule_sqnorm;
    case PD_OP_nll_loss:
    case PD_OP_nll_loss_grad:
      return rule_nll;
    case PD_OP_batch_norm:
    case PD_OP_batch_norm_infer:
    case PD_OP_batch_norm_grad:
      return rule_batch_norm;
    case PD_OP_conv1d:
    case PD_OP_conv2d:
    case PD_OP_conv3d:
    case PD_OP_conv1d_transpose:
    case PD_OP_conv2d_transpose:
    case PD_OP_conv3d_transpose:
    case PD_OP_conv_grad_filter:
    case PD_OP_max_pool1d:
    case PD_OP_max_pool2d:
    case PD_OP_max_pool3d:
    case PD_OP_adaptive_max_pool1d:
    case PD_OP_adaptive_max_pool2d:
    case PD_OP_adaptive_max_pool3d:
    case PD_OP_max_pool_grad:
    case PD_OP_max_pool_gather:
    case PD_OP_avg_pool1d:
    case PD_OP_avg_pool2d:
    case PD_OP_avg_pool3d:
    case PD_OP_adaptive_avg_pool1d:
    case PD_OP_adaptive_avg_pool2d:
    case PD_OP_adaptive_avg_pool3d:
    case PD_OP_avg_pool_grad:
    case PD_OP_nearest_interp:
    case PD_OP_nearest_interp_grad:
    case PD_OP_bilinear_interp:
    case PD_OP_bilinear_interp_grad:
    case PD_OP_group_norm:
    case PD_OP_instance_norm:
    case PD_OP_group_norm_grad:
      return rule_batch_parallel;
    default:
      return NULL;
  }
}
