/* The parallel environment: ParallelEnv parsing from the launcher's, mpirun's
 * and Slurm's variables, wrong environments, a one-rank world, and a small
 * two-rank job forked here (so the sanitizer build covers the shm backend). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dist_ranks.h"
#include "test_util.h"

static const char *const k_vars[] = {"PADDLE_TRAINER_ID",
                                     "PADDLE_TRAINERS_NUM",
                                     "PADDLE_TRAINER_ENDPOINTS",
                                     "PADDLE_CURRENT_ENDPOINT",
                                     "PADDLE_MASTER",
                                     "PADDLE_RANK_IN_NODE",
                                     "PADDLE_LOCAL_SIZE",
                                     "PADDLE_NNODES",
                                     "OMPI_COMM_WORLD_RANK",
                                     "OMPI_COMM_WORLD_SIZE",
                                     "OMPI_COMM_WORLD_LOCAL_RANK",
                                     "SLURM_PROCID",
                                     "SLURM_NTASKS",
                                     "SLURM_LOCALID",
                                     "MASTER_ADDR",
                                     "MASTER_PORT",
                                     "FLAGS_selected_gpus",
                                     "PMI_RANK",
                                     "PMI_SIZE",
                                     "PADDLE_LOCAL_RANK",
                                     "PADDLEC_COMM_BACKEND",
                                     "PADDLEC_COMM_TIMEOUT",
                                     "PADDLEC_COMM_WARN_INTERVAL",
                                     NULL};

static void clear_env(void) {
  for (int i = 0; k_vars[i]; i++) unsetenv(k_vars[i]);
}

static void test_paddle_launcher_env(void **state) {
  (void)state;
  clear_env();
  setenv("PADDLE_TRAINER_ID", "1", 1);
  setenv("PADDLE_TRAINERS_NUM", "2", 1);
  setenv("PADDLE_TRAINER_ENDPOINTS", "127.0.0.1:6170,127.0.0.1:6171", 1);
  setenv("PADDLE_CURRENT_ENDPOINT", "127.0.0.1:6171", 1);
  setenv("PADDLE_RANK_IN_NODE", "1", 1);
  setenv("FLAGS_selected_gpus", "3", 1);
  pd_dist_env e;
  assert_int_equal(pd_dist_parallel_env(&e), PD_OK);
  assert_int_equal(e.rank, 1);
  assert_int_equal(e.world_size, 2);
  assert_int_equal(e.local_rank, 1);
  assert_int_equal(e.device_id, 3);
  assert_int_equal(e.n_endpoints, 2);
  assert_string_equal(e.trainer_endpoints[1], "127.0.0.1:6171");
  assert_string_equal(e.current_endpoint, "127.0.0.1:6171");
  assert_string_equal(e.master, "127.0.0.1:6170"); /* the first endpoint without PADDLE_MASTER */
  assert_string_equal(e.master_from, "PADDLE_TRAINER_ENDPOINTS");
  assert_string_equal(e.launcher, "paddle");
  pd_dist_env_free(&e);
  setenv("PADDLE_MASTER", "10.0.0.1:7000", 1);
  assert_int_equal(pd_dist_parallel_env(&e), PD_OK);
  assert_string_equal(e.master, "10.0.0.1:7000");
  assert_string_equal(e.master_from, "PADDLE_MASTER");
  pd_dist_env_free(&e);
  setenv("MASTER_ADDR", "10.0.0.9", 1);
  setenv("MASTER_PORT", "1234", 1);
  assert_int_equal(pd_dist_parallel_env(&e), PD_OK);
  assert_string_equal(e.master, "10.0.0.9:1234");
  pd_dist_env_free(&e);
  /* without initialisation, rank and size come from the environment */
  assert_int_equal(pd_dist_get_rank(NULL), 1);
  assert_int_equal(pd_dist_get_world_size(NULL), 2);
  assert_false(pd_dist_is_initialized());
  clear_env();
}

