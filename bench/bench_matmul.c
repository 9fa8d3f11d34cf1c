/* GFLOP/s of pd_matmul against raw dnnl_sgemm (and OpenBLAS cblas_sgemm when
 * built with it) in one run, float32, on square sizes and on the shapes of a
 * small decoder (hidden 256, 4 heads, intermediate 688, vocab 1000, seq 128,
 * batch 4), and two products with B transposed (input gradients). Each measurement: warm-up, then the median
 * of several timed runs, the libraries interleaved so that load from elsewhere hits them alike.
 *
 *   bench_matmul [runs]       (default 21)
 */
#include <oneapi/dnnl/dnnl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "paddlec.h"
#ifdef PADDLEC_BENCH_OPENBLAS
#include <cblas.h>

#include "timing.h"
#endif

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

typedef struct shape {
  const char *name;
  int64_t batch, M, N, K;
  bool tb; /* B given as N x K, multiplied transposed (a linear layer's input gradient) */
} shape;

typedef struct ctx {
  shape s;
  pd_tensor *x, *y; /* [batch,] M x K and K x N */
  float *A, *B, *C;
  /* oneDNN matmul primitive, batched shapes only */
  dnnl_engine_t eng;
  dnnl_stream_t strm;
  dnnl_primitive_t prim;
  dnnl_memory_t msrc, mwei, mdst;
} ctx;

enum { M_PD, M_DNNL, M_PRIM, M_BLAS, M_COUNT };

static void run_pd(ctx *c) {
  pd_tensor *z = pd_matmul(c->x, c->y, false, c->s.tb);
  if (!z) {
    fprintf(stderr, "pd_matmul: %s\n", pd_last_error());
    exit(1);
  }
  pd_tensor_release(z);
}

static void run_dnnl(ctx *c) {
  const shape *s = &c->s;
  for (int64_t b = 0; b < s->batch; b++)
    dnnl_sgemm('N', s->tb ? 'T' : 'N', s->M, s->N, s->K, 1.0f, c->A + b * s->M * s->K, s->K,
               c->B + b * s->K * s->N, s->tb ? s->K : s->N, 0.0f, c->C + b * s->M * s->N, s->N);
}

static void run_prim(ctx *c) {
  dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, c->msrc}, {DNNL_ARG_WEIGHTS, c->mwei}, {DNNL_ARG_DST, c->mdst}};
  dnnl_primitive_execute(c->prim, c->strm, 3, args);
  dnnl_stream_wait(c->strm);
}

#ifdef PADDLEC_BENCH_OPENBLAS
static void run_blas(ctx *c) {
  const shape *s = &c->s;
  for (int64_t b = 0; b < s->batch; b++)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, s->tb ? CblasTrans : CblasNoTrans, (int)s->M, (int)s->N,
                (int)s->K, 1.0f, c->A + b * s->M * s->K, (int)s->K, c->B + b * s->K * s->N,
                (int)(s->tb ? s->K : s->N), 0.0f, c->C + b * s->M * s->N, (int)s->N);
}
#endif

static void setup_prim(ctx *c) {
  const shape *s = &c->s;
  dnnl_memory_desc_t src, wei, dst;
  dnnl_dims_t ds = {s->batch, s->M, s->K}, dw = {s->batch, s->K, s->N}, dd = {s->batch, s->M, s->N};
  dnnl_memory_desc_init_by_tag(&src, 3, ds, dnnl_f32, dnnl_abc);
  dnnl_memory_desc_init_by_tag(&wei, 3, dw, dnnl_f32, dnnl_abc);
  dnnl_memory_desc_init_by_tag(&dst, 3, dd, dnnl_f32, dnnl_abc);
  dnnl_matmul_desc_t md;
  dnnl_primitive_desc_t pdesc;
  dnnl_engine_create(&c->eng, dnnl_cpu, 0);
  dnnl_stream_create(&c->strm, c->eng, dnnl_stream_default_flags);
  dnnl_matmul_desc_init(&md, &src, &wei, NULL, &dst);
  if (dnnl_primitive_desc_create(&pdesc, &md, NULL, c->eng, NULL) != dnnl_success) {
    c->prim = NULL;
    return;
  }
  dnnl_primitive_create(&c->prim, pdesc);
  dnnl_primitive_desc_destroy(pdesc);
  dnnl_memory_create(&c->msrc, &src, c->eng, c->A);
  dnnl_memory_create(&c->mwei, &wei, c->eng, c->B);
  dnnl_memory_create(&c->mdst, &dst, c->eng, c->C);
}

static void teardown_prim(ctx *c) {
  if (c->prim) {
    dnnl_primitive_destroy(c->prim);
    dnnl_memory_destroy(c->msrc);
    dnnl_memory_destroy(c->mwei);
    dnnl_memory_destroy(c->mdst);
  }
  if (c->strm) dnnl_stream_destroy(c->strm);
  if (c->eng) dnnl_engine_destroy(c->eng);
}

