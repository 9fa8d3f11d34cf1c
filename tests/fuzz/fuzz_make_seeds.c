/* Writes the seed files of the fuzz targets: valid inputs made by the
 * library's own writers (pd_save_with_metadata, pd_io_save_npy, pd_io_save_npz) plus
 * .npy variants they do not write (Fortran order, big-endian, format 2.0
 * and 3.0 headers, '=' byte order, Python 2 longs, double quotes, keys in
 * another order), idx files of each type (one gzipped), CSV tables and
 * Program files (pd_static_serialize_program of a small inference Program,
 * a training one with grad ops, SGD updates, a constant and an op under
 * device_guard, its startup Program (format version 1), and one with a
 * cond, a While block and a tensor array).
 * ctest runs it once before the fuzz tests:
 *
 *   fuzz_make_seeds DIR   ->  DIR/safetensors, DIR/npy (.npy and .npz), DIR/idx, DIR/csv,
 *                             DIR/program
 *
 * Everything is deterministic, so the fuzz runs are too. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "paddlec.h"

static int failed;

static void ok(pd_status st, const char *what) {
  if (st != PD_OK) {
    fprintf(stderr, "fuzz_make_seeds: %s: %s\n", what, pd_last_error());
    failed = 1;
  }
}

static char *path_of(const char *dir, const char *sub, const char *name) {
  static char p[4096];
  snprintf(p, sizeof p, "%s/%s/%s", dir, sub, name);
  return p;
}

/* A small tensor of any dtype from doubles. */
static pd_tensor *make(pd_dtype dt, int ndim, const int64_t *shape) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++) n *= shape[i];
  double v[64];
  for (int64_t i = 0; i < n && i < 64; i++) v[i] = dt == PD_BOOL ? (double)(i % 2) : 1.5 * (double)i - 3.0;
  return pd_tensor_from_f64(v, dt, ndim, shape);
}

static void safetensors_seeds(const char *dir) {
  /* every dtype, with metadata */
  {
    pd_named_tensors s = {0};
    char *names[PD_NUM_DTYPES];
    pd_tensor *ts[PD_NUM_DTYPES];
    for (int d = 0; d < PD_NUM_DTYPES; d++) {
      char n[32];
      snprintf(n, sizeof n, "t_%s", pd_dtype_name((pd_dtype)d));
      names[d] = strdup(n);
      ts[d] = make((pd_dtype)d, 1, (const int64_t[]){3});
    }
    s.n = PD_NUM_DTYPES;
    s.names = names;
    s.tensors = ts;
    pd_string_map meta = {0};
    pd_string_map_set(&meta, "format", "pt");
    pd_string_map_set(&meta, "note", "caf\xc3\xa9 \"quoted\" \\ tab\t");
    ok(pd_save_with_metadata(&s, path_of(dir, "safetensors", "dtypes_meta.safetensors"), &meta),
       "dtypes_meta");
    pd_string_map_free(&meta);
    for (int d = 0; d < PD_NUM_DTYPES; d++) {
      free(names[d]);
      pd_tensor_release(ts[d]);
    }
  }
  /* a 0-D scalar, an empty tensor, a 4-D one, a transposed view and odd names */
  {
    pd_tensor *base = make(PD_FLOAT32, 2, (const int64_t[]){2, 3});
    pd_tensor *ts[5] = {make(PD_FLOAT64, 0, NULL), make(PD_INT64, 2, (const int64_t[]){0, 3}),
                        make(PD_BFLOAT16, 4, (const int64_t[]){1, 2, 1, 2}), pd_t(base),
                        make(PD_UINT8, 1, (const int64_t[]){1})};
    char *names[5] = {"scalar", "empty", "four.d", "transposed", "ctl\x01\n\xe2\x82\xac"};
    pd_named_tensors s = {.n = 5, .names = names, .tensors = ts};
    ok(pd_save(&s, path_of(dir, "safetensors", "shapes.safetensors")), "shapes");
    for (int i = 0; i < 5; i++) pd_tensor_release(ts[i]);
    pd_tensor_release(base);
  }
  /* metadata only */
  {
    pd_named_tensors s = {0};
    pd_string_map meta = {0};
    pd_string_map_set(&meta, "a", "1");
    ok(pd_save_with_metadata(&s, path_of(dir, "safetensors", "meta_only.safetensors"), &meta), "meta_only");
    pd_string_map_free(&meta);
  }
}