static void test_mpirun_and_slurm_env(void **state) {
  (void)state;
  clear_env();
  setenv("OMPI_COMM_WORLD_RANK", "2", 1);
  setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
  setenv("OMPI_COMM_WORLD_LOCAL_RANK", "0", 1);
  pd_dist_env e;
  assert_int_equal(pd_dist_parallel_env(&e), PD_OK);
  assert_int_equal(e.rank, 2);
  assert_int_equal(e.world_size, 4);
  assert_int_equal(e.local_rank, 0);
  assert_string_equal(e.launcher, "mpirun");
  assert_string_equal(e.master, "");
  pd_dist_env_free(&e);
  clear_env();
  setenv("SLURM_PROCID", "5", 1);
  setenv("SLURM_NTASKS", "8", 1);
  setenv("SLURM_LOCALID", "1", 1);
  assert_int_equal(pd_dist_parallel_env(&e), PD_OK);
  assert_int_equal(e.rank, 5);
  assert_int_equal(e.world_size, 8);
  assert_int_equal(e.local_rank, 1);
  assert_string_equal(e.launcher, "slurm");
  pd_dist_env_free(&e);
  clear_env();
}

static void test_wrong_env(void **state) {
  (void)state;
  pd_dist_env e;
  clear_env();
  setenv("PADDLE_TRAINER_ID", "2", 1);
  setenv("PADDLE_TRAINERS_NUM", "2", 1);
  assert_true(pd_dist_parallel_env(&e) < 0);
  assert_non_null(strstr(pd_last_error(), "rank 2 (PADDLE_TRAINER_ID) must be < world size 2"));
  setenv("PADDLE_TRAINER_ID", "x1", 1);
  assert_true(pd_dist_parallel_env(&e) < 0);
  assert_non_null(strstr(pd_last_error(), "PADDLE_TRAINER_ID='x1'"));
  setenv("PADDLE_TRAINER_ID", "0", 1);
  setenv("PADDLE_TRAINER_ENDPOINTS", "127.0.0.1:1", 1);
  assert_true(pd_dist_parallel_env(&e) < 0);
  assert_non_null(strstr(pd_last_error(), "lists 1 endpoints but the world size is 2"));
  setenv("PADDLE_TRAINER_ENDPOINTS", "127.0.0.1:1,127.0.0.1:2", 1);
  setenv("PADDLE_CURRENT_ENDPOINT", "127.0.0.1:2", 1);
  assert_true(pd_dist_parallel_env(&e) < 0);
  assert_non_null(strstr(pd_last_error(), "PADDLE_CURRENT_ENDPOINT='127.0.0.1:2'"));
  /* endpoints missing: no master to meet at */
  unsetenv("PADDLE_TRAINER_ENDPOINTS");
  unsetenv("PADDLE_CURRENT_ENDPOINT");
  setenv("PADDLE_TRAINER_ID", "1", 1);
  assert_null(pd_dist_init_parallel_env(NULL));
  assert_non_null(
      strstr(pd_last_error(), "world size 2 (from the paddle environment) but no master endpoint"));
  setenv("PADDLE_TRAINER_ID", "0", 1);
  setenv("PADDLE_TRAINER_ENDPOINTS", "127.0.0.1:1,127.0.0.1:2", 1);
  setenv("PADDLE_CURRENT_ENDPOINT", "127.0.0.1:2", 1);
  /* init fails with the same message and leaves nothing initialised */
  assert_null(pd_dist_init_parallel_env(NULL));
  assert_false(pd_dist_is_initialized());
  clear_env();
  assert_null(pd_dist_init_parallel_env(&(pd_dist_init_opts){.backend = "nccl"}));
  assert_non_null(strstr(pd_last_error(), "unknown backend 'nccl'"));
  /* collectives before init */
  pd_tensor *t = pd_ones(1, SHAPE(3), PD_FLOAT32);
  assert_true(pd_dist_all_reduce(t, PD_REDUCE_SUM, NULL) < 0);
  assert_non_null(strstr(pd_last_error(), "not initialised"));
  pd_tensor_release(t);
  expect_no_live_tensors();
}

/* A port bound and not listened on: connecting to it is refused, and no
 * other process (another test running beside this one) can take it while
 * fd stays open. Returns the port, 0 on failure. */
static int bound_silent_port(int *fd) {
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t l = sizeof a;
  *fd = socket(AF_INET, SOCK_STREAM, 0);
  if (*fd < 0) return 0;
  if (bind(*fd, (struct sockaddr *)&a, sizeof a) < 0 || getsockname(*fd, (struct sockaddr *)&a, &l) < 0) {
    close(*fd);
    *fd = -1;
    return 0;
  }
  return ntohs(a.sin_port);
}

