/* dtypes: names, sizes, classes, Paddle's promotion table, and float16 /
 * bfloat16 conversions (round to nearest even) against known bit patterns. */
#include <math.h>
#include <string.h>

#include "core/tensor_impl.h"
#include "test_util.h"

static float bits_to_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static void test_names_sizes_classes(void **state) {
  (void)state;
  static const char *names[PD_NUM_DTYPES] = {"bool",  "uint8",   "int8",     "int16",   "int32",
                                             "int64", "float16", "bfloat16", "float32", "float64"};
  static const size_t sizes[PD_NUM_DTYPES] = {1, 1, 1, 2, 4, 8, 2, 2, 4, 8};
  for (int d = 0; d < PD_NUM_DTYPES; d++) {
    assert_string_equal(pd_dtype_name((pd_dtype)d), names[d]);
    assert_int_equal(pd_dtype_size((pd_dtype)d), sizes[d]);
    assert_int_equal(pd_dtype_from_name(names[d]), d);
    bool fl = d >= PD_FLOAT16, in = d >= PD_UINT8 && d <= PD_INT64;
    assert_int_equal(pd_dtype_is_floating((pd_dtype)d), fl);
    assert_int_equal(pd_dtype_is_integer((pd_dtype)d), in);
  }
  assert_string_equal(pd_dtype_name(PD_NUM_DTYPES), "invalid");
  assert_string_equal(pd_dtype_name((pd_dtype)-1), "invalid");
  assert_int_equal(pd_dtype_size((pd_dtype)77), 0);
  assert_int_equal(pd_dtype_from_name("float"), -1);
  assert_int_equal(pd_dtype_from_name("Float32"), -1);
  assert_int_equal(pd_dtype_from_name(""), -1);
  assert_int_equal(pd_dtype_from_name(NULL), -1);
  assert_false(pd_dtype_is_floating(PD_BOOL));
  assert_false(pd_dtype_is_integer(PD_BOOL));
}

/* Paddle's tensor-to-tensor promotion (guides/advanced/auto_type_promotion),
 * in the order bool, u8, i8, i16, i32, i64, f16, bf16, f32, f64; "-" (no
 * common dtype: PD_NUM_DTYPES) wherever the two differ and one is not a
 * floating dtype. */
static void test_promote_table(void **state) {
  (void)state;
  enum {
    b = PD_BOOL,
    u8 = PD_UINT8,
    i8 = PD_INT8,
    i16 = PD_INT16,
    i32 = PD_INT32,
    i64 = PD_INT64,
    f16 = PD_FLOAT16,
    bf = PD_BFLOAT16,
    f32 = PD_FLOAT32,
    f64 = PD_FLOAT64,
    no = PD_NUM_DTYPES
  };
  static const int want[PD_NUM_DTYPES][PD_NUM_DTYPES] = {
      /*          b   u8  i8  i16 i32 i64 f16  bf   f32  f64 */
      /* b   */ {b, no, no, no, no, no, no, no, no, no},
      /* u8  */ {no, u8, no, no, no, no, no, no, no, no},
      /* i8  */ {no, no, i8, no, no, no, no, no, no, no},
      /* i16 */ {no, no, no, i16, no, no, no, no, no, no},
      /* i32 */ {no, no, no, no, i32, no, no, no, no, no},
      /* i64 */ {no, no, no, no, no, i64, no, no, no, no},
      /* f16 */ {no, no, no, no, no, no, f16, f32, f32, f64},
      /* bf  */ {no, no, no, no, no, no, f32, bf, f32, f64},
      /* f32 */ {no, no, no, no, no, no, f32, f32, f32, f64},
      /* f64 */ {no, no, no, no, no, no, f64, f64, f64, f64},
  };
  for (int x = 0; x < PD_NUM_DTYPES; x++)
    for (int y = 0; y < PD_NUM_DTYPES; y++) {
      pd_dtype got = pd_promote_types((pd_dtype)x, (pd_dtype)y);
      if ((int)got != want[x][y])
        fail_msg("promote(%s, %s) = %s, expected %s", pd_dtype_name((pd_dtype)x), pd_dtype_name((pd_dtype)y),
                 pd_dtype_name(got), pd_dtype_name((pd_dtype)want[x][y]));
    }
}

