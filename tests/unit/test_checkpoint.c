/* Checkpoints in safetensors: round trips of every dtype, files written
 * byte by byte from the format's description, the header of a saved file
 * parsed by hand, atomic saves under injected failures and SIGKILL, and a
 * loader that refuses every truncated, flipped or lying file cleanly. */
#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "io/checkpoint_internal.h"
#include "linear_net.h"
#include "temp_dir.h"
#include "test_util.h"

/* The temporary files of saves to p in its directory: "<name>.tmp.<pid>.<n>"
 * (only those of process pid when pid > 0). Returns their count; the path
 * of the first goes to first (when not NULL). */
static int find_temps(const char *p, long pid, char *first, size_t cap) {
  const char *slash = strrchr(p, '/');
  char dir[256], prefix[300];
  snprintf(dir, sizeof dir, "%.*s", (int)(slash - p), p);
  if (pid > 0)
    snprintf(prefix, sizeof prefix, "%s.tmp.%ld.", slash + 1, pid);
  else
    snprintf(prefix, sizeof prefix, "%s.tmp.", slash + 1);
  DIR *d = opendir(dir);
  assert_non_null(d);
  int n = 0;
  for (struct dirent *e; (e = readdir(d));) {
    if (strncmp(e->d_name, prefix, strlen(prefix)) != 0) continue;
    if (n++ == 0 && first && snprintf(first, cap, "%s/%s", dir, e->d_name) >= (int)cap)
      fail_msg("path of %s too long", e->d_name);
  }
  closedir(d);
  return n;
}

static unsigned char *read_file(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) fail_msg("cannot open %s", path);
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *b = malloc((size_t)len + 1);
  assert_non_null(b);
  assert_int_equal(fread(b, 1, (size_t)len, f), (size_t)len);
  fclose(f);
  *n = (size_t)len;
  return b;
}

static void write_file(const char *path, const void *data, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f) fail_msg("cannot create %s", path);
  assert_int_equal(fwrite(data, 1, n, f), n);
  fclose(f);
}

/* A safetensors image: 8-byte little-endian length, the header, the data. */
static unsigned char *make_image(const char *header, const void *data, size_t ndata, size_t *n) {
  size_t h = strlen(header);
  unsigned char *b = malloc(8 + h + ndata + 1);
  assert_non_null(b);
  for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)h >> (8 * i));
  memcpy(b + 8, header, h);
  if (ndata) memcpy(b + 8 + h, data, ndata);
  *n = 8 + h + ndata;
  return b;
}

/* Loads an image from memory and expects failure with both fragments. */
static void expect_load_error(const char *header, const void *data, size_t ndata, pd_status code,
                              const char *f1, const char *f2) {
  size_t n;
  unsigned char *b = make_image(header, data, ndata, &n);
  pd_named_tensors out;
  pd_status st = pd_load_buffer(b, n, "bad.safetensors", &out, NULL);
  if (st == PD_OK) fail_msg("header %s loaded", header);
  if (code) assert_int_equal(st, code);
  assert_int_equal(out.n, 0);
  assert_null(out.names);
  const char *m = pd_last_error();
  if (!strstr(m, "bad.safetensors")) fail_msg("error '%s' does not name the file", m);
  if (f1 && !strstr(m, f1)) fail_msg("error '%s' lacks '%s'", m, f1);
  if (f2 && !strstr(m, f2)) fail_msg("error '%s' lacks '%s'", m, f2);
  pd_clear_error();
  free(b);
}

static pd_tensor *filled(pd_dtype dt, int ndim, const int64_t *shape, unsigned seed) {
  pd_tensor *t = pd_empty(ndim, shape, dt);
  assert_non_null(t);
  unsigned char *p = pd_tensor_data(t);
  size_t n = (size_t)pd_tensor_numel(t) * pd_dtype_size(dt);
  uint32_t s = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; i++) {
    s = s * 1664525u + 1013904223u;
    p[i] = (unsigned char)(s >> 24);
    if (dt == PD_BOOL) p[i] &= 1;
  }
  return t;
}

static void expect_same_bytes(const pd_tensor *a, const pd_tensor *b) {
  assert_int_equal(pd_tensor_dtype(a), pd_tensor_dtype(b));
  expect_shape(a, pd_tensor_ndim(b), pd_tensor_shape(b));
  size_t n = (size_t)pd_tensor_numel(a) * pd_dtype_size(pd_tensor_dtype(a));
  if (n) assert_memory_equal(pd_tensor_data(a), pd_tensor_data(b), n);
}

/* Every dtype, bit for bit (NaN payloads, -0, subnormals included: the bytes
 * are random), 0-d and empty shapes, a transposed view saved row-major. */
static void test_roundtrip_every_dtype(void **state) {
  (void)state;
  pd_scope_begin();
  static const char *names[] = {"bool", "u8",  "i8",  "i16",    "i32",   "i64",       "f16",
                                "bf16", "f32", "f64", "scalar", "empty", "transposed"};
  enum { N = 13 };
  pd_tensor *ts[N];
  for (int d = 0; d < PD_NUM_DTYPES; d++) ts[d] = filled((pd_dtype)d, 2, SHAPE(3, 5), (unsigned)d + 1);
  ts[10] = filled(PD_FLOAT64, 0, NULL, 99);
  ts[11] = filled(PD_FLOAT32, 3, SHAPE(2, 0, 4), 5);
  pd_tensor *base = T(PD_FLOAT32, 2, SHAPE(2, 3), 1, 2, 3, 4, 5, 6);
  ts[12] = pd_transpose(base, 2, SHAPE(1, 0));
  assert_false(pd_tensor_is_contiguous(ts[12]));
  pd_named_tensors sd = {N, (char **)names, ts};
  const char *p = temp_path("all.safetensors");
  assert_int_equal(pd_save(&sd, p), PD_OK);
  pd_named_tensors out;
  pd_string_map meta;
  assert_int_equal(pd_load_with_metadata(p, &out, &meta), PD_OK);
  assert_int_equal(out.n, N);
  for (int i = 0; i < 12; i++) {
    assert_string_equal(out.names[i], names[i]);
    expect_same_bytes(out.tensors[i], ts[i]);
  }
  assert_string_equal(out.names[12], "transposed");
  expect_shape(out.tensors[12], 2, SHAPE(3, 2));
  assert_true(pd_tensor_is_contiguous(out.tensors[12]));
  EXPECT_VALUES(out.tensors[12], 0, 1, 4, 2, 5, 3, 6);
  assert_int_equal(meta.n, 1);
  assert_string_equal(pd_string_map_get(&meta, "format"), "paddle.c");
  /* the loaded tensors are the caller's, not the scope's */
  pd_scope_end();
  expect_same_bytes(out.tensors[0], out.tensors[0]);
  pd_state_free(&out);
  pd_string_map_free(&meta);
  assert_int_equal(out.n, 0);
  expect_no_live_tensors();
}

