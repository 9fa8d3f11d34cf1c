/* .npy files: round trips of every dtype, bytes as NumPy writes them,
 * hand-written files (Fortran order, big endian, bfloat16, old headers),
 * malformed headers, and every truncation of a small file. */
#define _GNU_SOURCE /* memmem */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "temp_dir.h"
#include "test_util.h"

/* a .npy image: magic, version, header text as given (no padding added), data */
static size_t make_npy(unsigned char *out, int major, const char *header, const void *data, size_t n) {
  size_t h = strlen(header), k = 0;
  memcpy(out, "\x93NUMPY", 6);
  out[6] = (unsigned char)major;
  out[7] = 0;
  k = 8;
  if (major == 1) {
    out[k++] = (unsigned char)(h & 0xff);
    out[k++] = (unsigned char)(h >> 8);
  } else {
    for (int i = 0; i < 4; i++) out[k++] = (unsigned char)(h >> (8 * i));
  }
  memcpy(out + k, header, h);
  k += h;
  if (n) memcpy(out + k, data, n);
  return k + n;
}

static unsigned char *read_all(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  static unsigned char buf[1 << 16];
  *n = fread(buf, 1, sizeof buf, f);
  fclose(f);
  return buf;
}

static void expect_error_status(const void *p, const char *frag1, const char *frag2) {
  if (p) fail_msg("expected NULL (error with '%s')", frag1);
  const char *m = pd_last_error();
  if (frag1 && !strstr(m, frag1)) fail_msg("error '%s' lacks '%s'", m, frag1);
  if (frag2 && !strstr(m, frag2)) fail_msg("error '%s' lacks '%s'", m, frag2);
}

static void test_round_trip_every_dtype(void **state) {
  (void)state;
  pd_scope_begin();
  const double vals[6] = {0, 1, 5, 2, 127, 3};
  const double fvals[6] = {0.5, -1.25, 3, 1e-3, 65504, -7};
  for (int dt = 0; dt < PD_NUM_DTYPES; dt++) {
    const int64_t shapes[4][3] = {{2, 3, 0}, {6, 0, 0}, {0, 0, 0}, {0, 4, 0}};
    const int ndims[4] = {2, 1, 0, 2};
    for (int s = 0; s < 4; s++) {
      const double *v = pd_dtype_is_floating((pd_dtype)dt) ? fvals : vals;
      double bools[6] = {1, 0, 1, 1, 0, 0};
      pd_tensor *t = pd_tensor_from_f64(dt == PD_BOOL ? bools : v, (pd_dtype)dt, ndims[s], shapes[s]);
      assert_non_null(t);
      assert_int_equal(pd_io_save_npy(temp_path("x.npy"), t), PD_OK);
      pd_tensor *u = pd_io_load_npy(temp_path("x.npy"));
      assert_non_null(u);
      assert_int_equal(pd_tensor_dtype(u), dt);
      expect_shape(u, ndims[s], shapes[s]);
      size_t nbytes = (size_t)pd_tensor_numel(t) * pd_dtype_size((pd_dtype)dt);
      if (nbytes) assert_memory_equal(pd_tensor_data(t), pd_tensor_data(u), nbytes);
    }
  }
  /* a transposed view is written in its logical (row-major) order */
  pd_tensor *x = T(PD_INT32, 2, SHAPE(2, 3), 1, 2, 3, 4, 5, 6);
  pd_tensor *xt = pd_transpose(x, 2, (const int64_t[]){1, 0});
  assert_int_equal(pd_io_save_npy(temp_path("t.npy"), xt), PD_OK);
  pd_tensor *u = pd_io_load_npy(temp_path("t.npy"));
  expect_shape(u, 2, SHAPE(3, 2));
  EXPECT_VALUES(u, 0, 1, 4, 2, 5, 3, 6);
  pd_scope_end();
  expect_no_live_tensors();
}

