/* Integer overflow: shapes whose sizes do not fit int64 are errors naming
 * the op and the values (never a wrapped size, a crash or undefined
 * behaviour), and integer arithmetic on tensors wraps around as Paddle's
 * does. The sanitizer build runs this with UBSan aborting on the first
 * signed overflow, so every case here is also a check for undefined
 * behaviour. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "op_samples.h"
#include "test_util.h"

/* Sizes past int64 are refused before allocating; sizes that fit but
 * cannot be allocated must fail with an error, not abort the sanitizer
 * build's allocator. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "allocator_may_return_null=1"; }

#define P2(k) ((int64_t)1 << (k))

static pd_tensor *i64_tensor(int n, const int64_t *v) { return pd_to_tensor(v, PD_INT64, 1, SHAPE(n)); }
static pd_tensor *i32_tensor(int n, const int32_t *v) { return pd_to_tensor(v, PD_INT32, 1, SHAPE(n)); }

static void expect_i64(const pd_tensor *t, int n, const int64_t *want) {
  assert_non_null(t);
  assert_int_equal(pd_tensor_dtype(t), PD_INT64);
  assert_int_equal(pd_tensor_numel(t), n);
  const int64_t *p = pd_tensor_data(t);
  for (int i = 0; i < n; i++) assert_true(p[i] == want[i]);
}

static void expect_i32(const pd_tensor *t, int n, const int32_t *want) {
  assert_non_null(t);
  assert_int_equal(pd_tensor_dtype(t), PD_INT32);
  assert_int_equal(pd_tensor_numel(t), n);
  const int32_t *p = pd_tensor_data(t);
  for (int i = 0; i < n; i++) assert_int_equal(p[i], want[i]);
}

/* ---- shape arithmetic ------------------------------------------------------ */