static void test_metadata_and_empty_state(void **state) {
  (void)state;
  pd_string_map meta = {0};
  assert_int_equal(pd_string_map_set(&meta, "kind", "optimizer"), PD_OK);
  assert_int_equal(pd_string_map_set(&meta, "format", "pt"), PD_OK);
  assert_int_equal(pd_string_map_set(&meta, "note", "quote \" backslash \\ newline \n tab \t \x01 \xc3\xa9"),
                   PD_OK);
  assert_int_equal(pd_string_map_set(&meta, "kind", "layer"), PD_OK); /* replaces */
  assert_int_equal(meta.n, 3);
  pd_named_tensors empty = {0};
  const char *p = temp_path("empty.safetensors");
  assert_int_equal(pd_save_with_metadata(&empty, p, &meta), PD_OK);
  pd_named_tensors out;
  pd_string_map got;
  assert_int_equal(pd_load_with_metadata(p, &out, &got), PD_OK);
  assert_int_equal(out.n, 0);
  assert_int_equal(got.n, 3);
  assert_string_equal(pd_string_map_get(&got, "format"), "pt");
  assert_string_equal(pd_string_map_get(&got, "kind"), "layer");
  assert_string_equal(pd_string_map_get(&got, "note"), pd_string_map_get(&meta, "note"));
  assert_null(pd_string_map_get(&got, "missing"));
  pd_string_map_free(&got);
  pd_string_map_free(&meta);
  /* the exact bytes of an empty file with default metadata */
  assert_int_equal(pd_save(&empty, p), PD_OK);
  size_t n;
  unsigned char *b = read_file(p, &n);
  const char *want = "{\"__metadata__\":{\"format\":\"paddle.c\"}}  "; /* 38 + 2 */
  assert_int_equal(n, 8 + strlen(want));
  assert_int_equal(b[0], strlen(want));
  for (int i = 1; i < 8; i++) assert_int_equal(b[i], 0);
  assert_memory_equal(b + 8, want, strlen(want));
  free(b);
  expect_no_live_tensors();
}

static uint16_t rd16(const unsigned char *p) { return (uint16_t)(p[0] | p[1] << 8); }

/* A file built by hand from the format's description: this is also, byte
 * for byte, what the reference implementation (Python's safetensors) writes
 * for {"idx": int64 [7, -1, 2^40], "d": float64 3.25, "w": float32
 * [[1.5, -2], [0.25, 3]], "h": float16 [1, -0.5], "m": bool [1, 0, 1]} with
 * metadata {"format": "np"}: tensors ordered by dtype size then name, header
 * padded with spaces to a multiple of 8. */
static void test_reference_file_loads(void **state) {
  (void)state;
  const char *header =
      "{\"__metadata__\":{\"format\":\"np\"},"
      "\"idx\":{\"dtype\":\"I64\",\"shape\":[3],\"data_offsets\":[0,24]},"
      "\"d\":{\"dtype\":\"F64\",\"shape\":[],\"data_offsets\":[24,32]},"
      "\"w\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[32,48]},"
      "\"h\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[48,52]},"
      "\"m\":{\"dtype\":\"BOOL\",\"shape\":[3],\"data_offsets\":[52,55]}}  ";
  assert_int_equal(strlen(header), 312);
  static const unsigned char data[55] = {7,    0,    0,    0,    0,    0,    0,    0,    /* 7 */
                                         0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, /* -1 */
                                         0,    0,    0,    0,    0,    1,    0,    0,    /* 2^40 */
                                         0,    0,    0,    0,    0,    0,    0x0a, 0x40, /* 3.25 */
                                         0,    0,    0xc0, 0x3f, 0,    0,    0,    0xc0,
                                         0,    0,    0x80, 0x3e, 0,    0,    0x40, 0x40, /* 1.5 -2 .25 3 */
                                         0,    0x3c, 0,    0xb8,                         /* 1.0 -0.5 (f16) */
                                         1,    0,    1};
  size_t n;
  unsigned char *img = make_image(header, data, sizeof data, &n);
  assert_int_equal(n, 375);
  const char *p = temp_path("reference.safetensors");
  write_file(p, img, n);
  pd_named_tensors out;
  pd_string_map meta;
  assert_int_equal(pd_load_with_metadata(p, &out, &meta), PD_OK);
  assert_int_equal(out.n, 5);
  static const char *order[] = {"idx", "d", "w", "h", "m"};
  for (int i = 0; i < 5; i++) assert_string_equal(out.names[i], order[i]);
  assert_int_equal(pd_tensor_dtype(out.tensors[0]), PD_INT64);
  expect_shape(out.tensors[0], 1, SHAPE(3));
  const int64_t *iv = pd_tensor_data(out.tensors[0]);
  assert_true(iv[0] == 7 && iv[1] == -1 && iv[2] == (int64_t)1 << 40);
  assert_int_equal(pd_tensor_ndim(out.tensors[1]), 0);
  assert_true(*(const double *)pd_tensor_data(out.tensors[1]) == 3.25);
  expect_shape(out.tensors[2], 2, SHAPE(2, 2));
  EXPECT_VALUES(out.tensors[2], 0, 1.5, -2, 0.25, 3);
  assert_int_equal(pd_tensor_dtype(out.tensors[3]), PD_FLOAT16);
  const unsigned char *hb = pd_tensor_data(out.tensors[3]);
  assert_int_equal(rd16(hb), 0x3c00);
  assert_int_equal(rd16(hb + 2), 0xb800);
  assert_int_equal(pd_tensor_dtype(out.tensors[4]), PD_BOOL);
  EXPECT_VALUES(out.tensors[4], 0, 1, 0, 1);
  assert_string_equal(pd_string_map_get(&meta, "format"), "np");
  pd_state_free(&out);
  pd_string_map_free(&meta);
  free(img);

  /* unpadded, pretty-printed, keys in any order, no metadata, BF16 and
   * nonzero bool bytes (read as true) */
  const char *pretty =
      "{\n  \"b\" : { \"shape\" : [ 2 ], \"data_offsets\" : [ 2, 6 ], \"dtype\" : \"BF16\" },\n"
      "\t\"a\": {\"dtype\": \"BOOL\", \"shape\": [2], \"data_offsets\": [0, 2]}\r\n}";
  static const unsigned char d2[6] = {0, 7, 0x80, 0x3f, 0x40, 0xc0}; /* bf16 1.0, -3.0 */
  img = make_image(pretty, d2, sizeof d2, &n);
  assert_int_equal(pd_load_buffer(img, n, NULL, &out, NULL), PD_OK);
  assert_int_equal(out.n, 2);
  assert_string_equal(out.names[0], "a");
  EXPECT_VALUES(out.tensors[0], 0, 0, 1);
  assert_int_equal(((const unsigned char *)pd_tensor_data(out.tensors[0]))[1], 1);
  assert_int_equal(pd_tensor_dtype(out.tensors[1]), PD_BFLOAT16);
  EXPECT_VALUES(out.tensors[1], 0, 1, -3);
  pd_state_free(&out);
  free(img);
  expect_no_live_tensors();
}

