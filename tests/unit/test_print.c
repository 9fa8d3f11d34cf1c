/* pd_tensor_to_string against exact strings as Paddle prints them
 * (python/paddle/tensor/to_string.py): "%.0f." for integral floats, fixed
 * precision otherwise, one column width with a sign column, the width and
 * sign taken over the edge items only, 80-column lines (the item count per
 * line is (80 - indent) / (width + 2)), blank lines between blocks of 3-D
 * tensors, and "..." summaries above 1000 elements. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "test_util.h"

/* ---- expected strings -------------------------------------------------- */
static const char *k_basic =
    "Tensor(shape=[2, 3], dtype=float32, place=Place(cpu), stop_gradient=True,\n"
    "       [[1., 2., 3.],\n"
    "        [4., 5., 6.]])";
static const char *k_mixed =
    "Tensor(shape=[3], dtype=float32, place=Place(cpu), stop_gradient=True,\n"
    "       [1.50000000,  2.       , -3.       ])";
static const char *k_neg =
    "Tensor(shape=[2, 2], dtype=float32, place=Place(cpu), stop_gradient=True,\n"
    "       [[-1.,  2.],\n"
    "        [ 3., -4.]])";
static const char *k_int64 =
    "Tensor(shape=[3], dtype=int64, place=Place(cpu), stop_gradient=True,\n"
    "       [ 1 , -20, 300])";
static const char *k_bool =
    "Tensor(shape=[3], dtype=bool, place=Place(cpu), stop_gradient=True,\n"
    "       [True , False, True ])";
static const char *k_zerod_f =
    "Tensor(shape=[], dtype=float32, place=Place(cpu), stop_gradient=True,\n"
    "       3.50000000)";
static const char *k_zerod_i =
    "Tensor(shape=[], dtype=int64, place=Place(cpu), stop_gradient=True,\n"
    "       -7)";
static const char *k_threed =
    "Tensor(shape=[2, 2, 2], dtype=int32, place=Place(cpu), stop_gradient=True,\n"
    "       [[[0, 1],\n"
    "         [2, 3]],\n"
    "\n"
    "        [[4, 5],\n"
    "         [6, 7]]])";
static const char *k_sum1d =
    "Tensor(shape=[2000], dtype=int64, place=Place(cpu), stop_gradient=True,\n"
    "       [0   , 1   , 2   , ..., 1997, 1998, 1999])";
static const char *k_sum2d =
    "Tensor(shape=[40, 30], dtype=float32, place=Place(cpu), stop_gradient=True,\n"
    "       [[0.   , 1.   , 2.   , ..., 27.  , 28.  , 29.  ],\n"
    "        [30.  , 31.  , 32.  , ..., 57.  , 58.  , 59.  ],\n"
    "        [60.  , 61.  , 62.  , ..., 87.  , 88.  , 89.  ],\n"
    "        ...,\n"
    "        [1110., 1111., 1112., ..., 1137., 1138., 1139.],\n"
    "        [1140., 1141., 1142., ..., 1167., 1168., 1169.],\n"
    "        [1170., 1171., 1172., ..., 1197., 1198., 1199.]])";
