/* Shared segments of ranks started by hand (no fleetrun to remove them):
 * a group's first rank killed while the others are still mapping leaves
 * its segment; the next group created on the host removes it, and keeps
 * the segments of live creators and files it did not make. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "distributed/comm/shm_internal.h"
#include "test_util.h"

/* A process that creates group 0 of two ranks under `key` as its rank 0
 * and waits for a rank 1 that never comes. */
static pid_t start_lonely_creator(const char *key) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    int ranks[2] = {0, 1};
    pd_comm_init init = {.group_id = 0,
                         .rank = 0,
                         .nranks = 2,
                         .global_ranks = ranks,
                         .world_rank = 0,
                         .world_size = 2,
                         .job_key = key,
                         .timeout_s = 60};
    pd_comm_shm_create(&init);
    _exit(0);
  }
  return pid;
}

/* Waits until the segment at path carries its creator's stamp. */
static void wait_stamped(const char *path) {
  for (int i = 0; i < 1000; i++) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    uint64_t magic = 0;
    if (fd >= 0) {
      if (pread(fd, &magic, sizeof magic, 0) != (ssize_t)sizeof magic) magic = 0;
      close(fd);
    }
    if (magic == SHM_STAMP_MAGIC) return;
    usleep(10000);
  }
  fail_msg("%s never appeared with its stamp", path);
}

static int exists(const char *path) {
  struct stat sb;
  return stat(path, &sb) == 0;
}

static pid_t g_children[2];
static char dead_path[128], live_path[128], foreign[128];

/* Whatever the test left when it failed half way. */
static int teardown(void **state) {
  (void)state;
  for (int i = 0; i < 2; i++)
    if (g_children[i] > 0) {
      kill(g_children[i], SIGKILL);
      waitpid(g_children[i], NULL, 0);
      g_children[i] = 0;
    }
  unlink(dead_path);
  unlink(live_path);
  unlink(foreign);
  return 0;
}

static void test_stale_segments_removed(void **state) {
  (void)state;
  char dead_key[64], live_key[64], new_key[64];
  snprintf(dead_key, sizeof dead_key, "stale-%ld-dead", (long)getpid());
  snprintf(live_key, sizeof live_key, "stale-%ld-live", (long)getpid());
  snprintf(new_key, sizeof new_key, "stale-%ld-new", (long)getpid());
  snprintf(dead_path, sizeof dead_path, "/dev/shm/paddlec-%s-g0", dead_key);
  snprintf(live_path, sizeof live_path, "/dev/shm/paddlec-%s-g0", live_key);
  snprintf(foreign, sizeof foreign, "/dev/shm/paddlec-stale-%ld-foreign", (long)getpid());

  /* a creator killed while waiting for its peer leaves its segment. Any
   * other process creating a group on this host (a test running beside this
   * one, its own variant build included) may clean it up first: then the
   * scene is set again. */
  bool left = false;
  for (int attempt = 0; attempt < 20 && !left; attempt++) {
    pid_t dead = g_children[0] = start_lonely_creator(dead_key);
    assert_true(dead > 0);
    wait_stamped(dead_path);
    kill(dead, SIGKILL);
    assert_int_equal(waitpid(dead, NULL, 0), dead);
    g_children[0] = 0;
    left = exists(dead_path);
  }
  assert_true(left);
  /* one still waiting, and a file of someone else's making */
  pid_t live = g_children[1] = start_lonely_creator(live_key);
  assert_true(live > 0);
  wait_stamped(live_path);
  int fd = open(foreign, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, "not a segment of ours, 24 bytes", 24), 24);
  close(fd);

  /* the next group created on this host cleans up after the dead one */
  int ranks[1] = {0};
  pd_comm_init init = {.group_id = 0,
                       .rank = 0,
                       .nranks = 1,
                       .global_ranks = ranks,
                       .world_rank = 0,
                       .world_size = 1,
                       .job_key = new_key,
                       .timeout_s = 10};
  pd_comm *c = pd_comm_shm_create(&init);
  assert_non_null(c);
  assert_false(exists(dead_path));
  assert_true(exists(live_path));
  assert_true(exists(foreign));
  pd_comm_release(c);

  kill(live, SIGKILL);
  assert_int_equal(waitpid(live, NULL, 0), live);
  g_children[1] = 0;
  /* the helper on its own: the now-dead creator's segment goes too (or
   * went already, to another process's cleanup) */
  assert_true(shm_remove_stale_segments() >= 0);
  assert_false(exists(live_path));
  assert_true(exists(foreign));
  unlink(foreign);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(test_stale_segments_removed, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
