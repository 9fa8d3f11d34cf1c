/* SPMD rules: from the global metas and the inputs' distributions, the
 * distribution each input must have and the outputs'. A row's own rule
 * wins; otherwise the op's family gives one, keyed off the meta kind the
 * row shares (same-shape unary, broadcasting elementwise, axis-list
 * reductions, the reshape family) plus matmul, transpose and the optimizer
 * updates; the nn ops' rules are in spmd_rules_nn.c, and a few ops
 * replicate on purpose (see replicates_on_purpose). Merging follows
 * Paddle's: a replicated dim takes any mapping, a mesh axis claimed by two
 * dims keeps the first, a dim of size 1 is never sharded, outputs start
 * without Partial and a sharded contracted axis makes the output Partial
 * on that mesh axis. */
#include <string.h>

#include "../../ops/ew_util.h"
#include "ap_internal.h"

pd_status pd_ap_rule_replicated(pd_spmd_args *s) {
  for (int i = 0; i < s->n_in; i++) pd_spmd_clear(&s->in_want[i]);
  for (int k = 0; k < s->n_out; k++) pd_spmd_clear(&s->out[k]);
  return PD_OK;
}

/* Whether a Partial input stays Partial through this unary op: a copy or
 * cast to a floating dtype (any reduce type), a scale without bias (sum,
 * avg). A gradient keeps its pending reduction through a clone. */
static bool keeps_partial(const pd_spmd_args *s) {
  if (s->n_in != 1) return false;
  if (s->def == &pd_opdef_cast)
    return s->out_meta[0].dtype == PD_FLOAT32 || s->out_meta[0].dtype == PD_FLOAT64;
  if (s->def == &pd_opdef_scale && s->attrs->f[1] == 0) {
    for (int m = 0; m < s->mesh_ndim; m++)
      if (s->in[0].partial[m] >= 0 && s->in[0].partial[m] != PD_REDUCE_SUM &&
          s->in[0].partial[m] != PD_REDUCE_AVG)
        return false;
    return true;
  }
  return false;
}

/* Same-shape unary ops: the output as input 0 (Partial resolved first);
 * other inputs of that shape follow it, the rest are replicated. */
static pd_status rule_unary(pd_spmd_args *s) {
  const pd_meta *x = &s->in_meta[0];
  pd_spmd_dist d = s->in[0];
  if (!keeps_partial(s)) pd_spmd_drop_partial(&d);
  for (int i = 0; i < s->n_in; i++) {
    const pd_meta *m = &s->in_meta[i];
    bool same = m->ndim == x->ndim && pd_shape_eq(x->ndim, m->shape, x->shape);
    if (same)
      s->in_want[i] = d;
    else
      pd_spmd_clear(&s->in_want[i]);
  }
  for (int k = 0; k < s->n_out; k++) {
    pd_spmd_clear(&s->out[k]);
    if (s->out_meta[k].ndim == x->ndim && pd_shape_eq(x->ndim, s->out_meta[k].shape, x->shape)) s->out[k] = d;
  }
  return PD_OK;
}

/* add and subtract are linear: where every input is Partial(sum) (or every
 * one Partial(avg)) on a mesh axis, the inputs stay so and so does the
 * output, since sum_r a_r + sum_r b_r = sum_r (a_r + b_r), broadcast or
 * not. A gradient zeroed in place (clear_grad's default) is Partial, and
 * the next backward adds into it with add_. */
static bool is_linear_binary(const pd_op_def *def) {
  return def == pd_op_table[PD_OP_add] || def == pd_op_table[PD_OP_subtract] ||
         def == pd_op_table[PD_OP_add_];
}

static void keep_common_partial(pd_spmd_args *s) {
  for (int m = 0; m < s->mesh_ndim && m < PD_SPMD_MAX_MESH_DIMS; m++) {
    int8_t t = s->in[0].partial[m];
    bool all = t == PD_REDUCE_SUM || t == PD_REDUCE_AVG;
    for (int i = 1; i < s->n_in && all; i++) all = s->in[i].partial[m] == t;
    if (!all) continue;
    for (int i = 0; i < s->n_in; i++) s->in_want[i].partial[m] = t;
    s->out[0].partial[m] = t;
  }
}

/* Broadcasting elementwise ops: each output dim takes the first mapping of
 * an input dim that is not broadcast; inputs are asked for that. */