static void test_unreachable_master(void **state) {
  (void)state;
  clear_env();
  char m[64];
  int fd, port = bound_silent_port(&fd);
  assert_true(port > 0);
  snprintf(m, sizeof m, "127.0.0.1:%d", port);
  setenv("PADDLE_TRAINER_ID", "1", 1);
  setenv("PADDLE_TRAINERS_NUM", "2", 1);
  setenv("PADDLE_MASTER", m, 1);
  assert_null(pd_dist_init_parallel_env(&(pd_dist_init_opts){.timeout_s = 0.5}));
  assert_non_null(strstr(pd_last_error(), "rank 1 cannot reach the master"));
  assert_non_null(strstr(pd_last_error(), m));
  close(fd);
  clear_env();
}

static double mono_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Ports outside [1, 65535] (or no port) in any endpoint variable are an
 * error at once naming the variable and the value, not a wait for the
 * timeout. */
static void test_bad_ports(void **state) {
  (void)state;
  clear_env();
  pd_dist_env e;
  char eps[128], want[160];
  setenv("PADDLE_TRAINER_ID", "0", 1);
  setenv("PADDLE_TRAINERS_NUM", "2", 1);
  static const char *const bad[] = {"0", "65536", "99999", "", "80x", "-1", "100000000000000000000"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    snprintf(eps, sizeof eps, "127.0.0.1:6170,127.0.0.1:%s", bad[i]);
    setenv("PADDLE_TRAINER_ENDPOINTS", eps, 1);
    assert_int_equal(pd_dist_parallel_env(&e), PD_ERR_INVALID);
    snprintf(want, sizeof want, "PADDLE_TRAINER_ENDPOINTS entry 1 '127.0.0.1:%s': the port %s", bad[i],
             bad[i][0] ? "must be an integer in [1, 65535]" : "is missing");
    if (!strstr(pd_last_error(), want)) fail_msg("'%s' does not contain '%s'", pd_last_error(), want);
    double t0 = mono_s();
    assert_null(pd_dist_init_parallel_env(&(pd_dist_init_opts){.timeout_s = 30}));
    assert_true(mono_s() - t0 < 1.0);
    assert_non_null(strstr(pd_last_error(), want));
  }
  /* the ends of the range are ports */
  setenv("PADDLE_TRAINER_ENDPOINTS", "127.0.0.1:1,127.0.0.1:65535", 1);
  assert_int_equal(pd_dist_parallel_env(&e), PD_OK);
  pd_dist_env_free(&e);
  setenv("PADDLE_CURRENT_ENDPOINT", "127.0.0.1:99999", 1);
  assert_int_equal(pd_dist_parallel_env(&e), PD_ERR_INVALID);
  assert_non_null(strstr(pd_last_error(), "PADDLE_CURRENT_ENDPOINT='127.0.0.1:99999': the port must be"));
  unsetenv("PADDLE_CURRENT_ENDPOINT");
  unsetenv("PADDLE_TRAINER_ENDPOINTS");
  setenv("PADDLE_MASTER", "127.0.0.1:0", 1);
  assert_int_equal(pd_dist_parallel_env(&e), PD_ERR_INVALID);
  assert_non_null(
      strstr(pd_last_error(), "PADDLE_MASTER='127.0.0.1:0': the port must be an integer in [1, 65535]"));
  setenv("PADDLE_MASTER", "127.0.0.1", 1);
  assert_int_equal(pd_dist_parallel_env(&e), PD_ERR_INVALID);
  assert_non_null(strstr(pd_last_error(), "PADDLE_MASTER='127.0.0.1': it is not host:port"));
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  setenv("MASTER_PORT", "65536", 1);
  assert_int_equal(pd_dist_parallel_env(&e), PD_ERR_INVALID);
  assert_non_null(strstr(pd_last_error(), "MASTER_PORT='65536': the port must be an integer in [1, 65535]"));
  setenv("MASTER_PORT", "6170", 1);
  assert_int_equal(pd_dist_parallel_env(&e), PD_OK);
  assert_string_equal(e.master, "127.0.0.1:6170");
  assert_string_equal(e.master_from, "MASTER_ADDR/MASTER_PORT");
  pd_dist_env_free(&e);
  clear_env();
}

/* PADDLEC_COMM_TIMEOUT that is not a number of seconds > 0 is an error,
 * not the 1800 s default. */