/* Seconds per call of each method: median and best over runs; -1 when not run. */
static void measure(ctx *c, int runs, double *sec, double *best) {
  void (*fn[M_COUNT])(ctx *) = {run_pd, run_dnnl, c->prim ? run_prim : NULL,
#ifdef PADDLEC_BENCH_OPENBLAS
                                run_blas
#else
                                NULL
#endif
  };
  double flops = 2.0 * (double)c->s.batch * (double)c->s.M * (double)c->s.N * (double)c->s.K;
  /* iterations per timed run: about 10 ms of work at ~50 GFLOP/s (short runs,
   * many of them: the median then shrugs off bursts of load from elsewhere) */
  int iters = (int)(5e8 / flops);
  if (iters < 1) iters = 1;
  if (iters > 2000) iters = 2000;
  double t[M_COUNT][64];
  /* the methods on the one OpenMP pool are interleaved run by run; OpenBLAS
   * (its own threads, which spin after each call) runs after them, then the
   * machine is left idle briefly so its threads go to sleep */
  for (int phase = 0; phase < 2; phase++) {
    for (int m = 0; m < M_COUNT; m++)
      if (fn[m] && (m == M_BLAS) == phase)
        for (int w = 0; w < 3; w++) fn[m](c); /* warm-up: JIT, page faults, allocator cache */
    for (int r = 0; r < runs; r++) {
      for (int m = 0; m < M_COUNT; m++) {
        if (!fn[m] || (m == M_BLAS) != phase) continue;
        double t0 = bench_now_s();
        for (int i = 0; i < iters; i++) fn[m](c);
        t[m][r] = (bench_now_s() - t0) / iters;
      }
    }
    if (phase == 1 && fn[M_BLAS]) nanosleep(&(struct timespec){0, 300000000}, NULL);
  }
  for (int m = 0; m < M_COUNT; m++) {
    sec[m] = fn[m] ? median(t[m], runs) : -1; /* sorts t[m] */
    best[m] = fn[m] ? t[m][0] : -1;
  }
}

static float *filled(int64_t n, unsigned seed) {
  float *p = malloc(sizeof(float) * (size_t)n);
  uint32_t s = seed * 747796405u + 1u;
  for (int64_t i = 0; i < n; i++) {
    s = s * 1664525u + 1013904223u;
    p[i] = (float)(s >> 8) / 8388608.0f - 1.0f;
  }
  return p;
}

int main(int argc, char **argv) {
  int runs = argc > 1 ? atoi(argv[1]) : 21;
  if (runs < 1) runs = 1;
  if (runs > 64) runs = 64;
  const shape shapes[] = {
      {"256^3", 1, 256, 256, 256, false},
      {"512^3", 1, 512, 512, 512, false},
      {"1024^3", 1, 1024, 1024, 1024, false},
      {"2048^3", 1, 2048, 2048, 2048, false},
      {"qkv [512,256]x[256,768]", 1, 512, 768, 256, false},
      {"ffn up [512,256]x[256,1376]", 1, 512, 1376, 256, false},
      {"ffn down [512,688]x[688,256]", 1, 512, 256, 688, false},
      {"lm head [512,256]x[256,1000]", 1, 512, 1000, 256, false},
      {"attn [16,128,64]x[16,64,128]", 16, 128, 128, 64, false},
      {"attn [16,128,128]x[16,128,64]", 16, 128, 64, 128, false},
      /* input gradients: dY x W^T */
      {"mlp dX [128,1024]x[1024,1024]^T", 1, 128, 1024, 1024, true},
      {"qkv dX [512,768]x[256,768]^T", 1, 512, 256, 768, true},
  };
  printf(
      "paddle.c matmul benchmark: float32, %d threads, GFLOP/s = median of %d runs;\n"
      "pd/dnnl = ratio of the medians, best = ratio of the fastest runs\n",
      pd_get_num_threads(), runs);
  printf("%-32s %12s %12s %12s", "shape", "pd_matmul", "dnnl_sgemm", "dnnl_matmul");
#ifdef PADDLEC_BENCH_OPENBLAS
  printf(" %12s", "openblas");
#endif
  printf(" %10s %10s\n", "pd/dnnl", "best");
  for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
    ctx c;
    memset(&c, 0, sizeof c);
    c.s = shapes[i];
    const shape *s = &c.s;
    c.A = filled(s->batch * s->M * s->K, 1);
    c.B = filled(s->batch * s->K * s->N, 2);
    c.C = calloc((size_t)(s->batch * s->M * s->N), sizeof(float));
    int64_t xs[3] = {s->batch, s->M, s->K}, ys[3] = {s->batch, s->tb ? s->N : s->K, s->tb ? s->K : s->N};
    int nd = s->batch > 1 ? 3 : 2;
    c.x = pd_to_tensor(c.A, PD_FLOAT32, nd, nd == 3 ? xs : xs + 1);
    c.y = pd_to_tensor(c.B, PD_FLOAT32, nd, nd == 3 ? ys : ys + 1);
    if (s->batch > 1) setup_prim(&c);
    double sec[M_COUNT], best[M_COUNT];
    measure(&c, runs, sec, best);
    double flops = 2.0 * (double)s->batch * (double)s->M * (double)s->N * (double)s->K;
    double g[M_COUNT];
    for (int m = 0; m < M_COUNT; m++) g[m] = sec[m] > 0 ? flops / sec[m] * 1e-9 : 0;
    char prim[16] = "-";
    if (sec[M_PRIM] > 0) snprintf(prim, sizeof prim, "%.1f", g[M_PRIM]);
    printf("%-32s %12.1f %12.1f %12s", s->name, g[M_PD], g[M_DNNL], prim);
#ifdef PADDLEC_BENCH_OPENBLAS
    printf(" %12.1f", g[M_BLAS]);
#endif
    printf(" %10.3f %10.3f\n", g[M_PD] / g[M_DNNL], best[M_DNNL] / best[M_PD]);
    fflush(stdout);
    teardown_prim(&c);
    pd_tensor_release(c.x);
    pd_tensor_release(c.y);
    free(c.A);
    free(c.B);
    free(c.C);
  }
  return 0;
}
