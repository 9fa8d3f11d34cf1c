/* The elementwise driver: outer-dim walk, coalescing, OpenMP split. */
#include "parallel.h"
#include "elementwise.h"

#include <omp.h>
#include <stdbool.h>

void pdk_ew_coalesce(pd_ew_geom *g) {
  int nd = 0;
  for (int d = 0; d < g->ndim; d++) {
    if (g->shape[d] == 1) continue;
    if (nd > 0) {
      bool merge = true;
      for (int k = 0; k < g->nops; k++)
        if (g->stride[k][nd - 1] != g->stride[k][d] * g->shape[d]) merge = false;
      if (merge) {
        g->shape[nd - 1] *= g->shape[d];
        for (int k = 0; k < g->nops; k++) g->stride[k][nd - 1] = g->stride[k][d];
        continue;
      }
    }
    g->shape[nd] = g->shape[d];
    for (int k = 0; k < g->nops; k++) g->stride[k][nd] = g->stride[k][d];
    nd++;
  }
  if (nd == 0) { /* a single element */
    g->shape[0] = 1;
    for (int k = 0; k < g->nops; k++) g->stride[k][0] = 1;
    nd = 1;
  }
  g->ndim = nd;
}

/* Runs rows [r0, r1) of the outer index space; a row is one inner run. */
static void run_rows(const pd_ew_geom *g, pd_ew_fn fn, const void *params, int64_t r0, int64_t r1) {
  int nd = g->ndim, last = nd - 1;
  int64_t inner = g->shape[last];
  int64_t s_in[PD_EW_MAX_OPERANDS];
  for (int k = 0; k < g->nops; k++) s_in[k] = g->stride[k][last];
  int64_t idx[PD_EW_MAX_DIMS] = {0};
  /* decompose r0 into outer indices */
  int64_t r = r0;
  for (int d = last - 1; d >= 0; d--) {
    idx[d] = r % g->shape[d];
    r /= g->shape[d];
  }
  char *ptr[PD_EW_MAX_OPERANDS];
  for (int64_t row = r0; row < r1; row++) {
    for (int k = 0; k < g->nops; k++) {
      int64_t off = 0;
      for (int d = 0; d < last; d++) off += idx[d] * g->stride[k][d];
      ptr[k] = g->base[k] + off * g->elsize[k];
    }
    fn(inner, ptr, s_in, params);
    for (int d = last - 1; d >= 0; d--) {
      if (++idx[d] < g->shape[d]) break;
      idx[d] = 0;
    }
  }
}

/* out[.., i, j] = f(in[.., j, i]) with out's j and in's i contiguous: walk
 * 32x32 tiles so the strided reads of a tile stay in cache (a plain row
 * walk misses on every element of a large transposed copy). */
#define TILE 32
static void run_transposed(const pd_ew_geom *g, pd_ew_fn fn, const void *params) {
  int nd = g->ndim, r = nd - 2, c = nd - 1;
  int64_t R = g->shape[r], C = g->shape[c];
  int64_t batch = 1;
  for (int d = 0; d < r; d++) batch *= g->shape[d];
  int64_t tiles_r = (R + TILE - 1) / TILE, tiles_c = (C + TILE - 1) / TILE;
  int64_t ntiles = batch * tiles_r * tiles_c;
  int64_t s_run[PD_EW_MAX_OPERANDS];
  for (int k = 0; k < g->nops; k++) s_run[k] = g->stride[k][c];
  PD_OMP_FOR_IF(
      ntiles > 4, for (int64_t t = 0; t < ntiles; t++), int64_t b = t / (tiles_r * tiles_c),
      rem = t % (tiles_r * tiles_c);
      int64_t i0 = rem / tiles_c * TILE, j0 = rem % tiles_c * TILE;
      int64_t i1 = i0 + TILE < R ? i0 + TILE : R, j1 = j0 + TILE < C ? j0 + TILE : C;
      int64_t boff[PD_EW_MAX_OPERANDS] = {0}; int64_t bb = b; for (int d = r - 1; d >= 0; d--) {
        int64_t idx = bb % g->shape[d];
        bb /= g->shape[d];
        for (int k = 0; k < g->nops; k++) boff[k] += idx * g->stride[k][d];
      } char *ptr[PD_EW_MAX_OPERANDS];
      for (int64_t i = i0; i < i1; i++) {
        for (int k = 0; k < g->nops; k++)
          ptr[k] = g->base[k] + (boff[k] + i * g->stride[k][r] + j0 * g->stride[k][c]) * g->elsize[k];
        fn(j1 - j0, ptr, s_run, params);
      });
}

void pdk_ew_run(const pd_ew_geom *g, pd_ew_fn fn, const void *params) {
  int last = g->ndim - 1;
  if (g->ndim >= 2 && g->stride[0][last] == 1 && g->shape[last] >= TILE && g->shape[last - 1] >= TILE) {
    bool transposed = false; /* some input is contiguous along the row dim instead */
    for (int k = 1; k < g->nops; k++)
      if (g->stride[k][last] != 1 && g->stride[k][last] != 0 && g->stride[k][last - 1] == 1)
        transposed = true;
    if (transposed) {
      run_transposed(g, fn, params);
      return;
    }
  }
  int64_t rows = 1;
  for (int d = 0; d < last; d++) rows *= g->shape[d];
  int64_t total = rows * g->shape[last];
  if (total < PD_EW_GRAIN) {
    run_rows(g, fn, params, 0, rows);
    return;
  }
  if (rows == 1) { /* one long run: split it */
    int64_t n = g->shape[last];
#pragma omp parallel if (pd_parallel_loops_on())
    {
      int nt = omp_get_num_threads(), t = omp_get_thread_num();
      int64_t chunk = (n + nt - 1) / nt, b = t * chunk, e = b + chunk < n ? b + chunk : n;
      if (b < e) {
        char *ptr[PD_EW_MAX_OPERANDS];
        int64_t s[PD_EW_MAX_OPERANDS];
        for (int k = 0; k < g->nops; k++) {
          s[k] = g->stride[k][last];
          ptr[k] = g->base[k] + b * s[k] * g->elsize[k];
        }
        fn(e - b, ptr, s, params);
      }
    }
    return;
  }
#pragma omp parallel if (pd_parallel_loops_on())
  {
    int nt = omp_get_num_threads(), t = omp_get_thread_num();
    int64_t chunk = (rows + nt - 1) / nt, b = t * chunk, e = b + chunk < rows ? b + chunk : rows;
    if (b < e) run_rows(g, fn, params, b, e);
  }
}

void pdk_ew_run_flat_sized(int64_t n, int nops, char *const *ptr, const int64_t *elsize, pd_ew_fn fn,
                           const void *params) {
  static const int64_t unit[PD_EW_MAX_OPERANDS] = {1, 1, 1, 1};
  if (n < PD_EW_GRAIN) {
    fn(n, ptr, unit, params);
    return;
  }
#pragma omp parallel if (pd_parallel_loops_on())
  {
    int nt = omp_get_num_threads(), t = omp_get_thread_num();
    /* chunks of 64-element multiples keep vector loops and cache lines whole */
    int64_t chunk = ((n + nt - 1) / nt + 63) & ~(int64_t)63;
    int64_t b = t * chunk, e = b + chunk < n ? b + chunk : n;
    if (b < e) {
      char *p[PD_EW_MAX_OPERANDS];
      for (int k = 0; k < nops; k++) p[k] = ptr[k] + b * elsize[k];
      fn(e - b, p, unit, params);
    }
  }
}