static void test_bad_timeout(void **state) {
  (void)state;
  clear_env();
  static const char *const bad[] = {"-1", "0", "abc", "5s", "nan", "inf", "-inf", " "};
  char want[96];
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    setenv("PADDLEC_COMM_TIMEOUT", bad[i], 1);
    assert_null(pd_dist_init_parallel_env(NULL));
    assert_int_equal(pd_last_status(), PD_ERR_INVALID);
    snprintf(want, sizeof want, "init_parallel_env: PADDLEC_COMM_TIMEOUT='%s' is not a number of seconds > 0",
             bad[i]);
    if (!strstr(pd_last_error(), want)) fail_msg("'%s' does not contain '%s'", pd_last_error(), want);
    assert_false(pd_dist_is_initialized());
  }
  setenv("PADDLEC_COMM_TIMEOUT", "2.5", 1);
  assert_non_null(pd_dist_init_parallel_env(NULL));
  assert_int_equal(pd_dist_destroy_process_group(NULL), PD_OK);
  unsetenv("PADDLEC_COMM_TIMEOUT");
  assert_null(pd_dist_init_parallel_env(&(pd_dist_init_opts){.timeout_s = -1}));
  assert_non_null(strstr(pd_last_error(), "init_parallel_env: timeout_s -1 must be > 0"));
  assert_null(pd_dist_init_parallel_env(&(pd_dist_init_opts){.timeout_s = NAN}));
  assert_non_null(strstr(pd_last_error(), "must be > 0"));
  assert_non_null(pd_dist_init_parallel_env(NULL));
  assert_null(pd_dist_new_group(NULL, 0, &(pd_dist_new_group_opts){.timeout_s = -2}));
  assert_non_null(strstr(pd_last_error(), "new_group: timeout_s -2 must be > 0"));
  assert_int_equal(pd_dist_destroy_process_group(NULL), PD_OK);
  clear_env();
}

/* A socket on 127.0.0.1 that listens (connections complete in the
 * backlog) but never accepts: another program holding a port. */
static int hold_port(int *port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t l = sizeof a;
  assert_true(fd >= 0);
  assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
  assert_int_equal(listen(fd, 8), 0);
  assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &l), 0);
  *port = ntohs(a.sin_port);
  return fd;
}

/* Greets every connection as another server would (until the listening
 * socket is shut down). */
static void *chatty_holder(void *arg) {
  for (int fd; (fd = accept(*(int *)arg, NULL, NULL)) >= 0;) {
    static const char greeting[] = "SSH-2.0-OpenSSH_9.2\r\n";
    if (write(fd, greeting, sizeof greeting - 1) < 0) {
    }
    char buf[256];
    while (read(fd, buf, sizeof buf) > 0) {
    }
    close(fd);
  }
  return NULL;
}

/* Another program holds the master port: rank 0 cannot listen (at once),
 * rank 1 finds no paddle.c master there (within 3 s, not the timeout plus
 * 10 s). */
static void test_master_port_held(void **state) {
  (void)state;
  clear_env();
  int port;
  int ls = hold_port(&port);
  char m[64];
  snprintf(m, sizeof m, "127.0.0.1:%d", port);
  setenv("PADDLE_TRAINERS_NUM", "2", 1);
  setenv("PADDLE_MASTER", m, 1);
  setenv("PADDLE_TRAINER_ID", "1", 1);
  double t0 = mono_s();
  assert_null(pd_dist_init_parallel_env(&(pd_dist_init_opts){.timeout_s = 5}));
  double dt = mono_s() - t0;
  assert_true(dt < 4.5);
  char want[200];
  snprintf(want, sizeof want,
           "rank 1: the master endpoint %s (PADDLE_MASTER) accepted the connection but did not answer as a "
           "paddle.c rendezvous within 3 s",
           m);
  if (!strstr(pd_last_error(), want)) fail_msg("'%s' does not contain '%s'", pd_last_error(), want);
  setenv("PADDLE_TRAINER_ID", "0", 1);
  t0 = mono_s();
  assert_null(pd_dist_init_parallel_env(&(pd_dist_init_opts){.timeout_s = 5}));
  assert_true(mono_s() - t0 < 1.0);
  snprintf(want, sizeof want, "rank 0 cannot listen on the master endpoint %s (PADDLE_MASTER): %s", m,
           strerror(EADDRINUSE));
  if (!strstr(pd_last_error(), want)) fail_msg("'%s' does not contain '%s'", pd_last_error(), want);
  /* a holder that talks is recognised at once */
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, chatty_holder, &ls), 0);
  setenv("PADDLE_TRAINER_ID", "1", 1);
  t0 = mono_s();
  assert_null(pd_dist_init_parallel_env(&(pd_dist_init_opts){.timeout_s = 5}));
  assert_true(mono_s() - t0 < 1.0);
  snprintf(
      want, sizeof want,
      "rank 1: the master endpoint %s (PADDLE_MASTER) is held by another program: it answered with bytes "
      "that are not a paddle.c rendezvous",
      m);
  if (!strstr(pd_last_error(), want)) fail_msg("'%s' does not contain '%s'", pd_last_error(), want);
  shutdown(ls, SHUT_RDWR); /* ends the holder's accept */
  assert_int_equal(pthread_join(th, NULL), 0);
  close(ls);
  clear_env();
}