/* A .npy with a header written by hand. */
static void raw_npy(const char *dir, const char *name, int major, const char *header, const void *data,
                    size_t n) {
  size_t pre = major == 1 ? 10 : 12, hl = strlen(header);
  size_t total = (pre + hl + 1 + 63) / 64 * 64, hlen = total - pre;
  unsigned char *b = calloc(1, total + n);
  if (!b) {
    failed = 1;
    return;
  }
  memcpy(b, "\x93NUMPY", 6);
  b[6] = (unsigned char)major;
  b[7] = 0;
  for (size_t i = 0; i < pre - 8; i++) b[8 + i] = (unsigned char)(hlen >> (8 * i));
  memcpy(b + pre, header, hl);
  memset(b + pre + hl, ' ', hlen - hl - 1);
  b[total - 1] = '\n';
  if (n) memcpy(b + total, data, n);
  FILE *f = fopen(path_of(dir, "npy", name), "wb");
  if (!f || fwrite(b, 1, total + n, f) != total + n) failed = 1;
  if (f && fclose(f) != 0) failed = 1;
  free(b);
}

static void npy_seeds(const char *dir) {
  static const struct {
    const char *name;
    pd_dtype dt;
    int ndim;
    int64_t shape[3];
  } k[] = {{"f32_2x3.npy", PD_FLOAT32, 2, {2, 3}}, {"i64_3.npy", PD_INT64, 1, {3}},
           {"bool_4.npy", PD_BOOL, 1, {4}},        {"f16_2.npy", PD_FLOAT16, 1, {2}},
           {"bf16_2.npy", PD_BFLOAT16, 1, {2}},    {"u8_scalar.npy", PD_UINT8, 0, {0}},
           {"f64_0x2.npy", PD_FLOAT64, 2, {0, 2}}, {"i32_2x0x3.npy", PD_INT32, 3, {2, 0, 3}},
           {"i8_1x2x2.npy", PD_INT8, 3, {1, 2, 2}}};
  pd_tensor *ts[sizeof k / sizeof k[0]];
  const char *names[sizeof k / sizeof k[0]];
  for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
    ts[i] = make(k[i].dt, k[i].ndim, k[i].shape);
    names[i] = k[i].name;
    ok(pd_io_save_npy(path_of(dir, "npy", k[i].name), ts[i]), k[i].name);
  }
  /* archives: two members stored, three deflated */
  ok(pd_io_save_npz(path_of(dir, "npy", "stored.npz"), names, ts, 2, false), "stored.npz");
  ok(pd_io_save_npz(path_of(dir, "npy", "deflated.npz"), names + 2, ts + 2, 3, true), "deflated.npz");
  for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) pd_tensor_release(ts[i]);
  const float f6[6] = {1, 2, 3, 4, 5, 6};
  const unsigned char be[8] = {0, 0, 0, 1, 0xff, 0xff, 0xff, 0xfe};
  const double d2[2] = {0.5, -2};
  raw_npy(dir, "fortran.npy", 1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", f6, sizeof f6);
  raw_npy(dir, "big_endian.npy", 1, "{'descr': '>i4', 'fortran_order': False, 'shape': (2,), }", be,
          sizeof be);
  raw_npy(dir, "v2.npy", 2, "{'descr': '=f8', 'fortran_order': False, 'shape': (2,), }", d2, sizeof d2);
  raw_npy(dir, "v3.npy", 3, "{\"shape\": (2L,), \"fortran_order\": False, \"descr\": \"<f8\"}", d2,
          sizeof d2);
  raw_npy(dir, "void2.npy", 1, "{'descr': '|V2', 'fortran_order': False, 'shape': (1, 1), }", "\x80\x3f", 2);
}

static void put_file(const char *path, const void *data, size_t n, bool gz) {
  if (gz) {
    gzFile f = gzopen(path, "wb9");
    if (!f || gzwrite(f, data, (unsigned)n) != (int)n) failed = 1;
    if (f && gzclose(f) != Z_OK) failed = 1;
    return;
  }
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(data, 1, n, f) != n) failed = 1;
  if (f && fclose(f) != 0) failed = 1;
}