static const char *k_sum3d =
    "Tensor(shape=[8, 10, 20], dtype=float64, place=Place(cpu), stop_gradient=True,\n"
    "       [[[0.          , 0.50000000  , 1.          , ..., 8.50000000  ,\n"
    "          9.          , 9.50000000  ],\n"
    "         [10.         , 10.50000000 , 11.         , ..., 18.50000000 ,\n"
    "          19.         , 19.50000000 ],\n"
    "         [20.         , 20.50000000 , 21.         , ..., 28.50000000 ,\n"
    "          29.         , 29.50000000 ],\n"
    "         ...,\n"
    "         [70.         , 70.50000000 , 71.         , ..., 78.50000000 ,\n"
    "          79.         , 79.50000000 ],\n"
    "         [80.         , 80.50000000 , 81.         , ..., 88.50000000 ,\n"
    "          89.         , 89.50000000 ],\n"
    "         [90.         , 90.50000000 , 91.         , ..., 98.50000000 ,\n"
    "          99.         , 99.50000000 ]],\n"
    "\n"
    "        [[100.        , 100.50000000, 101.        , ..., 108.50000000,\n"
    "          109.        , 109.50000000],\n"
    "         [110.        , 110.50000000, 111.        , ..., 118.50000000,\n"
    "          119.        , 119.50000000],\n"
    "         [120.        , 120.50000000, 121.        , ..., 128.50000000,\n"
    "          129.        , 129.50000000],\n"
    "         ...,\n"
    "         [170.        , 170.50000000, 171.        , ..., 178.50000000,\n"
    "          179.        , 179.50000000],\n"
    "         [180.        , 180.50000000, 181.        , ..., 188.50000000,\n"
    "          189.        , 189.50000000],\n"
    "         [190.        , 190.50000000, 191.        , ..., 198.50000000,\n"
    "          199.        , 199.50000000]],\n"
    "\n"
    "        [[200.        , 200.50000000, 201.        , ..., 208.50000000,\n"
    "          209.        , 209.50000000],\n"
    "         [210.        , 210.50000000, 211.        , ..., 218.50000000,\n"
    "          219.        , 219.50000000],\n"
    "         [220.        , 220.50000000, 221.        , ..., 228.50000000,\n"
    "          229.        , 229.50000000],\n"
    "         ...,\n"
    "         [270.        , 270.50000000, 271.        , ..., 278.50000000,\n"
    "          279.        , 279.50000000],\n"
    "         [280.        , 280.50000000, 281.        , ..., 288.50000000,\n"
    "          289.        , 289.50000000],\n"
    "         [290.        , 290.50000000, 291.        , ..., 298.50000000,\n"
    "          299.        , 299.50000000]],\n"
    "\n"
    "        ...,\n"
    "\n"
    "        [[500.        , 500.50000000, 501.        , ..., 508.50000000,\n"
    "          509.        , 509.50000000],\n"
    "         [510.        , 510.50000000, 511.        , ..., 518.50000000,\n"
    "          519.        , 519.50000000],\n"
    "         [520.        , 520.50000000, 521.        , ..., 528.50000000,\n"
    "          529.        , 529.50000000],\n"
    "         ...,\n"
    "         [570.        , 570.50000000, 571.        , ..., 578.50000000,\n"
    "          579.        , 579.50000000],\n"
    "         [580.        , 580.50000000, 581.        , ..., 588.50000000,\n"
    "          589.        , 589.50000000],\n"
    "         [590.        , 590.50000000, 591.        , ..., 598.50000000,\n"
    "          599.        , 599.50000000]],\n"
    "\n"
    "        [[600.        , 600.50000000, 601.        , ..., 608.50000000,\n"
    "          609.        , 609.50000000],\n"
    "         [610.        , 610.50000000, 611.        , ..., 618.50000000,\n"
    "          619.        , 619.50000000],\n"
    "         [620.        , 620.50000000, 621.        , ..., 628.50000000,\n"
    "          629.        , 629.50000000],\n"
    "         ...,\n"
    "         [670.        , 670.50000000, 671.        , ..., 678.50000000,\n"
    "          679.        , 679.50000000],\n"
    "         [680.        , 680.50000000, 681.        , ..., 688.50000000,\n"
    "          689.        , 689.50000000],\n"
    "         [690.        , 690.50000000, 691.        , ..., 698.50000000,\n"
    "          699.        , 699.50000000]],\n"
    "\n"
    "        [[700.        , 700.50000000, 701.        , ..., 708.50000000,\n"
    "          709.        , 709.50000000],\n"
    "         [710.        , 710.50000000, 711.        , ..., 718.50000000,\n"
    "          719.        , 719.50000000],\n"
    "         [720.        , 720.50000000, 721.        , ..., 728.50000000,\n"
    "          729.        , 729.50000000],\n"
    "         ...,\n"
    "         [770.        , 770.50000000, 771.        , ..., 778.50000000,\n"
    "          779.        , 779.50000000],\n"
    "         [780.        , 780.50000000, 781.        , ..., 788.50000000,\n"
    "          789.        , 789.50000000],\n"
    "         [790.        , 790.50000000, 791.        , ..., 798.50000000,\n"
    "          799.        , 799.50000000]]])";
