/* The launcher's environment contract (src/distributed/env) and pd_dist_spawn. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "distributed/env/launch_env.h"
#include "paddlec/distributed.h"
#include "test_util.h"

/* seed 002, fleetrun --gpus=0,1: the table of local process 0 */
static void test_table_matches_seed(void **state) {
  (void)state;
  pd_launch_env e;
  pd_launch_env_init(&e);
  assert_int_equal(pd_launch_env_set(&e, "PADDLE_CURRENT_ENDPOINT", "127.0.0.1:59664"), PD_OK);
  pd_launch_env_set(&e, "PADDLE_TRAINERS_NUM", "2");
  pd_launch_env_set(&e, "FLAGS_selected_gpus", "0");
  pd_launch_env_set(&e, "PADDLE_TRAINER_ENDPOINTS", "127.0.0.1:59664,127.0.0.1:48993");
  pd_launch_env_set(&e, "PADDLE_TRAINER_ID", "0");
  char *t = pd_launch_format_table(&e, pd_launch_table_keys, 5, "Distributed Envs", "Value");
  const char *want =
      "    +=======================================================================================+\n"
      "    |                        Distributed Envs                      Value                    |\n"
      "    +---------------------------------------------------------------------------------------+\n"
      "    |                 PADDLE_CURRENT_ENDPOINT                 127.0.0.1:59664               |\n"
      "    |                     PADDLE_TRAINERS_NUM                        2                      |\n"
      "    |                     FLAGS_selected_gpus                        0                      |\n"
      "    |                PADDLE_TRAINER_ENDPOINTS         127.0.0.1:59664,127.0.0.1:48993       |\n"
      "    |                       PADDLE_TRAINER_ID                        0                      |\n"
      "    +=======================================================================================+\n";
  assert_string_equal(t, want);
  free(t);
  /* seed 002 on two nodes: a long value is "... " + its last 41 characters
   * (the seed masks its ips as xx/yy, which shortened its row by 2) */
  pd_launch_env_set(&e, "PADDLE_TRAINER_ENDPOINTS",
                    "xx.xx.xx.xx:6070,xx.xx.xx.xx:6071,yy.yy.yy.yy:6070,yy.yy.yy.yy:6071");
  t = pd_launch_format_table(&e, pd_launch_table_keys + 3, 1, "Distributed Envs", "Value");
  assert_non_null(strstr(
      t,
      "\n    |                PADDLE_TRAINER_ENDPOINTS  ... xx:6071,yy.yy.yy.yy:6070,yy.yy.yy.yy:6071|\n"));
  free(t);
  /* a key longer than 40 widens the key column */
  pd_launch_env_set(&e, "A_VERY_LONG_ENVIRONMENT_VARIABLE_NAME_OF_45CH", "1");
  t = pd_launch_format_table(&e, NULL, 0, "Distributed Envs", "Value");
  assert_non_null(strstr(t, "    |A_VERY_LONG_ENVIRONMENT_VARIABLE_NAME_OF_45CH  "));
  assert_int_equal(strchr(t, '\n') - t, 4 + 1 + 45 + 2 + 45 + 1);
  free(t);
  pd_launch_env_clear(&e);
}