/* Binary ops use the table: float16 * bfloat16 computes in float32, and an
 * integer mixed with a float is refused with both dtypes named. */
static void test_promotion_in_ops(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *i = T(PD_INT32, 1, SHAPE(2), 1, 2);
  pd_tensor *h = T(PD_FLOAT16, 1, SHAPE(2), 0.5, 0.25);
  expect_error(pd_add(i, h), "int32", "float16");
  pd_tensor *u = T(PD_UINT8, 1, SHAPE(2), 200, 3);
  pd_tensor *k = T(PD_INT8, 1, SHAPE(2), -100, 4);
  expect_error(pd_add(u, k), "uint8", "int8");
  pd_tensor *s = pd_add(h, T(PD_FLOAT32, 1, SHAPE(2), 1, 1));
  assert_int_equal(pd_tensor_dtype(s), PD_FLOAT32);
  EXPECT_VALUES(s, 0, 1.5, 1.25);
  pd_tensor *bb = pd_multiply(T(PD_BFLOAT16, 1, SHAPE(1), 3), T(PD_FLOAT16, 1, SHAPE(1), 2));
  assert_int_equal(pd_tensor_dtype(bb), PD_FLOAT32);
  EXPECT_VALUES(bb, 0, 6);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_f32_to_f16_rounding(void **state) {
  (void)state;
  const struct {
    float f;
    uint16_t h;
  } cases[] = {
      {0.0f, 0x0000},
      {-0.0f, 0x8000},
      {1.0f, 0x3C00},
      {-2.0f, 0xC000},
      {0.5f, 0x3800},
      {65504.0f, 0x7BFF}, /* largest finite */
      {65519.0f, 0x7BFF}, /* below the midpoint to 65536 */
      {65520.0f, 0x7C00}, /* the midpoint ties to even: inf */
      {1e6f, 0x7C00},
      {-1e6f, 0xFC00},
      {INFINITY, 0x7C00},
      {-INFINITY, 0xFC00},
      {0x1p-14f, 0x0400},        /* smallest normal */
      {0x1p-24f, 0x0001},        /* smallest subnormal */
      {0x1p-25f, 0x0000},        /* half of it ties to even: 0 */
      {0x1.000002p-25f, 0x0001}, /* just above the tie */
      {0x1.8p-24f, 0x0002},      /* 1.5 ulp ties to even: 2 */
      {0x1p-26f, 0x0000},
      {1023 * 0x1p-24f, 0x03FF},     /* largest subnormal */
      {1.0f + 0x1p-11f, 0x3C00},     /* tie: even mantissa 0 */
      {1.0f + 3 * 0x1p-11f, 0x3C02}, /* tie: even mantissa 2 */
      {1.0f + 0x1p-11f + 0x1p-20f, 0x3C01},
      {1.0f + 0x1p-12f, 0x3C00},
      {0.1f, 0x2E66},
      {-0.333333343f, 0xB555},
      {2048.0f + 1.0f, 0x6800}, /* 2049 ties to 2048 */
      {2048.0f + 3.0f, 0x6802}, /* 2051 ties to 2052 */
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    uint16_t got = pd_f32_to_f16(cases[i].f);
    if (got != cases[i].h) fail_msg("f16(%a) = 0x%04X, expected 0x%04X", (double)cases[i].f, got, cases[i].h);
  }
  /* NaN stays NaN (exponent all ones, mantissa non-zero), sign kept */
  uint16_t n = pd_f32_to_f16(NAN);
  assert_int_equal(n & 0x7C00, 0x7C00);
  assert_int_not_equal(n & 0x03FF, 0);
  uint16_t nn = pd_f32_to_f16(-NAN);
  assert_int_equal(nn & 0x8000, 0x8000);
  /* a signalling NaN payload below the kept bits still gives a NaN */
  assert_int_not_equal(pd_f32_to_f16(bits_to_f32(0x7F800001u)) & 0x03FF, 0);
}

static void test_f16_to_f32(void **state) {
  (void)state;
  assert_true(pd_f16_to_f32(0x3C00) == 1.0f);
  assert_true(pd_f16_to_f32(0x7BFF) == 65504.0f);
  assert_true(pd_f16_to_f32(0x0001) == 0x1p-24f);
  assert_true(pd_f16_to_f32(0x03FF) == 1023 * 0x1p-24f);
  assert_true(pd_f16_to_f32(0x0400) == 0x1p-14f);
  assert_true(pd_f16_to_f32(0x3555) == 0.333251953125f);
  assert_true(pd_f16_to_f32(0xC000) == -2.0f);
  assert_true(pd_f16_to_f32(0x7C00) == INFINITY);
  assert_true(pd_f16_to_f32(0xFC00) == -INFINITY);
  assert_true(isnan(pd_f16_to_f32(0x7E00)));
  assert_true(isnan(pd_f16_to_f32(0x7C01)));
  float nz = pd_f16_to_f32(0x8000);
  assert_true(nz == 0.0f && signbit(nz));
  assert_true(pd_f16_to_f32(0x8001) == -0x1p-24f);
  /* every non-NaN half survives the round trip through float32 */
  for (uint32_t h = 0; h < 0x10000; h++) {
    if ((h & 0x7C00) == 0x7C00 && (h & 0x03FF)) {
      assert_true(isnan(pd_f16_to_f32((uint16_t)h)));
      continue;
    }
    uint16_t back = pd_f32_to_f16(pd_f16_to_f32((uint16_t)h));
    if (back != h) fail_msg("f16 0x%04X -> %a -> 0x%04X", h, (double)pd_f16_to_f32((uint16_t)h), back);
  }
  /* midpoints between neighbouring halves round to the even one */
  for (uint32_t h = 0x0400; h < 0x7BFF; h += 37) {
    float lo = pd_f16_to_f32((uint16_t)h), hi = pd_f16_to_f32((uint16_t)(h + 1));
    float mid = lo + (hi - lo) / 2;
    uint16_t want = (h & 1) ? (uint16_t)(h + 1) : (uint16_t)h;
    assert_int_equal(pd_f32_to_f16(mid), want);
  }
}

static void test_bf16(void **state) {
  (void)state;
  const struct {
    float f;
    uint16_t h;
  } cases[] = {
      {0.0f, 0x0000},
      {-0.0f, 0x8000},
      {1.0f, 0x3F80},
      {-1.0f, 0xBF80},
      {3.0f, 0x4040},
      {1.0f + 0x1p-8f, 0x3F80},            /* tie: even */
      {1.0f + 3 * 0x1p-8f, 0x3F82},        /* tie: even */
      {1.0f + 0x1p-8f + 0x1p-20f, 0x3F81}, /* above the tie */
      {1.0f + 0x1p-9f, 0x3F80},
      {INFINITY, 0x7F80},
      {-INFINITY, 0xFF80},
      {3.4028235e38f, 0x7F80}, /* FLT_MAX rounds up to inf */
      {0.1f, 0x3DCD},
      {0x1p-133f, 0x0001}, /* float32 subnormals keep their top bits */
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    uint16_t got = pd_f32_to_bf16(cases[i].f);
    if (got != cases[i].h)
      fail_msg("bf16(%a) = 0x%04X, expected 0x%04X", (double)cases[i].f, got, cases[i].h);
  }
  uint16_t n = pd_f32_to_bf16(NAN);
  assert_int_equal(n & 0x7F80, 0x7F80);
  assert_int_not_equal(n & 0x007F, 0);
  /* a NaN whose payload sits in the dropped bits stays NaN (not inf) */
  uint16_t sn = pd_f32_to_bf16(bits_to_f32(0x7F800001u));
  assert_int_not_equal(sn & 0x007F, 0);
  assert_true(pd_bf16_to_f32(0x3F80) == 1.0f);
  assert_true(pd_bf16_to_f32(0x3DCD) == 0.10009765625f);
  assert_true(pd_bf16_to_f32(0x7F7F) == 0x1.FEp127f);
  assert_true(pd_bf16_to_f32(0xFF80) == -INFINITY);
  assert_true(isnan(pd_bf16_to_f32(0x7FC0)));
  for (uint32_t h = 0; h < 0x10000; h++) {
    if ((h & 0x7F80) == 0x7F80 && (h & 0x007F)) continue;
    uint16_t back = pd_f32_to_bf16(pd_bf16_to_f32((uint16_t)h));
    if (back != h) fail_msg("bf16 0x%04X -> 0x%04X", h, back);
  }
}

/* Tensor-level conversions go through the same rounding. */
static void test_tensor_element_conversions(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *h = T(PD_FLOAT16, 1, SHAPE(4), 1.0 + 1.0 / 2048, 65520, 1e-8, -3);
  const uint16_t *ph = pd_tensor_data(h);
  assert_int_equal(ph[0], 0x3C00);
  assert_int_equal(ph[1], 0x7C00);
  assert_int_equal(ph[2], 0x0000);
  assert_int_equal(ph[3], 0xC200);
  pd_tensor *b = pd_cast(T(PD_FLOAT32, 1, SHAPE(2), 1.0 + 3.0 / 256, -1), PD_BFLOAT16);
  const uint16_t *pb = pd_tensor_data(b);
  assert_int_equal(pb[0], 0x3F82);
  assert_int_equal(pb[1], 0xBF80);
  /* generic element load/store, one per dtype */
  for (int d = 0; d < PD_NUM_DTYPES; d++) {
    char buf[8] = {0};
    pd_store_from_f64(buf, (pd_dtype)d, 5.0);
    assert_true(pd_load_as_f64(buf, (pd_dtype)d) == (d == PD_BOOL ? 1.0 : 5.0));
    pd_store_from_f64(buf, (pd_dtype)d, 0.0);
    assert_true(pd_load_as_f64(buf, (pd_dtype)d) == 0.0);
  }
  char buf[8];
  pd_store_from_f64(buf, PD_INT8, -7.9);
  assert_true(pd_load_as_f64(buf, PD_INT8) == -7.0); /* truncation toward zero */
  assert_true(isnan(pd_load_as_f64(buf, (pd_dtype)50)));
  pd_scope_end();
  expect_no_live_tensors();
}

/* Doubles narrow to half precision in one rounding, and to integers with
 * saturation (NaN gives 0). */
static void test_f64_narrowing(void **state) {
  (void)state;
  pd_scope_begin();
  const double one_plus = 1.0 + ldexp(1.0, -11) + ldexp(1.0, -40); /* just above the f16 tie */
  pd_tensor *h = pd_tensor_from_f64((double[]){one_plus}, PD_FLOAT16, 1, SHAPE(1));
  uint16_t bits;
  memcpy(&bits, pd_tensor_data(h), 2);
  assert_int_equal(bits, 0x3C01);
  pd_tensor *b =
      pd_tensor_from_f64((double[]){1.0 + ldexp(1.0, -8) + ldexp(1.0, -40)}, PD_BFLOAT16, 1, SHAPE(1));
  memcpy(&bits, pd_tensor_data(b), 2);
  assert_int_equal(bits, 0x3F81);
  pd_tensor *i8 = pd_tensor_from_f64((double[]){NAN, 1e9, -1e9, -3.7}, PD_INT8, 1, SHAPE(4));
  EXPECT_VALUES(i8, 0, 0, 127, -128, -3);
  pd_tensor *i64 = pd_tensor_from_f64((double[]){1e30, -1e30}, PD_INT64, 1, SHAPE(2));
  assert_true(((int64_t *)pd_tensor_data(i64))[0] == INT64_MAX);
  assert_true(((int64_t *)pd_tensor_data(i64))[1] == INT64_MIN);
  pd_scope_end();
  expect_no_live_tensors();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_names_sizes_classes),
      cmocka_unit_test(test_promote_table),
      cmocka_unit_test(test_f64_narrowing),
      cmocka_unit_test(test_promotion_in_ops),
      cmocka_unit_test(test_f32_to_f16_rounding),
      cmocka_unit_test(test_f16_to_f32),
      cmocka_unit_test(test_bf16),
      cmocka_unit_test(test_tensor_element_conversions),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
