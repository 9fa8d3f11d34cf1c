/* Exclusive products within reduction groups (prod's gradient), and their
 * gradient. Zeros are handled exactly: no division by an element that may
 * be zero. */
#include <omp.h>
#include <stdlib.h>

#include "parallel.h"
#include "reduce.h"

#define GRAIN 32768

/* Offsets of every reduced index j, row-major. */
static int64_t *red_offsets(const pd_reduce_geom *g) {
  int64_t *o = malloc(sizeof(int64_t) * (size_t)(g->n_red > 0 ? g->n_red : 1));
  if (!o) return NULL;
  int64_t idx[PD_MAX_DIMS] = {0}, off = 0;
  for (int64_t j = 0; j < g->n_red; j++) {
    o[j] = off;
    for (int d = g->nred - 1; d >= 0; d--) {
      off += g->red_stride[d];
      if (++idx[d] < g->red_shape[d]) break;
      off -= g->red_shape[d] * g->red_stride[d];
      idx[d] = 0;
    }
  }
  return o;
}

static inline double ld(const void *p, pd_dtype dt, int64_t i) {
  return dt == PD_FLOAT32 ? (double)((const float *)p)[i] : ((const double *)p)[i];
}
static inline void st(void *p, pd_dtype dt, int64_t i, double v) {
  if (dt == PD_FLOAT32)
    ((float *)p)[i] = (float)v;
  else
    ((double *)p)[i] = v;
}

/* excl[j] = prod of xv[m] for m != j, skipping index `skip` (-1: none). */
static void exclusive(const double *xv, int64_t n, int64_t skip, double *excl) {
  double run = 1;
  for (int64_t j = 0; j < n; j++) {
    excl[j] = run;
    if (j != skip) run *= xv[j];
  }
  run = 1;
  for (int64_t j = n - 1; j >= 0; j--) {
    excl[j] *= run;
    if (j != skip) run *= xv[j];
  }
}

int pdk_reduce_prod_exclusive(const pd_reduce_geom *gx, const void *x, const pd_reduce_geom *go, void *out,
                              pd_dtype dt) {
  if (dt != PD_FLOAT32 && dt != PD_FLOAT64) return 1;
  if (gx->n_out == 0 || gx->n_red == 0) return 0;
  int64_t *rx = red_offsets(gx), *ro = red_offsets(go), n = gx->n_red;
  int nt = gx->n_out * n < GRAIN ? 1 : pd_loop_threads();
  double *bufs = malloc(sizeof(double) * 2 * (size_t)n * (size_t)nt);
  int fail = !rx || !ro || !bufs;
  if (!fail) {
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
      double *buf = bufs + (size_t)omp_get_thread_num() * 2 * (size_t)n;
#pragma omp for schedule(static)
      for (int64_t i = 0; i < gx->n_out; i++) {
        int64_t bx = pdk_reduce_keep_offset(gx, i), bo = pdk_reduce_keep_offset(go, i);
        for (int64_t j = 0; j < n; j++) buf[j] = ld(x, dt, bx + rx[j]);
        exclusive(buf, n, -1, buf + n);
        for (int64_t j = 0; j < n; j++) st(out, dt, bo + ro[j], buf[n + j]);
      }
    }
  }
  free(bufs);
  free(rx);
  free(ro);
  return fail ? 2 : 0;
}

int pdk_reduce_prod_exclusive_grad(const pd_reduce_geom *gx, const void *x, const pd_reduce_geom *go,
                                   const void *g, void *gin, pd_dtype dt) {
  if (dt != PD_FLOAT32 && dt != PD_FLOAT64) return 1;
  if (gx->n_out == 0 || gx->n_red == 0) return 0;
  int64_t *rx = red_offsets(gx), *ro = red_offsets(go), n = gx->n_red;
  int nt = gx->n_out * n < GRAIN ? 1 : pd_loop_threads();
  double *bufs = malloc(sizeof(double) * 4 * (size_t)n * (size_t)nt);
  int fail = !rx || !ro || !bufs;
  if (!fail) {
#pragma omp parallel num_threads(nt) if (nt > 1)
    {
      double *buf = bufs + (size_t)omp_get_thread_num() * 4 * (size_t)n;
      double *xv = buf, *gv = buf + n, *ex = buf + 2 * n, *res = buf + 3 * n;
#pragma omp for schedule(static)
      for (int64_t i = 0; i < gx->n_out; i++) {
        int64_t bx = pdk_reduce_keep_offset(gx, i), bo = pdk_reduce_keep_offset(go, i);
        int64_t z = 0, m1 = -1, m2 = -1;
        for (int64_t j = 0; j < n; j++) {
          xv[j] = ld(x, dt, bx + rx[j]);
          gv[j] = ld(g, dt, bo + ro[j]);
          if (xv[j] == 0) {
            if (z == 0)
              m1 = j;
            else if (z == 1)
              m2 = j;
            z++;
          }
        }
        for (int64_t j = 0; j < n; j++) res[j] = 0;
        if (z == 0) {
          /* gin[k] = (sum_i g_i P_i - g_k P_k) / x_k, P = exclusive products */
          exclusive(xv, n, -1, ex);
          double tot = 0;
          for (int64_t j = 0; j < n; j++) tot += gv[j] * ex[j];
          for (int64_t j = 0; j < n; j++) res[j] = (tot - gv[j] * ex[j]) / xv[j];
        } else if (z == 1) {
          /* ex[j] = prod over m not in {j, m1}; the zero is left out */
          exclusive(xv, n, m1, ex);
          double s = 0;
          for (int64_t j = 0; j < n; j++)
            if (j != m1) {
              s += gv[j] * ex[j];
              res[j] = gv[m1] * ex[j];
            }
          res[m1] = s;
        } else if (z == 2) {
          double q = 1;
          for (int64_t j = 0; j < n; j++)
            if (j != m1 && j != m2) q *= xv[j];
          res[m1] = gv[m2] * q;
          res[m2] = gv[m1] * q;
        }
        for (int64_t j = 0; j < n; j++) st(gin, dt, bo + ro[j], res[j]);
      }
    }
  }
  free(bufs);
  free(rx);
  free(ro);
  return fail ? 2 : 0;
}
