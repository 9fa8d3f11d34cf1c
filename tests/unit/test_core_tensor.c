/* Core tensor behaviour: views share storage, strides of transpose/expand,
 * contiguous, the inplace version counter, reference counting, element
 * access and copy-out with dtype conversion, and bad constructor inputs. */
#include <math.h>
#include <string.h>

#include "core/tensor_impl.h"
#include "test_util.h"

static int refcount(const pd_tensor *t) { return atomic_load(&((pd_tensor *)t)->refcount); }

static void test_views_share_storage(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = T(PD_FLOAT32, 2, SHAPE(2, 3), 1, 2, 3, 4, 5, 6);
  pd_tensor *r = pd_reshape(x, 2, SHAPE(3, 2));
  pd_tensor *t = pd_transpose(x, 2, SHAPE(1, 0));
  pd_tensor *e = pd_expand(pd_reshape(x, 3, SHAPE(2, 1, 3)), 3, SHAPE(2, 4, 3));
  assert_true(pd_tensor_shares_storage(x, r));
  assert_true(pd_tensor_shares_storage(x, t));
  assert_true(pd_tensor_shares_storage(x, e));
  assert_ptr_equal(pd_tensor_data(x), pd_tensor_data(r));
  /* a write through x shows in every view */
  ((float *)pd_tensor_data(x))[1] = 20;
  assert_true(pd_tensor_item_at(r, 1) == 20);
  assert_true(pd_tensor_item_at(t, 2) == 20); /* t[1][0] = x[0][1] */
  assert_true(pd_tensor_item_at(e, 1) == 20);
  assert_true(pd_tensor_item_at(e, 4) == 20); /* e[0][1][1] */
  /* and a write through a view shows in x */
  ((float *)pd_tensor_data(r))[5] = 60;
  assert_true(pd_tensor_item_at(x, 5) == 60);
  /* fresh tensors do not share */
  assert_false(pd_tensor_shares_storage(x, T(PD_FLOAT32, 2, SHAPE(2, 3), 1, 2, 3, 4, 5, 6)));
  assert_false(pd_tensor_shares_storage(x, NULL));
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_strides(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = pd_zeros(3, SHAPE(2, 3, 4), PD_FLOAT32);
  const int64_t *s = pd_tensor_strides(x);
  assert_int_equal(s[0], 12);
  assert_int_equal(s[1], 4);
  assert_int_equal(s[2], 1);
  assert_true(pd_tensor_is_contiguous(x));
  /* out.shape[i] = x.shape[perm[i]], out.strides[i] = x.strides[perm[i]] */
  pd_tensor *t = pd_transpose(x, 3, SHAPE(2, 0, 1));
  expect_shape(t, 3, SHAPE(4, 2, 3));
  s = pd_tensor_strides(t);
  assert_int_equal(s[0], 1);
  assert_int_equal(s[1], 12);
  assert_int_equal(s[2], 4);
  assert_false(pd_tensor_is_contiguous(t));
  /* negative axes in perm */
  pd_tensor *t2 = pd_transpose(x, 3, SHAPE(-1, -3, -2));
  expect_shape(t2, 3, SHAPE(4, 2, 3));
  /* expand: broadcast dims get stride 0 */
  pd_tensor *y = pd_zeros(2, SHAPE(3, 1), PD_FLOAT64);
  pd_tensor *e = pd_expand(y, 3, SHAPE(2, 3, 5));
  expect_shape(e, 3, SHAPE(2, 3, 5));
  s = pd_tensor_strides(e);
  assert_int_equal(s[0], 0);
  assert_int_equal(s[1], 1);
  assert_int_equal(s[2], 0);
  assert_false(pd_tensor_is_contiguous(e));
  assert_int_equal(pd_tensor_numel(e), 30);
  /* size-1 dims do not break contiguity */
  pd_tensor *one = pd_zeros(3, SHAPE(1, 4, 1), PD_FLOAT32);
  assert_true(pd_tensor_is_contiguous(pd_transpose(one, 3, SHAPE(2, 1, 0))));
  /* 0-d tensors */
  pd_tensor *z = pd_full(0, NULL, 1, PD_FLOAT32);
  assert_int_equal(pd_tensor_ndim(z), 0);
  assert_int_equal(pd_tensor_numel(z), 1);
  assert_true(pd_tensor_is_contiguous(z));
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_contiguous(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = T(PD_INT32, 2, SHAPE(2, 3), 1, 2, 3, 4, 5, 6);
  /* a contiguous tensor comes back as itself */
  pd_tensor *c0 = pd_contiguous(x);
  assert_ptr_equal(c0, x);
  pd_tensor *t = pd_transpose(x, 2, SHAPE(1, 0));
  pd_tensor *c = pd_contiguous(t);
  assert_true(pd_tensor_is_contiguous(c));
  assert_false(pd_tensor_shares_storage(c, x));
  expect_shape(c, 2, SHAPE(3, 2));
  const int32_t *p = pd_tensor_data(c);
  const int32_t want[6] = {1, 4, 2, 5, 3, 6};
  assert_memory_equal(p, want, sizeof want);
  const int64_t *s = pd_tensor_strides(c);
  assert_int_equal(s[0], 2);
  assert_int_equal(s[1], 1);
  /* an expanded view materialises its repeats */
  pd_tensor *e = pd_contiguous(pd_expand(T(PD_FLOAT64, 2, SHAPE(2, 1), 7, 8), 2, SHAPE(2, 3)));
  EXPECT_VALUES(e, 0, 7, 7, 7, 8, 8, 8);
  assert_true(pd_tensor_is_contiguous(e));
  /* contiguous is differentiable */
  pd_tensor *w = T(PD_FLOAT64, 2, SHAPE(2, 2), 1, 2, 3, 4);
  pd_tensor_set_stop_gradient(w, false);
  pd_tensor *wc = pd_contiguous(pd_transpose(w, 2, SHAPE(1, 0)));
  pd_tensor *l = pd_sum(pd_multiply(wc, T(PD_FLOAT64, 2, SHAPE(2, 2), 1, 10, 100, 1000)), NULL, 0, false);
  assert_int_equal(pd_backward(l, NULL, false), PD_OK);
  EXPECT_VALUES(pd_tensor_grad(w), 0, 1, 100, 10, 1000);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_version_counter(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = T(PD_FLOAT32, 1, SHAPE(3), 1, 2, 3);
  pd_tensor *v = pd_reshape(x, 2, SHAPE(3, 1));
  pd_tensor *y = T(PD_FLOAT32, 1, SHAPE(3), 10, 20, 30);
  assert_int_equal(pd_tensor_version(x), 0);
  pd_tensor *r = pd_add_(x, y);
  assert_ptr_equal(r, x); /* inplace returns x itself */
  EXPECT_VALUES(x, 0, 11, 22, 33);
  assert_int_equal(pd_tensor_version(x), 1);
  assert_int_equal(pd_tensor_version(v), 1); /* views share the counter */
  assert_true(pd_tensor_item_at(v, 2) == 33);
  pd_add_(x, T(PD_FLOAT32, 0, NULL, 1)); /* broadcast scalar */
  assert_int_equal(pd_tensor_version(x), 2);
  EXPECT_VALUES(x, 0, 12, 23, 34);
  /* out-of-place ops leave the counter alone */
  pd_add(x, y);
  assert_int_equal(pd_tensor_version(x), 2);
  assert_int_equal(pd_tensor_version(y), 0);
  /* a failed inplace op (y does not broadcast to x) does not bump it */
  expect_error(pd_add_(x, T(PD_FLOAT32, 1, SHAPE(2), 1, 2)), "add", "[2]");
  assert_int_equal(pd_tensor_version(x), 2);
  /* nor does one that would have to grow x */
  expect_error(pd_add_(T(PD_FLOAT32, 1, SHAPE(1), 1), y), "add_", "[3]");
  assert_int_equal(pd_tensor_version(NULL), 0);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_refcount(void **state) {
  (void)state;
  pd_tensor *x = pd_ones(1, SHAPE(100), PD_FLOAT32); /* no scope: the caller owns it */
  assert_int_equal(refcount(x), 1);
  size_t live = pd_memory_allocated();
  assert_true(live >= 400);
  assert_ptr_equal(pd_tensor_retain(x), x);
  assert_int_equal(refcount(x), 2);
  pd_tensor_release(x);
  assert_int_equal(refcount(x), 1);
  assert_true(pd_tensor_item_at(x, 99) == 1);
  /* a view keeps the storage alive after the base is released */
  pd_tensor *v = pd_reshape(x, 2, SHAPE(10, 10));
  assert_int_equal(refcount(x), 1);
  pd_tensor_release(x);
  assert_int_equal(pd_memory_allocated(), live);
  assert_true(pd_tensor_item_at(v, 55) == 1);
  pd_tensor_release(v);
  assert_int_equal(pd_memory_allocated(), 0);
  /* NULL is a no-op */
  pd_tensor_release(NULL);
  assert_null(pd_tensor_retain(NULL));
  expect_no_live_tensors();
}

/* Every accessor given NULL returns its sentinel and sets an error naming
 * itself, unless an earlier error (the op that returned the NULL) is
 * pending: that one is kept. */
#define EXPECT_NULL_ERROR(call, name)                                      \
  do {                                                                     \
    pd_clear_error();                                                      \
    call;                                                                  \
    assert_int_equal(pd_last_status(), PD_ERR_INVALID);                    \
    if (!strstr(pd_last_error(), name ": tensor is NULL"))                 \
      fail_msg("%s: error '%s' lacks '%s'", #call, pd_last_error(), name); \
  } while (0)

static void test_accessors_on_null(void **state) {
  (void)state;
  EXPECT_NULL_ERROR(assert_true(isnan(pd_tensor_item(NULL))), "item");
  EXPECT_NULL_ERROR(assert_true(isnan(pd_tensor_item_at(NULL, 0))), "item");
  EXPECT_NULL_ERROR(assert_int_equal(pd_tensor_ndim(NULL), -1), "tensor_ndim");
  EXPECT_NULL_ERROR(assert_int_equal(pd_tensor_numel(NULL), -1), "tensor_numel");
  EXPECT_NULL_ERROR(assert_null(pd_tensor_shape(NULL)), "tensor_shape");
  EXPECT_NULL_ERROR(assert_null(pd_tensor_strides(NULL)), "tensor_strides");
  EXPECT_NULL_ERROR(assert_null(pd_tensor_data(NULL)), "tensor_data");
  EXPECT_NULL_ERROR(assert_int_equal(pd_tensor_dtype(NULL), PD_NUM_DTYPES), "tensor_dtype");
  EXPECT_NULL_ERROR(pd_tensor_place(NULL), "tensor_place");
  EXPECT_NULL_ERROR(assert_false(pd_tensor_is_contiguous(NULL)), "tensor_is_contiguous");
  EXPECT_NULL_ERROR(assert_true(pd_tensor_stop_gradient(NULL)), "tensor_stop_gradient");
  EXPECT_NULL_ERROR(assert_false(pd_tensor_is_leaf(NULL)), "tensor_is_leaf");
  EXPECT_NULL_ERROR(assert_null(pd_tensor_grad(NULL)), "tensor_grad");
  EXPECT_NULL_ERROR(assert_int_equal(pd_tensor_version(NULL), 0), "tensor_version");
  EXPECT_NULL_ERROR(assert_null(pd_tensor_name(NULL)), "tensor_name");
  EXPECT_NULL_ERROR(assert_false(pd_tensor_shares_storage(NULL, NULL)), "tensor_shares_storage");
  EXPECT_NULL_ERROR(pd_tensor_set_stop_gradient(NULL, false), "tensor_set_stop_gradient");
  EXPECT_NULL_ERROR(pd_tensor_clear_grad(NULL, true), "tensor_clear_grad");
  EXPECT_NULL_ERROR(pd_tensor_set_name(NULL, "w"), "tensor_set_name");
  EXPECT_NULL_ERROR(assert_true(pd_tensor_set_grad(NULL, NULL) < 0), "set_grad");
  double buf[1];
  EXPECT_NULL_ERROR(assert_true(pd_tensor_copy_to(NULL, buf, 1, PD_FLOAT64) < 0), "copy_to");
  EXPECT_NULL_ERROR(assert_null(pd_tensor_to_string(NULL)), "to_string");
  /* the NULL an op returned keeps that op's error */
  pd_clear_error();
  pd_scope_begin();
  pd_tensor *bad =
      pd_matmul(pd_ones(1, SHAPE(2), PD_FLOAT32), pd_ones(1, SHAPE(3), PD_FLOAT32), false, false);
  assert_null(bad);
  assert_true(isnan(pd_tensor_item(bad)));
  assert_int_equal(pd_tensor_numel(bad), -1);
  assert_non_null(strstr(pd_last_error(), "matmul"));
  pd_clear_error();
  pd_scope_end();
  expect_no_live_tensors();
}

/* A second release of a tensor is a use after free. While the struct waits
 * in the struct cache its reference count is poisoned, so the release is
 * refused with an error saying so (and the cache is not corrupted). The
 * sanitizer build has no cache: AddressSanitizer reports the use itself. */
static void test_double_release_detected(void **state) {
  (void)state;
#ifdef PADDLEC_NO_CACHING
  skip();
#else
  pd_tensor *x = pd_ones(1, SHAPE(100), PD_FLOAT32);
  pd_tensor_release(x);
  assert_int_equal(pd_memory_allocated(), 0);
  pd_clear_error();
  pd_tensor_release(x); /* the second release */
  assert_int_equal(pd_last_status(), PD_ERR_STATE);
  assert_non_null(strstr(pd_last_error(), "tensor_release"));
  assert_non_null(strstr(pd_last_error(), "already released"));
  assert_non_null(strstr(pd_last_error(), "poisoned"));
  pd_clear_error();
  /* retaining it or giving it to an op is refused the same way */
  assert_null(pd_tensor_retain(x)); /* the library's inline retain */
  assert_non_null(strstr(pd_last_error(), "tensor_retain: the tensor"));
  pd_clear_error();
  assert_null((pd_tensor_retain)(x)); /* the exported function */
  assert_non_null(strstr(pd_last_error(), "tensor_retain: the tensor"));
  pd_clear_error();
  assert_null(pd_add(x, x));
  assert_non_null(strstr(pd_last_error(), "add: the tensor"));
  pd_clear_error();
  /* the cache still hands out sound structs: two new tensors are distinct */
  pd_tensor *a = pd_zeros(1, SHAPE(2), PD_FLOAT32), *b = pd_zeros(1, SHAPE(2), PD_FLOAT32);
  assert_ptr_not_equal(a, b);
  assert_int_equal(refcount(a), 1);
  assert_int_equal(refcount(b), 1);
  pd_tensor_release(a);
  pd_tensor_release(b);
  expect_no_live_tensors();
#endif
}

static void test_item_and_copy_to(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = T(PD_FLOAT32, 2, SHAPE(2, 2), 1.5, -2.5, 3, 0);
  assert_true(pd_tensor_item_at(x, 1) == -2.5);
  assert_true(pd_tensor_item(T(PD_INT64, 2, SHAPE(1, 1), -42)) == -42);
  /* item on more than one element: NAN and an error naming the shape */
  assert_true(isnan(pd_tensor_item(x)));
  assert_non_null(strstr(pd_last_error(), "item"));
  assert_non_null(strstr(pd_last_error(), "[2, 2]"));
  pd_clear_error();
  assert_true(isnan(pd_tensor_item_at(x, 4)));
  assert_non_null(strstr(pd_last_error(), "index 4"));
  pd_clear_error();
  assert_true(isnan(pd_tensor_item_at(x, -1)));
  pd_clear_error();
  assert_true(isnan(pd_tensor_item(NULL)));
  /* copy_to with conversion: floats truncate toward zero into ints */
  int64_t i64[4];
  assert_int_equal(pd_tensor_copy_to(x, i64, 4, PD_INT64), 4);
  assert_int_equal(i64[0], 1);
  assert_int_equal(i64[1], -2);
  assert_int_equal(i64[2], 3);
  assert_int_equal(i64[3], 0);
  double f64[4];
  assert_int_equal(pd_tensor_copy_to(x, f64, 4, PD_FLOAT64), 4);
  assert_true(f64[0] == 1.5 && f64[1] == -2.5 && f64[2] == 3 && f64[3] == 0);
  uint8_t b[4];
  assert_int_equal(pd_tensor_copy_to(x, b, 4, PD_BOOL), 4);
  assert_true(b[0] == 1 && b[1] == 1 && b[2] == 1 && b[3] == 0);
  uint16_t h[4];
  assert_int_equal(pd_tensor_copy_to(x, h, 4, PD_FLOAT16), 4);
  assert_int_equal(h[0], 0x3E00); /* 1.5 */
  assert_int_equal(h[1], 0xC100); /* -2.5 */
  /* same dtype, exact bits; int64 beyond 2^53 survives int64 -> int64 */
  int64_t big[2] = {(1LL << 53) + 1, -((1LL << 60) + 3)};
  pd_tensor *bt = pd_to_tensor(big, PD_INT64, 1, SHAPE(2));
  int64_t out[2];
  assert_int_equal(pd_tensor_copy_to(bt, out, 2, PD_INT64), 2);
  assert_memory_equal(out, big, sizeof big);
  /* int32 -> int64 widening is exact */
  pd_tensor *i32 = T(PD_INT32, 1, SHAPE(2), 2147483647, -2147483648.0);
  assert_int_equal(pd_tensor_copy_to(i32, out, 2, PD_INT64), 2);
  assert_int_equal(out[0], 2147483647);
  assert_int_equal(out[1], -2147483648LL);
  /* a transposed view copies out in logical row-major order */
  float tf[4];
  assert_int_equal(pd_tensor_copy_to(pd_transpose(x, 2, SHAPE(1, 0)), tf, 4, PD_FLOAT32), 4);
  assert_true(tf[0] == 1.5f && tf[1] == 3 && tf[2] == -2.5f && tf[3] == 0);
  /* errors */
  assert_int_equal(pd_tensor_copy_to(x, f64, 3, PD_FLOAT64), PD_ERR_SHAPE);
  assert_non_null(strstr(pd_last_error(), "holds 3 elements"));
  pd_clear_error();
  assert_int_equal(pd_tensor_copy_to(x, NULL, 4, PD_FLOAT64), PD_ERR_INVALID);
  pd_clear_error();
  assert_int_equal(pd_tensor_copy_to(NULL, f64, 4, PD_FLOAT64), PD_ERR_INVALID);
  pd_clear_error();
  assert_int_equal(pd_tensor_copy_to(x, f64, 4, (pd_dtype)33), PD_ERR_DTYPE);
  assert_non_null(strstr(pd_last_error(), "dtype 33"));
  pd_clear_error();
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_bad_constructor_inputs(void **state) {
  (void)state;
  pd_scope_begin();
  float v[4] = {1, 2, 3, 4};
  expect_error(pd_to_tensor(NULL, PD_FLOAT32, 1, SHAPE(4)), "to_tensor", "NULL");
  expect_error(pd_to_tensor(v, PD_FLOAT32, 2, SHAPE(2, -2)), "to_tensor", "shape[1] is -2");
  expect_error(pd_to_tensor(v, PD_FLOAT32, PD_MAX_DIMS + 1, SHAPE(1, 1, 1, 1, 1, 1, 1, 1, 1, 1)), "to_tensor",
               "rank 10");
  expect_error(pd_to_tensor(v, PD_FLOAT32, -1, SHAPE(1)), "to_tensor", "rank -1");
  expect_error(pd_to_tensor(v, PD_NUM_DTYPES, 1, SHAPE(4)), "to_tensor", "dtype");
  expect_error(pd_full(1, SHAPE(-1), 0, PD_FLOAT32), "full", "shape[0] is -1");
  expect_error(pd_full(PD_MAX_DIMS + 1, SHAPE(1, 1, 1, 1, 1, 1, 1, 1, 1, 1), 0, PD_FLOAT32), "full",
               "rank 10");
  expect_error(pd_zeros(1, SHAPE(3), (pd_dtype)-5), "full", "dtype -5");
  /* sizes past int64: strides overflow even when a dim of 0 makes the tensor empty */
  const int64_t huge = (int64_t)1 << 62;
  expect_error(pd_empty(3, SHAPE(2, 0, huge), PD_FLOAT32), "[2, 0, 4611686018427387904]", "too large");
  expect_error(pd_zeros(2, SHAPE((int64_t)1 << 40, (int64_t)1 << 40), PD_FLOAT32), "full",
               "has more than INT64_MAX elements");
  expect_error(pd_empty(1, SHAPE((int64_t)1 << 62), PD_FLOAT64), "[4611686018427387904] of float64",
               "more than INT64_MAX bytes");
  /* rank 9 is the limit and works */
  pd_tensor *t9 = pd_ones(PD_MAX_DIMS, SHAPE(1, 2, 1, 2, 1, 2, 1, 2, 1), PD_INT8);
  expect_shape(t9, 9, SHAPE(1, 2, 1, 2, 1, 2, 1, 2, 1));
  assert_int_equal(pd_tensor_numel(t9), 16);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_leaf_flags_and_names(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = T(PD_FLOAT64, 1, SHAPE(2), 1, 2);
  assert_true(pd_tensor_stop_gradient(x));
  assert_true(pd_tensor_is_leaf(x));
  pd_tensor_set_stop_gradient(x, false);
  assert_false(pd_tensor_stop_gradient(x));
  pd_tensor *y = pd_multiply(x, x);
  assert_false(pd_tensor_is_leaf(y));
  assert_false(pd_tensor_stop_gradient(y));
  assert_true(pd_tensor_stop_gradient(NULL));
  assert_null(pd_tensor_name(x));
  pd_tensor_set_name(x, "weight");
  assert_string_equal(pd_tensor_name(x), "weight");
  pd_tensor_set_name(x, NULL);
  assert_null(pd_tensor_name(x));
  assert_int_equal(pd_tensor_place(x).kind, PD_PLACE_CPU);
  /* grads: set, read, clear to zero, drop */
  pd_tensor *g = T(PD_FLOAT64, 1, SHAPE(2), 5, 6);
  assert_int_equal(pd_tensor_set_grad(x, g), PD_OK);
  assert_ptr_equal(pd_tensor_grad(x), g);
  /* a gradient of another shape or dtype is refused at once, naming both */
  assert_true(pd_tensor_set_grad(x, T(PD_FLOAT64, 1, SHAPE(3), 1, 2, 3)) == PD_ERR_SHAPE);
  expect_error(NULL, "set_grad: the gradient is float64 of shape [3]", "the tensor is float64 of shape [2]");
  assert_true(pd_tensor_set_grad(x, T(PD_FLOAT32, 1, SHAPE(2), 1, 2)) == PD_ERR_DTYPE);
  expect_error(NULL, "float32 of shape [2]", "the tensor is float64 of shape [2]");
  assert_true(pd_tensor_set_grad(x, x) < 0);
  expect_error(NULL, "set_grad", "its own gradient");
  assert_true(pd_tensor_set_grad(NULL, g) < 0);
  expect_error(NULL, "set_grad", "NULL");
  assert_ptr_equal(pd_tensor_grad(x), g); /* kept through the refusals */
  pd_tensor_clear_grad(x, true);
  EXPECT_VALUES(pd_tensor_grad(x), 0, 0, 0);
  pd_tensor_clear_grad(x, false);
  assert_null(pd_tensor_grad(x));
  /* clone: a new contiguous copy, optionally converted */
  pd_tensor *c = pd_clone(pd_transpose(T(PD_INT32, 2, SHAPE(2, 2), 1, 2, 3, 4), 2, SHAPE(1, 0)), PD_FLOAT32);
  assert_int_equal(pd_tensor_dtype(c), PD_FLOAT32);
  assert_true(pd_tensor_is_contiguous(c));
  EXPECT_VALUES(c, 0, 1, 3, 2, 4);
  /* cast to the same dtype returns x itself, as Paddle */
  assert_ptr_equal(pd_cast(x, PD_FLOAT64), x);
  pd_scope_end();
  expect_no_live_tensors();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_views_share_storage),
      cmocka_unit_test(test_strides),
      cmocka_unit_test(test_contiguous),
      cmocka_unit_test(test_version_counter),
      cmocka_unit_test(test_refcount),
      cmocka_unit_test(test_double_release_detected),
      cmocka_unit_test(test_accessors_on_null),
      cmocka_unit_test(test_item_and_copy_to),
      cmocka_unit_test(test_bad_constructor_inputs),
      cmocka_unit_test(test_leaf_flags_and_names),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