/* The header of a saved file, parsed by hand. */
static void test_saved_header_by_hand(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *w = T(PD_FLOAT32, 2, SHAPE(2, 3), 1, 2, 3, 4, 5, -6.5);
  pd_tensor *b = T(PD_FLOAT64, 1, SHAPE(3), 0.5, -1, 1e300);
  pd_tensor *e = T(PD_INT8, 1, SHAPE(0), 0);
  static const char *names[] = {"w", "b\"q", "e"};
  pd_named_tensors sd = {3, (char **)names, (pd_tensor *[]){w, b, e}};
  const char *p = temp_path("hand.safetensors");
  assert_int_equal(pd_save(&sd, p), PD_OK);
  size_t n;
  unsigned char *f = read_file(p, &n);
  uint64_t hlen = 0;
  for (int i = 7; i >= 0; i--) hlen = hlen << 8 | f[i];
  assert_int_equal(hlen % 8, 0);
  const char *want =
      "{\"__metadata__\":{\"format\":\"paddle.c\"},"
      "\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
      "\"b\\\"q\":{\"dtype\":\"F64\",\"shape\":[3],\"data_offsets\":[24,48]},"
      "\"e\":{\"dtype\":\"I8\",\"shape\":[0],\"data_offsets\":[48,48]}}";
  size_t wl = strlen(want);
  assert_true(hlen >= wl && hlen < wl + 8);
  assert_memory_equal(f + 8, want, wl);
  for (size_t i = wl; i < hlen; i++) assert_int_equal(f[8 + i], ' ');
  assert_int_equal(n, 8 + hlen + 48);
  float fw[6] = {1, 2, 3, 4, 5, -6.5f};
  double fb[3] = {0.5, -1, 1e300};
  assert_memory_equal(f + 8 + hlen, fw, 24);
  assert_memory_equal(f + 8 + hlen + 24, fb, 24);
  /* no temporary file is left behind */
  assert_int_equal(find_temps(p, 0, NULL, 0), 0);
  free(f);
  pd_scope_end();
  expect_no_live_tensors();
}

static void test_save_errors(void **state) {
  (void)state;
  pd_scope_begin();
  pd_tensor *a = T(PD_FLOAT32, 1, SHAPE(2), 1, 2);
  pd_named_tensors dup = {2, (char *[]){"x", "x"}, (pd_tensor *[]){a, a}};
  assert_int_equal(pd_save(&dup, temp_path("e.safetensors")), PD_ERR_INVALID);
  expect_error(NULL, "duplicate tensor name 'x'", "e.safetensors");
  pd_named_tensors meta_name = {1, (char *[]){"__metadata__"}, (pd_tensor *[]){a}};
  assert_int_equal(pd_save(&meta_name, temp_path("e.safetensors")), PD_ERR_INVALID);
  expect_error(NULL, "'__metadata__' is reserved", NULL);
  pd_named_tensors null_t = {1, (char *[]){"y"}, (pd_tensor *[]){NULL}};
  assert_int_equal(pd_save(&null_t, temp_path("e.safetensors")), PD_ERR_INVALID);
  expect_error(NULL, "tensor 'y' is NULL", NULL);
  pd_named_tensors bad_utf8 = {1, (char *[]){"\xff"}, (pd_tensor *[]){a}};
  assert_int_equal(pd_save(&bad_utf8, temp_path("e.safetensors")), PD_ERR_INVALID);
  expect_error(NULL, "not valid UTF-8", NULL);
  pd_named_tensors ok = {1, (char *[]){"a"}, (pd_tensor *[]){a}};
  assert_int_equal(pd_save(&ok, "/nonexistent_dir_pd/x.safetensors"), PD_ERR_IO);
  expect_error(NULL, "/nonexistent_dir_pd/x.safetensors", "cannot create");
  assert_int_equal(pd_save(NULL, "x"), PD_ERR_INVALID);
  expect_error(NULL, "save", "state is NULL");
  assert_int_equal(pd_save(&ok, ""), PD_ERR_INVALID);
  expect_error(NULL, "save", "path");
  pd_string_map m = {0};
  pd_string_map_set(&m, "k", "\xc3");
  assert_int_equal(pd_save_with_metadata(&ok, temp_path("e.safetensors"), &m), PD_ERR_INVALID);
  expect_error(NULL, "metadata value", "UTF-8");
  pd_string_map_free(&m);
  struct stat sb;
  assert_int_not_equal(stat(temp_path("e.safetensors"), &sb), 0); /* nothing was written */
  pd_scope_end();
  expect_no_live_tensors();
}

/* ---- crash safety ----------------------------------------------------------------- */
static void save_pair(const char *p, double v, int64_t n) {
  pd_tensor *a = pd_full(1, SHAPE(n), v, PD_FLOAT32);
  pd_tensor *b = pd_full(1, SHAPE(3), -v, PD_FLOAT64);
  pd_named_tensors sd = {2, (char *[]){"a", "b"}, (pd_tensor *[]){a, b}};
  assert_int_equal(pd_save(&sd, p), PD_OK);
  pd_tensor_release(a);
  pd_tensor_release(b);
}

/* The file at p is a whole checkpoint written by save_pair; returns its v. */
static double check_pair(const char *p) {
  pd_named_tensors out;
  if (pd_load(p, &out) != PD_OK) fail_msg("checkpoint is not loadable: %s", pd_last_error());
  assert_int_equal(out.n, 2);
  double v = pd_tensor_item_at(out.tensors[0], 0);
  int64_t n = pd_tensor_numel(out.tensors[0]);
  const float *a = pd_tensor_data(out.tensors[0]);
  for (int64_t i = 0; i < n; i++)
    if (a[i] != (float)v) fail_msg("element %lld is %g, not %g", (long long)i, a[i], v);
  EXPECT_VALUES(out.tensors[1], 0, -v, -v, -v);
  pd_state_free(&out);
  return v;
}

static void test_injected_failure_keeps_previous(void **state) {
  (void)state;
  const char *p = temp_path("inject.safetensors");
  save_pair(p, 1.0, 1000);
  struct stat sb;
  assert_int_equal(stat(p, &sb), 0);
  pd_tensor *a = pd_full(1, SHAPE(1000), 2.0, PD_FLOAT32);
  pd_named_tensors sd = {1, (char *[]){"a"}, (pd_tensor *[]){a}};
  pd_safetensors_inject(PD_ST_INJECT_FAIL, sb.st_size / 2);
  assert_int_equal(pd_save(&sd, p), PD_ERR_IO);
  pd_safetensors_inject(PD_ST_INJECT_NONE, 0);
  expect_error(NULL, "inject.safetensors", "injected failure");
  assert_int_equal(find_temps(p, 0, NULL, 0), 0); /* the error path removed it */
  assert_true(check_pair(p) == 1.0);
  pd_tensor_release(a);
  expect_no_live_tensors();
}

/* A child dies (SIGKILL, from the test hook) after writing half of the new
 * checkpoint: the previous one is intact and loadable. */
