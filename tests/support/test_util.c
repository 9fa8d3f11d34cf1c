#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void expect_shape(const pd_tensor *t, int ndim, const int64_t *shape) {
  if (!t) fail_msg("tensor is NULL: %s", pd_last_error());
  assert_int_equal(pd_tensor_ndim(t), ndim);
  for (int d = 0; d < ndim; d++)
    if (pd_tensor_shape(t)[d] != shape[d])
      fail_msg("dim %d: %lld != %lld", d, (long long)pd_tensor_shape(t)[d], (long long)shape[d]);
}

void expect_close(const pd_tensor *a, const pd_tensor *b, double rtol, double atol) {
  if (!a || !b) fail_msg("tensor is NULL: %s", pd_last_error());
  expect_shape(a, pd_tensor_ndim(b), pd_tensor_shape(b));
  for (int64_t i = 0; i < pd_tensor_numel(a); i++) {
    double x = pd_tensor_item_at(a, i), y = pd_tensor_item_at(b, i);
    if ((isnan(x) && isnan(y)) || x == y) continue;
    if (!(fabs(x - y) <= atol + rtol * fabs(y))) {
      char *sa = pd_tensor_to_string(a), *sb = pd_tensor_to_string(b);
      fprintf(stderr, "got:\n%s\nwant:\n%s\n", sa ? sa : "?", sb ? sb : "?");
      free(sa);
      free(sb);
      fail_msg("element %lld: %.10g vs %.10g", (long long)i, x, y);
    }
  }
}

void expect_values(const pd_tensor *a, const double *want, int64_t n, double tol) {
  if (!a) fail_msg("tensor is NULL: %s", pd_last_error());
  assert_int_equal(pd_tensor_numel(a), n);
  for (int64_t i = 0; i < n; i++) {
    double x = pd_tensor_item_at(a, i);
    if ((isnan(x) && isnan(want[i])) || x == want[i]) continue;
    if (!(fabs(x - want[i]) <= tol * (1 + fabs(want[i]))))
      fail_msg("element %lld: got %.10g, want %.10g", (long long)i, x, want[i]);
  }
}

void expect_error(const pd_tensor *t, const char *f1, const char *f2) {
  if (t) fail_msg("expected an error (%s), got a tensor", f1 ? f1 : "");
  const char *m = pd_last_error();
  if (f1 && !strstr(m, f1)) fail_msg("error '%s' lacks '%s'", m, f1);
  if (f2 && !strstr(m, f2)) fail_msg("error '%s' lacks '%s'", m, f2);
  pd_clear_error();
}

int test_count_of(const char *text, const char *what) {
  int n = 0;
  for (const char *p = text; (p = strstr(p, what)) != NULL; p += strlen(what)) n++;
  return n;
}

void expect_no_live_tensors(void) {
  if (pd_memory_allocated() != 0)
    fail_msg("%zu bytes of tensor memory still live (a leak)", pd_memory_allocated());
}

bool same_bits(const pd_tensor *a, const pd_tensor *b) {
  if (!a || !b || pd_tensor_dtype(a) != pd_tensor_dtype(b) || pd_tensor_numel(a) != pd_tensor_numel(b))
    return false;
  /* views (an expanded gradient) are compared through contiguous copies,
   * owned by a scope of their own */
  pd_scope_begin();
  pd_tensor *ca = pd_contiguous((pd_tensor *)a), *cb = pd_contiguous((pd_tensor *)b);
  size_t bytes = (size_t)pd_tensor_numel(a) * pd_dtype_size(pd_tensor_dtype(a));
  bool same = ca && cb && memcmp(pd_tensor_data(ca), pd_tensor_data(cb), bytes) == 0;
  pd_scope_end();
  return same;
}

pd_tensor *test_wave(int64_t rows, int64_t cols, double phase) {
  double *v = malloc(sizeof(double) * (size_t)(rows * cols));
  if (!v) return NULL;
  for (int64_t i = 0; i < rows * cols; i++) {
    double r = sin(phase + 12.9898 * (double)(i + 1)) * 43758.5453;
    v[i] = r - floor(r) - 0.5;
  }
  pd_tensor *t = pd_tensor_from_f64(v, PD_FLOAT64, 2, (int64_t[]){rows, cols});
  free(v);
  return t;
}
