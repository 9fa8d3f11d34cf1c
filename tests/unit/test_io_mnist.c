/* idx files and paddle.vision.datasets.MNIST / FashionMNIST: the real
 * Fashion-MNIST test set (Debian's dataset-fashion-mnist), small files the
 * test writes (plain and gzipped), and broken ones. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "temp_dir.h"
#include "test_util.h"

#define FASHION_ROOT "/usr/share/datasets/fashion-mnist"

static void write_bytes(const char *path, const void *b, size_t n, bool gz) {
  if (gz) {
    gzFile f = gzopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(gzwrite(f, b, (unsigned)n), (int)n);
    assert_int_equal(gzclose(f), Z_OK);
  } else {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b, 1, n, f), n);
    fclose(f);
  }
}

/* an idx file: magic 0x0000TTNN, big-endian sizes, data as given */
static size_t make_idx(unsigned char *out, int type, int ndim, const uint32_t *dims, const void *data,
                       size_t n) {
  size_t k = 0;
  out[k++] = 0;
  out[k++] = 0;
  out[k++] = (unsigned char)type;
  out[k++] = (unsigned char)ndim;
  for (int i = 0; i < ndim; i++) {
    out[k++] = (unsigned char)(dims[i] >> 24);
    out[k++] = (unsigned char)(dims[i] >> 16);
    out[k++] = (unsigned char)(dims[i] >> 8);
    out[k++] = (unsigned char)dims[i];
  }
  if (n) memcpy(out + k, data, n);
  return k + n;
}

/* 3 images of 2 x 2 and their labels, written as <base>-images-idx3-ubyte(.gz) */
static const uint8_t k_pixels[12] = {0, 255, 10, 20, 30, 40, 50, 60, 1, 2, 3, 4};
static const uint8_t k_labels[3] = {7, 0, 9};
static void write_small_set(const char *images, const char *labels, bool gz) {
  unsigned char buf[64];
  size_t n = make_idx(buf, 0x08, 3, (const uint32_t[]){3, 2, 2}, k_pixels, 12);
  write_bytes(images, buf, n, gz);
  n = make_idx(buf, 0x08, 1, (const uint32_t[]){3}, k_labels, 3);
  write_bytes(labels, buf, n, gz);
}

static void expect_error_msg(const void *p, const char *frag1, const char *frag2) {
  if (p) fail_msg("expected an error with '%s'", frag1);
  const char *m = pd_last_error();
  if (frag1 && !strstr(m, frag1)) fail_msg("error '%s' lacks '%s'", m, frag1);
  if (frag2 && !strstr(m, frag2)) fail_msg("error '%s' lacks '%s'", m, frag2);
}

static void test_fashion_mnist_test_set(void **state) {
  (void)state;
  if (access(FASHION_ROOT "/t10k-labels-idx1-ubyte.gz", R_OK) != 0) skip();
  pd_scope_begin();
  pd_tensor *labels = pd_io_load_idx(FASHION_ROOT "/t10k-labels-idx1-ubyte.gz");
  assert_non_null(labels);
  assert_int_equal(pd_tensor_dtype(labels), PD_UINT8);
  expect_shape(labels, 1, SHAPE(10000));
  /* the first test items: ankle boot, pullover, trouser, trouser, shirt */
  const int first[5] = {9, 2, 1, 1, 6};
  for (int i = 0; i < 5; i++) assert_int_equal(pd_tensor_item_at(labels, i), first[i]);
  int count[10] = {0};
  for (int64_t i = 0; i < 10000; i++) count[(int)pd_tensor_item_at(labels, i)]++;
  for (int c = 0; c < 10; c++) assert_int_equal(count[c], 1000); /* a balanced test set */
  pd_tensor *images = pd_io_load_idx(FASHION_ROOT "/t10k-images-idx3-ubyte.gz");
  expect_shape(images, 3, SHAPE(10000, 28, 28));

  pd_io_dataset *ds = pd_vision_datasets_fashion_mnist(&(pd_vision_datasets_mnist_opts){.mode = "test"});
  if (!ds) fail_msg("%s", pd_last_error());
  assert_int_equal(pd_io_dataset_len(ds), 10000);
  pd_tensor *out[2];
  for (int64_t idx = 0; idx < 10000; idx += 4999) {
    assert_int_equal(pd_io_dataset_get_item(ds, idx, out, 2), 2);
    assert_int_equal(pd_tensor_dtype(out[0]), PD_FLOAT32);
    expect_shape(out[0], 2, SHAPE(28, 28));
    for (int64_t p = 0; p < 784; p++)
      assert_true(pd_tensor_item_at(out[0], p) == pd_tensor_item_at(images, idx * 784 + p));
    assert_int_equal(pd_tensor_dtype(out[1]), PD_INT64);
    expect_shape(out[1], 1, SHAPE(1));
    assert_true(pd_tensor_item(out[1]) == pd_tensor_item_at(labels, idx));
  }
  /* through a DataLoader: batches of [B, 28, 28] and [B, 1] */
  pd_io_loader *l = pd_io_data_loader(ds, &(pd_io_data_loader_opts){.batch_size = 64, .num_workers = 2});
  assert_int_equal(pd_io_loader_len(l), 157);
  pd_tensor *b[2];
  assert_int_equal(pd_io_loader_next(l, b, 2), 2);
  expect_shape(b[0], 3, SHAPE(64, 28, 28));
  expect_shape(b[1], 2, SHAPE(64, 1));
  EXPECT_VALUES(pd_slice(b[1], 1, (const int64_t[]){0}, (const int64_t[]){0}, (const int64_t[]){5}), 0, 9, 2,
                1, 1, 6);
  pd_io_loader_release(l);
  pd_io_dataset_release(ds);
  /* the training set, from the default root */
  ds = pd_vision_datasets_fashion_mnist(NULL);
  if (!ds) fail_msg("%s", pd_last_error());
  assert_int_equal(pd_io_dataset_len(ds), 60000);
  assert_int_equal(pd_io_dataset_get_item(ds, 0, out, 2), 2);
  EXPECT_VALUES(out[1], 0, 9);
  pd_io_dataset_release(ds);
  pd_scope_end();
  expect_no_live_tensors();
}