static void test_killed_half_way_keeps_previous(void **state) {
  (void)state;
  const char *p = temp_path("killed.safetensors");
  save_pair(p, 1.0, 4096);
  struct stat sb;
  assert_int_equal(stat(p, &sb), 0);
  int64_t half = sb.st_size / 2;
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    pd_safetensors_inject(PD_ST_INJECT_KILL, half);
    pd_tensor *a = pd_full(1, SHAPE(4096), 2.0, PD_FLOAT32);
    pd_tensor *b = pd_full(1, SHAPE(3), -2.0, PD_FLOAT64);
    pd_named_tensors sd = {2, (char *[]){"a", "b"}, (pd_tensor *[]){a, b}};
    pd_save(&sd, p);
    _exit(3); /* not reached */
  }
  int status;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFSIGNALED(status));
  assert_int_equal(WTERMSIG(status), SIGKILL);
  char tmp[300];
  assert_int_equal(find_temps(p, pid, tmp, sizeof tmp), 1);
  assert_int_equal(stat(tmp, &sb), 0); /* the half-written temporary */
  assert_int_equal(sb.st_size, half);
  pd_named_tensors out;
  assert_int_not_equal(pd_load(tmp, &out), PD_OK); /* which is not a checkpoint */
  pd_clear_error();
  unlink(tmp);
  assert_true(check_pair(p) == 1.0);
  expect_no_live_tensors();
}

/* A child saving a large checkpoint over and over is killed with SIGKILL in
 * the middle of a write: the file is then the old checkpoint or the new one,
 * whole, never a mix. */
static void test_sigkill_during_large_save(void **state) {
  (void)state;
  const char *p = temp_path("large.safetensors");
  save_pair(p, 1.0, 16);
  enum { BIG = 4 << 20 }; /* 16 MiB of float32 */
  pd_tensor *a = pd_full(1, SHAPE(BIG), 2.0, PD_FLOAT32);
  pd_tensor *b = pd_full(1, SHAPE(3), -2.0, PD_FLOAT64);
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    pd_named_tensors sd = {2, (char *[]){"a", "b"}, (pd_tensor *[]){a, b}};
    for (;;)
      if (pd_save(&sd, p) != PD_OK) _exit(4);
  }
  char tmp[300];
  /* wait until a temporary holds part of the data, then kill */
  struct timespec t0, now, nap = {0, 100000};
  clock_gettime(CLOCK_MONOTONIC, &t0);
  struct stat sb;
  int seen_partial = 0;
  for (;;) {
    if (find_temps(p, pid, tmp, sizeof tmp) > 0 && stat(tmp, &sb) == 0 && sb.st_size > 0 &&
        sb.st_size < (off_t)BIG * 4) {
      seen_partial = 1;
      break;
    }
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (now.tv_sec - t0.tv_sec > 20) break;
    nanosleep(&nap, NULL);
  }
  kill(pid, SIGKILL);
  int status;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  assert_true(seen_partial);
  while (find_temps(p, pid, tmp, sizeof tmp) > 0) unlink(tmp);
  double v = check_pair(p);
  assert_true(v == 1.0 || v == 2.0);
  pd_tensor_release(a);
  pd_tensor_release(b);
  expect_no_live_tensors();
}

/* Threads of one process save different checkpoints to the same path at
 * once, several times each: every save succeeds, the file is then exactly
 * one of their checkpoints, and no temporary file is left. (With one
 * temporary name per process they wrote into one file: saves failed and the
 * result could mix them.) */
enum { SAVERS = 6, SAVES_EACH = 6 };
typedef struct saver {
  const char *path;
  pd_named_tensors state;
  pthread_barrier_t *start;
  int failures;
} saver;

static void *saver_main(void *arg) {
  saver *s = arg;
  pthread_barrier_wait(s->start);
  for (int k = 0; k < SAVES_EACH; k++)
    if (pd_save(&s->state, s->path) != PD_OK) s->failures++;
  return NULL;
}

static void test_concurrent_saves_to_one_path(void **state) {
  (void)state;
  const char *p = temp_path("shared.safetensors");
  saver sv[SAVERS];
  pd_tensor *ts[SAVERS][2];
  pthread_t th[SAVERS];
  pthread_barrier_t start;
  assert_int_equal(pthread_barrier_init(&start, NULL, SAVERS), 0);
  static char *names[2] = {"a", "b"};
  for (int i = 0; i < SAVERS; i++) {
    /* checkpoint i: a = 1000 + 4099 i values of i + 1, b = three of -(i + 1) (as save_pair writes) */
    ts[i][0] = pd_full(1, SHAPE(1000 + 4099 * i), i + 1.0, PD_FLOAT32);
    ts[i][1] = pd_full(1, SHAPE(3), -(i + 1.0), PD_FLOAT64);
    sv[i] = (saver){.path = p, .state = {2, names, ts[i]}, .start = &start};
  }
  for (int i = 0; i < SAVERS; i++) assert_int_equal(pthread_create(&th[i], NULL, saver_main, &sv[i]), 0);
  for (int i = 0; i < SAVERS; i++) assert_int_equal(pthread_join(th[i], NULL), 0);
  pthread_barrier_destroy(&start);
  for (int i = 0; i < SAVERS; i++) assert_int_equal(sv[i].failures, 0);
  /* exactly one of the checkpoints, whole: values and size agree */
  double v = check_pair(p);
  int which = (int)v - 1;
  assert_true(which >= 0 && which < SAVERS && v == which + 1.0);
  pd_named_tensors out;
  assert_int_equal(pd_load(p, &out), PD_OK);
  assert_int_equal(pd_tensor_numel(out.tensors[0]), 1000 + 4099 * which);
  pd_state_free(&out);
  assert_int_equal(find_temps(p, 0, NULL, 0), 0);
  for (int i = 0; i < SAVERS; i++) {
    pd_tensor_release(ts[i][0]);
    pd_tensor_release(ts[i][1]);
  }
  expect_no_live_tensors();
}

/* A temporary name already taken (say, left by a crashed process whose pid
 * came back) is skipped: O_EXCL, then the next name; the file there is not
 * touched. */
static void test_save_skips_taken_temp_names(void **state) {
  (void)state;
  const char *p = temp_path("taken.safetensors");
  save_pair(p, 1.0, 8);
  /* the number the next save of this process will use: a forked child has
   * the same counter; killed half way, it leaves its temporary behind */
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    pd_safetensors_inject(PD_ST_INJECT_KILL, 16);
    save_pair(p, 2.0, 8);
    _exit(3);
  }
  int status;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  char tmp[300];
  assert_int_equal(find_temps(p, pid, tmp, sizeof tmp), 1);
  unsigned long long next = strtoull(strrchr(tmp, '.') + 1, NULL, 10);
  unlink(tmp);
  /* take that name and the four after it */
  char taken[5][300];
  for (int k = 0; k < 5; k++) {
    snprintf(taken[k], sizeof taken[k], "%s.tmp.%ld.%llu", p, (long)getpid(), next + (unsigned long long)k);
    write_file(taken[k], "keep", 4);
  }
  save_pair(p, 3.0, 8);
  assert_true(check_pair(p) == 3.0);
  for (int k = 0; k < 5; k++) {
    size_t n;
    unsigned char *b = read_file(taken[k], &n);
    assert_int_equal(n, 4);
    assert_memory_equal(b, "keep", 4);
    free(b);
    unlink(taken[k]);
  }
  assert_int_equal(find_temps(p, 0, NULL, 0), 0);
  expect_no_live_tensors();
}