static pd_status rule_broadcast(pd_spmd_args *s) {
  const pd_meta *o = &s->out_meta[0];
  int on = o->ndim;
  int8_t map[PD_MAX_DIMS];
  memset(map, -1, sizeof map);
  /* an inplace op (add_) writes x where it is: x alone decides */
  int n_decide = (s->def->flags & PD_OPF_INPLACE) ? 1 : s->n_in;
  for (int i = 0; i < n_decide; i++) {
    const pd_meta *m = &s->in_meta[i];
    for (int d = 0; d < m->ndim; d++) {
      int od = d + on - m->ndim;
      if (od < 0 || m->shape[d] != o->shape[od] || m->shape[d] == 1) continue;
      if (map[od] < 0) map[od] = s->in[i].dims_mapping[d];
    }
  }
  pd_spmd_dedupe(on, map);
  for (int i = 0; i < s->n_in; i++) {
    const pd_meta *m = &s->in_meta[i];
    pd_spmd_clear(&s->in_want[i]);
    for (int d = 0; d < m->ndim; d++) {
      int od = d + on - m->ndim;
      if (od >= 0 && m->shape[d] == o->shape[od] && m->shape[d] != 1) s->in_want[i].dims_mapping[d] = map[od];
    }
  }
  for (int k = 0; k < s->n_out; k++) {
    pd_spmd_clear(&s->out[k]);
    if (s->out_meta[k].ndim == on) memcpy(s->out[k].dims_mapping, map, sizeof map);
  }
  if (is_linear_binary(s->def)) keep_common_partial(s);
  return PD_OK;
}

/* Axis-list reductions (v0 axes, none = all; i0 keepdim): a sharded reduced
 * dim leaves its partial result Partial on that mesh axis where the op has
 * a matching reduce type (sum, mean as avg over even shards, max, min,
 * prod); otherwise the dim is gathered first. */
static pd_status rule_reduce(pd_spmd_args *s) {
  const pd_meta *x = &s->in_meta[0];
  int nd = x->ndim;
  bool red[PD_MAX_DIMS] = {0};
  const pd_attrs *a = s->attrs;
  if (a->nv[0] == 0)
    for (int d = 0; d < nd; d++) red[d] = true;
  for (int k = 0; k < a->nv[0]; k++) {
    int64_t ax = a->v[0][k] < 0 ? a->v[0][k] + nd : a->v[0][k];
    if (ax >= 0 && ax < nd) red[ax] = true;
  }
  int nred = 0;
  for (int d = 0; d < nd; d++) nred += red[d];
  /* a row with these attributes whose output is not the reduced shape (an
   * internal helper of a reduction's backward) is not a reduction */
  if (s->n_out != 1 || s->out_meta[0].ndim != (a->i[0] ? nd : nd - nred)) return pd_ap_rule_replicated(s);
  int type = -1;
  const pd_op_def *def = s->def;
  if (def == &pd_opdef_sum) type = PD_REDUCE_SUM;
  if (def == &pd_opdef_mean) type = PD_REDUCE_AVG;
  if (def == &pd_opdef_max) type = PD_REDUCE_MAX;
  if (def == &pd_opdef_min) type = PD_REDUCE_MIN;
  if (def == &pd_opdef_prod) type = PD_REDUCE_PROD;
  pd_spmd_dist w = s->in[0];
  pd_spmd_drop_partial(&w);
  pd_spmd_clear(&s->out[0]);
  for (int d = 0; d < nd; d++) {
    int m = w.dims_mapping[d];
    if (!red[d] || m < 0) continue;
    bool even = x->shape[d] % s->mesh_shape[m] == 0;
    if (type >= 0 && (type != PD_REDUCE_AVG || even))
      s->out[0].partial[m] = (int8_t)type;
    else
      w.dims_mapping[d] = -1;
  }
  s->in_want[0] = w;
  bool keep = a->i[0] != 0;
  for (int d = 0, od = 0; d < nd; d++) {
    if (red[d] && !keep) continue;
    if (od < s->out_meta[0].ndim) s->out[0].dims_mapping[od] = red[d] ? -1 : w.dims_mapping[d];
    od++;
  }
  return PD_OK;
}

