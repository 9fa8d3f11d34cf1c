/* GFLOP/s of a ResNet-like 3x3 convolution, float32, NCHW: x [8, 64, 56, 56],
 * weight [64, 64, 3, 3], padding 1, no bias; forward + backward (data and
 * weight gradients) through paddle.c's autograd (pd_conv2d then pd_grad),
 * against the three raw oneDNN primitives in the same run (layout "any",
 * tensors already in the primitives' preferred layouts: the best oneDNN can
 * do), then each direction alone. Each measurement: warm-up, then the median
 * of several timed runs, the two interleaved so that load from elsewhere hits
 * them alike.
 *
 *   bench_conv [runs] [N C H W]   (defaults 11; 8 64 56 56)
 */
#include <oneapi/dnnl/dnnl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ops/op_registry.h"
#include "paddlec.h"
#include "timing.h"

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}
static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
static void check(dnnl_status_t st, const char *what) {
  if (st != dnnl_success) {
    fprintf(stderr, "oneDNN: %s failed (%d)\n", what, (int)st);
    exit(1);
  }
}

static int64_t N = 8, C = 64, H = 56, W = 56;
#define K 3

/* ---- raw oneDNN ----------------------------------------------------------- */

typedef struct raw {
  dnnl_engine_t eng;
  dnnl_stream_t strm;
  dnnl_primitive_t fwd, bwd_data, bwd_w;
  dnnl_memory_t src, wei, dst, diff_dst, diff_src, diff_wei; /* preferred layouts, per primitive */
  dnnl_memory_t bd_wei, bd_diff_dst, bw_src, bw_diff_dst;    /* (may differ between primitives) */
  void *bufs[16];
  int nbufs;
} raw;

