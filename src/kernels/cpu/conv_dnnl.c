/* float32 convolutions through oneDNN.
 *
 * The engine and the stream pool are dnnl_shared.c's. Each (kind, geometry, bias) gets one cache
 * entry holding the convolution primitive and, for each of its three
 * tensors, the user's plain layout, the layout the primitive chose (format
 * "any") and a reorder primitive when the two differ. Entries are immutable
 * once published, so executing one needs no lock; only the lookup takes the
 * mutex. Primitives run with a user-managed scratchpad (allocated per call
 * from the caching allocator), so one primitive may run on several threads
 * at once. */
#include <oneapi/dnnl/dnnl.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/alloc.h"
#include "conv.h"
#include "dnnl_shared.h"

#define KEYLEN 26
#define MAX_ENTRIES 2048

typedef struct centry {
  pdk_dnnl_cached head; /* the key: make_key */
  dnnl_primitive_t prim;
  /* tensors 0, 1: the inputs (a, b); 2: the output */
  dnnl_memory_desc_t user[3], want[3];
  dnnl_primitive_t reorder[3];
  bool has_bias;
  dnnl_memory_desc_t bias_md;
  /* scratchpads of the reorders (0..2) and of the convolution (3); one buffer
   * of the largest size serves them all, one primitive at a time */
  dnnl_memory_desc_t scratch_md[4];
  size_t scratch_sz[4], scratch;
} centry;

static void entry_free(pdk_dnnl_cached *c);
static pdk_dnnl_cache g_cache = PDK_DNNL_CACHE_INIT(KEYLEN, MAX_ENTRIES, entry_free);

int pdk_conv_dnnl_cache_size(void) { return pdk_dnnl_cache_size(&g_cache); }

static void make_key(pd_conv_kind kind, const pd_conv_geom *g, bool has_bias, int64_t *k) {
  int i = 0;
  k[i++] = kind;
  k[i++] = has_bias;
  k[i++] = g->nsp;
  k[i++] = g->N;
  k[i++] = g->Ci;
  k[i++] = g->Co;
  k[i++] = g->G;
  for (int d = 0; d < 3; d++) {
    bool u = d < g->nsp;
    k[i++] = u ? g->in[d] : 0;
    k[i++] = u ? g->out[d] : 0;
    k[i++] = u ? g->k[d] : 0;
    k[i++] = u ? g->stride[d] : 0;
    k[i++] = u ? g->dil[d] : 0;
    k[i++] = u ? g->pad[d] : 0;
  }
  k[i++] = g->channel_last;
}

static void entry_free(pdk_dnnl_cached *c) {
  centry *e = (centry *)c;
  if (!e) return;
  if (e->prim) dnnl_primitive_destroy(e->prim);
  for (int i = 0; i < 3; i++)
    if (e->reorder[i]) dnnl_primitive_destroy(e->reorder[i]);
  free(e);
}

/* A reorder between two layouts of one tensor; NULL primitive when equal. */
static dnnl_status_t make_reorder(const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *to,
                                  const_dnnl_primitive_attr_t attr, dnnl_primitive_t *out, size_t *scratch_sz,
                                  dnnl_memory_desc_t *scratch_md) {
  *out = NULL;
  if (dnnl_memory_desc_equal(from, to)) return dnnl_success;
  dnnl_primitive_desc_t rpd;
  dnnl_engine_t eng = pdk_dnnl_engine();
  dnnl_status_t st = dnnl_reorder_primitive_desc_create(&rpd, from, eng, to, eng, attr);
  if (st != dnnl_success) return st;
  *scratch_sz = pdk_dnnl_scratch_of(rpd, scratch_md);
  st = dnnl_primitive_create(out, rpd);
  dnnl_primitive_desc_destroy(rpd);
  return st;
}