/* The reshape family (reshape, flatten, squeeze, unsqueeze), from the two
 * global shapes: the dims split into groups of equal products; a shard on
 * the first dim of a group carries over to the first dim of its image when
 * both divide evenly by the axis size or the two are the same size (dims
 * of size 1 skipped), any other shard is gathered. Partial is kept (the op
 * is linear). */
static pd_status rule_reshape(pd_spmd_args *s) {
  const pd_meta *x = &s->in_meta[0], *o = &s->out_meta[0];
  int ni = x->ndim, no = o->ndim, i = 0, j = 0;
  pd_spmd_dist w = s->in[0], out;
  pd_spmd_clear(&out);
  memcpy(out.partial, w.partial, sizeof out.partial);
  while (i < ni || j < no) {
    int gi = i, gj = j;
    int64_t pi = i < ni ? x->shape[i++] : 1, pj = j < no ? o->shape[j++] : 1;
    while (pi != pj && (i < ni || j < no)) {
      if ((pi < pj && i < ni) || j >= no)
        pi *= x->shape[i++];
      else
        pj *= o->shape[j++];
    }
    /* size-1 dims leave the order of the elements as it is: the group's
     * first dims are its first ones of another size */
    int fi = gi, fo = gj;
    while (fi + 1 < i && x->shape[fi] == 1) fi++;
    while (fo + 1 < j && o->shape[fo] == 1) fo++;
    for (int d = gi; d < i; d++) {
      int m = w.dims_mapping[d];
      if (m < 0) continue;
      int64_t n = s->mesh_shape[m];
      /* a dim that only gains or loses size-1 neighbours keeps any shard,
       * even an uneven one */
      bool kept = fo < no && x->shape[d] == o->shape[fo];
      if (d == fi && fo < no && x->shape[d] > 1 && (kept || (x->shape[d] % n == 0 && o->shape[fo] % n == 0)))
        out.dims_mapping[fo] = (int8_t)m;
      else
        w.dims_mapping[d] = -1;
    }
  }
  s->in_want[0] = w;
  for (int k = 1; k < s->n_in; k++) pd_spmd_clear(&s->in_want[k]);
  s->out[0] = out;
  return PD_OK;
}

/* squeeze (squeeze_): the reshape rule; a shard of a kept dim may be of
 * size 1 on some rank, which squeeze on the shard would drop with the
 * squeezed dims, so the local step is a reshape to the shard's output
 * shape (pd_ap_local_op). */
static pd_status rule_squeeze(pd_spmd_args *s) {
  pd_status st = rule_reshape(s);
  for (int d = 0; st == PD_OK && d < s->out_meta[0].ndim; d++)
    if (s->out[0].dims_mapping[d] >= 0) s->local = pd_ap_local_step;
  return st;
}

/* transpose (v0 perm): output dim j has input dim perm[j]'s mapping. */
static pd_status rule_transpose(pd_spmd_args *s) {
  const pd_attrs *a = s->attrs;
  int nd = s->in_meta[0].ndim;
  pd_spmd_clear(&s->out[0]);
  memcpy(s->out[0].partial, s->in[0].partial, sizeof s->out[0].partial);
  for (int j = 0; j < a->nv[0] && j < nd; j++) {
    int64_t p = a->v[0][j] < 0 ? a->v[0][j] + nd : a->v[0][j];
    if (p >= 0 && p < nd) s->out[0].dims_mapping[j] = s->in[0].dims_mapping[p];
  }
  return PD_OK;
}

/* matmul (i0 transpose_x, i1 transpose_y), Paddle's rule: x is
 * batch + "mk", y batch + "kn", the output batch + "mn"; mappings merge per
 * letter; a sharded k makes the output Partial(sum). */