static void test_pixel_shuffle_huge_factor(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = pd_ones(4, SHAPE(1, 4, 2, 2), PD_FLOAT32);
  /* r * r wrapped to 0 and c % 0 raised SIGFPE */
  expect_error(pd_pixel_shuffle(x, P2(32), NULL),
               "pixel_shuffle: upscale_factor 4294967296 is too large for input [1, 4, 2, 2]", NULL);
  /* r * r fits, h * r does not */
  pd_tensor *big = pd_empty(4, SHAPE(1, 0, P2(40), 1), PD_FLOAT32);
  expect_error(pd_pixel_shuffle(big, P2(30), "NCHW"), "upscale_factor 1073741824 is too large", NULL);
  pd_tensor *y = pd_pixel_shuffle(x, 2, NULL);
  expect_shape(y, 4, SHAPE(1, 1, 4, 4));
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_views_past_int64(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = pd_ones(1, SHAPE(1), PD_FLOAT32);
  /* these used to succeed with a numel of 0, and sum then returned 0 */
  expect_error(pd_broadcast_to(x, 2, SHAPE(P2(40), P2(40))),
               "broadcast_to: shape [1099511627776, 1099511627776] has more than INT64_MAX elements", NULL);
  expect_error(pd_expand(x, 2, SHAPE(P2(40), P2(24))),
               "expand: shape [1099511627776, 16777216] has more than INT64_MAX elements", NULL);
  expect_error(pd_expand(x, 3, SHAPE(P2(40), 0, P2(40))), "expand: shape [1099511627776, 0, 1099511627776]",
               "strides overflow");
  /* a count that fits but whose float32 bytes do not */
  expect_error(pd_broadcast_to(x, 1, SHAPE(P2(62))), "broadcast_to: shape [4611686018427387904] of float32",
               "more than INT64_MAX bytes");
  /* a huge view whose elements fit stays legal: it holds one element */
  pd_tensor *v = pd_expand(x, 2, SHAPE(P2(30), P2(30)));
  assert_non_null(v);
  assert_int_equal(pd_tensor_numel(v), P2(60));
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_reshape_past_int64(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = pd_ones(1, SHAPE(4), PD_FLOAT32);
  /* used to report "(0 elements)" */
  expect_error(pd_reshape(x, 2, SHAPE(P2(32), P2(32))),
               "reshape: shape [4294967296, 4294967296] has more than INT64_MAX elements", NULL);
  expect_error(pd_reshape(x, 3, SHAPE(-1, P2(40), P2(40))),
               "reshape: shape [-1, 1099511627776, 1099511627776]", "more than INT64_MAX elements");
  expect_error(pd_reshape(x, 2, SHAPE(P2(62), 4)), "reshape", "4611686018427387904");
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_tile_pad_creation_past_int64(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = pd_ones(2, SHAPE(2, 3), PD_FLOAT32);
  expect_error(pd_tile(x, 2, SHAPE(P2(62), 4)), "tile", "4611686018427387904");
  pd_tensor *e = pd_empty(2, SHAPE(P2(62), 0), PD_FLOAT32);
  expect_error(pd_concat((pd_tensor *[]){e, e}, 2, 0), "concat", "more than INT64_MAX");
  expect_error(pd_zeros(2, SHAPE(P2(40), P2(40)), PD_FLOAT32), "full",
               "[1099511627776, 1099511627776] has more than INT64_MAX elements");
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_strided_slice_extreme_steps(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = T(PD_FLOAT32, 1, SHAPE(5), 0, 1, 2, 3, 4);
  /* -INT64_MIN overflowed: one element, from the clamped start */
  pd_tensor *a = pd_strided_slice(x, 1, SHAPE(0), SHAPE(4), SHAPE(-100), SHAPE(INT64_MIN));
  EXPECT_VALUES(a, 0, 4);
  pd_tensor *b = pd_strided_slice(x, 1, SHAPE(0), SHAPE(1), SHAPE(5), SHAPE(INT64_MAX));
  EXPECT_VALUES(b, 0, 1);
  pd_tensor *c = pd_strided_slice(x, 1, SHAPE(0), SHAPE(INT64_MIN), SHAPE(INT64_MAX), SHAPE(INT64_MAX - 1));
  EXPECT_VALUES(c, 0, 0);
  pd_tensor *d = pd_strided_slice(x, 1, SHAPE(0), SHAPE(INT64_MAX), SHAPE(INT64_MIN), SHAPE(INT64_MIN + 1));
  EXPECT_VALUES(d, 0, 4);
  pd_tensor *e = pd_strided_slice(x, 1, SHAPE(0), SHAPE(4), SHAPE(0), SHAPE(-2));
  EXPECT_VALUES(e, 0, 4, 2);
  /* and their gradients (slice_grad with the same steps) */
  pd_tensor *xg = T(PD_FLOAT64, 1, SHAPE(5), 0, 1, 2, 3, 4);
  pd_tensor_set_stop_gradient(xg, false);
  pd_tensor *s =
      pd_sum(pd_strided_slice(xg, 1, SHAPE(0), SHAPE(3), SHAPE(-100), SHAPE(INT64_MIN)), NULL, 0, false);
  assert_int_equal(pd_backward(s, NULL, false), PD_OK);
  EXPECT_VALUES(pd_tensor_grad(xg), 0, 0, 0, 0, 1, 0);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_tri_extreme_diagonals(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = T(PD_FLOAT32, 2, SHAPE(2, 3), 1, 2, 3, 4, 5, 6);
  EXPECT_VALUES(pd_triu(x, INT64_MAX), 0, 0, 0, 0, 0, 0, 0);
  EXPECT_VALUES(pd_triu(x, INT64_MIN), 0, 1, 2, 3, 4, 5, 6);
  EXPECT_VALUES(pd_tril(x, INT64_MAX), 0, 1, 2, 3, 4, 5, 6);
  EXPECT_VALUES(pd_tril(x, INT64_MIN), 0, 0, 0, 0, 0, 0, 0);
  EXPECT_VALUES(pd_triu(x, 1), 0, 0, 2, 3, 0, 0, 6);
  EXPECT_VALUES(pd_tril(x, -1), 0, 0, 0, 0, 4, 0, 0);
  pd_scope_end();
  expect_no_live_tensors();
}

/* ---- integer arithmetic wraps ------------------------------------------- */

static void test_int_arith_wraps(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *a32 = i32_tensor(3, (const int32_t[]){INT32_MAX, INT32_MIN, 65536});
  pd_tensor *b32 = i32_tensor(3, (const int32_t[]){1, 1, 65536});
  expect_i32(pd_add(a32, b32), 3, (const int32_t[]){INT32_MIN, INT32_MIN + 1, 131072});
  expect_i32(pd_subtract(b32, a32), 3, (const int32_t[]){INT32_MIN + 2, INT32_MIN + 1, 0});
  expect_i32(pd_multiply(a32, b32), 3, (const int32_t[]){INT32_MAX, INT32_MIN, 0});
  pd_tensor *a64 = i64_tensor(3, (const int64_t[]){INT64_MIN, INT64_MAX, P2(32)});
  pd_tensor *m1 = i64_tensor(3, (const int64_t[]){-1, 2, P2(32)});
  expect_i64(pd_multiply(a64, m1), 3, (const int64_t[]){INT64_MIN, -2, 0});
  expect_i64(pd_add(a64, m1), 3, (const int64_t[]){INT64_MAX, INT64_MIN + 1, P2(33)});
  expect_i64(pd_subtract(a64, pd_ones(1, SHAPE(1), PD_INT64)), 3,
             (const int64_t[]){INT64_MAX, INT64_MAX - 1, P2(32) - 1});
  /* inplace add and the unary ops too */
  pd_tensor *c = i32_tensor(1, (const int32_t[]){INT32_MAX});
  pd_add_(c, i32_tensor(1, (const int32_t[]){INT32_MAX}));
  expect_i32(c, 1, (const int32_t[]){-2});
  expect_i64(pd_neg(a64), 3, (const int64_t[]){INT64_MIN, INT64_MIN + 1, -P2(32)});
  expect_i64(pd_abs(a64), 3, (const int64_t[]){INT64_MIN, INT64_MAX, P2(32)});
  expect_i64(pd_square(a64), 3, (const int64_t[]){0, 1, 0});
  /* an integer power wraps; an exponent past int64 is clamped, NaN is 0 */
  pd_tensor *b = i64_tensor(3, (const int64_t[]){2, 1, -1});
  expect_i64(pd_pow_scalar(b, 64), 3, (const int64_t[]){0, 1, 1});
  expect_i64(pd_pow_scalar(b, 1e300), 3, (const int64_t[]){0, 1, 1});
  expect_i64(pd_pow_scalar(b, -1e300), 3, (const int64_t[]){0, 1, 1});
  expect_i64(pd_pow_scalar(b, NAN), 3, (const int64_t[]){1, 1, 1});
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_int_reductions_wrap(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *a64 = i64_tensor(2, (const int64_t[]){INT64_MAX, 1});
  expect_i64(pd_sum(a64, NULL, 0, false), 1, (const int64_t[]){INT64_MIN});
  expect_i64(pd_cumsum(a64, 0, PD_NUM_DTYPES), 2, (const int64_t[]){INT64_MAX, INT64_MIN});
  pd_tensor *p = i64_tensor(2, (const int64_t[]){INT64_MIN, -1});
  expect_i64(pd_prod(p, NULL, 0, false), 1, (const int64_t[]){INT64_MIN});
  pd_tensor *q = i64_tensor(3, (const int64_t[]){P2(32), P2(31), 2});
  expect_i64(pd_prod(q, NULL, 0, false), 1, (const int64_t[]){0});
  /* int32 sums into int64, so it does not wrap */
  pd_tensor *a32 = i32_tensor(2, (const int32_t[]){INT32_MAX, 1});
  expect_i64(pd_sum(a32, NULL, 0, false), 1, (const int64_t[]){(int64_t)INT32_MAX + 1});
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_int_scale(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *a32 = i32_tensor(3, (const int32_t[]){INT32_MAX, INT32_MIN, 7});
  /* integral scale and bias: the integer formula, wrapping */
  expect_i32(pd_scale(a32, 2, 0, true), 3, (const int32_t[]){-2, 0, 14});
  expect_i32(pd_scale(a32, -1, 0, true), 3, (const int32_t[]){INT32_MIN + 1, INT32_MIN, -7});
  expect_i32(pd_scale(a32, 1, 1, true), 3, (const int32_t[]){INT32_MIN, INT32_MIN + 1, 8});
  expect_i32(pd_scale(a32, 3, 1, false), 3, (const int32_t[]){INT32_MIN, -2147483645, 24});
  pd_tensor *a64 = i64_tensor(2, (const int64_t[]){INT64_MIN, INT64_MAX});
  expect_i64(pd_scale(a64, -1, 0, true), 2, (const int64_t[]){INT64_MIN, INT64_MIN + 1});
  /* a fractional or huge scale: in double, saturated to the dtype */
  expect_i32(pd_scale(a32, 0.5, 0, true), 3, (const int32_t[]){1073741823, -1073741824, 3});
  expect_i32(pd_scale(a32, 1e30, 0, true), 3, (const int32_t[]){INT32_MAX, INT32_MIN, INT32_MAX});
  expect_i64(pd_scale(a64, 1e300, 0.5, true), 2, (const int64_t[]){INT64_MIN, INT64_MAX});
  pd_scope_end();
  expect_no_live_tensors();
}

/* Integer division by zero is an error (as Paddle's "Integer division by
 * zero encountered in (floor) divide"); INT_MIN / -1 wraps. divide on
 * integers is true division in float32, where x / 0 is inf. */
static void test_int_division(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *x = i32_tensor(3, (const int32_t[]){INT32_MIN, 7, -7});
  pd_tensor *zero = i32_tensor(3, (const int32_t[]){1, 0, 2});
  expect_error(pd_floor_divide(x, zero), "floor_divide", "division by zero");
  expect_error(pd_remainder(x, zero), "remainder", "division by zero");
  pd_tensor *m1 = i32_tensor(3, (const int32_t[]){-1, -2, 2});
  expect_i32(pd_floor_divide(x, m1), 3, (const int32_t[]){INT32_MIN, -4, -4});
  expect_i32(pd_remainder(x, m1), 3, (const int32_t[]){0, -1, 1});
  pd_tensor *y64 = i64_tensor(2, (const int64_t[]){INT64_MIN, 5});
  pd_tensor *d64 = i64_tensor(2, (const int64_t[]){-1, 0});
  expect_error(pd_floor_divide(y64, d64), "floor_divide", "int64");
  pd_tensor *q = pd_divide(x, zero);
  assert_non_null(q);
  assert_int_equal(pd_tensor_dtype(q), PD_FLOAT32);
  const float *qp = pd_tensor_data(q);
  assert_true(qp[1] > 1e38f);
  pd_scope_end();
  expect_no_live_tensors();
}

/* ---- generated: every op sample with absurd values in its int attrs -------- */

static const int64_t k_absurd[] = {INT64_MAX, INT64_MIN, P2(62), -P2(62), P2(40)};
static const double k_absurd_f[] = {1e300, -1e300, 9.3e18, HUGE_VAL, NAN};

/* Runs op id with attrs a; a failure must name the op; a success must give
 * outputs whose element counts are the (fitting) products of their shapes. */
static int run_mutated(pd_op_id id, const char *op, pd_tensor **in, int n_in, const pd_attrs *a,
                       const char *what) {
  pd_tensor *out[PD_MAX_OUTPUTS] = {0};
  int n_out = 0, bad = 0;
  pd_clear_error();
  pd_status st = pd_dispatch(id, in, n_in, a, out, &n_out);
  if (st != PD_OK) {
    /* sizes that fit int64 but not in memory fail in the allocator */
    if (!strstr(pd_last_error(), op) && !strstr(pd_last_error(), "out of memory")) {
      fprintf(stderr, "  %s with %s: error does not name the op: %s\n", op, what, pd_last_error());
      bad = 1;
    }
    pd_clear_error();
    return bad;
  }
  for (int k = 0; k < n_out; k++) {
    int64_t n = 1;
    bool over = false;
    for (int d = 0; d < pd_tensor_ndim(out[k]); d++)
      over |= __builtin_mul_overflow(n, pd_tensor_shape(out[k])[d], &n);
    if (over || n != pd_tensor_numel(out[k])) {
      fprintf(stderr, "  %s with %s: output %d has a wrapped element count\n", op, what, k);
      bad = 1;
    }
    pd_tensor_release(out[k]);
  }
  return bad;
}

static void test_registry_absurd_attrs(void **state) {
  (void)state;
  int bad = 0, runs = 0;
  for (size_t t = 0; pd_sample_tables[t]; t++) { /* every family's samples */
    for (const pd_op_sample *s = pd_sample_tables[t]; s->op; s++) {
      int id = pd_op_find(s->op);
      assert_true(id >= 0);
      pd_tensor *in[PD_MAX_OUTPUTS] = {0};
      pd_attrs base;
      memset(&base, 0, sizeof base);
      int n_in = s->make(in, &base);
      assert_true(n_in >= 0);
      char what[96];
      pd_tensor *out[PD_MAX_OUTPUTS];
      int n_out = 0;
      if (pd_dispatch((pd_op_id)id, in, n_in, &base, out, &n_out) != PD_OK) { /* the sample itself must run */
        fprintf(stderr, "  %s: sample failed: %s\n", s->op, pd_last_error());
        pd_clear_error();
        bad++;
      }
      for (int k = 0; k < n_out; k++) pd_tensor_release(out[k]);
      for (size_t v = 0; v < sizeof k_absurd / sizeof k_absurd[0]; v++) {
        for (int slot = 0; slot < PD_ATTR_LISTS; slot++) {
          for (int j = 0; j < base.nv[slot]; j++) {
            pd_attrs a = base;
            a.v[slot][j] = k_absurd[v];
            snprintf(what, sizeof what, "v%d[%d] = %lld", slot, j, (long long)k_absurd[v]);
            bad += run_mutated((pd_op_id)id, s->op, in, n_in, &a, what);
            runs++;
          }
        }
        for (int slot = 0; slot < PD_ATTR_INTS; slot++) {
          pd_attrs a = base;
          a.i[slot] = k_absurd[v];
          snprintf(what, sizeof what, "i%d = %lld", slot, (long long)k_absurd[v]);
          bad += run_mutated((pd_op_id)id, s->op, in, n_in, &a, what);
          runs++;
        }
      }
      /* float attributes that become sizes (scale factors, counts) */
      for (size_t v = 0; v < sizeof k_absurd_f / sizeof k_absurd_f[0]; v++) {
        for (int slot = 0; slot < PD_ATTR_FLOATS; slot++) {
          pd_attrs a = base;
          a.f[slot] = k_absurd_f[v];
          snprintf(what, sizeof what, "f%d = %g", slot, k_absurd_f[v]);
          bad += run_mutated((pd_op_id)id, s->op, in, n_in, &a, what);
          runs++;
        }
      }
      for (int i = 0; i < n_in; i++) pd_tensor_release(in[i]);
    }
  }
  fprintf(stderr, "  %d mutated runs, %d bad\n", runs, bad);
  assert_int_equal(bad, 0);
  expect_no_live_tensors();
}

/* An empty input whose other dims are huge (its strides still fit):
 * adaptive pooling walked 2^61 empty rows. */
static void test_empty_inputs_with_huge_dims(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *e = pd_empty(4, SHAPE(1, 1, P2(61), 0), PD_FLOAT32);
  pd_tensor *p = pd_adaptive_max_pool2d(e, 2, SHAPE(2, 2), NULL);
  expect_shape(p, 4, SHAPE(1, 1, 2, 2));
  pd_tensor *q = pd_adaptive_avg_pool2d(e, 2, SHAPE(2, 2), NULL);
  expect_shape(q, 4, SHAPE(1, 1, 2, 2));
  pd_scope_end();
  expect_no_live_tensors();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pixel_shuffle_huge_factor),
      cmocka_unit_test(test_views_past_int64),
      cmocka_unit_test(test_reshape_past_int64),
      cmocka_unit_test(test_tile_pad_creation_past_int64),
      cmocka_unit_test(test_strided_slice_extreme_steps),
      cmocka_unit_test(test_tri_extreme_diagonals),
      cmocka_unit_test(test_int_arith_wraps),
      cmocka_unit_test(test_int_reductions_wrap),
      cmocka_unit_test(test_int_scale),
      cmocka_unit_test(test_int_division),
      cmocka_unit_test(test_registry_absurd_attrs),
      cmocka_unit_test(test_empty_inputs_with_huge_dims),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