static dnnl_memory_t mem_for(raw *r, const_dnnl_primitive_desc_t pd, dnnl_query_t q) {
  const dnnl_memory_desc_t *md = dnnl_primitive_desc_query_md(pd, q, 0);
  size_t n = dnnl_memory_desc_get_size(md);
  void *p = aligned_alloc(64, (n + 63) / 64 * 64);
  float *f = p;
  for (size_t i = 0; i < n / sizeof(float); i++) f[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
  r->bufs[r->nbufs++] = p;
  dnnl_memory_t m;
  check(dnnl_memory_create(&m, md, r->eng, p), "memory_create");
  return m;
}

static void raw_setup(raw *r) {
  memset(r, 0, sizeof *r);
  check(dnnl_engine_create(&r->eng, dnnl_cpu, 0), "engine");
  check(dnnl_stream_create(&r->strm, r->eng, dnnl_stream_default_flags), "stream");
  dnnl_dims_t sd = {N, C, H, W}, wd = {C, C, K, K}, dd = {N, C, H, W}, st = {1, 1}, dl = {0, 0}, p = {1, 1};
  dnnl_memory_desc_t s, w, d;
  dnnl_memory_desc_init_by_tag(&s, 4, sd, dnnl_f32, dnnl_format_tag_any);
  dnnl_memory_desc_init_by_tag(&w, 4, wd, dnnl_f32, dnnl_format_tag_any);
  dnnl_memory_desc_init_by_tag(&d, 4, dd, dnnl_f32, dnnl_format_tag_any);
  dnnl_convolution_desc_t fd, bdd, bwd;
  dnnl_primitive_desc_t fpd, bdpd, bwpd;
  check(dnnl_dilated_convolution_forward_desc_init(&fd, dnnl_forward_training, dnnl_convolution_direct, &s,
                                                   &w, NULL, &d, st, dl, p, p),
        "fwd desc");
  check(dnnl_primitive_desc_create(&fpd, &fd, NULL, r->eng, NULL), "fwd pd");
  check(dnnl_dilated_convolution_backward_data_desc_init(&bdd, dnnl_convolution_direct, &s, &w, &d, st, dl, p,
                                                         p),
        "bwd data desc");
  check(dnnl_primitive_desc_create(&bdpd, &bdd, NULL, r->eng, fpd), "bwd data pd");
  check(dnnl_dilated_convolution_backward_weights_desc_init(&bwd, dnnl_convolution_direct, &s, &w, NULL, &d,
                                                            st, dl, p, p),
        "bwd weights desc");
  check(dnnl_primitive_desc_create(&bwpd, &bwd, NULL, r->eng, fpd), "bwd weights pd");
  const char *impl = NULL;
  dnnl_primitive_desc_query(fpd, dnnl_query_impl_info_str, 0, &impl);
  printf("oneDNN forward implementation: %s\n", impl ? impl : "?");
  r->src = mem_for(r, fpd, dnnl_query_src_md);
  r->wei = mem_for(r, fpd, dnnl_query_weights_md);
  r->dst = mem_for(r, fpd, dnnl_query_dst_md);
  r->bd_diff_dst = mem_for(r, bdpd, dnnl_query_diff_dst_md);
  r->bd_wei = mem_for(r, bdpd, dnnl_query_weights_md);
  r->diff_src = mem_for(r, bdpd, dnnl_query_diff_src_md);
  r->bw_src = mem_for(r, bwpd, dnnl_query_src_md);
  r->bw_diff_dst = mem_for(r, bwpd, dnnl_query_diff_dst_md);
  r->diff_wei = mem_for(r, bwpd, dnnl_query_diff_weights_md);
  check(dnnl_primitive_create(&r->fwd, fpd), "fwd");
  check(dnnl_primitive_create(&r->bwd_data, bdpd), "bwd data");
  check(dnnl_primitive_create(&r->bwd_w, bwpd), "bwd weights");
  dnnl_primitive_desc_destroy(fpd);
  dnnl_primitive_desc_destroy(bdpd);
  dnnl_primitive_desc_destroy(bwpd);
}

static void raw_teardown(raw *r) {
  dnnl_primitive_destroy(r->fwd);
  dnnl_primitive_destroy(r->bwd_data);
  dnnl_primitive_destroy(r->bwd_w);
  dnnl_memory_t ms[] = {r->src,      r->wei,    r->dst,         r->bd_diff_dst, r->bd_wei,
                        r->diff_src, r->bw_src, r->bw_diff_dst, r->diff_wei};
  for (size_t i = 0; i < sizeof ms / sizeof *ms; i++) dnnl_memory_destroy(ms[i]);
  for (int i = 0; i < r->nbufs; i++) free(r->bufs[i]);
  dnnl_stream_destroy(r->strm);
  dnnl_engine_destroy(r->eng);
}

static void raw_fwd(raw *r) {
  dnnl_exec_arg_t a[3] = {{DNNL_ARG_SRC, r->src}, {DNNL_ARG_WEIGHTS, r->wei}, {DNNL_ARG_DST, r->dst}};
  check(dnnl_primitive_execute(r->fwd, r->strm, 3, a), "exec fwd");
  dnnl_stream_wait(r->strm);
}
static void raw_bwd_data(raw *r) {
  dnnl_exec_arg_t a[3] = {
      {DNNL_ARG_DIFF_DST, r->bd_diff_dst}, {DNNL_ARG_WEIGHTS, r->bd_wei}, {DNNL_ARG_DIFF_SRC, r->diff_src}};
  check(dnnl_primitive_execute(r->bwd_data, r->strm, 3, a), "exec bwd data");
  dnnl_stream_wait(r->strm);
}
static void raw_bwd_w(raw *r) {
  dnnl_exec_arg_t a[3] = {
      {DNNL_ARG_SRC, r->bw_src}, {DNNL_ARG_DIFF_DST, r->bw_diff_dst}, {DNNL_ARG_DIFF_WEIGHTS, r->diff_wei}};
  check(dnnl_primitive_execute(r->bwd_w, r->strm, 3, a), "exec bwd weights");
  dnnl_stream_wait(r->strm);
}
static void raw_all(raw *r) {
  raw_fwd(r);
  raw_bwd_data(r);
  raw_bwd_w(r);
}

/* ---- paddle.c ----------------------------------------------------------------- */

typedef struct pdc {
  pd_tensor *x, *w, *dy, *y;
  pd_conv_opts o;
} pdc;

/* forward + backward through autograd: y = conv2d(x, w); (dx, dw) = grad(y, (x, w), dy) */
static void run_pd_all(pdc *p) {
  pd_scope_begin();
  pd_tensor *y = pd_conv2d(p->x, p->w, NULL, &p->o);
  pd_tensor *in[2] = {p->x, p->w}, *g[2];
  if (!y || pd_grad(&y, 1, in, 2, &p->dy, NULL, g) != PD_OK) {
    fprintf(stderr, "paddle.c: %s\n", pd_last_error());
    exit(1);
  }
  pd_scope_end();
}
static void run_pd_fwd(pdc *p) {
  bool prev = pd_set_grad_enabled(false);
  pd_tensor_release(pd_conv2d(p->x, p->w, NULL, &p->o));
  pd_set_grad_enabled(prev);
}
static void run_pd_bwd_data(pdc *p) {
  bool prev = pd_set_grad_enabled(false);
  pd_tensor_release(pd_conv2d_transpose(p->dy, p->w, NULL, &p->o));
  pd_set_grad_enabled(prev);
}
static void run_pd_bwd_w(pdc *p) {
  bool prev = pd_set_grad_enabled(false);
  pd_attrs a = {.nv = {2, 2, 4, 2}, .v = {{1, 1}, {1, 1}, {1, 1, 1, 1}, {K, K}}, .i = {1, 0}};
  pd_tensor_release(pd_dispatch1(PD_OP_conv_grad_filter, (pd_tensor *[]){p->x, p->dy}, 2, &a));
  pd_set_grad_enabled(prev);
}

typedef struct row {
  const char *name;
  double flops;
  void (*pd)(pdc *);
  void (*dn)(raw *);
} row;

int main(int argc, char **argv) {
  int runs = argc > 1 ? atoi(argv[1]) : 11;
  if (runs < 1) runs = 1;
  if (runs > 64) runs = 64;
  if (argc > 5) N = atoll(argv[2]), C = atoll(argv[3]), H = atoll(argv[4]), W = atoll(argv[5]);
  double f1 = 2.0 * (double)N * (double)C * (double)H * (double)W * (double)C * K * K;
  raw r;
  raw_setup(&r);
  pdc p = {.o = {.n_padding = 1, .padding = {1}}};
  pd_seed(1);
  p.x = pd_randn(4, (int64_t[]){N, C, H, W}, PD_FLOAT32);
  p.w = pd_randn(4, (int64_t[]){C, C, K, K}, PD_FLOAT32);
  p.dy = pd_randn(4, (int64_t[]){N, C, H, W}, PD_FLOAT32);
  pd_tensor_set_stop_gradient(p.x, false);
  pd_tensor_set_stop_gradient(p.w, false);
  printf(
      "paddle.c conv benchmark: x [%lld, %lld, %lld, %lld] * w [%lld, %lld, 3, 3], padding 1, float32, %d "
      "threads\n"
      "GFLOP/s = median of %d runs; pd/dnnl = ratio of the medians (1.0 = the raw primitives' speed)\n",
      (long long)N, (long long)C, (long long)H, (long long)W, (long long)C, (long long)C,
      pd_get_num_threads(), runs);
  const row rows[] = {
      {"forward + backward", 3 * f1, run_pd_all, raw_all},
      {"forward", f1, run_pd_fwd, raw_fwd},
      {"backward data", f1, run_pd_bwd_data, raw_bwd_data},
      {"backward weights", f1, run_pd_bwd_w, raw_bwd_w},
  };
  printf("%-20s %12s %12s %10s\n", "pass", "paddle.c", "oneDNN", "pd/dnnl");
  for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
    const row *rw = &rows[i];
    for (int w = 0; w < 2; w++) rw->pd(&p), rw->dn(&r); /* warm-up: JIT, caches, allocator */
    int iters = (int)(2e9 / rw->flops);
    if (iters < 1) iters = 1;
    double tp[64], td[64];
    for (int k = 0; k < runs; k++) {
      double t0 = bench_now_s();
      for (int it = 0; it < iters; it++) rw->pd(&p);
      tp[k] = (bench_now_s() - t0) / iters;
      t0 = bench_now_s();
      for (int it = 0; it < iters; it++) rw->dn(&r);
      td[k] = (bench_now_s() - t0) / iters;
    }
    double mp = median(tp, runs), md = median(td, runs);
    printf("%-20s %12.1f %12.1f %10.3f\n", rw->name, rw->flops / mp * 1e-9, rw->flops / md * 1e-9, md / mp);
  }
  pd_tensor_release(p.x);
  pd_tensor_release(p.w);
  pd_tensor_release(p.dy);
  raw_teardown(&r);
  return 0;
}