static dnnl_format_tag_t act_tag(int nsp, bool cl) {
  static const dnnl_format_tag_t first[3] = {dnnl_abc, dnnl_abcd, dnnl_abcde};
  static const dnnl_format_tag_t last[3] = {dnnl_acb, dnnl_acdb, dnnl_acdeb};
  return cl ? last[nsp - 1] : first[nsp - 1];
}
static dnnl_format_tag_t wei_tag(int ndims) {
  static const dnnl_format_tag_t t[4] = {dnnl_abc, dnnl_abcd, dnnl_abcde, dnnl_abcdef};
  return t[ndims - 3];
}

/* Builds an entry; returns 1 when oneDNN has no implementation (or the
 * geometry needs a negative padding it cannot take), < 0 on failure. */
static int build(pd_conv_kind kind, const pd_conv_geom *g, bool has_bias, centry *e) {
  int nsp = g->nsp, nd = nsp + 2;
  dnnl_dims_t src_d, dst_d, wei_d, bias_d, strides, dil, pl, pr;
  src_d[0] = dst_d[0] = g->N;
  src_d[1] = g->Ci;
  dst_d[1] = g->Co;
  int wnd = g->G > 1 ? nd + 1 : nd, w0 = 0;
  if (g->G > 1) wei_d[w0++] = g->G;
  wei_d[w0++] = g->Co / g->G;
  wei_d[w0++] = g->Ci / g->G;
  for (int d = 0; d < nsp; d++) {
    src_d[2 + d] = g->in[d];
    dst_d[2 + d] = g->out[d];
    wei_d[w0 + d] = g->k[d];
    strides[d] = g->stride[d];
    dil[d] = g->dil[d] - 1;
    pl[d] = g->pad[d];
    int64_t after = pdk_conv_pad_after(g, d);
    if (after <= -g->stride[d]) return 1;
    pr[d] = after < 0 ? 0 : after;
  }
  bias_d[0] = g->Co;

  dnnl_memory_desc_t src_u, dst_u, wei_u, src_a, dst_a, wei_a;
  dnnl_format_tag_t at = act_tag(nsp, g->channel_last);
  if (dnnl_memory_desc_init_by_tag(&src_u, nd, src_d, dnnl_f32, at) != dnnl_success ||
      dnnl_memory_desc_init_by_tag(&dst_u, nd, dst_d, dnnl_f32, at) != dnnl_success ||
      dnnl_memory_desc_init_by_tag(&wei_u, wnd, wei_d, dnnl_f32, wei_tag(wnd)) != dnnl_success ||
      dnnl_memory_desc_init_by_tag(&src_a, nd, src_d, dnnl_f32, dnnl_format_tag_any) != dnnl_success ||
      dnnl_memory_desc_init_by_tag(&dst_a, nd, dst_d, dnnl_f32, dnnl_format_tag_any) != dnnl_success ||
      dnnl_memory_desc_init_by_tag(&wei_a, wnd, wei_d, dnnl_f32, dnnl_format_tag_any) != dnnl_success ||
      dnnl_memory_desc_init_by_tag(&e->bias_md, 1, bias_d, dnnl_f32, dnnl_x) != dnnl_success)
    return 1;
  e->has_bias = has_bias;

  dnnl_primitive_attr_t attr;
  if (dnnl_primitive_attr_create(&attr) != dnnl_success) return -1;
  dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user);

  int rc = 1;
  dnnl_engine_t eng = pdk_dnnl_engine();
  dnnl_primitive_desc_t fwd_pd = NULL, pd = NULL;
  dnnl_convolution_desc_t fd, bd;
  if (dnnl_dilated_convolution_forward_desc_init(&fd, dnnl_forward_training, dnnl_convolution_direct, &src_a,
                                                 &wei_a, kind == PD_CONV_FWD && has_bias ? &e->bias_md : NULL,
                                                 &dst_a, strides, dil, pl, pr) != dnnl_success)
    goto done;
  if (dnnl_primitive_desc_create(&fwd_pd, &fd, attr, eng, NULL) != dnnl_success) goto done;
  dnnl_query_t q[3];
  if (kind == PD_CONV_FWD) {
    pd = fwd_pd;
    fwd_pd = NULL;
    q[0] = dnnl_query_src_md, q[1] = dnnl_query_weights_md, q[2] = dnnl_query_dst_md;
    e->user[0] = src_u, e->user[1] = wei_u, e->user[2] = dst_u;
  } else if (kind == PD_CONV_BWD_DATA) {
    if (dnnl_dilated_convolution_backward_data_desc_init(&bd, dnnl_convolution_direct, &src_a, &wei_a, &dst_a,
                                                         strides, dil, pl, pr) != dnnl_success ||
        dnnl_primitive_desc_create(&pd, &bd, attr, eng, fwd_pd) != dnnl_success)
      goto done;
    q[0] = dnnl_query_diff_dst_md, q[1] = dnnl_query_weights_md, q[2] = dnnl_query_diff_src_md;
    e->user[0] = dst_u, e->user[1] = wei_u, e->user[2] = src_u;
  } else {
    if (dnnl_dilated_convolution_backward_weights_desc_init(&bd, dnnl_convolution_direct, &src_a, &wei_a,
                                                            NULL, &dst_a, strides, dil, pl,
                                                            pr) != dnnl_success ||
        dnnl_primitive_desc_create(&pd, &bd, attr, eng, fwd_pd) != dnnl_success)
      goto done;
    q[0] = dnnl_query_src_md, q[1] = dnnl_query_diff_dst_md, q[2] = dnnl_query_diff_weights_md;
    e->user[0] = src_u, e->user[1] = dst_u, e->user[2] = wei_u;
  }
  rc = -1;
  e->scratch = e->scratch_sz[3] = pdk_dnnl_scratch_of(pd, &e->scratch_md[3]);
  for (int i = 0; i < 3; i++) {
    const dnnl_memory_desc_t *md = dnnl_primitive_desc_query_md(pd, q[i], 0);
    if (!md) goto done;
    e->want[i] = *md;
    const dnnl_memory_desc_t *from = i < 2 ? &e->user[i] : &e->want[i],
                             *to = i < 2 ? &e->want[i] : &e->user[i];
    if (make_reorder(from, to, attr, &e->reorder[i], &e->scratch_sz[i], &e->scratch_md[i]) != dnnl_success)
      goto done;
    if (e->scratch_sz[i] > e->scratch) e->scratch = e->scratch_sz[i];
  }
  if (dnnl_primitive_create(&e->prim, pd) != dnnl_success) goto done;
  rc = 0;
