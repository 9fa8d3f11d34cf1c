/* The tests' scratch folder (temp_dir.h). */
#define _XOPEN_SOURCE 700
#include "temp_dir.h"

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char g_dir[64];

int temp_dir_setup(void **state) {
  (void)state;
  snprintf(g_dir, sizeof g_dir, "/tmp/paddlec_test_XXXXXX");
  return mkdtemp(g_dir) ? 0 : -1;
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb, (void)flag, (void)ftw;
  return remove(path);
}

int temp_dir_teardown(void **state) {
  (void)state;
  if (!g_dir[0]) return 0;
  return nftw(g_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS) == 0 ? 0 : -1;
}

const char *temp_dir(void) { return g_dir; }

const char *temp_path(const char *name) {
  static char buf[8][256];
  static int k;
  k = (k + 1) % 8;
  snprintf(buf[k], sizeof buf[k], "%s/%s", g_dir, name);
  return buf[k];
}