/* Runs fn with stderr going to a fresh file; returns what fn wrote there
 * (malloc'ed). */
static char *capture_stderr(void (*fn)(void *), void *arg) {
  char path[] = "/tmp/pd_stderr_XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  fflush(stderr);
  int saved = dup(2);
  dup2(fd, 2);
  fn(arg);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  off_t len = lseek(fd, 0, SEEK_END);
  char *text = calloc(1, (size_t)len + 1);
  assert_int_equal(pread(fd, text, (size_t)len, 0), len);
  close(fd);
  unlink(path);
  return text;
}

static void init_fails(void *timeout) {
  assert_null(pd_dist_init_parallel_env(&(pd_dist_init_opts){.timeout_s = *(double *)timeout}));
}

/* While the rendezvous waits, a warning every PADDLEC_COMM_WARN_INTERVAL
 * seconds names who is missing: the ranks that have not joined (rank 0),
 * the master (the others). */
static void test_rendezvous_warns_while_waiting(void **state) {
  (void)state;
  clear_env();
  char m[64];
  snprintf(m, sizeof m, "127.0.0.1:%d", dist_free_port());
  setenv("PADDLE_TRAINERS_NUM", "3", 1);
  setenv("PADDLE_MASTER", m, 1);
  setenv("PADDLEC_COMM_WARN_INTERVAL", "0.3", 1);
  setenv("PADDLE_TRAINER_ID", "0", 1);
  double timeout = 1.1;
  char *text = capture_stderr(init_fails, &timeout);
  char want[256];
  snprintf(
      want, sizeof want,
      "in init_parallel_env at the master %s (PADDLE_MASTER) for ranks 1, 2 to join; it gives up after 1 s",
      m);
  /* at 0.3, 0.6 and 0.9 s (a loaded machine may lose one) */
  int n = test_count_of(text, want);
  if (n < 2 || n > 3) fail_msg("expected 3 warnings '%s' in: %s", want, text);
  assert_non_null(strstr(text, "paddle.c warning: rank 0 (pid "));
  assert_non_null(strstr(pd_last_error(), "for ranks 1, 2 to join (1 of 3 joined)"));
  free(text);
  setenv("PADDLE_TRAINER_ID", "2", 1);
  text = capture_stderr(init_fails, &timeout);
  snprintf(want, sizeof want,
           "in init_parallel_env at the master %s (PADDLE_MASTER) for rank 0 to listen there", m);
  n = test_count_of(text, want);
  if (n < 2 || n > 3) fail_msg("expected 3 warnings '%s' in: %s", want, text);
  free(text);
  /* the interval is checked like the timeout */
  setenv("PADDLEC_COMM_WARN_INTERVAL", "-5", 1);
  assert_null(pd_dist_init_parallel_env(NULL));
  assert_non_null(strstr(
      pd_last_error(), "init_parallel_env: PADDLEC_COMM_WARN_INTERVAL='-5' is not a number of seconds > 0"));
  clear_env();
}

/* Rank 1 stays alive but never calls the all_reduce: rank 0 warns every
 * 0.4 s naming it, then fails at the timeout. */
static void stalled_all_reduce(void *arg) {
  int *rc = arg;
  pd_tensor *t = pd_ones(1, SHAPE(4), PD_FLOAT32);
  *rc = pd_dist_all_reduce(t, PD_REDUCE_SUM, NULL) == PD_ERR_COMM ? 0 : 30; /* t: the rank's scope frees it */
}