/* numpy.save(np.arange(6, dtype='<f4').reshape(2, 3)) writes exactly these bytes */
static void test_bytes_as_numpy_writes_them(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *t = T(PD_FLOAT32, 2, SHAPE(2, 3), 0, 1, 2, 3, 4, 5);
  assert_int_equal(pd_io_save_npy(temp_path("f.npy"), t), PD_OK);
  size_t n;
  unsigned char *b = read_all(temp_path("f.npy"), &n);
  const char *hdr = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  assert_int_equal(n, 128 + 24);
  assert_memory_equal(b, "\x93NUMPY\x01\x00\x76\x00", 10);
  assert_memory_equal(b + 10, hdr, strlen(hdr));
  for (size_t i = 10 + strlen(hdr); i < 127; i++) assert_int_equal(b[i], ' ');
  assert_int_equal(b[127], '\n');
  const float want[6] = {0, 1, 2, 3, 4, 5};
  assert_memory_equal(b + 128, want, sizeof want);
  /* 1-D and 0-D shapes are written (n,) and () */
  assert_int_equal(pd_io_save_npy(temp_path("v.npy"), T(PD_INT64, 1, SHAPE(3), 1, 2, 3)), PD_OK);
  b = read_all(temp_path("v.npy"), &n);
  assert_non_null(memmem(b, n, "'descr': '<i8', 'fortran_order': False, 'shape': (3,), }", 56));
  assert_int_equal(pd_io_save_npy(temp_path("s.npy"), pd_full(0, NULL, 1, PD_BOOL)), PD_OK);
  b = read_all(temp_path("s.npy"), &n);
  assert_non_null(memmem(b, n, "'descr': '|b1', 'fortran_order': False, 'shape': (), }", 54));
  assert_int_equal(n, 129);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_hand_written_files(void **state) {
  (void)state;
  unsigned char buf[512];
  pd_scope_begin();
  /* Fortran order: [[1, 2, 3], [4, 5, 6]] stored column by column */
  const int16_t fdata[6] = {1, 4, 2, 5, 3, 6};
  size_t n =
      make_npy(buf, 1, "{'descr': '<i2', 'fortran_order': True, 'shape': (2, 3), }\n", fdata, sizeof fdata);
  pd_tensor *t = pd_io_load_npy_buffer(buf, n, "fortran.npy");
  expect_shape(t, 2, SHAPE(2, 3));
  EXPECT_VALUES(t, 0, 1, 2, 3, 4, 5, 6);
  assert_true(pd_tensor_is_contiguous(t));
  /* 3-D Fortran: element (i, j, k) at i + 2j + 4k */
  int32_t f3[8];
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 2; j++)
      for (int k = 0; k < 2; k++) f3[i + 2 * j + 4 * k] = 100 * i + 10 * j + k;
  n = make_npy(buf, 1, "{'descr': '<i4', 'fortran_order': True, 'shape': (2, 2, 2), }\n", f3, sizeof f3);
  t = pd_io_load_npy_buffer(buf, n, "f3.npy");
  EXPECT_VALUES(t, 0, 0, 1, 10, 11, 100, 101, 110, 111);
  /* big endian */
  const unsigned char be[8] = {0x00, 0x00, 0x01, 0x02, 0xff, 0xff, 0xff, 0xfe};
  n = make_npy(buf, 1, "{'descr': '>i4', 'fortran_order': False, 'shape': (2,), }\n", be, sizeof be);
  t = pd_io_load_npy_buffer(buf, n, "be.npy");
  EXPECT_VALUES(t, 0, 258, -2);
  const unsigned char bef[8] = {0x3f, 0xf8, 0, 0, 0, 0, 0, 0}; /* 1.5 */
  n = make_npy(buf, 1, "{'descr': '>f8', 'fortran_order': False, 'shape': (1,), }\n", bef, sizeof bef);
  EXPECT_VALUES(pd_io_load_npy_buffer(buf, n, "bef.npy"), 0, 1.5);
  /* bfloat16 as 2-byte void: 1.0 = 0x3f80, -2.0 = 0xc000 */
  const uint16_t bf[2] = {0x3f80, 0xc000};
  n = make_npy(buf, 1, "{'descr': '|V2', 'fortran_order': False, 'shape': (2,), }\n", bf, sizeof bf);
  t = pd_io_load_npy_buffer(buf, n, "bf.npy");
  assert_int_equal(pd_tensor_dtype(t), PD_BFLOAT16);
  EXPECT_VALUES(t, 0, 1, -2);
  /* float16: 0x3c00 = 1, 0xc500 = -5 */
  const uint16_t h[2] = {0x3c00, 0xc500};
  n = make_npy(buf, 1, "{'descr': '<f2', 'fortran_order': False, 'shape': (2,), }\n", h, sizeof h);
  EXPECT_VALUES(pd_io_load_npy_buffer(buf, n, "h.npy"), 0, 1, -5);
  /* other spellings: no spaces, double quotes, any key order, Python 2
   * longs, '=' byte order, version 2.0 and 3.0 headers */
  const uint8_t u8[3] = {7, 8, 9};
  const char *variants[] = {
      "{'descr':'|u1','fortran_order':False,'shape':(3,)}",
      "{\"shape\": (3L,), \"fortran_order\": False, \"descr\": \"|u1\"}   \n",
      "{'descr': '=u1', 'fortran_order': False, 'shape': (3,), }\n",
      "{'descr': '<u1', 'fortran_order': False, 'shape': (3,)}\n",
  };
  for (int v = 0; v < 4; v++)
    for (int major = 1; major <= 3; major++) {
      n = make_npy(buf, major, variants[v], u8, 3);
      t = pd_io_load_npy_buffer(buf, n, "variant.npy");
      if (!t) fail_msg("variant %d (version %d): %s", v, major, pd_last_error());
      assert_int_equal(pd_tensor_dtype(t), PD_UINT8);
      EXPECT_VALUES(t, 0, 7, 8, 9);
    }
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_malformed_headers(void **state) {
  (void)state;
  unsigned char buf[512];
  const int32_t d[2] = {1, 2};
  static const struct {
    const char *header;
    const char *frag;
  } bad[] = {
      {"{'descr': '<i4', 'fortran_order': False}", "lacks key 'shape'"},
      {"{'descr': '<i4', 'shape': (2,)}", "lacks key 'fortran_order'"},
      {"{'descr': '<i4', 'fortran_order': False, 'shape': (2,), 'extra': 1}", "unexpected key 'extra'"},
      {"{'descr': '<i4', 'descr': '<i4', 'fortran_order': False, 'shape': (2,)}", "appears twice"},
      {"{'descr': '<c8', 'fortran_order': False, 'shape': (2,)}", "unsupported dtype '<c8'"},
      {"{'descr': '<u4', 'fortran_order': False, 'shape': (2,)}", "unsupported dtype '<u4'"},
      {"{'descr': '|i4', 'fortran_order': False, 'shape': (2,)}", "needs a byte order"},
      {"{'descr': 'i4', 'fortran_order': False, 'shape': (2,)}", "no byte order"},
      {"{'descr': [('a', '<i4')], 'fortran_order': False, 'shape': (2,)}", "structured"},
      {"{'descr': '<i4', 'fortran_order': 0, 'shape': (2,)}", "neither True nor False"},
      {"{'descr': '<i4', 'fortran_order': False, 'shape': (2)}", "(n,)"},
      {"{'descr': '<i4', 'fortran_order': False, 'shape': [2]}", "not a tuple"},
      {"{'descr': '<i4', 'fortran_order': False, 'shape': (-2,)}", "not a size"},
      {"{'descr': '<i4', 'fortran_order': False, 'shape': (99999999999999999999,)}", "overflows"},
      {"{'descr': '<i4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1,2)}", "more than 9 dims"},
      {"{'descr': '<i4', 'fortran_order': False, 'shape': (2,)} x", "text after"},
      {"{'descr': '<i4' 'fortran_order': False, 'shape': (2,)}", "lacks a ','"},
      {"{'descr' '<i4', 'fortran_order': False, 'shape': (2,)}", "lacks a ':'"},
      {"['descr', '<i4']", "not a dict"},
      {"{'descr': '<i4', 'fortran_order': False, 'shape': (2,)", "lacks a ','"},
      {"{'descr': '<i\\x34', 'fortran_order': False, 'shape': (2,)}", "not a dtype string"},
      {"{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }\x01", "printable"},
      {"{'descr': '<i4', 'fortran_order': False, 'shape': (3,)}", "8 bytes of data"},
      {"{'descr': '<i4', 'fortran_order': False, 'shape': (1,)}", "trailing bytes"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    size_t n = make_npy(buf, 1, bad[i].header, d, sizeof d);
    pd_tensor *t = pd_io_load_npy_buffer(buf, n, "bad.npy");
    if (t) fail_msg("header %zu loaded: %s", i, bad[i].header);
    if (!strstr(pd_last_error(), bad[i].frag) || !strstr(pd_last_error(), "'bad.npy'"))
      fail_msg("header %zu: error '%s' lacks '%s'", i, pd_last_error(), bad[i].frag);
  }
  /* preamble problems */
  size_t n = make_npy(buf, 1, "{'descr': '<i4', 'fortran_order': False, 'shape': (2,)}", d, sizeof d);
  buf[1] = 'X';
  expect_error_status(pd_io_load_npy_buffer(buf, n, "m.npy"), "not a .npy file", "'m.npy'");
  buf[1] = 'N';
  buf[6] = 4;
  expect_error_status(pd_io_load_npy_buffer(buf, n, "m.npy"), "version 4.0", NULL);
  buf[6] = 1;
  buf[7] = 1;
  expect_error_status(pd_io_load_npy_buffer(buf, n, "m.npy"), "version 1.1", NULL);
  buf[7] = 0;
  buf[8] = 0xff; /* header longer than the file */
  expect_error_status(pd_io_load_npy_buffer(buf, n, "m.npy"), "runs past the end", NULL);
  /* a bool byte other than 0 or 1 */
  const uint8_t b2[2] = {1, 2};
  n = make_npy(buf, 1, "{'descr': '|b1', 'fortran_order': False, 'shape': (2,)}", b2, 2);
  expect_error_status(pd_io_load_npy_buffer(buf, n, "b.npy"), "bool element 1", "holds 2");
  expect_error_status(pd_io_load_npy(temp_path("missing.npy")), "cannot open", "missing.npy");
  pd_scope_begin();
  assert_true(pd_io_save_npy("/nonexistent-dir/x.npy", T(PD_FLOAT32, 1, SHAPE(1), 1)) < 0);
  assert_non_null(strstr(pd_last_error(), "/nonexistent-dir/x.npy"));
  pd_scope_end();
  expect_no_live_tensors();
}

/* An array with no elements whose other dims multiply past int64: the
 * empty tensor's strides would overflow (the fuzz run of the sanitizer
 * build found this), so it is an error; a product that fits loads. */
static void test_empty_with_huge_dims(void **state) {
  (void)state;
  unsigned char buf[512];
  static const char *const bad[] = {
      "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 4611686018427387904, 4611686018427387904), }",
      "{'descr': '<f4', 'fortran_order': True, 'shape': (4611686018427387904, 4611686018427387904, 0), }",
      "{'descr': '|u1', 'fortran_order': False, 'shape': (4611686018427387904, 0), }",
      /* the input the fuzz test found: a zero dim between 2 and 2^62 */
      "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 0, 4611686018427387904), }",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    size_t n = make_npy(buf, 1, bad[i], NULL, 0);
    expect_error_status(pd_io_load_npy_buffer(buf, n, "huge.npy"), "'huge.npy'", "is too large");
  }
  size_t n =
      make_npy(buf, 1, "{'descr': '<f8', 'fortran_order': True, 'shape': (0, 1000000, 1000000), }", NULL, 0);
  pd_tensor *t = pd_io_load_npy_buffer(buf, n, "fits.npy");
  expect_shape(t, 3, SHAPE(0, 1000000, 1000000));
  pd_tensor_release(t);
  expect_no_live_tensors();
}

/* every prefix of a valid file is a clean error; byte flips never crash */
static void test_truncations_and_flips(void **state) {
  (void)state;
  pd_scope_begin();
  assert_int_equal(pd_io_save_npy(temp_path("small.npy"), T(PD_INT16, 2, SHAPE(2, 3), 1, 2, 3, 4, 5, 6)),
                   PD_OK);
  size_t n;
  unsigned char *b = read_all(temp_path("small.npy"), &n);
  unsigned char copy[256];
  memcpy(copy, b, n);
  for (size_t k = 0; k < n; k++) {
    pd_clear_error();
    pd_tensor *t = pd_io_load_npy_buffer(copy, k, "cut.npy");
    if (t) fail_msg("a prefix of %zu of %zu bytes loaded", k, n);
    if (!strstr(pd_last_error(), "load_npy: 'cut.npy'"))
      fail_msg("prefix %zu: error '%s'", k, pd_last_error());
  }
  /* and from a truncated file on disk */
  FILE *f = fopen(temp_path("cut.npy"), "wb");
  fwrite(copy, 1, n - 3, f);
  fclose(f);
  expect_error_status(pd_io_load_npy(temp_path("cut.npy")), "cut.npy", "truncated");
  /* flip each header byte in a few ways */
  int loaded = 0;
  for (size_t k = 0; k < 128; k++)
    for (int x = 1; x < 256; x <<= 1) {
      copy[k] ^= (unsigned char)x;
      pd_tensor *t = pd_io_load_npy_buffer(copy, n, "flip.npy");
      if (t) {
        loaded++;
        pd_tensor_release(pd_keep(t));
      } else {
        assert_non_null(strstr(pd_last_error(), "flip.npy"));
      }
      copy[k] ^= (unsigned char)x;
    }
  assert_true(loaded > 0); /* flips of padding spaces into other blanks still load */
  pd_scope_end();
  expect_no_live_tensors();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_round_trip_every_dtype), cmocka_unit_test(test_bytes_as_numpy_writes_them),
      cmocka_unit_test(test_hand_written_files),     cmocka_unit_test(test_malformed_headers),
      cmocka_unit_test(test_truncations_and_flips),  cmocka_unit_test(test_empty_with_huge_dims),
  };
  return cmocka_run_group_tests(tests, temp_dir_setup, temp_dir_teardown);
}