static void test_env_contract(void **state) {
  (void)state;
  char ip0[] = "10.0.0.1", ip1[] = "10.0.0.2";
  char *ips[] = {ip0, ip1};
  char **eps = NULL;
  assert_int_equal(pd_launch_endpoints(ips, 2, 2, 6070, &eps), PD_OK);
  assert_string_equal(eps[1], "10.0.0.1:6071");
  assert_string_equal(eps[2], "10.0.0.2:6070");
  char d0[] = "4", d1[] = "5", d2[] = "6", d3[] = "7";
  char *devs[] = {d0, d1, d2, d3};
  pd_launch_job job = {.nnodes = 2,
                       .node_rank = 1,
                       .nproc_per_node = 2,
                       .endpoints = eps,
                       .job_id = "j",
                       .job_key = "k1",
                       .devices = devs,
                       .ndevices = 4,
                       .omp_threads = 3};
  pd_launch_env e;
  pd_launch_env_init(&e);
  assert_int_equal(pd_launch_env_build(&job, 1, &e), PD_OK);
  struct {
    const char *k, *v;
  } want[] = {{"PADDLE_TRAINER_ID", "3"},
              {"PADDLE_TRAINERS_NUM", "4"},
              {"PADDLE_CURRENT_ENDPOINT", "10.0.0.2:6071"},
              {"PADDLE_TRAINER_ENDPOINTS", "10.0.0.1:6070,10.0.0.1:6071,10.0.0.2:6070,10.0.0.2:6071"},
              {"PADDLE_MASTER", "10.0.0.1:6070"},
              {"PADDLE_RANK_IN_NODE", "1"},
              {"PADDLE_LOCAL_RANK", "1"},
              {"PADDLE_GLOBAL_RANK", "3"},
              {"PADDLE_LOCAL_SIZE", "2"},
              {"PADDLE_GLOBAL_SIZE", "4"},
              {"PADDLE_NNODES", "2"},
              {"PADDLE_JOB_ID", "j"},
              {"FLAGS_selected_gpus", "6,7"}, /* 4 devices over 2 processes: a slice each */
              {"FLAGS_selected_accelerators", "6,7"},
              {"PADDLE_LOCAL_DEVICE_IDS", "6,7"},
              {"PADDLE_WORLD_DEVICE_IDS", "4:5:6:7,4:5:6:7"},
              {"PADDLE_GLOO_RENDEZVOUS", "3"},
              {"PADDLEC_JOB_KEY", "k1"},
              {"OMP_NUM_THREADS", "3"}};
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    const char *v = pd_launch_env_get(&e, want[i].k);
    if (!v || strcmp(v, want[i].v) != 0)
      fail_msg("%s = %s, want %s", want[i].k, v ? v : "(unset)", want[i].v);
  }
  assert_null(pd_launch_env_get(&e, "PADDLE_DISTRI_BACKEND")); /* devices given */
  assert_string_equal(e.keys[0], "PADDLE_CURRENT_ENDPOINT");   /* the table's order first */
  pd_launch_env_clear(&e);
  /* bad layouts are errors, not crashes */
  pd_launch_env_init(&e);
  assert_int_equal(pd_launch_env_build(&job, 2, &e), PD_ERR_INVALID);
  assert_non_null(strstr(pd_last_error(), "local rank 2 outside [0, 2)"));
  job.ndevices = 3;
  assert_int_equal(pd_launch_env_build(&job, 0, &e), PD_ERR_INVALID);
  assert_non_null(strstr(pd_last_error(), "3 device ids cannot be split over 2 processes"));
  pd_launch_env_clear(&e);
  pd_launch_strv_free(eps, 4);
}

static void test_free_ports_distinct(void **state) {
  (void)state;
  int ports[16];
  assert_int_equal(pd_launch_free_ports(16, ports), PD_OK);
  for (int i = 0; i < 16; i++) {
    assert_true(ports[i] > 0 && ports[i] < 65536);
    for (int j = 0; j < i; j++) assert_int_not_equal(ports[i], ports[j]);
  }
  assert_int_equal(pd_launch_free_ports(0, ports), PD_ERR_INVALID);
}

static void test_remove_shm(void **state) {
  (void)state;
  char key[128];
  pd_launch_make_job_key("t/x y", key, sizeof key);
  assert_null(strchr(key, '/'));
  assert_null(strchr(key, ' '));
  char mine[256], other[256];
  snprintf(mine, sizeof mine, "/dev/shm/paddlec-%s-seg0", key);
  snprintf(other, sizeof other, "/dev/shm/paddlec-%sX-seg0", key); /* another key that starts with ours */
  int fd = open(mine, O_CREAT | O_WRONLY, 0600);
  assert_true(fd >= 0);
  close(fd);
  fd = open(other, O_CREAT | O_WRONLY, 0600);
  assert_true(fd >= 0);
  close(fd);
  assert_int_equal(pd_launch_remove_shm(key), 1);
  assert_int_not_equal(access(mine, F_OK), 0);
  assert_int_equal(access(other, F_OK), 0);
  unlink(other);
}

/* ---- spawn ---- */
static int check_env(int rank, void *arg) {
  int n = *(int *)arg;
  const char *id = getenv("PADDLE_TRAINER_ID"), *num = getenv("PADDLE_TRAINERS_NUM");
  const char *eps = getenv("PADDLE_TRAINER_ENDPOINTS"), *cur = getenv("PADDLE_CURRENT_ENDPOINT");
  if (!id || atoi(id) != rank || !num || atoi(num) != n || !eps || !cur || !strstr(eps, cur))
    return 10 + rank;
  if (!getenv("PADDLEC_COMM_BACKEND") || strcmp(getenv("PADDLEC_COMM_BACKEND"), "shm") != 0) return 20;
  return 0;
}