static int one_rank_stalls(int rank, void *arg) {
  (void)arg;
  if (rank == 1) {
    sleep(4); /* past rank 0's timeout */
    return 0;
  }
  int rc = 0;
  char *text = capture_stderr(stalled_all_reduce, &rc);
  int warnings = test_count_of(
      text, "in shm all_reduce(float32, 4 elements, SUM) #2 on group 0 for rank 1; it gives up after 2 s");
  if (rc == 0 && (warnings < 3 || warnings > 4)) { /* at 0.4, 0.8, 1.2 and 1.6 s */
    fprintf(stderr, "rank 0: %d warnings in: %s\n", warnings, text);
    rc = 31;
  }
  if (rc == 0 && !strstr(pd_last_error(), "missing (never arrived): rank 1")) rc = 32;
  free(text);
  return rc;
}

static void test_collective_warns_while_waiting(void **state) {
  (void)state;
  clear_env();
  setenv("PADDLEC_COMM_WARN_INTERVAL", "0.4", 1);
  int codes[2];
  dist_run_ranks(2, one_rank_stalls, NULL, 2.0, 30, codes);
  assert_int_equal(codes[0], 0);
  assert_int_equal(codes[1], 0);
  clear_env();
}

static void test_one_rank_world(void **state) {
  (void)state;
  clear_env();
  pd_dist_group *w = pd_dist_init_parallel_env(NULL);
  assert_non_null(w);
  assert_true(pd_dist_is_initialized());
  assert_ptr_equal(pd_dist_init_parallel_env(NULL), w); /* idempotent */
  assert_int_equal(pd_dist_get_rank(NULL), 0);
  assert_int_equal(pd_dist_get_world_size(w), 1);
  assert_string_equal(pd_dist_group_backend(w), "shm");
  pd_scope_begin();
  pd_tensor *t = T(PD_FLOAT32, 1, SHAPE(3), 1, 2, 3);
  assert_int_equal(pd_dist_all_reduce(t, PD_REDUCE_AVG, NULL), PD_OK);
  EXPECT_VALUES(t, 0, 1, 2, 3);
  pd_tensor *list[1] = {NULL};
  assert_int_equal(pd_dist_all_gather(list, t, NULL), PD_OK);
  EXPECT_VALUES(list[0], 0, 1, 2, 3); /* new tensors belong to the open scope */
  /* a shared tensor is an ordinary, zero-filled tensor to the user */
  pd_tensor *z = pd_dist_alloc_shared(NULL, PD_FLOAT64, 2, SHAPE(2, 2));
  assert_non_null(z);
  EXPECT_VALUES(z, 0, 0, 0, 0, 0);
  assert_int_equal(pd_dist_all_reduce(z, PD_REDUCE_SUM, NULL), PD_OK);
  pd_scope_end();
  /* bad arguments: errors, no crash */
  assert_true(pd_dist_all_reduce(NULL, PD_REDUCE_SUM, NULL) < 0);
  assert_non_null(strstr(pd_last_error(), "tensor is NULL"));
  {
    pd_tensor *b = T(PD_FLOAT32, 1, SHAPE(2), 1, 2);
    assert_true(pd_dist_broadcast(b, 4, NULL) < 0);
    assert_non_null(strstr(pd_last_error(), "broadcast: src 4 is not a member of group"));
    assert_true(pd_dist_reduce(b, -1, PD_REDUCE_SUM, NULL) < 0);
    assert_non_null(strstr(pd_last_error(), "reduce: dst -1 is not a member"));
    assert_true(pd_dist_reduce(b, 0, (pd_reduce_op)7, NULL) < 0);
    assert_non_null(strstr(pd_last_error(), "reduce: reduce op 7 is not one of"));
    assert_true(pd_dist_scatter(b, NULL, 0, NULL) < 0);
    assert_non_null(strstr(pd_last_error(), "scatter: the source rank 0 needs tensor_list"));
    pd_tensor *none[1] = {NULL};
    assert_true(pd_dist_scatter(b, none, 0, NULL) < 0);
    assert_non_null(strstr(pd_last_error(), "scatter: tensor_list[0] is NULL"));
    assert_true(pd_dist_gather(b, NULL, 0, NULL) < 0);
    assert_non_null(strstr(pd_last_error(), "gather: the destination rank 0 needs gather_list"));
    assert_true(pd_dist_reduce_scatter(b, none, PD_REDUCE_SUM, NULL) < 0);
    assert_non_null(strstr(pd_last_error(), "reduce_scatter: tensor_list[0] is NULL"));
    /* and the same calls with good arguments on the one-rank world */
    pd_tensor *one[1] = {T(PD_FLOAT32, 1, SHAPE(2), 5, 6)};
    assert_int_equal(pd_dist_scatter(b, one, 0, NULL), PD_OK);
    EXPECT_VALUES(b, 0, 5, 6);
    assert_int_equal(pd_dist_reduce(b, 0, PD_REDUCE_MAX, NULL), PD_OK);
    EXPECT_VALUES(b, 0, 5, 6);
    pd_tensor *got[1] = {NULL};
    assert_int_equal(pd_dist_gather(b, got, 0, NULL), PD_OK);
    EXPECT_VALUES(got[0], 0, 5, 6);
    pd_tensor_release(got[0]);
    pd_tensor_release(one[0]);
    pd_tensor_release(b);
  }
  assert_null(pd_dist_new_group((int[]){0, 0}, 2, NULL));
  assert_non_null(strstr(pd_last_error(), "rank 0 is listed twice"));
  assert_null(pd_dist_new_group((int[]){3}, 1, NULL));
  assert_non_null(strstr(pd_last_error(), "rank 3 is out of range"));
  /* a shared tensor may outlive its group: its memory stays valid */
  pd_tensor *keep = pd_dist_alloc_shared(NULL, PD_FLOAT32, 1, SHAPE(1000));
  assert_non_null(keep);
  assert_int_equal(pd_dist_destroy_process_group(NULL), PD_OK);
  assert_false(pd_dist_is_initialized());
  ((float *)pd_tensor_data(keep))[999] = 7.0f;
  assert_true(pd_tensor_item_at(keep, 999) == 7.0);
  pd_tensor_release(keep);
  expect_no_live_tensors();
}

