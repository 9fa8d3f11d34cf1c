/* Inplace ops and broadcast views: an expanded tensor has zero strides, so
 * several of its elements are one memory cell of the tensor it views. Every
 * inplace row of the registry that writes data must refuse such an x and
 * leave the viewed tensor as it was; the rows that change x's geometry only
 * (reshape_, squeeze_, unsqueeze_) still take it. */
#include <string.h>

#include "core/tensor_impl.h"
#include "op_samples.h"
#include "test_util.h"

/* The first sample of the op named `name` (the out-of-place twin of an
 * inplace row), or NULL. */
static const pd_op_sample *find_sample(const char *name) {
  for (const pd_op_sample *const *t = pd_sample_tables; *t; t++)
    for (const pd_op_sample *s = *t; s->op; s++)
      if (strcmp(s->op, name) == 0) return s;
  return NULL;
}

/* Every element of t equals v. */
static void expect_all(const pd_tensor *t, double v) {
  double buf[64];
  int64_t n = pd_tensor_numel(t);
  assert_true(n <= 64);
  assert_int_equal(pd_tensor_copy_to(t, buf, n, PD_FLOAT64), n);
  for (int64_t i = 0; i < n; i++) assert_true(buf[i] == v);
}

/* Fills in[] (and a) with valid inputs for inplace row `def`: its own
 * sample, its out-of-place twin's, or else param, grad and learning rate.
 * Returns the input count. */
static int make_inputs(const pd_op_def *def, pd_tensor **in, pd_attrs *a) {
  char twin[64];
  size_t len = strlen(def->name);
  assert_true(len > 1 && len < sizeof twin && def->name[len - 1] == '_');
  memcpy(twin, def->name, len - 1);
  twin[len - 1] = '\0';
  memset(a, 0, sizeof *a);
  const pd_op_sample *s = find_sample(def->name); /* its own sample, else its twin's */
  if (!s) s = find_sample(twin);
  if (s) {
    int n = s->make(in, a);
    assert_true(n >= 1);
    return n;
  }
  in[0] = pd_zeros(2, SHAPE(4, 3), PD_FLOAT32);
  in[1] = pd_ones(2, SHAPE(4, 3), PD_FLOAT32);
  in[2] = pd_full(1, SHAPE(1), 0.1, PD_FLOAT32);
  return 3;
}

static void test_every_inplace_row_refuses_a_broadcast_view(void **state) {
  (void)state;
  int checked = 0;
  bool saw_add = false, saw_scatter = false, saw_sgd = false;
  for (int id = 0; id < PD_NUM_OPS; id++) {
    const pd_op_def *def = pd_op_table[id];
    if (!(def->flags & PD_OPF_INPLACE) || (def->flags & PD_OPF_GEOMETRY)) continue;
    pd_tensor *in[PD_MAX_OUTPUTS] = {0};
    pd_attrs a;
    int n = make_inputs(def, in, &a);
    /* the same shape as x, but one row repeated: dim d has stride 0 */
    pd_tensor *x = in[0];
    int ndim = pd_tensor_ndim(x);
    int64_t shape[PD_MAX_DIMS], row[PD_MAX_DIMS];
    int d = -1;
    for (int k = 0; k < ndim; k++) {
      shape[k] = row[k] = pd_tensor_shape(x)[k];
      if (d < 0 && shape[k] > 1) d = k;
    }
    if (d < 0) { /* x has one element: a view of 3 */
      ndim = 1;
      shape[0] = 3;
      row[0] = 1;
      d = 0;
    }
    row[d] = 1;
    pd_tensor *base = pd_full(ndim, row, 7.0, pd_tensor_dtype(x));
    pd_tensor *view = pd_expand(base, ndim, shape);
    assert_non_null(view);
    assert_int_equal(view->strides[d], 0);
    pd_tensor_release(x);
    in[0] = view;
    pd_tensor *out[PD_MAX_OUTPUTS];
    int n_out = 0;
    pd_clear_error();
    pd_status st = pd_dispatch((pd_op_id)id, in, n, &a, out, &n_out);
    if (st == PD_OK || !strstr(pd_last_error(), def->name) || !strstr(pd_last_error(), "broadcast view"))
      fail_msg("%s: expected a broadcast-view error, got status %d: %s", def->name, (int)st, pd_last_error());
    assert_int_equal(n_out, 0);
    expect_all(base, 7.0);
    pd_clear_error();
    for (int i = 0; i < n; i++) pd_tensor_release(in[i]);
    pd_tensor_release(base);
    saw_add |= strcmp(def->name, "add_") == 0;
    saw_scatter |= strcmp(def->name, "scatter_") == 0;
    saw_sgd |= strcmp(def->name, "sgd_") == 0;
    checked++;
  }
  assert_true(saw_add && saw_scatter && saw_sgd);
  assert_true(checked >= 20);
  expect_no_live_tensors();
}

/* The reported cases through the public functions. */
static void test_add_and_scatter_on_expand(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = T(PD_FLOAT32, 1, SHAPE(3), 0, 1, 2);
  pd_tensor *y = pd_expand(pd_reshape(x, 2, SHAPE(1, 3)), 2, SHAPE(4, 3));
  expect_error(pd_add_(y, pd_ones(2, SHAPE(4, 3), PD_FLOAT32)), "add_: x of shape [4, 3]", "strides [0, 1]");
  EXPECT_VALUES(x, 0, 0, 1, 2);
  pd_tensor *idx = T(PD_INT64, 1, SHAPE(1), 2);
  pd_tensor *upd = T(PD_FLOAT32, 2, SHAPE(1, 3), 9, 9, 9);
  expect_error(pd_scatter_(y, idx, upd, true), "scatter_", "broadcast view");
  /* with autograd recording, scatter_ takes another path */
  pd_tensor *w = T(PD_FLOAT32, 2, SHAPE(1, 3), 5, 5, 5);
  pd_tensor_set_stop_gradient(w, false);
  pd_tensor *h = pd_expand(pd_scale(w, 1, 0, true), 2, SHAPE(4, 3));
  expect_error(pd_scatter_(h, idx, upd, true), "scatter_", "broadcast view");
  assert_int_equal(pd_backward(pd_sum(h, NULL, 0, false), NULL, false), PD_OK); /* h is intact */
  EXPECT_VALUES(pd_tensor_grad(w), 0, 4, 4, 4);
  EXPECT_VALUES(x, 0, 0, 1, 2);
  /* a view whose zero stride sits on a dim of size 1 is dense: allowed */
  pd_tensor *one = pd_expand(pd_reshape(x, 2, SHAPE(1, 3)), 2, SHAPE(1, 3));
  assert_non_null(pd_add_(one, pd_ones(2, SHAPE(1, 3), PD_FLOAT32)));
  EXPECT_VALUES(x, 0, 1, 2, 3);
  /* geometry-only inplace ops keep working on a broadcast view */
  pd_tensor *v = pd_expand(pd_reshape(x, 3, SHAPE(1, 1, 3)), 3, SHAPE(1, 2, 3));
  assert_non_null(pd_squeeze_(v, 1, SHAPE(0)));
  expect_shape(v, 2, SHAPE(2, 3));
  assert_non_null(pd_reshape_(v, 1, SHAPE(6)));
  EXPECT_VALUES(v, 0, 1, 2, 3, 1, 2, 3);
  EXPECT_VALUES(x, 0, 1, 2, 3);
  pd_scope_end();
  expect_no_live_tensors();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_inplace_row_refuses_a_broadcast_view),
      cmocka_unit_test(test_add_and_scatter_on_expand),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
