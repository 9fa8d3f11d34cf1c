/* Distributed checkpoints: saved on 4 processes as dp2 x mp2 (even and
 * uneven shards, a Partial value, a dense one), loaded on 2 processes with
 * other placements and on 1 process: the values are equal. A missing or
 * corrupt file is an error naming it; a writer killed mid-save leaves the
 * previous checkpoint whole. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/tensor_impl.h"
#include "dist_ranks.h"
#include "io/checkpoint_internal.h"
#include "paddlec/auto_parallel.h"
#include "paddlec/dist_checkpoint.h"
#include "test_util.h"

static char g_dir[256];

static void run_ranks(int n, int (*fn)(int rank)) { dist_run_ranks_or_fail(n, fn, 120); }

/* The global values: distinct per element and per key, exact in every
 * dtype used. */
enum { N_KEYS = 6 };
static const char *k_keys[N_KEYS] = {"w1", "w2", "b", "p", "step", "ids"};
static const int k_ndim[N_KEYS] = {2, 2, 1, 2, 0, 2};
static const int64_t k_shape[N_KEYS][2] = {{6, 5}, {7, 4}, {5, 0}, {3, 3}, {0, 0}, {4, 3}};
static const pd_dtype k_dtype[N_KEYS] = {PD_FLOAT32, PD_FLOAT32, PD_FLOAT32, PD_FLOAT64, PD_INT64, PD_INT64};

static pd_tensor *global_value(int k, pd_dtype dt) {
  int64_t n = 1;
  for (int d = 0; d < k_ndim[k]; d++) n *= k_shape[k][d];
  double *v = malloc((size_t)n * sizeof *v);
  for (int64_t i = 0; i < n; i++) v[i] = 100.0 * k + (double)i * (k_dtype[k] == PD_INT64 ? 3 : 0.5);
  pd_tensor *t = pd_tensor_from_f64(v, dt, k_ndim[k], k_shape[k]);
  free(v);
  return t;
}

static bool same_values(pd_tensor *a, pd_tensor *b) {
  if (!a || !b || a->ndim != b->ndim || !pd_shape_eq(a->ndim, a->shape, b->shape)) return false;
  pd_tensor *ca = pd_contiguous(pd_cast(a, PD_FLOAT64)), *cb = pd_contiguous(pd_cast(b, PD_FLOAT64));
  return ca && cb && memcmp(pd_tensor_data(ca), pd_tensor_data(cb), (size_t)ca->numel * 8) == 0;
}

/* ---- save on 4 processes: mesh [[0, 1], [2, 3]] (dp, mp) ---------------- */
static int rank_save(int rank) {
  pd_dist_process_mesh *m =
      pd_dist_process_mesh_new(2, SHAPE(2, 2), (const int[]){0, 1, 2, 3}, (const char *[]){"dp", "mp"});
  DIST_CHECK(m, 1);
  pd_dist_placement pl[N_KEYS][2] = {
      {pd_dist_replicate(), pd_dist_shard(1)}, /* w1: 5 columns over 2, uneven */
      {pd_dist_shard(0), pd_dist_shard(1)},    /* w2: 7 rows over 2, uneven */
      {pd_dist_replicate(), pd_dist_replicate()},
      {pd_dist_partial(PD_REDUCE_SUM), pd_dist_partial(PD_REDUCE_SUM)},
      {pd_dist_replicate(), pd_dist_replicate()}, /* step: dense */
      {pd_dist_shard(0), pd_dist_replicate()},
  };
  pd_named_tensors sd = {N_KEYS, (char **)k_keys, calloc(N_KEYS, sizeof(pd_tensor *))};
  for (int k = 0; k < N_KEYS; k++) {
    pd_tensor *g = global_value(k, k_dtype[k]);
    if (k == 3) { /* Partial: every rank holds a quarter */
      pd_tensor *q = pd_scale(g, 0.25, 0, true);
      sd.tensors[k] = pd_dist_dtensor_from_local(q, m, pl[k], 2);
    } else if (k == 4) {
      sd.tensors[k] = g;
    } else {
      sd.tensors[k] = pd_dist_shard_tensor(g, m, pl[k], 2);
    }
    DIST_CHECK(sd.tensors[k], 2);
  }
  DIST_CHECK(pd_dist_save_state_dict(&sd, g_dir) == PD_OK, 3);
  /* a second save replaces the first: one generation of files remains */
  DIST_CHECK(pd_dist_save_state_dict(&sd, g_dir) == PD_OK, 4);
  free(sd.tensors);
  pd_dist_process_mesh_release(m);
  return 0;
}