static pd_status rule_matmul(pd_spmd_args *s) {
  const pd_meta *xm = &s->in_meta[0], *ym = &s->in_meta[1], *om = &s->out_meta[0];
  int xn = xm->ndim, yn = ym->ndim, on = om->ndim;
  bool tx = s->attrs->i[0] != 0 && xn >= 2, ty = s->attrs->i[1] != 0 && yn >= 2;
  /* tensor dims of each letter (-1: absent) */
  int xm_d = xn >= 2 ? (tx ? xn - 1 : xn - 2) : -1, xk_d = xn >= 2 ? (tx ? xn - 2 : xn - 1) : 0;
  int yk_d = yn >= 2 ? (ty ? yn - 1 : yn - 2) : 0, yn_d = yn >= 2 ? (ty ? yn - 2 : yn - 1) : -1;
  int xb = xn >= 2 ? xn - 2 : 0, yb = yn >= 2 ? yn - 2 : 0; /* batch dims */
  int ob = on - (xm_d >= 0) - (yn_d >= 0);
  const int8_t *xd = s->in[0].dims_mapping, *yd = s->in[1].dims_mapping;
#define MAPPED(shape, d, mp) ((d) >= 0 && (shape)[d] > 1 ? (mp)[d] : -1)
  int8_t omap[PD_MAX_DIMS + 1];
  memset(omap, -1, sizeof omap);
  /* batch letters, aligned from the right with the output's batch dims */
  for (int b = 0; b < ob; b++) {
    int dx = b - (ob - xb), dy = b - (ob - yb);
    if (dx >= 0 && xm->shape[dx] == om->shape[b] && omap[b] < 0) omap[b] = MAPPED(xm->shape, dx, xd);
    if (dy >= 0 && ym->shape[dy] == om->shape[b] && omap[b] < 0) omap[b] = MAPPED(ym->shape, dy, yd);
  }
  int8_t m = MAPPED(xm->shape, xm_d, xd), n = MAPPED(ym->shape, yn_d, yd);
  int8_t k = MAPPED(xm->shape, xk_d, xd);
  if (k < 0) k = MAPPED(ym->shape, yk_d, yd);
  /* a mesh axis claimed twice: batch first, then m, n, k */
  int8_t all[PD_MAX_DIMS + 3];
  int na = 0;
  for (int b = 0; b < ob; b++) all[na++] = omap[b];
  all[na++] = m;
  all[na++] = n;
  all[na++] = k;
  pd_spmd_dedupe(na, all);
  for (int b = 0; b < ob; b++) omap[b] = all[b];
  m = all[ob];
  n = all[ob + 1];
  k = all[ob + 2];
  /* inputs */
  for (int i = 0; i < 2; i++) pd_spmd_clear(&s->in_want[i]);
  for (int b = 0; b < ob; b++) {
    int dx = b - (ob - xb), dy = b - (ob - yb);
    if (dx >= 0 && xm->shape[dx] == om->shape[b] && xm->shape[dx] > 1)
      s->in_want[0].dims_mapping[dx] = omap[b];
    if (dy >= 0 && ym->shape[dy] == om->shape[b] && ym->shape[dy] > 1)
      s->in_want[1].dims_mapping[dy] = omap[b];
  }
  if (xm_d >= 0) s->in_want[0].dims_mapping[xm_d] = m;
  if (xm->shape[xk_d] > 1) s->in_want[0].dims_mapping[xk_d] = k;
  if (ym->shape[yk_d] > 1) s->in_want[1].dims_mapping[yk_d] = k;
  if (yn_d >= 0) s->in_want[1].dims_mapping[yn_d] = n;
  /* output */
  pd_spmd_clear(&s->out[0]);
  for (int b = 0; b < ob; b++) s->out[0].dims_mapping[b] = omap[b];
  int od = ob;
  if (xm_d >= 0) s->out[0].dims_mapping[od++] = m;
  if (yn_d >= 0) s->out[0].dims_mapping[od++] = n;
  if (k >= 0) s->out[0].partial[k] = PD_REDUCE_SUM;
#undef MAPPED
  return PD_OK;
}

/* Same-shape ops along dims (softmax, log_softmax, cumsum along i0 axis;
 * tril/triu on the last two dims): those dims are gathered, the others
 * keep their shards. cumsum with flatten gathers everything. */