/* Two ranks forked from here run a few collectives on the shm backend. */
static int child(int rank, void *arg) {
  (void)arg;
  int rc = 0;
  int64_t n = 70000; /* several staging chunks */
  pd_tensor *t = pd_full(1, SHAPE(n), (double)(rank + 1), PD_FLOAT32);
  if (pd_dist_all_reduce(t, PD_REDUCE_SUM, NULL) < 0 || pd_tensor_item_at(t, n - 1) != 3.0) rc = 11;
  pd_tensor *s = pd_dist_alloc_shared(NULL, PD_FLOAT32, 1, SHAPE(n));
  float *p = pd_tensor_data(s);
  for (int64_t i = 0; i < n; i++) p[i] = (float)(rank * 2 + 1);
  pd_dist_task *task = NULL;
  if (pd_dist_all_reduce(s, PD_REDUCE_MAX, &(pd_dist_opts){.task = &task}) < 0 ||
      pd_dist_task_wait(task) < 0 || p[0] != 3.0f || p[n - 1] != 3.0f)
    rc = 12;
  pd_dist_task_release(task);
  pd_tensor *r = pd_zeros(1, SHAPE(5), PD_INT64);
  pd_tensor *snd = pd_full(1, SHAPE(5), 40 + rank, PD_INT64);
  pd_dist_task *ts = NULL, *tr = NULL;
  if (pd_dist_isend(snd, 1 - rank, NULL, &ts) < 0 || pd_dist_irecv(r, 1 - rank, NULL, &tr) < 0 ||
      pd_dist_task_wait(ts) < 0 || pd_dist_task_wait(tr) < 0 || pd_tensor_item_at(r, 4) != 41 - rank)
    rc = 13;
  pd_dist_task_release(ts);
  pd_dist_task_release(tr);
  return rc;
}

static void test_two_ranks(void **state) {
  (void)state;
  clear_env();
  int codes[2];
  dist_run_ranks(2, child, NULL, 30, 60, codes);
  assert_int_equal(codes[0], 0);
  assert_int_equal(codes[1], 0);
  clear_env();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_paddle_launcher_env),
      cmocka_unit_test(test_mpirun_and_slurm_env),
      cmocka_unit_test(test_wrong_env),
      cmocka_unit_test(test_unreachable_master),
      cmocka_unit_test(test_one_rank_world),
      cmocka_unit_test(test_two_ranks),
      cmocka_unit_test(test_bad_ports),
      cmocka_unit_test(test_bad_timeout),
      cmocka_unit_test(test_master_port_held),
      cmocka_unit_test(test_rendezvous_warns_while_waiting),
      cmocka_unit_test(test_collective_warns_while_waiting),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