static int scale_transform(pd_tensor *image, pd_tensor **out, void *user) {
  *out = pd_scale(image, *(double *)user, 0, true);
  return *out ? 1 : pd_last_status();
}

static void test_small_files(void **state) {
  (void)state;
  for (int gz = 0; gz < 2; gz++) {
    const char *ip = temp_path(gz ? "im.gz" : "im"), *lp = temp_path(gz ? "lb.gz" : "lb");
    write_small_set(ip, lp, gz);
    pd_scope_begin();
    pd_tensor *t = pd_io_load_idx(ip);
    assert_non_null(t);
    expect_shape(t, 3, SHAPE(3, 2, 2));
    EXPECT_VALUES(t, 0, 0, 255, 10, 20, 30, 40, 50, 60, 1, 2, 3, 4);
    pd_io_dataset *ds =
        pd_vision_datasets_mnist(&(pd_vision_datasets_mnist_opts){.image_path = ip, .label_path = lp});
    if (!ds) fail_msg("%s", pd_last_error());
    assert_int_equal(pd_io_dataset_len(ds), 3);
    pd_tensor *out[2];
    assert_int_equal(pd_io_dataset_get_item(ds, 1, out, 2), 2);
    expect_shape(out[0], 2, SHAPE(2, 2));
    EXPECT_VALUES(out[0], 0, 30, 40, 50, 60);
    EXPECT_VALUES(out[1], 0, 0);
    assert_int_equal(pd_io_dataset_get_item(ds, 2, out, 2), 2);
    EXPECT_VALUES(out[1], 0, 9);
    pd_io_dataset_release(ds);
    /* raw bytes and a transform */
    double s = 1.0 / 255;
    ds = pd_vision_datasets_mnist(&(pd_vision_datasets_mnist_opts){.image_path = ip,
                                                                   .label_path = lp,
                                                                   .dtype = PD_FLOAT64,
                                                                   .transform = scale_transform,
                                                                   .transform_user = &s});
    assert_int_equal(pd_io_dataset_get_item(ds, 0, out, 2), 2);
    assert_int_equal(pd_tensor_dtype(out[0]), PD_FLOAT64);
    EXPECT_VALUES(out[0], 1e-15, 0, 1, 10.0 / 255, 20.0 / 255);
    pd_io_dataset_release(ds);
    ds = pd_vision_datasets_mnist(
        &(pd_vision_datasets_mnist_opts){.image_path = ip, .label_path = lp, .dtype = PD_UINT8});
    assert_int_equal(pd_io_dataset_get_item(ds, 0, out, 2), 2);
    assert_int_equal(pd_tensor_dtype(out[0]), PD_UINT8);
    pd_io_dataset_release(ds);
    pd_scope_end();
  }
  /* a root folder with the standard names: .gz first, else plain */
  write_small_set(temp_path("t10k-images-idx3-ubyte.gz"), temp_path("t10k-labels-idx1-ubyte"), true);
  unlink(temp_path("t10k-labels-idx1-ubyte"));
  write_small_set(temp_path("x"), temp_path("t10k-labels-idx1-ubyte"), false);
  pd_io_dataset *ds =
      pd_vision_datasets_mnist(&(pd_vision_datasets_mnist_opts){.root = temp_dir(), .mode = "TEST"});
  if (!ds) fail_msg("%s", pd_last_error());
  assert_int_equal(pd_io_dataset_len(ds), 3);
  pd_io_dataset_release(ds);
  /* mode train looks for train-* files */
  expect_error_msg(pd_vision_datasets_mnist(&(pd_vision_datasets_mnist_opts){.root = temp_dir()}),
                   "train-images-idx3-ubyte", "cannot open");
  expect_error_msg(
      pd_vision_datasets_fashion_mnist(&(pd_vision_datasets_mnist_opts){.root = temp_dir(), .mode = "valid"}),
      "FashionMNIST", "'train' or 'test', but got valid");
  expect_no_live_tensors();
}