static pd_status rule_along_dims(pd_spmd_args *s) {
  const pd_meta *x = &s->in_meta[0];
  int nd = x->ndim;
  bool whole[PD_MAX_DIMS] = {0};
  const pd_op_def *def = s->def;
  if (def == &pd_opdef_tril || def == &pd_opdef_triu) {
    for (int d = nd - 2; d < nd; d++)
      if (d >= 0) whole[d] = true;
  } else if (def == &pd_opdef_cumsum && s->attrs->i[1]) {
    for (int d = 0; d < nd; d++) whole[d] = true;
  } else if (nd > 0) {
    int64_t ax = s->attrs->i[0] < 0 ? s->attrs->i[0] + nd : s->attrs->i[0];
    if (ax >= 0 && ax < nd) whole[ax] = true;
  }
  pd_spmd_dist d = s->in[0];
  pd_spmd_drop_partial(&d);
  for (int k = 0; k < nd; k++)
    if (whole[k]) d.dims_mapping[k] = -1;
  s->in_want[0] = d;
  pd_spmd_clear(&s->out[0]);
  if (s->out_meta[0].ndim == nd) s->out[0] = d;
  return PD_OK;
}

/* concat (i0 axis) and stack (i0 axis, a new dim): every input takes input
 * 0's mapping of the other dims; the concatenated dim is gathered. */
static pd_status rule_concat_stack(pd_spmd_args *s) {
  const pd_meta *x = &s->in_meta[0];
  int nd = x->ndim;
  bool stack = s->def == &pd_opdef_stack;
  int64_t lim = stack ? nd + 1 : nd, ax = s->attrs->i[0] < 0 ? s->attrs->i[0] + lim : s->attrs->i[0];
  pd_spmd_dist d = s->in[0];
  pd_spmd_drop_partial(&d);
  if (!stack && ax >= 0 && ax < nd) d.dims_mapping[ax] = -1;
  for (int i = 0; i < s->n_in; i++) s->in_want[i] = d;
  pd_spmd_clear(&s->out[0]);
  for (int k = 0, od = 0; od < s->out_meta[0].ndim; od++) {
    if (stack && od == ax) continue;
    if (k < nd) s->out[0].dims_mapping[od] = d.dims_mapping[k++];
  }
  return PD_OK;
}

/* expand, broadcast_to, expand_as: a dim the output keeps at its size keeps
 * its shard, new and broadcast dims are whole; expand_as's y (read for its
 * shape only) is placed as the output. */
static pd_status rule_expand(pd_spmd_args *s) {
  const pd_meta *x = &s->in_meta[0], *o = &s->out_meta[0];
  int ni = x->ndim, on = o->ndim;
  pd_spmd_dist d = s->in[0];
  pd_spmd_drop_partial(&d);
  pd_spmd_clear(&s->out[0]);
  for (int k = 0; k < ni; k++) {
    int od = k + on - ni;
    if (od < 0 || x->shape[k] != o->shape[od] || x->shape[k] == 1)
      d.dims_mapping[k] = -1;
    else
      s->out[0].dims_mapping[od] = d.dims_mapping[k];
  }
  s->in_want[0] = d;
  for (int i = 1; i < s->n_in; i++) s->in_want[i] = s->out[0];
  return PD_OK;
}

/* argmax/argmin (i0 keepdim, i1 axis, i2 flatten): the axis is gathered,
 * the other dims keep their shards. */
static pd_status rule_arg(pd_spmd_args *s) {
  const pd_meta *x = &s->in_meta[0];
  int nd = x->ndim;
  pd_spmd_dist d = s->in[0];
  pd_spmd_drop_partial(&d);
  int64_t ax = s->attrs->i[1] < 0 ? s->attrs->i[1] + nd : s->attrs->i[1];
  for (int k = 0; k < nd; k++)
    if (s->attrs->i[2] || k == ax) d.dims_mapping[k] = -1;
  s->in_want[0] = d;
  pd_spmd_clear(&s->out[0]);
  if (s->attrs->i[2]) return PD_OK;
  for (int k = 0, od = 0; k < nd && od < s->out_meta[0].ndim; k++) {
    if (k == ax && !s->attrs->i[0]) continue;
    s->out[0].dims_mapping[od++] = d.dims_mapping[k];
  }
  return PD_OK;
}

/* layer_norm / rms_norm (i0 begin_norm_axis) and their grad ops: the
 * normalised dims are gathered, the rows keep their shards; weight and bias
 * are replicated; their gradients (grad ops' outputs 1..) are Partial(sum)
 * on the mesh axes that shard rows. */