/* Temporaries of killed saves do not pile up: the next save to the path
 * removes those whose process is gone and keeps those of live processes,
 * other paths' and names that merely look alike. */
static void test_save_removes_dead_temps(void **state) {
  (void)state;
  const char *p = temp_path("stale.safetensors");
  fflush(NULL);
  pid_t dead = fork(); /* a pid that is surely gone once reaped */
  assert_true(dead >= 0);
  if (dead == 0) _exit(0);
  assert_int_equal(waitpid(dead, NULL, 0), dead);
  char dead_tmp[300], dead_tmp2[300], live_tmp[300], other[300], odd[4][300];
  snprintf(dead_tmp, sizeof dead_tmp, "%s.tmp.%ld.0", p, (long)dead);
  snprintf(dead_tmp2, sizeof dead_tmp2, "%s.tmp.%ld.17", p, (long)dead);
  snprintf(live_tmp, sizeof live_tmp, "%s.tmp.%ld.999999", p, (long)getpid());
  snprintf(other, sizeof other, "%s.tmp.%ld.0", temp_path("other.safetensors"), (long)dead);
  snprintf(odd[0], sizeof odd[0], "%s.tmp.%ld.0.bak", p, (long)dead);
  snprintf(odd[1], sizeof odd[1], "%s.tmp.%ldx.0", p, (long)dead);
  snprintf(odd[2], sizeof odd[2], "%s.tmp.%ld.", p, (long)dead);
  snprintf(odd[3], sizeof odd[3], "x%s.tmp.%ld.0", strrchr(p, '/') + 1, (long)dead);
  char odd3[400];
  snprintf(odd3, sizeof odd3, "%s/%s", temp_dir(), odd[3]);
  write_file(dead_tmp, "dead", 4);
  write_file(dead_tmp2, "dead", 4);
  write_file(live_tmp, "live", 4);
  write_file(other, "othr", 4);
  for (int k = 0; k < 3; k++) write_file(odd[k], "oddd", 4);
  write_file(odd3, "oddd", 4);
  save_pair(p, 4.0, 8);
  assert_true(check_pair(p) == 4.0);
  struct stat sb;
  assert_int_equal(stat(dead_tmp, &sb), -1);
  assert_int_equal(stat(dead_tmp2, &sb), -1);
  assert_int_equal(stat(live_tmp, &sb), 0);
  assert_int_equal(stat(other, &sb), 0);
  for (int k = 0; k < 3; k++) assert_int_equal(stat(odd[k], &sb), 0);
  assert_int_equal(stat(odd3, &sb), 0);
  /* a save with a relative path cleans the same way */
  char cwd[512];
  assert_non_null(getcwd(cwd, sizeof cwd));
  assert_int_equal(chdir(temp_dir()), 0);
  char rel_dead[300];
  snprintf(rel_dead, sizeof rel_dead, "stale.safetensors.tmp.%ld.3", (long)dead);
  write_file(rel_dead, "dead", 4);
  save_pair("stale.safetensors", 5.0, 8);
  assert_int_equal(stat(rel_dead, &sb), -1);
  assert_int_equal(chdir(cwd), 0);
  assert_true(check_pair(p) == 5.0);
  unlink(live_tmp);
  unlink(other);
  for (int k = 0; k < 3; k++) unlink(odd[k]);
  unlink(odd3);
  expect_no_live_tensors();
}

/* ---- corruption ----------------------------------------------------------------- */
static unsigned char *small_valid_image(size_t *n) {
  pd_tensor *a = T(PD_FLOAT32, 2, SHAPE(2, 2), 1, 2, 3, 4);
  pd_tensor *b = T(PD_INT64, 1, SHAPE(3), 5, 6, 7);
  pd_tensor *c = T(PD_BOOL, 1, SHAPE(0), 0);
  pd_tensor *d = T(PD_FLOAT16, 0, NULL, 1.5);
  pd_named_tensors sd = {4, (char *[]){"a", "b", "c", "d"}, (pd_tensor *[]){a, b, c, d}};
  const char *p = temp_path("small.safetensors");
  assert_int_equal(pd_save(&sd, p), PD_OK);
  pd_tensor_release(a);
  pd_tensor_release(b);
  pd_tensor_release(c);
  pd_tensor_release(d);
  return read_file(p, n);
}

static void test_truncated_at_every_byte(void **state) {
  (void)state;
  size_t n;
  unsigned char *img = small_valid_image(&n);
  const char *p = temp_path("truncated.safetensors");
  for (size_t k = 0; k < n; k++) {
    write_file(p, img, k);
    pd_named_tensors out;
    pd_status st = pd_load(p, &out);
    if (st == PD_OK) fail_msg("a file cut to %zu of %zu bytes loaded", k, n);
    assert_int_equal(out.n, 0);
    if (!strstr(pd_last_error(), "truncated.safetensors"))
      fail_msg("'%s' does not name the file", pd_last_error());
    pd_clear_error();
    assert_int_not_equal(pd_load_buffer(img, k, NULL, &out, NULL), PD_OK);
    pd_clear_error();
  }
  write_file(p, img, n);
  pd_named_tensors out;
  assert_int_equal(pd_load(p, &out), PD_OK);
  assert_int_equal(out.n, 4);
  pd_state_free(&out);
  /* one byte too many */
  unsigned char *longer = malloc(n + 1);
  memcpy(longer, img, n);
  longer[n] = 0;
  assert_int_not_equal(pd_load_buffer(longer, n + 1, "long", &out, NULL), PD_OK);
  expect_error(NULL, "long", "cover");
  free(longer);
  free(img);
  expect_no_live_tensors();
}

/* Every byte of the length and header changed several ways: each load
 * either fails with a message or gives valid tensors; never a crash. */