done:
  if (fwd_pd) dnnl_primitive_desc_destroy(fwd_pd);
  if (pd) dnnl_primitive_desc_destroy(pd);
  dnnl_primitive_attr_destroy(attr);
  return rc;
}

/* The cached entry for a key (building and publishing it on a miss). When
 * the cache is full the entry is built for this call only (*owned = true). */
static int lookup(pd_conv_kind kind, const pd_conv_geom *g, bool has_bias, centry **out, bool *owned) {
  int64_t key[KEYLEN];
  make_key(kind, g, has_bias, key);
  *owned = false;
  pdk_dnnl_cached *c = pdk_dnnl_cache_find(&g_cache, key);
  if (c) {
    *out = (centry *)c;
    return 0;
  }
  centry *e = calloc(1, sizeof *e);
  if (!e) return -1;
  memcpy(e->head.key, key, sizeof key);
  int rc = build(kind, g, has_bias, e);
  if (rc != 0) {
    entry_free(&e->head);
    return rc;
  }
  *out = (centry *)pdk_dnnl_cache_publish(&g_cache, &e->head, owned);
  return 0;
}

int pdk_conv_dnnl_f32(pd_conv_kind kind, const pd_conv_geom *g, const float *a, const float *b,
                      const float *bias, float *out) {
  dnnl_engine_t eng = pdk_dnnl_engine();
  if (!eng) return 1;
  bool has_bias = kind == PD_CONV_FWD && bias;
  centry *e;
  bool owned;
  int rc = lookup(kind, g, has_bias, &e, &owned);
  if (rc != 0) return rc;

  dnnl_stream_t s = pdk_dnnl_stream_acquire();
  void *ptr[3] = {(void *)a, (void *)b, out};
  void *buf[3] = {NULL, NULL, NULL};
  size_t bufsz[3] = {0, 0, 0};
  dnnl_memory_t um[3] = {NULL, NULL, NULL}, wm[3] = {NULL, NULL, NULL}, bm = NULL;
  void *scratch = NULL;
  dnnl_status_t st = s ? dnnl_success : dnnl_out_of_memory;
  if (st == dnnl_success && e->scratch && !(scratch = pd_alloc(e->scratch))) st = dnnl_out_of_memory;
  for (int i = 0; i < 3 && st == dnnl_success; i++) {
    st = dnnl_memory_create(&um[i], &e->user[i], eng, ptr[i]);
    if (st != dnnl_success || !e->reorder[i]) continue;
    bufsz[i] = dnnl_memory_desc_get_size(&e->want[i]);
    buf[i] = pd_alloc(bufsz[i] ? bufsz[i] : 1);
    st = buf[i] ? dnnl_memory_create(&wm[i], &e->want[i], eng, buf[i]) : dnnl_out_of_memory;
  }
  if (st == dnnl_success && has_bias) st = dnnl_memory_create(&bm, &e->bias_md, eng, (void *)bias);
  /* the inputs into the primitive's layouts */
  for (int i = 0; i < 2 && st == dnnl_success; i++) {
    if (!e->reorder[i]) continue;
    dnnl_exec_arg_t args[3] = {{DNNL_ARG_FROM, um[i]}, {DNNL_ARG_TO, wm[i]}};
    st = pdk_dnnl_exec(e->reorder[i], s, 2, args, &e->scratch_md[i], e->scratch_sz[i], scratch);
  }
  if (st == dnnl_success) {
    dnnl_memory_t m[3];
    for (int i = 0; i < 3; i++) m[i] = e->reorder[i] ? wm[i] : um[i];
    static const int roles[3][3] = {{DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST},
                                    {DNNL_ARG_DIFF_DST, DNNL_ARG_WEIGHTS, DNNL_ARG_DIFF_SRC},
                                    {DNNL_ARG_SRC, DNNL_ARG_DIFF_DST, DNNL_ARG_DIFF_WEIGHTS}};
    dnnl_exec_arg_t args[5];
    int n = 0;
    for (int i = 0; i < 3; i++) args[n++] = (dnnl_exec_arg_t){roles[kind][i], m[i]};
    if (bm) args[n++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, bm};
    st = pdk_dnnl_exec(e->prim, s, n, args, &e->scratch_md[3], e->scratch_sz[3], scratch);
  }
  /* the output back to the plain layout */
  if (st == dnnl_success && e->reorder[2]) {
    dnnl_exec_arg_t args[3] = {{DNNL_ARG_FROM, wm[2]}, {DNNL_ARG_TO, um[2]}};
    st = pdk_dnnl_exec(e->reorder[2], s, 2, args, &e->scratch_md[2], e->scratch_sz[2], scratch);
  }
  for (int i = 0; i < 3; i++) {
    if (um[i]) dnnl_memory_destroy(um[i]);
    if (wm[i]) dnnl_memory_destroy(wm[i]);
    if (buf[i]) pd_free(buf[i], bufsz[i] ? bufsz[i] : 1);
  }
  if (bm) dnnl_memory_destroy(bm);
  if (scratch) pd_free(scratch, e->scratch);
  if (s) pdk_dnnl_stream_release(s);
  if (owned) entry_free(&e->head);
  return st == dnnl_success ? 0 : -(int)st - 1;
}