static pd_status rule_norm(pd_spmd_args *s) {
  const pd_meta *x = &s->in_meta[0];
  int nd = x->ndim;
  int64_t begin = s->attrs->i[0] < 0 ? s->attrs->i[0] + nd : s->attrs->i[0];
  pd_spmd_dist d = s->in[0];
  pd_spmd_drop_partial(&d);
  for (int k = 0; k < nd; k++)
    if (k >= begin) d.dims_mapping[k] = -1;
  bool grad = s->def == &pd_opdef_layer_norm_grad || s->def == &pd_opdef_rms_norm_grad;
  for (int i = 0; i < s->n_in; i++) {
    bool like_x = i == 0 || (grad && i == s->n_in - 1);
    if (like_x)
      s->in_want[i] = d;
    else
      pd_spmd_clear(&s->in_want[i]);
  }
  s->out[0] = d;
  for (int k = 1; k < s->n_out; k++) {
    pd_spmd_clear(&s->out[k]);
    for (int r = 0; r < nd && r < begin; r++)
      if (d.dims_mapping[r] >= 0) s->out[k].partial[d.dims_mapping[r]] = PD_REDUCE_SUM;
  }
  return PD_OK;
}

/* gather / index_select (i0 axis): the picked axis of x is gathered, the
 * index replicated; the output keeps x's other shards (its picked dim, or
 * none for gather's 0-D index, is whole). */
static pd_status rule_gather(pd_spmd_args *s) {
  const pd_meta *x = &s->in_meta[0];
  int nd = x->ndim;
  int64_t ax = s->attrs->i[0] < 0 ? s->attrs->i[0] + nd : s->attrs->i[0];
  pd_spmd_dist d = s->in[0];
  pd_spmd_drop_partial(&d);
  if (ax >= 0 && ax < nd) d.dims_mapping[ax] = -1;
  s->in_want[0] = d;
  for (int i = 1; i < s->n_in; i++) pd_spmd_clear(&s->in_want[i]);
  pd_spmd_clear(&s->out[0]);
  bool keeps_axis = s->out_meta[0].ndim == nd;
  for (int k = 0, od = 0; k < nd && od < s->out_meta[0].ndim; k++) {
    if (k == ax && !keeps_axis) continue;
    s->out[0].dims_mapping[od++] = d.dims_mapping[k];
  }
  return PD_OK;
}

/* one_hot: the indices keep their shards, the new class dim is whole. */
static pd_status rule_one_hot(pd_spmd_args *s) {
  pd_spmd_dist d = s->in[0];
  pd_spmd_drop_partial(&d);
  s->in_want[0] = d;
  pd_spmd_clear(&s->out[0]);
  memcpy(s->out[0].dims_mapping, d.dims_mapping, (size_t)s->in_meta[0].ndim);
  return PD_OK;
}

/* tile (v0 repeat_times, aligned from the right): a dim repeated once keeps
 * its shard, a repeated dim is gathered, new leading dims are whole. */
static pd_status rule_tile(pd_spmd_args *s) {
  const pd_meta *x = &s->in_meta[0];
  int nd = x->ndim, on = s->out_meta[0].ndim, nr = s->attrs->nv[0];
  pd_spmd_dist d = s->in[0];
  pd_spmd_drop_partial(&d);
  pd_spmd_clear(&s->out[0]);
  for (int k = 0; k < nd; k++) {
    int rd = k + nr - nd, od = k + on - nd;
    int64_t rep = rd >= 0 ? s->attrs->v[0][rd] : 1;
    if (rep != 1 || od < 0)
      d.dims_mapping[k] = -1;
    else
      s->out[0].dims_mapping[od] = d.dims_mapping[k];
  }
  s->in_want[0] = d;
  return PD_OK;
}

/* split and unbind (i0 axis): the split axis is gathered, every output
 * keeps x's other shards (unbind drops the axis). */
static pd_status rule_split(pd_spmd_args *s) {
  int nd = s->in_meta[0].ndim;
  int64_t ax = s->attrs->i[0] < 0 ? s->attrs->i[0] + nd : s->attrs->i[0];
  pd_spmd_dist d = s->in[0];
  pd_spmd_drop_partial(&d);
  if (ax >= 0 && ax < nd) d.dims_mapping[ax] = -1;
  s->in_want[0] = d;
  for (int k = 0; k < s->n_out; k++) {
    pd_spmd_clear(&s->out[k]);
    bool keeps_axis = s->out_meta[k].ndim == nd;
    for (int i = 0, od = 0; i < nd && od < s->out_meta[k].ndim; i++) {
      if (i == ax && !keeps_axis) continue;
      s->out[k].dims_mapping[od++] = d.dims_mapping[i];
    }
  }
  return PD_OK;
}