static void test_flipped_header_bytes(void **state) {
  (void)state;
  size_t n;
  unsigned char *img = small_valid_image(&n);
  uint64_t hlen = 0;
  for (int i = 7; i >= 0; i--) hlen = hlen << 8 | img[i];
  static const unsigned char masks[] = {0x01, 0x02, 0x10, 0x80, 0xff};
  static const unsigned char sets[] = {'"', '{', '}', '[', ']', ',', ':', '0', '9', '-', ' ', 0, 'e', '\\'};
  int failures = 0, loads = 0;
  unsigned char *c = malloc(n);
  for (size_t i = 0; i < 8 + hlen; i++) {
    for (size_t m = 0; m < sizeof masks + sizeof sets; m++) {
      memcpy(c, img, n);
      if (m < sizeof masks)
        c[i] ^= masks[m];
      else
        c[i] = sets[m - sizeof masks];
      if (c[i] == img[i]) continue;
      pd_named_tensors out;
      pd_status st = pd_load_buffer(c, n, "flipped", &out, NULL);
      if (st == PD_OK) {
        loads++;
        for (int k = 0; k < out.n; k++) assert_non_null(out.tensors[k]);
        pd_state_free(&out);
      } else {
        failures++;
        assert_int_equal(out.n, 0);
        if (!strstr(pd_last_error(), "flipped")) fail_msg("'%s' does not name the buffer", pd_last_error());
        pd_clear_error();
      }
    }
  }
  assert_true(failures > 1000);
  assert_true(loads > 0); /* e.g. a changed name or a metadata letter */
  free(c);
  free(img);
  expect_no_live_tensors();
}

static void test_lying_header_lengths(void **state) {
  (void)state;
  size_t n;
  unsigned char *img = small_valid_image(&n);
  uint64_t hlen = 0;
  for (int i = 7; i >= 0; i--) hlen = hlen << 8 | img[i];
  static const uint64_t lies[] = {UINT64_MAX, (uint64_t)1 << 63, PD_SAFETENSORS_MAX_HEADER + 1, 0, 1};
  const char *frags[] = {"over the limit", "over the limit", "over the limit", "does not start",
                         "does not start"};
  pd_named_tensors out;
  for (size_t k = 0; k < sizeof lies / sizeof lies[0]; k++) {
    for (int i = 0; i < 8; i++) img[i] = (unsigned char)(lies[k] >> (8 * i));
    assert_int_not_equal(pd_load_buffer(img, n, "liar", &out, NULL), PD_OK);
    expect_error(NULL, "liar", frags[k]);
  }
  /* within the limit but past the end of the file; and a few bytes off */
  uint64_t past[] = {n - 7, n, PD_SAFETENSORS_MAX_HEADER};
  for (size_t k = 0; k < 3; k++) {
    for (int i = 0; i < 8; i++) img[i] = (unsigned char)(past[k] >> (8 * i));
    assert_int_not_equal(pd_load_buffer(img, n, "liar", &out, NULL), PD_OK);
    expect_error(NULL, "liar", "past the end of the file");
  }
  uint64_t off[] = {hlen - 1, hlen - 8, hlen + 1, hlen + 8};
  for (size_t k = 0; k < 4; k++) {
    for (int i = 0; i < 8; i++) img[i] = (unsigned char)(off[k] >> (8 * i));
    assert_int_not_equal(pd_load_buffer(img, n, "liar", &out, NULL), PD_OK);
    expect_error(NULL, "liar", NULL);
  }
  free(img);
  /* files too short for the length itself, missing files, directories */
  assert_int_not_equal(pd_load_buffer("\x02\0\0", 3, "tiny", &out, NULL), PD_OK);
  expect_error(NULL, "tiny", "too short");
  assert_int_equal(pd_load(temp_path("does_not_exist"), &out), PD_ERR_IO);
  expect_error(NULL, "does_not_exist", "cannot open");
  assert_int_equal(pd_load(temp_dir(), &out), PD_ERR_IO);
  expect_error(NULL, temp_dir(), "not a regular file");
  assert_int_equal(pd_load(NULL, &out), PD_ERR_INVALID);
  expect_error(NULL, "load", "path is NULL");
  expect_no_live_tensors();
}

static void test_bad_offsets(void **state) {
  (void)state;
  unsigned char z[64] = {0};
  expect_load_error(
      "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
      "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
      z, 12, PD_ERR_INVALID, "overlap", "'b'");
  expect_load_error(
      "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
      "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}",
      z, 12, PD_ERR_INVALID, "belong to no tensor", "[4, 8)");
  expect_load_error("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", z, 8, PD_ERR_INVALID,
                    "cover 4 bytes", "has 8");
  expect_load_error("{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", z, 8, PD_ERR_INVALID,
                    "past the end of the data", "'a'");
  expect_load_error("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", z, 8, PD_ERR_INVALID,
                    "end before they begin", NULL);
  expect_load_error("{\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,20]}}", z, 20,
                    PD_ERR_INVALID, "needs 24 bytes", "span 20");
  expect_load_error(
      "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
      "\"b\":{\"dtype\":\"I8\",\"shape\":[1],\"data_offsets\":[4,5]},"
      "\"a\":{\"dtype\":\"I8\",\"shape\":[1],\"data_offsets\":[5,6]}}",
      z, 6, PD_ERR_INVALID, "duplicate tensor name 'a'", NULL);
  expect_load_error("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,4]}}", z, 4,
                    PD_ERR_INVALID, "data_offsets", "pair");
  expect_load_error("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,-4]}}", z, 4, PD_ERR_INVALID,
                    "data_offsets", NULL);
  /* several empty tensors at one offset are fine */
  size_t n;
  unsigned char *img = make_image(
      "{\"e1\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[4,4]},"
      "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
      "\"e2\":{\"dtype\":\"I64\",\"shape\":[3,0],\"data_offsets\":[4,4]}}",
      z, 4, &n);
  pd_named_tensors out;
  assert_int_equal(pd_load_buffer(img, n, NULL, &out, NULL), PD_OK);
  assert_int_equal(out.n, 3);
  assert_string_equal(out.names[0], "a");
  assert_string_equal(out.names[1], "e1");
  assert_string_equal(out.names[2], "e2");
  expect_shape(out.tensors[2], 2, SHAPE(3, 0));
  pd_state_free(&out);
  free(img);
  expect_no_live_tensors();
}

static void test_overflowing_shapes(void **state) {
  (void)state;
  unsigned char z[8] = {0};
  /* 2^40 * 2^40 overflows uint64; 2^31 * 2^31 * 2 = 2^63 is past int64;
   * 2^61 elements of 8 bytes overflow the byte count */
  expect_load_error(
      "{\"a\":{\"dtype\":\"F32\",\"shape\":[1099511627776,1099511627776],\"data_offsets\":[0,0]}}", z, 0,
      PD_ERR_INVALID, "overflows int64", "[1099511627776, 1099511627776]");
  expect_load_error("{\"a\":{\"dtype\":\"U8\",\"shape\":[2147483648,2147483648,2],\"data_offsets\":[0,0]}}",
                    z, 0, PD_ERR_INVALID, "overflows", NULL);
  expect_load_error("{\"a\":{\"dtype\":\"I64\",\"shape\":[4194304,4194304,131072],\"data_offsets\":[0,8]}}",
                    z, 8, PD_ERR_INVALID, "overflows", NULL);
  /* even with a zero dim, the strides of such a shape would overflow */
  expect_load_error(
      "{\"a\":{\"dtype\":\"F32\",\"shape\":[0,1099511627776,1099511627776],\"data_offsets\":[0,0]}}", z, 0,
      PD_ERR_INVALID, "overflows", NULL);
  /* dims past 2^53 cannot be represented exactly */
  expect_load_error("{\"a\":{\"dtype\":\"F32\",\"shape\":[9223372036854775807],\"data_offsets\":[0,0]}}", z,
                    0, PD_ERR_INVALID, "shape[0]", "2^53");
  expect_load_error("{\"a\":{\"dtype\":\"F32\",\"shape\":[1e400],\"data_offsets\":[0,0]}}", z, 0,
                    PD_ERR_INVALID, "shape[0]", NULL);
  expect_load_error("{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,0]}}", z, 0, PD_ERR_INVALID,
                    "shape[0]", NULL);
  expect_load_error("{\"a\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,0]}}", z, 0,
                    PD_ERR_INVALID, "shape[0]", NULL);
  expect_load_error("{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", z,
                    4, PD_ERR_INVALID, "10 dims", NULL);
  expect_no_live_tensors();
}