/* An idx file: magic 0 0 type ndim, big-endian sizes, then the data. */
static void idx(const char *dir, const char *name, int type, int ndim, const uint32_t *dims, const void *data,
                size_t n, bool gz) {
  unsigned char b[256];
  size_t k = 0;
  b[k++] = 0;
  b[k++] = 0;
  b[k++] = (unsigned char)type;
  b[k++] = (unsigned char)ndim;
  for (int i = 0; i < ndim; i++)
    for (int s = 24; s >= 0; s -= 8) b[k++] = (unsigned char)(dims[i] >> s);
  if (n) memcpy(b + k, data, n);
  put_file(path_of(dir, "idx", name), b, k + n, gz);
}

static void idx_seeds(const char *dir) {
  const uint8_t px[12] = {0, 255, 10, 20, 30, 40, 50, 60, 1, 2, 3, 4};
  idx(dir, "images_u8", 0x08, 3, (const uint32_t[]){3, 2, 2}, px, sizeof px, false);
  idx(dir, "images_u8.gz", 0x08, 3, (const uint32_t[]){3, 2, 2}, px, sizeof px, true);
  idx(dir, "labels_u8", 0x08, 1, (const uint32_t[]){3}, px, 3, false);
  idx(dir, "i8", 0x09, 1, (const uint32_t[]){2}, "\x80\x7f", 2, false);
  idx(dir, "i16", 0x0B, 2, (const uint32_t[]){1, 2}, "\x12\x34\xff\xfe", 4, false);
  idx(dir, "i32", 0x0C, 1, (const uint32_t[]){1}, "\x00\x01\x00\x00", 4, false);
  idx(dir, "f32", 0x0D, 1, (const uint32_t[]){1}, "\x3f\xc0\x00\x00", 4, false);
  idx(dir, "f64", 0x0E, 1, (const uint32_t[]){1}, "\xc0\x04\x00\x00\x00\x00\x00\x00", 8, false);
  idx(dir, "empty", 0x08, 2, (const uint32_t[]){0, 5}, NULL, 0, false);
}

static void csv_seeds(const char *dir) {
  static const struct {
    const char *name, *text;
  } k[] = {
      {"plain.csv", "1,2,3\n4,5,6\n"},
      {"header.csv", "a,b\n1.5,-2e3\n0x1p3, 7 \n"},
      {"crlf_blank.csv", "1;2\r\n\r\n\t3 ; 4\r\n"},
      {"special.csv", "inf,-inf,nan\n1e308,-0,4.9e-324\n"},
      {"one.csv", "42"},
  };
  for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
    put_file(path_of(dir, "csv", k[i].name), k[i].text, strlen(k[i].text), false);
}

static void put_program(const char *dir, const char *name, const pd_program *p) {
  size_t n;
  char *text = pd_static_serialize_program(p, &n);
  if (!text) {
    fprintf(stderr, "fuzz_make_seeds: %s: %s\n", name, pd_last_error());
    failed = 1;
    return;
  }
  put_file(path_of(dir, "program", name), text, n, false);
  free(text);
}

static int seed_square(void *user, pd_tensor **out, int cap) {
  (void)cap;
  out[0] = pd_multiply(user, user);
  return out[0] ? 1 : -1;
}
static int seed_neg(void *user, pd_tensor **out, int cap) {
  (void)cap;
  out[0] = pd_neg(user);
  return out[0] ? 1 : -1;
}

/* Control flow: a cond with its gradient, and a While block filling a
 * tensor array that is stacked afterwards. */