/* slice and strided_slice (v0 axes): the sliced axes are gathered, the
 * others keep their shards. */
static pd_status rule_slice(pd_spmd_args *s) {
  int nd = s->in_meta[0].ndim;
  pd_spmd_dist d = s->in[0];
  pd_spmd_drop_partial(&d);
  for (int k = 0; k < s->attrs->nv[0]; k++) {
    int64_t ax = s->attrs->v[0][k] < 0 ? s->attrs->v[0][k] + nd : s->attrs->v[0][k];
    if (ax >= 0 && ax < nd) d.dims_mapping[ax] = -1;
  }
  s->in_want[0] = d;
  for (int i = 1; i < s->n_in; i++) pd_spmd_clear(&s->in_want[i]);
  pd_spmd_clear(&s->out[0]);
  if (s->out_meta[0].ndim == nd) s->out[0] = d;
  return PD_OK;
}

/* swiglu (x, [y]) and swiglu_grad (x, [y], dout -> dx, [dy]): with y,
 * every operand shares x's shards; with x alone its last dim holds both
 * halves (and dout's is one half), so the last dim is gathered. */
static pd_status rule_swiglu(pd_spmd_args *s) {
  const pd_meta *x = &s->in_meta[0];
  int nd = x->ndim;
  bool grad = s->def == &pd_opdef_swiglu_grad;
  bool halves = s->n_in == (grad ? 2 : 1);
  pd_spmd_dist d = s->in[0];
  pd_spmd_drop_partial(&d);
  if (halves && nd > 0) d.dims_mapping[nd - 1] = -1;
  for (int i = 0; i < s->n_in; i++) {
    const pd_meta *m = &s->in_meta[i];
    bool like_x = m->ndim == nd && (halves || pd_shape_eq(nd, m->shape, x->shape));
    if (like_x)
      s->in_want[i] = d;
    else
      pd_spmd_clear(&s->in_want[i]);
  }
  for (int k = 0; k < s->n_out; k++) {
    pd_spmd_clear(&s->out[k]);
    if (s->out_meta[k].ndim == nd) s->out[k] = d;
  }
  return PD_OK;
}

/* The optimizer updates (param, grad, learning rate, accumulators...): the
 * parameter stays as it is; every input of its global shape is placed as
 * it (a Partial gradient is reduced first), the others replicated. */
static pd_status rule_update(pd_spmd_args *s) {
  const pd_meta *p = &s->in_meta[0];
  pd_spmd_dist d = s->in[0];
  pd_spmd_drop_partial(&d);
  for (int i = 0; i < s->n_in; i++) {
    const pd_meta *m = &s->in_meta[i];
    if (m->ndim == p->ndim && pd_shape_eq(p->ndim, m->shape, p->shape))
      s->in_want[i] = d;
    else
      pd_spmd_clear(&s->in_want[i]);
  }
  for (int k = 0; k < s->n_out; k++) s->out[k] = d;
  return PD_OK;
}

/* lamb_: placed as the other updates; on a sharded parameter its trust
 * ratio needs the whole parameter's norms, which the local step sums over
 * the shards. */
static pd_status rule_lamb(pd_spmd_args *s) {
  pd_status st = rule_update(s);
  for (int d = 0; d < s->in_meta[0].ndim; d++)
    if (s->in_want[0].dims_mapping[d] >= 0) s->local = pd_ap_local_lamb;
  return st;
}

bool pd_ap_is_update_op(pd_op_id id) {
  switch (id) {
    case PD_OP_sgd_:
    case PD_OP_momentum_:
    case PD_OP_adam_:
    case PD_OP_adamw_:
    case PD_OP_adamax_:
    case PD_OP_adagrad_:
    case PD_OP_adadelta_:
    case PD_OP_rmsprop_:
    case PD_OP_lamb_:
      return true;
    default:
      return false;
  }
}