static const char *k_wrap =
    "Tensor(shape=[30], dtype=float32, place=Place(cpu), stop_gradient=True,\n"
    "       [0.50000000 , 1.50000000 , 2.50000000 , 3.50000000 , 4.50000000 ,\n"
    "        5.50000000 , 6.50000000 , 7.50000000 , 8.50000000 , 9.50000000 ,\n"
    "        10.50000000, 11.50000000, 12.50000000, 13.50000000, 14.50000000,\n"
    "        15.50000000, 16.50000000, 17.50000000, 18.50000000, 19.50000000,\n"
    "        20.50000000, 21.50000000, 22.50000000, 23.50000000, 24.50000000,\n"
    "        25.50000000, 26.50000000, 27.50000000, 28.50000000, 29.50000000])";
static const char *k_empty1 =
    "Tensor(shape=[0], dtype=float32, place=Place(cpu), stop_gradient=True,\n"
    "       [])";
static const char *k_empty2 =
    "Tensor(shape=[2, 0], dtype=float32, place=Place(cpu), stop_gradient=True,\n"
    "       [[],\n"
    "        []])";
static const char *k_empty3 =
    "Tensor(shape=[2, 0, 3], dtype=float32, place=Place(cpu), stop_gradient=True,\n"
    "       [[],\n"
    "\n"
    "        []])";
static const char *k_grad =
    "Tensor(shape=[2], dtype=float32, place=Place(cpu), stop_gradient=False,\n"
    "       [1., 2.])";
static const char *k_inf =
    "Tensor(shape=[4], dtype=float32, place=Place(cpu), stop_gradient=True,\n"
    "       [ inf., -inf.,  nan ,  1.  ])";
static const char *k_quirk =
    "Tensor(shape=[7], dtype=float32, place=Place(cpu), stop_gradient=True,\n"
    "       [1., 2., 3., -4., 5., 6., 7.])";
static const char *k_transposed =
    "Tensor(shape=[3, 2], dtype=float32, place=Place(cpu), stop_gradient=True,\n"
    "       [[1., 4.],\n"
    "        [2., 5.],\n"
    "        [3., 6.]])";
static const char *k_big =
    "Tensor(shape=[2], dtype=float32, place=Place(cpu), stop_gradient=True,\n"
    "       [10000000000., 0.50000000  ])";
static const char *k_f16 =
    "Tensor(shape=[2], dtype=float16, place=Place(cpu), stop_gradient=True,\n"
    "       [0.09997559, 1.        ])";
static const char *k_bf16 =
    "Tensor(shape=[2], dtype=bfloat16, place=Place(cpu), stop_gradient=True,\n"
    "       [0.10009766, 2.        ])";
static const char *k_i64big =
    "Tensor(shape=[2], dtype=int64, place=Place(cpu), stop_gradient=True,\n"
    "       [9007199254740993, -1              ])";
static const char *k_u8 =
    "Tensor(shape=[3], dtype=uint8, place=Place(cpu), stop_gradient=True,\n"
    "       [0  , 255, 7  ])";
static const char *k_int_wrap =
    "Tensor(shape=[100], dtype=int64, place=Place(cpu), stop_gradient=True,\n"
    "       [0 , 1 , 2 , 3 , 4 , 5 , 6 , 7 , 8 , 9 , 10, 11, 12, 13, 14, 15, 16, 17,\n"
    "        18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35,\n"
    "        36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53,\n"
    "        54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65, 66, 67, 68, 69, 70, 71,\n"
    "        72, 73, 74, 75, 76, 77, 78, 79, 80, 81, 82, 83, 84, 85, 86, 87, 88, 89,\n"
    "        90, 91, 92, 93, 94, 95, 96, 97, 98, 99])";

static void expect_str(pd_tensor *t, const char *want) {
  if (!t) fail_msg("tensor is NULL: %s", pd_last_error());
  char *s = pd_tensor_to_string(t);
  assert_non_null(s);
  if (strcmp(s, want) != 0) {
    fprintf(stderr, "got:\n%s\nwant:\n%s\n", s, want);
    size_t i = 0;
    while (s[i] && s[i] == want[i]) i++;
    free(s);
    fail_msg("strings differ at offset %zu", i);
  }
  free(s);
}

static pd_tensor *range_f(pd_dtype dt, int ndim, const int64_t *shape, double start, double step) {
  int64_t n = 1;
  for (int d = 0; d < ndim; d++) n *= shape[d];
  double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
  for (int64_t i = 0; i < n; i++) v[i] = start + step * (double)i;
  pd_tensor *t = pd_tensor_from_f64(v, dt, ndim, shape);
  free(v);
  return t;
}