static void test_spawn_ok(void **state) {
  (void)state;
  int n = 3;
  assert_int_equal(pd_dist_spawn(check_env, &n, 3, &(pd_dist_spawn_opts){.backend = "shm"}), PD_OK);
  /* a child whose env is wrong for what fn expects fails the call */
  n = 4;
  assert_int_equal(pd_dist_spawn(check_env, &n, 3, &(pd_dist_spawn_opts){.backend = "shm"}), PD_ERR_COMM);
  assert_non_null(strstr(pd_last_error(), "terminated with exit code 1"));
}

static int fail_rank1(int rank, void *arg) {
  (void)arg;
  if (rank == 1) return 7;
  sleep(30); /* must be terminated by spawn, not waited for */
  return 0;
}

static int crash_rank0(int rank, void *arg) {
  (void)arg;
  if (rank == 0) raise(SIGKILL);
  return 0;
}

static void test_spawn_failure(void **state) {
  (void)state;
  time_t t0 = time(NULL);
  assert_int_equal(pd_dist_spawn(fail_rank1, NULL, 2, NULL), PD_ERR_COMM);
  assert_string_equal(pd_last_error(), "Process 1 terminated with exit code 7.");
  assert_true(time(NULL) - t0 < 10);
  assert_int_equal(pd_dist_spawn(crash_rank0, NULL, 2, NULL), PD_ERR_COMM);
  assert_string_equal(pd_last_error(), "Process 0 terminated with signal SIGKILL.");
  assert_int_equal(pd_dist_spawn(NULL, NULL, 2, NULL), PD_ERR_INVALID);
}

static int count_procs(int rank, void *arg) {
  (void)arg;
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  return rank < ncpu && atoi(getenv("PADDLE_TRAINERS_NUM")) == (int)ncpu ? 0 : 1;
}

static void test_spawn_default_nprocs(void **state) {
  (void)state;
  assert_int_equal(pd_dist_spawn(count_procs, NULL, 0, NULL), PD_OK);
}

static int report_and_sleep(int rank, void *arg) {
  (void)rank;
  int fd = *(int *)arg;
  pid_t me = getpid();
  if (write(fd, &me, sizeof me) != (ssize_t)sizeof me) return 1;
  for (;;) pause(); /* until killed */
  return 0;
}

/* The spawning process dies with SIGKILL (it can stop nobody): its
 * children die with it instead of running on as orphans. */
static void test_spawn_children_die_with_parent(void **state) {
  (void)state;
  /* orphans are reparented to this process, so it can reap them */
  assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  int fds[2];
  assert_int_equal(pipe(fds), 0);
  fflush(NULL);
  pid_t parent = fork();
  assert_true(parent >= 0);
  if (parent == 0) {
    close(fds[0]);
    pd_dist_spawn(report_and_sleep, &fds[1], 2, NULL);
    _exit(0);
  }
  close(fds[1]);
  pid_t kids[2];
  for (int i = 0; i < 2; i++) assert_int_equal(read(fds[0], &kids[i], sizeof kids[i]), sizeof kids[i]);
  close(fds[0]);
  kill(parent, SIGKILL);
  assert_int_equal(waitpid(parent, NULL, 0), parent);
  int gone = 0;
  for (int waited = 0; waited < 5000 && gone < 2; waited += 10) {
    for (int i = 0; i < 2; i++) {
      int status;
      if (kids[i] > 0 && waitpid(kids[i], &status, WNOHANG) == kids[i]) {
        assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
        kids[i] = 0;
        gone++;
      }
    }
    usleep(10000);
  }
  for (int i = 0; i < 2; i++)
    if (kids[i] > 0) {
      kill(kids[i], SIGKILL);
      waitpid(kids[i], NULL, 0);
    }
  prctl(PR_SET_CHILD_SUBREAPER, 0);
  assert_int_equal(gone, 2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_table_matches_seed),
      cmocka_unit_test(test_env_contract),
      cmocka_unit_test(test_free_ports_distinct),
      cmocka_unit_test(test_remove_shm),
      cmocka_unit_test(test_spawn_ok),
      cmocka_unit_test(test_spawn_failure),
      cmocka_unit_test(test_spawn_default_nprocs),
      cmocka_unit_test(test_spawn_children_die_with_parent),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
