#include "op_samples.h"

#include <string.h>

const pd_op_sample *const pd_sample_tables[] = {
    pd_samples_core,         pd_samples_creation,  pd_samples_elementwise,
    pd_samples_activation,   pd_samples_reduction, pd_samples_linalg,
    pd_samples_manipulation, pd_samples_nn,        pd_samples_norm,
    pd_samples_conv,         pd_samples_loss,      pd_samples_attention,
    pd_samples_optim,        pd_samples_comm,      NULL};

static uint64_t g_state = 0x9e3779b97f4a7c15ULL;

void sample_reseed(uint64_t seed) { g_state = seed ? seed : 0x9e3779b97f4a7c15ULL; }

static double next_unit(void) {
  g_state ^= g_state << 13;
  g_state ^= g_state >> 7;
  g_state ^= g_state << 17;
  return (double)(g_state >> 11) * (1.0 / 9007199254740992.0);
}

void sample_draw(double *out, int64_t n, double lo, double hi) {
  for (int64_t i = 0; i < n; i++) out[i] = lo + (hi - lo) * next_unit();
}

pd_tensor *sample_uniform(int ndim, const int64_t *shape, double lo, double hi) {
  int64_t n = 1;
  for (int d = 0; d < ndim; d++) n *= shape[d];
  double buf[4096];
  if (n > 4096) return NULL;
  sample_draw(buf, n, lo, hi);
  return pd_tensor_from_f64(buf, PD_FLOAT64, ndim, shape);
}

pd_tensor *sample_indices(int ndim, const int64_t *shape, int64_t hi) {
  int64_t n = 1;
  for (int d = 0; d < ndim; d++) n *= shape[d];
  double buf[4096];
  if (n > 4096) return NULL;
  for (int64_t i = 0; i < n; i++) buf[i] = (double)(int64_t)(next_unit() * (double)hi);
  return pd_tensor_from_f64(buf, PD_INT64, ndim, shape);
}

void sample_set_list(pd_attrs *a, int slot, int n, const int64_t *v) {
  a->nv[slot] = n;
  memcpy(a->v[slot], v, sizeof(int64_t) * (size_t)n);
}