static void test_basic_float(void **state) {
  (void)state;
  pd_scope_begin();
  expect_str(T(PD_FLOAT32, 2, SHAPE(2, 3), 1, 2, 3, 4, 5, 6), k_basic);
  /* the longest item takes no padding, shorter ones a sign space */
  expect_str(T(PD_FLOAT32, 1, SHAPE(3), 1.5, 2, -3), k_mixed);
  expect_str(T(PD_FLOAT32, 2, SHAPE(2, 2), -1, 2, 3, -4), k_neg);
  expect_str(T(PD_FLOAT32, 1, SHAPE(2), 1e10, 0.5), k_big);
  expect_str(T(PD_FLOAT32, 1, SHAPE(4), INFINITY, -INFINITY, NAN, 1), k_inf);
  pd_tensor *g = T(PD_FLOAT32, 1, SHAPE(2), 1, 2);
  pd_tensor_set_stop_gradient(g, false);
  expect_str(g, k_grad);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_integer_and_bool(void **state) {
  (void)state;
  pd_scope_begin();
  expect_str(T(PD_INT64, 1, SHAPE(3), 1, -20, 300), k_int64);
  expect_str(T(PD_BOOL, 1, SHAPE(3), 1, 0, 1), k_bool);
  expect_str(T(PD_UINT8, 1, SHAPE(3), 0, 255, 7), k_u8);
  /* int64 beyond 2^53 prints exactly */
  int64_t big[2] = {9007199254740993LL, -1};
  expect_str(pd_to_tensor(big, PD_INT64, 1, SHAPE(2)), k_i64big);
  expect_str(range_f(PD_INT64, 1, SHAPE(100), 0, 1), k_int_wrap);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_zero_dim_and_empty(void **state) {
  (void)state;
  pd_scope_begin();
  expect_str(pd_full(0, NULL, 3.5, PD_FLOAT32), k_zerod_f);
  expect_str(pd_full(0, NULL, -7, PD_INT64), k_zerod_i);
  expect_str(pd_zeros(1, SHAPE(0), PD_FLOAT32), k_empty1);
  expect_str(pd_zeros(2, SHAPE(2, 0), PD_FLOAT32), k_empty2);
  expect_str(pd_zeros(3, SHAPE(2, 0, 3), PD_FLOAT32), k_empty3);
  pd_scope_end();
  expect_no_live_tensors();
}

/* An empty tensor holds no element however long its leading dims are: its
 * printout elides them past 1000 "[]" instead of walking them (a shape
 * [2^53, 0] used to print for ever). */
static const char *k_empty_huge =
    "Tensor(shape=[9007199254740992, 0], dtype=float32, place=Place(cpu), stop_gradient=True,\n"
    "       [[],\n"
    "        [],\n"
    "        [],\n"
    "        ...,\n"
    "        [],\n"
    "        [],\n"
    "        []])";
static const char *k_empty_wide =
    "Tensor(shape=[2, 1099511627776, 0], dtype=int32, place=Place(cpu), stop_gradient=True,\n"
    "       [[[],\n"
    "         [],\n"
    "         [],\n"
    "         ...,\n"
    "         [],\n"
    "         [],\n"
    "         []],\n"
    "\n"
    "        [[],\n"
    "         [],\n"
    "         [],\n"
    "         ...,\n"
    "         [],\n"
    "         [],\n"
    "         []]])";

static void test_empty_with_huge_dims(void **state) {
  (void)state;
  pd_scope_begin();
  expect_str(pd_zeros(2, SHAPE((int64_t)1 << 53, 0), PD_FLOAT32), k_empty_huge);
  expect_str(pd_zeros(3, SHAPE(2, (int64_t)1 << 40, 0), PD_INT32), k_empty_wide);
  /* a long dim after the empty one is never reached (as k_empty3) */
  expect_str(pd_zeros(3, SHAPE(2, 0, (int64_t)1 << 53), PD_FLOAT32),
             "Tensor(shape=[2, 0, 9007199254740992], dtype=float32, place=Place(cpu), stop_gradient=True,\n"
             "       [[],\n"
             "\n"
             "        []])");
  FILE *f = tmpfile();
  assert_non_null(f);
  assert_int_equal(pd_tensor_print(pd_zeros(2, SHAPE((int64_t)1 << 53, 0), PD_FLOAT32), f), PD_OK);
  fclose(f);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_three_d_and_views(void **state) {
  (void)state;
  pd_scope_begin();
  expect_str(range_f(PD_INT32, 3, SHAPE(2, 2, 2), 0, 1), k_threed);
  /* a transposed (strided) view prints in logical order */
  pd_tensor *x = T(PD_FLOAT32, 2, SHAPE(2, 3), 1, 2, 3, 4, 5, 6);
  pd_tensor *xt = pd_transpose(x, 2, SHAPE(1, 0));
  assert_false(pd_tensor_is_contiguous(xt));
  expect_str(xt, k_transposed);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_summary(void **state) {
  (void)state;
  pd_scope_begin();
  expect_str(range_f(PD_INT64, 1, SHAPE(2000), 0, 1), k_sum1d);
  expect_str(range_f(PD_FLOAT32, 2, SHAPE(40, 30), 0, 1), k_sum2d);
  expect_str(range_f(PD_FLOAT64, 3, SHAPE(8, 10, 20), 0, 0.5), k_sum3d);
  /* exactly 1000 elements is not summarised */
  char *s = pd_tensor_to_string(range_f(PD_INT64, 1, SHAPE(1000), 0, 1));
  assert_non_null(s);
  assert_null(strstr(s, "..."));
  assert_non_null(strstr(s, "999]"));
  free(s);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_line_wrap_and_width_from_edges(void **state) {
  (void)state;
  pd_scope_begin();
  expect_str(range_f(PD_FLOAT32, 1, SHAPE(30), 0.5, 1), k_wrap);
  /* width and sign come from the 3 edge items of each dim, as Paddle:
   * -4 is the middle element of 7, so there is no sign column */
  expect_str(T(PD_FLOAT32, 1, SHAPE(7), 1, 2, 3, -4, 5, 6, 7), k_quirk);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_half_dtypes_and_precision(void **state) {
  (void)state;
  pd_scope_begin();
  expect_str(T(PD_FLOAT16, 1, SHAPE(2), 0.1, 1), k_f16);
  expect_str(T(PD_BFLOAT16, 1, SHAPE(2), 0.1, 2), k_bf16);
  pd_set_print_precision(4);
  expect_str(T(PD_FLOAT32, 1, SHAPE(2), 0.123456, 1),
             "Tensor(shape=[2], dtype=float32, place=Place(cpu), stop_gradient=True,\n"
             "       [0.1235, 1.    ])");
  pd_set_print_precision(-1); /* ignored */
  expect_str(T(PD_FLOAT32, 0, NULL, 0.5),
             "Tensor(shape=[], dtype=float32, place=Place(cpu), stop_gradient=True,\n"
             "       0.5000)");
  pd_set_print_precision(8);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_print_to_file_and_null(void **state) {
  (void)state;
  pd_scope_begin();
  FILE *f = tmpfile();
  assert_non_null(f);
  assert_int_equal(pd_tensor_print(T(PD_FLOAT32, 2, SHAPE(2, 3), 1, 2, 3, 4, 5, 6), f), PD_OK);
  rewind(f);
  char buf[512] = {0};
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  assert_int_equal(n, strlen(k_basic) + 1);
  assert_memory_equal(buf, k_basic, strlen(k_basic));
  assert_int_equal(buf[n - 1], '\n');
  assert_null(pd_tensor_to_string(NULL));
  assert_non_null(strstr(pd_last_error(), "to_string"));
  pd_clear_error();
  assert_true(pd_tensor_print(NULL, stdout) < 0);
  pd_clear_error();
  pd_scope_end();
  expect_no_live_tensors();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_basic_float),
      cmocka_unit_test(test_integer_and_bool),
      cmocka_unit_test(test_zero_dim_and_empty),
      cmocka_unit_test(test_empty_with_huge_dims),
      cmocka_unit_test(test_three_d_and_views),
      cmocka_unit_test(test_summary),
      cmocka_unit_test(test_line_wrap_and_width_from_edges),
      cmocka_unit_test(test_half_dtypes_and_precision),
      cmocka_unit_test(test_print_to_file_and_null),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