static void test_malformed_headers(void **state) {
  (void)state;
  unsigned char z[8] = {0};
  expect_load_error("[1, 2]  ", NULL, 0, PD_ERR_INVALID, "does not start with '{'", NULL);
  expect_load_error("{\"a\":", NULL, 0, PD_ERR_INVALID, "not valid JSON", NULL);
  expect_load_error("{}x", NULL, 0, PD_ERR_INVALID, "after its JSON object", NULL);
  expect_load_error("{} {}", NULL, 0, PD_ERR_INVALID, "after its JSON object", NULL);
  expect_load_error("{\"a\":1}", NULL, 0, PD_ERR_INVALID, "'a' is not a JSON object", NULL);
  expect_load_error("{\"a\":{\"shape\":[1],\"data_offsets\":[0,4]}}", z, 4, PD_ERR_INVALID, "lacks \"dtype\"",
                    NULL);
  expect_load_error("{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", z, 4, PD_ERR_INVALID,
                    "lacks \"shape\"", NULL);
  expect_load_error("{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", z, 4, PD_ERR_INVALID,
                    "lacks \"data_offsets\"", NULL);
  expect_load_error("{\"a\":{\"dtype\":\"U16\",\"shape\":[1],\"data_offsets\":[0,2]}}", z, 2, PD_ERR_DTYPE,
                    "U16", "does not support");
  expect_load_error("{\"a\":{\"dtype\":\"float32\",\"shape\":[1],\"data_offsets\":[0,4]}}", z, 4,
                    PD_ERR_INVALID, "unknown dtype", "float32");
  expect_load_error("{\"a\":{\"dtype\":32,\"shape\":[1],\"data_offsets\":[0,4]}}", z, 4, PD_ERR_INVALID,
                    "dtype is not a string", NULL);
  expect_load_error("{\"a\":{\"dtype\":\"F32\",\"shape\":4,\"data_offsets\":[0,4]}}", z, 4, PD_ERR_INVALID,
                    "shape is not an array", NULL);
  expect_load_error("{\"__metadata__\":{\"k\":1}}", NULL, 0, PD_ERR_INVALID, "value of 'k' is not a string",
                    NULL);
  expect_load_error("{\"__metadata__\":[]}", NULL, 0, PD_ERR_INVALID, "__metadata__ is not a JSON object",
                    NULL);
  expect_load_error("{\"__metadata__\":{},\"__metadata__\":{}}", NULL, 0, PD_ERR_INVALID,
                    "duplicate __metadata__", NULL);
  expect_load_error("{\"__metadata__\":{\"k\":\"a\",\"k\":\"b\"}}", NULL, 0, PD_ERR_INVALID,
                    "duplicate __metadata__ key 'k'", NULL);
  expect_load_error("{\"a\x01\":{}}", NULL, 0, PD_ERR_INVALID, "control byte 0x01", NULL);
  expect_load_error("{\"\xc3\x28\":{}}", NULL, 0, PD_ERR_INVALID, "UTF-8", NULL);
  expect_load_error("{\"\xed\xa0\x80\":{}}", NULL, 0, PD_ERR_INVALID, "UTF-8", NULL); /* a surrogate */
  /* deep nesting is refused by the parser, not the stack */
  char deep[4200];
  size_t k = 0;
  deep[k++] = '{';
  memcpy(deep + k, "\"a\":", 4);
  k += 4;
  for (int i = 0; i < 2000; i++) deep[k++] = '[';
  for (int i = 0; i < 2000; i++) deep[k++] = ']';
  deep[k++] = '}';
  deep[k] = 0;
  expect_load_error(deep, NULL, 0, PD_ERR_INVALID, "not valid JSON", NULL);
  expect_no_live_tensors();
}

/* ---- layers ---------------------------------------------------------------------- */
static void expect_same_params(pd_layer *a, pd_layer *b) {
  pd_named_tensors x, y;
  assert_int_equal(pd_layer_state_dict(a, &x), PD_OK);
  assert_int_equal(pd_layer_state_dict(b, &y), PD_OK);
  assert_int_equal(x.n, y.n);
  for (int i = 0; i < x.n; i++) {
    assert_string_equal(x.names[i], y.names[i]);
    expect_same_bytes(x.tensors[i], y.tensors[i]);
  }
  pd_named_tensors_free(&x);
  pd_named_tensors_free(&y);
}