/* Replicated on purpose: prod_exclusive (prod's backward) counts the
 * zeros of the reduced extent from the local data outside the graph, so
 * on a shard it would miss the other shards' zeros. Replicated inputs
 * give every rank the whole extent. (max, min, norm and abs_pow compute
 * their masks with ops on a DTensor, so they take the reduction and
 * unary rules.) masked_select and nonzero: their outputs (the selected
 * elements, the coordinates of the nonzero ones, in row-major order) have
 * a length that depends on the values; a shard's result is neither a
 * slice of the whole nor of a size the metas know, so the inputs are
 * gathered and every rank computes the whole. (Paddle's NonZeroInferSpmd
 * replicates too; it has no masked_select rule.) */
static pd_status rule_replicate_on_purpose(pd_spmd_args *s) { return pd_ap_rule_replicated(s); }

static bool replicates_on_purpose(pd_op_id id) {
  switch (id) {
    case PD_OP_prod_exclusive:
    case PD_OP_masked_select:
    case PD_OP_nonzero:
      return true;
    default:
      return false;
  }
}

pd_spmd_fn pd_ap_rule_of(pd_op_id id) {
  const pd_op_def *def = pd_op_table[id];
  if (def->spmd) return def->spmd;
  pd_spmd_fn nn = pd_ap_rule_nn(id);
  if (nn) return nn;
  pd_spmd_fn indexed = pd_ap_rule_index(id);
  if (indexed) return indexed;
  if (replicates_on_purpose(id)) return rule_replicate_on_purpose;
  switch (id) {
    case PD_OP_matmul:
    case PD_OP_bmm:
    case PD_OP_mm:
    case PD_OP_mv:
      return rule_matmul;
    case PD_OP_transpose:
      return rule_transpose;
    case PD_OP_reshape:
    case PD_OP_flatten:
    case PD_OP_unsqueeze:
    case PD_OP_reshape_:
    case PD_OP_unsqueeze_:
      return rule_reshape;
    case PD_OP_squeeze:
    case PD_OP_squeeze_:
      return rule_squeeze;
    case PD_OP_where:
    case PD_OP_add_: /* x's mapping first, so x (written in place) keeps it */
      return rule_broadcast;
    case PD_OP_cast:
    case PD_OP_assign:
    case PD_OP_isnan:
    case PD_OP_isinf:
    case PD_OP_isfinite:
    case PD_OP_logical_not:
      return rule_unary;
    case PD_OP_softmax:
    case PD_OP_log_softmax:
    case PD_OP_cumsum:
    case PD_OP_tril:
    case PD_OP_triu:
      return rule_along_dims;
    case PD_OP_concat:
    case PD_OP_stack:
      return rule_concat_stack;
    case PD_OP_clip:
    case PD_OP_clip_:
    case PD_OP_fill_: /* every element set where it is (gradient_merge's reset) */
      return rule_unary;
    case PD_OP_expand:
    case PD_OP_broadcast_to:
    case PD_OP_expand_as:
      return rule_expand;
    case PD_OP_argmax:
    case PD_OP_argmin:
      return rule_arg;
    case PD_OP_gather:
    case PD_OP_index_select:
      return rule_gather;
    case PD_OP_one_hot:
      return rule_one_hot;
    case PD_OP_tile:
      return rule_tile;
    case PD_OP_split:
    case PD_OP_chunk:
    case PD_OP_unbind:
      return rule_split;
    case PD_OP_slice:
    case PD_OP_strided_slice:
      return rule_slice;
    case PD_OP_swiglu:
    case PD_OP_swiglu_grad:
      return rule_swiglu;
    case PD_OP_lamb_:
      return rule_lamb;
    case PD_OP_layer_norm:
    case PD_OP_rms_norm:
    case PD_OP_layer_norm_grad:
    case PD_OP_rms_norm_grad:
      return rule_norm;
    default:
      break;
  }
  if (pd_ap_is_update_op(id)) return rule_update;
  /* a random op without a rule of its own (dropout has one) would draw
   * different numbers on each shard: replicated, logged */
  if (def->flags & PD_OPF_RANDOM) return NULL;
  if (def->infer_meta == pd_meta_unary) return rule_unary;
  if (def->infer_meta == pd_meta_broadcast || def->infer_meta == pd_meta_broadcast_bool)
    return rule_broadcast;
  if (def->n_in == 1 && def->n_out == 1 && def->attr_names &&
      strncmp(def->attr_names, "v0:axis,i0:keepdim", 18) == 0)
    return rule_reduce;
  return NULL;
}