/* ---- load on 2 processes: mesh [0, 1] (mp), other placements ---------- */
static int rank_load_two(int rank) {
  pd_dist_process_mesh *m =
      pd_dist_process_mesh_new(1, SHAPE(2), (const int[]){0, 1}, (const char *[]){"mp"});
  pd_dist_placement pl[N_KEYS] = {pd_dist_shard(0),    pd_dist_shard(1),    pd_dist_shard(0),
                                  pd_dist_replicate(), pd_dist_replicate(), pd_dist_shard(1)};
  pd_named_tensors sd = {N_KEYS, (char **)k_keys, calloc(N_KEYS, sizeof(pd_tensor *))};
  for (int k = 0; k < N_KEYS; k++) {
    /* zeros of the right global shape; ids loaded into float32 (converted) */
    pd_dtype dt = k == 5 ? PD_FLOAT32 : k_dtype[k];
    pd_tensor *z = pd_zeros(k_ndim[k], k_shape[k], dt);
    sd.tensors[k] = k == 4 ? z : pd_dist_shard_tensor(z, m, &pl[k], 1);
    DIST_CHECK(sd.tensors[k], 1);
  }
  DIST_CHECK(pd_dist_load_state_dict(&sd, g_dir) == PD_OK, 2);
  for (int k = 0; k < N_KEYS; k++) {
    pd_tensor *got = pd_dist_unshard_dtensor(sd.tensors[k]);
    if (!same_values(got, global_value(k, k_dtype[k]))) {
      fprintf(stderr, "rank %d: '%s' differs after loading on 2 ranks\n", rank, k_keys[k]);
      return 10 + k;
    }
  }
  /* the shards are the tensors' own storage: a parameter sees them */
  DIST_CHECK(pd_tensor_numel(sd.tensors[0]) == 3 * 5, 3);
  free(sd.tensors);
  pd_dist_process_mesh_release(m);
  return 0;
}

static void make_dir(void) {
  snprintf(g_dir, sizeof g_dir, "/tmp/pd_distcp_XXXXXX");
  assert_non_null(mkdtemp(g_dir));
}

static void remove_dir(void) {
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
  assert_int_equal(system(cmd), 0);
}

static int count_files(const char *suffix) {
  char cmd[400];
  snprintf(cmd, sizeof cmd, "ls '%s' | grep -c '%s$'", g_dir, suffix);
  FILE *f = popen(cmd, "r");
  int n = -1;
  if (f && fscanf(f, "%d", &n) != 1) n = -1;
  if (f) pclose(f);
  return n;
}

/* ---- load on 1 process: dense tensors ----------------------------------- */
static void load_one_process(void) {
  pd_scope_begin();
  pd_named_tensors sd = {N_KEYS, (char **)k_keys, calloc(N_KEYS, sizeof(pd_tensor *))};
  for (int k = 0; k < N_KEYS; k++) sd.tensors[k] = pd_zeros(k_ndim[k], k_shape[k], k_dtype[k]);
  assert_int_equal(pd_dist_load_state_dict(&sd, g_dir), PD_OK);
  for (int k = 0; k < N_KEYS; k++)
    if (!same_values(sd.tensors[k], global_value(k, k_dtype[k])))
      fail_msg("'%s' differs after loading on one process", k_keys[k]);
  free(sd.tensors);
  pd_scope_end();
}

static void test_save_four_load_two_and_one(void **state) {
  (void)state;
  make_dir();
  run_ranks(4, rank_save);
  assert_int_equal(count_files(".distcp"), 4);
  assert_int_equal(count_files("_2.distcp"), 4); /* the first save's files are gone */
  run_ranks(2, rank_load_two);
  load_one_process();
  remove_dir();
}

/* ---- one process: errors and crash safety --------------------------------- */
static void expect_msg(const char *a, const char *b) {
  if (!strstr(pd_last_error(), a) || (b && !strstr(pd_last_error(), b)))
    fail_msg("error '%s' lacks '%s' / '%s'", pd_last_error(), a, b ? b : "");
}

static pd_status save_one(double v) {
  pd_tensor *t = pd_full(2, SHAPE(2, 3), v, PD_FLOAT32);
  pd_named_tensors sd = {1, (char *[]){"w"}, (pd_tensor *[]){t}};
  return pd_dist_save_state_dict(&sd, g_dir);
}