static void control_flow_seed(const char *dir) {
  pd_program *main = pd_static_program(), *startup = pd_static_program();
  ok(pd_static_program_guard_begin(main, startup), "program_guard");
  pd_tensor *x = pd_static_data("x", 1, (int64_t[]){1}, PD_FLOAT32);
  pd_tensor_set_stop_gradient(x, false);
  pd_tensor *zero = pd_full(1, (int64_t[]){1}, 0, PD_FLOAT32), *pred = pd_greater_than(x, zero), *y = NULL;
  if (pd_static_nn_cond(pred, seed_square, seed_neg, x, &y, 1) != 1) ok(pd_last_status(), "cond");
  pd_tensor *gx = NULL;
  ok(pd_static_gradients(&y, 1, &x, 1, NULL, NULL, 0, &gx), "gradients");
  pd_tensor *i = pd_full(1, (int64_t[]){1}, 0, PD_INT64), *n = pd_full(1, (int64_t[]){1}, 3, PD_INT64);
  pd_tensor *arr = pd_create_array(PD_FLOAT32, NULL, 0), *cond = pd_less_than(i, n);
  ok(pd_static_while_begin(cond), "While");
  pd_tensor *w = pd_array_write(y, i, arr), *i1 = pd_increment(i, 1);
  ok(pd_static_assign_to(i1, i), "assign i");
  pd_tensor *c = pd_less_than(i, n);
  ok(pd_static_assign_to(c, cond), "assign cond");
  ok(pd_static_while_end(), "While end");
  pd_tensor *idx = NULL, *stacked = pd_tensor_array_to_tensor(arr, 0, true, &idx),
            *len = pd_array_length(arr);
  ok(pd_static_program_guard_end(), "program_guard_end");
  put_program(dir, "control_flow.json", main);
  pd_tensor *ts[] = {x, zero, pred, y, gx, i, n, arr, cond, w, i1, c, idx, stacked, len};
  for (size_t k = 0; k < sizeof ts / sizeof *ts; k++) pd_tensor_release(ts[k]);
  pd_program_release(main);
  pd_program_release(startup);
}

static void program_seeds(const char *dir) {
  const int64_t xs[2] = {-1, 2}, ys[2] = {-1, 1};
  pd_tensor *half = pd_tensor_from_f64((double[]){0.5}, PD_FLOAT32, 1, (int64_t[]){1});
  pd_program *main = pd_static_program(), *startup = pd_static_program();
  ok(pd_static_program_guard_begin(main, startup), "program_guard");
  pd_tensor *x = pd_static_data("x", 2, xs, PD_FLOAT32);
  pd_tensor *y = pd_static_data("y", 2, ys, PD_FLOAT32);
  ok(pd_static_device_guard_begin("cpu"), "device_guard"); /* op_device: format version 3 */
  pd_tensor *hx = pd_multiply(x, half);
  ok(pd_static_device_guard_end(), "device_guard_end");
  pd_tensor *pred = pd_static_nn_fc(hx, 1, 1, "relu");
  pd_program *infer = pd_program_clone(main, true);
  pd_tensor *cost = pd_square_error_cost(pred, y);
  pd_tensor *loss = pd_mean(cost, NULL, 0, false);
  pd_optimizer *sgd = pd_optimizer_sgd(0.1, NULL, 0, NULL);
  ok(pd_optimizer_minimize(sgd, loss), "minimize");
  ok(pd_static_program_guard_end(), "program_guard_end");
  put_program(dir, "infer.json", infer);
  put_program(dir, "train.json", main);
  put_program(dir, "startup.json", startup);
  pd_tensor *ts[] = {half, x, y, hx, pred, cost, loss};
  for (size_t i = 0; i < sizeof ts / sizeof *ts; i++) pd_tensor_release(ts[i]);
  pd_optimizer_release(sgd);
  pd_program_release(infer);
  pd_program_release(main);
  pd_program_release(startup);
  control_flow_seed(dir);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: fuzz_make_seeds DIR\n");
    return 2;
  }
  const char *subs[] = {"", "/safetensors", "/npy", "/idx", "/csv", "/program"};
  for (int i = 0; i < 6; i++) {
    char p[4096];
    snprintf(p, sizeof p, "%s%s", argv[1], subs[i]);
    if (mkdir(p, 0777) != 0 && errno != EEXIST) {
      fprintf(stderr, "fuzz_make_seeds: cannot create '%s': %s\n", p, strerror(errno));
      return 1;
    }
    /* the files of an earlier run go: the seed set (and so the iteration
     * numbers of the fuzz runs) is exactly what this program writes */
    DIR *d = i ? opendir(p) : NULL;
    for (struct dirent *e; d && (e = readdir(d));) {
      char f[4352];
      snprintf(f, sizeof f, "%s/%s", p, e->d_name);
      if (e->d_name[0] != '.') unlink(f);
    }
    if (d) closedir(d);
  }
  safetensors_seeds(argv[1]);
  npy_seeds(argv[1]);
  idx_seeds(argv[1]);
  csv_seeds(argv[1]);
  program_seeds(argv[1]);
  return failed;
}