static void test_other_idx_types(void **state) {
  (void)state;
  unsigned char buf[128];
  pd_scope_begin();
  const unsigned char i16[6] = {0x01, 0x02, 0xff, 0xfe, 0x00, 0x05};
  size_t n = make_idx(buf, 0x0B, 2, (const uint32_t[]){1, 3}, i16, 6);
  write_bytes(temp_path("i16"), buf, n, false);
  pd_tensor *t = pd_io_load_idx(temp_path("i16"));
  assert_int_equal(pd_tensor_dtype(t), PD_INT16);
  EXPECT_VALUES(t, 0, 258, -2, 5);
  const unsigned char i32[8] = {0, 1, 0, 0, 0xff, 0xff, 0xff, 0xff};
  n = make_idx(buf, 0x0C, 1, (const uint32_t[]){2}, i32, 8);
  write_bytes(temp_path("i32"), buf, n, true);
  EXPECT_VALUES(pd_io_load_idx(temp_path("i32")), 0, 65536, -1);
  const unsigned char f32[4] = {0x3f, 0xc0, 0, 0}; /* 1.5 */
  n = make_idx(buf, 0x0D, 1, (const uint32_t[]){1}, f32, 4);
  write_bytes(temp_path("f32"), buf, n, false);
  t = pd_io_load_idx(temp_path("f32"));
  assert_int_equal(pd_tensor_dtype(t), PD_FLOAT32);
  EXPECT_VALUES(t, 0, 1.5);
  const unsigned char f64[8] = {0xc0, 0x04, 0, 0, 0, 0, 0, 0}; /* -2.5 */
  n = make_idx(buf, 0x0E, 1, (const uint32_t[]){1}, f64, 8);
  write_bytes(temp_path("f64"), buf, n, false);
  EXPECT_VALUES(pd_io_load_idx(temp_path("f64")), 0, -2.5);
  const unsigned char i8[2] = {0x80, 0x7f};
  n = make_idx(buf, 0x09, 1, (const uint32_t[]){2}, i8, 2);
  write_bytes(temp_path("i8"), buf, n, false);
  EXPECT_VALUES(pd_io_load_idx(temp_path("i8")), 0, -128, 127);
  n = make_idx(buf, 0x08, 2, (const uint32_t[]){0, 5}, NULL, 0);
  write_bytes(temp_path("empty"), buf, n, false);
  expect_shape(pd_io_load_idx(temp_path("empty")), 2, SHAPE(0, 5));
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_broken_files(void **state) {
  (void)state;
  unsigned char buf[128];
  const uint8_t px[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  size_t n = make_idx(buf, 0x08, 3, (const uint32_t[]){2, 2, 2}, px, 8);
  for (int gz = 0; gz < 2; gz++) {
    /* every truncation is an error */
    for (size_t k = 0; k < n; k++) {
      write_bytes(temp_path("cut"), buf, k, gz);
      expect_error_msg(pd_io_load_idx(temp_path("cut")), "load_idx", "cut'");
    }
    /* trailing data */
    write_bytes(temp_path("long"), buf, n + 1, gz);
    expect_error_msg(pd_io_load_idx(temp_path("long")), "continues past the 8 bytes", NULL);
  }
  write_bytes(temp_path("cut"), buf, n - 3, false);
  expect_error_msg(pd_io_load_idx(temp_path("cut")), "5 bytes of data", "need 8 (truncated");
  /* a gzip stream cut in the middle */
  write_bytes(temp_path("full.gz"), buf, n, true);
  FILE *f = fopen(temp_path("full.gz"), "rb");
  unsigned char gzb[256];
  size_t gzn = fread(gzb, 1, sizeof gzb, f);
  fclose(f);
  write_bytes(temp_path("half.gz"), gzb, gzn - 6, false);
  expect_error_msg(pd_io_load_idx(temp_path("half.gz")), "half.gz", NULL);
  /* magic numbers */
  unsigned char bad[64];
  memcpy(bad, buf, n);
  bad[0] = 1;
  write_bytes(temp_path("m"), bad, n, false);
  expect_error_msg(pd_io_load_idx(temp_path("m")), "bad magic number 0x01000803", NULL);
  bad[0] = 0;
  bad[2] = 0x0A;
  write_bytes(temp_path("m"), bad, n, false);
  expect_error_msg(pd_io_load_idx(temp_path("m")), "bad magic number 0x00000a03", NULL);
  bad[2] = 0x08;
  bad[3] = 0;
  write_bytes(temp_path("m"), bad, n, false);
  expect_error_msg(pd_io_load_idx(temp_path("m")), "bad magic number 0x00000800", NULL);
  expect_error_msg(pd_io_load_idx(temp_path("nothing-here")), "cannot open", "nothing-here");
  /* no elements, but sizes whose product overflows int64: an empty tensor
   * of that shape would have strides that overflow, so it is an error (the
   * sanitizer build flagged the overflow before the check counted zeros) */
  const uint32_t huge = 0xffffffffu;
  n = make_idx(bad, 0x08, 4, (const uint32_t[]){0, huge, huge, huge}, NULL, 0);
  write_bytes(temp_path("zero-huge"), bad, n, false);
  expect_error_msg(pd_io_load_idx(temp_path("zero-huge")), "zero-huge",
                   "sizes [0, 4294967295, 4294967295, 4294967295] are too large");
  n = make_idx(bad, 0x0E, 3, (const uint32_t[]){huge, huge, 0}, NULL, 0);
  write_bytes(temp_path("zero-huge"), bad, n, true);
  expect_error_msg(pd_io_load_idx(temp_path("zero-huge")), "too large", NULL);
  /* the input the fuzz test found: eight sizes, the first 0 */
  n = make_idx(bad, 0x08, 8, (const uint32_t[]){0, 0x280803, 3, 2, 2, 0xff0a14, 0x1e28323c, 0x01020304}, NULL,
               0);
  assert_int_equal(n, 36);
  write_bytes(temp_path("zero-huge"), bad, n, false);
  expect_error_msg(pd_io_load_idx(temp_path("zero-huge")), "zero-huge", "are too large");
  /* while a product that fits is an empty tensor */
  n = make_idx(bad, 0x08, 3, (const uint32_t[]){0, huge, 1000}, NULL, 0);
  write_bytes(temp_path("zero-big"), bad, n, false);
  pd_tensor *zb = pd_io_load_idx(temp_path("zero-big"));
  expect_shape(zb, 3, SHAPE(0, 4294967295, 1000));
  pd_tensor_release(zb);
  /* MNIST: files swapped, counts that disagree */
  write_small_set(temp_path("a-im"), temp_path("a-lb"), false);
  expect_error_msg(pd_vision_datasets_mnist(&(pd_vision_datasets_mnist_opts){
                       .image_path = temp_path("a-lb"), .label_path = temp_path("a-im")}),
                   "not an idx3-ubyte image file", "magic number 0x00000801, want 0x00000803");
  const uint8_t two[2] = {1, 2};
  size_t ln = make_idx(bad, 0x08, 1, (const uint32_t[]){2}, two, 2);
  write_bytes(temp_path("two-lb"), bad, ln, false);
  expect_error_msg(pd_vision_datasets_mnist(&(pd_vision_datasets_mnist_opts){
                       .image_path = temp_path("a-im"), .label_path = temp_path("two-lb")}),
                   "holds 3 images", "holds 2 labels");
  expect_no_live_tensors();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fashion_mnist_test_set),
      cmocka_unit_test(test_small_files),
      cmocka_unit_test(test_other_idx_types),
      cmocka_unit_test(test_broken_files),
  };
  return cmocka_run_group_tests(tests, temp_dir_setup, temp_dir_teardown);
}