static double load_one(pd_status *st) {
  pd_tensor *t = pd_zeros(2, SHAPE(2, 3), PD_FLOAT32);
  pd_named_tensors sd = {1, (char *[]){"w"}, (pd_tensor *[]){t}};
  *st = pd_dist_load_state_dict(&sd, g_dir);
  double v = ((float *)pd_tensor_data(t))[5];
  return v;
}

static void corrupt(const char *path) {
  int fd = open(path, O_WRONLY);
  assert_true(fd >= 0);
  assert_int_equal(pwrite(fd, "garbage!", 8, 0), 8);
  close(fd);
}

static void test_errors_and_crash_safety(void **state) {
  (void)state;
  make_dir();
  pd_scope_begin();
  pd_status st;
  /* nothing saved yet */
  load_one(&st);
  assert_int_equal(st, PD_ERR_IO);
  expect_msg("metadata' is missing", g_dir);

  assert_int_equal(save_one(1.5), PD_OK);
  assert_true(load_one(&st) == 1.5);
  assert_int_equal(st, PD_OK);

  /* a writer killed while writing its file: the previous checkpoint stays */
  pid_t pid = fork();
  if (pid == 0) {
    pd_safetensors_inject(PD_ST_INJECT_KILL, 20);
    save_one(2.5);
    _exit(0);
  }
  int ws;
  assert_int_equal(waitpid(pid, &ws, 0), pid);
  assert_true(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL);
  assert_true(load_one(&st) == 1.5);
  assert_int_equal(st, PD_OK);
  /* files of a save that never committed are ignored, then replaced */
  char path[400];
  snprintf(path, sizeof path, "%s/0_2.distcp", g_dir);
  FILE *f = fopen(path, "w");
  fputs("torn", f);
  fclose(f);
  assert_true(load_one(&st) == 1.5);
  assert_int_equal(save_one(3.5), PD_OK);
  assert_true(load_one(&st) == 3.5);
  assert_int_equal(count_files(".distcp"), 1);

  /* a key that is not there, a shape that differs, a Partial target */
  pd_tensor *t = pd_zeros(2, SHAPE(2, 3), PD_FLOAT32), *u = pd_zeros(1, SHAPE(6), PD_FLOAT32);
  assert_int_equal(
      pd_dist_load_state_dict(&(pd_named_tensors){1, (char *[]){"v"}, (pd_tensor *[]){t}}, g_dir),
      PD_ERR_INVALID);
  expect_msg("'v' is not in the checkpoint", g_dir);
  assert_int_equal(
      pd_dist_load_state_dict(&(pd_named_tensors){1, (char *[]){"w"}, (pd_tensor *[]){u}}, g_dir),
      PD_ERR_SHAPE);
  expect_msg("'w' has the global shape [2, 3]", "[6]");
  pd_dist_process_mesh *m = pd_dist_process_mesh_new(1, SHAPE(1), (const int[]){0}, NULL);
  pd_tensor *p = pd_dist_dtensor_from_local(t, m, (pd_dist_placement[]){pd_dist_partial(PD_REDUCE_SUM)}, 1);
  assert_int_equal(
      pd_dist_load_state_dict(&(pd_named_tensors){1, (char *[]){"w"}, (pd_tensor *[]){p}}, g_dir),
      PD_ERR_UNIMPLEMENTED);
  expect_msg("'w'", "Partial on mesh axis 0");
  assert_int_equal(
      pd_dist_save_state_dict(&(pd_named_tensors){1, (char *[]){"a\tb"}, (pd_tensor *[]){t}}, g_dir),
      PD_ERR_INVALID);
  expect_msg("holds a tab", NULL);
  assert_true(load_one(&st) == 3.5); /* the failed save committed nothing */

  /* a corrupt data file, a missing one, corrupt metadata: named */
  snprintf(path, sizeof path, "%s/0_2.distcp", g_dir);
  corrupt(path);
  load_one(&st);
  assert_true(st != PD_OK);
  expect_msg("load_state_dict", path);
  assert_int_equal(unlink(path), 0);
  load_one(&st);
  assert_int_equal(st, PD_ERR_IO);
  expect_msg("is missing", path);
  snprintf(path, sizeof path, "%s/metadata", g_dir);
  corrupt(path);
  load_one(&st);
  assert_true(st != PD_OK);
  expect_msg("load_state_dict", path);
  assert_int_equal(pd_dist_save_state_dict(NULL, g_dir), PD_ERR_INVALID);
  pd_dist_process_mesh_release(m);
  pd_scope_end();
  pd_clear_error();
  remove_dir();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_save_four_load_two_and_one),
      cmocka_unit_test(test_errors_and_crash_safety),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