static void test_layer_save_load(void **state) {
  (void)state;
  pd_seed(3);
  linear_net *a = linear_net_new(), *b = linear_net_new();
  const char *p = temp_path("net.safetensors");
  assert_int_equal(pd_layer_save(&a->base, p), PD_OK);
  pd_named_tensors file;
  pd_string_map meta;
  assert_int_equal(pd_load_with_metadata(p, &file, &meta), PD_OK);
  assert_int_equal(file.n, 4);
  assert_string_equal(file.names[0], "linear1.weight");
  assert_string_equal(file.names[3], "linear2.bias");
  assert_string_equal(pd_string_map_get(&meta, "kind"), "layer");
  assert_string_equal(pd_string_map_get(&meta, "format"), "paddle.c");
  pd_state_free(&file);
  pd_string_map_free(&meta);
  assert_int_equal(pd_layer_load(&b->base, p, true), PD_OK);
  expect_same_params(&a->base, &b->base);
  /* the loaded layer computes the same function */
  pd_scope_begin();
  pd_tensor *x = pd_randn(2, SHAPE(3, 10), PD_FLOAT32);
  expect_close(pd_layer_call1(&b->base, x), pd_layer_call1(&a->base, x), 0, 0);
  pd_scope_end();

  /* strict: a file with extra and missing keys changes nothing */
  pd_tensor *w = pd_layer_parameter(a->linear1, "weight");
  pd_named_tensors odd = {2, (char *[]){"linear1.weight", "extra.bias"}, (pd_tensor *[]){w, w}};
  const char *q = temp_path("odd.safetensors");
  assert_int_equal(pd_save(&odd, q), PD_OK);
  linear_net *c = linear_net_new();
  pd_named_tensors before;
  assert_int_equal(pd_layer_state_dict(&c->base, &before), PD_OK);
  pd_tensor *w_before = pd_clone(before.tensors[0], PD_NUM_DTYPES);
  assert_int_equal(pd_layer_load(&c->base, q, true), PD_ERR_INVALID);
  expect_error(NULL, "odd.safetensors", "missing keys: 'linear1.bias', 'linear2.weight', 'linear2.bias'");
  assert_int_equal(pd_layer_load(&c->base, q, true), PD_ERR_INVALID);
  expect_error(NULL, "unexpected keys: 'extra.bias'", NULL);
  expect_same_bytes(before.tensors[0], w_before);
  /* not strict: the matching entry is loaded, the rest ignored */
  assert_int_equal(pd_layer_load(&c->base, q, false), PD_OK);
  expect_same_bytes(pd_layer_parameter(c->linear1, "weight"), w);
  pd_named_tensors_free(&before);
  pd_tensor_release(w_before);

  /* shape mismatch: both shapes named */
  linear_net *d = linear_net_with_hidden(7);
  assert_int_equal(pd_layer_load(&d->base, p, true), PD_ERR_SHAPE);
  expect_error(NULL, "net.safetensors", "[10, 10]");
  /* a corrupt file: the loader's error */
  unsigned char junk[16] = {1};
  write_file(q, junk, sizeof junk);
  assert_int_not_equal(pd_layer_load(&d->base, q, false), PD_OK);
  expect_error(NULL, "odd.safetensors", NULL);
  assert_int_equal(pd_layer_load(NULL, q, false), PD_ERR_INVALID);
  expect_error(NULL, "layer_load", "NULL");
  assert_int_equal(pd_layer_save(NULL, q), PD_ERR_INVALID);
  expect_error(NULL, "layer_save", "NULL");
  pd_layer_release(&a->base);
  pd_layer_release(&b->base);
  pd_layer_release(&c->base);
  pd_layer_release(&d->base);
  expect_no_live_tensors();
}

/* Shared weights (an LSTM holds its cells' tensors under its own names):
 * the file has every path, as Paddle's state dict; a file with one name per
 * tensor (either one) still loads strictly, nothing missing. */
static void test_shared_weights_save_load(void **state) {
  (void)state;
  pd_seed(5);
  pd_layer *a = pd_nn_lstm(3, 4, NULL), *b = pd_nn_lstm(3, 4, NULL);
  const char *p = temp_path("lstm.safetensors");
  assert_int_equal(pd_layer_save(a, p), PD_OK);
  pd_named_tensors file;
  assert_int_equal(pd_load(p, &file), PD_OK);
  assert_int_equal(file.n, 8);
  assert_string_equal(file.names[0], "weight_ih_l0");
  assert_string_equal(file.names[4], "0.cell.weight_ih");
  expect_same_bytes(file.tensors[0], file.tensors[4]);
  assert_int_equal(pd_layer_load(b, p, true), PD_OK);
  expect_same_params(a, b);
  /* one name per tensor: the LSTM's names alone, then the cell's alone */
  const char *q = temp_path("lstm_half.safetensors");
  for (int half = 0; half < 2; half++) {
    pd_layer *c = pd_nn_lstm(3, 4, NULL);
    pd_named_tensors part = {4, file.names + 4 * half, file.tensors + 4 * half};
    assert_int_equal(pd_save(&part, q), PD_OK);
    assert_int_equal(pd_layer_load(c, q, true), PD_OK);
    expect_same_params(a, c);
    pd_layer_release(c);
  }
  /* a tensor under neither name is missing under both */
  pd_layer *d = pd_nn_lstm(3, 4, NULL);
  pd_named_tensors three = {3, file.names, file.tensors};
  assert_int_equal(pd_save(&three, q), PD_OK);
  assert_int_equal(pd_layer_load(d, q, true), PD_ERR_INVALID);
  expect_error(NULL, "missing keys: 'bias_hh_l0', '0.cell.bias_hh'", NULL);
  pd_state_free(&file);
  pd_layer_release(a);
  pd_layer_release(b);
  pd_layer_release(d);
  expect_no_live_tensors();
}

/* Optimizer-style state: a float64 layer saved and loaded into float32
 * (set_state_dict converts), and int64 step counters kept exactly. */
static void test_dtype_conversion_on_layer_load(void **state) {
  (void)state;
  pd_nn_linear_opts o = {.dtype = PD_FLOAT64};
  pd_layer *a = pd_nn_linear(3, 2, &o), *b = pd_nn_linear(3, 2, NULL);
  const char *p = temp_path("f64.safetensors");
  assert_int_equal(pd_layer_save(a, p), PD_OK);
  assert_int_equal(pd_layer_load(b, p, true), PD_OK);
  pd_tensor *wa = pd_layer_parameter(a, "weight"), *wb = pd_layer_parameter(b, "weight");
  assert_int_equal(pd_tensor_dtype(wb), PD_FLOAT32);
  for (int i = 0; i < 6; i++) assert_true((float)pd_tensor_item_at(wa, i) == (float)pd_tensor_item_at(wb, i));
  pd_layer_release(a);
  pd_layer_release(b);
  pd_tensor *step = T(PD_INT64, 0, NULL, 0);
  *(int64_t *)pd_tensor_data(step) = INT64_MAX - 5;
  pd_named_tensors sd = {1, (char *[]){"step"}, (pd_tensor *[]){step}};
  assert_int_equal(pd_save(&sd, p), PD_OK);
  pd_named_tensors out;
  assert_int_equal(pd_load(p, &out), PD_OK);
  assert_true(*(int64_t *)pd_tensor_data(out.tensors[0]) == INT64_MAX - 5);
  pd_state_free(&out);
  pd_tensor_release(step);
  expect_no_live_tensors();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_roundtrip_every_dtype),
      cmocka_unit_test(test_metadata_and_empty_state),
      cmocka_unit_test(test_reference_file_loads),
      cmocka_unit_test(test_saved_header_by_hand),
      cmocka_unit_test(test_save_errors),
      cmocka_unit_test(test_injected_failure_keeps_previous),
      cmocka_unit_test(test_killed_half_way_keeps_previous),
      cmocka_unit_test(test_sigkill_during_large_save),
      cmocka_unit_test(test_concurrent_saves_to_one_path),
      cmocka_unit_test(test_save_skips_taken_temp_names),
      cmocka_unit_test(test_save_removes_dead_temps),
      cmocka_unit_test(test_truncated_at_every_byte),
      cmocka_unit_test(test_flipped_header_bytes),
      cmocka_unit_test(test_lying_header_lengths),
      cmocka_unit_test(test_bad_offsets),
      cmocka_unit_test(test_overflowing_shapes),
      cmocka_unit_test(test_malformed_headers),
      cmocka_unit_test(test_layer_save_load),
      cmocka_unit_test(test_shared_weights_save_load),
      cmocka_unit_test(test_dtype_conversion_on_layer_load),
  };
  return cmocka_run_group_tests(tests, temp_dir_setup, temp_dir_teardown);
}
